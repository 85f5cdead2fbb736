//! AF_PACKET sockets with memory-mapped receive rings (TPACKET_V2 or TPACKET_V3) and
//! `PACKET_FANOUT`.
//!
//! One socket per shard: all sockets of a port join one fanout group, so the kernel spreads the
//! interface's incoming frames over them (by its flow hash, CPU, queue mapping…), each socket
//! owning a receive ring. rsstack's NIC model re-steers with its own Toeplitz hash and RETA, so
//! the fanout only spreads the copying work.
//!
//! Two ring layouts ([`RingVersion`]), both read in place (no copy):
//!
//! - **TPACKET_V2**: a ring of fixed-size slots, one frame per slot. The kernel writes a frame
//!   into the next slot, marks that slot `TP_STATUS_USER` and wakes the reader at once; we visit
//!   it and give the slot back (`TP_STATUS_KERNEL`). A slot holds at most
//!   `frame_size_bytes` minus the kernel's header area, so slots that must take 64 KiB GSO
//!   super-frames whole are large and the ring holds few of them; a longer frame arrives cut
//!   short (`tp_snaplen < tp_len`, [`RxMeta::truncated`]).
//! - **TPACKET_V3**: a ring of blocks packed with frames of any size. The kernel hands a block
//!   over (`TP_STATUS_USER` in the block header) only when it is full or its retire timer
//!   (`retire_timeout_ms`, at least 1 ms) fires, so at low packet rates every frame waits up to
//!   that long; at high rates the blocks fill fast and the dense packing holds many more
//!   small frames per byte of ring than V2's slots.
//!
//! Transmit uses `send(2)` on the same socket, one frame per call (with `PACKET_QDISC_BYPASS`
//! when asked), or, when opened with `tx_block_count > 0`, a memory-mapped TPACKET_V2
//! transmit ring on a second, transmit-only socket (`tx.rs`): frames are copied into ring
//! slots and one `send(2)` hands the kernel every slot queued since the last one.
//!
//! All the `unsafe` of this module is in `MappedRing`: mapping, unmapping and bounds-checked
//! volatile access to the shared ring. Everything that interprets the kernel's headers is safe
//! code over those accessors and never trusts an offset it has not checked: a header that
//! points outside its slot or block is counted in [`RingErrors`] and its frame skipped.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{Ordering, fence};

use crate::sys::setsockopt;
use crate::vnet::{VNET_HDR_BYTES, VnetHdr};

mod tx;
pub use tx::{TX_DATA_OFFSET_BYTES, TxRefused, TxRingCounters};

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_VNET_HDR: libc::c_int = 15;
const TPACKET_V2: libc::c_int = 1;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
/// `tp_status` / block status bit: the slot or block belongs to user space.
pub const TP_STATUS_USER: u32 = 1;
/// `tp_status` bit: the transport checksum is not filled in yet (checksum offload on the
/// sending side of a local link, e.g. veth): the field holds only the pseudo-header sum.
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// `tp_status` bit: the kernel or the driver already validated the transport checksum.
pub const TP_STATUS_CSUM_VALID: u32 = 1 << 7;
/// Ask the kernel to fill `tp_rxhash` (its flow hash) in every frame header.
const TP_FT_REQ_FILL_RXHASH: u32 = 1;

// Offsets inside `struct tpacket_block_desc` (linux/if_packet.h): version, offset_to_priv, then
// `struct tpacket_hdr_v1`.
const BLOCK_STATUS_OFF: usize = 8;
const BLOCK_NUM_PKTS_OFF: usize = 12;
const BLOCK_FIRST_PKT_OFF: usize = 16;
// Offsets inside `struct tpacket3_hdr`.
const PKT_NEXT_OFF: usize = 0;
const PKT_SEC_OFF: usize = 4;
const PKT_NSEC_OFF: usize = 8;
const PKT_SNAPLEN_OFF: usize = 12;
const PKT_LEN_OFF: usize = 16;
const PKT_STATUS_OFF: usize = 20;
const PKT_MAC_OFF: usize = 24;
const PKT_RXHASH_OFF: usize = 28;
const PKT_HDR_BYTES: usize = 48;
// Offsets inside `struct tpacket2_hdr` (the head of every V2 slot).
const V2_STATUS_OFF: usize = 0;
const V2_LEN_OFF: usize = 4;
const V2_SNAPLEN_OFF: usize = 8;
const V2_MAC_OFF: usize = 12;
const V2_SEC_OFF: usize = 16;
const V2_NSEC_OFF: usize = 20;
/// `sizeof(struct tpacket2_hdr)`: a slot's frame starts at or after this offset.
const V2_HDR_BYTES: usize = 32;
/// Bytes the kernel writes before the Ethernet header in a V2 slot (`tp_mac`) for a frame with
/// a 14-byte link header and no `PACKET_RESERVE`: `TPACKET_ALIGN(TPACKET2_HDRLEN + 16) − 14`,
/// with `TPACKET2_HDRLEN` = 32 + `sizeof(struct sockaddr_ll)` = 52.
pub const V2_FRAME_OFFSET_BYTES: u32 = 66;
/// `sizeof(struct tpacket_stats)` (V1/V2: packets, drops).
const STATS_V2_BYTES: usize = 8;
/// `sizeof(struct tpacket_stats_v3)` (packets, drops, queue freezes).
const STATS_V3_BYTES: usize = 12;

