//! The TPACKET_V2 transmit ring (`PACKET_TX_RING`): one system call per burst.
//!
//! The ring lives on a transmit-only socket of its own (bound to the interface with protocol
//! 0, so it receives nothing and costs the receive path nothing; the receive socket keeps its
//! V2 or V3 ring). Its slots are laid out as V2 receive slots (whole slots per block, a
//! block's tail unused); each starts with a `struct tpacket2_hdr` whose `tp_status` says who
//! owns it:
//!
//! - `TP_STATUS_AVAILABLE` (0): ours. We write, at [`TX_DATA_OFFSET_BYTES`], a 10-byte
//!   `struct virtio_net_hdr` and the frame after it, store their length in `tp_len`, then
//!   (after a release fence) set `TP_STATUS_SEND_REQUEST`.
//! - `TP_STATUS_SEND_REQUEST` (1): queued for the kernel. One `send(fd, NULL, 0,
//!   MSG_DONTWAIT)` ([`AfPacketSocket::tx_kick`]) makes it walk the ring from its own cursor
//!   and transmit every consecutive queued slot.
//! - `TP_STATUS_SENDING` (2): the kernel built an skb for the slot; it sets the slot back to
//!   available when that skb is freed — for a veth, once the peer is done with the frame.
//! - `TP_STATUS_WRONG_FORMAT` (4): the kernel refused the frame. With `PACKET_LOSS` (set on
//!   the transmit socket) it drops such frames and frees their slots instead, so we should
//!   never see it; if we do, the slot is counted and reused.
//!
//! **Why the virtio header.** Without it the kernel copies only the Ethernet header into the
//! skb and attaches the rest of the slot as a zero-copy page fragment; a veth (or any path
//! that hands the skb to a receive path) must then copy that fragment into a freshly
//! allocated page (`skb_copy_ubufs`) — a page allocation per frame. The header's `hdr_len`
//! set to the whole frame makes the kernel copy the frame into the skb's linear area at once,
//! as `send(2)` does, and attach no fragment.
//!
//! Both cursors advance in ring order and the kernel never skips a slot, so our cursor (the
//! next slot to fill) is free exactly when the slot under it is available: a ring full of
//! queued or in-flight frames refuses the next one ([`TxRefused::Full`], counted in
//! [`TxRingCounters::ring_full`]) and the caller keeps it for later — a full ring never loses
//! a frame. A kick that meets a full device queue or socket buffer (`EAGAIN`, `ENOBUFS`)
//! leaves the rest of the burst queued in order; the kick stays pending and the next one
//! resumes there.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{Ordering, fence};

#[cfg(doc)]
use super::AfPacketSocket;
use super::{
    AfPacketConfig, Geometry, MappedRing, SOL_PACKET, TpacketReq, V2_HDR_BYTES, V2_LEN_OFF,
    V2_STATUS_OFF,
};
use crate::sys::setsockopt;

const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
const TPACKET_V2: libc::c_int = 1;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_LOSS: libc::c_int = 14;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// Linux's `ENOBUFS`.
const ENOBUFS: i32 = 105;

/// Where a slot's data starts: `TPACKET2_HDRLEN − sizeof(struct sockaddr_ll)`, the kernel's
/// offset when `PACKET_TX_HAS_OFF` is off (it is). The virtio header comes first, the frame
/// 10 bytes (`sizeof(struct virtio_net_hdr)`) later.
pub const TX_DATA_OFFSET_BYTES: usize = V2_HDR_BYTES;
/// `sizeof(struct virtio_net_hdr)`.
const VNET_HDR_BYTES: usize = 10;
/// Offset of `hdr_len` (little-endian u16) in `struct virtio_net_hdr`.
const VNET_HDR_LEN_OFF: usize = 2;

/// The shortest frame the kernel transmits from a ring slot: an Ethernet header.
const TX_FRAME_BYTES_MIN: usize = 14;

