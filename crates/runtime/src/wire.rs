//! The `mem` backend: an in-process virtual wire joining two hosts' NICs.
//!
//! The wire thread plays the hardware: it takes frames from each shard's transmit ring, paces
//! them at the configured rate, and steers each into the peer host's receive rings with that
//! host's NIC steering (filters → RSS → RETA → queue; queue `q` is served by shard `q`).
//! Steering here is the NIC's work, not a cross-shard message.
//!
//! ARP with several shards sharing one address: a request (broadcast, no RSS hash) goes to the
//! default queue, whose shard answers; a reply is delivered to every shard of the host, so each
//! shard's neighbour cache learns the peer (RFC 826: the target of a reply adds the sender).
//!
//! Buffers move as on real NIC hardware, so a steady flow allocates nothing: each shard posts
//! empty receive buffers (from its NIC pool) on a ring of its own, and the wire copies every
//! frame it delivers into a buffer the destination shard posted (the "DMA" into a receive
//! descriptor). The sender's buffer then goes back to the sending shard on its completion ring
//! (the transmit completion), from which the shard's stack reuses it. Each shard owns the same
//! buffers throughout: receive buffers circulate shard → wire → shard through its NIC pool,
//! transmit buffers shard → wire → shard through its stack's pool.
//!
//! Lossless by back-pressure: when a receive ring is full (`stalls_ring_full`), the destination
//! shard has no posted buffer (`stalls_no_rx_buffer`) or the source shard's completion ring is
//! full (`stalls_completion_full`), the frame waits at the head of its source ring, as on a
//! link with pause frames; nothing is dropped but malformed frames (`drop_malformed`, their
//! buffer still completed) and ARP-reply copies that found a ring full
//! (`drop_arp_copy_ring_full`). An ARP reply waits until every shard of the destination has
//! a posted buffer for its copy.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use nic::{Nic, RxDrop};
use shard::is_arp_reply;

use crate::rebalance::{RebalanceReport, WireControl, WireRebalancer};
use crate::ring::{Consumer, Producer};

/// Wire settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireConfig {
    /// Line rate in bits per second; `None` = as fast as the wire thread goes.
    pub rate_bps: Option<u64>,
    /// Frames taken from one transmit ring before moving to the next (fairness).
    pub batch_frames: usize,
}

impl Default for WireConfig {
    fn default() -> Self {
        WireConfig {
            rate_bps: None,
            batch_frames: 64,
        }
    }
}

/// What the wire carried, per direction (0: client → server, 1: server → client).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireReport {
    pub frames: [u64; 2],
    pub bytes: [u64; 2],
    /// Times a frame waited because its destination's receive ring was full.
    pub stalls_ring_full: u64,
    /// Times a frame waited because its destination shard had no posted receive buffer.
    pub stalls_no_rx_buffer: u64,
    /// Times a source shard's frames waited because its completion ring was full (its
    /// transmitted buffers not yet reaped).
    pub stalls_completion_full: u64,
    pub drop_malformed: u64,
    /// Frames a `drop` rule of the receiving host's steering NIC dropped, by receiving host
    /// (0: the client's NIC, 1: the server's). Asked for, so not in [`WireReport::drops`].
    pub drop_rule: [u64; 2],
    pub arp_reply_copies: u64,
    pub drop_arp_copy_ring_full: u64,
    /// Exact-match filters the server host's offload layer had installed and removed
    /// (offload engine), and changes the NIC refused (table full, or no such filter).
    pub filters_installed: u64,
    pub filters_removed: u64,
    pub filters_refused: u64,
    /// Install acknowledgements to shard 0 that found their ring full (the engine's hold of
    /// that flow then ends by time-out).
    pub filters_ack_dropped: u64,
}

impl WireReport {
    /// Frames the wire lost.
    pub fn drops(&self) -> u64 {
        self.drop_malformed + self.drop_arp_copy_ring_full
    }
}

