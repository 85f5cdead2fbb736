//! The same HTTP server and clients that run on `runtime`'s threads, run here under the
//! deterministic simulator through the adapter in `common`.

mod common;

use std::sync::Arc;

use apps::App;
use apps::get::{GetResponse, HttpGet};
use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use common::{Pair, gigabit, server_addr, server_addr6};

#[test]
fn http_server_and_load_client_run_under_sim() {
    let files = Arc::new(FileSet::demo(3000));
    let client = HttpLoadClient::new(LoadConfig {
        server: server_addr(80),
        connections: 4,
        path: "/index.html".into(),
        requests_per_connection: Some(10),
        elephant_ports: Vec::new(),
        elephant_body_bytes: 0,
    });
    let mut p = Pair::new(7, HttpServer::new(80, files), client, gigabit());
    p.world.run_until(2_000_000_000);
    let c = p.client::<HttpLoadClient>();
    let st = c.stats();
    assert_eq!(st.responses_ok, 40, "{st:?}");
    assert_eq!(st.body_bytes, 40 * 3000);
    assert_eq!(st.connections_failed + st.protocol_errors, 0);
    assert!(c.done(), "every connection closed after its 10 requests");
    let ss = p.server::<HttpServer>().stats();
    assert_eq!(
        (ss.connections_accepted, ss.requests, ss.responses_200),
        (4, 40, 40)
    );
    assert_eq!(ss.connections_closed, 4);
    assert_eq!(p.server::<HttpServer>().open_connections(), 0);
}

#[test]
fn missing_path_is_answered_404_on_a_kept_alive_connection() {
    let client = HttpLoadClient::new(LoadConfig {
        server: server_addr(80),
        connections: 1,
        path: "/missing.png".into(),
        requests_per_connection: Some(5),
        elephant_ports: Vec::new(),
        elephant_body_bytes: 0,
    });
    let server = HttpServer::new(80, Arc::new(FileSet::demo(100)));
    let mut p = Pair::new(8, server, client, gigabit());
    p.world.run_until(2_000_000_000);
    let st = p.client::<HttpLoadClient>().stats();
    assert_eq!((st.responses_ok, st.responses_other), (0, 5), "{st:?}");
    assert_eq!(
        st.connections_established, 1,
        "one connection carried all five"
    );
    assert_eq!(p.server::<HttpServer>().stats().responses_404, 5);
}

/// Bytes no simple pattern reproduces by accident (an LCG's high bytes).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

/// Runs one `HttpGet` against an `HttpServer` of `files`: the response (or the test fails),
/// with the response: the body bytes the server sent.
fn fetch(seed: u64, files: FileSet, get: HttpGet) -> (GetResponse, u64) {
    let server = HttpServer::new(80, Arc::new(files));
    let mut p = Pair::new(seed, server, get, gigabit());
    p.run_until_client_done::<HttpGet>(10_000_000, 20_000_000_000)
        .expect("the request completes");
    let resp = p
        .client::<HttpGet>()
        .outcome()
        .expect("done means an outcome")
        .clone()
        .expect("a response");
    // `Connection: close`: the server finishes and releases the connection.
    p.world.run_until(p.world.now_ns() + 1_000_000_000);
    let server = p.server::<HttpServer>();
    assert_eq!(server.open_connections(), 0);
    assert_eq!(server.stats().connections_closed, 1);
    (resp, server.stats().body_bytes_sent)
}

