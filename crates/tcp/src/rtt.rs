//! Retransmission timeout estimation (RFC 6298).

use crate::config::NS_PER_MS;

/// Clock granularity `G` of RFC 6298 §2: our samples come in ns, but timestamp samples come in
/// 1 ms ticks, so 1 ms is the honest granularity.
const CLOCK_GRANULARITY_NS: u64 = NS_PER_MS;

/// Most doublings of the RTO (RFC 6298 §5.5); the result is also capped at `rto_max_ns`.
const BACKOFF_SHIFT_MAX: u8 = 16;

/// Nanoseconds per microsecond: the estimator's unit.
const NS_PER_US: u64 = 1_000;

/// The RTO's bounds and the rule the minimum follows, read from the connection's shared
/// configuration ([`crate::Config::rto_bounds`]) at each use instead of copied into every
/// TCB (issue 17 item 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtoBounds {
    /// Lower bound of the RTO ([`crate::Config::rto_min_ns`]).
    pub min_ns: u64,
    /// Upper bound of the RTO, backoff included ([`crate::Config::rto_max_ns`]).
    pub max_ns: u64,
    /// Apply `min_ns` to the variance term instead of the whole RTO: RTO = SRTT +
    /// max(K·RTTVAR, rto_min), as Linux does (`tcp_rtt_estimator` floors its variance at
    /// `tcp_rto_min`, `__tcp_set_rto` adds SRTT), so the RTO is never closer than `min_ns`
    /// to the round trip itself. `false`: RFC 6298 §2.4, max(SRTT + K·RTTVAR, rto_min)
    /// ([`crate::Config::rto_min_bounds_variance`]).
    pub min_bounds_variance: bool,
}

/// Nanoseconds to whole microseconds, saturating at `u32::MAX` µs (71.6 minutes).
fn us_of(ns: u64) -> u32 {
    u32::try_from(ns / NS_PER_US).unwrap_or(u32::MAX)
}

/// Smoothed RTT, RTT variance and the RTO derived from them, in microseconds (as Linux's
/// `srtt_us`; RFC 6298 works with any clock granularity, and this one's `G` is 1 ms): 16
/// bytes. The bounds are the configuration's ([`RtoBounds`]), passed in where needed.
///
/// Invariants: `base_rto_us` lies within the bounds in force (converted to µs; a bound past
/// `u32::MAX` µs saturates there, and the backed-off RTO is still capped by the bound in
/// ns); `srtt_us`/`rttvar_us` are meaningful only when `has_sample`. Samples are truncated
/// to whole microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct RttEstimator {
    /// SRTT (RFC 6298 §2), µs.
    pub srtt_us: u32,
    /// RTTVAR (RFC 6298 §2), µs.
    pub rttvar_us: u32,
    /// RTO before backoff, µs.
    pub base_rto_us: u32,
    /// Number of consecutive timeouts: the RTO in use is `base_rto_us << backoff_shift`.
    pub backoff_shift: u8,
    /// Whether a sample has been taken.
    pub has_sample: bool,
}

impl RttEstimator {
    /// A fresh estimator: RTO = `rto_initial_ns` (RFC 6298 §2.1) within `bounds`.
    pub fn new(rto_initial_ns: u64, bounds: RtoBounds) -> RttEstimator {
        RttEstimator {
            srtt_us: 0,
            rttvar_us: 0,
            base_rto_us: us_of(rto_initial_ns.clamp(bounds.min_ns, bounds.max_ns)),
            backoff_shift: 0,
            has_sample: false,
        }
    }

    /// SRTT in ns (meaningful only when `has_sample`).
    pub fn srtt_ns(&self) -> u64 {
        u64::from(self.srtt_us) * NS_PER_US
    }

    /// RTTVAR in ns (meaningful only when `has_sample`).
    pub fn rttvar_ns(&self) -> u64 {
        u64::from(self.rttvar_us) * NS_PER_US
    }

    /// The RTO before backoff, in ns.
    pub fn base_rto_ns(&self) -> u64 {
        u64::from(self.base_rto_us) * NS_PER_US
    }

    /// Sets the RTO before backoff to `rto_ns` within `bounds`.
    pub fn set_base_rto_ns(&mut self, rto_ns: u64, bounds: RtoBounds) {
        self.base_rto_us = us_of(rto_ns.clamp(bounds.min_ns, bounds.max_ns));
    }

