//! The executor's system calls: each `sys_*` handler turns one script call (`socket`,
//! `listen`, `accept`, `connect`, `read`/`write`/`sendmsg`, `close`, `shutdown`, `fcntl`,
//! `ioctl`, `setsockopt`/`getsockopt`, `epoll_*`) into the stack's socket API and the result
//! packetdrill expects, blocking calls included. The event loop and the packet side are in
//! the parent module.

use super::*;

impl Exec {
    pub(super) fn fd_num(pos: Pos, call: &SyscallLine) -> Result<i64, Stop> {
        match call.args.first() {
            Some(Expr::Int(n)) => Ok(*n),
            _ => fail(pos, format!("{}: first argument is not an fd", call.name)),
        }
    }

    pub(super) fn fd_arg(&mut self, pos: Pos, call: &SyscallLine) -> Result<&mut Fd, Stop> {
        let n = Self::fd_num(pos, call)?;
        match self.fds.get_mut(&n) {
            Some(fd) => Ok(fd),
            None => fail(pos, format!("{}: fd {n} is not open", call.name)),
        }
    }

    pub(super) fn sys_socket(&mut self, call: &SyscallLine) -> Result<CallResult, Stop> {
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
        self.under_test = Some(fd);
        Ok(Ok(fd))
    }

    pub(super) fn sys_listen(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
        let backlog = match call.args.get(1) {
            Some(Expr::Int(n)) => usize::try_from(*n).unwrap_or(0).max(1),
            _ => 1,
        };
        let fd = self.fd_arg(pos, call)?;
        if fd.kind != FdKind::Fresh {
            return Ok(Err("EINVAL"));
        }
        let (nodelay, maxseg) = (fd.nodelay, fd.maxseg);
        let fastopen = core::mem::take(&mut fd.fastopen);
        let sock_opts = core::mem::take(&mut fd.sock_opts);
        let sndbuf = fd.sndbuf.take();
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
        for opt in fastopen.into_iter().chain(sock_opts) {
            let _ = self.stack.set_option(h, opt);
        }
        if let Some(v) = sndbuf {
            let _ = self.apply_sndbuf(h, v)?;
        }
        let fd = self.fd_arg(pos, call)?;
        fd.kind = FdKind::Listener(h);
        self.local_port = Some(SERVER_PORT);
        self.listened_since_passive_syn = true;
        Ok(Ok(0))
    }

