//! The thread driver of one shard core ([`shard::Shard`]).
//!
//! The shard's iteration (NAPI poll within the budget, software-RETA forwarding, neighbour
//! copies, stack timers, the application, transmit) is the sans-IO core's. This driver adds
//! only what a real thread needs: the clock, the stop flag, the port (`ShardIo`: the `mem`
//! wire's rings or a live OS port), the cross-shard SPSC rings, waking the other shards'
//! threads, live figures for the monitor and the idle wait.
//!
//! Per loop turn, at `now`: (1) port → the shard's NIC queue, never more than the NIC ring
//! has room for (so the NIC never drops for lack of a slot), after the buffers other shards
//! returned went back to the pool; (2) messages other shards sent here, processed at once
//! (frames forwarded mid-move before anything polled later), a buffer returned to the sender
//! for each; transmit completions back to the stack's pool; (3) the core's iteration; (4)
//! messages out to the other shards' rings, then frames out to the port (a frame the port
//! refuses waits, and the core holds back the stack's output meanwhile). Messages go first so
//! an ATR entry (`shard::Msg::Steer`) is on the other shards' rings before its SYN is on the
//! wire: a shard processes its rings after reading its port and before dispatching what it
//! read, so the SYN-ACK finds the entry (unless the entry waited behind a full ring).
//! With no work the thread waits (`ShardIo::idle`) until the core's next deadline (the
//! stack's, the NIC's moderation and coalescing, the application's), a frame, or an unpark.
//!
//! Neighbour frames on live ports: all shards share one IP and MAC, but an ARP or ND frame
//! reaches one shard only. With `copy_neighbour` on, the core copies it to every other shard
//! (counted `neighbour_copies`), so every neighbour cache learns the peer. The `mem` wire
//! delivers ARP replies to every shard itself, so it leaves `copy_neighbour` off.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Instant;

use app::{App, ShardInfo};
use nic::{QueueCounters, TxOffload};
use shard::{Msg, MsgKind, Shard};

use crate::io::{PortCounters, ShardIo};
use crate::live::{ShardLive, ShardSnapshot};
use crate::ring::{Consumer, Producer};

/// Longest idle sleep, ns: bounds how late the shard notices the stop flag.
pub const IDLE_SLEEP_NS_MAX: u64 = 2_000_000;
/// Idle wait while the port refuses frames: give it the core for a moment.
const PORT_BACKOFF_NS: u64 = 20_000;
/// Frames that may wait behind a full cross-shard ring (per destination) before new ones are
/// dropped and counted; move-protocol messages always wait (they are bounded by the
/// connections of the buckets moving).
const BACKLOG_FRAMES_MAX: usize = 1024;

/// A shard's control rings to the `mem` wire when its host rebalances: the rebalancer's
/// `MoveIn` and the relayed `MoveOut` arrive on `from_wire`; the `MoveOut` this shard sends as
/// a new owner goes to the wire on `to_wire`, which points the RETA entry here and relays it
/// to the old owner (so the entry changes after this shard holds and before the old owner
/// exports, as `shard::moves` requires).
pub(crate) struct Control {
    pub from_wire: Consumer<Msg>,
    /// (old owner, `MoveOut`) for the `mem` wire; `None` on live ports, where the shards'
    /// software RETA moves and `MoveOut` goes straight to the old owner.
    pub to_wire: Option<Producer<(u16, Msg)>>,
    pub wire_thread: Arc<OnceLock<Thread>>,
}

/// What one shard did, returned when it stops.
#[derive(Debug)]
pub struct ShardReport<A> {
    pub info: ShardInfo,
    /// The core it ran on, when pinned.
    pub core: Option<usize>,
    /// Pinning was asked for and failed (the shard ran unpinned).
    pub pin_failed: bool,
    /// Whether the shard's thread set a memory policy for its planned node, and how that went.
    pub node_memory: crate::NodeMemory,
    pub nic: QueueCounters,
    pub stack: stack::Counters,
    /// The TCP engine's counters summed over every connection the shard held
    /// ([`stack::Stack::tcp_counters`]): retransmissions, timeouts, in-connection drops.
    pub tcp: stack::TcpCounters,
    /// The shard core's own counters (messages by kind among them).
    pub core_counters: shard::ShardCounters,
    /// Wire packets handed to this shard's stack (coalesced segments counted one by one).
    pub rx_packets: u64,
    /// Frames handed to the port (the wire ring, or the OS).
    pub tx_frames: u64,
    /// The move protocol's counters (live rebalancing) and the latest migration times (ns,
    /// export on the old shard to import here).
    pub moves: shard::MoveCounters,
    pub move_samples_ns: Vec<u64>,
    /// Cross-shard messages sent / received / dropped for a full ring (or a full outbox).
    pub cross_shard_tx: u64,
    pub cross_shard_rx: u64,
    pub cross_shard_drop_ring_full: u64,
    /// Copies of ARP/ND frames sent to the other shards (also counted in `cross_shard_tx`).
    pub neighbour_copies: u64,
    /// The port's own counters (all zero on the `mem` wire).
    pub port: PortCounters,
    /// Frames the NIC's transmit ring refused.
    pub tx_drop_nic_ring_full: u64,
    /// Busy time and lifetime, ns.
    pub busy_ns: u64,
    pub elapsed_ns: u64,
    /// Times the shard parked for lack of work.
    pub sleeps: u64,
    /// Most TCP connections in the table at once.
    pub connections_max: u64,
    /// The host's offload layer (shard 0 of a host with an offload engine).
    pub offload: Option<crate::offload::HostOffloadReport>,
    /// Rules' hits and ATR where this shard's software RETA ran (live ports).
    pub steer: Option<(Vec<u64>, shard::SteerCounters)>,
    pub app: A,
}

