//! The transmit path's frame-buffer pool: buffers the driver hands back (`Stack::recycle`)
//! are reused for the next frames, so a steady flow allocates nothing per packet, and a
//! burst's buffers go back to the allocator once the burst is over.
//!
//! Invariants: `free.len()` ≤ `TX_FREE_FRAMES_MAX`, each of capacity ≤ MTU +
//! `TX_FREE_SLACK_BYTES`; `free_tso.len()` ≤ `TX_FREE_TSO_FRAMES_MAX` (kept only when TSO is
//! on); a trim is armed (`trim_at_ns`) only while `free` holds more than its floor.

/// Recycled transmit buffers kept for reuse (`TxPool::recycle`); more are freed. At least the
/// frames a shard can have in flight, so a steady flow neither frees nor allocates: on the
/// runtime's `mem` wire, a bulk sender's buffers fill the wire's transmit ring (4096 slots by
/// default) and the NIC model's (512) before they come back as transmit completions, all at
/// once if the receiver stalls. (256 freed and re-allocated about one buffer in ten there.)
const TX_FREE_FRAMES_MAX: usize = 5120;
/// `TxPool::recycle` keeps buffers of capacity ≤ MTU + this (Ethernet header and TCP options
/// room): with `TX_FREE_FRAMES_MAX`, at most about 8 MiB at a 1500-byte MTU, held only once that
/// many frames were in flight at once.
const TX_FREE_SLACK_BYTES: usize = 128;
/// Recycled TSO-sized buffers kept (beyond the MTU, up to a 64 KiB frame each): at most
/// 16 MiB, about what a socket's worth of large frames in flight needs.
const TX_FREE_TSO_FRAMES_MAX: usize = 256;
/// Capacity of a TSO frame buffer: the largest frame TSO builds.
const TX_TSO_FRAME_BYTES: usize = 14 + 65_535;
/// Free frame buffers the pool may always keep (about 50 KiB at a 1500-byte MTU; a steady flow
/// keeps what it needs by the trim rule, twice what a period took).
const TX_FREE_FRAMES_FLOOR: usize = 32;
/// The pool's trim period: once a period, buffers beyond twice what the transmit path took
/// during it (and beyond the floor) are freed, so a burst's buffers (a thousand connections'
/// worth of in-flight frames) go back to the allocator once the burst is over, while a steady
/// flow, taking more than the pool holds every period, keeps them all and allocates nothing.
const TX_FREE_TRIM_PERIOD_NS: u64 = 10_000_000_000;

/// The pool (module documentation).
#[derive(Debug)]
pub(crate) struct TxPool {
    /// MTU-sized buffers.
    free: Vec<Vec<u8>>,
    /// TSO-sized buffers (capacity above the MTU's, up to a 64 KiB frame).
    free_tso: Vec<Vec<u8>>,
    /// Buffers taken from `free` since the last trim, and when the next trim is due.
    taken: u32,
    trim_at_ns: Option<u64>,
    mtu_bytes: u16,
    /// TSO is on: large buffers are worth keeping.
    tso: bool,
}

impl TxPool {
    pub(crate) fn new(mtu_bytes: u16, tso: bool) -> TxPool {
        TxPool {
            free: Vec::new(),
            free_tso: Vec::new(),
            taken: 0,
            trim_at_ns: None,
            mtu_bytes,
            tso,
        }
    }

    /// When the next trim is due: only while the pool holds more than its floor (`Some(0)`,
    /// due at once, until the first trim arms the period).
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        if self.free.len() > TX_FREE_FRAMES_FLOOR {
            Some(self.trim_at_ns.unwrap_or(0))
        } else {
            None
        }
    }

    /// Frees the buffers beyond twice what the transmit path took in the last period (and
    /// beyond the floor), once a period while the pool holds more than the floor. Returns
    /// how many it freed.
    pub(crate) fn trim(&mut self, now: u64) -> u64 {
        if self.free.len() <= TX_FREE_FRAMES_FLOOR {
            self.trim_at_ns = None;
            self.taken = 0;
            return 0;
        }
        let mut trimmed = 0;
        match self.trim_at_ns {
            None => {
                // First time above the floor: the period starts now.
                self.taken = 0;
                self.trim_at_ns = Some(now.saturating_add(TX_FREE_TRIM_PERIOD_NS));
            }
            Some(at) if now >= at => {
                let keep = TX_FREE_FRAMES_FLOOR.max(2 * self.taken as usize);
                if self.free.len() > keep {
                    trimmed = (self.free.len() - keep) as u64;
                    self.free.truncate(keep);
                    self.free.shrink_to(keep);
                }
                self.taken = 0;
                self.trim_at_ns = (self.free.len() > TX_FREE_FRAMES_FLOOR)
                    .then(|| now.saturating_add(TX_FREE_TRIM_PERIOD_NS));
            }
            Some(_) => {}
        }
        trimmed
    }

    /// Keeps `frame` for reuse when it fits the pool's bounds; drops it otherwise.
    pub(crate) fn recycle(&mut self, frame: Vec<u8>) {
        let capacity_max = usize::from(self.mtu_bytes) + TX_FREE_SLACK_BYTES;
        if frame.capacity() <= capacity_max {
            if self.free.len() < TX_FREE_FRAMES_MAX {
                self.free.push(frame);
            }
        } else if self.tso
            && frame.capacity() <= TX_TSO_FRAME_BYTES + TX_FREE_SLACK_BYTES
            && self.free_tso.len() < TX_FREE_TSO_FRAMES_MAX
        {
            self.free_tso.push(frame);
        }
    }

    /// A frame buffer of exactly `len` bytes, reused when one is free. Its contents are
    /// unspecified (a reused buffer keeps old bytes): callers overwrite every byte they keep.
    /// Only the part a recycled buffer lacks is zero-filled, so in steady state nothing is.
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        self.taken = self.taken.saturating_add(1);
        let free = if len > usize::from(self.mtu_bytes) + TX_FREE_SLACK_BYTES {
            &mut self.free_tso
        } else {
            &mut self.free
        };
        let mut buf = free.pop().unwrap_or_else(|| Vec::with_capacity(len));
        buf.resize(len, 0);
        buf
    }
}
