//! One shard's run-to-completion loop.
//!
//! Per iteration, at `now`: (1) move received frames from the shard's port (`ShardIo`: the
//! `mem` wire's ring, or a live OS port) into the shard's NIC queue (never more than the NIC
//! ring has room for, so the NIC never drops for lack of a slot); (2) collect NIC wake-ups and
//! poll the queue within the budget (NAPI: re-armed only when drained); each descriptor goes to
//! the stack with its carried RSS hash, or — when frames reach shards other than their owners
//! (fewer hardware queues than shards, or a live port whose kernel-side spreading does not
//! follow our RETA) — to its owning shard through a counted cross-shard ring (a software
//! RETA); (3) take forwarded frames from other shards; (4) stack timers; (5) the application,
//! with the readiness events; (6) transmit: stack → NIC TX → port, then flush the port.
//! With no work the shard waits (`ShardIo::idle`) until the earliest of the stack's, the
//! NIC's (moderation and coalescing) and the application's deadlines, or until a frame or a
//! producer wakes it.
//!
//! Neighbour frames on live ports: all shards share one IP and MAC, but an ARP or ND frame
//! reaches one shard only. With `copy_neighbour` on, that shard processes it and copies it to
//! every other shard (counted `neighbour_copies`), so every neighbour cache learns the peer.
//! The `mem` wire does this itself (it delivers ARP replies to every shard), so it leaves
//! `copy_neighbour` off.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use apps::{App, Ctx, ShardInfo};
use nic::{Nic, QueueCounters, RxDescriptor, TxOffload, TxVerdict};
use rss::Reta;
use stack::{SocketEvent, Stack};

use crate::io::{PortCounters, ShardIo, is_neighbour_frame};
use crate::live::{ShardLive, ShardSnapshot};
use crate::ring::{Consumer, Producer};

/// Longest idle sleep, ns: bounds how late the shard notices the stop flag.
pub const IDLE_SLEEP_NS_MAX: u64 = 2_000_000;
/// Rounds of application polling per iteration (an application that keeps raising events
/// for itself continues next iteration).
const APP_ROUNDS_MAX: usize = 8;

/// A frame forwarded from the shard that polled it to the shard that owns its flow.
#[derive(Debug)]
pub struct Forwarded {
    pub frame: Vec<u8>,
    pub hash: Option<u32>,
}

/// What one shard did, returned when it stops.
#[derive(Debug)]
pub struct ShardReport<A> {
    pub info: ShardInfo,
    /// The core it ran on, when pinned.
    pub core: Option<usize>,
    /// Pinning was asked for and failed (the shard ran unpinned).
    pub pin_failed: bool,
    pub nic: QueueCounters,
    pub stack: stack::Counters,
    /// The TCP engine's counters summed over every connection the shard held
    /// ([`stack::Stack::tcp_counters`]): retransmissions, timeouts, in-connection drops.
    pub tcp: stack::TcpCounters,
    /// Wire packets handed to this shard's stack (coalesced segments counted one by one).
    pub rx_packets: u64,
    /// Frames handed to the port (the wire ring, or the OS).
    pub tx_frames: u64,
    /// Cross-shard messages sent / received / dropped for a full ring.
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
    pub app: A,
}

/// Everything a shard thread owns.
pub(crate) struct Shard<A: App, I: ShardIo> {
    pub info: ShardInfo,
    pub core: Option<usize>,
    pub pin_failed: bool,
    pub nic: Nic,
    pub nic_rx_slots: usize,
    pub nic_tx_slots: usize,
    pub stack: Stack,
    pub app: A,
    pub budget_packets: usize,
    /// Where frames come from and go to.
    pub io: I,
    /// Indexed by destination shard; `None` for this shard (and when no forwarding is needed).
    pub cross_out: Vec<Option<Producer<Forwarded>>>,
    pub cross_in: Vec<Consumer<Forwarded>>,
    /// Software RETA over the shards, used when `forwarding` is on.
    pub sw_reta: Reta,
    pub forwarding: bool,
    /// Copy ARP/ND frames to every other shard (live ports; needs `forwarding`).
    pub copy_neighbour: bool,
    /// Threads to unpark: this host's shards by index.
    pub shard_threads: Arc<Vec<std::sync::OnceLock<std::thread::Thread>>>,
    pub live: Arc<ShardLive>,
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
}

