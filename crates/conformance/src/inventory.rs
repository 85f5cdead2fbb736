//! What a set of scripts needs from the stack: system calls, socket options, symbols, TCP
//! flags and options, time forms. Used to plan the executor and to report coverage.

use crate::ast::{Action, Direction, EventTime, Expr, Script, ScriptStats, TcpOptionsSpec};
use crate::print::ScriptFlags;
use std::collections::BTreeMap;
use std::fmt;

/// Counts of the constructs used by a set of scripts. Maps are ordered (deterministic output).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    pub scripts: usize,
    pub stats: ScriptStats,
    /// Call name → count.
    pub syscalls: BTreeMap<String, usize>,
    /// `setsockopt LEVEL NAME` / `getsockopt LEVEL NAME` → count.
    pub sockopts: BTreeMap<String, usize>,
    /// `fcntl CMD ARG…` / `ioctl REQ` → count.
    pub controls: BTreeMap<String, usize>,
    /// Every symbolic constant in call arguments (`MSG_MORE`, `EPOLLET`, `SHUT_RD`…) → count.
    pub symbols: BTreeMap<String, usize>,
    /// Expected errno values → count.
    pub errnos: BTreeMap<String, usize>,
    /// `< S.` / `> P.` style direction+flags → count.
    pub flags: BTreeMap<String, usize>,
    /// `< mss`, `> TS`, `> <...>` style direction+option → count.
    pub tcp_options: BTreeMap<String, usize>,
    /// Time forms (`relative`, `relative range`, `blocking`…) → count.
    pub time_forms: BTreeMap<&'static str, usize>,
    /// `--name` script options → count.
    pub script_options: BTreeMap<String, usize>,
}

fn bump<K: Ord>(m: &mut BTreeMap<K, usize>, k: K) {
    *m.entry(k).or_insert(0) += 1;
}

fn symbols_in(e: &Expr, out: &mut BTreeMap<String, usize>) {
    match e {
        Expr::Symbol(s) => bump(out, s.clone()),
        Expr::Or(v) | Expr::List(v) | Expr::Call(_, v) => {
            v.iter().for_each(|x| symbols_in(x, out));
        }
        Expr::Struct(fields) => {
            for f in fields {
                if let Some(p) = &f.param {
                    symbols_in(p, out);
                }
                symbols_in(&f.value, out);
            }
        }
        Expr::Assign(_, value) => symbols_in(value, out),
        Expr::Ellipsis | Expr::Int(_) | Expr::Str(_) | Expr::StrPrefix(_) | Expr::Strs(_) => {}
    }
}

fn time_form(t: &EventTime) -> &'static str {
    match t {
        EventTime::Unspecified => "untimed",
        EventTime::Any => "any (*)",
        EventTime::Absolute { .. } => "absolute",
        EventTime::Relative { .. } => "relative (+t)",
        EventTime::AbsoluteRange { .. } => "absolute range (a~b)",
        EventTime::RelativeRange { .. } => "relative range (+a~+b)",
        EventTime::AbsoluteBlocking { .. } => "blocking (a...b)",
        EventTime::RelativeBlocking { .. } => "blocking (+a...b)",
    }
}

impl Inventory {
    /// Adds one script's constructs.
    pub fn add(&mut self, s: &Script) {
        self.scripts += 1;
        self.stats += s.stats();
        for o in &s.options {
            bump(&mut self.script_options, format!("--{}", o.name));
        }
        for e in &s.events {
            bump(&mut self.time_forms, time_form(&e.time));
            match &e.action {
                Action::Tcp(t) => {
                    bump(
                        &mut self.flags,
                        format!("{} {}", t.direction, ScriptFlags(t.flags)),
                    );
                    let d = t.direction;
                    match &t.options {
                        TcpOptionsSpec::Absent => {}
                        TcpOptionsSpec::Any => bump(&mut self.tcp_options, format!("{d} <...>")),
                        TcpOptionsSpec::List(list) => {
                            for o in list {
                                let name = o.to_string();
                                let word = name.split(' ').next().unwrap_or("");
                                bump(&mut self.tcp_options, format!("{d} {word}"));
                            }
                        }
                    }
                }
                Action::Syscall(c) => {
                    bump(&mut self.syscalls, c.name.clone());
                    if let Some(errno) = &c.errno {
                        bump(&mut self.errnos, errno.clone());
                    }
                    for a in &c.args {
                        symbols_in(a, &mut self.symbols);
                    }
                    match c.name.as_str() {
                        "setsockopt" | "getsockopt" => {
                            let level = c.args.get(1).map(|e| e.to_string()).unwrap_or_default();
                            let name = c.args.get(2).map(|e| e.to_string()).unwrap_or_default();
                            bump(&mut self.sockopts, format!("{} {level} {name}", c.name));
                        }
                        "fcntl" | "ioctl" => {
                            let rest: Vec<String> =
                                c.args.iter().skip(1).map(|e| e.to_string()).collect();
                            bump(&mut self.controls, format!("{} {}", c.name, rest.join(" ")));
                        }
                        _ => {}
                    }
                }
                Action::Udp(_)
                | Action::Icmp(_)
                | Action::Shell(_)
                | Action::Code(_)
                | Action::Unsupported(_) => {}
            }
        }
    }

