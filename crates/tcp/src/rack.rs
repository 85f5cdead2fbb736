//! RACK, time-based loss detection (RFC 8985 §6), over a bounded table of transmit records.
//!
//! The engine keeps its send data as one byte ring; what RACK needs besides it is, for every
//! unacknowledged segment, when it was last sent and whether it was retransmitted, delivered
//! (SACKed) or deemed lost. `Rack` keeps that as a sequence-ordered table of records, one
//! per transmitted segment (`Connection::data_segment` reports each one), and the RACK
//! variables: `RACK.xmit_ts`/`RACK.end_seq` (the most recently sent segment known delivered),
//! `RACK.rtt`, `RACK.min_RTT`, `RACK.fack`, `RACK.reordering_seen` and the reordering window's
//! DSACK adaptation (§6.2 steps 1–5).
//!
//! SACK state itself stays in the connection's scoreboard ([`crate::ooo::OooQueue`]); the
//! records only remember which segments were found delivered, so that each delivery is seen
//! once. A segment counts as delivered when its whole range is cumulatively acknowledged or
//! SACKed (RFC 8985 §5.1).
//!
//! The table is bounded (`RECORDS_MAX`, 256 records). When a transmission needs a record and
//! the table is full, two neighbouring records are merged, preferring neighbours sent at the
//! same time. A merge of records sent at different times keeps the later time (so the merged
//! range is never deemed lost earlier than its newest part would be) and is marked as merged:
//! its delivery no longer advances `RACK.xmit_ts` (its send time is no longer exact).
//! Precision is lost, never safety: the retransmission timeout and the tail loss probe remain
//! the backstops.

use std::collections::VecDeque;

use wire::tcp::SeqNumber;

use crate::ooo::OooQueue;

/// Most transmit records kept per connection (each is one segment, or several merged).
/// 256 records of 24 bytes: 6 KiB for the largest flight, allocated as the flight grows.
pub(crate) const RECORDS_MAX: usize = 256;
/// RFC 8985 §6.2: `RACK.min_RTT` is a windowed minimum. Linux's `tcp_min_rtt_wlen` default:
/// a sample older than this is replaced by the next one.
const MIN_RTT_WINDOW_NS: u64 = 300 * crate::config::NS_PER_S;
/// RFC 8985 §6.2 step 4: recoveries without DSACK before the window multiplier resets.
const REO_WND_PERSIST: u8 = 16;
/// RFC 6675 DupThresh as RACK uses it (§6.2 step 4): SACKed segments that make the
/// reordering window zero while no reordering has been seen.
const DUP_THRESH_SEGMENTS: u32 = 3;

const RETRANSMITTED: u8 = 1;
const LOST: u8 = 2;
const DELIVERED: u8 = 4;
/// Several segments sent at different times, or partly retransmitted: the send time is the
/// latest of them, so the record's delivery says nothing exact about RACK.xmit_ts.
const MERGED: u8 = 8;

/// One transmitted segment (or several merged): `[left, right)` in sequence space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    left: SeqNumber,
    right: SeqNumber,
    /// When the segment was last sent (`Segment.xmit_ts`).
    xmit_ns: u64,
    flags: u8,
}

impl Record {
    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// RFC 8985 `RACK_sent_after(t1, seq1, t2, seq2)`: was (t1, seq1) sent after (t2, seq2)? Equal
/// times (one burst) are ordered by sequence number.
fn sent_after(t1: u64, seq1: SeqNumber, t2: u64, seq2: SeqNumber) -> bool {
    t1 > t2 || (t1 == t2 && seq1.gt(seq2))
}

/// What one ACK delivered, as RACK saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Delivery {
    /// An eligible segment was delivered: `RACK.rtt` was updated (§6.2 step 2) and loss
    /// detection should run.
    pub advanced: bool,
    /// The ACK carried a DSACK that grew the reordering window (§6.2 step 4); set by the
    /// connection after [`Rack::on_dsack_round`].
    pub reo_wnd_grew: bool,
    /// The congestion controller's RTT sample for this ACK (Linux's `ca_rtt_us`, what CUBIC's
    /// HyStart reads): the RTT of the highest never-retransmitted segment it newly SACKed,
    /// or, without one, of the highest never-retransmitted segment it newly acknowledged
    /// cumulatively, provided no retransmitted segment was among those (Karn). `None` when
    /// the ACK delivered nothing that qualifies.
    pub ca_rtt_ns: Option<u64>,
}

/// Which delivered segment sets `RACK.rtt` when one ACK delivers several (RFC 8985 §6.2
/// step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RackRttOrder {
    /// The most recently sent eligible segment (RFC 8985: segments are visited in ascending
    /// order of their transmission time).
    LatestSent,
    /// The last eligible segment visited in sequence order, newly SACKed segments first and
    /// then the cumulatively acknowledged ones, as Linux's `tcp_rack_advance` is called from
    /// `tcp_sacktag_one` and then `tcp_clean_rtx_queue`.
    LastInSequence,
}

