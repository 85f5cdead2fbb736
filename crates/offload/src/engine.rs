//! The offload engine: a sans-IO component that runs TCP for the connections a host hands to
//! it, with finite resources (seed 002 §3.2–3.3; DESIGN "Handoff engine").
//!
//! It owns a [`stack::Stack`] for the host's address, into which handed-off snapshots are
//! imported: the real `tcp` engine, not a second TCP. Driver order at each activation, always
//! with a non-decreasing `now`:
//!
//! 1. inputs: [`Engine::handle_host_cmd`] for each command from the host, in order;
//!    [`Engine::handle_frame`] for each frame the NIC steered to the engine's queue;
//! 2. [`Engine::handle_timeout`]: due TCP timers, the budget period, then the per-connection
//!    service below — once per activation, after all its inputs (inputs only mark what they
//!    touched; [`Engine::poll_timeout`] says "now" while something waits for the service);
//! 3. outputs: [`Engine::poll_cmd`] (commands for the host) and [`Engine::poll_transmit`]
//!    (frames for the wire) until `None`; [`Engine::poll_timeout`] for when to come back.
//!
//! The service visits only the connections something touched since the last one — a frame
//! for the connection, a host command about it, a socket event of its TCP (timers: time-out,
//! reset, close) — plus the few whose return to the host waits for output to drain: its cost
//! per frame does not grow with the connections the engine holds. Everything one activation
//! brought a connection is reported in one pass (one `Recv` for all the bytes that arrived,
//! one `Ack` for all the bytes acknowledged).
//!
//! Per connection the service, in this order, keeps the host's socket in step:
//! writes that did not fit go into the connection; received in-order bytes the host has not
//! been given go out as `Recv` (they stay in the connection, counted against its window,
//! until the host's `Recvd`: seed §3.2); bytes that left the send queue are `Ack`ed; the
//! peer's FIN (after all its data) is `Ctrl(PeerFin)`; a reset or time-out is reported; a
//! connection entering TIME_WAIT, one the host asked back, and — when buffer memory runs
//! short — the one holding the most bytes go back with `Restore` (after every `Recv` and
//! `Ack` before it, so the host can reconcile); a finished one is `Ctrl(Deallocated)`.
//!
//! Resources (configured by [`Limits`]): connection slots, buffer memory in bytes (what
//! the engine's connections hold: received and queued bytes, kept per connection as of its
//! last service and summed), and a processing budget in frames per
//! [`EngineConfig::budget_period_ns`] (frames beyond it wait, bounded, for the next period;
//! overflow is dropped, counted, and left to retransmission). A handoff beyond what is left
//! is answered `HandoffRefused`.
//!
//! Advertisements (`Resource`), at most one per kind per activation, only when they matter:
//!
//! - connection slots: whenever the count changed (it changes only by handoffs, restores and
//!   deallocations, never per packet). The host counts its own handoffs against the last
//!   advertisement, so it never hands off more than the engine has (flow control, seed §3.3);
//! - buffer memory: the advertised count is what is free less a slack of 1/64 of the maximum
//!   ([`BUFFER_SLACK_FRACTION`]), sent again only when what is free fell below the last
//!   advertisement (which would otherwise overstate it) or rose more than two slacks above
//!   it. So an
//!   advertisement is never more than what was free when it was sent, and between two the
//!   true figure stays within two slacks above it — data moving through the connections does
//!   not send one per packet;
//! - the processing budget changes with every frame: only the heartbeat carries it.
//!
//! Every [`EngineConfig::advertise_period_ns`] all three go out as the heartbeat, which the
//! host watches to detect a failed engine.
//!
//! Every command the engine sends or receives passes its [`Conversation`] checker; a refused
//! host command is counted and ignored. Bad input never panics.

use std::collections::{BTreeMap, HashMap, VecDeque};

use core::net::{IpAddr, SocketAddr};

use shard::handoff::{
    Cid, Conversation, EngineCmd, EngineCtrl, HostCmd, HostCtrl, Limits, PAYLOAD_BYTES_MAX,
    RecvFlags, RefuseReason, ResourceKind, RestoreCause, SendFlags, Side,
};
use stack::{FourTuple, MoveClass, RxMeta, SocketHandle, SocketOption, Stack, StackConfig};
use tcp::{CloseReason, State};

