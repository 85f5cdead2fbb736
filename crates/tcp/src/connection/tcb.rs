//! The groups of the transmission control block: [`Connection`](super::Connection) holds one
//! of each, and a [`ConnectionSnapshot`](crate::ConnectionSnapshot) carries them whole (see
//! `snapshot.rs`: `Connection::export` destructures the TCB without `..`, so a field added
//! here moves with its group, and a group added to the TCB does not compile until the
//! snapshot decides its fate).
//!
//! Times are absolute nanoseconds on the owning engine's clock; deadlines are `u64::MAX`
//! (`NEVER`) when disarmed. Each group with times has a `rebased` method that moves them to
//! another engine's clock, keeping every time's distance to "now".

use wire::tcp::{SackBlock, SeqNumber};

use super::{AckDue, CloseReason, NEVER};
use crate::config::NS_PER_MS;

/// A past instant on a clock reading `from`, moved to one reading `to` at the same moment:
/// it keeps its age (saturating at the new clock's origin).
pub(crate) fn rebase_instant(t: u64, from: u64, to: u64) -> u64 {
    to.saturating_sub(from.saturating_sub(t))
}

/// A deadline moved like [`rebase_instant`], keeping the time remaining; `NEVER` stays.
pub(crate) fn rebase_deadline(t: u64, from: u64, to: u64) -> u64 {
    if t == NEVER {
        NEVER
    } else {
        to.saturating_add(t.saturating_sub(from)).min(NEVER - 1)
    }
}

/// Send sequence space (RFC 9293 §3.3.1).
///
/// Invariants (wrapping comparisons): `una ≤ nxt ≤ max`; `buf_seq` is the sequence number
/// of the first byte in the send buffer and equals `una` once the SYN is acknowledged (until
/// our FIN is, after which `una = buf_seq + 1`); `wnd ≤ max_wnd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct SendSeq {
    /// SND.UNA: oldest unacknowledged sequence number.
    pub una: SeqNumber,
    /// SND.NXT: next sequence number to send (pulled back to SND.UNA after an RTO).
    pub nxt: SeqNumber,
    /// Highest sequence number sent plus one.
    pub max: SeqNumber,
    /// SND.WND: the peer's window in bytes, already scaled.
    pub wnd: u32,
    /// Sequence number of the first byte held in the send buffer.
    pub buf_seq: SeqNumber,
    /// SND.WL1: segment sequence number of the last window update.
    pub wl1: SeqNumber,
    /// SND.WL2: segment acknowledgment number of the last window update.
    pub wl2: SeqNumber,
    /// Largest window the peer ever offered (MAX.SND.WND of RFC 5961 §5.2).
    pub max_wnd: u32,
    /// ISS: our initial sequence number.
    pub iss: SeqNumber,
}

/// Receive sequence space (RFC 9293 §3.3.1).
///
/// Invariants (wrapping comparisons): `nxt ≤ adv` once synchronized, and `adv` never moves
/// left; `adv − nxt` plus the unread bytes fits the receive buffer (we never advertise room
/// we do not have).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct RecvSeq {
    /// RCV.NXT: next sequence number expected.
    pub nxt: SeqNumber,
    /// Right edge of the window we advertised (RCV.NXT + RCV.WND when last sent).
    pub adv: SeqNumber,
    /// Largest payload received so far, for "every second full-sized segment".
    pub mss_seen: u16,
    /// IRS: the peer's initial sequence number.
    pub irs: SeqNumber,
}

/// The options negotiated on the SYNs (RFC 9293 §3.7.1, RFC 7323, RFC 2018).
///
/// Invariants: both shifts ≤ 14 (RFC 7323 §2.3) and 0 unless both SYNs carried the option;
/// `snd_mss ≥ 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Effective send MSS (peer's MSS, floored, capped by ours), before options.
    pub snd_mss: u16,
    /// Shift applied to the peer's window field.
    pub snd_wscale: u8,
    /// Shift the peer applies to ours.
    pub rcv_wscale: u8,
    /// Timestamps (RFC 7323) in use.
    pub ts_ok: bool,
    /// SACK (RFC 2018) in use.
    pub sack_ok: bool,
    /// What the peer offered in its SYN, for our SYN-ACK (passive open); not carried by a
    /// snapshot (the handshake is over).
    pub peer_offered_ws: Option<u8>,
}

