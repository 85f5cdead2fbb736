//! SYN cookies and hostile peers: floods, bounded state, timeouts.

use super::*;

// ---------------------------------------------------------------- SYN cookies

#[test]
fn syn_cookie_handshake_yields_a_working_connection() {
    use tcp::isn::{Endpoint, SynCookies};
    let local = Endpoint {
        addr: &[10, 0, 0, 1],
        port: 80,
    };
    let remote = Endpoint {
        addr: &[10, 0, 0, 2],
        port: 1000,
    };
    let cookies = SynCookies::new([11, 22]);
    let mut a = Connection::connect(0, &cfg(), 1000, 80, SeqNumber(77), 0);
    let mut buf = vec![0u8; 4096];
    let syn = Seg::from_repr(&a.poll_transmit(0, &mut buf).unwrap());
    // The listener keeps no state: it answers with a cookie.
    let iss = cookies.generate(MS, local, remote, syn.seq(), syn.hdr.max_seg_size);
    let synack = Seg::from_repr(&SynCookies::syn_ack(&no_ts(), &syn.repr(), iss, MS, 0));
    a.handle_segment(2 * MS, &synack.repr());
    assert_eq!(a.state(), State::Established);
    a.send(b"hello through a cookie").unwrap();
    let ack = Seg::from_repr(&a.poll_transmit(2 * MS, &mut buf).unwrap());
    let valid = cookies
        .validate(3 * MS, local, remote, &ack.repr())
        .expect("valid cookie");
    assert_eq!(valid.mss, 1460);
    let mut b = Connection::from_syn_cookie(3 * MS, &no_ts(), &ack.repr(), &valid, 0);
    assert_eq!(b.state(), State::Established);
    assert!(!b.negotiated().timestamps && !b.negotiated().sack);
    let mut out = [0u8; 64];
    let n = b.recv(&mut out).unwrap();
    assert_eq!(&out[..n], b"hello through a cookie");
    // And B can answer.
    b.send(b"hi").unwrap();
    let reply = Seg::from_repr(&b.poll_transmit(3 * MS, &mut buf).unwrap());
    a.handle_segment(4 * MS, &reply.repr());
    let n = a.recv(&mut out).unwrap();
    assert_eq!(&out[..n], b"hi");
}

// ---------------------------------------------------------------- hostile peers

#[test]
fn out_of_order_flood_is_capped_in_ranges_and_bytes() {
    let c = Config {
        ooo_segments_max: 4,
        ooo_bytes_max: 3000,
        ..no_ts()
    };
    let mut p = Pair::established(no_ts(), c, 5 * MS);
    let (_, _, rcv_nxt) = p.a.sequence_state();
    let (snd_una, _, _) = p.b.sequence_state();
    // A hostile A sends 50 one-kilobyte segments, each after a hole.
    for i in 0..50u32 {
        let mut s = seg(1000, 80, snd_una, rcv_nxt, TcpFlags::ACK);
        let (_, _, b_rcv_nxt) = p.b.sequence_state();
        s.hdr.seq_number = b_rcv_nxt + 1 + i * 2000;
        s.hdr.ack_number = snd_una;
        s.hdr.window_len = 1000;
        s.payload = vec![0xAA; 1000];
        p.inject(Dir::AtoB, s);
    }
    p.step();
    assert!(p.b.ooo_bytes() <= 3000);
    let ctr = p.b.counters();
    assert_eq!(
        ctr.rx_ooo_segments, 3,
        "three 1000-byte ranges fit the 3000-byte cap"
    );
    assert_eq!(
        ctr.rx_drop_ooo_bytes + ctr.rx_drop_ooo_ranges + ctr.rx_drop_out_of_window,
        47
    );
}

#[test]
fn advertised_window_never_exceeds_the_receive_buffer() {
    let c = Config {
        recv_buffer_bytes: 10_000,
        ..no_ts()
    };
    let mut p = Pair::established(no_ts(), c, 5 * MS);
    p.b_auto_read = false;
    p.a_to_send = pattern(50_000);
    p.run_for(2_000 * MS);
    // B never holds more than its buffer, and A never sent beyond B's window except the
    // one-byte zero-window probes.
    assert_eq!(p.b.recv_queue_bytes(), 10_000);
    let probes = p.a.counters().window_probes_sent;
    assert!(probes > 0);
    assert_eq!(p.b.counters().rx_trim_beyond_window_bytes, probes);
}

