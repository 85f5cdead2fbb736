//! `rsstack ttcp send|recv`: bulk transfer in the manner of NTttcp (seed 000, table 1) on a
//! live host. At the end both print one `key: value` per line:
//!
//! | key | meaning |
//! |---|---|
//! | `bytes` | payload bytes sent (accepted by the stack) or received |
//! | `seconds` | first to last payload byte (the run's wall time when no byte moved): the one time base of every rate below |
//! | `throughput_KBps` | `bytes / 1024 / seconds` |
//! | `throughput_Mbps` | `bytes × 8 / 10^6 / seconds` |
//! | `avg_frame_bytes` | bytes per frame in the data direction (sent frames for `send`, received for `recv`) |
//! | `packets_sent`, `packets_received` | frames the port sent and received |
//! | `packets_per_interrupt` | packets the stacks processed per NIC wake-up |
//! | `interrupts_per_sec` | NIC wake-ups per `seconds` (the same time base as the throughput) |
//! | `cycles_per_byte` | process CPU time × CPU clock rate / `bytes` |
//! | `retransmitted_segments` | TCP segments sent again (fast retransmit, RTO, probes) |
//! | `fast_retransmits`, `rto_expirations` | loss recoveries entered by duplicate ACKs or SACK, and retransmission timeouts |
//!
//! `--counters` appends the host summary the `serve` commands print (port, NIC, stack and
//! TCP counters).

use core::net::SocketAddr;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use apps::ttcp::{TtcpReceiver, TtcpSendConfig, TtcpSender, TtcpStats};
use clap::{Args, Subcommand};
use runtime::LiveReport;

use super::CliError;
use super::live::IoArgs;

/// Most `ttcp send --conns`: one connection per ephemeral port of a 60,000-port range.
const SEND_CONNS_MAX: u32 = 60_000;

#[derive(Debug, Subcommand)]
pub enum TtcpCommand {
    /// Accept N connections, discard their data until each peer closes, print the report.
    Recv(RecvArgs),
    /// Connect N times, send BYTES on each, close, print the report.
    Send(SendArgs),
}

#[derive(Debug, Args)]
pub struct RecvArgs {
    /// TCP port to listen on (1..=65535).
    #[arg(long, default_value_t = 5001, value_name = "P",
          value_parser = clap::value_parser!(u16).range(1..))]
    port: u16,
    /// Connections to accept before reporting (at least 1).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    conns: u32,
    /// After the report, print every port, NIC, stack and TCP counter.
    #[arg(long)]
    counters: bool,
    #[command(flatten)]
    io: IoArgs,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The receiver, `IPv4:PORT` or `[IPv6]:PORT`.
    #[arg(long, value_name = "ADDR:PORT")]
    to: String,
    /// Payload bytes per connection (suffixes K, M, G: powers of 1024).
    #[arg(long, default_value = "100M", value_name = "N")]
    bytes: String,
    /// Connections, all opened at start: 1 to 60000, the ephemeral ports of one address.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(SEND_CONNS_MAX)))]
    conns: u32,
    /// After the report, print every port, NIC, stack and TCP counter.
    #[arg(long)]
    counters: bool,
    #[command(flatten)]
    io: IoArgs,
}

/// Parses a byte count with an optional K/M/G (×1024ⁿ) suffix.
pub fn parse_bytes(text: &str) -> Result<u64, CliError> {
    let bad = || CliError::Usage(format!("--bytes '{text}': expected N, NK, NM or NG"));
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(bad()),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(mult).filter(|&b| b > 0).ok_or_else(bad)
}

/// Process CPU time now, ns (0 when the clock cannot be read).
fn cpu_ns() -> u64 {
    platform::cpu::process_cpu_time_ns().unwrap_or(0)
}

/// The rates of the report, every one over the same time base: `seconds`, first to last
/// payload byte (the run's wall time when no byte moved).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rates {
    seconds: f64,
    throughput_kbps: f64,
    throughput_mbps: f64,
    interrupts_per_sec: f64,
}

