//! `Connection::tcp_info`: the Linux `tcp_info` picture of a connection, checked against
//! conversations whose figures are known.

mod harness;

use harness::{Dir, MS, Pair, Seg, Verdict, pattern, seg};
use tcp::{CaState, Config, State, TCP_INFINITE_SSTHRESH, tcpi_opt};
use wire::tcp::{SackBlock, SeqNumber, TcpFlags};

fn no_ts() -> Config {
    Config {
        timestamps: false,
        ..Config::default()
    }
}

#[test]
fn tcp_info_after_handshake_reports_options_state_mss_and_rtt() {
    let p = Pair::established(Config::default(), Config::default(), 10 * MS);
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.state, State::Established.linux_number());
    assert_eq!(i.state, 1, "TCP_ESTABLISHED");
    assert_eq!(i.ca_state, CaState::Open as u8);
    assert_eq!(
        i.options,
        tcpi_opt::TIMESTAMPS | tcpi_opt::SACK | tcpi_opt::WSCALE
    );
    assert_eq!((i.snd_wscale, i.rcv_wscale), (3, 3));
    // 1460 less the 12 bytes of the timestamp option.
    assert_eq!(i.snd_mss, 1448);
    assert_eq!(i.advmss, 1460);
    assert_eq!(i.rtt_us, 20_000, "one 20 ms sample from the SYN");
    assert_eq!(i.snd_cwnd, 10 * 1460 / 1448);
    assert_eq!(i.snd_ssthresh, TCP_INFINITE_SSTHRESH);
    assert_eq!(
        (i.unacked, i.sacked, i.lost, i.retrans),
        (0, Some(0), Some(0), Some(0))
    );
    assert_eq!(
        (i.bytes_acked, i.bytes_received, i.notsent_bytes),
        (0, 0, 0)
    );
}

#[test]
fn tcp_info_counts_the_flight_in_segments_and_unsent_bytes() {
    let mut p = Pair::established(no_ts(), no_ts(), 50 * MS);
    p.a.send(&pattern(20 * 1460)).unwrap();
    // Less than one RTT: the initial window of ten segments is out, ten wait.
    p.run_for(10 * MS);
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.snd_cwnd, 10);
    assert_eq!(i.unacked, 10);
    assert_eq!(i.notsent_bytes, 10 * 1460);
    assert_eq!(i.bytes_sent, 10 * 1460);
    assert_eq!(i.last_data_sent_ms, 10);
    p.run_until(|p| p.a.send_queue_bytes() == 0, 1_000 * MS);
    let i = p.a.tcp_info(p.now);
    assert_eq!((i.unacked, i.notsent_bytes), (0, 0));
    assert_eq!(i.bytes_acked, 20 * 1460);
    assert_eq!(p.b.tcp_info(p.now).bytes_received, 20 * 1460);
    assert!(i.snd_cwnd > 10, "slow start grew the window");
}

#[test]
fn tcp_info_reports_sacked_lost_and_recovery_while_a_segment_is_missing() {
    let mut p = Pair::established(no_ts(), no_ts(), 20 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a.send(&pattern(10 * 1460)).unwrap();
    // One RTT and a little: nine SACKed segments came back, the first is deemed lost.
    p.run_for(45 * MS);
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.unacked, 10);
    assert_eq!(i.sacked, Some(9));
    assert_eq!(i.ca_state, CaState::Recovery as u8);
    assert_eq!(i.lost, Some(1));
    assert_eq!(i.retrans, Some(1), "the fast retransmission is in flight");
    assert_eq!(i.total_retrans, 1);
    assert_ne!(i.snd_ssthresh, TCP_INFINITE_SSTHRESH);
    p.run_until(|p| p.a.send_queue_bytes() == 0, 1_000 * MS);
    let i = p.a.tcp_info(p.now);
    assert_eq!(
        (i.unacked, i.sacked, i.lost, i.retrans),
        (0, Some(0), Some(0), Some(0))
    );
}

