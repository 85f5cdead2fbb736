//! More RFC corners: PAWS after long idle, RST in SYN-SENT, window scale caps, D-SACK, early shutdown.

use super::*;

// ---------------------------------------------------------------- more RFC corners

#[test]
fn paws_accepts_an_old_timestamp_after_24_days_idle() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.b_to_send = b"first".to_vec();
    p.run_until(|p| p.a_read.len() == 5, 100 * MS);
    let mut old = p.sent(Dir::BtoA).find(|e| e.2.is_data()).unwrap().2.clone();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    old.hdr.seq_number = rcv_nxt;
    let ts = old.hdr.timestamp.unwrap();
    old.hdr.timestamp = Some(wire::tcp::TcpTimestamp {
        tsval: ts.tsval - 1000,
        ..ts
    });
    // RFC 7323 §5.5: TS.Recent is invalid after 24 days without an update.
    p.run_for(25 * 86_400 * 1_000 * MS);
    p.inject(Dir::BtoA, old);
    p.run_for(MS);
    assert_eq!(p.a.counters().rx_drop_paws, 0);
    assert_eq!(p.a_read, b"firstfirst");
}

#[test]
fn rst_in_syn_sent_needs_an_acceptable_ack() {
    let mut a = Connection::connect(0, &cfg(), 1, 2, SeqNumber(100), 0);
    let mut buf = [0u8; 100];
    a.poll_transmit(0, &mut buf).unwrap();
    // RST without ACK: ignored.
    a.handle_segment(
        MS,
        &seg(2, 1, SeqNumber(7), SeqNumber(0), TcpFlags::RST).repr(),
    );
    assert_eq!(a.state(), State::SynSent);
    // RST whose ACK does not cover our SYN: answered with nothing, ignored.
    a.handle_segment(
        MS,
        &seg(
            2,
            1,
            SeqNumber(7),
            SeqNumber(500),
            TcpFlags::RST | TcpFlags::ACK,
        )
        .repr(),
    );
    assert_eq!(a.state(), State::SynSent);
    assert!(
        a.poll_transmit(MS, &mut buf).is_none(),
        "no RST in answer to a RST"
    );
    // RST acknowledging the SYN: connection refused.
    a.handle_segment(
        MS,
        &seg(
            2,
            1,
            SeqNumber(7),
            SeqNumber(101),
            TcpFlags::RST | TcpFlags::ACK,
        )
        .repr(),
    );
    assert_eq!(a.state(), State::Closed);
    assert_eq!(a.close_reason(), Some(CloseReason::Reset));
}

#[test]
fn bad_ack_in_syn_sent_is_answered_with_rst() {
    let mut a = Connection::connect(0, &cfg(), 1, 2, SeqNumber(100), 0);
    let mut buf = [0u8; 100];
    a.poll_transmit(0, &mut buf).unwrap();
    a.handle_segment(
        MS,
        &seg(
            2,
            1,
            SeqNumber(7),
            SeqNumber(5000),
            TcpFlags::SYN | TcpFlags::ACK,
        )
        .repr(),
    );
    assert_eq!(a.state(), State::SynSent);
    assert_eq!(a.counters().rx_drop_bad_ack, 1);
    let rst = a.poll_transmit(MS, &mut buf).unwrap();
    assert!(rst.flags.contains(TcpFlags::RST));
    assert_eq!(
        rst.seq_number,
        SeqNumber(5000),
        "RFC 9293: <SEQ=SEG.ACK><CTL=RST>"
    );
}

