//! Two stacks over a seeded faulty link (drop, duplicate, delay/reorder): TCP still delivers
//! every byte exactly once and in order, and nothing panics.
mod common;

use common::*;
use stack::RxMeta;
use std::collections::BTreeMap;

use proptest::prelude::*;
use stack::Stack;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}

/// Frames in flight: (arrival time, sequence number for stable order) → (to B?, frame).
type Wire = BTreeMap<(u64, u64), (bool, Vec<u8>)>;

fn transmit(
    now: u64,
    s: &mut Stack,
    to_b: bool,
    wire: &mut Wire,
    rng: &mut Rng,
    seq: &mut u64,
    loss: u64,
) {
    while let Some(f) = s.poll_transmit(now) {
        let copies = if rng.chance(loss) {
            0
        } else if rng.chance(loss / 2) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = 100_000 + rng.next() % (3 * MS);
            *seq += 1;
            wire.insert((now + delay, *seq), (to_b, f.clone()));
        }
    }
}

/// Runs one transfer; returns the sender's TCP counters.
fn run(seed: u64, loss_per_mille: u64, len: usize) -> Result<tcp::Counters, TestCaseError> {
    let mut rng = Rng(seed | 1);
    let mut a = Stack::new(config_a());
    let mut b = Stack::new(config_b());
    let l = b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let mut now = 0u64;
    let c = a.tcp_connect(now, v4(IP_B, 80), 0).expect("connect");
    let data: Vec<u8> = (0..len).map(|i| (i * 13 % 256) as u8).collect();
    let mut sent = 0usize;
    let mut got = Vec::new();
    let mut server = None;
    let mut wire: Wire = BTreeMap::new();
    let mut seq = 0u64;
    let mut buf = vec![0u8; 8192];
    for _ in 0..200_000 {
        if sent < data.len() {
            if let Ok(n) = a.tcp_send(c, &data[sent..]) {
                sent += n;
            }
        }
        if server.is_none() {
            server = b.tcp_accept(l).ok().map(|(s, _)| s);
        }
        if let Some(s) = server {
            while let Ok(n) = b.tcp_recv(s, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
        }
        if got.len() == data.len() {
            break;
        }
        transmit(
            now,
            &mut a,
            true,
            &mut wire,
            &mut rng,
            &mut seq,
            loss_per_mille,
        );
        transmit(
            now,
            &mut b,
            false,
            &mut wire,
            &mut rng,
            &mut seq,
            loss_per_mille,
        );
        let next_wire = wire.keys().next().map(|k| k.0);
        let next = [next_wire, a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { break };
        now = now.max(t);
        while let Some(entry) = wire.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (to_b, f) = entry.remove();
            if to_b {
                b.receive(now, &f, &RxMeta::NONE)
            } else {
                a.receive(now, &f, &RxMeta::NONE)
            }
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    prop_assert_eq!(
        got.len(),
        data.len(),
        "seed {} loss {}",
        seed,
        loss_per_mille
    );
    prop_assert!(got == data, "bytes differ, seed {}", seed);
    Ok(a.tcp_counters())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    #[test]
    fn tcp_over_a_faulty_link_delivers_every_byte_once_in_order(
        seed in any::<u64>(),
        loss in 0u64..80,
    ) {
        run(seed, loss, 200_000)?;
    }
}

#[test]
fn rack_repairs_losses_and_lost_retransmissions_through_the_stack() {
    // SACK and RACK are on by default (RFC 8985 §6): at 5 % loss with up to 3 ms of
    // reordering, RACK deems segments lost (on ACKs and at its reordering timer) and finds
    // retransmissions lost again, instead of leaving them to the retransmission timeout.
    let mut k = tcp::Counters::default();
    for seed in 1..=8 {
        k.add(&run(seed, 50, 1_000_000).expect("transfer"));
    }
    assert!(k.rack_loss_marks > 0, "{k:?}");
    assert!(k.rack_reo_timeouts > 0, "{k:?}");
    assert!(k.rack_lost_retransmits > 0, "{k:?}");
    assert!(k.fast_retransmits > k.rto_expirations, "{k:?}");
}
