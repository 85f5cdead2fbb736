//! The NIC's receive metadata (`RxMeta`): checksum verdicts the stack trusts, drops on a
//! "bad" verdict with the counters a software failure uses, and `RxMeta::NONE` verifying
//! everything as before.
//!
//! The NIC is trusted by design: a `Good` verdict skips the stack's own verification, so a
//! frame with a wrong checksum that the NIC (wrongly) called good is accepted. Only the `nic`
//! model's descriptors, whose verdicts describe the exact bytes handed on, may claim `Good`.
mod common;

use common::*;
use core::net::SocketAddr;

use stack::{CsumVerdict, RxChecksum, RxMeta, SocketHandle, Stack};

const ETH_IPV4_TCP_CSUM: usize = ETH + 20 + 16;
const ETH_IPV4_UDP_CSUM: usize = ETH + 20 + 6;
const ETH_IPV4_CSUM: usize = ETH + 10;

fn meta(ip: CsumVerdict, l4: CsumVerdict) -> RxMeta {
    RxMeta {
        csum: RxChecksum { ip, l4 },
        ..RxMeta::NONE
    }
}

const GOOD: RxMeta = RxMeta {
    csum: RxChecksum {
        ip: CsumVerdict::Good,
        l4: CsumVerdict::Good,
    },
    ..RxMeta::NONE
};

/// Listener on B, connection from A, accepted; A's next frames are captured, not delivered.
fn connected() -> (Pair, SocketHandle, SocketHandle) {
    let mut p = Pair::new();
    let server: SocketAddr = v4(IP_B, 80);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    p.capture_a = true;
    (p, c, s)
}

/// One data segment from A to B, not delivered.
fn data_segment(p: &mut Pair, c: SocketHandle, data: &[u8]) -> Vec<u8> {
    p.a.tcp_send(c, data).expect("send");
    p.exchange();
    assert_eq!(p.captured_a.len(), 1, "one segment");
    p.captured_a.remove(0)
}

