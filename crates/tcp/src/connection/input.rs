//! Segment arrival (RFC 9293 §3.10.7): SYN-SENT processing, PAWS, the acceptability test,
//! RST/SYN/ACK checks with RFC 5961 challenge ACKs, the ACK field (window update, RTT,
//! congestion control, fast retransmit, SACK scoreboard); the segment text and FIN are in
//! `receive.rs`.

use wire::Ecn;
use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

use super::chrono::REORDERING_INITIAL_SEGMENTS;
use super::*;
use crate::config::{CongestionControl, NS_PER_MS};

impl Connection {
    // ------------------------------------------------------------------ input

    /// Processes one received segment (already demultiplexed to this connection, checksum
    /// verified by the stack).
    #[inline]
    pub fn handle_segment(&mut self, now: u64, seg: &TcpRepr<'_>) {
        self.handle_segment_gro(now, seg, 0);
    }

    /// [`Connection::handle_segment`] for a segment a receive offload (GRO/LRO) coalesced
    /// from wire segments of `gro_mss_bytes` each (0: `seg` is one wire segment): the size
    /// of the peer's segments, not of the coalesced one, is what the receiver measures
    /// (`tcp_info`'s `rcv_mss`, the "full-sized segment" of the delayed-ACK rule; Linux
    /// `tcp_measure_rcv_mss` reads `gso_size`).
    /// A segment given this way carries no ECN codepoint (Not-ECT); see
    /// [`Connection::handle_segment_ecn`].
    pub fn handle_segment_gro(&mut self, now: u64, seg: &TcpRepr<'_>, gro_mss_bytes: u16) {
        self.count_hot(1, |k| &mut k.rx_segments);
        if seg.dst_port != self.local_port || seg.src_port != self.remote_port {
            self.rare_counters().rx_drop_wrong_port += 1;
            return;
        }
        if self.out.held & held::SKB != 0 {
            self.skb_on_input();
        }
        match self.state {
            State::Closed => {
                self.rare_counters().rx_drop_closed += 1;
            }
            State::SynSent => self.rx_syn_sent(now, seg),
            _ => {
                // Header prediction (`predict.rs`) first; the full path when it declines.
                if !self.rx_predicted(now, seg, gro_mss_bytes) {
                    self.rx_synchronized(now, seg, gro_mss_bytes);
                }
            }
        }
    }

    /// [`Connection::handle_segment_gro`] for a segment whose IP header carried the ECN
    /// codepoint `ecn` (RFC 3168 §5): on an ECN connection a CE mark on data is echoed to
    /// the peer (`ecn.rs`); elsewhere the codepoint is ignored.
    #[inline]
    pub fn handle_segment_ecn(
        &mut self,
        now: u64,
        seg: &TcpRepr<'_>,
        gro_mss_bytes: u16,
        ecn: Ecn,
    ) {
        if self.ecn.flags != 0 {
            self.ecn.rx = ecn;
        }
        self.handle_segment_gro(now, seg, gro_mss_bytes);
        if self.ecn.flags != 0 {
            self.ecn.rx = Ecn::NotEct;
        }
    }

