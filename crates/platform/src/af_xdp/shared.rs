//! The memory an AF_XDP socket shares with the kernel: the mappings, the UMEM and its frame
//! states, the four rings, and the kernel's structures and socket-option wrappers.

use super::*;

/// Entries published by the producer and not yet consumed: `producer − consumer` modulo 2^32.
/// `None` when that exceeds `entries` (one index is corrupt).
pub fn ring_ready(producer: u32, consumer: u32, entries: u32) -> Option<u32> {
    let n = producer.wrapping_sub(consumer);
    (n <= entries).then_some(n)
}

/// Slots the producer may still fill: `entries − (producer − consumer)` modulo 2^32. `None`
/// when the indices are further apart than the ring size.
pub fn ring_free(producer: u32, consumer: u32, entries: u32) -> Option<u32> {
    ring_ready(producer, consumer, entries).map(|used| entries - used)
}

/// Where a descriptor's bytes lie in the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSpan {
    /// Frame index, `< frame_count`.
    pub frame: u32,
    /// Byte offset of the data inside the frame; `offset + len ≤ frame_size`.
    pub offset: u32,
    pub len: u32,
}

/// Checks a descriptor `(addr, len)` against a UMEM of `frame_count` frames of `frame_size`
/// bytes (a power of two) in aligned-chunk mode: the bytes must lie inside one frame.
pub fn frame_span(addr: u64, len: u32, frame_size: u32, frame_count: u32) -> Option<FrameSpan> {
    debug_assert!(frame_size.is_power_of_two());
    let frame = addr / u64::from(frame_size);
    let offset = (addr % u64::from(frame_size)) as u32;
    if frame >= u64::from(frame_count) || u64::from(offset) + u64::from(len) > u64::from(frame_size)
    {
        return None;
    }
    Some(FrameSpan {
        frame: frame as u32,
        offset,
        len,
    })
}

/// A memory mapping: the UMEM (anonymous) or one ring (shared with the socket).
///
/// Invariant: `ptr` is the start of a live, page-aligned mapping of exactly `len` bytes,
/// unmapped only in `drop`. All access goes through the bounds-checked methods below.
pub(super) struct Mapping {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
}

impl Mapping {
    pub(super) fn anonymous(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is aliased.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Self::from_mmap(ptr, len)
    }

