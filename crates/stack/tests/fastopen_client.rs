//! TCP Fast Open (RFC 7413), client side, through the stack's API: stack A opens with
//! `tcp_connect_fastopen` / `tcp_connect_deferred` to stack B, whose listener is a Fast Open
//! one (the server side, `tests/fastopen.rs`).

mod common;

use common::*;
use stack::{SocketError, SocketHandle, SocketOption};
use tcp::fastopen::{FastOpenConfig, FastOpenKey, FastOpenKeys};
use tcp::tcpi_opt;
use wire::tcp::FastOpenOption;
use wire::{EthernetFrame, IpPair, Ipv4Packet, TcpPacket, TcpRepr};

const PORT: u16 = 80;

/// A (client side on) and B (server side on, a Fast Open listener on `PORT`), resolved.
fn pair() -> (Pair, SocketHandle) {
    let mut p = Pair::new();
    p.a.tcp_set_fastopen(FastOpenConfig::default().with_sysctl_bits(0x1));
    p.b.tcp_set_fastopen(FastOpenConfig::default().with_sysctl_bits(0x2));
    p.b.tcp_set_fastopen_keys(FastOpenKeys::new(FastOpenKey::from_words([1, 2, 3, 4])));
    let l = p.b.tcp_listen(v4(IP_B, PORT), 8).unwrap();
    p.b.set_option(l, SocketOption::FastOpenQueue(4)).unwrap();
    resolve(&mut p);
    (p, l)
}

/// B's cookie for A.
fn cookie() -> FastOpenOption {
    let key = FastOpenKey::from_words([1, 2, 3, 4]);
    FastOpenOption::with_cookie(&key.cookie(IP_A.into(), IP_B.into()), false).unwrap()
}

/// The TCP segments A sent while captured (still held): (flags, Fast Open option, payload
/// bytes).
fn captured(p: &Pair) -> Vec<(wire::TcpFlags, Option<FastOpenOption>, usize)> {
    p.captured_a
        .iter()
        .filter_map(|f| {
            let eth = EthernetFrame::new_checked(&f[..]).ok()?;
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
            let pair = IpPair::V4 {
                src: IP_A,
                dst: IP_B,
            };
            let r = TcpRepr::parse(&tcp, &pair, wire::ChecksumCaps::ALL).ok()?;
            Some((r.flags, r.fast_open, r.payload.len()))
        })
        .collect()
}

/// Delivers what A captured to B and lets the exchange run free again.
fn release(p: &mut Pair) {
    for f in core::mem::take(&mut p.captured_a) {
        p.b.receive(p.now, &f, &stack::RxMeta::NONE);
    }
    p.capture_a = false;
    p.exchange();
}

/// Reads everything B's accepted child holds.
fn server_reads(p: &mut Pair, l: SocketHandle) -> Vec<u8> {
    let (c, _) = p.b.tcp_accept(l).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = p.b.tcp_recv(c, &mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// A first open that draws B's cookie into A's cache (and closes).
fn warm_up(p: &mut Pair, l: SocketHandle) {
    let (h, n) =
        p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &[], b"x")
            .unwrap();
    assert_eq!(n, 0, "no cookie yet: nothing rides in the SYN");
    p.exchange();
    assert_eq!(
        p.a.tcp_fastopen_cached(IP_B.into()).unwrap().cookie,
        Some(cookie())
    );
    let (c, _) = p.b.tcp_accept(l).unwrap();
    p.a.close(p.now, h).unwrap();
    p.b.close(p.now, c).unwrap();
    p.advance(S);
}

#[test]
fn without_a_cookie_the_syn_asks_for_one_and_carries_no_data() {
    let (mut p, _l) = pair();
    p.capture_a = true;
    let (_h, n) =
        p.a.tcp_connect_fastopen(0, v4(IP_B, PORT), 0, &[], b"hello")
            .unwrap();
    assert_eq!(n, 0);
    p.exchange();
    let segs = captured(&p);
    assert_eq!(
        segs,
        vec![(wire::TcpFlags::SYN, Some(FastOpenOption::request(false)), 0)]
    );
    assert_eq!(p.a.counters().tcp_fastopen_client_cookie_requests, 1);
}

#[test]
fn with_the_cookie_cached_the_syn_carries_the_data_and_the_server_reads_it() {
    let (mut p, l) = pair();
    warm_up(&mut p, l);
    let data = vec![7u8; 3000];
    p.capture_a = true;
    let (h, n) =
        p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &[], &data)
            .unwrap();
    // B's SYN-ACK announced MSS 1460: 1460 - 40 bytes ride in the SYN.
    assert_eq!(n, 1420);
    p.exchange();
    assert_eq!(
        captured(&p),
        vec![(wire::TcpFlags::SYN, Some(cookie()), 1420)]
    );
    // The rest goes after the handshake, queued while in SYN-SENT.
    assert_eq!(p.a.tcp_send(h, &data[n..]), Ok(1580));
    release(&mut p);
    p.advance(S);
    let got = server_reads(&mut p, l);
    assert!(
        got == data,
        "the server read {} of {} bytes",
        got.len(),
        data.len()
    );
    let info = p.a.tcp_info(p.now, h).unwrap();
    assert_eq!(info.options & tcpi_opt::SYN_DATA, tcpi_opt::SYN_DATA);
    assert_eq!(p.a.counters().tcp_fastopen_client_syn_data_acked, 1);
    assert_eq!(p.b.counters().tcp_fastopen_children, 1);
}

