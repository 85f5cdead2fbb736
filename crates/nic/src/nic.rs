//! The NIC: steering, rings, moderation, polling, coalescing and transmit offloads together.

use std::collections::VecDeque;

use rss::{
    FilterError, FilterTable, FiveTuple, FlowFields, Reta, RetaError, RssHasher, SteerHow, Steering,
};
use wire::{CsumVerdict, RxChecksum, RxMeta, TcpFlags};

use crate::config::{
    AtrConfig, ConfigError, GroConfig, ModerationConfig, NicConfig, validate_moderation,
};
use crate::counters::QueueCounters;
use crate::layout::{Layout, RxParse, l4_valid_checksums, verify_checksums};
use crate::moderation::{FireCause, Moderator};
use crate::pool::{BufferPool, PoolCounters};
use crate::rxq::{Accept, Arrival, FlushReason, RxDescriptor, RxQueue};
use crate::tso::{TxOffload, TxOffloadError, apply};

mod steer;

/// Why a received frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RxDrop {
    /// The queue's ring had no free slot.
    RingFull,
    /// Not a valid Ethernet frame, or malformed IP.
    Malformed,
    /// Longer than the configured limit.
    Oversize,
    /// Steering named a queue the NIC does not have.
    NoQueue,
    /// A wildcard rule with the action `drop` matched.
    Rule,
}

impl core::fmt::Display for RxDrop {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RxDrop::RingFull => "receive ring full",
            RxDrop::Malformed => "malformed frame",
            RxDrop::Oversize => "frame too long",
            RxDrop::Rule => "dropped by a filter rule",
            RxDrop::NoQueue => "steered to a missing queue",
        })
    }
}

/// What [`Nic::receive`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RxVerdict {
    /// Took a ring slot on `queue`.
    Queued {
        /// Receive queue.
        queue: u16,
        /// Which rule chose it.
        how: SteerHow,
    },
    /// Appended to an open coalesced group on `queue`.
    Coalesced {
        /// Receive queue.
        queue: u16,
    },
    /// Dropped and counted.
    Dropped(RxDrop),
}

/// What [`Nic::transmit`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxVerdict {
    /// In the transmit ring.
    Queued,
    /// The ring was full; dropped and counted `tx_drop_ring_full`.
    RingFull,
}

/// A wake-up (interrupt) of one queue: the driver should poll it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wakeup {
    /// The queue to poll.
    pub queue: u16,
    /// When it fired.
    pub at_ns: u64,
    /// Which moderation rule fired it.
    pub cause: FireCause,
}

/// Result of one [`Nic::poll_rx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxPoll {
    /// Descriptors appended to the output.
    pub delivered: usize,
    /// The ring is empty and the queue re-armed; otherwise it stays scheduled and the driver
    /// must poll again (NAPI: "budget exhausted ⇒ poll again").
    pub drained: bool,
}

/// Result of one [`Nic::poll_tx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPoll {
    /// Requests taken from the ring (including dropped ones).
    pub requests: usize,
    /// Frames appended to the output (more than `requests` after TSO).
    pub frames: usize,
    /// Requests dropped because their offload could not be applied.
    pub dropped: usize,
}

#[derive(Clone, Debug)]
struct TxRequest {
    frame: Vec<u8>,
    offload: TxOffload,
}

#[derive(Clone, Debug)]
struct Queue {
    rx: RxQueue,
    tx: VecDeque<TxRequest>,
    moderator: Moderator,
    counters: QueueCounters,
    /// Descriptors delivered since the last wake-up (for `wakeup_descriptors_max`).
    cycle_descriptors: u64,
    /// TCP segments transmitted since the last ATR sample.
    atr_since_sample: u32,
}