    pub(super) fn ring(fd: RawFd, len: usize, page_offset: u64) -> io::Result<Mapping> {
        let offset = libc::off_t::try_from(page_offset)
            .map_err(|_| io::Error::new(io::ErrorKind::Unsupported, "ring offset beyond off_t"))?;
        // SAFETY: a fresh shared mapping of one of the socket's rings; the kernel checks `len`
        // against the ring it allocated. No existing memory is aliased.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset,
            )
        };
        Self::from_mmap(ptr, len)
    }

    pub(super) fn from_mmap(ptr: *mut libc::c_void, len: usize) -> io::Result<Mapping> {
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Mapping { ptr, len })
    }

    pub(super) fn in_bounds(&self, off: usize, len: usize, align: usize) -> bool {
        off % align == 0 && off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The u32 at `off` as an atomic, for the ring indices the kernel updates concurrently
    /// with `smp_load_acquire`/`smp_store_release`.
    pub(super) fn atomic_u32(&self, off: usize) -> Option<&AtomicU32> {
        if !self.in_bounds(off, 4, 4) {
            return None;
        }
        // SAFETY: in bounds and 4-aligned (the mapping is page-aligned) per the check; the
        // mapping lives as long as `&self`; `AtomicU32` has the layout of `u32`, and every
        // concurrent access (ours and the kernel's) to this word is atomic.
        Some(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() })
    }

    pub(super) fn read_u32(&self, off: usize) -> Option<u32> {
        if !self.in_bounds(off, 4, 4) {
            return None;
        }
        // SAFETY: in bounds and aligned per the check; a volatile read of plain data.
        Some(unsafe { core::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u32>()) })
    }

    pub(super) fn read_u64(&self, off: usize) -> Option<u64> {
        if !self.in_bounds(off, 8, 8) {
            return None;
        }
        // SAFETY: in bounds and aligned per the check; a volatile read of plain data.
        Some(unsafe { core::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u64>()) })
    }

    pub(super) fn write_u32(&self, off: usize, value: u32) -> bool {
        if !self.in_bounds(off, 4, 4) {
            return false;
        }
        // SAFETY: in bounds and aligned; callers write only ring slots they own as producer
        // (not yet published, so the kernel does not read them concurrently).
        unsafe { core::ptr::write_volatile(self.ptr.as_ptr().add(off).cast::<u32>(), value) };
        true
    }

    pub(super) fn write_u64(&self, off: usize, value: u64) -> bool {
        if !self.in_bounds(off, 8, 8) {
            return false;
        }
        // SAFETY: as in `write_u32`.
        unsafe { core::ptr::write_volatile(self.ptr.as_ptr().add(off).cast::<u64>(), value) };
        true
    }

    /// The bytes `[off, off + len)`.
    ///
    /// # Safety
    /// No one (in particular the kernel) may write these bytes while the returned borrow lives:
    /// the caller owns the frame that holds them.
    unsafe fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        if !self.in_bounds(off, len, 1) {
            return None;
        }
        // SAFETY: in bounds per the check; no concurrent writer per the caller's contract.
        Some(unsafe { core::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) })
    }

    /// The bytes `[off, off + len)`, writable.
    ///
    /// # Safety
    /// No one else (in particular the kernel) may read or write these bytes while the
    /// returned borrow lives: the caller owns the frame that holds them.
    unsafe fn bytes_mut(&mut self, off: usize, len: usize) -> Option<&mut [u8]> {
        if !self.in_bounds(off, len, 1) {
            return None;
        }
        // SAFETY: in bounds; `&mut self` excludes other borrows of the mapping from us, and the
        // caller's contract excludes the kernel.
        Some(unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe our live mapping, unmapped exactly once here; no borrow
        // of it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: a Mapping is the only handle to its memory in this process; moving it to another
// thread moves that handle. It is not Sync (shared `&` access could race on slots).
unsafe impl Send for Mapping {}

/// Who may touch a UMEM frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameState {
    /// Ours: free, or being read/written by us.
    User,
    /// Lent to the kernel through FILL; comes back through RX.
    Fill,
    /// Lent to the kernel through TX; comes back through COMPLETION.
    Tx,
}

/// The UMEM of one socket and the ownership of each of its frames.
///
/// Invariant: `state.len() == frame_count`; the bytes of a frame are only borrowed while its
/// state is [`FrameState::User`].
pub(super) struct Umem {
    pub(super) map: Mapping,
    pub(super) frame_size: u32,
    pub(super) state: Vec<FrameState>,
}

impl Umem {
    pub(super) fn frame_count(&self) -> u32 {
        self.state.len() as u32
    }

    pub(super) fn addr(&self, frame: u32) -> u64 {
        u64::from(frame) * u64::from(self.frame_size)
    }

    pub(super) fn span(&self, addr: u64, len: u32) -> Option<FrameSpan> {
        frame_span(addr, len, self.frame_size, self.frame_count())
    }

    pub(super) fn state(&self, frame: u32) -> Option<FrameState> {
        self.state.get(frame as usize).copied()
    }

    /// Moves `frame` from state `from` to `to`; false (and no change) if it was not in `from`.
    pub(super) fn transition(&mut self, frame: u32, from: FrameState, to: FrameState) -> bool {
        match self.state.get_mut(frame as usize) {
            Some(s) if *s == from => {
                *s = to;
                true
            }
            _ => false,
        }
    }

    /// The bytes of `span`, if its frame is ours.
    pub(super) fn read(&self, span: FrameSpan) -> Option<&[u8]> {
        if self.state(span.frame)? != FrameState::User {
            return None;
        }
        let off = (self.addr(span.frame) + u64::from(span.offset)) as usize;
        // SAFETY: the frame is `User`: the kernel holds no descriptor for it (we only lend a
        // frame through FILL or TX after moving it out of `User`), so nothing writes it while
        // `&self` is borrowed.
        unsafe { self.map.bytes(off, span.len as usize) }
    }

    /// Copies `data` to the start of `frame`, if it is ours and `data` fits.
    pub(super) fn write(&mut self, frame: u32, data: &[u8]) -> bool {
        if self.state(frame) != Some(FrameState::User) || data.len() > self.frame_size as usize {
            return false;
        }
        let off = self.addr(frame) as usize;
        // SAFETY: as in `read`: the frame is ours, so the kernel neither reads nor writes it.
        match unsafe { self.map.bytes_mut(off, data.len()) } {
            Some(dst) => {
                dst.copy_from_slice(data);
                true
            }
            None => false,
        }
    }
}

/// One of the four rings, mapped, with our cached side of it.
///
/// Invariants: `entries` is a power of two; the producer, consumer and flags words and the
/// `entries` slots of `slot_bytes` each were checked to lie inside `map` when it was created.
/// `cursor` is our own index (producer for FILL/TX, consumer for RX/COMPLETION); the kernel
/// sees it only when we publish it.
pub(super) struct Ring {
    pub(super) map: Mapping,
    pub(super) producer_off: usize,
    pub(super) consumer_off: usize,
    pub(super) flags_off: usize,
    pub(super) desc_off: usize,
    pub(super) entries: u32,
    pub(super) slot_bytes: usize,
    pub(super) cursor: u32,
}

impl Ring {
    pub(super) fn map(
        fd: RawFd,
        off: &XdpRingOffset,
        entries: u32,
        slot_bytes: usize,
        page_offset: u64,
    ) -> io::Result<Ring> {
        let word = |v: u64| usize::try_from(v).ok().filter(|o| o % 4 == 0);
        let (Some(producer_off), Some(consumer_off), Some(flags_off), Some(desc_off)) = (
            word(off.producer),
            word(off.consumer),
            word(off.flags),
            usize::try_from(off.desc).ok().filter(|o| o % 8 == 0),
        ) else {
            return Err(bad_offsets());
        };
        let len = (entries as usize)
            .checked_mul(slot_bytes)
            .and_then(|b| b.checked_add(desc_off))
            .ok_or_else(bad_offsets)?;
        if [producer_off, consumer_off, flags_off]
            .iter()
            .any(|&o| o.checked_add(4).is_none_or(|end| end > len))
        {
            return Err(bad_offsets());
        }
        let map = Mapping::ring(fd, len, page_offset)?;
        Ok(Ring {
            map,
            producer_off,
            consumer_off,
            flags_off,
            desc_off,
            entries,
            slot_bytes,
            cursor: 0,
        })
    }

    pub(super) fn load(&self, off: usize) -> u32 {
        // Checked in `map`; 0 on the unreachable miss keeps index arithmetic checked.
        self.map
            .atomic_u32(off)
            .map_or(0, |a| a.load(Ordering::Acquire))
    }

    pub(super) fn store(&self, off: usize, value: u32) {
        if let Some(a) = self.map.atomic_u32(off) {
            a.store(value, Ordering::Release);
        }
    }

    pub(super) fn producer(&self) -> u32 {
        self.load(self.producer_off)
    }

    pub(super) fn consumer(&self) -> u32 {
        self.load(self.consumer_off)
    }

    /// Makes every slot before `cursor` visible to the kernel (FILL, TX).
    pub(super) fn publish_producer(&self) {
        self.store(self.producer_off, self.cursor);
    }

    /// Gives every slot before `cursor` back to the kernel (RX, COMPLETION).
    pub(super) fn publish_consumer(&self) {
        self.store(self.consumer_off, self.cursor);
    }

    /// The kernel's "needs a system call" flag. The full fence orders our earlier publication
    /// of an index before this load (store→load), so we cannot miss a flag the kernel set after
    /// its last look at our index.
    pub(super) fn needs_wakeup(&self) -> bool {
        fence(Ordering::SeqCst);
        self.map
            .atomic_u32(self.flags_off)
            .is_some_and(|a| a.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0)
    }

    pub(super) fn slot(&self, index: u32) -> usize {
        self.desc_off + (index & (self.entries - 1)) as usize * self.slot_bytes
    }

    /// `(addr, len)` of the `xdp_desc` at `index` (RX).
    pub(super) fn read_desc(&self, index: u32) -> Option<(u64, u32)> {
        let s = self.slot(index);
        Some((self.map.read_u64(s)?, self.map.read_u32(s + 8)?))
    }

    /// Writes the `xdp_desc` at `index` (TX); `options` 0.
    pub(super) fn write_desc(&self, index: u32, addr: u64, len: u32) -> bool {
        let s = self.slot(index);
        self.map.write_u64(s, addr)
            && self.map.write_u32(s + 8, len)
            && self.map.write_u32(s + 12, 0)
    }

    pub(super) fn read_addr(&self, index: u32) -> Option<u64> {
        self.map.read_u64(self.slot(index))
    }

    pub(super) fn write_addr(&self, index: u32, addr: u64) -> bool {
        self.map.write_u64(self.slot(index), addr)
    }
}

pub(super) fn bad_offsets() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the kernel's XDP ring offsets do not fit the ring",
    )
}