/// How an [`Engine`] is built.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Resource maxima (connections default 8,192, as the seed's simulated NIC).
    pub limits: Limits,
    /// The processing budget's period; `limits.budget_packets_max` frames per period.
    pub budget_period_ns: u64,
    /// Longest time between two advertisements (the heartbeat).
    pub advertise_period_ns: u64,
    /// Frames waiting for the next budget period, at most.
    pub backlog_frames_max: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            budget_period_ns: 1_000_000,
            advertise_period_ns: 10_000_000,
            backlog_frames_max: 4096,
        }
    }
}

/// What the engine counted. Values only increase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    pub handoffs_accepted: u64,
    /// Handoffs refused, by reason.
    pub refused_no_connections: u64,
    pub refused_no_buffer: u64,
    pub refused_busy: u64,
    pub refused_bad_snapshot: u64,
    /// Restores sent, by cause.
    pub restores_time_wait: u64,
    pub restores_requested: u64,
    pub restores_exhaustion: u64,
    pub deallocated: u64,
    /// Host commands the checker refused (the conversation's counters say why) and ignored.
    pub host_cmds_refused: u64,
    /// Engine commands the checker refused (a bug: never sent).
    pub engine_cmds_refused: u64,
    pub frames_in: u64,
    pub frames_forwarded_in: u64,
    /// Frames for no connection of the engine: dropped, never answered.
    pub frames_unknown: u64,
    /// Non-TCP, non-ARP or unparsable frames dropped.
    pub frames_not_tcp: u64,
    /// Frames that waited for the next budget period, and frames dropped because the backlog
    /// was full.
    pub frames_deferred: u64,
    pub frames_over_budget_dropped: u64,
    /// `Post`ed receive buffers, in bytes.
    pub posted_bytes: u64,
    pub recv_bytes: u64,
    pub acked_bytes: u64,
    pub sent_bytes: u64,
    pub advertisements: u64,
    /// Per-connection services (a connection visited by a service pass): with the work per
    /// frame independent of the connections held, this grows with the frames and commands,
    /// not with frames × connections.
    pub conn_services: u64,
}

/// One offloaded connection.
#[derive(Debug)]
struct EConn {
    handle: SocketHandle,
    tuple: FourTuple,
    /// Bytes at the head of the receive queue given to the host (`Recv`) and not `Recvd`.
    delivered: usize,
    /// Bytes handed to the connection's send queue since the handoff (snapshot's included).
    queued_total: u64,
    /// Bytes acknowledged to the host.
    acked_total: u64,
    /// Writes that did not fit in the send queue yet.
    pending_send: VecDeque<u8>,
    /// Zero-copy receive (`Post`): once a buffer was posted, data waits on the engine until
    /// the host posts room for it. `None`: copy mode, deliver at once.
    posted_room_bytes: Option<u64>,
    fin_reported: bool,
    error_reported: bool,
    /// The host asked it back (`Restore`).
    restore_requested: bool,
    /// The host closed it / shut its sending side down: a FIN follows the pending writes.
    host_closed: bool,
    shutdown_wanted: bool,
    /// Sent back because buffer memory ran short (`Restore` with `ResourceExhaustion`).
    exhausted: bool,
    /// Waiting in [`Engine::dirty`] for the service.
    dirty: bool,
    /// Bytes it held at its last service (received, queued, pending writes): its share of
    /// [`Engine::held_bytes_total`].
    held_bytes: u64,
}

/// The advertised buffer memory is what is free less `buffer_bytes_max / BUFFER_SLACK_FRACTION`
/// (module documentation).
pub const BUFFER_SLACK_FRACTION: u64 = 64;

/// How long a connection whose return waits for its output to drain waits before the service
/// tries again, when nothing else brings the engine back sooner.
const RETRY_NS: u64 = 100_000;

/// Connections one service pass sends back for lack of buffer memory, at most.
const EXHAUSTION_RESTORES_MAX: usize = 16;