    /// RFC 9293 §3.10.7.3, SYN-SENT.
    pub(super) fn rx_syn_sent(&mut self, now: u64, seg: &TcpRepr<'_>) {
        let flags = seg.flags;
        let has_ack = flags.contains(TcpFlags::ACK);
        if has_ack {
            // "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset (unless the RST bit is set)".
            if seg.ack_number.le(self.snd.iss) || seg.ack_number.gt(self.snd.max) {
                self.rare_counters().rx_drop_bad_ack += 1;
                if !flags.contains(TcpFlags::RST) {
                    self.queue_rst(seg.ack_number, None);
                }
                return;
            }
        }
        if flags.contains(TcpFlags::RST) {
            // RFC 5961 §3.2 / RFC 9293: in SYN-SENT a RST is acceptable if it ACKs our SYN.
            if has_ack {
                self.enter_closed(CloseReason::Reset);
            } else {
                self.rare_counters().rx_drop_syn_sent += 1;
            }
            return;
        }
        if !flags.contains(TcpFlags::SYN) {
            self.rare_counters().rx_drop_syn_sent += 1;
            return;
        }
        if has_ack && self.config.syn_ack_checks_ts_echo && self.syn_ack_echo_impossible(now, seg) {
            self.rare_counters().rx_drop_syn_ack_bad_echo += 1;
            self.queue_rst(seg.ack_number, None);
            return;
        }
        self.rcv.irs = seg.seq_number;
        self.rcv.nxt = seg.seq_number + 1;
        // Our SYN offered an unscaled window (RFC 7323 §2.2); the peer may use it.
        self.rcv.adv = self.rcv.nxt + self.config.recv_buffer_bytes.min(0xffff);
        self.ts.last_ack_sent = self.rcv.nxt;
        self.negotiate_from_syn(now, seg, false);
        self.snd.wnd = u32::from(seg.window_len);
        self.snd.max_wnd = self.snd.wnd;
        self.snd.wl1 = seg.seq_number;
        if has_ack {
            let ack = seg.ack_number;
            // Fast Open (RFC 7413 §4.2.2): the SYN-ACK acknowledges all, part or none of the
            // data our SYN carried; the acknowledged bytes leave the send buffer.
            let data_acked = fwd(self.snd.buf_seq, ack).min(self.send_buf.len() as u32);
            let syn_fully_acked = !ack.lt(self.snd.max);
            if !syn_fully_acked && self.snd.max.gt(self.snd.iss + 1) {
                let syn_end = self.snd.max;
                self.info_mut(now).set_syn_data_end(Some(syn_end));
            }
            self.send_buf.consume(data_acked as usize);
            self.snd.buf_seq += data_acked;
            if syn_fully_acked && !self.send_buf.is_empty() {
                // A write waits for the connection (Linux `sk_write_pending`): the delayed-ACK
                // engine starts here, so the write's data sent now makes the connection
                // interactive (`InfoState::pingpong`).
                self.info_mut(now).ato_started = true;
            }
            // A pass of SND.UNA's distance from ISS + 1 over 2^32 (not the ACK of our SYN,
            // from ISS itself).
            let base = (self.snd.iss + 1).0;
            if self.snd.una != self.snd.iss
                && ack.0.wrapping_sub(base) < self.snd.una.0.wrapping_sub(base)
            {
                self.rare_counters().snd_una_wraps += 1;
            }
            self.snd.una = ack;
            // SND.NXT goes to the acknowledgment: a SYN retransmission owed (the RTO rewound
            // SND.NXT to ISS) is moot now, and SYN data the peer did not acknowledge is sent
            // again at once, as ordinary data (`fastopen.rs`).
            self.snd.nxt = ack;
            self.snd.wl2 = ack;
            self.on_syn_acked(now);
            self.ecn_on_syn_ack(seg);
            if !syn_fully_acked && self.rack_active() {
                // SYN data the SYN-ACK left unacknowledged is in flight like any data sent:
                // RACK records it (sent with the SYN; `now`, the latest it can have been
                // sent, until it is sent again at once), so sending it again is a
                // retransmission there too (`tcpi_retrans`: Linux marks it lost and
                // retransmits it, `tcp_rcv_fastopen_synack`).
                let syn_end = self.snd.max;
                self.rack_state(now).on_send(ack, syn_end, now);
            }
            self.state = State::Established;
            self.push_event(Event::Connected);
            if self.send_buf.free() > 0 {
                self.push_event(Event::Writable);
            }
            // "form an ACK segment ... and send it" (data is deferred to the next segment).
            self.out.ack_due = AckDue::Now;
            self.start_keepalive(now);
            if self.app.fin_queued {
                self.state = State::FinWait1;
            }
            // "If there are other controls or text in the segment, then continue processing
            // at the sixth step" (RFC 9293 §3.10.7.3): data and a FIN the SYN-ACK carries
            // (a Fast Open server may send data with it, RFC 7413 §4.2) are taken as in any
            // later segment; they start after the SYN's sequence number.
            if !seg.payload.is_empty() || flags.contains(TcpFlags::FIN) {
                let text = TcpRepr {
                    seq_number: seg.seq_number + 1,
                    ..*seg
                };
                self.rx_text_and_fin(now, &text, 0);
            }
        } else {
            // Simultaneous open: "enter SYN-RECEIVED, form a SYN,ACK segment and send it".
            // No ECN: neither SYN-ACK will be an answer to an ECN-setup SYN.
            self.ecn.flags &= !ecn_flag::REQUESTED;
            self.state = State::SynReceived;
            self.snd.nxt = self.snd.iss;
            self.snd.wl2 = self.snd.iss;
            self.set_deadline(Deadline::Rtx, NEVER);
        }
    }

    /// A SYN-ACK's timestamp echo (non-zero, our SYN having offered timestamps) lies outside
    /// what our clock showed from the connection's opening to `now` (Linux's `between(tsecr,
    /// retrans_stamp, now)`); `ts.rtx_floor` holds the clock at the opening until data is
    /// retransmitted, which cannot happen before the SYN-ACK.
    fn syn_ack_echo_impossible(&self, now: u64, seg: &TcpRepr<'_>) -> bool {
        let Some(ts) = seg.timestamp.filter(|t| t.tsecr != 0) else {
            return false;
        };
        if !self.config.timestamps {
            return false;
        }
        let (first, last) = (self.ts.rtx_floor, self.ts_now(now));
        ts.tsecr.wrapping_sub(first) > last.wrapping_sub(first)
    }

    /// The SYN we sent has been acknowledged: take the first RTT sample of the connection.
    pub(super) fn on_syn_acked(&mut self, now: u64) {
        // Linux `tcp_init_buffer_space`: the send buffer is sized for the initial window.
        self.skb_autotune();
        self.set_deadline(Deadline::Rtx, NEVER);
        self.timers.last_tx_ns = now;
        // Linux counts the SYN's delivery and starts `tcpi_last_data_recv` here.
        let info = self.info_mut(now);
        info.delivered_segments += 1;
        info.last_data_rx_ns = now;
        if self.timers.syn_retries == 0 {
            if let Some((_, sent_ns)) = self.timers.take_rtt_timed() {
                self.rtt_sample(now, now.saturating_sub(sent_ns));
            }
        } else {
            // Karn: the SYN was retransmitted, no sample. RFC 6298 §5.7: "the RTO MUST be
            // re-initialized to 3 seconds when data transmission begins" if it is below that.
            self.timers.clear_rtt_timed();
            self.rtt.backoff_shift = 0;
            if self.rtt.base_rto_ns() < RTO_AFTER_SYN_TIMEOUT_NS {
                let bounds = self.config.rto_bounds();
                self.rtt
                    .set_base_rto_ns(RTO_AFTER_SYN_TIMEOUT_NS.min(bounds.max_ns), bounds);
            }
        }
    }

