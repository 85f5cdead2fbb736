//! `MSG_EOR` records (`Connection::send_record`): no segment carries bytes of two records, on
//! first transmission, under TSO, and on retransmission; the receiver gets every byte.

mod harness;

use harness::{Dir, MS, Pair, Verdict, pattern};
use tcp::{Config, Connection, ConnectionSnapshot, RECORDS_OUTSTANDING_MAX, SnapshotError, State};

/// Asserts that no data segment A sent crosses one of `ends` (stream offsets, exclusive ends
/// of records).
fn assert_no_segment_crosses(p: &Pair, ends: &[u32]) {
    let base = p.a.iss() + 1;
    for (_, _, seg) in p.sent(Dir::AtoB).filter(|e| e.2.is_data()) {
        let start = seg.seq().diff(base) as u32;
        let end = start + seg.payload.len() as u32;
        for &e in ends {
            assert!(
                !(start < e && e < end),
                "segment {start}..{end} carries bytes of two records (a record ends at {e})"
            );
        }
    }
}

/// Writes `records` as records (each ending with `send_record`) and returns their ends.
fn write_records(p: &mut Pair, records: &[usize]) -> (Vec<u8>, Vec<u32>) {
    let mut all = Vec::new();
    let mut ends = Vec::new();
    for &len in records {
        let data = pattern(len);
        assert_eq!(p.a.send_record(&data).unwrap(), len);
        all.extend_from_slice(&data);
        ends.push(all.len() as u32);
    }
    (all, ends)
}

/// An established pair (default configurations, 5 ms each way) whose link drops A's first
/// `lost` data segments once.
fn established_losing_first_data(lost: usize) -> Pair {
    let config = Config::default();
    let filter = Box::new(move |ctx: &harness::Ctx, seg: &harness::Seg| {
        if ctx.dir == Dir::AtoB && seg.is_data() && ctx.data_index < lost {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let mut p = Pair::with_filter(config, config, 5 * MS, filter);
    p.run_until(
        |p| p.a.state() == State::Established && p.b.state() == State::Established,
        10_000 * MS,
    );
    p
}

#[test]
fn small_records_leave_one_segment_each_even_with_data_in_flight() {
    let config = Config::default();
    let mut p = Pair::established(config, config, 5 * MS);
    // A full-size write first, so Nagle would hold a short tail.
    let first = pattern(3000);
    assert_eq!(p.a.send(&first).unwrap(), 3000);
    let (recs, ends) = write_records(&mut p, &[300, 300, 300]);
    let tail = pattern(500);
    assert_eq!(p.a.send(&tail).unwrap(), 500);
    let total = first.len() + recs.len() + tail.len();
    p.run_until(|p| p.b_read.len() >= total, 10_000 * MS);
    let ends: Vec<u32> = ends.iter().map(|e| e + 3000).collect();
    assert_no_segment_crosses(&p, &ends);
    // Each record left alone: its last segment ends exactly at its end.
    for &e in &ends {
        let base = p.a.iss() + 1;
        assert!(
            p.sent(Dir::AtoB)
                .any(|s| s.2.is_data()
                    && s.2.seq().diff(base) as u32 + s.2.payload.len() as u32 == e),
            "no segment ends at record end {e}"
        );
    }
    let mut want = first;
    want.extend_from_slice(&recs);
    want.extend_from_slice(&tail);
    assert!(p.b_read == want, "bytes differ");
}

#[test]
fn tso_runs_stop_at_record_ends() {
    let config = Config::default();
    let mut p = Pair::established(config, config, 5 * MS);
    p.tso_segments = 44;
    let mss = usize::from(p.a.eff_mss());
    let (data, ends) = write_records(&mut p, &[2 * mss + 100, 3 * mss, 700, 4 * mss]);
    p.run_until(|p| p.b_read.len() >= data.len(), 10_000 * MS);
    assert_no_segment_crosses(&p, &ends);
    let lens: Vec<usize> = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| e.2.payload.len())
        .collect();
    assert_eq!(
        lens[0],
        2 * mss + 100,
        "the first record is one TSO run: {lens:?}"
    );
    assert!(p.b_read == data, "bytes differ");
}

#[test]
fn retransmissions_keep_records_apart() {
    // Lose the first four data segments once: they are sent again after a timeout, when the
    // sender could otherwise join them.
    let mut p = established_losing_first_data(4);
    let (data, ends) = write_records(&mut p, &[200, 200, 200, 200, 200]);
    p.run_until(|p| p.b_read.len() >= data.len(), 30_000 * MS);
    assert!(
        p.a.counters().retransmitted_segments > 0,
        "nothing was retransmitted"
    );
    assert_no_segment_crosses(&p, &ends);
    assert!(p.b_read == data, "bytes differ");
    // Everything acknowledged: the boundaries are forgotten.
    p.run_for(100 * MS);
    assert_eq!(p.a.records_outstanding(), 0);
}

#[test]
fn outstanding_records_are_bounded() {
    let config = Config::default();
    let mut p = Pair::established(config, config, 5 * MS);
    for _ in 0..RECORDS_OUTSTANDING_MAX {
        assert_eq!(p.a.send_record(&[7]).unwrap(), 1);
    }
    assert_eq!(p.a.records_outstanding(), RECORDS_OUTSTANDING_MAX);
    // One more record waits (nothing queued) until acknowledgments free boundaries.
    assert_eq!(p.a.send_record(&[7]).unwrap(), 0);
    p.run_until(|p| p.b_read.len() >= RECORDS_OUTSTANDING_MAX, 30_000 * MS);
    p.run_for(100 * MS);
    assert_eq!(p.a.send_record(&[7]).unwrap(), 1);
    assert!(p.a.records_outstanding() <= 1);
}

#[test]
fn records_move_with_the_connection_and_keep_retransmissions_apart() {
    // The first five data segments are lost: at the move all five records are in flight,
    // and the new owner resends them (as one segment, were the boundaries forgotten).
    let mut p = established_losing_first_data(5);
    let (data, ends) = write_records(&mut p, &[200, 200, 200, 200, 200]);
    p.run_for(20 * MS);
    p.a.flush_delayed_ack();
    p.flush();
    let snap = p.a.export(p.now).expect("export");
    assert_eq!(snap.record_ends.len(), 5);
    let mut bytes = Vec::new();
    snap.encode(&mut bytes);
    let (decoded, _) = ConnectionSnapshot::decode(&bytes).expect("decode");
    assert_eq!(decoded, snap);
    p.a = Connection::import(p.now, &decoded).expect("import");
    assert_eq!(p.a.records_outstanding(), 5);
    p.run_until(|p| p.b_read.len() >= data.len(), 30_000 * MS);
    assert!(p.a.counters().retransmitted_segments > 0);
    assert_no_segment_crosses(&p, &ends);
    assert!(p.b_read == data, "bytes differ");
}

#[test]
fn a_snapshot_with_record_ends_out_of_order_or_past_the_buffer_is_refused() {
    let config = Config::default();
    let mut p = Pair::established(config, config, 5 * MS);
    write_records(&mut p, &[100, 100]);
    p.a.flush_delayed_ack();
    p.flush();
    let snap = p.a.export(p.now).expect("export");
    let mut swapped = snap.clone();
    swapped.record_ends.reverse();
    assert!(matches!(
        Connection::import(p.now, &swapped),
        Err(SnapshotError::Inconsistent)
    ));
    let mut past = snap.clone();
    if let Some(last) = past.record_ends.last_mut() {
        *last += 1;
    }
    assert!(matches!(
        Connection::import(p.now, &past),
        Err(SnapshotError::Inconsistent)
    ));
}
