//! Link model: rate, delay, jitter, MTU, queue bounds and the built-in fault rules, each
//! observed end to end through toy hosts.

use sim::toy::{Recorder, SeqSender};
use sim::{
    Blackhole, ChannelConfig, Corrupt, Dir, DropReason, Duplicate, HostId, JitterOrder, LinkId,
    Loss, PacketCtx, PortId, Reorder, SimRng, TraceEvent, Verdict, World,
};

const P0: PortId = PortId(0);
const EVENTS_MAX: u64 = 1_000_000;

/// A sender and a recorder joined by one link (sender is end `a`).
fn pair(seed: u64, sender: SeqSender, cfg: ChannelConfig) -> (World, HostId, HostId, LinkId) {
    let mut w = World::new(seed);
    let tx = w.add_host(Box::new(sender));
    let rx = w.add_host(Box::new(Recorder::default()));
    let link = w.connect((tx, P0), (rx, P0), cfg).expect("fresh ports");
    (w, tx, rx, link)
}

fn recorder(w: &World, rx: HostId) -> &Recorder {
    w.host::<Recorder>(rx).expect("host is a Recorder")
}

fn inversions(seqs: &[u64]) -> usize {
    seqs.windows(2).filter(|p| p[1] < p[0]).count()
}

#[test]
fn rate_limit_serializes_back_to_back_frames() {
    // 10 frames of 1500 B at 10 Mb/s: each takes 1.2 ms on the wire, plus 5 us propagation.
    let cfg = ChannelConfig::default()
        .rate_bps(10_000_000)
        .delay_ns(5_000);
    let (mut w, _tx, rx, link) = pair(1, SeqSender::new(P0, 10, 1500, 0), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let r = recorder(&w, rx);
    let arrivals: Vec<u64> = r.frames.iter().map(|f| f.at_ns).collect();
    let expected: Vec<u64> = (1..=10).map(|k| k * 1_200_000 + 5_000).collect();
    assert_eq!(arrivals, expected);
    assert_eq!(r.seqs(), (0..10).collect::<Vec<_>>());
    let c = w.link_counters(link, Dir::AToB).expect("link exists");
    // The whole burst sat in the queue at once.
    assert_eq!(c.queue_bytes_peak, 15_000);
    assert_eq!(c.delivered_bytes, 15_000);
}

#[test]
fn paced_sender_below_line_rate_sees_no_queueing() {
    // One 125 B frame (100 us at 10 Mb/s) every 200 us: latency is serialization + delay.
    let cfg = ChannelConfig::default()
        .rate_bps(10_000_000)
        .delay_ns(1_000);
    let (mut w, _tx, rx, link) = pair(1, SeqSender::new(P0, 5, 125, 200_000), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let arrivals: Vec<u64> = recorder(&w, rx).frames.iter().map(|f| f.at_ns).collect();
    assert_eq!(arrivals, [101_000, 301_000, 501_000, 701_000, 901_000]);
    let c = w.link_counters(link, Dir::AToB).expect("link exists");
    assert_eq!(c.queue_bytes_peak, 125);
}

#[test]
fn loss_rate_over_many_packets_is_within_statistical_bounds() {
    let n = 20_000u64;
    let (mut w, _tx, rx, link) = pair(2024, SeqSender::new(P0, n, 64, 0), ChannelConfig::default());
    w.add_fault(link, Dir::AToB, Loss { p: 0.1 });
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let delivered = recorder(&w, rx).frames.len() as u64;
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    // Expected 2000 lost, sigma = sqrt(n p (1-p)) ~ 42; +-250 is ~6 sigma. The seed is fixed,
    // so this cannot flake; it catches a wrong probability or a broken RNG.
    assert!(
        (1_750..2_250).contains(&c.drop_loss),
        "lost {}",
        c.drop_loss
    );
    assert_eq!(c.drop_loss + delivered, n);
    assert_eq!(c.offered_packets, n);
    assert_eq!(c.dropped_packets(), c.drop_loss);
}

#[test]
fn loss_one_drops_everything_and_zero_drops_nothing() {
    let (mut w, _tx, rx, link) = pair(3, SeqSender::new(P0, 50, 64, 0), ChannelConfig::default());
    w.add_fault(link, Dir::AToB, Loss { p: 1.0 });
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert!(recorder(&w, rx).frames.is_empty());

    let (mut w, _tx, rx, link) = pair(3, SeqSender::new(P0, 50, 64, 0), ChannelConfig::default());
    w.add_fault(link, Dir::AToB, Loss { p: 0.0 });
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(recorder(&w, rx).seqs(), (0..50).collect::<Vec<_>>());
}

#[test]
fn duplication_is_observed_by_a_sequence_host_and_counted() {
    let n = 2_000u64;
    let (mut w, _tx, rx, link) = pair(5, SeqSender::new(P0, n, 64, 0), ChannelConfig::default());
    w.add_fault(link, Dir::AToB, Duplicate { p: 0.25 });
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let seqs = recorder(&w, rx).seqs();
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    let mut unique = seqs.clone();
    unique.dedup();
    assert_eq!(
        unique,
        (0..n).collect::<Vec<_>>(),
        "every frame once, copies adjacent"
    );
    let dups = seqs.len() as u64 - n;
    assert_eq!(dups, c.duplicated_packets);
    assert!(
        (400..600).contains(&dups),
        "{dups} duplicates, expected ~500"
    );
    assert_eq!(c.delivered_packets, n + dups);
}

#[test]
fn reorder_rule_lets_later_frames_overtake_and_loses_nothing() {
    // One frame every 10 us; 20% are held back 35 us, so ~3 later frames overtake each.
    let n = 500u64;
    let cfg = ChannelConfig::default().delay_ns(20_000);
    let (mut w, _tx, rx, link) = pair(6, SeqSender::new(P0, n, 64, 10_000), cfg);
    w.add_fault(
        link,
        Dir::AToB,
        Reorder {
            p: 0.2,
            extra_delay_ns: 35_000,
        },
    );
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let seqs = recorder(&w, rx).seqs();
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    assert!(inversions(&seqs) > 50, "{} inversions", inversions(&seqs));
    assert!(
        (70..130).contains(&c.delayed_packets),
        "{}",
        c.delayed_packets
    );
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..n).collect::<Vec<_>>());
}