#[test]
fn tcp_info_without_sack_leaves_scoreboard_counts_unknown() {
    let off = Config {
        sack: false,
        ..no_ts()
    };
    let p = Pair::established(off, off, MS);
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.options & tcpi_opt::SACK, 0);
    assert_eq!(
        (i.sacked, i.lost, i.retrans, i.min_rtt_us),
        (None, None, None, None)
    );
}

/// A (no timestamps, MSS 1460) with ten segments in flight that B never receives, for ACKs
/// crafted by the test. Returns the pair and SND.UNA.
fn a_with_ten_segments_lost_to_b() -> (Pair, SeqNumber) {
    a_with_ten_segments_lost_to_b_with(no_ts())
}

/// [`a_with_ten_segments_lost_to_b`] with A running `config`.
fn a_with_ten_segments_lost_to_b_with(config: Config) -> (Pair, SeqNumber) {
    let mut p = Pair::established(config, no_ts(), 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a.send(&pattern(10 * 1460)).unwrap();
    p.flush();
    let (una, nxt, _) = p.a.sequence_state();
    assert_eq!(nxt.diff(una), 10 * 1460);
    // ACKs arrive one round trip later (RACK would deem everything lost at once otherwise).
    p.now += 10 * MS;
    (p, una)
}

/// An ACK from B to A of `ack` carrying SACK blocks given in segments `[from, to)` after
/// `una` (1460 bytes each).
fn ack_with_sacks(p: &Pair, una: SeqNumber, ack: SeqNumber, segs: &[(u32, u32)]) -> Seg {
    let (_, _, rcv_nxt) = p.a.sequence_state();
    let mut s = seg(80, 1000, rcv_nxt, ack, TcpFlags::ACK);
    s.hdr.window_len = 65535;
    for (i, &(l, r)) in segs.iter().enumerate() {
        s.hdr.sack_blocks[i] = Some(SackBlock {
            left: una + l * 1460,
            right: una + r * 1460,
        });
    }
    s
}

fn deliver_to_a(p: &mut Pair, s: &Seg) {
    let now = p.now;
    p.a.handle_segment(now, &s.repr());
    p.flush();
}

#[test]
fn tcp_info_reordering_grows_to_the_distance_below_the_highest_sack() {
    let (mut p, una) = a_with_ten_segments_lost_to_b();
    assert_eq!(
        (
            p.a.tcp_info(p.now).reordering,
            p.a.tcp_info(p.now).reord_seen
        ),
        (3, 0)
    );
    // A SACK for the eighth segment (index 7): nothing below it was SACKed before.
    let s = ack_with_sacks(&p, una, una, &[(7, 8)]);
    deliver_to_a(&mut p, &s);
    let i = p.a.tcp_info(p.now);
    assert_eq!((i.reordering, i.reord_seen), (3, 0));
    assert_eq!(p.a.counters().retransmitted_segments, 0);
    // The third segment (index 2), never retransmitted, SACKed below the highest SACKed
    // sequence (8·1460): reordering of 6 segments.
    let s = ack_with_sacks(&p, una, una, &[(2, 3), (7, 8)]);
    deliver_to_a(&mut p, &s);
    let i = p.a.tcp_info(p.now);
    assert_eq!((i.reordering, i.reord_seen), (6, 1));
    // The sixth (index 5) is 3 segments below the highest: seen, but the degree stays 6.
    let s = ack_with_sacks(&p, una, una, &[(5, 6), (2, 3), (7, 8)]);
    deliver_to_a(&mut p, &s);
    let i = p.a.tcp_info(p.now);
    assert_eq!((i.reordering, i.reord_seen), (6, 2));
}

/// A's `tcpi_snd_cwnd` after the two SACKs of `tcp_info_reordering_grows_...`: the first
/// measures no reordering, the second a degree of 6.
fn cwnd_after_sacks_that_measure_reordering(config: Config) -> (u32, u32) {
    let (mut p, una) = a_with_ten_segments_lost_to_b_with(config);
    let before = p.a.tcp_info(p.now).snd_cwnd;
    let s = ack_with_sacks(&p, una, una, &[(7, 8)]);
    deliver_to_a(&mut p, &s);
    assert_eq!(
        p.a.tcp_info(p.now).snd_cwnd,
        before,
        "no reordering measured yet"
    );
    let s = ack_with_sacks(&p, una, una, &[(2, 3), (7, 8)]);
    deliver_to_a(&mut p, &s);
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.reordering, 6);
    assert!(!p.a.in_recovery());
    (before, i.snd_cwnd)
}