    /// Feeds one RTT measurement (RFC 6298 §2.2, §2.3) and clears the backoff: a valid sample
    /// means an ACK for a segment that was not retransmitted (Karn) arrived.
    pub fn sample(&mut self, rtt_ns: u64, bounds: RtoBounds) {
        let rtt_us = u64::from(us_of(rtt_ns));
        if self.has_sample {
            // RFC 6298 §2.3: RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|; SRTT <- 7/8 SRTT + 1/8 R'
            // (in u64: no step overflows, and each result fits u32 again).
            let srtt = u64::from(self.srtt_us);
            let err = srtt.abs_diff(rtt_us);
            self.rttvar_us = ((u64::from(self.rttvar_us) * 3 + err) / 4) as u32;
            self.srtt_us = ((srtt * 7 + rtt_us) / 8) as u32;
        } else {
            // RFC 6298 §2.2: SRTT <- R, RTTVAR <- R/2.
            self.srtt_us = rtt_us as u32;
            self.rttvar_us = (rtt_us / 2) as u32;
            self.has_sample = true;
        }
        // RTO <- SRTT + max(G, K*RTTVAR), K = 4; RFC 6298 §2.4/§2.5 bounds.
        let variance_ns = CLOCK_GRANULARITY_NS.max(self.rttvar_ns().saturating_mul(4));
        let variance_ns = if bounds.min_bounds_variance {
            variance_ns.max(bounds.min_ns)
        } else {
            variance_ns
        };
        self.set_base_rto_ns(self.srtt_ns().saturating_add(variance_ns), bounds);
        self.backoff_shift = 0;
    }

    /// The RTO in force, backoff included, capped at `bounds.max_ns`.
    pub fn rto_ns(&self, bounds: RtoBounds) -> u64 {
        let base = self.base_rto_ns();
        let shifted = base
            .checked_shl(u32::from(self.backoff_shift))
            .unwrap_or(u64::MAX);
        if shifted >> self.backoff_shift != base {
            return bounds.max_ns;
        }
        shifted.min(bounds.max_ns)
    }

    /// Doubles the RTO after a timeout (RFC 6298 §5.5).
    pub fn back_off(&mut self) {
        if self.backoff_shift < BACKOFF_SHIFT_MAX {
            self.backoff_shift += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(min_ms: u64, max_ms: u64) -> RtoBounds {
        RtoBounds {
            min_ns: min_ms * NS_PER_MS,
            max_ns: max_ms * NS_PER_MS,
            min_bounds_variance: false,
        }
    }

    const B: RtoBounds = RtoBounds {
        min_ns: 200 * NS_PER_MS,
        max_ns: 60_000 * NS_PER_MS,
        min_bounds_variance: false,
    };

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, B);
        e.sample(100 * NS_PER_MS, B);
        assert_eq!(e.srtt_ns(), 100 * NS_PER_MS);
        assert_eq!(e.rttvar_ns(), 50 * NS_PER_MS);
        // 100 + 4*50 = 300 ms.
        assert_eq!(e.rto_ns(B), 300 * NS_PER_MS);
    }

    #[test]
    fn rto_is_clamped_to_minimum() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, B);
        e.sample(NS_PER_MS, B);
        assert_eq!(e.rto_ns(B), 200 * NS_PER_MS);
    }

    #[test]
    fn linux_style_minimum_bounds_the_variance_not_the_rto() {
        let linux = RtoBounds {
            min_bounds_variance: true,
            ..B
        };
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, linux);
        // A 10 ms round trip: 10 + max(4·5, 200) = 210 ms, where RFC 6298 gives 200 ms.
        e.sample(10 * NS_PER_MS, linux);
        assert_eq!(e.rto_ns(linux), 210 * NS_PER_MS);
        // A large variance is not floored: 100 + 4·50 = 300 ms either way.
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, linux);
        e.sample(100 * NS_PER_MS, linux);
        assert_eq!(e.rto_ns(linux), 300 * NS_PER_MS);
    }

    #[test]
    fn absurd_samples_saturate_instead_of_overflowing() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, B);
        e.sample(u64::MAX, B);
        e.sample(u64::MAX, B);
        e.sample(0, B);
        assert_eq!(e.rto_ns(B), 60_000 * NS_PER_MS);
    }

    /// Microseconds: sub-µs parts of a sample are dropped, the rest kept exactly; a bound
    /// past `u32::MAX` µs saturates the base RTO there while the backed-off RTO still
    /// reaches the bound.
    #[test]
    fn samples_keep_microseconds_and_long_bounds_saturate() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, B);
        e.sample(1_234_567, B);
        assert_eq!(e.srtt_ns(), 1_234_000);
        assert_eq!(e.rttvar_ns(), 617_000);
        let long = bounds(200, 3 * 3_600_000);
        let mut e = RttEstimator::new(5 * 3_600_000 * NS_PER_MS, long);
        assert_eq!(e.base_rto_ns(), u64::from(u32::MAX) * NS_PER_US);
        e.back_off();
        e.back_off();
        assert_eq!(e.rto_ns(long), long.max_ns);
    }

    #[test]
    fn backoff_doubles_and_caps_at_max() {
        let b = bounds(200, 5_000);
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, b);
        e.back_off();
        assert_eq!(e.rto_ns(b), 2_000 * NS_PER_MS);
        e.back_off();
        assert_eq!(e.rto_ns(b), 4_000 * NS_PER_MS);
        e.back_off();
        assert_eq!(e.rto_ns(b), 5_000 * NS_PER_MS);
        for _ in 0..40 {
            e.back_off();
        }
        assert_eq!(e.rto_ns(b), 5_000 * NS_PER_MS);
    }
}
