//! Process CPU time and the CPU clock rate, for cycles-per-byte figures.

use std::io;

/// CPU time this process has used on all its threads (`CLOCK_PROCESS_CPUTIME_ID`), in ns.
pub fn process_cpu_time_ns() -> io::Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec for the whole call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    Ok(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

/// The CPU clock rate in Hz: the first `cpu MHz` line of `/proc/cpuinfo`, else
/// `cpu0/cpufreq/cpuinfo_max_freq` (kHz). `None` when neither is readable.
pub fn cpu_frequency_hz() -> Option<u64> {
    if let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") {
        if let Some(mhz) = parse_cpuinfo_mhz(&text) {
            return Some((mhz * 1e6) as u64);
        }
    }
    let khz = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(khz.saturating_mul(1000)).filter(|&hz| hz > 0)
}

/// The value of the first `cpu MHz : <float>` line, when positive and finite.
pub fn parse_cpuinfo_mhz(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "cpu MHz")
        .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        .filter(|m| m.is_finite() && *m > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_mhz_is_read_from_the_first_cpu_mhz_line() {
        let text = "processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: 2399.998\ncpu MHz : 1.0\n";
        assert_eq!(parse_cpuinfo_mhz(text), Some(2399.998));
        assert_eq!(parse_cpuinfo_mhz("processor : 0\n"), None);
        assert_eq!(parse_cpuinfo_mhz("cpu MHz : nan\n"), None);
        assert_eq!(parse_cpuinfo_mhz("cpu MHz : -3\n"), None);
    }

    #[test]
    fn process_cpu_time_advances_with_work() {
        let a = process_cpu_time_ns().expect("clock");
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let b = process_cpu_time_ns().expect("clock");
        assert!(b > a, "{a} -> {b}");
    }
}
