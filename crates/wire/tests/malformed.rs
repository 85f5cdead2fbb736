//! Malformed inputs, one table row per way to be wrong, each naming the error it must produce;
//! plus "arbitrary bytes never panic" for every parser, and the window-scale clamp report.

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wire::arp::{ArpPacket, ArpRepr};
use wire::ipv6::MAX_EXT_HEADERS;
use wire::{
    ChecksumCaps, Error, EthernetFrame, EthernetRepr, Icmpv4Packet, Icmpv4Repr, Icmpv6Packet,
    Icmpv6Repr, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, SackBlock,
    SeqNumber, TcpFlags, TcpPacket, TcpRepr, TcpTimestamp, UdpPacket, UdpRepr,
};

const V4: IpPair = IpPair::V4 {
    src: Ipv4Addr::new(10, 0, 0, 1),
    dst: Ipv4Addr::new(10, 0, 0, 2),
};
const SRC6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);
const V6: IpPair = IpPair::V6 {
    src: SRC6,
    dst: DST6,
};
const ALL: ChecksumCaps = ChecksumCaps::ALL;
const NOVERIFY: ChecksumCaps = ChecksumCaps::NONE;

fn ipv4(payload_len: usize) -> Vec<u8> {
    let r = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 0, 1),
        dst_addr: Ipv4Addr::new(10, 0, 0, 2),
        protocol: IpProtocol::UDP,
        payload_len,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 7,
        dont_frag: false,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut Ipv4Packet::new_unchecked(&mut b[..]), ALL)
        .expect("fits");
    b
}

fn parse_ipv4(b: &[u8], caps: ChecksumCaps) -> Result<(), Error> {
    Ipv4Repr::parse(&Ipv4Packet::new_checked(b)?, caps).map(drop)
}

fn ipv6(next: u8, chain: &[(u8, usize)], upper_len: usize) -> Vec<u8> {
    let mut v = vec![0u8; 40];
    v[0] = 0x60;
    v[6] = chain.first().map_or(next, |c| c.0);
    for (i, &(_, len)) in chain.iter().enumerate() {
        let mut h = vec![0u8; len];
        h[0] = chain.get(i + 1).map_or(next, |c| c.0);
        h[1] = (len / 8 - 1) as u8;
        v.extend_from_slice(&h);
    }
    v.extend(std::iter::repeat_n(0u8, upper_len));
    let pl = (v.len() - 40) as u16;
    v[4..6].copy_from_slice(&pl.to_be_bytes());
    v
}

fn parse_ipv6(b: &[u8]) -> Result<(), Error> {
    Ipv6Repr::parse(&Ipv6Packet::new_checked(b)?).map(drop)
}

fn tcp_repr(payload: &[u8]) -> TcpRepr<'_> {
    TcpRepr {
        payload,
        ..TcpRepr::bare(1, 2, SeqNumber(100), SeqNumber(200), TcpFlags::ACK, 1000)
    }
}

/// A TCP segment whose options area is exactly `opts` (padded to 4 bytes with EOL), checksum
/// filled.
fn tcp_with_options(opts: &[u8]) -> Vec<u8> {
    let opt_len = opts.len().div_ceil(4) * 4;
    let mut b = vec![0u8; 20 + opt_len + 4];
    tcp_repr(&[])
        .emit(&mut TcpPacket::new_unchecked(&mut b[..]), &V4, ALL)
        .expect("fits");
    b[20..20 + opts.len()].copy_from_slice(opts);
    b[12] = (((20 + opt_len) / 4) as u8) << 4;
    let mut p = TcpPacket::new_unchecked(&mut b[..]);
    p.fill_checksum(&V4);
    b
}

fn parse_tcp(b: &[u8], caps: ChecksumCaps) -> Result<(), Error> {
    TcpRepr::parse(&TcpPacket::new_checked(b)?, &V4, caps).map(drop)
}

fn udp(payload: &[u8], addrs: &IpPair) -> Vec<u8> {
    let r = UdpRepr {
        src_port: 53,
        dst_port: 5353,
        payload,
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut UdpPacket::new_unchecked(&mut b[..]), addrs, ALL)
        .expect("fits");
    b
}

fn parse_udp(b: &[u8], addrs: &IpPair) -> Result<(), Error> {
    UdpRepr::parse(&UdpPacket::new_checked(b)?, addrs, ALL).map(drop)
}

