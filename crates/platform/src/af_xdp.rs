//! AF_XDP sockets: one socket per receive queue, each with its own UMEM (one shard's frame
//! pool), and an [`XdpPort`] that loads the redirect program ([`crate::bpf`]) and attaches it.
//!
//! A socket shares five regions with the kernel: the UMEM (frames of `frame_size_bytes`) and
//! four single-producer/single-consumer rings of u32 indices that run freely and wrap modulo
//! 2^32 (slot = index & (entries − 1)):
//!
//! | ring | producer | consumer | slot |
//! |---|---|---|---|
//! | FILL | us | kernel | UMEM address of an empty frame to receive into |
//! | RX | kernel | us | `xdp_desc` of a received frame |
//! | TX | us | kernel | `xdp_desc` of a frame to send |
//! | COMPLETION | kernel | us | UMEM address of a sent frame, free again |
//!
//! A producer writes slots, then publishes its index with a release store; the consumer loads
//! that index with acquire before it reads the slots, and publishes its own index with release
//! after it is done with them (Documentation/networking/af_xdp.rst, "Rings").
//!
//! **Frame ownership.** Every UMEM frame is in exactly one [`FrameState`]: ours (`User`),
//! handed to the kernel through FILL (`Fill`) or through TX (`Tx`). A descriptor the kernel
//! returns (RX or COMPLETION) is accepted only if its address lies inside the UMEM, inside one
//! frame, and names a frame in the state that ring returns; otherwise it is counted and
//! ignored. Bytes of a frame are only ever borrowed while the frame is `User`, so the kernel
//! never writes what we read. The frames are split once: `rx_frames` circulate between FILL and
//! RX, the rest are the transmit budget, so a burst of sends cannot starve receive.
//!
//! **Modes.** [`XdpBindMode::Copy`] works on every interface (the kernel copies between its
//! buffers and the UMEM); [`XdpBindMode::ZeroCopy`] needs driver support and fails otherwise;
//! [`XdpBindMode::Auto`] passes neither flag, so the kernel tries zero-copy and falls back to
//! copy — [`XdpSocket::is_zero_copy`] tells which it chose. In copy mode received data starts
//! `XDP_PACKET_HEADROOM` (256) bytes into the frame, so the largest frame received is
//! `frame_size_bytes − 256`.
//!
//! **Observed on Linux 6.18 with veth** (see `tests/af_xdp_veth.rs`): generic
//! ([`XdpAttachMode::Skb`]) and native ([`XdpAttachMode::Driver`]) XDP both work on the
//! receiving veth end with nothing attached to its peer; zero-copy is refused (`EOPNOTSUPP`)
//! and `Auto` binds in copy mode. Native XDP reports the peer's transmit queue as the receive
//! queue, so flows spread over the sockets of a multi-queue veth; generic XDP sees every veth
//! frame as queue 0. Copy-mode transmit happens inside `sendto`, at most 32 frames per call.
//! Closing a socket releases its queue from deferred work, so [`XdpSocket::open`] retries a
//! bind that fails with `EBUSY` for up to 500 ms.
//!
//! ```no_run
//! use platform::af_xdp::{XdpConfig, XdpPort};
//! use platform::bpf::XdpAttachMode;
//!
//! let port = XdpPort::open("eth0", 2, &XdpConfig::default(), XdpAttachMode::Auto)?;
//! let (_attachment, mut sockets) = port.into_parts(); // keep `_attachment` alive
//! // One shard per socket (shown on one thread):
//! let sock = &mut sockets[0];
//! let mut replies = Vec::new();
//! sock.recv_batch(64, |frame| replies.push(frame.to_vec())); // frames in place, then recycled
//! for r in &replies {
//!     sock.send(r)?; // copied into a free UMEM frame; `WouldBlock` when the budget is spent
//! }
//! sock.poll_tx()?; // kick what is queued, take back completed frames
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! All `unsafe` of this module is in `Mapping` (mmap/munmap, bounds-checked access to shared
//! memory) and in the thin system-call wrappers; the ring protocol above is safe code.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering, fence};

use crate::af_packet::interface_index;
use crate::bpf::{XdpAttachMode, XdpLink, XdpProgram, XskMap};
use crate::sys::{self, PlainData};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
// Socket options (linux/if_xdp.h).
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
// `sxdp_flags`.
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// Bit in a ring's `flags` word: the kernel needs a system call to make progress.
const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;
const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;
// mmap page offsets of the four rings.
const XDP_PGOFF_RX_RING: u64 = 0;
const XDP_PGOFF_TX_RING: u64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: u64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: u64 = 0x1_8000_0000;
/// Bytes of one `struct xdp_desc` (RX/TX slots) and of one UMEM address (FILL/COMPLETION).
const XDP_DESC_BYTES: usize = 16;
const UMEM_ADDR_BYTES: usize = 8;
/// Smallest UMEM chunk the kernel accepts (`XDP_UMEM_MIN_CHUNK_SIZE`).
const FRAME_SIZE_MIN_BYTES: u32 = 2048;
/// Largest ring we ask for; far above any useful size, it keeps sizes and products in range.
const RING_ENTRIES_MAX: u32 = 1 << 20;
/// Headroom the kernel leaves in front of received data in copy mode.
pub const XDP_PACKET_HEADROOM_BYTES: u32 = 256;

/// How the socket binds: the kernel copies frames, the driver DMAs into the UMEM, or the
/// kernel picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpBindMode {
    /// `XDP_COPY`: works on every interface (generic or native XDP).
    Copy,
    /// `XDP_ZEROCOPY`: fails unless the driver supports AF_XDP zero-copy on this queue.
    ZeroCopy,
    /// Neither flag: zero-copy where the driver offers it, copy otherwise.
    Auto,
}

/// UMEM and ring geometry of one socket.
///
/// Invariants checked by [`XdpConfig::validate`] (and so by [`XdpSocket::open`]):
/// `frame_size_bytes` is a power of two between 2048 and the page size; every ring size is a
/// power of two in `1..=2^20`; `frame_count ≥ 2`; `rx_frames` (the frames lent to FILL) is in
/// `1..frame_count` and at most `fill_ring_entries`, so a recycled frame always finds a FILL
/// slot. The remaining `frame_count − rx_frames` frames are the transmit budget; with
/// `completion_ring_entries` at least that large the kernel never stalls on a full COMPLETION
/// ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpConfig {
    pub frame_count: u32,
    pub frame_size_bytes: u32,
    /// Frames kept in FILL/RX for receiving.
    pub rx_frames: u32,
    pub rx_ring_entries: u32,
    pub tx_ring_entries: u32,
    pub fill_ring_entries: u32,
    pub completion_ring_entries: u32,
    pub bind_mode: XdpBindMode,
    /// `XDP_USE_NEED_WAKEUP`: the kernel says (ring flag) when it needs a system call, so a
    /// busy sender skips most `sendto` kicks.
    pub need_wakeup: bool,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            frame_count: 4096,
            frame_size_bytes: 2048,
            rx_frames: 2048,
            rx_ring_entries: 2048,
            tx_ring_entries: 2048,
            fill_ring_entries: 2048,
            completion_ring_entries: 2048,
            bind_mode: XdpBindMode::Auto,
            need_wakeup: true,
        }
    }
}