/// The offload engine (module documentation).
pub struct Engine {
    cfg: EngineConfig,
    stack: Stack,
    conv: Conversation,
    conns: BTreeMap<Cid, EConn>,
    /// The connection of each stack handle the engine runs.
    by_handle: HashMap<SocketHandle, Cid>,
    /// Connections touched since the last service, in the order they were touched (each once:
    /// [`EConn::dirty`]). At most one entry per connection.
    dirty: Vec<Cid>,
    /// Connections whose return to the host waits (output to drain, bytes to deliver first):
    /// serviced again at every pass. At most one entry per connection.
    retry: Vec<Cid>,
    /// The connection sent back for lack of buffer memory and not gone yet: one at a time.
    exhausting: Option<Cid>,
    /// Sum of the connections' `held_bytes`.
    held_bytes_total: u64,
    /// The `now` of the last input or service.
    last_now_ns: u64,
    next_cid: u32,
    out: VecDeque<EngineCmd>,
    backlog: VecDeque<Vec<u8>>,
    period_start_ns: u64,
    budget_used_packets: u64,
    /// The last advertisement of each kind, and when one was last sent.
    advertised: [Option<u64>; 3],
    last_advertised_ns: Option<u64>,
    counters: EngineCounters,
    scratch: Vec<u8>,
}

