//! Bypass sockets: the host's half of a connection handed to an offload engine (seed 002
//! §3.2, the "bypass layer"; DESIGN "Handoff engine").
//!
//! [`Stack::tcp_offload`] exports a connection the application owns, like
//! [`Stack::tcp_export`], but the moved marker left in its slot keeps the application's
//! handle valid and carries a `Bypass`: the host's socket buffers. From then on the
//! application's calls on the same handle (`tcp_send`, `tcp_recv`, `tcp_shutdown`, `close`,
//! options, readiness) work on these buffers and queue [`BypassOp`]s for the host's offload
//! layer ([`Stack::poll_bypass`]), which turns them into handoff commands; the engine's
//! answers come back through the `bypass_*` methods. Frames that still reach the host for the
//! 4-tuple are queued as [`BypassOp::Forward`] in arrival order (bounded, overflow counted in
//! `tcp_bypass_forward_full`), never processed and never answered with RST. The host keeps the
//! 4-tuple in its table (so the port stays owned) until the engine de-allocates the
//! connection or [`Stack::tcp_restore`] brings it back into the same slot, under the same
//! handle.
//!
//! Byte ownership follows seed §3.2:
//! - send: the host keeps every byte the engine has not acknowledged (`Ack`), from the
//!   engine's SND.UNA on, plus bytes written since; so a restore can re-queue writes that
//!   crossed the engine's `Restore` in flight;
//! - receive: the host's buffer holds what the engine delivered (`Recv`) and the application
//!   has not read; each read is reported (`Recvd`) so the engine can open its window.
//!
//! Invariants: `send_retained.len() ≤ send_capacity_bytes` (a write never makes it larger);
//! `recv_read_total ≤ recv_delivered_total`; a bypass marker never expires; while
//! `in_table`, `conns` maps its key to the slot and it counts in `TcpTable::moved`.

use std::collections::VecDeque;

use tcp::State;

use crate::socket::{Readiness, SocketError, SocketHandle, SocketOption};
use crate::sockets::Socket;
use crate::stack::Stack;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{FourTuple, MovedMarker, TcpState};

/// What the application did to an offloaded connection, for the host's offload layer to send
/// to the engine (seed 002 Figure 4 without the connection id, which the layer owns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BypassOp {
    /// Written bytes (`ch_nic_send`); `more`: `MSG_MORE`.
    Send { data: Vec<u8>, more: bool },
    /// Bytes the application read (`ch_nic_recvd`); consecutive reads are coalesced.
    Recvd { len_bytes: u32 },
    /// `shutdown(SHUT_WR)`.
    Shutdown,
    /// `close()`.
    Close,
    /// Abort (RST).
    Abort,
    /// A socket option (`ch_nic_ctrl`).
    Option(SocketOption),
    /// An IP datagram of the connection that reached the host (`ch_nic_forward`).
    Forward { packet: Vec<u8> },
}

/// The host socket of an offloaded connection (module documentation).
#[derive(Debug)]
pub(crate) struct Bypass {
    /// Unacknowledged send bytes, from the engine's SND.UNA, then later writes.
    send_retained: VecDeque<u8>,
    send_capacity_bytes: usize,
    /// Delivered by the engine, not read yet.
    recv: VecDeque<u8>,
    /// Bytes delivered since the offload (the snapshot's unread bytes included), and read.
    recv_delivered_total: u64,
    recv_read_total: u64,
    /// The application shut its sending side down / closed / aborted.
    shutdown: bool,
    app_closed: bool,
    aborted: bool,
    /// The engine reported the peer's FIN.
    peer_fin: bool,
    /// Why the connection ended (reset, time-out, engine failure), until the application
    /// closes.
    error: Option<SocketError>,
    /// The engine freed the connection (or it was lost): nothing more comes.
    ended: bool,
    /// The key is still in the table (false once the engine freed the connection or it was
    /// lost: from then on the host answers the tuple like any unknown one).
    in_table: bool,
    /// The state the application sees (a mirror of the engine's, coarse).
    state: State,
    /// The options the application set while the connection was away, last value per kind
    /// (at most one of each of the four a bypass socket takes): re-applied at restore, since
    /// one set after the host asked the connection back never reached the engine.
    options: Vec<SocketOption>,
}

