//! The transmission control block and its state machine (RFC 9293 §3.3.2, §3.10).
//!
//! This file holds the types, the TCB, construction, getters and application calls; the
//! TCB's groups and their invariants are in `tcb.rs`, its counters in `counters.rs`; the
//! protocol work lives in `input.rs` (segment arrival), `receive.rs` (its text and FIN, the
//! receive window), `timers.rs` and `output.rs`, the way
//! FreeBSD splits `tcp_input.c`, `tcp_timer.c` and `tcp_output.c`.
//!
//! Responsibilities:
//! - construction: active open ([`Connection::connect`]) and passive open from a SYN
//!   ([`Connection::accept`]), option negotiation (MSS, window scale, timestamps, SACK);
//! - input: [`Connection::handle_segment`] runs RFC 9293 §3.10.7 in order — SYN-SENT handling,
//!   PAWS (RFC 7323 §5), the four-case acceptability test, RST and SYN checks with RFC 5961
//!   challenge ACKs, the ACK field (RFC 5961 §5 range, SND.UNA/window updates, RTT, congestion
//!   control, fast retransmit), segment text and FIN;
//! - timers: [`Connection::handle_timeout`] fires retransmission (RFC 6298), persist (zero
//!   window, RFC 9293 §3.8.6.1), delayed ACK, keepalive and TIME-WAIT deadlines;
//! - output: [`Connection::poll_transmit`] builds at most one segment per call, in priority
//!   order RST, SYN/SYN-ACK, retransmissions (fast/partial-ACK, RFC 6675 NextSeg), owed
//!   duplicate ACKs, window probe or SWS override, new data/FIN, keepalive, pure ACK;
//! - application calls: `send`, `recv`, `shutdown_write`, `close`, `abort`.

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

use crate::cc::Congestion;
use crate::config::{Config, IntoSharedConfig, NS_PER_MS, SharedConfig};
use crate::ooo::OooQueue;
use crate::rack::Rack;
use crate::ring::Ring;
use crate::rtt::RttEstimator;

mod chrono;
mod counters;
mod diag;
mod ecn;
mod fastopen;
mod info;
mod input;
mod mem;
mod open;
mod output;
mod predict;
mod read;
mod receive;
mod records;
mod recovery;
mod sizes;
mod sndbuf;
mod sockopt;
mod tcb;
#[cfg(test)]
mod tests;
mod time_wait;
mod timers;
mod train;

pub use counters::Counters;
pub(crate) use counters::HotCounters;
pub use info::{CaState, TCP_INFINITE_SSTHRESH, TcpInfo, tcpi_opt};
pub use predict::SummedInput;
pub use records::RECORDS_OUTSTANDING_MAX;
pub(crate) use records::records_from_ends;
pub use sndbuf::{SEND_BUFFER_AUTOTUNE_MAX_BYTES, SKB_OVERHEAD_BYTES};
pub(crate) use timers::Deadline;
pub use timers::{PATH_DOUBT_SYN_TIMEOUTS, PATH_DOUBT_TIMEOUTS};
pub use train::TxTrain;

pub(crate) use chrono::InfoState;
pub use tcb::{
    AppFlags, EcnState, Options, Recovery, RecvSeq, SendSeq, Timers, Timestamps, ecn_flag,
};
pub(crate) use tcb::{FastOpenRole, Output, OutputRare, held, rebase_instant};

/// RFC 7323 §5.5: TS.Recent older than 24 days is invalid (the peer's clock may have wrapped).
const PAWS_IDLE_NS: u64 = 24 * 86_400 * 1_000_000_000;
/// Largest window scale shift (RFC 7323 §2.3).
const WSCALE_MAX: u8 = 14;
/// Most duplicate ACKs owed at once (a burst of out-of-order segments beyond this gets fewer).
const DUPACKS_OWED_MAX: u8 = 8;
/// RFC 6298 §5.7: the RTO once data flows after a SYN was retransmitted.
const RTO_AFTER_SYN_TIMEOUT_NS: u64 = 3_000_000_000;
/// Most SACKed ranges the sender's scoreboard keeps; further blocks are ignored (counted).
pub(crate) const SCOREBOARD_RANGES_MAX: u16 = 16;
/// RFC 6675 §2 DupThresh.
const DUP_THRESH: u32 = 3;
/// Bytes the timestamps option takes in every segment once negotiated (10 + 2 NOPs).
const TS_OPTION_BYTES: u16 = 12;

/// Connection states (RFC 9293 §3.3.2). LISTEN belongs to the host stack, not to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Closed,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

impl State {
    /// True in the states RFC 9293 calls synchronized (ESTABLISHED and later, not CLOSED).
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::SynSent | State::SynReceived)
    }

    /// True where keepalive may probe (RFC 9293 §3.8.4): every synchronized state but
    /// TIME-WAIT. FIN-WAIT-2 above all: a half-closed connection still reading has nothing
    /// outstanding, so without a probe it would never learn that its peer gave up and the RST
    /// was lost. In FIN-WAIT-1, CLOSING and LAST-ACK our FIN is outstanding and the timer only
    /// re-arms (the retransmission timer watches the peer), as Linux's `tcp_keepalive_timer`,
    /// which skips only CLOSE and SYN-SENT.
    pub(crate) fn keepalive_may_probe(self) -> bool {
        self.is_synchronized() && self != State::TimeWait
    }
}

