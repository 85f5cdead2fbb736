//! Deadlines (RFC 9293 §3.8): retransmission (RFC 6298), persist (zero window, §3.8.6.1),
//! delayed ACK (§3.8.6.3), keepalive (§3.8.4), TIME-WAIT and the user timeout (§3.8.3).

use super::*;

/// WCDelAckT of RFC 8985 §7.2: added to the probe timeout when one segment is in flight, since
/// the peer may delay its ACK of a lone segment that long. The RFC's recommended 200 ms, which
/// is also what Linux adds (`TCP_RTO_MIN` in `tcp_schedule_loss_probe`). Our own
/// `delayed_ack_ns` says nothing of the peer's timer: with it, a probe raced the peer's
/// delayed ACK whenever the path's RTT was small.
const TLP_WORST_CASE_DELAYED_ACK_NS: u64 = 200 * crate::config::NS_PER_MS;

/// Consecutive retransmission timeouts of the SYN or SYN-ACK after which
/// [`Connection::path_in_doubt`] holds: 2, as Linux gives negative advice from the second SYN
/// timeout on (`tcp_write_timeout`: `if (icsk->icsk_retransmits) __dst_negative_advice(sk)`).
pub const PATH_DOUBT_SYN_TIMEOUTS: u8 = 2;

/// Consecutive retransmission timeouts of data after which [`Connection::path_in_doubt`]
/// holds: RFC 1122 §4.2.3.5's R1 "at least 3 retransmissions" (Linux's `tcp_retries1`, 3).
pub const PATH_DOUBT_TIMEOUTS: u8 = 3;

/// One of the connection's deadlines, named for [`Connection::set_deadline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// Retransmission timer (RFC 6298), `timers.rtx_deadline_ns`.
    Rtx,
    /// Persist timer (RFC 9293 §3.8.6.1), `timers.persist_deadline_ns`.
    Persist,
    /// Delayed ACK (RFC 9293 §3.8.6.3), `timers.delack_deadline_ns`.
    Delack,
    /// Keepalive (RFC 9293 §3.8.4), `timers.keepalive_deadline_ns`.
    Keepalive,
    /// TIME-WAIT or the FIN-WAIT-2 timeout, `timers.time_wait_deadline_ns`.
    TimeWait,
    /// Tail loss probe (RFC 8985 §7.2), `timers.tlp_deadline_ns`.
    Tlp,
    /// RACK's reordering timer (RFC 8985 §6.2 step 5), `rack_deadline_ns`.
    Rack,
}

impl Connection {
    // ------------------------------------------------------------------ deadlines

    /// After new data went out: the retransmission timer started if it is not running
    /// (RFC 6298 §5.1), and the persist timer stopped (the window took data).
    #[inline]
    pub(crate) fn arm_rtx_after_send(&mut self, now: u64) {
        if self.timers.rtx_deadline_ns == NEVER {
            self.set_deadline(
                Deadline::Rtx,
                now.saturating_add(self.rtt.rto_ns(self.config.rto_bounds())),
            );
        }
        self.set_deadline(Deadline::Persist, NEVER);
    }

    /// Arms (or, with `NEVER`, disarms) one deadline, keeping `earliest_deadline_ns` equal to
    /// the minimum of the seven. Every write of a deadline goes through here: a stored
    /// minimum later than the true one is a missed timer (`poll_timeout` reads only it;
    /// `invariant_violation` and a debug assertion in `poll_timeout` check it).
    ///
    /// Reads the other deadlines only when the one moved was the minimum and moves later
    /// (an ACK disarming the retransmission timer, a reply taking the delayed ACK): a later
    /// or equal minimum then has to be found again.
    #[inline]
    pub(crate) fn set_deadline(&mut self, which: Deadline, t_ns: u64) {
        let armed = |bit: u8| if t_ns == NEVER { 0 } else { bit };
        let slot = match which {
            Deadline::Rtx => &mut self.timers.rtx_deadline_ns,
            Deadline::Persist => {
                self.out.held = self.out.held & !held::PERSIST | armed(held::PERSIST);
                &mut self.timers.persist_deadline_ns
            }
            Deadline::Delack => &mut self.timers.delack_deadline_ns,
            Deadline::Keepalive => {
                self.out.held = self.out.held & !held::KEEPALIVE | armed(held::KEEPALIVE);
                &mut self.timers.keepalive_deadline_ns
            }
            Deadline::TimeWait => &mut self.timers.time_wait_deadline_ns,
            Deadline::Tlp => &mut self.timers.tlp_deadline_ns,
            Deadline::Rack => &mut self.rack_deadline_ns,
        };
        let old_ns = core::mem::replace(slot, t_ns);
        if t_ns <= self.earliest_deadline_ns {
            self.earliest_deadline_ns = t_ns;
        } else if old_ns == self.earliest_deadline_ns {
            self.earliest_deadline_ns = self.deadlines_min_hinted_ns();
        }
    }

