//! Canonical script text: `Display` for every AST node.
//!
//! The printer's output parses back to an equal AST (positions aside); it is not byte-identical
//! to the input: comments are dropped, times are printed in seconds with up to 6 decimals
//! (`+.1` becomes `+0.1`), integers in decimal, one event per line.

use crate::ast::*;
use core::fmt;
use wire::tcp::TcpFlags;

/// Seconds with up to 6 decimals, trailing zeros trimmed: 100000 → `0.1`, 2000000 → `2`.
pub struct Secs(pub u64);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / 1_000_000;
        let frac = self.0 % 1_000_000;
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let digits = format!("{frac:06}");
            write!(f, "{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// TCP flags in script notation (`S.`, `FP.`, `-` for none), letters in the order
/// `F S R P U . E W`.
#[derive(Clone, Copy)]
pub struct ScriptFlags(pub TcpFlags);

impl fmt::Display for ScriptFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == TcpFlags::NONE {
            return f.write_str("-");
        }
        const ORDER: [(TcpFlags, char); 8] = [
            (TcpFlags::FIN, 'F'),
            (TcpFlags::SYN, 'S'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ACK, '.'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
        ];
        for (flag, c) in ORDER {
            if self.0.contains(flag) {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for o in &self.options {
            writeln!(f, "{o}")?;
        }
        for e in &self.events {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

impl fmt::Display for ScriptOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "--{}={v}", self.name),
            None => write!(f, "--{}", self.name),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.time {
            EventTime::Unspecified => write!(f, "{}", self.action),
            t => write!(f, "{t} {}", self.action),
        }
    }
}

impl fmt::Display for EventTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EventTime::Unspecified => Ok(()),
            EventTime::Any => f.write_str("*"),
            EventTime::Absolute { at_usecs } => write!(f, "{}", Secs(at_usecs)),
            EventTime::Relative { after_usecs } => write!(f, "+{}", Secs(after_usecs)),
            EventTime::AbsoluteRange {
                start_usecs,
                end_usecs,
            } => write!(f, "{}~{}", Secs(start_usecs), Secs(end_usecs)),
            EventTime::RelativeRange {
                start_usecs,
                end_usecs,
            } => write!(f, "+{}~+{}", Secs(start_usecs), Secs(end_usecs)),
            EventTime::AbsoluteBlocking {
                start_usecs,
                end_usecs,
            } => write!(f, "{}...{}", Secs(start_usecs), Secs(end_usecs)),
            EventTime::RelativeBlocking {
                start_usecs,
                end_usecs,
            } => write!(f, "+{}...{}", Secs(start_usecs), Secs(end_usecs)),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Tcp(t) => write!(f, "{t}"),
            Action::Udp(u) => write!(f, "{u}"),
            Action::Icmp(i) => write!(f, "{i}"),
            Action::Syscall(s) => write!(f, "{s}"),
            Action::Shell(s) => write!(f, "`{s}`"),
            Action::Code(c) => write!(f, "%{{{c}}}%"),
            Action::Unsupported(s) => f.write_str(s),
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Inbound => "<",
            Direction::Outbound => ">",
        })
    }
}

impl fmt::Display for SeqRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}({})", self.start, self.end, self.len_bytes)
    }
}

impl fmt::Display for TosSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TosSpec::NoEcn => f.write_str("noecn"),
            TosSpec::Ect0 => f.write_str("ect0"),
            TosSpec::Ect1 => f.write_str("ect1"),
            TosSpec::Ce => f.write_str("ce"),
            TosSpec::Ect01 => f.write_str("ect01"),
            TosSpec::Tos(t) => write!(f, "tos {t:#04x}"),
        }
    }
}

impl fmt::Display for IpInfo {
    /// Always in brackets: `[ect0]`, `[tos 0x02, flowlabel 0x12345]`, `[ttl 64]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        let mut sep = "";
        if let Some(t) = self.tos {
            write!(f, "{t}")?;
            sep = ", ";
        }
        if let Some(l) = self.flow_label {
            write!(f, "{sep}flowlabel {l:#x}")?;
            sep = ", ";
        }
        if let Some(t) = self.ttl {
            write!(f, "{sep}ttl {t}")?;
        }
        f.write_str("]")
    }
}

/// ` [ect0]` (with its leading space) or nothing.
struct OptIp(Option<IpInfo>);

impl fmt::Display for OptIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(ip) => write!(f, " {ip}"),
            None => Ok(()),
        }
    }
}

/// ` 8080>40000` (with its leading space) or nothing.
struct OptPorts(Option<(u16, u16)>);

