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
use rss::{Periodic, RebalanceConfig};
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

/// What the rebalancer of one host did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RebalanceReport {
    /// Periods, triggered periods, moves planned and the imbalance per period.
    pub periodic: rss::PeriodicReport,
    /// Bucket moves started (`MoveIn` sent) and RETA entries changed (`MoveOut` relayed).
    pub moves_started: u64,
    pub reta_changes: u64,
    /// Moves that could not be sent (a control ring full).
    pub moves_dropped: u64,
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
    periodic: Periodic,
    loads: Vec<u64>,
    assignment: Vec<u16>,
    report: RebalanceReport,
}

impl WireRebalancer {
    pub(crate) fn new(settings: &RebalanceSettings) -> Result<Self, String> {
        let period_ns = u64::try_from(settings.period.as_nanos()).unwrap_or(u64::MAX);
        Ok(WireRebalancer {
            periodic: Periodic::new(settings.config, period_ns)
                .map_err(|e| format!("rebalance: {e:?}"))?,
            loads: Vec::new(),
            assignment: Vec::new(),
            report: RebalanceReport::default(),
        })
    }

    /// The report so far.
    pub(crate) fn into_report(self) -> RebalanceReport {
        RebalanceReport {
            periodic: self.periodic.report().clone(),
            ..self.report
        }
    }

    /// How long until the next period (for the wire's idle wait).
    pub(crate) fn due_in_ns(&self, now_ns: u64) -> u64 {
        self.periodic.next_ns().saturating_sub(now_ns)
    }

    /// Relays the shards' `MoveOut`s, pointing each RETA entry at its new owner first, and
    /// marks the shards to wake.
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
                // The control rings have room for a move of every bucket at once, and a
                // bucket has one move in flight at most: this push finds room.
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
        if now_ns < self.periodic.next_ns() {
            return;
        }
        self.loads.clear();
        self.loads.extend_from_slice(steering.reta_bucket_packets());
        steering.reset_reta_bucket_packets();
        self.assignment.clear();
        self.assignment
            .extend_from_slice(steering.steering().reta.entries());
        let moves = self
            .periodic
            .tick(now_ns, &self.loads, &self.assignment, controls.len());
        for m in moves {
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
            if let Some(w) = wake.get_mut(usize::from(m.to)) {
                *w = true;
            }
        }
    }
}

/// The rebalancer of a host on live ports: the shards forward by a software RETA, so they count
/// the packets they process per RETA entry themselves ([`crate::ShardLive`] publishes them),
/// and a move needs no NIC: the new owner tells every shard the entry changed
/// (`Msg::RetaEntry`) and sends `MoveOut` to the old owner directly. Runs on the host's
/// monitor thread.
pub(crate) struct LiveRebalancer {
    periodic: Periodic,
    /// The owner of each RETA entry as the moves started here leave it.
    owners: Vec<u16>,
    /// Cumulative per-bucket counts at the last period, and this period's loads.
    last: Vec<u64>,
    now: Vec<u64>,
    loads: Vec<u64>,
    to_shards: Vec<Producer<Msg>>,
    report: RebalanceReport,
}

impl LiveRebalancer {
    pub(crate) fn new(
        settings: &RebalanceSettings,
        owners: Vec<u16>,
        to_shards: Vec<Producer<Msg>>,
    ) -> Result<Self, String> {
        let period_ns = u64::try_from(settings.period.as_nanos()).unwrap_or(u64::MAX);
        let n = owners.len();
        Ok(LiveRebalancer {
            periodic: Periodic::new(settings.config, period_ns)
                .map_err(|e| format!("rebalance: {e:?}"))?,
            owners,
            last: vec![0; n],
            now: vec![0; n],
            loads: vec![0; n],
            to_shards,
            report: RebalanceReport::default(),
        })
    }

    /// How long until the next period.
    pub(crate) fn due_in_ns(&self, now_ns: u64) -> u64 {
        self.periodic.next_ns().saturating_sub(now_ns)
    }

    /// One period, if due: this period's per-bucket loads from the shards' counters, a plan,
    /// and a `MoveIn` to each move's new owner (woken through `threads`).
    pub(crate) fn tick(
        &mut self,
        now_ns: u64,
        lives: &[std::sync::Arc<crate::ShardLive>],
        threads: &[std::sync::OnceLock<std::thread::Thread>],
    ) {
        if now_ns < self.periodic.next_ns() {
            return;
        }
        self.now.iter_mut().for_each(|n| *n = 0);
        for l in lives {
            l.add_buckets(&mut self.now);
        }
        for ((load, now), last) in self.loads.iter_mut().zip(&self.now).zip(&mut self.last) {
            *load = now.saturating_sub(*last);
            *last = *now;
        }
        let moves = self
            .periodic
            .tick(now_ns, &self.loads, &self.owners, self.to_shards.len());
        for m in moves {
            let (Ok(bucket), Some(p)) = (
                u16::try_from(m.bucket),
                self.to_shards.get(usize::from(m.to)),
            ) else {
                self.report.moves_dropped += 1;
                continue;
            };
            if p.push(Msg::MoveIn {
                bucket,
                from: m.from,
            })
            .is_err()
            {
                self.report.moves_dropped += 1;
                continue;
            }
            self.report.moves_started += 1;
            if let Some(o) = self.owners.get_mut(m.bucket) {
                *o = m.to;
            }
            if let Some(t) = threads.get(usize::from(m.to)).and_then(|t| t.get()) {
                t.unpark();
            }
        }
    }

    /// The report so far.
    pub(crate) fn into_report(self) -> RebalanceReport {
        RebalanceReport {
            periodic: self.periodic.report().clone(),
            ..self.report
        }
    }
}
