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
//! - timers move as remaining deltas (the snapshot carries the exporter's clock at export,
//!   `exported_at_ns`, and import moves every time to its own clock); a pending (delayed) ACK must be sent before the move —
//!   [`Connection::export`] refuses while output is owed, and
//!   [`Connection::flush_delayed_ack`] turns a delayed ACK into an immediate one (invariant 6);
//! - congestion and RTT state move too (invariant 7), RACK's path properties among them
//!   (minimum RTT, reordering seen, the reordering window's DSACK adaptation); RACK's
//!   per-segment send times do not (see [`Connection::import`]).

use wire::tcp::SeqNumber;

use crate::cc::Congestion;
use crate::config::Config;
use crate::connection::{
    AckDue, AppFlags, Connection, Counters, EcnState, NEVER, Options, Output, OutputRare, Recovery,
    RecvSeq, SendSeq, State, Timers, Timestamps, ecn_flag,
};
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
/// It carries the TCB's groups whole (see [`Connection::export`] for the guard that keeps it
/// so); times in `ts`, `timers` and `cc` are on the exporter's clock, which read
/// `exported_at_ns` at export, and [`Connection::import`] moves them to its own.
///
/// Invariants (checked by `import`): `snd.una ≤ snd.nxt ≤ snd.max`; `snd.buf_seq` is
/// `snd.una`, or `snd.una − 1` once our FIN is acknowledged (then the send bytes are
/// empty); `send_unacked` covers `[snd.buf_seq, snd.nxt)` minus a FIN; `rcv.nxt ≤ rcv.adv`;
/// `rcv.adv − rcv.nxt` plus `recv_unread.len()` fits `config.recv_buffer_bytes`; window
/// shifts ≤ 14.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSnapshot {
    /// The exporter's clock at export.
    pub exported_at_ns: u64,
    pub config: Config,
    pub state: State,
    pub local_port: u16,
    pub remote_port: u16,
    /// Send sequence space, whole.
    pub snd: SendSeq,
    /// Receive sequence space, whole; the importer never advertises left of `rcv.adv`.
    pub rcv: RecvSeq,
    /// Negotiated options (`peer_offered_ws` is not restored: the handshake is over).
    pub opts: Options,
    /// Timestamp state; the timestamp clock continues from its value at export.
    pub ts: Timestamps,
    /// Loss recovery. Restored: `in_recovery`, `recover`, `dupacks`, `rtx_pending`; the PRR
    /// episode, the flight record, HighRxt and the tail loss probe state start afresh.
    pub rec: Recovery,
    /// The congestion controller's state, whole.
    pub cc: Congestion,
    /// RTT estimator; its bounds come from the importer's `config`.
    pub rtt: RttEstimator,
    /// RACK's minimum RTT and reordering state (RFC 8985 §6.2 steps 1, 3, 4).
    pub rack_path: RackPathState,
    /// Timers; the delayed ACK (flushed before export) and the tail loss probe (re-armed by
    /// the next `poll_transmit`) are not restored, nor the SYN retry count, nor a segment
    /// being timed for RTT (Karn).
    pub timers: Timers,
    /// Application flags; cork and `MSG_MORE` holds are not restored (a restored connection
    /// pushes).
    pub app: AppFlags,
    /// ECN (RFC 3168): negotiated, seen, the echo owed, the CWR owed. A window reduction in
    /// progress ends at export (cwnd = ssthresh, as it would at its end).
    pub ecn: EcnState,
    /// Sent, not acknowledged: `[SND.UNA, SND.NXT)`.
    pub send_unacked: Vec<u8>,
    /// Queued, not yet sent (from SND.NXT).
    pub send_unsent: Vec<u8>,
    /// Received in order and acknowledged, not yet read by the application; ends at RCV.NXT.
    pub recv_unread: Vec<u8>,
    pub counters: Counters,
    /// Record boundaries (`MSG_EOR`) above SND.UNA, oldest first: strictly increasing, each
    /// after SND.UNA and at most the send buffer's end, at most
    /// [`crate::RECORDS_OUTSTANDING_MAX`].
    pub record_ends: Vec<SeqNumber>,
    /// Bytes the owner's socket layer attaches and reads back at import (the stack's
    /// per-socket options and notification queues, `stack::tcp_notify`); the engine carries
    /// them unread. At most [`SOCKET_EXT_BYTES_MAX`].
    pub socket_ext: Vec<u8>,
}

