//! RFC 5961 and segment acceptability: RSTs, challenge ACKs, old and unsent ACKs, PAWS.

use super::*;

// ---------------------------------------------------------------- RFC 5961 and acceptability

#[test]
fn exact_rst_resets() {
    let mut p = established_no_ts();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    p.inject(Dir::BtoA, to_a(rcv_nxt, SeqNumber(0), TcpFlags::RST));
    p.step();
    assert_eq!(p.a.state(), State::Closed);
    assert_eq!(p.a.close_reason(), Some(CloseReason::Reset));
    assert!(p.a_events.contains(&Event::Reset));
    assert_eq!(p.a.recv(&mut [0u8; 4]), Err(Error::Reset));
}

#[test]
fn rst_in_window_gets_challenge_ack() {
    let mut p = established_no_ts();
    let (_, snd_nxt, rcv_nxt) = p.a.sequence_state();
    p.inject(Dir::BtoA, to_a(rcv_nxt + 100, SeqNumber(0), TcpFlags::RST));
    p.step();
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(p.a.counters().challenge_acks_sent, 1);
    let ack = p.sent(Dir::AtoB).last().expect("challenge ACK").2.clone();
    assert!(ack.has(TcpFlags::ACK) && !ack.is_data());
    assert_eq!(ack.hdr.ack_number, rcv_nxt);
    assert_eq!(ack.seq(), snd_nxt);
}

#[test]
fn rst_out_of_window_is_dropped_silently() {
    let mut p = established_no_ts();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    p.inject(
        Dir::BtoA,
        to_a(rcv_nxt + 10_000_000, SeqNumber(0), TcpFlags::RST),
    );
    p.step();
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(p.a.counters().rx_drop_rst_out_of_window, 1);
    assert_eq!(p.sent(Dir::AtoB).count(), 0);
}

#[test]
fn syn_on_established_connection_gets_challenge_ack() {
    let mut p = established_no_ts();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    p.inject(Dir::BtoA, to_a(rcv_nxt + 5, SeqNumber(0), TcpFlags::SYN));
    p.step();
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(p.a.counters().rx_drop_syn_in_window, 1);
    assert_eq!(p.a.counters().challenge_acks_sent, 1);
}

#[test]
fn challenge_acks_are_rate_limited_per_second() {
    let mut p = established_no_ts();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    for i in 0..15 {
        p.inject(
            Dir::BtoA,
            to_a(rcv_nxt + 10 + i, SeqNumber(0), TcpFlags::RST),
        );
    }
    p.step();
    assert_eq!(p.a.counters().challenge_acks_sent, 10);
    assert_eq!(p.a.counters().challenge_acks_suppressed, 5);
    // A new second opens a new allowance.
    p.run_for(1_100 * MS);
    p.inject(Dir::BtoA, to_a(rcv_nxt + 1, SeqNumber(0), TcpFlags::RST));
    p.step();
    assert_eq!(p.a.counters().challenge_acks_sent, 11);
}

#[test]
fn desynchronized_ends_do_not_answer_each_others_acks_at_path_speed() {
    // A forged segment of data into each end moves each RCV.NXT past what the other sent:
    // from then on every ACK either sends is unacceptable to the other, which answers it
    // with an ACK of its own. Answers to bare ACKs share the challenge-ACK budget (10 a
    // second), so the two ends exchange a few ACKs a second, not one per round trip.
    let mut p = established_no_ts();
    let (a_una, _, a_rcv) = p.a.sequence_state();
    let (b_una, _, b_rcv) = p.b.sequence_state();
    let mut into_a = to_a(a_rcv, a_una, TcpFlags::ACK);
    into_a.payload = vec![b'x'; 1000];
    let mut into_b = seg(1000, 80, b_rcv, b_una, TcpFlags::ACK);
    into_b.payload = vec![b'y'; 1000];
    p.inject(Dir::BtoA, into_a);
    p.inject(Dir::AtoB, into_b);
    let before = p.log.len();
    p.run_for(2_000 * MS);
    let exchanged = p.log.len() - before;
    // 10 ms round trips: 200 per side in 2 s without the budget.
    assert!(exchanged <= 2 * (2 * 10 + 2), "{exchanged} segments in 2 s");
    assert!(
        p.a.counters().challenge_acks_suppressed + p.b.counters().challenge_acks_suppressed > 0
    );
}

