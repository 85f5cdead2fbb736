//! The offload engine on a core of its own (seed 002; issue 13 item 5): a software SmartNIC
//! beside the shards of a `mem` host, as TAS and FlexTOE put TCP fast paths on their own cores.
//!
//! Three parties, as in the simulator (`sim::net::ShardedHost::with_engine`):
//!
//! - **The wire** (the NIC) gives the engine a receive queue of its own — index `shards` of
//!   the host's wire port, with the same four rings as a shard — and keeps RSS over the shards
//!   only. It applies the exact-match filter changes ([`Steer`]) shard 0 sends on a bounded
//!   ring: `Install` steers an offloaded flow's frames to the engine's queue, `Remove` gives
//!   them back to RSS. ARP replies are copied to the engine as to every shard.
//! - **The engine thread** (`EngineThread`) drives a sans-IO [`offload::Engine`]: host
//!   commands from shard 0, frames from its queue, timers; its commands go back to shard 0,
//!   its frames to the wire.
//! - **Shard 0** runs the host's layer ([`offload::HostOffload`], in `ShardOffload`) over its
//!   stack: engine commands before the shard's iteration, its bypass operations, the policy and
//!   the heartbeat watch after it.
//!
//! Messages travel as typed values (`HostCmd`, `EngineCmd`) over bounded SPSC rings
//! ([`mod@crate::ring`]), not as bytes: both ends are in one address space, and the byte codec
//! (`shard::handoff`) stays the format for a real device. Each side counts what it sent and
//! received. A command that meets a full ring waits in a bounded backlog, in order; one that
//! meets a full backlog is dropped and counted (`*_cmds_dropped`; a dropped command breaks the
//! conversation, so the bounds are generous and the figure must read 0).
//!
//! Ordering (the simulator's rules, and what the threads change):
//! - Frames that reach shard 0 after a handoff are `Forward`ed in arrival order over the
//!   command ring; frames steered to the engine's queue after `Install` arrive on another
//!   ring, and could overtake frames shard 0 had received before the wire installed the
//!   filter. So the engine *holds* the steered frames of a flow from its `HandoffAccepted`
//!   until shard 0 says its receive path has drained of the flow ([`ToEngine::Drained`],
//!   behind the last `Forward` on the same ring), then processes them in arrival order:
//!   the wire acknowledges each `Install` on a ring to shard 0 (`installed`); frames it
//!   delivered to shard 0 before are then in shard 0's receive ring; shard 0 sends `Drained`
//!   once, after that acknowledgement, a turn emptied its port and its NIC queue and the
//!   layer turned the resulting bypass operations into commands. A hold is bounded in frames
//!   ([`HOLD_FRAMES_MAX`], overflow dropped and counted) and in time ([`HOLD_NS_MAX`]: then
//!   the frames are processed anyway, counted `hold_timeouts`; TCP takes any reordering).
//! - `Remove` is sent before a restored connection is imported on shard 0; frames the engine
//!   still receives for it in between are dropped by the engine (counted `frames_unknown`)
//!   and left to retransmission.
//!
//! Engine failure without notice (`fail_after`): from that instant the engine thread answers
//! nothing and processes nothing; it still drains its receive ring (a dead NIC drops, it does
//! not stall the wire) and its command ring (counting the handoffs it swallows). Shard 0's
//! layer notices when the heartbeat stops (`engine_timeout_ns`), resets exactly the
//! connections it had handed off (each counted in `connections_lost`), removes their filters
//! and offloads nothing more; new connections stay on the host. Invariant (checked by the
//! CLI's test): `connections_lost == engine_connections_at_failure + handoffs_swallowed`.
//!
//! The host also *fences* the engine when it declares it failed (a shared flag, as a driver
//! resets a NIC it gave up on): an engine whose heartbeat was only late — its thread
//! descheduled on a loaded machine — then stops as a failed one would (`fenced` in its
//! report), instead of running on, and sending for, connections the host has reset.