#[test]
fn retransmitted_fin_in_time_wait_restarts_2msl() {
    let c = Config {
        time_wait_ns: 4_000 * MS,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.shutdown_write().unwrap();
    p.run_until(|p| p.b.state() == State::CloseWait, 100 * MS);
    p.b.shutdown_write().unwrap();
    p.run_until(|p| p.a.state() == State::TimeWait, 100 * MS);
    let fin = p
        .sent(Dir::BtoA)
        .find(|e| e.2.has(TcpFlags::FIN))
        .unwrap()
        .2
        .clone();
    p.run_for(3_000 * MS);
    // B's FIN arrives again (as if A's last ACK had been lost).
    let sent_before = p.sent(Dir::AtoB).count();
    p.inject(Dir::BtoA, fin);
    p.step();
    let restarted = p.now;
    assert_eq!(
        p.sent(Dir::AtoB).count(),
        sent_before + 1,
        "the repeated FIN is acknowledged"
    );
    p.run_until(|p| p.a.state() == State::Closed, 10_000 * MS);
    assert_eq!(p.now - restarted, 4_000 * MS);
}

#[test]
fn window_scale_above_14_is_treated_as_14() {
    let mut a = Connection::connect(0, &cfg(), 1, 2, SeqNumber(100), 0);
    let mut buf = [0u8; 100];
    a.poll_transmit(0, &mut buf).unwrap();
    let mut synack = seg(
        2,
        1,
        SeqNumber(7),
        SeqNumber(101),
        TcpFlags::SYN | TcpFlags::ACK,
    );
    synack.hdr.window_scale = Some(15);
    synack.hdr.timestamp = Some(wire::tcp::TcpTimestamp { tsval: 1, tsecr: 0 });
    a.handle_segment(MS, &synack.repr());
    // RFC 7323 §2.3.
    assert_eq!(a.negotiated().snd_wscale, 14);
}

#[test]
fn aborted_engine_is_finished_only_after_its_rst_left() {
    let mut p = established_no_ts();
    p.a.abort();
    assert_eq!(p.a.state(), State::Closed);
    assert!(!p.a.is_finished(), "the RST is still owed");
    let mut buf = [0u8; 64];
    let rst = p.a.poll_transmit(p.now, &mut buf).unwrap();
    assert!(rst.flags.contains(TcpFlags::RST));
    assert!(p.a.is_finished());
}

#[test]
fn stale_timestamp_echo_after_a_lost_ack_is_not_sampled() {
    let c = Config {
        recv_buffer_bytes: 65535,
        ..rto_only(cfg())
    };
    let mut p = Pair::established(c, c, 5 * MS);
    let srtt_before = p.a.srtt_ns().unwrap();
    // B's ACK of the data is lost; A's retransmission is a duplicate at B, whose ACK echoes
    // the timestamp of the original transmission, 200 ms old.
    let mut dropped = false;
    p.filter = Box::new(move |c, s| {
        if c.dir == Dir::BtoA && !s.is_data() && !dropped {
            dropped = true;
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a.send(b"data whose ACK is lost").unwrap();
    p.run_until(|p| p.a.send_queue_bytes() == 0, 2_000 * MS);
    assert_eq!(p.a.counters().rto_expirations, 1);
    let srtt = p.a.srtt_ns().unwrap();
    assert!(
        srtt <= srtt_before + 10 * MS,
        "SRTT {srtt} ns after a stale echo (was {srtt_before})"
    );
}

#[test]
fn syn_cookie_handshake_keeps_window_scale_sack_and_timestamps() {
    use tcp::isn::{Endpoint, SynCookies};
    let local = Endpoint {
        addr: &[10, 0, 0, 1],
        port: 80,
    };
    let remote = Endpoint {
        addr: &[10, 0, 0, 2],
        port: 1000,
    };
    let cookies = SynCookies::new([11, 22]);
    let mut a = Connection::connect(0, &cfg(), 1000, 80, SeqNumber(77), 0);
    let mut buf = vec![0u8; 4096];
    let syn = Seg::from_repr(&a.poll_transmit(0, &mut buf).unwrap());
    let iss = cookies.generate(MS, local, remote, syn.seq(), syn.hdr.max_seg_size);
    let synack = harness::through_the_wire(&Seg::from_repr(&SynCookies::syn_ack(
        &cfg(),
        &syn.repr(),
        iss,
        MS,
        0x4242,
    )));
    a.handle_segment(2 * MS, &synack.repr());
    assert_eq!(a.state(), State::Established);
    let ack =
        harness::through_the_wire(&Seg::from_repr(&a.poll_transmit(2 * MS, &mut buf).unwrap()));
    let valid = cookies
        .validate(3 * MS, local, remote, &ack.repr())
        .expect("valid cookie");
    let b = Connection::from_syn_cookie(3 * MS, &cfg(), &ack.repr(), &valid, 0x4242);
    let (na, nb) = (a.negotiated(), b.negotiated());
    assert!(na.timestamps && nb.timestamps && na.sack && nb.sack);
    assert_eq!(
        (na.snd_wscale, nb.snd_wscale),
        (nb.rcv_wscale, na.rcv_wscale)
    );
    assert_eq!(nb.snd_wscale, 3);
    // And a lossy bulk transfer over it works, with PAWS happy on both sides.
    let mut p = harness::Pair::from_connections(a, b, 3 * MS, MS);
    p.filter = Box::new(|c, s| {
        if s.is_data() && c.data_index % 17 == 5 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let (ab, ba) = (pattern(200_000), pattern(70_000));
    p.a_to_send = ab.clone();
    p.b_to_send = ba.clone();
    p.run_until(
        |p| p.b_read.len() == ab.len() && p.a_read.len() == ba.len(),
        30_000 * MS,
    );
    assert_same(&p.b_read, &ab);
    assert_same(&p.a_read, &ba);
    assert_eq!(p.a.counters().rx_drop_paws + p.b.counters().rx_drop_paws, 0);
}

#[test]
fn persist_timer_overrides_sender_sws_avoidance_for_a_small_window() {
    // A scripted peer without receiver-side SWS avoidance offers a tiny window.
    let mut a = Connection::connect(0, &no_ts(), 1, 2, SeqNumber(100), 0);
    let mut buf = vec![0u8; 4096];
    a.poll_transmit(0, &mut buf).unwrap();
    let mut synack = seg(
        2,
        1,
        SeqNumber(5000),
        SeqNumber(101),
        TcpFlags::SYN | TcpFlags::ACK,
    );
    synack.hdr.window_len = 60_000;
    synack.hdr.max_seg_size = Some(1460);
    a.handle_segment(10 * MS, &synack.repr());
    while a.poll_transmit(10 * MS, &mut buf).is_some() {}
    a.send(&pattern(20_000)).unwrap();
    let mut sent_end = SeqNumber(101);
    while let Some(r) = a.poll_transmit(10 * MS, &mut buf) {
        sent_end = r.seq_number + r.payload.len() as u32;
    }
    // Everything acknowledged, but only 500 bytes of window: less than a segment, less than
    // what is queued, less than half the largest window seen — SWS avoidance holds it back.
    let mut ack = seg(2, 1, SeqNumber(5001), sent_end, TcpFlags::ACK);
    ack.hdr.window_len = 500;
    a.handle_segment(20 * MS, &ack.repr());
    assert!(a.poll_transmit(20 * MS, &mut buf).is_none());
    // The persist timer (one RTO) forces the small segment out.
    let t = a.poll_timeout().expect("persist timer armed");
    a.handle_timeout(t);
    let r = a
        .poll_transmit(t, &mut buf)
        .expect("SWS override after the persist timeout");
    assert_eq!(r.payload.len(), 500);
    assert_eq!(r.seq_number, sent_end);
}

#[test]
fn duplicate_segment_is_reported_with_a_dsack_block() {
    let c = Config {
        nodelay: true,
        ..cfg()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::Duplicate
        } else {
            Verdict::Pass
        }
    });
    p.a.send(b"sent once, arrives twice").unwrap();
    p.run_until(|p| p.a.counters().rx_dsack_blocks == 1, 500 * MS);
    let data = p.sent(Dir::AtoB).find(|e| e.2.is_data()).unwrap().2.clone();
    let dsack_ack = p
        .sent(Dir::BtoA)
        .find(|e| e.2.hdr.sack_blocks[0].is_some())
        .unwrap()
        .2
        .clone();
    let blk = dsack_ack.hdr.sack_blocks[0].unwrap();
    // RFC 2883: the first block reports the duplicate, below the cumulative ACK.
    assert_eq!(blk.left, data.seq());
    assert_eq!(blk.right, data.seq() + data.payload.len() as u32);
    assert!(blk.right.le(dsack_ack.hdr.ack_number));
    assert_eq!(p.a.counters().rx_sack_blocks_invalid, 0);
    assert_eq!(p.b_read, b"sent once, arrives twice");
}

#[test]
fn sack_recovery_resends_a_tail_hole_without_waiting_for_the_partial_ack() {
    // Ten segments, the 3rd and the 9th lost: only one segment is SACKed above the 9th, so
    // it never looks "lost" by DupThresh. With no new data left, RFC 6675 NextSeg rule (3)
    // resends it right after the 3rd instead of one RTT later.
    let p = transfer_with_drops(no_ts(), &[2, 8], 10 * 1460);
    assert_eq!(p.a.counters().rto_expirations, 0);
    let first_tx: Vec<_> = p.sent(Dir::AtoB).filter(|e| e.2.is_data()).collect();
    let seq_of = |i: usize| first_tx[i].2.seq();
    let rtx_time = |seq: SeqNumber| {
        p.sent(Dir::AtoB)
            .filter(|e| e.2.is_data() && e.2.seq() == seq)
            .nth(1)
            .map(|e| e.0)
    };
    let t2 = rtx_time(seq_of(2)).expect("3rd segment resent");
    let t8 = rtx_time(seq_of(8)).expect("9th segment resent");
    assert!(
        t8 - t2 < MS,
        "tail hole resent {} µs after the first",
        (t8 - t2) / 1000
    );
}

#[test]
fn timestamp_rtt_samples_continue_after_a_month_idle() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    // 30 days: past 2^31 ms on the timestamp clock relative to any old reference.
    p.run_for(30 * 86_400 * 1_000 * MS);
    let before = p.a.counters().rtt_samples;
    p.a_to_send = pattern(10_000);
    p.run_until(
        |p| p.b_read.len() == 10_000 && p.a.send_queue_bytes() == 0,
        1_000 * MS,
    );
    assert!(p.a.counters().rtt_samples > before);
    assert_eq!(p.a.counters().rx_drop_paws + p.b.counters().rx_drop_paws, 0);
}

#[test]
fn data_queued_before_the_handshake_completes_is_sent_after_it() {
    let mut p = Pair::new(cfg(), cfg(), 5 * MS);
    assert_eq!(p.a.state(), State::SynSent);
    p.a.send(b"early bird").unwrap();
    p.run_until(|p| p.b_read.len() == 10, 1_000 * MS);
    assert_eq!(p.b_read, b"early bird");
}

#[test]
fn shutdown_in_syn_received_sends_fin_once_established() {
    let mut p = Pair::new(cfg(), cfg(), 5 * MS);
    assert_eq!(p.b.state(), State::SynReceived);
    p.b.send(b"bye").unwrap();
    p.b.shutdown_write().unwrap();
    p.run_until(
        |p| p.a.state() == State::CloseWait && p.b.state() == State::FinWait2,
        1_000 * MS,
    );
    assert_eq!(p.a_read, b"bye");
}

#[test]
fn shutdown_in_syn_sent_cancels_the_open() {
    let mut a = Connection::connect(0, &cfg(), 1, 2, SeqNumber(1), 0);
    let mut buf = [0u8; 100];
    a.poll_transmit(0, &mut buf).unwrap();
    a.shutdown_write().unwrap();
    assert_eq!(a.state(), State::Closed);
    assert!(
        a.is_finished(),
        "no RST for a connection that never synchronized"
    );
}