/// A software multi-queue NIC (sans-IO).
///
/// Driver call order, per step of virtual time `now_ns` (non-decreasing across calls):
///
/// 1. [`Nic::receive`] for each frame off the wire;
/// 2. [`Nic::poll_wakeup`] until `None`; for each woken (or still scheduled) queue,
///    [`Nic::poll_rx`] with a budget until `drained`;
/// 3. [`Nic::transmit`] replies, then [`Nic::poll_tx`] to put them on the wire;
/// 4. hand finished buffers back with [`Nic::recycle`];
/// 5. sleep until [`Nic::next_deadline`] (moderation and coalescing timers) or the next frame.
///
/// One `Nic` holds all its queues, so it lives on one thread. A threaded runtime either
/// runs one `Nic` with `queues: 1` per shard (the backend or a dispatcher using
/// [`Nic::steer`] picks the shard, [`Nic::receive_on_queue`] keeps that choice and still
/// carries the hash), or drives one `Nic` from a single I/O thread.
///
/// Invariants: one queue state per configured queue; a queue has at most one wake-up waiting in
/// `wakeups` (it is masked from the moment it fires until a poll drains it).
#[derive(Clone, Debug)]
pub struct Nic {
    config: NicConfig,
    steering: Steering,
    queues: Vec<Queue>,
    wakeups: VecDeque<Wakeup>,
    pool: BufferPool,
    /// RSS-steered packets per RETA index since the last reset. Invariant: as long as the
    /// RETA (`set_reta` resizes it).
    bucket_packets: Vec<u64>,
    /// Packets each wildcard rule matched (steered or dropped) since the rules were set.
    /// Invariant: as long as `steering.rules`.
    rule_hits: Vec<u64>,
}

impl Nic {
    /// A NIC with `config`, the default RSS key (not symmetric), every hash type enabled and
    /// the RETA spread evenly over the queues.
    pub fn new(config: NicConfig) -> Result<Nic, ConfigError> {
        config.validate()?;
        let reta = Reta::with_equal(rss::RETA_SIZE_DEFAULT, config.queues)
            .map_err(|_| ConfigError::BadQueueCount)?;
        let steering = Steering {
            reta,
            filters: FilterTable::with_capacity(config.filters_max),
            ..Steering::default()
        };
        let queues = (0..config.queues)
            .map(|_| Queue {
                rx: RxQueue::new(config.rx_ring_slots),
                tx: VecDeque::with_capacity(config.tx_ring_slots),
                moderator: Moderator::new(config.moderation),
                counters: QueueCounters::default(),
                cycle_descriptors: 0,
                atr_since_sample: 0,
            })
            .collect();
        let pool = BufferPool::new(config.pool_buffers_max);
        let bucket_packets = vec![0; steering.reta.len()];
        Ok(Nic {
            bucket_packets,
            rule_hits: Vec::new(),
            config,
            steering,
            queues,
            wakeups: VecDeque::new(),
            pool,
        })
    }

    // ---- getters ----

    /// Number of queue pairs.
    pub fn queue_count(&self) -> u16 {
        self.config.queues
    }

    /// The configuration in force.
    pub fn config(&self) -> &NicConfig {
        &self.config
    }

    /// Counter snapshot of `queue`.
    pub fn counters(&self, queue: u16) -> Option<QueueCounters> {
        self.queues.get(usize::from(queue)).map(|q| q.counters)
    }

    /// Sum of every queue's counters (maxima are maxima).
    pub fn counters_total(&self) -> QueueCounters {
        let mut t = QueueCounters::default();
        for q in &self.queues {
            add_counters(&mut t, &q.counters);
        }
        t
    }

    /// Buffer pool statistics.
    pub fn pool_counters(&self) -> PoolCounters {
        self.pool.counters
    }

    /// Gives the pool's buffers that sat unused since the previous call back to the
    /// allocator (counted `PoolCounters::reaped`); returns how many. The driver calls it
    /// periodically (the shard core: every `shard::POOL_REAP_INTERVAL_NS` while it runs).
    pub fn reap_pool(&mut self) -> usize {
        self.pool.reap()
    }

    /// Buffers waiting in the pool's free lists.
    pub fn pool_idle_buffers(&self) -> usize {
        self.pool.idle_buffers()
    }

    /// The steering state (filters, RETA, hasher, hash types).
    pub fn steering(&self) -> &Steering {
        &self.steering
    }

    /// Descriptors waiting in `queue`'s receive ring (open coalesced groups included).
    pub fn rx_pending(&self, queue: u16) -> usize {
        self.queues
            .get(usize::from(queue))
            .map_or(0, |q| q.rx.len())
    }

    /// Frames waiting in `queue`'s transmit ring.
    pub fn tx_pending(&self, queue: u16) -> usize {
        self.queues
            .get(usize::from(queue))
            .map_or(0, |q| q.tx.len())
    }

    /// The moderation interval `queue` is using now (changes under adaptive moderation).
    pub fn moderation_interval_ns(&self, queue: u16) -> Option<u64> {
        self.queues
            .get(usize::from(queue))
            .map(|q| q.moderator.interval_ns())
    }

