//! The accept-and-dispatch loop shared by the byte-stream servers ([`crate::echo`],
//! [`crate::discard`], [`crate::ttcp::TtcpReceiver`]): one listener per shard, one session per
//! accepted connection, sessions worked on their readiness events until they end.
//!
//! Invariants: a session is in the table from its accept until it ends; an ended session's
//! connection has been released with [`Ctx::close`] exactly once (after a `shutdown` when it
//! ended cleanly), and the caller's `ended` callback saw it exactly once.

use core::net::SocketAddr;
use std::collections::{BTreeMap, BTreeSet};

use stack::{Readiness, SocketError, SocketEvent, SocketHandle};

use app::{Conn, Ctx, Listener};

/// Accept backlog of each shard's listener for the stream servers.
pub(crate) const STREAM_BACKLOG: usize = 128;

/// What one round of work on a session left it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Still open: wait for the next event.
    Open,
    /// Ended cleanly (the peer's FIN was read and everything owed to it was queued).
    Done,
    /// Ended by an error (reset, timeout, a failed call).
    Failed,
}

/// Maps a receive or send error to the step it ends a session with: `WouldBlock` keeps it
/// open, anything else fails it.
pub(crate) fn step_of(e: SocketError) -> Step {
    match e {
        SocketError::WouldBlock => Step::Open,
        _ => Step::Failed,
    }
}

