//! The host's side of the handoff: the layer between a shard's [`Stack`] (whose bypass
//! sockets keep the application's handles) and the engine (seed 002 §3.3: the bypass layer
//! and the device driver).
//!
//! Why a layer over the stack and not more stack: the stack must not know handoff commands
//! (they are `shard` messages and `stack` sits below `shard`), and it need not — its bypass
//! sockets queue neutral [`BypassOp`]s and take the engine's answers through plain methods.
//! This layer owns what is the driver's: connection ids, the pending requests, the
//! conversation checker, the NIC steering changes, the resource advertisements, failure
//! detection and the policy.
//!
//! Driver order: [`HostOffload::handle_engine_cmd`] for each command from the engine;
//! [`HostOffload::poll`] after the shard's iteration (it turns the stack's bypass operations
//! into commands, runs the policy, watches the engine's heartbeat); then
//! [`HostOffload::poll_cmd`] (commands for the engine) and [`HostOffload::poll_steer`] (filter
//! changes for the NIC) until `None`.
//!
//! The walk of one handoff: [`HostOffload::offload`] exports the connection into a bypass
//! socket and sends `Handoff`; until the engine answers, the socket's operations (writes,
//! reads, forwarded frames) wait here in order. Accepted: the NIC gets an exact-match filter
//! steering the flow to the engine ([`Steer::Install`]), then the waiting operations go out
//! with the cid. Refused: the host restores its own snapshot (the stack reconciles the
//! writes and reads made meanwhile) and processes the waiting frames itself, oldest first.
//! Restore (`EngineCmd::Restore`) removes the filter first, then brings the connection back
//! under the same handle.

use std::collections::{BTreeMap, VecDeque};

use shard::handoff::{
    Cid, Conversation, EngineCmd, EngineCtrl, HostCmd, HostCtrl, Limits, PAYLOAD_BYTES_MAX, ReqId,
    ResourceKind, RestoreCause, SendFlags, Side,
};
use stack::{
    BypassOp, FourTuple, MoveClass, RxMeta, SocketError, SocketHandle, SocketOption, Stack,
};

use crate::policy::{Policy, PolicyCounters};

/// An exact-match steering change for the NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// Steer the flow's frames to the engine's queue.
    Install(FourTuple),
    /// Steer them by RSS again.
    Remove(FourTuple),
}

/// How a [`HostOffload`] is built.
#[derive(Debug, Clone, Copy)]
pub struct HostConfig {
    /// The engine's maxima as the host knows them (for the checker).
    pub limits: Limits,
    pub policy: Policy,
    /// The engine is declared failed when it says nothing for this long while connections
    /// are offloaded (its advertisements are its heartbeat).
    pub engine_timeout_ns: u64,
    /// How often the policy runs.
    pub policy_period_ns: u64,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            limits: Limits::default(),
            policy: Policy::Off,
            engine_timeout_ns: 100_000_000,
            policy_period_ns: 1_000_000,
        }
    }
}

/// Why [`HostOffload::offload`] did not hand a connection off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// The engine's last advertisement leaves no connection slot (flow control).
    NoResource,
    /// The engine failed; nothing is offloaded any more.
    EngineFailed,
    /// Already offloaded or being handed off.
    AlreadyOffloaded,
    /// The stack refused the export (not an established connection the application owns,
    /// or output could not drain).
    Stack(SocketError),
}