use core::net::{IpAddr, SocketAddr};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use nic::{Nic, NicConfig};
use offload::{Engine, EngineConfig, EngineCounters, HostCounters, HostOffload, PolicyCounters};
pub use offload::{HostConfig as OffloadHostConfig, Steer};
use shard::handoff::{EngineCmd, HostCmd, ReqId};
use stack::{FourTuple, Stack, StackConfig};

use crate::ring::{Consumer, Producer, ring};
use crate::wire::{WirePort, WireShard};
use crate::{EngineStarter, HostConfig, RuntimeError};

/// Most commands that may wait behind a full ring, per direction, before new ones are dropped
/// (counted).
pub const CMD_BACKLOG_MAX: usize = 65_536;
/// Longest idle sleep of the engine thread, ns (bounds how late it notices the stop flag).
const ENGINE_IDLE_NS_MAX: u64 = 1_000_000;
/// Most steered frames the engine holds at once (all flows), waiting for shard 0's drain.
pub const HOLD_FRAMES_MAX: usize = 4096;
/// Longest hold of a flow's steered frames, ns, should the drain signal not come.
pub const HOLD_NS_MAX: u64 = 10_000_000;

/// What shard 0 sends the engine thread on the command ring.
#[derive(Debug)]
pub enum ToEngine {
    /// A handoff command for the engine.
    Cmd(HostCmd),
    /// Shard 0's receive path has drained of this flow since the wire installed its filter:
    /// every frame of it shard 0 received is ahead on the ring (module documentation).
    Drained(FourTuple),
}

/// A flow whose steered frames wait for [`ToEngine::Drained`].
#[derive(Debug)]
struct Hold {
    since_ns: u64,
    frames: VecDeque<Vec<u8>>,
}

/// How a `mem` host runs its offload engine ([`crate::HostConfig::offload`]).
#[derive(Debug, Clone, Copy)]
pub struct OffloadSettings {
    pub engine: EngineConfig,
    /// The host's layer on shard 0: policy, heartbeat timeout, policy period.
    pub host: OffloadHostConfig,
    /// The engine fails without notice this long after the start (fault injection).
    pub fail_after: Option<Duration>,
    /// The core the engine thread is pinned to (`None`: unpinned).
    pub core: Option<usize>,
    /// Slots of each command ring (host → engine, engine → host) and of the steering ring.
    pub ring_slots: usize,
    /// A test and debugging knob: every period shard 0 asks every offloaded connection back
    /// (`restore_all`, as on a route change); the policy then offloads them again at its
    /// next pass. So a long transfer is handed off and restored many times while it flows.
    pub cycle: Option<Duration>,
}

impl Default for OffloadSettings {
    fn default() -> Self {
        OffloadSettings {
            engine: EngineConfig::default(),
            host: OffloadHostConfig::default(),
            fail_after: None,
            core: None,
            ring_slots: 16_384,
            cycle: None,
        }
    }
}

/// What the engine thread did.
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineReport {
    pub counters: EngineCounters,
    /// Host commands received and engine commands sent over the rings.
    pub host_cmds_in: u64,
    pub engine_cmds_out: u64,
    /// Engine commands dropped for a full backlog (must be 0).
    pub engine_cmds_dropped: u64,
    /// Frames sent to the wire.
    pub tx_frames: u64,
    /// Busy time and lifetime, ns.
    pub busy_ns: u64,
    pub elapsed_ns: u64,
    /// The core it was pinned to, and whether pinning failed.
    pub core: Option<usize>,
    pub pin_failed: bool,
    /// Whether the engine failed (fault injection), its connections at that instant, and
    /// what it swallowed afterwards: handoffs (each one more connection lost on the host),
    /// other commands and frames.
    pub failed: bool,
    /// The engine stopped because the host declared it failed and fenced it (as a driver
    /// resets its NIC), not by fault injection: its heartbeat was late but it was alive.
    pub fenced: bool,
    pub connections_at_failure: u64,
    pub handoffs_swallowed: u64,
    pub cmds_swallowed: u64,
    pub frames_swallowed: u64,
    /// Connections it ran when it stopped.
    pub connections_at_end: u64,
    /// Steered frames held until shard 0 drained (module documentation); holds released by
    /// the drain signal and by time-out; frames dropped for a full hold.
    pub hold_frames: u64,
    pub hold_drained: u64,
    pub hold_timeouts: u64,
    pub hold_dropped: u64,
    /// The engine's transmissions on a live port (zero on the `mem` wire, which counts in
    /// [`crate::WireReport`]).
    pub port: crate::io::PortCounters,
}

