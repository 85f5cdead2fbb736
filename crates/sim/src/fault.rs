//! Per-packet fault rules: a chain of verdicts evaluated for every frame a link carries.
//!
//! Each direction of a link holds an ordered chain of [`FaultRule`]s. For each frame the
//! chain is evaluated in order at the frame's *departure* instant (the moment its last bit
//! leaves the sender, after queueing and serialization), with the direction's own RNG stream:
//!
//! - [`Verdict::Pass`]: no effect, next rule;
//! - [`Verdict::Drop`]: the frame is dropped, the reason is counted, the chain stops;
//! - [`Verdict::Delay`]: the frame arrives that much later (delays add up). Unlike jitter, a
//!   rule delay is applied after the FIFO clamp, so it reorders;
//! - [`Verdict::Duplicate`]: one more copy is delivered (each copy draws its own jitter);
//! - [`Verdict::Corrupt`]: the byte at `byte % len` is xored with `xor` (later rules see the
//!   corrupted frame; an empty frame is left alone).
//!
//! Rules are evaluated only for frames that passed the MTU and queue checks.

use crate::link::{Dir, LinkId};
use crate::rng::SimRng;
use core::fmt;

/// Why a frame was dropped. Each reason has a counter in [`crate::ChannelCounters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// The frame is longer than the direction's MTU.
    Mtu,
    /// The transmit queue was full (bytes or packets).
    QueueFull,
    /// A random-loss rule ([`Loss`]) dropped it.
    Loss,
    /// The link was down ([`Flap`]).
    LinkDown,
    /// A one-direction [`Blackhole`] window swallowed it.
    Blackhole,
    /// A user rule dropped it.
    Rule,
    /// The host sent on a port attached to no link (counted by the world, not a link).
    NoLink,
}

impl DropReason {
    /// A stable small code, folded into the trace digest.
    pub fn code(self) -> u8 {
        match self {
            DropReason::Mtu => 1,
            DropReason::QueueFull => 2,
            DropReason::Loss => 3,
            DropReason::LinkDown => 4,
            DropReason::Blackhole => 5,
            DropReason::Rule => 6,
            DropReason::NoLink => 7,
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DropReason::Mtu => "frame exceeds MTU",
            DropReason::QueueFull => "transmit queue full",
            DropReason::Loss => "random loss",
            DropReason::LinkDown => "link down",
            DropReason::Blackhole => "blackholed",
            DropReason::Rule => "dropped by rule",
            DropReason::NoLink => "port not connected",
        })
    }
}

/// What one rule decides for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No effect.
    Pass,
    /// Drop the frame, counted under the given reason.
    Drop(DropReason),
    /// Deliver this many nanoseconds later than otherwise.
    Delay(u64),
    /// Deliver one extra copy.
    Duplicate,
    /// Xor the byte at `byte % len` with `xor`.
    Corrupt {
        /// Byte offset (taken modulo the frame length).
        byte: usize,
        /// Bits to flip.
        xor: u8,
    },
}

/// What a rule may look at.
#[derive(Clone, Copy, Debug)]
pub struct PacketCtx<'a> {
    /// The instant the frame's last bit leaves the sender (after queueing and serialization).
    pub depart_ns: u64,
    /// The frame as it stands (earlier rules may have corrupted it).
    pub frame: &'a [u8],
    /// The link carrying the frame.
    pub link: LinkId,
    /// The direction of travel.
    pub dir: Dir,
    /// 0-based count of frames offered to the fault chain of this direction so far.
    pub index: u64,
}

