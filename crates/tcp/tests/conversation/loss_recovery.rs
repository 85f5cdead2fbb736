//! Tail loss probes, fast retransmit, limited transmit, PRR, NewReno partial ACKs.

use super::*;

// ---------------------------------------------------------------- loss recovery

fn tlp() -> Config {
    Config {
        tail_loss_probe: true,
        ..cfg()
    }
}

/// Four segments with the last one (index `3`) lost, plus whatever else `drop` says; returns
/// the pair after B has read everything.
fn tail_loss(config: Config, drop: fn(usize) -> bool) -> Pair {
    let mut p = Pair::established(config, config, 10 * MS);
    p.filter = Box::new(move |c, s| {
        if c.dir == Dir::AtoB && s.is_data() && drop(c.data_index) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(4 * 1448);
    p.a_to_send = data.clone();
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == data.len(), 5_000 * MS);
    assert_same(&p.b_read, &data);
    p
}

#[test]
fn tail_loss_probe_retransmits_the_last_segment_before_the_rto() {
    // RFC 8985 §7: nothing after a lost tail can raise duplicate ACKs; with the last two
    // segments lost, two are in flight after the ACK of the first two, and the probe
    // (PTO = 2·SRTT) resends the last one long before the 200 ms minimum RTO. Its SACK then
    // shows the other hole, which RACK repairs.
    let p = tail_loss(tlp(), |i| i == 2 || i == 3);
    assert_eq!(p.a.counters().tail_loss_probes, 1);
    assert_eq!(p.a.counters().rto_expirations, 0);
    let data = a_data(&p);
    assert_eq!(data.len(), 6);
    assert_eq!(data[4].1, data[3].1, "the probe resends the last segment");
    let wait = data[4].0 - data[3].0;
    assert!(wait < 100 * MS, "probe after {} ms", wait / MS);
    assert_eq!(
        data[5].1, data[2].1,
        "then the hole the probe's SACK showed"
    );
}

#[test]
fn a_lone_segment_in_flight_is_probed_at_the_rto_expiry_in_its_place() {
    // RFC 8985 §7.2: with one segment in flight the PTO adds WCDelAckT (200 ms), since the
    // peer may delay its ACK that long; the PTO is then capped at the RTO's expiry, and the
    // probe goes out there instead of a timeout (no backoff, no collapse to one segment).
    let p = tail_loss(tlp(), |i| i == 3);
    assert_eq!(p.a.counters().tail_loss_probes, 1);
    assert_eq!(p.a.counters().rto_expirations, 0);
    let data = a_data(&p);
    assert_eq!(data.len(), 5);
    assert_eq!(data[4].1, data[3].1, "the probe resends the last segment");
    let wait = data[4].0 - data[3].0;
    assert!(
        wait >= 200 * MS,
        "probe after {} ms, before the RTO",
        wait / MS
    );
}

#[test]
fn tail_loss_probe_resends_a_lone_fin_as_the_most_recent_segment() {
    // RFC 8985 §7.3: the probe repeats the most recently sent segment. The FIN left on its own
    // after the data; with it and the last data segment lost, the probe is the FIN alone, not
    // the last data segment with the FIN.
    let mut p = Pair::established(tlp(), tlp(), 10 * MS);
    let mut fin_dropped = false;
    p.filter = Box::new(move |c, s| {
        let first_fin = s.has(TcpFlags::FIN) && !fin_dropped;
        if c.dir == Dir::AtoB && (first_fin || (s.is_data() && c.data_index == 1)) {
            fin_dropped |= first_fin;
            return Verdict::Drop;
        }
        Verdict::Pass
    });
    let data = pattern(2 * 1448);
    p.a_to_send = data.clone();
    p.b_auto_read = true;
    p.run_for(MS);
    p.a.shutdown_write().unwrap();
    p.run_until(|p| p.b_events.contains(&Event::PeerClosed), 5_000 * MS);
    assert_same(&p.b_read, &data);
    assert_eq!(p.a.counters().tail_loss_probes, 1);
    let fins: Vec<(u64, Seg)> = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.has(TcpFlags::FIN))
        .map(|e| (e.0, e.2.clone()))
        .collect();
    // The probe, then the data and the FIN again after the RTO.
    assert_eq!(fins.len(), 3);
    assert!(!fins[1].1.is_data(), "the probe is the FIN alone");
    assert_eq!(fins[1].1.seq(), fins[0].1.seq());
    assert!(fins[1].0 - fins[0].0 < 200 * MS);
}

