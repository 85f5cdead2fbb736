//! A bounded free list of frame buffers, so a steady flow of packets allocates nothing.
//!
//! Buffers come back from the places the NIC drops a frame it owns (a segment merged into a
//! coalesced group, a full ring, a malformed frame, a large send after segmentation) and
//! from [`crate::Nic::recycle`]; they go out to TSO segments and [`crate::Nic::take_buffer`].

/// Buffer pool statistics (NIC-wide).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounters {
    /// Buffers handed out from the free list.
    pub reused: u64,
    /// Buffers allocated because the free list was empty.
    pub allocated: u64,
    /// Buffers returned to the free list.
    pub recycled: u64,
    /// Buffers freed because the free list was full.
    pub discarded: u64,
    /// Buffers given back to the allocator by [`crate::Nic::reap_pool`] because they sat in
    /// the free list through a whole reap interval.
    pub reaped: u64,
}

/// Buffers of at least this capacity form a class of their own (receive-coalescing groups,
/// [`BufferPool::take`] of a group's size): a frame-sized request never gets one (and pins
/// 64 KiB for a 1.5 KiB frame), and a group never has to grow a frame-sized one.
pub(crate) const LARGE_BUFFER_BYTES: usize = 16 * 1024;

/// Invariants: `free.len() <= buffers_max` and `large.len() <= large_max()`; every buffer in
/// `free` has a capacity below [`LARGE_BUFFER_BYTES`], every buffer in `large` at least that;
/// every buffer in either is empty (`len() == 0`).
#[derive(Clone, Debug)]
pub(crate) struct BufferPool {
    free: Vec<Vec<u8>>,
    large: Vec<Vec<u8>>,
    buffers_max: usize,
    /// The fewest buffers `free` / `large` held since the last `reap`: that many sat unused
    /// through the whole interval.
    free_low: usize,
    large_low: usize,
    pub(crate) counters: PoolCounters,
}

impl BufferPool {
    pub(crate) fn new(buffers_max: usize) -> Self {
        // The free lists are sized for their bounds up front, so returning buffers never
        // grows (allocates) them mid-run.
        BufferPool {
            free: Vec::with_capacity(buffers_max),
            large: Vec::with_capacity(buffers_max / 4),
            buffers_max,
            free_low: 0,
            large_low: 0,
            counters: PoolCounters::default(),
        }
    }

    /// Large buffers kept: a quarter of the bound (at most 256 × 64 KiB = 16 MiB with the
    /// default bound, reached only if that many coalesced groups were in flight at once).
    fn large_max(&self) -> usize {
        self.buffers_max / 4
    }

    /// An empty buffer with room for at least `capacity_bytes`, from the size class of the
    /// request.
    pub(crate) fn take(&mut self, capacity_bytes: usize) -> Vec<u8> {
        let list = if capacity_bytes >= LARGE_BUFFER_BYTES {
            &mut self.large
        } else {
            &mut self.free
        };
        let popped = list.pop();
        if capacity_bytes >= LARGE_BUFFER_BYTES {
            self.large_low = self.large_low.min(self.large.len());
        } else {
            self.free_low = self.free_low.min(self.free.len());
        }
        match popped {
            Some(mut b) => {
                self.counters.reused += 1;
                b.reserve(capacity_bytes);
                b
            }
            None => {
                self.counters.allocated += 1;
                Vec::with_capacity(capacity_bytes)
            }
        }
    }

    /// Returns a buffer (its contents are discarded) to its size class, or frees it when the
    /// class is full.
    pub(crate) fn give(&mut self, mut buf: Vec<u8>) {
        let large = buf.capacity() >= LARGE_BUFFER_BYTES;
        let (len, max) = if large {
            (self.large.len(), self.large_max())
        } else {
            (self.free.len(), self.buffers_max)
        };
        if len < max && buf.capacity() > 0 {
            buf.clear();
            if large {
                self.large.push(buf);
            } else {
                self.free.push(buf);
            }
            self.counters.recycled += 1;
        } else {
            self.counters.discarded += 1;
        }
    }
}

impl BufferPool {
    /// Buffers in the free lists.
    pub(crate) fn idle_buffers(&self) -> usize {
        self.free.len() + self.large.len()
    }

    /// Memory back to the allocator past what the pool needs: frees the buffers that sat in
    /// each free list through the whole interval since the last call (its low-water mark:
    /// the oldest ones, at the bottom of the stack), so a pool that a burst filled shrinks
    /// back to what the traffic since uses within one interval, and to nothing when idle.
    /// The lists' own storage shrinks with them. Returns the number freed.
    pub(crate) fn reap(&mut self) -> usize {
        let (nf, nl) = (
            self.free_low.min(self.free.len()),
            self.large_low.min(self.large.len()),
        );
        self.free.drain(..nf);
        self.large.drain(..nl);
        if nf > 0 {
            self.free
                .shrink_to(self.free.len().max(self.buffers_max / 16));
        }
        if nl > 0 {
            self.large.shrink_to(self.large.len());
        }
        self.free_low = self.free.len();
        self.large_low = self.large.len();
        self.counters.reaped += (nf + nl) as u64;
        nf + nl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_size_class_is_reused_by_requests_of_its_size() {
        let mut p = BufferPool::new(8);
        let small = p.take(1500);
        let big = p.take(64 * 1024);
        let (small_cap, big_cap) = (small.capacity(), big.capacity());
        p.give(big);
        p.give(small);
        // The small request does not take the large buffer (the last one given), nor the
        // reverse.
        let (s, b) = (p.take(1500), p.take(60 * 1024));
        assert_eq!((s.capacity(), b.capacity()), (small_cap, big_cap));
        assert_eq!(p.counters.allocated, 2);
        assert_eq!(p.counters.reused, 2);
    }

    #[test]
    fn reaping_frees_what_sat_unused_through_an_interval_and_keeps_what_was_used() {
        let mut p = BufferPool::new(64);
        let bufs: Vec<_> = (0..10).map(|_| p.take(1500)).collect();
        bufs.into_iter().for_each(|b| p.give(b));
        // The first interval saw the list at 0 (the takes): nothing sat unused.
        assert_eq!(p.reap(), 0);
        assert_eq!(p.free.len(), 10);
        // Three in use during the next interval: the other seven sat unused.
        let used: Vec<_> = (0..3).map(|_| p.take(1500)).collect();
        used.into_iter().for_each(|b| p.give(b));
        assert_eq!(p.reap(), 7);
        assert_eq!(p.free.len(), 3);
        // Idle: everything goes.
        assert_eq!(p.reap(), 3);
        assert!(p.free.is_empty());
        assert_eq!(p.counters.reaped, 10);
    }

    #[test]
    fn each_class_is_bounded() {
        let mut p = BufferPool::new(4);
        for _ in 0..3 {
            p.give(Vec::with_capacity(LARGE_BUFFER_BYTES));
        }
        assert_eq!(p.large.len(), 1);
        assert_eq!(p.counters.discarded, 2);
        for _ in 0..5 {
            p.give(Vec::with_capacity(100));
        }
        assert_eq!(p.free.len(), 4);
    }
}
