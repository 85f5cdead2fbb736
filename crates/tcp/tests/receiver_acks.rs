//! When the receiver acknowledges: window updates after reads (RFC 9293 §3.8.6.2.2 with
//! Linux's `tcp_cleanup_rbuf` rule), D-SACK reports (RFC 2883), quick ACKs and interactive
//! mode (Linux `tcp_in_quickack_mode`, `inet_csk_in_pingpong_mode`), and segments that lack
//! a negotiated timestamp (RFC 7323 §3.2).

mod harness;

use harness::{Dir, MS, Pair, pattern, seg};
use tcp::Config;
use wire::tcp::{SeqNumber, TcpFlags};

fn no_ts() -> Config {
    Config {
        timestamps: false,
        ..Config::default()
    }
}

/// Pure ACKs B sent since the log was cleared.
fn pure_acks_from_b(p: &Pair) -> usize {
    p.sent(Dir::BtoA).filter(|e| !e.2.is_data()).count()
}

#[test]
fn read_of_acknowledged_data_sends_no_duplicate_ack_while_the_window_stays_large() {
    // Without window scaling a 1 MiB buffer is advertised as 65535 bytes at most: after one
    // 1000-byte segment the window is far above half of that, and reading the segment does
    // not double it (Linux `tcp_cleanup_rbuf`; `ioctl/ioctl-siocinq-fin.pkt`).
    let a_cfg = Config {
        window_scale: false,
        ..no_ts()
    };
    let b_cfg = Config {
        recv_buffer_bytes: 1 << 20,
        ..no_ts()
    };
    let mut p = Pair::established(a_cfg, b_cfg, 5 * MS);
    p.b_auto_read = false;
    p.a.send(&pattern(1000)).unwrap();
    p.run_for(100 * MS);
    let acks = pure_acks_from_b(&p);
    assert_eq!(acks, 1, "the data was acknowledged once");
    let mut buf = [0u8; 2000];
    assert_eq!(p.b.recv(&mut buf), Ok(1000));
    p.run_for(100 * MS);
    assert_eq!(pure_acks_from_b(&p), acks, "the read sent a duplicate ACK");
}

#[test]
fn read_that_reopens_a_nearly_closed_window_sends_a_window_update() {
    let b_cfg = Config {
        recv_buffer_bytes: 8 * 1460,
        ..no_ts()
    };
    let mut p = Pair::established(no_ts(), b_cfg, 5 * MS);
    p.b_auto_read = false;
    p.a.send(&pattern(20 * 1460)).unwrap();
    p.run_for(200 * MS);
    assert_eq!(p.b.recv_queue_bytes(), 8 * 1460, "the buffer filled");
    let acks = pure_acks_from_b(&p);
    let mut buf = vec![0u8; 8 * 1460];
    assert_eq!(p.b.recv(&mut buf), Ok(8 * 1460));
    let mut out = [0u8; 2000];
    let update = p.b.poll_transmit(p.now, &mut out).expect("a window update");
    assert!(update.payload.is_empty() && update.window_len > 0);
    assert!(pure_acks_from_b(&p) >= acks);
}

#[test]
fn duplicate_of_data_held_out_of_order_is_reported_as_a_dsack_before_its_block() {
    // RFC 2883 §4 (its example 4.2.2): a segment above RCV.NXT that arrives twice is
    // reported in the first SACK block of the ACK the duplicate triggers, followed by the
    // block of queued data that holds it.
    let mut p = Pair::established(no_ts(), no_ts(), MS);
    p.b_auto_read = false;
    let (_, a_nxt, _) = p.a.sequence_state();
    let (_, _, b_nxt) = p.b.sequence_state();
    assert_eq!(a_nxt, b_nxt);
    let (a_port, b_port) = (p.a.local_port(), p.b.local_port());
    let (_, b_snd_nxt, _) = p.b.sequence_state();
    let data = |left: SeqNumber| {
        let mut s = seg(a_port, b_port, left, b_snd_nxt, TcpFlags::ACK);
        s.payload = pattern(500);
        s.hdr.window_len = 60_000;
        s
    };
    let hole_end = b_nxt + 500;
    p.inject(Dir::AtoB, data(hole_end));
    p.run_for(10 * MS);
    p.log.clear();
    p.inject(Dir::AtoB, data(hole_end));
    p.run_for(10 * MS);
    let ack = p
        .sent(Dir::BtoA)
        .map(|e| e.2.clone())
        .find(|s| !s.is_data())
        .expect("B acknowledged the duplicate");
    let blocks: Vec<(SeqNumber, SeqNumber)> = ack
        .hdr
        .sack_blocks
        .iter()
        .flatten()
        .map(|b| (b.left, b.right))
        .collect();
    assert_eq!(ack.hdr.ack_number, b_nxt);
    assert_eq!(
        blocks,
        vec![(hole_end, hole_end + 500), (hole_end, hole_end + 500)],
        "D-SACK block, then the SACK block holding it"
    );
    assert_eq!(p.b.counters().rx_duplicate_bytes, 500);
}

