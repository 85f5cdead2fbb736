//! Soak workloads: real `stack` instances on a faulty simulated link, with checkers.
//!
//! Each workload is a function of a seed. The seed picks the data sizes and a fault profile
//! (loss up to 20 %, duplication, reordering, corruption, link flaps); the world runs until it
//! is idle; then every byte stream is checked. The property, for every workload and seed:
//!
//! - every byte is delivered exactly once and in order — each stream carries a position-keyed
//!   pattern ([`pattern_byte`]), so a lost, duplicated, reordered or corrupted byte shows up at
//!   the first wrong offset — or the connection ends with a clear error (reset, timeout);
//! - nothing panics (a panic is a failure of that seed, see [`crate::run_seeds`]);
//! - tables stay under their caps and every connection keeps its TCB invariants
//!   (`tcp::Connection::invariant_violation`) while it runs (checked after every event).
//!
//! Every connection must complete under every profile, loss of 20 % included: the soak's
//! stacks retry SYNs and data long enough ([`SYN_RETRIES_MAX`], [`USER_TIMEOUT_NS`]) that
//! giving up is a one-in-billions event, so a connection that ends with an error is a bug.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use app::{App, Ctx};
use stack::{
    FourTuple, InterfaceConfig, Ipv4Cidr, SocketError, SocketEvent, SocketHandle, Stack,
    StackConfig,
};
use wire::EthernetAddress;

use crate::fault::{Corrupt, Duplicate, Flap, Loss, Reorder};
use crate::host::{HostId, PortId};
use crate::link::{ChannelConfig, JitterOrder};
use crate::net::{ShardedHost, ShardedHostConfig};
use crate::rng::SimRng;
use crate::world::World;

mod check;
mod flow;
pub mod migrate;
pub mod offload;
mod owners;
mod pattern;
mod trace;

use flow::{CHUNK_BYTES, Flow};

/// Byte `offset` of stream `stream_id`: position-keyed, so a byte out of place is caught
/// (a shared random table read from a per-stream start; why its period hides nothing the soak
/// can produce is argued in `workload::pattern`).
pub fn pattern_byte(stream_id: u64, offset: u64) -> u8 {
    pattern::Pattern::new(stream_id).byte(offset)
}

/// The workloads of the soak, named as `rsstack sim soak --workload` takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// One connection, client → server bulk data.
    BulkOneWay,
    /// One connection, bulk data in both directions at once.
    BulkBothWays,
    /// One connection, many small request/response exchanges in lock step.
    RequestResponse,
    /// Hundreds to thousands of short connections opening and closing, many at once.
    ManyConnections,
    /// Bulk data both ways; mid-transfer the server's connection is exported, travels, and is
    /// imported back (DESIGN "Handoff protocol"); frames that arrive meanwhile meet the stack's
    /// moved marker and are dropped unprocessed, never answered with RST.
    Handoff,
    /// Dozens of connections to a four-shard server carrying data both ways while RETA
    /// buckets move between the server's shards at random moments, their connections
    /// migrating live (DESIGN "Rebalancing"; see [`migrate`]).
    Migrate,
    /// Dozens of connections carrying data both ways to a server with an offload engine;
    /// connections are handed to the engine and restored at random moments (seed 002; see
    /// [`offload`]).
    Offload,
}

impl Workload {
    pub const ALL: [Workload; 7] = [
        Workload::BulkOneWay,
        Workload::BulkBothWays,
        Workload::RequestResponse,
        Workload::ManyConnections,
        Workload::Handoff,
        Workload::Migrate,
        Workload::Offload,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::BulkOneWay => "bulk",
            Workload::BulkBothWays => "bulk-both",
            Workload::RequestResponse => "rr",
            Workload::ManyConnections => "many",
            Workload::Handoff => "handoff",
            Workload::Migrate => "migrate",
            Workload::Offload => "offload",
        }
    }

    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The faults one seed runs under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultProfile {
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    /// A link flap: down from `.0` to `.1` (ns).
    pub flap_ns: Option<(u64, u64)>,
}

