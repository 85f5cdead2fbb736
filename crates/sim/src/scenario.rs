//! Running one scenario over many seeds, and reporting the seeds that fail.
//!
//! A failing seed is printed (to stderr) and named in the returned error, so it can be
//! replayed alone: set `SIM_SEED=<seed>` (or a comma-separated list) and use
//! [`seeds_from_env_or`] to pick the seeds a test runs.

use core::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Environment variable that overrides the seeds of [`seeds_from_env_or`].
pub const SEED_ENV: &str = "SIM_SEED";

/// Most failures kept (and printed) by [`run_seeds`]; further failures are only counted.
pub const FAILURES_KEPT_MAX: usize = 20;

/// One failed seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedFailure {
    /// The seed that failed.
    pub seed: u64,
    /// What the scenario reported (or the panic message).
    pub message: String,
}

/// The seeds that failed in a [`run_seeds`] call.
#[derive(Clone, PartialEq, Eq)]
pub struct SeedFailures {
    /// Seeds run.
    pub runs: u64,
    /// Seeds failed (may exceed `failures.len()`).
    pub failed: u64,
    /// The first [`FAILURES_KEPT_MAX`] failures, in seed order of running.
    pub failures: Vec<SeedFailure>,
}

impl SeedFailures {
    /// The failing seeds kept.
    pub fn seeds(&self) -> Vec<u64> {
        self.failures.iter().map(|f| f.seed).collect()
    }
}

impl fmt::Display for SeedFailures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} seeds failed; failing seeds: {:?}",
            self.failed,
            self.runs,
            self.seeds()
        )?;
        for fail in &self.failures {
            write!(f, "\n  seed {}: {}", fail.seed, fail.message)?;
        }
        if let Some(first) = self.failures.first() {
            write!(f, "\nreplay one with {SEED_ENV}={}", first.seed)?;
        }
        Ok(())
    }
}

// Debug shows the readable report, so `.expect()` / `{:?}` in a test prints the seeds.
impl fmt::Debug for SeedFailures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for SeedFailures {}

/// Run `scenario` once per seed. Every seed runs even after a failure; a panic inside the
/// scenario counts as a failure of that seed. Each failure is printed to stderr as it
/// happens, with its seed.
pub fn run_seeds<I, F>(seeds: I, mut scenario: F) -> Result<(), SeedFailures>
where
    I: IntoIterator<Item = u64>,
    F: FnMut(u64) -> Result<(), String>,
{
    let mut report = SeedFailures {
        runs: 0,
        failed: 0,
        failures: Vec::new(),
    };
    for seed in seeds {
        report.runs += 1;
        let outcome = match catch_unwind(AssertUnwindSafe(|| scenario(seed))) {
            Ok(result) => result,
            Err(payload) => Err(panic_message(payload.as_ref())),
        };
        if let Err(message) = outcome {
            eprintln!("sim: seed {seed} FAILED: {message}");
            report.failed += 1;
            if report.failures.len() < FAILURES_KEPT_MAX {
                report.failures.push(SeedFailure { seed, message });
            }
        }
    }
    if report.failed == 0 {
        Ok(())
    } else {
        Err(report)
    }
}

/// Like [`run_seeds`], spread over `threads` worker threads (0 = the machine's available
/// parallelism). Each seed still runs alone in its own world, so results are the same as
/// sequentially; failures are reported in ascending seed order whatever thread found them.
pub fn run_seeds_parallel<I, F>(seeds: I, threads: usize, scenario: F) -> Result<(), SeedFailures>
where
    I: IntoIterator<Item = u64>,
    F: Fn(u64) -> Result<(), String> + Sync,
{
    let seeds: Vec<u64> = seeds.into_iter().collect();
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
    .clamp(1, seeds.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut failures: Vec<(usize, SeedFailure)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut found = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&seed) = seeds.get(i) else {
                            return found;
                        };
                        let outcome = match catch_unwind(AssertUnwindSafe(|| scenario(seed))) {
                            Ok(result) => result,
                            Err(payload) => Err(panic_message(payload.as_ref())),
                        };
                        if let Err(message) = outcome {
                            eprintln!("sim: seed {seed} FAILED: {message}");
                            found.push((i, SeedFailure { seed, message }));
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                // Scenario panics are caught above; a worker can only fail outside them.
                w.join().unwrap_or_else(|_| {
                    vec![(
                        usize::MAX,
                        SeedFailure {
                            seed: u64::MAX,
                            message: "a worker thread panicked outside any scenario".into(),
                        },
                    )]
                })
            })
            .collect()
    });
    failures.sort_by_key(|(i, _)| *i);
    let failed = failures.len() as u64;
    if failed == 0 {
        return Ok(());
    }
    Err(SeedFailures {
        runs: seeds.len() as u64,
        failed,
        failures: failures
            .into_iter()
            .map(|(_, f)| f)
            .take(FAILURES_KEPT_MAX)
            .collect(),
    })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

