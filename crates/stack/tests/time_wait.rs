//! TIME-WAIT as a compact record (issue 17 item 2): a connection the application closed
//! frees its TCB, rings and slot when it enters TIME-WAIT, and the record left behind
//! answers as the connection did — the ACK of a retransmitted FIN (2·MSL restarted), PAWS,
//! RST ignored (RFC 1337), a new SYN reopening the 4-tuple when RFC 6191 allows it — until
//! it expires; it moves with its bucket.
mod common;

use common::*;
use core::net::SocketAddr;
use stack::{RxMeta, SocketError, SocketHandle, Stack, StackConfig};
use tcp::State;
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, IpPair, IpProtocol, Ipv4Packet,
    Ipv4Repr, SeqNumber, TcpFlags, TcpPacket, TcpRepr, TcpTimestamp,
};

/// What a test reads of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    flags: TcpFlags,
    seq: SeqNumber,
    ack: SeqNumber,
    window: u16,
    ts: Option<TcpTimestamp>,
    src_port: u16,
    dst_port: u16,
}

fn parse(f: &[u8]) -> Option<Seg> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let ipr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL).ok()?;
    if ipr.protocol != IpProtocol::TCP {
        return None;
    }
    let pair = IpPair::V4 {
        src: ipr.src_addr,
        dst: ipr.dst_addr,
    };
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    let r = TcpRepr::parse(&tcp, &pair, ChecksumCaps::ALL).ok()?;
    Some(Seg {
        flags: r.flags,
        seq: r.seq_number,
        ack: r.ack_number,
        window: r.window_len,
        ts: r.timestamp,
        src_port: r.src_port,
        dst_port: r.dst_port,
    })
}

/// An Ethernet/IPv4/TCP frame from `src` (MAC, address) to `dst` carrying `seg`.
fn frame(
    src: (EthernetAddress, SocketAddr),
    dst: (EthernetAddress, SocketAddr),
    seg: &TcpRepr<'_>,
) -> Vec<u8> {
    let (core::net::IpAddr::V4(s), core::net::IpAddr::V4(d)) = (src.1.ip(), dst.1.ip()) else {
        panic!("IPv4 only");
    };
    tcp_v4_frame((src.0, s), (dst.0, d), seg)
}

fn seg(
    from: SocketAddr,
    to: SocketAddr,
    seq: SeqNumber,
    ack: SeqNumber,
    flags: TcpFlags,
) -> TcpRepr<'static> {
    TcpRepr {
        max_seg_size: flags.contains(TcpFlags::SYN).then_some(1460),
        ..TcpRepr::bare(from.port(), to.port(), seq, ack, flags, 1000)
    }
}

/// Everything `s` sends now, parsed (non-TCP frames skipped).
fn sent(s: &mut Stack, now: u64) -> Vec<Seg> {
    std::iter::from_fn(|| s.poll_transmit(now))
        .filter_map(|f| parse(&f))
        .collect()
}

/// Delivers `seg` from `src` to `dst` on stack `s` (the one owning `dst`'s address) and
/// returns the segments `s` sent in reply.
fn forge(
    s: &mut Stack,
    now: u64,
    src: (EthernetAddress, SocketAddr),
    dst: (EthernetAddress, SocketAddr),
    seg: &TcpRepr<'_>,
) -> Vec<Seg> {
    s.receive(now, &frame(src, dst, seg), &RxMeta::NONE);
    sent(s, now)
}

fn no_timestamps() -> (StackConfig, StackConfig) {
    let (mut a, mut b) = (config_a(), config_b());
    a.tcp.timestamps = false;
    b.tcp.timestamps = false;
    (a, b)
}

