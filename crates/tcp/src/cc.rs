//! Congestion window growth and reduction: NewReno (RFC 5681) and CUBIC (RFC 9438).
//!
//! Loss detection, fast retransmit and the recovery episode itself (RFC 6582, RFC 6675) live in
//! the connection; this module only answers "how big is the window" at each event.

use crate::config::{CongestionControl, NS_PER_S};

/// CUBIC multiplicative decrease factor β (RFC 9438 §4.6).
const CUBIC_BETA: f64 = 0.7;
/// CUBIC scaling constant C in segments/s³ (RFC 9438 §5).
const CUBIC_C: f64 = 0.4;

/// Congestion state of one connection.
///
/// Invariants: `cwnd_bytes ≥ mss` after any event; `ssthresh_bytes ≥ 2·mss` once set by a
/// congestion event (RFC 5681 §3.1 equation 4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Congestion {
    /// Which algorithm grows the window in congestion avoidance.
    pub algorithm: CongestionControl,
    /// Congestion window.
    pub cwnd_bytes: u32,
    /// Slow start threshold (RFC 5681 §3.1); `u32::MAX` until the first congestion event.
    pub ssthresh_bytes: u32,
    /// Bytes acknowledged in congestion avoidance since the last increase (RFC 5681 §3.1,
    /// byte counting).
    pub ca_acked_bytes: u32,
    /// CUBIC W_max in bytes: the window before the last reduction (RFC 9438 §4.1).
    pub cubic_w_max_bytes: u32,
    /// CUBIC: start of the current congestion-avoidance epoch, if one is running (RFC 9438 §4.2).
    pub cubic_epoch_start_ns: Option<u64>,
    /// CUBIC K in ns: the time to grow back to W_max (RFC 9438 §4.2, equation 2).
    pub cubic_k_ns: u64,
    /// CUBIC Reno-friendly estimate W_est in bytes (RFC 9438 §4.3).
    pub cubic_w_est_bytes: u32,
}

impl Congestion {
    /// Initial state: cwnd = IW (RFC 6928 §2: `initial_window_segments` full segments).
    pub fn new(algorithm: CongestionControl, initial_window_segments: u16, mss: u32) -> Congestion {
        Congestion {
            algorithm,
            cwnd_bytes: u32::from(initial_window_segments)
                .saturating_mul(mss)
                .max(mss),
            ssthresh_bytes: u32::MAX,
            ca_acked_bytes: 0,
            cubic_w_max_bytes: 0,
            cubic_epoch_start_ns: None,
            cubic_k_ns: 0,
            cubic_w_est_bytes: 0,
        }
    }

    /// True while cwnd < ssthresh (RFC 5681 §3.1).
    pub fn in_slow_start(&self) -> bool {
        self.cwnd_bytes < self.ssthresh_bytes
    }

    /// New data was cumulatively acknowledged outside loss recovery.
    pub fn on_ack(&mut self, now: u64, acked_bytes: u32, mss: u32, srtt_ns: u64) {
        self.on_ack_limited(now, acked_bytes, mss, srtt_ns, mss);
    }

    /// [`Congestion::on_ack`] with RFC 3465's L: slow start adds at most
    /// `ss_increase_max_bytes` per ACK. Above one SMSS the window stops at ssthresh, where
    /// congestion avoidance takes over (Linux `tcp_slow_start`).
    pub fn on_ack_limited(
        &mut self,
        now: u64,
        acked_bytes: u32,
        mss: u32,
        srtt_ns: u64,
        ss_increase_max_bytes: u32,
    ) {
        if self.in_slow_start() {
            // RFC 5681 §3.1 equation 2 with RFC 3465 §2.2: cwnd += min(N, L).
            let grown = self
                .cwnd_bytes
                .saturating_add(acked_bytes.min(ss_increase_max_bytes));
            self.cwnd_bytes = if ss_increase_max_bytes > mss {
                grown.min(self.ssthresh_bytes)
            } else {
                grown
            };
            return;
        }
        match self.algorithm {
            CongestionControl::NewReno => self.reno_avoidance(acked_bytes, mss),
            CongestionControl::Cubic => self.cubic_avoidance(now, acked_bytes, mss, srtt_ns),
        }
    }

    fn reno_avoidance(&mut self, acked_bytes: u32, mss: u32) {
        // RFC 5681 §3.1: byte counting; once a window's worth has been acknowledged, grow by
        // one SMSS.
        self.ca_acked_bytes = self.ca_acked_bytes.saturating_add(acked_bytes);
        if self.ca_acked_bytes >= self.cwnd_bytes {
            self.ca_acked_bytes -= self.cwnd_bytes;
            self.cwnd_bytes = self.cwnd_bytes.saturating_add(mss);
        }
    }

