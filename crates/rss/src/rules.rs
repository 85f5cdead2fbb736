//! Flow steering rules with wildcards, as `ethtool -N` installs them (the 82599's Flow
//! Director "perfect match" filters with field masks): each rule matches some of protocol,
//! source/destination address and source/destination port, and sends the packets it matches
//! to a queue or drops them. Rules are tried in the order given; the first match wins.
//!
//! The text form, one rule per string (the keywords in any order, each at most once):
//!
//! ```text
//! proto tcp|udp  src-ip ADDR  dst-ip ADDR  src-port N  dst-port N  queue N | drop
//! ```
//!
//! `ethtool -N`'s own spellings are accepted too: `flow-type tcp4|udp4|tcp6|udp6` (protocol
//! and family), `action N` (a queue) and `action -1` (drop).
//!
//! ```
//! use rss::{FlowRule, RuleAction};
//! let r: FlowRule = "proto tcp dst-port 80 queue 1".parse()?;
//! assert_eq!(r.action, RuleAction::Queue(1));
//! assert!("proto tcp dst-port eighty queue 1".parse::<FlowRule>().is_err());
//! # Ok::<(), rss::RuleParseError>(())
//! ```

use core::fmt;
use core::net::IpAddr;
use core::str::FromStr;

use crate::frame::{FlowFields, IpPair, PROTO_TCP, PROTO_UDP};

/// Most rules a [`RuleSet`] holds (each packet may be compared with every one of them).
pub const RULES_MAX: usize = 128;

/// What a matching rule does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleAction {
    /// Deliver to this receive queue (a shard, on hosts with one queue per shard).
    Queue(u16),
    /// Drop the packet (counted per rule).
    Drop,
}

/// One rule: the fields it constrains (`None` = any) and its action.
///
/// Invariant (kept by the parser and [`FlowRule::new`]): `src_ip` and `dst_ip`, when both
/// are given, are of the same family, and agree with `family` when that is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowRule {
    /// IP protocol (6 = TCP, 17 = UDP).
    pub protocol: Option<u8>,
    /// `Some(true)` for IPv4 only, `Some(false)` for IPv6 only (`flow-type tcp4` / `tcp6`).
    pub ipv4: Option<bool>,
    /// Source address.
    pub src_ip: Option<IpAddr>,
    /// Destination address.
    pub dst_ip: Option<IpAddr>,
    /// Source port; a rule with a port matches only packets with ports (TCP/UDP, not a
    /// fragment).
    pub src_port: Option<u16>,
    /// Destination port.
    pub dst_port: Option<u16>,
    /// What the rule does.
    pub action: RuleAction,
}

impl FlowRule {
    /// A rule matching every IP packet, with `action`: narrow it with the fields.
    pub fn new(action: RuleAction) -> Self {
        FlowRule {
            protocol: None,
            ipv4: None,
            src_ip: None,
            dst_ip: None,
            src_port: None,
            dst_port: None,
            action,
        }
    }

    /// Whether the packet with `fields` matches every field this rule constrains.
    pub fn matches(&self, fields: &FlowFields) -> bool {
        if self.protocol.is_some_and(|p| p != fields.protocol) {
            return false;
        }
        let (src, dst, v4) = match fields.addrs {
            IpPair::V4(s, d) => (IpAddr::V4(s), IpAddr::V4(d), true),
            IpPair::V6(s, d) => (IpAddr::V6(s), IpAddr::V6(d), false),
        };
        if self.ipv4.is_some_and(|f| f != v4)
            || self.src_ip.is_some_and(|a| a != src)
            || self.dst_ip.is_some_and(|a| a != dst)
        {
            return false;
        }
        if self.src_port.is_none() && self.dst_port.is_none() {
            return true;
        }
        let Some(ports) = fields.ports else {
            return false;
        };
        self.src_port.is_none_or(|p| p == ports.src) && self.dst_port.is_none_or(|p| p == ports.dst)
    }

    /// The queue the rule names, if it names one.
    pub fn queue(&self) -> Option<u16> {
        match self.action {
            RuleAction::Queue(q) => Some(q),
            RuleAction::Drop => None,
        }
    }
}

