//! Properties of the link model that hold for any configuration and any seed.

use proptest::prelude::*;
use sim::toy::{Recorder, SeqSender};
use sim::{ChannelConfig, Corrupt, Dir, Duplicate, JitterOrder, Loss, PortId, World};

const P0: PortId = PortId(0);

#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    rate_bps: u64,
    delay_ns: u64,
    jitter_ns: u64,
    fifo: bool,
    mtu_bytes: usize,
    queue_packets_max: usize,
    frame_len_bytes: usize,
    count: u64,
    interval_ns: u64,
    loss: f64,
    dup: f64,
    corrupt: f64,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (
            any::<u64>(),
            prop_oneof![Just(0u64), 1_000_000u64..1_000_000_000],
            0u64..1_000_000,
            0u64..100_000,
            any::<bool>(),
            64usize..2_000,
            1usize..50,
        ),
        (
            8usize..1_500,
            1u64..200,
            0u64..100_000,
            0.0f64..0.5,
            0.0f64..0.5,
            0.0f64..0.5,
        ),
    )
        .prop_map(
            |(
                (seed, rate_bps, delay_ns, jitter_ns, fifo, mtu_bytes, queue_packets_max),
                (frame_len_bytes, count, interval_ns, loss, dup, corrupt),
            )| Case {
                seed,
                rate_bps,
                delay_ns,
                jitter_ns,
                fifo,
                mtu_bytes,
                queue_packets_max,
                frame_len_bytes,
                count,
                interval_ns,
                loss,
                dup,
                corrupt,
            },
        )
}

fn run(c: &Case) -> (World, sim::HostId, sim::LinkId) {
    let mut w = World::new(c.seed);
    let tx = w.add_host(Box::new(SeqSender::new(
        P0,
        c.count,
        c.frame_len_bytes,
        c.interval_ns,
    )));
    let rx = w.add_host(Box::new(Recorder::default()));
    let order = if c.fifo {
        JitterOrder::Fifo
    } else {
        JitterOrder::Reorder
    };
    let cfg = ChannelConfig::default()
        .rate_bps(c.rate_bps)
        .delay_ns(c.delay_ns)
        .jitter_ns(c.jitter_ns, order)
        .mtu_bytes(c.mtu_bytes)
        .queue_max(usize::MAX, c.queue_packets_max);
    let link = w.connect((tx, P0), (rx, P0), cfg).expect("fresh ports");
    w.add_fault(link, Dir::AToB, Loss { p: c.loss });
    w.add_fault(link, Dir::AToB, Duplicate { p: c.dup });
    w.add_fault(link, Dir::AToB, Corrupt { p: c.corrupt });
    w.run_until_idle(1_000_000).expect("finite run");
    (w, rx, link)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_frame_is_delivered_or_counted_as_dropped(c in cases()) {
        let (w, rx, link) = run(&c);
        let k = *w.link_counters(link, Dir::AToB).expect("link exists");
        let got = w.host::<Recorder>(rx).map_or(0, |r| r.frames.len() as u64);
        prop_assert_eq!(k.offered_packets, c.count);
        prop_assert_eq!(k.delivered_packets, got);
        prop_assert_eq!(k.offered_packets + k.duplicated_packets, got + k.dropped_packets());
        if c.frame_len_bytes.max(8) > c.mtu_bytes {
            prop_assert_eq!(k.drop_mtu, c.count);
        }
    }

    #[test]
    fn nothing_arrives_before_serialization_plus_propagation(c in cases()) {
        let (w, rx, _link) = run(&c);
        let r = w.host::<Recorder>(rx).expect("recorder");
        let cfg = ChannelConfig::default().rate_bps(c.rate_bps);
        let floor_ns = cfg.serialization_ns(c.frame_len_bytes.max(8)) + c.delay_ns;
        for f in &r.frames {
            // The sequence number may be corrupted; only the time floor is universal.
            prop_assert!(f.at_ns >= floor_ns);
        }
    }

    #[test]
    fn same_case_same_digest(c in cases()) {
        let (a, _, _) = run(&c);
        let (b, _, _) = run(&c);
        prop_assert_eq!(a.digest(), b.digest());
        prop_assert_eq!(a.now_ns(), b.now_ns());
    }

    #[test]
    fn fifo_without_reorder_rules_keeps_send_order(mut c in cases()) {
        c.fifo = true;
        c.corrupt = 0.0;
        let (w, rx, _link) = run(&c);
        let seqs = w.host::<Recorder>(rx).expect("recorder").seqs();
        prop_assert!(seqs.windows(2).all(|p| p[0] <= p[1]), "{:?}", seqs);
    }
}
