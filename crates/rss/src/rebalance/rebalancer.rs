//! The stateful wrapper: EWMA of the loads across periods and a per-bucket cooldown.

use super::plan::{Scratch, plan_with};
use super::{
    BucketMove, RebalanceConfig, RebalanceConfigError, RebalanceError, RebalanceInput,
    RebalanceReport,
};

/// [`super::plan_moves`] with memory, to be called once per period.
///
/// - **Smoothing.** Each bucket's load (and each shard's external load) is an EWMA across
///   periods with weight [`RebalanceConfig::ewma_weight_new`] on the newest period, seeded
///   with the first period's values; the plan is made on the smoothed loads, rounded to
///   integers (exact pass-through when the weight is 1.0).
/// - **Cooldown.** A bucket that moved in period `p` is frozen in periods `p+1 ..= p+K`,
///   `K` = [`RebalanceConfig::cooldown_periods`], on top of any bucket the input freezes.
///
/// The caller is expected to apply the moves (or not) and pass the resulting assignment next
/// period; the rebalancer keeps no copy of it. A change of bucket or shard count starts the
/// state afresh. A refused input changes nothing.
#[derive(Clone, Debug)]
pub struct Rebalancer {
    config: RebalanceConfig,
    periods: u64,
    /// Empty until the first period (then one per bucket / per shard).
    ewma_bucket_loads: Vec<f64>,
    ewma_external_loads: Vec<f64>,
    /// What the last plan saw.
    bucket_loads: Vec<u64>,
    external_loads: Vec<u64>,
    /// Periods each bucket stays frozen.
    cooldown_left: Vec<u32>,
    frozen: Vec<bool>,
    scratch: Scratch,
}

impl Rebalancer {
    /// A rebalancer with no history; refuses a bad config.
    pub fn new(config: RebalanceConfig) -> Result<Self, RebalanceConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            periods: 0,
            ewma_bucket_loads: Vec::new(),
            ewma_external_loads: Vec::new(),
            bucket_loads: Vec::new(),
            external_loads: Vec::new(),
            cooldown_left: Vec::new(),
            frozen: Vec::new(),
            scratch: Scratch::default(),
        })
    }

    /// The configuration (validated).
    pub fn config(&self) -> &RebalanceConfig {
        &self.config
    }

    /// Periods planned so far (refused inputs do not count).
    pub fn periods(&self) -> u64 {
        self.periods
    }

    /// The smoothed per-bucket loads the last plan was made on (empty before the first).
    pub fn smoothed_bucket_loads(&self) -> &[u64] {
        &self.bucket_loads
    }

    /// Periods `bucket` still stays put after the last plan (0 = free to move next period).
    pub fn cooldown_periods_left(&self, bucket: usize) -> u32 {
        self.cooldown_left.get(bucket).copied().unwrap_or(0)
    }

    /// Forgets the history (smoothing and cooldowns); the config stays.
    pub fn reset(&mut self) {
        self.periods = 0;
        self.ewma_bucket_loads.clear();
        self.ewma_external_loads.clear();
        self.bucket_loads.clear();
        self.external_loads.clear();
        self.cooldown_left.clear();
        self.frozen.clear();
    }

    /// Plans one period into `moves` (cleared first): smooths the loads, freezes cooling
    /// buckets, runs the planner and starts the cooldown of every bucket it moves. The report's
    /// imbalances are those of the smoothed loads (for the raw ones use [`super::imbalance`]
    /// of [`super::shard_loads`]).
    pub fn plan_into(
        &mut self,
        input: &RebalanceInput<'_>,
        moves: &mut Vec<BucketMove>,
    ) -> Result<RebalanceReport, RebalanceError> {
        moves.clear();
        input.validate()?;
        let buckets = input.bucket_loads.len();
        if self.ewma_bucket_loads.len() != buckets || self.ewma_external_loads.len() != input.shards
        {
            self.reset();
        }
        let weight = self.config.ewma_weight_new;
        smooth(
            &mut self.ewma_bucket_loads,
            &mut self.bucket_loads,
            input.bucket_loads.iter().copied(),
            weight,
        );
        match input.shard_external_loads {
            Some(external) => smooth(
                &mut self.ewma_external_loads,
                &mut self.external_loads,
                external.iter().copied(),
                weight,
            ),
            None => smooth(
                &mut self.ewma_external_loads,
                &mut self.external_loads,
                core::iter::repeat_n(0, input.shards),
                weight,
            ),
        }
        self.cooldown_left.resize(buckets, 0);
        self.frozen.clear();
        for (bucket, left) in self.cooldown_left.iter_mut().enumerate() {
            let asked = input
                .bucket_frozen
                .and_then(|f| f.get(bucket).copied())
                .unwrap_or(false);
            self.frozen.push(asked || *left > 0);
            *left = left.saturating_sub(1);
        }
        let smoothed = RebalanceInput {
            bucket_loads: &self.bucket_loads,
            shard_external_loads: Some(&self.external_loads),
            bucket_frozen: Some(&self.frozen),
            ..*input
        };
        let report = plan_with(&self.config, &smoothed, &mut self.scratch, moves)?;
        for m in moves.iter() {
            if let Some(left) = self.cooldown_left.get_mut(m.bucket) {
                *left = self.config.cooldown_periods;
            }
        }
        self.periods += 1;
        Ok(report)
    }
}

/// `ewma = w·new + (1 − w)·ewma` (seeded with `new` when empty), and `out` = `ewma` rounded;
/// with `w = 1.0`, `out` = `new` exactly (f64 would round loads above 2^53).
fn smooth(ewma: &mut Vec<f64>, out: &mut Vec<u64>, new: impl Iterator<Item = u64>, weight: f64) {
    out.clear();
    out.extend(new);
    if ewma.is_empty() {
        ewma.extend(out.iter().map(|&l| l as f64));
        return;
    }
    for (e, o) in ewma.iter_mut().zip(out.iter_mut()) {
        *e = weight * (*o as f64) + (1.0 - weight) * *e;
        if weight < 1.0 {
            // Saturating cast; the EWMA of non-negative values is non-negative.
            *o = e.round() as u64;
        }
    }
}
