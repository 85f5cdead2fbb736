//! Hosts made of the production shard core: the real `nic` model in front of N
//! [`shard::Shard`]s, each with its own real [`stack::Stack`] and [`app::App`] instance, so the
//! simulator runs the same iteration as the threaded runtime, on the virtual clock.
//!
//! A [`ShardedHost`] has one Ethernet port ([`PortId`] 0) and one address shared by its
//! shards, as a host with a multi-queue NIC. A frame from the link is steered as the NIC would
//! (exact-match filters → RSS → RETA → queue `q`, served by shard `q`; with fewer queues than
//! shards the polling shard forwards a frame it does not own to its owner as a message, like
//! the runtime's software RETA); an ARP reply is given
//! to every shard, so every shard's neighbour cache learns a peer that one shard asked for
//! (the `mem` wire does the same). Each shard's own NIC queue then applies moderation,
//! coalescing and the NAPI budget before its stack sees the frame.
//!
//! Call order within an activation (see [`Host`]): the frame (if any) goes into its shard's NIC
//! queue; every shard runs one iteration ([`shard::Shard::handle_timeout`]); messages between
//! shards are delivered at once, in shard order, and their receivers run again (bounded
//! rounds); the world then drains [`Host::poll_transmit`] (shard order) and re-arms the
//! host's timer at the earliest deadline of any shard. Everything is deterministic: shards are
//! visited in index order, no hash map is iterated.

use core::any::Any;

use app::{App, ShardInfo};
use nic::{Nic, NicConfig};
use offload::{Engine, EngineConfig, HostConfig, HostOffload, Steer};
use rss::{Reta, RssHasher, RssKey, SymmetricMode};
use shard::{Msg, Shard, ShardConfig, is_arp_reply};
use stack::{FourTuple, RssConfig, SocketHandle, Stack, StackConfig, earliest_deadline};

use crate::host::{Host, PortId};

/// Rounds of message delivery between shards per activation; messages left over wait for the
/// next activation (at the same instant: a shard with work pending asks for one).
const MSG_ROUNDS_MAX: usize = 4;

/// How a [`ShardedHost`] is built.
#[derive(Debug, Clone)]
pub struct ShardedHostConfig {
    /// The interface and stack settings every shard shares (one host, one address). Each
    /// shard's copy gets its RSS home and its own ISN secret (shard 0 keeps `stack.secret`).
    pub stack: StackConfig,
    /// Shards, ≥ 1.
    pub shards: u16,
    /// Hardware receive queues, `1..=shards`: queue `q` is polled by shard `q`. With fewer
    /// queues than shards, a shard forwards frames of flows it does not own to their owner
    /// through the shard cores' software RETA (counted messages).
    pub queues: u16,
    /// The NIC's settings (moderation, rings, coalescing); `queues` is set from `shards`.
    pub nic: NicConfig,
    /// The NIC's RSS hash function. [`ShardedHostConfig::new`] gives it a key derived from
    /// `stack.secret` (so from the workload's seed: deterministic), which no peer in the world
    /// knows; [`ShardedHostConfig::pin_rss_key`] sets a known one.
    pub hasher: RssHasher,
    /// The key derived for this host; `None` once a key was pinned. The stacks trust the
    /// carried hash for their connection tables only while `hasher` uses this key in plain
    /// mode ([`ShardedHostConfig::rss_key_is_secret`]).
    pub derived_rss_key: Option<RssKey>,
    /// NAPI budget per poll.
    pub budget_packets: usize,
    /// Wildcard steering rules (`ethtool -N`): the steering NIC's with a queue per shard,
    /// else the shard cores' (where their software RETA runs).
    pub rules: rss::RuleSet,
    /// ATR: replies of a connection a shard opened come back to it (the steering NIC samples
    /// what each shard transmits, or the shard cores tell each other).
    pub atr: bool,
}

