//! The counters' two stores (issue 17 item 2): the ones every segment bumps inline in the
//! TCB, the rare ones in a box that only a rare event allocates. What `counters()` reports is
//! the same either way.

mod harness;

use harness::{MS, Pair, Verdict, pattern};
use tcp::Config;

/// A bulk transfer and its close over a clean link count only inline counters: neither end
/// ever boxes the rare ones.
#[test]
fn a_connection_that_loses_nothing_never_boxes_its_rare_counters() {
    let mut p = Pair::established(Config::default(), Config::default(), 5 * MS);
    assert_eq!(p.a.counters_heap_bytes(), 0);
    assert_eq!(p.b.counters_heap_bytes(), 0);
    let data = pattern(200_000);
    p.a_to_send = data.clone();
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == data.len(), 10_000 * MS);
    assert_eq!(p.b_read, data);
    let (a, b) = (p.a.counters(), p.b.counters());
    assert_eq!(a.tx_payload_bytes, data.len() as u64);
    assert_eq!(b.rx_payload_bytes, data.len() as u64);
    assert!(a.tx_segments > 0 && b.rx_segments > 0 && a.rtt_samples > 0);
    assert_eq!(p.a.counters_heap_bytes(), 0, "{a:?}");
    assert_eq!(p.b.counters_heap_bytes(), 0, "{b:?}");
}

/// A loss counts rare events: the box appears, and `counters()` shows them beside the
/// inline ones.
#[test]
fn a_retransmission_boxes_the_rare_counters_and_counters_shows_them() {
    let mut dropped = false;
    let mut p = Pair::established(Config::default(), Config::default(), 5 * MS);
    p.filter = Box::new(move |_, s| {
        if s.is_data() && !dropped {
            dropped = true;
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(50_000);
    p.a_to_send = data.clone();
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == data.len(), 10_000 * MS);
    assert_eq!(p.b_read, data);
    let a = p.a.counters();
    assert!(a.retransmitted_segments >= 1, "{a:?}");
    assert!(
        a.tx_payload_bytes > data.len() as u64,
        "retransmitted bytes count too"
    );
    assert_eq!(
        p.a.counters_heap_bytes(),
        core::mem::size_of::<tcp::Counters>()
    );
}
