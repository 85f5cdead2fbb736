//! The packetdrill script language as Rust types.
//!
//! A script is a list of command-line style options (`--tolerance_usecs=10000`) followed by
//! events. Every event has a time (possibly unspecified) and one action: a TCP/UDP/ICMP packet
//! line, a system call, a shell command in backticks or a `%{ … }%` Python block. Comments are
//! not kept. Derived equality also compares source positions ([`Event::pos`]);
//! [`Script::same_content`] compares everything else and is what the round-trip tests use.

use wire::tcp::TcpFlags;

/// A whole parsed script.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// Options given before the first event, in script order.
    pub options: Vec<ScriptOption>,
    /// Events in script order.
    pub events: Vec<Event>,
}

/// `--name=value` or `--name` at the head of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptOption {
    /// The name without the leading `--`; never empty.
    pub name: String,
    /// The text after `=`, if any: no whitespace outside `"…"` or backquotes
    /// (`--define=CC="reno"`, kept with its quotes).
    pub value: Option<String>,
}

/// Where an event starts in the source: 1-based line, 1-based byte column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl core::fmt::Display for Pos {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One timed line of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Position of the first character of the event (its time, or its action when untimed).
    pub pos: Pos,
    pub time: EventTime,
    pub action: Action,
}

/// When an event happens, as written. All values are microseconds.
///
/// Relative times count from the time base left by the previous event (see
/// [`crate::time::TimeCursor`]). In a blocking form (`a...b`) `start` is when the system call is
/// issued and `end` when it must return; packetdrill offsets *both* by the same base, so in
/// `+0.1...0.2` the call starts 0.1 s and returns 0.2 s after the previous event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventTime {
    /// No time written (backtick and `%{ }%` lines at the head or tail of a script): runs at
    /// the current time base, is never checked.
    Unspecified,
    /// `*`: any time.
    Any,
    /// `0.100`
    Absolute { at_usecs: u64 },
    /// `+0.100`
    Relative { after_usecs: u64 },
    /// `0.1~0.2`; invariant `start_usecs <= end_usecs`.
    AbsoluteRange { start_usecs: u64, end_usecs: u64 },
    /// `+0.1~+0.2`; invariant `start_usecs <= end_usecs`.
    RelativeRange { start_usecs: u64, end_usecs: u64 },
    /// `0...0.2` (blocking system call); invariant `start_usecs <= end_usecs`.
    AbsoluteBlocking { start_usecs: u64, end_usecs: u64 },
    /// `+0.1...0.2` (blocking system call); invariant `start_usecs <= end_usecs`.
    RelativeBlocking { start_usecs: u64, end_usecs: u64 },
}

/// What an event does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Tcp(TcpLine),
    Udp(UdpLine),
    Icmp(IcmpLine),
    Syscall(SyscallLine),
    /// Text between backticks (may span lines), kept verbatim.
    Shell(String),
    /// Text between `%{` and `}%`, kept verbatim.
    Code(String),
    /// A packet line of a kind this parser does not model (for example IP-level `[ect0]`
    /// annotations or an unknown TCP option): its text from the direction sign to the end of
    /// the line, without trailing comment or whitespace. Never empty.
    Unsupported(String),
}

/// `<` (the script injects the packet into the stack) or `>` (the stack must send it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Inbound,
    Outbound,
}

/// IP-level fields a packet line sets (inbound) or expects (outbound), packetdrill's
/// `opt_ip_info` after the direction: `[ect0]`, `(tos 0x2)`, `[flowlabel 0x12345]`,
/// `[ttl 64]`, `[ce, flowlabel 0x1]`. Brackets and parentheses mean the same; the printer
/// writes brackets.
///
/// Invariant (the grammar's): `ttl` stands alone; `tos` and `flow_label` may go together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpInfo {
    pub tos: Option<TosSpec>,
    /// 20 bits (IPv6 flow label).
    pub flow_label: Option<u32>,
    pub ttl: Option<u8>,
}

