//! `ConnectionSnapshot`: everything a live connection needs to resume in another engine
//! (another shard, an offload engine, or back on the host), following the handoff invariants
//! of DESIGN.md:
//!
//! - send data moves as one ordered list split at SND.UNA and SND.NXT (`send_unacked`,
//!   `send_unsent`); received data moves as everything acknowledged but not yet read, ending at
//!   RCV.NXT (`recv_unread`) — no byte lost or duplicated (invariant 2);
//! - out-of-order data is dropped at the move (invariant 3): we never acknowledged it
//!   cumulatively, and SACK is advisory (RFC 2018 §8), so the peer retransmits it;
//! - the advertised right edge, window scales and the timestamp clock move, so the window never
//!   shrinks and PAWS keeps accepting (invariant 5): the timestamp clock is carried as its value
//!   at export and continues from there on import, whatever the importer's clock origin;
//! - timers move as remaining deltas; a pending (delayed) ACK must be sent before the move —
//!   [`Connection::export`] refuses while output is owed, and
//!   [`Connection::flush_delayed_ack`] turns a delayed ACK into an immediate one (invariant 6);
//! - congestion and RTT state move too (invariant 7), RACK's path properties among them
//!   (minimum RTT, reordering seen, the reordering window's DSACK adaptation); RACK's
//!   per-segment send times do not (see [`Connection::import`]).

use wire::tcp::SeqNumber;

use crate::cc::Congestion;
use crate::config::{Config, NS_PER_MS};
use crate::connection::{AckDue, Connection, Counters, NEVER, State};
use crate::ooo::OooQueue;
use crate::rack::{Rack, RackPathState};
use crate::ring::Ring;
use crate::rtt::RttEstimator;

/// Why a snapshot could not be taken or resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SnapshotError {
    /// Only synchronized connections (ESTABLISHED and later) can move.
    NotSynchronized,
    /// An ACK, RST or probe is still owed: drain `poll_transmit` (after
    /// `flush_delayed_ack`) first.
    OutputPending,
    /// The snapshot's fields contradict each other or exceed its configuration's buffers.
    Inconsistent,
}

impl core::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            SnapshotError::NotSynchronized => "connection is not synchronized",
            SnapshotError::OutputPending => "segments are still owed; drain poll_transmit first",
            SnapshotError::Inconsistent => "snapshot fields are inconsistent",
        })
    }
}

impl std::error::Error for SnapshotError {}

/// A live connection, frozen. Plain data: the host may serialize it however it likes.
///
/// Invariants (checked by `import`): `snd_una ≤ snd_nxt ≤ snd_max`; the send bytes start at
/// `snd_una` (or `snd_una − 1` once our FIN is acknowledged, when they are empty) and
/// `send_unacked` covers `[snd_una, snd_nxt)` minus a FIN; `rcv_nxt ≤ rcv_adv`;
/// `rcv_adv − rcv_nxt` plus `recv_unread.len()` fits `config.recv_buffer_bytes`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSnapshot {
    /// The exporter's clock at export: the times carried in the groups below are on that
    /// clock, and `import` moves them to its own (every time keeps its distance to "now").
    pub exported_at_ns: u64,
    pub config: Config,
    pub state: State,
    pub local_port: u16,
    pub remote_port: u16,
    pub iss: SeqNumber,
    pub irs: SeqNumber,
    // --- send sequence space (RFC 9293 §3.3.1) ---
    pub snd_una: SeqNumber,
    pub snd_nxt: SeqNumber,
    /// Highest sequence number sent plus one.
    pub snd_max: SeqNumber,
    /// Peer's window, scaled, in bytes.
    pub snd_wnd_bytes: u32,
    pub snd_wl1: SeqNumber,
    pub snd_wl2: SeqNumber,
    pub max_snd_wnd_bytes: u32,
    // --- receive sequence space ---
    pub rcv_nxt: SeqNumber,
    /// Right edge of the window we advertised; the importer never advertises less.
    pub rcv_adv: SeqNumber,
    // --- options ---
    pub snd_mss_bytes: u16,
    pub rcv_mss_seen_bytes: u16,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub timestamps: bool,
    pub sack: bool,
    /// Our timestamp clock's value at export (RFC 7323 §5.4); it continues from here.
    pub ts_clock_at_export: u32,
    pub ts_recent: u32,
    /// How long before the export TS.Recent was last updated.
    pub ts_recent_age_ns: u64,
    pub last_ack_sent: SeqNumber,
    /// Our timestamp clock value at the last retransmission (older echoes are not sampled).
    pub ts_rtx_floor: u32,
    // --- congestion and RTT ---
    /// The congestion controller's state, whole; its times are on the exporter's clock
    /// (`exported_at_ns`) and move to the importer's on import.
    pub cc: Congestion,
    pub in_recovery: bool,
    pub recover: SeqNumber,
    pub dupacks: u8,
    /// A fast retransmission of SND.UNA is owed.
    pub rtx_pending: bool,
    pub srtt_ns: u64,
    pub rttvar_ns: u64,
    pub base_rto_ns: u64,
    pub rto_backoff_shift: u8,
    pub rtt_has_sample: bool,
    /// RACK's minimum RTT and reordering state (RFC 8985 §6.2 steps 1, 3, 4).
    pub rack_path: RackPathState,
    // --- timers, as time remaining at export ---
    pub rtx_remaining_ns: Option<u64>,
    pub persist_remaining_ns: Option<u64>,
    pub keepalive_remaining_ns: Option<u64>,
    pub time_wait_remaining_ns: Option<u64>,
    pub persist_shift: u8,
    pub keepalive_probes: u8,
    /// Age of the oldest unacknowledged data (user timeout reference).
    pub unacked_age_ns: u64,
    /// Time since data was last sent (RFC 5681 §4.1 idle restart).
    pub last_tx_age_ns: u64,
    // --- close state ---
    pub fin_queued: bool,
    pub fin_acked: bool,
    pub fin_received: bool,
    pub app_closed: bool,
    // --- data ---
    /// Sent, not acknowledged: `[SND.UNA, SND.NXT)`.
    pub send_unacked: Vec<u8>,
    /// Queued, not yet sent (from SND.NXT).
    pub send_unsent: Vec<u8>,
    /// Received in order and acknowledged, not yet read by the application; ends at RCV.NXT.
    pub recv_unread: Vec<u8>,
    pub counters: Counters,
}

