//! The overload options every live command takes: the stacks' TCP buffer-memory budget
//! (`--tcp-mem-mib`, like Linux's `net.ipv4.tcp_mem`) and the share of the connection table
//! one remote address may hold (`--tcp-source-share-pct`). Absent, the stack's defaults
//! (`stack::Limits`) hold.

use clap::Args;
use stack::Limits;

use super::CliError;

/// The largest `--tcp-mem-mib` value: 1 TiB.
pub const TCP_MEM_MIB_MAX: usize = 1 << 20;

#[derive(Debug, Args)]
pub struct OverloadArgs {
    /// Each shard's TCP buffer-memory budget in MiB, `LOW,PRESSURE,HIGH` (like Linux's
    /// tcp_mem): at PRESSURE new connections get small buffers and send buffers stop growing,
    /// at HIGH new connections and growing writes are refused, below LOW pressure ends
    /// [default: 48,64,96].
    #[arg(long = "tcp-mem-mib", value_name = "LOW,PRESSURE,HIGH")]
    tcp_mem_mib: Option<String>,
    /// Percentage of the connection table one remote address may hold (1..=100; 100 turns the
    /// per-source limit off) [default: 25].
    #[arg(long = "tcp-source-share-pct", value_name = "PCT")]
    tcp_source_share_pct: Option<u8>,
}

impl OverloadArgs {
    /// Writes the options given into `limits`; a usage error names the option and its range.
    pub fn apply(&self, limits: &mut Limits) -> Result<(), CliError> {
        if let Some(text) = &self.tcp_mem_mib {
            let [low, pressure, high] = parse_tcp_mem_mib(text)?;
            limits.tcp_mem_low_bytes = low << 20;
            limits.tcp_mem_pressure_bytes = pressure << 20;
            limits.tcp_mem_high_bytes = high << 20;
        }
        if let Some(pct) = self.tcp_source_share_pct {
            if !(1..=100).contains(&pct) {
                return Err(CliError::Usage(
                    "--tcp-source-share-pct must be 1..=100 (100: no per-source limit)".into(),
                ));
            }
            limits.tcp_source_share_pct = pct;
        }
        Ok(())
    }
}

/// Parses `LOW,PRESSURE,HIGH` (MiB, 1..=[`TCP_MEM_MIB_MAX`], LOW ≤ PRESSURE ≤ HIGH).
fn parse_tcp_mem_mib(text: &str) -> Result<[usize; 3], CliError> {
    let bad = || {
        CliError::Usage(format!(
            "--tcp-mem-mib '{text}': want LOW,PRESSURE,HIGH in MiB, each 1..={TCP_MEM_MIB_MAX}, \
             LOW <= PRESSURE <= HIGH"
        ))
    };
    let parts: Vec<&str> = text.split(',').collect();
    let [low, pressure, high] = parts.as_slice() else {
        return Err(bad());
    };
    let mut out = [0usize; 3];
    for (o, p) in out.iter_mut().zip([low, pressure, high]) {
        *o = p.trim().parse().map_err(|_| bad())?;
        if !(1..=TCP_MEM_MIB_MAX).contains(o) {
            return Err(bad());
        }
    }
    if !(out[0] <= out[1] && out[1] <= out[2]) {
        return Err(bad());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_mem_takes_three_ascending_mib_values() {
        assert_eq!(parse_tcp_mem_mib("8,12,16").ok(), Some([8, 12, 16]));
        assert_eq!(parse_tcp_mem_mib("4,4,4").ok(), Some([4, 4, 4]));
        for bad in [
            "",
            "8,12",
            "8,12,16,20",
            "16,12,8",
            "0,1,2",
            "a,b,c",
            "1,2,2000000",
        ] {
            assert!(
                matches!(parse_tcp_mem_mib(bad), Err(CliError::Usage(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn options_write_the_stack_limits_and_absent_ones_keep_the_defaults() {
        let mut l = Limits::default();
        OverloadArgs {
            tcp_mem_mib: None,
            tcp_source_share_pct: None,
        }
        .apply(&mut l)
        .unwrap();
        assert_eq!(l, Limits::default());
        OverloadArgs {
            tcp_mem_mib: Some("8,12,16".into()),
            tcp_source_share_pct: Some(100),
        }
        .apply(&mut l)
        .unwrap();
        assert_eq!(
            (
                l.tcp_mem_low_bytes,
                l.tcp_mem_pressure_bytes,
                l.tcp_mem_high_bytes
            ),
            (8 << 20, 12 << 20, 16 << 20)
        );
        assert_eq!(l.tcp_source_share_pct, 100);
        let zero = OverloadArgs {
            tcp_mem_mib: None,
            tcp_source_share_pct: Some(0),
        };
        assert!(matches!(zero.apply(&mut l), Err(CliError::Usage(_))));
    }
}
