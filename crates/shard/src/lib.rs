//! The sans-IO shard core: one iteration of one shard, written once and driven twice.
//!
//! A shard is one core's share of a host (DESIGN principle 2): its NIC queue pair, its
//! [`stack::Stack`] (connection table, timers, neighbour cache), its application instance
//! ([`app::App`]) and its buffer pool. [`Shard`] holds all four and nothing else: it never
//! reads a clock, sleeps, spawns a thread or touches a ring. Two drivers run it:
//!
//! - `runtime`: a pinned thread, the real clock, lock-free SPSC rings and an OS port (TAP,
//!   AF_PACKET, AF_XDP, a pcap replay, or the in-memory wire);
//! - `sim`: several shards per simulated host behind the real `nic` model, on the virtual clock.
//!
//! # Call order (one activation at `now`)
//!
//! 1. [`Shard::start`] once, before anything else (runs [`app::App::start`]);
//! 2. inputs, any number, in any order:
//!    - received frames into the NIC queue: [`Shard::handle_rx`], or [`Shard::rx_queue`] for a
//!      port that receives straight into pool buffers; the NIC's moderation decides when the
//!      shard sees them;
//!    - messages from other shards: [`Shard::handle_msg`] (processed at once, so frames caught
//!      mid-move reach the stack before anything polled later — DESIGN handoff invariant 4);
//! 3. [`Shard::handle_timeout`]: the iteration proper — NIC wake-ups and the NAPI poll within the
//!    budget (re-armed only when drained), each descriptor to the stack with its carried
//!    metadata (`nic::RxMeta`: hash and checksum verdicts, so the stack neither hashes nor
//!    verifies again) or to its owning shard, due stack timers, the application with its readiness events, then
//!    stack → NIC transmit ring;
//! 4. outputs: [`Shard::poll_tx`] until `None` (frames for the port; a buffer the port is done
//!    with goes back through [`Shard::recycle_tx`]), [`Shard::poll_msg`] until `None`
//!    (messages for other shards), [`Shard::poll_mem_trim`] (a driver that can give freed
//!    heap memory back to the OS does so and reports it with [`Shard::note_mem_trim`]), then
//!    [`Shard::poll_timeout`] for when to come back.
//!
//! Backpressure: frames the driver has not taken from [`Shard::poll_tx`] stay in the shard,
//! and while any wait the stack is not asked for more, so a slow port holds the stack's output
//! in the stack's own bounded queue. The message outbox is bounded too
//! ([`ShardConfig::outbox_msgs_max`]); a message that does not fit is dropped and counted.
#![deny(unsafe_code)]

pub mod handoff;
pub mod mem_trim;
pub mod moves;
pub mod msg;
pub mod neighbour;
pub mod steer;

use std::cell::Cell;
use std::collections::VecDeque;

use app::{App, Ctx, ShardInfo};
use nic::{Nic, RxDescriptor, TxChecksum, TxOffload, TxVerdict};
use rss::Reta;
use stack::{RxLookahead, RxMeta, SocketEvent, Stack, earliest_deadline};

pub use handoff::{Conversation, EngineCmd, HostCmd};
pub use mem_trim::MemTrim;
pub use moves::MoveCounters;
pub use msg::{ConnMove, FrameMsg, Msg, MsgCounters, MsgKind};
pub use neighbour::{is_arp_reply, is_neighbour_frame};
pub use steer::{ATR_SLOTS, AtrLearn, SteerCounters, SwSteer};

/// Rounds of application polling per iteration: an application that keeps raising events for
/// itself continues at the next iteration.
pub const APP_ROUNDS_MAX: usize = 8;

