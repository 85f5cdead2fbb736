//! Rings, drops and receive steering (filters → RSS → default queue).

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{Seg, bytes, drain, drain_all, parse_tcp, udp4};
use nic::{
    ConfigError, CsumVerdict, GroConfig, ModerationConfig, Nic, NicConfig, RxDrop, RxVerdict,
    TxOffload, TxVerdict,
};
use rss::{FiveTuple, HashInput, HashTypes, RssHasher, RssKey, SteerHow, SymmetricMode};

fn config(queues: u16, rx_slots: usize) -> NicConfig {
    NicConfig {
        queues,
        rx_ring_slots: rx_slots,
        tx_ring_slots: 8,
        moderation: ModerationConfig::OFF,
        gro: GroConfig {
            enabled: false,
            ..GroConfig::default()
        },
        ..NicConfig::default()
    }
}

fn flow_frame(i: u16, seq: u32) -> Vec<u8> {
    let mut s = Seg::v4(10_000 + i, 80).with_payload(seq, bytes(u64::from(i) + 7, 100));
    s.src = IpAddr::V4(Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8));
    s.build()
}

#[test]
fn sized_rings_lose_nothing() {
    // 64 flows × 20 segments, bursts of 256 frames, polled between bursts; every ring has
    // room for a whole burst, so nothing may be lost, duplicated or altered.
    let mut nic = Nic::new(config(4, 256)).expect("config");
    let mut sent = Vec::new();
    for round in 0..20u32 {
        for i in 0..64u16 {
            sent.push(flow_frame(i, 1000 + round * 100));
        }
    }
    let mut got = Vec::new();
    for (n, burst) in sent.chunks(256).enumerate() {
        let now = n as u64 * 1_000_000;
        for f in burst {
            assert!(matches!(
                nic.receive(now, f.clone()),
                RxVerdict::Queued { .. }
            ));
        }
        got.extend(drain_all(&mut nic, now).into_iter().map(|d| d.frame));
    }
    let t = nic.counters_total();
    assert_eq!(t.rx_drops(), 0);
    assert_eq!(t.rx_packets, sent.len() as u64);
    assert_eq!(t.rx_descriptors_polled, sent.len() as u64);
    let mut a = sent.clone();
    let mut b = got.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn per_flow_order_is_kept_through_a_queue() {
    let mut nic = Nic::new(config(4, 512)).expect("config");
    for round in 0..10u32 {
        for i in 0..16u16 {
            nic.receive(0, flow_frame(i, 1000 + round * 100));
        }
    }
    let got = drain_all(&mut nic, 0);
    for i in 0..16u16 {
        let seqs: Vec<u32> = got
            .iter()
            .map(|d| parse_tcp(&d.frame).expect("valid"))
            .filter(|p| p.sport == 10_000 + i)
            .map(|p| p.seq)
            .collect();
        assert_eq!(seqs, (0..10).map(|r| 1000 + r * 100).collect::<Vec<_>>());
    }
}

#[test]
fn full_rx_ring_drops_and_counts() {
    let mut nic = Nic::new(config(1, 8)).expect("config");
    let mut verdicts = Vec::new();
    for k in 0..12u32 {
        verdicts.push(nic.receive(0, flow_frame(1, 1000 + k * 100)));
    }
    let dropped = verdicts
        .iter()
        .filter(|v| **v == RxVerdict::Dropped(RxDrop::RingFull))
        .count();
    assert_eq!(dropped, 4);
    let c = nic.counters(0).expect("queue 0");
    assert_eq!(c.rx_drop_ring_full, 4);
    assert_eq!(c.rx_packets, 8);
    assert_eq!(drain(&mut nic, 0, 0).len(), 8);
    // Room again after the poll.
    assert!(matches!(
        nic.receive(1, flow_frame(1, 9000)),
        RxVerdict::Queued { .. }
    ));
}

#[test]
fn full_tx_ring_drops_and_counts() {
    let mut nic = Nic::new(config(2, 8)).expect("config");
    let f = flow_frame(1, 1);
    for _ in 0..8 {
        assert_eq!(
            nic.transmit(1, f.clone(), TxOffload::NONE),
            Ok(TxVerdict::Queued)
        );
    }
    assert_eq!(
        nic.transmit(1, f.clone(), TxOffload::NONE),
        Ok(TxVerdict::RingFull)
    );
    assert_eq!(nic.counters(1).expect("q1").tx_drop_ring_full, 1);
    assert_eq!(
        nic.transmit(2, f, TxOffload::NONE),
        Err(ConfigError::NoSuchQueue)
    );
    let mut out = Vec::new();
    let p = nic.poll_tx(1, 64, &mut out).expect("q1");
    assert_eq!((p.requests, p.frames, out.len()), (8, 8, 8));
    assert_eq!(nic.counters(1).expect("q1").tx_packets, 8);
}

#[test]
fn malformed_and_oversize_frames_are_dropped_and_counted_on_default_queue() {
    let mut nic = Nic::new(NicConfig {
        rx_frame_bytes_max: 200,
        ..config(2, 8)
    })
    .expect("config");
    assert_eq!(
        nic.receive(0, vec![0u8; 10]),
        RxVerdict::Dropped(RxDrop::Malformed)
    );
    let mut bad_ihl = flow_frame(1, 1);
    bad_ihl[14] = 0x43; // IHL 3 < 5
    assert_eq!(
        nic.receive(0, bad_ihl),
        RxVerdict::Dropped(RxDrop::Malformed)
    );
    let mut truncated = flow_frame(1, 1);
    truncated.truncate(40);
    assert_eq!(
        nic.receive(0, truncated),
        RxVerdict::Dropped(RxDrop::Malformed)
    );
    assert_eq!(
        nic.receive(0, vec![0u8; 201]),
        RxVerdict::Dropped(RxDrop::Oversize)
    );
    let c = nic.counters(0).expect("q0");
    assert_eq!((c.rx_drop_malformed, c.rx_drop_oversize), (3, 1));
    assert_eq!(nic.counters_total().rx_packets, 0);
}

#[test]
fn non_ip_frame_goes_to_default_queue_without_hash() {
    let mut nic = Nic::new(config(4, 8)).expect("config");
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(
        nic.receive(0, arp),
        RxVerdict::Queued {
            queue: 0,
            how: SteerHow::NoHash
        }
    );
    let d = drain(&mut nic, 0, 0);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].meta.hash, None);
    assert_eq!(d[0].meta.csum.l4, CsumVerdict::Unknown);
    nic.set_default_queue(3).expect("queue 3 exists");
    assert!(matches!(
        nic.receive(1, d[0].frame.clone()),
        RxVerdict::Queued { queue: 3, .. }
    ));
    assert_eq!(nic.set_default_queue(4), Err(ConfigError::NoSuchQueue));
}

