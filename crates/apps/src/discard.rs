//! RFC 863 TCP discard: reads everything a client sends and drops it, on every shard's
//! listener; closes after the peer's FIN.
//!
//! Bounds: no per-connection buffer. Each shard reads through one scratch buffer of
//! [`DISCARD_READ_BYTES`], big so a fast sender (iperf2) costs few calls per window.

use core::net::SocketAddr;

use stack::{SocketError, SocketEvent};

use crate::serve::{Handler, Step, StreamServer, step_of};
use app::{App, Conn, Ctx};

/// Size of the shard's read buffer, in bytes.
pub const DISCARD_READ_BYTES: usize = 256 * 1024;

/// What one shard's discard server did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscardStats {
    pub connections_accepted: u64,
    /// Connections ended, cleanly or not (includes `connections_failed`).
    pub connections_closed: u64,
    /// Connections ended by a reset, a timeout or a failed call.
    pub connections_failed: u64,
    /// Bytes read and dropped.
    pub bytes_received: u64,
    /// 1 when this shard's listener could not open (the shard then serves nothing).
    pub listen_failed: u64,
}

#[derive(Debug)]
struct DiscardHandler {
    stats: DiscardStats,
    scratch: Box<[u8]>,
}

/// A discard connection needs no state of its own.
#[derive(Debug)]
pub(crate) struct DiscardConn;

/// Reads `conn` into `scratch` until it would block; `seen` gets every chunk. `Done` after
/// the peer's FIN.
pub(crate) fn drain(
    ctx: &mut Ctx<'_>,
    conn: Conn,
    scratch: &mut [u8],
    mut seen: impl FnMut(&[u8]),
) -> Step {
    loop {
        match ctx.recv(conn, scratch) {
            Ok(n) => seen(scratch.get(..n).unwrap_or(&[])),
            Err(SocketError::Finished) => return Step::Done,
            Err(e) => return step_of(e),
        }
    }
}

impl Handler for DiscardHandler {
    type Session = DiscardConn;

    fn open(&mut self, _ctx: &mut Ctx<'_>, _conn: Conn, _peer: SocketAddr) -> DiscardConn {
        self.stats.connections_accepted += 1;
        DiscardConn
    }

    fn service(&mut self, _s: &mut DiscardConn, ctx: &mut Ctx<'_>, conn: Conn) -> Step {
        let stats = &mut self.stats;
        drain(ctx, conn, &mut self.scratch, |d| {
            stats.bytes_received += d.len() as u64
        })
    }

    fn ended(&mut self, _s: DiscardConn, step: Step) {
        self.stats.connections_closed += 1;
        if step == Step::Failed {
            self.stats.connections_failed += 1;
        }
    }
}

/// The discard server application of one shard.
#[derive(Debug)]
pub struct DiscardServer {
    server: StreamServer<DiscardConn>,
    handler: DiscardHandler,
}

impl DiscardServer {
    /// A discard server on `port` (RFC 863 uses 9).
    pub fn new(port: u16) -> Self {
        DiscardServer {
            server: StreamServer::new(port),
            handler: DiscardHandler {
                stats: DiscardStats::default(),
                scratch: vec![0; DISCARD_READ_BYTES].into_boxed_slice(),
            },
        }
    }

    /// What this shard's server did so far.
    pub fn stats(&self) -> &DiscardStats {
        &self.handler.stats
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.server.open_sessions()
    }
}

impl App for DiscardServer {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.server.start(ctx).is_err() {
            self.handler.stats.listen_failed = 1;
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        self.server.poll(ctx, events, &mut self.handler);
    }

    fn progress(&self) -> u64 {
        self.handler.stats.bytes_received
    }
}