/// How one shard is set up.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Which shard of how many, and its NUMA node.
    pub info: ShardInfo,
    /// NAPI budget: descriptors per poll, and frames moved from the stack to the NIC's transmit
    /// ring per iteration.
    pub budget_packets: usize,
    /// The software RETA over the host's shards, when frames may reach a shard that does not
    /// own their flow (fewer hardware queues than shards, or a kernel-side spread that does not
    /// follow our RETA): each polled frame with a hash goes to `reta.queue_for_hash(hash)`.
    /// `None`: every frame polled here is this shard's.
    pub sw_reta: Option<Reta>,
    /// Copy ARP/ND frames to every other shard (live ports, where such a frame reaches one
    /// shard only). Needs more than one shard.
    pub copy_neighbour: bool,
    /// Most messages waiting in the outbox for the driver; beyond it a message is dropped and
    /// counted ([`MsgCounters::drop_outbox_full`]).
    pub outbox_msgs_max: usize,
    /// The port's device applies the transmit offloads the stack asks for
    /// ([`stack::TxMeta`]: TSO, checksum completion; a virtio-net header on TAP or AF_PACKET):
    /// frames leave the NIC model whole with their [`TxOffload`] ([`Shard::poll_tx_offload`]).
    /// Off: the NIC model applies them in software (segments and checksums) before the port,
    /// and every frame [`Shard::poll_tx`] returns is a finished wire frame.
    pub tx_offload_in_device: bool,
    /// Entries of the host's RETA (a power of two): which bucket a flow hash falls in when
    /// buckets move between shards ([`moves`]).
    pub reta_entries: usize,
    /// Most frames held per bucket moving in ([`Msg::MoveIn`]); beyond it a frame is dropped
    /// and counted ([`MoveCounters::hold_drop_full`]), left to the peer's retransmission.
    pub hold_frames_max: usize,
    /// Count the packets this shard processes per RETA entry ([`Shard::bucket_packets`]): the
    /// load a rebalancer reads when the NIC cannot count for it (a software RETA).
    pub count_buckets: bool,
    /// Steering rules and ATR where the software RETA runs ([`steer`]). Rules apply on any
    /// host (a `drop` rule on one shard too); ATR and `queue N` need more than one shard
    /// and a software RETA (`sw_reta`).
    pub sw_steer: Option<SwSteer>,
}

impl ShardConfig {
    /// A shard with the default budget, no software RETA and no neighbour copies.
    pub fn new(info: ShardInfo) -> Self {
        ShardConfig {
            info,
            budget_packets: nic::BUDGET_DEFAULT_PACKETS,
            sw_reta: None,
            copy_neighbour: false,
            outbox_msgs_max: 4096,
            tx_offload_in_device: false,
            reta_entries: rss::RETA_SIZE_DEFAULT,
            hold_frames_max: 1024,
            count_buckets: false,
            sw_steer: None,
        }
    }
}

/// What [`Shard::handle_timeout`] checks an idle iteration left alone, in debug builds: the
/// shard's counters, frames ready, messages ready, left-over flags (poll scheduled, transmit
/// and application rounds), its deadline, the stack's counters and quiescence.
type IdleWitness = (
    ShardCounters,
    usize,
    usize,
    (bool, bool, bool),
    Option<u64>,
    stack::Counters,
    bool,
);

/// What one shard counted (the NIC queue's and the stack's own counters are theirs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardCounters {
    /// Wire packets handed to this shard's stack (coalesced segments counted one by one),
    /// whether polled here or forwarded here.
    pub rx_packets: u64,
    /// Frames handed to the driver by [`Shard::poll_tx`].
    pub tx_frames: u64,
    /// Frames the NIC's transmit ring refused.
    pub tx_drop_nic_ring_full: u64,
    /// Iterations that found work ([`Shard::handle_timeout`] returned > 0).
    pub busy_iterations: u64,
    /// Messages by kind, and the ones dropped.
    pub msgs: MsgCounters,
    /// Times the driver gave freed heap memory back to the OS at this shard's request
    /// ([`mem_trim`]), and the resident bytes those trims released (as the driver measured).
    pub mem_trims: u64,
    pub mem_trim_released_bytes: u64,
}

/// A frame receive view of the shard's NIC queue, for ports that fill pool buffers directly.
pub struct RxQueue<'a> {
    nic: &'a mut Nic,
    now_ns: u64,
}

impl<'a> RxQueue<'a> {
    /// A receive view of queue 0 of `nic` at `now_ns`, for a driver that owns NICs outside a
    /// [`Shard`] (the forwarding loop of `runtime::router`, one NIC per port) and fills them
    /// through the same ports.
    pub fn new(nic: &'a mut Nic, now_ns: u64) -> RxQueue<'a> {
        RxQueue { nic, now_ns }
    }
}

impl RxQueue<'_> {
    /// An empty buffer of at least `capacity_bytes` from the shard's pool.
    pub fn take_buffer(&mut self, capacity_bytes: usize) -> Vec<u8> {
        self.nic.take_buffer(capacity_bytes)
    }