#[test]
fn rss_hash_travels_with_the_descriptor() {
    let mut nic = Nic::new(config(4, 64)).expect("config");
    let hasher = RssHasher::default();
    for i in 0..32u16 {
        let f = flow_frame(i, 1);
        let (ty, input) = HashInput::from_frame(&f, HashTypes::all())
            .expect("valid")
            .expect("hashable");
        let expect_hash = hasher.hash(&input);
        let expect_queue = nic.steering().reta.queue_for_hash(expect_hash);
        assert_eq!(
            nic.receive(0, f),
            RxVerdict::Queued {
                queue: expect_queue,
                how: SteerHow::Rss
            }
        );
        let d = drain(&mut nic, expect_queue, 0);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].meta.hash, Some(expect_hash));
        assert_eq!(d[0].meta.hash_type, Some(ty.into()));
        assert_eq!(d[0].queue, expect_queue);
        assert_eq!(d[0].meta.csum.ip, CsumVerdict::Good);
        assert_eq!(d[0].meta.csum.l4, CsumVerdict::Good);
    }
}

#[test]
fn filter_beats_rss() {
    let mut nic = Nic::new(config(4, 64)).expect("config");
    let f = flow_frame(3, 1);
    let RxVerdict::Queued { queue: rss_q, .. } = nic.receive(0, f.clone()) else {
        panic!("not queued");
    };
    let other = (rss_q + 1) % 4;
    let tuple = FiveTuple {
        protocol: 6,
        src: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 3)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        src_port: 10_003,
        dst_port: 80,
    };
    assert_eq!(nic.add_filter(tuple, other), Ok(None));
    assert_eq!(
        nic.receive(1, f.clone()),
        RxVerdict::Queued {
            queue: other,
            how: SteerHow::Filter
        }
    );
    // The hash is still computed and carried when a filter steers ("hash once").
    let d = drain(&mut nic, other, 1);
    assert!(d[0].meta.hash.is_some());
    assert_eq!(nic.counters(other).expect("q").rx_steered_filter, 1);
    assert_eq!(nic.add_filter(tuple, 9), Err(ConfigError::NoSuchQueue));
    nic.remove_filter(&tuple);
    assert!(
        matches!(nic.receive(2, f), RxVerdict::Queued { queue, how: SteerHow::Rss } if queue == rss_q)
    );
}