/// What a stream server does with its sessions: the per-application half of a
/// [`StreamServer`] (statistics, scratch buffers), kept apart from the session table so both
/// can be borrowed at once.
pub(crate) trait Handler {
    /// Per-connection state.
    type Session;
    /// A connection was accepted from `peer`.
    fn open(&mut self, ctx: &mut Ctx<'_>, conn: Conn, peer: SocketAddr) -> Self::Session;
    /// Works the connection until its calls would block or it ends.
    fn service(&mut self, s: &mut Self::Session, ctx: &mut Ctx<'_>, conn: Conn) -> Step;
    /// The session ended (`Done` or `Failed`); its connection is already released.
    fn ended(&mut self, s: Self::Session, step: Step);
    /// When the session ends unless something changes (an application timeout), read after
    /// each `service` that leaves it open. `None`: no deadline.
    fn deadline_ns(&self, s: &Self::Session) -> Option<u64> {
        let _ = s;
        None
    }
    /// The session's deadline passed: count it and say how its connection goes, aborted
    /// (true: RST, its buffers freed at once) or closed (false: FIN after what is queued).
    /// `ended(s, Failed)` follows.
    fn timed_out(&mut self, s: &Self::Session) -> bool {
        let _ = s;
        true
    }
}

/// One shard's listener and its sessions of type `S`.
#[derive(Debug)]
pub(crate) struct StreamServer<S> {
    port: u16,
    listener: Option<Listener>,
    sessions: BTreeMap<SocketHandle, (Conn, S)>,
    /// The deadline of every open session that has one (`Handler::deadline_ns`), and the
    /// same as a set in time order. Invariant: `(t, h)` ∈ `deadlines` iff `armed[h] == t`,
    /// and `h` is in `sessions`.
    armed: BTreeMap<SocketHandle, u64>,
    deadlines: BTreeSet<(u64, SocketHandle)>,
}

impl<S> StreamServer<S> {
    pub(crate) fn new(port: u16) -> Self {
        StreamServer {
            port,
            listener: None,
            sessions: BTreeMap::new(),
            armed: BTreeMap::new(),
            deadlines: BTreeSet::new(),
        }
    }

    /// Opens the shard's listener. A listener that cannot open leaves the shard idle (every
    /// accept path checks); the error is returned for the caller to count.
    pub(crate) fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), SocketError> {
        let l = ctx.listen(self.port, STREAM_BACKLOG)?;
        self.listener = Some(l);
        Ok(())
    }

    /// Sets `opt` on the listener's sockets (IPv4 and IPv6): the connections it accepts
    /// inherit it. Without a listener nothing happens.
    pub(crate) fn set_listener_option(&self, ctx: &mut Ctx<'_>, opt: stack::SocketOption) {
        if let Some(l) = self.listener {
            let _ = ctx.stack().set_option(l.handle(), opt);
            let _ = ctx.stack().set_option(l.handle_v6(), opt);
        }
    }

    /// Sessions open now.
    pub(crate) fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Handles a batch of events: accepts every waiting connection, works each session with
    /// an event, and ends sessions that finished, failed, or whose connection reported an
    /// error or reached CLOSED; then those whose deadline passed (`expire`).
    pub(crate) fn poll<H: Handler<Session = S>>(
        &mut self,
        ctx: &mut Ctx<'_>,
        events: &[SocketEvent],
        h: &mut H,
    ) {
        for e in events {
            if self.listener.is_some_and(|l| l.owns(e.handle)) {
                self.accept_all(ctx, h);
                continue;
            }
            let Some((conn, s)) = self.sessions.get_mut(&e.handle) else {
                continue;
            };
            let conn = *conn;
            let mut step = h.service(s, ctx, conn);
            if step == Step::Open
                && (e.readiness.contains(Readiness::ERROR)
                    || e.readiness.contains(Readiness::CLOSED))
            {
                step = Step::Failed;
            }
            self.finish(ctx, e.handle, step, h);
        }
        self.expire(ctx, h);
    }

    fn accept_all<H: Handler<Session = S>>(&mut self, ctx: &mut Ctx<'_>, h: &mut H) {
        let Some(l) = self.listener else { return };
        while let Ok((conn, peer)) = ctx.accept(l) {
            let mut s = h.open(ctx, conn, peer);
            // Data (even a FIN) may already be waiting.
            let step = h.service(&mut s, ctx, conn);
            self.sessions.insert(conn.handle(), (conn, s));
            self.finish(ctx, conn.handle(), step, h);
        }
    }

    /// Hands the session of `conn` over for a move to another shard (live rebalancing):
    /// removed here, returned as the application's per-connection state.
    pub(crate) fn export(&mut self, conn: Conn) -> Option<app::ConnState>
    where
        S: Send + 'static,
    {
        let (_, s) = self.sessions.remove(&conn.handle())?;
        self.disarm(conn.handle());
        Some(Box::new(s))
    }

    /// Takes over a session that moved here with its connection (now `conn`), and works it
    /// at once (what its old shard was waiting for may be ready). State of a foreign type is
    /// refused: the connection is closed, counted by the caller through `ended`.
    pub(crate) fn import<H: Handler<Session = S>>(
        &mut self,
        ctx: &mut Ctx<'_>,
        conn: Conn,
        moved: app::Moved,
        h: &mut H,
    ) where
        S: 'static,
    {
        let Ok(s) = moved.state.downcast::<S>() else {
            let _ = ctx.close(conn);
            return;
        };
        self.sessions.insert(conn.handle(), (conn, *s));
        if let Some((conn, s)) = self.sessions.get_mut(&conn.handle()) {
            let conn = *conn;
            let step = h.service(s, ctx, conn);
            self.finish(ctx, conn.handle(), step, h);
        }
    }

    /// Ends the session of `handle` when `step` says so.
    fn finish<H: Handler<Session = S>>(
        &mut self,
        ctx: &mut Ctx<'_>,
        handle: SocketHandle,
        step: Step,
        h: &mut H,
    ) {
        if step == Step::Open {
            let want = self
                .sessions
                .get(&handle)
                .and_then(|(_, s)| h.deadline_ns(s));
            if self.armed.get(&handle).copied() != want {
                self.disarm(handle);
                if let Some(t) = want {
                    self.armed.insert(handle, t);
                    self.deadlines.insert((t, handle));
                }
            }
            return;
        }
        self.disarm(handle);
        let Some((conn, s)) = self.sessions.remove(&handle) else {
            return;
        };
        if step == Step::Done {
            // Our FIN follows what is queued; an error only says it is already closing.
            let _ = ctx.shutdown(conn);
        }
        let _ = ctx.close(conn);
        h.ended(s, step);
    }

    fn disarm(&mut self, handle: SocketHandle) {
        if let Some(t) = self.armed.remove(&handle) {
            self.deadlines.remove(&(t, handle));
        }
    }

    /// The earliest session deadline (for `App::poll_timeout`).
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        self.deadlines.first().map(|&(t, _)| t)
    }

    /// Ends every session whose deadline is at or before now (`Handler::timed_out` says how),
    /// earliest first.
    pub(crate) fn expire<H: Handler<Session = S>>(&mut self, ctx: &mut Ctx<'_>, h: &mut H) {
        let now = ctx.now_ns();
        while let Some(&(t, handle)) = self.deadlines.first() {
            if t > now {
                break;
            }
            self.disarm(handle);
            let Some((conn, s)) = self.sessions.remove(&handle) else {
                continue;
            };
            if h.timed_out(&s) {
                // An error only says the connection already ended.
                let _ = ctx.stack().tcp_abort(conn.handle());
            } else {
                let _ = ctx.shutdown(conn);
            }
            let _ = ctx.close(conn);
            h.ended(s, Step::Failed);
        }
    }
}
