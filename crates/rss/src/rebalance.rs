//! Pure RETA rebalancing: per-bucket load in, a bounded list of bucket moves out.
//!
//! Every period the caller measures the load of each RETA bucket (packets, bytes or busy
//! nanoseconds; the unit is the caller's choice, for example the NIC model's per-bucket packet
//! counters, `nic::Nic::reta_bucket_packets`) and asks for moves. [`plan_moves`] is the
//! memoryless planner. [`Rebalancer`] wraps it with the state that stops oscillation: an EWMA
//! of each bucket's load across periods, and a cooldown that pins a bucket that has just
//! moved. Nothing here reads a clock, spawns a thread or draws a random number; the same input
//! always gives the same moves.
//!
//! # The algorithm
//!
//! It starts from RSS++ (Barbette et al., CoNEXT 2019): while a shard is overloaded, move
//! buckets from heavy shards to light ones and minimise the squared deviation of the shard
//! loads from their mean. On top of that:
//!
//! - **Hysteresis band.** Nothing happens while the imbalance (max shard load / mean shard
//!   load) is at or below [`RebalanceConfig::imbalance_threshold`]. Once triggered, the planner
//!   keeps going until the planned imbalance is at or below
//!   [`RebalanceConfig::imbalance_target`] (lower than the threshold), so a shard just over the
//!   threshold is not nudged back to just under it period after period.
//! - **Steepest descent, no overshoot.** Each step takes the single move with the largest net
//!   score. Moving a bucket of load `w` from shard `s` to shard `t` changes the sum of squared
//!   deviations by `2·w·(w − (L_s − L_t))`: the move is allowed only when `L_s − L_t > w` (the
//!   sum strictly falls: exact, in integers) and it is best when `w` is half the gap, the load
//!   that fills the gap between the two shards without overshooting. For a given bucket the best
//!   destination is therefore always the least-loaded other shard.
//! - **Move cost.** A move's benefit, the fall of `Σ (L_s / mean − 1)²` (dimensionless, so the
//!   same config works whatever the load unit), must exceed the bucket's cost (e.g. its live
//!   connections) × [`RebalanceConfig::move_cost_factor`]; the net score is benefit − that.
//! - **Swaps at the granularity limit.** When no single move helps (every movable bucket on the
//!   busiest shard is bigger than the gap to the idlest), the planner tries exchanging one
//!   bucket of each, which moves only their difference. Shards `{5, 5}` vs `{3, 3}` balance
//!   perfectly that way; RSS++'s moves cannot.
//! - **Bounds.** At most [`RebalanceConfig::moves_max`] moves per period (a swap is two).
//!
//! A call costs `O(moves_max · (buckets + shards))`, plus a sort of one shard's buckets when
//! a swap is looked for; [`Rebalancer`] reuses its memory, so once warm a period allocates
//! only if the caller's `moves` must grow.
//!
//! # Example
//!
//! ```
//! use rss::{RebalanceConfig, RebalanceInput, Rebalancer, Reta, imbalance, shard_loads};
//!
//! // 128 buckets over 4 shards; four heavy buckets all land on shard 0.
//! let mut reta = Reta::with_equal(128, 4)?;
//! let mut packets = vec![10u64; 128];
//! for bucket in [0, 4, 8, 12] {
//!     packets[bucket] = 300;
//! }
//! let mut rebalancer = Rebalancer::new(RebalanceConfig::default())?;
//! let mut moves = Vec::new();
//! for _period in 0..4 {
//!     // In the runtime: packets = nic.reta_bucket_packets(), then reset them.
//!     let input = RebalanceInput::new(&packets, reta.entries(), 4);
//!     rebalancer.plan_into(&input, &mut moves)?;
//!     for m in &moves {
//!         // In the runtime: hold the bucket's packets on `m.to`, migrate its connections.
//!         reta.set(m.bucket, m.to)?;
//!     }
//! }
//! let loads = shard_loads(&RebalanceInput::new(&packets, reta.entries(), 4))?;
//! assert!(imbalance(&loads) < 1.2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Invariants of a plan
//!
//! For every successful call: at most `moves_max` moves; no move has `from == to`; no bucket
//! appears twice; each `from` is the bucket's owner in the given assignment and each `to` is a
//! shard below the shard count; a frozen bucket never moves. Applying the whole list strictly
//! lowers the sum of squared deviations of the shard loads (or the list is empty), and never
//! raises the maximum shard load, hence never raises the imbalance. (Each single move and each
//! complete swap has the property on its own; the first half of a swap alone does not.)

