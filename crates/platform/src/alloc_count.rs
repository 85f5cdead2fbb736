//! A counting global allocator for tests that assert "no allocation per packet".
//!
//! [`CountingAlloc`] wraps [`std::alloc::System`] and counts allocation calls (`alloc`,
//! `alloc_zeroed`, and `realloc`, which may move the block) and the bytes they asked for.
//! Frees are not counted as calls, but every call, free included, moves the live-byte figure
//! ([`CountingAlloc::live_bytes`]: bytes allocated and not yet freed, on every thread,
//! excluded ones too, since a block may be freed on another thread than its own). Install it in a test binary of its own (a global allocator is per
//! binary):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: platform::alloc_count::CountingAlloc = platform::alloc_count::CountingAlloc::new();
//! ```
//!
//! The counters are global to the process: every thread's allocations add up, except on
//! threads that called [`exclude_current_thread`] (a test's monitor thread, say, whose own
//! bookkeeping is not the code under test). Read them before and after a window and subtract.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

thread_local! {
    /// This thread's allocations are not counted. `const`-initialised and without a
    /// destructor, so reading it never allocates (it may be read from inside the allocator).
    static EXCLUDED: Cell<bool> = const { Cell::new(false) };
}

/// Stops counting the calling thread's allocations (for the rest of its life).
pub fn exclude_current_thread() {
    EXCLUDED.with(|e| e.set(true));
}

fn counted() -> bool {
    !EXCLUDED.try_with(Cell::get).unwrap_or(false)
}

/// [`System`] with allocation counters (see the module docs).
#[derive(Debug)]
pub struct CountingAlloc {
    allocations: AtomicU64,
    bytes: AtomicU64,
    /// Bytes allocated and not yet freed (all threads). Signed: a block allocated before
    /// the allocator was installed cannot exist, but reading in the middle of a `realloc`
    /// on another thread may see the free before the allocation.
    live: AtomicI64,
}

impl CountingAlloc {
    /// A counter at zero.
    pub const fn new() -> Self {
        CountingAlloc {
            allocations: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            live: AtomicI64::new(0),
        }
    }

    /// Heap bytes allocated through this allocator and not yet freed, all threads (the
    /// sizes asked for, not the allocator's rounding or its own overhead).
    pub fn live_bytes(&self) -> i64 {
        self.live.load(Ordering::Relaxed)
    }

    fn live_add(&self, size: usize) {
        self.live
            .fetch_add(i64::try_from(size).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    fn live_sub(&self, size: usize) {
        self.live
            .fetch_sub(i64::try_from(size).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// Allocation calls so far (all counted threads).
    pub fn allocations(&self) -> u64 {
        self.allocations.load(Ordering::Relaxed)
    }

    /// Bytes those calls asked for.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn count(&self, size: usize) {
        if counted() {
            self.allocations.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(size as u64, Ordering::Relaxed);
        }
    }
}

impl Default for CountingAlloc {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees (and the caller's obligations) carry over; the counting touches only
// atomics and a `const` thread-local without destructor, neither of which allocates or panics.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract (non-zero size layout),
        // which is `System::alloc`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.live_add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.live_add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        self.live_sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count(new_size);
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`, and
        // the caller upholds `realloc`'s contract for `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // The old block is gone and the new one live; on failure the old one stays.
            self.live_sub(layout.size());
            self.live_add(new_size);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_calls_made_through_it() {
        let a = CountingAlloc::new();
        let layout = Layout::from_size_align(64, 8).expect("layout");
        // SAFETY: a non-zero-size layout; the block is freed with the same layout.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            let p = a.realloc(p, layout, 128);
            assert!(!p.is_null());
            a.dealloc(p, Layout::from_size_align(128, 8).expect("layout"));
        }
        assert_eq!(a.allocations(), 2);
        assert_eq!(a.bytes(), 64 + 128);
        assert_eq!(a.live_bytes(), 0);
    }

    #[test]
    fn live_bytes_follow_allocations_reallocations_and_frees() {
        let a = CountingAlloc::new();
        let layout = Layout::from_size_align(64, 8).expect("layout");
        // SAFETY: non-zero-size layouts; each block is freed with the layout it has.
        unsafe {
            let p = a.alloc(layout);
            assert_eq!(a.live_bytes(), 64);
            let q = a.alloc_zeroed(layout);
            assert_eq!(a.live_bytes(), 128);
            let p = a.realloc(p, layout, 256);
            assert_eq!(a.live_bytes(), 64 + 256);
            a.dealloc(p, Layout::from_size_align(256, 8).expect("layout"));
            a.dealloc(q, layout);
        }
        assert_eq!(a.live_bytes(), 0);
    }
}