/// The traffic-class part of [`IpInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TosSpec {
    /// `noecn`: ECN field 00.
    NoEcn,
    /// `ect0`: 10.
    Ect0,
    /// `ect1`: 01.
    Ect1,
    /// `ce`: 11.
    Ce,
    /// `ect01`: either ECT codepoint (outbound lines only).
    Ect01,
    /// `tos 0x..`: the whole byte.
    Tos(u8),
}

impl TosSpec {
    /// The IPv4 TOS byte / IPv6 traffic class an inbound line sends (DSCP 0 but for
    /// `tos`); `None` for `ect01`, which names no single codepoint.
    pub fn inbound_byte(self) -> Option<u8> {
        match self {
            TosSpec::NoEcn => Some(0),
            TosSpec::Ect1 => Some(1),
            TosSpec::Ect0 => Some(2),
            TosSpec::Ce => Some(3),
            TosSpec::Ect01 => None,
            TosSpec::Tos(v) => Some(v),
        }
    }

    /// Whether an outbound packet whose TOS byte / traffic class is `tos` matches: the ECN
    /// forms check the two ECN bits (`ect01`: either ECT codepoint), `tos` the whole byte.
    pub fn matches(self, tos: u8) -> bool {
        let ecn = tos & 0x03;
        match self {
            TosSpec::NoEcn => ecn == 0,
            TosSpec::Ect1 => ecn == 1,
            TosSpec::Ect0 => ecn == 2,
            TosSpec::Ce => ecn == 3,
            TosSpec::Ect01 => ecn == 1 || ecn == 2,
            TosSpec::Tos(v) => tos == v,
        }
    }
}

/// A TCP packet line: `> P. 1:1001(1000) ack 1 win 257 <nop,nop,TS val 1 ecr 2>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpLine {
    pub direction: Direction,
    /// `[ect0]` and the like after the direction.
    pub ip: Option<IpInfo>,
    /// `SRC>DST` ports before the flags (packetdrill's `opt_port_info`); `None`: the
    /// connection's own.
    pub ports: Option<(u16, u16)>,
    /// Control bits; `-` in the script is the empty set.
    pub flags: TcpFlags,
    pub seq: SeqRange,
    /// `ack N`, in the sequence space of the other side (script-relative).
    pub ack: Option<u32>,
    /// `win N`: the raw 16-bit window field (unscaled).
    pub win: Option<u16>,
    /// `urg N`: the urgent pointer.
    pub urg: Option<u16>,
    pub options: TcpOptionsSpec,
}

impl TcpLine {
    /// Payload bytes the line carries (`len` of `start:end(len)`).
    pub fn payload_len(&self) -> u32 {
        self.seq.len_bytes
    }

    /// What the line asks for that the runner does not model (the IPv6 flow label, the
    /// TTL, explicit ports, an MD5 signature option), for a skip reason; `None` when it has
    /// nothing of the kind. The traffic class is modelled: an inbound line's `[ect0]`,
    /// `[ect1]`, `[ce]`, `[noecn]` or `(tos 0x..)` sets the IP header's byte, an outbound
    /// line's is checked ([`TosSpec::matches`]).
    pub fn unmodelled(&self) -> Option<&'static str> {
        match self.ip {
            Some(IpInfo {
                tos: Some(TosSpec::Ect01),
                ..
            }) if self.direction == Direction::Inbound => {
                return Some("`[ect01]` on an inbound line (either codepoint: which to send?)");
            }
            Some(IpInfo {
                flow_label: None,
                ttl: None,
                ..
            })
            | None => {}
            Some(_) => {
                return Some("IP-level fields of a packet line (flowlabel, ttl)");
            }
        }
        if self.ports.is_some() {
            return Some("explicit ports on a packet line");
        }
        if let TcpOptionsSpec::List(list) = &self.options
            && list.iter().any(|o| matches!(o, TcpOption::Md5(_)))
        {
            return Some("the TCP MD5 signature option (RFC 2385)");
        }
        None
    }
}

