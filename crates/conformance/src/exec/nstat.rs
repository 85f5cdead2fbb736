//! `nstat` in shell lines, over the stack's own counters.
//!
//! Linux's `nstat` prints the kernel's SNMP/MIB counters that changed since its last run
//! (kept in a history file) and records the new values; `nstat > /dev/null` therefore resets
//! the reference, and `nstat | grep NAME > /dev/null` succeeds when NAME changed since then
//! (`nstat` prints only counters that moved, unless `-z`). packetdrill fails a script whose
//! shell command exits nonzero.
//!
//! The executor models that over [`stack::Counters`] with the table [`MIB_COUNTERS`]: each
//! Linux name maps to the stack counter that counts the same event. Only names with such a
//! counterpart are there; a command that names any other counter (as a `grep` pattern or an
//! `nstat` argument) skips the script, since the executor cannot know its value. Options:
//! `-n` (update the history, print nothing), `-a` (absolute values, not changes), `-z`
//! (print zeros too), `-r` (reset the history first), `-s` (do not update the history).

use super::*;

/// Reads one of the stack's counters.
type CounterOf = fn(&stack::Counters) -> u64;

/// Linux MIB names (as `nstat` prints them) and the stack counter that counts the same event.
pub(super) const MIB_COUNTERS: [(&str, CounterOf); 6] = [
    // `tcp_v4_err`/`tcp_v6_err`/`tcp_req_err`: an ICMP error whose quoted sequence number
    // is not in SND.UNA..SND.NXT (RFC 5927 §4.1).
    ("TcpExtOutOfWindowIcmps", |c| c.tcp_icmp_out_of_window),
    // SYN-ACKs carrying a SYN cookie; connections opened from a valid one.
    ("TcpExtSyncookiesSent", |c| c.tcp_syn_cookies_sent),
    ("TcpExtSyncookiesRecv", |c| c.tcp_syn_cookies_accepted),
    // SYNs dropped because the listener's accept queue was full.
    ("TcpExtListenOverflows", |c| c.tcp_listen_backlog_full),
    // Fast Open: children that took data with their SYN; SYN-ACKs acknowledging a client's
    // SYN data (`tcp_rcv_fastopen_synack`).
    ("TcpExtTCPFastOpenPassive", |c| c.tcp_fastopen_children),
    ("TcpExtTCPFastOpenActive", |c| {
        c.tcp_fastopen_client_syn_data_acked
    }),
];

fn counter_value(c: &stack::Counters, name: &str) -> Option<u64> {
    MIB_COUNTERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, get)| get(c))
}

/// `nstat`'s history: the counters' values at its last run (all 0 at the stack's start).
#[derive(Debug, Clone, Default)]
pub(super) struct NstatHistory {
    values: BTreeMap<&'static str, u64>,
}

/// What a modelled `nstat` pipeline did: the lines it printed, and whether a `grep` at its
/// end found a line (`None`: no `grep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NstatRun {
    pub(super) printed: Vec<(String, u64)>,
    pub(super) grep_found: Option<bool>,
}

