//! Moving live connections out of and into this stack (DESIGN "Handoff protocol"): export and
//! import of one connection, the same for a connection still waiting in a listener's backlog,
//! the connections of one RETA bucket (live rebalancing moves a bucket at a time), forward
//! markers for connections another owner keeps, and the RETA that active opens pick source
//! ports for.
//!
//! Every move leaves a *moved marker* in the exporter's table (see
//! [`crate::tcp_sockets::MovedMarker`]), so a segment that still arrives there is never answered
//! with RST: it is dropped before any processing or forwarded to the new owner in arrival order.

use tcp::State;

use crate::socket::{Readiness, SocketError, SocketHandle};
use crate::sockets::Socket;
use crate::stack::Stack;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{ConnSock, FourTuple, MovedMarker, TcpState, slot_key};

/// What moving one connection of a bucket would take, by the connection's situation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveClass {
    /// The application owns it (accepted or opened, not closed): `handle` names it here.
    /// It can move once `synchronized` (ESTABLISHED or later), with the application's
    /// per-connection state.
    Owned {
        handle: SocketHandle,
        synchronized: bool,
    },
    /// Established and waiting in a listener's backlog: it moves without the application
    /// (into the new owner's listener on the same port, [`Stack::tcp_import_unowned`]).
    Backlog,
    /// Synchronized, and the application already closed it (FIN-WAIT, CLOSING, LAST-ACK,
    /// TIME-WAIT): it moves without the application and finishes on the new owner.
    Orphan,
    /// It cannot move now: a handshake in progress (SYN-SENT, SYN-RECEIVED). Its owner keeps
    /// it until it is synchronized or gone, and the new owner of its bucket forwards its
    /// segments there.
    Pinned,
    /// A moved marker: the connection already left (or another owner keeps it and frames are
    /// forwarded there).
    Marker,
}

/// A connection no application handle names, as it moves ([`Stack::tcp_export_unowned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unowned {
    /// Established, waiting in a listener's backlog for `accept`.
    Backlog,
    /// Closed by the application, finishing its close.
    Orphan,
}

/// One TCP connection of a RETA bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketConn {
    pub tuple: FourTuple,
    pub class: MoveClass,
}

impl Stack {
    /// Every entry of the connection table whose flow hash falls in entry `bucket` of a RETA
    /// with `reta_entries` entries (a power of two: the NIC's `hash & (entries − 1)`), appended
    /// to `out` in slot order (deterministic). Meaningful when the stack's flow hash is the
    /// NIC's (an RSS key is configured); otherwise the buckets are those of the stack's own
    /// software hash.
    pub fn tcp_bucket_conns(&self, reta_entries: usize, bucket: usize, out: &mut Vec<BucketConn>) {
        let mask = reta_entries.max(1).next_power_of_two() - 1;
        let (tcp, sockets) = self.tcp_view();
        // Slot order, not the table's.
        let mut slots: Vec<usize> = tcp
            .conns
            .slots()
            .filter(|&i| slot_key(sockets, i).is_some_and(|k| (k.hash as usize) & mask == bucket))
            .collect();
        slots.sort_unstable();
        for i in slots {
            if let (Some(key), Some(class)) = (slot_key(sockets, i), tcp.move_class(sockets, i)) {
                out.push(BucketConn {
                    tuple: key.tuple(),
                    class,
                });
            }
        }
        // Then the TIME-WAIT records (no slot: in their tables' order), which move as
        // connections the application closed.
        let tw4 = tcp.tw4.iter().map(|(_, r)| r.tuple());
        let tw6 = tcp.tw6.iter().map(|(_, r)| r.tuple());
        for tuple in tw4.chain(tw6) {
            if (tcp.flow_key(tuple, None).hash as usize) & mask == bucket {
                out.push(BucketConn {
                    tuple,
                    class: MoveClass::Orphan,
                });
            }
        }
    }

