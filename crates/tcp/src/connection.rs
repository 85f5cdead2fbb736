//! The transmission control block and its state machine (RFC 9293 §3.3.2, §3.10).
//!
//! Responsibilities, top to bottom of this file:
//! - construction: active open ([`Connection::connect`]) and passive open from a SYN
//!   ([`Connection::accept`]), option negotiation (MSS, window scale, timestamps, SACK);
//! - input: [`Connection::handle_segment`] runs RFC 9293 §3.10.7 in order — SYN-SENT handling,
//!   PAWS (RFC 7323 §5), the four-case acceptability test, RST and SYN checks with RFC 5961
//!   challenge ACKs, the ACK field (RFC 5961 §5 range, SND.UNA/window updates, RTT, congestion
//!   control, fast retransmit), segment text and FIN;
//! - timers: [`Connection::handle_timeout`] fires retransmission (RFC 6298), persist (zero
//!   window, RFC 9293 §3.8.6.1), delayed ACK, keepalive and TIME-WAIT deadlines;
//! - output: [`Connection::poll_transmit`] builds at most one segment per call, in priority
//!   order RST, SYN, fast retransmission, data/FIN, window probe, keepalive, pure ACK;
//! - application calls: `send`, `recv`, `shutdown_write`, `close`, `abort`.

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr, TcpTimestamp};

use crate::cc::Congestion;
use crate::config::{Config, NS_PER_MS};
use crate::ooo::OooQueue;
use crate::ring::Ring;
use crate::rtt::RttEstimator;

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

/// Per-connection counters; every drop path has its own (FreeBSD `tcpstat` habit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub rx_segments: u64,
    pub tx_segments: u64,
    pub rx_payload_bytes: u64,
    pub tx_payload_bytes: u64,
    /// Segments for other ports.
    pub rx_drop_wrong_port: u64,
    /// Segments arriving in CLOSED.
    pub rx_drop_closed: u64,
    /// Segments in SYN-SENT that carry neither an acceptable SYN nor an acceptable RST.
    pub rx_drop_syn_sent: u64,
    /// RFC 7323 §5.3 R1: timestamp older than TS.Recent.
    pub rx_drop_paws: u64,
    /// RFC 7323 §3.2: timestamps negotiated but the segment carries none.
    pub rx_drop_missing_ts: u64,
    /// RFC 9293 §3.10.7.4: unacceptable sequence numbers.
    pub rx_drop_out_of_window: u64,
    /// RST outside the window (RFC 5961 §3.2), silently dropped.
    pub rx_drop_rst_out_of_window: u64,
    /// RST in TIME-WAIT, ignored (RFC 1337).
    pub rx_drop_rst_time_wait: u64,
    /// SYN on a synchronized connection (answered with a challenge ACK, RFC 5961 §4).
    pub rx_drop_syn_in_window: u64,
    /// Segments without ACK after SYN-SENT.
    pub rx_drop_no_ack: u64,
    /// Unacceptable ACK in SYN-SENT or SYN-RECEIVED (answered with RST).
    pub rx_drop_bad_ack: u64,
    /// ACK for data never sent (RFC 5961 §5.2 / RFC 9293 §3.10.7.4).
    pub rx_drop_ack_unsent: u64,
    /// ACK older than SND.UNA − MAX.SND.WND (RFC 5961 §5.2).
    pub rx_drop_ack_too_old: u64,
    /// Out-of-order segments not kept: queue disabled or full (range cap).
    pub rx_drop_ooo_ranges: u64,
    /// Out-of-order segments not kept: byte cap.
    pub rx_drop_ooo_bytes: u64,
    /// Payload bytes beyond the advertised window, trimmed.
    pub rx_trim_beyond_window_bytes: u64,
    /// Payload bytes already received (duplicates), trimmed.
    pub rx_duplicate_bytes: u64,
    /// Data arriving after `close()`: acknowledged and discarded.
    pub rx_discard_after_close_bytes: u64,
    /// Out-of-order segments kept.
    pub rx_ooo_segments: u64,
    pub dup_acks_rx: u64,
    /// SACK blocks outside (SND.UNA, SND.MAX] or empty: ignored.
    pub rx_sack_blocks_invalid: u64,
    /// Valid SACK blocks not recorded because the scoreboard is full.
    pub rx_sack_blocks_dropped: u64,
    pub challenge_acks_sent: u64,
    pub challenge_acks_suppressed: u64,
    pub rto_expirations: u64,
    pub fast_retransmits: u64,
    pub retransmitted_segments: u64,
    pub retransmitted_bytes: u64,
    pub window_probes_sent: u64,
    pub keepalive_probes_sent: u64,
    pub rtt_samples: u64,
    pub delayed_acks_sent: u64,
    pub pure_acks_sent: u64,
    pub resets_sent: u64,
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
/// Sequence invariants (checked in debug builds): `SND.UNA ≤ SND.NXT ≤ SND.MAX`;
/// `snd_buf_seq` is the sequence number of the first byte in `send_buf` and equals `SND.UNA`
/// once the SYN is acknowledged (until our FIN is, after which SND.UNA = snd_buf_seq + 1);
/// `RCV.NXT ≤ rcv_adv` and `rcv_adv - RCV.NXT ≤ recv_buffer_bytes - recv_buf.len()` (we never
/// advertise room we do not have, and `rcv_adv` never moves left).
#[derive(Debug, Clone)]
pub struct Connection {
    // ---- hot: sequence space and windows ----
    pub(crate) state: State,
    pub(crate) snd_una: SeqNumber,
    pub(crate) snd_nxt: SeqNumber,
    /// Highest sequence number sent plus one (SND.NXT may be pulled back after an RTO).
    pub(crate) snd_max: SeqNumber,
    /// Peer's window in bytes, already scaled.
    pub(crate) snd_wnd: u32,
    pub(crate) snd_wl1: SeqNumber,
    pub(crate) snd_wl2: SeqNumber,
    /// Largest window the peer ever offered (MAX.SND.WND of RFC 5961 §5.2).
    pub(crate) max_snd_wnd: u32,
    /// Sequence number of the first byte held in `send_buf`.
    pub(crate) snd_buf_seq: SeqNumber,
    pub(crate) rcv_nxt: SeqNumber,
    /// Right edge of the window we advertised (never moves left).
    pub(crate) rcv_adv: SeqNumber,
    /// Effective send MSS (peer's MSS, floored, capped by ours), before options.
    pub(crate) snd_mss: u16,
    /// Largest payload received so far, for "every second full-sized segment".
    pub(crate) rcv_mss_seen: u16,
    pub(crate) snd_wscale: u8,
    pub(crate) rcv_wscale: u8,
    pub(crate) ack_due: AckDue,
    pub(crate) dupacks: u8,
    pub(crate) in_recovery: bool,
    pub(crate) ts_ok: bool,
    pub(crate) sack_ok: bool,
    /// The application called `shutdown_write`/`close`: a FIN follows the send buffer.
    pub(crate) fin_queued: bool,
    /// The peer's FIN has been received (in order).
    pub(crate) fin_received: bool,
    /// The application will not read any more (`close`).
    pub(crate) app_closed: bool,
    /// A fast (or partial-ACK) retransmission of the segment at SND.UNA is owed.
    pub(crate) rtx_pending: bool,
    /// Persist timer fired: send a window probe (window 0) or override SWS avoidance.
    pub(crate) probe_pending: bool,
    pub(crate) keepalive_pending: bool,
    pub(crate) events: u8,
    /// Duplicate ACKs still owed for out-of-order segments received since the last poll.
    pub(crate) dupacks_owed: u8,
    /// Bytes received in order since the last ACK we sent.
    pub(crate) rcv_unacked_bytes: u32,
    pub(crate) recover: SeqNumber,
    pub(crate) cc: Congestion,
    pub(crate) rtt: RttEstimator,
    /// Segment being timed for RTT (no timestamps): (sequence number its ACK must cover, sent at).
    pub(crate) rtt_timed: Option<(SeqNumber, u64)>,
    // ---- timestamps ----
    pub(crate) ts_offset: u32,
    pub(crate) ts_recent: u32,
    pub(crate) ts_recent_age_ns: u64,
    pub(crate) last_ack_sent: SeqNumber,
    // ---- timers (absolute ns deadlines, NEVER when off) ----
    pub(crate) rtx_deadline_ns: u64,
    pub(crate) persist_deadline_ns: u64,
    pub(crate) delack_deadline_ns: u64,
    pub(crate) keepalive_deadline_ns: u64,
    pub(crate) time_wait_deadline_ns: u64,
    pub(crate) persist_shift: u8,
    pub(crate) syn_retries: u8,
    pub(crate) keepalive_probes: u8,
    /// When the oldest unacknowledged data was first sent (user timeout reference).
    pub(crate) unacked_since_ns: u64,
    /// When we last sent data (RFC 5681 §4.1 restart after idle).
    pub(crate) last_tx_ns: u64,
    pub(crate) challenge_window_start_ns: u64,
    pub(crate) challenge_acks_in_window: u32,
    // ---- cold ----
    pub(crate) iss: SeqNumber,
    pub(crate) irs: SeqNumber,
    pub(crate) local_port: u16,
    pub(crate) remote_port: u16,
    /// What the peer offered in its SYN, for our SYN-ACK (passive open).
    pub(crate) peer_offered_ws: Option<u8>,
    pub(crate) close_reason: Option<CloseReason>,
    /// A RST owed: (sequence number, acknowledgment number if ACK is set).
    pub(crate) rst_pending: Option<(SeqNumber, Option<SeqNumber>)>,
    pub(crate) config: Config,
    pub(crate) send_buf: Ring,
    pub(crate) recv_buf: Ring,
    pub(crate) ooo: OooQueue,
    /// SACK scoreboard (sender side): ranges above SND.UNA the peer reported holding.
    pub(crate) scoreboard: OooQueue,
    /// RFC 6675 HighRxt: highest sequence number retransmitted in this recovery, plus one.
    pub(crate) high_rxt: SeqNumber,
    pub(crate) counters: Counters,
}