/// What the application is told (polled with [`Connection::poll_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// The three-way handshake completed.
    Connected,
    /// New in-order data can be read.
    Readable,
    /// Send buffer space was freed.
    Writable,
    /// The peer sent FIN: after the buffered data, reads report [`Error::Finished`].
    PeerClosed,
    /// The peer reset the connection.
    Reset,
    /// The connection timed out (retransmissions, handshake, keepalive or user timeout).
    TimedOut,
    /// The connection reached CLOSED; the driver may drop it once `poll_transmit` is empty.
    Closed,
}

/// The events in polling order: `EVENT_ORDER[i]`'s bit is `1 << i` (test
/// `event_bits_follow_the_polling_order`), so the next event to poll is the lowest bit set.
const EVENT_ORDER: [Event; 7] = [
    Event::Connected,
    Event::Readable,
    Event::Writable,
    Event::PeerClosed,
    Event::Reset,
    Event::TimedOut,
    Event::Closed,
];

fn event_bit(e: Event) -> u8 {
    match e {
        Event::Connected => 1,
        Event::Readable => 2,
        Event::Writable => 4,
        Event::PeerClosed => 8,
        Event::Reset => 16,
        Event::TimedOut => 32,
        Event::Closed => 64,
    }
}

/// Errors of application calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The call makes no sense in the current state (e.g. `send` after `shutdown_write`).
    InvalidState,
    /// The peer closed its direction and every byte before its FIN has been read.
    Finished,
    /// The connection was reset by the peer.
    Reset,
    /// The connection timed out.
    TimedOut,
    /// The connection is closed.
    Closed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::InvalidState => "operation invalid in this connection state",
            Error::Finished => "peer closed its sending direction",
            Error::Reset => "connection reset by peer",
            Error::TimedOut => "connection timed out",
            Error::Closed => "connection closed",
        })
    }
}

impl std::error::Error for Error {}

/// Why a passive open was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcceptError {
    /// The segment is not a bare SYN (it has ACK or RST, or lacks SYN).
    NotSyn,
}

impl core::fmt::Display for AcceptError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            AcceptError::NotSyn => "segment is not a connection request (SYN without ACK/RST)",
        })
    }
}

impl std::error::Error for AcceptError {}

/// How the connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseReason {
    /// Both FINs exchanged and acknowledged (or the open was cancelled).
    Normal,
    /// RST received.
    Reset,
    /// Timed out.
    TimedOut,
    /// The application aborted.
    Aborted,
}

/// How urgently an ACK is owed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum AckDue {
    None,
    Delayed,
    Now,
}

/// A deadline in ns; `NEVER` when disarmed.
pub(crate) const NEVER: u64 = u64::MAX;