/// The receive ring layout of a socket (`PACKET_VERSION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingVersion {
    /// TPACKET_V2: fixed-size slots, one frame each, handed over as soon as written.
    V2,
    /// TPACKET_V3: blocks packed with frames, handed over when full or retired by a timer.
    V3,
}

impl RingVersion {
    fn tpacket_version(self) -> libc::c_int {
        match self {
            RingVersion::V2 => TPACKET_V2,
            RingVersion::V3 => TPACKET_V3,
        }
    }

    /// `tpacket_v2` or `tpacket_v3`.
    pub fn name(self) -> &'static str {
        match self {
            RingVersion::V2 => "tpacket_v2",
            RingVersion::V3 => "tpacket_v3",
        }
    }
}

/// How the kernel spreads frames over the sockets of one fanout group (`PACKET_FANOUT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanoutMode {
    /// By the kernel's flow hash (`PACKET_FANOUT_HASH`): a flow stays on one socket.
    Hash,
    /// Round-robin (`PACKET_FANOUT_LB`).
    RoundRobin,
    /// By the CPU that received the frame (`PACKET_FANOUT_CPU`).
    Cpu,
    /// By the NIC receive queue recorded in the frame (`PACKET_FANOUT_QM`).
    QueueMapping,
}

impl FanoutMode {
    fn bits(self) -> u32 {
        match self {
            FanoutMode::Hash => 0,
            FanoutMode::RoundRobin => 1,
            FanoutMode::Cpu => 2,
            FanoutMode::QueueMapping => 5,
        }
    }
}

/// Ring geometry and socket options.
///
/// Invariants checked by [`AfPacketSocket::open`] (see `AfPacketConfig::validate`):
/// `block_size_bytes` is a non-zero multiple of the page size; `frame_size_bytes` is a multiple
/// of 16 (`TPACKET_ALIGNMENT`), at least 128 and at most `block_size_bytes`; `block_count` ≥ 1;
/// the ring (`block_size_bytes × block_count`) and its frame count fit the kernel's types.
/// With [`RingVersion::V3`] the block size is also a multiple of the frame size. A transmit
/// ring (`tx_block_count > 0`, always TPACKET_V2, on a socket of its own) has the receive
/// ring's block and frame sizes, and its slot count fits a u32 too.
///
/// What the sizes mean per version:
///
/// - V2: every block holds `block_size_bytes / frame_size_bytes` slots (the rest of the block
///   is unused) and every slot one frame of at most `frame_size_bytes −`
///   [`V2_FRAME_OFFSET_BYTES`] bytes; `retire_timeout_ms` is ignored.
/// - V3: a frame may take any length up to nearly a whole block; `frame_size_bytes` only
///   enters the kernel's ring accounting.
#[derive(Debug, Clone, Copy)]
pub struct AfPacketConfig {
    /// The receive ring layout.
    pub ring: RingVersion,
    pub block_size_bytes: u32,
    pub block_count: u32,
    pub frame_size_bytes: u32,
    /// V3 only: a block is handed to us after at most this long even if not full.
    pub retire_timeout_ms: u32,
    /// Join fanout group `(id, mode)`; every socket of a port uses the same id.
    pub fanout: Option<(u16, FanoutMode)>,
    /// Transmit straight to the driver, skipping the qdisc layer (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
    /// Do not show frames this host transmits on the interface (`PACKET_IGNORE_OUTGOING`).
    pub ignore_outgoing: bool,
    /// A virtio-net header beside every frame (`PACKET_VNET_HDR`, see [`crate::vnet`]): in the
    /// ring in front of each received frame ([`RxMeta::vnet`]), and in front of each frame
    /// sent ([`AfPacketSocket::send_vnet`]), so frames carry GSO and checksum requests.
    pub vnet_hdr: bool,
    /// Blocks of a TPACKET_V2 transmit ring (`PACKET_TX_RING` on a transmit-only socket),
    /// each of `block_size_bytes` holding `block_size_bytes / frame_size_bytes` slots of one
    /// frame of at most `frame_size_bytes −` [`TX_DATA_OFFSET_BYTES`] bytes; 0: no ring, every
    /// frame goes out by its own `send(2)`.
    pub tx_block_count: u32,
}