impl EngineReport {
    /// Share of its lifetime the engine thread was busy.
    pub fn busy_share(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.busy_ns as f64 / self.elapsed_ns as f64
        }
    }
}

/// What shard 0's offload layer did (in its [`crate::ShardReport`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostOffloadReport {
    pub counters: HostCounters,
    pub policy: PolicyCounters,
    /// Connections handed off (or being handed off) when the shard stopped.
    pub offloaded_at_end: u64,
    /// Host commands dropped for a full backlog, and steering changes dropped (both must be
    /// 0).
    pub host_cmds_dropped: u64,
    pub steer_dropped: u64,
    /// Engine commands received.
    pub engine_cmds_in: u64,
    /// Restore cycles run ([`OffloadSettings::cycle`]) and the restores they asked for.
    pub cycles: u64,
    pub cycle_restores_asked: u64,
}

/// Where the engine's frames go: the `mem` wire's transmit ring, or a live port.
pub(crate) enum EngineOut {
    Wire(Producer<Vec<u8>>),
    Live(Box<crate::offload_live::LiveTx>),
}

impl EngineOut {
    /// Offers one frame; `Err(frame)` when the ring or the OS is full for now.
    fn send(&mut self, f: Vec<u8>) -> Result<(), Vec<u8>> {
        match self {
            EngineOut::Wire(p) => p.push(f),
            EngineOut::Live(t) => t.send(f),
        }
    }
}

/// The engine's side of the port: on the `mem` wire the same rings as a shard's `MemIo`; on
/// a live port, frames from shard 0's port on `rx` whose buffers go back on `post`, and no
/// posting or completions (`post_target` 0; [`crate::offload_live`]).
pub(crate) struct EnginePort {
    pub rx: Consumer<Vec<u8>>,
    pub out: EngineOut,
    pub post: Producer<Vec<u8>>,
    pub completions: Consumer<Vec<u8>>,
    /// Receive buffers kept posted, and their size.
    pub post_target: usize,
    pub rx_buf_bytes: usize,
}

/// The engine core's thread (module documentation).
pub(crate) struct EngineThread {
    pub engine: Engine,
    pub port: EnginePort,
    pub from_host: Consumer<ToEngine>,
    pub to_host: Producer<EngineCmd>,
    /// The host's threads: the shards by index, then this engine (index `shards`).
    pub threads: Arc<Vec<OnceLock<Thread>>>,
    pub index: usize,
    pub wire_thread: Arc<OnceLock<Thread>>,
    /// On a live port: shard 0 sleeps in `ppoll`, so commands for it also ring this.
    pub host_doorbell: Option<Arc<platform::doorbell::Doorbell>>,
    /// Set by shard 0 when its layer declares the engine failed: from then on the engine
    /// behaves as failed (answers nothing, sends nothing), so a late but live engine does
    /// not go on running connections the host already reset.
    pub fence: Arc<AtomicBool>,
    pub fail_after_ns: Option<u64>,
    pub core: Option<usize>,
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
}

fn now_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn unpark(t: Option<&OnceLock<Thread>>) {
    if let Some(t) = t.and_then(OnceLock::get) {
        t.unpark();
    }
}