/// What the host side counted. Values only increase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCounters {
    pub handoffs_sent: u64,
    pub handoffs_accepted: u64,
    pub handoffs_refused: u64,
    /// Handoffs not attempted: no connection slot advertised.
    pub handoffs_no_resource: u64,
    pub restores_asked: u64,
    /// Restores received, by cause.
    pub restored_time_wait: u64,
    pub restored_requested: u64,
    pub restored_exhaustion: u64,
    pub restored_other: u64,
    /// Restores whose snapshot the stack refused (the connection is reset and counted).
    pub restore_failed: u64,
    pub deallocated: u64,
    /// Engine failures detected, and the connections lost with them (each a counted reset).
    pub engine_failures: u64,
    pub connections_lost: u64,
    /// Engine commands the checker refused (ignored), and ones for no known connection.
    pub engine_cmds_refused: u64,
    /// Host commands the checker refused (not sent: a bug of this layer).
    pub host_cmds_refused: u64,
    /// Bypass operations for a handle this layer does not know (dropped).
    pub ops_orphaned: u64,
    /// Socket operations after the host asked the connection back: not sent, because the
    /// restore reconciles them from the bypass socket (writes, reads, shutdown, close,
    /// options).
    pub ops_reconciled_at_restore: u64,
    /// Frames that reached the host between its `Restore` and the engine's answer: held and
    /// processed after the restore, or dropped beyond [`FRAMES_HELD_MAX`] per connection or
    /// when the connection ended on the engine instead.
    pub frames_held_restoring: u64,
    pub frames_dropped_restoring: u64,
    /// Frames forwarded to the engine, and frames re-processed by the host after a refusal.
    pub frames_forwarded: u64,
    pub frames_reprocessed: u64,
    /// Commands sent, by kind (seed Figure 8's measure).
    pub cmds_send: u64,
    pub cmds_recvd: u64,
    pub cmds_ctrl: u64,
    pub cmds_forward: u64,
    pub cmds_post: u64,
    pub cmds_recv_in: u64,
    pub cmds_ack_in: u64,
    pub cmds_ctrl_in: u64,
    pub cmds_resource_in: u64,
}

/// One connection handed off or being handed off.
#[derive(Debug)]
struct Link {
    tuple: FourTuple,
    cid: Option<Cid>,
    /// While the handoff awaits its answer: the request, the host's own snapshot and the
    /// socket's operations meanwhile.
    pending: Option<(ReqId, Kept, Vec<BypassOp>)>,
    /// Activity since the policy last looked (bytes and operations), for `adaptive`.
    activity: u64,
    /// `Some` once the host asked the connection back (`Restore` sent): from then on the
    /// socket's operations are not sent (the engine would refuse them; the restore reconciles
    /// the bypass socket's buffers, shutdown, close and options) and frames that reach the
    /// host wait here, oldest first, at most [`FRAMES_HELD_MAX`], to be processed once the
    /// connection is back.
    restoring: Option<Vec<Vec<u8>>>,
}

/// The host's own snapshot of a connection whose handoff awaits its answer, kept for a
/// refusal: everything but the byte buffers, which the handoff carries to the engine. The
/// bypass socket holds those bytes (all of them: before the engine accepts, it has
/// acknowledged and delivered nothing), so a refusal takes them back from it
/// ([`Stack::bypass_refill_snapshot`]) — the snapshot the export made, without a copy of its
/// buffers per handoff.
#[derive(Debug)]
struct Kept {
    /// The export's snapshot with empty `send_unacked`, `send_unsent` and `recv_unread`.
    snapshot: Box<tcp::ConnectionSnapshot>,
    /// The lengths those had.
    send_unacked_bytes: usize,
    send_unsent_bytes: usize,
}

impl Kept {
    /// `s` without its buffers (`s` is left as it was).
    fn of(s: &mut tcp::ConnectionSnapshot) -> Kept {
        let bufs = (
            core::mem::take(&mut s.send_unacked),
            core::mem::take(&mut s.send_unsent),
            core::mem::take(&mut s.recv_unread),
        );
        let snapshot = Box::new(s.clone());
        (s.send_unacked, s.send_unsent, s.recv_unread) = bufs;
        Kept {
            snapshot,
            send_unacked_bytes: s.send_unacked.len(),
            send_unsent_bytes: s.send_unsent.len(),
        }
    }
}

/// Frames held per connection between the host's `Restore` and the engine's answer; beyond
/// it they are dropped before any processing (counted in `frames_dropped_restoring`: the
/// peer retransmits).
pub const FRAMES_HELD_MAX: usize = 256;

/// The host's offload layer (module documentation).
pub struct HostOffload {
    cfg: HostConfig,
    conv: Conversation,
    links: BTreeMap<SocketHandle, Link>,
    by_cid: BTreeMap<Cid, SocketHandle>,
    by_req: BTreeMap<ReqId, SocketHandle>,
    next_req: u32,
    out: VecDeque<HostCmd>,
    steer: VecDeque<Steer>,
    /// The engine's last advertisement per kind, minus handoffs sent since (connections).
    advertised: BTreeMap<ResourceKind, u64>,
    last_heard_ns: u64,
    engine_failed: bool,
    next_policy_ns: u64,
    /// Handoffs sent and not refused, ever, for `first:N`.
    offloaded_total: u64,
    counters: HostCounters,
    policy_counters: PolicyCounters,
    /// Writes of one connection that follow each other in one [`HostOffload::poll`], joined
    /// into one `Send` (at most [`PAYLOAD_BYTES_MAX`] bytes; seed §5.1: one `ch_nic_send` per
    /// buffer, not per segment): the connection, the bytes, `MSG_MORE`. Always flushed before
    /// any other command goes out and at the end of the pass that staged it.
    staged: Option<(Cid, Vec<u8>, bool)>,
}

