//! Instructions per whole-frame steering decision, for callgrind:
//! `valgrind --tool=callgrind --toggle-collect='*steer_loop*' target/release/examples/steer_cost`
//! then divide by the 100,000 frames steered (a TCP/IPv4 frame, default key, 128-entry RETA).
use std::hint::black_box;

use rss::{Reta, Steering};

/// Frames steered per run.
const FRAMES: u32 = 100_000;

#[inline(never)]
fn steer_loop(steering: &Steering, frame: &[u8]) -> u64 {
    let mut acc = 0u64;
    for _ in 0..FRAMES {
        if let Ok(d) = steering.steer_frame(black_box(frame)) {
            acc = acc.wrapping_add(u64::from(d.queue) + u64::from(d.hash.unwrap_or(0)));
        }
    }
    acc
}

fn main() {
    let steering = Steering {
        reta: Reta::with_equal(128, 8).unwrap_or_default(),
        ..Steering::default()
    };
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    frame.extend_from_slice(&[66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6]);
    frame.extend_from_slice(&[0u8; 16]);
    println!("{}", steer_loop(&steering, &frame));
}
