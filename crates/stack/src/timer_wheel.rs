//! Connection deadlines in a hierarchical timing wheel with exact times (issue 17 item 3).
//!
//! The TCP part keeps one deadline per socket slot (a connection's earliest engine timer, or
//! a moved marker's expiry) and needs: set and cancel on every segment, the earliest deadline
//! exactly (`poll_timeout`: the simulator and the conformance runner jump their clocks to it,
//! so rounding it to a tick would change every trace), and everything due at `now` in
//! (deadline, slot) order (the order the `BTreeSet<(u64, usize)>` it replaces gave, so the
//! stack behaves identically).
//!
//! # Structure
//!
//! A radix wheel over the 64 bits of the deadline in nanoseconds: 11 levels of 64 buckets,
//! level `k` covering bits `6k..6k+6`, placed relative to `cur_ns` (the last `now` given to
//! [`TimerWheel::pop_due`]). A deadline `d ≥ cur_ns` lives at the level of the highest 6-bit
//! group in which `d` and `cur_ns` differ (level 0 if equal), in the bucket of its digit
//! there; `d < cur_ns` (due already) lives in the *past* bucket. Hence (the ordering
//! invariant) every entry of the past bucket is below every entry of level 0, every entry
//! of level `k` below every entry of level `k+1`, and within a level bucket `s` below bucket
//! `s+1`: the first non-empty bucket (one bitmap word per level, found with
//! `trailing_zeros`) holds the minimum. Level-0 buckets hold one deadline value each.
//!
//! Each bucket is an intrusive doubly linked list through `nodes` (indexed by slot), so
//! insert and cancel are O(1) and allocate nothing once `nodes` covers the slot indices.
//! Exactness comes from one more invariant: **the first non-empty bucket is sorted** by
//! (deadline, slot), so its head is the minimum (`peek` is O(1)). Other buckets may be
//! unsorted (an insert that does not extend a sorted bucket at either end marks it so); a
//! bucket is sorted once, when it becomes the first, and kept sorted by inserting into it in
//! place. Advancing `cur_ns` to `now` (after popping everything `≤ now`) moves the entries of
//! one bucket — the one at the highest level where `now` and `cur_ns` differ, with `now`'s
//! digit there — down to lower levels (the cascade): each entry descends at most 10 times in
//! its life, so the cascade is O(1) amortised per entry.
//!
//! Costs: insert and cancel O(1) (plus an in-place walk when inserting out of order into the
//! first bucket); peek O(1); sorting a bucket of m entries O(m log m) once per time it becomes
//! the first while unsorted (TCP deadlines are mostly set in increasing order, `now + RTO`,
//! so buckets mostly stay sorted by appending).

const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
/// 11 × 6 = 66 ≥ 64 bits of deadline.
const LEVELS: usize = 11;
/// Bucket index of the past bucket (deadlines below `cur_ns`).
const PAST: u16 = (LEVELS * SLOTS) as u16;
const BUCKETS: usize = LEVELS * SLOTS + 1;
/// "No node" in a link, and "not in the wheel" in `Node::bucket`.
const NIL: u32 = u32::MAX;
const UNLINKED: u16 = u16::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    deadline_ns: u64,
    prev: u32,
    next: u32,
    /// The bucket this slot's entry is in, or `UNLINKED`.
    bucket: u16,
}

const FREE_NODE: Node = Node {
    deadline_ns: 0,
    prev: NIL,
    next: NIL,
    bucket: UNLINKED,
};

#[derive(Debug, Clone, Copy)]
struct Bucket {
    head: u32,
    tail: u32,
    /// The list is in (deadline, slot) order. Always true for the first non-empty bucket.
    sorted: bool,
}

const EMPTY_BUCKET: Bucket = Bucket {
    head: NIL,
    tail: NIL,
    sorted: true,
};

/// A set of (deadline in ns, slot index) with at most one entry per slot (see the module
/// docs). Slot indices must fit in `u32` (below `u32::MAX`).
pub(crate) struct TimerWheel {
    /// Every entry at the levels is `≥ cur_ns`; the past bucket's are `< cur_ns`.
    cur_ns: u64,
    nodes: Vec<Node>,
    buckets: Vec<Bucket>,
    /// Bit `s` of word `k`: bucket `k·64 + s` is non-empty.
    occupied: [u64; LEVELS],
    /// Bit `k`: `occupied[k] != 0` (so the first bucket is two `trailing_zeros` away).
    levels_occupied: u16,
    len: usize,
    /// Reused by sorting and cascading (empty between calls).
    scratch: Vec<u32>,
    /// Nodes stepped over by in-place inserts into the first bucket (tests: the walk's cost).
    #[cfg(test)]
    walked: u64,
    /// `refine_first` on (tests turn it off to show what it saves).
    refines: bool,
}

