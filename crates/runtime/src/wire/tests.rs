//! The wire's burst carry: steered as a burst, delivered in order, counted once.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use nic::{Nic, NicConfig};

use super::{Wire, WireConfig, WirePort, WireShard};
use crate::ring::{Consumer, Producer, ring};

/// An Ethernet + IPv4 + TCP frame of flow `flow` (its source port) carrying `seq` as its
/// first payload bytes.
fn tcp_frame(flow: u16, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 20 + 4];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&44u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let tcp = &mut f[34..54];
    tcp[0..2].copy_from_slice(&(40_000 + flow).to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[12] = 5 << 4;
    f[54..58].copy_from_slice(&seq.to_be_bytes());
    f
}

/// What the test holds of one shard: the ends the shard's own code would hold.
struct ShardEnds {
    tx: Producer<Vec<u8>>,
    completions: Consumer<Vec<u8>>,
    post: Producer<Vec<u8>>,
    rx: Consumer<Vec<u8>>,
}

fn shard(slots: usize) -> (WireShard, ShardEnds) {
    let (rx_p, rx_c) = ring(slots);
    let (tx_p, tx_c) = ring(64);
    let (post_p, post_c) = ring(slots);
    let (done_p, done_c) = ring(128);
    let wire_end = WireShard::new(tx_c, done_p, post_c, rx_p);
    let ends = ShardEnds {
        tx: tx_p,
        completions: done_c,
        post: post_p,
        rx: rx_c,
    };
    (wire_end, ends)
}

fn port(shards: Vec<WireShard>, queues: u16) -> WirePort {
    WirePort {
        shards,
        steering: Nic::new(NicConfig {
            queues,
            ..NicConfig::default()
        })
        .expect("a valid NIC configuration"),
        threads: Arc::new(Vec::new()),
        controls: Vec::new(),
        rebalancer: None,
        steer: None,
        engine_queue: None,
        installed: None,
    }
}

#[test]
fn a_burst_that_stalls_is_delivered_in_order_to_the_steered_queue_and_counted_once() {
    const FLOWS: u16 = 8;
    const PER_FLOW: u32 = 6;
    let (src, src_ends) = shard(64);
    // Receive rings of 2 slots and 2 posted buffers: a burst of 16 must stall.
    let (d0, d0_ends) = shard(2);
    let (d1, d1_ends) = shard(2);
    let dst_ends = [d0_ends, d1_ends];
    let reference = port(Vec::new(), 2);
    let mut wire = Wire::new(
        WireConfig {
            rate_bps: None,
            batch_frames: 16,
        },
        [port(vec![src], 1), port(vec![d0, d1], 2)],
        Arc::new(AtomicBool::new(false)),
        Instant::now(),
    );
    let mut sent = 0usize;
    for seq in 0..PER_FLOW {
        for flow in 0..FLOWS {
            src_ends
                .tx
                .push(tcp_frame(flow, seq))
                .expect("the transmit ring has room");
            sent += 1;
        }
    }
    for e in &dst_ends {
        for _ in 0..2 {
            e.post.push(Vec::with_capacity(128)).expect("room to post");
        }
    }
    let mut wake = [vec![false; 1], vec![false; 2]];
    let mut next_seq = [0u32; FLOWS as usize];
    let mut received = 0usize;
    for _ in 0..1_000 {
        wire.carry(0, 0, &mut wake);
        for (q, e) in dst_ends.iter().enumerate() {
            while let Some(f) = e.rx.pop() {
                let d = reference.steering.steer(&f).expect("a steerable frame");
                assert_eq!(usize::from(d.queue), q, "delivered to the queue RSS chose");
                let flow = usize::from(u16::from_be_bytes([f[34], f[35]]) - 40_000);
                let seq = u32::from_be_bytes([f[54], f[55], f[56], f[57]]);
                assert_eq!(seq, next_seq[flow], "flow {flow} in order");
                next_seq[flow] += 1;
                received += 1;
                e.post.push(f).expect("room to post again");
            }
        }
        while src_ends.completions.pop().is_some() {}
        if received == sent {
            break;
        }
    }
    assert_eq!(received, sent, "every frame delivered");
    assert!(
        wire.report.stalls_ring_full + wire.report.stalls_no_rx_buffer > 0,
        "the burst stalled (else the test proves nothing about held frames)"
    );
    assert_eq!(wire.report.frames[0], sent as u64);
    let counted: u64 = wire.ports[1].steering.reta_bucket_packets().iter().sum();
    assert_eq!(
        counted, sent as u64,
        "each frame counted once in its RETA bucket, not once per steering attempt"
    );
    assert!(wire.ports[0].shards[0].held.is_empty());
}
