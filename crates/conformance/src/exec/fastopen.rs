//! TCP Fast Open in scripts: the sysctls (`tcp_fastopen`, `tcp_fastopen_key`,
//! `tcp_fastopen_blackhole_timeout_sec`, `tcp_fastopen_cookies`), the server socket options
//! (`TCP_FASTOPEN`, `TCP_FASTOPEN_KEY`) and the client's (`TCP_FASTOPEN_CONNECT`,
//! `sendto`/`sendmsg` with `MSG_FASTOPEN`) through the stack's own API, and the cookie names
//! Linux's packetdrill wrapper defines (`-D TFO_COOKIE=…`): `TFO_COOKIE` is the cookie of
//! the script's remote and local addresses under the key `common/defaults.sh` sets,
//! `TFO_COOKIE_ZERO` under the all-zero key — computed, not copied, so they follow
//! `--local_ip` / `--remote_ip`.
//!
//! Client calls, as Linux's `tcp_sendmsg_fastopen` and `__inet_stream_connect` answer them:
//! - `sendto(MSG_FASTOPEN)` on a socket not connected: `EOPNOTSUPP` with the client side
//!   off or an `AF_UNSPEC` address; else the stack's Fast Open open. Non-blocking it returns
//!   the bytes the SYN carries, `EINPROGRESS` when none; blocking, the rest is queued at
//!   once (it leaves with the handshake's ACK) and the call returns the whole length once
//!   the handshake completes, or the open's error;
//! - `connect` after `TCP_FASTOPEN_CONNECT`: the stack's deferred open; 0 when deferred,
//!   else an ordinary `connect` (its SYN asks for a cookie); the first write of a deferred
//!   open is treated as `sendto(MSG_FASTOPEN)`'s data; `connect` again is `EISCONN`;
//! - on a connection in SYN-SENT: `MSG_FASTOPEN` is `EALREADY`, a write `EAGAIN`
//!   (non-blocking) or queued until the handshake completes (blocking); after it,
//!   `MSG_FASTOPEN` is ignored.

use std::borrow::Cow;

use tcp::fastopen::{FastOpenConfig, FastOpenKey, FastOpenKeys};

use super::syscalls::{SendFlags, errno_of, write_errno};
use super::*;

/// The key `common/defaults.sh` writes to `net.ipv4.tcp_fastopen_key`, from which Linux's
/// wrapper derives `TFO_COOKIE`.
pub(super) const DEFAULTS_KEY_WORDS: [u32; 4] =
    [0xa1a1_a1a1, 0xb2b2_b2b2, 0xc3c3_c3c3, 0xd4d4_d4d4];

/// Fast Open state of a run that outlives a stack rebuild (`shell.rs` rebuilds the stack
/// when a sysctl changes before any socket exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FastOpenSettings {
    pub(super) cfg: FastOpenConfig,
    pub(super) keys: Option<FastOpenKeys>,
}

/// Decodes a C string literal's escapes (`\xHH`, `\\`, `\"`, `\n`, `\t`, `\0`).
fn c_string_bytes(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut it = s.bytes();
    while let Some(b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match it.next()? {
            b'x' => {
                let hi = char::from(it.next()?).to_digit(16)?;
                let lo = char::from(it.next()?).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
            }
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'0' => out.push(0),
            other => out.push(other),
        }
    }
    Some(out)
}

impl Exec {
    /// Applies the run's Fast Open settings to the (possibly rebuilt) stack.
    pub(super) fn fastopen_apply(&mut self) {
        self.stack.tcp_set_fastopen(self.fastopen.cfg);
        if let Some(keys) = self.fastopen.keys {
            self.stack.tcp_set_fastopen_keys(keys);
        }
    }