impl ShardedHostConfig {
    /// One shard, the default NIC, and a hasher whose key is derived from `stack.secret`.
    pub fn new(stack: StackConfig) -> Self {
        let key = rss_key_from_secret(stack.secret);
        ShardedHostConfig {
            stack,
            shards: 1,
            queues: 1,
            nic: NicConfig::default(),
            hasher: RssHasher::new(&key, SymmetricMode::None),
            derived_rss_key: Some(key),
            budget_packets: nic::BUDGET_DEFAULT_PACKETS,
            rules: rss::RuleSet::default(),
            atr: false,
        }
    }

    /// The same host with `shards` shards and as many queues.
    pub fn with_shards(mut self, shards: u16) -> Self {
        self.shards = shards;
        self.queues = shards;
        self
    }

    /// The same host with `queues` hardware queues.
    pub fn with_queues(mut self, queues: u16) -> Self {
        self.queues = queues;
        self
    }

    /// True when the stacks may index their tables by the carried hash: the hasher still uses
    /// the key derived for this host, in plain mode. Any other key, or a symmetric mode,
    /// counts as known to the peers (as in `runtime::HostConfig::rss_key_is_secret`).
    pub fn rss_key_is_secret(&self) -> bool {
        self.hasher.mode() == SymmetricMode::None
            && self.derived_rss_key.as_ref() == Some(self.hasher.key())
    }

    /// Uses `key` (plain Toeplitz) instead of the derived one; it counts as known.
    pub fn pin_rss_key(mut self, key: &RssKey) -> Self {
        self.hasher = RssHasher::new(key, SymmetricMode::None);
        self.derived_rss_key = None;
        self
    }
}

/// The RSS key a simulated host derives from its stack secret: 40 bytes of SplitMix64 seeded
/// with both secret words (a different stream from the ISN and cookie keys, which use the
/// words directly). Deterministic, so a seed replays the same steering.
pub fn rss_key_from_secret(secret: [u64; 2]) -> RssKey {
    let mut state = secret[0] ^ secret[1].rotate_left(23) ^ 0x7f4a_7c15_0b5e_ed55;
    let mut bytes = [0u8; rss::KEY_LEN_BYTES];
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        for (b, w) in chunk.iter_mut().zip(z.to_le_bytes()) {
            *b = w;
        }
    }
    RssKey::new(bytes)
}

/// What the host's NIC front counted (each shard's own NIC queue counts the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrontCounters {
    /// Frames from the link.
    pub rx_frames: u64,
    /// ARP replies given to every shard (one per shard).
    pub arp_reply_copies: u64,
    /// Frames the steering could not parse, handed to the default queue's shard (whose NIC
    /// queue and stack count and drop them).
    pub steer_failed: u64,
    /// Messages delivered between shards.
    pub msgs_delivered: u64,
    /// Frames a `drop` rule of the steering NIC dropped.
    pub rule_drops: u64,
    /// RETA entries pointed at a new shard (bucket moves started).
    pub reta_moves: u64,
    /// Bucket moves refused: a bucket out of range, a shard out of range, the bucket already
    /// on that shard or still moving (or a connection of it kept by its old shard).
    pub reta_moves_refused: u64,
}

/// The host's rebalancer: the planner and reused buffers.
struct SimRebalancer {
    periodic: rss::Periodic,
    loads: Vec<u64>,
    assignment: Vec<u16>,
    moves: Vec<rss::BucketMove>,
}

/// An offload engine beside the shard cores (seed 002): its own NIC queue (the last one),
/// fed by the exact-match filters the host's offload layer installs, and the host's layer
/// over shard 0's stack (the engine serves shard 0's connections).
struct EngineCore {
    engine: Engine,
    host: HostOffload,
    queue: u16,
    /// Failed without notice: it takes and sends nothing any more.
    failed: bool,
    /// Filters installed and removed, and filter changes the NIC refused.
    filters_installed: u64,
    filters_removed: u64,
    filters_refused: u64,
}

