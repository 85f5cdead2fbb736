//! The `sim_faults` fuzz target's seeded stand-in: the same body (`fuzz_body/sim_faults.rs`:
//! a soak workload, seed and freely combined fault schedule chosen by the input, the whole
//! simulator run and its byte-stream checks) over inputs from a fixed seed.

#[path = "fuzz_body/sim_faults.rs"]
mod sim_faults;

/// SplitMix64 (no dependency): the inputs are the same on every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[test]
fn random_seeds_and_fault_schedules_deliver_every_byte_once_in_order() {
    let mut state = 0x51fa_u64;
    let mut bytes = 0;
    for _ in 0..200 {
        let input: Vec<u8> = (0..24).map(|_| next(&mut state) as u8).collect();
        bytes += sim_faults::run(&input).bytes_verified;
    }
    assert!(bytes > 0, "no run delivered anything to check");
}