    fn cubic_avoidance(&mut self, now: u64, acked_bytes: u32, mss: u32, srtt_ns: u64) {
        let mss_f = f64::from(mss);
        let cwnd_seg = f64::from(self.cwnd_bytes) / mss_f;
        let epoch_start = match self.cubic_epoch_start_ns {
            Some(t) => t,
            None => {
                // RFC 9438 §4.2: a new epoch starts; if there was no reduction yet, W_max is
                // the current window and K = 0.
                self.cubic_epoch_start_ns = Some(now);
                if self.cubic_w_max_bytes < self.cwnd_bytes {
                    self.cubic_w_max_bytes = self.cwnd_bytes;
                    self.cubic_k_ns = 0;
                }
                self.cubic_w_est_bytes = self.cwnd_bytes;
                now
            }
        };
        let w_max_seg = f64::from(self.cubic_w_max_bytes) / mss_f;
        // RFC 9438 §4.2: target = W_cubic(t + RTT), clamped to [cwnd, 1.5 cwnd] (§4.4).
        let t_s =
            (now.saturating_sub(epoch_start).saturating_add(srtt_ns)) as f64 / NS_PER_S as f64;
        let k_s = self.cubic_k_ns as f64 / NS_PER_S as f64;
        let d = t_s - k_s;
        let w_cubic_seg = CUBIC_C * d * d * d + w_max_seg;
        let target_seg = w_cubic_seg.clamp(cwnd_seg, 1.5 * cwnd_seg);
        // RFC 9438 §4.3: W_est += α·(segments acked)/cwnd, α = 3(1-β)/(1+β).
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        let acked_seg = f64::from(acked_bytes) / mss_f;
        let w_est_seg = f64::from(self.cubic_w_est_bytes) / mss_f + alpha * acked_seg / cwnd_seg;
        self.cubic_w_est_bytes = to_bytes(w_est_seg, mss_f);
        if w_cubic_seg < w_est_seg {
            // Reno-friendly region (RFC 9438 §4.3): cwnd = W_est.
            self.cwnd_bytes = self.cwnd_bytes.max(self.cubic_w_est_bytes);
        } else {
            // RFC 9438 §4.4/§4.5: cwnd += (target - cwnd)/cwnd per acknowledged segment.
            let inc_seg = (target_seg - cwnd_seg) / cwnd_seg * acked_seg;
            let inc_bytes = to_bytes(inc_seg, mss_f);
            self.cwnd_bytes = self.cwnd_bytes.saturating_add(inc_bytes);
        }
    }

    /// A congestion event (entering fast recovery): sets ssthresh and the window used during
    /// recovery. `flight_bytes` is the data outstanding when loss was detected.
    pub fn on_congestion_event(&mut self, now: u64, flight_bytes: u32, mss: u32) {
        match self.algorithm {
            CongestionControl::NewReno => {
                // RFC 5681 §3.1 equation 4: ssthresh = max(FlightSize / 2, 2*SMSS).
                self.ssthresh_bytes = (flight_bytes / 2).max(2 * mss);
            }
            CongestionControl::Cubic => {
                self.cubic_reduce(now, mss);
            }
        }
        self.ca_acked_bytes = 0;
    }

