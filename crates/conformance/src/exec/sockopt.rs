//! The executor's option and query calls: `fcntl`, `ioctl`, `setsockopt`, `getsockopt`,
//! each through the stack's own API (a query the stack cannot answer skips the script).

use super::*;

/// Linux `SOCK_MIN_SNDBUF`: the least `sk_sndbuf` `SO_SNDBUF` sets.
const SOCK_MIN_SNDBUF_BYTES: i64 = 2 * (2048 + 256);
/// Linux `O_RDWR`.
const O_RDWR: i64 = 2;
/// Linux `O_NONBLOCK`.
const O_NONBLOCK: i64 = 0o4000;
use super::syscalls::{errno_of, expr_has_symbol, sockopt_name};

impl Exec {
    /// `fcntl(fd, F_GETFL)`: `O_RDWR`, with `O_NONBLOCK` when set; `fcntl(fd, F_SETFL,
    /// flags)`: only `O_NONBLOCK` has an effect on a TCP socket.
    pub(super) fn sys_fcntl(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        match (call.args.get(1), call.args.get(2)) {
            (Some(Expr::Symbol(cmd)), None) if cmd == "F_GETFL" => {
                let fd = self.fd_arg(pos, call)?;
                Ok(Ok(O_RDWR | if fd.nonblocking { O_NONBLOCK } else { 0 }))
            }
            (Some(Expr::Symbol(cmd)), Some(flags)) if cmd == "F_SETFL" => {
                let nonblocking = expr_has_symbol(flags, "O_NONBLOCK")
                    || matches!(flags, Expr::Int(n) if n & O_NONBLOCK != 0);
                self.fd_arg(pos, call)?.nonblocking = nonblocking;
                Ok(Ok(0))
            }
            _ => skip(format!(
                "{call}: only fcntl F_GETFL and F_SETFL are supported"
            )),
        }
    }

    /// `ioctl(fd, SIOCINQ | FIONREAD, [n])`: bytes ready to read; `SIOCOUTQ`: bytes not yet
    /// acknowledged; `SIOCOUTQNSD`: bytes not yet sent. Each is a query of the stack that
    /// changes nothing (no read, so no window update), checked against the script's `n`.
    pub(super) fn sys_ioctl(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let what = match call.args.get(1) {
            Some(Expr::Symbol(s)) => s.as_str(),
            other => {
                let what = other.map(ToString::to_string).unwrap_or_default();
                return skip(format!("ioctl {what} is not supported"));
            }
        };
        let fd = self.fd_arg(pos, call)?;
        let FdKind::Conn(h) = fd.kind else {
            return Ok(Err("EINVAL"));
        };
        let have = match what {
            "SIOCINQ" | "FIONREAD" => self.stack.tcp_recv_queue_bytes(h),
            "SIOCOUTQ" | "TIOCOUTQ" => self.stack.tcp_send_queue_bytes(h),
            "SIOCOUTQNSD" => self.stack.tcp_unsent_bytes(h),
            other => return skip(format!("ioctl {other} is not supported")),
        };
        let have = match have {
            Ok(n) => n,
            Err(e) => return Ok(Err(errno_of(e))),
        };
        if let Some(want) = Self::int_in_list(call.args.get(2))
            && i64::try_from(have).ok() != Some(want)
        {
            return fail(pos, format!("{call}: expected {want} bytes, got {have}"));
        }
        Ok(Ok(0))
    }

    /// `TCP_USER_TIMEOUT` (ms, 0 = off), `SO_KEEPALIVE`, `TCP_KEEPIDLE` / `TCP_KEEPINTVL`
    /// (s) and `TCP_KEEPCNT` on a connection, through the stack's setters. `Ok(None)` when
    /// `name` is none of these.
    fn set_timer_option(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        name: &str,
        value: i64,
    ) -> Result<Option<CallResult>, Stop> {
        if !matches!(
            name,
            "TCP_USER_TIMEOUT" | "SO_KEEPALIVE" | "TCP_KEEPIDLE" | "TCP_KEEPINTVL" | "TCP_KEEPCNT"
        ) {
            return Ok(None);
        }
        let fd = self.fd_arg(pos, call)?;
        let h = match fd.kind {
            FdKind::Conn(h) => Some(h),
            // Keepalive set before `connect` is applied by it (`Exec::opened`).
            FdKind::Fresh if name != "TCP_USER_TIMEOUT" => None,
            _ => {
                return skip(format!(
                    "setsockopt {name} before the connection exists is not modelled"
                ));
            }
        };
        if value < 0 || (name == "TCP_KEEPCNT" && value > 127) {
            return Ok(Some(Err("EINVAL")));
        }
        let secs = u64::try_from(value)
            .unwrap_or(0)
            .saturating_mul(1_000_000_000);
        let ka = &mut fd.keepalive;
        match name {
            "TCP_USER_TIMEOUT" => {
                let Some(h) = h else {
                    return skip("setsockopt TCP_USER_TIMEOUT before the connection exists");
                };
                let ns = u64::try_from(value).unwrap_or(0).saturating_mul(1_000_000);
                let r = self
                    .stack
                    .set_option(h, SocketOption::UserTimeoutNs((ns > 0).then_some(ns)));
                return Ok(Some(r.map(|()| 0).map_err(errno_of)));
            }
            "SO_KEEPALIVE" => ka.on = value != 0,
            "TCP_KEEPIDLE" if value > 0 => ka.cfg.idle_ns = secs,
            "TCP_KEEPINTVL" if value > 0 => ka.cfg.interval_ns = secs,
            "TCP_KEEPCNT" if value > 0 => ka.cfg.probes_max = value as u8,
            _ => return Ok(Some(Err("EINVAL"))),
        }
        let cfg = ka.on.then_some(ka.cfg);
        let Some(h) = h else {
            return Ok(Some(Ok(0)));
        };
        let r = self.stack.tcp_set_keepalive(self.now_ns, h, cfg);
        Ok(Some(r.map(|()| 0).map_err(errno_of)))
    }

