//! Interrupt moderation and NAPI/DPC polling, checked through counters on a virtual clock.

mod common;

use common::{Seg, bytes, drain};
use nic::{
    AdaptiveModeration, FireCause, GroConfig, LliPorts, ModerationConfig, Nic, NicConfig,
    QueueCounters,
};
use wire::TcpFlags;

fn nic_with(moderation: ModerationConfig, rx_slots: usize) -> Nic {
    Nic::new(NicConfig {
        queues: 1,
        rx_ring_slots: rx_slots,
        moderation,
        gro: GroConfig {
            enabled: false,
            ..GroConfig::default()
        },
        ..NicConfig::default()
    })
    .expect("config")
}

fn frame(seq: u32) -> Vec<u8> {
    Seg::v4(1234, 80).with_payload(seq, bytes(1, 64)).build()
}

/// A driver that polls a woken queue until drained, at once.
fn service(nic: &mut Nic, now_ns: u64) {
    while let Some(w) = nic.poll_wakeup(now_ns) {
        drain(nic, w.queue, now_ns);
    }
}

/// Offers packets at a constant rate for `duration_ns`, servicing timers on the way; returns
/// queue 0's counters.
fn run_at_rate(nic: &mut Nic, rate_pps: u64, duration_ns: u64) -> QueueCounters {
    let gap_ns = 1_000_000_000 / rate_pps;
    let f = frame(1);
    let mut t = 0;
    while t < duration_ns {
        while let Some(d) = nic.next_deadline() {
            if d > t {
                break;
            }
            service(nic, d);
        }
        nic.receive(t, f.clone());
        service(nic, t);
        t += gap_ns;
    }
    while let Some(d) = nic.next_deadline() {
        service(nic, d);
    }
    nic.counters(0).expect("queue 0")
}

#[test]
fn without_moderation_every_packet_wakes_the_idle_queue() {
    let mut nic = nic_with(ModerationConfig::OFF, 64);
    let c = run_at_rate(&mut nic, 100_000, 1_000_000);
    assert_eq!(c.rx_packets, 100);
    assert_eq!(c.wakeups, 100);
}

#[test]
fn moderation_lowers_wakeups_per_packet_under_rising_load() {
    let mut ratios = Vec::new();
    for rate_pps in [5_000, 50_000, 500_000, 2_000_000] {
        let mut nic = nic_with(ModerationConfig::fixed(50_000), 1024);
        let c = run_at_rate(&mut nic, rate_pps, 20_000_000);
        assert_eq!(c.rx_drops(), 0);
        assert_eq!(
            c.rx_descriptors_polled, c.rx_packets,
            "every packet delivered"
        );
        ratios.push(c.wakeups as f64 / c.rx_packets as f64);
    }
    eprintln!("fixed 50 µs: wake-ups per packet at 5k/50k/500k/2M pps: {ratios:?}");
    assert!(
        ratios.windows(2).all(|w| w[1] < w[0]),
        "wake-ups per packet must fall as load rises: {ratios:?}"
    );
    // At 5 kpps the gap (200 µs) exceeds the interval: one wake-up per packet.
    assert_eq!(ratios[0], 1.0);
    // At 2 Mpps a 50 µs interval batches ~100 packets per wake-up.
    assert!(ratios[3] < 0.02, "{ratios:?}");
}

#[test]
fn wakeups_never_come_closer_than_the_interval() {
    let mut nic = nic_with(ModerationConfig::fixed(30_000), 1024);
    let f = frame(1);
    let mut fire_times = Vec::new();
    for k in 0..2_000u64 {
        let t = k * 1_000;
        while let Some(d) = nic.next_deadline() {
            if d > t {
                break;
            }
            while let Some(w) = nic.poll_wakeup(d) {
                fire_times.push(w.at_ns);
                drain(&mut nic, w.queue, d);
            }
        }
        nic.receive(t, f.clone());
        while let Some(w) = nic.poll_wakeup(t) {
            fire_times.push(w.at_ns);
            drain(&mut nic, w.queue, t);
        }
    }
    assert!(fire_times.len() > 10);
    assert!(
        fire_times.windows(2).all(|w| w[1] - w[0] >= 30_000),
        "{fire_times:?}"
    );
}

#[test]
fn adaptive_moderation_raises_interval_with_rate() {
    let adaptive = AdaptiveModeration {
        interval_ns_min: 10_000,
        interval_ns_max: 125_000,
        rate_pps_high: 1_000_000,
    };
    let m = ModerationConfig {
        interval_ns: 10_000,
        packets_threshold: 0,
        lli_on_push: false,
        lli_ports: LliPorts::NONE,
        adaptive: Some(adaptive),
    };
    let mut intervals = Vec::new();
    let mut ratios = Vec::new();
    for rate_pps in [10_000, 100_000, 400_000, 2_000_000] {
        let mut nic = nic_with(m, 4096);
        let c = run_at_rate(&mut nic, rate_pps, 20_000_000);
        assert_eq!(c.rx_drops(), 0);
        let interval = nic.moderation_interval_ns(0).expect("queue 0");
        assert!((10_000..=125_000).contains(&interval));
        intervals.push(interval);
        ratios.push(c.wakeups as f64 / c.rx_packets as f64);
    }
    eprintln!(
        "adaptive at 10k/100k/400k/2M pps: interval_ns {intervals:?}, wake-ups/packet {ratios:?}"
    );
    assert!(
        intervals.windows(2).all(|w| w[1] > w[0]),
        "interval must rise with rate: {intervals:?}"
    );
    assert!(
        intervals[0] < 15_000,
        "low rate stays near the minimum: {intervals:?}"
    );
    assert!(
        intervals[3] > 110_000,
        "high rate approaches the maximum: {intervals:?}"
    );
    assert!(ratios.windows(2).all(|w| w[1] < w[0]), "{ratios:?}");
}