/// `start:end(len)`, script-relative. Invariant: `end == start + len_bytes` (mod 2^32); SYN and
/// FIN are not counted (`S 0:0(0)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqRange {
    pub start: u32,
    pub end: u32,
    pub len_bytes: u32,
}

/// The option part of a TCP line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpOptionsSpec {
    /// No `<…>` at all: an outbound segment must carry no options.
    Absent,
    /// `<...>`: any options, not checked.
    Any,
    /// `<mss 1460,nop,…>`, in wire order.
    List(Vec<TcpOption>),
}

/// One TCP option as written in a script (RFC 9293 §3.2, RFC 7323, RFC 2018, RFC 7413).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpOption {
    /// `nop` (kind 1)
    Nop,
    /// `eol` (kind 0)
    Eol,
    /// `mss N` (kind 2)
    Mss(u16),
    /// `wscale N` (kind 3)
    WindowScale(u8),
    /// `sackOK` (kind 4)
    SackPermitted,
    /// `sack a:b c:d` (kind 5): blocks as (left, right), script-relative; at least one block.
    Sack(Vec<(u32, u32)>),
    /// `TS val N ecr M` (kind 8)
    Timestamp { val: u32, ecr: u32 },
    /// `FO` (cookie request, empty cookie) or `FO abcd1234` (kind 34, RFC 7413).
    FastOpen(Vec<u8>),
    /// `FOEXP` or `FOEXP abcd1234`: the experimental form (kind 254, magic 0xF989).
    FastOpenExp(Vec<u8>),
    /// `FO NAME` / `FOEXP NAME`: a cookie named by a symbol the executor defines
    /// (`TFO_COOKIE`, `TFO_COOKIE_ZERO`, as Linux's packetdrill wrapper does with `-D`).
    FastOpenNamed { experimental: bool, name: String },
    /// `md5 0011…` (kind 19, RFC 2385): the digest, at most 16 bytes (packetdrill allows
    /// shorter ones for tests of bad digests).
    Md5(Vec<u8>),
}

/// `< udp (N)` / `> udp (N)`: a UDP datagram carrying `len_bytes` of payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpLine {
    pub direction: Direction,
    pub ip: Option<IpInfo>,
    /// `udp SRC>DST (N)`.
    pub ports: Option<(u16, u16)>,
    pub len_bytes: u32,
}

/// `< icmp unreachable frag_needed mtu 1200 …`: kept as the words after `icmp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcmpLine {
    pub direction: Direction,
    pub ip: Option<IpInfo>,
    /// The rest of the line after `icmp`, whitespace-normalised; may be empty.
    pub text: String,
}

/// `name(arg, …) = ret [ERRNO] [(note)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallLine {
    /// The call's name as written (see [`SyscallLine::kind`]).
    pub name: String,
    pub args: Vec<Expr>,
    /// The expected return value (usually an integer).
    pub ret: Expr,
    /// `EAGAIN` in `= -1 EAGAIN (Resource temporarily unavailable)`.
    pub errno: Option<String>,
    /// The parenthesised note after the return value and errno (packetdrill's `opt_note`,
    /// which may stand without an errno: `= 0x2 (flags O_RDWR)`), verbatim without the
    /// parentheses.
    pub errno_note: Option<String>,
}

/// The system calls the corpus (and packetdrill generally) uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyscallKind {
    Socket,
    Bind,
    Listen,
    Accept,
    Connect,
    Read,
    Readv,
    Recv,
    Recvfrom,
    Recvmsg,
    Write,
    Writev,
    Send,
    Sendto,
    Sendmsg,
    Close,
    Shutdown,
    Fcntl,
    Ioctl,
    Setsockopt,
    Getsockopt,
    Getsockname,
    Getpeername,
    Poll,
    EpollCreate,
    EpollCtl,
    EpollWait,
    Splice,
    Sendfile,
    Open,
    Pipe,
}