impl fmt::Display for FlowRule {
    /// The rule in the text form [`FlowRule::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        let mut word = |f: &mut fmt::Formatter<'_>, s: fmt::Arguments<'_>| {
            let r = write!(f, "{sep}{s}");
            sep = " ";
            r
        };
        match (self.protocol, self.ipv4) {
            (Some(p), Some(v4)) => {
                let name = if p == PROTO_TCP { "tcp" } else { "udp" };
                word(
                    f,
                    format_args!("flow-type {name}{}", if v4 { 4 } else { 6 }),
                )?;
            }
            (Some(PROTO_TCP), None) => word(f, format_args!("proto tcp"))?,
            (Some(PROTO_UDP), None) => word(f, format_args!("proto udp"))?,
            (Some(p), None) => word(f, format_args!("proto {p}"))?,
            (None, _) => {}
        }
        if let Some(a) = self.src_ip {
            word(f, format_args!("src-ip {a}"))?;
        }
        if let Some(a) = self.dst_ip {
            word(f, format_args!("dst-ip {a}"))?;
        }
        if let Some(p) = self.src_port {
            word(f, format_args!("src-port {p}"))?;
        }
        if let Some(p) = self.dst_port {
            word(f, format_args!("dst-port {p}"))?;
        }
        match self.action {
            RuleAction::Queue(q) => word(f, format_args!("queue {q}")),
            RuleAction::Drop => word(f, format_args!("drop")),
        }
    }
}

/// Why a rule's text was refused: the rule as given and a sentence saying what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleParseError {
    /// The rule's text.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for RuleParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "filter '{}': {}", self.rule, self.reason)
    }
}

impl core::error::Error for RuleParseError {}

impl FromStr for FlowRule {
    type Err = RuleParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_rule(s).map_err(|reason| RuleParseError {
            rule: s.trim().to_string(),
            reason,
        })
    }
}

const KEYWORDS: &str =
    "proto, flow-type, src-ip, dst-ip, src-port, dst-port, queue, action or drop";

fn parse_rule(s: &str) -> Result<FlowRule, String> {
    let mut words = s.split_whitespace();
    let mut rule = FlowRule::new(RuleAction::Drop);
    let mut action = None;
    let mut seen: Vec<&str> = Vec::new();
    while let Some(key) = words.next() {
        // `flow-type` and `proto` both set the protocol; `queue`, `action` and `drop` the
        // action: each group at most once.
        let group = match key {
            "proto" | "flow-type" => "proto",
            "queue" | "action" | "drop" => "action",
            k => k,
        };
        if seen.contains(&group) {
            return Err(format!("'{key}' repeats a field already given"));
        }
        seen.push(group);
        if key == "drop" {
            action = Some(RuleAction::Drop);
            continue;
        }
        let known = matches!(
            key,
            "proto"
                | "flow-type"
                | "src-ip"
                | "dst-ip"
                | "src-port"
                | "dst-port"
                | "queue"
                | "action"
        );
        if !known {
            return Err(format!("unknown word '{key}' (expected {KEYWORDS})"));
        }
        let Some(value) = words.next() else {
            return Err(format!("'{key}' needs a value"));
        };
        match key {
            "proto" => {
                rule.protocol = Some(match value {
                    "tcp" => PROTO_TCP,
                    "udp" => PROTO_UDP,
                    v => return Err(format!("proto must be tcp or udp, not '{v}'")),
                });
            }
            "flow-type" => {
                let (p, v4) = match value {
                    "tcp4" => (PROTO_TCP, true),
                    "udp4" => (PROTO_UDP, true),
                    "tcp6" => (PROTO_TCP, false),
                    "udp6" => (PROTO_UDP, false),
                    v => {
                        return Err(format!(
                            "flow-type must be tcp4, udp4, tcp6 or udp6, not '{v}'"
                        ));
                    }
                };
                rule.protocol = Some(p);
                rule.ipv4 = Some(v4);
            }
            "src-ip" | "dst-ip" => {
                let a: IpAddr = value
                    .parse()
                    .map_err(|_| format!("{key} needs an IPv4 or IPv6 address, not '{value}'"))?;
                if key == "src-ip" {
                    rule.src_ip = Some(a);
                } else {
                    rule.dst_ip = Some(a);
                }
            }
            "src-port" | "dst-port" => {
                let p: u16 = value
                    .parse()
                    .map_err(|_| format!("{key} needs a port number 0..=65535, not '{value}'"))?;
                if key == "src-port" {
                    rule.src_port = Some(p);
                } else {
                    rule.dst_port = Some(p);
                }
            }
            "queue" => action = Some(RuleAction::Queue(parse_queue(key, value)?)),
            _ => {
                // `action`: ethtool's -1 drops, anything else is a queue.
                action = Some(if value == "-1" {
                    RuleAction::Drop
                } else {
                    RuleAction::Queue(parse_queue(key, value)?)
                });
            }
        }
    }
    rule.action = action.ok_or_else(|| {
        if seen.is_empty() {
            "the rule is empty (give fields to match and 'queue N' or 'drop')".to_string()
        } else {
            "the rule has no action (end it with 'queue N' or 'drop')".to_string()
        }
    })?;
    let families = [rule.src_ip, rule.dst_ip].map(|a| a.map(|a| a.is_ipv4()));
    if let [Some(a), Some(b)] = families {
        if a != b {
            return Err("src-ip and dst-ip are of different families (IPv4 and IPv6)".into());
        }
    }
    if let (Some(v4), Some(Some(a))) = (rule.ipv4, families.iter().find(|f| f.is_some())) {
        if v4 != *a {
            return Err("the flow-type's IP version differs from the addresses'".into());
        }
    }
    Ok(rule)
}