    pub(super) fn rx_synchronized(&mut self, now: u64, seg: &TcpRepr<'_>, gro_mss_bytes: u16) {
        if self.state == State::SynReceived
            && seg.flags.contains(TcpFlags::SYN | TcpFlags::ACK)
            && seg.seq_number == self.rcv.irs
            && self.snd.una.lt(seg.ack_number)
            && seg.ack_number.le(self.snd.max)
        {
            // Simultaneous open (RFC 9293 §3.5, figure 7): the peer's SYN-ACK repeats the SYN
            // that brought us here. Trim that duplicate SYN (as §3.10.7.4 trims duplicate
            // octets) and process the rest, whose ACK completes our handshake.
            let trimmed = TcpRepr {
                seq_number: seg.seq_number + 1,
                flags: TcpFlags(seg.flags.0 & !TcpFlags::SYN.0),
                ..*seg
            };
            self.rx_synchronized_inner(now, &trimmed, gro_mss_bytes);
            if self.opts.sack_ok && self.state != State::Closed {
                // RFC 2883 §4: the duplicate SYN is reported in a D-SACK block, in an ACK sent
                // for it (Linux `tcp_send_dupack`; `fastopen/client/simultaneous-fast-open`).
                self.note_dsack(seg.seq_number, seg.seq_number + 1);
                self.out.ack_due = AckDue::Now;
            }
            return;
        }
        self.rx_synchronized_inner(now, seg, gro_mss_bytes)
    }

    pub(super) fn rx_synchronized_inner(
        &mut self,
        now: u64,
        seg: &TcpRepr<'_>,
        gro_mss_bytes: u16,
    ) {
        let flags = seg.flags;
        let rst = flags.contains(TcpFlags::RST);
        // RFC 7323 §3.2: once negotiated, a non-RST segment without TSopt SHOULD be dropped
        // (unless configured to accept it, as Linux does).
        if self.opts.ts_ok
            && !rst
            && seg.timestamp.is_none()
            && self.state != State::SynReceived
            && !self.config.accept_missing_timestamps
        {
            self.rare_counters().rx_drop_missing_ts += 1;
            return;
        }
        // RFC 7323 §5.3 R1 (PAWS), before the acceptability test.
        if self.opts.ts_ok && !rst {
            if let Some(ts) = seg.timestamp {
                if ts_lt(ts.tsval, self.ts.recent) {
                    // RFC 7323 §5.5: after 24 days idle TS.Recent is invalid; accept.
                    if now.saturating_sub(self.ts.recent_age_ns) > PAWS_IDLE_NS {
                        self.ts.recent = ts.tsval;
                        self.ts.recent_age_ns = now;
                    } else {
                        self.rare_counters().rx_drop_paws += 1;
                        self.ack_unacceptable(now, seg);
                        return;
                    }
                }
            }
        }
        let seg_len = seq_len(seg);
        // For the acceptability test a SYN we already hold counts, so use the full length.
        if !self.acceptable(seg.seq_number, seg_len) {
            self.rare_counters().rx_drop_out_of_window += 1;
            if rst {
                self.rare_counters().rx_drop_rst_out_of_window += 1;
                return;
            }
            if self.state == State::SynReceived
                && flags.contains(TcpFlags::SYN)
                && seg.seq_number == self.rcv.irs
            {
                // The peer retransmitted its SYN: our SYN-ACK was lost, send it again.
                self.snd.nxt = self.snd.iss;
                return;
            }
            if self.state == State::TimeWait && flags.contains(TcpFlags::FIN) {
                // RFC 9293 §3.10.7.4: a retransmitted FIN restarts the 2 MSL timeout.
                self.set_deadline(
                    Deadline::TimeWait,
                    now.saturating_add(self.config.time_wait_ns),
                );
            }
            // "If an incoming segment is not acceptable, an acknowledgment should be sent".
            self.ack_unacceptable(now, seg);
            if !seg.payload.is_empty()
                && (seg.seq_number + seg.payload.len() as u32).le(self.rcv.nxt)
            {
                // RFC 2883 §4: report the duplicate in a D-SACK block.
                self.note_dsack(seg.seq_number, seg.seq_number + seg.payload.len() as u32);
            }
            return;
        }
        // Second: RST (RFC 5961 §3.2).
        if rst {
            if self.state == State::TimeWait {
                // RFC 1337: ignore RST in TIME-WAIT to avoid assassination.
                self.rare_counters().rx_drop_rst_time_wait += 1;
                return;
            }
            if seg.seq_number == self.rcv.nxt {
                // Exact match: reset.
                self.enter_closed(CloseReason::Reset);
            } else {
                // In window but not exact: challenge ACK.
                self.challenge_ack(now);
            }
            return;
        }
        // Fourth: SYN (RFC 5961 §4.2): any SYN on a synchronized (or SYN-RECEIVED)
        // connection gets a challenge ACK, whatever its sequence number.
        if flags.contains(TcpFlags::SYN) {
            self.rare_counters().rx_drop_syn_in_window += 1;
            self.challenge_ack(now);
            return;
        }
        // Fifth: ACK.
        if !flags.contains(TcpFlags::ACK) {
            self.rare_counters().rx_drop_no_ack += 1;
            return;
        }
        let ack = seg.ack_number;
        if self.state == State::SynReceived {
            // RFC 9293 §3.10.7.4: "If SND.UNA < SEG.ACK =< SND.NXT, then enter ESTABLISHED".
            if self.snd.una.lt(ack) && ack.le(self.snd.max) {
                // The SYN is acknowledged here; data a Fast Open child sent in SYN-RECEIVED
                // is acknowledged by the ACK processing below.
                self.snd.una = self.snd.iss + 1;
                // A SYN-ACK retransmission owed (a duplicate SYN or the RTO rewound SND.NXT to
                // ISS) is moot now; SND.NXT never stays behind SND.UNA (seed 1005021: it did,
                // and the reply and FIN never left).
                self.snd.nxt = self.snd.nxt.max(ack);
                self.state = State::Established;
                self.push_event(Event::Connected);
                if self.send_buf.free() > 0 {
                    self.push_event(Event::Writable);
                }
                self.snd.wnd = u32::from(seg.window_len) << self.opts.snd_wscale;
                self.snd.max_wnd = self.snd.max_wnd.max(self.snd.wnd);
                self.snd.wl1 = seg.seq_number;
                self.snd.wl2 = ack;
                self.on_syn_acked(now);
                self.start_keepalive(now);
                if self.app.fin_queued {
                    self.state = State::FinWait1;
                }
            } else {
                // "If the segment acknowledgment is not acceptable, form a reset segment".
                self.rare_counters().rx_drop_bad_ack += 1;
                self.queue_rst(ack, None);
                return;
            }
        }
        // RFC 5961 §5.2: acceptable iff SND.UNA − MAX.SND.WND ≤ SEG.ACK ≤ SND.NXT.
        if ack.gt(self.snd.max) {
            self.rare_counters().rx_drop_ack_unsent += 1;
            if self.config.ack_unsent_data_replies {
                self.challenge_ack(now);
            }
            return;
        }
        if ack.lt(self.snd.una - self.snd.max_wnd.max(1)) {
            self.rare_counters().rx_drop_ack_too_old += 1;
            self.challenge_ack(now);
            return;
        }
        self.note_ts_recent(now, seg);
        self.note_peer_alive(now);
        self.rx_ack(now, seg);
        // `MSG_MORE` holds a tail only for the push of its own `send`: an arriving ACK pushes
        // queued data under the socket's Nagle and cork settings alone, as Linux's
        // `tcp_data_snd_check` (`tcp_push_pending_frames` with `tp->nonagle`) does.
        self.app.more = false;
        if self.state == State::Closed {
            return;
        }
        // Seventh: segment text (RFC 9293 §3.10.7.4), eighth: FIN.
        self.rx_text_and_fin(now, seg, gro_mss_bytes);
        if self.ecn.flags != 0 {
            self.ecn_on_data(seg);
        }
    }

