//! Giving freed heap memory back to the operating system, and reading the process's resident
//! set size.
//!
//! glibc's allocator keeps memory a program freed for its next allocations: the top of each
//! arena goes back to the OS only past `M_TRIM_THRESHOLD`, and whole free pages inside an
//! arena never do. After a burst (a thousand connections' buffers, freed when they close) the
//! process keeps its peak resident size. [`trim_heap`] asks glibc to release what it can
//! (`malloc_trim(0)`: every arena's top, and free pages inside arenas through
//! `MADV_DONTNEED`). It walks every arena, so callers rate-limit it (`shard::mem_trim`
//! decides when). On other C libraries it does nothing and reports so.

use std::io;

/// What one [`trim_heap`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    /// The allocator reported that it returned memory to the OS.
    pub released: bool,
    /// The process's resident set size just before and just after the trim
    /// ([`resident_bytes`]); `None` where `/proc/self/status` cannot be read.
    pub resident_before_bytes: Option<u64>,
    pub resident_after_bytes: Option<u64>,
}

impl Trim {
    /// Resident bytes the trim gave back (0 when unknown or when the set grew meanwhile:
    /// other threads keep allocating).
    pub fn resident_released_bytes(&self) -> u64 {
        match (self.resident_before_bytes, self.resident_after_bytes) {
            (Some(b), Some(a)) => b.saturating_sub(a),
            _ => 0,
        }
    }
}

/// Whether this build can give heap memory back ([`trim_heap`] is not a no-op): glibc only.
pub const TRIM_SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// Returns the allocator's free memory to the OS where the C library can (glibc's
/// `malloc_trim(0)`; a no-op elsewhere), and the empty huge-page chunks the calling
/// thread's pools keep (`huge_box::release_kept_chunks`; call it on the thread that
/// allocates from them, a shard's own). Costs a walk of every arena and a system call per
/// released range: call it after memory was freed, not per operation.
pub fn trim_heap() -> Trim {
    let resident_before_bytes = resident_bytes().ok();
    let released = crate::huge_box::release_kept_chunks() > 0;
    let released = malloc_trim() || released;
    let resident_after_bytes = resident_bytes().ok();
    Trim {
        released,
        resident_before_bytes,
        resident_after_bytes,
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn malloc_trim() -> bool {
    // SAFETY: `malloc_trim` takes no pointers; it locks each arena itself, so it is safe to
    // call from any thread while others allocate and free.
    unsafe { libc::malloc_trim(0) != 0 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn malloc_trim() -> bool {
    false
}

/// The process's resident set size in bytes (`VmRSS` of `/proc/self/status`).
pub fn resident_bytes() -> io::Result<u64> {
    status_field_bytes(&std::fs::read_to_string("/proc/self/status")?, "VmRSS")
}

/// The `kB` value of `field` in a `/proc/PID/status` text, in bytes (`VmRSS`, `VmHWM`, ...).
pub fn status_field_bytes(status: &str, field: &str) -> io::Result<u64> {
    status
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
            kb.checked_mul(1024)
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no {field} line in kB in the status text"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kilobytes_and_missing_ones_are_errors() {
        let text = "Name:\trsstack\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t3\n";
        assert_eq!(status_field_bytes(text, "VmRSS").unwrap(), 100 << 20);
        assert_eq!(status_field_bytes(text, "VmHWM").unwrap(), 200 << 20);
        assert!(status_field_bytes(text, "VmSwap").is_err());
        assert!(status_field_bytes(text, "Threads").is_err(), "no kB unit");
        assert!(status_field_bytes("VmRSS:\tlots kB\n", "VmRSS").is_err());
    }

    #[test]
    fn freed_memory_goes_back_to_the_os_after_a_trim() {
        if !TRIM_SUPPORTED {
            return;
        }
        // 64 MiB in 16 KiB blocks (below the mmap threshold: heap memory), every page
        // touched; then all but the last block freed, so the arena's top stays pinned and
        // only a trim can release the pages below it.
        let mut blocks: Vec<Vec<u8>> = (0..4096).map(|_| vec![1u8; 16 << 10]).collect();
        let keep = blocks.pop();
        drop(blocks);
        let t = trim_heap();
        drop(keep);
        let released = t.resident_released_bytes();
        assert!(
            t.released && released >= 32 << 20,
            "trim released {released} B: {t:?}"
        );
    }
}