impl Bypass {
    /// The bypass socket of the connection `s` was exported from. `rings`: that connection's
    /// send and receive rings, whose readable bytes are the snapshot's send bytes (unacked,
    /// then unsent) and unread bytes: their storage becomes the socket's buffers without a
    /// copy (`tcp::ring::Ring::into_deque`); without them the bytes are copied from `s`.
    fn new(
        s: &tcp::ConnectionSnapshot,
        rings: Option<(tcp::ring::Ring, tcp::ring::Ring)>,
    ) -> Bypass {
        let (send_retained, recv) = match rings {
            Some((send, recv)) => (send.into_deque(), recv.into_deque()),
            None => {
                let mut send = VecDeque::with_capacity(s.send_unacked.len() + s.send_unsent.len());
                send.extend(&s.send_unacked);
                send.extend(&s.send_unsent);
                (send, s.recv_unread.iter().copied().collect())
            }
        };
        debug_assert!(
            send_retained.len() == s.send_unacked.len() + s.send_unsent.len()
                && recv.len() == s.recv_unread.len(),
            "the rings hold the snapshot's bytes"
        );
        let cap = (s.config.send_buffer_bytes as usize).max(send_retained.len());
        Bypass {
            send_retained,
            send_capacity_bytes: cap,
            recv,
            recv_delivered_total: s.recv_unread.len() as u64,
            recv_read_total: 0,
            shutdown: s.app.fin_queued,
            app_closed: false,
            aborted: false,
            peer_fin: s.app.fin_received,
            error: None,
            ended: false,
            in_table: true,
            state: s.state,
            options: Vec::new(),
        }
    }

    fn readiness(&self) -> Readiness {
        let mut r = Readiness::NONE;
        if !self.recv.is_empty() || self.peer_fin || self.error.is_some() || self.ended {
            r |= Readiness::READABLE;
        }
        if self.peer_fin {
            r |= Readiness::PEER_CLOSED;
        }
        if !self.shutdown && !self.ended && self.send_retained.len() < self.send_capacity_bytes {
            r |= Readiness::WRITABLE;
        }
        if self.error.is_some() {
            r |= Readiness::ERROR;
        }
        r
    }
}

/// What an offload engine reads of a connection it runs (`Stack::tcp_conn_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnStatus {
    pub state: State,
    /// In-order bytes received and not consumed.
    pub recv_queue_bytes: usize,
    /// Bytes queued for sending (unacknowledged plus unsent).
    pub send_queue_bytes: usize,
    /// The peer's FIN arrived in order.
    pub fin_received: bool,
    /// Why it closed, once it has.
    pub close_reason: Option<tcp::CloseReason>,
    /// Closed with nothing left to send.
    pub finished: bool,
}

/// What an application call on a bypass socket returns, if the handle names one.
type Bypassed<T> = Option<Result<T, SocketError>>;

