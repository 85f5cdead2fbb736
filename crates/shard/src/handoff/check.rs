//! A sans-IO checker of one handoff conversation, as one side sees it.
//!
//! Every command of the conversation passes through [`Conversation::host_cmd`] or
//! [`Conversation::engine_cmd`] in the order this side handles it: its own commands when it
//! sends them, the other side's when it receives them. A command that breaks the protocol is
//! refused with a [`CheckError`], counted by reason in [`HandoffCounters`], and changes
//! nothing; an accepted one advances the state. Nothing panics.
//!
//! Per connection the states are: handoff requested (by [`ReqId`], no cid yet) → live (the
//! engine accepted, with a [`Cid`]) → restoring (the host sent `Restore`, or `Abort`ed) →
//! gone (the engine sent `Restore` or `Ctrl(Deallocated)`). A refused handoff goes straight
//! back to the host.
//!
//! Commands cross in flight. The rules allow what a correct peer can send before it sees
//! this side's last command, and nothing else:
//!
//! - the engine may keep sending `Recv`, `Ack` and `Ctrl` for a connection the host asked
//!   back, until its `Restore`;
//! - the host may send commands for a connection the engine has already returned or freed:
//!   the engine's side refuses them as [`CheckError::StaleCid`] (harmless: the host learns
//!   from the `Restore` what the engine had taken), the host's side never sees that case;
//! - `Resource` advertises what was available when the engine sent it; the host's side
//!   counts its own handoffs against the last advertisement and refuses one beyond it
//!   ([`CheckError::BeyondAdvertisement`]); the engine's side does not (it answers an
//!   excess handoff with `HandoffRefused`).
//!
//! Byte accounting per connection, in bytes since the handoff (the module documentation of
//! [`super`] says where the bytes live): `Ack`s never exceed the snapshot's send bytes plus
//! every `Send`; `Recvd`s never exceed the snapshot's unread bytes plus every `Recv`.

use std::collections::{BTreeMap, BTreeSet};

use tcp::ConnectionSnapshot;

use super::codec::DecodeError;
use super::{
    Cid, EngineCmd, EngineCtrl, FourTuple, HostCmd, HostCtrl, PAYLOAD_BYTES_MAX, ReqId,
    ResourceKind, RestoreCause, snapshot_matches,
};

/// Which side of the conversation a [`Conversation`] stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The host: sends [`HostCmd`]s, receives [`EngineCmd`]s.
    Host,
    /// The engine: sends [`EngineCmd`]s, receives [`HostCmd`]s.
    Engine,
}

/// The engine's configured maxima, and the checker's own bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connection table slots. Default 8,192 (the seed's simulated NIC).
    pub connections_max: u32,
    /// Buffer memory in bytes. Default 64 MiB.
    pub buffer_bytes_max: u64,
    /// Processing budget in packets per budget period. Default 1,000,000.
    pub budget_packets_max: u64,
    /// Handoff requests awaiting an answer. Default 1,024.
    pub requests_max: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections_max: 8192,
            buffer_bytes_max: 64 << 20,
            budget_packets_max: 1_000_000,
            requests_max: 1024,
        }
    }
}

impl Limits {
    /// The maximum of a resource kind, in its unit.
    pub fn max(&self, kind: ResourceKind) -> u64 {
        match kind {
            ResourceKind::Connections => u64::from(self.connections_max),
            ResourceKind::BufferBytes => self.buffer_bytes_max,
            ResourceKind::BudgetPackets => self.budget_packets_max,
        }
    }
}

/// Why a command does not fit the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckError {
    /// `HandoffAccepted`/`HandoffRefused` for a request that is not pending.
    UnknownRequest,
    /// `Handoff` reusing the id of a pending request.
    DuplicateRequest,
    /// `Handoff` beyond [`Limits::requests_max`] pending requests.
    TooManyRequests,
    /// `Handoff` of a 4-tuple already requested or offloaded.
    TupleAlreadyOffloaded,
    /// `Handoff` while the engine's last `Resource(Connections)` has been used up (host side).
    BeyondAdvertisement,
    /// `HandoffAccepted` with a cid not above every cid issued before.
    CidReused,
    /// `HandoffAccepted` beyond [`Limits::connections_max`] live connections.
    TableFull,
    /// A command for a cid never issued, or (host side) no longer held.
    UnknownCid,
    /// Engine side: a host command for a connection the engine already returned or freed
    /// (crossed in flight).
    StaleCid,
    /// A host command for a connection the host already asked back or aborted.
    NotLive,
    /// `Send` after the host's `Close`, `ShutdownWrite` or `Abort`.
    SendAfterShutdown,
    /// `Recv` after the engine reported the peer's FIN, a reset or a time-out.
    RecvAfterEnd,
    /// `Recvd` beyond the bytes delivered.
    RecvdBeyondDelivered,
    /// `Ack` beyond the bytes sent.
    AckBeyondSent,
    /// Data or a packet longer than [`PAYLOAD_BYTES_MAX`].
    PayloadTooLong,
    /// A second `PeerFin`, `Reset` or `TimedOut` for one connection.
    DuplicateEvent,
    /// `Resource` with a count above the configured maximum of its kind.
    ResourceBeyondMax,
    /// `Restore` with cause `Requested` for a connection the host did not ask back.
    UnrequestedRestore,
    /// A snapshot whose ports are not its connection's tuple.
    SnapshotMismatch,
    /// A snapshot that `ConnectionSnapshot::check` refuses.
    SnapshotInconsistent,
}

