//! Fuzz IPv4/IPv6 reassembly: declared datagrams sent as fragments at any offset, order and
//! repetition, honest or lying about more fragments; memory and table bounds after every
//! frame, and every received datagram exactly one declared datagram. The body is
//! `crates/stack/tests/fuzz_body/reassembly.rs`, shared with the suite's seeded stand-in
//! (`crates/stack/tests/reassembly_fuzz.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/stack/tests/fuzz_body/reassembly.rs"]
mod reassembly;

fuzz_target!(|data: &[u8]| {
    reassembly::run(data);
});
