//! Congestion window growth and reduction: NewReno (RFC 5681) and CUBIC (RFC 9438).
//!
//! Loss detection, fast retransmit and the recovery episode itself (RFC 6582, RFC 6675) live in
//! the connection; this module only answers "how big is the window" at each event. The
//! connection talks to [`Congestion`] through intent-named calls (`on_ack_limited`,
//! `enter_recovery`, `on_partial_ack`, `on_rto`, ...) and never writes its fields: every change
//! of cwnd and ssthresh happens in this file.
//!
//! The algorithm-specific part sits behind [`CongestionController`]: growth in congestion
//! avoidance and the reduction on a congestion event. [`NewReno`] and [`Cubic`] implement it;
//! [`Congestion`] dispatches on [`CongestionControl`] with a `match` (no `dyn`, no box: the
//! state stays inline in the TCB, 48 bytes as before the trait).

use crate::config::{CongestionControl, NS_PER_S};
use crate::connection::rebase_instant;

mod hystart;
pub use hystart::{Hystart, HystartAck};

/// CUBIC multiplicative decrease factor β (RFC 9438 §4.6).
const CUBIC_BETA: f64 = 0.7;
/// CUBIC scaling constant C in segments/s³ (RFC 9438 §5).
const CUBIC_C: f64 = 0.4;

/// The window state every controller shares.
///
/// Invariants: `cwnd_bytes ≥ mss` after any event; `ssthresh_bytes ≥ 2·mss` once set by a
/// congestion event (RFC 5681 §3.1 equation 4); `ca_acked_bytes` is reset by every reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Congestion window.
    cwnd_bytes: u32,
    /// Slow start threshold (RFC 5681 §3.1); `u32::MAX` until the first congestion event.
    ssthresh_bytes: u32,
    /// Bytes acknowledged in congestion avoidance since the last increase (RFC 5681 §3.1,
    /// byte counting).
    ca_acked_bytes: u32,
}

impl Window {
    /// Congestion window.
    pub fn cwnd_bytes(&self) -> u32 {
        self.cwnd_bytes
    }
    /// Slow start threshold; `u32::MAX` until the first congestion event.
    pub fn ssthresh_bytes(&self) -> u32 {
        self.ssthresh_bytes
    }
    /// Bytes acknowledged in congestion avoidance since the last increase.
    pub fn ca_acked_bytes(&self) -> u32 {
        self.ca_acked_bytes
    }
}

/// What differs between congestion controllers: how the window grows in congestion
/// avoidance and how ssthresh is set on a congestion event. Slow start, the recovery window
/// and the loss window (RFC 5681 §3) are common and live in [`Congestion`].
pub trait CongestionController {
    /// Congestion avoidance (cwnd ≥ ssthresh): `acked_bytes` were newly acknowledged.
    fn on_avoidance_ack(
        &mut self,
        w: &mut Window,
        now: u64,
        acked_bytes: u32,
        mss: u32,
        srtt_ns: u64,
    );
    /// A congestion event (loss found by duplicate ACKs, SACK, RACK or the RTO): sets
    /// `ssthresh_bytes` (at least 2·mss) from the window or `flight_bytes`.
    fn on_reduction(&mut self, w: &mut Window, now: u64, flight_bytes: u32, mss: u32);
}

/// NewReno (RFC 5681 §3.1): one SMSS per window of acknowledged bytes; ssthresh is half the
/// flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NewReno;

impl CongestionController for NewReno {
    fn on_avoidance_ack(
        &mut self,
        w: &mut Window,
        _now: u64,
        acked_bytes: u32,
        mss: u32,
        _srtt_ns: u64,
    ) {
        // RFC 5681 §3.1: byte counting; once a window's worth has been acknowledged, grow by
        // one SMSS.
        w.ca_acked_bytes = w.ca_acked_bytes.saturating_add(acked_bytes);
        if w.ca_acked_bytes >= w.cwnd_bytes {
            w.ca_acked_bytes -= w.cwnd_bytes;
            w.cwnd_bytes = w.cwnd_bytes.saturating_add(mss);
        }
    }

    fn on_reduction(&mut self, w: &mut Window, _now: u64, flight_bytes: u32, mss: u32) {
        // RFC 5681 §3.1 equation 4: ssthresh = max(FlightSize / 2, 2*SMSS).
        w.ssthresh_bytes = (flight_bytes / 2).max(2 * mss);
    }
}

