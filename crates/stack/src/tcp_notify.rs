//! A TCP socket's options and notifications beyond the TCB, Linux's semantics taken as the
//! facts (`Documentation/networking/msg_zerocopy.rst`, `timestamping.rst`, tcp(7)):
//!
//! - **`SO_ZEROCOPY` / `MSG_ZEROCOPY`.** The stack's API takes a slice, so it always copies;
//!   a zero-copy send is one that asks to be told when the stack is done with the caller's
//!   buffer. Each such send that queues at least one byte takes the next 32-bit ID (a send
//!   that queues nothing takes none, as Linux's `net_zcopy_put_abort`); once every byte of it
//!   is acknowledged, a [`Notification::ZeroCopy`] for the range of IDs becomes readable on the
//!   socket's error queue, marked `copied` (Linux `SO_EE_CODE_ZEROCOPY_COPIED`, what it reports
//!   when it fell back to copying). A notification whose range continues the one at the tail
//!   of the queue joins it (Linux `skb_zerocopy_notify_extend`). Without `SO_ZEROCOPY` the
//!   flag is ignored.
//! - **`SO_TIMESTAMPING` (transmit).** Each send with timestamping on records its last byte;
//!   when that byte first leaves, `Scheduled` and `Sent` timestamps are queued (the stack has no
//!   qdisc or driver between, so both carry the departure time), and `Acked` when the peer
//!   acknowledges it, all with times from the stack's clock. With `opt_id` the key is the
//!   byte's offset from SND.UNA when the option was turned on (Linux `sk_tskey`).
//! - **The error queue** ([`crate::Stack::tcp_recv_notification`], Linux `MSG_ERRQUEUE`):
//!   bounded by [`ERRQUEUE_NOTIFICATIONS_MAX`]; a notification that does not fit is dropped
//!   and counted (`tcp_errqueue_dropped`). The socket is [`Readiness::ERROR_QUEUE`] while it
//!   holds any, and each new notification is an edge of it (Linux `sk_error_report`).
//! - **`TCP_NOTSENT_LOWAT`** (and the stack's default,
//!   [`crate::StackConfig::tcp_notsent_lowat_bytes`], Linux `net.ipv4.tcp_notsent_lowat`): a
//!   send queues bytes only while fewer than the mark are unsent, and never beyond it; the
//!   socket is writable only while twice the unsent bytes are below it (Linux
//!   `tcp_stream_memory_free` with `wake`, so that a wake-up finds room for a useful write).
//! - **`SO_MARK`**: stored and reported; it does not change routing (the stack has one route).
//!
//! The state lives beside the TCB in the socket (`ConnSock::ext`), boxed on first use: most
//! connections never set any of these. Listeners keep the options (`SockOpts`) and their
//! children inherit them, as Linux's `sk_clone_lock` copies them. Not carried when a
//! connection moves to another owner.

use std::collections::VecDeque;

mod ext_codec;

use crate::socket::{Readiness, SocketError, SocketHandle, SocketOption};
use crate::stack::Stack;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{ConnSock, TcpState};

/// The ECN field of the IPv4 TOS byte (RFC 3168 §5).
const ECN_BITS: u8 = 0b11;

/// Notifications a socket's error queue holds at most.
pub const ERRQUEUE_NOTIFICATIONS_MAX: usize = 64;
/// Zero-copy sends not yet acknowledged a connection keeps at most; a zero-copy send beyond
/// them is refused with [`SocketError::NoBufferSpace`] (Linux `ENOBUFS` when it cannot
/// allocate the notification).
pub const ZEROCOPY_SENDS_OUTSTANDING_MAX: usize = 1024;
/// Timestamped sends not yet fully reported a connection keeps at most (more are sent
/// without timestamps, counted `tcp_tx_timestamps_dropped`).
pub const TIMESTAMPED_SENDS_OUTSTANDING_MAX: usize = 1024;

/// The flags of a TCP send call ([`crate::Stack::tcp_send_with`]; Linux `send(2)` flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// `MSG_MORE`: full segments go, a partial tail waits for a later send.
    pub more: bool,
    /// `MSG_EOR`: these bytes end a record; no segment carries bytes of the next one
    /// (`tcp::Connection::send_record`). A record write only partly queued stays open. With
    /// `more` too, the record end wins: nothing is held.
    pub eor: bool,
    /// `MSG_ZEROCOPY`: report on the error queue when the stack is done with the bytes
    /// (only with [`SocketOption::ZeroCopy`] on; see the module documentation).
    pub zerocopy: bool,
    /// These bytes continue the previous send call: one application call the caller hands
    /// over in pieces (a blocking write resumed as room frees). A zero-copy send keeps the
    /// previous piece's ID, and a transmit timestamp moves to the new last byte.
    pub continues: bool,
}