impl Stack {
    /// The status of a connection (`None` for other handles): for an offload engine, which
    /// delivers received bytes before it consumes them and counts acknowledged bytes by what
    /// leaves the send queue.
    pub fn tcp_conn_status(&self, h: SocketHandle) -> Option<ConnStatus> {
        let (_, sockets) = self.tcp_view();
        let i = sockets.index(h).ok()?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Some(ConnStatus {
                state: c.conn.state(),
                recv_queue_bytes: c.conn.recv_queue_bytes(),
                send_queue_bytes: c.conn.send_queue_bytes(),
                fin_received: matches!(
                    c.conn.state(),
                    State::CloseWait | State::LastAck | State::Closing | State::TimeWait
                ) || (c.conn.state() == State::Closed
                    && c.conn.close_reason() == Some(tcp::CloseReason::Normal)),
                close_reason: c.conn.close_reason(),
                finished: c.conn.is_finished(),
            }),
            _ => None,
        }
    }

    /// Copies received in-order bytes from `offset` on without consuming them (`None` for
    /// handles that are not connections).
    pub fn tcp_peek_at(&self, h: SocketHandle, offset: usize, out: &mut [u8]) -> Option<usize> {
        let (_, sockets) = self.tcp_view();
        let i = sockets.index(h).ok()?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Some(c.conn.peek_at(offset, out)),
            _ => None,
        }
    }

    /// Hands a connection the application owns to an offload engine: [`Stack::tcp_export`]
    /// (the delayed ACK and owed output are flushed first), but the handle stays valid and
    /// becomes a bypass socket (module documentation). `InvalidState` for a connection that is
    /// not synchronized, in a backlog or closed; `WouldBlock` when output could not drain.
    pub fn tcp_offload(
        &mut self,
        now: u64,
        h: SocketHandle,
    ) -> Result<(FourTuple, tcp::ConnectionSnapshot), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, c) = cx.conn_for(h)?;
        if c.app_closed || !c.in_table || c.error.is_some() || !c.conn.state().is_synchronized() {
            return Err(SocketError::InvalidState);
        }
        let mut rings = None;
        let (tuple, snapshot) = cx.export_slot(now, i, Some(&mut rings))?;
        let m = cx.moved_mut(i).ok_or(SocketError::InvalidState)?;
        m.expires_ns = u64::MAX;
        m.bypass = Some(Box::new(Bypass::new(&snapshot, rings)));
        cx.tcp.timers.remove(i);
        cx.tcp.counters.tcp_offloaded += 1;
        Ok((tuple, snapshot))
    }

    /// Whether `h` names an offloaded connection (a bypass socket). The application's only
    /// way to tell (`app::Conn::offloaded`).
    pub fn tcp_offloaded(&self, h: SocketHandle) -> bool {
        let (tcp, sockets) = self.tcp_view();
        let _ = tcp;
        sockets.index(h).is_ok_and(|i| {
            matches!(sockets.get(i), Some(Socket::Tcp(TcpState::Moved(m))) if m.bypass.is_some())
        })
    }

    /// The next operation of an application on an offloaded connection, oldest first.
    pub fn poll_bypass(&mut self) -> Option<(SocketHandle, BypassOp)> {
        let cx = self.tcp_cx();
        let (i, op) = cx.tcp.bypass_ops.pop_front()?;
        if matches!(op, BypassOp::Forward { .. }) {
            cx.tcp.bypass_forward_queued = cx.tcp.bypass_forward_queued.saturating_sub(1);
        }
        Some((cx.sockets.handle_of(i)?, op))
    }

    /// `ch_os_recv`: the engine delivered in-order bytes. `InvalidState` when `h` is not a
    /// bypass socket.
    pub fn bypass_recv(&mut self, h: SocketHandle, data: &[u8]) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, b) = cx.bypass_for(h)?;
        b.recv.extend(data);
        b.recv_delivered_total += data.len() as u64;
        if !data.is_empty() {
            cx.sockets.notify(i, Readiness::READABLE);
        }
        Ok(())
    }

    /// `ch_os_ack`: the peer acknowledged `len_bytes` more; they leave the host's send
    /// buffer. `InvalidInput`-like `InvalidState` beyond what is retained.
    pub fn bypass_ack(&mut self, h: SocketHandle, len_bytes: u32) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, b) = cx.bypass_for(h)?;
        let n = len_bytes as usize;
        if n > b.send_retained.len() {
            return Err(SocketError::InvalidState);
        }
        b.send_retained.drain(..n);
        if n > 0 && !b.shutdown {
            cx.sockets.notify(i, Readiness::WRITABLE);
        }
        Ok(())
    }

    /// `ch_os_ctrl(PeerFin)`: the peer's FIN arrived after every byte delivered so far.
    pub fn bypass_peer_fin(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, b) = cx.bypass_for(h)?;
        b.peer_fin = true;
        b.state = match b.state {
            State::Established => State::CloseWait,
            State::FinWait1 | State::FinWait2 => State::Closing,
            s => s,
        };
        cx.sockets
            .notify(i, Readiness::PEER_CLOSED | Readiness::READABLE);
        Ok(())
    }

    /// `ch_os_ctrl(Reset | TimedOut)`, or the engine failed and the connection's state is
    /// lost (`lost`: counted in `tcp_bypass_lost`): the connection ended with `error`. Its
    /// key leaves the table, so the peer's next segment draws the host's RST.
    pub fn bypass_error(
        &mut self,
        h: SocketHandle,
        error: SocketError,
        lost: bool,
    ) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, b) = cx.bypass_for(h)?;
        b.error = Some(error);
        b.state = State::Closed;
        if lost {
            b.ended = true;
            cx.tcp.counters.tcp_bypass_lost += 1;
        }
        cx.sockets.notify(i, Readiness::ERROR | Readiness::READABLE);
        if lost {
            cx.bypass_end(i);
        }
        Ok(())
    }

    /// `ch_os_ctrl(Deallocated)`: the engine freed the connection. The key leaves the table;
    /// the handle stays valid (reads report the end) until the application closes it, or goes
    /// now if it already did.
    pub fn bypass_deallocated(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, b) = cx.bypass_for(h)?;
        b.ended = true;
        b.state = State::Closed;
        cx.sockets
            .notify(i, Readiness::CLOSED | Readiness::READABLE);
        cx.bypass_end(i);
        Ok(())
    }

    /// Gives `s`, the host's own snapshot of a connection whose handoff was refused, kept
    /// without its byte buffers, the bytes the export had back from the bypass socket `h`:
    /// the send bytes it retains from the first on, `send_unacked_bytes` then
    /// `send_unsent_bytes` of them, and every received byte not read yet. Before the engine
    /// accepted, it acknowledged and delivered nothing, so the socket still holds every send
    /// byte of the export (plus writes since, which [`Stack::tcp_restore`] re-queues) and
    /// the export's unread bytes less what the application read since — so the restore
    /// reconciles this snapshot exactly as it would the export's own. `InvalidState` when
    /// `h` is not a bypass socket or retains fewer send bytes than that.
    pub fn bypass_refill_snapshot(
        &mut self,
        h: SocketHandle,
        s: &mut tcp::ConnectionSnapshot,
        send_unacked_bytes: usize,
        send_unsent_bytes: usize,
    ) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (_, b) = cx.bypass_for(h)?;
        let send_bytes = send_unacked_bytes
            .checked_add(send_unsent_bytes)
            .filter(|&n| n <= b.send_retained.len())
            .ok_or(SocketError::InvalidState)?;
        let [front, back] = deque_range(&b.send_retained, send_bytes);
        let mut all = Vec::with_capacity(send_bytes);
        all.extend_from_slice(front);
        all.extend_from_slice(back);
        s.send_unsent = all.split_off(send_unacked_bytes);
        s.send_unacked = all;
        let (front, back) = b.recv.as_slices();
        s.recv_unread.clear();
        s.recv_unread.reserve_exact(b.recv.len());
        s.recv_unread.extend_from_slice(front);
        s.recv_unread.extend_from_slice(back);
        Ok(())
    }

    /// `ch_os_restore` / the answer to `ch_nic_restore` (or a refused handoff, with the
    /// host's own snapshot): the connection comes back into its slot under the same handle.
    /// Writes that crossed the engine's restore in flight are re-queued after the engine's
    /// send bytes, reads are reconciled with what the engine still counted as unread, and a
    /// shutdown or close the engine did not see is applied. The engine must have sent every
    /// `Recv` and `Ack` before the snapshot. `InvalidState` when the snapshot does not fit
    /// what the host kept (counted in `tcp_bypass_restore_mismatch`; the bypass socket stays).
    pub fn tcp_restore(
        &mut self,
        now: u64,
        h: SocketHandle,
        mut snapshot: tcp::ConnectionSnapshot,
    ) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, b) = cx.bypass_for(h)?;
        if !b.in_table {
            return Err(SocketError::InvalidState);
        }
        if !reconcile(b, &mut snapshot) {
            cx.tcp.counters.tcp_bypass_restore_mismatch += 1;
            return Err(SocketError::InvalidState);
        }
        let (shutdown, app_closed, aborted) = (b.shutdown, b.app_closed, b.aborted);
        let options = core::mem::take(&mut b.options);
        let Some(Socket::Tcp(TcpState::Moved(m))) = cx.sockets.get(i) else {
            return Err(SocketError::InvalidState);
        };
        let tuple = m.key.tuple();
        let h2 = cx.tcp_import(now, tuple, crate::tcp_move::Snap::Owned(snapshot))?;
        debug_assert_eq!(h, h2, "a restore keeps the handle");
        for opt in options {
            // Each was accepted on the bypass socket, and a live connection takes all four.
            let _ = cx.set_option(i, opt);
        }
        if let Some(c) = cx.conn_mut(i) {
            if aborted {
                c.conn.abort();
            } else if app_closed {
                c.app_closed = true;
                if c.conn.state() != State::Closed {
                    let _ = c.conn.close();
                }
            } else if shutdown && matches!(c.conn.state(), State::Established | State::CloseWait) {
                let _ = c.conn.shutdown_write();
            }
        }
        cx.tcp_after_input(i);
        cx.tcp.counters.tcp_restored += 1;
        Ok(())
    }
}