impl SyscallKind {
    /// The name as written in scripts.
    pub fn name(self) -> &'static str {
        match self {
            SyscallKind::Socket => "socket",
            SyscallKind::Bind => "bind",
            SyscallKind::Listen => "listen",
            SyscallKind::Accept => "accept",
            SyscallKind::Connect => "connect",
            SyscallKind::Read => "read",
            SyscallKind::Readv => "readv",
            SyscallKind::Recv => "recv",
            SyscallKind::Recvfrom => "recvfrom",
            SyscallKind::Recvmsg => "recvmsg",
            SyscallKind::Write => "write",
            SyscallKind::Writev => "writev",
            SyscallKind::Send => "send",
            SyscallKind::Sendto => "sendto",
            SyscallKind::Sendmsg => "sendmsg",
            SyscallKind::Close => "close",
            SyscallKind::Shutdown => "shutdown",
            SyscallKind::Fcntl => "fcntl",
            SyscallKind::Ioctl => "ioctl",
            SyscallKind::Setsockopt => "setsockopt",
            SyscallKind::Getsockopt => "getsockopt",
            SyscallKind::Getsockname => "getsockname",
            SyscallKind::Getpeername => "getpeername",
            SyscallKind::Poll => "poll",
            SyscallKind::EpollCreate => "epoll_create",
            SyscallKind::EpollCtl => "epoll_ctl",
            SyscallKind::EpollWait => "epoll_wait",
            SyscallKind::Splice => "splice",
            SyscallKind::Sendfile => "sendfile",
            SyscallKind::Open => "open",
            SyscallKind::Pipe => "pipe",
        }
    }

    /// Every kind, in declaration order.
    pub const ALL: [SyscallKind; 31] = [
        SyscallKind::Socket,
        SyscallKind::Bind,
        SyscallKind::Listen,
        SyscallKind::Accept,
        SyscallKind::Connect,
        SyscallKind::Read,
        SyscallKind::Readv,
        SyscallKind::Recv,
        SyscallKind::Recvfrom,
        SyscallKind::Recvmsg,
        SyscallKind::Write,
        SyscallKind::Writev,
        SyscallKind::Send,
        SyscallKind::Sendto,
        SyscallKind::Sendmsg,
        SyscallKind::Close,
        SyscallKind::Shutdown,
        SyscallKind::Fcntl,
        SyscallKind::Ioctl,
        SyscallKind::Setsockopt,
        SyscallKind::Getsockopt,
        SyscallKind::Getsockname,
        SyscallKind::Getpeername,
        SyscallKind::Poll,
        SyscallKind::EpollCreate,
        SyscallKind::EpollCtl,
        SyscallKind::EpollWait,
        SyscallKind::Splice,
        SyscallKind::Sendfile,
        SyscallKind::Open,
        SyscallKind::Pipe,
    ];

    /// The kind for a name, if it is one we know.
    pub fn from_name(name: &str) -> Option<SyscallKind> {
        SyscallKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl SyscallLine {
    /// The known kind of this call, `None` for a name we do not model (counted as unsupported).
    pub fn kind(&self) -> Option<SyscallKind> {
        SyscallKind::from_name(&self.name)
    }
}

/// A system-call argument or return expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `...`: "don't care" (an address, a buffer).
    Ellipsis,
    /// A decimal or `0x` hexadecimal integer, possibly negative.
    Int(i64),
    /// A symbolic constant: `SOCK_STREAM`, `NULL`, `EPOLLIN`.
    Symbol(String),
    /// A double-quoted string, without the quotes (no escapes are interpreted).
    Str(String),
    /// `"abc"...`: a string the call's buffer starts with.
    StrPrefix(String),
    /// `"ab" "cd"`: adjacent strings, concatenated (at least two).
    Strs(Vec<String>),
    /// `NAME=value` outside a `{…}` (packetdrill's `WORD '=' expression`).
    Assign(String, Box<Expr>),
    /// `A|B|C`: at least two operands, none of them itself an `Or`.
    Or(Vec<Expr>),
    /// `[a, b]`
    List(Vec<Expr>),
    /// `{a=1, b(2)=3, ...}`
    Struct(Vec<Field>),
    /// `name(args)`, e.g. `htons(8080)`.
    Call(String, Vec<Expr>),
}