/// Most bytes a snapshot's `socket_ext` may hold.
pub const SOCKET_EXT_BYTES_MAX: usize = 64 * 1024;

// What does not move, in one place for `export` (so a snapshot shows only what moves, and
// export → import → export is the identity) and `import` (so a snapshot made by hand cannot
// restore it either). Every other field of these groups moves as it is.

/// The handshake is over: what the peer offered in its SYN is not needed.
fn moved_opts(o: Options) -> Options {
    Options {
        peer_offered_ws: None,
        ..o
    }
}

/// Recovery keeps `in_recovery`, `recover`, `dupacks` and `rtx_pending`. The SACK
/// scoreboard does not move, so HighRxt restarts at SND.UNA; no PRR episode, flight record or
/// tail loss probe carries over: the next transmissions start new ones.
fn moved_rec(r: Recovery, snd: &SendSeq) -> Recovery {
    Recovery {
        high_rxt: snd.una,
        prr_delivered_bytes: 0,
        prr_out_bytes: 0,
        prr_recover_fs_bytes: 0,
        tlp_pending: false,
        tlp_sent: false,
        tlp_last_seq: snd.max,
        flight_max_bytes: 0,
        flight_max_seq: snd.una,
        cwnd_limited: false,
        ..r
    }
}

/// The delayed ACK was sent before the move; the tail loss probe is re-armed by the next
/// `poll_transmit` that finds nothing to send; the handshake's retry count is over; Karn: a
/// measurement in progress does not survive the move.
fn moved_timers(t: Timers) -> Timers {
    Timers {
        tlp_deadline_ns: NEVER,
        delack_deadline_ns: NEVER,
        syn_retries: 0,
        rtt_timed_end: SeqNumber(0),
        rtt_timed_sent_ns: NEVER,
        ..t
    }
}

/// Cork and `MSG_MORE` holds are not carried: a restored connection pushes. A synchronized
/// connection has no close reason.
fn moved_app(a: AppFlags) -> AppFlags {
    AppFlags {
        cork: false,
        more: false,
        push_pending: false,
        close_reason: None,
        ..a
    }
}

/// ECN keeps what was negotiated and what is owed to the peer (ECE, CWR); the output mark
/// and a SYN's request are moot once synchronized; a window reduction in progress is
/// finished (the caller sets cwnd = ssthresh, see `export`).
fn moved_ecn(e: EcnState) -> EcnState {
    let kept = ecn_flag::OK | ecn_flag::SEEN | ecn_flag::DEMAND_CWR | ecn_flag::QUEUE_CWR;
    EcnState {
        flags: if e.flags & ecn_flag::OK != 0 {
            e.flags & kept
        } else {
            0
        },
        rx: wire::Ecn::NotEct,
        cwr_end: SeqNumber(0),
    }
}

impl ConnectionSnapshot {
    /// Our timestamp clock's value at export (RFC 7323 §5.4); the importer's continues from
    /// here.
    pub fn ts_clock_at_export(&self) -> u32 {
        self.ts.clock(self.exported_at_ns)
    }