/// A simulated host: a steering NIC in front of N shard cores (and optionally an offload
/// engine, [`ShardedHost::with_engine`]).
pub struct ShardedHost<A: App> {
    steering: Nic,
    engine: Option<EngineCore>,
    shards: Vec<Shard<A>>,
    /// Control messages for the next activation (bucket moves), in order.
    control: Vec<(u16, Msg)>,
    /// The owner shard of each RETA entry (the steering RETA's entries when every shard has
    /// its queue; the shards' software RETA otherwise), as moves leave it.
    owners: Vec<u16>,
    /// Fewer queues than shards: the shards forward by software RETA.
    software_reta: bool,
    /// Live rebalancing, when enabled: the periodic planner and its scratch.
    rebalancer: Option<SimRebalancer>,
    /// Reused: messages being delivered, and which shards received one this round.
    msgs: Vec<(u16, Msg)>,
    touched: Vec<bool>,
    /// Per shard: frames it transmitted whose buffers have not come back yet
    /// ([`Host::recycle_frame`] gives each spent buffer to the first shard owed one, so every
    /// shard's transmit pool is refilled with what it sent).
    tx_owed: Vec<u64>,
    counters: FrontCounters,
}

impl<A: App> ShardedHost<A> {
    /// Builds the host; `factory` makes each shard's application instance, in shard order.
    pub fn new(
        cfg: ShardedHostConfig,
        mut factory: impl FnMut(ShardInfo) -> A,
    ) -> Result<Self, String> {
        if cfg.shards == 0 || cfg.shards > nic::QUEUES_MAX {
            return Err(format!("shards must be 1..={}", nic::QUEUES_MAX));
        }
        if cfg.queues == 0 || cfg.queues > cfg.shards {
            return Err(format!("queues must be 1..=shards ({})", cfg.shards));
        }
        let software_reta = cfg.queues < cfg.shards;
        let mut steering = Nic::new(NicConfig {
            queues: cfg.queues,
            atr: cfg.atr.then(nic::AtrConfig::default).or(cfg.nic.atr),
            ..cfg.nic.clone()
        })
        .map_err(|e| format!("nic: {e:?}"))?;
        steering.set_hasher(cfg.hasher.clone());
        if !software_reta {
            steering
                .set_rules(cfg.rules.clone())
                .map_err(|e| format!("rules: {e}"))?;
        } else if cfg.rules.max_queue().is_some_and(|q| q >= cfg.shards) {
            return Err(format!("rules: a rule names a shard of {}", cfg.shards));
        }
        let reta = Reta::with_equal(rss::RETA_SIZE_DEFAULT, cfg.shards)
            .map_err(|e| format!("reta: {e:?}"))?;
        let mut shards = Vec::with_capacity(usize::from(cfg.shards));
        for shard in 0..cfg.shards {
            let info = ShardInfo {
                shard,
                shards: cfg.shards,
                numa_node: 0,
            };
            let mut stack_cfg = cfg.stack.clone();
            stack_cfg.rss = Some(RssConfig {
                hasher: cfg.hasher.clone(),
                home: Some((reta.clone(), shard)),
                // The derived key: the table is indexed by the carried hash; a pinned or
                // symmetric one: by the stack's own keyed hash.
                key_is_secret: cfg.rss_key_is_secret(),
            });
            stack_cfg.secret[1] ^= u64::from(shard) << 32;
            let mut nic = Nic::new(NicConfig {
                queues: 1,
                ..cfg.nic.clone()
            })
            .map_err(|e| format!("nic: {e:?}"))?;
            nic.set_hasher(cfg.hasher.clone());
            let shard_cfg = ShardConfig {
                budget_packets: cfg.budget_packets,
                sw_reta: software_reta.then(|| reta.clone()),
                sw_steer: software_reta.then(|| shard::SwSteer::new(cfg.rules.clone(), cfg.atr)),
                ..ShardConfig::new(info)
            };
            shards.push(Shard::new(
                shard_cfg,
                nic,
                Stack::new(stack_cfg),
                factory(info),
            ));
        }
        Ok(ShardedHost {
            steering,
            engine: None,
            shards,
            control: Vec::new(),
            owners: reta.entries().to_vec(),
            software_reta,
            rebalancer: None,
            msgs: Vec::new(),
            touched: vec![false; usize::from(cfg.shards)],
            tx_owed: vec![0; usize::from(cfg.shards)],
            counters: FrontCounters::default(),
        })
    }