/// When a transmit timestamp was taken (Linux `SCM_TSTAMP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxTimestampKind {
    /// Handed to the transmit path (Linux `SCM_TSTAMP_SCHED`, at the qdisc).
    Scheduled,
    /// Left the stack (Linux `SCM_TSTAMP_SND`, the driver's software timestamp).
    Sent,
    /// Acknowledged by the peer (Linux `SCM_TSTAMP_ACK`).
    Acked,
}

/// What `SO_TIMESTAMPING` asks for on transmit (Linux `SOF_TIMESTAMPING_TX_SCHED`,
/// `TX_SOFTWARE`, `TX_ACK`, `OPT_ID`, `OPT_TSONLY`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxTimestamping {
    pub scheduled: bool,
    pub sent: bool,
    pub acked: bool,
    /// Keys count bytes from SND.UNA when it was turned on (else every key is 0).
    pub opt_id: bool,
    /// The reader wants the timestamp alone, no copy of the packet (the stack never keeps
    /// one; stored and reported for the reader).
    pub ts_only: bool,
}

impl TxTimestamping {
    fn any(self) -> bool {
        self.scheduled || self.sent || self.acked
    }
}

/// One entry of a socket's error queue ([`crate::Stack::tcp_recv_notification`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notification {
    /// The zero-copy sends `first_id..=last_id` are done with; `copied`: their bytes were
    /// copied (always, here; Linux `SO_EE_CODE_ZEROCOPY_COPIED`).
    ZeroCopy {
        first_id: u32,
        last_id: u32,
        copied: bool,
    },
    /// A transmit timestamp of a send's last byte (`key`, see [`TxTimestamping::opt_id`]) at
    /// `at_ns` on the stack's clock.
    TxTimestamp {
        kind: TxTimestampKind,
        key: u32,
        at_ns: u64,
    },
}

/// `IP_MTU_DISCOVER` (Linux ip(7)): DF on outbound segments, and whether path MTU errors
/// are acted on (Linux `tcp_v4_mtu_reduced`: not with `Dont`, and `ip_sk_accept_pmtu` not
/// with `Probe`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PathMtuDiscovery {
    /// `IP_PMTUDISC_WANT`, the default: DF set, errors lower the MSS.
    #[default]
    Want,
    /// `IP_PMTUDISC_DONT`: no DF, errors ignored (routers may fragment).
    Dont,
    /// `IP_PMTUDISC_DO`: DF set, errors lower the MSS.
    Do,
    /// `IP_PMTUDISC_PROBE`: DF set, errors ignored.
    Probe,
}

impl PathMtuDiscovery {
    /// Whether outbound IPv4 segments carry DF.
    pub fn dont_fragment(self) -> bool {
        self != PathMtuDiscovery::Dont
    }

    /// Whether an ICMP "fragmentation needed" / "packet too big" lowers the MSS.
    pub fn accepts_path_mtu(self) -> bool {
        matches!(self, PathMtuDiscovery::Want | PathMtuDiscovery::Do)
    }
}

/// The socket-level options of this module, as a listener keeps them for its children.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SockOpts {
    pub(crate) zerocopy: bool,
    pub(crate) mark: u32,
    /// `TCP_NOTSENT_LOWAT` in bytes; 0: the stack's default.
    pub(crate) notsent_lowat_bytes: u32,
    pub(crate) tx_timestamping: TxTimestamping,
    /// `IP_TOS` with its ECN bits cleared (TCP sets them).
    pub(crate) tos: u8,
    pub(crate) pmtu: PathMtuDiscovery,
}

/// A zero-copy send not yet acknowledged: its IDs and the stream offset its bytes end at.
#[derive(Debug, Clone, Copy)]
struct ZeroCopySend {
    end: u64,
    first_id: u32,
    last_id: u32,
}

/// A timestamped send: the stream offset of its last byte, and whether its departure was
/// reported.
#[derive(Debug, Clone, Copy)]
struct TimestampedSend {
    last_byte: u64,
    departed: bool,
}