/// CUBIC (RFC 9438) state.
///
/// Invariants: `k_ns` is derived from `w_max_bytes` at the last reduction; `epoch_start_ns`
/// is a time on the connection's clock (moved by [`Congestion::rebased`] on handoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cubic {
    /// W_max in bytes: the window before the last reduction (RFC 9438 §4.1).
    w_max_bytes: u32,
    /// Start of the current congestion-avoidance epoch (RFC 9438 §4.2), [`NO_EPOCH`] when
    /// none is running: 8 bytes where an `Option<u64>` takes 16 (the TCB's budget, issue 17).
    epoch_start_ns: u64,
    /// K in ns: the time to grow back to W_max (RFC 9438 §4.2, equation 2).
    k_ns: u64,
    /// Reno-friendly estimate W_est in bytes (RFC 9438 §4.3).
    w_est_bytes: u32,
}

/// [`Cubic`]'s `epoch_start_ns` when no epoch is running; an epoch's start is at most one
/// less.
const NO_EPOCH: u64 = u64::MAX;

impl Default for Cubic {
    fn default() -> Cubic {
        Cubic {
            w_max_bytes: 0,
            epoch_start_ns: NO_EPOCH,
            k_ns: 0,
            w_est_bytes: 0,
        }
    }
}

/// An epoch start as stored: `None` is [`NO_EPOCH`], a time is kept below it.
fn epoch_from(t: Option<u64>) -> u64 {
    t.map_or(NO_EPOCH, |t| t.min(NO_EPOCH - 1))
}

impl Cubic {
    /// W_max in bytes.
    pub fn w_max_bytes(&self) -> u32 {
        self.w_max_bytes
    }
    /// K in ns.
    pub fn k_ns(&self) -> u64 {
        self.k_ns
    }
    /// Start of the running congestion-avoidance epoch, if any.
    pub fn epoch_start_ns(&self) -> Option<u64> {
        (self.epoch_start_ns != NO_EPOCH).then_some(self.epoch_start_ns)
    }
    /// W_est in bytes.
    pub fn w_est_bytes(&self) -> u32 {
        self.w_est_bytes
    }
}

impl CongestionController for Cubic {
    fn on_avoidance_ack(
        &mut self,
        w: &mut Window,
        now: u64,
        acked_bytes: u32,
        mss: u32,
        srtt_ns: u64,
    ) {
        let mss_f = f64::from(mss);
        let cwnd_seg = f64::from(w.cwnd_bytes) / mss_f;
        let epoch_start = match self.epoch_start_ns() {
            Some(t) => t,
            None => {
                // RFC 9438 §4.2: a new epoch starts; if there was no reduction yet, W_max is
                // the current window and K = 0.
                self.epoch_start_ns = epoch_from(Some(now));
                if self.w_max_bytes < w.cwnd_bytes {
                    self.w_max_bytes = w.cwnd_bytes;
                    self.k_ns = 0;
                }
                self.w_est_bytes = w.cwnd_bytes;
                now
            }
        };
        let w_max_seg = f64::from(self.w_max_bytes) / mss_f;
        // RFC 9438 §4.2: target = W_cubic(t + RTT), clamped to [cwnd, 1.5 cwnd] (§4.4).
        let t_s =
            (now.saturating_sub(epoch_start).saturating_add(srtt_ns)) as f64 / NS_PER_S as f64;
        let k_s = self.k_ns as f64 / NS_PER_S as f64;
        let d = t_s - k_s;
        let w_cubic_seg = CUBIC_C * d * d * d + w_max_seg;
        let target_seg = w_cubic_seg.clamp(cwnd_seg, 1.5 * cwnd_seg);
        // RFC 9438 §4.3: W_est += α·(segments acked)/cwnd, α = 3(1-β)/(1+β).
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        let acked_seg = f64::from(acked_bytes) / mss_f;
        let w_est_seg = f64::from(self.w_est_bytes) / mss_f + alpha * acked_seg / cwnd_seg;
        self.w_est_bytes = to_bytes(w_est_seg, mss_f);
        if w_cubic_seg < w_est_seg {
            // Reno-friendly region (RFC 9438 §4.3): cwnd = W_est.
            w.cwnd_bytes = w.cwnd_bytes.max(self.w_est_bytes);
        } else {
            // RFC 9438 §4.4/§4.5: cwnd += (target - cwnd)/cwnd per acknowledged segment.
            let inc_seg = (target_seg - cwnd_seg) / cwnd_seg * acked_seg;
            let inc_bytes = to_bytes(inc_seg, mss_f);
            w.cwnd_bytes = w.cwnd_bytes.saturating_add(inc_bytes);
        }
    }