/// ECN state (RFC 3168 §6.1): what was negotiated, what the receiver owes its peer and
/// where the sender's window reduction stands. Eight bytes.
///
/// Invariants: no bit but [`ecn_flag::REQUESTED`] is set unless [`ecn_flag::OK`] is (and
/// `REQUESTED` only before the handshake completes); `IN_CWR` implies the connection is not
/// in loss recovery; `cwr_end` means something only while `IN_CWR` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcnState {
    /// [`ecn_flag`] bits.
    pub flags: u8,
    /// The codepoint of the segment being processed (set by `handle_segment_ecn` on an ECN
    /// connection, read once its text was taken); not carried by a snapshot.
    pub rx: wire::Ecn,
    /// SND.MAX when the sender entered its ECN window reduction (Linux `high_seq`): once
    /// SND.UNA reaches it the reduction is over (one reduction per window of data, §6.1.2).
    pub cwr_end: SeqNumber,
}

/// The bits of [`EcnState::flags`].
pub mod ecn_flag {
    /// ECN negotiated: both SYNs agreed (RFC 3168 §6.1.1).
    pub const OK: u8 = 1;
    /// Data arrived with an ECT or CE codepoint (`TCPI_OPT_ECN_SEEN`).
    pub const SEEN: u8 = 2;
    /// Receiver: a CE codepoint arrived; every segment carries ECE until a CWR arrives
    /// (Linux `TCP_ECN_DEMAND_CWR`).
    pub const DEMAND_CWR: u8 = 4;
    /// Sender: the window was reduced; the next new data segment carries CWR (Linux
    /// `TCP_ECN_QUEUE_CWR`).
    pub const QUEUE_CWR: u8 = 8;
    /// Sender: reducing the window after an ECN-Echo until SND.UNA reaches `cwr_end`
    /// (Linux's `TCP_CA_CWR` state).
    pub const IN_CWR: u8 = 16;
    /// Output: the segment `poll_transmit` returned last leaves with ECT(0). Not carried by a
    /// snapshot.
    pub const TX_ECT: u8 = 32;
    /// Active open: our first SYN asks for ECN (ECE and CWR set); cleared once the SYN-ACK
    /// answers or the SYN is retransmitted (Linux `tcp_ecn_clear_syn`).
    pub const REQUESTED: u8 = 64;
}

/// Timestamp option state (RFC 7323 §4, §5).
///
/// Invariants: our clock is `now / 1 ms + offset` (wrapping); `recent_age_ns` is an instant
/// on the engine's clock, not after "now".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Timestamps {
    /// TS.Recent.
    pub recent: u32,
    /// Last.ACK.sent (RFC 7323 §4.3).
    pub last_ack_sent: SeqNumber,
    /// Offset of our 1 ms timestamp clock from the engine's clock (RFC 7323 §7.1).
    pub offset: u32,
    /// Our timestamp clock at the last retransmission: echoes older than this are ambiguous
    /// RTT samples.
    pub rtx_floor: u32,
    /// When TS.Recent was last updated (for the 24-day rule, RFC 7323 §5.5).
    pub recent_age_ns: u64,
}

impl Timestamps {
    /// Our timestamp clock at `now`.
    pub(crate) fn clock(&self, now: u64) -> u32 {
        ((now / NS_PER_MS) as u32).wrapping_add(self.offset)
    }

    /// Moved to a clock reading `to` when this one reads `from`: the timestamp clock
    /// continues from its value at `from` (invariant 5 of the handoff: PAWS keeps accepting).
    pub(crate) fn rebased(self, from: u64, to: u64) -> Timestamps {
        let Timestamps {
            offset: _,
            recent,
            recent_age_ns,
            last_ack_sent,
            rtx_floor,
        } = self;
        Timestamps {
            offset: self.clock(from).wrapping_sub((to / NS_PER_MS) as u32),
            recent,
            recent_age_ns: rebase_instant(recent_age_ns, from, to),
            last_ack_sent,
            rtx_floor,
        }
    }
}

