//! A bounded byte ring used for the send and receive buffers.
//!
//! The ring holds `len` contiguous bytes starting at `head`. Beyond them, bytes may be written
//! at an offset without becoming readable (the receive side keeps out-of-order data there) and
//! are made readable later with [`Ring::commit`]. Storage is allocated on the first write (so
//! an idle connection costs no buffer memory) at [`STORAGE_MIN_BYTES`], and doubles when a
//! write reaches past it, up to the capacity: a connection that exchanges a few hundred bytes
//! never allocates the full buffer. Only writes allocate.
//!
//! [`Ring::release_if_empty`] gives the storage back when nothing is readable or written
//! ahead (the stack calls it for connections idle a while, `stack::tcp_idle`): storage of
//! the minimum size goes into a small per-thread pool ([`POOL_BUFFERS_MAX`] buffers) that
//! the next first write takes from, larger storage to the allocator; so does a dropped ring.
//! Releasing at once whenever a ring empties was measured and rejected: in the scaling
//! benchmark's 64-byte request/response every exchange empties four rings, and the release
//! and the next first write cost ~560 instructions per frame (+7.7 %).
//!
//! The minimum-size storage (the first allocation, and the pool's) is a slot of the
//! thread's huge-page chunks (`platform::huge_bytes`): with many connections each ring's
//! 4 KiB would otherwise sit on a 4 KiB page of its own and every segment's copy would miss
//! the TLB (issue 17). Larger storage, and storage adopted from a vector (snapshots), is an
//! ordinary allocation.
//!
//! Growing builds the new storage in one pass: the old bytes (each at its offset from
//! `head`), then the bytes of the write that needed the room, then zeros for the rest only
//! (a `Box<[u8]>` must be initialized, and `unsafe` stays in `platform`); so a write of
//! `n` bytes that grows the storage to `size` writes `size` bytes once, where it used to
//! zero the new part and then copy the `n` bytes over it. Pooled buffers are reused as they
//! are (a ring reads only bytes it wrote). A `Vec` whose length is the prefix written would
//! spare the zeros of the tail too, but makes the ring 40 bytes instead of 32, in a TCB that
//! holds two.

use std::cell::RefCell;
use std::collections::VecDeque;

use platform::huge_bytes::HugeBytes;

/// The first allocation of a ring's storage, bytes (or the capacity, when smaller).
pub const STORAGE_MIN_BYTES: usize = 4096;

// The first allocation is the one length `HugeBytes` keeps in huge-page chunk slots.
const _: () = assert!(STORAGE_MIN_BYTES == platform::huge_bytes::CHUNK_LEN_BYTES);

/// Buffers of [`STORAGE_MIN_BYTES`] the per-thread pool keeps for reuse (a shard is one
/// thread: 1 MiB at most per shard); more are freed.
pub const POOL_BUFFERS_MAX: usize = 256;

thread_local! {
    /// Empty buffers of capacity [`STORAGE_MIN_BYTES`], at most [`POOL_BUFFERS_MAX`].
    static POOL: RefCell<Vec<HugeBytes>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of [`STORAGE_MIN_BYTES`], from the pool if it has one, else a zero-filled
/// slot of the thread's huge-page chunks (`platform::huge_bytes`: with many connections a
/// ring's 4 KiB on a page of its own would miss the TLB at every segment).
fn pool_take() -> HugeBytes {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| HugeBytes::zeroed(STORAGE_MIN_BYTES))
}

/// Gives a minimum-size buffer back to the pool (freed when the pool is full, or when it
/// is of another size). Its bytes are kept: a ring reads only what it wrote.
fn pool_give(v: HugeBytes) {
    if v.len() != STORAGE_MIN_BYTES {
        return;
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_BUFFERS_MAX {
            p.push(v);
        }
    });
}

/// Frees every buffer the calling thread's pool holds; returns the bytes freed. The stack
/// calls it when its socket table shrinks past its high-water mark (`stack::sockets`): a
/// burst of connections has closed, and buffers kept for the next first write would
/// otherwise stay allocated for as long as the thread lives.
pub fn pool_clear() -> usize {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let freed_bytes = p.len() * STORAGE_MIN_BYTES;
        *p = Vec::new();
        freed_bytes
    })
}

