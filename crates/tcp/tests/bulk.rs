//! Bulk transfers over a lossy, reordering, duplicating link: every byte arrives exactly once
//! and in order, for many seeds.

mod harness;

use harness::{MS, Pair, Verdict, pattern};
use proptest::prelude::*;
use tcp::{Config, CongestionControl, State};

/// xorshift64*: a tiny deterministic RNG for fault decisions.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}

fn run(seed: u64, loss_per_mille: u64, config: Config) {
    let mut p = Pair::established(config, config, 3 * MS);
    let mut rng = Rng(seed | 1);
    p.filter = Box::new(move |_, _| {
        if rng.chance(loss_per_mille) {
            Verdict::Drop
        } else if rng.chance(20) {
            Verdict::DelayExtra(rng.next() % (4 * MS))
        } else if rng.chance(10) {
            Verdict::Duplicate
        } else {
            Verdict::Pass
        }
    });
    let a_data = pattern(120_000);
    let b_data: Vec<u8> = pattern(40_000).into_iter().rev().collect();
    p.a_to_send = a_data.clone();
    p.b_to_send = b_data.clone();
    p.run_until(
        |p| p.b_read.len() >= a_data.len() && p.a_read.len() >= b_data.len(),
        600_000 * MS,
    );
    assert!(p.b_read == a_data, "seed {seed}: A→B bytes differ");
    assert!(p.a_read == b_data, "seed {seed}: B→A bytes differ");
    // And the connection closes cleanly.
    p.a.shutdown_write().unwrap();
    p.b.shutdown_write().unwrap();
    p.run_until(
        |p| {
            matches!(p.a.state(), State::TimeWait | State::Closed)
                && matches!(p.b.state(), State::TimeWait | State::Closed)
        },
        600_000 * MS,
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn bulk_transfer_with_random_loss_delivers_every_byte_once_in_order(seed in any::<u64>()) {
        run(seed, 30, Config::default());
    }

    #[test]
    fn bulk_transfer_without_timestamps_or_sack_survives_loss(seed in any::<u64>()) {
        run(seed, 30, Config { timestamps: false, sack: false, ..Config::default() });
    }

    #[test]
    fn cubic_bulk_transfer_with_random_loss_delivers_every_byte(seed in any::<u64>()) {
        run(seed, 30, Config { congestion_control: CongestionControl::Cubic, ..Config::default() });
    }

    #[test]
    fn small_buffers_and_heavy_loss_still_deliver(seed in any::<u64>()) {
        run(seed, 100, Config { recv_buffer_bytes: 8192, send_buffer_bytes: 8192, ooo_segments_max: 2, ..Config::default() });
    }
}

/// Regression: go-back-N after a timeout pulled SND.NXT behind the peer's RCV.NXT, and pure
/// ACKs carrying SND.NXT were then unacceptable on both sides — an endless ACK ping-pong.
#[test]
fn pure_acks_stay_acceptable_while_both_sides_retransmit() {
    run(
        10102893126306282162,
        30,
        Config {
            congestion_control: CongestionControl::Cubic,
            ..Config::default()
        },
    );
}
