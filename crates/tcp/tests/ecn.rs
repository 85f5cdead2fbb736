//! Explicit Congestion Notification (RFC 3168) in the engine: negotiation on the SYNs, the
//! codepoint of what leaves, the receiver's echo of a CE mark until CWR, and the sender's one
//! reduction per window (Linux's CWR state with PRR). Segments are passed by hand so every
//! codepoint and flag can be checked.

mod harness;

use harness::{MS, Seg, pattern};
use tcp::{CaState, Config, Connection, EcnMode, tcpi_opt};
use wire::Ecn;
use wire::tcp::{SeqNumber, TcpFlags};

const RTT_NS: u64 = 10 * MS;

fn cfg(ecn: EcnMode) -> Config {
    Config {
        ecn,
        timestamps: false,
        ..Config::default()
    }
}

/// Everything `c` sends at `now`, each with the codepoint its IP header would carry.
fn drain(c: &mut Connection, now: u64) -> Vec<(Seg, Ecn)> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Some(r) = c.poll_transmit(now, &mut buf) {
        let s = Seg::from_repr(&r);
        out.push((s, c.transmit_ecn()));
    }
    out
}

fn deliver(c: &mut Connection, now: u64, segs: &[(Seg, Ecn)]) {
    for (s, e) in segs {
        c.handle_segment_ecn(now, &s.repr(), 0, *e);
    }
}

/// A handshake between a client and a server with these modes: the two connections, the
/// SYN and the SYN-ACK, and the time after the handshake.
struct Opened {
    a: Connection,
    b: Connection,
    syn: (Seg, Ecn),
    syn_ack: (Seg, Ecn),
    now: u64,
}

fn open(client: Config, server: Config) -> Opened {
    let mut now = 1_000 * MS;
    let mut a = Connection::connect(now, &client, 40_000, 80, SeqNumber(1_000), 0);
    let syn = drain(&mut a, now).remove(0);
    let mut b = Connection::accept(now, &server, &syn.0.repr(), SeqNumber(5_000), 0).unwrap();
    let syn_ack = drain(&mut b, now).remove(0);
    now += RTT_NS;
    deliver(&mut a, now, std::slice::from_ref(&syn_ack));
    let ack = drain(&mut a, now);
    deliver(&mut b, now, &ack);
    Opened {
        a,
        b,
        syn,
        syn_ack,
        now,
    }
}

fn ece_cwr(s: &Seg) -> (bool, bool) {
    (s.has(TcpFlags::ECE), s.has(TcpFlags::CWR))
}

#[test]
fn ecn_setup_syn_and_syn_ack_negotiate_when_the_client_asks_and_the_server_accepts() {
    let o = open(cfg(EcnMode::On), cfg(EcnMode::Accept));
    assert_eq!(ece_cwr(&o.syn.0), (true, true), "ECN-setup SYN");
    assert_eq!(ece_cwr(&o.syn_ack.0), (true, false), "ECN-setup SYN-ACK");
    // RFC 3168 §6.1.1: SYNs and SYN-ACKs are not ECN-capable.
    assert_eq!((o.syn.1, o.syn_ack.1), (Ecn::NotEct, Ecn::NotEct));
    assert!(o.a.ecn_negotiated() && o.b.ecn_negotiated());
    assert_eq!(o.a.tcp_info(o.now).options & tcpi_opt::ECN, tcpi_opt::ECN);
    assert_eq!(o.b.tcp_info(o.now).options & tcpi_opt::ECN, tcpi_opt::ECN);
}

#[test]
fn no_ecn_unless_both_sides_agree() {
    // A server with ECN off answers an ECN-setup SYN with a plain SYN-ACK.
    let o = open(cfg(EcnMode::On), cfg(EcnMode::Off));
    assert_eq!(ece_cwr(&o.syn_ack.0), (false, false));
    assert!(!o.a.ecn_negotiated() && !o.b.ecn_negotiated());
    // A client that only accepts never asks.
    let o = open(cfg(EcnMode::Accept), cfg(EcnMode::On));
    assert_eq!(ece_cwr(&o.syn.0), (false, false));
    assert!(!o.a.ecn_negotiated() && !o.b.ecn_negotiated());
    // Nothing leaves ECN-capable on either.
    let (mut a, now) = (o.a, o.now);
    a.send(&pattern(3000)).unwrap();
    assert!(drain(&mut a, now).iter().all(|(_, e)| *e == Ecn::NotEct));
}

