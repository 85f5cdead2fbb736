//! TCP Fast Open (RFC 7413), server side, through the stack's API: a client's SYN is built
//! by hand (the stack has no Fast Open client), the stack's replies are parsed.

mod common;

use common::*;
use stack::{RxMeta, SocketOption, Stack};
use tcp::fastopen::{FastOpenConfig, FastOpenKey, FastOpenKeys};
use tcp::tcpi_opt;
use wire::tcp::FastOpenOption;
use wire::{
    ArpOperation, ArpPacket, ArpRepr, ChecksumCaps, EtherType, EthernetFrame, EthernetRepr, IpPair,
    IpProtocol, Ipv4Packet, Ipv4Repr, SeqNumber, TcpFlags, TcpPacket, TcpRepr,
};

const ETH: usize = 14;
const CLIENT_PORT: u16 = 40_000;
const SERVER_PORT: u16 = 80;
const CLIENT_ISN: u32 = 7_000;

/// A TCP/IPv4 frame from A (the client) to B.
fn from_a(seq: u32, ack: u32, flags: TcpFlags, fo: Option<FastOpenOption>, data: &[u8]) -> Vec<u8> {
    let seg = TcpRepr {
        src_port: CLIENT_PORT,
        dst_port: SERVER_PORT,
        seq_number: SeqNumber(seq),
        ack_number: SeqNumber(ack),
        flags,
        window_len: 65_535,
        urgent_pointer: 0,
        max_seg_size: flags.contains(TcpFlags::SYN).then_some(1460),
        window_scale: None,
        sack_permitted: false,
        sack_blocks: [None; 4],
        timestamp: None,
        fast_open: fo,
        payload: data,
    };
    tcp_v4_frame((MAC_A, IP_A), (MAC_B, IP_B), &seg)
}

/// Answers B's ARP request for A.
fn answer_arp(b: &mut Stack, now: u64, payload: &[u8]) {
    let req = ArpRepr::parse(&ArpPacket::new_checked(payload).unwrap()).unwrap();
    let reply = ArpRepr {
        operation: ArpOperation::REPLY,
        source_hardware_addr: MAC_A,
        source_protocol_addr: req.target_protocol_addr,
        target_hardware_addr: req.source_hardware_addr,
        target_protocol_addr: req.source_protocol_addr,
    };
    let eth = EthernetRepr {
        src_addr: MAC_A,
        dst_addr: MAC_B,
        vlan: None,
        ethertype: EtherType::ARP,
    };
    let mut buf = vec![0u8; eth.header_len() + reply.buffer_len()];
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.emit(&mut frame).unwrap();
    reply
        .emit(&mut ArpPacket::new_unchecked(frame.payload_mut()))
        .unwrap();
    b.receive(now, &buf, &RxMeta::NONE);
}

/// The TCP segments B sent: (flags, seq, ack, Fast Open option, payload bytes); B's ARP
/// requests are answered.
fn sent_segments(
    b: &mut Stack,
    now: u64,
) -> Vec<(TcpFlags, u32, u32, Option<FastOpenOption>, usize)> {
    let mut out = Vec::new();
    while let Some(f) = b.poll_transmit(now) {
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        if eth.ethertype() == EtherType::ARP {
            answer_arp(b, now, eth.payload());
            continue;
        }
        if eth.ethertype() != EtherType::IPV4 {
            continue;
        }
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        let pair = IpPair::V4 {
            src: IP_B,
            dst: IP_A,
        };
        let r = TcpRepr::parse(&tcp, &pair, ChecksumCaps::ALL).unwrap();
        out.push((
            r.flags,
            r.seq_number.0,
            r.ack_number.0,
            r.fast_open,
            r.payload.len(),
        ));
    }
    out
}

fn server(cfg: FastOpenConfig, queue: u32) -> (Stack, stack::SocketHandle) {
    let mut b = Stack::new(config_b());
    b.tcp_set_fastopen(cfg);
    b.tcp_set_fastopen_keys(FastOpenKeys::new(FastOpenKey::from_words([1, 2, 3, 4])));
    let l = b.tcp_listen(v4(IP_B, SERVER_PORT), 8).unwrap();
    if queue > 0 {
        b.set_option(l, SocketOption::FastOpenQueue(queue)).unwrap();
    }
    (b, l)
}

