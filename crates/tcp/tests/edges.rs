//! Rules at the edges of the sequence, timestamp and window spaces, each checked on what the
//! connection does: the TS.Recent update rule and the timestamp clock's wrap-around
//! (RFC 7323 §4.3, §5.3), PAWS not applying to RST, a window that rounds to zero under
//! scaling and then reopens (RFC 7323 §2.3), a SYN-ACK's window scale ignored when our SYN
//! offered none (§2.2), partially overlapping segments delivered once and in order, and data
//! arriving after `close` (RFC 1122 §4.2.2.13); a simultaneous open's duplicate SYN reported as a
//! D-SACK (RFC 2883 §4).

mod harness;

use harness::{Dir, MS, Pair, Seg, Verdict, pattern, seg};
use tcp::{CloseReason, Config, Connection, State};
use wire::tcp::{SeqNumber, TcpFlags, TcpTimestamp};

fn no_ts() -> Config {
    Config {
        timestamps: false,
        ..Config::default()
    }
}

/// An established pair (timestamps per `config`) whose link then drops everything: only the
/// segments a test hands to A reach it, and everything A sends stays in `p.log`.
fn isolated(config: Config) -> Pair {
    let mut p = Pair::established(config, config, 5 * MS);
    p.filter = Box::new(|_, _| Verdict::Drop);
    p
}

/// Hands A a segment from B at `seq` (relative to nothing: absolute) with `payload`, the
/// timestamp `tsval` (echoing A's latest), acknowledging what A sent.
fn to_a(p: &mut Pair, seq: SeqNumber, flags: TcpFlags, payload: &[u8], tsval: Option<u32>) {
    let (snd_una, _, _) = p.a.sequence_state();
    let mut s = seg(80, 1000, seq, snd_una, flags);
    s.payload = payload.to_vec();
    s.hdr.timestamp = tsval.map(|tsval| TcpTimestamp {
        tsval,
        tsecr: last_tsval_from_a(p),
    });
    let now = p.now;
    p.a.handle_segment(now, &s.repr());
    p.flush();
}

fn last_tsval_from_a(p: &Pair) -> u32 {
    p.sent(Dir::AtoB)
        .filter_map(|e| e.2.hdr.timestamp.map(|t| t.tsval))
        .last()
        .unwrap_or(0)
}

/// The last segment A sent.
fn last_from_a(p: &Pair) -> &Seg {
    &p.sent(Dir::AtoB).last().expect("A sent something").2
}

/// The TSecr of the last segment A sent.
fn last_echo_from_a(p: &Pair) -> u32 {
    last_from_a(p).hdr.timestamp.expect("TSopt").tsecr
}

/// A pair with timestamps, isolated, with A's TS.Recent known (the TSval of B's data segment)
/// and acknowledged.
fn with_ts_recent() -> (Pair, u32) {
    let mut p = Pair::established(Config::default(), Config::default(), 5 * MS);
    p.b_to_send = b"hello".to_vec();
    p.run_until(|p| p.a_read.len() == 5, 100 * MS);
    // A's (delayed) ACK of it leaves: Last.ACK.sent is RCV.NXT again.
    p.run_for(500 * MS);
    let t0 = p
        .sent(Dir::BtoA)
        .filter(|e| e.2.is_data())
        .last()
        .and_then(|e| e.2.hdr.timestamp)
        .expect("B's data carries TSopt")
        .tsval;
    p.filter = Box::new(|_, _| Verdict::Drop);
    p.log.clear();
    (p, t0)
}

#[test]
fn ts_recent_is_updated_only_by_segments_at_the_left_edge() {
    let (mut p, t0) = with_ts_recent();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    // Out of order (past a hole) with a newer TSval: acknowledged at once, echoing the old
    // TS.Recent (RFC 7323 §4.3 (2): the segment is not at Last.ACK.sent).
    to_a(
        &mut p,
        rcv_nxt + 100,
        TcpFlags::ACK,
        &[7; 50],
        Some(t0 + 1000),
    );
    assert_eq!(
        last_echo_from_a(&p),
        t0,
        "an out-of-order segment moved TS.Recent"
    );
    // The hole filled, with a TSval between the two: this one is at the left edge.
    to_a(&mut p, rcv_nxt, TcpFlags::ACK, &[7; 100], Some(t0 + 500));
    p.run_for(500 * MS);
    assert_eq!(last_echo_from_a(&p), t0 + 500);
    assert_eq!(p.a_read.len(), 5 + 150);
}

