//! `Connection::tcp_info`: the Linux `tcp_info` picture of a connection, checked against
//! conversations whose figures are known.

mod harness;

use harness::{Dir, MS, Pair, Verdict, pattern};
use tcp::{CaState, Config, State, TCP_INFINITE_SSTHRESH, tcpi_opt};

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
