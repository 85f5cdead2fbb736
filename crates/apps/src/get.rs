//! A one-shot HTTP/1.1 client: one connection, one `GET`, one response (like `curl URL`).
//!
//! The request is `GET path HTTP/1.1` (or `HEAD`, [`HttpGet::head_only`]) with `Host` and
//! `Connection: close`. The response head
//! (status line and header fields, RFC 9112 §4–5) is parsed strictly; interim 1xx responses are
//! skipped. The body is framed as RFC 9112 §6.3 says: none for 204 and 304, chunked when the
//! last transfer coding is `chunked` (a bounded decoder, [`ChunkedDecoder`]), else by
//! `Content-Length`, else until the server closes.
//!
//! Bounds: the response head is at most [`RESPONSE_HEAD_BYTES_MAX`] bytes, a chunk-size line
//! at most [`CHUNK_LINE_BYTES_MAX`], the trailer section at most [`RESPONSE_HEAD_BYTES_MAX`],
//! and the body at most the `body_bytes_max` given to [`HttpGet::new`]
//! ([`GetError::BodyTooLarge`] beyond it). Malformed input ends the request with
//! [`GetError::Protocol`]; nothing derived from the peer can panic.

use core::fmt;
use core::net::SocketAddr;

use stack::{Readiness, SocketError, SocketEvent};

use app::{App, Conn, Ctx};

/// Largest response head (status line + header fields + the empty line), in bytes; also the
/// bound on a chunked body's trailer section.
pub const RESPONSE_HEAD_BYTES_MAX: usize = 16 * 1024;
/// Largest chunk-size line (size, extensions, CRLF), in bytes.
pub const CHUNK_LINE_BYTES_MAX: usize = 1024;
/// Most body bytes reserved on the strength of a `Content-Length` alone (more grows as data
/// arrives).
pub const BODY_RESERVE_BYTES_MAX: usize = 16 << 20;
/// Interim (1xx) responses skipped before the final one; more is a protocol error.
pub const INTERIM_RESPONSES_MAX: u32 = 8;

/// A complete response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResponse {
    pub status: u16,
    /// Header fields in arrival order: names as sent, values with surrounding blanks removed.
    pub headers: Vec<(String, String)>,
    /// The body, decoded from chunked framing when it was chunked.
    pub body: Vec<u8>,
}

impl GetResponse {
    /// The value of the first header field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetError {
    /// The server answered the SYN with a reset (nothing listens on the port).
    Refused,
    /// The connection was reset after it was established.
    Reset,
    /// The connection timed out (handshake or retransmissions).
    TimedOut,
    /// An ICMP error said the host or port is unreachable.
    Unreachable,
    /// A socket call failed otherwise (no route, no free port, ...).
    Socket(SocketError),
    /// The response broke HTTP/1.1 framing or a bound; the text says how.
    Protocol(String),
    /// The body is longer than the limit given to [`HttpGet::new`].
    BodyTooLarge { limit_bytes: u64 },
}

impl fmt::Display for GetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GetError::Refused => write!(f, "connection refused"),
            GetError::Reset => write!(f, "connection reset by peer"),
            GetError::TimedOut => write!(f, "connection timed out"),
            GetError::Unreachable => write!(f, "host or port unreachable"),
            GetError::Socket(e) => write!(f, "socket error: {e:?}"),
            GetError::Protocol(m) => write!(f, "HTTP protocol error: {m}"),
            GetError::BodyTooLarge { limit_bytes } => {
                write!(f, "response body exceeds {limit_bytes} bytes")
            }
        }
    }
}

impl std::error::Error for GetError {}

fn protocol(m: impl Into<String>) -> GetError {
    GetError::Protocol(m.into())
}

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (204, 304, 1xx).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Until the server closes.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub framing: Framing,
}

/// True for an RFC 9110 §5.6.2 token character.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parses a complete response head (`head` ends with the empty line). Strict: the status line
/// must be `HTTP/1.x NNN[ reason]`, every field line `token: value`, no obs-fold, a single
/// well-formed `Content-Length`.
pub fn parse_response_head(head: &[u8]) -> Result<ResponseHead, GetError> {
    let mut headers = Vec::new();
    let (status, framing) = parse_response_head_with(head, |name, value| {
        headers.push((name.to_string(), value.to_string()));
    })?;
    Ok(ResponseHead {
        status,
        headers,
        framing,
    })
}

