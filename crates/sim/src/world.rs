//! The world: hosts, links, the event queue and the virtual clock.
//!
//! Events are ordered by `(time, insertion sequence)`, so events at the same instant run in
//! the order they were scheduled and a run is a pure function of the seed and the set-up.
//! Deliveries and wake-ups wait in a binary heap; each host's one live timer waits in its own
//! slot, keyed by the same `(time, sequence)` it would have had in the heap, and the next event
//! is the earlier of the heap's head and the earliest slot. A host that moves its deadline on
//! every frame so replaces its slot instead of leaving a superseded event in the heap (a
//! third of the heap's pops in the soak's bulk workload were such events); the order of
//! events is the same. Finding the earliest slot is a scan over the hosts, fine for the
//! handful of hosts a simulated network has.
//! Hosts and links live in `Vec`s indexed by their ids, and each host's port attachments in a
//! `Vec` indexed by port number: no hash-map iteration order can leak into behaviour, and a
//! transmitted frame finds its link with two indexings.

use crate::fault::{DropReason, FaultRule, Flap};
use crate::host::{Host, HostId, PortId};
use crate::link::{Channel, ChannelConfig, ChannelCounters, Dir, LinkId};
use crate::rng::SimRng;
use crate::trace::{Trace, TraceEvent, frame_digest};
use core::cmp::Ordering;
use core::fmt;
use std::collections::BinaryHeap;

/// Stream-id namespaces for [`SimRng::fork`], so link and host streams never collide.
const STREAM_TAG_LINK: u64 = 0x4c49_4e4b << 32; // "LINK"
const STREAM_TAG_HOST: u64 = 0x484f_5354 << 32; // "HOST"

/// Why [`World::connect`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The host id is not in this world.
    UnknownHost(HostId),
    /// The (host, port) end is already attached to a link.
    PortInUse(HostId, PortId),
    /// Both ends are the same (host, port).
    SameEnd,
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::UnknownHost(h) => write!(f, "unknown {h}"),
            ConnectError::PortInUse(h, p) => write!(f, "{h} {p} is already connected"),
            ConnectError::SameEnd => f.write_str("a link needs two distinct ends"),
        }
    }
}

impl std::error::Error for ConnectError {}

/// Why a run stopped early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// The event budget ran out before the world went idle (a livelock, or a host with a
    /// perpetual timer).
    EventLimit {
        /// Events processed in this call.
        events: u64,
        /// Virtual time when the budget ran out.
        now_ns: u64,
    },
    /// A checker reported a violated property.
    Check {
        /// Virtual time of the event after which the check failed.
        now_ns: u64,
        /// The checker's message.
        message: String,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::EventLimit { events, now_ns } => {
                write!(f, "event limit of {events} reached at t={now_ns} ns")
            }
            RunError::Check { now_ns, message } => {
                write!(f, "check failed at t={now_ns} ns: {message}")
            }
        }
    }
}

impl std::error::Error for RunError {}

/// World-level named counters (per-link counters live in [`ChannelCounters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorldCounters {
    /// Events processed (stale timer events excluded).
    pub events: u64,
    /// Frames delivered to hosts.
    pub deliveries: u64,
    /// `handle_timeout` calls.
    pub timeouts: u64,
    /// Armed timers superseded by a different `poll_timeout` answer before they fired (each
    /// replaced in its host's slot, never run).
    pub timers_stale: u64,
    /// Frames sent on a port attached to no link (dropped).
    pub drop_no_link: u64,
    /// Activations cut short by [`World::TRANSMIT_BURST_MAX`].
    pub transmit_bursts_cut: u64,
}

enum EventKind {
    Deliver {
        link: LinkId,
        dir: Dir,
        frame: Vec<u8>,
    },
    Wake {
        host: HostId,
    },
}

struct Event {
    at_ns: u64,
    seq: u64,
    kind: EventKind,
}

// Ordered by (at_ns, seq) reversed, so `BinaryHeap` (a max-heap) pops the earliest first.
// `seq` is unique, so the order is total.
impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.at_ns == other.at_ns && self.seq == other.seq
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at_ns, other.seq).cmp(&(self.at_ns, self.seq))
    }
}