/// `struct xdp_umem_reg` (Linux ≥ 6.8 names the last word `tx_metadata_len`; older kernels
/// take the same 32 bytes with it as padding).
#[repr(C)]
#[derive(Debug, Default)]
pub(super) struct XdpUmemReg {
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) chunk_size: u32,
    pub(super) headroom: u32,
    pub(super) flags: u32,
    pub(super) tx_metadata_len: u32,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Debug, Default)]
pub(super) struct SockaddrXdp {
    pub(super) family: u16,
    pub(super) flags: u16,
    pub(super) ifindex: u32,
    pub(super) queue_id: u32,
    pub(super) shared_umem_fd: u32,
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct XdpRingOffset {
    pub(super) producer: u64,
    pub(super) consumer: u64,
    pub(super) desc: u64,
    pub(super) flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Debug, Default)]
pub(super) struct XdpMmapOffsets {
    pub(super) rx: XdpRingOffset,
    pub(super) tx: XdpRingOffset,
    pub(super) fill: XdpRingOffset,
    pub(super) completion: XdpRingOffset,
}

// SAFETY: repr(C), six u64 fields; no padding.
unsafe impl PlainData for XdpMmapOffsets {}
// SAFETY: repr(C), u64 fields; no padding.
unsafe impl PlainData for XdpStatistics {}