impl EngineThread {
    pub(crate) fn run(mut self) -> EngineReport {
        let mut r = EngineReport {
            core: self.core,
            ..EngineReport::default()
        };
        r.pin_failed = self
            .core
            .is_some_and(|c| platform::affinity::pin_current_thread(c).is_err());
        if let Some(t) = self.threads.get(self.index) {
            let _ = t.set(std::thread::current());
        }
        // Receive buffers, posted once; each goes back after its frame is processed.
        for _ in 0..self.port.post_target {
            if self
                .port
                .post
                .push(Vec::with_capacity(self.port.rx_buf_bytes))
                .is_err()
            {
                break;
            }
        }
        let mut backlog: VecDeque<EngineCmd> = VecDeque::new();
        let mut refused: Option<Vec<u8>> = None;
        // Handoffs by request (to learn the tuple of an accepted one), flows on hold, and
        // the frames held over all of them.
        let mut handoffs: BTreeMap<ReqId, FourTuple> = BTreeMap::new();
        let mut holds: BTreeMap<FourTuple, Hold> = BTreeMap::new();
        let mut held = 0usize;
        loop {
            // The stop flag is read before the fence and acted on after it: a host that fenced
            // the engine and then stopped the run (both may happen before this thread is
            // scheduled on a loaded machine) still gets a report that says it was fenced.
            let stopping = self.stop.load(Ordering::Acquire);
            let now = now_ns(self.epoch);
            let mut work = 0usize;
            let fenced = self.fence.load(Ordering::Acquire);
            if !r.failed && (fenced || self.fail_after_ns.is_some_and(|t| now >= t)) {
                r.fenced = fenced;
                // Fails without notice: what is already in flight stays in flight; what the
                // engine still holds is lost with it.
                r.failed = true;
                r.connections_at_failure = self.engine.connections() as u64;
            }
            if stopping {
                break;
            }
            while self.port.completions.pop().is_some() {}
            if r.failed {
                while let Some(b) = self.port.rx.pop() {
                    work += 1;
                    r.frames_swallowed += 1;
                    let _ = self.port.post.push(b);
                }
                while let Some(c) = self.from_host.pop() {
                    work += 1;
                    r.cmds_swallowed += 1;
                    if matches!(c, ToEngine::Cmd(HostCmd::Handoff { .. })) {
                        r.handoffs_swallowed += 1;
                    }
                }
                for (_, h) in std::mem::take(&mut holds) {
                    r.frames_swallowed += h.frames.len() as u64;
                }
                held = 0;
                if work == 0 {
                    std::thread::park_timeout(Duration::from_nanos(ENGINE_IDLE_NS_MAX));
                }
                continue;
            }
            while let Some(c) = self.from_host.pop() {
                work += 1;
                match c {
                    ToEngine::Cmd(c) => {
                        r.host_cmds_in += 1;
                        if let HostCmd::Handoff { req, tuple, .. } = &c {
                            handoffs.insert(*req, *tuple);
                        }
                        self.engine.handle_host_cmd(now, c);
                    }
                    ToEngine::Drained(t) => {
                        if let Some(h) = holds.remove(&t) {
                            r.hold_drained += 1;
                            held -= h.frames.len();
                            for f in h.frames {
                                self.engine.handle_frame(now, &f);
                            }
                        }
                    }
                }
            }
            // Holds that waited too long go through anyway.
            let expired: Vec<FourTuple> = holds
                .iter()
                .filter(|(_, h)| now.saturating_sub(h.since_ns) >= HOLD_NS_MAX)
                .map(|(t, _)| *t)
                .collect();
            for t in expired {
                if let Some(h) = holds.remove(&t) {
                    r.hold_timeouts += 1;
                    held -= h.frames.len();
                    for f in h.frames {
                        self.engine.handle_frame(now, &f);
                    }
                }
            }
            while let Some(b) = self.port.rx.pop() {
                work += 1;
                let hold = if holds.is_empty() {
                    None
                } else {
                    frame_tuple(&b).and_then(|t| holds.get_mut(&t))
                };
                match hold {
                    Some(h) if held < HOLD_FRAMES_MAX => {
                        // Kept whole; a fresh buffer is posted in its place.
                        r.hold_frames += 1;
                        held += 1;
                        h.frames.push_back(b);
                        if self.port.post_target > 0 {
                            let _ = self
                                .port
                                .post
                                .push(Vec::with_capacity(self.port.rx_buf_bytes));
                        }
                    }
                    Some(_) => {
                        r.hold_dropped += 1;
                        let _ = self.port.post.push(b);
                    }
                    None => {
                        self.engine.handle_frame(now, &b);
                        // The buffer goes back to the wire as a posted receive buffer.
                        let _ = self.port.post.push(b);
                    }
                }
            }
            if work > 0 || self.engine.poll_timeout().is_some_and(|d| d <= now) {
                self.engine.handle_timeout(now);
            }
            // Commands for the host: what waited first, in order.
            let mut sent = false;
            while let Some(c) = backlog.pop_front() {
                if let Err(c) = self.to_host.push(c) {
                    backlog.push_front(c);
                    break;
                }
                r.engine_cmds_out += 1;
                sent = true;
            }
            while let Some(c) = self.engine.poll_cmd() {
                work += 1;
                match &c {
                    EngineCmd::HandoffAccepted { req, .. } => {
                        if let Some(t) = handoffs.remove(req) {
                            holds.insert(
                                t,
                                Hold {
                                    since_ns: now,
                                    frames: VecDeque::new(),
                                },
                            );
                        }
                    }
                    EngineCmd::HandoffRefused { req, .. } => {
                        handoffs.remove(req);
                    }
                    _ => {}
                }
                if backlog.is_empty() {
                    match self.to_host.push(c) {
                        Ok(()) => {
                            r.engine_cmds_out += 1;
                            sent = true;
                            continue;
                        }
                        Err(c) => backlog.push_back(c),
                    }
                } else if backlog.len() < CMD_BACKLOG_MAX {
                    backlog.push_back(c);
                } else {
                    r.engine_cmds_dropped += 1;
                }
            }
            if sent {
                unpark(self.threads.first());
                if let Some(d) = &self.host_doorbell {
                    d.ring();
                }
            }
            // Frames for the wire; one the ring refused is retried first.
            let mut pushed = false;
            while let Some(f) = refused.take().or_else(|| self.engine.poll_transmit(now)) {
                match self.port.out.send(f) {
                    Ok(()) => {
                        r.tx_frames += 1;
                        pushed = true;
                    }
                    Err(f) => {
                        refused = Some(f);
                        break;
                    }
                }
            }
            if pushed {
                work += 1;
                unpark(Some(&self.wire_thread));
            }
            let end = now_ns(self.epoch);
            if work > 0 {
                r.busy_ns += end.saturating_sub(now);
            } else if backlog.is_empty() && refused.is_none() {
                let mut ns = self
                    .engine
                    .poll_timeout()
                    .map_or(ENGINE_IDLE_NS_MAX, |d| d.saturating_sub(end))
                    .min(ENGINE_IDLE_NS_MAX);
                if let Some(t) = self.fail_after_ns.filter(|&t| t > end) {
                    ns = ns.min(t - end);
                }
                if let Some(since) = holds.values().map(|h| h.since_ns).min() {
                    ns = ns.min(since.saturating_add(HOLD_NS_MAX).saturating_sub(end));
                }
                if ns > 0 {
                    std::thread::park_timeout(Duration::from_nanos(ns));
                }
            } else {
                std::thread::park_timeout(Duration::from_nanos(20_000));
            }
        }
        r.counters = *self.engine.counters();
        r.connections_at_end = self.engine.connections() as u64;
        r.elapsed_ns = now_ns(self.epoch);
        if let EngineOut::Live(t) = &self.port.out {
            r.port = t.counters;
        }
        r
    }
}