impl core::fmt::Display for CheckError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for CheckError {}

/// Why bytes were refused by [`Conversation::decode_host`] or
/// [`Conversation::decode_engine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandoffError {
    /// The bytes are not a command.
    Malformed(DecodeError),
    /// The command does not fit the conversation.
    Refused(CheckError),
}

impl core::fmt::Display for HandoffError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HandoffError::Malformed(e) => write!(f, "malformed: {e}"),
            HandoffError::Refused(e) => write!(f, "refused: {e}"),
        }
    }
}

impl std::error::Error for HandoffError {}

/// Refusals by reason: one counter per [`CheckError`] variant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefusedCounters {
    pub unknown_request: u64,
    pub duplicate_request: u64,
    pub too_many_requests: u64,
    pub tuple_already_offloaded: u64,
    pub beyond_advertisement: u64,
    pub cid_reused: u64,
    pub table_full: u64,
    pub unknown_cid: u64,
    pub stale_cid: u64,
    pub not_live: u64,
    pub send_after_shutdown: u64,
    pub recv_after_end: u64,
    pub recvd_beyond_delivered: u64,
    pub ack_beyond_sent: u64,
    pub payload_too_long: u64,
    pub duplicate_event: u64,
    pub resource_beyond_max: u64,
    pub unrequested_restore: u64,
    pub snapshot_mismatch: u64,
    pub snapshot_inconsistent: u64,
}

impl RefusedCounters {
    /// The counter of `e`.
    pub fn get(&self, e: CheckError) -> u64 {
        let mut c = *self;
        *c.slot(e)
    }

    fn slot(&mut self, e: CheckError) -> &mut u64 {
        match e {
            CheckError::UnknownRequest => &mut self.unknown_request,
            CheckError::DuplicateRequest => &mut self.duplicate_request,
            CheckError::TooManyRequests => &mut self.too_many_requests,
            CheckError::TupleAlreadyOffloaded => &mut self.tuple_already_offloaded,
            CheckError::BeyondAdvertisement => &mut self.beyond_advertisement,
            CheckError::CidReused => &mut self.cid_reused,
            CheckError::TableFull => &mut self.table_full,
            CheckError::UnknownCid => &mut self.unknown_cid,
            CheckError::StaleCid => &mut self.stale_cid,
            CheckError::NotLive => &mut self.not_live,
            CheckError::SendAfterShutdown => &mut self.send_after_shutdown,
            CheckError::RecvAfterEnd => &mut self.recv_after_end,
            CheckError::RecvdBeyondDelivered => &mut self.recvd_beyond_delivered,
            CheckError::AckBeyondSent => &mut self.ack_beyond_sent,
            CheckError::PayloadTooLong => &mut self.payload_too_long,
            CheckError::DuplicateEvent => &mut self.duplicate_event,
            CheckError::ResourceBeyondMax => &mut self.resource_beyond_max,
            CheckError::UnrequestedRestore => &mut self.unrequested_restore,
            CheckError::SnapshotMismatch => &mut self.snapshot_mismatch,
            CheckError::SnapshotInconsistent => &mut self.snapshot_inconsistent,
        }
    }
}

/// Malformed input by reason: one counter per [`DecodeError`] variant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MalformedCounters {
    pub truncated: u64,
    pub unknown_kind: u64,
    pub wrong_direction: u64,
    pub bad_length: u64,
    pub invalid_field: u64,
    pub payload_too_long: u64,
    pub snapshot: u64,
}

