//! Interrupt moderation and the NAPI/DPC arm/mask cycle of one queue.
//!
//! The cycle (seed 000, "the DPC, not the ISR, is responsible for re-enabling the processor
//! for more interrupts from the NIC"; Linux NAPI):
//!
//! 1. The queue is *armed*. Packets arrive and become *pending*.
//! 2. When the [`ModerationConfig`] rules allow, the queue *fires* a wake-up and is *masked*:
//!    no further wake-ups until the driver re-arms it.
//! 3. The driver polls with a budget. A poll that drains the queue re-arms it; a poll that
//!    uses its whole budget leaves it masked and scheduled, and the driver polls again.
//!
//! Pure state machine: every method takes `now_ns`; nothing reads a clock.

use crate::config::ModerationConfig;

/// Why a wake-up fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FireCause {
    /// The minimum interval since the previous wake-up had passed.
    Interval,
    /// The pending-packet threshold was reached.
    Threshold,
    /// A low-latency segment arrived (PSH, or a port of the LLI rule).
    LowLatency,
}

/// Moderation state of one queue.
///
/// Invariants: `pending_packets > 0` only while `armed`; `interval_ns` lies within the
/// adaptive bounds when adaptive moderation is on.
#[derive(Clone, Debug)]
pub(crate) struct Moderator {
    config: ModerationConfig,
    /// Interrupts enabled (the driver re-armed after draining).
    armed: bool,
    /// Packets that arrived while armed and have not been signalled.
    pending_packets: u32,
    /// Time of the previous wake-up.
    last_fire_ns: Option<u64>,
    /// Packets that arrived since the previous wake-up (armed or not): the rate estimate.
    arrivals_since_fire: u64,
    /// The interval in force.
    interval_ns: u64,
}

impl Moderator {
    pub(crate) fn new(config: ModerationConfig) -> Self {
        Moderator {
            config,
            armed: true,
            pending_packets: 0,
            last_fire_ns: None,
            arrivals_since_fire: 0,
            interval_ns: initial_interval(&config),
        }
    }

    pub(crate) fn set_config(&mut self, config: ModerationConfig) {
        self.config = config;
        self.interval_ns = initial_interval(&config);
    }

    /// Whether a low-latency interrupt rule names ports.
    #[inline]
    pub(crate) fn has_lli_ports(&self) -> bool {
        !self.config.lli_ports.is_empty()
    }

    /// The ports of the low-latency interrupt rule.
    pub(crate) fn lli_ports(&self) -> crate::config::LliPorts {
        self.config.lli_ports
    }

    pub(crate) fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    pub(crate) fn is_armed(&self) -> bool {
        self.armed
    }

    /// A packet arrived at `now_ns`; `push` marks a TCP segment with PSH, `lli_port` a
    /// packet to or from a port of the LLI rule. Returns the cause when the queue fires now.
    pub(crate) fn on_arrival(
        &mut self,
        now_ns: u64,
        push: bool,
        lli_port: bool,
    ) -> Option<FireCause> {
        self.arrivals_since_fire = self.arrivals_since_fire.saturating_add(1);
        if !self.armed {
            return None;
        }
        self.pending_packets = self.pending_packets.saturating_add(1);
        let cause = if (push && self.config.lli_on_push) || lli_port {
            Some(FireCause::LowLatency)
        } else if self.interval_passed(now_ns) {
            Some(FireCause::Interval)
        } else if self.config.packets_threshold > 0
            && self.pending_packets >= self.config.packets_threshold
        {
            Some(FireCause::Threshold)
        } else {
            None
        };
        if cause.is_some() {
            self.fire(now_ns);
        }
        cause
    }

    /// When the pending packets will fire by the interval rule, if any are pending.
    pub(crate) fn deadline_ns(&self) -> Option<u64> {
        if !self.armed || self.pending_packets == 0 {
            return None;
        }
        Some(match self.last_fire_ns {
            Some(t) => t.saturating_add(self.interval_ns),
            None => 0,
        })
    }

    /// Fires if the interval deadline has passed.
    pub(crate) fn on_timer(&mut self, now_ns: u64) -> Option<FireCause> {
        match self.deadline_ns() {
            Some(d) if now_ns >= d => {
                self.fire(now_ns);
                Some(FireCause::Interval)
            }
            _ => None,
        }
    }

    /// The driver polled: `drained` re-arms (NAPI `napi_complete_done`); otherwise the queue
    /// stays masked and scheduled — also when the driver polled it without a wake-up (busy
    /// polling takes the queue over until it drains).
    pub(crate) fn on_poll(&mut self, drained: bool) {
        self.armed = drained;
        self.pending_packets = 0;
    }