fn icmpv6(repr: Icmpv6Repr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv6Packet::new_unchecked(&mut b[..]),
        SRC6,
        DST6,
        ALL,
    )
    .expect("fits");
    b
}

fn parse_icmpv6(b: &[u8], caps: ChecksumCaps) -> Result<(), Error> {
    Icmpv6Repr::parse(&Icmpv6Packet::new_checked(b)?, SRC6, DST6, caps).map(drop)
}

fn parse_icmpv4(b: &[u8]) -> Result<(), Error> {
    Icmpv4Repr::parse(&Icmpv4Packet::new_checked(b)?, NOVERIFY).map(drop)
}

fn ns() -> Icmpv6Repr<'static> {
    Icmpv6Repr::NeighborSolicit {
        target_addr: SRC6,
        source_lladdr: Some(wire::EthernetAddress([2, 0, 0, 0, 0, 1])),
    }
}

type Row = (Error, &'static str, fn() -> Result<(), Error>);

/// One row per malformed case. Every `Error` variant appears at least once (checked below).
const TABLE: &[Row] = &[
    (Error::Truncated, "ethernet shorter than 14 bytes", || {
        EthernetFrame::new_checked(&[0u8; 13][..]).map(drop)
    }),
    (Error::Truncated, "ipv4 shorter than 20 bytes", || {
        parse_ipv4(&ipv4(0)[..19], ALL)
    }),
    (Error::Truncated, "tcp shorter than 20 bytes", || {
        parse_tcp(&[0x50; 19], NOVERIFY)
    }),
    (Error::Truncated, "ipv6 ext header past the payload", || {
        let mut b = ipv6(17, &[(60, 16)], 0);
        b[41] = 2; // claims 24 bytes, 16 present
        parse_ipv6(&b)
    }),
    (Error::Truncated, "arp shorter than its addresses", || {
        let r = ArpRepr {
            operation: wire::ArpOperation::REQUEST,
            source_hardware_addr: wire::EthernetAddress([1; 6]),
            source_protocol_addr: Ipv4Addr::LOCALHOST,
            target_hardware_addr: wire::EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::LOCALHOST,
        };
        let mut b = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut b[..]))?;
        ArpRepr::parse(&ArpPacket::new_checked(&b[..27])?).map(drop)
    }),
    (
        Error::Truncated,
        "neighbour solicitation shorter than 24 bytes",
        || parse_icmpv6(&icmpv6(ns())[..20], NOVERIFY),
    ),
    (Error::BadVersion, "ipv4 header with version 6", || {
        let mut b = ipv4(0);
        b[0] = 0x65;
        parse_ipv4(&b, NOVERIFY)
    }),
    (Error::BadVersion, "ipv6 header with version 4", || {
        let mut b = ipv6(17, &[], 0);
        b[0] = 0x40;
        parse_ipv6(&b)
    }),
    (Error::BadIhl, "ipv4 IHL < 5", || {
        let mut b = ipv4(8);
        b[0] = 0x44;
        parse_ipv4(&b, NOVERIFY)
    }),
    (Error::BadIhl, "ipv4 IHL beyond the total length", || {
        let mut b = ipv4(40);
        b[0] = 0x4f; // 60-byte header
        b[2..4].copy_from_slice(&40u16.to_be_bytes());
        parse_ipv4(&b, NOVERIFY)
    }),
    (
        Error::BadTotalLength,
        "ipv4 total length past the buffer",
        || {
            let mut b = ipv4(8);
            b[2..4].copy_from_slice(&29u16.to_be_bytes());
            parse_ipv4(&b, NOVERIFY)
        },
    ),
    (
        Error::BadPayloadLength,
        "ipv6 payload length past the buffer",
        || {
            let mut b = ipv6(17, &[], 8);
            b[4..6].copy_from_slice(&9u16.to_be_bytes());
            parse_ipv6(&b)
        },
    ),
    (Error::BadUdpLength, "udp length field < 8", || {
        let mut b = udp(b"abc", &V4);
        b[4..6].copy_from_slice(&7u16.to_be_bytes());
        parse_udp(&b, &V4)
    }),
    (
        Error::BadUdpLength,
        "udp length field past the buffer",
        || {
            let mut b = udp(b"abc", &V4);
            b[4..6].copy_from_slice(&12u16.to_be_bytes());
            parse_udp(&b, &V4)
        },
    ),
    (Error::BadDataOffset, "tcp data offset < 5", || {
        let mut b = tcp_with_options(&[]);
        b[12] = 4 << 4;
        parse_tcp(&b, NOVERIFY)
    }),
    (Error::BadDataOffset, "tcp data offset past the end", || {
        let mut b = tcp_with_options(&[]);
        b[12] = 15 << 4; // 60-byte header in a 24-byte segment
        parse_tcp(&b, NOVERIFY)
    }),
    (Error::BadOptionLength, "tcp option length 0", || {
        parse_tcp(&tcp_with_options(&[30, 0]), ALL)
    }),
    (Error::BadOptionLength, "tcp option length 1", || {
        parse_tcp(&tcp_with_options(&[30, 1]), ALL)
    }),
    (
        Error::BadOptionLength,
        "tcp option overrunning the header",
        || parse_tcp(&tcp_with_options(&[1, 1, 30, 6]), ALL),
    ),
    (
        Error::BadOptionLength,
        "tcp option length byte missing",
        || parse_tcp(&tcp_with_options(&[1, 1, 1, 2]), ALL),
    ),
    (Error::BadOptionLength, "tcp MSS with length 3", || {
        parse_tcp(&tcp_with_options(&[2, 3, 5, 1]), ALL)
    }),
    (
        Error::BadOptionLength,
        "tcp SACK with a partial block",
        || parse_tcp(&tcp_with_options(&[5, 6, 0, 0, 0, 0, 1, 1]), ALL),
    ),
    (Error::BadOptionLength, "ipv4 option length 1", || {
        let mut b = ipv4(8);
        b[0] = 0x46;
        b[20..24].copy_from_slice(&[0x94, 1, 0, 0]);
        parse_ipv4(&b, NOVERIFY)
    }),
    (Error::BadOptionLength, "ndp option length 0", || {
        let mut b = icmpv6(ns());
        b[25] = 0;
        parse_icmpv6(&b, NOVERIFY)
    }),
    (
        Error::ExtHeaderChainTooLong,
        "ipv6 chain longer than MAX_EXT_HEADERS",
        || {
            let chain = [(60u8, 8usize); MAX_EXT_HEADERS + 1];
            parse_ipv6(&ipv6(6, &chain, 20))
        },
    ),
    (
        Error::BadExtHeaderOrder,
        "ipv6 hop-by-hop after another ext header",
        || parse_ipv6(&ipv6(6, &[(60, 8), (0, 8)], 20)),
    ),
    (
        Error::BadChecksum,
        "ipv4 header checksum off by one",
        || {
            let mut b = ipv4(0);
            b[11] ^= 1;
            parse_ipv4(&b, ALL)
        },
    ),
    (Error::BadChecksum, "tcp payload bit flipped", || {
        let mut b = tcp_with_options(&[]);
        b[23] ^= 0x80;
        parse_tcp(&b, ALL)
    }),
    (
        Error::BadChecksum,
        "udp over ipv6 with zero checksum",
        || {
            let mut b = udp(b"abc", &V6);
            b[6..8].copy_from_slice(&[0, 0]);
            parse_udp(&b, &V6)
        },
    ),
    (
        Error::BadChecksum,
        "icmpv6 checked against another destination",
        || {
            // (Swapping source and destination would not do: the sum is commutative.)
            let b = icmpv6(ns());
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..])?, SRC6, SRC6, ALL).map(drop)
        },
    ),
    (Error::BadCode, "neighbour solicitation with code 1", || {
        let mut b = icmpv6(ns());
        b[1] = 1;
        parse_icmpv6(&b, NOVERIFY)
    }),
    (Error::BadCode, "icmpv4 time exceeded with code 2", || {
        parse_icmpv4(&[11, 2, 0, 0, 0, 0, 0, 0])
    }),
    (Error::Unsupported, "ethernet 802.3 length field", || {
        let mut b = [0u8; 60];
        b[12..14].copy_from_slice(&46u16.to_be_bytes());
        EthernetRepr::parse(&EthernetFrame::new_checked(&b[..])?).map(drop)
    }),
    (
        Error::Unsupported,
        "arp for a non-Ethernet hardware type",
        || {
            let mut b = [0u8; 28];
            b[..8].copy_from_slice(&[0, 6, 8, 0, 6, 4, 0, 1]);
            ArpRepr::parse(&ArpPacket::new_checked(&b[..])?).map(drop)
        },
    ),
    (Error::Unsupported, "icmpv4 timestamp request", || {
        parse_icmpv4(&[13, 0, 0, 0, 0, 0, 0, 0])
    }),
    (
        Error::OptionsTooLong,
        "tcp emit with every option and 4 SACK blocks",
        || {
            let block = Some(SackBlock {
                left: SeqNumber(1),
                right: SeqNumber(2),
            });
            let mut r = tcp_repr(&[]);
            r.max_seg_size = Some(1460);
            r.window_scale = Some(7);
            r.sack_permitted = true;
            r.timestamp = Some(TcpTimestamp { tsval: 1, tsecr: 2 });
            r.sack_blocks = [block; 4];
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut TcpPacket::new_unchecked(&mut b[..]), &V4, ALL)
        },
    ),
    (
        Error::BufferTooSmall,
        "tcp emit into a buffer shorter than buffer_len()",
        || {
            let r = tcp_repr(b"hello");
            let mut b = vec![0u8; r.buffer_len() - 1];
            r.emit(&mut TcpPacket::new_unchecked(&mut b[..]), &V4, ALL)
        },
    ),
    (
        Error::BufferTooSmall,
        "ipv6 emit of ext headers past the buffer",
        || {
            let b = ipv6(6, &[(60, 16)], 0);
            let r = Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..])?)?;
            let mut out = [0u8; 50];
            r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]))
        },
    ),
];