/// What one run of loss detection found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Detection {
    /// Records newly marked lost.
    pub lost: u32,
    /// Of those, records that were retransmissions (a retransmission lost again).
    pub lost_retransmissions: u32,
    /// When the reordering timer must fire to judge the segments not yet old enough.
    pub deadline_ns: Option<u64>,
}

impl Rack {
    /// Gives back the record table's storage when it holds no record (nothing in flight);
    /// returns the bytes released.
    pub(crate) fn release_if_empty(&mut self) -> usize {
        if !self.records.is_empty() || self.records.capacity() == 0 {
            return 0;
        }
        let bytes = self.records.capacity() * core::mem::size_of::<Record>();
        self.records = VecDeque::new();
        bytes
    }
}

/// The RACK state of one connection (RFC 8985 §5.2, §6).
///
/// Invariants: records are sorted by sequence number, non-empty, and contiguous (each record's
/// `left` is its predecessor's `right`); the connection keeps them covering exactly
/// `[SND.UNA, SND.MAX)` of a synchronized connection (checked by
/// `Connection::invariant_violation`); at most [`RECORDS_MAX`] records.
///
/// Aligned to a cache line: its 86 bytes, read on every ACK of new data, take two lines of
/// the TCB wherever the fields before it end (test `hot_parts_come_first_without_padding`).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub(crate) struct Rack {
    // `repr(C)`, in this order: what a sender reads per data segment sent (the records'
    // header, `RACK.fack` and the presence bits) in the first line, the rest of an ACK's
    // fields after it.
    records: VecDeque<Record>,
    /// `RACK.fack`: the highest right edge delivered so far, when [`rack_set::FACK`] is set
    /// ([`Rack::fack`]).
    fack_seq: SeqNumber,
    /// Which of the optional values here hold one ([`rack_set`] bits): one byte for five
    /// `Option`s, whose tags took 4 to 8 bytes each (issue 17 item 2).
    set: u8,
    /// `RACK.reordering_seen`.
    reordering_seen: bool,
    /// `RACK.reo_wnd_mult` (≥ 1) and `RACK.reo_wnd_persist`.
    reo_wnd_mult: u8,
    reo_wnd_persist: u8,
    /// `RACK.rtt`: the RTT of the most recently sent segment delivered by the latest ACK that
    /// delivered an eligible one.
    rtt_ns: u64,
    /// `RACK.xmit_ts` (with `latest_end_seq`, when [`rack_set::LATEST`] is set): the most
    /// recently sent segment known delivered ([`Rack::latest`]).
    latest_xmit_ns: u64,
    /// `RACK.min_RTT` and when it was sampled (windowed minimum, [`MIN_RTT_WINDOW_NS`]),
    /// when [`rack_set::MIN_RTT`] is set ([`Rack::min_rtt`]).
    min_rtt_value_ns: u64,
    min_rtt_at_ns: u64,
    /// `RACK.end_seq`, with `latest_xmit_ns`.
    latest_end_seq: SeqNumber,
    /// `RACK.dsack_round`: SND.NXT when the window last grew on a DSACK, when
    /// [`rack_set::DSACK_ROUND`] is set ([`Rack::dsack_round`]).
    dsack_round_seq: SeqNumber,
    /// The right edge of the highest record holding a retransmission, if one is recorded
    /// ([`rack_set::RTX_RIGHT`], [`Rack::rtx_right`]): every record from there on is an
    /// original transmission, and originals are sent in sequence order, so their send times
    /// never decrease along the table. Loss detection stops at the first of them not sent
    /// before `RACK.xmit_ts`.
    rtx_right_seq: SeqNumber,
    /// The connection is recovering from a retransmission timeout (until SND.UNA passes the
    /// recovery point): RFC 8985's "RTO recovery".
    pub rto_recovery: bool,
    /// False only when no record is lost: the queries behind every ACK (`first_lost`, the
    /// pipe, NextSeg) then skip the scan.
    lost_hint: bool,
}

/// The bits of `Rack::set`: which optional value holds one.
mod rack_set {
    pub(super) const LATEST: u8 = 1;
    pub(super) const MIN_RTT: u8 = 2;
    pub(super) const FACK: u8 = 4;
    pub(super) const DSACK_ROUND: u8 = 8;
    pub(super) const RTX_RIGHT: u8 = 16;
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            records: VecDeque::new(),
            rtt_ns: 0,
            latest_xmit_ns: 0,
            min_rtt_value_ns: 0,
            min_rtt_at_ns: 0,
            latest_end_seq: SeqNumber(0),
            fack_seq: SeqNumber(0),
            dsack_round_seq: SeqNumber(0),
            rtx_right_seq: SeqNumber(0),
            set: 0,
            reordering_seen: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            rto_recovery: false,
            lost_hint: false,
        }
    }
}