#[test]
fn a_deferred_open_sends_nothing_until_the_first_send_which_the_syn_carries() {
    let (mut p, l) = pair();
    warm_up(&mut p, l);
    p.capture_a = true;
    let (h, deferred) =
        p.a.tcp_connect_deferred(p.now, v4(IP_B, PORT), 0, &[])
            .unwrap();
    assert!(deferred);
    assert!(p.a.tcp_is_deferred(h));
    p.advance(3 * S);
    assert!(captured(&p).is_empty(), "no SYN before the first send");
    assert!(
        p.a.tcp_readiness(h)
            .unwrap()
            .contains(stack::Readiness::WRITABLE)
    );
    // The first send takes only what the SYN carries.
    assert_eq!(p.a.tcp_send(h, &[5u8; 2000]), Ok(1420));
    assert!(!p.a.tcp_is_deferred(h));
    p.exchange();
    assert_eq!(
        captured(&p),
        vec![(wire::TcpFlags::SYN, Some(cookie()), 1420)]
    );
}

#[test]
fn a_deferred_open_without_a_cookie_sends_its_cookie_request_at_once() {
    let (mut p, _l) = pair();
    p.capture_a = true;
    let (h, deferred) = p.a.tcp_connect_deferred(0, v4(IP_B, PORT), 0, &[]).unwrap();
    assert!(!deferred);
    assert!(!p.a.tcp_is_deferred(h));
    p.exchange();
    assert_eq!(
        captured(&p),
        vec![(wire::TcpFlags::SYN, Some(FastOpenOption::request(false)), 0)]
    );
}

#[test]
fn data_a_server_refuses_is_sent_again_after_the_handshake_and_the_new_cookie_cached() {
    let (mut p, l) = pair();
    warm_up(&mut p, l);
    // B's key changes twice: A's cookie is no longer valid.
    p.b.tcp_rotate_fastopen_key(FastOpenKey::from_words([5; 4]));
    p.b.tcp_rotate_fastopen_key(FastOpenKey::from_words([6; 4]));
    let (h, n) =
        p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &[], b"request")
            .unwrap();
    assert_eq!(n, 7);
    p.exchange();
    assert_eq!(server_reads(&mut p, l), b"request");
    let info = p.a.tcp_info(p.now, h).unwrap();
    assert_eq!(info.options & tcpi_opt::SYN_DATA, 0);
    let fresh = FastOpenKey::from_words([6; 4]).cookie(IP_A.into(), IP_B.into());
    assert_eq!(
        p.a.tcp_fastopen_cached(IP_B.into()).unwrap().cookie,
        FastOpenOption::with_cookie(&fresh, false)
    );
    assert_eq!(p.a.counters().tcp_fastopen_client_syn_data_unacked, 1);
}