struct HostSlot {
    host: Box<dyn Host>,
    /// The live timer, if any: its deadline and its sequence number (its place among events
    /// of the same instant, as if it were in the heap). Replaced when the host's deadline
    /// moves; cleared when it fires.
    timer: Option<(u64, u64)>,
    /// The deadline `poll_timeout` gave when the timer was armed (before clamping to the
    /// clock), to tell whether it moved.
    armed_ns: Option<u64>,
    /// `ports[p]`: the link port `p` is attached to and the direction frames sent from it
    /// travel (`None`, or past the end: attached to nothing). Grows only as far as the
    /// highest port connected.
    ports: Vec<Option<(LinkId, Dir)>>,
}

struct Link {
    /// `ends[0]` is end `a`, `ends[1]` is end `b`.
    ends: [(HostId, PortId); 2],
    /// `channels[d.index()]` carries direction `d`.
    channels: [Channel; 2],
}

/// A deterministic discrete-event network of hosts and links.
pub struct World {
    now_ns: u64,
    seed: u64,
    rng: SimRng,
    hosts: Vec<HostSlot>,
    links: Vec<Link>,
    queue: BinaryHeap<Event>,
    next_seq: u64,
    trace: Trace,
    counters: WorldCounters,
    /// Scratch for channel output, reused to avoid an allocation per frame.
    scratch: Vec<(u64, Vec<u8>)>,
    /// Sees every delivered frame (e.g. to write a capture file).
    tap: Option<Box<FrameTap>>,
    /// Sees every frame a host sends, before the link's faults judge it.
    send_tap: Option<Box<FrameTap>>,
}

/// A callback shown every frame the world delivers: `(at_ns, link, dir, frame)`.
pub type FrameTap = dyn FnMut(u64, LinkId, Dir, &[u8]);

impl World {
    /// Most frames one host activation may emit before the world yields to other events
    /// (and wakes the host again at the same instant).
    pub const TRANSMIT_BURST_MAX: usize = 4096;