/// A per-packet fault rule. Object-safe; a link direction holds `Box<dyn FaultRule>`s.
///
/// Rules must draw randomness only from `rng` (the direction's stream) to stay deterministic.
pub trait FaultRule {
    /// Decide the fate of one frame.
    fn verdict(&mut self, ctx: &PacketCtx<'_>, rng: &mut SimRng) -> Verdict;
}

/// Any `FnMut(&PacketCtx, &mut SimRng) -> Verdict` closure is a rule.
impl<F> FaultRule for F
where
    F: FnMut(&PacketCtx<'_>, &mut SimRng) -> Verdict,
{
    fn verdict(&mut self, ctx: &PacketCtx<'_>, rng: &mut SimRng) -> Verdict {
        self(ctx, rng)
    }
}

/// Drop each frame independently with probability `p` (Bernoulli loss).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Loss {
    /// Drop probability in `[0, 1]`.
    pub p: f64,
}

impl FaultRule for Loss {
    fn verdict(&mut self, _ctx: &PacketCtx<'_>, rng: &mut SimRng) -> Verdict {
        if rng.chance(self.p) {
            Verdict::Drop(DropReason::Loss)
        } else {
            Verdict::Pass
        }
    }
}

/// Deliver an extra copy of each frame with probability `p`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Duplicate {
    /// Duplication probability in `[0, 1]`.
    pub p: f64,
}

impl FaultRule for Duplicate {
    fn verdict(&mut self, _ctx: &PacketCtx<'_>, rng: &mut SimRng) -> Verdict {
        if rng.chance(self.p) {
            Verdict::Duplicate
        } else {
            Verdict::Pass
        }
    }
}

/// Hold back each frame with probability `p` by `extra_delay_ns`, letting later frames
/// overtake it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reorder {
    /// Probability in `[0, 1]` that a frame is held back.
    pub p: f64,
    /// How long a held-back frame waits, in ns.
    pub extra_delay_ns: u64,
}

impl FaultRule for Reorder {
    fn verdict(&mut self, _ctx: &PacketCtx<'_>, rng: &mut SimRng) -> Verdict {
        if rng.chance(self.p) {
            Verdict::Delay(self.extra_delay_ns)
        } else {
            Verdict::Pass
        }
    }
}

/// With probability `p`, flip one uniformly chosen bit of the frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Corrupt {
    /// Corruption probability in `[0, 1]`.
    pub p: f64,
}

impl FaultRule for Corrupt {
    fn verdict(&mut self, ctx: &PacketCtx<'_>, rng: &mut SimRng) -> Verdict {
        if ctx.frame.is_empty() || !rng.chance(self.p) {
            return Verdict::Pass;
        }
        let byte = rng.gen_range(0..ctx.frame.len() as u64) as usize;
        let bit = rng.gen_range(0..8) as u32;
        Verdict::Corrupt {
            byte,
            xor: 1u8 << bit,
        }
    }
}

/// A half-open time window `[from_ns, until_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    /// First instant inside the window.
    pub from_ns: u64,
    /// First instant after the window.
    pub until_ns: u64,
}

impl Window {
    /// Whether `t_ns` falls inside the window.
    pub fn contains(&self, t_ns: u64) -> bool {
        self.from_ns <= t_ns && t_ns < self.until_ns
    }
}

/// Scheduled link flaps: while any window is active the link is down and every frame departing
/// in it is dropped as [`DropReason::LinkDown`]. [`crate::World::schedule_flap`] installs the
/// same schedule on both directions.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Flap {
    /// Down windows (`from_ns` = down at, `until_ns` = up at).
    pub down: Vec<Window>,
}

impl Flap {
    /// Down from `down_at_ns` until `up_at_ns`.
    pub fn new(down_at_ns: u64, up_at_ns: u64) -> Self {
        Self {
            down: vec![Window {
                from_ns: down_at_ns,
                until_ns: up_at_ns,
            }],
        }
    }

    /// Add another down window.
    pub fn and(mut self, down_at_ns: u64, up_at_ns: u64) -> Self {
        self.down.push(Window {
            from_ns: down_at_ns,
            until_ns: up_at_ns,
        });
        self
    }

    /// Whether the link is down at `t_ns`.
    pub fn is_down(&self, t_ns: u64) -> bool {
        self.down.iter().any(|w| w.contains(t_ns))
    }
}

