//! The executor's `epoll_create`, `epoll_ctl` and `epoll_wait`: registrations, the ready list
//! with level- and edge-triggered reporting over the stack's readiness, and the masks as
//! scripts write them.

use super::*;

impl Exec {
    /// `epoll_create(size)`: a new, empty instance.
    pub(super) fn sys_epoll_create(&mut self, call: &SyscallLine) -> CallResult {
        let fd = self.new_fd(call);
        self.epolls.insert(fd, Epoll::default());
        Ok(fd)
    }

    /// `epoll_ctl(epfd, EPOLL_CTL_ADD|EPOLL_CTL_MOD|EPOLL_CTL_DEL, fd, {events=..., fd=N})` on
    /// TCP sockets.
    pub(super) fn sys_epoll_ctl(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
    ) -> Result<CallResult, Stop> {
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
                // Linux `do_epoll_ctl`: `EPOLLEXCLUSIVE` only with the bits it allows.
                if mask & EPOLLEXCLUSIVE != 0 && mask & !EPOLLEXCLUSIVE_OK_BITS != 0 {
                    return Ok(Err("EINVAL"));
                }
                if ep.items.iter().any(|i| i.fd == fd) {
                    return Ok(Err("EEXIST"));
                }
                ep.items.push(EpollItem {
                    fd,
                    interest: mask & !EPOLL_FLAG_BITS,
                    edge_triggered: mask & EPOLLET != 0,
                    oneshot: mask & EPOLLONESHOT != 0,
                    exclusive: mask & EPOLLEXCLUSIVE != 0,
                    disabled: false,
                    data,
                    ready: true,
                });
                Ok(Ok(0))
            }
            // Linux `ep_modify`: the new mask and data replace the old, and the item is
            // checked for readiness again at once.
            "EPOLL_CTL_MOD" => {
                let Some((mask, data)) = epoll_event_arg(call.args.get(3)) else {
                    return skip(format!("{call}: event not understood"));
                };
                let Some(item) = ep.items.iter_mut().find(|i| i.fd == fd) else {
                    return Ok(Err("ENOENT"));
                };
                // Linux: an exclusive registration cannot be modified, nor made exclusive.
                if item.exclusive || mask & EPOLLEXCLUSIVE != 0 {
                    return Ok(Err("EINVAL"));
                }
                item.interest = mask & !EPOLL_FLAG_BITS;
                item.edge_triggered = mask & EPOLLET != 0;
                item.oneshot = mask & EPOLLONESHOT != 0;
                // `EPOLL_CTL_MOD` re-arms a one-shot registration.
                item.disabled = false;
                item.data = data;
                item.ready = true;
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
    pub(super) fn poll_mask(&self, fd: i64) -> u32 {
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
        // Linux `tcp_poll`: `sk_err`, or a non-empty error queue.
        if r.contains(Readiness::ERROR) || r.contains(Readiness::ERROR_QUEUE) {
            mask |= EPOLLERR;
        }
        // Linux `tcp_poll`: a closed connection (reset, timed out, or closed both ways) is
        // hung up, and reads (end of file or the error) and writes (the error) do not block.
        if self.stack.tcp_state(h) == Some(tcp::State::Closed) {
            mask |= EPOLLHUP | EPOLLIN | EPOLLRDNORM | EPOLLRDHUP | EPOLLOUT | EPOLLWRNORM;
        }
        mask
    }

    /// `epoll_wait(epfd, {events=..., fd=N}, maxevents, 0)`: reports the ready registrations
    /// (what they have now, within their interest plus `EPOLLERR|EPOLLHUP`), in registration
    /// order; the first reported event is checked against the script's. Only a zero timeout
    /// is modelled.
    pub(super) fn sys_epoll_wait(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
    ) -> Result<CallResult, Stop> {
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
                .map(|i| {
                    // A fired one-shot registration reports nothing until re-armed.
                    let ready = i.ready && !i.disabled;
                    (i.fd, ready, i.interest, i.edge_triggered || i.oneshot)
                })
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
        for (idx, _) in &reported {
            if let Some(item) = ep.items.get_mut(*idx)
                && item.oneshot
            {
                // Linux `ep_send_events`: a reported one-shot item's events are cleared.
                item.disabled = true;
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
}

/// An epoll instance: its registrations in `epoll_ctl` order.
#[derive(Debug, Default)]
pub(super) struct Epoll {
    pub(super) items: Vec<EpollItem>,
}

/// One `epoll_ctl(EPOLL_CTL_ADD)` registration.
#[derive(Debug)]
pub(super) struct EpollItem {
    pub(super) fd: i64,
    /// Requested events, without the flag bits (`EPOLLET`, `EPOLLONESHOT`, ...).
    pub(super) interest: u32,
    pub(super) edge_triggered: bool,
    /// `EPOLLONESHOT`: reported once, then `disabled` until `EPOLL_CTL_MOD`.
    pub(super) oneshot: bool,
    /// `EPOLLEXCLUSIVE`: with one epoll instance per socket here, only its rules on
    /// `epoll_ctl` differ (no `EPOLL_CTL_MOD`).
    pub(super) exclusive: bool,
    pub(super) disabled: bool,
    /// The user data member's name (`fd`, `ptr`, `u32`, `u64`) and value, echoed by
    /// `epoll_wait`.
    pub(super) data: (String, i64),
    /// On the ready list: set by registration and by each stack event of the socket,
    /// cleared when `epoll_wait` reports it edge-triggered or finds nothing to report.
    pub(super) ready: bool,
}

const EPOLLIN: u32 = 0x001;
const EPOLLPRI: u32 = 0x002;
const EPOLLOUT: u32 = 0x004;
const EPOLLERR: u32 = 0x008;
const EPOLLHUP: u32 = 0x010;
const EPOLLRDNORM: u32 = 0x040;
const EPOLLWRNORM: u32 = 0x100;
const EPOLLRDHUP: u32 = 0x2000;
const EPOLLEXCLUSIVE: u32 = 1 << 28;
const EPOLLWAKEUP: u32 = 1 << 29;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLET: u32 = 1 << 31;
/// The flag bits of an event mask (not events).
const EPOLL_FLAG_BITS: u32 = EPOLLEXCLUSIVE | EPOLLWAKEUP | EPOLLONESHOT | EPOLLET;
/// Linux `EPOLLEXCLUSIVE_OK_BITS`.
const EPOLLEXCLUSIVE_OK_BITS: u32 = EPOLLIN
    | EPOLLOUT
    | EPOLLRDNORM
    | EPOLLWRNORM
    | 0x080
    | 0x200
    | EPOLLERR
    | EPOLLHUP
    | EPOLLWAKEUP
    | EPOLLET
    | EPOLLEXCLUSIVE;

/// The value of an epoll event mask expression (`EPOLLIN|EPOLLET`, `0`).
pub(super) fn epoll_mask(e: &Expr) -> Option<u32> {
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
            "EPOLLONESHOT" => EPOLLONESHOT,
            "EPOLLEXCLUSIVE" => EPOLLEXCLUSIVE,
            "EPOLLWAKEUP" => EPOLLWAKEUP,
            _ => return None,
        }),
        Expr::Or(parts) => parts
            .iter()
            .try_fold(0u32, |acc, p| epoll_mask(p).map(|m| acc | m)),
        _ => None,
    }
}

/// An epoll mask as a script writes it.
pub(super) fn epoll_mask_text(mask: u32) -> String {
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
pub(super) fn epoll_event_arg(e: Option<&Expr>) -> Option<(u32, (String, i64))> {
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
