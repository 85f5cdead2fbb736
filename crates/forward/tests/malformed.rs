//! Hostile input: seeded pseudo-random frames (pure noise, and valid frames with bytes
//! flipped, truncated, extended) through the burst function, in growable and fixed buffers.
//! Nothing panics, and every frame is counted under exactly one outcome.
mod common;

use core::net::Ipv4Addr;

use common::*;
use forward::{SliceFrame, Verdict};

/// A valid frame of some kind, picked by `rng`.
fn seed_frame(rng: &mut Rng) -> Vec<u8> {
    let payload = rng.below(1600) as usize;
    let ttl = rng.below(4) as u8;
    match rng.below(6) {
        0 => udp_v4(
            PORT0_MAC,
            HOST_A_V4,
            HOST_B_V4,
            ttl,
            payload,
            rng.below(2) == 0,
        ),
        1 => udp_v4(
            PORT0_MAC,
            HOST_A_V4,
            Ipv4Addr::new(172, 16, 0, 1),
            ttl,
            payload,
            true,
        ),
        2 => udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), ttl, payload),
        3 => udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("3fff::1"), ttl, payload),
        4 => udp_v4(PORT0_MAC, HOST_A_V4, PORT0_V4, ttl, payload, false),
        _ => {
            let len = rng.below(128) as usize;
            (0..len).map(|_| rng.next() as u8).collect()
        }
    }
}

/// Flips, overwrites, truncates or extends a few bytes, biased towards the headers.
fn mutate(rng: &mut Rng, frame: &mut Vec<u8>) {
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 | 1 if !frame.is_empty() => {
                let i = rng.below(frame.len().min(80) as u64) as usize;
                frame[i] ^= 1 << rng.below(8);
            }
            2 if !frame.is_empty() => {
                let i = rng.below(frame.len() as u64) as usize;
                frame[i] = rng.next() as u8;
            }
            3 => {
                let keep = rng.below(frame.len() as u64 + 1) as usize;
                frame.truncate(keep);
            }
            _ => {
                for _ in 0..rng.below(16) {
                    frame.push(rng.next() as u8);
                }
            }
        }
    }
}

#[test]
fn seeded_random_frames_are_counted_never_panicking() {
    let seed = std::env::var("FORWARD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f0f0_u64);
    let mut rng = Rng(seed | 1);
    let (mut f, mut n) = router_with(&config(1400));
    let mut outcomes = [0u64; 4];
    for round in 0..400 {
        let burst = 1 + rng.below(forward::BURST_MAX as u64) as usize;
        let mut frames: Vec<Vec<u8>> = (0..burst)
            .map(|_| {
                let mut fr = seed_frame(&mut rng);
                if rng.below(4) != 0 {
                    mutate(&mut rng, &mut fr);
                }
                // Some buffers have spare capacity, some none.
                if rng.below(2) == 0 { dup(&fr) } else { fr }
            })
            .collect();
        let mut verdicts = vec![Verdict::Local; burst];
        let now_ns = round * 1_000_000;
        let port = rng.below(3) as u16; // port 2 does not exist
        assert_eq!(
            f.process_burst(now_ns, port, &mut frames, &mut verdicts, &mut n),
            burst
        );
        for v in &verdicts {
            outcomes[match v {
                Verdict::Forward { .. } => 0,
                Verdict::Local => 1,
                Verdict::IcmpError { .. } => 2,
                Verdict::Drop(_) => 3,
            }] += 1;
        }
        // Fixed buffers too: a frame in a slot of random spare room.
        let mut fr = seed_frame(&mut rng);
        mutate(&mut rng, &mut fr);
        let len = fr.len();
        fr.resize(len + rng.below(64) as usize, 0);
        let mut frame = SliceFrame::new(&mut fr, len);
        let _ = f.process(now_ns, 0, &mut frame, &mut n);
    }
    let c = f.counters();
    assert_eq!(
        c.rx_frames,
        c.forwarded + c.local + c.drops_total(),
        "{c:?}"
    );
    // The generator reaches every kind of outcome (seed {seed:#x}).
    assert!(
        outcomes.iter().all(|&o| o > 0),
        "seed {seed:#x}: {outcomes:?}"
    );
    assert!(c.drop_malformed > 0 && c.drop_not_for_us > 0, "{c:?}");
}
