//! The receive/transmit side of a shard: `ShardIo`, its `mem` implementation (`MemIo`,
//! the wire's rings) and the frame predicates the live ports share.
//!
//! The shard loop ([`crate::shard`]) is generic over `ShardIo` (monomorphised, no `dyn` on the
//! data path): the same loop drives the in-memory wire and the OS ports of
//! the live ports (`port::LivePort`).

use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use nic::TxOffload;
use shard::RxQueue;

use crate::ring::{Consumer, Producer};

/// What a port counted (all zero on the `mem` wire, whose counters are in
/// [`crate::WireReport`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames read from the OS and handed to the NIC queue.
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames and bytes the OS accepted for transmission.
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Transmit attempts the OS refused for now (`EAGAIN`, ring full); the frame stayed in the
    /// shard's bounded backlog and was retried.
    pub tx_would_block: u64,
    /// Frames dropped because the OS refused them with an error other than "try again".
    pub tx_drop_error: u64,
    /// AF_PACKET transmit ring: frames refused because every slot was queued or in flight
    /// (each also counted in `tx_would_block`: kept and retried, not lost).
    pub tx_ring_full: u64,
    /// AF_PACKET transmit ring: `send(2)` calls that handed queued slots to the kernel.
    pub tx_kicks: u64,
    /// AF_PACKET transmit ring: kicks that fell short or failed (full device queue, socket
    /// buffer, interface down); the frames stayed queued for the next kick.
    pub tx_kick_errors: u64,
    /// Receive calls that failed with an error other than "nothing waiting".
    pub rx_errors: u64,
    /// Dropped: the frame was cut short (it did not fit the receive slot, e.g. a GSO
    /// super-frame larger than the ring's frames or the read buffer).
    pub rx_drop_truncated: u64,
    /// Frames whose TCP/UDP checksum the sender left to offload (`TP_STATUS_CSUMNOTREADY`)
    /// and the port completed in software.
    pub rx_checksum_completed: u64,
    /// Frames flagged checksum-not-ready that the port could not complete (not TCP/UDP over
    /// IPv4/IPv6 without extension headers, or inconsistent lengths); passed on unchanged, the
    /// stack's checksum check decides.
    pub rx_checksum_incomplete: u64,
    /// Frames handed to the kernel that it segments (TSO through a virtio-net header,
    /// `gso_type` TCPV4/TCPV6); counted in `tx_frames` too.
    pub tx_tso_frames: u64,
    /// Wire segments those frames become (payload / `gso_size`, rounded up).
    pub tx_tso_segments: u64,
    /// Frames handed to the kernel with a checksum for it to complete (`NEEDS_CSUM`).
    pub tx_csum_offloaded: u64,
    /// Frames dropped because offloads were asked of a frame that is not TCP/UDP over IP (the
    /// stack never builds one; must read 0).
    pub tx_drop_offload_malformed: u64,
    /// Received frames whose checksum the kernel vouched for (`DATA_VALID`, or a partial
    /// checksum from this host) and that skipped verification (checksum offload on).
    pub rx_csum_valid: u64,
    /// Received frames the kernel coalesced (GRO: a virtio-net header with a TCP `gso_type`).
    pub rx_gro_frames: u64,
    /// Frames the pcap replay fed in.
    pub replay_frames: u64,
    /// Transmitted frames a replay port discarded (there is no wire behind it).
    pub tx_discarded: u64,
    /// `--capture` records that failed to be written.
    pub capture_errors: u64,
    /// Times the idle wait returned because the port had frames.
    pub wakeups_readable: u64,
    /// Frames the kernel dropped on their way to this port because we did not read fast
    /// enough: an AF_PACKET ring with every block handed to user space (`PACKET_STATISTICS`
    /// `tp_drops`), an AF_XDP RX ring full or a frame it could not place
    /// (`XDP_STATISTICS` `rx_ring_full` + `rx_dropped`). Read when the shard stops. A TAP's
    /// drops are counted by the kernel per device (`tx_dropped` of `ip -s link`), not here.
    pub rx_drop_kernel: u64,
    /// Frames dropped because their ring entry failed the port's checks (an AF_PACKET frame
    /// header pointing outside its slot or block, or a V3 block whose first frame lies outside
    /// it, counted once per block; an AF_XDP descriptor outside the UMEM or for a frame not
    /// lent to the kernel). Read when the shard stops; zero unless the kernel misbehaves or
    /// the shared ring was corrupted.
    pub rx_drop_ring_invalid: u64,
    /// Offload engine on a live port (shard 0's port plays the NIC, `runtime::offload_live`):
    /// frames the software exact-match filter steered to the engine, and ones dropped because
    /// the engine's receive ring was full.
    pub rx_to_engine: u64,
    pub rx_drop_engine_ring_full: u64,
    /// ARP replies copied to the engine, and copies dropped for a full ring.
    pub arp_copies_to_engine: u64,
    pub drop_arp_copy_engine_ring_full: u64,
    /// Filter changes applied: installed, removed, refused (table full or no such filter),
    /// and install acknowledgements that found their ring full (the engine's hold of that
    /// flow then ends by time-out).
    pub filters_installed: u64,
    pub filters_removed: u64,
    pub filters_refused: u64,
    pub filters_ack_dropped: u64,
}