impl Default for AfPacketConfig {
    /// A TPACKET_V3 ring of 16 blocks of 256 KiB, retired after 1 ms.
    fn default() -> Self {
        AfPacketConfig {
            ring: RingVersion::V3,
            block_size_bytes: 1 << 18,
            block_count: 16,
            frame_size_bytes: 2048,
            retire_timeout_ms: 1,
            fanout: None,
            qdisc_bypass: false,
            ignore_outgoing: true,
            vnet_hdr: false,
            tx_block_count: 0,
        }
    }
}

/// A validated ring layout: where every block and (V2) slot lives in the mapping.
///
/// Invariants: `block_size ≥ frame_size ≥ 128`, `frames_per_block = block_size / frame_size
/// ≥ 1`, and neither `block_size × block_count` (the receive mapping's length) nor
/// `block_size × tx_block_count` (the transmit ring's) overflows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geometry {
    version: RingVersion,
    block_size: usize,
    block_count: usize,
    frame_size: usize,
    frames_per_block: usize,
    tx_block_count: usize,
}

impl Geometry {
    /// Bytes of the receive ring.
    fn ring_bytes(&self) -> usize {
        self.block_size * self.block_count
    }

    /// Bytes of the transmit ring (0 without one).
    fn tx_ring_bytes(&self) -> usize {
        self.block_size * self.tx_block_count
    }

    /// Slots of the transmit ring (0 without one).
    fn tx_slot_count(&self) -> usize {
        self.frames_per_block * self.tx_block_count
    }

    /// V2 slots in the ring.
    fn slot_count(&self) -> usize {
        self.frames_per_block * self.block_count
    }

    /// Where V2 slot `slot` (< `slot_count()`) starts in the mapping: slots never straddle
    /// blocks, so a block's tail beyond its last whole slot is unused.
    fn slot_offset(&self, slot: usize) -> usize {
        (slot / self.frames_per_block) * self.block_size
            + (slot % self.frames_per_block) * self.frame_size
    }
}

impl AfPacketConfig {
    /// Checks the invariants listed on the type for a system with `page_bytes` pages.
    fn validate(&self, page_bytes: usize) -> io::Result<Geometry> {
        let bad = |why: &str| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} ring geometry: {why}", self.ring.name()),
            ))
        };
        let block_size = self.block_size_bytes as usize;
        let frame_size = self.frame_size_bytes as usize;
        let block_count = self.block_count as usize;
        if block_count == 0 {
            return bad("at least one block");
        }
        if block_size == 0 || page_bytes == 0 || block_size % page_bytes != 0 {
            return bad("the block size must be a multiple of the page size");
        }
        if frame_size < 128 || frame_size % 16 != 0 || frame_size > block_size {
            return bad(
                "the frame size must be a multiple of 16, at least 128 and at most a block",
            );
        }
        if self.ring == RingVersion::V3 && block_size % frame_size != 0 {
            return bad("the block size must be a multiple of the frame size");
        }
        let tx_block_count = self.tx_block_count as usize;
        let frames_per_block = block_size / frame_size;
        let slots_fit = |blocks: usize| {
            frames_per_block
                .checked_mul(blocks)
                .is_some_and(|n| u32::try_from(n).is_ok())
        };
        let fits = block_size.checked_mul(block_count).is_some()
            && block_size.checked_mul(tx_block_count).is_some()
            && slots_fit(block_count)
            && slots_fit(tx_block_count);
        if !fits {
            return bad("the ring is too large");
        }
        Ok(Geometry {
            version: self.ring,
            block_size,
            block_count,
            frame_size,
            frames_per_block,
            tx_block_count,
        })
    }
}