/// Loss recovery (RFC 5681 §3.2, RFC 6582, RFC 6675, RFC 6937 PRR, RFC 8985 TLP) and the
/// flight record behind [`crate::Config::cwnd_growth_requires_limited`]; the window itself
/// is in [`crate::cc::Congestion`].
///
/// Invariants: `high_rxt` and `recover` lie in `[iss, SND.MAX]` (wrapping) and `recover`
/// trails SND.UNA by less than 2^31 (it is pulled along on clean ACKs); the PRR byte counts
/// only mean something while `in_recovery`; `tlp_sent` is cleared by every ACK advancing
/// SND.UNA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Recovery {
    /// RFC 6582 `recover`: SND.MAX when the last recovery (or RTO) began.
    pub recover: SeqNumber,
    /// Where the most recently sent new segment starts: the one a tail loss probe resends
    /// (RFC 8985 §7.3).
    pub tlp_last_seq: SeqNumber,
    /// Most bytes in flight since `flight_max_seq` was sent (Linux `max_packets_out`).
    pub flight_max_bytes: u32,
    /// SND.NXT when `flight_max_bytes` was recorded: once SND.UNA passes it, a round trip
    /// ended and the next transmission starts a new record (Linux `max_packets_seq`).
    pub flight_max_seq: SeqNumber,
    /// RFC 6675 HighRxt: highest sequence number retransmitted in this recovery, plus one.
    pub high_rxt: SeqNumber,
    /// PRR (RFC 6937): bytes the peer reported delivered since recovery began.
    pub prr_delivered_bytes: u32,
    /// PRR: bytes sent since recovery began.
    pub prr_out_bytes: u32,
    /// PRR: the flight when recovery began (RecoverFS).
    pub prr_recover_fs_bytes: u32,
    // ---- the flags last: a receiver reads `in_recovery` per segment and the three
    // owed-output flags per ACK, and with them here they share the line of the ring headers
    // that follow (the sequence numbers above share the timers' line, which a receiver
    // does not touch) ----
    /// In fast recovery.
    pub in_recovery: bool,
    /// Consecutive duplicate ACKs (RFC 5681 §2).
    pub dupacks: u8,
    /// A fast (or partial-ACK) retransmission of the segment at SND.UNA is owed.
    pub rtx_pending: bool,
    /// The tail loss probe timer fired: send one probe (RFC 8985 §7.3).
    pub tlp_pending: bool,
    /// A tail loss probe was sent in this tail episode; cleared when an ACK advances SND.UNA
    /// (RFC 8985 §7.2: at most one probe until then).
    pub tlp_sent: bool,
    /// The sender filled cwnd during the recorded round trip (Linux `is_cwnd_limited`).
    pub cwnd_limited: bool,
}

/// Timer deadlines and the state of the timers' backoffs.
///
/// Invariants: every `*_deadline_ns` is an absolute time or `NEVER` (`u64::MAX`);
/// `unacked_since_ns` and `last_tx_ns` are instants not after "now".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Timers {
    /// Delayed ACK (RFC 9293 §3.8.6.3).
    pub delack_deadline_ns: u64,
    /// Keepalive (RFC 9293 §3.8.4).
    pub keepalive_deadline_ns: u64,
    /// Persist timer (zero window, RFC 9293 §3.8.6.1).
    pub persist_deadline_ns: u64,
    /// Retransmission timer (RFC 6298).
    pub rtx_deadline_ns: u64,
    /// Probe timeout (RFC 8985 §7.2).
    pub tlp_deadline_ns: u64,
    /// TIME-WAIT (2·MSL).
    pub time_wait_deadline_ns: u64,
    /// When we last sent data (RFC 5681 §4.1 restart after idle).
    pub last_tx_ns: u64,
    /// When the oldest unacknowledged data was first sent (user timeout reference).
    pub unacked_since_ns: u64,
    /// ... and when it was sent, or `NEVER` when nothing is timed. Two fields, not an
    /// `Option` of a pair, which would take 24 bytes of the 1 KiB TCB instead of 12.
    pub rtt_timed_sent_ns: u64,
    /// The segment being timed for RTT without timestamps (RFC 6298 §3, Karn): the
    /// sequence number its ACK must cover ...
    pub rtt_timed_end: SeqNumber,
    /// Unanswered keepalive probes.
    pub keepalive_probes: u8,
    /// Persist timer backoff.
    pub persist_shift: u8,
    /// SYN (or SYN-ACK) retransmissions so far.
    pub syn_retries: u8,
}

impl Timers {
    /// Moved to a clock reading `to` when this one reads `from`: deadlines keep the time
    /// remaining, instants their age.
    pub(crate) fn rebased(self, from: u64, to: u64) -> Timers {
        let Timers {
            rtx_deadline_ns,
            persist_deadline_ns,
            delack_deadline_ns,
            keepalive_deadline_ns,
            time_wait_deadline_ns,
            tlp_deadline_ns,
            unacked_since_ns,
            last_tx_ns,
            persist_shift,
            syn_retries,
            keepalive_probes,
            rtt_timed_end,
            rtt_timed_sent_ns,
        } = self;
        let d = |t| rebase_deadline(t, from, to);
        Timers {
            rtx_deadline_ns: d(rtx_deadline_ns),
            persist_deadline_ns: d(persist_deadline_ns),
            delack_deadline_ns: d(delack_deadline_ns),
            keepalive_deadline_ns: d(keepalive_deadline_ns),
            time_wait_deadline_ns: d(time_wait_deadline_ns),
            tlp_deadline_ns: d(tlp_deadline_ns),
            unacked_since_ns: rebase_instant(unacked_since_ns, from, to),
            last_tx_ns: rebase_instant(last_tx_ns, from, to),
            persist_shift,
            syn_retries,
            keepalive_probes,
            rtt_timed_end,
            rtt_timed_sent_ns: if rtt_timed_sent_ns == NEVER {
                NEVER
            } else {
                rebase_instant(rtt_timed_sent_ns, from, to)
            },
        }
    }

