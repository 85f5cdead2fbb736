//! HTTP/1.1 server over an in-memory file set: `GET` and `HEAD`, keep-alive, pipelining,
//! `Content-Length`, 404, `Content-Type` by extension, percent-decoded paths. Requests with a
//! body are read past their `Content-Length`; chunked request bodies are refused with 501 and
//! the connection closed.
//!
//! Bounds: a request head is at most [`REQUEST_HEAD_BYTES_MAX`] (else 431 and close); the
//! response output of a connection is produced one request at a time, so at most one response
//! head is buffered per connection. A file body is never copied by the server: the connection
//! holds the file's `Arc<[u8]>` and hands the stack slices of it as send-buffer room opens, so a
//! 100 MB file costs no more memory per connection than a small one.

use core::net::SocketAddr;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{Error, ErrorKind};
use std::path::Path;
use std::sync::Arc;

use stack::{SocketError, SocketEvent};

use crate::http_timeouts::{HttpTimeouts, Phase};
use crate::serve::{Handler, Step, StreamServer, step_of};
use app::{App, Conn, ConnState, Ctx, Moved};

/// Largest request head (request line + headers) accepted, in bytes.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8192;
/// Peers remembered per shard for tests and reports ([`ServerStats::peers`]).
pub const PEERS_RECORDED_MAX: usize = 65_536;
/// Accept backlog of each shard's listener (the same for every stream server of this crate).
pub const BACKLOG: usize = crate::serve::STREAM_BACKLOG;

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

    /// Loads every regular file under `dir`, recursively. A file's URL path is `/` followed
    /// by its path relative to `dir` with `/` separators; a directory's `index.html` also
    /// answers for the directory (`/` and `/sub/`).
    ///
    /// Symbolic links are followed only to regular files inside `dir` (links to directories,
    /// and links leading outside `dir`, are skipped: no loops, no escape); other non-regular
    /// entries (sockets, devices) are skipped.
    ///
    /// Bounds: at most [`FILESET_FILES_MAX`] files and [`FILESET_BYTES_MAX`] bytes in all,
    /// else an error naming the file that crossed the bound. Errors reading a file or a
    /// directory, and names that are not UTF-8, are errors naming the path.
    pub fn from_dir(dir: &Path) -> std::io::Result<FileSet> {
        FileSet::from_dir_capped(dir, FILESET_BYTES_MAX, FILESET_FILES_MAX)
    }

    /// [`FileSet::from_dir`] with the bounds as arguments.
    fn from_dir_capped(dir: &Path, bytes_max: u64, files_max: usize) -> std::io::Result<FileSet> {
        let root = dir.canonicalize().map_err(|e| with_path(e, dir))?;
        if !root.is_dir() {
            return Err(Error::new(
                ErrorKind::NotADirectory,
                format!("{}: not a directory", dir.display()),
            ));
        }
        let mut set = FileSet::new();
        // Invariant: ≤ bytes_max.
        let mut total_bytes = 0u64;
        // Depth-first with an explicit stack; sorted entries make the walk deterministic.
        let mut todo = vec![(root.clone(), String::new())];
        while let Some((abs, rel)) = todo.pop() {
            let mut entries = Vec::new();
            for e in std::fs::read_dir(&abs).map_err(|e| with_path(e, &abs))? {
                let e = e.map_err(|e| with_path(e, &abs))?;
                entries.push(e.path());
            }
            entries.sort();
            for path in entries {
                let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                    return Err(Error::new(
                        ErrorKind::InvalidData,
                        format!("{}: file name is not UTF-8", path.display()),
                    ));
                };
                let url = format!("{rel}/{name}");
                let meta = std::fs::symlink_metadata(&path).map_err(|e| with_path(e, &path))?;
                let target = if meta.file_type().is_symlink() {
                    match path.canonicalize() {
                        Ok(t) if t.starts_with(&root) && t.is_file() => t,
                        // Dangling, outside `dir`, or a directory: skipped.
                        _ => continue,
                    }
                } else if meta.is_dir() {
                    todo.push((path.clone(), url));
                    continue;
                } else if meta.is_file() {
                    path.clone()
                } else {
                    continue;
                };
                if set.files.len() >= files_max {
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        format!(
                            "{}: more than {files_max} files under {}",
                            path.display(),
                            dir.display()
                        ),
                    ));
                }
                let too_large = || {
                    Error::new(
                        ErrorKind::FileTooLarge,
                        format!(
                            "{}: the files under {} exceed {bytes_max} bytes",
                            path.display(),
                            dir.display()
                        ),
                    )
                };
                // The length is checked before reading (no huge read) and again after it
                // (the file may have grown in between).
                let room = bytes_max - total_bytes;
                let len = std::fs::metadata(&target)
                    .map_err(|e| with_path(e, &path))?
                    .len();
                if len > room {
                    return Err(too_large());
                }
                let body = std::fs::read(&target).map_err(|e| with_path(e, &path))?;
                if body.len() as u64 > room {
                    return Err(too_large());
                }
                total_bytes += body.len() as u64;
                let body: Arc<[u8]> = body.into();
                if name == "index.html" {
                    set.files.insert(format!("{rel}/"), body.clone());
                }
                set.files.insert(url, body);
            }
        }
        Ok(set)
    }

    /// Files (URL paths) in the set, an `index.html` counted again for its directory.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when the set holds no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The body served for URL path `path` (already percent-decoded), if any.
    pub fn get(&self, path: &str) -> Option<&Arc<[u8]>> {
        self.files.get(path)
    }

    /// The URL paths, in order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }
}