/// Why [`AfPacketSocket::tx_enqueue`] did not take a frame. The frame was not queued; the
/// caller still owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxRefused {
    /// The socket has no transmit ring.
    NoRing,
    /// Every slot is queued or in flight; try again after a kick and the kernel's completions.
    Full,
    /// The frame is shorter than an Ethernet header or longer than a slot holds
    /// ([`AfPacketSocket::tx_frame_bytes_max`]).
    BadLength,
}

/// What the transmit ring counted since the socket opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxRingCounters {
    /// Frames copied into a slot and queued for the kernel.
    pub enqueued: u64,
    /// Frames refused because the slot under the cursor was still queued or in flight.
    pub ring_full: u64,
    /// `send(2)` calls that handed the queued slots to the kernel.
    pub kicks: u64,
    /// Kicks that stopped early for a full device queue or socket buffer (`EAGAIN`,
    /// `ENOBUFS`): the frames left stay queued for the next kick.
    pub kicks_incomplete: u64,
    /// Kicks that failed with another error (interface down…): the frames stay queued.
    pub kick_errors: u64,
    /// Slots found marked `TP_STATUS_WRONG_FORMAT` under the cursor (the kernel refused the
    /// frame in them); reused. Zero while `PACKET_LOSS` is on.
    pub wrong_format: u64,
}

/// A transmit ring and its socket, or none. Invariants: with a ring, `slots > 0`,
/// `head < slots` and `map` holds `slots` slots laid out by `Geometry::tx_slot_offset`.
pub(super) struct TxRing {
    // Field order matters: the ring is unmapped before its socket closes.
    map: Option<MappedRing>,
    fd: Option<OwnedFd>,
    /// Slots in the ring (0: none).
    slots: usize,
    /// The next slot to fill.
    head: usize,
    /// Frames were queued (or a kick fell short) since the last complete kick.
    kick_pending: bool,
    counters: TxRingCounters,
}

impl TxRing {
    /// No ring: frames go out by `send(2)` on the receive socket.
    pub(super) fn none() -> TxRing {
        TxRing {
            map: None,
            fd: None,
            slots: 0,
            head: 0,
            kick_pending: false,
            counters: TxRingCounters::default(),
        }
    }

    /// Opens the transmit-only socket on interface `ifindex` with a ring of
    /// `geometry.tx_block_count` blocks (`config`'s qdisc bypass applies to it).
    pub(super) fn open(
        ifindex: u32,
        config: &AfPacketConfig,
        geometry: &Geometry,
    ) -> io::Result<TxRing> {
        // SAFETY: plain socket(2); ownership of the fd passes to `OwnedFd` right below.
        // Protocol 0: the socket is bound to the interface but receives no frame.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // The version, the virtio header and PACKET_LOSS can only be set before the ring.
        setsockopt(raw, SOL_PACKET, PACKET_VERSION, &TPACKET_V2)?;
        setsockopt(raw, SOL_PACKET, PACKET_VNET_HDR, &1 as &libc::c_int)?;
        // A frame the kernel finds malformed is dropped and its slot freed, instead of
        // stopping the ring at it (`TP_STATUS_WRONG_FORMAT`) for good.
        setsockopt(raw, SOL_PACKET, PACKET_LOSS, &1 as &libc::c_int)?;
        if config.qdisc_bypass {
            setsockopt(raw, SOL_PACKET, PACKET_QDISC_BYPASS, &1 as &libc::c_int)?;
        }
        let req = TpacketReq {
            block_size: config.block_size_bytes,
            block_nr: config.tx_block_count,
            frame_size: config.frame_size_bytes,
            // `validate` checked that the slot count fits a u32.
            frame_nr: geometry.tx_slot_count() as u32,
        };
        setsockopt(raw, SOL_PACKET, PACKET_TX_RING, &req)?;
        // The ring bounds the frames in flight; the socket's send buffer (which every
        // in-flight frame's skb is charged to, ~200 KiB by default: a few hundred small
        // frames) must not be a second, tighter bound that fails kicks with `EAGAIN`.
        // Beyond `wmem_max` only with CAP_NET_ADMIN (`SO_SNDBUFFORCE`); best effort.
        let want = libc::c_int::try_from(geometry.tx_ring_bytes()).unwrap_or(libc::c_int::MAX);
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &want).is_err() {
            let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &want);
        }
        let map = MappedRing::map(raw, geometry.tx_ring_bytes())?;
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = 0;
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
        Ok(TxRing {
            map: Some(map),
            fd: Some(fd),
            slots: geometry.tx_slot_count(),
            ..TxRing::none()
        })
    }

    /// A ring over private anonymous memory the unit tests write as the kernel would; its
    /// descriptor is /dev/null (a kick fails with `ENOTSOCK`).
    #[cfg(test)]
    pub(super) fn fake(geometry: &Geometry) -> TxRing {
        if geometry.tx_block_count == 0 {
            return TxRing::none();
        }
        let fd: OwnedFd = std::fs::File::open("/dev/null")
            .expect("open /dev/null")
            .into();
        TxRing {
            map: Some(MappedRing::anonymous(geometry.tx_ring_bytes()).expect("mmap")),
            fd: Some(fd),
            slots: geometry.tx_slot_count(),
            ..TxRing::none()
        }
    }
}

