//! Links: full-duplex connections between two (host, port) ends, modelled per direction.
//!
//! One direction (a *channel*) carries a frame through these stages, in order:
//!
//! 1. **MTU**: a frame longer than `mtu_bytes` is dropped ([`DropReason::Mtu`]).
//! 2. **Transmit queue + serialization**: frames wait for the serializer, which sends
//!    `rate_bps` bits per second (0 = infinitely fast). The queue holds every frame whose last
//!    bit has not yet left, including the one being serialized; a frame that would push it
//!    past `queue_bytes_max` or `queue_packets_max` is dropped ([`DropReason::QueueFull`]).
//!    A frame departs when its last bit has been serialized. At an infinite rate frames
//!    depart at once and the queue bounds never apply.
//! 3. **Fault chain**: the rules of [`crate::fault`] are evaluated at the departure instant.
//! 4. **Propagation**: the frame arrives `delay_ns` plus a uniform jitter in `[0, jitter_ns]`
//!    after departure. With [`JitterOrder::Fifo`] jitter never lets a frame overtake an
//!    earlier one (arrival is clamped to the previous arrival); with
//!    [`JitterOrder::Reorder`] it may. Rule delays are added after the clamp.

use crate::fault::{DropReason, FaultRule, PacketCtx, Verdict};
use crate::rng::SimRng;
use core::fmt;
use std::collections::VecDeque;

/// Index of a link in a [`crate::World`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub(crate) u32);

impl LinkId {
    /// The link's position in creation order (0-based).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link{}", self.0)
    }
}

/// Direction of travel on a link: `AToB` is from the first end given to
/// [`crate::World::connect`] to the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// From end `a` to end `b`.
    AToB,
    /// From end `b` to end `a`.
    BToA,
}

impl Dir {
    /// 0 for `AToB`, 1 for `BToA`.
    pub fn index(self) -> usize {
        match self {
            Dir::AToB => 0,
            Dir::BToA => 1,
        }
    }

    /// The opposite direction.
    pub fn reverse(self) -> Dir {
        match self {
            Dir::AToB => Dir::BToA,
            Dir::BToA => Dir::AToB,
        }
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dir::AToB => "a->b",
            Dir::BToA => "b->a",
        })
    }
}

/// Whether jitter may reorder frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum JitterOrder {
    /// Jitter never lets a frame overtake an earlier one (a single physical path).
    #[default]
    Fifo,
    /// Each frame's jitter is independent; frames may overtake (multipath).
    Reorder,
}

/// Configuration of one direction of a link. Fault rules are added separately
/// ([`crate::World::add_fault`]) because closures cannot be cloned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Serialization rate in bits per second; 0 means infinitely fast (no queueing).
    pub rate_bps: u64,
    /// Propagation delay in ns.
    pub delay_ns: u64,
    /// Maximum extra uniform random delay in ns (inclusive).
    pub jitter_ns: u64,
    /// Whether jitter may reorder.
    pub jitter_order: JitterOrder,
    /// Largest frame (bytes, as handed over by the host) the direction carries.
    pub mtu_bytes: usize,
    /// Bound on bytes waiting in or being serialized from the transmit queue.
    pub queue_bytes_max: usize,
    /// Bound on frames waiting in or being serialized from the transmit queue.
    pub queue_packets_max: usize,
}

impl Default for ChannelConfig {
    /// An ideal direction: infinitely fast, no delay, no jitter, no MTU limit to speak of,
    /// queue bounds like a Linux `txqueuelen` of 1000.
    fn default() -> Self {
        Self {
            rate_bps: 0,
            delay_ns: 0,
            jitter_ns: 0,
            jitter_order: JitterOrder::Fifo,
            mtu_bytes: usize::MAX,
            queue_bytes_max: 1 << 22,
            queue_packets_max: 1000,
        }
    }
}

impl ChannelConfig {
    /// Set the serialization rate (bits per second, 0 = infinite).
    pub fn rate_bps(mut self, rate_bps: u64) -> Self {
        self.rate_bps = rate_bps;
        self
    }

    /// Set the propagation delay.
    pub fn delay_ns(mut self, delay_ns: u64) -> Self {
        self.delay_ns = delay_ns;
        self
    }

    /// Set the jitter bound and whether it may reorder.
    pub fn jitter_ns(mut self, jitter_ns: u64, order: JitterOrder) -> Self {
        self.jitter_ns = jitter_ns;
        self.jitter_order = order;
        self
    }

