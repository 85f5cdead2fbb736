//! Listen-queue bookkeeping for the host stack: a bounded number of half-open connections
//! (SYN-RECEIVED) and of established connections waiting for `accept`, with SYN cookies
//! (RFC 4987 §3.6) taking over when the half-open queue is full.
//!
//! The stack owns the connections themselves; this only counts and decides.

/// What to do with an arriving SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynAction {
    /// Create a connection with [`crate::Connection::accept`].
    Accept,
    /// Answer statelessly with a SYN cookie ([`crate::isn::SynCookies`]).
    Cookie,
    /// Drop the SYN (queues full and cookies disabled); the peer will retry.
    Drop,
}

/// Counters of one listener.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BacklogCounters {
    pub syns_received: u64,
    pub syn_cookies_sent: u64,
    /// SYNs dropped because a queue was full and cookies are off.
    pub syns_dropped_queue_full: u64,
    /// Handshakes that completed while the accept queue was full (the stack resets them).
    pub accept_queue_overflows: u64,
}

/// The two queues of a listener.
///
/// Invariants: `half_open ≤ half_open_max`, `ready ≤ ready_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    half_open: u32,
    half_open_max: u32,
    ready: u32,
    ready_max: u32,
    cookies: bool,
    counters: BacklogCounters,
}

impl Backlog {
    /// A listener allowing `half_open_max` connections in SYN-RECEIVED and `ready_max`
    /// established connections not yet accepted; `cookies` enables SYN cookies on overflow.
    pub fn new(half_open_max: u32, ready_max: u32, cookies: bool) -> Backlog {
        Backlog {
            half_open: 0,
            half_open_max,
            ready: 0,
            ready_max,
            cookies,
            counters: BacklogCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &BacklogCounters {
        &self.counters
    }

    /// Connections in SYN-RECEIVED.
    pub fn half_open(&self) -> u32 {
        self.half_open
    }

    /// Established connections waiting for `accept`.
    pub fn ready(&self) -> u32 {
        self.ready
    }

    /// A SYN arrived for this listener.
    pub fn on_syn(&mut self) -> SynAction {
        self.counters.syns_received += 1;
        if self.half_open < self.half_open_max && self.ready < self.ready_max {
            self.half_open += 1;
            return SynAction::Accept;
        }
        if self.cookies && self.ready < self.ready_max {
            self.counters.syn_cookies_sent += 1;
            return SynAction::Cookie;
        }
        self.counters.syns_dropped_queue_full += 1;
        SynAction::Drop
    }

    /// A half-open connection reached ESTABLISHED. False when the accept queue is full: the
    /// stack should then reset it (counted).
    pub fn on_established(&mut self) -> bool {
        self.half_open = self.half_open.saturating_sub(1);
        self.enqueue_ready()
    }

    /// A cookie handshake completed (no half-open slot was used). False when the accept queue
    /// is full.
    pub fn on_cookie_established(&mut self) -> bool {
        self.enqueue_ready()
    }

    fn enqueue_ready(&mut self) -> bool {
        if self.ready < self.ready_max {
            self.ready += 1;
            true
        } else {
            self.counters.accept_queue_overflows += 1;
            false
        }
    }

    /// A half-open connection failed (RST, timeout).
    pub fn on_half_open_closed(&mut self) {
        self.half_open = self.half_open.saturating_sub(1);
    }

    /// The application accepted a ready connection.
    pub fn on_accepted(&mut self) {
        self.ready = self.ready.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_half_open_queue_switches_to_cookies() {
        let mut b = Backlog::new(2, 10, true);
        assert_eq!(b.on_syn(), SynAction::Accept);
        assert_eq!(b.on_syn(), SynAction::Accept);
        assert_eq!(b.on_syn(), SynAction::Cookie);
        assert_eq!(b.counters().syn_cookies_sent, 1);
        b.on_half_open_closed();
        assert_eq!(b.on_syn(), SynAction::Accept);
    }

    #[test]
    fn without_cookies_overflowing_syns_are_dropped_and_counted() {
        let mut b = Backlog::new(1, 10, false);
        assert_eq!(b.on_syn(), SynAction::Accept);
        assert_eq!(b.on_syn(), SynAction::Drop);
        assert_eq!(b.counters().syns_dropped_queue_full, 1);
    }

    #[test]
    fn accept_queue_is_bounded() {
        let mut b = Backlog::new(10, 1, true);
        assert_eq!(b.on_syn(), SynAction::Accept);
        assert_eq!(b.on_syn(), SynAction::Accept);
        assert!(b.on_established());
        assert!(!b.on_established());
        assert_eq!(b.counters().accept_queue_overflows, 1);
        // A full accept queue refuses even cookies.
        assert_eq!(b.on_syn(), SynAction::Drop);
        b.on_accepted();
        assert!(b.on_cookie_established());
    }
}

/// What a listening socket should do with a segment (RFC 9293 §3.10.7.2, LISTEN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenInput {
    /// A connection request: consult [`Backlog::on_syn`].
    Syn,
    /// A bare ACK: it may complete a SYN-cookie handshake
    /// ([`crate::isn::SynCookies::validate`]); if not, answer with [`reset_reply`].
    Ack,
    /// Anything else: drop (an incoming RST is ignored, a segment without SYN/ACK/RST is
    /// dropped).
    Ignore,
}

/// Classifies a segment that arrived for a listener.
pub fn classify_listen_segment(seg: &wire::tcp::TcpRepr<'_>) -> ListenInput {
    use wire::tcp::TcpFlags;
    let f = seg.flags;
    if f.contains(TcpFlags::RST) {
        // "An incoming RST segment could not be valid ... it should be ignored."
        ListenInput::Ignore
    } else if f.contains(TcpFlags::ACK) {
        // "Any acknowledgment is bad if it arrives on a connection still in the LISTEN state.
        // An acceptable reset segment should be formed" — unless it is a cookie.
        ListenInput::Ack
    } else if f.contains(TcpFlags::SYN) {
        ListenInput::Syn
    } else {
        ListenInput::Ignore
    }
}

/// The RST answering `seg` when no connection (or a listener) wants it (RFC 9293 §3.10.7.1):
/// `<SEQ=SEG.ACK><CTL=RST>` if it carried an ACK, else
/// `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`. A RST is never answered.
pub fn reset_reply(seg: &wire::tcp::TcpRepr<'_>) -> Option<wire::tcp::TcpRepr<'static>> {
    use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};
    if seg.flags.contains(TcpFlags::RST) {
        return None;
    }
    let seg_len = seg.payload.len() as u32
        + u32::from(seg.flags.contains(TcpFlags::SYN))
        + u32::from(seg.flags.contains(TcpFlags::FIN));
    let (seq, ack, flags) = if seg.flags.contains(TcpFlags::ACK) {
        (seg.ack_number, SeqNumber(0), TcpFlags::RST)
    } else {
        (
            SeqNumber(0),
            seg.seq_number + seg_len,
            TcpFlags::RST | TcpFlags::ACK,
        )
    };
    Some(TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        seq_number: seq,
        ack_number: ack,
        flags,
        window_len: 0,
        urgent_pointer: 0,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_blocks: [None; 4],
        timestamp: None,
        payload: &[],
    })
}

#[cfg(test)]
mod reply_tests {
    use super::*;
    use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

