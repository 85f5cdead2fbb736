//! Rough per-segment cost: two engines joined back to back (no loss, no delay), A streaming to
//! B, timed with the wall clock. Run with
//! `cargo run --release -p tcp --example loopback_cost [MiB]` (default 512), or count
//! instructions with `valgrind --tool=callgrind target/release/examples/loopback_cost 16`.
//! This example reads a clock; the crate itself never does.

use std::time::Instant;
use tcp::{Config, Connection};
use wire::tcp::{SeqNumber, TcpRepr};

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(512);
    let total_bytes: usize = mib * 1024 * 1024;
    let config = Config::default();
    let mut now: u64 = 1_000_000;
    let mut a = Connection::connect(now, &config, 1000, 80, SeqNumber(1), 7);
    let mut buf_a = vec![0u8; 65536];
    let mut buf_b = vec![0u8; 65536];
    let syn = owned(a.poll_transmit(now, &mut buf_a).expect("SYN"));
    let mut b =
        Connection::accept(now, &config, &syn.0.with(&syn.1), SeqNumber(99), 3).expect("accept");
    let chunk = vec![0x42u8; 64 * 1024];
    let mut read = vec![0u8; 256 * 1024];
    let (mut sent, mut received, mut segments) = (0usize, 0usize, 0u64);
    let start = Instant::now();
    while received < total_bytes {
        now += 10_000;
        if sent < total_bytes {
            sent += a
                .send(&chunk[..chunk.len().min(total_bytes - sent)])
                .unwrap_or(0);
        }
        while let Some(r) = a.poll_transmit(now, &mut buf_a) {
            segments += 1;
            b.handle_segment(now, &r);
        }
        while let Ok(n @ 1..) = b.recv(&mut read) {
            received += n;
        }
        while let Some(r) = b.poll_transmit(now, &mut buf_b) {
            a.handle_segment(now, &r);
        }
        if a.poll_timeout().is_some_and(|t| t <= now) {
            a.handle_timeout(now);
        }
        if b.poll_timeout().is_some_and(|t| t <= now) {
            b.handle_timeout(now);
            while let Some(r) = b.poll_transmit(now, &mut buf_b) {
                a.handle_segment(now, &r);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} MiB in {segments} data-side segments: {:.0} ns per segment (both engines, payload copies \
         included), {:.2} Gbit/s",
        total_bytes >> 20,
        secs * 1e9 / segments as f64,
        total_bytes as f64 * 8.0 / secs / 1e9
    );
}

struct Hdr(TcpRepr<'static>);
impl Hdr {
    fn with<'a>(&self, payload: &'a [u8]) -> TcpRepr<'a> {
        TcpRepr { payload, ..self.0 }
    }
}

fn owned(r: TcpRepr<'_>) -> (Hdr, Vec<u8>) {
    (Hdr(TcpRepr { payload: &[], ..r }), r.payload.to_vec())
}
