//! The forwarding loop: a router's shard thread owning one queue of every port
//! (DESIGN.md "Forwarding": "a host may own several ports; each shard owns one queue of each").
//!
//! # Why a loop of its own, beside the shard core
//!
//! `shard::Shard` is one queue of one port in front of one stack and an application that sees
//! socket events, never frames. A router needs every port on one core (a packet goes out on a
//! port other than the one it came in on, and the frame must not cross a core to get there),
//! frames rather than sockets, and a stack per port only for what is addressed to the router
//! itself (ARP/ND, ping, the neighbour cache). Generalising the shard core to N ports would
//! change every driver and the simulator for one application; this loop reuses the pieces as
//! they are instead: the same ports (`ShardIo`: the `mem` wire's rings, TAP, AF_PACKET,
//! AF_XDP), a one-queue `nic::Nic` per port (buffer pool, ring bound, parse, counters), a
//! `stack::Stack` per port and the sans-IO [`forward::Forwarder`]. It is the DPDK l3fwd
//! shape: per turn, a burst from each port, run to completion, bursts out.
//!
//! With `S` shards each port is opened with `S` queues (AF_PACKET fanout, TAP/AF_XDP queues,
//! the `mem` wire's RSS) and shard `i` owns queue `i` of every port: no frame crosses shards.
//! Only ARP/ND frames are copied to the other shards (bounded rings, counted), so every
//! shard's neighbour caches learn what one shard resolved (live ports only: the `mem` wire
//! already delivers ARP replies to every shard).
//!
//! # One turn
//!
//! 1. Transmit completions back to the pool they came from (see "Buffers"); frames a port
//!    refused earlier (its backlog) retried in order.
//! 2. Neighbour copies from other shards into the port's stack.
//! 3. Per port `p`: up to `burst_frames` frames from the port into its NIC queue, polled back
//!    as descriptors; [`forward::Forwarder::process_burst`] gives each a verdict with the
//!    port's stacks as the neighbour table ([`StackNeighbours`]): `Forward`/`IcmpError` go to
//!    the egress port, `Local` frames to port `p`'s stack, `Drop`s back to the pool.
//! 4. Per port: due stack timers, then the stack's output (ARP replies and requests, echo
//!    replies) to its port — only while the port's backlog is empty, so a slow port keeps the
//!    stack's output in the stack's own bounded queue.
//! 5. Flush every port; when the turn found no work, wait on every port's descriptor at
//!    once (`ppoll`), or park (the `mem` wire unparks), until the next stack deadline.
//!
//! # Buffers (zero allocations per packet in steady state)
//!
//! A received frame lives in a buffer of the ingress port's NIC pool and is rewritten in
//! place. When the egress port hands the buffer back at once (live ports copy into the OS), it
//! returns to the ingress pool at once; when it comes back later as a transmit completion (the
//! `mem` wire), the port remembers, in transmit order, whose each in-flight buffer was
//! (`inflight`), and the completion goes back there. So a one-way flow from port 0 to port 1
//! returns every buffer to port 0's pool, and nothing is allocated per packet.
//!
//! # Bounds and counters
//!
//! NIC ring and pool ([`nic::NicConfig`]), each port's transmit backlog
//! (`tx_backlog_frames_max`, beyond it `tx_drop_backlog_full`), the neighbour-copy rings
//! (`neighbour_copy_drop_ring_full`), the stacks' [`stack::Limits`] (neighbour entries bound
//! the resolutions a flood to unresolvable next hops can start), and every forwarding verdict
//! in [`forward::Counters`].

use core::net::IpAddr;
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use forward::{
    BURST_MAX, Counters, Forwarder, ForwarderConfig, Neighbours, PortConfig, Prefix, Verdict,
};
use nic::{ModerationConfig, Nic, NicConfig, PoolCounters, QueueCounters, RxDescriptor};
use shard::{RxQueue, is_neighbour_frame};
use stack::{InterfaceConfig, Limits, RxMeta, Stack, StackConfig};
use wire::EthernetAddress;

use crate::RuntimeError;
use crate::io::{MemIo, PortCounters, ShardIo};
use crate::port::{FORWARD_POLL_NS_MAX, LivePort};
use crate::ring::{Consumer, Producer};
use crate::shard::IDLE_SLEEP_NS_MAX;

