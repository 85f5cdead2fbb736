//! Forwarding micro-benchmarks, run by `scripts/bench-forward.sh` (callgrind instruction counts
//! and wall clock). Never a test: figures are printed, not asserted.
//!
//! ```text
//! forward_bench burst BURSTS    # 64-byte IPv4 frames through Forwarder::process_burst
//! forward_bench burst6 BURSTS   # 82-byte IPv6 frames (40-byte header, 24 bytes of payload)
//! forward_bench lpm4 LOOKUPS    # DIR-24-8 lookups over a BGP-like table
//! forward_bench lpm6 LOOKUPS    # trie lookups over a /32–/64 table
//! ```
//!
//! The measured work sits in `#[inline(never)]` functions (`forward_one_burst`,
//! `lpm4_lookups`, `lpm6_lookups`) so callgrind's `--toggle-collect` counts only them;
//! refilling the frames between bursts (the "NIC") is outside. Each line printed is
//! `key=value` pairs.
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::hint::black_box;
use std::time::Instant;

use forward::{
    BURST_MAX, Forwarder, ForwarderConfig, Lpm4, Lpm6, NeighbourTable, PortConfig, Verdict,
};
use wire::{ChecksumCaps, EtherType, EthernetAddress, IpProtocol, Ipv4Packet, Ipv4Repr};

const PORT0_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PORT1_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

/// xorshift64*: deterministic inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A router with two ports and `routes` random IPv4 routes (/16–/28, BGP-like weight on /24)
/// plus 1,000 random IPv6 /48s, all through one gateway on port 1.
fn router(routes: usize) -> (Forwarder, NeighbourTable) {
    let cfg = ForwarderConfig {
        ports: vec![
            PortConfig {
                mac: PORT0_MAC,
                mtu_bytes: 1500,
                ipv4: vec![(Ipv4Addr::new(10, 0, 1, 1), 24)],
                ipv6: vec![("fd00:1::1".parse().unwrap(), 64)],
            },
            PortConfig {
                mac: PORT1_MAC,
                mtu_bytes: 1500,
                ipv4: vec![(Ipv4Addr::new(10, 0, 2, 1), 24)],
                ipv6: vec![("fd00:2::1".parse().unwrap(), 64)],
            },
        ],
        ..ForwarderConfig::default()
    };
    let mut f = Forwarder::new(&cfg).unwrap();
    let gw4 = IpAddr::V4(Ipv4Addr::new(10, 0, 2, 254));
    let gw6 = IpAddr::V6("fd00:2::fe".parse().unwrap());
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..routes {
        let len = [16u8, 20, 22, 24, 24, 24, 24, 26, 28][(rng.next() % 9) as usize];
        let a = Ipv4Addr::from((rng.next() as u32 & 0x7fff_ffff) | 0x0100_0000);
        let p = forward::Prefix::new(IpAddr::V4(a), len).unwrap();
        // Full group tables refuse a few /26–/28s: fine for a benchmark table.
        let _ = f.add_route_via(p, gw4);
    }
    f.add_route_via("0.0.0.0/0".parse().unwrap(), gw4).unwrap();
    for _ in 0..1000 {
        let a = Ipv6Addr::from(in_2000_3(u128::from(rng.next()) << 64));
        let p = forward::Prefix::new(IpAddr::V6(a), 48).unwrap();
        let _ = f.add_route_via(p, gw6);
    }
    f.add_route_via("2000::/3".parse().unwrap(), gw6).unwrap();
    let mut n = NeighbourTable::new(16);
    n.insert(1, gw4, EthernetAddress([2, 0xcc, 0, 0, 0, 0x0c]));
    n.insert(1, gw6, EthernetAddress([2, 0xcc, 0, 0, 0, 0x0c]));
    (f, n)
}

/// A 60-byte (64 with the FCS) IPv4/UDP frame to `dst`, in a 2 KiB buffer.
fn frame_v4(dst: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(2048);
    f.resize(60, 0);
    f[0..6].copy_from_slice(&PORT0_MAC.0);
    f[6..12].copy_from_slice(&[2, 0xaa, 0, 0, 0, 0x0a]);
    f[12..14].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
    let ip = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 1, 10),
        dst_addr: dst,
        protocol: IpProtocol::UDP,
        payload_len: 26,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    ip.emit(
        &mut Ipv4Packet::new_unchecked(&mut f[14..]),
        ChecksumCaps::ALL,
    )
    .unwrap();
    f
}

/// A 78-byte (82 with the FCS) IPv6 frame to `dst` with 24 bytes of payload.
fn frame_v6(dst: Ipv6Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(2048);
    f.resize(14 + 40 + 24, 0);
    f[0..6].copy_from_slice(&PORT0_MAC.0);
    f[6..12].copy_from_slice(&[2, 0xaa, 0, 0, 0, 0x0a]);
    f[12..14].copy_from_slice(&EtherType::IPV6.0.to_be_bytes());
    let ip = wire::Ipv6Repr {
        src_addr: "fd00:1::10".parse().unwrap(),
        dst_addr: dst,
        next_header: IpProtocol::UDP,
        payload_len: 24,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
        ext_headers: [None; wire::MAX_EXT_HEADERS],
    };
    ip.emit(&mut wire::Ipv6Packet::new_unchecked(&mut f[14..]))
        .unwrap();
    f
}

/// `a` moved into 2000::/3 (global unicast).
fn in_2000_3(a: u128) -> u128 {
    a & (u128::MAX >> 3) | 0x2000 << 112
}

