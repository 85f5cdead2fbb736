//! TCP-soak throughput probe: runs every workload of `rsstack sim soak` (real stacks at both
//! ends, faulty links) over seeds `0..N` on one thread and prints frames delivered per
//! CPU-second of that thread, per workload and in all, plus an order-sensitive digest of every
//! run's trace digest (same build and seeds ⇒ same value; compare it across a change that must
//! not alter behaviour).
//!
//! Usage: `cargo run --release -p sim --example soak_rate -- [SEEDS] [WORKLOAD|all]
//! [WALK_EVERY_EVENTS]`. The third argument walks the TCB invariants after every that many
//! events instead of the soak's [`sim::workload::INVARIANT_WALK_EVERY_EVENTS`] (`max`: after
//! the first event only), to measure the simulation with its costliest checker at its
//! cheapest; the trace digest must not change with it.
//! CPU time is the thread's own (`/proc/thread-self/schedstat`), so other jobs on the machine
//! do not inflate it; where that file is missing wall time is used and the line says so.
//! When standard output is closed early (`soak_rate 3 | head -1`) the probe stops quietly
//! with status 0; any other write error is reported on standard error with status 1.

use sim::Fnv64;
use sim::workload::{INVARIANT_WALK_EVERY_EVENTS, Workload, run_with_walk_interval};
use std::io::{self, Write};
use std::time::Instant;

/// The calling thread's CPU time in ns, if the kernel reports it.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The exit status after a failed write to standard output: 0 when the reader went away (a
/// closed pipe ends the report, it is not an error of the probe), else 1 with the error named.
fn exit_status_after_write_error(e: &io::Error) -> i32 {
    if e.kind() == io::ErrorKind::BrokenPipe {
        0
    } else {
        eprintln!("soak_rate: writing the report failed: {e}");
        1
    }
}

fn main() {
    let stdout = io::stdout();
    if let Err(e) = report(&mut stdout.lock(), std::env::args().skip(1)) {
        std::process::exit(exit_status_after_write_error(&e));
    }
}

/// Parses the arguments (bad ones exit with status 2), runs the workloads and writes one line
/// per workload and a total to `out`; a write error ends the run at once and is returned.
fn report(out: &mut impl Write, mut args: impl Iterator<Item = String>) -> io::Result<()> {
    let seeds: u64 = match args.next().map(|s| s.parse()) {
        None => 20,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: soak_rate [SEEDS ≥ 1] [WORKLOAD|all] [WALK_EVERY_EVENTS ≥ 1|max]");
            std::process::exit(2);
        }
    };
    let workloads: Vec<Workload> = match args.next().as_deref() {
        None | Some("all") => Workload::ALL.to_vec(),
        Some(name) => match Workload::from_name(name) {
            Some(w) => vec![w],
            None => {
                eprintln!("unknown workload '{name}'");
                std::process::exit(2);
            }
        },
    };
    let walk_every_events: u64 = match args.next().as_deref() {
        None => INVARIANT_WALK_EVERY_EVENTS,
        Some("max") => u64::MAX,
        Some(n) => match n.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!(
                    "usage: soak_rate [SEEDS ≥ 1] [WORKLOAD|all] [WALK_EVERY_EVENTS ≥ 1|max]"
                );
                std::process::exit(2);
            }
        },
    };
    let mut digest = Fnv64::new();
    let (mut frames_all, mut cpu_all_ns, mut failures) = (0u64, 0u64, 0u64);
    let clock = if thread_cpu_ns().is_some() {
        "thread CPU"
    } else {
        "wall (no schedstat)"
    };
    for w in workloads {
        let wall = Instant::now();
        let cpu0 = thread_cpu_ns();
        let (mut frames, mut events) = (0u64, 0u64);
        for seed in 0..seeds {
            match run_with_walk_interval(w, seed, walk_every_events) {
                Ok(s) => {
                    frames += s.frames_delivered;
                    events += s.events;
                    digest.write_u64(s.trace_digest);
                }
                Err(e) => {
                    failures += 1;
                    eprintln!("FAIL {w} seed {seed}: {e}");
                }
            }
        }
        let cpu_ns = match (cpu0, thread_cpu_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => u64::try_from(wall.elapsed().as_nanos()).unwrap_or(u64::MAX),
        };
        frames_all += frames;
        cpu_all_ns += cpu_ns;
        writeln!(
            out,
            "{w:>9}: {frames:>9} frames {events:>9} events {:>8.3} s {clock}  {:>6.3} M frames/CPU-s",
            cpu_ns as f64 / 1e9,
            frames as f64 / (cpu_ns.max(1) as f64 / 1e9) / 1e6
        )?;
        out.flush()?;
    }
    writeln!(
        out,
        "all: {frames_all} frames in {:.3} s {clock}: {:.3} M frames/CPU-s; {failures} failures; digest of digests {:016x}",
        cpu_all_ns as f64 / 1e9,
        frames_all as f64 / (cpu_all_ns.max(1) as f64 / 1e9) / 1e6,
        digest.finish()
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_ends_the_report_with_status_0_and_other_errors_with_1() {
        let (reader, mut writer) = io::pipe().expect("pipe");
        drop(reader);
        // The Rust runtime ignores SIGPIPE, so the first line's write fails with EPIPE (instead
        // of killing the process) and the report stops there.
        let args = ["1", "bulk"].map(String::from).into_iter();
        let e = report(&mut writer, args).expect_err("the reader is gone");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(exit_status_after_write_error(&e), 0);
        let other = io::Error::new(io::ErrorKind::StorageFull, "disk full");
        assert_eq!(exit_status_after_write_error(&other), 1);
    }
}
