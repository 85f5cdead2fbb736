//! A counting global allocator that tracks *live* heap bytes and blocks (allocations minus
//! frees, by size class), shared by the memory-measuring binaries (`idle_conns`,
//! `scale_conns`) with `#[path = "../live_alloc.rs"] mod live_alloc;`. Not part of the library
//! (which denies unsafe code): each including binary allows `unsafe_code` for this module
//! alone; the allocator forwards every call unchanged to `System` and only adds atomic
//! counters. `platform::alloc_count` counts allocation calls but not frees, so it cannot
//! give live bytes.
#![allow(unsafe_code)]
#![allow(dead_code)] // each binary reads the part it needs

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
/// Live bytes by size class: class `k` holds blocks of 2^(k−1) < size ≤ 2^k bytes.
static CLASS_BYTES: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];
/// Live blocks by size class.
static CLASS_BLOCKS: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];
pub const CLASSES: usize = 65;

fn class(size: usize) -> usize {
    (usize::BITS - size.saturating_sub(1).leading_zeros()) as usize
}

fn count_alloc(size: usize) {
    LIVE_BYTES.fetch_add(size, Ordering::Relaxed);
    LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
    if let (Some(b), Some(n)) = (CLASS_BYTES.get(class(size)), CLASS_BLOCKS.get(class(size))) {
        b.fetch_add(size, Ordering::Relaxed);
        n.fetch_add(1, Ordering::Relaxed);
    }
}

fn count_free(size: usize) {
    LIVE_BYTES.fetch_sub(size, Ordering::Relaxed);
    LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
    if let (Some(b), Some(n)) = (CLASS_BYTES.get(class(size)), CLASS_BLOCKS.get(class(size))) {
        b.fetch_sub(size, Ordering::Relaxed);
        n.fetch_sub(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the counters never influence what is returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged (the caller upholds `alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (`ptr` came from this allocator with `layout`).
        unsafe { System.dealloc(ptr, layout) };
        count_free(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count_free(layout.size());
            count_alloc(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes of huge-page chunks mapped now (`platform::huge_box`): the boxes' slots plus the
/// chunks' free slots and headers.
pub fn huge_chunk_bytes() -> usize {
    platform::huge_box::stats().mapped_bytes
}

#[derive(Debug, Clone, Copy)]
pub struct Heap {
    /// Live bytes (requested sizes).
    pub bytes: usize,
    /// Live blocks.
    pub blocks: usize,
    /// Live bytes by size class (see `CLASS_BYTES`).
    pub class_bytes: [usize; CLASSES],
    /// Live blocks by size class.
    pub class_blocks: [usize; CLASSES],
}

/// The live heap now. `bytes` includes the slots of live `platform::huge_box` boxes (the
/// TCBs), which come from chunks the global allocator does not see; their chunks' bytes
/// mapped are [`huge_chunk_bytes`]. The size classes are the global allocator's alone.
pub fn heap() -> Heap {
    Heap {
        bytes: LIVE_BYTES.load(Ordering::Relaxed) + platform::huge_box::stats().live_bytes,
        blocks: LIVE_BLOCKS.load(Ordering::Relaxed),
        class_bytes: core::array::from_fn(|k| CLASS_BYTES[k].load(Ordering::Relaxed)),
        class_blocks: core::array::from_fn(|k| CLASS_BLOCKS[k].load(Ordering::Relaxed)),
    }
}
