//! The memoryless planner: steepest descent of the squared deviation, then swaps.

use super::{BucketMove, RebalanceConfig, RebalanceError, RebalanceInput, RebalanceReport};

/// Working memory, kept by [`super::Rebalancer`] so a period allocates nothing once warm.
#[derive(Clone, Debug, Default)]
pub(super) struct Scratch {
    /// Planned load of each shard (u128: 2,048 buckets of u64 plus a u64 cannot overflow).
    loads: Vec<u128>,
    /// Buckets already moved this period.
    moved: Vec<bool>,
    /// Per shard: the lightest other shard and the gap to it, exact and as f64.
    gaps: Vec<Gap>,
    /// `(load, bucket)` of the swap candidates on the idlest shard, sorted.
    lighter: Vec<(u64, usize)>,
}

/// Where a shard's buckets would go, and how much lighter that shard is.
#[derive(Clone, Copy, Debug, Default)]
struct Gap {
    to: u16,
    exact: u128,
    approx: f64,
}

/// Plans this period's moves from `input` alone (no smoothing, no cooldown: see
/// [`super::Rebalancer`] for those). Same as [`plan_moves_into`] with a fresh `Vec`.
pub fn plan_moves(
    config: &RebalanceConfig,
    input: &RebalanceInput<'_>,
) -> Result<Vec<BucketMove>, RebalanceError> {
    let mut moves = Vec::new();
    plan_moves_into(config, input, &mut moves)?;
    Ok(moves)
}

/// Plans this period's moves from `input` alone into `moves` (cleared first), in the order to
/// apply them, and reports the imbalance before and as planned. The moves satisfy every
/// invariant listed in the [module documentation](crate::rebalance); `moves` is left empty on an error.
pub fn plan_moves_into(
    config: &RebalanceConfig,
    input: &RebalanceInput<'_>,
    moves: &mut Vec<BucketMove>,
) -> Result<RebalanceReport, RebalanceError> {
    plan_with(config, input, &mut Scratch::default(), moves)
}

/// One step of the descent.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Move `bucket` of load `load` from shard `from` to shard `to`.
    Single {
        score: f64,
        bucket: usize,
        load: u64,
        from: u16,
        to: u16,
    },
    /// Exchange `heavy` (on `from`) with `light` (on `to`): `from` sheds `heavy − light`.
    Swap {
        score: f64,
        heavy: usize,
        light: usize,
        shed: u64,
        from: u16,
        to: u16,
    },
}

impl Step {
    fn score(&self) -> f64 {
        match *self {
            Step::Single { score, .. } | Step::Swap { score, .. } => score,
        }
    }
}

/// What every candidate needs: the input, the planned shard loads, and how to score.
struct View<'i, 'a> {
    input: &'i RebalanceInput<'a>,
    /// `1 / mean²`: turns a fall of the squared deviation into the dimensionless benefit.
    scale: f64,
    cost_factor: f64,
}

impl View<'_, '_> {
    fn movable(&self, bucket: usize, moved: &[bool]) -> bool {
        !moved.get(bucket).copied().unwrap_or(true)
            && !self
                .input
                .bucket_frozen
                .and_then(|f| f.get(bucket).copied())
                .unwrap_or(false)
    }

    fn cost(&self, bucket: usize) -> u64 {
        self.input
            .bucket_costs
            .and_then(|c| c.get(bucket).copied())
            .unwrap_or(0)
    }

    /// Net score of shedding `shed` from a shard to one `gap` lighter (`0 < shed < gap`, so
    /// the squared deviation falls by `2·shed·(gap − shed)`), or `None` unless the benefit
    /// exceeds `cost × factor`. The exact test is in integers; `gap_approx` is `gap` as f64.
    fn score(&self, shed: u64, gap: u128, gap_approx: f64, cost: u64) -> Option<f64> {
        if shed == 0 || u128::from(shed) >= gap {
            return None;
        }
        let shed = shed as f64;
        let benefit = 2.0 * shed * (gap_approx - shed) * self.scale;
        let charge = self.cost_factor * cost as f64;
        (benefit > charge).then_some(benefit - charge)
    }
}