    fn cubic_reduce(&mut self, _now: u64, mss: u32) {
        let cwnd = self.cwnd_bytes;
        // RFC 9438 §4.7 fast convergence.
        self.cubic_w_max_bytes = if cwnd < self.cubic_w_max_bytes {
            (f64::from(cwnd) * (1.0 + CUBIC_BETA) / 2.0) as u32
        } else {
            cwnd
        };
        // RFC 9438 §4.6: ssthresh = cwnd·β, at least 2 segments.
        self.ssthresh_bytes = ((f64::from(cwnd) * CUBIC_BETA) as u32).max(2 * mss);
        // RFC 9438 §4.2 equation 2: K = cbrt(W_max·(1-β)/C), in seconds, W in segments.
        let w_max_seg = f64::from(self.cubic_w_max_bytes) / f64::from(mss);
        let k_s = (w_max_seg * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
        self.cubic_k_ns = (k_s * NS_PER_S as f64) as u64;
        self.cubic_epoch_start_ns = None;
    }

    /// Fast recovery ended with a full acknowledgment (RFC 6582 §3.2 step 3): deflate the window.
    pub fn on_recovery_exit(&mut self, flight_bytes: u32, mss: u32) {
        // RFC 6582 §3.2 step 3, option (1): cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
        self.cwnd_bytes = self
            .ssthresh_bytes
            .min(flight_bytes.max(mss).saturating_add(mss));
        self.ca_acked_bytes = 0;
    }

    /// The retransmission timer expired (RFC 5681 §3.1 equation 4 and the loss window).
    pub fn on_rto(&mut self, now: u64, flight_bytes: u32, mss: u32) {
        match self.algorithm {
            CongestionControl::NewReno => {
                self.ssthresh_bytes = (flight_bytes / 2).max(2 * mss);
            }
            CongestionControl::Cubic => self.cubic_reduce(now, mss),
        }
        // RFC 5681 §3.1: LW = 1 SMSS.
        self.cwnd_bytes = mss;
        self.ca_acked_bytes = 0;
    }
}

fn to_bytes(segments: f64, mss: f64) -> u32 {
    let b = segments * mss;
    if b.is_nan() || b <= 0.0 {
        0
    } else if b >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        b as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    #[test]
    fn initial_window_is_ten_segments() {
        let c = Congestion::new(CongestionControl::NewReno, 10, MSS);
        assert_eq!(c.cwnd_bytes, 10 * MSS);
    }

    #[test]
    fn unlimited_slow_start_adds_every_acknowledged_byte_up_to_ssthresh() {
        // RFC 3465 with L unbounded (Linux `tcp_slow_start`): an ACK for two segments adds two.
        let mut c = Congestion::new(CongestionControl::NewReno, 10, MSS);
        c.on_ack_limited(0, 2 * MSS, MSS, 0, u32::MAX);
        assert_eq!(c.cwnd_bytes, 12 * MSS);
        // With the RFC 5681 limit of one SMSS the same ACK adds one.
        let mut rfc = Congestion::new(CongestionControl::NewReno, 10, MSS);
        rfc.on_ack(0, 2 * MSS, MSS, 0);
        assert_eq!(rfc.cwnd_bytes, 11 * MSS);
        // The window stops at ssthresh.
        c.ssthresh_bytes = 13 * MSS;
        c.on_ack_limited(0, 4 * MSS, MSS, 0, u32::MAX);
        assert_eq!(c.cwnd_bytes, 13 * MSS);
    }

    #[test]
    fn slow_start_grows_one_mss_per_ack() {
        let mut c = Congestion::new(CongestionControl::NewReno, 2, MSS);
        c.on_ack(0, 5 * MSS, MSS, 0);
        assert_eq!(c.cwnd_bytes, 3 * MSS);
    }

    #[test]
    fn reno_avoidance_grows_one_mss_per_window() {
        let mut c = Congestion::new(CongestionControl::NewReno, 4, MSS);
        c.ssthresh_bytes = 4 * MSS;
        for _ in 0..3 {
            c.on_ack(0, MSS, MSS, 0);
        }
        assert_eq!(c.cwnd_bytes, 4 * MSS);
        c.on_ack(0, MSS, MSS, 0);
        assert_eq!(c.cwnd_bytes, 5 * MSS);
    }

    #[test]
    fn reno_congestion_event_halves_flight() {
        let mut c = Congestion::new(CongestionControl::NewReno, 10, MSS);
        c.on_congestion_event(0, 10 * MSS, MSS);
        assert_eq!(c.ssthresh_bytes, 5 * MSS);
        c.on_rto(0, 2 * MSS, MSS);
        assert_eq!(c.ssthresh_bytes, 2 * MSS);
        assert_eq!(c.cwnd_bytes, MSS);
    }

    #[test]
    fn cubic_reduces_by_beta_and_regrows_to_w_max_near_k() {
        let mut c = Congestion::new(CongestionControl::Cubic, 100, MSS);
        c.on_congestion_event(0, 100 * MSS, MSS);
        assert_eq!(c.ssthresh_bytes, 70 * MSS);
        assert_eq!(c.cubic_w_max_bytes, 100 * MSS);
        c.cwnd_bytes = c.ssthresh_bytes;
        // K = cbrt(100 * 0.3 / 0.4) ≈ 4.217 s.
        assert!((c.cubic_k_ns as f64 / 1e9 - 4.217).abs() < 0.01);
        // Feed a window of ACKs every 100 ms for K seconds: cwnd approaches W_max, from below.
        let mut now = 0;
        while now < c.cubic_k_ns {
            for _ in 0..(c.cwnd_bytes / MSS) {
                c.on_ack(now, MSS, MSS, 100_000_000);
            }
            now += 100_000_000;
        }
        let w = c.cwnd_bytes / MSS;
        assert!((95..=110).contains(&w), "cwnd after K = {w} segments");
    }

    #[test]
    fn cubic_fast_convergence_lowers_w_max() {
        let mut c = Congestion::new(CongestionControl::Cubic, 100, MSS);
        c.on_congestion_event(0, 100 * MSS, MSS);
        c.cwnd_bytes = 80 * MSS;
        c.on_congestion_event(0, 80 * MSS, MSS);
        assert_eq!(c.cubic_w_max_bytes, 68 * MSS);
    }
}