/// The storage a ring of `capacity_bytes` allocates to hold `n` bytes from its head (the
/// growth rule: the next power of two, at least [`STORAGE_MIN_BYTES`], at most the
/// capacity; 0 for no bytes).
pub fn storage_bytes_for(capacity_bytes: usize, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    n.max(STORAGE_MIN_BYTES)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX)
        .min(capacity_bytes)
}

/// A fixed-capacity byte ring.
///
/// Invariants: `storage.len()` is 0, or a power of two ≥ [`STORAGE_MIN_BYTES`] below
/// `capacity`, or exactly `capacity`; positions wrap at `storage.len()`; `head <
/// storage.len()` (or 0); `len ≤ ahead ≤ storage.len() ≤ capacity ≤ u32::MAX`, where `ahead`
/// is the offset from `head` just past the furthest byte written (readable or not); bytes
/// are read only at offsets below `len`, all written since the storage was taken.
///
/// Positions are kept as `u32` (a connection's buffers are at most 2^30 bytes, and two rings
/// sit inside its TCB: 32 bytes each); the API speaks `usize`.
pub struct Ring {
    storage: HugeBytes,
    capacity: u32,
    head: u32,
    len: u32,
    ahead: u32,
}

impl Clone for Ring {
    fn clone(&self) -> Ring {
        Ring {
            storage: self.storage.clone(),
            ..*self
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.release();
    }
}

impl core::fmt::Debug for Ring {
    // Not derived: the storage (up to a gigabyte) would drown any debug output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity)
            .field("head", &self.head)
            .field("len", &self.len)
            .field("allocated", &self.storage.len())
            .finish()
    }
}

impl Ring {
    /// A ring able to hold `capacity_bytes` bytes (at most `u32::MAX`).
    pub fn new(capacity_bytes: usize) -> Ring {
        Ring {
            storage: HugeBytes::new(),
            capacity: u32::try_from(capacity_bytes).unwrap_or(u32::MAX),
            head: 0,
            len: 0,
            ahead: 0,
        }
    }

    /// Total capacity in bytes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Readable bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Where the readable bytes start in the storage.
    #[inline]
    fn head(&self) -> usize {
        self.head as usize
    }

    /// True when nothing is readable.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that can still be appended.
    #[inline]
    pub fn free(&self) -> usize {
        (self.capacity - self.len) as usize
    }

    /// Bytes of storage allocated (0 until the first write and after a release).
    #[inline]
    pub fn allocated_bytes(&self) -> usize {
        self.storage.len()
    }

    /// The address of the byte a write at the end of the readable bytes stores first (where
    /// [`Ring::push`] writes, where in-order received data lands, and — once everything was
    /// read — where the next read starts), for a prefetch hint (`stack`'s
    /// `tcp_prefetch`). Address arithmetic only: never dereferenced, and dangling when no
    /// storage is allocated (a prefetch of it is harmless).
    #[inline]
    pub fn tail_addr(&self) -> *const u8 {
        // `head + len` is below twice the size (`head < size`, `len ≤ size`); with no
        // storage both are 0.
        let pos = self.wrap(self.head() + self.len());
        self.storage.as_ptr().wrapping_add(pos)
    }

    /// `pos` (below twice the storage size) wrapped into the storage.
    #[inline]
    fn wrap(&self, pos: usize) -> usize {
        let size = self.storage.len();
        if pos >= size { pos - size } else { pos }
    }

    /// Gives the storage back (to the pool when it has the minimum size) and empties the
    /// ring.
    fn release(&mut self) {
        if self.storage.is_empty() {
            return;
        }
        pool_give(core::mem::take(&mut self.storage));
        self.head = 0;
        self.len = 0;
        self.ahead = 0;
    }

    /// Gives the storage back when nothing is readable and nothing was written ahead
    /// (out-of-order data); returns the bytes released (0: nothing held, or not empty).
    pub fn release_if_empty(&mut self) -> usize {
        if self.len != 0 || self.ahead != 0 {
            return 0;
        }
        let size = self.storage.len();
        self.release();
        size
    }