impl Rates {
    /// `bytes` moved and `wakeups` NIC wake-ups, over the transfer window
    /// `first_byte_ns..last_byte_ns` or else `elapsed_secs`.
    fn new(
        bytes: u64,
        wakeups: u64,
        first_byte_ns: Option<u64>,
        last_byte_ns: Option<u64>,
        elapsed_secs: f64,
    ) -> Rates {
        let seconds = match (first_byte_ns, last_byte_ns) {
            (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
            _ => elapsed_secs.max(1e-9),
        };
        Rates {
            seconds,
            throughput_kbps: ratio(bytes as f64 / 1024.0, seconds),
            throughput_mbps: ratio(bytes as f64 * 8.0 / 1e6, seconds),
            interrupts_per_sec: ratio(wakeups as f64, seconds),
        }
    }
}

/// `a / b`, 0 when `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// Writes the NTttcp-style report.
fn write_report<A>(
    out: &mut impl Write,
    r: &LiveReport<A>,
    stats: &TtcpStats,
    cpu_used_ns: u64,
    sending: bool,
) -> std::io::Result<()> {
    let p = r.port_counters();
    let bytes = stats.bytes;
    let (frames, frame_bytes) = if sending {
        (p.tx_frames, p.tx_bytes)
    } else {
        (p.rx_frames, p.rx_bytes)
    };
    let wakeups = r.host.nic_wakeups();
    let rates = Rates::new(
        bytes,
        wakeups,
        stats.first_byte_ns,
        stats.last_byte_ns,
        r.elapsed.as_secs_f64(),
    );
    let cycles =
        platform::cpu::cpu_frequency_hz().map_or(0.0, |hz| cpu_used_ns as f64 * hz as f64 / 1e9);
    writeln!(out, "bytes: {bytes}")?;
    writeln!(out, "seconds: {:.6}", rates.seconds)?;
    writeln!(out, "throughput_KBps: {:.2}", rates.throughput_kbps)?;
    writeln!(out, "throughput_Mbps: {:.2}", rates.throughput_mbps)?;
    writeln!(
        out,
        "avg_frame_bytes: {:.1}",
        ratio(frame_bytes as f64, frames as f64)
    )?;
    writeln!(out, "packets_sent: {}", p.tx_frames)?;
    writeln!(out, "packets_received: {}", p.rx_frames)?;
    writeln!(
        out,
        "packets_per_interrupt: {:.2}",
        ratio(r.host.rx_packets() as f64, wakeups as f64)
    )?;
    writeln!(out, "interrupts_per_sec: {:.1}", rates.interrupts_per_sec)?;
    writeln!(out, "cycles_per_byte: {:.2}", ratio(cycles, bytes as f64))?;
    let mut tcp = stack::TcpCounters::default();
    for s in &r.host.shards {
        tcp.add(&s.tcp);
    }
    writeln!(
        out,
        "retransmitted_segments: {}",
        tcp.retransmitted_segments
    )?;
    writeln!(out, "fast_retransmits: {}", tcp.fast_retransmits)?;
    writeln!(out, "rto_expirations: {}", tcp.rto_expirations)?;
    Ok(())
}

/// Sums the per-shard statistics: counts add, the first byte is the earliest, the last the
/// latest.
fn merge(all: impl Iterator<Item = TtcpStats>) -> TtcpStats {
    let mut t = TtcpStats::default();
    for s in all {
        t.bytes += s.bytes;
        t.conns_opened += s.conns_opened;
        t.conns_done += s.conns_done;
        t.conns_failed += s.conns_failed;
        t.conns_acknowledged += s.conns_acknowledged;
        t.pattern_errors += s.pattern_errors;
        t.listen_failed += s.listen_failed;
        t.first_byte_ns = match (t.first_byte_ns, s.first_byte_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        t.last_byte_ns = t.last_byte_ns.max(s.last_byte_ns);
    }
    t
}

pub fn run(cmd: TtcpCommand, out: &mut impl Write) -> Result<(), CliError> {
    match cmd {
        TtcpCommand::Recv(a) => recv(a, out),
        TtcpCommand::Send(a) => send(a, out),
    }
}

fn recv(a: RecvArgs, out: &mut impl Write) -> Result<(), CliError> {
    let live = a.io.resolve()?;
    if a.port == 0 {
        return Err(CliError::Usage("--port must be 1..=65535".into()));
    }
    if a.conns == 0 {
        return Err(CliError::Usage("--conns must be at least 1".into()));
    }
    let line = live.listening_line(a.port);
    let ended = Arc::new(AtomicU32::new(0));
    let (port, conns) = (a.port, a.conns);
    let cpu0 = cpu_ns();
    let r = live.run(
        move |_| TtcpReceiver::new(port, conns).count_host_wide(ended.clone()),
        true,
        || {
            writeln!(out, "{line}")?;
            out.flush()
        },
    )?;
    let cpu = cpu_ns().saturating_sub(cpu0);
    let stats = merge(r.host.shards.iter().map(|s| s.app.stats().clone()));
    write_report(out, &r, &stats, cpu, false)?;
    if a.counters {
        super::live::write_host_summary(out, &r)?;
    }
    let ended = stats.conns_done + stats.conns_failed;
    if ended < conns {
        return Err(CliError::Failed(format!(
            "stopped after {ended} of {conns} connections ended"
        )));
    }
    Ok(())
}

fn send(a: SendArgs, out: &mut impl Write) -> Result<(), CliError> {
    let live = a.io.resolve()?;
    let remote: SocketAddr = a.to.parse().map_err(|_| {
        CliError::Usage(format!(
            "--to '{}': expected IPv4:PORT or [IPv6]:PORT",
            a.to
        ))
    })?;
    if remote.port() == 0 {
        return Err(CliError::Usage("--to: port must be 1..=65535".into()));
    }
    let bytes = parse_bytes(&a.bytes)?;
    if a.conns == 0 || a.conns > SEND_CONNS_MAX {
        return Err(CliError::Usage(format!(
            "--conns must be 1..={SEND_CONNS_MAX}"
        )));
    }
    // The report counts every connection's bytes in one u64.
    if bytes.checked_mul(u64::from(a.conns)).is_none() {
        return Err(CliError::Usage(format!(
            "--bytes {} × --conns {} exceeds {} bytes, the most the report can count",
            a.bytes,
            a.conns,
            u64::MAX
        )));
    }
    let cfg = TtcpSendConfig {
        remote,
        bytes_per_conn: bytes,
        conns: a.conns,
    };
    let cpu0 = cpu_ns();
    let r = live.run(
        move |info| (info.shard == 0).then(|| TtcpSender::new(cfg)),
        true,
        || Ok(()),
    )?;
    let cpu = cpu_ns().saturating_sub(cpu0);
    let stats = merge(
        r.host
            .shards
            .iter()
            .filter_map(|s| s.app.as_ref().map(|a| a.stats().clone())),
    );
    write_report(out, &r, &stats, cpu, true)?;
    if a.counters {
        super::live::write_host_summary(out, &r)?;
    }
    if stats.conns_failed > 0 {
        return Err(CliError::Failed(format!(
            "{} of {} connections to {remote} failed (refused, reset or timed out)",
            stats.conns_failed, a.conns
        )));
    }
    if stats.conns_done < a.conns {
        return Err(CliError::Failed(format!(
            "stopped after {} of {} connections to {remote} finished",
            stats.conns_done, a.conns
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_suffixes_and_reject_zero_and_garbage() {
        assert_eq!(parse_bytes("100").ok(), Some(100));
        assert_eq!(parse_bytes("4K").ok(), Some(4096));
        assert_eq!(parse_bytes("100M").ok(), Some(100 << 20));
        assert_eq!(parse_bytes("2g").ok(), Some(2 << 30));
        for bad in ["0", "", "K", "5T", "1.5M", "-1", "99999999999999999999G"] {
            assert!(matches!(parse_bytes(bad), Err(CliError::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn every_rate_uses_the_transfer_window() {
        // The run: 0.057 s from first to last byte inside a 0.31 s run, 609 wake-ups.
        let r = Rates::new(
            57 * 1024 * 1024,
            609,
            Some(1_000_000_000),
            Some(1_057_000_000),
            0.31,
        );
        assert!((r.seconds - 0.057).abs() < 1e-12, "{r:?}");
        assert!((r.interrupts_per_sec - 609.0 / 0.057).abs() < 1e-6, "{r:?}");
        assert!(
            (r.throughput_kbps - 57.0 * 1024.0 / 0.057).abs() < 1e-6,
            "{r:?}"
        );
        // Both rates over one base: their ratio is bytes per wake-up, whatever the run's length.
        let per_wakeup = r.throughput_kbps * 1024.0 / r.interrupts_per_sec;
        assert!((per_wakeup - (57 * 1024 * 1024) as f64 / 609.0).abs() < 1e-3);
        // No byte moved: the run's wall time is the base of every rate.
        let idle = Rates::new(0, 10, None, None, 2.0);
        assert_eq!(
            idle,
            Rates {
                seconds: 2.0,
                throughput_kbps: 0.0,
                throughput_mbps: 0.0,
                interrupts_per_sec: 5.0
            }
        );
    }

    #[test]
    fn merged_stats_span_the_earliest_first_and_latest_last_byte() {
        let a = TtcpStats {
            bytes: 10,
            first_byte_ns: Some(5),
            last_byte_ns: Some(50),
            conns_done: 1,
            ..TtcpStats::default()
        };
        let b = TtcpStats {
            bytes: 7,
            first_byte_ns: Some(3),
            last_byte_ns: Some(40),
            conns_failed: 1,
            ..TtcpStats::default()
        };
        let m = merge([a, b, TtcpStats::default()].into_iter());
        assert_eq!(m.bytes, 17);
        assert_eq!((m.first_byte_ns, m.last_byte_ns), (Some(3), Some(50)));
        assert_eq!((m.conns_done, m.conns_failed), (1, 1));
    }
}