/// Shard 0's side: the host's offload layer over the shard's stack and its rings (module
/// documentation). Invariant: a command or steering change leaves in the order the layer
/// produced it (backlogs are FIFO and always drained before the ring is offered new ones).
pub(crate) struct ShardOffload {
    pub host: HostOffload,
    pub to_engine: Producer<ToEngine>,
    /// Filters the wire installed (its acknowledgements, in order).
    pub installed: Consumer<FourTuple>,
    /// Installed flows whose pre-install frames may still be in this shard's receive path,
    /// with whether a turn since emptied the port.
    pub draining: Vec<(FourTuple, bool)>,
    pub from_engine: Consumer<EngineCmd>,
    pub steer: Producer<Steer>,
    pub wire_thread: Arc<OnceLock<Thread>>,
    /// The engine thread's index in the host's thread list.
    pub engine_index: usize,
    pub cmd_backlog: VecDeque<ToEngine>,
    pub steer_backlog: VecDeque<Steer>,
    /// Shared with the engine thread: set when the layer declares the engine failed.
    pub fence: Arc<AtomicBool>,
    /// [`OffloadSettings::cycle`] in ns, and when the next cycle is due.
    pub cycle_ns: Option<u64>,
    pub next_cycle_ns: u64,
    pub report: HostOffloadReport,
}