    pub(super) fn sys_setsockopt(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
    ) -> Result<CallResult, Stop> {
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
        if let Some(v) = value
            && let Some(r) = self.set_timer_option(pos, call, name, v)?
        {
            return Ok(r);
        }
        if let Some(r) = self.fastopen_setsockopt(pos, call, name, value)? {
            return Ok(r);
        }
        if let Some(r) = self.errqueue_setsockopt(pos, call, name)? {
            return Ok(r);
        }
        match (name, value) {
            // Address reuse has no meaning for a fresh stack per script.
            ("SO_REUSEADDR", _) => {
                self.fd_arg(pos, call)?;
                Ok(Ok(0))
            }
            // `TCP_INQ` (Linux 4.18): `recvmsg` then carries the `TCP_CM_INQ` hint, which
            // the stack computes (`Stack::tcp_inq_hint`); the switch is the socket's.
            ("TCP_INQ", Some(v)) => {
                self.fd_arg(pos, call)?.inq = v != 0;
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
                // bookkeeping overhead, at least `SOCK_MIN_SNDBUF` (2 × (2048 + the 256-byte
                // `struct sk_buff`)).
                let sndbuf = u32::try_from((v.clamp(0, 212_992) * 2).max(SOCK_MIN_SNDBUF_BYTES))
                    .unwrap_or(u32::MAX);
                let fd = self.fd_arg(pos, call)?;
                match fd.kind {
                    // Applied by `listen` or the open, once the socket has an MSS.
                    FdKind::Fresh => {
                        fd.sndbuf = Some(sndbuf);
                        Ok(Ok(0))
                    }
                    FdKind::Listener(h) | FdKind::Conn(h) => {
                        Ok(self.apply_sndbuf(h, sndbuf)?.map(|()| 0).map_err(errno_of))
                    }
                }
            }
            // Linux `TCP_SYNCNT`: 1 to 127 SYN retransmissions.
            ("TCP_SYNCNT", Some(v)) => {
                let Ok(v @ 1..=127) = u8::try_from(v) else {
                    return Ok(Err("EINVAL"));
                };
                let fd = self.fd_arg(pos, call)?;
                match fd.kind {
                    FdKind::Fresh => {
                        fd.syn_retries = Some(v);
                        Ok(Ok(0))
                    }
                    FdKind::Listener(h) | FdKind::Conn(h) => {
                        match self.stack.set_option(h, SocketOption::SynRetries(v)) {
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

    /// Sets `sndbuf` (Linux `sk_sndbuf` bytes) as `h`'s send buffer. Under linux-compat the
    /// stack charges it as Linux does (`tcp::Config::send_buffer_skb_accounting`); elsewhere
    /// it is a payload capacity.
    pub(super) fn apply_sndbuf(
        &mut self,
        h: SocketHandle,
        sndbuf: u32,
    ) -> Result<Result<(), SocketError>, Stop> {
        Ok(self
            .stack
            .set_option(h, SocketOption::SendBufferBytes(sndbuf)))
    }

    /// `getsockopt(SO_SNDBUF)`: the stack's send buffer size (Linux `sk_sndbuf`), checked
    /// against the script's.
    pub(super) fn sys_getsockopt_sndbuf(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
    ) -> Result<CallResult, Stop> {
        let fd = self.fd_arg(pos, call)?;
        let (FdKind::Listener(h) | FdKind::Conn(h)) = fd.kind else {
            return skip("getsockopt SO_SNDBUF before listen or connect is not modelled");
        };
        let have = match self.stack.tcp_send_buffer_bytes(h) {
            Ok(v) => v,
            Err(e) => return Ok(Err(errno_of(e))),
        };
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

    /// `getsockopt(SO_ERROR)`: the socket's pending error, taken (0 when none), checked
    /// against the script's `[0]` or `[ENAME]`.
    fn sys_getsockopt_error(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let fd = self.fd_arg(pos, call)?;
        let have = match fd.kind {
            FdKind::Fresh => None,
            FdKind::Listener(h) | FdKind::Conn(h) => match self.stack.take_error(h) {
                Ok(e) => e.map(errno_of),
                Err(e) => return Ok(Err(errno_of(e))),
            },
        };
        let want = match call.args.get(3) {
            Some(Expr::List(v)) => match v.as_slice() {
                [Expr::Int(0)] => Some(None),
                [Expr::Symbol(s)] => Some(Some(s.as_str())),
                _ => None,
            },
            _ => None,
        };
        if let Some(want) = want
            && want != have
        {
            return fail(
                pos,
                format!(
                    "{call}: expected SO_ERROR {}, got {}",
                    want.unwrap_or("0"),
                    have.unwrap_or("0")
                ),
            );
        }
        Ok(Ok(0))
    }

    /// `[n]` → `n`.
    pub(super) fn int_in_list(e: Option<&Expr>) -> Option<i64> {
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
    pub(super) fn sys_getsockopt(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
    ) -> Result<CallResult, Stop> {
        let what = sockopt_name(call);
        if let Some(Expr::Symbol(name)) = call.args.get(2)
            && let Some(r) = self.errqueue_getsockopt(pos, call, &name.clone())?
        {
            return Ok(r);
        }
        if matches!(call.args.get(2), Some(Expr::Symbol(s)) if s == "SO_SNDBUF") {
            return self.sys_getsockopt_sndbuf(pos, call);
        }
        if matches!(call.args.get(2), Some(Expr::Symbol(s)) if s == "SO_ERROR") {
            return self.sys_getsockopt_error(pos, call);
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