/// A connection's state for this module.
///
/// Stream offsets count bytes written since the box was made, from the first byte then
/// unacknowledged: `written` is the end of the data written, so the data acknowledged ends
/// at `written − send_queue_bytes` and the data sent at `written − unsent_bytes`.
/// Invariants: `zc_pending` and `ts_pending` are in offset order and within their bounds;
/// `errqueue.len() ≤ ERRQUEUE_NOTIFICATIONS_MAX`.
#[derive(Debug)]
pub(crate) struct SockExt {
    pub(crate) opts: SockOpts,
    written: u64,
    zc_next_id: u32,
    zc_pending: VecDeque<ZeroCopySend>,
    ts_key_base: u64,
    ts_pending: VecDeque<TimestampedSend>,
    errqueue: VecDeque<Notification>,
}

impl SockExt {
    /// A new extension for a connection holding `send_queue_bytes` unacknowledged bytes.
    pub(crate) fn new(opts: SockOpts, send_queue_bytes: usize) -> SockExt {
        SockExt {
            opts,
            written: send_queue_bytes as u64,
            zc_next_id: 0,
            zc_pending: VecDeque::new(),
            ts_key_base: 0,
            ts_pending: VecDeque::new(),
            errqueue: VecDeque::new(),
        }
    }

    /// Whether the error queue holds a notification.
    pub(crate) fn has_queued(&self) -> bool {
        !self.errqueue.is_empty()
    }

    /// Whether a zero-copy send with `flags` may take a new ID now.
    fn zerocopy_admits(&self, flags: SendFlags) -> bool {
        !self.zerocopy_tracks(flags)
            || flags.continues
            || self.zc_pending.len() < ZEROCOPY_SENDS_OUTSTANDING_MAX
    }

    fn zerocopy_tracks(&self, flags: SendFlags) -> bool {
        flags.zerocopy && self.opts.zerocopy
    }

    /// Records a send that queued `n` bytes. False when a timestamp could not be recorded.
    fn after_send(&mut self, n: usize, flags: SendFlags) -> bool {
        if n == 0 {
            return true;
        }
        let before = self.written;
        self.written += n as u64;
        if self.zerocopy_tracks(flags) {
            match self.zc_pending.back_mut() {
                Some(z) if flags.continues && z.end == before => z.end = self.written,
                _ => {
                    let id = self.zc_next_id;
                    self.zc_next_id = id.wrapping_add(1);
                    self.zc_pending.push_back(ZeroCopySend {
                        end: self.written,
                        first_id: id,
                        last_id: id,
                    });
                }
            }
        }
        if !self.opts.tx_timestamping.any() {
            return true;
        }
        let last_byte = self.written - 1;
        let full = self.ts_pending.len() >= TIMESTAMPED_SENDS_OUTSTANDING_MAX;
        match self.ts_pending.back_mut() {
            Some(t) if flags.continues && !t.departed && t.last_byte + 1 == before => {
                t.last_byte = last_byte;
                true
            }
            _ if full => false,
            _ => {
                self.ts_pending.push_back(TimestampedSend {
                    last_byte,
                    departed: false,
                });
                true
            }
        }
    }

    fn ts_key(&self, last_byte: u64) -> u32 {
        if self.opts.tx_timestamping.opt_id {
            last_byte.wrapping_sub(self.ts_key_base) as u32
        } else {
            0
        }
    }

    /// Queues the notifications progress made due: departures up to `unsent_bytes` from the
    /// end (at `sent_ns`), acknowledgments up to `send_queue_bytes` from the end (at
    /// `acked_ns`). Returns (notifications queued, notifications dropped for a full queue).
    fn progress(
        &mut self,
        send_queue_bytes: usize,
        unsent_bytes: usize,
        sent_ns: u64,
        acked_ns: u64,
    ) -> (u32, u32) {
        let acked = self.written.saturating_sub(send_queue_bytes as u64);
        let sent = self.written.saturating_sub(unsent_bytes as u64);
        let mut out = (0, 0);
        let ts = self.opts.tx_timestamping;
        let mut i = 0;
        while let Some(&t) = self.ts_pending.get(i) {
            if t.last_byte >= sent {
                break;
            }
            let key = self.ts_key(t.last_byte);
            if !t.departed {
                let at_ns = if t.last_byte < acked {
                    acked_ns
                } else {
                    sent_ns
                };
                for (on, kind) in [
                    (ts.scheduled, TxTimestampKind::Scheduled),
                    (ts.sent, TxTimestampKind::Sent),
                ] {
                    if on {
                        self.push(TxTimestampNotification(kind, key, at_ns).into(), &mut out);
                    }
                }
                if let Some(p) = self.ts_pending.get_mut(i) {
                    p.departed = true;
                }
            }
            if t.last_byte < acked || !ts.acked {
                if t.last_byte < acked && ts.acked {
                    self.push(
                        TxTimestampNotification(TxTimestampKind::Acked, key, acked_ns).into(),
                        &mut out,
                    );
                }
                self.ts_pending.remove(i);
            } else {
                i += 1;
            }
        }
        while let Some(&z) = self.zc_pending.front() {
            if z.end > acked {
                break;
            }
            self.zc_pending.pop_front();
            self.push(
                Notification::ZeroCopy {
                    first_id: z.first_id,
                    last_id: z.last_id,
                    copied: true,
                },
                &mut out,
            );
        }
        out
    }

