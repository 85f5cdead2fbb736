//! Shards on real threads: the thread driver of the sans-IO shard core (`shard::Shard`).
//!
//! A host is `S` shards. Each shard is one thread, pinned to its core when asked, that drives
//! one shard core: its queue pair (a one-queue [`nic::Nic`] fed from the wire's receive ring),
//! its [`stack::Stack`] (same interface addresses on every shard: one host, one IP, `S`
//! queues), timers, buffer pool and an application instance ([`app::App`], built on the
//! shard's own thread by the factory). The iteration is the core's; what the thread adds is in
//! [`mod@shard`]'s module docs.
//!
//! No locks and no shared mutable state on the data path: frames move wire → shard and
//! shard → wire through bounded SPSC rings ([`mod@ring`]); shards exchange frames only through
//! bounded SPSC cross-shard rings, every message counted (`cross_shard_tx`). Those hops happen
//! only when a host has fewer hardware queues than shards (`queues < shards`): queue `q` is
//! polled by shard `q`, and a software RETA over the shards sends each flow to its owner.
//! With `queues == shards` the data path has no cross-shard message at all.
//!
//! Buffers go back where they came from, so a steady flow allocates nothing: the `mem` wire
//! copies each frame into a receive buffer the destination shard posted and returns the
//! sender's buffer as a transmit completion ([`wire`]); a shard that receives a cross-shard
//! message returns a buffer of its pool to the sender on a ring beside the message ring.
//!
//! Each shard's stack gets `StackConfig.rss` with the NIC's hasher and the shard's home in the
//! shard-level RETA, so `connect` picks source ports whose replies hash back to the opening
//! shard. Each host draws its RSS key at random ([`rss_key`]), so the stacks index their
//! connection tables by the carried hash (hash once); under a pinned key they hash tuples
//! themselves.
//!
//! A placement plan (`topo::plan`) is executed through [`HostConfig::place`]: each shard is
//! pinned to the plan's CPU, reports the plan's node in its `ShardInfo`, and on a machine of
//! several nodes prefers that node's memory before it allocates anything ([`placement`]).
//!
//! [`run_pair`] joins a server and a client host with the `mem` backend ([`wire`]) and runs them
//! until a duration passes or every client shard says it is done. [`run_host`] ([`host`]) runs
//! one host whose shards talk to OS ports (TAP, AF_PACKET, AF_XDP) or replay a pcap file. Both
//! drive the same shard thread ([`mod@shard`]), generic over the shard's port ([`io`]).
#![deny(unsafe_code)]

pub mod host;
pub mod io;
pub mod live;
pub mod offload;
mod offload_live;
pub mod placement;
mod port;
pub mod rebalance;
pub mod ring;
pub mod router;
pub mod router_host;
pub mod rss_key;
pub mod shard;
pub mod wire;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use app::{App, ShardInfo};
use nic::{Nic, NicConfig};
use rss::{Reta, RssHasher};
use stack::{InterfaceConfig, Limits, RssConfig, Stack, StackConfig};

pub use host::{HostLimits, HostView, LiveConfig, LiveIo, LiveReport, run_host};
pub use io::PortCounters;
pub use live::{ShardLive, ShardSnapshot};
pub use offload::{EngineReport, HostOffloadReport, OffloadSettings};
pub use placement::NodeMemory;
pub use rebalance::{RebalanceReport, RebalanceSettings};
pub use router::{RouterConfig, RouterShardReport, RouterSnapshot};
pub use router_host::{
    RoutedReport, RoutedView, RouterReport, RouterView, run_routed_pair, run_router,
};
pub use shard::ShardReport;
pub use wire::{WireConfig, WireReport};

use crate::io::{MemIo, ShardIo};
use crate::ring::ring;
use crate::shard::ShardThread;
use crate::wire::{Wire, WirePort};