impl PortCounters {
    /// Adds `o` field by field.
    pub fn add(&mut self, o: &PortCounters) {
        self.rx_frames += o.rx_frames;
        self.rx_bytes += o.rx_bytes;
        self.tx_frames += o.tx_frames;
        self.tx_bytes += o.tx_bytes;
        self.tx_would_block += o.tx_would_block;
        self.tx_drop_error += o.tx_drop_error;
        self.tx_ring_full += o.tx_ring_full;
        self.tx_kicks += o.tx_kicks;
        self.tx_kick_errors += o.tx_kick_errors;
        self.rx_errors += o.rx_errors;
        self.rx_drop_truncated += o.rx_drop_truncated;
        self.rx_checksum_completed += o.rx_checksum_completed;
        self.rx_checksum_incomplete += o.rx_checksum_incomplete;
        self.tx_tso_frames += o.tx_tso_frames;
        self.tx_tso_segments += o.tx_tso_segments;
        self.tx_csum_offloaded += o.tx_csum_offloaded;
        self.tx_drop_offload_malformed += o.tx_drop_offload_malformed;
        self.rx_csum_valid += o.rx_csum_valid;
        self.rx_gro_frames += o.rx_gro_frames;
        self.replay_frames += o.replay_frames;
        self.tx_discarded += o.tx_discarded;
        self.capture_errors += o.capture_errors;
        self.wakeups_readable += o.wakeups_readable;
        self.rx_drop_kernel += o.rx_drop_kernel;
        self.rx_drop_ring_invalid += o.rx_drop_ring_invalid;
        self.rx_to_engine += o.rx_to_engine;
        self.rx_drop_engine_ring_full += o.rx_drop_engine_ring_full;
        self.arp_copies_to_engine += o.arp_copies_to_engine;
        self.drop_arp_copy_engine_ring_full += o.drop_arp_copy_engine_ring_full;
        self.filters_installed += o.filters_installed;
        self.filters_removed += o.filters_removed;
        self.filters_refused += o.filters_refused;
        self.filters_ack_dropped += o.filters_ack_dropped;
    }

    /// Frames lost at the port: by it, or by the kernel in front of it.
    pub fn drops(&self) -> u64 {
        self.tx_drop_error
            + self.tx_drop_offload_malformed
            + self.rx_drop_truncated
            + self.rx_drop_kernel
            + self.rx_drop_ring_invalid
            + self.rx_drop_engine_ring_full
            + self.drop_arp_copy_engine_ring_full
    }
}