    /// Checks the invariants [`Connection::import`] relies on (listed on the type), against
    /// the configuration as `import` will apply it (`config.validated()`): the state is
    /// synchronized, the sequence spaces are ordered, the buffers fit the configured sizes,
    /// the advertised window plus the unread bytes fit the receive buffer, the window shifts
    /// are at most 14, and the send bytes split exactly at SND.NXT (a sent FIN is not data).
    /// `import` calls it first; a decoder calls it so an inconsistent snapshot is refused
    /// where it enters.
    pub fn check(&self) -> Result<(), SnapshotError> {
        let s = self;
        if !s.state.is_synchronized() {
            return Err(SnapshotError::NotSynchronized);
        }
        let config = s.config.validated();
        let (snd, rcv) = (s.snd, s.rcv);
        let inconsistent = Err(SnapshotError::Inconsistent);
        if snd.nxt.lt(snd.una) || snd.max.lt(snd.nxt) || rcv.adv.lt(rcv.nxt) {
            return inconsistent;
        }
        let send_len = s.send_unacked.len() + s.send_unsent.len();
        // Our FIN acknowledged: SND.UNA is one past the (empty) send buffer.
        let fin_acked = snd.buf_seq != snd.una;
        if send_len > config.send_ring_capacity_bytes()
            || s.recv_unread.len() > config.recv_buffer_bytes as usize
            || (rcv.adv.diff(rcv.nxt) as u64).saturating_add(s.recv_unread.len() as u64)
                > u64::from(config.recv_buffer_bytes)
            || s.opts.snd_wscale > 14
            || s.opts.rcv_wscale > 14
            || (fin_acked && (snd.buf_seq + 1 != snd.una || !s.app.fin_queued || send_len != 0))
        {
            return inconsistent;
        }
        // The unacknowledged part must be exactly [SND.UNA, SND.NXT) (a sent FIN is not data).
        let sent_data = snd.nxt.diff(snd.buf_seq) as usize;
        let fin_seq = snd.buf_seq + send_len as u32;
        let fin_sent = s.app.fin_queued && snd.nxt.gt(fin_seq);
        if s.send_unacked.len() + usize::from(fin_sent) != sent_data {
            return inconsistent;
        }
        // Record ends: increasing, in (SND.UNA, the send buffer's end], bounded.
        let buf_end = snd.buf_seq + send_len as u32;
        let mut prev = snd.una.max(snd.buf_seq);
        for &end in &s.record_ends {
            if !prev.lt(end) || buf_end.lt(end) {
                return inconsistent;
            }
            prev = end;
        }
        if s.record_ends.len() > crate::RECORDS_OUTSTANDING_MAX
            || s.socket_ext.len() > SOCKET_EXT_BYTES_MAX
        {
            return inconsistent;
        }
        Ok(())
    }
}

impl Connection {
    /// Makes a pending delayed ACK immediate, so that draining `poll_transmit` sends it
    /// (DESIGN.md handoff invariant 6: a pending delayed ACK is sent before the move).
    pub fn flush_delayed_ack(&mut self) {
        if self.out.ack_due == AckDue::Delayed {
            self.out.ack_due = AckDue::Now;
        }
    }

