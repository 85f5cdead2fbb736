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
use app::{App, Conn, ConnState, Ctx, Moved};

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
    /// Extra connections ("elephants", for skewed load) opened from exactly these local
    /// ports, each sending requests with an `elephant_body_bytes` body over and over (heavy
    /// on the server's receive path). A caller that knows the server's RSS can pick ports
    /// that land the elephants on one server shard.
    pub elephant_ports: Vec<u16>,
    /// Body bytes of each elephant request.
    pub elephant_body_bytes: usize,
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
    /// Request→response latencies, log-linear buckets ([`LatencyHistogram`]).
    pub latency: LatencyHistogram,
    /// Local addresses of opened connections (tests match them against the server's peers).
    pub locals: Vec<SocketAddr>,
    /// Connections opened to replace failed ones ([`HttpLoadClient::with_reconnect`]).
    pub connections_reopened: u64,
}

/// A latency histogram: four buckets per power of two of nanoseconds (relative error under
/// 19 %), fixed size, no allocation per sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
}

/// Sub-buckets per power of two.
const LATENCY_SUB: usize = 4;

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; 64 * LATENCY_SUB],
        }
    }
}

impl LatencyHistogram {
    fn index(ns: u64) -> usize {
        if ns < LATENCY_SUB as u64 {
            return ns as usize;
        }
        let log = 63 - ns.leading_zeros() as usize;
        // The two bits below the leading one pick the sub-bucket.
        let sub = ((ns >> (log - 2)) & 3) as usize;
        log * LATENCY_SUB + sub
    }

    /// The largest value of bucket `i` (its upper edge).
    fn upper_ns(i: usize) -> u64 {
        if i < LATENCY_SUB {
            return i as u64;
        }
        let (log, sub) = (i / LATENCY_SUB, (i % LATENCY_SUB) as u64);
        let base = 1u64 << log;
        let step = base >> 2;
        (base - 1).saturating_add(step.saturating_mul(sub + 1))
    }

    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        if let Some(c) = self.counts.get_mut(Self::index(ns)) {
            *c += 1;
        }
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0..=1), as the upper edge of its bucket; 0 without samples.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper_ns(i);
            }
        }
        Self::upper_ns(self.counts.len() - 1)
    }
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
    /// An elephant: its requests carry `elephant_body_bytes` of body.
    elephant: bool,
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
    request_elephant: Vec<u8>,
    conns: BTreeMap<SocketHandle, ClientConn>,
    scratch: Vec<u8>,
    stats: LoadStats,
    started: bool,
    /// Replace a failed (non-elephant) connection with a new one.
    reconnect: bool,
}

impl HttpLoadClient {
    /// A client for `cfg`.
    pub fn new(cfg: LoadConfig) -> Self {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: rsstack-load\r\n\r\n",
            cfg.path, cfg.server
        )
        .into_bytes();
        let mut request_elephant = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: rsstack-load\r\nContent-Length: {}\r\n\r\n",
            cfg.path, cfg.server, cfg.elephant_body_bytes
        )
        .into_bytes();
        request_elephant.resize(request_elephant.len() + cfg.elephant_body_bytes, b'u');
        HttpLoadClient {
            cfg,
            request,
            request_elephant,
            conns: BTreeMap::new(),
            scratch: vec![0; 64 * 1024],
            stats: LoadStats::default(),
            started: false,
            reconnect: false,
        }
    }

    /// The same client, replacing every failed connection with a new one (counted
    /// `connections_reopened`): the load goes on when the server resets connections (an
    /// offload engine that failed). Invariant: open connections never exceed
    /// `connections` plus the elephants.
    pub fn with_reconnect(mut self) -> Self {
        self.reconnect = true;
        self
    }

    /// Opens connections until `connections` plus the elephants are open again.
    fn refill(&mut self, ctx: &mut Ctx<'_>) {
        let target = self.cfg.connections + self.cfg.elephant_ports.len();
        while self.reconnect && self.started && self.conns.len() < target {
            match ctx.connect(self.cfg.server) {
                Ok(conn) => {
                    self.stats.connections_reopened += 1;
                    self.opened(ctx, conn, false);
                }
                Err(_) => {
                    self.stats.connections_failed += 1;
                    return;
                }
            }
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
            let request = if c.elephant {
                &self.request_elephant
            } else {
                &self.request
            };
            if matches!(c.phase, Phase::Head) && c.out_pos < request.len() {
                match ctx.send(c.conn, request.get(c.out_pos..).unwrap_or(&[])) {
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
                    let latency_ns = ctx.now_ns().saturating_sub(c.sent_at_ns);
                    stats.latency_ns_sum += latency_ns;
                    stats.latency.record(latency_ns);
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

impl HttpLoadClient {
    /// Records a connection just opened.
    fn opened(&mut self, ctx: &mut Ctx<'_>, conn: Conn, elephant: bool) {
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
                elephant,
                phase: Phase::Connecting,
                head: Vec::new(),
                out_pos: 0,
                requests: 0,
                sent_at_ns: 0,
            },
        );
    }
}

impl App for HttpLoadClient {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.started = true;
        for _ in 0..self.cfg.connections {
            match ctx.connect(self.cfg.server) {
                Ok(conn) => self.opened(ctx, conn, false),
                Err(_) => self.stats.connections_failed += 1,
            }
        }
        for port in self.cfg.elephant_ports.clone() {
            match ctx.connect_from(port, self.cfg.server) {
                Ok(conn) => self.opened(ctx, conn, true),
                Err(_) => self.stats.connections_failed += 1,
            }
        }
    }

    fn export_conn(&mut self, _ctx: &mut Ctx<'_>, conn: Conn, _to: u16) -> Option<ConnState> {
        let c = self.conns.remove(&conn.handle())?;
        Some(Box::new(c))
    }

    fn import_conn(&mut self, ctx: &mut Ctx<'_>, conn: Conn, moved: Moved) {
        let Ok(c) = moved.state.downcast::<ClientConn>() else {
            self.stats.connections_failed += 1;
            let _ = ctx.close(conn);
            return;
        };
        let mut c = *c;
        c.conn = conn;
        self.conns.insert(conn.handle(), c);
        self.service(ctx, conn.handle());
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
        self.refill(ctx);
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
    fn latency_quantiles_are_within_a_quarter_power_of_two() {
        let mut h = LatencyHistogram::default();
        for ns in 1..=10_000u64 {
            h.record(ns * 1_000);
        }
        let p50 = h.quantile_ns(0.5) as f64;
        let p99 = h.quantile_ns(0.99) as f64;
        assert!((5e6..=5e6 * 1.25).contains(&p50), "{p50}");
        assert!((9.9e6..=9.9e6 * 1.25).contains(&p99), "{p99}");
        assert_eq!(LatencyHistogram::default().quantile_ns(0.99), 0);
        for ns in [0u64, 1, 3, 4, 5, 7, 8, 1000, u64::MAX] {
            let i = LatencyHistogram::index(ns);
            assert!(LatencyHistogram::upper_ns(i) >= ns, "{ns}");
            assert!(i == 0 || LatencyHistogram::upper_ns(i - 1) < ns, "{ns}");
        }
    }

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
