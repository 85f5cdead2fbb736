//! [`HugeBox<T>`]: a box whose storage comes from 2 MiB chunks the kernel is asked to back
//! with transparent huge pages.
//!
//! Many small objects reached in random order (a stack's TCBs: 768 bytes each, ~75 MB at
//! 100,000 connections) miss the TLB as well as the caches: with 4 KiB pages each object is
//! on a page of its own and the TLB covers a few MiB. Packed into 2 MiB-aligned chunks marked
//! `madvise(MADV_HUGEPAGE)`, 2,730 of them share one huge page, and one TLB entry covers them
//! (issue 17: glibc's `glibc.malloc.hugetlb=1` tunable, which does the same for the whole
//! heap, took 10–15 % off the cost per packet at 100,000 connections).
//!
//! Design:
//! - One pool per thread and slot size (the size of `T` rounded up to a cache line), so a
//!   shard's objects share chunks with no other shard's and allocation takes an uncontended
//!   lock. A chunk's first slot holds its header: the pool it belongs to, so a box dropped on
//!   another thread goes back to its own pool (under that pool's lock).
//! - Freed slots are reused first (a free list threaded through them, per chunk); a chunk
//!   whose slots are all free is unmapped, except one per pool kept for the next allocations
//!   (connections that open and close do not map and unmap a chunk each time). The memory is
//!   bounded by the live boxes: at most their slots, the partly used chunks and one empty
//!   chunk per pool.
//! - Chunks are `mmap`ed 2 MiB-aligned (4 MiB mapped, the ends trimmed) on Linux and marked
//!   `MADV_HUGEPAGE`; when THP is off the advice is refused or ignored and the chunk is
//!   ordinary pages ([`Stats::chunks_advised`] counts the accepted advice). Elsewhere, or
//!   when `mmap` fails, chunks come from the global allocator (2 MiB-aligned, no advice).
//! - `RSSTACK_HUGE_BOX=off` in the environment (read once, at the first box) makes every box
//!   an ordinary allocation of its own, as `Box` — for heap profilers that watch the global
//!   allocator's blocks (`scripts/bench-hot-bytes.sh` under DHAT) and for comparisons.
//!
//! What a process holds is reported by [`stats`]: chunk bytes mapped (what a memory budget
//! should count: the bytes requested from the allocator leave these out), live slots.

use std::alloc::Layout;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A chunk's size and alignment: one x86-64 huge page.
pub const CHUNK_BYTES: usize = 2 << 20;

/// Slots are cache-line aligned and a multiple of a line long.
pub(crate) const SLOT_ALIGN_BYTES: usize = 64;

/// The largest slot: larger objects would leave too much of a chunk unused
/// ([`HugeBox::new`] refuses them at compile time).
pub const SLOT_BYTES_MAX: usize = 64 << 10;

/// Chunk bytes mapped now (all pools, all threads).
static MAPPED_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Chunks whose `MADV_HUGEPAGE` advice the kernel accepted, ever.
static CHUNKS_ADVISED: AtomicUsize = AtomicUsize::new(0);
/// Chunks mapped, ever.
static CHUNKS_MAPPED: AtomicUsize = AtomicUsize::new(0);
/// Boxes alive in chunks now, and their slots' bytes.
static LIVE_SLOTS: AtomicUsize = AtomicUsize::new(0);
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// What the process's huge boxes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Chunk bytes mapped now: the memory the boxes take (their slots, the free slots of
    /// partly used chunks, one kept empty chunk per pool, the headers).
    pub mapped_bytes: usize,
    /// Boxes alive in chunks now.
    pub live_slots: usize,
    /// Their slots' bytes (each box's size rounded up to a cache line).
    pub live_bytes: usize,
    /// Chunks mapped since the process started.
    pub chunks_mapped: usize,
    /// Of those, chunks the kernel accepted `MADV_HUGEPAGE` for.
    pub chunks_advised: usize,
    /// False when `RSSTACK_HUGE_BOX=off` made every box an ordinary allocation.
    pub chunked: bool,
}

/// The process's figures (all threads).
pub fn stats() -> Stats {
    Stats {
        mapped_bytes: MAPPED_BYTES.load(Ordering::Relaxed),
        live_slots: LIVE_SLOTS.load(Ordering::Relaxed),
        live_bytes: LIVE_BYTES.load(Ordering::Relaxed),
        chunks_mapped: CHUNKS_MAPPED.load(Ordering::Relaxed),
        chunks_advised: CHUNKS_ADVISED.load(Ordering::Relaxed),
        chunked: chunked(),
    }
}

