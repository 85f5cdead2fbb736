//! The `live_tcp` fuzz target's seeded stand-in: the same body
//! (`fuzz_body/live_tcp.rs`: two stacks with a live connection, a program of wire faults,
//! forged segments, listener floods, timer advances and application calls; the delivered
//! streams checked byte by byte against what each peer sent) over a few thousand inputs from
//! fixed seeds, so the suite runs what `scripts/fuzz.sh` runs for longer.

#[path = "fuzz_body/live_tcp.rs"]
mod live_tcp;
#[path = "fuzz_body/seeded.rs"]
mod seeded;

use seeded::Rng;

/// The harness is not vacuous: with no operations, both streams arrive whole.
#[test]
fn an_empty_program_delivers_both_streams_whole() {
    for config in [
        [0u8; 10],
        [0xff; 10],
        [0x7f, 0x12, 0x34, 0x56, 0x78, 0x3b, 1, 2, 3, 4],
    ] {
        let out = live_tcp::run(&config);
        assert_eq!(
            (out.b_read_bytes, out.a_read_bytes),
            (20_000, 10_000),
            "{config:?}"
        );
    }
}

#[test]
fn random_inputs_keep_every_stream_a_prefix_of_what_was_sent() {
    for (i, input) in seeded::random_inputs(0x11fe_7c90, 1_000, 600)
        .iter()
        .enumerate()
    {
        let r = std::panic::catch_unwind(|| live_tcp::run(input));
        assert!(r.is_ok(), "input {i} (seed 0x11fe_7c90) failed");
    }
}

/// Programs made of whole operations, weighted towards the ones that move state (forged
/// segments near the real sequence numbers, wire faults, deadlines), which random bytes reach
/// less often. Most of them still deliver data, so the checks had bytes to check.
#[test]
fn random_programs_keep_every_stream_a_prefix_of_what_was_sent() {
    let mut rng = Rng(0x5eed_0f11);
    let mut delivered = 0;
    let programs = 1_000;
    for i in 0..programs {
        let mut input = rng.bytes(10);
        for _ in 0..rng.below(60) {
            let dir = (rng.below(2) as u8) << 7;
            let op = [0u8, 2, 2, 3, 4, 5, 6, 7, 7, 8, 9, 10, 12, 1][rng.below(14) as usize];
            input.push(dir | op);
            let len = 1 + rng.below(24) as usize;
            input.extend(rng.bytes(len));
        }
        let r = std::panic::catch_unwind(|| live_tcp::run(&input));
        match r {
            Ok(out) => delivered += u32::from(out.b_read_bytes > 0 && out.a_read_bytes > 0),
            Err(_) => panic!("program {i} failed: {input:02x?}"),
        }
    }
    assert!(
        delivered > programs / 2,
        "only {delivered} of {programs} delivered both ways"
    );
}