#[test]
fn timestamps_across_the_wrap_of_the_32_bit_clock_are_newer_not_old() {
    let (mut p, t0) = with_ts_recent();
    let mut tsval = t0;
    // Three jumps of 0x5555_5000 (each less than 2^31 ahead) go round the clock to 4,096
    // ticks short of where they started: numerically smaller, yet newer at every step.
    for k in 0..3u8 {
        tsval = tsval.wrapping_add(0x5555_5000);
        let (_, _, rcv_nxt) = p.a.sequence_state();
        to_a(
            &mut p,
            rcv_nxt,
            TcpFlags::ACK | TcpFlags::PSH,
            &[k; 10],
            Some(tsval),
        );
        p.run_for(300 * MS);
        assert_eq!(last_echo_from_a(&p), tsval, "jump {k}");
    }
    assert_eq!(tsval, t0 - 4096, "the clock wrapped");
    assert_eq!(p.a.counters().rx_drop_paws, 0);
    assert_eq!(p.a_read.len(), 5 + 30);
    // Just before the wrapped TS.Recent is old: PAWS drops it.
    let (_, _, rcv_nxt) = p.a.sequence_state();
    to_a(
        &mut p,
        rcv_nxt,
        TcpFlags::ACK,
        &[9; 10],
        Some(tsval.wrapping_sub(1)),
    );
    assert_eq!(p.a.counters().rx_drop_paws, 1);
    assert_eq!(p.a_read.len(), 5 + 30);
}

#[test]
fn paws_does_not_apply_to_rst() {
    let (mut p, t0) = with_ts_recent();
    let (_, _, rcv_nxt) = p.a.sequence_state();
    // Data with an old TSval is dropped by PAWS ...
    to_a(&mut p, rcv_nxt, TcpFlags::ACK, &[1; 10], Some(t0 - 1000));
    assert_eq!(p.a.counters().rx_drop_paws, 1);
    // ... an RST with the same old TSval is judged on its sequence number alone
    // (RFC 7323 §5.3 R1: "and if the RST bit is not set").
    to_a(&mut p, rcv_nxt, TcpFlags::RST, &[], Some(t0 - 1000));
    assert_eq!(p.a.state(), State::Closed);
    assert_eq!(p.a.close_reason(), Some(CloseReason::Reset));
}

#[test]
fn a_window_that_rounds_to_zero_under_scaling_is_advertised_as_zero_then_reopens() {
    // 300,000 bytes of buffer: window scale 3, the window field counts 8-byte units.
    let config = Config {
        recv_buffer_bytes: 300_000,
        ..no_ts()
    };
    let mut p = isolated(config);
    assert_eq!(p.a.negotiated().rcv_wscale, 3);
    p.a_auto_read = false;
    let (_, _, start) = p.a.sequence_state();
    // Fill the buffer to 5 bytes short: less than one unit of the scaled window is free.
    let data = pattern(300_000 - 5);
    for (k, chunk) in data.chunks(1460).enumerate() {
        to_a(
            &mut p,
            start + (k * 1460) as u32,
            TcpFlags::ACK,
            chunk,
            None,
        );
    }
    p.run_for(500 * MS);
    assert_eq!(p.a.recv_queue_bytes(), data.len());
    let last = last_from_a(&p).clone();
    assert_eq!(last.hdr.ack_number, start + data.len() as u32);
    assert_eq!(
        last.hdr.window_len, 0,
        "5 free bytes advertised as a whole 8-byte unit"
    );
    // The application reads: A announces the reopened window without waiting for a probe.
    p.log.clear();
    let mut buf = vec![0u8; 100_000];
    assert_eq!(p.a.recv(&mut buf), Ok(100_000));
    assert_eq!(&buf[..], &data[..100_000]);
    p.flush();
    let update = last_from_a(&p);
    assert!(u32::from(update.hdr.window_len) << 3 >= 100_000 - 8);
    // And data in the reopened window is taken.
    let end = start + data.len() as u32;
    to_a(&mut p, end, TcpFlags::ACK, &[0xab; 1000], None);
    assert_eq!(p.a.recv_queue_bytes(), data.len() - 100_000 + 1000);
}