/// Forces this file to be revisited when a variant is added: every variant must have a row.
fn variant_index(e: Error) -> usize {
    match e {
        Error::Truncated => 0,
        Error::BadVersion => 1,
        Error::BadIhl => 2,
        Error::BadTotalLength => 3,
        Error::BadPayloadLength => 4,
        Error::BadUdpLength => 5,
        Error::BadDataOffset => 6,
        Error::BadOptionLength => 7,
        Error::ExtHeaderChainTooLong => 8,
        Error::BadExtHeaderOrder => 9,
        Error::BadChecksum => 10,
        Error::BadCode => 11,
        Error::Unsupported => 12,
        Error::OptionsTooLong => 13,
        Error::BufferTooSmall => 14,
    }
}
const VARIANTS: usize = 15;

#[test]
fn every_malformed_row_yields_its_named_error() {
    let mut failures = Vec::new();
    for (expected, what, f) in TABLE {
        let got = f();
        if got != Err(*expected) {
            failures.push(format!("{what}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn malformed_table_covers_every_error_variant() {
    let mut seen = [false; VARIANTS];
    for (e, _, _) in TABLE {
        seen[variant_index(*e)] = true;
    }
    assert_eq!(seen, [true; VARIANTS]);
}

#[test]
fn errors_display_a_nonempty_reason() {
    for (e, _, _) in TABLE {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn well_formed_baselines_of_the_table_parse() {
    // The rows above mutate these; unmutated they must be accepted, so each row isolates one
    // fault.
    assert_eq!(parse_ipv4(&ipv4(8), ALL), Ok(()));
    assert_eq!(parse_ipv6(&ipv6(6, &[(60, 8), (43, 16)], 20)), Ok(()));
    assert_eq!(
        parse_tcp(&tcp_with_options(&[1, 1, 30, 4, 0, 0]), ALL),
        Ok(())
    );
    assert_eq!(parse_udp(&udp(b"abc", &V4), &V4), Ok(()));
    assert_eq!(parse_udp(&udp(b"abc", &V6), &V6), Ok(()));
    assert_eq!(parse_icmpv6(&icmpv6(ns()), ALL), Ok(()));
    let chain = [(60u8, 8usize); MAX_EXT_HEADERS];
    assert_eq!(parse_ipv6(&ipv6(6, &chain, 20)), Ok(()));
}

#[test]
fn udp_over_ipv4_zero_checksum_means_not_computed() {
    let mut b = udp(b"abc", &V4);
    b[6..8].copy_from_slice(&[0, 0]);
    assert_eq!(parse_udp(&b, &V4), Ok(()));
}

#[test]
fn window_scale_above_14_is_clamped_and_reported() {
    let b = tcp_with_options(&[1, 3, 3, 15]);
    let p = TcpPacket::new_checked(&b[..]).expect("valid");
    let (r, report) = TcpRepr::parse_with_report(&p, &V4, ALL).expect("parses");
    assert_eq!(r.window_scale, Some(14));
    assert!(report.window_scale_clamped);
    let b = tcp_with_options(&[1, 3, 3, 14]);
    let p = TcpPacket::new_checked(&b[..]).expect("valid");
    let (r, report) = TcpRepr::parse_with_report(&p, &V4, ALL).expect("parses");
    assert_eq!(r.window_scale, Some(14));
    assert!(!report.window_scale_clamped);
}

#[test]
fn repeated_window_scale_reports_on_the_value_kept() {
    // Found by fuzzing: a clamped option followed by a valid one must not leave the flag set.
    let b = tcp_with_options(&[3, 3, 15, 3, 3, 0]);
    let p = TcpPacket::new_checked(&b[..]).expect("valid");
    let (r, report) = TcpRepr::parse_with_report(&p, &V4, ALL).expect("parses");
    assert_eq!(r.window_scale, Some(0));
    assert!(!report.window_scale_clamped);
}

#[test]
fn unknown_tcp_options_are_skipped_by_length_and_counted() {
    let b = tcp_with_options(&[30, 4, 9, 9, 2, 4, 0x05, 0xb4, 0]);
    let p = TcpPacket::new_checked(&b[..]).expect("valid");
    let (r, report) = TcpRepr::parse_with_report(&p, &V4, ALL).expect("parses");
    assert_eq!(r.max_seg_size, Some(1460));
    assert_eq!(report.unknown_options, 1);
}

#[test]
fn eol_ends_the_tcp_option_list() {
    // After EOL the rest is padding even if it looks like an invalid option.
    let b = tcp_with_options(&[0, 30, 0, 0]);
    assert_eq!(parse_tcp(&b, ALL), Ok(()));
}

fn parse_everything(data: &[u8]) {
    // Each parser on the raw bytes, with checksum verification on and off; results ignored,
    // the property is "returns".
    for caps in [ALL, NOVERIFY] {
        if let Ok(f) = EthernetFrame::new_checked(data) {
            let _ = EthernetRepr::parse(&f);
            let _ = (f.payload(), f.vlan_tag(), f.ethertype());
        }
        let _ = EthernetRepr::parse(&EthernetFrame::new_unchecked(data));
        if let Ok(p) = ArpPacket::new_checked(data) {
            let _ = ArpRepr::parse(&p);
        }
        if let Ok(p) = Ipv4Packet::new_checked(data) {
            let _ = Ipv4Repr::parse(&p, caps);
            let _ = (p.payload(), p.options());
        }
        let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(data), caps);
        if let Ok(p) = Ipv6Packet::new_checked(data) {
            let _ = Ipv6Repr::parse(&p);
        }
        let _ = Ipv6Packet::new_unchecked(data).walk_ext_headers();
        let _ = (
            wire::icmpv4::quoted_flow(data),
            wire::icmpv6::quoted_flow(data),
        );
        if let Ok(p) = Icmpv4Packet::new_checked(data) {
            let _ = Icmpv4Repr::parse(&p, caps);
        }
        if let Ok(p) = Icmpv6Packet::new_checked(data) {
            let _ = Icmpv6Repr::parse(&p, SRC6, DST6, caps);
        }
        for addrs in [V4, V6] {
            if let Ok(p) = UdpPacket::new_checked(data) {
                let _ = UdpRepr::parse(&p, &addrs, caps);
            }
            if let Ok(p) = TcpPacket::new_checked(data) {
                let _ = TcpRepr::parse_with_report(&p, &addrs, caps);
            }
            let u = TcpPacket::new_unchecked(data);
            let _ = (u.payload(), u.option_iter().count());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_any_parser(data in proptest::collection::vec(any::<u8>(), 0..128)) {
        parse_everything(&data);
    }

    #[test]
    fn arbitrary_headers_with_plausible_first_byte_never_panic(
        first in prop_oneof![Just(0x45u8), Just(0x4f), Just(0x60), Just(0x50), Just(0xf0)],
        rest in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut data = vec![first];
        data.extend_from_slice(&rest);
        parse_everything(&data);
    }
}
