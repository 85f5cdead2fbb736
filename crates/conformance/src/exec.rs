//! The executor: runs a parsed script against a live [`stack::Stack`] on a virtual clock.
//!
//! packetdrill's model, restated for a sans-IO stack:
//! - the stack under test is the script's "local" host, [`LOCAL_IP`]; the script's inbound
//!   packets come from the remote host [`REMOTE_IP`], whose MAC side is synthetic (the executor
//!   answers every ARP request the stack sends);
//! - time is virtual, in µs from 0; before each event the stack's timers run up to the event's
//!   time and every frame it sends is collected;
//! - an outbound line is matched against the next collected TCP segments in order (a TSO
//!   super-segment by back-to-back smaller segments, [`SuperSegment`]); a segment sent while
//!   the script expects none fails the script, except after the last outbound line (as in
//!   packetdrill, which inspects outbound traffic only when a line expects a packet);
//! - system calls map to the stack's socket API; the script's `socket()` gets fd 3, later fds
//!   count up. A call on a blocking socket that cannot complete stays outstanding and is retried
//!   whenever the stack changes (packets, timers), and its return time is checked then;
//! - shell lines are skipped and counted ([`RunReport::skipped_lines`]) after the sysctls
//!   they set are applied; a `%{ }%` block is evaluated at its time against the `tcp_info`
//!   of the socket under test (`exec/code.rs`, [`crate::pycode`]): a false assertion fails
//!   the script, and a block the evaluator or the stack cannot answer (an unknown
//!   `tcpi_*` field, unsupported Python) ends it as [`Outcome::Skip`], never as a pass;
//! - a script that needs something the stack cannot express (an unsupported socket option,
//!   client-side Fast Open) ends as [`Outcome::Skip`] with the reason; server-side Fast Open
//!   (`FO`/`FOEXP` options, `TFO_COOKIE`, `TCP_FASTOPEN`, the `tcp_fastopen` sysctls) goes
//!   through the stack (`exec/fastopen.rs`).

use crate::ast::{
    Action, Direction, Event, Expr, Pos, Script, SyscallKind, SyscallLine, TcpLine, TcpOption,
    TcpOptionsSpec,
};
use crate::matcher::{
    MatchContext, Progress, SuperSegment, check_option_layout, repr_options_text,
};
use crate::print::{ScriptFlags, Secs};
use crate::time::{TimeCursor, Window};
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use stack::RxMeta;
use stack::{
    InterfaceConfig, Ipv4Cidr, Ipv6Cidr, Readiness, SocketError, SocketHandle, SocketOption, Stack,
    StackConfig,
};
use std::collections::{BTreeMap, VecDeque};
use wire::tcp::{SeqNumber, TcpPacket, TcpRepr};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, ChecksumCaps, EtherType, EthernetAddress, EthernetFrame,
    EthernetRepr, Icmpv6Packet, Icmpv6Repr, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet,
    Ipv6Repr,
};

mod code;
mod corpus;
mod epoll;
mod errqueue;
mod fastopen;
mod icmp;
mod nstat;
mod packets;
mod poll;
mod profile;
mod shell;
mod sockopt;
mod syscalls;

pub use corpus::{
    Tally, apply_file_name_options, expected_passing, ip_version_from_file_name, run_file,
    script_files,
};
pub use profile::Profile;

use epoll::Epoll;

/// The stack's address (packetdrill's default local IPv4 address).
pub const LOCAL_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
/// The script side's address (packetdrill's default remote IPv4 address).
pub const REMOTE_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The gateway the stack routes [`REMOTE_IP`] through (answered by the synthetic remote side).
pub const GATEWAY_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);

/// The stack's address in IPv6 mode (`--ip_version=ipv6`), on a /64 of its own.
pub const LOCAL_IP6: Ipv6Addr = Ipv6Addr::new(0xfd3d, 0x0a0b, 0x17d6, 0, 0, 0, 0, 1);
/// The script side's address in IPv6 mode, off the stack's /64 (reached through a gateway).
pub const REMOTE_IP6: Ipv6Addr = Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0, 1);

/// The addresses of a run: IPv4 ([`LOCAL_IP`]/[`REMOTE_IP`]) unless `--ip_version=ipv6`
/// ([`LOCAL_IP6`]/[`REMOTE_IP6`]); `--local_ip` / `--remote_ip` override them. The gateway
/// is on the local prefix and never the local address; the executor answers ARP and
/// neighbour solicitations for any address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addrs {
    V4 {
        local: Ipv4Addr,
        remote: Ipv4Addr,
        gateway: Ipv4Addr,
    },
    V6 {
        local: Ipv6Addr,
        remote: Ipv6Addr,
        gateway: Ipv6Addr,
    },
}