fn parse_queue(key: &str, value: &str) -> Result<u16, String> {
    value
        .parse()
        .map_err(|_| format!("{key} needs a queue number 0..=65535, not '{value}'"))
}

/// An ordered, bounded list of rules; the first that matches a packet decides.
///
/// Invariant: at most [`RULES_MAX`] rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleSet {
    rules: Vec<FlowRule>,
}

/// A [`RuleSet`] would hold more than [`RULES_MAX`] rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyRules;

impl fmt::Display for TooManyRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at most {RULES_MAX} filters may be given")
    }
}

impl core::error::Error for TooManyRules {}

impl RuleSet {
    /// The rules, in order; refused beyond [`RULES_MAX`].
    pub fn new(rules: Vec<FlowRule>) -> Result<Self, TooManyRules> {
        if rules.len() > RULES_MAX {
            return Err(TooManyRules);
        }
        Ok(RuleSet { rules })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[FlowRule] {
        &self.rules
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first rule matching `fields`: its index and action.
    #[inline]
    pub fn first_match(&self, fields: &FlowFields) -> Option<(usize, RuleAction)> {
        self.rules
            .iter()
            .position(|r| r.matches(fields))
            .and_then(|i| self.rules.get(i).map(|r| (i, r.action)))
    }

    /// The highest queue a rule names (to check against the queues a host has).
    pub fn max_queue(&self) -> Option<u16> {
        self.rules.iter().filter_map(FlowRule::queue).max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::PortPair;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn v4(proto: u8, src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> FlowFields {
        FlowFields {
            addrs: IpPair::V4(Ipv4Addr::from(src), Ipv4Addr::from(dst)),
            protocol: proto,
            ports: Some(PortPair { src: sp, dst: dp }),
            is_fragment: false,
        }
    }

    fn parse(s: &str) -> FlowRule {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    fn reason(s: &str) -> String {
        s.parse::<FlowRule>().expect_err(s).reason
    }

    #[test]
    fn every_field_and_action_parses() {
        let r = parse("proto udp src-ip 10.0.0.1 dst-ip 10.0.0.2 src-port 53 dst-port 5353 drop");
        assert_eq!(r.protocol, Some(PROTO_UDP));
        assert_eq!(r.src_ip, Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))));
        assert_eq!(r.dst_ip, Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))));
        assert_eq!((r.src_port, r.dst_port), (Some(53), Some(5353)));
        assert_eq!(r.action, RuleAction::Drop);
        let r = parse("  dst-port 80   queue 3 ");
        assert_eq!(
            (r.protocol, r.dst_port, r.action),
            (None, Some(80), RuleAction::Queue(3))
        );
    }

    #[test]
    fn ethtool_spellings_parse_to_the_same_rules() {
        let r = parse("flow-type tcp4 dst-port 80 action 1");
        assert_eq!(r.protocol, Some(PROTO_TCP));
        assert_eq!(r.ipv4, Some(true));
        assert_eq!(r.action, RuleAction::Queue(1));
        assert_eq!(parse("flow-type udp6 action -1").action, RuleAction::Drop);
        assert_eq!(parse("flow-type udp6 action -1").ipv4, Some(false));
    }

    #[test]
    fn display_reads_back_as_the_same_rule() {
        for s in [
            "proto tcp dst-port 80 queue 1",
            "flow-type udp6 src-ip ::1 drop",
            "src-ip 192.0.2.1 dst-ip 192.0.2.2 src-port 1 dst-port 2 queue 0",
        ] {
            let r = parse(s);
            assert_eq!(r.to_string(), s);
            assert_eq!(parse(&r.to_string()), r);
        }
    }

    #[test]
    fn bad_rules_are_refused_with_a_reason_naming_the_problem() {
        assert!(reason("").contains("empty"));
        assert!(reason("proto tcp dst-port 80").contains("no action"));
        assert!(reason("proto icmp queue 1").contains("tcp or udp"));
        assert!(reason("dst-port 70000 queue 1").contains("0..=65535"));
        assert!(reason("dst-port -1 queue 1").contains("port number"));
        assert!(reason("src-ip 10.0.0.300 drop").contains("address"));
        assert!(reason("queue").contains("needs a value"));
        assert!(reason("queue x").contains("queue number"));
        assert!(reason("dst-port 80 dst-port 81 drop").contains("repeats"));
        assert!(reason("queue 1 drop").contains("repeats"));
        assert!(reason("proto tcp flow-type tcp4 drop").contains("repeats"));
        assert!(reason("dport 80 drop").contains("unknown word 'dport'"));
        assert!(reason("src-ip 10.0.0.1 dst-ip ::1 drop").contains("families"));
        assert!(reason("flow-type tcp6 dst-ip 10.0.0.1 drop").contains("IP version"));
        assert!(reason("flow-type sctp4 drop").contains("flow-type"));
        let e = "dport 80 drop".parse::<FlowRule>().expect_err("bad");
        assert!(
            e.to_string()
                .starts_with("filter 'dport 80 drop': unknown word")
        );
    }

    #[test]
    fn a_rule_matches_only_packets_with_every_given_field() {
        let r = parse("proto tcp dst-ip 10.0.0.2 dst-port 80 queue 1");
        assert!(r.matches(&v4(PROTO_TCP, [1, 1, 1, 1], [10, 0, 0, 2], 999, 80)));
        assert!(!r.matches(&v4(PROTO_UDP, [1, 1, 1, 1], [10, 0, 0, 2], 999, 80)));
        assert!(!r.matches(&v4(PROTO_TCP, [1, 1, 1, 1], [10, 0, 0, 3], 999, 80)));
        assert!(!r.matches(&v4(PROTO_TCP, [1, 1, 1, 1], [10, 0, 0, 2], 999, 81)));
        let mut frag = v4(PROTO_TCP, [1, 1, 1, 1], [10, 0, 0, 2], 0, 0);
        frag.ports = None;
        assert!(
            !r.matches(&frag),
            "a port rule never matches a packet without ports"
        );
        let any = parse("src-ip 1.1.1.1 drop");
        assert!(
            any.matches(&frag),
            "an address-only rule matches without ports"
        );
        let v6only = parse("flow-type tcp6 queue 0");
        assert!(!v6only.matches(&v4(PROTO_TCP, [1; 4], [2; 4], 1, 2)));
        let six = FlowFields {
            addrs: IpPair::V6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST),
            protocol: PROTO_TCP,
            ports: Some(PortPair { src: 1, dst: 2 }),
            is_fragment: false,
        };
        assert!(v6only.matches(&six));
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let set = RuleSet::new(vec![
            parse("proto tcp dst-port 22 drop"),
            parse("proto tcp queue 2"),
            parse("proto tcp dst-port 80 queue 1"),
        ])
        .expect("within bound");
        let f = |dp| v4(PROTO_TCP, [1; 4], [2; 4], 5000, dp);
        assert_eq!(set.first_match(&f(22)), Some((0, RuleAction::Drop)));
        assert_eq!(set.first_match(&f(80)), Some((1, RuleAction::Queue(2))));
        assert_eq!(set.first_match(&v4(PROTO_UDP, [1; 4], [2; 4], 1, 80)), None);
        assert_eq!(set.max_queue(), Some(2));
    }

    #[test]
    fn a_rule_set_is_bounded() {
        let r = parse("drop");
        assert!(RuleSet::new(vec![r; RULES_MAX]).is_ok());
        assert_eq!(RuleSet::new(vec![r; RULES_MAX + 1]), Err(TooManyRules));
    }
}