fn load_of(loads: &[u128], shard: u16) -> u128 {
    loads.get(usize::from(shard)).copied().unwrap_or(0)
}

/// `(lightest, second lightest)` shard, lowest index on ties; `loads.len() ≥ 2`.
fn two_lightest(loads: &[u128]) -> (u16, u16) {
    let mut first: (u128, u16) = (u128::MAX, 0);
    let mut second: (u128, u16) = (u128::MAX, 0);
    for (s, &l) in loads.iter().enumerate() {
        // s < REBALANCE_SHARDS_MAX (validated): fits in u16.
        let entry = (l, s as u16);
        if entry.0 < first.0 {
            second = first;
            first = entry;
        } else if entry.0 < second.0 {
            second = entry;
        }
    }
    (first.1, second.1)
}

/// Heaviest shard, lowest index on ties.
fn heaviest(loads: &[u128]) -> u16 {
    let mut best: (u128, u16) = (0, 0);
    for (s, &l) in loads.iter().enumerate() {
        if l > best.0 {
            best = (l, s as u16);
        }
    }
    best.1
}

/// The best single move: for each movable bucket the best destination is the lightest other
/// shard (the fall `2·w·(gap − w)` grows with the gap), the same for every bucket of a shard.
/// Ties go to the lowest bucket.
fn best_single(
    view: &View<'_, '_>,
    loads: &[u128],
    moved: &[bool],
    gaps: &mut Vec<Gap>,
) -> Option<Step> {
    let (lightest, second) = two_lightest(loads);
    gaps.clear();
    gaps.extend(loads.iter().enumerate().map(|(from, &l)| {
        let to = if from == usize::from(lightest) {
            second
        } else {
            lightest
        };
        let exact = l.saturating_sub(load_of(loads, to));
        Gap {
            to,
            exact,
            approx: exact as f64,
        }
    }));
    let mut best: Option<Step> = None;
    let buckets = view.input.bucket_loads.iter().zip(view.input.assignment);
    for (bucket, (&load, &from)) in buckets.enumerate() {
        let Some(gap) = gaps.get(usize::from(from)) else {
            continue;
        };
        if load == 0 || u128::from(load) >= gap.exact || !view.movable(bucket, moved) {
            continue;
        }
        let Some(score) = view.score(load, gap.exact, gap.approx, view.cost(bucket)) else {
            continue;
        };
        if best.is_none_or(|b| score > b.score()) {
            best = Some(Step::Single {
                score,
                bucket,
                load,
                from,
                to: gap.to,
            });
        }
    }
    best
}

/// The best swap between the heaviest and the lightest shard: bucket `x` there for bucket `y`
/// here, shedding `d = w_x − w_y`, best at `d = gap / 2`. For each `x` only the two `y`s whose
/// loads bracket `w_x − gap/2` are scored (the fall is concave in `d`). Used when no single
/// move helps, i.e. every movable bucket on the heaviest shard is at least the gap.
fn best_swap(
    view: &View<'_, '_>,
    loads: &[u128],
    moved: &[bool],
    lighter: &mut Vec<(u64, usize)>,
) -> Option<Step> {
    let from = heaviest(loads);
    let (to, _) = two_lightest(loads);
    let gap = load_of(loads, from).saturating_sub(load_of(loads, to));
    if from == to || gap < 2 {
        return None;
    }
    let input = view.input;
    lighter.clear();
    lighter.extend(
        input
            .bucket_loads
            .iter()
            .zip(input.assignment)
            .enumerate()
            .filter(|&(y, (_, &owner))| owner == to && view.movable(y, moved))
            .map(|(y, (&w, _))| (w, y)),
    );
    lighter.sort_unstable();
    let gap_i = i128::try_from(gap).ok()?;
    let gap_approx = gap as f64;
    let mut best: Option<Step> = None;
    let heavy = input.bucket_loads.iter().zip(input.assignment).enumerate();
    for (x, (&wx, &owner)) in heavy {
        if owner != from || wx == 0 || !view.movable(x, moved) {
            continue;
        }
        // First candidate with 2·w_y ≥ 2·w_x − gap, and the one before it.
        let target = 2 * i128::from(wx) - gap_i;
        let at = lighter.partition_point(|&(wy, _)| 2 * i128::from(wy) < target);
        for j in [at.checked_sub(1), Some(at)].into_iter().flatten() {
            let Some(&(wy, y)) = lighter.get(j) else {
                continue;
            };
            let Some(shed) = wx.checked_sub(wy) else {
                continue;
            };
            let cost = view.cost(x).saturating_add(view.cost(y));
            let Some(score) = view.score(shed, gap, gap_approx, cost) else {
                continue;
            };
            if best.is_none_or(|b| score > b.score()) {
                best = Some(Step::Swap {
                    score,
                    heavy: x,
                    light: y,
                    shed,
                    from,
                    to,
                });
            }
        }
    }
    best
}