/// [`parse_response_head`] without building the header list: status and framing, each field
/// line (name, trimmed value) handed to `on_header`. Allocates nothing unless the head is
/// invalid (the error's message), so a keep-alive client can parse every response with it.
pub fn parse_response_head_with(
    head: &[u8],
    mut on_header: impl FnMut(&str, &str),
) -> Result<(u16, Framing), GetError> {
    let text = core::str::from_utf8(head).map_err(|_| protocol("response head is not UTF-8"))?;
    let text = text
        .strip_suffix("\r\n\r\n")
        .ok_or_else(|| protocol("response head does not end with an empty line"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let rest = status_line
        .strip_prefix("HTTP/1.")
        .ok_or_else(|| protocol(format!("bad status line {status_line:?}")))?;
    let mut rest = rest.bytes();
    let minor_ok = rest.next().is_some_and(|b| b.is_ascii_digit()) && rest.next() == Some(b' ');
    let mut code = [0u8; 3];
    let mut code_len = 0;
    for slot in &mut code {
        let Some(b) = rest.next() else { break };
        *slot = b;
        code_len += 1;
    }
    let after = rest.next();
    if !minor_ok
        || code_len != 3
        || !code.iter().all(u8::is_ascii_digit)
        || !matches!(after, None | Some(b' '))
    {
        return Err(protocol(format!("bad status line {status_line:?}")));
    }
    let status = code
        .iter()
        .fold(0u16, |acc, d| acc * 10 + u16::from(d - b'0'));
    if !(100..=599).contains(&status) {
        return Err(protocol(format!("status {status} out of range")));
    }
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut coded = false;
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| protocol(format!("header line without a colon: {line:?}")))?;
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(protocol(format!("bad header name {name:?}")));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(protocol(format!("bad header value for {name}")));
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("content-length") {
            // RFC 9110 §8.6: a list of identical values is the value; anything else is invalid.
            for v in value.split(',').map(|v| v.trim_matches([' ', '\t'])) {
                if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(protocol(format!("bad Content-Length {value:?}")));
                }
                let n = v
                    .parse::<u64>()
                    .map_err(|_| protocol(format!("bad Content-Length {value:?}")))?;
                if length.is_some_and(|l| l != n) {
                    return Err(protocol("conflicting Content-Length values"));
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding decides (RFC 9112 §6.3 item 4).
            for coding in value.split(',').map(|c| c.trim_matches([' ', '\t'])) {
                if coding.is_empty() {
                    continue;
                }
                coded = true;
                chunked = coding.eq_ignore_ascii_case("chunked");
            }
        }
        on_header(name, value);
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if coded {
        if chunked {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else {
        match length {
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    };
    Ok((status, framing))
}

/// Where a [`ChunkedDecoder`] is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Reading a chunk-size line.
    Size,
    /// Reading chunk data: bytes left.
    Data(u64),
    /// Expecting the CRLF after chunk data: bytes of it seen (0 or 1).
    DataEnd(u8),
    /// Reading trailer field lines after the last chunk.
    Trailer,
    /// The body ended.
    Done,
}

/// An incremental decoder of the chunked transfer coding (RFC 9112 §7.1). Feed it bytes in
/// any split; data goes to a sink, extensions and trailer fields are checked for size and
/// dropped.
///
/// Invariant: `line` holds at most [`CHUNK_LINE_BYTES_MAX`] bytes while reading a size line,
/// and the trailer section read so far is at most [`RESPONSE_HEAD_BYTES_MAX`] bytes.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: ChunkState,
    line: Vec<u8>,
    trailer_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder {
            state: ChunkState::Size,
            line: Vec::new(),
            trailer_bytes: 0,
        }
    }

    /// True once the last chunk and the trailer section have been read.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Decodes from `input`, handing chunk data to `sink` (which may refuse it). Returns the
    /// bytes consumed: all of `input`, or fewer when the body ended inside it.
    pub fn decode(
        &mut self,
        input: &[u8],
        mut sink: impl FnMut(&[u8]) -> Result<(), GetError>,
    ) -> Result<usize, GetError> {
        let mut i = 0usize;
        while i < input.len() {
            let rest = input.get(i..).unwrap_or(&[]);
            match self.state {
                ChunkState::Done => break,
                ChunkState::Data(left) => {
                    let n = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    sink(rest.get(..n).unwrap_or(&[]))?;
                    i += n;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd(0)
                    } else {
                        ChunkState::Data(left)
                    };
                }
                ChunkState::DataEnd(seen) => {
                    let want = if seen == 0 { b'\r' } else { b'\n' };
                    if rest.first() != Some(&want) {
                        return Err(protocol("chunk data not followed by CRLF"));
                    }
                    i += 1;
                    self.state = if seen == 0 {
                        ChunkState::DataEnd(1)
                    } else {
                        ChunkState::Size
                    };
                }
                ChunkState::Size | ChunkState::Trailer => {
                    let (take, complete) = match rest.iter().position(|&b| b == b'\n') {
                        Some(p) => (p + 1, true),
                        None => (rest.len(), false),
                    };
                    let bound = if self.state == ChunkState::Size {
                        CHUNK_LINE_BYTES_MAX
                    } else {
                        RESPONSE_HEAD_BYTES_MAX.saturating_sub(self.trailer_bytes)
                    };
                    if self.line.len() + take > bound {
                        return Err(protocol(if self.state == ChunkState::Size {
                            "chunk-size line too long"
                        } else {
                            "trailer section too long"
                        }));
                    }
                    self.line.extend_from_slice(rest.get(..take).unwrap_or(&[]));
                    i += take;
                    if complete {
                        self.end_line()?;
                    }
                }
            }
        }
        Ok(i)
    }

    /// Handles the complete line in `self.line` (ending with LF).
    fn end_line(&mut self) -> Result<(), GetError> {
        let line = core::mem::take(&mut self.line);
        let Some(body) = line.strip_suffix(b"\r\n") else {
            return Err(protocol("chunk line not ended by CRLF"));
        };
        if self.state == ChunkState::Trailer {
            self.trailer_bytes += line.len();
            if body.is_empty() {
                self.state = ChunkState::Done;
            } else if !body.contains(&b':') {
                return Err(protocol("trailer line without a colon"));
            }
            return Ok(());
        }
        let size_end = body
            .iter()
            .position(|&b| b == b';' || b == b' ' || b == b'\t')
            .unwrap_or(body.len());
        let (digits, ext) = body.split_at(size_end);
        if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(protocol(format!(
                "bad chunk size {:?}",
                String::from_utf8_lossy(digits)
            )));
        }
        let ext = ext.trim_ascii_start();
        if !ext.is_empty() && ext.first() != Some(&b';') {
            return Err(protocol("bad chunk extension"));
        }
        let size = digits.iter().fold(0u64, |acc, &d| {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                _ => d - b'A' + 10,
            };
            acc * 16 + u64::from(v)
        });
        self.state = if size == 0 {
            ChunkState::Trailer
        } else {
            ChunkState::Data(size)
        };
        Ok(())
    }
}