/// True unless `RSSTACK_HUGE_BOX=off` (read once).
pub(crate) fn chunked() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| std::env::var("RSSTACK_HUGE_BOX").map_or(true, |v| v != "off"))
}

/// A `T` in a slot of a huge-page chunk (see the module docs); owns it as `Box<T>` does.
pub struct HugeBox<T> {
    ptr: NonNull<T>,
    _owns: PhantomData<T>,
}

// SAFETY: a `HugeBox<T>` owns its `T` exclusively, as `Box<T>` does; the pools it allocates
// from and returns to are behind mutexes (a drop on another thread locks the owning pool),
// so sending or sharing the box is as safe as sending or sharing the `T`.
unsafe impl<T: Send> Send for HugeBox<T> {}
// SAFETY: as above: `&HugeBox<T>` gives only `&T`.
unsafe impl<T: Sync> Sync for HugeBox<T> {}

impl<T> HugeBox<T> {
    /// The slot size for `T`: its size rounded up to a cache line (at least one line).
    const SLOT_BYTES: usize = {
        assert!(
            core::mem::size_of::<T>() <= SLOT_BYTES_MAX,
            "HugeBox: the type is too large for a chunk slot"
        );
        assert!(
            core::mem::align_of::<T>() <= SLOT_ALIGN_BYTES,
            "HugeBox: alignment above a cache line"
        );
        let s = core::mem::size_of::<T>();
        let s = if s == 0 { 1 } else { s };
        s.div_ceil(SLOT_ALIGN_BYTES) * SLOT_ALIGN_BYTES
    };

    /// Moves `value` into a slot of this thread's pool for its size (or, with
    /// `RSSTACK_HUGE_BOX=off`, into an allocation of its own).
    pub fn new(value: T) -> HugeBox<T> {
        let slot = Self::SLOT_BYTES;
        let raw = if chunked() {
            pool_alloc(slot)
        } else {
            heap_alloc(Self::heap_layout())
        };
        let ptr = raw.cast::<T>();
        // SAFETY: `raw` is a fresh, exclusively owned region of at least `SLOT_BYTES` ≥
        // size_of::<T>() bytes, aligned to 64 ≥ align_of::<T>() (slots are multiples of 64
        // from a 2 MiB-aligned chunk; `heap_layout` asks for the same), so writing a `T`
        // there is in bounds and aligned.
        unsafe { ptr.as_ptr().write(value) };
        HugeBox {
            ptr,
            _owns: PhantomData,
        }
    }

    /// The value, moved out; the slot goes back to its pool.
    pub fn into_inner(b: HugeBox<T>) -> T {
        let b = core::mem::ManuallyDrop::new(b);
        // SAFETY: the box holds an initialized `T` it owns; it is read once here and the box
        // is never dropped (ManuallyDrop), so the value is not dropped twice; the slot is
        // released below without touching it as a `T`.
        let value = unsafe { b.ptr.as_ptr().read() };
        Self::release(b.ptr);
        value
    }

    fn heap_layout() -> Layout {
        // Never fails: SLOT_BYTES is a non-zero multiple of the power-of-two 64.
        Layout::from_size_align(Self::SLOT_BYTES, SLOT_ALIGN_BYTES).unwrap_or(Layout::new::<u64>())
    }

    /// Gives the slot of a box whose value was dropped or moved out back.
    fn release(ptr: NonNull<T>) {
        if chunked() {
            pool_free(ptr.cast::<u8>());
        } else {
            // SAFETY: with chunks off, every box was allocated by `heap_alloc` with
            // `heap_layout()` (the mode never changes once read), and this is its only release.
            unsafe { std::alloc::dealloc(ptr.as_ptr().cast::<u8>(), Self::heap_layout()) };
        }
    }
}

impl<T> Drop for HugeBox<T> {
    fn drop(&mut self) {
        // SAFETY: the box owns an initialized `T`, dropped once here; the slot is released
        // after and not read as a `T` again.
        unsafe { core::ptr::drop_in_place(self.ptr.as_ptr()) };
        Self::release(self.ptr);
    }
}