#[test]
fn a_syn_ack_with_both_ece_and_cwr_is_not_an_ecn_setup_syn_ack() {
    let now = 1_000 * MS;
    let mut a = Connection::connect(now, &cfg(EcnMode::On), 40_000, 80, SeqNumber(1_000), 0);
    let syn = drain(&mut a, now).remove(0).0;
    // A broken peer reflects the SYN's flags (RFC 3168 §6.1.1).
    let mut b =
        Connection::accept(now, &cfg(EcnMode::Off), &syn.repr(), SeqNumber(5_000), 0).unwrap();
    let mut syn_ack = drain(&mut b, now).remove(0).0;
    syn_ack.hdr.flags |= TcpFlags::ECE | TcpFlags::CWR;
    a.handle_segment(now + RTT_NS, &syn_ack.repr());
    assert!(!a.ecn_negotiated());
}

#[test]
fn a_retransmitted_syn_does_not_ask_for_ecn() {
    let now = 1_000 * MS;
    let mut a = Connection::connect(now, &cfg(EcnMode::On), 40_000, 80, SeqNumber(1_000), 0);
    let first = drain(&mut a, now).remove(0).0;
    assert_eq!(ece_cwr(&first), (true, true));
    let rto = a.poll_timeout().unwrap();
    a.handle_timeout(rto);
    let again = drain(&mut a, rto).remove(0).0;
    assert!(again.has(TcpFlags::SYN));
    assert_eq!(ece_cwr(&again), (false, false), "Linux tcp_ecn_clear_syn");
    // Its SYN-ACK, even with ECE, does not turn ECN on.
    let mut b = Connection::accept(
        rto,
        &cfg(EcnMode::Accept),
        &first.repr(),
        SeqNumber(5_000),
        0,
    )
    .unwrap();
    let syn_ack = drain(&mut b, rto).remove(0).0;
    assert!(syn_ack.has(TcpFlags::ECE));
    a.handle_segment(rto + RTT_NS, &syn_ack.repr());
    assert!(!a.ecn_negotiated());
}

#[test]
fn new_data_leaves_ect0_but_pure_acks_and_retransmissions_do_not() {
    let o = open(cfg(EcnMode::On), cfg(EcnMode::Accept));
    let (mut a, mut b, mut now) = (o.a, o.b, o.now);
    a.send(&pattern(2 * 1460)).unwrap();
    let data = drain(&mut a, now);
    assert_eq!(data.len(), 2);
    assert!(data.iter().all(|(s, e)| s.is_data() && *e == Ecn::Ect0));
    // The first segment is lost; the second draws a pure ACK, which is not ECN-capable.
    now += RTT_NS;
    deliver(&mut b, now, &data[1..]);
    let acks = drain(&mut b, now);
    assert!(!acks.is_empty());
    assert!(acks.iter().all(|(s, e)| !s.is_data() && *e == Ecn::NotEct));
    // Retransmissions (a tail loss probe, then the timeout's) are not ECN-capable either
    // (§6.1.5), nor do they carry CWR: a reduction is announced on new data only.
    let mut rtx = Vec::new();
    while !rtx
        .iter()
        .any(|(s, _): &(Seg, Ecn)| s.seq() == data[0].0.seq())
    {
        let t = a.poll_timeout().unwrap();
        assert!(
            t < now + 5_000 * MS,
            "no retransmission of the lost segment"
        );
        a.handle_timeout(t);
        rtx.extend(drain(&mut a, t));
    }
    assert!(rtx.iter().all(|(s, e)| s.is_data() && *e == Ecn::NotEct));
    assert!(rtx.iter().all(|(s, _)| !s.has(TcpFlags::CWR)));
}