    /// `out.held` as the state it summarizes says it must be: for a TCB whose deadlines or
    /// boxes were written whole (a snapshot's import, tests) and for `invariant_violation`.
    pub(crate) fn held_hints(&self) -> u8 {
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        bit(self.timers.persist_deadline_ns != NEVER, held::PERSIST)
            | bit(self.timers.keepalive_deadline_ns != NEVER, held::KEEPALIVE)
            | bit(self.ooo.is_allocated(), held::OOO)
            | bit(self.scoreboard.is_allocated(), held::SCOREBOARD)
            | bit(self.skb.is_some(), held::SKB)
            | bit(self.timers.keepalive_probes != 0, held::PROBED)
            | bit(self.rack.is_some(), held::RACK)
            | bit(self.send_buf.allocated_bytes() != 0, held::SEND_STORAGE)
    }

    /// [`Connection::deadlines_min_ns`] for `set_deadline`, whose `out.held` is current: the
    /// keepalive and persist deadlines are read only when their bits say they are armed
    /// (a request/response exchange re-finds the minimum twice and read both for nothing).
    fn deadlines_min_hinted_ns(&self) -> u64 {
        let mut t = self
            .timers
            .rtx_deadline_ns
            .min(self.timers.tlp_deadline_ns)
            .min(self.rack_deadline_ns)
            .min(self.timers.delack_deadline_ns)
            .min(self.timers.time_wait_deadline_ns);
        if self.out.held & (held::PERSIST | held::KEEPALIVE) != 0 {
            t = t
                .min(self.timers.persist_deadline_ns)
                .min(self.timers.keepalive_deadline_ns);
        }
        t
    }

    /// The minimum of the seven deadlines, read from each (`NEVER` when none is armed).
    pub(crate) fn deadlines_min_ns(&self) -> u64 {
        self.timers
            .rtx_deadline_ns
            .min(self.timers.tlp_deadline_ns)
            .min(self.rack_deadline_ns)
            .min(self.timers.persist_deadline_ns)
            .min(self.timers.delack_deadline_ns)
            .min(self.timers.keepalive_deadline_ns)
            .min(self.timers.time_wait_deadline_ns)
    }

    // ------------------------------------------------------------------ timers

    /// True when the path to the peer is in doubt: the segment at the head of the
    /// retransmission queue — or the SYN / SYN-ACK — has been retransmitted by timeout
    /// [`PATH_DOUBT_SYN_TIMEOUTS`] times in a row while opening, [`PATH_DOUBT_TIMEOUTS`] (RFC
    /// 1122 §4.2.3.5's threshold R1) once synchronized, with no acknowledgment of new data
    /// since. RFC 1122 §4.2.3.5 asks TCP to pass *negative advice* to IP then; the stack
    /// re-validates the next hop's link-layer address (§2.3.2.1), so a wrong neighbour entry
    /// does not blackhole the connection until it expires. Read after
    /// [`Connection::handle_timeout`] fired a retransmission timeout.
    pub fn path_in_doubt(&self) -> bool {
        let threshold = match self.state {
            State::SynSent | State::SynReceived => PATH_DOUBT_SYN_TIMEOUTS,
            _ => PATH_DOUBT_TIMEOUTS,
        };
        self.rtt.backoff_shift >= threshold
    }