    /// Runs or parks a call that may block; `None` when it was parked.
    pub(super) fn maybe_block(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        op: PendingOp,
        nonblocking: bool,
    ) -> Result<Option<CallResult>, Stop> {
        match self.attempt(pos, call, op)? {
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

    pub(super) fn retry_pending(&mut self) -> Result<(), Stop> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        if let PendingOp::Poll { deadline_ns, .. } = p.op {
            let r = match self.poll_attempt(p.pos, &p.call, &p.op)? {
                Some(r) => r,
                None if self.now_ns >= deadline_ns => Ok(0),
                None => {
                    self.pending = Some(p);
                    return Ok(());
                }
            };
            return self.check_return(p.pos, &p.call, p.window, r);
        }
        if !self.blocked_writer_woken(&p.op) {
            self.pending = Some(p);
            return Ok(());
        }
        match self.attempt(p.pos, &p.call, p.op)? {
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

    /// Whether a blocking write that found no room may go on: a writer sleeps until the
    /// socket reports itself writable (Linux `sk_stream_wait_memory`, woken by
    /// `sk_stream_write_space` only once the socket is writable again), fails, or closes.
    fn blocked_writer_woken(&self, op: &PendingOp) -> bool {
        let PendingOp::Write {
            fd,
            connect_wait: false,
            ..
        } = *op
        else {
            return true;
        };
        let Some(FdKind::Conn(h)) = self.fds.get(&fd).map(|f| f.kind) else {
            return true;
        };
        let open = matches!(
            self.stack.tcp_state(h),
            Some(tcp::State::Established | tcp::State::CloseWait)
        );
        match self.stack.tcp_readiness(h) {
            Ok(r) => !open || r.contains(Readiness::WRITABLE) || r.contains(Readiness::ERROR),
            Err(_) => true,
        }
    }

    /// packetdrill maps script fds to live ones: the fd a script expects `socket()` or
    /// `accept()` to return names the new socket from then on. When that number still names
    /// an open socket, the newer one takes it (packetdrill looks script fds up newest
    /// first) and the older stays open under a number the script never uses.
    pub(super) fn new_fd(&mut self, call: &SyscallLine) -> i64 {
        let n = match call.ret {
            Expr::Int(n) if n >= 0 => n,
            _ => self.next_fd,
        };
        self.next_fd = self.next_fd.max(n.saturating_add(1));
        if let Some(old) = self.fds.remove(&n) {
            self.fds.insert(self.next_fd, old);
            self.next_fd += 1;
        }
        if let Some(old) = self.epolls.remove(&n) {
            self.epolls.insert(self.next_fd, old);
            self.next_fd += 1;
        }
        n
    }

    fn attempt(&mut self, pos: Pos, call: &SyscallLine, op: PendingOp) -> Result<Attempt, Stop> {
        let blocked = Ok(Attempt::Blocked(op.clone()));
        match op {
            // Answered by `poll_attempt` (`retry_pending`), never here.
            PendingOp::Poll { .. } => blocked,
            PendingOp::Accept { fd } => {
                let Some(FdKind::Listener(l)) = self.fds.get(&fd).map(|f| f.kind) else {
                    return Ok(Attempt::Done(Err("EINVAL")));
                };
                match self.stack.tcp_accept(l) {
                    Ok((h, _peer)) => {
                        let n = self.new_fd(call);
                        self.fds.insert(n, Fd::new(FdKind::Conn(h)));
                        self.under_test = Some(n);
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
                    _ => Ok(Attempt::Done(Err(self.open_errno(fd, h)))),
                }
            }
            PendingOp::Read { fd, len, peek, inq } => {
                let Some(f) = self.fds.get_mut(&fd) else {
                    return Ok(Attempt::Done(Err("EBADF")));
                };
                let rd_shut = f.rd_shut;
                let FdKind::Conn(h) = f.kind else {
                    return Ok(Attempt::Done(Err("ENOTCONN")));
                };
                let mut buf = vec![0u8; len.min(READ_CHUNK_BYTES_MAX)];
                let got = if peek {
                    self.stack.tcp_peek(h, &mut buf)
                } else {
                    self.stack.tcp_recv(h, &mut buf)
                };
                if let (Ok(_) | Err(SocketError::Finished), Some(want)) = (got, inq) {
                    // `TCP_CM_INQ`: the hint after the read (Linux `tcp_recvmsg`).
                    let have = self.stack.tcp_inq_hint(h).map_or(-1, |n| n as i64);
                    if have != want {
                        return fail(
                            pos,
                            format!("{call}: expected TCP_CM_INQ {want}, got {have}"),
                        );
                    }
                }
                match got {
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
                flags,
                mut connect_wait,
            } => {
                let Some(FdKind::Conn(h)) = self.fds.get(&fd).map(|f| f.kind) else {
                    return Ok(Attempt::Done(Err("ENOTCONN")));
                };
                if connect_wait {
                    match self.stack.tcp_state(h) {
                        Some(s) if s.is_synchronized() => connect_wait = false,
                        Some(tcp::State::SynSent | tcp::State::SynReceived) => {}
                        // The open failed: its error, whatever was queued (Linux
                        // `tcp_sendmsg_fastopen`, `sk_stream_wait_connect`).
                        _ => return Ok(Attempt::Done(Err(self.open_errno(fd, h)))),
                    }
                }
                // Zeros, handed over in bounded chunks (a script may write gigabytes).
                let chunk = [0u8; 64 * 1024];
                let mut done = done;
                while done < len {
                    let n = (len - done).min(chunk.len());
                    let data = chunk.get(..n).unwrap_or(&[]);
                    // One call handed over in pieces: the record ends with its last piece,
                    // and the pieces after the first continue its zero-copy ID.
                    let piece = stack::SendFlags {
                        eor: flags.eor && done + n == len,
                        continues: done > 0,
                        ..flags
                    };
                    let sent = self.stack.tcp_send_with(h, data, piece);
                    match sent {
                        Ok(0) | Err(SocketError::WouldBlock) => break,
                        Ok(k) => done += k,
                        Err(_) if done > 0 => return Ok(Attempt::Done(Ok(done as i64))),
                        Err(e) => return Ok(Attempt::Done(Err(self.write_errno_of(fd, e)))),
                    }
                }
                if done >= len && !connect_wait {
                    Ok(Attempt::Done(Ok(len as i64)))
                } else {
                    Ok(Attempt::Blocked(PendingOp::Write {
                        fd,
                        done,
                        len,
                        flags,
                        connect_wait,
                    }))
                }
            }
        }
    }

    pub(super) fn sys_accept(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        let fd = Self::fd_num(pos, call)?;
        let nonblocking = self.fd_arg(pos, call)?.nonblocking;
        self.maybe_block(pos, call, window, PendingOp::Accept { fd }, nonblocking)
    }

    pub(super) fn sys_connect(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        let fd = Self::fd_num(pos, call)?;
        let f = self.fd_arg(pos, call)?;
        if let FdKind::Conn(h) = f.kind {
            // Linux `__inet_stream_connect`: a deferred Fast Open is connected as far as
            // `connect` is concerned; an open in progress is `EALREADY`.
            let opening = matches!(
                self.stack.tcp_state(h),
                Some(tcp::State::SynSent | tcp::State::SynReceived)
            );
            let errno = if opening && !self.stack.tcp_is_deferred(h) {
                "EALREADY"
            } else {
                "EISCONN"
            };
            return Ok(Some(Err(errno)));
        }
        if f.kind != FdKind::Fresh {
            return Ok(Some(Err("EISCONN")));
        }
        let (nonblocking, fastopen) = (f.nonblocking, f.fastopen_connect);
        let opts = Self::fresh_options(f);
        let remote = SocketAddr::new(self.addrs.remote(), SERVER_PORT);
        let h = if fastopen {
            // `TCP_FASTOPEN_CONNECT`: with a cookie the open waits for the first write.
            match self
                .stack
                .tcp_connect_deferred(self.now_ns, remote, 0, &opts)
            {
                Ok((h, deferred)) => {
                    self.opened(pos, call, h)?;
                    if deferred {
                        return Ok(Some(Ok(0)));
                    }
                    h
                }
                Err(e) => return Ok(Some(Err(errno_of(e)))),
            }
        } else {
            let h = match self.stack.tcp_connect(self.now_ns, remote, 0) {
                Ok(h) => h,
                Err(e) => return Ok(Some(Err(errno_of(e)))),
            };
            // Before the first poll, so the SYN announces them.
            for opt in opts {
                let _ = self.stack.set_option(h, opt);
            }
            self.opened(pos, call, h)?;
            h
        };
        let _ = h;
        if nonblocking {
            return Ok(Some(Err("EINPROGRESS")));
        }
        self.maybe_block(pos, call, window, PendingOp::Connect { fd }, false)
    }

    pub(super) fn len_arg(pos: Pos, call: &SyscallLine) -> Result<usize, Stop> {
        match call.args.get(2) {
            Some(Expr::Int(n)) => usize::try_from(*n)
                .map_err(|_| Stop::Fail(pos, format!("{}: negative length", call.name))),
            _ => fail(
                pos,
                format!("{}: third argument is not a length", call.name),
            ),
        }
    }

    pub(super) fn flags_arg(call: &SyscallLine) -> Result<(), Stop> {
        match call.args.get(3) {
            None | Some(Expr::Int(0)) => Ok(()),
            Some(other) => skip(format!("{} flags {other} are not supported", call.name)),
        }
    }

    pub(super) fn sys_read(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        kind: SyscallKind,
    ) -> Result<Option<CallResult>, Stop> {
        // `recv(..., MSG_PEEK)` is the stack's `tcp_peek`; other flags skip.
        let peek = kind == SyscallKind::Recv
            && matches!(call.args.get(3), Some(Expr::Symbol(s)) if s == "MSG_PEEK");
        if kind == SyscallKind::Recv && !peek {
            Self::flags_arg(call)?;
        }
        let fd = Self::fd_num(pos, call)?;
        let len = Self::len_arg(pos, call)?;
        let nonblocking = self.fd_arg(pos, call)?.nonblocking;
        let op = PendingOp::Read {
            fd,
            len,
            peek,
            inq: None,
        };
        self.maybe_block(pos, call, window, op, nonblocking)
    }

    pub(super) fn sys_write(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        kind: SyscallKind,
    ) -> Result<Option<CallResult>, Stop> {
        // `send(..., flags)`: `MSG_MORE`, `MSG_EOR`, `MSG_ZEROCOPY`, ... (`send_flags`).
        let flags = if kind == SyscallKind::Send {
            send_flags(call, call.args.get(3))?
        } else {
            SendFlags::default()
        };
        let len = Self::len_arg(pos, call)?;
        self.write_op(pos, call, window, len, flags)
    }

    /// `sendto(fd, ..., len, flags, addr, addrlen)`: on a connected socket a `send` (the
    /// address is ignored, as Linux ignores it on a connected TCP socket); with
    /// `MSG_FASTOPEN` on a socket not connected yet, the stack's Fast Open open
    /// (`exec/fastopen.rs` has the rules). Flags: `MSG_FASTOPEN`, `MSG_DONTWAIT`,
    /// `MSG_NOSIGNAL`, `MSG_MORE` (by name or value); others skip.
    pub(super) fn sys_sendto(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        let mut flags = send_flags(call, call.args.get(3))?;
        flags.af_unspec = matches!(call.args.get(4), Some(Expr::Symbol(s)) if s == "AF_UNSPEC");
        let len = Self::len_arg(pos, call)?;
        self.write_op(pos, call, window, len, flags)
    }

    /// `sendmsg(fd, {msg_name(...)=..., msg_iov(N)=[{..., len}, ...], msg_flags=0}, flags)`:
    /// a write of the iovecs' total length (the executor's buffers carry no content the
    /// script checks, so the gather is one write). `flags` may be 0 or `MSG_MORE`; a
    /// `msg_name` (meaningless on a connected TCP socket), `msg_control`, or any other field or
    /// flag skips the script.
    pub(super) fn sys_sendmsg(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        if call.args.get(2).is_none() {
            return fail(pos, "sendmsg: missing flags argument");
        }
        let flags = send_flags(call, call.args.get(2))?;
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
        self.write_op(pos, call, window, len, flags)
    }

    /// `recvmsg(fd, {msg_name(...)=..., msg_iov(N)=[{..., len}, ...], msg_flags=0,
    /// msg_control=[{cmsg_level=SOL_TCP, cmsg_type=TCP_CM_INQ, cmsg_data=n}]}, 0)`: a read of
    /// the iovecs' total length; with `TCP_INQ` on, the `TCP_CM_INQ` control message is the
    /// stack's [`Stack::tcp_inq_hint`] after the read, checked against `n`. Other flags,
    /// fields or control messages skip the script.
    pub(super) fn sys_recvmsg(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
    ) -> Result<Option<CallResult>, Stop> {
        match call.args.get(2) {
            Some(Expr::Int(0)) => {}
            Some(Expr::Symbol(s)) if s == "MSG_ERRQUEUE" => {
                return self.sys_recvmsg_errqueue(pos, call).map(Some);
            }
            Some(other) => return skip(format!("recvmsg flags {other} are not supported")),
            None => return fail(pos, "recvmsg: missing flags argument"),
        }
        let Some(Expr::Struct(fields)) = call.args.get(1) else {
            return fail(pos, "recvmsg: second argument is not a struct msghdr");
        };
        let mut len = None;
        let mut inq = None;
        for f in fields {
            match (f.name.as_deref(), &f.value) {
                (Some("msg_name"), Expr::Ellipsis) | (Some("msg_flags"), Expr::Int(0)) => {}
                (Some("msg_iov"), Expr::List(iovs)) => {
                    len = Some(Self::iov_total_len(pos, f.param.as_ref(), iovs)?);
                }
                (Some("msg_control"), Expr::List(cmsgs)) => match cmsgs.as_slice() {
                    [] => {}
                    [Expr::Struct(c)] => {
                        inq = Some(Self::cm_inq(c).ok_or_else(|| {
                            Stop::Skip(format!(
                                "recvmsg: control message {} is not supported",
                                f.value
                            ))
                        })?)
                    }
                    _ => {
                        return skip(format!(
                            "recvmsg: control messages {} are not supported",
                            f.value
                        ));
                    }
                },
                (name, value) => {
                    return skip(format!(
                        "recvmsg: msghdr field {}={value} is not supported",
                        name.unwrap_or("(unnamed)")
                    ));
                }
            }
        }
        let Some(len) = len else {
            return fail(pos, "recvmsg: the msghdr has no msg_iov");
        };
        let fd = Self::fd_num(pos, call)?;
        let f = self.fd_arg(pos, call)?;
        let nonblocking = f.nonblocking;
        if inq.is_some() && !f.inq {
            return fail(
                pos,
                format!("{call}: a TCP_CM_INQ message is expected but TCP_INQ is off"),
            );
        }
        let op = PendingOp::Read {
            fd,
            len,
            peek: false,
            inq,
        };
        self.maybe_block(pos, call, window, op, nonblocking)
    }

    /// `{cmsg_level=SOL_TCP, cmsg_type=TCP_CM_INQ, cmsg_data=n}` → `n`.
    fn cm_inq(c: &[crate::ast::Field]) -> Option<i64> {
        let get = |name: &str| c.iter().find(|f| f.name.as_deref() == Some(name));
        match (
            get("cmsg_level").map(|f| &f.value),
            get("cmsg_type").map(|f| &f.value),
            get("cmsg_data").map(|f| &f.value),
        ) {
            (Some(Expr::Symbol(l)), Some(Expr::Symbol(t)), Some(Expr::Int(n)))
                if (l == "SOL_TCP" || l == "IPPROTO_TCP") && t == "TCP_CM_INQ" && c.len() == 3 =>
            {
                Some(*n)
            }
            _ => None,
        }
    }

    /// Total length of `[{..., len}, ...]`, whose element count must equal `msg_iov(N)`'s N.
    pub(super) fn iov_total_len(
        pos: Pos,
        count: Option<&Expr>,
        iovs: &[Expr],
    ) -> Result<usize, Stop> {
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

    /// A write of `len` bytes, blocking unless the fd is non-blocking or `MSG_DONTWAIT` is
    /// given; on a socket not connected yet or still opening, Linux's Fast Open and SYN-SENT
    /// rules (`fastopen_write`).
    pub(super) fn write_op(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        len: usize,
        flags: SendFlags,
    ) -> Result<Option<CallResult>, Stop> {
        let fd = Self::fd_num(pos, call)?;
        let nonblocking = self.fd_arg(pos, call)?.nonblocking || flags.dontwait;
        if let Some(r) = self.fastopen_write(pos, call, window, len, flags, nonblocking)? {
            return Ok(r);
        }
        let op = PendingOp::Write {
            fd,
            done: 0,
            len,
            flags: flags.stack(),
            connect_wait: false,
        };
        if nonblocking {
            return Ok(Some(match self.attempt(pos, call, op)? {
                Attempt::Done(r) => r,
                Attempt::Blocked(PendingOp::Write { done, .. }) if done > 0 => Ok(done as i64),
                Attempt::Blocked(_) => Err("EAGAIN"),
            }));
        }
        self.maybe_block(pos, call, window, op, false)
    }

    pub(super) fn sys_close(&mut self, pos: Pos, call: &SyscallLine) -> Result<CallResult, Stop> {
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

    pub(super) fn sys_shutdown(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
    ) -> Result<CallResult, Stop> {
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
}

enum Attempt {
    Done(CallResult),
    Blocked(PendingOp),
}

/// The flags of a send call the executor honours.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SendFlags {
    /// `MSG_FASTOPEN`.
    pub(super) fastopen: bool,
    /// `MSG_MORE`.
    pub(super) more: bool,
    /// `MSG_DONTWAIT`.
    pub(super) dontwait: bool,
    /// The destination address is `AF_UNSPEC` (`sendto` only).
    pub(super) af_unspec: bool,
    /// `MSG_EOR`.
    pub(super) eor: bool,
    /// `MSG_ZEROCOPY`.
    pub(super) zerocopy: bool,
}

impl SendFlags {
    /// The flags the stack's send takes.
    pub(super) fn stack(self) -> stack::SendFlags {
        stack::SendFlags {
            more: self.more,
            eor: self.eor,
            zerocopy: self.zerocopy,
            continues: false,
        }
    }
}

/// Linux's values of the send flags the executor knows.
const MSG_EOR: i64 = 0x80;
const MSG_DONTWAIT: i64 = 0x40;
const MSG_NOSIGNAL: i64 = 0x4000;
const MSG_MORE: i64 = 0x8000;
const MSG_ZEROCOPY: i64 = 0x400_0000;
const MSG_FASTOPEN: i64 = 0x2000_0000;

/// The send flags of `call` (`MSG_NOSIGNAL` has nothing to do: no signals here); any other
/// flag skips.
pub(super) fn send_flags(call: &SyscallLine, e: Option<&Expr>) -> Result<SendFlags, Stop> {
    let mut bits = 0i64;
    let mut add = |x: &Expr| -> bool {
        match x {
            Expr::Int(n) => bits |= *n,
            Expr::Symbol(s) => {
                bits |= match s.as_str() {
                    "MSG_DONTWAIT" => MSG_DONTWAIT,
                    "MSG_NOSIGNAL" => MSG_NOSIGNAL,
                    "MSG_MORE" => MSG_MORE,
                    "MSG_EOR" => MSG_EOR,
                    "MSG_ZEROCOPY" => MSG_ZEROCOPY,
                    "MSG_FASTOPEN" => MSG_FASTOPEN,
                    _ => return false,
                }
            }
            _ => return false,
        }
        true
    };
    let known = match e {
        None => true,
        Some(Expr::Or(v)) => v.iter().all(&mut add),
        Some(x) => add(x),
    };
    let allowed = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE | MSG_EOR | MSG_FASTOPEN | MSG_ZEROCOPY;
    if !known || bits & !allowed != 0 {
        let text = e.map(ToString::to_string).unwrap_or_default();
        return skip(format!("{} flags {text} are not supported", call.name));
    }
    Ok(SendFlags {
        fastopen: bits & MSG_FASTOPEN != 0,
        more: bits & MSG_MORE != 0,
        dontwait: bits & MSG_DONTWAIT != 0,
        af_unspec: false,
        eor: bits & MSG_EOR != 0,
        zerocopy: bits & MSG_ZEROCOPY != 0,
    })
}

pub(super) fn sockopt_name(call: &SyscallLine) -> String {
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

pub(super) fn expr_has_symbol(e: &Expr, sym: &str) -> bool {
    match e {
        Expr::Symbol(s) => s == sym,
        Expr::Or(v) => v.iter().any(|x| expr_has_symbol(x, sym)),
        _ => false,
    }
}

pub(super) fn errno_of(e: SocketError) -> &'static str {
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
        SocketError::NoBufferSpace => "ENOBUFS",
        SocketError::NotSupported => "EOPNOTSUPP",
    }
}

/// Writing after our FIN or after the connection closed is `EPIPE` on Linux.
pub(super) fn write_errno(e: SocketError) -> &'static str {
    match e {
        SocketError::Closed | SocketError::InvalidState | SocketError::Finished => "EPIPE",
        other => errno_of(other),
    }
}