    /// The RETA entry (of `reta_entries`, a power of two) `tuple`'s flow hash falls in, if
    /// `tuple` has a connection or marker here.
    pub fn tcp_flow_bucket(&self, tuple: FourTuple, reta_entries: usize) -> Option<u16> {
        let (tcp, sockets) = self.tcp_view();
        let key = tcp.flow_key(tuple, None);
        if !tcp.holds(sockets, &key) {
            tcp.tw_find(&key)?;
        }
        let mask = reta_entries.max(1).next_power_of_two() - 1;
        u16::try_from(key.hash as usize & mask).ok()
    }

    /// The 4-tuple of every live connection here (moved markers excluded), appended to `out`
    /// in no particular order: for checkers that a connection lives in one place only.
    pub fn tcp_live_tuples(&self, out: &mut Vec<FourTuple>) {
        let (tcp, sockets) = self.tcp_view();
        out.extend(tcp.conns.slots().filter_map(|i| match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Some(c.key().tuple()),
            _ => None,
        }));
        out.extend(tcp.tw4.iter().map(|(_, r)| r.tuple()));
        out.extend(tcp.tw6.iter().map(|(_, r)| r.tuple()));
    }

    /// How the connection of `tuple` stands for a move (`None`: no connection or marker).
    pub fn tcp_move_class(&self, tuple: FourTuple) -> Option<MoveClass> {
        let (tcp, sockets) = self.tcp_view();
        let key = tcp.flow_key(tuple, None);
        let Some(i) = tcp.lookup(sockets, &key) else {
            // A TIME-WAIT record moves as a connection the application closed.
            return tcp.tw_find(&key).map(|_| MoveClass::Orphan);
        };
        tcp.move_class(sockets, i)
    }

    /// Like [`Stack::tcp_export`], for a connection no application handle names: one waiting
    /// in a listener's backlog ([`MoveClass::Backlog`]) or one the application closed
    /// ([`MoveClass::Orphan`]). A moved marker takes its slot. `InvalidState` when `tuple` is
    /// neither.
    pub fn tcp_export_unowned(
        &mut self,
        now: u64,
        tuple: FourTuple,
    ) -> Result<(tcp::ConnectionSnapshot, Unowned), SocketError> {
        let mut cx = self.tcp_cx();
        let key = cx.tcp.flow_key(tuple, None);
        if !cx.tcp.holds(cx.sockets, &key) {
            let snapshot = cx
                .tcp_time_wait_export(now, &key)
                .ok_or(SocketError::InvalidState)??;
            cx.tcp.counters.tcp_unowned_exported += 1;
            return Ok((snapshot, Unowned::Orphan));
        }
        let i = cx
            .tcp
            .lookup(cx.sockets, &key)
            .ok_or(SocketError::InvalidState)?;
        let kind = match cx.tcp.move_class(cx.sockets, i) {
            Some(MoveClass::Backlog) => Unowned::Backlog,
            Some(MoveClass::Orphan) => Unowned::Orphan,
            _ => return Err(SocketError::InvalidState),
        };
        let (_, snapshot) = cx.export_slot(now, i, None)?;
        cx.tcp.counters.tcp_unowned_exported += 1;
        Ok((snapshot, kind))
    }

    /// Like [`Stack::tcp_import`], for a connection no application handle names:
    /// [`Unowned::Backlog`] joins the backlog of this stack's listener for `tuple.local` and
    /// waits for `accept` as if its handshake had completed here (the listener becomes
    /// readable; no listener is `InvalidState`, a full backlog `WouldBlock`);
    /// [`Unowned::Orphan`] finishes its close here, its slot freed when the engine is done.
    pub fn tcp_import_unowned(
        &mut self,
        now: u64,
        tuple: FourTuple,
        snapshot: &tcp::ConnectionSnapshot,
        kind: Unowned,
    ) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        let parent = match kind {
            Unowned::Orphan => None,
            Unowned::Backlog => {
                let li = cx
                    .tcp
                    .find_listener(cx.sockets, tuple.local.ip(), tuple.local.port())
                    .ok_or(SocketError::InvalidState)?;
                let full = cx
                    .listener_mut(li)
                    .is_none_or(|l| l.pending.len() >= l.backlog_max);
                if full {
                    return Err(SocketError::WouldBlock);
                }
                Some(li)
            }
        };
        let h = cx.import_slot(now, tuple, Snap::Borrowed(snapshot), parent)?;
        let i = h.index as usize;
        if kind == Unowned::Orphan {
            if let Some(c) = cx.conn_mut(i) {
                c.app_closed = true;
            }
            // Nobody will read its readiness.
            let _ = cx.sockets.take_pending(i);
        }
        cx.tcp.counters.tcp_unowned_imported += 1;
        Ok(())
    }

    /// Forwards frames for `tuple`, a connection this stack does not own (another shard keeps
    /// it while its bucket moves here), to `dest` through [`Stack::poll_forward`], never
    /// answering them: a moved marker with a destination, as after an export. It goes on
    /// [`Stack::tcp_import`] of the tuple (the owner hands the connection over after all),
    /// [`Stack::tcp_release_moved`] (the owner's connection ended), or expiry. `AddrInUse`
    /// when this stack has a live connection for `tuple`; an existing marker is redirected.
    pub fn tcp_forward_unowned(
        &mut self,
        now: u64,
        tuple: FourTuple,
        dest: u16,
    ) -> Result<(), SocketError> {
        let mut cx = self.tcp_cx();
        if let Some(i) = cx.tcp.moved_slot(cx.sockets, tuple) {
            if let Some(m) = cx.moved_mut(i) {
                m.forward = Some(dest);
            }
            return Ok(());
        }
        let key = cx.tcp.flow_key(tuple, None);
        if cx.tcp.holds(cx.sockets, &key) {
            return Err(SocketError::AddrInUse);
        }
        if let Some(pos) = cx.tcp.tw_find(&key) {
            // Another owner keeps the 4-tuple now: a record of it here is stale.
            cx.tcp.tw_remove(pos);
            cx.tcp.counters.tcp_connections_closed += 1;
        }
        let expires_ns = now.saturating_add(cx.cfg.limits.tcp_moved_marker_ns);
        let marker = TcpState::Moved(MovedMarker {
            key,
            expires_ns,
            forward: Some(dest),
            bypass: None,
        });
        let h = cx.sockets.alloc(Socket::Tcp(marker))?;
        let i = h.index as usize;
        cx.tcp.conns.insert(key.table_hash, i);
        cx.tcp.moved += 1;
        cx.tcp.timers.insert(i, expires_ns);
        cx.tcp.counters.tcp_forward_markers_set += 1;
        Ok(())
    }

    /// Points entry `bucket` of the RETA that active opens pick source ports for at `queue`
    /// (a rebalancer moved the bucket). `InvalidState` without an RSS home; `InvalidInput`-like
    /// `InvalidState` for an entry out of range.
    pub fn set_rss_home_entry(&mut self, bucket: usize, queue: u16) -> Result<(), SocketError> {
        let cx = self.tcp_cx();
        let (reta, _) = cx.tcp.rss_home.as_mut().ok_or(SocketError::InvalidState)?;
        reta.set(bucket, queue)
            .map_err(|_| SocketError::InvalidState)
    }
}