    /// A one-shard host running `app`.
    pub fn single(stack: StackConfig, app: A) -> Self {
        let mut app = Some(app);
        match Self::new(ShardedHostConfig::new(stack), |_| {
            app.take().expect("one shard takes one app")
        }) {
            Ok(h) => h,
            // The default NIC configuration with one queue is always valid.
            Err(e) => unreachable!("default one-shard host: {e}"),
        }
    }

    /// Adds an offload engine serving shard 0 (seed 002): the steering NIC gains a queue for
    /// it (RSS keeps spreading over the shards only) and installs an exact-match filter per
    /// offloaded flow. Needs one hardware queue per shard.
    pub fn with_engine(mut self, engine: EngineConfig, host: HostConfig) -> Result<Self, String> {
        let shards = self.shards.len() as u16;
        if usize::from(self.steering.config().queues) != self.shards.len() {
            return Err("an engine needs one hardware queue per shard".into());
        }
        let cfg = self.steering.config().clone();
        let hasher = self.steering.steering().hasher.clone();
        let mut steering = Nic::new(NicConfig {
            queues: shards + 1,
            ..cfg
        })
        .map_err(|e| format!("nic: {e:?}"))?;
        steering.set_hasher(hasher);
        let reta = self.steering.steering().reta.clone();
        for (i, &q) in reta.entries().iter().enumerate() {
            steering
                .set_reta_entry(i, q)
                .map_err(|e| format!("reta: {e:?}"))?;
        }
        self.steering = steering;
        let stack_cfg = self.shards[0].stack().config().clone();
        self.engine = Some(EngineCore {
            engine: Engine::new(engine, stack_cfg),
            host: HostOffload::new(host),
            queue: shards,
            failed: false,
            filters_installed: 0,
            filters_removed: 0,
            filters_refused: 0,
        });
        Ok(self)
    }

