//! The TCP application calls: listen, accept, connect, send, recv, shutdown, abort, options,
//! close, and the handoff calls (export, import, moved markers and their forward outbox).
//!
//! The public methods on [`Stack`] split the stack's borrows ([`Stack::tcp_cx`]) and delegate
//! to the TCP part; their bodies live on [`TcpCx`].

use core::net::{IpAddr, SocketAddr};
use std::collections::VecDeque;

use tcp::{Connection, State};

use crate::config::StackConfig;
use crate::socket::{Readiness, SocketError, SocketHandle, SocketOption};
use crate::sockets::{EPHEMERAL_FIRST, EPHEMERAL_LAST, Socket, Sockets};
use crate::stack::Stack;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{
    ConnSock, FourTuple, Listener, TcpState, map_tcp_error, tcp_port_listened,
};

impl Stack {
    /// Sets the stack-wide ECN mode (RFC 3168; Linux `net.ipv4.tcp_ecn` 0/1/2) for
    /// connections opened from now on, active or passive, whatever listener they come from
    /// (Linux reads the sysctl at each SYN). Starts as [`crate::StackConfig::tcp`]'s `ecn`,
    /// off by default.
    pub fn tcp_set_ecn(&mut self, mode: tcp::EcnMode) {
        self.tcp_cx().tcp.ecn = mode;
    }

    /// Whether the TCP flush sends runs of full segments as trains (on by default). The
    /// frames and the connections' state are the same either way; off is the reference a
    /// test compares the train path with.
    #[doc(hidden)]
    pub fn set_tcp_trains(&mut self, on: bool) {
        self.tcp_cx().tcp.trains = on;
    }

    /// The stack-wide ECN mode.
    pub fn tcp_ecn(&self) -> tcp::EcnMode {
        self.tcp_view().0.ecn
    }

    /// Sends frames that arrive for `tuple`, a connection this stack exported
    /// ([`Stack::tcp_export`]), to `dest` (a driver-defined destination: a shard, a queue)
    /// through [`Stack::poll_forward`] instead of dropping them. `InvalidState` when `tuple`
    /// has no moved marker here (never exported, imported back, released or expired).
    pub fn tcp_set_moved_forward(
        &mut self,
        tuple: FourTuple,
        dest: u16,
    ) -> Result<(), SocketError> {
        self.tcp_cx().tcp_set_moved_forward(tuple, dest)
    }

    /// Removes the moved marker of `tuple` (the driver knows no frame for it can still
    /// arrive here). From then on its segments are treated as for any unknown connection
    /// (RST). `InvalidState` when there is no marker.
    pub fn tcp_release_moved(&mut self, tuple: FourTuple) -> Result<(), SocketError> {
        self.tcp_cx().tcp_release_moved(tuple)
    }

    /// The next frame caught mid-move, oldest first: (the destination the driver set with
    /// [`Stack::tcp_set_moved_forward`], the frame, the metadata to receive it with: the RSS
    /// hash it arrived with and nothing else, since the frame is rebuilt from the datagram
    /// ([`wire::RxMeta::hash_only`]), so the new owner verifies its checksums). The driver
    /// feeds it to the new owner's `receive` before newer frames of that connection (DESIGN
    /// handoff invariant 4). The outbox is bounded (`limits.tcp_moved_forward_frames_max`;
    /// overflow counted in `tcp_moved_forward_full`).
    pub fn poll_forward(&mut self) -> Option<(u16, Vec<u8>, wire::RxMeta)> {
        self.tcp_cx().poll_forward()
    }

    /// Opens a listener on `local` (port 0 picks an ephemeral port; an unspecified IP listens
    /// on every address of the family). `backlog` bounds the children not yet accepted
    /// (clamped to `limits.tcp_backlog_max`).
    pub fn tcp_listen(
        &mut self,
        local: SocketAddr,
        backlog: usize,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_cx().tcp_listen(local, backlog)
    }

    /// Takes the oldest established child of a listener: its handle and the peer's address.
    /// `WouldBlock` when none has completed its handshake.
    pub fn tcp_accept(
        &mut self,
        listener: SocketHandle,
    ) -> Result<(SocketHandle, SocketAddr), SocketError> {
        self.tcp_cx().tcp_accept(listener)
    }

