//! A bounded byte ring used for the send and receive buffers.
//!
//! The ring holds `len` contiguous bytes starting at `head`. Beyond them, bytes may be written
//! at an offset without becoming readable (the receive side keeps out-of-order data there) and
//! are made readable later with [`Ring::commit`]. Storage is allocated once, on the first
//! write (so an idle connection costs no buffer memory); no other operation allocates.

/// A fixed-capacity byte ring.
///
/// Invariants: `storage` is empty or exactly `capacity` bytes; `head < capacity` (or 0);
/// `len ≤ capacity`, and `len == 0` while `storage` is empty.
#[derive(Clone)]
pub struct Ring {
    storage: Box<[u8]>,
    capacity: usize,
    head: usize,
    len: usize,
}

impl core::fmt::Debug for Ring {
    // Not derived: the storage (up to a gigabyte) would drown any debug output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity)
            .field("head", &self.head)
            .field("len", &self.len)
            .field("allocated", &!self.storage.is_empty())
            .finish()
    }
}

impl Ring {
    /// A ring able to hold `capacity_bytes` bytes.
    pub fn new(capacity_bytes: usize) -> Ring {
        Ring {
            storage: Box::default(),
            capacity: capacity_bytes,
            head: 0,
            len: 0,
        }
    }

    /// Total capacity in bytes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Readable bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is readable.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that can still be appended.
    #[inline]
    pub fn free(&self) -> usize {
        self.capacity - self.len
    }

    #[inline]
    fn wrap(&self, pos: usize) -> usize {
        let cap = self.capacity;
        if pos >= cap { pos - cap } else { pos }
    }

    /// Appends as much of `data` as fits; returns the number of bytes appended.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let n = self.write_at(self.len, data);
        self.len += n;
        n
    }

    /// Copies `data` to `offset` bytes past `head` (which may lie beyond the readable bytes)
    /// without changing what is readable; returns how many bytes fit below the capacity.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> usize {
        let cap = self.capacity;
        if offset >= cap || data.is_empty() {
            return 0;
        }
        if self.storage.is_empty() {
            self.storage = vec![0u8; cap].into_boxed_slice();
        }
        let n = data.len().min(cap - offset);
        let start = self.wrap(self.head + offset);
        let first = n.min(cap - start);
        let (a, b) = data[..n].split_at(first);
        self.storage[start..start + first].copy_from_slice(a);
        self.storage[..b.len()].copy_from_slice(b);
        n
    }

    /// Makes `n` more bytes (previously written with [`Ring::write_at`]) readable; clamps at the
    /// capacity and returns the number committed.
    pub fn commit(&mut self, n: usize) -> usize {
        let n = n.min(self.free());
        self.len += n;
        n
    }

    /// Copies readable bytes starting `offset` bytes past `head` into `out` without consuming
    /// them; returns the number copied.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> usize {
        if offset >= self.len {
            return 0;
        }
        let cap = self.capacity;
        let n = out.len().min(self.len - offset);
        let start = self.wrap(self.head + offset);
        let first = n.min(cap - start);
        let (a, b) = out[..n].split_at_mut(first);
        a.copy_from_slice(&self.storage[start..start + first]);
        b.copy_from_slice(&self.storage[..b.len()]);
        n
    }

    /// Discards up to `n` readable bytes from the front; returns the number discarded.
    pub fn consume(&mut self, n: usize) -> usize {
        let n = n.min(self.len);
        self.head = self.wrap(self.head + n);
        self.len -= n;
        // `head` is not reset when the ring empties: bytes written beyond `len` (out-of-order
        // data) are addressed relative to it.
        n
    }

    /// Copies readable bytes into `out` and consumes them; returns the number read.
    pub fn pop(&mut self, out: &mut [u8]) -> usize {
        let n = self.read_at(0, out);
        self.consume(n)
    }

    /// Changes the capacity to `capacity_bytes`, or to the readable length if that is larger;
    /// the readable bytes are kept, bytes written past them (`write_at`) are dropped.
    pub fn set_capacity(&mut self, capacity_bytes: usize) {
        let cap = capacity_bytes.max(self.len);
        if cap == self.capacity {
            return;
        }
        let data = self.to_vec();
        *self = Ring::new(cap);
        let pushed = self.push(&data);
        debug_assert_eq!(pushed, data.len());
    }

    /// All readable bytes in order, as one vector (used by snapshots, not on the hot path).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        self.read_at(0, &mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn debug_output_does_not_dump_the_storage() {
        let mut r = Ring::new(1 << 16);
        r.push(&[7u8; 1000]);
        let s = format!("{r:?}");
        assert!(s.len() < 200, "{s}");
    }

    #[test]
    fn set_capacity_keeps_wrapped_bytes_in_order_and_never_drops_below_len() {
        let mut r = Ring::new(8);
        r.push(b"abcdef");
        r.consume(4);
        r.push(b"ghij"); // wraps: "efghij"
        r.set_capacity(20);
        assert_eq!((r.capacity(), r.to_vec()), (20, b"efghij".to_vec()));
        r.set_capacity(2);
        assert_eq!((r.capacity(), r.to_vec()), (6, b"efghij".to_vec()));
        assert_eq!(r.free(), 0);
    }

    #[test]
    fn storage_is_allocated_on_first_write_only() {
        let mut r = Ring::new(1 << 20);
        assert_eq!(r.storage.len(), 0);
        assert_eq!(r.free(), 1 << 20);
        assert_eq!(r.pop(&mut [0u8; 4]), 0);
        r.push(b"x");
        assert_eq!(r.storage.len(), 1 << 20);
    }

    #[test]
    fn push_beyond_capacity_is_truncated() {
        let mut r = Ring::new(4);
        assert_eq!(r.push(b"abcdef"), 4);
        assert_eq!(r.free(), 0);
        let mut out = [0u8; 8];
        assert_eq!(r.pop(&mut out), 4);
        assert_eq!(&out[..4], b"abcd");
    }

    #[test]
    fn write_at_then_commit_makes_bytes_readable_across_the_wrap() {
        let mut r = Ring::new(8);
        r.push(b"123456");
        r.consume(5);
        // head = 5, one readable byte; write 2 bytes after a 3-byte hole, wrapping.
        assert_eq!(r.write_at(4, b"xy"), 2);
        assert_eq!(r.write_at(1, b"abc"), 3);
        assert_eq!(r.commit(5), 5);
        let mut out = [0u8; 8];
        assert_eq!(r.pop(&mut out), 6);
        assert_eq!(&out[..6], b"6abcxy");
    }

    proptest! {
        #[test]
        fn ring_behaves_like_a_bounded_queue(ops in proptest::collection::vec((any::<bool>(), 0usize..20), 0..60)) {
            let mut r = Ring::new(13);
            let mut model: std::collections::VecDeque<u8> = Default::default();
            let mut next = 0u8;
            for (is_push, n) in ops {
                if is_push {
                    let data: Vec<u8> = (0..n).map(|_| { next = next.wrapping_add(1); next }).collect();
                    let took = r.push(&data);
                    prop_assert_eq!(took, n.min(13 - model.len()));
                    model.extend(&data[..took]);
                } else {
                    let mut out = vec![0u8; n];
                    let got = r.pop(&mut out);
                    let want: Vec<u8> = (0..got).filter_map(|_| model.pop_front()).collect();
                    prop_assert_eq!(&out[..got], &want[..]);
                    prop_assert_eq!(got, want.len());
                }
                prop_assert_eq!(r.len(), model.len());
            }
        }
    }
}
