//! The application API: one application instance per shard (like Seastar's sharded
//! services), driven by readiness events.
//!
//! Every rsstack application (the `apps` crate's servers and clients, the simulator's soak
//! workloads, tests) is written once against this crate and runs unchanged under both drivers
//! of the shard core (the `shard` crate): real threads (`runtime`) and the deterministic
//! simulator (`sim`).
//!
//! A host runs `S` shards; each shard owns one [`stack::Stack`] and one instance of the
//! application. The shard core calls [`App::start`] once, then [`App::poll`] after every batch
//! of packets, timers or wake-ups with the readiness events the stack raised. Events are edge-triggered: work a socket until its
//! calls return `WouldBlock`.
//!
//! Because `start` runs on every shard, [`Ctx::listen`] in `start` listens on every shard: the
//! NIC's RSS then picks the shard a connection is accepted and served on (locality from queue
//! to application, seed 000). [`Ctx::connect`] uses the stack's RSS home queue to pick a source
//! port whose replies hash back to the calling shard. Every [`Conn`] reports its
//! [`Conn::shard`] and [`Conn::numa_node`].
//!
//! Telling the application where a connection lives (seed 000, part 3): a connection is owned
//! by the shard that accepted or opened it, and that shard's [`ShardInfo`] (from
//! [`Ctx::shard_info`], or given to the factory that builds the instance) names its NUMA node.
//! An application that hands work to threads of its own can ask [`Conn::numa_node`] before it
//! picks the worker, and keep per-connection state on that node. The node is the one the
//! host's placement plan gave the shard (the runtime's `HostConfig::place`: the node of the
//! shard's CPU, where its buffer pool lives); without a plan, the node of the CPU the shard
//! is pinned to; 0 when unpinned and in the simulator.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use stack::Stack;
pub use stack::{Readiness, SocketError, SocketEvent, SocketHandle};

/// Where an application instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardInfo {
    /// This shard's index, `0..shards`.
    pub shard: u16,
    /// Shards of the host.
    pub shards: u16,
    /// NUMA node of the shard: the node its placement plan gives it (where its buffer pool,
    /// stack state and this application instance are allocated); without a plan, the node of
    /// the core it is pinned to; 0 when unknown or unpinned. Fixed for the shard's lifetime.
    pub numa_node: u16,
}

impl ShardInfo {
    /// The only shard of a single-shard host (the simulator's default).
    pub const SINGLE: ShardInfo = ShardInfo {
        shard: 0,
        shards: 1,
        numa_node: 0,
    };
}

/// The listening sockets of one shard on one port: one for IPv4 and one for IPv6 (the
/// stack's listeners are per family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    handle: SocketHandle,
    handle_v6: SocketHandle,
}

impl Listener {
    /// The IPv4 listener's stack handle.
    pub fn handle(&self) -> SocketHandle {
        self.handle
    }

    /// The IPv6 listener's stack handle.
    pub fn handle_v6(&self) -> SocketHandle {
        self.handle_v6
    }

    /// True when `h` (e.g. from an event) is one of this listener's sockets.
    pub fn owns(&self, h: SocketHandle) -> bool {
        h == self.handle || h == self.handle_v6
    }
}

/// A TCP connection owned by one shard: every packet of it is processed there and the
/// application instance of that shard serves it. Live rebalancing may move it to another
/// shard (DESIGN "Rebalancing"): the old instance hands its per-connection state over in
/// [`App::export_conn`] and the new one receives it with a new `Conn` in [`App::import_conn`];
/// the old `Conn` is then invalid (its calls fail with `InvalidHandle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    handle: SocketHandle,
    shard: u16,
    numa_node: u16,
}

impl Conn {
    /// The stack handle (events name it).
    pub fn handle(&self) -> SocketHandle {
        self.handle
    }

    /// The shard that owns the connection.
    pub fn shard(&self) -> u16 {
        self.shard
    }