impl MalformedCounters {
    fn count(&mut self, e: DecodeError) {
        let c = match e {
            DecodeError::Truncated => &mut self.truncated,
            DecodeError::UnknownKind(_) => &mut self.unknown_kind,
            DecodeError::WrongDirection(_) => &mut self.wrong_direction,
            DecodeError::BadLength => &mut self.bad_length,
            DecodeError::InvalidField(_) => &mut self.invalid_field,
            DecodeError::PayloadTooLong => &mut self.payload_too_long,
            DecodeError::Snapshot(_) => &mut self.snapshot,
        };
        *c += 1;
    }
}

/// What one side of a conversation counted. Values only increase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandoffCounters {
    /// Host → engine commands accepted.
    pub host_cmds: u64,
    /// Engine → host commands accepted.
    pub engine_cmds: u64,
    /// Commands refused, by reason.
    pub refused: RefusedCounters,
    /// Byte strings that did not decode, by reason (only through the `decode_*` methods).
    pub malformed: MalformedCounters,
}

/// Where one connection stands, as this side sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CidState {
    /// Never issued.
    Unknown,
    /// Accepted by the engine; traffic flows.
    Live,
    /// The host asked for it back (`Restore`) or aborted it; the engine's last commands for
    /// it may still arrive.
    Restoring,
    /// Returned (`Restore`) or freed (`Ctrl(Deallocated)`).
    Gone,
}

/// One connection's (or pending request's) bookkeeping.
#[derive(Debug, Clone, Copy)]
struct Track {
    tuple: FourTuple,
    /// The host let go: it sent `Restore` or `Ctrl(Abort)`, and may send nothing more.
    released: bool,
    /// Bytes in the engine's send stream: the snapshot's send bytes, then every `Send`.
    sent_bytes: u64,
    /// Bytes `Ack`ed.
    acked_bytes: u64,
    /// Bytes in the host's receive buffer from the engine: the snapshot's unread bytes, then
    /// every `Recv`.
    delivered_bytes: u64,
    /// Bytes reported read with `Recvd`.
    read_bytes: u64,
    /// The host queued its FIN (in the snapshot, or by `Close`/`ShutdownWrite`/`Abort`).
    host_shutdown: bool,
    /// The peer's FIN came (in the snapshot, or by `Ctrl(PeerFin)`).
    peer_fin: bool,
    /// The engine reported a reset or a time-out.
    ended: bool,
}

impl Track {
    fn new(tuple: FourTuple, s: &ConnectionSnapshot) -> Track {
        Track {
            tuple,
            released: false,
            sent_bytes: (s.send_unacked.len() + s.send_unsent.len()) as u64,
            acked_bytes: 0,
            delivered_bytes: s.recv_unread.len() as u64,
            read_bytes: 0,
            host_shutdown: s.app.fin_queued,
            peer_fin: s.app.fin_received,
            ended: false,
        }
    }
}

/// One side's view of a handoff conversation (module documentation).
///
/// Invariants: every pending request's and live connection's tuple is in `tuples`, once;
/// `conns.len() ≤ limits.connections_max`, `requests.len() ≤ limits.requests_max`; every
/// cid in `conns` is at most `cid_high`; per connection `acked ≤ sent` and
/// `read ≤ delivered`.
#[derive(Debug, Clone)]
pub struct Conversation {
    side: Side,
    limits: Limits,
    requests: BTreeMap<ReqId, Track>,
    conns: BTreeMap<Cid, Track>,
    tuples: BTreeSet<FourTuple>,
    /// The highest cid the engine issued.
    cid_high: Option<Cid>,
    /// Connections the host may still hand off: the last advertisement minus the handoffs
    /// sent since (host side); starts at `limits.connections_max`.
    connections_available: u64,
    counters: HandoffCounters,
}

impl Conversation {
    /// A conversation with nothing offloaded yet.
    pub fn new(side: Side, limits: Limits) -> Conversation {
        Conversation {
            side,
            limits,
            requests: BTreeMap::new(),
            conns: BTreeMap::new(),
            tuples: BTreeSet::new(),
            cid_high: None,
            connections_available: u64::from(limits.connections_max),
            counters: HandoffCounters::default(),
        }
    }

    /// What this side counted.
    pub fn counters(&self) -> &HandoffCounters {
        &self.counters
    }

    /// Which side this is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// Whether a handoff request awaits its answer.
    pub fn request_pending(&self, req: ReqId) -> bool {
        self.requests.contains_key(&req)
    }

    /// Whether the tuple is requested or offloaded.
    pub fn is_offloaded(&self, tuple: &FourTuple) -> bool {
        self.tuples.contains(tuple)
    }

    /// Connections accepted and not yet gone.
    pub fn live_connections(&self) -> usize {
        self.conns.len()
    }

