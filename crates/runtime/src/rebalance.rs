//! Live RSS rebalancing on the `mem` wire (DESIGN "Rebalancing").
//!
//! The wire thread plays the NIC, so it owns the RETA and the per-bucket packet counters the
//! NIC model keeps. Every period it hands the counters to [`rss::Rebalancer`] and, for each
//! planned move, sends [`Msg::MoveIn`] to the bucket's new shard over that shard's control
//! ring. The new shard starts holding the bucket and answers with [`Msg::MoveOut`] for the
//! old shard, which comes back through the wire: the wire points the RETA entry at the new
//! shard, then relays the message to the old one. Frames the wire steered before the change
//! are already in the old shard's receive ring, ahead of the message; the old shard exports
//! the bucket's connections, forwards stragglers in order and tells the new shard when its
//! receive path has drained (`shard::moves` has the rest of the walk).
//!
//! One move per bucket at a time: a bucket is frozen for the rebalancer from its `MoveIn`
//! until a few periods after its `MoveOut` passed.

use std::time::Duration;

use nic::Nic;
use rss::{BucketMove, RebalanceConfig, RebalanceInput, Rebalancer};
use shard::Msg;

use crate::ring::{Consumer, Producer};

/// How a host rebalances.
#[derive(Debug, Clone, PartialEq)]
pub struct RebalanceSettings {
    /// How often the rebalancer looks at the buckets' load.
    pub period: Duration,
    /// The algorithm's settings (threshold, moves per period, hysteresis).
    pub config: RebalanceConfig,
}

impl Default for RebalanceSettings {
    fn default() -> Self {
        RebalanceSettings {
            period: Duration::from_millis(100),
            config: RebalanceConfig::default(),
        }
    }
}

/// Most imbalance samples a report keeps (the first ones; one per period).
pub const IMBALANCE_SAMPLES_MAX: usize = 10_000;

/// What the rebalancer of one host did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RebalanceReport {
    /// Periods looked at, and periods whose load triggered a plan.
    pub periods: u64,
    pub periods_triggered: u64,
    /// Bucket moves started (`MoveIn` sent) and RETA entries changed (`MoveOut` relayed).
    pub moves_started: u64,
    pub reta_changes: u64,
    /// Moves the rebalancer planned that could not be sent (a control ring full).
    pub moves_dropped: u64,
    /// (ms since start, imbalance = busiest shard's packets over the mean) per period with
    /// traffic, at most [`IMBALANCE_SAMPLES_MAX`].
    pub imbalance: Vec<(u64, f64)>,
}

/// One shard's control rings as the wire holds them.
pub(crate) struct WireControl {
    /// To the shard: `MoveIn` from the rebalancer, relayed `MoveOut`s.
    pub to_shard: Producer<Msg>,
    /// From the shard: (old owner, `MoveOut`) to relay after changing the RETA entry.
    pub from_shard: Consumer<(u16, Msg)>,
}

/// The wire's rebalancer for one host.
pub(crate) struct WireRebalancer {
    rebalancer: Rebalancer,
    period_ns: u64,
    next_ns: u64,
    /// Per bucket: frozen (moving) until this time.
    frozen_until_ns: Vec<u64>,
    frozen: Vec<bool>,
    loads: Vec<u64>,
    assignment: Vec<u16>,
    moves: Vec<BucketMove>,
    pub report: RebalanceReport,
}

impl WireRebalancer {
    pub(crate) fn new(settings: &RebalanceSettings) -> Result<Self, String> {
        let rebalancer =
            Rebalancer::new(settings.config).map_err(|e| format!("rebalance: {e:?}"))?;
        let period_ns = u64::try_from(settings.period.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        Ok(WireRebalancer {
            rebalancer,
            period_ns,
            next_ns: period_ns,
            frozen_until_ns: Vec::new(),
            frozen: Vec::new(),
            loads: Vec::new(),
            assignment: Vec::new(),
            moves: Vec::new(),
            report: RebalanceReport::default(),
        })
    }

    /// How long until the next period (for the wire's idle wait).
    pub(crate) fn due_in_ns(&self, now_ns: u64) -> u64 {
        self.next_ns.saturating_sub(now_ns)
    }

    /// Relays the shards' `MoveOut`s, pointing each RETA entry at its new owner first.
    /// Returns the shards to wake.
    pub(crate) fn relay(
        &mut self,
        steering: &mut Nic,
        controls: &[WireControl],
        wake: &mut [bool],
    ) {
        for c in controls {
            while let Some((old, m)) = c.from_shard.pop() {
                if let Msg::MoveOut { bucket, to } = &m {
                    if steering.set_reta_entry(usize::from(*bucket), *to).is_ok() {
                        self.report.reta_changes += 1;
                    }
                }
                let Some(dest) = controls.get(usize::from(old)) else {
                    continue;
                };
                // The control rings are sized for every bucket at once: a move in flight
                // per bucket at most, so this push finds room.
                if dest.to_shard.push(m).is_err() {
                    self.report.moves_dropped += 1;
                }
                if let Some(w) = wake.get_mut(usize::from(old)) {
                    *w = true;
                }
            }
        }
    }

    /// One period, if due: plans moves from the buckets' packet counts and starts them.
    pub(crate) fn tick(
        &mut self,
        now_ns: u64,
        steering: &mut Nic,
        controls: &[WireControl],
        wake: &mut [bool],
    ) {
        if now_ns < self.next_ns {
            return;
        }
        self.next_ns = now_ns.saturating_add(self.period_ns);
        self.report.periods += 1;
        self.loads.clear();
        self.loads.extend_from_slice(steering.reta_bucket_packets());
        steering.reset_reta_bucket_packets();
        self.assignment.clear();
        self.assignment
            .extend_from_slice(steering.steering().reta.entries());
        let n = self.assignment.len();
        self.frozen_until_ns.resize(n, 0);
        self.frozen.clear();
        self.frozen
            .extend(self.frozen_until_ns.iter().map(|&t| now_ns < t));
        let shards = controls.len();
        let mut input = RebalanceInput::new(&self.loads, &self.assignment, shards);
        input.bucket_frozen = Some(&self.frozen);
        if let Ok(loads) = rss::shard_loads(&input) {
            if loads.iter().any(|&l| l > 0) && self.report.imbalance.len() < IMBALANCE_SAMPLES_MAX {
                self.report
                    .imbalance
                    .push((now_ns / 1_000_000, rss::imbalance(&loads)));
            }
        }
        self.moves.clear();
        let Ok(r) = self.rebalancer.plan_into(&input, &mut self.moves) else {
            return;
        };
        if r.triggered {
            self.report.periods_triggered += 1;
        }
        for m in self.moves.drain(..) {
            let (Ok(bucket), Some(c)) = (u16::try_from(m.bucket), controls.get(usize::from(m.to)))
            else {
                self.report.moves_dropped += 1;
                continue;
            };
            if c.to_shard
                .push(Msg::MoveIn {
                    bucket,
                    from: m.from,
                })
                .is_err()
            {
                self.report.moves_dropped += 1;
                continue;
            }
            self.report.moves_started += 1;
            if let Some(t) = self.frozen_until_ns.get_mut(m.bucket) {
                *t = now_ns.saturating_add(self.period_ns.saturating_mul(4));
            }
            if let Some(w) = wake.get_mut(usize::from(m.to)) {
                *w = true;
            }
        }
    }
}
