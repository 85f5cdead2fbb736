//! CUBIC's hybrid slow start as Linux runs it (`net/ipv4/tcp_cubic.c`: `hystart_update`,
//! `cubictcp_acked`, with `hystart_detect = 3`), behind [`crate::Config::hystart`].
//!
//! Slow start ends early, with ssthresh = cwnd, on either of two signs that the path's queue
//! starts to fill, judged once cwnd is at least [`LOW_WINDOW_SEGMENTS`]:
//!
//! - *delay increase*: the smallest RTT sample among the first [`MIN_SAMPLES`] ACKs of a
//!   round (and every later one of the round) exceeds the connection's smallest sample by
//!   `clamp(min / 8, 4 ms, 16 ms)`;
//! - *ACK train*: ACKs arriving at most [`ACK_DELTA_US`] apart keep coming for longer than
//!   half the minimum RTT (plus a TSO/GRO allowance) after the round began.
//!
//! A round starts on the first ACK beyond the SND.NXT recorded when the previous round
//! started. Samples are Linux's `ca_rtt_us`: the RTT of the highest segment the ACK newly
//! delivered (see `rack::Delivery::ca_rtt_ns`), in whole microseconds. Samples within one
//! second of the start of a CUBIC congestion-avoidance epoch are ignored, the minimum too
//! (Linux: "discard delay samples right after fast recovery"). The state starts afresh at
//! the first ACK and after a retransmission timeout (Linux `cubictcp_state` on
//! `TCP_CA_Loss`); it does not travel in a snapshot.
//!
//! This is not RFC 9406's HyStart++ (which samples RTTs per round and continues in
//! "conservative slow start" after the exit); it is the variant the Linux-written corpus
//! expects.

use wire::tcp::SeqNumber;

use super::Congestion;

/// Linux `hystart_low_window`: HyStart judges only from this cwnd on, in segments.
pub const LOW_WINDOW_SEGMENTS: u32 = 16;
/// Linux `HYSTART_MIN_SAMPLES`: RTT samples a round takes before the delay check.
pub const MIN_SAMPLES: u8 = 8;
/// Linux `hystart_ack_delta_us`: ACKs at most this far apart form a train.
pub const ACK_DELTA_US: u64 = 2_000;
/// Linux `HYSTART_DELAY_MIN`/`MAX`: bounds of the delay-increase margin, µs.
const DELAY_MARGIN_MIN_US: u32 = 4_000;
const DELAY_MARGIN_MAX_US: u32 = 16_000;
/// Samples this soon after a congestion-avoidance epoch starts are discarded (Linux: `HZ`).
const EPOCH_QUIET_NS: u64 = 1_000_000_000;
/// Linux `sk_gso_max_size` default (`GSO_LEGACY_MAX_SIZE`), the TSO allowance's unit; the
/// stack's TSO segments are at most this large too.
const GSO_MAX_BYTES: u64 = 65_536;
/// Linux `hystart_ack_delay` caps the TSO/GRO allowance at 1 ms.
const ACK_DELAY_MAX_US: u64 = 1_000;

/// HyStart's per-connection state (Linux `struct bictcp`'s HyStart fields).
///
/// Invariants: `sample_cnt ≤ MIN_SAMPLES`; `curr_rtt_us` is `u32::MAX` until the round's
/// first sample; `delay_min_us` is 0 until the first sample, then ≥ 1; `found` stays set
/// until the state is dropped (a timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hystart {
    /// When the current round started (µs on the connection's clock).
    round_start_us: u64,
    /// When the last ACK of a train arrived (µs).
    last_ack_us: u64,
    /// The round ends once an ACK passes this (SND.NXT when the round started).
    end_seq: SeqNumber,
    /// The smallest RTT sample of the current round (µs).
    curr_rtt_us: u32,
    /// The smallest RTT sample of the connection (µs), 0 before the first.
    delay_min_us: u32,
    /// Samples the round has taken, up to [`MIN_SAMPLES`].
    sample_cnt: u8,
    /// Slow start was ended by HyStart: no more judging.
    found: bool,
}

/// One ACK's input to HyStart.
#[derive(Debug, Clone, Copy)]
pub struct HystartAck {
    pub now_ns: u64,
    /// The ACK's RTT sample (see the module documentation).
    pub rtt_ns: u64,
    /// SND.UNA after the ACK, SND.NXT before anything it lets us send.
    pub snd_una: SeqNumber,
    pub snd_nxt: SeqNumber,
    pub mss: u32,
    /// The smoothed RTT, for the TSO/GRO allowance of the ACK-train threshold; 0 if none.
    pub srtt_ns: u64,
}

