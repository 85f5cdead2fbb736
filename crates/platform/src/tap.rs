//! Linux TAP devices (`/dev/net/tun` with `IFF_TAP`), optionally multi-queue (`IFF_MULTI_QUEUE`):
//! one file descriptor per queue, each carrying whole Ethernet frames.
//!
//! The kernel spreads the frames it transmits into the TAP over the queues with its own flow
//! hash (or a steering eBPF program); rsstack's NIC model re-steers them with its Toeplitz hash
//! and RETA, so which fd a frame arrives on does not decide which shard owns it.
//!
//! Every fd is non-blocking: `recv` returns `ErrorKind::WouldBlock` when the queue is empty, and
//! [`wait_readable`] sleeps until one of several queues has a frame or a timeout passes.
//! A device this process creates disappears when its last fd closes (it is never made
//! persistent here); a persistent device created beforehand (`ip tuntap add … multi_queue`)
//! is attached to, and stays when the fds close.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use crate::vnet::{VNET_HDR_BYTES, VnetHdr};

/// `IFNAMSIZ`: interface names are at most 15 bytes plus the terminating NUL.
pub const IFNAMSIZ: usize = 16;
/// Queues a multi-queue TAP may have (the kernel's `MAX_TAP_QUEUES`).
pub const MAX_QUEUES: usize = 256;

const TUN_PATH: &CStr = c"/dev/net/tun";
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `_IOW('T', 216, int)`.
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

/// Offloads asked of a TAP device opened with a virtio-net header in front of every frame
/// (`IFF_VNET_HDR`, see [`crate::vnet`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapOffload {
    /// `TUNSETOFFLOAD` flags ([`crate::vnet::tun_f`]): what the kernel may hand us (partial
    /// checksums, coalesced TCP frames). Frames we write may ask for segmentation and
    /// checksums whatever these say.
    pub tun_flags: u32,
}

/// `struct ifreq` with the flags member of its union (the layout `TUNSETIFF` and
/// `SIOC[GS]IFFLAGS` read): 16 name bytes, then a 24-byte union.
#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl IfReqFlags {
    fn new(name: &str) -> io::Result<Self> {
        let bytes = name.as_bytes();
        if bytes.is_empty()
            || bytes.len() >= IFNAMSIZ
            || bytes.contains(&0)
            || bytes.contains(&b'/')
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name {name:?} must be 1 to 15 bytes without NUL or '/'"),
            ));
        }
        let mut req = IfReqFlags {
            name: [0; IFNAMSIZ],
            flags: 0,
            _pad: [0; 22],
        };
        for (dst, &src) in req.name.iter_mut().zip(bytes) {
            *dst = src as libc::c_char;
        }
        Ok(req)
    }
}

/// One queue of a TAP device: a non-blocking fd that reads and writes whole Ethernet frames.
#[derive(Debug)]
pub struct TapQueue {
    file: File,
    /// Opened with `IFF_VNET_HDR`: every read and write carries a
    /// [`crate::vnet::VnetHdr`] in front of the frame.
    vnet: bool,
}