/// Frames taken from one port per turn by default (DPDK's habit is 32).
pub const ROUTER_BURST_DEFAULT: usize = 32;
/// Most ports a router drives (the idle wait polls them all at once).
pub const ROUTER_PORTS_MAX: usize = platform::wait::WAIT_FDS_MAX;

/// A router: its ports, routes, shards and bounds.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// Port `i`'s interface: MAC, addresses (each implies a connected route and a local
    /// route for the address itself), MTU. `gateway_*` are ignored (routes say where to go).
    /// Invariant (checked): 1..=[`ROUTER_PORTS_MAX`] ports.
    pub ports: Vec<InterfaceConfig>,
    /// Static routes: destination prefix via a gateway on a connected subnet.
    pub routes: Vec<(Prefix, IpAddr)>,
    /// Shards (threads), each owning one queue of every port; 1..=`nic::QUEUES_MAX`.
    pub shards: u16,
    /// Core of each shard; `None` runs unpinned. Shorter lists wrap around.
    pub cores: Option<Vec<usize>>,
    /// Frames taken from a port per turn, 1..=[`forward::BURST_MAX`].
    pub burst_frames: usize,
    /// Each port's NIC queue per shard: receive ring slots, pool bound, largest frame.
    /// Queues, moderation, checksum offload and coalescing are set by the router (one
    /// queue, no moderation, no checksum verification — the forwarder checks the IPv4
    /// header and a forwarded packet's L4 checksum is not the router's to verify — no GRO).
    pub nic: NicConfig,
    /// The per-port stacks' bounds (neighbour cache size, transmit queue, ...).
    pub limits: Limits,
    /// Frames a port may hold back while the OS refuses them; beyond, dropped and counted.
    pub tx_backlog_frames_max: usize,
    /// Slots of each shard → shard neighbour-copy ring.
    pub neighbour_ring_slots: usize,
    /// Slots of the `mem` wire's rings (in-process ports only).
    pub wire_ring_slots: usize,
    /// Never sleep: spin on the ports (lowest latency, one core busy per shard).
    pub busy_poll: bool,
    /// AF_PACKET ports transmit through a TPACKET_V2 ring, one `send(2)` per turn; `false`:
    /// one `send(2)` per frame (kept to measure the difference).
    pub af_packet_tx_ring: bool,
    /// ICMP errors a second each shard may originate (RFC 1812 §4.3.2.8).
    pub icmp_errors_per_s_max: u32,
}

impl RouterConfig {
    /// A router over `ports` with no static routes, one shard, default bounds.
    pub fn new(ports: Vec<InterfaceConfig>) -> RouterConfig {
        RouterConfig {
            ports,
            routes: Vec::new(),
            shards: 1,
            cores: None,
            burst_frames: ROUTER_BURST_DEFAULT,
            nic: NicConfig {
                queues: 1,
                ..NicConfig::default()
            },
            limits: Limits::default(),
            tx_backlog_frames_max: 1024,
            neighbour_ring_slots: 256,
            wire_ring_slots: 4096,
            busy_poll: false,
            af_packet_tx_ring: true,
            icmp_errors_per_s_max: 100,
        }
    }

    /// The forwarder's configuration: the ports' MACs, MTUs and addresses.
    pub fn forwarder_config(&self) -> ForwarderConfig {
        ForwarderConfig {
            ports: self
                .ports
                .iter()
                .map(|i| PortConfig {
                    mac: i.mac,
                    mtu_bytes: i.mtu_bytes,
                    ipv4: i.ipv4.iter().map(|c| (c.addr, c.prefix_len)).collect(),
                    ipv6: i.ipv6.iter().map(|c| (c.addr, c.prefix_len)).collect(),
                })
                .collect(),
            icmp_errors_per_s_max: self.icmp_errors_per_s_max,
            ..ForwarderConfig::default()
        }
    }