    /// An empty world at t = 0 whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            now_ns: 0,
            seed,
            rng: SimRng::new(seed),
            hosts: Vec::new(),
            links: Vec::new(),
            queue: BinaryHeap::new(),
            next_seq: 0,
            trace: Trace::default(),
            counters: WorldCounters::default(),
            scratch: Vec::new(),
            tap: None,
            send_tap: None,
        }
    }

    /// Show every delivered frame, as the receiving host gets it, to `tap` (replacing any
    /// previous tap). Use it to write a capture of a failing seed.
    pub fn set_frame_tap(&mut self, tap: impl FnMut(u64, LinkId, Dir, &[u8]) + 'static) {
        self.tap = Some(Box::new(tap));
    }

    /// Remove the frame tap.
    pub fn clear_frame_tap(&mut self) {
        self.tap = None;
    }

    /// Show every frame a host sends, as it enters the link and before the link's faults
    /// judge it, to `tap` (replacing any previous send tap). Beside the delivery tap it tells a
    /// frame the link dropped from one that was never sent.
    pub fn set_send_tap(&mut self, tap: impl FnMut(u64, LinkId, Dir, &[u8]) + 'static) {
        self.send_tap = Some(Box::new(tap));
    }

    /// The seed the world was created with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Current virtual time (ns).
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// An RNG stream for host number `index` (e.g. the index its [`HostId`] will get), for
    /// hosts that need randomness (ISNs, source ports). Independent of every link stream.
    pub fn host_rng(&self, index: u64) -> SimRng {
        self.rng.fork(STREAM_TAG_HOST ^ index)
    }

    /// Add a host. It is activated once at the current instant (so it can send its first
    /// frames and arm its timer) when the run reaches that event.
    pub fn add_host(&mut self, host: Box<dyn Host>) -> HostId {
        let id = HostId(u32::try_from(self.hosts.len()).unwrap_or(u32::MAX));
        self.hosts.push(HostSlot {
            host,
            timer: None,
            armed_ns: None,
            ports: Vec::new(),
        });
        self.schedule(self.now_ns, EventKind::Wake { host: id });
        id
    }

    /// Connect end `a` to end `b` with the same configuration in both directions.
    pub fn connect(
        &mut self,
        a: (HostId, PortId),
        b: (HostId, PortId),
        cfg: ChannelConfig,
    ) -> Result<LinkId, ConnectError> {
        self.connect_asymmetric(a, b, cfg, cfg)
    }

    /// Connect end `a` to end `b`: `a_to_b` configures frames sent by `a`, `b_to_a` frames
    /// sent by `b`.
    pub fn connect_asymmetric(
        &mut self,
        a: (HostId, PortId),
        b: (HostId, PortId),
        a_to_b: ChannelConfig,
        b_to_a: ChannelConfig,
    ) -> Result<LinkId, ConnectError> {
        for (h, p) in [a, b] {
            if h.index() >= self.hosts.len() {
                return Err(ConnectError::UnknownHost(h));
            }
            if self.port_link(h, p).is_some() {
                return Err(ConnectError::PortInUse(h, p));
            }
        }
        if a == b {
            return Err(ConnectError::SameEnd);
        }
        let index = self.links.len() as u64;
        let id = LinkId(u32::try_from(index).unwrap_or(u32::MAX));
        let rng_ab = self.rng.fork(STREAM_TAG_LINK ^ (index * 2));
        let rng_ba = self.rng.fork(STREAM_TAG_LINK ^ (index * 2 + 1));
        self.links.push(Link {
            ends: [a, b],
            channels: [Channel::new(a_to_b, rng_ab), Channel::new(b_to_a, rng_ba)],
        });
        for ((h, p), dir) in [(a, Dir::AToB), (b, Dir::BToA)] {
            if let Some(slot) = self.hosts.get_mut(h.index()) {
                let at = usize::from(p.0);
                if slot.ports.len() <= at {
                    slot.ports.resize(at + 1, None);
                }
                if let Some(end) = slot.ports.get_mut(at) {
                    *end = Some((id, dir));
                }
            }
        }
        Ok(id)
    }

    /// The link `(host, port)` is attached to and the direction its frames travel.
    fn port_link(&self, host: HostId, port: PortId) -> Option<(LinkId, Dir)> {
        self.hosts
            .get(host.index())?
            .ports
            .get(usize::from(port.0))
            .copied()
            .flatten()
    }

    /// Append a fault rule to the chain of one direction. Returns `false` for an unknown link.
    pub fn add_fault(&mut self, link: LinkId, dir: Dir, rule: impl FaultRule + 'static) -> bool {
        match self.channel_mut(link, dir) {
            Some(ch) => {
                ch.faults.push(Box::new(rule));
                true
            }
            None => false,
        }
    }

    /// Append the same fault rule (cloned) to both directions.
    pub fn add_fault_both(&mut self, link: LinkId, rule: impl FaultRule + Clone + 'static) -> bool {
        self.add_fault(link, Dir::AToB, rule.clone()) && self.add_fault(link, Dir::BToA, rule)
    }

    /// Take the whole link down in `[down_at_ns, up_at_ns)`: frames departing in either
    /// direction during the window are dropped as [`DropReason::LinkDown`].
    pub fn schedule_flap(&mut self, link: LinkId, down_at_ns: u64, up_at_ns: u64) -> bool {
        self.add_fault_both(link, Flap::new(down_at_ns, up_at_ns))
    }

    /// The configuration of one direction.
    pub fn channel_config(&self, link: LinkId, dir: Dir) -> Option<&ChannelConfig> {
        self.channel(link, dir).map(|c| &c.cfg)
    }

    /// Change the configuration of one direction from now on (frames already in flight keep
    /// their arrival times).
    pub fn set_channel_config(&mut self, link: LinkId, dir: Dir, cfg: ChannelConfig) -> bool {
        match self.channel_mut(link, dir) {
            Some(ch) => {
                ch.cfg = cfg;
                true
            }
            None => false,
        }
    }

    /// Counters of one direction.
    pub fn link_counters(&self, link: LinkId, dir: Dir) -> Option<&ChannelCounters> {
        self.channel(link, dir).map(|c| &c.counters)
    }

    /// The two ends of a link, `[a, b]`.
    pub fn link_ends(&self, link: LinkId) -> Option<[(HostId, PortId); 2]> {
        self.links.get(link.index()).map(|l| l.ends)
    }

    /// World-level counters.
    pub fn counters(&self) -> &WorldCounters {
        &self.counters
    }

    /// Borrow a host as its concrete type (for checkers).
    pub fn host<T: 'static>(&self, id: HostId) -> Option<&T> {
        self.hosts.get(id.index())?.host.as_any().downcast_ref()
    }

    /// Borrow a host mutably as its concrete type. Call [`World::wake`] afterwards if the
    /// change may produce output.
    pub fn host_mut<T: 'static>(&mut self, id: HostId) -> Option<&mut T> {
        self.hosts
            .get_mut(id.index())?
            .host
            .as_any_mut()
            .downcast_mut()
    }

    /// Number of hosts.
    pub fn hosts_len(&self) -> usize {
        self.hosts.len()
    }

    /// Schedule an activation of `host` at the current instant (polls its output and timer).
    pub fn wake(&mut self, host: HostId) -> bool {
        if host.index() >= self.hosts.len() {
            return false;
        }
        self.schedule(self.now_ns, EventKind::Wake { host });
        true
    }

    /// Keep every trace event in memory from now on (the digest is always kept).
    pub fn set_trace_recording(&mut self, on: bool) {
        self.trace.set_recording(on);
    }

    /// The recorded events (empty unless recording is on).
    pub fn trace(&self) -> &[TraceEvent] {
        self.trace.events()
    }

    /// The last `n` recorded events, one per line (for failure messages; empty unless
    /// recording is on).
    pub fn trace_tail(&self, n: usize) -> String {
        let events = self.trace.events();
        let skip = events.len().saturating_sub(n);
        let mut out = String::new();
        for e in events.iter().skip(skip) {
            out.push_str(&e.to_string());
            out.push('\n');
        }
        out
    }

    /// Number of pending events (armed timers included).
    pub fn pending_events(&self) -> usize {
        self.queue.len() + self.hosts.iter().filter(|h| h.timer.is_some()).count()
    }

    /// Digest of every trace event so far, in order.
    pub fn digest(&self) -> u64 {
        self.trace.digest()
    }

    /// Number of trace events so far.
    pub fn trace_len(&self) -> u64 {
        self.trace.events_count()
    }

    /// Instant of the next pending event, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.next_event_key().map(|(at_ns, _, _)| at_ns)
    }

    /// The `(time, sequence)` of the next event, and the host whose timer it is (`None`: the
    /// heap's head).
    fn next_event_key(&self) -> Option<(u64, u64, Option<HostId>)> {
        let timer = self.earliest_timer();
        let heap = self.queue.peek().map(|e| (e.at_ns, e.seq));
        match (heap, timer) {
            (Some(h), Some((t, host))) if t < h => Some((t.0, t.1, Some(host))),
            (Some((at, seq)), _) => Some((at, seq, None)),
            (None, Some(((at, seq), host))) => Some((at, seq, Some(host))),
            (None, None) => None,
        }
    }

    /// The earliest armed timer and its host.
    fn earliest_timer(&self) -> Option<((u64, u64), HostId)> {
        self.hosts
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| slot.timer.map(|key| (key, i)))
            .min()
            .map(|(key, i)| (key, HostId(u32::try_from(i).unwrap_or(u32::MAX))))
    }

    /// Process the earliest pending event, advancing the clock to it. Returns `false` when
    /// there is nothing left to do.
    ///
    /// The clock only ever moves to an instant at which some host is called (superseded timers
    /// are replaced in their slot, never run).
    pub fn step(&mut self) -> bool {
        let Some((at_ns, _, timer_host)) = self.next_event_key() else {
            return false;
        };
        debug_assert!(at_ns >= self.now_ns, "virtual time went backwards");
        self.now_ns = self.now_ns.max(at_ns);
        self.counters.events += 1;
        if let Some(host) = timer_host {
            if let Some(slot) = self.hosts.get_mut(host.index()) {
                slot.timer = None;
                slot.armed_ns = None;
            }
            self.fire_timer(host);
            return true;
        }
        let Some(ev) = self.queue.pop() else {
            return false;
        };
        match ev.kind {
            EventKind::Deliver { link, dir, frame } => self.deliver(link, dir, frame),
            EventKind::Wake { host } => self.activate(host),
        }
        true
    }

    /// Process every event scheduled at or before `deadline_ns`, then set the clock to
    /// `deadline_ns` (if later). Returns the number of events processed. A host that re-arms
    /// a timer at the current instant forever makes this spin: use
    /// [`World::run_until_idle`] with a budget when that is possible.
    pub fn run_until(&mut self, deadline_ns: u64) -> u64 {
        let mut events = 0;
        while self.next_event_ns().is_some_and(|t| t <= deadline_ns) {
            self.step();
            events += 1;
        }
        self.now_ns = self.now_ns.max(deadline_ns);
        events
    }

    /// Process events until none is left, or fail after `events_max` events.
    pub fn run_until_idle(&mut self, events_max: u64) -> Result<u64, RunError> {
        self.run_until_idle_checked(events_max, |_| Ok(()))
    }

    /// Like [`World::run_until_idle`], calling `check` after every event; the first `Err`
    /// stops the run. This is where end-to-end checkers run beside the simulation.
    pub fn run_until_idle_checked(
        &mut self,
        events_max: u64,
        check: impl FnMut(&World) -> Result<(), String>,
    ) -> Result<u64, RunError> {
        self.run_bounded(u64::MAX, events_max, check)
    }

    /// Process every event at or before `deadline_ns` with a budget of `events_max` events,
    /// calling `check` after each; then set the clock to `deadline_ns`. For worlds that never
    /// go idle (hosts with periodic timers) this is the safe way to run: a livelock becomes
    /// [`RunError::EventLimit`] instead of a hang.
    pub fn run_until_checked(
        &mut self,
        deadline_ns: u64,
        events_max: u64,
        check: impl FnMut(&World) -> Result<(), String>,
    ) -> Result<u64, RunError> {
        let events = self.run_bounded(deadline_ns, events_max, check)?;
        self.now_ns = self.now_ns.max(deadline_ns);
        Ok(events)
    }

    fn run_bounded(
        &mut self,
        deadline_ns: u64,
        events_max: u64,
        mut check: impl FnMut(&World) -> Result<(), String>,
    ) -> Result<u64, RunError> {
        let mut events = 0;
        while self.next_event_ns().is_some_and(|t| t <= deadline_ns) {
            if events >= events_max {
                return Err(RunError::EventLimit {
                    events,
                    now_ns: self.now_ns,
                });
            }
            self.step();
            events += 1;
            check(self).map_err(|message| RunError::Check {
                now_ns: self.now_ns,
                message,
            })?;
        }
        Ok(events)
    }

    fn schedule(&mut self, at_ns: u64, kind: EventKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push(Event {
            at_ns: at_ns.max(self.now_ns),
            seq,
            kind,
        });
    }

    fn channel(&self, link: LinkId, dir: Dir) -> Option<&Channel> {
        self.links.get(link.index())?.channels.get(dir.index())
    }

    fn channel_mut(&mut self, link: LinkId, dir: Dir) -> Option<&mut Channel> {
        self.links
            .get_mut(link.index())?
            .channels
            .get_mut(dir.index())
    }

    fn deliver(&mut self, link: LinkId, dir: Dir, frame: Vec<u8>) {
        let Some(l) = self.links.get_mut(link.index()) else {
            return;
        };
        // Frames travelling AToB arrive at end b, and vice versa.
        let (host, port) = match dir {
            Dir::AToB => l.ends[1],
            Dir::BToA => l.ends[0],
        };
        if let Some(ch) = l.channels.get_mut(dir.index()) {
            ch.counters.delivered_packets += 1;
            ch.counters.delivered_bytes += frame.len() as u64;
        }
        self.counters.deliveries += 1;
        self.trace.push(TraceEvent::Deliver {
            at_ns: self.now_ns,
            link,
            dir,
            host,
            port,
            len: frame.len(),
            frame_hash: frame_digest(&frame),
        });
        let now_ns = self.now_ns;
        if let Some(tap) = self.tap.as_mut() {
            tap(now_ns, link, dir, &frame);
        }
        if let Some(slot) = self.hosts.get_mut(host.index()) {
            slot.host.handle_frame(now_ns, port, &frame);
        }
        // The buffer goes back to the host that sent it (the end the frame left from).
        self.recycle(sender_of(&self.links, link, dir), frame);
        self.activate(host);
    }

    fn fire_timer(&mut self, host: HostId) {
        let now_ns = self.now_ns;
        let Some(slot) = self.hosts.get_mut(host.index()) else {
            return;
        };
        if slot.host.poll_timeout().is_some_and(|t| t <= now_ns) {
            self.counters.timeouts += 1;
            self.trace.push(TraceEvent::Timeout {
                at_ns: now_ns,
                host,
            });
            slot.host.handle_timeout(now_ns);
        }
        self.activate(host);
    }

    /// Drain the host's output, then (re-)arm its timer. See [`Host`] for the order.
    fn activate(&mut self, host: HostId) {
        let now_ns = self.now_ns;
        let mut sent = 0;
        while sent < Self::TRANSMIT_BURST_MAX {
            let Some(slot) = self.hosts.get_mut(host.index()) else {
                return;
            };
            let Some((port, frame)) = slot.host.poll_transmit(now_ns) else {
                break;
            };
            sent += 1;
            self.transmit(host, port, frame);
        }
        if sent == Self::TRANSMIT_BURST_MAX {
            self.counters.transmit_bursts_cut += 1;
            self.schedule(now_ns, EventKind::Wake { host });
        }
        let Some(slot) = self.hosts.get_mut(host.index()) else {
            return;
        };
        let deadline = slot.host.poll_timeout();
        if deadline != slot.armed_ns {
            if slot.timer.is_some() {
                self.counters.timers_stale += 1;
            }
            slot.armed_ns = deadline;
            // The sequence number it would have had in the heap: same order of events.
            slot.timer = deadline.map(|t| (t.max(now_ns), self.next_seq));
            if deadline.is_some() {
                self.next_seq += 1;
            }
        }
    }

    fn transmit(&mut self, host: HostId, port: PortId, frame: Vec<u8>) {
        let now_ns = self.now_ns;
        let len = frame.len();
        let Some((link, dir)) = self.port_link(host, port) else {
            self.counters.drop_no_link += 1;
            self.trace.push(TraceEvent::Drop {
                at_ns: now_ns,
                host,
                port,
                reason: DropReason::NoLink,
                len,
            });
            return;
        };
        if let Some(tap) = self.send_tap.as_mut() {
            tap(now_ns, link, dir, &frame);
        }
        let mut out = core::mem::take(&mut self.scratch);
        out.clear();
        let result = match self.channel_mut(link, dir) {
            Some(ch) => ch.send(now_ns, frame, link, dir, &mut out),
            None => Err((DropReason::NoLink, frame)),
        };
        match result {
            Ok(()) => {
                for (at_ns, copy) in out.drain(..) {
                    self.schedule(
                        at_ns,
                        EventKind::Deliver {
                            link,
                            dir,
                            frame: copy,
                        },
                    );
                }
            }
            Err((reason, frame)) => {
                self.trace.push(TraceEvent::Drop {
                    at_ns: now_ns,
                    host,
                    port,
                    reason,
                    len,
                });
                self.recycle(Some(host), frame);
            }
        }
        self.scratch = out;
    }

    /// Hands a spent frame buffer back to the host that sent it.
    fn recycle(&mut self, sender: Option<HostId>, frame: Vec<u8>) {
        if let Some(slot) = sender.and_then(|h| self.hosts.get_mut(h.index())) {
            slot.host.recycle_frame(frame);
        }
    }
}

/// The host at the end a frame travelling `dir` on `link` left from.
fn sender_of(links: &[Link], link: LinkId, dir: Dir) -> Option<HostId> {
    links
        .get(link.index())
        .and_then(|l| l.ends.get(dir.index()))
        .map(|e| e.0)
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("seed", &self.seed)
            .field("now_ns", &self.now_ns)
            .field("hosts", &self.hosts.len())
            .field("links", &self.links.len())
            .field("pending_events", &self.pending_events())
            .field("digest", &format_args!("{:016x}", self.digest()))
            .finish()
    }
}
