//! Segment text (RFC 9293 §3.10.7.4 "seventh, process the segment text" and "eighth, check
//! the FIN bit"): in-order and out-of-order data, duplicates and their D-SACK reports
//! (RFC 2883), the FIN, when to acknowledge, and the receive window we advertise (receiver
//! SWS avoidance, RFC 9293 §3.8.6.2.2).

use super::*;

impl Connection {
    /// Remembers a duplicate range for the next ACK's D-SACK block (RFC 2883 §4), when SACK
    /// was negotiated. Only the latest duplicate is reported.
    pub(super) fn note_dsack(&mut self, left: SeqNumber, right: SeqNumber) {
        if self.opts.sack_ok && left.lt(right) {
            self.owe_dsack(wire::tcp::SackBlock { left, right });
        }
    }

    /// Data above RCV.NXT arrived: the part of `[left, right)` already held out of order is
    /// a duplicate, reported in the next ACK's D-SACK block (RFC 2883 §4, the case of its
    /// example 4.2.2: the block that holds it follows as the second SACK block, being the
    /// range most recently received). The first held range it overlaps is reported.
    fn note_ooo_duplicate(&mut self, left: SeqNumber, right: SeqNumber) {
        let dup = self.ooo.bytes_in(left, right);
        if dup == 0 {
            return;
        }
        self.count_rare(u64::from(dup), |k| &mut k.rx_duplicate_bytes);
        if let Some(r) = self
            .ooo
            .ranges()
            .iter()
            .find(|r| r.left.lt(right) && r.right.gt(left))
        {
            self.note_dsack(r.left.max(left), r.right.min(right));
        }
    }