    /// Set the MTU (largest frame carried, bytes).
    pub fn mtu_bytes(mut self, mtu_bytes: usize) -> Self {
        self.mtu_bytes = mtu_bytes;
        self
    }

    /// Set the transmit-queue bounds.
    pub fn queue_max(mut self, bytes: usize, packets: usize) -> Self {
        self.queue_bytes_max = bytes;
        self.queue_packets_max = packets;
        self
    }

    /// Time to serialize `len_bytes` at `rate_bps`, rounded up to whole ns (0 if infinite).
    pub fn serialization_ns(&self, len_bytes: usize) -> u64 {
        if self.rate_bps == 0 {
            return 0;
        }
        let bits = (len_bytes as u128) * 8 * 1_000_000_000;
        let ns = bits.div_ceil(u128::from(self.rate_bps));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// Named counters of one link direction. Every frame offered is either delivered (possibly
/// several times) or counted under exactly one `drop_*` counter:
/// `offered_packets == sum(drop_*) + (delivered_packets - duplicated_packets)`, once every
/// in-flight frame has arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelCounters {
    /// Frames the sending host handed to this direction.
    pub offered_packets: u64,
    /// Bytes of those frames.
    pub offered_bytes: u64,
    /// Frames (copies included) handed to the receiving host.
    pub delivered_packets: u64,
    /// Bytes of those frames.
    pub delivered_bytes: u64,
    /// Dropped: longer than the MTU.
    pub drop_mtu: u64,
    /// Dropped: transmit queue full.
    pub drop_queue_full: u64,
    /// Dropped: random loss rule.
    pub drop_loss: u64,
    /// Dropped: link down (flap).
    pub drop_link_down: u64,
    /// Dropped: blackhole window.
    pub drop_blackhole: u64,
    /// Dropped: user rule.
    pub drop_rule: u64,
    /// Extra copies created by duplicate verdicts.
    pub duplicated_packets: u64,
    /// Corrupt verdicts applied (one bit flip each for the built-in rule).
    pub corrupted_packets: u64,
    /// Frames given a non-zero rule delay.
    pub delayed_packets: u64,
    /// Most bytes ever held by the transmit queue.
    pub queue_bytes_peak: u64,
}

impl ChannelCounters {
    /// Total of all drop counters.
    pub fn dropped_packets(&self) -> u64 {
        self.drop_mtu
            + self.drop_queue_full
            + self.drop_loss
            + self.drop_link_down
            + self.drop_blackhole
            + self.drop_rule
    }

    pub(crate) fn count_drop(&mut self, reason: DropReason) {
        let c = match reason {
            DropReason::Mtu => &mut self.drop_mtu,
            DropReason::QueueFull => &mut self.drop_queue_full,
            DropReason::Loss => &mut self.drop_loss,
            DropReason::LinkDown => &mut self.drop_link_down,
            DropReason::Blackhole => &mut self.drop_blackhole,
            // `NoLink` never reaches a channel; count it with user drops if a rule uses it.
            DropReason::Rule | DropReason::NoLink => &mut self.drop_rule,
        };
        *c += 1;
    }
}

/// Most extra copies one frame may get from duplicate verdicts (bounds a runaway rule).
pub const DUPLICATES_PER_FRAME_MAX: u32 = 8;

/// One direction of a link: configuration, fault chain, RNG stream, queue state, counters.
pub(crate) struct Channel {
    pub(crate) cfg: ChannelConfig,
    pub(crate) faults: Vec<Box<dyn FaultRule>>,
    rng: SimRng,
    /// Departure instants and sizes of frames still in the transmit queue, oldest first.
    /// Invariant: departure instants are non-decreasing.
    queue: VecDeque<(u64, usize)>,
    /// Sum of the sizes in `queue`.
    queue_bytes: usize,
    /// When the serializer becomes free.
    busy_until_ns: u64,
    /// Latest base arrival (before rule delays) handed out, for the FIFO clamp.
    last_base_arrival_ns: u64,
    /// Frames offered to the fault chain so far.
    chain_index: u64,
    pub(crate) counters: ChannelCounters,
}

impl Channel {
    pub(crate) fn new(cfg: ChannelConfig, rng: SimRng) -> Self {
        Self {
            cfg,
            faults: Vec::new(),
            rng,
            queue: VecDeque::new(),
            queue_bytes: 0,
            busy_until_ns: 0,
            last_base_arrival_ns: 0,
            chain_index: 0,
            counters: ChannelCounters::default(),
        }
    }