/// A connection from A to B:80 that `first` closes first (so `first` ends in TIME-WAIT,
/// both handles closed). Returns (A's address, B's address, the last segment `first` sent
/// — the ACK of the other side's FIN).
fn close_with_time_wait_on(p: &mut Pair, first_is_a: bool) -> (SocketAddr, SocketAddr, Seg) {
    resolve(p);
    let server = v4(IP_B, 80);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    let a_addr = p.a.local_addr(c).expect("local");
    p.a.tcp_send(c, b"request").expect("send");
    p.advance(10 * MS);
    let mut buf = [0u8; 64];
    assert_eq!(p.b.tcp_recv(s, &mut buf), Ok(7));
    let (first, second) = if first_is_a { (c, s) } else { (s, c) };
    let fs = if first_is_a { &mut p.a } else { &mut p.b };
    fs.close(p.now, first).expect("close first");
    p.advance(10 * MS);
    let ss = if first_is_a { &mut p.b } else { &mut p.a };
    while ss.tcp_recv(second, &mut buf).is_ok() {}
    ss.close(p.now, second).expect("close second");
    // What the first closer sends last: the ACK of the second FIN (read on the way).
    let last = if first_is_a {
        p.capture_a = true;
        p.advance(10 * MS);
        p.capture_a = false;
        let frames = std::mem::take(&mut p.captured_a);
        for f in &frames {
            p.b.receive(p.now, f, &RxMeta::NONE);
        }
        frames
            .iter()
            .rev()
            .find_map(|f| parse(f))
            .expect("A's last segment")
    } else {
        let log_start = p.log_b.len();
        p.advance(10 * MS);
        p.log_b[log_start..]
            .iter()
            .rev()
            .find_map(|f| parse(f))
            .expect("B's last segment")
    };
    p.advance(10 * MS);
    (a_addr, server, last)
}

#[test]
fn a_closed_connection_in_time_wait_becomes_a_record_and_frees_its_slot() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    let (_, _, last) = close_with_time_wait_on(&mut p, true);
    assert!(last.flags.contains(TcpFlags::ACK), "{last:?}");
    assert_eq!(p.a.tcp_time_wait_count(), 1);
    assert_eq!(
        p.a.tcp_connection_count(),
        1,
        "TIME-WAIT still counts as a connection"
    );
    assert_eq!(p.a.counters().tcp_time_wait_records, 1);
    assert_eq!(p.a.tcp_mem_bytes(), 0, "its rings went with the TCB");
    let heap = p.a.tcp_time_wait_heap_bytes();
    assert!(heap > 0 && heap < 4096, "{heap}");
    // B closed second: CLOSED and gone.
    assert_eq!(p.b.tcp_connection_count(), 0);
}

#[test]
fn the_record_re_acks_a_retransmitted_fin_and_restarts_2msl() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    let (a_addr, b_addr, last) = close_with_time_wait_on(&mut p, true);
    // 2·MSL from the FIN's ACK, 10 ms ago: due at +60 s − 10 ms, until B's FIN comes again
    // at +20 s (within the neighbour entry's 30 s: the ACK leaves at once).
    p.now += 20 * S;
    // B's FIN again: one below RCV.NXT.
    let fin = seg(
        b_addr,
        a_addr,
        last.ack - 1,
        last.seq,
        TcpFlags::FIN | TcpFlags::ACK,
    );
    let out = forge(&mut p.a, p.now, (MAC_B, b_addr), (MAC_A, a_addr), &fin);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        (out[0].flags, out[0].seq, out[0].ack),
        (TcpFlags::ACK, last.seq, last.ack)
    );
    assert_eq!(
        out[0].window, last.window,
        "the window the connection advertised"
    );
    p.a.handle_timeout(p.now + 45 * S);
    assert_eq!(p.a.tcp_time_wait_count(), 1, "2·MSL restarted");
    p.a.handle_timeout(p.now + 60 * S - 1);
    assert_eq!(p.a.tcp_time_wait_count(), 1);
    p.a.handle_timeout(p.now + 60 * S);
    assert_eq!(p.a.tcp_time_wait_count(), 0, "expired");
    assert_eq!(p.a.counters().tcp_time_wait_expired, 1);
    assert_eq!(p.a.counters().tcp_connections_closed, 1);
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn the_record_ignores_a_rst_in_its_window() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    let (a_addr, b_addr, last) = close_with_time_wait_on(&mut p, true);
    let rst = seg(b_addr, a_addr, last.ack, SeqNumber(0), TcpFlags::RST);
    assert_eq!(
        forge(&mut p.a, p.now, (MAC_B, b_addr), (MAC_A, a_addr), &rst),
        vec![]
    );
    assert_eq!(p.a.tcp_time_wait_count(), 1, "RFC 1337: no assassination");
    assert_eq!(p.a.tcp_counters().rx_drop_rst_time_wait, 1);
}

