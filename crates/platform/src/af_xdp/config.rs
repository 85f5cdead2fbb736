//! What an AF_XDP socket is asked for (ring and UMEM sizes, bind mode) and what it counts.

use super::*;

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