impl FaultProfile {
    /// The profile a seed runs under: a fifth of the seeds each clean, lossy (1–5 %), very
    /// lossy (up to 20 %), reordering with duplication, and corrupting with a flap.
    pub fn for_seed(seed: u64) -> FaultProfile {
        let mut rng = SimRng::new(seed).fork(0xfa_17);
        let clean = FaultProfile {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            flap_ns: None,
        };
        match seed % 5 {
            0 => clean,
            1 => FaultProfile {
                loss: 0.01 + 0.04 * rng.next_f64(),
                ..clean
            },
            2 => FaultProfile {
                loss: 0.05 + 0.15 * rng.next_f64(),
                ..clean
            },
            3 => FaultProfile {
                loss: 0.01 * rng.next_f64(),
                duplicate: 0.05 * rng.next_f64(),
                reorder: 0.1 * rng.next_f64(),
                ..clean
            },
            _ => {
                let down = 5_000_000 + rng.gen_range(0..200_000_000);
                FaultProfile {
                    loss: 0.01 * rng.next_f64(),
                    corrupt: 0.02 * rng.next_f64(),
                    flap_ns: Some((down, down + 10_000_000 + rng.gen_range(0..300_000_000))),
                    ..clean
                }
            }
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Bytes delivered and verified, all streams together.
    pub bytes_verified: u64,
    /// Connections that completed, and that ended with a clear error.
    pub connections_completed: u64,
    pub connections_failed: u64,
    /// Virtual time at idle, and events run.
    pub sim_time_ns: u64,
    pub events: u64,
    /// The first error a failed connection ended with, for the report.
    pub first_error: Option<String>,
    /// Handoff: connections moved, and frames that arrived while one was travelling (dropped
    /// before any processing, recovered by retransmission).
    pub moves: u64,
    pub frames_dropped_in_flight: u64,
    /// The world's trace digest: same seed, same build ⇒ same digest.
    pub trace_digest: u64,
    /// Frames the world delivered to hosts (both directions, duplicates included): the
    /// simulator's unit of work for "packets per CPU-second".
    pub frames_delivered: u64,
    /// Connections established on each server shard (the `many` workload's server has two).
    pub server_accepted_per_shard: Vec<u64>,
}

impl RunSummary {
    fn record(&mut self, f: &Flow) {
        self.bytes_verified += f.rx.received;
        if f.succeeded() {
            self.connections_completed += 1;
        } else {
            self.connections_failed += 1;
            if self.first_error.is_none() {
                self.first_error = Some(format!(
                    "{} (sent {}/{}, received {}/{}, eof {})",
                    f.error
                        .map_or_else(|| "no error".to_string(), |e| e.to_string()),
                    f.tx_sent,
                    f.tx_total,
                    f.rx.received,
                    f.rx.expected,
                    f.rx_eof
                ));
            }
        }
    }
}

/// Removes finished flows, recording each in `summary`.
fn reap(flows: &mut Vec<(u64, Flow)>, summary: &mut RunSummary) {
    flows.retain(|(_, f)| {
        if f.done() {
            summary.record(f);
        }
        !f.done()
    });
}

const SERVER_PORT: u16 = 5001;
/// Idle time before a soak connection's first keepalive probe.
const KEEPALIVE_IDLE_NS: u64 = 60_000_000_000;
/// The soak's checker walks every connection's TCB invariants once per this many events (a
/// broken invariant that lasts is caught within that many; a walk after every event tripled
/// the soak's time). [`run_with_walk_interval`] takes another interval.
pub const INVARIANT_WALK_EVERY_EVENTS: u64 = 16;
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Stream ids: client→server and server→client of connection `k`.
fn c2s_stream(seed: u64, k: u64) -> u64 {
    seed.wrapping_mul(0x1000_0000_01b3) ^ (k << 1)
}

fn s2c_stream(seed: u64, k: u64) -> u64 {
    c2s_stream(seed, k) ^ 1
}

/// The plan both ends of a seed agree on.
#[derive(Debug, Clone)]
struct Plan {
    seed: u64,
    workload: Workload,
    /// Bulk: bytes each way.
    c2s_bytes: u64,
    s2c_bytes: u64,
    /// Request/response: (request, response) sizes.
    exchanges: Vec<(u64, u64)>,
    /// Many connections: total, at once, bytes each way.
    conns_total: u64,
    conns_at_once: usize,
    conn_bytes: u64,
    /// Request/response: cumulative client→server bytes at the end of each request, and
    /// server→client bytes at the end of each response.
    request_ends: Vec<u64>,
    response_ends: Vec<u64>,
    /// Handoff: the server moves its connection once it has read this many bytes, and the
    /// snapshot travels this long.
    move_after_bytes: u64,
    move_travel_ns: u64,
}

impl Plan {
    fn new(seed: u64, workload: Workload) -> Plan {
        let mut rng = SimRng::new(seed).fork(0x91a4);
        let mut plan = Plan {
            seed,
            workload,
            c2s_bytes: 0,
            s2c_bytes: 0,
            exchanges: Vec::new(),
            conns_total: 0,
            conns_at_once: 0,
            conn_bytes: 0,
            request_ends: Vec::new(),
            response_ends: Vec::new(),
            move_after_bytes: 0,
            move_travel_ns: 0,
        };
        match workload {
            Workload::BulkOneWay => plan.c2s_bytes = 1 + rng.gen_range(0..1_000_000),
            Workload::BulkBothWays | Workload::Handoff => {
                plan.c2s_bytes = 1 + rng.gen_range(0..400_000);
                plan.s2c_bytes = 1 + rng.gen_range(0..400_000);
                plan.move_after_bytes = rng.gen_range(0..plan.c2s_bytes);
                plan.move_travel_ns = rng.gen_range(0..50_000_000);
            }
            Workload::RequestResponse => {
                let n = 10 + rng.gen_range(0..90);
                plan.exchanges = (0..n)
                    .map(|_| (1 + rng.gen_range(0..2_000), 1 + rng.gen_range(0..6_000)))
                    .collect();
                plan.c2s_bytes = plan.exchanges.iter().map(|e| e.0).sum();
                plan.s2c_bytes = plan.exchanges.iter().map(|e| e.1).sum();
                plan.request_ends = cumulative(plan.exchanges.iter().map(|e| e.0));
                plan.response_ends = cumulative(plan.exchanges.iter().map(|e| e.1));
            }
            // Planned by `migrate` itself.
            Workload::Migrate | Workload::Offload => {}
            Workload::ManyConnections => {
                plan.conns_total = 300 + rng.gen_range(0..1_700);
                plan.conns_at_once = 8 + rng.gen_range(0..56) as usize;
                plan.conn_bytes = 1 + rng.gen_range(0..3_000);
            }
        }
        plan
    }
}

fn cumulative(sizes: impl Iterator<Item = u64>) -> Vec<u64> {
    sizes
        .scan(0u64, |acc, n| {
            *acc += n;
            Some(*acc)
        })
        .collect()
}

/// The client side: opens connections and runs flows.
pub struct Client {
    plan: Plan,
    flows: Vec<(u64, Flow)>,
    next_conn: u64,
    scratch: Vec<u8>,
    violation: Option<String>,
    summary: RunSummary,
}

/// The server side: accepts connections and runs flows.
pub struct Server {
    plan: Plan,
    listener: Option<SocketHandle>,
    flows: Vec<(u64, Flow)>,
    scratch: Vec<u8>,
    violation: Option<String>,
    summary: RunSummary,
    /// Handoff: the connection in flight (exported, not yet imported), and moves completed.
    moving: Option<Move>,
    moves_done: u64,
    /// The handles one poll works, kept between polls so a poll allocates nothing.
    work: Vec<SocketHandle>,
}

/// A connection exported from the server's stack, travelling until `import_at_ns`.
struct Move {
    handle: SocketHandle,
    tuple: FourTuple,
    snapshot: tcp::ConnectionSnapshot,
    import_at_ns: u64,
}

impl Client {
    fn open(&mut self, now: u64, stack: &mut Stack) {
        let many = self.plan.workload == Workload::ManyConnections;
        let total = if many { self.plan.conns_total } else { 1 };
        let at_once = if many { self.plan.conns_at_once } else { 1 };
        while self.next_conn < total && self.flows.len() < at_once {
            let k = self.next_conn;
            let remote = SocketAddr::new(IpAddr::V4(SERVER_IP), SERVER_PORT);
            match stack.tcp_connect(now, remote, 0) {
                Ok(h) => {
                    let (tx, rx) = if many {
                        (self.plan.conn_bytes, self.plan.conn_bytes)
                    } else {
                        (self.plan.c2s_bytes, self.plan.s2c_bytes)
                    };
                    // Streams are keyed by the client port so the server can find them.
                    let port = stack.local_addr(h).map_or(0, |a| u64::from(a.port()));
                    let id = if many { port } else { 0 };
                    let seed = self.plan.seed;
                    let mut flow = Flow::new(h, c2s_stream(seed, id), tx, s2c_stream(seed, id), rx);
                    if self.plan.workload == Workload::RequestResponse {
                        flow.tx_allowed = self.plan.exchanges.first().map_or(0, |e| e.0);
                    }
                    self.flows.push((k, flow));
                    self.next_conn += 1;
                }
                // Out of ports or sockets for now (connections still in TIME-WAIT): retry on
                // a later activation.
                Err(SocketError::NoFreePort | SocketError::TooManySockets) => break,
                Err(e) => {
                    self.violation = Some(format!("connect #{k} failed: {e}"));
                    break;
                }
            }
        }
    }
}

impl App for Client {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let now_ns = ctx.now_ns();
        self.open(now_ns, ctx.stack());
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        let now_ns = ctx.now_ns();
        let stack = ctx.stack();
        if self.violation.is_some() {
            return;
        }
        let request_ends = &self.plan.request_ends;
        let response_ends = &self.plan.response_ends;
        let mut any_done = false;
        for ev in events {
            let Some((_, flow)) = self.flows.iter_mut().find(|(_, f)| f.handle == ev.handle) else {
                continue;
            };
            // Request/response: release request i+1 once response i is complete (re-checked
            // after reading, which may complete a response).
            for _ in 0..2 {
                if !request_ends.is_empty() {
                    let answered = response_ends
                        .iter()
                        .take_while(|&&e| e <= flow.rx.received)
                        .count();
                    flow.tx_allowed = request_ends
                        .get(answered)
                        .copied()
                        .unwrap_or(flow.tx_total)
                        .min(flow.tx_total);
                }
                if let Err(v) = flow.pump(now_ns, stack, &mut self.scratch) {
                    self.violation = Some(v);
                    return;
                }
            }
            any_done |= flow.done();
        }
        if any_done {
            reap(&mut self.flows, &mut self.summary);
        }
        self.open(now_ns, stack);
    }
}

impl App for Server {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        match ctx
            .stack()
            .tcp_listen(SocketAddr::new(IpAddr::V4(SERVER_IP), SERVER_PORT), 128)
        {
            Ok(l) => self.listener = Some(l),
            Err(e) => self.violation = Some(format!("listen failed: {e}")),
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        let now_ns = ctx.now_ns();
        let stack = ctx.stack();
        if self.violation.is_some() {
            return;
        }
        let many = self.plan.workload == Workload::ManyConnections;
        let mut work = core::mem::take(&mut self.work);
        work.clear();
        work.extend(events.iter().map(|e| e.handle));
        if let Some(h) = self.finish_move(now_ns, stack) {
            work.push(h);
        }
        if let Some(l) = self.listener {
            while let Ok((h, peer)) = stack.tcp_accept(l) {
                let id = if many { u64::from(peer.port()) } else { 0 };
                let (tx, rx) = if many {
                    (self.plan.conn_bytes, self.plan.conn_bytes)
                } else {
                    (self.plan.s2c_bytes, self.plan.c2s_bytes)
                };
                let mut flow = Flow::new(
                    h,
                    s2c_stream(self.plan.seed, id),
                    tx,
                    c2s_stream(self.plan.seed, id),
                    rx,
                );
                if self.plan.workload == Workload::RequestResponse {
                    flow.tx_allowed = 0;
                }
                if self.plan.workload == Workload::Handoff {
                    flow.rx_pause_at = Some(self.plan.move_after_bytes);
                }
                self.flows.push((id, flow));
                // Data may have arrived with the handshake: work the new socket now.
                work.push(h);
            }
        }
        let request_ends = &self.plan.request_ends;
        let response_ends = &self.plan.response_ends;
        let mut any_done = false;
        for &h in &work {
            if self.moving.as_ref().is_some_and(|m| m.handle == h) {
                continue;
            }
            let Some((_, flow)) = self.flows.iter_mut().find(|(_, f)| f.handle == h) else {
                continue;
            };
            if let Err(v) = flow.pump(now_ns, stack, &mut self.scratch) {
                self.violation = Some(v);
                return;
            }
            if !request_ends.is_empty() {
                // Response i is released once request i has been read in full.
                let served = request_ends
                    .iter()
                    .take_while(|&&e| e <= flow.rx.received)
                    .count();
                let allowed = if served == 0 {
                    0
                } else {
                    response_ends.get(served - 1).copied().unwrap_or(0)
                };
                if allowed > flow.tx_allowed {
                    flow.tx_allowed = allowed;
                    if let Err(v) = flow.pump(now_ns, stack, &mut self.scratch) {
                        self.violation = Some(v);
                        return;
                    }
                }
            }
            any_done |= flow.done();
        }
        self.work = work;
        if any_done {
            reap(&mut self.flows, &mut self.summary);
        }
        self.begin_move(now_ns, stack);
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.moving.as_ref().map(|m| m.import_at_ns)
    }
}

impl Server {
    /// Handoff workload: once the first connection has read `move_after_bytes`, exports it
    /// (`Stack::tcp_export` flushes a pending delayed ACK first and leaves a *moved* marker, so
    /// frames arriving while the snapshot travels are dropped unprocessed, never answered with
    /// RST) and imports it back after `move_travel_ns` — the same walk a move to another shard
    /// or an offload engine takes (DESIGN "Handoff protocol").
    fn begin_move(&mut self, now_ns: u64, stack: &mut Stack) {
        if self.plan.workload != Workload::Handoff || self.moving.is_some() || self.moves_done > 0 {
            return;
        }
        let Some((_, flow)) = self.flows.first() else {
            return;
        };
        if flow.closed || flow.rx.received < self.plan.move_after_bytes {
            return;
        }
        let handle = flow.handle;
        match stack.tcp_export(now_ns, handle) {
            Ok((tuple, snapshot)) => {
                self.moving = Some(Move {
                    handle,
                    tuple,
                    snapshot,
                    import_at_ns: now_ns.saturating_add(self.plan.move_travel_ns),
                });
            }
            // Output still queued this instant: try again at a later activation.
            Err(SocketError::WouldBlock) => {}
            Err(e) => self.violation = Some(format!("handoff failed: export refused: {e}")),
        }
    }