#[test]
fn paws_drops_an_old_timestamp_with_an_ack_and_a_missing_one_silently() {
    let mut p = Pair::new();
    let (a_addr, b_addr, last) = close_with_time_wait_on(&mut p, true);
    let ts = last.ts.expect("timestamps in use");
    let mut old = seg(
        b_addr,
        a_addr,
        last.ack,
        last.seq,
        TcpFlags::ACK | TcpFlags::FIN,
    );
    old.seq_number = last.ack - 1;
    old.timestamp = Some(TcpTimestamp {
        tsval: ts.tsecr.wrapping_sub(1000),
        tsecr: ts.tsval,
    });
    let out = forge(&mut p.a, p.now, (MAC_B, b_addr), (MAC_A, a_addr), &old);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].ts.map(|t| t.tsecr), Some(ts.tsecr), "TS.Recent kept");
    assert_eq!(p.a.tcp_counters().rx_drop_paws, 1);
    // A segment without a timestamp is dropped silently (RFC 7323 §3.2).
    let bare = seg(b_addr, a_addr, last.ack, last.seq, TcpFlags::ACK);
    assert_eq!(
        forge(&mut p.a, p.now, (MAC_B, b_addr), (MAC_A, a_addr), &bare),
        vec![]
    );
    assert_eq!(p.a.tcp_counters().rx_drop_missing_ts, 1);
}

#[test]
fn a_new_syn_with_a_higher_sequence_reopens_the_tuple_through_the_listener() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    // B (the server) closes first and holds the record.
    let (a_addr, b_addr, last) = close_with_time_wait_on(&mut p, false);
    assert_eq!(p.b.tcp_time_wait_count(), 1);
    assert_eq!(p.a.tcp_connection_count(), 0);
    // An old SYN (at or below RCV.NXT) is answered with an ACK; the record stays.
    let old = seg(a_addr, b_addr, last.ack - 5, SeqNumber(0), TcpFlags::SYN);
    let out = forge(&mut p.b, p.now, (MAC_A, a_addr), (MAC_B, b_addr), &old);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].flags, out[0].ack), (TcpFlags::ACK, last.ack));
    assert_eq!(p.b.tcp_time_wait_count(), 1);
    // A SYN past RCV.NXT opens a new incarnation, its ISS past the old one's (RFC 6191).
    let new = seg(
        a_addr,
        b_addr,
        last.ack + 100_000,
        SeqNumber(0),
        TcpFlags::SYN,
    );
    let out = forge(&mut p.b, p.now, (MAC_A, a_addr), (MAC_B, b_addr), &new);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(out[0].seq, last.seq + 65_537);
    assert_eq!(out[0].ack, last.ack + 100_001);
    assert_eq!(p.b.tcp_time_wait_count(), 0);
    assert_eq!(p.b.counters().tcp_time_wait_reopened, 1);
    assert_eq!(p.b.tcp_connection_count(), 1, "the new child");
}

#[test]
fn a_syn_for_a_record_without_a_listener_draws_an_ack() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    let (a_addr, b_addr, last) = close_with_time_wait_on(&mut p, true);
    // A's record (A's ephemeral port has no listener): even a SYN RFC 6191 would allow is
    // only acknowledged.
    let syn = seg(
        b_addr,
        a_addr,
        last.ack + 100_000,
        SeqNumber(0),
        TcpFlags::SYN,
    );
    let out = forge(&mut p.a, p.now, (MAC_B, b_addr), (MAC_A, a_addr), &syn);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].flags, out[0].ack), (TcpFlags::ACK, last.ack));
    assert_eq!(p.a.tcp_time_wait_count(), 1);
}