fn read_all(s: &mut Stack, h: SocketHandle) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.tcp_recv(h, &mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn corrupt(frame: &mut [u8], at: usize) {
    frame[at] ^= 0x5a;
}

#[test]
fn a_frame_the_nic_verified_good_is_accepted_without_software_verification() {
    let (mut p, c, s) = connected();
    let f = data_segment(&mut p, c, b"trusted");
    let before = p.b.counters();
    p.b.receive(p.now, &f, &GOOD);
    assert_eq!(read_all(&mut p.b, s), b"trusted");
    let after = p.b.counters();
    assert_eq!(after.rx_csum_trusted, before.rx_csum_trusted + 1);
    assert_eq!(after.rx_ipv4_csum_trusted, before.rx_ipv4_csum_trusted + 1);
}

#[test]
fn a_wrong_checksum_with_a_good_verdict_is_accepted_because_the_nic_is_trusted() {
    let (mut p, c, s) = connected();
    let mut f = data_segment(&mut p, c, b"believed");
    corrupt(&mut f, ETH_IPV4_TCP_CSUM);
    corrupt(&mut f, ETH_IPV4_CSUM);
    p.b.receive(p.now, &f, &GOOD);
    assert_eq!(read_all(&mut p.b, s), b"believed");
    let c = p.b.counters();
    assert_eq!(
        (c.rx_drop_tcp_malformed, c.rx_drop_ipv4_bad_checksum),
        (0, 0)
    );
}

#[test]
fn a_bad_l4_verdict_drops_with_the_tcp_checksum_counter() {
    let (mut p, c, s) = connected();
    let f = data_segment(&mut p, c, b"refused");
    let before = p.b.counters();
    p.b.receive(p.now, &f, &meta(CsumVerdict::Good, CsumVerdict::Bad));
    assert_eq!(read_all(&mut p.b, s), b"");
    let after = p.b.counters();
    assert_eq!(
        after.rx_drop_tcp_malformed,
        before.rx_drop_tcp_malformed + 1
    );
    assert_eq!(after.rx_csum_trusted, before.rx_csum_trusted);
}

#[test]
fn a_bad_ip_verdict_drops_with_the_ipv4_checksum_counter() {
    let (mut p, c, s) = connected();
    let f = data_segment(&mut p, c, b"refused");
    let before = p.b.counters();
    p.b.receive(p.now, &f, &meta(CsumVerdict::Bad, CsumVerdict::Good));
    assert_eq!(read_all(&mut p.b, s), b"");
    let after = p.b.counters();
    assert_eq!(
        after.rx_drop_ipv4_bad_checksum,
        before.rx_drop_ipv4_bad_checksum + 1
    );
    assert_eq!(after.rx_ipv4_csum_trusted, before.rx_ipv4_csum_trusted);
}

#[test]
fn without_a_nic_the_stack_verifies_every_checksum_as_before() {
    let (mut p, c, s) = connected();
    let mut f = data_segment(&mut p, c, b"checked");
    corrupt(&mut f, ETH_IPV4_TCP_CSUM);
    let before = p.b.counters();
    p.b.receive(p.now, &f, &RxMeta::NONE);
    let mut f2 = f.clone();
    corrupt(&mut f2, ETH_IPV4_TCP_CSUM); // restored
    corrupt(&mut f2, ETH_IPV4_CSUM);
    p.b.receive(p.now, &f2, &RxMeta::NONE);
    let after = p.b.counters();
    assert_eq!(
        after.rx_drop_tcp_malformed,
        before.rx_drop_tcp_malformed + 1
    );
    assert_eq!(
        after.rx_drop_ipv4_bad_checksum,
        before.rx_drop_ipv4_bad_checksum + 1
    );
    assert_eq!((after.rx_csum_trusted, after.rx_ipv4_csum_trusted), (0, 0));
    assert_eq!(read_all(&mut p.b, s), b"");
    // Unknown verdicts are the same as no NIC at all.
    let mut f3 = f2.clone();
    corrupt(&mut f3, ETH_IPV4_CSUM); // restored: a good frame
    p.b.receive(
        p.now,
        &f3,
        &meta(CsumVerdict::Unknown, CsumVerdict::Unknown),
    );
    assert_eq!(read_all(&mut p.b, s), b"checked");
    assert_eq!(p.b.counters().rx_csum_trusted, 0);
}

/// A UDP datagram from A to B's bound socket, captured.
fn udp_setup(payload_len: usize) -> (Pair, SocketHandle, Vec<Vec<u8>>) {
    let mut p = Pair::new();
    resolve(&mut p);
    let srv = p.b.udp_bind(v4(IP_B, 53)).expect("bind b");
    let cli = p.a.udp_bind(v4(IP_A, 5353)).expect("bind a");
    p.capture_a = true;
    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
    p.a.udp_send_to(p.now, cli, v4(IP_B, 53), &payload)
        .expect("send");
    p.exchange();
    let frames = std::mem::take(&mut p.captured_a);
    (p, srv, frames)
}

#[test]
fn udp_trusts_a_good_verdict_and_drops_a_bad_one() {
    let (mut p, srv, frames) = udp_setup(32);
    let mut f = frames[0].clone();
    corrupt(&mut f, ETH_IPV4_UDP_CSUM);
    p.b.receive(p.now, &f, &GOOD);
    assert!(p.b.udp_recv_from(srv).is_ok(), "trusted");
    assert_eq!(p.b.counters().rx_csum_trusted, 1);
    p.b.receive(
        p.now,
        &frames[0],
        &meta(CsumVerdict::Good, CsumVerdict::Bad),
    );
    assert!(p.b.udp_recv_from(srv).is_err(), "dropped");
    assert_eq!(p.b.counters().rx_drop_udp_malformed, 1);
}

#[test]
fn an_l4_verdict_never_covers_a_datagram_reassembled_from_fragments() {
    let (mut p, srv, frames) = udp_setup(3000);
    assert!(frames.len() >= 2, "fragmented");
    let mut first = frames[0].clone();
    // The UDP header (and its checksum) is in the first fragment.
    corrupt(&mut first, ETH_IPV4_UDP_CSUM);
    p.b.receive(p.now, &first, &GOOD);
    for f in &frames[1..] {
        p.b.receive(p.now, f, &GOOD);
    }
    let c = p.b.counters();
    assert_eq!(c.rx_reassembled, 1);
    assert_eq!(
        c.rx_drop_udp_malformed, 1,
        "verified in software, and wrong"
    );
    assert_eq!(c.rx_csum_trusted, 0);
    assert!(p.b.udp_recv_from(srv).is_err());
}

/// Without a NIC, a data segment the connection predicts on a receive buffer that already
/// has storage has its checksum verified while the engine copies its text into the buffer
/// (`tcp::Connection::handle_segment_summing`): a segment whose payload was corrupted (its
/// checksum field intact) is dropped and counted as any bad checksum is, the engine sees
/// nothing, nothing becomes readable and nothing is sent in answer; the intact segment is
/// then taken whole.
#[test]
fn a_predicted_segment_whose_payload_fails_its_checksum_is_a_counted_drop_that_changes_nothing() {
    let (mut p, c, s) = connected();
    // Every write leaves at once (no Nagle wait behind an unacknowledged small segment).
    p.a.set_option(c, stack::SocketOption::NoDelay(true))
        .expect("nodelay");
    // The receive buffer's storage comes with a first segment, read at once.
    let first = data_segment(&mut p, c, &[7u8; 300]);
    p.b.receive(p.now, &first, &RxMeta::NONE);
    assert_eq!(read_all(&mut p.b, s), [7u8; 300]);
    for len in [1usize, 127, 128, 1000, 1448] {
        // B's answers so far reach A; then A's next segment is captured.
        p.exchange();
        let payload: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
        let f = data_segment(&mut p, c, &payload);
        let before = p.b.counters();
        let engine_before = p.b.tcp_counters();
        for at in [f.len() - len, f.len() - 1] {
            let mut bad = f.clone();
            corrupt(&mut bad, at);
            p.b.receive(p.now, &bad, &RxMeta::NONE);
        }
        let after = p.b.counters();
        assert_eq!(
            after.rx_drop_tcp_malformed,
            before.rx_drop_tcp_malformed + 2,
            "{len} bytes: both corrupted copies dropped"
        );
        assert_eq!(
            p.b.tcp_counters().rx_segments,
            engine_before.rx_segments,
            "{len} bytes: the engine saw neither"
        );
        assert_eq!(read_all(&mut p.b, s), b"", "{len} bytes: nothing readable");
        assert!(
            p.b.poll_transmit(p.now).is_none(),
            "{len} bytes: nothing answers"
        );
        p.b.receive(p.now, &f, &RxMeta::NONE);
        assert_eq!(
            read_all(&mut p.b, s),
            payload,
            "{len} bytes: the intact copy"
        );
        assert_eq!(
            p.b.counters().rx_drop_tcp_malformed,
            after.rx_drop_tcp_malformed,
            "{len} bytes"
        );
    }
}