/// One host: its interface, shards, hardware queues, NIC and ring sizes.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub interface: InterfaceConfig,
    /// Shards (threads), ≥ 1.
    pub shards: u16,
    /// Hardware receive queues, `1..=shards`.
    pub queues: u16,
    /// The NIC's RSS hash function (a symmetric one puts both directions of a flow on one
    /// queue index). [`HostConfig::new`] gives it a key drawn at random for this host
    /// ([`rss_key::random_rss_key`]); [`HostConfig::pin_rss_key`] sets a known one.
    pub hasher: RssHasher,
    /// The key [`HostConfig::new`] drew for this host; `None` once a key was pinned. The
    /// stacks trust the carried hash for their connection tables only while `hasher` uses
    /// this key in plain mode ([`HostConfig::rss_key_is_secret`]).
    pub random_rss_key: Option<rss::RssKey>,
    /// Per-shard NIC settings (moderation, ring slots, coalescing); `queues` is ignored (each
    /// shard's NIC has one queue).
    pub nic: NicConfig,
    pub limits: Limits,
    /// Core of each shard; `None` runs unpinned. Shorter lists wrap around.
    pub cores: Option<Vec<usize>>,
    /// NUMA node of each shard, as a placement plan gives it ([`HostConfig::place`]); wraps
    /// as `cores` does. Empty, or `None` for a shard: the node of the shard's core read from
    /// sysfs (0 when unpinned). `ShardInfo::numa_node` reports this node.
    pub nodes: Vec<Option<u16>>,
    /// Each shard thread sets its memory policy to prefer its planned node right after
    /// pinning (`platform::mempolicy`); on only when the machine has more than one node.
    pub node_memory: bool,
    /// NAPI budget per poll, in packets.
    pub budget_packets: usize,
    /// Slots of each wire → shard and shard → wire ring.
    pub wire_ring_slots: usize,
    /// Slots of each shard → shard ring.
    pub cross_ring_slots: usize,
    /// The host's secret (128 bits): each shard's stack keys its initial sequence numbers
    /// (RFC 6528), SYN cookies and table hash with it (shard `i`'s second word is XORed with
    /// `i << 32`, so no two shards share a key). Drawn at random by [`HostConfig::new`]
    /// ([`rss_key::random_secret`]): a peer must not predict a run's ISNs from another run's.
    pub secret: [u64; 2],
    /// Live RSS rebalancing ([`rebalance`]): the RETA follows the load and the connections of
    /// a moved bucket migrate to their new shard. `mem` hosts with one queue per shard only.
    pub rebalance: Option<RebalanceSettings>,
    /// An offload engine on a core of its own serving shard 0's connections ([`offload`]):
    /// `mem` hosts with one queue per shard, without rebalancing.
    pub offload: Option<OffloadSettings>,
    /// The port's offloads (`--nic-offload`, as `ethtool -K`): TSO, checksums, GRO. Off by
    /// default; a live command turns on what the user did not switch off.
    pub nic_offload: NicOffload,
    /// Wildcard steering rules (`ethtool -N`: `queue N` names a shard, or `drop`), first
    /// match wins, after ATR's exact entries and before RSS: on the `mem` wire's steering
    /// NIC, and on live ports where each shard's software RETA runs (`shard::steer`).
    pub rules: rss::RuleSet,
    /// ATR on live ports with more than one shard: a shard's active opens tell every shard
    /// that their replies are its own (on by default; the `mem` wire's RSS source ports
    /// already bring replies home).
    pub atr: bool,
}

/// The offloads asked of a live port, as `ethtool -K` names them. What each does per port:
///
/// - `tso`: the stacks hand out TCP frames of up to 64 KiB (whole segments of the MSS, within
///   the congestion and peer windows). A TAP port opened with a virtio-net header hands them
///   to the kernel whole (`gso_type` TCPV4/TCPV6, `gso_size` = payload per segment) and the
///   kernel segments them; other ports (AF_PACKET, AF_XDP, pcap) have the NIC model segment
///   them in software before the port.
/// - `csum`: on a TAP port the stacks leave TCP checksums partial (`NEEDS_CSUM`) for the
///   kernel to complete, and a received frame the kernel marked `DATA_VALID` (or left
///   partial: its data never left this host) skips checksum verification. TSO frames are
///   always partial.
/// - `gro`: the kernel may hand the TAP reader coalesced TCP frames (`TUNSETOFFLOAD`
///   TSO4/TSO6), taken whole (up to 64 KiB); off, it segments them before us.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicOffload {
    pub tso: bool,
    pub csum: bool,
    pub gro: bool,
}

impl NicOffload {
    /// Every offload on (what a live command uses unless told otherwise).
    pub const ALL: NicOffload = NicOffload {
        tso: true,
        csum: true,
        gro: true,
    };
    /// Every offload off: whole MTU-sized frames, software checksums both ways.
    pub const NONE: NicOffload = NicOffload {
        tso: false,
        csum: false,
        gro: false,
    };

    /// Whether a TAP port needs the virtio-net header for these offloads.
    pub fn needs_vnet_hdr(&self) -> bool {
        self.tso || self.csum || self.gro
    }
}

