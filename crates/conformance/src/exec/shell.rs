//! Shell lines: the executor runs no shell, but applies the Linux settings a line changes
//! when the stack has a counterpart, and skips the script when a line changes or checks the
//! host in a way it cannot honour.

use super::*;

impl Exec {
    /// A shell line is not run, but the Linux settings it changes with `set_sysctls.py
    /// /proc/sys/net/ipv4/NAME=VALUE` or `sysctl net.ipv4.NAME=VALUE` are applied to the
    /// stack's configuration when they have a counterpart (timestamps, send buffer, congestion
    /// control `cubic` or `reno`, tail loss probes, ECN); the
    /// TSO and pacing knobs have no effect on a stack without TSO or pacing; any other
    /// setting skips the script, as do the commands that change the host around the stack
    /// (a qdisc that drops everything, route settings); `nstat` is modelled.
    pub(super) fn apply_sysctls(&mut self, pos: Pos, text: &str) -> Result<(), Stop> {
        // Commands that change the host around the stack, or whose exit status checks it:
        // the executor cannot honour them, so the script cannot be judged. `nstat` is
        // modelled over the stack's counters (`exec/nstat.rs`).
        for cmd in text.split(['\n', ';', '`']).map(str::trim) {
            let why = if cmd.starts_with("tc qdisc") && cmd.contains("limit 0") {
                "a qdisc dropping every outgoing packet"
            } else if cmd.starts_with("ip route") || cmd.starts_with("ip -6 route") {
                "per-route settings (ip route)"
            } else if cmd.starts_with("nstat") {
                self.nstat(pos, cmd)?;
                continue;
            } else if cmd.contains("ip tcp_metrics flush") {
                // The per-destination metrics Linux keeps are, here, the Fast Open cache.
                self.stack.tcp_fastopen_flush_cache();
                continue;
            } else {
                continue;
            };
            return skip(format!("shell command `{cmd}`: {why} is not modelled"));
        }
        let mut cfg = self.tcp_cfg;
        let mut changed = false;
        if let Some(hystart) = cubic_module_params(text).map_err(Stop::Skip)? {
            cfg.hystart = hystart;
            changed = true;
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut i = 0;
        while let Some(w) = words.get(i) {
            i += 1;
            let w = w.trim_matches('`');
            // FreeBSD's `sysctl [-w] net.inet.tcp.NAME=VALUE` (exec/profile.rs).
            if let Some((name, value)) = w.strip_prefix("net.inet.").and_then(|s| s.split_once('='))
            {
                profile::freebsd_sysctl(&mut cfg, name, value.trim_matches('"'))
                    .map_err(Stop::Skip)?;
                changed = true;
                continue;
            }
            let Some(setting) = w
                .strip_prefix("/proc/sys/net/ipv4/")
                .or_else(|| w.strip_prefix("net.ipv4."))
                .or_else(|| w.strip_prefix("net/ipv4/"))
            else {
                continue;
            };
            let Some((name, value)) = setting.split_once('=') else {
                continue;
            };
            // A value before a shell line continuation (`=0\\`) is the value.
            let mut value = value.trim_matches('"').trim_end_matches('\\').to_string();
            // `tcp_wmem="4096 50000 4194304"` was split at its spaces.
            if setting.contains("=\"") {
                while let Some(next) = words.get(i) {
                    i += 1;
                    value.push(' ');
                    value.push_str(next.trim_matches('"'));
                    if next.ends_with('"') {
                        break;
                    }
                }
            }
            if let Some(r) = self.fastopen_sysctl(name, &value) {
                r?;
                continue;
            }
            match name {
                // Linux reads `tcp_ecn` at each open: it applies at once, sockets or not.
                "tcp_ecn" => {
                    let Some(mode) = value.parse().ok().and_then(tcp::EcnMode::from_linux_sysctl)
                    else {
                        return skip(format!("sysctl tcp_ecn={value} not understood"));
                    };
                    cfg.ecn = mode;
                    self.tcp_cfg.ecn = mode;
                    self.stack.tcp_set_ecn(mode);
                }
                "tcp_timestamps" => {
                    cfg.timestamps = value != "0";
                    changed = true;
                }
                "tcp_wmem" => {
                    let default = value.split_whitespace().nth(1).and_then(|v| v.parse().ok());
                    let Some(bytes) = default else {
                        return skip(format!("sysctl tcp_wmem={value} not understood"));
                    };
                    cfg.send_buffer_bytes = bytes;
                    changed = true;
                }
                "tcp_slow_start_after_idle" => {
                    cfg.restart_after_idle = value != "0";
                    changed = true;
                }
                "tcp_congestion_control" => {
                    cfg.congestion_control = match value.as_str() {
                        "cubic" => tcp::CongestionControl::Cubic,
                        "reno" => tcp::CongestionControl::NewReno,
                        other => {
                            return skip(format!(
                                "sysctl tcp_congestion_control={other}: the stack has no such \
                                 congestion control"
                            ));
                        }
                    };
                    changed = true;
                }
                // Linux: 0 turns tail loss probes off, 3 and 4 (the default 3) leave them on.
                "tcp_early_retrans" if matches!(value.as_str(), "0" | "3" | "4") => {
                    cfg.tail_loss_probe = value != "0";
                    changed = true;
                }
                "tcp_notsent_lowat" => {
                    let Ok(v) = value.parse::<i64>() else {
                        return skip(format!("sysctl tcp_notsent_lowat={value} not understood"));
                    };
                    // Linux's sysctl is an unsigned int: -1 and 4294967295 are both no mark.
                    self.notsent_lowat_bytes = v as u32;
                    changed = true;
                }
                "tcp_min_tso_segs" => {
                    let Ok(v) = value.parse::<u8>() else {
                        return skip(format!("sysctl tcp_min_tso_segs={value} not understood"));
                    };
                    cfg.tso_min_segments = v;
                    changed = true;
                }
                "tcp_tso_win_divisor" | "tcp_pacing_ss_ratio" => {}
                other => return skip(format!("sysctl {other}={value} has no stack setting")),
            }
        }
        if changed {
            if !self.fds.is_empty() {
                return skip("sysctl change after sockets were opened");
            }
            self.tcp_cfg = cfg;
            // The client's Fast Open cache outlives the sockets, as Linux's metrics do.
            let cache = self.stack.tcp_fastopen_cache().clone();
            self.stack = new_stack(
                cfg,
                self.addrs,
                self.tcp_option_layout,
                self.notsent_lowat_bytes,
                self.linux_icmp_rules,
            );
            self.stack.tcp_set_fastopen_cache(cache);
            self.fastopen_apply();
        }
        Ok(())
    }
}

/// True when every command of a shell line is an `nstat` pipeline: the line is modelled
/// (`exec/nstat.rs`), not skipped.
pub(super) fn only_nstat(text: &str) -> bool {
    let mut cmds = text
        .split(['\n', ';', '`'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .peekable();
    cmds.peek().is_some() && cmds.all(|c| c.starts_with("nstat"))
}

/// `echo V > /sys/module/tcp_cubic/parameters/NAME` lines: CUBIC's HyStart switches, the one
/// module parameter the stack has a setting for (`tcp::Config::hystart`). `hystart` 0/1
/// and `hystart_detect` 0 (no detector) or 3 (both) map to it; a single detector, or any
/// other parameter, is a reason to skip. `Ok(None)` when the text sets none.
fn cubic_module_params(text: &str) -> Result<Option<bool>, String> {
    const PREFIX: &str = "/sys/module/tcp_cubic/parameters/";
    let mut hystart = None;
    for cmd in text.split(['\n', ';', '`']).map(str::trim) {
        let Some((lhs, path)) = cmd.split_once('>') else {
            continue;
        };
        let Some(name) = path.trim().strip_prefix(PREFIX) else {
            continue;
        };
        let value = lhs
            .trim()
            .strip_prefix("echo")
            .map(str::trim)
            .unwrap_or_default();
        hystart = Some(match (name, value) {
            ("hystart", "0") | ("hystart_detect", "0") => false,
            ("hystart", "1") | ("hystart_detect", "3") => true,
            _ => {
                return Err(format!(
                    "tcp_cubic module parameter {name}={value} has no stack setting"
                ));
            }
        });
    }
    Ok(hystart)
}

#[cfg(test)]
mod tests {
    use super::cubic_module_params;

    #[test]
    fn hystart_module_parameters_map_to_the_hystart_setting() {
        let both =
            "../common/defaults.sh\necho 3 > /sys/module/tcp_cubic/parameters/hystart_detect\n";
        assert_eq!(cubic_module_params(both), Ok(Some(true)));
        let off = "echo 0 > /sys/module/tcp_cubic/parameters/hystart";
        assert_eq!(cubic_module_params(off), Ok(Some(false)));
        assert_eq!(
            cubic_module_params("sysctl -q net.ipv4.tcp_sack=1"),
            Ok(None)
        );
        // One detector alone, or another parameter: nothing to map it to.
        let train = "echo 1 > /sys/module/tcp_cubic/parameters/hystart_detect";
        assert!(cubic_module_params(train).is_err());
        let beta = "echo 717 > /sys/module/tcp_cubic/parameters/beta";
        assert!(cubic_module_params(beta).is_err());
    }
}
