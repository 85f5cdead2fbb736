//! Orderly, simultaneous and half close; TIME-WAIT; FINs around holes.

use super::*;

// ---------------------------------------------------------------- close

#[test]
fn orderly_close_passes_through_time_wait_on_the_active_closer() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.a.shutdown_write().unwrap();
    p.run_until(|p| p.b.state() == State::CloseWait, 100 * MS);
    assert!(p.b_events.contains(&Event::PeerClosed));
    assert_eq!(p.b.recv(&mut [0u8; 10]), Err(Error::Finished));
    p.b.shutdown_write().unwrap();
    p.run_until(|p| p.b.state() == State::Closed, 100 * MS);
    assert_eq!(p.a.state(), State::TimeWait);
    assert_eq!(p.b.close_reason(), Some(CloseReason::Normal));
}

#[test]
fn time_wait_lasts_2msl() {
    let c = Config {
        time_wait_ns: 7_000 * MS,
        ..cfg()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.shutdown_write().unwrap();
    p.b.shutdown_write().unwrap();
    p.run_until(|p| p.a.state() == State::TimeWait, 100 * MS);
    let entered = p.now;
    p.run_until(|p| p.a.state() == State::Closed, 10_000 * MS);
    assert_eq!(p.now - entered, 7_000 * MS);
    assert!(p.a_events.contains(&Event::Closed));
}

#[test]
fn simultaneous_close_goes_through_closing_to_time_wait() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.a.shutdown_write().unwrap();
    p.b.shutdown_write().unwrap();
    let mut saw_closing = false;
    p.run_until(
        |p| {
            saw_closing |= p.a.state() == State::Closing;
            p.a.state() == State::TimeWait && p.b.state() == State::TimeWait
        },
        100 * MS,
    );
    assert!(saw_closing, "FINs crossed, so A passed through CLOSING");
}

#[test]
fn half_close_keeps_receiving() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.a.shutdown_write().unwrap();
    p.run_until(|p| p.a.state() == State::FinWait2, 100 * MS);
    let data = pattern(50_000);
    p.b_to_send = data.clone();
    p.run_until(|p| p.a_read.len() == data.len(), 5_000 * MS);
    assert_same(&p.a_read, &data);
    assert_eq!(p.a.state(), State::FinWait2);
    assert_eq!(p.a.send(b"more"), Err(Error::InvalidState));
}

/// B sends `len` bytes and its FIN while its data segment number `late` is held back
/// `extra_ns` on the link, so what follows it (the FIN included) reaches A first.
fn fin_overtakes_a_late_segment(len: usize, late: usize, extra_ns: u64) -> (Pair, Vec<u8>) {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.filter = Box::new(move |c, s| {
        if c.dir == Dir::BtoA && s.is_data() && c.data_index == late {
            Verdict::DelayExtra(extra_ns)
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(len);
    p.b.send(&data).unwrap();
    p.b.shutdown_write().unwrap();
    (p, data)
}

#[test]
fn fin_on_out_of_order_segment_is_processed_when_the_hole_fills() {
    // RFC 9293 §3.10.7.4 processes segments in sequence order: the FIN on a segment that
    // arrives beyond a hole takes effect as soon as the data before it arrives.
    let (mut p, data) = fin_overtakes_a_late_segment(2_000, 0, 2 * MS);
    p.run_until(|p| p.a.ooo_bytes() > 0, 100 * MS);
    assert_eq!(
        p.a.state(),
        State::Established,
        "the FIN waits for the hole"
    );
    p.run_until(|p| p.a_read.len() == data.len(), 100 * MS);
    assert_same(&p.a_read, &data);
    assert_eq!(
        p.a.state(),
        State::CloseWait,
        "the FIN took effect with the hole"
    );
    assert!(p.a_events.contains(&Event::PeerClosed));
    assert_eq!(p.a.recv(&mut [0u8; 10]), Err(Error::Finished));
    // A's ACK covers the FIN: B never sends it again.
    p.run_until(|p| p.b.state() == State::FinWait2, 100 * MS);
    let fins = p.sent(Dir::BtoA).filter(|e| e.2.has(TcpFlags::FIN)).count();
    assert_eq!(fins, 1);
    assert_eq!(p.b.counters().retransmitted_segments, 0);
}

#[test]
fn bare_fin_beyond_a_hole_is_processed_when_the_hole_fills() {
    // Everything is sent before the FIN (Nagle has nothing in flight to wait for), so the FIN
    // leaves alone, overtakes the delayed data and arrives with nothing to queue it with.
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::BtoA && s.is_data() {
            Verdict::DelayExtra(2 * MS)
        } else {
            Verdict::Pass
        }
    });
    p.b.send(b"last words").unwrap();
    p.flush();
    p.b.shutdown_write().unwrap();
    p.flush();
    let bare_fin = p
        .sent(Dir::BtoA)
        .any(|e| e.2.has(TcpFlags::FIN) && !e.2.is_data());
    assert!(bare_fin, "the FIN left on its own segment");
    p.run_until(|p| p.a_read.len() == 10, 100 * MS);
    assert_eq!(p.a_read, b"last words");
    assert_eq!(p.a.state(), State::CloseWait);
    p.run_until(|p| p.b.state() == State::FinWait2, 100 * MS);
    assert_eq!(p.b.counters().retransmitted_segments, 0);
}
