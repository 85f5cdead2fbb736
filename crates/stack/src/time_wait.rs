//! The TIME-WAIT table: compact records ([`tcp::time_wait::TimeWait`]) of connections the
//! application closed, kept for 2·MSL after their TCB, rings and socket slot were freed
//! (FreeBSD's `tcptw` is the model; issue 17 item 2).
//!
//! One [`TwTable`] per address family (IPv4 records are 52 bytes, IPv6 records 76), each:
//! - `recs`: the records, dense (a removal moves the last record into the hole), grown by a
//!   sixteenth at a time so at most ~6 % of it is spare, and shrunk when a quarter is used;
//! - `index`: open addressing with linear probing over `u32` slots, each an 8-bit tag of the
//!   flow hash and the record's position plus one (0 is empty); at most 7/8 full, so a
//!   lookup reads a few consecutive slots and touches a record only when the tag matches;
//!   removal shifts later entries back (no tombstones);
//! - an expiry queue threaded through the records (`prev`/`next`), ordered by expiry: a new
//!   or restarted record goes to the tail with an expiry no earlier than the tail's (a record
//!   may outlive its 2·MSL by as much as the latest one, never fall short), so the head is
//!   always the next to expire and expiry is O(1) — the wheel of a single duration.
//!
//! Invariants: `index` holds exactly one slot per record, found from the record's flow hash
//! (the connection table's table hash, `FlowKey::table_hash`: keyed unless the RSS key is
//! secret); the queue links every record
//! once, expiries non-decreasing from `head` to `tail`; `recs.len() < MAX_RECORDS`.
//!
//! The table is bounded by `Limits::tcp_time_wait_max` (both families together): a new
//! record beyond it evicts the oldest (`tcp_time_wait_evicted`), as FreeBSD recycles its
//! oldest `tcptw` past `maxtcptw`.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tcp::time_wait::TimeWait;

use crate::tcp_sockets::FourTuple;

/// "No record" in the queue links.
const NIL: u32 = u32::MAX;
/// Records per table: positions are 24 bits in an index slot.
pub(crate) const MAX_RECORDS: usize = (1 << 24) - 2;
const TAG_SHIFT: u32 = 24;
const POS_MASK: u32 = (1 << TAG_SHIFT) - 1;
/// The smallest index, slots.
const INDEX_MIN: usize = 16;

/// A record's addresses, in the family's compact form.
pub(crate) trait TwAddrs: Copy + Eq + core::fmt::Debug {
    /// `(local, remote)` of `t` in this family, or `None` for the other one.
    fn pack(t: &FourTuple) -> Option<Self>;
    /// The 4-tuple with these addresses and ports.
    fn unpack(&self, local_port: u16, remote_port: u16) -> FourTuple;
}

/// IPv4 addresses (local, remote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct V4([u8; 4], [u8; 4]);

/// IPv6 addresses (local, remote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct V6([u8; 16], [u8; 16]);

impl TwAddrs for V4 {
    fn pack(t: &FourTuple) -> Option<V4> {
        match (t.local.ip(), t.remote.ip()) {
            (IpAddr::V4(l), IpAddr::V4(r)) => Some(V4(l.octets(), r.octets())),
            _ => None,
        }
    }
    fn unpack(&self, local_port: u16, remote_port: u16) -> FourTuple {
        FourTuple {
            local: SocketAddr::new(IpAddr::V4(Ipv4Addr::from(self.0)), local_port),
            remote: SocketAddr::new(IpAddr::V4(Ipv4Addr::from(self.1)), remote_port),
        }
    }
}

impl TwAddrs for V6 {
    fn pack(t: &FourTuple) -> Option<V6> {
        match (t.local.ip(), t.remote.ip()) {
            (IpAddr::V6(l), IpAddr::V6(r)) => Some(V6(l.octets(), r.octets())),
            _ => None,
        }
    }
    fn unpack(&self, local_port: u16, remote_port: u16) -> FourTuple {
        FourTuple {
            local: SocketAddr::new(IpAddr::V6(Ipv6Addr::from(self.0)), local_port),
            remote: SocketAddr::new(IpAddr::V6(Ipv6Addr::from(self.1)), remote_port),
        }
    }
}

/// One connection in TIME-WAIT.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TwRecord<A> {
    addrs: A,
    local_port: u16,
    remote_port: u16,
    /// What the connection kept (sequence numbers, window, timestamps).
    pub(crate) tw: TimeWait,
    /// The expiry, ns, as two halves (low, high): keeps the record 4-byte aligned.
    expiry_ns: [u32; 2],
    prev: u32,
    next: u32,
}

impl<A: TwAddrs> TwRecord<A> {
    pub(crate) fn tuple(&self) -> FourTuple {
        self.addrs.unpack(self.local_port, self.remote_port)
    }