    /// A Fast Open sysctl: `Some` when `name` is one (applied at once: Linux reads them when
    /// a SYN arrives), `None` otherwise.
    pub(super) fn fastopen_sysctl(&mut self, name: &str, value: &str) -> Option<Result<(), Stop>> {
        match name {
            "tcp_fastopen" => {
                let v = value.trim();
                let bits = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => v.parse().ok(),
                };
                let Some(bits) = bits else {
                    return Some(skip(format!("sysctl tcp_fastopen={value} not understood")));
                };
                self.fastopen.cfg = self.fastopen.cfg.with_sysctl_bits(bits);
            }
            "tcp_fastopen_key" => {
                let mut parts = value.split(',');
                let primary = parts.next().and_then(FastOpenKey::parse_words);
                let backup = parts.next().map(FastOpenKey::parse_words);
                let (Some(primary), None | Some(Some(_)), None) = (primary, backup, parts.next())
                else {
                    return Some(skip(format!(
                        "sysctl tcp_fastopen_key={value} not understood"
                    )));
                };
                self.fastopen.keys = Some(FastOpenKeys {
                    primary,
                    backup: backup.flatten(),
                });
            }
            // Active Fast Open is never disabled after black-holed SYNs (the stack has no
            // such detection): the same as a timeout of 0.
            "tcp_fastopen_blackhole_timeout_sec" if value.trim_end_matches('\\') == "0" => {}
            // The client's cookie cache bound (0 empties it).
            "tcp_fastopen_cookies" => {
                let Ok(max) = value.trim().parse::<usize>() else {
                    return Some(skip(format!(
                        "sysctl tcp_fastopen_cookies={value} not understood"
                    )));
                };
                self.stack.tcp_set_fastopen_cache_servers_max(max);
            }
            _ => return None,
        }
        self.fastopen_apply();
        Some(Ok(()))
    }

    /// `TCP_FASTOPEN` (queue length) and `TCP_FASTOPEN_KEY` (16 bytes) on a listener, or on
    /// a socket not listening yet (applied by `listen`). `None` for other options.
    pub(super) fn fastopen_setsockopt(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        name: &str,
        value: Option<i64>,
    ) -> Result<Option<CallResult>, Stop> {
        if name == "TCP_FASTOPEN_CONNECT" {
            return self.fastopen_connect_option(pos, call, value).map(Some);
        }
        let opt = match (name, value) {
            ("TCP_FASTOPEN", Some(v)) => match u32::try_from(v) {
                Ok(v) => SocketOption::FastOpenQueue(v),
                Err(_) => return Ok(Some(Err("EINVAL"))),
            },
            ("TCP_FASTOPEN_KEY", _) => {
                let len = match call.args.get(4) {
                    Some(Expr::Int(n)) => *n,
                    _ => return skip(format!("{call}: key length not understood")),
                };
                let bytes = match call.args.get(3) {
                    Some(Expr::Str(s)) => c_string_bytes(s),
                    _ => None,
                };
                let Some(bytes) = bytes else {
                    return skip(format!("{call}: key not understood"));
                };
                // Linux takes a 16-byte key (32: a primary and a backup).
                let key = match (len, bytes.get(..16)) {
                    (16, Some(k)) => {
                        let mut key = [0u8; 16];
                        key.copy_from_slice(k);
                        key
                    }
                    (32, _) => return skip(format!("{call}: a backup key per listener")),
                    _ => return Ok(Some(Err("EINVAL"))),
                };
                SocketOption::FastOpenKey(key)
            }
            _ => return Ok(None),
        };
        let fd = self.fd_arg(pos, call)?;
        match fd.kind {
            FdKind::Fresh => {
                fd.fastopen.push(opt);
                Ok(Some(Ok(0)))
            }
            FdKind::Listener(h) => Ok(Some(
                self.stack.set_option(h, opt).map(|()| 0).map_err(errno_of),
            )),
            // Linux accepts the options on any TCP socket; they only act on a listener.
            FdKind::Conn(_) => Ok(Some(Ok(0))),
        }
    }

    /// `TCP_FASTOPEN_CONNECT` (Linux `do_tcp_setsockopt`): 0 or 1, on a socket not
    /// connected yet, with the client side on (`EOPNOTSUPP` otherwise).
    fn fastopen_connect_option(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        value: Option<i64>,
    ) -> Result<CallResult, Stop> {
        let client = self.stack.tcp_fastopen().client;
        let fd = self.fd_arg(pos, call)?;
        Ok(match value {
            Some(v @ (0 | 1)) if client => {
                if fd.kind == FdKind::Fresh {
                    fd.fastopen_connect = v == 1;
                    Ok(0)
                } else {
                    Err("EINVAL")
                }
            }
            Some(0 | 1) => Err("EOPNOTSUPP"),
            _ => Err("EINVAL"),
        })
    }

    /// The client side of a write (see the module documentation): `None` when the write is
    /// an ordinary one on a connected socket.
    pub(super) fn fastopen_write(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        window: Window,
        len: usize,
        flags: SendFlags,
        nonblocking: bool,
    ) -> Result<Option<Option<CallResult>>, Stop> {
        let fd = Self::fd_num(pos, call)?;
        let f = self.fd_arg(pos, call)?;
        let (kind, opts) = (f.kind, Self::fresh_options(f));
        // Zeros: the executor's buffers carry nothing the script checks. A SYN carries at
        // most an MSS, so a bounded slice is enough.
        let zeros = vec![0u8; len.min(64 * 1024)];
        let (h, taken) = match kind {
            FdKind::Fresh => {
                if !flags.fastopen {
                    // Linux `tcp_sendmsg_locked` → `sk_stream_wait_connect` in CLOSE.
                    return Ok(Some(Some(Err("EPIPE"))));
                }
                if flags.af_unspec || !self.stack.tcp_fastopen().client {
                    return Ok(Some(Some(Err("EOPNOTSUPP"))));
                }
                let remote = SocketAddr::new(self.addrs.remote(), SERVER_PORT);
                match self.stack.tcp_connect_fastopen_with(
                    self.now_ns,
                    remote,
                    0,
                    &opts,
                    &zeros,
                    flags.stack(),
                ) {
                    Ok((h, n)) => {
                        self.opened(pos, call, h)?;
                        (h, n)
                    }
                    Err(e) => return Ok(Some(Some(Err(errno_of(e))))),
                }
            }
            FdKind::Conn(h) if self.stack.tcp_is_deferred(h) => {
                // The first write of a deferred open: the SYN carries it.
                match self.stack.tcp_send_with(h, &zeros, flags.stack()) {
                    Ok(n) => (h, n),
                    Err(e) => return Ok(Some(Some(Err(self.write_errno_of(fd, e))))),
                }
            }
            FdKind::Conn(h) if self.stack.tcp_state(h) == Some(tcp::State::SynSent) => {
                if flags.fastopen {
                    return Ok(Some(Some(Err("EALREADY"))));
                }
                if nonblocking {
                    return Ok(Some(Some(Err("EAGAIN"))));
                }
                (h, 0)
            }
            _ => return Ok(None),
        };
        let _ = h;
        if nonblocking {
            return Ok(Some(Some(if taken > 0 {
                Ok(taken as i64)
            } else {
                Err("EINPROGRESS")
            })));
        }
        let op = PendingOp::Write {
            fd,
            done: taken,
            len,
            flags: flags.stack(),
            connect_wait: true,
        };
        self.maybe_block(pos, call, window, op, false).map(Some)
    }

    /// The options set on a socket before it had a stack handle, for its open.
    pub(super) fn fresh_options(f: &Fd) -> Vec<SocketOption> {
        let mut opts = Vec::new();
        if let Some(v) = f.nodelay {
            opts.push(SocketOption::NoDelay(v));
        }
        if let Some(v) = f.maxseg {
            opts.push(SocketOption::MaxSegment(v));
        }
        if let Some(v) = f.syn_retries {
            opts.push(SocketOption::SynRetries(v));
        }
        opts.extend_from_slice(&f.sock_opts);
        opts
    }

    /// Socket `call`'s fd now names the active open `h`: keepalive set before applies, and
    /// the script's packets go to the server port.
    pub(super) fn opened(
        &mut self,
        pos: Pos,
        call: &SyscallLine,
        h: SocketHandle,
    ) -> Result<(), Stop> {
        let now = self.now_ns;
        let f = self.fd_arg(pos, call)?;
        f.kind = FdKind::Conn(h);
        f.opening = true;
        let sndbuf = f.sndbuf.take();
        let keepalive = f.keepalive.on.then_some(f.keepalive.cfg);
        if keepalive.is_some() {
            let _ = self.stack.tcp_set_keepalive(now, h, keepalive);
        }
        if let Some(v) = sndbuf {
            let _ = self.apply_sndbuf(h, v)?;
        }
        self.remote_port = SERVER_PORT;
        self.local_port = None;
        Ok(())
    }

    /// Why the open of fd `fd` (`h`) failed, as Linux reports it: a hard ICMP error, else
    /// `ECONNREFUSED` for a reset answering the SYN, `ETIMEDOUT`, or `ECONNRESET` for a
    /// reset after the handshake.
    pub(super) fn open_errno(&mut self, fd: i64, h: SocketHandle) -> &'static str {
        if let Some(e) = self.stack.take_error(h).ok().flatten() {
            // The stack reports a reset once, to whichever call meets it first: here too, a
            // reset answering the SYN is `ECONNREFUSED`.
            let opening = self.fds.get(&fd).is_some_and(|f| f.opening);
            return match e {
                SocketError::Reset if opening => "ECONNREFUSED",
                other => errno_of(other),
            };
        }
        match self.stack.tcp_peek(h, &mut [0u8; 1]) {
            Err(e) => self.write_errno_of(fd, e),
            Ok(_) => "ECONNREFUSED",
        }
    }

    /// A write's errno for the stack's error `e` on fd `fd`: a reset answering an active
    /// open's SYN is Linux's `ECONNREFUSED`.
    pub(super) fn write_errno_of(&self, fd: i64, e: SocketError) -> &'static str {
        let opening = self.fds.get(&fd).is_some_and(|f| f.opening);
        match e {
            SocketError::Reset if opening => "ECONNREFUSED",
            other => write_errno(other),
        }
    }

    /// Records which active opens are synchronized by now (after each inbound packet).
    pub(super) fn note_synchronized(&mut self) {
        for f in self.fds.values_mut() {
            if let FdKind::Conn(h) = f.kind
                && f.opening
                && self.stack.tcp_state(h).is_some_and(|s| s.is_synchronized())
            {
                f.opening = false;
            }
        }
    }

    /// The cookie a name stands for, for this run's addresses.
    fn fastopen_named_cookie(&self, name: &str) -> Option<[u8; tcp::fastopen::COOKIE_LEN]> {
        let key = match name {
            "TFO_COOKIE" => FastOpenKey::from_words(DEFAULTS_KEY_WORDS),
            "TFO_COOKIE_ZERO" => FastOpenKey::from_words([0; 4]),
            _ => return None,
        };
        Some(key.cookie(self.addrs.remote(), self.addrs.local()))
    }

    /// `line` with every named Fast Open cookie replaced by its bytes; a name the executor
    /// does not define skips the script.
    pub(super) fn fastopen_resolve<'l>(&self, line: &'l TcpLine) -> Result<Cow<'l, TcpLine>, Stop> {
        let TcpOptionsSpec::List(list) = &line.options else {
            return Ok(Cow::Borrowed(line));
        };
        if !list
            .iter()
            .any(|o| matches!(o, TcpOption::FastOpenNamed { .. }))
        {
            return Ok(Cow::Borrowed(line));
        }
        let mut resolved = Vec::with_capacity(list.len());
        for o in list {
            resolved.push(match o {
                TcpOption::FastOpenNamed { experimental, name } => {
                    let Some(cookie) = self.fastopen_named_cookie(name) else {
                        return skip(format!("Fast Open cookie name {name} is not defined"));
                    };
                    if *experimental {
                        TcpOption::FastOpenExp(cookie.to_vec())
                    } else {
                        TcpOption::FastOpen(cookie.to_vec())
                    }
                }
                other => other.clone(),
            });
        }
        Ok(Cow::Owned(TcpLine {
            options: TcpOptionsSpec::List(resolved),
            ..line.clone()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_string_escapes_decode_to_bytes() {
        assert_eq!(
            c_string_bytes(r"\xf7\x63a\\\0").unwrap(),
            vec![0xf7, 0x63, b'a', b'\\', 0]
        );
        assert!(c_string_bytes(r"\x4").is_none());
        assert!(c_string_bytes("\\").is_none());
    }
}