/// The channels a [`ShardOffload`] talks over, made by its driver (the `mem` wire or a live
/// port).
pub(crate) struct ShardOffloadRings {
    pub to_engine: Producer<ToEngine>,
    pub installed: Consumer<FourTuple>,
    pub from_engine: Consumer<EngineCmd>,
    pub steer: Producer<Steer>,
    pub wire_thread: Arc<OnceLock<Thread>>,
}

impl ShardOffload {
    /// Shard 0's half of the offload layer for settings `o`, the engine thread at
    /// `engine_index`, and the `fence` it shares with the engine.
    pub(crate) fn new(
        o: &OffloadSettings,
        rings: ShardOffloadRings,
        engine_index: usize,
        fence: Arc<AtomicBool>,
    ) -> ShardOffload {
        ShardOffload {
            host: HostOffload::new(o.host),
            to_engine: rings.to_engine,
            installed: rings.installed,
            draining: Vec::new(),
            from_engine: rings.from_engine,
            steer: rings.steer,
            wire_thread: rings.wire_thread,
            engine_index,
            cmd_backlog: VecDeque::new(),
            steer_backlog: VecDeque::new(),
            fence,
            cycle_ns: o.cycle.map(duration_ns),
            next_cycle_ns: 0,
            report: HostOffloadReport::default(),
        }
    }

    /// The wire's install acknowledgements; call at the start of a turn, before the port is
    /// read. Returns how many.
    pub(crate) fn take_installed(&mut self) -> usize {
        let mut n = 0;
        while let Some(t) = self.installed.pop() {
            n += 1;
            self.draining.push((t, false));
        }
        n
    }

    /// The port had nothing more this turn: everything it held when the flows now draining
    /// were installed is in the NIC queue or beyond.
    pub(crate) fn note_port_empty(&mut self) {
        for d in &mut self.draining {
            d.1 = true;
        }
    }

    /// Engine commands into the stack, before the shard's iteration. Returns the work done.
    pub(crate) fn before(&mut self, now: u64, stack: &mut Stack) -> usize {
        let mut n = 0;
        while let Some(c) = self.from_engine.pop() {
            n += 1;
            self.report.engine_cmds_in += 1;
            self.host.handle_engine_cmd(now, stack, c);
        }
        n
    }