/// One TCP connection: the TCB, its buffers and its timers.
///
/// The TCB is grouped (see `tcb.rs` for each group's invariants): send and receive sequence
/// spaces, negotiated options, timestamps, loss recovery, congestion control (behind
/// [`crate::cc::CongestionController`]), RTT estimation, timers, application flags, owed
/// output, then the parts a segment reads a few fields of (buffers, tables, configuration,
/// RACK, `tcp_info` state) and the counters (inline the per-segment ones, boxed the rare
/// ones). A snapshot carries
/// the groups whole (`snapshot.rs`).
///
/// Cross-group invariants (checked by [`Connection::invariant_violation`]):
/// `SND.UNA ≤ SND.NXT ≤ SND.MAX`; `snd.buf_seq` equals SND.UNA once the SYN is acknowledged
/// (until our FIN is, after which SND.UNA = snd.buf_seq + 1); `RCV.NXT ≤ rcv.adv` and
/// `rcv.adv - RCV.NXT ≤ recv_buffer_bytes - recv_buf.len()` (we never advertise room we do
/// not have, and `rcv.adv` never moves left).
///
/// `repr(C, align(64))` keeps the declaration order and starts the TCB on a cache line (the
/// stack boxes it, so the box is 64-byte aligned too); the groups of `tcb.rs` are `repr(C)`
/// too, each with the fields a segment touches first and its cold fields (ISS, IRS, the PRR
/// counts, the challenge-ACK budget, the TIME-WAIT deadline, the SYN retries) last. The
/// order follows what a segment touches, as measured per byte with
/// `scripts/bench-hot-bytes.sh` (DHAT; `crates/bench/README.md`, "Hot state, measured"):
/// - lines 0–1 (offsets 0–127): what both directions read or write — `state`, `app`,
///   `opts`, `ecn`, the ports, `rcv`, `snd`, `out` (its per-segment bytes first, and the
///   hints byte `held`: see `held`), the timestamps (`ts`) and the stored earliest
///   deadline (`earliest_deadline_ns`, the only time `poll_timeout` reads, after every
///   input and output);
/// - line 2: the configuration's pointer (one copy for all the connections of a listener or
///   stack, copied on write), RACK's reordering timer and `timers`' six deadlines, so arming,
///   disarming and finding a new minimum touch this line and line 1;
/// - then `timers`' instants, loss recovery (`rec`, its per-segment flags last, in line 4),
///   the receive ring's header and the counters every segment bumps (`HotCounters`, 32-bit
///   deltas; line 4), `snd_sml`, the send ring's header, the out-of-order queue and
///   scoreboard pointers, the `skb` and `records` pointers, ending at 392, within seven lines
///   (test `hot_parts_come_first_without_padding`);
/// - then the `tcp_info` state (its per-segment fields and its presence niche in its first
///   64 bytes), the window (`cc`), the RTT estimate (`rtt`), the cold fields (HyStart's box,
///   Minshall's `snd_sml` and `send_cut`), the pointer to the rare counters (boxed by the
///   first rare event, `count_rare`) and last RACK's state (inline, 86 bytes; `Rack` is
///   aligned to a line, so it takes two). `tcp_info` and RACK were boxes of their own once:
///   one more allocation and a pointer to chase per segment.
///
/// `Connection::layout` reports the offsets, `cargo run -p bench --bin tcb_size` prints them.
/// The whole is at most 1,024 bytes with at least 8 to spare for the next fields (test
/// `tcb_fits_one_kilobyte_with_room_to_spare`).
///
/// What the three common segments of an established connection touch (timestamps and SACK
/// negotiated, RACK on, no loss), read from `input.rs`, `receive.rs`, `output.rs`,
/// `timers.rs` and `chrono.rs`, and the stack's `poll_timeout` after each:
/// - in-order data at the receiver (`handle_segment` → `rx_synchronized_inner` →
///   `rx_ack` → `rx_text_and_fin` → `accept_in_order` → `schedule_ack`): `state`, the
///   ports, `opts` (ts_ok, sack_ok, snd_wscale, snd_mss), `ts` (recent, recent_age_ns,
///   last_ack_sent, offset, rtx_floor), `rcv` (nxt, adv, mss_seen), `snd` (una, max,
///   max_wnd, wl1, wl2, wnd), `timers` (the delack deadline; the keepalive and persist
///   deadlines and keepalive_probes only behind their `held` bits), `out` (ack_due,
///   quickacks_left, rcv_unacked_bytes, events, the hints byte `held`), `rec`
///   (dupacks, in_recovery, recover), `app` (more, fin_received, app_closed), `ooo` and
///   `scoreboard` (emptiness, bytes: behind their `held` bits), `recv_buf` (head, len,
///   storage), `config`
///   (recv_buffer_bytes, delayed_ack_ns, keepalive, prr, rack, time_wait_ns;
///   user_timeout_ns only with data outstanding), `info` (rx_data_segments, last_data_rx_ns, chronographs) and `counters`
///   (rx_segments, rx_payload_bytes);
/// - a pure ACK advancing SND.UNA at the sender (`rx_ack`): the above less the text, plus
///   `snd` (buf_seq, nxt), `send_buf` (consume), `rack` (on_ack, on_cumulative_ack,
///   detect_loss), `rack_deadline_ns`, `rtt` (whole: a timestamp sample), `timers` (unacked_since,
///   tlp, rtx, rtt_timed), `rec` (tlp_sent, cwnd_limited, flight_max_bytes), `cc` (the
///   window; CUBIC's state in congestion avoidance), `config`
///   (cwnd_growth_requires_limited, ack_counts_previously_sacked_bytes,
///   slow_start_increase_limit_segments), `info` (delivered_segments, chronographs),
///   `counters` (rtt_samples);
/// - a send from the application (`send` → `queue`; `poll_transmit` → `send_new_data` →
///   `data_segment_tso`): `state`, `app` (fin_queued, more, cork, push_pending), `send_buf`,
///   `snd` (all but iss), `cc`, `rec` (rtx_pending, in_recovery, tlp_pending, tlp_last_seq,
///   flight_max_*), `out` (rst_pending, dupacks_owed, probe_pending, ack_due, dsack,
///   rcv_unacked_bytes), `opts`, `ts` (offset, recent, last_ack_sent), `rcv` (nxt, adv),
///   `recv_buf` (len, for the window), `ooo` (SACK blocks), `timers` (rtx, persist, tlp,
///   delack deadlines, last_tx, unacked_since), `rtt` (the RTO), `rack` (on_send: the
///   transmit records), `config` (nodelay, mss_bytes, recv_buffer_bytes, restart_after_idle,
///   tail_loss_probe, tlp_pto_*), `info` (tx_data_segments, chronographs), `counters`
///   (tx_segments, tx_payload_bytes).
///
/// Not touched by any of them: `snd.iss`, `rcv.irs`, `opts.peer_offered_ws`,
/// `timers.syn_retries`, `timers.persist_shift`, `rec.high_rxt` and the PRR counts (only in
/// recovery), `out.challenge_*`, `out.fast_open`, `app.close_reason`, most of `config` and
/// all counters but the five named. Measured (`crates/bench/README.md`, "Hot state: the
/// receiver in two lines"): a data segment received in order touches 126 bytes in 4 lines
/// (0, 1, 4 and `info`'s first), a bulk data segment sent 45 in 2, a request/response
/// exchange ~481 in 11 of the 12 (see ARCHITECTURE.md, "The TCB").
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Connection {
    // ---- hot: what every segment of an established connection reads or writes, both ways (lines 0-1) ----
    pub(crate) state: State,
    pub(crate) app: AppFlags,
    pub(crate) opts: Options,
    /// ECN (RFC 3168): negotiation, the echo owed, the sender's reduction (`ecn.rs`).
    pub(crate) ecn: EcnState,
    pub(crate) local_port: u16,
    pub(crate) remote_port: u16,
    pub(crate) rcv: RecvSeq,
    pub(crate) snd: SendSeq,
    pub(crate) out: Output,
    pub(crate) ts: Timestamps,
    /// The minimum of the seven deadlines (`timers`' six and `rack_deadline_ns`), `NEVER`
    /// when none is armed: what `poll_timeout` reads instead of all seven. Kept equal to
    /// their minimum by [`Connection::set_deadline`], the only writer of any of them. In
    /// the hot lines: the stack reads it after every input, so a receiver, whose segments
    /// arm no deadline, touches no line of the deadlines for it.
    pub(crate) earliest_deadline_ns: u64,
    // ---- line 2: the configuration's pointer and the seven deadlines ----
    /// The configuration, validated, shared with every connection opened from the same one
    /// (the stack's listeners and active opens, [`crate::config::SharedConfig`]): its fields
    /// are read per segment from one cache line all connections use. A socket option that
    /// changes it copies it first (`Arc::make_mut`, [`Connection::config_mut`]).
    pub(crate) config: SharedConfig,
    /// RACK's reordering timer (RFC 8985 §6.2 step 5), `NEVER` when disarmed or without
    /// RACK state. Here, not in [`Rack`]: `poll_timeout` reads it after every input and
    /// output, and in the hot groups it costs no cache line of its own (issue 17 item 2).
    pub(crate) rack_deadline_ns: u64,
    pub(crate) timers: Timers,
    // ---- loss recovery (its flags in line 4), the receive ring's header and the inline
    // counters (line 4: with lines 0-1, what a data segment received touches), the send
    // ring's header, the pointers ----
    pub(crate) rec: Recovery,
    pub(crate) recv_buf: Ring,
    /// The counters every segment or exchange bumps (segments and payload bytes each way,
    /// RTT samples, pure and delayed ACKs), inline as 32-bit deltas of the totals
    /// (`HotCounters`, bumped by [`Connection::count_hot`]): no separate allocation. The
    /// rest, and the folded part of these, are in `counters_rare`.
    pub(crate) counters: HotCounters,
    /// The end of the last short segment of new data sent (Linux `snd_sml`): a payload not a
    /// whole number of segments. Minshall's Nagle ([`Config::nagle_minshall`]) holds a short
    /// segment only while this lies in (SND.UNA, SND.NXT]. Starts at ISS (no short segment
    /// outstanding); an imported connection starts at SND.NXT, which holds as RFC 9293's rule
    /// does until its flight is acknowledged. Here, after the 28 bytes of `counters`: read per
    /// data segment sent, and no padding before the send ring's header.
    pub(crate) snd_sml: SeqNumber,
    pub(crate) send_buf: Ring,
    pub(crate) ooo: OooQueue,
    /// SACK scoreboard (sender side): ranges above SND.UNA the peer reported holding.
    pub(crate) scoreboard: OooQueue,
    /// The send queue's skbs under [`Config::send_buffer_skb_accounting`] (`sndbuf.rs`);
    /// boxed on the first write.
    pub(crate) skb: Option<Box<sndbuf::SkbQueue>>,
    /// Record boundaries (`MSG_EOR`, `records.rs`); boxed on the first record.
    pub(crate) records: Option<Box<records::RecordEnds>>,
    // ---- tcp_info (its per-segment fields first), then what an ACK of new data reads: the
    // window, the RTT estimate, (after the cold fields, to start RACK's 86 bytes on a line)
    // RACK ----
    /// What `tcp_info` reports beyond the TCB: chronographs, reordering degree, last data
    /// received, segment counts (`chrono.rs`); created on first use. Inline: every data
    /// segment counts in it.
    pub(crate) info: Option<chrono::InfoState>,
    pub(crate) cc: Congestion,
    pub(crate) rtt: RttEstimator,
    // ---- cold ----
    /// CUBIC's HyStart ([`Config::hystart`], `cc/hystart.rs`): created by the first ACK
    /// that gives it a sample, dropped by a retransmission timeout. Boxed: only CUBIC
    /// connections with HyStart on have one, and inline it took 32 bytes of every TCB.
    pub(crate) hystart: Option<Box<crate::cc::Hystart>>,
    /// The last `send` did not fit whole: the application waits for room to write the
    /// rest. Minshall's Nagle then holds the buffer's short tail under RFC 9293's rule: Linux
    /// fills a write's buffers in whole segments before it blocks (`tcp_sendmsg` copies into
    /// skbs of the size goal), so a waiting write leaves no short tail there, while this
    /// stack's buffer takes bytes up to its capacity. Cleared by a `send` taken whole.
    pub(crate) send_cut: bool,
    /// What the output rarely owes (a RST, a D-SACK block) and the challenge-ACK budget, out
    /// of the hot lines; `out.rare_owed` says when to look.
    pub(crate) out_rare: OutputRare,
    /// The counters of rare events (drops, retransmissions, ECN, RACK, ...), boxed by the
    /// first of them ([`Connection::rare_counters`]) and read as zeros while absent: an
    /// established connection that loses nothing never allocates them. Its fields named in
    /// [`HotCounters`] hold what their 32-bit deltas in `counters` folded (zero until a
    /// delta would have wrapped, after 4 Gi increments): a total is the two added.
    pub(crate) counters_rare: Option<Box<Counters>>,
    /// RACK loss detection state (RFC 8985 §6), used when [`Config::rack`] is on and SACK
    /// was negotiated (see [`Connection::rack_active`]); created by the first data
    /// transmission ([`Connection::rack_state`]). Inline: every ACK and data segment of such
    /// a connection reads it (its transmit records are a table of their own).
    pub(crate) rack: Option<Rack>,
}