/// A shard's port: where received frames come from and transmitted frames go.
pub(crate) trait ShardIo: Send {
    /// Moves up to `max_frames` received frames into the shard's NIC queue; returns how many.
    fn receive(&mut self, queue: &mut RxQueue<'_>, max_frames: usize) -> usize;
    /// Offers one frame for transmission. `Ok(Some(buf))`: sent, and `buf` may be reused
    /// (the caller recycles it); `Ok(None)`: sent, the buffer comes back later through
    /// [`ShardIo::reap_completion`]; `Err(frame)`: the port is full for now, the caller keeps
    /// the frame and retries.
    fn send(&mut self, frame: Vec<u8>) -> Result<Option<Vec<u8>>, Vec<u8>>;
    /// As [`ShardIo::send`] for a frame that asks the device below for offloads
    /// (`nic::Nic::poll_tx_device`: TSO, checksum completion). Only a port whose
    /// [`ShardIo::tx_offload_in_device`] is true gets anything but [`TxOffload::NONE`].
    fn send_offload(
        &mut self,
        frame: Vec<u8>,
        offload: TxOffload,
    ) -> Result<Option<Vec<u8>>, Vec<u8>> {
        debug_assert_eq!(offload, TxOffload::NONE);
        self.send(frame)
    }
    /// The device below the port segments TCP and completes checksums for the frames it is
    /// given ([`ShardIo::send_offload`]): a TAP or AF_PACKET port with a virtio-net header.
    fn tx_offload_in_device(&self) -> bool {
        false
    }
    /// A transmit completion: the buffer of a frame [`ShardIo::send`] took earlier
    /// (`Ok(None)`), now free for reuse. The driver reaps until `None` before the core's
    /// iteration, so the stack builds its next frames in them. Ports that hand buffers back
    /// from `send` have none.
    fn reap_completion(&mut self) -> Option<Vec<u8>> {
        None
    }
    /// Called once per loop iteration after the sends: wake the consumer, kick the kernel,
    /// reap completions.
    fn flush(&mut self);
    /// Nothing to do: wait at most `sleep_ns` for received frames or an unpark.
    fn idle(&mut self, sleep_ns: u64);
    /// The port's counters, with the kernel's drop counters read now (called when the shard
    /// stops).
    fn counters(&mut self) -> PortCounters;
}

/// The `mem` wire's side of one shard: its receive and transmit rings, the ring on which it
/// posts empty receive buffers and the ring on which the wire completes its transmitted ones
/// (see [`crate::wire`] for how the buffers circulate).
///
/// Invariants: `outstanding` counts the buffers posted and not yet received back with a frame
/// (on `post`, in the wire's spare slot, or on `rx`) and never exceeds `post_target`, which is
/// at most the slots of `post`, so posting never meets a full ring. A transmitted buffer comes
/// back on `completions`, which the driver drains every loop turn
/// ([`ShardIo::reap_completion`]) before the stack builds frames; should it not drain them
/// (it has room for two transmit rings' worth), the wire stops reading the transmit ring
/// until it does (counted `stalls_completion_full`): back-pressure, never loss.
pub(crate) struct MemIo {
    pub rx: Consumer<Vec<u8>>,
    pub tx: Producer<Vec<u8>>,
    /// Empty receive buffers for the wire, from the shard's NIC pool.
    pub post: Producer<Vec<u8>>,
    /// This shard's transmitted buffers, back from the wire.
    pub completions: Consumer<Vec<u8>>,
    /// Capacity of each posted buffer: the largest frame the wire carries (MTU + Ethernet
    /// header and a VLAN tag), so a copy into it never reallocates.
    pub rx_buf_bytes: usize,
    /// Buffers kept posted (the receive ring's slots).
    pub post_target: usize,
    /// Buffers posted and not yet received back.
    pub outstanding: usize,
    /// The NIC pool got its spare buffers (at the first `receive`).
    pub primed: bool,
    /// The wire thread, set once it is spawned (before any shard starts).
    pub wire_thread: Arc<OnceLock<Thread>>,
    /// A frame went onto the transmit ring since the last flush.
    pub pushed: bool,
}

impl MemIo {
    /// A shard's port on the `mem` wire and the wire's end of it: receive and transmit rings of
    /// `slots`, as many posted buffers as the receive ring holds frames, completions for two
    /// transmit rings' worth (reaped every shard loop turn, so the wire rarely waits for them),
    /// posted buffers of `rx_buf_bytes` (the largest frame the wire carries).
    pub(crate) fn with_wire_end(
        slots: usize,
        rx_buf_bytes: usize,
        wire_thread: &Arc<OnceLock<Thread>>,
    ) -> (crate::wire::WireShard, MemIo) {
        use crate::ring::ring;
        let (rx_p, rx_c) = ring(slots);
        let (tx_p, tx_c) = ring(slots);
        let (post_p, post_c) = ring(slots);
        let (done_p, done_c) = ring(slots.saturating_mul(2));
        let wire_end = crate::wire::WireShard::new(tx_c, done_p, post_c, rx_p);
        let io = MemIo {
            rx: rx_c,
            tx: tx_p,
            post: post_p,
            completions: done_c,
            rx_buf_bytes,
            post_target: slots,
            outstanding: 0,
            primed: false,
            wire_thread: wire_thread.clone(),
            pushed: false,
        };
        (wire_end, io)
    }
}

impl ShardIo for MemIo {
    fn receive(&mut self, queue: &mut RxQueue<'_>, max_frames: usize) -> usize {
        let mut n = 0;
        while n < max_frames {
            let Some(f) = self.rx.pop() else { break };
            self.outstanding = self.outstanding.saturating_sub(1);
            queue.receive(f);
            n += 1;
        }
        // Top the posted buffers up again: the ones just received come back to the pool once
        // the stack has processed them, and are posted at the next turn.
        while self.outstanding < self.post_target {
            let buf = queue.take_buffer(self.rx_buf_bytes);
            match self.post.push(buf) {
                Ok(()) => self.outstanding += 1,
                Err(buf) => {
                    // The wire is gone (the ring is never full, see the invariants).
                    queue.recycle(buf);
                    break;
                }
            }
        }
        if !self.primed {
            self.primed = true;
            // Besides the posted buffers, the pool needs one per NIC receive slot: frames
            // move from the receive ring into the NIC's ring (never more than it has room
            // for) before they come back. Allocated once, now, so a deeper backlog later is
            // not met with an allocation.
            let spare: Vec<Vec<u8>> = (0..queue.room())
                .map(|_| queue.take_buffer(self.rx_buf_bytes))
                .collect();
            for buf in spare {
                queue.recycle(buf);
            }
        }
        n
    }

    fn send(&mut self, frame: Vec<u8>) -> Result<Option<Vec<u8>>, Vec<u8>> {
        self.tx.push(frame)?;
        self.pushed = true;
        // The buffer comes back later, as a transmit completion (`reap_completion`).
        Ok(None)
    }

    fn reap_completion(&mut self) -> Option<Vec<u8>> {
        self.completions.pop()
    }

    fn flush(&mut self) {
        if std::mem::take(&mut self.pushed) {
            if let Some(t) = self.wire_thread.get() {
                t.unpark();
            }
        }
    }

    fn idle(&mut self, sleep_ns: u64) {
        std::thread::park_timeout(Duration::from_nanos(sleep_ns));
    }

    fn counters(&mut self) -> PortCounters {
        PortCounters::default()
    }
}
