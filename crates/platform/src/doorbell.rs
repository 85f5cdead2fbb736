//! A doorbell between threads that a `ppoll(2)` sleeper hears: an `eventfd(2)` in
//! non-blocking mode.
//!
//! A thread asleep in `ppoll` on its port's descriptor does not see `Thread::unpark`. When
//! another thread hands it work on a ring, it rings this doorbell; the sleeper polls the
//! doorbell's descriptor beside its port's and, once woken, [`Doorbell::clear`]s it. Rings
//! coalesce: the counter only says "something came", the rings say what.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// An `eventfd` (module documentation). `ring` and `clear` take `&self`: any thread may
/// ring, the owner clears.
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
}

impl Doorbell {
    /// A new doorbell, silent.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain eventfd(2) with no pointer arguments; ownership of the fd passes to
        // `OwnedFd` right below.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Doorbell { fd })
    }

    /// Rings: the descriptor becomes readable. Never blocks; a counter at its maximum (not
    /// reachable in practice: 2^64 − 2 rings without a clear) leaves it readable anyway.
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of a live u64, as eventfd(2) requires.
        let _ = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                core::mem::size_of::<u64>(),
            )
        };
    }

    /// Silences it; returns whether it had rung since the last clear.
    pub fn clear(&self) -> bool {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64, as eventfd(2) requires.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                core::mem::size_of::<u64>(),
            )
        };
        n == 8 && count > 0
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait::wait_readable_ns;

    #[test]
    fn a_ring_wakes_a_poller_and_a_clear_silences_it() {
        let d = Doorbell::new().expect("eventfd");
        assert!(!wait_readable_ns(d.as_fd(), 0).expect("poll"));
        assert!(!d.clear());
        d.ring();
        d.ring();
        assert!(wait_readable_ns(d.as_fd(), 0).expect("poll"));
        assert!(d.clear());
        assert!(!wait_readable_ns(d.as_fd(), 0).expect("poll"));
    }

    #[test]
    fn another_thread_rings() {
        let d = std::sync::Arc::new(Doorbell::new().expect("eventfd"));
        let d2 = d.clone();
        let t = std::thread::spawn(move || d2.ring());
        // Up to 5 s: the other thread rings at once.
        assert!(wait_readable_ns(d.as_fd(), 5_000_000_000).expect("poll"));
        t.join().expect("join");
        assert!(d.clear());
    }
}