/// Everything a shard thread owns: the core and what drives it.
pub(crate) struct ShardThread<A: App, I: ShardIo> {
    pub core: Shard<A>,
    /// The CPU it is pinned to, and whether pinning failed.
    pub cpu: Option<usize>,
    pub pin_failed: bool,
    /// What the thread did about node-local memory.
    pub node_memory: crate::NodeMemory,
    /// Where frames come from and go to.
    pub io: I,
    /// Indexed by destination shard; `None` for this shard (and when no forwarding is needed).
    pub cross_out: Vec<Option<Producer<Msg>>>,
    pub cross_in: Vec<Consumer<Msg>>,
    /// Parallel to `cross_in`: for each message taken from `cross_in[k]`, one buffer of this
    /// shard's pool goes back on `cross_back[k]` to the sender, whose pool the message's
    /// buffer came from. So forwarding and neighbour copies move no buffers between pools for
    /// good, and neither side allocates or frees per message.
    pub cross_back: Vec<Producer<Vec<u8>>>,
    /// Buffers other shards returned for the messages this one sent.
    pub cross_returned: Vec<Consumer<Vec<u8>>>,
    /// Control rings to the `mem` wire, when the host rebalances.
    pub control: Option<Control>,
    /// The host's offload layer and its rings (shard 0 of a host with an offload engine).
    pub offload: Option<crate::offload::ShardOffload>,
    /// Threads to unpark: this host's shards by index.
    pub shard_threads: Arc<Vec<std::sync::OnceLock<std::thread::Thread>>>,
    pub live: Arc<ShardLive>,
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
}

fn now_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Cross-shard traffic as the driver saw it.
#[derive(Debug, Default)]
struct Cross {
    tx: u64,
    rx: u64,
    drop_ring_full: u64,
}