#[test]
fn old_ack_is_dropped_and_counted() {
    let mut p = established_no_ts();
    let (snd_una, _, rcv_nxt) = p.a.sequence_state();
    let mut s = to_a(rcv_nxt, snd_una - 2_000_000, TcpFlags::ACK);
    s.payload = b"must not be delivered".to_vec();
    p.inject(Dir::BtoA, s);
    p.step();
    assert_eq!(p.a.counters().rx_drop_ack_too_old, 1);
    assert!(p.a_read.is_empty());
    assert_eq!(p.a.counters().challenge_acks_sent, 1);
}

#[test]
fn ack_for_unsent_data_is_dropped_and_counted() {
    let mut p = established_no_ts();
    let (_, snd_nxt, rcv_nxt) = p.a.sequence_state();
    let mut s = to_a(rcv_nxt, snd_nxt + 1000, TcpFlags::ACK);
    s.payload = b"nope".to_vec();
    p.inject(Dir::BtoA, s);
    let sent_before = p.sent(Dir::AtoB).count();
    p.step();
    assert_eq!(p.a.counters().rx_drop_ack_unsent, 1);
    assert!(p.a_read.is_empty());
    // RFC 9293 §3.10.7.4: "send an ACK, drop the segment".
    assert_eq!(p.a.counters().challenge_acks_sent, 1);
    assert_eq!(p.sent(Dir::AtoB).count(), sent_before + 1);
}

#[test]
fn ack_for_unsent_data_is_dropped_silently_when_replies_are_off() {
    // Linux's choice (`ack_unsent_data_replies: false`): no ACK, and nothing of the segment
    // taken — neither its text nor its FIN.
    let c = Config {
        ack_unsent_data_replies: false,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    let (_, snd_nxt, rcv_nxt) = p.a.sequence_state();
    let mut s = to_a(rcv_nxt, snd_nxt + 1000, TcpFlags::ACK | TcpFlags::FIN);
    s.payload = b"nope".to_vec();
    p.inject(Dir::BtoA, s);
    let sent_before = p.sent(Dir::AtoB).count();
    p.run_for(300 * MS);
    assert_eq!(p.a.counters().rx_drop_ack_unsent, 1);
    assert_eq!(p.a.counters().challenge_acks_sent, 0);
    assert_eq!(p.sent(Dir::AtoB).count(), sent_before);
    assert!(p.a_read.is_empty());
    assert!(!p.a_events.contains(&Event::PeerClosed));
    assert_eq!(p.a.sequence_state().2, rcv_nxt);
}

#[test]
fn segment_beyond_window_is_dropped_and_acknowledged() {
    let mut p = established_no_ts();
    let (snd_una, _, rcv_nxt) = p.a.sequence_state();
    let mut s = to_a(rcv_nxt + 10_000_000, snd_una, TcpFlags::ACK);
    s.payload = vec![1; 100];
    p.inject(Dir::BtoA, s);
    p.step();
    assert_eq!(p.a.counters().rx_drop_out_of_window, 1);
    let ack = p
        .sent(Dir::AtoB)
        .last()
        .expect("ACK for unacceptable segment")
        .2
        .clone();
    assert_eq!(ack.hdr.ack_number, rcv_nxt);
}

#[test]
fn old_duplicate_segment_is_acknowledged_not_delivered_twice() {
    let mut p = established_no_ts();
    p.b_to_send = b"hello".to_vec();
    p.run_until(|p| p.a_read.len() == 5, 100 * MS);
    let original = p.sent(Dir::BtoA).find(|e| e.2.is_data()).unwrap().2.clone();
    p.inject(Dir::BtoA, original);
    p.run_for(100 * MS);
    assert_eq!(p.a_read, b"hello");
    assert_eq!(p.a.counters().rx_drop_out_of_window, 1);
}

#[test]
fn paws_drops_old_timestamp() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.b_to_send = b"first".to_vec();
    p.run_until(|p| p.a_read.len() == 5, 100 * MS);
    let mut stale = p.sent(Dir::BtoA).find(|e| e.2.is_data()).unwrap().2.clone();
    // Same bytes, moved to the next sequence number (so only PAWS can reject it), with an old
    // timestamp.
    let (_, _, rcv_nxt) = p.a.sequence_state();
    stale.hdr.seq_number = rcv_nxt;
    let ts = stale.hdr.timestamp.unwrap();
    stale.hdr.timestamp = Some(wire::tcp::TcpTimestamp {
        tsval: ts.tsval - 1000,
        ..ts
    });
    p.inject(Dir::BtoA, stale);
    p.step();
    assert_eq!(p.a.counters().rx_drop_paws, 1);
    assert_eq!(p.a_read, b"first");
}

