//! Min-of-batches timing of a steering NIC in front of shards (what the `mem` wire does per
//! frame): `Nic::steer_counted` frame by frame against `Nic::steer_counted_burst` in bursts of
//! 8 and 32, over 1,024 different TCP/IPv4 frames, each in its own buffer; for reference,
//! `Nic::steer` (not counted) and `rss::Steering::steer_frame` on the NIC's steering. ns per
//! frame, the fastest of 2,000 passes.
//!
//! Run: `cargo run -p nic --release --example steer_min`.

use std::hint::black_box;
use std::time::Instant;

use nic::{Nic, NicConfig, RxDrop};
use rss::SteerDecision;

/// A 54-byte TCP/IPv4 frame (checksums not filled: steering does not read them) for flow `i`.
fn frame(i: u32) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 20];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&i.wrapping_mul(0x9e37_79b9).to_be_bytes());
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&(i as u16).wrapping_add(1024).to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[46] = 0x50;
    f
}

/// ns per frame of the fastest of 2,000 passes of `pass` over `frames` frames.
fn min_ns_per_frame(frames: usize, mut pass: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..2000 {
        let start = Instant::now();
        pass();
        best = best.min(start.elapsed().as_nanos() as f64 / frames as f64);
    }
    best
}

fn main() -> Result<(), nic::ConfigError> {
    let mut nic = Nic::new(NicConfig {
        queues: 8,
        ..NicConfig::default()
    })?;
    let kernel = nic.steering().hasher.toeplitz().uses_burst_kernel();
    let frames: Vec<Vec<u8>> = (0..1024).map(frame).collect();
    let single = min_ns_per_frame(frames.len(), || {
        for f in black_box(&frames) {
            let _ = black_box(nic.steer_counted(f));
        }
    });
    println!("steer_counted, frame by frame: {single:.2} ns per frame");
    let uncounted = min_ns_per_frame(frames.len(), || {
        for f in black_box(&frames) {
            let _ = black_box(nic.steer(f));
        }
    });
    println!("steer (not counted), frame by frame: {uncounted:.2} ns per frame");
    let steering = nic.steering().clone();
    let bare = min_ns_per_frame(frames.len(), || {
        for f in black_box(&frames) {
            let _ = black_box(steering.steer_frame(f));
        }
    });
    println!("rss steer_frame on the NIC's steering: {bare:.2} ns per frame");
    let mut out: Vec<Result<SteerDecision, RxDrop>> = vec![Err(RxDrop::Malformed); frames.len()];
    for burst in [8usize, 32] {
        let ns = min_ns_per_frame(frames.len(), || {
            for (fs, o) in black_box(&frames).chunks(burst).zip(out.chunks_mut(burst)) {
                nic.steer_counted_burst(fs, o);
            }
            black_box(&out);
        });
        println!(
            "steer_counted_burst, bursts of {burst} ({}): {ns:.2} ns per frame",
            if kernel {
                "AVX-512 kernel"
            } else {
                "no kernel on this CPU: frame by frame"
            }
        );
    }
    Ok(())
}
