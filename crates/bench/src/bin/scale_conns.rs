//! Cost per packet and memory per connection as connections grow (issue 17 item 1; see
//! `bench::scale`).
//!
//! `scale_conns N [--exchanges E] [--runs R] [--step-ns S] [--burst B] [--no-lookahead]
//! [--no-prefetch] [--compare-burst B | --compare-prefetch] [--no-memory] [--ecn]` opens N connections between two stacks, warms every one with one exchange,
//! then runs R measured loops of E 64-byte request/response exchanges (default E = max(N,
//! 100,000), R = 5) round-robin over them, and closes them all client first. `--burst B`
//! puts B exchanges in flight together, each side receiving the other's B frames as one
//! burst through `stack::RxLookahead` (`--no-lookahead`: the same bursts without it; see
//! `bench::scale::ScaleOptions`). `--no-prefetch` turns off the stacks' per-connection
//! prefetch (`Stack::set_tcp_prefetch`); `--compare-prefetch` runs R rounds of a loop with it
//! and a loop without on one warmed world and prints both medians. `--ecn` has both stacks negotiate ECN, so every segment
//! takes the full input path rather than header prediction's (`scripts/bench-hot-bytes.sh`).
//! It prints `key=value` lines:
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
//!   so malloc's own per-block overhead is not in the figure; the TCBs live in huge-page
//!   chunks (`platform::huge_box`), counted by their slots (768 bytes each), with the chunks'
//!   bytes mapped after the handshakes printed as `huge_chunk_bytes_idle` (the slots, the
//!   last chunk's unused part, one empty chunk kept per thread);
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
    /// `--compare-burst B`: one world, the three receive modes in rotation (see `compare`).
    compare_burst: Option<usize>,
    /// `--compare-prefetch`: one world, loops with and without the prefetch alternated
    /// (see `compare_prefetch`).
    compare_prefetch: bool,
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
        compare_burst: None,
        compare_prefetch: false,
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--no-memory" => a.memory = false,
            "--exchanges" => a.exchanges = bench::parse_bytes(&it.next()?)?,
            "--runs" => a.runs = it.next()?.parse().ok().filter(|&r| r > 0)?,
            "--step-ns" => a.opts.step_ns = it.next()?.parse().ok()?,
            "--burst" => a.opts.burst = it.next()?.parse().ok().filter(|&b| b > 0)?,
            "--no-lookahead" => a.opts.lookahead = false,
            "--no-prefetch" => a.opts.prefetch = false,
            "--compare-prefetch" => a.compare_prefetch = true,
            "--ecn" => a.opts.ecn = true,
            "--compare-burst" => {
                a.compare_burst = Some(it.next()?.parse().ok().filter(|&b| b > 1)?);
            }
            _ => return None,
        }
    }
    Some(a)
}

