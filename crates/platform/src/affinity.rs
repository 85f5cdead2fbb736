//! Thread placement: pin the calling thread to one CPU and find the NUMA node of a CPU.
//!
//! Pinning is best effort: in a container the CPU may lie outside the allowed set, and then
//! [`pin_current_thread`] returns an error the caller may ignore (the runtime counts it and
//! runs unpinned). The NUMA node comes from sysfs (`/sys/devices/system/cpu/cpuN/nodeM`); a
//! machine without that directory reports node 0.

use std::io;

/// Number of CPUs this process may run on (at least 1).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pins the calling thread to `cpu` (Linux `sched_setaffinity`).
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // CPU_SETSIZE bounds what a cpu_set_t can name.
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: cpu_set_t is a plain bit array for which all-zero bytes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked above, so CPU_SET stays inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 names the calling thread; `set` is a valid, initialised cpu_set_t and the
    // size passed is its size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Pinning is not supported on this OS.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cpu: usize) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// The NUMA node of `cpu`, from sysfs; 0 when the machine does not say.
pub fn numa_node_of_cpu(cpu: usize) -> u16 {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            name.strip_prefix("node")?.parse::<u16>().ok()
        })
        .min()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_cpu_is_refused_and_node_defaults() {
        assert!(pin_current_thread(usize::MAX).is_err());
        assert_eq!(numa_node_of_cpu(usize::MAX), 0);
        assert!(available_cpus() >= 1);
    }
}