#[test]
fn a_sack_grows_cwnd_once_reordering_exceeds_three_with_linux_may_raise_cwnd() {
    let linux = Config {
        cwnd_grows_on_sack_when_reordering: true,
        ..no_ts()
    };
    let (before, after) = cwnd_after_sacks_that_measure_reordering(linux);
    assert_eq!(
        after,
        before + 1,
        "the newly SACKed segment counts in slow start"
    );
}

#[test]
fn a_sack_does_not_grow_cwnd_by_default_whatever_the_reordering() {
    let (before, after) = cwnd_after_sacks_that_measure_reordering(no_ts());
    assert_eq!(
        after, before,
        "RFC 5681: only cumulative ACKs of new data grow cwnd"
    );
}

/// A CUBIC sender (slow start unlimited per ACK, no tail loss probe) whose first ten
/// segments are acknowledged together after 20 ms, then the next ones one per millisecond
/// from 40 ms (an ACK train at the minimum RTT): `tcpi_snd_ssthresh` after fifteen of them.
fn ssthresh_after_an_ack_train(hystart: bool) -> u32 {
    let config = Config {
        congestion_control: tcp::CongestionControl::Cubic,
        hystart,
        slow_start_increase_limit_segments: 0,
        tail_loss_probe: false,
        ..no_ts()
    };
    let mut p = Pair::established(config, no_ts(), 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::AtoB && s.is_data() {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.a.send(&pattern(200 * 1460)).unwrap();
    p.flush();
    let (una, _, _) = p.a.sequence_state();
    let t0 = p.now;
    p.now = t0 + 20 * MS;
    let s = ack_with_sacks(&p, una, una + 10 * 1460, &[]);
    deliver_to_a(&mut p, &s);
    assert_eq!(p.a.tcp_info(p.now).snd_cwnd, 20);
    for k in 1..=15u32 {
        p.now = t0 + 40 * MS + u64::from(k) * MS;
        let s = ack_with_sacks(&p, una, una + (10 + k) * 1460, &[]);
        deliver_to_a(&mut p, &s);
    }
    p.a.tcp_info(p.now).snd_ssthresh
}

#[test]
fn hystart_ends_cubic_slow_start_on_an_ack_train_with_ssthresh_at_cwnd() {
    // Round from 41 ms; the train outlasts (20 ms + the 1 ms TSO allowance) / 2 at 52 ms,
    // the twelfth ACK of the round, when cwnd was 20 + 11 segments.
    assert_eq!(ssthresh_after_an_ack_train(true), 31);
}

#[test]
fn without_hystart_cubic_slow_start_runs_on_through_an_ack_train() {
    assert_eq!(ssthresh_after_an_ack_train(false), TCP_INFINITE_SSTHRESH);
}

#[test]
fn tcp_info_reordering_ignores_blocks_of_one_ack_in_ascending_order() {
    let (mut p, una) = a_with_ten_segments_lost_to_b();
    // One ACK with three blocks, lowest first or not: each is above the highest SACKed
    // sequence before it in ascending order.
    let s = ack_with_sacks(&p, una, una, &[(7, 8), (1, 2), (4, 5)]);
    deliver_to_a(&mut p, &s);
    let i = p.a.tcp_info(p.now);
    assert_eq!((i.reordering, i.reord_seen), (3, 0));
}

#[test]
fn tcp_info_delivered_counts_the_syn_and_each_acknowledged_or_sacked_segment() {
    let (mut p, una) = a_with_ten_segments_lost_to_b();
    assert_eq!(p.a.tcp_info(p.now).delivered, 1, "the SYN, acknowledged");
    assert_eq!(
        p.b.tcp_info(p.now).delivered,
        1,
        "the SYN-ACK, acknowledged"
    );
    let s = ack_with_sacks(&p, una, una, &[(3, 5)]);
    deliver_to_a(&mut p, &s);
    assert_eq!(p.a.tcp_info(p.now).delivered, 3, "two SACKed segments");
    // The cumulative ACK of the first five: three more (two of them were SACKed).
    let s = ack_with_sacks(&p, una, una + 5 * 1460, &[]);
    deliver_to_a(&mut p, &s);
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.delivered, 6);
    assert_eq!(i.delivered_ce, 0);
    assert_eq!(
        u64::from(i.data_segs_out),
        10 + p.a.counters().retransmitted_segments,
        "ten data segments and the retransmissions"
    );
}

#[test]
fn tcp_info_rwnd_limited_runs_while_only_the_peer_window_holds_data_back() {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    let (_, _, rcv_nxt) = p.a.sequence_state();
    let (una, _, _) = p.a.sequence_state();
    // B's window closes: A's data waits for it alone (its congestion window is open).
    let mut zero = seg(80, 1000, rcv_nxt, una, TcpFlags::ACK);
    zero.hdr.window_len = 0;
    deliver_to_a(&mut p, &zero);
    let i = p.a.tcp_info(p.now);
    assert_eq!(
        (i.busy_time_us, i.rwnd_limited_us),
        (0, 0),
        "nothing queued"
    );
    p.a.send(&pattern(1000)).unwrap();
    p.flush();
    let t0 = p.now;
    p.now += 100 * MS;
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.rwnd_limited_us, 100_000);
    assert_eq!(
        i.busy_time_us, 100_000,
        "busy time includes the limited time"
    );
    // The window opens: the data leaves and the rwnd chronograph stops; busy runs on until
    // the data is acknowledged.
    let mut open = seg(80, 1000, rcv_nxt, una, TcpFlags::ACK);
    open.hdr.window_len = 65535;
    deliver_to_a(&mut p, &open);
    p.now += 20 * MS;
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.rwnd_limited_us, 100_000);
    assert_eq!(i.busy_time_us, (p.now - t0) / 1000);
    let mut ack = seg(80, 1000, rcv_nxt, una + 1000, TcpFlags::ACK);
    ack.hdr.window_len = 65535;
    deliver_to_a(&mut p, &ack);
    p.now += 50 * MS;
    let i = p.a.tcp_info(p.now);
    assert_eq!(
        i.busy_time_us, 120_000,
        "nothing queued or in flight: busy stopped"
    );
    assert_eq!(i.sndbuf_limited_us, 0);
}