impl core::fmt::Debug for Engine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("connections", &self.conns.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

const KINDS: [ResourceKind; 3] = [
    ResourceKind::Connections,
    ResourceKind::BufferBytes,
    ResourceKind::BudgetPackets,
];

impl Engine {
    /// An engine for the host whose interface `stack` describes (its address and MAC: the
    /// engine sends as the host). Its stack has no RSS home: it only runs what it is given.
    pub fn new(cfg: EngineConfig, mut stack: StackConfig) -> Engine {
        stack.rss = None;
        stack.secret[0] ^= 0x0ff1_0ad0_0000_0000;
        Engine {
            cfg,
            stack: Stack::new(stack),
            conv: Conversation::new(Side::Engine, cfg.limits),
            conns: BTreeMap::new(),
            by_handle: HashMap::new(),
            dirty: Vec::new(),
            retry: Vec::new(),
            exhausting: None,
            held_bytes_total: 0,
            last_now_ns: 0,
            next_cid: 1,
            out: VecDeque::new(),
            backlog: VecDeque::new(),
            period_start_ns: 0,
            budget_used_packets: 0,
            advertised: [None; 3],
            last_advertised_ns: None,
            counters: EngineCounters::default(),
            scratch: vec![0; PAYLOAD_BYTES_MAX],
        }
    }

    pub fn counters(&self) -> &EngineCounters {
        &self.counters
    }

    /// The engine side's conversation checker (its counters say why commands were refused).
    pub fn conversation(&self) -> &Conversation {
        &self.conv
    }

    /// The engine's stack (its TCP counters, live tuples).
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// Connections the engine runs now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The 4-tuples the engine runs now, appended to `out` (by cid).
    pub fn tuples(&self, out: &mut Vec<FourTuple>) {
        out.extend(self.conns.values().map(|c| c.tuple));
    }

    /// Buffer memory in use: the bytes the connections held at their last service.
    pub fn buffer_bytes_used(&self) -> u64 {
        self.held_bytes_total
    }

    /// Marks a connection for the next service.
    fn touch(&mut self, cid: Cid) {
        if let Some(c) = self.conns.get_mut(&cid) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(cid);
            }
        }
    }

    /// Removes a connection and its bookkeeping; returns it.
    fn remove_conn(&mut self, cid: Cid) -> Option<EConn> {
        let c = self.conns.remove(&cid)?;
        self.by_handle.remove(&c.handle);
        self.held_bytes_total = self.held_bytes_total.saturating_sub(c.held_bytes);
        if self.exhausting == Some(cid) {
            self.exhausting = None;
        }
        Some(c)
    }

    fn left(&self, kind: ResourceKind) -> u64 {
        let l = &self.cfg.limits;
        match kind {
            ResourceKind::Connections => {
                u64::from(l.connections_max).saturating_sub(self.conns.len() as u64)
            }
            ResourceKind::BufferBytes => {
                l.buffer_bytes_max.saturating_sub(self.buffer_bytes_used())
            }
            ResourceKind::BudgetPackets => l
                .budget_packets_max
                .saturating_sub(self.budget_used_packets),
        }
    }

    /// Sends a command through the checker (a refusal is a bug of the engine: counted, not
    /// sent).
    fn send(&mut self, cmd: EngineCmd) {
        if self.conv.engine_cmd(&cmd).is_ok() {
            self.out.push_back(cmd);
        } else {
            self.counters.engine_cmds_refused += 1;
        }
    }

    /// A command from the host. Its effects on the connection reach the host at the next
    /// [`Engine::handle_timeout`].
    pub fn handle_host_cmd(&mut self, now: u64, cmd: HostCmd) {
        self.last_now_ns = self.last_now_ns.max(now);
        if let Some(cid) = cmd.cid() {
            self.touch(cid);
        }
        if self.conv.host_cmd(&cmd).is_err() {
            self.counters.host_cmds_refused += 1;
            return;
        }
        match cmd {
            HostCmd::Handoff {
                req,
                tuple,
                snapshot,
            } => {
                let bytes = (snapshot.send_unacked.len()
                    + snapshot.send_unsent.len()
                    + snapshot.recv_unread.len()) as u64;
                let reason = if self.left(ResourceKind::Connections) == 0 {
                    Some(RefuseReason::NoConnections)
                } else if self.left(ResourceKind::BufferBytes) < bytes {
                    Some(RefuseReason::NoBufferMemory)
                } else if self.left(ResourceKind::BudgetPackets) == 0 {
                    Some(RefuseReason::Busy)
                } else {
                    None
                };
                let delivered = snapshot.recv_unread.len();
                let (fin_received, app_closed) =
                    (snapshot.app.fin_received, snapshot.app.app_closed);
                let queued_total =
                    (snapshot.send_unacked.len() + snapshot.send_unsent.len()) as u64;
                let reason = match reason {
                    Some(r) => Err(r),
                    None => self
                        .stack
                        .tcp_import_owned(now, tuple, *snapshot)
                        .map_err(|_| RefuseReason::BadSnapshot),
                };
                match reason {
                    Ok(handle) => {
                        let cid = Cid(self.next_cid);
                        self.next_cid = self.next_cid.wrapping_add(1).max(1);
                        self.by_handle.insert(handle, cid);
                        self.held_bytes_total = self.held_bytes_total.saturating_add(bytes);
                        self.conns.insert(
                            cid,
                            EConn {
                                handle,
                                tuple,
                                delivered,
                                queued_total,
                                acked_total: 0,
                                pending_send: VecDeque::new(),
                                posted_room_bytes: None,
                                fin_reported: fin_received,
                                error_reported: false,
                                restore_requested: false,
                                host_closed: app_closed,
                                shutdown_wanted: false,
                                exhausted: false,
                                dirty: false,
                                held_bytes: bytes,
                            },
                        );
                        self.counters.handoffs_accepted += 1;
                        self.send(EngineCmd::HandoffAccepted { req, cid });
                        self.touch(cid);
                    }
                    Err(reason) => {
                        *match reason {
                            RefuseReason::NoConnections => {
                                &mut self.counters.refused_no_connections
                            }
                            RefuseReason::NoBufferMemory => &mut self.counters.refused_no_buffer,
                            RefuseReason::Busy | RefuseReason::ShuttingDown => {
                                &mut self.counters.refused_busy
                            }
                            RefuseReason::BadSnapshot => &mut self.counters.refused_bad_snapshot,
                        } += 1;
                        self.send(EngineCmd::HandoffRefused { req, reason });
                    }
                }
            }
            HostCmd::Restore { cid } => {
                if let Some(c) = self.conns.get_mut(&cid) {
                    c.restore_requested = true;
                }
            }
            HostCmd::Send { cid, data, flags } => {
                let Some(c) = self.conns.get_mut(&cid) else {
                    return;
                };
                c.pending_send.extend(&data);
                let more = flags.contains(SendFlags::MORE);
                Self::push_sends(&mut self.stack, c, more, &mut self.counters);
            }
            HostCmd::Recvd { cid, len_bytes } => {
                let Some(c) = self.conns.get_mut(&cid) else {
                    return;
                };
                let n = (len_bytes as usize).min(c.delivered);
                let mut left = n;
                while left > 0 {
                    let k = left.min(self.scratch.len());
                    match self.stack.tcp_recv(c.handle, &mut self.scratch[..k]) {
                        Ok(got) if got > 0 => left -= got,
                        _ => break,
                    }
                }
                c.delivered -= n - left;
            }
            HostCmd::Ctrl { cid, cmd } => self.ctrl(now, cid, cmd),
            HostCmd::Forward { cid, packet } => {
                if self.conns.contains_key(&cid) {
                    self.counters.frames_forwarded_in += 1;
                    let frame = self.frame_of(&packet);
                    self.input(now, &frame);
                }
            }
            HostCmd::Post { cid, len_bytes } => {
                if let Some(c) = self.conns.get_mut(&cid) {
                    let room = c.posted_room_bytes.get_or_insert(0);
                    *room = room.saturating_add(u64::from(len_bytes));
                    self.counters.posted_bytes += u64::from(len_bytes);
                }
            }
        }
    }

    fn ctrl(&mut self, now: u64, cid: Cid, cmd: HostCtrl) {
        let Some(c) = self.conns.get_mut(&cid) else {
            return;
        };
        let h = c.handle;
        let r = match cmd {
            HostCtrl::Close => {
                c.host_closed = true;
                // As `close()` on the host: unread data makes it an abort (RFC 2525 §2.17).
                let unread = self
                    .stack
                    .tcp_conn_status(h)
                    .is_some_and(|s| s.recv_queue_bytes > 0);
                if unread {
                    self.stack.tcp_abort(h)
                } else if c.pending_send.is_empty() {
                    self.stack.tcp_shutdown(h)
                } else {
                    Ok(())
                }
            }
            HostCtrl::ShutdownWrite => {
                c.shutdown_wanted = true;
                if c.pending_send.is_empty() {
                    self.stack.tcp_shutdown(h)
                } else {
                    // The FIN follows the pending writes (`service_one`).
                    Ok(())
                }
            }
            HostCtrl::Abort => self.stack.tcp_abort(h),
            HostCtrl::Nodelay(v) => self.stack.set_option(h, SocketOption::NoDelay(v)),
            HostCtrl::Cork(v) => self.stack.set_option(h, SocketOption::Cork(v)),
            HostCtrl::SendBufferBytes(v) => {
                self.stack.set_option(h, SocketOption::SendBufferBytes(v))
            }
            HostCtrl::Keepalive(k) => self.stack.tcp_set_keepalive(now, h, k),
            // The stack's receive buffer is fixed by its configuration (no `SO_RCVBUF`).
            HostCtrl::RecvBufferBytes(_) => Ok(()),
        };
        let _ = r;
    }

    /// Moves pending writes into the connection's send queue as room allows.
    fn push_sends(stack: &mut Stack, c: &mut EConn, more: bool, counters: &mut EngineCounters) {
        while !c.pending_send.is_empty() {
            let (a, _) = c.pending_send.as_slices();
            let r = if more {
                stack.tcp_send_more(c.handle, a)
            } else {
                stack.tcp_send(c.handle, a)
            };
            match r {
                Ok(n) if n > 0 => {
                    c.pending_send.drain(..n);
                    c.queued_total += n as u64;
                    counters.sent_bytes += n as u64;
                }
                _ => break,
            }
        }
    }

    /// An Ethernet frame around an IP packet forwarded by the host, addressed to the engine.
    fn frame_of(&self, packet: &[u8]) -> Vec<u8> {
        let mac = self.stack.config().interface.mac.0;
        let ethertype: u16 = if packet.first().is_some_and(|b| b >> 4 == 6) {
            0x86dd
        } else {
            0x0800
        };
        let mut f = Vec::with_capacity(14 + packet.len());
        f.extend_from_slice(&mac);
        // A locally administered source: the host's forwarding path.
        f.extend_from_slice(&[0x02, 0, 0, 0, 0x0f, 0x0f]);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(packet);
        f
    }

    /// A frame the NIC steered to the engine's queue. What it changes reaches the host at the
    /// next [`Engine::handle_timeout`].
    pub fn handle_frame(&mut self, now: u64, frame: &[u8]) {
        self.counters.frames_in += 1;
        self.last_now_ns = self.last_now_ns.max(now);
        self.input(now, frame);
    }

    /// A frame to process within the budget, after any that wait.
    fn input(&mut self, now: u64, frame: &[u8]) {
        self.roll_period(now);
        if !self.backlog.is_empty()
            || self.budget_used_packets >= self.cfg.limits.budget_packets_max
        {
            if self.backlog.len() >= self.cfg.backlog_frames_max {
                self.counters.frames_over_budget_dropped += 1;
            } else {
                self.counters.frames_deferred += 1;
                self.backlog.push_back(frame.to_vec());
            }
            return;
        }
        self.process(now, frame);
    }

    fn process(&mut self, now: u64, frame: &[u8]) {
        self.budget_used_packets += 1;
        // ARP (the engine's neighbour cache) goes to the stack; TCP only for a connection the
        // engine has (or a marker of one it returned): never answered otherwise.
        if frame.get(12..14) == Some(&[0x08, 0x06]) {
            self.stack.receive(now, frame, &RxMeta::NONE);
            return;
        }
        let tuple = match rss::FlowFields::from_frame(frame) {
            Ok(Some(f)) if f.protocol == 6 && f.ports.is_some() => {
                let (src, dst): (IpAddr, IpAddr) = match f.addrs {
                    rss::IpPair::V4(s, d) => (s.into(), d.into()),
                    rss::IpPair::V6(s, d) => (s.into(), d.into()),
                };
                let p = f.ports.unwrap_or(rss::PortPair { src: 0, dst: 0 });
                FourTuple {
                    local: SocketAddr::new(dst, p.dst),
                    remote: SocketAddr::new(src, p.src),
                }
            }
            _ => {
                self.counters.frames_not_tcp += 1;
                return;
            }
        };
        let owner = match self.stack.tcp_move_class(tuple) {
            None => {
                self.counters.frames_unknown += 1;
                return;
            }
            Some(MoveClass::Owned { handle, .. }) => self.by_handle.get(&handle).copied(),
            Some(_) => None,
        };
        self.stack.receive(now, frame, &RxMeta::NONE);
        if let Some(cid) = owner {
            self.touch(cid);
        }
    }

    fn roll_period(&mut self, now: u64) {
        if now.saturating_sub(self.period_start_ns) >= self.cfg.budget_period_ns {
            self.period_start_ns = now;
            self.budget_used_packets = 0;
        }
    }

    /// Timers, the budget period (frames that waited go first), the connections' service and
    /// the advertisement.
    pub fn handle_timeout(&mut self, now: u64) {
        self.last_now_ns = self.last_now_ns.max(now);
        self.roll_period(now);
        while self.budget_used_packets < self.cfg.limits.budget_packets_max {
            let Some(f) = self.backlog.pop_front() else {
                break;
            };
            self.process(now, &f);
        }
        self.stack.handle_timeout(now);
        self.service(now);
    }

    /// The per-connection service (module documentation) of the connections touched since
    /// the last pass and of those whose return waits, then buffer memory, then the
    /// advertisements.
    fn service(&mut self, now: u64) {
        // Socket events name the connections their TCP changed by itself (timers).
        while let Some(e) = self.stack.poll_event() {
            if let Some(&cid) = self.by_handle.get(&e.handle) {
                self.touch(cid);
            }
        }
        let mut retry = core::mem::take(&mut self.retry);
        for cid in retry.drain(..) {
            self.touch(cid);
        }
        self.retry = retry;
        let mut dirty = core::mem::take(&mut self.dirty);
        for &cid in &dirty {
            if let Some(c) = self.conns.get_mut(&cid) {
                c.dirty = false;
            }
        }
        for &cid in &dirty {
            self.service_one(now, cid);
        }
        dirty.clear();
        // Reuse the list's storage (nothing touches connections during the pass).
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
        // Buffer memory short: the connection holding the most goes back to the host, one at
        // a time (the next once it has gone; the scan over all connections happens only
        // while memory is short, and a pass sends at most `EXHAUSTION_RESTORES_MAX`).
        for _ in 0..EXHAUSTION_RESTORES_MAX {
            if self.held_bytes_total <= self.cfg.limits.buffer_bytes_max
                || self.exhausting.is_some()
            {
                break;
            }
            let biggest = self
                .conns
                .iter()
                .max_by_key(|(cid, c)| (c.held_bytes, core::cmp::Reverse(**cid)))
                .map(|(cid, _)| *cid);
            let Some(cid) = biggest else {
                break;
            };
            if let Some(c) = self.conns.get_mut(&cid) {
                c.exhausted = true;
            }
            self.exhausting = Some(cid);
            self.service_one(now, cid);
        }
        self.advertise(now);
    }

    fn service_one(&mut self, now: u64, cid: Cid) {
        let Some(c) = self.conns.get_mut(&cid) else {
            return;
        };
        self.counters.conn_services += 1;
        let h = c.handle;
        Self::push_sends(&mut self.stack, c, false, &mut self.counters);
        if c.pending_send.is_empty() && (c.host_closed || c.shutdown_wanted) {
            let closing = self
                .stack
                .tcp_conn_status(h)
                .is_some_and(|s| matches!(s.state, State::Established | State::CloseWait));
            if closing {
                let _ = self.stack.tcp_shutdown(h);
            }
        }
        let Some(s) = self.stack.tcp_conn_status(h) else {
            return;
        };
        let give_back = c.restore_requested || c.exhausted || s.state == State::TimeWait;
        // Deliver: everything before a restore; within posted room in zero-copy mode.
        let mut room = s.recv_queue_bytes.saturating_sub(c.delivered);
        if let Some(posted) = c.posted_room_bytes {
            if !give_back {
                room = room.min(usize::try_from(posted).unwrap_or(usize::MAX));
            }
        }
        while room > 0 {
            let k = room.min(self.scratch.len());
            let Some(n) = self
                .stack
                .tcp_peek_at(h, c.delivered, &mut self.scratch[..k])
            else {
                break;
            };
            if n == 0 {
                break;
            }
            c.delivered += n;
            room -= n;
            if let Some(p) = c.posted_room_bytes.as_mut() {
                *p = p.saturating_sub(n as u64);
            }
            self.counters.recv_bytes += n as u64;
            let cmd = EngineCmd::Recv {
                cid,
                data: self.scratch[..n].to_vec(),
                flags: RecvFlags::NONE,
            };
            if self.conv.engine_cmd(&cmd).is_ok() {
                self.out.push_back(cmd);
            } else {
                self.counters.engine_cmds_refused += 1;
            }
        }
        let acked = c
            .queued_total
            .saturating_sub(s.send_queue_bytes as u64)
            .max(c.acked_total);
        let delta = acked - c.acked_total;
        let all_delivered = c.delivered >= s.recv_queue_bytes;
        let fin = s.fin_received && all_delivered && !c.fin_reported;
        let error = match s.close_reason {
            Some(CloseReason::Reset) => Some(EngineCtrl::Reset),
            Some(CloseReason::TimedOut) => Some(EngineCtrl::TimedOut),
            _ => None,
        }
        .filter(|_| !c.error_reported);
        c.acked_total = acked;
        if fin {
            c.fin_reported = true;
        }
        if error.is_some() {
            c.error_reported = true;
        }
        // Its share of buffer memory, as of now.
        let held = (s.recv_queue_bytes + s.send_queue_bytes + c.pending_send.len()) as u64;
        let was = core::mem::replace(&mut c.held_bytes, held);
        self.held_bytes_total = self
            .held_bytes_total
            .saturating_sub(was)
            .saturating_add(held);
        let mut left = delta;
        while left > 0 {
            let n = left.min(u64::from(u32::MAX)) as u32;
            self.counters.acked_bytes += u64::from(n);
            self.send(EngineCmd::Ack { cid, len_bytes: n });
            left -= u64::from(n);
        }
        if fin {
            self.send(EngineCmd::Ctrl {
                cid,
                cmd: EngineCtrl::PeerFin,
            });
        }
        if let Some(cmd) = error {
            self.send(EngineCmd::Ctrl { cid, cmd });
        }
        if s.finished {
            self.remove_conn(cid);
            let _ = self.stack.close(now, h);
            self.counters.deallocated += 1;
            self.send(EngineCmd::Ctrl {
                cid,
                cmd: EngineCtrl::Deallocated,
            });
            return;
        }
        if give_back {
            let cause = if s.state == State::TimeWait {
                RestoreCause::TimeWait
            } else {
                RestoreCause::ResourceExhaustion
            };
            let gone = all_delivered && self.give_back(now, cid, cause);
            if !gone && !self.retry.contains(&cid) {
                // Tried again at every pass until it goes (bounded: one entry per connection).
                self.retry.push(cid);
            }
        }
    }

    /// Exports a connection and sends it home (`Restore`); false when its output cannot drain
    /// now (the caller retries). A connection the host asked back goes with cause `Requested`
    /// whatever made the engine return it.
    fn give_back(&mut self, now: u64, cid: Cid, cause: RestoreCause) -> bool {
        let Some(c) = self.conns.get(&cid) else {
            return true;
        };
        let cause = if c.restore_requested {
            RestoreCause::Requested
        } else {
            cause
        };
        let h = c.handle;
        // Everything received is with the host first (the snapshot must not hold news).
        if self
            .stack
            .tcp_conn_status(h)
            .is_some_and(|s| s.recv_queue_bytes > c.delivered)
        {
            return false;
        }
        let snapshot = match self.stack.tcp_export(now, h) {
            Ok((_, s)) => s,
            Err(_) => return false,
        };
        self.remove_conn(cid);
        self.retry.retain(|&r| r != cid);
        *match cause {
            RestoreCause::TimeWait | RestoreCause::Closing => &mut self.counters.restores_time_wait,
            RestoreCause::Requested => &mut self.counters.restores_requested,
            RestoreCause::ResourceExhaustion | RestoreCause::EngineShutdown => {
                &mut self.counters.restores_exhaustion
            }
        } += 1;
        self.send(EngineCmd::Restore {
            cid,
            snapshot: Box::new(snapshot),
            cause,
        });
        true
    }

    /// The buffer memory advertised for `free` bytes free: less the slack (module
    /// documentation).
    fn buffer_advertisement(&self, free: u64) -> u64 {
        free.saturating_sub(self.buffer_slack_bytes())
    }

    fn buffer_slack_bytes(&self) -> u64 {
        self.cfg.limits.buffer_bytes_max / BUFFER_SLACK_FRACTION
    }

    /// Sends `Resource` for each kind whose advertisement matters now (module documentation),
    /// or for all when the heartbeat is due. At most one per kind per call.
    fn advertise(&mut self, now: u64) {
        let due = self
            .last_advertised_ns
            .is_none_or(|t| now.saturating_sub(t) >= self.cfg.advertise_period_ns);
        let slack = self.buffer_slack_bytes();
        for (i, kind) in KINDS.into_iter().enumerate() {
            let left = self.left(kind);
            let (count, matters) = match kind {
                ResourceKind::Connections => (left, self.advertised[i] != Some(left)),
                ResourceKind::BufferBytes => {
                    let count = self.buffer_advertisement(left);
                    let matters = self.advertised[i].is_none_or(|last| {
                        left < last || left > last.saturating_add(slack.saturating_mul(2))
                    });
                    (count, matters)
                }
                ResourceKind::BudgetPackets => (left, false),
            };
            if due || matters {
                self.advertised[i] = Some(count);
                self.counters.advertisements += 1;
                self.send(EngineCmd::Resource { kind, count });
            }
        }
        if due {
            self.last_advertised_ns = Some(now);
        }
    }

    /// The next command for the host.
    pub fn poll_cmd(&mut self) -> Option<EngineCmd> {
        self.out.pop_front()
    }

    /// The next frame for the wire.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Vec<u8>> {
        self.stack.poll_transmit(now)
    }

    /// When to call [`Engine::handle_timeout`] next: now while touched connections wait for
    /// the service, the stack's timers, a retry of a return that waits, the heartbeat, and
    /// the next budget period while frames wait.
    pub fn poll_timeout(&self) -> Option<u64> {
        // Touched connections wait for the service: due now.
        let service = (!self.dirty.is_empty()).then_some(self.last_now_ns);
        let retry = (!self.retry.is_empty()).then(|| self.last_now_ns.saturating_add(RETRY_NS));
        // The heartbeat only matters while the host has connections here to watch.
        let heartbeat = self
            .last_advertised_ns
            .filter(|_| !self.conns.is_empty())
            .map(|t| t.saturating_add(self.cfg.advertise_period_ns));
        let period = (!self.backlog.is_empty()).then(|| {
            self.period_start_ns
                .saturating_add(self.cfg.budget_period_ns)
        });
        [self.stack.poll_timeout(), service, retry, heartbeat, period]
            .into_iter()
            .flatten()
            .min()
    }
}
