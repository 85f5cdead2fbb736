//! `rsstack demo --skew` and `--rebalance`: the workload that needs rebalancing, and what the
//! rebalancer did.
//!
//! `--skew` adds "elephant" connections that upload a large request body over and over
//! (the server's receive path does the work, where RSS spreads it), from client ports chosen
//! so the server's RSS puts every one of them on server shard 0, each in a RETA bucket of its
//! own (so moving buckets can spread them). With `--rebalance` the server's RETA
//! follows the load and the elephants' connections migrate live; without it the rebalancer
//! only measures (it plans no move), so both runs report the same imbalance series.

use core::net::Ipv4Addr;

use rss::{Reta, RssHasher};
use runtime::{PairReport, RebalanceReport};

/// Client ports tried for elephants: below the ephemeral range, so they never collide with
/// the ports `connect` picks for the other connections.
const ELEPHANT_PORTS: core::ops::RangeInclusive<u16> = 20_000..=40_000;

/// Up to `count` client ports whose connections to `server:server_port` the server's RSS
/// (`hasher`, an equal RETA over `shards`) steers to shard 0, each in a different RETA
/// bucket. The demo's load client is told the server's key: a skew an outside peer could
/// only build under a known key.
pub fn elephant_ports(
    hasher: &RssHasher,
    client: Ipv4Addr,
    server: Ipv4Addr,
    server_port: u16,
    shards: u16,
    count: usize,
) -> Vec<u16> {
    let Ok(reta) = Reta::with_equal(rss::RETA_SIZE_DEFAULT, shards) else {
        return Vec::new();
    };
    let q = rss::SteeredPortsQuery {
        client: client.into(),
        server: server.into(),
        server_port,
        server_queue: 0,
        range: ELEPHANT_PORTS,
    };
    rss::ports_steered_to(hasher, &reta, &q, count)
}

/// What the rebalancer and the moves did, for the summary.
pub struct RebalanceSummary {
    /// Moves were allowed (`--rebalance`), or the rebalancer only measured.
    pub enabled: bool,
    pub report: RebalanceReport,
    /// Imbalance (busiest shard's packets over the mean) of the first and the last periods
    /// with traffic (mean of up to 3 periods each).
    pub imbalance_first: f64,
    pub imbalance_last: f64,
    pub conns_migrated: u64,
    pub unowned_migrated: u64,
    pub frames_held: u64,
    pub frames_forwarded: u64,
    pub kept: u64,
    pub hold_drops: u64,
    pub import_failed: u64,
    /// Export-to-import time per migrated connection, ns.
    pub migration_ns_p50: u64,
    pub migration_ns_p99: u64,
}

fn mean(xs: &[(u64, f64)]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().map(|x| x.1).sum::<f64>() / xs.len() as f64
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

impl RebalanceSummary {
    pub fn of<S, C>(r: &PairReport<S, C>, enabled: bool) -> Option<Self> {
        let report = r.rebalance.clone()?;
        let series = &report.periodic.imbalance;
        let k = series.len().min(3);
        let mut samples: Vec<u64> = Vec::new();
        let mut s = RebalanceSummary {
            enabled,
            imbalance_first: mean(&series[..k]),
            imbalance_last: mean(&series[series.len() - k..]),
            report: report.clone(),
            conns_migrated: 0,
            unowned_migrated: 0,
            frames_held: 0,
            frames_forwarded: 0,
            kept: 0,
            hold_drops: 0,
            import_failed: 0,
            migration_ns_p50: 0,
            migration_ns_p99: 0,
        };
        for sh in &r.server.shards {
            s.conns_migrated += sh.moves.conns_in;
            s.unowned_migrated += sh.moves.unowned_in;
            s.frames_held += sh.moves.frames_held;
            s.frames_forwarded += sh.stack.tcp_moved_forwarded;
            s.kept += sh.moves.kept;
            s.hold_drops += sh.moves.hold_drop_full;
            s.import_failed += sh.moves.import_failed;
            samples.extend_from_slice(&sh.move_samples_ns);
        }
        samples.sort_unstable();
        s.migration_ns_p50 = quantile(&samples, 0.5);
        s.migration_ns_p99 = quantile(&samples, 0.99);
        Some(s)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "enabled": self.enabled,
            "periods": self.report.periodic.periods,
            "periods_triggered": self.report.periodic.periods_triggered,
            "bucket_moves": self.report.moves_started,
            "reta_changes": self.report.reta_changes,
            "moves_dropped": self.report.moves_dropped,
            "imbalance_first": self.imbalance_first,
            "imbalance_last": self.imbalance_last,
            "imbalance_series": self.report.periodic.imbalance.iter().map(|&(ms, x)| serde_json::json!([ms, x])).collect::<Vec<_>>(),
            "connections_migrated": self.conns_migrated,
            "unowned_connections_migrated": self.unowned_migrated,
            "connections_kept": self.kept,
            "frames_held": self.frames_held,
            "frames_forwarded": self.frames_forwarded,
            "hold_drops": self.hold_drops,
            "import_failed": self.import_failed,
            "migration_ns_p50": self.migration_ns_p50,
            "migration_ns_p99": self.migration_ns_p99,
        })
    }

    pub fn table(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mode = if self.enabled {
            "on"
        } else {
            "off (measured only)"
        };
        writeln!(out, "rebalancing         {mode:>14}")?;
        writeln!(
            out,
            "imbalance first/last{:>8.3} → {:.3} (busiest shard's packets / mean, per period)",
            self.imbalance_first, self.imbalance_last
        )?;
        writeln!(
            out,
            "bucket moves        {:>14} ({} periods, {} triggered)",
            self.report.moves_started,
            self.report.periodic.periods,
            self.report.periodic.periods_triggered
        )?;
        writeln!(
            out,
            "migrated            {:>14} connections (+{} unaccepted/closing), {} kept",
            self.conns_migrated, self.unowned_migrated, self.kept
        )?;
        writeln!(
            out,
            "frames held/fwd     {:>14} / {}",
            self.frames_held, self.frames_forwarded
        )?;
        writeln!(
            out,
            "migration time      {:>11.1} µs p50, {:.1} µs p99 (export → import)",
            self.migration_ns_p50 as f64 / 1e3,
            self.migration_ns_p99 as f64 / 1e3
        )
    }
}