impl crate::tcp_sockets::TcpTable {
    /// How the socket in slot `i` stands for a move (`None` for listeners and empty slots).
    pub(crate) fn move_class(
        &self,
        sockets: &crate::sockets::Sockets,
        i: usize,
    ) -> Option<MoveClass> {
        match sockets.get(i)? {
            Socket::Tcp(TcpState::Moved(_)) => Some(MoveClass::Marker),
            Socket::Tcp(TcpState::Conn(c)) => Some(conn_class(sockets, i, c)),
            _ => None,
        }
    }
}

fn conn_class(sockets: &crate::sockets::Sockets, i: usize, c: &ConnSock) -> MoveClass {
    let synchronized = c.conn.state().is_synchronized();
    if !c.in_table || c.error.is_some() {
        // Finished, or ended by an error the application has not taken: it stays.
        return MoveClass::Pinned;
    }
    if c.app_closed {
        return if synchronized && c.conn.state() != State::Closed {
            MoveClass::Orphan
        } else {
            MoveClass::Pinned
        };
    }
    if c.parent.is_some() {
        return if synchronized {
            MoveClass::Backlog
        } else {
            MoveClass::Pinned
        };
    }
    match sockets.handle_of(i) {
        Some(handle) => MoveClass::Owned {
            handle,
            synchronized,
        },
        None => MoveClass::Pinned,
    }
}