/// One element of a `{…}` struct expression.
///
/// Invariant: `param` is only present when `name` is (`msg_iov(1)=[…]`); a positional element
/// (`{..., 40}`) has neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: Option<String>,
    pub param: Option<Expr>,
    pub value: Expr,
}

/// How many events of each kind a script holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScriptStats {
    pub tcp_inbound: usize,
    pub tcp_outbound: usize,
    pub udp: usize,
    pub icmp: usize,
    /// System calls of a known [`SyscallKind`].
    pub syscalls: usize,
    /// System calls whose name we do not model.
    pub syscalls_unknown: usize,
    pub shell: usize,
    pub code: usize,
    pub unsupported: usize,
}

impl ScriptStats {
    /// Events the runner will have to skip (shell, code, UDP, ICMP, unknown calls, unsupported).
    pub fn skipped(&self) -> usize {
        self.udp + self.icmp + self.syscalls_unknown + self.shell + self.code + self.unsupported
    }

    /// Sum over all kinds.
    pub fn total(&self) -> usize {
        self.tcp_inbound + self.tcp_outbound + self.syscalls + self.skipped()
    }
}

impl core::ops::AddAssign for ScriptStats {
    fn add_assign(&mut self, o: ScriptStats) {
        self.tcp_inbound += o.tcp_inbound;
        self.tcp_outbound += o.tcp_outbound;
        self.udp += o.udp;
        self.icmp += o.icmp;
        self.syscalls += o.syscalls;
        self.syscalls_unknown += o.syscalls_unknown;
        self.shell += o.shell;
        self.code += o.code;
        self.unsupported += o.unsupported;
    }
}

impl Script {
    /// The value of `--tolerance_usecs`, or packetdrill's default of 4000 µs.
    pub fn tolerance_usecs(&self) -> u64 {
        self.option_u64("tolerance_usecs")
            .unwrap_or(DEFAULT_TOLERANCE_USECS)
    }

    /// The value of `--tcp_ts_tick_usecs` (TS val checking is off when absent or 0).
    pub fn tcp_ts_tick_usecs(&self) -> Option<u64> {
        self.option_u64("tcp_ts_tick_usecs").filter(|&t| t > 0)
    }

    /// An option's value parsed as an unsigned integer; `None` when absent or not a number.
    pub fn option_u64(&self, name: &str) -> Option<u64> {
        self.options
            .iter()
            .rev()
            .find(|o| o.name == name)
            .and_then(|o| o.value.as_deref())
            .and_then(|v| v.parse().ok())
    }

    /// Counts events by kind.
    pub fn stats(&self) -> ScriptStats {
        let mut s = ScriptStats::default();
        for e in &self.events {
            match &e.action {
                Action::Tcp(t) if t.direction == Direction::Inbound => s.tcp_inbound += 1,
                Action::Tcp(_) => s.tcp_outbound += 1,
                Action::Udp(_) => s.udp += 1,
                Action::Icmp(_) => s.icmp += 1,
                Action::Syscall(c) if c.kind().is_some() => s.syscalls += 1,
                Action::Syscall(_) => s.syscalls_unknown += 1,
                Action::Shell(_) => s.shell += 1,
                Action::Code(_) => s.code += 1,
                Action::Unsupported(_) => s.unsupported += 1,
            }
        }
        s
    }

    /// Equality of options, times and actions, ignoring source positions.
    pub fn same_content(&self, other: &Script) -> bool {
        self.options == other.options
            && self.events.len() == other.events.len()
            && self
                .events
                .iter()
                .zip(&other.events)
                .all(|(a, b)| a.time == b.time && a.action == b.action)
    }
}

/// packetdrill's default timing tolerance (`--tolerance_usecs`).
pub const DEFAULT_TOLERANCE_USECS: u64 = 4000;
