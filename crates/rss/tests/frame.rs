//! Hash-field extraction from Ethernet frames: hash-type choice like a NIC, fragments fall back
//! to the address-only hash, non-IP gets none, malformed input gets a typed error.

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rss::{FlowFields, FrameError, HashInput, HashType, HashTypes, PortPair};
use wire::Error as WireError;

const MAC_HEADER: [u8; 12] = [0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];

fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = MAC_HEADER.to_vec();
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn vlan(tpid: u16, vid: u16, inner_ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = MAC_HEADER.to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&inner_ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// IPv4 header (no options, checksum left zero: RSS does not verify it) + payload.
fn ipv4(protocol: u8, src: Ipv4Addr, dst: Ipv4Addr, flags_frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    p.extend_from_slice(&flags_frag.to_be_bytes());
    p.extend_from_slice(&[64, protocol, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

fn ipv6(next_header: u8, src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.extend_from_slice(&[next_header, 64]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

/// First 20 bytes of a TCP header (or 8 of UDP): only the ports matter to RSS.
fn l4(sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut h = vec![0u8; len];
    h[..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h
}

const SRC4: Ipv4Addr = Ipv4Addr::new(66, 9, 149, 187);
const DST4: Ipv4Addr = Ipv4Addr::new(161, 142, 100, 80);

fn src6() -> Ipv6Addr {
    "3ffe:2501:200:1fff::7".parse().expect("valid")
}
fn dst6() -> Ipv6Addr {
    "3ffe:2501:200:3::1".parse().expect("valid")
}

fn v4_ports() -> Option<PortPair> {
    Some(PortPair {
        src: 2794,
        dst: 1766,
    })
}

#[test]
fn tcp_ipv4_frame_gets_tcp_ipv4_hash_with_ports() {
    let f = ethernet(0x0800, &ipv4(6, SRC4, DST4, 0x4000, &l4(2794, 1766, 20)));
    let got = HashInput::from_frame(&f, HashTypes::default());
    assert_eq!(
        got,
        Ok(Some((
            HashType::TcpIpv4,
            HashInput::V4 {
                src: SRC4,
                dst: DST4,
                ports: v4_ports()
            }
        )))
    );
}

#[test]
fn udp_ipv4_frame_uses_ports_only_when_udp_hashing_is_enabled() {
    let f = ethernet(0x0800, &ipv4(17, SRC4, DST4, 0, &l4(2794, 1766, 8)));
    let default = HashInput::from_frame(&f, HashTypes::default());
    assert_eq!(
        default,
        Ok(Some((
            HashType::Ipv4,
            HashInput::V4 {
                src: SRC4,
                dst: DST4,
                ports: None
            }
        )))
    );
    let all = HashInput::from_frame(&f, HashTypes::all());
    assert_eq!(
        all,
        Ok(Some((
            HashType::UdpIpv4,
            HashInput::V4 {
                src: SRC4,
                dst: DST4,
                ports: v4_ports()
            }
        )))
    );
}

#[test]
fn icmp_ipv4_frame_gets_address_only_hash() {
    let f = ethernet(0x0800, &ipv4(1, SRC4, DST4, 0, &[8, 0, 0, 0, 0, 0, 0, 0]));
    let got = HashInput::from_frame(&f, HashTypes::all());
    assert_eq!(
        got,
        Ok(Some((
            HashType::Ipv4,
            HashInput::V4 {
                src: SRC4,
                dst: DST4,
                ports: None
            }
        )))
    );
}

#[test]
fn tcp_ipv4_falls_back_to_ipv4_when_only_tcp_type_is_disabled() {
    let f = ethernet(0x0800, &ipv4(6, SRC4, DST4, 0, &l4(2794, 1766, 20)));
    let types = HashTypes::default().without(HashType::TcpIpv4);
    let got = HashInput::from_frame(&f, types).map(|o| o.map(|(t, _)| t));
    assert_eq!(got, Ok(Some(HashType::Ipv4)));
    let none = HashInput::from_frame(&f, types.without(HashType::Ipv4));
    assert_eq!(none, Ok(None));
}

#[test]
fn ipv4_fragments_fall_back_to_address_only_hash() {
    // First fragment (MF set), middle fragment, last fragment (offset only).
    for flags_frag in [0x2000u16, 0x2000 | 185, 370] {
        let f = ethernet(
            0x0800,
            &ipv4(6, SRC4, DST4, flags_frag, &l4(2794, 1766, 20)),
        );
        let got = HashInput::from_frame(&f, HashTypes::all());
        assert_eq!(
            got,
            Ok(Some((
                HashType::Ipv4,
                HashInput::V4 {
                    src: SRC4,
                    dst: DST4,
                    ports: None
                }
            ))),
            "flags/offset {flags_frag:#06x}"
        );
        let fields = FlowFields::from_frame(&f).expect("valid").expect("ip");
        assert!(fields.is_fragment);
        assert_eq!(fields.five_tuple(), None);
    }
}

#[test]
fn tcp_ipv6_frame_gets_tcp_ipv6_hash() {
    let f = ethernet(0x86dd, &ipv6(6, src6(), dst6(), &l4(2794, 1766, 20)));
    let got = HashInput::from_frame(&f, HashTypes::default());
    assert_eq!(
        got,
        Ok(Some((
            HashType::TcpIpv6,
            HashInput::V6 {
                src: src6(),
                dst: dst6(),
                ports: v4_ports()
            }
        )))
    );
}

#[test]
fn udp_ipv6_after_hop_by_hop_and_destination_options_gets_udp_ipv6_hash() {
    let mut payload = vec![60, 0, 0, 0, 0, 0, 0, 0]; // Hop-by-Hop, next = DestOpts, 8 bytes
    payload.extend_from_slice(&[17, 1]); // DestOpts, next = UDP, 16 bytes
    payload.extend_from_slice(&[0u8; 14]);
    payload.extend_from_slice(&l4(2794, 1766, 8));
    let f = ethernet(0x86dd, &ipv6(0, src6(), dst6(), &payload));
    let got = HashInput::from_frame(&f, HashTypes::all());
    assert_eq!(
        got,
        Ok(Some((
            HashType::UdpIpv6,
            HashInput::V6 {
                src: src6(),
                dst: dst6(),
                ports: v4_ports()
            }
        )))
    );
}

#[test]
fn ipv6_with_fragment_header_falls_back_to_address_only_hash() {
    let mut payload = vec![6, 0, 0, 0, 0, 0, 0, 1]; // Fragment header, offset 0, M = 0
    payload.extend_from_slice(&l4(2794, 1766, 20));
    let f = ethernet(0x86dd, &ipv6(44, src6(), dst6(), &payload));
    let got = HashInput::from_frame(&f, HashTypes::all());
    assert_eq!(
        got,
        Ok(Some((
            HashType::Ipv6,
            HashInput::V6 {
                src: src6(),
                dst: dst6(),
                ports: None
            }
        )))
    );
}

#[test]
fn vlan_and_qinq_tagged_frames_are_parsed_through_the_tags() {
    let ip = ipv4(6, SRC4, DST4, 0, &l4(2794, 1766, 20));
    let single = vlan(0x8100, 42, 0x0800, &ip);
    let mut double = MAC_HEADER.to_vec();
    double.extend_from_slice(&[0x88, 0xa8, 0, 7, 0x81, 0x00, 0, 42, 0x08, 0x00]);
    double.extend_from_slice(&ip);
    let expected = Ok(Some((
        HashType::TcpIpv4,
        HashInput::V4 {
            src: SRC4,
            dst: DST4,
            ports: v4_ports(),
        },
    )));
    assert_eq!(
        HashInput::from_frame(&single, HashTypes::default()),
        expected
    );
    assert_eq!(
        HashInput::from_frame(&double, HashTypes::default()),
        expected
    );
}

#[test]
fn frames_with_more_than_two_vlan_tags_get_no_hash() {
    let ip = ipv4(6, SRC4, DST4, 0, &l4(2794, 1766, 20));
    let mut triple = MAC_HEADER.to_vec();
    triple.extend_from_slice(&[
        0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3, 0x08, 0x00,
    ]);
    triple.extend_from_slice(&ip);
    assert_eq!(HashInput::from_frame(&triple, HashTypes::all()), Ok(None));
}

#[test]
fn arp_and_other_non_ip_frames_get_no_hash() {
    let arp = ethernet(0x0806, &[0u8; 28]);
    assert_eq!(HashInput::from_frame(&arp, HashTypes::all()), Ok(None));
    assert_eq!(FlowFields::from_frame(&arp), Ok(None));
    let lldp = ethernet(0x88cc, &[0u8; 20]);
    assert_eq!(HashInput::from_frame(&lldp, HashTypes::all()), Ok(None));
}

#[test]
fn ethernet_padding_after_ipv4_total_length_is_ignored() {
    // A 20-byte IPv4 header with a truncated 2-byte "TCP" payload, padded to 60 bytes by the
    // link: the padding must not be read as ports.
    let mut f = ethernet(0x0800, &ipv4(6, SRC4, DST4, 0, &[0x0a, 0xea]));
    f.resize(60, 0);
    assert_eq!(
        HashInput::from_frame(&f, HashTypes::all()),
        Err(FrameError::TruncatedL4)
    );
}

#[test]
fn truncated_and_malformed_frames_get_typed_errors() {
    let all = HashTypes::all();
    assert_eq!(
        HashInput::from_frame(&[0u8; 13], all),
        Err(FrameError::TruncatedEthernet)
    );
    assert_eq!(
        HashInput::from_frame(&vlan(0x8100, 1, 0x0800, &[])[..16], all),
        Err(FrameError::TruncatedEthernet)
    );
    let good4 = ethernet(0x0800, &ipv4(6, SRC4, DST4, 0, &l4(1, 2, 20)));
    assert_eq!(
        HashInput::from_frame(&good4[..14 + 19], all),
        Err(FrameError::Ipv4(WireError::Truncated))
    );
    assert_eq!(
        HashInput::from_frame(&good4[..14 + 22], all),
        Err(FrameError::Ipv4(WireError::BadTotalLength))
    );
    assert_eq!(
        HashInput::from_frame(&ethernet(0x0800, &[]), all),
        Err(FrameError::Ipv4(WireError::Truncated))
    );
    let mut bad_version = good4.clone();
    bad_version[14] = 0x65;
    assert_eq!(
        HashInput::from_frame(&bad_version, all),
        Err(FrameError::Ipv4(WireError::BadVersion))
    );
    let mut bad_ihl = good4.clone();
    bad_ihl[14] = 0x44;
    assert_eq!(
        HashInput::from_frame(&bad_ihl, all),
        Err(FrameError::Ipv4(WireError::BadIhl))
    );
    let mut short_total = good4.clone();
    short_total[16..18].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(
        HashInput::from_frame(&short_total, all),
        Err(FrameError::Ipv4(WireError::BadIhl))
    );

    let good6 = ethernet(0x86dd, &ipv6(6, src6(), dst6(), &l4(1, 2, 20)));
    assert_eq!(
        HashInput::from_frame(&good6[..14 + 39], all),
        Err(FrameError::Ipv6(WireError::Truncated))
    );
    assert_eq!(
        HashInput::from_frame(&good6[..14 + 41], all),
        Err(FrameError::Ipv6(WireError::BadPayloadLength))
    );
    let mut bad6 = good6.clone();
    bad6[14] = 0x40;
    assert_eq!(
        HashInput::from_frame(&bad6, all),
        Err(FrameError::Ipv6(WireError::BadVersion))
    );
    // Hop-by-Hop announcing 16 bytes with only 8 present.
    let hbh = ethernet(0x86dd, &ipv6(0, src6(), dst6(), &[6, 1, 0, 0, 0, 0, 0, 0]));
    assert_eq!(
        HashInput::from_frame(&hbh, all),
        Err(FrameError::Ipv6(WireError::Truncated))
    );
    let tcp_short = ethernet(0x86dd, &ipv6(6, src6(), dst6(), &[0, 1, 0]));
    assert_eq!(
        HashInput::from_frame(&tcp_short, all),
        Err(FrameError::TruncatedL4)
    );
}

#[test]
fn ipv6_behind_ah_or_esp_gets_address_only_hash() {
    for next_header in [50u8, 51] {
        let mut payload = vec![6, 4, 0, 0];
        payload.extend_from_slice(&[0u8; 20]);
        payload.extend_from_slice(&l4(2794, 1766, 20));
        let f = ethernet(0x86dd, &ipv6(next_header, src6(), dst6(), &payload));
        let got = HashInput::from_frame(&f, HashTypes::all());
        assert_eq!(
            got,
            Ok(Some((
                HashType::Ipv6,
                HashInput::V6 {
                    src: src6(),
                    dst: dst6(),
                    ports: None
                }
            ))),
            "next header {next_header}"
        );
    }
}

#[test]
fn ipv6_hop_by_hop_not_first_is_an_error() {
    // Destination Options then Hop-by-Hop (RFC 8200 §4.1: Hop-by-Hop must come first).
    let mut payload = vec![0, 0, 0, 0, 0, 0, 0, 0];
    payload.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
    payload.extend_from_slice(&l4(1, 2, 20));
    let f = ethernet(0x86dd, &ipv6(60, src6(), dst6(), &payload));
    assert_eq!(
        HashInput::from_frame(&f, HashTypes::all()),
        Err(FrameError::Ipv6(WireError::BadExtHeaderOrder))
    );
}

#[test]
fn frame_errors_display_a_message() {
    assert!(
        FrameError::Ipv4(WireError::BadIhl)
            .to_string()
            .starts_with("IPv4: ")
    );
    assert!(!FrameError::TruncatedL4.to_string().is_empty());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let _ = HashInput::from_frame(&bytes, HashTypes::all());
    }

    #[test]
    fn arbitrary_bytes_behind_ip_ethertypes_never_panic_and_keep_the_invariant(
        v6 in any::<bool>(),
        tail in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        let mut payload = tail;
        // Force the version nibble so the parser goes deep instead of stopping at it.
        if let Some(first) = payload.first_mut() {
            *first = (*first & 0x0f) | if v6 { 0x60 } else { 0x40 };
        }
        let f = ethernet(if v6 { 0x86dd } else { 0x0800 }, &payload);
        if let Ok(Some(fields)) = FlowFields::from_frame(&f) {
            if fields.ports.is_some() {
                prop_assert!(!fields.is_fragment);
                prop_assert!(fields.protocol == 6 || fields.protocol == 17);
            }
        }
    }
}

/// A random TCP/UDP flow as a frame, with what extraction must report for it.
#[derive(Debug, Clone)]
struct GeneratedFrame {
    bytes: Vec<u8>,
    expected: (HashType, HashInput),
}

fn generated_frame() -> impl Strategy<Value = GeneratedFrame> {
    (
        any::<bool>(),         // IPv6?
        any::<bool>(),         // UDP?
        0usize..=2,            // VLAN tags
        any::<bool>(),         // fragment?
        any::<(u128, u128)>(), // addresses (low 32 bits for IPv4)
        any::<(u16, u16)>(),   // ports
        0usize..16,            // link padding bytes
    )
        .prop_map(
            |(is_v6, is_udp, tags, fragment, (s, d), (sp, dp), padding)| {
                let protocol = if is_udp { 17 } else { 6 };
                let l4_bytes = l4(sp, dp, if is_udp { 8 } else { 20 });
                let ports = (!fragment).then_some(PortPair { src: sp, dst: dp });
                let (ethertype, ip, expected) = if is_v6 {
                    let (src, dst) = (Ipv6Addr::from_bits(s), Ipv6Addr::from_bits(d));
                    let ip = if fragment {
                        let mut payload = vec![protocol, 0, 0, 0, 0, 0, 0, 9];
                        payload.extend_from_slice(&l4_bytes);
                        ipv6(44, src, dst, &payload)
                    } else {
                        ipv6(protocol, src, dst, &l4_bytes)
                    };
                    let t = match (fragment, is_udp) {
                        (true, _) => HashType::Ipv6,
                        (false, true) => HashType::UdpIpv6,
                        (false, false) => HashType::TcpIpv6,
                    };
                    (0x86dd, ip, (t, HashInput::V6 { src, dst, ports }))
                } else {
                    let (src, dst) = (Ipv4Addr::from_bits(s as u32), Ipv4Addr::from_bits(d as u32));
                    let ip = ipv4(
                        protocol,
                        src,
                        dst,
                        if fragment { 0x2000 } else { 0x4000 },
                        &l4_bytes,
                    );
                    let t = match (fragment, is_udp) {
                        (true, _) => HashType::Ipv4,
                        (false, true) => HashType::UdpIpv4,
                        (false, false) => HashType::TcpIpv4,
                    };
                    (0x0800, ip, (t, HashInput::V4 { src, dst, ports }))
                };
                let mut bytes = MAC_HEADER.to_vec();
                for tag in 0..tags {
                    let tpid: u16 = if tag == 0 && tags == 2 {
                        0x88a8
                    } else {
                        0x8100
                    };
                    bytes.extend_from_slice(&tpid.to_be_bytes());
                    bytes.extend_from_slice(&(tag as u16 + 1).to_be_bytes());
                }
                bytes.extend_from_slice(&u16::to_be_bytes(ethertype));
                bytes.extend_from_slice(&ip);
                bytes.extend(std::iter::repeat_n(0xee, padding));
                GeneratedFrame { bytes, expected }
            },
        )
}

proptest! {
    #[test]
    fn extraction_recovers_the_tuple_of_any_generated_frame(g in generated_frame()) {
        prop_assert_eq!(
            HashInput::from_frame(&g.bytes, HashTypes::all()),
            Ok(Some(g.expected))
        );
    }
}