/// The seeds named by `SIM_SEED` (comma-separated decimal or `0x` hex) if it is set and
/// parses, else `default`.
pub fn seeds_from_env_or(default: impl IntoIterator<Item = u64>) -> Vec<u64> {
    match std::env::var(SEED_ENV).ok().and_then(|v| parse_seeds(&v)) {
        Some(seeds) => seeds,
        None => default.into_iter().collect(),
    }
}

/// Parse a comma-separated seed list; `None` if empty or any item is malformed.
pub fn parse_seeds(list: &str) -> Option<Vec<u64>> {
    let seeds: Option<Vec<u64>> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(
            |s| match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            },
        )
        .collect();
    seeds.filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_seeds_names_every_failing_seed_and_keeps_running() {
        let mut ran = Vec::new();
        let r = run_seeds(0..10, |seed| {
            ran.push(seed);
            if seed % 4 == 1 {
                Err(format!("odd luck {seed}"))
            } else {
                Ok(())
            }
        });
        assert_eq!(ran, (0..10).collect::<Vec<_>>());
        let Err(report) = r else {
            panic!("failures must be reported");
        };
        assert_eq!(report.seeds(), vec![1, 5, 9]);
        assert_eq!(report.failed, 3);
        let msg = report.to_string();
        assert!(msg.contains("[1, 5, 9]"), "{msg}");
        assert!(msg.contains("odd luck 5"), "{msg}");
        assert!(msg.contains("SIM_SEED=1"), "{msg}");
    }

    #[test]
    fn run_seeds_turns_a_panic_into_a_seed_failure() {
        let r = run_seeds([3, 4], |seed| {
            if seed == 4 {
                panic!("boom");
            }
            Ok(())
        });
        let Err(report) = r else {
            panic!("the panic must be reported");
        };
        assert_eq!(report.seeds(), vec![4]);
        assert!(report.failures.iter().any(|f| f.message.contains("boom")));
    }

    #[test]
    fn run_seeds_parallel_reports_the_same_failures_in_seed_order() {
        let scenario = |seed: u64| {
            if seed % 7 == 3 {
                Err(format!("bad {seed}"))
            } else if seed == 20 {
                panic!("boom {seed}");
            } else {
                Ok(())
            }
        };
        let seq = run_seeds(0..40, scenario).err();
        let par = run_seeds_parallel(0..40, 3, scenario).err();
        assert!(seq.is_some());
        assert_eq!(seq, par);
        assert_eq!(
            par.map(|r| r.seeds()),
            Some(vec![3, 10, 17, 20, 24, 31, 38])
        );
        assert!(run_seeds_parallel(0..40, 0, |_| Ok(())).is_ok());
        assert!(run_seeds_parallel(Vec::new(), 4, |_| Err("never".into())).is_ok());
    }

    #[test]
    fn run_seeds_passes_when_every_seed_passes() {
        assert!(run_seeds(0..5, |_| Ok(())).is_ok());
    }

    #[test]
    fn parse_seeds_accepts_decimal_and_hex_and_rejects_garbage() {
        assert_eq!(parse_seeds("1, 0x10,7"), Some(vec![1, 16, 7]));
        assert_eq!(parse_seeds("1,x"), None);
        assert_eq!(parse_seeds(" "), None);
    }
}
