//! The accept-and-dispatch loop shared by the byte-stream servers ([`crate::echo`],
//! [`crate::discard`], [`crate::ttcp::TtcpReceiver`]): one listener per shard, one session per
//! accepted connection, sessions worked on their readiness events until they end.
//!
//! Invariants: a session is in the table from its accept until it ends; an ended session's
//! connection has been released with [`Ctx::close`] exactly once (after a `shutdown` when it
//! ended cleanly, an abort when it was cut off), and the caller's `ended` callback saw it
//! exactly once. A session with a deadline ([`Handler::deadline`]) has exactly one entry in
//! the deadline set, at that deadline; one without has none.

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
    /// Cut off by the server (a timeout with data still owed): the connection is aborted
    /// (RST), so its buffers are freed at once instead of waiting for a stalled peer.
    Aborted,
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
    /// The session ended (`Done`, `Failed` or `Aborted`); its connection is already released.
    fn ended(&mut self, s: Self::Session, step: Step);
    /// When the session must be looked at again without an event (ns), if ever: after each
    /// `service` the server files the session under this deadline.
    fn deadline(&self, s: &Self::Session) -> Option<u64> {
        let _ = s;
        None
    }
    /// The session's deadline passed at `now_ns` with no event: the step it ends with (or
    /// `Open` to keep it, filed again under its new deadline).
    fn expired(&mut self, s: &mut Self::Session, ctx: &mut Ctx<'_>, conn: Conn) -> Step {
        let _ = (s, ctx, conn);
        Step::Open
    }
}

/// One shard's listener and its sessions of type `S`.
#[derive(Debug)]
pub(crate) struct StreamServer<S> {
    port: u16,
    listener: Option<Listener>,
    /// Each session with the deadline it is filed under in `deadlines`.
    sessions: BTreeMap<SocketHandle, (Conn, S, Option<u64>)>,
    deadlines: BTreeSet<(u64, SocketHandle)>,
}

impl<S> StreamServer<S> {
    pub(crate) fn new(port: u16) -> Self {
        StreamServer {
            port,
            listener: None,
            sessions: BTreeMap::new(),
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

    /// The earliest session deadline.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        self.deadlines.first().map(|&(t, _)| t)
    }

    /// Ends or re-files every session whose deadline is at or before now.
    fn expire_due<H: Handler<Session = S>>(&mut self, ctx: &mut Ctx<'_>, h: &mut H) {
        let now = ctx.now_ns();
        while let Some(&(t, handle)) = self.deadlines.first() {
            if t > now {
                break;
            }
            self.deadlines.pop_first();
            let Some((conn, s, filed)) = self.sessions.get_mut(&handle) else {
                continue;
            };
            *filed = None;
            let conn = *conn;
            let step = h.expired(s, ctx, conn);
            self.finish(ctx, handle, step, h);
        }
    }

    /// Handles a batch of events: accepts every waiting connection, works each session with
    /// an event, and ends sessions that finished, failed, or whose connection reported an
    /// error or reached CLOSED.
    pub(crate) fn poll<H: Handler<Session = S>>(
        &mut self,
        ctx: &mut Ctx<'_>,
        events: &[SocketEvent],
        h: &mut H,
    ) {
        self.expire_due(ctx, h);
        for e in events {
            if self.listener.is_some_and(|l| l.owns(e.handle)) {
                self.accept_all(ctx, h);
                continue;
            }
            let Some((conn, s, _)) = self.sessions.get_mut(&e.handle) else {
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
    }

    fn accept_all<H: Handler<Session = S>>(&mut self, ctx: &mut Ctx<'_>, h: &mut H) {
        let Some(l) = self.listener else { return };
        while let Ok((conn, peer)) = ctx.accept(l) {
            let mut s = h.open(ctx, conn, peer);
            // Data (even a FIN) may already be waiting.
            let step = h.service(&mut s, ctx, conn);
            self.sessions.insert(conn.handle(), (conn, s, None));
            self.finish(ctx, conn.handle(), step, h);
        }
    }

    /// Hands the session of `conn` over for a move to another shard (live rebalancing):
    /// removed here, returned as the application's per-connection state.
    pub(crate) fn export(&mut self, conn: Conn) -> Option<app::ConnState>
    where
        S: Send + 'static,
    {
        let (_, s, filed) = self.sessions.remove(&conn.handle())?;
        if let Some(t) = filed {
            self.deadlines.remove(&(t, conn.handle()));
        }
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
        self.sessions.insert(conn.handle(), (conn, *s, None));
        if let Some((conn, s, _)) = self.sessions.get_mut(&conn.handle()) {
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
            // Re-file the session under its deadline.
            if let Some((_, s, filed)) = self.sessions.get_mut(&handle) {
                let due = h.deadline(s);
                if due != *filed {
                    if let Some(t) = filed.take() {
                        self.deadlines.remove(&(t, handle));
                    }
                    if let Some(t) = due {
                        self.deadlines.insert((t, handle));
                    }
                    *filed = due;
                }
            }
            return;
        }
        let Some((conn, s, filed)) = self.sessions.remove(&handle) else {
            return;
        };
        if let Some(t) = filed {
            self.deadlines.remove(&(t, handle));
        }
        match step {
            // Our FIN follows what is queued; an error only says it is already closing.
            Step::Done => {
                let _ = ctx.shutdown(conn);
            }
            Step::Aborted => {
                let _ = ctx.stack().tcp_abort(conn.handle());
            }
            Step::Open | Step::Failed => {}
        }
        let _ = ctx.close(conn);
        h.ended(s, step);
    }
}
