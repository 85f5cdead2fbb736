//! Fuzz the whole simulator: the input chooses a soak workload, a seed and a fault schedule
//! (loss, duplication, reordering, corruption, a flap, freely combined within the soak's
//! ranges); the run must deliver every byte once and in order and finish every connection.
//! The body is `crates/sim/tests/fuzz_body/sim_faults.rs`, shared with the suite's seeded
//! stand-in (`crates/sim/tests/sim_faults_fuzz.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/sim/tests/fuzz_body/sim_faults.rs"]
mod sim_faults;

fuzz_target!(|data: &[u8]| {
    sim_faults::run(data);
});
