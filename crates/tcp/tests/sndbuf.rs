//! Linux's skb-granular send-buffer accounting (`Config::send_buffer_skb_accounting`,
//! `send_buffer_autotune`, `tso_min_segments`; `connection/sndbuf.rs`): each test is seen to
//! fail with its option off.

mod harness;

use harness::{MS, Pair, pattern};
use tcp::{Config, SKB_OVERHEAD_BYTES};

/// No timestamps (a 1460-byte payload per segment), skb accounting on.
fn linux(send_buffer_bytes: u32) -> Config {
    Config {
        timestamps: false,
        send_buffer_bytes,
        send_buffer_skb_accounting: true,
        send_buffer_autotune: false,
        ..Config::default()
    }
}

fn peer() -> Config {
    Config {
        timestamps: false,
        ..Config::default()
    }
}

/// The smallest `sk_sndbuf` Linux allows (`SOCK_MIN_SNDBUF`).
const SNDBUF_MIN_BYTES: u32 = 4608;
/// The size goal: whole segments up to half the largest window the peer offered — its
/// SYN-ACK's, unscaled, 65535 (no ACK has carried a larger one yet).
const SIZE_GOAL_BYTES: usize = 22 * 1460;
/// The initial window: 10 segments.
const IW_BYTES: usize = 10 * 1460;

#[test]
fn skb_accounting_admits_whole_skbs_past_the_buffer_and_charges_each_packet() {
    let mut p = Pair::established(linux(SNDBUF_MIN_BYTES), peer(), 5 * MS);
    // A new skb only while the charge is below the buffer: the first skb fills to the size
    // goal; as it fills, the segments the initial window lets go leave one packet at a time
    // and the rest fills again; then the charge stops a second skb.
    let n = p.a.send(&pattern(200_000)).unwrap();
    assert_eq!(n, IW_BYTES + SIZE_GOAL_BYTES);
    // Packets of two segments (1 ms of 2·cwnd per 10 ms RTT is one segment; the floor is
    // two): five packets, each an skb, and the unsent tail.
    assert_eq!(
        p.a.send_queue_charge_bytes(),
        (n as u64) + 6 * u64::from(SKB_OVERHEAD_BYTES)
    );
    assert!(!p.a.send_writable(u32::MAX));
    // Without skb accounting the buffer holds its size in payload.
    let mut q = Pair::established(
        Config {
            send_buffer_skb_accounting: false,
            ..linux(SNDBUF_MIN_BYTES)
        },
        peer(),
        5 * MS,
    );
    assert_eq!(
        q.a.send(&pattern(200_000)).unwrap(),
        1460.max(SNDBUF_MIN_BYTES as usize)
    );
}

#[test]
fn skb_accounting_wakes_the_writer_once_when_half_the_charge_is_free() {
    let mut p = Pair::established(linux(SNDBUF_MIN_BYTES), peer(), 5 * MS);
    let n = p.a.send(&pattern(200_000)).unwrap();
    assert!(n < 200_000);
    p.a_events.clear();
    p.run_for(2_000 * MS);
    // Everything was acknowledged: the charge is gone, one wake-up was given (not one per
    // ACK, as without skb accounting).
    assert_eq!(p.a.send_queue_charge_bytes(), 0);
    assert!(p.a.send_writable(u32::MAX));
    let wakes = p
        .a_events
        .iter()
        .filter(|e| **e == tcp::Event::Writable)
        .count();
    assert_eq!(wakes, 1);
}

#[test]
fn tso_min_segments_sizes_the_packets_a_write_is_charged_for() {
    let mut p = Pair::established(
        Config {
            tso_min_segments: 10,
            ..linux(SNDBUF_MIN_BYTES)
        },
        peer(),
        5 * MS,
    );
    let n = p.a.send(&pattern(200_000)).unwrap();
    assert_eq!(n, IW_BYTES + SIZE_GOAL_BYTES);
    // Ten segments per packet: half the window, twice (`tcp_cwnd_test`'s half-cwnd quota).
    assert_eq!(
        p.a.send_queue_charge_bytes(),
        (n as u64) + 3 * u64::from(SKB_OVERHEAD_BYTES)
    );
}

#[test]
fn send_buffer_autotune_sizes_the_buffer_for_twice_the_initial_window_of_skbs() {
    let tuned = Pair::established(
        Config {
            send_buffer_autotune: true,
            ..linux(SNDBUF_MIN_BYTES)
        },
        peer(),
        5 * MS,
    );
    // Linux `tcp_sndbuf_expand`: 2 × 10 segments × (4096-byte head for 1460 + 640 bytes of
    // headers and shared info, plus the 256-byte `struct sk_buff`).
    assert_eq!(tuned.a.config().send_buffer_bytes, 2 * 10 * (4096 + 256));
    let fixed = Pair::established(linux(SNDBUF_MIN_BYTES), peer(), 5 * MS);
    assert_eq!(fixed.a.config().send_buffer_bytes, SNDBUF_MIN_BYTES);
}

#[test]
fn an_application_send_buffer_stops_autotuning() {
    let mut p = Pair::established(
        Config {
            send_buffer_autotune: true,
            ..linux(SNDBUF_MIN_BYTES)
        },
        peer(),
        5 * MS,
    );
    p.a.set_send_buffer_by_application(SNDBUF_MIN_BYTES);
    assert!(!p.a.config().send_buffer_autotune);
    let n = p.a.send(&pattern(200_000)).unwrap();
    p.run_for(2_000 * MS);
    assert!(n < 200_000);
    assert_eq!(p.a.config().send_buffer_bytes, SNDBUF_MIN_BYTES);
}
