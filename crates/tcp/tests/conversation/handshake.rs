//! The three-way handshake, simultaneous open, SYN retries, and data flowing once established.

use super::*;

// ---------------------------------------------------------------- handshake

#[test]
fn three_way_handshake_reaches_established_and_negotiates_options() {
    let mut p = Pair::new(cfg(), cfg(), 10 * MS);
    p.run_until(
        |p| p.a.state() == State::Established && p.b.state() == State::Established,
        1_000 * MS,
    );
    assert!(p.a_events.contains(&Event::Connected));
    assert!(p.b_events.contains(&Event::Connected));
    let n = p.a.negotiated();
    assert!(n.timestamps && n.sack);
    assert_eq!(n.snd_mss, 1460);
    // 256 KiB needs a shift of 3 to fit 16 bits.
    assert_eq!(n.rcv_wscale, 3);
    assert_eq!(n.snd_wscale, 3);
    // One RTT sample from the SYN: 20 ms.
    assert_eq!(p.a.srtt_ns(), Some(20 * MS));
}

#[test]
fn options_off_when_the_peer_does_not_offer_them() {
    let off = Config {
        timestamps: false,
        sack: false,
        window_scale: false,
        ..cfg()
    };
    let p = Pair::established(cfg(), off, MS);
    let n = p.a.negotiated();
    assert!(!n.timestamps && !n.sack);
    assert_eq!((n.snd_wscale, n.rcv_wscale), (0, 0));
}

#[test]
fn peer_mss_below_floor_is_raised_to_floor() {
    let mut a = Connection::connect(0, &cfg(), 1, 2, SeqNumber(100), 0);
    let mut buf = [0u8; 2000];
    let _syn = a.poll_transmit(0, &mut buf).unwrap();
    let mut synack = seg(
        2,
        1,
        SeqNumber(5000),
        SeqNumber(101),
        TcpFlags::SYN | TcpFlags::ACK,
    );
    synack.hdr.max_seg_size = Some(10);
    a.handle_segment(MS, &synack.repr());
    assert_eq!(a.state(), State::Established);
    assert_eq!(a.negotiated().snd_mss, cfg().peer_mss_floor_bytes);
}

#[test]
fn simultaneous_open_reaches_established() {
    let mut a = Connection::connect(0, &cfg(), 1000, 2000, SeqNumber(100), 0);
    let mut b = Connection::connect(0, &cfg(), 2000, 1000, SeqNumber(9000), 0);
    let mut buf = [0u8; 2000];
    let syn_a = Seg::from_repr(&a.poll_transmit(0, &mut buf).unwrap());
    let syn_b = Seg::from_repr(&b.poll_transmit(0, &mut buf).unwrap());
    // The SYNs cross.
    a.handle_segment(MS, &syn_b.repr());
    b.handle_segment(MS, &syn_a.repr());
    assert_eq!(a.state(), State::SynReceived);
    assert_eq!(b.state(), State::SynReceived);
    let synack_a = Seg::from_repr(&a.poll_transmit(MS, &mut buf).unwrap());
    let synack_b = Seg::from_repr(&b.poll_transmit(MS, &mut buf).unwrap());
    assert!(synack_a.has(TcpFlags::SYN | TcpFlags::ACK));
    assert_eq!(synack_a.seq(), SeqNumber(100), "SYN-ACK repeats the ISS");
    a.handle_segment(2 * MS, &synack_b.repr());
    b.handle_segment(2 * MS, &synack_a.repr());
    assert_eq!(a.state(), State::Established);
    assert_eq!(b.state(), State::Established);
    assert_eq!(a.poll_event(), Some(Event::Connected));
}

#[test]
fn lost_syn_ack_is_retransmitted_when_syn_repeats() {
    // Drop B's first SYN-ACK.
    let drop_first_synack = Box::new(|c: &harness::Ctx, s: &Seg| {
        if c.dir == Dir::BtoA && c.index == 0 && s.has(TcpFlags::SYN) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let mut p = Pair::with_filter(cfg(), cfg(), 5 * MS, drop_first_synack);
    p.run_until(
        |p| p.a.state() == State::Established && p.b.state() == State::Established,
        5_000 * MS,
    );
    // A retransmitted its SYN after the 1 s initial RTO.
    let syns = p.sent(Dir::AtoB).filter(|e| e.2.has(TcpFlags::SYN)).count();
    assert_eq!(syns, 2);
    assert!(p.now >= 1_000 * MS);
}

#[test]
fn mss_cap_set_before_the_syn_is_announced_and_used_and_refused_after() {
    // Linux TCP_MAXSEG (`user_mss`) on an active open.
    let mut a = Connection::connect(0, &cfg(), 1, 2, SeqNumber(1), 0);
    assert_eq!(a.set_mss_cap(1100), Ok(()));
    let mut buf = [0u8; 100];
    let syn = a.poll_transmit(0, &mut buf).unwrap();
    assert_eq!(syn.max_seg_size, Some(1100));
    assert_eq!(a.set_mss_cap(1000), Err(Error::InvalidState));
    let mut p = Pair::new(
        Config {
            mss_bytes: 1100,
            ..cfg()
        },
        cfg(),
        5 * MS,
    );
    p.run_until(|p| p.b.state() == State::Established, 100 * MS);
    assert_eq!(
        p.b.negotiated().snd_mss,
        1100,
        "B sends no more than A announced"
    );
    assert_eq!(p.a.negotiated().snd_mss, 1100, "A caps B's 1460 at its own");
}

#[test]
fn connect_times_out_after_syn_retries() {
    let c = Config {
        syn_retries_max: 2,
        ..cfg()
    };
    let mut a = Connection::connect(0, &c, 1, 2, SeqNumber(1), 0);
    let mut buf = [0u8; 100];
    let mut syn_times = Vec::new();
    let mut now = 0;
    loop {
        while let Some(r) = a.poll_transmit(now, &mut buf) {
            assert!(r.flags.contains(TcpFlags::SYN));
            syn_times.push(now);
        }
        match a.poll_timeout() {
            Some(t) => {
                now = t;
                a.handle_timeout(now);
            }
            None => break,
        }
    }
    // 1 s, then 2 s of backoff, then give up after 4 s.
    assert_eq!(syn_times, vec![0, 1_000 * MS, 3_000 * MS]);
    assert_eq!(a.state(), State::Closed);
    assert_eq!(a.close_reason(), Some(CloseReason::TimedOut));
    assert_eq!(a.send(b"x"), Err(Error::TimedOut));
}

// ---------------------------------------------------------------- data transfer

#[test]
fn data_flows_both_ways_exactly_once() {
    let mut p = Pair::established(cfg(), cfg(), 5 * MS);
    let a_data = pattern(100_000);
    let b_data = pattern(30_000);
    p.a_to_send = a_data.clone();
    p.b_to_send = b_data.clone();
    p.run_until(
        |p| p.b_read.len() == a_data.len() && p.a_read.len() == b_data.len(),
        10_000 * MS,
    );
    assert_same(&p.b_read, &a_data);
    assert_same(&p.a_read, &b_data);
    assert_eq!(p.a.counters().retransmitted_segments, 0);
}

#[test]
fn initial_window_is_ten_segments() {
    let mut p = Pair::established(no_ts(), no_ts(), 50 * MS);
    p.a_to_send = pattern(100_000);
    // Run less than one RTT: only the initial window may leave.
    p.run_for(60 * MS);
    let data_segs = p.sent(Dir::AtoB).filter(|e| e.2.is_data()).count();
    assert_eq!(data_segs, 10);
}
