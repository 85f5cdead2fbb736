//! Software prefetch: a hint that the caller will soon read memory at an address.
//!
//! A receive burst knows which connections its next frames belong to before it processes
//! them; asking the memory system for their state a frame or two ahead overlaps those
//! cache misses with the current frame's work instead of paying them one after another
//! (`stack::RxLookahead`). A prefetch is only a hint: it never faults, never changes what a
//! program computes, and on targets without one it does nothing.

/// A cache line's size on the CPUs this stack targets (x86-64, most AArch64 cores).
pub const CACHE_LINE_BYTES: usize = 64;

/// At most this many lines are asked for per call of [`prefetch_bytes`], so a wrong length
/// cannot flood the memory system.
pub const MAX_PREFETCH_LINES: usize = 32;

/// Asks for the cache line holding `p` to be brought into every cache level, for reading.
///
/// Any address is allowed (null, dangling, unmapped): the instruction does not fault and
/// the pointer is never dereferenced.
#[inline(always)]
pub fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: PREFETCHT0 is part of SSE, which every x86-64 CPU has; it is a hint that
        // never faults and never reads the memory into a register, whatever the address
        // (Intel SDM vol. 2, PREFETCHh: "does not ... cause a fault"), so no address can
        // make this call undefined.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = p;
    }
}

/// Asks for every cache line of `len_bytes` bytes from `p` (at most
/// [`MAX_PREFETCH_LINES`] lines), as [`prefetch_line`] does for one.
#[inline]
pub fn prefetch_bytes<T>(p: *const T, len_bytes: usize) {
    let start = p.cast::<u8>();
    let first = (start as usize) & !(CACHE_LINE_BYTES - 1);
    let end = (start as usize).saturating_add(len_bytes);
    let lines = end
        .saturating_sub(first)
        .div_ceil(CACHE_LINE_BYTES)
        .min(MAX_PREFETCH_LINES);
    // Address arithmetic only (`wrapping_*` on a pointer never dereferences).
    let base = start.wrapping_sub((start as usize) - first);
    for k in 0..lines {
        prefetch_line(base.wrapping_add(k * CACHE_LINE_BYTES));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_accepts_any_address_and_changes_nothing() {
        let v = vec![7u8; 4096];
        prefetch_bytes(v.as_ptr(), v.len());
        prefetch_line(std::ptr::null::<u8>());
        prefetch_line(usize::MAX as *const u64);
        prefetch_bytes(std::ptr::null::<u8>(), usize::MAX);
        assert!(v.iter().all(|&b| b == 7));
    }
}