use core::fmt;

mod periodic;
mod plan;
mod rebalancer;
#[cfg(test)]
mod tests;

pub use periodic::{IMBALANCE_SAMPLES_MAX, Periodic, PeriodicReport};
pub use plan::{plan_moves, plan_moves_into};
pub use rebalancer::Rebalancer;

/// Largest shard count: shard numbers are RETA queue numbers (`u16`).
pub const REBALANCE_SHARDS_MAX: usize = u16::MAX as usize + 1;

/// One RETA entry changing owner: bucket `bucket` (a RETA index) goes from shard `from` to
/// shard `to`. Apply with [`crate::Reta::set`]`(bucket, to)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BucketMove {
    /// RETA index.
    pub bucket: usize,
    /// The bucket's owner in the assignment the plan was made from.
    pub from: u16,
    /// The new owner (never equal to `from`).
    pub to: u16,
}

/// The rebalancer's knobs. [`RebalanceConfig::default`] documents the defaults;
/// [`RebalanceConfig::validate`] says which values are refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RebalanceConfig {
    /// Act only when max shard load / mean shard load is strictly above this (finite, ≥ 1.0).
    /// Default 1.10.
    pub imbalance_threshold: f64,
    /// Once acting, stop moving when the planned imbalance is at or below this (finite,
    /// `1.0 ..= imbalance_threshold`; 1.0 = keep going while any move helps). Default 1.05.
    pub imbalance_target: f64,
    /// Most moves in one period (a swap counts two). 0 disables rebalancing. Default 8.
    pub moves_max: usize,
    /// A move's benefit (fall of `Σ (L_s / mean − 1)²`) must exceed the bucket's cost × this
    /// (finite, ≥ 0). Default 1e-4: with cost = live connections, a bucket holding 1,000
    /// connections moves only if that sum falls by more than 0.1 (2 shards at 1.2 and 0.8 of
    /// the mean sum to 0.08).
    pub move_cost_factor: f64,
    /// [`Rebalancer`] only: periods a bucket stays put after it moved (0 = may move again in
    /// the next period). Default 3.
    pub cooldown_periods: u32,
    /// [`Rebalancer`] only: weight of the newest period in the per-bucket load EWMA
    /// (`smoothed = w·new + (1 − w)·smoothed`), in `(0, 1]`; 1.0 = no smoothing. Default 0.5.
    pub ewma_weight_new: f64,
}

impl Default for RebalanceConfig {
    fn default() -> Self {
        Self {
            imbalance_threshold: 1.10,
            imbalance_target: 1.05,
            moves_max: 8,
            move_cost_factor: 1e-4,
            cooldown_periods: 3,
            ewma_weight_new: 0.5,
        }
    }
}

/// A [`RebalanceConfig`] field holding a refused value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebalanceConfigError {
    /// `imbalance_threshold` is not finite or is below 1.0.
    ImbalanceThreshold,
    /// `imbalance_target` is not finite, below 1.0 or above `imbalance_threshold`.
    ImbalanceTarget,
    /// `move_cost_factor` is not finite or is negative.
    MoveCostFactor,
    /// `ewma_weight_new` is not in `(0, 1]`.
    EwmaWeightNew,
}

impl fmt::Display for RebalanceConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ImbalanceThreshold => "imbalance_threshold must be finite and at least 1.0",
            Self::ImbalanceTarget => {
                "imbalance_target must be finite and between 1.0 and imbalance_threshold"
            }
            Self::MoveCostFactor => "move_cost_factor must be finite and not negative",
            Self::EwmaWeightNew => "ewma_weight_new must be in (0, 1]",
        })
    }
}