    /// Times the segment ending at `end`, sent at `sent_ns` (never `NEVER`).
    pub(crate) fn time_rtt(&mut self, end: SeqNumber, sent_ns: u64) {
        self.rtt_timed_end = end;
        self.rtt_timed_sent_ns = sent_ns.min(NEVER - 1);
    }

    /// `(end, sent_ns)` of the segment timed for RTT, if any.
    pub(crate) fn rtt_timed(&self) -> Option<(SeqNumber, u64)> {
        (self.rtt_timed_sent_ns != NEVER).then_some((self.rtt_timed_end, self.rtt_timed_sent_ns))
    }

    /// The segment timed for RTT, if any, leaving nothing timed.
    pub(crate) fn take_rtt_timed(&mut self) -> Option<(SeqNumber, u64)> {
        let t = self.rtt_timed();
        self.clear_rtt_timed();
        t
    }

    /// Stops timing (Karn: the timed segment was retransmitted, or the timing is abandoned).
    pub(crate) fn clear_rtt_timed(&mut self) {
        self.rtt_timed_end = SeqNumber(0);
        self.rtt_timed_sent_ns = NEVER;
    }
}

/// What the application asked for and what it was told about the connection's ends.
///
/// Invariants: `fin_queued` never goes back to false; `close_reason` is set exactly when the
/// state is CLOSED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppFlags {
    /// The application called `shutdown_write`/`close`: a FIN follows the send buffer.
    pub fin_queued: bool,
    /// The peer's FIN has been received (in order). A FIN that arrived beyond a hole is
    /// remembered in the out-of-order queue until RCV.NXT reaches it.
    pub fin_received: bool,
    /// The application will not read any more (`close`).
    pub app_closed: bool,
    /// `TCP_CORK`: partial segments wait until uncorked (or a full segment is ready).
    pub cork: bool,
    /// The last `send` was `send_more` (`MSG_MORE`): its partial tail waits for more.
    pub more: bool,
    /// Uncorking or setting `TCP_NODELAY` pushes the data queued so far once, past the cork
    /// and `MSG_MORE` holds (Linux `TCP_NAGLE_PUSH`); cleared once nothing is unsent.
    pub push_pending: bool,
    /// Why the connection closed, once it has.
    pub close_reason: Option<CloseReason>,
}

/// A connection's part in TCP Fast Open (RFC 7413); one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FastOpenRole {
    /// An ordinary connection.
    None,
    /// A server's child whose SYN's data was accepted (or allowed): it may be accepted, and
    /// send, while still in SYN-RECEIVED (§4.2.2).
    Child,
    /// A client whose first SYN carries the send buffer's first bytes (§4.1; set by
    /// `Connection::set_syn_data`). A retransmitted SYN carries none.
    SynData,
}

/// Output owed: what the next `poll_transmit` must send besides data. Never carried by a
/// snapshot (export refuses while anything is owed). Sixteen bytes, in the TCB's hot lines:
/// the rarely owed parts (a RST, a D-SACK block) and the challenge-ACK budget are in
/// [`OutputRare`], out of them, behind the flag `rare_owed`.
///
/// Invariants: `dupacks_owed ≤ DUPACKS_OWED_MAX`; `events` holds only the bits of
/// `event_bit`; `rare_owed` is true exactly when [`OutputRare`] holds a RST or a D-SACK
/// block (`Connection::invariant_violation` checks it), so a segment that owes neither reads
/// one byte of this line for both. Hints of cold state ride in its spare byte `held` (also
/// checked there), one bit each ([`held`]): which of the persist and keepalive deadlines
/// are armed, which of the out-of-order queue, the SACK scoreboard and the skb queue have
/// their box, whether keepalive probes are unanswered, RACK state exists and the send ring
/// has storage — so the short receive path reads one byte here instead of two deadlines,
/// four pointers, a count and a niche in other lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Output {
    pub(crate) ack_due: AckDue,
    /// Events not yet polled, one bit each.
    pub(crate) events: u8,
    /// Data segments still to be acknowledged at once (quick-ACK mode,
    /// [`crate::Config::quickack_segments`]); a restored connection starts with it spent,
    /// which only delays ACKs as RFC 5681 §4.2 allows.
    pub(crate) quickacks_left: u16,
    /// Bytes received in order since the last ACK we sent.
    pub(crate) rcv_unacked_bytes: u32,
    /// Duplicate ACKs still owed for out-of-order segments received since the last poll.
    pub(crate) dupacks_owed: u8,
    /// Persist timer fired: send a window probe (window 0) or override SWS avoidance.
    pub(crate) probe_pending: bool,
    pub(crate) keepalive_pending: bool,
    /// The connection's part in TCP Fast Open (RFC 7413, `fastopen.rs`): a server's child
    /// that may send while still in SYN-RECEIVED, or a client whose first SYN carries data.
    /// Never carried by a snapshot (export needs a synchronized connection, for which it no
    /// longer matters).
    pub(crate) fast_open: FastOpenRole,
    /// [`OutputRare`] holds a RST or a D-SACK block to send.
    pub(crate) rare_owed: bool,
    /// Hints, [`held`] bits: exactly the deadlines armed and the boxes made that they name
    /// (`Connection::held_hints` recomputes them; `invariant_violation` compares).
    pub(crate) held: u8,
}

