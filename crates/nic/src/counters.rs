//! Per-queue counters, FreeBSD style: every drop path has its own named counter.

/// A snapshot of one queue's counters. All counts are totals since the NIC was created.
///
/// Invariants a test can rely on:
/// - every frame handed to [`crate::Nic::receive`] is counted exactly once, either in
///   `rx_packets` of the queue it was steered to, or in one `rx_drop_*` counter (a frame
///   that could not be steered is counted on the default queue);
/// - `rx_packets == rx_descriptors_queued + rx_coalesced_segments`;
/// - every frame handed to [`crate::Nic::transmit`] is counted once, in `tx_requests` or in
///   one `tx_drop_*` counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Frames (wire segments) accepted into this queue, before coalescing.
    pub rx_packets: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Receive descriptors written (one per frame, or one per coalesced group).
    pub rx_descriptors_queued: u64,
    /// Descriptors handed to the driver by polls.
    pub rx_descriptors_polled: u64,
    /// Dropped: the receive ring had no free slot.
    pub rx_drop_ring_full: u64,
    /// Dropped: the frame is not valid Ethernet / IP (counted on the default queue).
    pub rx_drop_malformed: u64,
    /// Dropped: longer than the configured frame limit (counted on the default queue).
    pub rx_drop_oversize: u64,
    /// Dropped: steering named a queue the NIC does not have (counted on the default queue).
    pub rx_drop_no_queue: u64,
    /// Delivered with a bad IPv4 header checksum flag (not dropped: the stack decides).
    pub rx_csum_bad_ip: u64,
    /// Delivered with a bad TCP/UDP checksum flag.
    pub rx_csum_bad_l4: u64,
    /// Steered by an exact-match filter.
    pub rx_steered_filter: u64,
    /// Steered to a queue by a wildcard rule (`ethtool -N`; per-rule hits:
    /// [`crate::Nic::rule_hits`]).
    pub rx_steered_rule: u64,
    /// Dropped by a wildcard rule whose action is `drop` (counted on the default queue).
    pub rx_drop_rule: u64,
    /// Steered by RSS.
    pub rx_steered_rss: u64,
    /// No hash (non-IP or hash type disabled): sent to the default queue.
    pub rx_steered_default: u64,
    /// Frames a backend delivered on this queue although our steering would have chosen
    /// another ([`crate::Nic::receive_on_queue`]); they are kept on this queue.
    pub rx_steer_mismatch: u64,
    /// Segments merged into an earlier segment's descriptor (GRO/RSC).
    pub rx_coalesced_segments: u64,
    /// Coalesced groups closed because a segment carried PSH or FIN.
    pub gro_flush_push_fin: u64,
    /// Closed because a segment shorter than the group's MSS ended it.
    pub gro_flush_short: u64,
    /// Closed because the next segment of the flow was not the next in sequence.
    pub gro_flush_gap: u64,
    /// Closed because a segment's IP/TCP header fields or options differed (incl. ACK,
    /// window, ECN, TTL).
    pub gro_flush_header_change: u64,
    /// Closed because a segment carried SYN, RST, URG or CWR, or no payload.
    pub gro_flush_flags: u64,
    /// Closed because the merged packet reached the size limit, or a segment was longer than
    /// the group's MSS.
    pub gro_flush_size: u64,
    /// Closed by the flush timer.
    pub gro_flush_timer: u64,
    /// Closed at the start of a poll.
    pub gro_flush_poll: u64,
    /// Closed to make room for another flow.
    pub gro_flush_evict: u64,
    /// Wake-ups (interrupts) fired.
    pub wakeups: u64,
    /// Of `wakeups`, fired by the low-latency (PSH) rule.
    pub wakeups_lli: u64,
    /// Largest number of descriptors delivered in one wake-up cycle (a cycle runs from a
    /// wake-up to the re-arm).
    pub wakeup_descriptors_max: u64,
    /// Calls to `poll_rx` on this queue.
    pub polls: u64,
    /// Polls that used their whole budget (the queue stayed scheduled).
    pub polls_budget_exhausted: u64,
    /// Re-arms (polls that drained the queue).
    pub rearms: u64,
    /// Frames accepted into the transmit ring.
    pub tx_requests: u64,
    /// Frames put on the wire (after segmentation).
    pub tx_packets: u64,
    /// Bytes put on the wire.
    pub tx_bytes: u64,
    /// Large sends split by TSO.
    pub tx_tso_sends: u64,
    /// Segments TSO produced.
    pub tx_tso_segments: u64,
    /// Frames whose checksums the NIC filled in.
    pub tx_csum_offloaded: u64,
    /// ATR samples that installed or re-pointed a filter.
    pub tx_atr_filters_set: u64,
    /// ATR samples skipped because the filter table was full.
    pub tx_atr_table_full: u64,
    /// Dropped: the transmit ring had no free slot.
    pub tx_drop_ring_full: u64,
    /// Dropped: an offload was requested for a frame it cannot apply to.
    pub tx_drop_malformed: u64,
}

impl QueueCounters {
    /// Mean descriptors delivered per wake-up; 0 before the first wake-up.
    pub fn descriptors_per_wakeup(&self) -> f64 {
        if self.wakeups == 0 {
            0.0
        } else {
            self.rx_descriptors_polled as f64 / self.wakeups as f64
        }
    }

    /// Mean wire packets per wake-up (`rx_packets / wakeups`); 0 before the first wake-up.
    pub fn packets_per_wakeup(&self) -> f64 {
        if self.wakeups == 0 {
            0.0
        } else {
            self.rx_packets as f64 / self.wakeups as f64
        }
    }

    /// All receive drops.
    pub fn rx_drops(&self) -> u64 {
        self.rx_drop_ring_full
            + self.rx_drop_malformed
            + self.rx_drop_oversize
            + self.rx_drop_no_queue
            + self.rx_drop_rule
    }

    /// All transmit drops.
    pub fn tx_drops(&self) -> u64 {
        self.tx_drop_ring_full + self.tx_drop_malformed
    }
}