pub(super) fn setsockopt<T>(fd: RawFd, name: libc::c_int, value: &T) -> io::Result<()> {
    sys::setsockopt(fd, SOL_XDP, name, value)
}

pub(super) fn getsockopt<T: PlainData>(fd: RawFd, name: libc::c_int) -> io::Result<(T, usize)> {
    sys::getsockopt(fd, SOL_XDP, name)
}

/// How long [`bind_retrying_busy`] keeps retrying a queue that is still being released.
pub(super) const BIND_BUSY_RETRY_MS: u64 = 500;

/// `bind(2)`, retried while it fails with `EBUSY` for up to [`BIND_BUSY_RETRY_MS`]: the kernel
/// releases a closed socket's hold on its queue from a deferred work item, so binding the same
/// queue right after closing the previous socket fails for a moment (observed on Linux 6.18).
pub(super) fn bind_retrying_busy(fd: RawFd, addr: &SockaddrXdp) -> io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(BIND_BUSY_RETRY_MS);
    let mut pause_ms = 1;
    loop {
        // SAFETY: `addr` is a live sockaddr_xdp and we pass its exact size.
        let rc = unsafe {
            libc::bind(
                fd,
                (addr as *const SockaddrXdp).cast(),
                core::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) || std::time::Instant::now() >= deadline {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        pause_ms = (pause_ms * 2).min(50);
    }
}

pub(super) fn page_bytes() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}
