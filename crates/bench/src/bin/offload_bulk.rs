//! Seed 002 Figures 7 and 8 in memory (see `bench::offload_bulk`).
//!
//! `offload_bulk CONNECTIONS [--offloaded K] [--packets P] [--turns-min T] [--warmup-turns W]
//! [--step-ns S]` opens CONNECTIONS connections, hands the first K (default 0) to the engine,
//! runs W warm-up turns (default 2,000), then measured turns until P TCP packets (default
//! 200,000) moved and at least T turns (default 0) ran. It
//! prints one `key=value` line: packets, the engine's share of them, bytes, wall ns per
//! packet, and every handoff command kind per 1,000 packets (`scripts/bench-offload.sh` runs
//! it under callgrind and divides the counted functions' instructions by `packets`).

use std::process::ExitCode;
use std::time::Instant;

use bench::offload_bulk::{OffloadBulkOptions, OffloadWorld};

struct Args {
    opts: OffloadBulkOptions,
    packets: u64,
    turns_min: u64,
    warmup_turns: u64,
}

fn parse() -> Option<Args> {
    let mut it = std::env::args().skip(1);
    let n = it
        .next()
        .and_then(|a| bench::parse_bytes(&a))
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&v| v > 0)?;
    let mut offloaded = 0usize;
    let mut a = Args {
        opts: OffloadBulkOptions::new(n, 0),
        packets: 200_000,
        turns_min: 0,
        warmup_turns: 2_000,
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--offloaded" => offloaded = it.next()?.parse().ok().filter(|&k| k <= n)?,
            "--packets" => a.packets = bench::parse_bytes(&it.next()?)?,
            "--warmup-turns" => a.warmup_turns = it.next()?.parse().ok()?,
            "--turns-min" => a.turns_min = it.next()?.parse().ok()?,
            "--step-ns" => a.opts.step_ns = it.next()?.parse().ok().filter(|&s| s > 0)?,
            _ => return None,
        }
    }
    a.opts.offloaded = offloaded;
    Some(a)
}

fn main() -> ExitCode {
    let Some(a) = parse() else {
        eprintln!(
            "usage: offload_bulk CONNECTIONS [--offloaded K] [--packets P] [--turns-min T] [--warmup-turns W] [--step-ns S]"
        );
        return ExitCode::from(2);
    };
    let mut w = match OffloadWorld::new(a.opts, a.warmup_turns) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("offload_bulk: setup: {e}");
            return ExitCode::FAILURE;
        }
    };
    let t0 = Instant::now();
    let c = match w.run(a.packets, a.turns_min) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("offload_bulk: {e}");
            return ExitCode::FAILURE;
        }
    };
    let wall_ns = t0.elapsed().as_nanos() as f64;
    let p = c.packets.max(1) as f64;
    let m = &c.messages;
    let per_k = |v: u64| v as f64 * 1000.0 / p;
    println!(
        "connections={} offloaded={} engine_conns={} packets={} engine_packets={} bytes={} turns={} wall_ns_per_packet={:.0} \
host_tx_per_kpkt={:.1} host_rx_per_kpkt={:.1} commands_per_kpkt={:.1} \
send_per_kpkt={:.1} recvd_per_kpkt={:.1} ctrl_per_kpkt={:.1} forward_per_kpkt={:.1} post_per_kpkt={:.1} handoff_per_kpkt={:.1} restore_per_kpkt={:.1} \
recv_per_kpkt={:.1} ack_per_kpkt={:.1} ctrl_in_per_kpkt={:.1} resource_per_kpkt={:.1} restore_in_per_kpkt={:.1} handoff_answer_per_kpkt={:.1}",
        a.opts.connections,
        a.opts.offloaded,
        w.engine_connections(),
        c.packets,
        c.engine_packets,
        c.bytes,
        c.turns,
        wall_ns / p,
        per_k(m.host_tx_frames),
        per_k(m.host_rx_frames),
        per_k(m.commands()),
        per_k(m.send),
        per_k(m.recvd),
        per_k(m.ctrl),
        per_k(m.forward),
        per_k(m.post),
        per_k(m.handoff),
        per_k(m.restore),
        per_k(m.recv),
        per_k(m.ack),
        per_k(m.ctrl_in),
        per_k(m.resource),
        per_k(m.restore_in),
        per_k(m.handoff_answer),
    );
    ExitCode::SUCCESS
}