impl HostConfig {
    /// A host with `shards` shards and as many queues, default NIC and limits, unpinned, and
    /// an RSS key drawn at random (secret: the stacks hash each segment once).
    pub fn new(interface: InterfaceConfig, shards: u16) -> Self {
        let key = rss_key::random_rss_key();
        HostConfig {
            interface,
            shards,
            queues: shards,
            hasher: RssHasher::new(&key, rss::SymmetricMode::None),
            random_rss_key: Some(key),
            nic: NicConfig::default(),
            limits: Limits {
                // Every connection a client shard opens at start waits for the one ARP
                // resolution: let them all queue (bounded) instead of dropping all but 4
                // SYNs and waiting a second for their retransmission.
                neighbor_pending_packets_max: 1024,
                ..Limits::default()
            },
            cores: None,
            nodes: Vec::new(),
            node_memory: false,
            budget_packets: nic::BUDGET_DEFAULT_PACKETS,
            wire_ring_slots: 4096,
            cross_ring_slots: 1024,
            secret: rss_key::random_secret(),
            rebalance: None,
            offload: None,
            nic_offload: NicOffload::NONE,
            rules: rss::RuleSet::default(),
            atr: true,
        }
    }
}

/// When [`run_pair`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Stop after this long at the latest.
    pub duration: Duration,
    /// Stop earlier once every client shard's application says it is done.
    pub stop_when_client_done: bool,
    /// How often the monitor callback runs.
    pub monitor_every: Duration,
}

/// Why a run could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeError {
    /// A configuration value is out of range.
    Config(String),
    /// A thread could not be spawned or panicked.
    Thread(String),
    /// An OS port could not be opened (the message names the port and the OS error).
    Io(String),
}

impl core::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RuntimeError::Config(m) => write!(f, "bad configuration: {m}"),
            RuntimeError::Thread(m) => write!(f, "thread failure: {m}"),
            RuntimeError::Io(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// What a host did: one report per shard, in shard order.
#[derive(Debug)]
pub struct HostReport<A> {
    pub shards: Vec<ShardReport<A>>,
    /// The host's steering rules and ATR: the shards' (where a software RETA runs) and the
    /// steering NIC's (the `mem` wire's), summed.
    pub filters: FilterReport,
}

/// What the host's flow steering did ([`HostConfig::rules`], [`HostConfig::atr`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterReport {
    /// The host's rules ([`HostConfig::rules`]), in order.
    pub rules: rss::RuleSet,
    /// Packets each rule matched (steered or dropped), in the rules' order.
    pub rule_hits: Vec<u64>,
    /// Packets `drop` rules dropped.
    pub rule_drops: u64,
    /// Active opens recorded by ATR (each shard counts its own and the ones it was told).
    pub atr_learned: u64,
    /// Of those, entries that replaced another flow's in their slot.
    pub atr_replaced: u64,
    /// Received packets an ATR entry steered.
    pub atr_hits: u64,
}

impl FilterReport {
    fn add_hits(&mut self, hits: &[u64]) {
        if self.rule_hits.len() < hits.len() {
            self.rule_hits.resize(hits.len(), 0);
        }
        for (t, n) in self.rule_hits.iter_mut().zip(hits) {
            *t += n;
        }
    }
}

impl<A> HostReport<A> {
    /// The host's report from its shards' (their steering summed), plus what a steering NIC
    /// in front of them counted: its rule hits and rule drops.
    pub fn from_shards(shards: Vec<ShardReport<A>>, nic: Option<(&[u64], u64)>) -> Self {
        let mut f = FilterReport::default();
        for s in &shards {
            if let Some((hits, c)) = &s.steer {
                f.add_hits(hits);
                f.rule_drops += c.rule_drops;
                f.atr_learned += c.atr_learned;
                f.atr_replaced += c.atr_replaced;
                f.atr_hits += c.atr_hits;
            }
        }
        if let Some((hits, drops)) = nic {
            f.add_hits(hits);
            f.rule_drops += drops;
        }
        HostReport { shards, filters: f }
    }
}

impl<A> HostReport<A> {
    /// Every drop the host counted: NIC receive/transmit drops, the NIC transmit ring, full
    /// cross-shard rings, the stack's full transmit queue and full neighbour queues.
    pub fn drops(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                s.nic.rx_drops()
                    + s.nic.tx_drops()
                    + s.cross_shard_drop_ring_full
                    + s.stack.tx_drop_queue_full
                    + s.stack.arp_pending_queue_full
                    + s.port.drops()
            })
            .sum()
    }

    /// The ports' counters summed over the shards.
    pub fn port_counters(&self) -> PortCounters {
        let mut c = PortCounters::default();
        for s in &self.shards {
            c.add(&s.port);
        }
        c
    }

    /// NIC wake-ups (moderated interrupts) over all shards.
    pub fn nic_wakeups(&self) -> u64 {
        self.shards.iter().map(|s| s.nic.wakeups).sum()
    }

    /// Cross-shard messages sent.
    pub fn cross_shard_messages(&self) -> u64 {
        self.shards.iter().map(|s| s.cross_shard_tx).sum()
    }

    /// Packets the host's stacks processed.
    pub fn rx_packets(&self) -> u64 {
        self.shards.iter().map(|s| s.rx_packets).sum()
    }
}