impl FaultRule for Flap {
    fn verdict(&mut self, ctx: &PacketCtx<'_>, _rng: &mut SimRng) -> Verdict {
        if self.is_down(ctx.depart_ns) {
            Verdict::Drop(DropReason::LinkDown)
        } else {
            Verdict::Pass
        }
    }
}

/// One direction silently swallows every frame departing in `[from_ns, until_ns)` (an
/// asymmetric path failure; the other direction keeps working).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blackhole {
    /// The window during which frames vanish.
    pub window: Window,
}

impl Blackhole {
    /// Swallow frames departing in `[from_ns, until_ns)`.
    pub fn new(from_ns: u64, until_ns: u64) -> Self {
        Self {
            window: Window { from_ns, until_ns },
        }
    }
}

impl FaultRule for Blackhole {
    fn verdict(&mut self, ctx: &PacketCtx<'_>, _rng: &mut SimRng) -> Verdict {
        if self.window.contains(ctx.depart_ns) {
            Verdict::Drop(DropReason::Blackhole)
        } else {
            Verdict::Pass
        }
    }
}

impl Flap {
    /// `count` down windows of `down_ns` each, one every `period_ns`, the first starting at
    /// `first_down_at_ns` (e.g. a link that bounces every second for 50 ms).
    pub fn periodic(first_down_at_ns: u64, down_ns: u64, period_ns: u64, count: u32) -> Self {
        let down = (0..u64::from(count))
            .map(|k| {
                let from_ns = first_down_at_ns.saturating_add(k.saturating_mul(period_ns));
                Window {
                    from_ns,
                    until_ns: from_ns.saturating_add(down_ns),
                }
            })
            .collect();
        Self { down }
    }
}

/// Bursty loss: the Gilbert–Elliott two-state Markov model. Before each frame the channel
/// moves good→bad with probability `p_enter_bad` or bad→good with `p_leave_bad`; the frame is
/// then lost with `loss_good` or `loss_bad` according to the state. The mean burst (bad-state
/// sojourn) is `1 / p_leave_bad` frames; the long-run share of frames in the bad state is
/// `p_enter_bad / (p_enter_bad + p_leave_bad)`. Drops count as [`DropReason::Loss`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstLoss {
    /// Probability per frame of moving from the good to the bad state.
    pub p_enter_bad: f64,
    /// Probability per frame of moving from the bad to the good state.
    pub p_leave_bad: f64,
    /// Loss probability in the good state.
    pub loss_good: f64,
    /// Loss probability in the bad state.
    pub loss_bad: f64,
    /// Current state (starts good).
    pub bad: bool,
}

impl BurstLoss {
    /// A model losing nothing in the good state and everything in the bad state, with mean
    /// burst length `burst_frames_mean` (>= 1) and long-run loss share `loss_share`.
    pub fn with_mean_burst(loss_share: f64, burst_frames_mean: f64) -> Self {
        let p_leave_bad = 1.0 / burst_frames_mean.max(1.0);
        let share = loss_share.clamp(0.0, 0.999);
        // share = enter / (enter + leave)  =>  enter = share * leave / (1 - share)
        let p_enter_bad = (share * p_leave_bad / (1.0 - share)).min(1.0);
        Self {
            p_enter_bad,
            p_leave_bad,
            loss_good: 0.0,
            loss_bad: 1.0,
            bad: false,
        }
    }
}

impl FaultRule for BurstLoss {
    fn verdict(&mut self, _ctx: &PacketCtx<'_>, rng: &mut SimRng) -> Verdict {
        let flip = if self.bad {
            self.p_leave_bad
        } else {
            self.p_enter_bad
        };
        if rng.chance(flip) {
            self.bad = !self.bad;
        }
        let loss = if self.bad {
            self.loss_bad
        } else {
            self.loss_good
        };
        if rng.chance(loss) {
            Verdict::Drop(DropReason::Loss)
        } else {
            Verdict::Pass
        }
    }
}
