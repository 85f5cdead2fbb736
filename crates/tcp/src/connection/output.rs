//! Segment departure: `poll_transmit` and the builders behind it — SYN/SYN-ACK with options,
//! data under flow control, congestion control, Nagle and SWS avoidance, retransmissions
//! (fast, RFC 6675 NextSeg, go-back after timeout), window probes, keepalives, pure ACKs.

use wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpRepr, TcpTimestamp};

use super::*;

impl Connection {
    // ------------------------------------------------------------------ rare output owed
    //
    // `out.rare_owed` is tested inline; what it guards is read out of line (`#[cold]`,
    // `#[inline(never)]`): inlined, the compiler may load `out_rare` before the test (the
    // loads are safe to speculate), and a segment would touch its line for nothing.

    /// Owes a RST: `(seq, ack)`, with ACK set when `ack` is `Some`.
    pub(super) fn owe_rst(&mut self, seq: SeqNumber, ack: Option<SeqNumber>) {
        self.out_rare.rst_pending = Some((seq, ack));
        self.out.rare_owed = true;
    }

    /// The RST owed, if any (`out.rare_owed` first: one hot byte when none is).
    #[inline]
    pub(crate) fn rst_pending(&self) -> Option<(SeqNumber, Option<SeqNumber>)> {
        if self.out.rare_owed {
            self.out_rare_rst()
        } else {
            None
        }
    }

    #[cold]
    #[inline(never)]
    fn out_rare_rst(&self) -> Option<(SeqNumber, Option<SeqNumber>)> {
        self.out_rare.rst_pending
    }

    /// The RST owed, if any, owed no more.
    #[inline]
    fn take_rst_pending(&mut self) -> Option<(SeqNumber, Option<SeqNumber>)> {
        if self.out.rare_owed {
            self.take_out_rare_rst()
        } else {
            None
        }
    }

    #[cold]
    #[inline(never)]
    fn take_out_rare_rst(&mut self) -> Option<(SeqNumber, Option<SeqNumber>)> {
        let rst = self.out_rare.rst_pending.take();
        self.out.rare_owed = self.out_rare.dsack.is_some();
        rst
    }

    /// Owes a D-SACK block in the next ACK (only the latest is kept).
    pub(super) fn owe_dsack(&mut self, block: SackBlock) {
        self.out_rare.dsack = Some(block);
        self.out.rare_owed = true;
    }

    /// True when a D-SACK block is owed.
    #[inline]
    pub(super) fn dsack_owed(&self) -> bool {
        self.out.rare_owed && self.out_rare_dsack_owed()
    }

    #[cold]
    #[inline(never)]
    fn out_rare_dsack_owed(&self) -> bool {
        self.out_rare.dsack.is_some()
    }

    /// The D-SACK block owed, if any, owed no more.
    #[inline]
    fn take_dsack(&mut self) -> Option<SackBlock> {
        if self.out.rare_owed {
            self.take_out_rare_dsack()
        } else {
            None
        }
    }

    #[cold]
    #[inline(never)]
    fn take_out_rare_dsack(&mut self) -> Option<SackBlock> {
        let block = self.out_rare.dsack.take();
        self.out.rare_owed = self.out_rare.rst_pending.is_some();
        block
    }

    // ------------------------------------------------------------------ output

