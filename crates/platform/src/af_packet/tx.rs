//! The TPACKET_V2 transmit ring (`PACKET_TX_RING`): one system call per burst.
//!
//! The ring is a sequence of fixed-size slots (laid out as the receive ring's V2 slots: whole
//! slots per block, a block's tail unused). Each slot starts with a `struct tpacket2_hdr`
//! whose `tp_status` says who owns it:
//!
//! - `TP_STATUS_AVAILABLE` (0): ours. We copy a frame to [`TX_DATA_OFFSET_BYTES`], store its
//!   length in `tp_len`, then (after a release fence) set `TP_STATUS_SEND_REQUEST`.
//! - `TP_STATUS_SEND_REQUEST` (1): queued for the kernel. One `send(fd, NULL, 0,
//!   MSG_DONTWAIT)` ([`AfPacketSocket::tx_kick`]) makes it walk the ring from its own cursor
//!   and transmit every consecutive queued slot.
//! - `TP_STATUS_SENDING` (2): the kernel built an skb over the slot's pages (no copy) and
//!   sets the slot back to available when that skb is freed — for a veth, once the peer is
//!   done with the frame.
//! - `TP_STATUS_WRONG_FORMAT` (4): the kernel refused the frame. With `PACKET_LOSS` (which
//!   [`AfPacketSocket::open`] sets) it drops such frames and frees their slots instead, so
//!   we should never see it; if we do, the slot is counted and reused.
//!
//! Both cursors advance in ring order and the kernel never skips a slot, so our cursor (the
//! next slot to fill) is free exactly when the slot under it is available: a ring full of
//! queued or in-flight frames refuses the next one ([`TxRefused::Full`], counted in
//! [`TxRingCounters::ring_full`]) and the caller keeps it for later — a full ring never loses
//! a frame. A kick that meets a full device or socket buffer (`EAGAIN`, `ENOBUFS`) leaves the
//! rest of the burst queued in order; the kick stays pending and the next one resumes there.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{Ordering, fence};

use super::{AfPacketSocket, Geometry, V2_HDR_BYTES, V2_LEN_OFF, V2_STATUS_OFF};

const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// Linux's `ENOBUFS`.
const ENOBUFS: i32 = 105;

/// Where a frame starts in a transmit slot: `TPACKET2_HDRLEN − sizeof(struct sockaddr_ll)`,
/// the kernel's offset when `PACKET_TX_HAS_OFF` is off (it is).
pub const TX_DATA_OFFSET_BYTES: usize = V2_HDR_BYTES;

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

/// The transmit ring's cursor. Invariant: `head < slots` whenever `slots > 0`; the ring's
/// slots lie in the mapping after the receive ring (`Geometry::mapping_bytes`).
#[derive(Debug, Clone, Copy)]
pub(super) struct TxRing {
    /// Slots in the ring (0: none).
    slots: usize,
    /// The next slot to fill.
    head: usize,
    /// Frames were queued (or a kick fell short) since the last complete kick.
    kick_pending: bool,
    counters: TxRingCounters,
}

impl TxRing {
    pub(super) fn new(g: &Geometry) -> TxRing {
        TxRing {
            slots: g.tx_slot_count(),
            head: 0,
            kick_pending: false,
            counters: TxRingCounters::default(),
        }
    }
}

impl Geometry {
    /// Where transmit slot `slot` (< `tx_slot_count()`) starts in the mapping.
    fn tx_slot_offset(&self, slot: usize) -> usize {
        self.ring_bytes()
            + (slot / self.frames_per_block) * self.block_size
            + (slot % self.frames_per_block) * self.frame_size
    }
}

fn is_try_again(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(ENOBUFS)
}

impl AfPacketSocket {
    /// The socket has a transmit ring.
    pub fn has_tx_ring(&self) -> bool {
        self.tx.slots > 0
    }

    /// The longest frame a transmit slot holds, bytes (0 without a ring).
    pub fn tx_frame_bytes_max(&self) -> usize {
        if self.has_tx_ring() {
            self.geometry.frame_size - TX_DATA_OFFSET_BYTES
        } else {
            0
        }
    }