/// Why an [`XdpConfig`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpConfigError {
    FrameSize,
    FrameCount,
    RingEntries,
    RxFrames,
    UmemTooLarge,
}

impl core::fmt::Display for XdpConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            XdpConfigError::FrameSize => {
                "frame size must be a power of two between 2048 and the page size"
            }
            XdpConfigError::FrameCount => "a UMEM needs at least two frames",
            XdpConfigError::RingEntries => "ring sizes must be powers of two in 1..=2^20",
            XdpConfigError::RxFrames => {
                "rx_frames must be at least 1, below frame_count and at most fill_ring_entries"
            }
            XdpConfigError::UmemTooLarge => "frame_count × frame_size does not fit in memory",
        })
    }
}

impl std::error::Error for XdpConfigError {}

impl XdpConfig {
    /// Checks the invariants in the type's documentation for a machine with `page_bytes` pages;
    /// returns the UMEM size in bytes.
    pub fn validate(&self, page_bytes: usize) -> Result<usize, XdpConfigError> {
        let fs = self.frame_size_bytes;
        if !fs.is_power_of_two() || fs < FRAME_SIZE_MIN_BYTES || fs as usize > page_bytes {
            return Err(XdpConfigError::FrameSize);
        }
        if self.frame_count < 2 {
            return Err(XdpConfigError::FrameCount);
        }
        for entries in [
            self.rx_ring_entries,
            self.tx_ring_entries,
            self.fill_ring_entries,
            self.completion_ring_entries,
        ] {
            if !entries.is_power_of_two() || entries > RING_ENTRIES_MAX {
                return Err(XdpConfigError::RingEntries);
            }
        }
        if self.rx_frames == 0
            || self.rx_frames >= self.frame_count
            || self.rx_frames > self.fill_ring_entries
        {
            return Err(XdpConfigError::RxFrames);
        }
        (self.frame_count as usize)
            .checked_mul(fs as usize)
            .filter(|&len| len <= isize::MAX as usize)
            .ok_or(XdpConfigError::UmemTooLarge)
    }
}

/// Our counters of one socket; every drop or rejected descriptor has one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpCounters {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Transmitted frames the kernel handed back through COMPLETION.
    pub tx_completed: u64,
    /// `send` found no free frame in the transmit budget.
    pub tx_drop_no_frame: u64,
    /// `send` found the TX ring full.
    pub tx_drop_ring_full: u64,
    /// `send` got a frame empty or longer than a UMEM frame.
    pub tx_drop_bad_length: u64,
    /// RX descriptors outside the UMEM, across a frame boundary, or naming a frame that was
    /// not lent to FILL.
    pub rx_invalid_desc: u64,
    /// COMPLETION addresses outside the UMEM or naming a frame that was not sent.
    pub completion_invalid_addr: u64,
    /// A producer/consumer index pair further apart than the ring size.
    pub ring_index_invalid: u64,
    /// `recv_batch` calls that found the kernel had taken every frame we had lent to FILL
    /// (it may have had nowhere to receive into; `XdpStatistics` says whether it dropped).
    pub fill_ring_empty: u64,
    /// `sendto` kicks issued, and those the kernel answered with a transient error
    /// (EAGAIN/EBUSY/ENOBUFS/ENETDOWN; the frames stay queued).
    pub tx_kicks: u64,
    pub tx_kick_busy: u64,
    /// `recvfrom` kicks issued because FILL asked for a wake-up.
    pub rx_wakeups: u64,
}