/// Where the request is.
#[derive(Debug)]
enum Phase {
    /// Waiting for the handshake.
    Connecting,
    /// Writing the request / reading the response head.
    Head,
    /// Reading the body.
    Body(Framing),
    /// The outcome is known; the connection is released.
    Over,
}

/// The one-shot `GET` client application (run it on one shard: `Some` on shard 0, `None`
/// elsewhere).
#[derive(Debug)]
pub struct HttpGet {
    remote: SocketAddr,
    request: Vec<u8>,
    /// Request bytes accepted by the stack. Invariant: ≤ `request.len()`.
    request_sent: usize,
    body_bytes_max: u64,
    conn: Option<Conn>,
    phase: Phase,
    connected: bool,
    /// Response head bytes so far. Invariant: ≤ `RESPONSE_HEAD_BYTES_MAX`.
    head: Vec<u8>,
    interim: u32,
    response: Option<(u16, Vec<(String, String)>)>,
    body: Vec<u8>,
    chunks: ChunkedDecoder,
    outcome: Option<Result<GetResponse, GetError>>,
    scratch: Box<[u8]>,
    started: bool,
    /// A `HEAD` request: the response has no body whatever its head says.
    head_only: bool,
}

impl HttpGet {
    /// A request for `path` on `remote`, with `Host: host_header`; bodies over
    /// `body_bytes_max` bytes fail with [`GetError::BodyTooLarge`].
    pub fn new(remote: SocketAddr, host_header: String, path: String, body_bytes_max: u64) -> Self {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: rsstack-get\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        )
        .into_bytes();
        HttpGet {
            remote,
            request,
            request_sent: 0,
            body_bytes_max,
            conn: None,
            phase: Phase::Connecting,
            connected: false,
            head: Vec::new(),
            interim: 0,
            response: None,
            body: Vec::new(),
            chunks: ChunkedDecoder::new(),
            outcome: None,
            scratch: vec![0; 64 * 1024].into_boxed_slice(),
            started: false,
            head_only: false,
        }
    }

    /// Sends `HEAD` instead of `GET` (like `curl -I`): the response is its head only.
    pub fn head_only(mut self) -> Self {
        if let Some(rest) = self.request.strip_prefix(b"GET ") {
            let mut r = b"HEAD ".to_vec();
            r.extend_from_slice(rest);
            self.request = r;
        }
        self.head_only = true;
        self
    }

    /// The result: `None` while the request runs.
    pub fn outcome(&self) -> Option<&Result<GetResponse, GetError>> {
        self.outcome.as_ref()
    }

    /// Body bytes received so far (for progress displays).
    pub fn body_bytes(&self) -> u64 {
        self.body.len() as u64
    }

    /// Records the outcome and releases the connection.
    fn finish(&mut self, ctx: &mut Ctx<'_>, result: Result<(), GetError>) {
        if let Some(conn) = self.conn.take() {
            match result {
                Ok(()) => {
                    let _ = ctx.shutdown(conn);
                    let _ = ctx.close(conn);
                }
                Err(_) => {
                    let _ = ctx.stack().tcp_abort(conn.handle());
                    let _ = ctx.close(conn);
                }
            }
        }
        self.phase = Phase::Over;
        self.outcome = Some(result.map(|()| {
            let (status, headers) = self.response.take().unwrap_or_default();
            GetResponse {
                status,
                headers,
                body: core::mem::take(&mut self.body),
            }
        }));
    }

    fn socket_error(&self, e: SocketError) -> GetError {
        match e {
            SocketError::Reset if !self.connected => GetError::Refused,
            SocketError::Reset => GetError::Reset,
            SocketError::TimedOut => GetError::TimedOut,
            SocketError::Unreachable => GetError::Unreachable,
            e => GetError::Socket(e),
        }
    }

    fn append_body(&mut self, data: &[u8]) -> Result<(), GetError> {
        append_bounded(&mut self.body, data, self.body_bytes_max)
    }

    /// Consumes received bytes. `Ok(true)` when the response is complete.
    fn feed(&mut self, mut data: &[u8]) -> Result<bool, GetError> {
        while !data.is_empty() {
            match self.phase {
                Phase::Connecting | Phase::Over => return Ok(false),
                Phase::Head => {
                    let before = self.head.len();
                    let room = RESPONSE_HEAD_BYTES_MAX - before;
                    let take = data.len().min(room);
                    self.head.extend_from_slice(data.get(..take).unwrap_or(&[]));
                    let from = before.saturating_sub(3);
                    let found = self
                        .head
                        .get(from..)
                        .and_then(|t| t.windows(4).position(|w| w == b"\r\n\r\n"));
                    let Some(p) = found else {
                        if self.head.len() >= RESPONSE_HEAD_BYTES_MAX {
                            return Err(protocol(format!(
                                "response head exceeds {RESPONSE_HEAD_BYTES_MAX} bytes"
                            )));
                        }
                        return Ok(false);
                    };
                    let head_len = from + p + 4;
                    data = data.get(head_len - before..).unwrap_or(&[]);
                    let head = parse_response_head(self.head.get(..head_len).unwrap_or(&[]))?;
                    self.head.clear();
                    if (100..200).contains(&head.status) {
                        if head.status == 101 {
                            return Err(protocol("unexpected 101 Switching Protocols"));
                        }
                        self.interim += 1;
                        if self.interim > INTERIM_RESPONSES_MAX {
                            return Err(protocol("too many interim responses"));
                        }
                        continue;
                    }
                    let framing = if self.head_only {
                        Framing::Empty
                    } else {
                        head.framing
                    };
                    if let Framing::Length(n) = framing {
                        if n > self.body_bytes_max {
                            return Err(GetError::BodyTooLarge {
                                limit_bytes: self.body_bytes_max,
                            });
                        }
                        // The peer's claim sizes at most BODY_RESERVE_BYTES_MAX up front.
                        let reserve = n.min(BODY_RESERVE_BYTES_MAX as u64);
                        self.body.reserve(usize::try_from(reserve).unwrap_or(0));
                    }
                    self.response = Some((head.status, head.headers));
                    self.phase = Phase::Body(framing);
                    if self.body_complete() {
                        return Ok(true);
                    }
                }
                Phase::Body(Framing::Chunked) => {
                    let mut chunks = core::mem::take(&mut self.chunks);
                    let (body, max) = (&mut self.body, self.body_bytes_max);
                    let r = chunks.decode(data, |d| append_bounded(body, d, max));
                    self.chunks = chunks;
                    r?;
                    // Bytes after the body are ignored: the server closes after it.
                    return Ok(self.chunks.is_done());
                }
                Phase::Body(Framing::Length(n)) => {
                    let left = n - self.body.len() as u64;
                    let take = data.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    self.append_body(data.get(..take).unwrap_or(&[]))?;
                    return Ok(self.body_complete());
                }
                Phase::Body(Framing::UntilClose) => {
                    self.append_body(data)?;
                    return Ok(false);
                }
                Phase::Body(Framing::Empty) => return Ok(true),
            }
        }
        Ok(self.body_complete())
    }

    fn body_complete(&self) -> bool {
        match self.phase {
            Phase::Body(Framing::Empty) => true,
            Phase::Body(Framing::Length(n)) => self.body.len() as u64 == n,
            Phase::Body(Framing::Chunked) => self.chunks.is_done(),
            _ => false,
        }
    }

    /// The server closed its direction: complete for until-close bodies, else truncated.
    fn peer_finished(&self) -> Result<(), GetError> {
        match self.phase {
            Phase::Body(Framing::UntilClose) => Ok(()),
            Phase::Body(Framing::Length(n)) => Err(protocol(format!(
                "connection closed after {} of {n} body bytes",
                self.body.len()
            ))),
            Phase::Body(Framing::Chunked) => {
                Err(protocol("connection closed inside a chunked body"))
            }
            _ if self.body_complete() => Ok(()),
            _ => Err(protocol(
                "connection closed before a complete response head",
            )),
        }
    }

    /// Writes the request and reads until the calls would block or the outcome is known.
    fn service(&mut self, ctx: &mut Ctx<'_>) {
        let Some(conn) = self.conn else { return };
        while self.request_sent < self.request.len() {
            match ctx.send(conn, self.request.get(self.request_sent..).unwrap_or(&[])) {
                Ok(n) => self.request_sent += n,
                Err(SocketError::WouldBlock) => break,
                Err(e) => {
                    let e = self.socket_error(e);
                    return self.finish(ctx, Err(e));
                }
            }
        }
        loop {
            let n = match ctx.recv(conn, &mut self.scratch) {
                Ok(n) => n,
                Err(SocketError::WouldBlock) => return,
                Err(SocketError::Finished) => {
                    let r = self.peer_finished();
                    return self.finish(ctx, r);
                }
                Err(e) => {
                    let e = self.socket_error(e);
                    return self.finish(ctx, Err(e));
                }
            };
            let data = core::mem::take(&mut self.scratch);
            let r = self.feed(data.get(..n).unwrap_or(&[]));
            self.scratch = data;
            match r {
                Ok(true) => return self.finish(ctx, Ok(())),
                Ok(false) => {}
                Err(e) => return self.finish(ctx, Err(e)),
            }
        }
    }
}

