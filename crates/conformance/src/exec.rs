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
//! - shell lines and `%{ }%` blocks are skipped and counted ([`RunReport::skipped_lines`]);
//!   the `assert` statements of the `%{ }%` blocks are not evaluated, so a script that reaches
//!   one ends as [`Outcome::Skip`], never as a pass (counted in
//!   [`RunReport::assertions_skipped`]); a script that needs something the stack cannot express (an unsupported socket option,
//!   epoll, `sendmsg`, Fast Open) ends as [`Outcome::Skip`] with the reason.

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

/// A stack configuration a script run starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    pub tcp: tcp::Config,
    /// Check the PSH bit of outbound segments. Linux places PSH by its own policy
    /// (`tcp_mark_push`: at the end of each write and whenever half a window was sent without
    /// one), which a TSO super-segment hides; the stack sets PSH when a segment empties the
    /// send buffer. Both are valid (RFC 9293 §3.9.1.2 leaves PSH to the sender).
    pub check_psh: bool,
    /// Bytes Linux charges `sk_sndbuf` per MSS-sized segment beyond its payload (socket
    /// buffer metadata: `sk_wmem_queued` counts each skb's `truesize`, not its payload). The
    /// executor maps `SO_SNDBUF` (after Linux's doubling) to a payload capacity of
    /// `sndbuf · mss / (mss + this)`, and `getsockopt(SO_SNDBUF)` back. 0: the value is the
    /// payload capacity.
    pub sndbuf_overhead_per_segment_bytes: u32,
}

impl Profile {
    /// The stack's own defaults.
    pub fn stack_default() -> Profile {
        Profile {
            name: "default",
            tcp: tcp::Config::default(),
            check_psh: true,
            sndbuf_overhead_per_segment_bytes: 0,
        }
    }

    /// The Linux settings the Google corpus assumes (`common/defaults.sh` plus kernel
    /// defaults): timestamps and SACK on, CUBIC, initial window 10, MSS 1460, RTO 1 s initial /
    /// 200 ms min, delayed ACK 40 ms, `tcp_syn_retries=5`, send buffer 256 KiB
    /// (`tcp_wmem[1]`), and a receive buffer of 15 MiB (`tcp_rmem[2]`), from which Linux and
    /// this stack both derive window scale 8. Option order needs no setting: `wire` emits
    /// Linux's layout.
    pub fn linux_compat() -> Profile {
        Profile {
            name: "linux-compat",
            tcp: tcp::Config {
                mss_bytes: 1460,
                initial_window_segments: 10,
                rto_min_ns: 200 * tcp::config::NS_PER_MS,
                // Linux floors the variance term, not the RTO: RTO = SRTT + max(4·RTTVAR,
                // 200 ms) (`tcp_rtt_estimator`, `__tcp_set_rto`).
                rto_min_bounds_variance: true,
                rto_initial_ns: tcp::config::NS_PER_S,
                rto_max_ns: 120 * tcp::config::NS_PER_S,
                delayed_ack_ns: 40 * tcp::config::NS_PER_MS,
                // Linux `TCP_MAX_QUICKACKS`: the first segments of a connection are each
                // acknowledged at once (`tcp_incr_quickack`).
                quickack_segments: 16,
                send_buffer_bytes: 256 * 1024,
                recv_buffer_bytes: 15 * 1024 * 1024,
                window_scale: true,
                timestamps: true,
                sack: true,
                congestion_control: tcp::CongestionControl::Cubic,
                // Linux `tcp_slow_start`: every acknowledged segment counts; cwnd grows only
                // while it limits the sender (`tcp_is_cwnd_limited`).
                slow_start_increase_limit_segments: 0,
                cwnd_growth_requires_limited: true,
                // Linux grows cwnd by segments newly delivered; SACKed ones count once, when
                // SACKed (and then not at all: duplicate ACKs do not grow cwnd).
                ack_counts_previously_sacked_bytes: false,
                // `tcp_slow_start_after_idle=0` (common/defaults.sh).
                restart_after_idle: false,
                // Linux probes a zero window with a bare ACK below SND.UNA.
                zero_window_probe_carries_data: false,
                // Linux recovers with proportional rate reduction (`tcp_cwnd_reduction`).
                prr: true,
                // `tcp_recovery=1` (common/defaults.sh): RACK loss detection, RFC 8985 §6
                // (`tcp_rack_mark_lost`, the reordering timer `tcp_rack_reo_timeout`). On by
                // default too; set here so the profile does not depend on the default.
                rack: true,
                syn_retries_max: 5,
                // Linux `tcp_early_retrans` = 3: tail loss probes (RFC 8985 §7), PTO =
                // 2·SRTT + 2 ms with no floor (`tcp_schedule_loss_probe`: `TCP_TIMEOUT_MIN`
                // when more than one packet is out).
                tail_loss_probe: true,
                tlp_pto_extra_ns: 2 * tcp::config::NS_PER_MS as u32,
                tlp_pto_floor_ns: 0,
                // Linux drops a segment acknowledging unsent data without a reply (`tcp_ack`:
                // `TCP_ACK_UNSENT_DATA`); `ts_recent/invalid_ack` expects that silence. The
                // stack's default answers with an ACK, as RFC 9293 §3.10.7.4 says.
                ack_unsent_data_replies: false,
                ..tcp::Config::default()
            },
            check_psh: false,
            // Calibrated, not derived: `blocking/blocking-write` expects a 42000-byte
            // `sk_sndbuf` to hold 25–26 kB of 1000-byte segments (its write of 61000 returns on
            // the ACK of 36001, not of 35001), i.e. 620–680 bytes of metadata per segment; the
            // skb head and `skb_shared_info` Linux allocates per segment are of that order.
            sndbuf_overhead_per_segment_bytes: 640,
        }
    }

    /// A profile by its command-line name.
    pub fn by_name(name: &str) -> Option<Profile> {
        match name {
            "linux-compat" => Some(Profile::linux_compat()),
            "default" => Some(Profile::stack_default()),
            _ => None,
        }
    }
}

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
    /// `assert` statements of `%{ }%` blocks evaluated (the runner evaluates none yet).
    pub assertions_checked: usize,
    /// `assert` statements of `%{ }%` blocks reached but not evaluated. A script that would
    /// otherwise pass with any of these is an [`Outcome::Skip`].
    pub assertions_skipped: usize,
}

/// The `assert` statements in a `%{ }%` block's Python text: each `assert` that starts a line
/// or follows a `;`.
pub fn assertions_in(code: &str) -> usize {
    code.lines()
        .flat_map(|line| line.split(';'))
        .filter(|stmt| {
            let t = stmt.trim_start();
            t.strip_prefix("assert").is_some_and(|rest| {
                rest.is_empty()
                    || !rest.as_bytes()[0].is_ascii_alphanumeric() && rest.as_bytes()[0] != b'_'
            })
        })
        .count()
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
            assertions_skipped: 0,
        },
    }
}