#[test]
fn a_syn_ack_with_window_scale_is_not_scaled_when_our_syn_offered_none() {
    let config = Config {
        window_scale: false,
        nodelay: true,
        ..no_ts()
    };
    let mut a = Connection::connect(0, &config, 1000, 80, SeqNumber(100), 0);
    let mut buf = vec![0u8; 65536];
    let syn = a.poll_transmit(0, &mut buf).expect("SYN");
    assert_eq!(syn.window_scale, None);
    let mut synack = seg(
        80,
        1000,
        SeqNumber(5000),
        SeqNumber(101),
        TcpFlags::SYN | TcpFlags::ACK,
    );
    synack.hdr.window_scale = Some(7);
    synack.hdr.max_seg_size = Some(1000);
    synack.hdr.window_len = 2000;
    a.handle_segment(MS, &synack.repr());
    assert_eq!(a.state(), State::Established);
    let n = a.negotiated();
    assert_eq!((n.snd_wscale, n.rcv_wscale), (0, 0));
    // The peer's 2,000 is bytes, not 2,000 << 7: A sends two segments, not its initial
    // window of ten.
    assert_eq!(a.send(&[0x11; 20_000]), Ok(20_000));
    let mut sent = 0;
    while let Some(s) = a.poll_transmit(MS, &mut buf) {
        assert_eq!(s.window_scale, None);
        sent += s.payload.len();
    }
    assert_eq!(sent, 2000);
}

#[test]
fn partially_overlapping_segments_deliver_every_byte_once_in_order() {
    let mut p = isolated(no_ts());
    let (_, _, start) = p.a.sequence_state();
    let data = pattern(4_000);
    // In order with overlaps, then out of order overlapping what is queued, then the piece
    // that joins them, then an old piece straddling RCV.NXT again.
    for (from, to) in [
        (0, 1000),
        (500, 1500),
        (1400, 2000),
        (3000, 4000),
        (2500, 3500),
        (2800, 3100),
        (1900, 2600),
        (3900, 4000),
    ] {
        to_a(
            &mut p,
            start + from as u32,
            TcpFlags::ACK,
            &data[from..to],
            None,
        );
    }
    p.run_for(500 * MS);
    assert_eq!(p.a_read.len(), data.len());
    assert!(p.a_read == data, "delivered bytes differ from the stream");
    let (_, _, rcv_nxt) = p.a.sequence_state();
    assert_eq!(rcv_nxt, start + 4000);
}

/// A closes (its FIN is lost on the isolated link: FIN-WAIT-1), then B's new data arrives;
/// returns the pair and A's SND.UNA when the data came.
fn data_after_close(config: Config) -> (Pair, SeqNumber) {
    let mut p = isolated(config);
    p.a.close().unwrap();
    p.flush();
    let (snd_una, _, rcv_nxt) = p.a.sequence_state();
    to_a(
        &mut p,
        rcv_nxt,
        TcpFlags::ACK | TcpFlags::PSH,
        &pattern(100),
        None,
    );
    (p, snd_una)
}

#[test]
fn data_after_close_is_acknowledged_and_discarded_by_default() {
    let (p, _) = data_after_close(no_ts());
    let last = last_from_a(&p);
    assert_eq!(p.a.state(), State::FinWait1);
    assert!(!last.has(TcpFlags::RST), "got {:?}", last.hdr.flags);
}

#[test]
fn reset_on_data_after_close_answers_with_a_rst_at_the_segments_ack() {
    // RFC 1122 §4.2.2.13; Linux `tcp_rcv_state_process` ("abort on data"): `> R 1:1(0)`.
    let config = Config {
        reset_on_data_after_close: true,
        ..no_ts()
    };
    let (p, snd_una) = data_after_close(config);
    let last = last_from_a(&p);
    assert!(last.has(TcpFlags::RST) && !last.has(TcpFlags::ACK));
    assert_eq!(
        last.seq(),
        snd_una,
        "the RST takes the segment's acknowledgment"
    );
    assert_eq!(p.a.state(), State::Closed);
    assert_eq!(p.a.close_reason(), Some(CloseReason::Aborted));
    assert_eq!(p.a.counters().rx_discard_after_close_bytes, 100);
}