    /// Active open to `remote` from the best local address. `local_port` 0 picks a port:
    /// with an RSS home queue configured, one whose replies hash back to this shard
    /// (DESIGN "Outgoing connections pick a source port whose hash maps back"), else the next
    /// free ephemeral port.
    pub fn tcp_connect(
        &mut self,
        now: u64,
        remote: SocketAddr,
        local_port: u16,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_cx().tcp_connect(now, remote, local_port)
    }

    /// Queues bytes for sending; returns how many fit. `WouldBlock` when none fit. A reset
    /// or timed-out connection reports `Reset`/`TimedOut` to the first call that meets it
    /// (here, `tcp_recv` or `take_error`) and `Closed` after.
    pub fn tcp_send(&mut self, h: SocketHandle, data: &[u8]) -> Result<usize, SocketError> {
        self.tcp_cx().tcp_send(h, data)
    }

    /// `tcp_send` with `MSG_MORE`: full segments go, a partial tail waits for a later
    /// `tcp_send` (see `tcp::Connection::send_more`).
    pub fn tcp_send_more(&mut self, h: SocketHandle, data: &[u8]) -> Result<usize, SocketError> {
        self.tcp_cx().tcp_send_more(h, data)
    }

    /// Reads received bytes. `WouldBlock` when none are ready, `Finished` after the peer's FIN
    /// once everything before it has been read. Bytes received before a reset are read first;
    /// then the first call that meets the failure (here, `tcp_send` or `take_error`) reports
    /// `Reset`/`TimedOut`, and reads after it `Finished` (the end of the stream, as POSIX
    /// `so_error` is taken by the call that reports it).
    pub fn tcp_recv(&mut self, h: SocketHandle, out: &mut [u8]) -> Result<usize, SocketError> {
        self.tcp_cx().tcp_recv(h, out)
    }

    /// Half-close: a FIN follows the queued data; receiving continues.
    pub fn tcp_shutdown(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        self.tcp_cx().tcp_shutdown(h)
    }

    /// Aborts a connection (RST if synchronized, RFC 9293 §3.10.5).
    pub fn tcp_abort(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        self.tcp_cx().tcp_abort(h)
    }

    /// Hands a live connection over (DESIGN "Handoff protocol"): flushes a delayed ACK and any
    /// owed output to the transmit queue, freezes the connection into a snapshot, and replaces
    /// it with a *moved marker*. The handle becomes invalid here. Segments that still arrive
    /// for the 4-tuple are never answered with RST (DESIGN handoff invariant 4): they are
    /// dropped before any processing (`tcp_drop_moved`), or, once the driver names the new
    /// owner with [`Stack::tcp_set_moved_forward`], queued for it on [`Stack::poll_forward`].
    /// The marker goes when the connection is imported back ([`Stack::tcp_import`], which
    /// then returns the same handle), on [`Stack::tcp_release_moved`], or after
    /// `limits.tcp_moved_marker_ns` (`tcp_moved_expired`). `WouldBlock` when output could not
    /// be drained (transmit queue full), `InvalidState` when the engine refuses (not
    /// synchronized).
    pub fn tcp_export(
        &mut self,
        now: u64,
        h: SocketHandle,
    ) -> Result<(FourTuple, tcp::ConnectionSnapshot), SocketError> {
        self.tcp_cx().tcp_export(now, h)
    }

    /// Takes over a connection exported by another stack (another shard, or an offload engine
    /// giving it back). `tuple.local` must be one of our addresses.
    ///
    /// Handles are stable across a move and back: when this stack exported `tuple` itself and
    /// its moved marker is still there, the import takes the marker's slot and returns the
    /// handle the connection had before the export. Otherwise (another stack's connection, or
    /// a marker already released or expired) the connection gets a new handle.
    pub fn tcp_import(
        &mut self,
        now: u64,
        tuple: FourTuple,
        snapshot: &tcp::ConnectionSnapshot,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_cx()
            .tcp_import(now, tuple, crate::tcp_move::Snap::Borrowed(snapshot))
    }