fn now_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl<A: App, I: ShardIo> Shard<A, I> {
    pub(crate) fn run(mut self) -> ShardReport<A> {
        if let Some(t) = self.shard_threads.get(usize::from(self.info.shard)) {
            let _ = t.set(std::thread::current());
        }
        let me = self.info.shard;
        let mut descs: Vec<RxDescriptor> = Vec::with_capacity(self.budget_packets);
        let mut txout: Vec<Vec<u8>> = Vec::with_capacity(self.budget_packets);
        let mut tx_backlog: VecDeque<Vec<u8>> = VecDeque::new();
        let mut events: Vec<SocketEvent> = Vec::new();
        let mut scheduled = false;
        let mut snap = ShardSnapshot::default();
        let (mut cross_tx, mut cross_rx, mut cross_drop, mut tx_nic_drop) = (0u64, 0u64, 0, 0);
        let mut neighbour_copies = 0u64;
        let mut sleeps = 0u64;
        let mut connections_max = 0u64;
        let mut last_publish_ns = 0u64;
        let mut wake = vec![false; self.cross_out.len()];
        {
            let now = now_ns(self.epoch);
            let mut ctx = Ctx::new(now, self.info, &mut self.stack);
            self.app.start(&mut ctx);
        }
        snap.started = true;
        snap.done = self.app.done();
        self.live.publish(&snap);
        loop {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let now = now_ns(self.epoch);
            let mut work = 0usize;
            // (1) port → NIC queue, within the NIC ring's free slots.
            let room = self.nic_rx_slots.saturating_sub(self.nic.rx_pending(0));
            work += self
                .io
                .receive(&mut self.nic, now, room.min(self.budget_packets * 2));
            // (2) wake-ups and the NAPI poll.
            while self.nic.poll_wakeup(now).is_some() {
                scheduled = true;
            }
            if scheduled {
                descs.clear();
                if let Ok(p) = self.nic.poll_rx(0, self.budget_packets, now, &mut descs) {
                    scheduled = !p.drained;
                }
                for d in descs.drain(..) {
                    work += 1;
                    let neighbour = self.copy_neighbour && is_neighbour_frame(&d.frame);
                    if neighbour {
                        for (to, slot) in self.cross_out.iter().enumerate() {
                            let Some(p) = slot else { continue };
                            match p.push(Forwarded {
                                frame: d.frame.clone(),
                                hash: d.hash,
                            }) {
                                Ok(()) => {
                                    cross_tx += 1;
                                    neighbour_copies += 1;
                                    if let Some(w) = wake.get_mut(to) {
                                        *w = true;
                                    }
                                }
                                Err(_) => cross_drop += 1,
                            }
                        }
                    }
                    let owner = match d.hash {
                        Some(h) if self.forwarding && !neighbour => self.sw_reta.queue_for_hash(h),
                        _ => me,
                    };
                    if owner != me {
                        let Some(Some(p)) = self.cross_out.get(usize::from(owner)) else {
                            cross_drop += 1;
                            self.nic.recycle(d.frame);
                            continue;
                        };
                        match p.push(Forwarded {
                            frame: d.frame,
                            hash: d.hash,
                        }) {
                            Ok(()) => {
                                cross_tx += 1;
                                if let Some(w) = wake.get_mut(usize::from(owner)) {
                                    *w = true;
                                }
                            }
                            Err(m) => {
                                cross_drop += 1;
                                self.nic.recycle(m.frame);
                            }
                        }
                        continue;
                    }
                    snap.rx_packets += u64::from(d.coalesced_segments.max(1));
                    self.stack.receive(now, &d.frame, d.hash);
                    self.nic.recycle(d.frame);
                }
            }
            // (3) frames other shards forwarded here.
            for c in &self.cross_in {
                for _ in 0..self.budget_packets {
                    let Some(m) = c.pop() else { break };
                    cross_rx += 1;
                    work += 1;
                    snap.rx_packets += 1;
                    self.stack.receive(now, &m.frame, m.hash);
                    self.nic.recycle(m.frame);
                }
            }
            // (4) stack timers.
            if self.stack.poll_timeout().is_some_and(|t| t <= now) {
                self.stack.handle_timeout(now);
                work += 1;
            }
            // (5) the application.
            let app_due = self.app.poll_timeout().is_some_and(|t| t <= now);
            for round in 0..APP_ROUNDS_MAX {
                events.clear();
                while let Some(e) = self.stack.poll_event() {
                    events.push(e);
                }
                if events.is_empty() && (round > 0 || !app_due) {
                    break;
                }
                work += events.len().max(1);
                let mut ctx = Ctx::new(now, self.info, &mut self.stack);
                self.app.poll(&mut ctx, &events);
            }
            // (6) transmit: backlog first, then stack → NIC TX ring → port. The backlog holds
            // frames the port refused; it is bounded by one NIC TX ring's worth, because the
            // stack is not polled again until it is empty.
            while let Some(f) = tx_backlog.pop_front() {
                match self.io.send(f) {
                    Ok(spent) => {
                        snap.tx_frames += 1;
                        if let Some(b) = spent {
                            self.stack.recycle(b);
                        }
                    }
                    Err(f) => {
                        tx_backlog.push_front(f);
                        break;
                    }
                }
            }
            if tx_backlog.is_empty() {
                let room = self.nic_tx_slots.saturating_sub(self.nic.tx_pending(0));
                for _ in 0..room.min(self.budget_packets) {
                    let Some(f) = self.stack.poll_transmit(now) else {
                        break;
                    };
                    work += 1;
                    if !matches!(
                        self.nic.transmit(0, f, TxOffload::NONE),
                        Ok(TxVerdict::Queued)
                    ) {
                        tx_nic_drop += 1;
                    }
                }
                txout.clear();
                let _ = self.nic.poll_tx(0, usize::MAX, &mut txout);
                for f in txout.drain(..) {
                    match self.io.send(f) {
                        Ok(spent) => {
                            snap.tx_frames += 1;
                            if let Some(b) = spent {
                                self.stack.recycle(b);
                            }
                        }
                        Err(f) => tx_backlog.push_back(f),
                    }
                }
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
                let conns = self.stack.tcp_connection_count() as u64;
                connections_max = connections_max.max(conns);
                snap.connections = conns;
                snap.elapsed_ns = end;
                snap.progress = self.app.progress();
                snap.done = self.app.done();
                snap.cross_shard = cross_tx;
                snap.nic_wakeups = self.nic.counters(0).map_or(0, |c| c.wakeups);
                self.live.publish(&snap);
            }
            if work == 0 && !scheduled {
                let sleep_ns = if tx_backlog.is_empty() {
                    [
                        self.stack.poll_timeout(),
                        self.nic.next_deadline(),
                        self.app.poll_timeout(),
                    ]
                    .into_iter()
                    .flatten()
                    .min()
                    .map_or(IDLE_SLEEP_NS_MAX, |d| d.saturating_sub(end))
                    .min(IDLE_SLEEP_NS_MAX)
                } else {
                    // The port is behind: give it the core for a moment.
                    20_000
                };
                if sleep_ns > 0 {
                    sleeps += 1;
                    self.io.idle(sleep_ns);
                }
            }
        }
        let end = now_ns(self.epoch);
        ShardReport {
            info: self.info,
            core: self.core,
            pin_failed: self.pin_failed,
            nic: self.nic.counters(0).unwrap_or_default(),
            stack: self.stack.counters(),
            tcp: self.stack.tcp_counters(),
            rx_packets: snap.rx_packets,
            tx_frames: snap.tx_frames,
            cross_shard_tx: cross_tx,
            cross_shard_rx: cross_rx,
            cross_shard_drop_ring_full: cross_drop,
            neighbour_copies,
            port: self.io.counters(),
            tx_drop_nic_ring_full: tx_nic_drop,
            busy_ns: snap.busy_ns,
            elapsed_ns: end,
            sleeps,
            connections_max,
            app: self.app,
        }
    }
}