#[test]
fn budget_respected_and_rearm_only_after_drain() {
    let mut nic = nic_with(ModerationConfig::OFF, 512);
    for k in 0..150 {
        nic.receive(0, frame(k));
    }
    // One wake-up for the burst: the queue is masked after it fires.
    let w = nic.poll_wakeup(0).expect("woken");
    assert_eq!(w.queue, 0);
    assert_eq!(nic.poll_wakeup(0), None);
    assert!(!nic.is_armed(0));
    let mut out = Vec::new();
    let p = nic.poll_rx(0, 64, 1, &mut out).expect("q0");
    assert_eq!((p.delivered, p.drained), (64, false));
    // Arrivals while scheduled raise no wake-up.
    nic.receive(2, frame(999));
    assert_eq!(nic.poll_wakeup(2), None);
    let p = nic.poll_rx(0, 64, 3, &mut out).expect("q0");
    assert_eq!((p.delivered, p.drained), (64, false));
    assert!(!nic.is_armed(0));
    let p = nic.poll_rx(0, 64, 4, &mut out).expect("q0");
    assert_eq!((p.delivered, p.drained), (23, true));
    assert!(nic.is_armed(0));
    assert_eq!(out.len(), 151);
    // Re-armed: the next packet wakes the queue again.
    nic.receive(5, frame(1000));
    assert!(nic.poll_wakeup(5).is_some());
    let c = nic.counters(0).expect("q0");
    assert_eq!(
        (c.wakeups, c.polls, c.polls_budget_exhausted, c.rearms),
        (2, 3, 2, 1)
    );
    assert_eq!(c.wakeup_descriptors_max, 151);
}

#[test]
fn poll_using_whole_budget_stays_scheduled_even_if_ring_is_empty() {
    let mut nic = nic_with(ModerationConfig::OFF, 512);
    for k in 0..64 {
        nic.receive(0, frame(k));
    }
    let mut out = Vec::new();
    let p = nic.poll_rx(0, 64, 0, &mut out).expect("q0");
    assert_eq!((p.delivered, p.drained), (64, false));
    let p = nic.poll_rx(0, 64, 0, &mut out).expect("q0");
    assert_eq!((p.delivered, p.drained), (0, true));
}

#[test]
fn packet_threshold_fires_before_interval() {
    let m = ModerationConfig {
        packets_threshold: 8,
        ..ModerationConfig::fixed(1_000_000)
    };
    let mut nic = nic_with(m, 512);
    nic.receive(0, frame(0));
    let w = nic.poll_wakeup(0).expect("first packet after idle fires");
    drain(&mut nic, w.queue, 0);
    for k in 1..8u64 {
        nic.receive(k * 100, frame(k as u32));
        assert_eq!(nic.poll_wakeup(k * 100), None, "packet {k}");
    }
    nic.receive(800, frame(8));
    let w = nic.poll_wakeup(800).expect("threshold reached");
    assert_eq!(w.cause, FireCause::Threshold);
    assert_eq!(drain(&mut nic, 0, 800).len(), 8);
}

#[test]
fn interval_timer_fires_pending_packets_at_the_deadline() {
    let mut nic = nic_with(ModerationConfig::fixed(100_000), 512);
    nic.receive(0, frame(0));
    assert!(nic.poll_wakeup(0).is_some());
    drain(&mut nic, 0, 0);
    nic.receive(10_000, frame(1));
    assert_eq!(nic.poll_wakeup(10_000), None);
    assert_eq!(nic.next_deadline(), Some(100_000));
    assert_eq!(nic.poll_wakeup(99_999), None);
    let w = nic.poll_wakeup(100_000).expect("deadline");
    assert_eq!((w.cause, w.at_ns), (FireCause::Interval, 100_000));
}

#[test]
fn low_latency_interrupt_fires_on_push() {
    let m = ModerationConfig {
        lli_on_push: true,
        ..ModerationConfig::fixed(1_000_000)
    };
    let mut nic = nic_with(m, 512);
    nic.receive(0, frame(0));
    assert!(nic.poll_wakeup(0).is_some());
    drain(&mut nic, 0, 0);
    nic.receive(10, frame(1));
    assert_eq!(nic.poll_wakeup(10), None);
    let psh = Seg::v4(1234, 80)
        .with_payload(2, vec![1; 10])
        .flags(TcpFlags::ACK | TcpFlags::PSH)
        .build();
    nic.receive(20, psh);
    let w = nic.poll_wakeup(20).expect("LLI");
    assert_eq!(w.cause, FireCause::LowLatency);
    assert_eq!(nic.counters(0).expect("q0").wakeups_lli, 1);
}

