//! [`HugeBytes`]: an owned byte buffer whose storage, for the sizes that have one, is a slot
//! of the huge-page chunks [`crate::huge_box`] manages.
//!
//! A TCP ring's storage (`tcp::ring`: 4 KiB on first use, doubling) is reached once per
//! segment at a position that moves through it, and with many connections every such reach
//! is to a page of its own: at 100,000 connections the rings of both ends hold ~1.2 GB in
//! 4 KiB pages, so each access misses the TLB as well as the caches (a two-level walk under
//! virtualisation). Taken from 2 MiB chunks advised `MADV_HUGEPAGE`, 511 buffers of 4 KiB
//! share one TLB entry (issue 17).
//!
//! Which buffers: those of exactly [`CHUNK_LEN_BYTES`] (a ring's first allocation, the size
//! its pool keeps), made by [`HugeBytes::zeroed`] or adopted by [`HugeBytes::from_box`]
//! (copied into a slot then), are chunk slots; every other length, and every buffer while
//! `RSSTACK_HUGE_BOX=off` (every huge box and buffer) or `RSSTACK_HUGE_BYTES=off` (these
//! buffers only: comparisons), is an ordinary allocation. The length alone tells which, so
//! the slice a buffer derefs to is its pointer and length as they are, and dropping it needs
//! no lookup.
//!
//! The type is 16 bytes, as `Box<[u8]>` is, so a structure that held one keeps its layout.

use core::ptr::NonNull;
use std::sync::OnceLock;

use crate::huge_box::{chunked, pool_alloc, pool_free};

/// True unless `RSSTACK_HUGE_BOX=off` or `RSSTACK_HUGE_BYTES=off` (read once).
fn bytes_chunked() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| {
        chunked() && std::env::var("RSSTACK_HUGE_BYTES").map_or(true, |v| v != "off")
    })
}

/// The one length kept in huge-page chunk slots (module docs).
pub const CHUNK_LEN_BYTES: usize = 4096;

/// An owned, initialized byte buffer (see the module docs), used as `Box<[u8]>` is.
///
/// Invariant: `ptr` points to `len` initialized bytes this value owns exclusively (dangling
/// when `len` is 0): a chunk slot of exactly `len` bytes from `pool_alloc` when
/// `len == CHUNK_LEN_BYTES` and `bytes_chunked` (fixed once read), else the allocation of a
/// `Box<[u8]>` of `len` bytes.
pub struct HugeBytes {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `HugeBytes` owns its bytes exclusively, as `Box<[u8]>` does; a chunk slot dropped
// on another thread goes back to its own pool under that pool's lock (`pool_free`).
unsafe impl Send for HugeBytes {}
// SAFETY: `&HugeBytes` gives only `&[u8]`.
unsafe impl Sync for HugeBytes {}

impl HugeBytes {
    /// An empty buffer (no allocation).
    pub const fn new() -> HugeBytes {
        HugeBytes {
            ptr: NonNull::dangling(),
            len: 0,
        }
    }

    /// `len` zero bytes: a huge-page chunk slot when `len` is [`CHUNK_LEN_BYTES`] and chunks
    /// are on, else an ordinary allocation.
    pub fn zeroed(len: usize) -> HugeBytes {
        if len == CHUNK_LEN_BYTES && bytes_chunked() {
            let p = pool_alloc(len);
            // SAFETY: `p` is a fresh slot of exactly `len` bytes (a multiple of 64: the slot
            // size is `len` itself), owned by nobody else; zeroing it makes every byte
            // initialized whatever the slot held before.
            unsafe { p.as_ptr().write_bytes(0, len) };
            return HugeBytes { ptr: p, len };
        }
        HugeBytes::adopt(vec![0u8; len].into_boxed_slice())
    }

    /// The bytes of `b`: its allocation itself, except at [`CHUNK_LEN_BYTES`] with chunks
    /// on, where they are copied into a chunk slot (the invariant: that length is always a
    /// slot).
    pub fn from_box(b: Box<[u8]>) -> HugeBytes {
        if b.len() == CHUNK_LEN_BYTES && bytes_chunked() {
            let mut h = HugeBytes::zeroed(CHUNK_LEN_BYTES);
            h.copy_from_slice(&b);
            return h;
        }
        HugeBytes::adopt(b)
    }

    /// Takes over `b`'s allocation (callers: not a chunk-slot length with chunks on).
    fn adopt(b: Box<[u8]>) -> HugeBytes {
        let len = b.len();
        let raw = Box::into_raw(b).cast::<u8>();
        HugeBytes {
            // `Box::into_raw` never returns null.
            ptr: NonNull::new(raw).unwrap_or(NonNull::dangling()),
            len,
        }
    }

