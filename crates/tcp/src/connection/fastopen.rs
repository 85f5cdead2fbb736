//! TCP Fast Open (RFC 7413) in one connection: the server's child that accepted data in the
//! SYN, and the client whose SYN carries data.
//!
//! Server: the listener's decision is [`crate::fastopen::server_decision`]; the stack applies
//! it with [`Connection::accept_fast_open`] and puts the decision's cookie on the first
//! SYN-ACK itself (the TCB has no room for a cookie; a retransmitted SYN-ACK carries none,
//! as Linux's `tcp_rtx_synack`).
//!
//! Client: the stack decides (cookie cache, `stack::tcp_fastopen_client`) and calls
//! [`Connection::set_syn_data`] before the SYN leaves; the stack adds the cookie option to
//! that first SYN. The rules here, RFC 7413 §4.2.2 with Linux's choices where the RFC leaves
//! one (`tcp_send_syn_data`, `tcp_rcv_fastopen_synack`):
//! - the first SYN carries the send buffer's first bytes, at most the payload of a segment
//!   of the peer's MSS less [`SYN_DATA_OPTION_RESERVE_BYTES`];
//! - a retransmitted SYN carries neither data nor (the stack's part) the option;
//! - the SYN-ACK may acknowledge all, part or none of the data; what it does not is sent
//!   again at once as ordinary data (counted as retransmitted), without waiting for a
//!   timeout; an acknowledgment beyond what was sent is refused with a RST as for any SYN.

use super::*;
use crate::fastopen::{SYN_DATA_OPTION_RESERVE_BYTES, SynDecision};

impl Connection {
    /// Passive open with the listener's Fast Open decision: as [`Connection::accept`], and
    /// then, when `decision.accept_data`, the SYN's data is queued for the application
    /// (as much as the receive buffer holds; the SYN-ACK acknowledges exactly that) and the
    /// connection is a Fast Open child ([`Connection::is_fast_open_child`]). Returns the
    /// connection and the bytes of SYN data accepted (`TCPI_OPT_SYN_DATA` when nonzero).
    pub fn accept_fast_open(
        now: u64,
        config: impl IntoSharedConfig,
        syn: &TcpRepr<'_>,
        iss: SeqNumber,
        ts_offset: u32,
        decision: SynDecision,
    ) -> Result<(Connection, usize), AcceptError> {
        let mut c = Connection::accept(now, config, syn, iss, ts_offset)?;
        let mut n = 0;
        if decision.accept_data {
            c.out.fast_open = FastOpenRole::Child;
            n = c.recv_buf.push(syn.payload);
            if n > 0 {
                c.rcv.nxt += n as u32;
                c.rcv.adv = c.rcv.nxt;
                c.ts.last_ack_sent = c.rcv.nxt;
                c.count_hot(n as u32, |k| &mut k.rx_payload_bytes);
                c.push_event(Event::Readable);
            }
        }
        Ok((c, n))
    }

    /// True for a Fast Open child: it was allowed to accept data in its SYN, so it may be
    /// handed to the application, and may send, while still in SYN-RECEIVED.
    pub fn is_fast_open_child(&self) -> bool {
        self.out.fast_open == FastOpenRole::Child
    }

    /// Active Fast Open: the first SYN carries the send buffer's first bytes (those queued by
    /// the time it leaves), at most the payload of a segment of `peer_mss_hint` — the MSS the
    /// server announced last time, from the client's cache; our own MSS without one — capped
    /// by our MSS, less [`SYN_DATA_OPTION_RESERVE_BYTES`]. The hint stands as the send MSS
    /// until the SYN-ACK announces the real one. False, and nothing changes, unless the
    /// connection is an active open whose SYN has not left yet.
    pub fn set_syn_data(&mut self, peer_mss_hint: Option<u16>) -> bool {
        if self.state != State::SynSent
            || self.snd.nxt != self.snd.iss
            || self.snd.max != self.snd.iss
        {
            return false;
        }
        self.out.fast_open = FastOpenRole::SynData;
        self.opts.snd_mss = peer_mss_hint
            .unwrap_or(self.config.mss_bytes)
            .min(self.config.mss_bytes)
            .max(1);
        true
    }