#[test]
fn multi_megabyte_file_arrives_whole_with_its_content_length() {
    let big = noise(6 << 20, 1);
    let mut files = FileSet::new();
    files.insert("/big.bin", big.clone());
    let get = HttpGet::new(server_addr(80), "sim".into(), "/big.bin".into(), 16 << 20);
    let (resp, sent) = fetch(9, files, get);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-length"), Some("6291456"));
    assert_eq!(
        resp.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(resp.body == big, "body differs from the file");
    assert_eq!(sent, big.len() as u64);
}

#[test]
fn get_of_a_missing_file_is_404() {
    let get = HttpGet::new(server_addr(80), "sim".into(), "/nope.html".into(), 1 << 20);
    let (resp, _) = fetch(10, FileSet::demo(100), get);
    assert_eq!(resp.status, 404);
    assert_eq!(resp.body, b"Not Found");
}

#[test]
fn head_request_gets_the_length_and_no_body() {
    let get = HttpGet::new(server_addr(80), "sim".into(), "/".into(), 1 << 20).head_only();
    let (resp, sent) = fetch(11, FileSet::demo(5000), get);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-length"), Some("5000"));
    assert_eq!(
        resp.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(resp.body.is_empty());
    assert_eq!(sent, 0, "HEAD sends no body bytes");
}

#[test]
fn percent_encoded_path_finds_the_file() {
    let mut files = FileSet::new();
    files.insert("/a b.txt", &b"spaced"[..]);
    let get = HttpGet::new(server_addr(80), "sim".into(), "/a%20b.txt".into(), 1 << 20);
    let (resp, _) = fetch(12, files, get);
    assert_eq!((resp.status, resp.body.as_slice()), (200, &b"spaced"[..]));
}

#[test]
fn server_answers_over_ipv6_too() {
    let get = HttpGet::new(server_addr6(80), "[fd00::1]".into(), "/".into(), 1 << 20);
    let (resp, sent) = fetch(13, FileSet::demo(2000), get);
    assert_eq!((resp.status, resp.body.len()), (200, 2000));
    assert_eq!(sent, 2000);
}

/// A client that writes `request` at once when connected, half-closes, and collects
/// everything the server sends until its FIN.
struct RawClient {
    request: Vec<u8>,
    conn: Option<apps::Conn>,
    connected: bool,
    written: usize,
    got: Vec<u8>,
    finished: bool,
}

impl App for RawClient {
    fn start(&mut self, ctx: &mut apps::Ctx<'_>) {
        self.conn = ctx.connect(server_addr(80)).ok();
    }

    fn poll(&mut self, ctx: &mut apps::Ctx<'_>, events: &[stack::SocketEvent]) {
        let Some(conn) = self.conn else { return };
        self.connected |= events
            .iter()
            .any(|e| e.readiness.contains(stack::Readiness::CONNECTED));
        if !self.connected {
            // A shutdown in SYN-SENT would delete the connection (RFC 9293 §3.10.4).
            return;
        }
        while self.written < self.request.len() {
            match ctx.send(conn, &self.request[self.written..]) {
                Ok(n) => self.written += n,
                Err(_) => break,
            }
        }
        if self.written == self.request.len() {
            let _ = ctx.shutdown(conn);
        }
        let mut buf = [0u8; 4096];
        loop {
            match ctx.recv(conn, &mut buf) {
                Ok(n) => self.got.extend_from_slice(&buf[..n]),
                Err(stack::SocketError::Finished) => {
                    self.finished = true;
                    let _ = ctx.close(conn);
                    self.conn = None;
                    return;
                }
                Err(_) => return,
            }
        }
    }

    fn done(&self) -> bool {
        self.finished
    }
}

#[test]
fn pipelined_get_404_and_head_are_answered_in_order_then_the_server_closes() {
    let request = b"GET /index.html HTTP/1.1\r\nHost: h\r\n\r\n\
GET /missing HTTP/1.1\r\nHost: h\r\n\r\n\
HEAD /style.css HTTP/1.1\r\nHost: h\r\n\r\n"
        .to_vec();
    let client = RawClient {
        request,
        conn: None,
        connected: false,
        written: 0,
        got: Vec::new(),
        finished: false,
    };
    let server = HttpServer::new(80, Arc::new(FileSet::demo(700)));
    let mut p = Pair::new(14, server, client, gigabit());
    p.run_until_client_done::<RawClient>(10_000_000, 5_000_000_000)
        .expect("the server answers and closes after our FIN");
    let mut rest: &[u8] = &p.client::<RawClient>().got;
    let mut seen = Vec::new();
    while !rest.is_empty() {
        let end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a complete head")
            + 4;
        let head = apps::get::parse_response_head(&rest[..end]).expect("a valid head");
        let len = match head.framing {
            apps::get::Framing::Length(n) => n as usize,
            f => panic!("unexpected framing {f:?}"),
        };
        let body_len = if seen.len() == 2 { 0 } else { len };
        seen.push((head.status, len));
        rest = &rest[end + body_len..];
    }
    let css = b"p { font-family: monospace }\n".len();
    assert_eq!(seen, [(200, 700), (404, 9), (200, css)]);
    let s = p.server::<HttpServer>().stats();
    assert_eq!((s.requests, s.responses_200, s.responses_404), (3, 2, 1));
    assert_eq!(s.body_bytes_sent, 700, "the HEAD answer carried no body");
}