impl Addrs {
    const DEFAULT: Addrs = Addrs::V4 {
        local: LOCAL_IP,
        remote: REMOTE_IP,
        gateway: GATEWAY_IP,
    };

    /// The addresses a script's options select; `Err` names an option the executor cannot
    /// honour (an address of the other family, or not an address).
    fn from_options(script: &Script) -> Result<Addrs, String> {
        let v6 = script
            .options
            .iter()
            .any(|o| o.name == "ip_version" && o.value.as_deref() == Some("ipv6"));
        let (mut local, mut remote) = if v6 {
            (IpAddr::V6(LOCAL_IP6), IpAddr::V6(REMOTE_IP6))
        } else {
            (IpAddr::V4(LOCAL_IP), IpAddr::V4(REMOTE_IP))
        };
        for o in &script.options {
            let slot = match o.name.as_str() {
                "local_ip" => &mut local,
                "remote_ip" => &mut remote,
                _ => continue,
            };
            let value = o.value.as_deref().unwrap_or("");
            let family = if v6 { "IPv6" } else { "IPv4" };
            *slot = value
                .parse::<IpAddr>()
                .ok()
                .filter(|a| a.is_ipv6() == v6)
                .ok_or_else(|| {
                    format!(
                        "script option --{}={value}: not an {family} address",
                        o.name
                    )
                })?;
        }
        Ok(match (local, remote) {
            (IpAddr::V4(local), IpAddr::V4(remote)) => {
                let [a, b, c, d] = local.octets();
                let gateway = if local != GATEWAY_IP && [a, b, c] == [192, 168, 0] {
                    GATEWAY_IP
                } else {
                    Ipv4Addr::new(a, b, c, if d == 254 { 253 } else { 254 })
                };
                Addrs::V4 {
                    local,
                    remote,
                    gateway,
                }
            }
            (IpAddr::V6(local), IpAddr::V6(remote)) => {
                let mut seg = local.segments();
                let host = if seg[7] == 0xfffe { 0xfffd } else { 0xfffe };
                seg[4..].copy_from_slice(&[0, 0, 0, host]);
                Addrs::V6 {
                    local,
                    remote,
                    gateway: Ipv6Addr::from(seg),
                }
            }
            _ => return Err("script addresses of different families".to_string()),
        })
    }

    fn local(&self) -> IpAddr {
        match *self {
            Addrs::V4 { local, .. } => IpAddr::V4(local),
            Addrs::V6 { local, .. } => IpAddr::V6(local),
        }
    }

    fn remote(&self) -> IpAddr {
        match *self {
            Addrs::V4 { remote, .. } => IpAddr::V4(remote),
            Addrs::V6 { remote, .. } => IpAddr::V6(remote),
        }
    }

    /// Source and destination of what the stack sends.
    fn pair_out(&self) -> IpPair {
        match *self {
            Addrs::V4 { local, remote, .. } => IpPair::V4 {
                src: local,
                dst: remote,
            },
            Addrs::V6 { local, remote, .. } => IpPair::V6 {
                src: local,
                dst: remote,
            },
        }
    }

    /// Source and destination of what the script injects.
    fn pair_in(&self) -> IpPair {
        match self.pair_out() {
            IpPair::V4 { src, dst } => IpPair::V4 { src: dst, dst: src },
            IpPair::V6 { src, dst } => IpPair::V6 { src: dst, dst: src },
        }
    }
}

/// The port `bind(fd, ..., ...)` binds and `connect(fd, ..., ...)` connects to (packetdrill's
/// default server port).
pub const SERVER_PORT: u16 = 8080;
/// The script side's port for connections it opens.
pub const REMOTE_PORT: u16 = 49_152;
const LOCAL_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
const REMOTE_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
/// Where the script side's sequence numbers start on the wire.
const PEER_ISN: SeqNumber = SeqNumber(1_000_000);
/// How long a `*` outbound line waits for its packet.
const ANY_TIME_WAIT_USECS: u64 = 600_000_000;
/// Largest single read the executor performs (a script may ask for gigabytes).
const READ_CHUNK_BYTES_MAX: usize = 4 << 20;
/// Largest payload of an inbound line the executor builds.
const INBOUND_PAYLOAD_BYTES_MAX: u32 = 60_000;
/// Stack interactions per clock advance before the executor gives up on a timer loop.
const STEPS_MAX: u32 = 1_000_000;
/// Segments the stack may send ahead of the outbound lines that will match them.
const OUT_QUEUE_SEGMENTS_MAX: usize = 10_000;