/// The bits of [`Output::held`]. Each is set by the writer of what it names: the two
/// deadlines by `Connection::set_deadline` (their only writer), the three boxes where they
/// are made (a box, once made, stays for the connection's life).
pub(crate) mod held {
    /// `timers.persist_deadline_ns` is armed (not `NEVER`).
    pub(crate) const PERSIST: u8 = 1;
    /// `timers.keepalive_deadline_ns` is armed.
    pub(crate) const KEEPALIVE: u8 = 2;
    /// The out-of-order queue has its box (it may hold ranges or a FIN).
    pub(crate) const OOO: u8 = 4;
    /// The SACK scoreboard has its box (it may hold ranges).
    pub(crate) const SCOREBOARD: u8 = 8;
    /// The skb queue exists (`Connection::skb` is `Some`).
    pub(crate) const SKB: u8 = 16;
    /// `Timers::keepalive_probes` is not 0. An acceptable segment tests this instead of
    /// clearing the count, which lies in a line a receiver does not otherwise touch.
    pub(crate) const PROBED: u8 = 32;
    /// The connection has RACK state (`Connection::rack` is `Some`). The short receive
    /// path tests this instead of `Option<Rack>`'s niche, in a cold line.
    pub(crate) const RACK: u8 = 64;
    /// The send ring has storage (`Ring::allocated_bytes` is not 0): a connection that
    /// never sent data reports its buffers' storage without reading the send ring's header
    /// (`Connection::buffer_allocated_bytes`, asked after every input).
    pub(crate) const SEND_STORAGE: u8 = 128;
    /// What header prediction must look behind: with none of these set, no persist timer
    /// runs and neither queue holds anything.
    pub(crate) const PREDICT: u8 = PERSIST | OOO | SCOREBOARD;
}

impl Output {
    /// Nothing owed, with `quickacks_left` quick ACKs to give.
    pub(crate) fn new(quickacks_left: u16) -> Output {
        Output {
            ack_due: AckDue::None,
            quickacks_left,
            dupacks_owed: 0,
            events: 0,
            probe_pending: false,
            keepalive_pending: false,
            fast_open: FastOpenRole::None,
            rcv_unacked_bytes: 0,
            rare_owed: false,
            held: 0,
        }
    }
}

/// The output a segment rarely owes, and the challenge-ACK budget: in the TCB's cold part,
/// read only when [`Output::rare_owed`] says something is owed (or a challenge ACK is
/// considered). Never carried by a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct OutputRare {
    /// A duplicate range to report in the next ACK (RFC 2883 D-SACK).
    pub(crate) dsack: Option<SackBlock>,
    /// A RST owed: (sequence number, acknowledgment number if ACK is set).
    pub(crate) rst_pending: Option<(SeqNumber, Option<SeqNumber>)>,
    /// Challenge ACKs sent in that second.
    pub(crate) challenge_acks_in_window: u32,
    /// Start of the current second of the RFC 5961 §7 challenge ACK budget.
    pub(crate) challenge_window_start_ns: u64,
}

impl OutputRare {
    /// Nothing owed, the challenge-ACK budget's second starting at `now`.
    pub(crate) fn new(now: u64) -> OutputRare {
        OutputRare {
            dsack: None,
            rst_pending: None,
            challenge_acks_in_window: 0,
            challenge_window_start_ns: now,
        }
    }
}