/// The outcome of [`run_pair`].
#[derive(Debug)]
pub struct PairReport<S, C> {
    pub server: HostReport<S>,
    pub client: HostReport<C>,
    pub wire: WireReport,
    /// The server host's rebalancing, when it rebalanced.
    pub rebalance: Option<RebalanceReport>,
    /// The server host's offload engine, when it had one (shard 0's layer reports in its
    /// [`ShardReport::offload`]).
    pub engine: Option<EngineReport>,
    /// Wall time from start to stop.
    pub elapsed: Duration,
}

/// What the monitor callback sees.
#[derive(Debug, Clone)]
pub struct LiveView {
    pub elapsed: Duration,
    pub server: Vec<ShardSnapshot>,
    pub client: Vec<ShardSnapshot>,
}

struct Spawned<A> {
    handles: Vec<JoinHandle<ShardReport<A>>>,
    live: Vec<Arc<ShardLive>>,
}

/// Validates `cfg` and builds the per-host pieces shared by the wire and the shards.
pub(crate) fn check(cfg: &HostConfig, name: &str) -> Result<(), RuntimeError> {
    if cfg.shards == 0 || cfg.shards > nic::QUEUES_MAX {
        return Err(RuntimeError::Config(format!(
            "{name}: shards must be 1..={}",
            nic::QUEUES_MAX
        )));
    }
    if cfg.queues == 0 || cfg.queues > cfg.shards {
        return Err(RuntimeError::Config(format!(
            "{name}: queues must be 1..=shards ({})",
            cfg.shards
        )));
    }
    if cfg.budget_packets == 0 || cfg.wire_ring_slots == 0 || cfg.cross_ring_slots == 0 {
        return Err(RuntimeError::Config(format!(
            "{name}: budget and ring sizes must be positive"
        )));
    }
    if let Some(q) = cfg.rules.max_queue().filter(|q| *q >= cfg.shards) {
        return Err(RuntimeError::Config(format!(
            "{name}: a filter names queue {q} but the host has {} shards (queues 0..={})",
            cfg.shards,
            cfg.shards - 1
        )));
    }
    if cfg.rebalance.is_some() && cfg.rules.max_queue().is_some() {
        return Err(RuntimeError::Config(format!(
            "{name}: a filter with `queue N` keeps connections on a shard, which rebalancing \
             would move: use one or the other"
        )));
    }
    if let Some(r) = &cfg.rebalance {
        if r.period.is_zero() {
            return Err(RuntimeError::Config(format!(
                "{name}: the rebalancing period must be positive"
            )));
        }
        r.config
            .validate()
            .map_err(|e| RuntimeError::Config(format!("{name}: rebalance: {e:?}")))?;
    }
    Ok(())
}

/// The NIC the wire steers with: `queues` queues and the host's hasher.
fn steering_nic(cfg: &HostConfig) -> Result<Nic, RuntimeError> {
    let mut n = Nic::new(NicConfig {
        queues: cfg.queues,
        ..cfg.nic.clone()
    })
    .map_err(|e| RuntimeError::Config(format!("nic: {e:?}")))?;
    n.set_hasher(cfg.hasher.clone());
    n.set_rules(cfg.rules.clone())
        .map_err(|e| RuntimeError::Config(format!("nic: rules: {e}")))?;
    Ok(n)
}

/// How a host's shards exchange frames.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShardMode {
    /// Frames may reach a shard that does not own their flow: forward them over cross-shard
    /// rings (a full mesh is built) by a software RETA.
    pub forwarding: bool,
    /// Build the full mesh of cross-shard rings even without forwarding (connections move
    /// between shards: live rebalancing).
    pub mesh: bool,
    /// Shards count the packets they process per RETA entry and publish them (a software
    /// RETA that rebalances: no NIC counts for it).
    pub count_buckets: bool,
    /// Copy ARP/ND frames to every other shard (live ports).
    pub copy_neighbour: bool,
}

/// What every shard of a host shares: the stop flag, the clock's epoch, and each shard's
/// thread (set as it starts, for unparking).
pub(crate) struct HostShared {
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
    pub threads: Arc<Vec<OnceLock<Thread>>>,
}

/// What some shards of a host have beyond the common parts: the control rings to the `mem`
/// wire (per shard, when the host rebalances) and shard 0's offload layer (when the host has
/// an offload engine).
pub(crate) struct Extras {
    pub controls: Vec<Option<shard::Control>>,
    pub offload: Option<offload::ShardOffload>,
}

