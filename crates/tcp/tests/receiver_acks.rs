//! When the receiver acknowledges: window updates after reads (RFC 9293 §3.8.6.2.2 with
//! Linux's `tcp_cleanup_rbuf` rule) and D-SACK reports (RFC 2883).

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