/// How a script run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// The first mismatch, at the line it was found on.
    Fail {
        pos: Pos,
        message: String,
    },
    /// The script needs something the stack cannot express.
    Skip {
        reason: String,
    },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pass => f.write_str("pass"),
            Outcome::Fail { pos, message } => write!(f, "fail {pos}: {message}"),
            Outcome::Skip { reason } => write!(f, "skip {reason}"),
        }
    }
}

/// The result of one script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    pub outcome: Outcome,
    /// Shell and `%{ }%` lines skipped (they never count as passed).
    pub skipped_lines: usize,
    /// `assert` statements of `%{ }%` blocks evaluated. Invariant:
    /// `assertions_passed + assertions_failed == assertions_checked`.
    pub assertions_checked: usize,
    /// Of those, the ones that held.
    pub assertions_passed: usize,
    /// Of those, the ones that did not (at most one: the first fails the script).
    pub assertions_failed: usize,
    /// `assert` statements of a `%{ }%` block reached but not evaluated (the block asked for
    /// something unsupported, which makes the script an [`Outcome::Skip`]).
    pub assertions_skipped: usize,
    /// Segments of a socket other than the one under test that the matcher passed over, as
    /// packetdrill does (`find_socket_for_live_packet`): a FIN or retransmission of a
    /// connection the script left behind, read when the script is at a later socket's line.
    pub other_socket_segments: usize,
}

/// Parses and runs a script's text.
pub fn run_text(text: &str, profile: &Profile) -> RunReport {
    match crate::parse_script(text) {
        Ok(script) => run_script(&script, profile),
        Err(e) => RunReport {
            outcome: Outcome::Fail {
                pos: Pos {
                    line: e.line,
                    col: e.col,
                },
                message: format!("parse error: {}", e.kind),
            },
            skipped_lines: 0,
            assertions_checked: 0,
            assertions_passed: 0,
            assertions_failed: 0,
            assertions_skipped: 0,
            other_socket_segments: 0,
        },
    }
}

/// Runs a parsed script against a fresh stack built from `profile`.
pub fn run_script(script: &Script, profile: &Profile) -> RunReport {
    let mut exec = Exec::new(script, profile);
    let outcome = match exec.run(script) {
        // Unreachable while every unevaluated block stops the run; kept so that a future
        // path that skips a block cannot turn into a hollow pass.
        Ok(()) if exec.assertions_skipped > 0 => Outcome::Skip {
            reason: format!(
                "{} tcp_info assertions in %{{ }}% blocks not evaluated",
                exec.assertions_skipped
            ),
        },
        Ok(()) => Outcome::Pass,
        Err(Stop::Fail(pos, message)) => Outcome::Fail { pos, message },
        Err(Stop::Skip(reason)) => Outcome::Skip { reason },
    };
    RunReport {
        outcome,
        skipped_lines: exec.skipped_lines,
        assertions_checked: exec.assertions_checked,
        assertions_passed: exec.assertions_passed,
        assertions_failed: exec.assertions_failed,
        assertions_skipped: exec.assertions_skipped,
        other_socket_segments: exec.other_socket_segments,
    }
}

/// Why a run stopped early.
#[derive(Debug)]
enum Stop {
    Fail(Pos, String),
    Skip(String),
}

fn fail<T>(pos: Pos, msg: impl Into<String>) -> Result<T, Stop> {
    Err(Stop::Fail(pos, msg.into()))
}