    /// [`Stack::tcp_import`] of a snapshot the caller gives up: the connection's rings adopt
    /// its byte vectors instead of copying them (`tcp::Connection::import_owned`). The same
    /// connection, handle and errors.
    pub fn tcp_import_owned(
        &mut self,
        now: u64,
        tuple: FourTuple,
        snapshot: tcp::ConnectionSnapshot,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_cx()
            .tcp_import(now, tuple, crate::tcp_move::Snap::Owned(snapshot))
    }

    /// The engine state of a connection (`None` for listeners and invalid handles).
    pub fn tcp_state(&self, h: SocketHandle) -> Option<State> {
        let (tcp, sockets) = self.tcp_view();
        tcp.tcp_state(sockets, h)
    }

    /// Linux `getsockopt(TCP_MAXSEG)`: a synchronized connection's payload per segment (send
    /// MSS less the timestamp option, Linux `mss_cache`); before that, and for a listener, the
    /// cap on the MSS it will announce (Linux returns `user_mss` there when one was set).
    pub fn tcp_max_segment(&self, h: SocketHandle) -> Result<u16, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        tcp.tcp_max_segment(sockets, h)
    }

    /// The send buffer capacity in bytes (unacknowledged plus unsent data) of a connection,
    /// or the one a listener gives the connections it accepts: what
    /// [`SocketOption::SendBufferBytes`] set, after the engine's validation (at least one MSS).
    pub fn tcp_send_buffer_bytes(&self, h: SocketHandle) -> Result<u32, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        tcp.tcp_send_buffer_bytes(sockets, h)
    }

    /// Turns keepalive on a connection on with `keepalive`'s timing, or off (`None`); the
    /// idle time restarts at `now` (Linux `SO_KEEPALIVE` with `TCP_KEEPIDLE`,
    /// `TCP_KEEPINTVL`, `TCP_KEEPCNT`). On a listener, use [`SocketOption::KeepaliveIdleNs`].
    pub fn tcp_set_keepalive(
        &mut self,
        now: u64,
        h: SocketHandle,
        keepalive: Option<tcp::KeepaliveConfig>,
    ) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let (i, c) = cx.conn_for(h)?;
        c.conn.set_keepalive(now, keepalive);
        cx.tcp.dirty.insert(i);
        Ok(())
    }

    /// A connection as Linux's `getsockopt(TCP_INFO)` reports it at `now` (see
    /// [`tcp::TcpInfo`] for the fields, their units and which are unknown when).
    /// `WrongSocketType` for listeners and UDP sockets.
    pub fn tcp_info(&self, now: u64, h: SocketHandle) -> Result<tcp::TcpInfo, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        let mut info = tcp.conn_ref(sockets, h)?.tcp_info(now);
        if crate::tcp_fastopen::syn_data_acked(sockets, h) {
            info.options |= tcp::tcpi_opt::SYN_DATA;
        }
        Ok(info)
    }

    /// Bytes ready to be read now (Linux `ioctl(SIOCINQ)` / `FIONREAD`).
    pub fn tcp_recv_queue_bytes(&self, h: SocketHandle) -> Result<usize, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        Ok(tcp.conn_ref(sockets, h)?.recv_queue_bytes())
    }

    /// Linux's `TCP_INQ` hint (the `TCP_CM_INQ` control message of `recvmsg`,
    /// `tcp_inq_hint`): the bytes ready to read, or 1 once the peer's FIN arrived and every
    /// byte before it was read (the reader should read on, to the end of the stream).
    pub fn tcp_inq_hint(&self, h: SocketHandle) -> Result<usize, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        let c = tcp.conn_ref(sockets, h)?;
        let n = c.recv_queue_bytes();
        Ok(if n == 0 && c.recv_end() == Some(tcp::Error::Finished) {
            1
        } else {
            n
        })
    }

    /// Bytes written and not yet acknowledged by the peer, sent or not (Linux
    /// `ioctl(SIOCOUTQ)`).
    pub fn tcp_send_queue_bytes(&self, h: SocketHandle) -> Result<usize, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        Ok(tcp.conn_ref(sockets, h)?.send_queue_bytes())
    }

    /// Bytes written and not sent yet (Linux `ioctl(SIOCOUTQNSD)`, `tcpi_notsent_bytes`).
    pub fn tcp_unsent_bytes(&self, h: SocketHandle) -> Result<usize, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        Ok(tcp.conn_ref(sockets, h)?.notsent_bytes())
    }

    /// Copies received bytes without consuming them (`recv(MSG_PEEK)`): the window and the
    /// ACKs are untouched. `WouldBlock` when none are ready, `Finished` after the peer's FIN
    /// once everything before it has been read.
    pub fn tcp_peek(&self, h: SocketHandle, out: &mut [u8]) -> Result<usize, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        let c = tcp.conn_ref(sockets, h)?;
        let n = c.peek(out);
        if n > 0 || out.is_empty() {
            return Ok(n);
        }
        Err(c.recv_end().map_or(SocketError::WouldBlock, map_tcp_error))
    }

    /// Level-triggered readiness of a TCP socket now, as `poll(2)` would report it (events
    /// from [`Stack::poll_event`] are its edges): a listener is `READABLE` while an
    /// established connection waits to be accepted; a connection is `READABLE` while data is
    /// queued or after the peer's FIN (with `PEER_CLOSED`), `WRITABLE` while it may send and
    /// its send buffer has room, `ERROR` while an error that ended it is pending (not yet
    /// returned by a call, see [`Stack::tcp_recv`]), `READABLE` after (reads end the stream).
    pub fn tcp_readiness(&self, h: SocketHandle) -> Result<Readiness, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        tcp.tcp_readiness(sockets, h)
    }

    /// The peer's address of a connection.
    pub fn peer_addr(&self, h: SocketHandle) -> Result<SocketAddr, SocketError> {
        let (tcp, sockets) = self.tcp_view();
        tcp.peer_addr(sockets, h)
    }

    /// Connections in the table (any state but CLOSED), TIME-WAIT records included.
    pub fn tcp_connection_count(&self) -> usize {
        self.tcp_view().0.tcp_connection_count()
    }

    /// Connections the application closed that wait out TIME-WAIT as compact records
    /// (`Limits::tcp_time_wait_max` at most; they hold no socket slot).
    pub fn tcp_time_wait_count(&self) -> usize {
        self.tcp_view().0.tw_len()
    }

    /// Heap bytes the TIME-WAIT records hold (records and their index, spare capacity
    /// included): what [`Stack::tcp_time_wait_count`] costs.
    pub fn tcp_time_wait_heap_bytes(&self) -> usize {
        self.tcp_view().0.tw_heap_bytes()
    }

    /// Heap bytes the connection table's index holds (8 bytes an entry, spare capacity
    /// included; the keys live in the socket slots).
    pub fn tcp_conn_table_heap_bytes(&self) -> usize {
        self.tcp_view().0.conns.heap_bytes()
    }

    /// Heap bytes the socket table holds (its slots, spare ones included, the free list and
    /// the event queue): for memory breakdowns.
    pub fn socket_table_heap_bytes(&self) -> usize {
        self.tcp_view().1.heap_bytes()
    }

    /// The distinct TCP configurations the live connections hold (one shared by many counts
    /// once: `tcp_config_share`) and the heap bytes they take, `Arc` counts included: for
    /// memory breakdowns and tests of the sharing. Walks every slot.
    pub fn tcp_configs_held(&self) -> (usize, usize) {
        let mut ptrs: Vec<*const tcp::Config> = self
            .tcp_view()
            .1
            .iter()
            .filter_map(|s| match s {
                Socket::Tcp(TcpState::Conn(c)) => {
                    Some(std::sync::Arc::as_ptr(c.conn.shared_config()))
                }
                _ => None,
            })
            .collect();
        ptrs.sort_unstable();
        ptrs.dedup();
        let each = core::mem::size_of::<tcp::Config>() + 2 * core::mem::size_of::<usize>();
        (ptrs.len(), ptrs.len() * each)
    }

    /// Heap bytes the live connections' rare-counter boxes take (`tcp::Connection::
    /// counters_heap_bytes`: none until a connection counts a rare event). Walks every slot.
    pub fn tcp_counters_heap_bytes(&self) -> usize {
        self.tcp_view()
            .1
            .iter()
            .map(|s| match s {
                Socket::Tcp(TcpState::Conn(c)) => c.conn.counters_heap_bytes(),
                _ => 0,
            })
            .sum()
    }

    /// Heap bytes the TCP deadline wheel holds (a node per socket slot, its buckets).
    pub fn tcp_timers_heap_bytes(&self) -> usize {
        self.tcp_view().0.timers.heap_bytes()
    }

    /// Connections opened from our listeners that `source` holds (slots not yet freed), as
    /// the per-source share (`Limits::tcp_source_share_pct`) counts them.
    pub fn tcp_source_connections(&self, source: IpAddr) -> u32 {
        self.tcp_view().0.source_connections(source)
    }

    /// Ring storage all TCP connections hold, bytes: what the buffer budget counts
    /// (`Limits::tcp_mem_*_bytes`, `stack::tcp_mem`).
    pub fn tcp_mem_bytes(&self) -> usize {
        self.tcp_view().0.mem_bytes
    }

    /// The memory state of the TCP buffers (`stack::tcp_mem`).
    pub fn tcp_mem_state(&self) -> crate::tcp_mem::MemState {
        self.tcp_view().0.mem_state
    }

    /// The first TCB invariant a live connection violates (`tcp::Connection::
    /// invariant_violation`), with its 4-tuple; for checkers in tests and simulations. Walks
    /// the socket table.
    pub fn tcp_invariant_violation(&self) -> Option<(FourTuple, &'static str)> {
        let (_, sockets) = self.tcp_view();
        sockets.iter().find_map(|s| match s {
            Socket::Tcp(TcpState::Conn(c)) => {
                c.conn.invariant_violation().map(|v| (c.key().tuple(), v))
            }
            _ => None,
        })
    }
}

