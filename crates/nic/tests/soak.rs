//! Randomised multi-queue runs: many flows, random segment sizes and flags, random poll
//! budgets and times, small rings (so drops happen), GRO and moderation on or off. The checker
//! holds the NIC to its contract: every offered frame is delivered once or counted as dropped;
//! every delivered frame is valid; splitting coalesced frames gives back exactly segments that
//! were sent, each flow's in increasing sequence order, on the one queue RSS chose for it.

mod common;

use std::collections::BTreeMap;

use common::{Seg, bytes, parse_tcp};
use nic::{
    AdaptiveModeration, GroConfig, ModerationConfig, Nic, NicConfig, RxDescriptor, RxVerdict,
};
use proptest::prelude::*;
use wire::TcpFlags;

#[derive(Clone, Debug)]
enum Action {
    /// Flow index, payload length, PSH.
    Send(usize, usize, bool),
    /// Advance virtual time by this many ns and service wake-ups with this budget.
    Tick(u64, usize),
    /// Busy-poll a queue with a budget.
    Poll(u16, usize),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        8 => (0usize..12, 1usize..300, prop::bool::weighted(0.1))
            .prop_map(|(f, l, p)| Action::Send(f, l, p)),
        2 => (0u64..100_000, 1usize..80).prop_map(|(t, b)| Action::Tick(t, b)),
        1 => (0u16..4, 0usize..20).prop_map(|(q, b)| Action::Poll(q, b)),
    ]
}

fn moderation() -> impl Strategy<Value = ModerationConfig> {
    prop_oneof![
        Just(ModerationConfig::OFF),
        (1u64..100_000, 0u32..16).prop_map(|(i, t)| ModerationConfig {
            packets_threshold: t,
            ..ModerationConfig::fixed(i)
        }),
        Just(ModerationConfig {
            adaptive: Some(AdaptiveModeration::default()),
            ..ModerationConfig::fixed(10_000)
        }),
    ]
}

struct Sent {
    payload: Vec<u8>,
    flags: TcpFlags,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_is_delivered_once_or_counted_and_flows_stay_in_order(
        actions in prop::collection::vec(action(), 1..300),
        rx_slots in 2usize..40,
        gro_on in any::<bool>(),
        flows_max in 1usize..6,
        m in moderation(),
    ) {
        let mut nic = Nic::new(NicConfig {
            queues: 4,
            rx_ring_slots: rx_slots,
            moderation: m,
            gro: GroConfig { enabled: gro_on, flows_max, ..GroConfig::default() },
            ..NicConfig::default()
        }).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut seqs = [1u32 << 31; 12];
        // (sport, seq) -> what was sent there.
        let mut sent: BTreeMap<(u16, u32), Sent> = BTreeMap::new();
        let mut flow_queue: BTreeMap<u16, u16> = BTreeMap::new();
        let mut offered = 0u64;
        let mut got: Vec<RxDescriptor> = Vec::new();
        let mut now = 0u64;
        for (k, a) in actions.into_iter().enumerate() {
            match a {
                Action::Send(f, len, psh) => {
                    let sport = 30000 + f as u16;
                    let mut flags = TcpFlags::ACK;
                    if psh { flags |= TcpFlags::PSH; }
                    let payload = bytes(k as u64, len);
                    let frame = Seg::v4(sport, 80).with_payload(seqs[f], payload.clone()).flags(flags).build();
                    offered += 1;
                    match nic.receive(now, frame) {
                        RxVerdict::Queued { queue, .. } | RxVerdict::Coalesced { queue } => {
                            let q = *flow_queue.entry(sport).or_insert(queue);
                            prop_assert_eq!(q, queue, "flow moved queues");
                            sent.insert((sport, seqs[f]), Sent { payload, flags });
                        }
                        RxVerdict::Dropped(_) => {}
                    }
                    seqs[f] = seqs[f].wrapping_add(len as u32);
                }
                Action::Tick(dt, budget) => {
                    now += dt;
                    while let Some(w) = nic.poll_wakeup(now) {
                        nic.poll_rx(w.queue, budget, now, &mut got).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                }
                Action::Poll(q, budget) => {
                    nic.poll_rx(q, budget, now, &mut got).map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
        }
        now += 1_000_000_000;
        for q in 0..4 {
            loop {
                let p = nic.poll_rx(q, 64, now, &mut got).map_err(|e| TestCaseError::fail(e.to_string()))?;
                if p.drained { break; }
            }
        }
        let c = nic.counters_total();
        prop_assert_eq!(c.rx_packets + c.rx_drops(), offered);
        prop_assert_eq!(c.rx_descriptors_polled, got.len() as u64);
        // Split every delivered frame back into the segments it was made of.
        let mut last_seq: BTreeMap<u16, u32> = BTreeMap::new();
        let mut pieces = 0u64;
        for d in &got {
            let p = parse_tcp(&d.frame).map_err(TestCaseError::fail)?;
            prop_assert_eq!(flow_queue.get(&p.sport).copied(), Some(d.queue));
            let k = usize::from(d.meta.coalesced_segments);
            let mss = if k == 1 { p.payload.len().max(1) } else { usize::from(d.meta.gro_mss_bytes) };
            let chunks: Vec<&[u8]> = p.payload.chunks(mss).collect();
            prop_assert_eq!(chunks.len(), k);
            let mut seq = p.seq;
            for (j, chunk) in chunks.iter().enumerate() {
                let s = sent.remove(&(p.sport, seq));
                prop_assert!(s.is_some(), "delivered twice or never sent: {} {}", p.sport, seq);
                let s = s.expect("checked");
                prop_assert_eq!(&s.payload[..], *chunk);
                let last = j + 1 == k;
                let psh = p.flags.contains(TcpFlags::PSH) && last;
                prop_assert_eq!(s.flags.contains(TcpFlags::PSH), psh);
                if let Some(prev) = last_seq.insert(p.sport, seq) {
                    prop_assert!(wire::SeqNumber(prev).lt(wire::SeqNumber(seq)), "flow {} out of order", p.sport);
                }
                seq = seq.wrapping_add(chunk.len() as u32);
                pieces += 1;
            }
        }
        prop_assert!(sent.is_empty(), "accepted but never delivered: {}", sent.len());
        prop_assert_eq!(pieces, c.rx_packets);
    }
}