#[test]
fn reta_entry_update_moves_new_packets_of_that_bucket_to_new_queue() {
    let mut nic = Nic::new(config(4, 64)).expect("config");
    let hasher = RssHasher::default();
    let hash_of = |f: &[u8]| {
        let (_, input) = HashInput::from_frame(f, HashTypes::all())
            .expect("valid")
            .expect("hashable");
        hasher.hash(&input)
    };
    let target = flow_frame(5, 1);
    let bucket = nic.steering().reta.index_for_hash(hash_of(&target));
    let old_q = nic.steering().reta.entries()[bucket];
    let new_q = (old_q + 1) % 4;
    // One packet before the change stays where it landed.
    assert!(
        matches!(nic.receive(0, target.clone()), RxVerdict::Queued { queue, .. } if queue == old_q)
    );
    // Remember where 200 other flows go.
    let others: Vec<(Vec<u8>, usize, u16)> = (100..300u16)
        .map(|i| {
            let f = flow_frame(i, 1);
            let b = nic.steering().reta.index_for_hash(hash_of(&f));
            let q = nic.steering().reta.entries()[b];
            (f, b, q)
        })
        .collect();
    nic.set_reta_entry(bucket, new_q).expect("valid entry");
    assert!(
        matches!(nic.receive(1, flow_frame(5, 101)), RxVerdict::Queued { queue, .. } if queue == new_q)
    );
    for (f, b, q) in others {
        let v = nic.receive(1, f);
        let expect = if b == bucket { new_q } else { q };
        assert!(matches!(v, RxVerdict::Queued { queue, .. } if queue == expect));
    }
    // The packet queued before the change is still in the old ring.
    let old = drain(&mut nic, old_q, 2);
    assert!(old.iter().any(|d| d.frame == target));
    assert_eq!(nic.set_reta_entry(bucket, 4), Err(ConfigError::NoSuchQueue));
    assert_eq!(
        nic.set_reta_entry(100_000, 1),
        Err(ConfigError::BadRetaIndex)
    );
}

#[test]
fn symmetric_key_lands_both_directions_on_one_queue() {
    // RepeatedKey: the 16-bit-periodic key (Woo & Park). XorFold takes the default key: with a
    // periodic key the folded input's two equal halves cancel and every flow hashes alike.
    for (key, mode) in [
        (RssKey::symmetric(), SymmetricMode::RepeatedKey),
        (RssKey::default(), SymmetricMode::XorFold),
    ] {
        let mut nic = Nic::new(config(8, 4096)).expect("config");
        nic.set_hasher(RssHasher::new(&key, mode));
        let mut queues_used = std::collections::BTreeSet::new();
        for i in 0..500u16 {
            let mut fwd = Seg::v4(1024 + i * 7, 443 + i % 3).with_payload(1, vec![1; 10]);
            fwd.src = IpAddr::V4(Ipv4Addr::new(192, 168, (i >> 8) as u8, i as u8));
            fwd.dst = IpAddr::V4(Ipv4Addr::new(172, 16, 0, (i % 200) as u8 + 1));
            let mut rev = fwd.clone();
            std::mem::swap(&mut rev.src, &mut rev.dst);
            std::mem::swap(&mut rev.sport, &mut rev.dport);
            let RxVerdict::Queued { queue: a, .. } = nic.receive(0, fwd.build()) else {
                panic!("fwd not queued");
            };
            let RxVerdict::Queued { queue: b, .. } = nic.receive(0, rev.build()) else {
                panic!("rev not queued");
            };
            assert_eq!(a, b, "{mode:?}: flow {i} split across queues");
            queues_used.insert(a);
        }
        // IPv6 flows too.
        for i in 0..100u16 {
            let mut fwd = Seg::v6(2000 + i * 3, 443).with_payload(1, vec![2; 10]);
            fwd.src = IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, i, 0, 0, 0, 0, 1));
            let mut rev = fwd.clone();
            std::mem::swap(&mut rev.src, &mut rev.dst);
            std::mem::swap(&mut rev.sport, &mut rev.dport);
            let (RxVerdict::Queued { queue: a, .. }, RxVerdict::Queued { queue: b, .. }) =
                (nic.receive(0, fwd.build()), nic.receive(0, rev.build()))
            else {
                panic!("v6 not queued");
            };
            assert_eq!(a, b, "{mode:?}: v6 flow {i} split across queues");
        }
        // And the flows still spread over the queues.
        assert!(queues_used.len() >= 6, "{mode:?}: {queues_used:?}");
        // UDP too.
        let f = udp4(
            Ipv4Addr::new(1, 2, 3, 4),
            Ipv4Addr::new(5, 6, 7, 8),
            53,
            3333,
            b"q",
        );
        let r = udp4(
            Ipv4Addr::new(5, 6, 7, 8),
            Ipv4Addr::new(1, 2, 3, 4),
            3333,
            53,
            b"a",
        );
        let (RxVerdict::Queued { queue: a, .. }, RxVerdict::Queued { queue: b, .. }) =
            (nic.receive(0, f), nic.receive(0, r))
        else {
            panic!("udp not queued");
        };
        assert_eq!(a, b);
    }
}