    /// After the shard's iteration: bypass operations as commands, the heartbeat watch and
    /// the policy; commands to the engine, steering changes to the wire. Returns the work
    /// done (commands and changes sent).
    pub(crate) fn after(
        &mut self,
        now: u64,
        stack: &mut Stack,
        threads: &[OnceLock<Thread>],
        nic_queue_empty: bool,
    ) -> usize {
        let failed_before = self.host.engine_failed();
        if let Some(period) = self.cycle_ns.filter(|_| now >= self.next_cycle_ns) {
            self.next_cycle_ns = now.saturating_add(period);
            self.report.cycles += 1;
            self.report.cycle_restores_asked += self.host.restore_all() as u64;
        }
        self.host.poll(now, stack);
        let mut n = usize::from(self.host.engine_failed() != failed_before);
        if n > 0 {
            // Fence the engine, as a driver resets a NIC it gave up on.
            self.fence.store(true, Ordering::Release);
            unpark(threads.get(self.engine_index));
        }
        while let Some(c) = self.host.poll_cmd() {
            self.queue(ToEngine::Cmd(c));
        }
        // Behind the forwards they release: flows whose frames have all gone through.
        if nic_queue_empty && self.draining.iter().any(|d| d.1) {
            let draining = std::mem::take(&mut self.draining);
            for (t, port_clear) in draining {
                if port_clear {
                    self.queue(ToEngine::Drained(t));
                } else {
                    self.draining.push((t, port_clear));
                }
            }
        }
        let mut sent = false;
        while let Some(c) = self.cmd_backlog.pop_front() {
            if let Err(c) = self.to_engine.push(c) {
                self.cmd_backlog.push_front(c);
                break;
            }
            sent = true;
            n += 1;
        }
        if sent {
            unpark(threads.get(self.engine_index));
        }
        while let Some(s) = self.host.poll_steer() {
            if self.steer_backlog.len() < CMD_BACKLOG_MAX {
                self.steer_backlog.push_back(s);
            } else {
                self.report.steer_dropped += 1;
            }
        }
        let mut steered = false;
        while let Some(s) = self.steer_backlog.pop_front() {
            if let Err(s) = self.steer.push(s) {
                self.steer_backlog.push_front(s);
                break;
            }
            steered = true;
            n += 1;
        }
        if steered {
            unpark(Some(&self.wire_thread));
        }
        n
    }

    /// Queues an item for the engine's ring, behind what waits (a full backlog drops it,
    /// counted).
    fn queue(&mut self, c: ToEngine) {
        if self.cmd_backlog.len() < CMD_BACKLOG_MAX {
            self.cmd_backlog.push_back(c);
        } else {
            self.report.host_cmds_dropped += 1;
        }
    }

    /// Whether commands or steering changes wait for room.
    pub(crate) fn backlogged(&self) -> bool {
        !self.cmd_backlog.is_empty() || !self.steer_backlog.is_empty()
    }

    /// When the layer must run again (heartbeat, policy, restore cycle).
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        let cycle = self.cycle_ns.map(|_| self.next_cycle_ns);
        [self.host.poll_timeout(), cycle]
            .into_iter()
            .flatten()
            .min()
    }

    pub(crate) fn into_report(mut self) -> HostOffloadReport {
        self.report.counters = *self.host.counters();
        self.report.policy = *self.host.policy_counters();
        self.report.offloaded_at_end = self.host.offloaded() as u64;
        self.report
    }
}

/// The connection a TCP frame belongs to, as the receiving host names it (local: the
/// destination); `None` for anything else.
pub(crate) fn frame_tuple(frame: &[u8]) -> Option<FourTuple> {
    let f = rss::FlowFields::from_frame(frame).ok()??;
    if f.protocol != rss::PROTO_TCP {
        return None;
    }
    let p = f.ports?;
    let (src, dst): (IpAddr, IpAddr) = match f.addrs {
        rss::IpPair::V4(s, d) => (s.into(), d.into()),
        rss::IpPair::V6(s, d) => (s.into(), d.into()),
    };
    Some(FourTuple {
        local: SocketAddr::new(dst, p.dst),
        remote: SocketAddr::new(src, p.src),
    })
}