/// Largest total of file bytes [`FileSet::from_dir`] loads (4 GiB): the set lives in memory.
pub const FILESET_BYTES_MAX: u64 = 4 << 30;
/// Most files [`FileSet::from_dir`] loads.
pub const FILESET_FILES_MAX: usize = 100_000;

/// `e` with `path` in its message.
fn with_path(e: Error, path: &Path) -> Error {
    Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// `Content-Type` for a path, by extension.
pub fn content_type(path: &str) -> &'static str {
    // Lower-cased in a stack buffer (no allocation per response); an extension longer than
    // any known one is treated as none.
    let mut lower = [0u8; 8];
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    let ext = match lower.get_mut(..ext.len()) {
        Some(l) => {
            l.copy_from_slice(ext.as_bytes());
            l.make_ascii_lowercase();
            core::str::from_utf8(l).unwrap_or("")
        }
        None => "",
    };
    match ext {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/vnd.microsoft.icon",
        "mjs" => "text/javascript",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "wasm" => "application/wasm",
        "woff2" => "font/woff2",
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
    /// File-body bytes accepted by the stack's send buffers (`HEAD` answers send none).
    pub body_bytes_sent: u64,
    /// Connections whose `Conn::shard()` differed from the serving shard (never expected).
    pub connections_foreign: u64,
    /// Connections that moved to another shard (live rebalancing) with their session, and
    /// that arrived from another shard.
    pub connections_moved_out: u64,
    pub connections_moved_in: u64,
    /// Connections ended by the application timeouts (`HttpTimeouts`): the request head not
    /// in within `header_ns`, idle past `keepalive_ns`, no send progress for `send_ns`.
    pub timeouts_header: u64,
    pub timeouts_keepalive: u64,
    pub timeouts_send: u64,
    /// Peer addresses of accepted connections (at most [`PEERS_RECORDED_MAX`]).
    pub peers: Vec<SocketAddr>,
}

/// One HTTP connection.
#[derive(Debug)]
pub(crate) struct ServerConn {
    /// Received bytes not yet parsed. Invariant: ≤ `REQUEST_HEAD_BYTES_MAX` + one read.
    inbuf: Vec<u8>,
    /// Request-body bytes still to skip.
    body_skip_bytes: usize,
    /// Response head (and error body) bytes not yet accepted by the stack, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
    /// The file body following `out`, sent from `body_pos` once `out` is flushed.
    body: Option<Arc<[u8]>>,
    body_pos: usize,
    /// Finish our direction once the response is flushed, then only drain the peer.
    close_after: bool,
    peer_finished: bool,
    shut: bool,
    /// What it waits for, since when (`http_timeouts`); whether a request was answered on
    /// it yet and whether the last `service` moved response bytes into the stack.
    phase: Phase,
    since_ns: u64,
    answered: bool,
    progressed: bool,
}

impl ServerConn {
    /// After a `service`: the phase the connection is in now; entering a phase (or making
    /// send progress) restarts its clock.
    fn note_phase(&mut self, now_ns: u64) {
        let body_left = self.body.as_ref().is_some_and(|b| self.body_pos < b.len());
        let phase = if self.out_pos < self.out.len() || body_left {
            Phase::Send
        } else if self.close_after || (self.answered && self.inbuf.is_empty()) {
            Phase::KeepAlive
        } else {
            Phase::Header
        };
        if phase != self.phase || (phase == Phase::Send && self.progressed) {
            self.phase = phase;
            self.since_ns = now_ns;
        }
        self.progressed = false;
    }
}

/// The per-shard half of the server that is not the session table.
#[derive(Debug)]
struct HttpHandler {
    files: Arc<FileSet>,
    scratch: Vec<u8>,
    stats: ServerStats,
    timeouts: HttpTimeouts,
}

/// The HTTP/1.1 server application of one shard.
#[derive(Debug)]
pub struct HttpServer {
    server: StreamServer<ServerConn>,
    handler: HttpHandler,
}

enum Parsed<'a> {
    /// Need more bytes.
    Incomplete,
    /// A complete request head of `len` bytes.
    Request {
        len: usize,
        /// Borrowed from the request unless it had `%` escapes.
        path: Cow<'a, str>,
        keep_alive: bool,
        body_bytes: usize,
        method_ok: bool,
        /// `HEAD`: the head of the `GET` answer, no body.
        head_only: bool,
    },
    /// Unparseable: answer with this status and close.
    Bad(u16),
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn parse_request(buf: &[u8]) -> Parsed<'_> {
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
    let Some(path) = percent_decode(target.split('?').next().unwrap_or("/")) else {
        return Parsed::Bad(400);
    };
    Parsed::Request {
        len,
        path,
        keep_alive,
        body_bytes,
        method_ok: method == "GET" || method == "HEAD",
        head_only: method == "HEAD",
    }
}

