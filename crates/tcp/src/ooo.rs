//! Bookkeeping for out-of-order received data.
//!
//! The bytes themselves sit in the receive ring at their final offsets (see
//! [`crate::ring::Ring::write_at`]); this queue only remembers which sequence ranges beyond
//! RCV.NXT are filled. It is bounded in ranges and in bytes so a hostile peer cannot make a
//! connection hold more than the configured amount of out-of-order state.
//!
//! It also remembers where the peer's FIN lies when the FIN arrived beyond a hole: RFC 9293
//! §3.10.7.4 processes segments in sequence order, so such a FIN takes effect once RCV.NXT
//! reaches it (Linux keeps the FIN flag on the queued segment). That is one sequence number,
//! and it goes wherever the out-of-order data goes (cleared with it, never carried across a
//! snapshot).

use wire::tcp::{SackBlock, SeqNumber};

/// Why an out-of-order segment was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OooReject {
    /// Keeping it would exceed the range cap.
    TooManyRanges,
    /// Keeping it would exceed the byte cap.
    TooManyBytes,
}

/// Filled ranges beyond RCV.NXT.
///
/// Invariants: `ranges` is sorted by `left`, ranges neither overlap nor touch, every range is
/// non-empty, `ranges.len() ≤` the `ranges_max` of every insertion, `bytes` = the sum of range
/// lengths ≤ the `bytes_max` of every insertion.
/// `recent` (when set) indexes the range holding the most recently received segment.
/// `fin` (when set) lies at or beyond the right edge of every range: no data is held past
/// the FIN.
///
/// Eight bytes in the TCB: everything lives in a box made by the first insertion or FIN
/// (`Held`; most connections never reorder or lose a segment, so their two queues — out of
/// order and SACK scoreboard — cost a null pointer each, and the per-segment emptiness tests
/// read only that pointer). The caps are the caller's, passed on each insertion. Once made,
/// the box stays (a cleared queue keeps its range table for the next loss).
#[derive(Debug, Clone, Default)]
pub struct OooQueue {
    held: Option<Box<Held>>,
}

/// What a queue holds once it has held anything.
#[derive(Debug, Clone, Default)]
struct Held {
    ranges: Vec<SackBlock>,
    bytes: u32,
    recent_seq: SeqNumber,
    fin_seq: SeqNumber,
    /// [`RECENT_SET`] and [`FIN_SET`]: which of `recent_seq`, `fin_seq` hold a value.
    marks: u8,
}

const RECENT_SET: u8 = 1;
const FIN_SET: u8 = 2;

fn len_of(b: &SackBlock) -> u32 {
    b.right.diff(b.left).max(0) as u32
}

impl OooQueue {
    /// An empty queue (nothing allocated until it holds something).
    pub fn new() -> OooQueue {
        OooQueue { held: None }
    }

    fn held_mut(&mut self) -> &mut Held {
        self.held.get_or_insert_with(Box::default)
    }

    /// True once the queue has its box (made by the first insertion or FIN; it then stays).
    pub fn is_allocated(&self) -> bool {
        self.held.is_some()
    }