    /// True while `queue`'s interrupts are enabled (it has been drained since its last wake-up).
    pub fn is_armed(&self, queue: u16) -> bool {
        self.queues
            .get(usize::from(queue))
            .is_some_and(|q| q.moderator.is_armed())
    }

    /// The earliest time a timer (moderation interval or coalescing flush) needs service.
    pub fn next_deadline(&self) -> Option<u64> {
        let gro = &self.config.gro;
        // A plain loop: the shard core asks after every activation, and the iterator chain
        // over pairs of options cost several times the comparisons it makes.
        fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            }
        }
        let mut at: Option<u64> = None;
        for q in &self.queues {
            at = earliest(
                at,
                earliest(q.moderator.deadline_ns(), q.rx.gro_deadline_ns(gro)),
            );
        }
        at
    }

    // ---- mutators (control path) ----

    /// Points RETA entry `index` at `queue`. New packets of that bucket go to `queue`;
    /// packets already in the old queue's ring stay there (the driver's handoff problem).
    pub fn set_reta_entry(&mut self, index: usize, queue: u16) -> Result<(), ConfigError> {
        self.check_queue(queue)?;
        self.steering.reta.set(index, queue).map_err(|e| match e {
            RetaError::IndexOutOfRange => ConfigError::BadRetaIndex,
            _ => ConfigError::BadRetaIndex,
        })
    }

    /// Replaces the whole RETA. Every entry must name an existing queue.
    pub fn set_reta(&mut self, reta: Reta) -> Result<(), ConfigError> {
        if reta.entries().iter().any(|&q| q >= self.config.queues) {
            return Err(ConfigError::NoSuchQueue);
        }
        self.bucket_packets = vec![0; reta.len()];
        self.steering.reta = reta;
        Ok(())
    }

    /// Sets the queue for frames nothing else steers (non-IP, unhashed types); drops that
    /// happen before steering are counted there too.
    pub fn set_default_queue(&mut self, queue: u16) -> Result<(), ConfigError> {
        self.check_queue(queue)?;
        self.steering.default_queue = queue;
        Ok(())
    }

    /// Sets the RSS key and symmetric mode.
    pub fn set_hasher(&mut self, hasher: RssHasher) {
        self.steering.hasher = hasher;
    }

    /// Sets the enabled hash types.
    pub fn set_hash_types(&mut self, types: rss::HashTypes) {
        self.steering.hash_types = types;
    }

    /// Adds (or replaces) an exact-match filter steering `tuple` to `queue`; returns the
    /// queue it replaced.
    pub fn add_filter(&mut self, tuple: FiveTuple, queue: u16) -> Result<Option<u16>, ConfigError> {
        self.check_queue(queue)?;
        self.steering
            .filters
            .insert(tuple, queue)
            .map_err(|e| match e {
                FilterError::Full => ConfigError::FilterTableFull,
                FilterError::MixedFamilies => ConfigError::FilterMixedFamilies,
            })
    }

    /// Replaces the wildcard rules (`ethtool -N`), consulted after the exact filters and
    /// before RSS; their hit counts start again from 0. Refused when a rule names a queue
    /// this NIC does not have.
    pub fn set_rules(&mut self, rules: rss::RuleSet) -> Result<(), ConfigError> {
        if rules.max_queue().is_some_and(|q| q >= self.config.queues) {
            return Err(ConfigError::NoSuchQueue);
        }
        self.rule_hits = vec![0; rules.len()];
        self.steering.rules = rules;
        Ok(())
    }

    /// Packets each wildcard rule matched, in the rules' order (drops included).
    pub fn rule_hits(&self) -> &[u64] {
        &self.rule_hits
    }

    /// Removes a filter; returns its queue.
    pub fn remove_filter(&mut self, tuple: &FiveTuple) -> Option<u16> {
        self.steering.filters.remove(tuple)
    }

    /// Changes `queue`'s moderation.
    pub fn set_moderation(&mut self, queue: u16, m: ModerationConfig) -> Result<(), ConfigError> {
        validate_moderation(&m)?;
        let q = self
            .queues
            .get_mut(usize::from(queue))
            .ok_or(ConfigError::NoSuchQueue)?;
        q.moderator.set_config(m);
        Ok(())
    }

    /// Switches receive coalescing on or off; switching off closes every open group.
    pub fn set_gro_enabled(&mut self, enabled: bool) {
        self.config.gro.enabled = enabled;
        if !enabled {
            for q in &mut self.queues {
                q.rx.close_all(FlushReason::Flags, &mut q.counters);
            }
        }
    }

    /// Changes the coalescing settings (flow count, timer, size). Open groups are closed.
    pub fn set_gro(&mut self, gro: GroConfig) -> Result<(), ConfigError> {
        let mut c = self.config.clone();
        c.gro = gro;
        c.validate()?;
        for q in &mut self.queues {
            q.rx.close_all(FlushReason::Flags, &mut q.counters);
        }
        self.config = c;
        Ok(())
    }

    /// An empty buffer from the NIC's pool (or a new one), for the backend to receive into.
    pub fn take_buffer(&mut self, capacity_bytes: usize) -> Vec<u8> {
        self.pool.take(capacity_bytes)
    }

    /// Returns a buffer to the pool: a descriptor's frame the stack is done with, or a frame
    /// [`Nic::poll_tx`] put on the wire. Beyond the pool's bound the buffer is freed.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.pool.give(buf);
    }

    // ---- inputs ----

    /// A frame arrived from the wire at `now_ns`: steer it (filter → RSS → default queue),
    /// verify checksums, coalesce or place it in the queue's ring, and let moderation decide
    /// whether the queue fires.
    pub fn receive(&mut self, now_ns: u64, frame: Vec<u8>) -> RxVerdict {
        self.receive_inner(now_ns, frame, None, false)
    }

    /// A frame arrived on backend queue `queue`, which the backend already chose (a
    /// multi-queue TAP with a steering program, an AF_XDP queue). The NIC still hashes the
    /// frame so the descriptor carries the hash, uses `queue` as given, and counts
    /// `rx_steer_mismatch` on `queue` when its own steering would have chosen another queue
    /// (DESIGN.md, "The receive path", step 2: "only verifies and counts").
    pub fn receive_on_queue(&mut self, now_ns: u64, queue: u16, frame: Vec<u8>) -> RxVerdict {
        self.receive_inner(now_ns, frame, Some(queue), false)
    }

    /// As [`Nic::receive_on_queue`] for a frame whose TCP/UDP checksum the device below
    /// already established (the kernel's `VIRTIO_NET_HDR_F_DATA_VALID`, or a partial checksum
    /// over data that never left the host): the L4 verdict is `Good` without summing the
    /// payload (the IPv4 header checksum is still verified, 20 bytes). Such a frame is not
    /// coalesced by the model's GRO (it has no payload sum); the kernel coalesces before us
    /// when asked to.
    pub fn receive_on_queue_l4_valid(
        &mut self,
        now_ns: u64,
        queue: u16,
        frame: Vec<u8>,
    ) -> RxVerdict {
        self.receive_inner(now_ns, frame, Some(queue), true)
    }

    fn receive_inner(
        &mut self,
        now_ns: u64,
        frame: Vec<u8>,
        forced: Option<u16>,
        l4_valid: bool,
    ) -> RxVerdict {
        self.run_timers(now_ns);
        let default_q =
            usize::from(self.steering.default_queue).min(self.queues.len().saturating_sub(1));
        if frame.len() > self.config.rx_frame_bytes_max {
            if let Some(q) = self.queues.get_mut(default_q) {
                q.counters.rx_drop_oversize += 1;
            }
            self.pool.give(frame);
            return RxVerdict::Dropped(RxDrop::Oversize);
        }
        // The one parse of the frame: the flow fields steering hashes (once: the hash travels
        // in the descriptor) and the layout checksum offload and coalescing use.
        let parsed = match RxParse::parse(&frame, &self.steering) {
            Ok(p) => p,
            Err(_) => {
                if let Some(q) = self.queues.get_mut(default_q) {
                    q.counters.rx_drop_malformed += 1;
                }
                self.pool.give(frame);
                return RxVerdict::Dropped(RxDrop::Malformed);
            }
        };
        let layout = parsed.layout;
        // Not IP (ARP, LLDP, …): no hash, the default queue (as rss's steering does).
        let mut decision = parsed.decision;
        if let SteerHow::Rule | SteerHow::RuleDrop = decision.how {
            if let Some(n) = self.rule_hits.get_mut(usize::from(decision.rule)) {
                *n += 1;
            }
        }
        if let SteerHow::RuleDrop = decision.how {
            if let Some(q) = self.queues.get_mut(default_q) {
                q.counters.rx_drop_rule += 1;
            }
            self.pool.give(frame);
            return RxVerdict::Dropped(RxDrop::Rule);
        }
        let mut mismatch = false;
        if let Some(fq) = forced {
            mismatch = fq != decision.queue;
            decision.queue = fq;
        }
        let qi = usize::from(decision.queue);
        let Some(q) = self.queues.get_mut(qi) else {
            if let Some(q) = self.queues.get_mut(default_q) {
                q.counters.rx_drop_no_queue += 1;
            }
            self.pool.give(frame);
            return RxVerdict::Dropped(RxDrop::NoQueue);
        };
        let (csum, tcp_sum) = match (&layout, self.config.rx_checksum_offload) {
            (Some(l), _) if l4_valid => (l4_valid_checksums(&frame, l), None),
            (Some(l), true) => verify_checksums(&frame, l),
            _ => (RxChecksum::default(), None),
        };
        let push = layout
            .as_ref()
            .and_then(|l| l.tcp(&frame))
            .is_some_and(|t| t.flags().contains(TcpFlags::PSH));
        let lli_port = q.moderator.has_lli_ports()
            && lli_port_matches(&frame, layout.as_ref(), &q.moderator.lli_ports());
        let bytes = frame.len() as u64;
        let meta = Arrival {
            queue: decision.queue,
            steered_by: decision.how,
            meta: RxMeta {
                hash: decision.hash,
                hash_type: decision.hash_type.map(Into::into),
                csum,
                vlan: parsed.vlan,
                l3_offset: layout.as_ref().and_then(|l| u16::try_from(l.l3_off).ok()),
                l4_offset: layout
                    .as_ref()
                    .filter(|l| !l.l4_opaque)
                    .and_then(|l| u16::try_from(l.l4_off).ok()),
                coalesced_segments: 1,
                gro_mss_bytes: 0,
            },
            tcp_sum,
            arrival_ns: now_ns,
        };
        let c = &mut q.counters;
        let accepted = q.rx.accept(
            frame,
            layout.as_ref(),
            meta,
            &self.config.gro,
            c,
            &mut self.pool,
        );
        let verdict = match accepted {
            Accept::RingFull => {
                c.rx_drop_ring_full += 1;
                return RxVerdict::Dropped(RxDrop::RingFull);
            }
            Accept::Queued => {
                c.rx_descriptors_queued += 1;
                RxVerdict::Queued {
                    queue: decision.queue,
                    how: decision.how,
                }
            }
            Accept::Coalesced => RxVerdict::Coalesced {
                queue: decision.queue,
            },
        };
        c.rx_packets += 1;
        c.rx_bytes += bytes;
        if let (SteerHow::Rss, Some(h)) = (decision.how, decision.hash) {
            let i = self.steering.reta.index_for_hash(h);
            if let Some(n) = self.bucket_packets.get_mut(i) {
                *n += 1;
            }
        }
        if mismatch {
            c.rx_steer_mismatch += 1;
        }
        match decision.how {
            SteerHow::Filter => c.rx_steered_filter += 1,
            SteerHow::Rule | SteerHow::RuleDrop => c.rx_steered_rule += 1,
            SteerHow::Rss => c.rx_steered_rss += 1,
            SteerHow::NoHash => c.rx_steered_default += 1,
        }
        if csum.ip == CsumVerdict::Bad {
            c.rx_csum_bad_ip += 1;
        }
        if csum.l4 == CsumVerdict::Bad {
            c.rx_csum_bad_l4 += 1;
        }
        if let Some(cause) = q.moderator.on_arrival(now_ns, push, lli_port) {
            fired(&mut self.wakeups, q, decision.queue, now_ns, cause);
        }
        verdict
    }

    /// ATR for a driver that transmits `frame` from `queue`'s shard without this NIC's
    /// transmit ring (a steering NIC in front of per-shard NICs): samples it as
    /// [`Nic::transmit`] does when [`NicConfig::atr`] is set, so the reply direction of a
    /// connection the shard opened is steered back to `queue`. Does nothing without ATR or
    /// for a queue the NIC does not have.
    pub fn atr_observe_tx(&mut self, queue: u16, frame: &[u8]) {
        let Some(atr) = self.config.atr else { return };
        if let Some(q) = self.queues.get_mut(usize::from(queue)) {
            atr_sample(&mut self.steering, q, queue, frame, atr);
        }
    }

    /// Queues `frame` for transmission on `queue` with `offload`.
    pub fn transmit(
        &mut self,
        queue: u16,
        frame: Vec<u8>,
        offload: TxOffload,
    ) -> Result<TxVerdict, ConfigError> {
        let cap = self.config.tx_ring_slots;
        let q = self
            .queues
            .get_mut(usize::from(queue))
            .ok_or(ConfigError::NoSuchQueue)?;
        if q.tx.len() >= cap {
            q.counters.tx_drop_ring_full += 1;
            self.pool.give(frame);
            return Ok(TxVerdict::RingFull);
        }
        q.counters.tx_requests += 1;
        if let Some(atr) = self.config.atr {
            atr_sample(&mut self.steering, q, queue, &frame, atr);
        }
        q.tx.push_back(TxRequest { frame, offload });
        Ok(TxVerdict::Queued)
    }

    // ---- outputs ----

    /// A queue has fired and its wake-up waits for [`Nic::poll_wakeup`] (wake-ups whose time
    /// has not come yet are [`Nic::next_deadline`]'s).
    pub fn wakeups_pending(&self) -> bool {
        !self.wakeups.is_empty()
    }

    /// The next wake-up whose time has come, after servicing timers due at `now_ns`.
    pub fn poll_wakeup(&mut self, now_ns: u64) -> Option<Wakeup> {
        self.run_timers(now_ns);
        self.wakeups.pop_front()
    }

    /// NAPI/DPC poll of `queue`: closes the queue's open coalesced groups, then moves up to
    /// `budget` descriptors into `out`. If fewer than `budget` were waiting, the queue is
    /// drained and its interrupts re-armed; otherwise it stays scheduled (masked).
    pub fn poll_rx(
        &mut self,
        queue: u16,
        budget: usize,
        now_ns: u64,
        out: &mut Vec<RxDescriptor>,
    ) -> Result<RxPoll, ConfigError> {
        self.check_queue(queue)?;
        self.run_timers(now_ns);
        let q = self
            .queues
            .get_mut(usize::from(queue))
            .ok_or(ConfigError::NoSuchQueue)?;
        q.counters.polls += 1;
        q.rx.close_all(FlushReason::Poll, &mut q.counters);
        let delivered = q.rx.take(budget, out);
        // Linux `napi_complete_done` is only allowed when work < budget; a poll that used the
        // whole budget stays scheduled even if the ring happens to be empty now.
        let drained = delivered < budget && q.rx.len() == 0;
        let n = delivered as u64;
        q.counters.rx_descriptors_polled += n;
        q.cycle_descriptors += n;
        if !drained {
            q.counters.polls_budget_exhausted += 1;
        } else {
            q.counters.rearms += 1;
            q.counters.wakeup_descriptors_max =
                q.counters.wakeup_descriptors_max.max(q.cycle_descriptors);
            q.cycle_descriptors = 0;
        }
        q.moderator.on_poll(drained);
        if drained {
            // A wake-up the driver has not collected yet is moot once the queue is drained
            // (busy polling got there first); dropping it keeps "one wake-up per queue".
            self.wakeups.retain(|w| w.queue != queue);
        }
        Ok(RxPoll { delivered, drained })
    }

    /// Drains up to `budget_frames` requests of `queue`'s transmit ring to the wire (`out`),
    /// applying TSO and checksum offloads.
    pub fn poll_tx(
        &mut self,
        queue: u16,
        budget_frames: usize,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<TxPoll, ConfigError> {
        let q = self
            .queues
            .get_mut(usize::from(queue))
            .ok_or(ConfigError::NoSuchQueue)?;
        let mut poll = TxPoll {
            requests: 0,
            frames: 0,
            dropped: 0,
        };
        while poll.requests < budget_frames {
            let Some(req) = q.tx.pop_front() else {
                break;
            };
            poll.requests += 1;
            let c = &mut q.counters;
            match apply(req.frame, req.offload, out, &mut self.pool) {
                Ok(done) => {
                    poll.frames += done.frames;
                    c.tx_packets += done.frames as u64;
                    c.tx_bytes += done.bytes as u64;
                    if done.segmented {
                        c.tx_tso_sends += 1;
                        c.tx_tso_segments += done.frames as u64;
                    }
                    if done.csum {
                        c.tx_csum_offloaded += done.frames as u64;
                    }
                }
                Err(TxOffloadError::NotIp)
                | Err(TxOffloadError::NotTcp)
                | Err(TxOffloadError::ZeroMss)
                | Err(TxOffloadError::TooManySegments) => {
                    c.tx_drop_malformed += 1;
                    poll.dropped += 1;
                }
            }
        }
        Ok(poll)
    }

    /// As [`Nic::poll_tx`] for a NIC whose device below applies the offloads itself (a
    /// virtio-net header on a TAP or AF_PACKET port): each request leaves as it was queued,
    /// with its [`TxOffload`] beside it for the port to hand on, one output per request, in
    /// order. Counted as sent (`tx_packets`, `tx_bytes`; `tx_tso_sends` for a request whose
    /// TCP payload the device will cut, `tx_csum_offloaded` for one with a checksum request);
    /// the device's segments are counted by the port.
    pub fn poll_tx_device(
        &mut self,
        queue: u16,
        budget_frames: usize,
        out: &mut Vec<(Vec<u8>, TxOffload)>,
    ) -> Result<TxPoll, ConfigError> {
        let q = self
            .queues
            .get_mut(usize::from(queue))
            .ok_or(ConfigError::NoSuchQueue)?;
        let mut poll = TxPoll {
            requests: 0,
            frames: 0,
            dropped: 0,
        };
        while poll.requests < budget_frames {
            let Some(req) = q.tx.pop_front() else {
                break;
            };
            poll.requests += 1;
            poll.frames += 1;
            let c = &mut q.counters;
            c.tx_packets += 1;
            c.tx_bytes += req.frame.len() as u64;
            if req.offload.tso_mss.is_some() {
                c.tx_tso_sends += 1;
            }
            if req.offload.tso_mss.is_some() || req.offload.csum.l4 {
                c.tx_csum_offloaded += 1;
            }
            out.push((req.frame, req.offload));
        }
        Ok(poll)
    }

    // ---- internals ----

    fn check_queue(&self, queue: u16) -> Result<(), ConfigError> {
        if queue < self.config.queues {
            Ok(())
        } else {
            Err(ConfigError::NoSuchQueue)
        }
    }

    /// Services every timer due at `now_ns`: coalescing flushes, then moderation intervals.
    fn run_timers(&mut self, now_ns: u64) {
        let gro = self.config.gro;
        for (i, q) in self.queues.iter_mut().enumerate() {
            if q.rx.gro_deadline_ns(&gro).is_some_and(|d| now_ns >= d) {
                q.rx.on_timer(now_ns, &gro, &mut q.counters);
            }
            if let Some(cause) = q.moderator.on_timer(now_ns) {
                let queue = u16::try_from(i).unwrap_or(u16::MAX);
                fired(&mut self.wakeups, q, queue, now_ns, cause);
            }
        }
    }
}

