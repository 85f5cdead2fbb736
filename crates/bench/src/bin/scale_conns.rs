//! Cost per packet and memory per connection as connections grow (issue 17 item 1; see
//! `bench::scale`).
//!
//! `scale_conns N [--exchanges E] [--runs R] [--step-ns S] [--no-memory]` opens N
//! connections between two stacks, warms every one with one exchange, then runs R measured
//! loops of E 64-byte request/response exchanges (default E = max(N, 100,000), R = 5)
//! round-robin over them, and closes them all client first. It prints `key=value` lines:
//!
//! - `run`: each measured loop's frames and wall time;
//! - `result`: the median wall ns per frame and frames per exchange (the callgrind script
//!   `scripts/bench-scale.sh` counts `scale_loop` and divides by `frames`);
//! - `memory` (unless `--no-memory`): live heap bytes per connection endpoint idle (after
//!   the handshake), after traffic (after the measured loops), and per connection in
//!   TIME-WAIT (the client's whole stack minus an empty one, over N; the server holds none),
//!   and what the TIME-WAIT records alone hold per record (`Stack::tcp_time_wait_heap_bytes`);
//!   after traffic also after 3 s of silence (`ScaleWorld::idle_for`: idle rings released).
//!   Heap is counted by the binary's global allocator (`src/live_alloc.rs`): requested bytes,
//!   so malloc's own per-block overhead is not in the figure;
//! - `memory_breakdown` (unless `--no-memory`), idle and after traffic + 3 s idle: what an
//!   endpoint's heap holds, per endpoint — the TCB (`tcp::Connection`) and its rare counters' boxes (none without a rare event),
//!   the TCP configurations the connections share (`Stack::tcp_configs_held`), the socket
//!   table's slots, the connection table's index, the deadline wheel (the last three
//!   with their spare capacity), and the rest (ring storage still held, per-stack state).

use std::process::ExitCode;
use std::time::Instant;

use bench::bulk::BulkError;
use bench::scale::{ScaleOptions, ScaleWorld, scale_loop};

#[path = "../live_alloc.rs"]
mod live_alloc;
use live_alloc::heap;

struct Args {
    opts: ScaleOptions,
    exchanges: u64,
    runs: usize,
    memory: bool,
}

fn parse() -> Option<Args> {
    let mut it = std::env::args().skip(1);
    let n = it
        .next()
        .and_then(|a| bench::parse_bytes(&a))
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&v| v > 0)?;
    let mut a = Args {
        opts: ScaleOptions::new(n),
        exchanges: (n as u64).max(100_000),
        runs: 5,
        memory: true,
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--no-memory" => a.memory = false,
            "--exchanges" => a.exchanges = bench::parse_bytes(&it.next()?)?,
            "--runs" => a.runs = it.next()?.parse().ok().filter(|&r| r > 0)?,
            "--step-ns" => a.opts.step_ns = it.next()?.parse().ok()?,
            _ => return None,
        }
    }
    Some(a)
}

fn main() -> ExitCode {
    let Some(args) = parse() else {
        eprintln!(
            "usage: scale_conns CONNECTIONS [--exchanges E] [--runs R] [--step-ns S] [--no-memory]"
        );
        return ExitCode::from(2);
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale_conns: {e}");
            ExitCode::FAILURE
        }
    }
}

fn per(bytes: usize, n: usize) -> f64 {
    bytes as f64 / n.max(1) as f64
}