/// One shard as the wire sees it: its four rings and the wire's per-shard slots.
///
/// Invariant: every buffer the wire holds belongs to exactly one shard and goes back to it —
/// a transmitted frame (in `held` or `completion_held`) on `completions`, a posted buffer (in
/// `spare`) on `rx` with a frame in it; the wire allocates no buffer and frees none.
pub(crate) struct WireShard {
    /// Frames the shard transmits.
    pub tx: Consumer<Vec<u8>>,
    /// Frames taken from `tx` in a burst that could not be delivered yet, in their order
    /// (retried first). Invariant: at most [`WireConfig::batch_frames`] frames.
    pub held: VecDeque<Vec<u8>>,
    /// Transmit completions: the shard's sent buffers, back to it once copied.
    pub completions: Producer<Vec<u8>>,
    /// A completion that found `completions` full; while set, `tx` is not read.
    pub completion_held: Option<Vec<u8>>,
    /// Empty receive buffers the shard posted.
    pub posted: Consumer<Vec<u8>>,
    /// A posted buffer taken but not yet filled and delivered (used first).
    pub spare: Option<Vec<u8>>,
    /// Received frames, in the shard's posted buffers.
    pub rx: Producer<Vec<u8>>,
}

impl WireShard {
    /// The wire's end of a shard's four rings, with nothing held.
    pub(crate) fn new(
        tx: Consumer<Vec<u8>>,
        completions: Producer<Vec<u8>>,
        posted: Consumer<Vec<u8>>,
        rx: Producer<Vec<u8>>,
    ) -> Self {
        WireShard {
            tx,
            held: VecDeque::new(),
            completions,
            completion_held: None,
            posted,
            spare: None,
            rx,
        }
    }

    /// A posted buffer of this shard, if it has one.
    fn rx_buffer(&mut self) -> Option<Vec<u8>> {
        self.spare.take().or_else(|| self.posted.pop())
    }

    /// Copies `frame` into a posted buffer `buf` and delivers it. `Err`: the receive ring is
    /// full; the buffer is kept as the spare.
    fn deliver_copy(&mut self, mut buf: Vec<u8>, frame: &[u8]) -> Result<(), ()> {
        buf.clear();
        buf.extend_from_slice(frame);
        self.rx.push(buf).map_err(|mut b| {
            b.clear();
            self.spare = Some(b);
        })
    }

    /// Hands a transmitted buffer back; `false` when the completion ring is full (the buffer
    /// is held and this shard's transmit ring is not read until it goes).
    fn complete(&mut self, buf: Vec<u8>) -> bool {
        match self.completions.push(buf) {
            Ok(()) => true,
            Err(b) => {
                self.completion_held = Some(b);
                false
            }
        }
    }
}

/// One host as the wire sees it.
pub(crate) struct WirePort {
    pub shards: Vec<WireShard>,
    /// The NIC steering frames to the host's shards (queue `q` is shard `q`).
    pub steering: Nic,
    pub threads: Arc<Vec<OnceLock<Thread>>>,
    /// When the host rebalances: the control ring pair of each shard, and the rebalancer.
    pub controls: Vec<WireControl>,
    pub rebalancer: Option<WireRebalancer>,
    /// With an offload engine: filter changes from shard 0's offload layer, and the engine's
    /// queue (the last entry of `shards`, outside the RETA).
    pub steer: Option<Consumer<crate::offload::Steer>>,
    pub engine_queue: Option<u16>,
    /// Acknowledges each `Install` to shard 0, once applied (or refused).
    pub installed: Option<Producer<stack::FourTuple>>,
}

pub(crate) struct Wire {
    pub cfg: WireConfig,
    pub ports: [WirePort; 2],
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
    pub report: WireReport,
    next_free_ns: u64,
    /// The frames of the burst being carried (reused: no allocation per burst).
    burst: Vec<Vec<u8>>,
    /// The destination NIC's steering decision for each frame of `burst`.
    decisions: Vec<Result<rss::SteerDecision, RxDrop>>,
}

/// Where a frame goes on the destination host.
#[derive(Clone, Copy)]
enum Deliver {
    Shard(usize),
    AllShards,
    Drop,
    /// A `drop` rule of the receiving host matched.
    DropRule,
}