impl core::error::Error for RebalanceConfigError {}

impl RebalanceConfig {
    /// Checks every field; the first refused one is the error.
    pub fn validate(&self) -> Result<(), RebalanceConfigError> {
        let t = self.imbalance_threshold;
        if !(t.is_finite() && t >= 1.0) {
            return Err(RebalanceConfigError::ImbalanceThreshold);
        }
        let g = self.imbalance_target;
        if !(g.is_finite() && (1.0..=t).contains(&g)) {
            return Err(RebalanceConfigError::ImbalanceTarget);
        }
        let c = self.move_cost_factor;
        if !(c.is_finite() && c >= 0.0) {
            return Err(RebalanceConfigError::MoveCostFactor);
        }
        let w = self.ewma_weight_new;
        if !(w > 0.0 && w <= 1.0) {
            return Err(RebalanceConfigError::EwmaWeightNew);
        }
        Ok(())
    }
}

/// Which per-bucket or per-shard input slice has the wrong length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebalanceInputSlice {
    /// `assignment` (must match `bucket_loads`).
    Assignment,
    /// `bucket_costs` (must match `bucket_loads`).
    BucketCosts,
    /// `bucket_frozen` (must match `bucket_loads`).
    BucketFrozen,
    /// `shard_external_loads` (must match `shards`).
    ShardExternalLoads,
}

/// Why a plan was refused. Nothing is planned and no state changes on an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebalanceError {
    /// The configuration holds a refused value.
    Config(RebalanceConfigError),
    /// `shards` is 0.
    NoShards,
    /// `shards` is above [`REBALANCE_SHARDS_MAX`].
    TooManyShards,
    /// An input slice's length does not match.
    LengthMismatch {
        /// The offending slice.
        slice: RebalanceInputSlice,
        /// The length it should have.
        expected: usize,
        /// The length it has.
        found: usize,
    },
    /// `assignment[bucket]` names a shard at or above `shards`.
    ShardOutOfRange {
        /// The bucket.
        bucket: usize,
        /// Its out-of-range owner.
        shard: u16,
    },
}

impl fmt::Display for RebalanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "bad rebalance config: {e}"),
            Self::NoShards => f.write_str("rebalancing needs at least one shard"),
            Self::TooManyShards => write!(f, "more than {REBALANCE_SHARDS_MAX} shards"),
            Self::LengthMismatch {
                slice,
                expected,
                found,
            } => write!(f, "{slice:?} has {found} entries, expected {expected}"),
            Self::ShardOutOfRange { bucket, shard } => {
                write!(
                    f,
                    "bucket {bucket} is assigned to shard {shard}, out of range"
                )
            }
        }
    }
}

impl core::error::Error for RebalanceError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl From<RebalanceConfigError> for RebalanceError {
    fn from(e: RebalanceConfigError) -> Self {
        Self::Config(e)
    }
}

/// One period's input. Buckets are RETA indices; every per-bucket slice has one entry per
/// bucket, index order. Build with [`RebalanceInput::new`] and set the optional fields.
#[derive(Clone, Copy, Debug)]
pub struct RebalanceInput<'a> {
    /// Load of each bucket over the period, in the caller's unit (packets, bytes, busy ns).
    pub bucket_loads: &'a [u64],
    /// Current owner of each bucket (e.g. [`crate::Reta::entries`]); each `< shards`.
    pub assignment: &'a [u16],
    /// Number of shards, `1..=REBALANCE_SHARDS_MAX`. Shards owning no bucket count too (they
    /// are the obvious destinations).
    pub shards: usize,
    /// Cost of moving each bucket (e.g. its live connections); `None` = all free.
    pub bucket_costs: Option<&'a [u64]>,
    /// Load of each shard not attributable to any bucket (same unit as `bucket_loads`; e.g.
    /// timers, filter-steered traffic); it counts towards the shard but never moves.
    pub shard_external_loads: Option<&'a [u64]>,
    /// Buckets that must not move this period (e.g. a migration still in flight).
    pub bucket_frozen: Option<&'a [bool]>,
}

