//! Live per-shard figures for progress views.
//!
//! Each shard is the only writer of its [`ShardLive`] and publishes with relaxed stores a few
//! times per millisecond at most (not per packet); the monitor thread only reads. This is
//! control-path telemetry, not shared state on the data path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How often a shard refreshes its overload figures ([`ShardSnapshot::overload_refused`],
/// [`ShardSnapshot::overload_reclaimed`]): summing the stack's counters costs more than the
/// other figures' loads.
pub const OVERLOAD_PUBLISH_NS: u64 = 100_000_000;

/// The overload figures of `c`: (refused passive opens, reclaimed connections).
pub fn overload_figures(c: &stack::Counters) -> (u64, u64) {
    (
        c.tcp_source_limit + c.tcp_mem_refused_conn + c.tcp_conn_table_full,
        c.tcp_reclaimed_time_wait
            + c.tcp_reclaimed_over_share
            + c.tcp_reclaimed_unused
            + c.tcp_reclaimed_idle
            + c.tcp_reclaimed_stalled
            + c.tcp_zero_window_aborts,
    )
}

/// One shard's published figures (single writer: the shard).
#[derive(Debug, Default)]
pub struct ShardLive {
    rx_packets: AtomicU64,
    tx_frames: AtomicU64,
    connections: AtomicU64,
    busy_ns: AtomicU64,
    elapsed_ns: AtomicU64,
    nic_wakeups: AtomicU64,
    progress: AtomicU64,
    cross_shard: AtomicU64,
    overload_refused: AtomicU64,
    overload_reclaimed: AtomicU64,
    done: AtomicBool,
    started: AtomicBool,
    /// Packets processed per RETA entry, cumulative (empty unless the host rebalances with a
    /// software RETA: the controller's load input).
    buckets: Box<[AtomicU64]>,
}

/// A copy of [`ShardLive`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ShardSnapshot {
    /// Wire packets the shard's stack processed (coalesced segments counted one by one).
    pub rx_packets: u64,
    /// Frames the shard put on the wire.
    pub tx_frames: u64,
    /// TCP connections in the shard's table.
    pub connections: u64,
    /// Time spent in loop iterations that found work, ns.
    pub busy_ns: u64,
    /// Time since the shard started, ns.
    pub elapsed_ns: u64,
    /// NIC wake-ups (moderated interrupts) of the shard's queue.
    pub nic_wakeups: u64,
    /// The application's progress count.
    pub progress: u64,
    /// Cross-shard messages sent.
    pub cross_shard: u64,
    /// Passive opens the overload policy refused: a source over its share, the memory
    /// budget at its high mark, the table full (`tcp_source_limit`, `tcp_mem_refused_conn`,
    /// `tcp_conn_table_full`). Refreshed every [`OVERLOAD_PUBLISH_NS`].
    pub overload_refused: u64,
    /// Connections the overload policy reset to make room (`tcp_reclaimed_*`) or aborted at
    /// a zero window past its limit (`tcp_zero_window_aborts`). Refreshed as above.
    pub overload_reclaimed: u64,
    /// The application said it is done.
    pub done: bool,
    /// The application's `start` has run (its listeners exist).
    pub started: bool,
}

impl ShardSnapshot {
    /// Share of time busy, 0..=1.
    pub fn busy_share(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.busy_ns as f64 / self.elapsed_ns as f64
        }
    }

    /// Packets per NIC wake-up.
    pub fn packets_per_wakeup(&self) -> f64 {
        if self.nic_wakeups == 0 {
            0.0
        } else {
            self.rx_packets as f64 / self.nic_wakeups as f64
        }
    }
}

impl ShardLive {
    /// Figures with `buckets` per-RETA-entry packet counters.
    pub(crate) fn with_buckets(buckets: usize) -> Self {
        ShardLive {
            buckets: (0..buckets).map(|_| AtomicU64::new(0)).collect(),
            ..ShardLive::default()
        }
    }

    /// Publishes the shard's cumulative per-bucket packet counts (owning shard only).
    pub(crate) fn publish_buckets(&self, counts: &[u64]) {
        for (a, &n) in self.buckets.iter().zip(counts) {
            a.store(n, Ordering::Relaxed);
        }
    }

    /// Adds the published per-bucket counts to `out` (as long as the shorter of the two).
    pub(crate) fn add_buckets(&self, out: &mut [u64]) {
        for (o, a) in out.iter_mut().zip(self.buckets.iter()) {
            *o += a.load(Ordering::Relaxed);
        }
    }

    /// Publishes `s` (called by the owning shard only).
    pub(crate) fn publish(&self, s: &ShardSnapshot) {
        let r = Ordering::Relaxed;
        self.rx_packets.store(s.rx_packets, r);
        self.tx_frames.store(s.tx_frames, r);
        self.connections.store(s.connections, r);
        self.busy_ns.store(s.busy_ns, r);
        self.elapsed_ns.store(s.elapsed_ns, r);
        self.nic_wakeups.store(s.nic_wakeups, r);
        self.progress.store(s.progress, r);
        self.cross_shard.store(s.cross_shard, r);
        self.overload_refused.store(s.overload_refused, r);
        self.overload_reclaimed.store(s.overload_reclaimed, r);
        self.done.store(s.done, r);
        self.started.store(s.started, r);
    }

    /// Reads the last published figures.
    pub fn snapshot(&self) -> ShardSnapshot {
        let r = Ordering::Relaxed;
        ShardSnapshot {
            rx_packets: self.rx_packets.load(r),
            tx_frames: self.tx_frames.load(r),
            connections: self.connections.load(r),
            busy_ns: self.busy_ns.load(r),
            elapsed_ns: self.elapsed_ns.load(r),
            nic_wakeups: self.nic_wakeups.load(r),
            progress: self.progress.load(r),
            cross_shard: self.cross_shard.load(r),
            overload_refused: self.overload_refused.load(r),
            overload_reclaimed: self.overload_reclaimed.load(r),
            done: self.done.load(r),
            started: self.started.load(r),
        }
    }
}