/// One starter per shard and the shards' live figures.
pub(crate) type Built<A> = (Vec<Starter<A>>, Vec<Arc<ShardLive>>);

/// Builds the shards of one host, not yet started: one per entry of `ios`, each with its port.
pub(crate) fn build_host<A, F, I>(
    cfg: &HostConfig,
    name: &str,
    factory: Arc<F>,
    shared: &HostShared,
    ios: Vec<I>,
    mode: ShardMode,
    extras: Extras,
) -> Result<Built<A>, RuntimeError>
where
    A: App + Send + 'static,
    F: Fn(ShardInfo) -> A + Send + Sync + 'static,
    I: ShardIo + 'static,
{
    check(cfg, name)?;
    let Extras {
        controls,
        mut offload,
    } = extras;
    let (stop, epoch, threads) = (&shared.stop, shared.epoch, &shared.threads);
    let s = usize::from(cfg.shards);
    // With an offload engine the host's thread list has one more entry: the engine's.
    let engine_threads = usize::from(offload.is_some());
    if ios.len() != s || threads.len() != s + engine_threads {
        return Err(RuntimeError::Config(format!(
            "{name}: {} ports for {s} shards",
            ios.len()
        )));
    }
    let sw_reta = Reta::with_equal(rss::RETA_SIZE_DEFAULT, cfg.shards)
        .map_err(|e| RuntimeError::Config(format!("{name}: reta: {e:?}")))?;
    let forwarding = mode.forwarding && s > 1;
    let mesh = (forwarding || mode.mesh) && s > 1;
    // Cross-shard rings: a full mesh only when forwarding or moves need it.
    let mut cross_out: Vec<Vec<Option<ring::Producer<::shard::Msg>>>> =
        (0..s).map(|_| (0..s).map(|_| None).collect()).collect();
    let mut cross_in: Vec<Vec<ring::Consumer<::shard::Msg>>> = (0..s).map(|_| Vec::new()).collect();
    // Beside each message ring, a ring on which the receiver returns one buffer per message
    // to the sender's pool (the message's buffer came from it): `back[to]` parallel to
    // `cross_in[to]`, `returned[from]` the sender's ends.
    let mut back: Vec<Vec<ring::Producer<Vec<u8>>>> = (0..s).map(|_| Vec::new()).collect();
    let mut returned: Vec<Vec<ring::Consumer<Vec<u8>>>> = (0..s).map(|_| Vec::new()).collect();
    if mesh {
        for (from, outs) in cross_out.iter_mut().enumerate() {
            for (to, slot) in outs.iter_mut().enumerate() {
                if from != to {
                    let (p, c) = ring(cfg.cross_ring_slots);
                    let (bp, bc) = ring(cfg.cross_ring_slots);
                    *slot = Some(p);
                    if let (Some(v), Some(b)) = (cross_in.get_mut(to), back.get_mut(to)) {
                        v.push(c);
                        b.push(bp);
                    }
                    if let Some(r) = returned.get_mut(from) {
                        r.push(bc);
                    }
                }
            }
        }
    }
    let mut starters: Vec<Starter<A>> = Vec::new();
    let mut lives = Vec::new();
    let cross = cross_in.into_iter().zip(back).zip(returned);
    let mut controls = controls.into_iter();
    for (((i, outs), ((ins, back), returned)), io) in
        cross_out.into_iter().enumerate().zip(cross).zip(ios)
    {
        let control = controls.next().flatten();
        let live = Arc::new(if mode.count_buckets {
            ShardLive::with_buckets(rss::RETA_SIZE_DEFAULT)
        } else {
            ShardLive::default()
        });
        lives.push(live.clone());
        let shard = u16::try_from(i).map_err(|_| RuntimeError::Config("shards".into()))?;
        let core = cfg.cores.as_ref().and_then(|c| {
            if c.is_empty() {
                None
            } else {
                c.get(i % c.len()).copied()
            }
        });
        let mut stack_cfg = StackConfig::new(cfg.interface.clone());
        stack_cfg.limits = cfg.limits.clone();
        stack_cfg.rss = Some(RssConfig {
            hasher: cfg.hasher.clone(),
            home: Some((sw_reta.clone(), shard)),
            // A key drawn for this host: the table is indexed by the carried hash; a known
            // (pinned, symmetric) one: by the stack's own keyed hash.
            key_is_secret: cfg.rss_key_is_secret(),
        });
        stack_cfg.secret = [cfg.secret[0], cfg.secret[1] ^ ((i as u64) << 32)];
        // TSO wherever asked (the device segments, or the NIC model in software); partial
        // TCP checksums only where the device completes them.
        let tx_offload_in_device = io.tx_offload_in_device();
        stack_cfg.tx_offload = stack::TxOffloadCaps {
            tso_payload_bytes_max: if cfg.nic_offload.tso {
                stack::TSO_PAYLOAD_BYTES_MAX
            } else {
                0
            },
            tcp_csum: cfg.nic_offload.csum && tx_offload_in_device,
        };
        let nic_cfg = NicConfig {
            queues: 1,
            ..cfg.nic.clone()
        };
        // The shard's queue pair: a one-queue NIC with the host's hasher. Built here so a bad
        // configuration is an error before any thread starts; its buffers are allocated (and
        // first touched) on the shard's thread, as the pool fills.
        let mut nic = Nic::new(nic_cfg.clone())
            .map_err(|e| RuntimeError::Config(format!("{name}: nic: {e:?}")))?;
        nic.set_hasher(cfg.hasher.clone());
        let budget = cfg.budget_packets;
        let (shards, threads, stop, factory, sw_reta) = (
            cfg.shards,
            threads.clone(),
            stop.clone(),
            factory.clone(),
            sw_reta.clone(),
        );
        let planned = placement::planned_node(&cfg.nodes, i);
        let node_memory = cfg.node_memory;
        let numa_node = placement::shard_node(&cfg.nodes, i, core);
        let thread_name = format!("{name}-shard{i}");
        let copy_neighbour = mode.copy_neighbour && forwarding;
        let count_buckets = mode.count_buckets;
        // Where the software RETA runs (live ports): rules (a `drop` rule on one shard too)
        // and ATR there; on the `mem` wire the steering NIC has the rules.
        let sw_steer = (mode.forwarding && (!cfg.rules.is_empty() || cfg.atr))
            .then(|| ::shard::SwSteer::new(cfg.rules.clone(), cfg.atr));
        let shard_offload = if i == 0 { offload.take() } else { None };
        starters.push(Box::new(move || {
            std::thread::Builder::new()
                .name(thread_name)
                .spawn(move || {
                    let pin_failed =
                        core.is_some_and(|c| platform::affinity::pin_current_thread(c).is_err());
                    // Before anything of the shard is allocated: its buffers, stack and
                    // application are then first touched under the policy.
                    let node_memory = placement::apply_node_memory(planned, node_memory);
                    let info = ShardInfo {
                        shard,
                        shards,
                        numa_node,
                    };
                    // Built on the shard's own thread: its memory is first touched here.
                    let app = factory(info);
                    let shard_cfg = ::shard::ShardConfig {
                        budget_packets: budget,
                        sw_reta: forwarding.then_some(sw_reta),
                        copy_neighbour,
                        count_buckets,
                        tx_offload_in_device,
                        sw_steer,
                        ..::shard::ShardConfig::new(info)
                    };
                    ShardThread {
                        core: ::shard::Shard::new(shard_cfg, nic, Stack::new(stack_cfg), app),
                        cpu: core,
                        pin_failed,
                        node_memory,
                        io,
                        cross_out: outs,
                        cross_in: ins,
                        cross_back: back,
                        cross_returned: returned,
                        control,
                        offload: shard_offload,
                        shard_threads: threads,
                        live,
                        stop,
                        epoch,
                    }
                    .run()
                })
                .map_err(|e| RuntimeError::Thread(e.to_string()))
        }));
    }
    Ok((starters, lives))
}