    /// Imports the travelling connection once it has arrived; returns its handle, to be
    /// worked now.
    fn finish_move(&mut self, now_ns: u64, stack: &mut Stack) -> Option<SocketHandle> {
        let m = self.moving.take_if(|m| m.import_at_ns <= now_ns)?;
        match stack.tcp_import(now_ns, m.tuple, &m.snapshot) {
            Ok(h) => {
                self.moves_done += 1;
                if let Some((_, flow)) = self.flows.iter_mut().find(|(_, f)| f.handle == m.handle) {
                    flow.handle = h;
                    flow.rx_pause_at = None;
                }
                Some(h)
            }
            Err(e) => {
                self.violation = Some(format!("handoff failed: import refused: {e}"));
                None
            }
        }
    }
}

/// SYN retransmissions before an opening connection gives up, in the soak's stacks. A link
/// losing 20 % each way loses a SYN/SYN-ACK exchange 36 % of the time: the default 6 retries
/// give up once in 1,300 connections (seed 1004527 did), 20 once in 2·10⁹.
pub const SYN_RETRIES_MAX: u8 = 20;

/// The soak's user timeout (RFC 9293 §3.8.3): 30 minutes of retransmitting without progress,
/// about 40 backed-off retransmissions past the 60 s RTO cap rather than the default 300 s's
/// dozen, so heavy loss never times a live connection out; a peer that really vanished still
/// ends it (and its keepalive ends an idle one).
pub const USER_TIMEOUT_NS: u64 = 1_800_000_000_000;

fn stack_config(mac: [u8; 6], ip: Ipv4Addr, seed: u64, workload: Workload) -> StackConfig {
    let mut cfg = StackConfig::new(InterfaceConfig::new(
        EthernetAddress(mac),
        Ipv4Cidr::new(ip, 24),
    ));
    if workload == Workload::ManyConnections {
        // Short connections carry a few KB: small buffers, as a server with many connections
        // would configure them (and the engine allocates its rings at full size up front).
        cfg.tcp.send_buffer_bytes = 16 * 1024;
        cfg.tcp.recv_buffer_bytes = 16 * 1024;
    }
    if workload == Workload::Migrate {
        // Dozens of connections open at once, all waiting for the one ARP resolution.
        cfg.limits.neighbor_pending_packets_max = 256;
    }
    // 2·MSL of 2 s (configurable per RFC 9293 §3.4.2's "MSL is an engineering choice") keeps
    // thousands of short connections from holding the socket table for minutes of sim time.
    cfg.tcp.time_wait_ns = 2_000_000_000;
    // Keepalive (RFC 9293 §3.8.4), as an application that must not hang would set it: at
    // heavy loss a peer may give up (user timeout) with its RST lost, and a half-closed
    // connection still reading has nothing outstanding to find that out with (seed 1011357:
    // the client waited in FIN-WAIT-2 for ever). A minute idle, then ten-second probes.
    cfg.tcp.syn_retries_max = SYN_RETRIES_MAX;
    cfg.tcp.user_timeout_ns = Some(USER_TIMEOUT_NS);
    cfg.tcp.keepalive = Some(tcp::KeepaliveConfig {
        idle_ns: KEEPALIVE_IDLE_NS,
        interval_ns: 10_000_000_000,
        probes_max: 9,
    });
    let mut rng = SimRng::new(seed).fork(u64::from(u32::from(ip)));
    cfg.secret = [rng.next_u64(), rng.next_u64()];
    cfg
}

/// Joins `client` and `server` with the soak's link (1 Gbit/s, 200 µs, jitter that reorders)
/// under `faults`, every fault on both directions, and the `SIM_TRACE_PORT` debugging taps
/// ([`trace::trace_port_from_env`]).
fn connect_faulty(
    w: &mut World,
    client: HostId,
    server: HostId,
    faults: &FaultProfile,
) -> Result<(), String> {
    let link_cfg = ChannelConfig::default()
        .rate_bps(1_000_000_000)
        .delay_ns(200_000)
        .jitter_ns(20_000, JitterOrder::Reorder)
        .queue_max(4 * 1024 * 1024, 4096);
    let link = w
        .connect((client, PortId(0)), (server, PortId(0)), link_cfg)
        .map_err(|e| e.to_string())?;
    if faults.loss > 0.0 {
        w.add_fault_both(link, Loss { p: faults.loss });
    }
    if faults.duplicate > 0.0 {
        w.add_fault_both(
            link,
            Duplicate {
                p: faults.duplicate,
            },
        );
    }
    if faults.reorder > 0.0 {
        w.add_fault_both(
            link,
            Reorder {
                p: faults.reorder,
                extra_delay_ns: 1_000_000,
            },
        );
    }
    if faults.corrupt > 0.0 {
        w.add_fault_both(link, Corrupt { p: faults.corrupt });
    }
    if let Some((down, up)) = faults.flap_ns {
        w.add_fault_both(link, Flap::new(down, up));
    }
    trace::trace_port_from_env(w);
    Ok(())
}

/// Runs `workload` under `seed`'s fault profile; `Err` names what went wrong.
pub fn run(workload: Workload, seed: u64) -> Result<RunSummary, String> {
    if workload == Workload::Migrate {
        return migrate::run(seed).map(|(summary, _)| summary);
    }
    if workload == Workload::Offload {
        return offload::run(seed).map(|(summary, _)| summary);
    }
    run_with_faults(workload, seed, FaultProfile::for_seed(seed))
}

/// Runs `workload` with `seed`'s plan and randomness under the given faults instead of the
/// seed's own profile (the `sim_faults` fuzz target chooses them). The checks are [`run`]'s:
/// every byte once and in order, every connection finished, none failed.
/// `Migrate` and `Offload` build their own worlds and take no faults from here: they are
/// refused.
pub fn run_with_faults(
    workload: Workload,
    seed: u64,
    faults: FaultProfile,
) -> Result<RunSummary, String> {
    run_two_hosts(workload, seed, faults, INVARIANT_WALK_EVERY_EVENTS)
}

/// [`run`], with the TCB invariant walk after every `walk_every_events`-th event (the soak
/// walks every [`INVARIANT_WALK_EVERY_EVENTS`]; `u64::MAX`: after the first event only).
/// Every other check is [`run`]'s, and the checker only reads, so the trace is the same
/// whatever the interval. `Migrate` and `Offload` walk no TCBs: they run as [`run`] runs
/// them. For measuring what the simulation costs without the walk (`soak_rate`).
pub fn run_with_walk_interval(
    workload: Workload,
    seed: u64,
    walk_every_events: u64,
) -> Result<RunSummary, String> {
    if matches!(workload, Workload::Migrate | Workload::Offload) {
        return run(workload, seed);
    }
    run_two_hosts(
        workload,
        seed,
        FaultProfile::for_seed(seed),
        walk_every_events,
    )
}

/// The two-host workloads' run ([`run_with_faults`]).
fn run_two_hosts(
    workload: Workload,
    seed: u64,
    faults: FaultProfile,
    walk_every_events: u64,
) -> Result<RunSummary, String> {
    if matches!(workload, Workload::Migrate | Workload::Offload) {
        return Err(format!(
            "{workload}: runs under its seed's own faults only (use run)"
        ));
    }
    let plan = Plan::new(seed, workload);
    let mut w = World::new(seed);
    let client = w.add_host(Box::new(ShardedHost::single(
        stack_config([2, 0, 0, 0, 0, 1], CLIENT_IP, seed, workload),
        Client {
            plan: plan.clone(),
            flows: Vec::new(),
            next_conn: 0,
            scratch: vec![0; CHUNK_BYTES],
            violation: None,
            summary: RunSummary::default(),
        },
    )));
    // Many short connections land on a two-shard server: RSS spreads them over both shards'
    // listeners, and each shard's stack resolves the client for its own replies.
    let server_shards = if workload == Workload::ManyConnections {
        2
    } else {
        1
    };
    let server_cfg =
        ShardedHostConfig::new(stack_config([2, 0, 0, 0, 0, 2], SERVER_IP, seed, workload))
            .with_shards(server_shards);
    let server_host = ShardedHost::new(server_cfg, |_| Server {
        plan: plan.clone(),
        listener: None,
        flows: Vec::new(),
        scratch: vec![0; CHUNK_BYTES],
        violation: None,
        summary: RunSummary::default(),
        moving: None,
        moves_done: 0,
        work: Vec::new(),
    })?;
    let server = w.add_host(Box::new(server_host));
    connect_faulty(&mut w, client, server, &faults)?;

    let checker = check::Checker::new(client, server, walk_every_events);
    let events = w
        .run_until_idle_checked(20_000_000, |w| checker.check(w))
        .map_err(|e| format!("{workload} seed {seed} ({faults:?}): {e}"))?;

    let c = w
        .host::<ShardedHost<Client>>(client)
        .ok_or("client host missing")?
        .app();
    let server_host = w
        .host::<ShardedHost<Server>>(server)
        .ok_or("server host missing")?;
    let s = ServerTotals::of(server_host);
    let context = format!("{workload} seed {seed} ({faults:?})");
    if std::env::var_os("SIM_DEBUG").is_some() {
        let cs = w
            .host::<ShardedHost<Client>>(client)
            .ok_or("client")?
            .stack()
            .counters();
        // Before the checks, so a failing seed's counters show too.
        for (i, sh) in server_host.shards().iter().enumerate() {
            eprintln!("server shard {i} {:?}", sh.stack().counters());
        }
        eprintln!("client {cs:?}");
    }
    if !c.flows.is_empty() || !s.flows.is_empty() {
        let describe = |flows: &mut dyn Iterator<Item = (&Stack, &Flow)>| -> String {
            flows
                .take(3)
                .map(|(stack, f)| {
                    format!(
                        "[{:?} local {:?} sent {}/{} shut {} received {}/{} eof {} err {:?}]",
                        stack.tcp_state(f.handle),
                        stack.local_addr(f.handle).ok(),
                        f.tx_sent,
                        f.tx_total,
                        f.tx_shutdown,
                        f.rx.received,
                        f.rx.expected,
                        f.rx_eof,
                        f.error
                    )
                })
                .collect()
        };
        let cs = w
            .host::<ShardedHost<Client>>(client)
            .ok_or("client host missing")?
            .stack();
        return Err(format!(
            "{context}: idle with {} client and {} server connections unfinished: client {} server {}",
            c.flows.len(),
            s.flows.len(),
            describe(&mut c.flows.iter().map(|(_, f)| (cs, f))),
            describe(&mut s.flows.iter().copied())
        ));
    }
    let opened = c.summary.connections_completed + c.summary.connections_failed;
    let expected = if workload == Workload::ManyConnections {
        plan.conns_total
    } else {
        1
    };
    if opened != expected || c.next_conn != expected {
        return Err(format!(
            "{context}: client finished {opened} of {expected} connections"
        ));
    }
    if c.summary.connections_failed > 0 || s.summary.connections_failed > 0 {
        return Err(format!(
            "{context}: {} client and {} server connections failed; first: client {:?}, server {:?}",
            c.summary.connections_failed,
            s.summary.connections_failed,
            c.summary.first_error,
            s.summary.first_error
        ));
    }
    // A connection that failed on either side (at heavy loss the handshake may time out
    // before the server ever sees it: seed 1004527) has nothing to move.
    if workload == Workload::Handoff
        && s.moves_done != 1
        && s.summary.connections_failed == 0
        && c.summary.connections_failed == 0
    {
        return Err(format!(
            "{context}: the connection was moved {} times, expected once",
            s.moves_done
        ));
    }
    if s.summary.connections_completed + s.summary.connections_failed > expected {
        return Err(format!(
            "{context}: server saw more connections than the client opened"
        ));
    }
    Ok(RunSummary {
        bytes_verified: c.summary.bytes_verified + s.summary.bytes_verified,
        connections_completed: c.summary.connections_completed,
        connections_failed: c.summary.connections_failed,
        sim_time_ns: w.now_ns(),
        events,
        first_error: c
            .summary
            .first_error
            .clone()
            .or_else(|| s.summary.first_error.clone()),
        moves: s.moves_done,
        frames_dropped_in_flight: s.dropped_in_flight,
        trace_digest: w.digest(),
        frames_delivered: w.counters().deliveries,
        server_accepted_per_shard: server_host
            .shards()
            .iter()
            .map(|sh| sh.stack().counters().tcp_connections_established)
            .collect(),
    })
}

/// The server's shards seen as one: every shard's unfinished flows with its stack, and the
/// summaries, moves and in-flight drops summed.
struct ServerTotals<'a> {
    flows: Vec<(&'a Stack, &'a Flow)>,
    summary: RunSummary,
    moves_done: u64,
    dropped_in_flight: u64,
}

