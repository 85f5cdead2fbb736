//! Loss recovery on the ACK path: duplicate ACKs and fast recovery (RFC 5681, RFC 6582),
//! PRR (RFC 6937), RACK loss detection (RFC 8985), the SACK scoreboard (RFC 2018) and the
//! pipe and next-retransmission rules of RFC 6675. `input.rs` calls these from `rx_ack`.

use wire::tcp::{SeqNumber, TcpRepr};

use super::*;

impl Connection {
    pub(super) fn on_dupack(&mut self, now: u64, mss: u32, flight: u32) {
        self.rec.dupacks = self.rec.dupacks.saturating_add(1);
        if self.rec.in_recovery {
            if !self.opts.sack_ok {
                // RFC 5681 §3.2 step 4: inflate by one SMSS per additional duplicate (with
                // SACK, RFC 6675 counts the pipe instead).
                self.cc.on_recovery_dupack(mss);
            }
            return;
        }
        // RFC 6582 §3.2 step 2: only if the cumulative ACK covers more than `recover`
        // (avoids repeated fast retransmits after a timeout). With RACK the duplicate ACKs'
        // SACK blocks decide instead (RFC 8985 §6.2).
        if u32::from(self.rec.dupacks) == DUP_THRESH
            && self.snd.una.gt(self.rec.recover)
            && !self.rack_active()
        {
            self.enter_recovery(now, mss, flight);
        }
        // dupacks 1 and 2: RFC 3042 limited transmit, applied in `usable_window`.
    }

    /// RFC 6937 §3's proportional part, while the pipe is above ssthresh: what may be sent
    /// now so that all sent in the episode stays `ssthresh / RecoverFS` of all delivered,
    /// rounded up (`CEIL(prr_delivered · ssthresh / RecoverFS) − prr_out`).
    pub(super) fn prr_proportional_sndcnt(&self, ssthresh: u32) -> u32 {
        let fs = u64::from(self.rec.prr_recover_fs_bytes.max(1));
        let target = (u64::from(self.rec.prr_delivered_bytes) * u64::from(ssthresh)).div_ceil(fs);
        u32::try_from(target)
            .unwrap_or(u32::MAX)
            .saturating_sub(self.rec.prr_out_bytes)
    }

    /// RFC 6937 §3, on every ACK in SACK recovery: cwnd = pipe + sndcnt, where sndcnt keeps
    /// what was sent in proportion ssthresh/RecoverFS to what was delivered while the pipe is
    /// above ssthresh, and otherwise lets it grow back by what was delivered (plus one segment
    /// on an ACK advancing SND.UNA). The first ACK always allows one segment: the fast
    /// retransmission.
    pub(super) fn prr_on_ack(&mut self, mss: u32, delivered: u32, una_advanced: bool) {
        if delivered == 0 {
            return;
        }
        self.rec.prr_delivered_bytes = self.rec.prr_delivered_bytes.saturating_add(delivered);
        let pipe = self.pipe_bytes();
        let ssthresh = self.cc.ssthresh_bytes();
        let sndcnt = if pipe > ssthresh {
            self.prr_proportional_sndcnt(ssthresh)
        } else {
            let mut limit = self
                .rec
                .prr_delivered_bytes
                .saturating_sub(self.rec.prr_out_bytes)
                .max(delivered);
            if una_advanced {
                limit = limit.saturating_add(mss);
            }
            limit.min(ssthresh - pipe)
        };
        let sndcnt = if self.rec.prr_out_bytes == 0 {
            sndcnt.max(mss)
        } else {
            sndcnt
        };
        self.cc
            .set_recovery_window(pipe.saturating_add(sndcnt).max(mss));
    }

