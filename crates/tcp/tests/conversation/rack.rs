//! RACK loss detection (RFC 8985 §6).

use super::*;

// ---------------------------------------------------------------- RACK (RFC 8985 §6)

/// A connection whose data segments `drop` picks are lost, with `delays` (data index, extra
/// delay) reordering others, over a 20 ms round trip; runs until B has read `len` bytes.
fn rack_transfer(
    config: Config,
    len: usize,
    drop: impl Fn(usize, SeqNumber) -> bool + 'static,
) -> Pair {
    let mut p = Pair::established(config, config, 10 * MS);
    p.filter = Box::new(move |c, s| {
        if c.dir == Dir::AtoB && s.is_data() && drop(c.data_index, s.seq()) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(len);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 10_000 * MS);
    assert_same(&p.b_read, &data);
    p
}

/// How long after its first transmission the first data segment was sent again.
fn first_retransmission_delay(p: &Pair) -> u64 {
    let sent = a_data(p);
    let (first_ns, first_seq) = sent[0];
    let again = sent.iter().find(|s| s.1 == first_seq && s.0 > first_ns);
    again.expect("the first segment was sent again").0 - first_ns
}

#[test]
fn rack_marks_the_first_segment_lost_after_a_later_one_is_sacked_and_reo_wnd_passes() {
    // Four segments leave together and the first three are lost. B SACKs the fourth one round
    // trip (20 ms) later: one SACKed segment, below RFC 6675's DupThresh. RACK deems the
    // three lost once RACK.rtt (20 ms) plus reo_wnd (min_RTT/4 = 5 ms) have passed since they
    // were sent (RFC 8985 §6.2 step 5): its reordering timer fires 25 ms after the burst.
    let p = rack_transfer(cfg(), 4 * 1448, |i, _| i < 3);
    assert_eq!(first_retransmission_delay(&p), 25 * MS);
    let k = p.a.counters();
    assert_eq!(k.rack_reo_timeouts, 1);
    assert_eq!(k.rack_loss_marks, 3);
    assert_eq!(k.fast_retransmits, 1);
    assert_eq!(k.rto_expirations, 0);
    // The DupAck threshold alone waits for the retransmission timeout.
    let p = rack_transfer(
        Config {
            rack: false,
            ..cfg()
        },
        4 * 1448,
        |i, _| i < 3,
    );
    assert!(first_retransmission_delay(&p) >= 200 * MS);
    assert_eq!(p.a.counters().rto_expirations, 1);
    assert_eq!(p.a.counters().rack_loss_marks, 0);
}

#[test]
fn rack_detects_a_lost_retransmission() {
    // The first segment is lost, and so is its fast retransmission. New data sent after that
    // retransmission is SACKed a round trip later: a segment sent after the retransmission was
    // delivered, so RACK deems the retransmission lost too and sends the segment a third time,
    // long before the RTO. RFC 6675 never resends a segment twice before the RTO.
    let lost_twice = |config: Config| {
        let copies = std::cell::Cell::new(0);
        let first = std::cell::Cell::new(None);
        rack_transfer(config, 40 * 1448, move |i, seq| {
            if i == 0 {
                first.set(Some(seq));
            }
            let lost = first.get() == Some(seq) && copies.get() < 2;
            copies.set(copies.get() + usize::from(first.get() == Some(seq)));
            lost
        })
    };
    let p = lost_twice(cfg());
    let first = a_data(&p)[0].1;
    let times = data_times(&p, Dir::AtoB, first);
    assert_eq!(times.len(), 3, "sent, retransmitted, retransmitted again");
    assert!(times[2] - times[0] < 100 * MS, "{:?}", times);
    let k = p.a.counters();
    assert_eq!(k.rack_lost_retransmits, 1);
    assert_eq!(k.rto_expirations, 0);
    assert_eq!(k.fast_retransmits, 1, "one recovery episode");
    let p = lost_twice(Config {
        rack: false,
        ..cfg()
    });
    assert_eq!(p.a.counters().rto_expirations, 1);
}

/// Two rounds over a 20 ms round trip: 2 segments, then 10; the first segment of each round
/// arrives 3 ms after the others.
fn reordered_rounds(config: Config) -> Pair {
    let mut p = Pair::established(config, config, 10 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && (c.data_index == 0 || c.data_index == 2) {
            Verdict::DelayExtra(3 * MS)
        } else {
            Verdict::Pass
        }
    });
    let first = pattern(2 * 1448);
    p.a_to_send = first.clone();
    p.run_until(|p| p.b_read.len() == first.len(), 1_000 * MS);
    p.run_for(100 * MS);
    let second = pattern(10 * 1448);
    p.a_to_send = second.clone();
    p.run_until(|p| p.b_read.len() == first.len() + second.len(), 1_000 * MS);
    p.run_for(100 * MS);
    p
}