impl Hystart {
    /// Fresh state at `now_ns`; the first ACK beyond `end_seq` starts a round.
    pub fn new(now_ns: u64, end_seq: SeqNumber) -> Hystart {
        Hystart {
            round_start_us: now_ns / 1_000,
            last_ack_us: now_ns / 1_000,
            end_seq,
            curr_rtt_us: u32::MAX,
            delay_min_us: 0,
            sample_cnt: 0,
            found: false,
        }
    }

    /// Whether HyStart ended slow start.
    pub fn found(&self) -> bool {
        self.found
    }

    /// The smallest RTT sample taken (µs), if any.
    pub fn delay_min_us(&self) -> Option<u32> {
        (self.delay_min_us > 0).then_some(self.delay_min_us)
    }

    /// Linux `bictcp_hystart_reset`: a new round from `now_us`, ending past `snd_nxt`.
    fn new_round(&mut self, now_us: u64, snd_nxt: SeqNumber) {
        self.round_start_us = now_us;
        self.last_ack_us = now_us;
        self.end_seq = snd_nxt;
        self.curr_rtt_us = u32::MAX;
        self.sample_cnt = 0;
    }
}

impl Congestion {
    /// HyStart's judgement of one ACK with an RTT sample (Linux `cubictcp_acked` and
    /// `hystart_update`): may end slow start by setting ssthresh to cwnd.
    pub fn on_hystart_ack(&mut self, h: &mut Hystart, a: HystartAck) {
        if self
            .cubic
            .epoch_start_ns()
            .is_some_and(|e| a.now_ns.saturating_sub(e) < EPOCH_QUIET_NS)
        {
            return;
        }
        let delay_us = u32::try_from(a.rtt_ns / 1_000).unwrap_or(u32::MAX).max(1);
        if h.delay_min_us == 0 || h.delay_min_us > delay_us {
            h.delay_min_us = delay_us;
        }
        if h.found || !self.in_slow_start() {
            return;
        }
        let now_us = a.now_ns / 1_000;
        if a.snd_una.gt(h.end_seq) {
            h.new_round(now_us, a.snd_nxt);
        }
        let mss = a.mss.max(1);
        let cwnd_segments = self.window.cwnd_bytes / mss;
        if cwnd_segments < LOW_WINDOW_SEGMENTS {
            return;
        }
        // ACK train: closely spaced ACKs for longer than half the minimum RTT (the stack
        // does not pace, Linux's `SK_PACING_NONE` halving).
        if now_us.saturating_sub(h.last_ack_us) <= ACK_DELTA_US {
            h.last_ack_us = now_us;
            let threshold_us =
                (u64::from(h.delay_min_us) + self.hystart_ack_delay_us(a.mss, a.srtt_ns)) >> 1;
            if now_us.saturating_sub(h.round_start_us) > threshold_us {
                h.found = true;
                self.window.ssthresh_bytes = self.window.cwnd_bytes;
            }
        }
        // Delay increase: the round's smallest sample against the connection's.
        h.curr_rtt_us = h.curr_rtt_us.min(delay_us);
        if h.sample_cnt < MIN_SAMPLES {
            h.sample_cnt += 1;
        } else {
            let margin_us = (h.delay_min_us >> 3).clamp(DELAY_MARGIN_MIN_US, DELAY_MARGIN_MAX_US);
            if h.curr_rtt_us > h.delay_min_us.saturating_add(margin_us) {
                h.found = true;
                self.window.ssthresh_bytes = self.window.cwnd_bytes;
            }
        }
    }