    /// The bytes as a `Box<[u8]>`: the allocation itself for an ordinary one, a copy for a
    /// chunk slot (which then goes back to its pool).
    pub fn into_box(self) -> Box<[u8]> {
        if self.in_chunk() {
            return Box::from(&self[..]);
        }
        let me = core::mem::ManuallyDrop::new(self);
        let len = me.len;
        if len == 0 {
            return Box::default();
        }
        let slice = core::ptr::slice_from_raw_parts_mut(me.ptr.as_ptr(), len);
        // SAFETY: not a chunk slot and non-empty, so `ptr`/`len` are a `Box<[u8]>`'s
        // allocation (`adopt`), owned by this value, which is not dropped (ManuallyDrop): ownership
        // passes to the box once.
        unsafe { Box::from_raw(slice) }
    }

    /// True when the bytes are in a huge-page chunk slot.
    #[inline]
    pub fn in_chunk(&self) -> bool {
        self.len == CHUNK_LEN_BYTES && bytes_chunked()
    }
}

impl Default for HugeBytes {
    fn default() -> Self {
        HugeBytes::new()
    }
}

impl Drop for HugeBytes {
    fn drop(&mut self) {
        let len = self.len;
        if self.in_chunk() {
            pool_free(self.ptr);
        } else if len > 0 {
            let slice = core::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), len);
            // SAFETY: not a chunk slot and non-empty: a `Box<[u8]>`'s allocation owned by
            // this value (`adopt`), released once, here.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl core::ops::Deref for HugeBytes {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialized bytes owned by this value (dangling and
        // aligned for `u8` when `len` is 0), borrowed for `self`'s borrow.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl core::ops::DerefMut for HugeBytes {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `deref`, and `&mut self` makes the borrow exclusive.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for HugeBytes {
    /// A copy (of the same kind: the kind follows the length).
    fn clone(&self) -> HugeBytes {
        HugeBytes::from_box(Box::from(&self[..]))
    }
}

impl core::fmt::Debug for HugeBytes {
    // The bytes themselves (up to a ring's gigabyte) are left out.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HugeBytes")
            .field("len", &self.len)
            .field("in_chunk", &self.in_chunk())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_the_size_of_a_boxed_slice() {
        assert_eq!(
            core::mem::size_of::<HugeBytes>(),
            core::mem::size_of::<Box<[u8]>>()
        );
    }

    #[test]
    fn the_chunk_length_comes_from_chunks_and_others_from_the_heap_and_all_start_zeroed() {
        let on = bytes_chunked();
        for len in [0usize, 1, 64, 100, 4095, 4096, 4160, 8192, 70_000] {
            let b = HugeBytes::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0), "{len} bytes zeroed");
            assert_eq!(b.in_chunk(), on && len == CHUNK_LEN_BYTES, "{len} bytes");
            if b.in_chunk() {
                assert_eq!(b.as_ptr() as usize % 64, 0, "slots are line-aligned");
            }
        }
    }

    #[test]
    fn bytes_written_are_read_back_through_clones_and_boxes() {
        for len in [4096usize, 1000] {
            let mut b = HugeBytes::zeroed(len);
            for (i, x) in b.iter_mut().enumerate() {
                *x = (i * 7) as u8;
            }
            let c = b.clone();
            assert_eq!(c.in_chunk(), b.in_chunk());
            assert_eq!(&c[..], &b[..]);
            let boxed = b.into_box();
            assert_eq!(&boxed[..], &c[..]);
            let back = HugeBytes::from_box(boxed);
            assert_eq!(
                back.in_chunk(),
                bytes_chunked() && len == CHUNK_LEN_BYTES,
                "the chunk length is always a slot, any other length the box's allocation"
            );
            assert_eq!(&back[..], &c[..]);
        }
        assert!(HugeBytes::new().is_empty());
        assert!(HugeBytes::new().into_box().is_empty());
    }

    #[test]
    fn a_slot_freed_is_reused_zeroed() {
        if !bytes_chunked() {
            return;
        }
        let mut a = HugeBytes::zeroed(4096);
        a.fill(0xab);
        let addr = a.as_ptr() as usize;
        drop(a);
        let b = HugeBytes::zeroed(4096);
        assert_eq!(b.as_ptr() as usize, addr, "the freed slot is taken first");
        assert!(b.iter().all(|&x| x == 0));
    }

    #[test]
    fn a_buffer_dropped_on_another_thread_goes_back_to_its_pool() {
        let mut b = HugeBytes::zeroed(8192);
        b[5] = 9;
        let t = std::thread::spawn(move || {
            assert_eq!(b[5], 9);
            drop(b);
        });
        t.join().expect("the other thread");
    }
}
