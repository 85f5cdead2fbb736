//! Min-of-batches timing: ns per operation, taking the fastest of 3,000 batches of 2,000 calls.
//! Complements the criterion bench on a shared, loaded machine, where criterion's means drift
//! with other people's builds; the minimum is what the code costs when it gets the core.
//! Run: `cargo run --release -p rss --example minbench`.
use core::net::Ipv4Addr;
use std::hint::black_box;
use std::time::Instant;

use rss::{FlowFields, Reta, RssKey, Steering, Toeplitz, toeplitz_reference};

fn min_ns(mut f: impl FnMut()) -> f64 {
    const BATCH: u32 = 2000;
    let mut best = f64::MAX;
    for _ in 0..3000 {
        let t = Instant::now();
        for _ in 0..BATCH {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / f64::from(BATCH));
    }
    best
}

fn main() {
    let key = RssKey::default();
    let t = Toeplitz::new(&key);
    let (s, d) = (
        Ipv4Addr::new(66, 9, 149, 187),
        Ipv4Addr::new(161, 142, 100, 80),
    );
    let bytes = [66u8, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6];
    let v6 = [7u8; 36];
    let steering = Steering {
        reta: Reta::with_equal(128, 8).unwrap_or_default(),
        ..Steering::default()
    };
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    frame.extend_from_slice(&bytes);
    frame.extend_from_slice(&[0u8; 16]);
    println!(
        "ref v4      {:.2} ns",
        min_ns(|| {
            black_box(toeplitz_reference(black_box(&key), black_box(&bytes)));
        })
    );
    println!(
        "fast v4     {:.2} ns",
        min_ns(|| {
            black_box(t.hash_v4(black_box(s), black_box(d), black_box(2794), black_box(1766)));
        })
    );
    let tables = t.tables_only();
    let kernel = Toeplitz::with_clmul(&key);
    let tuple: [u8; 12] = bytes;
    println!(
        "tuple v4 tables {:.2} ns",
        min_ns(|| {
            black_box(tables.hash_v4_tuple(black_box(&tuple)));
        })
    );
    println!(
        "tuple v4 {} {:.2} ns",
        if kernel.uses_clmul() {
            "with_clmul (gfni+pclmulqdq)"
        } else {
            "with_clmul (no GFNI: tables)"
        },
        min_ns(|| {
            black_box(kernel.hash_v4_tuple(black_box(&tuple)));
        })
    );
    // Throughput: 1,024 different tuples back to back (independent hashes overlap).
    let many: Vec<[u8; 12]> = (0..1024u32)
        .map(|i| {
            let mut t = tuple;
            t[..4].copy_from_slice(&i.wrapping_mul(0x9e37_79b9).to_be_bytes());
            t[8..10].copy_from_slice(&(i as u16).to_be_bytes());
            t
        })
        .collect();
    for (name, h) in [("tables", &tables), ("with_clmul", &kernel)] {
        let mut best = f64::MAX;
        for _ in 0..2000 {
            let start = Instant::now();
            let mut acc = 0u32;
            for x in black_box(&many) {
                acc ^= h.hash_v4_tuple(x);
            }
            black_box(acc);
            best = best.min(start.elapsed().as_nanos() as f64 / many.len() as f64);
        }
        println!("tuple v4 x1024 {name} {best:.2} ns each");
    }
    // The same 1,024 tuples as one burst (`hash_v4_tuples`): eight per kernel call where the
    // CPU has AVX-512 VPCLMULQDQ + GFNI, else one at a time on the tables.
    let mut hashes = vec![0u32; many.len()];
    for (name, h) in [("tables", &tables), ("burst kernel", &t)] {
        if name == "burst kernel" && !h.uses_burst_kernel() {
            println!("tuple v4 x1024 burst: no AVX-512 VPCLMULQDQ + GFNI here");
            continue;
        }
        let mut best = f64::MAX;
        for _ in 0..2000 {
            let start = Instant::now();
            h.hash_v4_tuples(black_box(&many), &mut hashes);
            black_box(&hashes);
            best = best.min(start.elapsed().as_nanos() as f64 / many.len() as f64);
        }
        println!("tuple v4 x1024 hash_v4_tuples {name} {best:.2} ns each");
    }
    println!(
        "slice v4    {:.2} ns",
        min_ns(|| {
            black_box(t.hash(black_box(&bytes)));
        })
    );
    if let Some(k) = platform::toeplitz::ClmulToeplitz::new(key.as_bytes()) {
        println!(
            "clmul words v6 {:.2} ns",
            min_ns(|| {
                black_box(k.hash(black_box(&v6)));
            })
        );
        println!(
            "clmul words v4 {:.2} ns",
            min_ns(|| {
                black_box(k.hash(black_box(&bytes)));
            })
        );
    }
    println!(
        "ref v6      {:.2} ns",
        min_ns(|| {
            black_box(toeplitz_reference(black_box(&key), black_box(&v6)));
        })
    );
    println!(
        "slice v6    {:.2} ns",
        min_ns(|| {
            black_box(t.hash(black_box(&v6)));
        })
    );
    println!(
        "from_frame  {:.2} ns",
        min_ns(|| {
            let _ = black_box(FlowFields::from_frame(black_box(&frame)));
        })
    );
    let fields = FlowFields::from_frame(&frame).ok().flatten();
    let hasher = rss::RssHasher::default();
    if let Some(fields) = fields {
        println!(
            "hash_input  {:.2} ns",
            min_ns(|| {
                black_box(black_box(&fields).hash_input(rss::HashTypes::default()));
            })
        );
        println!(
            "five_tuple  {:.2} ns",
            min_ns(|| {
                black_box(black_box(&fields).five_tuple());
            })
        );
        println!(
            "lookup      {:.2} ns",
            min_ns(|| {
                black_box(
                    black_box(&fields)
                        .five_tuple()
                        .and_then(|t| steering.filters.lookup(&t)),
                );
            })
        );
        println!(
            "steer_fields {:.2} ns",
            min_ns(|| {
                black_box(steering.steer_fields(black_box(&fields)));
            })
        );
        let input = fields.hash_input(rss::HashTypes::default()).map(|x| x.1);
        if let Some(input) = input {
            println!(
                "hasher.hash {:.2} ns",
                min_ns(|| {
                    black_box(hasher.hash(black_box(&input)));
                })
            );
            println!(
                "st.hasher.hash {:.2} ns",
                min_ns(|| {
                    black_box(steering.hasher.hash(black_box(&input)));
                })
            );
        }
    }
    println!(
        "compose     {:.2} ns",
        min_ns(|| {
            let _ = black_box(
                FlowFields::from_frame(black_box(&frame))
                    .map(|f| f.map(|f| steering.steer_fields(&f))),
            );
        })
    );
    println!(
        "steer_frame {:.2} ns",
        min_ns(|| {
            let _ = black_box(steering.steer_frame(black_box(&frame)));
        })
    );
    // Bursts of different TCP/IPv4 frames (each its own buffer, as a NIC ring holds them):
    // `steer_frame` one by one against `steer_burst`, tables and kernel.
    let frames: Vec<Vec<u8>> = many
        .iter()
        .map(|tuple| {
            let mut f = frame.clone();
            f[26..38].copy_from_slice(tuple);
            f
        })
        .collect();
    let tables_steering = Steering {
        hasher: steering.hasher.tables_only(),
        ..steering.clone()
    };
    let mut decisions = vec![Err(rss::FrameError::TruncatedL4); frames.len()];
    for burst in [8usize, 32, 1024] {
        for (name, s) in [("tables", &tables_steering), ("kernel", &steering)] {
            let mut best_single = f64::MAX;
            let mut best_burst = f64::MAX;
            for _ in 0..2000 {
                let start = Instant::now();
                for f in black_box(&frames) {
                    let _ = black_box(s.steer_frame(f));
                }
                best_single =
                    best_single.min(start.elapsed().as_nanos() as f64 / frames.len() as f64);
                let start = Instant::now();
                for (fs, out) in black_box(&frames)
                    .chunks(burst)
                    .zip(decisions.chunks_mut(burst))
                {
                    s.steer_burst(fs, out);
                }
                black_box(&decisions);
                best_burst =
                    best_burst.min(start.elapsed().as_nanos() as f64 / frames.len() as f64);
            }
            if name == "tables" || s.hasher.toeplitz().uses_burst_kernel() {
                println!(
                    "steer x1024 {name}: steer_frame {best_single:.2} ns, steer_burst({burst}) {best_burst:.2} ns per frame"
                );
            }
        }
    }
}