/// The window scale we offer for a receive buffer: the smallest shift that lets the 16-bit
/// field express the whole buffer (RFC 7323 §2.3), at most 14.
pub(crate) fn wscale_for(recv_buffer_bytes: u32) -> u8 {
    let mut s = 0u8;
    while s < WSCALE_MAX && (recv_buffer_bytes >> s) > 0xffff {
        s += 1;
    }
    s
}

/// Circular "a < b" on the 32-bit timestamp clock (RFC 7323 §5.3 uses modular comparison).
fn ts_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn seq_len(seg: &TcpRepr<'_>) -> u32 {
    seg.payload.len() as u32
        + u32::from(seg.flags.contains(TcpFlags::SYN))
        + u32::from(seg.flags.contains(TcpFlags::FIN))
}

/// Distance `b - a` when `b ≥ a`, else 0.
#[inline]
fn fwd(a: SeqNumber, b: SeqNumber) -> u32 {
    let d = b.diff(a);
    if d > 0 { d as u32 } else { 0 }
}

impl Connection {
    fn new(
        now: u64,
        config: impl IntoSharedConfig,
        local_port: u16,
        remote_port: u16,
        iss: SeqNumber,
        ts_offset: u32,
    ) -> Self {
        let config = config.into_shared();
        let snd_mss = config.default_peer_mss_bytes.min(config.mss_bytes);
        Connection {
            state: State::Closed,
            rack_deadline_ns: NEVER,
            earliest_deadline_ns: NEVER,
            snd: SendSeq {
                una: iss,
                nxt: iss,
                max: iss,
                wnd: 0,
                wl1: SeqNumber(0),
                wl2: iss,
                max_wnd: 0,
                buf_seq: iss + 1,
                iss,
            },
            rcv: RecvSeq {
                nxt: SeqNumber(0),
                adv: SeqNumber(0),
                irs: SeqNumber(0),
                mss_seen: 0,
            },
            opts: Options {
                snd_mss,
                snd_wscale: 0,
                rcv_wscale: 0,
                ts_ok: false,
                sack_ok: false,
                peer_offered_ws: None,
            },
            ecn: EcnState {
                flags: 0,
                rx: wire::Ecn::NotEct,
                cwr_end: iss,
            },
            ts: Timestamps {
                offset: ts_offset,
                recent: 0,
                recent_age_ns: now,
                last_ack_sent: SeqNumber(0),
                rtx_floor: ((now / NS_PER_MS) as u32).wrapping_add(ts_offset),
            },
            rec: Recovery {
                in_recovery: false,
                recover: iss,
                dupacks: 0,
                rtx_pending: false,
                high_rxt: iss,
                prr_delivered_bytes: 0,
                prr_out_bytes: 0,
                prr_recover_fs_bytes: 0,
                tlp_pending: false,
                tlp_sent: false,
                tlp_last_seq: iss,
                flight_max_bytes: 0,
                flight_max_seq: iss,
                cwnd_limited: false,
            },
            cc: Congestion::new(
                config.congestion_control,
                config.initial_window_segments,
                u32::from(snd_mss),
            ),
            rtt: RttEstimator::new(config.rto_initial_ns, config.rto_bounds()),
            timers: Timers {
                rtx_deadline_ns: NEVER,
                persist_deadline_ns: NEVER,
                delack_deadline_ns: NEVER,
                keepalive_deadline_ns: NEVER,
                time_wait_deadline_ns: NEVER,
                tlp_deadline_ns: NEVER,
                unacked_since_ns: now,
                last_tx_ns: now,
                persist_shift: 0,
                syn_retries: 0,
                keepalive_probes: 0,
                rtt_timed_end: SeqNumber(0),
                rtt_timed_sent_ns: NEVER,
            },
            app: AppFlags {
                fin_queued: false,
                fin_received: false,
                app_closed: false,
                cork: false,
                more: false,
                push_pending: false,
                close_reason: None,
            },
            out: Output::new(config.quickack_segments),
            out_rare: OutputRare::new(now),
            local_port,
            remote_port,
            send_buf: Ring::new(config.send_ring_capacity_bytes()),
            recv_buf: Ring::new(config.recv_buffer_bytes as usize),
            ooo: OooQueue::new(),
            scoreboard: OooQueue::new(),
            rack: None,
            info: None,
            hystart: None,
            records: None,
            skb: None,
            snd_sml: iss,
            send_cut: false,
            config,
            counters: HotCounters::default(),
            counters_rare: None,
        }
    }