/// Fits the engine's snapshot to what the host kept: false when it does not.
///
/// The byte comparisons go by contiguous pieces (a `VecDeque`'s two halves against the
/// snapshot's vectors), not byte by byte: a restore of a connection with a full buffer
/// compares up to two buffers' worth of bytes.
fn reconcile(b: &Bypass, s: &mut tcp::ConnectionSnapshot) -> bool {
    // Receive: the engine consumed what the host reported read; the host may have read more
    // (its `Recvd` crossed the restore). Everything the snapshot holds was delivered.
    let unread = s.recv_unread.len() as u64;
    let Some(engine_read) = b.recv_delivered_total.checked_sub(unread) else {
        return false;
    };
    let Some(skip) = b.recv_read_total.checked_sub(engine_read) else {
        return false;
    };
    let Ok(skip) = usize::try_from(skip) else {
        return false;
    };
    let Some(engine_unread) = s.recv_unread.get(skip..) else {
        return false;
    };
    if !pieces_eq(&[engine_unread], &deque_range(&b.recv, b.recv.len())) {
        return false;
    }
    s.recv_unread.drain(..skip);
    // Send: the snapshot's bytes are the head of what the host retains; the rest crossed.
    let engine_send = s.send_unacked.len() + s.send_unsent.len();
    if engine_send > b.send_retained.len() {
        return false;
    }
    let head = [s.send_unacked.as_slice(), s.send_unsent.as_slice()];
    if !pieces_eq(&head, &deque_range(&b.send_retained, engine_send)) {
        return false;
    }
    if engine_send < b.send_retained.len() && s.app.fin_queued {
        return false;
    }
    let (front, back) = b.send_retained.as_slices();
    let from_back = engine_send.saturating_sub(front.len());
    s.send_unsent
        .extend_from_slice(front.get(engine_send..).unwrap_or(&[]));
    s.send_unsent
        .extend_from_slice(back.get(from_back..).unwrap_or(&[]));
    true
}