impl fmt::Display for OptPorts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((src, dst)) => write!(f, " {src}>{dst}"),
            None => Ok(()),
        }
    }
}

impl fmt::Display for TcpLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{} {} {}",
            self.direction,
            OptIp(self.ip),
            OptPorts(self.ports),
            ScriptFlags(self.flags),
            self.seq
        )?;
        if let Some(a) = self.ack {
            write!(f, " ack {a}")?;
        }
        if let Some(w) = self.win {
            write!(f, " win {w}")?;
        }
        if let Some(u) = self.urg {
            write!(f, " urg {u}")?;
        }
        match &self.options {
            TcpOptionsSpec::Absent => Ok(()),
            opts => write!(f, " {opts}"),
        }
    }
}

impl fmt::Display for TcpOptionsSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TcpOptionsSpec::Absent => Ok(()),
            TcpOptionsSpec::Any => f.write_str("<...>"),
            TcpOptionsSpec::List(list) => {
                f.write_str("<")?;
                for (i, o) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{o}")?;
                }
                f.write_str(">")
            }
        }
    }
}

impl fmt::Display for TcpOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TcpOption::Nop => f.write_str("nop"),
            TcpOption::Eol => f.write_str("eol"),
            TcpOption::Mss(m) => write!(f, "mss {m}"),
            TcpOption::WindowScale(w) => write!(f, "wscale {w}"),
            TcpOption::SackPermitted => f.write_str("sackOK"),
            TcpOption::Sack(blocks) => {
                f.write_str("sack")?;
                for (l, r) in blocks {
                    write!(f, " {l}:{r}")?;
                }
                Ok(())
            }
            TcpOption::Timestamp { val, ecr } => write!(f, "TS val {val} ecr {ecr}"),
            TcpOption::Md5(digest) => {
                f.write_str("md5 ")?;
                for b in digest {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            TcpOption::FastOpenNamed { experimental, name } => {
                f.write_str(if *experimental { "FOEXP " } else { "FO " })?;
                f.write_str(name)
            }
            TcpOption::FastOpen(cookie) | TcpOption::FastOpenExp(cookie) => {
                f.write_str(if matches!(self, TcpOption::FastOpenExp(_)) {
                    "FOEXP"
                } else {
                    "FO"
                })?;
                if !cookie.is_empty() {
                    f.write_str(" ")?;
                    for b in cookie {
                        write!(f, "{b:02x}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for UdpLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{} udp{} ({})",
            self.direction,
            OptIp(self.ip),
            OptPorts(self.ports),
            self.len_bytes
        )
    }
}

impl fmt::Display for IcmpLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.text.is_empty() {
            write!(f, "{}{} icmp", self.direction, OptIp(self.ip))
        } else {
            write!(f, "{}{} icmp {}", self.direction, OptIp(self.ip), self.text)
        }
    }
}

impl fmt::Display for SyscallLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.name)?;
        write_list(f, &self.args)?;
        write!(f, ") = {}", self.ret)?;
        if let Some(e) = &self.errno {
            write!(f, " {e}")?;
        }
        if let Some(n) = &self.errno_note {
            write!(f, " ({n})")?;
        }
        Ok(())
    }
}

fn write_list(f: &mut fmt::Formatter<'_>, items: &[Expr]) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{e}")?;
    }
    Ok(())
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Ellipsis => f.write_str("..."),
            Expr::Int(v) => write!(f, "{v}"),
            Expr::Symbol(s) => f.write_str(s),
            Expr::Str(s) => write!(f, "\"{s}\""),
            Expr::StrPrefix(s) => write!(f, "\"{s}\"..."),
            Expr::Strs(parts) => {
                for (i, s) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "\"{s}\"")?;
                }
                Ok(())
            }
            Expr::Assign(name, value) => write!(f, "{name}={value}"),
            Expr::Or(ops) => {
                for (i, e) in ops.iter().enumerate() {
                    if i > 0 {
                        f.write_str("|")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            Expr::List(items) => {
                f.write_str("[")?;
                write_list(f, items)?;
                f.write_str("]")
            }
            Expr::Struct(fields) => {
                f.write_str("{")?;
                for (i, fl) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{fl}")?;
                }
                f.write_str("}")
            }
            Expr::Call(name, args) => {
                write!(f, "{name}(")?;
                write_list(f, args)?;
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.name, &self.param) {
            (Some(n), Some(p)) => write!(f, "{n}({p})={}", self.value),
            (Some(n), None) => write!(f, "{n}={}", self.value),
            (None, _) => write!(f, "{}", self.value),
        }
    }
}