/// Builds the shards of one `mem` host (not yet started) and its wire port. The shards unpark
/// the wire through `wire_thread`, set once the wire thread exists.
fn spawn_host<A, F>(
    cfg: &HostConfig,
    name: &str,
    factory: Arc<F>,
    stop: &Arc<AtomicBool>,
    epoch: Instant,
    wire_thread: &Arc<OnceLock<Thread>>,
) -> Result<BuiltHost<A>, RuntimeError>
where
    A: App + Send + 'static,
    F: Fn(ShardInfo) -> A + Send + Sync + 'static,
{
    check(cfg, name)?;
    let s = usize::from(cfg.shards);
    if cfg.offload.is_some() && (cfg.queues != cfg.shards || cfg.rebalance.is_some()) {
        return Err(RuntimeError::Config(format!(
            "{name}: an offload engine needs one queue per shard and no rebalancing"
        )));
    }
    let engines = usize::from(cfg.offload.is_some());
    let threads: Arc<Vec<OnceLock<Thread>>> =
        Arc::new((0..s + engines).map(|_| OnceLock::new()).collect());
    let mut port = WirePort {
        shards: Vec::with_capacity(s + engines),
        steering: steering_nic(cfg)?,
        threads: threads.clone(),
        controls: Vec::new(),
        rebalancer: None,
        steer: None,
        engine_queue: None,
        installed: None,
    };
    // Control rings for rebalancing: room for a move of every RETA entry at once.
    let mut controls: Vec<Option<shard::Control>> = (0..s).map(|_| None).collect();
    if cfg.rebalance.is_some() && cfg.queues != cfg.shards {
        return Err(RuntimeError::Config(format!(
            "{name}: rebalancing on the mem wire moves the wire's RETA entries between queues: \
             it needs one queue per shard (queues {} < shards {})",
            cfg.queues, cfg.shards
        )));
    }
    if let Some(r) = &cfg.rebalance {
        port.rebalancer = Some(
            rebalance::WireRebalancer::new(r)
                .map_err(|e| RuntimeError::Config(format!("{name}: {e}")))?,
        );
        for c in &mut controls {
            let (to_shard, from_wire) = ring(rss::RETA_SIZE_DEFAULT * 2);
            let (to_wire, from_shard) = ring(rss::RETA_SIZE_DEFAULT * 2);
            port.controls.push(rebalance::WireControl {
                to_shard,
                from_shard,
            });
            *c = Some(shard::Control {
                from_wire,
                to_wire: Some(to_wire),
                wire_thread: wire_thread.clone(),
            });
        }
    }
    // The largest frame the wire carries: the IP MTU, the Ethernet header and a VLAN tag.
    let rx_buf_bytes = usize::from(cfg.interface.mtu_bytes) + 18;
    let slots = cfg.wire_ring_slots;
    let mut ios = Vec::with_capacity(s);
    for _ in 0..s {
        let (wire_end, io) = MemIo::with_wire_end(slots, rx_buf_bytes, wire_thread);
        port.shards.push(wire_end);
        ios.push(io);
    }
    let (shard_offload, engine) = match &cfg.offload {
        Some(o) => {
            let (so, e) = offload::parts(cfg, o, &mut port, &threads, stop, epoch, wire_thread)?;
            (Some(so), Some(e))
        }
        None => (None, None),
    };
    let mode = ShardMode {
        forwarding: cfg.queues < cfg.shards,
        mesh: cfg.rebalance.is_some(),
        count_buckets: false,
        copy_neighbour: false,
    };
    let shared = HostShared {
        stop: stop.clone(),
        epoch,
        threads,
    };
    let (starters, lives) = build_host(
        cfg,
        name,
        factory,
        &shared,
        ios,
        mode,
        Extras {
            controls,
            offload: shard_offload,
        },
    )?;
    Ok((port, starters, lives, engine))
}

