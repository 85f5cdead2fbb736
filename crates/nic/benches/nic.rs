//! ns per packet through the NIC model: receive + poll with GRO off and on (one bulk flow,
//! 64 full-MSS segments per round), and TSO of a 64 KB send. Run:
//! `cargo bench -p nic -- --quick`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use common::{Seg, bytes};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nic::{GroConfig, ModerationConfig, Nic, NicConfig, TxOffload};

fn nic(gro: bool) -> Nic {
    Nic::new(NicConfig {
        queues: 1,
        moderation: ModerationConfig::OFF,
        gro: GroConfig {
            enabled: gro,
            ..GroConfig::default()
        },
        ..NicConfig::default()
    })
    .unwrap_or_else(|e| panic!("config: {e}"))
}

fn bench_rx(c: &mut Criterion) {
    let frames: Vec<Vec<u8>> = (0..64u32)
        .map(|i| {
            Seg::v4(40000, 80)
                .with_payload(1000 + i * 1448, bytes(u64::from(i), 1448))
                .build()
        })
        .collect();
    let mut g = c.benchmark_group("rx_64_segments");
    g.throughput(Throughput::Elements(64));
    for gro in [false, true] {
        let mut n = nic(gro);
        let mut out = Vec::with_capacity(64);
        let mut now = 0u64;
        g.bench_function(if gro { "gro_on" } else { "gro_off" }, |b| {
            b.iter(|| {
                for f in &frames {
                    black_box(n.receive(now, f.clone()));
                }
                out.clear();
                let _ = black_box(n.poll_rx(0, 64, now, &mut out));
                while n.poll_wakeup(now).is_some() {}
                now += 1_000_000;
            })
        });
    }
    g.finish();
}

fn bench_tso(c: &mut Criterion) {
    let big = Seg::v4(40000, 80)
        .with_payload(1, bytes(1, 45 * 1448))
        .build();
    let mut n = nic(false);
    let mut out = Vec::with_capacity(64);
    let mut g = c.benchmark_group("tx_tso_64k");
    g.throughput(Throughput::Elements(45));
    g.bench_function("mss_1448", |b| {
        b.iter(|| {
            let _ = n.transmit(0, big.clone(), TxOffload::tso(1448));
            out.clear();
            let _ = black_box(n.poll_tx(0, 1, &mut out));
        })
    });
    g.finish();
}

criterion_group!(benches, bench_rx, bench_tso);
criterion_main!(benches);