impl Wire {
    pub fn new(
        cfg: WireConfig,
        ports: [WirePort; 2],
        stop: Arc<AtomicBool>,
        epoch: Instant,
    ) -> Self {
        Wire {
            cfg,
            ports,
            stop,
            epoch,
            report: WireReport::default(),
            next_free_ns: 0,
            burst: Vec::with_capacity(cfg.batch_frames),
            decisions: Vec::with_capacity(cfg.batch_frames),
        }
    }

    /// Runs until the stop flag: the wire's report, each host's steering NIC's rule hits,
    /// and each host's rebalancing report (when it rebalances).
    pub fn run(mut self) -> (WireReport, [Vec<u64>; 2], [Option<RebalanceReport>; 2]) {
        let mut wake: [Vec<bool>; 2] = [
            vec![false; self.ports[0].shards.len()],
            vec![false; self.ports[1].shards.len()],
        ];
        loop {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let mut work = 0usize;
            let mut paced_ns: Option<u64> = None;
            let mut rebalance_in_ns: Option<u64> = None;
            for (port, flags) in self.ports.iter_mut().zip(wake.iter_mut()) {
                let WirePort {
                    steering,
                    controls,
                    rebalancer,
                    ..
                } = port;
                if let Some(r) = rebalancer {
                    let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    r.relay(steering, controls, flags);
                    r.tick(now, steering, controls, flags);
                    let due = r.due_in_ns(now);
                    rebalance_in_ns = Some(rebalance_in_ns.map_or(due, |d: u64| d.min(due)));
                }
            }
            for (port, flags) in self.ports.iter_mut().zip(wake.iter_mut()) {
                work += apply_steering(port, &mut self.report, flags);
            }
            for dir in 0..2usize {
                for src in 0..self.ports[dir].shards.len() {
                    let (n, paced) = self.carry(dir, src, &mut wake);
                    work += n;
                    paced_ns = paced_ns.or(paced);
                }
            }
            for (d, flags) in wake.iter_mut().enumerate() {
                for (i, w) in flags.iter_mut().enumerate() {
                    if std::mem::take(w) {
                        if let Some(t) = self.ports[d].threads.get(i).and_then(|t| t.get()) {
                            t.unpark();
                        }
                    }
                }
            }
            if work == 0 {
                let waiting = self.ports.iter().any(|p| {
                    p.shards
                        .iter()
                        .any(|s| !s.held.is_empty() || s.completion_held.is_some())
                });
                let ns = match (paced_ns, waiting) {
                    (Some(ns), _) => ns.min(200_000),
                    (None, true) => 20_000,
                    (None, false) => 1_000_000,
                };
                let ns = rebalance_in_ns.map_or(ns, |r| ns.min(r.max(1_000)));
                std::thread::park_timeout(Duration::from_nanos(ns));
            }
        }
        let [a, b] = self.ports;
        let hits = [
            a.steering.rule_hits().to_vec(),
            b.steering.rule_hits().to_vec(),
        ];
        let reports = [
            a.rebalancer.map(WireRebalancer::into_report),
            b.rebalancer.map(WireRebalancer::into_report),
        ];
        (self.report, hits, reports)
    }

