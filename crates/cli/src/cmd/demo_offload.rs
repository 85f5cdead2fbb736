//! `rsstack demo --offload …` and `rsstack serve … --offload …`: the server's offload engine
//! on a core of its own (seed 002; `runtime::offload`, on the `mem` wire or a live port) and
//! what the summary says about it.
//!
//! The measure of seed 002's Figure 8 is handoff messages per TCP packet, by kind: commands
//! each way over the engine's rings divided by the TCP packets of offloaded connections (the
//! frames the engine received — steered to its queue or forwarded by the host — plus the
//! frames it sent).

use std::time::Duration;

use clap::Args;
use offload::Policy;
use runtime::{EngineReport, HostOffloadReport, LiveReport, OffloadSettings, PairReport};

use super::CliError;

/// Largest `--engine-connections`: the handoff interface's connection ids are 32-bit, the
/// seed's NIC had 8,192; a million is far beyond any demo.
const ENGINE_CONNECTIONS_MAX: u64 = 1_000_000;

#[derive(Debug, Args, Default)]
pub struct OffloadArgs {
    /// Offload policy of the server (seed 002): off | all | first:N | adaptive. Anything but
    /// `off` runs an offload engine on a core of its own serving shard 0's connections.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub offload: Option<Policy>,
    /// The engine's connection table, slots (default 8,192, the seed's NIC).
    #[arg(long, value_name = "N", requires = "offload",
          value_parser = clap::value_parser!(u64).range(1..=ENGINE_CONNECTIONS_MAX))]
    pub engine_connections: Option<u64>,
    /// Fault injection: the engine stops answering, without notice, this many seconds after
    /// the start. The host notices by heartbeat time-out, resets the engine's connections
    /// (counted) and serves new ones itself.
    #[arg(long, value_name = "SECS", requires = "offload")]
    pub engine_fail_after: Option<f64>,
    /// Pin the engine's thread to this CPU (default: demo pins it to the core after the
    /// shards'; serve leaves it unpinned).
    #[arg(long, value_name = "CPU", requires = "offload")]
    pub engine_core: Option<usize>,
    /// Debugging: every MS milliseconds the host asks every offloaded connection back (as on
    /// a route change) and the policy hands them off again at its next pass, so a long
    /// transfer moves between host and engine many times while it flows.
    #[arg(long, value_name = "MS", requires = "offload",
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub offload_cycle_ms: Option<u64>,
    /// The host declares the engine failed when it has heard nothing from it (its resource
    /// advertisements are its heartbeat, every 10 ms) for this long while connections are
    /// offloaded, in milliseconds [default: 100].
    #[arg(long, value_name = "MS", requires = "offload",
          value_parser = clap::value_parser!(u64).range(20..=60_000))]
    pub engine_timeout_ms: Option<u64>,
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::from_name(s).ok_or_else(|| format!("`{s}` is not off, all, first:N or adaptive"))
}

/// The policy's name, as `--offload` takes it.
fn policy_name(p: Policy) -> String {
    match p {
        Policy::Off => "off".into(),
        Policy::All => "all".into(),
        Policy::First(n) => format!("first:{n}"),
        Policy::Adaptive => "adaptive".into(),
    }
}

impl OffloadArgs {
    /// Whether an engine runs.
    pub fn enabled(&self) -> bool {
        self.offload.is_some_and(|p| p != Policy::Off)
    }