    pub(crate) fn expiry_ns(&self) -> u64 {
        u64::from(self.expiry_ns[0]) | (u64::from(self.expiry_ns[1]) << 32)
    }

    fn set_expiry_ns(&mut self, t: u64) {
        self.expiry_ns = [t as u32, (t >> 32) as u32];
    }

    fn matches(&self, addrs: &A, t: &FourTuple) -> bool {
        self.local_port == t.local.port()
            && self.remote_port == t.remote.port()
            && self.addrs == *addrs
    }
}

/// The TIME-WAIT records of one address family (see the module documentation).
#[derive(Debug)]
pub(crate) struct TwTable<A> {
    recs: Vec<TwRecord<A>>,
    index: Vec<u32>,
    head: u32,
    tail: u32,
}

fn tag_of(hash: u32) -> u32 {
    // The low byte, never 0 (so a slot is never all zero).
    (hash & 0xff).max(1)
}

impl<A: TwAddrs> TwTable<A> {
    pub(crate) fn new() -> TwTable<A> {
        TwTable {
            recs: Vec::new(),
            index: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.recs.len()
    }

    /// Heap bytes the table holds (records and index, capacity included).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.recs.capacity() * core::mem::size_of::<TwRecord<A>>() + self.index.capacity() * 4
    }

    fn home(&self, hash: u32) -> usize {
        // Fibonacci hashing on the top bits (the tag uses the low byte).
        let bits = self.index.len().trailing_zeros();
        (hash.wrapping_mul(0x9e37_79b9) >> (32 - bits)) as usize
    }

    /// The position of the record for `t` (whose flow hash is `hash`), if there is one.
    pub(crate) fn find(&self, hash: u32, t: &FourTuple) -> Option<u32> {
        if self.recs.is_empty() {
            return None;
        }
        let addrs = A::pack(t)?;
        let mask = self.index.len() - 1;
        let tag = tag_of(hash);
        let mut i = self.home(hash);
        loop {
            let s = self.index[i];
            if s == 0 {
                return None;
            }
            if s >> TAG_SHIFT == tag {
                let pos = (s & POS_MASK) - 1;
                if self.recs[pos as usize].matches(&addrs, t) {
                    return Some(pos);
                }
            }
            i = (i + 1) & mask;
        }
    }

    pub(crate) fn get(&self, pos: u32) -> Option<&TwRecord<A>> {
        self.recs.get(pos as usize)
    }

    pub(crate) fn get_mut(&mut self, pos: u32) -> Option<&mut TwRecord<A>> {
        self.recs.get_mut(pos as usize)
    }

    /// The record that expires first (the queue's head).
    pub(crate) fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The latest expiry in the table (the queue's tail), if any.
    fn tail_expiry_ns(&self) -> Option<u64> {
        (self.tail != NIL).then(|| self.recs[self.tail as usize].expiry_ns())
    }

    /// Adds the record of `t` (not in the table), expiring at `expiry_ns` or at the latest
    /// expiry already queued, whichever is later; `hash` is `t`'s flow hash and `h` computes
    /// any tuple's (the index keeps none, so growing it rehashes). Its position, or `None`
    /// when `t` is of the other family or the table holds [`MAX_RECORDS`].
    pub(crate) fn insert(
        &mut self,
        hash: u32,
        t: &FourTuple,
        tw: TimeWait,
        expiry_ns: u64,
        h: &impl Fn(&FourTuple) -> u32,
    ) -> Option<u32> {
        let addrs = A::pack(t)?;
        if self.recs.len() >= MAX_RECORDS {
            return None;
        }
        self.reserve_one(h);
        let pos = self.recs.len() as u32;
        let expiry = expiry_ns.max(self.tail_expiry_ns().unwrap_or(0));
        let mut rec = TwRecord {
            addrs,
            local_port: t.local.port(),
            remote_port: t.remote.port(),
            tw,
            expiry_ns: [0; 2],
            prev: NIL,
            next: NIL,
        };
        rec.set_expiry_ns(expiry);
        self.recs.push(rec);
        self.link_tail(pos);
        self.index_put(hash, pos);
        Some(pos)
    }

    /// Grows `recs` by a sixteenth when full, and doubles the index when one more record
    /// would fill it past 7/8.
    fn reserve_one(&mut self, h: &impl Fn(&FourTuple) -> u32) {
        let n = self.recs.len();
        if n == self.recs.capacity() {
            self.recs.reserve_exact((n / 16).max(16));
        }
        if (n + 1) * 8 > self.index.len() * 7 {
            let size = (self.index.len() * 2).max(INDEX_MIN);
            self.rebuild_index(size, h);
        }
    }

    /// A new index of `size` slots (a power of two) holding every record.
    #[cold]
    fn rebuild_index(&mut self, size: usize, h: &impl Fn(&FourTuple) -> u32) {
        self.index = vec![0; size];
        for pos in 0..self.recs.len() as u32 {
            let hash = h(&self.recs[pos as usize].tuple());
            self.index_put(hash, pos);
        }
    }

    /// Moves record `pos` to the queue's tail with expiry `expiry_ns` (or the latest one
    /// queued, if later): TIME-WAIT restarted.
    pub(crate) fn restart(&mut self, pos: u32, expiry_ns: u64) {
        let expiry = expiry_ns.max(self.tail_expiry_ns().unwrap_or(0));
        self.unlink(pos);
        self.recs[pos as usize].set_expiry_ns(expiry);
        self.link_tail(pos);
    }

    /// Removes and returns record `pos` (`h` computes flow hashes: the index keeps none).
    pub(crate) fn remove(&mut self, pos: u32, h: &impl Fn(&FourTuple) -> u32) -> TwRecord<A> {
        let hash = h(&self.recs[pos as usize].tuple());
        self.index_take(hash, pos, h);
        self.unlink(pos);
        let last = (self.recs.len() - 1) as u32;
        if pos != last {
            // The last record takes the hole: its index slot and its neighbours follow.
            let moved = self.recs[last as usize];
            self.index_repoint(h(&moved.tuple()), last, pos);
            if moved.prev == NIL {
                self.head = pos;
            } else {
                self.recs[moved.prev as usize].next = pos;
            }
            if moved.next == NIL {
                self.tail = pos;
            } else {
                self.recs[moved.next as usize].prev = pos;
            }
        }
        let rec = self.recs.swap_remove(pos as usize);
        self.shrink(h);
        rec
    }

    /// Every record with its position, in position order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &TwRecord<A>)> {
        self.recs.iter().enumerate().map(|(i, r)| (i as u32, r))
    }