    /// Freezes the connection. Refuses while any segment is owed (see
    /// [`Connection::flush_delayed_ack`]); out-of-order data is not included. The connection
    /// itself is left untouched: the caller drops it once the new owner has taken over.
    pub fn export(&self, now: u64) -> Result<ConnectionSnapshot, SnapshotError> {
        // The guard: every part of the TCB is named here, without `..`, so a part added to
        // `Connection` does not compile until this function carries it or says why not.
        // Fields added inside a group move with the group.
        let Connection {
            state,
            snd,
            rcv,
            opts,
            ecn,
            ts,
            rec,
            cc,
            rtt,
            timers,
            app,
            // Owed output: must be empty (checked below), never carried.
            out,
            // A D-SACK block owed is dropped (advisory, RFC 2883); a RST owed refuses the
            // export (checked below); the challenge-ACK budget restarts with the importer.
            out_rare,
            local_port,
            remote_port,
            config,
            send_buf,
            recv_buf,
            // Out-of-order data is dropped (invariant 3); the SACK scoreboard is advisory.
            ooo: _,
            scoreboard: _,
            // Only RACK's path properties move (`rack_path`).
            rack,
            // RACK's reordering timer does not move: the importer's next ACK re-arms it.
            rack_deadline_ns: _,
            // Recomputed from the moved deadlines by the importer.
            earliest_deadline_ns: _,
            // `tcp_info`'s chronographs and reordering degree restart with the importer.
            info: _,
            records,
            // The skb accounting restarts with the importer: its queue as one skb.
            skb: _,
            // HyStart starts afresh with the importer (it relearns the minimum RTT in one
            // round; Linux's `struct bictcp` has no export either).
            hystart: _,
            // Minshall's mark restarts at SND.NXT with the importer (`Connection::snd_sml`).
            snd_sml: _,
            // The importer's application starts with its next `send`.
            send_cut: _,
            // Both parts move, as one `Counters` (`Connection::counters`).
            counters: _,
            counters_rare: _,
        } = self;
        if !state.is_synchronized() {
            return Err(SnapshotError::NotSynchronized);
        }
        let Output {
            ack_due,
            dupacks_owed,
            probe_pending,
            keepalive_pending,
            ..
        } = *out;
        if ack_due != AckDue::None
            || dupacks_owed > 0
            || out_rare.rst_pending.is_some()
            || probe_pending
            || rec.tlp_pending
            || keepalive_pending
        {
            return Err(SnapshotError::OutputPending);
        }
        // Each part copied once, straight from the ring. The unacknowledged bytes' and the
        // received bytes' vectors reserve the storage an importer's ring takes for all its
        // bytes (`Connection::import_owned` adopts them; reserved, not written).
        let split = (snd.nxt.diff(snd.buf_seq).max(0) as usize).min(send_buf.len());
        let mut unacked = Vec::with_capacity(crate::ring::storage_bytes_for(
            send_buf.capacity(),
            send_buf.len(),
        ));
        send_buf.range_into(0, split, &mut unacked);
        let unsent = send_buf.range_to_vec(split, send_buf.len() - split);
        let mut unread = Vec::with_capacity(crate::ring::storage_bytes_for(
            recv_buf.capacity(),
            recv_buf.len(),
        ));
        recv_buf.range_into(0, recv_buf.len(), &mut unread);
        let mut cc = *cc;
        if ecn.flags & ecn_flag::IN_CWR != 0 && config.prr {
            // The proportional reduction's state does not move: end it as its last ACK would.
            cc.on_prr_recovery_exit();
        }
        Ok(ConnectionSnapshot {
            exported_at_ns: now,
            config: **config,
            state: *state,
            local_port: *local_port,
            remote_port: *remote_port,
            snd: *snd,
            rcv: *rcv,
            opts: moved_opts(*opts),
            ts: *ts,
            rec: moved_rec(*rec, snd),
            cc,
            rtt: *rtt,
            rack_path: rack.as_ref().map(|r| r.path(now)).unwrap_or_default(),
            timers: moved_timers(*timers),
            app: moved_app(*app),
            ecn: moved_ecn(*ecn),
            send_unacked: unacked,
            send_unsent: unsent,
            recv_unread: unread,
            counters: self.counters(),
            record_ends: records
                .as_ref()
                .map(|r| r.ends_after(snd.una.max(snd.buf_seq)))
                .unwrap_or_default(),
            // The socket layer fills it (`stack::tcp_move`).
            socket_ext: Vec::new(),
        })
    }

    /// The send and receive rings, taken out of an exported connection that is about to be
    /// dropped (empty rings of the same capacities are left): a bypass socket keeps their
    /// storage as its buffers instead of a copy of the snapshot's bytes.
    pub fn take_buffers(&mut self) -> (Ring, Ring) {
        let send = Ring::new(self.send_buf.capacity());
        let recv = Ring::new(self.recv_buf.capacity());
        (
            core::mem::replace(&mut self.send_buf, send),
            core::mem::replace(&mut self.recv_buf, recv),
        )
    }

