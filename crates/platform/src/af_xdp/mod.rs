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

mod config;
mod shared;
#[cfg(test)]
mod tests;

pub use config::{XdpBindMode, XdpConfig, XdpConfigError, XdpCounters, XdpStatistics};
use shared::*;
pub use shared::{FrameSpan, FrameState, frame_span, ring_free, ring_ready};

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