    /// RACK's state, created on first use: the first data transmission of a connection with
    /// RACK active. `RACK.min_RTT` starts from SRTT then, which before any data is the
    /// handshake's sample.
    pub(crate) fn rack_state(&mut self, now: u64) -> &mut Rack {
        let srtt_ns = self.rtt.has_sample.then_some(self.rtt.srtt_ns());
        self.out.held |= held::RACK;
        self.rack.get_or_insert_with(|| {
            let mut r = Rack::default();
            if let Some(srtt_ns) = srtt_ns {
                r.note_rtt_sample(now, srtt_ns);
            }
            r
        })
    }

    /// The rare counters, boxed on first use (a rare event's increment).
    #[cold]
    pub(crate) fn rare_counters(&mut self) -> &mut Counters {
        self.counters_rare.get_or_insert_with(Box::default)
    }

    /// Adds `n` to one rare counter; boxes the rare counters only when `n` is not zero (an
    /// ACK that marks nothing lost, a send that merges no record, count nothing).
    #[inline]
    pub(crate) fn count_rare(&mut self, n: u64, counter: impl FnOnce(&mut Counters) -> &mut u64) {
        if n != 0 {
            *counter(self.rare_counters()) += n;
        }
    }

    /// Adds `n` to one of the inline counters' 32-bit deltas ([`HotCounters`]; `delta` names
    /// it, e.g. `|c| &mut c.rx_segments`). An add that would wrap the delta first folds
    /// every delta into the rare store's totals (boxing it): the totals stay exact.
    #[inline]
    pub(crate) fn count_hot(&mut self, n: u32, delta: impl Fn(&mut HotCounters) -> &mut u32) {
        let d = delta(&mut self.counters);
        match d.checked_add(n) {
            Some(v) => *d = v,
            None => self.count_hot_after_fold(n, delta),
        }
    }

