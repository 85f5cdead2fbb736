//! HTTP/1.1 server over an in-memory file set: keep-alive, pipelining, `Content-Length`,
//! 404, `Content-Type` by extension. Requests with a body are read past their
//! `Content-Length`; chunked request bodies are refused with 501 and the connection closed.
//!
//! Bounds: a request head is at most [`REQUEST_HEAD_BYTES_MAX`] (else 431 and close); the
//! response output of a connection is produced one request at a time, so at most one
//! response is buffered per connection.

use core::net::SocketAddr;
use std::collections::BTreeMap;
use std::sync::Arc;

use stack::{Readiness, SocketError, SocketEvent, SocketHandle};

use crate::api::{App, Conn, Ctx, Listener};

/// Largest request head (request line + headers) accepted, in bytes.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8192;
/// Peers remembered per shard for tests and reports ([`ServerStats::peers`]).
pub const PEERS_RECORDED_MAX: usize = 65_536;
/// Accept backlog of each shard's listener.
pub const BACKLOG: usize = 128;

/// An immutable set of files served from memory, shared by the shards (read-only).
#[derive(Debug, Clone, Default)]
pub struct FileSet {
    files: BTreeMap<String, Arc<[u8]>>,
}

impl FileSet {
    /// An empty set.
    pub fn new() -> Self {
        FileSet::default()
    }

    /// Adds (or replaces) `path` (starting with `/`).
    pub fn insert(&mut self, path: &str, body: impl Into<Arc<[u8]>>) {
        self.files.insert(path.to_string(), body.into());
    }

    /// The demo's files: `/index.html` (`index_bytes` long), `/` (the same) and
    /// `/style.css`.
    pub fn demo(index_bytes: usize) -> Self {
        let mut s = FileSet::new();
        let head = b"<!doctype html><title>rsstack</title><p>";
        let mut body: Vec<u8> = head.iter().copied().take(index_bytes).collect();
        body.extend((0..index_bytes.saturating_sub(body.len())).map(|i| b'a' + (i % 26) as u8));
        let body: Arc<[u8]> = body.into();
        s.files.insert("/index.html".into(), body.clone());
        s.files.insert("/".into(), body);
        s.insert("/style.css", &b"p { font-family: monospace }\n"[..]);
        s
    }

    fn get(&self, path: &str) -> Option<&Arc<[u8]>> {
        self.files.get(path)
    }
}

/// `Content-Type` for a path, by extension.
pub fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        _ if path.ends_with('/') => "text/html; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// What one shard's server did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub connections_accepted: u64,
    pub connections_closed: u64,
    pub requests: u64,
    pub responses_200: u64,
    pub responses_404: u64,
    /// 400, 431, 501 and 405 together.
    pub responses_error: u64,
    pub body_bytes_sent: u64,
    /// Connections whose `Conn::shard()` differed from the serving shard (never expected).
    pub connections_foreign: u64,
    /// Peer addresses of accepted connections (at most [`PEERS_RECORDED_MAX`]).
    pub peers: Vec<SocketAddr>,
}

#[derive(Debug)]
struct ServerConn {
    conn: Conn,
    /// Received bytes not yet parsed. Invariant: ≤ `REQUEST_HEAD_BYTES_MAX` + one read.
    inbuf: Vec<u8>,
    /// Request-body bytes still to skip.
    body_skip_bytes: usize,
    /// Response bytes not yet accepted by the stack, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
    /// Close once `out` is flushed.
    close_after: bool,
    peer_finished: bool,
    shut: bool,
}

/// The HTTP/1.1 server application of one shard.
#[derive(Debug)]
pub struct HttpServer {
    port: u16,
    files: Arc<FileSet>,
    listener: Option<Listener>,
    conns: BTreeMap<SocketHandle, ServerConn>,
    scratch: Vec<u8>,
    stats: ServerStats,
}

