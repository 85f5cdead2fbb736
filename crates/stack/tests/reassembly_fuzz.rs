//! The `reassembly` fuzz target's seeded stand-in: the same body (`fuzz_body/reassembly.rs`:
//! declared IPv4/IPv6 datagrams sent as fragments at any offset and order, honest and lying,
//! every received datagram checked whole and the memory bounds after every frame) over inputs
//! from fixed seeds.

#[path = "fuzz_body/reassembly.rs"]
mod reassembly;
#[path = "fuzz_body/seeded.rs"]
mod seeded;

use seeded::Rng;

#[test]
fn random_inputs_never_break_the_reassembly_bounds_or_alter_a_datagram() {
    for (i, input) in seeded::random_inputs(0x7ea5, 2_000, 400).iter().enumerate() {
        let r = std::panic::catch_unwind(|| reassembly::run(input));
        assert!(r.is_ok(), "input {i} (seed 0x7ea5) failed");
    }
}

/// Programs that declare a few datagrams and send their fragments in random order, with
/// duplicates and lies: most deliver datagrams, so the content check had something to check.
#[test]
fn random_fragment_programs_deliver_only_whole_declared_datagrams() {
    let mut rng = Rng(0xf7a6);
    let mut received = 0;
    for i in 0..1_000 {
        let mut input = Vec::new();
        for _ in 0..1 + rng.below(3) {
            // Declare: op 0 (family and source in the high bits), a length, an ident byte.
            input.push((rng.below(2) as u8) << 7 | (rng.below(4) as u8) << 4);
            let len = rng.below(7_000) as u16;
            input.extend(len.to_le_bytes());
            input.push(rng.next_u64() as u8);
        }
        for _ in 0..rng.below(40) {
            let op = [1u8, 2, 3, 4, 5, 0x85, 0xc5, 6, 7][rng.below(9) as usize];
            input.push(op);
            let extra = rng.bytes(4);
            input.extend(extra);
        }
        match std::panic::catch_unwind(|| reassembly::run(&input)) {
            Ok(out) => received += out.datagrams_received,
            Err(_) => panic!("program {i} failed: {input:02x?}"),
        }
    }
    assert!(received > 50, "only {received} datagrams reassembled");
}
