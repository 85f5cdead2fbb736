//! The HTTP server's application timeouts (`apps::http_timeouts`, nginx's
//! `client_header_timeout`, `keepalive_timeout`, `send_timeout`) under the simulator, in
//! virtual time: each ends the connection it applies to, at its time and not before, and is
//! counted.

mod common;

use std::sync::Arc;

use apps::http::{FileSet, HttpServer};
use apps::http_timeouts::HttpTimeouts;
use apps::{App, Conn, Ctx};
use common::{CLIENT_IP, SERVER_IP, config, gigabit, server_addr};
use sim::net::ShardedHost;
use sim::{HostId, PortId, World};
use stack::{SocketError, SocketEvent};

const S: u64 = 1_000_000_000;
const LIMIT_NS: u64 = 5 * S;

/// One connection that sends `request` once and reads everything when `read` is set; it
/// records how the server ended it.
struct Client {
    request: &'static [u8],
    read: bool,
    conn: Option<Conn>,
    sent: bool,
    received_bytes: usize,
    ended: Option<Result<(), SocketError>>,
}

impl App for Client {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.conn = Some(ctx.connect(server_addr(80)).expect("connect"));
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, _events: &[SocketEvent]) {
        let Some(c) = self.conn else { return };
        if !self.sent && !self.request.is_empty() && ctx.send(c, self.request).is_ok() {
            self.sent = true;
        }
        if !self.read || self.ended.is_some() {
            return;
        }
        let mut buf = [0u8; 8192];
        loop {
            match ctx.recv(c, &mut buf) {
                Ok(n) => self.received_bytes += n,
                Err(SocketError::WouldBlock) => return,
                Err(SocketError::Finished) => {
                    self.ended = Some(Ok(()));
                    return;
                }
                Err(e) => {
                    self.ended = Some(Err(e));
                    return;
                }
            }
        }
    }
}

struct Setup {
    world: World,
    server: HostId,
    client: HostId,
}

fn setup(request: &'static [u8], read: bool, client_recv_buffer_bytes: u32) -> Setup {
    let mut files = FileSet::new();
    files.insert("/small", vec![b'x'; 1000]);
    files.insert("/big", vec![b'y'; 2 << 20]);
    let timeouts = HttpTimeouts {
        header_ns: Some(LIMIT_NS),
        keepalive_ns: Some(LIMIT_NS),
        send_ns: Some(LIMIT_NS),
    };
    let mut client_cfg = config(2, CLIENT_IP);
    client_cfg.tcp.recv_buffer_bytes = client_recv_buffer_bytes;
    let mut world = World::new(7);
    let server = world.add_host(Box::new(ShardedHost::single(
        config(1, SERVER_IP),
        HttpServer::new(80, Arc::new(files)).with_timeouts(timeouts),
    )));
    let client = world.add_host(Box::new(ShardedHost::single(
        client_cfg,
        Client {
            request,
            read,
            conn: None,
            sent: false,
            received_bytes: 0,
            ended: None,
        },
    )));
    world
        .connect((client, PortId(0)), (server, PortId(0)), gigabit())
        .expect("link");
    Setup {
        world,
        server,
        client,
    }
}

fn server(s: &Setup) -> &ShardedHost<HttpServer> {
    s.world.host::<ShardedHost<HttpServer>>(s.server).unwrap()
}

fn client(s: &Setup) -> &Client {
    s.world.host::<ShardedHost<Client>>(s.client).unwrap().app()
}

#[test]
fn a_request_head_not_complete_within_the_header_timeout_closes_the_connection() {
    // Half a request head, then nothing (a slowloris peer).
    let mut s = setup(b"GET /small HTTP/1.1\r\nHost: x\r\n", true, 64 * 1024);
    s.world.run_until(LIMIT_NS - S);
    assert_eq!(server(&s).app().open_connections(), 1);
    assert_eq!(server(&s).app().stats().timeouts_header, 0);
    s.world.run_until(LIMIT_NS + S);
    let st = server(&s).app().stats();
    assert_eq!(st.timeouts_header, 1);
    assert_eq!((st.timeouts_keepalive, st.timeouts_send), (0, 0));
    assert_eq!(server(&s).app().open_connections(), 0);
    // Closed, not reset: the client reads the FIN.
    assert_eq!(client(&s).ended, Some(Ok(())));
    assert_eq!(client(&s).received_bytes, 0);
}

#[test]
fn a_kept_alive_connection_idle_past_the_keepalive_timeout_is_closed() {
    let mut s = setup(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n", true, 64 * 1024);
    s.world.run_until(LIMIT_NS - S);
    assert!(client(&s).received_bytes > 1000, "the response arrived");
    assert_eq!(server(&s).app().open_connections(), 1);
    s.world.run_until(LIMIT_NS + S);
    let st = server(&s).app().stats();
    assert_eq!(st.timeouts_keepalive, 1);
    assert_eq!((st.timeouts_header, st.timeouts_send), (0, 0));
    assert_eq!(server(&s).app().open_connections(), 0);
    assert_eq!(client(&s).ended, Some(Ok(())));
}

#[test]
fn a_peer_that_stops_reading_is_reset_after_the_send_timeout_and_its_buffers_freed() {
    // A 2 MiB answer to a client whose 2 KiB window never opens.
    let mut s = setup(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n", false, 2048);
    s.world.run_until(LIMIT_NS - S);
    assert_eq!(server(&s).app().open_connections(), 1);
    assert!(server(&s).stack().tcp_mem_bytes() > 0);
    s.world.run_until(LIMIT_NS + 2 * S);
    let st = server(&s).app().stats();
    assert_eq!(st.timeouts_send, 1);
    assert_eq!((st.timeouts_header, st.timeouts_keepalive), (0, 0));
    assert_eq!(server(&s).app().open_connections(), 0);
    // Aborted: the buffers are gone at once, not after the zero-window limit.
    assert_eq!(server(&s).stack().tcp_connection_count(), 0);
    assert_eq!(server(&s).stack().tcp_mem_bytes(), 0);
}

#[test]
fn timeouts_turned_off_leave_an_idle_connection_open() {
    let mut s = setup(b"GET /small HTTP/1.1\r\nHost: x\r\n", true, 64 * 1024);
    s.world
        .host_mut::<ShardedHost<HttpServer>>(s.server)
        .unwrap()
        .app_mut()
        .set_timeouts(HttpTimeouts {
            header_ns: None,
            keepalive_ns: None,
            send_ns: None,
        });
    s.world.run_until(10 * LIMIT_NS);
    assert_eq!(server(&s).app().open_connections(), 1);
    assert_eq!(client(&s).ended, None);
}
