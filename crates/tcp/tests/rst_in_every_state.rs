//! RST acceptance (RFC 9293 §3.10.7.4 with RFC 5961 §3.2) in every synchronized state a
//! connection can be reset in besides ESTABLISHED: SYN-RECEIVED, FIN-WAIT-1, FIN-WAIT-2,
//! CLOSE-WAIT, CLOSING and LAST-ACK. In each, an RST at exactly RCV.NXT resets the
//! connection, one elsewhere in the window draws a challenge ACK and changes nothing, and one
//! outside the window is dropped silently.

mod harness;

use harness::{MS, Pair, Verdict, seg};
use tcp::{CloseReason, Config, Connection, State};
use wire::tcp::{SeqNumber, TcpFlags};

fn no_ts() -> Config {
    Config {
        timestamps: false,
        ..Config::default()
    }
}

/// An established pair whose link then drops everything, so that only the segments a test
/// hands to A directly reach it.
fn isolated() -> Pair {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    p.filter = Box::new(|_, _| Verdict::Drop);
    p
}

/// A segment from B (port 80) to A (port 1000).
fn from_b(p: &mut Pair, seq: SeqNumber, flags: TcpFlags) {
    let (snd_una, _, _) = p.a.sequence_state();
    let s = seg(80, 1000, seq, snd_una, flags);
    let now = p.now;
    p.a.handle_segment(now, &s.repr());
    p.flush();
}

fn fin_wait_1() -> Pair {
    let mut p = isolated();
    p.a.shutdown_write().unwrap();
    p.flush();
    assert_eq!(p.a.state(), State::FinWait1);
    p
}

fn fin_wait_2() -> Pair {
    let mut p = fin_wait_1();
    let (_, snd_nxt, rcv_nxt) = p.a.sequence_state();
    let ack = seg(80, 1000, rcv_nxt, snd_nxt, TcpFlags::ACK);
    let now = p.now;
    p.a.handle_segment(now, &ack.repr());
    p.flush();
    assert_eq!(p.a.state(), State::FinWait2);
    p
}

fn close_wait() -> Pair {
    let mut p = isolated();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    from_b(&mut p, rcv_nxt, TcpFlags::FIN | TcpFlags::ACK);
    assert_eq!(p.a.state(), State::CloseWait);
    p
}

fn closing() -> Pair {
    let mut p = fin_wait_1();
    // B's FIN crosses ours: it does not acknowledge it.
    let (_, _, rcv_nxt) = p.a.sequence_state();
    from_b(&mut p, rcv_nxt, TcpFlags::FIN | TcpFlags::ACK);
    assert_eq!(p.a.state(), State::Closing);
    p
}

fn last_ack() -> Pair {
    let mut p = close_wait();
    p.a.shutdown_write().unwrap();
    p.flush();
    assert_eq!(p.a.state(), State::LastAck);
    p
}

/// Checks the three RST cases on fresh connections from `make`, in `state`.
fn rst_rules(make: fn() -> Pair, state: State) {
    // Exactly at RCV.NXT: reset.
    let mut p = make();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    from_b(&mut p, rcv_nxt, TcpFlags::RST);
    assert_eq!(p.a.state(), State::Closed, "{state:?}: exact RST");
    assert_eq!(p.a.close_reason(), Some(CloseReason::Reset), "{state:?}");

    // In the window but not at RCV.NXT: a challenge ACK, nothing else.
    let mut p = make();
    let (_, snd_nxt, rcv_nxt) = p.a.sequence_state();
    let challenges = p.a.counters().challenge_acks_sent;
    p.log.clear();
    from_b(&mut p, rcv_nxt + 1, TcpFlags::RST);
    assert_eq!(
        p.a.state(),
        state,
        "{state:?}: in-window RST changed the state"
    );
    assert_eq!(
        p.a.counters().challenge_acks_sent,
        challenges + 1,
        "{state:?}"
    );
    let ack = &p.log.last().expect("challenge ACK sent").2;
    assert!(
        ack.has(TcpFlags::ACK) && !ack.has(TcpFlags::RST),
        "{state:?}"
    );
    assert_eq!(ack.hdr.ack_number, rcv_nxt, "{state:?}");
    assert_eq!(ack.seq(), snd_nxt, "{state:?}");

    // Outside the window: dropped without an answer.
    let mut p = make();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    let dropped = p.a.counters().rx_drop_out_of_window;
    p.log.clear();
    from_b(&mut p, rcv_nxt + 50_000_000, TcpFlags::RST);
    assert_eq!(
        p.a.state(),
        state,
        "{state:?}: out-of-window RST changed the state"
    );
    assert_eq!(
        p.a.counters().rx_drop_out_of_window,
        dropped + 1,
        "{state:?}"
    );
    assert!(p.log.is_empty(), "{state:?}: answered an out-of-window RST");
}