/// The RACK state that moves with a connection in a snapshot: path properties (minimum RTT,
/// reordering) that would otherwise take many round trips to learn again. The per-segment
/// records do not move (see `Connection::import`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RackPathState {
    /// `RACK.min_RTT`, once sampled.
    pub min_rtt_ns: Option<u64>,
    /// How long before the export `min_rtt_ns` was sampled (its window keeps running).
    pub min_rtt_age_ns: u64,
    /// `RACK.reordering_seen`.
    pub reordering_seen: bool,
    /// `RACK.reo_wnd_mult`: the reordering window in quarters of min_RTT (1 when unset).
    pub reo_wnd_mult: u8,
    /// `RACK.reo_wnd_persist`: recoveries left before the multiplier returns to 1.
    pub reo_wnd_persist: u8,
}

impl Rack {
    /// Fresh state with the path properties of `path` (a snapshot's) at `now`.
    pub(crate) fn with_path(path: &RackPathState, now: u64) -> Rack {
        let mut r = Rack {
            reordering_seen: path.reordering_seen,
            reo_wnd_mult: path.reo_wnd_mult.max(1),
            reo_wnd_persist: path.reo_wnd_persist.min(REO_WND_PERSIST),
            ..Rack::default()
        };
        r.set_min_rtt(
            path.min_rtt_ns
                .map(|m| (m, now.saturating_sub(path.min_rtt_age_ns))),
        );
        r
    }

    /// `(RACK.xmit_ts, RACK.end_seq)`, once a delivery set them.
    fn latest(&self) -> Option<(u64, SeqNumber)> {
        (self.set & rack_set::LATEST != 0).then_some((self.latest_xmit_ns, self.latest_end_seq))
    }

    fn set_latest(&mut self, v: (u64, SeqNumber)) {
        (self.latest_xmit_ns, self.latest_end_seq) = v;
        self.set |= rack_set::LATEST;
    }

    /// `(RACK.min_RTT, when sampled)`, once sampled.
    fn min_rtt(&self) -> Option<(u64, u64)> {
        (self.set & rack_set::MIN_RTT != 0).then_some((self.min_rtt_value_ns, self.min_rtt_at_ns))
    }

    fn set_min_rtt(&mut self, v: Option<(u64, u64)>) {
        let (m, at) = v.unwrap_or((0, 0));
        (self.min_rtt_value_ns, self.min_rtt_at_ns) = (m, at);
        self.set = self.set & !rack_set::MIN_RTT | if v.is_some() { rack_set::MIN_RTT } else { 0 };
    }

    /// `RACK.fack`, once anything was delivered.
    fn fack(&self) -> Option<SeqNumber> {
        (self.set & rack_set::FACK != 0).then_some(self.fack_seq)
    }

    /// `RACK.dsack_round`, while a round runs.
    fn dsack_round(&self) -> Option<SeqNumber> {
        (self.set & rack_set::DSACK_ROUND != 0).then_some(self.dsack_round_seq)
    }

    fn set_dsack_round(&mut self, v: Option<SeqNumber>) {
        self.dsack_round_seq = v.unwrap_or(SeqNumber(0));
        self.set = self.set & !rack_set::DSACK_ROUND
            | if v.is_some() {
                rack_set::DSACK_ROUND
            } else {
                0
            };
    }

    /// The right edge of the highest record holding a retransmission, if one is recorded.
    fn rtx_right(&self) -> Option<SeqNumber> {
        (self.set & rack_set::RTX_RIGHT != 0).then_some(self.rtx_right_seq)
    }

    fn set_rtx_right(&mut self, v: Option<SeqNumber>) {
        self.rtx_right_seq = v.unwrap_or(SeqNumber(0));
        self.set =
            self.set & !rack_set::RTX_RIGHT | if v.is_some() { rack_set::RTX_RIGHT } else { 0 };
    }

    /// Whether anything worth carrying in a snapshot was learnt.
    pub(crate) fn path_is_default(path: &RackPathState) -> bool {
        *path == RackPathState::default()
    }

    /// The path properties to carry in a snapshot taken at `now`.
    pub(crate) fn path(&self, now: u64) -> RackPathState {
        RackPathState {
            min_rtt_ns: self.min_rtt().map(|(m, _)| m),
            min_rtt_age_ns: self.min_rtt().map_or(0, |(_, at)| now.saturating_sub(at)),
            reordering_seen: self.reordering_seen,
            reo_wnd_mult: self.reo_wnd_mult,
            reo_wnd_persist: self.reo_wnd_persist,
        }
    }

    /// `RACK.min_RTT`, once sampled.
    pub(crate) fn min_rtt_ns(&self) -> Option<u64> {
        self.min_rtt().map(|(m, _)| m)
    }