/// Starts one shard's thread.
pub(crate) type Starter<A> = Box<dyn FnOnce() -> Result<JoinHandle<ShardReport<A>>, RuntimeError>>;

/// Starts the offload engine's thread.
pub(crate) type EngineStarter = Box<dyn FnOnce() -> Result<JoinHandle<EngineReport>, RuntimeError>>;

/// A host ready to start: its wire port, one starter per shard, the shards' live figures, and
/// the engine's starter when it has one.
type BuiltHost<A> = (
    WirePort,
    Vec<Starter<A>>,
    Vec<Arc<ShardLive>>,
    Option<EngineStarter>,
);

pub(crate) fn start_all<A>(
    starters: Vec<Starter<A>>,
    err: &mut Option<RuntimeError>,
) -> Vec<JoinHandle<ShardReport<A>>> {
    let mut hs = Vec::new();
    for st in starters {
        match st() {
            Ok(h) => hs.push(h),
            Err(e) => *err = Some(e),
        }
    }
    hs
}

pub(crate) fn join_all<A>(
    handles: Vec<JoinHandle<ShardReport<A>>>,
) -> Result<Vec<ShardReport<A>>, RuntimeError> {
    handles
        .into_iter()
        .map(|h| {
            h.thread().unpark();
            h.join()
                .map_err(|_| RuntimeError::Thread("a shard panicked".into()))
        })
        .collect()
}

/// Runs a server host and a client host joined by the `mem` wire until `limits` say stop,
/// calling `monitor` every `limits.monitor_every` with the live per-shard figures.
///
/// Threads: one per shard of each host plus the wire thread; all stop within
/// `limits.duration` plus one idle sleep ([`shard::IDLE_SLEEP_NS_MAX`]).
pub fn run_pair<S, C, FS, FC>(
    server: &HostConfig,
    server_app: FS,
    client: &HostConfig,
    client_app: FC,
    wire: WireConfig,
    limits: RunLimits,
    mut monitor: impl FnMut(&LiveView),
) -> Result<PairReport<S, C>, RuntimeError>
where
    S: App + Send + 'static,
    C: App + Send + 'static,
    FS: Fn(ShardInfo) -> S + Send + Sync + 'static,
    FC: Fn(ShardInfo) -> C + Send + Sync + 'static,
{
    run_pair_until(
        server,
        server_app,
        client,
        client_app,
        wire,
        limits,
        move |v| {
            monitor(v);
            ControlFlow::Continue(())
        },
    )
}

