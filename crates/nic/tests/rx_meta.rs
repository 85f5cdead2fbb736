//! The descriptor's `RxMeta` comes from the NIC's one parse of each frame: its hash is the
//! Toeplitz reference hash of the fields a NIC hashes (VLAN and QinQ tags walked, fragments
//! falling back to the address-only hash, IPv6 extension headers walked), and its offsets,
//! VLAN tag and checksum verdicts describe the frame as delivered.

mod common;

use std::net::IpAddr;

use common::{Seg, bytes, drain};
use nic::{CsumVerdict, GroConfig, ModerationConfig, Nic, NicConfig, RssHashType};
use rss::{HashInput, PortPair, RssKey, toeplitz_reference};
use wire::{Ipv4Packet, VlanTag};

const ETH: usize = 14;

fn nic() -> Nic {
    Nic::new(NicConfig {
        queues: 1,
        moderation: ModerationConfig::OFF,
        gro: GroConfig {
            enabled: false,
            ..GroConfig::default()
        },
        ..NicConfig::default()
    })
    .expect("config")
}

fn seg4() -> Seg {
    Seg::v4(40000, 80).with_payload(1, bytes(3, 64))
}

fn seg6() -> Seg {
    Seg::v6(40000, 80).with_payload(1, bytes(3, 64))
}

/// The reference hash (bit-serial Toeplitz over the NDIS input) with the default key.
fn reference(seg: &Seg, with_ports: bool) -> u32 {
    let ports = with_ports.then_some(PortPair {
        src: seg.sport,
        dst: seg.dport,
    });
    let input = match (seg.src, seg.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => HashInput::V4 { src, dst, ports },
        (IpAddr::V6(src), IpAddr::V6(dst)) => HashInput::V6 { src, dst, ports },
        _ => unreachable!("one family"),
    };
    let (buf, len) = input.to_bytes();
    toeplitz_reference(&RssKey::default(), &buf[..len])
}

fn tag(mut frame: Vec<u8>, tpid: u16, vid: u16) -> Vec<u8> {
    let t = tpid.to_be_bytes();
    let v = vid.to_be_bytes();
    frame.splice(12..12, [t[0], t[1], v[0], v[1]]);
    frame
}

/// Inserts an 8-byte IPv6 extension header of type `kind` (hop-by-hop 0 with PadN, or a
/// fragment header 44 for an atomic fragment) in front of the TCP header.
fn with_ext_header(mut frame: Vec<u8>, kind: u8) -> Vec<u8> {
    let next = frame[ETH + 6];
    let ext = match kind {
        0 => [next, 0, 1, 4, 0, 0, 0, 0],
        44 => [next, 0, 0, 0, 0, 0, 0, 9],
        _ => unreachable!("test kinds"),
    };
    frame[ETH + 6] = kind;
    let len = u16::from_be_bytes([frame[ETH + 4], frame[ETH + 5]]) + 8;
    frame[ETH + 4..ETH + 6].copy_from_slice(&len.to_be_bytes());
    frame.splice(ETH + 40..ETH + 40, ext);
    frame
}

/// Sets MF on an IPv4 frame (a first fragment) and refreshes the header checksum.
fn first_fragment(mut frame: Vec<u8>) -> Vec<u8> {
    frame[ETH + 6] = 0x20;
    Ipv4Packet::new_unchecked(&mut frame[ETH..]).fill_checksum();
    frame
}

fn receive_one(frame: Vec<u8>) -> nic::RxDescriptor {
    let mut n = nic();
    n.receive(0, frame);
    let mut d = drain(&mut n, 0, 0);
    assert_eq!(d.len(), 1, "one descriptor");
    d.remove(0)
}