/// Decodes `%XX` escapes of a request path (RFC 3986 §2.1). `None` for a malformed escape or
/// a result that is not UTF-8. Allocates only when there is an escape.
fn percent_decode(path: &str) -> Option<Cow<'_, str>> {
    if !path.contains('%') {
        return Some(Cow::Borrowed(path));
    }
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hex = core::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
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
            server: StreamServer::new(port),
            handler: HttpHandler {
                files,
                scratch: vec![0; 16 * 1024],
                stats: ServerStats::default(),
                timeouts: HttpTimeouts::default(),
            },
        }
    }

    /// The same server with application timeouts `timeouts` (default:
    /// [`HttpTimeouts::default`], nginx's 60 s / 75 s / 60 s).
    pub fn with_timeouts(mut self, timeouts: HttpTimeouts) -> Self {
        self.set_timeouts(timeouts);
        self
    }

    /// Changes the timeouts; connections pick the new ones up at their next event.
    pub fn set_timeouts(&mut self, timeouts: HttpTimeouts) {
        self.handler.timeouts = timeouts;
    }

    /// What this shard's server did so far.
    pub fn stats(&self) -> &ServerStats {
        &self.handler.stats
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.server.open_sessions()
    }
}

impl Handler for HttpHandler {
    type Session = ServerConn;

    fn open(&mut self, ctx: &mut Ctx<'_>, conn: Conn, peer: SocketAddr) -> ServerConn {
        self.stats.connections_accepted += 1;
        if conn.shard() != ctx.shard_info().shard {
            self.stats.connections_foreign += 1;
        }
        if self.stats.peers.len() < PEERS_RECORDED_MAX {
            self.stats.peers.push(peer);
        }
        ServerConn {
            inbuf: Vec::new(),
            body_skip_bytes: 0,
            out: Vec::new(),
            out_pos: 0,
            body: None,
            body_pos: 0,
            close_after: false,
            peer_finished: false,
            shut: false,
            phase: Phase::Header,
            since_ns: ctx.now_ns(),
            answered: false,
            progressed: false,
        }
    }