/// Appends `data` to `body` unless that makes it longer than `max` bytes.
fn append_bounded(body: &mut Vec<u8>, data: &[u8], max: u64) -> Result<(), GetError> {
    if body.len() as u64 + data.len() as u64 > max {
        return Err(GetError::BodyTooLarge { limit_bytes: max });
    }
    body.extend_from_slice(data);
    Ok(())
}

impl App for HttpGet {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.started = true;
        match ctx.connect(self.remote) {
            Ok(conn) => self.conn = Some(conn),
            Err(e) => {
                let e = self.socket_error(e);
                self.finish(ctx, Err(e));
            }
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        for e in events {
            let Some(conn) = self.conn else { return };
            if e.handle != conn.handle() {
                continue;
            }
            if e.readiness.contains(Readiness::CONNECTED) {
                self.connected = true;
                if matches!(self.phase, Phase::Connecting) {
                    self.phase = Phase::Head;
                }
            }
            if e.readiness.contains(Readiness::ERROR) {
                // The pending error names the cause (a reset, a timeout, an ICMP error).
                let cause = match ctx.stack().take_error(conn.handle()) {
                    Ok(Some(err)) => err,
                    _ => match ctx.recv(conn, &mut []) {
                        Err(err) if err != SocketError::WouldBlock => err,
                        _ => SocketError::Reset,
                    },
                };
                let err = self.socket_error(cause);
                self.finish(ctx, Err(err));
                return;
            }
            if matches!(self.phase, Phase::Connecting) {
                // Nothing to read or write before the handshake completes.
                continue;
            }
            self.service(ctx);
            if self.outcome.is_none() && e.readiness.contains(Readiness::CLOSED) {
                self.finish(ctx, Err(GetError::Reset));
            }
        }
    }

