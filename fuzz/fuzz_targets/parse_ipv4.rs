//! Fuzz the IPv4 parser with header-checksum verification on; re-emit every accepted header
//! (options dropped) and check it parses back equal with the same payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{ChecksumCaps, Ipv4Packet, Ipv4Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = Ipv4Repr::parse(&packet, ChecksumCaps::ALL);
    let Ok(repr) = Ipv4Repr::parse(&packet, ChecksumCaps::NONE) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut p = Ipv4Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut p, ChecksumCaps::ALL)
        .expect("emit into buffer_len() bytes");
    p.payload_mut().copy_from_slice(packet.payload());
    let again = Ipv4Packet::new_checked(&out[..]).expect("emitted packet is well-formed");
    assert_eq!(Ipv4Repr::parse(&again, ChecksumCaps::ALL), Ok(repr));
    assert_eq!(again.payload(), packet.payload());
});