fn server_on() -> FastOpenConfig {
    FastOpenConfig::default().with_sysctl_bits(0x3)
}

fn valid_cookie() -> FastOpenOption {
    let key = FastOpenKey::from_words([1, 2, 3, 4]);
    FastOpenOption::with_cookie(&key.cookie(IP_A.into(), IP_B.into()), false).unwrap()
}

#[test]
fn a_cookie_request_draws_the_cookie_and_the_data_waits() {
    let (mut b, _l) = server(server_on(), 4);
    let syn = from_a(
        CLIENT_ISN,
        0,
        TcpFlags::SYN,
        Some(FastOpenOption::request(false)),
        b"hi",
    );
    b.receive(0, &syn, &RxMeta::NONE);
    let segs = sent_segments(&mut b, 0);
    assert_eq!(segs.len(), 1);
    let (flags, _, ack, fo, _) = segs[0];
    assert_eq!(flags, TcpFlags::SYN | TcpFlags::ACK);
    // Only the SYN is acknowledged: the client sends its data again.
    assert_eq!(ack, CLIENT_ISN + 1);
    assert_eq!(fo, Some(valid_cookie()));
    let c = b.counters();
    assert_eq!(c.tcp_fastopen_cookies_sent, 1);
    assert_eq!(c.tcp_fastopen_syn_data_dropped, 1);
}

