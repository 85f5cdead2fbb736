//! A retransmission of the SYN or SYN-ACK requested (by a duplicate SYN or a timeout) and the
//! segment completing the handshake arriving before that retransmission left: the connection
//! must come out of the handshake with SND.NXT at SND.UNA, never behind it.
//!
//! Found by the simulator's seed 1005021 (`many`, 2.4 % loss): the server's first SYN-ACK was
//! parked behind ARP, the client retransmitted its SYN and then, having got the SYN-ACK, sent
//! its request with FIN; the server read both in one poll. The duplicate SYN rewound SND.NXT to
//! ISS for a SYN-ACK retransmission, the ACK then took SND.UNA to ISS+1, and with
//! SND.NXT < SND.UNA the response and FIN never left and no timer was armed: the server sat in
//! LAST-ACK and the client in FIN-WAIT-2 for ever.

use tcp::{Config, Connection, State};
use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn seg(seq: u32, ack: Option<u32>, flags: TcpFlags, payload: &[u8]) -> TcpRepr<'_> {
    TcpRepr {
        max_seg_size: Some(1460),
        payload,
        ..TcpRepr::bare(
            49161,
            5001,
            SeqNumber(seq),
            SeqNumber(ack.unwrap_or(0)),
            if ack.is_some() {
                flags | TcpFlags::ACK
            } else {
                flags
            },
            16384,
        )
    }
}

/// Every segment the connection has to send now: (seq, flags, payload length).
fn drain(c: &mut Connection, now: u64) -> Vec<(u32, TcpFlags, usize)> {
    let mut buf = [0u8; 2048];
    let mut out = Vec::new();
    while let Some(r) = c.poll_transmit(now, &mut buf) {
        out.push((r.seq_number.0, r.flags, r.payload.len()));
        assert!(out.len() < 100, "output does not end");
    }
    out
}

#[test]
fn a_duplicate_syn_then_the_handshake_ack_before_output_leaves_snd_nxt_at_snd_una() {
    let cfg = Config::default();
    let iss = 5000;
    let syn = seg(1000, None, TcpFlags::SYN, &[]);
    let mut c = Connection::accept(0, &cfg, &syn, SeqNumber(iss), 0).expect("accept");
    let first = drain(&mut c, 0);
    assert!(first[0].1.contains(TcpFlags::SYN | TcpFlags::ACK));

    // The peer's retransmitted SYN (our SYN-ACK looked lost to it), then — before we sent
    // anything — its request with FIN, acknowledging our SYN.
    c.handle_segment(MS, &syn);
    let request = [7u8; 37];
    c.handle_segment(
        MS,
        &seg(1001, Some(iss + 1), TcpFlags::PSH | TcpFlags::FIN, &request),
    );
    assert_eq!(c.state(), State::CloseWait);
    assert_eq!(c.invariant_violation(), None);
    let (una, nxt, _) = c.sequence_state();
    assert_eq!((una, nxt), (SeqNumber(iss + 1), SeqNumber(iss + 1)));

    // The application answers and closes: the response and FIN go out, behind no SYN-ACK, and
    // the retransmission timer watches them.
    let mut got = [0u8; 64];
    assert_eq!(c.recv(&mut got).expect("request"), 37);
    assert_eq!(c.send(&[9u8; 37]).expect("send"), 37);
    c.close().expect("close");
    let out = drain(&mut c, MS);
    assert!(
        out.iter().all(|s| !s.1.contains(TcpFlags::SYN)),
        "a SYN-ACK after the handshake completed: {out:?}"
    );
    assert!(
        out.iter()
            .any(|s| s.0 == iss + 1 && s.2 == 37 && s.1.contains(TcpFlags::FIN)),
        "the response with FIN did not leave: {out:?}"
    );
    assert_eq!(c.state(), State::LastAck);
    assert!(c.poll_timeout().is_some_and(|t| t <= MS + 2 * S));
    assert_eq!(c.invariant_violation(), None);
}

#[test]
fn a_syn_timeout_then_the_syn_ack_before_output_leaves_snd_nxt_at_snd_una() {
    let cfg = Config::default();
    let iss = 7000;
    let mut c = Connection::connect(0, &cfg, 49161, 5001, SeqNumber(iss), 0);
    let first = drain(&mut c, 0);
    assert!(first[0].1.contains(TcpFlags::SYN));
    // The SYN times out (a retransmission is now owed) and the SYN-ACK arrives before it left.
    let rto_at = c.poll_timeout().expect("SYN timer");
    c.handle_timeout(rto_at);
    let mut syn_ack = seg(3000, Some(iss + 1), TcpFlags::SYN, &[]);
    (syn_ack.src_port, syn_ack.dst_port) = (5001, 49161);
    c.handle_segment(rto_at, &syn_ack);
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.invariant_violation(), None);
    assert_eq!(c.send(b"GET").expect("send"), 3);
    let out = drain(&mut c, rto_at);
    assert!(
        out.iter().all(|s| !s.1.contains(TcpFlags::SYN)),
        "a SYN after the handshake completed: {out:?}"
    );
    assert!(
        out.iter().any(|s| s.0 == iss + 1 && s.2 == 3),
        "the data did not leave: {out:?}"
    );
}
