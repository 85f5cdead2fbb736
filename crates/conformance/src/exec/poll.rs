//! The executor's `poll(fds, nfds, timeout_ms)` over TCP sockets: each `{fd=N, events=...,
//! revents=...}` is answered from the stack's readiness ([`Exec::poll_mask`], Linux's
//! `tcp_poll` bits, which `poll` shares with epoll); a call with nothing ready waits, as a
//! blocking call, until something is or its timeout passes (then 0). The `revents` a script
//! writes are checked.

use super::*;

/// `POLLERR`, `POLLHUP` and `POLLNVAL`: reported whatever `events` asks for.
const POLL_ALWAYS: u32 = 0x008 | 0x010 | 0x020;
/// Linux `POLLNVAL`: the fd is not open.
const POLLNVAL: u32 = 0x020;

/// One `struct pollfd` of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PollFd {
    fd: i64,
    events: u32,
    /// The `revents` the script expects, when it names them.
    revents: Option<u32>,
}

/// The value of a poll mask expression (`POLLIN|POLLOUT`, `0`): the `POLL*` names are the
/// `EPOLL*` ones without the `E` (same values).
fn poll_mask_value(e: &Expr) -> Option<u32> {
    match e {
        Expr::Int(n) => u32::try_from(*n).ok(),
        Expr::Symbol(s) if s == "POLLNVAL" => Some(POLLNVAL),
        Expr::Symbol(s) => epoll::epoll_mask(&Expr::Symbol(format!("E{s}"))),
        Expr::Or(v) => v
            .iter()
            .try_fold(0u32, |m, x| Some(m | poll_mask_value(x)?)),
        _ => None,
    }
}

/// `[{fd=N, events=..., revents=...}, ...]`; `None` when not understood.
fn pollfds(e: Option<&Expr>) -> Option<Vec<PollFd>> {
    let Some(Expr::List(items)) = e else {
        return None;
    };
    items
        .iter()
        .map(|item| {
            let Expr::Struct(fields) = item else {
                return None;
            };
            let mut p = PollFd {
                fd: -1,
                events: 0,
                revents: None,
            };
            for f in fields {
                match (f.name.as_deref(), &f.value) {
                    (Some("fd"), Expr::Int(n)) => p.fd = *n,
                    (Some("events"), v) => p.events = poll_mask_value(v)?,
                    (Some("revents"), v) => p.revents = Some(poll_mask_value(v)?),
                    _ => return None,
                }
            }
            Some(p)
        })
        .collect()
}

impl Exec {
    /// `poll(fds, nfds, timeout)`: see the module documentation.
    pub(super) fn sys_poll(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        let (Some(fds), Some(Expr::Int(nfds)), Some(Expr::Int(timeout_ms))) = (
            pollfds(call.args.first()),
            call.args.get(1),
            call.args.get(2),
        ) else {
            return skip(format!("{call}: poll arguments not understood"));
        };
        if usize::try_from(*nfds).ok() != Some(fds.len()) {
            return fail(
                pos,
                format!("{call}: nfds {nfds} but {} pollfds", fds.len()),
            );
        }
        // A negative timeout waits for ever (bounded by the script's window all the same).
        let deadline_ns = u64::try_from(*timeout_ms)
            .map(|ms| self.now_ns.saturating_add(ms.saturating_mul(1_000_000)))
            .unwrap_or(u64::MAX);
        let op = PendingOp::Poll { fds, deadline_ns };
        match self.poll_attempt(pos, call, &op)? {
            Some(r) => Ok(Some(r)),
            None if deadline_ns <= self.now_ns => Ok(Some(Ok(0))),
            None => {
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

    /// The answer of a `poll` now: `None` while nothing is ready; a `revents` the script
    /// wrote that differs from what the socket has fails the script.
    pub(super) fn poll_attempt(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        op: &PendingOp,
    ) -> Result<Option<CallResult>, Stop> {
        let PendingOp::Poll { fds, .. } = op else {
            return Ok(None);
        };
        let mut got = Vec::with_capacity(fds.len());
        for p in fds {
            let mask = if self.fds.contains_key(&p.fd) {
                self.poll_mask(p.fd)
            } else {
                POLLNVAL
            };
            got.push(mask & (p.events | POLL_ALWAYS));
        }
        let ready = got.iter().filter(|&&m| m != 0).count();
        if ready == 0 {
            return Ok(None);
        }
        for (p, &have) in fds.iter().zip(&got) {
            if let Some(want) = p.revents
                && want != have
            {
                return fail(
                    pos,
                    format!(
                        "{call}: fd {} revents {}, expected {}",
                        p.fd,
                        epoll::epoll_mask_text(have),
                        epoll::epoll_mask_text(want)
                    ),
                );
            }
        }
        Ok(Some(Ok(ready as i64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_masks_read_as_their_epoll_twins() {
        let e = Expr::Or(vec![
            Expr::Symbol("POLLIN".into()),
            Expr::Symbol("POLLOUT".into()),
            Expr::Symbol("POLLERR".into()),
        ]);
        assert_eq!(poll_mask_value(&e), Some(0x001 | 0x004 | 0x008));
        assert_eq!(poll_mask_value(&Expr::Symbol("POLLBOGUS".into())), None);
    }
}