#[test]
fn no_probe_when_the_option_is_off() {
    let p = tail_loss(rto_only(cfg()), |i| i == 3);
    assert_eq!(p.a.counters().tail_loss_probes, 0);
    assert_eq!(p.a.counters().rto_expirations, 1);
    let data = a_data(&p);
    assert_eq!(data[4].1, data[3].1);
    assert!(data[4].0 - data[3].0 >= 200 * MS);
}

#[test]
fn a_lost_probe_is_not_repeated_and_the_rto_recovers() {
    // RFC 8985 §7.2: one probe per tail episode; the RTO remains the backstop.
    let p = tail_loss(tlp(), |i| i == 3 || i == 4);
    assert_eq!(p.a.counters().tail_loss_probes, 1);
    assert_eq!(p.a.counters().rto_expirations, 1);
    let data = a_data(&p);
    assert_eq!(data.len(), 6);
    assert!(
        data[5].0 - data[4].0 >= 200 * MS,
        "the RTO, not a second probe"
    );
}

/// A's probe delay after B's last ACK arrives, with segments 2 and 3 of four lost (two in
/// flight after the ACK), on a 1 ms round trip.
fn probe_delay_after_last_ack(config: Config) -> u64 {
    let one_way_ns = MS / 2;
    let mut p = Pair::established(config, config, one_way_ns);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && (c.data_index == 2 || c.data_index == 3) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a_to_send = pattern(4 * 1448);
    p.b_auto_read = true;
    p.run_for(100 * MS);
    assert_eq!(p.a.counters().tail_loss_probes, 1);
    let data = a_data(&p);
    let last_ack_arrival_ns = p
        .sent(Dir::BtoA)
        .filter(|e| e.0 < data[4].0)
        .map(|e| e.0 + one_way_ns)
        .max()
        .expect("B acknowledged the first two segments");
    data[4].0 - last_ack_arrival_ns
}

#[test]
fn probe_timeout_with_several_segments_in_flight_is_two_srtt_plus_the_extra_without_floor() {
    // Linux's PTO (tcp_schedule_loss_probe): 2·SRTT + 2 ms with more than one segment out, no
    // 10 ms floor. SRTT is 1 ms here: the probe follows 4 ms after the ACK.
    let linux = Config {
        tlp_pto_extra_ns: 2 * MS as u32,
        tlp_pto_floor_ns: 0,
        ..tlp()
    };
    let wait = probe_delay_after_last_ack(linux);
    assert!((4 * MS..5 * MS).contains(&wait), "probe after {wait} ns");
    // The default keeps RFC 8985's 2·SRTT with the 10 ms floor.
    let wait = probe_delay_after_last_ack(tlp());
    assert!((10 * MS..11 * MS).contains(&wait), "probe after {wait} ns");
}

#[test]
fn no_probe_without_sack() {
    // RACK-TLP is for SACK connections (RFC 8985; Linux's `tcp_schedule_loss_probe`): without
    // SACK the lost tail waits for the RTO.
    let c = Config {
        sack: false,
        ..tlp()
    };
    let p = tail_loss(c, |i| i == 3);
    assert_eq!(p.a.counters().tail_loss_probes, 0);
    assert_eq!(p.a.counters().rto_expirations, 1);
}

#[test]
fn tail_loss_probe_sends_new_data_when_the_window_allows() {
    // RFC 8985 §7.3: with unsent data the receive window admits, the probe is new data. A
    // congestion window of one segment holds the second segment back; the first is lost.
    let c = Config {
        initial_window_segments: 1,
        ..tlp()
    };
    let mut p = Pair::established(c, c, 10 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(2 * 1448);
    p.a_to_send = data.clone();
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == data.len(), 5_000 * MS);
    assert_same(&p.b_read, &data);
    assert_eq!(p.a.counters().tail_loss_probes, 1);
    let data = a_data(&p);
    assert!(
        data[1].1.gt(data[0].1),
        "the probe carries the second segment"
    );
    // One segment in flight: the probe waits for the RTO's expiry and goes in its place.
    assert_eq!(p.a.counters().rto_expirations, 0);
}

