//! The error queue and the socket options behind it: `recvmsg(..., MSG_ERRQUEUE)` reads the
//! stack's [`Stack::tcp_recv_notification`] and checks the script's `msg_flags` and control
//! messages (`IP_RECVERR`'s `sock_extended_err`, `SCM_TIMESTAMPING`'s time) against it;
//! `SO_ZEROCOPY`, `SO_MARK`, `TCP_NOTSENT_LOWAT` and `SO_TIMESTAMPING` are the stack's
//! options (`stack::tcp_notify`), set before a socket has a stack handle too (applied by
//! `listen` or the open, as Linux's socket keeps them).

use super::syscalls::errno_of;
use super::*;
use stack::{Notification, TxTimestampKind, TxTimestamping};

/// Linux's values (`<linux/errqueue.h>`, `<asm/socket.h>`, `<linux/in.h>`, `<linux/in6.h>`).
const SO_EE_ORIGIN_TIMESTAMPING: i64 = 4;
const SO_EE_ORIGIN_ZEROCOPY: i64 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: i64 = 1;
const SCM_TSTAMP_SND: i64 = 0;
const SCM_TSTAMP_SCHED: i64 = 1;
const SCM_TSTAMP_ACK: i64 = 2;
const ENOMSG: i64 = 42;
const SOL_IP: i64 = 0;
const SOL_SOCKET: i64 = 1;
const SOL_IPV6: i64 = 41;
const IP_RECVERR: i64 = 11;
const IPV6_RECVERR: i64 = 25;
const SCM_TIMESTAMPING: i64 = 37;
const MSG_TRUNC: i64 = 0x20;
const MSG_ERRQUEUE: i64 = 0x2000;

/// `SOF_TIMESTAMPING_*` bits.
const SOF_TX_SOFTWARE: i64 = 1 << 1;
const SOF_OPT_ID: i64 = 1 << 7;
const SOF_TX_SCHED: i64 = 1 << 8;
const SOF_TX_ACK: i64 = 1 << 9;
const SOF_OPT_TSONLY: i64 = 1 << 11;

/// The value of a `SOF_TIMESTAMPING_*` name; `None` for one the executor does not know.
fn sof_bit(name: &str) -> Option<i64> {
    Some(match name.strip_prefix("SOF_TIMESTAMPING_")? {
        "TX_HARDWARE" => 1,
        "TX_SOFTWARE" => SOF_TX_SOFTWARE,
        "RX_HARDWARE" => 1 << 2,
        "RX_SOFTWARE" => 1 << 3,
        "SOFTWARE" => 1 << 4,
        "SYS_HARDWARE" => 1 << 5,
        "RAW_HARDWARE" => 1 << 6,
        "OPT_ID" => SOF_OPT_ID,
        "TX_SCHED" => SOF_TX_SCHED,
        "TX_ACK" => SOF_TX_ACK,
        "OPT_CMSG" => 1 << 10,
        "OPT_TSONLY" => SOF_OPT_TSONLY,
        _ => return None,
    })
}

/// The integer an expression of names and numbers ORs to, with `name` giving a name's value.
fn or_value(e: &Expr, name: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
    match e {
        Expr::Int(n) => Some(*n),
        Expr::Symbol(s) => name(s),
        Expr::Or(v) => v
            .iter()
            .try_fold(0, |acc, x| Some(acc | or_value(x, name)?)),
        Expr::List(v) if v.len() == 1 => v.first().and_then(|x| or_value(x, name)),
        _ => None,
    }
}

/// The transmit part of an `SO_TIMESTAMPING` value.
fn tx_timestamping(bits: i64) -> TxTimestamping {
    TxTimestamping {
        scheduled: bits & SOF_TX_SCHED != 0,
        sent: bits & SOF_TX_SOFTWARE != 0,
        acked: bits & SOF_TX_ACK != 0,
        opt_id: bits & SOF_OPT_ID != 0,
        ts_only: bits & SOF_OPT_TSONLY != 0,
    }
}

/// A control message as the executor compares it: level, type and named integer fields.
#[derive(Debug, PartialEq, Eq)]
struct Cmsg {
    level: i64,
    kind: i64,
    data: Vec<(String, i64)>,
}