    /// Where a connection stands.
    pub fn cid_state(&self, cid: Cid) -> CidState {
        match self.conns.get(&cid) {
            Some(t) if t.released => CidState::Restoring,
            Some(_) => CidState::Live,
            None if self.cid_high.is_some_and(|h| cid <= h) => CidState::Gone,
            None => CidState::Unknown,
        }
    }

    /// Checks and applies a host → engine command; on refusal nothing changes and the
    /// reason is counted.
    pub fn host_cmd(&mut self, cmd: &HostCmd) -> Result<(), CheckError> {
        let r = self.apply_host(cmd);
        match r {
            Ok(()) => self.counters.host_cmds += 1,
            Err(e) => *self.counters.refused.slot(e) += 1,
        }
        r
    }

    /// Checks and applies an engine → host command; on refusal nothing changes and the
    /// reason is counted.
    pub fn engine_cmd(&mut self, cmd: &EngineCmd) -> Result<(), CheckError> {
        let r = self.apply_engine(cmd);
        match r {
            Ok(()) => self.counters.engine_cmds += 1,
            Err(e) => *self.counters.refused.slot(e) += 1,
        }
        r
    }

    /// Decodes a host → engine command from the start of `bytes` and checks it; returns it
    /// with the bytes used. Malformed bytes and refusals are counted.
    pub fn decode_host(&mut self, bytes: &[u8]) -> Result<(HostCmd, usize), HandoffError> {
        let (cmd, used) = HostCmd::decode(bytes).map_err(|e| {
            self.counters.malformed.count(e);
            HandoffError::Malformed(e)
        })?;
        self.host_cmd(&cmd).map_err(HandoffError::Refused)?;
        Ok((cmd, used))
    }

    /// Decodes an engine → host command from the start of `bytes` and checks it; returns it
    /// with the bytes used. Malformed bytes and refusals are counted.
    pub fn decode_engine(&mut self, bytes: &[u8]) -> Result<(EngineCmd, usize), HandoffError> {
        let (cmd, used) = EngineCmd::decode(bytes).map_err(|e| {
            self.counters.malformed.count(e);
            HandoffError::Malformed(e)
        })?;
        self.engine_cmd(&cmd).map_err(HandoffError::Refused)?;
        Ok((cmd, used))
    }

    /// A connection the host may still command.
    fn host_may_command(&mut self, cid: Cid) -> Result<&mut Track, CheckError> {
        let gone = self.cid_state(cid) == CidState::Gone;
        match self.conns.get_mut(&cid) {
            Some(t) if t.released => Err(CheckError::NotLive),
            Some(t) => Ok(t),
            None if gone && self.side == Side::Engine => Err(CheckError::StaleCid),
            None => Err(CheckError::UnknownCid),
        }
    }

    fn apply_host(&mut self, cmd: &HostCmd) -> Result<(), CheckError> {
        match cmd {
            HostCmd::Handoff {
                req,
                tuple,
                snapshot,
            } => {
                if self.requests.contains_key(req) {
                    return Err(CheckError::DuplicateRequest);
                }
                if self.requests.len() >= self.limits.requests_max as usize {
                    return Err(CheckError::TooManyRequests);
                }
                if self.tuples.contains(tuple) {
                    return Err(CheckError::TupleAlreadyOffloaded);
                }
                if !snapshot_matches(tuple, snapshot) {
                    return Err(CheckError::SnapshotMismatch);
                }
                if snapshot.check().is_err() {
                    return Err(CheckError::SnapshotInconsistent);
                }
                if self.side == Side::Host {
                    if self.connections_available == 0 {
                        return Err(CheckError::BeyondAdvertisement);
                    }
                    self.connections_available -= 1;
                }
                self.requests.insert(*req, Track::new(*tuple, snapshot));
                self.tuples.insert(*tuple);
            }
            HostCmd::Restore { cid } => {
                self.host_may_command(*cid)?.released = true;
            }
            HostCmd::Send { cid, data, .. } => {
                let t = self.host_may_command(*cid)?;
                if data.len() > PAYLOAD_BYTES_MAX {
                    return Err(CheckError::PayloadTooLong);
                }
                if t.host_shutdown {
                    return Err(CheckError::SendAfterShutdown);
                }
                t.sent_bytes = t.sent_bytes.saturating_add(data.len() as u64);
            }
            HostCmd::Recvd { cid, len_bytes } => {
                let t = self.host_may_command(*cid)?;
                let read = t.read_bytes.saturating_add(u64::from(*len_bytes));
                if read > t.delivered_bytes {
                    return Err(CheckError::RecvdBeyondDelivered);
                }
                t.read_bytes = read;
            }
            HostCmd::Ctrl { cid, cmd } => {
                let t = self.host_may_command(*cid)?;
                match cmd {
                    HostCtrl::Close | HostCtrl::ShutdownWrite => t.host_shutdown = true,
                    HostCtrl::Abort => {
                        t.host_shutdown = true;
                        t.released = true;
                    }
                    HostCtrl::Nodelay(_)
                    | HostCtrl::Cork(_)
                    | HostCtrl::SendBufferBytes(_)
                    | HostCtrl::RecvBufferBytes(_)
                    | HostCtrl::Keepalive(_) => {}
                }
            }
            HostCmd::Forward { cid, packet } => {
                self.host_may_command(*cid)?;
                if packet.len() > PAYLOAD_BYTES_MAX {
                    return Err(CheckError::PayloadTooLong);
                }
            }
            HostCmd::Post { cid, .. } => {
                self.host_may_command(*cid)?;
            }
        }
        Ok(())
    }