fn remaining(deadline_ns: u64, now: u64) -> Option<u64> {
    (deadline_ns != NEVER).then(|| deadline_ns.saturating_sub(now))
}

fn deadline(remaining_ns: Option<u64>, now: u64) -> u64 {
    remaining_ns.map_or(NEVER, |r| now.saturating_add(r).min(NEVER - 1))
}

impl Connection {
    /// Makes a pending delayed ACK immediate, so that draining `poll_transmit` sends it
    /// (DESIGN.md handoff invariant 6: a pending delayed ACK is sent before the move).
    pub fn flush_delayed_ack(&mut self) {
        if self.ack_due == AckDue::Delayed {
            self.ack_due = AckDue::Now;
        }
    }

    /// Freezes the connection. Refuses while any segment is owed (see
    /// [`Connection::flush_delayed_ack`]); out-of-order data is not included. The connection
    /// itself is left untouched: the caller drops it once the new owner has taken over.
    pub fn export(&self, now: u64) -> Result<ConnectionSnapshot, SnapshotError> {
        if !self.state.is_synchronized() {
            return Err(SnapshotError::NotSynchronized);
        }
        if self.ack_due != AckDue::None
            || self.dupacks_owed > 0
            || self.rst_pending.is_some()
            || self.probe_pending
            || self.tlp_pending
            || self.keepalive_pending
        {
            return Err(SnapshotError::OutputPending);
        }
        let all = self.send_buf.to_vec();
        let split = (self.snd_nxt.diff(self.snd_buf_seq).max(0) as usize).min(all.len());
        let (unacked, unsent) = all.split_at(split);
        Ok(ConnectionSnapshot {
            exported_at_ns: now,
            config: self.config,
            state: self.state,
            local_port: self.local_port,
            remote_port: self.remote_port,
            iss: self.iss,
            irs: self.irs,
            snd_una: self.snd_una,
            snd_nxt: self.snd_nxt,
            snd_max: self.snd_max,
            snd_wnd_bytes: self.snd_wnd,
            snd_wl1: self.snd_wl1,
            snd_wl2: self.snd_wl2,
            max_snd_wnd_bytes: self.max_snd_wnd,
            rcv_nxt: self.rcv_nxt,
            rcv_adv: self.rcv_adv,
            snd_mss_bytes: self.snd_mss,
            rcv_mss_seen_bytes: self.rcv_mss_seen,
            snd_wscale: self.snd_wscale,
            rcv_wscale: self.rcv_wscale,
            timestamps: self.ts_ok,
            sack: self.sack_ok,
            ts_clock_at_export: ((now / NS_PER_MS) as u32).wrapping_add(self.ts_offset),
            ts_recent: self.ts_recent,
            ts_recent_age_ns: now.saturating_sub(self.ts_recent_age_ns),
            last_ack_sent: self.last_ack_sent,
            ts_rtx_floor: self.ts_rtx_floor,
            cc: self.cc,
            in_recovery: self.in_recovery,
            recover: self.recover,
            dupacks: self.dupacks,
            rtx_pending: self.rtx_pending,
            srtt_ns: self.rtt.srtt_ns,
            rttvar_ns: self.rtt.rttvar_ns,
            base_rto_ns: self.rtt.base_rto_ns,
            rto_backoff_shift: self.rtt.backoff_shift,
            rtt_has_sample: self.rtt.has_sample,
            rack_path: self.rack.as_ref().map(|r| r.path(now)).unwrap_or_default(),
            rtx_remaining_ns: remaining(self.rtx_deadline_ns, now),
            persist_remaining_ns: remaining(self.persist_deadline_ns, now),
            keepalive_remaining_ns: remaining(self.keepalive_deadline_ns, now),
            time_wait_remaining_ns: remaining(self.time_wait_deadline_ns, now),
            persist_shift: self.persist_shift,
            keepalive_probes: self.keepalive_probes,
            unacked_age_ns: now.saturating_sub(self.unacked_since_ns),
            last_tx_age_ns: now.saturating_sub(self.last_tx_ns),
            fin_queued: self.fin_queued,
            fin_acked: self.fin_queued
                && self
                    .snd_una
                    .gt(self.snd_buf_seq + self.send_buf.len() as u32),
            fin_received: self.fin_received,
            app_closed: self.app_closed,
            send_unacked: unacked.to_vec(),
            send_unsent: unsent.to_vec(),
            recv_unread: self.recv_buf.to_vec(),
            counters: self.counters,
        })
    }