    /// Carries up to a batch of frames from shard `src` of host `dir` to the other host.
    /// Returns the frames carried, and how long pacing wants the wire to wait (if it stopped
    /// the batch).
    ///
    /// The batch is steered as one burst ([`Nic::steer_burst`]: eight IPv4 tuples per hash
    /// call where the CPU has the vector kernel), then delivered frame by frame in order.
    /// A frame that cannot go yet (pacing, a full ring, no posted buffer, a full completion
    /// ring) stops the batch; it and the frames behind it wait in `held`, in order, and are
    /// steered again next time. A decision is counted in the NIC's bucket and rule counters
    /// once, when its frame is delivered or dropped by a rule, not each time it is steered.
    fn carry(&mut self, dir: usize, src: usize, wake: &mut [Vec<bool>; 2]) -> (usize, Option<u64>) {
        let dst = 1 - dir;
        let (lo, hi) = self.ports.split_at_mut(1);
        let (from, to) = if dir == 0 {
            (&mut lo[0], &mut hi[0])
        } else {
            (&mut hi[0], &mut lo[0])
        };
        let Some(s) = from.shards.get_mut(src) else {
            return (0, None);
        };
        let report = &mut self.report;
        // A completion the shard has not made room for blocks its transmit ring.
        if let Some(b) = s.completion_held.take() {
            if !s.complete(b) {
                report.stalls_completion_full += 1;
                return (0, None);
            }
        }
        let burst = &mut self.burst;
        burst.clear();
        while burst.len() < self.cfg.batch_frames {
            let Some(frame) = s.held.pop_front().or_else(|| s.tx.pop()) else {
                break;
            };
            burst.push(frame);
        }
        if burst.is_empty() {
            return (0, None);
        }
        let decisions = &mut self.decisions;
        decisions.clear();
        decisions.resize(burst.len(), Err(RxDrop::Malformed));
        to.steering.steer_burst(burst, decisions);
        let mut work = 0;
        let mut paced_ns = None;
        // Frames `stop..` of the burst go back to `held`.
        let mut stop = burst.len();
        for (i, slot) in burst.iter_mut().enumerate() {
            // The clock is read only when pacing needs it.
            let now = if self.cfg.rate_bps.is_some() {
                u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
            } else {
                0
            };
            if self.cfg.rate_bps.is_some() && now < self.next_free_ns {
                paced_ns = Some(self.next_free_ns - now);
                stop = i;
                break;
            }
            if let Some(b) = s.completion_held.take() {
                if !s.complete(b) {
                    report.stalls_completion_full += 1;
                    stop = i;
                    break;
                }
            }
            let frame = std::mem::take(slot);
            let decision = decisions.get(i).copied().unwrap_or(Err(RxDrop::Malformed));
            let deliver = if is_arp_reply(&frame) {
                Deliver::AllShards
            } else {
                match &decision {
                    Ok(d) if matches!(d.how, rss::SteerHow::RuleDrop) => Deliver::DropRule,
                    Ok(d) => Deliver::Shard(usize::from(d.queue)),
                    Err(_) => Deliver::Drop,
                }
            };
            let wake_to = &mut wake[dst];
            let delivered = match deliver {
                Deliver::Drop => Err(Stall::Undeliverable),
                Deliver::DropRule => {
                    if let Ok(d) = &decision {
                        to.steering.count_steered(d);
                    }
                    report.drop_rule[dst] += 1;
                    if !s.complete(frame) {
                        report.stalls_completion_full += 1;
                        stop = i + 1;
                        break;
                    }
                    continue;
                }
                Deliver::AllShards => deliver_to_all(to, &frame, report, wake_to),
                Deliver::Shard(q) => deliver_to_one(to, q, &frame, wake_to),
            };
            let len = frame.len() as u64;
            match delivered {
                Ok(()) => {
                    if let (Deliver::Shard(_), Ok(d)) = (deliver, &decision) {
                        to.steering.count_steered(d);
                    }
                }
                Err(Stall::Undeliverable) => {
                    report.drop_malformed += 1;
                    if !s.complete(frame) {
                        report.stalls_completion_full += 1;
                        stop = i + 1;
                        break;
                    }
                    continue;
                }
                Err(Stall::RingFull) => {
                    report.stalls_ring_full += 1;
                    *slot = frame;
                    stop = i;
                    break;
                }
                Err(Stall::NoRxBuffer) => {
                    report.stalls_no_rx_buffer += 1;
                    *slot = frame;
                    stop = i;
                    break;
                }
            }
            work += 1;
            report.frames[dir] += 1;
            report.bytes[dir] += len;
            if let Some(rate) = self.cfg.rate_bps.filter(|r| *r > 0) {
                // Preamble, SFD and inter-frame gap: 20 bytes on the line.
                let bits = (len + 20) * 8;
                let ns = bits.saturating_mul(1_000_000_000) / rate;
                self.next_free_ns = self.next_free_ns.max(now).saturating_add(ns);
            }
            if !s.complete(frame) {
                report.stalls_completion_full += 1;
                stop = i + 1;
                break;
            }
        }
        // What was not carried waits, in order, ahead of what `held` still has.
        for frame in burst.drain(stop..).rev() {
            s.held.push_front(frame);
        }
        burst.clear();
        (work, paced_ns)
    }
}