/// The first `n` (≤ `d.len()`) bytes of `d` as its two contiguous pieces.
fn deque_range(d: &VecDeque<u8>, n: usize) -> [&[u8]; 2] {
    let (front, back) = d.as_slices();
    match front.get(..n) {
        Some(f) => [f, &[]],
        None => [front, back.get(..n - front.len()).unwrap_or(back)],
    }
}

/// Whether the concatenation of `a`'s pieces equals that of `b`'s.
fn pieces_eq(a: &[&[u8]], b: &[&[u8]]) -> bool {
    let total = |p: &[&[u8]]| p.iter().map(|x| x.len()).sum::<usize>();
    if total(a) != total(b) {
        return false;
    }
    let mut a = a.iter().copied().filter(|x| !x.is_empty());
    let mut b = b.iter().copied().filter(|x| !x.is_empty());
    let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
    loop {
        if x.is_empty() {
            match a.next() {
                Some(next) => x = next,
                None => return true,
            }
        }
        if y.is_empty() {
            match b.next() {
                Some(next) => y = next,
                // Equal totals: `b` cannot run out before `a`.
                None => return false,
            }
        }
        let k = x.len().min(y.len());
        if x[..k] != y[..k] {
            return false;
        }
        x = &x[k..];
        y = &y[k..];
    }
}