/// Metadata the kernel records with each received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxMeta {
    /// Kernel receive timestamp in nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// Length on the wire (the frame passed to the callback may be shorter if cut at the frame
    /// size).
    pub wire_len: u32,
    /// The kernel's flow hash (not rsstack's Toeplitz hash); 0 on a V2 ring, whose frame
    /// header has no hash field.
    pub kernel_rxhash: u32,
    /// The frame header's `tp_status` word (`TP_STATUS_*` bits).
    pub status: u32,
    /// The virtio-net header the kernel wrote in front of the frame (a socket opened with
    /// [`AfPacketConfig::vnet_hdr`]): coalesced (GSO) frames, partial or verified checksums.
    pub vnet: Option<VnetHdr>,
}

impl RxMeta {
    /// The transport checksum field holds only the pseudo-header sum
    /// ([`TP_STATUS_CSUMNOTREADY`]): the receiver must complete it before verifying.
    pub fn checksum_not_ready(&self) -> bool {
        self.status & TP_STATUS_CSUMNOTREADY != 0
    }

    /// The frame handed over is shorter than the frame on the wire (it did not fit the ring's
    /// frame slot, e.g. a GSO super-frame): it must not be processed as if it were whole.
    pub fn truncated(&self, captured_bytes: usize) -> bool {
        (captured_bytes as u64) < u64::from(self.wire_len)
    }
}

/// Kernel counters of one socket since the previous read (`PACKET_STATISTICS` resets them):
/// `struct tpacket_stats` on a V2 ring, `struct tpacket_stats_v3` on a V3 ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames the kernel meant for this socket, the dropped ones included.
    pub packets: u32,
    /// Frames dropped because the ring had no free slot or block (or the kernel could not
    /// queue them).
    pub drops: u32,
    /// V3 only (0 on V2): times the kernel found every block handed to user space and froze
    /// the ring until one came back.
    pub queue_freezes: u32,
}

/// Ring entries that failed our checks (a kernel bug or a corrupted ring); counted, never
/// trusted, and the frames they describe are not handed on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingErrors {
    /// V3 blocks handed over with frames but a first-frame offset outside the block: the
    /// whole block was given back unread (how many frames it held is not known).
    pub bad_block_header: u64,
    /// Frame headers (V3) or slots (V2) whose frame lay outside its block or slot, or over its
    /// own header: that frame was skipped (V3: with the rest of its block).
    pub bad_frame_header: u64,
}

/// A shared memory mapping of a packet ring.
///
/// Invariant: `ptr` is the start of a live mapping of exactly `len` bytes (`MAP_SHARED` with the
/// kernel; private anonymous memory in unit tests), unmapped only in `drop`. All access goes through the bounds-checked accessors below.
struct MappedRing {
    ptr: *mut u8,
    len: usize,
}

impl MappedRing {
    /// The socket's ring, shared with the kernel.
    fn map(fd: RawFd, len: usize) -> io::Result<Self> {
        Self::mmap(len, libc::MAP_SHARED, fd)
    }

