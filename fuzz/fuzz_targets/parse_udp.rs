//! Fuzz the UDP parser (checksum verified, IPv4 and IPv6 pseudo-headers); re-emit every
//! accepted datagram and check it parses back equal with verification on.
#![no_main]

use core::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use wire::{ChecksumCaps, IpPair, UdpPacket, UdpRepr};

fuzz_target!(|data: &[u8]| {
    let pairs = [
        IpPair::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
        },
        IpPair::V6 {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
        },
    ];
    let Ok(packet) = UdpPacket::new_checked(data) else {
        return;
    };
    for addrs in &pairs {
        let _ = UdpRepr::parse(&packet, addrs, ChecksumCaps::ALL);
        let Ok(repr) = UdpRepr::parse(&packet, addrs, ChecksumCaps::NONE) else {
            continue;
        };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut out[..]),
            addrs,
            ChecksumCaps::ALL,
        )
        .expect("emit into buffer_len() bytes");
        let again = UdpPacket::new_checked(&out[..]).expect("emitted datagram is well-formed");
        assert_eq!(UdpRepr::parse(&again, addrs, ChecksumCaps::ALL), Ok(repr));
    }
});