    /// Reads, answers and flushes one connection until it would block. `Done` once the
    /// peer's FIN was read and nothing is owed to it.
    fn service(&mut self, c: &mut ServerConn, ctx: &mut Ctx<'_>, conn: Conn) -> Step {
        let step = self.work(c, ctx, conn);
        c.note_phase(ctx.now_ns());
        step
    }

    fn ended(&mut self, _s: ServerConn, _step: Step) {
        self.stats.connections_closed += 1;
    }

    fn deadline_ns(&self, c: &ServerConn) -> Option<u64> {
        self.timeouts.deadline_ns(c.phase, c.since_ns)
    }

    fn timed_out(&mut self, c: &ServerConn) -> bool {
        match c.phase {
            Phase::Header => self.stats.timeouts_header += 1,
            Phase::KeepAlive => self.stats.timeouts_keepalive += 1,
            Phase::Send => self.stats.timeouts_send += 1,
        }
        c.phase == Phase::Send
    }
}

impl HttpHandler {
    /// `service`'s work: see there.
    fn work(&mut self, c: &mut ServerConn, ctx: &mut Ctx<'_>, conn: Conn) -> Step {
        loop {
            // Flush first: one response at a time, the head then the shared file body.
            while c.out_pos < c.out.len() {
                match ctx.send(conn, c.out.get(c.out_pos..).unwrap_or(&[])) {
                    Ok(n) => {
                        c.out_pos += n;
                        c.progressed |= n > 0;
                    }
                    Err(e) => return step_of(e),
                }
            }
            while let Some(body) = c.body.as_ref().filter(|b| c.body_pos < b.len()) {
                match ctx.send(conn, body.get(c.body_pos..).unwrap_or(&[])) {
                    Ok(n) => {
                        c.body_pos += n;
                        c.progressed |= n > 0;
                        self.stats.body_bytes_sent += n as u64;
                    }
                    Err(e) => return step_of(e),
                }
            }
            c.out.clear();
            c.out_pos = 0;
            c.body = None;
            c.body_pos = 0;
            if c.close_after {
                if !c.shut {
                    c.shut = true;
                    let _ = ctx.shutdown(conn);
                }
                // Nothing more is answered: read and drop until the peer's FIN, so the
                // release never finds unread data (which would reset the connection).
                return crate::discard::drain(ctx, conn, &mut self.scratch, |_| {});
            }
            // Parse what is buffered before reading more (pipelining).
            if c.body_skip_bytes > 0 {
                let n = c.body_skip_bytes.min(c.inbuf.len());
                c.inbuf.drain(..n);
                c.body_skip_bytes -= n;
            }
            if c.body_skip_bytes == 0 && self.answer(c) {
                continue;
            }
            if c.peer_finished {
                return Step::Done;
            }
            match ctx.recv(conn, &mut self.scratch) {
                Ok(n) => {
                    let data = self.scratch.get(..n).unwrap_or(&[]);
                    let skip = c.body_skip_bytes.min(data.len());
                    c.body_skip_bytes -= skip;
                    c.inbuf.extend_from_slice(data.get(skip..).unwrap_or(&[]));
                }
                Err(SocketError::Finished) => c.peer_finished = true,
                Err(e) => return step_of(e),
            }
        }
    }

