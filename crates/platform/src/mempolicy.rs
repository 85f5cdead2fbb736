//! Node-local memory: the calling thread's NUMA memory policy (Linux `set_mempolicy(2)` and
//! `get_mempolicy(2)`, called through `libc::syscall`: glibc has no wrapper, libnuma is not a
//! dependency).
//!
//! A shard thread pinned to a CPU of node `n` already gets node `n`'s memory for what it
//! touches first (the kernel's default *local* policy). [`prefer_node`] makes that explicit
//! and keeps it true when the thread runs elsewhere (pinning failed, or the scheduler moved an
//! unpinned thread): `MPOL_PREFERRED` asks for node `n` first and falls back to the others
//! when `n` is full. `MPOL_BIND` would fail allocations (OOM) instead of falling back; a
//! network stack whose buffers are a fixed, bounded pool gains nothing from that hard edge, so
//! this module offers the preference only.
//!
//! The policy is per thread and covers pages the thread faults in after the call; pages
//! already present keep their node. Failures are reported, never fatal: a container's seccomp
//! profile may refuse the call (`EPERM`), a kernel without NUMA support has no such call
//! (`ENOSYS`), and a node the machine lacks is `EINVAL`.

use std::io;

/// Nodes a mask passed to the kernel can name (the kernel's largest `MAX_NUMNODES`).
pub const NODES_MAX: usize = 1024;

const MASK_WORDS: usize = NODES_MAX / 64;

/// The calling thread's memory policy as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadPolicy {
    /// `MPOL_DEFAULT`: the system default (local allocation).
    Default,
    /// `MPOL_PREFERRED` for these nodes (one node as set by [`prefer_node`]).
    Preferred(Vec<usize>),
    /// Another mode (`MPOL_BIND`, `MPOL_INTERLEAVE`, …): its number and its nodes.
    Other { mode: i32, nodes: Vec<usize> },
}

/// Asks the kernel to allocate the calling thread's future pages on `node` first
/// (`set_mempolicy(MPOL_PREFERRED, {node})`), falling back to other nodes when it is full.
///
/// Errors: `InvalidInput` for `node >= NODES_MAX`; otherwise the OS error (`EINVAL` for a node
/// the machine does not have, `EPERM` under a seccomp profile that forbids it, `ENOSYS`
/// without NUMA support). On error the thread's policy is unchanged.
#[cfg(target_os = "linux")]
pub fn prefer_node(node: usize) -> io::Result<()> {
    if node >= NODES_MAX {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut mask = [0u64; MASK_WORDS];
    mask[node / 64] |= 1 << (node % 64);
    set_policy(libc::MPOL_PREFERRED, Some(&mask))
}

/// Returns the calling thread to the default policy (`MPOL_DEFAULT`).
#[cfg(target_os = "linux")]
pub fn reset() -> io::Result<()> {
    set_policy(libc::MPOL_DEFAULT, None)
}

#[cfg(target_os = "linux")]
fn set_policy(mode: i32, mask: Option<&[u64; MASK_WORDS]>) -> io::Result<()> {
    let (ptr, maxnode) = match mask {
        // The kernel reads `maxnode - 1` bits (a historical off-by-one every caller, numactl
        // included, compensates for): pass one more than the mask holds.
        Some(m) => (m.as_ptr(), NODES_MAX as libc::c_ulong + 1),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: set_mempolicy reads at most `maxnode - 1` = NODES_MAX bits from `ptr`, which
    // points to a live array of exactly NODES_MAX bits (or is null with maxnode 0, which the
    // kernel accepts for MPOL_DEFAULT). It writes no user memory and affects only the calling
    // thread's policy.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's memory policy (`get_mempolicy` with no address and no flags).
#[cfg(target_os = "linux")]
pub fn current() -> io::Result<ThreadPolicy> {
    let mut mode: libc::c_int = 0;
    let mut mask = [0u64; MASK_WORDS];
    // SAFETY: `mode` is a live c_int and `mask` a live array of NODES_MAX bits, and maxnode
    // says exactly that many: the kernel writes one int and at most NODES_MAX bits. A null
    // address with flags 0 asks for the calling thread's policy and reads no user memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            NODES_MAX as libc::c_ulong,
            std::ptr::null::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let nodes: Vec<usize> = (0..NODES_MAX)
        .filter(|&n| mask[n / 64] & (1 << (n % 64)) != 0)
        .collect();
    Ok(match mode {
        libc::MPOL_DEFAULT => ThreadPolicy::Default,
        libc::MPOL_PREFERRED => ThreadPolicy::Preferred(nodes),
        mode => ThreadPolicy::Other { mode, nodes },
    })
}

/// Memory policies are not supported on this OS.
#[cfg(not(target_os = "linux"))]
pub fn prefer_node(_node: usize) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Memory policies are not supported on this OS.
#[cfg(not(target_os = "linux"))]
pub fn reset() -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Memory policies are not supported on this OS.
#[cfg(not(target_os = "linux"))]
pub fn current() -> io::Result<ThreadPolicy> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// True for the errors that mean "this system does not let a thread set a memory policy"
/// (`ENOSYS`, `EPERM`, or an OS without the call), as opposed to a bad argument.
pub fn is_unsupported(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::Unsupported
        || matches!(err.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh thread, so a policy set there does not leak into the test runner.
    fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("thread")
    }

    #[test]
    fn preferring_node_0_reads_back_as_preferred_node_0_or_is_reported_unsupported() {
        let (set, read, after_reset) = on_thread(|| {
            let set = prefer_node(0);
            let read = current();
            let _ = reset();
            (set, read, current())
        });
        match set {
            Ok(()) => {
                assert_eq!(
                    read.expect("get_mempolicy"),
                    ThreadPolicy::Preferred(vec![0])
                );
                assert_eq!(after_reset.expect("get_mempolicy"), ThreadPolicy::Default);
            }
            Err(e) => assert!(is_unsupported(&e), "unexpected error {e}"),
        }
    }

    #[test]
    fn a_node_the_machine_lacks_is_refused_and_the_policy_stays() {
        let (bad, too_big, read) = on_thread(|| {
            (
                prefer_node(NODES_MAX - 1),
                prefer_node(NODES_MAX),
                current(),
            )
        });
        assert!(bad.is_err(), "node {} accepted", NODES_MAX - 1);
        assert_eq!(
            too_big.expect_err("out of range").kind(),
            io::ErrorKind::InvalidInput
        );
        if let Ok(p) = read {
            assert_eq!(p, ThreadPolicy::Default);
        }
    }

    #[test]
    fn a_fresh_thread_has_the_default_policy() {
        if let Ok(p) = on_thread(current) {
            assert_eq!(p, ThreadPolicy::Default);
        }
    }
}