impl<T> core::ops::Deref for HugeBox<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the pointer is to the initialized `T` this box owns; the borrow of `self`
        // bounds the reference's life.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> core::ops::DerefMut for HugeBox<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as `deref`, and `&mut self` makes the reference exclusive.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for HugeBox<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

/// An allocation of its own (`RSSTACK_HUGE_BOX=off`).
fn heap_alloc(layout: Layout) -> NonNull<u8> {
    // SAFETY: `layout` has a non-zero size (a slot is at least 64 bytes).
    let p = unsafe { std::alloc::alloc(layout) };
    NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
}

/// The header in a chunk's first slot: the pool the chunk belongs to (a strong reference,
/// given back when the chunk is unmapped).
#[repr(C)]
struct Header {
    pool: *const Pool,
}

/// One thread's pool for one slot size.
struct Pool {
    slot_bytes: usize,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    /// Every chunk of the pool, by its base address.
    chunks: HashMap<usize, Chunk>,
    /// Bases of chunks that may have a free slot (each at most once: `Chunk::in_avail`).
    avail: Vec<usize>,
    /// Chunks with no slot in use.
    empty: usize,
    /// The owning thread ended: empty chunks are unmapped at once (none is kept).
    orphaned: bool,
}

/// A chunk's bookkeeping (its header holds only the pool).
struct Chunk {
    source: Source,
    /// First free slot; each free slot's first 8 bytes hold the next one's address (0: end).
    free: usize,
    /// Offset of the first slot never used (slots past it are free and unlinked).
    bump: usize,
    /// Slots in use.
    live: usize,
    in_avail: bool,
}

/// Where a chunk's memory came from (how it goes back).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `mmap`, unmapped with `munmap`.
    Mapped,
    /// The global allocator with [`chunk_layout`].
    Heap,
}

fn chunk_layout() -> Layout {
    // Never fails: a power-of-two size and alignment.
    Layout::from_size_align(CHUNK_BYTES, CHUNK_BYTES).unwrap_or(Layout::new::<u64>())
}

thread_local! {
    /// This thread's pools, one per slot size (few: one per type boxed).
    static POOLS: RefCell<ThreadPools> = const { RefCell::new(ThreadPools(Vec::new())) };
}

struct ThreadPools(Vec<Arc<Pool>>);

impl Drop for ThreadPools {
    /// The thread ends: its pools' empty chunks go back now; chunks still holding boxes go
    /// back when their last box is dropped (on whichever thread).
    fn drop(&mut self) {
        for pool in &self.0 {
            let mut st = lock(pool);
            st.orphaned = true;
            unmap_empty_chunks(&mut st);
        }
    }
}

/// Unmaps every chunk of a pool with no slot in use; returns how many.
fn unmap_empty_chunks(st: &mut PoolState) -> usize {
    let empty: Vec<usize> = st
        .chunks
        .iter()
        .filter(|(_, c)| c.live == 0)
        .map(|(&b, _)| b)
        .collect();
    for &base in &empty {
        st.empty -= 1;
        unmap_chunk(st, base);
    }
    empty.len()
}

/// Gives back the empty chunks the calling thread's pools keep for their next allocations
/// (at most one per pool); returns the bytes unmapped. For a thread that frees memory after
/// a burst (`heap::trim_heap` calls it): a kept chunk is 2 MiB of resident memory per pool,
/// and chunks on huge pages are resident whole. The next allocation maps a chunk again.
pub fn release_kept_chunks() -> usize {
    POOLS.with(|p| {
        let pools = p.borrow();
        let mut chunks = 0;
        for pool in &pools.0 {
            chunks += unmap_empty_chunks(&mut lock(pool));
        }
        chunks * CHUNK_BYTES
    })
}

fn lock(pool: &Pool) -> MutexGuard<'_, PoolState> {
    // A panic while the lock was held left the state as consistent as between any two
    // statements of the functions below (each keeps the free lists whole), so it is used on.
    pool.state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A slot of `slot_bytes` from this thread's pool.