    /// The offload engine, if the host has one.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref().map(|e| &e.engine)
    }

    /// The host's offload layer, if the host has an engine.
    pub fn offload_host(&self) -> Option<&HostOffload> {
        self.engine.as_ref().map(|e| &e.host)
    }

    /// Filters installed, removed, and refused by the NIC (0s without an engine).
    pub fn engine_filters(&self) -> (u64, u64, u64) {
        self.engine.as_ref().map_or((0, 0, 0), |e| {
            (e.filters_installed, e.filters_removed, e.filters_refused)
        })
    }

    /// Hands shard 0's connection `h` to the engine; takes effect at once (call
    /// [`crate::World::wake`]). False when the layer refused (see its counters).
    pub fn offload_conn(&mut self, now_ns: u64, h: SocketHandle) -> bool {
        let (Some(e), Some(s)) = (self.engine.as_mut(), self.shards.first_mut()) else {
            return false;
        };
        e.host.offload(now_ns, s.stack_mut(), h).is_ok()
    }

    /// Asks the engine to give `h` back; false when it is not offloaded.
    pub fn restore_conn(&mut self, h: SocketHandle) -> bool {
        self.engine.as_mut().is_some_and(|e| e.host.restore(h))
    }

    /// Asks every offloaded connection back (route change, link down).
    pub fn restore_all(&mut self) -> usize {
        self.engine.as_mut().map_or(0, |e| e.host.restore_all())
    }

    /// The engine fails without notice: from now on it takes and sends nothing. The host
    /// notices when its heartbeat stops.
    pub fn fail_engine(&mut self) {
        if let Some(e) = self.engine.as_mut() {
            e.failed = true;
        }
    }

    /// The engine's part of an activation: the host's layer and the engine exchange commands
    /// until quiet (bounded rounds), steering changes reach the NIC, and shard 0 runs again
    /// when the engine changed its sockets.
    fn run_engine(&mut self, now_ns: u64) {
        let Some(e) = self.engine.as_mut() else {
            return;
        };
        let Some(s0) = self.shards.first_mut() else {
            return;
        };
        for _ in 0..MSG_ROUNDS_MAX * 4 {
            let mut busy = false;
            e.host.poll(now_ns, s0.stack_mut());
            while let Some(cmd) = e.host.poll_cmd() {
                busy = true;
                if !e.failed {
                    e.engine.handle_host_cmd(now_ns, cmd);
                }
            }
            let mut touched = false;
            if !e.failed {
                e.engine.handle_timeout(now_ns);
                while let Some(cmd) = e.engine.poll_cmd() {
                    busy = true;
                    touched = true;
                    e.host.handle_engine_cmd(now_ns, s0.stack_mut(), cmd);
                }
            }
            while let Some(st) = e.host.poll_steer() {
                let (t, install) = match st {
                    Steer::Install(t) => (t, true),
                    Steer::Remove(t) => (t, false),
                };
                let five = five_tuple(&t);
                if install {
                    match self.steering.add_filter(five, e.queue) {
                        Ok(_) => e.filters_installed += 1,
                        Err(_) => e.filters_refused += 1,
                    }
                } else if self.steering.remove_filter(&five).is_some() {
                    e.filters_removed += 1;
                }
            }
            if touched || e.host.counters().engine_failures > 0 {
                s0.note_port_empty();
                s0.handle_timeout(now_ns);
            }
            if !busy {
                break;
            }
        }
    }

    pub fn shards(&self) -> &[Shard<A>] {
        &self.shards
    }

    pub fn shard(&self, i: u16) -> Option<&Shard<A>> {
        self.shards.get(usize::from(i))
    }

    /// A shard, for tests that drive its application or stack from outside; call
    /// [`crate::World::wake`] afterwards so new output is polled.
    pub fn shard_mut(&mut self, i: u16) -> Option<&mut Shard<A>> {
        self.shards.get_mut(usize::from(i))
    }

    /// Shard 0's stack (a one-shard host's only one).
    pub fn stack(&self) -> &Stack {
        self.shards[0].stack()
    }

    pub fn stack_mut(&mut self) -> &mut Stack {
        self.shards[0].stack_mut()
    }

    /// Shard 0's application (a one-shard host's only one).
    pub fn app(&self) -> &A {
        self.shards[0].app()
    }

    pub fn app_mut(&mut self) -> &mut A {
        self.shards[0].app_mut()
    }

    /// Every shard's application, in shard order.
    pub fn apps(&self) -> impl Iterator<Item = &A> {
        self.shards.iter().map(Shard::app)
    }

    pub fn front_counters(&self) -> FrontCounters {
        self.counters
    }

    /// The steering NIC (its RETA, its per-bucket packet counts).
    pub fn steering(&self) -> &Nic {
        &self.steering
    }

    /// Starts moving RETA entry `bucket` and its live connections to shard `to` (DESIGN
    /// "Rebalancing"; the walk is `shard::moves`). Takes effect at the host's next activation:
    /// call [`crate::World::wake`]. With a queue per shard the NIC's entry changes when the
    /// new owner, already holding the bucket's frames, asks the old owner to move out; with
    /// fewer queues the shards' software RETA entries change (the new owner tells them). Returns false (counted)
    /// when the move is refused: see [`FrontCounters::reta_moves_refused`].
    pub fn move_bucket(&mut self, bucket: usize, to: u16) -> bool {
        let from = self.owners.get(bucket).copied();
        // The RETA has at most 2,048 entries (rss::RETA_SIZE_MAX): the index fits.
        let b = bucket as u16;
        let busy = self.shards.iter().any(|s| s.bucket_busy(b))
            || self
                .control
                .iter()
                .any(|(_, m)| matches!(m, Msg::MoveIn { bucket, .. } if *bucket == b));
        match from {
            Some(from) if from != to && usize::from(to) < self.shards.len() && !busy => {
                self.control.push((to, Msg::MoveIn { bucket: b, from }));
                if let Some(o) = self.owners.get_mut(bucket) {
                    *o = to;
                }
                true
            }
            _ => {
                self.counters.reta_moves_refused += 1;
                false
            }
        }
    }

    /// Turns on live rebalancing: every `period_ns` of traffic, the steering NIC's per-bucket
    /// packet counts go to an [`rss::Periodic`] planner and its moves start as
    /// [`ShardedHost::move_bucket`] does. Periods are checked as the host is activated (by
    /// frames or timers), so an idle host adds no events.
    pub fn enable_rebalancing(
        &mut self,
        config: rss::RebalanceConfig,
        period_ns: u64,
    ) -> Result<(), String> {
        let periodic = rss::Periodic::new(config, period_ns).map_err(|e| format!("{e:?}"))?;
        self.rebalancer = Some(SimRebalancer {
            periodic,
            loads: Vec::new(),
            assignment: Vec::new(),
            moves: Vec::new(),
        });
        Ok(())
    }

    /// What the rebalancer did (when enabled).
    pub fn rebalance_report(&self) -> Option<&rss::PeriodicReport> {
        self.rebalancer.as_ref().map(|r| r.periodic.report())
    }

    /// A rebalancing period, if one is due.
    fn rebalance_tick(&mut self, now_ns: u64) {
        let Some(r) = &mut self.rebalancer else {
            return;
        };
        if now_ns < r.periodic.next_ns() {
            return;
        }
        r.loads.clear();
        r.loads
            .extend_from_slice(self.steering.reta_bucket_packets());
        self.steering.reset_reta_bucket_packets();
        r.assignment.clear();
        r.assignment.extend_from_slice(&self.owners);
        let moves = r
            .periodic
            .tick(now_ns, &r.loads, &r.assignment, self.shards.len());
        r.moves.clear();
        r.moves.extend_from_slice(moves);
        let moves = std::mem::take(&mut r.moves);
        for m in &moves {
            self.move_bucket(m.bucket, m.to);
        }
        if let Some(r) = &mut self.rebalancer {
            r.moves = moves;
        }
    }

    /// The shard RETA entry `bucket` names now (moves included).
    pub fn owner_of(&self, bucket: usize) -> Option<u16> {
        self.owners.get(bucket).copied()
    }

    /// True while any shard holds a bucket, moves one out, or watches a kept connection.
    pub fn moves_in_progress(&self) -> bool {
        !self.control.is_empty()
            || self.shards.iter().any(|s| {
                let (h, o, _) = s.moves_in_progress();
                h + o > 0
            })
    }

    /// Delivers one message, carrying out the driver's part of the move protocol: the RETA
    /// entry changes as `MoveOut` goes from the new owner to the old one.
    fn deliver(&mut self, now_ns: u64, to: u16, m: Msg) {
        if let (Msg::MoveOut { bucket, to: owner }, false) = (&m, self.software_reta) {
            if self
                .steering
                .set_reta_entry(usize::from(*bucket), *owner)
                .is_ok()
            {
                self.counters.reta_moves += 1;
            }
        }
        if let Some(s) = self.shards.get_mut(usize::from(to)) {
            self.counters.msgs_delivered += 1;
            s.handle_msg(now_ns, m);
            if let Some(t) = self.touched.get_mut(usize::from(to)) {
                *t = true;
            }
        }
    }

    /// One iteration of every shard, then message delivery until quiet (bounded).
    fn run(&mut self, now_ns: u64) {
        self.rebalance_tick(now_ns);
        let control = std::mem::take(&mut self.control);
        for (to, m) in control {
            self.deliver(now_ns, to, m);
        }
        for s in &mut self.shards {
            // The steering NIC feeds each shard's NIC queue directly: no port backlog.
            s.note_port_empty();
            s.handle_timeout(now_ns);
        }
        for _ in 0..MSG_ROUNDS_MAX {
            self.msgs.clear();
            for s in &mut self.shards {
                while let Some(m) = s.poll_msg() {
                    self.msgs.push(m);
                }
            }
            if self.msgs.is_empty() {
                break;
            }
            let mut msgs = std::mem::take(&mut self.msgs);
            for (to, m) in msgs.drain(..) {
                // The shard core only addresses shards of its host.
                self.deliver(now_ns, to, m);
            }
            self.msgs = msgs;
            for (s, t) in self.shards.iter_mut().zip(self.touched.iter_mut()) {
                if std::mem::take(t) {
                    s.note_port_empty();
                    s.handle_timeout(now_ns);
                }
            }
        }
        self.run_engine(now_ns);
    }
}

