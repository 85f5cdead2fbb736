//! Minshall's variant of the Nagle algorithm (`Config::nagle_minshall`, Linux
//! `tcp_nagle_check`/`tcp_minshall_check`) against RFC 9293 §3.7.4's rule, which stays the
//! default: two engines over a virtual link, each test one conversation.

mod harness;

use harness::{Dir, MS, Pair};
use tcp::Config;

fn rfc_nagle() -> Config {
    Config {
        timestamps: false,
        recv_buffer_bytes: 65535,
        ..Config::default()
    }
}

fn minshall() -> Config {
    Config {
        nagle_minshall: true,
        ..rfc_nagle()
    }
}

/// Payload lengths of the data segments A sent, in order.
fn data_lens_a(p: &Pair) -> Vec<usize> {
    p.sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| e.2.payload.len())
        .collect()
}

/// A writes two full segments and 100 bytes more at once; what leaves before any ACK.
fn write_with_short_tail(a: Config) -> (Vec<usize>, usize) {
    let mut p = Pair::established(a, rfc_nagle(), 5 * MS);
    let mss = usize::from(p.a.eff_mss());
    assert_eq!(p.a.send(&vec![7; 2 * mss + 100]), Ok(2 * mss + 100));
    p.flush();
    (data_lens_a(&p), mss)
}

#[test]
fn minshall_nagle_sends_a_writes_short_tail_behind_its_full_segments() {
    let (sent, mss) = write_with_short_tail(minshall());
    assert_eq!(sent, [mss, mss, 100], "the tail follows its full segments");
    // RFC 9293's rule holds the tail while the full segments are unacknowledged.
    let (sent, mss) = write_with_short_tail(rfc_nagle());
    assert_eq!(sent, [mss, mss], "the tail waits for an ACK");
}

#[test]
fn minshall_nagle_holds_a_short_segment_while_an_earlier_short_one_is_unacknowledged() {
    let mut p = Pair::established(minshall(), rfc_nagle(), 5 * MS);
    p.a.send(b"first").unwrap();
    p.flush();
    p.a.send(b"second").unwrap();
    p.flush();
    assert_eq!(data_lens_a(&p), [5], "one short segment in flight at most");
    p.run_until(|p| p.b_read.len() == 11, 500 * MS);
    let times: Vec<u64> = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| e.0)
        .collect();
    // The second leaves when the (delayed) ACK of the first arrives: 5 + 40 + 5 ms later.
    assert_eq!(times[1] - times[0], 50 * MS);
}

#[test]
fn minshall_nagle_lets_a_short_segment_follow_once_the_earlier_one_is_acknowledged() {
    // A short segment acknowledged, then full segments in flight: a new short tail goes at
    // once (RFC 9293's rule would hold it behind the full segments).
    let mut p = Pair::established(minshall(), rfc_nagle(), 5 * MS);
    let mss = usize::from(p.a.eff_mss());
    p.a.send(b"first").unwrap();
    p.run_until(|p| p.b_read.len() == 5, 500 * MS);
    p.run_for(100 * MS);
    p.log.clear();
    p.a.send(&vec![1; mss + 10]).unwrap();
    p.flush();
    assert_eq!(data_lens_a(&p), [mss, 10]);
}

#[test]
fn minshall_nagle_holds_the_short_tail_of_a_write_that_did_not_fit() {
    // A write larger than the send buffer: the application waits for room, and what the
    // buffer took ends short of a segment. Linux would have queued whole segments only, so
    // the short bytes wait as under RFC 9293's rule until the write is taken whole.
    let mss = usize::from(
        Pair::established(minshall(), rfc_nagle(), 5 * MS)
            .a
            .eff_mss(),
    );
    let a = Config {
        send_buffer_bytes: (3 * mss + 200) as u32,
        ..minshall()
    };
    let mut p = Pair::established(a, rfc_nagle(), 5 * MS);
    // Segments arrive 1.2 ms apart: B acknowledges the first two before the third arrives.
    p.link_rate_bps = Some(10_000_000);
    assert_eq!(p.a.send(&vec![2; 4 * mss]), Ok(3 * mss + 200));
    p.flush();
    assert_eq!(data_lens_a(&p), [mss, mss, mss], "the 200-byte tail waits");
    // The ACK of the first two segments makes room; the application writes 50 bytes more,
    // taken whole: the 250-byte tail is a write's end again and leaves at once, though the
    // third full segment is still unacknowledged.
    p.run_until(|p| p.a.send_queue_bytes() <= mss + 200, 500 * MS);
    let (una, nxt, _) = p.a.sequence_state();
    assert_eq!(nxt.diff(una), mss as i32, "the third segment is in flight");
    assert_eq!(p.a.send(&[3; 50]), Ok(50));
    p.flush();
    assert_eq!(data_lens_a(&p), [mss, mss, mss, 250]);
}