#[test]
fn a_ce_mark_is_echoed_until_cwr_and_the_sender_announces_its_reduction() {
    let o = open(cfg(EcnMode::On), cfg(EcnMode::Accept));
    let (mut a, mut b, mut now) = (o.a, o.b, o.now);
    a.send(&pattern(4 * 1460)).unwrap();
    let mut data = drain(&mut a, now);
    assert_eq!(data.len(), 4);
    // A router marks the first segment CE.
    data[0].1 = Ecn::Ce;
    now += RTT_NS;
    deliver(&mut b, now, &data[..1]);
    let ack = drain(&mut b, now);
    assert_eq!(ack.len(), 1, "a CE mark is acknowledged at once");
    assert!(ack[0].0.has(TcpFlags::ECE));
    deliver(&mut b, now, &data[1..]);
    let acks = drain(&mut b, now);
    assert!(!acks.is_empty());
    assert!(
        acks.iter().all(|(s, _)| s.has(TcpFlags::ECE)),
        "ECE until CWR"
    );
    assert_eq!(b.counters().rx_ce_segments, 1);
    let seen = b.tcp_info(now).options;
    assert_eq!(seen & tcpi_opt::ECN_SEEN, tcpi_opt::ECN_SEEN);
    // The sender reduces, and its next new data segment carries CWR.
    now += RTT_NS;
    deliver(&mut a, now, &ack);
    deliver(&mut a, now, &acks);
    assert_eq!(a.counters().ecn_window_reductions, 1);
    assert!(a.counters().rx_ece_acks >= 2);
    a.send(&pattern(2 * 1460)).unwrap();
    let more = drain(&mut a, now);
    assert!(more[0].0.has(TcpFlags::CWR) && more[0].1 == Ecn::Ect0);
    assert!(
        more[1..].iter().all(|(s, _)| !s.has(TcpFlags::CWR)),
        "CWR once"
    );
    // The receiver stops echoing once CWR arrives.
    now += RTT_NS;
    deliver(&mut b, now, &more);
    let after = drain(&mut b, now);
    assert!(!after.is_empty());
    assert!(after.iter().all(|(s, _)| !s.has(TcpFlags::ECE)));
}

/// The peer's ACK of everything before `ack` (window 65,535), with ECE when `ece`, handed to
/// the sender at `now`.
fn ack_to_sender(a: &mut Connection, now: u64, ack: SeqNumber, ece: bool) {
    let mut seg = harness::seg(80, 40_000, SeqNumber(5_001), ack, TcpFlags::ACK);
    if ece {
        seg.hdr.flags |= TcpFlags::ECE;
    }
    seg.hdr.window_len = 65_535;
    a.handle_segment_ecn(now, &seg.repr(), 0, Ecn::NotEct);
}

/// The sender's reaction, as Linux's `cwnd-moderation-ecn-enter-cwr` script checks it: ten
/// segments of cwnd, four in flight, an ECE on the ACK of the first.
fn sender_after_one_ece(prr: bool) -> (Connection, u64, Vec<(Seg, Ecn)>, u32) {
    let client = Config {
        prr,
        ..cfg(EcnMode::On)
    };
    let o = open(client, cfg(EcnMode::Accept));
    let (mut a, mut now) = (o.a, o.now);
    let mss = u32::from(a.eff_mss());
    a.send(&pattern(4 * mss as usize)).unwrap();
    let data = drain(&mut a, now);
    assert_eq!(a.cwnd_bytes(), 10 * mss);
    now += RTT_NS;
    ack_to_sender(&mut a, now, data[0].0.seq() + mss, true);
    (a, now, data, mss)
}

#[test]
fn ece_with_prr_enters_cwr_and_brings_cwnd_down_with_the_acks() {
    let (mut a, mut now, data, mss) = sender_after_one_ece(true);
    let info = a.tcp_info(now);
    assert_eq!(info.ca_state, CaState::Cwr as u8);
    // NewReno: ssthresh = flight / 2 = 2 segments; three still out, above it: PRR lets one
    // segment go for the first delivery (the "fast retransmit" allowance, none owed here).
    assert_eq!(a.ssthresh_bytes(), 2 * mss);
    assert_eq!(a.cwnd_bytes(), 3 * mss + mss);
    assert_eq!(info.delivered_ce, 1);
    // The rest of the window acknowledged (no more ECE): the reduction ends at ssthresh.
    now += RTT_NS;
    let ack = harness::seg(
        80,
        40_000,
        SeqNumber(5_001),
        data[3].0.seq() + mss,
        TcpFlags::ACK,
    );
    a.handle_segment_ecn(now, &ack.repr(), 0, Ecn::NotEct);
    assert_eq!(a.tcp_info(now).ca_state, CaState::Open as u8);
    assert_eq!(a.cwnd_bytes(), 2 * mss);
    assert_eq!(a.counters().ecn_window_reductions, 1);
}