    /// Returns an unused buffer to the pool.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.nic.recycle(buf);
    }

    /// A frame arrived: the NIC verifies, hashes, coalesces and queues it (or drops and counts
    /// it) and lets moderation decide when the shard is woken.
    pub fn receive(&mut self, frame: Vec<u8>) {
        self.nic.receive_on_queue(self.now_ns, 0, frame);
    }

    /// As [`RxQueue::receive`] for a frame whose TCP/UDP checksum the OS already
    /// established (virtio-net `DATA_VALID`, or a partial checksum from this host): the NIC
    /// reports it good without summing it ([`Nic::receive_on_queue_l4_valid`]).
    pub fn receive_l4_valid(&mut self, frame: Vec<u8>) {
        self.nic.receive_on_queue_l4_valid(self.now_ns, 0, frame);
    }

    /// Free slots of the NIC's receive ring: a port should not hand in more (the NIC would
    /// drop them, counted).
    pub fn room(&self) -> usize {
        self.nic
            .config()
            .rx_ring_slots
            .saturating_sub(self.nic.rx_pending(0))
    }
}

/// How often a shard gives its NIC pool's idle buffers back to the allocator
/// (`nic::Nic::reap_pool`): buffers that sat unused a whole second go, so memory a burst took
/// (a thousand connections' worth of frames, say) returns when the burst is over. While the
/// pool holds buffers, [`Shard::poll_timeout`] asks to be woken for the next reap, so an idle
/// shard empties its pool within two intervals and then sleeps.
pub const POOL_REAP_INTERVAL_NS: u64 = 1_000_000_000;

/// One shard: NIC queue pair, stack, application, pool and outbox. See the crate docs for the
/// order a driver calls it in.
pub struct Shard<A> {
    /// [`Shard::poll_timeout`]'s last answer while it still holds (`None`: to be computed).
    /// Every `&mut` entry point that can change what it depends on — the stack, the NIC, the
    /// application, the move state, the flags, the reap and trim times — clears it; the
    /// transmit and message polls (which only pop what is ready) and an iteration with
    /// nothing due (which changes nothing, checked in debug builds) keep it. Debug builds
    /// check every cached answer against a fresh one.
    deadline: Cell<Option<Option<u64>>>,
    info: ShardInfo,
    budget_packets: usize,
    tx_offload_in_device: bool,
    sw_reta: Option<Reta>,
    /// Rules and ATR in front of the software RETA (see [`steer`]).
    sw_steer: Option<SwSteer>,
    copy_neighbour: bool,
    outbox_msgs_max: usize,
    /// The shard's queue pair: queue 0 of a one-queue NIC model (moderation, coalescing,
    /// checksum verification, the buffer pool).
    nic: Nic,
    stack: Stack,
    app: A,
    started: bool,
    /// The NAPI poll is scheduled: a wake-up fired and the queue has not been drained since.
    scheduled: bool,
    /// The last transmit step stopped at its limit (budget or NIC ring room), not because the
    /// stack had nothing more: the next iteration has output to move.
    tx_more: bool,
    /// The application used all [`APP_ROUNDS_MAX`] rounds: events may be waiting for it.
    app_more: bool,
    /// The `now` of the latest call, for [`Shard::poll_timeout`] while work is pending.
    now_ns: u64,
    /// When the NIC pool is next reaped ([`POOL_REAP_INTERVAL_NS`]); the stack's TCP buffer
    /// bytes are sampled for [`mem_trim`] at the same ticks.
    next_pool_reap_ns: u64,
    /// Whether freed heap memory should go back to the OS ([`mem_trim`]).
    mem_trim: MemTrim,
    /// Reused: descriptors of one poll, events of one application round, frames of one
    /// transmit poll.
    descs: Vec<RxDescriptor>,
    events: Vec<SocketEvent>,
    tx_scratch: Vec<Vec<u8>>,
    tx_scratch_device: Vec<(Vec<u8>, TxOffload)>,
    /// Frames ready for the port with what each asks of the device ([`TxOffload::NONE`]
    /// unless `tx_offload_in_device`), oldest first. Invariant: while non-empty, the stack is
    /// not asked for more output.
    tx_ready: VecDeque<(Vec<u8>, TxOffload)>,
    /// Messages for other shards, oldest first; at most `outbox_msgs_max`.
    outbox: VecDeque<(u16, Msg)>,
    counters: ShardCounters,
    /// RETA entries (a power of two) and the hold bound, for moves.
    reta_entries: usize,
    hold_frames_max: usize,
    /// The move protocol's state (buckets moving in and out, kept connections).
    moves: moves::Moves,
    /// Packets processed per RETA entry since start (empty unless `count_buckets`).
    bucket_packets: Vec<u64>,
}

