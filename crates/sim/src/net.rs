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
use rss::{Reta, RssHasher};
use shard::{Msg, Shard, ShardConfig, is_arp_reply};
use stack::{RssConfig, Stack, StackConfig};

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
    /// The NIC's RSS hash function.
    pub hasher: RssHasher,
    /// NAPI budget per poll.
    pub budget_packets: usize,
}

impl ShardedHostConfig {
    /// One shard, the default NIC and hasher.
    pub fn new(stack: StackConfig) -> Self {
        ShardedHostConfig {
            stack,
            shards: 1,
            queues: 1,
            nic: NicConfig::default(),
            hasher: RssHasher::default(),
            budget_packets: nic::BUDGET_DEFAULT_PACKETS,
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

/// A simulated host: a steering NIC in front of N shard cores.
pub struct ShardedHost<A: App> {
    steering: Nic,
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
        let mut steering = Nic::new(NicConfig {
            queues: cfg.queues,
            ..cfg.nic.clone()
        })
        .map_err(|e| format!("nic: {e:?}"))?;
        steering.set_hasher(cfg.hasher.clone());
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
                sw_reta: (cfg.queues < cfg.shards).then(|| reta.clone()),
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
            shards,
            control: Vec::new(),
            owners: reta.entries().to_vec(),
            software_reta: cfg.queues < cfg.shards,
            rebalancer: None,
            msgs: Vec::new(),
            touched: vec![false; usize::from(cfg.shards)],
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
    }
}

impl<A: App + 'static> Host for ShardedHost<A> {
    fn handle_frame(&mut self, now_ns: u64, _port: PortId, frame: &[u8]) {
        self.counters.rx_frames += 1;
        if is_arp_reply(frame) {
            for s in &mut self.shards {
                self.counters.arp_reply_copies += 1;
                let mut q = s.rx_queue(now_ns);
                let mut buf = q.take_buffer(frame.len());
                buf.extend_from_slice(frame);
                q.receive(buf);
            }
        } else {
            let queue = match self.steering.steer_counted(frame) {
                Ok(d) => d.queue,
                Err(_) => {
                    self.counters.steer_failed += 1;
                    0
                }
            };
            if let Some(s) = self.shards.get_mut(usize::from(queue)) {
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

    fn poll_transmit(&mut self, _now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        self.shards
            .iter_mut()
            .find_map(Shard::poll_tx)
            .map(|f| (PortId(0), f))
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.shards.iter().filter_map(Shard::poll_timeout).min()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