fn run(a: &Args) -> Result<(), BulkError> {
    let n = a.opts.connections;
    // What two empty stacks of this configuration hold, each alone.
    let (empty_client_bytes, empty_server_bytes) = if a.memory {
        let empty = ScaleWorld::new(a.opts)?;
        let (c, s) = (empty.idle.client, empty.idle.server);
        let h1 = heap().bytes;
        drop(c);
        let h2 = heap().bytes;
        drop(s);
        (h1 - h2, h2 - heap().bytes)
    } else {
        (0, 0)
    };

    let h_empty = heap().bytes;
    let mut w = ScaleWorld::new(a.opts)?;
    let h_base = heap().bytes;
    w.connect()?;
    let h_idle = heap().bytes;
    breakdown(&w, "idle", h_idle - h_base);
    w.warm_up()?;

    let mut wall_ns_per_frame = Vec::with_capacity(a.runs);
    let mut frames_per_exchange = 0.0;
    for r in 0..a.runs {
        let start = Instant::now();
        let c = scale_loop(&mut w, a.exchanges)?;
        let wall_ns = start.elapsed().as_nanos() as f64;
        let ns = wall_ns / c.frames.max(1) as f64;
        frames_per_exchange = c.frames as f64 / c.exchanges.max(1) as f64;
        println!(
            "run={r} connections={n} exchanges={} frames={} timer_runs={} wall_ns={wall_ns:.0} \
             ns_per_frame={ns:.1}",
            c.exchanges, c.frames, c.timer_runs
        );
        wall_ns_per_frame.push(ns);
    }
    wall_ns_per_frame.sort_by(f64::total_cmp);
    let median = wall_ns_per_frame
        .get(wall_ns_per_frame.len() / 2)
        .copied()
        .unwrap_or(0.0);
    println!(
        "result connections={n} exchanges_per_run={} runs={} median_ns_per_frame={median:.1} \
         frames_per_exchange={frames_per_exchange:.3}",
        a.exchanges, a.runs
    );
    if !a.memory {
        return Ok(());
    }
    let h_traffic = heap().bytes;
    // Three seconds of silence in 10 ms steps: past the idle release (1 s), and long enough
    // for the sweep (1,024 slots per 10 ms) to visit 100,000 slots per stack twice.
    w.idle_for(3_000_000_000, 10_000_000);
    let h_idle_after = heap().bytes;
    breakdown(&w, "after_traffic_idle", h_idle_after - h_base);
    let (time_wait, server_left) = w.close_all()?;
    let h_closed = heap().bytes;
    let ScaleWorld { idle, .. } = w;
    let (client, server) = (idle.client, idle.server);
    // What the TIME-WAIT records themselves hold (records and index), per record.
    let tw_table = per(
        client.tcp_time_wait_heap_bytes(),
        client.tcp_time_wait_count(),
    );
    drop(server);
    let h_no_server = heap().bytes;
    drop(client);
    let client_bytes = h_no_server - heap().bytes;
    let _ = (h_empty, h_closed);
    println!(
        "memory connections={n} idle_bytes_per_endpoint={:.1} after_traffic_bytes_per_endpoint={:.1} \
         after_traffic_idle_bytes_per_endpoint={:.1} time_wait_connections={time_wait} server_connections_left={server_left} \
         time_wait_bytes_per_connection={:.1} time_wait_table_bytes_per_record={tw_table:.1} \
         empty_stack_bytes_client={empty_client_bytes} \
         empty_stack_bytes_server={empty_server_bytes}",
        per(h_idle - h_base, 2 * n),
        per(h_traffic - h_base, 2 * n),
        per(h_idle_after - h_base, 2 * n),
        per(client_bytes.saturating_sub(empty_client_bytes), n),
    );
    Ok(())
}

/// Prints what `total_bytes` of heap (both stacks, above their empty state) holds, per
/// connection endpoint.
fn breakdown(w: &ScaleWorld, when: &str, total_bytes: usize) {
    let (c, s) = (&w.idle.client, &w.idle.server);
    let endpoints = 2 * w.opts.connections;
    let live = c.tcp_connection_count() + s.tcp_connection_count();
    let tcb = live * core::mem::size_of::<tcp::Connection>();
    let counters = c.tcp_counters_heap_bytes() + s.tcp_counters_heap_bytes();
    let configs = c.tcp_configs_held().1 + s.tcp_configs_held().1;
    let slots = c.socket_table_heap_bytes() + s.socket_table_heap_bytes();
    let table = c.tcp_conn_table_heap_bytes() + s.tcp_conn_table_heap_bytes();
    let timers = c.tcp_timers_heap_bytes() + s.tcp_timers_heap_bytes();
    let rest = total_bytes.saturating_sub(tcb + counters + configs + slots + table + timers);
    println!(
        "memory_breakdown when={when} connections={} total_bytes_per_endpoint={:.1} \
         tcb_bytes={:.1} tcb_counters_bytes={:.1} tcp_configs_bytes={:.1} socket_slots_bytes={:.1} \
         conn_table_bytes={:.1} timer_wheel_bytes={:.1} rest_bytes={:.1}",
        w.opts.connections,
        per(total_bytes, endpoints),
        per(tcb, endpoints),
        per(counters, endpoints),
        per(configs, endpoints),
        per(slots, endpoints),
        per(table, endpoints),
        per(timers, endpoints),
        per(rest, endpoints),
    );
}
