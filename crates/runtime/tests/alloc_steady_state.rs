//! Zero allocations per packet in steady state on the `mem` backend.
//!
//! A counting global allocator ([`platform::alloc_count::CountingAlloc`]; a binary of its own,
//! since a global allocator is per binary) counts allocation calls, not frees. The counter is
//! global to the process; the test's own thread (which runs the monitor) is excluded, so what
//! is counted is the shard threads and the wire thread. The window opens once every
//! connection is established and a warm-up of packets has passed (pools, rings, send and
//! receive buffers at their working size), and closes after a number of packets: bounded by
//! packet counts, never by time, so a loaded machine only makes it slower.
//!
//! The cases run one after the other (one `#[test]`), since the counter is process-wide. Each
//! prints its exact figure; the assertion allows a few allocations per window that no packet
//! causes (see [`NOT_PER_PACKET_MAX`]), so a loaded machine cannot make it flaky.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use apps::ttcp::{TtcpReceiver, TtcpSendConfig, TtcpSender};
use platform::alloc_count::{CountingAlloc, exclude_current_thread};
use runtime::{HostConfig, LiveView, RunLimits, WireConfig, run_pair_until};
use stack::{InterfaceConfig, Ipv4Cidr};
use wire::EthernetAddress;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Packets (both hosts' stacks, summed) after every connection is up before the window opens.
const WARMUP_PACKETS: u64 = 120_000;
/// Packets in the window.
const WINDOW_PACKETS: u64 = 100_000;
/// Allocations a window may hold that are not per packet: a new high of buffers in flight
/// (a pool grows by one buffer, e.g. one more receive-coalescing group buffer; bounded by the
/// ring sizes over a whole run) or a TCP timer firing (the stack collects the due timers).
/// Typically 0; any per-packet, per-burst or per-coalesced-group allocation would put
/// thousands in a window of `WINDOW_PACKETS`.
const NOT_PER_PACKET_MAX: u64 = 16;
/// A bound only against a hang; the window normally closes in well under a second.
const RUN_MAX: Duration = Duration::from_secs(20);

fn host(mac_last: u8, ip: Ipv4Addr, shards: u16) -> HostConfig {
    let iface = InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        Ipv4Cidr::new(ip, 24),
    );
    HostConfig::new(iface, shards)
}

/// What the window saw.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    packets: u64,
    allocations: u64,
    bytes: u64,
}

impl Window {
    fn per_packet(&self) -> f64 {
        self.allocations as f64 / self.packets.max(1) as f64
    }
}

/// The monitor: waits for `conns` connections on the client host, then `WARMUP_PACKETS`,
/// then counts allocations over `WINDOW_PACKETS` and stops the run.
struct Meter {
    conns: u64,
    /// Packets when the warm-up started, and when the window opened (with the counters).
    warm_from: Option<u64>,
    open: Option<(u64, u64, u64)>,
    result: Option<Window>,
}

impl Meter {
    fn new(conns: u64) -> Self {
        Meter {
            conns,
            warm_from: None,
            open: None,
            result: None,
        }
    }

    fn observe(&mut self, v: &LiveView) -> ControlFlow<()> {
        // Read the allocator first: packets published later only make the ratio smaller by
        // a monitor tick's worth, never hide an allocation.
        let (allocs, bytes) = (ALLOC.allocations(), ALLOC.bytes());
        let packets: u64 = v.server.iter().chain(&v.client).map(|s| s.rx_packets).sum();
        let established: u64 = v.client.iter().map(|s| s.connections).sum();
        match (self.warm_from, self.open) {
            (None, _) => {
                if established >= self.conns {
                    self.warm_from = Some(packets);
                }
            }
            (Some(w), None) => {
                if packets >= w + WARMUP_PACKETS {
                    self.open = Some((packets, allocs, bytes));
                }
            }
            (Some(_), Some((p0, a0, b0))) => {
                if packets >= p0 + WINDOW_PACKETS {
                    self.result = Some(Window {
                        packets: packets - p0,
                        allocations: allocs - a0,
                        bytes: bytes - b0,
                    });
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    }
}

fn limits() -> RunLimits {
    RunLimits {
        duration: RUN_MAX,
        stop_when_client_done: false,
        monitor_every: Duration::from_millis(1),
    }
}

/// HTTP/1.1 keep-alive load: `conns` connections requesting a small object without end, to
/// a server of `server_shards` shards behind `queues` hardware queues (fewer queues than
/// shards: frames forwarded between shards).
fn http_case(server_shards: u16, queues: u16, conns: usize) -> Window {
    let mut server = host(1, SERVER_IP, server_shards);
    server.queues = queues;
    let client = host(2, CLIENT_IP, 1);
    let files = Arc::new(FileSet::demo(1024));
    let load = LoadConfig {
        server: SocketAddr::new(IpAddr::V4(SERVER_IP), 80),
        connections: conns,
        path: "/index.html".into(),
        requests_per_connection: None,
        elephant_ports: Vec::new(),
        elephant_body_bytes: 0,
    };
    let mut meter = Meter::new(conns as u64);
    let r = run_pair_until(
        &server,
        move |_| HttpServer::new(80, files.clone()),
        &client,
        move |_| HttpLoadClient::new(load.clone()),
        WireConfig::default(),
        limits(),
        |v| meter.observe(v),
    )
    .expect("run");
    assert_eq!(
        r.server.drops() + r.client.drops() + r.wire.drops(),
        0,
        "nothing dropped"
    );
    meter.result.expect("the window closed within the run")
}

/// One-way bulk: `conns` ttcp connections from the client's shard 0 to the server.
fn ttcp_case(conns: u32) -> Window {
    let server = host(1, SERVER_IP, 1);
    let client = host(2, CLIENT_IP, 1);
    let cfg = TtcpSendConfig {
        remote: SocketAddr::new(IpAddr::V4(SERVER_IP), 5001),
        // Far more than the window carries: the flow is still sending when the run stops.
        bytes_per_conn: 1 << 40,
        conns,
    };
    let mut meter = Meter::new(u64::from(conns));
    let r = run_pair_until(
        &server,
        move |_| TtcpReceiver::new(5001, conns),
        &client,
        move |info| (info.shard == 0).then(|| TtcpSender::new(cfg)),
        WireConfig::default(),
        limits(),
        |v| meter.observe(v),
    )
    .expect("run");
    assert_eq!(
        r.server.drops() + r.client.drops() + r.wire.drops(),
        0,
        "nothing dropped"
    );
    meter.result.expect("the window closed within the run")
}

#[test]
fn steady_state_allocates_nothing_per_packet_on_mem() {
    exclude_current_thread();
    let cases = [
        ("http, 1 server shard, 8 conns", http_case(1, 1, 8)),
        ("http, 2 server shards, 8 conns", http_case(2, 2, 8)),
        (
            "http, 2 server shards on 1 queue (forwarding), 8 conns",
            http_case(2, 1, 8),
        ),
        ("ttcp one-way bulk, 2 conns", ttcp_case(2)),
    ];
    for (name, w) in &cases {
        eprintln!(
            "{name}: {} allocations ({} bytes) over {} packets = {:.4} per packet",
            w.allocations,
            w.bytes,
            w.packets,
            w.per_packet()
        );
    }
    for (name, w) in &cases {
        assert!(
            w.allocations <= NOT_PER_PACKET_MAX,
            "{name}: {} allocations over {} packets in steady state",
            w.allocations,
            w.packets
        );
    }
}