impl NstatHistory {
    /// Runs `cmd` (`nstat [OPTIONS] [NAMES] [| grep [-q] NAME] [> FILE]`) against `now`.
    /// `Err` says why the executor cannot model it.
    pub(super) fn run(&mut self, cmd: &str, now: &stack::Counters) -> Result<NstatRun, String> {
        let mut stages = cmd.split('|').map(str::trim);
        let nstat = stages.next().unwrap_or("");
        let grep = stages.next();
        if stages.next().is_some() {
            return Err(format!("`{cmd}`: a pipeline of more than nstat | grep"));
        }
        let strip_redirect = |s: &str| -> String {
            match s.split_once('>') {
                Some((head, _)) => head.trim().to_string(),
                None => s.trim().to_string(),
            }
        };
        let nstat = strip_redirect(nstat);
        let mut words = nstat.split_whitespace();
        if words.next() != Some("nstat") {
            return Err(format!("`{cmd}`: not an nstat command"));
        }
        let (mut no_print, mut absolute, mut zeros, mut reset, mut keep) =
            (false, false, false, false, false);
        let mut names = Vec::new();
        for w in words {
            if let Some(flags) = w.strip_prefix('-') {
                for f in flags.chars() {
                    match f {
                        'n' => no_print = true,
                        'a' => absolute = true,
                        'z' => zeros = true,
                        'r' => reset = true,
                        's' => keep = true,
                        other => return Err(format!("`{cmd}`: nstat option -{other}")),
                    }
                }
            } else if counter_value(now, w).is_some() {
                names.push(w);
            } else {
                return Err(format!("`{cmd}`: counter {w} has no stack counterpart"));
            }
        }
        if reset {
            self.values.clear();
        }
        let mut printed = Vec::new();
        for (name, get) in MIB_COUNTERS.iter() {
            if !names.is_empty() && !names.contains(name) {
                continue;
            }
            let v = get(now);
            let shown = if absolute {
                v
            } else {
                v.saturating_sub(self.values.get(name).copied().unwrap_or(0))
            };
            if !no_print && (shown != 0 || zeros) {
                printed.push((name.to_string(), shown));
            }
        }
        if !keep {
            for (name, get) in MIB_COUNTERS.iter() {
                self.values.insert(name, get(now));
            }
        }
        let grep_found = match grep {
            None => None,
            Some(g) => {
                let g = strip_redirect(g);
                let mut w = g.split_whitespace();
                if w.next() != Some("grep") {
                    return Err(format!(
                        "`{cmd}`: nstat piped into something other than grep"
                    ));
                }
                let pattern = w
                    .find(|x| !x.starts_with('-'))
                    .ok_or_else(|| format!("`{cmd}`: grep without a pattern"))?;
                if counter_value(now, pattern).is_none() {
                    return Err(format!(
                        "`{cmd}`: counter {pattern} has no stack counterpart"
                    ));
                }
                Some(printed.iter().any(|(n, _)| n.contains(pattern)))
            }
        };
        Ok(NstatRun {
            printed,
            grep_found,
        })
    }
}

impl Exec {
    /// A shell command that starts with `nstat`, modelled (see the module doc): a `grep`
    /// that finds nothing fails the script as packetdrill fails on a nonzero exit status.
    pub(super) fn nstat(&mut self, pos: Pos, cmd: &str) -> Result<(), Stop> {
        let counters = self.stack.counters();
        let run = self
            .nstat
            .run(cmd, &counters)
            .map_err(|e| Stop::Skip(format!("shell command {e}")))?;
        if run.grep_found == Some(false) {
            return fail(
                pos,
                format!("shell command `{cmd}` exited 1: the counter did not change"),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nstat_prints_what_changed_since_its_last_run_and_grep_sees_it() {
        let mut h = NstatHistory::default();
        let mut c = stack::Counters {
            tcp_icmp_out_of_window: 2,
            ..Default::default()
        };
        // The first run reports since the start, and becomes the reference.
        let r = h.run("nstat > /dev/null", &c).expect("models");
        assert_eq!(r.printed, vec![("TcpExtOutOfWindowIcmps".to_string(), 2)]);
        let grep = "nstat | grep TcpExtOutOfWindowIcmps > /dev/null";
        assert_eq!(h.run(grep, &c).expect("models").grep_found, Some(false));
        c.tcp_icmp_out_of_window = 3;
        assert_eq!(h.run(grep, &c).expect("models").grep_found, Some(true));
        // -a: absolute values; -s: the history stays.
        let r = h
            .run("nstat -as TcpExtOutOfWindowIcmps", &c)
            .expect("models");
        assert_eq!(r.printed, vec![("TcpExtOutOfWindowIcmps".to_string(), 3)]);
        // -z prints the zeros too; -r resets the history first.
        let r = h.run("nstat -rz", &c).expect("models");
        assert_eq!(r.printed.len(), MIB_COUNTERS.len());
    }

    #[test]
    fn nstat_of_a_counter_the_stack_does_not_count_is_not_modelled() {
        let mut h = NstatHistory::default();
        let c = stack::Counters::default();
        assert!(h.run("nstat | grep TcpExtTCPLossProbes", &c).is_err());
        assert!(h.run("nstat TcpExtDelayedACKs", &c).is_err());
        assert!(h.run("nstat -x", &c).is_err());
        assert!(
            h.run("nstat | sort | grep TcpExtOutOfWindowIcmps", &c)
                .is_err()
        );
    }
}