/// Why a frame was not delivered.
enum Stall {
    /// Not deliverable at all (malformed, or steered to no shard): dropped.
    Undeliverable,
    /// The destination's receive ring is full.
    RingFull,
    /// The destination shard has no posted receive buffer.
    NoRxBuffer,
}

/// Copies `frame` into a posted buffer of shard `i` of `to` and delivers it.
fn deliver_to_one(
    to: &mut WirePort,
    i: usize,
    frame: &[u8],
    wake: &mut [bool],
) -> Result<(), Stall> {
    let Some(d) = to.shards.get_mut(i) else {
        return Err(Stall::Undeliverable);
    };
    // Wake the shard in every case: it drains its receive ring and posts buffers.
    if let Some(w) = wake.get_mut(i) {
        *w = true;
    }
    let buf = d.rx_buffer().ok_or(Stall::NoRxBuffer)?;
    d.deliver_copy(buf, frame).map_err(|()| Stall::RingFull)
}

/// An ARP reply: a copy into a posted buffer of every shard of `to`. Waits (`NoRxBuffer`)
/// until every shard has a buffer for it; a copy that then meets a full receive ring is
/// dropped (counted `drop_arp_copy_ring_full`, the buffer kept as the spare).
fn deliver_to_all(
    to: &mut WirePort,
    frame: &[u8],
    report: &mut WireReport,
    wake: &mut [bool],
) -> Result<(), Stall> {
    for (i, d) in to.shards.iter_mut().enumerate() {
        if d.spare.is_none() {
            d.spare = d.posted.pop();
        }
        if d.spare.is_none() {
            if let Some(w) = wake.get_mut(i) {
                *w = true;
            }
            return Err(Stall::NoRxBuffer);
        }
    }
    for (i, d) in to.shards.iter_mut().enumerate() {
        let Some(buf) = d.spare.take() else { continue };
        if d.deliver_copy(buf, frame).is_ok() {
            report.arp_reply_copies += 1;
        } else {
            report.drop_arp_copy_ring_full += 1;
        }
        if let Some(w) = wake.get_mut(i) {
            *w = true;
        }
    }
    Ok(())
}

/// Applies the filter changes an offload layer asked for, in order. Returns how many.
fn apply_steering(port: &mut WirePort, report: &mut WireReport, wake: &mut [bool]) -> usize {
    let (Some(steer), Some(queue)) = (&port.steer, port.engine_queue) else {
        return 0;
    };
    let mut n = 0;
    while let Some(change) = steer.pop() {
        n += 1;
        match change {
            crate::offload::Steer::Install(t) => {
                match port.steering.add_filter(five_tuple(&t), queue) {
                    Ok(_) => report.filters_installed += 1,
                    Err(_) => report.filters_refused += 1,
                }
                // Every frame of the flow delivered to shard 0 so far is in its receive ring.
                if let Some(p) = &port.installed {
                    if p.push(t).is_err() {
                        report.filters_ack_dropped += 1;
                    }
                    if let Some(w) = wake.first_mut() {
                        *w = true;
                    }
                }
            }
            crate::offload::Steer::Remove(t) => {
                if port.steering.remove_filter(&five_tuple(&t)).is_some() {
                    report.filters_removed += 1;
                } else {
                    report.filters_refused += 1;
                }
            }
        }
    }
    n
}

/// The NIC filter for a connection's incoming frames.
fn five_tuple(t: &stack::FourTuple) -> rss::FiveTuple {
    rss::FiveTuple {
        protocol: 6,
        src: t.remote.ip(),
        dst: t.local.ip(),
        src_port: t.remote.port(),
        dst_port: t.local.port(),
    }
}

#[cfg(test)]
mod tests;