    /// Appends `n` to the error queue, joining a zero-copy range it continues.
    fn push(&mut self, n: Notification, out: &mut (u32, u32)) {
        if let (
            Some(Notification::ZeroCopy {
                first_id: lo,
                last_id: hi,
                copied,
            }),
            Notification::ZeroCopy {
                first_id,
                last_id,
                copied: now_copied,
            },
        ) = (self.errqueue.back_mut(), n)
        {
            let len =
                u64::from(hi.wrapping_sub(*lo)) + 1 + u64::from(last_id.wrapping_sub(first_id)) + 1;
            if first_id == hi.wrapping_add(1) && len < (1 << 32) {
                *hi = last_id;
                *copied |= now_copied;
                out.0 += 1;
                return;
            }
        }
        if self.errqueue.len() >= ERRQUEUE_NOTIFICATIONS_MAX {
            out.1 += 1;
            return;
        }
        self.errqueue.push_back(n);
        out.0 += 1;
    }
}

/// A timestamp notification, built in one place.
struct TxTimestampNotification(TxTimestampKind, u32, u64);

impl From<TxTimestampNotification> for Notification {
    fn from(t: TxTimestampNotification) -> Notification {
        Notification::TxTimestamp {
            kind: t.0,
            key: t.1,
            at_ns: t.2,
        }
    }
}

impl ConnSock {
    /// This module's state, made on first use.
    pub(crate) fn ext_mut(&mut self) -> &mut SockExt {
        let sq = self.conn.send_queue_bytes();
        self.ext_or_insert_with(|| Box::new(SockExt::new(SockOpts::default(), sq)))
    }

    /// The socket's options of this module.
    pub(crate) fn sock_opts(&self) -> SockOpts {
        self.ext().map(|e| e.opts).unwrap_or_default()
    }

    /// Whether the socket reports itself writable under the notsent mark in force (its own,
    /// else `default_lowat`): room in the send buffer (`tcp::Connection::send_writable`:
    /// under skb accounting Linux's rule) and twice its unsent bytes below the mark.
    pub(crate) fn notsent_writable(&self, default_lowat: u32) -> bool {
        let lowat = effective_lowat(self.sock_opts().notsent_lowat_bytes, default_lowat);
        self.conn.send_writable(lowat)
    }

    /// Whether the error queue holds a notification.
    pub(crate) fn has_notifications(&self) -> bool {
        self.ext().is_some_and(|e| e.has_queued())
    }
}

/// The mark in force: the socket's, else the stack's default (`u32::MAX`: no mark).
fn effective_lowat(socket: u32, default: u32) -> u32 {
    if socket == 0 { default } else { socket }
}

impl Stack {
    /// A send with `flags` (`MSG_MORE`, `MSG_EOR`, `MSG_ZEROCOPY`; see [`SendFlags`]), as
    /// [`Stack::tcp_send`] otherwise. With a notsent mark in force (`TCP_NOTSENT_LOWAT`)
    /// only the bytes that keep the unsent ones within it are taken (`WouldBlock` when none).
    /// `NoBufferSpace` when a zero-copy send finds [`ZEROCOPY_SENDS_OUTSTANDING_MAX`] sends
    /// outstanding.
    pub fn tcp_send_with(
        &mut self,
        h: SocketHandle,
        data: &[u8],
        flags: SendFlags,
    ) -> Result<usize, SocketError> {
        self.tcp_cx().tcp_send_flagged(h, data, flags)
    }