fn skip<T>(msg: impl Into<String>) -> Result<T, Stop> {
    Err(Stop::Skip(msg.into()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FdKind {
    /// `socket()` done, neither `listen` nor `connect` yet.
    Fresh,
    Listener(SocketHandle),
    Conn(SocketHandle),
}

#[derive(Debug)]
struct Fd {
    kind: FdKind,
    nonblocking: bool,
    /// `TCP_NODELAY` set before the socket had a stack handle.
    nodelay: Option<bool>,
    /// `TCP_MAXSEG` set before the socket had a stack handle.
    maxseg: Option<u16>,
    /// `SO_KEEPALIVE` and the `TCP_KEEP*` timing, applied together (Linux keeps the timing
    /// while keepalive is off).
    keepalive: KeepaliveOpt,
    /// `shutdown(SHUT_RD)` was called: a read with nothing queued returns 0.
    rd_shut: bool,
    /// `TCP_INQ` is on: `recvmsg` carries the `TCP_CM_INQ` hint ([`Stack::tcp_inq_hint`]).
    inq: bool,
    /// `TCP_FASTOPEN` / `TCP_FASTOPEN_KEY` set before `listen` (applied by it).
    fastopen: Vec<SocketOption>,
    /// `TCP_FASTOPEN_CONNECT` set: `connect` is the stack's deferred Fast Open.
    fastopen_connect: bool,
    /// `TCP_SYNCNT` set before the socket had a stack handle.
    syn_retries: Option<u8>,
    /// An active open (`connect`, `sendto(MSG_FASTOPEN)`) not yet seen synchronized: a reset
    /// answering its SYN is `ECONNREFUSED` (Linux `tcp_reset` in SYN-SENT), any other reset
    /// `ECONNRESET`.
    opening: bool,
    /// `SO_ZEROCOPY`, `SO_MARK`, `TCP_NOTSENT_LOWAT`, `SO_TIMESTAMPING` set before the
    /// socket had a stack handle (applied by `listen` or the open; `exec/errqueue.rs`).
    sock_opts: Vec<SocketOption>,
    /// `SO_SNDBUF` (as Linux's `sk_sndbuf`) set before the socket had a stack handle.
    sndbuf: Option<u32>,
}

impl Fd {
    fn new(kind: FdKind) -> Fd {
        Fd {
            kind,
            nonblocking: false,
            nodelay: None,
            maxseg: None,
            keepalive: KeepaliveOpt::default(),
            rd_shut: false,
            inq: false,
            fastopen: Vec::new(),
            fastopen_connect: false,
            syn_retries: None,
            opening: false,
            sock_opts: Vec::new(),
            sndbuf: None,
        }
    }
}

/// A socket's keepalive setting: on or off, and the timing (Linux's defaults until set:
/// 7200 s idle, 75 s between probes, 9 probes).
#[derive(Debug, Default)]
struct KeepaliveOpt {
    on: bool,
    cfg: tcp::KeepaliveConfig,
}

/// A call on a blocking socket that could not complete yet.
#[derive(Debug)]
struct Pending {
    pos: Pos,
    call: SyscallLine,
    /// Expected return window (tolerance not included).
    window: Window,
    op: PendingOp,
}

#[derive(Debug, Clone)]
enum PendingOp {
    Accept {
        fd: i64,
    },
    Connect {
        fd: i64,
    },
    /// `peek`: `MSG_PEEK` (the bytes stay queued); `inq`: the `TCP_CM_INQ` value a
    /// `recvmsg` expects once the read is done.
    Read {
        fd: i64,
        len: usize,
        peek: bool,
        inq: Option<i64>,
    },
    /// `flags`: `MSG_MORE`, `MSG_EOR`, `MSG_ZEROCOPY` (the stack's [`stack::SendFlags`];
    /// `continues` is set for the pieces after the first). `connect_wait`: a blocking
    /// send on a connection still opening (Fast Open, or a write in SYN-SENT) returns only
    /// once the handshake completes, or with the open's error.
    Write {
        fd: i64,
        done: usize,
        len: usize,
        flags: stack::SendFlags,
        connect_wait: bool,
    },
    /// `poll` until one of `fds` is ready, or `deadline_ns` (then 0).
    Poll {
        fds: Vec<poll::PollFd>,
        deadline_ns: u64,
    },
}

/// What a system call returned: a value, or -1 with an errno name.
type CallResult = Result<i64, &'static str>;

struct Exec {
    stack: Stack,
    /// The TCP configuration the stack was built with.
    tcp_cfg: tcp::Config,
    /// `net.ipv4.tcp_notsent_lowat` (`StackConfig::tcp_notsent_lowat_bytes`).
    notsent_lowat_bytes: u32,
    /// The profile's option layout, kept across stack rebuilds.
    tcp_option_layout: wire::TcpOptionLayout,
    /// The profile's `linux_icmp_rules`, kept across stack rebuilds.
    linux_icmp_rules: bool,
    now_ns: u64,
    cursor: TimeCursor,
    ctx: MatchContext,
    tolerance_usecs: u64,
    /// Outbound TCP segments not matched yet: (time sent, the IP header's TOS byte or
    /// traffic class, the IP payload). Invariant: at most `OUT_QUEUE_SEGMENTS_MAX`.
    out: VecDeque<(u64, u8, Vec<u8>)>,
    fds: BTreeMap<i64, Fd>,
    /// `epoll_create` instances by fd.
    epolls: BTreeMap<i64, Epoll>,
    next_fd: i64,
    /// The stack's port of the connection under test, once known.
    local_port: Option<u16>,
    /// Segments passed over as another socket's ([`RunReport::other_socket_segments`]).
    other_socket_segments: usize,
    /// The script side's port: [`REMOTE_PORT`] towards a listener, [`SERVER_PORT`] when the
    /// stack connects.
    remote_port: u16,
    pending: Option<Pending>,
    skipped_lines: usize,
    assertions_checked: usize,
    assertions_passed: usize,
    assertions_failed: usize,
    assertions_skipped: usize,
    /// Variables the script's `%{ }%` blocks assigned (they persist from block to block).
    env: crate::pycode::Env,
    /// packetdrill's socket under test: the fd the latest `socket()` or `accept()` returned,
    /// whose `tcp_info` the `%{ }%` blocks read.
    under_test: Option<i64>,
    addrs: Addrs,
    /// `--mss=N`: an inbound segment longer than N reaches the stack as a GRO frame of
    /// N-byte segments (`RxMeta::gro_mss_bytes`), as packetdrill hands the kernel a GSO packet.
    inbound_gro_mss: Option<u16>,
    /// `--strict_segments`: each outbound line is one segment, never a TSO super-segment.
    strict_segments: bool,
    /// `--ip_version=ipv4-mapped-ipv6`: the script's sockets are `AF_INET6` sockets talking to
    /// IPv4-mapped addresses, so the wire is IPv4 and the stack's sockets are its IPv4 ones.
    ipv4_mapped_ipv6: bool,
    check_psh: bool,
    /// Outbound lines not reached yet; once none are left, segments are no longer checked.
    outbound_lines_left: usize,
    /// Fast Open sysctls (`exec/fastopen.rs`), kept across stack rebuilds.
    fastopen: fastopen::FastOpenSettings,
    /// A `listen` happened since the last inbound SYN that opened a passive connection: the
    /// next inbound SYN opens a new one (packetdrill gives each passive connection its own
    /// remote port and sequence spaces).
    listened_since_passive_syn: bool,
    /// Passive connections the script opened so far.
    passive_conns: u16,
    /// `nstat`'s history file (`exec/nstat.rs`).
    nstat: nstat::NstatHistory,
}

fn new_stack(
    tcp: tcp::Config,
    addrs: Addrs,
    layout: wire::TcpOptionLayout,
    notsent_lowat_bytes: u32,
    linux_icmp_rules: bool,
) -> Stack {
    let mut iface;
    match addrs {
        Addrs::V4 { local, gateway, .. } => {
            iface = InterfaceConfig::new(LOCAL_MAC, Ipv4Cidr::new(local, 24));
            iface.gateway_v4 = Some(gateway);
        }
        Addrs::V6 { local, gateway, .. } => {
            iface = InterfaceConfig::new(LOCAL_MAC, Ipv4Cidr::new(LOCAL_IP, 24));
            iface.ipv6.push(Ipv6Cidr::new(local, 64));
            iface.gateway_v6 = Some(gateway);
        }
    }
    let mut cfg = StackConfig::new(iface);
    cfg.tcp = tcp;
    cfg.tcp_option_layout = layout;
    cfg.tcp_notsent_lowat_bytes = notsent_lowat_bytes;
    cfg.tcp_icmp_errors_abort_opening = linux_icmp_rules;
    cfg.tcp_syn_mss_follows_path_mtu = linux_icmp_rules;
    Stack::new(cfg)
}

fn usecs(ns: u64) -> u64 {
    ns / 1000
}

fn ns(usecs: u64) -> u64 {
    usecs.saturating_mul(1000)
}

impl Exec {
    fn new(script: &Script, profile: &Profile) -> Exec {
        // An address option the executor cannot honour is reported by `run`.
        let addrs = Addrs::from_options(script).unwrap_or(Addrs::DEFAULT);
        let mut ctx = MatchContext::new(PEER_ISN);
        ctx.tolerance_usecs = script.tolerance_usecs();
        ctx.ts_tick_usecs = script.tcp_ts_tick_usecs();
        Exec {
            stack: new_stack(
                profile.tcp,
                addrs,
                profile.tcp_option_layout,
                u32::MAX,
                profile.linux_icmp_rules,
            ),
            linux_icmp_rules: profile.linux_icmp_rules,
            notsent_lowat_bytes: u32::MAX,
            tcp_option_layout: profile.tcp_option_layout,
            addrs,
            inbound_gro_mss: None,
            strict_segments: false,
            ipv4_mapped_ipv6: false,
            tcp_cfg: profile.tcp,
            now_ns: 0,
            cursor: TimeCursor::new(),
            ctx,
            tolerance_usecs: script.tolerance_usecs(),
            out: VecDeque::new(),
            fds: BTreeMap::new(),
            epolls: BTreeMap::new(),
            next_fd: 3,
            local_port: None,
            other_socket_segments: 0,
            remote_port: REMOTE_PORT,
            pending: None,
            skipped_lines: 0,
            assertions_checked: 0,
            assertions_passed: 0,
            assertions_failed: 0,
            assertions_skipped: 0,
            env: crate::pycode::Env::default(),
            under_test: None,
            check_psh: profile.check_psh,
            listened_since_passive_syn: false,
            passive_conns: 0,
            nstat: nstat::NstatHistory::default(),
            fastopen: fastopen::FastOpenSettings {
                cfg: profile.tcp_fastopen,
                keys: profile
                    .tcp_fastopen_key
                    .map(tcp::fastopen::FastOpenKeys::new),
            },
            outbound_lines_left: script
                .events
                .iter()
                .filter(
                    |e| matches!(&e.action, Action::Tcp(l) if l.direction == Direction::Outbound),
                )
                .count(),
        }
    }

    fn run(&mut self, script: &Script) -> Result<(), Stop> {
        self.fastopen_apply();
        for o in &script.options {
            match (o.name.as_str(), o.value.as_deref()) {
                ("tolerance_usecs" | "tcp_ts_tick_usecs", _) => {}
                ("local_ip" | "remote_ip", _) => {
                    Addrs::from_options(script).map_err(Stop::Skip)?;
                }
                ("mss", Some(v)) => match v.parse::<u16>() {
                    Ok(mss) if mss > 0 => self.inbound_gro_mss = Some(mss),
                    _ => return skip(format!("script option --mss={v}: not an MSS")),
                },
                ("strict_segments", None) => self.strict_segments = true,
                ("tcp_ts_ecr_scaled", None) => self.ctx.ts_ecr_scaled = true,
                ("ip_version", Some("ipv4")) => {}
                ("ip_version", Some("ipv4-mapped-ipv6")) => self.ipv4_mapped_ipv6 = true,
                ("ip_version", Some("ipv6")) => {}
                (name, value) => {
                    return skip(format!(
                        "script option --{name}{} not supported",
                        value.map(|v| format!("={v}")).unwrap_or_default()
                    ));
                }
            }
        }
        for event in &script.events {
            self.event(event)?;
        }
        // A blocking call still outstanding must return in its window all the same (packets
        // sent after the last event are not checked).
        if let Some(p) = &self.pending {
            let deadline = p.window.end_usecs.saturating_add(self.tolerance_usecs);
            self.run_until(ns(deadline.saturating_add(1)), false)?;
        }
        Ok(())
    }

    fn event(&mut self, event: &Event) -> Result<(), Stop> {
        let window = self.cursor.window(&event.time);
        match &event.action {
            Action::Shell(text) if text.contains("nstat") => {
                // A check of the stack's counters happens at its time.
                let at = self.act_at(event, window)?;
                if !shell::only_nstat(text) {
                    self.skipped_lines += 1;
                }
                self.apply_sysctls(event.pos, text)?;
                self.cursor.advance(&event.time, at);
                Ok(())
            }
            Action::Shell(text) => {
                self.skipped_lines += 1;
                self.apply_sysctls(event.pos, text)
            }
            Action::Code(code) => self.code(event, code, window),
            Action::Udp(_) => skip("UDP lines are not supported"),
            Action::Icmp(line) => {
                let at = self.act_at(event, window)?;
                self.icmp(event.pos, line)?;
                self.cursor.advance(&event.time, at);
                Ok(())
            }
            Action::Unsupported(text) => skip(format!("unsupported packet line `{text}`")),
            Action::Tcp(line) if line.unmodelled().is_some() => skip(format!(
                "`{line}`: {} not supported",
                line.unmodelled().unwrap_or_default()
            )),
            Action::Tcp(line) if line.direction == Direction::Outbound => {
                self.outbound_lines_left = self.outbound_lines_left.saturating_sub(1);
                let line = self.fastopen_resolve(line)?;
                self.outbound(event, &line, window)
            }
            Action::Tcp(line) => {
                let at = self.act_at(event, window)?;
                let line = self.fastopen_resolve(line)?;
                self.inbound(event.pos, &line)?;
                self.note_synchronized();
                self.cursor.advance(&event.time, at);
                Ok(())
            }
            Action::Syscall(call) => {
                let at = self.act_at(event, window)?;
                self.syscall(event, call, window)?;
                let done = if window.is_some_and(|w| w.blocking) {
                    at
                } else {
                    usecs(self.now_ns)
                };
                self.cursor.advance(&event.time, done);
                Ok(())
            }
        }
    }

    /// Runs the stack up to the time an inbound packet or call happens and returns that time
    /// (µs). What the stack sent meanwhile stays queued for the next outbound line, which
    /// checks each segment's send time against its own window: packetdrill reads the stack's
    /// packets only when it reaches an outbound line, so a segment sent a little before an
    /// inbound packet that precedes its line in the script passes there when it is within
    /// the tolerance, and an unwanted segment fails at the next outbound line it does not
    /// match.
    fn act_at(&mut self, event: &Event, window: Option<Window>) -> Result<u64, Stop> {
        let at = window.map_or(self.cursor.base_usecs, |w| w.start_usecs);
        let at = at.max(usecs(self.now_ns));
        self.run_until(ns(at), false)?;
        if self.outbound_lines_left == 0 {
            // packetdrill compares outbound traffic only against outbound lines, so what is
            // sent after the last of them goes unchecked there too.
            self.out.clear();
        }
        if self.out.len() > OUT_QUEUE_SEGMENTS_MAX {
            return fail(
                event.pos,
                format!(
                    "the stack sent {} segments that no outbound line matched yet",
                    self.out.len()
                ),
            );
        }
        if self.now_ns < ns(at) {
            self.now_ns = ns(at);
        }
        Ok(at)
    }

    /// Moves the clock to `limit_ns`, firing the stack's timers on the way, collecting its
    /// output and retrying an outstanding blocking call. With `stop_on_packet` stops as soon
    /// as an outbound TCP segment is waiting.
    fn run_until(&mut self, limit_ns: u64, stop_on_packet: bool) -> Result<(), Stop> {
        let mut steps = 0u32;
        loop {
            self.drain()?;
            self.retry_pending()?;
            if stop_on_packet && !self.out.is_empty() {
                return Ok(());
            }
            // A pending `poll` returns at its timeout.
            let poll_deadline = match &self.pending {
                Some(Pending {
                    op: PendingOp::Poll { deadline_ns, .. },
                    ..
                }) => Some(*deadline_ns),
                _ => None,
            };
            let wake = match (self.stack.poll_timeout(), poll_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match wake.filter(|&d| d <= limit_ns) {
                Some(d) => {
                    self.now_ns = self.now_ns.max(d);
                    self.stack.handle_timeout(self.now_ns);
                }
                None if self.now_ns >= limit_ns => break,
                None => self.now_ns = limit_ns,
            }
            steps += 1;
            if steps > STEPS_MAX {
                return fail(
                    Pos::default(),
                    format!(
                        "stack timers did not settle at {} s",
                        Secs(usecs(self.now_ns))
                    ),
                );
            }
        }
        self.check_overdue()
    }

    fn check_overdue(&self) -> Result<(), Stop> {
        if let Some(p) = &self.pending {
            let deadline = p.window.end_usecs.saturating_add(self.tolerance_usecs);
            if usecs(self.now_ns) > deadline {
                return fail(
                    p.pos,
                    format!(
                        "blocking {} did not return by {} s (expected at {} s, tolerance {} us)",
                        p.call.name,
                        Secs(usecs(self.now_ns)),
                        Secs(p.window.end_usecs),
                        self.tolerance_usecs
                    ),
                );
            }
        }
        Ok(())
    }

    fn syscall(
        &mut self,
        event: &Event,
        call: &SyscallLine,
        window: Option<Window>,
    ) -> Result<(), Stop> {
        let pos = event.pos;
        if let Some(p) = &self.pending {
            return fail(
                pos,
                format!(
                    "{} issued while the blocking {} of line {} has not returned",
                    call.name, p.call.name, p.pos.line
                ),
            );
        }
        let Some(kind) = call.kind() else {
            return skip(format!("system call {} is not supported", call.name));
        };
        let window = window.unwrap_or(Window {
            start_usecs: usecs(self.now_ns),
            end_usecs: u64::MAX / 2,
            blocking: false,
        });
        if call
            .args
            .iter()
            .any(|a| matches!(a, Expr::Symbol(s) if s == "NULL"))
        {
            return skip(format!(
                "{}: a NULL pointer argument cannot be expressed in the stack's API",
                call.name
            ));
        }
        let result: Option<CallResult> = match kind {
            SyscallKind::Socket => Some(self.sys_socket(call)?),
            SyscallKind::Bind => {
                let fd = self.fd_arg(pos, call)?;
                if fd.kind == FdKind::Fresh {
                    self.local_port = Some(SERVER_PORT);
                    Some(Ok(0))
                } else {
                    Some(Err("EINVAL"))
                }
            }
            SyscallKind::Listen => Some(self.sys_listen(pos, call)?),
            SyscallKind::Accept => self.sys_accept(pos, call, window)?,
            SyscallKind::Connect => self.sys_connect(pos, call, window)?,
            SyscallKind::Read | SyscallKind::Recv => self.sys_read(pos, call, window, kind)?,
            SyscallKind::Write | SyscallKind::Send => self.sys_write(pos, call, window, kind)?,
            SyscallKind::Sendto => self.sys_sendto(pos, call, window)?,
            SyscallKind::Sendmsg => self.sys_sendmsg(pos, call, window)?,
            SyscallKind::Recvmsg => self.sys_recvmsg(pos, call, window)?,
            SyscallKind::Close => Some(self.sys_close(pos, call)?),
            SyscallKind::Shutdown => Some(self.sys_shutdown(pos, call)?),
            SyscallKind::Fcntl => Some(self.sys_fcntl(pos, call)?),
            SyscallKind::Ioctl => Some(self.sys_ioctl(pos, call)?),
            SyscallKind::Setsockopt => Some(self.sys_setsockopt(pos, call)?),
            SyscallKind::Getsockopt => Some(self.sys_getsockopt(pos, call)?),
            SyscallKind::EpollCreate => Some(self.sys_epoll_create(call)),
            SyscallKind::EpollCtl => Some(self.sys_epoll_ctl(pos, call)?),
            SyscallKind::EpollWait => Some(self.sys_epoll_wait(pos, call)?),
            SyscallKind::Poll => self.sys_poll(pos, call, window)?,
            other => {
                return skip(format!("system call {} is not supported", other.name()));
            }
        };
        self.drain()?;
        match result {
            Some(r) => self.check_return(pos, call, window, r),
            None => Ok(()),
        }
    }

    fn check_return(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        got: CallResult,
    ) -> Result<(), Stop> {
        let now = usecs(self.now_ns);
        let tol = self.tolerance_usecs;
        let (lo, hi) = if window.blocking {
            (window.end_usecs, window.end_usecs)
        } else {
            (window.start_usecs, window.end_usecs)
        };
        if now.saturating_add(tol) < lo || now > hi.saturating_add(tol) {
            return fail(
                pos,
                format!(
                    "{} returned at {} s, expected at {} s (tolerance {tol} us)",
                    call.name,
                    Secs(now),
                    Secs(if window.blocking { hi } else { lo })
                ),
            );
        }
        let expected_ret = match &call.ret {
            Expr::Int(n) => *n,
            other => return skip(format!("return value `{other}` is not an integer")),
        };
        // As packetdrill (`end_syscall`): the errno is checked only when the script names
        // one; `= -1` alone accepts any.
        let ok = match got {
            Ok(v) => v == expected_ret && call.errno.is_none(),
            Err(errno) => expected_ret == -1 && call.errno.as_deref().is_none_or(|e| e == errno),
        };
        if ok {
            return Ok(());
        }
        let expected = match &call.errno {
            Some(e) => format!("{expected_ret} {e}"),
            None => expected_ret.to_string(),
        };
        let actual = match got {
            Ok(v) => v.to_string(),
            Err(e) => format!("-1 {e}"),
        };
        fail(
            pos,
            format!("{call}: expected return {expected}, got {actual}"),
        )
    }
}

/// An actual segment in script notation; numbers are script-relative where the context knows
/// the mapping.
pub fn describe_repr(r: &TcpRepr<'_>, ctx: &MatchContext) -> String {
    let len = r.payload.len() as u32;
    let start = ctx.seq.stack_script(r.seq_number).unwrap_or(r.seq_number.0);
    let mut s = format!(
        "{} {}:{}({})",
        ScriptFlags(r.flags),
        start,
        start.wrapping_add(len),
        len
    );
    if r.flags.contains(wire::tcp::TcpFlags::ACK) {
        s.push_str(&format!(
            " ack {}",
            ctx.seq.peer_script_in(r.ack_number, r.flags)
        ));
    }
    s.push_str(&format!(" win {}", r.window_len));
    let opts = repr_options_text(r, &ctx.seq);
    if opts != "<>" {
        s.push(' ');
        s.push_str(&opts);
    }
    s
}