/// The kernel's counters of one socket (`XDP_STATISTICS`), cumulative since bind.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Dropped for other reasons (e.g. the frame did not fit a UMEM frame).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found FILL empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found TX empty when woken.
    pub tx_ring_empty_descs: u64,
}

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
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn anonymous(len: usize) -> io::Result<Mapping> {
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

    fn ring(fd: RawFd, len: usize, page_offset: u64) -> io::Result<Mapping> {
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

    fn from_mmap(ptr: *mut libc::c_void, len: usize) -> io::Result<Mapping> {
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Mapping { ptr, len })
    }

    fn in_bounds(&self, off: usize, len: usize, align: usize) -> bool {
        off % align == 0 && off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The u32 at `off` as an atomic, for the ring indices the kernel updates concurrently
    /// with `smp_load_acquire`/`smp_store_release`.
    fn atomic_u32(&self, off: usize) -> Option<&AtomicU32> {
        if !self.in_bounds(off, 4, 4) {
            return None;
        }
        // SAFETY: in bounds and 4-aligned (the mapping is page-aligned) per the check; the
        // mapping lives as long as `&self`; `AtomicU32` has the layout of `u32`, and every
        // concurrent access (ours and the kernel's) to this word is atomic.
        Some(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() })
    }

    fn read_u32(&self, off: usize) -> Option<u32> {
        if !self.in_bounds(off, 4, 4) {
            return None;
        }
        // SAFETY: in bounds and aligned per the check; a volatile read of plain data.
        Some(unsafe { core::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u32>()) })
    }

    fn read_u64(&self, off: usize) -> Option<u64> {
        if !self.in_bounds(off, 8, 8) {
            return None;
        }
        // SAFETY: in bounds and aligned per the check; a volatile read of plain data.
        Some(unsafe { core::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u64>()) })
    }

    fn write_u32(&self, off: usize, value: u32) -> bool {
        if !self.in_bounds(off, 4, 4) {
            return false;
        }
        // SAFETY: in bounds and aligned; callers write only ring slots they own as producer
        // (not yet published, so the kernel does not read them concurrently).
        unsafe { core::ptr::write_volatile(self.ptr.as_ptr().add(off).cast::<u32>(), value) };
        true
    }

    fn write_u64(&self, off: usize, value: u64) -> bool {
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
struct Umem {
    map: Mapping,
    frame_size: u32,
    state: Vec<FrameState>,
}

impl Umem {
    fn frame_count(&self) -> u32 {
        self.state.len() as u32
    }

    fn addr(&self, frame: u32) -> u64 {
        u64::from(frame) * u64::from(self.frame_size)
    }

    fn span(&self, addr: u64, len: u32) -> Option<FrameSpan> {
        frame_span(addr, len, self.frame_size, self.frame_count())
    }

    fn state(&self, frame: u32) -> Option<FrameState> {
        self.state.get(frame as usize).copied()
    }

    /// Moves `frame` from state `from` to `to`; false (and no change) if it was not in `from`.
    fn transition(&mut self, frame: u32, from: FrameState, to: FrameState) -> bool {
        match self.state.get_mut(frame as usize) {
            Some(s) if *s == from => {
                *s = to;
                true
            }
            _ => false,
        }
    }

    /// The bytes of `span`, if its frame is ours.
    fn read(&self, span: FrameSpan) -> Option<&[u8]> {
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
    fn write(&mut self, frame: u32, data: &[u8]) -> bool {
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
struct Ring {
    map: Mapping,
    producer_off: usize,
    consumer_off: usize,
    flags_off: usize,
    desc_off: usize,
    entries: u32,
    slot_bytes: usize,
    cursor: u32,
}

impl Ring {
    fn map(
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

    fn load(&self, off: usize) -> u32 {
        // Checked in `map`; 0 on the unreachable miss keeps index arithmetic checked.
        self.map
            .atomic_u32(off)
            .map_or(0, |a| a.load(Ordering::Acquire))
    }

    fn store(&self, off: usize, value: u32) {
        if let Some(a) = self.map.atomic_u32(off) {
            a.store(value, Ordering::Release);
        }
    }

    fn producer(&self) -> u32 {
        self.load(self.producer_off)
    }

    fn consumer(&self) -> u32 {
        self.load(self.consumer_off)
    }

    /// Makes every slot before `cursor` visible to the kernel (FILL, TX).
    fn publish_producer(&self) {
        self.store(self.producer_off, self.cursor);
    }

    /// Gives every slot before `cursor` back to the kernel (RX, COMPLETION).
    fn publish_consumer(&self) {
        self.store(self.consumer_off, self.cursor);
    }

    /// The kernel's "needs a system call" flag. The full fence orders our earlier publication
    /// of an index before this load (store→load), so we cannot miss a flag the kernel set after
    /// its last look at our index.
    fn needs_wakeup(&self) -> bool {
        fence(Ordering::SeqCst);
        self.map
            .atomic_u32(self.flags_off)
            .is_some_and(|a| a.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0)
    }

    fn slot(&self, index: u32) -> usize {
        self.desc_off + (index & (self.entries - 1)) as usize * self.slot_bytes
    }

    /// `(addr, len)` of the `xdp_desc` at `index` (RX).
    fn read_desc(&self, index: u32) -> Option<(u64, u32)> {
        let s = self.slot(index);
        Some((self.map.read_u64(s)?, self.map.read_u32(s + 8)?))
    }

    /// Writes the `xdp_desc` at `index` (TX); `options` 0.
    fn write_desc(&self, index: u32, addr: u64, len: u32) -> bool {
        let s = self.slot(index);
        self.map.write_u64(s, addr)
            && self.map.write_u32(s + 8, len)
            && self.map.write_u32(s + 12, 0)
    }

    fn read_addr(&self, index: u32) -> Option<u64> {
        self.map.read_u64(self.slot(index))
    }

    fn write_addr(&self, index: u32, addr: u64) -> bool {
        self.map.write_u64(self.slot(index), addr)
    }
}

fn bad_offsets() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the kernel's XDP ring offsets do not fit the ring",
    )
}

/// `struct xdp_umem_reg` (Linux ≥ 6.8 names the last word `tx_metadata_len`; older kernels
/// take the same 32 bytes with it as padding).
#[repr(C)]
#[derive(Debug, Default)]
struct XdpUmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Debug, Default)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct XdpRingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Debug, Default)]
struct XdpMmapOffsets {
    rx: XdpRingOffset,
    tx: XdpRingOffset,
    fill: XdpRingOffset,
    completion: XdpRingOffset,
}

// SAFETY: repr(C), six u64 fields; no padding.
unsafe impl PlainData for XdpMmapOffsets {}
// SAFETY: repr(C), u64 fields; no padding.
unsafe impl PlainData for XdpStatistics {}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, value: &T) -> io::Result<()> {
    sys::setsockopt(fd, SOL_XDP, name, value)
}

fn getsockopt<T: PlainData>(fd: RawFd, name: libc::c_int) -> io::Result<(T, usize)> {
    sys::getsockopt(fd, SOL_XDP, name)
}

/// How long [`bind_retrying_busy`] keeps retrying a queue that is still being released.
const BIND_BUSY_RETRY_MS: u64 = 500;

/// `bind(2)`, retried while it fails with `EBUSY` for up to [`BIND_BUSY_RETRY_MS`]: the kernel
/// releases a closed socket's hold on its queue from a deferred work item, so binding the same
/// queue right after closing the previous socket fails for a moment (observed on Linux 6.18).
fn bind_retrying_busy(fd: RawFd, addr: &SockaddrXdp) -> io::Result<()> {
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

fn page_bytes() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// An AF_XDP socket bound to one queue of one interface, with its own UMEM.
///
/// Frames reach it only if an XDP program redirects them to it (see [`XdpPort`]).
pub struct XdpSocket {
    // Field order is drop order: the rings are unmapped, then the socket closes, then the UMEM
    // is unmapped.
    rx: Ring,
    tx: Ring,
    fill: Ring,
    completion: Ring,
    fd: OwnedFd,
    umem: Umem,
    /// Frames in state `User` and not being read: the allocator. Bounded by the UMEM.
    free_frames: Vec<u32>,
    /// Frames lent to FILL/RX; `rx_frames_lent ≤ rx_frames_target`.
    rx_frames_target: u32,
    rx_frames_lent: u32,
    /// Frames lent to TX; `tx_frames_lent ≤ tx_frames_max = frame_count − rx_frames_target`.
    tx_frames_max: u32,
    tx_frames_lent: u32,
    need_wakeup: bool,
    zero_copy: bool,
    ifindex: u32,
    queue_id: u32,
    counters: XdpCounters,
}

impl core::fmt::Debug for XdpSocket {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XdpSocket")
            .field("fd", &self.fd)
            .field("ifindex", &self.ifindex)
            .field("queue_id", &self.queue_id)
            .field("zero_copy", &self.zero_copy)
            .field("frames", &self.umem.frame_count())
            .finish()
    }
}

impl XdpSocket {
    /// Opens a socket on queue `queue_id` of interface `ifname`. Needs `CAP_NET_RAW` (and
    /// `CAP_IPC_LOCK` or enough `RLIMIT_MEMLOCK` for the UMEM).
    pub fn open(ifname: &str, queue_id: u32, config: &XdpConfig) -> io::Result<Self> {
        Self::open_ifindex(interface_index(ifname)?, queue_id, config)
    }