    /// The next segment to send, if any. Payload bytes are copied into `payload_buf` and the
    /// returned repr's `payload` is always a prefix of it (`&payload_buf[..n]`), never longer
    /// than the effective MSS nor than `payload_buf`. Call repeatedly until `None` after every
    /// input.
    pub fn poll_transmit<'b>(
        &mut self,
        now: u64,
        payload_buf: &'b mut [u8],
    ) -> Option<TcpRepr<'b>> {
        self.poll_transmit_tso(now, payload_buf, 1)
    }

    /// As [`Connection::poll_transmit`], for a sender whose device segments (TSO/GSO): new
    /// data may leave as one segment of up to `segments_max` times the payload a segment
    /// carries ([`Connection::segment_payload_bytes`] for its header), which the device cuts
    /// into segments of that size. What may leave is decided exactly as for single segments —
    /// congestion window, peer window, Nagle, SWS avoidance, cork — so a large segment is the
    /// run of full segments `poll_transmit` would have returned one by one (plus the short
    /// tail when Nagle would let it follow at once: `nodelay`, or the FIN queued).
    /// Retransmissions, probes and ACKs are never larger than one segment. `segments_max`
    /// of 0 or 1: no TSO.
    ///
    /// On an ECN connection the segment's IP codepoint is [`Connection::transmit_ecn`].
    pub fn poll_transmit_tso<'b>(
        &mut self,
        now: u64,
        payload_buf: &'b mut [u8],
        segments_max: u16,
    ) -> Option<TcpRepr<'b>> {
        if let Some((seq, ack)) = self.take_rst_pending() {
            // Not ECN-capable (a RST with ACK also passes through `fill_options`).
            self.ecn.flags &= !ecn_flag::TX_ECT;
            self.rare_counters().resets_sent += 1;
            self.count_hot(1, |k| &mut k.tx_segments);
            let mut r = self.base_repr(seq);
            r.flags = TcpFlags::RST;
            if let Some(a) = ack {
                r.flags |= TcpFlags::ACK;
                r.ack_number = a;
                // An aborting RST (`abort`). RFC 7323 §3.2: TSopt SHOULD be sent in a RST
                // (`fill_options` adds it only when negotiated).
                self.fill_options(now, &mut r, false);
            }
            return Some(r);
        }
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived if self.snd.nxt == self.snd.iss => {
                return Some(self.syn_segment_with_data(now, payload_buf));
            }
            State::SynSent => return None,
            _ => {}
        }
        if self.state.is_synchronized() {
            if self.rec.rtx_pending {
                self.rec.rtx_pending = false;
                let len = u32::from(self.eff_mss());
                if self.rack_active() {
                    // The fast retransmission under RACK: the first segment it deemed lost.
                    if let Some((seq, len)) = self.rack_next_lost(len) {
                        return self.data_segment(now, seq, len, payload_buf, false);
                    }
                } else if self.snd.una != self.snd.max {
                    return self.data_segment(now, self.snd.una, len, payload_buf, false);
                }
            }
            if self.rec.in_recovery && self.opts.sack_ok {
                let mss = u32::from(self.eff_mss());
                if self.cc.cwnd_bytes().saturating_sub(self.pipe_bytes()) >= mss {
                    // Rule (2), new data, comes before rule (3) (see `send_new_data`).
                    let fin_due = self.app.fin_queued && self.snd.nxt == self.fin_seq();
                    let rule3 = self.unsent_bytes() == 0 && !fin_due;
                    if let Some((seq, len)) = self.sack_next_retransmission(rule3) {
                        return self.data_segment(now, seq, len, payload_buf, false);
                    }
                }
            }
            // Duplicate ACKs must be pure ACKs (RFC 5681 §2), so they go before data.
            if self.out.dupacks_owed > 0 {
                self.out.dupacks_owed -= 1;
                self.count_hot(1, |k| &mut k.pure_acks_sent);
                let seq = self.snd.max;
                return Some(self.ack_repr(now, seq));
            }
            // Probes and forced sends first: they deliberately ignore SWS avoidance.
            if self.out.probe_pending {
                self.out.probe_pending = false;
                if self.unsent_bytes() > 0 {
                    if self.snd.wnd == 0 || self.usable_window() > 0 {
                        return self.probe_segment(now, payload_buf);
                    }
                    self.arm_persist(now);
                }
            }
            if self.rec.tlp_pending {
                self.rec.tlp_pending = false;
                if let Some((seq, len)) = self.tail_loss_probe_range() {
                    return self.data_segment(now, seq, len, payload_buf, false);
                }
            }
        }
        if let Some(r) = self.send_new_data(now, payload_buf, segments_max.max(1)) {
            return Some(r);
        }
        if self.out.keepalive_pending {
            self.out.keepalive_pending = false;
            self.rare_counters().keepalive_probes_sent += 1;
            // RFC 9293 §3.8.4: a probe with SEG.SEQ = SND.NXT − 1 and no data elicits an ACK.
            let r = self.ack_repr(now, self.snd.una - 1);
            return Some(r);
        }
        if self.out.ack_due == AckDue::Now {
            self.count_hot(1, |k| &mut k.pure_acks_sent);
            // A pure ACK carries SND.MAX, not SND.NXT: while retransmitting after a timeout
            // SND.NXT lies behind what the peer already holds, and an ACK with such an old
            // sequence number would fail its acceptability test (the BSD rule).
            let seq = self.snd.max;
            return Some(self.ack_repr(now, seq));
        }
        self.arm_tail_loss_probe(now);
        if self.out.held & held::SKB != 0 {
            self.skb_check_space(now);
        }
        None
    }

    /// RFC 8985 §7.3: the probe is a new segment if the receive window permits one, else a
    /// retransmission of the last segment sent (with the FIN if that was the last): its
    /// sequence number and most payload bytes.
    fn tail_loss_probe_range(&self) -> Option<(SeqNumber, u32)> {
        if self.snd.una == self.snd.max || self.snd.nxt != self.snd.max {
            return None;
        }
        let mss = u32::from(self.eff_mss());
        let rwnd_room = fwd(self.snd.nxt, self.snd.una + self.snd.wnd);
        if self.unsent_bytes() > 0 && rwnd_room > 0 {
            return Some((self.snd.nxt, mss.min(rwnd_room)));
        }
        let fin_sent = self.app.fin_queued && self.snd.max.gt(self.fin_seq());
        let data_end = if fin_sent {
            self.fin_seq()
        } else {
            self.snd.max
        };
        // The most recently sent segment (a FIN alone if that was it), else the last MSS. The
        // segment sent last may start below SND.UNA: a go-back after a timeout cuts the flight
        // anew, and the ACK of the new cut can cover the old segment's first bytes.
        let last = self.rec.tlp_last_seq;
        if !last.lt(self.snd.una) && last.lt(self.snd.max) && !last.gt(data_end) {
            return Some((last, fwd(last, data_end).min(mss)));
        }
        let len = fwd(self.snd.una, data_end).min(mss);
        Some((data_end - len, len))
    }

    pub(super) fn base_repr(&self, seq: SeqNumber) -> TcpRepr<'static> {
        TcpRepr::bare(
            self.local_port,
            self.remote_port,
            seq,
            SeqNumber(0),
            TcpFlags::NONE,
            0,
        )
    }

    /// SYN (active open) or SYN-ACK (passive or simultaneous open), with options.
    pub(super) fn syn_segment(&mut self, now: u64) -> TcpRepr<'static> {
        let mut r = self.base_repr(self.snd.iss);
        r.flags = TcpFlags::SYN;
        r.max_seg_size = Some(self.config.mss_bytes);
        // RFC 7323 §2.2: the window in a SYN is not scaled.
        // Room left after data a Fast Open SYN brought (`fastopen.rs`).
        let room = self
            .config
            .recv_buffer_bytes
            .saturating_sub(self.recv_buf.len() as u32);
        let wnd = room.min(0xffff);
        r.window_len = wnd as u16;
        let passive_reply = self.state == State::SynReceived;
        if passive_reply {
            r.flags |= TcpFlags::ACK;
            r.ack_number = self.rcv.nxt;
            self.ts.last_ack_sent = self.rcv.nxt;
            self.rcv.adv = self.rcv.adv.max(self.rcv.nxt + wnd);
            if self.opts.peer_offered_ws.is_some() {
                r.window_scale = Some(self.opts.rcv_wscale);
            }
            r.sack_permitted = self.opts.sack_ok;
            if self.opts.ts_ok {
                r.timestamp = Some(TcpTimestamp {
                    tsval: self.ts_now(now),
                    tsecr: self.ts.recent,
                });
            }
        } else {
            if self.config.window_scale {
                r.window_scale = Some(self.opts.rcv_wscale);
            }
            r.sack_permitted = self.config.sack;
            if self.config.timestamps {
                r.timestamp = Some(TcpTimestamp {
                    tsval: self.ts_now(now),
                    tsecr: 0,
                });
            }
        }
        if self.ecn.flags != 0 {
            self.ecn_on_transmit(&mut r);
        }
        self.snd.nxt = self.snd.iss + 1;
        self.snd.max = self.snd.max.max(self.snd.nxt);
        if self.timers.syn_retries == 0 {
            self.timers.time_rtt(self.snd.nxt, now);
        }
        if self.timers.rtx_deadline_ns == NEVER {
            self.set_deadline(
                Deadline::Rtx,
                now.saturating_add(self.rtt.rto_ns(self.config.rto_bounds())),
            );
        }
        self.out.ack_due = AckDue::None;
        self.set_deadline(Deadline::Delack, NEVER);
        self.count_hot(1, |k| &mut k.tx_segments);
        r
    }

    /// Options every non-SYN segment carries; returns the bytes of option space used.
    ///
    /// Every segment but a SYN and a bare RST is built through here, so the ECN marks of such
    /// segments are applied here too (`ecn.rs`): ECE while a CE mark is owed, Not-ECT unless
    /// the caller (new data) sets ECT afterwards.
    #[inline]
    pub(super) fn fill_options(&mut self, now: u64, r: &mut TcpRepr<'_>, with_sack: bool) -> u16 {
        if self.ecn.flags != 0 {
            self.ecn_on_transmit(r);
        }
        let mut used = 0u16;
        if self.opts.ts_ok {
            r.timestamp = Some(TcpTimestamp {
                tsval: self.ts_now(now),
                tsecr: self.ts.recent,
            });
            used += TS_OPTION_BYTES;
        }
        if with_sack && self.opts.sack_ok && (self.ooo_holds_ranges() || self.dsack_owed()) {
            // RFC 2018 §3: at most 4 blocks, 3 alongside timestamps (40 bytes of options).
            let max_blocks = if self.opts.ts_ok { 3 } else { 4 };
            let mut n = 0;
            // RFC 2883 §4: a D-SACK block goes first, and is reported once.
            if let Some(d) = self.take_dsack() {
                r.sack_blocks[0] = Some(d);
                n = 1;
            }
            n += self.ooo.sack_blocks(&mut r.sack_blocks[n..max_blocks]);
            if n > 0 {
                used += (2 + 8 * n as u16).next_multiple_of(4);
            }
        }
        used
    }

    /// A segment without data: ACK with the current window (also window/keepalive probes).
    pub(super) fn ack_repr(&mut self, now: u64, seq: SeqNumber) -> TcpRepr<'static> {
        let mut r = self.base_repr(seq);
        r.flags = TcpFlags::ACK;
        r.ack_number = self.rcv.nxt;
        r.window_len = self.advertise_window();
        self.fill_options(now, &mut r, true);
        self.on_ack_sent();
        self.count_hot(1, |k| &mut k.tx_segments);
        r
    }

    pub(super) fn on_ack_sent(&mut self) {
        self.out.ack_due = AckDue::None;
        self.set_deadline(Deadline::Delack, NEVER);
        self.out.rcv_unacked_bytes = 0;
        self.ts.last_ack_sent = self.rcv.nxt;
    }

    /// Builds a segment carrying up to `max_len` bytes starting at `seq` (and the FIN if it
    /// follows them). `probe` marks a window probe, which must not arm the retransmission
    /// timer nor advance SND.NXT.
    pub(super) fn data_segment<'b>(
        &mut self,
        now: u64,
        seq: SeqNumber,
        max_len: u32,
        buf: &'b mut [u8],
        probe: bool,
    ) -> Option<TcpRepr<'b>> {
        self.data_segment_tso(now, seq, max_len, buf, probe, 1)
    }

    /// [`Connection::data_segment`] with room for up to `segments` segments' payload (TSO).
    pub(super) fn data_segment_tso<'b>(
        &mut self,
        now: u64,
        seq: SeqNumber,
        max_len: u32,
        buf: &'b mut [u8],
        probe: bool,
        segments: u16,
    ) -> Option<TcpRepr<'b>> {
        let offset = fwd(self.snd.buf_seq, seq) as usize;
        let avail = self.send_buf.len().saturating_sub(offset);
        let mut r = self.base_repr(seq);
        r.flags = TcpFlags::ACK;
        r.ack_number = self.rcv.nxt;
        r.window_len = self.advertise_window();
        let opts = self.fill_options(now, &mut r, true);
        let seg_room = self.opts.snd_mss.saturating_sub(opts).max(1) as usize;
        let room = seg_room * usize::from(segments.max(1));
        let mut max_len = max_len;
        if let Some(info) = self.info.as_mut()
            && let Some(end) = info.syn_data_end()
        {
            if !self.snd.una.lt(end) {
                info.set_syn_data_end(None);
            } else if seq.lt(end) {
                max_len = max_len.min(fwd(seq, end));
            }
        }
        let mut len = avail.min(max_len as usize).min(room).min(buf.len());
        // Never past the end of a record (`records.rs`): first transmission or not.
        let mut record_end = false;
        if self.records.is_some() {
            (len, record_end) = self.clip_to_record(seq, len);
        }
        let fin = self.app.fin_queued && offset + len == self.send_buf.len() && !probe;
        if len == 0 && !fin {
            return None;
        }
        let n = self
            .send_buf
            .read_at(offset, buf.get_mut(..len).unwrap_or(&mut []));
        if fin {
            r.flags |= TcpFlags::FIN;
        }
        // A `send_more` tail leaves without PSH (Linux marks PSH only without MSG_MORE); a
        // record's last segment carries it (Linux pushes at the end of each write, and a
        // record's last bytes are never joined by later ones).
        if n > 0 && ((offset + n == self.send_buf.len() && !self.app.more) || record_end) {
            r.flags |= TcpFlags::PSH;
        }
        let end = seq + n as u32 + u32::from(fin);
        let is_rtx = seq.lt(self.snd.max);
        if !is_rtx && !probe && n > 0 && self.out.held & held::SKB != 0 && seq == self.snd.nxt {
            self.skb_on_send(n as u32);
        }
        if self.rack_active() {
            // RFC 8985 §6.1: every transmission's time, per segment.
            let merges = self.rack_state(now).on_send(seq, end, now);
            self.count_rare(u64::from(merges), |k| &mut k.rack_records_merged);
        }
        if is_rtx {
            if self.rec.in_recovery && end.gt(self.rec.high_rxt) {
                self.rec.high_rxt = end;
            }
            self.rare_counters().retransmitted_segments += 1;
            self.ts.rtx_floor = self.ts_now(now);
            self.count_rare(n as u64, |k| &mut k.retransmitted_bytes);
            // Karn: a retransmission makes any running RTT measurement ambiguous.
            self.timers.clear_rtt_timed();
        } else if self.timers.rtt_timed().is_none() && !self.opts.ts_ok {
            self.timers.time_rtt(end, now);
        }
        if self.snd.una == self.snd.max {
            self.timers.unacked_since_ns = now;
        }
        if !probe {
            if end.gt(self.snd.nxt) {
                self.snd.nxt = end;
            }
            self.arm_rtx_after_send(now);
        }
        if !probe && end.gt(self.snd.max) {
            self.note_flight(end);
            // Linux `tcp_minshall_update`: new data whose last wire segment is short.
            if n % seg_room != 0 {
                self.snd_sml = end;
            }
        }
        if self.rec.in_recovery || self.ecn_in_cwr() {
            self.rec.prr_out_bytes = self
                .rec
                .prr_out_bytes
                .saturating_add(end.diff(seq).max(0) as u32);
        }
        if n > 0 && !is_rtx && !probe && self.ecn_ok() {
            // RFC 3168 §6.1.5/§6.1.6: only new data is ECN-capable.
            self.ecn_on_new_data(&mut r);
        }
        if end.gt(self.snd.max) {
            // RFC 8985 §7.2: a new transmission reschedules the probe timeout (rearmed once
            // `poll_transmit` runs dry).
            self.rec.tlp_last_seq = seq.max(self.snd.max);
            self.set_deadline(Deadline::Tlp, NEVER);
            self.snd.max = end;
        }
        self.on_ack_sent();
        self.timers.last_tx_ns = now;
        // A TSO segment counts as the wire segments the device cuts it into.
        self.count_hot(n.div_ceil(seg_room).max(1) as u32, |k| &mut k.tx_segments);
        if n > 0 {
            let quickack = self.config.quickack_segments > 0;
            let ato_ns = self.config.delayed_ack_ns;
            let info = self.info_mut(now);
            info.tx_data_segments += n.div_ceil(seg_room) as u64;
            // Linux `tcp_event_data_sent`: a reply within the ATO of the last data received
            // enters interactive mode.
            if quickack && info.ato_started && now.saturating_sub(info.last_data_rx_ns) < ato_ns {
                info.pingpong = true;
            }
        }
        self.count_hot(n as u32, |k| &mut k.tx_payload_bytes);
        let (filled, _) = buf.split_at(n);
        r.payload = filled;
        Some(r)
    }

    /// Records the flight after new data up to `end` left (Linux `tcp_cwnd_validate`): a new
    /// round trip, a larger flight, or a full cwnd starts a new record.
    pub(super) fn note_flight(&mut self, end: SeqNumber) {
        let flight = fwd(self.snd.una, end);
        let mss = u32::from(self.eff_mss());
        let limited = flight.saturating_add(mss) > self.cc.cwnd_bytes();
        if !self.snd.una.lt(self.rec.flight_max_seq)
            || flight > self.rec.flight_max_bytes
            || limited
        {
            self.rec.flight_max_bytes = flight;
            self.rec.flight_max_seq = end;
            self.rec.cwnd_limited = limited;
        }
    }

    /// A short segment of new data is unacknowledged (Linux `tcp_minshall_check`): the last
    /// one sent ends in (SND.UNA, SND.NXT]. After a timeout pulls SND.NXT back below it, it
    /// is not counted until sent again.
    fn short_segment_unacked(&self) -> bool {
        self.snd_sml.gt(self.snd.una) && !self.snd_sml.gt(self.snd.nxt)
    }

    /// Bytes in the send buffer not yet sent (beyond SND.NXT).
    pub(super) fn unsent_bytes(&self) -> usize {
        if self.snd.nxt.lt(self.snd.buf_seq) {
            return self.send_buf.len();
        }
        self.send_buf
            .len()
            .saturating_sub(fwd(self.snd.buf_seq, self.snd.nxt) as usize)
    }

    /// How many new bytes congestion and flow control allow now.
    pub(super) fn usable_window(&self) -> u32 {
        // A Fast Open child sends before its SYN is acknowledged: the SYN is not data in
        // flight, and the window the peer's SYN offered starts after it (it could not
        // acknowledge anything yet). Elsewhere `buf_seq` ≤ SND.UNA and this is SND.UNA.
        let una = self.snd.una.max(self.snd.buf_seq);
        let flight = fwd(una, self.snd.nxt);
        let mss = u32::from(self.eff_mss());
        // RFC 3042: the first two duplicate ACKs each allow one new segment beyond cwnd.
        let lt = if !self.rec.in_recovery && self.rec.dupacks > 0 && self.rec.dupacks < 3 {
            u32::from(self.rec.dupacks) * mss
        } else {
            0
        };
        let in_flight = if self.rec.in_recovery && self.opts.sack_ok {
            self.pipe_bytes()
        } else {
            flight
        };
        let cwnd_avail = self
            .cc
            .cwnd_bytes()
            .saturating_add(lt)
            .saturating_sub(in_flight);
        let wnd_avail = fwd(self.snd.nxt, una + self.snd.wnd);
        cwnd_avail.min(wnd_avail)
    }

    /// Whether the next segment of `unsent` bytes waits for the peer's window alone: the
    /// congestion window would let it go (Linux `tcp_write_xmit`'s `is_rwnd_limited`, the
    /// window test coming after the congestion window's).
    pub(super) fn rwnd_limited(&self, unsent: u32) -> bool {
        if unsent == 0 {
            return false;
        }
        let need = unsent.min(u32::from(self.eff_mss()));
        let una = self.snd.una.max(self.snd.buf_seq);
        let wnd_avail = fwd(self.snd.nxt, una + self.snd.wnd);
        wnd_avail < need && self.usable_window_ignoring_peer() >= need
    }

    /// [`Connection::usable_window`] as if the peer's window were unlimited.
    fn usable_window_ignoring_peer(&self) -> u32 {
        let una = self.snd.una.max(self.snd.buf_seq);
        let flight = if self.rec.in_recovery && self.opts.sack_ok {
            self.pipe_bytes()
        } else {
            fwd(una, self.snd.nxt)
        };
        self.cc.cwnd_bytes().saturating_sub(flight)
    }

    /// New data (or the FIN) under flow control, congestion control, Nagle and SWS avoidance.
    pub(super) fn send_new_data<'b>(
        &mut self,
        now: u64,
        buf: &'b mut [u8],
        segments_max: u16,
    ) -> Option<TcpRepr<'b>> {
        if !matches!(
            self.state,
            State::Established
                | State::SynReceived
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) || (self.state == State::SynReceived && self.out.fast_open != FastOpenRole::Child)
        {
            return None;
        }
        let offset = fwd(self.snd.buf_seq, self.snd.nxt) as usize;
        if self.snd.nxt.lt(self.snd.buf_seq) {
            return None;
        }
        let mut unsent = self.send_buf.len().saturating_sub(offset) as u32;
        // A record end ahead (`records.rs`) cuts what may leave as one run; a run that ends a
        // record with more data behind it is no tail: Nagle and cork hold only the last run
        // (Linux applies them to the last skb of the write queue alone).
        let mut last_run = true;
        if self.records.is_some() {
            (unsent, last_run) = self.record_run(unsent);
        }
        let rwnd_limited = self.rwnd_limited(unsent);
        self.chrono_on_output(now, rwnd_limited, unsent);
        let fin_due = self.app.fin_queued && self.snd.nxt == self.fin_seq();
        if unsent == 0 {
            self.app.push_pending = false;
            if !fin_due {
                return None;
            }
        }
        let flight = fwd(self.snd.una, self.snd.nxt);
        if self.config.restart_after_idle
            && flight == 0
            && self.snd.wnd > 0
            && now.saturating_sub(self.timers.last_tx_ns)
                > self.rtt.rto_ns(self.config.rto_bounds())
        {
            // RFC 5681 §4.1: after an idle period longer than the RTO, restart from
            // RW = min(IW, cwnd) "before beginning transmission": not while the peer's window
            // is closed and nothing can begin (a zero-window probe is no transmission the
            // window governs), but once it opens, as Linux checks on the window update
            // (`tcp_ack_update_window` → `tcp_slow_start_after_idle_check`).
            let iw = u32::from(self.config.initial_window_segments)
                .saturating_mul(u32::from(self.eff_mss()));
            self.cc.restart_after_idle(iw);
        }
        let usable = self.usable_window();
        let mss = u32::from(self.eff_mss());
        // Nagle and cork, as below: a short tail may leave now only when nothing may be in
        // flight before it or it is being pushed.
        let held = (self.app.cork || self.app.more)
            && !self.app.push_pending
            && !self.app.fin_queued
            && last_run;
        // Fast Open SYN data the SYN-ACK did not acknowledge is sent again, not new data: no
        // Nagle hold for its short tail (Linux retransmits the SYN's data buffer whole).
        let resends_syn_data = self
            .info
            .as_ref()
            .and_then(|i| i.syn_data_end())
            .is_some_and(|end| self.snd.nxt.lt(end));
        // Minshall's Nagle (`Config::nagle_minshall`): a short tail waits only behind an
        // unacknowledged short segment, not behind full ones (nor for the rest of a write
        // that did not fit, `send_cut`).
        let minshall_ok =
            self.config.nagle_minshall && !self.send_cut && !self.short_segment_unacked();
        if segments_max > 1 {
            let big = unsent
                .min(usable)
                .min(mss.saturating_mul(u32::from(segments_max)));
            if big > mss {
                // The full segments the per-segment rules would send one after another; the
                // tail joins them when it would follow at once (flight > 0 after them, so
                // only `nodelay` or a queued FIN lets it go).
                let tail_ok = big == unsent
                    && !held
                    && (self.config.nodelay
                        || self.app.fin_queued
                        || !last_run
                        || resends_syn_data
                        || minshall_ok);
                let len = if tail_ok { big } else { big - big % mss };
                return self.data_segment_tso(now, self.snd.nxt, len, buf, false, segments_max);
            }
        }
        let len = unsent.min(usable).min(mss);
        if unsent > 0 {
            // Nagle (RFC 9293 §3.7.4) and sender SWS avoidance (RFC 9293 §3.8.6.2.1): send a
            // full segment, or everything left when nothing is in flight (or Nagle is off, or
            // we are closing), or at least half the largest window the peer offered.
            // A Fast Open child's unacknowledged SYN is no data in flight (`fastopen.rs`).
            let data_flight = fwd(self.snd.una.max(self.snd.buf_seq), self.snd.nxt);
            let nagle_ok = self.config.nodelay
                || data_flight == 0
                || self.app.fin_queued
                || !last_run
                || resends_syn_data
                || minshall_ok;
            // TCP_CORK / MSG_MORE (Linux tcp(7)): only full segments until pushed (`held`).
            let send = len > 0
                && (len == mss
                    || (!held && len == unsent && nagle_ok)
                    || (!held && nagle_ok && self.snd.max_wnd > 0 && len >= self.snd.max_wnd / 2));
            if !send {
                if flight == 0 && self.timers.rtx_deadline_ns == NEVER {
                    // Nothing in flight will bring an ACK: the persist timer breaks the wait
                    // (zero window probe, or SWS override, RFC 9293 §3.8.6.1/§3.8.6.2.1).
                    self.arm_persist(now);
                }
                return None;
            }
        }
        self.data_segment(now, self.snd.nxt, len, buf, false)
    }

    /// Persist timer expiry: probe a zero window with one byte, or override SWS avoidance.
    pub(super) fn probe_segment<'b>(&mut self, now: u64, buf: &'b mut [u8]) -> Option<TcpRepr<'b>> {
        if self.snd.wnd == 0 {
            // RFC 9293 §3.8.6.1: "The sending TCP peer must regularly transmit at least one
            // octet of new data (if available)". The probe byte sits at SND.UNA; if the peer
            // accepts it, its ACK moves SND.NXT past it.
            self.rare_counters().window_probes_sent += 1;
            self.timers.persist_shift = self.timers.persist_shift.saturating_add(1).min(16);
            let una = self.snd.una;
            if !self.config.zero_window_probe_carries_data {
                // An old sequence number elicits an ACK (RFC 9293 §3.10.7.4) without data.
                let r = self.ack_repr(now, una - 1);
                self.arm_persist(now);
                return Some(r);
            }
            let r = self.data_segment(now, una, 1, buf, true);
            self.arm_persist(now);
            return r;
        }
        // SWS override: send what the window allows.
        let len = self.usable_window().min(u32::from(self.eff_mss()));
        if len == 0 {
            self.arm_persist(now);
            return None;
        }
        self.data_segment(now, self.snd.nxt, len, buf, false)
    }
}