impl<'a> ServerTotals<'a> {
    fn of(host: &'a ShardedHost<Server>) -> ServerTotals<'a> {
        let mut t = ServerTotals {
            flows: Vec::new(),
            summary: RunSummary::default(),
            moves_done: 0,
            dropped_in_flight: 0,
        };
        for sh in host.shards() {
            let (stack, app) = (sh.stack(), sh.app());
            t.flows.extend(app.flows.iter().map(|(_, f)| (stack, f)));
            t.summary.bytes_verified += app.summary.bytes_verified;
            t.summary.connections_completed += app.summary.connections_completed;
            t.summary.connections_failed += app.summary.connections_failed;
            if t.summary.first_error.is_none() {
                t.summary.first_error = app.summary.first_error.clone();
            }
            t.moves_done += app.moves_done;
            t.dropped_in_flight += stack.counters().tcp_drop_moved;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::flow::StreamCheck;
    use super::*;

    #[test]
    fn pattern_catches_a_shift_by_256() {
        let shifted = (0..4096)
            .filter(|&i| pattern_byte(7, i) == pattern_byte(7, i + 256))
            .count();
        assert!(
            shifted < 64,
            "{shifted} of 4096 bytes equal after a 256-byte shift"
        );
    }

    #[test]
    fn stream_check_reports_the_first_wrong_offset() {
        let mut c = StreamCheck::new(3, 10);
        let good: Vec<u8> = (0..5).map(|i| pattern_byte(3, i)).collect();
        assert!(c.feed(&good).is_ok());
        let err = c
            .feed(&[pattern_byte(3, 6)])
            .expect_err("offset 5 got byte 6");
        assert!(err.contains("offset 5"), "{err}");
    }

    #[test]
    fn the_invariant_walk_interval_leaves_the_trace_alone() {
        let soak = run(Workload::RequestResponse, 4).expect("rr seed 4");
        for every in [1, u64::MAX] {
            let other = run_with_walk_interval(Workload::RequestResponse, 4, every)
                .expect("rr seed 4, another interval");
            assert_eq!(other, soak, "walk every {every} events");
        }
    }

    #[test]
    fn workload_names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
    }
}
