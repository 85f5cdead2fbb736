//! TCP Fast Open (RFC 7413) in one connection: the server's child that accepted data in the
//! SYN. The listener's decision is [`crate::fastopen::server_decision`]; the stack applies
//! it with [`Connection::accept_fast_open`] and puts the decision's cookie on the first
//! SYN-ACK itself (the TCB has no room for a cookie; a retransmitted SYN-ACK carries none,
//! as Linux's `tcp_rtx_synack`).

use super::*;
use crate::fastopen::SynDecision;

impl Connection {
    /// Passive open with the listener's Fast Open decision: as [`Connection::accept`], and
    /// then, when `decision.accept_data`, the SYN's data is queued for the application
    /// (as much as the receive buffer holds; the SYN-ACK acknowledges exactly that) and the
    /// connection is a Fast Open child ([`Connection::is_fast_open_child`]). Returns the
    /// connection and the bytes of SYN data accepted (`TCPI_OPT_SYN_DATA` when nonzero).
    pub fn accept_fast_open(
        now: u64,
        config: &Config,
        syn: &TcpRepr<'_>,
        iss: SeqNumber,
        ts_offset: u32,
        decision: SynDecision,
    ) -> Result<(Connection, usize), AcceptError> {
        let mut c = Connection::accept(now, config, syn, iss, ts_offset)?;
        let mut n = 0;
        if decision.accept_data {
            c.out.fast_open_child = true;
            n = c.recv_buf.push(syn.payload);
            if n > 0 {
                c.rcv.nxt += n as u32;
                c.rcv.adv = c.rcv.nxt;
                c.ts.last_ack_sent = c.rcv.nxt;
                c.counters.rx_payload_bytes += n as u64;
                c.push_event(Event::Readable);
            }
        }
        Ok((c, n))
    }

    /// True for a Fast Open child: it was allowed to accept data in its SYN, so it may be
    /// handed to the application, and may send, while still in SYN-RECEIVED.
    pub fn is_fast_open_child(&self) -> bool {
        self.out.fast_open_child
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastopen::SynDecision;
    use wire::tcp::TcpFlags;

    fn syn(payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq_number: SeqNumber(1000),
            ack_number: SeqNumber(0),
            flags: TcpFlags::SYN,
            window_len: 65535,
            urgent_pointer: 0,
            max_seg_size: Some(1460),
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            fast_open: None,
            payload,
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
}