#[test]
fn fifo_jitter_delays_but_never_reorders() {
    let cfg = ChannelConfig::default()
        .delay_ns(10_000)
        .jitter_ns(50_000, JitterOrder::Fifo);
    let (mut w, _tx, rx, _link) = pair(7, SeqSender::new(P0, 300, 64, 5_000), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let r = recorder(&w, rx);
    assert_eq!(r.seqs(), (0..300).collect::<Vec<_>>());
    for (k, f) in r.frames.iter().enumerate() {
        let sent_ns = k as u64 * 5_000;
        // Never earlier than propagation; the FIFO clamp may only push later than the bound
        // through an earlier frame's jitter, which is itself bounded.
        assert!(f.at_ns >= sent_ns + 10_000, "frame {k} too early");
        assert!(f.at_ns <= sent_ns + 10_000 + 50_000, "frame {k} too late");
    }
    let distinct_latencies = r
        .frames
        .iter()
        .enumerate()
        .map(|(k, f)| f.at_ns - k as u64 * 5_000)
        .collect::<std::collections::BTreeSet<_>>();
    assert!(distinct_latencies.len() > 50, "jitter must vary latency");
}

#[test]
fn reordering_jitter_lets_frames_overtake() {
    let cfg = ChannelConfig::default()
        .delay_ns(10_000)
        .jitter_ns(50_000, JitterOrder::Reorder);
    let (mut w, _tx, rx, _link) = pair(7, SeqSender::new(P0, 300, 64, 5_000), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let seqs = recorder(&w, rx).seqs();
    assert!(inversions(&seqs) > 30, "{} inversions", inversions(&seqs));
    assert_eq!(seqs.len(), 300);
}

#[test]
fn corruption_flips_exactly_one_bit_per_corrupted_frame() {
    let n = 400u64;
    let (mut w, _tx, rx, link) = pair(8, SeqSender::new(P0, n, 32, 0), ChannelConfig::default());
    w.add_fault(link, Dir::AToB, Corrupt { p: 1.0 });
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let r = recorder(&w, rx);
    assert_eq!(r.frames.len() as u64, n);
    let mut bytes_hit = std::collections::BTreeSet::new();
    for (k, got) in r.frames.iter().enumerate() {
        let mut sent = [0u8; 32];
        sent[..8].copy_from_slice(&(k as u64).to_be_bytes());
        let flipped: u32 = sent
            .iter()
            .zip(&got.frame)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(flipped, 1, "frame {k}");
        if let Some(i) = sent.iter().zip(&got.frame).position(|(a, b)| a != b) {
            bytes_hit.insert(i);
        }
    }
    assert_eq!(
        w.link_counters(link, Dir::AToB)
            .map(|c| c.corrupted_packets),
        Some(n)
    );
    assert_eq!(
        bytes_hit.len(),
        32,
        "the flipped bit is spread over the whole frame"
    );
}

#[test]
fn oversize_frames_are_dropped_and_counted_as_mtu() {
    let cfg = ChannelConfig::default().mtu_bytes(1500);
    let (mut w, _tx, rx, link) = pair(9, SeqSender::new(P0, 7, 1501, 0), cfg);
    w.set_trace_recording(true);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert!(recorder(&w, rx).frames.is_empty());
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    assert_eq!(c.drop_mtu, 7);
    assert_eq!(c.dropped_packets(), 7);
    assert!(w.trace().iter().all(|e| matches!(
        e,
        TraceEvent::Drop {
            reason: DropReason::Mtu,
            len: 1501,
            ..
        }
    )));

    let (mut w, _tx, rx, link) = pair(9, SeqSender::new(P0, 7, 1500, 0), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(
        recorder(&w, rx).frames.len(),
        7,
        "a frame of exactly the MTU passes"
    );
    assert_eq!(
        w.link_counters(link, Dir::AToB).map(|c| c.drop_mtu),
        Some(0)
    );
}

#[test]
fn flap_drops_during_the_down_window_only_in_both_directions() {
    // Both ends send one frame every 10 us from t=0 (frames 0..100 leave at k*10 us).
    // The link is down in [300 us, 600 us): frames 30..=59 are lost, in both directions.
    let mut w = World::new(10);
    let a = w.add_host(Box::new(SeqSender::new(P0, 100, 64, 10_000)));
    let b = w.add_host(Box::new(SeqSender::new(P0, 100, 64, 10_000)));
    let ra = w.add_host(Box::new(Recorder::default()));
    let rb = w.add_host(Box::new(Recorder::default()));
    let link = w
        .connect((a, P0), (rb, P0), ChannelConfig::default().delay_ns(1_000))
        .expect("fresh ports");
    let back = w
        .connect((ra, P0), (b, P0), ChannelConfig::default().delay_ns(1_000))
        .expect("fresh ports");
    assert!(w.schedule_flap(link, 300_000, 600_000));
    assert!(w.schedule_flap(back, 300_000, 600_000));
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let expected: Vec<u64> = (0..30).chain(60..100).collect();
    assert_eq!(recorder(&w, rb).seqs(), expected);
    assert_eq!(recorder(&w, ra).seqs(), expected);
    assert_eq!(
        w.link_counters(link, Dir::AToB).map(|c| c.drop_link_down),
        Some(30)
    );
    assert_eq!(
        w.link_counters(back, Dir::BToA).map(|c| c.drop_link_down),
        Some(30)
    );
}

#[test]
fn blackhole_swallows_one_direction_only() {
    let mut w = World::new(11);
    let a = w.add_host(Box::new(SeqSender::new(P0, 50, 64, 10_000)));
    let b = w.add_host(Box::new(SeqSender::new(P0, 50, 64, 10_000)));
    let link = w
        .connect((a, P0), (b, P0), ChannelConfig::default())
        .expect("fresh ports");
    assert!(w.add_fault(link, Dir::AToB, Blackhole::new(100_000, 200_000)));
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let ab = *w.link_counters(link, Dir::AToB).expect("link exists");
    let ba = *w.link_counters(link, Dir::BToA).expect("link exists");
    assert_eq!(ab.drop_blackhole, 10);
    assert_eq!(ab.delivered_packets, 40);
    assert_eq!(ba.dropped_packets(), 0);
    assert_eq!(ba.delivered_packets, 50);
}

#[test]
fn bounded_queue_drops_when_full_and_counts() {
    // 20 frames of 1000 B at once into a 5-frame queue at 1 Mb/s: 5 fit, 15 are dropped.
    let cfg = ChannelConfig::default()
        .rate_bps(1_000_000)
        .queue_max(1 << 20, 5);
    let (mut w, _tx, rx, link) = pair(12, SeqSender::new(P0, 20, 1000, 0), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(recorder(&w, rx).seqs(), vec![0, 1, 2, 3, 4]);
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    assert_eq!(c.drop_queue_full, 15);
    assert_eq!(c.queue_bytes_peak, 5_000);

    // The byte bound applies the same way: 3.5 frames' worth of bytes holds 3 frames.
    let cfg = ChannelConfig::default()
        .rate_bps(1_000_000)
        .queue_max(3_500, 100);
    let (mut w, _tx, rx, link) = pair(12, SeqSender::new(P0, 20, 1000, 0), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(recorder(&w, rx).frames.len(), 3);
    assert_eq!(
        w.link_counters(link, Dir::AToB).map(|c| c.drop_queue_full),
        Some(17)
    );
}

#[test]
fn queue_drains_so_a_paced_sender_at_line_rate_never_drops() {
    // 1000 B every 8 ms at 1 Mb/s is exactly line rate: the queue holds at most one frame.
    let cfg = ChannelConfig::default()
        .rate_bps(1_000_000)
        .queue_max(1000, 1);
    let (mut w, _tx, rx, link) = pair(13, SeqSender::new(P0, 30, 1000, 8_000_000), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(recorder(&w, rx).frames.len(), 30);
    assert_eq!(
        w.link_counters(link, Dir::AToB).map(|c| c.drop_queue_full),
        Some(0)
    );
}

#[test]
fn user_closure_rule_sees_each_frame_and_can_drop_and_delay() {
    let (mut w, _tx, rx, link) = pair(
        14,
        SeqSender::new(P0, 10, 64, 1_000),
        ChannelConfig::default(),
    );
    let rule = |ctx: &PacketCtx<'_>, _rng: &mut SimRng| match ctx.index {
        3 => Verdict::Drop(DropReason::Rule),
        5 => Verdict::Delay(100_000),
        _ => Verdict::Pass,
    };
    assert!(w.add_fault(link, Dir::AToB, rule));
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(recorder(&w, rx).seqs(), vec![0, 1, 2, 4, 6, 7, 8, 9, 5]);
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    assert_eq!(c.drop_rule, 1);
    assert_eq!(c.delayed_packets, 1);
}

#[test]
fn chain_stops_at_the_first_drop() {
    let (mut w, _tx, rx, link) = pair(15, SeqSender::new(P0, 10, 64, 0), ChannelConfig::default());
    let mut later_rule_calls = 0u64;
    w.add_fault(link, Dir::AToB, Loss { p: 1.0 });
    w.add_fault(link, Dir::AToB, move |_: &PacketCtx<'_>, _: &mut SimRng| {
        later_rule_calls += 1;
        assert_eq!(later_rule_calls, 0, "rule after a drop must not run");
        Verdict::Duplicate
    });
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert!(recorder(&w, rx).frames.is_empty());
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    assert_eq!((c.drop_loss, c.duplicated_packets), (10, 0));
}

#[test]
fn frames_on_an_unconnected_port_are_dropped_and_counted() {
    let mut w = World::new(16);
    w.add_host(Box::new(SeqSender::new(PortId(3), 4, 64, 0)));
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(w.counters().drop_no_link, 4);
}

#[test]
fn connect_rejects_unknown_hosts_reused_ports_and_loops() {
    let mut w = World::new(17);
    let a = w.add_host(Box::new(Recorder::default()));
    let b = w.add_host(Box::new(Recorder::default()));
    let cfg = ChannelConfig::default();
    assert!(w.connect((a, P0), (b, P0), cfg).is_ok());
    assert_eq!(
        w.connect((a, P0), (b, PortId(1)), cfg),
        Err(sim::ConnectError::PortInUse(a, P0))
    );
    assert_eq!(
        w.connect((a, PortId(1)), (a, PortId(1)), cfg),
        Err(sim::ConnectError::SameEnd)
    );
    let mut other = World::new(0);
    let ghost = {
        other.add_host(Box::new(Recorder::default()));
        other.add_host(Box::new(Recorder::default()));
        other.add_host(Box::new(Recorder::default()))
    };
    assert_eq!(
        w.connect((ghost, P0), (b, PortId(2)), cfg),
        Err(sim::ConnectError::UnknownHost(ghost))
    );
}

#[test]
fn burst_loss_drops_in_runs_with_the_configured_share() {
    // 20% of frames in the bad state (all lost there), mean burst 5 frames.
    let n = 20_000u64;
    let (mut w, _tx, rx, link) = pair(18, SeqSender::new(P0, n, 16, 0), ChannelConfig::default());
    w.add_fault(link, Dir::AToB, sim::BurstLoss::with_mean_burst(0.2, 5.0));
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let seqs = recorder(&w, rx).seqs();
    let lost = n - seqs.len() as u64;
    // Gaps between consecutive delivered sequence numbers are the loss bursts.
    let bursts: Vec<u64> = seqs
        .windows(2)
        .map(|p| p[1] - p[0] - 1)
        .filter(|&g| g > 0)
        .collect();
    let burst_mean = lost as f64 / bursts.len() as f64;
    assert!((3_400..4_600).contains(&lost), "lost {lost}");
    assert!((4.0..6.0).contains(&burst_mean), "mean burst {burst_mean}");
    assert_eq!(
        w.link_counters(link, Dir::AToB).map(|c| c.drop_loss),
        Some(lost)
    );
}

#[test]
fn periodic_flap_repeats_its_down_window() {
    let f = sim::Flap::periodic(1_000, 100, 1_000, 3);
    let down: Vec<u64> = (0..5_000).step_by(50).filter(|&t| f.is_down(t)).collect();
    assert_eq!(down, vec![1_000, 1_050, 2_000, 2_050, 3_000, 3_050]);
}

#[test]
fn frame_tap_sees_every_delivered_frame_as_delivered() {
    use std::cell::RefCell;
    use std::rc::Rc;
    let (mut w, _tx, rx, link) = pair(19, SeqSender::new(P0, 20, 16, 0), ChannelConfig::default());
    w.add_fault(link, Dir::AToB, Corrupt { p: 0.5 });
    w.add_fault(link, Dir::AToB, Loss { p: 0.3 });
    let seen = Rc::new(RefCell::new(Vec::new()));
    let sink = Rc::clone(&seen);
    w.set_frame_tap(move |at_ns, l, dir, frame| {
        sink.borrow_mut().push((at_ns, l, dir, frame.to_vec()));
    });
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let tapped: Vec<Vec<u8>> = seen.borrow().iter().map(|t| t.3.clone()).collect();
    let got: Vec<Vec<u8>> = recorder(&w, rx)
        .frames
        .iter()
        .map(|f| f.frame.clone())
        .collect();
    assert_eq!(tapped, got);
    assert!(
        seen.borrow()
            .iter()
            .all(|t| t.1 == link && t.2 == Dir::AToB)
    );
    assert!(got.len() < 20);
}

#[test]
fn relay_egress_queue_is_the_bottleneck_of_a_dumbbell() {
    // sender --1 Gb/s--> relay --10 Mb/s, 10-frame queue--> recorder.
    // 50 frames of 1000 B arrive at the relay 8 us apart but leave 800 us apart: the slow
    // link's queue fills and drops, and deliveries are paced at the slow rate.
    let mut w = World::new(20);
    let tx = w.add_host(Box::new(SeqSender::new(P0, 50, 1000, 0)));
    let relay = w.add_host(Box::new(sim::toy::Relay::default()));
    let rx = w.add_host(Box::new(Recorder::default()));
    let fast = ChannelConfig::default().rate_bps(1_000_000_000);
    let slow = ChannelConfig::default()
        .rate_bps(10_000_000)
        .queue_max(1 << 20, 10);
    w.connect((tx, P0), (relay, P0), fast).expect("fresh ports");
    let bottleneck = w
        .connect((relay, PortId(1)), (rx, P0), slow)
        .expect("fresh ports");
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    let r = recorder(&w, rx);
    let c = *w.link_counters(bottleneck, Dir::AToB).expect("link exists");
    // The burst reaches the relay within 400 us, before the first slow frame (800 us) has
    // left: exactly the queue's 10 frames get through.
    assert_eq!(c.drop_queue_full, 40, "{c:?}");
    assert_eq!(r.seqs(), (0..10).collect::<Vec<_>>());
    let gaps: Vec<u64> = r
        .frames
        .windows(2)
        .map(|p| p[1].at_ns - p[0].at_ns)
        .collect();
    assert!(gaps.iter().all(|&g| g == 800_000), "{gaps:?}");
    assert_eq!(
        w.host::<sim::toy::Relay>(relay).map(|x| x.forwarded),
        Some(50)
    );
}

#[test]
fn infinite_rate_never_queues_so_queue_bounds_do_not_apply() {
    let cfg = ChannelConfig::default().queue_max(0, 0);
    let (mut w, _tx, rx, link) = pair(21, SeqSender::new(P0, 30, 100, 0), cfg);
    w.run_until_idle(EVENTS_MAX).expect("finite run");
    assert_eq!(recorder(&w, rx).frames.len(), 30);
    let c = *w.link_counters(link, Dir::AToB).expect("link exists");
    assert_eq!((c.drop_queue_full, c.queue_bytes_peak), (0, 0));
}