    /// Segment text and FIN (RFC 9293 §3.10.7.4, seventh and eighth checks). `gro_mss_bytes`:
    /// the wire segments' size when `seg` was coalesced by a receive offload, else 0.
    pub(super) fn rx_text_and_fin(&mut self, now: u64, seg: &TcpRepr<'_>, gro_mss_bytes: u16) {
        let accepts_text = matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        );
        let mut fin = seg.flags.contains(TcpFlags::FIN);
        if !accepts_text {
            // CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT: the peer already sent FIN; ignore text.
            if fin && self.state == State::TimeWait {
                self.set_deadline(
                    Deadline::TimeWait,
                    now.saturating_add(self.config.time_wait_ns),
                );
                self.out.ack_due = AckDue::Now;
            }
            return;
        }
        let mut start = seg.seq_number;
        let mut data = seg.payload;
        // Trim what was already received.
        if start.lt(self.rcv.nxt) {
            let skip = fwd(start, self.rcv.nxt) as usize;
            let dup = skip.min(data.len());
            self.count_rare(dup as u64, |k| &mut k.rx_duplicate_bytes);
            if dup > 0 {
                self.note_dsack(start, start + dup as u32);
            }
            data = data.get(skip..).unwrap_or(&[]);
            if skip > seg.payload.len() {
                // The FIN itself is old too.
                fin = false;
            }
            start = self.rcv.nxt;
        }
        // Trim what lies beyond the advertised window.
        let room = fwd(start, self.rcv.adv) as usize;
        if data.len() > room {
            self.count_rare((data.len() - room) as u64, |k| {
                &mut k.rx_trim_beyond_window_bytes
            });
            data = data.get(..room).unwrap_or(&[]);
            fin = false;
            // RFC 9293 §3.8.6.1: a zero-window probe (or any data beyond the window) is
            // answered with an ACK announcing the current window.
            self.out.ack_due = AckDue::Now;
        }
        if !data.is_empty()
            && self.app.app_closed
            && self.config.reset_on_data_after_close
            && matches!(self.state, State::FinWait1 | State::FinWait2)
        {
            // RFC 1122 §4.2.2.13: new data after CLOSE SHOULD draw a RST, to show it was
            // lost (Linux `tcp_rcv_state_process`, "abort on data"). The RST answers the
            // segment: its sequence number is the segment's acknowledgment (RFC 9293 §3.5.2).
            self.count_rare(data.len() as u64, |k| &mut k.rx_discard_after_close_bytes);
            self.queue_rst(seg.ack_number, None);
            self.enter_closed(CloseReason::Aborted);
            return;
        }
        if !data.is_empty() {
            self.count_text(now, data.len(), gro_mss_bytes);
        }
        if start == self.rcv.nxt {
            if !data.is_empty() {
                let filled_hole = !self.ooo.is_empty();
                self.accept_in_order(data);
                if filled_hole {
                    // RFC 5681 §4.2: ACK immediately when a segment fills (part of) a gap.
                    self.out.ack_due = AckDue::Now;
                } else {
                    self.schedule_ack(now);
                }
            }
        } else if !data.is_empty() {
            self.note_ooo_duplicate(start, start + data.len() as u32);
            let kept = self.accept_out_of_order(start, data);
            if fin && kept {
                // RFC 9293 §3.10.7.4 processes segments in sequence order: the FIN is processed
                // when RCV.NXT reaches it, so it stays with the queued data.
                self.ooo.set_fin(start + data.len() as u32);
                self.note_ooo_box();
            }
            // RFC 5681 §4.2: an out-of-order segment triggers an immediate (duplicate) ACK —
            // one per segment, even when a burst is processed before the next poll, or the
            // sender would never count three duplicates.
            self.out.ack_due = AckDue::Now;
            self.out.dupacks_owed = self
                .out
                .dupacks_owed
                .saturating_add(1)
                .min(DUPACKS_OWED_MAX);
            fin = false;
        } else if fin {
            // A FIN beyond a hole: ACK at once so the sender sees the gap, and remember it
            // (as out-of-order data would be) for when the hole fills.
            if self.keeps_out_of_order() {
                self.ooo.set_fin(start);
                self.note_ooo_box();
            }
            self.out.ack_due = AckDue::Now;
            fin = false;
        }
        if fin && !self.app.fin_received && start + data.len() as u32 == self.rcv.nxt {
            self.rx_fin(now);
        } else if !self.app.fin_received && self.ooo.take_fin_at(self.rcv.nxt) {
            // RCV.NXT reached a FIN that arrived beyond a hole (RFC 9293 §3.10.7.4, eighth).
            self.rx_fin(now);
        }
    }

    /// Text of `len_bytes` (> 0) is taken, in order or not: the largest segment seen (of the
    /// wire segments' size `gro_mss_bytes` when a receive offload coalesced them, else of
    /// this one), the payload counter and `tcp_info`'s data arrival.
    #[inline(always)]
    pub(super) fn count_text(&mut self, now: u64, len_bytes: usize, gro_mss_bytes: u16) {
        let seg_bytes = match gro_mss_bytes {
            0 => len_bytes.min(usize::from(u16::MAX)) as u16,
            mss => mss.min(len_bytes.min(usize::from(u16::MAX)) as u16),
        };
        self.rcv.mss_seen = self.rcv.mss_seen.max(seg_bytes);
        self.count_hot(len_bytes as u32, |k| &mut k.rx_payload_bytes);
        let info = self.info_mut(now);
        info.rx_data_segments = info.rx_data_segments.saturating_add(1);
        info.last_data_rx_ns = now;
        info.ato_started = true;
    }

    /// RCV.NXT += `n` (less than 2^31), counting a pass of its distance from IRS + 1 over a
    /// multiple of 2^32 (`Counters::rcv_nxt_wraps`).
    fn advance_rcv_nxt(&mut self, n: u32) {
        let base = self.rcv.irs + 1;
        let before = self.rcv.nxt.0.wrapping_sub(base.0);
        self.rcv.nxt += n;
        if self.rcv.nxt.0.wrapping_sub(base.0) < before {
            self.rare_counters().rcv_nxt_wraps += 1;
        }
    }

    pub(super) fn accept_in_order(&mut self, data: &[u8]) {
        let n = data.len() as u32;
        if self.app.app_closed {
            // Nobody will read: acknowledge and discard.
            self.count_rare(u64::from(n), |k| &mut k.rx_discard_after_close_bytes);
            self.advance_rcv_nxt(n);
            self.rcv.adv = self.rcv.adv.max(self.rcv.nxt);
            self.ooo.clear();
            return;
        }
        let written = self.recv_buf.write_at(self.recv_buf.len(), data);
        debug_assert_eq!(written, data.len(), "window promised room the buffer lacks");
        self.commit_in_order(written);
    }

    /// In-order text of `written` bytes, already written past the readable bytes of the
    /// receive buffer, is taken: committed, RCV.NXT advanced, out-of-order ranges it made
    /// contiguous pulled in, the reader told. The application has not closed. Inlined into
    /// its callers (`accept_in_order` and the short paths) as its body was before it had two.
    #[inline(always)]
    pub(super) fn commit_in_order(&mut self, written: usize) {
        self.recv_buf.commit_written(written);
        self.advance_rcv_nxt(written as u32);
        self.out.rcv_unacked_bytes = self.out.rcv_unacked_bytes.saturating_add(written as u32);
        // Pull in out-of-order ranges that are now contiguous (already in the ring); a queue
        // without its box holds none (`out.held`: its pointer lies in another line).
        if self.out.held & held::OOO != 0 {
            while let Some(right) = self.ooo.pop_contiguous(self.rcv.nxt) {
                let extra = fwd(self.rcv.nxt, right);
                self.recv_buf.commit(extra as usize);
                self.advance_rcv_nxt(extra);
            }
        }
        self.push_event(Event::Readable);
    }

    /// Whether out-of-order data (and a FIN beyond a hole) is kept at all: not once the
    /// application closed (nobody will read it), not when the queue is configured off.
    pub(super) fn keeps_out_of_order(&self) -> bool {
        !self.app.app_closed && self.config.ooo_segments_max > 0
    }

    /// Whether the out-of-order queue holds a range: its pointer (another line) is read only
    /// once it has its box ([`held::OOO`]).
    #[inline]
    pub(super) fn ooo_holds_ranges(&self) -> bool {
        self.out.held & held::OOO != 0 && !self.ooo.is_empty()
    }

    /// Sets `out.held`'s [`held::OOO`] once the out-of-order queue has its box (after any
    /// call that may make it: an insertion, a FIN).
    fn note_ooo_box(&mut self) {
        if self.ooo.is_allocated() {
            self.out.held |= held::OOO;
        }
    }

    /// Queues an out-of-order segment's bytes; returns whether they were kept.
    pub(super) fn accept_out_of_order(&mut self, start: SeqNumber, data: &[u8]) -> bool {
        if !self.keeps_out_of_order() {
            self.rare_counters().rx_drop_ooo_ranges += 1;
            return false;
        }
        let end = start + data.len() as u32;
        let inserted = self.ooo.insert(
            start,
            end,
            self.config.ooo_bytes_max,
            self.config.ooo_segments_max,
        );
        self.note_ooo_box();
        match inserted {
            Ok(()) => {
                let offset = self.recv_buf.len() + fwd(self.rcv.nxt, start) as usize;
                let written = self.recv_buf.write_at(offset, data);
                debug_assert_eq!(written, data.len(), "out-of-order data outside the window");
                self.rare_counters().rx_ooo_segments += 1;
                true
            }
            Err(crate::ooo::OooReject::TooManyRanges) => {
                self.rare_counters().rx_drop_ooo_ranges += 1;
                false
            }
            Err(crate::ooo::OooReject::TooManyBytes) => {
                self.rare_counters().rx_drop_ooo_bytes += 1;
                false
            }
        }
    }

    /// RFC 5681 §4.2 / RFC 9293 §3.8.6.3: ACK at least every second full-sized segment, and
    /// within `delayed_ack_ns` otherwise; in quick-ACK mode ([`Config::quickack_segments`],
    /// Linux `tcp_in_quickack_mode`) every data segment at once, unless the connection is
    /// interactive (`InfoState::pingpong`: our reply will carry the ACK).
    ///
    /// [`Config::quickack_segments`]: crate::Config::quickack_segments
    #[inline(always)]
    pub(super) fn schedule_ack(&mut self, now: u64) {
        let full = u32::from(self.rcv.mss_seen.max(1));
        let pingpong = self.info.as_ref().is_some_and(|i| i.pingpong);
        if self.out.quickacks_left > 0 && !pingpong {
            self.out.quickacks_left -= 1;
            self.out.ack_due = AckDue::Now;
        } else if self.out.rcv_unacked_bytes >= 2 * full {
            self.out.ack_due = AckDue::Now;
        } else if self.out.ack_due < AckDue::Delayed {
            self.out.ack_due = AckDue::Delayed;
            if self.timers.delack_deadline_ns == NEVER {
                self.set_deadline(
                    Deadline::Delack,
                    now.saturating_add(self.config.delayed_ack_ns),
                );
            }
        }
    }

    pub(super) fn rx_fin(&mut self, now: u64) {
        // RFC 9293 §3.10.7.4 eighth: advance RCV.NXT over the FIN and acknowledge it.
        self.advance_rcv_nxt(1);
        self.rcv.adv = self.rcv.adv.max(self.rcv.nxt);
        self.app.fin_received = true;
        self.ooo.clear();
        self.out.ack_due = AckDue::Now;
        self.push_event(Event::PeerClosed);
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    // Simultaneous close.
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// After the application read data: send a window update only when the read opens the
    /// window meaningfully — the window the peer sees is at most half the largest we can
    /// advertise (`clamp`: the buffer, or 65535 << RCV.WS if smaller), the window we would
    /// now advertise is at least twice it, and the right edge moves by at least
    /// min(clamp/2, MSS). The last is RFC 9293 §3.8.6.2.2's receiver SWS avoidance; the
    /// first two are Linux's `tcp_cleanup_rbuf` rule ("lots" of space freed means at least
    /// twice). A read that does not pass sends nothing: the next ACK carries the larger
    /// window, and a duplicate pure ACK with the same acknowledgment number would only look
    /// like a duplicate ACK to the peer (RFC 5681 §2).
    pub(super) fn maybe_window_update(&mut self) {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            return;
        }
        let shift = self.opts.rcv_wscale;
        let clamp = self.config.recv_buffer_bytes.min(0xffff_u32 << shift);
        let current = fwd(self.rcv.nxt, self.rcv.adv);
        if current > clamp / 2 {
            return;
        }
        // The window `advertise_window` would offer, to its scale granularity.
        let new = (self.recv_window_avail().min(clamp) >> shift) << shift;
        let threshold = (clamp / 2).min(u32::from(self.config.mss_bytes));
        if new >= current.saturating_mul(2) && new.saturating_sub(current) >= threshold {
            self.out.ack_due = AckDue::Now;
        }
    }

    /// Receive space not yet promised: buffer capacity minus what is queued for the reader.
    pub(super) fn recv_window_avail(&self) -> u32 {
        self.config
            .recv_buffer_bytes
            .saturating_sub(self.recv_buf.len() as u32)
    }

    /// The window field to advertise now; moves `rcv.adv` right when receiver-side SWS
    /// avoidance allows (RFC 9293 §3.8.6.2.2), never left.
    pub(super) fn advertise_window(&mut self) -> u16 {
        let avail = self.recv_window_avail();
        let current = fwd(self.rcv.nxt, self.rcv.adv);
        let threshold = (self.config.recv_buffer_bytes / 2).min(u32::from(self.config.mss_bytes));
        let mut wnd = current;
        if avail > current
            && (avail - current >= threshold || avail == self.config.recv_buffer_bytes)
        {
            wnd = avail;
        }
        // Round down to the scale granularity (RFC 7323 §2.4 allows the apparent retraction
        // of less than 2^S; we keep accepting up to `rcv.adv`).
        let field = (wnd >> self.opts.rcv_wscale).min(0xffff);
        let edge = self.rcv.nxt + (field << self.opts.rcv_wscale);
        self.rcv.adv = self.rcv.adv.max(edge);
        field as u16
    }
}
