//! Header prediction: the short path for the common segments of an established connection
//! (Van Jacobson's fast path of the 4.3BSD-Reno era; FreeBSD's `tcp_input` "header
//! prediction" block; TAS's fast path).
//!
//! A segment is *predicted* when, in ESTABLISHED, it is what the connection expects next:
//!
//! - flags ACK, or ACK and PSH (no SYN, FIN, RST, URG, ECE, CWR);
//! - SEG.SEQ = RCV.NXT, with text (if any) that fits the window we advertised (no trimming);
//! - SND.UNA ≤ SEG.ACK ≤ SND.MAX, and the segment carries text or acknowledges new data
//!   (a bare ACK of nothing new may be a duplicate ACK or a window update: full path);
//! - timestamps, once negotiated, present and not older than TS.Recent (PAWS passes);
//! - no SACK block in the segment, nothing on the SACK scoreboard, nothing held out of order
//!   (ranges or a FIN beyond a hole), not in loss recovery, no ECN negotiated, no persist
//!   timer running, and the application has not closed.
//!
//! Such a segment takes exactly the state changes the full path (`input.rs`
//! `rx_synchronized_inner` → `rx_ack` → `receive.rs` `rx_text_and_fin`) makes for it, through
//! the same helpers, and skips every test whose outcome the conditions decide: PAWS, the
//! acceptability test, RST/SYN checks, the RFC 5961 ACK range, trimming, the out-of-order
//! and FIN cases. Two kinds:
//!
//! - **in-order data acknowledging nothing new** (the receiver's side of a transfer): of
//!   `rx_ack` only what such an ACK changes is done — RACK's DSACK round and its lost-record
//!   check (RACK may start recovery on a reordering-timer verdict; the full path asks on
//!   every ACK), the chronographs, the window update — skipping the SACK walk, ECN, the
//!   cumulative-ACK branch, duplicate-ACK detection, RACK's delivery scan (which finds
//!   nothing below SND.UNA) and PRR; then the text and the delayed-ACK decision;
//! - **an ACK advancing SND.UNA**, bare (the sender's side) or with in-order data (a
//!   request or response that acknowledges the last one): `rx_ack` whole (release of the
//!   acknowledged bytes, RTT sample, RACK, congestion window growth, timers, `tcp_info`),
//!   then the text as above.
//!
//! Equivalence is tested, not argued only: `predict/tests.rs` drives twin connection pairs
//! through random traffic with loss, reordering, duplication and mutated segments, one pair
//! with prediction switched off, and requires the same state, counters and segments after
//! every step.

use wire::tcp::{TcpFlags, TcpRepr};

use super::*;

#[cfg(test)]
mod tests;

#[cfg(test)]
thread_local! {
    /// Test switch: header prediction off on this thread (the twin that takes the full path).
    pub(crate) static PREDICTION_OFF: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Test counter: segments taken by the short path on this thread.
    pub(crate) static PREDICTED_SEGMENTS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

impl Connection {
    /// Whether `seg` is predicted (the module's conditions). Reads the TCB's hot groups and
    /// the two queue headers; no configuration.
    #[inline]
    fn predicts(&self, seg: &TcpRepr<'_>) -> bool {
        let len = seg.payload.len();
        // SND.UNA ≤ SEG.ACK ≤ SND.MAX as one unsigned comparison of distances from SND.UNA
        // (the flight is below 2^31, so this is the circular order of `SeqNumber::le`).
        let acked = seg.ack_number.0.wrapping_sub(self.snd.una.0);
        self.state == State::Established
            && seg.flags.0 & !TcpFlags::PSH.0 == TcpFlags::ACK.0
            && seg.seq_number == self.rcv.nxt
            && acked <= self.snd.max.0.wrapping_sub(self.snd.una.0)
            && (len != 0 || acked != 0)
            && len <= fwd(self.rcv.nxt, self.rcv.adv) as usize
            && self.ecn.flags == 0
            && !self.rec.in_recovery
            && self.timers.persist_deadline_ns == NEVER
            && !self.app.app_closed
            && match (self.opts.ts_ok, seg.timestamp) {
                (false, _) => true,
                (true, Some(ts)) => !ts_lt(ts.tsval, self.ts.recent),
                (true, None) => false,
            }
            && seg.sack_blocks.iter().all(Option::is_none)
            && self.ooo.holds_nothing()
            && self.scoreboard.is_empty()
    }

    /// Takes `seg` by the short path when it is predicted; returns false (having changed
    /// nothing) when the full path must take it.
    #[inline]
    pub(super) fn rx_predicted(&mut self, now: u64, seg: &TcpRepr<'_>, gro_mss_bytes: u16) -> bool {
        if !self.predicts(seg) {
            return false;
        }
        #[cfg(test)]
        {
            if PREDICTION_OFF.with(|off| off.get()) {
                return false;
            }
            PREDICTED_SEGMENTS.with(|n| n.set(n.get() + 1));
        }
        self.note_ts_recent(now, seg);
        self.note_peer_alive(now);
        if seg.ack_number == self.snd.una {
            self.rx_ack_nothing_new(now, seg);
        } else {
            self.rx_ack(now, seg);
        }
        self.app.more = false;
        // `rx_text_and_fin` for in-order text that fits the window, no FIN, nothing queued
        // out of order (the ACK changed none of that: in ESTABLISHED no FIN of ours is
        // acknowledged, so the state stays).
        if !seg.payload.is_empty() {
            self.count_text(now, seg.payload.len(), gro_mss_bytes);
            self.accept_in_order(seg.payload);
            self.schedule_ack(now);
        }
        true
    }

    /// `rx_ack` for a predicted segment with text whose ACK is SND.UNA (nothing SACKed, no
    /// SACK block, no ECN): RACK sees no delivery but ends a DSACK round SND.UNA has passed,
    /// and may start recovery on a loss its reordering timer marked; nothing is delivered,
    /// so only the chronographs stop when the send queues are empty; then the window update.
    #[inline]
    fn rx_ack_nothing_new(&mut self, now: u64, seg: &TcpRepr<'_>) {
        if self.rack_active() {
            let (una, max) = (self.snd.una, self.snd.max);
            if let Some(r) = self.rack.as_mut() {
                r.on_dsack_round(una, max, false);
                let mss = u32::from(self.eff_mss());
                self.rack_maybe_enter_recovery(now, mss, fwd(una, max));
            }
        }
        self.chrono_on_ack(now, false);
        let new_wnd = u32::from(seg.window_len) << self.opts.snd_wscale;
        self.update_send_window(seg.seq_number, seg.ack_number, new_wnd);
    }
}