/// A snapshot to import: borrowed (its bytes copied into the new rings) or given up (the
/// rings adopt its vectors, `tcp::Connection::import_owned`).
// A parameter that lives for one call, never stored: boxing the owned snapshot would cost an
// allocation per import for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Snap<'a> {
    Borrowed(&'a tcp::ConnectionSnapshot),
    Owned(tcp::ConnectionSnapshot),
}

impl Snap<'_> {
    fn get(&self) -> &tcp::ConnectionSnapshot {
        match self {
            Snap::Borrowed(s) => s,
            Snap::Owned(s) => s,
        }
    }
}

impl TcpCx<'_> {
    /// See [`Stack::tcp_export`].
    pub(crate) fn tcp_export(
        &mut self,
        now: u64,
        h: SocketHandle,
    ) -> Result<(FourTuple, tcp::ConnectionSnapshot), SocketError> {
        let (i, _) = self.conn_for(h)?;
        self.export_slot(now, i, None)
    }

    /// Exports the connection in slot `i` (an application's, or a backlog child's): flushes
    /// a delayed ACK and owed output, freezes the connection, and leaves a moved marker in its
    /// slot and table entry. With `buffers`, the exported connection's send and receive rings
    /// (their readable bytes are the snapshot's send and received bytes) are put there
    /// instead of being freed with it, after its memory was forgotten.
    pub(crate) fn export_slot(
        &mut self,
        now: u64,
        i: usize,
        buffers: Option<&mut Option<(tcp::ring::Ring, tcp::ring::Ring)>>,
    ) -> Result<(FourTuple, tcp::ConnectionSnapshot), SocketError> {
        let c = self.conn_mut(i).ok_or(SocketError::InvalidHandle)?;
        c.conn.flush_delayed_ack();
        self.tcp.dirty.insert(i);
        if !self.tcp_flush_one(now, i) {
            return Err(SocketError::WouldBlock);
        }
        let c = self.conn_mut(i).ok_or(SocketError::InvalidHandle)?;
        let mut snapshot = c.conn.export(now).map_err(|e| match e {
            tcp::SnapshotError::OutputPending => SocketError::WouldBlock,
            tcp::SnapshotError::NotSynchronized | tcp::SnapshotError::Inconsistent => {
                SocketError::InvalidState
            }
        })?;
        // The socket's options and notification queues go with it.
        if let Some(ext) = c.ext() {
            ext.encode(&mut snapshot.socket_ext);
        }
        let key = c.key();
        let parent = c.parent.take().map(|p| p as usize);
        c.in_table = false;
        if let Some(li) = parent {
            if let Some(l) = self.listener_mut(li) {
                l.pending.retain(|&x| x != i);
            }
        }
        self.tcp_rearm(i);
        self.tcp.dirty.remove(i);
        // The table keeps the key, now naming the marker that takes the slot.
        let expires_ns = now.saturating_add(self.cfg.limits.tcp_moved_marker_ns);
        let marker = TcpState::Moved(MovedMarker {
            key,
            expires_ns,
            forward: None,
            bypass: None,
        });
        if let Some(Socket::Tcp(TcpState::Conn(mut c))) =
            self.sockets.replace(i, Socket::Tcp(marker))
        {
            self.tcp.counters_released.add(&c.engine_counters());
            self.tcp.forget_source(&c);
            crate::tcp_mem::mem_forget(self.tcp, &c);
            self.tcp_mem_judge();
            if let Some(out) = buffers {
                *out = Some(c.conn.take_buffers());
            }
        }
        self.tcp.moved += 1;
        self.tcp.timers.insert(i, expires_ns);
        self.tcp.counters.tcp_connections_exported += 1;
        Ok((key.tuple(), snapshot))
    }

    /// See [`Stack::tcp_import`] and [`Stack::tcp_import_owned`].
    pub(crate) fn tcp_import(
        &mut self,
        now: u64,
        tuple: FourTuple,
        snapshot: Snap<'_>,
    ) -> Result<SocketHandle, SocketError> {
        let h = self.import_slot(now, tuple, snapshot, None)?;
        self.tcp.counters.tcp_connections_imported += 1;
        Ok(h)
    }

    /// Imports a connection into a fresh slot, or into the slot of its moved marker (keeping
    /// the handle it had here); `parent`: the listener whose backlog it joins.
    fn import_slot(
        &mut self,
        now: u64,
        tuple: FourTuple,
        snapshot: Snap<'_>,
        parent: Option<usize>,
    ) -> Result<SocketHandle, SocketError> {
        if !self.egress.is_our_ip(tuple.local.ip())
            || tuple.local.is_ipv4() != tuple.remote.is_ipv4()
        {
            return Err(SocketError::AddrNotAvailable);
        }
        // Checked before anything changes: bytes our export did not write refuse the import.
        let ext = match snapshot.get().socket_ext.as_slice() {
            [] => None,
            bytes => Some(Box::new(
                crate::tcp_notify::SockExt::decode(bytes).ok_or(SocketError::InvalidState)?,
            )),
        };
        let errors_queued = ext.as_ref().is_some_and(|e| e.has_queued());
        let key = self.tcp.flow_key(tuple, None);
        let marker = self.tcp.moved_slot(self.sockets, tuple);
        if marker.is_none() && self.tcp.holds(self.sockets, &key) {
            return Err(SocketError::AddrInUse);
        }
        let conn = match snapshot {
            Snap::Borrowed(s) => tcp::Connection::import(now, s),
            Snap::Owned(s) => tcp::Connection::import_owned(now, s),
        };
        let mut conn = conn.map_err(|_| SocketError::InvalidState)?;
        // Share the configuration with this stack's connections that have an equal one.
        let shared = self.tcp.configs.get(*conn.config());
        conn.share_config(&shared);
        if let Some(pos) = self.tcp.tw_find(&key) {
            // The connection comes back (or another owner's incarnation arrives): a record
            // of an earlier one here is stale, and a 4-tuple is never both a connection and
            // a record.
            self.tcp.tw_remove(pos);
            self.tcp.counters.tcp_connections_closed += 1;
        }
        let readable = conn.recv_queue_bytes() > 0;
        // Not counted against its source here (not `passive`), nor reclaimed by the
        // overload policy: it was admitted by the stack it came from.
        let parent_slot = parent.and_then(|p| u32::try_from(p).ok());
        let sock = ConnSock::new(
            key,
            platform::huge_box::HugeBox::new(conn),
            now,
            parent_slot,
            false,
            ext,
        );
        let socket = Socket::Tcp(TcpState::Conn(sock));
        let h = match marker {
            Some(mi) => {
                // The slot must still hold the marker; its expiry leaves the wheel.
                self.moved_mut(mi).ok_or(SocketError::InvalidState)?;
                self.tcp.timers.remove(mi);
                self.tcp.moved -= 1;
                self.sockets
                    .reuse(mi, socket)
                    .ok_or(SocketError::InvalidState)?
            }
            None => self.sockets.alloc(socket)?,
        };
        let i = h.index as usize;
        self.tcp.conns.insert(key.table_hash, i);
        self.tcp_after_input(i);
        let mut ready = Readiness::WRITABLE;
        if readable {
            ready |= Readiness::READABLE;
        }
        if errors_queued {
            ready |= Readiness::ERROR_QUEUE;
        }
        match parent {
            Some(li) => {
                if let Some(l) = self.listener_mut(li) {
                    l.pending.push_back(i);
                }
                self.sockets.add_pending(i, ready);
                self.sockets.notify(li, Readiness::READABLE);
            }
            None => self.sockets.notify(i, ready),
        }
        Ok(h)
    }
}