#[test]
fn a_tuple_in_time_wait_cannot_be_connected_again() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    let (a_addr, b_addr, _) = close_with_time_wait_on(&mut p, true);
    assert_eq!(
        p.a.tcp_connect(p.now, b_addr, a_addr.port()),
        Err(SocketError::AddrInUse)
    );
    // An ephemeral port skips it.
    let h: SocketHandle = p.a.tcp_connect(p.now, b_addr, 0).expect("connect");
    assert_ne!(p.a.local_addr(h).expect("local").port(), a_addr.port());
}

#[test]
fn a_connection_the_application_still_holds_keeps_its_tcb_in_time_wait_until_closed() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    resolve(&mut p);
    let server = v4(IP_B, 80);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    p.a.tcp_shutdown(c).expect("shutdown");
    p.advance(10 * MS);
    p.b.close(p.now, s).expect("close");
    p.advance(10 * MS);
    assert_eq!(p.a.tcp_state(c), Some(State::TimeWait));
    assert_eq!(p.a.tcp_time_wait_count(), 0);
    p.a.close(p.now, c).expect("close");
    p.advance(MS);
    assert_eq!(p.a.tcp_state(c), None, "the handle is closed");
    assert_eq!(p.a.tcp_time_wait_count(), 1);
}

#[test]
fn a_record_moves_with_its_bucket_and_becomes_a_record_on_the_new_owner() {
    let (a, b) = no_timestamps();
    let mut p = Pair::with(a, b);
    let (a_addr, b_addr, last) = close_with_time_wait_on(&mut p, true);
    let tuple = stack::FourTuple {
        local: a_addr,
        remote: b_addr,
    };
    assert_eq!(p.a.tcp_move_class(tuple), Some(stack::MoveClass::Orphan));
    let bucket = p.a.tcp_flow_bucket(tuple, 128).expect("bucket");
    let mut conns = Vec::new();
    p.a.tcp_bucket_conns(128, usize::from(bucket), &mut conns);
    assert!(conns.iter().any(|c| c.tuple == tuple), "{conns:?}");
    let (snapshot, kind) = p.a.tcp_export_unowned(p.now, tuple).expect("export");
    assert_eq!(
        (snapshot.state, kind),
        (State::TimeWait, stack::Unowned::Orphan)
    );
    assert_eq!(p.a.tcp_time_wait_count(), 0);
    // Another stack with A's address (another shard) takes it and keeps a record again.
    let (a2, _) = no_timestamps();
    let mut other = Stack::new(a2);
    other
        .tcp_import_unowned(p.now, tuple, &snapshot, stack::Unowned::Orphan)
        .expect("import");
    let _ = sent(&mut other, p.now);
    assert_eq!(other.tcp_time_wait_count(), 1);
    // The same connection imported again (it moved away and back): the stale record goes,
    // the 4-tuple is never both a connection and a record, and it ends as one record.
    let closed = other.counters().tcp_connections_closed;
    other
        .tcp_import_unowned(p.now, tuple, &snapshot, stack::Unowned::Orphan)
        .expect("import again");
    let _ = sent(&mut other, p.now);
    assert_eq!(other.tcp_time_wait_count(), 1);
    assert_eq!(other.counters().tcp_connections_closed, closed + 1);
    // B pings the new owner, which learns B's link address on the way.
    p.b.send_ping(p.now, core::net::IpAddr::V4(IP_A), 7, 1, b"x")
        .expect("ping");
    for _ in 0..4 {
        while let Some(f) = p.b.poll_transmit(p.now) {
            other.receive(p.now, &f, &RxMeta::NONE);
        }
        while let Some(f) = other.poll_transmit(p.now) {
            p.b.receive(p.now, &f, &RxMeta::NONE);
        }
    }
    // It answers the FIN again as before.
    let fin = seg(
        b_addr,
        a_addr,
        last.ack - 1,
        last.seq,
        TcpFlags::FIN | TcpFlags::ACK,
    );
    other.receive(
        p.now,
        &frame((MAC_B, b_addr), (MAC_A, a_addr), &fin),
        &RxMeta::NONE,
    );
    let out: Vec<Seg> = sent(&mut other, p.now)
        .into_iter()
        .filter(|s| s.dst_port == b_addr.port())
        .collect();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].seq, out[0].ack), (last.seq, last.ack));
}
