//! The TCP flush's train path (`tcp_train.rs`) against the per-segment path: two worlds run
//! the same random workload, one with trains and one with `set_tcp_trains(false)`; every frame
//! either stack emits must be the same byte for byte and in the same order, and the
//! connections' `tcp_info` the same after every drain.

mod common;

use common::*;
use proptest::prelude::*;
use stack::{RxMeta, Stack, StackConfig, TxMeta};

#[derive(Debug, Clone, Copy)]
struct Case {
    seed: u64,
    mss: u16,
    mtu: u16,
    timestamps: bool,
    sack: bool,
    nodelay: bool,
    send_buffer_bytes: u32,
    recv_buffer_bytes: u32,
    tx_queue_frames: usize,
    loss_per_mille: u64,
    write_bytes_max: usize,
    read_bytes_max: usize,
    v6: bool,
    csum_offload: bool,
    neighbor_reachable_ms: u64,
}

/// Everything one world showed: the frames in order (A's and B's, tagged), `tcp_info` of both
/// connections after each step, and the data B received.
#[derive(Debug, PartialEq)]
struct Trace {
    frames: Vec<(u8, Vec<u8>)>,
    infos: Vec<String>,
    received: Vec<u8>,
    train_segments: u64,
}

fn stack_config(base: StackConfig, k: &Case) -> StackConfig {
    let mut c = base;
    c.interface.mtu_bytes = k.mtu;
    c.limits.tx_queue_frames_max = k.tx_queue_frames;
    c.tcp.mss_bytes = k.mss;
    c.tcp.timestamps = k.timestamps;
    c.tcp.sack = k.sack;
    c.tcp.nodelay = k.nodelay;
    c.tcp.send_buffer_bytes = k.send_buffer_bytes;
    c.tcp.recv_buffer_bytes = k.recv_buffer_bytes;
    c.tx_offload.tcp_csum = k.csum_offload;
    c.limits.neighbor_reachable_ns = k.neighbor_reachable_ms * MS;
    c
}

/// `f` as the device sends it: a partial checksum completed.
fn on_the_wire(f: &[u8], meta: TxMeta) -> Vec<u8> {
    let mut f = f.to_vec();
    if meta.l4_csum_partial {
        assert!(wire::partial::complete_l4_checksum(&mut f));
    }
    f
}

fn world(k: &Case, trains: bool) -> Trace {
    let mut a = Stack::new(stack_config(config_a(), k));
    let mut b = Stack::new(stack_config(config_b(), k));
    a.set_tcp_trains(trains);
    b.set_tcp_trains(trains);
    let server = if k.v6 {
        v6(IP6_B, 5000)
    } else {
        v4(IP_B, 5000)
    };
    let l = b.tcp_listen(server, 8).expect("listen");
    let c = a.tcp_connect(0, server, 0).expect("connect");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut rng = FaultRng(k.seed | 1);
    let mut t = Trace {
        frames: Vec::new(),
        infos: Vec::new(),
        received: Vec::new(),
        train_segments: 0,
    };
    let (mut sent, mut server_h, mut now) = (0usize, None, 0u64);
    let mut buf = vec![0u8; 65536];
    for _ in 0..30_000 {
        if let Some(h) = server_h {
            let want = 1 + (rng.next() as usize) % k.read_bytes_max;
            if let Ok(n) = b.tcp_recv(h, &mut buf[..want]) {
                t.received.extend_from_slice(&buf[..n]);
            }
        } else if let Ok((h, _)) = b.tcp_accept(l) {
            server_h = Some(h);
        }
        if sent < data.len() && rng.chance(700) {
            let end = data
                .len()
                .min(sent + 1 + (rng.next() as usize) % k.write_bytes_max);
            if let Ok(n) = a.tcp_send(c, &data[sent..end]) {
                sent += n;
            }
        }
        if sent == data.len() && rng.chance(100) {
            let _ = a.tcp_shutdown(c);
        }
        let mut moved = false;
        while let Some((f, meta)) = a.poll_transmit_meta(now) {
            moved = true;
            if !rng.chance(k.loss_per_mille) {
                b.receive(now, &on_the_wire(&f, meta), &RxMeta::NONE);
            }
            t.frames.push((b'a', f));
        }
        while let Some((f, meta)) = b.poll_transmit_meta(now) {
            moved = true;
            if !rng.chance(k.loss_per_mille / 2) {
                a.receive(now, &on_the_wire(&f, meta), &RxMeta::NONE);
            }
            t.frames.push((b'b', f));
        }
        t.infos.push(format!("{:?}", a.tcp_info(now, c)));
        if let Some(h) = server_h {
            t.infos.push(format!("{:?}", b.tcp_info(now, h)));
        }
        if t.received.len() == data.len() {
            break;
        }
        if !moved || rng.chance(200) {
            now = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + MS)
                .max(now + 1)
                .min(now + (rng.next() % (5 * MS)).max(1));
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
    }
    assert!(
        t.received == data[..t.received.len()],
        "the bytes B read differ from what A sent"
    );
    t.train_segments = a.counters().tx_train_segments + b.counters().tx_train_segments;
    t
}