impl TcpCx<'_> {
    /// The bypass socket `h` names.
    pub(crate) fn bypass_for(
        &mut self,
        h: SocketHandle,
    ) -> Result<(usize, &mut Bypass), SocketError> {
        let i = self.sockets.index(h)?;
        match self.sockets.get_mut(i) {
            Some(Socket::Tcp(TcpState::Moved(MovedMarker {
                bypass: Some(b), ..
            }))) => Ok((i, b)),
            _ => Err(SocketError::InvalidState),
        }
    }

    /// The bypass socket in slot `i`, if it holds one.
    fn bypass_at(&mut self, i: usize) -> Option<&mut Bypass> {
        match self.sockets.get_mut(i) {
            Some(Socket::Tcp(TcpState::Moved(MovedMarker {
                bypass: Some(b), ..
            }))) => Some(b),
            _ => None,
        }
    }

    /// The connection is over on the engine: the key leaves the table; the slot goes too
    /// once the application has closed.
    fn bypass_end(&mut self, i: usize) {
        let Some(Socket::Tcp(TcpState::Moved(m))) = self.sockets.get_mut(i) else {
            return;
        };
        let key = m.key;
        let Some(b) = m.bypass.as_mut() else {
            return;
        };
        let was_in_table = std::mem::replace(&mut b.in_table, false);
        let app_closed = b.app_closed;
        if was_in_table {
            self.tcp.conns.remove(key.table_hash, i);
            self.tcp.moved -= 1;
        }
        if app_closed {
            self.sockets.free(i);
        }
    }

    /// Queues an operation for the offload layer.
    fn bypass_op(&mut self, i: usize, op: BypassOp) {
        if let (BypassOp::Recvd { len_bytes }, Some((j, BypassOp::Recvd { len_bytes: last }))) =
            (&op, self.tcp.bypass_ops.back_mut())
        {
            if *j == i {
                if let Some(sum) = last.checked_add(*len_bytes) {
                    *last = sum;
                    return;
                }
            }
        }
        self.tcp.bypass_ops.push_back((i, op));
    }

    /// A frame for an offloaded connection: queued as `Forward`, in arrival order (bounded).
    pub(crate) fn bypass_forward(&mut self, i: usize, whole: &[u8]) {
        if self.tcp.bypass_forward_queued >= self.cfg.limits.tcp_moved_forward_frames_max {
            self.tcp.counters.tcp_bypass_forward_full += 1;
            return;
        }
        self.tcp.bypass_forward_queued += 1;
        self.tcp.counters.tcp_bypass_forwarded += 1;
        self.bypass_op(
            i,
            BypassOp::Forward {
                packet: whole.to_vec(),
            },
        );
    }

    /// `tcp_send`/`tcp_send_more` on a bypass socket.
    pub(crate) fn bypass_send(
        &mut self,
        h: SocketHandle,
        data: &[u8],
        more: bool,
    ) -> Bypassed<usize> {
        let (i, b) = self.bypass_for(h).ok()?;
        if let Some(e) = b.error {
            return Some(Err(e));
        }
        if b.shutdown || b.ended {
            return Some(Err(SocketError::InvalidState));
        }
        let room = b.send_capacity_bytes.saturating_sub(b.send_retained.len());
        let n = room.min(data.len());
        if n == 0 && !data.is_empty() {
            return Some(Err(SocketError::WouldBlock));
        }
        b.send_retained.extend(&data[..n]);
        if n > 0 {
            self.bypass_op(
                i,
                BypassOp::Send {
                    data: data[..n].to_vec(),
                    more,
                },
            );
        }
        Some(Ok(n))
    }

    /// `tcp_recv` on a bypass socket.
    pub(crate) fn bypass_read(&mut self, h: SocketHandle, out: &mut [u8]) -> Bypassed<usize> {
        let (i, b) = self.bypass_for(h).ok()?;
        if matches!(b.error, Some(SocketError::Reset)) {
            return Some(Err(SocketError::Reset));
        }
        let n = out.len().min(b.recv.len());
        for (o, x) in out.iter_mut().zip(b.recv.drain(..n)) {
            *o = x;
        }
        b.recv_read_total += n as u64;
        if n > 0 {
            let in_table = b.in_table;
            if in_table {
                self.bypass_op(
                    i,
                    BypassOp::Recvd {
                        len_bytes: n as u32,
                    },
                );
            }
            return Some(Ok(n));
        }
        if out.is_empty() {
            return Some(Ok(0));
        }
        Some(Err(match (b.error, b.peer_fin, b.ended) {
            (Some(e), _, _) => e,
            (None, true, _) => SocketError::Finished,
            (None, false, true) => SocketError::Closed,
            (None, false, false) => SocketError::WouldBlock,
        }))
    }

    /// `tcp_shutdown` on a bypass socket.
    pub(crate) fn bypass_shutdown(&mut self, h: SocketHandle) -> Bypassed<()> {
        let (i, b) = self.bypass_for(h).ok()?;
        if b.ended {
            return Some(Err(SocketError::InvalidState));
        }
        if b.shutdown {
            return Some(Ok(()));
        }
        b.shutdown = true;
        b.state = match b.state {
            State::CloseWait => State::LastAck,
            State::Established => State::FinWait1,
            s => s,
        };
        self.bypass_op(i, BypassOp::Shutdown);
        Some(Ok(()))
    }

    /// `tcp_abort` on a bypass socket.
    pub(crate) fn bypass_abort(&mut self, h: SocketHandle) -> Bypassed<()> {
        let (i, b) = self.bypass_for(h).ok()?;
        if b.ended || b.aborted {
            return Some(Ok(()));
        }
        b.aborted = true;
        b.shutdown = true;
        b.state = State::Closed;
        self.bypass_op(i, BypassOp::Abort);
        Some(Ok(()))
    }

    /// `close` on a bypass socket in slot `i` (false: slot `i` is not one).
    pub(crate) fn bypass_close(&mut self, i: usize) -> bool {
        let Some(b) = self.bypass_at(i) else {
            return false;
        };
        if b.app_closed {
            return true;
        }
        b.app_closed = true;
        let (ended, aborted) = (b.ended, b.aborted);
        b.shutdown = true;
        if ended {
            self.sockets.free(i);
        } else if !aborted {
            self.bypass_op(i, BypassOp::Close);
        }
        true
    }

    /// `set_option` on a bypass socket in slot `i`: forwarded to the engine (`None`: slot `i`
    /// is not one).
    pub(crate) fn bypass_option(
        &mut self,
        i: usize,
        opt: SocketOption,
    ) -> Option<Result<(), SocketError>> {
        let b = self.bypass_at(i)?;
        match opt {
            SocketOption::NoDelay(_) | SocketOption::Cork(_) | SocketOption::KeepaliveIdleNs(_) => {
            }
            SocketOption::SendBufferBytes(v) => {
                b.send_capacity_bytes = (v as usize).max(b.send_retained.len());
            }
            _ => return Some(Err(SocketError::InvalidState)),
        }
        if b.ended {
            return Some(Err(SocketError::InvalidState));
        }
        let same_kind = core::mem::discriminant(&opt);
        b.options
            .retain(|o| core::mem::discriminant(o) != same_kind);
        b.options.push(opt);
        self.bypass_op(i, BypassOp::Option(opt));
        Some(Ok(()))
    }
}