    /// Offer `frame` at `now_ns`. On success pushes one `(arrival_ns, frame)` per copy to
    /// `out` (the original last, so it is never cloned needlessly); on drop counts the reason
    /// and returns it with the frame (so its buffer can go back to the sender).
    pub(crate) fn send(
        &mut self,
        now_ns: u64,
        mut frame: Vec<u8>,
        link: LinkId,
        dir: Dir,
        out: &mut Vec<(u64, Vec<u8>)>,
    ) -> Result<(), (DropReason, Vec<u8>)> {
        let len = frame.len();
        self.counters.offered_packets += 1;
        self.counters.offered_bytes += len as u64;

        if len > self.cfg.mtu_bytes {
            self.counters.count_drop(DropReason::Mtu);
            return Err((DropReason::Mtu, frame));
        }

        // Retire frames whose last bit has left by now.
        while let Some(&(depart_ns, bytes)) = self.queue.front() {
            if depart_ns > now_ns {
                break;
            }
            self.queue.pop_front();
            self.queue_bytes -= bytes;
        }
        let start_ns = self.busy_until_ns.max(now_ns);
        let depart_ns = start_ns.saturating_add(self.cfg.serialization_ns(len));
        // A frame that leaves at once (infinite rate) never occupies the queue.
        if depart_ns > now_ns {
            if self.queue.len() >= self.cfg.queue_packets_max
                || self.queue_bytes.saturating_add(len) > self.cfg.queue_bytes_max
            {
                self.counters.count_drop(DropReason::QueueFull);
                return Err((DropReason::QueueFull, frame));
            }
            self.queue.push_back((depart_ns, len));
            self.queue_bytes += len;
            self.counters.queue_bytes_peak =
                self.counters.queue_bytes_peak.max(self.queue_bytes as u64);
        }
        self.busy_until_ns = depart_ns;

        // Fault chain, evaluated at the departure instant.
        let mut extra_delay_ns = 0u64;
        let mut copies = 0u32;
        let index = self.chain_index;
        self.chain_index += 1;
        for rule in &mut self.faults {
            let ctx = PacketCtx {
                depart_ns,
                frame: &frame,
                link,
                dir,
                index,
            };
            match rule.verdict(&ctx, &mut self.rng) {
                Verdict::Pass => {}
                Verdict::Drop(reason) => {
                    self.counters.count_drop(reason);
                    return Err((reason, frame));
                }
                Verdict::Delay(d_ns) => extra_delay_ns = extra_delay_ns.saturating_add(d_ns),
                Verdict::Duplicate => copies = (copies + 1).min(DUPLICATES_PER_FRAME_MAX),
                Verdict::Corrupt { byte, xor } => {
                    if let Some(b) = byte.checked_rem(len).and_then(|i| frame.get_mut(i)) {
                        *b ^= xor;
                        self.counters.corrupted_packets += 1;
                    }
                }
            }
        }
        if extra_delay_ns > 0 {
            self.counters.delayed_packets += 1;
        }
        self.counters.duplicated_packets += u64::from(copies);

        for _ in 0..copies {
            let arrival_ns = self.arrival_ns(depart_ns, extra_delay_ns);
            out.push((arrival_ns, frame.clone()));
        }
        let arrival_ns = self.arrival_ns(depart_ns, extra_delay_ns);
        out.push((arrival_ns, frame));
        Ok(())
    }

    /// Propagation + jitter (+ FIFO clamp) + rule delay.
    fn arrival_ns(&mut self, depart_ns: u64, extra_delay_ns: u64) -> u64 {
        let jitter_ns = if self.cfg.jitter_ns > 0 {
            self.rng.gen_upto(self.cfg.jitter_ns)
        } else {
            0
        };
        let mut base_ns = depart_ns
            .saturating_add(self.cfg.delay_ns)
            .saturating_add(jitter_ns);
        if self.cfg.jitter_order == JitterOrder::Fifo {
            base_ns = base_ns.max(self.last_base_arrival_ns);
        }
        self.last_base_arrival_ns = self.last_base_arrival_ns.max(base_ns);
        base_ns.saturating_add(extra_delay_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_time_rounds_up_and_infinite_rate_is_free() {
        let c = ChannelConfig::default().rate_bps(10_000_000);
        // 1500 B * 8 / 10 Mb/s = 1.2 ms.
        assert_eq!(c.serialization_ns(1500), 1_200_000);
        // 1 B at 3 b/s = 8/3 s, rounded up.
        assert_eq!(
            ChannelConfig::default().rate_bps(3).serialization_ns(1),
            2_666_666_667
        );
        assert_eq!(ChannelConfig::default().serialization_ns(1500), 0);
    }
}