impl<A: App, I: ShardIo> ShardThread<A, I> {
    pub(crate) fn run(mut self) -> ShardReport<A> {
        let info = self.core.info();
        if let Some(t) = self.shard_threads.get(usize::from(info.shard)) {
            let _ = t.set(std::thread::current());
        }
        let budget = self.core.budget_packets();
        let mut snap = ShardSnapshot::default();
        let mut cross = Cross::default();
        let mut sleeps = 0u64;
        let mut connections_max = 0u64;
        let mut last_publish_ns = 0u64;
        let mut last_overload_ns = 0u64;
        let mut wake = vec![false; self.cross_out.len()];
        // Messages waiting behind a full ring, per destination (and the wire's), in order.
        let mut backlog: Vec<VecDeque<Msg>> =
            (0..self.cross_out.len()).map(|_| VecDeque::new()).collect();
        let mut wire_backlog: VecDeque<(u16, Msg)> = VecDeque::new();
        // A frame the port refused, retried first at the next turn.
        let mut refused: Option<(Vec<u8>, TxOffload)> = None;
        self.core.start(now_ns(self.epoch));
        snap.started = true;
        snap.done = self.core.app().done();
        self.live.publish(&snap);
        loop {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let now = now_ns(self.epoch);
            let mut work = 0usize;
            // The wire's filter acknowledgements, before the port is read (offload).
            if let Some(o) = &mut self.offload {
                work += o.take_installed();
            }
            // (1) port → NIC queue, within the NIC ring's free slots.
            {
                let mut q = self.core.rx_queue(now);
                // Buffers returned for messages sent, back to the pool first (at most the
                // rings' slots).
                for r in &self.cross_returned {
                    while let Some(b) = r.pop() {
                        q.recycle(b);
                    }
                }
                let room = q.room().min(budget * 2);
                let received = self.io.receive(&mut q, room);
                work += received;
                if received < room {
                    // The port had nothing more: a bucket moving out may finish.
                    self.core.note_port_empty();
                    if let Some(o) = &mut self.offload {
                        o.note_port_empty();
                    }
                }
            }
            // Control from the wire (bucket moves), before the other shards' messages.
            if let Some(c) = &self.control {
                while let Some(m) = c.from_wire.pop() {
                    work += 1;
                    self.core.handle_msg(now, m);
                }
            }
            // (2) messages other shards sent here.
            for (k, c) in self.cross_in.iter().enumerate() {
                for _ in 0..budget {
                    let Some(m) = c.pop() else { break };
                    cross.rx += 1;
                    work += 1;
                    let carries_buffer = matches!(m.kind(), MsgKind::Frame | MsgKind::Neighbour);
                    // The message's buffer goes to this shard's pool; one goes back.
                    self.core.handle_msg(now, m);
                    if !carries_buffer {
                        continue;
                    }
                    let mut q = self.core.rx_queue(now);
                    let b = q.take_buffer(0);
                    match self.cross_back.get(k) {
                        Some(p) => {
                            if let Err(b) = p.push(b) {
                                q.recycle(b);
                            }
                        }
                        None => q.recycle(b),
                    }
                }
            }
            // Transmit completions back to the stack's pool, before it builds frames.
            while let Some(b) = self.io.reap_completion() {
                self.core.recycle_tx(b);
            }
            // Engine commands into the stack, before the iteration runs the application.
            if let Some(o) = &mut self.offload {
                work += o.before(now, self.core.stack_mut());
            }
            // (3) the core's iteration; freed heap memory back to the OS when it asks (rare:
            // after a large fall of its TCP buffer memory, at most once per
            // `shard::mem_trim::MEM_TRIM_INTERVAL_NS`).
            work += self.core.handle_timeout(now);
            if self.core.poll_mem_trim() {
                let t = platform::heap::trim_heap();
                self.core.note_mem_trim(t.resident_released_bytes());
            }
            // The offload layer: bypass operations, heartbeat, policy; out to the rings.
            if let Some(o) = &mut self.offload {
                let nic_queue_empty = self.core.nic().rx_pending(0) == 0;
                work += o.after(
                    now,
                    self.core.stack_mut(),
                    &self.shard_threads,
                    nic_queue_empty,
                );
            }
            // (4) messages to the other shards, then frames to the port: an ATR entry
            // (`Msg::Steer`) is on its ring before its SYN leaves, so the shard that polls the
            // SYN-ACK has it (a shard reads its rings between reading its port and dispatching).
            // What waited behind a full ring goes first, in order.
            for (to, queue) in backlog.iter_mut().enumerate() {
                // Only messages for a destination with a ring are ever queued here.
                let Some(Some(p)) = self.cross_out.get(to) else {
                    continue;
                };
                while let Some(m) = queue.pop_front() {
                    if let Err(m) = p.push(m) {
                        queue.push_front(m);
                        break;
                    }
                    cross.tx += 1;
                    if let Some(w) = wake.get_mut(to) {
                        *w = true;
                    }
                }
            }
            if let Some(to_wire) = self.control.as_ref().and_then(|c| c.to_wire.as_ref()) {
                while let Some(m) = wire_backlog.pop_front() {
                    if let Err(m) = to_wire.push(m) {
                        wire_backlog.push_front(m);
                        break;
                    }
                }
            }
            while let Some((to, m)) = self.core.poll_msg() {
                let to = usize::from(to);
                let wire = self
                    .control
                    .as_ref()
                    .and_then(|c| c.to_wire.as_ref().map(|w| (w, &c.wire_thread)));
                if let (Msg::MoveOut { .. }, Some((to_wire, wire_thread))) = (&m, wire) {
                    // The wire points the RETA entry here and relays it to the old owner.
                    let item = (to as u16, m);
                    if !wire_backlog.is_empty() {
                        wire_backlog.push_back(item);
                    } else if let Err(item) = to_wire.push(item) {
                        wire_backlog.push_back(item);
                    }
                    if let Some(t) = wire_thread.get() {
                        t.unpark();
                    }
                    continue;
                }
                let m = match (self.cross_out.get(to), backlog.get(to)) {
                    (Some(Some(p)), Some(q)) if q.is_empty() => match p.push(m) {
                        Ok(()) => {
                            cross.tx += 1;
                            if let Some(w) = wake.get_mut(to) {
                                *w = true;
                            }
                            continue;
                        }
                        Err(m) => m,
                    },
                    (Some(Some(_)), Some(_)) => m,
                    _ => {
                        cross.drop_ring_full += 1;
                        if let Some(b) = m.into_buffer() {
                            self.core.recycle_tx(b);
                        }
                        continue;
                    }
                };
                // Behind a full ring: wait, in order (frames only up to a bound).
                if let Some(q) = backlog.get_mut(to) {
                    if m.kind() == MsgKind::Move || q.len() < BACKLOG_FRAMES_MAX {
                        q.push_back(m);
                    } else {
                        cross.drop_ring_full += 1;
                        if let Some(b) = m.into_buffer() {
                            self.core.recycle_tx(b);
                        }
                    }
                }
            }
            if let Some(f) = refused.take() {
                refused = self.send(f);
            }
            while refused.is_none() {
                let Some(f) = self.core.poll_tx_offload() else {
                    break;
                };
                refused = self.send(f);
            }
            self.io.flush();
            for (i, w) in wake.iter_mut().enumerate() {
                if std::mem::take(w) {
                    if let Some(t) = self.shard_threads.get(i).and_then(|t| t.get()) {
                        t.unpark();
                    }
                }
            }
            let end = now_ns(self.epoch);
            if work > 0 {
                snap.busy_ns += end.saturating_sub(now);
            }
            if end.saturating_sub(last_publish_ns) >= 1_000_000 || work == 0 {
                last_publish_ns = end;
                let conns = self.core.stack().tcp_connection_count() as u64;
                connections_max = connections_max.max(conns);
                let c = self.core.counters();
                snap.connections = conns;
                snap.elapsed_ns = end;
                snap.rx_packets = c.rx_packets;
                snap.tx_frames = c.tx_frames;
                snap.progress = self.core.app().progress();
                snap.done = self.core.app().done();
                snap.cross_shard = cross.tx;
                snap.nic_wakeups = self.core.nic().counters(0).map_or(0, |c| c.wakeups);
                if end.saturating_sub(last_overload_ns) >= crate::live::OVERLOAD_PUBLISH_NS {
                    last_overload_ns = end;
                    (snap.overload_refused, snap.overload_reclaimed) =
                        crate::live::overload_figures(&self.core.stack().counters());
                }
                self.live.publish(&snap);
                self.live.publish_buckets(self.core.bucket_packets());
            }
            let backlogged = backlog.iter().any(|q| !q.is_empty())
                || !wire_backlog.is_empty()
                || self
                    .offload
                    .as_ref()
                    .is_some_and(crate::offload::ShardOffload::backlogged);
            if work == 0 && !self.core.is_busy() && !backlogged {
                let sleep_ns = if refused.is_none() {
                    let offload = self.offload.as_ref().and_then(|o| o.poll_timeout());
                    [self.core.poll_timeout(), offload]
                        .into_iter()
                        .flatten()
                        .min()
                        .map_or(IDLE_SLEEP_NS_MAX, |d| d.saturating_sub(end))
                        .min(IDLE_SLEEP_NS_MAX)
                } else {
                    PORT_BACKOFF_NS
                };
                if sleep_ns > 0 {
                    sleeps += 1;
                    self.io.idle(sleep_ns);
                }
            }
        }
        let end = now_ns(self.epoch);
        let port = self.io.counters();
        let c = self.core.counters();
        let moves = self.core.move_counters();
        let move_samples_ns = self.core.move_samples_ns().collect();
        let steer = self
            .core
            .sw_steer()
            .map(|s| (s.rule_hits().to_vec(), s.counters()));
        let (nic, stack, app) = self.core.into_parts();
        ShardReport {
            info,
            core: self.cpu,
            pin_failed: self.pin_failed,
            node_memory: self.node_memory,
            nic: nic.counters(0).unwrap_or_default(),
            stack: stack.counters(),
            tcp: stack.tcp_counters(),
            core_counters: c,
            moves,
            move_samples_ns,
            rx_packets: c.rx_packets,
            tx_frames: c.tx_frames,
            cross_shard_tx: cross.tx,
            cross_shard_rx: cross.rx,
            cross_shard_drop_ring_full: cross.drop_ring_full
                + c.msgs.drop_outbox_full
                + c.msgs.drop_no_such_shard,
            neighbour_copies: c.msgs.neighbour_tx,
            port,
            tx_drop_nic_ring_full: c.tx_drop_nic_ring_full,
            busy_ns: snap.busy_ns,
            elapsed_ns: end,
            sleeps,
            connections_max,
            offload: self.offload.map(crate::offload::ShardOffload::into_report),
            steer,
            app,
        }
    }

    /// Offers `f` to the port: `None` when it took it (a spent buffer goes back to the core's
    /// pool), `Some(f)` when it is full for now.
    fn send(&mut self, (f, offload): (Vec<u8>, TxOffload)) -> Option<(Vec<u8>, TxOffload)> {
        match self.io.send_offload(f, offload) {
            Ok(spent) => {
                if let Some(b) = spent {
                    self.core.recycle_tx(b);
                }
                None
            }
            Err(f) => Some((f, offload)),
        }
    }
}