/// The offload engine's pieces for a `mem` host (module [`offload`]): the wire port gains the
/// engine's queue (RSS stays over the shards) and the steering ring; shard 0 gets the host's
/// layer and its command rings; the engine thread gets the rest.
pub(crate) fn parts(
    cfg: &HostConfig,
    o: &OffloadSettings,
    port: &mut WirePort,
    threads: &Arc<Vec<OnceLock<Thread>>>,
    stop: &Arc<AtomicBool>,
    epoch: Instant,
    wire_thread: &Arc<OnceLock<Thread>>,
) -> Result<(ShardOffload, EngineStarter), RuntimeError> {
    let s = cfg.shards;
    let mut steering = Nic::new(NicConfig {
        queues: s + 1,
        ..cfg.nic.clone()
    })
    .map_err(|e| RuntimeError::Config(format!("offload: nic: {e:?}")))?;
    steering.set_hasher(cfg.hasher.clone());
    let reta = port.steering.steering().reta.clone();
    for (i, &q) in reta.entries().iter().enumerate() {
        steering
            .set_reta_entry(i, q)
            .map_err(|e| RuntimeError::Config(format!("offload: reta: {e:?}")))?;
    }
    port.steering = steering;
    port.engine_queue = Some(s);
    let slots = cfg.wire_ring_slots;
    let (rx_p, rx_c) = ring(slots);
    let (tx_p, tx_c) = ring(slots);
    let (post_p, post_c) = ring(slots);
    let (done_p, done_c) = ring(slots.saturating_mul(2));
    port.shards.push(WireShard::new(tx_c, done_p, post_c, rx_p));
    let (steer_p, steer_c) = ring(o.ring_slots);
    port.steer = Some(steer_c);
    let (installed_p, installed_c) = ring(o.ring_slots);
    port.installed = Some(installed_p);
    let (to_engine, from_host) = ring(o.ring_slots);
    let (to_host, from_engine) = ring(o.ring_slots);
    let fence = Arc::new(AtomicBool::new(false));
    let shard_offload = ShardOffload::new(
        o,
        ShardOffloadRings {
            to_engine,
            installed: installed_c,
            from_engine,
            steer: steer_p,
            wire_thread: wire_thread.clone(),
        },
        usize::from(s),
        fence.clone(),
    );
    let stack_cfg = engine_stack_config(cfg);
    let engine_cfg = o.engine;
    let (threads, stop, wire_thread) = (threads.clone(), stop.clone(), wire_thread.clone());
    let fail_after_ns = o.fail_after.map(duration_ns);
    let core = o.core;
    let rx_buf_bytes = usize::from(cfg.interface.mtu_bytes) + 18;
    let starter: EngineStarter = Box::new(move || {
        std::thread::Builder::new()
            .name("server-engine".into())
            .spawn(move || {
                EngineThread {
                    engine: ::offload::Engine::new(engine_cfg, stack_cfg),
                    port: EnginePort {
                        rx: rx_c,
                        out: EngineOut::Wire(tx_p),
                        post: post_p,
                        completions: done_c,
                        post_target: slots,
                        rx_buf_bytes,
                    },
                    from_host,
                    to_host,
                    threads,
                    index: usize::from(s),
                    wire_thread,
                    host_doorbell: None,
                    fence,
                    fail_after_ns,
                    core,
                    stop,
                    epoch,
                }
                .run()
            })
            .map_err(|e| RuntimeError::Thread(e.to_string()))
    });
    Ok((shard_offload, starter))
}

/// `d` in ns, saturating.
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The engine's own stack configuration: the host's interface and limits, its own secret.
pub(crate) fn engine_stack_config(cfg: &HostConfig) -> StackConfig {
    let mut stack_cfg = StackConfig::new(cfg.interface.clone());
    stack_cfg.limits = cfg.limits.clone();
    // Not any shard's key (shard `i` XORs `i << 32` into the second word; `u16` shards).
    stack_cfg.secret = [cfg.secret[0], cfg.secret[1] ^ 0x0e09_0000_0000_5eed];
    stack_cfg
}