/// Flow Director ATR: sample a transmitted TCP segment and steer its reply direction to
/// `queue` (see [`AtrConfig`]).
fn atr_sample(steering: &mut Steering, q: &mut Queue, queue: u16, frame: &[u8], atr: AtrConfig) {
    let Ok(Some(fields)) = FlowFields::from_frame(frame) else {
        return;
    };
    if fields.protocol != rss::PROTO_TCP {
        return;
    }
    let Some(t) = fields.five_tuple() else {
        return;
    };
    let syn = frame_is_syn(frame);
    q.atr_since_sample = q.atr_since_sample.saturating_add(1);
    if !syn && q.atr_since_sample < atr.sample_every_packets {
        return;
    }
    q.atr_since_sample = 0;
    let reply = FiveTuple {
        protocol: t.protocol,
        src: t.dst,
        dst: t.src,
        src_port: t.dst_port,
        dst_port: t.src_port,
    };
    if steering.filters.lookup(&reply) == Some(queue) {
        return;
    }
    match steering.filters.insert(reply, queue) {
        Ok(_) => q.counters.tx_atr_filters_set += 1,
        Err(_) => q.counters.tx_atr_table_full += 1,
    }
}

/// Whether a TCP or UDP packet's source or destination port is one of `ports` (low-latency
/// interrupts by port); out of line: only queues with such a rule call it.
#[cold]
#[inline(never)]
fn lli_port_matches(
    frame: &[u8],
    layout: Option<&Layout>,
    ports: &crate::config::LliPorts,
) -> bool {
    layout
        .filter(|l| {
            !l.l4_opaque
                && (l.protocol == wire::IpProtocol::TCP || l.protocol == wire::IpProtocol::UDP)
        })
        .and_then(|l| l.l4(frame).get(..4))
        .is_some_and(|p| match *p {
            [s0, s1, d0, d1] => {
                ports.contains(u16::from_be_bytes([s0, s1]))
                    || ports.contains(u16::from_be_bytes([d0, d1]))
            }
            _ => false,
        })
}