#[test]
fn tcp_info_sndbuf_limited_runs_from_a_full_buffer_until_an_ack_frees_room() {
    let small = Config {
        send_buffer_bytes: 4 * 1460,
        ..no_ts()
    };
    let (mut p, una) = {
        let mut p = Pair::established(small, no_ts(), 5 * MS);
        p.filter = Box::new(|c, s| {
            if c.dir == Dir::AtoB && s.is_data() {
                Verdict::Drop
            } else {
                Verdict::Pass
            }
        });
        let (una, _, _) = p.a.sequence_state();
        (p, una)
    };
    assert_eq!(p.a.send(&pattern(10 * 1460)).unwrap(), 4 * 1460);
    p.flush();
    p.now += 30 * MS;
    assert_eq!(p.a.tcp_info(p.now).sndbuf_limited_us, 30_000);
    let s = ack_with_sacks(&p, una, una + 1460, &[]);
    deliver_to_a(&mut p, &s);
    p.now += 30 * MS;
    let i = p.a.tcp_info(p.now);
    assert_eq!(i.sndbuf_limited_us, 30_000, "room was made: stopped");
    assert_eq!(i.busy_time_us, 60_000);
}

#[test]
fn tcp_info_last_data_recv_counts_from_the_handshake_then_from_each_data_segment() {
    let mut p = Pair::established(no_ts(), no_ts(), 5 * MS);
    let t0 = p.now;
    p.run_for(1_000 * MS);
    let i = p.a.tcp_info(p.now);
    assert!(
        (i64::from(i.last_data_recv_ms) - ((p.now - t0) / MS) as i64).abs() <= 10,
        "{} ms since the handshake",
        i.last_data_recv_ms
    );
    p.b.send(&pattern(500)).unwrap();
    p.run_for(10 * MS);
    let i = p.a.tcp_info(p.now);
    assert_eq!(
        i.last_data_recv_ms, 5,
        "the data arrived 5 ms after it left"
    );
    assert_eq!((i.data_segs_in, p.b.tcp_info(p.now).data_segs_out), (1, 1));
}