    fn on_reduction(&mut self, w: &mut Window, _now: u64, _flight_bytes: u32, mss: u32) {
        let cwnd = w.cwnd_bytes;
        // RFC 9438 §4.7 fast convergence.
        self.w_max_bytes = if cwnd < self.w_max_bytes {
            (f64::from(cwnd) * (1.0 + CUBIC_BETA) / 2.0) as u32
        } else {
            cwnd
        };
        // RFC 9438 §4.6: ssthresh = cwnd·β, at least 2 segments.
        w.ssthresh_bytes = ((f64::from(cwnd) * CUBIC_BETA) as u32).max(2 * mss);
        // RFC 9438 §4.2 equation 2: K = cbrt(W_max·(1-β)/C), in seconds, W in segments.
        let w_max_seg = f64::from(self.w_max_bytes) / f64::from(mss);
        let k_s = (w_max_seg * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
        self.k_ns = (k_s * NS_PER_S as f64) as u64;
        self.epoch_start_ns = NO_EPOCH;
    }
}

/// Congestion state of one connection: the shared [`Window`], the algorithm in use and its
/// state. Fields are private: the connection changes them only through the methods below.
///
/// Invariants: those of [`Window`]; `algorithm` selects the controller that grows and
/// reduces the window ([`Cubic`]'s state is kept, unused, under NewReno).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Congestion {
    /// Which algorithm grows the window in congestion avoidance.
    algorithm: CongestionControl,
    window: Window,
    cubic: Cubic,
}

/// Every field of a [`Congestion`], flattened: what [`Congestion::parts`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CongestionParts {
    pub algorithm: CongestionControl,
    pub cwnd_bytes: u32,
    /// `u32::MAX` until the first congestion event.
    pub ssthresh_bytes: u32,
    pub ca_acked_bytes: u32,
    pub cubic_w_max_bytes: u32,
    pub cubic_epoch_start_ns: Option<u64>,
    pub cubic_k_ns: u64,
    pub cubic_w_est_bytes: u32,
}

impl Congestion {
    /// Initial state: cwnd = IW (RFC 6928 §2: `initial_window_segments` full segments).
    pub fn new(algorithm: CongestionControl, initial_window_segments: u16, mss: u32) -> Congestion {
        Congestion {
            algorithm,
            window: Window {
                cwnd_bytes: u32::from(initial_window_segments)
                    .saturating_mul(mss)
                    .max(mss),
                ssthresh_bytes: u32::MAX,
                ca_acked_bytes: 0,
            },
            cubic: Cubic::default(),
        }
    }

    /// Which algorithm runs.
    pub fn algorithm(&self) -> CongestionControl {
        self.algorithm
    }
    /// Congestion window.
    pub fn cwnd_bytes(&self) -> u32 {
        self.window.cwnd_bytes
    }
    /// Slow start threshold; `u32::MAX` until the first congestion event.
    pub fn ssthresh_bytes(&self) -> u32 {
        self.window.ssthresh_bytes
    }
    /// The shared window state.
    pub fn window(&self) -> &Window {
        &self.window
    }
    /// CUBIC's state (kept, unused, under NewReno).
    pub fn cubic(&self) -> &Cubic {
        &self.cubic
    }

    /// Every field, for encoders (the snapshot codec): the state is plain data, only its
    /// changes are reserved to this module.
    pub fn parts(&self) -> CongestionParts {
        let Congestion {
            algorithm,
            window:
                Window {
                    cwnd_bytes,
                    ssthresh_bytes,
                    ca_acked_bytes,
                },
            cubic:
                Cubic {
                    w_max_bytes,
                    epoch_start_ns,
                    k_ns,
                    w_est_bytes,
                },
        } = *self;
        CongestionParts {
            algorithm,
            cwnd_bytes,
            ssthresh_bytes,
            ca_acked_bytes,
            cubic_w_max_bytes: w_max_bytes,
            cubic_epoch_start_ns: (epoch_start_ns != NO_EPOCH).then_some(epoch_start_ns),
            cubic_k_ns: k_ns,
            cubic_w_est_bytes: w_est_bytes,
        }
    }

