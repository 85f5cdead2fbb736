//! Fuzz the IPv6 parser and its bounded extension-header walk; re-emit every accepted packet
//! and check the Repr (chain shape, fragment fields, upper layer) parses back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{Ipv6Packet, Ipv6Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Ipv6Packet::new_checked(data) else {
        return;
    };
    let Ok(repr) = Ipv6Repr::parse(&packet) else {
        return;
    };
    let walk = packet
        .walk_ext_headers()
        .expect("parse succeeded, so the walk does");
    assert_eq!(walk.upper_offset, repr.header_len());
    let mut out = vec![0u8; repr.buffer_len()];
    let mut p = Ipv6Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut p).expect("emit into buffer_len() bytes");
    let again = Ipv6Packet::new_checked(&out[..]).expect("emitted packet is well-formed");
    assert_eq!(Ipv6Repr::parse(&again), Ok(repr));
});