fn frame_is_syn(frame: &[u8]) -> bool {
    Layout::parse(frame)
        .ok()
        .and_then(|l| l.tcp(frame).map(|t| t.flags().contains(TcpFlags::SYN)))
        .unwrap_or(false)
}

fn fired(wakeups: &mut VecDeque<Wakeup>, q: &mut Queue, queue: u16, now_ns: u64, cause: FireCause) {
    q.counters.wakeups += 1;
    if cause == FireCause::LowLatency {
        q.counters.wakeups_lli += 1;
    }
    q.cycle_descriptors = 0;
    wakeups.push_back(Wakeup {
        queue,
        at_ns: now_ns,
        cause,
    });
}

fn add_counters(t: &mut QueueCounters, c: &QueueCounters) {
    let QueueCounters {
        rx_packets,
        rx_bytes,
        rx_descriptors_queued,
        rx_descriptors_polled,
        rx_drop_ring_full,
        rx_drop_malformed,
        rx_drop_oversize,
        rx_drop_no_queue,
        rx_csum_bad_ip,
        rx_csum_bad_l4,
        rx_steered_filter,
        rx_steered_rule,
        rx_drop_rule,
        rx_steered_rss,
        rx_steered_default,
        rx_steer_mismatch,
        rx_coalesced_segments,
        gro_flush_push_fin,
        gro_flush_short,
        gro_flush_gap,
        gro_flush_header_change,
        gro_flush_flags,
        gro_flush_size,
        gro_flush_timer,
        gro_flush_poll,
        gro_flush_evict,
        wakeups,
        wakeups_lli,
        wakeup_descriptors_max,
        polls,
        polls_budget_exhausted,
        rearms,
        tx_requests,
        tx_packets,
        tx_bytes,
        tx_tso_sends,
        tx_tso_segments,
        tx_csum_offloaded,
        tx_atr_filters_set,
        tx_atr_table_full,
        tx_drop_ring_full,
        tx_drop_malformed,
    } = *c;
    t.rx_packets += rx_packets;
    t.rx_bytes += rx_bytes;
    t.rx_descriptors_queued += rx_descriptors_queued;
    t.rx_descriptors_polled += rx_descriptors_polled;
    t.rx_drop_ring_full += rx_drop_ring_full;
    t.rx_drop_malformed += rx_drop_malformed;
    t.rx_drop_oversize += rx_drop_oversize;
    t.rx_drop_no_queue += rx_drop_no_queue;
    t.rx_csum_bad_ip += rx_csum_bad_ip;
    t.rx_csum_bad_l4 += rx_csum_bad_l4;
    t.rx_steered_filter += rx_steered_filter;
    t.rx_steered_rule += rx_steered_rule;
    t.rx_drop_rule += rx_drop_rule;
    t.rx_steered_rss += rx_steered_rss;
    t.rx_steered_default += rx_steered_default;
    t.rx_steer_mismatch += rx_steer_mismatch;
    t.rx_coalesced_segments += rx_coalesced_segments;
    t.gro_flush_push_fin += gro_flush_push_fin;
    t.gro_flush_short += gro_flush_short;
    t.gro_flush_gap += gro_flush_gap;
    t.gro_flush_header_change += gro_flush_header_change;
    t.gro_flush_flags += gro_flush_flags;
    t.gro_flush_size += gro_flush_size;
    t.gro_flush_timer += gro_flush_timer;
    t.gro_flush_poll += gro_flush_poll;
    t.gro_flush_evict += gro_flush_evict;
    t.wakeups += wakeups;
    t.wakeups_lli += wakeups_lli;
    t.wakeup_descriptors_max = t.wakeup_descriptors_max.max(wakeup_descriptors_max);
    t.polls += polls;
    t.polls_budget_exhausted += polls_budget_exhausted;
    t.rearms += rearms;
    t.tx_requests += tx_requests;
    t.tx_packets += tx_packets;
    t.tx_bytes += tx_bytes;
    t.tx_tso_sends += tx_tso_sends;
    t.tx_tso_segments += tx_tso_segments;
    t.tx_csum_offloaded += tx_csum_offloaded;
    t.tx_atr_filters_set += tx_atr_filters_set;
    t.tx_atr_table_full += tx_atr_table_full;
    t.tx_drop_ring_full += tx_drop_ring_full;
    t.tx_drop_malformed += tx_drop_malformed;
}