pub(crate) fn pool_alloc(slot_bytes: usize) -> NonNull<u8> {
    let new_pool = |orphaned: bool| {
        Arc::new(Pool {
            slot_bytes,
            state: Mutex::new(PoolState {
                orphaned,
                ..PoolState::default()
            }),
        })
    };
    let pool = POOLS
        .try_with(|p| {
            let mut p = p.borrow_mut();
            if let Some(pool) = p.0.iter().find(|q| q.slot_bytes == slot_bytes) {
                return Arc::clone(pool);
            }
            let pool = new_pool(false);
            p.0.push(Arc::clone(&pool));
            pool
        })
        // The thread's pools are being destroyed (a box made by another thread-local's
        // destructor): a pool of its own, which gives its chunk back with its last box.
        .unwrap_or_else(|_| new_pool(true));
    let mut guard = lock(&pool);
    let st = &mut *guard;
    loop {
        let Some(&base) = st.avail.last() else {
            map_chunk(&pool, st);
            continue;
        };
        let Some(c) = st.chunks.get_mut(&base) else {
            st.avail.pop();
            continue;
        };
        let slot = if c.free != 0 {
            let s = c.free;
            // SAFETY: `s` is a free slot of this chunk (the list holds only those), whose
            // first 8 bytes hold the next free slot's address, written by `pool_free`; slots
            // are 64-aligned, so the read is aligned. Nothing else reads or writes a free slot.
            c.free = unsafe { (s as *const usize).read() };
            s
        } else if c.bump + slot_bytes <= CHUNK_BYTES {
            let s = base + c.bump;
            c.bump += slot_bytes;
            s
        } else {
            c.in_avail = false;
            st.avail.pop();
            continue;
        };
        if c.live == 0 {
            st.empty -= 1;
        }
        c.live += 1;
        LIVE_SLOTS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(slot_bytes, Ordering::Relaxed);
        // Never null: inside a mapped chunk.
        return NonNull::new(slot as *mut u8).unwrap_or(NonNull::dangling());
    }
}

/// Gives a slot back to the pool of its chunk.
pub(crate) fn pool_free(slot: NonNull<u8>) {
    let addr = slot.as_ptr() as usize;
    let base = addr & !(CHUNK_BYTES - 1);
    // SAFETY: the slot was handed out by `pool_alloc` from a chunk whose base is its address
    // rounded down to the chunk size (chunks are CHUNK_BYTES-aligned and slots lie inside);
    // the chunk is still mapped (it holds this live slot), and its first slot is the header
    // `map_chunk` wrote, never changed after.
    let pool_ptr = unsafe { (base as *const Header).read().pool };
    // SAFETY: the header holds a strong reference to the pool (`Arc::into_raw` in
    // `map_chunk`), released only when the chunk is unmapped, which it is not yet; this
    // takes one more, so the pool outlives the guard below even when unmapping the chunk
    // gives back the last other one.
    let pool = unsafe {
        Arc::increment_strong_count(pool_ptr);
        Arc::from_raw(pool_ptr)
    };
    let mut guard = lock(&pool);
    let st = &mut *guard;
    let Some(c) = st.chunks.get_mut(&base) else {
        // Not a chunk of this pool: impossible by construction; the slot is leaked rather
        // than given to a list it does not belong to.
        debug_assert!(false, "huge box slot outside its pool's chunks");
        return;
    };
    // SAFETY: the slot is ours (its box is being released), 64-aligned and at least 64
    // bytes: its first 8 bytes may hold the free list's link.
    unsafe { (addr as *mut usize).write(c.free) };
    c.free = addr;
    c.live -= 1;
    LIVE_SLOTS.fetch_sub(1, Ordering::Relaxed);
    LIVE_BYTES.fetch_sub(pool.slot_bytes, Ordering::Relaxed);
    let now_empty = c.live == 0;
    if !c.in_avail {
        c.in_avail = true;
        st.avail.push(base);
    }
    if now_empty {
        // One empty chunk is kept for the next allocations (none once the thread is gone).
        if st.orphaned || st.empty > 0 {
            unmap_chunk(st, base);
        } else {
            st.empty += 1;
        }
    }
    drop(guard);
    drop(pool);
}

/// Maps a new chunk for `pool`, writes its header and makes it the next to allocate from.
fn map_chunk(pool: &Arc<Pool>, st: &mut PoolState) {
    let (base, source) = match map_aligned() {
        Some(b) => (b, Source::Mapped),
        None => (heap_alloc(chunk_layout()).as_ptr() as usize, Source::Heap),
    };
    let header = Header {
        pool: Arc::into_raw(Arc::clone(pool)),
    };
    // SAFETY: `base` is a fresh CHUNK_BYTES region we own, aligned to CHUNK_BYTES; the
    // header is 8 bytes at its start.
    unsafe { (base as *mut Header).write(header) };
    // The header takes the first slot (a slot is at least 64 bytes; the header 8).
    st.chunks.insert(
        base,
        Chunk {
            source,
            free: 0,
            bump: pool.slot_bytes.max(SLOT_ALIGN_BYTES),
            live: 0,
            in_avail: true,
        },
    );
    st.avail.push(base);
    st.empty += 1;
    MAPPED_BYTES.fetch_add(CHUNK_BYTES, Ordering::Relaxed);
    CHUNKS_MAPPED.fetch_add(1, Ordering::Relaxed);
}