    /// RFC 8985 §6.2 steps 2–4 for one ACK, once its SACK blocks are on the scoreboard: what
    /// it delivered updates RACK.rtt, RACK.xmit_ts and RACK.fack, and a DSACK may grow the
    /// reordering window.
    pub(super) fn rack_on_ack(&mut self, now: u64, seg: &TcpRepr<'_>) -> crate::rack::Delivery {
        // SND.UNA after this ACK: an ACK below SND.UNA only brings SACK blocks.
        let una = if seg.ack_number.gt(self.snd.una) {
            seg.ack_number
        } else {
            self.snd.una
        };
        let echo = seg.timestamp.filter(|_| self.opts.ts_ok).map(|t| t.tsecr);
        let ts_offset = self.ts.offset;
        // RFC 8985 §6.2: "the Timestamp Echo Reply field ... indicates the ACK was not
        // acknowledging the last retransmission of the segment".
        let echo_predates = |xmit_ns: u64| {
            let ts_at_xmit = ((xmit_ns / NS_PER_MS) as u32).wrapping_add(ts_offset);
            echo.is_some_and(|e| ts_lt(e, ts_at_xmit))
        };
        let order = if self.config.rack_rtt_from_last_in_sequence {
            crate::rack::RackRttOrder::LastInSequence
        } else {
            crate::rack::RackRttOrder::LatestSent
        };
        let Some(rack) = self.rack.as_mut() else {
            // Nothing was ever sent: nothing to deliver.
            return crate::rack::Delivery::default();
        };
        let mut d = rack.on_ack(now, una, &self.scoreboard, echo_predates, order);
        d.reo_wnd_grew = rack.on_dsack_round(una, self.snd.max, has_dsack(seg));
        d
    }

    /// RFC 8985 §6.2 step 5 (`RACK_detect_loss_and_arm_timer`): marks what is lost by now and
    /// sets the reordering timer for the segments not yet old enough to judge.
    pub(super) fn rack_detect_loss(&mut self, now: u64) {
        // The hint first (a hot line): a receiver has no RACK state, and its niche is cold.
        if self.out.held & held::RACK == 0 {
            return;
        }
        let srtt_ns = self.rtt.has_sample.then_some(self.rtt.srtt_ns());
        let in_recovery = self.rec.in_recovery;
        let Some(rack) = self.rack.as_mut() else {
            return;
        };
        let reo_wnd_ns = rack.reo_wnd_ns(in_recovery || rack.rto_recovery, srtt_ns);
        let d = rack.detect_loss(now, reo_wnd_ns);
        self.set_deadline(Deadline::Rack, d.deadline_ns.unwrap_or(NEVER));
        self.count_rare(u64::from(d.lost), |k| &mut k.rack_loss_marks);
        self.count_rare(u64::from(d.lost_retransmissions), |k| {
            &mut k.rack_lost_retransmits
        });
    }

    /// Starts recovery when RACK has marked a segment lost (RFC 8985 §6.2: the sender enters
    /// fast recovery on RACK's loss inference), with RFC 6582 §3.2's guard: not for data sent
    /// before a timeout's recovery point, which the timeout's go-back is already resending.
    pub(super) fn rack_maybe_enter_recovery(&mut self, now: u64, mss: u32, flight: u32) {
        if self.rec.in_recovery || self.out.held & held::RACK == 0 {
            return;
        }
        let Some(first_lost) = self.rack.as_mut().and_then(|r| r.first_lost()) else {
            return;
        };
        let new_data_lost = self.snd.nxt == self.snd.max && first_lost.ge(self.rec.recover);
        if self.snd.una.gt(self.rec.recover) || new_data_lost {
            self.enter_recovery(now, mss, flight);
        }
    }

