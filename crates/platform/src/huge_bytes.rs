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
//! Which sizes: a non-zero multiple of 64 bytes up to [`crate::huge_box::SLOT_BYTES_MAX`]
//! made by [`HugeBytes::zeroed`] takes a chunk slot of exactly that size (one pool per
//! thread and size, as for boxes); every other buffer, and every buffer made from a `Box<[u8]>`
//! ([`HugeBytes::from_box`]) or while `RSSTACK_HUGE_BOX=off` (every huge box and buffer) or
//! `RSSTACK_HUGE_BYTES=off` (these buffers only: comparisons), is an ordinary allocation. The
//! buffer remembers which in the top bit of its length, so dropping it needs no lookup and
//! the slice it derefs to is one mask away.
//!
//! The type is 16 bytes, as `Box<[u8]>` is, so a structure that held one keeps its layout.

use core::ptr::NonNull;
use std::sync::OnceLock;

use crate::huge_box::{SLOT_ALIGN_BYTES, SLOT_BYTES_MAX, chunked, pool_alloc, pool_free};

/// True unless `RSSTACK_HUGE_BOX=off` or `RSSTACK_HUGE_BYTES=off` (read once).
fn bytes_chunked() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| {
        chunked() && std::env::var("RSSTACK_HUGE_BYTES").map_or(true, |v| v != "off")
    })
}

/// Set in `tagged_len` when the storage is a chunk slot (lengths stay far below it).
const CHUNK_TAG: usize = 1 << (usize::BITS - 1);

/// An owned, initialized byte buffer (see the module docs), used as `Box<[u8]>` is.
///
/// Invariant: `ptr` points to `len` initialized bytes this value owns exclusively (dangling
/// when `len` is 0): a chunk slot of exactly `len` bytes from [`pool_alloc`] when the tag is
/// set, else the allocation of a `Box<[u8]>` of `len` bytes.
pub struct HugeBytes {
    ptr: NonNull<u8>,
    /// The length, with [`CHUNK_TAG`] set for a chunk slot.
    tagged_len: usize,
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
            tagged_len: 0,
        }
    }

    /// `len` zero bytes: a huge-page chunk slot when `len` is a slot size (module docs) and
    /// chunks are on, else an ordinary allocation.
    pub fn zeroed(len: usize) -> HugeBytes {
        if len > 0 && len % SLOT_ALIGN_BYTES == 0 && len <= SLOT_BYTES_MAX && bytes_chunked() {
            let p = pool_alloc(len);
            // SAFETY: `p` is a fresh slot of exactly `len` bytes (slot sizes are the requested
            // size rounded up to 64, and `len` is a multiple of 64), owned by nobody else;
            // zeroing it makes every byte initialized whatever the slot held before.
            unsafe { p.as_ptr().write_bytes(0, len) };
            return HugeBytes {
                ptr: p,
                tagged_len: len | CHUNK_TAG,
            };
        }
        HugeBytes::from_box(vec![0u8; len].into_boxed_slice())
    }

    /// Takes over `b`'s allocation (an ordinary allocation: never a chunk slot).
    pub fn from_box(b: Box<[u8]>) -> HugeBytes {
        let len = b.len();
        let raw = Box::into_raw(b).cast::<u8>();
        HugeBytes {
            // `Box::into_raw` never returns null.
            ptr: NonNull::new(raw).unwrap_or(NonNull::dangling()),
            tagged_len: len,
        }
    }

    /// The bytes as a `Box<[u8]>`: the allocation itself for an ordinary one, a copy for a
    /// chunk slot (which then goes back to its pool).
    pub fn into_box(self) -> Box<[u8]> {
        if self.in_chunk() {
            return Box::from(&self[..]);
        }
        let me = core::mem::ManuallyDrop::new(self);
        let len = me.len_bytes();
        if len == 0 {
            return Box::default();
        }
        let slice = core::ptr::slice_from_raw_parts_mut(me.ptr.as_ptr(), len);
        // SAFETY: untagged and non-empty, so `ptr`/`len` are a `Box<[u8]>`'s allocation
        // (`from_box`), owned by this value, which is not dropped (ManuallyDrop): ownership
        // passes to the box once.
        unsafe { Box::from_raw(slice) }
    }

    /// True when the bytes are in a huge-page chunk slot.
    #[inline]
    pub fn in_chunk(&self) -> bool {
        self.tagged_len & CHUNK_TAG != 0
    }

    #[inline(always)]
    fn len_bytes(&self) -> usize {
        self.tagged_len & !CHUNK_TAG
    }
}

impl Default for HugeBytes {
    fn default() -> Self {
        HugeBytes::new()
    }
}

impl Drop for HugeBytes {
    fn drop(&mut self) {
        let len = self.len_bytes();
        if self.in_chunk() {
            pool_free(self.ptr);
        } else if len > 0 {
            let slice = core::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), len);
            // SAFETY: untagged and non-empty: a `Box<[u8]>`'s allocation owned by this value
            // (`from_box`), released once, here.
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
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len_bytes()) }
    }
}

impl core::ops::DerefMut for HugeBytes {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `deref`, and `&mut self` makes the borrow exclusive.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len_bytes()) }
    }
}

impl Clone for HugeBytes {
    /// A copy of the same kind (a chunk slot for a chunk slot).
    fn clone(&self) -> HugeBytes {
        if self.in_chunk() {
            let mut c = HugeBytes::zeroed(self.len_bytes());
            c.copy_from_slice(self);
            return c;
        }
        HugeBytes::from_box(Box::from(&self[..]))
    }
}

impl core::fmt::Debug for HugeBytes {
    // The bytes themselves (up to a ring's gigabyte) are left out.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HugeBytes")
            .field("len", &self.len_bytes())
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
    fn slot_sizes_come_from_chunks_and_others_from_the_heap_and_all_start_zeroed() {
        let on = bytes_chunked();
        for len in [
            0usize,
            1,
            63,
            64,
            100,
            4096,
            8192,
            SLOT_BYTES_MAX,
            SLOT_BYTES_MAX + 64,
        ] {
            let b = HugeBytes::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0), "{len} bytes zeroed");
            let slot_size = len > 0 && len % 64 == 0 && len <= SLOT_BYTES_MAX;
            assert_eq!(b.in_chunk(), on && slot_size, "{len} bytes");
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
            assert!(
                !back.in_chunk(),
                "a box's allocation stays a heap allocation"
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