/// Gives an empty chunk back and the pool reference its header holds (the caller keeps
/// `PoolState::empty` right: the chunk is not counted there).
fn unmap_chunk(st: &mut PoolState, base: usize) {
    let Some(c) = st.chunks.remove(&base) else {
        return;
    };
    st.avail.retain(|&b| b != base);
    // SAFETY: the chunk is mapped (it was in the pool) and its header, written by
    // `map_chunk`, holds the pool pointer from `Arc::into_raw`.
    let pool_ptr = unsafe { (base as *const Header).read().pool };
    match c.source {
        Source::Mapped => unmap(base),
        // SAFETY: allocated by `heap_alloc(chunk_layout())` in `map_chunk`, freed once here.
        Source::Heap => unsafe { std::alloc::dealloc(base as *mut u8, chunk_layout()) },
    }
    MAPPED_BYTES.fetch_sub(CHUNK_BYTES, Ordering::Relaxed);
    // SAFETY: the strong reference `map_chunk` leaked into the header, given back once. The
    // caller holds a guard of this pool's mutex through another strong reference (the
    // thread's list, or the one `pool_free` took), so this is never the last.
    drop(unsafe { Arc::from_raw(pool_ptr) });
}

/// A CHUNK_BYTES-aligned anonymous mapping of CHUNK_BYTES, advised `MADV_HUGEPAGE`.
#[cfg(target_os = "linux")]
fn map_aligned() -> Option<usize> {
    let len = 2 * CHUNK_BYTES;
    // SAFETY: a fresh private anonymous mapping; no existing memory is aliased.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let start = p as usize;
    let base = start.next_multiple_of(CHUNK_BYTES);
    let head = base - start;
    let tail = start + len - (base + CHUNK_BYTES);
    if head > 0 {
        // SAFETY: [start, base) is the part of our own mapping before the aligned chunk.
        unsafe { libc::munmap(start as *mut libc::c_void, head) };
    }
    if tail > 0 {
        // SAFETY: the part of our own mapping after the aligned chunk.
        unsafe { libc::munmap((base + CHUNK_BYTES) as *mut libc::c_void, tail) };
    }
    // SAFETY: advice on our own mapping; it changes no contents (THP off: EINVAL, ignored).
    let advised =
        unsafe { libc::madvise(base as *mut libc::c_void, CHUNK_BYTES, libc::MADV_HUGEPAGE) } == 0;
    if advised {
        CHUNKS_ADVISED.fetch_add(1, Ordering::Relaxed);
    }
    Some(base)
}

#[cfg(not(target_os = "linux"))]
fn map_aligned() -> Option<usize> {
    None
}

#[cfg(target_os = "linux")]
fn unmap(base: usize) {
    // SAFETY: a chunk `map_aligned` mapped, no longer referenced (no live slot, removed
    // from its pool).
    unsafe { libc::munmap(base as *mut libc::c_void, CHUNK_BYTES) };
}

#[cfg(not(target_os = "linux"))]
fn unmap(_base: usize) {}