    /// A private anonymous mapping standing in for a kernel ring in unit tests.
    #[cfg(test)]
    fn anonymous(len: usize) -> io::Result<Self> {
        Self::mmap(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
    }

    fn mmap(len: usize, flags: libc::c_int, fd: RawFd) -> io::Result<Self> {
        // SAFETY: a fresh mapping (the socket's ring, whose `len` the kernel validated when
        // PACKET_RX_RING was set and which we pass unchanged, or anonymous memory); no existing
        // memory is aliased.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedRing {
            ptr: ptr.cast(),
            len,
        })
    }

    fn in_bounds(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// Volatile read of a native-endian u32 the kernel may change concurrently.
    fn read_u32(&self, off: usize) -> Option<u32> {
        if !self.in_bounds(off, 4) || off % 4 != 0 {
            return None;
        }
        // SAFETY: in bounds and 4-aligned (the mapping is page-aligned) per the check above.
        Some(unsafe { core::ptr::read_volatile(self.ptr.add(off).cast::<u32>()) })
    }

    fn read_u16(&self, off: usize) -> Option<u16> {
        if !self.in_bounds(off, 2) || off % 2 != 0 {
            return None;
        }
        // SAFETY: in bounds and 2-aligned per the check above.
        Some(unsafe { core::ptr::read_volatile(self.ptr.add(off).cast::<u16>()) })
    }

    fn write_u32(&self, off: usize, value: u32) -> bool {
        if !self.in_bounds(off, 4) || off % 4 != 0 {
            return false;
        }
        // SAFETY: in bounds and aligned; the word is a status field the protocol lets user
        // space write once it owns the block or slot.
        unsafe { core::ptr::write_volatile(self.ptr.add(off).cast::<u32>(), value) };
        true
    }

    /// Test helper playing the kernel: writes a u16 header field.
    #[cfg(test)]
    fn write_u16(&self, off: usize, value: u16) -> bool {
        if !self.in_bounds(off, 2) || off % 2 != 0 {
            return false;
        }
        // SAFETY: in bounds and 2-aligned per the check above; test mappings are private.
        unsafe { core::ptr::write_volatile(self.ptr.add(off).cast::<u16>(), value) };
        true
    }

    /// Copies `data` to `[off, off + data.len())`: a frame into a transmit slot user space
    /// owns (`TP_STATUS_AVAILABLE`), or, in unit tests, the kernel's writes.
    fn write_bytes(&self, off: usize, data: &[u8]) -> bool {
        if !self.in_bounds(off, data.len()) {
            return false;
        }
        // SAFETY: the destination is in bounds per the check above; `copy` allows overlap.
        // The transmit ring's mapping is never handed out as a slice outside this module's
        // tests, so `data` aliases no live reference to it; the kernel does not read a
        // transmit slot until its status says `TP_STATUS_SEND_REQUEST`, written after this
        // copy.
        unsafe { core::ptr::copy(data.as_ptr(), self.ptr.add(off), data.len()) };
        true
    }

    /// The bytes `[off, off + len)`, valid while the block or slot that holds them is ours.
    fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        if !self.in_bounds(off, len) {
            return None;
        }
        // SAFETY: in bounds; the caller only asks for frames inside a block (V3) or slot (V2)
        // whose status is TP_STATUS_USER, which the kernel does not write until we hand it back.
        Some(unsafe { core::slice::from_raw_parts(self.ptr.add(off), len) })
    }
}

impl Drop for MappedRing {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe our live mapping, unmapped exactly once here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// SAFETY: the mapping is owned by one socket object; moving it to another thread moves the only
// handle to it.
unsafe impl Send for MappedRing {}

/// An AF_PACKET socket bound to one interface with a TPACKET_V2 or TPACKET_V3 receive ring.
pub struct AfPacketSocket {
    // Field order matters: the ring is unmapped before the socket closes.
    ring: MappedRing,
    fd: OwnedFd,
    geometry: Geometry,
    /// V3: the block we are reading, and how far into it.
    block: usize,
    next_pkt_off: Option<usize>,
    pkts_left: u32,
    /// V2: the next slot to read (< `geometry.slot_count()`). The kernel fills slots in ring
    /// order and never skips one (it drops when the next slot is still ours), so this cursor
    /// follows its write position.
    slot: usize,
    errors: RingErrors,
    /// Opened with `PACKET_VNET_HDR`.
    vnet: bool,
    /// The transmit ring, its socket, cursor and counters (none: `send(2)` per frame).
    tx: tx::TxRing,
}

impl core::fmt::Debug for AfPacketSocket {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AfPacketSocket")
            .field("fd", &self.fd)
            .field("ring", &self.geometry.version)
            .field("blocks", &self.geometry.block_count)
            .field("block_size", &self.geometry.block_size)
            .field("frame_size", &self.geometry.frame_size)
            .finish()
    }
}

/// The kernel's `struct tpacket_req` (TPACKET_V1/V2).
#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

/// The kernel's `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// The index of interface `name`.
pub fn interface_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the whole call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(index)
    }
}