    pub(super) fn enter_recovery(&mut self, now: u64, mss: u32, flight: u32) {
        self.rec.recover = self.snd.max;
        // RFC 6675 §5 step (4.2): cwnd = ssthresh, the pipe governing sending; without SACK
        // RFC 5681 §3.2 step 3: cwnd = ssthresh + 3*SMSS. Inside an ECN reduction ssthresh
        // was set for this window already (RFC 3168 §6.1.2), and PRR continues its episode.
        if self.ecn_on_loss_reduction() {
            self.cc.enter_recovery_reduced(mss, self.opts.sack_ok);
        } else {
            self.cc.enter_recovery(now, flight, mss, self.opts.sack_ok);
            self.rec.prr_delivered_bytes = 0;
            self.rec.prr_out_bytes = 0;
            self.rec.prr_recover_fs_bytes = flight;
        }
        self.rec.high_rxt = self.snd.una;
        self.rec.in_recovery = true;
        if self.opts.sack_ok && self.config.prr {
            // RFC 6937: until an ACK reports delivery, PRR allows only the fast
            // retransmission (sent whatever the pipe); the ACK that started recovery, if one
            // did, sets cwnd from what it delivered right after this. Without it — RACK's
            // reordering timer — cwnd = ssthresh would let the pipe send a burst.
            self.cc.set_recovery_window(self.pipe_bytes().max(mss));
        }
        // RFC 5681 §3.2 step 2 / RFC 6675 §5 step (4.3): retransmit the first unacked segment
        // (with RACK, the first segment it deemed lost), whatever the pipe.
        self.rec.rtx_pending = true;
        self.rare_counters().fast_retransmits += 1;
    }

    /// Records the SACK blocks of an acceptable ACK (RFC 2018 §4, RFC 6675 §5); returns
    /// whether anything new was SACKed. Blocks must lie within (SND.UNA, SND.MAX]: anything
    /// else (including D-SACK blocks below SND.UNA) is ignored and counted.
    pub(super) fn rx_sack_blocks(&mut self, now: u64, seg: &TcpRepr<'_>) -> bool {
        let before = self.scoreboard.bytes();
        let floor = self.snd.una.max(seg.ack_number);
        let dsack = has_dsack(seg);
        let mut valid = [None; 4];
        for (i, b) in seg.sack_blocks.iter().flatten().enumerate() {
            if i == 0 && dsack {
                // RFC 2883 §4: the peer got something twice (a spurious retransmission or a
                // duplicated segment).
                self.rare_counters().rx_dsack_blocks += 1;
                continue;
            }
            if !(floor.lt(b.left) && b.left.lt(b.right) && b.right.le(self.snd.max)) {
                self.rare_counters().rx_sack_blocks_invalid += 1;
                continue;
            }
            valid[i] = Some(*b);
        }
        // In ascending order, as Linux's `tcp_sacktag_write_queue`: a block is judged
        // against the highest SACKed sequence before it, so lower blocks of one ACK are no
        // reordering among themselves.
        let una = self.snd.una;
        valid.sort_by_key(|b| b.map_or(u32::MAX, |b| fwd(una, b.left)));
        let mut highest = self.highest_sacked();
        let mut reord: Option<SeqNumber> = None;
        for b in valid.into_iter().flatten() {
            // The first byte of the block not SACKed before (Linux tags per segment: the
            // newly SACKed one's start).
            let low = self.scoreboard.next_hole(b.left);
            if low.lt(b.right) && low.lt(highest) && !self.retransmitted_in(low, b.right) {
                // Never-retransmitted data SACKed below data SACKed before: reordering.
                reord = Some(reord.map_or(low, |r| if low.lt(r) { low } else { r }));
            }
            let inserted = self
                .scoreboard
                .insert(b.left, b.right, u32::MAX, SCOREBOARD_RANGES_MAX);
            if self.scoreboard.is_allocated() {
                self.out.held |= held::SCOREBOARD;
            }
            if inserted.is_err() {
                self.rare_counters().rx_sack_blocks_dropped += 1;
            } else if b.right.gt(highest) {
                highest = b.right;
            }
        }
        self.scoreboard.remove_below(floor);
        if let Some(low) = reord {
            self.note_reordering(now, low, self.highest_sacked());
        }
        self.scoreboard.bytes() > before
    }

