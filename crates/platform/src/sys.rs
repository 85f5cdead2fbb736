//! Thin, checked wrappers over the socket-option system calls the backends share.

use std::io;
use std::os::fd::RawFd;

/// Types every bit pattern of which is a valid value, so the kernel may fill them.
///
/// # Safety
/// Implementors are `#[repr(C)]` aggregates of integers without padding.
pub(crate) unsafe trait PlainData: Default {}
// SAFETY: a plain integer.
unsafe impl PlainData for u32 {}
// SAFETY: two u32s, no padding.
unsafe impl PlainData for [u32; 2] {}
// SAFETY: three u32s, no padding.
unsafe impl PlainData for [u32; 3] {}

/// `setsockopt(fd, level, name, value)`.
pub(crate) fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of `size_of::<T>()` bytes for the whole call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            core::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `getsockopt(fd, level, name)`: the value and how many bytes the kernel wrote.
pub(crate) fn getsockopt<T: PlainData>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<(T, usize)> {
    let mut value = T::default();
    let mut len = core::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a writable `T` of `len` bytes, any bit pattern of which is valid
    // (`PlainData`); the kernel writes at most `len` bytes and updates `len`.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut T).cast(), &mut len) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((value, len as usize))
    }
}