    /// Whether any script injects or expects packets in `direction` with `option` (its first
    /// word, e.g. `TS`, `sack`, `<...>`).
    pub fn uses_option(&self, direction: Direction, option: &str) -> bool {
        self.tcp_options
            .contains_key(&format!("{direction} {option}"))
    }
}

fn write_map<K: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    title: &str,
    m: &BTreeMap<K, usize>,
) -> fmt::Result {
    if m.is_empty() {
        return Ok(());
    }
    write!(f, "  {title}:")?;
    for (k, n) in m {
        write!(f, " {k}×{n};")?;
    }
    writeln!(f)
}

impl fmt::Display for Inventory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        writeln!(
            f,
            "  scripts {}: {} inbound, {} outbound TCP lines, {} calls, {} shell, {} code, \
             {} unsupported",
            self.scripts,
            s.tcp_inbound,
            s.tcp_outbound,
            s.syscalls + s.syscalls_unknown,
            s.shell,
            s.code,
            s.unsupported + s.udp + s.icmp
        )?;
        write_map(f, "script options", &self.script_options)?;
        write_map(f, "calls", &self.syscalls)?;
        write_map(f, "socket options", &self.sockopts)?;
        write_map(f, "fcntl/ioctl", &self.controls)?;
        write_map(f, "symbols", &self.symbols)?;
        write_map(f, "errnos", &self.errnos)?;
        write_map(f, "flags", &self.flags)?;
        write_map(f, "TCP options", &self.tcp_options)?;
        write_map(f, "times", &self.time_forms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_script;

    #[test]
    fn inventory_counts_calls_sockopts_symbols_and_options() {
        let s = parse_script(
            "--tolerance_usecs=10000\n\
             0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\
             +0 setsockopt(3, SOL_TCP, TCP_NODELAY, [1], 4) = 0\n\
             +0 fcntl(3, F_SETFL, O_RDWR|O_NONBLOCK) = 0\n\
             +0 connect(3, ..., ...) = -1 EINPROGRESS (Operation now in progress)\n\
             +0 > S 0:0(0) <mss 1460,nop,wscale 8>\n\
             +.1~+.2 < S. 0:0(0) ack 1 win 100 <...>\n",
        )
        .expect("parses");
        let mut inv = Inventory::default();
        inv.add(&s);
        assert_eq!(inv.syscalls.get("socket"), Some(&1));
        assert_eq!(inv.sockopts.get("setsockopt SOL_TCP TCP_NODELAY"), Some(&1));
        assert_eq!(
            inv.controls.get("fcntl F_SETFL O_RDWR|O_NONBLOCK"),
            Some(&1)
        );
        assert_eq!(inv.symbols.get("O_NONBLOCK"), Some(&1));
        assert_eq!(inv.errnos.get("EINPROGRESS"), Some(&1));
        assert_eq!(inv.flags.get("> S"), Some(&1));
        assert_eq!(inv.flags.get("< S."), Some(&1));
        assert!(inv.uses_option(Direction::Outbound, "wscale"));
        assert!(inv.uses_option(Direction::Inbound, "<...>"));
        assert!(!inv.uses_option(Direction::Inbound, "mss"));
        assert_eq!(inv.time_forms.get("relative range (+a~+b)"), Some(&1));
        assert_eq!(inv.script_options.get("--tolerance_usecs"), Some(&1));
        assert!(
            inv.to_string()
                .contains("socket options: setsockopt SOL_TCP TCP_NODELAY×1;")
        );
    }
}