    fn seg(flags: TcpFlags, payload: &'static [u8]) -> TcpRepr<'static> {
        TcpRepr {
            src_port: 5000,
            dst_port: 80,
            seq_number: SeqNumber(100),
            ack_number: SeqNumber(777),
            flags,
            window_len: 100,
            urgent_pointer: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            payload,
        }
    }

    #[test]
    fn reset_reply_to_an_ack_takes_its_sequence_from_the_ack() {
        let r = reset_reply(&seg(TcpFlags::ACK, b"abc")).unwrap();
        assert_eq!((r.seq_number, r.flags), (SeqNumber(777), TcpFlags::RST));
        assert_eq!((r.src_port, r.dst_port), (80, 5000));
    }

    #[test]
    fn reset_reply_without_ack_acknowledges_the_whole_segment() {
        let r = reset_reply(&seg(TcpFlags::SYN | TcpFlags::FIN, b"abc")).unwrap();
        assert_eq!(r.seq_number, SeqNumber(0));
        assert_eq!(r.ack_number, SeqNumber(105));
        assert_eq!(r.flags, TcpFlags::RST | TcpFlags::ACK);
    }

    #[test]
    fn a_reset_is_never_answered() {
        assert_eq!(reset_reply(&seg(TcpFlags::RST | TcpFlags::ACK, b"")), None);
    }

    #[test]
    fn listener_classifies_rst_ack_syn() {
        assert_eq!(
            classify_listen_segment(&seg(TcpFlags::RST, b"")),
            ListenInput::Ignore
        );
        assert_eq!(
            classify_listen_segment(&seg(TcpFlags::ACK, b"")),
            ListenInput::Ack
        );
        assert_eq!(
            classify_listen_segment(&seg(TcpFlags::SYN, b"")),
            ListenInput::Syn
        );
        assert_eq!(
            classify_listen_segment(&seg(TcpFlags::FIN, b"")),
            ListenInput::Ignore
        );
    }
}