impl<A: App> Shard<A> {
    /// A shard over `nic` (its queue 0 is the shard's queue pair), `stack` and `app`.
    pub fn new(cfg: ShardConfig, nic: Nic, stack: Stack, app: A) -> Self {
        let budget = cfg.budget_packets.max(1);
        let multi = cfg.info.shards > 1;
        Shard {
            info: cfg.info,
            budget_packets: budget,
            tx_offload_in_device: cfg.tx_offload_in_device,
            sw_steer: cfg.sw_steer.map(|mut s| {
                if !(multi && cfg.sw_reta.is_some()) {
                    s = SwSteer::new(s.rules().clone(), false);
                }
                s
            }),
            sw_reta: cfg.sw_reta.filter(|_| multi),
            copy_neighbour: cfg.copy_neighbour && multi,
            outbox_msgs_max: cfg.outbox_msgs_max,
            nic,
            stack,
            app,
            started: false,
            scheduled: false,
            tx_more: false,
            app_more: false,
            now_ns: 0,
            deadline: Cell::new(None),
            next_pool_reap_ns: 0,
            mem_trim: MemTrim::default(),
            descs: Vec::with_capacity(budget),
            events: Vec::new(),
            tx_scratch: Vec::with_capacity(budget),
            tx_scratch_device: Vec::new(),
            tx_ready: VecDeque::with_capacity(budget),
            outbox: VecDeque::new(),
            counters: ShardCounters::default(),
            reta_entries: cfg.reta_entries.max(1).next_power_of_two(),
            hold_frames_max: cfg.hold_frames_max,
            moves: moves::Moves::default(),
            bucket_packets: if cfg.count_buckets {
                vec![0; cfg.reta_entries.max(1).next_power_of_two()]
            } else {
                Vec::new()
            },
        }
    }

    // ---- getters ----

    pub fn info(&self) -> ShardInfo {
        self.info
    }

    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// The stack, for drivers and tests that call it directly (a test client, a checker).
    pub fn stack_mut(&mut self) -> &mut Stack {
        self.deadline_changes();
        &mut self.stack
    }

    pub fn app(&self) -> &A {
        &self.app
    }

    /// The application, for tests that drive it from outside; the driver must run an
    /// iteration afterwards so new output is polled.
    pub fn app_mut(&mut self) -> &mut A {
        self.deadline_changes();
        &mut self.app
    }

    /// Descriptors per NAPI poll.
    pub fn budget_packets(&self) -> usize {
        self.budget_packets
    }

    pub fn nic(&self) -> &Nic {
        &self.nic
    }

    pub fn counters(&self) -> ShardCounters {
        self.counters
    }

    /// The software steering's rules, hits and counters (`None` without
    /// [`ShardConfig::sw_steer`]).
    pub fn sw_steer(&self) -> Option<&SwSteer> {
        self.sw_steer.as_ref()
    }

    /// Packets this shard's stack processed per RETA entry since start (cumulative; empty
    /// unless [`ShardConfig::count_buckets`]).
    pub fn bucket_packets(&self) -> &[u64] {
        &self.bucket_packets
    }

    fn count_bucket(&mut self, hash: Option<u32>) {
        if let Some(h) = hash {
            let mask = self.bucket_packets.len().wrapping_sub(1);
            if let Some(n) = self.bucket_packets.get_mut(h as usize & mask) {
                *n += 1;
            }
        }
    }

    /// Work is pending that needs no new input: the NAPI poll is scheduled, the stack or the
    /// application has more than one iteration's share, or frames and messages wait for the
    /// driver.
    pub fn is_busy(&self) -> bool {
        self.iteration_due() || !self.tx_ready.is_empty() || !self.outbox.is_empty()
    }

    /// The next iteration has work without any new input.
    fn iteration_due(&self) -> bool {
        !self.started
            || self.scheduled
            || self.tx_more
            || self.app_more
            || (!self.moves.outgoing.is_empty() && self.nic.rx_pending(0) == 0)
    }

    /// Consumes the shard, returning its parts (for reports when a driver stops).
    pub fn into_parts(self) -> (Nic, Stack, A) {
        (self.nic, self.stack, self.app)
    }

    // ---- inputs ----

    /// Starts the application (once; later calls do nothing).
    pub fn start(&mut self, now_ns: u64) {
        self.deadline_changes();
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        self.now_ns = now_ns;
        let mut ctx = Ctx::new(now_ns, self.info, &mut self.stack);
        self.app.start(&mut ctx);
    }

