//! The HTTP server's timeouts (nginx's `client_header_timeout`, `keepalive_timeout`,
//! `send_timeout`) under the simulator: a client that never sends its head, one that sends
//! half of it, one idle after a response, and one that asks for a large file and never reads
//! are each ended by their timeout, counted by reason; a client that keeps its keep-alive
//! connection busy, and one that reads its large file slowly, are left alone.

mod common;

use std::sync::Arc;

use app::{App, Conn, Ctx};
use apps::http::{FileSet, HttpServer, HttpTimeouts};
use common::{Pair, gigabit, server_addr};
use stack::{Readiness, SocketError, SocketEvent};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const BIG_BYTES: usize = 4 << 20;

/// What one scripted connection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    /// Connects and sends nothing.
    Silent,
    /// Sends half a request head, then nothing.
    HalfHead,
    /// One request, reads the answer, then idles.
    OneThenIdle,
    /// A request every second, reading each answer.
    EverySecond,
    /// Asks for the large file and never reads.
    NeverReads,
    /// Asks for the large file and reads 64 KiB every second: the window stays shut most of
    /// the time, yet the stack takes more of the response within every timeout.
    SlowReader,
}

#[derive(Debug)]
struct Scripted {
    script: Script,
    conn: Option<Conn>,
    requests_sent: u32,
    bytes_read: usize,
    next_ns: u64,
    /// When the server ended the connection, and whether with a reset.
    ended: Option<(u64, bool)>,
}

#[derive(Debug, Default)]
struct Client {
    conns: Vec<Scripted>,
    scratch: Vec<u8>,
}

const REQUEST: &[u8] = b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n";
const BIG_REQUEST: &[u8] = b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n";

impl Client {
    fn new(scripts: &[Script]) -> Client {
        Client {
            conns: scripts
                .iter()
                .map(|&script| Scripted {
                    script,
                    conn: None,
                    requests_sent: 0,
                    bytes_read: 0,
                    next_ns: 0,
                    ended: None,
                })
                .collect(),
            scratch: vec![0; 1 << 16],
        }
    }

    fn work(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now_ns();
        for s in &mut self.conns {
            let Some(conn) = s.conn else { continue };
            if s.ended.is_some() {
                continue;
            }
            // Send what the script owes now.
            let owed: Option<&[u8]> = match s.script {
                Script::Silent => None,
                Script::HalfHead => (s.requests_sent == 0).then_some(&b"GET / HTTP/1.1\r\nHo"[..]),
                Script::OneThenIdle => (s.requests_sent == 0).then_some(REQUEST),
                Script::EverySecond => (now >= s.next_ns).then_some(REQUEST),
                Script::NeverReads | Script::SlowReader => {
                    (s.requests_sent == 0).then_some(BIG_REQUEST)
                }
            };
            if let Some(req) = owed {
                if ctx.send(conn, req) == Ok(req.len()) {
                    s.requests_sent += 1;
                    s.next_ns = now + S;
                }
            }
            // Read what the script reads.
            let budget = match s.script {
                Script::NeverReads => 0,
                Script::SlowReader if s.requests_sent == 0 || now < s.next_ns => 0,
                Script::SlowReader => {
                    s.next_ns = now + S;
                    64 * 1024
                }
                _ => usize::MAX,
            };
            let mut taken = 0;
            while taken < budget {
                let want = (budget - taken).min(self.scratch.len());
                match ctx.recv(conn, &mut self.scratch[..want]) {
                    Ok(n) => taken += n,
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => {
                        s.ended = Some((now, e == SocketError::Reset));
                        break;
                    }
                }
            }
            s.bytes_read += taken;
        }
    }
}

impl App for Client {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        for s in &mut self.conns {
            s.conn = Some(ctx.connect(server_addr(80)).expect("connect"));
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        let now = ctx.now_ns();
        for e in events {
            let error = e.readiness.contains(Readiness::ERROR);
            if !error && !e.readiness.contains(Readiness::CLOSED) {
                continue;
            }
            for s in &mut self.conns {
                if s.conn.is_some_and(|c| c.handle() == e.handle) && s.ended.is_none() {
                    s.ended = Some((now, error));
                }
            }
        }
        self.work(ctx);
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.conns
            .iter()
            .filter(|s| {
                s.ended.is_none() && matches!(s.script, Script::EverySecond | Script::SlowReader)
            })
            .map(|s| s.next_ns.max(1))
            .min()
    }
}