    /// [`Connection::count_hot`]'s rare path: folds the deltas, then adds `n` (which fits
    /// a zero delta).
    #[cold]
    #[inline(never)]
    fn count_hot_after_fold(&mut self, n: u32, delta: impl Fn(&mut HotCounters) -> &mut u32) {
        let mut hot = self.counters;
        hot.fold_into(self.rare_counters());
        self.counters = hot;
        *delta(&mut self.counters) = n;
    }

    /// One inline counter's total: the rare store's part plus the delta.
    pub(crate) fn hot_total(
        &self,
        delta: impl Fn(&HotCounters) -> u32,
        total: impl Fn(&Counters) -> u64,
    ) -> u64 {
        self.rare_counter(total) + u64::from(delta(&self.counters))
    }

    /// One rare counter's value: zero while none was counted.
    pub(crate) fn rare_counter(&self, get: impl Fn(&Counters) -> u64) -> u64 {
        self.counters_rare.as_deref().map_or(0, get)
    }

    /// Stops the RACK reordering timer.
    pub(crate) fn rack_disarm(&mut self) {
        self.set_deadline(Deadline::Rack, NEVER);
    }

    /// Switches the Nagle algorithm off (`true`) or on at run time (RFC 9293 §3.7.4).
    /// Setting it also pushes data held by a cork or `MSG_MORE` once, as Linux does.
    pub fn set_nodelay(&mut self, nodelay: bool) {
        if self.config.nodelay != nodelay {
            self.config_mut().nodelay = nodelay;
        }
        if nodelay {
            self.app.push_pending = true;
        }
    }

    /// `TCP_CORK` (Linux tcp(7)): while corked, partial segments wait until a full segment
    /// is ready or the cork is removed; removing it pushes what is queued at once. A cork
    /// with nothing in flight is still broken by the persist timer, like Linux's probe timer.
    pub fn set_cork(&mut self, cork: bool) {
        self.app.cork = cork;
        if !cork {
            self.app.push_pending = true;
        }
    }

    /// This connection's configuration for a change: copied first when shared with other
    /// connections (`Arc::make_mut`), so the change is this connection's alone. Callers keep
    /// it valid ([`Config::validated`]).
    pub(crate) fn config_mut(&mut self) -> &mut Config {
        std::sync::Arc::make_mut(&mut self.config)
    }

    /// Takes `c` (valid) as this connection's configuration: copied on write only when it
    /// differs, so a change to what is already in force keeps the shared configuration.
    pub(crate) fn replace_config(&mut self, c: Config) {
        if *self.config != c {
            *self.config_mut() = c;
        }
    }