    /// Parses one request from `c.inbuf` and queues its response; false when no complete
    /// request is buffered.
    fn answer(&mut self, c: &mut ServerConn) -> bool {
        match parse_request(&c.inbuf) {
            Parsed::Request {
                len,
                path,
                keep_alive,
                body_bytes,
                method_ok,
                head_only,
            } => {
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
                let head = Head {
                    code,
                    path: &path,
                    body_bytes: body.as_ref().map(|b| b.len()),
                    keep_alive,
                    head_only,
                };
                write_response(&mut c.out, &head);
                c.body = body.filter(|_| !head_only);
                c.close_after = !keep_alive;
                c.answered = true;
                // Last: `path` borrows the buffered request.
                c.inbuf.drain(..len);
                true
            }
            Parsed::Bad(code) => {
                self.stats.requests += 1;
                self.stats.responses_error += 1;
                let head = Head {
                    code,
                    path: "",
                    body_bytes: None,
                    keep_alive: false,
                    head_only: false,
                };
                write_response(&mut c.out, &head);
                c.inbuf.clear();
                c.close_after = true;
                true
            }
            Parsed::Incomplete => false,
        }
    }
}

/// What a response head says.
struct Head<'a> {
    code: u16,
    /// The request path (for `Content-Type`).
    path: &'a str,
    /// The file's length for a 200.
    body_bytes: Option<usize>,
    keep_alive: bool,
    /// A `HEAD` request: the same head, no body.
    head_only: bool,
}

/// Appends the response head to `out`, and for errors the short text body. A 200's body is
/// not written here: the connection streams it from the shared file.
fn write_response(out: &mut Vec<u8>, h: &Head<'_>) {
    use std::io::Write;
    let ok = h.code == 200;
    let ctype = if ok {
        content_type(h.path)
    } else {
        "text/plain; charset=utf-8"
    };
    let reason = status_text(h.code);
    let len = if ok {
        h.body_bytes.unwrap_or(0)
    } else {
        reason.len()
    };
    let conn = if h.keep_alive { "keep-alive" } else { "close" };
    let code = h.code;
    // Writing into a Vec cannot fail.
    // RFC 9110 §15.5.6: a 405 lists the methods the resource supports.
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let _ = write!(
        out,
        "HTTP/1.1 {code} {reason}\r\nServer: rsstack\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\n{allow}Connection: {conn}\r\n\r\n"
    );
    if !ok && !h.head_only {
        out.extend_from_slice(reason.as_bytes());
    }
}

impl App for HttpServer {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        // A listener that cannot open leaves the shard idle; every accept path checks.
        if self.server.start(ctx).is_ok() {
            // Nagle off on every connection (nginx's `tcp_nodelay on`): a response's last
            // partial segment must not wait for the ACK of the segments before it, which a
            // client delaying its ACKs holds back for its delayed-ACK time (40 ms per
            // response for pages a little over one segment).
            self.server
                .set_listener_option(ctx, stack::SocketOption::NoDelay(true));
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        self.server.poll(ctx, events, &mut self.handler);
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.server.poll_timeout()
    }

    fn progress(&self) -> u64 {
        self.handler.stats.requests
    }

    fn export_conn(&mut self, _ctx: &mut Ctx<'_>, conn: Conn, _to: u16) -> Option<ConnState> {
        let s = self.server.export(conn)?;
        self.handler.stats.connections_moved_out += 1;
        Some(s)
    }