impl Exec {
    /// `CMSG_LEVEL_IP` / `CMSG_TYPE_RECVERR` (packetdrill's names for the socket's family)
    /// and the literal names, as numbers.
    fn cmsg_symbol(&self, s: &str) -> Option<i64> {
        let v6 = self.ipv4_mapped_ipv6 || matches!(self.addrs, Addrs::V6 { .. });
        Some(match s {
            "CMSG_LEVEL_IP" if v6 => SOL_IPV6,
            "CMSG_LEVEL_IP" => SOL_IP,
            "CMSG_TYPE_RECVERR" if v6 => IPV6_RECVERR,
            "CMSG_TYPE_RECVERR" => IP_RECVERR,
            "SOL_IP" | "IPPROTO_IP" => SOL_IP,
            "SOL_IPV6" | "IPPROTO_IPV6" => SOL_IPV6,
            "IP_RECVERR" => IP_RECVERR,
            "IPV6_RECVERR" => IPV6_RECVERR,
            "SOL_SOCKET" => SOL_SOCKET,
            "SCM_TIMESTAMPING" => SCM_TIMESTAMPING,
            "SO_EE_ORIGIN_TIMESTAMPING" => SO_EE_ORIGIN_TIMESTAMPING,
            "SO_EE_ORIGIN_ZEROCOPY" => SO_EE_ORIGIN_ZEROCOPY,
            "SO_EE_CODE_ZEROCOPY_COPIED" => SO_EE_CODE_ZEROCOPY_COPIED,
            "SCM_TSTAMP_SND" => SCM_TSTAMP_SND,
            "SCM_TSTAMP_SCHED" => SCM_TSTAMP_SCHED,
            "SCM_TSTAMP_ACK" => SCM_TSTAMP_ACK,
            "ENOMSG" => ENOMSG,
            "MSG_ERRQUEUE" => MSG_ERRQUEUE,
            "MSG_TRUNC" => MSG_TRUNC,
            _ => return None,
        })
    }

