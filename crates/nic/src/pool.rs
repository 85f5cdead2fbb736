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
}

/// Invariant: `free.len() <= buffers_max`; every buffer in `free` is empty (`len() == 0`).
#[derive(Clone, Debug)]
pub(crate) struct BufferPool {
    free: Vec<Vec<u8>>,
    buffers_max: usize,
    pub(crate) counters: PoolCounters,
}

impl BufferPool {
    pub(crate) fn new(buffers_max: usize) -> Self {
        BufferPool {
            free: Vec::new(),
            buffers_max,
            counters: PoolCounters::default(),
        }
    }

    /// An empty buffer with room for at least `capacity_bytes`.
    pub(crate) fn take(&mut self, capacity_bytes: usize) -> Vec<u8> {
        match self.free.pop() {
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

    /// Returns a buffer (its contents are discarded).
    pub(crate) fn give(&mut self, mut buf: Vec<u8>) {
        if self.free.len() < self.buffers_max && buf.capacity() > 0 {
            buf.clear();
            self.free.push(buf);
            self.counters.recycled += 1;
        } else {
            self.counters.discarded += 1;
        }
    }
}
