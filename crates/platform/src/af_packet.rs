//! AF_PACKET sockets with TPACKET_V3 memory-mapped receive rings and `PACKET_FANOUT`.
//!
//! One socket per shard: all sockets of a port join one fanout group, so the kernel spreads the
//! interface's incoming frames over them (by its flow hash, CPU, queue mapping…), each socket
//! owning a ring of blocks the kernel fills and hands over whole. rsstack's NIC model re-steers
//! with its own Toeplitz hash and RETA, so the fanout only spreads the copying work.
//!
//! Receive: the kernel fills a block with frames, marks it `TP_STATUS_USER`, and moves on; we
//! walk the block's frames in place (no copy), then give the block back (`TP_STATUS_KERNEL`).
//! A block is retired early after `retire_timeout_ms` so a quiet link still delivers promptly.
//! Transmit uses `send(2)` on the same socket (with `PACKET_QDISC_BYPASS` when asked).
//!
//! All the `unsafe` of this module is in `MappedRing`: mapping, unmapping and bounds-checked
//! volatile access to the shared ring. Everything that interprets the kernel's headers is safe
//! code over those accessors and never trusts an offset it has not checked.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{Ordering, fence};

use crate::sys::setsockopt;

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
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
/// Invariants checked by [`AfPacketSocket::open`]: `block_size_bytes` is a multiple of the page
/// size and of `frame_size_bytes`, which is a multiple of 16 (`TPACKET_ALIGNMENT`) and at least
/// 128; `block_count` ≥ 1.
#[derive(Debug, Clone, Copy)]
pub struct AfPacketConfig {
    pub block_size_bytes: u32,
    pub block_count: u32,
    pub frame_size_bytes: u32,
    /// A block is handed to us after at most this long even if not full.
    pub retire_timeout_ms: u32,
    /// Join fanout group `(id, mode)`; every socket of a port uses the same id.
    pub fanout: Option<(u16, FanoutMode)>,
    /// Transmit straight to the driver, skipping the qdisc layer (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
    /// Do not show frames this host transmits on the interface (`PACKET_IGNORE_OUTGOING`).
    pub ignore_outgoing: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            block_size_bytes: 1 << 18,
            block_count: 16,
            frame_size_bytes: 2048,
            retire_timeout_ms: 1,
            fanout: None,
            qdisc_bypass: false,
            ignore_outgoing: true,
        }
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
    /// The kernel's flow hash (not rsstack's Toeplitz hash).
    pub kernel_rxhash: u32,
    /// The frame header's `tp_status` word (`TP_STATUS_*` bits).
    pub status: u32,
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

/// Kernel counters of one socket since the previous read (`PACKET_STATISTICS` resets them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketStats {
    pub packets: u32,
    pub drops: u32,
    pub queue_freezes: u32,
}

/// Frames that did not fit the checks on the shared ring (a kernel bug or a corrupted ring);
/// counted, never trusted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingErrors {
    pub bad_block_header: u64,
    pub bad_frame_header: u64,
}

/// A shared memory mapping of a packet ring.
///
/// Invariant: `ptr` is the start of a live `MAP_SHARED` mapping of exactly `len` bytes, unmapped
/// only in `drop`. All access goes through the bounds-checked accessors below.
struct MappedRing {
    ptr: *mut u8,
    len: usize,
}

impl MappedRing {
    fn map(fd: RawFd, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel validated `len` when
        // PACKET_RX_RING was set and we pass it unchanged. No existing memory is aliased.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
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
        // space write once it owns the block.
        unsafe { core::ptr::write_volatile(self.ptr.add(off).cast::<u32>(), value) };
        true
    }

