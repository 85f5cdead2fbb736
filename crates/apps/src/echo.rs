//! RFC 862 TCP echo: every byte a client sends comes back to it, on every shard's listener.
//!
//! Bounds and back-pressure: each connection holds at most [`ECHO_BUFFER_BYTES`] read but not
//! yet accepted by the stack's send buffer. While any of them waits, the connection is not
//! read: the peer's data stays in our receive window, whose closing slows the peer down (TCP
//! flow control carries the back-pressure). A `WRITABLE` event resumes the loop.
//!
//! Close: after the peer's FIN has been read, what remains is flushed into the send buffer,
//! then our FIN follows it and the handle is released (the stack finishes the close).

use core::net::SocketAddr;

use stack::{SocketError, SocketEvent};

use crate::serve::{Handler, Step, StreamServer, step_of};
use app::{App, Conn, Ctx};

/// Bytes one connection may hold between reading them and the stack accepting them back.
pub const ECHO_BUFFER_BYTES: usize = 64 * 1024;

/// What one shard's echo server did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EchoStats {
    pub connections_accepted: u64,
    /// Connections ended, cleanly or not (includes `connections_failed`).
    pub connections_closed: u64,
    /// Connections ended by a reset, a timeout or a failed call.
    pub connections_failed: u64,
    /// Bytes read from peers.
    pub bytes_received: u64,
    /// Bytes accepted back by the stack's send buffers.
    pub bytes_echoed: u64,
    /// Times reading paused because the send buffer was full (back-pressure).
    pub send_blocked: u64,
    /// 1 when this shard's listener could not open (the shard then serves nothing).
    pub listen_failed: u64,
}

/// One echo connection. Invariant: `head <= tail <= buf.len()`; `buf[head..tail]` are bytes
/// read and not yet echoed.
#[derive(Debug)]
pub(crate) struct EchoConn {
    buf: Box<[u8]>,
    head: usize,
    tail: usize,
    peer_finished: bool,
}

#[derive(Debug, Default)]
struct EchoHandler {
    stats: EchoStats,
}

impl Handler for EchoHandler {
    type Session = EchoConn;

    fn open(&mut self, _ctx: &mut Ctx<'_>, _conn: Conn, _peer: SocketAddr) -> EchoConn {
        self.stats.connections_accepted += 1;
        EchoConn {
            buf: vec![0; ECHO_BUFFER_BYTES].into_boxed_slice(),
            head: 0,
            tail: 0,
            peer_finished: false,
        }
    }

    fn service(&mut self, c: &mut EchoConn, ctx: &mut Ctx<'_>, conn: Conn) -> Step {
        loop {
            while c.head < c.tail {
                let pending = c.buf.get(c.head..c.tail).unwrap_or(&[]);
                match ctx.send(conn, pending) {
                    Ok(n) => {
                        c.head += n;
                        self.stats.bytes_echoed += n as u64;
                    }
                    Err(SocketError::WouldBlock) => {
                        // Back-pressure: stop reading until the stack takes more.
                        self.stats.send_blocked += 1;
                        return Step::Open;
                    }
                    Err(e) => return step_of(e),
                }
            }
            c.head = 0;
            c.tail = 0;
            if c.peer_finished {
                return Step::Done;
            }
            match ctx.recv(conn, &mut c.buf) {
                Ok(n) => {
                    c.tail = n;
                    self.stats.bytes_received += n as u64;
                }
                Err(SocketError::Finished) => c.peer_finished = true,
                Err(e) => return step_of(e),
            }
        }
    }

    fn ended(&mut self, _s: EchoConn, step: Step) {
        self.stats.connections_closed += 1;
        if step == Step::Failed {
            self.stats.connections_failed += 1;
        }
    }
}

/// The echo server application of one shard.
#[derive(Debug)]
pub struct EchoServer {
    server: StreamServer<EchoConn>,
    handler: EchoHandler,
}

impl EchoServer {
    /// An echo server on `port` (RFC 862 uses 7).
    pub fn new(port: u16) -> Self {
        EchoServer {
            server: StreamServer::new(port),
            handler: EchoHandler::default(),
        }
    }

    /// What this shard's server did so far.
    pub fn stats(&self) -> &EchoStats {
        &self.handler.stats
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.server.open_sessions()
    }
}

impl App for EchoServer {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.server.start(ctx).is_err() {
            self.handler.stats.listen_failed = 1;
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        self.server.poll(ctx, events, &mut self.handler);
    }

    fn progress(&self) -> u64 {
        self.handler.stats.bytes_echoed
    }
}