impl Geometry {
    /// Where transmit slot `slot` (< `tx_slot_count()`) starts in the transmit ring.
    fn tx_slot_offset(&self, slot: usize) -> usize {
        (slot / self.frames_per_block) * self.block_size
            + (slot % self.frames_per_block) * self.frame_size
    }
}

fn is_try_again(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(ENOBUFS)
}

impl super::AfPacketSocket {
    /// The socket has a transmit ring.
    pub fn has_tx_ring(&self) -> bool {
        self.tx.slots > 0
    }

    /// The longest frame a transmit slot holds, bytes (0 without a ring).
    pub fn tx_frame_bytes_max(&self) -> usize {
        if self.has_tx_ring() {
            self.geometry.frame_size - TX_DATA_OFFSET_BYTES - VNET_HDR_BYTES
        } else {
            0
        }
    }

    /// Copies `frame` into the next transmit slot and queues it; it leaves at the next
    /// [`Self::tx_kick`]. Refused (and not queued) when the slot is still the kernel's or the
    /// frame does not fit a slot.
    pub fn tx_enqueue(&mut self, frame: &[u8]) -> Result<(), TxRefused> {
        let Some(map) = self.tx.map.as_ref() else {
            return Err(TxRefused::NoRing);
        };
        if frame.len() < TX_FRAME_BYTES_MIN || frame.len() > self.tx_frame_bytes_max() {
            return Err(TxRefused::BadLength);
        }
        let off = self.geometry.tx_slot_offset(self.tx.head);
        match map.read_u32(off + V2_STATUS_OFF) {
            Some(TP_STATUS_AVAILABLE) => {}
            Some(TP_STATUS_WRONG_FORMAT) => self.tx.counters.wrong_format += 1,
            _ => {
                self.tx.counters.ring_full += 1;
                return Err(TxRefused::Full);
            }
        }
        // The kernel's last access to the slot happens before our writes.
        fence(Ordering::Acquire);
        // The virtio header: no offload, no GSO, `hdr_len` = the whole frame (copied into
        // the skb's linear area; see the module docs). `frame.len()` < 2^16: it fits a slot.
        let mut vnet = [0u8; VNET_HDR_BYTES];
        vnet[VNET_HDR_LEN_OFF..VNET_HDR_LEN_OFF + 2]
            .copy_from_slice(&(frame.len() as u16).to_le_bytes());
        let data = off + TX_DATA_OFFSET_BYTES;
        let written = map.write_bytes(data, &vnet)
            && map.write_bytes(data + VNET_HDR_BYTES, frame)
            && map.write_u32(off + V2_LEN_OFF, (VNET_HDR_BYTES + frame.len()) as u32);
        debug_assert!(written, "transmit slots lie inside the mapping");
        // The frame and its length are visible before the kernel may see the request.
        fence(Ordering::Release);
        map.write_u32(off + V2_STATUS_OFF, TP_STATUS_SEND_REQUEST);
        self.tx.head = (self.tx.head + 1) % self.tx.slots;
        self.tx.kick_pending = true;
        self.tx.counters.enqueued += 1;
        Ok(())
    }