    fn interval_passed(&self, now_ns: u64) -> bool {
        match self.last_fire_ns {
            None => true,
            Some(t) => now_ns >= t.saturating_add(self.interval_ns),
        }
    }

    fn fire(&mut self, now_ns: u64) {
        if let (Some(a), Some(last)) = (self.config.adaptive, self.last_fire_ns) {
            let elapsed_ns = now_ns.saturating_sub(last).max(1);
            // rate = arrivals / elapsed, in packets per second (u128: no overflow).
            let rate_pps =
                u128::from(self.arrivals_since_fire) * 1_000_000_000 / u128::from(elapsed_ns);
            let high = u128::from(a.rate_pps_high);
            let span = u128::from(a.interval_ns_max - a.interval_ns_min.min(a.interval_ns_max));
            let target = u128::from(a.interval_ns_min) + span * rate_pps.min(high) / high;
            // EWMA, weight 1/4 on the new target: a burst moves the interval, one packet
            // does not swing it.
            let smoothed = (u128::from(self.interval_ns) * 3 + target) / 4;
            let clamped =
                smoothed.clamp(u128::from(a.interval_ns_min), u128::from(a.interval_ns_max));
            self.interval_ns = u64::try_from(clamped).unwrap_or(a.interval_ns_max);
        }
        self.armed = false;
        self.pending_packets = 0;
        self.arrivals_since_fire = 0;
        self.last_fire_ns = Some(now_ns);
    }
}

fn initial_interval(config: &ModerationConfig) -> u64 {
    match config.adaptive {
        Some(a) => config
            .interval_ns
            .clamp(a.interval_ns_min, a.interval_ns_max.max(a.interval_ns_min)),
        None => config.interval_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AdaptiveModeration;

    #[test]
    fn first_packet_after_idle_fires_at_once() {
        let mut m = Moderator::new(ModerationConfig::fixed(100_000));
        assert_eq!(m.on_arrival(5, false, false), Some(FireCause::Interval));
        assert!(!m.is_armed());
    }

    #[test]
    fn masked_queue_never_fires_until_rearmed() {
        let mut m = Moderator::new(ModerationConfig::fixed(10));
        assert!(m.on_arrival(0, false, false).is_some());
        assert_eq!(m.on_arrival(1_000, false, false), None);
        assert_eq!(m.deadline_ns(), None);
        m.on_poll(false);
        assert_eq!(m.on_arrival(2_000, false, false), None);
        m.on_poll(true);
        assert!(m.on_arrival(3_000, false, false).is_some());
    }

    #[test]
    fn interval_defers_and_timer_fires_at_deadline() {
        let mut m = Moderator::new(ModerationConfig::fixed(100));
        assert!(m.on_arrival(0, false, false).is_some());
        m.on_poll(true);
        assert_eq!(m.on_arrival(10, false, false), None);
        assert_eq!(m.deadline_ns(), Some(100));
        assert_eq!(m.on_timer(99), None);
        assert_eq!(m.on_timer(100), Some(FireCause::Interval));
    }

    #[test]
    fn threshold_fires_before_interval() {
        let mut m = Moderator::new(ModerationConfig {
            packets_threshold: 3,
            ..ModerationConfig::fixed(1_000_000)
        });
        assert!(m.on_arrival(0, false, false).is_some());
        m.on_poll(true);
        assert_eq!(m.on_arrival(1, false, false), None);
        assert_eq!(m.on_arrival(2, false, false), None);
        assert_eq!(m.on_arrival(3, false, false), Some(FireCause::Threshold));
    }

    #[test]
    fn lli_push_fires_inside_interval() {
        let mut m = Moderator::new(ModerationConfig {
            lli_on_push: true,
            ..ModerationConfig::fixed(1_000_000)
        });
        assert!(m.on_arrival(0, false, false).is_some());
        m.on_poll(true);
        assert_eq!(m.on_arrival(1, false, false), None);
        assert_eq!(m.on_arrival(2, true, false), Some(FireCause::LowLatency));
    }

    #[test]
    fn adaptive_interval_stays_within_bounds() {
        let a = AdaptiveModeration {
            interval_ns_min: 1_000,
            interval_ns_max: 50_000,
            rate_pps_high: 1_000_000,
        };
        let mut m = Moderator::new(ModerationConfig {
            adaptive: Some(a),
            ..ModerationConfig::fixed(0)
        });
        assert_eq!(m.interval_ns(), 1_000);
        let mut now = 0u64;
        for _ in 0..100_000 {
            now += 100; // 10 Mpps: far above the high rate.
            if m.on_timer(now).is_some() || m.on_arrival(now, false, false).is_some() {
                m.on_poll(true);
            }
            assert!((1_000..=50_000).contains(&m.interval_ns()));
        }
        assert!(m.interval_ns() > 40_000, "interval {}", m.interval_ns());
    }
}