/// The NIC filter for a connection's incoming frames.
fn five_tuple(t: &FourTuple) -> rss::FiveTuple {
    rss::FiveTuple {
        protocol: 6,
        src: t.remote.ip(),
        dst: t.local.ip(),
        src_port: t.remote.port(),
        dst_port: t.local.port(),
    }
}

impl<A: App + 'static> Host for ShardedHost<A> {
    fn handle_frame(&mut self, now_ns: u64, _port: PortId, frame: &[u8]) {
        self.counters.rx_frames += 1;
        if is_arp_reply(frame) {
            if let Some(e) = self.engine.as_mut().filter(|e| !e.failed) {
                e.engine.handle_frame(now_ns, frame);
            }
            for s in &mut self.shards {
                self.counters.arp_reply_copies += 1;
                let mut q = s.rx_queue(now_ns);
                let mut buf = q.take_buffer(frame.len());
                buf.extend_from_slice(frame);
                q.receive(buf);
            }
        } else {
            let queue = match self.steering.steer_counted(frame) {
                Ok(d) if matches!(d.how, rss::SteerHow::RuleDrop) => {
                    self.counters.rule_drops += 1;
                    self.run(now_ns);
                    return;
                }
                Ok(d) => d.queue,
                Err(_) => {
                    self.counters.steer_failed += 1;
                    0
                }
            };
            if let Some(e) = self.engine.as_mut().filter(|e| e.queue == queue) {
                if !e.failed {
                    e.engine.handle_frame(now_ns, frame);
                }
            } else if let Some(s) = self.shards.get_mut(usize::from(queue)) {
                let mut q = s.rx_queue(now_ns);
                let mut buf = q.take_buffer(frame.len());
                buf.extend_from_slice(frame);
                q.receive(buf);
            }
        }
        self.run(now_ns);
    }

    fn handle_timeout(&mut self, now_ns: u64) {
        self.run(now_ns);
    }

    fn poll_transmit(&mut self, now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        let polled = self
            .shards
            .iter_mut()
            .zip(self.tx_owed.iter_mut())
            .enumerate()
            .find_map(|(i, (s, owed))| {
                let f = s.poll_tx()?;
                *owed += 1;
                Some((i, f))
            });
        if let Some((i, f)) = polled {
            if !self.software_reta {
                // ATR (when configured): the NIC samples what each queue transmits. Shards
                // are at most `nic::QUEUES_MAX`: the index fits.
                self.steering.atr_observe_tx(i as u16, &f);
            }
            return Some((PortId(0), f));
        }
        let e = self.engine.as_mut().filter(|e| !e.failed)?;
        e.engine.poll_transmit(now_ns).map(|f| (PortId(0), f))
    }

    fn recycle_frame(&mut self, frame: Vec<u8>) {
        // A buffer beyond what the shards are owed (a link's duplicate, an engine frame) is
        // dropped; the stack's own pool is bounded too.
        if let Some((s, owed)) = self
            .shards
            .iter_mut()
            .zip(self.tx_owed.iter_mut())
            .find(|(_, owed)| **owed > 0)
        {
            *owed -= 1;
            s.recycle_tx(frame);
        }
    }

    fn poll_timeout(&self) -> Option<u64> {
        // Asked after every activation: folded pairwise, without iterator adapters.
        let mut at = self.engine.as_ref().and_then(|e| {
            let engine = (!e.failed).then(|| e.engine.poll_timeout()).flatten();
            earliest_deadline(engine, e.host.poll_timeout())
        });
        for s in &self.shards {
            at = earliest_deadline(at, s.poll_timeout());
        }
        at
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