/// The window scale we offer for a receive buffer: the smallest shift that lets the 16-bit
/// field express the whole buffer (RFC 7323 §2.3), at most 14.
fn wscale_for(recv_buffer_bytes: u32) -> u8 {
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
        config: &Config,
        local_port: u16,
        remote_port: u16,
        iss: SeqNumber,
        ts_offset: u32,
    ) -> Self {
        let config = config.validated();
        let snd_mss = config.default_peer_mss_bytes.min(config.mss_bytes);
        Connection {
            state: State::Closed,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: iss,
            max_snd_wnd: 0,
            snd_buf_seq: iss + 1,
            rcv_nxt: SeqNumber(0),
            rcv_adv: SeqNumber(0),
            snd_mss,
            rcv_mss_seen: 0,
            snd_wscale: 0,
            rcv_wscale: 0,
            ack_due: AckDue::None,
            dupacks: 0,
            in_recovery: false,
            ts_ok: false,
            sack_ok: false,
            fin_queued: false,
            fin_received: false,
            app_closed: false,
            rtx_pending: false,
            probe_pending: false,
            keepalive_pending: false,
            events: 0,
            dupacks_owed: 0,
            rcv_unacked_bytes: 0,
            recover: iss,
            cc: Congestion::new(
                config.congestion_control,
                config.initial_window_segments,
                u32::from(snd_mss),
            ),
            rtt: RttEstimator::new(config.rto_initial_ns, config.rto_min_ns, config.rto_max_ns),
            rtt_timed: None,
            ts_offset,
            ts_recent: 0,
            ts_recent_age_ns: now,
            last_ack_sent: SeqNumber(0),
            rtx_deadline_ns: NEVER,
            persist_deadline_ns: NEVER,
            delack_deadline_ns: NEVER,
            keepalive_deadline_ns: NEVER,
            time_wait_deadline_ns: NEVER,
            persist_shift: 0,
            syn_retries: 0,
            keepalive_probes: 0,
            unacked_since_ns: now,
            last_tx_ns: now,
            challenge_window_start_ns: now,
            challenge_acks_in_window: 0,
            iss,
            irs: SeqNumber(0),
            local_port,
            remote_port,
            peer_offered_ws: None,
            close_reason: None,
            rst_pending: None,
            send_buf: Ring::new(config.send_buffer_bytes as usize),
            recv_buf: Ring::new(config.recv_buffer_bytes as usize),
            ooo: OooQueue::new(config.ooo_segments_max, config.ooo_bytes_max),
            scoreboard: OooQueue::new(SCOREBOARD_RANGES_MAX, u32::MAX),
            high_rxt: iss,
            config,
            counters: Counters::default(),
        }
    }

    /// Active open (RFC 9293 §3.10.1): the connection starts in SYN-SENT and its first
    /// `poll_transmit` yields the SYN. `iss` should come from [`crate::isn::IsnGenerator`];
    /// `ts_offset` is a per-connection random offset for the timestamp clock (RFC 7323 §7.1).
    pub fn connect(
        now: u64,
        config: &Config,
        local_port: u16,
        remote_port: u16,
        iss: SeqNumber,
        ts_offset: u32,
    ) -> Connection {
        let mut c = Connection::new(now, config, local_port, remote_port, iss, ts_offset);
        c.state = State::SynSent;
        c.ts_ok = c.config.timestamps;
        c.sack_ok = c.config.sack;
        c.rcv_wscale = if c.config.window_scale {
            wscale_for(c.config.recv_buffer_bytes)
        } else {
            0
        };
        c
    }

    /// Passive open from a received SYN (RFC 9293 §3.10.7.2): the connection starts in
    /// SYN-RECEIVED and its first `poll_transmit` yields the SYN-ACK. The stack owns LISTEN and
    /// calls this for a SYN on a listening port.
    pub fn accept(
        now: u64,
        config: &Config,
        syn: &TcpRepr<'_>,
        iss: SeqNumber,
        ts_offset: u32,
    ) -> Result<Connection, AcceptError> {
        if !syn.flags.contains(TcpFlags::SYN) || syn.flags.intersects(TcpFlags::ACK | TcpFlags::RST)
        {
            return Err(AcceptError::NotSyn);
        }
        let mut c = Connection::new(now, config, syn.dst_port, syn.src_port, iss, ts_offset);
        c.state = State::SynReceived;
        c.irs = syn.seq_number;
        c.rcv_nxt = syn.seq_number + 1;
        c.rcv_adv = c.rcv_nxt;
        c.last_ack_sent = c.rcv_nxt;
        c.negotiate_from_syn(now, syn, true);
        // RFC 7323 §2.2: the window field of a SYN is never scaled.
        c.snd_wnd = u32::from(syn.window_len);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = syn.seq_number;
        c.snd_wl2 = iss;
        c.counters.rx_segments += 1;
        Ok(c)
    }

    /// Passive open completed by a SYN cookie (RFC 4987 §3.6): `ack` is the segment that
    /// completed the handshake and `cookie` what [`crate::isn::SynCookies::validate`] recovered
    /// from it. The connection starts ESTABLISHED with the cookie's MSS and without window
    /// scaling, timestamps or SACK (nothing else survived the stateless handshake); `ack`
    /// itself, and any data it carries, is processed.
    pub fn from_syn_cookie(
        now: u64,
        config: &Config,
        ack: &TcpRepr<'_>,
        cookie: &crate::isn::ValidCookie,
        ts_offset: u32,
    ) -> Connection {
        let mut c = Connection::new(
            now,
            config,
            ack.dst_port,
            ack.src_port,
            cookie.iss,
            ts_offset,
        );
        c.state = State::Established;
        c.irs = cookie.irs;
        c.rcv_nxt = cookie.irs + 1;
        // The SYN-ACK (`SynCookies::syn_ack`) offered this unscaled window.
        c.rcv_adv = c.rcv_nxt + c.config.recv_buffer_bytes.min(0xffff);
        c.last_ack_sent = c.rcv_nxt;
        c.snd_una = cookie.iss + 1;
        c.snd_nxt = c.snd_una;
        c.snd_max = c.snd_una;
        c.snd_buf_seq = c.snd_una;
        c.recover = c.snd_una;
        c.high_rxt = c.snd_una;
        c.snd_mss = cookie
            .mss
            .max(c.config.peer_mss_floor_bytes)
            .min(c.config.mss_bytes);
        c.cc = Congestion::new(
            c.config.congestion_control,
            c.config.initial_window_segments,
            u32::from(c.eff_mss()),
        );
        c.snd_wnd = u32::from(ack.window_len);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = ack.seq_number;
        c.snd_wl2 = ack.ack_number;
        c.push_event(Event::Connected);
        c.push_event(Event::Writable);
        c.start_keepalive(now);
        c.handle_segment(now, ack);
        c
    }

    /// Applies the options of the peer's SYN or SYN-ACK. `passive` says whether we are the
    /// responder (then we agree to whatever we also enable) or the initiator (then both sides
    /// must have offered it).
    fn negotiate_from_syn(&mut self, now: u64, syn: &TcpRepr<'_>, passive: bool) {
        // RFC 9293 §3.7.1: absent MSS option means the default; RFC 6691 floor against tiny MSS.
        let peer_mss = syn
            .max_seg_size
            .unwrap_or(self.config.default_peer_mss_bytes);
        self.snd_mss = peer_mss
            .max(self.config.peer_mss_floor_bytes)
            .min(self.config.mss_bytes);
        // RFC 7323 §2.2: scaling is on only if both SYNs carry the option.
        let offered_ws = if passive {
            self.config.window_scale
        } else {
            self.rcv_wscale > 0 || self.config.window_scale
        };
        match (syn.window_scale, offered_ws) {
            (Some(ws), true) => {
                self.snd_wscale = ws.min(WSCALE_MAX);
                if passive {
                    self.rcv_wscale = wscale_for(self.config.recv_buffer_bytes);
                }
                self.peer_offered_ws = Some(ws);
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
        // RFC 7323 §3.2: timestamps only if both SYNs carry them.
        match (syn.timestamp, self.config.timestamps) {
            (Some(ts), true) => {
                self.ts_ok = true;
                self.ts_recent = ts.tsval;
                self.ts_recent_age_ns = now;
            }
            _ => self.ts_ok = false,
        }
        // RFC 2018 §2: SACK only if both SYNs carry SACK-permitted.
        self.sack_ok = syn.sack_permitted && self.config.sack;
        self.cc = Congestion::new(
            self.config.congestion_control,
            self.config.initial_window_segments,
            u32::from(self.eff_mss()),
        );
    }

    // ------------------------------------------------------------------ getters

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Local port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }
    /// Remote port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }
    /// Smoothed RTT, once sampled.
    pub fn srtt_ns(&self) -> Option<u64> {
        self.rtt.has_sample.then_some(self.rtt.srtt_ns)
    }
    /// Current retransmission timeout, backoff included.
    pub fn rto_ns(&self) -> u64 {
        self.rtt.rto_ns()
    }
    /// Congestion window.
    pub fn cwnd_bytes(&self) -> u32 {
        self.cc.cwnd_bytes
    }
    /// Slow start threshold.
    pub fn ssthresh_bytes(&self) -> u32 {
        self.cc.ssthresh_bytes
    }
    /// The peer's current window (scaled).
    pub fn send_window_bytes(&self) -> u32 {
        self.snd_wnd
    }
    /// Effective payload per segment: send MSS minus the options every segment carries.
    pub fn eff_mss(&self) -> u16 {
        let opts = if self.ts_ok { TS_OPTION_BYTES } else { 0 };
        self.snd_mss.saturating_sub(opts).max(1)
    }
    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// The configuration in force (validated).
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Why the connection closed, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.close_reason
    }
    /// Whether timestamps, SACK and window scaling were negotiated, and the two shifts.
    pub fn negotiated(&self) -> Negotiated {
        Negotiated {
            timestamps: self.ts_ok,
            sack: self.sack_ok,
            snd_wscale: self.snd_wscale,
            rcv_wscale: self.rcv_wscale,
            snd_mss: self.snd_mss,
        }
    }
    /// Bytes queued for sending (unacknowledged plus unsent).
    pub fn send_queue_bytes(&self) -> usize {
        self.send_buf.len()
    }
    /// Free space in the send buffer.
    pub fn send_capacity_bytes(&self) -> usize {
        if self.fin_queued {
            0
        } else {
            self.send_buf.free()
        }
    }
    /// Bytes ready to be read.
    pub fn recv_queue_bytes(&self) -> usize {
        self.recv_buf.len()
    }
    /// Bytes held out of order.
    pub fn ooo_bytes(&self) -> u32 {
        self.ooo.bytes()
    }
    /// SND.UNA, SND.NXT and RCV.NXT, for tests and diagnostics.
    pub fn sequence_state(&self) -> (SeqNumber, SeqNumber, SeqNumber) {
        (self.snd_una, self.snd_nxt, self.rcv_nxt)
    }
    /// True while in fast recovery.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Switches the Nagle algorithm off (`true`) or on at run time (RFC 9293 §3.7.4).
    pub fn set_nodelay(&mut self, nodelay: bool) {
        self.config.nodelay = nodelay;
    }

    /// The first violated TCB invariant, if any (for checkers in tests and simulations; cheap
    /// enough to call after every input).
    pub fn invariant_violation(&self) -> Option<&'static str> {
        if self.snd_nxt.lt(self.snd_una) {
            return Some("SND.NXT < SND.UNA");
        }
        if self.snd_max.lt(self.snd_nxt) {
            return Some("SND.MAX < SND.NXT");
        }
        if self.state.is_synchronized() {
            if self.rcv_adv.lt(self.rcv_nxt) {
                return Some("advertised right edge behind RCV.NXT");
            }
            let promised = u64::from(fwd(self.rcv_nxt, self.rcv_adv)) + self.recv_buf.len() as u64;
            if promised > u64::from(self.config.recv_buffer_bytes) {
                return Some("advertised window exceeds free receive buffer");
            }
            if self.snd_buf_seq.gt(self.snd_una) {
                return Some("send buffer starts after SND.UNA");
            }
        }
        if self.recv_buf.len() > self.config.recv_buffer_bytes as usize {
            return Some("receive buffer over capacity");
        }
        if self.ooo.bytes() > self.config.ooo_bytes_max
            || self.ooo.ranges().len() > usize::from(self.config.ooo_segments_max)
        {
            return Some("out-of-order queue over its caps");
        }
        if self.scoreboard.ranges().len() > usize::from(SCOREBOARD_RANGES_MAX) {
            return Some("SACK scoreboard over its cap");
        }
        if self.cc.cwnd_bytes == 0 {
            return Some("zero congestion window");
        }
        None
    }

    fn ts_now(&self, now: u64) -> u32 {
        // RFC 7323 §5.4: a 1 ms clock, offset per connection (§7.1).
        ((now / NS_PER_MS) as u32).wrapping_add(self.ts_offset)
    }

    fn push_event(&mut self, e: Event) {
        self.events |= event_bit(e);
    }

    /// The next event, in the order Connected, Readable, Writable, PeerClosed, Reset,
    /// TimedOut, Closed. Events are level-collapsed: several occurrences before a poll yield one.
    pub fn poll_event(&mut self) -> Option<Event> {
        for e in EVENT_ORDER {
            let b = event_bit(e);
            if self.events & b != 0 {
                self.events &= !b;
                return Some(e);
            }
        }
        None
    }

    /// The earliest deadline at which `handle_timeout` must be called, if any.
    pub fn poll_timeout(&self) -> Option<u64> {
        let t = self
            .rtx_deadline_ns
            .min(self.persist_deadline_ns)
            .min(self.delack_deadline_ns)
            .min(self.keepalive_deadline_ns)
            .min(self.time_wait_deadline_ns)
            .min(self.user_timeout_deadline_ns());
        (t != NEVER).then_some(t)
    }

    /// RFC 9293 §3.8.3 (R2) / RFC 5482: when unacknowledged data has waited this long, give
    /// up. Not while probing a zero window: a peer answering probes is alive (§3.8.6.1).
    fn user_timeout_deadline_ns(&self) -> u64 {
        match self.config.user_timeout_ns {
            Some(ut)
                if self.snd_una != self.snd_max
                    && self.persist_deadline_ns == NEVER
                    && self.state.is_synchronized()
                    && self.state != State::TimeWait =>
            {
                self.unacked_since_ns.saturating_add(ut).min(NEVER - 1)
            }
            _ => NEVER,
        }
    }

    // ------------------------------------------------------------------ application calls

    /// Queues bytes for sending; returns how many fit (0 when the buffer is full).
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Error> {
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait => {}
            State::Closed => return Err(self.closed_error()),
            _ => return Err(Error::InvalidState),
        }
        if self.fin_queued {
            return Err(Error::InvalidState);
        }
        Ok(self.send_buf.push(data))
    }

    /// Reads in-order received bytes. `Ok(0)` means nothing is available yet;
    /// [`Error::Finished`] that the peer closed and everything has been read.
    pub fn recv(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        if self.app_closed {
            return Err(Error::InvalidState);
        }
        let n = self.recv_buf.pop(out);
        if n == 0 {
            if self.fin_received {
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

    fn closed_error(&self) -> Error {
        match self.close_reason {
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
                self.fin_queued = true;
                if self.state == State::Established {
                    self.state = State::FinWait1;
                }
                Ok(())
            }
            State::CloseWait => {
                self.fin_queued = true;
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
    /// (`rx_discard_after_close_bytes`).
    pub fn close(&mut self) -> Result<(), Error> {
        if !self.recv_buf.is_empty() && self.state.is_synchronized() {
            self.abort();
            return Ok(());
        }
        self.app_closed = true;
        self.shutdown_write()
    }

    /// Abort (RFC 9293 §3.10.5): send RST if synchronized, drop all state, enter CLOSED.
    pub fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        ) {
            self.rst_pending = Some((self.snd_max, None));
        }
        self.enter_closed(CloseReason::Aborted);
    }

    fn enter_closed(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.close_reason = Some(reason);
        self.rtx_deadline_ns = NEVER;
        self.persist_deadline_ns = NEVER;
        self.delack_deadline_ns = NEVER;
        self.keepalive_deadline_ns = NEVER;
        self.time_wait_deadline_ns = NEVER;
        self.ack_due = AckDue::None;
        self.dupacks_owed = 0;
        self.rtx_pending = false;
        self.probe_pending = false;
        self.keepalive_pending = false;
        match reason {
            CloseReason::Reset => self.push_event(Event::Reset),
            CloseReason::TimedOut => self.push_event(Event::TimedOut),
            _ => {}
        }
        self.push_event(Event::Closed);
    }

    // ------------------------------------------------------------------ input

    /// Processes one received segment (already demultiplexed to this connection, checksum
    /// verified by the stack).
    pub fn handle_segment(&mut self, now: u64, seg: &TcpRepr<'_>) {
        self.counters.rx_segments += 1;
        if seg.dst_port != self.local_port || seg.src_port != self.remote_port {
            self.counters.rx_drop_wrong_port += 1;
            return;
        }
        match self.state {
            State::Closed => {
                self.counters.rx_drop_closed += 1;
            }
            State::SynSent => self.rx_syn_sent(now, seg),
            _ => self.rx_synchronized(now, seg),
        }
    }

    /// RFC 9293 §3.10.7.3, SYN-SENT.
    fn rx_syn_sent(&mut self, now: u64, seg: &TcpRepr<'_>) {
        let flags = seg.flags;
        let has_ack = flags.contains(TcpFlags::ACK);
        if has_ack {
            // "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset (unless the RST bit is set)".
            if seg.ack_number.le(self.iss) || seg.ack_number.gt(self.snd_max) {
                self.counters.rx_drop_bad_ack += 1;
                if !flags.contains(TcpFlags::RST) {
                    self.queue_rst(seg.ack_number, None);
                }
                return;
            }
        }
        if flags.contains(TcpFlags::RST) {
            // RFC 5961 §3.2 / RFC 9293: in SYN-SENT a RST is acceptable if it ACKs our SYN.
            if has_ack {
                self.enter_closed(CloseReason::Reset);
            } else {
                self.counters.rx_drop_syn_sent += 1;
            }
            return;
        }
        if !flags.contains(TcpFlags::SYN) {
            self.counters.rx_drop_syn_sent += 1;
            return;
        }
        self.irs = seg.seq_number;
        self.rcv_nxt = seg.seq_number + 1;
        // Our SYN offered an unscaled window (RFC 7323 §2.2); the peer may use it.
        self.rcv_adv = self.rcv_nxt + self.config.recv_buffer_bytes.min(0xffff);
        self.last_ack_sent = self.rcv_nxt;
        self.negotiate_from_syn(now, seg, false);
        self.snd_wnd = u32::from(seg.window_len);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq_number;
        if has_ack {
            self.snd_una = seg.ack_number;
            self.snd_wl2 = seg.ack_number;
            self.on_syn_acked(now);
            self.state = State::Established;
            self.push_event(Event::Connected);
            if self.send_buf.free() > 0 {
                self.push_event(Event::Writable);
            }
            // "form an ACK segment ... and send it" (data is deferred to the next segment).
            self.ack_due = AckDue::Now;
            self.start_keepalive(now);
            if self.fin_queued {
                self.state = State::FinWait1;
            }
        } else {
            // Simultaneous open: "enter SYN-RECEIVED, form a SYN,ACK segment and send it".
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
            self.snd_wl2 = self.iss;
            self.rtx_deadline_ns = NEVER;
        }
    }

    /// The SYN we sent has been acknowledged: take the first RTT sample of the connection.
    fn on_syn_acked(&mut self, now: u64) {
        self.rtx_deadline_ns = NEVER;
        self.last_tx_ns = now;
        if self.syn_retries == 0 {
            if let Some((_, sent_ns)) = self.rtt_timed.take() {
                self.rtt.sample(now.saturating_sub(sent_ns));
                self.counters.rtt_samples += 1;
            }
        } else {
            // Karn: the SYN was retransmitted, no sample. RFC 6298 §5.7: "the RTO MUST be
            // re-initialized to 3 seconds when data transmission begins" if it is below that.
            self.rtt_timed = None;
            self.rtt.backoff_shift = 0;
            if self.rtt.base_rto_ns < RTO_AFTER_SYN_TIMEOUT_NS {
                self.rtt.base_rto_ns = RTO_AFTER_SYN_TIMEOUT_NS.min(self.config.rto_max_ns);
            }
        }
    }

    fn rx_synchronized(&mut self, now: u64, seg: &TcpRepr<'_>) {
        if self.state == State::SynReceived
            && seg.flags.contains(TcpFlags::SYN | TcpFlags::ACK)
            && seg.seq_number == self.irs
            && self.snd_una.lt(seg.ack_number)
            && seg.ack_number.le(self.snd_max)
        {
            // Simultaneous open (RFC 9293 §3.5, figure 7): the peer's SYN-ACK repeats the SYN
            // that brought us here. Trim that duplicate SYN (as §3.10.7.4 trims duplicate
            // octets) and process the rest, whose ACK completes our handshake.
            let trimmed = TcpRepr {
                seq_number: seg.seq_number + 1,
                flags: TcpFlags(seg.flags.0 & !TcpFlags::SYN.0),
                ..*seg
            };
            return self.rx_synchronized_inner(now, &trimmed);
        }
        self.rx_synchronized_inner(now, seg)
    }

    fn rx_synchronized_inner(&mut self, now: u64, seg: &TcpRepr<'_>) {
        let flags = seg.flags;
        let rst = flags.contains(TcpFlags::RST);
        // RFC 7323 §3.2: once negotiated, a non-RST segment without TSopt SHOULD be dropped.
        if self.ts_ok && !rst && seg.timestamp.is_none() && self.state != State::SynReceived {
            self.counters.rx_drop_missing_ts += 1;
            return;
        }
        // RFC 7323 §5.3 R1 (PAWS), before the acceptability test.
        if self.ts_ok && !rst {
            if let Some(ts) = seg.timestamp {
                if ts_lt(ts.tsval, self.ts_recent) {
                    // RFC 7323 §5.5: after 24 days idle TS.Recent is invalid; accept.
                    if now.saturating_sub(self.ts_recent_age_ns) > PAWS_IDLE_NS {
                        self.ts_recent = ts.tsval;
                        self.ts_recent_age_ns = now;
                    } else {
                        self.counters.rx_drop_paws += 1;
                        self.ack_due = AckDue::Now;
                        return;
                    }
                }
            }
        }
        let seg_len = seq_len(seg);
        // For the acceptability test a SYN we already hold counts, so use the full length.
        if !self.acceptable(seg.seq_number, seg_len) {
            self.counters.rx_drop_out_of_window += 1;
            if rst {
                self.counters.rx_drop_rst_out_of_window += 1;
                return;
            }
            if self.state == State::SynReceived
                && flags.contains(TcpFlags::SYN)
                && seg.seq_number == self.irs
            {
                // The peer retransmitted its SYN: our SYN-ACK was lost, send it again.
                self.snd_nxt = self.iss;
                return;
            }
            if self.state == State::TimeWait && flags.contains(TcpFlags::FIN) {
                // RFC 9293 §3.10.7.4: a retransmitted FIN restarts the 2 MSL timeout.
                self.time_wait_deadline_ns = now.saturating_add(self.config.time_wait_ns);
            }
            // "If an incoming segment is not acceptable, an acknowledgment should be sent".
            self.ack_due = AckDue::Now;
            return;
        }
        // Second: RST (RFC 5961 §3.2).
        if rst {
            if self.state == State::TimeWait {
                // RFC 1337: ignore RST in TIME-WAIT to avoid assassination.
                self.counters.rx_drop_rst_time_wait += 1;
                return;
            }
            if seg.seq_number == self.rcv_nxt {
                // Exact match: reset.
                self.enter_closed(CloseReason::Reset);
            } else {
                // In window but not exact: challenge ACK.
                self.challenge_ack(now);
            }
            return;
        }
        // Fourth: SYN (RFC 5961 §4.2): any SYN on a synchronized (or SYN-RECEIVED)
        // connection gets a challenge ACK, whatever its sequence number.
        if flags.contains(TcpFlags::SYN) {
            self.counters.rx_drop_syn_in_window += 1;
            self.challenge_ack(now);
            return;
        }
        // Fifth: ACK.
        if !flags.contains(TcpFlags::ACK) {
            self.counters.rx_drop_no_ack += 1;
            return;
        }
        let ack = seg.ack_number;
        if self.state == State::SynReceived {
            // RFC 9293 §3.10.7.4: "If SND.UNA < SEG.ACK =< SND.NXT, then enter ESTABLISHED".
            if self.snd_una.lt(ack) && ack.le(self.snd_max) {
                self.snd_una = ack;
                self.state = State::Established;
                self.push_event(Event::Connected);
                if self.send_buf.free() > 0 {
                    self.push_event(Event::Writable);
                }
                self.snd_wnd = u32::from(seg.window_len) << self.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                self.snd_wl1 = seg.seq_number;
                self.snd_wl2 = ack;
                self.on_syn_acked(now);
                self.start_keepalive(now);
                if self.fin_queued {
                    self.state = State::FinWait1;
                }
            } else {
                // "If the segment acknowledgment is not acceptable, form a reset segment".
                self.counters.rx_drop_bad_ack += 1;
                self.queue_rst(ack, None);
                return;
            }
        }
        // RFC 5961 §5.2: acceptable iff SND.UNA − MAX.SND.WND ≤ SEG.ACK ≤ SND.NXT.
        if ack.gt(self.snd_max) {
            self.counters.rx_drop_ack_unsent += 1;
            self.challenge_ack(now);
            return;
        }
        if ack.lt(self.snd_una - self.max_snd_wnd.max(1)) {
            self.counters.rx_drop_ack_too_old += 1;
            self.challenge_ack(now);
            return;
        }
        // RFC 7323 §4.3 (3): update TS.Recent when SEG.SEQ ≤ Last.ACK.sent.
        if let (true, Some(ts)) = (self.ts_ok, seg.timestamp) {
            if !ts_lt(ts.tsval, self.ts_recent) && seg.seq_number.le(self.last_ack_sent) {
                self.ts_recent = ts.tsval;
                self.ts_recent_age_ns = now;
            }
        }
        self.keepalive_probes = 0;
        if self.keepalive_deadline_ns != NEVER {
            self.start_keepalive(now);
        }
        self.rx_ack(now, seg);
        if self.state == State::Closed {
            return;
        }
        // Seventh: segment text (RFC 9293 §3.10.7.4), eighth: FIN.
        self.rx_text_and_fin(now, seg);
    }

    /// RFC 9293 §3.10.7.4 four-case acceptability test, against the window we advertised.
    fn acceptable(&self, seq: SeqNumber, seg_len: u32) -> bool {
        let wnd = fwd(self.rcv_nxt, self.rcv_adv);
        let in_wnd = |s: SeqNumber| self.rcv_nxt.le(s) && s.lt(self.rcv_adv);
        match (seg_len, wnd) {
            (0, 0) => seq == self.rcv_nxt,
            (0, _) => in_wnd(seq),
            // Zero window: only the ACK/RST/URG of a segment at RCV.NXT is processed (its
            // text is trimmed away below): "special allowance should be made to accept valid
            // ACKs, URGs, and RSTs".
            (_, 0) => seq == self.rcv_nxt,
            (n, _) => in_wnd(seq) || in_wnd(seq + (n - 1)),
        }
    }

    /// RFC 5961 §7: challenge ACKs are rate limited per connection.
    fn challenge_ack(&mut self, now: u64) {
        if now.saturating_sub(self.challenge_window_start_ns) >= crate::config::NS_PER_S {
            self.challenge_window_start_ns = now;
            self.challenge_acks_in_window = 0;
        }
        if self.challenge_acks_in_window < self.config.challenge_acks_per_s_max {
            self.challenge_acks_in_window += 1;
            self.counters.challenge_acks_sent += 1;
            self.ack_due = AckDue::Now;
        } else {
            self.counters.challenge_acks_suppressed += 1;
        }
    }

    fn queue_rst(&mut self, seq: SeqNumber, ack: Option<SeqNumber>) {
        self.rst_pending = Some((seq, ack));
    }

    fn start_keepalive(&mut self, now: u64) {
        if let Some(ka) = self.config.keepalive {
            self.keepalive_deadline_ns = now.saturating_add(ka.idle_ns);
        }
    }

    /// Fin sequence number, once queued: the FIN follows the last byte of the send buffer.
    fn fin_seq(&self) -> SeqNumber {
        self.snd_buf_seq + self.send_buf.len() as u32
    }

    /// True once our FIN is queued and acknowledged.
    fn fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una.gt(self.fin_seq())
    }

    /// The ACK field of an acceptable segment (RFC 9293 §3.10.7.4, fifth check, and the
    /// congestion control around it).
    fn rx_ack(&mut self, now: u64, seg: &TcpRepr<'_>) {
        let ack = seg.ack_number;
        let mss = u32::from(self.eff_mss());
        let new_wnd = u32::from(seg.window_len) << self.snd_wscale;
        let flight_before = fwd(self.snd_una, self.snd_max);
        let sacked_new = self.sack_ok && self.rx_sack_blocks(seg);
        if ack.gt(self.snd_una) {
            let acked = fwd(self.snd_una, ack);
            // Remove acknowledged data from the send buffer (the FIN is not in the buffer).
            let data_acked = fwd(self.snd_buf_seq, ack).min(self.send_buf.len() as u32);
            self.send_buf.consume(data_acked as usize);
            self.snd_buf_seq += data_acked;
            self.snd_una = ack;
            if self.snd_nxt.lt(ack) {
                self.snd_nxt = ack;
            }
            self.scoreboard.remove_below(ack);
            if data_acked > 0 && !self.fin_queued {
                self.push_event(Event::Writable);
            }
            self.rtt_sample_on_ack(now, seg, ack);
            self.unacked_since_ns = now;
            // Congestion control (RFC 5681 §3, RFC 6582 §3.2).
            if self.in_recovery {
                if ack.ge(self.recover) {
                    // Full acknowledgment: leave fast recovery.
                    self.in_recovery = false;
                    self.dupacks = 0;
                    self.cc
                        .on_recovery_exit(fwd(self.snd_una, self.snd_max), mss);
                } else if self.sack_ok {
                    // RFC 6675: NextSeg picks the holes; a partial ACK also says the segment at
                    // the new SND.UNA is missing, so resend it unless already resent.
                    if self.snd_una.ge(self.high_rxt) {
                        self.rtx_pending = true;
                    }
                } else {
                    // RFC 6582 §3.2 step 5: partial ACK — retransmit the next hole, deflate by
                    // the amount acknowledged, add back one SMSS if at least one was acked.
                    self.rtx_pending = true;
                    let deflated = self.cc.cwnd_bytes.saturating_sub(acked);
                    self.cc.cwnd_bytes = if acked >= mss {
                        deflated.saturating_add(mss)
                    } else {
                        deflated
                    }
                    .max(mss);
                }
            } else {
                self.dupacks = 0;
                self.cc.on_ack(now, acked, mss, self.rtt.srtt_ns);
            }
            // RFC 6298 §5.2/§5.3: all acknowledged → stop; otherwise restart the timer.
            if self.snd_una == self.snd_max {
                self.rtx_deadline_ns = NEVER;
            } else if self.persist_deadline_ns == NEVER {
                self.rtx_deadline_ns = now.saturating_add(self.rtt.rto_ns());
            }
        } else if ack == self.snd_una
            && seg.payload.is_empty()
            && !seg.flags.intersects(TcpFlags::SYN | TcpFlags::FIN)
            && (new_wnd == self.snd_wnd || sacked_new)
            && new_wnd > 0
            && flight_before > 0
        {
            // RFC 5681 §2: a duplicate acknowledgment.
            self.counters.dup_acks_rx += 1;
            self.on_dupack(now, mss, flight_before);
        }
        // RFC 6675 §5: with SACK, recovery also starts once IsLost(HighACK + 1) holds.
        if sacked_new
            && !self.in_recovery
            && ack == self.snd_una
            && self.snd_una.gt(self.recover)
            && self.scoreboard.lost_boundary(mss, DUP_THRESH).is_some()
        {
            self.enter_recovery(now, mss, flight_before);
        }
        // RFC 9293 §3.10.7.4: window update when SND.WL1 < SEG.SEQ or
        // (SND.WL1 = SEG.SEQ and SND.WL2 ≤ SEG.ACK).
        if self.snd_wl1.lt(seg.seq_number)
            || (self.snd_wl1 == seg.seq_number && self.snd_wl2.le(ack))
        {
            let was_zero = self.snd_wnd == 0;
            self.snd_wnd = new_wnd;
            self.snd_wl1 = seg.seq_number;
            self.snd_wl2 = ack;
            self.max_snd_wnd = self.max_snd_wnd.max(new_wnd);
            if new_wnd > 0 && (was_zero || self.persist_deadline_ns != NEVER) {
                // The window opened: stop probing.
                self.persist_deadline_ns = NEVER;
                self.persist_shift = 0;
            }
        }
        // State transitions driven by the acknowledgment of our FIN.
        if self.fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.rtx_deadline_ns = NEVER;
                    if self.app_closed {
                        // Nobody can read or write any more: do not wait forever for the
                        // peer's FIN (the FIN-WAIT-2 timer of BSD and Linux), reuse 2·MSL.
                        self.time_wait_deadline_ns = now.saturating_add(self.config.time_wait_ns);
                    }
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    self.enter_closed(CloseReason::Normal);
                }
                _ => {}
            }
        }
    }

    fn on_dupack(&mut self, now: u64, mss: u32, flight: u32) {
        self.dupacks = self.dupacks.saturating_add(1);
        if self.in_recovery {
            if !self.sack_ok {
                // RFC 5681 §3.2 step 4: inflate by one SMSS per additional duplicate (with
                // SACK, RFC 6675 counts the pipe instead).
                self.cc.cwnd_bytes = self.cc.cwnd_bytes.saturating_add(mss);
            }
            return;
        }
        // RFC 6582 §3.2 step 2: only if the cumulative ACK covers more than `recover`
        // (avoids repeated fast retransmits after a timeout).
        if u32::from(self.dupacks) == DUP_THRESH && self.snd_una.gt(self.recover) {
            self.enter_recovery(now, mss, flight);
        }
        // dupacks 1 and 2: RFC 3042 limited transmit, applied in `usable_window`.
    }

    fn enter_recovery(&mut self, now: u64, mss: u32, flight: u32) {
        self.recover = self.snd_max;
        self.cc.on_congestion_event(now, flight, mss);
        self.cc.cwnd_bytes = if self.sack_ok {
            // RFC 6675 §5 step (4.2): cwnd = ssthresh; the pipe governs sending.
            self.cc.ssthresh_bytes
        } else {
            // RFC 5681 §3.2 step 3: cwnd = ssthresh + 3*SMSS.
            self.cc.ssthresh_bytes.saturating_add(3 * mss)
        };
        self.high_rxt = self.snd_una;
        self.in_recovery = true;
        // RFC 5681 §3.2 step 2 / RFC 6675 §5 step (4.3): retransmit the first unacked segment.
        self.rtx_pending = true;
        self.counters.fast_retransmits += 1;
    }

    /// Records the SACK blocks of an acceptable ACK (RFC 2018 §4, RFC 6675 §5); returns
    /// whether anything new was SACKed. Blocks must lie within (SND.UNA, SND.MAX]: anything
    /// else (including D-SACK blocks below SND.UNA) is ignored and counted.
    fn rx_sack_blocks(&mut self, seg: &TcpRepr<'_>) -> bool {
        let before = self.scoreboard.bytes();
        let floor = self.snd_una.max(seg.ack_number);
        for b in seg.sack_blocks.iter().flatten() {
            if !(floor.lt(b.left) && b.left.lt(b.right) && b.right.le(self.snd_max)) {
                self.counters.rx_sack_blocks_invalid += 1;
                continue;
            }
            if self.scoreboard.insert(b.left, b.right).is_err() {
                self.counters.rx_sack_blocks_dropped += 1;
            }
        }
        self.scoreboard.remove_below(floor);
        self.scoreboard.bytes() > before
    }

    /// RFC 6675 §4 SetPipe: bytes believed in the network — unSACKed bytes not deemed lost,
    /// plus retransmitted lost bytes.
    fn pipe_bytes(&self) -> u32 {
        let mss = u32::from(self.eff_mss());
        let una = self.snd_una;
        let flight = fwd(una, self.snd_max);
        let sacked = self.scoreboard.bytes();
        let boundary = self
            .scoreboard
            .lost_boundary(mss, DUP_THRESH)
            .unwrap_or(una)
            .max(una);
        let lost = fwd(una, boundary).saturating_sub(self.scoreboard.bytes_in(una, boundary));
        let rtx_end = self.high_rxt.min(boundary).max(una);
        let rtx = fwd(una, rtx_end).saturating_sub(self.scoreboard.bytes_in(una, rtx_end));
        flight
            .saturating_sub(sacked)
            .saturating_sub(lost)
            .saturating_add(rtx)
    }

    /// RFC 6675 §4 NextSeg rule (1): the first unSACKed, lost, not yet retransmitted range.
    fn sack_next_retransmission(&self) -> Option<(SeqNumber, u32)> {
        let mss = u32::from(self.eff_mss());
        let boundary = self.scoreboard.lost_boundary(mss, DUP_THRESH)?;
        let start = self.scoreboard.next_hole(self.high_rxt.max(self.snd_una));
        if !start.lt(boundary) || !start.lt(self.snd_max) {
            return None;
        }
        let end = self
            .scoreboard
            .next_left_after(start)
            .unwrap_or(self.snd_max)
            .min(self.snd_max);
        Some((start, fwd(start, end).min(mss)))
    }

    fn rtt_sample_on_ack(&mut self, now: u64, seg: &TcpRepr<'_>, ack: SeqNumber) {
        if self.ts_ok {
            // RFC 7323 §4.1: RTTM from the echoed timestamp of an ACK for new data; valid
            // even for retransmitted segments, so Karn's rule is not needed.
            if let Some(ts) = seg.timestamp {
                let ticks = self.ts_now(now).wrapping_sub(ts.tsecr);
                if ts.tsecr != 0 && (ticks as i32) >= 0 {
                    self.rtt.sample(u64::from(ticks) * NS_PER_MS);
                    self.counters.rtt_samples += 1;
                }
            }
            self.rtt_timed = None;
            return;
        }
        // Karn: only a segment that was never retransmitted is timed (`rtt_timed` is cleared on
        // every retransmission).
        if let Some((end, sent_ns)) = self.rtt_timed {
            if ack.ge(end) {
                self.rtt.sample(now.saturating_sub(sent_ns));
                self.counters.rtt_samples += 1;
                self.rtt_timed = None;
            }
        }
    }

    fn enter_time_wait(&mut self, now: u64) {
        self.state = State::TimeWait;
        self.rtx_deadline_ns = NEVER;
        self.persist_deadline_ns = NEVER;
        self.keepalive_deadline_ns = NEVER;
        self.time_wait_deadline_ns = now.saturating_add(self.config.time_wait_ns);
    }

    /// Segment text and FIN (RFC 9293 §3.10.7.4, seventh and eighth checks).
    fn rx_text_and_fin(&mut self, now: u64, seg: &TcpRepr<'_>) {
        let accepts_text = matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        );
        let mut fin = seg.flags.contains(TcpFlags::FIN);
        if !accepts_text {
            // CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT: the peer already sent FIN; ignore text.
            if fin && self.state == State::TimeWait {
                self.time_wait_deadline_ns = now.saturating_add(self.config.time_wait_ns);
                self.ack_due = AckDue::Now;
            }
            return;
        }
        let mut start = seg.seq_number;
        let mut data = seg.payload;
        // Trim what was already received.
        if start.lt(self.rcv_nxt) {
            let skip = fwd(start, self.rcv_nxt) as usize;
            let dup = skip.min(data.len());
            self.counters.rx_duplicate_bytes += dup as u64;
            data = data.get(skip..).unwrap_or(&[]);
            if skip > seg.payload.len() {
                // The FIN itself is old too.
                fin = false;
            }
            start = self.rcv_nxt;
        }
        // Trim what lies beyond the advertised window.
        let room = fwd(start, self.rcv_adv) as usize;
        if data.len() > room {
            self.counters.rx_trim_beyond_window_bytes += (data.len() - room) as u64;
            data = data.get(..room).unwrap_or(&[]);
            fin = false;
            // RFC 9293 §3.8.6.1: a zero-window probe (or any data beyond the window) is
            // answered with an ACK announcing the current window.
            self.ack_due = AckDue::Now;
        }
        if !data.is_empty() {
            self.rcv_mss_seen = self
                .rcv_mss_seen
                .max(data.len().min(usize::from(u16::MAX)) as u16);
            self.counters.rx_payload_bytes += data.len() as u64;
        }
        if start == self.rcv_nxt {
            if !data.is_empty() {
                let filled_hole = !self.ooo.is_empty();
                self.accept_in_order(data);
                if filled_hole {
                    // RFC 5681 §4.2: ACK immediately when a segment fills (part of) a gap.
                    self.ack_due = AckDue::Now;
                } else {
                    self.schedule_ack(now);
                }
            }
        } else if !data.is_empty() {
            self.accept_out_of_order(start, data);
            // RFC 5681 §4.2: an out-of-order segment triggers an immediate (duplicate) ACK —
            // one per segment, even when a burst is processed before the next poll, or the
            // sender would never count three duplicates.
            self.ack_due = AckDue::Now;
            self.dupacks_owed = self.dupacks_owed.saturating_add(1).min(DUPACKS_OWED_MAX);
            fin = false;
        } else if fin {
            // A FIN beyond a hole: ACK at once so the sender sees the gap.
            self.ack_due = AckDue::Now;
            fin = false;
        }
        if fin && !self.fin_received && start + data.len() as u32 == self.rcv_nxt {
            self.rx_fin(now);
        }
    }

    fn accept_in_order(&mut self, data: &[u8]) {
        let n = data.len() as u32;
        if self.app_closed {
            // Nobody will read: acknowledge and discard.
            self.counters.rx_discard_after_close_bytes += u64::from(n);
            self.rcv_nxt += n;
            self.rcv_adv = self.rcv_adv.max(self.rcv_nxt);
            self.ooo.clear();
            return;
        }
        let written = self.recv_buf.write_at(self.recv_buf.len(), data);
        debug_assert_eq!(written, data.len(), "window promised room the buffer lacks");
        self.recv_buf.commit(written);
        self.rcv_nxt += written as u32;
        self.rcv_unacked_bytes = self.rcv_unacked_bytes.saturating_add(written as u32);
        // Pull in out-of-order ranges that are now contiguous (already in the ring).
        while let Some(right) = self.ooo.pop_contiguous(self.rcv_nxt) {
            let extra = fwd(self.rcv_nxt, right);
            self.recv_buf.commit(extra as usize);
            self.rcv_nxt += extra;
        }
        self.push_event(Event::Readable);
    }

    fn accept_out_of_order(&mut self, start: SeqNumber, data: &[u8]) {
        if self.app_closed || self.config.ooo_segments_max == 0 {
            self.counters.rx_drop_ooo_ranges += 1;
            return;
        }
        let end = start + data.len() as u32;
        match self.ooo.insert(start, end) {
            Ok(()) => {
                let offset = self.recv_buf.len() + fwd(self.rcv_nxt, start) as usize;
                let written = self.recv_buf.write_at(offset, data);
                debug_assert_eq!(written, data.len(), "out-of-order data outside the window");
                self.counters.rx_ooo_segments += 1;
            }
            Err(crate::ooo::OooReject::TooManyRanges) => self.counters.rx_drop_ooo_ranges += 1,
            Err(crate::ooo::OooReject::TooManyBytes) => self.counters.rx_drop_ooo_bytes += 1,
        }
    }

    /// RFC 5681 §4.2 / RFC 9293 §3.8.6.3: ACK at least every second full-sized segment, and
    /// within `delayed_ack_ns` otherwise.
    fn schedule_ack(&mut self, now: u64) {
        let full = u32::from(self.rcv_mss_seen.max(1));
        if self.rcv_unacked_bytes >= 2 * full {
            self.ack_due = AckDue::Now;
        } else if self.ack_due < AckDue::Delayed {
            self.ack_due = AckDue::Delayed;
            if self.delack_deadline_ns == NEVER {
                self.delack_deadline_ns = now.saturating_add(self.config.delayed_ack_ns);
            }
        }
    }

    fn rx_fin(&mut self, now: u64) {
        // RFC 9293 §3.10.7.4 eighth: advance RCV.NXT over the FIN and acknowledge it.
        self.rcv_nxt += 1;
        self.rcv_adv = self.rcv_adv.max(self.rcv_nxt);
        self.fin_received = true;
        self.ooo.clear();
        self.ack_due = AckDue::Now;
        self.push_event(Event::PeerClosed);
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    // Simultaneous close.
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// After the application read data: send a window update if the right edge can move by
    /// at least min(buffer/2, MSS) (RFC 9293 §3.8.6.2.2) and the window the peer sees has
    /// become small (< half the buffer), so the peer does not stall.
    fn maybe_window_update(&mut self) {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            return;
        }
        let buf = self.config.recv_buffer_bytes;
        let current = fwd(self.rcv_nxt, self.rcv_adv);
        let avail = self.recv_window_avail();
        let threshold = (buf / 2).min(u32::from(self.config.mss_bytes));
        if avail.saturating_sub(current) >= threshold && current < buf / 2 {
            self.ack_due = AckDue::Now;
        }
    }

    /// Receive space not yet promised: buffer capacity minus what is queued for the reader.
    fn recv_window_avail(&self) -> u32 {
        self.config
            .recv_buffer_bytes
            .saturating_sub(self.recv_buf.len() as u32)
    }

    /// The window field to advertise now; moves `rcv_adv` right when receiver-side SWS
    /// avoidance allows (RFC 9293 §3.8.6.2.2), never left.
    fn advertise_window(&mut self) -> u16 {
        let avail = self.recv_window_avail();
        let current = fwd(self.rcv_nxt, self.rcv_adv);
        let threshold = (self.config.recv_buffer_bytes / 2).min(u32::from(self.config.mss_bytes));
        let mut wnd = current;
        if avail > current
            && (avail - current >= threshold || avail == self.config.recv_buffer_bytes)
        {
            wnd = avail;
        }
        // Round down to the scale granularity (RFC 7323 §2.4 allows the apparent retraction
        // of less than 2^S; we keep accepting up to `rcv_adv`).
        let field = (wnd >> self.rcv_wscale).min(0xffff);
        let edge = self.rcv_nxt + (field << self.rcv_wscale);
        self.rcv_adv = self.rcv_adv.max(edge);
        field as u16
    }

    // ------------------------------------------------------------------ timers

    /// Fires every deadline that is due at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        if self.time_wait_deadline_ns <= now {
            self.time_wait_deadline_ns = NEVER;
            if matches!(self.state, State::TimeWait | State::FinWait2) {
                self.enter_closed(CloseReason::Normal);
                return;
            }
        }
        if self.delack_deadline_ns <= now {
            self.delack_deadline_ns = NEVER;
            if self.ack_due == AckDue::Delayed {
                self.ack_due = AckDue::Now;
                self.counters.delayed_acks_sent += 1;
            }
        }
        if self.user_timeout_deadline_ns() <= now {
            self.rst_pending = Some((self.snd_max, None));
            self.enter_closed(CloseReason::TimedOut);
            return;
        }
        if self.rtx_deadline_ns <= now {
            self.rtx_deadline_ns = NEVER;
            self.on_rto(now);
            if self.state == State::Closed {
                return;
            }
        }
        if self.persist_deadline_ns <= now {
            self.persist_deadline_ns = NEVER;
            self.probe_pending = true;
        }
        if self.keepalive_deadline_ns <= now {
            self.keepalive_deadline_ns = NEVER;
            self.on_keepalive(now);
        }
    }

    /// RFC 6298 §5.4–§5.6 retransmission timeout.
    fn on_rto(&mut self, now: u64) {
        self.counters.rto_expirations += 1;
        match self.state {
            State::SynSent | State::SynReceived => {
                if self.syn_retries >= self.config.syn_retries_max {
                    self.enter_closed(CloseReason::TimedOut);
                    return;
                }
                self.syn_retries += 1;
                self.rtt.back_off();
                self.rtt_timed = None;
                // Resend the SYN (or SYN-ACK).
                self.snd_nxt = self.iss;
                return;
            }
            State::Closed | State::TimeWait | State::FinWait2 => return,
            _ => {}
        }
        if self.snd_una == self.snd_max {
            return;
        }
        let mss = u32::from(self.eff_mss());
        let flight = fwd(self.snd_una, self.snd_max);
        self.cc.on_rto(now, flight, mss);
        // RFC 6582 §3.2 step 4: record the highest sequence sent.
        self.recover = self.snd_max;
        self.in_recovery = false;
        self.dupacks = 0;
        self.rtx_pending = false;
        // Go back: retransmit from SND.UNA (RFC 6298 §5.4). RFC 2018 §8: after a timeout,
        // SACK information is ignored (the receiver may have reneged).
        self.snd_nxt = self.snd_una;
        self.scoreboard.clear();
        self.rtt_timed = None;
        // RFC 6298 §5.5: back off.
        self.rtt.back_off();
    }

    fn on_keepalive(&mut self, now: u64) {
        let Some(ka) = self.config.keepalive else {
            return;
        };
        if !matches!(self.state, State::Established | State::CloseWait) {
            return;
        }
        if self.snd_una != self.snd_max || !self.send_buf.is_empty() {
            // Data is outstanding; the retransmission timer watches the peer.
            self.keepalive_deadline_ns = now.saturating_add(ka.idle_ns);
            return;
        }
        if self.keepalive_probes >= ka.probes_max {
            self.rst_pending = Some((self.snd_max, None));
            self.enter_closed(CloseReason::TimedOut);
            return;
        }
        self.keepalive_probes += 1;
        self.keepalive_pending = true;
        self.keepalive_deadline_ns = now.saturating_add(ka.interval_ns);
    }

    fn arm_persist(&mut self, now: u64) {
        if self.persist_deadline_ns != NEVER {
            return;
        }
        // RFC 9293 §3.8.6.1: probe at exponentially growing intervals.
        let base = self.rtt.base_rto_ns;
        let interval = base
            .checked_shl(u32::from(self.persist_shift))
            .unwrap_or(self.config.rto_max_ns)
            .min(self.config.rto_max_ns);
        self.persist_deadline_ns = now.saturating_add(interval);
        self.rtx_deadline_ns = NEVER;
    }

    // ------------------------------------------------------------------ output

    /// The next segment to send, if any; payload bytes are copied into `payload_buf`, and the
    /// returned repr borrows them. Call repeatedly until `None` after every input.
    pub fn poll_transmit<'b>(
        &mut self,
        now: u64,
        payload_buf: &'b mut [u8],
    ) -> Option<TcpRepr<'b>> {
        if let Some((seq, ack)) = self.rst_pending.take() {
            self.counters.resets_sent += 1;
            self.counters.tx_segments += 1;
            let mut r = self.base_repr(seq);
            r.flags = TcpFlags::RST;
            if let Some(a) = ack {
                r.flags |= TcpFlags::ACK;
                r.ack_number = a;
            }
            return Some(r);
        }
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived if self.snd_nxt == self.iss => {
                return Some(self.syn_segment(now));
            }
            State::SynSent => return None,
            _ => {}
        }
        if self.state.is_synchronized() {
            if self.rtx_pending {
                self.rtx_pending = false;
                let seq = self.snd_una;
                let len = u32::from(self.eff_mss());
                if self.snd_una != self.snd_max {
                    return self.data_segment(now, seq, len, payload_buf, false);
                }
            }
            if self.in_recovery && self.sack_ok {
                let mss = u32::from(self.eff_mss());
                if self.cc.cwnd_bytes.saturating_sub(self.pipe_bytes()) >= mss {
                    if let Some((seq, len)) = self.sack_next_retransmission() {
                        return self.data_segment(now, seq, len, payload_buf, false);
                    }
                }
            }
            // Duplicate ACKs must be pure ACKs (RFC 5681 §2), so they go before data.
            if self.dupacks_owed > 0 {
                self.dupacks_owed -= 1;
                self.counters.pure_acks_sent += 1;
                let seq = self.snd_max;
                return Some(self.ack_repr(now, seq));
            }
            // Probes and forced sends first: they deliberately ignore SWS avoidance.
            if self.probe_pending {
                self.probe_pending = false;
                if self.unsent_bytes() > 0 {
                    if self.snd_wnd == 0 || self.usable_window() > 0 {
                        return self.probe_segment(now, payload_buf);
                    }
                    self.arm_persist(now);
                }
            }
        }
        if let Some(r) = self.send_new_data(now, payload_buf) {
            return Some(r);
        }
        if self.keepalive_pending {
            self.keepalive_pending = false;
            self.counters.keepalive_probes_sent += 1;
            // RFC 9293 §3.8.4: a probe with SEG.SEQ = SND.NXT − 1 and no data elicits an ACK.
            let r = self.ack_repr(now, self.snd_una - 1);
            return Some(r);
        }
        if self.ack_due == AckDue::Now {
            self.counters.pure_acks_sent += 1;
            // A pure ACK carries SND.MAX, not SND.NXT: while retransmitting after a timeout
            // SND.NXT lies behind what the peer already holds, and an ACK with such an old
            // sequence number would fail its acceptability test (the BSD rule).
            let seq = self.snd_max;
            return Some(self.ack_repr(now, seq));
        }
        None
    }

    fn base_repr(&self, seq: SeqNumber) -> TcpRepr<'static> {
        TcpRepr {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq_number: seq,
            ack_number: SeqNumber(0),
            flags: TcpFlags::NONE,
            window_len: 0,
            urgent_pointer: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            payload: &[],
        }
    }

    /// SYN (active open) or SYN-ACK (passive or simultaneous open), with options.
    fn syn_segment(&mut self, now: u64) -> TcpRepr<'static> {
        let mut r = self.base_repr(self.iss);
        r.flags = TcpFlags::SYN;
        r.max_seg_size = Some(self.config.mss_bytes);
        // RFC 7323 §2.2: the window in a SYN is not scaled.
        let wnd = self.config.recv_buffer_bytes.min(0xffff);
        r.window_len = wnd as u16;
        let passive_reply = self.state == State::SynReceived;
        if passive_reply {
            r.flags |= TcpFlags::ACK;
            r.ack_number = self.rcv_nxt;
            self.last_ack_sent = self.rcv_nxt;
            self.rcv_adv = self.rcv_adv.max(self.rcv_nxt + wnd);
            if self.peer_offered_ws.is_some() {
                r.window_scale = Some(self.rcv_wscale);
            }
            r.sack_permitted = self.sack_ok;
            if self.ts_ok {
                r.timestamp = Some(TcpTimestamp {
                    tsval: self.ts_now(now),
                    tsecr: self.ts_recent,
                });
            }
        } else {
            if self.config.window_scale {
                r.window_scale = Some(self.rcv_wscale);
            }
            r.sack_permitted = self.config.sack;
            if self.config.timestamps {
                r.timestamp = Some(TcpTimestamp {
                    tsval: self.ts_now(now),
                    tsecr: 0,
                });
            }
        }
        self.snd_nxt = self.iss + 1;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        if self.syn_retries == 0 {
            self.rtt_timed = Some((self.snd_nxt, now));
        }
        if self.rtx_deadline_ns == NEVER {
            self.rtx_deadline_ns = now.saturating_add(self.rtt.rto_ns());
        }
        self.ack_due = AckDue::None;
        self.delack_deadline_ns = NEVER;
        self.counters.tx_segments += 1;
        r
    }

    /// Options every non-SYN segment carries; returns the bytes of option space used.
    fn fill_options(&self, now: u64, r: &mut TcpRepr<'_>, with_sack: bool) -> u16 {
        let mut used = 0u16;
        if self.ts_ok {
            r.timestamp = Some(TcpTimestamp {
                tsval: self.ts_now(now),
                tsecr: self.ts_recent,
            });
            used += TS_OPTION_BYTES;
        }
        if with_sack && self.sack_ok && !self.ooo.is_empty() {
            // RFC 2018 §3: at most 4 blocks, 3 alongside timestamps (40 bytes of options).
            let max_blocks = if self.ts_ok { 3 } else { 4 };
            let n = self.ooo.sack_blocks(&mut r.sack_blocks[..max_blocks]);
            if n > 0 {
                used += (2 + 8 * n as u16).next_multiple_of(4);
            }
        }
        used
    }

    /// A segment without data: ACK with the current window (also window/keepalive probes).
    fn ack_repr(&mut self, now: u64, seq: SeqNumber) -> TcpRepr<'static> {
        let mut r = self.base_repr(seq);
        r.flags = TcpFlags::ACK;
        r.ack_number = self.rcv_nxt;
        r.window_len = self.advertise_window();
        self.fill_options(now, &mut r, true);
        self.on_ack_sent();
        self.counters.tx_segments += 1;
        r
    }

    fn on_ack_sent(&mut self) {
        self.ack_due = AckDue::None;
        self.delack_deadline_ns = NEVER;
        self.rcv_unacked_bytes = 0;
        self.last_ack_sent = self.rcv_nxt;
    }

    /// Builds a segment carrying up to `max_len` bytes starting at `seq` (and the FIN if it
    /// follows them). `probe` marks a window probe, which must not arm the retransmission
    /// timer nor advance SND.NXT.
    fn data_segment<'b>(
        &mut self,
        now: u64,
        seq: SeqNumber,
        max_len: u32,
        buf: &'b mut [u8],
        probe: bool,
    ) -> Option<TcpRepr<'b>> {
        let offset = fwd(self.snd_buf_seq, seq) as usize;
        let avail = self.send_buf.len().saturating_sub(offset);
        let mut r = self.base_repr(seq);
        r.flags = TcpFlags::ACK;
        r.ack_number = self.rcv_nxt;
        r.window_len = self.advertise_window();
        let opts = self.fill_options(now, &mut r, true);
        let room = self.snd_mss.saturating_sub(opts).max(1) as usize;
        let len = avail.min(max_len as usize).min(room).min(buf.len());
        let fin = self.fin_queued && offset + len == self.send_buf.len() && !probe;
        if len == 0 && !fin {
            return None;
        }
        let n = self
            .send_buf
            .read_at(offset, buf.get_mut(..len).unwrap_or(&mut []));
        if fin {
            r.flags |= TcpFlags::FIN;
        }
        if n > 0 && offset + n == self.send_buf.len() {
            r.flags |= TcpFlags::PSH;
        }
        let end = seq + n as u32 + u32::from(fin);
        let is_rtx = seq.lt(self.snd_max);
        if is_rtx {
            if self.in_recovery && end.gt(self.high_rxt) {
                self.high_rxt = end;
            }
            self.counters.retransmitted_segments += 1;
            self.counters.retransmitted_bytes += n as u64;
            // Karn: a retransmission makes any running RTT measurement ambiguous.
            self.rtt_timed = None;
        } else if self.rtt_timed.is_none() && !self.ts_ok {
            self.rtt_timed = Some((end, now));
        }
        if self.snd_una == self.snd_max {
            self.unacked_since_ns = now;
        }
        if !probe {
            if end.gt(self.snd_nxt) {
                self.snd_nxt = end;
            }
            // RFC 6298 §5.1: start the timer if it is not running.
            if self.rtx_deadline_ns == NEVER {
                self.rtx_deadline_ns = now.saturating_add(self.rtt.rto_ns());
            }
            self.persist_deadline_ns = NEVER;
        }
        if end.gt(self.snd_max) {
            self.snd_max = end;
        }
        self.on_ack_sent();
        self.last_tx_ns = now;
        self.counters.tx_segments += 1;
        self.counters.tx_payload_bytes += n as u64;
        let (filled, _) = buf.split_at(n);
        r.payload = filled;
        Some(r)
    }

    /// Bytes in the send buffer not yet sent (beyond SND.NXT).
    fn unsent_bytes(&self) -> usize {
        if self.snd_nxt.lt(self.snd_buf_seq) {
            return self.send_buf.len();
        }
        self.send_buf
            .len()
            .saturating_sub(fwd(self.snd_buf_seq, self.snd_nxt) as usize)
    }

    /// How many new bytes congestion and flow control allow now.
    fn usable_window(&self) -> u32 {
        let flight = fwd(self.snd_una, self.snd_nxt);
        let mss = u32::from(self.eff_mss());
        // RFC 3042: the first two duplicate ACKs each allow one new segment beyond cwnd.
        let lt = if !self.in_recovery && self.dupacks > 0 && self.dupacks < 3 {
            u32::from(self.dupacks) * mss
        } else {
            0
        };
        let in_flight = if self.in_recovery && self.sack_ok {
            self.pipe_bytes()
        } else {
            flight
        };
        let cwnd_avail = self
            .cc
            .cwnd_bytes
            .saturating_add(lt)
            .saturating_sub(in_flight);
        let wnd_avail = fwd(self.snd_nxt, self.snd_una + self.snd_wnd);
        cwnd_avail.min(wnd_avail)
    }

    /// New data (or the FIN) under flow control, congestion control, Nagle and SWS avoidance.
    fn send_new_data<'b>(&mut self, now: u64, buf: &'b mut [u8]) -> Option<TcpRepr<'b>> {
        if !matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) {
            return None;
        }
        let offset = fwd(self.snd_buf_seq, self.snd_nxt) as usize;
        if self.snd_nxt.lt(self.snd_buf_seq) {
            return None;
        }
        let unsent = self.send_buf.len().saturating_sub(offset) as u32;
        let fin_due = self.fin_queued && self.snd_nxt == self.fin_seq();
        if unsent == 0 && !fin_due {
            return None;
        }
        let flight = fwd(self.snd_una, self.snd_nxt);
        if flight == 0 && now.saturating_sub(self.last_tx_ns) > self.rtt.rto_ns() {
            // RFC 5681 §4.1: after an idle period longer than the RTO, restart from
            // RW = min(IW, cwnd).
            let iw = u32::from(self.config.initial_window_segments)
                .saturating_mul(u32::from(self.eff_mss()));
            self.cc.cwnd_bytes = self.cc.cwnd_bytes.min(iw);
        }
        let usable = self.usable_window();
        let mss = u32::from(self.eff_mss());
        let len = unsent.min(usable).min(mss);
        if unsent > 0 {
            // Nagle (RFC 9293 §3.7.4) and sender SWS avoidance (RFC 9293 §3.8.6.2.1): send a
            // full segment, or everything left when nothing is in flight (or Nagle is off, or
            // we are closing), or at least half the largest window the peer offered.
            let nagle_ok = self.config.nodelay || flight == 0 || self.fin_queued;
            let send = len > 0
                && (len == mss
                    || (len == unsent && nagle_ok)
                    || (nagle_ok && self.max_snd_wnd > 0 && len >= self.max_snd_wnd / 2));
            if !send {
                if flight == 0 && self.rtx_deadline_ns == NEVER {
                    // Nothing in flight will bring an ACK: the persist timer breaks the wait
                    // (zero window probe, or SWS override, RFC 9293 §3.8.6.1/§3.8.6.2.1).
                    self.arm_persist(now);
                }
                return None;
            }
        }
        self.data_segment(now, self.snd_nxt, len, buf, false)
    }

    /// Persist timer expiry: probe a zero window with one byte, or override SWS avoidance.
    fn probe_segment<'b>(&mut self, now: u64, buf: &'b mut [u8]) -> Option<TcpRepr<'b>> {
        if self.snd_wnd == 0 {
            // RFC 9293 §3.8.6.1: "The sending TCP peer must regularly transmit at least one
            // octet of new data (if available)". The probe byte sits at SND.UNA; if the peer
            // accepts it, its ACK moves SND.NXT past it.
            self.counters.window_probes_sent += 1;
            self.persist_shift = self.persist_shift.saturating_add(1).min(16);
            let una = self.snd_una;
            let r = self.data_segment(now, una, 1, buf, true);
            self.arm_persist(now);
            return r;
        }
        // SWS override: send what the window allows.
        let len = self.usable_window().min(u32::from(self.eff_mss()));
        if len == 0 {
            self.arm_persist(now);
            return None;
        }
        self.data_segment(now, self.snd_nxt, len, buf, false)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn syn() -> TcpRepr<'static> {
        TcpRepr {
            src_port: 9,
            dst_port: 80,
            seq_number: SeqNumber(1000),
            ack_number: SeqNumber(0),
            flags: TcpFlags::SYN,
            window_len: 1000,
            urgent_pointer: 0,
            max_seg_size: Some(1460),
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            payload: &[],
        }
    }

    /// RCV.NXT = 1001 with a receive window of `wnd` bytes.
    fn receiver(wnd: u32) -> Connection {
        let mut c = Connection::accept(0, &Config::default(), &syn(), SeqNumber(5), 0).unwrap();
        c.rcv_adv = c.rcv_nxt + wnd;
        c
    }

    #[test]
    fn acceptability_empty_segment_zero_window_needs_exact_sequence() {
        // RFC 9293 §3.10.7.4 case 1: SEG.LEN = 0, RCV.WND = 0 ⇒ SEG.SEQ = RCV.NXT.
        let c = receiver(0);
        assert!(c.acceptable(SeqNumber(1001), 0));
        assert!(!c.acceptable(SeqNumber(1002), 0));
        assert!(!c.acceptable(SeqNumber(1000), 0));
    }

    #[test]
    fn acceptability_empty_segment_open_window_must_start_inside() {
        // Case 2: SEG.LEN = 0, RCV.WND > 0 ⇒ RCV.NXT ≤ SEG.SEQ < RCV.NXT + RCV.WND.
        let c = receiver(100);
        assert!(c.acceptable(SeqNumber(1001), 0));
        assert!(c.acceptable(SeqNumber(1100), 0));
        assert!(!c.acceptable(SeqNumber(1101), 0));
        assert!(!c.acceptable(SeqNumber(1000), 0));
    }

    #[test]
    fn acceptability_data_on_zero_window_only_at_rcv_nxt_for_its_ack() {
        // Case 3: SEG.LEN > 0, RCV.WND = 0 ⇒ not acceptable; we still process the ACK of a
        // segment at RCV.NXT (zero-window probe), trimming its text.
        let c = receiver(0);
        assert!(c.acceptable(SeqNumber(1001), 1));
        assert!(!c.acceptable(SeqNumber(1002), 1));
    }

    #[test]
    fn acceptability_data_needs_first_or_last_byte_inside() {
        // Case 4: SEG.LEN > 0, RCV.WND > 0 ⇒ first or last octet inside the window.
        let c = receiver(100);
        assert!(c.acceptable(SeqNumber(990), 20), "last byte inside");
        assert!(c.acceptable(SeqNumber(1090), 50), "first byte inside");
        assert!(!c.acceptable(SeqNumber(900), 101), "entirely old");
        assert!(!c.acceptable(SeqNumber(1101), 10), "entirely beyond");
    }

    #[test]
    fn sequence_comparisons_survive_wraparound() {
        let mut s = syn();
        s.seq_number = SeqNumber(u32::MAX - 10);
        let mut c = Connection::accept(0, &Config::default(), &s, SeqNumber(5), 0).unwrap();
        c.rcv_adv = c.rcv_nxt + 100;
        // RCV.NXT = 2^32 - 10; the window spans the wrap.
        assert!(c.acceptable(SeqNumber(50), 10));
        assert!(!c.acceptable(SeqNumber(200), 10));
    }

    #[test]
    fn idle_connection_fits_in_one_kilobyte_without_buffers() {
        // The TCB itself; rings and the out-of-order/scoreboard tables allocate on first use,
        // so an idle established connection owns nothing else.
        let size = core::mem::size_of::<Connection>();
        assert!(size <= 1024, "Connection is {size} bytes");
    }
}
