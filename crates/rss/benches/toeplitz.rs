//! ns per Toeplitz hash: bit-serial reference vs table-driven fast path, for an IPv4 and an
//! IPv6 4-tuple (default key). Run: `cargo bench -p rss -- --quick`.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rss::{HashInput, PortPair, Reta, RssHasher, RssKey, Steering, Toeplitz, toeplitz_reference};

fn bench_toeplitz(c: &mut Criterion) {
    let key = RssKey::default();
    let fast = Toeplitz::new(&key);
    let hasher = RssHasher::default();

    let src4 = Ipv4Addr::new(66, 9, 149, 187);
    let dst4 = Ipv4Addr::new(161, 142, 100, 80);
    let v4 = HashInput::V4 {
        src: src4,
        dst: dst4,
        ports: Some(PortPair {
            src: 2794,
            dst: 1766,
        }),
    };
    let (v4_bytes, v4_len) = v4.to_bytes();
    let v4_bytes = &v4_bytes[..v4_len];

    let src6: Ipv6Addr = "3ffe:2501:200:1fff::7"
        .parse()
        .unwrap_or(Ipv6Addr::LOCALHOST);
    let dst6: Ipv6Addr = "3ffe:2501:200:3::1".parse().unwrap_or(Ipv6Addr::LOCALHOST);
    let v6 = HashInput::V6 {
        src: src6,
        dst: dst6,
        ports: Some(PortPair {
            src: 2794,
            dst: 1766,
        }),
    };
    let (v6_bytes, v6_len) = v6.to_bytes();
    let v6_bytes = &v6_bytes[..v6_len];

    let mut g = c.benchmark_group("toeplitz_ipv4_4tuple");
    g.bench_function("reference", |b| {
        b.iter(|| toeplitz_reference(black_box(&key), black_box(v4_bytes)))
    });
    g.bench_function("fast_slice", |b| b.iter(|| fast.hash(black_box(v4_bytes))));
    g.bench_function("fast_typed", |b| {
        b.iter(|| {
            // One black_box over the whole tuple: like the other variants, the input is read
            // from memory once (four separate black_boxes cost four store/reload round trips).
            let (s, d, sp, dp) = *black_box(&(src4, dst4, 2794u16, 1766u16));
            fast.hash_v4(s, d, sp, dp)
        })
    });
    g.bench_function("hasher_input", |b| b.iter(|| hasher.hash(black_box(&v4))));
    g.finish();

    let mut g = c.benchmark_group("toeplitz_ipv6_4tuple");
    g.bench_function("reference", |b| {
        b.iter(|| toeplitz_reference(black_box(&key), black_box(v6_bytes)))
    });
    g.bench_function("fast_slice", |b| b.iter(|| fast.hash(black_box(v6_bytes))));
    g.bench_function("fast_typed", |b| {
        b.iter(|| {
            let (s, d, sp, dp) = *black_box(&(src6, dst6, 2794u16, 1766u16));
            fast.hash_v6(s, d, sp, dp)
        })
    });
    g.bench_function("hasher_input", |b| b.iter(|| hasher.hash(black_box(&v6))));
    g.finish();

    // Whole receive-side decision for one TCP/IPv4 frame: parse (wire views) + hash + RETA.
    let steering = Steering {
        reta: Reta::with_equal(128, 8).unwrap_or_default(),
        ..Steering::default()
    };
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    frame.extend_from_slice(&src4.octets());
    frame.extend_from_slice(&dst4.octets());
    frame.extend_from_slice(&[0x0a, 0xea, 0x06, 0xe6]);
    frame.extend_from_slice(&[0u8; 16]);
    c.bench_function("steer_frame_tcp_ipv4", |b| {
        b.iter(|| steering.steer_frame(black_box(&frame)))
    });

    c.bench_function("toeplitz_table_build", |b| {
        b.iter(|| Toeplitz::new(black_box(&key)))
    });
}

criterion_group!(benches, bench_toeplitz);
criterion_main!(benches);