enum Parsed {
    /// Need more bytes.
    Incomplete,
    /// A complete request head of `len` bytes.
    Request {
        len: usize,
        path: String,
        keep_alive: bool,
        body_bytes: usize,
        method_ok: bool,
    },
    /// Unparseable: answer with this status and close.
    Bad(u16),
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn parse_request(buf: &[u8]) -> Parsed {
    let Some(len) = find_head_end(buf) else {
        return if buf.len() > REQUEST_HEAD_BYTES_MAX {
            Parsed::Bad(431)
        } else {
            Parsed::Incomplete
        };
    };
    let Ok(head) = core::str::from_utf8(&buf[..len]) else {
        return Parsed::Bad(400);
    };
    let mut lines = head.split("\r\n");
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Parsed::Bad(400);
    };
    let mut keep_alive = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Parsed::Bad(400),
    };
    let mut body_bytes = 0usize;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            if value.eq_ignore_ascii_case("close") {
                keep_alive = false;
            } else if value.eq_ignore_ascii_case("keep-alive") {
                keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            match value.parse::<usize>() {
                Ok(n) => body_bytes = n,
                Err(_) => return Parsed::Bad(400),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Bad(501);
        }
    }
    let path = target.split('?').next().unwrap_or("/").to_string();
    Parsed::Request {
        len,
        path,
        keep_alive,
        body_bytes,
        method_ok: method == "GET" || method == "HEAD",
    }
}

fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        _ => "Error",
    }
}

impl HttpServer {
    /// A server for `files` on `port`.
    pub fn new(port: u16, files: Arc<FileSet>) -> Self {
        HttpServer {
            port,
            files,
            listener: None,
            conns: BTreeMap::new(),
            scratch: vec![0; 16 * 1024],
            stats: ServerStats::default(),
        }
    }