    /// RFC 7323 §4.3 (3): TS.Recent takes the segment's TSval when SEG.SEQ ≤ Last.ACK.sent
    /// (and the value does not go back).
    #[inline]
    pub(super) fn note_ts_recent(&mut self, now: u64, seg: &TcpRepr<'_>) {
        if let (true, Some(ts)) = (self.opts.ts_ok, seg.timestamp) {
            if !ts_lt(ts.tsval, self.ts.recent) && seg.seq_number.le(self.ts.last_ack_sent) {
                self.ts.recent = ts.tsval;
                self.ts.recent_age_ns = now;
            }
        }
    }

    /// An acceptable segment with ACK arrived: unanswered keepalive probes are forgotten and
    /// the idle timer starts again (RFC 9293 §3.8.4).
    #[inline]
    pub(super) fn note_peer_alive(&mut self, now: u64) {
        // The count lies in a line a receiver does not otherwise touch: cleared only when set.
        if self.out.held & held::PROBED != 0 {
            self.timers.keepalive_probes = 0;
            self.out.held &= !held::PROBED;
        }
        if self.out.held & held::KEEPALIVE != 0 {
            self.start_keepalive(now);
        }
    }

    /// RFC 9293 §3.10.7.4 four-case acceptability test, against the window we advertised.
    pub(super) fn acceptable(&self, seq: SeqNumber, seg_len: u32) -> bool {
        let wnd = fwd(self.rcv.nxt, self.rcv.adv);
        let in_wnd = |s: SeqNumber| self.rcv.nxt.le(s) && s.lt(self.rcv.adv);
        match (seg_len, wnd) {
            (0, 0) => seq == self.rcv.nxt,
            (0, _) => in_wnd(seq),
            // Zero window: only the ACK/RST/URG of a segment at RCV.NXT is processed (its
            // text is trimmed away below): "special allowance should be made to accept valid
            // ACKs, URGs, and RSTs".
            (_, 0) => seq == self.rcv.nxt,
            (n, _) => in_wnd(seq) || in_wnd(seq + (n - 1)),
        }
    }

    /// The ACK owed to an unacceptable segment (RFC 9293 §3.10.7.4, RFC 7323 §5.3 R1). One that
    /// answers a bare ACK goes through the challenge-ACK budget: two ends that disagree on the
    /// window (a forged segment can make them) would otherwise answer each other's ACKs for
    /// ever, at the speed of the path. A segment with data, SYN or FIN is always answered (it
    /// may be a retransmission whose ACK was lost), as Linux rate-limits only bare ACKs
    /// (`tcp_oow_rate_limited`).
    fn ack_unacceptable(&mut self, now: u64, seg: &TcpRepr<'_>) {
        if seq_len(seg) == 0 {
            self.challenge_ack(now);
        } else {
            self.out.ack_due = AckDue::Now;
        }
    }