#[inline(never)]
fn refill(frames: &mut [Vec<u8>], templates: &[Vec<u8>]) {
    for (f, t) in frames.iter_mut().zip(templates) {
        f.clear();
        f.extend_from_slice(t);
    }
}

#[inline(never)]
fn forward_one_burst(
    f: &mut Forwarder,
    n: &mut NeighbourTable,
    now_ns: u64,
    frames: &mut [Vec<u8>],
    verdicts: &mut [Verdict],
) -> usize {
    f.process_burst(now_ns, 0, frames, verdicts, n)
}

fn burst(bursts: u64, v6: bool) {
    let (mut f, mut n) = router(100_000);
    let mut rng = Rng(7);
    let templates: Vec<Vec<u8>> = (0..BURST_MAX)
        .map(|_| {
            if v6 {
                frame_v6(Ipv6Addr::from(in_2000_3(u128::from(rng.next()) << 64)))
            } else {
                // 32.0.0.0–63.255.255.255: routed by the random routes or the default.
                frame_v4(Ipv4Addr::from(
                    (rng.next() as u32 & 0x1fff_ffff) | 0x2000_0000,
                ))
            }
        })
        .collect();
    let mut frames = templates.clone();
    let mut verdicts = [Verdict::Local; BURST_MAX];
    let start = Instant::now();
    let mut done = 0u64;
    for i in 0..bursts {
        refill(&mut frames, &templates);
        done += forward_one_burst(&mut f, &mut n, i, &mut frames, &mut verdicts) as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    let c = f.counters();
    assert_eq!(c.forwarded, done, "every frame forwarded: {c:?}");
    println!(
        "mode={} frames={done} frame_bytes={} fib_routes={} fib_bytes={} seconds={secs:.3} \
         frames_per_s={:.0} (wall clock includes the refill)",
        if v6 { "burst6" } else { "burst" },
        templates[0].len() + 4,
        f.fib().len(),
        f.fib().memory_bytes(),
        done as f64 / secs
    );
}

#[inline(never)]
fn lpm4_lookups(t: &Lpm4, addrs: &[u32]) -> u64 {
    let mut hits = 0u64;
    for &a in addrs {
        hits += u64::from(black_box(t.lookup(a)).is_some());
    }
    hits
}

#[inline(never)]
fn lpm6_lookups(t: &Lpm6, addrs: &[u128]) -> u64 {
    let mut hits = 0u64;
    for &a in addrs {
        hits += u64::from(black_box(t.lookup(a)).is_some());
    }
    hits
}

fn lpm4(lookups: u64) {
    let mut t = Lpm4::new(16_384);
    let mut rng = Rng(11);
    let mut routes = 0;
    while routes < 500_000 {
        let len = [8u8, 16, 19, 20, 21, 22, 23, 24, 24, 24, 24, 24, 25, 28, 32]
            [(rng.next() % 15) as usize];
        if t.insert(rng.next() as u32, len, (rng.next() % 1000) as u16)
            .is_ok()
        {
            routes += 1;
        }
    }
    let addrs: Vec<u32> = (0..1 << 20).map(|_| rng.next() as u32).collect();
    let start = Instant::now();
    let mut hits = 0;
    let mut done = 0u64;
    while done < lookups {
        hits += lpm4_lookups(&t, &addrs);
        done += addrs.len() as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "mode=lpm4 routes={} tbl8_groups={} memory_bytes={} lookups={done} hits={hits} \
         seconds={secs:.3} lookups_per_s={:.0}",
        t.len(),
        t.tbl8_groups_used(),
        t.memory_bytes(),
        done as f64 / secs
    );
}

fn lpm6(lookups: u64) {
    let mut t = Lpm6::new(1 << 20);
    let mut rng = Rng(13);
    let mut batch = Vec::new();
    for _ in 0..100_000 {
        let len = [32u8, 40, 44, 48, 48, 48, 56, 64, 128][(rng.next() % 9) as usize];
        let a = in_2000_3(u128::from(rng.next()) << 64 | u128::from(rng.next()));
        batch.push((a, len, (rng.next() % 1000) as u16));
    }
    t.extend(&batch).unwrap();
    // Half the addresses inside a route's prefix (deep walks), half random in 2000::/3.
    let addrs: Vec<u128> = (0..1 << 20)
        .map(|i| {
            let r = u128::from(rng.next()) << 64 | u128::from(rng.next());
            if i % 2 == 0 {
                let (p, len, _) = batch[(rng.next() % batch.len() as u64) as usize];
                p | (r >> len.min(127))
            } else {
                in_2000_3(r)
            }
        })
        .collect();
    let start = Instant::now();
    let mut hits = 0;
    let mut done = 0u64;
    while done < lookups {
        hits += lpm6_lookups(&t, &addrs);
        done += addrs.len() as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "mode=lpm6 routes={} nodes={} memory_bytes={} lookups={done} hits={hits} \
         seconds={secs:.3} lookups_per_s={:.0}",
        t.len(),
        t.nodes_used(),
        t.memory_bytes(),
        done as f64 / secs
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = |default: u64| {
        args.get(2)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(default)
    };
    match args.get(1).map(String::as_str) {
        Some("burst") => burst(n(100_000), false),
        Some("burst6") => burst(n(100_000), true),
        Some("lpm4") => lpm4(n(50_000_000)),
        Some("lpm6") => lpm6(n(10_000_000)),
        _ => {
            eprintln!("usage: forward_bench burst|burst6|lpm4|lpm6 [COUNT]");
            std::process::exit(2);
        }
    }
}