#[test]
fn duplicate_syn_of_a_simultaneous_open_is_acknowledged_with_a_dsack() {
    // The peer's SYN-ACK repeats the SYN that took us to SYN-RECEIVED: RFC 2883 §4 reports
    // the duplicate octet in a D-SACK block (`fastopen/client/simultaneous-fast-open`).
    let c = no_ts();
    let mut a = Connection::connect(0, &c, 1000, 2000, SeqNumber(100), 0);
    let mut b = Connection::connect(0, &c, 2000, 1000, SeqNumber(9000), 0);
    let mut buf = [0u8; 2000];
    let syn_a = Seg::from_repr(&a.poll_transmit(0, &mut buf).unwrap());
    let syn_b = Seg::from_repr(&b.poll_transmit(0, &mut buf).unwrap());
    a.handle_segment(MS, &syn_b.repr());
    b.handle_segment(MS, &syn_a.repr());
    let synack_b = Seg::from_repr(&b.poll_transmit(MS, &mut buf).unwrap());
    let _synack_a = a.poll_transmit(MS, &mut buf).unwrap();
    a.handle_segment(2 * MS, &synack_b.repr());
    assert_eq!(a.state(), State::Established);
    let ack = Seg::from_repr(&a.poll_transmit(2 * MS, &mut buf).expect("an ACK"));
    assert!(ack.has(TcpFlags::ACK) && !ack.has(TcpFlags::SYN) && !ack.is_data());
    assert_eq!(ack.hdr.ack_number, SeqNumber(9001));
    let block = ack.hdr.sack_blocks[0].expect("a D-SACK block");
    assert_eq!(
        (block.left, block.right),
        (SeqNumber(9000), SeqNumber(9001))
    );
    // Without SACK there is nothing to report, and nothing is sent.
    let c = Config { sack: false, ..c };
    let mut a = Connection::connect(0, &c, 1000, 2000, SeqNumber(100), 0);
    let mut b = Connection::connect(0, &c, 2000, 1000, SeqNumber(9000), 0);
    let syn_a = Seg::from_repr(&a.poll_transmit(0, &mut buf).unwrap());
    let syn_b = Seg::from_repr(&b.poll_transmit(0, &mut buf).unwrap());
    a.handle_segment(MS, &syn_b.repr());
    b.handle_segment(MS, &syn_a.repr());
    let synack_b = Seg::from_repr(&b.poll_transmit(MS, &mut buf).unwrap());
    let _synack_a = a.poll_transmit(MS, &mut buf).unwrap();
    a.handle_segment(2 * MS, &synack_b.repr());
    assert_eq!(a.state(), State::Established);
    assert!(a.poll_transmit(2 * MS, &mut buf).is_none());
}

/// A connects at 0 (timestamp clock offset 0, so its TS val is the time in ms) and, 10 ms
/// later, gets a SYN-ACK echoing `tsecr`; returns A and what it sent in answer.
fn syn_ack_echoing(config: Config, tsecr: u32) -> (Connection, Option<Seg>) {
    let mut a = Connection::connect(0, &config, 1000, 80, SeqNumber(100), 0);
    let mut buf = [0u8; 2000];
    a.poll_transmit(0, &mut buf).expect("SYN");
    let mut sa = seg(
        80,
        1000,
        SeqNumber(5000),
        SeqNumber(101),
        TcpFlags::SYN | TcpFlags::ACK,
    );
    sa.hdr.max_seg_size = Some(1460);
    sa.hdr.timestamp = Some(TcpTimestamp { tsval: 77, tsecr });
    a.handle_segment(10 * MS, &sa.repr());
    let out = a
        .poll_transmit(10 * MS, &mut buf)
        .map(|r| Seg::from_repr(&r));
    (a, out)
}

#[test]
fn syn_ack_checks_ts_echo_refuses_an_echo_our_clock_never_showed() {
    // Linux `tcp_rcv_synsent_state_process` (`fastopen/client/synack-data`, TEST 5): a
    // SYN-ACK echoing 9999 when our clock read 0..10 is answered with `R` at its ACK, and the
    // connection waits in SYN-SENT for a valid one.
    let config = Config {
        syn_ack_checks_ts_echo: true,
        ..Config::default()
    };
    let (a, out) = syn_ack_echoing(config, 9999);
    let out = out.expect("a reply");
    assert!(out.has(TcpFlags::RST) && !out.has(TcpFlags::ACK));
    assert_eq!(out.seq(), SeqNumber(101));
    assert_eq!(a.state(), State::SynSent);
    assert_eq!(a.counters().rx_drop_syn_ack_bad_echo, 1);
    // An echo of the SYN's own TS val (0) or of any later reading is taken.
    let (a, _) = syn_ack_echoing(config, 5);
    assert_eq!(a.state(), State::Established);
    // Off (the default, RFC 7323 asks no such check), the bad echo is taken too.
    let (a, _) = syn_ack_echoing(Config::default(), 9999);
    assert_eq!(a.state(), State::Established);
}
