//! The body of the `packetdrill_parse` fuzz target (`fuzz/fuzz_targets/packetdrill_parse.rs`)
//! and of its seeded stand-in (`crates/conformance/tests/packetdrill_fuzz.rs`), included by
//! path in both.
//!
//! The input, read as UTF-8 (invalid sequences replaced), goes to the script parser and each
//! of its lines to the event parser. Invariants: nothing panics; a script that parses prints
//! to text that parses again to the same content, and printing that is a fixpoint (the
//! printer and the parser agree on every script the parser accepts).
#![allow(dead_code)]

use conformance::{parse_event, parse_script};

/// Runs one input; `true` when the whole input parsed as a script.
pub fn run(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(64) {
        let _ = parse_event(line);
    }
    let Ok(first) = parse_script(&text) else {
        return false;
    };
    let printed = first.to_string();
    let second = match parse_script(&printed) {
        Ok(s) => s,
        Err(e) => panic!("a parsed script prints to text that does not parse: {e}\n{printed}"),
    };
    assert!(
        first.same_content(&second),
        "the script changed through print and parse:\n{printed}"
    );
    assert_eq!(printed, second.to_string(), "printing is not a fixpoint");
    true
}