    /// As [`XdpSocket::open`], by interface index.
    pub fn open_ifindex(ifindex: u32, queue_id: u32, config: &XdpConfig) -> io::Result<Self> {
        let umem_len = config
            .validate(page_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: plain socket(2); ownership of the fd passes to `OwnedFd` right below.
        let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let map = Mapping::anonymous(umem_len)?;
        let reg = XdpUmemReg {
            addr: map.ptr.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: config.frame_size_bytes,
            ..XdpUmemReg::default()
        };
        setsockopt(raw, XDP_UMEM_REG, &reg)?;
        let umem = Umem {
            map,
            frame_size: config.frame_size_bytes,
            state: vec![FrameState::User; config.frame_count as usize],
        };
        setsockopt(raw, XDP_UMEM_FILL_RING, &config.fill_ring_entries)?;
        setsockopt(
            raw,
            XDP_UMEM_COMPLETION_RING,
            &config.completion_ring_entries,
        )?;
        setsockopt(raw, XDP_RX_RING, &config.rx_ring_entries)?;
        setsockopt(raw, XDP_TX_RING, &config.tx_ring_entries)?;

        let (off, len) = getsockopt::<XdpMmapOffsets>(raw, XDP_MMAP_OFFSETS)?;
        if len != core::mem::size_of::<XdpMmapOffsets>() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "kernel without ring flags in XDP_MMAP_OFFSETS (Linux < 5.4)",
            ));
        }
        let rx = Ring::map(
            raw,
            &off.rx,
            config.rx_ring_entries,
            XDP_DESC_BYTES,
            XDP_PGOFF_RX_RING,
        )?;
        let tx = Ring::map(
            raw,
            &off.tx,
            config.tx_ring_entries,
            XDP_DESC_BYTES,
            XDP_PGOFF_TX_RING,
        )?;
        let fill = Ring::map(
            raw,
            &off.fill,
            config.fill_ring_entries,
            UMEM_ADDR_BYTES,
            XDP_UMEM_PGOFF_FILL_RING,
        )?;
        let completion = Ring::map(
            raw,
            &off.completion,
            config.completion_ring_entries,
            UMEM_ADDR_BYTES,
            XDP_UMEM_PGOFF_COMPLETION_RING,
        )?;

        let mut flags = match config.bind_mode {
            XdpBindMode::Copy => XDP_COPY,
            XdpBindMode::ZeroCopy => XDP_ZEROCOPY,
            XdpBindMode::Auto => 0,
        };
        if config.need_wakeup {
            flags |= XDP_USE_NEED_WAKEUP;
        }
        let addr = SockaddrXdp {
            family: AF_XDP as u16,
            flags,
            ifindex,
            queue_id,
            shared_umem_fd: 0,
        };
        bind_retrying_busy(raw, &addr).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "binding AF_XDP to ifindex {ifindex} queue {queue_id} ({:?}): {e}",
                    config.bind_mode
                ),
            )
        })?;
        let (options, _) = getsockopt::<u32>(raw, XDP_OPTIONS)?;

        Ok(XdpSocket::assemble(
            [rx, tx, fill, completion],
            fd,
            umem,
            config,
            options & XDP_OPTIONS_ZEROCOPY != 0,
            (ifindex, queue_id),
        ))
    }

    /// Puts a bound socket together and lends the first `rx_frames` frames to FILL; the rest
    /// are the transmit budget. The free list pops low frame numbers first.
    fn assemble(
        [rx, tx, fill, completion]: [Ring; 4],
        fd: OwnedFd,
        umem: Umem,
        config: &XdpConfig,
        zero_copy: bool,
        (ifindex, queue_id): (u32, u32),
    ) -> XdpSocket {
        debug_assert_eq!(umem.frame_count(), config.frame_count);
        let mut sock = XdpSocket {
            rx,
            tx,
            fill,
            completion,
            fd,
            free_frames: (0..umem.frame_count()).rev().collect(),
            umem,
            rx_frames_target: config.rx_frames,
            rx_frames_lent: 0,
            tx_frames_max: config.frame_count - config.rx_frames,
            tx_frames_lent: 0,
            need_wakeup: config.need_wakeup,
            zero_copy,
            ifindex,
            queue_id,
            counters: XdpCounters::default(),
        };
        sock.refill();
        sock
    }

    /// True when the kernel bound in zero-copy mode (the driver DMAs into the UMEM).
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub fn counters(&self) -> XdpCounters {
        self.counters
    }

    /// Frames `send` may still take before completions come back.
    pub fn tx_frames_available(&self) -> u32 {
        self.tx_frames_max - self.tx_frames_lent
    }

    /// Lends free frames to FILL until `rx_frames_target` are lent or FILL is full.
    fn refill(&mut self) {
        let consumer = self.fill.consumer();
        let entries = self.fill.entries;
        let Some(room) = ring_free(self.fill.cursor, consumer, entries) else {
            self.counters.ring_index_invalid += 1;
            return;
        };
        let want = (self.rx_frames_target - self.rx_frames_lent).min(room);
        let mut lent = 0;
        while lent < want {
            let Some(frame) = self.free_frames.pop() else {
                break;
            };
            let addr = self.umem.addr(frame);
            if !self
                .umem
                .transition(frame, FrameState::User, FrameState::Fill)
            {
                // Unreachable: only `User` frames are on the free list.
                debug_assert!(false, "frame {frame} on the free list but not ours");
                continue;
            }
            if !self.fill.write_addr(self.fill.cursor, addr) {
                self.umem
                    .transition(frame, FrameState::Fill, FrameState::User);
                self.free_frames.push(frame);
                break;
            }
            self.fill.cursor = self.fill.cursor.wrapping_add(1);
            lent += 1;
        }
        if lent > 0 {
            self.rx_frames_lent += lent;
            self.fill.publish_producer();
        }
    }

    /// Hands up to `max_frames` received frames to `visit`, in arrival order, in place (no
    /// copy); each frame goes back to FILL after its visit. Returns how many were handed.
    pub fn recv_batch(&mut self, max_frames: usize, mut visit: impl FnMut(&[u8])) -> usize {
        // Before we give anything back: has the kernel taken every frame we lent to FILL?
        if self.rx_frames_lent > 0
            && ring_ready(self.fill.cursor, self.fill.consumer(), self.fill.entries) == Some(0)
        {
            self.counters.fill_ring_empty += 1;
        }
        let producer = self.rx.producer();
        let Some(ready) = ring_ready(producer, self.rx.cursor, self.rx.entries) else {
            self.counters.ring_index_invalid += 1;
            return 0;
        };
        let n = ready.min(u32::try_from(max_frames).unwrap_or(u32::MAX));
        let mut handed = 0;
        for _ in 0..n {
            let index = self.rx.cursor;
            self.rx.cursor = index.wrapping_add(1);
            let span = self
                .rx
                .read_desc(index)
                .and_then(|(addr, len)| self.umem.span(addr, len));
            let Some(span) = span else {
                self.counters.rx_invalid_desc += 1;
                continue;
            };
            if !self
                .umem
                .transition(span.frame, FrameState::Fill, FrameState::User)
            {
                // A frame the kernel did not have from FILL: leave its state alone.
                self.counters.rx_invalid_desc += 1;
                continue;
            }
            self.rx_frames_lent -= 1;
            if let Some(bytes) = self.umem.read(span) {
                visit(bytes);
                handed += 1;
                self.counters.rx_frames += 1;
                self.counters.rx_bytes += u64::from(span.len);
            }
            self.free_frames.push(span.frame);
        }
        if n > 0 {
            self.rx.publish_consumer();
        }
        self.refill();
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.kick_rx();
        }
        handed
    }

    /// Copies `frame` into a free UMEM frame and queues it on TX, kicking the kernel when it
    /// needs it. `WouldBlock` when the transmit budget or the TX ring is exhausted (counted;
    /// call [`XdpSocket::poll_tx`] or wait for writability), `InvalidInput` when the frame is
    /// empty or longer than a UMEM frame.
    pub fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        match self.send_batch(&[frame])? {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            _ => Ok(()),
        }
    }

    /// Queues a prefix of `frames` on TX (copying each into a free UMEM frame) and kicks the
    /// kernel once; returns how many were queued. Fewer than `frames.len()` when the transmit
    /// budget or the TX ring ran out (counted once per call); the caller keeps the rest.
    /// `InvalidInput`, and nothing queued, when any frame is empty or longer than a UMEM frame.
    pub fn send_batch<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> io::Result<usize> {
        let frame_size = self.umem.frame_size as usize;
        if frames
            .iter()
            .any(|f| f.as_ref().is_empty() || f.as_ref().len() > frame_size)
        {
            self.counters.tx_drop_bad_length += 1;
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame empty or longer than a UMEM frame",
            ));
        }
        self.reclaim_completions();
        let Some(room) = ring_free(self.tx.cursor, self.tx.consumer(), self.tx.entries) else {
            self.counters.ring_index_invalid += 1;
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TX ring indices corrupt",
            ));
        };
        let mut queued = 0usize;
        for f in frames {
            let data = f.as_ref();
            if queued as u32 == room {
                self.counters.tx_drop_ring_full += 1;
                break;
            }
            if self.tx_frames_lent >= self.tx_frames_max {
                self.counters.tx_drop_no_frame += 1;
                break;
            }
            let Some(frame) = self.free_frames.pop() else {
                // Unreachable while the budget holds: free ≥ frames owed to FILL + budget left.
                self.counters.tx_drop_no_frame += 1;
                break;
            };
            let addr = self.umem.addr(frame);
            // `write` checks the frame is ours; the length was checked above.
            if !self.umem.write(frame, data)
                || !self.tx.write_desc(self.tx.cursor, addr, data.len() as u32)
            {
                self.free_frames.push(frame);
                break;
            }
            self.umem
                .transition(frame, FrameState::User, FrameState::Tx);
            self.tx_frames_lent += 1;
            self.tx.cursor = self.tx.cursor.wrapping_add(1);
            self.counters.tx_frames += 1;
            self.counters.tx_bytes += data.len() as u64;
            queued += 1;
        }
        if queued > 0 {
            self.tx.publish_producer();
        }
        // Kick when we queued something, or when we could not and frames still wait in TX
        // (copy mode sends only inside a system call).
        self.poll_tx()?;
        Ok(queued)
    }

    /// Kicks the kernel if TX still holds frames it has not taken, and takes back completed
    /// frames; returns how many came back. Call it from the run loop: copy mode transmits only
    /// inside a system call, and a bounded number of frames per call (32 on Linux 6.18, after
    /// which the kick reports `EAGAIN`, counted in `tx_kick_busy`).
    pub fn poll_tx(&mut self) -> io::Result<u32> {
        let consumer = self.tx.consumer();
        if consumer != self.tx.cursor && (!self.need_wakeup || self.tx.needs_wakeup()) {
            self.kick_tx()?;
        }
        Ok(self.reclaim_completions())
    }

    /// Frames sent and not yet completed.
    pub fn tx_in_flight(&self) -> u32 {
        self.tx_frames_lent
    }

    fn reclaim_completions(&mut self) -> u32 {
        let producer = self.completion.producer();
        let Some(ready) = ring_ready(producer, self.completion.cursor, self.completion.entries)
        else {
            self.counters.ring_index_invalid += 1;
            return 0;
        };
        let mut reclaimed = 0;
        for _ in 0..ready {
            let index = self.completion.cursor;
            self.completion.cursor = index.wrapping_add(1);
            let frame = self
                .completion
                .read_addr(index)
                .and_then(|addr| self.umem.span(addr, 0))
                .map(|span| span.frame);
            match frame {
                Some(f) if self.umem.transition(f, FrameState::Tx, FrameState::User) => {
                    self.free_frames.push(f);
                    self.tx_frames_lent -= 1;
                    reclaimed += 1;
                }
                _ => self.counters.completion_invalid_addr += 1,
            }
        }
        if ready > 0 {
            self.completion.publish_consumer();
            self.counters.tx_completed += u64::from(reclaimed);
        }
        reclaimed
    }

    /// `sendto(fd, NULL, 0, MSG_DONTWAIT)`: makes the kernel process TX. Transient refusals
    /// are counted, not errors: the frames stay queued for the next kick.
    fn kick_tx(&mut self) -> io::Result<()> {
        self.counters.tx_kicks += 1;
        // SAFETY: a zero-length send with null buffer and address; the kernel reads nothing.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                core::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                core::ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => {
                self.counters.tx_kick_busy += 1;
                Ok(())
            }
            _ => Err(e),
        }
    }

    /// `recvfrom(fd, NULL, 0, MSG_DONTWAIT)`: lets a zero-copy driver refill from FILL.
    fn kick_rx(&mut self) {
        self.counters.rx_wakeups += 1;
        // SAFETY: a zero-length receive with null buffer and address; the kernel writes
        // nothing.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                core::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
            )
        };
    }

    /// The kernel's counters for this socket (`XDP_STATISTICS`).
    pub fn kernel_stats(&self) -> io::Result<XdpStatistics> {
        let (stats, _) = getsockopt::<XdpStatistics>(self.fd.as_raw_fd(), XDP_STATISTICS)?;
        Ok(stats)
    }

    /// Frames in each ownership state, `(User, Fill, Tx)`; they always add up to the UMEM.
    pub fn frame_states(&self) -> (u32, u32, u32) {
        let mut counts = (0, 0, 0);
        for s in &self.umem.state {
            match s {
                FrameState::User => counts.0 += 1,
                FrameState::Fill => counts.1 += 1,
                FrameState::Tx => counts.2 += 1,
            }
        }
        counts
    }
}