    /// Frames were queued since the last complete kick.
    pub fn tx_kick_pending(&self) -> bool {
        self.tx.kick_pending
    }

    /// Hands every queued slot to the kernel with one `send(2)`; returns the bytes it sent.
    /// Does nothing (`Ok(0)`) when nothing is pending. On an error (`WouldBlock` for a full
    /// device queue or socket buffer) the frames not sent stay queued, in order, for the next
    /// kick.
    pub fn tx_kick(&mut self) -> io::Result<usize> {
        if !self.tx.kick_pending {
            return Ok(0);
        }
        let Some(fd) = self.tx.fd.as_ref() else {
            return Ok(0);
        };
        // SAFETY: a zero-length send with a null buffer: the kernel reads no user memory
        // through the pointer (it reads the mapped ring, which stays mapped while `self`
        // lives).
        let n = unsafe { libc::send(fd.as_raw_fd(), core::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if n >= 0 {
            self.tx.kick_pending = false;
            self.tx.counters.kicks += 1;
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if is_try_again(&e) {
            self.tx.counters.kicks_incomplete += 1;
        } else {
            self.tx.counters.kick_errors += 1;
        }
        Err(e)
    }

    /// The transmit ring's counters.
    pub fn tx_counters(&self) -> TxRingCounters {
        self.tx.counters
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::fake_socket;
    use super::super::{AfPacketConfig, AfPacketSocket, RingVersion};
    use super::*;

    /// 2 blocks of 4 KiB with 1 KiB slots: 8 transmit slots, 992 bytes of frame each.
    fn small_tx() -> AfPacketConfig {
        AfPacketConfig {
            ring: RingVersion::V2,
            block_size_bytes: 4096,
            block_count: 1,
            frame_size_bytes: 1024,
            tx_block_count: 2,
            ..AfPacketConfig::default()
        }
    }

    fn map(sock: &AfPacketSocket) -> &MappedRing {
        sock.tx.map.as_ref().expect("a transmit ring")
    }

    fn status(sock: &AfPacketSocket, slot: usize) -> u32 {
        let off = sock.geometry.tx_slot_offset(slot);
        map(sock).read_u32(off + V2_STATUS_OFF).expect("in bounds")
    }

    fn set_status(sock: &AfPacketSocket, slot: usize, status: u32) {
        let off = sock.geometry.tx_slot_offset(slot);
        assert!(map(sock).write_u32(off + V2_STATUS_OFF, status));
    }

    /// Plays the kernel: reads the queued frame in `slot` (after its virtio header, whose
    /// `hdr_len` must cover the whole frame) and marks the slot `new_status` (available once
    /// sent, or sending while its skb lives).
    fn kernel_take(sock: &AfPacketSocket, slot: usize, new_status: u32) -> Vec<u8> {
        let off = sock.geometry.tx_slot_offset(slot);
        assert_eq!(status(sock, slot), TP_STATUS_SEND_REQUEST, "slot {slot}");
        let m = map(sock);
        let len = m.read_u32(off + V2_LEN_OFF).expect("len") as usize;
        let data = m
            .bytes(off + TX_DATA_OFFSET_BYTES, len)
            .expect("frame in slot")
            .to_vec();
        let (vnet, frame) = data.split_at(VNET_HDR_BYTES);
        assert_eq!(
            usize::from(u16::from_le_bytes([vnet[2], vnet[3]])),
            frame.len(),
            "hdr_len covers the frame"
        );
        assert!(
            vnet.iter()
                .enumerate()
                .all(|(i, &b)| b == 0 || (2..4).contains(&i))
        );
        set_status(sock, slot, new_status);
        frame.to_vec()
    }

    fn frame(i: u32, len: usize) -> Vec<u8> {
        let mut f = vec![0xee; len];
        f[..4].copy_from_slice(&i.to_be_bytes());
        f
    }

    #[test]
    fn tx_slots_never_straddle_blocks() {
        let sock = fake_socket(&small_tx());
        let g = sock.geometry;
        assert_eq!((g.tx_slot_count(), g.tx_ring_bytes()), (8, 2 * 4096));
        assert_eq!(g.tx_slot_offset(0), 0);
        assert_eq!(g.tx_slot_offset(3), 3 * 1024);
        assert_eq!(g.tx_slot_offset(4), 4096);
        assert_eq!(g.tx_slot_offset(7) + 1024, g.tx_ring_bytes());
        assert_eq!(sock.tx_frame_bytes_max(), 1024 - 32 - 10);
    }

    #[test]
    fn tx_ring_wraps_around_in_order_with_every_frame_intact() {
        let mut sock = fake_socket(&small_tx());
        // Three laps of the 8-slot ring, the kernel taking each burst of 5 after it.
        let mut seen = Vec::new();
        let mut next_kernel_slot = 0;
        for burst in 0..5u32 {
            for k in 0..5u32 {
                let i = burst * 5 + k;
                sock.tx_enqueue(&frame(i, 60 + i as usize))
                    .expect("slot free");
            }
            assert!(sock.tx_kick_pending());
            for _ in 0..5 {
                seen.push(kernel_take(&sock, next_kernel_slot, TP_STATUS_AVAILABLE));
                next_kernel_slot = (next_kernel_slot + 1) % 8;
            }
        }
        assert_eq!(seen.len(), 25);
        for (i, f) in seen.iter().enumerate() {
            assert_eq!(f, &frame(i as u32, 60 + i), "frame {i}");
        }
        assert_eq!(sock.tx_counters().enqueued, 25);
        assert_eq!(sock.tx_counters().ring_full, 0);
    }

    #[test]
    fn full_tx_ring_refuses_and_counts_and_loses_nothing() {
        let mut sock = fake_socket(&small_tx());
        for i in 0..8 {
            sock.tx_enqueue(&frame(i, 64)).expect("slot free");
        }
        // Slots 0..8 are queued: the ninth frame is refused, not queued, and counted.
        assert_eq!(sock.tx_enqueue(&frame(8, 64)), Err(TxRefused::Full));
        assert_eq!(sock.tx_enqueue(&frame(8, 64)), Err(TxRefused::Full));
        assert_eq!(sock.tx_counters().ring_full, 2);
        // The kernel sends slot 0 but its skb still lives: still full.
        kernel_take(&sock, 0, 2);
        assert_eq!(sock.tx_enqueue(&frame(8, 64)), Err(TxRefused::Full));
        // The skb is freed: the slot comes back and takes the refused frame.
        set_status(&sock, 0, TP_STATUS_AVAILABLE);
        sock.tx_enqueue(&frame(8, 64)).expect("slot 0 free again");
        // Slot 1 was never taken by the kernel: its frame is still there, untouched.
        assert_eq!(kernel_take(&sock, 1, TP_STATUS_AVAILABLE), frame(1, 64));
        assert_eq!(kernel_take(&sock, 0, TP_STATUS_AVAILABLE), frame(8, 64));
        assert_eq!(sock.tx_counters().enqueued, 9);
    }

    #[test]
    fn partial_kernel_progress_keeps_the_rest_queued_in_order() {
        let mut sock = fake_socket(&small_tx());
        for i in 0..6 {
            sock.tx_enqueue(&frame(i, 64)).expect("slot free");
        }
        // The kernel stopped after two frames (a full device queue): slots 2..6 stay queued.
        kernel_take(&sock, 0, TP_STATUS_AVAILABLE);
        kernel_take(&sock, 1, TP_STATUS_AVAILABLE);
        for s in 2..6 {
            assert_eq!(status(&sock, s), TP_STATUS_SEND_REQUEST);
        }
        // More frames queue behind them, wrapping into the freed slots 0 and 1.
        for i in 6..10 {
            sock.tx_enqueue(&frame(i, 64)).expect("slot free");
        }
        assert_eq!(sock.tx_enqueue(&frame(10, 64)), Err(TxRefused::Full));
        let order: Vec<_> = [2, 3, 4, 5, 6, 7, 0, 1]
            .iter()
            .map(|&s| kernel_take(&sock, s, TP_STATUS_AVAILABLE))
            .collect();
        let want: Vec<_> = (2..10).map(|i| frame(i, 64)).collect();
        assert_eq!(order, want);
    }

    #[test]
    fn bad_lengths_and_missing_ring_are_refused_without_touching_slots() {
        let mut sock = fake_socket(&small_tx());
        assert_eq!(sock.tx_enqueue(&[0u8; 13]), Err(TxRefused::BadLength));
        assert_eq!(
            sock.tx_enqueue(&vec![0u8; 1024 - 42 + 1]),
            Err(TxRefused::BadLength)
        );
        sock.tx_enqueue(&vec![7u8; 1024 - 42])
            .expect("a full slot fits");
        assert_eq!(status(&sock, 1), TP_STATUS_AVAILABLE);
        assert_eq!(sock.tx_counters().enqueued, 1);
        let mut plain = fake_socket(&AfPacketConfig {
            tx_block_count: 0,
            ..small_tx()
        });
        assert!(!plain.has_tx_ring());
        assert_eq!(plain.tx_enqueue(&[0u8; 60]), Err(TxRefused::NoRing));
        assert_eq!(plain.tx_kick().expect("nothing pending"), 0);
    }

    #[test]
    fn failed_kick_is_counted_and_stays_pending() {
        // The fake socket's descriptor is /dev/null: send(2) fails with ENOTSOCK.
        let mut sock = fake_socket(&small_tx());
        sock.tx_enqueue(&frame(0, 64)).expect("slot free");
        assert!(sock.tx_kick().is_err());
        assert!(sock.tx_kick().is_err());
        assert!(sock.tx_kick_pending());
        assert_eq!(sock.tx_counters().kick_errors, 2);
        assert_eq!(sock.tx_counters().kicks, 0);
        assert_eq!(status(&sock, 0), TP_STATUS_SEND_REQUEST);
    }

    #[test]
    fn wrong_format_slot_is_counted_and_reused() {
        let mut sock = fake_socket(&small_tx());
        set_status(&sock, 0, TP_STATUS_WRONG_FORMAT);
        sock.tx_enqueue(&frame(1, 64)).expect("reused");
        assert_eq!(sock.tx_counters().wrong_format, 1);
        assert_eq!(kernel_take(&sock, 0, TP_STATUS_AVAILABLE), frame(1, 64));
    }

    #[test]
    fn tx_ring_sits_beside_a_v3_receive_ring() {
        let mut sock = fake_socket(&AfPacketConfig {
            ring: RingVersion::V3,
            block_size_bytes: 4096,
            block_count: 2,
            frame_size_bytes: 2048,
            tx_block_count: 1,
            ..AfPacketConfig::default()
        });
        assert!(sock.has_tx_ring());
        sock.tx_enqueue(&frame(5, 60)).expect("slot free");
        sock.tx_enqueue(&frame(6, 60)).expect("slot free");
        assert_eq!(sock.tx_enqueue(&frame(7, 60)), Err(TxRefused::Full));
        assert_eq!(kernel_take(&sock, 0, TP_STATUS_AVAILABLE), frame(5, 60));
    }
}
