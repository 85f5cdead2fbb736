//! The offload soak: connections of a server with an offload engine are handed to the engine
//! and restored at random moments while dozens of connections carry data both ways under each
//! seed's faults (seed 002; see `sim::workload::offload`). Every byte must arrive once and in
//! order, no connection may be reset or live on the host and the engine at once, and both
//! sides' conversation checkers must refuse nothing. Replay one seed with
//! `SIM_SEED=<seed> cargo test -p sim --test offload_soak`, or run more with
//! `rsstack sim soak --workload offload`.

use std::sync::Mutex;

use sim::workload::offload::{OffloadStats, run};
use sim::{run_seeds_parallel, seeds_from_env_or};

/// Seeds of the soak; together they move connections to the engine and back well over
/// 10,000 times.
const SEEDS: u64 = 60;

#[test]
fn ten_thousand_handoffs_and_restores_lose_duplicate_and_reset_nothing() {
    let seeds = seeds_from_env_or(0..SEEDS);
    let replay = seeds.len() as u64 != SEEDS;
    let total = Mutex::new(OffloadStats::default());
    let outcome = run_seeds_parallel(seeds, 0, |seed| {
        let (_, s) = run(seed)?;
        let mut t = total.lock().map_err(|e| e.to_string())?;
        t.handoffs += s.handoffs;
        t.restores += s.restores;
        t.restores_requested += s.restores_requested;
        t.restores_time_wait += s.restores_time_wait;
        t.restores_exhaustion += s.restores_exhaustion;
        t.refused += s.refused;
        t.frames_forwarded += s.frames_forwarded;
        t.deallocated += s.deallocated;
        Ok(())
    });
    if let Err(failures) = outcome {
        panic!("offload: {failures}");
    }
    let t = *total
        .lock()
        .expect("no seed panicked while holding the lock");
    eprintln!("offload soak: {} moves, {t:?}", t.moves());
    if replay {
        return;
    }
    assert!(t.moves() >= 10_000, "only {} moves: {t:?}", t.moves());
    assert!(t.restores_time_wait > 0, "no TIME_WAIT came back: {t:?}");
}