    /// A forwarder with the ports' connected routes and every static route; a route whose
    /// gateway is on no connected subnet is an error naming it.
    pub fn build_forwarder(&self) -> Result<Forwarder, RuntimeError> {
        let mut f = Forwarder::new(&self.forwarder_config())
            .map_err(|e| RuntimeError::Config(format!("router ports: {e}")))?;
        for &(prefix, gw) in &self.routes {
            f.add_route_via(prefix, gw)
                .map_err(|e| RuntimeError::Config(format!("route {prefix} via {gw}: {e}")))?;
        }
        Ok(f)
    }

    /// Checks the invariants the fields document, and that the routes build.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |m: String| Err(RuntimeError::Config(m));
        if self.ports.is_empty() || self.ports.len() > ROUTER_PORTS_MAX {
            return bad(format!("a router needs 1..={ROUTER_PORTS_MAX} ports"));
        }
        if self.shards == 0 || self.shards > nic::QUEUES_MAX {
            return bad(format!("shards must be 1..={}", nic::QUEUES_MAX));
        }
        if self.burst_frames == 0 || self.burst_frames > BURST_MAX {
            return bad(format!("burst must be 1..={BURST_MAX} frames"));
        }
        if self.tx_backlog_frames_max == 0
            || self.neighbour_ring_slots == 0
            || self.wire_ring_slots == 0
        {
            return bad("backlog and ring sizes must be positive".into());
        }
        self.nic_config()
            .validate()
            .map_err(|e| RuntimeError::Config(format!("nic: {e:?}")))?;
        self.build_forwarder().map(|_| ())
    }

    /// The NIC queue of one port on one shard.
    pub(crate) fn nic_config(&self) -> NicConfig {
        let mut gro = self.nic.gro;
        gro.enabled = false;
        NicConfig {
            queues: 1,
            rx_checksum_offload: false,
            moderation: ModerationConfig::OFF,
            gro,
            ..self.nic.clone()
        }
    }
}

/// One shard's published figures (single writer: the shard), for the live view.
#[derive(Debug, Default)]
pub struct RouterLive {
    rx_frames: AtomicU64,
    forwarded: AtomicU64,
    local: AtomicU64,
    drops: AtomicU64,
    icmp_sent: AtomicU64,
    tx_frames: AtomicU64,
    started: AtomicBool,
}

/// A copy of one shard's [`RouterLive`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterSnapshot {
    /// Frames the forwarder judged.
    pub rx_frames: u64,
    pub forwarded: u64,
    /// Frames for the router itself (handed to a port's stack).
    pub local: u64,
    /// Forwarder drops, every reason.
    pub drops: u64,
    pub icmp_sent: u64,
    /// Frames the ports accepted for transmission.
    pub tx_frames: u64,
    /// The shard is running its loop.
    pub started: bool,
}

impl RouterLive {
    fn publish(&self, c: &Counters, tx_frames: u64) {
        self.rx_frames.store(c.rx_frames, Ordering::Relaxed);
        self.forwarded.store(c.forwarded, Ordering::Relaxed);
        self.local.store(c.local, Ordering::Relaxed);
        self.drops.store(c.drops_total(), Ordering::Relaxed);
        self.icmp_sent.store(c.icmp_sent(), Ordering::Relaxed);
        self.tx_frames.store(tx_frames, Ordering::Relaxed);
    }

    /// The figures now.
    pub fn snapshot(&self) -> RouterSnapshot {
        RouterSnapshot {
            rx_frames: self.rx_frames.load(Ordering::Relaxed),
            forwarded: self.forwarded.load(Ordering::Relaxed),
            local: self.local.load(Ordering::Relaxed),
            drops: self.drops.load(Ordering::Relaxed),
            icmp_sent: self.icmp_sent.load(Ordering::Relaxed),
            tx_frames: self.tx_frames.load(Ordering::Relaxed),
            started: self.started.load(Ordering::Acquire),
        }
    }
}

/// What one port did on one shard.
#[derive(Debug, Clone, Default)]
pub struct RouterPortReport {
    /// The OS port's (or the wire rings') counters.
    pub port: PortCounters,
    /// The port's NIC queue on this shard (ring-full, malformed and oversize drops).
    pub nic: QueueCounters,
    pub pool: PoolCounters,
    /// The port's stack (ARP/ND, ICMP echo, its own drops).
    pub stack: stack::Counters,
    /// Frames the OS accepted that the forwarder sent out of this port.
    pub tx_forwarded: u64,
    /// Frames the port's stack sent (ARP, ND, echo replies).
    pub tx_local: u64,
    /// Frames dropped because the port's backlog was full.
    pub tx_drop_backlog_full: u64,
}

