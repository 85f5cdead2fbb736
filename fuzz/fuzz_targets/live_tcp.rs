//! Fuzz a live TCP connection between two stacks: the input is a program of wire faults,
//! forged segments, listener floods, timer advances and application calls; every byte an
//! application reads must continue its peer's stream. The body is
//! `crates/stack/tests/fuzz_body/live_tcp.rs`, shared with the suite's seeded stand-in
//! (`crates/stack/tests/live_tcp_fuzz.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/stack/tests/fuzz_body/live_tcp.rs"]
mod live_tcp;

fuzz_target!(|data: &[u8]| {
    live_tcp::run(data);
});
