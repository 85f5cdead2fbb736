//! Known-good frames: bytes laid out the way Linux sends them, with checksums computed by an
//! independent implementation (a 16-bit-at-a-time Python RFC 1071 sum).

use core::net::Ipv4Addr;

use wire::{
    ChecksumCaps, EtherType, EthernetFrame, EthernetRepr, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr,
    SeqNumber, TcpFlags, TcpPacket, TcpRepr, TcpTimestamp,
};

/// A Linux-style SYN: 192.168.1.10:51234 → 93.184.216.34:443, MSS 1460, SACK-permitted,
/// timestamps (tsval 0x1a2b3c4d), NOP, window scale 7.
const LINUX_SYN: &str = "0011223344556677889900aa08004500003c1c464000400626e9c0a8010a5db8d822c82201bb\
6e5d3c2b00000000a002faf08aa30000020405b40402080a1a2b3c4d0000000001030307";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector is hex"))
        .collect()
}

#[test]
fn linux_syn_parses_with_all_checksums_verified() {
    let bytes = hex(LINUX_SYN);
    let frame = EthernetFrame::new_checked(&bytes[..]).expect("ethernet");
    let eth = EthernetRepr::parse(&frame).expect("ethernet repr");
    assert_eq!(eth.ethertype, EtherType::IPV4);
    let ip = Ipv4Packet::new_checked(frame.payload()).expect("ipv4");
    let ip_repr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL).expect("ipv4 checksum verifies");
    assert_eq!(ip_repr.protocol, IpProtocol::TCP);
    assert!(ip_repr.dont_frag);
    let addrs = IpPair::V4 {
        src: ip_repr.src_addr,
        dst: ip_repr.dst_addr,
    };
    let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
    let t = TcpRepr::parse(&tcp, &addrs, ChecksumCaps::ALL).expect("tcp checksum verifies");
    assert_eq!((t.src_port, t.dst_port), (51234, 443));
    assert_eq!(t.flags, TcpFlags::SYN);
    assert_eq!(t.seq_number, SeqNumber(0x6e5d_3c2b));
    assert_eq!(t.window_len, 64240);
    assert_eq!(t.max_seg_size, Some(1460));
    assert!(t.sack_permitted);
    assert_eq!(
        t.timestamp,
        Some(TcpTimestamp {
            tsval: 0x1a2b_3c4d,
            tsecr: 0
        })
    );
    assert_eq!(t.window_scale, Some(7));
    assert!(t.payload.is_empty());
}

#[test]
fn emit_reproduces_linux_syn_byte_for_byte() {
    let bytes = hex(LINUX_SYN);
    let src = Ipv4Addr::new(192, 168, 1, 10);
    let dst = Ipv4Addr::new(93, 184, 216, 34);
    let tcp = TcpRepr {
        max_seg_size: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamp: Some(TcpTimestamp {
            tsval: 0x1a2b_3c4d,
            tsecr: 0,
        }),
        ..TcpRepr::bare(
            51234,
            443,
            SeqNumber(0x6e5d_3c2b),
            SeqNumber(0),
            TcpFlags::SYN,
            64240,
        )
    };
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::TCP,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 0x1c46,
        dont_frag: true,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let eth = EthernetRepr {
        dst_addr: wire::EthernetAddress([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]),
        src_addr: wire::EthernetAddress([0x66, 0x77, 0x88, 0x99, 0x00, 0xaa]),
        vlan: None,
        ethertype: EtherType::IPV4,
    };
    let mut out = vec![0u8; eth.header_len() + ip.buffer_len()];
    let mut f = EthernetFrame::new_unchecked(&mut out[..]);
    eth.emit(&mut f).expect("eth fits");
    let mut p = Ipv4Packet::new_unchecked(f.payload_mut());
    ip.emit(&mut p, ChecksumCaps::ALL).expect("ip fits");
    let mut s = TcpPacket::new_unchecked(p.payload_mut());
    tcp.emit(&mut s, &IpPair::V4 { src, dst }, ChecksumCaps::ALL)
        .expect("tcp fits");
    assert_eq!(out, bytes);
}

#[test]
fn linux_syn_displays_as_one_line_per_layer() {
    let bytes = hex(LINUX_SYN);
    let frame = EthernetFrame::new_checked(&bytes[..]).expect("ethernet");
    let eth = EthernetRepr::parse(&frame).expect("ethernet repr");
    assert_eq!(
        eth.to_string(),
        "66:77:88:99:00:aa > 00:11:22:33:44:55 type 0x0800"
    );
    let ip = Ipv4Packet::new_checked(frame.payload()).expect("ipv4");
    let ip_repr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL).expect("ipv4");
    assert_eq!(
        ip_repr.to_string(),
        "192.168.1.10 > 93.184.216.34 tcp ttl 64 id 7238 len 40 DF"
    );
    let addrs = IpPair::V4 {
        src: ip_repr.src_addr,
        dst: ip_repr.dst_addr,
    };
    let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
    let t = TcpRepr::parse(&tcp, &addrs, ChecksumCaps::ALL).expect("tcp");
    assert_eq!(
        t.to_string(),
        "51234 > 443 [S] seq 1851604011 win 64240 mss 1460 wscale 7 sackOK TS val 439041101 ecr 0 len 0"
    );
}
