//! Explicit Congestion Notification (RFC 3168 §6.1), with Linux's choices where the RFC
//! leaves room (`net/ipv4/tcp_input.c`, `tcp_output.c`, `include/net/tcp_ecn.h` as facts):
//!
//! - negotiation (§6.1.1): with [`EcnMode::On`] an active open's first SYN carries ECE and
//!   CWR (a retransmitted SYN carries neither, Linux `tcp_ecn_clear_syn`); a SYN-ACK with ECE
//!   and without CWR agrees. A passive open agrees (SYN-ACK with ECE) when its mode is not
//!   [`EcnMode::Off`] and the SYN carries both ECE and CWR;
//! - sending (§6.1.2, §6.1.5, §6.1.6): new data leaves with ECT(0) in the IP header; pure
//!   ACKs, SYNs, retransmissions and window probes with Not-ECT. [`Connection::transmit_ecn`]
//!   tells the driver which, for the segment `poll_transmit` returned last;
//! - receiving (§6.1.3): a data segment with CE makes every later segment (a bare RST
//!   aside) carry ECE until a data segment with CWR arrives; both are acknowledged at once (Linux's quick-ACK on CE,
//!   `ICSK_ACK_NOW` on CWR);
//! - the sender's reaction (§6.1.2): an ACK with ECE, outside loss recovery and at most once
//!   per window of data, is a congestion event without loss: ssthresh from the congestion
//!   controller, then either cwnd = ssthresh at once or, with [`Config::prr`], Linux's CWR
//!   state (`tcp_enter_cwr`): cwnd follows proportional rate reduction with the conservative
//!   bound (`tcp_cwnd_reduction` without retransmitted data acknowledged) until SND.UNA passes
//!   what was outstanding, then cwnd = ssthresh. cwnd does not grow meanwhile. The next new
//!   data segment after any reduction (this one, fast recovery, a timeout) carries CWR.
//!
//! A loss found during the reduction starts fast recovery without reducing again (Linux
//! `tcp_enter_recovery` keeps a reduction in progress).

use wire::Ecn;
use wire::tcp::{TcpFlags, TcpRepr};

use super::*;
use crate::config::EcnMode;

impl Connection {
    /// ECN was negotiated.
    #[inline]
    pub(super) fn ecn_ok(&self) -> bool {
        self.ecn.flags & ecn_flag::OK != 0
    }

    /// In the window reduction an ECN-Echo started (`tcpi_ca_state` CWR).
    #[inline]
    pub(super) fn ecn_in_cwr(&self) -> bool {
        self.ecn.flags & ecn_flag::IN_CWR != 0
    }

    /// ECN was negotiated on this connection (`TCPI_OPT_ECN`).
    pub fn ecn_negotiated(&self) -> bool {
        self.ecn_ok()
    }

    /// The ECN codepoint for the IP header of the segment the last `poll_transmit` returned:
    /// ECT(0) for new data on an ECN connection, Not-ECT otherwise (RFC 3168 §6.1.4–§6.1.6:
    /// SYNs, pure ACKs, retransmissions and window probes are not ECN-capable).
    #[inline]
    pub fn transmit_ecn(&self) -> Ecn {
        if self.ecn.flags & ecn_flag::TX_ECT != 0 {
            Ecn::Ect0
        } else {
            Ecn::NotEct
        }
    }

    /// Active open: the first SYN asks for ECN when the mode says so.
    pub(super) fn ecn_on_connect(&mut self) {
        if self.config.ecn == EcnMode::On {
            self.ecn.flags = ecn_flag::REQUESTED;
        }
    }

    /// Passive open: agree when the peer's SYN is an ECN-setup SYN (ECE and CWR) and the mode
    /// allows it.
    pub(super) fn ecn_on_syn_received(&mut self, syn: &TcpRepr<'_>) {
        if self.config.ecn != EcnMode::Off && syn.flags.contains(TcpFlags::ECE | TcpFlags::CWR) {
            self.ecn.flags = ecn_flag::OK;
            self.ecn.cwr_end = self.snd.iss;
        }
    }

