//! The decisions of a listening socket (RFC 9293 §3.10.7.1–§3.10.7.2): how to classify a
//! segment that reached a listener, the RST that answers an unwanted segment, and whether a
//! SYN is accepted, answered with a SYN cookie (RFC 4987 §3.6) or dropped given a bounded
//! number of half-open connections (SYN-RECEIVED) and of established ones waiting for
//! `accept`.
//!
//! The host stack owns the listeners and their connections and counts the queues from the
//! connections' states; this module only decides.

/// What to do with an arriving SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynAction {
    /// Create a connection with [`crate::Connection::accept`].
    Accept,
    /// Answer statelessly with a SYN cookie ([`crate::isn::SynCookies`]).
    Cookie,
    /// Drop the SYN (queues full, and cookies disabled or no room to accept); the peer will
    /// retry.
    Drop,
}

/// How full a listener is. The stack owns the connections and counts them from their states
/// when a segment arrives, so this holds no state between calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenLoad {
    /// Connections in SYN-RECEIVED.
    pub half_open: usize,
    /// Established connections waiting for `accept`.
    pub ready: usize,
}

/// The bounds of a listener's two queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenLimits {
    /// Connections in SYN-RECEIVED before SYNs are answered with cookies (or dropped).
    pub half_open_max: usize,
    /// Established connections not yet accepted (the accept backlog).
    pub ready_max: usize,
    /// Answer SYNs past `half_open_max` with SYN cookies instead of dropping them.
    pub cookies: bool,
}

/// Decides what to do with a SYN: a full accept queue drops it (even a cookie could not be
/// accepted); past the half-open bound a cookie answers it, or it is dropped without cookies;
/// otherwise a connection is created.
pub fn admit_syn(load: ListenLoad, limits: ListenLimits) -> SynAction {
    if load.ready >= limits.ready_max {
        SynAction::Drop
    } else if load.half_open < limits.half_open_max {
        SynAction::Accept
    } else if limits.cookies {
        SynAction::Cookie
    } else {
        SynAction::Drop
    }
}

/// True when a connection completed from a valid SYN cookie fits the accept queue; when it
/// does not, the stack drops the ACK and the peer's retransmission may fit later.
pub fn admit_cookie(load: ListenLoad, limits: ListenLimits) -> bool {
    load.ready < limits.ready_max
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ListenLimits = ListenLimits {
        half_open_max: 2,
        ready_max: 10,
        cookies: true,
    };

    fn load(half_open: usize, ready: usize) -> ListenLoad {
        ListenLoad { half_open, ready }
    }

    #[test]
    fn full_half_open_queue_switches_to_cookies() {
        assert_eq!(admit_syn(load(0, 0), LIMITS), SynAction::Accept);
        assert_eq!(admit_syn(load(1, 0), LIMITS), SynAction::Accept);
        assert_eq!(admit_syn(load(2, 0), LIMITS), SynAction::Cookie);
    }

    #[test]
    fn without_cookies_overflowing_syns_are_dropped() {
        let limits = ListenLimits {
            cookies: false,
            ..LIMITS
        };
        assert_eq!(admit_syn(load(1, 0), limits), SynAction::Accept);
        assert_eq!(admit_syn(load(2, 0), limits), SynAction::Drop);
    }

    #[test]
    fn accept_queue_is_bounded() {
        // A full accept queue refuses even cookies.
        assert_eq!(admit_syn(load(0, 10), LIMITS), SynAction::Drop);
        assert_eq!(admit_syn(load(2, 10), LIMITS), SynAction::Drop);
        assert!(!admit_cookie(load(0, 10), LIMITS));
        assert!(admit_cookie(load(5, 9), LIMITS));
    }
}

/// What a listening socket should do with a segment (RFC 9293 §3.10.7.2, LISTEN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenInput {
    /// A connection request: consult [`admit_syn`].
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
    Some(TcpRepr::bare(
        seg.dst_port,
        seg.src_port,
        seq,
        ack,
        flags,
        0,
    ))
}

#[cfg(test)]
mod reply_tests {
    use super::*;
    use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

    fn seg(flags: TcpFlags, payload: &'static [u8]) -> TcpRepr<'static> {
        TcpRepr {
            payload,
            ..TcpRepr::bare(5000, 80, SeqNumber(100), SeqNumber(777), flags, 100)
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
