//! Two engines talking over a virtual link: each test is one conversation, named for what it
//! proves.

#[path = "../harness/mod.rs"]
mod harness;

mod acceptability;
mod close;
mod corners;
mod cwnd;
mod handshake;
mod hostile;
mod loss_recovery;
mod rack;
mod sack;
mod timers;

use harness::{Dir, MS, Pair, Seg, Verdict, pattern, seg};
use tcp::{CloseReason, Config, Connection, Error, Event, State};
use wire::tcp::{SeqNumber, TcpFlags};

/// Byte-exact comparison that reports the first difference instead of printing megabytes.
fn assert_same(got: &[u8], want: &[u8]) {
    let first_diff = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        got.len() == want.len() && first_diff.is_none(),
        "received {} bytes, expected {}; first difference at {:?}",
        got.len(),
        want.len(),
        first_diff
    );
}

fn cfg() -> Config {
    Config::default()
}

fn no_ts() -> Config {
    Config {
        timestamps: false,
        ..Config::default()
    }
}

/// `c` without the tail loss probe, for tests of what the retransmission timer does: with a
/// probe (on by default) a lost tail is resent after about two RTTs, before any expiry.
fn rto_only(c: Config) -> Config {
    Config {
        tail_loss_probe: false,
        ..c
    }
}

/// A segment from B's port to A's port.
fn to_a(seq: SeqNumber, ack: SeqNumber, flags: TcpFlags) -> Seg {
    seg(80, 1000, seq, ack, flags)
}

fn established_no_ts() -> Pair {
    Pair::established(no_ts(), no_ts(), 5 * MS)
}

/// (time sent, sequence number) of A's data segments.
fn a_data(p: &Pair) -> Vec<(u64, SeqNumber)> {
    p.sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| (e.0, e.2.seq()))
        .collect()
}

fn transfer_with_drops(config: Config, drops: &'static [usize], len: usize) -> Pair {
    let mut p = Pair::established(config, config, 5 * MS);
    p.filter = Box::new(move |c, s| {
        if c.dir == Dir::AtoB && s.is_data() && drops.contains(&c.data_index) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(len);
    p.a_to_send = data.clone();
    p.run_until(
        |p| p.b_read.len() == data.len() && p.a.send_queue_bytes() == 0,
        5_000 * MS,
    );
    assert_same(&p.b_read, &data);
    p
}

fn data_times(p: &Pair, dir: Dir, seq: SeqNumber) -> Vec<u64> {
    p.sent(dir)
        .filter(|e| e.2.is_data() && e.2.seq() == seq)
        .map(|e| e.0)
        .collect()
}
