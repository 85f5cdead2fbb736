//! Hosts made of a real [`stack::Stack`] and a small application, so the simulator runs the
//! production protocol code end to end.
//!
//! A [`StackHost`] owns one stack (one shard's host stack, one Ethernet port: [`PortId`] 0) and
//! one [`App`]. Call order within an activation (see [`Host`]): the stack handles the frame or
//! its timers, then the application runs ([`App::poll`]) and may call the socket API, then the
//! world drains [`Host::poll_transmit`] and re-arms the timer at the earlier of the stack's and
//! the application's deadlines. The application starts at the host's first activation.

use core::any::Any;

use stack::{FourTuple, SocketEvent, SocketHandle, Stack, StackConfig};

use crate::host::{Host, PortId};

/// An application running on a [`StackHost`]: non-blocking calls into the stack's socket API.
///
/// `poll` runs after every activation of the host with the readiness events the stack raised
/// (drained from [`Stack::poll_event`]). Events are edge-triggered: an application that gets one
/// for a socket works that socket until its calls return `WouldBlock`, and need not look at
/// sockets without events — which keeps an activation's work proportional to what happened.
pub trait App: Any {
    /// Runs once, at the host's first activation.
    fn start(&mut self, now_ns: u64, stack: &mut Stack);
    /// Runs after every activation (a frame, a timer, a wake-up) with the events it raised.
    fn poll(&mut self, now_ns: u64, stack: &mut Stack, events: &[SocketEvent]);
    /// The application's own next deadline, if it has one.
    fn poll_timeout(&self) -> Option<u64> {
        None
    }
    /// Asks the host to move a live connection to a fresh stack (see [`StackHost`]): the
    /// handle and how long the snapshot travels, in ns. Checked after every `poll`. Until
    /// [`App::moved`] the application must not touch that handle.
    fn take_move_request(&mut self) -> Option<(SocketHandle, u64)> {
        None
    }
    /// The connection moved: `old` is gone, `new` (on the fresh stack) continues it; `None`
    /// when the move failed and the connection is lost (the reason is in `error`).
    fn moved(&mut self, _now_ns: u64, _old: SocketHandle, _new: Result<SocketHandle, String>) {}
}

/// A connection on its way to a fresh stack.
struct Move {
    old_handle: SocketHandle,
    tuple: FourTuple,
    snapshot: tcp::ConnectionSnapshot,
    import_at_ns: u64,
}

/// What happened to moves, for checkers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoveCounters {
    pub moves: u64,
    /// Frames that arrived while a connection was travelling: dropped before any processing
    /// (DESIGN handoff invariant 4), left to the peer's retransmission.
    pub frames_dropped_in_flight: u64,
}

/// A simulated host: a stack plus an application on one port.
///
/// # Moving a connection
///
/// When the application asks ([`App::take_move_request`]) the host exports the connection
/// (`Stack::tcp_export`, which first flushes a pending delayed ACK), keeps the old stack only to
/// drain what it had queued, and replaces it with a fresh stack built from the same
/// configuration — a new engine with empty caches, as on another machine. While the snapshot
/// travels, arriving frames are dropped before any processing (never answered with a RST); at
/// the arrival time the fresh stack imports the snapshot and the application gets the new
/// handle ([`App::moved`]).
pub struct StackHost<A: App> {
    stack: Stack,
    config: StackConfig,
    app: A,
    started: bool,
    /// Reused buffer of drained events.
    events: Vec<SocketEvent>,
    /// The replaced stack, kept until its transmit queue is empty.
    draining: Option<Stack>,
    moving: Option<Move>,
    move_counters: MoveCounters,
}

impl<A: App> StackHost<A> {
    pub fn new(config: StackConfig, app: A) -> Self {
        StackHost {
            stack: Stack::new(config.clone()),
            config,
            app,
            started: false,
            events: Vec::new(),
            draining: None,
            moving: None,
            move_counters: MoveCounters::default(),
        }
    }

    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    pub fn stack_mut(&mut self) -> &mut Stack {
        &mut self.stack
    }

    pub fn app(&self) -> &A {
        &self.app
    }

    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }

    pub fn move_counters(&self) -> MoveCounters {
        self.move_counters
    }

    /// Exports `handle` and swaps in a fresh stack; the import happens at `now + travel_ns`.
    fn begin_move(&mut self, now_ns: u64, handle: SocketHandle, travel_ns: u64) {
        match self.stack.tcp_export(now_ns, handle) {
            Ok((tuple, snapshot)) => {
                let fresh = Stack::new(self.config.clone());
                let old = core::mem::replace(&mut self.stack, fresh);
                self.draining = Some(old);
                self.move_counters.moves += 1;
                self.moving = Some(Move {
                    old_handle: handle,
                    tuple,
                    snapshot,
                    import_at_ns: now_ns.saturating_add(travel_ns),
                });
            }
            Err(e) => self
                .app
                .moved(now_ns, handle, Err(format!("export refused: {e}"))),
        }
    }

    fn finish_move(&mut self, now_ns: u64) {
        if let Some(m) = self.moving.take_if(|m| m.import_at_ns <= now_ns) {
            let result = self
                .stack
                .tcp_import(now_ns, m.tuple, &m.snapshot)
                .map_err(|e| format!("import refused: {e}"));
            self.app.moved(now_ns, m.old_handle, result);
        }
    }

    fn run_app(&mut self, now_ns: u64) {
        if !self.started {
            self.started = true;
            self.app.start(now_ns, &mut self.stack);
        }
        self.finish_move(now_ns);
        // The application's calls can raise new events: run until it has seen them all
        // (bounded, in case an application keeps making work for itself).
        for round in 0..64 {
            self.events.clear();
            while let Some(e) = self.stack.poll_event() {
                self.events.push(e);
            }
            if round > 0 && self.events.is_empty() {
                break;
            }
            self.app.poll(now_ns, &mut self.stack, &self.events);
        }
        if self.moving.is_none() {
            if let Some((handle, travel_ns)) = self.app.take_move_request() {
                self.begin_move(now_ns, handle, travel_ns);
            }
        }
    }
}

impl<A: App> Host for StackHost<A> {
    fn handle_frame(&mut self, now_ns: u64, _port: PortId, frame: &[u8]) {
        if self.moving.is_some() {
            self.move_counters.frames_dropped_in_flight += 1;
            return;
        }
        self.stack.receive(now_ns, frame, None);
        self.run_app(now_ns);
    }

    fn handle_timeout(&mut self, now_ns: u64) {
        if self.stack.poll_timeout().is_some_and(|t| t <= now_ns) {
            self.stack.handle_timeout(now_ns);
        }
        self.run_app(now_ns);
    }

    fn poll_transmit(&mut self, now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        // The first activation after `add_host` is a wake-up, which only polls: start here.
        if !self.started {
            self.run_app(now_ns);
        }
        if let Some(old) = &mut self.draining {
            if let Some(f) = old.poll_transmit(now_ns) {
                return Some((PortId(0), f));
            }
            self.draining = None;
        }
        self.stack.poll_transmit(now_ns).map(|f| (PortId(0), f))
    }

    fn poll_timeout(&self) -> Option<u64> {
        [
            self.stack.poll_timeout(),
            self.app.poll_timeout(),
            self.moving.as_ref().map(|m| m.import_at_ns),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