/// What one router shard did, returned when it stops.
#[derive(Debug, Clone, Default)]
pub struct RouterShardReport {
    pub shard: u16,
    pub core: Option<usize>,
    pub pin_failed: bool,
    pub forward: Counters,
    /// Per port, in port order.
    pub ports: Vec<RouterPortReport>,
    /// ARP/ND frames copied to other shards, and copies dropped for a full ring.
    pub neighbour_copies: u64,
    pub neighbour_copy_drop_ring_full: u64,
    /// Turns that found work, and idle waits.
    pub busy_turns: u64,
    pub idle_waits: u64,
}

/// Where a transmitted buffer goes back to: port `p`'s NIC pool (a received frame) or its
/// stack's pool (a frame the stack built).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Nic(u16),
    Stack(u16),
}

/// A port's I/O as the router needs it: a [`ShardIo`] with the descriptor to wait on.
pub(crate) trait RouterIo: ShardIo {
    /// The descriptor that becomes readable when frames wait; `None`: the port unparks.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>>;
    /// Frames the port took still wait for a `flush` that failed (an AF_PACKET transmit
    /// ring's kick that met a full device queue): nothing wakes the router for them, so
    /// its idle wait is capped at [`TX_PENDING_POLL_NS_MAX`].
    fn tx_pending(&self) -> bool {
        false
    }
}

/// Longest idle wait while a port holds frames it could not hand to the OS yet (a transmit
/// backlog, an AF_PACKET kick to retry), ns: transmit completions wake no descriptor.
pub const TX_PENDING_POLL_NS_MAX: u64 = 50_000;

impl RouterIo for MemIo {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

impl RouterIo for LivePort {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.wait_fd.as_ref().map(|f| f.as_fd())
    }
    fn tx_pending(&self) -> bool {
        match &self.kind {
            crate::port::PortKind::AfPacket(sock) => sock.tx_kick_pending(),
            _ => false,
        }
    }
}

/// One port of one shard. Invariant: `backlog.len() <= backlog_max`; `inflight` holds one
/// origin per buffer the port took without handing back (`send` returned `Ok(None)`), in
/// transmit order.
struct PortQ<I> {
    io: I,
    nic: Nic,
    backlog: VecDeque<(Vec<u8>, Origin)>,
    backlog_max: usize,
    inflight: VecDeque<Origin>,
    tx_forwarded: u64,
    tx_local: u64,
    tx_drop_backlog_full: u64,
}

/// The ports' stacks as the forwarder's neighbour table: port `p`'s ARP/ND cache answers for
/// next hops on port `p`'s link, and resolves them.
pub struct StackNeighbours<'a> {
    pub stacks: &'a mut [Stack],
}

impl Neighbours for StackNeighbours<'_> {
    fn lookup(&mut self, now_ns: u64, port: u16, addr: IpAddr) -> Option<EthernetAddress> {
        self.stacks
            .get_mut(usize::from(port))?
            .neighbor_for_send(now_ns, addr)
    }

    fn request(&mut self, now_ns: u64, port: u16, addr: IpAddr) {
        if let Some(s) = self.stacks.get_mut(usize::from(port)) {
            s.resolve_neighbor(now_ns, addr);
        }
    }
}

/// A frame for port `q`'s transmit queue: sent now, held in the backlog, or dropped (counted).
fn send<I: RouterIo>(
    ports: &mut [PortQ<I>],
    stacks: &mut [Stack],
    q: usize,
    frame: Vec<u8>,
    origin: Origin,
) {
    let Some(port) = ports.get_mut(q) else {
        give_back(ports, stacks, origin, frame);
        return;
    };
    if !port.backlog.is_empty() {
        if port.backlog.len() >= port.backlog_max {
            port.tx_drop_backlog_full += 1;
            give_back(ports, stacks, origin, frame);
        } else {
            port.backlog.push_back((frame, origin));
        }
        return;
    }
    let local = matches!(origin, Origin::Stack(_));
    match port.io.send(frame) {
        Ok(done) => {
            if local {
                port.tx_local += 1;
            } else {
                port.tx_forwarded += 1;
            }
            match done {
                Some(buf) => give_back(ports, stacks, origin, buf),
                None => port.inflight.push_back(origin),
            }
        }
        Err(frame) => port.backlog.push_back((frame, origin)),
    }
}