#[test]
fn fast_open_opens_are_refused_while_the_client_side_is_off() {
    let (mut p, _l) = pair();
    p.a.tcp_set_fastopen(FastOpenConfig::default());
    assert_eq!(
        p.a.tcp_connect_fastopen(0, v4(IP_B, PORT), 0, &[], b"x")
            .map(|_| ()),
        Err(SocketError::NotSupported)
    );
    assert_eq!(
        p.a.tcp_connect_deferred(0, v4(IP_B, PORT), 0, &[])
            .map(|_| ()),
        Err(SocketError::NotSupported)
    );
}

#[test]
fn flushing_the_cache_sends_the_next_open_back_to_a_cookie_request() {
    let (mut p, l) = pair();
    warm_up(&mut p, l);
    assert_eq!(p.a.tcp_fastopen_cache().len(), 1);
    p.a.tcp_fastopen_flush_cache();
    assert!(p.a.tcp_fastopen_cached(IP_B.into()).is_none());
    let (_h, n) =
        p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &[], b"x")
            .unwrap();
    assert_eq!(n, 0);
    // A bound of 0 caches nothing.
    p.a.tcp_set_fastopen_cache_servers_max(0);
    p.exchange();
    assert!(p.a.tcp_fastopen_cache().is_empty());
}

#[test]
fn options_given_with_the_open_apply_before_the_syn_is_sized() {
    let (mut p, l) = pair();
    warm_up(&mut p, l);
    p.capture_a = true;
    let opts = [SocketOption::MaxSegment(1040), SocketOption::SynRetries(1)];
    let (_h, n) =
        p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &opts, &[1u8; 5000])
            .unwrap();
    // Our MSS of 1040 caps the cached 1460: 1040 - 40.
    assert_eq!(n, 1000);
    p.exchange();
    assert_eq!(
        captured(&p),
        vec![(wire::TcpFlags::SYN, Some(cookie()), 1000)]
    );
    // One retransmission, then the open times out (1 s + 2 s).
    p.captured_a.clear();
    p.advance(3 * S + MS);
    let plain_syn = (wire::TcpFlags::SYN, None, 0);
    assert_eq!(captured(&p), vec![plain_syn]);
}

#[test]
fn a_request_that_draws_no_cookie_is_retried_once_in_the_experimental_form() {
    let (mut p, _l) = pair();
    // B's listener is an ordinary one: it answers no Fast Open option.
    p.b.tcp_set_fastopen(FastOpenConfig::default());
    let mut forms = Vec::new();
    for _ in 0..3 {
        p.capture_a = true;
        let (h, _) =
            p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &[], b"x")
                .unwrap();
        p.exchange();
        forms.push(captured(&p)[0].1);
        release(&mut p);
        p.a.tcp_abort(h).unwrap();
        p.advance(S);
    }
    assert_eq!(
        forms,
        vec![
            Some(FastOpenOption::request(false)),
            Some(FastOpenOption::request(true)),
            Some(FastOpenOption::request(false)),
        ]
    );
    assert_eq!(p.a.tcp_fastopen_cached(IP_B.into()).unwrap().try_exp, 2);
}

#[test]
fn recurring_losses_of_syn_data_set_fast_open_aside() {
    let (mut p, l) = pair();
    warm_up(&mut p, l);
    for round in 1..=2u16 {
        // The SYN with data is lost; its retransmission (a plain SYN) gets through.
        p.capture_a = true;
        let (h, n) =
            p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &[], b"data")
                .unwrap();
        assert_eq!(n, 4);
        p.exchange();
        p.captured_a.clear();
        p.capture_a = false;
        p.advance(S + 10 * MS);
        assert_eq!(p.a.tcp_state(h), Some(tcp::State::Established));
        let e = p.a.tcp_fastopen_cached(IP_B.into()).unwrap();
        assert_eq!(e.syn_losses, round);
        assert_eq!(server_reads(&mut p, l), b"data", "the data is sent again");
        p.a.tcp_abort(h).unwrap();
        p.advance(S);
    }
    // Two in a row: the next open is an ordinary SYN, without the option or data.
    p.capture_a = true;
    let (_h, n) =
        p.a.tcp_connect_fastopen(p.now, v4(IP_B, PORT), 0, &[], b"data")
            .unwrap();
    assert_eq!(n, 0);
    p.exchange();
    assert_eq!(captured(&p), vec![(wire::TcpFlags::SYN, None, 0)]);
    assert_eq!(p.a.counters().tcp_fastopen_client_disabled_after_loss, 1);
}
