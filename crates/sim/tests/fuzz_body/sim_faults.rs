//! The body of the `sim_faults` fuzz target (`fuzz/fuzz_targets/sim_faults.rs`) and of its
//! seeded stand-in (`crates/sim/tests/sim_faults_fuzz.rs`), included by path in both.
//!
//! The input chooses a soak workload, a seed (the plan and every random stream of the world)
//! and a fault schedule — loss, duplication, reordering, corruption and a link flap, each
//! within the range the soak's fault classes use, combined freely — and runs the whole
//! simulator through `sim::workload::run_with_faults`. Any `Err` is a failure: a byte
//! delivered twice, out of order or wrong, a connection left unfinished when the world went
//! idle, a table over its cap, or a connection that failed (none may, at any loss).
#![allow(dead_code)]

use sim::workload::{FaultProfile, RunSummary, Workload, run_with_faults};

/// The workloads that take a fault schedule (`Migrate` and `Offload` build their own).
const WORKLOADS: [Workload; 5] = [
    Workload::BulkOneWay,
    Workload::BulkBothWays,
    Workload::RequestResponse,
    Workload::ManyConnections,
    Workload::Handoff,
];

fn byte(data: &[u8], i: usize) -> u8 {
    data.get(i).copied().unwrap_or(0)
}

/// A fraction in [0, `max`] from two input bytes.
fn fraction(data: &[u8], i: usize, max: f64) -> f64 {
    f64::from(u16::from_le_bytes([byte(data, i), byte(data, i + 1)])) / f64::from(u16::MAX) * max
}

/// The workload, seed and faults an input names.
pub fn decode(data: &[u8]) -> (Workload, u64, FaultProfile) {
    let workload = WORKLOADS[usize::from(byte(data, 0)) % WORKLOADS.len()];
    let mut seed_bytes = [0u8; 8];
    for (k, b) in seed_bytes.iter_mut().enumerate() {
        *b = byte(data, 1 + k);
    }
    let seed = u64::from_le_bytes(seed_bytes);
    let present = byte(data, 9);
    let flap_ns = (present & 16 != 0).then(|| {
        let down = 5_000_000
            + u64::from(u32::from_le_bytes([
                byte(data, 18),
                byte(data, 19),
                byte(data, 20),
                0,
            ])) % 200_000_000;
        let up_after = 10_000_000
            + u64::from(u32::from_le_bytes([
                byte(data, 21),
                byte(data, 22),
                byte(data, 23),
                0,
            ])) % 300_000_000;
        (down, down + up_after)
    });
    let faults = FaultProfile {
        loss: if present & 1 != 0 {
            fraction(data, 10, 0.20)
        } else {
            0.0
        },
        duplicate: if present & 2 != 0 {
            fraction(data, 12, 0.05)
        } else {
            0.0
        },
        reorder: if present & 4 != 0 {
            fraction(data, 14, 0.10)
        } else {
            0.0
        },
        corrupt: if present & 8 != 0 {
            fraction(data, 16, 0.02)
        } else {
            0.0
        },
        flap_ns,
    };
    (workload, seed, faults)
}

/// Runs one input; panics with the soak's message when the run fails.
pub fn run(data: &[u8]) -> RunSummary {
    let (workload, seed, faults) = decode(data);
    match run_with_faults(workload, seed, faults) {
        Ok(summary) => summary,
        Err(e) => panic!("{workload} seed {seed} under {faults:?}: {e}"),
    }
}