    /// The control messages Linux delivers with notification `n` (in its order: the
    /// timestamp, then the extended error).
    fn cmsgs_of(&self, n: Notification) -> Vec<Cmsg> {
        let level = self.cmsg_symbol("CMSG_LEVEL_IP").unwrap_or(SOL_IP);
        let kind = self.cmsg_symbol("CMSG_TYPE_RECVERR").unwrap_or(IP_RECVERR);
        let recverr = |errno, origin, code, info, data| Cmsg {
            level,
            kind,
            data: [
                ("ee_errno", errno),
                ("ee_origin", origin),
                ("ee_type", 0),
                ("ee_code", code),
                ("ee_info", info),
                ("ee_data", data),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        };
        match n {
            Notification::ZeroCopy {
                first_id,
                last_id,
                copied,
            } => vec![recverr(
                0,
                SO_EE_ORIGIN_ZEROCOPY,
                if copied {
                    SO_EE_CODE_ZEROCOPY_COPIED
                } else {
                    0
                },
                i64::from(first_id),
                i64::from(last_id),
            )],
            Notification::TxTimestamp { kind, key, at_ns } => {
                let info = match kind {
                    TxTimestampKind::Scheduled => SCM_TSTAMP_SCHED,
                    TxTimestampKind::Sent => SCM_TSTAMP_SND,
                    TxTimestampKind::Acked => SCM_TSTAMP_ACK,
                };
                let ns = i64::try_from(at_ns).unwrap_or(i64::MAX);
                vec![
                    Cmsg {
                        level: SOL_SOCKET,
                        kind: SCM_TIMESTAMPING,
                        data: vec![
                            ("scm_sec".to_string(), ns / 1_000_000_000),
                            ("scm_nsec".to_string(), ns % 1_000_000_000),
                        ],
                    },
                    recverr(ENOMSG, SO_EE_ORIGIN_TIMESTAMPING, 0, info, i64::from(key)),
                ]
            }
        }
    }

    /// One control message of a script: `{cmsg_level=..., cmsg_type=..., cmsg_data={...}}`.
    fn script_cmsg(&self, e: &Expr) -> Result<Cmsg, Stop> {
        let text = e.to_string();
        let not_understood =
            || Stop::Skip(format!("recvmsg: control message {text} is not understood"));
        let Expr::Struct(fields) = e else {
            return Err(not_understood());
        };
        let value = |x: &Expr| or_value(x, &|s| self.cmsg_symbol(s));
        let (mut level, mut kind, mut data) = (None, None, Vec::new());
        for f in fields {
            match (f.name.as_deref(), &f.value) {
                (Some("cmsg_level"), v) => level = value(v),
                (Some("cmsg_type"), v) => kind = value(v),
                (Some("cmsg_data"), Expr::Struct(items)) => {
                    for it in items {
                        let name = match it.name.as_deref() {
                            Some(
                                n @ ("ee_errno" | "ee_origin" | "ee_type" | "ee_code" | "ee_info"
                                | "ee_data" | "scm_sec" | "scm_nsec"),
                            ) => n.to_string(),
                            _ => return Err(not_understood()),
                        };
                        data.push((name, value(&it.value).ok_or_else(not_understood)?));
                    }
                }
                _ => return Err(not_understood()),
            }
        }
        Ok(Cmsg {
            level: level.ok_or_else(not_understood)?,
            kind: kind.ok_or_else(not_understood)?,
            data,
        })
    }

    /// `recvmsg(fd, {msg_name(...)=..., msg_iov(1)=[{...,0}], msg_flags=..., msg_control=[...]},
    /// MSG_ERRQUEUE)`: the oldest notification of the socket's error queue (`EAGAIN` when it
    /// is empty, blocking or not, as Linux), its control messages and `msg_flags` checked
    /// against the script's. A timestamp's time may differ from the script's by the
    /// tolerance. The queue holds no copy of a packet: an `msg_iov` longer than 0 for a
    /// timestamp without `SOF_TIMESTAMPING_OPT_TSONLY` skips the script.
    pub(super) fn sys_recvmsg_errqueue(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
    ) -> Result<CallResult, Stop> {
        let Some(Expr::Struct(fields)) = call.args.get(1) else {
            return fail(pos, "recvmsg: second argument is not a struct msghdr");
        };
        let (mut iov_len, mut want_flags, mut want_cmsgs) = (0usize, None, None);
        for f in fields {
            match (f.name.as_deref(), &f.value) {
                (Some("msg_name"), Expr::Ellipsis) => {}
                (Some("msg_iov"), Expr::List(iovs)) => {
                    iov_len = Self::iov_total_len(pos, f.param.as_ref(), iovs)?;
                }
                (Some("msg_flags"), v) => {
                    want_flags = Some(or_value(v, &|s| self.cmsg_symbol(s)).ok_or_else(|| {
                        Stop::Skip(format!("recvmsg: msg_flags {v} not understood"))
                    })?);
                }
                (Some("msg_control"), Expr::List(cmsgs)) => {
                    want_cmsgs = Some(cmsgs.iter().map(|c| self.script_cmsg(c)).collect::<Result<
                        Vec<_>,
                        _,
                    >>(
                    )?);
                }
                (name, value) => {
                    return skip(format!(
                        "recvmsg: msghdr field {}={value} is not supported",
                        name.unwrap_or("(unnamed)")
                    ));
                }
            }
        }
        let h = match self.fd_arg(pos, call)?.kind {
            FdKind::Conn(h) => h,
            // A socket that never connected has an empty queue.
            FdKind::Fresh | FdKind::Listener(_) => return Ok(Err("EAGAIN")),
        };
        let n = match self.stack.tcp_recv_notification(h) {
            Ok(n) => n,
            Err(SocketError::WouldBlock) => return Ok(Err("EAGAIN")),
            Err(e) => return Ok(Err(errno_of(e))),
        };
        let ts_only = self
            .stack
            .tcp_socket_options(h)
            .is_ok_and(|o| o.tx_timestamping.ts_only);
        let packet = matches!(n, Notification::TxTimestamp { .. }) && !ts_only;
        if packet && iov_len > 0 {
            return skip("recvmsg(MSG_ERRQUEUE) reading the packet a timestamp carries");
        }
        let have_flags = MSG_ERRQUEUE | if packet { MSG_TRUNC } else { 0 };
        if let Some(want) = want_flags
            && want != have_flags
        {
            return fail(
                pos,
                format!("{call}: expected msg_flags {want:#x}, got {have_flags:#x} for {n:?}"),
            );
        }
        let have = self.cmsgs_of(n);
        if let Some(want) = want_cmsgs {
            self.check_cmsgs(pos, call, &want, &have, n)?;
        }
        Ok(Ok(0))
    }

    /// Compares control messages in order; a timestamp may be off by the tolerance.
    fn check_cmsgs(
        &self,
        pos: Pos,
        call: &SyscallLine,
        want: &[Cmsg],
        have: &[Cmsg],
        n: Notification,
    ) -> Result<(), Stop> {
        let mismatch = |what: String| -> Result<(), Stop> {
            fail(
                pos,
                format!("{call}: {what} (the stack's notification: {n:?})"),
            )
        };
        if want.len() != have.len() {
            return mismatch(format!(
                "expected {} control messages, got {}",
                want.len(),
                have.len()
            ));
        }
        for (w, h) in want.iter().zip(have) {
            if (w.level, w.kind) != (h.level, h.kind) {
                return mismatch(format!(
                    "expected control message level {} type {}, got level {} type {}",
                    w.level, w.kind, h.level, h.kind
                ));
            }
            if h.kind == SCM_TIMESTAMPING && h.level == SOL_SOCKET {
                let get =
                    |c: &Cmsg, k: &str| c.data.iter().find(|(n, _)| *n == k).map_or(0, |(_, v)| *v);
                let ns = |c: &Cmsg| {
                    get(c, "scm_sec")
                        .saturating_mul(1_000_000_000)
                        .saturating_add(get(c, "scm_nsec"))
                };
                let tol = self.tolerance_usecs.saturating_mul(1000);
                if ns(w).abs_diff(ns(h)) > tol {
                    return mismatch(format!(
                        "timestamp {} ns, expected {} ns (tolerance {} us)",
                        ns(h),
                        ns(w),
                        self.tolerance_usecs
                    ));
                }
                continue;
            }
            for (name, value) in &w.data {
                let got = h.data.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
                if got != Some(*value) {
                    return mismatch(format!("expected {name}={value}, got {got:?}"));
                }
            }
        }
        Ok(())
    }

    /// `setsockopt` of `SO_ZEROCOPY`, `SO_MARK`, `TCP_NOTSENT_LOWAT`, `SO_TIMESTAMPING`:
    /// `None` for other options.
    pub(super) fn errqueue_setsockopt(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        name: &str,
    ) -> Result<Option<CallResult>, Stop> {
        let arg = call.args.get(3);
        let int = || match arg {
            Some(Expr::List(v)) => match v.as_slice() {
                [Expr::Int(n)] => Some(*n),
                _ => None,
            },
            Some(Expr::Int(n)) => Some(*n),
            _ => None,
        };
        let opt = match name {
            // Linux `sk_setsockopt`: 0 or 1.
            "SO_ZEROCOPY" => match int() {
                Some(v @ 0..=1) => SocketOption::ZeroCopy(v == 1),
                Some(_) => return Ok(Some(Err("EINVAL"))),
                None => return skip(format!("{call}: value not understood")),
            },
            // An int the kernel keeps as u32.
            "SO_MARK" | "TCP_NOTSENT_LOWAT" => {
                let Some(v) = int() else {
                    return skip(format!("{call}: value not understood"));
                };
                if name == "SO_MARK" {
                    SocketOption::Mark(v as u32)
                } else {
                    SocketOption::NotSentLowat(v as u32)
                }
            }
            "SO_TIMESTAMPING" => {
                let Some(bits) = arg.and_then(|e| or_value(e, &sof_bit)) else {
                    return skip(format!("{call}: SO_TIMESTAMPING flags not understood"));
                };
                SocketOption::TxTimestamping(tx_timestamping(bits))
            }
            // Linux `do_ip_setsockopt`: an int (or one byte) whose low byte is kept.
            "IP_TOS" => match int() {
                Some(v) => SocketOption::IpTos(v as u8),
                None => return skip(format!("{call}: value not understood")),
            },
            "IP_MTU_DISCOVER" => {
                let mode = match arg {
                    Some(Expr::List(v)) => match v.as_slice() {
                        [Expr::Symbol(s)] => pmtu_mode(s),
                        [Expr::Int(n)] => pmtu_number(*n),
                        _ => None,
                    },
                    Some(Expr::Int(n)) => pmtu_number(*n),
                    _ => None,
                };
                match mode {
                    Some(Ok(m)) => SocketOption::PathMtuDiscovery(m),
                    // `IP_PMTUDISC_INTERFACE`/`OMIT` (4, 5) and beyond: Linux's values this
                    // stack does not model, or `EINVAL` past them.
                    Some(Err(())) => return Ok(Some(Err("EINVAL"))),
                    None => return skip(format!("{call}: IP_MTU_DISCOVER mode not modelled")),
                }
            }
            _ => return Ok(None),
        };
        let fd = self.fd_arg(pos, call)?;
        match fd.kind {
            FdKind::Fresh => {
                if matches!(opt, SocketOption::TxTimestamping(t) if t.opt_id) {
                    // Linux: `OPT_ID` needs a connection (its keys count from SND.UNA).
                    return Ok(Some(Err("EINVAL")));
                }
                let same = core::mem::discriminant(&opt);
                fd.sock_opts.retain(|o| core::mem::discriminant(o) != same);
                fd.sock_opts.push(opt);
                Ok(Some(Ok(0)))
            }
            FdKind::Listener(h) | FdKind::Conn(h) => Ok(Some(
                self.stack.set_option(h, opt).map(|()| 0).map_err(errno_of),
            )),
        }
    }

    /// `getsockopt` of `SO_ZEROCOPY`, `SO_MARK`, `TCP_NOTSENT_LOWAT`, checked against the
    /// script's value: `None` for other options.
    pub(super) fn errqueue_getsockopt(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        name: &str,
    ) -> Result<Option<CallResult>, Stop> {
        if !matches!(name, "SO_ZEROCOPY" | "SO_MARK" | "TCP_NOTSENT_LOWAT") {
            return Ok(None);
        }
        let fd = self.fd_arg(pos, call)?;
        let o = match fd.kind {
            FdKind::Fresh => {
                let mut o = stack::SocketOptions::default();
                for opt in &fd.sock_opts {
                    match *opt {
                        SocketOption::ZeroCopy(v) => o.zerocopy = v,
                        SocketOption::Mark(v) => o.mark = v,
                        SocketOption::NotSentLowat(v) => o.notsent_lowat_bytes = v,
                        _ => {}
                    }
                }
                o
            }
            FdKind::Listener(h) | FdKind::Conn(h) => match self.stack.tcp_socket_options(h) {
                Ok(o) => o,
                Err(e) => return Ok(Some(Err(errno_of(e)))),
            },
        };
        let have = match name {
            "SO_ZEROCOPY" => u32::from(o.zerocopy),
            "SO_MARK" => o.mark,
            _ => o.notsent_lowat_bytes,
        };
        if let Some(want) = Self::int_in_list(call.args.get(3))
            && want as u32 != have
        {
            return fail(pos, format!("{call}: expected {name} {want}, got {have}"));
        }
        Ok(Some(Ok(0)))
    }
}

/// `IP_MTU_DISCOVER`'s mode by name (`<linux/in.h>`); `None` for names not modelled.
fn pmtu_mode(name: &str) -> Option<Result<stack::PathMtuDiscovery, ()>> {
    use stack::PathMtuDiscovery as P;
    Some(Ok(match name {
        "IP_PMTUDISC_DONT" => P::Dont,
        "IP_PMTUDISC_WANT" => P::Want,
        "IP_PMTUDISC_DO" => P::Do,
        "IP_PMTUDISC_PROBE" => P::Probe,
        _ => return None,
    }))
}

/// `IP_MTU_DISCOVER`'s mode by number: 0–3 as named above, 4–5 not modelled, above that
/// `EINVAL` as Linux answers.
fn pmtu_number(n: i64) -> Option<Result<stack::PathMtuDiscovery, ()>> {
    use stack::PathMtuDiscovery as P;
    match n {
        0 => Some(Ok(P::Dont)),
        1 => Some(Ok(P::Want)),
        2 => Some(Ok(P::Do)),
        3 => Some(Ok(P::Probe)),
        4 | 5 => None,
        _ => Some(Err(())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn so_timestamping_names_map_to_the_transmit_settings() {
        let e = Expr::List(vec![Expr::Or(vec![
            Expr::Symbol("SOF_TIMESTAMPING_TX_SCHED".into()),
            Expr::Symbol("SOF_TIMESTAMPING_TX_SOFTWARE".into()),
            Expr::Symbol("SOF_TIMESTAMPING_TX_ACK".into()),
            Expr::Symbol("SOF_TIMESTAMPING_SOFTWARE".into()),
            Expr::Symbol("SOF_TIMESTAMPING_OPT_ID".into()),
        ])]);
        let bits = or_value(&e, &sof_bit).unwrap();
        assert_eq!(bits, 0x392);
        let t = tx_timestamping(bits);
        assert!(t.scheduled && t.sent && t.acked && t.opt_id && !t.ts_only);
        assert_eq!(
            or_value(&Expr::Symbol("SOF_TIMESTAMPING_BOGUS".into()), &sof_bit),
            None
        );
    }
}
