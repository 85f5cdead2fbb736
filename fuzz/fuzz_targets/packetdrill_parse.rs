//! Fuzz the packetdrill script parser: never a panic, and every script it accepts prints to
//! text that parses back to the same content. The body is
//! `crates/conformance/tests/fuzz_body/packetdrill_parse.rs`, shared with the suite's seeded
//! stand-in (`crates/conformance/tests/packetdrill_fuzz.rs`). `scripts/fuzz.sh` seeds it with
//! the corpus scripts.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/conformance/tests/fuzz_body/packetdrill_parse.rs"]
mod packetdrill_parse;

fuzz_target!(|data: &[u8]| {
    packetdrill_parse::run(data);
});