    /// Resumes a frozen connection at `now` (any clock origin: every time keeps its distance
    /// to the export). Validates the snapshot's invariants first. The application on the new
    /// owner has seen nothing yet, so the resumed engine announces its readiness: `Readable`
    /// when received bytes moved, `PeerClosed` when the peer's FIN did, `Writable` when the
    /// send buffer has room and sending is still allowed.
    pub fn import(now: u64, s: &ConnectionSnapshot) -> Result<Connection, SnapshotError> {
        s.check()?;
        let config = s.config.validated();
        // Each ring's storage allocated once, at its final size.
        let send_buf = Ring::from_pieces(
            config.send_ring_capacity_bytes(),
            &[&s.send_unacked, &s.send_unsent],
        );
        let recv_buf = Ring::from_pieces(config.recv_buffer_bytes as usize, &[&s.recv_unread]);
        Ok(Self::import_checked(now, s, config, send_buf, recv_buf))
    }

    /// [`Connection::import`] of a snapshot the caller gives up: the same connection, but
    /// the rings adopt the snapshot's vectors as their storage where they can (the received
    /// bytes, and the unacknowledged send bytes with the unsent ones appended) instead of
    /// copying them — no copy at all when a vector's capacity already is the storage size
    /// the ring's growth rule gives for its bytes ([`crate::ring::storage_bytes_for`], the
    /// capacity [`Connection::export`] reserves), only the tail's zeros.
    pub fn import_owned(now: u64, mut s: ConnectionSnapshot) -> Result<Connection, SnapshotError> {
        s.check()?;
        let config = s.config.validated();
        let unacked = core::mem::take(&mut s.send_unacked);
        let send_buf = Ring::from_vec(config.send_ring_capacity_bytes(), unacked, &s.send_unsent);
        let unread = core::mem::take(&mut s.recv_unread);
        let recv_buf = Ring::from_vec(config.recv_buffer_bytes as usize, unread, &[]);
        Ok(Self::import_checked(now, &s, config, send_buf, recv_buf))
    }

