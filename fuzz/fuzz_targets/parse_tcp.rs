//! Fuzz the TCP header and option parser (checksum verified); re-emit every accepted segment
//! in Linux's option layout and check it parses back equal with verification on.
#![no_main]

use core::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use wire::{ChecksumCaps, Error, IpPair, TcpPacket, TcpRepr};

const ADDRS: IpPair = IpPair::V4 {
    src: Ipv4Addr::new(192, 168, 1, 10),
    dst: Ipv4Addr::new(93, 184, 216, 34),
};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = TcpPacket::new_checked(data) else {
        return;
    };
    let _ = TcpRepr::parse(&packet, &ADDRS, ChecksumCaps::ALL);
    let Ok((repr, report)) = TcpRepr::parse_with_report(&packet, &ADDRS, ChecksumCaps::NONE) else {
        return;
    };
    if report.window_scale_clamped {
        assert_eq!(repr.window_scale, Some(14));
    }
    let mut out = vec![0u8; repr.buffer_len()];
    match repr.emit(
        &mut TcpPacket::new_unchecked(&mut out[..]),
        &ADDRS,
        ChecksumCaps::ALL,
    ) {
        Ok(()) => {}
        // Tightly packed input options can need more room in Linux's padded layout.
        Err(Error::OptionsTooLong) => return,
        Err(e) => panic!("emit failed: {e}"),
    }
    let again = TcpPacket::new_checked(&out[..]).expect("emitted segment is well-formed");
    assert_eq!(TcpRepr::parse(&again, &ADDRS, ChecksumCaps::ALL), Ok(repr));
});