/// Moves `shed` of planned load from shard `from` to shard `to`.
fn shift(loads: &mut [u128], from: u16, to: u16, shed: u64) {
    if let Some(l) = loads.get_mut(usize::from(from)) {
        *l = l.saturating_sub(shed.into());
    }
    if let Some(l) = loads.get_mut(usize::from(to)) {
        *l = l.saturating_add(shed.into());
    }
}

fn mark(moved: &mut [bool], bucket: usize) {
    if let Some(m) = moved.get_mut(bucket) {
        *m = true;
    }
}

/// The planner proper, on caller-kept scratch memory.
pub(super) fn plan_with(
    config: &RebalanceConfig,
    input: &RebalanceInput<'_>,
    scratch: &mut Scratch,
    moves: &mut Vec<BucketMove>,
) -> Result<RebalanceReport, RebalanceError> {
    moves.clear();
    config.validate()?;
    input.validate()?;
    let shards = input.shards;
    let loads = &mut scratch.loads;
    loads.clear();
    match input.shard_external_loads {
        Some(external) => loads.extend(external.iter().map(|&l| u128::from(l))),
        None => loads.resize(shards, 0),
    }
    for (&load, &shard) in input.bucket_loads.iter().zip(input.assignment) {
        if let Some(l) = loads.get_mut(usize::from(shard)) {
            *l += u128::from(load);
        }
    }
    let total: u128 = loads.iter().sum();
    let max = |loads: &[u128]| loads.iter().copied().max().unwrap_or(0);
    let before = super::imbalance_of(max(loads), total, shards);
    let triggered = before > config.imbalance_threshold;
    let mut report = RebalanceReport {
        imbalance_before: before,
        imbalance_planned: before,
        triggered,
    };
    // Triggered implies total > 0 and at least 2 shards (one shard is always at 1.0).
    if !triggered || config.moves_max == 0 {
        return Ok(report);
    }
    let mean = total as f64 / shards as f64;
    let view = View {
        input,
        scale: 1.0 / (mean * mean),
        cost_factor: config.move_cost_factor,
    };
    scratch.moved.clear();
    scratch.moved.resize(input.bucket_loads.len(), false);
    let mut planned = before;
    while moves.len() < config.moves_max && planned > config.imbalance_target {
        let swap_fits = moves.len() + 2 <= config.moves_max;
        let step = best_single(&view, loads, &scratch.moved, &mut scratch.gaps).or_else(|| {
            swap_fits
                .then(|| best_swap(&view, loads, &scratch.moved, &mut scratch.lighter))
                .flatten()
        });
        match step {
            None => break,
            Some(Step::Single {
                bucket,
                load,
                from,
                to,
                ..
            }) => {
                shift(loads, from, to, load);
                mark(&mut scratch.moved, bucket);
                moves.push(BucketMove { bucket, from, to });
            }
            Some(Step::Swap {
                heavy,
                light,
                shed,
                from,
                to,
                ..
            }) => {
                shift(loads, from, to, shed);
                mark(&mut scratch.moved, heavy);
                mark(&mut scratch.moved, light);
                moves.push(BucketMove {
                    bucket: heavy,
                    from,
                    to,
                });
                moves.push(BucketMove {
                    bucket: light,
                    from: to,
                    to: from,
                });
            }
        }
        planned = super::imbalance_of(max(loads), total, shards);
    }
    report.imbalance_planned = planned;
    Ok(report)
}
