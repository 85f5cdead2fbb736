use rss::{Reta, Steering};
use std::hint::black_box;
fn main() {
    let which: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let steering = Steering {
        reta: Reta::with_equal(128, 8).unwrap_or_default(),
        ..Steering::default()
    };
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    frame.extend_from_slice(&[66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6]);
    frame.extend_from_slice(&[0u8; 16]);
    let frames: Vec<Vec<u8>> = (0..32u32)
        .map(|i| {
            let mut f = frame.clone();
            f[26..30].copy_from_slice(&i.wrapping_mul(0x9e3779b9).to_be_bytes());
            f
        })
        .collect();
    let mut out = vec![Err(rss::FrameError::TruncatedL4); 32];
    let reps: u32 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3_000_000);
    for _ in 0..reps {
        if which == 1 {
            steering.steer_burst(black_box(&frames), &mut out);
            black_box(&out);
        } else {
            for f in black_box(&frames) {
                let _ = black_box(steering.steer_frame(f));
            }
        }
    }
}