fn server() -> HttpServer {
    let mut files = FileSet::demo(1000);
    files.insert("/big.bin", vec![0x42u8; BIG_BYTES]);
    HttpServer::new(80, Arc::new(files)).with_timeouts(HttpTimeouts {
        header_read_ns: Some(2 * S),
        keepalive_idle_ns: Some(3 * S),
        send_progress_ns: Some(4 * S),
    })
}

fn run(scripts: &[Script], until_ns: u64) -> Pair {
    let mut p = Pair::new(31, server(), Client::new(scripts), gigabit());
    p.world.run_until(until_ns);
    p
}

fn ended(p: &Pair, i: usize) -> Option<(u64, bool)> {
    p.client::<Client>().conns[i].ended
}

#[test]
fn a_client_that_never_completes_its_head_is_closed_after_the_header_timeout() {
    let p = run(&[Script::Silent, Script::HalfHead], 10 * S);
    let st = p.server::<HttpServer>().stats();
    assert_eq!(st.timeouts_header_read, 2, "{st:?}");
    assert_eq!(
        (st.timeouts_keepalive_idle, st.timeouts_send_progress),
        (0, 0)
    );
    assert_eq!(p.server::<HttpServer>().open_connections(), 0);
    for i in 0..2 {
        let (at, _) = ended(&p, i).expect("the server ended it");
        assert!(
            (2 * S..2 * S + 100 * MS).contains(&at),
            "conn {i} ended at {at}"
        );
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed_and_a_busy_one_is_not() {
    let p = run(&[Script::OneThenIdle, Script::EverySecond], 10 * S);
    let st = p.server::<HttpServer>().stats();
    assert_eq!(st.timeouts_keepalive_idle, 1, "{st:?}");
    assert_eq!((st.timeouts_header_read, st.timeouts_send_progress), (0, 0));
    let (at, _) = ended(&p, 0).expect("the idle one ended");
    assert!((3 * S..3 * S + 100 * MS).contains(&at), "ended at {at}");
    assert_eq!(ended(&p, 1), None, "the busy one is open");
    assert!(p.client::<Client>().conns[1].requests_sent >= 9);
    assert_eq!(p.server::<HttpServer>().open_connections(), 1);
}

#[test]
fn a_response_that_makes_no_progress_is_aborted_and_a_slow_reader_is_not() {
    let p = run(&[Script::NeverReads, Script::SlowReader], 12 * S);
    let st = p.server::<HttpServer>().stats();
    assert_eq!(st.timeouts_send_progress, 1, "{st:?}");
    assert_eq!(
        (st.timeouts_header_read, st.timeouts_keepalive_idle),
        (0, 0)
    );
    let (_, reset) = ended(&p, 0).unwrap_or_else(|| panic!("the stalled one ended: {st:?}"));
    assert!(reset, "a send timeout aborts with an RST");
    assert_eq!(ended(&p, 1), None, "the slow reader is served");
    let slow = p.client::<Client>().conns[1].bytes_read;
    // More than twice its receive buffer: it went through several zero windows.
    assert!(slow > 512 * 1024, "the slow reader read {slow} bytes");
}

#[test]
fn timeouts_that_are_off_never_fire() {
    let mut files = FileSet::demo(1000);
    files.insert("/big.bin", vec![0x42u8; BIG_BYTES]);
    let server = HttpServer::new(80, Arc::new(files)).with_timeouts(HttpTimeouts {
        header_read_ns: None,
        keepalive_idle_ns: None,
        send_progress_ns: None,
    });
    let scripts = [Script::Silent, Script::OneThenIdle, Script::NeverReads];
    let mut p = Pair::new(32, server, Client::new(&scripts), gigabit());
    p.world.run_until(100 * S);
    let st = p.server::<HttpServer>().stats();
    assert_eq!(
        (
            st.timeouts_header_read,
            st.timeouts_keepalive_idle,
            st.timeouts_send_progress
        ),
        (0, 0, 0)
    );
    assert_eq!(p.server::<HttpServer>().open_connections(), 3);
}
