//! Fuzz the ICMPv4 parser (checksum verified); re-emit every accepted message with a fresh
//! checksum and check it parses back equal with verification on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{ChecksumCaps, Icmpv4Packet, Icmpv4Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        return;
    };
    let _ = Icmpv4Repr::parse(&packet, ChecksumCaps::ALL);
    // The quoted-packet reader runs on whatever an error message carries.
    let _ = wire::icmpv4::quoted_flow(packet.data());
    let Ok(repr) = Icmpv4Repr::parse(&packet, ChecksumCaps::NONE) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv4Packet::new_unchecked(&mut out[..]),
        ChecksumCaps::ALL,
    )
    .expect("emit into buffer_len() bytes");
    let again = Icmpv4Packet::new_checked(&out[..]).expect("emitted message is well-formed");
    assert_eq!(Icmpv4Repr::parse(&again, ChecksumCaps::ALL), Ok(repr));
});