/// Runs a parsed script against a fresh stack built from `profile`.
pub fn run_script(script: &Script, profile: &Profile) -> RunReport {
    let mut exec = Exec::new(script, profile);
    let outcome = match exec.run(script) {
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
        assertions_checked: 0,
        assertions_skipped: exec.assertions_skipped,
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
    /// Bytes taken from the stack to answer `SIOCINQ`, served to the next reads.
    rx: Vec<u8>,
    /// `shutdown(SHUT_RD)` was called: a read with nothing queued returns 0.
    rd_shut: bool,
}

impl Fd {
    fn new(kind: FdKind) -> Fd {
        Fd {
            kind,
            nonblocking: false,
            nodelay: None,
            maxseg: None,
            rx: Vec::new(),
            rd_shut: false,
        }
    }
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

#[derive(Debug, Clone, Copy)]
enum PendingOp {
    Accept {
        fd: i64,
    },
    Connect {
        fd: i64,
    },
    Read {
        fd: i64,
        len: usize,
    },
    /// `more`: `MSG_MORE` (the tail waits for a later send).
    Write {
        fd: i64,
        done: usize,
        len: usize,
        more: bool,
    },
}

/// What a system call returned: a value, or -1 with an errno name.
type CallResult = Result<i64, &'static str>;

struct Exec {
    stack: Stack,
    /// The TCP configuration the stack was built with.
    tcp_cfg: tcp::Config,
    now_ns: u64,
    cursor: TimeCursor,
    ctx: MatchContext,
    tolerance_usecs: u64,
    /// Outbound TCP segments not matched yet: (time sent, IPv4 payload). Invariant: at most
    /// `OUT_QUEUE_SEGMENTS_MAX`.
    out: VecDeque<(u64, Vec<u8>)>,
    fds: BTreeMap<i64, Fd>,
    /// `epoll_create` instances by fd.
    epolls: BTreeMap<i64, Epoll>,
    next_fd: i64,
    /// The stack's port of the connection under test, once known.
    local_port: Option<u16>,
    /// The script side's port: [`REMOTE_PORT`] towards a listener, [`SERVER_PORT`] when the
    /// stack connects.
    remote_port: u16,
    pending: Option<Pending>,
    skipped_lines: usize,
    assertions_skipped: usize,
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
    sndbuf_overhead_per_segment_bytes: u32,
    /// Outbound lines not reached yet; once none are left, segments are no longer checked.
    outbound_lines_left: usize,
}

fn new_stack(tcp: tcp::Config, addrs: Addrs) -> Stack {
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
            stack: new_stack(profile.tcp, addrs),
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
            remote_port: REMOTE_PORT,
            pending: None,
            skipped_lines: 0,
            assertions_skipped: 0,
            check_psh: profile.check_psh,
            sndbuf_overhead_per_segment_bytes: profile.sndbuf_overhead_per_segment_bytes,
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
            Action::Shell(text) => {
                self.skipped_lines += 1;
                self.apply_sysctls(text)
            }
            Action::Code(code) => {
                self.skipped_lines += 1;
                self.assertions_skipped += assertions_in(code);
                Ok(())
            }
            Action::Udp(_) => skip("UDP lines are not supported"),
            Action::Icmp(_) => skip("ICMP lines are not supported"),
            Action::Unsupported(text) => skip(format!("unsupported packet line `{text}`")),
            Action::Tcp(line) if line.direction == Direction::Outbound => {
                self.outbound_lines_left = self.outbound_lines_left.saturating_sub(1);
                self.outbound(event, line, window)
            }
            Action::Tcp(line) => {
                let at = self.act_at(event, window)?;
                self.inbound(event.pos, line)?;
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

    /// A shell line is not run, but the Linux settings it changes with `set_sysctls.py
    /// /proc/sys/net/ipv4/NAME=VALUE` or `sysctl net.ipv4.NAME=VALUE` are applied to the
    /// stack's configuration when they have a counterpart (timestamps, send buffer); the
    /// TSO and pacing knobs have no effect on a stack without TSO or pacing; any other
    /// setting skips the script.
    fn apply_sysctls(&mut self, text: &str) -> Result<(), Stop> {
        let mut cfg = self.tcp_cfg;
        let mut changed = false;
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut i = 0;
        while let Some(w) = words.get(i) {
            i += 1;
            let w = w.trim_matches('`');
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
            let mut value = value.trim_matches('"').to_string();
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
            match name {
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
                "tcp_min_tso_segs" | "tcp_tso_win_divisor" | "tcp_pacing_ss_ratio" => {}
                other => return skip(format!("sysctl {other}={value} has no stack setting")),
            }
        }
        if changed {
            if !self.fds.is_empty() {
                return skip("sysctl change after sockets were opened");
            }
            self.tcp_cfg = cfg;
            self.stack = new_stack(cfg, self.addrs);
        }
        Ok(())
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
            match self.stack.poll_timeout().filter(|&d| d <= limit_ns) {
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

    /// Collects the stack's output: answers ARP, queues TCP segments for matching.
    fn drain(&mut self) -> Result<(), Stop> {
        while let Some(ev) = self.stack.poll_event() {
            // An edge on a socket makes its epoll registrations ready (Linux's wake-up callback
            // puts the item on the ready list).
            for ep in self.epolls.values_mut() {
                for item in &mut ep.items {
                    let handle = self.fds.get(&item.fd).and_then(|f| match f.kind {
                        FdKind::Listener(h) | FdKind::Conn(h) => Some(h),
                        FdKind::Fresh => None,
                    });
                    if handle == Some(ev.handle) {
                        item.ready = true;
                    }
                }
            }
        }
        while let Some(frame) = self.stack.poll_transmit(self.now_ns) {
            let Ok(eth) = EthernetFrame::new_checked(&frame[..]) else {
                continue;
            };
            let Ok(repr) = EthernetRepr::parse(&eth) else {
                continue;
            };
            match repr.ethertype {
                EtherType::ARP => self.answer_arp(eth.payload()),
                EtherType::IPV4 => {
                    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                        continue;
                    };
                    if ip.protocol() == IpProtocol::TCP
                        && IpAddr::V4(ip.dst_addr()) == self.addrs.remote()
                    {
                        self.out.push_back((self.now_ns, ip.payload().to_vec()));
                    }
                }
                EtherType::IPV6 => {
                    let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
                        continue;
                    };
                    if ip.next_header() == IpProtocol::TCP
                        && IpAddr::V6(ip.dst_addr()) == self.addrs.remote()
                    {
                        self.out.push_back((self.now_ns, ip.payload().to_vec()));
                    } else if ip.next_header() == IpProtocol::ICMPV6 {
                        self.answer_neighbor_solicit(&ip);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Answers a neighbour solicitation for any target with the remote side's MAC (the IPv6
    /// counterpart of [`Exec::answer_arp`]).
    fn answer_neighbor_solicit(&mut self, ip: &Ipv6Packet<&[u8]>) {
        let Ok(icmp) = Icmpv6Packet::new_checked(ip.payload()) else {
            return;
        };
        let Ok(Icmpv6Repr::NeighborSolicit { target_addr, .. }) =
            Icmpv6Repr::parse(&icmp, ip.src_addr(), ip.dst_addr(), ChecksumCaps::ALL)
        else {
            return;
        };
        let na = Icmpv6Repr::NeighborAdvert {
            router: true,
            solicited: true,
            override_: true,
            target_addr,
            target_lladdr: Some(REMOTE_MAC),
        };
        let (src, dst) = (target_addr, ip.src_addr());
        let ip6 = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::ICMPV6,
            payload_len: na.buffer_len(),
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0,
            ext_headers: [None; wire::MAX_EXT_HEADERS],
        };
        let eth = EthernetRepr {
            src_addr: REMOTE_MAC,
            dst_addr: LOCAL_MAC,
            vlan: None,
            ethertype: EtherType::IPV6,
        };
        let mut buf = vec![0u8; eth.header_len() + ip6.buffer_len()];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        if eth.emit(&mut frame).is_err() {
            return;
        }
        let mut pkt = Ipv6Packet::new_unchecked(frame.payload_mut());
        if ip6.emit(&mut pkt).is_err() {
            return;
        }
        let hdr = ip6.header_len();
        let Some(body) = frame.payload_mut().get_mut(hdr..) else {
            return;
        };
        if na
            .emit(
                &mut Icmpv6Packet::new_unchecked(body),
                src,
                dst,
                ChecksumCaps::ALL,
            )
            .is_err()
        {
            return;
        }
        self.stack.receive(self.now_ns, &buf, &RxMeta::NONE);
    }

    fn answer_arp(&mut self, payload: &[u8]) {
        let Ok(pkt) = ArpPacket::new_checked(payload) else {
            return;
        };
        let Ok(req) = ArpRepr::parse(&pkt) else {
            return;
        };
        if req.operation != ArpOperation::REQUEST {
            return;
        }
        let reply = ArpRepr {
            operation: ArpOperation::REPLY,
            source_hardware_addr: REMOTE_MAC,
            source_protocol_addr: req.target_protocol_addr,
            target_hardware_addr: req.source_hardware_addr,
            target_protocol_addr: req.source_protocol_addr,
        };
        let eth = EthernetRepr {
            src_addr: REMOTE_MAC,
            dst_addr: LOCAL_MAC,
            vlan: None,
            ethertype: EtherType::ARP,
        };
        let mut buf = vec![0u8; eth.header_len() + reply.buffer_len()];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        if eth.emit(&mut frame).is_err()
            || reply
                .emit(&mut ArpPacket::new_unchecked(frame.payload_mut()))
                .is_err()
        {
            return;
        }
        self.stack.receive(self.now_ns, &buf, &RxMeta::NONE);
    }

    fn parse_segment<'a>(seg: &'a [u8], addrs: Addrs) -> Result<TcpRepr<'a>, wire::Error> {
        let pkt = TcpPacket::new_checked(seg)?;
        TcpRepr::parse(&pkt, &addrs.pair_out(), ChecksumCaps::ALL)
    }

    /// An actual segment in script notation (script-relative numbers when known).
    fn describe(&self, seg: &[u8]) -> String {
        match Self::parse_segment(seg, self.addrs) {
            Ok(r) => describe_repr(&r, &self.ctx),
            Err(e) => format!("unparseable segment ({e})"),
        }
    }

    fn outbound(
        &mut self,
        event: &Event,
        line: &TcpLine,
        window: Option<Window>,
    ) -> Result<(), Stop> {
        let tol = self.tolerance_usecs;
        let limit_usecs = match window {
            Some(w) => w.end_usecs.saturating_add(tol),
            None => usecs(self.now_ns).saturating_add(ANY_TIME_WAIT_USECS),
        };
        let mut acc = SuperSegment::new(line);
        if !self.check_psh {
            acc = acc.ignore_psh();
        }
        // Pieces of a super-segment are cut as TSO would: all but the last of one size (the
        // first piece's, i.e. the connection's MSS), the last no bigger.
        let mut piece_bytes: Option<usize> = None;
        loop {
            self.run_until(ns(limit_usecs).max(self.now_ns), true)?;
            let Some((sent_ns, seg)) = self.out.pop_front() else {
                let what = if acc.covered_bytes() > 0 {
                    format!(
                        "the rest of it after {} bytes was not sent",
                        acc.covered_bytes()
                    )
                } else {
                    "nothing was sent".to_string()
                };
                // Say what the stack sent instead, and when (up to 3 s later).
                self.pending = None;
                let _ = self.run_until(ns(limit_usecs.saturating_add(3_000_000)), true);
                let what = match self.out.front() {
                    Some((at, seg)) => format!(
                        "{what} (next: `{}` at {} s)",
                        self.describe(seg),
                        Secs(usecs(*at))
                    ),
                    None => what,
                };
                return fail(
                    event.pos,
                    format!(
                        "expected `{line}` by {} s, {what}",
                        Secs(limit_usecs.saturating_sub(tol))
                    ),
                );
            };
            let repr = match Self::parse_segment(&seg, self.addrs) {
                Ok(r) => r,
                Err(e) => {
                    return fail(
                        event.pos,
                        format!("expected `{line}`, got an unparseable segment ({e})"),
                    );
                }
            };
            if self.local_port.is_none() {
                self.local_port = Some(repr.src_port);
            }
            let sent_usecs = usecs(sent_ns);
            if let Err(e) = self.cursor.check(&event.time, sent_usecs, tol) {
                return fail(
                    event.pos,
                    format!(
                        "timing: `{line}`: {e}; got `{}`",
                        describe_repr(&repr, &self.ctx)
                    ),
                );
            }
            let got_bytes = repr.payload.len();
            if let Some(mss) = piece_bytes
                && got_bytes > mss
            {
                return fail(
                    event.pos,
                    format!(
                        "expected `{line}`: piece `{}` is longer than the {mss}-byte pieces before it",
                        describe_repr(&repr, &self.ctx)
                    ),
                );
            }
            let before = self.ctx.clone();
            let progress = acc.push(&mut self.ctx, &repr);
            if progress.is_ok() {
                // Option order and padding (what a `TcpRepr` does not keep): Linux's layout.
                if let TcpOptionsSpec::List(list) = &line.options
                    && let Ok(pkt) = TcpPacket::new_checked(&seg[..])
                    && let Err(e) = check_option_layout(list, pkt.options())
                {
                    return fail(
                        event.pos,
                        format!(
                            "expected `{line}`, got `{}`: option layout: {e}",
                            describe_repr(&repr, &self.ctx)
                        ),
                    );
                }
            }
            match progress {
                Ok(Progress::Complete) => {
                    self.cursor.advance(&event.time, sent_usecs);
                    return Ok(());
                }
                Ok(Progress::Partial { .. }) if self.strict_segments => {
                    return fail(
                        event.pos,
                        format!(
                            "expected `{line}` as one segment (--strict_segments), got `{}`",
                            describe_repr(&repr, &before)
                        ),
                    );
                }
                Ok(Progress::Partial { .. }) => match piece_bytes {
                    Some(mss) if got_bytes != mss => {
                        return fail(
                            event.pos,
                            format!(
                                "expected `{line}`: piece `{}` is not {mss} bytes like the \
                                 pieces before it",
                                describe_repr(&repr, &before)
                            ),
                        );
                    }
                    _ => piece_bytes = Some(got_bytes),
                },
                Err(e) => {
                    // Describe with the context as it was before the attempt.
                    let ctx = if before.seq.stack_base.is_some() {
                        &before
                    } else {
                        &self.ctx
                    };
                    let got = describe_repr(&repr, ctx);
                    return fail(event.pos, format!("expected `{line}`, got `{got}`: {e}"));
                }
            }
        }
    }

    fn inbound(&mut self, pos: Pos, line: &TcpLine) -> Result<(), Stop> {
        if let TcpOptionsSpec::List(list) = &line.options
            && list.iter().any(|o| matches!(o, TcpOption::FastOpen(_)))
        {
            return skip("TCP Fast Open (FO option) is not supported by the stack");
        }
        let Some(dst_port) = self.local_port else {
            return fail(
                pos,
                "inbound packet before the stack's port is known (no bind or connect)",
            );
        };
        if line.seq.len_bytes > INBOUND_PAYLOAD_BYTES_MAX {
            return fail(
                pos,
                format!(
                    "inbound payload of {} bytes does not fit one IPv4 packet",
                    line.seq.len_bytes
                ),
            );
        }
        let payload = vec![0u8; line.seq.len_bytes as usize];
        let repr = self
            .ctx
            .build_inbound(line, self.remote_port, dst_port, &payload)
            .map_err(|e| Stop::Fail(pos, format!("cannot build `{line}`: {e}")))?;
        if line.flags.contains(wire::tcp::TcpFlags::SYN) {
            self.ctx.seq.learn_peer_isn(line.seq.start);
        }
        let frame = build_frame(&repr, self.addrs)
            .map_err(|e| Stop::Fail(pos, format!("cannot emit `{line}`: {e}")))?;
        let mut meta = RxMeta::NONE;
        if let Some(mss) = self.inbound_gro_mss
            && line.seq.len_bytes > u32::from(mss)
        {
            meta.coalesced_segments =
                u16::try_from(line.seq.len_bytes.div_ceil(u32::from(mss))).unwrap_or(u16::MAX);
            meta.gro_mss_bytes = mss;
        }
        self.stack.receive(self.now_ns, &frame, &meta);
        self.drain()?;
        self.retry_pending()
    }

    // ----------------------------------------------------------------- system calls

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
            SyscallKind::Sendmsg => self.sys_sendmsg(pos, call, window)?,
            SyscallKind::Close => Some(self.sys_close(pos, call)?),
            SyscallKind::Shutdown => Some(self.sys_shutdown(pos, call)?),
            SyscallKind::Fcntl => Some(self.sys_fcntl(pos, call)?),
            SyscallKind::Ioctl => Some(self.sys_ioctl(pos, call)?),
            SyscallKind::Setsockopt => Some(self.sys_setsockopt(pos, call)?),
            SyscallKind::Getsockopt => Some(self.sys_getsockopt(pos, call)?),
            SyscallKind::EpollCreate => Some(self.sys_epoll_create(call)),
            SyscallKind::EpollCtl => Some(self.sys_epoll_ctl(pos, call)?),
            SyscallKind::EpollWait => Some(self.sys_epoll_wait(pos, call)?),
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
        let ok = match got {
            Ok(v) => v == expected_ret && call.errno.is_none(),
            Err(errno) => expected_ret == -1 && call.errno.as_deref() == Some(errno),
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

    fn fd_num(pos: Pos, call: &SyscallLine) -> Result<i64, Stop> {
        match call.args.first() {
            Some(Expr::Int(n)) => Ok(*n),
            _ => fail(pos, format!("{}: first argument is not an fd", call.name)),
        }
    }

    fn fd_arg(&mut self, pos: Pos, call: &SyscallLine) -> Result<&mut Fd, Stop> {
        let n = Self::fd_num(pos, call)?;
        match self.fds.get_mut(&n) {
            Some(fd) => Ok(fd),
            None => fail(pos, format!("{}: fd {n} is not open", call.name)),
        }
    }

    fn sys_socket(&mut self, call: &SyscallLine) -> Result<CallResult, Stop> {
        for a in &call.args {
            if let Expr::Symbol(s) = a
                && (s == "AF_INET6" || s == "PF_INET6")
                && !self.ipv4_mapped_ipv6
                && !matches!(self.addrs, Addrs::V6 { .. })
            {
                return skip(
                    "an AF_INET6 socket in an IPv4 script (--ip_version=ipv6 or ipv4-mapped-ipv6 runs it)",
                );
            }
            if let Expr::Symbol(s) = a
                && s == "SOCK_DGRAM"
            {
                return skip("UDP sockets are not supported by the executor");
            }
        }
        let fd = self.new_fd(call);
        self.fds.insert(fd, Fd::new(FdKind::Fresh));
        Ok(Ok(fd))
    }

    fn sys_listen(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let backlog = match call.args.get(1) {
            Some(Expr::Int(n)) => usize::try_from(*n).unwrap_or(0).max(1),
            _ => 1,
        };
        let fd = self.fd_arg(pos, call)?;
        if fd.kind != FdKind::Fresh {
            return Ok(Err("EINVAL"));
        }
        let (nodelay, maxseg) = (fd.nodelay, fd.maxseg);
        let local = SocketAddr::new(self.addrs.local(), SERVER_PORT);
        let h = match self.stack.tcp_listen(local, backlog) {
            Ok(h) => h,
            Err(e) => return Ok(Err(errno_of(e))),
        };
        if let Some(v) = nodelay {
            let _ = self.stack.set_option(h, SocketOption::NoDelay(v));
        }
        if let Some(v) = maxseg {
            let _ = self.stack.set_option(h, SocketOption::MaxSegment(v));
        }
        let fd = self.fd_arg(pos, call)?;
        fd.kind = FdKind::Listener(h);
        self.local_port = Some(SERVER_PORT);
        Ok(Ok(0))
    }

    /// Runs or parks a call that may block; `None` when it was parked.
    fn maybe_block(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        op: PendingOp,
        nonblocking: bool,
    ) -> Result<Option<CallResult>, Stop> {
        match self.attempt(call, op)? {
            Attempt::Done(r) => Ok(Some(r)),
            Attempt::Blocked(_) if nonblocking => Ok(Some(Err("EAGAIN"))),
            Attempt::Blocked(op) => {
                self.pending = Some(Pending {
                    pos,
                    call: call.clone(),
                    window,
                    op,
                });
                Ok(None)
            }
        }
    }

    fn retry_pending(&mut self) -> Result<(), Stop> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        match self.attempt(&p.call, p.op)? {
            Attempt::Done(r) => {
                // The stack may have sent something as part of the call (a window update).
                self.check_return(p.pos, &p.call, p.window, r)
            }
            Attempt::Blocked(op) => {
                self.pending = Some(Pending { op, ..p });
                Ok(())
            }
        }
    }

    /// packetdrill maps script fds to live ones: the fd a script expects `socket()` or
    /// `accept()` to return names the new socket from then on.
    fn new_fd(&mut self, call: &SyscallLine) -> i64 {
        let n = match call.ret {
            Expr::Int(n)
                if n >= 0 && !self.fds.contains_key(&n) && !self.epolls.contains_key(&n) =>
            {
                n
            }
            _ => self.next_fd,
        };
        self.next_fd = self.next_fd.max(n.saturating_add(1));
        n
    }

    fn attempt(&mut self, call: &SyscallLine, op: PendingOp) -> Result<Attempt, Stop> {
        let blocked = Ok(Attempt::Blocked(op));
        match op {
            PendingOp::Accept { fd } => {
                let Some(FdKind::Listener(l)) = self.fds.get(&fd).map(|f| f.kind) else {
                    return Ok(Attempt::Done(Err("EINVAL")));
                };
                match self.stack.tcp_accept(l) {
                    Ok((h, _peer)) => {
                        let n = self.new_fd(call);
                        self.fds.insert(n, Fd::new(FdKind::Conn(h)));
                        Ok(Attempt::Done(Ok(n)))
                    }
                    Err(SocketError::WouldBlock) => blocked,
                    Err(e) => Ok(Attempt::Done(Err(errno_of(e)))),
                }
            }
            PendingOp::Connect { fd } => {
                let Some(FdKind::Conn(h)) = self.fds.get(&fd).map(|f| f.kind) else {
                    return Ok(Attempt::Done(Err("EINVAL")));
                };
                match self.stack.tcp_state(h) {
                    Some(s) if s.is_synchronized() => Ok(Attempt::Done(Ok(0))),
                    Some(tcp::State::SynSent | tcp::State::SynReceived) => blocked,
                    _ => {
                        let e = self.stack.take_error(h).ok().flatten();
                        Ok(Attempt::Done(Err(e.map_or("ECONNREFUSED", errno_of))))
                    }
                }
            }
            PendingOp::Read { fd, len } => {
                let Some(f) = self.fds.get_mut(&fd) else {
                    return Ok(Attempt::Done(Err("EBADF")));
                };
                if !f.rx.is_empty() {
                    let n = f.rx.len().min(len);
                    f.rx.drain(..n);
                    return Ok(Attempt::Done(Ok(n as i64)));
                }
                let rd_shut = f.rd_shut;
                let FdKind::Conn(h) = f.kind else {
                    return Ok(Attempt::Done(Err("ENOTCONN")));
                };
                let mut buf = vec![0u8; len.min(READ_CHUNK_BYTES_MAX)];
                match self.stack.tcp_recv(h, &mut buf) {
                    Ok(n) => Ok(Attempt::Done(Ok(n as i64))),
                    Err(SocketError::Finished) => Ok(Attempt::Done(Ok(0))),
                    // Linux after SHUT_RD: queued data is still read, an empty queue reads
                    // as end of file.
                    Err(SocketError::WouldBlock) if rd_shut => Ok(Attempt::Done(Ok(0))),
                    Err(SocketError::WouldBlock) => blocked,
                    Err(e) => Ok(Attempt::Done(Err(errno_of(e)))),
                }
            }
            PendingOp::Write {
                fd,
                done,
                len,
                more,
            } => {
                let Some(FdKind::Conn(h)) = self.fds.get(&fd).map(|f| f.kind) else {
                    return Ok(Attempt::Done(Err("ENOTCONN")));
                };
                // Zeros, handed over in bounded chunks (a script may write gigabytes).
                let chunk = [0u8; 64 * 1024];
                let mut done = done;
                while done < len {
                    let n = (len - done).min(chunk.len());
                    let data = chunk.get(..n).unwrap_or(&[]);
                    let sent = if more {
                        self.stack.tcp_send_more(h, data)
                    } else {
                        self.stack.tcp_send(h, data)
                    };
                    match sent {
                        Ok(0) | Err(SocketError::WouldBlock) => break,
                        Ok(k) => done += k,
                        Err(_) if done > 0 => return Ok(Attempt::Done(Ok(done as i64))),
                        Err(e) => return Ok(Attempt::Done(Err(write_errno(e)))),
                    }
                }
                if done >= len {
                    Ok(Attempt::Done(Ok(len as i64)))
                } else {
                    Ok(Attempt::Blocked(PendingOp::Write {
                        fd,
                        done,
                        len,
                        more,
                    }))
                }
            }
        }
    }

    fn sys_accept(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        let fd = Self::fd_num(pos, call)?;
        let nonblocking = self.fd_arg(pos, call)?.nonblocking;
        self.maybe_block(pos, call, window, PendingOp::Accept { fd }, nonblocking)
    }

    fn sys_connect(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        let fd = Self::fd_num(pos, call)?;
        let f = self.fd_arg(pos, call)?;
        if f.kind != FdKind::Fresh {
            return Ok(Some(Err("EISCONN")));
        }
        let (nonblocking, nodelay, maxseg) = (f.nonblocking, f.nodelay, f.maxseg);
        let remote = SocketAddr::new(self.addrs.remote(), SERVER_PORT);
        let h = match self.stack.tcp_connect(self.now_ns, remote, 0) {
            Ok(h) => h,
            Err(e) => return Ok(Some(Err(errno_of(e)))),
        };
        if let Some(v) = nodelay {
            let _ = self.stack.set_option(h, SocketOption::NoDelay(v));
        }
        if let Some(v) = maxseg {
            // Before the first poll, so the SYN announces it.
            let _ = self.stack.set_option(h, SocketOption::MaxSegment(v));
        }
        self.fd_arg(pos, call)?.kind = FdKind::Conn(h);
        self.remote_port = SERVER_PORT;
        self.local_port = None;
        if nonblocking {
            return Ok(Some(Err("EINPROGRESS")));
        }
        self.maybe_block(pos, call, window, PendingOp::Connect { fd }, false)
    }

    fn len_arg(pos: Pos, call: &SyscallLine) -> Result<usize, Stop> {
        match call.args.get(2) {
            Some(Expr::Int(n)) => usize::try_from(*n)
                .map_err(|_| Stop::Fail(pos, format!("{}: negative length", call.name))),
            _ => fail(
                pos,
                format!("{}: third argument is not a length", call.name),
            ),
        }
    }

    fn flags_arg(call: &SyscallLine) -> Result<(), Stop> {
        match call.args.get(3) {
            None | Some(Expr::Int(0)) => Ok(()),
            Some(other) => skip(format!("{} flags {other} are not supported", call.name)),
        }
    }

    fn sys_read(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        kind: SyscallKind,
    ) -> Result<Option<CallResult>, Stop> {
        if kind == SyscallKind::Recv {
            Self::flags_arg(call)?;
        }
        let fd = Self::fd_num(pos, call)?;
        let len = Self::len_arg(pos, call)?;
        let nonblocking = self.fd_arg(pos, call)?.nonblocking;
        self.maybe_block(pos, call, window, PendingOp::Read { fd, len }, nonblocking)
    }

    fn sys_write(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        kind: SyscallKind,
    ) -> Result<Option<CallResult>, Stop> {
        // `send(..., MSG_MORE)` is the stack's `tcp_send_more`; other flags skip.
        let more = kind == SyscallKind::Send
            && matches!(call.args.get(3), Some(Expr::Symbol(s)) if s == "MSG_MORE");
        if kind == SyscallKind::Send && !more {
            Self::flags_arg(call)?;
        }
        let len = Self::len_arg(pos, call)?;
        self.write_op(pos, call, window, len, more)
    }

    /// `sendmsg(fd, {msg_name(...)=..., msg_iov(N)=[{..., len}, ...], msg_flags=0}, flags)`:
    /// a write of the iovecs' total length (the executor's buffers carry no content the
    /// script checks, so the gather is one write). `flags` may be 0 or `MSG_MORE`; a
    /// `msg_name` (meaningless on a connected TCP socket), `msg_control`, or any other field or
    /// flag skips the script.
    fn sys_sendmsg(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        let more = match call.args.get(2) {
            Some(Expr::Int(0)) => false,
            Some(Expr::Symbol(s)) if s == "MSG_MORE" => true,
            // See SO_ZEROCOPY: the same bytes leave either way.
            Some(Expr::Symbol(s)) if s == "MSG_ZEROCOPY" => false,
            Some(other) => return skip(format!("sendmsg flags {other} are not supported")),
            None => return fail(pos, "sendmsg: missing flags argument"),
        };
        let Some(Expr::Struct(fields)) = call.args.get(1) else {
            return fail(pos, "sendmsg: second argument is not a struct msghdr");
        };
        let mut len = None;
        for f in fields {
            match (f.name.as_deref(), &f.value) {
                (Some("msg_name"), Expr::Ellipsis) | (Some("msg_flags"), Expr::Int(0)) => {}
                (Some("msg_iov"), Expr::List(iovs)) => {
                    len = Some(Self::iov_total_len(pos, f.param.as_ref(), iovs)?);
                }
                (name, value) => {
                    return skip(format!(
                        "sendmsg: msghdr field {}={value} is not supported",
                        name.unwrap_or("(unnamed)")
                    ));
                }
            }
        }
        let Some(len) = len else {
            return fail(pos, "sendmsg: the msghdr has no msg_iov");
        };
        self.write_op(pos, call, window, len, more)
    }

    /// Total length of `[{..., len}, ...]`, whose element count must equal `msg_iov(N)`'s N.
    fn iov_total_len(pos: Pos, count: Option<&Expr>, iovs: &[Expr]) -> Result<usize, Stop> {
        if let Some(Expr::Int(n)) = count
            && usize::try_from(*n).ok() != Some(iovs.len())
        {
            return fail(
                pos,
                format!("sendmsg: msg_iov({n}) lists {} iovecs", iovs.len()),
            );
        }
        let mut total = 0usize;
        for iov in iovs {
            let Expr::Struct(parts) = iov else {
                return fail(pos, format!("sendmsg: iovec {iov} is not {{..., len}}"));
            };
            match parts.as_slice() {
                [base, l] if base.name.is_none() && l.name.is_none() => match &l.value {
                    Expr::Int(n) if *n >= 0 => {
                        total = total.saturating_add(usize::try_from(*n).unwrap_or(usize::MAX));
                    }
                    _ => return fail(pos, format!("sendmsg: iovec {iov} has no length")),
                },
                _ => return fail(pos, format!("sendmsg: iovec {iov} is not {{..., len}}")),
            }
        }
        Ok(total)
    }

    /// A write of `len` bytes (`more`: `MSG_MORE`), blocking unless the fd is non-blocking.
    fn write_op(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        len: usize,
        more: bool,
    ) -> Result<Option<CallResult>, Stop> {
        let fd = Self::fd_num(pos, call)?;
        let nonblocking = self.fd_arg(pos, call)?.nonblocking;
        let op = PendingOp::Write {
            fd,
            done: 0,
            len,
            more,
        };
        if nonblocking {
            return Ok(Some(match self.attempt(call, op)? {
                Attempt::Done(r) => r,
                Attempt::Blocked(PendingOp::Write { done, .. }) if done > 0 => Ok(done as i64),
                Attempt::Blocked(_) => Err("EAGAIN"),
            }));
        }
        self.maybe_block(pos, call, window, op, false)
    }

    fn sys_close(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let n = Self::fd_num(pos, call)?;
        if self.epolls.remove(&n).is_some() {
            return Ok(Ok(0));
        }
        let Some(fd) = self.fds.remove(&n) else {
            return Ok(Err("EBADF"));
        };
        for ep in self.epolls.values_mut() {
            ep.items.retain(|item| item.fd != n);
        }
        match fd.kind {
            FdKind::Fresh => {}
            FdKind::Listener(h) | FdKind::Conn(h) => {
                let _ = self.stack.close(self.now_ns, h);
            }
        }
        Ok(Ok(0))
    }

    fn sys_shutdown(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let how = match call.args.get(1) {
            Some(Expr::Symbol(s)) => s.clone(),
            other => return fail(pos, format!("shutdown: unknown how {other:?}")),
        };
        let (rd, wr) = match how.as_str() {
            "SHUT_RD" => (true, false),
            "SHUT_WR" => (false, true),
            "SHUT_RDWR" => (true, true),
            _ => return fail(pos, format!("shutdown: unknown how {how}")),
        };
        let fd = self.fd_arg(pos, call)?;
        let FdKind::Conn(h) = fd.kind else {
            return Ok(Err("ENOTCONN"));
        };
        if rd {
            fd.rd_shut = true;
        }
        if wr {
            match self.stack.tcp_shutdown(h) {
                Ok(()) => {}
                Err(SocketError::InvalidState) => {}
                Err(e) => return Ok(Err(errno_of(e))),
            }
        }
        Ok(Ok(0))
    }

    fn sys_fcntl(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let (Some(Expr::Symbol(cmd)), Some(flags)) = (call.args.get(1), call.args.get(2)) else {
            return skip(format!(
                "{call}: only fcntl(fd, F_SETFL, flags) is supported"
            ));
        };
        if cmd != "F_SETFL" {
            return skip(format!("fcntl {cmd} is not supported"));
        }
        let nonblocking = expr_has_symbol(flags, "O_NONBLOCK");
        self.fd_arg(pos, call)?.nonblocking = nonblocking;
        Ok(Ok(0))
    }

    /// `ioctl(fd, SIOCINQ, [n])`: the bytes readable now. The stack has no "bytes queued"
    /// query, so the executor reads them into the fd's own buffer (later reads take them from
    /// there); the advertised window opens as a real read would.
    fn sys_ioctl(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        match call.args.get(1) {
            Some(Expr::Symbol(s)) if s == "SIOCINQ" || s == "FIONREAD" => {}
            other => {
                let what = other.map(ToString::to_string).unwrap_or_default();
                return skip(format!("ioctl {what} is not supported"));
            }
        }
        let fd = self.fd_arg(pos, call)?;
        let FdKind::Conn(h) = fd.kind else {
            return Ok(Err("EINVAL"));
        };
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match self.stack.tcp_recv(h, &mut buf) {
                Ok(n) if n > 0 => {
                    let fd = self.fd_arg(pos, call)?;
                    fd.rx.extend_from_slice(buf.get(..n).unwrap_or(&[]));
                }
                _ => break,
            }
        }
        let have = self.fd_arg(pos, call)?.rx.len();
        if let Some(Expr::List(v)) = call.args.get(2)
            && let [Expr::Int(want)] = v.as_slice()
            && i64::try_from(have).ok() != Some(*want)
        {
            return fail(
                pos,
                format!("{call}: expected {want} bytes readable, got {have}"),
            );
        }
        Ok(Ok(0))
    }

    fn sys_setsockopt(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let name = match call.args.get(2) {
            Some(Expr::Symbol(s)) => s.as_str(),
            _ => return skip(format!("{call}: unknown option")),
        };
        let value = match call.args.get(3) {
            Some(Expr::List(v)) => match v.as_slice() {
                [Expr::Int(n)] => Some(*n),
                _ => None,
            },
            Some(Expr::Int(n)) => Some(*n),
            _ => None,
        };
        match (name, value) {
            // Address reuse has no meaning for a fresh stack per script.
            ("SO_REUSEADDR", _) => {
                self.fd_arg(pos, call)?;
                Ok(Ok(0))
            }
            // Zero-copy sending only changes who owns the pages and adds completion
            // notifications on the error queue, which the executor cannot read (`recvmsg`
            // skips a script): the stack copying is indistinguishable on the wire.
            ("SO_ZEROCOPY", _) => {
                self.fd_arg(pos, call)?;
                Ok(Ok(0))
            }
            ("TCP_NODELAY", Some(v)) => {
                let fd = self.fd_arg(pos, call)?;
                match fd.kind {
                    FdKind::Fresh => {
                        fd.nodelay = Some(v != 0);
                        Ok(Ok(0))
                    }
                    FdKind::Listener(h) | FdKind::Conn(h) => {
                        match self.stack.set_option(h, SocketOption::NoDelay(v != 0)) {
                            Ok(()) => Ok(Ok(0)),
                            Err(e) => Ok(Err(errno_of(e))),
                        }
                    }
                }
            }
            ("TCP_CORK", Some(v)) => {
                let fd = self.fd_arg(pos, call)?;
                match fd.kind {
                    FdKind::Conn(h) => match self.stack.set_option(h, SocketOption::Cork(v != 0)) {
                        Ok(()) => Ok(Ok(0)),
                        Err(e) => Ok(Err(errno_of(e))),
                    },
                    _ => skip("TCP_CORK before the connection exists is not modelled"),
                }
            }
            ("SO_SNDBUF", Some(v)) => {
                // Linux `sock_setsockopt`: min(val, net.core.wmem_max = 212992), doubled for
                // bookkeeping overhead.
                let sndbuf = u32::try_from(v.clamp(0, 212_992) * 2).unwrap_or(u32::MAX);
                let fd = self.fd_arg(pos, call)?;
                match fd.kind {
                    FdKind::Fresh => skip("SO_SNDBUF before listen or connect is not modelled"),
                    FdKind::Listener(h) | FdKind::Conn(h) => {
                        let mss = self.send_mss(h)?;
                        let bytes = sndbuf_payload_bytes(
                            sndbuf,
                            mss,
                            self.sndbuf_overhead_per_segment_bytes,
                        );
                        match self
                            .stack
                            .set_option(h, SocketOption::SendBufferBytes(bytes))
                        {
                            Ok(()) => Ok(Ok(0)),
                            Err(e) => Ok(Err(errno_of(e))),
                        }
                    }
                }
            }
            ("TCP_MAXSEG", Some(v)) => {
                let Ok(v) = u16::try_from(v) else {
                    return Ok(Err("EINVAL"));
                };
                let fd = self.fd_arg(pos, call)?;
                match fd.kind {
                    FdKind::Fresh => {
                        fd.maxseg = Some(v);
                        Ok(Ok(0))
                    }
                    FdKind::Listener(h) | FdKind::Conn(h) => {
                        match self.stack.set_option(h, SocketOption::MaxSegment(v)) {
                            Ok(()) => Ok(Ok(0)),
                            Err(e) => Ok(Err(errno_of(e))),
                        }
                    }
                }
            }
            _ => skip(format!(
                "setsockopt {}: the stack has no such socket option",
                sockopt_name(call)
            )),
        }
    }

    /// `epoll_create(size)`: a new, empty instance.
    fn sys_epoll_create(&mut self, call: &SyscallLine) -> CallResult {
        let fd = self.new_fd(call);
        self.epolls.insert(fd, Epoll::default());
        Ok(fd)
    }

    /// `epoll_ctl(epfd, EPOLL_CTL_ADD|EPOLL_CTL_DEL, fd, {events=..., fd=N})` on TCP sockets.
    fn sys_epoll_ctl(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let (Some(Expr::Int(epfd)), Some(Expr::Symbol(op)), Some(Expr::Int(fd))) =
            (call.args.first(), call.args.get(1), call.args.get(2))
        else {
            return fail(
                pos,
                format!("{call}: expected epoll_ctl(epfd, op, fd, event)"),
            );
        };
        let (epfd, fd) = (*epfd, *fd);
        let registered = self.fds.get(&fd).is_some_and(|f| f.kind != FdKind::Fresh);
        let Some(ep) = self.epolls.get_mut(&epfd) else {
            return Ok(Err("EBADF"));
        };
        if !registered {
            return skip("epoll_ctl on a socket without a stack handle is not modelled");
        }
        match op.as_str() {
            "EPOLL_CTL_ADD" => {
                let Some((mask, data)) = epoll_event_arg(call.args.get(3)) else {
                    return skip(format!("{call}: event not understood"));
                };
                if ep.items.iter().any(|i| i.fd == fd) {
                    return Ok(Err("EEXIST"));
                }
                ep.items.push(EpollItem {
                    fd,
                    interest: mask & !EPOLLET,
                    edge_triggered: mask & EPOLLET != 0,
                    data,
                    ready: true,
                });
                Ok(Ok(0))
            }
            "EPOLL_CTL_DEL" => {
                let before = ep.items.len();
                ep.items.retain(|i| i.fd != fd);
                Ok(if ep.items.len() < before {
                    Ok(0)
                } else {
                    Err("ENOENT")
                })
            }
            other => skip(format!("epoll_ctl {other} is not supported")),
        }
    }

    /// The epoll events a socket has now (Linux `tcp_poll`).
    fn poll_mask(&self, fd: i64) -> u32 {
        let Some(h) = self.fds.get(&fd).and_then(|f| match f.kind {
            FdKind::Listener(h) | FdKind::Conn(h) => Some(h),
            FdKind::Fresh => None,
        }) else {
            return 0;
        };
        let Ok(r) = self.stack.tcp_readiness(h) else {
            return EPOLLHUP;
        };
        let mut mask = 0;
        if r.contains(Readiness::READABLE) {
            mask |= EPOLLIN | EPOLLRDNORM;
        }
        if r.contains(Readiness::PEER_CLOSED) {
            mask |= EPOLLRDHUP;
        }
        if r.contains(Readiness::WRITABLE) {
            mask |= EPOLLOUT | EPOLLWRNORM;
        }
        if r.contains(Readiness::ERROR) {
            mask |= EPOLLERR;
        }
        mask
    }

    /// `epoll_wait(epfd, {events=..., fd=N}, maxevents, 0)`: reports the ready registrations
    /// (what they have now, within their interest plus `EPOLLERR|EPOLLHUP`), in registration
    /// order; the first reported event is checked against the script's. Only a zero timeout
    /// is modelled.
    fn sys_epoll_wait(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let Some(Expr::Int(epfd)) = call.args.first() else {
            return fail(
                pos,
                format!("{call}: expected epoll_wait(epfd, events, max, timeout)"),
            );
        };
        let (Some(Expr::Int(max)), Some(Expr::Int(timeout))) = (call.args.get(2), call.args.get(3))
        else {
            return fail(
                pos,
                format!("{call}: expected epoll_wait(epfd, events, max, timeout)"),
            );
        };
        if *timeout != 0 {
            return skip("epoll_wait with a timeout is not modelled");
        }
        let max = usize::try_from(*max).unwrap_or(0);
        let Some(items) = self.epolls.get(epfd).map(|ep| {
            ep.items
                .iter()
                .map(|i| (i.fd, i.ready, i.interest, i.edge_triggered))
                .collect::<Vec<_>>()
        }) else {
            return Ok(Err("EBADF"));
        };
        if max == 0 {
            return Ok(Err("EINVAL"));
        }
        let mut reported: Vec<(usize, u32)> = Vec::new();
        let mut clear: Vec<usize> = Vec::new();
        for (idx, (fd, ready, interest, edge)) in items.into_iter().enumerate() {
            if !ready || reported.len() == max {
                continue;
            }
            let mask = self.poll_mask(fd) & (interest | EPOLLERR | EPOLLHUP);
            if mask == 0 || edge {
                clear.push(idx);
            }
            if mask != 0 {
                reported.push((idx, mask));
            }
        }
        let Some(ep) = self.epolls.get_mut(epfd) else {
            return Ok(Err("EBADF"));
        };
        for idx in clear {
            if let Some(item) = ep.items.get_mut(idx) {
                item.ready = false;
            }
        }
        if let (Some((idx, mask)), Some((want_mask, want_data))) =
            (reported.first(), epoll_event_arg(call.args.get(1)))
            && let Some(item) = ep.items.get(*idx)
            && want_mask != 0
            && (*mask != want_mask || item.data != want_data)
        {
            return fail(
                pos,
                format!(
                    "{call}: expected {{events={}, {}={}}}, got {{events={}, {}={}}}",
                    epoll_mask_text(want_mask),
                    want_data.0,
                    want_data.1,
                    epoll_mask_text(*mask),
                    item.data.0,
                    item.data.1
                ),
            );
        }
        Ok(Ok(i64::try_from(reported.len()).unwrap_or(i64::MAX)))
    }

    /// The MSS the send buffer accounting counts segments of: the connection's, or the one a
    /// listener announces.
    fn send_mss(&self, h: SocketHandle) -> Result<u16, Stop> {
        self.stack
            .tcp_max_segment(h)
            .or_else(|e| skip(format!("SO_SNDBUF: no MSS for the socket ({e:?})")))
    }

    /// `getsockopt(SO_SNDBUF)`: the stack's send buffer capacity, in Linux's `sk_sndbuf` terms
    /// (see [`Profile::sndbuf_overhead_per_segment_bytes`]), checked against the script's.
    fn sys_getsockopt_sndbuf(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let fd = self.fd_arg(pos, call)?;
        let (FdKind::Listener(h) | FdKind::Conn(h)) = fd.kind else {
            return skip("getsockopt SO_SNDBUF before listen or connect is not modelled");
        };
        let payload = match self.stack.tcp_send_buffer_bytes(h) {
            Ok(v) => v,
            Err(e) => return Ok(Err(errno_of(e))),
        };
        let mss = self.send_mss(h)?;
        let have = sndbuf_linux_bytes(payload, mss, self.sndbuf_overhead_per_segment_bytes);
        if let Some(want) = Self::int_in_list(call.args.get(3))
            && want != i64::from(have)
        {
            return fail(
                pos,
                format!("{call}: expected SO_SNDBUF {want}, got {have}"),
            );
        }
        Ok(Ok(0))
    }

    /// `[n]` → `n`.
    fn int_in_list(e: Option<&Expr>) -> Option<i64> {
        match e {
            Some(Expr::List(v)) => match v.as_slice() {
                [Expr::Int(n)] => Some(*n),
                _ => None,
            },
            _ => None,
        }
    }

    /// `getsockopt`: `TCP_MAXSEG` and `SO_SNDBUF`, whose values are checked against the
    /// script's.
    fn sys_getsockopt(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let what = sockopt_name(call);
        if matches!(call.args.get(2), Some(Expr::Symbol(s)) if s == "SO_SNDBUF") {
            return self.sys_getsockopt_sndbuf(pos, call);
        }
        if !matches!(call.args.get(2), Some(Expr::Symbol(s)) if s == "TCP_MAXSEG") {
            return skip(format!(
                "getsockopt {what}: the stack exposes no such value"
            ));
        }
        let want = match call.args.get(3) {
            Some(Expr::List(v)) => match v.as_slice() {
                [Expr::Int(n)] => Some(*n),
                _ => None,
            },
            _ => None,
        };
        let fd = self.fd_arg(pos, call)?;
        let have = match fd.kind {
            // Linux: `user_mss` when set, else `TCP_MSS_DEFAULT` (536) before a connection.
            FdKind::Fresh => fd.maxseg.unwrap_or(536),
            FdKind::Listener(h) | FdKind::Conn(h) => match self.stack.tcp_max_segment(h) {
                Ok(v) => v,
                Err(e) => return Ok(Err(errno_of(e))),
            },
        };
        if let Some(want) = want
            && want != i64::from(have)
        {
            return fail(
                pos,
                format!("{call}: expected TCP_MAXSEG {want}, got {have}"),
            );
        }
        Ok(Ok(0))
    }
}

/// Payload bytes a Linux `sk_sndbuf` of `sndbuf` bytes holds in `mss`-byte segments that each
/// cost `overhead` more (rounded to the nearest byte).
fn sndbuf_payload_bytes(sndbuf: u32, mss: u16, overhead: u32) -> u32 {
    let mss = u64::from(mss.max(1));
    let v =
        (u64::from(sndbuf) * mss + (mss + u64::from(overhead)) / 2) / (mss + u64::from(overhead));
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The inverse of [`sndbuf_payload_bytes`]: the `sk_sndbuf` a payload capacity stands for.
fn sndbuf_linux_bytes(payload: u32, mss: u16, overhead: u32) -> u32 {
    let mss = u64::from(mss.max(1));
    let v = (u64::from(payload) * (mss + u64::from(overhead)) + mss / 2) / mss;
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// An epoll instance: its registrations in `epoll_ctl` order.
#[derive(Debug, Default)]
struct Epoll {
    items: Vec<EpollItem>,
}

/// One `epoll_ctl(EPOLL_CTL_ADD)` registration.
#[derive(Debug)]
struct EpollItem {
    fd: i64,
    /// Requested events, without `EPOLLET`.
    interest: u32,
    edge_triggered: bool,
    /// The user data member's name (`fd`, `ptr`, `u32`, `u64`) and value, echoed by
    /// `epoll_wait`.
    data: (String, i64),
    /// On the ready list: set by registration and by each stack event of the socket,
    /// cleared when `epoll_wait` reports it edge-triggered or finds nothing to report.
    ready: bool,
}

const EPOLLIN: u32 = 0x001;
const EPOLLPRI: u32 = 0x002;
const EPOLLOUT: u32 = 0x004;
const EPOLLERR: u32 = 0x008;
const EPOLLHUP: u32 = 0x010;
const EPOLLRDNORM: u32 = 0x040;
const EPOLLWRNORM: u32 = 0x100;
const EPOLLRDHUP: u32 = 0x2000;
const EPOLLET: u32 = 1 << 31;

/// The value of an epoll event mask expression (`EPOLLIN|EPOLLET`, `0`).
fn epoll_mask(e: &Expr) -> Option<u32> {
    match e {
        Expr::Int(n) => u32::try_from(*n).ok(),
        Expr::Symbol(s) => Some(match s.as_str() {
            "EPOLLIN" => EPOLLIN,
            "EPOLLPRI" => EPOLLPRI,
            "EPOLLOUT" => EPOLLOUT,
            "EPOLLERR" => EPOLLERR,
            "EPOLLHUP" => EPOLLHUP,
            "EPOLLRDNORM" => EPOLLRDNORM,
            "EPOLLWRNORM" => EPOLLWRNORM,
            "EPOLLRDHUP" => EPOLLRDHUP,
            "EPOLLET" => EPOLLET,
            _ => return None,
        }),
        Expr::Or(parts) => parts
            .iter()
            .try_fold(0u32, |acc, p| epoll_mask(p).map(|m| acc | m)),
        _ => None,
    }
}

/// An epoll mask as a script writes it.
fn epoll_mask_text(mask: u32) -> String {
    const NAMES: [(u32, &str); 8] = [
        (EPOLLIN, "EPOLLIN"),
        (EPOLLPRI, "EPOLLPRI"),
        (EPOLLOUT, "EPOLLOUT"),
        (EPOLLERR, "EPOLLERR"),
        (EPOLLHUP, "EPOLLHUP"),
        (EPOLLRDNORM, "EPOLLRDNORM"),
        (EPOLLWRNORM, "EPOLLWRNORM"),
        (EPOLLRDHUP, "EPOLLRDHUP"),
    ];
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "0".to_string()
    } else {
        names.join("|")
    }
}

/// `{events=..., fd=N}`: the mask and the data member.
fn epoll_event_arg(e: Option<&Expr>) -> Option<(u32, (String, i64))> {
    let Some(Expr::Struct(fields)) = e else {
        return None;
    };
    let mut events = None;
    let mut data = None;
    for f in fields {
        match (f.name.as_deref(), &f.value) {
            (Some("events"), v) => events = epoll_mask(v),
            (Some(name @ ("fd" | "ptr" | "u32" | "u64")), Expr::Int(n)) => {
                data = Some((name.to_string(), *n));
            }
            _ => return None,
        }
    }
    Some((events?, data?))
}

enum Attempt {
    Done(CallResult),
    Blocked(PendingOp),
}

fn sockopt_name(call: &SyscallLine) -> String {
    let level = call
        .args
        .get(1)
        .map(ToString::to_string)
        .unwrap_or_default();
    let name = call
        .args
        .get(2)
        .map(ToString::to_string)
        .unwrap_or_default();
    format!("{level} {name}")
}

fn expr_has_symbol(e: &Expr, sym: &str) -> bool {
    match e {
        Expr::Symbol(s) => s == sym,
        Expr::Or(v) => v.iter().any(|x| expr_has_symbol(x, sym)),
        _ => false,
    }
}

fn errno_of(e: SocketError) -> &'static str {
    match e {
        SocketError::WouldBlock => "EAGAIN",
        SocketError::AddrInUse => "EADDRINUSE",
        SocketError::AddrNotAvailable => "EADDRNOTAVAIL",
        SocketError::NoFreePort => "EAGAIN",
        SocketError::TooManySockets => "EMFILE",
        SocketError::MessageTooBig => "EMSGSIZE",
        SocketError::NoRoute | SocketError::Unreachable => "EHOSTUNREACH",
        SocketError::Reset => "ECONNRESET",
        SocketError::TimedOut => "ETIMEDOUT",
        SocketError::Closed | SocketError::Finished => "ENOTCONN",
        SocketError::InvalidState | SocketError::WrongSocketType => "EINVAL",
        SocketError::InvalidHandle => "EBADF",
    }
}

/// Writing after our FIN or after the connection closed is `EPIPE` on Linux.
fn write_errno(e: SocketError) -> &'static str {
    match e {
        SocketError::Closed | SocketError::InvalidState | SocketError::Finished => "EPIPE",
        other => errno_of(other),
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

/// An Ethernet/IP frame from the remote side carrying `repr`.
fn build_frame(repr: &TcpRepr<'_>, addrs: Addrs) -> Result<Vec<u8>, wire::Error> {
    let tcp_len = repr.buffer_len();
    let (ethertype, ip_header) = match addrs {
        Addrs::V4 { local, remote, .. } => {
            let ip = Ipv4Repr {
                src_addr: remote,
                dst_addr: local,
                protocol: IpProtocol::TCP,
                payload_len: tcp_len,
                hop_limit: 64,
                dscp: 0,
                ecn: 0,
                ident: 0,
                dont_frag: true,
                more_frags: false,
                frag_offset_bytes: 0,
            };
            let mut whole = vec![0u8; ip.buffer_len()];
            ip.emit(
                &mut Ipv4Packet::new_unchecked(&mut whole[..]),
                ChecksumCaps::ALL,
            )?;
            whole.truncate(ip.buffer_len() - tcp_len);
            (EtherType::IPV4, whole)
        }
        Addrs::V6 { local, remote, .. } => {
            let ip = Ipv6Repr {
                src_addr: remote,
                dst_addr: local,
                next_header: IpProtocol::TCP,
                payload_len: tcp_len,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
                ext_headers: [None; wire::MAX_EXT_HEADERS],
            };
            let mut whole = vec![0u8; ip.buffer_len()];
            ip.emit(&mut Ipv6Packet::new_unchecked(&mut whole[..]))?;
            whole.truncate(ip.header_len());
            (EtherType::IPV6, whole)
        }
    };
    let eth = EthernetRepr {
        src_addr: REMOTE_MAC,
        dst_addr: LOCAL_MAC,
        vlan: None,
        ethertype,
    };
    let mut buf = vec![0u8; eth.header_len() + ip_header.len() + tcp_len];
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.emit(&mut frame)?;
    let payload = frame.payload_mut();
    let (head, tcp) = payload.split_at_mut(ip_header.len());
    head.copy_from_slice(&ip_header);
    repr.emit(
        &mut TcpPacket::new_unchecked(tcp),
        &addrs.pair_in(),
        ChecksumCaps::ALL,
    )?;
    Ok(buf)
}

/// Every `.pkt` file under `root`, sorted (directories walked in name order).
pub fn script_files(root: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
        let mut entries = Vec::new();
        for e in std::fs::read_dir(dir)? {
            entries.push(e?.path());
        }
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "pkt") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, &mut out)?;
    Ok(out)
}

/// Reads, parses and runs one script file; an unreadable file is a failure at 0:0.
pub fn run_file(path: &std::path::Path, profile: &Profile) -> RunReport {
    match std::fs::read_to_string(path) {
        Ok(text) => run_text(&text, profile),
        Err(e) => RunReport {
            outcome: Outcome::Fail {
                pos: Pos::default(),
                message: format!("cannot read: {e}"),
            },
            skipped_lines: 0,
            assertions_checked: 0,
            assertions_skipped: 0,
        },
    }
}

/// The script paths of an expected-passing list (`crates/conformance/PASSING`): one path per
/// line, relative to the corpus root; blank lines and lines starting with `#` are ignored,
/// surrounding whitespace is trimmed.
pub fn expected_passing(list: &str) -> Vec<&str> {
    list.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Pass/fail/skip counts over a set of scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// `%{ }%` assertions evaluated, over the scripts added with [`Tally::add_report`].
    pub assertions_checked: usize,
    /// `%{ }%` assertions reached and not evaluated, likewise.
    pub assertions_skipped: usize,
}

impl Tally {
    /// Counts a script's outcome and its assertions.
    pub fn add_report(&mut self, r: &RunReport) {
        self.add(&r.outcome);
        self.assertions_checked += r.assertions_checked;
        self.assertions_skipped += r.assertions_skipped;
    }

    pub fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail { .. } => self.failed += 1,
            Outcome::Skip { .. } => self.skipped += 1,
        }
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped; assertions: {} checked, {} skipped",
            self.passed,
            self.failed,
            self.skipped,
            self.assertions_checked,
            self.assertions_skipped
        )
    }
}