    /// The state [`Congestion::parts`] describes, for decoders inside this crate (which check
    /// what they can first: see `snapshot_codec`). `Congestion::from_parts(c.parts()) == c`.
    pub(crate) fn from_parts(p: CongestionParts) -> Congestion {
        Congestion {
            algorithm: p.algorithm,
            window: Window {
                cwnd_bytes: p.cwnd_bytes,
                ssthresh_bytes: p.ssthresh_bytes,
                ca_acked_bytes: p.ca_acked_bytes,
            },
            cubic: Cubic {
                w_max_bytes: p.cubic_w_max_bytes,
                epoch_start_ns: epoch_from(p.cubic_epoch_start_ns),
                k_ns: p.cubic_k_ns,
                w_est_bytes: p.cubic_w_est_bytes,
            },
        }
    }

    /// True while cwnd < ssthresh (RFC 5681 §3.1).
    pub fn in_slow_start(&self) -> bool {
        self.window.cwnd_bytes < self.window.ssthresh_bytes
    }

    /// The same state with its controller switched to `algorithm` (the window and every
    /// controller's state are kept): a resumed connection runs the importer's configuration.
    pub fn with_algorithm(self, algorithm: CongestionControl) -> Congestion {
        Congestion { algorithm, ..self }
    }

    /// The same state with its times moved from a clock reading `from` to one reading `to`
    /// at the same instant (handoff between engines with different clock origins): the
    /// CUBIC epoch keeps its age.
    pub fn rebased(self, from: u64, to: u64) -> Congestion {
        let Congestion {
            algorithm,
            window,
            cubic:
                Cubic {
                    w_max_bytes,
                    epoch_start_ns,
                    k_ns,
                    w_est_bytes,
                },
        } = self;
        Congestion {
            algorithm,
            window,
            cubic: Cubic {
                w_max_bytes,
                epoch_start_ns: if epoch_start_ns == NO_EPOCH {
                    NO_EPOCH
                } else {
                    epoch_from(Some(rebase_instant(epoch_start_ns, from, to)))
                },
                k_ns,
                w_est_bytes,
            },
        }
    }

    fn controller_avoidance(&mut self, now: u64, acked_bytes: u32, mss: u32, srtt_ns: u64) {
        let w = &mut self.window;
        match self.algorithm {
            CongestionControl::NewReno => {
                NewReno.on_avoidance_ack(w, now, acked_bytes, mss, srtt_ns)
            }
            CongestionControl::Cubic => {
                self.cubic
                    .on_avoidance_ack(w, now, acked_bytes, mss, srtt_ns)
            }
        }
    }