impl crate::tcp_sockets::TcpTable {
    /// The state, readiness, send buffer and peer of a bypass socket in slot `i`.
    pub(crate) fn bypass_view(
        sockets: &crate::sockets::Sockets,
        i: usize,
    ) -> Option<(State, Readiness, u32, core::net::SocketAddr)> {
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Moved(MovedMarker {
                bypass: Some(b),
                key,
                ..
            }))) => Some((
                b.state,
                b.readiness(),
                u32::try_from(b.send_capacity_bytes).unwrap_or(u32::MAX),
                key.tuple().remote,
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A deque whose bytes wrap: `front` pushed at the front, `back` at the back.
    fn wrapped(front: &[u8], back: &[u8]) -> VecDeque<u8> {
        let mut d = VecDeque::with_capacity(front.len() + back.len());
        d.extend(back);
        for &x in front.iter().rev() {
            d.push_front(x);
        }
        d
    }

    proptest! {
        /// `pieces_eq` and `deque_range` agree with comparing the concatenated bytes, however
        /// the pieces are cut and the deque wraps.
        #[test]
        fn piecewise_comparison_equals_concatenated_comparison(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
            cut_a in 0usize..41,
            split in 0usize..41,
            n in 0usize..41,
        ) {
            let cut_a = cut_a.min(a.len());
            let split = split.min(b.len());
            let d = wrapped(&b[..split], &b[split..]);
            let n = n.min(d.len());
            let prefix: Vec<u8> = d.iter().take(n).copied().collect();
            let got = pieces_eq(&[&a[..cut_a], &a[cut_a..]], &deque_range(&d, n));
            prop_assert_eq!(got, a == prefix);
        }
    }

    #[test]
    fn piecewise_comparison_finds_a_difference_in_the_second_piece() {
        let d = wrapped(b"abc", b"def");
        assert!(pieces_eq(&[b"ab", b"cdef"], &deque_range(&d, 6)));
        assert!(!pieces_eq(&[b"ab", b"cdeg"], &deque_range(&d, 6)));
        assert!(!pieces_eq(&[b"abcde"], &deque_range(&d, 6)));
        assert!(pieces_eq(&[b"abcd"], &deque_range(&d, 4)));
    }
}
