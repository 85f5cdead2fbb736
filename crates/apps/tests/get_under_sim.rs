//! The one-shot GET client under the simulator against servers that answer with canned
//! bytes: chunked bodies decode, bodies until close arrive, and malformed or oversize answers
//! end in `GetError`, never a panic or a hang.

mod common;

use apps::get::{GetError, GetResponse, HttpGet, RESPONSE_HEAD_BYTES_MAX};
use apps::{App, Conn, Ctx, Listener};
use common::{Pair, gigabit, server_addr};
use stack::{Readiness, SocketError, SocketEvent};

/// A server that reads one request head, answers with `response` verbatim, then
/// half-closes, and releases the connection when the client is gone.
struct CannedServer {
    response: Vec<u8>,
    listener: Option<Listener>,
    conn: Option<Conn>,
    request: Vec<u8>,
    written: usize,
    shut: bool,
}

impl CannedServer {
    fn new(response: impl Into<Vec<u8>>) -> Self {
        CannedServer {
            response: response.into(),
            listener: None,
            conn: None,
            request: Vec::new(),
            written: 0,
            shut: false,
        }
    }

    fn work(&mut self, ctx: &mut Ctx<'_>) {
        let Some(conn) = self.conn else { return };
        let mut buf = [0u8; 4096];
        loop {
            match ctx.recv(conn, &mut buf) {
                Ok(n) => self.request.extend_from_slice(&buf[..n]),
                Err(SocketError::WouldBlock) => break,
                Err(_) => {
                    let _ = ctx.close(conn);
                    self.conn = None;
                    return;
                }
            }
        }
        if !self.request.windows(4).any(|w| w == b"\r\n\r\n") {
            return;
        }
        while self.written < self.response.len() {
            match ctx.send(conn, &self.response[self.written..]) {
                Ok(n) => self.written += n,
                Err(_) => return,
            }
        }
        if !self.shut {
            self.shut = ctx.shutdown(conn).is_ok();
        }
    }
}

impl App for CannedServer {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.listener = ctx.listen(80, 8).ok();
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        if let Some(l) = self.listener {
            if let Ok((conn, _)) = ctx.accept(l) {
                self.conn = Some(conn);
            }
        }
        if let Some(conn) = self.conn {
            let gone = events.iter().any(|e| {
                e.handle == conn.handle()
                    && (e.readiness.contains(Readiness::ERROR)
                        || e.readiness.contains(Readiness::CLOSED))
            });
            if gone {
                let _ = ctx.close(conn);
                self.conn = None;
            }
        }
        self.work(ctx);
    }
}

/// Runs one GET of `/x` with a body limit of `body_max` against a server answering
/// `response`; the outcome (the test fails if there is none within 10 simulated seconds).
fn get_from(
    seed: u64,
    response: impl Into<Vec<u8>>,
    body_max: u64,
) -> Result<GetResponse, GetError> {
    let get = HttpGet::new(server_addr(80), "sim".into(), "/x".into(), body_max);
    let mut p = Pair::new(seed, CannedServer::new(response), get, gigabit());
    p.run_until_client_done::<HttpGet>(10_000_000, 10_000_000_000)
        .expect("an outcome within 10 s");
    let req = String::from_utf8_lossy(&p.server::<CannedServer>().request).into_owned();
    assert!(
        req.starts_with("GET /x HTTP/1.1\r\nHost: sim\r\n")
            && req.contains("Connection: close\r\n"),
        "{req}"
    );
    p.client::<HttpGet>()
        .outcome()
        .cloned()
        .expect("done means an outcome")
}

fn is_protocol(r: &Result<GetResponse, GetError>) -> bool {
    matches!(r, Err(GetError::Protocol(_)))
}

#[test]
fn chunked_response_is_decoded() {
    let mut resp =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
            .to_vec();
    let mut want = Vec::new();
    for (i, len) in [1usize, 4000, 0x1f, 70_000, 3].into_iter().enumerate() {
        let chunk: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
        resp.extend_from_slice(format!("{len:X};ext=1\r\n").as_bytes());
        resp.extend_from_slice(&chunk);
        resp.extend_from_slice(b"\r\n");
        want.extend_from_slice(&chunk);
    }
    resp.extend_from_slice(b"0\r\nX-Checksum: none\r\n\r\n");
    let r = get_from(31, resp, 1 << 20).expect("decoded");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(
        r.body == want,
        "body differs ({} vs {} bytes)",
        r.body.len(),
        want.len()
    );
}

#[test]
fn body_without_length_runs_until_close() {
    let r = get_from(
        32,
        &b"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nall of it"[..],
        100,
    )
    .expect("complete at close");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"all of it"[..]));
}

#[test]
fn interim_100_continue_is_skipped() {
    let resp =
        &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"[..];
    let r = get_from(33, resp, 100).expect("final response");
    assert_eq!((r.status, r.body.as_slice()), (201, &b"ok"[..]));
}

#[test]
fn bad_status_line_is_a_protocol_error() {
    assert!(is_protocol(&get_from(
        34,
        &b"HTTP/1.1 OK 200\r\n\r\n"[..],
        100
    )));
    assert!(is_protocol(&get_from(35, &b"hello world\r\n\r\n"[..], 100)));
}

#[test]
fn oversize_head_is_a_protocol_error() {
    let mut resp = b"HTTP/1.1 200 OK\r\n".to_vec();
    while resp.len() <= RESPONSE_HEAD_BYTES_MAX {
        resp.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    resp.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    let r = get_from(36, resp, 100);
    assert!(
        matches!(&r, Err(GetError::Protocol(m)) if m.contains("exceeds")),
        "{r:?}"
    );
}

#[test]
fn bad_chunk_size_is_a_protocol_error() {
    let resp =
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZ\r\nxx\r\n0\r\n\r\n"
            [..];
    assert!(is_protocol(&get_from(37, resp, 100)));
}

#[test]
fn truncated_bodies_are_protocol_errors() {
    let short = &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nonly5"[..];
    assert!(is_protocol(&get_from(38, short, 100)));
    let chunked = &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"[..];
    assert!(is_protocol(&get_from(39, chunked, 100)));
    assert!(is_protocol(&get_from(
        40,
        &b"HTTP/1.1 200 OK\r\nContent-"[..],
        100
    )));
}

#[test]
fn body_over_the_limit_is_refused() {
    let by_length = &b"HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n"[..];
    assert_eq!(
        get_from(41, by_length, 100),
        Err(GetError::BodyTooLarge { limit_bytes: 100 })
    );
    let mut until_close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
    until_close.extend_from_slice(&[b'z'; 150]);
    assert_eq!(
        get_from(42, until_close, 100),
        Err(GetError::BodyTooLarge { limit_bytes: 100 })
    );
}

#[test]
fn closed_port_is_refused() {
    let get = HttpGet::new(server_addr(81), "sim".into(), "/".into(), 100);
    let mut p = Pair::new(43, CannedServer::new(Vec::new()), get, gigabit());
    p.run_until_client_done::<HttpGet>(10_000_000, 10_000_000_000)
        .expect("an outcome");
    assert_eq!(
        p.client::<HttpGet>().outcome().cloned(),
        Some(Err(GetError::Refused))
    );
}