    fn controller_reduction(&mut self, now: u64, flight_bytes: u32, mss: u32) {
        let w = &mut self.window;
        match self.algorithm {
            CongestionControl::NewReno => NewReno.on_reduction(w, now, flight_bytes, mss),
            CongestionControl::Cubic => self.cubic.on_reduction(w, now, flight_bytes, mss),
        }
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
            let w = &mut self.window;
            // RFC 5681 §3.1 equation 2 with RFC 3465 §2.2: cwnd += min(N, L).
            let grown = w
                .cwnd_bytes
                .saturating_add(acked_bytes.min(ss_increase_max_bytes));
            w.cwnd_bytes = if ss_increase_max_bytes > mss {
                grown.min(w.ssthresh_bytes)
            } else {
                grown
            };
            return;
        }
        self.controller_avoidance(now, acked_bytes, mss, srtt_ns);
    }

    /// A congestion event (entering fast recovery): sets ssthresh and the window used during
    /// recovery. `flight_bytes` is the data outstanding when loss was detected.
    pub fn on_congestion_event(&mut self, now: u64, flight_bytes: u32, mss: u32) {
        self.controller_reduction(now, flight_bytes, mss);
        self.window.ca_acked_bytes = 0;
    }

    /// Loss recovery begins (RFC 5681 §3.2 step 3, RFC 6675 §5 step 4.2): a congestion
    /// event, then cwnd = ssthresh with SACK (the pipe governs sending) or
    /// ssthresh + 3·SMSS without (the three duplicate ACKs left the network).
    pub fn enter_recovery(&mut self, now: u64, flight_bytes: u32, mss: u32, sack: bool) {
        self.on_congestion_event(now, flight_bytes, mss);
        let w = &mut self.window;
        w.cwnd_bytes = if sack {
            w.ssthresh_bytes
        } else {
            w.ssthresh_bytes.saturating_add(3 * mss)
        };
    }

    /// An ECN-Echo (RFC 3168 §6.1.2): a congestion event without loss. ssthresh is set as
    /// for a loss; with `immediate` cwnd drops to it at once, else the caller brings cwnd
    /// down (proportional rate reduction) through [`Congestion::set_recovery_window`].
    pub fn on_ecn_echo(&mut self, now: u64, flight_bytes: u32, mss: u32, immediate: bool) {
        self.on_congestion_event(now, flight_bytes, mss);
        if immediate {
            self.window.cwnd_bytes = self.window.ssthresh_bytes.max(mss);
        }
    }

    /// Loss recovery begins inside a window already reduced for an ECN-Echo (one reduction
    /// per window, RFC 3168 §6.1.2): cwnd as [`Congestion::enter_recovery`] sets it, ssthresh
    /// kept.
    pub fn enter_recovery_reduced(&mut self, mss: u32, sack: bool) {
        let w = &mut self.window;
        w.cwnd_bytes = if sack {
            w.ssthresh_bytes
        } else {
            w.ssthresh_bytes.saturating_add(3 * mss)
        };
    }

    /// During recovery, a window computed by the recovery algorithm (RFC 6937 PRR:
    /// pipe + sndcnt, at least one SMSS) replaces cwnd.
    pub fn set_recovery_window(&mut self, cwnd_bytes: u32) {
        self.window.cwnd_bytes = cwnd_bytes;
    }

    /// RFC 5681 §3.2 step 4 (NewReno without SACK): one more duplicate ACK in recovery
    /// inflates the window by one SMSS.
    pub fn on_recovery_dupack(&mut self, mss: u32) {
        self.window.cwnd_bytes = self.window.cwnd_bytes.saturating_add(mss);
    }

    /// RFC 6582 §3.2 step 5: a partial ACK of `acked_bytes` deflates the window by that
    /// much, adding back one SMSS if at least one was acknowledged (never below one SMSS).
    pub fn on_partial_ack(&mut self, acked_bytes: u32, mss: u32) {
        let deflated = self.window.cwnd_bytes.saturating_sub(acked_bytes);
        self.window.cwnd_bytes = if acked_bytes >= mss {
            deflated.saturating_add(mss)
        } else {
            deflated
        }
        .max(mss);
    }

    /// Fast recovery ended with a full acknowledgment (RFC 6582 §3.2 step 3): deflate the window.
    pub fn on_recovery_exit(&mut self, flight_bytes: u32, mss: u32) {
        // RFC 6582 §3.2 step 3, option (1): cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
        self.window.cwnd_bytes = self
            .window
            .ssthresh_bytes
            .min(flight_bytes.max(mss).saturating_add(mss));
        self.window.ca_acked_bytes = 0;
    }

    /// PRR recovery ended (RFC 6937 §3; Linux `tcp_end_cwnd_reduction`): PRR brought the
    /// flight down to ssthresh, and cwnd = ssthresh.
    pub fn on_prr_recovery_exit(&mut self) {
        self.window.cwnd_bytes = self.window.ssthresh_bytes;
        self.window.ca_acked_bytes = 0;
    }

    /// RFC 5681 §4.1 restart after idle: cwnd = min(cwnd, RW) with RW = `restart_window_bytes`.
    pub fn restart_after_idle(&mut self, restart_window_bytes: u32) {
        self.window.cwnd_bytes = self.window.cwnd_bytes.min(restart_window_bytes);
    }

    /// The retransmission timer expired (RFC 5681 §3.1 equation 4 and the loss window).
    pub fn on_rto(&mut self, now: u64, flight_bytes: u32, mss: u32) {
        self.controller_reduction(now, flight_bytes, mss);
        // RFC 5681 §3.1: LW = 1 SMSS.
        self.window.cwnd_bytes = mss;
        self.window.ca_acked_bytes = 0;
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
        assert_eq!(c.window.cwnd_bytes, 10 * MSS);
    }

    #[test]
    fn unlimited_slow_start_adds_every_acknowledged_byte_up_to_ssthresh() {
        // RFC 3465 with L unbounded (Linux `tcp_slow_start`): an ACK for two segments adds two.
        let mut c = Congestion::new(CongestionControl::NewReno, 10, MSS);
        c.on_ack_limited(0, 2 * MSS, MSS, 0, u32::MAX);
        assert_eq!(c.window.cwnd_bytes, 12 * MSS);
        // With the RFC 5681 limit of one SMSS the same ACK adds one.
        let mut rfc = Congestion::new(CongestionControl::NewReno, 10, MSS);
        rfc.on_ack(0, 2 * MSS, MSS, 0);
        assert_eq!(rfc.window.cwnd_bytes, 11 * MSS);
        // The window stops at ssthresh.
        c.window.ssthresh_bytes = 13 * MSS;
        c.on_ack_limited(0, 4 * MSS, MSS, 0, u32::MAX);
        assert_eq!(c.window.cwnd_bytes, 13 * MSS);
    }

    #[test]
    fn slow_start_grows_one_mss_per_ack() {
        let mut c = Congestion::new(CongestionControl::NewReno, 2, MSS);
        c.on_ack(0, 5 * MSS, MSS, 0);
        assert_eq!(c.window.cwnd_bytes, 3 * MSS);
    }

    #[test]
    fn reno_avoidance_grows_one_mss_per_window() {
        let mut c = Congestion::new(CongestionControl::NewReno, 4, MSS);
        c.window.ssthresh_bytes = 4 * MSS;
        for _ in 0..3 {
            c.on_ack(0, MSS, MSS, 0);
        }
        assert_eq!(c.window.cwnd_bytes, 4 * MSS);
        c.on_ack(0, MSS, MSS, 0);
        assert_eq!(c.window.cwnd_bytes, 5 * MSS);
    }

    #[test]
    fn reno_congestion_event_halves_flight() {
        let mut c = Congestion::new(CongestionControl::NewReno, 10, MSS);
        c.on_congestion_event(0, 10 * MSS, MSS);
        assert_eq!(c.window.ssthresh_bytes, 5 * MSS);
        c.on_rto(0, 2 * MSS, MSS);
        assert_eq!(c.window.ssthresh_bytes, 2 * MSS);
        assert_eq!(c.window.cwnd_bytes, MSS);
    }

    #[test]
    fn cubic_reduces_by_beta_and_regrows_to_w_max_near_k() {
        let mut c = Congestion::new(CongestionControl::Cubic, 100, MSS);
        c.on_congestion_event(0, 100 * MSS, MSS);
        assert_eq!(c.window.ssthresh_bytes, 70 * MSS);
        assert_eq!(c.cubic.w_max_bytes, 100 * MSS);
        c.window.cwnd_bytes = c.window.ssthresh_bytes;
        // K = cbrt(100 * 0.3 / 0.4) ≈ 4.217 s.
        assert!((c.cubic.k_ns as f64 / 1e9 - 4.217).abs() < 0.01);
        // Feed a window of ACKs every 100 ms for K seconds: cwnd approaches W_max, from below.
        let mut now = 0;
        while now < c.cubic.k_ns {
            for _ in 0..(c.window.cwnd_bytes / MSS) {
                c.on_ack(now, MSS, MSS, 100_000_000);
            }
            now += 100_000_000;
        }
        let w = c.window.cwnd_bytes / MSS;
        assert!((95..=110).contains(&w), "cwnd after K = {w} segments");
    }

    #[test]
    fn cubic_fast_convergence_lowers_w_max() {
        let mut c = Congestion::new(CongestionControl::Cubic, 100, MSS);
        c.on_congestion_event(0, 100 * MSS, MSS);
        c.window.cwnd_bytes = 80 * MSS;
        c.on_congestion_event(0, 80 * MSS, MSS);
        assert_eq!(c.cubic.w_max_bytes, 68 * MSS);
    }

    #[test]
    fn controller_behind_the_trait_keeps_the_state_inline() {
        // Enum-style dispatch on `algorithm`: no box, no vtable, the TCB's 48 bytes as before.
        assert!(core::mem::size_of::<Congestion>() <= 48);
    }

    #[test]
    fn rebasing_keeps_the_epoch_age() {
        let mut c = Congestion::new(CongestionControl::Cubic, 10, MSS);
        c.window.ssthresh_bytes = 5 * MSS;
        c.on_ack(7_000, MSS, MSS, 0);
        assert_eq!(c.cubic().epoch_start_ns(), Some(7_000));
        let moved = c.rebased(10_000, 1_000_000);
        assert_eq!(moved.cubic().epoch_start_ns(), Some(997_000));
        assert_eq!(moved.window(), c.window());
    }
}
