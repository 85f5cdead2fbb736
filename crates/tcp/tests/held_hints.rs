//! The hints byte of the owed output (`out.held`, issue 17 item 2): the short receive path
//! reads one byte instead of two deadlines, four pointers, a count and a niche, so each bit
//! must say exactly what it summarizes after every writer. `invariant_violation` compares
//! the byte with the state; these tests drive each writer — loss (the out-of-order queue and
//! the SACK scoreboard get their boxes), a zero window (the persist timer arms and disarms),
//! a first write and the idle release (the send ring's storage comes and goes) — and check
//! after every step.

mod harness;

use harness::{Dir, MS, Pair, Verdict, pattern};
use tcp::Config;

/// Steps `p` until `done` holds (or `limit` steps), checking both ends' invariants after
/// each step.
fn step_checked(p: &mut Pair, limit: usize, mut done: impl FnMut(&Pair) -> bool) {
    for _ in 0..limit {
        assert_eq!(p.a.invariant_violation(), None, "A at {} ns", p.now);
        assert_eq!(p.b.invariant_violation(), None, "B at {} ns", p.now);
        if done(p) || !p.step() {
            return;
        }
    }
}

#[test]
fn held_hints_follow_loss_and_sack_through_recovery() {
    let mut p = Pair::established(Config::default(), Config::default(), 5 * MS);
    p.b_auto_read = true;
    // The second data segment A sends is lost: B queues what follows out of order, A's
    // scoreboard fills from B's SACK blocks, fast recovery repairs the hole.
    p.filter = Box::new(|c, _| {
        if c.dir == Dir::AtoB && c.data_index == 1 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(40_000);
    p.a_to_send = data.clone();
    step_checked(&mut p, 100_000, |p| p.b_read.len() == data.len());
    assert_eq!(p.b_read, data);
    assert!(
        p.b.counters().rx_ooo_segments > 0,
        "B held data out of order"
    );
    assert!(p.a.counters().fast_retransmits > 0, "A repaired the hole");
    // The boxes stay; the short path looks behind them and is taken again.
    p.a_to_send = pattern(20_000);
    step_checked(&mut p, 100_000, |p| p.b_read.len() == data.len() + 20_000);
    assert_eq!(p.b_read.len(), data.len() + 20_000);
}

#[test]
fn held_hints_follow_a_zero_window_and_the_send_ring_storage() {
    let small = Config {
        recv_buffer_bytes: 4_000,
        ..Config::default()
    };
    let mut p = Pair::established(Config::default(), small, 5 * MS);
    // B reads nothing: its window closes and A's persist timer probes it.
    p.b_auto_read = false;
    p.a_to_send = pattern(20_000);
    step_checked(&mut p, 100_000, |p| p.a.counters().window_probes_sent > 0);
    assert!(
        p.a.counters().window_probes_sent > 0,
        "A probed the zero window"
    );
    // B reads everything: the window opens, the persist timer stops, the rest flows.
    p.b_auto_read = true;
    step_checked(&mut p, 200_000, |p| p.b_read.len() == 20_000);
    assert_eq!(p.b_read, pattern(20_000));
    p.run_for(1_000 * MS);
    // Everything acknowledged: the idle release frees the send ring's storage.
    assert!(p.a.buffer_allocated_bytes() > 0);
    let released = p.a.release_idle_buffers();
    assert!(released > 0, "the send ring's storage went back");
    assert_eq!(p.a.invariant_violation(), None);
    assert_eq!(p.a.buffer_allocated_bytes(), 0);
    // A write takes storage again.
    p.a_to_send = pattern(3_000);
    step_checked(&mut p, 100_000, |p| p.b_read.len() == 23_000);
    assert_eq!(p.b_read.len(), 23_000);
}