    /// The bytes `[off, off + len)`, valid while the block that holds them is ours.
    fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        if !self.in_bounds(off, len) {
            return None;
        }
        // SAFETY: in bounds; the caller only asks for frames inside a block whose status is
        // TP_STATUS_USER, which the kernel does not write until we hand the block back.
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

/// An AF_PACKET socket bound to one interface with a TPACKET_V3 receive ring.
pub struct AfPacketSocket {
    // Field order matters: the ring is unmapped before the socket closes.
    ring: MappedRing,
    fd: OwnedFd,
    block_size: usize,
    block_count: usize,
    /// The block we are reading, and how far into it.
    block: usize,
    next_pkt_off: Option<usize>,
    pkts_left: u32,
    errors: RingErrors,
}

impl core::fmt::Debug for AfPacketSocket {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AfPacketSocket")
            .field("fd", &self.fd)
            .field("blocks", &self.block_count)
            .field("block_size", &self.block_size)
            .finish()
    }
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
        let block_size = config.block_size_bytes as usize;
        let frame_size = config.frame_size_bytes as usize;
        if config.block_count == 0
            || block_size == 0
            || block_size % page != 0
            || frame_size < 128
            || frame_size % 16 != 0
            || block_size % frame_size != 0
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring geometry: block size a multiple of the page size and of the frame size; frame size a multiple of 16, ≥ 128; at least one block",
            ));
        }
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
        setsockopt(raw, SOL_PACKET, PACKET_VERSION, &TPACKET_V3)?;
        if config.ignore_outgoing {
            setsockopt(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int)?;
        }
        if config.qdisc_bypass {
            setsockopt(raw, SOL_PACKET, PACKET_QDISC_BYPASS, &1 as &libc::c_int)?;
        }
        let req = TpacketReq3 {
            block_size: config.block_size_bytes,
            block_nr: config.block_count,
            frame_size: config.frame_size_bytes,
            frame_nr: (block_size / frame_size) as u32 * config.block_count,
            retire_blk_tov: config.retire_timeout_ms,
            sizeof_priv: 0,
            feature_req_word: TP_FT_REQ_FILL_RXHASH,
        };
        setsockopt(raw, SOL_PACKET, PACKET_RX_RING, &req)?;
        let ring_len = block_size * config.block_count as usize;
        let ring = MappedRing::map(raw, ring_len)?;

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
        Ok(AfPacketSocket {
            ring,
            fd,
            block_size,
            block_count: config.block_count as usize,
            block: 0,
            next_pkt_off: None,
            pkts_left: 0,
            errors: RingErrors::default(),
        })
    }

    /// Hands up to `max_frames` received frames to `visit`, in arrival order, without copying;
    /// returns how many it handed. A block goes back to the kernel as soon as all its frames
    /// have been visited. Returns 0 when nothing is waiting.
    pub fn recv_batch(&mut self, max_frames: usize, mut visit: impl FnMut(&[u8], RxMeta)) -> usize {
        let mut handed = 0;
        while handed < max_frames {
            let base = self.block * self.block_size;
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
                if pkts == 0 || first == 0 || first >= self.block_size {
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

    /// Parses the frame header at block offset `off`: (frame offset in block, captured length,
    /// metadata, offset to the next header). `None` when any field points outside the block.
    fn frame_at(&self, base: usize, off: usize) -> Option<(usize, usize, RxMeta, usize)> {
        if off.checked_add(PKT_HDR_BYTES)? > self.block_size {
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
        let frame_off = off.checked_add(mac)?;
        if frame_off.checked_add(snaplen)? > self.block_size
            || off.checked_add(next)? > self.block_size
        {
            return None;
        }
        let meta = RxMeta {
            timestamp_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
            wire_len,
            kernel_rxhash: rxhash,
            status,
        };
        Some((frame_off, snaplen, meta, next))
    }

    fn release_block(&mut self) {
        let base = self.block * self.block_size;
        // Everything we read from the block happens before the kernel may reuse it.
        fence(Ordering::Release);
        self.ring
            .write_u32(base + BLOCK_STATUS_OFF, TP_STATUS_KERNEL);
        self.block = (self.block + 1) % self.block_count;
        self.next_pkt_off = None;
        self.pkts_left = 0;
    }

    /// Sends one whole Ethernet frame; `WouldBlock` when the socket's send buffer is full.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is a valid readable region of `frame.len()` bytes for the whole call.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// The kernel's counters since the last call (reading resets them).
    pub fn take_stats(&self) -> io::Result<PacketStats> {
        let (raw, _) =
            crate::sys::getsockopt::<[u32; 3]>(self.fd.as_raw_fd(), SOL_PACKET, PACKET_STATISTICS)?;
        Ok(PacketStats {
            packets: raw[0],
            drops: raw[1],
            queue_freezes: raw[2],
        })
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
mod tests {
    use super::*;

    #[test]
    fn bad_ring_geometry_is_rejected_before_any_system_call() {
        for cfg in [
            AfPacketConfig {
                block_count: 0,
                ..AfPacketConfig::default()
            },
            AfPacketConfig {
                block_size_bytes: 1000,
                ..AfPacketConfig::default()
            },
            AfPacketConfig {
                frame_size_bytes: 100,
                ..AfPacketConfig::default()
            },
            AfPacketConfig {
                frame_size_bytes: 2050,
                ..AfPacketConfig::default()
            },
        ] {
            let err = AfPacketSocket::open("lo", &cfg).expect_err("invalid geometry");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn tpacket_req3_has_the_kernel_layout() {
        assert_eq!(core::mem::size_of::<TpacketReq3>(), 28);
    }
}