#[test]
fn rto_is_three_seconds_after_a_retransmitted_syn() {
    let drop_first_syn_ack = Box::new(|c: &harness::Ctx, s: &Seg| {
        if c.dir == Dir::BtoA && c.index == 0 && s.has(TcpFlags::SYN) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let mut p = Pair::with_filter(no_ts(), no_ts(), 5 * MS, drop_first_syn_ack);
    p.run_until(|p| p.a.state() == State::Established, 5_000 * MS);
    // RFC 6298 §5.7: no sample (Karn), RTO re-initialized to 3 s.
    assert_eq!(p.a.srtt_ns(), None);
    assert_eq!(p.a.rto_ns(), 3_000 * MS);
}

#[test]
fn idle_restart_shrinks_cwnd_back_to_the_initial_window() {
    let mut p = established_no_ts();
    p.a_to_send = pattern(200_000);
    p.run_until(|p| p.b_read.len() == 200_000, 5_000 * MS);
    assert!(p.a.cwnd_bytes() > 10 * 1460, "slow start grew the window");
    // Idle for much longer than the RTO, then send again: RFC 5681 §4.1.
    p.run_for(5_000 * MS);
    p.log.clear();
    p.a_to_send = pattern(100_000);
    // Less than one RTT (10 ms): only the restart window leaves.
    p.run_for(8 * MS);
    assert_eq!(p.sent(Dir::AtoB).filter(|e| e.2.is_data()).count(), 10);
}

#[test]
fn no_idle_restart_when_the_option_is_off() {
    // Linux with `tcp_slow_start_after_idle=0`: the grown window survives the idle period.
    let c = Config {
        restart_after_idle: false,
        ..no_ts()
    };
    let mut p = Pair::established(c, no_ts(), 5 * MS);
    p.a_to_send = pattern(200_000);
    p.run_until(|p| p.b_read.len() == 200_000, 5_000 * MS);
    let cwnd = p.a.cwnd_bytes();
    assert!(cwnd > 11 * 1460, "slow start grew the window");
    p.run_for(5_000 * MS);
    p.log.clear();
    p.a_to_send = pattern(100_000);
    p.run_for(8 * MS);
    let sent = p.sent(Dir::AtoB).filter(|e| e.2.is_data()).count();
    assert!(sent > 10, "{sent} segments: more than the restart window");
    assert!(p.a.cwnd_bytes() >= cwnd, "not shrunk");
}

#[test]
fn idle_restart_waits_for_the_peer_window_to_open_before_shrinking_cwnd() {
    // RFC 5681 §4.1 restarts "before beginning transmission": while the peer's window is
    // closed (bare zero-window probes, Linux's), nothing begins and cwnd keeps its size;
    // once the window opens after more than an RTO without data, cwnd restarts from IW.
    let c = Config {
        zero_window_probe_carries_data: false,
        slow_start_increase_limit_segments: 0,
        ..no_ts()
    };
    let mut p = Pair::established(c, no_ts(), 5 * MS);
    // A's data never reaches B and B's replies never reach A: the test writes B's ACKs.
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::BtoA || s.is_data() {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let ack_to_a = |p: &mut Pair, ack: SeqNumber, window: u16| {
        let (_, _, rcv_nxt) = p.a.sequence_state();
        let mut s = seg(80, 1000, rcv_nxt, ack, TcpFlags::ACK);
        s.hdr.window_len = window;
        let now = p.now;
        p.a.handle_segment(now, &s.repr());
        p.flush();
    };
    p.a.send(&pattern(20 * 1460)).unwrap();
    p.flush();
    let (una, _, _) = p.a.sequence_state();
    p.now += 10 * MS;
    ack_to_a(&mut p, una + 10 * 1460, 65535);
    p.now += 10 * MS;
    ack_to_a(&mut p, una + 20 * 1460, 0);
    let grown = p.a.cwnd_bytes();
    assert_eq!(grown, 30 * 1460, "slow start: ten segments per ACK of ten");
    p.a.send(&pattern(20 * 1460)).unwrap();
    p.run_for(3_000 * MS);
    assert!(
        p.a.counters().window_probes_sent >= 2,
        "probing the closed window"
    );
    assert_eq!(p.a.cwnd_bytes(), grown, "no transmission began: cwnd kept");
    ack_to_a(&mut p, una + 20 * 1460, 65535);
    assert_eq!(
        p.a.cwnd_bytes(),
        10 * 1460,
        "restarted from IW as the window opened"
    );
}

#[test]
fn zero_window_probe_without_data_is_a_bare_ack_below_snd_una() {
    // Linux's probe (`tcp_xmit_probe_skb`): SEG.SEQ = SND.UNA − 1, no data; B answers with
    // its window, and once B reads, everything arrives.
    let a = Config {
        zero_window_probe_carries_data: false,
        ..no_ts()
    };
    let small = Config {
        recv_buffer_bytes: 4096,
        ..no_ts()
    };
    let mut p = Pair::established(a, small, 5 * MS);
    p.b_auto_read = false;
    let data = pattern(10_000);
    p.a_to_send = data.clone();
    p.run_for(2_000 * MS);
    let probes = p.a.counters().window_probes_sent;
    assert!(probes >= 1);
    assert_eq!(
        p.b.counters().rx_trim_beyond_window_bytes,
        0,
        "no data beyond the window"
    );
    let (snd_una, _, _) = p.a.sequence_state();
    let bare: Vec<_> = p
        .sent(Dir::AtoB)
        .filter(|e| !e.2.is_data() && e.2.seq() == snd_una - 1)
        .collect();
    assert_eq!(bare.len() as u64, probes);
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == data.len(), 20_000 * MS);
    assert_same(&p.b_read, &data);
}

#[test]
fn zero_window_probe_is_answered_with_the_current_window() {
    let small = Config {
        recv_buffer_bytes: 4096,
        ..no_ts()
    };
    let mut p = Pair::established(no_ts(), small, 5 * MS);
    p.b_auto_read = false;
    p.a_to_send = pattern(10_000);
    p.run_for(2_000 * MS);
    let probes = p.a.counters().window_probes_sent;
    assert!(probes >= 1);
    // Every probe got an answer: B's trimmed bytes equal the probes, and each was ACKed.
    assert_eq!(p.b.counters().rx_trim_beyond_window_bytes, probes);
    let zero_window_acks = p
        .sent(Dir::BtoA)
        .filter(|e| e.2.hdr.window_len == 0)
        .count() as u64;
    assert!(
        zero_window_acks > probes,
        "one zero-window ACK per probe, plus the one that closed it"
    );
}

#[test]
fn orphaned_fin_wait_2_times_out() {
    let c = Config {
        time_wait_ns: 5_000 * MS,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.close().unwrap();
    p.run_until(|p| p.a.state() == State::FinWait2, 100 * MS);
    let entered = p.now;
    // B never closes its side.
    p.run_until(|p| p.a.state() == State::Closed, 10_000 * MS);
    assert_eq!(p.now - entered, 5_000 * MS);
    assert_eq!(p.b.state(), State::CloseWait);
}

#[test]
fn half_closed_fin_wait_2_waits_for_the_peer_indefinitely() {
    let c = Config {
        time_wait_ns: 5_000 * MS,
        ..no_ts()
    };
    let mut p = Pair::established(c, c, 5 * MS);
    p.a.shutdown_write().unwrap();
    p.run_for(60_000 * MS);
    assert_eq!(
        p.a.state(),
        State::FinWait2,
        "the application may still read"
    );
}

#[test]
fn cubic_backs_off_less_than_newreno_after_the_same_loss() {
    let run = |cc: tcp::CongestionControl| {
        let c = Config {
            congestion_control: cc,
            ..no_ts()
        };
        let p = {
            let mut p = Pair::established(c, c, 5 * MS);
            p.filter = Box::new(|c, s| {
                if c.dir == Dir::AtoB && s.is_data() && c.data_index == 30 {
                    Verdict::Drop
                } else {
                    Verdict::Pass
                }
            });
            p.a_to_send = pattern(60 * 1460);
            p.run_until(|p| p.b_read.len() == 60 * 1460, 5_000 * MS);
            p
        };
        assert_eq!(p.a.counters().fast_retransmits, 1);
        p.a.ssthresh_bytes()
    };
    let reno = run(tcp::CongestionControl::NewReno);
    let cubic = run(tcp::CongestionControl::Cubic);
    // RFC 5681: FlightSize/2; RFC 9438 §4.6: cwnd·0.7.
    let ratio = f64::from(cubic) / f64::from(reno);
    assert!(
        (1.2..1.6).contains(&ratio),
        "CUBIC {cubic} vs NewReno {reno}"
    );
}