/// Chunks this thread's pools hold (tests: other threads' chunks left out).
#[cfg(test)]
fn thread_chunks() -> usize {
    POOLS.with(|p| p.borrow().0.iter().map(|q| lock(q).chunks.len()).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(align(64))]
    #[derive(Debug, PartialEq)]
    struct Tcb([u64; 96]);

    #[test]
    fn boxes_hold_their_values_in_aligned_distinct_slots() {
        let boxes: Vec<HugeBox<Tcb>> = (0..5_000u64).map(|i| HugeBox::new(Tcb([i; 96]))).collect();
        for (i, b) in boxes.iter().enumerate() {
            assert_eq!(b.0[0], i as u64);
            assert_eq!(b.0[95], i as u64);
            assert_eq!((&**b as *const Tcb as usize) % 64, 0, "cache-line aligned");
        }
        let mut addrs: Vec<usize> = boxes.iter().map(|b| &**b as *const Tcb as usize).collect();
        addrs.sort_unstable();
        for w in addrs.windows(2) {
            assert!(w[1] - w[0] >= core::mem::size_of::<Tcb>(), "slots overlap");
        }
        if chunked() {
            // 768-byte slots: 2,729 per chunk (the first slot is the header), so 5,000 take two.
            let chunks: std::collections::BTreeSet<usize> =
                addrs.iter().map(|a| a & !(CHUNK_BYTES - 1)).collect();
            assert_eq!(chunks.len(), 2);
        }
    }

    #[test]
    fn freed_slots_are_reused_and_empty_chunks_go_back() {
        // A thread of its own: its pools are its own, and its exit gives every chunk back.
        std::thread::spawn(|| {
            let mut boxes: Vec<HugeBox<Tcb>> =
                (0..6_000u64).map(|i| HugeBox::new(Tcb([i; 96]))).collect();
            if !chunked() {
                return;
            }
            assert_eq!(
                thread_chunks(),
                3,
                "6,000 slots of 768 bytes in three chunks"
            );
            let freed: Vec<usize> = boxes
                .drain(..100)
                .map(|b| &*b as *const Tcb as usize)
                .collect();
            let again: Vec<HugeBox<Tcb>> =
                (0..100u64).map(|i| HugeBox::new(Tcb([i; 96]))).collect();
            for b in &again {
                assert!(
                    freed.contains(&(&**b as *const Tcb as usize)),
                    "a freed slot is reused"
                );
            }
            assert_eq!(thread_chunks(), 3, "no new chunk");
            drop(again);
            drop(boxes);
            assert_eq!(
                thread_chunks(),
                1,
                "one empty chunk kept, the others given back"
            );
            let b = HugeBox::new(Tcb([1; 96]));
            assert_eq!(thread_chunks(), 1, "the kept chunk serves the next box");
            drop(b);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn released_kept_chunks_leave_none_and_the_next_box_maps_one_again() {
        std::thread::spawn(|| {
            let boxes: Vec<HugeBox<Tcb>> =
                (0..3_000u64).map(|i| HugeBox::new(Tcb([i; 96]))).collect();
            if !chunked() {
                return;
            }
            let live = HugeBox::new(Tcb([7; 96]));
            drop(boxes);
            let kept = thread_chunks();
            assert!(kept >= 1, "the live box's chunk, and maybe one kept empty");
            let released = release_kept_chunks();
            assert_eq!(
                released,
                (kept - 1) * CHUNK_BYTES,
                "only empty chunks go back"
            );
            assert_eq!(thread_chunks(), 1, "the chunk holding a live box stays");
            assert_eq!(live.0[95], 7, "a live box keeps its bytes");
            drop(live);
            assert_eq!(thread_chunks(), 1, "an emptied chunk is kept again");
            assert_eq!(release_kept_chunks(), CHUNK_BYTES);
            assert_eq!(thread_chunks(), 0);
            let b = HugeBox::new(Tcb([1; 96]));
            assert_eq!(thread_chunks(), 1, "the next box maps a chunk");
            drop(b);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn a_box_dropped_on_another_thread_goes_back_to_its_pool() {
        let b = std::thread::spawn(|| HugeBox::new(Tcb([7; 96])))
            .join()
            .expect("thread");
        assert_eq!(b.0[3], 7);
        let v = HugeBox::into_inner(b);
        assert_eq!(v, Tcb([7; 96]));
        let droppy = std::thread::spawn(|| HugeBox::new(String::from("dropped elsewhere")))
            .join()
            .expect("thread");
        assert_eq!(droppy.as_str(), "dropped elsewhere");
        drop(droppy);
    }

    #[test]
    fn values_are_dropped_once() {
        let rc = std::rc::Rc::new(());
        let b = HugeBox::new(std::rc::Rc::clone(&rc));
        assert_eq!(std::rc::Rc::strong_count(&rc), 2);
        drop(b);
        assert_eq!(std::rc::Rc::strong_count(&rc), 1);
        let b = HugeBox::new(std::rc::Rc::clone(&rc));
        let inner = HugeBox::into_inner(b);
        assert_eq!(std::rc::Rc::strong_count(&rc), 2);
        drop(inner);
        assert_eq!(std::rc::Rc::strong_count(&rc), 1);
    }
}