/// Linux's quick-ACK settings without timestamps (`Config::quickack_segments`).
fn quick() -> Config {
    Config {
        quickack_segments: 16,
        nodelay: true,
        recv_buffer_bytes: 65535,
        ..no_ts()
    }
}

/// A sends 100 bytes; returns how long after they left B's first segment acknowledging
/// them followed (less the link's delay), and leaves the clock at that segment's arrival.
fn b_ack_delay_ns(p: &mut Pair) -> u64 {
    p.log.clear();
    let (_, a_nxt, _) = p.a.sequence_state();
    p.a.send(&pattern(100)).unwrap();
    let want = a_nxt + 100;
    p.run_until(
        |p| p.sent(Dir::BtoA).any(|e| !e.2.hdr.ack_number.lt(want)),
        500 * MS,
    );
    let sent_at = p.sent(Dir::AtoB).next().unwrap().0;
    let acked_at = p
        .sent(Dir::BtoA)
        .find(|e| !e.2.hdr.ack_number.lt(want))
        .unwrap()
        .0;
    acked_at - sent_at - 5 * MS
}

#[test]
fn reply_within_the_ato_suspends_quick_acks_until_a_delayed_ack_fires() {
    let mut p = Pair::established(quick(), quick(), 5 * MS);
    // B answers A's first message the moment it arrives: the connection is interactive.
    p.log.clear();
    p.a.send(&pattern(100)).unwrap();
    p.run_until(|p| p.b_read.len() == 100, 100 * MS);
    p.b.send(&pattern(100)).unwrap();
    p.run_for(100 * MS);
    // So B's ACK of the next message waits for a reply that does not come: the delayed-ACK
    // timer sends it, which ends interactive mode; the message after that is quick-ACKed.
    assert_eq!(
        b_ack_delay_ns(&mut p),
        40 * MS,
        "the ACK did not wait for a reply"
    );
    p.run_for(100 * MS);
    assert_eq!(b_ack_delay_ns(&mut p), 0);
}

#[test]
fn data_sent_before_any_data_arrived_keeps_quick_acks() {
    // Linux enters interactive mode only once its delayed-ACK engine runs (`icsk_ack.ato`
    // set by the first data received): a client that writes right after the handshake
    // still has the answer acknowledged at once (`nagle/https_client`).
    let mut p = Pair::established(quick(), quick(), 5 * MS);
    p.b.send(&pattern(100)).unwrap();
    p.run_until(|p| p.a_read.len() == 100, 100 * MS);
    assert_eq!(b_ack_delay_ns(&mut p), 0, "B's answer was delayed");
}

#[test]
fn without_quick_ack_mode_a_reply_changes_nothing() {
    let c = Config {
        quickack_segments: 0,
        ..quick()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.send(&pattern(100)).unwrap();
    p.run_until(|p| p.b_read.len() == 100, 100 * MS);
    p.b.send(&pattern(100)).unwrap();
    p.run_for(100 * MS);
    assert_eq!(b_ack_delay_ns(&mut p), 40 * MS);
    p.run_for(100 * MS);
    assert_eq!(b_ack_delay_ns(&mut p), 40 * MS);
}

/// Injects 500 bytes from A to B without a timestamp option on a connection that
/// negotiated timestamps; returns what B's application read.
fn data_without_timestamp_reaches_b(b_cfg: Config) -> (usize, u64) {
    let mut p = Pair::established(Config::default(), b_cfg, MS);
    assert!(p.a.negotiated().timestamps, "timestamps negotiated");
    let (a_port, b_port) = (p.a.local_port(), p.b.local_port());
    let (_, a_nxt, _) = p.a.sequence_state();
    let (_, b_nxt, _) = p.b.sequence_state();
    let mut s = seg(a_port, b_port, a_nxt, b_nxt, TcpFlags::ACK | TcpFlags::PSH);
    s.payload = pattern(500);
    s.hdr.window_len = 60_000;
    p.inject(Dir::AtoB, s);
    p.run_for(100 * MS);
    (p.b_read.len(), p.b.counters().rx_drop_missing_ts)
}

#[test]
fn segment_without_a_negotiated_timestamp_is_dropped_by_default() {
    assert_eq!(data_without_timestamp_reaches_b(Config::default()), (0, 1));
}

#[test]
fn accept_missing_timestamps_takes_the_segment_as_linux_does() {
    let b_cfg = Config {
        accept_missing_timestamps: true,
        ..Config::default()
    };
    assert_eq!(data_without_timestamp_reaches_b(b_cfg), (500, 0));
}
