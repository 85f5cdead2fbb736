//! Short connections between two rsstack [`Stack`]s over the perfect in-memory link of
//! [`crate::bulk`]: one request/response exchange per connection, HTTP/1.0 style.
//!
//! Each connection: the client connects, sends a `request_bytes` request, the server accepts,
//! reads it, answers `response_bytes` and closes; the client reads the answer to its end and
//! closes. One connection at a time, so the cost per connection (handshake, buffers, teardown,
//! TIME-WAIT on the server) is what [`short_connections_loop`] counts; callgrind selects that
//! function with `--toggle-collect`. TIME-WAIT is shortened to 1 ms of virtual time so the
//! table never fills; the clock jumps to the earliest deadline when nothing moves.

use core::net::{IpAddr, SocketAddr};
use stack::RxMeta;
use std::time::Instant;

use stack::{SocketError, SocketHandle, Stack};

use crate::bulk::{BulkError, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC, stack_config};

/// Port the server listens on.
pub const SHORT_PORT: u16 = 8080;
/// Rounds in a row with nothing moved before a connection counts as stalled.
const IDLE_ROUNDS_MAX: u32 = 1_000;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortOptions {
    pub connections: u32,
    pub request_bytes: usize,
    pub response_bytes: usize,
}

impl ShortOptions {
    /// `connections` exchanges of a 100-byte request and a 1 KiB response.
    pub fn new(connections: u32) -> ShortOptions {
        ShortOptions {
            connections,
            request_bytes: 100,
            response_bytes: 1024,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShortReport {
    /// Connections whose response arrived whole and which both sides closed.
    pub completed: u32,
    /// Frames moved in both directions.
    pub frames: u64,
    /// Wall time of the loop alone.
    pub wall_ns: u64,
}

/// The two stacks and the server's listener.
#[derive(Debug)]
pub struct ShortWorld {
    pub client: Stack,
    pub server: Stack,
    pub listener: SocketHandle,
    pub now: u64,
}

impl ShortWorld {
    pub fn new() -> Result<ShortWorld, BulkError> {
        let mut ccfg = stack_config(CLIENT_MAC, CLIENT_IP, false);
        let mut scfg = stack_config(SERVER_MAC, SERVER_IP, false);
        ccfg.tcp.time_wait_ns = 1_000_000;
        scfg.tcp.time_wait_ns = 1_000_000;
        let client = Stack::new(ccfg);
        let mut server = Stack::new(scfg);
        let listener = server
            .tcp_listen(server_addr(), 64)
            .map_err(|e| BulkError::Socket("listen", e))?;
        Ok(ShortWorld {
            client,
            server,
            listener,
            now: 0,
        })
    }

    /// Moves frames both ways until neither side sends; returns how many moved.
    fn exchange(&mut self) -> u64 {
        let mut moved = 0;
        loop {
            let before = moved;
            while let Some(f) = self.client.poll_transmit(self.now) {
                moved += 1;
                self.server.receive(self.now, &f, &RxMeta::NONE);
                self.client.recycle(f);
            }
            while let Some(f) = self.server.poll_transmit(self.now) {
                moved += 1;
                self.client.receive(self.now, &f, &RxMeta::NONE);
                self.server.recycle(f);
            }
            if moved == before {
                return moved;
            }
        }
    }

    /// Jumps the clock to the earliest deadline of either stack and fires it.
    fn advance(&mut self) -> Result<(), BulkError> {
        let next = match (self.client.poll_timeout(), self.server.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => return Err(BulkError::Stalled { received_bytes: 0 }),
        };
        self.now = self.now.max(next);
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        Ok(())
    }
}

fn server_addr() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(SERVER_IP), SHORT_PORT)
}

/// Where one connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the server to accept.
    Accept,
    /// The server reads the request, then answers and closes.
    Serve(SocketHandle),
    /// The client reads the response to its end.
    Drain,
    Done,
}

/// The measured part: `opts.connections` exchanges, one after the other. Never inlined: the
/// callgrind script selects exactly this function.
#[inline(never)]
pub fn short_connections_loop(
    w: &mut ShortWorld,
    opts: &ShortOptions,
) -> Result<ShortReport, BulkError> {
    let request = vec![b'q'; opts.request_bytes];
    let response = vec![b'r'; opts.response_bytes];
    let mut buf = vec![0u8; 16 * 1024];
    let mut r = ShortReport::default();
    for _ in 0..opts.connections {
        let c = w
            .client
            .tcp_connect(w.now, server_addr(), 0)
            .map_err(|e| BulkError::Socket("connect", e))?;
        let mut phase = Phase::Accept;
        let (mut request_sent, mut request_read, mut response_read) = (0, 0, 0);
        let mut idle_rounds = 0;
        while phase != Phase::Done {
            if request_sent < request.len() {
                match w.client.tcp_send(c, &request[request_sent..]) {
                    Ok(n) => request_sent += n,
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => return Err(BulkError::Socket("send request", e)),
                }
            }
            match phase {
                Phase::Accept => {
                    if let Ok((s, _)) = w.server.tcp_accept(w.listener) {
                        phase = Phase::Serve(s);
                    }
                }
                Phase::Serve(s) => {
                    while let Ok(n) = w.server.tcp_recv(s, &mut buf) {
                        request_read += n;
                    }
                    if request_read == request.len() {
                        let n = w
                            .server
                            .tcp_send(s, &response)
                            .map_err(|e| BulkError::Socket("send response", e))?;
                        if n != response.len() {
                            return Err(BulkError::Socket(
                                "send response",
                                SocketError::WouldBlock,
                            ));
                        }
                        w.server
                            .close(w.now, s)
                            .map_err(|e| BulkError::Socket("server close", e))?;
                        phase = Phase::Drain;
                    }
                }
                Phase::Drain => loop {
                    match w.client.tcp_recv(c, &mut buf) {
                        Ok(n) => response_read += n,
                        Err(SocketError::Finished) => {
                            w.client
                                .close(w.now, c)
                                .map_err(|e| BulkError::Socket("client close", e))?;
                            if response_read == response.len() {
                                r.completed += 1;
                            }
                            phase = Phase::Done;
                            break;
                        }
                        Err(_) => break,
                    }
                },
                Phase::Done => {}
            }
            let moved = w.exchange();
            r.frames += moved;
            while w.client.poll_event().is_some() {}
            while w.server.poll_event().is_some() {}
            if moved == 0 && phase != Phase::Done {
                idle_rounds += 1;
                if idle_rounds > IDLE_ROUNDS_MAX {
                    return Err(BulkError::Stalled {
                        received_bytes: response_read as u64,
                    });
                }
                w.advance()?;
            }
        }
        r.frames += w.exchange();
    }
    // Let TIME-WAIT run out so the next run starts from an empty table.
    while w.server.tcp_connection_count() + w.client.tcp_connection_count() > 0 {
        w.advance()?;
        r.frames += w.exchange();
    }
    Ok(r)
}

/// Builds the stacks, then runs the timed (and callgrind-counted) loop.
pub fn run(opts: ShortOptions) -> Result<ShortReport, BulkError> {
    let mut w = ShortWorld::new()?;
    let start = Instant::now();
    let mut r = short_connections_loop(&mut w, &opts)?;
    r.wall_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    Ok(r)
}
