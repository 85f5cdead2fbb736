//! A closed-loop HTTP/1.1 load client: each shard opens its share of K keep-alive
//! connections and keeps one `GET` outstanding on each, sending the next request as soon as a
//! response is complete (by `Content-Length`).
//!
//! Bounds: a response head is at most [`RESPONSE_HEAD_BYTES_MAX`] bytes (else the connection
//! is counted `protocol_errors` and closed); bodies are counted, not stored.

use core::net::SocketAddr;
use std::collections::BTreeMap;

use stack::{Readiness, SocketError, SocketEvent, SocketHandle};

use crate::get::Framing;
use app::{App, Conn, Ctx};

/// Largest response head accepted, in bytes.
pub const RESPONSE_HEAD_BYTES_MAX: usize = 8192;

/// What the client does.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The server.
    pub server: SocketAddr,
    /// Connections this shard opens.
    pub connections: usize,
    /// The path requested.
    pub path: String,
    /// Requests per connection before it closes; `None` = until stopped.
    pub requests_per_connection: Option<u64>,
}

/// What one shard's client did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadStats {
    pub connections_opened: u64,
    pub connections_established: u64,
    pub connections_failed: u64,
    pub connections_finished: u64,
    pub requests_sent: u64,
    pub responses_ok: u64,
    pub responses_other: u64,
    pub body_bytes: u64,
    pub protocol_errors: u64,
    /// Connections whose `Conn::shard()` differed from this shard (never expected).
    pub connections_foreign: u64,
    /// Sum of request→response latencies in ns (for the mean).
    pub latency_ns_sum: u64,
    /// Local addresses of opened connections (tests match them against the server's peers).
    pub locals: Vec<SocketAddr>,
}

#[derive(Debug)]
enum Phase {
    Connecting,
    /// Reading a response head (`head` holds what arrived so far).
    Head,
    /// Reading `remaining` body bytes.
    Body {
        remaining: usize,
        ok: bool,
    },
    Closing,
}

#[derive(Debug)]
struct ClientConn {
    conn: Conn,
    phase: Phase,
    head: Vec<u8>,
    /// Request bytes not yet accepted by the stack, from `out_pos`.
    out_pos: usize,
    requests: u64,
    sent_at_ns: u64,
}

/// The load client application of one shard.
#[derive(Debug)]
pub struct HttpLoadClient {
    cfg: LoadConfig,
    request: Vec<u8>,
    conns: BTreeMap<SocketHandle, ClientConn>,
    scratch: Vec<u8>,
    stats: LoadStats,
    started: bool,
}

impl HttpLoadClient {
    /// A client for `cfg`.
    pub fn new(cfg: LoadConfig) -> Self {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: rsstack-load\r\n\r\n",
            cfg.path, cfg.server
        )
        .into_bytes();
        HttpLoadClient {
            cfg,
            request,
            conns: BTreeMap::new(),
            scratch: vec![0; 64 * 1024],
            stats: LoadStats::default(),
            started: false,
        }
    }

    /// What this shard's client did so far.
    pub fn stats(&self) -> &LoadStats {
        &self.stats
    }

    /// Starts the next request on `c` (or closes it when its quota is done).
    fn next_request(
        stats: &mut LoadStats,
        cfg: &LoadConfig,
        ctx: &mut Ctx<'_>,
        c: &mut ClientConn,
    ) {
        if cfg
            .requests_per_connection
            .is_some_and(|max| c.requests >= max)
        {
            c.phase = Phase::Closing;
            let _ = ctx.shutdown(c.conn);
            return;
        }
        c.requests += 1;
        stats.requests_sent += 1;
        c.out_pos = 0;
        c.head.clear();
        c.phase = Phase::Head;
        c.sent_at_ns = ctx.now_ns();
    }

    fn service(&mut self, ctx: &mut Ctx<'_>, h: SocketHandle) {
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        let stats = &mut self.stats;
        loop {
            // Finish writing the current request.
            if matches!(c.phase, Phase::Head) && c.out_pos < self.request.len() {
                match ctx.send(c.conn, &self.request[c.out_pos..]) {
                    Ok(n) => c.out_pos += n,
                    Err(SocketError::WouldBlock) => {}
                    Err(_) => {
                        stats.connections_failed += 1;
                        let _ = ctx.close(c.conn);
                        self.conns.remove(&h);
                        return;
                    }
                }
            }
            let n = match ctx.recv(c.conn, &mut self.scratch) {
                Ok(n) => n,
                Err(SocketError::WouldBlock) => return,
                Err(SocketError::Finished) => {
                    if !matches!(c.phase, Phase::Closing) {
                        stats.protocol_errors += 1;
                    }
                    stats.connections_finished += 1;
                    let _ = ctx.shutdown(c.conn);
                    let _ = ctx.close(c.conn);
                    self.conns.remove(&h);
                    return;
                }
                Err(_) => {
                    stats.connections_failed += 1;
                    let _ = ctx.close(c.conn);
                    self.conns.remove(&h);
                    return;
                }
            };
            let mut data = self.scratch.get(..n).unwrap_or(&[]);
            while !data.is_empty() {
                match &mut c.phase {
                    Phase::Connecting | Phase::Closing => {
                        stats.protocol_errors += 1;
                        data = &[];
                    }
                    Phase::Head => {
                        let before = c.head.len();
                        c.head.extend_from_slice(data);
                        let Some(end) = c.head.windows(4).position(|w| w == b"\r\n\r\n") else {
                            if c.head.len() > RESPONSE_HEAD_BYTES_MAX {
                                stats.protocol_errors += 1;
                                c.phase = Phase::Closing;
                                let _ = ctx.shutdown(c.conn);
                            }
                            data = &[];
                            continue;
                        };
                        let head_len = end + 4;
                        let consumed = head_len.saturating_sub(before).min(data.len());
                        data = data.get(consumed..).unwrap_or(&[]);
                        match parse_response_head(c.head.get(..head_len).unwrap_or(&[])) {
                            Some((status, len)) => {
                                c.phase = Phase::Body {
                                    remaining: len,
                                    ok: status == 200,
                                }
                            }
                            None => {
                                stats.protocol_errors += 1;
                                c.phase = Phase::Closing;
                                let _ = ctx.shutdown(c.conn);
                                data = &[];
                            }
                        }
                    }
                    Phase::Body { remaining, .. } => {
                        let take = (*remaining).min(data.len());
                        *remaining -= take;
                        stats.body_bytes += take as u64;
                        data = data.get(take..).unwrap_or(&[]);
                    }
                }
                if let Phase::Body { remaining: 0, ok } = c.phase {
                    if ok {
                        stats.responses_ok += 1;
                    } else {
                        stats.responses_other += 1;
                    }
                    stats.latency_ns_sum += ctx.now_ns().saturating_sub(c.sent_at_ns);
                    Self::next_request(stats, &self.cfg, ctx, c);
                }
            }
        }
    }
}