impl TcpCx<'_> {
    /// See [`Stack::tcp_set_moved_forward`].
    pub(crate) fn tcp_set_moved_forward(
        &mut self,
        tuple: FourTuple,
        dest: u16,
    ) -> Result<(), SocketError> {
        let i = self
            .tcp
            .moved_slot(self.sockets, tuple)
            .ok_or(SocketError::InvalidState)?;
        let m = self.moved_mut(i).ok_or(SocketError::InvalidState)?;
        m.forward = Some(dest);
        Ok(())
    }

    /// See [`Stack::tcp_release_moved`].
    pub(crate) fn tcp_release_moved(&mut self, tuple: FourTuple) -> Result<(), SocketError> {
        let i = self
            .tcp
            .moved_slot(self.sockets, tuple)
            .ok_or(SocketError::InvalidState)?;
        if self.moved_mut(i).is_some_and(|m| m.bypass.is_some()) {
            // A bypass socket goes with the engine's de-allocation, not with a driver's release.
            return Err(SocketError::InvalidState);
        }
        self.tcp_drop_marker(i);
        Ok(())
    }

    /// See [`Stack::poll_forward`].
    pub(crate) fn poll_forward(&mut self) -> Option<(u16, Vec<u8>, wire::RxMeta)> {
        self.tcp.forward.pop_front()
    }

    /// See [`Stack::tcp_listen`].
    pub(crate) fn tcp_listen(
        &mut self,
        local: SocketAddr,
        backlog: usize,
    ) -> Result<SocketHandle, SocketError> {
        let ip = local.ip();
        if !ip.is_unspecified() && !self.egress.is_our_ip(ip) {
            return Err(SocketError::AddrNotAvailable);
        }
        let port = if local.port() == 0 {
            self.sockets
                .pick_ephemeral(|s, p| !tcp_port_listened(s, ip, p))
                .ok_or(SocketError::NoFreePort)?
        } else {
            if tcp_port_listened(self.sockets, ip, local.port()) {
                return Err(SocketError::AddrInUse);
            }
            local.port()
        };
        let listener = Listener {
            local: SocketAddr::new(ip, port),
            pending: VecDeque::new(),
            backlog_max: backlog.clamp(1, self.cfg.limits.tcp_backlog_max.max(1)),
            config: self.cfg.tcp,
            fastopen_queue_max: 0,
            fastopen_keys: None,
            sock_opts: Default::default(),
        };
        self.sockets
            .alloc(Socket::Tcp(TcpState::Listener(Box::new(listener))))
    }

    /// See [`Stack::tcp_accept`].
    pub(crate) fn tcp_accept(
        &mut self,
        listener: SocketHandle,
    ) -> Result<(SocketHandle, SocketAddr), SocketError> {
        let li = self.sockets.index(listener)?;
        let pending: Vec<usize> = match self.listener_mut(li) {
            Some(l) => l.pending.iter().copied().collect(),
            None => return Err(SocketError::WrongSocketType),
        };
        for ci in pending {
            let Some(c) = self.conn_mut(ci) else {
                continue;
            };
            // A Fast Open child may be accepted before its handshake completes.
            let fast_open = c.conn.is_fast_open_child() && c.conn.state() == State::SynReceived;
            // A child reset before `accept` that holds data is handed over all the same.
            let dead_with_data = c.conn.state() == State::Closed && c.conn.recv_queue_bytes() > 0;
            if !c.conn.state().is_synchronized() && !fast_open && !dead_with_data {
                continue;
            }
            c.parent = None;
            let remote = c.key().tuple().remote;
            if let Some(l) = self.listener_mut(li) {
                l.pending.retain(|&x| x != ci);
            }
            let Some((handle, waiting)) = self.sockets.take_pending(ci) else {
                continue;
            };
            // Report what happened while it waited in the backlog.
            if !waiting.is_empty() {
                self.sockets.notify(ci, waiting);
            }
            return Ok((handle, remote));
        }
        Err(SocketError::WouldBlock)
    }

    /// See [`Stack::tcp_connect`].
    pub(crate) fn tcp_connect(
        &mut self,
        now: u64,
        remote: SocketAddr,
        local_port: u16,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_mem_admit_connect()?;
        let local_ip = self
            .egress
            .select_source(remote.ip())
            .ok_or(SocketError::NoRoute)?;
        let tcp = &*self.tcp;
        let in_use = |sockets: &Sockets, p: u16| {
            let t = FourTuple {
                local: SocketAddr::new(local_ip, p),
                remote,
            };
            // A 4-tuple in TIME-WAIT is in use too (RFC 9293 §3.6).
            let key = tcp.flow_key(t, None);
            tcp.holds(sockets, &key) || tcp.tw_find(&key).is_some()
        };
        let port = if local_port != 0 {
            if in_use(self.sockets, local_port) {
                return Err(SocketError::AddrInUse);
            }
            local_port
        } else {
            let home = self.tcp.rss_home.as_ref();
            pick_connect_port(self.cfg, home, self.sockets, local_ip, remote, in_use)?
        };
        let tuple = FourTuple {
            local: SocketAddr::new(local_ip, port),
            remote,
        };
        let key = self.tcp.flow_key(tuple, None);
        let config = self.tcp.config_for(&self.cfg.tcp, remote.is_ipv4());
        let (iss, ts_offset) = self.tcp.isn_for(now, &tuple);
        let conn = Connection::connect(now, &config, port, remote.port(), iss, ts_offset);
        let sock = ConnSock::new(
            key,
            platform::huge_box::HugeBox::new(conn),
            now,
            None,
            false,
            None,
        );
        let h = self.sockets.alloc(Socket::Tcp(TcpState::Conn(sock)))?;
        self.tcp.conns.insert(key.table_hash, h.index as usize);
        self.tcp.dirty.insert(h.index as usize);
        Ok(h)
    }

    /// See [`Stack::tcp_send`].
    pub(crate) fn tcp_send(&mut self, h: SocketHandle, data: &[u8]) -> Result<usize, SocketError> {
        self.tcp_send_flagged(h, data, crate::SendFlags::default())
    }

    /// See [`Stack::tcp_send_more`].
    pub(crate) fn tcp_send_more(
        &mut self,
        h: SocketHandle,
        data: &[u8],
    ) -> Result<usize, SocketError> {
        let flags = crate::SendFlags {
            more: true,
            ..crate::SendFlags::default()
        };
        self.tcp_send_flagged(h, data, flags)
    }

    /// See [`Stack::tcp_recv`].
    pub(crate) fn tcp_recv(
        &mut self,
        h: SocketHandle,
        out: &mut [u8],
    ) -> Result<usize, SocketError> {
        self.prefetch_handle(h);
        if let Some(r) = self.bypass_read(h, out) {
            return r;
        }
        let (i, c) = self.conn_for(h)?;
        let n = c
            .conn
            .recv(out)
            .map_err(|e| c.report_once(map_tcp_error(e), SocketError::Finished))?;
        // Reading may open the window: a window update may be due.
        self.tcp_after_input(i);
        if n == 0 && !out.is_empty() {
            return Err(SocketError::WouldBlock);
        }
        Ok(n)
    }

    /// See [`Stack::tcp_shutdown`].
    pub(crate) fn tcp_shutdown(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        if let Some(r) = self.bypass_shutdown(h) {
            return r;
        }
        let (i, c) = self.conn_for(h)?;
        c.conn.shutdown_write().map_err(map_tcp_error)?;
        self.tcp_after_input(i);
        Ok(())
    }

    /// See [`Stack::tcp_abort`].
    pub(crate) fn tcp_abort(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        if let Some(r) = self.bypass_abort(h) {
            return r;
        }
        let (i, c) = self.conn_for(h)?;
        c.conn.abort();
        self.tcp_after_input(i);
        Ok(())
    }

    pub(crate) fn conn_for(
        &mut self,
        h: SocketHandle,
    ) -> Result<(usize, &mut ConnSock), SocketError> {
        let i = self.sockets.index(h)?;
        match self.conn_mut(i) {
            Some(c) if c.parent.is_none() => Ok((i, c)),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// `close` for TCP sockets: a listener goes at once (children not yet accepted are
    /// aborted); a connection closes (FIN after queued data, or RST if unread data remains,
    /// per the engine) and its slot is freed when the engine is done.
    pub(crate) fn tcp_close(&mut self, _now: u64, i: usize) -> Result<(), SocketError> {
        if self.bypass_close(i) {
            return Ok(());
        }
        if let Some(l) = self.listener_mut(i) {
            let children: Vec<usize> = l.pending.drain(..).collect();
            self.free_slot(i);
            for ci in children {
                if let Some(c) = self.conn_mut(ci) {
                    c.conn.abort();
                    c.parent = None;
                    c.app_closed = true;
                }
                self.tcp_after_input(ci);
            }
            return Ok(());
        }
        let Some(c) = self.conn_mut(i) else {
            return Err(SocketError::WrongSocketType);
        };
        c.app_closed = true;
        if c.conn.state() != State::Closed {
            // An error here only says the connection is already closing or closed.
            let _ = c.conn.close();
        }
        self.tcp_after_input(i);
        // Already finished and flushed: free now rather than waiting for the next flush.
        if self.conn_mut(i).is_some_and(|c| !c.in_table) {
            self.free_slot(i);
        }
        Ok(())
    }

    /// The TCP side of [`Stack::set_option`] for the socket in slot `i`.
    pub(crate) fn set_option(&mut self, i: usize, opt: SocketOption) -> Result<(), SocketError> {
        if let Some(r) = self.bypass_option(i, opt) {
            return r;
        }
        if let Some(r) = self.notify_option(i, opt) {
            return r;
        }
        let Some(Socket::Tcp(t)) = self.sockets.get_mut(i) else {
            return Err(SocketError::WrongSocketType);
        };
        match (t, opt) {
            (TcpState::Listener(_), SocketOption::UdpRxQueueDatagrams(_)) => {
                Err(SocketError::WrongSocketType)
            }
            // A cork belongs to a connection's writes; accepted connections start uncorked.
            (TcpState::Listener(_), SocketOption::Cork(_)) => Err(SocketError::InvalidState),
            (TcpState::Listener(l), SocketOption::NoDelay(v)) => {
                l.config.nodelay = v;
                Ok(())
            }
            (TcpState::Listener(l), SocketOption::KeepaliveIdleNs(v)) => {
                l.config.keepalive = v.map(|idle_ns| tcp::KeepaliveConfig {
                    idle_ns,
                    ..tcp::KeepaliveConfig::default()
                });
                Ok(())
            }
            (TcpState::Listener(l), SocketOption::UserTimeoutNs(v)) => {
                l.config.user_timeout_ns = v;
                Ok(())
            }
            (TcpState::Listener(l), SocketOption::MaxSegment(v)) => {
                // Still clamped to the interface MTU at accept (`tcp_config_for`).
                l.config.mss_bytes = v;
                Ok(())
            }
            (TcpState::Listener(l), SocketOption::SendBufferBytes(v)) => {
                l.config.send_buffer_bytes = v;
                // Linux `SOCK_SNDBUF_LOCK`, inherited by the children.
                l.config.send_buffer_autotune = false;
                Ok(())
            }
            (TcpState::Listener(l), SocketOption::SynRetries(v)) => {
                // Its children's SYN-ACK retransmissions.
                l.config.syn_retries_max = v;
                Ok(())
            }
            (TcpState::Listener(l), SocketOption::FastOpenQueue(v)) => {
                l.fastopen_queue_max = v;
                Ok(())
            }
            (TcpState::Listener(_), SocketOption::FastOpenKey(key)) => {
                self.fastopen_set_listener_key(i, key)
            }
            (TcpState::Conn(c), SocketOption::SendBufferBytes(v)) => {
                c.conn.set_send_buffer_by_application(v);
                // A larger buffer may make the socket writable.
                self.tcp.dirty.insert(i);
                Ok(())
            }
            (TcpState::Conn(c), SocketOption::MaxSegment(v)) => {
                c.conn.set_mss_cap(v).map_err(|_| SocketError::InvalidState)
            }
            (TcpState::Conn(c), SocketOption::NoDelay(v)) => {
                c.conn.set_nodelay(v);
                self.tcp.dirty.insert(i);
                Ok(())
            }
            (TcpState::Conn(c), SocketOption::UserTimeoutNs(v)) => {
                c.conn.set_user_timeout(v);
                self.tcp.dirty.insert(i);
                Ok(())
            }
            (TcpState::Conn(c), SocketOption::SynRetries(v)) => {
                c.conn.set_syn_retries(v);
                Ok(())
            }
            (TcpState::Conn(c), SocketOption::Cork(v)) => {
                c.conn.set_cork(v);
                self.tcp.dirty.insert(i);
                Ok(())
            }
            (TcpState::Conn(_) | TcpState::Listener(_), _) => Err(SocketError::InvalidState),
            (TcpState::Moved(_), _) => Err(SocketError::InvalidHandle),
        }
    }
}

/// A source port for an active open to `remote` that `in_use` does not reject: with an RSS
/// home queue configured, one whose replies hash back to this shard, else the next free
/// ephemeral port.
fn pick_connect_port(
    cfg: &StackConfig,
    home: Option<&(rss::Reta, u16)>,
    sockets: &mut Sockets,
    local_ip: IpAddr,
    remote: SocketAddr,
    in_use: impl Fn(&Sockets, u16) -> bool,
) -> Result<u16, SocketError> {
    if let Some(rss) = &cfg.rss {
        if let Some((reta, queue)) = home {
            let query = rss::SourcePortQuery {
                local: local_ip,
                remote: remote.ip(),
                remote_port: remote.port(),
                wanted_queue: *queue,
                range: EPHEMERAL_FIRST..=EPHEMERAL_LAST,
                start_hint: sockets.next_ephemeral(),
            };
            let taken: &Sockets = sockets;
            let port = rss::pick_source_port(&query, reta, &rss.hasher, |p| in_use(taken, p))
                .ok_or(SocketError::NoFreePort)?;
            sockets.ephemeral_taken(port);
            return Ok(port);
        }
    }
    sockets
        .pick_ephemeral(|s, p| !in_use(s, p))
        .ok_or(SocketError::NoFreePort)
}