impl AsFd for XdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An interface driven through AF_XDP: the XSKMAP, the redirect program attached through a
/// BPF link, and one socket (with its own UMEM) per queue `0..queue_count`.
///
/// Dropping it detaches the program first (frames go back to the kernel's stack), then closes
/// the sockets.
#[derive(Debug)]
pub struct XdpPort {
    // Field order is drop order.
    link: XdpLink,
    sockets: Vec<XdpSocket>,
    map: XskMap,
    program: XdpProgram,
    attach_mode: XdpAttachMode,
}

impl XdpPort {
    /// Opens sockets on queues `0..queue_count` of `ifname`, registers them in a fresh
    /// XSKMAP, loads the redirect program and attaches it in `attach_mode`. Needs root
    /// (`CAP_NET_ADMIN`, `CAP_BPF`, `CAP_NET_RAW`). `EBUSY` if the interface already has an
    /// XDP program.
    pub fn open(
        ifname: &str,
        queue_count: u32,
        config: &XdpConfig,
        attach_mode: XdpAttachMode,
    ) -> io::Result<Self> {
        let ifindex = interface_index(ifname)?;
        let map = XskMap::create(queue_count)?;
        let program = XdpProgram::load_xsk_redirect(&map)?;
        let mut sockets = Vec::with_capacity(queue_count as usize);
        for queue in 0..queue_count {
            let s = XdpSocket::open_ifindex(ifindex, queue, config)?;
            map.insert(queue, s.as_fd())?;
            sockets.push(s);
        }
        let link = XdpLink::attach(&program, ifindex, attach_mode).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("attaching XDP to {ifname} in {attach_mode:?} mode: {e}"),
            )
        })?;
        Ok(XdpPort {
            link,
            sockets,
            map,
            program,
            attach_mode,
        })
    }

    pub fn attach_mode(&self) -> XdpAttachMode {
        self.attach_mode
    }

    pub fn ifindex(&self) -> u32 {
        self.link.ifindex()
    }

    /// The sockets, indexed by queue.
    pub fn sockets(&self) -> &[XdpSocket] {
        &self.sockets
    }

    /// The sockets, indexed by queue; split them across shards with `iter_mut`.
    pub fn sockets_mut(&mut self) -> &mut [XdpSocket] {
        &mut self.sockets
    }

    /// Stops redirecting `queue` (its frames go to the kernel's stack) without closing its
    /// socket.
    pub fn unmap_queue(&self, queue: u32) -> io::Result<()> {
        self.map.remove(queue)
    }

    /// The loaded program (for introspection, e.g. `bpftool prog show`).
    pub fn program(&self) -> &XdpProgram {
        &self.program
    }

    /// Splits the port so each socket can move to the thread of its shard. Frames are
    /// redirected while both the [`XdpAttachment`] and a queue's socket live; once either is
    /// dropped that queue's frames go to the kernel's stack (the kernel removes a closed
    /// socket from the XSKMAP by itself).
    pub fn into_parts(self) -> (XdpAttachment, Vec<XdpSocket>) {
        let XdpPort {
            link,
            sockets,
            map,
            program,
            attach_mode,
        } = self;
        (
            XdpAttachment {
                link,
                map,
                program,
                attach_mode,
            },
            sockets,
        )
    }
}