fn main() -> ExitCode {
    let Some(args) = parse() else {
        eprintln!(
            "usage: scale_conns CONNECTIONS [--exchanges E] [--runs R] [--step-ns S] [--burst B] \
             [--no-lookahead] [--no-prefetch] [--compare-burst B | --compare-prefetch] \
             [--no-memory] [--ecn]"
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

/// The calling thread's CPU time in ns (`/proc/thread-self/schedstat`), if the kernel reports
/// it: unlike wall time, not inflated by other jobs taking the CPU away.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The middle value (the upper one of an even count), 0 for none.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `--compare-burst B`: on one warmed world, R rounds of three measured loops each — one
/// exchange at a time, bursts of B with the look-ahead, bursts of B without — so the three
/// modes share the memory layout and the machine's load; prints each loop and the medians of
/// thread CPU ns per frame, and the two burst modes' ratio.
fn compare(w: &mut ScaleWorld, a: &Args, b: usize) -> Result<(), BulkError> {
    let n = a.opts.connections;
    let modes = [
        ("single", 1, false),
        ("burst_lookahead", b, true),
        ("burst_plain", b, false),
    ];
    let mut cpu: [Vec<f64>; 3] = Default::default();
    for r in 0..a.runs {
        for (k, &(name, burst, lookahead)) in modes.iter().enumerate() {
            w.opts.burst = burst;
            w.opts.lookahead = lookahead;
            let cpu0 = thread_cpu_ns();
            let c = scale_loop(w, a.exchanges)?;
            let t = cpu0.and_then(|t0| Some(thread_cpu_ns()?.saturating_sub(t0)));
            let ns = t.map_or(f64::NAN, |t| t as f64 / c.frames.max(1) as f64);
            println!(
                "compare_run={r} connections={n} mode={name} frames={} timer_runs={} \
                 cpu_ns_per_frame={ns:.1}",
                c.frames, c.timer_runs
            );
            if let Some(v) = cpu.get_mut(k) {
                v.push(ns);
            }
        }
    }
    let [single, with, plain] = cpu.map(|mut v| median(&mut v));
    println!(
        "compare connections={n} burst={b} runs={} single_cpu_ns_per_frame={single:.1} \
         burst_lookahead_cpu_ns_per_frame={with:.1} burst_plain_cpu_ns_per_frame={plain:.1} \
         lookahead_over_plain={:.3}",
        a.runs,
        with / plain
    );
    Ok(())
}

/// `--compare-prefetch`: on one warmed world, R rounds of two measured loops each — with
/// the stacks' per-connection prefetch and without (`ScaleOptions::prefetch`), in the mode
/// the other flags give (`--burst`) — so both share the memory layout and the machine's
/// load; prints each loop and the medians of thread CPU ns per frame, and their ratio.
fn compare_prefetch(w: &mut ScaleWorld, a: &Args) -> Result<(), BulkError> {
    let n = a.opts.connections;
    let mut cpu: [Vec<f64>; 2] = Default::default();
    for r in 0..a.runs {
        for (k, on) in [true, false].into_iter().enumerate() {
            w.opts.prefetch = on;
            let cpu0 = thread_cpu_ns();
            let c = scale_loop(w, a.exchanges)?;
            let t = cpu0.and_then(|t0| Some(thread_cpu_ns()?.saturating_sub(t0)));
            let ns = t.map_or(f64::NAN, |t| t as f64 / c.frames.max(1) as f64);
            println!(
                "compare_run={r} connections={n} burst={} prefetch={on} frames={} \
                 timer_runs={} cpu_ns_per_frame={ns:.1}",
                a.opts.burst, c.frames, c.timer_runs
            );
            if let Some(v) = cpu.get_mut(k) {
                v.push(ns);
            }
        }
    }
    let [with, without] = cpu.map(|mut v| median(&mut v));
    println!(
        "compare_prefetch connections={n} burst={} runs={} prefetch_cpu_ns_per_frame={with:.1} \
         plain_cpu_ns_per_frame={without:.1} prefetch_over_plain={:.3}",
        a.opts.burst,
        a.runs,
        with / without
    );
    Ok(())
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
    // The TCBs' huge-page chunks mapped (their live slots are in `heap().bytes`).
    let huge_idle = live_alloc::huge_chunk_bytes();
    breakdown(&w, "idle", h_idle - h_base);
    w.warm_up()?;
    if let Some(b) = a.compare_burst {
        return compare(&mut w, a, b);
    }
    if a.compare_prefetch {
        return compare_prefetch(&mut w, a);
    }

    let mut wall_ns_per_frame = Vec::with_capacity(a.runs);
    let mut cpu_ns_per_frame = Vec::with_capacity(a.runs);
    let mut frames_per_exchange = 0.0;
    for r in 0..a.runs {
        let start = Instant::now();
        let cpu0 = thread_cpu_ns();
        let c = scale_loop(&mut w, a.exchanges)?;
        let cpu_ns = cpu0.and_then(|t0| Some(thread_cpu_ns()?.saturating_sub(t0)));
        let wall_ns = start.elapsed().as_nanos() as f64;
        let frames = c.frames.max(1) as f64;
        let ns = wall_ns / frames;
        let cpu = cpu_ns.map_or(f64::NAN, |t| t as f64 / frames);
        frames_per_exchange = c.frames as f64 / c.exchanges.max(1) as f64;
        println!(
            "run={r} connections={n} burst={} exchanges={} frames={} timer_runs={} \
             wall_ns={wall_ns:.0} ns_per_frame={ns:.1} cpu_ns_per_frame={cpu:.1}",
            a.opts.burst, c.exchanges, c.frames, c.timer_runs
        );
        wall_ns_per_frame.push(ns);
        cpu_ns_per_frame.push(cpu);
    }
    let median_wall = median(&mut wall_ns_per_frame);
    let median_cpu = median(&mut cpu_ns_per_frame);
    println!(
        "result connections={n} burst={} lookahead={} prefetch={} exchanges_per_run={} runs={} \
         median_ns_per_frame={median_wall:.1} median_cpu_ns_per_frame={median_cpu:.1} \
         frames_per_exchange={frames_per_exchange:.3}",
        a.opts.burst,
        a.opts.burst > 1 && a.opts.lookahead,
        a.opts.prefetch,
        a.exchanges,
        a.runs
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
         empty_stack_bytes_server={empty_server_bytes} huge_chunk_bytes_idle={huge_idle}",
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