    /// The NUMA node of the owning shard ([`ShardInfo::numa_node`]): the node whose memory
    /// holds the connection's buffers and where its packets are processed. Constant while
    /// the connection stays on its shard (a move gives it a new `Conn`).
    pub fn numa_node(&self) -> u16 {
        self.numa_node
    }
}

/// What an application call sees: the time, its shard and its shard's stack.
pub struct Ctx<'a> {
    now_ns: u64,
    info: ShardInfo,
    stack: &'a mut Stack,
}

impl<'a> Ctx<'a> {
    /// A context for one call into the application at `now_ns`.
    pub fn new(now_ns: u64, info: ShardInfo, stack: &'a mut Stack) -> Self {
        Ctx {
            now_ns,
            info,
            stack,
        }
    }

    /// Current time, ns since the host started.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Where this instance runs.
    pub fn shard_info(&self) -> ShardInfo {
        self.info
    }

    /// The shard's stack, for calls this API does not wrap.
    pub fn stack(&mut self) -> &mut Stack {
        self.stack
    }

    /// Listens on `port` on every IPv4 and every IPv6 address of this shard (`backlog` per
    /// family; port 0 picks one port for both); called from [`App::start`] it listens on every
    /// shard. Fails, holding nothing, when either family's listener cannot open.
    pub fn listen(&mut self, port: u16, backlog: usize) -> Result<Listener, SocketError> {
        let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
        let handle = self.stack.tcp_listen(local, backlog)?;
        let port = match self.stack.local_addr(handle) {
            Ok(a) => a.port(),
            Err(_) => port,
        };
        let local_v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
        match self.stack.tcp_listen(local_v6, backlog) {
            Ok(handle_v6) => Ok(Listener { handle, handle_v6 }),
            Err(e) => {
                let _ = self.stack.close(self.now_ns, handle);
                Err(e)
            }
        }
    }

    /// Takes one established connection from `listener`, IPv4 first (`WouldBlock` when
    /// neither family has one).
    pub fn accept(&mut self, listener: Listener) -> Result<(Conn, SocketAddr), SocketError> {
        let (handle, peer) = match self.stack.tcp_accept(listener.handle) {
            Err(SocketError::WouldBlock) => self.stack.tcp_accept(listener.handle_v6)?,
            r => r?,
        };
        Ok((self.conn(handle), peer))
    }

    /// Opens a connection to `remote` from a source port whose replies hash back to this
    /// shard (when the stack has an RSS home queue).
    pub fn connect(&mut self, remote: SocketAddr) -> Result<Conn, SocketError> {
        let handle = self.stack.tcp_connect(self.now_ns, remote, 0)?;
        Ok(self.conn(handle))
    }

    /// Opens a connection to `remote` from local port `port` (the caller chose it, e.g. so
    /// that the server's RSS places it; replies may then hash to another shard of this host).
    pub fn connect_from(&mut self, port: u16, remote: SocketAddr) -> Result<Conn, SocketError> {
        let handle = self.stack.tcp_connect(self.now_ns, remote, port)?;
        Ok(self.conn(handle))
    }

    /// Queues bytes; returns how many fit (`WouldBlock` when none).
    pub fn send(&mut self, conn: Conn, data: &[u8]) -> Result<usize, SocketError> {
        self.stack.tcp_send(conn.handle, data)
    }

    /// Reads bytes (`WouldBlock` when none, `Finished` after the peer's FIN).
    pub fn recv(&mut self, conn: Conn, out: &mut [u8]) -> Result<usize, SocketError> {
        self.stack.tcp_recv(conn.handle, out)
    }

    /// Half-close: a FIN follows the queued data.
    pub fn shutdown(&mut self, conn: Conn) -> Result<(), SocketError> {
        self.stack.tcp_shutdown(conn.handle)
    }