    /// A connection the engine may still report on (any state but gone).
    fn engine_may_report(&mut self, cid: Cid) -> Result<&mut Track, CheckError> {
        self.conns.get_mut(&cid).ok_or(CheckError::UnknownCid)
    }

    /// The connection is gone: its tuple may be offloaded again.
    fn forget(&mut self, cid: Cid) {
        if let Some(t) = self.conns.remove(&cid) {
            self.tuples.remove(&t.tuple);
        }
    }

    fn apply_engine(&mut self, cmd: &EngineCmd) -> Result<(), CheckError> {
        match cmd {
            EngineCmd::HandoffAccepted { req, cid } => {
                if !self.requests.contains_key(req) {
                    return Err(CheckError::UnknownRequest);
                }
                if self.cid_high.is_some_and(|h| *cid <= h) {
                    return Err(CheckError::CidReused);
                }
                if self.conns.len() >= self.limits.connections_max as usize {
                    return Err(CheckError::TableFull);
                }
                if let Some(t) = self.requests.remove(req) {
                    self.conns.insert(*cid, t);
                    self.cid_high = Some(*cid);
                }
            }
            EngineCmd::HandoffRefused { req, .. } => {
                let t = self
                    .requests
                    .remove(req)
                    .ok_or(CheckError::UnknownRequest)?;
                self.tuples.remove(&t.tuple);
            }
            EngineCmd::Recv { cid, data, .. } => {
                let t = self.engine_may_report(*cid)?;
                if data.len() > PAYLOAD_BYTES_MAX {
                    return Err(CheckError::PayloadTooLong);
                }
                if t.peer_fin || t.ended {
                    return Err(CheckError::RecvAfterEnd);
                }
                t.delivered_bytes = t.delivered_bytes.saturating_add(data.len() as u64);
            }
            EngineCmd::Ack { cid, len_bytes } => {
                let t = self.engine_may_report(*cid)?;
                let acked = t.acked_bytes.saturating_add(u64::from(*len_bytes));
                if acked > t.sent_bytes {
                    return Err(CheckError::AckBeyondSent);
                }
                t.acked_bytes = acked;
            }
            EngineCmd::Ctrl { cid, cmd } => {
                let t = self.engine_may_report(*cid)?;
                match cmd {
                    EngineCtrl::PeerFin if t.peer_fin || t.ended => {
                        return Err(CheckError::DuplicateEvent);
                    }
                    EngineCtrl::PeerFin => t.peer_fin = true,
                    EngineCtrl::Reset | EngineCtrl::TimedOut if t.ended => {
                        return Err(CheckError::DuplicateEvent);
                    }
                    EngineCtrl::Reset | EngineCtrl::TimedOut => t.ended = true,
                    EngineCtrl::Deallocated => self.forget(*cid),
                }
            }
            EngineCmd::Resource { kind, count } => {
                if *count > self.limits.max(*kind) {
                    return Err(CheckError::ResourceBeyondMax);
                }
                if *kind == ResourceKind::Connections {
                    self.connections_available = *count;
                }
            }
            EngineCmd::Restore {
                cid,
                snapshot,
                cause,
            } => {
                let t = self.engine_may_report(*cid)?;
                if *cause == RestoreCause::Requested && !t.released {
                    return Err(CheckError::UnrequestedRestore);
                }
                if !snapshot_matches(&t.tuple, snapshot) {
                    return Err(CheckError::SnapshotMismatch);
                }
                if snapshot.check().is_err() {
                    return Err(CheckError::SnapshotInconsistent);
                }
                self.forget(*cid);
            }
        }
        Ok(())
    }
}