#[test]
fn low_latency_interrupt_fires_for_a_chosen_port_in_either_direction() {
    let m = ModerationConfig {
        lli_ports: LliPorts::new(&[443, 80]).expect("two ports"),
        ..ModerationConfig::fixed(1_000_000)
    };
    let mut nic = nic_with(m, 512);
    let to = |sport, dport, seq| Seg::v4(sport, dport).with_payload(seq, vec![1; 10]).build();
    nic.receive(0, to(5000, 22, 0));
    assert!(nic.poll_wakeup(0).is_some(), "first packet after idle");
    drain(&mut nic, 0, 0);
    // Another port waits for the interval; a chosen port, as destination or as source (a
    // reply from a server), fires at once.
    nic.receive(10, to(5000, 22, 1));
    assert_eq!(nic.poll_wakeup(10), None);
    nic.receive(20, to(5000, 80, 2));
    let w = nic.poll_wakeup(20).expect("LLI by destination port");
    assert_eq!(w.cause, FireCause::LowLatency);
    drain(&mut nic, 0, 20);
    nic.receive(30, to(5000, 22, 3));
    assert_eq!(nic.poll_wakeup(30), None);
    nic.receive(40, to(443, 5000, 4));
    assert_eq!(
        nic.poll_wakeup(40).expect("LLI by source port").cause,
        FireCause::LowLatency
    );
    assert_eq!(nic.counters(0).expect("q0").wakeups_lli, 2);
}

#[test]
fn an_lli_rule_holds_at_most_its_bound_of_ports() {
    let ports: Vec<u16> = (1..=nic::LLI_PORTS_MAX as u16).collect();
    assert_eq!(
        LliPorts::new(&ports).expect("at the bound").as_slice(),
        &ports[..]
    );
    assert!(LliPorts::new(&[80, 80, 443]).is_ok_and(|l| l.as_slice() == [80, 443]));
    let over: Vec<u16> = (1..=nic::LLI_PORTS_MAX as u16 + 1).collect();
    assert!(LliPorts::new(&over).is_err());
}

#[test]
fn set_moderation_rejects_inverted_adaptive_bounds() {
    let mut nic = nic_with(ModerationConfig::OFF, 8);
    let bad = ModerationConfig {
        adaptive: Some(AdaptiveModeration {
            interval_ns_min: 10,
            interval_ns_max: 5,
            rate_pps_high: 1,
        }),
        ..ModerationConfig::OFF
    };
    assert_eq!(
        nic.set_moderation(0, bad),
        Err(nic::ConfigError::BadAdaptiveBounds)
    );
    assert_eq!(
        nic.set_moderation(3, ModerationConfig::OFF),
        Err(nic::ConfigError::NoSuchQueue)
    );
}

#[test]
fn busy_poll_that_drains_withdraws_the_uncollected_wakeup() {
    let mut nic = nic_with(ModerationConfig::OFF, 64);
    nic.receive(0, frame(0));
    // The driver busy-polls before collecting the wake-up.
    assert_eq!(drain(&mut nic, 0, 0).len(), 1);
    assert_eq!(nic.poll_wakeup(0), None);
    nic.receive(1, frame(1));
    assert!(nic.poll_wakeup(1).is_some());
    assert_eq!(nic.poll_wakeup(1), None);
}

#[test]
fn moderation_is_per_queue() {
    let mut nic = Nic::new(NicConfig {
        queues: 2,
        moderation: ModerationConfig::OFF,
        gro: GroConfig {
            enabled: false,
            ..GroConfig::default()
        },
        ..NicConfig::default()
    })
    .expect("config");
    nic.set_moderation(1, ModerationConfig::fixed(1_000_000))
        .expect("queue 1");
    // The same flow, first steered (whole RETA) to queue 0, then to queue 1.
    let f = frame(0);
    let mut wakeups = [0u32; 2];
    for step in 0..2u16 {
        for i in 0..nic.steering().reta.len() {
            nic.set_reta_entry(i, step).expect("entry");
        }
        for k in 0..10u64 {
            let t = u64::from(step) * 10_000_000 + k * 1_000;
            nic.receive(t, f.clone());
            while let Some(w) = nic.poll_wakeup(t) {
                wakeups[usize::from(w.queue)] += 1;
                drain(&mut nic, w.queue, t);
            }
        }
    }
    // Queue 0 (no moderation) wakes per packet; queue 1 (1 ms interval) once in 10 µs.
    assert_eq!(wakeups, [10, 1]);
    assert_eq!(nic.moderation_interval_ns(1), Some(1_000_000));
    assert_eq!(nic.moderation_interval_ns(0), Some(0));
}