    /// What this shard's server did so far.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    fn accept_all(&mut self, ctx: &mut Ctx<'_>) {
        let Some(l) = self.listener else { return };
        while let Ok((conn, peer)) = ctx.accept(l) {
            self.stats.connections_accepted += 1;
            if conn.shard() != ctx.shard_info().shard {
                self.stats.connections_foreign += 1;
            }
            if self.stats.peers.len() < PEERS_RECORDED_MAX {
                self.stats.peers.push(peer);
            }
            self.conns.insert(
                conn.handle(),
                ServerConn {
                    conn,
                    inbuf: Vec::new(),
                    body_skip_bytes: 0,
                    out: Vec::new(),
                    out_pos: 0,
                    close_after: false,
                    peer_finished: false,
                    shut: false,
                },
            );
            // Data may already be waiting.
            self.service(ctx, conn.handle());
        }
    }

    /// Reads, answers and flushes one connection until it would block.
    fn service(&mut self, ctx: &mut Ctx<'_>, h: SocketHandle) {
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        let mut failed = false;
        loop {
            // Flush first: one response buffered at a time.
            while c.out_pos < c.out.len() {
                match ctx.send(c.conn, &c.out[c.out_pos..]) {
                    Ok(n) => c.out_pos += n,
                    Err(SocketError::WouldBlock) => return,
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                break;
            }
            c.out.clear();
            c.out_pos = 0;
            if c.close_after {
                break;
            }
            // Parse what is buffered before reading more (pipelining).
            if c.body_skip_bytes > 0 {
                let n = c.body_skip_bytes.min(c.inbuf.len());
                c.inbuf.drain(..n);
                c.body_skip_bytes -= n;
            }
            if c.body_skip_bytes == 0 {
                match parse_request(&c.inbuf) {
                    Parsed::Request {
                        len,
                        path,
                        keep_alive,
                        body_bytes,
                        method_ok,
                    } => {
                        c.inbuf.drain(..len);
                        c.body_skip_bytes = body_bytes;
                        self.stats.requests += 1;
                        let (code, body) = if !method_ok {
                            (405, None)
                        } else {
                            match self.files.get(&path) {
                                Some(b) => (200, Some(b.clone())),
                                None => (404, None),
                            }
                        };
                        match code {
                            200 => self.stats.responses_200 += 1,
                            404 => self.stats.responses_404 += 1,
                            _ => self.stats.responses_error += 1,
                        }
                        write_response(&mut c.out, code, &path, body.as_deref(), keep_alive);
                        if let Some(b) = &body {
                            self.stats.body_bytes_sent += b.len() as u64;
                        }
                        c.close_after = !keep_alive;
                        continue;
                    }
                    Parsed::Bad(code) => {
                        self.stats.requests += 1;
                        self.stats.responses_error += 1;
                        write_response(&mut c.out, code, "", None, false);
                        c.inbuf.clear();
                        c.close_after = true;
                        continue;
                    }
                    Parsed::Incomplete => {}
                }
            }
            if c.peer_finished {
                break;
            }
            match ctx.recv(c.conn, &mut self.scratch) {
                Ok(n) => {
                    let data = self.scratch.get(..n).unwrap_or(&[]);
                    if c.body_skip_bytes > 0 {
                        let skip = c.body_skip_bytes.min(data.len());
                        c.body_skip_bytes -= skip;
                        c.inbuf.extend_from_slice(data.get(skip..).unwrap_or(&[]));
                    } else {
                        c.inbuf.extend_from_slice(data);
                    }
                }
                Err(SocketError::WouldBlock) => return,
                Err(SocketError::Finished) => {
                    c.peer_finished = true;
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        // Done with this connection: finish our direction, release it once the peer is done.
        if failed {
            let _ = ctx.close(c.conn);
            self.conns.remove(&h);
            self.stats.connections_closed += 1;
            return;
        }
        if !c.shut {
            c.shut = true;
            let _ = ctx.shutdown(c.conn);
        }
        if c.peer_finished {
            let _ = ctx.close(c.conn);
            self.conns.remove(&h);
            self.stats.connections_closed += 1;
        }
    }
}

fn write_response(out: &mut Vec<u8>, code: u16, path: &str, body: Option<&[u8]>, keep: bool) {
    use std::io::Write;
    let body = body.unwrap_or(b"");
    let ctype = if code == 200 {
        content_type(path)
    } else {
        "text/plain; charset=utf-8"
    };
    let reason = status_text(code);
    let err_body = if code == 200 {
        &b""[..]
    } else {
        reason.as_bytes()
    };
    let len = if code == 200 {
        body.len()
    } else {
        err_body.len()
    };
    let conn = if keep { "keep-alive" } else { "close" };
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 {code} {reason}\r\nServer: rsstack\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\nConnection: {conn}\r\n\r\n"
    );
    out.extend_from_slice(if code == 200 { body } else { err_body });
}

impl App for HttpServer {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        // A listener that cannot open leaves the shard idle; every accept path checks.
        self.listener = ctx.listen(self.port, BACKLOG).ok();
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        for e in events {
            if Some(e.handle) == self.listener.map(|l| l.handle()) {
                self.accept_all(ctx);
                continue;
            }
            let Some(c) = self.conns.get_mut(&e.handle) else {
                continue;
            };
            if e.readiness.contains(Readiness::ERROR) || e.readiness.contains(Readiness::CLOSED) {
                let _ = ctx.close(c.conn);
                self.conns.remove(&e.handle);
                self.stats.connections_closed += 1;
                continue;
            }
            self.service(ctx, e.handle);
        }
    }

    fn progress(&self) -> u64 {
        self.stats.requests
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keep_alive_and_close() {
        match parse_request(b"GET /a.css?x=1 HTTP/1.1\r\nHost: h\r\n\r\nrest") {
            Parsed::Request {
                len,
                path,
                keep_alive,
                ..
            } => {
                assert_eq!(len, 36);
                assert_eq!(path, "/a.css");
                assert!(keep_alive);
            }
            _ => panic!("expected a request"),
        }
        assert!(matches!(
            parse_request(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"),
            Parsed::Request {
                keep_alive: false,
                ..
            }
        ));
        assert!(matches!(
            parse_request(b"GET / HTTP/1.1\r\n"),
            Parsed::Incomplete
        ));
        assert!(matches!(
            parse_request(b"garbage\r\n\r\n"),
            Parsed::Bad(400)
        ));
        let long = vec![b'a'; REQUEST_HEAD_BYTES_MAX + 1];
        assert!(matches!(parse_request(&long), Parsed::Bad(431)));
    }

    #[test]
    fn content_type_by_extension() {
        assert_eq!(content_type("/index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("/style.css"), "text/css");
        assert_eq!(content_type("/x.bin"), "application/octet-stream");
        assert_eq!(content_type("/"), "text/html; charset=utf-8");
    }
}