/// A frame shape: its name, the frame, the expected hash, hash type and outer VLAN id.
type Case = (&'static str, Vec<u8>, u32, RssHashType, Option<u16>);

#[test]
fn the_descriptor_hash_is_the_reference_hash_for_every_frame_shape() {
    let vid = 0x123;
    let cases: Vec<Case> = vec![
        (
            "plain ipv4",
            seg4().build(),
            reference(&seg4(), true),
            RssHashType::TcpIpv4,
            None,
        ),
        (
            "802.1q",
            tag(seg4().build(), 0x8100, vid),
            reference(&seg4(), true),
            RssHashType::TcpIpv4,
            Some(vid),
        ),
        (
            "qinq",
            tag(tag(seg4().build(), 0x8100, 7), 0x88a8, vid),
            reference(&seg4(), true),
            RssHashType::TcpIpv4,
            Some(vid),
        ),
        (
            "ipv4 fragment",
            first_fragment(seg4().build()),
            reference(&seg4(), false),
            RssHashType::Ipv4,
            None,
        ),
        (
            "ipv6",
            seg6().build(),
            reference(&seg6(), true),
            RssHashType::TcpIpv6,
            None,
        ),
        (
            "ipv6 hop-by-hop",
            with_ext_header(seg6().build(), 0),
            reference(&seg6(), true),
            RssHashType::TcpIpv6,
            None,
        ),
        (
            "ipv6 atomic fragment",
            with_ext_header(seg6().build(), 44),
            reference(&seg6(), false),
            RssHashType::Ipv6,
            None,
        ),
    ];
    for (name, frame, hash, ty, vlan) in cases {
        let d = receive_one(frame);
        assert_eq!(d.meta.hash, Some(hash), "{name}");
        assert_eq!(d.meta.hash_type, Some(ty), "{name}");
        assert_eq!(d.meta.vlan.map(|t| t.vid), vlan, "{name}");
    }
}

#[test]
fn offsets_and_verdicts_describe_the_frame_as_delivered() {
    let d = receive_one(seg4().build());
    assert_eq!((d.meta.l3_offset, d.meta.l4_offset), (Some(14), Some(34)));
    assert_eq!(
        (d.meta.csum.ip, d.meta.csum.l4),
        (CsumVerdict::Good, CsumVerdict::Good)
    );
    assert_eq!((d.meta.coalesced_segments, d.meta.gro_mss_bytes), (1, 0));

    let d = receive_one(tag(seg4().build(), 0x8100, 5));
    assert_eq!((d.meta.l3_offset, d.meta.l4_offset), (Some(18), Some(38)));
    assert_eq!(d.meta.vlan, Some(VlanTag::from_tci(5)));
    assert_eq!(d.meta.csum.l4, CsumVerdict::Good);

    // QinQ: hashed, but the checksum offload does not look behind an 802.1ad tag.
    let d = receive_one(tag(tag(seg4().build(), 0x8100, 7), 0x88a8, 5));
    assert_eq!((d.meta.l3_offset, d.meta.l4_offset), (None, None));
    assert_eq!(d.meta.csum, nic::RxChecksum::UNKNOWN);

    // A fragment: the header is checked, the transport is not the NIC's to judge.
    let d = receive_one(first_fragment(seg4().build()));
    assert_eq!((d.meta.l3_offset, d.meta.l4_offset), (Some(14), None));
    assert_eq!(
        (d.meta.csum.ip, d.meta.csum.l4),
        (CsumVerdict::Good, CsumVerdict::Unknown)
    );

    // IPv6: no header checksum; with extension headers the transport is left to the stack.
    let d = receive_one(seg6().build());
    assert_eq!(
        (d.meta.csum.ip, d.meta.csum.l4),
        (CsumVerdict::Unknown, CsumVerdict::Good)
    );
    let d = receive_one(with_ext_header(seg6().build(), 0));
    assert_eq!(d.meta.l4_offset, None);
    assert_eq!(d.meta.csum.l4, CsumVerdict::Unknown);

    // Non-IP: nothing known.
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let d = receive_one(arp);
    assert_eq!(d.meta.hash, None);
    assert_eq!(
        (d.meta.l3_offset, d.meta.csum),
        (None, nic::RxChecksum::UNKNOWN)
    );
}

/// A frame whose transport checksum the OS vouched for (`receive_on_queue_l4_valid`) is
/// reported `Good` without being summed — a partial checksum from this host's kernel would
/// fail a software check — while its IPv4 header checksum is still verified.
#[test]
fn os_vouched_frames_skip_the_l4_check_but_not_the_ipv4_header() {
    let mut nic = nic();
    let mut partial = seg4().build();
    // What a local sender leaves: any value the payload does not sum to.
    partial[ETH + 20 + 16] ^= 0x5a;
    nic.receive_on_queue_l4_valid(0, 0, partial.clone());
    let mut bad_ip = seg4().build();
    bad_ip[ETH + 10] ^= 0xff;
    nic.receive_on_queue_l4_valid(0, 0, bad_ip);
    nic.receive_on_queue(0, 0, partial);
    let d = drain(&mut nic, 0, 0);
    assert_eq!(d.len(), 3);
    assert_eq!(d[0].meta.csum.l4, CsumVerdict::Good);
    assert_eq!(d[0].meta.csum.ip, CsumVerdict::Good);
    assert_eq!(d[1].meta.csum.ip, CsumVerdict::Bad);
    assert_eq!(
        d[2].meta.csum.l4,
        CsumVerdict::Bad,
        "verified when not vouched for"
    );
}
