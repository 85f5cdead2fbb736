//! SACK: recovery, the receiver's blocks, the scoreboard's bounds.

use super::*;

// ---------------------------------------------------------------- SACK

#[test]
fn sack_recovers_three_losses_in_one_window_without_timeout() {
    let p = transfer_with_drops(no_ts(), &[2, 5, 8], 40 * 1460);
    assert!(p.a.negotiated().sack);
    assert_eq!(p.a.counters().rto_expirations, 0);
    assert_eq!(p.a.counters().fast_retransmits, 1);
    assert_eq!(
        p.a.counters().retransmitted_segments,
        3,
        "only the three holes are resent"
    );
}

#[test]
fn sack_recovery_finishes_sooner_than_newreno_partial_acks() {
    let start = |c: Config| {
        let p = transfer_with_drops(c, &[2, 5, 8], 40 * 1460);
        assert_eq!(p.a.counters().rto_expirations, 0);
        p.now
    };
    let with_sack = start(no_ts());
    let newreno = start(Config {
        sack: false,
        ..no_ts()
    });
    assert!(
        with_sack < newreno,
        "SACK {with_sack} ns vs NewReno {newreno} ns"
    );
}

#[test]
fn receiver_sack_blocks_report_the_most_recent_segment_first() {
    let c = Config {
        nodelay: true,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && (c.data_index == 1 || c.data_index == 3) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a_to_send = pattern(6 * 1460);
    p.run_for(8 * MS);
    let data: Vec<_> = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| e.2.clone())
        .collect();
    let dupacks: Vec<_> = p
        .sent(Dir::BtoA)
        .filter(|e| e.2.hdr.sack_blocks[0].is_some())
        .map(|e| e.2.clone())
        .collect();
    let last = dupacks.last().expect("dup ACKs with SACK blocks");
    // Segment 5 arrived last: the first block covers it (and 4, which is contiguous).
    let blk = last.hdr.sack_blocks[0].unwrap();
    assert_eq!(blk.left, data[4].seq());
    assert_eq!(blk.right, data[5].seq() + 1460);
    let second = last.hdr.sack_blocks[1].unwrap();
    assert_eq!(second.left, data[2].seq());
}

/// A with ten segments in flight that B never sees, for crafted-ACK tests.
fn a_with_flight() -> (Pair, SeqNumber, SeqNumber) {
    let mut p = established_no_ts();
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a.send(&pattern(10 * 1460)).unwrap();
    p.flush();
    let (una, nxt, _) = p.a.sequence_state();
    assert_eq!(nxt.diff(una), 10 * 1460);
    (p, una, nxt)
}

fn sack_ack(p: &Pair, una: SeqNumber, blocks: &[(SeqNumber, SeqNumber)]) -> Seg {
    let (_, _, rcv_nxt) = p.a.sequence_state();
    let mut s = to_a(rcv_nxt, una, TcpFlags::ACK);
    s.hdr.window_len = 32768;
    for (i, (l, r)) in blocks.iter().enumerate() {
        s.hdr.sack_blocks[i] = Some(wire::tcp::SackBlock {
            left: *l,
            right: *r,
        });
    }
    s
}

#[test]
fn invalid_sack_blocks_are_ignored_and_counted() {
    let (mut p, una, nxt) = a_with_flight();
    let bogus = sack_ack(
        &p,
        una,
        &[
            (nxt, nxt + 1000),
            (una - 5000, una - 10),
            (una + 200, una + 100),
        ],
    );
    p.inject(Dir::BtoA, bogus);
    p.step();
    assert_eq!(p.a.counters().rx_sack_blocks_invalid, 3);
    assert!(!p.a.in_recovery());
}

#[test]
fn sack_scoreboard_is_bounded() {
    let (mut p, una, _) = a_with_flight();
    // 20 disjoint 10-byte blocks over several ACKs: only 16 ranges are kept.
    for k in 0..5u32 {
        let blocks: Vec<_> = (0..4u32)
            .map(|i| {
                let l = una + 100 + (k * 4 + i) * 500;
                (l, l + 10)
            })
            .collect();
        let s = sack_ack(&p, una, &blocks);
        p.inject(Dir::BtoA, s);
        p.step();
    }
    assert_eq!(p.a.counters().rx_sack_blocks_dropped, 4);
}

