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
    /// Test counter: segments taken by [`Connection::handle_segment_summing`] on this thread.
    pub(crate) static SUMMED_SEGMENTS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// What [`Connection::handle_segment_summing`] did with a segment whose checksum nobody has
/// verified yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummedInput {
    /// Predicted; its text was copied into the receive buffer with the checksum summed in
    /// the same pass, the checksum verified, and the segment taken exactly as
    /// [`Connection::handle_segment_ecn`] would have taken it.
    Taken,
    /// Predicted, but the checksum does not verify: nothing changed (the copied bytes lie in
    /// free space of the receive buffer, unread). The caller drops and counts the segment.
    BadChecksum,
    /// Not taken this way (not predicted, no text, or the buffer's storage must grow):
    /// nothing changed. The caller verifies the checksum itself and, if it holds, hands the
    /// segment to [`Connection::handle_segment_ecn`].
    Declined,
}

impl Connection {
    /// Whether `seg` is predicted (the module's conditions). Reads the TCB's hot groups and
    /// the two queue headers; no configuration. Inlined into both of its callers (out of
    /// line it cost ~25 instructions per segment in calls and spills).
    #[inline(always)]
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
            && !self.app.app_closed
            && match (self.opts.ts_ok, seg.timestamp) {
                (false, _) => true,
                (true, Some(ts)) => !ts_lt(ts.tsval, self.ts.recent),
                (true, None) => false,
            }
            && seg.sack_blocks.iter().all(Option::is_none)
            // One byte (`out.held`) for a persist timer and both queues: all three checked
            // only behind a bit, their state lying in lines a receiver does not touch.
            && (self.out.held & held::PREDICT == 0 || self.predicts_held())
    }

    /// The conditions behind [`held::PREDICT`]: no persist timer, nothing held out of order,
    /// nothing on the scoreboard.
    #[cold]
    #[inline(never)]
    fn predicts_held(&self) -> bool {
        self.timers.persist_deadline_ns == NEVER
            && self.ooo.holds_nothing()
            && self.scoreboard.is_empty()
    }

    /// Whether the short path may run: always, but in tests that switch it off for the twin
    /// taking the full path (and there it counts the segments it takes).
    #[inline(always)]
    fn prediction_allowed() -> bool {
        #[cfg(test)]
        {
            if PREDICTION_OFF.with(|off| off.get()) {
                return false;
            }
            PREDICTED_SEGMENTS.with(|n| n.set(n.get() + 1));
        }
        true
    }

    /// Takes `seg` by the short path when it is predicted; returns false (having changed
    /// nothing) when the full path must take it.
    #[inline]
    pub(super) fn rx_predicted(&mut self, now: u64, seg: &TcpRepr<'_>, gro_mss_bytes: u16) -> bool {
        if !self.predicts(seg) || !Self::prediction_allowed() {
            return false;
        }
        self.rx_predicted_taken(now, seg, gro_mss_bytes, false);
        true
    }

    /// [`Connection::handle_segment_ecn`] for a segment whose TCP checksum is not verified
    /// yet, verified here on the way: when `seg` is predicted and carries text (the
    /// receiver's side of a bulk transfer), the text is copied into the free space of the
    /// receive buffer and summed in the same pass (`Ring::write_summed_at`); with
    /// `header_sum` — the folded sum (`wire::checksum`) of the pseudo-header and the TCP
    /// header as received, checksum field included — the segment verifies when the two sums
    /// combine to 0xffff (RFC 1071). Only then is anything changed: the bytes are committed
    /// and the segment takes the short path as `handle_segment_ecn` takes it. A copy and a
    /// separate pass over the segment become one pass.
    ///
    /// `seg.payload` must be the segment's text as received (the bytes `header_sum`'s
    /// header preceded). ECN: a predicted segment belongs to a connection without ECN, so
    /// the codepoint plays no part.
    pub fn handle_segment_summing(
        &mut self,
        now: u64,
        seg: &TcpRepr<'_>,
        gro_mss_bytes: u16,
        header_sum: u16,
    ) -> SummedInput {
        if seg.payload.is_empty()
            || seg.dst_port != self.local_port
            || seg.src_port != self.remote_port
            || self.out.held & held::SKB != 0
            || !self.predicts(seg)
        {
            return SummedInput::Declined;
        }
        #[cfg(test)]
        {
            if PREDICTION_OFF.with(|off| off.get()) {
                return SummedInput::Declined;
            }
        }
        // `predicts` holds: ESTABLISHED, the text in order and inside the window, nothing
        // held out of order, so the free space past the readable bytes holds nothing.
        let Some(text_sum) = self
            .recv_buf
            .write_summed_at(self.recv_buf.len(), seg.payload)
        else {
            return SummedInput::Declined;
        };
        if wire::checksum::combine(&[header_sum, text_sum]) != 0xffff {
            return SummedInput::BadChecksum;
        }
        #[cfg(test)]
        {
            PREDICTED_SEGMENTS.with(|n| n.set(n.get() + 1));
            SUMMED_SEGMENTS.with(|n| n.set(n.get() + 1));
        }
        // `handle_segment_gro`'s preamble for it: the segment counter (the port check and
        // the skb hook are done or not needed; the state is ESTABLISHED).
        self.count_hot(1, |k| &mut k.rx_segments);
        self.rx_predicted_taken(now, seg, gro_mss_bytes, true);
        SummedInput::Taken
    }

    /// The short path's changes for a predicted `seg`; `text_written`: its text is already
    /// in the receive buffer past the readable bytes (`handle_segment_summing`), to commit
    /// rather than copy.
    #[inline(always)]
    fn rx_predicted_taken(
        &mut self,
        now: u64,
        seg: &TcpRepr<'_>,
        gro_mss_bytes: u16,
        text_written: bool,
    ) {
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
            if text_written {
                self.commit_in_order(seg.payload.len());
            } else {
                self.accept_in_order(seg.payload);
            }
            self.schedule_ack(now);
        }
    }

    /// `rx_ack` for a predicted segment with text whose ACK is SND.UNA (nothing SACKed, no
    /// SACK block, no ECN): RACK sees no delivery but ends a DSACK round SND.UNA has passed,
    /// and may start recovery on a loss its reordering timer marked; nothing is delivered,
    /// so only the chronographs stop when the send queues are empty; then the window update.
    /// Inlined into both short paths (called from two, a plain `#[inline]` left it out of
    /// line: ~20 instructions per segment).
    #[inline(always)]
    fn rx_ack_nothing_new(&mut self, now: u64, seg: &TcpRepr<'_>) {
        // `held::RACK` first: a connection that never sent data (a receiver) has no
        // RACK state, and the hint spares it `Option<Rack>`'s niche, in a cold line.
        if self.out.held & held::RACK != 0 && self.rack_active() {
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
