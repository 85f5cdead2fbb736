use super::*;

fn s(n: u32) -> SeqNumber {
    SeqNumber(n)
}

/// A scoreboard holding the SACKed ranges `[l, r)`.
fn sb(blocks: &[(u32, u32)]) -> OooQueue {
    let mut q = OooQueue::new();
    for &(l, r) in blocks {
        q.insert(s(l), s(r), u32::MAX, 16).unwrap();
    }
    q
}

const MS: u64 = 1_000_000;

/// Ten 1000-byte segments from `base` sent at once at `t`, with a 100 ms minimum RTT.
fn burst(base: u32, t: u64) -> Rack {
    let mut r = Rack::default();
    r.note_rtt_sample(0, 100 * MS);
    for i in 0..10 {
        r.on_send(
            s(base.wrapping_add(i * 1000)),
            s(base.wrapping_add((i + 1) * 1000)),
            t,
        );
    }
    r
}

#[test]
fn a_sack_beyond_a_segment_sent_in_the_same_burst_makes_it_lost_after_rtt_and_reo_wnd() {
    let mut r = burst(1, 100 * MS);
    let d = r.on_ack(
        200 * MS,
        s(1),
        &sb(&[(7001, 8001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(d.advanced);
    let reo = r.reo_wnd_ns(false, Some(100 * MS));
    assert_eq!(reo, 25 * MS, "min_RTT / 4");
    let det = r.detect_loss(200 * MS, reo);
    assert_eq!(det.lost, 0, "not yet: the segments may only be reordered");
    assert_eq!(det.deadline_ns, Some(225 * MS));
    let det = r.detect_loss(225 * MS, reo);
    assert_eq!(det.lost, 7, "the seven segments below the SACKed one");
    assert_eq!(r.lost_unsacked_bytes(&sb(&[(7001, 8001)])), 7000);
    assert_eq!(r.next_lost(&sb(&[(7001, 8001)]), 1000), Some((s(1), 1000)));
}

/// An ACK delivering a retransmission (sent at 210 ms) and, above it, an original sent
/// at 100 ms, with the rest of the 100 ms flight outstanding: what `RACK.rtt` is after
/// it, seen through when that rest is deemed lost.
fn rtt_after_mixed_delivery(order: RackRttOrder) -> (Rack, Delivery) {
    let mut r = burst(1, 100 * MS);
    r.on_ack(200 * MS, s(1), &sb(&[(1001, 3001)]), |_| false, order);
    r.on_send(s(1), s(1001), 210 * MS);
    let d = r.on_ack(320 * MS, s(4001), &sb(&[]), |_| false, order);
    (r, d)
}

#[test]
fn rack_rtt_comes_from_the_latest_sent_segment_by_default() {
    let (mut r, d) = rtt_after_mixed_delivery(RackRttOrder::LatestSent);
    assert!(d.advanced);
    // RACK.rtt = 110 ms (the retransmission): 4001..10001, sent at 100 ms, are lost at
    // 100 + 110 ms.
    assert_eq!(r.detect_loss(319 * MS, 0).lost, 6);
}

#[test]
fn rack_rtt_from_the_last_segment_in_sequence_waits_for_the_original_flight() {
    let (mut r, d) = rtt_after_mixed_delivery(RackRttOrder::LastInSequence);
    assert!(d.advanced);
    // RACK.rtt = 220 ms (3001:4001, the last in sequence, Linux `tcp_rack_advance`): the
    // rest of the 100 ms flight is judged at 320 ms, not before.
    let det = r.detect_loss(319 * MS, 0);
    assert_eq!((det.lost, det.deadline_ns), (0, Some(320 * MS)));
    assert_eq!(r.detect_loss(320 * MS, 0).lost, 6);
}

#[test]
fn ca_rtt_sample_is_the_highest_sacked_original_else_the_cumulative_one_without_retransmissions() {
    let mut r = burst(1, 100 * MS);
    // SACKs 5001:7001 (sent at 100 ms): the sample is their RTT.
    let d = r.on_ack(
        150 * MS,
        s(1),
        &sb(&[(5001, 7001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert_eq!(d.ca_rtt_ns, Some(50 * MS));
    // A cumulative ACK of originals only: their RTT.
    let d = r.on_ack(
        160 * MS,
        s(2001),
        &sb(&[(5001, 7001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert_eq!(d.ca_rtt_ns, Some(60 * MS));
    // A cumulative ACK covering a retransmission: no sample (Karn).
    r.on_send(s(2001), s(3001), 170 * MS);
    let d = r.on_ack(
        400 * MS,
        s(4001),
        &sb(&[(5001, 7001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert_eq!(d.ca_rtt_ns, None);
}

#[test]
fn segments_sent_after_the_delivered_one_are_not_judged() {
    let mut r = burst(1, 100 * MS);
    r.on_ack(
        200 * MS,
        s(1),
        &sb(&[(1, 1001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    let det = r.detect_loss(10_000 * MS, 0);
    assert_eq!(det, Detection::default());
}

#[test]
fn a_partly_sacked_segment_is_not_delivered() {
    let mut r = burst(1, 100 * MS);
    let d = r.on_ack(
        200 * MS,
        s(1),
        &sb(&[(10_000, 10_001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(
        !d.advanced,
        "RFC 8985 §5.1: the whole segment must be acknowledged"
    );
}

#[test]
fn retransmission_sacked_sooner_than_min_rtt_is_ambiguous() {
    let mut r = burst(1, 100 * MS);
    r.on_send(s(1), s(1001), 300 * MS);
    let d = r.on_ack(
        310 * MS,
        s(1),
        &sb(&[(1, 1001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(
        !d.advanced,
        "10 ms after the retransmission, less than min_RTT"
    );
    let mut r = burst(1, 100 * MS);
    r.on_send(s(1), s(1001), 300 * MS);
    let d = r.on_ack(
        410 * MS,
        s(1),
        &sb(&[(1, 1001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(d.advanced);
    let d = {
        let mut r = burst(1, 100 * MS);
        r.on_send(s(1), s(1001), 300 * MS);
        r.on_ack(
            410 * MS,
            s(1001),
            &sb(&[]),
            |_| true,
            RackRttOrder::LatestSent,
        )
    };
    assert!(
        !d.advanced,
        "the timestamp echo of a cumulative ACK says it is for the original"
    );
}

#[test]
fn a_retransmission_sacked_beyond_a_hole_is_judged_by_min_rtt_alone() {
    // The receiver echoes TS.Recent, which a segment beyond a hole does not update (RFC
    // 7323 §4.3): the echo predates the retransmission whichever copy arrived, so it
    // cannot call the SACK ambiguous. Segment 1001..2001 is retransmitted (a tail loss
    // probe, say) and SACKed while 1..1001 is still missing.
    let mut r = burst(1, 100 * MS);
    r.on_send(s(1001), s(2001), 300 * MS);
    let d = r.on_ack(
        410 * MS,
        s(1),
        &sb(&[(1001, 2001)]),
        |_| true,
        RackRttOrder::LatestSent,
    );
    assert!(d.advanced, "RACK.xmit_ts moves to the probe's transmission");
}

#[test]
fn delivery_below_the_highest_delivered_is_reordering() {
    let mut r = burst(1, 100 * MS);
    r.on_ack(
        200 * MS,
        s(1),
        &sb(&[(7001, 8001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(!r.reordering_seen());
    r.on_ack(
        201 * MS,
        s(1),
        &sb(&[(3001, 4001), (7001, 8001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(r.reordering_seen());
    // Reordering seen: the window no longer drops to zero in recovery.
    assert_eq!(r.reo_wnd_ns(true, Some(100 * MS)), 25 * MS);
}

#[test]
fn reo_wnd_is_zero_after_three_sacked_segments_without_reordering() {
    let mut r = burst(1, 100 * MS);
    r.on_ack(
        200 * MS,
        s(1),
        &sb(&[(5001, 8001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert_eq!(r.reo_wnd_ns(false, Some(100 * MS)), 0);
}

#[test]
fn dsack_grows_the_window_once_per_round_and_sixteen_recoveries_reset_it() {
    let mut r = burst(1, 100 * MS);
    r.on_ack(
        200 * MS,
        s(1),
        &sb(&[(3001, 4001), (7001, 8001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(r.on_dsack_round(s(1), s(10_001), true));
    assert!(!r.on_dsack_round(s(5001), s(10_001), true), "same round");
    assert_eq!(r.reo_wnd_ns(false, Some(100 * MS)), 50 * MS);
    assert!(r.on_dsack_round(s(10_001), s(20_001), true), "next round");
    assert_eq!(
        r.reo_wnd_ns(false, Some(60 * MS)),
        60 * MS,
        "bounded by SRTT"
    );
    for _ in 0..16 {
        r.on_recovery_exit();
    }
    assert_eq!(r.reo_wnd_ns(false, Some(100 * MS)), 25 * MS);
}

#[test]
fn a_retransmission_lost_again_is_found_when_a_later_one_is_delivered() {
    let mut r = burst(1, 100 * MS);
    r.on_ack(
        200 * MS,
        s(1),
        &sb(&[(3001, 10_001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert_eq!(r.detect_loss(200 * MS, 0).lost, 3);
    r.on_send(s(1), s(1001), 200 * MS);
    r.on_send(s(1001), s(2001), 210 * MS);
    // The retransmission of 1001 arrives; that of 1 does not.
    let d = r.on_ack(
        320 * MS,
        s(1),
        &sb(&[(1001, 2001), (3001, 10_001)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert!(d.advanced);
    let det = r.detect_loss(320 * MS, 0);
    assert_eq!((det.lost, det.lost_retransmissions), (1, 1));
    assert_eq!(
        r.next_lost(&sb(&[(1001, 2001), (3001, 10_001)]), 1000),
        Some((s(1), 1000))
    );
}

#[test]
fn cumulative_ack_trims_and_retransmission_splits_records() {
    let mut r = burst(1, 0);
    r.on_send(s(501), s(1501), 5 * MS);
    assert_eq!(r.records_len(), 12, "the two segments it touches are split");
    r.on_cumulative_ack(s(1001));
    assert_eq!(r.covered(), Some((s(1001), s(10_001))));
}

#[test]
fn a_full_table_merges_neighbours_sent_together_first() {
    let mut r = Rack::default();
    let mut merges = 0;
    for i in 0..(RECORDS_MAX as u32 + 10) {
        // Pairs of segments share a send time.
        merges += r.on_send(s(i * 100), s((i + 1) * 100), u64::from(i / 2));
    }
    assert_eq!(r.records_len(), RECORDS_MAX);
    assert_eq!(merges, 10);
    assert!(
        r.records.iter().all(|x| !x.has(MERGED)),
        "only exact merges so far"
    );
    assert_eq!(
        r.covered(),
        Some((s(0), s((RECORDS_MAX as u32 + 10) * 100)))
    );
}

#[test]
fn windowed_min_rtt_takes_a_larger_sample_only_after_the_window() {
    let mut r = Rack::default();
    r.note_rtt_sample(0, 10 * MS);
    r.note_rtt_sample(MS, 50 * MS);
    assert_eq!(r.min_rtt_ns(), Some(10 * MS));
    r.note_rtt_sample(MIN_RTT_WINDOW_NS + MS, 50 * MS);
    assert_eq!(r.min_rtt_ns(), Some(50 * MS));
}

#[test]
fn sequence_space_wraps() {
    let base = u32::MAX - 4_999;
    let mut r = burst(base, 100 * MS);
    let hi = base.wrapping_add(8000);
    r.on_ack(
        200 * MS,
        s(base),
        &sb(&[(base.wrapping_add(7000), hi)]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    assert_eq!(r.detect_loss(300 * MS, 0).lost, 7);
    r.on_cumulative_ack(s(hi));
    assert_eq!(r.covered(), Some((s(hi), s(base.wrapping_add(10_000)))));
}

#[test]
fn an_empty_record_table_gives_its_storage_back_and_a_busy_one_keeps_it() {
    let mut r = burst(1, 100 * MS);
    assert_eq!(
        r.release_if_empty(),
        0,
        "ten segments in flight keep their records"
    );
    r.on_ack(
        200 * MS,
        s(10_001),
        &sb(&[]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    r.on_cumulative_ack(s(10_001));
    let released = r.release_if_empty();
    assert!(
        released >= 10 * core::mem::size_of::<Record>(),
        "{released}"
    );
    assert_eq!(r.release_if_empty(), 0, "nothing left to give back");
    // The table works on: the next transmission allocates again.
    r.on_send(s(10_001), s(11_001), 300 * MS);
    r.on_ack(
        400 * MS,
        s(11_001),
        &sb(&[]),
        |_| false,
        RackRttOrder::LatestSent,
    );
    r.on_cumulative_ack(s(11_001));
    assert!(r.release_if_empty() > 0);
}
