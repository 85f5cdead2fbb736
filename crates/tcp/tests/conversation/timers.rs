//! Retransmission, delayed-ACK, quick-ACK and persist timers; Nagle, cork and MSG_MORE holds.

use super::*;

// ---------------------------------------------------------------- timers

#[test]
fn rto_backs_off_exponentially() {
    let mut p = Pair::established(rto_only(no_ts()), rto_only(no_ts()), 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let (_, snd_nxt, _) = p.a.sequence_state();
    p.a.send(b"lost").unwrap();
    p.run_for(3_500 * MS);
    let t = data_times(&p, Dir::AtoB, snd_nxt);
    let gaps: Vec<u64> = t.windows(2).map(|w| (w[1] - w[0]) / MS).collect();
    // RTT 10 ms ⇒ RTO clamps to the 200 ms minimum, then doubles.
    assert_eq!(gaps, vec![200, 400, 800, 1600]);
    assert_eq!(p.a.counters().rto_expirations, 4);
}

#[test]
fn rto_minimum_is_configurable() {
    let c = Config {
        rto_min_ns: 50 * MS,
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
    let (_, snd_nxt, _) = p.a.sequence_state();
    p.a.send(b"lost").unwrap();
    p.run_for(200 * MS);
    let t = data_times(&p, Dir::AtoB, snd_nxt);
    assert_eq!((t[1] - t[0]) / MS, 50);
}

#[test]
fn karn_skips_rtt_sample_on_retransmit() {
    let mut p = Pair::established(rto_only(no_ts()), rto_only(no_ts()), 5 * MS);
    let samples_before = p.a.counters().rtt_samples;
    let srtt_before = p.a.srtt_ns();
    // Lose the first transmission only.
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a.send(b"retransmitted").unwrap();
    p.run_until(
        |p| p.b_read.len() == 13 && p.a.send_queue_bytes() == 0,
        2_000 * MS,
    );
    assert_eq!(
        p.a.counters().retransmitted_segments + p.a.counters().rto_expirations,
        1 + 1
    );
    assert_eq!(
        p.a.counters().rtt_samples,
        samples_before,
        "ACK of a retransmission gives no sample"
    );
    assert_eq!(p.a.srtt_ns(), srtt_before);
    // The next, clean exchange is sampled again.
    p.a.send(b"clean").unwrap();
    p.run_until(|p| p.a.send_queue_bytes() == 0, 2_000 * MS);
    assert_eq!(p.a.counters().rtt_samples, samples_before + 1);
}

#[test]
fn timestamps_sample_rtt_even_after_retransmission() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    let samples_before = p.a.counters().rtt_samples;
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a.send(b"retransmitted").unwrap();
    p.run_until(|p| p.a.send_queue_bytes() == 0, 2_000 * MS);
    assert_eq!(p.a.counters().rtt_samples, samples_before + 1);
}

#[test]
fn delayed_ack_every_second_full_segment() {
    // A 64 KiB buffer fits the SYN's unscaled window, so reading never triggers a window
    // update that would hide the delayed ACK.
    let c = Config {
        nodelay: true,
        recv_buffer_bytes: 65535,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    // One full segment: B delays its ACK by 40 ms.
    p.a.send(&pattern(1460)).unwrap();
    p.run_until(|p| p.sent(Dir::BtoA).count() == 1, 200 * MS);
    let sent_at = p.sent(Dir::AtoB).next().unwrap().0;
    let acked_at = p.sent(Dir::BtoA).next().unwrap().0;
    assert_eq!(acked_at - sent_at, 5 * MS + 40 * MS);
    assert_eq!(p.b.counters().delayed_acks_sent, 1);
    // Two full segments back to back: the second is acknowledged on arrival.
    p.log.clear();
    p.a.send(&pattern(2920)).unwrap();
    p.run_until(|p| p.sent(Dir::BtoA).count() == 1, 200 * MS);
    let acks: Vec<_> = p.sent(Dir::BtoA).collect();
    assert_eq!(acks[0].0 - p.sent(Dir::AtoB).next().unwrap().0, 5 * MS);
    assert_eq!(p.b.counters().delayed_acks_sent, 1);
}

/// Sends `n` one-segment messages from A, each after the previous one is acknowledged, and
/// returns how long B took to acknowledge each.
fn ack_delays_of_single_segments(c: Config, n: usize) -> Vec<u64> {
    let mut p = Pair::established(c, c, 5 * MS);
    let mut delays = Vec::new();
    for _ in 0..n {
        p.log.clear();
        p.a.send(&pattern(100)).unwrap();
        p.run_until(|p| p.sent(Dir::BtoA).count() == 1, 200 * MS);
        let sent_at = p.sent(Dir::AtoB).next().unwrap().0;
        let acked_at = p.sent(Dir::BtoA).next().unwrap().0;
        delays.push(acked_at - sent_at - 5 * MS);
    }
    delays
}

#[test]
fn quickack_mode_acks_the_first_segments_at_once_then_delays() {
    // Linux `tcp_in_quickack_mode`: the first `quickack_segments` data segments are each
    // acknowledged on arrival; after that RFC 5681 §4.2 delayed ACKs resume.
    let c = Config {
        nodelay: true,
        quickack_segments: 3,
        recv_buffer_bytes: 65535,
        ..no_ts()
    };
    assert_eq!(
        ack_delays_of_single_segments(c, 5),
        [0, 0, 0, 40 * MS, 40 * MS]
    );
}

#[test]
fn without_quickack_mode_a_lone_segment_waits_for_the_delayed_ack_timer() {
    let c = Config {
        nodelay: true,
        recv_buffer_bytes: 65535,
        ..no_ts()
    };
    assert_eq!(c.quickack_segments, 0, "off by default");
    assert_eq!(ack_delays_of_single_segments(c, 3), [40 * MS; 3]);
}

#[test]
fn nagle_holds_small_segment_until_ack() {
    let c = Config {
        recv_buffer_bytes: 65535,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.send(b"first").unwrap();
    p.flush();
    p.a.send(b"second").unwrap();
    p.flush();
    let data: Vec<_> = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| e.0)
        .collect();
    assert_eq!(data.len(), 1, "the second small write waits for the ACK");
    p.run_until(|p| p.b_read.len() == 11, 500 * MS);
    let data: Vec<_> = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| e.0)
        .collect();
    // Sent once the (delayed) ACK of the first came back: 5 + 40 + 5 ms later.
    assert_eq!(data[1] - data[0], 50 * MS);
}

#[test]
fn nodelay_sends_small_segments_at_once() {
    let c = Config {
        nodelay: true,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.send(b"first").unwrap();
    p.flush();
    p.a.send(b"second").unwrap();
    p.flush();
    assert_eq!(p.sent(Dir::AtoB).filter(|e| e.2.is_data()).count(), 2);
}

/// Payload lengths and PSH of the data segments A sent, in order.
fn data_segments_a(p: &Pair) -> Vec<(usize, bool)> {
    p.sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| (e.2.payload.len(), e.2.has(TcpFlags::PSH)))
        .collect()
}

#[test]
fn cork_holds_partial_segments_until_uncorked() {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    p.a.set_cork(true);
    p.a.send(&[1; 40]).unwrap();
    p.flush();
    p.a.send(&[2; 40]).unwrap();
    p.flush();
    assert!(
        data_segments_a(&p).is_empty(),
        "corked: nothing in flight, yet nothing sent"
    );
    p.a.set_cork(false);
    p.flush();
    assert_eq!(
        data_segments_a(&p),
        [(80, true)],
        "uncorking pushes both writes at once"
    );
}

#[test]
fn cork_sends_full_segments_and_holds_the_tail_until_uncorked() {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    let mss = usize::from(p.a.eff_mss());
    p.a.set_cork(true);
    p.a.send(&vec![7; mss + 10]).unwrap();
    p.flush();
    assert_eq!(
        data_segments_a(&p).iter().map(|s| s.0).collect::<Vec<_>>(),
        [mss]
    );
    p.a.set_cork(false);
    // Uncorked, the tail still obeys Nagle (Linux: TCP_NAGLE_PUSH only with TCP_NODELAY):
    // it follows the full segment's ACK.
    p.run_until(|p| p.b_read.len() == mss + 10, 500 * MS);
    assert_eq!(data_segments_a(&p).last(), Some(&(10, true)));
}

#[test]
fn nodelay_pushes_corked_data_and_the_cork_stays() {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    p.a.set_cork(true);
    p.a.send(&[1; 40]).unwrap();
    p.flush();
    p.a.set_nodelay(true);
    p.flush();
    assert_eq!(data_segments_a(&p), [(40, true)]);
    p.run_for(100 * MS);
    p.a.send(&[2; 40]).unwrap();
    p.flush();
    assert_eq!(
        data_segments_a(&p).len(),
        1,
        "still corked for later writes"
    );
}

#[test]
fn msg_more_holds_the_tail_until_a_send_without_it() {
    let c = Config {
        nodelay: true,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.send_more(&[1; 20]).unwrap();
    p.flush();
    p.a.send_more(&[2; 20]).unwrap();
    p.flush();
    assert!(
        data_segments_a(&p).is_empty(),
        "MSG_MORE overrides TCP_NODELAY"
    );
    p.a.send(&[3; 20]).unwrap();
    p.flush();
    assert_eq!(data_segments_a(&p), [(60, true)]);
}

#[test]
fn msg_more_tail_pushed_by_nodelay_goes_without_psh() {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    p.a.send_more(&[1; 40]).unwrap();
    p.flush();
    assert!(data_segments_a(&p).is_empty());
    p.a.set_nodelay(true);
    p.flush();
    assert_eq!(data_segments_a(&p), [(40, false)]);
}

#[test]
fn msg_more_tail_is_pushed_by_the_next_ack() {
    // Linux: an arriving ACK pushes queued data under the socket's own Nagle setting
    // (`tcp_data_snd_check`); MSG_MORE held the tail only for its own call. With TCP_NODELAY
    // the tail leaves on the ACK of the full segment before it.
    let c = Config {
        nodelay: true,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    let mss = usize::from(p.a.eff_mss());
    p.a.send_more(&vec![1; mss + 30]).unwrap();
    p.flush();
    assert_eq!(data_segments_a(&p), [(mss, false)], "the tail is held");
    p.run_until(|p| p.b_read.len() == mss + 30, 100 * MS);
    let segs = data_segments_a(&p);
    assert_eq!(segs.len(), 2);
    assert_eq!(segs[1].0, 30);
    let sent = p.sent(Dir::AtoB).filter(|e| e.2.is_data()).map(|e| e.0);
    let tail_ns = sent.last().unwrap();
    let first_ack_arrival_ns = p
        .sent(Dir::BtoA)
        .map(|e| e.0 + 5 * MS)
        .min()
        .expect("B acknowledged");
    assert_eq!(
        tail_ns, first_ack_arrival_ns,
        "sent on the ACK, not by a timer"
    );
}

#[test]
fn held_tail_is_released_by_the_persist_timer_when_nothing_is_in_flight() {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    p.a.send_more(&[1; 40]).unwrap();
    p.run_until(|p| p.b_read.len() == 40, 5_000 * MS);
    assert_eq!(
        p.b_read.len(),
        40,
        "a forgotten MSG_MORE does not stall forever"
    );
}

#[test]
fn zero_window_probe_reopens() {
    let small = Config {
        recv_buffer_bytes: 4096,
        ..no_ts()
    };
    let mut p = Pair::established(no_ts(), small, 5 * MS);
    p.b_auto_read = false;
    let data = pattern(20_000);
    p.a_to_send = data.clone();
    p.run_for(3_000 * MS);
    assert_eq!(p.b.recv_queue_bytes(), 4096, "B's buffer is full");
    assert_eq!(p.a.send_window_bytes(), 0);
    assert!(
        p.a.counters().window_probes_sent >= 2,
        "A keeps probing the zero window"
    );
    assert_eq!(
        p.a.state(),
        State::Established,
        "probing never times out the connection"
    );
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == data.len(), 20_000 * MS);
    assert_same(&p.b_read, &data);
}

#[test]
fn window_update_after_read_restarts_a_stalled_sender() {
    let small = Config {
        recv_buffer_bytes: 8192,
        ..no_ts()
    };
    let mut p = Pair::established(no_ts(), small, 5 * MS);
    p.b_auto_read = false;
    p.a_to_send = pattern(8192 + 1000);
    p.run_for(500 * MS);
    assert_eq!(p.b.recv_queue_bytes(), 8192);
    let probes = p.a.counters().window_probes_sent;
    // The application reads: B announces the opened window itself, before any probe.
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == 9192, 50 * MS);
    assert_eq!(p.a.counters().window_probes_sent, probes);
}
