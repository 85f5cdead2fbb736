//! [`Periodic`]: the rebalancer as a driver runs it — once per period, on the NIC's per-bucket
//! load, with buckets that are still moving frozen — kept here so the threaded runtime and the
//! simulator drive the same code.

use super::{BucketMove, RebalanceConfig, RebalanceConfigError, RebalanceInput, Rebalancer};

/// Most imbalance samples kept (the first ones; one per period with traffic).
pub const IMBALANCE_SAMPLES_MAX: usize = 10_000;

/// What a periodic rebalancer did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeriodicReport {
    /// Periods looked at.
    pub periods: u64,
    /// Periods whose load triggered a plan.
    pub periods_triggered: u64,
    /// Moves planned (the driver may still refuse some: a bucket still moving).
    pub moves_planned: u64,
    /// (time in ms, imbalance = busiest shard's load over the mean) per period with load, at
    /// most [`IMBALANCE_SAMPLES_MAX`].
    pub imbalance: Vec<(u64, f64)>,
}

/// Runs a [`Rebalancer`] once per `period_ns`. Invariant: a bucket it planned a move for is
/// frozen (never planned again) for `freeze_periods` periods, so a move in flight is never
/// overtaken by another move of the same bucket.
#[derive(Debug)]
pub struct Periodic {
    rebalancer: Rebalancer,
    period_ns: u64,
    freeze_periods: u64,
    next_ns: u64,
    frozen_until_ns: Vec<u64>,
    frozen: Vec<bool>,
    moves: Vec<BucketMove>,
    report: PeriodicReport,
}

impl Periodic {
    /// A rebalancer that plans every `period_ns` (at least 1 ns), the first time one period
    /// after time 0.
    pub fn new(config: RebalanceConfig, period_ns: u64) -> Result<Self, RebalanceConfigError> {
        let period_ns = period_ns.max(1);
        Ok(Periodic {
            rebalancer: Rebalancer::new(config)?,
            period_ns,
            freeze_periods: 4,
            next_ns: period_ns,
            frozen_until_ns: Vec::new(),
            frozen: Vec::new(),
            moves: Vec::new(),
            report: PeriodicReport::default(),
        })
    }

    /// When the next period is due.
    pub fn next_ns(&self) -> u64 {
        self.next_ns
    }

    /// What it did so far.
    pub fn report(&self) -> &PeriodicReport {
        &self.report
    }

    /// At `now_ns`, if a period is due: plans moves from `bucket_loads` (the load each RETA
    /// entry carried since the last call; the caller then resets its counters) over
    /// `assignment` (the RETA: bucket → shard) and `shards`. Returns the moves to start
    /// (empty when no period is due, nothing is worth moving, or the input is inconsistent).
    pub fn tick(
        &mut self,
        now_ns: u64,
        bucket_loads: &[u64],
        assignment: &[u16],
        shards: usize,
    ) -> &[BucketMove] {
        self.moves.clear();
        if now_ns < self.next_ns {
            return &self.moves;
        }
        self.next_ns = now_ns.saturating_add(self.period_ns);
        self.report.periods += 1;
        let n = assignment.len();
        self.frozen_until_ns.resize(n, 0);
        self.frozen.clear();
        self.frozen
            .extend(self.frozen_until_ns.iter().map(|&t| now_ns < t));
        let mut input = RebalanceInput::new(bucket_loads, assignment, shards);
        input.bucket_frozen = Some(&self.frozen);
        if let Ok(loads) = super::shard_loads(&input) {
            if loads.iter().any(|&l| l > 0) && self.report.imbalance.len() < IMBALANCE_SAMPLES_MAX {
                self.report
                    .imbalance
                    .push((now_ns / 1_000_000, super::imbalance(&loads)));
            }
        }
        let Ok(r) = self.rebalancer.plan_into(&input, &mut self.moves) else {
            self.moves.clear();
            return &self.moves;
        };
        if r.triggered {
            self.report.periods_triggered += 1;
        }
        let until = now_ns.saturating_add(self.period_ns.saturating_mul(self.freeze_periods));
        for m in &self.moves {
            if let Some(t) = self.frozen_until_ns.get_mut(m.bucket) {
                *t = until;
            }
        }
        self.report.moves_planned += self.moves.len() as u64;
        &self.moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_once_per_period_and_freezes_what_it_moved() {
        let mut p = Periodic::new(RebalanceConfig::default(), 100).expect("valid");
        let mut loads = vec![0u64; 8];
        loads[0] = 1000;
        loads[2] = 1000;
        loads[4] = 1000;
        let assignment = [0u16, 1, 0, 1, 0, 1, 0, 1];
        assert!(p.tick(50, &loads, &assignment, 2).is_empty(), "not due yet");
        let moved: Vec<usize> = p
            .tick(100, &loads, &assignment, 2)
            .iter()
            .map(|m| m.bucket)
            .collect();
        assert!(!moved.is_empty(), "three heavy buckets on shard 0 move");
        // Due again, same load and RETA (the moves not applied yet): the moved buckets are
        // frozen, so they are not planned again.
        let again: Vec<usize> = p
            .tick(200, &loads, &assignment, 2)
            .iter()
            .map(|m| m.bucket)
            .collect();
        assert!(
            again.iter().all(|b| !moved.contains(b)),
            "{moved:?} {again:?}"
        );
        assert_eq!(p.report().periods, 2);
        assert!(p.report().imbalance.first().is_some_and(|&(_, x)| x > 1.4));
    }
}