    /// Grows the storage for a write of `data` at `offset` that reaches past it
    /// (`offset + data.len()` ≤ capacity) and writes `data` on the way: the new size is the
    /// next power of two of the end, at least [`STORAGE_MIN_BYTES`], at most the capacity.
    /// The bytes keep their offsets from `head`, which moves to 0.
    #[cold]
    fn grow_writing(&mut self, offset: usize, data: &[u8]) {
        let end = offset + data.len();
        let size = end
            .max(STORAGE_MIN_BYTES)
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX)
            .min(self.capacity());
        let old = core::mem::take(&mut self.storage);
        if old.is_empty() && size == STORAGE_MIN_BYTES {
            // A first write (or the first after a release): nothing to carry over.
            self.storage = pool_take();
            self.head = 0;
            self.storage[offset..end].copy_from_slice(data);
            return;
        }
        // Every written byte lies below the old size (invariant), so the old storage from
        // `head` on, wrapped, keeps each byte at its offset. Bytes from `offset` on are
        // overwritten by `data` (it reaches past the old size), so the copy stops there.
        let mut new = Vec::with_capacity(size);
        let (tail, front) = old.split_at(self.head().min(old.len()));
        let keep = offset.min(old.len());
        let from_front = keep.min(front.len());
        new.extend_from_slice(&front[..from_front]);
        new.extend_from_slice(&tail[..keep - from_front]);
        // A gap between the old bytes and an out-of-order write is never read before it is
        // written; it is zeroed only because the storage must be initialized.
        new.resize(offset, 0);
        new.extend_from_slice(data);
        new.resize(size, 0);
        pool_give(old);
        self.storage = HugeBytes::from_box(new.into_boxed_slice());
        self.head = 0;
    }

    /// Appends as much of `data` as fits; returns the number of bytes appended.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let n = self.write_at(self.len(), data);
        self.len += n as u32;
        n
    }

    /// Copies `data` to `offset` bytes past `head` (which may lie beyond the readable bytes)
    /// without changing what is readable; returns how many bytes fit below the capacity.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> usize {
        let cap = self.capacity();
        if offset >= cap || data.is_empty() {
            return 0;
        }
        let n = data.len().min(cap - offset);
        if offset + n > self.storage.len() {
            self.grow_writing(offset, &data[..n]);
            self.ahead = self.ahead.max((offset + n) as u32);
            return n;
        }
        let size = self.storage.len();
        let start = self.wrap(self.head() + offset);
        let first = n.min(size - start);
        let (a, b) = data[..n].split_at(first);
        self.storage[start..start + first].copy_from_slice(a);
        self.storage[..b.len()].copy_from_slice(b);
        self.ahead = self.ahead.max((offset + n) as u32);
        n
    }

    /// Copies all of `data` to `offset` bytes past `head`, as [`Ring::write_at`] would, and
    /// returns the Internet checksum sum of `data` (`wire::checksum::sum`), computed in the
    /// same pass (`wire::checksum::copy_and_sum`). Only into storage already allocated:
    /// `None`, with nothing written, when `data` does not fit below the storage's size (a
    /// write that would grow it, or pass the capacity) — the caller copies the other way.
    ///
    /// The bytes land where nothing is read until [`Ring::commit`] makes them readable, and
    /// this does not move the written-ahead mark: a caller that finds the sum wrong leaves
    /// them there, and the ring is as before (the next write over that space overwrites
    /// them). A caller that keeps them commits them at once.
    pub fn write_summed_at(&mut self, offset: usize, data: &[u8]) -> Option<u16> {
        let size = self.storage.len();
        if offset.checked_add(data.len())? > size {
            return None;
        }
        let start = self.wrap(self.head() + offset);
        if let Some(dst) = self.storage.get_mut(start..start + data.len()) {
            // No wrap: one piece.
            return Some(wire::checksum::copy_and_sum(dst, data));
        }
        let first = size - start;
        let (a, b) = data.split_at(first);
        let sum_a = wire::checksum::copy_and_sum(&mut self.storage[start..], a);
        let sum_b = wire::checksum::copy_and_sum(&mut self.storage[..b.len()], b);
        // After an odd-length first piece the second one's words straddle the pair
        // boundaries: its sum counts byte-swapped (RFC 1071 §2(B)).
        let sum_b = if first % 2 == 1 {
            sum_b.swap_bytes()
        } else {
            sum_b
        };
        Some(wire::checksum::combine(&[sum_a, sum_b]))
    }

    /// Makes `n` more bytes (previously written with [`Ring::write_at`]) readable; clamps at the
    /// capacity and returns the number committed.
    pub fn commit(&mut self, n: usize) -> usize {
        let n = n.min(self.free());
        self.len += n as u32;
        self.ahead = self.ahead.max(self.len);
        n
    }

    /// [`Ring::commit`] for `n` bytes the caller wrote past the readable ones (with
    /// [`Ring::write_at`] or [`Ring::write_summed_at`]), which therefore lie in the storage
    /// and fit the capacity: no clamp, so the capacity is not read.
    pub fn commit_written(&mut self, n: usize) {
        debug_assert!(n <= self.free(), "committed bytes were never written");
        self.len += n as u32;
        self.ahead = self.ahead.max(self.len);
    }

    /// Copies readable bytes starting `offset` bytes past `head` into `out` without consuming
    /// them; returns the number copied.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> usize {
        if offset >= self.len() {
            return 0;
        }
        let size = self.storage.len();
        let n = out.len().min(self.len() - offset);
        let start = self.wrap(self.head() + offset);
        let first = n.min(size - start);
        let (a, b) = out[..n].split_at_mut(first);
        a.copy_from_slice(&self.storage[start..start + first]);
        b.copy_from_slice(&self.storage[..b.len()]);
        n
    }

    /// Discards up to `n` readable bytes from the front; returns the number discarded.
    pub fn consume(&mut self, n: usize) -> usize {
        let n = n.min(self.len());
        self.head = self.wrap(self.head() + n) as u32;
        self.len -= n as u32;
        self.ahead -= n as u32;
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
        let cap = capacity_bytes.max(self.len());
        if cap == self.capacity() {
            return;
        }
        let data = self.to_vec();
        *self = Ring::new(cap);
        let pushed = self.push(&data);
        debug_assert_eq!(pushed, data.len());
    }

    /// All readable bytes in order, as one vector (used by snapshots, not on the hot path).
    pub fn to_vec(&self) -> Vec<u8> {
        self.range_to_vec(0, self.len())
    }

    /// The readable bytes from `offset` on, at most `n` of them, in order, as one vector:
    /// one copy from the (at most two) pieces they occupy, no zero-fill first. A snapshot
    /// splits its send buffer into unacknowledged and unsent bytes with two of these.
    pub fn range_to_vec(&self, offset: usize, n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        self.range_into(offset, n, &mut v);
        v
    }

    /// [`Ring::range_to_vec`], appended to `out` (whose capacity the caller may have
    /// reserved).
    pub fn range_into(&self, offset: usize, n: usize, out: &mut Vec<u8>) {
        let offset = offset.min(self.len());
        let n = n.min(self.len() - offset);
        if n == 0 {
            return;
        }
        let size = self.storage.len();
        let start = self.wrap(self.head() + offset);
        let first = n.min(size - start);
        out.reserve(n);
        out.extend_from_slice(&self.storage[start..start + first]);
        out.extend_from_slice(&self.storage[..n - first]);
    }

    /// The readable bytes as a `VecDeque`, in the ring's own storage: the storage becomes
    /// the deque's buffer (a full deque, so moving its start to `head` copies nothing) and
    /// the bytes past the readable ones are cut off. No byte is copied, except from
    /// minimum-size storage, a huge-page chunk slot, which is copied once (4 KiB) into an
    /// allocation of the deque's own.
    pub fn into_deque(mut self) -> VecDeque<u8> {
        let storage = core::mem::take(&mut self.storage);
        let (head, len) = (self.head(), self.len());
        let mut d = VecDeque::from(storage.into_box().into_vec());
        if d.is_empty() {
            return d;
        }
        d.rotate_left(head.min(d.len()));
        d.truncate(len);
        d
    }

    /// A ring of `capacity_bytes` holding `v`'s bytes then `more`'s (as much as fits), as
    /// [`Ring::from_pieces`] builds it, with `v`'s allocation as the storage: `more` is
    /// appended and the rest of the storage size ([`storage_bytes_for`]) zero-filled in place,
    /// so when `v`'s capacity is at least that size nothing of `v` is copied. (A smaller
    /// capacity grows `v` first, which may copy it once; storage of [`STORAGE_MIN_BYTES`] is
    /// copied once into a huge-page chunk slot, `HugeBytes::from_box`.)
    pub fn from_vec(capacity_bytes: usize, mut v: Vec<u8>, more: &[u8]) -> Ring {
        let mut r = Ring::new(capacity_bytes);
        let n = v.len().saturating_add(more.len()).min(r.capacity());
        if n == 0 {
            return r;
        }
        let size = storage_bytes_for(r.capacity(), n);
        v.truncate(n);
        let k = n - v.len();
        v.reserve_exact(size - v.len());
        v.extend_from_slice(&more[..k]);
        v.resize(size, 0);
        r.storage = HugeBytes::from_box(v.into_boxed_slice());
        r.len = n as u32;
        r.ahead = n as u32;
        r
    }

    /// A ring of `capacity_bytes` whose readable bytes are the concatenation of `pieces`
    /// (as much of it as fits), in storage allocated once at the size the growth rule gives
    /// for that many bytes: what [`Ring::push`] of each piece in turn leaves, without the
    /// intermediate growth that copies the first pieces again. For snapshot import.
    pub fn from_pieces(capacity_bytes: usize, pieces: &[&[u8]]) -> Ring {
        let mut r = Ring::new(capacity_bytes);
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        let n = total.min(r.capacity());
        if n == 0 {
            return r;
        }
        let size = storage_bytes_for(r.capacity(), n);
        let mut left = n;
        if size == STORAGE_MIN_BYTES {
            r.storage = pool_take();
            let mut at = 0;
            for p in pieces {
                let k = p.len().min(left);
                r.storage[at..at + k].copy_from_slice(&p[..k]);
                at += k;
                left -= k;
            }
        } else {
            let mut v = Vec::with_capacity(size);
            for p in pieces {
                let k = p.len().min(left);
                v.extend_from_slice(&p[..k]);
                left -= k;
            }
            v.resize(size, 0);
            r.storage = HugeBytes::from_box(v.into_boxed_slice());
        }
        r.len = n as u32;
        r.ahead = n as u32;
        r
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
    fn storage_is_allocated_on_first_write_only_and_starts_small() {
        let mut r = Ring::new(1 << 20);
        assert_eq!(r.allocated_bytes(), 0);
        assert_eq!(r.free(), 1 << 20);
        assert_eq!(r.pop(&mut [0u8; 4]), 0);
        r.push(b"x");
        assert_eq!(r.allocated_bytes(), STORAGE_MIN_BYTES);
    }

    #[test]
    fn storage_doubles_up_to_the_capacity_and_never_beyond() {
        let mut r = Ring::new(20_000);
        r.push(&[1u8; 5000]);
        assert_eq!(r.allocated_bytes(), 8192);
        r.push(&[2u8; 9000]);
        assert_eq!(r.allocated_bytes(), 16_384);
        r.push(&[3u8; 9000]);
        assert_eq!((r.allocated_bytes(), r.len()), (20_000, 20_000));
    }

    #[test]
    fn growth_keeps_wrapped_and_out_of_order_bytes_at_their_offsets() {
        let mut r = Ring::new(1 << 16);
        let first: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
        r.push(&first);
        r.consume(3000); // head = 3000 in 4096 bytes of storage
        r.push(&[0xaa; 2000]); // wraps
        assert_eq!(r.allocated_bytes(), STORAGE_MIN_BYTES);
        // Out of order, past the readable bytes and past the storage: forces growth.
        assert_eq!(r.write_at(10_000, b"late"), 4);
        assert!(r.allocated_bytes() >= 16_384);
        assert_eq!(r.write_at(3000, &[0xbb; 7000]), 7000);
        assert_eq!(r.commit(7004), 7004);
        let all = r.to_vec();
        assert_eq!(all.len(), 10_004);
        assert_eq!(&all[..1000], &first[3000..]);
        assert!(all[1000..3000].iter().all(|&b| b == 0xaa));
        assert!(all[3000..10_000].iter().all(|&b| b == 0xbb));
        assert_eq!(&all[10_000..], b"late");
    }

    #[test]
    fn a_write_that_starts_inside_wrapped_storage_and_grows_it_keeps_every_byte() {
        let mut r = Ring::new(1 << 16);
        let first: Vec<u8> = (0..4000u32).map(|i| (i % 253) as u8).collect();
        r.push(&first);
        r.consume(2500); // head = 2500 in 4096 bytes of storage, 1500 readable
        let wrapped: Vec<u8> = (0..2000u32).map(|i| (i % 241) as u8 ^ 0x5a).collect();
        r.push(&wrapped); // offsets 1500..3500, wrapping past the storage's end
        assert_eq!(r.allocated_bytes(), STORAGE_MIN_BYTES);
        // From offset 3500 (inside the old storage) to 9500 (past it): grows while writing.
        let grown: Vec<u8> = (0..6000u32).map(|i| (i % 239) as u8 ^ 0xc3).collect();
        assert_eq!(r.push(&grown), 6000);
        assert_eq!(r.allocated_bytes(), 16_384);
        let mut want = first[2500..].to_vec();
        want.extend_from_slice(&wrapped);
        want.extend_from_slice(&grown);
        assert_eq!(r.to_vec(), want);
        // A first write far ahead (out of order) on an empty ring, past the minimum size.
        let mut r = Ring::new(1 << 16);
        assert_eq!(r.write_at(5000, b"far"), 3);
        assert_eq!((r.len(), r.allocated_bytes()), (0, 8192));
        assert_eq!(r.write_at(0, &[9u8; 5000]), 5000);
        assert_eq!(r.commit(5003), 5003);
        let all = r.to_vec();
        assert!(all[..5000].iter().all(|&b| b == 9));
        assert_eq!(&all[5000..], b"far");
    }

    #[test]
    fn clearing_the_pool_frees_the_buffers_it_held() {
        pool_clear();
        let mut r = Ring::new(1 << 16);
        r.push(b"x");
        r.consume(1);
        assert_eq!(r.release_if_empty(), STORAGE_MIN_BYTES);
        assert_eq!(pool_clear(), STORAGE_MIN_BYTES);
        assert_eq!(pool_clear(), 0);
    }

    #[test]
    fn an_empty_ring_releases_its_storage_and_takes_a_pooled_buffer_back() {
        let mut r = Ring::new(1 << 16);
        r.push(b"hello");
        assert_eq!(r.release_if_empty(), 0, "not empty");
        assert_eq!(r.pop(&mut [0u8; 8]), 5);
        assert_eq!(r.release_if_empty(), STORAGE_MIN_BYTES);
        assert_eq!(r.allocated_bytes(), 0);
        // Out-of-order bytes ahead keep the storage.
        assert_eq!(r.write_at(10, b"late"), 4);
        assert_eq!(r.release_if_empty(), 0);
        assert_eq!(r.write_at(0, &[1u8; 10]), 10);
        assert_eq!(r.commit(14), 14);
        let mut out = [0u8; 14];
        assert_eq!(r.pop(&mut out), 14);
        assert_eq!(&out[10..], b"late");
        // A grown ring goes back whole.
        r.push(&[7u8; 10_000]);
        r.consume(10_000);
        assert_eq!(r.release_if_empty(), 16_384);
        r.push(b"again");
        assert_eq!(
            (r.allocated_bytes(), r.to_vec()),
            (STORAGE_MIN_BYTES, b"again".to_vec())
        );
    }

    #[test]
    fn tail_addr_is_where_the_next_push_stores_its_first_byte_across_the_wrap() {
        let mut r = Ring::new(8);
        // No storage: the empty box's address, never read.
        assert_eq!(r.tail_addr(), r.storage.as_ptr());
        r.push(b"123456");
        let base = r.storage.as_ptr() as usize;
        let size = r.storage.len();
        assert_eq!(r.tail_addr() as usize, base + 6);
        // Read everything but one byte, then fill past the end of the storage: the tail
        // wraps to the front.
        r.consume(5);
        r.push(&vec![b'z'; size - 6]);
        assert_eq!(r.tail_addr() as usize, base, "head + len = size wraps to 0");
        r.push(b"ab");
        assert_eq!(r.tail_addr() as usize, base + 2);
        let mut out = vec![0u8; size];
        let n = r.pop(&mut out);
        assert_eq!(&out[n - 2..n], b"ab", "the bytes went where the tail said");
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

    /// `write_summed_at` writes what `write_at` writes and returns `wire::checksum::sum` of
    /// the data, at every head position of a 4 KiB storage (so every split of a wrapping
    /// write, odd first pieces included) and for lengths around the kernel's vector size;
    /// until committed the bytes are not readable and the written-ahead mark has not moved.
    #[test]
    fn a_summed_write_sums_as_the_checksum_and_writes_as_write_at_across_every_wrap() {
        let data: Vec<u8> = (0..1500u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [1usize, 31, 32, 33, 127, 128, 129, 1448, 1500] {
            for head in (0..STORAGE_MIN_BYTES)
                .step_by(37)
                .chain([4095, 4094, 4096 - 700])
            {
                let mut r = Ring::new(1 << 20);
                r.push(&vec![0u8; head]);
                r.consume(head);
                r.push(&[1u8; 100]);
                let d = &data[..len];
                // Past the storage's end it would have to grow: refused, nothing written.
                let beyond = STORAGE_MIN_BYTES - len + 1;
                assert_eq!(r.write_summed_at(beyond, d), None, "len {len} head {head}");
                assert_eq!(r.allocated_bytes(), STORAGE_MIN_BYTES);
                let offset = r.len();
                let got = r.write_summed_at(offset, d);
                assert_eq!(got, Some(wire::checksum::sum(d)), "len {len} head {head}");
                assert_eq!(r.len(), offset, "not readable before the commit");
                assert_eq!(r.release_if_empty(), 0);
                assert_eq!(r.commit(len), len);
                let mut out = vec![0u8; len];
                assert_eq!(r.read_at(offset, &mut out), len);
                assert_eq!(out, d, "len {len} head {head}");
            }
        }
    }

    /// A summed write that is dropped (the caller found its checksum wrong) leaves the ring
    /// as it was: an empty ring still gives its storage back, and later writes read right.
    #[test]
    fn a_summed_write_left_uncommitted_changes_nothing_readable() {
        let mut r = Ring::new(1 << 16);
        r.push(b"abc");
        r.consume(3);
        assert_eq!(
            r.write_summed_at(0, b"garbage"),
            Some(wire::checksum::sum(b"garbage"))
        );
        assert!(r.is_empty());
        assert_eq!(r.release_if_empty(), STORAGE_MIN_BYTES);
        // Without storage nothing fits: the caller takes the copying path.
        assert_eq!(r.write_summed_at(0, b"x"), None);
        assert_eq!(r.allocated_bytes(), 0);
        r.push(b"xy");
        let mut out = [0u8; 4];
        assert_eq!(r.pop(&mut out), 2);
        assert_eq!(&out[..2], b"xy");
    }

    proptest! {
        /// Pushes, pops, out-of-order writes and commits against a model of the logical
        /// bytes, on a ring that starts small and grows through several sizes.
        #[test]
        fn growing_ring_keeps_every_byte_at_its_offset(
            ops in proptest::collection::vec((0u8..5, 0usize..7000, 0usize..3000), 0..60)
        ) {
            const CAP: usize = 50_000;
            let mut r = Ring::new(CAP);
            // model[i]: the byte at offset i from head, if one was written.
            let mut model: std::collections::VecDeque<Option<u8>> = Default::default();
            let mut readable = 0usize;
            let mut next = 0u8;
            let mut fresh = |n: usize| -> Vec<u8> {
                (0..n).map(|_| { next = next.wrapping_add(1); next }).collect()
            };
            for (op, n, gap) in ops {
                match op {
                    0 => {
                        let data = fresh(n);
                        let took = r.push(&data);
                        prop_assert_eq!(took, n.min(CAP - readable));
                        for (i, &b) in data[..took].iter().enumerate() {
                            let at = readable + i;
                            if model.len() <= at { model.resize(at + 1, None); }
                            model[at] = Some(b);
                        }
                        readable += took;
                    }
                    1 => {
                        let mut out = vec![0u8; n];
                        let got = r.pop(&mut out);
                        prop_assert_eq!(got, n.min(readable));
                        for (i, &b) in out[..got].iter().enumerate() {
                            prop_assert_eq!(Some(b), model[i]);
                        }
                        model.drain(..got.min(model.len()));
                        readable -= got;
                    }
                    2 => {
                        let offset = readable + gap;
                        let data = fresh(n);
                        let took = r.write_at(offset, &data);
                        prop_assert_eq!(took, if offset >= CAP { 0 } else { n.min(CAP - offset) });
                        for (i, &b) in data[..took].iter().enumerate() {
                            let at = offset + i;
                            if model.len() <= at { model.resize(at + 1, None); }
                            model[at] = Some(b);
                        }
                    }
                    3 if n % 3 == 0 => {
                        // Release when empty: only when nothing is readable or written ahead.
                        let held = r.allocated_bytes();
                        let empty = readable == 0 && model.iter().all(|b| b.is_none());
                        let released = r.release_if_empty();
                        if empty {
                            prop_assert_eq!((released, r.allocated_bytes()), (held, 0));
                            model.clear();
                        } else {
                            prop_assert_eq!((released, r.allocated_bytes()), (0, held));
                        }
                    }
                    _ => {
                        // Commit only bytes that were written (as the receive path does).
                        let written = model.iter().skip(readable).take_while(|b| b.is_some()).count();
                        let k = n.min(written);
                        prop_assert_eq!(r.commit(k), k);
                        readable += k;
                    }
                }
                prop_assert_eq!(r.len(), readable);
                prop_assert!(r.allocated_bytes() <= CAP);
                let all = r.to_vec();
                for (i, &b) in all.iter().enumerate() {
                    prop_assert_eq!(Some(b), model[i]);
                }
            }
        }

        /// A ring built at once from pieces holds what pushing them one by one leaves (the
        /// same readable bytes and the same storage size), and a range read gives exactly
        /// the slice of the readable bytes, wherever the ring has wrapped.
        #[test]
        fn ring_from_pieces_equals_pushes_and_ranges_equal_slices(
            pieces in proptest::collection::vec(0usize..9000, 0..4),
            cap in 1usize..40_000,
            consumed in 0usize..5000,
            offset in 0usize..30_000,
            n in 0usize..30_000,
        ) {
            let mut next = 0u8;
            let pieces: Vec<Vec<u8>> = pieces
                .iter()
                .map(|&k| (0..k).map(|_| { next = next.wrapping_add(7); next }).collect())
                .collect();
            let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_slice()).collect();
            let built = Ring::from_pieces(cap, &refs);
            let mut pushed = Ring::new(cap);
            for p in &pieces {
                pushed.push(p);
            }
            prop_assert_eq!(built.to_vec(), pushed.to_vec());
            prop_assert_eq!(built.len(), pushed.len());
            prop_assert_eq!(built.allocated_bytes(), pushed.allocated_bytes());
            // Adopting the first piece's vector (whatever its capacity) builds the same ring.
            if let Some((first, rest)) = pieces.split_first() {
                let rest: Vec<u8> = rest.concat();
                for reserve in [0, 4096, 70_000] {
                    let mut v = Vec::with_capacity(first.len() + reserve);
                    v.extend_from_slice(first);
                    let adopted = Ring::from_vec(cap, v, &rest);
                    prop_assert_eq!(adopted.to_vec(), pushed.to_vec());
                    prop_assert_eq!(adopted.allocated_bytes(), pushed.allocated_bytes());
                }
            }
            // Wrap it: consume some, push as many again.
            let mut r = built;
            let k = r.consume(consumed);
            let again: Vec<u8> = (0..k).map(|i| i as u8).collect();
            r.push(&again);
            let all = r.to_vec();
            let from = offset.min(all.len());
            let to = (from + n).min(all.len());
            prop_assert_eq!(r.range_to_vec(offset, n), all[from..to].to_vec());
            // Its storage as a deque holds exactly the readable bytes.
            let d: Vec<u8> = r.into_deque().into_iter().collect();
            prop_assert_eq!(d, all);
        }

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