    /// Whether data segment reordering has been seen (§6.2 step 3).
    pub(crate) fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }

    /// Whether any record overlapping `[left, right)` was retransmitted (Linux's
    /// `TCPCB_RETRANS`): its delivery says nothing about reordering.
    pub(crate) fn retransmitted_in(&self, left: SeqNumber, right: SeqNumber) -> bool {
        self.records
            .iter()
            .any(|r| r.has(RETRANSMITTED) && r.left.lt(right) && left.lt(r.right))
    }

    /// The sequence range the records cover, if any.
    pub(crate) fn covered(&self) -> Option<(SeqNumber, SeqNumber)> {
        Some((self.records.front()?.left, self.records.back()?.right))
    }

    /// Records held.
    #[cfg(test)]
    pub(crate) fn records_len(&self) -> usize {
        self.records.len()
    }

    /// RFC 8985 §6.2 step 1: an RTT measurement feeds the windowed minimum: a smaller sample,
    /// or any sample once the minimum is older than the window, replaces it. The samples are
    /// RFC 6298 measurements on the ns clock: the connection's handshake and Karn-timed
    /// segments, and [`Rack::on_ack`]'s never-retransmitted segments. RFC 7323 echoes are
    /// not used: their 1 ms tick is coarser than RFC 8985 §4 allows on a sub-millisecond
    /// path, where one zero sample would close the reordering window and the ambiguity guard.
    pub(crate) fn note_rtt_sample(&mut self, now: u64, rtt_ns: u64) {
        match self.min_rtt() {
            Some((m, at)) if rtt_ns > m && now.saturating_sub(at) <= MIN_RTT_WINDOW_NS => {}
            _ => self.set_min_rtt(Some((rtt_ns, now))),
        }
    }

    /// RFC 8985 §6.1: `[left, right)` was just sent at `now` (`Segment.xmit_ts = Now()`,
    /// `Segment.lost = FALSE`; a retransmission also sets `Segment.retransmitted`). Bytes
    /// below the table's right edge are retransmissions, bytes beyond it new data. Returns how
    /// many merges the table's bound forced.
    pub(crate) fn on_send(&mut self, left: SeqNumber, right: SeqNumber, now: u64) -> u32 {
        if !left.lt(right) {
            return 0;
        }
        // New data at the table's right edge, the common case: what the general case below
        // does for it (no byte below the edge, so no retransmission) is this append.
        if self.records.back().is_some_and(|b| b.right == left) {
            return self.append(left, right, now);
        }
        let Some((lo, hi)) = self.covered() else {
            return self.append(left, right, now);
        };
        if left.gt(hi) || left.lt(lo) {
            // Not contiguous with what is recorded (the connection keeps the table covering
            // [SND.UNA, SND.MAX), so only an inconsistent caller gets here): start afresh
            // rather than keep a gap.
            debug_assert!(
                false,
                "transmission {left:?}..{right:?} outside {lo:?}..{hi:?}"
            );
            self.records.clear();
            return self.append(left, right, now);
        }
        let mut merges = 0;
        let rtx_end = if right.lt(hi) { right } else { hi };
        if left.lt(rtx_end) {
            // Room for the up to two records the splits below add.
            merges += self.make_room(2);
            if self.split_at(left) && self.split_at(rtx_end) {
                for r in self.records.iter_mut() {
                    if !r.left.lt(left) && !r.right.gt(rtx_end) {
                        r.xmit_ns = now;
                        r.flags = (r.flags | RETRANSMITTED) & !(LOST | DELIVERED);
                    }
                }
                self.note_retransmitted_up_to(rtx_end);
            } else {
                // No room to isolate the retransmitted bytes: the records around them take
                // the new time (later, so never deemed lost too early) and count as merged.
                let mut touched_right = rtx_end;
                for r in self.records.iter_mut() {
                    if r.left.lt(rtx_end) && r.right.gt(left) {
                        r.xmit_ns = now;
                        r.flags = (r.flags | RETRANSMITTED | MERGED) & !(LOST | DELIVERED);
                        touched_right = touched_right.max(r.right);
                    }
                }
                self.note_retransmitted_up_to(touched_right);
            }
        }
        if right.gt(hi) {
            merges += self.append(hi, right, now);
        }
        merges
    }

    /// A record ending at `right` now holds a retransmission.
    fn note_retransmitted_up_to(&mut self, right: SeqNumber) {
        if self.rtx_right().is_none_or(|r| r.lt(right)) {
            self.set_rtx_right(Some(right));
        }
    }

    /// `k` transmissions of new data at `now`, back to back from `left`, `seg` bytes each:
    /// what `k` calls of [`Rack::on_send`] leave (one record per segment), appended in one
    /// go when they continue the table at its right edge and fit it without merging; else
    /// through `on_send` one by one. Returns the merges done.
    pub(crate) fn on_send_run(&mut self, left: SeqNumber, seg: u32, k: u32, now: u64) -> u32 {
        let continues = self.records.back().is_none_or(|b| b.right == left);
        if seg > 0 && continues && self.records.len() + k as usize <= RECORDS_MAX {
            self.records.extend((0..k).map(|j| Record {
                left: left + j * seg,
                right: left + (j + 1) * seg,
                xmit_ns: now,
                flags: 0,
            }));
            return 0;
        }
        let mut merges = 0;
        for j in 0..k {
            merges += self.on_send(left + j * seg, left + (j + 1) * seg, now);
        }
        merges
    }

    /// Appends a new transmission at the right edge.
    fn append(&mut self, left: SeqNumber, right: SeqNumber, now: u64) -> u32 {
        let merges = self.make_room(1);
        self.records.push_back(Record {
            left,
            right,
            xmit_ns: now,
            flags: 0,
        });
        merges
    }

    /// Splits the record containing `seq` strictly inside it into two with the same state.
    /// False when the table is full (nothing changes then).
    fn split_at(&mut self, seq: SeqNumber) -> bool {
        let Some(i) = self
            .records
            .iter()
            .position(|r| r.left.lt(seq) && seq.lt(r.right))
        else {
            return true;
        };
        if self.records.len() >= RECORDS_MAX {
            return false;
        }
        let mut upper = self.records[i];
        upper.left = seq;
        self.records[i].right = seq;
        self.records.insert(i + 1, upper);
        true
    }

    /// Merges neighbours until `slots` more records fit; returns the merges done.
    #[inline]
    fn make_room(&mut self, slots: usize) -> u32 {
        if self.records.len() + slots <= RECORDS_MAX {
            return 0;
        }
        self.merge_until_room(slots)
    }

    #[cold]
    fn merge_until_room(&mut self, slots: usize) -> u32 {
        let mut merges = 0;
        while self.records.len() + slots > RECORDS_MAX && self.records.len() >= 2 {
            self.merge_closest_pair();
            merges += 1;
        }
        merges
    }

    /// Merges the two neighbours whose merge loses least: the same loss and delivery state,
    /// then the closest send times. The merged record keeps the later time; it is lost or
    /// delivered only if both were (never invents a loss or a delivery), retransmitted if
    /// either was, and marked merged unless both were sent at the same time as one kind of
    /// transmission.
    fn merge_closest_pair(&mut self) {
        let state = LOST | DELIVERED;
        let mut best: Option<(usize, bool, u64)> = None;
        for i in 0..self.records.len().saturating_sub(1) {
            let (a, b) = (self.records[i], self.records[i + 1]);
            let same_state = a.flags & state == b.flags & state;
            let gap = a.xmit_ns.abs_diff(b.xmit_ns);
            let better = match best {
                None => true,
                Some((_, s, g)) => (same_state && !s) || (same_state == s && gap < g),
            };
            if better {
                best = Some((i, same_state, gap));
            }
        }
        let Some((i, _, _)) = best else { return };
        let (a, b) = (self.records[i], self.records[i + 1]);
        let exact = a.xmit_ns == b.xmit_ns && a.has(RETRANSMITTED) == b.has(RETRANSMITTED);
        let merged = Record {
            left: a.left,
            right: b.right,
            xmit_ns: a.xmit_ns.max(b.xmit_ns),
            flags: (a.flags & b.flags & state)
                | ((a.flags | b.flags) & (RETRANSMITTED | MERGED))
                | if exact { 0 } else { MERGED },
        };
        self.records[i] = merged;
        self.records.remove(i + 1);
        if merged.has(RETRANSMITTED) {
            self.note_retransmitted_up_to(merged.right);
        }
    }

    /// The cumulative ACK moved to `ack`: forget what lies below it.
    pub(crate) fn on_cumulative_ack(&mut self, ack: SeqNumber) {
        while let Some(first) = self.records.front_mut() {
            if first.right.le(ack) {
                self.records.pop_front();
            } else {
                if first.left.lt(ack) {
                    first.left = ack;
                }
                break;
            }
        }
        if self.rtx_right().is_some_and(|r| r.le(ack)) {
            // Keeps the edge within the window, where sequence comparisons hold.
            self.set_rtx_right(None);
        }
    }

    /// RFC 8985 §6.2 steps 1 to 3 for one ACK: finds the segments it newly delivered (wholly
    /// below `ack` or inside one range of `scoreboard`, as the ACK left it), takes
    /// the smallest RTT of the never-retransmitted ones as a minimum-RTT sample, updates
    /// `RACK.rtt`, `RACK.xmit_ts`/`RACK.end_seq` from the most recently sent eligible one and
    /// detects reordering. A retransmitted segment is not eligible when it was retransmitted
    /// less than `RACK.min_RTT` ago (the ACK may be for an earlier copy) or, if this ACK
    /// covers it cumulatively, when the ACK's timestamp echo predates its last retransmission
    /// (`echo_predates(xmit_ns)`).
    ///
    /// `order` says which delivered segment's RTT becomes `RACK.rtt` ([`RackRttOrder`]).
    pub(crate) fn on_ack(
        &mut self,
        now: u64,
        ack: SeqNumber,
        scoreboard: &OooQueue,
        echo_predates: impl Fn(u64) -> bool,
        order: RackRttOrder,
    ) -> Delivery {
        let sacked = scoreboard.ranges();
        let mut delivery = Delivery::default();
        let fack_before = self.fack();
        let min_rtt = self.min_rtt_ns();
        let mut newest: Option<(u64, SeqNumber)> = None;
        let mut sample_min: Option<u64> = None;
        // The last eligible segment visited in sequence order, cumulative and SACKed apart
        // (RackRttOrder::LastInSequence): its RTT.
        let mut last_cumulative_rtt: Option<u64> = None;
        let mut last_sacked_rtt: Option<u64> = None;
        // Linux's `ca_rtt_us` sources: the highest never-retransmitted newly SACKed and
        // cumulatively acknowledged segments, and whether a retransmission was acknowledged.
        let mut ca_sacked_rtt: Option<u64> = None;
        let mut ca_cumulative_rtt: Option<u64> = None;
        let mut cumulative_rtx = false;
        let mut j = 0;
        for r in self.records.iter_mut() {
            if sacked.is_empty() && r.right.gt(ack) {
                // Sorted records: nothing further is covered (the common, loss-free case).
                break;
            }
            if r.has(DELIVERED) {
                continue;
            }
            let start = if r.left.lt(ack) { ack } else { r.left };
            let covered = !r.right.gt(ack) || {
                while sacked.get(j).is_some_and(|b| b.right.le(start)) {
                    j += 1;
                }
                sacked
                    .get(j)
                    .is_some_and(|b| b.left.le(start) && r.right.le(b.right))
            };
            if !covered {
                continue;
            }
            r.flags |= DELIVERED;
            r.flags &= !LOST;
            if r.has(MERGED) {
                continue;
            }
            let rtx = r.has(RETRANSMITTED);
            if !rtx && fack_before.is_some_and(|f| r.right.lt(f)) {
                self.reordering_seen = true;
            }
            // RACK.fack advances (fields by hand: the records are borrowed).
            if self.set & rack_set::FACK == 0 || r.right.gt(self.fack_seq) {
                self.fack_seq = r.right;
                self.set |= rack_set::FACK;
            }
            let rtt_ns = now.saturating_sub(r.xmit_ns);
            // The echo tells only for a segment this ACK covers cumulatively: a receiver takes
            // TS.Recent from the segment that reaches Last.ACK.sent (RFC 7323 §4.3), so the
            // ACK of a segment held beyond a hole echoes an older one whichever copy arrived,
            // and §6.2's echo test would call every SACKed retransmission ambiguous (a tail
            // loss probe past a hole would then never advance RACK). There the min-RTT test
            // alone decides, as in Linux's `tcp_rack_advance`.
            let cumulative = !r.right.gt(ack);
            let ambiguous = rtx
                && ((cumulative && echo_predates(r.xmit_ns)) || min_rtt.is_none_or(|m| rtt_ns < m));
            if !rtx {
                // An RFC 6298 measurement (a never-retransmitted segment, timed on the ns
                // clock): the minimum RTT's best source (§6.2 step 1).
                sample_min = Some(sample_min.map_or(rtt_ns, |m: u64| m.min(rtt_ns)));
                if cumulative {
                    ca_cumulative_rtt = Some(rtt_ns);
                } else {
                    ca_sacked_rtt = Some(rtt_ns);
                }
            } else if cumulative {
                cumulative_rtx = true;
            }
            if !ambiguous {
                if cumulative {
                    last_cumulative_rtt = Some(rtt_ns);
                } else {
                    last_sacked_rtt = Some(rtt_ns);
                }
            }
            if !ambiguous && newest.is_none_or(|(t, s)| sent_after(r.xmit_ns, r.right, t, s)) {
                newest = Some((r.xmit_ns, r.right));
            }
        }
        if let Some(rtt_ns) = sample_min {
            self.note_rtt_sample(now, rtt_ns);
        }
        delivery.ca_rtt_ns = ca_sacked_rtt.or(ca_cumulative_rtt.filter(|_| !cumulative_rtx));
        if let Some((t, s)) = newest {
            delivery.advanced = true;
            self.rtt_ns = match order {
                RackRttOrder::LatestSent => now.saturating_sub(t),
                RackRttOrder::LastInSequence => last_cumulative_rtt
                    .or(last_sacked_rtt)
                    .unwrap_or_else(|| now.saturating_sub(t)),
            };
            if self
                .latest()
                .is_none_or(|(lt, ls)| sent_after(t, s, lt, ls))
            {
                self.set_latest((t, s));
            }
        }
        delivery
    }

    /// Segments SACKed (delivered above the cumulative ACK) — RFC 8985's `RACK.segs_sacked`.
    fn segs_sacked(&self) -> u32 {
        self.records.iter().filter(|r| r.has(DELIVERED)).count() as u32
    }

    /// RFC 8985 §6.2 step 4, DSACK part: at most one growth of the window multiplier per
    /// round trip that sees a DSACK (`snd_una`, `snd_nxt` are the connection's). Returns
    /// whether it grew.
    pub(crate) fn on_dsack_round(
        &mut self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        dsack: bool,
    ) -> bool {
        if self.dsack_round().is_some_and(|r| !snd_una.lt(r)) {
            self.set_dsack_round(None);
        }
        if dsack && self.dsack_round().is_none() {
            self.set_dsack_round(Some(snd_nxt));
            self.reo_wnd_mult = self.reo_wnd_mult.saturating_add(1);
            self.reo_wnd_persist = REO_WND_PERSIST;
            return true;
        }
        false
    }

    /// RFC 8985 §6.2 step 4: leaving fast or RTO recovery without a DSACK on this ACK; after
    /// 16 such recoveries the window multiplier returns to 1.
    pub(crate) fn on_recovery_exit(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// RFC 8985 §6.2 step 4: `RACK.reo_wnd`. Zero while no reordering has been seen and
    /// either the sender is recovering or DupThresh segments are SACKed (RACK then acts as
    /// the DupAck threshold would); else `reo_wnd_mult · min_RTT / 4`, at most SRTT; zero
    /// without an RTT estimate.
    pub(crate) fn reo_wnd_ns(&self, recovering: bool, srtt_ns: Option<u64>) -> u64 {
        if !self.reordering_seen && (recovering || self.segs_sacked() >= DUP_THRESH_SEGMENTS) {
            return 0;
        }
        let (Some(min_rtt), Some(srtt)) = (self.min_rtt_ns(), srtt_ns) else {
            return 0;
        };
        (min_rtt / 4)
            .saturating_mul(u64::from(self.reo_wnd_mult))
            .min(srtt)
    }

    /// RFC 8985 §6.2 step 5 (`RACK_detect_loss`): every segment sent before `RACK.xmit_ts`
    /// (ties broken by sequence), not delivered and not already lost, is lost once
    /// `xmit_ts + RACK.rtt + reo_wnd ≤ now`; the others set the reordering timer's deadline
    /// (the latest of theirs). A lost segment is not judged again until it is retransmitted.
    ///
    /// Past the last retransmission (`rtx_right`) the records are originals in send order, so
    /// the scan ends at the first one not sent before `RACK.xmit_ts`: on a loss-free flow, at
    /// once.
    pub(crate) fn detect_loss(&mut self, now: u64, reo_wnd_ns: u64) -> Detection {
        let mut d = Detection::default();
        let Some((rack_ns, rack_end)) = self.latest() else {
            return d;
        };
        let wait_ns = self.rtt_ns.saturating_add(reo_wnd_ns);
        let originals_from = self.rtx_right();
        for r in self.records.iter_mut() {
            let before = sent_after(rack_ns, rack_end, r.xmit_ns, r.right);
            if !before && originals_from.is_none_or(|o| !r.left.lt(o)) {
                break;
            }
            if r.flags & (DELIVERED | LOST) != 0 || !before {
                continue;
            }
            let deadline = r.xmit_ns.saturating_add(wait_ns);
            if now >= deadline {
                r.flags |= LOST;
                self.lost_hint = true;
                d.lost += 1;
                if r.has(RETRANSMITTED) {
                    d.lost_retransmissions += 1;
                }
            } else {
                d.deadline_ns = Some(d.deadline_ns.map_or(deadline, |t: u64| t.max(deadline)));
            }
        }
        d
    }

    /// After a retransmission timeout: SACK information is discarded (the receiver may have
    /// reneged, RFC 2018 §8) and everything from SND.UNA is sent again, so no record stays
    /// delivered or lost.
    pub(crate) fn on_rto(&mut self) {
        for r in self.records.iter_mut() {
            r.flags &= !(DELIVERED | LOST);
        }
        self.lost_hint = false;
        self.rto_recovery = true;
    }

    /// At import: the flight `[left, right)` arrives without its send times. It is recorded
    /// as one merged record sent at `now`, the latest it can have been sent: it is deemed
    /// lost only once segments sent after the import are delivered and a full RACK.rtt plus
    /// reo_wnd has passed, and its delivery never advances RACK.xmit_ts.
    pub(crate) fn import_flight(&mut self, left: SeqNumber, right: SeqNumber, now: u64) {
        self.records.clear();
        self.set_rtx_right(None);
        self.lost_hint = false;
        if left.lt(right) {
            self.records.push_back(Record {
                left,
                right,
                xmit_ns: now,
                flags: MERGED,
            });
        }
    }

    /// Bytes of lost records the scoreboard does not hold: lost and not yet retransmitted, so
    /// not in the pipe (RFC 6675 §4 with RACK's losses).
    pub(crate) fn lost_unsacked_bytes(&self, scoreboard: &OooQueue) -> u32 {
        if !self.lost_hint {
            return 0;
        }
        self.records
            .iter()
            .filter(|r| r.has(LOST))
            .map(|r| {
                let len = r.right.diff(r.left).max(0) as u32;
                len.saturating_sub(scoreboard.bytes_in(r.left, r.right))
            })
            .fold(0u32, u32::saturating_add)
    }

    /// RFC 6675 §4 NextSeg rule (1) with RACK's losses: the first unSACKed byte of the
    /// lowest lost record, and how much of that record to send (up to `mss`, stopping at the
    /// next SACKed range).
    pub(crate) fn next_lost(&self, scoreboard: &OooQueue, mss: u32) -> Option<(SeqNumber, u32)> {
        if !self.lost_hint {
            return None;
        }
        for r in self.records.iter().filter(|r| r.has(LOST)) {
            let start = scoreboard.next_hole(r.left);
            if !start.lt(r.right) {
                continue;
            }
            let end = scoreboard
                .next_left_after(start)
                .filter(|l| l.lt(r.right))
                .unwrap_or(r.right);
            let len = end.diff(start).max(0) as u32;
            return Some((start, len.min(mss)));
        }
        None
    }

    /// The left edge of the lowest lost record, if any (forgetting the hint when none is).
    pub(crate) fn first_lost(&mut self) -> Option<SeqNumber> {
        if !self.lost_hint {
            return None;
        }
        let first = self.records.iter().find(|r| r.has(LOST)).map(|r| r.left);
        self.lost_hint = first.is_some();
        first
    }

    /// Segment counts of the flight for `tcp_info` (Linux counts packets, not bytes): a
    /// record counts as `ceil(bytes / mss)` segments, of its bytes the scoreboard does not
    /// hold. Returns `(packets_out, lost_out, retrans_out)`: every record; those marked lost
    /// or retransmitted and not yet delivered (Linux keeps a retransmitted segment counted
    /// lost until it is acknowledged), or every undelivered one in RTO recovery (Linux's
    /// `tcp_enter_loss` marks the whole flight lost); and the retransmitted ones.
    pub(crate) fn info_segments(&self, scoreboard: &OooQueue, mss: u32) -> (u32, u32, u32) {
        let mss = mss.max(1);
        let (mut out, mut lost, mut retrans) = (0u32, 0u32, 0u32);
        for r in &self.records {
            let len = r.right.diff(r.left).max(0) as u32;
            out = out.saturating_add(len.div_ceil(mss));
            let unsacked = len.saturating_sub(scoreboard.bytes_in(r.left, r.right));
            if unsacked == 0 || r.has(DELIVERED) {
                continue;
            }
            let segs = unsacked.div_ceil(mss);
            if r.has(LOST) || r.has(RETRANSMITTED) || self.rto_recovery {
                lost = lost.saturating_add(segs);
            }
            if r.has(RETRANSMITTED) {
                retrans = retrans.saturating_add(segs);
            }
        }
        (out, lost, retrans)
    }

    /// The first broken invariant of the table, if any (for the connection's checker).
    pub(crate) fn invariant_violation(&self) -> Option<&'static str> {
        if self.records.len() > RECORDS_MAX {
            return Some("RACK transmit records over their cap");
        }
        let mut prev: Option<Record> = None;
        for r in &self.records {
            if !r.left.lt(r.right) || prev.is_some_and(|p| p.right != r.left) {
                return Some("RACK transmit records not contiguous and non-empty");
            }
            if r.has(LOST) && !self.lost_hint {
                return Some("RACK record lost while the lost hint is off");
            }
            if r.has(RETRANSMITTED) && self.rtx_right().is_none_or(|x| x.lt(r.right)) {
                return Some("RACK retransmission beyond rtx_right");
            }
            if let Some(p) = prev.filter(|p| !p.has(RETRANSMITTED) && !r.has(RETRANSMITTED)) {
                if self.rtx_right().is_none_or(|x| !p.left.lt(x)) && p.xmit_ns > r.xmit_ns {
                    return Some("RACK originals past the last retransmission out of send order");
                }
            }
            prev = Some(*r);
        }
        None
    }
}

#[cfg(test)]
mod tests;