#[test]
fn bad_checksum_is_flagged_not_dropped() {
    let mut nic = Nic::new(config(1, 8)).expect("config");
    let mut f = flow_frame(1, 1);
    let last = f.len() - 1;
    f[last] ^= 0xff;
    assert!(matches!(nic.receive(0, f), RxVerdict::Queued { .. }));
    let d = drain(&mut nic, 0, 0);
    assert_eq!(d[0].meta.csum.l4, CsumVerdict::Bad);
    assert_eq!(d[0].meta.csum.ip, CsumVerdict::Good);
    assert_eq!(nic.counters(0).expect("q0").rx_csum_bad_l4, 1);
}

#[test]
fn config_errors_are_typed() {
    assert_eq!(
        Nic::new(NicConfig {
            queues: 0,
            ..NicConfig::default()
        })
        .err(),
        Some(ConfigError::BadQueueCount)
    );
    assert_eq!(
        Nic::new(NicConfig {
            rx_ring_slots: 0,
            ..NicConfig::default()
        })
        .err(),
        Some(ConfigError::ZeroRingSlots)
    );
    assert_eq!(ConfigError::NoSuchQueue.to_string(), "no such queue");
}

#[test]
fn backend_chosen_queue_is_kept_and_mismatch_counted() {
    let mut nic = Nic::new(config(4, 64)).expect("config");
    let f = flow_frame(9, 1);
    let RxVerdict::Queued { queue: ours, .. } = nic.receive(0, f.clone()) else {
        panic!("not queued");
    };
    let other = (ours + 1) % 4;
    assert!(
        matches!(nic.receive_on_queue(1, ours, f.clone()), RxVerdict::Queued { queue, .. } if queue == ours)
    );
    assert!(
        matches!(nic.receive_on_queue(2, other, f.clone()), RxVerdict::Queued { queue, .. } if queue == other)
    );
    assert_eq!(nic.counters(ours).expect("q").rx_steer_mismatch, 0);
    assert_eq!(nic.counters(other).expect("q").rx_steer_mismatch, 1);
    // The hash still travels with the packet.
    let d = drain(&mut nic, other, 3);
    assert!(d[0].meta.hash.is_some());
    assert_eq!(
        nic.receive_on_queue(4, 7, f),
        RxVerdict::Dropped(RxDrop::NoQueue)
    );
    assert_eq!(nic.counters(0).expect("q0").rx_drop_no_queue, 1);
}

fn atr_nic(filters_max: usize, every: u32) -> Nic {
    Nic::new(NicConfig {
        filters_max,
        atr: Some(nic::AtrConfig {
            sample_every_packets: every,
        }),
        ..config(4, 64)
    })
    .expect("config")
}