/// Status code and body length of a response head: the strict parser of [`crate::get`],
/// restricted to what a keep-alive load client can follow (a `Content-Length`, or no body).
fn parse_response_head(head: &[u8]) -> Option<(u16, usize)> {
    // Without the header list: nothing is allocated per response.
    let (status, framing) = crate::get::parse_response_head_with(head, |_, _| {}).ok()?;
    match framing {
        Framing::Length(n) => Some((status, usize::try_from(n).ok()?)),
        Framing::Empty => Some((status, 0)),
        Framing::Chunked | Framing::UntilClose => None,
    }
}

impl App for HttpLoadClient {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.started = true;
        for _ in 0..self.cfg.connections {
            match ctx.connect(self.cfg.server) {
                Ok(conn) => {
                    self.stats.connections_opened += 1;
                    if conn.shard() != ctx.shard_info().shard {
                        self.stats.connections_foreign += 1;
                    }
                    if let Ok(local) = ctx.stack().local_addr(conn.handle()) {
                        self.stats.locals.push(local);
                    }
                    self.conns.insert(
                        conn.handle(),
                        ClientConn {
                            conn,
                            phase: Phase::Connecting,
                            head: Vec::new(),
                            out_pos: 0,
                            requests: 0,
                            sent_at_ns: 0,
                        },
                    );
                }
                Err(_) => self.stats.connections_failed += 1,
            }
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        for e in events {
            let Some(c) = self.conns.get_mut(&e.handle) else {
                continue;
            };
            if e.readiness.contains(Readiness::CONNECTED) && matches!(c.phase, Phase::Connecting) {
                self.stats.connections_established += 1;
                Self::next_request(&mut self.stats, &self.cfg, ctx, c);
            }
            if e.readiness.contains(Readiness::ERROR) {
                self.stats.connections_failed += 1;
                let _ = ctx.close(c.conn);
                self.conns.remove(&e.handle);
                continue;
            }
            if e.readiness.contains(Readiness::CLOSED) {
                if !matches!(c.phase, Phase::Closing) {
                    self.stats.connections_failed += 1;
                } else {
                    self.stats.connections_finished += 1;
                }
                let _ = ctx.close(c.conn);
                self.conns.remove(&e.handle);
                continue;
            }
            self.service(ctx, e.handle);
        }
    }

    fn progress(&self) -> u64 {
        self.stats.responses_ok + self.stats.responses_other
    }

    fn done(&self) -> bool {
        self.started && self.conns.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_head_needs_status_and_length() {
        assert_eq!(
            parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"),
            Some((200, 12))
        );
        assert_eq!(parse_response_head(b"HTTP/1.1 200 OK\r\n\r\n"), None);
        assert_eq!(parse_response_head(b"SPDY 200\r\n\r\n"), None);
    }
}
