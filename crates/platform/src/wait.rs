//! Waiting for a file descriptor with sub-millisecond timeouts (`ppoll(2)`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Waits until `fd` is readable (or has an error or hang-up) or `timeout_ns` passes.
/// Returns whether it is ready; `EINTR` (a signal) counts as not ready, so the caller's loop
/// sees its stop flag promptly.
pub fn wait_readable_ns(fd: BorrowedFd<'_>, timeout_ns: u64) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout_ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `pfd` is one live pollfd and `ts` a live timespec for the whole call; a null
    // signal mask keeps the thread's mask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, core::ptr::null()) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(err)
        };
    }
    Ok(rc > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

/// Most descriptors [`wait_any_readable_ns`] watches (its `pollfd` array lives on the stack).
pub const WAIT_FDS_MAX: usize = 16;

/// Waits until any of `fds` (at most [`WAIT_FDS_MAX`]; more is `InvalidInput`) is readable
/// (or has an error or hang-up) or `timeout_ns` passes; returns whether one is. `EINTR`
/// counts as not ready. Allocates nothing.
pub fn wait_any_readable_ns(fds: &[BorrowedFd<'_>], timeout_ns: u64) -> io::Result<bool> {
    if fds.len() > WAIT_FDS_MAX {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; WAIT_FDS_MAX];
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd.as_raw_fd();
        p.events = libc::POLLIN;
    }
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout_ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `pfds` holds `fds.len()` (≤ its length) initialised pollfds, live for the whole
    // call, as is `ts`; a null signal mask keeps the thread's mask.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            core::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(err)
        };
    }
    let ready = libc::POLLIN | libc::POLLERR | libc::POLLHUP;
    Ok(rc > 0 && pfds.iter().take(fds.len()).any(|p| p.revents & ready != 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn readable_only_once_data_is_waiting_and_the_timeout_is_kept() {
        let (mut a, b) = UnixStream::pair().expect("pair");
        let start = std::time::Instant::now();
        assert!(!wait_readable_ns(b.as_fd(), 300_000).expect("wait"));
        assert!(start.elapsed() >= std::time::Duration::from_micros(250));
        a.write_all(b"x").expect("write");
        assert!(wait_readable_ns(b.as_fd(), 1_000_000_000).expect("wait"));
    }

    #[test]
    fn any_of_several_wakes_the_wait() {
        let (_a, b) = UnixStream::pair().expect("pair");
        let (mut c, d) = UnixStream::pair().expect("pair");
        assert!(!wait_any_readable_ns(&[b.as_fd(), d.as_fd()], 200_000).expect("wait"));
        c.write_all(b"x").expect("write");
        assert!(wait_any_readable_ns(&[b.as_fd(), d.as_fd()], 1_000_000_000).expect("wait"));
        let many: Vec<_> = (0..=WAIT_FDS_MAX).map(|_| b.as_fd()).collect();
        assert!(wait_any_readable_ns(&many, 0).is_err());
    }
}