    /// Copies `frame` into the next transmit slot and queues it; it leaves at the next
    /// [`Self::tx_kick`]. Refused (and not queued) when the slot is still the kernel's or the
    /// frame does not fit a slot.
    pub fn tx_enqueue(&mut self, frame: &[u8]) -> Result<(), TxRefused> {
        if !self.has_tx_ring() {
            return Err(TxRefused::NoRing);
        }
        if frame.len() < TX_FRAME_BYTES_MIN || frame.len() > self.tx_frame_bytes_max() {
            return Err(TxRefused::BadLength);
        }
        let off = self.geometry.tx_slot_offset(self.tx.head);
        let status = self.ring.read_u32(off + V2_STATUS_OFF);
        match status {
            Some(TP_STATUS_AVAILABLE) => {}
            Some(TP_STATUS_WRONG_FORMAT) => self.tx.counters.wrong_format += 1,
            _ => {
                self.tx.counters.ring_full += 1;
                // A kick may be what frees the ring: make sure the next one happens.
                return Err(TxRefused::Full);
            }
        }
        // The kernel's last access to the slot (its skb's) happens before our writes.
        fence(Ordering::Acquire);
        let written = self.ring.write_bytes(off + TX_DATA_OFFSET_BYTES, frame)
            // `frame.len()` ≤ the slot's room, checked above.
            && self.ring.write_u32(off + V2_LEN_OFF, frame.len() as u32);
        debug_assert!(written, "transmit slots lie inside the mapping");
        // The frame and its length are visible before the kernel may see the request.
        fence(Ordering::Release);
        self.ring
            .write_u32(off + V2_STATUS_OFF, TP_STATUS_SEND_REQUEST);
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
        // SAFETY: a zero-length send with a null buffer: the kernel reads no user memory
        // through the pointer (it reads the mapped ring, which stays mapped while `self`
        // lives).
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                core::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
            )
        };
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
    use super::super::{AfPacketConfig, RingVersion};
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

    fn status(sock: &AfPacketSocket, slot: usize) -> u32 {
        let off = sock.geometry.tx_slot_offset(slot);
        sock.ring.read_u32(off + V2_STATUS_OFF).expect("in bounds")
    }

    /// Plays the kernel: reads the queued frame in `slot` and marks the slot
    /// `new_status` (available once sent, or sending while its skb lives).
    fn kernel_take(sock: &AfPacketSocket, slot: usize, new_status: u32) -> Vec<u8> {
        let off = sock.geometry.tx_slot_offset(slot);
        assert_eq!(status(sock, slot), TP_STATUS_SEND_REQUEST, "slot {slot}");
        let len = sock.ring.read_u32(off + V2_LEN_OFF).expect("len") as usize;
        let frame = sock
            .ring
            .bytes(off + TX_DATA_OFFSET_BYTES, len)
            .expect("frame in slot")
            .to_vec();
        assert!(sock.ring.write_u32(off + V2_STATUS_OFF, new_status));
        frame
    }

    fn frame(i: u32, len: usize) -> Vec<u8> {
        let mut f = vec![0xee; len];
        f[..4].copy_from_slice(&i.to_be_bytes());
        f
    }

    #[test]
    fn tx_slots_follow_the_receive_ring_in_the_mapping() {
        let sock = fake_socket(&small_tx());
        let g = sock.geometry;
        assert_eq!((g.tx_slot_count(), g.mapping_bytes()), (8, 3 * 4096));
        assert_eq!(g.tx_slot_offset(0), 4096);
        assert_eq!(g.tx_slot_offset(3), 4096 + 3 * 1024);
        assert_eq!(g.tx_slot_offset(4), 2 * 4096);
        assert_eq!(g.tx_slot_offset(7) + 1024, g.mapping_bytes());
        assert_eq!(sock.tx_frame_bytes_max(), 1024 - 32);
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
        let off = sock.geometry.tx_slot_offset(0);
        assert!(
            sock.ring
                .write_u32(off + V2_STATUS_OFF, TP_STATUS_AVAILABLE)
        );
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
            sock.tx_enqueue(&vec![0u8; 1024 - 32 + 1]),
            Err(TxRefused::BadLength)
        );
        sock.tx_enqueue(&vec![7u8; 1024 - 32])
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
        let off = sock.geometry.tx_slot_offset(0);
        assert!(
            sock.ring
                .write_u32(off + V2_STATUS_OFF, TP_STATUS_WRONG_FORMAT)
        );
        sock.tx_enqueue(&frame(1, 64)).expect("reused");
        assert_eq!(sock.tx_counters().wrong_format, 1);
        assert_eq!(kernel_take(&sock, 0, TP_STATUS_AVAILABLE), frame(1, 64));
    }

    #[test]
    fn tx_ring_requires_v2() {
        let cfg = AfPacketConfig {
            ring: RingVersion::V3,
            tx_block_count: 1,
            ..AfPacketConfig::default()
        };
        let err = AfPacketSocket::open("lo", &cfg).expect_err("V3 transmit ring");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