#[test]
fn reordering_within_reo_wnd_is_not_loss() {
    // The first round shows RACK reordering (a never-retransmitted segment delivered below
    // the highest one delivered, RFC 8985 §6.2 step 3). In the second, nine segments are
    // SACKed before the late one arrives: three duplicate ACKs would call it lost, but RACK,
    // having seen reordering, waits reo_wnd (min_RTT/4 = 5 ms) past the round trip, and the
    // segment's ACK comes 3 ms after the SACKs.
    let p = reordered_rounds(cfg());
    assert!(p.a.rack_reordering_seen());
    let k = p.a.counters();
    assert_eq!(k.retransmitted_segments, 0);
    assert_eq!(k.rack_loss_marks, 0);
    assert_eq!(k.fast_retransmits, 0);
    // The DupAck threshold retransmits the late segment spuriously.
    let p = reordered_rounds(Config {
        rack: false,
        ..cfg()
    });
    assert_eq!(p.a.counters().fast_retransmits, 1);
    assert!(p.a.counters().retransmitted_segments >= 1);
}

#[test]
fn prr_sends_only_the_fast_retransmission_when_the_reordering_timer_starts_recovery() {
    // Ten segments, only the eighth arrives; RACK's timer deems the seven below it lost. PRR
    // (RFC 6937) then allows one segment, the fast retransmission, until an ACK reports
    // delivery; without PRR the pipe (RFC 6675) lets a burst out at once.
    let sent_at_timer = |config: Config| {
        let p = rack_transfer(config, 10 * 1448, |i, _| i != 7 && i < 10);
        let sent = a_data(&p);
        let at = sent[0].0 + first_retransmission_delay(&p);
        assert_eq!(
            at - sent[0].0,
            25 * MS,
            "RACK.rtt + reo_wnd after the burst"
        );
        sent.iter().filter(|s| s.0 == at).count()
    };
    assert_eq!(sent_at_timer(Config { prr: true, ..cfg() }), 1);
    assert!(sent_at_timer(cfg()) > 1);
}

#[test]
fn rack_is_off_without_sack() {
    // RACK needs SACK to learn what was delivered (RFC 8985): without it the DupAck threshold
    // and the RTO recover, and no transmit records are kept.
    let c = Config {
        sack: false,
        ..cfg()
    };
    let p = rack_transfer(c, 4 * 1448, |i, _| i < 3);
    assert!(!p.a.rack_active());
    assert_eq!(p.a.counters().rack_loss_marks, 0);
    assert_eq!(p.a.counters().rto_expirations, 1);
}

#[test]
fn rack_min_rtt_is_timed_on_the_ns_clock_not_by_1_ms_timestamp_echoes() {
    // RFC 8985 §4: RACK's timing must be finer than a quarter of the minimum RTT. On a 0.4 ms
    // path, RFC 7323 echoes (1 ms ticks) measure 0 or 1 ms, and one zero would close the
    // reordering window and disable the guard against ambiguous retransmissions; RACK times
    // segments itself.
    let mut p = Pair::established(cfg(), cfg(), 200_000);
    assert!(p.a.negotiated().timestamps);
    let data = pattern(100 * 1448);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 1_000 * MS);
    let min_rtt_ns = p.a.rack_min_rtt_ns().expect("sampled");
    assert!((400_000..500_000).contains(&min_rtt_ns), "{min_rtt_ns} ns");
}