    /// Bytes of data the SYN carried, while the connection is in SYN-SENT (0 otherwise, and
    /// for an ordinary SYN): what the SYN-ACK may acknowledge beyond the SYN.
    pub fn syn_data_sent_bytes(&self) -> u32 {
        if self.state != State::SynSent || self.out.fast_open != FastOpenRole::SynData {
            return 0;
        }
        fwd(self.snd.iss + 1, self.snd.max)
    }

    /// The SYN (or SYN-ACK), with data when it is an active Fast Open's first SYN
    /// ([`Connection::set_syn_data`]): copied into `buf`, and SND.NXT past it.
    pub(super) fn syn_segment_with_data<'b>(&mut self, now: u64, buf: &'b mut [u8]) -> TcpRepr<'b> {
        let mut r: TcpRepr<'b> = self.syn_segment(now);
        let first_syn = self.timers.syn_retries == 0 && self.snd.max == self.snd.iss + 1;
        if self.state != State::SynSent || self.out.fast_open != FastOpenRole::SynData || !first_syn
        {
            return r;
        }
        let room = usize::from(
            self.opts
                .snd_mss
                .saturating_sub(SYN_DATA_OPTION_RESERVE_BYTES),
        );
        let len = self.send_buf.len().min(room).min(buf.len());
        let Some(out) = buf.get_mut(..len) else {
            return r;
        };
        let n = self.send_buf.read_at(0, out);
        if n == 0 {
            return r;
        }
        self.snd.nxt = self.snd.iss + 1 + n as u32;
        self.snd.max = self.snd.nxt;
        self.count_hot(n as u32, |k| &mut k.tx_payload_bytes);
        let (filled, _) = buf.split_at(n);
        r.payload = filled;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastopen::SynDecision;
    use wire::tcp::TcpFlags;

    fn syn(payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            max_seg_size: Some(1460),
            payload,
            ..TcpRepr::bare(
                40000,
                80,
                SeqNumber(1000),
                SeqNumber(0),
                TcpFlags::SYN,
                65535,
            )
        }
    }

    fn ack(seq: u32, ack: u32, payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            seq_number: SeqNumber(seq),
            ack_number: SeqNumber(ack),
            flags: TcpFlags::ACK,
            max_seg_size: None,
            ..syn(payload)
        }
    }

    const ACCEPT: SynDecision = SynDecision {
        accept_data: true,
        syn_ack_option: None,
    };

    #[test]
    fn accepted_syn_data_is_readable_and_acknowledged_by_the_syn_ack() {
        let cfg = Config::default();
        let (mut c, n) =
            Connection::accept_fast_open(0, &cfg, &syn(b"hello"), SeqNumber(5000), 0, ACCEPT)
                .unwrap();
        assert!(c.is_fast_open_child());
        assert_eq!(n, 5);
        assert_eq!(c.state(), State::SynReceived);
        let mut out = [0u8; 16];
        assert_eq!(c.recv(&mut out), Ok(5));
        assert_eq!(&out[..5], b"hello");
        let mut buf = [0u8; 1500];
        let sa = c.poll_transmit(0, &mut buf).unwrap();
        assert!(sa.flags.contains(TcpFlags::SYN | TcpFlags::ACK));
        assert_eq!(sa.ack_number, SeqNumber(1006));
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn a_child_sends_data_in_syn_received_and_the_handshake_ack_covers_it() {
        let cfg = Config::default();
        let (mut c, _) =
            Connection::accept_fast_open(0, &cfg, &syn(b"req"), SeqNumber(5000), 0, ACCEPT)
                .unwrap();
        let mut buf = [0u8; 1500];
        c.poll_transmit(0, &mut buf).unwrap();
        assert_eq!(c.send(b"reply"), Ok(5));
        let d = c.poll_transmit(0, &mut buf).unwrap();
        assert_eq!(d.seq_number, SeqNumber(5001));
        assert_eq!(d.payload, b"reply");
        assert_eq!(c.state(), State::SynReceived);
        // The client's ACK covers the SYN and the reply at once.
        c.handle_segment(1, &ack(1004, 5006, b""));
        assert_eq!(c.state(), State::Established);
        assert_eq!(c.send_queue_bytes(), 0);
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn without_accepted_data_syn_data_is_dropped_and_nothing_is_sent_before_the_ack() {
        let cfg = Config::default();
        let decision = SynDecision {
            accept_data: false,
            syn_ack_option: wire::tcp::FastOpenOption::with_cookie(&[1; 8], false),
        };
        let (mut c, n) =
            Connection::accept_fast_open(0, &cfg, &syn(b"hello"), SeqNumber(5000), 0, decision)
                .unwrap();
        assert_eq!(n, 0);
        assert!(!c.is_fast_open_child());
        let mut buf = [0u8; 1500];
        let sa = c.poll_transmit(0, &mut buf).unwrap();
        assert_eq!(sa.ack_number, SeqNumber(1001));
        assert_eq!(c.send(b"x"), Ok(1));
        assert!(c.poll_transmit(0, &mut buf).is_none());
    }

    // ---- client side

    const ISS: u32 = 7000;

    fn client(data: &[u8], hint: Option<u16>) -> Connection {
        let cfg = Config {
            mss_bytes: 1460,
            ..Config::default()
        };
        let mut c = Connection::connect(0, &cfg, 80, 40000, SeqNumber(ISS), 0);
        assert_eq!(c.send(data), Ok(data.len()));
        assert!(c.set_syn_data(hint));
        c
    }

    fn syn_ack(ack: u32, mss: u16) -> TcpRepr<'static> {
        TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq_number: SeqNumber(500),
            ack_number: SeqNumber(ack),
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window_len: 65535,
            max_seg_size: Some(mss),
            ..syn(b"")
        }
    }

    #[test]
    fn frag_needed_for_a_syn_with_data_resends_the_syn_at_once_without_it() {
        // Linux `tcp_simple_retransmit` for SYN data: the SYN goes again now, bare, and the
        // data follows the handshake at the path's size.
        let mut c = client(&[7u8; 2000], Some(1040));
        let mut buf = [0u8; 1500];
        assert_eq!(c.poll_transmit(0, &mut buf).unwrap().payload.len(), 1000);
        assert!(c.poll_transmit(0, &mut buf).is_none());
        assert!(c.reduce_path_mss(760));
        let again = c.poll_transmit(1, &mut buf).expect("the SYN at once");
        assert_eq!(again.flags, TcpFlags::SYN);
        assert!(again.payload.is_empty());
        assert_eq!(again.max_seg_size, Some(1460), "announced MSS unchanged");
        // The SYN-ACK acknowledges only the SYN and sets the send MSS anew (RFC 1191 §3.1:
        // the path is learnt again from the next error): the data goes again from ISS + 1.
        c.handle_segment(2, &syn_ack(ISS + 1, 1040));
        let d = c.poll_transmit(2, &mut buf).expect("data");
        assert_eq!((d.seq_number, d.payload.len()), (SeqNumber(ISS + 1), 1000));
        assert_eq!(c.invariant_violation(), None);
        // With the announced MSS capped too (Linux), SYN and data follow the path.
        let mut c = client(&[7u8; 2000], Some(1040));
        c.poll_transmit(0, &mut buf).expect("syn with data");
        assert!(c.cap_announced_mss(760));
        assert!(c.reduce_path_mss(760));
        assert_eq!(
            c.poll_transmit(1, &mut buf).unwrap().max_seg_size,
            Some(760)
        );
        c.handle_segment(2, &syn_ack(ISS + 1, 1040));
        let d = c.poll_transmit(2, &mut buf).expect("data");
        assert_eq!((d.seq_number, d.payload.len()), (SeqNumber(ISS + 1), 760));
        // A bare SYN is not resent for a path MTU (nothing of it was too large).
        let cfg = Config {
            mss_bytes: 1460,
            ..Config::default()
        };
        let mut bare = Connection::connect(0, &cfg, 80, 40000, SeqNumber(ISS), 0);
        bare.poll_transmit(0, &mut buf).expect("syn");
        bare.reduce_path_mss(500);
        assert!(bare.poll_transmit(0, &mut buf).is_none());
        // `cap_announced_mss` lowers what later SYNs announce, in SYN-SENT only.
        assert!(bare.cap_announced_mss(960));
        bare.handle_timeout(5_000_000_000);
        let rto_syn = bare
            .poll_transmit(5_000_000_000, &mut buf)
            .expect("SYN again");
        assert_eq!(rto_syn.max_seg_size, Some(960));
    }

    #[test]
    fn the_first_syn_carries_queued_data_up_to_the_hinted_mss_less_the_option_reserve() {
        let mut c = client(&[7u8; 2000], Some(940));
        let mut buf = [0u8; 1500];
        let s = c.poll_transmit(0, &mut buf).unwrap();
        assert_eq!(s.flags, TcpFlags::SYN);
        assert_eq!(s.seq_number, SeqNumber(ISS));
        assert_eq!(s.payload.len(), 900);
        assert_eq!(c.syn_data_sent_bytes(), 900);
        // Without a hint our own MSS sizes it: 1460 - 40.
        let mut c = client(&[7u8; 2000], None);
        assert_eq!(c.poll_transmit(0, &mut buf).unwrap().payload.len(), 1420);
        // Never more than the hint allows even when ours is smaller: the smaller wins.
        let mut c = client(&[7u8; 2000], Some(10_000));
        assert_eq!(c.poll_transmit(0, &mut buf).unwrap().payload.len(), 1420);
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn syn_data_the_syn_ack_acknowledges_leaves_the_buffer_and_the_rest_follows_it() {
        let mut c = client(&[7u8; 2000], Some(940));
        let mut buf = [0u8; 1500];
        c.poll_transmit(0, &mut buf).unwrap();
        c.handle_segment(10, &syn_ack(ISS + 901, 1460));
        assert_eq!(c.state(), State::Established);
        assert_eq!(c.send_queue_bytes(), 1100);
        let d = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!(d.seq_number, SeqNumber(ISS + 901));
        assert_eq!(d.payload.len(), 1100);
        assert_eq!(c.counters().retransmitted_segments, 0);
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn syn_data_the_syn_ack_does_not_acknowledge_is_sent_again_at_once() {
        let mut c = client(&[7u8; 700], None);
        let mut buf = [0u8; 1500];
        c.poll_transmit(0, &mut buf).unwrap();
        c.handle_segment(10, &syn_ack(ISS + 1, 1040));
        assert_eq!(c.state(), State::Established);
        let d = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!(d.seq_number, SeqNumber(ISS + 1));
        assert_eq!(d.payload.len(), 700);
        assert!(d.flags.contains(TcpFlags::ACK));
        assert_eq!(c.counters().retransmitted_segments, 1);
        // The data segment carried the handshake's ACK: no pure ACK follows.
        assert!(c.poll_transmit(10, &mut buf).is_none());
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn unacknowledged_syn_data_is_resent_whole_up_to_where_the_syn_data_ended() {
        // Linux resends the SYN's data buffer whole (`syn-data-only-syn-acked`: `1:1421`,
        // then new data from 1421), and its short tail is no new data for Nagle to hold
        // (`syn-data-partial-or-over-ack`: `101:1421` after a smaller MSS).
        let mut c = client(&[7u8; 3000], None);
        let mut buf = [0u8; 1500];
        assert_eq!(c.poll_transmit(0, &mut buf).unwrap().payload.len(), 1420);
        c.handle_segment(10, &syn_ack(ISS + 1, 1460));
        let d = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!((d.seq_number, d.payload.len()), (SeqNumber(ISS + 1), 1420));
        let d = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!(d.seq_number, SeqNumber(ISS + 1421), "new data follows");
        let mut c = client(&[7u8; 1420], None);
        c.poll_transmit(0, &mut buf).unwrap();
        c.handle_segment(10, &syn_ack(ISS + 101, 1000));
        let first = c.poll_transmit(10, &mut buf).unwrap();
        let end = first.seq_number + first.payload.len() as u32;
        assert!(end.lt(SeqNumber(ISS + 1421)), "one MSS at a time");
        let tail = c.poll_transmit(10, &mut buf).expect("the tail is not held");
        assert_eq!(tail.seq_number, end);
        assert_eq!(
            tail.seq_number + tail.payload.len() as u32,
            SeqNumber(ISS + 1421)
        );
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn syn_data_sent_again_counts_in_tcpi_retrans_until_acknowledged() {
        // Linux marks the SYN data the SYN-ACK left unacknowledged lost and retransmits it
        // (`tcp_rcv_fastopen_synack`): `tcpi_retrans` counts it (`syn-data-only-syn-acked`).
        let mut c = client(&[7u8; 3000], None);
        let mut buf = [0u8; 1500];
        assert_eq!(c.poll_transmit(0, &mut buf).unwrap().payload.len(), 1420);
        let sa = TcpRepr {
            sack_permitted: true,
            ..syn_ack(ISS + 1, 1460)
        };
        c.handle_segment(10, &sa);
        assert_eq!(c.invariant_violation(), None, "RACK covers the SYN data");
        let d = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!((d.seq_number, d.payload.len()), (SeqNumber(ISS + 1), 1420));
        let d = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!(d.seq_number, SeqNumber(ISS + 1421), "new data follows");
        let info = c.tcp_info(10);
        assert_eq!((info.retrans, info.unacked), (Some(1), 2));
        c.handle_segment(20, &ack(501, ISS + 1421 + 1460, b""));
        assert_eq!(c.tcp_info(20).retrans, Some(0));
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn data_and_fin_a_syn_ack_carries_are_taken_after_its_sequence_number() {
        // RFC 9293 §3.10.7.3: text in a SYN-ACK is processed as in a later segment
        // (`fastopen/client/synack-data`: a Fast Open server answers with data).
        let mut c = client(&[7u8; 100], None);
        let mut buf = [0u8; 1500];
        c.poll_transmit(0, &mut buf).unwrap();
        let sa = TcpRepr {
            payload: &[9u8; 40],
            flags: TcpFlags::SYN | TcpFlags::ACK | TcpFlags::FIN,
            ..syn_ack(ISS + 101, 1460)
        };
        c.handle_segment(10, &sa);
        assert_eq!(c.state(), State::CloseWait);
        let mut out = [0u8; 64];
        assert_eq!(c.recv(&mut out), Ok(40));
        assert_eq!(&out[..40], &[9u8; 40]);
        assert_eq!(c.recv(&mut out), Err(Error::Finished));
        let a = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!(
            a.ack_number,
            SeqNumber(500 + 1 + 40 + 1),
            "data and FIN acknowledged"
        );
        assert_eq!(c.counters().rx_duplicate_bytes, 0);
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn partly_acknowledged_syn_data_resends_only_the_rest() {
        let mut c = client(&[7u8; 18], None);
        let mut buf = [0u8; 1500];
        c.poll_transmit(0, &mut buf).unwrap();
        c.handle_segment(10, &syn_ack(ISS + 10, 1460));
        let d = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!(d.seq_number, SeqNumber(ISS + 10));
        assert_eq!(d.payload.len(), 9);
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn a_retransmitted_syn_carries_no_data_and_the_data_follows_the_handshake() {
        let mut c = client(&[7u8; 1000], None);
        let mut buf = [0u8; 1500];
        assert_eq!(c.poll_transmit(0, &mut buf).unwrap().payload.len(), 1000);
        let rto = c.poll_timeout().unwrap();
        c.handle_timeout(rto);
        let s = c.poll_transmit(rto, &mut buf).unwrap();
        assert_eq!(s.flags, TcpFlags::SYN);
        assert!(s.payload.is_empty());
        // The server saw only the plain SYN.
        c.handle_segment(rto + 10, &syn_ack(ISS + 1, 1460));
        let d = c.poll_transmit(rto + 10, &mut buf).unwrap();
        assert_eq!((d.seq_number, d.payload.len()), (SeqNumber(ISS + 1), 1000));
        assert_eq!(c.invariant_violation(), None);
    }

    #[test]
    fn an_acknowledgment_beyond_the_syn_data_is_refused_with_a_reset() {
        let mut c = client(&[7u8; 100], None);
        let mut buf = [0u8; 1500];
        c.poll_transmit(0, &mut buf).unwrap();
        c.handle_segment(10, &syn_ack(ISS + 100_101, 1040));
        assert_eq!(c.state(), State::SynSent);
        let r = c.poll_transmit(10, &mut buf).unwrap();
        assert_eq!(r.flags, TcpFlags::RST);
        assert_eq!(r.seq_number, SeqNumber(ISS + 100_101));
    }

    #[test]
    fn syn_data_is_refused_once_the_syn_left_and_on_passive_opens() {
        let cfg = Config::default();
        let mut c = Connection::connect(0, &cfg, 80, 40000, SeqNumber(ISS), 0);
        let mut buf = [0u8; 1500];
        c.poll_transmit(0, &mut buf).unwrap();
        assert!(!c.set_syn_data(None));
        let (mut p, _) =
            Connection::accept_fast_open(0, &cfg, &syn(b""), SeqNumber(5000), 0, ACCEPT).unwrap();
        assert!(!p.set_syn_data(None));
        // An ordinary SYN reports no SYN data.
        assert_eq!(c.syn_data_sent_bytes(), 0);
    }
}
