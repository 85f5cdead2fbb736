//! Hostile input: random and mutated frames never panic, and every frame is accounted for.

mod common;

use common::{Seg, bytes, drain_all};
use nic::{ModerationConfig, Nic, NicConfig, RxVerdict, TxOffload};
use proptest::prelude::*;
use wire::TcpFlags;

fn nic() -> Nic {
    Nic::new(NicConfig {
        queues: 4,
        rx_ring_slots: 16,
        tx_ring_slots: 16,
        moderation: ModerationConfig::fixed(1_000),
        ..NicConfig::default()
    })
    .expect("config")
}

/// Valid frames of a few flows, some of which the test then corrupts.
fn seed_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for f in 0..3u16 {
        for i in 0..4u32 {
            let mut s = Seg::v4(1000 + f, 80).with_payload(1 + i * 100, bytes(u64::from(i), 100));
            if f == 1 {
                s = Seg::v6(1000 + f, 80).with_payload(1 + i * 100, bytes(u64::from(i), 100));
                s.ts = Some((i, 0));
            }
            if i == 3 {
                s.flags = TcpFlags::ACK | TcpFlags::PSH;
            }
            v.push(s.build());
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_frames_never_panic_and_are_all_accounted_for(
        edits in prop::collection::vec((0usize..12, 0usize..200, any::<u8>()), 0..40),
        truncs in prop::collection::vec((0usize..12, 0usize..200), 0..6),
        junk in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 0..6),
        poll_at in 0usize..20,
    ) {
        let mut frames = seed_frames();
        for (f, pos, val) in edits {
            if let Some(b) = frames[f].get_mut(pos) { *b = val; }
        }
        for (f, len) in truncs {
            frames[f].truncate(len);
        }
        frames.extend(junk);
        let mut nic = nic();
        let offered = frames.len() as u64;
        let mut t = 0u64;
        for (i, f) in frames.into_iter().enumerate() {
            t += 500;
            let v = nic.receive(t, f.clone());
            if let RxVerdict::Queued { queue, .. } | RxVerdict::Coalesced { queue } = v {
                prop_assert!(queue < 4);
            }
            // The same bytes through every transmit offload.
            for off in [TxOffload::NONE, TxOffload::csum(), TxOffload::tso(7)] {
                nic.transmit((i % 4) as u16, f.clone(), off).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            let mut out = Vec::new();
            nic.poll_tx((i % 4) as u16, 64, &mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if i == poll_at {
                drain_all(&mut nic, t);
            }
            while nic.poll_wakeup(t).is_some() {}
        }
        let delivered = drain_all(&mut nic, t + 1_000_000);
        let c = nic.counters_total();
        prop_assert_eq!(c.rx_packets + c.rx_drops(), offered);
        prop_assert_eq!(c.rx_packets, c.rx_descriptors_queued + c.rx_coalesced_segments);
        prop_assert_eq!(c.rx_descriptors_polled, c.rx_descriptors_queued);
        prop_assert!(delivered.len() as u64 <= c.rx_descriptors_queued);
        prop_assert_eq!(c.tx_requests + c.tx_drop_ring_full, offered * 3);
    }
}