    /// Received frames, in arrival order, into the NIC queue (which may drop them, counted in
    /// the NIC's queue counters).
    pub fn handle_rx(&mut self, now_ns: u64, frames: impl IntoIterator<Item = Vec<u8>>) {
        let mut q = self.rx_queue(now_ns);
        for f in frames {
            q.receive(f);
        }
    }

    /// The NIC queue as a receive view at `now_ns`, for a port that receives into pool buffers.
    pub fn rx_queue(&mut self, now_ns: u64) -> RxQueue<'_> {
        self.deadline_changes();
        self.now_ns = self.now_ns.max(now_ns);
        RxQueue {
            nic: &mut self.nic,
            now_ns,
        }
    }

    /// A message from another shard (or engine), processed now.
    pub fn handle_msg(&mut self, now_ns: u64, msg: Msg) {
        self.deadline_changes();
        self.now_ns = self.now_ns.max(now_ns);
        self.counters.msgs.count_rx(msg.kind());
        match msg {
            Msg::Frame(f) if !self.moves.holding.is_empty() => {
                match self.held_bucket(f.meta.hash) {
                    Some(i) => self.hold_frame(i, f),
                    None => self.receive_msg_frame(now_ns, f),
                }
            }
            Msg::Frame(f) | Msg::Forwarded(f) | Msg::Neighbour(f) => {
                self.receive_msg_frame(now_ns, f);
            }
            Msg::Steer(l) => {
                if let Some(s) = &mut self.sw_steer {
                    s.record(l);
                }
            }
            m => self.handle_move_msg(now_ns, m),
        }
    }

    /// A frame from another shard, to the stack now.
    fn receive_msg_frame(&mut self, now_ns: u64, f: FrameMsg) {
        self.counters.rx_packets += 1;
        self.count_bucket(f.meta.hash);
        self.stack.receive(now_ns, &f.frame, &f.meta);
        self.nic.recycle(f.frame);
    }

    /// One iteration at `now_ns`: wake-ups and the NAPI poll, due timers, the application,
    /// transmit. Returns the units of work done (descriptors, timer runs, events, frames
    /// queued for transmission); 0 means the shard was idle.
    pub fn handle_timeout(&mut self, now_ns: u64) -> usize {
        self.now_ns = self.now_ns.max(now_ns);
        if self.nothing_due(now_ns) {
            if cfg!(debug_assertions) {
                // The claim, checked by every debug run (the test suite's soaks): the whole
                // iteration would have done nothing.
                let before = self.idle_witness();
                let work = self.iterate(now_ns);
                assert!(
                    work == 0 && self.idle_witness() == before,
                    "shard {}: an iteration judged idle at {now_ns} did {work} units of work",
                    self.info.shard
                );
            }
            return 0;
        }
        self.deadline_changes();
        self.iterate(now_ns)
    }

    /// Something [`Shard::poll_timeout`] depends on may change: its cached answer is dropped.
    fn deadline_changes(&mut self) {
        *self.deadline.get_mut() = None;
    }

    /// What an idle iteration must leave as it found it (checked in debug builds): the
    /// counters, the frames and messages ready for the driver, the left-over flags and every
    /// deadline.
    fn idle_witness(&self) -> IdleWitness {
        (
            self.counters,
            self.tx_ready.len(),
            self.outbox.len(),
            (self.scheduled, self.tx_more, self.app_more),
            self.deadline_now(),
            self.stack.counters(),
            self.stack.is_quiescent(),
        )
    }

    /// [`Shard::handle_timeout`]'s iteration proper.
    fn iterate(&mut self, now_ns: u64) -> usize {
        if !self.started {
            self.start(now_ns);
        }
        let mut work = self.poll_nic(now_ns);
        if self.stack.poll_timeout().is_some_and(|t| t <= now_ns) {
            self.stack.handle_timeout(now_ns);
            work += 1;
        }
        work += self.run_app(now_ns);
        work += self.forward_moved();
        // After the forwarded frames: a `MoveDone` must follow everything forwarded before it.
        if self.moves.active() {
            work += self.step_moves(now_ns);
        }
        work += self.transmit(now_ns);
        let trim_retry = self.mem_trim.retry_at_ns().is_some_and(|t| now_ns >= t);
        if now_ns >= self.next_pool_reap_ns || trim_retry {
            self.mem_trim.observe(now_ns, self.stack.tcp_mem_bytes());
        }
        if now_ns >= self.next_pool_reap_ns {
            self.nic.reap_pool();
            self.next_pool_reap_ns = now_ns.saturating_add(POOL_REAP_INTERVAL_NS);
        }
        if work > 0 {
            self.counters.busy_iterations += 1;
        }
        work
    }

    /// True when an iteration at `now_ns` would do nothing and change nothing, so
    /// [`Shard::handle_timeout`] may return at once. Step by step, what the iteration would
    /// find: started, no NAPI poll scheduled, no transmit or application round left over and
    /// no outgoing move ([`Shard::iteration_due`]); no NIC wake-up queued and no NIC timer
    /// (moderation, receive-coalescing flush) due, so the wake-up loop changes nothing; no
    /// stack timer due; no readiness event, stack output or caught frame
    /// ([`Stack::is_quiescent`]), so the application is not called (its own deadline not
    /// due), nothing is forwarded and the transmit pass — with an empty NIC transmit ring and
    /// a budget, so it finds room, asks the stack once and gets nothing — leaves `tx_more`
    /// clear; no move in progress; no pool reap or memory-trim retry due. Drivers activate
    /// every shard of a host on each of its events (the simulator's `ShardedHost`), so most
    /// iterations of a multi-shard host are such idle ones.
    fn nothing_due(&self, now_ns: u64) -> bool {
        let not_due = |t: Option<u64>| t.is_none_or(|t| t > now_ns);
        !self.iteration_due()
            && !self.moves.active()
            && self.budget_packets > 0
            && now_ns < self.next_pool_reap_ns
            && !self.nic.wakeups_pending()
            && self.nic.tx_pending(0) == 0
            && self.stack.is_quiescent()
            && not_due(self.mem_trim.retry_at_ns())
            && not_due(self.nic.next_deadline())
            && not_due(self.app.poll_timeout())
            && not_due(self.stack.poll_timeout())
    }

    /// A buffer the port is done with (a transmitted frame), back to the stack's frame pool.
    pub fn recycle_tx(&mut self, buf: Vec<u8>) {
        // The stack's buffer pool schedules its trim by what it holds.
        self.deadline_changes();
        self.stack.recycle(buf);
    }

    // ---- outputs ----

    /// The next frame for the port, oldest first. Only for a shard whose NIC model applies
    /// the offloads (`tx_offload_in_device` off); otherwise use [`Shard::poll_tx_offload`].
    pub fn poll_tx(&mut self) -> Option<Vec<u8>> {
        self.poll_tx_offload().map(|(f, _)| f)
    }

    /// The next frame for the port with the offloads its device must apply (TSO, checksum
    /// completion; always [`TxOffload::NONE`] unless `tx_offload_in_device`), oldest first.
    pub fn poll_tx_offload(&mut self) -> Option<(Vec<u8>, TxOffload)> {
        let f = self.tx_ready.pop_front()?;
        self.counters.tx_frames += 1;
        Some(f)
    }

    /// The next message for another shard: its destination shard and the message.
    pub fn poll_msg(&mut self) -> Option<(u16, Msg)> {
        self.outbox.pop_front()
    }

    /// Whether the driver should give freed heap memory back to the OS now (once per due
    /// trim; see [`mem_trim`]). A driver that does reports it with [`Shard::note_mem_trim`].
    pub fn poll_mem_trim(&mut self) -> bool {
        self.deadline_changes();
        self.mem_trim.take()
    }

    /// The driver gave freed heap memory back at [`Shard::poll_mem_trim`]'s request, and the
    /// process's resident size fell by `resident_released_bytes` meanwhile (counted
    /// `mem_trims`, `mem_trim_released_bytes`).
    pub fn note_mem_trim(&mut self, resident_released_bytes: u64) {
        self.deadline_changes();
        self.counters.mem_trims += 1;
        self.counters.mem_trim_released_bytes += resident_released_bytes;
    }

    /// When the shard next needs [`Shard::handle_timeout`]: now (the time of the latest call)
    /// while work is pending, else the earliest of the stack's timers, the NIC's moderation and
    /// coalescing deadlines and the application's own deadline.
    ///
    /// Drivers ask after every activation, of every shard of a host: the answer is cached
    /// until something it depends on may change (see the `deadline` field).
    pub fn poll_timeout(&self) -> Option<u64> {
        if let Some(at) = self.deadline.get() {
            debug_assert_eq!(
                at,
                self.deadline_now(),
                "shard {}: cached deadline is stale",
                self.info.shard
            );
            return at;
        }
        let at = self.deadline_now();
        self.deadline.set(Some(at));
        at
    }

    /// [`Shard::poll_timeout`] computed afresh.
    fn deadline_now(&self) -> Option<u64> {
        if self.iteration_due() {
            return Some(self.now_ns);
        }
        // Pairwise, not through an iterator over an array of options: drivers ask after
        // every activation.
        let reap = (self.nic.pool_idle_buffers() > 0).then_some(self.next_pool_reap_ns);
        earliest_deadline(
            earliest_deadline(self.stack.poll_timeout(), self.nic.next_deadline()),
            earliest_deadline(
                earliest_deadline(self.app.poll_timeout(), reap),
                self.mem_trim.retry_at_ns(),
            ),
        )
    }

    // ---- the iteration's steps ----

    /// NIC wake-ups, then one NAPI poll of up to the budget when scheduled.
    fn poll_nic(&mut self, now_ns: u64) -> usize {
        while self.nic.poll_wakeup(now_ns).is_some() {
            self.scheduled = true;
        }
        if !self.scheduled {
            return 0;
        }
        let mut descs = std::mem::take(&mut self.descs);
        descs.clear();
        if let Ok(p) = self.nic.poll_rx(0, self.budget_packets, now_ns, &mut descs) {
            self.scheduled = !p.drained;
        }
        let work = descs.len();
        if work == 1 {
            // A burst of one has no next frame to look ahead for (the simulator's usual
            // case: one frame per activation): the look-ahead would only parse and hash it
            // once more.
            if let Some(d) = descs.pop() {
                self.dispatch(now_ns, d);
            }
            self.descs = descs;
            return work;
        }
        // The burst's next frames' connection state is asked for while this one is
        // processed (`stack::RxLookahead`: hints only, so frames steered elsewhere or held
        // cost a wasted prefetch, nothing more).
        fn view(d: &RxDescriptor) -> (&[u8], &RxMeta) {
            (&d.frame, &d.meta)
        }
        let mut la = RxLookahead::default();
        la.start(&self.stack, &descs, view);
        let mut it = descs.drain(..);
        while let Some(d) = it.next() {
            la.advance(&self.stack, it.as_slice(), view);
            self.dispatch(now_ns, d);
        }
        drop(it);
        self.descs = descs;
        work
    }

    /// One polled descriptor: copies to the other shards when it is a neighbour frame, to its
    /// owning shard when the software RETA names another, else to this shard's stack.
    fn dispatch(&mut self, now_ns: u64, d: RxDescriptor) {
        let me = self.info.shard;
        let neighbour = self.copy_neighbour && is_neighbour_frame(&d.frame);
        if neighbour {
            for to in (0..self.info.shards).filter(|&s| s != me) {
                let mut copy = self.nic.take_buffer(d.frame.len());
                copy.extend_from_slice(&d.frame);
                self.send_msg(
                    to,
                    Msg::Neighbour(FrameMsg {
                        frame: copy,
                        meta: d.meta,
                    }),
                );
            }
        }
        let steered = match &mut self.sw_steer {
            Some(s) if !neighbour => s.decide(&d.frame, d.meta.hash),
            _ => Ok(None),
        };
        let owner = match steered {
            Ok(None) => match (&self.sw_reta, d.meta.hash) {
                (Some(reta), Some(h)) if !neighbour => reta.queue_for_hash(h),
                _ => me,
            },
            Ok(Some(shard)) => shard,
            Err(()) => {
                self.nic.recycle(d.frame);
                return;
            }
        };
        if owner != me {
            self.send_msg(
                owner,
                Msg::Frame(FrameMsg {
                    frame: d.frame,
                    meta: d.meta,
                }),
            );
            return;
        }
        if !self.moves.holding.is_empty() && !neighbour {
            if let Some(i) = self.held_bucket(d.meta.hash) {
                self.hold_frame(
                    i,
                    FrameMsg {
                        frame: d.frame,
                        meta: d.meta,
                    },
                );
                return;
            }
        }
        self.counters.rx_packets += u64::from(d.meta.coalesced_segments.max(1));
        self.count_bucket(d.meta.hash);
        // The NIC's metadata as is: the stack reuses the hash and skips the checksums the
        // NIC verified (its verdicts describe these exact bytes).
        self.stack.receive(now_ns, &d.frame, &d.meta);
        self.nic.recycle(d.frame);
    }

    /// ATR: when `frame` is an active open, its reply direction is this shard's, here and
    /// (before the SYN leaves: a driver sends messages before frames) on every other shard.
    #[inline(never)]
    fn atr_learn(&mut self, frame: &[u8]) {
        let me = self.info.shard;
        let Some(s) = &mut self.sw_steer else { return };
        if let Some(l) = s.learn_tx(frame, me, self.nic.steering()) {
            for to in (0..self.info.shards).filter(|&t| t != me) {
                self.send_msg(to, Msg::Steer(l));
            }
        }
    }

    /// Queues `msg` for shard `to`, or drops it (counted, its buffer recycled). Move-protocol
    /// messages are never dropped for a full outbox (they are bounded by the connections of
    /// the buckets moving).
    pub(crate) fn send_msg(&mut self, to: u16, msg: Msg) {
        let drop = if to >= self.info.shards {
            Some(&mut self.counters.msgs.drop_no_such_shard)
        } else if self.outbox.len() >= self.outbox_msgs_max && msg.kind() != MsgKind::Move {
            Some(&mut self.counters.msgs.drop_outbox_full)
        } else {
            None
        };
        if let Some(counter) = drop {
            *counter += 1;
            if let Some(buf) = msg.into_buffer() {
                self.nic.recycle(buf);
            }
            return;
        }
        self.counters.msgs.count_tx(msg.kind());
        self.outbox.push_back((to, msg));
    }

    /// Frames the stack caught for connections that moved away (its moved markers with a
    /// destination set), to their new owner in arrival order (DESIGN handoff invariant 4).
    fn forward_moved(&mut self) -> usize {
        let mut work = 0;
        while let Some((to, frame, meta)) = self.stack.poll_forward() {
            work += 1;
            self.send_msg(to, Msg::Forwarded(FrameMsg { frame, meta }));
        }
        work
    }

    /// The application, with the stack's readiness events, for up to [`APP_ROUNDS_MAX`] rounds
    /// while its calls raise new events. Runs at least once when its own deadline is due.
    fn run_app(&mut self, now_ns: u64) -> usize {
        let mut work = 0;
        let app_due = self.app.poll_timeout().is_some_and(|t| t <= now_ns);
        let mut events = std::mem::take(&mut self.events);
        self.app_more = true;
        for round in 0..APP_ROUNDS_MAX {
            events.clear();
            while let Some(e) = self.stack.poll_event() {
                events.push(e);
            }
            if events.is_empty() && (round > 0 || !app_due) {
                self.app_more = false;
                break;
            }
            work += events.len().max(1);
            let mut ctx = Ctx::new(now_ns, self.info, &mut self.stack);
            self.app.poll(&mut ctx, &events);
        }
        self.events = events;
        work
    }

    /// Stack → NIC transmit ring → frames ready for the port, unless the port has not taken the
    /// previous ones yet (then the stack keeps its output).
    fn transmit(&mut self, now_ns: u64) -> usize {
        if !self.tx_ready.is_empty() {
            return 0;
        }
        let slots = self.nic.config().tx_ring_slots;
        let room = slots.saturating_sub(self.nic.tx_pending(0));
        let mut work = 0;
        self.tx_more = true;
        for _ in 0..room.min(self.budget_packets) {
            let Some((f, meta)) = self.stack.poll_transmit_meta(now_ns) else {
                self.tx_more = false;
                break;
            };
            work += 1;
            if self.sw_steer.as_ref().is_some_and(SwSteer::atr) {
                self.atr_learn(&f);
            }
            let offload = TxOffload {
                tso_mss: (meta.gso_size_bytes > 0).then_some(meta.gso_size_bytes),
                csum: TxChecksum {
                    ip: false,
                    l4: meta.l4_csum_partial,
                },
            };
            if !matches!(self.nic.transmit(0, f, offload), Ok(TxVerdict::Queued)) {
                self.counters.tx_drop_nic_ring_full += 1;
            }
        }
        if self.tx_offload_in_device {
            let mut out = std::mem::take(&mut self.tx_scratch_device);
            let _ = self.nic.poll_tx_device(0, usize::MAX, &mut out);
            self.tx_ready.extend(out.drain(..));
            self.tx_scratch_device = out;
        } else {
            let mut out = std::mem::take(&mut self.tx_scratch);
            let _ = self.nic.poll_tx(0, usize::MAX, &mut out);
            // Most iterations of a simulated host transmit nothing: skip the deque's
            // extend (its reservation) then.
            if !out.is_empty() {
                self.tx_ready
                    .extend(out.drain(..).map(|f| (f, TxOffload::NONE)));
            }
            self.tx_scratch = out;
        }
        work
    }
}