    /// True when nothing is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.held.as_ref().is_none_or(|h| h.ranges.is_empty())
    }

    /// True when no range and no FIN beyond a hole is held (what header prediction asks of
    /// the receiver's queue: an in-order segment then pulls nothing in after it).
    #[inline]
    pub fn holds_nothing(&self) -> bool {
        self.held
            .as_ref()
            .is_none_or(|h| h.ranges.is_empty() && h.marks & FIN_SET == 0)
    }

    /// Bytes held.
    pub fn bytes(&self) -> u32 {
        self.held.as_ref().map_or(0, |h| h.bytes)
    }

    /// The ranges, in sequence order.
    pub fn ranges(&self) -> &[SackBlock] {
        self.held.as_ref().map_or(&[], |h| &h.ranges)
    }

    /// Forgets everything (the range table is kept for reuse).
    pub fn clear(&mut self) {
        if let Some(h) = self.held.as_deref_mut() {
            h.ranges.clear();
            h.bytes = 0;
            h.marks = 0;
        }
    }

    fn recent(&self) -> Option<SeqNumber> {
        let h = self.held.as_ref()?;
        (h.marks & RECENT_SET != 0).then_some(h.recent_seq)
    }

    fn forget_fin(&mut self) {
        if let Some(h) = self.held.as_deref_mut() {
            h.marks &= !FIN_SET;
        }
    }

    /// Where the peer's FIN lies, when it arrived beyond a hole.
    pub fn fin(&self) -> Option<SeqNumber> {
        let h = self.held.as_ref()?;
        (h.marks & FIN_SET != 0).then_some(h.fin_seq)
    }

    /// Remembers a FIN at `seq` beyond a hole (ignored when data is held past it: the FIN is
    /// then not where the stream ends).
    pub fn set_fin(&mut self, seq: SeqNumber) {
        if self.ranges().last().is_some_and(|r| r.right.gt(seq)) {
            return;
        }
        let h = self.held_mut();
        h.fin_seq = seq;
        h.marks |= FIN_SET;
    }

    /// True when the remembered FIN sits at `rcv_nxt` (and forgets it); a FIN below
    /// `rcv_nxt` is forgotten too.
    pub fn take_fin_at(&mut self, rcv_nxt: SeqNumber) -> bool {
        match self.fin() {
            Some(f) if f == rcv_nxt => {
                self.forget_fin();
                true
            }
            Some(f) if f.lt(rcv_nxt) => {
                self.forget_fin();
                false
            }
            _ => false,
        }
    }

    /// Records [left, right) as filled, merging with what it overlaps or touches; refused
    /// (and nothing changed) when the result would exceed `ranges_max` ranges or `bytes_max`
    /// bytes.
    pub fn insert(
        &mut self,
        left: SeqNumber,
        right: SeqNumber,
        bytes_max: u32,
        ranges_max: u16,
    ) -> Result<(), OooReject> {
        if right.le(left) {
            return Ok(());
        }
        let ranges = self.ranges();
        // Find the ranges that overlap or touch [left, right).
        let first = ranges
            .iter()
            .position(|r| r.right.ge(left))
            .unwrap_or(ranges.len());
        let mut last = first;
        let mut merged = SackBlock { left, right };
        let mut covered = 0u32;
        while let Some(r) = ranges.get(last) {
            if r.left.gt(right) {
                break;
            }
            merged.left = merged.left.min(r.left);
            merged.right = merged.right.max(r.right);
            covered += len_of(r);
            last += 1;
        }
        let new_bytes = self.bytes() - covered + len_of(&merged);
        let new_ranges = ranges.len() - (last - first) + 1;
        if new_ranges > usize::from(ranges_max) {
            return Err(OooReject::TooManyRanges);
        }
        if new_bytes > bytes_max {
            return Err(OooReject::TooManyBytes);
        }
        let h = self.held_mut();
        if h.ranges.capacity() == 0 {
            // Allocated once, on first use, at its final size.
            h.ranges.reserve_exact(usize::from(ranges_max));
        }
        h.ranges.drain(first..last);
        h.ranges.insert(first, merged);
        h.bytes = new_bytes;
        h.recent_seq = left;
        h.marks |= RECENT_SET;
        if self.fin().is_some_and(|f| right.gt(f)) {
            // Data beyond the remembered FIN: the FIN was not where the peer's stream ends.
            self.forget_fin();
        }
        Ok(())
    }

    /// Takes the first range when it starts at or below `rcv_nxt`: returns its right edge.
    pub fn pop_contiguous(&mut self, rcv_nxt: SeqNumber) -> Option<SeqNumber> {
        let h = self.held.as_deref_mut()?;
        let first = *h.ranges.first()?;
        if first.left.gt(rcv_nxt) {
            return None;
        }
        h.ranges.remove(0);
        h.bytes -= len_of(&first);
        Some(first.right)
    }

    /// Forgets everything below `seq` (ranges cut at it).
    pub fn remove_below(&mut self, seq: SeqNumber) {
        let Some(h) = self.held.as_deref_mut() else {
            return;
        };
        while let Some(first) = h.ranges.first_mut() {
            if first.right.le(seq) {
                h.bytes -= len_of(first);
                h.ranges.remove(0);
            } else {
                if first.left.lt(seq) {
                    h.bytes -= seq.diff(first.left) as u32;
                    first.left = seq;
                }
                break;
            }
        }
    }

    /// Bytes held within `[a, b)`.
    pub fn bytes_in(&self, a: SeqNumber, b: SeqNumber) -> u32 {
        self.ranges()
            .iter()
            .map(|r| {
                let l = r.left.max(a);
                let h = r.right.min(b);
                h.diff(l).max(0) as u32
            })
            .sum()
    }

    /// The first sequence number at or after `from` not covered by a range.
    pub fn next_hole(&self, from: SeqNumber) -> SeqNumber {
        let mut s = from;
        for r in self.ranges() {
            if r.left.le(s) && r.right.gt(s) {
                s = r.right;
            }
        }
        s
    }

    /// The left edge of the first range starting after `seq`, if any.
    pub fn next_left_after(&self, seq: SeqNumber) -> Option<SeqNumber> {
        self.ranges().iter().map(|r| r.left).find(|l| l.gt(seq))
    }

    /// RFC 6675 §4 IsLost as a boundary: every hole below the returned sequence number has
    /// either `dupthresh` ranges or more than `(dupthresh − 1)·mss` bytes held above it.
    pub fn lost_boundary(&self, mss: u32, dupthresh: u32) -> Option<SeqNumber> {
        let mut bytes = 0u32;
        let mut count = 0u32;
        for r in self.ranges().iter().rev() {
            bytes = bytes.saturating_add(len_of(r));
            count += 1;
            if count >= dupthresh || bytes > (dupthresh - 1) * mss {
                return Some(r.left);
            }
        }
        None
    }

    /// Fills `out` with SACK blocks per RFC 2018 §4: the first block holds the most recently
    /// received segment, the rest follow highest-first. Returns the number written.
    pub fn sack_blocks(&self, out: &mut [Option<SackBlock>]) -> usize {
        let recent_idx = self.recent().and_then(|s| {
            self.ranges()
                .iter()
                .position(|r| r.left.le(s) && r.right.gt(s))
        });
        let mut n = 0;
        if let (Some(i), Some(slot)) = (recent_idx, out.first_mut()) {
            *slot = self.ranges().get(i).copied();
            n = 1;
        }
        for (i, r) in self.ranges().iter().enumerate().rev() {
            if Some(i) == recent_idx {
                continue;
            }
            match out.get_mut(n) {
                Some(slot) => *slot = Some(*r),
                None => break,
            }
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u32) -> SeqNumber {
        SeqNumber(n)
    }

    #[test]
    fn adjacent_ranges_merge_and_pop_when_contiguous() {
        let (mut q, max) = (OooQueue::new(), 4);
        let cap = 1000;
        q.insert(s(200), s(300), cap, max).unwrap();
        q.insert(s(100), s(200), cap, max).unwrap();
        assert_eq!(q.ranges().len(), 1);
        assert_eq!(q.bytes(), 200);
        assert_eq!(q.pop_contiguous(s(50)), None);
        assert_eq!(q.pop_contiguous(s(100)), Some(s(300)));
        assert!(q.is_empty());
    }

    #[test]
    fn range_cap_rejects_a_new_hole() {
        let (mut q, max) = (OooQueue::new(), 2);
        let cap = 1000;
        q.insert(s(100), s(110), cap, max).unwrap();
        q.insert(s(200), s(210), cap, max).unwrap();
        assert_eq!(
            q.insert(s(300), s(310), cap, max),
            Err(OooReject::TooManyRanges)
        );
        // Extending an existing range is still fine.
        assert_eq!(q.insert(s(110), s(120), cap, max), Ok(()));
    }

    #[test]
    fn byte_cap_rejects_and_leaves_queue_unchanged() {
        let (mut q, max) = (OooQueue::new(), 8);
        let cap = 50;
        q.insert(s(100), s(140), cap, max).unwrap();
        assert_eq!(
            q.insert(s(200), s(220), cap, max),
            Err(OooReject::TooManyBytes)
        );
        assert_eq!(q.bytes(), 40);
    }

    #[test]
    fn overlapping_insert_counts_bytes_once_across_wrap() {
        let (mut q, max) = (OooQueue::new(), 8);
        let cap = 1000;
        q.insert(s(u32::MAX - 10), s(10), cap, max).unwrap();
        q.insert(s(0), s(30), cap, max).unwrap();
        assert_eq!(q.bytes(), 41);
        assert_eq!(q.ranges().len(), 1);
    }

    #[test]
    fn scoreboard_queries_find_holes_and_the_lost_boundary() {
        let (mut q, max) = (OooQueue::new(), 8);
        let cap = u32::MAX;
        q.insert(s(200), s(300), cap, max).unwrap();
        q.insert(s(400), s(500), cap, max).unwrap();
        q.insert(s(600), s(700), cap, max).unwrap();
        assert_eq!(q.next_hole(s(100)), s(100));
        assert_eq!(q.next_hole(s(250)), s(300));
        assert_eq!(q.next_left_after(s(300)), Some(s(400)));
        assert_eq!(q.bytes_in(s(250), s(450)), 100);
        // mss 100, dupthresh 3: three ranges above the hole at 100..200 ⇒ lost below 200.
        assert_eq!(q.lost_boundary(100, 3), Some(s(200)));
        // mss 30: the 100 bytes of the top range alone exceed 2·30, so the hole below 600 is lost.
        assert_eq!(q.lost_boundary(30, 3), Some(s(600)));
        // A huge MSS: only the count of ranges matters.
        assert_eq!(q.lost_boundary(10_000, 3), Some(s(200)));
        q.remove_below(s(450));
        assert_eq!(q.bytes(), 150);
        assert_eq!(q.ranges().first().map(|r| r.left), Some(s(450)));
    }

    #[test]
    fn remembered_fin_is_taken_exactly_when_rcv_nxt_reaches_it() {
        let (mut q, max) = (OooQueue::new(), 8);
        let cap = 1000;
        q.insert(s(200), s(300), cap, max).unwrap();
        q.set_fin(s(300));
        assert_eq!(q.fin(), Some(s(300)));
        assert!(!q.take_fin_at(s(100)), "the hole below is not filled yet");
        assert_eq!(q.pop_contiguous(s(200)), Some(s(300)));
        assert!(q.is_empty(), "a FIN alone holds no data");
        assert!(q.take_fin_at(s(300)));
        assert_eq!(q.fin(), None, "taken once");
    }

    #[test]
    fn remembered_fin_is_forgotten_when_data_lies_beyond_it() {
        let (mut q, max) = (OooQueue::new(), 8);
        let cap = 1000;
        q.insert(s(200), s(300), cap, max).unwrap();
        q.set_fin(s(250));
        assert_eq!(q.fin(), None, "data already held past it");
        q.set_fin(s(300));
        q.insert(s(400), s(410), cap, max).unwrap();
        assert_eq!(q.fin(), None, "data arrived past it");
        q.set_fin(s(500));
        assert!(!q.take_fin_at(s(600)), "in-order data went past it");
        assert_eq!(q.fin(), None);
        q.set_fin(s(700));
        q.clear();
        assert_eq!(q.fin(), None, "cleared with the data");
    }

    #[test]
    fn first_sack_block_is_the_most_recent_segment() {
        let (mut q, max) = (OooQueue::new(), 8);
        let cap = 1000;
        q.insert(s(300), s(310), cap, max).unwrap();
        q.insert(s(100), s(110), cap, max).unwrap();
        q.insert(s(500), s(510), cap, max).unwrap();
        q.insert(s(110), s(120), cap, max).unwrap();
        let mut out = [None; 3];
        assert_eq!(q.sack_blocks(&mut out), 3);
        assert_eq!(
            out[0],
            Some(SackBlock {
                left: s(100),
                right: s(120)
            })
        );
        assert_eq!(
            out[1],
            Some(SackBlock {
                left: s(500),
                right: s(510)
            })
        );
        assert_eq!(
            out[2],
            Some(SackBlock {
                left: s(300),
                right: s(310)
            })
        );
    }
}