    /// Linux `hystart_ack_delay`: the time four maximal TSO segments take at the pacing
    /// rate Linux would compute (`tcp_update_pacing_rate`: cwnd·MSS/SRTT, 200 % below half
    /// ssthresh, 120 % above), at most 1 ms; 0 without an RTT estimate.
    fn hystart_ack_delay_us(&self, mss: u32, srtt_ns: u64) -> u64 {
        if srtt_ns == 0 {
            return 0;
        }
        let w = &self.window;
        let ratio_pct: u64 = if w.cwnd_bytes < w.ssthresh_bytes / 2 {
            200
        } else {
            120
        };
        let cwnd_segments = u64::from(w.cwnd_bytes / mss.max(1));
        // Bytes per second.
        let rate = u64::from(mss)
            .saturating_mul(cwnd_segments)
            .saturating_mul(ratio_pct)
            .saturating_mul(10_000_000)
            / srtt_ns;
        if rate == 0 {
            return ACK_DELAY_MAX_US;
        }
        (GSO_MAX_BYTES * 4 * 1_000_000 / rate).min(ACK_DELAY_MAX_US)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CongestionControl;

    const MSS: u32 = 1000;
    const MS: u64 = 1_000_000;

    /// CUBIC in slow start with a 20-segment window, and HyStart before its first round.
    fn cubic20() -> (Congestion, Hystart) {
        (
            Congestion::new(CongestionControl::Cubic, 20, MSS),
            Hystart::new(0, SeqNumber(1)),
        )
    }

    fn ack(now_ns: u64, rtt_ns: u64, una: u32, nxt: u32) -> HystartAck {
        HystartAck {
            now_ns,
            rtt_ns,
            snd_una: SeqNumber(una),
            snd_nxt: SeqNumber(nxt),
            mss: MSS,
            srtt_ns: 100 * MS,
        }
    }

    /// A first round whose one sample sets the minimum RTT to 100 ms, then a second round
    /// whose ACKs, 10 ms apart (no train), carry `rtt_ms(k)` for their k-th sample. Returns
    /// after how many samples of the second round slow start ended, if it did (of 20).
    fn second_round_exit(rtt_ms: impl Fn(u64) -> u64) -> (Option<u64>, Congestion, Hystart) {
        let (mut c, mut h) = cubic20();
        c.on_hystart_ack(&mut h, ack(100 * MS, 100 * MS, 2001, 20_001));
        assert_eq!(h.delay_min_us(), Some(100_000));
        for k in 1..=20u64 {
            let una = 20_001 + 1000 * k as u32;
            c.on_hystart_ack(
                &mut h,
                ack((200 + 10 * k) * MS, rtt_ms(k) * MS, una, 40_001),
            );
            if h.found() {
                return (Some(k), c, h);
            }
        }
        (None, c, h)
    }

    #[test]
    fn a_delay_rise_over_eight_samples_ends_slow_start_with_ssthresh_at_cwnd() {
        // 130 ms > 100 ms + clamp(100/8, 4, 16) = 112.5 ms: judged at the ninth sample.
        let (exit, c, _) = second_round_exit(|_| 130);
        assert_eq!(exit, Some(9));
        assert_eq!(c.ssthresh_bytes(), 20 * MSS);
        assert_eq!(c.cwnd_bytes(), 20 * MSS);
        assert!(!c.in_slow_start());
    }

    #[test]
    fn a_flat_rtt_does_not_end_slow_start() {
        let (exit, c, _) = second_round_exit(|_| 100);
        assert_eq!(exit, None);
        assert_eq!(c.ssthresh_bytes(), u32::MAX);
        // Below the margin (112 ms ≤ 112.5 ms) either.
        assert_eq!(second_round_exit(|_| 112).0, None);
    }

    #[test]
    fn a_new_minimum_after_the_eighth_sample_keeps_slow_start() {
        // Linux b344579ca847 ("fix spurious HYSTART_DELAY exit upon drop in min RTT"): a
        // sample that lowers the minimum lowers the round's minimum too.
        let (exit, _, h) = second_round_exit(|k| if k == 9 { 30 } else { 105 });
        assert_eq!(exit, None);
        assert_eq!(h.delay_min_us(), Some(30_000));
    }

    #[test]
    fn closely_spaced_acks_for_half_the_minimum_rtt_end_slow_start() {
        let (mut c, mut h) = cubic20();
        // Minimum RTT 20 ms; then a round of ACKs 1 ms apart, at the minimum RTT (the delay
        // detector sees nothing): the train outlasts (20 ms + 1 ms TSO allowance) / 2.
        c.on_hystart_ack(&mut h, ack(20 * MS, 20 * MS, 2001, 20_001));
        let mut exit_at_ms = None;
        for k in 0..20u64 {
            let una = 21_001 + 1000 * k as u32;
            c.on_hystart_ack(&mut h, ack((40 + k) * MS, 20 * MS, una, 40_001));
            if h.found() {
                exit_at_ms = Some(k);
                break;
            }
        }
        assert_eq!(
            exit_at_ms,
            Some(11),
            "11 ms > 10.5 ms after the round began"
        );
        assert_eq!(c.ssthresh_bytes(), 20 * MSS);
    }

    #[test]
    fn nothing_is_judged_below_sixteen_segments() {
        let mut c = Congestion::new(CongestionControl::Cubic, 15, MSS);
        let mut h = Hystart::new(0, SeqNumber(1));
        c.on_hystart_ack(&mut h, ack(100 * MS, 100 * MS, 2001, 20_001));
        for k in 1..=20u64 {
            let una = 20_001 + 1000 * k as u32;
            c.on_hystart_ack(&mut h, ack((200 + k) * MS, 300 * MS, una, 40_001));
        }
        assert!(!h.found());
        assert!(c.in_slow_start());
    }
}