    /// Resumes a frozen connection at `now` (any clock origin: every time is carried as a
    /// delta). Validates the snapshot's invariants first. The application on the new owner
    /// has seen nothing yet, so the resumed engine announces its readiness: `Readable` when
    /// received bytes moved, `PeerClosed` when the peer's FIN did, `Writable` when the send
    /// buffer has room and sending is still allowed.
    pub fn import(now: u64, s: &ConnectionSnapshot) -> Result<Connection, SnapshotError> {
        if !s.state.is_synchronized() {
            return Err(SnapshotError::NotSynchronized);
        }
        let config = s.config.validated();
        let inconsistent = Err(SnapshotError::Inconsistent);
        if s.snd_nxt.lt(s.snd_una) || s.snd_max.lt(s.snd_nxt) || s.rcv_adv.lt(s.rcv_nxt) {
            return inconsistent;
        }
        let send_len = s.send_unacked.len() + s.send_unsent.len();
        if send_len > config.send_buffer_bytes as usize
            || s.recv_unread.len() > config.recv_buffer_bytes as usize
            || (s.rcv_adv.diff(s.rcv_nxt) as u64).saturating_add(s.recv_unread.len() as u64)
                > u64::from(config.recv_buffer_bytes)
            || s.snd_wscale > 14
            || s.rcv_wscale > 14
            || (s.fin_acked && (!s.fin_queued || send_len != 0))
        {
            return inconsistent;
        }
        let snd_buf_seq = if s.fin_acked {
            s.snd_una - 1
        } else {
            s.snd_una
        };
        // The unacknowledged part must be exactly [SND.UNA, SND.NXT) (a sent FIN is not data).
        let sent_data = s.snd_nxt.diff(snd_buf_seq) as usize;
        let fin_seq = snd_buf_seq + send_len as u32;
        let fin_sent = s.fin_queued && s.snd_nxt.gt(fin_seq);
        if s.send_unacked.len() + usize::from(fin_sent) != sent_data {
            return inconsistent;
        }
        let mut send_buf = Ring::new(config.send_buffer_bytes as usize);
        send_buf.push(&s.send_unacked);
        send_buf.push(&s.send_unsent);
        let mut recv_buf = Ring::new(config.recv_buffer_bytes as usize);
        recv_buf.push(&s.recv_unread);
        let ts_offset = s.ts_clock_at_export.wrapping_sub((now / NS_PER_MS) as u32);
        let cc =
            s.cc.rebased(s.exported_at_ns, now)
                .with_algorithm(config.congestion_control);
        let mut rtt =
            RttEstimator::new(config.rto_initial_ns, config.rto_min_ns, config.rto_max_ns);
        rtt.min_bounds_variance = config.rto_min_bounds_variance;
        rtt.srtt_ns = s.srtt_ns;
        rtt.rttvar_ns = s.rttvar_ns;
        rtt.base_rto_ns = s.base_rto_ns.clamp(config.rto_min_ns, config.rto_max_ns);
        rtt.backoff_shift = s.rto_backoff_shift;
        rtt.has_sample = s.rtt_has_sample;
        // RACK's per-segment send times do not move, like the SACK scoreboard they are read
        // with: the flight is recorded as sent now (`Rack::import_flight`), the latest it can
        // have been sent, so RACK deems none of it lost before segments sent after the move
        // are delivered and RACK.rtt plus reo_wnd has passed; until then the RTO (which moves)
        // and the tail loss probe guard it. The reordering timer is re-armed by the next ACK.
        let rack = (config.rack
            && s.sack
            && (s.snd_una != s.snd_max || !Rack::path_is_default(&s.rack_path)))
        .then(|| {
            let mut rack = Box::new(Rack::with_path(&s.rack_path, now));
            rack.import_flight(s.snd_una, s.snd_max, now);
            rack
        });
        let mut c = Connection {
            state: s.state,
            snd_una: s.snd_una,
            snd_nxt: s.snd_nxt,
            snd_max: s.snd_max,
            snd_wnd: s.snd_wnd_bytes,
            snd_wl1: s.snd_wl1,
            snd_wl2: s.snd_wl2,
            max_snd_wnd: s.max_snd_wnd_bytes,
            snd_buf_seq,
            rcv_nxt: s.rcv_nxt,
            rcv_adv: s.rcv_adv,
            snd_mss: s.snd_mss_bytes.max(1),
            rcv_mss_seen: s.rcv_mss_seen_bytes,
            snd_wscale: s.snd_wscale,
            rcv_wscale: s.rcv_wscale,
            ack_due: AckDue::None,
            quickacks_left: 0,
            dupacks: s.dupacks,
            in_recovery: s.in_recovery,
            ts_ok: s.timestamps,
            sack_ok: s.sack,
            fin_queued: s.fin_queued,
            // Cork and MSG_MORE holds are not carried: a restored connection pushes.
            // The flight record is not carried: the next transmission starts a new one.
            // A snapshot is taken outside recovery: no PRR episode to carry.
            prr_delivered_bytes: 0,
            prr_out_bytes: 0,
            prr_recover_fs_bytes: 0,
            flight_max_bytes: 0,
            flight_max_seq: s.snd_una,
            cwnd_limited: false,
            cork: false,
            more: false,
            push_pending: false,
            fin_received: s.fin_received,
            app_closed: s.app_closed,
            rtx_pending: s.rtx_pending,
            probe_pending: false,
            tlp_pending: false,
            tlp_sent: false,
            tlp_last_seq: s.snd_max,
            keepalive_pending: false,
            events: 0,
            dupacks_owed: 0,
            rcv_unacked_bytes: 0,
            recover: s.recover,
            cc,
            rtt,
            // Karn: a measurement in progress does not survive the move.
            rtt_timed: crate::connection::RttTimed::NONE,
            ts_offset,
            ts_recent: s.ts_recent,
            ts_recent_age_ns: now.saturating_sub(s.ts_recent_age_ns),
            last_ack_sent: s.last_ack_sent,
            ts_rtx_floor: s.ts_rtx_floor,
            rtx_deadline_ns: deadline(s.rtx_remaining_ns, now),
            persist_deadline_ns: deadline(s.persist_remaining_ns, now),
            // Rearmed by the next `poll_transmit` that finds nothing to send.
            tlp_deadline_ns: NEVER,
            delack_deadline_ns: NEVER,
            keepalive_deadline_ns: deadline(s.keepalive_remaining_ns, now),
            time_wait_deadline_ns: deadline(s.time_wait_remaining_ns, now),
            persist_shift: s.persist_shift,
            syn_retries: 0,
            keepalive_probes: s.keepalive_probes,
            unacked_since_ns: now.saturating_sub(s.unacked_age_ns),
            last_tx_ns: now.saturating_sub(s.last_tx_age_ns),
            challenge_window_start_ns: now,
            challenge_acks_in_window: 0,
            iss: s.iss,
            irs: s.irs,
            local_port: s.local_port,
            remote_port: s.remote_port,
            peer_offered_ws: None,
            close_reason: None,
            rst_pending: None,
            send_buf,
            recv_buf,
            ooo: OooQueue::new(config.ooo_segments_max, config.ooo_bytes_max),
            // The SACK scoreboard is advisory and does not move; recovery continues from
            // SND.UNA.
            scoreboard: OooQueue::new(crate::connection::SCOREBOARD_RANGES_MAX, u32::MAX),
            high_rxt: s.snd_una,
            dsack: None,
            rack,
            config,
            counters: s.counters,
        };
        if !c.recv_buf.is_empty() {
            c.push_event(crate::Event::Readable);
        }
        if c.fin_received {
            c.push_event(crate::Event::PeerClosed);
        }
        if !c.fin_queued && c.send_buf.free() > 0 {
            c.push_event(crate::Event::Writable);
        }
        Ok(c)
    }
}
