//! When a shard asks its driver to give freed heap memory back to the OS (issue 20 item 2).
//!
//! A stack's TCP buffers (`stack::tcp_mem`) go back to the allocator when their connections
//! close, but the C allocator keeps freed memory for later, so the process stays at its peak
//! resident size. The driver can return it (`platform::heap::trim_heap`: glibc's
//! `malloc_trim`), which walks the whole heap: worth it only after a large drop, and not after
//! every close. [`MemTrim`] decides, on the shard's clock, from the stack's TCP buffer bytes
//! sampled once per pool-reap tick (`POOL_REAP_INTERVAL_NS`):
//!
//! - it keeps a high-water mark of the bytes seen since the last trim;
//! - a trim is due when the bytes have fallen at least [`MEM_TRIM_DROP_MIN_BYTES`] below the
//!   mark and to at most half of it ("well below" the mark), and at least
//!   [`MEM_TRIM_INTERVAL_NS`] passed since the previous trim;
//! - a due trim resets the mark to the current bytes, so the next one needs a new rise and
//!   fall;
//! - one follow-up trim comes [`MEM_TRIM_INTERVAL_NS`] after a trim, without a new fall: what
//!   the pools give back later (the transmit pool trims every 10 s, the NIC pool every
//!   second, the socket table compacts as the last connections go) goes back to the OS too.
//!
//! The shard only decides ([`crate::Shard::poll_mem_trim`]); the driver trims and reports
//! what the resident size did ([`crate::Shard::note_mem_trim`], counted `mem_trims` and
//! `mem_trim_released_bytes`). A driver that cannot trim (the simulator) never polls, and no
//! trim is counted.

/// The least drop below the high-water mark that makes a trim worth its heap walk.
pub const MEM_TRIM_DROP_MIN_BYTES: usize = 8 << 20;

/// The least time between two trims of one shard.
pub const MEM_TRIM_INTERVAL_NS: u64 = 10_000_000_000;

/// The trim decision of one shard (module documentation). Invariant: `due` implies that
/// `last_trim_ns` is the time it became due.
#[derive(Debug, Clone, Default)]
pub struct MemTrim {
    /// Highest TCP buffer bytes seen since the last trim (or the start).
    mark_bytes: usize,
    /// When the last trim became due.
    last_trim_ns: Option<u64>,
    /// A trim is due and the driver has not taken it.
    due: bool,
    /// A drop qualifies but the interval has not passed: observe again at this time.
    retry_at_ns: Option<u64>,
    /// The follow-up of the last trim that a fall caused: due at this time.
    follow_up_at_ns: Option<u64>,
}

impl MemTrim {
    /// Records `bytes` at `now_ns` and decides whether a trim is due.
    pub fn observe(&mut self, now_ns: u64, bytes: usize) {
        self.mark_bytes = self.mark_bytes.max(bytes);
        self.retry_at_ns = None;
        if self.due {
            // The trim not yet taken covers a follow-up that came due meanwhile: drop it, or
            // `retry_at_ns` would stay in the past and the shard's loop would wake forever
            // under a driver that never trims (the simulator).
            if self.follow_up_at_ns.is_some_and(|at| now_ns >= at) {
                self.follow_up_at_ns = None;
            }
            return;
        }
        if let Some(at) = self.follow_up_at_ns
            && now_ns >= at
        {
            self.follow_up_at_ns = None;
            self.due = true;
            self.last_trim_ns = Some(now_ns);
            self.mark_bytes = bytes;
            return;
        }
        let dropped = self.mark_bytes - bytes;
        if dropped < MEM_TRIM_DROP_MIN_BYTES || bytes > self.mark_bytes / 2 {
            return;
        }
        if let Some(last) = self.last_trim_ns {
            let next = last.saturating_add(MEM_TRIM_INTERVAL_NS);
            if now_ns < next {
                self.retry_at_ns = Some(next);
                return;
            }
        }
        self.due = true;
        self.last_trim_ns = Some(now_ns);
        self.mark_bytes = bytes;
        self.follow_up_at_ns = Some(now_ns.saturating_add(MEM_TRIM_INTERVAL_NS));
    }

    /// Whether a trim is due; taking it clears it.
    pub fn take(&mut self) -> bool {
        std::mem::take(&mut self.due)
    }

    /// When to observe again for a trim held back by the interval or for a follow-up (for
    /// the shard's `poll_timeout`), or `None`.
    pub fn retry_at_ns(&self) -> Option<u64> {
        match (self.retry_at_ns, self.follow_up_at_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The high-water mark since the last trim.
    pub fn mark_bytes(&self) -> usize {
        self.mark_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const MIB: usize = 1 << 20;

    #[test]
    fn a_trim_is_due_once_after_a_large_fall_below_the_mark() {
        let mut t = MemTrim::default();
        t.observe(S, 0);
        t.observe(2 * S, 100 * MIB);
        assert!(!t.take(), "rising: nothing to give back");
        t.observe(3 * S, 60 * MIB);
        assert!(!t.take(), "above half the mark: not well below it");
        t.observe(4 * S, 40 * MIB);
        assert!(t.take());
        assert!(!t.take(), "taken once");
        assert_eq!(
            t.mark_bytes(),
            40 * MIB,
            "the mark restarts from the bytes at the trim"
        );
        t.observe(5 * S, 40 * MIB);
        assert!(!t.take(), "no new fall, no trim");
        assert_eq!(t.retry_at_ns(), Some(4 * S + MEM_TRIM_INTERVAL_NS));
        t.observe(4 * S + MEM_TRIM_INTERVAL_NS, 30 * MIB);
        assert!(
            t.take(),
            "the follow-up, for what the pools gave back since"
        );
        assert_eq!(t.retry_at_ns(), None);
        t.observe(60 * S, 30 * MIB);
        assert!(!t.take(), "one follow-up only");
    }

    #[test]
    fn small_falls_never_trim() {
        let mut t = MemTrim::default();
        t.observe(S, MEM_TRIM_DROP_MIN_BYTES - 1);
        t.observe(2 * S, 0);
        assert!(!t.take());
        t.observe(3 * S, 0);
        assert!(!t.take());
    }

    #[test]
    fn trims_are_at_least_the_interval_apart_and_a_held_one_asks_to_be_woken() {
        let mut t = MemTrim::default();
        t.observe(S, 64 * MIB);
        t.observe(2 * S, 0);
        assert!(t.take());
        t.observe(3 * S, 64 * MIB);
        t.observe(4 * S, 0);
        assert!(!t.take(), "within the interval of the last trim");
        assert_eq!(t.retry_at_ns(), Some(2 * S + MEM_TRIM_INTERVAL_NS));
        t.observe(2 * S + MEM_TRIM_INTERVAL_NS, 0);
        assert!(t.take(), "the held trim at the end of the interval");
        assert_eq!(t.retry_at_ns(), None);
    }

    #[test]
    fn a_trim_the_driver_never_takes_does_not_keep_asking_to_be_woken() {
        let mut t = MemTrim::default();
        t.observe(S, 64 * MIB);
        t.observe(2 * S, 0);
        assert!(t.due, "a large fall makes a trim due");
        let follow_up = t.retry_at_ns().expect("a follow-up is scheduled");
        // The driver never calls `take` (the simulator): at the follow-up time the pending
        // trim covers it, and nothing is left to wake for.
        t.observe(follow_up, 0);
        assert_eq!(t.retry_at_ns(), None);
        t.observe(follow_up + S, 0);
        assert_eq!(t.retry_at_ns(), None);
    }
}