#[test]
fn rst_in_fin_wait_1_resets_only_at_rcv_nxt() {
    rst_rules(fin_wait_1, State::FinWait1);
}

#[test]
fn rst_in_fin_wait_2_resets_only_at_rcv_nxt() {
    rst_rules(fin_wait_2, State::FinWait2);
}

#[test]
fn rst_in_close_wait_resets_only_at_rcv_nxt() {
    rst_rules(close_wait, State::CloseWait);
}

#[test]
fn rst_in_closing_resets_only_at_rcv_nxt() {
    rst_rules(closing, State::Closing);
}

#[test]
fn rst_in_last_ack_resets_only_at_rcv_nxt() {
    rst_rules(last_ack, State::LastAck);
}

/// A passive connection in SYN-RECEIVED (its SYN-ACK sent, unanswered).
fn syn_received() -> (Connection, SeqNumber) {
    let mut syn = seg(5, 80, SeqNumber(1000), SeqNumber(0), TcpFlags::SYN);
    syn.hdr.max_seg_size = Some(1460);
    let mut b = Connection::accept(0, &no_ts(), &syn.repr(), SeqNumber(50_000), 0).unwrap();
    let mut buf = [0u8; 100];
    let synack = b.poll_transmit(0, &mut buf).unwrap();
    assert!(synack.flags.contains(TcpFlags::SYN | TcpFlags::ACK));
    assert_eq!(b.state(), State::SynReceived);
    (b, SeqNumber(1001))
}

#[test]
fn rst_in_syn_received_resets_only_at_rcv_nxt() {
    let mut buf = [0u8; 100];
    // Exactly at RCV.NXT: the embryonic connection goes.
    let (mut b, rcv_nxt) = syn_received();
    b.handle_segment(MS, &seg(5, 80, rcv_nxt, SeqNumber(0), TcpFlags::RST).repr());
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.close_reason(), Some(CloseReason::Reset));
    assert!(
        b.poll_transmit(MS, &mut buf).is_none(),
        "an RST is never answered"
    );

    // In the window but not at RCV.NXT: a challenge ACK.
    let (mut b, rcv_nxt) = syn_received();
    b.handle_segment(
        MS,
        &seg(5, 80, rcv_nxt + 10, SeqNumber(0), TcpFlags::RST).repr(),
    );
    assert_eq!(b.state(), State::SynReceived);
    assert_eq!(b.counters().challenge_acks_sent, 1);
    let ack = b.poll_transmit(MS, &mut buf).expect("challenge ACK");
    assert!(ack.flags.contains(TcpFlags::ACK) && !ack.flags.contains(TcpFlags::RST));
    assert_eq!(ack.ack_number, rcv_nxt);

    // Outside the window: dropped.
    let (mut b, rcv_nxt) = syn_received();
    b.handle_segment(
        MS,
        &seg(5, 80, rcv_nxt + 50_000_000, SeqNumber(0), TcpFlags::RST).repr(),
    );
    assert_eq!(b.state(), State::SynReceived);
    assert_eq!(b.counters().rx_drop_out_of_window, 1);
    assert!(b.poll_transmit(MS, &mut buf).is_none());
}