#[test]
fn sack_of_enough_data_starts_recovery_before_three_dupacks() {
    let (mut p, una, _) = a_with_flight();
    // One ACK SACKing three segments above the first: IsLost(SND.UNA) holds at once.
    let s = sack_ack(&p, una, &[(una + 1460, una + 4 * 1460)]);
    p.inject(Dir::BtoA, s);
    p.step();
    assert!(p.a.in_recovery());
    assert_eq!(p.a.counters().fast_retransmits, 1);
    let rtx = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.seq() == una && e.2.is_data())
        .count();
    assert_eq!(rtx, 2, "original and one fast retransmission");
}

#[test]
fn rto_in_last_ack_retransmits_the_hole_and_the_fin() {
    // B answers A's FIN with three segments and its own FIN (LAST-ACK). The first segment is
    // lost with its first three retransmissions, the second arrives (A SACKs it), the third
    // — carrying the FIN — is lost once. RFC 6298 §5.4: every expiry resends from SND.UNA;
    // once the hole is acknowledged the go-back continues to the FIN (RFC 9293 §3.10.7.4:
    // LAST-ACK ends only when the FIN is acknowledged). RACK is off on B: with it, the SACK
    // for the second segment would make the reordering timer resend the hole 1.25 RTT after
    // it left (RFC 8985 §6.2), before any expiry, and this test is about the expiries.
    let b_cfg = Config {
        rack: false,
        ..rto_only(cfg())
    };
    let mut p = Pair::established(cfg(), b_cfg, 5 * MS);
    p.a.shutdown_write().unwrap();
    p.run_until(|p| p.b.state() == State::CloseWait, 100 * MS);
    let (hole, _, _) = p.b.sequence_state();
    let mut hole_drops = 0;
    let mut fin_drops = 0;
    p.filter = Box::new(move |c, s| {
        if c.dir != Dir::BtoA {
            return Verdict::Pass;
        }
        if s.is_data() && s.seq() == hole && hole_drops < 4 {
            hole_drops += 1;
            return Verdict::Drop;
        }
        if s.has(TcpFlags::FIN) && fin_drops < 1 {
            fin_drops += 1;
            return Verdict::Drop;
        }
        Verdict::Pass
    });
    let data = pattern(3_000);
    p.b.send(&data).unwrap();
    p.b.shutdown_write().unwrap();
    assert_eq!(p.b.state(), State::LastAck);
    p.run_until(|p| p.b.state() == State::Closed, 60_000 * MS);
    assert_eq!(p.b.close_reason(), Some(CloseReason::Normal));
    assert_same(&p.a_read, &data);
    assert_eq!(p.a.state(), State::TimeWait);
    let hole_times = data_times(&p, Dir::BtoA, hole);
    assert_eq!(
        hole_times.len(),
        5,
        "sent once, resent at each of four expiries"
    );
    let gaps: Vec<u64> = hole_times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.windows(2).all(|g| g[1] == 2 * g[0]),
        "exponential backoff: {gaps:?}"
    );
    assert_eq!(p.b.counters().rto_expirations, 4);
    let fins = p.sent(Dir::BtoA).filter(|e| e.2.has(TcpFlags::FIN)).count();
    assert_eq!(fins, 2, "the lost FIN was sent again");
}

#[test]
fn user_timeout_aborts_unacknowledged_data() {
    let c = Config {
        user_timeout_ns: Some(2_000 * MS),
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let start = p.now;
    p.a.send(b"never acknowledged").unwrap();
    p.run_until(|p| p.a.state() == State::Closed, 10_000 * MS);
    assert_eq!(p.a.close_reason(), Some(CloseReason::TimedOut));
    // Retransmissions at 0.2, 0.6 and 1.4 s; the user timeout ends it at exactly 2 s.
    assert_eq!(p.now - start, 2_000 * MS);
    assert_eq!(p.a.counters().rto_expirations, 3);
    assert_eq!(p.a.counters().resets_sent, 1, "the peer is told with a RST");
}