    /// Fires every deadline that is due at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        if self.timers.time_wait_deadline_ns <= now {
            self.set_deadline(Deadline::TimeWait, NEVER);
            if matches!(self.state, State::TimeWait | State::FinWait2) {
                self.enter_closed(CloseReason::Normal);
                return;
            }
        }
        if self.timers.delack_deadline_ns <= now {
            self.set_deadline(Deadline::Delack, NEVER);
            if self.out.ack_due == AckDue::Delayed {
                self.out.ack_due = AckDue::Now;
                self.count_hot(1, |k| &mut k.delayed_acks_sent);
                // Linux `tcp_delack_timer_handler`: no reply carried the ACK in time, so the
                // connection is not interactive after all.
                if let Some(info) = self.info.as_mut() {
                    info.pingpong = false;
                }
            }
        }
        if self.user_timeout_deadline_ns() <= now {
            self.owe_rst(self.snd.max, None);
            self.enter_closed(CloseReason::TimedOut);
            return;
        }
        // The probe before the RTO: a probe capped at the RTO's expiry (RFC 8985 §7.2) goes
        // out instead of it and rearms it.
        if self.timers.tlp_deadline_ns <= now {
            self.set_deadline(Deadline::Tlp, NEVER);
            self.on_probe_timeout(now);
        }
        if self.timers.rtx_deadline_ns <= now {
            self.set_deadline(Deadline::Rtx, NEVER);
            self.on_rto(now);
            if self.state == State::Closed {
                return;
            }
        }
        if self.out.held & held::RACK != 0 && self.rack_deadline_ns <= now {
            self.rack_disarm();
            self.on_rack_timeout(now);
        }
        if self.timers.persist_deadline_ns <= now {
            self.set_deadline(Deadline::Persist, NEVER);
            self.out.probe_pending = true;
        }
        if self.timers.keepalive_deadline_ns <= now {
            self.set_deadline(Deadline::Keepalive, NEVER);
            self.on_keepalive(now);
        }
    }

    /// RFC 6298 §5.4–§5.6 retransmission timeout.
    pub(super) fn on_rto(&mut self, now: u64) {
        self.rare_counters().rto_expirations += 1;
        match self.state {
            State::SynSent | State::SynReceived => {
                if self.timers.syn_retries >= self.config.syn_retries_max {
                    self.enter_closed(CloseReason::TimedOut);
                    return;
                }
                self.timers.syn_retries += 1;
                self.rtt.back_off();
                self.timers.clear_rtt_timed();
                // Resend the SYN (or SYN-ACK).
                self.snd.nxt = self.snd.iss;
                return;
            }
            State::Closed | State::TimeWait | State::FinWait2 => return,
            _ => {}
        }
        if self.snd.una == self.snd.max {
            return;
        }
        let mss = u32::from(self.eff_mss());
        let flight = fwd(self.snd.una, self.snd.max);
        self.cc.on_rto(now, flight, mss);
        // RFC 3168 §6.1.2: the next new data segment announces the reduction (CWR).
        self.ecn_on_loss_reduction();
        // Linux `cubictcp_state(TCP_CA_Loss)`: HyStart starts afresh with the new slow start.
        self.hystart = None;
        // RFC 6582 §3.2 step 4: record the highest sequence sent.
        self.rec.recover = self.snd.max;
        self.rec.in_recovery = false;
        self.set_deadline(Deadline::Tlp, NEVER);
        self.rec.tlp_pending = false;
        self.rec.dupacks = 0;
        self.rec.rtx_pending = false;
        // Go back: retransmit from SND.UNA (RFC 6298 §5.4). RFC 2018 §8: after a timeout,
        // SACK information is ignored (the receiver may have reneged).
        self.snd.nxt = self.snd.una;
        self.scoreboard.clear();
        if let Some(r) = self.rack.as_mut() {
            // RACK's view follows: nothing stays delivered or lost, the go-back resends it
            // all, and RFC 8985's "RTO recovery" lasts until SND.UNA passes `recover`.
            r.on_rto();
        }
        self.set_deadline(Deadline::Rack, NEVER);
        self.timers.clear_rtt_timed();
        // RFC 6298 §5.5: back off.
        self.rtt.back_off();
    }

    /// RFC 8985 §6.2 step 5: the reordering timer expired — the segments it waited for are
    /// now judged, and recovery starts if one is lost.
    pub(super) fn on_rack_timeout(&mut self, now: u64) {
        if !self.rack_active() || !self.state.is_synchronized() || self.snd.una == self.snd.max {
            return;
        }
        self.rare_counters().rack_reo_timeouts += 1;
        self.rack_detect_loss(now);
        let mss = u32::from(self.eff_mss());
        let flight = fwd(self.snd.una, self.snd.max);
        self.rack_maybe_enter_recovery(now, mss, flight);
    }

    /// RFC 8985 §7.2: schedules the probe timeout once the sender has unacknowledged data and
    /// nothing else to send (called when `poll_transmit` runs dry). One probe per tail episode,
    /// none during recovery, after a timeout, or while probing a zero window.
    pub(super) fn arm_tail_loss_probe(&mut self, now: u64) {
        // RACK-TLP is specified for SACK connections (RFC 8985: what a probe repaired is seen
        // through SACK); Linux, too, probes only when SACK was negotiated
        // (`tcp_schedule_loss_probe`).
        if !self.config.tail_loss_probe
            || !self.opts.sack_ok
            || self.rec.tlp_sent
            || self.rec.tlp_pending
            || self.timers.tlp_deadline_ns != NEVER
            || self.snd.una == self.snd.max
            || self.snd.nxt != self.snd.max
            || self.rec.in_recovery
            || self.rtt.backoff_shift > 0
            || self.out.held & held::PERSIST != 0
            || self.timers.rtx_deadline_ns == NEVER
            || !matches!(
                self.state,
                State::Established
                    | State::CloseWait
                    | State::FinWait1
                    | State::Closing
                    | State::LastAck
            )
        {
            return;
        }
        // PTO = max(2·SRTT + allowance, floor); the allowance is WCDelAckT when one segment
        // is in flight (the peer may hold its ACK that long), else `tlp_pto_extra_ns`; 1 s
        // before any RTT sample (§7.2).
        let pto = if self.rtt.has_sample {
            let allowance_ns = if fwd(self.snd.una, self.snd.max) <= u32::from(self.eff_mss()) {
                TLP_WORST_CASE_DELAYED_ACK_NS
            } else {
                u64::from(self.config.tlp_pto_extra_ns)
            };
            let pto = self.rtt.srtt_ns().saturating_mul(2);
            pto.saturating_add(allowance_ns)
                .max(u64::from(self.config.tlp_pto_floor_ns))
        } else {
            crate::config::NS_PER_S
        };
        // §7.2: "If Now() + PTO > TCP_RTO_expiration, PTO = TCP_RTO_expiration − Now()": a
        // probe due at the RTO's expiry goes out in its place (`handle_timeout` judges the
        // probe first, and the probe rearms the RTO), as Linux's probe timer replaces its
        // retransmission timer. The RTO stays the backstop once the probe is spent.
        self.set_deadline(
            Deadline::Tlp,
            now.saturating_add(pto).min(self.timers.rtx_deadline_ns),
        );
    }

    /// RFC 8985 §7.3: the probe timeout expired — owe one probe and rearm the RTO. Not once
    /// loss recovery has begun since it was armed (§7.2: no probe during recovery).
    pub(super) fn on_probe_timeout(&mut self, now: u64) {
        if self.snd.una == self.snd.max
            || self.rec.tlp_sent
            || self.rec.in_recovery
            || self.snd.nxt != self.snd.max
            || !self.state.is_synchronized()
        {
            return;
        }
        self.rec.tlp_pending = true;
        self.rec.tlp_sent = true;
        self.rare_counters().tail_loss_probes += 1;
        if self.out.held & held::PERSIST == 0 {
            self.set_deadline(
                Deadline::Rtx,
                now.saturating_add(self.rtt.rto_ns(self.config.rto_bounds())),
            );
        }
    }

    pub(super) fn on_keepalive(&mut self, now: u64) {
        let Some(ka) = self.config.keepalive else {
            return;
        };
        if !self.state.keepalive_may_probe() {
            return;
        }
        if self.snd.una != self.snd.max || !self.send_buf.is_empty() {
            // Data is outstanding; the retransmission timer watches the peer.
            self.set_deadline(Deadline::Keepalive, now.saturating_add(ka.idle_ns));
            return;
        }
        if self.timers.keepalive_probes >= ka.probes_max {
            self.owe_rst(self.snd.max, None);
            self.enter_closed(CloseReason::TimedOut);
            return;
        }
        self.timers.keepalive_probes += 1;
        self.out.held |= held::PROBED;
        self.out.keepalive_pending = true;
        self.set_deadline(Deadline::Keepalive, now.saturating_add(ka.interval_ns));
    }

    pub(super) fn arm_persist(&mut self, now: u64) {
        if self.out.held & held::PERSIST != 0 {
            return;
        }
        // RFC 9293 §3.8.6.1: probe at exponentially growing intervals.
        let base = self.rtt.base_rto_ns();
        let interval = base
            .checked_shl(u32::from(self.timers.persist_shift))
            .unwrap_or(self.config.rto_max_ns)
            .min(self.config.rto_max_ns);
        self.set_deadline(Deadline::Persist, now.saturating_add(interval));
        self.set_deadline(Deadline::Rtx, NEVER);
    }
}