    /// RFC 5961 §7: challenge ACKs are rate limited per connection.
    pub(super) fn challenge_ack(&mut self, now: u64) {
        let budget = &mut self.out_rare;
        if now.saturating_sub(budget.challenge_window_start_ns) >= crate::config::NS_PER_S {
            budget.challenge_window_start_ns = now;
            budget.challenge_acks_in_window = 0;
        }
        if budget.challenge_acks_in_window < self.config.challenge_acks_per_s_max {
            budget.challenge_acks_in_window += 1;
            self.rare_counters().challenge_acks_sent += 1;
            self.out.ack_due = AckDue::Now;
        } else {
            self.rare_counters().challenge_acks_suppressed += 1;
        }
    }

    pub(super) fn queue_rst(&mut self, seq: SeqNumber, ack: Option<SeqNumber>) {
        self.owe_rst(seq, ack);
    }

    pub(super) fn start_keepalive(&mut self, now: u64) {
        if let Some(ka) = self.config.keepalive {
            self.set_deadline(Deadline::Keepalive, now.saturating_add(ka.idle_ns));
        }
    }

    /// Fin sequence number, once queued: the FIN follows the last byte of the send buffer.
    pub(super) fn fin_seq(&self) -> SeqNumber {
        self.snd.buf_seq + self.send_buf.len() as u32
    }

    /// True once our FIN is queued and acknowledged.
    pub(super) fn fin_acked(&self) -> bool {
        self.app.fin_queued && self.snd.una.gt(self.fin_seq())
    }

    /// Whether an ACK may grow cwnd ([`crate::Config::cwnd_growth_requires_limited`]; Linux
    /// `tcp_is_cwnd_limited`): always, unless the option is set; then if cwnd limited the
    /// sender in the recorded round trip, or, in slow start, while cwnd is below twice the
    /// largest flight of that round trip.
    fn cwnd_may_grow(&self) -> bool {
        if self.ecn_in_cwr() {
            // Reducing after an ECN-Echo (Linux `tcp_cong_control`: reduce, do not grow).
            return false;
        }
        if !self.config.cwnd_growth_requires_limited || self.rec.cwnd_limited {
            return true;
        }
        self.cc.in_slow_start()
            && self.cc.cwnd_bytes() < self.rec.flight_max_bytes.saturating_mul(2)
    }