/// [`run_pair`] whose monitor may also stop the run early: returning
/// [`ControlFlow::Break`] stops it as the duration would (e.g. a test that measured what it
/// needed after a number of packets rather than a time).
pub fn run_pair_until<S, C, FS, FC>(
    server: &HostConfig,
    server_app: FS,
    client: &HostConfig,
    client_app: FC,
    wire: WireConfig,
    limits: RunLimits,
    mut monitor: impl FnMut(&LiveView) -> ControlFlow<()>,
) -> Result<PairReport<S, C>, RuntimeError>
where
    S: App + Send + 'static,
    C: App + Send + 'static,
    FS: Fn(ShardInfo) -> S + Send + Sync + 'static,
    FC: Fn(ShardInfo) -> C + Send + Sync + 'static,
{
    let (server_config, client_config) = (server, client);
    let stop = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let wire_slot: Arc<OnceLock<Thread>> = Arc::new(OnceLock::new());
    let (sport, sstart, slive, sengine) = spawn_host(
        server,
        "server",
        Arc::new(server_app),
        &stop,
        epoch,
        &wire_slot,
    )?;
    let (cport, cstart, clive, _) = spawn_host(
        client,
        "client",
        Arc::new(client_app),
        &stop,
        epoch,
        &wire_slot,
    )?;
    // Port 0 is the client (direction 0: client → server).
    let w = Wire::new(wire, [cport, sport], stop.clone(), epoch);
    let wire_handle = std::thread::Builder::new()
        .name("mem-wire".into())
        .spawn(move || w.run())
        .map_err(|e| RuntimeError::Thread(e.to_string()))?;
    let wire_thread = wire_handle.thread().clone();
    let _ = wire_slot.set(wire_thread.clone());
    let mut spawn_err = None;
    let engine_handle = match sengine.map(|st| st()) {
        Some(Ok(h)) => Some(h),
        Some(Err(e)) => {
            spawn_err = Some(e);
            None
        }
        None => None,
    };
    let server_spawned = Spawned {
        handles: start_all(sstart, &mut spawn_err),
        live: slive,
    };
    let client_spawned = Spawned {
        handles: start_all(cstart, &mut spawn_err),
        live: clive,
    };
    let snapshot = |sp: &Vec<Arc<ShardLive>>| sp.iter().map(|l| l.snapshot()).collect::<Vec<_>>();
    if spawn_err.is_none() {
        loop {
            let step = limits.monitor_every.max(Duration::from_millis(1));
            let left = limits.duration.saturating_sub(epoch.elapsed());
            std::thread::sleep(step.min(left));
            let view = LiveView {
                elapsed: epoch.elapsed(),
                server: snapshot(&server_spawned.live),
                client: snapshot(&client_spawned.live),
            };
            let stop_now = monitor(&view).is_break();
            let client_done = view.client.iter().all(|s| s.done);
            if stop_now
                || epoch.elapsed() >= limits.duration
                || (limits.stop_when_client_done && client_done)
            {
                break;
            }
        }
    }
    stop.store(true, Ordering::Release);
    let elapsed = epoch.elapsed();
    wire_thread.unpark();
    let server_shards = join_all(server_spawned.handles)?;
    let client_shards = join_all(client_spawned.handles)?;
    let engine = match engine_handle {
        Some(h) => Some(
            h.join()
                .map_err(|_| RuntimeError::Thread("the offload engine panicked".into()))?,
        ),
        None => None,
    };
    let (wire_report, rule_hits, [_, server_rebalance]) = wire_handle
        .join()
        .map_err(|_| RuntimeError::Thread("the wire panicked".into()))?;
    if let Some(e) = spawn_err {
        return Err(e);
    }
    let [client_hits, server_hits] = &rule_hits;
    let mut server =
        HostReport::from_shards(server_shards, Some((server_hits, wire_report.drop_rule[1])));
    server.filters.rules = server_config.rules.clone();
    let mut client =
        HostReport::from_shards(client_shards, Some((client_hits, wire_report.drop_rule[0])));
    client.filters.rules = client_config.rules.clone();
    Ok(PairReport {
        server,
        client,
        wire: wire_report,
        rebalance: server_rebalance,
        engine,
        elapsed,
    })
}
