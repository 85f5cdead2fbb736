//! Reading the flow an ICMP error is about from the packet it quotes (PMTUD, RFC 5927 checks).

use core::net::{Ipv4Addr, Ipv6Addr};

use wire::ipv6::{Ipv6ExtHeader, Ipv6FragmentHeader, MAX_EXT_HEADERS};
use wire::{
    ChecksumCaps, Error, Icmpv4Packet, Icmpv4Repr, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr,
    Ipv6Packet, Ipv6Repr, QuotedFlow, SeqNumber, TcpFlags, TcpPacket, TcpRepr, icmpv4, icmpv6,
};

fn segment() -> TcpRepr<'static> {
    TcpRepr {
        payload: &[0x55; 1400],
        ..TcpRepr::bare(
            40000,
            443,
            SeqNumber(0xdead_beef),
            SeqNumber(1),
            TcpFlags::ACK,
            100,
        )
    }
}

fn tcp_over_ipv4(frag_offset_bytes: u16) -> Vec<u8> {
    let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 9, 9, 9));
    let tcp = segment();
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::TCP,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 3,
        dont_frag: frag_offset_bytes == 0,
        more_frags: false,
        frag_offset_bytes,
    };
    let mut b = vec![0u8; ip.buffer_len()];
    let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
    ip.emit(&mut p, ChecksumCaps::ALL).expect("fits");
    tcp.emit(
        &mut TcpPacket::new_unchecked(p.payload_mut()),
        &IpPair::V4 { src, dst },
        ChecksumCaps::ALL,
    )
    .expect("fits");
    b
}

#[test]
fn frag_needed_quote_yields_ports_and_tcp_sequence() {
    let sent = tcp_over_ipv4(0);
    // A router quotes the header and 8 bytes (RFC 792) in a fragmentation-needed message.
    let err = Icmpv4Repr::FragNeeded {
        next_hop_mtu: 1280,
        data: &sent[..28],
    };
    let mut b = vec![0u8; err.buffer_len()];
    err.emit(
        &mut Icmpv4Packet::new_unchecked(&mut b[..]),
        ChecksumCaps::ALL,
    )
    .expect("fits");
    let parsed = Icmpv4Repr::parse(
        &Icmpv4Packet::new_checked(&b[..]).expect("valid"),
        ChecksumCaps::ALL,
    )
    .expect("parses");
    let Icmpv4Repr::FragNeeded { next_hop_mtu, data } = parsed else {
        panic!("expected FragNeeded, got {parsed:?}");
    };
    assert_eq!(next_hop_mtu, 1280);
    assert_eq!(
        icmpv4::quoted_flow(data),
        Ok(QuotedFlow {
            addrs: IpPair::V4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 9, 9, 9)
            },
            protocol: IpProtocol::TCP,
            src_port: 40000,
            dst_port: 443,
            tcp_seq: Some(SeqNumber(0xdead_beef)),
        })
    );
}

#[test]
fn quote_of_non_first_fragment_or_short_quote_is_rejected() {
    assert_eq!(
        icmpv4::quoted_flow(&tcp_over_ipv4(1480)[..28]),
        Err(Error::Unsupported)
    );
    assert_eq!(
        icmpv4::quoted_flow(&tcp_over_ipv4(0)[..23]),
        Err(Error::Truncated)
    );
    assert_eq!(
        icmpv4::quoted_flow(&tcp_over_ipv4(0)[..19]),
        Err(Error::Truncated)
    );
}

fn tcp_over_ipv6(frag: Option<Ipv6FragmentHeader>) -> Vec<u8> {
    let src = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    let dst = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    let tcp = segment();
    let mut ext = [None; MAX_EXT_HEADERS];
    ext[0] = Some(Ipv6ExtHeader::DestinationOptions { len_bytes: 16 });
    ext[1] = frag.map(Ipv6ExtHeader::Fragment);
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::TCP,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
        ext_headers: ext,
    };
    let mut b = vec![0u8; ip.buffer_len()];
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]))
        .expect("fits");
    let h = ip.header_len();
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut b[h..]),
        &IpPair::V6 { src, dst },
        ChecksumCaps::ALL,
    )
    .expect("fits");
    b
}

#[test]
fn packet_too_big_quote_walks_ext_headers_to_the_ports() {
    let sent = tcp_over_ipv6(None);
    let flow = icmpv6::quoted_flow(&sent[..1232]).expect("quote parses");
    assert_eq!((flow.src_port, flow.dst_port), (40000, 443));
    assert_eq!(flow.tcp_seq, Some(SeqNumber(0xdead_beef)));
    assert_eq!(flow.protocol, IpProtocol::TCP);
}

#[test]
fn ipv6_quote_of_non_first_fragment_is_unsupported() {
    let frag = Ipv6FragmentHeader {
        offset_bytes: 1232,
        more_frags: false,
        ident: 9,
    };
    assert_eq!(
        icmpv6::quoted_flow(&tcp_over_ipv6(Some(frag))[..200]),
        Err(Error::Unsupported)
    );
    let first = Ipv6FragmentHeader {
        offset_bytes: 0,
        more_frags: true,
        ident: 9,
    };
    assert!(icmpv6::quoted_flow(&tcp_over_ipv6(Some(first))[..200]).is_ok());
}