    /// Memory back to the allocator once a quarter (records) or an eighth (index) is used.
    fn shrink(&mut self, h: &impl Fn(&FourTuple) -> u32) {
        let n = self.recs.len();
        if n == 0 {
            self.recs = Vec::new();
            self.index = Vec::new();
            return;
        }
        if self.recs.capacity() > 64 && n * 4 <= self.recs.capacity() {
            self.recs.shrink_to(n * 2);
        }
        if self.index.len() > INDEX_MIN && n * 8 <= self.index.len() {
            let size = (self.index.len() / 4).max(INDEX_MIN);
            self.rebuild_index(size, h);
        }
    }

    fn link_tail(&mut self, pos: u32) {
        let tail = self.tail;
        let r = &mut self.recs[pos as usize];
        r.prev = tail;
        r.next = NIL;
        if tail == NIL {
            self.head = pos;
        } else {
            self.recs[tail as usize].next = pos;
        }
        self.tail = pos;
    }

    fn unlink(&mut self, pos: u32) {
        let (prev, next) = {
            let r = &self.recs[pos as usize];
            (r.prev, r.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.recs[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.recs[next as usize].prev = prev;
        }
    }

    fn index_put(&mut self, hash: u32, pos: u32) {
        let mask = self.index.len() - 1;
        let mut i = self.home(hash);
        while self.index[i] != 0 {
            i = (i + 1) & mask;
        }
        self.index[i] = (tag_of(hash) << TAG_SHIFT) | (pos + 1);
    }

    /// The index slot holding `pos` (found from its hash).
    fn index_slot(&self, hash: u32, pos: u32) -> Option<usize> {
        let mask = self.index.len() - 1;
        let mut i = self.home(hash);
        loop {
            let s = self.index[i];
            if s == 0 {
                return None;
            }
            if s & POS_MASK == pos + 1 {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn index_repoint(&mut self, hash: u32, from: u32, to: u32) {
        if let Some(i) = self.index_slot(hash, from) {
            self.index[i] = (self.index[i] & !POS_MASK) | (to + 1);
        } else {
            debug_assert!(false, "TIME-WAIT index lost record {from}");
        }
    }

    /// Removes `pos`'s slot, shifting back the entries after it whose home allows it
    /// (linear probing's deletion without tombstones).
    fn index_take(&mut self, hash: u32, pos: u32, h: &impl Fn(&FourTuple) -> u32) {
        let Some(mut hole) = self.index_slot(hash, pos) else {
            debug_assert!(false, "TIME-WAIT index lost record {pos}");
            return;
        };
        let mask = self.index.len() - 1;
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let s = self.index[i];
            if s == 0 {
                break;
            }
            let p = (s & POS_MASK) - 1;
            let home = self.home(h(&self.recs[p as usize].tuple()));
            // The entry at `i` may move to the hole unless its home lies in (hole, i].
            let dist_home = i.wrapping_sub(home) & mask;
            let dist_hole = i.wrapping_sub(hole) & mask;
            if dist_home >= dist_hole {
                self.index[hole] = s;
                hole = i;
            }
        }
        self.index[hole] = 0;
    }

    /// The first violated invariant, for tests.
    #[cfg(test)]
    fn check(&self, h: &impl Fn(&FourTuple) -> u32) -> Result<(), String> {
        let used = self.index.iter().filter(|&&s| s != 0).count();
        if used != self.recs.len() {
            return Err(format!(
                "{used} index slots for {} records",
                self.recs.len()
            ));
        }
        for (pos, r) in self.iter() {
            if self.find(h(&r.tuple()), &r.tuple()) != Some(pos) {
                return Err(format!("record {pos} not found"));
            }
        }
        let (mut at, mut n, mut last) = (self.head, 0, 0u64);
        while at != NIL {
            let r = &self.recs[at as usize];
            if r.expiry_ns() < last {
                return Err(format!("queue out of order at {at}"));
            }
            last = r.expiry_ns();
            n += 1;
            at = r.next;
        }
        if n != self.recs.len() {
            return Err(format!("queue links {n} of {}", self.recs.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::SeqNumber;

    fn tuple(i: u32) -> FourTuple {
        FourTuple {
            local: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 80),
            remote: SocketAddr::new(
                IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + (i >> 8))),
                1024 + (i & 0xff) as u16,
            ),
        }
    }

    /// A deliberately poor hash (many collisions, shared tags) to exercise probing.
    fn hash(t: &FourTuple) -> u32 {
        let p = u32::from(t.remote.port());
        (p % 7).wrapping_mul(0x0101_0101) ^ (p & 3)
    }

    fn tw(n: u32) -> TimeWait {
        TimeWait {
            snd_nxt: SeqNumber(n),
            rcv_nxt: SeqNumber(n + 1),
            ts_recent: 0,
            ts_offset: 0,
            window: 0,
            max_wnd_scaled: 0,
            flags: 0,
            wscales: 0,
        }
    }

    #[test]
    fn an_ipv4_record_is_52_bytes_and_an_ipv6_record_76() {
        assert_eq!(core::mem::size_of::<TwRecord<V4>>(), 52);
        assert_eq!(core::mem::size_of::<TwRecord<V6>>(), 76);
    }

    #[test]
    fn a_late_insert_or_restart_never_expires_before_the_tail() {
        let mut t = TwTable::<V4>::new();
        t.insert(hash(&tuple(1)), &tuple(1), tw(1), 100, &hash)
            .expect("insert");
        let p = t
            .insert(hash(&tuple(2)), &tuple(2), tw(2), 50, &hash)
            .expect("insert");
        assert_eq!(t.get(p).map(TwRecord::expiry_ns), Some(100));
        t.restart(0, 70);
        assert_eq!(
            (t.head(), t.get(0).map(TwRecord::expiry_ns)),
            (Some(1), Some(100))
        );
        t.check(&hash).expect("invariants");
    }

    proptest! {
        /// Inserts, finds, restarts and removals against a model: every record is found
        /// under its tuple, the queue stays ordered, the index holds one slot per record.
        #[test]
        fn the_table_agrees_with_a_model(ops in proptest::collection::vec((0u8..4, 0u32..300), 0..400)) {
            let mut t = TwTable::<V4>::new();
            let mut model = std::collections::BTreeMap::new();
            let mut now = 0u64;
            for (op, k) in ops {
                now += 1;
                let tu = tuple(k);
                match op {
                    0 | 1 => {
                        if let std::collections::btree_map::Entry::Vacant(e) = model.entry(k) {
                            t.insert(hash(&tu), &tu, tw(k), now + 10, &hash).expect("insert");
                            e.insert(());
                        }
                    }
                    2 => {
                        if let Some(p) = t.find(hash(&tu), &tu) {
                            let r = t.remove(p, &hash);
                            prop_assert_eq!(r.tw.snd_nxt, SeqNumber(k));
                            prop_assert!(model.remove(&k).is_some());
                        } else {
                            prop_assert!(!model.contains_key(&k));
                        }
                    }
                    _ => {
                        if let Some(p) = t.find(hash(&tu), &tu) {
                            t.restart(p, now + 10);
                        }
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                t.check(&hash).map_err(TestCaseError::fail)?;
            }
            // Drained from the head: expiry order, and the memory goes back.
            while let Some(p) = t.head() {
                t.remove(p, &hash);
            }
            prop_assert_eq!(t.heap_bytes(), 0);
        }
    }
}