    /// The runtime's settings (`None`: no engine); the engine is pinned to `core` when given.
    pub fn settings(&self, core: Option<usize>) -> Result<Option<OffloadSettings>, CliError> {
        let fail_after = match self.engine_fail_after {
            None => None,
            Some(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => {
                Some(Duration::from_secs_f64(s))
            }
            Some(_) => {
                return Err(CliError::Usage(
                    "--engine-fail-after must be in [0, 86400] seconds".into(),
                ));
            }
        };
        let Some(policy) = self.offload.filter(|_| self.enabled()) else {
            if fail_after.is_some()
                || self.engine_connections.is_some()
                || self.engine_core.is_some()
                || self.offload_cycle_ms.is_some()
                || self.engine_timeout_ms.is_some()
            {
                return Err(CliError::Usage(
                    "--engine-connections, --engine-fail-after, --engine-core, \
                     --engine-timeout-ms and --offload-cycle-ms need an engine \
                     (--offload all, first:N or adaptive)"
                        .into(),
                ));
            }
            return Ok(None);
        };
        let mut s = OffloadSettings {
            fail_after,
            core: self.engine_core.or(core),
            cycle: self.offload_cycle_ms.map(Duration::from_millis),
            ..OffloadSettings::default()
        };
        if let Some(n) = self.engine_connections {
            // In range by the parser (≤ 1,000,000 < u32::MAX).
            s.engine.limits.connections_max = u32::try_from(n).unwrap_or(u32::MAX);
        }
        s.host.limits = s.engine.limits;
        if let Some(ms) = self.engine_timeout_ms {
            s.host.engine_timeout_ns = ms * 1_000_000;
        }
        s.host.policy = policy;
        Ok(Some(s))
    }
}

/// Messages per TCP packet of offloaded connections, by kind (seed Figure 8).
#[derive(Debug, Clone, Copy, Default)]
struct PerPacket {
    send: f64,
    recvd: f64,
    ctrl: f64,
    forward: f64,
    post: f64,
    recv: f64,
    ack: f64,
    ctrl_in: f64,
    resource: f64,
}

/// What the summary shows about the offload engine.
#[derive(Debug, Clone)]
pub struct OffloadSummary {
    policy: String,
    engine: EngineReport,
    host: HostOffloadReport,
    /// Filters installed, removed, refused, and install acknowledgements dropped.
    filters: (u64, u64, u64, u64),
    /// On a live port: frames shard 0's filter steered to the engine and ones dropped for a
    /// full ring, ARP copies (and drops), the engine's transmissions (sent, refused for now,
    /// dropped on error).
    live: Option<LiveFigures>,
    /// TCP packets of offloaded connections through the engine.
    engine_packets: u64,
    per_packet: PerPacket,
}

/// What a live port adds to the summary (see [`OffloadSummary`]'s `live`).
#[derive(Debug, Clone, Copy)]
struct LiveFigures {
    port: runtime::PortCounters,
    engine_tx: runtime::PortCounters,
}

impl OffloadSummary {
    /// The summary of a `demo` run (the `mem` wire played the NIC).
    pub fn of<S, C>(r: &PairReport<S, C>, args: &OffloadArgs) -> Option<OffloadSummary> {
        let engine = r.engine?;
        let host = r.server.shards.first().and_then(|s| s.offload)?;
        let filters = (
            r.wire.filters_installed,
            r.wire.filters_removed,
            r.wire.filters_refused,
            r.wire.filters_ack_dropped,
        );
        Some(Self::new(args, engine, host, filters, None))
    }

    /// The summary of a live host (`serve`): shard 0's port played the NIC.
    pub fn of_live<A>(r: &LiveReport<A>, args: &OffloadArgs) -> Option<OffloadSummary> {
        let engine = r.engine?;
        let shard0 = r.host.shards.first()?;
        let host = shard0.offload?;
        let p = shard0.port;
        let filters = (
            p.filters_installed,
            p.filters_removed,
            p.filters_refused,
            p.filters_ack_dropped,
        );
        let live = LiveFigures {
            port: p,
            engine_tx: engine.port,
        };
        Some(Self::new(args, engine, host, filters, Some(live)))
    }

    fn new(
        args: &OffloadArgs,
        engine: EngineReport,
        host: HostOffloadReport,
        filters: (u64, u64, u64, u64),
        live: Option<LiveFigures>,
    ) -> OffloadSummary {
        let c = &engine.counters;
        let engine_packets = c.frames_in + c.frames_forwarded_in + engine.tx_frames;
        let per = |n: u64| {
            if engine_packets == 0 {
                0.0
            } else {
                n as f64 / engine_packets as f64
            }
        };
        let h = &host.counters;
        let per_packet = PerPacket {
            send: per(h.cmds_send),
            recvd: per(h.cmds_recvd),
            ctrl: per(h.cmds_ctrl),
            forward: per(h.cmds_forward),
            post: per(h.cmds_post),
            recv: per(h.cmds_recv_in),
            ack: per(h.cmds_ack_in),
            ctrl_in: per(h.cmds_ctrl_in),
            resource: per(h.cmds_resource_in),
        };
        OffloadSummary {
            policy: args.offload.map_or("off".into(), policy_name),
            engine,
            host,
            filters,
            live,
            engine_packets,
            per_packet,
        }
    }

    /// The summary as `offload.KEY: value` lines (nested keys joined with dots; booleans as
    /// 0/1, absent values as `-`), for `serve`'s `key: value` summary.
    pub fn write_lines(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        write_flat(out, "offload", &self.json())
    }

    /// Connections the engine held when it failed (its table plus the handoffs it swallowed
    /// afterwards): each must end in one counted reset on the host.
    fn engine_held_at_failure(&self) -> u64 {
        self.engine.connections_at_failure + self.engine.handoffs_swallowed
    }

