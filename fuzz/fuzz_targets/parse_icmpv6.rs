//! Fuzz the ICMPv6/NDP parser (checksum verified against a fixed pseudo-header); re-emit every
//! accepted message and check it parses back equal with verification on.
#![no_main]

use core::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use wire::{ChecksumCaps, Icmpv6Packet, Icmpv6Repr};

const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    let _ = Icmpv6Repr::parse(&packet, SRC, DST, ChecksumCaps::ALL);
    // The quoted-packet reader runs on whatever an error message carries.
    let _ = wire::icmpv6::quoted_flow(packet.data());
    let Ok(repr) = Icmpv6Repr::parse(&packet, SRC, DST, ChecksumCaps::NONE) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv6Packet::new_unchecked(&mut out[..]),
        SRC,
        DST,
        ChecksumCaps::ALL,
    )
    .expect("emit into buffer_len() bytes");
    let again = Icmpv6Packet::new_checked(&out[..]).expect("emitted message is well-formed");
    assert_eq!(
        Icmpv6Repr::parse(&again, SRC, DST, ChecksumCaps::ALL),
        Ok(repr)
    );
});