/// The program, map and link of a split [`XdpPort`]; dropping it detaches the program.
#[derive(Debug)]
pub struct XdpAttachment {
    // Field order is drop order: detach first.
    link: XdpLink,
    map: XskMap,
    program: XdpProgram,
    attach_mode: XdpAttachMode,
}

impl XdpAttachment {
    pub fn attach_mode(&self) -> XdpAttachMode {
        self.attach_mode
    }

    pub fn ifindex(&self) -> u32 {
        self.link.ifindex()
    }

    /// Stops redirecting `queue` (its frames go to the kernel's stack).
    pub fn unmap_queue(&self, queue: u32) -> io::Result<()> {
        self.map.remove(queue)
    }

    pub fn program(&self) -> &XdpProgram {
        &self.program
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> XdpConfig {
        XdpConfig {
            frame_count: 64,
            rx_frames: 32,
            rx_ring_entries: 64,
            tx_ring_entries: 64,
            fill_ring_entries: 64,
            completion_ring_entries: 64,
            ..XdpConfig::default()
        }
    }

    #[test]
    fn uapi_structs_have_the_kernel_layout() {
        assert_eq!(core::mem::size_of::<XdpUmemReg>(), 32);
        assert_eq!(core::mem::size_of::<SockaddrXdp>(), 16);
        assert_eq!(core::mem::size_of::<XdpMmapOffsets>(), 128);
        assert_eq!(core::mem::size_of::<XdpStatistics>(), 48);
        assert_eq!(core::mem::offset_of!(XdpMmapOffsets, fill), 64);
    }

    #[test]
    fn ring_arithmetic_wraps_around_u32() {
        assert_eq!(ring_ready(5, 3, 8), Some(2));
        assert_eq!(ring_ready(2, u32::MAX - 1, 8), Some(4));
        assert_eq!(ring_free(2, u32::MAX - 1, 8), Some(4));
        assert_eq!(ring_free(u32::MAX, u32::MAX, 8), Some(8));
        assert_eq!(ring_free(7, u32::MAX, 8), Some(0));
        // Producer behind consumer, or more than a ring apart: corrupt.
        assert_eq!(ring_ready(3, 5, 8), None);
        assert_eq!(ring_free(20, 3, 8), None);
    }

    #[test]
    fn slots_wrap_with_the_index() {
        // A ring over a plain anonymous mapping: indices 0 and entries name the same slot.
        let ring = Ring {
            map: Mapping::anonymous(4096).expect("mmap"),
            producer_off: 0,
            consumer_off: 4,
            flags_off: 8,
            desc_off: 64,
            entries: 4,
            slot_bytes: XDP_DESC_BYTES,
            cursor: 0,
        };
        assert!(ring.write_desc(u32::MAX, 0x1000, 60));
        assert_eq!(ring.slot(u32::MAX), ring.slot(3));
        assert_eq!(ring.read_desc(3), Some((0x1000, 60)));
        assert_eq!(ring.slot(4), ring.slot(0));
        assert_eq!(ring.slot(0), 64);
    }

    #[test]
    fn descriptors_outside_the_umem_or_across_frames_are_refused() {
        let (fs, n) = (2048, 4);
        assert_eq!(
            frame_span(2048 + 256, 100, fs, n),
            Some(FrameSpan {
                frame: 1,
                offset: 256,
                len: 100
            })
        );
        assert_eq!(frame_span(3 * 2048, 2048, fs, n).map(|s| s.frame), Some(3));
        assert_eq!(frame_span(4 * 2048, 1, fs, n), None, "past the end");
        assert_eq!(
            frame_span(2048 + 256, 1793, fs, n),
            None,
            "into the next frame"
        );
        assert_eq!(frame_span(u64::MAX, u32::MAX, fs, n), None, "no overflow");
    }

    #[test]
    fn config_validation_rejects_each_broken_invariant() {
        let page = 4096;
        assert_eq!(small().validate(page), Ok(64 * 2048));
        assert_eq!(XdpConfig::default().validate(page), Ok(4096 * 2048));
        let cases = [
            (
                XdpConfig {
                    frame_size_bytes: 1024,
                    ..small()
                },
                XdpConfigError::FrameSize,
            ),
            (
                XdpConfig {
                    frame_size_bytes: 3000,
                    ..small()
                },
                XdpConfigError::FrameSize,
            ),
            (
                XdpConfig {
                    frame_size_bytes: 8192,
                    ..small()
                },
                XdpConfigError::FrameSize,
            ),
            (
                XdpConfig {
                    frame_count: 1,
                    rx_frames: 1,
                    ..small()
                },
                XdpConfigError::FrameCount,
            ),
            (
                XdpConfig {
                    rx_ring_entries: 100,
                    ..small()
                },
                XdpConfigError::RingEntries,
            ),
            (
                XdpConfig {
                    tx_ring_entries: 0,
                    ..small()
                },
                XdpConfigError::RingEntries,
            ),
            (
                XdpConfig {
                    completion_ring_entries: 1 << 21,
                    ..small()
                },
                XdpConfigError::RingEntries,
            ),
            (
                XdpConfig {
                    rx_frames: 0,
                    ..small()
                },
                XdpConfigError::RxFrames,
            ),
            (
                XdpConfig {
                    rx_frames: 64,
                    ..small()
                },
                XdpConfigError::RxFrames,
            ),
            (
                XdpConfig {
                    frame_count: 256,
                    rx_frames: 65,
                    ..small()
                },
                XdpConfigError::RxFrames,
            ),
        ];
        for (cfg, expected) in cases {
            assert_eq!(cfg.validate(page), Err(expected), "{cfg:?}");
        }
    }

    #[test]
    fn bad_config_is_rejected_before_any_system_call() {
        let cfg = XdpConfig {
            frame_size_bytes: 1000,
            ..small()
        };
        let err = XdpSocket::open_ifindex(1, 0, &cfg).expect_err("invalid config");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    /// A ring over anonymous memory laid out like the kernel's (indices on their own cache
    /// lines, then the slots), both indices and our cursor starting at `start`.
    fn fake_ring(entries: u32, slot_bytes: usize, start: u32) -> Ring {
        let off = XdpRingOffset {
            producer: 0,
            consumer: 64,
            flags: 128,
            desc: 192,
        };
        let len = 192 + entries as usize * slot_bytes;
        let word = |v: u64| v as usize;
        let ring = Ring {
            map: Mapping::anonymous(len).expect("mmap"),
            producer_off: word(off.producer),
            consumer_off: word(off.consumer),
            flags_off: word(off.flags),
            desc_off: word(off.desc),
            entries,
            slot_bytes,
            cursor: start,
        };
        ring.store(ring.producer_off, start);
        ring.store(ring.consumer_off, start);
        ring
    }

    /// A socket whose "kernel" is the test: rings and UMEM over anonymous memory, the fd
    /// /dev/null (never used: need_wakeup is on and the fake rings never ask for a wake-up).
    fn fake_socket(config: &XdpConfig) -> XdpSocket {
        fake_socket_at(config, 0)
    }

    fn fake_socket_at(config: &XdpConfig, start: u32) -> XdpSocket {
        let len = config.validate(4096).expect("valid config");
        let fd: OwnedFd = std::fs::File::open("/dev/null")
            .expect("open /dev/null")
            .into();
        let umem = Umem {
            map: Mapping::anonymous(len).expect("mmap"),
            frame_size: config.frame_size_bytes,
            state: vec![FrameState::User; config.frame_count as usize],
        };
        let rings = [
            fake_ring(config.rx_ring_entries, XDP_DESC_BYTES, start),
            fake_ring(config.tx_ring_entries, XDP_DESC_BYTES, start),
            fake_ring(config.fill_ring_entries, UMEM_ADDR_BYTES, start),
            fake_ring(config.completion_ring_entries, UMEM_ADDR_BYTES, start),
        ];
        XdpSocket::assemble(rings, fd, umem, config, false, (0, 0))
    }

    fn tiny() -> XdpConfig {
        XdpConfig {
            frame_count: 8,
            rx_frames: 4,
            rx_ring_entries: 8,
            tx_ring_entries: 8,
            fill_ring_entries: 4,
            completion_ring_entries: 8,
            need_wakeup: true,
            ..XdpConfig::default()
        }
    }

    /// The kernel consumes everything in a ring we produce (FILL, TX): returns the raw slots.
    fn kernel_consume(ring: &Ring) -> Vec<(u64, u32)> {
        let prod = ring.producer();
        let mut cons = ring.consumer();
        let mut out = Vec::new();
        while cons != prod {
            let s = ring.slot(cons);
            let addr = ring.map.read_u64(s).expect("slot");
            let len = if ring.slot_bytes == XDP_DESC_BYTES {
                ring.map.read_u32(s + 8).expect("slot")
            } else {
                0
            };
            out.push((addr, len));
            cons = cons.wrapping_add(1);
        }
        ring.store(ring.consumer_off, cons);
        out
    }

    /// The kernel produces `entries` into a ring we consume (RX, COMPLETION).
    fn kernel_produce(ring: &Ring, entries: &[(u64, u32)]) {
        let mut prod = ring.producer();
        for &(addr, len) in entries {
            let s = ring.slot(prod);
            assert!(ring.map.write_u64(s, addr));
            if ring.slot_bytes == XDP_DESC_BYTES {
                assert!(ring.map.write_u32(s + 8, len));
            }
            prod = prod.wrapping_add(1);
        }
        ring.store(ring.producer_off, prod);
    }

    #[test]
    fn hostile_rx_descriptors_are_counted_never_trusted() {
        let mut sock = fake_socket(&tiny());
        let lent = kernel_consume(&sock.fill);
        assert_eq!(lent, vec![(0, 0), (2048, 0), (4096, 0), (6144, 0)]);
        assert_eq!(sock.frame_states(), (4, 4, 0));
        // "Receive" 8 bytes into frame 1 behind the copy-mode headroom.
        assert!(sock.umem.map.write_u64(2048 + 256, 0x1122_3344_5566_7788));
        kernel_produce(
            &sock.rx,
            &[
                (2048 + 256, 8),        // valid
                (8 * 2048, 60),         // past the UMEM
                (4 * 2048, 60),         // frame 4 was never lent to FILL
                (3 * 2048 + 2000, 100), // runs into the next frame
                (2048 + 256, 8),        // frame 1 again: already handed back to us
            ],
        );
        let mut seen = Vec::new();
        let handed = sock.recv_batch(16, |f| seen.push(f.to_vec()));
        assert_eq!(handed, 1);
        assert_eq!(seen, vec![0x1122_3344_5566_7788u64.to_ne_bytes().to_vec()]);
        let c = sock.counters();
        assert_eq!((c.rx_frames, c.rx_invalid_desc), (1, 4), "{c:?}");
        assert_eq!(
            c.fill_ring_empty, 1,
            "the kernel had taken all four FILL entries"
        );
        // Frame 1 went back to FILL; every frame still has exactly one owner.
        assert_eq!(kernel_consume(&sock.fill), vec![(2048, 0)]);
        assert_eq!(sock.frame_states(), (4, 4, 0));
        // A producer index more than a ring ahead of us: nothing is read.
        sock.rx
            .store(sock.rx.producer_off, sock.rx.cursor.wrapping_add(100));
        assert_eq!(sock.recv_batch(16, |_| panic!("nothing to hand")), 0);
        assert_eq!(sock.counters().ring_index_invalid, 1);
    }

    #[test]
    fn hostile_completions_are_counted_never_trusted() {
        let mut sock = fake_socket(&tiny());
        assert_eq!(
            sock.send_batch(&[&b"first"[..], &b"second"[..]])
                .expect("queue"),
            2
        );
        let sent = kernel_consume(&sock.tx);
        assert_eq!(
            sent,
            vec![(4 * 2048, 5), (5 * 2048, 6)],
            "TX budget frames 4 and 5"
        );
        assert_eq!(sock.frame_states(), (2, 4, 2));
        kernel_produce(
            &sock.completion,
            &[
                (4 * 2048, 0),  // valid
                (4 * 2048, 0),  // duplicate
                (99 * 2048, 0), // outside the UMEM
                (0, 0),         // frame 0 is lent to FILL, not TX
            ],
        );
        assert_eq!(sock.poll_tx().expect("no kick needed"), 1);
        let c = sock.counters();
        assert_eq!((c.tx_completed, c.completion_invalid_addr), (1, 3), "{c:?}");
        assert_eq!(sock.tx_in_flight(), 1);
        kernel_produce(&sock.completion, &[(5 * 2048, 0)]);
        assert_eq!(sock.poll_tx().expect("no kick needed"), 1);
        assert_eq!(sock.frame_states(), (4, 4, 0));
    }

    #[test]
    fn send_batch_stops_at_the_transmit_budget_and_refuses_bad_lengths() {
        let mut sock = fake_socket(&tiny());
        let frames = vec![vec![0xabu8; 60]; 10];
        // Budget: 8 frames − 4 lent to FILL.
        assert_eq!(sock.send_batch(&frames).expect("queue"), 4);
        assert_eq!(sock.counters().tx_drop_no_frame, 1);
        assert_eq!(sock.tx_frames_available(), 0);
        let err = sock.send(&frames[0]).expect_err("no frame left");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let err = sock
            .send_batch(&[vec![1u8; 10], vec![0u8; 2049]])
            .expect_err("too long");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            sock.send(&[]).expect_err("empty").kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            sock.counters().tx_frames,
            4,
            "nothing queued by refused calls"
        );
        // The kernel sends and completes them: the budget is back.
        let sent = kernel_consume(&sock.tx);
        assert!(sent.iter().all(|&(_, len)| len == 60));
        kernel_produce(&sock.completion, &sent);
        sock.poll_tx().expect("no kick needed");
        assert_eq!(sock.tx_frames_available(), 4);
    }

    #[test]
    fn receive_and_transmit_keep_working_across_the_u32_index_wrap() {
        let mut sock = fake_socket_at(&tiny(), u32::MAX - 5);
        for round in 0..6u64 {
            // Receive: the kernel fills every lent frame and hands them all back.
            let lent = kernel_consume(&sock.fill);
            assert_eq!(
                lent.len(),
                4,
                "round {round}: FILL holds the four receive frames"
            );
            let rx: Vec<(u64, u32)> = lent.iter().map(|&(a, _)| (a + 256, 64)).collect();
            kernel_produce(&sock.rx, &rx);
            assert_eq!(sock.recv_batch(16, |f| assert_eq!(f.len(), 64)), 4);
            // Transmit: two frames out, completed.
            assert_eq!(sock.send_batch(&[[round as u8; 60]; 2]).expect("queue"), 2);
            let sent = kernel_consume(&sock.tx);
            kernel_produce(&sock.completion, &sent);
            assert_eq!(sock.poll_tx().expect("no kick needed"), 2);
        }
        assert!(
            sock.rx.cursor < 100,
            "the indices wrapped: {}",
            sock.rx.cursor
        );
        let c = sock.counters();
        assert_eq!((c.rx_frames, c.tx_completed), (24, 12), "{c:?}");
        assert_eq!(
            (
                c.rx_invalid_desc,
                c.completion_invalid_addr,
                c.ring_index_invalid
            ),
            (0, 0, 0)
        );
        assert_eq!(sock.frame_states(), (4, 4, 0));
    }

    #[test]
    fn sockets_and_ports_can_move_to_shard_threads() {
        fn is_send<T: Send>() {}
        is_send::<XdpSocket>();
        is_send::<XdpPort>();
        is_send::<XdpAttachment>();
    }

    fn test_umem(frames: u32) -> Umem {
        Umem {
            map: Mapping::anonymous(frames as usize * 2048).expect("mmap"),
            frame_size: 2048,
            state: vec![FrameState::User; frames as usize],
        }
    }

    #[test]
    fn umem_bytes_are_lent_only_while_the_frame_is_ours() {
        let mut umem = test_umem(2);
        assert!(umem.write(1, b"hello"));
        let span = umem.span(2048, 5).expect("in bounds");
        assert_eq!(umem.read(span), Some(&b"hello"[..]));
        assert!(umem.transition(1, FrameState::User, FrameState::Fill));
        assert_eq!(umem.read(span), None, "lent to the kernel");
        assert!(!umem.write(1, b"x"));
        assert!(
            !umem.transition(1, FrameState::Tx, FrameState::User),
            "wrong source state"
        );
        assert!(
            !umem.transition(7, FrameState::User, FrameState::Fill),
            "no such frame"
        );
        assert!(!umem.write(0, &[0u8; 2049]), "longer than a frame");
    }
}