    /// Releases the handle (the stack finishes the close in the background).
    pub fn close(&mut self, conn: Conn) -> Result<(), SocketError> {
        self.stack.close(self.now_ns, conn.handle)
    }

    /// Whether `conn` runs on an offload engine (seed 002 handoff). Its calls work the same
    /// either way: this query is the only way to tell.
    pub fn offloaded(&self, conn: Conn) -> bool {
        self.stack.tcp_offloaded(conn.handle)
    }

    /// The `Conn` for a handle of this shard's stack (e.g. from an event).
    pub fn conn(&self, handle: SocketHandle) -> Conn {
        Conn {
            handle,
            shard: self.info.shard,
            numa_node: self.info.numa_node,
        }
    }
}

/// An application's per-connection state, handed from the old owner's instance to the new
/// owner's when a connection moves between shards. `Send`: shards may be threads.
pub type ConnState = Box<dyn core::any::Any + Send>;

/// A connection that arrived from another shard ([`App::import_conn`]).
pub struct Moved {
    /// The shard it left.
    pub from: u16,
    /// The shard it now lives on (this one).
    pub to: u16,
    /// What the old instance's [`App::export_conn`] returned.
    pub state: ConnState,
}

impl core::fmt::Debug for Moved {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Moved")
            .field("from", &self.from)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

/// An application instance of one shard.
pub trait App {
    /// Runs once, before the first packet.
    fn start(&mut self, ctx: &mut Ctx<'_>);
    /// Runs after every batch of work with the readiness events raised since the last call.
    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]);
    /// The application's own next deadline (ns), if any.
    fn poll_timeout(&self) -> Option<u64> {
        None
    }
    /// A monotone count of completed work (requests served or completed) for live views.
    fn progress(&self) -> u64 {
        0
    }
    /// True once the application has nothing more to do (a load client that finished); the
    /// runtime may stop when every shard of a host says so.
    fn done(&self) -> bool {
        false
    }
    /// `conn` is about to move to shard `to` (live rebalancing): return everything this
    /// instance keeps for it and forget it, or `None` to keep the connection on this shard
    /// (the default: an application that does not implement moves never loses a connection;
    /// it stays here and its packets are forwarded here). After `Some`, `conn` is invalid.
    fn export_conn(&mut self, ctx: &mut Ctx<'_>, conn: Conn, to: u16) -> Option<ConnState> {
        let _ = (ctx, conn, to);
        None
    }
    /// `conn` arrived from shard `moved.from` with the state the old instance returned from
    /// [`App::export_conn`]; its unread data and its readiness come with it (an event follows).
    /// Also called with `moved.from == moved.to` to give back the state of a move that failed
    /// after `export_conn` (the connection then keeps its `Conn`).
    fn import_conn(&mut self, ctx: &mut Ctx<'_>, conn: Conn, moved: Moved) {
        let _ = (ctx, conn, moved);
    }
}

/// `None` is an idle instance: it opens nothing, its [`App::done`] is true and its
/// [`App::progress`] 0. `Some(a)` delegates every call to `a`. This lets a host run a client
/// on one shard only (`Some` on shard 0, `None` elsewhere) with one application type.
impl<A: App> App for Option<A> {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(a) = self {
            a.start(ctx);
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        if let Some(a) = self {
            a.poll(ctx, events);
        }
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.as_ref().and_then(App::poll_timeout)
    }

    fn progress(&self) -> u64 {
        self.as_ref().map_or(0, App::progress)
    }

    fn done(&self) -> bool {
        self.as_ref().is_none_or(App::done)
    }

    fn export_conn(&mut self, ctx: &mut Ctx<'_>, conn: Conn, to: u16) -> Option<ConnState> {
        self.as_mut().and_then(|a| a.export_conn(ctx, conn, to))
    }

    fn import_conn(&mut self, ctx: &mut Ctx<'_>, conn: Conn, moved: Moved) {
        if let Some(a) = self {
            a.import_conn(ctx, conn, moved);
        }
    }
}