#[test]
fn a_valid_cookie_makes_the_data_readable_before_the_handshake_completes() {
    let (mut b, l) = server(server_on(), 4);
    let syn = from_a(CLIENT_ISN, 0, TcpFlags::SYN, Some(valid_cookie()), b"GET /");
    b.receive(0, &syn, &RxMeta::NONE);
    let segs = sent_segments(&mut b, 0);
    let (flags, iss, ack, fo, _) = segs[0];
    assert_eq!(flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(ack, CLIENT_ISN + 1 + 5, "the SYN-ACK acknowledges the data");
    assert_eq!(fo, None);
    // Accepted, read and answered before the client's ACK.
    let (c, _) = b.tcp_accept(l).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(b.tcp_recv(c, &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"GET /");
    assert_eq!(
        b.tcp_info(0, c).unwrap().options & tcpi_opt::SYN_DATA,
        tcpi_opt::SYN_DATA
    );
    assert_eq!(b.tcp_send(c, b"200"), Ok(3));
    let segs = sent_segments(&mut b, 0);
    assert_eq!(segs.len(), 1);
    assert_eq!((segs[0].1, segs[0].4), (iss + 1, 3));
    // The client's ACK covers the SYN and the reply.
    let ack = from_a(CLIENT_ISN + 6, iss + 4, TcpFlags::ACK, None, b"");
    b.receive(MS, &ack, &RxMeta::NONE);
    assert_eq!(b.tcp_state(c), Some(tcp::State::Established));
    assert_eq!(b.tcp_send_queue_bytes(c), Ok(0));
    assert_eq!(b.counters().tcp_fastopen_children, 1);
}

#[test]
fn an_invalid_cookie_drops_the_data_and_draws_a_fresh_cookie() {
    let (mut b, l) = server(server_on(), 4);
    let bad = FastOpenOption::with_cookie(&[0xaa; 8], false);
    b.receive(
        0,
        &from_a(CLIENT_ISN, 0, TcpFlags::SYN, bad, b"x"),
        &RxMeta::NONE,
    );
    let segs = sent_segments(&mut b, 0);
    assert_eq!(segs[0].2, CLIENT_ISN + 1);
    assert_eq!(segs[0].3, Some(valid_cookie()));
    // Not acceptable before the handshake completes.
    assert!(b.tcp_accept(l).is_err());
}

#[test]
fn a_retransmitted_syn_ack_carries_no_cookie() {
    let (mut b, _l) = server(server_on(), 4);
    let syn = from_a(
        CLIENT_ISN,
        0,
        TcpFlags::SYN,
        Some(FastOpenOption::request(true)),
        b"",
    );
    b.receive(0, &syn, &RxMeta::NONE);
    let first = sent_segments(&mut b, 0);
    assert!(first[0].3.is_some_and(|o| o.experimental));
    let rto = b.poll_timeout().unwrap();
    b.handle_timeout(rto);
    let again = sent_segments(&mut b, rto);
    assert_eq!(again[0].0, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(again[0].3, None);
}

#[test]
fn a_listener_without_a_queue_or_a_stack_with_fast_open_off_is_ordinary() {
    for (cfg, queue) in [(server_on(), 0), (FastOpenConfig::default(), 4)] {
        let (mut b, l) = server(cfg, queue);
        let syn = from_a(CLIENT_ISN, 0, TcpFlags::SYN, Some(valid_cookie()), b"data");
        b.receive(0, &syn, &RxMeta::NONE);
        let segs = sent_segments(&mut b, 0);
        assert_eq!((segs[0].2, segs[0].3), (CLIENT_ISN + 1, None));
        assert!(b.tcp_accept(l).is_err());
    }
}

#[test]
fn the_queue_bound_turns_further_fast_open_syns_into_ordinary_ones() {
    let (mut b, _l) = server(server_on(), 1);
    let syn = from_a(CLIENT_ISN, 0, TcpFlags::SYN, Some(valid_cookie()), b"one");
    b.receive(0, &syn, &RxMeta::NONE);
    assert_eq!(sent_segments(&mut b, 0)[0].2, CLIENT_ISN + 4);
    // A second client port: the one child still in SYN-RECEIVED fills the queue.
    let mut second = from_a(CLIENT_ISN, 0, TcpFlags::SYN, Some(valid_cookie()), b"two");
    let tcp_at = ETH + 20;
    let mut seg = TcpPacket::new_unchecked(&mut second[tcp_at..]);
    seg.set_src_port(CLIENT_PORT + 1);
    seg.fill_checksum(&IpPair::V4 {
        src: IP_A,
        dst: IP_B,
    });
    b.receive(0, &second, &RxMeta::NONE);
    assert_eq!(sent_segments(&mut b, 0)[0].2, CLIENT_ISN + 1);
    assert_eq!(b.counters().tcp_fastopen_queue_full, 1);
}

#[test]
fn a_listener_key_overrides_the_stacks_and_closing_with_unread_syn_data_resets() {
    let (mut b, l) = server(server_on(), 4);
    let own = [9u8; 16];
    b.set_option(l, SocketOption::FastOpenKey(own)).unwrap();
    // The stack's cookie is no longer valid here.
    b.receive(
        0,
        &from_a(CLIENT_ISN, 0, TcpFlags::SYN, Some(valid_cookie()), b"x"),
        &RxMeta::NONE,
    );
    let segs = sent_segments(&mut b, 0);
    let mine = FastOpenKey::from_bytes(own).cookie(IP_A.into(), IP_B.into());
    assert_eq!(segs[0].3.map(|o| o.cookie().to_vec()), Some(mine.to_vec()));
    // With the listener's own cookie the data is taken; closing unread resets.
    let (mut b, l) = server(server_on(), 4);
    b.set_option(l, SocketOption::FastOpenKey(own)).unwrap();
    let good = FastOpenOption::with_cookie(&mine, false);
    b.receive(
        0,
        &from_a(CLIENT_ISN, 0, TcpFlags::SYN, good, b"xyz"),
        &RxMeta::NONE,
    );
    sent_segments(&mut b, 0);
    let (c, _) = b.tcp_accept(l).unwrap();
    b.close(0, c).unwrap();
    let segs = sent_segments(&mut b, 0);
    assert!(segs[0].0.contains(TcpFlags::RST), "{segs:?}");
}

#[test]
fn a_child_reset_before_accept_keeps_its_syn_data_for_the_application() {
    let (mut b, l) = server(server_on(), 4);
    let syn = from_a(CLIENT_ISN, 0, TcpFlags::SYN, Some(valid_cookie()), b"late");
    b.receive(0, &syn, &RxMeta::NONE);
    sent_segments(&mut b, 0);
    let rst = from_a(CLIENT_ISN + 5, 0, TcpFlags::RST, None, b"");
    b.receive(MS, &rst, &RxMeta::NONE);
    sent_segments(&mut b, MS);
    let (c, _) = b.tcp_accept(l).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(b.tcp_recv(c, &mut buf), Ok(4));
    assert_eq!(&buf[..4], b"late");
    assert_eq!(b.tcp_recv(c, &mut buf), Err(stack::SocketError::Reset));
}

/// An ICMPv4 destination unreachable (`code`) from A about B's segment with sequence
/// number `seq` (B's SYN-ACK): the quoted IP header and the first 8 TCP bytes.
fn unreachable_from_a(code: u8, seq: u32) -> Vec<u8> {
    let quoted_ip = Ipv4Repr {
        src_addr: IP_B,
        dst_addr: IP_A,
        protocol: IpProtocol::TCP,
        payload_len: 20,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let mut quote = vec![0u8; quoted_ip.buffer_len()];
    quoted_ip
        .emit(
            &mut Ipv4Packet::new_unchecked(&mut quote[..]),
            ChecksumCaps::ALL,
        )
        .unwrap();
    quote.truncate(20);
    quote.extend_from_slice(&SERVER_PORT.to_be_bytes());
    quote.extend_from_slice(&CLIENT_PORT.to_be_bytes());
    quote.extend_from_slice(&seq.to_be_bytes());
    let icmp = wire::icmpv4::Icmpv4Repr::DstUnreachable { code, data: &quote };
    icmpv4_frame((MAC_A, IP_A), (MAC_B, IP_B), &icmp)
}

/// A Fast Open child holding "early" from its SYN, not accepted, and its SYN-ACK's sequence
/// number.
fn fast_open_child(b: &mut Stack) -> u32 {
    let syn = from_a(CLIENT_ISN, 0, TcpFlags::SYN, Some(valid_cookie()), b"early");
    b.receive(0, &syn, &RxMeta::NONE);
    let sent = sent_segments(b, 0);
    let &(flags, iss, ..) = sent.first().expect("SYN-ACK");
    assert!(flags.contains(TcpFlags::SYN | TcpFlags::ACK));
    iss
}

#[test]
fn an_icmp_error_ends_an_unaccepted_fast_open_child_which_keeps_its_syn_data() {
    // A soft error (host unreachable) leaves the child alone under RFC 1122 §4.2.3.9 …
    let (mut b, l) = server(server_on(), 4);
    let iss = fast_open_child(&mut b);
    b.receive(MS, &unreachable_from_a(1, iss), &RxMeta::NONE);
    assert!(sent_segments(&mut b, MS).is_empty());
    let (c, _) = b.tcp_accept(l).unwrap();
    assert_eq!(b.tcp_state(c), Some(tcp::State::SynReceived));
    assert_eq!(b.counters().tcp_icmp_soft_errors, 1);

    // … a hard one (port unreachable) ends it, without a RST: accept still hands it over,
    // its SYN data is read first, then the error once, then writes fail.
    let (mut b, l) = server(server_on(), 4);
    let iss = fast_open_child(&mut b);
    b.receive(MS, &unreachable_from_a(3, iss), &RxMeta::NONE);
    assert!(sent_segments(&mut b, MS).is_empty(), "no RST");
    assert_eq!(b.counters().tcp_icmp_opens_aborted, 1);
    let (c, _) = b.tcp_accept(l).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(b.tcp_recv(c, &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"early");
    assert_eq!(
        b.tcp_recv(c, &mut buf),
        Err(stack::SocketError::Unreachable)
    );
    assert_eq!(b.tcp_send(c, b"x"), Err(stack::SocketError::Closed));

    // With Linux's rules (`tcp_v4_err`) the soft error ends it too.
    let mut cfg = config_b();
    cfg.tcp_icmp_errors_abort_opening = true;
    let mut b = Stack::new(cfg);
    b.tcp_set_fastopen(server_on());
    b.tcp_set_fastopen_keys(FastOpenKeys::new(FastOpenKey::from_words([1, 2, 3, 4])));
    let l = b.tcp_listen(v4(IP_B, SERVER_PORT), 8).unwrap();
    b.set_option(l, SocketOption::FastOpenQueue(4)).unwrap();
    let iss = fast_open_child(&mut b);
    b.receive(MS, &unreachable_from_a(1, iss), &RxMeta::NONE);
    let (c, _) = b.tcp_accept(l).unwrap();
    assert_eq!(b.tcp_recv(c, &mut buf), Ok(5));
    assert_eq!(
        b.tcp_recv(c, &mut buf),
        Err(stack::SocketError::Unreachable)
    );
}