impl<'a> RebalanceInput<'a> {
    /// Loads and assignment only: no move cost, no external load, nothing frozen.
    pub fn new(bucket_loads: &'a [u64], assignment: &'a [u16], shards: usize) -> Self {
        Self {
            bucket_loads,
            assignment,
            shards,
            bucket_costs: None,
            shard_external_loads: None,
            bucket_frozen: None,
        }
    }

    /// Refuses a zero or too large shard count, a slice of the wrong length, an owner out of
    /// range.
    pub fn validate(&self) -> Result<(), RebalanceError> {
        if self.shards == 0 {
            return Err(RebalanceError::NoShards);
        }
        if self.shards > REBALANCE_SHARDS_MAX {
            return Err(RebalanceError::TooManyShards);
        }
        let buckets = self.bucket_loads.len();
        let check = |slice, expected: usize, found: Option<usize>| match found {
            Some(found) if found != expected => Err(RebalanceError::LengthMismatch {
                slice,
                expected,
                found,
            }),
            _ => Ok(()),
        };
        check(
            RebalanceInputSlice::Assignment,
            buckets,
            Some(self.assignment.len()),
        )?;
        check(
            RebalanceInputSlice::BucketCosts,
            buckets,
            self.bucket_costs.map(<[u64]>::len),
        )?;
        check(
            RebalanceInputSlice::BucketFrozen,
            buckets,
            self.bucket_frozen.map(<[bool]>::len),
        )?;
        check(
            RebalanceInputSlice::ShardExternalLoads,
            self.shards,
            self.shard_external_loads.map(<[u64]>::len),
        )?;
        match self
            .assignment
            .iter()
            .position(|&s| usize::from(s) >= self.shards)
        {
            Some(bucket) => Err(RebalanceError::ShardOutOfRange {
                bucket,
                shard: self.assignment.get(bucket).copied().unwrap_or(0),
            }),
            None => Ok(()),
        }
    }
}

/// What a plan found and did (the moves themselves go to the caller's `Vec`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RebalanceReport {
    /// Imbalance of the input (max shard load / mean; 1.0 when the total is 0).
    pub imbalance_before: f64,
    /// Imbalance once every planned move is applied (equal to `imbalance_before` when there is
    /// no move; never above it).
    pub imbalance_planned: f64,
    /// Whether `imbalance_before` was above the threshold (moves were looked for).
    pub triggered: bool,
}

/// Load of each shard: `external[s]` plus the loads of the buckets `assignment` gives it,
/// saturating at `u64::MAX`. Validates like [`plan_moves`] (config aside).
pub fn shard_loads(input: &RebalanceInput<'_>) -> Result<Vec<u64>, RebalanceError> {
    input.validate()?;
    let mut loads = input
        .shard_external_loads
        .map_or_else(|| vec![0u64; input.shards], <[u64]>::to_vec);
    for (&load, &shard) in input.bucket_loads.iter().zip(input.assignment) {
        if let Some(l) = loads.get_mut(usize::from(shard)) {
            *l = l.saturating_add(load);
        }
    }
    Ok(loads)
}

/// Max shard load / mean shard load: 1.0 when all loads are equal, the slice is empty or the
/// total is 0; otherwise in `(1.0, shards]`.
pub fn imbalance(shard_loads: &[u64]) -> f64 {
    let max = shard_loads.iter().copied().max().unwrap_or(0);
    let total: u128 = shard_loads.iter().map(|&l| u128::from(l)).sum();
    imbalance_of(max.into(), total, shard_loads.len())
}

/// `max · n / total` in f64, 1.0 for a zero total.
fn imbalance_of(max: u128, total: u128, shards: usize) -> f64 {
    if total == 0 {
        1.0
    } else {
        // Both within f64 range (≤ 2^76); the ratio of roundings is within 1e-15 of exact.
        max as f64 * shards as f64 / total as f64
    }
}