impl core::fmt::Debug for TimerWheel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TimerWheel")
            .field("len", &self.len)
            .field("cur_ns", &self.cur_ns)
            .field("first", &self.peek())
            .finish_non_exhaustive()
    }
}

impl Default for TimerWheel {
    fn default() -> Self {
        Self::new()
    }
}

impl TimerWheel {
    pub(crate) fn new() -> TimerWheel {
        TimerWheel {
            cur_ns: 0,
            nodes: Vec::new(),
            buckets: vec![EMPTY_BUCKET; BUCKETS],
            occupied: [0; LEVELS],
            levels_occupied: 0,
            len: 0,
            scratch: Vec::new(),
            #[cfg(test)]
            walked: 0,
            refines: true,
        }
    }

    /// Heap bytes the wheel holds (nodes, buckets, scratch; spare capacity included).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * core::mem::size_of::<Node>()
            + self.buckets.capacity() * core::mem::size_of::<Bucket>()
            + self.scratch.capacity() * core::mem::size_of::<u32>()
    }

    /// Entries in the wheel.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Memory back past the socket table's high-water mark: drops the nodes of slots at or
    /// past `slots` (the table was compacted to that length) when none of them holds a
    /// deadline, and shrinks the node array once it is four times what it holds.
    pub(crate) fn truncate(&mut self, slots: usize) {
        if slots >= self.nodes.len() || self.nodes[slots..].iter().any(|n| n.bucket != UNLINKED) {
            return;
        }
        self.nodes.truncate(slots);
        if self.nodes.capacity() >= 4 * slots.max(64) {
            self.nodes.shrink_to(2 * slots.max(64));
        }
    }

    /// Asks for `slot`'s node to be brought into the cache (a hint only).
    #[inline]
    pub(crate) fn prefetch_node(&self, slot: usize) {
        if let Some(n) = self.nodes.get(slot) {
            platform::prefetch::prefetch_line(n);
        }
    }

    /// The deadline of `slot`, if it has one.
    pub(crate) fn get(&self, slot: usize) -> Option<u64> {
        self.nodes
            .get(slot)
            .filter(|n| n.bucket != UNLINKED)
            .map(|n| n.deadline_ns)
    }

    /// The earliest (deadline, slot): the head of the first non-empty bucket.
    pub(crate) fn peek(&self) -> Option<(u64, usize)> {
        let b = self.first_bucket()?;
        let head = self.buckets.get(usize::from(b))?.head;
        let n = self.nodes.get(head as usize)?;
        Some((n.deadline_ns, head as usize))
    }

    /// Sets `slot`'s deadline to `deadline_ns`, replacing any it had.
    pub(crate) fn insert(&mut self, slot: usize, deadline_ns: u64) {
        let Ok(i) = u32::try_from(slot) else {
            return;
        };
        if i == NIL {
            return;
        }
        if self.unlink(slot) {
            self.len -= 1;
        }
        if self.nodes.len() <= slot {
            // A grown node array's buffer on huge pages (one random node per segment).
            let more = slot + 1 - self.nodes.len();
            platform::huge_vec::reserve_huge(&mut self.nodes, more);
            self.nodes.resize(slot + 1, FREE_NODE);
        }
        if let Some(n) = self.nodes.get_mut(slot) {
            n.deadline_ns = deadline_ns;
        }
        let mut b = self.bucket_for(deadline_ns);
        // Into the middle of a coarse first bucket: refine it first, so the in-place walk
        // that keeps the first bucket sorted stays short (`refine_first`).
        while self.refines && self.first_bucket() == Some(b) && self.lands_inside(b, i) {
            self.refine_first(b);
            b = self.bucket_for(deadline_ns);
        }
        let first = self.first_bucket();
        self.link(i, b, first == Some(b));
        self.len += 1;
        // Unlinking the old entry may have emptied the first bucket.
        self.sort_first();
    }

    /// Cancels `slot`'s deadline; false when it had none.
    pub(crate) fn remove(&mut self, slot: usize) -> bool {
        if !self.unlink(slot) {
            return false;
        }
        self.len -= 1;
        self.sort_first();
        true
    }

    /// Removes every entry with deadline `≤ now_ns` and appends its slot to `due`, in
    /// (deadline, slot) order; then advances the wheel to `now_ns` (cascading).
    pub(crate) fn pop_due(&mut self, now_ns: u64, due: &mut Vec<usize>) {
        while let Some((t, i)) = self.peek() {
            if t > now_ns {
                break;
            }
            self.remove(i);
            due.push(i);
        }
        self.advance(now_ns);
    }

    // ------------------------------------------------------------------ internals

    fn key(&self, i: u32) -> (u64, u32) {
        (
            self.nodes
                .get(i as usize)
                .map_or(u64::MAX, |n| n.deadline_ns),
            i,
        )
    }

    /// The bucket a deadline belongs in, relative to `cur_ns`.
    fn bucket_for(&self, d: u64) -> u16 {
        if d < self.cur_ns {
            return PAST;
        }
        let x = d ^ self.cur_ns;
        let level = if x == 0 {
            0
        } else {
            (63 - x.leading_zeros()) / SLOT_BITS
        };
        let digit = (d >> (SLOT_BITS * level)) & (SLOTS as u64 - 1);
        (level as usize * SLOTS + digit as usize) as u16
    }

    fn first_bucket(&self) -> Option<u16> {
        if self
            .buckets
            .get(usize::from(PAST))
            .is_some_and(|b| b.head != NIL)
        {
            return Some(PAST);
        }
        if self.levels_occupied == 0 {
            return None;
        }
        let k = self.levels_occupied.trailing_zeros() as usize;
        let w = self.occupied.get(k)?;
        Some((k * SLOTS + w.trailing_zeros() as usize) as u16)
    }

    fn set_occupied(&mut self, b: u16, on: bool) {
        let (k, s) = (usize::from(b) / SLOTS, usize::from(b) % SLOTS);
        if let Some(w) = self.occupied.get_mut(k) {
            if on {
                *w |= 1 << s;
            } else {
                *w &= !(1 << s);
            }
            if *w == 0 {
                self.levels_occupied &= !(1 << k);
            } else {
                self.levels_occupied |= 1 << k;
            }
        }
    }

    fn set_links(&mut self, i: u32, prev: u32, next: u32, b: u16) {
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.prev = prev;
            n.next = next;
            n.bucket = b;
        }
    }

    fn set_next(&mut self, i: u32, next: u32) {
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.next = next;
        }
    }

    fn set_prev(&mut self, i: u32, prev: u32) {
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.prev = prev;
        }
    }

    /// Links node `i` (deadline already set) into bucket `b`: at the tail, keeping the
    /// bucket's `sorted` flag true when `i` extends the order at either end; when
    /// `keep_sorted` (b is the first bucket) an out-of-order `i` is walked into place.
    fn link(&mut self, i: u32, b: u16, keep_sorted: bool) {
        let Some(&bk) = self.buckets.get(usize::from(b)) else {
            return;
        };
        let key = self.key(i);
        if bk.head == NIL {
            self.set_links(i, NIL, NIL, b);
            if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
                *bm = Bucket {
                    head: i,
                    tail: i,
                    sorted: true,
                };
            }
            if b != PAST {
                self.set_occupied(b, true);
            }
            return;
        }
        // Where `i` goes: after `at` (NIL: at the head).
        let at = if !bk.sorted || key >= self.key(bk.tail) {
            bk.tail
        } else if key <= self.key(bk.head) {
            NIL
        } else if keep_sorted {
            let mut at = bk.tail;
            while at != NIL && self.key(at) > key {
                #[cfg(test)]
                {
                    self.walked += 1;
                }
                at = self.nodes.get(at as usize).map_or(NIL, |n| n.prev);
            }
            at
        } else {
            if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
                bm.sorted = false;
            }
            bk.tail
        };
        let next = if at == NIL {
            bk.head
        } else {
            self.nodes.get(at as usize).map_or(NIL, |n| n.next)
        };
        self.set_links(i, at, next, b);
        if at == NIL {
            if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
                bm.head = i;
            }
        } else {
            self.set_next(at, i);
        }
        if next == NIL {
            if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
                bm.tail = i;
            }
        } else {
            self.set_prev(next, i);
        }
    }

    /// Takes `slot`'s node out of its bucket (the bucket stays as sorted as it was).
    fn unlink(&mut self, slot: usize) -> bool {
        let Some(&n) = self.nodes.get(slot) else {
            return false;
        };
        if n.bucket == UNLINKED {
            return false;
        }
        let b = n.bucket;
        if n.prev == NIL {
            if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
                bm.head = n.next;
            }
        } else {
            self.set_next(n.prev, n.next);
        }
        if n.next == NIL {
            if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
                bm.tail = n.prev;
            }
        } else {
            self.set_prev(n.next, n.prev);
        }
        if let Some(nm) = self.nodes.get_mut(slot) {
            *nm = FREE_NODE;
        }
        if self
            .buckets
            .get(usize::from(b))
            .is_some_and(|bk| bk.head == NIL)
        {
            if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
                *bm = EMPTY_BUCKET;
            }
            if b != PAST {
                self.set_occupied(b, false);
            }
        }
        true
    }

    /// Restores the invariant that the first non-empty bucket is sorted.
    fn sort_first(&mut self) {
        let Some(b) = self.first_bucket() else {
            return;
        };
        if self.buckets.get(usize::from(b)).is_none_or(|bk| bk.sorted) {
            return;
        }
        let mut list = core::mem::take(&mut self.scratch);
        self.drain_bucket(b, &mut list);
        let nodes = &self.nodes;
        list.sort_by_key(|&i| (nodes.get(i as usize).map_or(u64::MAX, |n| n.deadline_ns), i));
        for &i in &list {
            // Appending in order keeps the bucket sorted.
            self.link(i, b, false);
        }
        list.clear();
        self.scratch = list;
    }

    /// True when node `i` (deadline set) would go strictly inside bucket `b` — after its
    /// head, before its tail — of a level above 0: an insert the sorted first bucket could
    /// only take by walking.
    fn lands_inside(&self, b: u16, i: u32) -> bool {
        let Some(bk) = self.buckets.get(usize::from(b)) else {
            return false;
        };
        let key = self.key(i);
        usize::from(b) >= SLOTS
            && b != PAST
            && bk.head != NIL
            && bk.sorted
            && key > self.key(bk.head)
            && key < self.key(bk.tail)
    }

    /// Cascades the first bucket `b` (a level above 0) into finer ones by moving the
    /// reference time up to its earliest deadline. Nothing in the wheel is earlier, so the
    /// invariants hold with `cur_ns` past the caller's clock: a deadline inserted below it
    /// later goes to the past bucket, which is below every level. Without this, a wheel whose
    /// reference time stayed behind (no timer fired for a while: a busy server re-arms every
    /// deadline before it is due) keeps deadlines far apart — `now + 40 ms` delayed ACKs and
    /// `now + 200 ms` retransmission timeouts — in one first bucket spanning up to a second,
    /// and each insert between them walks past all the later ones: O(connections) per
    /// segment. Amortised O(1): an entry descends at most once per level in its life.
    fn refine_first(&mut self, b: u16) {
        let head = self.buckets.get(usize::from(b)).map_or(NIL, |bk| bk.head);
        let Some(m) = self.nodes.get(head as usize).map(|n| n.deadline_ns) else {
            return;
        };
        // `m` is in bucket `b` of a level above 0, so it differs from `cur_ns` there:
        // `advance` drains exactly `b`.
        self.advance(m);
    }

    /// Empties bucket `b` into `out` (list order), leaving the nodes' deadlines in place.
    fn drain_bucket(&mut self, b: u16, out: &mut Vec<u32>) {
        let mut at = self.buckets.get(usize::from(b)).map_or(NIL, |bk| bk.head);
        while at != NIL {
            out.push(at);
            let next = self.nodes.get(at as usize).map_or(NIL, |n| n.next);
            self.set_links(at, NIL, NIL, UNLINKED);
            at = next;
        }
        if let Some(bm) = self.buckets.get_mut(usize::from(b)) {
            *bm = EMPTY_BUCKET;
        }
        if b != PAST {
            self.set_occupied(b, false);
        }
    }

    /// Moves `cur_ns` forward to `now_ns`. Precondition: no entry `≤ now_ns` (so the past
    /// bucket and every level below the highest differing group are empty); the bucket of
    /// `now_ns`'s digit at that group is re-placed relative to the new `cur_ns` (its entries
    /// all land at lower levels), every other bucket keeps its place.
    fn advance(&mut self, now_ns: u64) {
        if now_ns <= self.cur_ns {
            return;
        }
        let x = now_ns ^ self.cur_ns;
        let level = (63 - x.leading_zeros()) / SLOT_BITS;
        let digit = (now_ns >> (SLOT_BITS * level)) & (SLOTS as u64 - 1);
        let b = (level as usize * SLOTS + digit as usize) as u16;
        self.cur_ns = now_ns;
        let mut list = core::mem::take(&mut self.scratch);
        self.drain_bucket(b, &mut list);
        for &i in &list {
            let d = self
                .nodes
                .get(i as usize)
                .map_or(u64::MAX, |n| n.deadline_ns);
            let to = self.bucket_for(d);
            self.link(i, to, false);
        }
        list.clear();
        self.scratch = list;
        // No sort needed: bucket `b` was the first non-empty one (everything below it is
        // `≤ now_ns`, popped), hence sorted, and appending its entries in order keeps every
        // target bucket (all empty before) sorted.
        debug_assert!(
            self.first_bucket()
                .is_none_or(|f| self.buckets.get(usize::from(f)).is_some_and(|bk| bk.sorted))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The reference: the `BTreeSet<(deadline, slot)>` the wheel replaced, with the same
    /// one-entry-per-slot rule.
    #[derive(Default)]
    struct Model {
        set: BTreeSet<(u64, usize)>,
        by_slot: std::collections::BTreeMap<usize, u64>,
    }

    impl Model {
        fn insert(&mut self, slot: usize, t: u64) {
            self.remove(slot);
            self.set.insert((t, slot));
            self.by_slot.insert(slot, t);
        }
        fn remove(&mut self, slot: usize) -> bool {
            match self.by_slot.remove(&slot) {
                Some(t) => self.set.remove(&(t, slot)),
                None => false,
            }
        }
        fn pop_due(&mut self, now: u64) -> Vec<usize> {
            let due: Vec<(u64, usize)> = self
                .set
                .iter()
                .take_while(|&&(t, _)| t <= now)
                .copied()
                .collect();
            for &(t, i) in &due {
                self.set.remove(&(t, i));
                self.by_slot.remove(&i);
            }
            due.into_iter().map(|(_, i)| i).collect()
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Insert at `now + offset` (offset may be negative: already due).
        Insert(usize, i64),
        Remove(usize),
        /// Advance the clock by this much and pop everything due.
        Tick(u64),
    }

    fn offset() -> impl Strategy<Value = i64> {
        prop_oneof![
            -1_000i64..1_000,
            0i64..100_000,
            0i64..50_000_000,
            0i64..4_000_000_000,
            Just(0),
            (0u32..62).prop_map(|b| 1i64 << b),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0usize..160, offset()).prop_map(|(s, o)| Op::Insert(s, o)),
            2 => (0usize..160).prop_map(Op::Remove),
            2 => prop_oneof![0u64..10, 0u64..100_000, 0u64..100_000_000, 0u64..5_000_000_000]
                .prop_map(Op::Tick),
        ]
    }

    fn check(w: &TimerWheel, m: &Model) {
        assert_eq!(w.peek(), m.set.first().map(|&(t, i)| (t, i)));
        assert_eq!(w.len(), m.set.len());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Every deadline fires exactly when due (never early, never late: `pop_due(now)`
        /// returns exactly the entries `≤ now`), in (deadline, slot) order, and the earliest
        /// entry is always exact; no entry is lost or duplicated across cascades.
        #[test]
        fn the_wheel_behaves_like_the_btreeset(
            start in prop_oneof![Just(0u64), 0u64..u64::MAX / 2, Just(u64::MAX - 10_000_000_000)],
            ops in proptest::collection::vec(op(), 1..600),
        ) {
            let mut w = TimerWheel::new();
            let mut m = Model::default();
            let mut now = start;
            let mut due = Vec::new();
            w.pop_due(now, &mut due);
            prop_assert!(due.is_empty());
            for op in ops {
                match op {
                    Op::Insert(s, o) => {
                        let t = now.saturating_add_signed(o);
                        w.insert(s, t);
                        m.insert(s, t);
                        prop_assert_eq!(w.get(s), Some(t));
                    }
                    Op::Remove(s) => {
                        prop_assert_eq!(w.remove(s), m.remove(s));
                        prop_assert_eq!(w.get(s), None);
                    }
                    Op::Tick(dt) => {
                        now = now.saturating_add(dt);
                        due.clear();
                        w.pop_due(now, &mut due);
                        prop_assert_eq!(&due, &m.pop_due(now));
                    }
                }
                check(&w, &m);
            }
            // Drain everything: the remaining entries come out in order.
            due.clear();
            w.pop_due(u64::MAX, &mut due);
            prop_assert_eq!(due, m.pop_due(u64::MAX));
            prop_assert_eq!(w.len(), 0);
        }
    }

    /// A busy server's pattern: no timer fires for a while because every connection's
    /// deadline keeps moving out, re-armed to `now + 40 ms` (delayed ACK) or `now + 200 ms`
    /// (retransmission) as segments come and go, while the clock crosses a 2^30 ns boundary
    /// of the stale reference time. Without refining, both kinds share one level-5 first
    /// bucket (1.07 s wide) and every delayed-ACK insert walks past the later timeouts:
    /// O(connections) per insert (`bench::scale` at 100,000 connections spent 90 % of its
    /// time there, 100 µs per frame). Refined, the walks all but vanish; the wheel answers
    /// the same either way.
    #[test]
    fn refining_the_first_bucket_keeps_inserts_on_a_busy_wheel_from_walking_it() {
        let run = |refines: bool| {
            let mut w = TimerWheel::new();
            w.refines = refines;
            let mut now = 4 * (1u64 << 30) - 300_000_000;
            let mut due = Vec::new();
            w.pop_due(now, &mut due);
            let slots = 2_000;
            for s in 0..slots {
                w.insert(s, now + 200_000_000);
            }
            let mut firsts = Vec::new();
            for k in 0..60 * slots {
                now += 5_000; // all slots once per 10 ms
                let s = k % slots;
                let dt = if (k / slots + s) % 2 == 0 {
                    40_000_000
                } else {
                    200_000_000
                };
                w.insert(s, now + dt);
                if k % 97 == 0 {
                    firsts.push(w.peek());
                }
            }
            due.clear();
            w.pop_due(u64::MAX, &mut due);
            (w.walked, firsts, due)
        };
        let (stale, firsts_stale, order_stale) = run(false);
        let (refined, firsts_refined, order_refined) = run(true);
        assert_eq!(firsts_stale, firsts_refined);
        assert_eq!(order_stale, order_refined);
        assert!(
            stale > 1_000 * 60 * 2_000 / 10,
            "the coarse bucket is walked: {stale}"
        );
        assert!(
            refined < 2 * 60 * 2_000,
            "refined, inserts are appends: {refined}"
        );
    }

    #[test]
    fn equal_deadlines_fire_in_slot_order_whatever_the_insert_order() {
        let mut w = TimerWheel::new();
        for s in [5, 1, 9, 3, 7] {
            w.insert(s, 1_000_000);
        }
        w.insert(2, 999_999);
        assert_eq!(w.peek(), Some((999_999, 2)));
        let mut due = Vec::new();
        w.pop_due(1_000_000, &mut due);
        assert_eq!(due, [2, 1, 3, 5, 7, 9]);
    }

    /// Deadlines inserted out of order into far buckets (left unsorted there), then the
    /// clock stepped through them: each cascade must keep the first bucket sorted, so the
    /// earliest entry and every pop match the reference at every step.
    #[test]
    fn shuffled_far_deadlines_cascade_into_exact_order() {
        let mut w = TimerWheel::new();
        let mut m = Model::default();
        // A fixed pseudo-random permutation (xorshift), deadlines 1 s .. 1.5 s, many equal.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for s in 0..3_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = 1_000_000_000 + (x % 500_000) * 1_000 + (x >> 60);
            w.insert(s, t);
            m.insert(s, t);
            check(&w, &m);
        }
        let (mut now, mut due) = (0u64, Vec::new());
        while m.set.first().is_some() {
            now += 777_777;
            due.clear();
            w.pop_due(now, &mut due);
            assert_eq!(due, m.pop_due(now));
            check(&w, &m);
        }
    }

    #[test]
    fn many_increasing_deadlines_cascade_without_loss() {
        let mut w = TimerWheel::new();
        let n = 10_000usize;
        for s in 0..n {
            w.insert(s, 200_000_000 + 1_000 * s as u64);
        }
        let mut due = Vec::new();
        let mut now = 0;
        while w.len() > 0 {
            now += 3_333_333;
            w.pop_due(now, &mut due);
        }
        assert_eq!(due, (0..n).collect::<Vec<_>>());
    }
}