    fn progress(&self) -> u64 {
        u64::from(self.outcome.is_some())
    }

    fn done(&self) -> bool {
        self.started && self.outcome.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize, bool), GetError> {
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        let n = d.decode(input, |b| append_bounded(&mut out, b, u64::MAX))?;
        Ok((out, n, d.is_done()))
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers_decodes() {
        let input = b"4\r\nWiki\r\n5;name=v\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nextra";
        let (body, used, done) = decode_all(input).expect("valid");
        assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.");
        assert!(done);
        assert_eq!(used, input.len() - b"extra".len());
    }

    #[test]
    fn bad_chunk_sizes_and_missing_crlf_are_protocol_errors() {
        for bad in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"4\r\nWikiX\r\n",
            b"ffffffffffffffff\r\n",
            b"4 x\r\n",
            b"4\n",
        ] {
            assert!(
                matches!(decode_all(bad), Err(GetError::Protocol(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = vec![b'1'; CHUNK_LINE_BYTES_MAX + 1];
        assert!(matches!(decode_all(&long), Err(GetError::Protocol(_))));
    }

    #[test]
    fn chunked_sink_refusal_stops_decoding() {
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        let r = d.decode(b"a\r\n0123456789\r\n0\r\n\r\n", |b| {
            append_bounded(&mut out, b, 5)
        });
        assert_eq!(r, Err(GetError::BodyTooLarge { limit_bytes: 5 }));
    }

    #[test]
    fn response_head_framing_follows_rfc9112() {
        let h = parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n").expect("ok");
        assert_eq!((h.status, h.framing), (200, Framing::Length(12)));
        let h = parse_response_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        )
        .expect("ok");
        assert_eq!(h.framing, Framing::Chunked);
        let h = parse_response_head(b"HTTP/1.0 200\r\n\r\n").expect("ok");
        assert_eq!(h.framing, Framing::UntilClose);
        let h = parse_response_head(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n")
            .expect("ok");
        assert_eq!(h.framing, Framing::Empty);
        let h =
            parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n").expect("ok");
        assert_eq!(h.framing, Framing::Length(7));
        assert_eq!(h.headers, vec![("Content-Length".into(), "7, 7".into())]);
    }

    #[test]
    fn malformed_response_heads_are_protocol_errors() {
        for bad in [
            &b"SPDY 200\r\n\r\n"[..],
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 099 X\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n\r\n\r\n",
            b"HTTP/1.1 200 OK\xff\r\n\r\n",
        ] {
            assert!(
                matches!(parse_response_head(bad), Err(GetError::Protocol(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn chunked_encoding_round_trips_in_any_split(
                body in proptest::collection::vec(any::<u8>(), 0..2000),
                chunk in 1usize..300,
                split in 1usize..97,
            ) {
                let mut enc = Vec::new();
                for c in body.chunks(chunk) {
                    enc.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                    enc.extend_from_slice(c);
                    enc.extend_from_slice(b"\r\n");
                }
                enc.extend_from_slice(b"0\r\n\r\n");
                let mut d = ChunkedDecoder::new();
                let mut out = Vec::new();
                for piece in enc.chunks(split) {
                    let n = d.decode(piece, |b| append_bounded(&mut out, b, u64::MAX)).expect("valid");
                    prop_assert_eq!(n, piece.len());
                }
                prop_assert!(d.is_done());
                prop_assert_eq!(out, body);
            }

            #[test]
            fn chunked_decoder_never_panics_on_garbage(input in proptest::collection::vec(any::<u8>(), 0..600)) {
                let mut d = ChunkedDecoder::new();
                let mut out = Vec::new();
                let _ = d.decode(&input, |b| append_bounded(&mut out, b, 1 << 20));
            }

            #[test]
            fn response_head_parser_never_panics(input in proptest::collection::vec(any::<u8>(), 0..400)) {
                let _ = parse_response_head(&input);
            }

            #[test]
            fn response_heads_we_print_parse_back(status in 200u16..600, len in any::<u64>()) {
                let head = format!("HTTP/1.1 {status} X Y\r\nContent-Length: {len}\r\nA: b\r\n\r\n");
                let h = parse_response_head(head.as_bytes()).expect("valid");
                prop_assert_eq!(h.status, status);
                let want = if status == 204 || status == 304 { Framing::Empty } else { Framing::Length(len) };
                prop_assert_eq!(h.framing, want);
            }
        }
    }
}