    /// The SYN-ACK answering our SYN: ECE without CWR agrees (§6.1.1; a SYN-ACK with both is
    /// no ECN-setup SYN-ACK), provided our SYN asked.
    pub(super) fn ecn_on_syn_ack(&mut self, seg: &TcpRepr<'_>) {
        let asked = self.ecn.flags & ecn_flag::REQUESTED != 0;
        self.ecn.flags &= !ecn_flag::REQUESTED;
        if asked && seg.flags.contains(TcpFlags::ECE) && !seg.flags.contains(TcpFlags::CWR) {
            self.ecn.flags |= ecn_flag::OK;
            self.ecn.cwr_end = self.snd.una;
        }
    }

    /// ECN bits of a segment being built (from `syn_segment`, and `fill_options` for every
    /// other segment but a bare RST), the codepoint first set to Not-ECT: a SYN asks, a
    /// SYN-ACK agrees, any other segment echoes a CE mark (ECE) while one is owed. New data
    /// then gets ECT(0) and CWR (`ecn_on_new_data`).
    #[cold]
    #[inline(never)]
    pub(super) fn ecn_on_transmit(&mut self, r: &mut TcpRepr<'_>) {
        self.ecn.flags &= !ecn_flag::TX_ECT;
        if r.flags.contains(TcpFlags::SYN) {
            if r.flags.contains(TcpFlags::ACK) {
                if self.ecn_ok() {
                    r.flags |= TcpFlags::ECE;
                }
            } else if self.ecn.flags & ecn_flag::REQUESTED != 0 {
                if self.timers.syn_retries == 0 {
                    r.flags |= TcpFlags::ECE | TcpFlags::CWR;
                } else {
                    // Linux `tcp_ecn_clear_syn`: a retransmitted SYN does not ask (a middlebox
                    // may drop ECN-setup SYNs).
                    self.ecn.flags &= !ecn_flag::REQUESTED;
                }
            }
            return;
        }
        if self.ecn.flags & ecn_flag::DEMAND_CWR != 0 {
            // A RST with ACK too, as Linux's `tcp_ecn_send` marks every segment.
            r.flags |= TcpFlags::ECE;
            self.rare_counters().tx_ece_segments += 1;
        }
    }

    /// A data segment carrying new data leaves (not a retransmission, not a probe): ECT(0),
    /// and CWR when a reduction is to be announced (§6.1.2).
    #[cold]
    #[inline(never)]
    pub(super) fn ecn_on_new_data(&mut self, r: &mut TcpRepr<'_>) {
        self.ecn.flags |= ecn_flag::TX_ECT;
        if self.ecn.flags & ecn_flag::QUEUE_CWR != 0 {
            self.ecn.flags &= !ecn_flag::QUEUE_CWR;
            r.flags |= TcpFlags::CWR;
        }
    }

    /// An acceptable segment with text arrived with the codepoint `handle_segment_ecn` kept
    /// in `ecn.rx` (§6.1.3; Linux `tcp_ecn_accept_cwr`, then `tcp_ecn_check_ce`). Called
    /// after the text was taken, so the immediate ACK it may ask for is not turned back into
    /// a delayed one.
    #[cold]
    #[inline(never)]
    pub(super) fn ecn_on_data(&mut self, seg: &TcpRepr<'_>) {
        let ecn = self.ecn.rx;
        if !self.ecn_ok() || seg.payload.is_empty() {
            return;
        }
        if seg.flags.contains(TcpFlags::CWR) {
            // The sender reduced its window: stop echoing, and acknowledge at once (its cwnd
            // may be a single segment).
            self.ecn.flags &= !ecn_flag::DEMAND_CWR;
            self.out.ack_due = AckDue::Now;
        }
        match ecn {
            Ecn::Ce => {
                self.rare_counters().rx_ce_segments += 1;
                if self.ecn.flags & ecn_flag::DEMAND_CWR == 0 {
                    self.ecn.flags |= ecn_flag::DEMAND_CWR;
                    // Linux enters quick-ACK mode: the sender may have a very small cwnd.
                    self.out.ack_due = AckDue::Now;
                }
                self.ecn.flags |= ecn_flag::SEEN;
            }
            Ecn::Ect0 | Ecn::Ect1 => self.ecn.flags |= ecn_flag::SEEN,
            Ecn::NotEct => {}
        }
    }