    /// The first never-retransmitted byte in `[from, to)` that the scoreboard does not hold:
    /// what a cumulative ACK up to `to` delivers in a hole (Linux `tcp_clean_rtx_queue`'s
    /// `reord`).
    pub(super) fn first_original_hole(&self, from: SeqNumber, to: SeqNumber) -> Option<SeqNumber> {
        let mut at = self.scoreboard.next_hole(from);
        // Bounded: each step passes one scoreboard range.
        for _ in 0..=SCOREBOARD_RANGES_MAX {
            if !at.lt(to) {
                return None;
            }
            let end = self
                .scoreboard
                .next_left_after(at)
                .filter(|l| l.lt(to))
                .unwrap_or(to);
            if !self.retransmitted_in(at, end) {
                return Some(at);
            }
            at = self.scoreboard.next_hole(end);
        }
        None
    }

    /// RFC 6675 §4 SetPipe: bytes believed in the network — unSACKed bytes not deemed lost,
    /// plus retransmitted lost bytes.
    ///
    /// With RACK, "deemed lost" is RACK's judgement (RFC 8985 §6.2), and a retransmission
    /// clears it: lost bytes leave the pipe until they are sent again.
    pub(super) fn pipe_bytes(&self) -> u32 {
        let mss = u32::from(self.eff_mss());
        let una = self.snd.una;
        let flight = fwd(una, self.snd.max);
        let sacked = self.scoreboard.bytes();
        if self.rack_active() {
            let lost = self
                .rack
                .as_ref()
                .map_or(0, |r| r.lost_unsacked_bytes(&self.scoreboard));
            return flight.saturating_sub(sacked).saturating_sub(lost);
        }
        let boundary = self
            .scoreboard
            .lost_boundary(mss, DUP_THRESH)
            .unwrap_or(una)
            .max(una);
        let lost = fwd(una, boundary).saturating_sub(self.scoreboard.bytes_in(una, boundary));
        let rtx_end = self.rec.high_rxt.min(boundary).max(una);
        let rtx = fwd(una, rtx_end).saturating_sub(self.scoreboard.bytes_in(una, rtx_end));
        flight
            .saturating_sub(sacked)
            .saturating_sub(lost)
            .saturating_add(rtx)
    }

    /// RFC 6675 §4 NextSeg rule (1): the first unSACKed, lost, not yet retransmitted range;
    /// with `rule3`, any unSACKed range above HighRxt (rule (3), used when no new data can be
    /// sent, so holes at the tail of a transfer need not wait for the RTO).
    ///
    /// With RACK, rule (1)'s lost segments are those RACK deemed lost, and rule (3) is not
    /// used: RACK's reordering timer and the tail loss probe cover the tail (RFC 8985 §7),
    /// rather than resending segments nothing says are lost.
    pub(super) fn sack_next_retransmission(&self, rule3: bool) -> Option<(SeqNumber, u32)> {
        let mss = u32::from(self.eff_mss());
        if self.rack_active() {
            return self.rack_next_lost(mss);
        }
        let start = self
            .scoreboard
            .next_hole(self.rec.high_rxt.max(self.snd.una));
        if !start.lt(self.snd.max) {
            return None;
        }
        if !rule3 {
            let boundary = self.scoreboard.lost_boundary(mss, DUP_THRESH)?;
            if !start.lt(boundary) {
                return None;
            }
        }
        let end = self
            .scoreboard
            .next_left_after(start)
            .unwrap_or(self.snd.max)
            .min(self.snd.max);
        Some((start, fwd(start, end).min(mss)))
    }

    /// NextSeg rule (1) with RACK's losses (see [`Connection::sack_next_retransmission`]).
    pub(super) fn rack_next_lost(&self, mss: u32) -> Option<(SeqNumber, u32)> {
        self.rack.as_ref()?.next_lost(&self.scoreboard, mss)
    }
}

/// RFC 2883 §4: the first SACK block reports a duplicate (a D-SACK) when it lies below the
/// cumulative ACK or inside the second block.
fn has_dsack(seg: &TcpRepr<'_>) -> bool {
    let mut blocks = seg.sack_blocks.iter().flatten();
    let Some(first) = blocks.next() else {
        return false;
    };
    first.left.lt(first.right)
        && (first.right.le(seg.ack_number)
            || blocks
                .next()
                .is_some_and(|b| b.left.le(first.left) && first.right.le(b.right)))
}