#[test]
fn ece_without_prr_halves_cwnd_at_once() {
    let (a, now, _, mss) = sender_after_one_ece(false);
    assert_eq!(a.ssthresh_bytes(), 2 * mss);
    assert_eq!(a.cwnd_bytes(), 2 * mss, "RFC 3168 §6.1.2: cwnd = ssthresh");
    assert_eq!(a.tcp_info(now).ca_state, CaState::Cwr as u8);
}

#[test]
fn ece_reduces_the_window_once_per_window_of_data() {
    let (mut a, mut now, data, mss) = sender_after_one_ece(false);
    let ssthresh = a.ssthresh_bytes();
    // More ECEs for the same window: no further reduction.
    for (d, _) in &data[1..3] {
        now += MS;
        ack_to_sender(&mut a, now, d.seq() + mss, true);
    }
    assert_eq!(a.counters().ecn_window_reductions, 1);
    assert_eq!(a.ssthresh_bytes(), ssthresh);
    assert_eq!(a.counters().rx_ece_acks, 3);
    // The window acknowledged, new data sent: an ECE for it is a new congestion event.
    now += MS;
    let ack = harness::seg(
        80,
        40_000,
        SeqNumber(5_001),
        data[3].0.seq() + mss,
        TcpFlags::ACK,
    );
    a.handle_segment_ecn(now, &ack.repr(), 0, Ecn::NotEct);
    a.send(&pattern(2 * mss as usize)).unwrap();
    let next = drain(&mut a, now);
    assert!(next[0].0.has(TcpFlags::CWR));
    now += RTT_NS;
    ack_to_sender(&mut a, now, next[0].0.seq() + mss, true);
    assert_eq!(a.counters().ecn_window_reductions, 2);
}

#[test]
fn a_moved_connection_keeps_ecn_and_the_echo_it_owes() {
    let o = open(cfg(EcnMode::On), cfg(EcnMode::Accept));
    let (mut a, mut b, mut now) = (o.a, o.b, o.now);
    a.send(&pattern(1460)).unwrap();
    let mut data = drain(&mut a, now);
    data[0].1 = Ecn::Ce;
    now += RTT_NS;
    deliver(&mut b, now, &data);
    let _ = drain(&mut b, now);
    let snap = b.export(now).unwrap();
    let mut bytes = Vec::new();
    snap.encode(&mut bytes);
    let (decoded, _) = tcp::ConnectionSnapshot::decode(&bytes).unwrap();
    assert_eq!(decoded, snap);
    let mut moved = Connection::import(now, &decoded).unwrap();
    assert!(moved.ecn_negotiated());
    moved.flush_delayed_ack();
    // Window update or not, whatever it sends next still echoes the CE mark.
    let mut buf = vec![0u8; 2048];
    moved.send(b"x").unwrap();
    let r = moved.poll_transmit(now, &mut buf).unwrap();
    assert!(r.flags.contains(TcpFlags::ECE));
}

#[test]
fn a_simultaneous_open_does_not_negotiate_ecn() {
    let now = 1_000 * MS;
    let mut a = Connection::connect(now, &cfg(EcnMode::On), 40_000, 80, SeqNumber(1_000), 0);
    let mut b = Connection::connect(now, &cfg(EcnMode::On), 80, 40_000, SeqNumber(9_000), 0);
    let syn_a = drain(&mut a, now);
    let syn_b = drain(&mut b, now);
    deliver(&mut a, now + RTT_NS, &syn_b);
    deliver(&mut b, now + RTT_NS, &syn_a);
    let syn_ack_a = drain(&mut a, now + RTT_NS);
    let syn_ack_b = drain(&mut b, now + RTT_NS);
    for (s, e) in syn_ack_a.iter().chain(&syn_ack_b) {
        assert!(s.has(TcpFlags::SYN | TcpFlags::ACK));
        assert_eq!((ece_cwr(s), *e), ((false, false), Ecn::NotEct));
    }
    deliver(&mut a, now + 2 * RTT_NS, &syn_ack_b);
    deliver(&mut b, now + 2 * RTT_NS, &syn_ack_a);
    assert_eq!(a.state(), tcp::State::Established);
    assert!(!a.ecn_negotiated() && !b.ecn_negotiated());
    a.send(&pattern(100)).unwrap();
    let data = drain(&mut a, now + 2 * RTT_NS);
    assert!(
        data.iter()
            .all(|(s, e)| *e == Ecn::NotEct && !s.has(TcpFlags::ECE))
    );
}