    /// The ACK field of an acceptable segment (RFC 9293 §3.10.7.4, fifth check, and the
    /// congestion control around it).
    pub(super) fn rx_ack(&mut self, now: u64, seg: &TcpRepr<'_>) {
        let ack = seg.ack_number;
        let mss = u32::from(self.eff_mss());
        let new_wnd = u32::from(seg.window_len) << self.opts.snd_wscale;
        let flight_before = fwd(self.snd.una, self.snd.max);
        // Bytes this ACK covers that earlier ACKs SACKed, or, without SACK, that earlier
        // duplicate ACKs stood for (one segment each), for
        // `Config::ack_counts_previously_sacked_bytes`.
        // With nothing SACKed and no SACK block in the segment the SACK work below changes
        // nothing (no bytes reported, SND.UNA the highest SACKed, no block to record): skip
        // it, as on every ACK of a loss-free transfer.
        // Nothing SACKed when the scoreboard has no box (`held::SCOREBOARD`): its pointer,
        // in another line, is read only behind the bit.
        let sacked_any = self.out.held & held::SCOREBOARD != 0 && !self.scoreboard.is_empty();
        let sack_work =
            self.opts.sack_ok && (sacked_any || seg.sack_blocks.iter().any(Option::is_some));
        let reported_before = if !self.opts.sack_ok {
            u32::from(self.rec.dupacks).saturating_mul(mss)
        } else if sack_work {
            self.scoreboard.bytes_in(self.snd.una, ack)
        } else {
            0
        };
        let sacked_bytes_before = if sacked_any {
            self.scoreboard.bytes()
        } else {
            0
        };
        let prior_fack = if !sacked_any {
            self.snd.una
        } else {
            self.highest_sacked()
        };
        let sacked_new = sack_work && self.rx_sack_blocks(now, seg);
        let una_before = self.snd.una;
        // RFC 3168 §6.1.2: an ECN-Echo starts the window reduction before this ACK's
        // acknowledgment could grow cwnd.
        let ece = self.ecn.flags != 0 && self.ecn_on_ack(now, seg, flight_before);
        // A cumulative ACK filling a hole of never-retransmitted data below the highest
        // SACKed sequence: reordering too (Linux `tcp_clean_rtx_queue`).
        let hole_reord = if self.opts.sack_ok && ack.gt(self.snd.una) && prior_fack.gt(self.snd.una)
        {
            self.first_original_hole(self.snd.una, ack.min(self.snd.max))
                .filter(|r| r.lt(prior_fack))
        } else {
            None
        };
        let rack = self.rack_active();
        // Without RACK state (`held::RACK` in `out.held`, a hot line) there is nothing to deliver.
        let rack_delivery = if rack && self.out.held & held::RACK != 0 {
            self.rack_on_ack(now, seg)
        } else {
            crate::rack::Delivery::default()
        };
        if ack.gt(self.snd.una) {
            let acked = fwd(self.snd.una, ack);
            // Remove acknowledged data from the send buffer (the FIN is not in the buffer).
            let data_acked = fwd(self.snd.buf_seq, ack).min(self.send_buf.len() as u32);
            let syn_fully_acked = !ack.lt(self.snd.max);
            if !syn_fully_acked && self.snd.max.gt(self.snd.iss + 1) {
                let syn_end = self.snd.max;
                self.info_mut(now).set_syn_data_end(Some(syn_end));
            }
            self.send_buf.consume(data_acked as usize);
            self.snd.buf_seq += data_acked;
            if syn_fully_acked && !self.send_buf.is_empty() {
                // A write waits for the connection (Linux `sk_write_pending`): the delayed-ACK
                // engine starts here, so the write's data sent now makes the connection
                // interactive (`InfoState::pingpong`).
                self.info_mut(now).ato_started = true;
            }
            // A pass of SND.UNA's distance from ISS + 1 over 2^32 (not the ACK of our SYN,
            // from ISS itself).
            let base = (self.snd.iss + 1).0;
            if self.snd.una != self.snd.iss
                && ack.0.wrapping_sub(base) < self.snd.una.0.wrapping_sub(base)
            {
                self.rare_counters().snd_una_wraps += 1;
            }
            self.snd.una = ack;
            if self.snd.nxt.lt(ack) {
                self.snd.nxt = ack;
            }
            self.scoreboard.remove_below(ack);
            if let Some(r) = self.rack.as_mut() {
                r.on_cumulative_ack(ack);
            }
            // Under skb accounting the wake-up is `sndbuf.rs`'s, after the output.
            if data_acked > 0 && !self.app.fin_queued && self.out.held & held::SKB == 0 {
                self.push_event(Event::Writable);
            }
            if let Some(low) = hole_reord {
                self.note_reordering(now, low, self.highest_sacked());
            }
            let measured = self.rtt_sample_on_ack(now, seg, ack);
            if let Some(rtt_ns) = rack_delivery.ca_rtt_ns.or(measured) {
                self.hystart_on_ack(now, rtt_ns, mss);
            }
            self.timers.unacked_since_ns = now;
            // RFC 8985 §7.2: an ACK advancing SND.UNA ends the tail episode; the probe timeout
            // is scheduled afresh once nothing else is to be sent.
            self.rec.tlp_sent = false;
            self.set_deadline(Deadline::Tlp, NEVER);
            // Congestion control (RFC 5681 §3, RFC 6582 §3.2).
            if self.rec.in_recovery {
                if ack.ge(self.rec.recover) {
                    // Full acknowledgment: leave fast recovery.
                    self.rec.in_recovery = false;
                    self.rec.dupacks = 0;
                    if let (false, Some(r)) = (rack_delivery.reo_wnd_grew, self.rack.as_mut()) {
                        // RFC 8985 §6.2 step 4: one more recovery without a DSACK.
                        r.on_recovery_exit();
                    }
                    if self.opts.sack_ok && self.config.prr {
                        // RFC 6937 §3: PRR brought the flight down to ssthresh; recovery ends
                        // with cwnd = ssthresh (Linux `tcp_end_cwnd_reduction`).
                        self.cc.on_prr_recovery_exit();
                    } else {
                        self.cc
                            .on_recovery_exit(fwd(self.snd.una, self.snd.max), mss);
                    }
                } else if self.opts.sack_ok {
                    // RFC 6675: NextSeg picks the holes; a partial ACK also says the segment at
                    // the new SND.UNA is missing, so resend it unless already resent. RACK
                    // judges that segment by its send time instead (RFC 8985 §6.2).
                    if !rack && self.snd.una.ge(self.rec.high_rxt) {
                        self.rec.rtx_pending = true;
                    }
                } else {
                    // RFC 6582 §3.2 step 5: partial ACK — retransmit the next hole, deflate by
                    // the amount acknowledged, add back one SMSS if at least one was acked.
                    self.rec.rtx_pending = true;
                    self.cc.on_partial_ack(acked, mss);
                }
            } else {
                self.rec.dupacks = 0;
                if self.cwnd_may_grow() {
                    // Linux counts at least one segment per advancing ACK
                    // (`tcp_remove_reno_sacks`).
                    let counted = if self.config.ack_counts_previously_sacked_bytes {
                        acked
                    } else {
                        acked.saturating_sub(reported_before).max(acked.min(mss))
                    };
                    self.grow_cwnd(now, counted, mss);
                }
                if let Some(r) = self.rack.as_mut().filter(|r| r.rto_recovery) {
                    if ack.ge(self.rec.recover) {
                        // RFC 8985 §6.2 step 4: RTO recovery ends with the recovery point.
                        r.rto_recovery = false;
                        if !rack_delivery.reo_wnd_grew {
                            r.on_recovery_exit();
                        }
                    }
                }
                // Keep `recover` just behind SND.UNA once passed, so that "the cumulative ACK
                // covers more than recover" (RFC 6582 §3.2 step 2) stays a valid circular
                // comparison however many bytes flow without loss.
                if self.rec.recover.lt(self.snd.una) {
                    self.rec.recover = self.snd.una - 1;
                }
            }
            // RFC 6298 §5.2/§5.3: all acknowledged → stop; otherwise restart the timer.
            if self.snd.una == self.snd.max {
                self.set_deadline(Deadline::Rtx, NEVER);
                self.rack_disarm();
            } else if self.out.held & held::PERSIST == 0 {
                self.set_deadline(
                    Deadline::Rtx,
                    now.saturating_add(self.rtt.rto_ns(self.config.rto_bounds())),
                );
            }
        } else if ack == self.snd.una
            && seg.payload.is_empty()
            && !seg.flags.intersects(TcpFlags::SYN | TcpFlags::FIN)
            && (new_wnd == self.snd.wnd || sacked_new)
            && new_wnd > 0
            && flight_before > 0
        {
            // RFC 5681 §2: a duplicate acknowledgment.
            self.rare_counters().dup_acks_rx += 1;
            self.on_dupack(now, mss, flight_before);
        }
        if rack {
            // RFC 8985 §6.2 step 5: judge the flight against the segment just delivered, and
            // start recovery once something is lost.
            if rack_delivery.advanced {
                self.rack_detect_loss(now);
            }
            self.rack_maybe_enter_recovery(now, mss, flight_before);
        }
        // RFC 6675 §5: with SACK, recovery also starts once IsLost(HighACK + 1) holds.
        if sacked_new
            && !rack
            && !self.rec.in_recovery
            && ack == self.snd.una
            && self.snd.una.gt(self.rec.recover)
            && self.scoreboard.lost_boundary(mss, DUP_THRESH).is_some()
        {
            self.enter_recovery(now, mss, flight_before);
        }
        if let (true, Some(rtt_ns)) = (self.snd.una == una_before, rack_delivery.ca_rtt_ns) {
            // An ACK that only SACKs new data also samples the RTT (Linux `sack_rtt_us`).
            self.hystart_on_ack(now, rtt_ns, mss);
        }
        if self.config.cwnd_grows_on_sack_when_reordering
            && self.snd.una == una_before
            && !self.rec.in_recovery
            && self.reordering_segments() > REORDERING_INITIAL_SEGMENTS
            && self.cwnd_may_grow()
        {
            // Linux `tcp_may_raise_cwnd`: once reordering was measured, an ACK that only
            // SACKs new data is forward progress and grows cwnd by what it delivered.
            let sacked_now = self.scoreboard.bytes().saturating_sub(sacked_bytes_before);
            if sacked_now > 0 {
                self.grow_cwnd(now, sacked_now, mss);
            }
        }
        let delivered_segs =
            self.count_delivered(now, una_before, reported_before, sacked_bytes_before);
        if ece {
            self.count_rare(u64::from(delivered_segs), |k| &mut k.delivered_ce_segments);
        }
        // RFC 6937 DeliveredData: the change in SND.UNA plus the change in SACKed bytes.
        let delivered = || {
            fwd(una_before, self.snd.una)
                .saturating_add(self.scoreboard.bytes())
                .saturating_sub(sacked_bytes_before)
        };
        if self.rec.in_recovery && self.opts.sack_ok && self.config.prr {
            let delivered = delivered();
            self.prr_on_ack(mss, delivered, self.snd.una.gt(una_before));
        } else if self.ecn_in_cwr() {
            let delivered = delivered();
            self.ecn_cwr_on_ack(delivered);
        }
        self.update_send_window(seg.seq_number, ack, new_wnd);
        // State transitions driven by the acknowledgment of our FIN.
        if self.fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.set_deadline(Deadline::Rtx, NEVER);
                    if self.app.app_closed {
                        // Nobody can read or write any more: do not wait forever for the
                        // peer's FIN (the FIN-WAIT-2 timer of BSD and Linux), reuse 2·MSL.
                        self.set_deadline(
                            Deadline::TimeWait,
                            now.saturating_add(self.config.time_wait_ns),
                        );
                    }
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    self.enter_closed(CloseReason::Normal);
                }
                _ => {}
            }
        }
    }

    /// RFC 9293 §3.10.7.4: the window update, when SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ
    /// and SND.WL2 ≤ SEG.ACK); a window that opens stops the persist timer. `new_wnd_bytes`
    /// is the segment's window field, scaled.
    #[inline(always)]
    pub(super) fn update_send_window(
        &mut self,
        seq: SeqNumber,
        ack: SeqNumber,
        new_wnd_bytes: u32,
    ) {
        if self.snd.wl1.lt(seq) || (self.snd.wl1 == seq && self.snd.wl2.le(ack)) {
            let was_zero = self.snd.wnd == 0;
            self.snd.wnd = new_wnd_bytes;
            self.snd.wl1 = seq;
            self.snd.wl2 = ack;
            self.snd.max_wnd = self.snd.max_wnd.max(new_wnd_bytes);
            if new_wnd_bytes > 0 && (was_zero || self.out.held & held::PERSIST != 0) {
                // The window opened: stop probing.
                self.set_deadline(Deadline::Persist, NEVER);
                self.timers.persist_shift = 0;
            }
        }
    }

    /// Slow start or congestion avoidance for `counted_bytes` delivered by one ACK, with
    /// slow start's per-ACK limit from [`Config::slow_start_increase_limit_segments`].
    fn grow_cwnd(&mut self, now: u64, counted_bytes: u32, mss: u32) {
        let limit_segments = self.config.slow_start_increase_limit_segments;
        let ss_increase_max_bytes = if limit_segments == 0 {
            u32::MAX
        } else {
            mss.saturating_mul(u32::from(limit_segments))
        };
        self.cc.on_ack_limited(
            now,
            counted_bytes,
            mss,
            self.rtt.srtt_ns(),
            ss_increase_max_bytes,
        );
    }

    /// The reordering degree in segments (`tcpi_reordering`, Linux `tp->reordering`).
    fn reordering_segments(&self) -> u32 {
        self.info
            .as_ref()
            .map_or(REORDERING_INITIAL_SEGMENTS, |i| i.reordering)
    }

    /// `tcpi_delivered` and the chronographs after an ACK: segments newly acknowledged
    /// (less what was SACKed before) and newly SACKed, each counted as `ceil(bytes / MSS)`;
    /// a FIN acknowledged without data counts as one. Returns the segments counted.
    fn count_delivered(
        &mut self,
        now: u64,
        una_before: SeqNumber,
        reported_before: u32,
        sacked_bytes_before: u32,
    ) -> u32 {
        let mss = u32::from(self.eff_mss()).max(1);
        let mut acked = fwd(una_before, self.snd.una);
        let fin_now =
            self.app.fin_queued && una_before.le(self.fin_seq()) && self.fin_seq().lt(self.snd.una);
        if fin_now {
            acked -= 1;
        }
        let (acked_new, sacked_new) = if self.opts.sack_ok {
            let above_before = sacked_bytes_before.saturating_sub(reported_before);
            (
                acked.saturating_sub(reported_before),
                self.scoreboard.bytes().saturating_sub(above_before),
            )
        } else {
            (acked, 0)
        };
        let segs = acked_new.div_ceil(mss) + sacked_new.div_ceil(mss);
        let segs = if segs == 0 && fin_now { 1 } else { segs };
        if segs > 0 {
            self.info_mut(now).delivered_segments += u64::from(segs);
        }
        self.chrono_on_ack(now, acked > 0);
        segs
    }

    /// Returns the RTT measured, if one was.
    pub(super) fn rtt_sample_on_ack(
        &mut self,
        now: u64,
        seg: &TcpRepr<'_>,
        ack: SeqNumber,
    ) -> Option<u64> {
        let mut measured = None;
        if self.opts.ts_ok {
            // RFC 7323 §4.1: RTTM from the echoed timestamp of an ACK for new data.
            // One exception: an echo older than our last retransmission. When the peer had
            // already received the data and only our cumulative ACK was lost, the
            // retransmission is a duplicate that does not update its TS.Recent (RFC 7323 §4.3
            // rule 2), so the ACK it triggers echoes a stale timestamp and would inflate SRTT
            // by the whole recovery time. Such a sample is ambiguous, Karn-style: skip it.
            // Keep the floor within 2^30 ms of the clock so the circular comparison below stays
            // valid on connections that go weeks without a retransmission.
            let horizon = self.ts_now(now).wrapping_sub(1 << 30);
            if ts_lt(self.ts.rtx_floor, horizon) {
                self.ts.rtx_floor = horizon;
            }
            if let Some(ts) = seg.timestamp {
                let ticks = self.ts_now(now).wrapping_sub(ts.tsecr);
                if ts.tsecr != 0 && (ticks as i32) >= 0 && !ts_lt(ts.tsecr, self.ts.rtx_floor) {
                    // Not for RACK's minimum RTT: a 1 ms tick is too coarse for it (RFC 8985
                    // §4 wants timing finer than a quarter of the minimum RTT); RACK times
                    // segments on the ns clock itself.
                    let rtt_ns = u64::from(ticks) * NS_PER_MS;
                    self.rtt.sample(rtt_ns, self.config.rto_bounds());
                    self.count_hot(1, |k| &mut k.rtt_samples);
                    measured = Some(rtt_ns);
                }
            }
            self.timers.clear_rtt_timed();
            return measured;
        }
        // Karn: only a segment that was never retransmitted is timed (the timed segment is cleared on
        // every retransmission).
        if let Some((end, sent_ns)) = self.timers.rtt_timed() {
            if ack.ge(end) {
                let rtt_ns = now.saturating_sub(sent_ns);
                self.rtt_sample(now, rtt_ns);
                self.timers.clear_rtt_timed();
                measured = Some(rtt_ns);
            }
        }
        measured
    }

    /// CUBIC's HyStart ([`Config::hystart`]) for one ACK with an RTT sample (Linux
    /// `cubictcp_acked`), before the ACK grows cwnd.
    fn hystart_on_ack(&mut self, now: u64, rtt_ns: u64, mss: u32) {
        if !self.config.hystart || self.cc.algorithm() != CongestionControl::Cubic {
            return;
        }
        // Linux starts HyStart with the connection (`cubictcp_init`: the round ends past
        // ISS + 1); so does this lazily created state.
        let first_end = self.snd.iss + 1;
        let h = self
            .hystart
            .get_or_insert_with(|| Box::new(crate::cc::Hystart::new(now, first_end)));
        let ack = crate::cc::HystartAck {
            now_ns: now,
            rtt_ns,
            snd_una: self.snd.una,
            snd_nxt: self.snd.nxt,
            mss,
            srtt_ns: if self.rtt.has_sample {
                self.rtt.srtt_ns()
            } else {
                0
            },
        };
        self.cc.on_hystart_ack(h, ack);
    }

    /// One RFC 6298 RTT measurement timed on the ns clock (the handshake, a Karn-timed
    /// segment): feeds the RTO estimator and RACK's windowed minimum RTT (RFC 8985 §6.2 step
    /// 1).
    fn rtt_sample(&mut self, now: u64, rtt_ns: u64) {
        self.rtt.sample(rtt_ns, self.config.rto_bounds());
        if let Some(r) = self.rack.as_mut() {
            r.note_rtt_sample(now, rtt_ns);
        }
        self.count_hot(1, |k| &mut k.rtt_samples);
    }

    pub(super) fn enter_time_wait(&mut self, now: u64) {
        self.state = State::TimeWait;
        self.set_deadline(Deadline::Rtx, NEVER);
        self.set_deadline(Deadline::Persist, NEVER);
        self.set_deadline(Deadline::Keepalive, NEVER);
        self.set_deadline(
            Deadline::TimeWait,
            now.saturating_add(self.config.time_wait_ns),
        );
    }
}