#[test]
fn segment_without_timestamp_is_dropped_once_negotiated() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    let (snd_una, _, rcv_nxt) = p.a.sequence_state();
    let mut s = to_a(rcv_nxt, snd_una, TcpFlags::ACK);
    s.payload = b"x".to_vec();
    p.inject(Dir::BtoA, s);
    p.step();
    assert_eq!(p.a.counters().rx_drop_missing_ts, 1);
    assert!(p.a_read.is_empty());
}

#[test]
fn bad_ack_in_syn_received_is_answered_with_rst() {
    let mut syn = seg(5, 80, SeqNumber(1000), SeqNumber(0), TcpFlags::SYN);
    syn.hdr.max_seg_size = Some(1460);
    let mut b = Connection::accept(0, &no_ts(), &syn.repr(), SeqNumber(50_000), 0).unwrap();
    let mut buf = [0u8; 100];
    let _synack = b.poll_transmit(0, &mut buf).unwrap();
    let bogus = seg(5, 80, SeqNumber(1001), SeqNumber(7), TcpFlags::ACK);
    b.handle_segment(MS, &bogus.repr());
    assert_eq!(b.counters().rx_drop_bad_ack, 1);
    let rst = b.poll_transmit(MS, &mut buf).unwrap();
    assert!(rst.flags.contains(TcpFlags::RST));
    assert_eq!(rst.seq_number, SeqNumber(7));
    assert_eq!(b.state(), State::SynReceived);
}

#[test]
fn accept_rejects_non_syn() {
    let s = seg(
        5,
        80,
        SeqNumber(1),
        SeqNumber(0),
        TcpFlags::SYN | TcpFlags::ACK,
    );
    assert!(Connection::accept(0, &cfg(), &s.repr(), SeqNumber(1), 0).is_err());
}

#[test]
fn abort_sends_rst_and_peer_resets() {
    let mut p = established_no_ts();
    p.a.abort();
    p.run_until(|p| p.b.state() == State::Closed, 100 * MS);
    assert_eq!(p.b.close_reason(), Some(CloseReason::Reset));
    assert_eq!(p.a.close_reason(), Some(CloseReason::Aborted));
}

#[test]
fn close_with_unread_data_sends_rst_ack_with_timestamp_and_peer_resets() {
    // RFC 2525 §2.17: close with unread data resets. The RST carries ACK=RCV.NXT and TSopt
    // (RFC 7323 §3.2, Linux `tcp_send_active_reset`); the peer accepts it on its sequence
    // number alone (RFC 5961 §3.2) and skips PAWS for it (RFC 7323 §5.3 R1).
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.a_auto_read = false;
    p.b.send(b"never read").unwrap();
    p.run_until(|p| p.a.recv_queue_bytes() == 10, 100 * MS);
    let (_, snd_nxt, rcv_nxt) = p.a.sequence_state();
    p.log.clear();
    p.a.close().unwrap();
    p.run_until(|p| p.b.state() == State::Closed, 100 * MS);
    let rst = &p.sent(Dir::AtoB).next().unwrap().2;
    assert!(rst.has(TcpFlags::RST) && rst.has(TcpFlags::ACK));
    assert_eq!(rst.seq(), snd_nxt);
    assert_eq!(rst.hdr.ack_number, rcv_nxt);
    assert!(rst.hdr.timestamp.is_some());
    assert_eq!(p.b.close_reason(), Some(CloseReason::Reset));
}

#[test]
fn rst_in_time_wait_is_ignored() {
    let mut p = established_no_ts();
    p.a.shutdown_write().unwrap();
    p.run_until(|p| p.b.state() == State::CloseWait, 100 * MS);
    p.b.shutdown_write().unwrap();
    p.run_until(
        |p| p.a.state() == State::TimeWait && p.b.state() == State::Closed,
        100 * MS,
    );
    let (_, _, rcv_nxt) = p.a.sequence_state();
    p.inject(Dir::BtoA, to_a(rcv_nxt, SeqNumber(0), TcpFlags::RST));
    p.step();
    assert_eq!(p.a.state(), State::TimeWait);
    assert_eq!(p.a.counters().rx_drop_rst_time_wait, 1);
}
