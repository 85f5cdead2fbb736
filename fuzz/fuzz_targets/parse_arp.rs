//! Fuzz the ARP parser; re-emit every accepted packet and check it parses back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{ArpPacket, ArpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = ArpPacket::new_checked(data) else {
        return;
    };
    let Ok(repr) = ArpRepr::parse(&packet) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]))
        .expect("emit into buffer_len() bytes");
    let again = ArpPacket::new_checked(&out[..]).expect("emitted packet is well-formed");
    assert_eq!(ArpRepr::parse(&again), Ok(repr));
});
