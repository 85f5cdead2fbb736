//! `rsstack sim …`: the deterministic simulator from the command line.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Mutex;

use clap::{Args, Subcommand};
use sim::workload::{RunSummary, Workload, run};

use super::CliError;

/// Most `--seeds` in one run: a bound on the loop (each seed runs every workload; 100,000
/// seeds take hours on a few cores). Longer soaks continue with `--first-seed`.
pub const SEEDS_MAX: u64 = 100_000;
/// Most `--threads`.
pub const THREADS_MAX: i64 = 1024;

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Run the TCP soak: every workload over many seeds, real stacks on faulty links.
    Soak(SoakArgs),
}

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Seeds to run (1 to 100,000 per run; continue with --first-seed); each seed runs every
    /// selected workload under its own fault profile.
    #[arg(long, default_value_t = 200, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=SEEDS_MAX))]
    seeds: u64,
    /// First seed (seeds FIRST..FIRST+N); rerun one failure with `--first-seed S --seeds 1`.
    #[arg(long, default_value_t = 0, value_name = "S")]
    first_seed: u64,
    /// Only this workload: bulk, bulk-both, rr, many or handoff. Default: all of them.
    #[arg(long, value_parser = parse_workload, value_name = "W")]
    workload: Option<Workload>,
    /// Worker threads (0: one per core; at most 1024, and never more than --seeds).
    #[arg(long, default_value_t = 0, value_name = "T",
          value_parser = clap::value_parser!(u16).range(0..=THREADS_MAX))]
    threads: u16,
}

fn parse_workload(name: &str) -> Result<Workload, String> {
    Workload::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
        format!(
            "unknown workload '{name}', expected one of {}",
            names.join(", ")
        )
    })
}

pub fn run_command(cmd: SimCommand, out: &mut impl Write) -> Result<(), CliError> {
    match cmd {
        SimCommand::Soak(args) => soak(args, out),
    }
}

/// Per-workload totals.
#[derive(Default)]
struct Totals {
    runs: u64,
    failures: u64,
    bytes_verified: u64,
    connections: u64,
    events: u64,
}

fn soak(args: SoakArgs, out: &mut impl Write) -> Result<(), CliError> {
    if args.seeds == 0 || args.seeds > SEEDS_MAX {
        return Err(CliError::Usage(format!("--seeds must be 1..={SEEDS_MAX}")));
    }
    let last = args
        .first_seed
        .checked_add(args.seeds)
        .ok_or_else(|| CliError::Usage("--first-seed + --seeds overflows".into()))?;
    let workloads: Vec<Workload> = match args.workload {
        Some(w) => vec![w],
        None => Workload::ALL.to_vec(),
    };
    let threads = match args.threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => usize::from(n),
    }
    .min(usize::try_from(args.seeds).unwrap_or(usize::MAX));
    let started = std::time::Instant::now();
    let mut failing_seeds = BTreeSet::new();
    let mut failure_lines = Vec::new();
    for &w in &workloads {
        let totals = Mutex::new(Totals::default());
        let failures = Mutex::new(Vec::new());
        let next = std::sync::atomic::AtomicU64::new(args.first_seed);
        std::thread::scope(|scope| {
            for _ in 0..threads.max(1) {
                scope.spawn(|| {
                    loop {
                        let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if seed >= last {
                            break;
                        }
                        let outcome = std::panic::catch_unwind(|| run(w, seed))
                            .unwrap_or_else(|p| Err(panic_message(&p)));
                        let mut t = totals.lock().unwrap_or_else(|e| e.into_inner());
                        t.runs += 1;
                        match outcome {
                            Ok(RunSummary {
                                bytes_verified,
                                connections_completed,
                                connections_failed,
                                events,
                                ..
                            }) => {
                                t.bytes_verified += bytes_verified;
                                t.connections += connections_completed + connections_failed;
                                t.events += events;
                            }
                            Err(e) => {
                                t.failures += 1;
                                failures
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .push((seed, e));
                            }
                        }
                    }
                });
            }
        });
        let t = totals.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut f = failures.into_inner().unwrap_or_else(|e| e.into_inner());
        f.sort_by_key(|(seed, _)| *seed);
        writeln!(
            out,
            "workload {w}: {} seeds, {} failures, {} connections, {:.1} MB verified, {} events",
            t.runs,
            t.failures,
            t.connections,
            t.bytes_verified as f64 / 1e6,
            t.events
        )?;
        for (seed, e) in f {
            failing_seeds.insert(seed);
            failure_lines.push(format!("FAIL {w} seed {seed}: {e}"));
        }
    }
    for line in &failure_lines {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "elapsed_s: {:.1}", started.elapsed().as_secs_f64())?;
    writeln!(
        out,
        "seeds: {}, failures: {}",
        args.seeds,
        failing_seeds.len()
    )?;
    if failing_seeds.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "{} of {} seeds failed; rerun one with --first-seed S --seeds 1",
            failing_seeds.len(),
            args.seeds
        )))
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    let text = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into());
    format!("panicked: {text}")
}
