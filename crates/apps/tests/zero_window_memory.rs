//! Memory held by zero-window peers comes back when they leave (issue 20, "Done when"): 1,000
//! clients each ask the HTTP server for a large object, advertise a tiny window and never
//! read; then they close. The process's live heap (every host of the simulated world, as
//! the counting allocator sees it) must return within 10 % of where it started, and the
//! server's TCP buffer memory to zero, while the stack-wide budget bounded the peak.

mod common;

use std::sync::Arc;

use apps::http::{FileSet, HttpServer};
use apps::{App, Conn, Ctx};
use common::{CLIENT_IP, SERVER_IP, config, gigabit, server_addr};
use platform::alloc_count::CountingAlloc;
use sim::net::ShardedHost;
use sim::{PortId, World};
use stack::{MemState, SocketError, SocketEvent};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

const CLIENTS: usize = 1000;
const OBJECT_BYTES: usize = 4 << 20;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const OPEN_AT_NS: u64 = S;
const CLOSE_AT_NS: u64 = 20 * S;

/// Opens `CLIENTS` connections at `OPEN_AT_NS`, sends one GET on each, never reads, and
/// closes them all (with unread data: a RST) at `CLOSE_AT_NS`.
struct ZeroWindowClients {
    conns: Vec<(Conn, bool)>,
    opened: bool,
    closed: bool,
}

const REQUEST: &[u8] = b"GET /big HTTP/1.1\r\nHost: server\r\n\r\n";

impl App for ZeroWindowClients {
    fn start(&mut self, _ctx: &mut Ctx<'_>) {}

    fn poll(&mut self, ctx: &mut Ctx<'_>, _events: &[SocketEvent]) {
        let now = ctx.now_ns();
        if !self.opened && now >= OPEN_AT_NS {
            self.opened = true;
            for _ in 0..CLIENTS {
                let c = ctx.connect(server_addr(80)).expect("connect");
                self.conns.push((c, false));
            }
        }
        if self.closed {
            return;
        }
        if now >= CLOSE_AT_NS {
            for &(c, _) in &self.conns {
                let _ = ctx.close(c);
            }
            self.conns.clear();
            self.closed = true;
            return;
        }
        for (c, sent) in &mut self.conns {
            if !*sent {
                match ctx.send(*c, REQUEST) {
                    Ok(n) => {
                        assert_eq!(n, REQUEST.len());
                        *sent = true;
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => panic!("send: {e:?}"),
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<u64> {
        if !self.opened {
            Some(OPEN_AT_NS)
        } else if !self.closed {
            Some(CLOSE_AT_NS)
        } else {
            None
        }
    }

    fn done(&self) -> bool {
        self.closed
    }
}

#[test]
fn memory_of_1000_zero_window_clients_returns_within_10_pct_after_they_close() {
    let mut files = FileSet::new();
    files.insert("/big", vec![0x42u8; OBJECT_BYTES]);
    let mut server_cfg = config(1, SERVER_IP);
    server_cfg.limits.sockets_max = 4 * CLIENTS;
    let mut client_cfg = config(2, CLIENT_IP);
    client_cfg.limits.sockets_max = 4 * CLIENTS;
    // A tiny receive window: 2 KiB (raised to one MSS by the engine), never read.
    client_cfg.tcp.recv_buffer_bytes = 2048;
    let mut world = World::new(20);
    let server = world.add_host(Box::new(ShardedHost::single(
        server_cfg,
        HttpServer::new(80, Arc::new(files)),
    )));
    let client = world.add_host(Box::new(ShardedHost::single(
        client_cfg,
        ZeroWindowClients {
            conns: Vec::with_capacity(CLIENTS),
            opened: false,
            closed: false,
        },
    )));
    world
        .connect((client, PortId(0)), (server, PortId(0)), gigabit())
        .expect("link");
    world.run_until(OPEN_AT_NS / 2);
    let start_bytes = ALLOC.live_bytes();

    // Held: the peak while every client sits at zero window.
    let mut peak_bytes = start_bytes;
    let mut peak_tcp_mem = 0;
    let mut t = OPEN_AT_NS;
    while t < CLOSE_AT_NS - 10 * MS {
        t += 500 * MS;
        world.run_until(t.min(CLOSE_AT_NS - 10 * MS));
        peak_bytes = peak_bytes.max(ALLOC.live_bytes());
        let host = world.host::<ShardedHost<HttpServer>>(server).unwrap();
        peak_tcp_mem = peak_tcp_mem.max(host.stack().tcp_mem_bytes());
    }
    let host = world.host::<ShardedHost<HttpServer>>(server).unwrap();
    let k = host.stack().counters();
    let limits = stack::Limits::default();
    // The budget bit: pressure entered, and the server's buffers stayed within the high
    // mark plus one pressure-sized connection.
    assert!(k.tcp_mem_pressure_entered >= 1, "{k:?}");
    assert!(peak_tcp_mem <= limits.tcp_mem_high_bytes + 2 * 16 * 1024);
    assert!(
        peak_bytes - start_bytes >= (limits.tcp_mem_pressure_bytes as i64),
        "the clients pinned memory: start {start_bytes} peak {peak_bytes}"
    );

    // They close; within half a minute everything is back (the NIC pool reaps buffers idle
    // for a second; the stack's transmit pool trims every 10 s to twice what the period
    // before took, so the burst's buffers go at the second trim after it).
    world.run_until(CLOSE_AT_NS + 30 * S);
    let host = world.host::<ShardedHost<HttpServer>>(server).unwrap();
    // The frame buffers the burst took went back to the allocator (`nic` pool reaping).
    assert!(host.shards()[0].nic().pool_counters().reaped > 0);
    assert_eq!(host.shards()[0].nic().pool_idle_buffers(), 0);
    assert_eq!(host.app().open_connections(), 0);
    assert_eq!(host.stack().tcp_connection_count(), 0);
    assert_eq!(host.stack().tcp_mem_bytes(), 0);
    assert_eq!(host.stack().tcp_mem_state(), MemState::Normal);
    let end_bytes = ALLOC.live_bytes();
    eprintln!(
        "live heap: start {start_bytes} B, peak {peak_bytes} B (server TCP buffers {peak_tcp_mem} B), \
         after close {end_bytes} B"
    );
    assert!(
        end_bytes <= start_bytes + start_bytes / 10,
        "memory not returned: start {start_bytes} B, after close {end_bytes} B (peak {peak_bytes} B)"
    );
}
