use rss::{Reta, Steering};
use std::hint::black_box;
use std::time::Instant;
fn main() {
    let steering = Steering {
        reta: Reta::with_equal(128, 8).unwrap_or_default(),
        ..Steering::default()
    };
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    frame.extend_from_slice(&[66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6]);
    frame.extend_from_slice(&[0u8; 16]);
    for nframes in [32usize, 256, 1024] {
        let frames: Vec<Vec<u8>> = (0..nframes as u32)
            .map(|i| {
                let mut f = frame.clone();
                f[26..30].copy_from_slice(&i.wrapping_mul(0x9e3779b9).to_be_bytes());
                f
            })
            .collect();
        let big: Vec<u8> = frames
            .iter()
            .flat_map(|f| {
                let mut g = f.clone();
                g.resize(64, 0);
                g
            })
            .collect();
        let slices: Vec<&[u8]> = big.chunks(64).map(|c| &c[..54]).collect();
        let mut out = vec![Err(rss::FrameError::TruncatedL4); nframes];
        let reps = 1024 / nframes;
        for (name, which) in [
            ("vec single", 0),
            ("vec burst", 1),
            ("slices single", 2),
            ("slices burst", 3),
        ] {
            let mut best = f64::MAX;
            for _ in 0..2000 {
                let s = Instant::now();
                for _ in 0..reps {
                    match which {
                        0 => {
                            for f in black_box(&frames) {
                                let _ = black_box(steering.steer_frame(f));
                            }
                        }
                        1 => {
                            for (fs, o) in black_box(&frames).chunks(32).zip(out.chunks_mut(32)) {
                                steering.steer_burst(fs, o);
                            }
                            black_box(&out);
                        }
                        2 => {
                            for f in black_box(&slices) {
                                let _ = black_box(steering.steer_frame(f));
                            }
                        }
                        _ => {
                            for (fs, o) in black_box(&slices).chunks(32).zip(out.chunks_mut(32)) {
                                steering.steer_burst(fs, o);
                            }
                            black_box(&out);
                        }
                    }
                }
                best = best.min(s.elapsed().as_nanos() as f64 / 1024.0);
            }
            println!("{nframes} frames {name}: {best:.2} ns");
        }
    }
}
