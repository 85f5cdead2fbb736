//! Vectors whose buffers the kernel is asked to back with transparent huge pages.
//!
//! A stack's per-slot arrays (the socket slots, the connection table's entries, the timer
//! wheel's nodes) are reached at one random index per segment; at 100,000 connections they
//! are megabytes each, and on 4 KiB pages every such reach misses the TLB too (issue 17).
//! [`with_capacity_huge`] allocates a vector's buffer and, before anything is written to
//! it, advises the 2 MiB-aligned part of it `MADV_HUGEPAGE`, so the first touches fault in
//! huge pages (THP in `madvise` mode); [`reserve_huge`] grows a vector that way (a new
//! buffer, advised, then the elements moved in: a buffer grown in place by `realloc` would
//! keep the pages it already has). Buffers under a huge page are left alone (nothing to
//! gain), and so is everything with `RSSTACK_HUGE_BOX=off` or `RSSTACK_HUGE_VEC=off` in the
//! environment (comparisons). Advice only: contents and behaviour are the same either way,
//! and a kernel that refuses it (THP off, not Linux) changes nothing.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::huge_box::{CHUNK_BYTES, chunked};

/// Buffers advised, ever (the kernel accepted the advice).
static ADVISED: AtomicUsize = AtomicUsize::new(0);

/// Buffers [`with_capacity_huge`] and [`reserve_huge`] advised since the process started.
pub fn advised_buffers() -> usize {
    ADVISED.load(Ordering::Relaxed)
}

/// True unless `RSSTACK_HUGE_BOX=off` or `RSSTACK_HUGE_VEC=off` (read once).
fn vec_advice_on() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE
        .get_or_init(|| chunked() && std::env::var("RSSTACK_HUGE_VEC").map_or(true, |v| v != "off"))
}

/// An empty vector with room for `capacity` elements, its buffer advised for huge pages
/// when it spans at least one (module docs).
pub fn with_capacity_huge<T>(capacity: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(capacity);
    let bytes = v.capacity().saturating_mul(core::mem::size_of::<T>());
    if bytes >= CHUNK_BYTES && vec_advice_on() && advise(v.as_ptr().cast::<u8>(), bytes) {
        ADVISED.fetch_add(1, Ordering::Relaxed);
    }
    v
}

/// As `v.reserve(additional)`, with the new buffer from [`with_capacity_huge`]: the
/// elements are moved into it after the advice. The new capacity follows `Vec`'s amortized
/// rule (twice the old, at least what is needed, at least 8 / 4 / 1 elements by size), so a
/// vector grown through here ends with the capacity `Vec` itself would give it.
pub fn reserve_huge<T>(v: &mut Vec<T>, additional: usize) {
    let need = v.len().saturating_add(additional);
    if need <= v.capacity() {
        return;
    }
    let min_cap = match core::mem::size_of::<T>() {
        1 => 8,
        s if s <= 1024 => 4,
        _ => 1,
    };
    let cap = need.max(v.capacity().saturating_mul(2)).max(min_cap);
    let mut grown = with_capacity_huge(cap);
    grown.append(v);
    *v = grown;
}

/// Advises the 2 MiB-aligned part of `[p, p + len)` `MADV_HUGEPAGE`; true when the kernel
/// accepted (false when the range holds no whole huge page, or on refusal).
#[cfg(target_os = "linux")]
fn advise(p: *const u8, len: usize) -> bool {
    let start = (p as usize).next_multiple_of(CHUNK_BYTES);
    let end = (p as usize).saturating_add(len) & !(CHUNK_BYTES - 1);
    if end <= start {
        return false;
    }
    // SAFETY: `[start, end)` lies inside a live allocation this process owns (the vector's
    // buffer); `MADV_HUGEPAGE` only marks the range eligible for huge pages and changes no
    // contents, so no memory is read, written or freed through it (THP off: EINVAL).
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn advise(_p: *const u8, _len: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_grows_to_the_capacity_vec_itself_would() {
        // A first element at index 2, then jumps past the capacity: the sequence a slot-indexed
        // array sees.
        for needs in [[3usize, 5, 9, 40, 41, 300], [1, 2, 3, 17, 18, 19]] {
            let (mut ours, mut std): (Vec<[u8; 24]>, Vec<[u8; 24]>) = (Vec::new(), Vec::new());
            for n in needs {
                let more = n - ours.len();
                reserve_huge(&mut ours, more);
                ours.resize(n, [0; 24]);
                std.resize(n, [0; 24]);
                assert_eq!(ours.capacity(), std.capacity(), "after growing to {n}");
            }
        }
    }

    #[test]
    fn reserve_keeps_every_element_and_at_least_doubles() {
        let mut v: Vec<u64> = (0..1000).collect();
        let cap = v.capacity();
        let more = cap - v.len() + 1;
        reserve_huge(&mut v, more);
        assert!(v.capacity() >= 2 * cap);
        assert!(v.iter().copied().eq(0..1000));
        let cap = v.capacity();
        reserve_huge(&mut v, 1);
        assert_eq!(v.capacity(), cap, "room left: nothing reallocated");
    }

    #[test]
    fn a_buffer_of_huge_pages_is_advised_and_reads_back_what_was_written() {
        let before = advised_buffers();
        let mut v: Vec<u64> = with_capacity_huge(3 * CHUNK_BYTES / 8);
        v.resize(3 * CHUNK_BYTES / 8, 7);
        assert!(v.iter().all(|&x| x == 7));
        // Under `RSSTACK_HUGE_*=off`, or with THP refused, nothing is advised; with it, this
        // buffer (6 MiB: at least two whole huge pages inside) was.
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| !s.contains("[never]"));
        if vec_advice_on() && thp && cfg!(target_os = "linux") {
            assert!(advised_buffers() > before);
        }
        let small: Vec<u8> = with_capacity_huge(100);
        assert!(small.capacity() >= 100);
    }
}