impl core::fmt::Debug for HostOffload {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HostOffload")
            .field("links", &self.links.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl HostOffload {
    pub fn new(cfg: HostConfig) -> HostOffload {
        HostOffload {
            cfg,
            conv: Conversation::new(Side::Host, cfg.limits),
            links: BTreeMap::new(),
            by_cid: BTreeMap::new(),
            by_req: BTreeMap::new(),
            next_req: 1,
            out: VecDeque::new(),
            steer: VecDeque::new(),
            advertised: BTreeMap::new(),
            last_heard_ns: 0,
            engine_failed: false,
            next_policy_ns: 0,
            offloaded_total: 0,
            counters: HostCounters::default(),
            policy_counters: PolicyCounters::default(),
            staged: None,
        }
    }

    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    pub fn policy_counters(&self) -> &PolicyCounters {
        &self.policy_counters
    }

    pub fn conversation(&self) -> &Conversation {
        &self.conv
    }

    /// Whether the engine was declared failed.
    pub fn engine_failed(&self) -> bool {
        self.engine_failed
    }

    /// Connections handed off or being handed off.
    pub fn offloaded(&self) -> usize {
        self.links.len()
    }

    /// Whether `h` is handed off (accepted) or being handed off.
    pub fn is_offloaded(&self, h: SocketHandle) -> bool {
        self.links.contains_key(&h)
    }

    /// The engine's last advertisement of `kind` (less the handoffs sent since, for
    /// connections); `None` before the first.
    pub fn advertised(&self, kind: ResourceKind) -> Option<u64> {
        self.advertised.get(&kind).copied()
    }

    fn send(&mut self, cmd: HostCmd) {
        self.flush_staged();
        self.send_now(cmd);
    }

    /// The staged writes, as one `Send`.
    fn flush_staged(&mut self) {
        if let Some((cid, data, more)) = self.staged.take() {
            let flags = if more {
                SendFlags::MORE
            } else {
                SendFlags::NONE
            };
            self.send_now(HostCmd::Send { cid, data, flags });
        }
    }

    /// A write for `cid`: joined to the staged ones when it fits, else the staged ones go
    /// and this one is staged (split at [`PAYLOAD_BYTES_MAX`]).
    fn stage_send(&mut self, cid: Cid, data: Vec<u8>, more: bool) {
        if let Some((c, buf, m)) = self.staged.as_mut() {
            if *c == cid && *m == more && buf.len() + data.len() <= PAYLOAD_BYTES_MAX {
                if buf.capacity() < buf.len() + data.len() {
                    // Joining starts: room for a whole command at once, not a copy per
                    // doubling.
                    buf.reserve_exact(PAYLOAD_BYTES_MAX - buf.len());
                }
                buf.extend_from_slice(&data);
                return;
            }
        }
        self.flush_staged();
        if data.len() <= PAYLOAD_BYTES_MAX {
            self.staged = Some((cid, data, more));
            return;
        }
        let mut chunks = data.chunks(PAYLOAD_BYTES_MAX).peekable();
        while let Some(chunk) = chunks.next() {
            if chunks.peek().is_none() {
                self.staged = Some((cid, chunk.to_vec(), more));
            } else {
                self.send_now(HostCmd::Send {
                    cid,
                    data: chunk.to_vec(),
                    flags: if more {
                        SendFlags::MORE
                    } else {
                        SendFlags::NONE
                    },
                });
            }
        }
    }

    fn send_now(&mut self, cmd: HostCmd) {
        if self.conv.host_cmd(&cmd).is_err() {
            self.counters.host_cmds_refused += 1;
            return;
        }
        match &cmd {
            HostCmd::Send { .. } => self.counters.cmds_send += 1,
            HostCmd::Recvd { .. } => self.counters.cmds_recvd += 1,
            HostCmd::Ctrl { .. } => self.counters.cmds_ctrl += 1,
            HostCmd::Forward { .. } => self.counters.cmds_forward += 1,
            HostCmd::Post { .. } => self.counters.cmds_post += 1,
            HostCmd::Handoff { .. } | HostCmd::Restore { .. } => {}
        }
        self.out.push_back(cmd);
    }

    /// Hands the connection `h` to the engine (module documentation). The host decides
    /// (seed §3.3); the engine's advertisement bounds it (flow control).
    pub fn offload(
        &mut self,
        now: u64,
        stack: &mut Stack,
        h: SocketHandle,
    ) -> Result<ReqId, OffloadError> {
        if self.engine_failed {
            return Err(OffloadError::EngineFailed);
        }
        if self.links.contains_key(&h) {
            return Err(OffloadError::AlreadyOffloaded);
        }
        let slots = self
            .advertised
            .get(&ResourceKind::Connections)
            .copied()
            .unwrap_or(u64::from(self.cfg.limits.connections_max));
        if slots == 0 {
            self.counters.handoffs_no_resource += 1;
            return Err(OffloadError::NoResource);
        }
        let (tuple, mut snapshot) = stack.tcp_offload(now, h).map_err(OffloadError::Stack)?;
        let kept = Kept::of(&mut snapshot);
        let req = ReqId(self.next_req);
        self.next_req = self.next_req.wrapping_add(1);
        let cmd = HostCmd::Handoff {
            req,
            tuple,
            snapshot: Box::new(snapshot),
        };
        if self.conv.host_cmd(&cmd).is_err() {
            // The checker refuses (a tuple still known to it): keep the connection here.
            self.counters.host_cmds_refused += 1;
            if let HostCmd::Handoff { snapshot, .. } = cmd {
                let _ = stack.tcp_restore(now, h, *snapshot);
            }
            return Err(OffloadError::AlreadyOffloaded);
        }
        self.flush_staged();
        self.out.push_back(cmd);
        self.advertised
            .insert(ResourceKind::Connections, slots.saturating_sub(1));
        self.counters.handoffs_sent += 1;
        self.offloaded_total += 1;
        self.by_req.insert(req, h);
        // The engine's silence counts only while it holds connections: the watch starts with
        // the first of them (an engine that had nothing to say before is not late).
        if self.links.is_empty() {
            self.last_heard_ns = self.last_heard_ns.max(now);
        }
        self.links.insert(
            h,
            Link {
                tuple,
                cid: None,
                pending: Some((req, kept, Vec::new())),
                activity: 0,
                restoring: None,
            },
        );
        Ok(req)
    }

    /// Asks the engine to give `h` back (`ch_nic_restore`); false when `h` is not offloaded
    /// (or its handoff is still unanswered: ask again after).
    pub fn restore(&mut self, h: SocketHandle) -> bool {
        let Some(l) = self.links.get_mut(&h) else {
            return false;
        };
        let Some(cid) = l.cid else {
            return false;
        };
        if l.restoring.is_some() {
            // Already asked back: the answer is on its way.
            return false;
        }
        let cmd = HostCmd::Restore { cid };
        if self.conv.host_cmd(&cmd).is_err() {
            // Released by the engine meanwhile (its answer crossed): nothing to do.
            return false;
        }
        l.restoring = Some(Vec::new());
        self.flush_staged();
        self.out.push_back(cmd);
        self.counters.restores_asked += 1;
        true
    }

    /// Asks every offloaded connection back: the route to the engine changed or its link
    /// went down (seed §3.3). Returns how many were asked.
    pub fn restore_all(&mut self) -> usize {
        let handles: Vec<SocketHandle> = self.links.keys().copied().collect();
        handles.into_iter().filter(|&h| self.restore(h)).count()
    }

    /// `ch_nic_post`: a receive buffer of `len_bytes` is available for `h` (zero-copy receive:
    /// from the first post on, the engine delivers only into posted room).
    pub fn post(&mut self, h: SocketHandle, len_bytes: u32) -> bool {
        let Some(cid) = self.links.get(&h).and_then(|l| l.cid) else {
            return false;
        };
        self.send(HostCmd::Post { cid, len_bytes });
        true
    }

    /// The engine failed without notice (a hardware check, or its heartbeat stopped): the
    /// offloaded connections' state is lost. Each ends with a counted reset for its
    /// application; the NIC's filters go; nothing else is touched. No more handoffs.
    pub fn engine_failed_now(&mut self, stack: &mut Stack) {
        if self.engine_failed {
            return;
        }
        self.engine_failed = true;
        self.counters.engine_failures += 1;
        let links = core::mem::take(&mut self.links);
        for (h, l) in links {
            self.steer.push_back(Steer::Remove(l.tuple));
            self.counters.connections_lost += 1;
            let _ = stack.bypass_error(h, SocketError::Reset, true);
        }
        self.by_cid.clear();
        self.by_req.clear();
        self.out.clear();
        self.staged = None;
    }

    /// Turns the stack's bypass operations into commands, watches the heartbeat, runs the
    /// policy. Call after each shard iteration.
    pub fn poll(&mut self, now: u64, stack: &mut Stack) {
        while let Some((h, op)) = stack.poll_bypass() {
            let Some(l) = self.links.get_mut(&h) else {
                self.counters.ops_orphaned += 1;
                continue;
            };
            l.activity += match &op {
                BypassOp::Send { data, .. } => data.len() as u64,
                BypassOp::Recvd { len_bytes } => u64::from(*len_bytes),
                _ => 1,
            };
            match (&mut l.pending, l.cid, &mut l.restoring) {
                (Some((_, _, ops)), _, _) => ops.push(op),
                (None, Some(_), Some(held)) => match op {
                    BypassOp::Forward { packet } if held.len() < FRAMES_HELD_MAX => {
                        self.counters.frames_held_restoring += 1;
                        held.push(packet);
                    }
                    BypassOp::Forward { .. } => self.counters.frames_dropped_restoring += 1,
                    // Reconciled by the restore from the bypass socket's own state.
                    _ => self.counters.ops_reconciled_at_restore += 1,
                },
                (None, Some(cid), None) => self.send_op(cid, op),
                (None, None, _) => self.counters.ops_orphaned += 1,
            }
        }
        self.flush_staged();
        if !self.links.is_empty()
            && !self.engine_failed
            && now.saturating_sub(self.last_heard_ns) > self.cfg.engine_timeout_ns
        {
            self.engine_failed_now(stack);
        }
        if now >= self.next_policy_ns {
            self.next_policy_ns = now.saturating_add(self.cfg.policy_period_ns);
            self.run_policy(now, stack);
        }
    }

    /// One bypass operation as commands.
    fn send_op(&mut self, cid: Cid, op: BypassOp) {
        match op {
            BypassOp::Send { data, more } => self.stage_send(cid, data, more),
            BypassOp::Recvd { len_bytes } => self.send(HostCmd::Recvd { cid, len_bytes }),
            BypassOp::Shutdown => self.send(HostCmd::Ctrl {
                cid,
                cmd: HostCtrl::ShutdownWrite,
            }),
            BypassOp::Close => self.send(HostCmd::Ctrl {
                cid,
                cmd: HostCtrl::Close,
            }),
            BypassOp::Abort => self.send(HostCmd::Ctrl {
                cid,
                cmd: HostCtrl::Abort,
            }),
            BypassOp::Option(o) => {
                let cmd = match o {
                    SocketOption::NoDelay(v) => HostCtrl::Nodelay(v),
                    SocketOption::Cork(v) => HostCtrl::Cork(v),
                    SocketOption::SendBufferBytes(v) => HostCtrl::SendBufferBytes(v),
                    SocketOption::KeepaliveIdleNs(v) => {
                        HostCtrl::Keepalive(v.map(|idle_ns| tcp::KeepaliveConfig {
                            idle_ns,
                            ..tcp::KeepaliveConfig::default()
                        }))
                    }
                    _ => return,
                };
                self.send(HostCmd::Ctrl { cid, cmd });
            }
            BypassOp::Forward { packet } => {
                self.counters.frames_forwarded += 1;
                self.send(HostCmd::Forward { cid, packet });
            }
        }
    }

    /// A command from the engine.
    pub fn handle_engine_cmd(&mut self, now: u64, stack: &mut Stack, cmd: EngineCmd) {
        if self.engine_failed {
            return;
        }
        self.last_heard_ns = now;
        if self.conv.engine_cmd(&cmd).is_err() {
            self.counters.engine_cmds_refused += 1;
            return;
        }
        match cmd {
            EngineCmd::HandoffAccepted { req, cid } => {
                let Some(h) = self.by_req.remove(&req) else {
                    self.counters.engine_cmds_refused += 1;
                    return;
                };
                let Some(l) = self.links.get_mut(&h) else {
                    return;
                };
                l.cid = Some(cid);
                let ops = l.pending.take().map(|(_, _, ops)| ops).unwrap_or_default();
                let tuple = l.tuple;
                self.by_cid.insert(cid, h);
                self.counters.handoffs_accepted += 1;
                self.steer.push_back(Steer::Install(tuple));
                for op in ops {
                    self.send_op(cid, op);
                }
                self.flush_staged();
            }
            EngineCmd::HandoffRefused { req, .. } => {
                self.counters.handoffs_refused += 1;
                self.offloaded_total = self.offloaded_total.saturating_sub(1);
                let Some(h) = self.by_req.remove(&req) else {
                    return;
                };
                let Some(l) = self.links.remove(&h) else {
                    return;
                };
                if let Some((_, kept, ops)) = l.pending {
                    let mut snapshot = *kept.snapshot;
                    let refilled = stack.bypass_refill_snapshot(
                        h,
                        &mut snapshot,
                        kept.send_unacked_bytes,
                        kept.send_unsent_bytes,
                    );
                    if refilled.is_ok() {
                        self.take_back(now, stack, h, snapshot);
                    } else {
                        // The bypass socket no longer holds the bytes the export had (it
                        // cannot happen before an acceptance): the state is lost, as when a
                        // restore does not fit.
                        self.counters.restore_failed += 1;
                        let _ = stack.bypass_error(h, SocketError::Reset, true);
                    }
                    // Frames that waited are the host's to process, oldest first; the
                    // socket's other operations were reconciled by the restore.
                    for op in ops {
                        if let BypassOp::Forward { packet } = op {
                            self.counters.frames_reprocessed += 1;
                            reinject(now, stack, &packet);
                        }
                    }
                }
            }
            EngineCmd::Recv { cid, data, .. } => {
                self.counters.cmds_recv_in += 1;
                if let Some(h) = self.handle_of(cid) {
                    let _ = stack.bypass_recv(h, &data);
                }
            }
            EngineCmd::Ack { cid, len_bytes } => {
                self.counters.cmds_ack_in += 1;
                if let Some(h) = self.handle_of(cid) {
                    let _ = stack.bypass_ack(h, len_bytes);
                }
            }
            EngineCmd::Ctrl { cid, cmd } => {
                self.counters.cmds_ctrl_in += 1;
                let Some(h) = self.handle_of(cid) else {
                    return;
                };
                let _ = match cmd {
                    EngineCtrl::PeerFin => stack.bypass_peer_fin(h),
                    EngineCtrl::Reset => stack.bypass_error(h, SocketError::Reset, false),
                    EngineCtrl::TimedOut => stack.bypass_error(h, SocketError::TimedOut, false),
                    EngineCtrl::Deallocated => {
                        self.counters.deallocated += 1;
                        // The connection ended on the engine: frames held for its restore
                        // belong to nothing now (the host answers the tuple as unknown).
                        let held = self.forget(cid);
                        self.counters.frames_dropped_restoring += held.len() as u64;
                        stack.bypass_deallocated(h)
                    }
                };
            }
            EngineCmd::Resource { kind, count } => {
                self.counters.cmds_resource_in += 1;
                // Handoffs sent since the engine counted are not in its count yet.
                let in_flight = self.by_req.len() as u64;
                let count = if kind == ResourceKind::Connections {
                    count.saturating_sub(in_flight)
                } else {
                    count
                };
                self.advertised.insert(kind, count);
            }
            EngineCmd::Restore {
                cid,
                snapshot,
                cause,
            } => {
                *match cause {
                    RestoreCause::TimeWait => &mut self.counters.restored_time_wait,
                    RestoreCause::Requested => &mut self.counters.restored_requested,
                    RestoreCause::ResourceExhaustion => &mut self.counters.restored_exhaustion,
                    RestoreCause::Closing | RestoreCause::EngineShutdown => {
                        &mut self.counters.restored_other
                    }
                } += 1;
                let Some(h) = self.handle_of(cid) else {
                    return;
                };
                let held = self.forget(cid);
                self.take_back(now, stack, h, *snapshot);
                // Frames that reached the host while the restore was on its way are the
                // host's to process now, oldest first.
                for packet in held {
                    self.counters.frames_reprocessed += 1;
                    reinject(now, stack, &packet);
                }
            }
        }
    }

    fn handle_of(&mut self, cid: Cid) -> Option<SocketHandle> {
        let h = self.by_cid.get(&cid).copied();
        if h.is_none() {
            self.counters.engine_cmds_refused += 1;
        }
        h
    }

    /// The connection left the engine: its filter goes first, so the host sees its frames.
    /// Returns the frames held since the host asked it back (module documentation of
    /// `Link::restoring`).
    fn forget(&mut self, cid: Cid) -> Vec<Vec<u8>> {
        if let Some(h) = self.by_cid.remove(&cid) {
            if let Some(l) = self.links.remove(&h) {
                self.steer.push_back(Steer::Remove(l.tuple));
                return l.restoring.unwrap_or_default();
            }
        }
        Vec::new()
    }

    /// Brings a connection back into its slot; a snapshot the stack refuses ends it with a
    /// counted reset (its state is lost).
    fn take_back(
        &mut self,
        now: u64,
        stack: &mut Stack,
        h: SocketHandle,
        s: tcp::ConnectionSnapshot,
    ) {
        if stack.tcp_restore(now, h, s).is_err() {
            self.counters.restore_failed += 1;
            let _ = stack.bypass_error(h, SocketError::Reset, true);
        }
    }

    /// The next command for the engine.
    pub fn poll_cmd(&mut self) -> Option<HostCmd> {
        self.out.pop_front()
    }

    /// The next steering change for the NIC.
    pub fn poll_steer(&mut self) -> Option<Steer> {
        self.steer.pop_front()
    }

    /// When [`HostOffload::poll`] must run again: the heartbeat deadline and the policy.
    pub fn poll_timeout(&self) -> Option<u64> {
        let watch = (!self.links.is_empty() && !self.engine_failed).then(|| {
            self.last_heard_ns
                .saturating_add(self.cfg.engine_timeout_ns + 1)
        });
        let policy = (self.cfg.policy != Policy::Off).then_some(self.next_policy_ns);
        [watch, policy].into_iter().flatten().min()
    }

    /// The policy's pass (see [`Policy`]); every decision is counted.
    fn run_policy(&mut self, now: u64, stack: &mut Stack) {
        if self.cfg.policy == Policy::Off || self.engine_failed {
            return;
        }
        // Candidates: established connections the application owns, not offloaded, in
        // tuple order (deterministic).
        let mut tuples = Vec::new();
        stack.tcp_live_tuples(&mut tuples);
        tuples.sort();
        let mut candidates = Vec::new();
        for t in tuples {
            if let Some(MoveClass::Owned {
                handle,
                synchronized: true,
            }) = stack.tcp_move_class(t)
            {
                if stack.tcp_state(handle) == Some(tcp::State::Established) {
                    candidates.push(handle);
                }
            }
        }
        let view = crate::policy::View {
            candidates: candidates.len(),
            offloaded_total: self.offloaded_total,
            offloaded_now: self.links.len(),
            connections_left: self.advertised(ResourceKind::Connections),
            buffer_bytes_left: self.advertised(ResourceKind::BufferBytes),
            limits: self.cfg.limits,
        };
        let plan = self.cfg.policy.plan(&mut self.policy_counters, view);
        for &h in candidates.iter().take(plan.offload) {
            match self.offload(now, stack, h) {
                Ok(_) => self.policy_counters.offloaded += 1,
                Err(_) => self.policy_counters.offload_failed += 1,
            }
        }
        if plan.restore > 0 {
            // The least active first.
            let mut by_activity: Vec<(u64, SocketHandle)> = self
                .links
                .iter()
                .filter(|(_, l)| l.cid.is_some())
                .map(|(&h, l)| (l.activity, h))
                .collect();
            by_activity.sort();
            for (_, h) in by_activity.into_iter().take(plan.restore) {
                if self.restore(h) {
                    self.policy_counters.restored += 1;
                }
            }
        }
        for l in self.links.values_mut() {
            l.activity = 0;
        }
    }
}

/// A frame the host takes back (its handoff was refused) goes through the stack's input.
fn reinject(now: u64, stack: &mut Stack, packet: &[u8]) {
    let mac = stack.config().interface.mac.0;
    let ethertype: u16 = if packet.first().is_some_and(|b| b >> 4 == 6) {
        0x86dd
    } else {
        0x0800
    };
    let mut f = Vec::with_capacity(14 + packet.len());
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x0f, 0x0f]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(packet);
    stack.receive(now, &f, &RxMeta::NONE);
}