    /// Takes the oldest notification of a connection's error queue (`recvmsg(MSG_ERRQUEUE)`):
    /// zero-copy completions and transmit timestamps. `WouldBlock` when it is empty (Linux
    /// `EAGAIN`, blocking or not).
    pub fn tcp_recv_notification(&mut self, h: SocketHandle) -> Result<Notification, SocketError> {
        let mut cx = self.tcp_cx();
        let (_, c) = cx.conn_for(h)?;
        c.ext_if_any_mut()
            .and_then(|e| e.errqueue.pop_front())
            .ok_or(SocketError::WouldBlock)
    }

    /// A TCP socket's `SO_ZEROCOPY`, `SO_MARK`, `TCP_NOTSENT_LOWAT` (0: the stack's default)
    /// and `SO_TIMESTAMPING` transmit settings, as set.
    pub fn tcp_socket_options(&self, h: SocketHandle) -> Result<SocketOptions, SocketError> {
        let (_, sockets) = self.tcp_view();
        let i = sockets.index(h)?;
        let o = match sockets.get(i) {
            Some(crate::sockets::Socket::Tcp(TcpState::Listener(l))) => l.sock_opts,
            Some(crate::sockets::Socket::Tcp(TcpState::Conn(c))) => c.sock_opts(),
            _ => return Err(SocketError::WrongSocketType),
        };
        Ok(SocketOptions {
            zerocopy: o.zerocopy,
            mark: o.mark,
            notsent_lowat_bytes: o.notsent_lowat_bytes,
            tx_timestamping: o.tx_timestamping,
            tos: o.tos,
            path_mtu_discovery: o.pmtu,
        })
    }
}

/// What [`Stack::tcp_socket_options`] reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketOptions {
    pub zerocopy: bool,
    pub mark: u32,
    pub notsent_lowat_bytes: u32,
    pub tx_timestamping: TxTimestamping,
    /// `IP_TOS` as kept: the ECN bits cleared.
    pub tos: u8,
    pub path_mtu_discovery: PathMtuDiscovery,
}