    fn import_conn(&mut self, ctx: &mut Ctx<'_>, conn: Conn, moved: Moved) {
        if moved.from != moved.to {
            self.handler.stats.connections_moved_in += 1;
        }
        self.server.import(ctx, conn, moved, &mut self.handler);
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

    /// A directory under the system temp dir, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!("rsstack-apps-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).expect("temp dir");
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn from_dir_maps_relative_paths_and_index_and_skips_escaping_links() {
        let d = TempDir::new("fileset");
        let outside = TempDir::new("fileset-outside");
        let root = &d.0;
        std::fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
        std::fs::write(root.join("index.html"), b"<p>home").expect("write");
        std::fs::write(root.join("sub/index.html"), b"<p>sub").expect("write");
        std::fs::write(root.join("sub/deeper/data.bin"), [7u8; 3000]).expect("write");
        std::fs::write(outside.0.join("secret.txt"), b"secret").expect("write");
        std::os::unix::fs::symlink(outside.0.join("secret.txt"), root.join("leak.txt"))
            .expect("symlink");
        std::os::unix::fs::symlink(root.join("index.html"), root.join("alias.html"))
            .expect("symlink");
        std::os::unix::fs::symlink(root, root.join("sub/loop")).expect("symlink");
        let set = FileSet::from_dir(root).expect("loads");
        let paths: Vec<&str> = set.paths().collect();
        assert_eq!(
            paths,
            [
                "/",
                "/alias.html",
                "/index.html",
                "/sub/",
                "/sub/deeper/data.bin",
                "/sub/index.html"
            ]
        );
        assert_eq!(set.get("/").map(|b| &b[..]), Some(&b"<p>home"[..]));
        assert_eq!(set.get("/sub/").map(|b| &b[..]), Some(&b"<p>sub"[..]));
        assert_eq!(set.get("/sub/deeper/data.bin").map(|b| b.len()), Some(3000));
        assert!(
            set.get("/leak.txt").is_none(),
            "a link out of the root is skipped"
        );
    }

    #[test]
    fn from_dir_refuses_more_bytes_or_files_than_its_caps_naming_the_file() {
        let d = TempDir::new("fileset-caps");
        std::fs::write(d.0.join("a.bin"), [1u8; 600]).expect("write");
        std::fs::write(d.0.join("b.bin"), [2u8; 600]).expect("write");
        assert_eq!(
            FileSet::from_dir_capped(&d.0, 1200, 2).expect("fits").len(),
            2
        );
        let e = FileSet::from_dir_capped(&d.0, 1199, 2).expect_err("bytes");
        assert_eq!(e.kind(), ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("b.bin"), "{e}");
        let e = FileSet::from_dir_capped(&d.0, 1200, 1).expect_err("files");
        assert!(
            e.to_string().contains("b.bin") && e.to_string().contains("more than 1"),
            "{e}"
        );
    }

    #[test]
    fn from_dir_of_a_missing_directory_names_it() {
        let e = FileSet::from_dir(Path::new("/nonexistent/rsstack-apps")).expect_err("missing");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert!(e.to_string().contains("/nonexistent/rsstack-apps"), "{e}");
    }

    #[test]
    fn percent_decoding_rejects_malformed_escapes() {
        assert_eq!(percent_decode("/a%20b").as_deref(), Some("/a b"));
        assert_eq!(percent_decode("/plain").as_deref(), Some("/plain"));
        assert_eq!(percent_decode("/bad%2"), None);
        assert_eq!(percent_decode("/bad%zz"), None);
        assert_eq!(percent_decode("/%ff"), None, "not UTF-8");
        assert!(matches!(
            parse_request(b"GET /x%4 HTTP/1.1\r\n\r\n"),
            Parsed::Bad(400)
        ));
    }

    #[test]
    fn head_response_has_the_get_length_and_no_body() {
        let mut out = Vec::new();
        let h = Head {
            code: 200,
            path: "/a.txt",
            body_bytes: Some(1234),
            keep_alive: true,
            head_only: true,
        };
        write_response(&mut out, &h);
        let text = String::from_utf8(out).expect("ascii");
        assert!(text.contains("Content-Length: 1234\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "no body after the head: {text}");
    }

    #[test]
    fn method_not_allowed_lists_get_and_head() {
        assert!(matches!(
            parse_request(b"POST / HTTP/1.1\r\n\r\n"),
            Parsed::Request {
                method_ok: false,
                ..
            }
        ));
        let mut out = Vec::new();
        let h = Head {
            code: 405,
            path: "/",
            body_bytes: None,
            keep_alive: true,
            head_only: false,
        };
        write_response(&mut out, &h);
        let text = String::from_utf8(out).expect("ascii");
        assert!(
            text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{text}"
        );
        assert!(text.contains("\r\nAllow: GET, HEAD\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nMethod Not Allowed"), "{text}");
    }

    #[test]
    fn content_type_by_extension() {
        assert_eq!(content_type("/index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("/style.css"), "text/css");
        assert_eq!(content_type("/LOGO.PNG"), "image/png");
        assert_eq!(content_type("/x.bin"), "application/octet-stream");
        assert_eq!(content_type("/"), "text/html; charset=utf-8");
    }
}