/// A window of twenty segments with the first lost: how many segments A sends after its
/// fast retransmission while the next eight duplicate ACKs arrive.
fn sends_early_in_recovery(config: Config) -> usize {
    let one_way_ns = 5 * MS;
    let mut p = Pair::established(config, cfg(), one_way_ns);
    p.link_rate_bps = Some(100_000_000);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let mss = usize::from(p.a.eff_mss());
    let data = pattern(40 * mss);
    p.a_to_send = data.clone();
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == data.len(), 5_000 * MS);
    p.run_for(100 * MS);
    assert_same(&p.b_read, &data);
    assert_eq!(
        p.a.counters().rto_expirations,
        0,
        "recovered without a timeout"
    );
    let sent = a_data(&p);
    let first_rtx_ns = sent
        .iter()
        .enumerate()
        .find(|(i, s)| sent[..*i].iter().any(|e| e.1 == s.1))
        .map(|(_, s)| s.0)
        .expect("a retransmission");
    let eighth_ack_ns = p
        .sent(Dir::BtoA)
        .map(|e| e.0 + one_way_ns)
        .filter(|t| *t > first_rtx_ns)
        .nth(7)
        .expect("duplicate ACKs");
    sent.iter()
        .filter(|s| s.0 > first_rtx_ns && s.0 <= eighth_ack_ns)
        .count()
}

#[test]
fn prr_sends_in_proportion_to_what_was_delivered() {
    // RFC 6937 with the pipe above ssthresh: PRR sends about ssthresh/RecoverFS (one half) of
    // what each ACK reports delivered, from the start; RFC 6675 alone sends nothing until the
    // pipe has drained below ssthresh.
    let c = Config {
        initial_window_segments: 20,
        ..cfg()
    };
    assert_eq!(sends_early_in_recovery(c), 0);
    let early = sends_early_in_recovery(Config { prr: true, ..c });
    assert!(early >= 2, "{early} segments");
}

#[test]
fn fast_retransmit_on_three_dupacks() {
    let mut p = established_no_ts();
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 2 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(14_600);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 2_000 * MS);
    assert_same(&p.b_read, &data);
    assert_eq!(p.a.counters().fast_retransmits, 1);
    assert_eq!(p.a.counters().rto_expirations, 0);
    assert!(p.a.counters().dup_acks_rx >= 3);
    // NewReno halved the flight (RFC 5681 §3.1 equation 4): below the initial window of 10.
    assert!(p.a.ssthresh_bytes() <= 6 * 1460 && p.a.ssthresh_bytes() >= 2 * 1460);
}

#[test]
fn limited_transmit_sends_new_data_on_first_two_dupacks() {
    // cwnd of 4 segments and 8 to send: losing the first leaves only 3 dupacks' worth in
    // flight; limited transmit (RFC 3042) sends 2 more so the third dupack arrives.
    let c = Config {
        initial_window_segments: 4,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(8 * 1460);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 2_000 * MS);
    assert_eq!(p.a.counters().fast_retransmits, 1);
    assert_eq!(p.a.counters().rto_expirations, 0);
}

#[test]
fn multiple_losses_in_one_window_recover_with_partial_acks() {
    let mut p = established_no_ts();
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && (c.data_index == 2 || c.data_index == 5) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(30_000);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 3_000 * MS);
    assert_same(&p.b_read, &data);
    assert_eq!(
        p.a.counters().fast_retransmits,
        1,
        "one recovery episode covers both holes"
    );
    assert_eq!(p.a.counters().rto_expirations, 0);
    assert!(!p.a.in_recovery());
}

#[test]
fn out_of_order_segments_are_kept_and_delivered_once_the_hole_fills() {
    let mut p = established_no_ts();
    // Delay the first data segment so later ones overtake it.
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::DelayExtra(2 * MS)
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(5 * 1460);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 1_000 * MS);
    assert_same(&p.b_read, &data);
    assert!(p.b.counters().rx_ooo_segments >= 1);
    assert_eq!(p.a.counters().retransmitted_segments, 0);
}

#[test]
fn duplicated_segments_are_delivered_once() {
    let mut p = established_no_ts();
    p.filter = Box::new(|_, _| Verdict::Duplicate);
    let data = pattern(50_000);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 2_000 * MS);
    p.run_for(500 * MS);
    assert_same(&p.b_read, &data);
    assert!(p.b.counters().rx_duplicate_bytes > 0 || p.b.counters().rx_drop_out_of_window > 0);
}

#[test]
fn cubic_connection_transfers_under_loss() {
    let c = Config {
        congestion_control: tcp::CongestionControl::Cubic,
        ..cfg()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index % 40 == 7 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(300_000);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 30_000 * MS);
    assert_same(&p.b_read, &data);
    assert!(p.a.counters().fast_retransmits >= 1);
}
