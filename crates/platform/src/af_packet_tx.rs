//! A transmit-only AF_PACKET socket: sends whole Ethernet frames on one interface and
//! receives nothing.
//!
//! A packet socket created with protocol 0 is not attached to any protocol hook until it is
//! bound with a non-zero protocol (packet(7)), so the kernel queues no received frame on it:
//! no ring, no receive buffer to fill. Bound to the interface's index, `send(2)` of a frame
//! that starts with its Ethernet header puts that frame on the interface (the kernel reads
//! the protocol from the header). For a second thread that transmits on an interface whose
//! receive side other sockets own (the offload engine beside the shards).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::af_packet::interface_index;

/// A send-only packet socket bound to one interface (module documentation).
#[derive(Debug)]
pub struct AfPacketSender {
    fd: OwnedFd,
}

impl AfPacketSender {
    /// Opens a non-blocking send-only socket on `ifname`. Needs `CAP_NET_RAW`.
    pub fn open(ifname: &str) -> io::Result<Self> {
        let ifindex = interface_index(ifname)?;
        // SAFETY: plain socket(2); ownership of the fd passes to `OwnedFd` right below.
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
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        // Protocol 0: bound for sending, never hooked for receiving.
        addr.sll_protocol = 0;
        addr.sll_ifindex = i32::try_from(ifindex)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface index"))?;
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
        Ok(AfPacketSender { fd })
    }

    /// Sends one whole Ethernet frame; `WouldBlock` (or `ENOBUFS`) when the device queue is
    /// full.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is a valid readable region of `frame.len()` bytes for the whole call.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl AsFd for AfPacketSender {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_interface_is_an_error_not_a_panic() {
        assert!(AfPacketSender::open("no-such-if-0").is_err());
    }
}