impl TcpCx<'_> {
    /// The options of this module on the TCP socket in slot `i`; `None` for other options.
    pub(crate) fn notify_option(
        &mut self,
        i: usize,
        opt: SocketOption,
    ) -> Option<Result<(), SocketError>> {
        let default_lowat = self.cfg.tcp_notsent_lowat_bytes;
        if !matches!(
            opt,
            SocketOption::ZeroCopy(_)
                | SocketOption::Mark(_)
                | SocketOption::NotSentLowat(_)
                | SocketOption::TxTimestamping(_)
                | SocketOption::IpTos(_)
                | SocketOption::PathMtuDiscovery(_)
        ) {
            return None;
        }
        let apply = |o: &mut SockOpts| match opt {
            SocketOption::ZeroCopy(v) => o.zerocopy = v,
            SocketOption::Mark(v) => o.mark = v,
            SocketOption::NotSentLowat(v) => o.notsent_lowat_bytes = v,
            SocketOption::TxTimestamping(v) => o.tx_timestamping = v,
            SocketOption::IpTos(v) => o.tos = v & !ECN_BITS,
            SocketOption::PathMtuDiscovery(v) => o.pmtu = v,
            _ => {}
        };
        if let Some(l) = self.listener_mut(i) {
            if matches!(opt, SocketOption::TxTimestamping(t) if t.opt_id) {
                // Linux: keys count from SND.UNA, which a listener has not.
                return Some(Err(SocketError::InvalidState));
            }
            apply(&mut l.sock_opts);
            return Some(Ok(()));
        }
        let c = match self.conn_mut(i) {
            Some(c) => c,
            None => return Some(Err(SocketError::WrongSocketType)),
        };
        let sq = c.conn.send_queue_bytes() as u64;
        let e = c.ext_mut();
        let opt_id_before = e.opts.tx_timestamping.opt_id;
        apply(&mut e.opts);
        let socket_lowat = e.opts.notsent_lowat_bytes;
        if let SocketOption::TxTimestamping(t) = opt
            && t.opt_id
            && !opt_id_before
        {
            // Linux `sk_tskey = snd_una`: keys count from the first byte unacknowledged.
            e.ts_key_base = e.written.saturating_sub(sq);
        }
        c.conn
            .set_notsent_lowat(effective_lowat(socket_lowat, default_lowat));
        // A lower or higher mark may change writability.
        self.tcp.dirty.insert(i);
        self.tcp_after_input(i);
        Some(Ok(()))
    }

    /// A send, with `flags` (see [`Stack::tcp_send_with`]): the bypass socket of an
    /// offloaded connection, the `tcp_mem` allowance, the notsent mark, a deferred Fast
    /// Open's first send (the SYN carries it), else the connection's send buffer. An error
    /// is reported once.
    pub(crate) fn tcp_send_flagged(
        &mut self,
        h: SocketHandle,
        data: &[u8],
        flags: SendFlags,
    ) -> Result<usize, SocketError> {
        self.prefetch_handle(h);
        if let Some(r) = self.bypass_send(h, data, flags.more) {
            return r;
        }
        let default_lowat = self.cfg.tcp_notsent_lowat_bytes;
        // In the high memory state only what the budget allows (`tcp_mem`).
        let mut allowed = if self.tcp.mem_state == crate::tcp_mem::MemState::High {
            let (i, _) = self.conn_for(h)?;
            self.tcp_mem_send_allowance(i, data.len())
        } else {
            data.len()
        };
        let (i, c) = self.conn_for(h)?;
        if let Some(e) = c.ext()
            && !e.zerocopy_admits(flags)
        {
            return Err(SocketError::NoBufferSpace);
        }
        let lowat = effective_lowat(c.sock_opts().notsent_lowat_bytes, default_lowat);
        if c.conn.config().send_buffer_skb_accounting {
            // Linux checks the mark only where a write starts a new skb (`tcp::Connection`).
            c.conn.set_notsent_lowat(lowat);
        } else if lowat != u32::MAX {
            allowed = allowed.min((lowat as usize).saturating_sub(c.conn.notsent_bytes()));
        }
        let allowed = data.get(..allowed).unwrap_or(data);
        let n = if c.fastopen_deferred() {
            let r = self.fastopen_client_first_send(i, h, allowed);
            if let Some(Ok(n)) = r {
                self.tcp_after_send(i, n, flags);
            }
            self.tcp_after_input(i);
            r.unwrap_or(Err(SocketError::InvalidState))?
        } else {
            let sent = if flags.eor {
                c.conn.send_record(allowed)
            } else if flags.more {
                c.conn.send_more(allowed)
            } else {
                c.conn.send(allowed)
            };
            let n = sent.map_err(|e| {
                c.report_once(crate::tcp_sockets::map_tcp_error(e), SocketError::Closed)
            })?;
            self.tcp_after_send(i, n, flags);
            self.tcp_after_input(i);
            n
        };
        if n == 0 && !data.is_empty() {
            return Err(SocketError::WouldBlock);
        }
        Ok(n)
    }

    /// Records `n` bytes a send with `flags` queued on connection `i`.
    pub(crate) fn tcp_after_send(&mut self, i: usize, n: usize, flags: SendFlags) {
        let Some(e) = self.conn_mut(i).and_then(|c| c.ext_if_any_mut()) else {
            return;
        };
        if !e.after_send(n, flags) {
            self.tcp.counters.tcp_tx_timestamps_dropped += 1;
        }
    }

    /// Queues the notifications connection `i`'s progress made due (see
    /// [`SockExt::progress`]): departures at `now_ns`, acknowledgments at the time the last
    /// segment arrived. Returns whether any was queued.
    pub(crate) fn tcp_notify_progress(&mut self, i: usize, now_ns: Option<u64>) -> bool {
        let Some(c) = self.conn_mut(i) else {
            return false;
        };
        let (sq, unsent, acked_ns) = (
            c.conn.send_queue_bytes(),
            c.conn.notsent_bytes(),
            c.last_rx_ns,
        );
        let Some(e) = c.ext_if_any_mut() else {
            return false;
        };
        let (queued, dropped) = e.progress(sq, unsent, now_ns.unwrap_or(acked_ns), acked_ns);
        self.tcp.counters.tcp_errqueue_dropped += u64::from(dropped);
        queued > 0
    }

    /// After connection `i`'s output at `now`: departures may be due.
    pub(crate) fn tcp_notify_after_output(&mut self, now: u64, i: usize) {
        if self.conn_mut(i).is_some_and(|c| c.has_ext()) && self.tcp_notify_progress(i, Some(now)) {
            match self.conn_mut(i).and_then(|c| c.parent) {
                Some(_) => self.sockets.add_pending(i, Readiness::ERROR_QUEUE),
                None => self.sockets.notify(i, Readiness::ERROR_QUEUE),
            }
        }
    }
}