    /// The import of a snapshot already checked, its buffers already in `send_buf` and
    /// `recv_buf` (`s`'s byte vectors are not read).
    fn import_checked(
        now: u64,
        s: &ConnectionSnapshot,
        config: Config,
        send_buf: Ring,
        recv_buf: Ring,
    ) -> Connection {
        let (snd, rcv) = (s.snd, s.rcv);
        let mut rare = s.counters;
        let counters = crate::connection::HotCounters::take_from(&mut rare);
        let counters_rare = (rare != Counters::default()).then(|| Box::new(rare));
        let (from, to) = (s.exported_at_ns, now);
        // RACK's per-segment send times do not move, like the SACK scoreboard they are read
        // with: the flight is recorded as sent now (`Rack::import_flight`), the latest it can
        // have been sent, so RACK deems none of it lost before segments sent after the move
        // are delivered and RACK.rtt plus reo_wnd has passed; until then the RTO (which moves)
        // and the tail loss probe guard it. The reordering timer is re-armed by the next ACK.
        let rack = (config.rack
            && s.opts.sack_ok
            && (snd.una != snd.max || !Rack::path_is_default(&s.rack_path)))
        .then(|| {
            let mut rack = Rack::with_path(&s.rack_path, now);
            rack.import_flight(snd.una, snd.max, now);
            rack
        });
        let mut c = Connection {
            state: s.state,
            snd,
            rcv,
            opts: Options {
                snd_mss: s.opts.snd_mss.max(1),
                ..moved_opts(s.opts)
            },
            ecn: EcnState {
                cwr_end: snd.una,
                ..moved_ecn(s.ecn)
            },
            ts: s.ts.rebased(from, to),
            rec: moved_rec(s.rec, &snd),
            cc: s
                .cc
                .rebased(from, to)
                .with_algorithm(config.congestion_control),
            rtt: {
                // The importer's bounds (its configuration's) hold the base RTO.
                let mut rtt = s.rtt;
                rtt.set_base_rto_ns(rtt.base_rto_ns(), config.rto_bounds());
                rtt
            },
            timers: moved_timers(s.timers.rebased(from, to)),
            app: moved_app(s.app),
            out: Output::new(0),
            out_rare: OutputRare::new(now),
            local_port: s.local_port,
            remote_port: s.remote_port,
            send_buf,
            recv_buf,
            ooo: OooQueue::new(),
            scoreboard: OooQueue::new(),
            rack,
            rack_deadline_ns: NEVER,
            earliest_deadline_ns: NEVER,
            info: Some(crate::connection::InfoState::new(now)),
            records: crate::connection::records_from_ends(&s.record_ends),
            skb: None,
            hystart: None,
            snd_sml: snd.nxt,
            send_cut: false,
            config: std::sync::Arc::new(config),
            counters,
            counters_rare,
        };
        c.earliest_deadline_ns = c.deadlines_min_ns();
        c.out.held = c.held_hints();
        if !c.recv_buf.is_empty() {
            c.push_event(crate::Event::Readable);
        }
        if c.app.fin_received {
            c.push_event(crate::Event::PeerClosed);
        }
        if !c.app.fin_queued && c.send_buf.free() > 0 {
            c.push_event(crate::Event::Writable);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use wire::tcp::{TcpFlags, TcpRepr};

    use super::*;
    use crate::config::CongestionControl;

    const EXPORT_NS: u64 = 50_000_000_000;
    const IMPORT_NS: u64 = 7_000_000;

    fn syn() -> TcpRepr<'static> {
        TcpRepr {
            max_seg_size: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            ..TcpRepr::bare(9, 80, SeqNumber(1000), SeqNumber(0), TcpFlags::SYN, 1000)
        }
    }

    /// An established connection with every moving group away from its initial value.
    fn busy_connection() -> Connection {
        let now = EXPORT_NS;
        let config = Config {
            congestion_control: CongestionControl::Cubic,
            // RACK's records are not built by hand here (`rack_path` has its own tests).
            rack: false,
            ..Config::default()
        };
        let mut c = Connection::accept(now - 1_000, &config, &syn(), SeqNumber(5), 3).unwrap();
        c.state = State::Established;
        c.send_buf.push(&[7u8; 3000]);
        c.recv_buf.push(&[9u8; 500]);
        c.snd = SendSeq {
            una: SeqNumber(6),
            nxt: SeqNumber(6 + 2000),
            max: SeqNumber(6 + 2000),
            wnd: 50_000,
            wl1: SeqNumber(1001),
            wl2: SeqNumber(6),
            max_wnd: 60_000,
            buf_seq: SeqNumber(6),
            iss: SeqNumber(5),
        };
        c.rcv = RecvSeq {
            nxt: SeqNumber(1501),
            adv: SeqNumber(1501 + 40_000),
            irs: SeqNumber(1000),
            mss_seen: 1234,
        };
        c.opts = Options {
            snd_mss: 1400,
            snd_wscale: 7,
            rcv_wscale: 5,
            ts_ok: true,
            sack_ok: true,
            peer_offered_ws: None,
        };
        c.ts = Timestamps {
            offset: 77,
            recent: 123_456,
            recent_age_ns: now - 5_000_000,
            last_ack_sent: SeqNumber(1501),
            rtx_floor: 99,
        };
        c.rec = moved_rec(
            Recovery {
                in_recovery: true,
                recover: SeqNumber(6 + 2000),
                dupacks: 3,
                rtx_pending: true,
                ..c.rec
            },
            &c.snd,
        );
        c.cc.on_congestion_event(now - 2_000_000, 20_000, 1400);
        c.cc.on_ack(now - 1_000_000, 1400, 1400, 10_000_000);
        c.cc.on_ack(now - 1_000_000, 1400, 1400, 10_000_000);
        let bounds = c.config.rto_bounds();
        c.rtt.sample(12_000_000, bounds);
        c.rtt.sample(15_000_000, bounds);
        c.rtt.backoff_shift = 1;
        c.timers = moved_timers(Timers {
            rtx_deadline_ns: now + 100_000,
            persist_deadline_ns: now + 200_000,
            keepalive_deadline_ns: now + 300_000,
            time_wait_deadline_ns: now + 400_000,
            unacked_since_ns: now - 10_000,
            last_tx_ns: now - 20_000,
            persist_shift: 3,
            keepalive_probes: 2,
            ..c.timers
        });
        // The deadlines were written whole, not through `set_deadline`: store their minimum.
        c.earliest_deadline_ns = c.deadlines_min_ns();
        c.app = AppFlags {
            fin_received: true,
            ..moved_app(c.app)
        };
        c.counters.rx_segments = 11;
        c.rare_counters().fast_retransmits = 2;
        c.out = Output { ..Output::new(0) };
        c.out.held = c.held_hints();
        c.out_rare = OutputRare::new(now);
        c
    }

    /// Every group the snapshot carries comes back equal (times moved to the importer's
    /// clock), and the busy connection differs from a fresh one in each of them, so the
    /// equality is not vacuous.
    #[test]
    fn import_reproduces_every_group() {
        let c = busy_connection();
        assert_eq!(c.invariant_violation(), None);
        let fresh = Connection::accept(0, c.config(), &syn(), SeqNumber(5), 3).unwrap();
        assert_ne!(c.snd, fresh.snd);
        assert_ne!(c.rcv, fresh.rcv);
        assert_ne!(moved_opts(c.opts), moved_opts(fresh.opts));
        assert_ne!(c.ts, fresh.ts);
        assert_ne!(c.rec, moved_rec(fresh.rec, &c.snd));
        assert_ne!(c.cc, fresh.cc);
        assert_ne!(c.rtt, fresh.rtt);
        assert_ne!(c.timers, fresh.timers);
        assert_ne!(c.app, fresh.app);
        assert_ne!(c.counters(), fresh.counters());

        let s = c.export(EXPORT_NS).unwrap();
        let d = Connection::import(IMPORT_NS, &s).unwrap();
        assert_eq!(d.invariant_violation(), None);
        assert_eq!(d.state, c.state);
        assert_eq!((d.local_port, d.remote_port), (c.local_port, c.remote_port));
        assert_eq!(d.snd, c.snd);
        assert_eq!(d.rcv, c.rcv);
        assert_eq!(d.opts, c.opts);
        assert_eq!(d.ts, c.ts.rebased(EXPORT_NS, IMPORT_NS));
        assert_eq!(d.ts.clock(IMPORT_NS), c.ts.clock(EXPORT_NS));
        assert_eq!(d.ts.recent_age_ns, IMPORT_NS - 5_000_000);
        assert_eq!(d.rec, c.rec);
        assert_eq!(d.cc, c.cc.rebased(EXPORT_NS, IMPORT_NS));
        assert_eq!(d.cc.cubic().epoch_start_ns(), Some(IMPORT_NS - 1_000_000));
        assert_eq!(d.rtt, c.rtt);
        assert_eq!(d.timers, c.timers.rebased(EXPORT_NS, IMPORT_NS));
        assert_eq!(d.timers.rtx_deadline_ns, IMPORT_NS + 100_000);
        assert_eq!(d.app, c.app);
        assert_eq!(d.counters(), c.counters());
        assert_eq!(d.counters, c.counters, "the inline counters");
        assert_eq!(d.counters_rare, c.counters_rare, "the rare ones, boxed");
        assert_eq!(d.send_buf.to_vec(), c.send_buf.to_vec());
        assert_eq!(d.recv_buf.to_vec(), c.recv_buf.to_vec());
        // And the move is the identity on the snapshot.
        assert_eq!(d.export(IMPORT_NS).unwrap().snd, s.snd);
    }
}