/// B's `rcv_mss` after A's 3,000 bytes reach it as one coalesced segment whose wire
/// segments were `gro_mss_bytes` each (0: delivered as one segment).
fn rcv_mss_after_coalesced_data(gro_mss_bytes: u16) -> u32 {
    let mut p = Pair::established(no_ts(), no_ts(), MS);
    let (a_port, b_port) = (p.a.local_port(), p.b.local_port());
    let (_, a_nxt, _) = p.a.sequence_state();
    let (_, b_nxt, _) = p.b.sequence_state();
    let mut s = seg(a_port, b_port, a_nxt, b_nxt, TcpFlags::ACK);
    s.payload = pattern(3000);
    s.hdr.window_len = 60_000;
    let now = p.now;
    p.b.handle_segment_gro(now, &s.repr(), gro_mss_bytes);
    assert_eq!(p.b.recv_queue_bytes(), 3000);
    p.b.tcp_info(now).rcv_mss
}

#[test]
fn rcv_mss_of_a_coalesced_segment_is_its_wire_segment_size() {
    // Linux `tcp_measure_rcv_mss` reads the GRO packet's `gso_size` (`gro/gro-mss-option`).
    assert_eq!(rcv_mss_after_coalesced_data(1000), 1000);
    assert_eq!(rcv_mss_after_coalesced_data(0), 3000);
}

#[test]
fn tcp_info_byte_counts_keep_counting_past_2_and_4_gib() {
    // A connection that has already carried 4 GiB − 1000 bytes each way: moved with its
    // initial sequence numbers set back by that much (what a long transfer would leave).
    let p = Pair::established(Config::default(), Config::default(), 5 * MS);
    let carried: u32 = u32::MAX - 999;
    let mut sa = p.a.export(p.now).expect("export a");
    let mut sb = p.b.export(p.now).expect("export b");
    sa.snd.iss = SeqNumber(sa.snd.iss.0.wrapping_sub(carried));
    sb.rcv.irs = SeqNumber(sb.rcv.irs.0.wrapping_sub(carried));
    let a = tcp::Connection::import(p.now, &sa).expect("import a");
    let b = tcp::Connection::import(p.now, &sb).expect("import b");
    let mut p = Pair::from_connections(a, b, p.now, 5 * MS);
    assert_eq!(p.a.tcp_info(p.now).bytes_acked, u64::from(carried));
    assert_eq!(p.b.tcp_info(p.now).bytes_received, u64::from(carried));
    let data = pattern(5000);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() >= data.len(), 1_000 * MS);
    p.run_for(500 * MS);
    let want = u64::from(carried) + 5000;
    assert_eq!(p.a.tcp_info(p.now).bytes_acked, want);
    assert_eq!(p.b.tcp_info(p.now).bytes_received, want);
    assert!(want > 1 << 32);
}