    /// An acceptable ACK, before its acknowledgment is taken: an ECN-Echo starts the window
    /// reduction unless one is under way or the data outstanding already paid for a loss
    /// (recovery, or a timeout's go-back not yet past its recovery point). Returns whether the
    /// ACK carried ECE (for `delivered_ce`). `flight_bytes` is what was outstanding.
    #[cold]
    #[inline(never)]
    pub(super) fn ecn_on_ack(&mut self, now: u64, seg: &TcpRepr<'_>, flight_bytes: u32) -> bool {
        if !self.ecn_ok() || !seg.flags.contains(TcpFlags::ECE) || seg.flags.contains(TcpFlags::SYN)
        {
            return false;
        }
        self.rare_counters().rx_ece_acks += 1;
        if flight_bytes == 0
            || self.rec.in_recovery
            || self.ecn_in_cwr()
            || self.snd.una.lt(self.rec.recover)
        {
            return true;
        }
        let mss = u32::from(self.eff_mss());
        self.rare_counters().ecn_window_reductions += 1;
        // With PRR the window comes down with the ACKs (`ecn_cwr_on_ack`); without, at once
        // (RFC 3168 §6.1.2: halve cwnd, reduce ssthresh).
        let prr = self.config.prr;
        self.cc.on_ecn_echo(now, flight_bytes, mss, !prr);
        self.ecn.flags |= ecn_flag::IN_CWR | ecn_flag::QUEUE_CWR;
        self.ecn.cwr_end = self.snd.max;
        self.rec.prr_delivered_bytes = 0;
        self.rec.prr_out_bytes = 0;
        self.rec.prr_recover_fs_bytes = flight_bytes;
        true
    }

    /// After an ACK's delivery is counted, in the window reduction: the reduction ends once
    /// SND.UNA reaches what was outstanding when it began (cwnd = ssthresh, Linux
    /// `tcp_end_cwnd_reduction`); until then, with PRR, cwnd = pipe + sndcnt with the
    /// conservative bound below ssthresh (no retransmission is being repaired).
    #[cold]
    #[inline(never)]
    pub(super) fn ecn_cwr_on_ack(&mut self, delivered_bytes: u32) {
        if !self.snd.una.lt(self.ecn.cwr_end) {
            self.ecn.flags &= !ecn_flag::IN_CWR;
            if self.config.prr {
                self.cc.on_prr_recovery_exit();
            }
            return;
        }
        if !self.config.prr || delivered_bytes == 0 {
            return;
        }
        let mss = u32::from(self.eff_mss());
        self.rec.prr_delivered_bytes = self.rec.prr_delivered_bytes.saturating_add(delivered_bytes);
        let pipe = self.pipe_bytes();
        let ssthresh = self.cc.ssthresh_bytes();
        let sndcnt = if pipe > ssthresh {
            self.prr_proportional_sndcnt(ssthresh)
        } else {
            // PRR-CRB (RFC 6937 §3): no more than was delivered.
            (ssthresh - pipe).min(delivered_bytes)
        };
        let sndcnt = if self.rec.prr_out_bytes == 0 {
            sndcnt.max(mss)
        } else {
            sndcnt
        };
        self.cc
            .set_recovery_window(pipe.saturating_add(sndcnt).max(mss));
    }

    /// The window was reduced for a loss (fast recovery, a timeout): the next new data
    /// segment carries CWR (§6.1.2, "for any reason"), and an ECN reduction in progress is
    /// over (the loss's takes its place). Returns whether one was in progress.
    pub(super) fn ecn_on_loss_reduction(&mut self) -> bool {
        if !self.ecn_ok() {
            return false;
        }
        let was_cwr = self.ecn_in_cwr();
        self.ecn.flags = (self.ecn.flags & !ecn_flag::IN_CWR) | ecn_flag::QUEUE_CWR;
        was_cwr
    }
}