impl AfPacketSocket {
    /// Opens a socket on interface `ifname` with the ring `config` describes. Needs
    /// `CAP_NET_RAW`.
    pub fn open(ifname: &str, config: &AfPacketConfig) -> io::Result<Self> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let geometry = config.validate(page)?;
        let ifindex = interface_index(ifname)?;
        // SAFETY: plain socket(2); ownership of the fd passes to `OwnedFd` right below.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_ALL.to_be()),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt(
            raw,
            SOL_PACKET,
            PACKET_VERSION,
            &config.ring.tpacket_version(),
        )?;
        if config.ignore_outgoing {
            setsockopt(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int)?;
        }
        if config.qdisc_bypass {
            setsockopt(raw, SOL_PACKET, PACKET_QDISC_BYPASS, &1 as &libc::c_int)?;
        }
        // Before the ring exists (the kernel refuses it after, EBUSY).
        if config.vnet_hdr {
            setsockopt(raw, SOL_PACKET, PACKET_VNET_HDR, &1 as &libc::c_int)?;
        }
        // `validate` checked that the frame count fits a u32.
        let frame_nr = geometry.slot_count() as u32;
        match config.ring {
            RingVersion::V2 => {
                let req = TpacketReq {
                    block_size: config.block_size_bytes,
                    block_nr: config.block_count,
                    frame_size: config.frame_size_bytes,
                    frame_nr,
                };
                setsockopt(raw, SOL_PACKET, PACKET_RX_RING, &req)?;
            }
            RingVersion::V3 => {
                let req = TpacketReq3 {
                    block_size: config.block_size_bytes,
                    block_nr: config.block_count,
                    frame_size: config.frame_size_bytes,
                    frame_nr,
                    retire_blk_tov: config.retire_timeout_ms,
                    sizeof_priv: 0,
                    feature_req_word: TP_FT_REQ_FILL_RXHASH,
                };
                setsockopt(raw, SOL_PACKET, PACKET_RX_RING, &req)?;
            }
        }
        let ring = MappedRing::map(raw, geometry.ring_bytes())?;

        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ETH_P_ALL.to_be();
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a live sockaddr_ll and we pass its exact size.
        let rc = unsafe {
            libc::bind(
                raw,
                (&addr as *const libc::sockaddr_ll).cast(),
                core::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // Fanout is joined after bind, as packet(7) requires.
        if let Some((group, mode)) = config.fanout {
            let arg: u32 = u32::from(group) | (mode.bits() << 16);
            setsockopt(raw, SOL_PACKET, PACKET_FANOUT, &arg)?;
        }
        let tx = if geometry.tx_block_count > 0 {
            tx::TxRing::open(ifindex, config, &geometry)?
        } else {
            tx::TxRing::none()
        };
        let mut sock = Self::assemble(ring, fd, geometry, tx);
        sock.vnet = config.vnet_hdr;
        Ok(sock)
    }

    /// True when frames carry a virtio-net header (use [`AfPacketSocket::send_vnet`]).
    pub fn has_vnet_hdr(&self) -> bool {
        self.vnet
    }

    /// The virtio-net header in front of a received frame at ring offset `frame_at`, whose
    /// slot or block payload starts at `floor` (the header must lie after it).
    fn vnet_before(&self, frame_at: usize, floor: usize) -> Option<Option<VnetHdr>> {
        if !self.vnet {
            return Some(None);
        }
        let at = frame_at
            .checked_sub(VNET_HDR_BYTES)
            .filter(|&a| a >= floor)?;
        let b = self.ring.bytes(at, VNET_HDR_BYTES)?;
        let b: &[u8; VNET_HDR_BYTES] = b.try_into().ok()?;
        Some(Some(VnetHdr::decode(b)))
    }

    /// A socket over `ring` (of `geometry.ring_bytes()` bytes) with its cursors at the start.
    fn assemble(ring: MappedRing, fd: OwnedFd, geometry: Geometry, tx: tx::TxRing) -> Self {
        AfPacketSocket {
            vnet: false,
            tx,
            ring,
            fd,
            geometry,
            block: 0,
            next_pkt_off: None,
            pkts_left: 0,
            slot: 0,
            errors: RingErrors::default(),
        }
    }

    /// The ring layout this socket reads.
    pub fn ring_version(&self) -> RingVersion {
        self.geometry.version
    }

    /// Hands up to `max_frames` received frames to `visit`, in arrival order, without copying;
    /// returns how many it handed. A V2 slot goes back to the kernel right after its frame was
    /// visited, a V3 block as soon as all its frames have been. Returns 0 when nothing is
    /// waiting.
    pub fn recv_batch(&mut self, max_frames: usize, visit: impl FnMut(&[u8], RxMeta)) -> usize {
        match self.geometry.version {
            RingVersion::V2 => self.recv_slots(max_frames, visit),
            RingVersion::V3 => self.recv_blocks(max_frames, visit),
        }
    }

    /// [`Self::recv_batch`] over a V2 ring: one frame per slot.
    fn recv_slots(&mut self, max_frames: usize, mut visit: impl FnMut(&[u8], RxMeta)) -> usize {
        let mut handed = 0;
        while handed < max_frames {
            let off = self.geometry.slot_offset(self.slot);
            let Some(status) = self.ring.read_u32(off + V2_STATUS_OFF) else {
                break;
            };
            if status & TP_STATUS_USER == 0 {
                break;
            }
            // Read the slot only after seeing its status (pairs with the kernel's write
            // barrier before it sets TP_STATUS_USER).
            fence(Ordering::Acquire);
            match self.slot_frame(off, status) {
                Some((frame_off, snaplen, meta)) => {
                    if let Some(bytes) = self.ring.bytes(off + frame_off, snaplen) {
                        visit(bytes, meta);
                        handed += 1;
                    } else {
                        self.errors.bad_frame_header += 1;
                    }
                }
                None => self.errors.bad_frame_header += 1,
            }
            self.release_slot(off);
        }
        handed
    }

    /// Parses the V2 header of the slot at ring offset `off` whose status word is `status`:
    /// (frame offset in the slot, captured length, metadata). `None` when the frame would
    /// overlap the header or run past the slot.
    fn slot_frame(&self, off: usize, status: u32) -> Option<(usize, usize, RxMeta)> {
        let wire_len = self.ring.read_u32(off + V2_LEN_OFF)?;
        let snaplen = self.ring.read_u32(off + V2_SNAPLEN_OFF)? as usize;
        let mac = usize::from(self.ring.read_u16(off + V2_MAC_OFF)?);
        let sec = self.ring.read_u32(off + V2_SEC_OFF)?;
        let nsec = self.ring.read_u32(off + V2_NSEC_OFF)?;
        if mac < V2_HDR_BYTES || mac.checked_add(snaplen)? > self.geometry.frame_size {
            return None;
        }
        let meta = RxMeta {
            timestamp_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
            wire_len,
            kernel_rxhash: 0,
            status,
            vnet: self.vnet_before(off + mac, off + V2_HDR_BYTES)?,
        };
        Some((mac, snaplen, meta))
    }

    /// Gives the V2 slot at ring offset `off` (the cursor's) back and moves to the next.
    fn release_slot(&mut self, off: usize) {
        // Everything we read from the slot happens before the kernel may reuse it.
        fence(Ordering::Release);
        self.ring.write_u32(off + V2_STATUS_OFF, TP_STATUS_KERNEL);
        self.slot = (self.slot + 1) % self.geometry.slot_count();
    }

    /// [`Self::recv_batch`] over a V3 ring: blocks of frames.
    fn recv_blocks(&mut self, max_frames: usize, mut visit: impl FnMut(&[u8], RxMeta)) -> usize {
        let block_size = self.geometry.block_size;
        let mut handed = 0;
        while handed < max_frames {
            let base = self.block * block_size;
            if self.next_pkt_off.is_none() {
                // Is the current block ours yet?
                let Some(status) = self.ring.read_u32(base + BLOCK_STATUS_OFF) else {
                    break;
                };
                if status & TP_STATUS_USER == 0 {
                    break;
                }
                // Read the block's contents only after seeing its status (pairs with the
                // kernel's write barrier before it sets TP_STATUS_USER).
                fence(Ordering::Acquire);
                let pkts = self.ring.read_u32(base + BLOCK_NUM_PKTS_OFF).unwrap_or(0);
                let first = self.ring.read_u32(base + BLOCK_FIRST_PKT_OFF).unwrap_or(0) as usize;
                if pkts == 0 || first == 0 || first >= block_size {
                    if pkts != 0 {
                        self.errors.bad_block_header += 1;
                    }
                    self.release_block();
                    continue;
                }
                self.pkts_left = pkts;
                self.next_pkt_off = Some(first);
            }
            let Some(off) = self.next_pkt_off else { break };
            match self.frame_at(base, off) {
                Some((frame_off, snaplen, meta, next)) => {
                    if let Some(bytes) = self.ring.bytes(base + frame_off, snaplen) {
                        visit(bytes, meta);
                        handed += 1;
                    } else {
                        self.errors.bad_frame_header += 1;
                    }
                    self.pkts_left -= 1;
                    if self.pkts_left == 0 || next == 0 {
                        self.release_block();
                    } else {
                        self.next_pkt_off = Some(off + next);
                    }
                }
                None => {
                    // A header we cannot trust: give up on the rest of this block.
                    self.errors.bad_frame_header += 1;
                    self.release_block();
                }
            }
        }
        handed
    }

    /// Parses the V3 frame header at block offset `off`: (frame offset in block, captured
    /// length, metadata, offset to the next header). `None` when any field points outside the
    /// block or the frame would overlap its header.
    fn frame_at(&self, base: usize, off: usize) -> Option<(usize, usize, RxMeta, usize)> {
        let block_size = self.geometry.block_size;
        if off.checked_add(PKT_HDR_BYTES)? > block_size {
            return None;
        }
        let h = base + off;
        let next = self.ring.read_u32(h + PKT_NEXT_OFF)? as usize;
        let sec = self.ring.read_u32(h + PKT_SEC_OFF)?;
        let nsec = self.ring.read_u32(h + PKT_NSEC_OFF)?;
        let snaplen = self.ring.read_u32(h + PKT_SNAPLEN_OFF)? as usize;
        let wire_len = self.ring.read_u32(h + PKT_LEN_OFF)?;
        let status = self.ring.read_u32(h + PKT_STATUS_OFF)?;
        let mac = usize::from(self.ring.read_u16(h + PKT_MAC_OFF)?);
        let rxhash = self.ring.read_u32(h + PKT_RXHASH_OFF)?;
        if mac < PKT_HDR_BYTES {
            return None;
        }
        let frame_off = off.checked_add(mac)?;
        if frame_off.checked_add(snaplen)? > block_size || off.checked_add(next)? > block_size {
            return None;
        }
        let meta = RxMeta {
            timestamp_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
            wire_len,
            kernel_rxhash: rxhash,
            status,
            vnet: self.vnet_before(base + frame_off, h + PKT_HDR_BYTES)?,
        };
        Some((frame_off, snaplen, meta, next))
    }

    fn release_block(&mut self) {
        let base = self.block * self.geometry.block_size;
        // Everything we read from the block happens before the kernel may reuse it.
        fence(Ordering::Release);
        self.ring
            .write_u32(base + BLOCK_STATUS_OFF, TP_STATUS_KERNEL);
        self.block = (self.block + 1) % self.geometry.block_count;
        self.next_pkt_off = None;
        self.pkts_left = 0;
    }

    /// Sends one whole Ethernet frame behind the virtio-net header `hdr` (one `writev`: the
    /// kernel segments or checksums as it asks); `WouldBlock` when the socket's send buffer is
    /// full. Returns the frame bytes sent. Only for a socket opened with
    /// [`AfPacketConfig::vnet_hdr`].
    pub fn send_vnet(&self, hdr: &VnetHdr, frame: &[u8]) -> io::Result<usize> {
        let h = hdr.encode();
        let iov = [
            libc::iovec {
                iov_base: h.as_ptr() as *mut libc::c_void,
                iov_len: h.len(),
            },
            libc::iovec {
                iov_base: frame.as_ptr() as *mut libc::c_void,
                iov_len: frame.len(),
            },
        ];
        // SAFETY: both iovecs describe valid, readable regions alive for the whole call;
        // writev only reads through them (the `*mut` is the C signature's).
        let n = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok((n as usize).saturating_sub(VNET_HDR_BYTES))
        }
    }

    /// Sends one whole Ethernet frame; `WouldBlock` when the socket's send buffer is full.
    /// On a socket with a virtio-net header, behind an empty one ([`VnetHdr::NONE`]).
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        if self.vnet {
            return self.send_vnet(&VnetHdr::NONE, frame);
        }
        // SAFETY: `frame` is a valid readable region of `frame.len()` bytes for the whole call.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// The kernel's counters since the last call (reading resets them). The kernel answers
    /// with `struct tpacket_stats` (2 × u32) on a V2 ring and `struct tpacket_stats_v3`
    /// (3 × u32) on a V3 ring; an answer of any other length is an `InvalidData` error.
    pub fn take_stats(&self) -> io::Result<PacketStats> {
        let fd = self.fd.as_raw_fd();
        let check = |len: usize, want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("PACKET_STATISTICS answered {len} bytes, expected {want}"),
                ))
            }
        };
        match self.geometry.version {
            RingVersion::V2 => {
                let (raw, len) =
                    crate::sys::getsockopt::<[u32; 2]>(fd, SOL_PACKET, PACKET_STATISTICS)?;
                check(len, STATS_V2_BYTES)?;
                Ok(PacketStats {
                    packets: raw[0],
                    drops: raw[1],
                    queue_freezes: 0,
                })
            }
            RingVersion::V3 => {
                let (raw, len) =
                    crate::sys::getsockopt::<[u32; 3]>(fd, SOL_PACKET, PACKET_STATISTICS)?;
                check(len, STATS_V3_BYTES)?;
                Ok(PacketStats {
                    packets: raw[0],
                    drops: raw[1],
                    queue_freezes: raw[2],
                })
            }
        }
    }

    /// Ring entries that failed our checks (should stay zero).
    pub fn ring_errors(&self) -> RingErrors {
        self.errors
    }
}

impl AsFd for AfPacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests;