fn twin(k: Case) -> Result<u64, TestCaseError> {
    let with = world(&k, true);
    let without = world(&k, false);
    prop_assert_eq!(without.train_segments, 0);
    prop_assert_eq!(
        with.frames.len(),
        without.frames.len(),
        "frame counts differ"
    );
    for (i, (x, y)) in with.frames.iter().zip(&without.frames).enumerate() {
        let at = x.1.iter().zip(&y.1).position(|(p, q)| p != q);
        prop_assert!(
            x == y,
            "frame {} differs (from {}, byte {:?}, lengths {} and {})",
            i,
            x.0 as char,
            at,
            x.1.len(),
            y.1.len()
        );
    }
    prop_assert_eq!(&with.infos, &without.infos);
    prop_assert_eq!(with.received.len(), without.received.len());
    Ok(with.train_segments)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random MSS, MTU, options, Nagle, buffers (so windows), transmit queue room, loss, write
    /// and read sizes, IPv4 or IPv6, TCP checksum offload, neighbour entries that need
    /// refreshing or expire mid-transfer: the train path's frames and connections are the per-segment path's.
    #[test]
    fn trains_emit_the_frames_of_single_segments(
        seed in any::<u64>(),
        mss in 500u16..1460,
        mtu in 1280u16..1501,
        timestamps in any::<bool>(),
        sack in any::<bool>(),
        nodelay in any::<bool>(),
        send_buffer_bytes in 8_192u32..262_144,
        recv_buffer_bytes in 8_192u32..262_144,
        tx_queue_frames in 2usize..64,
        loss_per_mille in prop_oneof![Just(0u64), 0u64..50],
        write_bytes_max in 1usize..70_000,
        read_bytes_max in 1usize..65_536,
        v6 in any::<bool>(),
        csum_offload in any::<bool>(),
        neighbor_reachable_ms in prop_oneof![Just(30_000u64), 5u64..500],
    ) {
        twin(Case {
            seed, mss, mtu, timestamps, sack, nodelay, send_buffer_bytes, recv_buffer_bytes,
            tx_queue_frames, loss_per_mille, write_bytes_max, read_bytes_max, v6,
            csum_offload, neighbor_reachable_ms,
        })?;
    }
}

/// A loss-free bulk transfer goes out mostly in trains (the twin test above is not vacuous).
#[test]
fn a_bulk_sender_emits_most_segments_in_trains() {
    let k = Case {
        seed: 3,
        mss: 1460,
        mtu: 1500,
        timestamps: true,
        sack: true,
        nodelay: false,
        send_buffer_bytes: 256 * 1024,
        recv_buffer_bytes: 256 * 1024,
        tx_queue_frames: 64,
        loss_per_mille: 0,
        write_bytes_max: 65_536,
        read_bytes_max: 65_536,
        v6: false,
        csum_offload: false,
        neighbor_reachable_ms: 30_000,
    };
    let in_trains = twin(k).unwrap();
    // 200 kB at 1,448 bytes a segment: 139 data segments.
    assert!(in_trains >= 100, "only {in_trains} segments went in trains");
}