impl TapQueue {
    /// Reads one frame into `buf`; `WouldBlock` when none is waiting. A frame longer than `buf`
    /// is truncated by the kernel, so give a buffer of at least MTU + 14 (+4 for a VLAN tag).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is a valid, writable region of `buf.len()` bytes for the whole call and
        // the fd is owned by `self.file`.
        let n = unsafe { libc::read(self.file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Writes one whole frame; `WouldBlock` when the kernel's queue is full.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is a valid, readable region of `frame.len()` bytes for the whole call.
        let n = unsafe { libc::write(self.file.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl TapQueue {
    /// True when every frame carries a virtio-net header (use [`TapQueue::recv_vnet`] and
    /// [`TapQueue::send_vnet`]).
    pub fn has_vnet_hdr(&self) -> bool {
        self.vnet
    }

    /// Reads one frame into `buf` and its virtio-net header into the returned header; the
    /// length is the frame's alone. `WouldBlock` when none is waiting; a frame longer than
    /// `buf` is truncated (the length then equals `buf.len()`). Only for a queue opened with
    /// a header ([`TapQueue::has_vnet_hdr`]).
    pub fn recv_vnet(&self, buf: &mut [u8]) -> io::Result<(usize, VnetHdr)> {
        let mut hdr = [0u8; VNET_HDR_BYTES];
        let iov = [
            libc::iovec {
                iov_base: hdr.as_mut_ptr().cast(),
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            },
        ];
        // SAFETY: both iovecs describe valid, writable, non-overlapping regions (`hdr` on the
        // stack, `buf` exclusively borrowed) that live for the whole call; the count is 2.
        let n = unsafe { libc::readv(self.file.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n < VNET_HDR_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("tap read of {n} bytes is shorter than the virtio-net header"),
            ));
        }
        Ok((n - VNET_HDR_BYTES, VnetHdr::decode(&hdr)))
    }

    /// As [`TapQueue::recv_vnet`], reading into `buf`'s spare capacity (cleared first, room
    /// for `capacity_bytes` reserved) without zero-filling it: `buf` ends up holding exactly
    /// the frame. The way to read 64 KiB coalesced frames into pooled buffers without
    /// clearing 64 KiB per small frame.
    pub fn recv_vnet_vec(
        &self,
        buf: &mut Vec<u8>,
        capacity_bytes: usize,
    ) -> io::Result<(usize, VnetHdr)> {
        buf.clear();
        buf.reserve(capacity_bytes);
        let spare = buf.spare_capacity_mut();
        let room = spare.len().min(capacity_bytes);
        let mut hdr = [0u8; VNET_HDR_BYTES];
        let iov = [
            libc::iovec {
                iov_base: hdr.as_mut_ptr().cast(),
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: spare.as_mut_ptr().cast(),
                iov_len: room,
            },
        ];
        // SAFETY: the iovecs describe `hdr` (on the stack) and the first `room` bytes of
        // `buf`'s spare capacity, both writable, non-overlapping and alive for the whole call;
        // the kernel only writes into them.
        let n = unsafe { libc::readv(self.file.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n < VNET_HDR_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("tap read of {n} bytes is shorter than the virtio-net header"),
            ));
        }
        let len = (n - VNET_HDR_BYTES).min(room);
        // SAFETY: readv initialised the first `len` ≤ `room` ≤ capacity bytes of the spare
        // capacity (the bytes it reported beyond the header landed there, in order).
        unsafe { buf.set_len(len) };
        Ok((len, VnetHdr::decode(&hdr)))
    }

    /// Writes one whole frame behind the virtio-net header `hdr` (one `writev`);
    /// `WouldBlock` when the kernel's queue is full. Returns the frame bytes written. Only
    /// for a queue opened with a header.
    pub fn send_vnet(&self, hdr: &VnetHdr, frame: &[u8]) -> io::Result<usize> {
        let h = hdr.encode();
        let iov = [
            libc::iovec {
                iov_base: h.as_ptr() as *mut libc::c_void,
                iov_len: h.len(),
            },
            libc::iovec {
                iov_base: frame.as_ptr() as *mut libc::c_void,
                iov_len: frame.len(),
            },
        ];
        // SAFETY: both iovecs describe valid, readable regions that live for the whole call;
        // writev only reads through them (the `*mut` is the C signature's, not a write).
        let n = unsafe { libc::writev(self.file.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok((n as usize).saturating_sub(VNET_HDR_BYTES))
        }
    }
}

impl AsFd for TapQueue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl AsRawFd for TapQueue {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// A TAP device with one or more queues.
///
/// Invariant: `queues.len()` is between 1 and [`MAX_QUEUES`], and every queue is attached to the
/// interface called `name`.
#[derive(Debug)]
pub struct TapDevice {
    name: String,
    queues: Vec<TapQueue>,
}

impl TapDevice {
    /// Creates (or attaches to) the TAP interface `name` with `queues` queues. With more than one
    /// queue the device is multi-queue. Needs `CAP_NET_ADMIN`. Without a virtio-net header the
    /// device's offloads are switched off (`TUNSETOFFLOAD` 0), whatever an earlier user of a
    /// persistent device set: every frame read is whole and checksummed.
    pub fn open(name: &str, queues: usize) -> io::Result<Self> {
        Self::open_with(name, queues, queues > 1, None)
    }

    /// As [`TapDevice::open`] (`multi_queue` as [`TapDevice::open_multi_queue`] when set),
    /// with a virtio-net header in front of every frame (`IFF_VNET_HDR`, header size set to
    /// [`VNET_HDR_BYTES`] with `TUNSETVNETHDRSZ`) and `offload.tun_flags` given to
    /// `TUNSETOFFLOAD` on every queue.
    pub fn open_vnet(
        name: &str,
        queues: usize,
        multi_queue: bool,
        offload: TapOffload,
    ) -> io::Result<Self> {
        Self::open_with(name, queues, multi_queue || queues > 1, Some(offload))
    }

    /// As [`TapDevice::open`], but always with `IFF_MULTI_QUEUE`, even for one queue: the
    /// form that attaches to a persistent device created with `multi_queue` (the kernel
    /// refuses a `TUNSETIFF` whose multi-queue flag differs from the device's, `EINVAL`).
    pub fn open_multi_queue(name: &str, queues: usize) -> io::Result<Self> {
        Self::open_with(name, queues, true, None)
    }

    fn open_with(
        name: &str,
        queues: usize,
        multi_queue: bool,
        vnet: Option<TapOffload>,
    ) -> io::Result<Self> {
        if queues == 0 || queues > MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a TAP device has 1 to {MAX_QUEUES} queues, not {queues}"),
            ));
        }
        let mut flags = IFF_TAP | IFF_NO_PI;
        if multi_queue {
            flags |= IFF_MULTI_QUEUE;
        }
        if vnet.is_some() {
            flags |= IFF_VNET_HDR;
        }
        let mut opened = Vec::with_capacity(queues);
        let mut actual_name = name.to_string();
        for _ in 0..queues {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(TUN_PATH.to_str().unwrap_or("/dev/net/tun"))?;
            let mut req = IfReqFlags::new(&actual_name)?;
            req.flags = flags;
            // SAFETY: TUNSETIFF reads and writes a `struct ifreq`; `req` is a properly laid out,
            // live, exclusively borrowed `IfReqFlags` of the same size for the whole call.
            let rc = unsafe {
                libc::ioctl(
                    file.as_raw_fd(),
                    TUNSETIFF as _,
                    &mut req as *mut IfReqFlags,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            // The kernel writes back the name it chose (it may fill a `%d` pattern).
            let len = req.name.iter().position(|&c| c == 0).unwrap_or(IFNAMSIZ);
            actual_name = req.name[..len].iter().map(|&c| c as u8 as char).collect();
            if vnet.is_none() {
                // A persistent device keeps the offloads an earlier user set: a reader without
                // the header could not tell a coalesced or partially checksummed frame.
                // SAFETY: TUNSETOFFLOAD takes its flags as the argument value itself.
                let rc = unsafe {
                    libc::ioctl(file.as_raw_fd(), TUNSETOFFLOAD as _, 0 as libc::c_ulong)
                };
                if rc < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(off) = vnet {
                let size: libc::c_int = VNET_HDR_BYTES as libc::c_int;
                // SAFETY: TUNSETVNETHDRSZ reads one `int` through the pointer; `size` lives
                // on the stack for the whole call.
                let rc = unsafe {
                    libc::ioctl(
                        file.as_raw_fd(),
                        TUNSETVNETHDRSZ as _,
                        &size as *const libc::c_int,
                    )
                };
                if rc < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: TUNSETOFFLOAD takes its flags as the argument value itself (an
                // unsigned long), no pointer.
                let rc = unsafe {
                    libc::ioctl(
                        file.as_raw_fd(),
                        TUNSETOFFLOAD as _,
                        libc::c_ulong::from(off.tun_flags),
                    )
                };
                if rc < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            opened.push(TapQueue {
                file,
                vnet: vnet.is_some(),
            });
        }
        Ok(TapDevice {
            name: actual_name,
            queues: opened,
        })
    }

    /// The interface name the kernel gave the device.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queues, in the order they were attached.
    pub fn queues(&self) -> &[TapQueue] {
        &self.queues
    }

    /// Splits the device into its queues (for handing one to each shard). The interface lives
    /// until the last queue is dropped.
    pub fn into_queues(self) -> Vec<TapQueue> {
        self.queues
    }

    /// Sets the interface administratively up (`ip link set NAME up`).
    pub fn set_up(&self) -> io::Result<()> {
        set_interface_up(&self.name)
    }
}

/// Sets interface `name` up through `SIOCGIFFLAGS`/`SIOCSIFFLAGS` on a datagram socket.
pub fn set_interface_up(name: &str) -> io::Result<()> {
    // SAFETY: plain socket(2) call; the returned fd is closed below on every path.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(io::Error::last_os_error());
    }
    let result = (|| {
        let mut req = IfReqFlags::new(name)?;
        // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read/write a `struct ifreq`; `req` is a live,
        // exclusively borrowed, correctly sized `IfReqFlags`.
        if unsafe { libc::ioctl(sock, libc::SIOCGIFFLAGS as _, &mut req as *mut IfReqFlags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        req.flags |= libc::IFF_UP as libc::c_short;
        // SAFETY: as above.
        if unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS as _, &mut req as *mut IfReqFlags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    // SAFETY: `sock` is an fd we own and close exactly once.
    unsafe { libc::close(sock) };
    result
}

/// Waits until at least one of `fds` is readable or `timeout_ms` passes (`-1`: forever).
/// Returns the indices of the readable fds (empty on timeout). `EINTR` counts as a timeout.
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<Vec<usize>> {
    let mut pollfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pollfds` is a valid array of `pollfds.len()` initialised `pollfd`s that lives for
    // the whole call.
    let rc = unsafe {
        libc::poll(
            pollfds.as_mut_ptr(),
            pollfds.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(Vec::new())
        } else {
            Err(err)
        };
    }
    Ok(pollfds
        .iter()
        .enumerate()
        .filter(|(_, p)| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
        .map(|(i, _)| i)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_validated_before_any_system_call() {
        for bad in ["", "a-name-that-is-too-long", "bad/name", "nul\0"] {
            let err = TapDevice::open(bad, 1).expect_err(bad);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert_eq!(
            TapDevice::open("rsst0", 0).expect_err("0 queues").kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            TapDevice::open("rsst0", 257).expect_err("257").kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn ifreq_has_the_kernel_layout() {
        assert_eq!(core::mem::size_of::<IfReqFlags>(), 40);
    }
}