    pub fn json(&self) -> serde_json::Value {
        let h = &self.host.counters;
        let p = &self.per_packet;
        let e = &self.engine;
        serde_json::json!({
            "policy": self.policy,
            "connections_offloaded": h.handoffs_accepted,
            "handoffs_sent": h.handoffs_sent,
            "handoffs_refused": h.handoffs_refused,
            "handoffs_not_sent_no_resource": h.handoffs_no_resource,
            "offloaded_at_end": self.host.offloaded_at_end,
            "restores": {
                "time_wait": h.restored_time_wait,
                "requested": h.restored_requested,
                "resource_exhaustion": h.restored_exhaustion,
                "other": h.restored_other,
                "failed": h.restore_failed,
            },
            "deallocated": h.deallocated,
            "engine_packets": self.engine_packets,
            "messages_per_packet": {
                "send": p.send, "recvd": p.recvd, "ctrl": p.ctrl, "forward": p.forward,
                "post": p.post, "recv": p.recv, "ack": p.ack, "ctrl_in": p.ctrl_in,
                "resource": p.resource,
            },
            "engine_busy_share": e.busy_share(),
            "engine_core": e.core.filter(|_| !e.pin_failed),
            "engine_failed": e.failed,
            "engine_fenced": e.fenced,
            "engine_failures_detected": h.engine_failures,
            "engine_connections_at_failure": self.engine_held_at_failure(),
            "connections_reset_by_engine_failure": h.connections_lost,
            "engine_frames_unknown": e.counters.frames_unknown,
            "engine_frames_swallowed_after_failure": e.frames_swallowed,
            "hold": {
                "frames": e.hold_frames,
                "drained": e.hold_drained,
                "timeouts": e.hold_timeouts,
                "dropped": e.hold_dropped,
            },
            "engine_frames_over_budget_dropped": e.counters.frames_over_budget_dropped,
            "cmds_dropped": self.host.host_cmds_dropped + e.engine_cmds_dropped
                + self.host.steer_dropped,
            "cmds_refused": h.engine_cmds_refused + h.host_cmds_refused
                + e.counters.host_cmds_refused + e.counters.engine_cmds_refused,
            "filters_installed": self.filters.0,
            "filters_removed": self.filters.1,
            "filters_refused": self.filters.2,
            "filters_ack_dropped": self.filters.3,
            "restore_cycles": self.host.cycles,
            "restore_cycles_asked": self.host.cycle_restores_asked,
            "live": self.live.map(|l| serde_json::json!({
                "frames_to_engine": l.port.rx_to_engine,
                "drop_engine_ring_full": l.port.rx_drop_engine_ring_full,
                "arp_copies_to_engine": l.port.arp_copies_to_engine,
                "drop_arp_copy_engine_ring_full": l.port.drop_arp_copy_engine_ring_full,
                "engine_tx_frames": l.engine_tx.tx_frames,
                "engine_tx_would_block": l.engine_tx.tx_would_block,
                "engine_tx_drop_error": l.engine_tx.tx_drop_error,
            })),
        })
    }

    pub fn table(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let h = &self.host.counters;
        let p = &self.per_packet;
        let e = &self.engine;
        writeln!(
            out,
            "offload             {:>14} policy, {} connections offloaded, {} refused, {} at the end",
            self.policy, h.handoffs_accepted, h.handoffs_refused, self.host.offloaded_at_end
        )?;
        writeln!(
            out,
            "restores            {:>14} time-wait, {} requested, {} exhaustion, {} other",
            h.restored_time_wait, h.restored_requested, h.restored_exhaustion, h.restored_other
        )?;
        writeln!(
            out,
            "msgs/TCP packet     {:>14} packets: send {:.3} recvd {:.3} ctrl {:.3} forward {:.3} \
             post {:.3} | recv {:.3} ack {:.3} ctrl {:.3} resource {:.3}",
            self.engine_packets,
            p.send,
            p.recvd,
            p.ctrl,
            p.forward,
            p.post,
            p.recv,
            p.ack,
            p.ctrl_in,
            p.resource
        )?;
        writeln!(out, "engine busy         {:>13.1}%", 100.0 * e.busy_share())?;
        writeln!(
            out,
            "engine failure      {:>14} reset (engine held {}), {} detected",
            h.connections_lost,
            self.engine_held_at_failure(),
            h.engine_failures
        )
    }
}

/// Writes the leaves of `v` as `PREFIX.KEY: value` lines, keys in order.
fn write_flat(
    out: &mut impl std::io::Write,
    prefix: &str,
    v: &serde_json::Value,
) -> std::io::Result<()> {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                write_flat(out, &format!("{prefix}.{k}"), v)?;
            }
            Ok(())
        }
        Value::Bool(b) => writeln!(out, "{prefix}: {}", u8::from(*b)),
        Value::Null => writeln!(out, "{prefix}: -"),
        Value::String(s) => writeln!(out, "{prefix}: {s}"),
        other => writeln!(out, "{prefix}: {other}"),
    }
}