/// Returns a buffer to the pool it came from.
fn give_back<I>(ports: &mut [PortQ<I>], stacks: &mut [Stack], origin: Origin, buf: Vec<u8>) {
    match origin {
        Origin::Nic(p) => {
            if let Some(port) = ports.get_mut(usize::from(p)) {
                port.nic.recycle(buf);
            }
        }
        Origin::Stack(p) => {
            if let Some(s) = stacks.get_mut(usize::from(p)) {
                s.recycle(buf);
            }
        }
    }
}

/// Everything one router shard thread owns.
pub(crate) struct RouterShard<I> {
    pub shard: u16,
    pub core: Option<usize>,
    pub pin_failed: bool,
    ports: Vec<PortQ<I>>,
    stacks: Vec<Stack>,
    fwd: Forwarder,
    burst: usize,
    busy_poll: bool,
    /// Copy ARP/ND frames to the other shards (live ports with several shards).
    copy_out: Vec<Producer<(u16, Vec<u8>)>>,
    copy_in: Vec<Consumer<(u16, Vec<u8>)>>,
    /// Reused per burst: descriptors, frames, their metadata, verdicts.
    descs: Vec<RxDescriptor>,
    frames: Vec<Vec<u8>>,
    metas: Vec<RxMeta>,
    verdicts: Vec<Verdict>,
    neighbour_copies: u64,
    neighbour_copy_drop_ring_full: u64,
    live: Arc<RouterLive>,
    stop: Arc<AtomicBool>,
    epoch: Instant,
}

/// The per-shard pieces a runner hands to [`RouterShard::build`].
pub(crate) struct ShardWiring<I> {
    pub shard: u16,
    pub ios: Vec<I>,
    pub copy_out: Vec<Producer<(u16, Vec<u8>)>>,
    pub copy_in: Vec<Consumer<(u16, Vec<u8>)>>,
    pub live: Arc<RouterLive>,
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
}