    fn ts_now(&self, now: u64) -> u32 {
        // RFC 7323 §5.4: a 1 ms clock, offset per connection (§7.1).
        ((now / NS_PER_MS) as u32).wrapping_add(self.ts.offset)
    }

    pub(crate) fn push_event(&mut self, e: Event) {
        self.out.events |= event_bit(e);
    }

    /// The next event, in the order Connected, Readable, Writable, PeerClosed, Reset,
    /// TimedOut, Closed. Events are level-collapsed: several occurrences before a poll yield one.
    pub fn poll_event(&mut self) -> Option<Event> {
        let events = self.out.events;
        if events == 0 {
            return None;
        }
        // The lowest bit set is the first pending event in `EVENT_ORDER`.
        let i = events.trailing_zeros() as usize;
        self.out.events = events & (events - 1);
        EVENT_ORDER.get(i).copied()
    }

    /// The earliest deadline at which `handle_timeout` must be called, if any.
    ///
    /// Reads the stored earliest deadline (`earliest_deadline_ns`), not the seven deadlines,
    /// and the user timeout, which follows from the send sequence space.
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        debug_assert_eq!(
            self.earliest_deadline_ns,
            self.deadlines_min_ns(),
            "stored earliest deadline is not the deadlines' minimum"
        );
        let t = self
            .earliest_deadline_ns
            .min(self.user_timeout_deadline_ns());
        (t != NEVER).then_some(t)
    }

    /// RFC 9293 §3.8.3 (R2) / RFC 5482: when unacknowledged data has waited this long, give
    /// up. Not while probing a zero window: a peer answering probes is alive (§3.8.6.1).
    ///
    /// The conditions on the hot groups are tested before the configuration is read: with
    /// nothing outstanding (a request/response connection after its reply is acknowledged)
    /// the configuration's pointer is not read (issue 17 item 2).
    fn user_timeout_deadline_ns(&self) -> u64 {
        if self.snd.una == self.snd.max
            || self.out.held & held::PERSIST != 0
            || !self.state.is_synchronized()
            || self.state == State::TimeWait
        {
            return NEVER;
        }
        match self.config.user_timeout_ns {
            Some(ut) => self
                .timers
                .unacked_since_ns
                .saturating_add(ut)
                .min(NEVER - 1),
            None => NEVER,
        }
    }

    // ------------------------------------------------------------------ application calls

    /// Queues bytes for sending; returns how many fit (0 when the buffer is full). The
    /// queued data is pushed (subject to Nagle and `TCP_CORK`), ending any `send_more` hold.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Error> {
        let n = self.queue(data)?;
        self.app.more = false;
        Ok(n)
    }

    /// `send` with `MSG_MORE`: full segments go, but a partial tail waits for a later
    /// `send`, an arriving ACK (which pushes under Nagle and `TCP_CORK` alone, as Linux does),
    /// `set_nodelay(true)`, or the persist timer, and leaves without PSH.
    pub fn send_more(&mut self, data: &[u8]) -> Result<usize, Error> {
        let n = self.queue(data)?;
        self.app.more = true;
        Ok(n)
    }

    fn queue(&mut self, data: &[u8]) -> Result<usize, Error> {
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait => {}
            State::Closed => return Err(self.closed_error()),
            _ => return Err(Error::InvalidState),
        }
        if self.app.fin_queued {
            return Err(Error::InvalidState);
        }
        if self.config.send_buffer_skb_accounting {
            let n = self.skb_admit(data);
            self.note_send_storage();
            return Ok(n);
        }
        let n = self.send_buf.push(data);
        self.note_send_storage();
        self.send_cut = n < data.len();
        if n < data.len() {
            // The application waits for room: `tcpi_sndbuf_limited` (`chrono.rs`; its
            // clock starts at the next output, application calls carry none).
            let since = self.timers.last_tx_ns;
            self.info_mut(since).sndbuf_full = true;
        }
        Ok(n)
    }

    /// Reads in-order received bytes. `Ok(0)` means nothing is available yet;
    /// [`Error::Finished`] that the peer closed and everything has been read.
    pub fn recv(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        if self.app.app_closed {
            return Err(Error::InvalidState);
        }
        let n = self.recv_buf.pop(out);
        if n == 0 {
            if self.app.fin_received {
                return Err(Error::Finished);
            }
            if self.state == State::Closed {
                return Err(self.closed_error());
            }
            return Ok(0);
        }
        self.maybe_window_update();
        Ok(n)
    }

    /// Copies in-order received bytes without consuming them.
    pub fn peek(&self, out: &mut [u8]) -> usize {
        self.recv_buf.read_at(0, out)
    }

    /// Copies in-order received bytes from `offset` on without consuming them (0 past the
    /// end).
    pub fn peek_at(&self, offset: usize, out: &mut [u8]) -> usize {
        if offset >= self.recv_buf.len() {
            return 0;
        }
        self.recv_buf.read_at(offset, out)
    }

    /// What [`Connection::recv`] reports once nothing is queued: `None` while more data may
    /// come, else the error (`Finished` after the peer's FIN, the close reason once closed).
    pub fn recv_end(&self) -> Option<Error> {
        if self.app.app_closed {
            Some(Error::InvalidState)
        } else if self.app.fin_received {
            Some(Error::Finished)
        } else if self.state == State::Closed {
            Some(self.closed_error())
        } else {
            None
        }
    }

    fn closed_error(&self) -> Error {
        match self.app.close_reason {
            Some(CloseReason::Reset) => Error::Reset,
            Some(CloseReason::TimedOut) => Error::TimedOut,
            _ => Error::Closed,
        }
    }

    /// Half-close: a FIN follows the queued data (RFC 9293 §3.10.4 CLOSE on the send side);
    /// receiving continues.
    pub fn shutdown_write(&mut self) -> Result<(), Error> {
        match self.state {
            State::SynSent => {
                // RFC 9293 §3.10.4: CLOSE in SYN-SENT deletes the TCB.
                self.enter_closed(CloseReason::Normal);
                Ok(())
            }
            State::SynReceived | State::Established => {
                self.app.fin_queued = true;
                if self.state == State::Established {
                    self.state = State::FinWait1;
                }
                Ok(())
            }
            State::CloseWait => {
                self.app.fin_queued = true;
                self.state = State::LastAck;
                Ok(())
            }
            State::Closed => Err(self.closed_error()),
            // Already shut down.
            _ => Ok(()),
        }
    }

    /// Full close: like `shutdown_write`, and the application will read no more. Unread data
    /// at the time of the call makes us reset the connection instead (RFC 2525 §2.17), so the
    /// peer learns its data was not consumed; data arriving later is acknowledged and discarded
    /// (`rx_discard_after_close_bytes`). A Fast Open child's SYN data counts too, before its
    /// handshake completes.
    pub fn close(&mut self) -> Result<(), Error> {
        if !self.recv_buf.is_empty() && (self.state.is_synchronized() || self.is_fast_open_child())
        {
            self.abort();
            return Ok(());
        }
        self.app.app_closed = true;
        self.shutdown_write()
    }

    /// Abort (RFC 9293 §3.10.5): send RST if synchronized, drop all state, enter CLOSED.
    ///
    /// The RST is `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK>` with the timestamp option when
    /// timestamps are in use, the form Linux sends (`tcp_send_active_reset`). RFC 9293 §3.10.4
    /// asks for `<SEQ=SND.NXT><CTL=RST>`; the ACK field adds nothing a receiver must check
    /// (§3.10.7.4 and RFC 5961 §3.2 judge a RST by its sequence number alone), and RFC 7323
    /// §3.2 says TSopt SHOULD be sent in a RST (its receiver skips the PAWS test for RSTs,
    /// §5.3 R1).
    ///
    /// When SND.MAX lies beyond the peer's window (a zero-window probe's byte), the RST
    /// carries the window's right edge instead, as Linux's `tcp_acceptable_seq`: a peer at
    /// zero window accepts a RST only at exactly RCV.NXT (RFC 9293 §3.10.7.4) and would drop
    /// one at SND.MAX without a word.
    pub fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        ) {
            let wnd_end = self.snd.una + self.snd.wnd;
            let seq = if self.state.is_synchronized() && wnd_end.lt(self.snd.max) {
                wnd_end
            } else {
                self.snd.max
            };
            self.owe_rst(seq, Some(self.rcv.nxt));
        }
        self.enter_closed(CloseReason::Aborted);
    }

    /// Enters CLOSED without sending anything: the network, not the application, ended the
    /// connection while it was still opening (an ICMP error about its SYN or SYN-ACK, RFC
    /// 1122 §4.2.3.9; Linux `tcp_done`). Data already received stays readable; later
    /// segments from the peer find no connection.
    pub fn abort_silently(&mut self) {
        self.enter_closed(CloseReason::Aborted);
    }

    fn enter_closed(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.app.close_reason = Some(reason);
        self.set_deadline(Deadline::Rtx, NEVER);
        self.set_deadline(Deadline::Tlp, NEVER);
        self.rec.tlp_pending = false;
        self.rack_disarm();
        self.set_deadline(Deadline::Persist, NEVER);
        self.set_deadline(Deadline::Delack, NEVER);
        self.set_deadline(Deadline::Keepalive, NEVER);
        self.set_deadline(Deadline::TimeWait, NEVER);
        self.out.ack_due = AckDue::None;
        self.out.dupacks_owed = 0;
        self.rec.rtx_pending = false;
        self.out.probe_pending = false;
        self.out.keepalive_pending = false;
        match reason {
            CloseReason::Reset => self.push_event(Event::Reset),
            CloseReason::TimedOut => self.push_event(Event::TimedOut),
            _ => {}
        }
        self.push_event(Event::Closed);
    }
}

/// The options both sides agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub timestamps: bool,
    pub sack: bool,
    /// Shift applied to the peer's window field.
    pub snd_wscale: u8,
    /// Shift the peer applies to ours.
    pub rcv_wscale: u8,
    /// Send MSS after the floor and our cap.
    pub snd_mss: u16,
}