/// Outgoing segment from local 10.9.0.1:`sport` to 10.8.0.1:80, and its reply.
fn out_and_reply(sport: u16, flags: wire::TcpFlags) -> (Vec<u8>, Vec<u8>) {
    let mut out = Seg::v4(sport, 80).with_payload(1, Vec::new()).flags(flags);
    out.src = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1));
    out.dst = IpAddr::V4(Ipv4Addr::new(10, 8, 0, 1));
    let mut reply = out.clone().flags(wire::TcpFlags::ACK);
    std::mem::swap(&mut reply.src, &mut reply.dst);
    std::mem::swap(&mut reply.sport, &mut reply.dport);
    reply.payload = vec![1; 20];
    (out.build(), reply.build())
}

#[test]
fn atr_steers_replies_to_the_transmitting_queue() {
    let mut nic = atr_nic(64, 20);
    let mut moved = 0;
    for sport in 40000..40020u16 {
        let (syn, reply) = out_and_reply(sport, wire::TcpFlags::SYN);
        let rss_q = nic.steer(&reply).expect("valid").queue;
        let tx_q = (rss_q + 1) % 4;
        nic.transmit(tx_q, syn, TxOffload::NONE).expect("queue");
        assert_eq!(
            nic.receive(0, reply),
            RxVerdict::Queued {
                queue: tx_q,
                how: SteerHow::Filter
            }
        );
        moved += 1;
    }
    assert_eq!(nic.counters_total().tx_atr_filters_set, moved);
}

#[test]
fn atr_samples_every_nth_segment_and_counts_a_full_table() {
    let mut nic = atr_nic(1, 3);
    let (ack, reply) = out_and_reply(40000, wire::TcpFlags::ACK);
    let rss_q = nic.steer(&reply).expect("valid").queue;
    let tx_q = (rss_q + 1) % 4;
    for _ in 0..2 {
        nic.transmit(tx_q, ack.clone(), TxOffload::NONE)
            .expect("queue");
    }
    assert_eq!(nic.steer(&reply).expect("valid").how, SteerHow::Rss);
    nic.transmit(tx_q, ack, TxOffload::NONE).expect("queue");
    assert_eq!(nic.steer(&reply).expect("valid").queue, tx_q);
    // A second flow finds the one-entry table full.
    let (syn2, _) = out_and_reply(40001, wire::TcpFlags::SYN);
    nic.transmit(tx_q, syn2, TxOffload::NONE).expect("queue");
    let c = nic.counters(tx_q).expect("q");
    assert_eq!((c.tx_atr_filters_set, c.tx_atr_table_full), (1, 1));
}

#[test]
fn reta_bucket_counters_show_the_load_per_entry() {
    let mut nic = Nic::new(config(4, 512)).expect("config");
    let hasher = RssHasher::default();
    let target = flow_frame(77, 1);
    let (_, input) = HashInput::from_frame(&target, HashTypes::all())
        .expect("valid")
        .expect("hashable");
    let bucket = nic.steering().reta.index_for_hash(hasher.hash(&input));
    for k in 0..50u32 {
        nic.receive(0, flow_frame(77, 1 + k * 100));
    }
    for i in 0..100u16 {
        nic.receive(0, flow_frame(i + 200, 1));
    }
    let total: u64 = nic.reta_bucket_packets().iter().sum();
    assert_eq!(total, nic.counters_total().rx_steered_rss);
    assert!(nic.reta_bucket_packets()[bucket] >= 50);
    nic.reset_reta_bucket_packets();
    assert!(nic.reta_bucket_packets().iter().all(|&n| n == 0));
    assert_eq!(nic.reta_bucket_packets().len(), rss::RETA_SIZE_DEFAULT);
}

#[test]
fn udp_checksum_is_verified_and_zero_means_not_checked() {
    let mut nic = Nic::new(config(1, 8)).expect("config");
    let (src, dst) = (Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2));
    let good = udp4(src, dst, 53, 5353, b"hello");
    let mut bad = good.clone();
    bad[34 + 8] ^= 1;
    let mut none = good.clone();
    none[34 + 6] = 0;
    none[34 + 7] = 0;
    for f in [good, bad, none] {
        nic.receive(0, f);
    }
    let d = drain(&mut nic, 0, 0);
    let l4: Vec<CsumVerdict> = d.iter().map(|d| d.meta.csum.l4).collect();
    assert_eq!(
        l4,
        vec![CsumVerdict::Good, CsumVerdict::Bad, CsumVerdict::Unknown]
    );
}