fn now_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl<I: RouterIo> RouterShard<I> {
    /// Pins the calling thread (when asked) and builds the shard's NICs, stacks and
    /// forwarder on it, so their memory is first touched on the shard's core.
    pub(crate) fn build(cfg: &RouterConfig, w: ShardWiring<I>) -> Result<Self, RuntimeError> {
        let i = usize::from(w.shard);
        let core = cfg
            .cores
            .as_ref()
            .and_then(|c| (!c.is_empty()).then(|| c[i % c.len()]));
        let pin_failed = core.is_some_and(|c| platform::affinity::pin_current_thread(c).is_err());
        let nic_cfg = cfg.nic_config();
        let mut ports = Vec::with_capacity(w.ios.len());
        let mut stacks = Vec::with_capacity(w.ios.len());
        for (p, io) in w.ios.into_iter().enumerate() {
            let nic = Nic::new(nic_cfg.clone())
                .map_err(|e| RuntimeError::Config(format!("nic: {e:?}")))?;
            ports.push(PortQ {
                io,
                nic,
                backlog: VecDeque::with_capacity(cfg.tx_backlog_frames_max),
                backlog_max: cfg.tx_backlog_frames_max,
                inflight: VecDeque::with_capacity(cfg.wire_ring_slots.saturating_mul(3)),
                tx_forwarded: 0,
                tx_local: 0,
                tx_drop_backlog_full: 0,
            });
            let mut ifc = cfg.ports[p].clone();
            ifc.gateway_v4 = None;
            ifc.gateway_v6 = None;
            let mut sc = StackConfig::new(ifc);
            sc.limits = cfg.limits.clone();
            sc.secret = [0x5eed_7007_0000_0001 ^ p as u64, (i as u64) << 32 | 0x7007];
            stacks.push(Stack::new(sc));
        }
        let burst = cfg.burst_frames;
        Ok(RouterShard {
            shard: w.shard,
            core,
            pin_failed,
            ports,
            stacks,
            fwd: cfg.build_forwarder()?,
            burst,
            busy_poll: cfg.busy_poll,
            copy_out: w.copy_out,
            copy_in: w.copy_in,
            descs: Vec::with_capacity(burst),
            frames: Vec::with_capacity(burst),
            metas: Vec::with_capacity(burst),
            verdicts: vec![Verdict::Local; burst],
            neighbour_copies: 0,
            neighbour_copy_drop_ring_full: 0,
            live: w.live,
            stop: w.stop,
            epoch: w.epoch,
        })
    }

    /// Runs turns until the stop flag is set; returns the shard's report.
    pub(crate) fn run(mut self) -> RouterShardReport {
        self.live.started.store(true, Ordering::Release);
        let (mut busy_turns, mut idle_waits) = (0u64, 0u64);
        while !self.stop.load(Ordering::Acquire) {
            let now = now_ns(self.epoch);
            let work = self.turn(now);
            if work > 0 {
                busy_turns += 1;
                let tx: u64 = self.ports.iter().map(|p| p.tx_forwarded + p.tx_local).sum();
                self.live.publish(&self.fwd.counters(), tx);
            } else if self.busy_poll {
                std::hint::spin_loop();
            } else {
                idle_waits += 1;
                self.idle(now);
            }
        }
        let ports = self
            .ports
            .iter_mut()
            .zip(&self.stacks)
            .map(|(p, s)| RouterPortReport {
                port: p.io.counters(),
                nic: p.nic.counters_total(),
                pool: p.nic.pool_counters(),
                stack: s.counters(),
                tx_forwarded: p.tx_forwarded,
                tx_local: p.tx_local,
                tx_drop_backlog_full: p.tx_drop_backlog_full,
            })
            .collect();
        RouterShardReport {
            shard: self.shard,
            core: self.core,
            pin_failed: self.pin_failed,
            forward: self.fwd.counters(),
            ports,
            neighbour_copies: self.neighbour_copies,
            neighbour_copy_drop_ring_full: self.neighbour_copy_drop_ring_full,
            busy_turns,
            idle_waits,
        }
    }

    /// One turn (see the module docs); returns the units of work done, 0 when idle.
    pub(crate) fn turn(&mut self, now: u64) -> usize {
        let mut work = 0;
        for q in 0..self.ports.len() {
            while let Some(buf) = self.ports[q].io.reap_completion() {
                let origin = self.ports[q]
                    .inflight
                    .pop_front()
                    .unwrap_or(Origin::Nic(q as u16));
                give_back(&mut self.ports, &mut self.stacks, origin, buf);
            }
            work += self.retry_backlog(q);
        }
        for c in &mut self.copy_in {
            while let Some((p, frame)) = c.pop() {
                if let Some(s) = self.stacks.get_mut(usize::from(p)) {
                    s.receive(now, &frame, &RxMeta::NONE);
                }
                work += 1;
            }
        }
        for p in 0..self.ports.len() {
            work += self.rx_burst(now, p);
        }
        for p in 0..self.ports.len() {
            work += self.stack_turn(now, p);
        }
        for port in &mut self.ports {
            port.io.flush();
        }
        work
    }

    /// Frames the port refused earlier, oldest first, until it refuses again.
    fn retry_backlog(&mut self, q: usize) -> usize {
        let mut work = 0;
        while let Some((frame, origin)) = self.ports[q].backlog.pop_front() {
            let port = &mut self.ports[q];
            match port.io.send(frame) {
                Ok(done) => {
                    work += 1;
                    match origin {
                        Origin::Stack(_) => port.tx_local += 1,
                        Origin::Nic(_) => port.tx_forwarded += 1,
                    }
                    match done {
                        Some(buf) => give_back(&mut self.ports, &mut self.stacks, origin, buf),
                        None => port.inflight.push_back(origin),
                    }
                }
                Err(frame) => {
                    port.backlog.push_front((frame, origin));
                    break;
                }
            }
        }
        work
    }

    /// One burst from port `p`: receive, judge, dispatch.
    fn rx_burst(&mut self, now: u64, p: usize) -> usize {
        let port = &mut self.ports[p];
        let received = port
            .io
            .receive(&mut RxQueue::new(&mut port.nic, now), self.burst);
        while port.nic.poll_wakeup(now).is_some() {}
        self.descs.clear();
        let _ = port.nic.poll_rx(0, self.burst, now, &mut self.descs);
        if self.descs.is_empty() {
            return received;
        }
        self.frames.clear();
        self.metas.clear();
        for d in self.descs.drain(..) {
            self.frames.push(d.frame);
            self.metas.push(d.meta);
        }
        let n = self.frames.len();
        let mut neighbours = StackNeighbours {
            stacks: &mut self.stacks,
        };
        self.fwd.process_burst(
            now,
            p as u16,
            &mut self.frames[..],
            &mut self.verdicts[..n],
            &mut neighbours,
        );
        let origin = Origin::Nic(p as u16);
        for (i, frame) in self.frames.drain(..).enumerate() {
            match self.verdicts[i] {
                Verdict::Forward { port: q } | Verdict::IcmpError { port: q, .. } => {
                    send(
                        &mut self.ports,
                        &mut self.stacks,
                        usize::from(q),
                        frame,
                        origin,
                    );
                }
                Verdict::Local => {
                    if !self.copy_out.is_empty() && is_neighbour_frame(&frame) {
                        for out in &mut self.copy_out {
                            // Rare (ARP/ND): a copy allocates, and is freed by its receiver.
                            match out.push((p as u16, frame.clone())) {
                                Ok(()) => self.neighbour_copies += 1,
                                Err(_) => self.neighbour_copy_drop_ring_full += 1,
                            }
                        }
                    }
                    self.stacks[p].receive(now, &frame, &self.metas[i]);
                    self.ports[p].nic.recycle(frame);
                }
                Verdict::Drop(_) => self.ports[p].nic.recycle(frame),
            }
        }
        n.max(received)
    }

    /// Port `p`'s stack: due timers, events discarded (it has no sockets), its output.
    fn stack_turn(&mut self, now: u64, p: usize) -> usize {
        let mut work = 0;
        let st = &mut self.stacks[p];
        if st.poll_timeout().is_some_and(|t| t <= now) {
            st.handle_timeout(now);
            work += 1;
        }
        while st.poll_event().is_some() {}
        if !self.ports[p].backlog.is_empty() {
            return work;
        }
        for _ in 0..self.burst {
            let Some(frame) = self.stacks[p].poll_transmit(now) else {
                break;
            };
            work += 1;
            send(
                &mut self.ports,
                &mut self.stacks,
                p,
                frame,
                Origin::Stack(p as u16),
            );
        }
        work
    }

    /// Nothing to do: wait for any port, an unpark, or the next stack deadline.
    fn idle(&mut self, now: u64) {
        let deadline = self.stacks.iter().filter_map(|s| s.poll_timeout()).min();
        let mut sleep_ns = deadline.map_or(IDLE_SLEEP_NS_MAX, |d| d.saturating_sub(now));
        sleep_ns = sleep_ns.min(IDLE_SLEEP_NS_MAX);
        if !self.copy_in.is_empty() {
            // Neighbour copies from other shards do not wake a thread asleep in `ppoll`.
            sleep_ns = sleep_ns.min(FORWARD_POLL_NS_MAX);
        }
        if self
            .ports
            .iter()
            .any(|p| !p.backlog.is_empty() || p.io.tx_pending())
        {
            // A full transmit ring or device queue frees up without waking us.
            sleep_ns = sleep_ns.min(TX_PENDING_POLL_NS_MAX);
        }
        if sleep_ns == 0 {
            return;
        }
        let park = || std::thread::park_timeout(Duration::from_nanos(sleep_ns));
        let Some(first) = self.ports.first().and_then(|p| p.io.wait_fd()) else {
            park();
            return;
        };
        let mut fds = [first; ROUTER_PORTS_MAX];
        let mut n = 0;
        for port in &self.ports {
            match port.io.wait_fd() {
                Some(fd) if n < ROUTER_PORTS_MAX => {
                    fds[n] = fd;
                    n += 1;
                }
                // A port without a descriptor (the `mem` wire) unparks us instead.
                _ => {
                    park();
                    return;
                }
            }
        }
        if platform::wait::wait_any_readable_ns(&fds[..n], sleep_ns).is_err() {
            park();
        }
    }
}
