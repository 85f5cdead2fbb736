//! `--filter RULE` (repeatable): flow steering rules like `ethtool -N`'s, on `serve`, `ttcp`,
//! `get` (where each shard's software RETA runs) and `demo` (the server host's NIC model).
//!
//! A rule is `proto tcp|udp`, `src-ip ADDR`, `dst-ip ADDR`, `src-port N`, `dst-port N` (any
//! of them, each at most once) and `queue N` (a shard) or `drop`; `ethtool`'s
//! `flow-type tcp4|udp4|tcp6|udp6` and `action N|-1` are accepted too. Rules are tried in the
//! order given, the first match wins; ATR's entries (the replies of connections a shard
//! opened) come before them, RSS after. Each rule's hits are printed in the summary.

use std::io::Write;

use rss::{FlowRule, RuleSet};
use runtime::FilterReport;

use super::CliError;

/// Parses one `--filter` rule (clap's value parser: an error is a sentence, exit status 2).
pub fn parse_filter(s: &str) -> Result<FlowRule, String> {
    s.parse::<FlowRule>().map_err(|e| e.reason)
}

/// The rules of a host with `queues` receive queues (on live ports one per shard): each
/// `queue N` must name one of them.
pub fn rule_set(rules: &[FlowRule], queues: u16) -> Result<RuleSet, CliError> {
    for r in rules {
        if let Some(q) = r.queue().filter(|q| *q >= queues) {
            return Err(CliError::Usage(format!(
                "--filter '{r}': queue {q} does not exist: the host has {queues} queue{} \
                 (0..={})",
                if queues == 1 { "" } else { "s" },
                queues.saturating_sub(1)
            )));
        }
    }
    RuleSet::new(rules.to_vec()).map_err(|e| CliError::Usage(format!("--filter: {e}")))
}

/// `--rebalance` moves connections between shards, a `queue N` rule keeps them on one: the
/// two together are a usage error (a `drop` rule is fine).
pub fn check_with_rebalance(rules: &RuleSet, rebalance: bool) -> Result<(), CliError> {
    if rebalance && rules.max_queue().is_some() {
        return Err(CliError::Usage(
            "--filter with 'queue N' keeps connections on a shard, which --rebalance would \
             move: give one or the other"
                .into(),
        ));
    }
    Ok(())
}

/// Prints `filter_I: RULE` and `filter_I_hits: N` per rule, then the drops and ATR's counts.
pub fn write_filter_summary(out: &mut impl Write, f: &FilterReport) -> std::io::Result<()> {
    for (i, r) in f.rules.rules().iter().enumerate() {
        writeln!(out, "filter_{i}: {r}")?;
        writeln!(
            out,
            "filter_{i}_hits: {}",
            f.rule_hits.get(i).copied().unwrap_or(0)
        )?;
    }
    writeln!(out, "filter_drops: {}", f.rule_drops)?;
    writeln!(out, "atr_learned: {}", f.atr_learned)?;
    writeln!(out, "atr_replaced: {}", f.atr_replaced)?;
    writeln!(out, "atr_hits: {}", f.atr_hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_beyond_the_shards_is_a_usage_error_naming_the_limit() {
        let r = parse_filter("proto tcp dst-port 80 queue 2").expect("parses");
        assert!(
            rule_set(&[r], 2).is_err_and(|e| matches!(&e, CliError::Usage(m)
            if m.contains("queue 2 does not exist") && m.contains("2 queues (0..=1)")))
        );
        assert!(rule_set(&[r], 3).is_ok());
        let d = parse_filter("drop").expect("parses");
        assert!(rule_set(&[d], 1).is_ok());
    }

    #[test]
    fn queue_rules_and_rebalancing_exclude_each_other_drop_rules_do_not() {
        let q = rule_set(&[parse_filter("proto tcp queue 1").expect("ok")], 2).expect("valid");
        assert!(check_with_rebalance(&q, true).is_err());
        assert!(check_with_rebalance(&q, false).is_ok());
        let d = rule_set(&[parse_filter("proto udp drop").expect("ok")], 2).expect("valid");
        assert!(check_with_rebalance(&d, true).is_ok());
    }

    #[test]
    fn too_many_rules_are_a_usage_error() {
        let d = parse_filter("proto udp drop").expect("parses");
        assert!(rule_set(&vec![d; rss::RULES_MAX + 1], 1).is_err());
    }

    #[test]
    fn the_summary_names_each_rule_with_its_hits() {
        let rules = rule_set(
            &[parse_filter("proto tcp dst-port 80 queue 1").expect("ok")],
            2,
        )
        .expect("valid");
        let f = FilterReport {
            rules,
            rule_hits: vec![42],
            rule_drops: 0,
            atr_learned: 3,
            atr_replaced: 0,
            atr_hits: 7,
        };
        let mut out = Vec::new();
        write_filter_summary(&mut out, &f).expect("write");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains("filter_0: proto tcp dst-port 80 queue 1\n"));
        assert!(text.contains("filter_0_hits: 42\n"));
        assert!(text.contains("atr_hits: 7\n"));
    }
}
