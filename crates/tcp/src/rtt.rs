//! Retransmission timeout estimation (RFC 6298).

use crate::config::NS_PER_MS;

/// Clock granularity `G` of RFC 6298 §2: our samples come in ns, but timestamp samples come in
/// 1 ms ticks, so 1 ms is the honest granularity.
const CLOCK_GRANULARITY_NS: u64 = NS_PER_MS;

/// Most doublings of the RTO (RFC 6298 §5.5); the result is also capped at `rto_max_ns`.
const BACKOFF_SHIFT_MAX: u8 = 16;

/// Smoothed RTT, RTT variance and the RTO derived from them.
///
/// Invariants: `rto_min_ns ≤ base_rto_ns ≤ rto_max_ns`; `srtt_ns`/`rttvar_ns` are meaningful only
/// when `has_sample`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttEstimator {
    /// SRTT (RFC 6298 §2).
    pub srtt_ns: u64,
    /// RTTVAR (RFC 6298 §2).
    pub rttvar_ns: u64,
    /// RTO before backoff.
    pub base_rto_ns: u64,
    /// Number of consecutive timeouts: the RTO in use is `base_rto_ns << backoff_shift`.
    pub backoff_shift: u8,
    /// Whether a sample has been taken.
    pub has_sample: bool,
    /// Lower bound of the RTO.
    pub rto_min_ns: u64,
    /// Upper bound of the RTO.
    pub rto_max_ns: u64,
    /// Apply `rto_min_ns` to the variance term instead of the whole RTO:
    /// RTO = SRTT + max(K·RTTVAR, rto_min), as Linux does (`tcp_rtt_estimator` floors its
    /// variance at `tcp_rto_min`, `__tcp_set_rto` adds SRTT), so the RTO is never closer than
    /// `rto_min_ns` to the round trip itself. `false`: RFC 6298 §2.4, max(SRTT + K·RTTVAR,
    /// rto_min).
    pub min_bounds_variance: bool,
}

impl RttEstimator {
    /// A fresh estimator: RTO = `rto_initial_ns` (RFC 6298 §2.1).
    pub fn new(rto_initial_ns: u64, rto_min_ns: u64, rto_max_ns: u64) -> RttEstimator {
        RttEstimator {
            srtt_ns: 0,
            rttvar_ns: 0,
            base_rto_ns: rto_initial_ns.clamp(rto_min_ns, rto_max_ns),
            backoff_shift: 0,
            has_sample: false,
            rto_min_ns,
            rto_max_ns,
            min_bounds_variance: false,
        }
    }

    /// Feeds one RTT measurement (RFC 6298 §2.2, §2.3) and clears the backoff: a valid sample
    /// means an ACK for a segment that was not retransmitted (Karn) arrived.
    pub fn sample(&mut self, rtt_ns: u64) {
        if self.has_sample {
            // RFC 6298 §2.3: RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|; SRTT <- 7/8 SRTT + 1/8 R'.
            let err = self.srtt_ns.abs_diff(rtt_ns);
            self.rttvar_ns = self.rttvar_ns.saturating_mul(3).saturating_add(err) / 4;
            self.srtt_ns = self.srtt_ns.saturating_mul(7).saturating_add(rtt_ns) / 8;
        } else {
            // RFC 6298 §2.2: SRTT <- R, RTTVAR <- R/2.
            self.srtt_ns = rtt_ns;
            self.rttvar_ns = rtt_ns / 2;
            self.has_sample = true;
        }
        // RTO <- SRTT + max(G, K*RTTVAR), K = 4; RFC 6298 §2.4/§2.5 bounds.
        let variance_ns = CLOCK_GRANULARITY_NS.max(self.rttvar_ns.saturating_mul(4));
        let variance_ns = if self.min_bounds_variance {
            variance_ns.max(self.rto_min_ns)
        } else {
            variance_ns
        };
        let rto = self.srtt_ns.saturating_add(variance_ns);
        self.base_rto_ns = rto.clamp(self.rto_min_ns, self.rto_max_ns);
        self.backoff_shift = 0;
    }

    /// The RTO in force, backoff included, capped at `rto_max_ns`.
    pub fn rto_ns(&self) -> u64 {
        let shifted = self
            .base_rto_ns
            .checked_shl(u32::from(self.backoff_shift))
            .unwrap_or(u64::MAX);
        if shifted >> self.backoff_shift != self.base_rto_ns {
            return self.rto_max_ns;
        }
        shifted.min(self.rto_max_ns)
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

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, 200 * NS_PER_MS, 60_000 * NS_PER_MS);
        e.sample(100 * NS_PER_MS);
        assert_eq!(e.srtt_ns, 100 * NS_PER_MS);
        assert_eq!(e.rttvar_ns, 50 * NS_PER_MS);
        // 100 + 4*50 = 300 ms.
        assert_eq!(e.rto_ns(), 300 * NS_PER_MS);
    }

    #[test]
    fn rto_is_clamped_to_minimum() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, 200 * NS_PER_MS, 60_000 * NS_PER_MS);
        e.sample(NS_PER_MS);
        assert_eq!(e.rto_ns(), 200 * NS_PER_MS);
    }

    #[test]
    fn linux_style_minimum_bounds_the_variance_not_the_rto() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, 200 * NS_PER_MS, 60_000 * NS_PER_MS);
        e.min_bounds_variance = true;
        // A 10 ms round trip: 10 + max(4·5, 200) = 210 ms, where RFC 6298 gives 200 ms.
        e.sample(10 * NS_PER_MS);
        assert_eq!(e.rto_ns(), 210 * NS_PER_MS);
        // A large variance is not floored: 100 + 4·50 = 300 ms either way.
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, 200 * NS_PER_MS, 60_000 * NS_PER_MS);
        e.min_bounds_variance = true;
        e.sample(100 * NS_PER_MS);
        assert_eq!(e.rto_ns(), 300 * NS_PER_MS);
    }

    #[test]
    fn absurd_samples_saturate_instead_of_overflowing() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, 200 * NS_PER_MS, 60_000 * NS_PER_MS);
        e.sample(u64::MAX);
        e.sample(u64::MAX);
        e.sample(0);
        assert_eq!(e.rto_ns(), 60_000 * NS_PER_MS);
    }

    #[test]
    fn backoff_doubles_and_caps_at_max() {
        let mut e = RttEstimator::new(1_000 * NS_PER_MS, 200 * NS_PER_MS, 5_000 * NS_PER_MS);
        e.back_off();
        assert_eq!(e.rto_ns(), 2_000 * NS_PER_MS);
        e.back_off();
        assert_eq!(e.rto_ns(), 4_000 * NS_PER_MS);
        e.back_off();
        assert_eq!(e.rto_ns(), 5_000 * NS_PER_MS);
        for _ in 0..40 {
            e.back_off();
        }
        assert_eq!(e.rto_ns(), 5_000 * NS_PER_MS);
    }
}
