//! The `migrate` soak workload: live rebalancing under load and faults (DESIGN "Rebalancing").
//!
//! A client opens dozens of connections to a four-shard server, each carrying its own
//! pattern stream both ways. At random moments the harness moves a RETA bucket — usually the
//! bucket of a live connection — to another server shard ([`ShardedHost::move_bucket`]); the
//! bucket's connections migrate with the move protocol (`shard::moves`) while data flows both
//! ways, under the seed's loss, reordering, duplication, corruption or link flap. The server
//! application hands each connection's flow (its stream positions and checker) to the new
//! shard's instance ([`App::export_conn`] / [`App::import_conn`]).
//!
//! Checked: every byte of every stream arrives once and in order (the pattern checkers); no
//! connection is live on two shards at once (checked between steps); no connection is ever
//! reset, whatever the faults (a frame caught mid-move must be held or forwarded, never
//! refused); every connection completes. (A RST for a segment of a
//! connection that has already finished — a duplicated last ACK — is normal TCP and allowed.)

use core::net::{IpAddr, SocketAddr};

use app::{App, Conn, ConnState, Ctx, Moved};
use stack::{SocketError, SocketEvent, SocketHandle, Stack};

use super::flow::{CHUNK_BYTES, Flow};
use super::owners::Owners;
use super::{
    CLIENT_IP, FaultProfile, RunSummary, SERVER_IP, SERVER_PORT, Workload, c2s_stream, reap,
    s2c_stream, stack_config,
};
use crate::link::ChannelConfig;
use crate::net::{ShardedHost, ShardedHostConfig};
use crate::rng::SimRng;
use crate::{HostId, PortId, World};

/// Server shards.
pub const SERVER_SHARDS: u16 = 4;

/// How much each connection carries; both ends derive it from the client port.
#[derive(Debug, Clone)]
pub(super) struct Sizing {
    pub(super) seed: u64,
    /// Elephants: client ports whose connections upload `elephant_bytes`.
    pub(super) elephants: Vec<u16>,
    pub(super) elephant_bytes: u64,
}

impl Sizing {
    /// Every connection sized at random from the seed and its client port (no elephants).
    pub(super) fn random(seed: u64) -> Self {
        Sizing {
            seed,
            elephants: Vec::new(),
            elephant_bytes: 0,
        }
    }

    /// Bytes (client → server, server → client) of the connection from client port `port`.
    fn bytes(&self, port: u16) -> (u64, u64) {
        if self.elephants.contains(&port) {
            return (self.elephant_bytes, 1_000);
        }
        let mut rng = SimRng::new(self.seed).fork(0x6d16 ^ u64::from(port));
        (1 + rng.gen_range(0..120_000), 1 + rng.gen_range(0..120_000))
    }
}

/// The client: keeps `at_once` connections open until `total` have run.
pub(super) struct MigrateClient {
    pub(super) seed: u64,
    pub(super) sizing: Sizing,
    /// Connections to open from these ports first (the elephants), then from ephemeral ones.
    pub(super) fixed_ports: Vec<u16>,
    pub(super) total: u64,
    pub(super) at_once: usize,
    pub(super) opened: u64,
    pub(super) flows: Vec<(u64, Flow)>,
    pub(super) scratch: Vec<u8>,
    pub(super) violation: Option<String>,
    pub(super) summary: RunSummary,
}

impl MigrateClient {
    fn open(&mut self, now: u64, stack: &mut Stack) {
        while self.opened < self.total && self.flows.len() < self.at_once {
            let remote = SocketAddr::new(IpAddr::V4(SERVER_IP), SERVER_PORT);
            let fixed = usize::try_from(self.opened)
                .ok()
                .and_then(|i| self.fixed_ports.get(i).copied())
                .unwrap_or(0);
            match stack.tcp_connect(now, remote, fixed) {
                Ok(h) => {
                    let port = stack.local_addr(h).map_or(0, |a| a.port());
                    let (c2s, s2c) = self.sizing.bytes(port);
                    let id = u64::from(port);
                    let flow = Flow::new(
                        h,
                        c2s_stream(self.seed, id),
                        c2s,
                        s2c_stream(self.seed, id),
                        s2c,
                    );
                    self.flows.push((id, flow));
                    self.opened += 1;
                }
                Err(SocketError::NoFreePort | SocketError::TooManySockets) => break,
                Err(e) => {
                    self.violation = Some(format!("connect failed: {e}"));
                    break;
                }
            }
        }
    }
}

impl App for MigrateClient {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now_ns();
        self.open(now, ctx.stack());
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        let now = ctx.now_ns();
        let stack = ctx.stack();
        if self.violation.is_some() {
            return;
        }
        for ev in events {
            let Some((_, flow)) = self.flows.iter_mut().find(|(_, f)| f.handle == ev.handle) else {
                continue;
            };
            if let Err(v) = flow.pump(now, stack, &mut self.scratch) {
                self.violation = Some(v);
                return;
            }
        }
        self.violation = reset_violation(&self.flows, "client");
        reap(&mut self.flows, &mut self.summary);
        self.open(now, stack);
    }

    fn done(&self) -> bool {
        self.opened == self.total && self.flows.is_empty()
    }
}

/// One server shard's instance: accepts, serves its flows, and hands a flow over when its
/// connection moves.
pub(super) struct MigrateServer {
    pub(super) seed: u64,
    pub(super) sizing: Sizing,
    pub(super) listener: Option<SocketHandle>,
    pub(super) flows: Vec<(u64, Flow)>,
    pub(super) scratch: Vec<u8>,
    pub(super) violation: Option<String>,
    pub(super) summary: RunSummary,
    /// Connections that arrived from another shard, and state given back after a failed move.
    pub(super) imported: u64,
    pub(super) returned: u64,
    /// The handles one poll works, kept between polls so a poll allocates nothing.
    work: Vec<SocketHandle>,
}

impl MigrateServer {
    pub(super) fn new(sizing: Sizing) -> Self {
        MigrateServer {
            seed: sizing.seed,
            sizing,
            listener: None,
            flows: Vec::new(),
            scratch: vec![0; CHUNK_BYTES],
            violation: None,
            summary: RunSummary::default(),
            imported: 0,
            returned: 0,
            work: Vec::new(),
        }
    }

    fn work(&mut self, now: u64, stack: &mut Stack, h: SocketHandle) {
        let Some((_, flow)) = self.flows.iter_mut().find(|(_, f)| f.handle == h) else {
            return;
        };
        if let Err(v) = flow.pump(now, stack, &mut self.scratch) {
            self.violation = Some(v);
        }
    }
}

impl App for MigrateServer {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let local = SocketAddr::new(IpAddr::V4(SERVER_IP), SERVER_PORT);
        match ctx.stack().tcp_listen(local, 128) {
            Ok(l) => self.listener = Some(l),
            Err(e) => self.violation = Some(format!("listen failed: {e}")),
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        let now = ctx.now_ns();
        let stack = ctx.stack();
        if self.violation.is_some() {
            return;
        }
        let mut work = core::mem::take(&mut self.work);
        work.clear();
        work.extend(events.iter().map(|e| e.handle));
        if let Some(l) = self.listener {
            while let Ok((h, peer)) = stack.tcp_accept(l) {
                let id = u64::from(peer.port());
                let (c2s, s2c) = self.sizing.bytes(peer.port());
                let flow = Flow::new(
                    h,
                    s2c_stream(self.seed, id),
                    s2c,
                    c2s_stream(self.seed, id),
                    c2s,
                );
                self.flows.push((id, flow));
                work.push(h);
            }
        }
        for &h in &work {
            self.work(now, stack, h);
        }
        self.work = work;
        if self.violation.is_none() {
            self.violation = reset_violation(&self.flows, "server");
        }
        reap(&mut self.flows, &mut self.summary);
    }

    fn export_conn(&mut self, _ctx: &mut Ctx<'_>, conn: Conn, _to: u16) -> Option<ConnState> {
        let i = self
            .flows
            .iter()
            .position(|(_, f)| f.handle == conn.handle())?;
        let flow = self.flows.remove(i);
        Some(Box::new(flow))
    }

    fn import_conn(&mut self, ctx: &mut Ctx<'_>, conn: Conn, moved: Moved) {
        let Ok(flow) = moved.state.downcast::<(u64, Flow)>() else {
            self.violation = Some("a moved connection arrived with foreign state".into());
            return;
        };
        let (id, mut flow) = *flow;
        flow.handle = conn.handle();
        if moved.from == moved.to {
            self.returned += 1;
        } else {
            self.imported += 1;
        }
        self.flows.push((id, flow));
        // Whatever the old instance was waiting for may be ready here already.
        let now = ctx.now_ns();
        self.work(now, ctx.stack(), conn.handle());
    }
}

/// A connection that was reset: never expected here (no migration may refuse a segment).
pub(super) fn reset_violation(flows: &[(u64, Flow)], side: &str) -> Option<String> {
    flows
        .iter()
        .find(|(_, f)| f.error == Some(SocketError::Reset))
        .map(|(id, f)| {
            format!(
                "{side} connection {id} was reset (sent {}/{}, received {}/{})",
                f.tx_sent, f.tx_total, f.rx.received, f.rx.expected
            )
        })
}

/// What one `migrate` seed did, beyond the common summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MigrateStats {
    /// Bucket moves started, and connections that migrated with them: all of them, and the
    /// ones the application owned (its state moved with them; the others waited in a
    /// backlog or were finishing their close).
    pub bucket_moves: u64,
    pub migrations: u64,
    pub app_migrations: u64,
    /// Connections kept by their old shard while their bucket moved (handshake, closing).
    pub kept: u64,
    /// Frames held by new owners while a bucket moved.
    pub frames_held: u64,
}

/// Runs one `migrate` seed.
pub fn run(seed: u64) -> Result<(RunSummary, MigrateStats), String> {
    let faults = FaultProfile::for_seed(seed);
    let context = format!("migrate seed {seed} ({faults:?})");
    let mut rng = SimRng::new(seed).fork(0x316_0a7e);
    let mut w = World::new(seed);
    let sizing = Sizing {
        seed,
        elephants: Vec::new(),
        elephant_bytes: 0,
    };
    let client_app = MigrateClient {
        seed,
        sizing: sizing.clone(),
        fixed_ports: Vec::new(),
        total: 16 + rng.gen_range(0..48),
        at_once: 4 + rng.gen_range(0..28) as usize,
        opened: 0,
        flows: Vec::new(),
        scratch: vec![0; CHUNK_BYTES],
        violation: None,
        summary: RunSummary::default(),
    };
    let total = client_app.total;
    let client = w.add_host(Box::new(ShardedHost::single(
        stack_config([2, 0, 0, 0, 0, 1], CLIENT_IP, seed, Workload::Migrate),
        client_app,
    )));
    // Odd seeds: two hardware queues for the four shards, so frames reach shards that do not
    // own them and the shards' software RETA moves (the live ports' case).
    let server_cfg = ShardedHostConfig::new(stack_config(
        [2, 0, 0, 0, 0, 2],
        SERVER_IP,
        seed,
        Workload::Migrate,
    ))
    .with_shards(SERVER_SHARDS)
    .with_queues(if seed % 2 == 1 { 2 } else { SERVER_SHARDS });
    let server_host = ShardedHost::new(server_cfg, |_| MigrateServer::new(sizing.clone()))?;
    let server = w.add_host(Box::new(server_host));
    super::connect_faulty(&mut w, client, server, &faults)?;

    let mut stats = MigrateStats::default();
    let mut owners = Owners::default();
    let mut events: u64 = 0;
    // Step through the run, moving a bucket between steps, until the client has finished.
    for _ in 0..20_000 {
        let step_ns = 50_000 + rng.gen_range(0..2_000_000);
        let until = w.now_ns().saturating_add(step_ns);
        events += w
            .run_until_checked(until, 2_000_000, |w| check(w, client, server))
            .map_err(|e| format!("{context}: {e}"))?;
        one_owner_each(&w, server, &mut owners).map_err(|e| format!("{context}: {e}"))?;
        let client_done = w
            .host::<ShardedHost<MigrateClient>>(client)
            .ok_or("client host missing")?
            .app()
            .done();
        if client_done {
            break;
        }
        if w.next_event_ns().is_none() {
            break;
        }
        let host = w
            .host_mut::<ShardedHost<MigrateServer>>(server)
            .ok_or("server host missing")?;
        if pick_move(host, &mut rng, &mut owners) {
            stats.bucket_moves += 1;
            w.wake(server);
        }
    }
    events += w
        .run_until_idle_checked(20_000_000, |w| check(w, client, server))
        .map_err(|e| format!("{context}: {e}"))?;
    one_owner_each(&w, server, &mut owners).map_err(|e| format!("{context}: {e}"))?;

    let c = w
        .host::<ShardedHost<MigrateClient>>(client)
        .ok_or("client host missing")?
        .app();
    let s = w
        .host::<ShardedHost<MigrateServer>>(server)
        .ok_or("server host missing")?;
    let mut server_summary = RunSummary::default();
    let mut unfinished = 0;
    for sh in s.shards() {
        let app = sh.app();
        unfinished += app.flows.len();
        server_summary.bytes_verified += app.summary.bytes_verified;
        server_summary.connections_completed += app.summary.connections_completed;
        server_summary.connections_failed += app.summary.connections_failed;
        let m = sh.move_counters();
        stats.migrations += m.conns_in + m.unowned_in;
        stats.app_migrations += m.conns_in;
        stats.kept += m.kept;
        stats.frames_held += m.frames_held;
        if m.import_failed > 0 {
            return Err(format!("{context}: {} imports failed", m.import_failed));
        }
    }
    if std::env::var_os("SIM_DEBUG").is_some() {
        for sh in s.shards() {
            let k = sh.stack().counters();
            eprintln!(
                "shard {}: {:?} rst_unknown {} listen_bad {} drop_moved {} fwd {} fwd_full {} expired {} exported {} imported {} msgs {:?}",
                sh.info().shard,
                sh.move_counters(),
                k.tcp_rx_no_listener_rst_sent,
                k.tcp_listen_bad_segment,
                k.tcp_drop_moved,
                k.tcp_moved_forwarded,
                k.tcp_moved_forward_full,
                k.tcp_moved_expired,
                k.tcp_connections_exported,
                k.tcp_connections_imported,
                sh.counters().msgs,
            );
        }
    }
    if !c.flows.is_empty() || unfinished > 0 || c.opened != total {
        return Err(format!(
            "{context}: idle with {} client and {unfinished} server connections unfinished, {} of {total} opened",
            c.flows.len(),
            c.opened
        ));
    }
    if c.summary.connections_failed > 0 || server_summary.connections_failed > 0 {
        return Err(format!(
            "{context}: {} client and {} server connections failed; first: {:?}",
            c.summary.connections_failed, server_summary.connections_failed, c.summary.first_error
        ));
    }
    let summary = RunSummary {
        bytes_verified: c.summary.bytes_verified + server_summary.bytes_verified,
        connections_completed: c.summary.connections_completed,
        connections_failed: c.summary.connections_failed,
        sim_time_ns: w.now_ns(),
        events,
        first_error: c.summary.first_error.clone(),
        moves: stats.migrations,
        frames_dropped_in_flight: 0,
        trace_digest: w.digest(),
        frames_delivered: w.counters().deliveries,
        server_accepted_per_shard: s
            .shards()
            .iter()
            .map(|sh| sh.stack().counters().tcp_connections_established)
            .collect(),
    };
    Ok((summary, stats))
}

/// The applications' violations.
fn check(w: &World, client: HostId, server: HostId) -> Result<(), String> {
    let c = w
        .host::<ShardedHost<MigrateClient>>(client)
        .ok_or("client host missing")?;
    if let Some(v) = &c.app().violation {
        return Err(format!("client: {v}"));
    }
    let s = w
        .host::<ShardedHost<MigrateServer>>(server)
        .ok_or("server host missing")?;
    for sh in s.shards() {
        if let Some(v) = &sh.app().violation {
            return Err(format!("server shard {}: {v}", sh.info().shard));
        }
    }
    Ok(())
}

/// No connection is live on two server shards at once (DESIGN handoff invariant 1). Leaves
/// every shard's live tuples in `owners` (drawn from in `(tuple, shard)` order).
fn one_owner_each(w: &World, server: HostId, owners: &mut Owners) -> Result<(), String> {
    let s = w
        .host::<ShardedHost<MigrateServer>>(server)
        .ok_or("server host missing")?;
    owners.entries.clear();
    for sh in s.shards() {
        sh.stack().tcp_live_tuples(&mut owners.one);
        owners.take_one(sh.info().shard);
    }
    match owners.find_shared() {
        Some((t, a, b)) => Err(format!("{t:?} is live on shards {a} and {b} at once")),
        None => Ok(()),
    }
}

/// Starts one bucket move: most often the bucket of a live connection (so connections move),
/// sometimes any bucket; to a random other shard. False when nothing was started.
fn pick_move(host: &mut ShardedHost<MigrateServer>, rng: &mut SimRng, tuples: &mut Owners) -> bool {
    let entries = host.steering().steering().reta.len();
    let bucket = if !tuples.is_empty() && rng.chance(0.85) {
        let k = rng.gen_range(0..tuples.len() as u64) as usize;
        tuples
            .nth_in_order(k)
            .and_then(|(shard, t)| host.shard(shard)?.stack().tcp_flow_bucket(t, entries))
            .map_or(0, usize::from)
    } else {
        rng.gen_range(0..entries as u64) as usize
    };
    let from = host.owner_of(bucket).unwrap_or(0);
    let to = (from + 1 + rng.gen_range(0..u64::from(SERVER_SHARDS - 1)) as u16) % SERVER_SHARDS;
    host.move_bucket(bucket, to)
}

/// What a [`run_skew`] seed measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SkewOutcome {
    /// The server rebalancer's imbalance per period: (ms, busiest shard's packets / mean).
    pub imbalance: Vec<(u64, f64)>,
    /// Bucket moves the rebalancer planned, and connections that migrated.
    pub moves_planned: u64,
    pub migrations: u64,
    /// Bytes delivered and checked, all streams.
    pub bytes_verified: u64,
    pub trace_digest: u64,
}

impl SkewOutcome {
    /// Mean imbalance of the middle half of the periods with traffic (the start, before the
    /// first moves, and the tail, where the last flows finish alone, left out).
    pub fn mean_imbalance_middle(&self) -> f64 {
        let n = self.imbalance.len();
        let tail: Vec<f64> = self
            .imbalance
            .get(n / 4..n - n / 4)
            .unwrap_or(&[])
            .iter()
            .map(|&(_, x)| x)
            .collect();
        if tail.is_empty() {
            0.0
        } else {
            tail.iter().sum::<f64>() / tail.len() as f64
        }
    }
}

/// Elephants of a [`run_skew`] seed, each uploading this much.
pub const SKEW_ELEPHANTS: usize = 8;
pub const SKEW_ELEPHANT_BYTES: u64 = 8_000_000;
/// The rebalancing period of a [`run_skew`] seed.
pub const SKEW_PERIOD_NS: u64 = 20_000_000;

/// A skewed load on a clean link: [`SKEW_ELEPHANTS`] elephant connections whose client ports
/// the server's RSS puts on server shard 0 (each in its own RETA bucket) upload
/// [`SKEW_ELEPHANT_BYTES`] each while mice come and go. The server's rebalancer runs every
/// [`SKEW_PERIOD_NS`]; with `rebalance` false it measures and moves nothing. Every byte is
/// checked as in the `migrate` workload.
pub fn run_skew(seed: u64, rebalance: bool) -> Result<SkewOutcome, String> {
    let context = format!("skew seed {seed} (rebalance {rebalance})");
    let server_cfg = ShardedHostConfig::new(stack_config(
        [2, 0, 0, 0, 0, 2],
        SERVER_IP,
        seed,
        Workload::Migrate,
    ))
    .with_shards(SERVER_SHARDS);
    let reta = rss::Reta::with_equal(rss::RETA_SIZE_DEFAULT, SERVER_SHARDS)
        .map_err(|e| format!("{e:?}"))?;
    let q = rss::SteeredPortsQuery {
        client: CLIENT_IP.into(),
        server: SERVER_IP.into(),
        server_port: SERVER_PORT,
        server_queue: 0,
        range: 20_000..=40_000,
    };
    let elephants = rss::ports_steered_to(&server_cfg.hasher, &reta, &q, SKEW_ELEPHANTS);
    let sizing = Sizing {
        seed,
        elephants: elephants.clone(),
        elephant_bytes: SKEW_ELEPHANT_BYTES,
    };
    let mut w = World::new(seed);
    let client_app = MigrateClient {
        seed,
        sizing: sizing.clone(),
        total: elephants.len() as u64 + 100,
        fixed_ports: elephants,
        at_once: SKEW_ELEPHANTS + 8,
        opened: 0,
        flows: Vec::new(),
        scratch: vec![0; CHUNK_BYTES],
        violation: None,
        summary: RunSummary::default(),
    };
    let client = w.add_host(Box::new(ShardedHost::single(
        stack_config([2, 0, 0, 0, 0, 1], CLIENT_IP, seed, Workload::Migrate),
        client_app,
    )));
    let mut server_host = ShardedHost::new(server_cfg, |_| MigrateServer::new(sizing.clone()))?;
    let config = rss::RebalanceConfig {
        moves_max: if rebalance { 8 } else { 0 },
        ..rss::RebalanceConfig::default()
    };
    server_host.enable_rebalancing(config, SKEW_PERIOD_NS)?;
    let server = w.add_host(Box::new(server_host));
    let link_cfg = ChannelConfig::default()
        .rate_bps(1_000_000_000)
        .delay_ns(200_000)
        .queue_max(4 * 1024 * 1024, 4096);
    w.connect((client, PortId(0)), (server, PortId(0)), link_cfg)
        .map_err(|e| e.to_string())?;
    w.run_until_idle_checked(50_000_000, |w| check(w, client, server))
        .map_err(|e| format!("{context}: {e}"))?;
    one_owner_each(&w, server, &mut Owners::default()).map_err(|e| format!("{context}: {e}"))?;
    let c = w
        .host::<ShardedHost<MigrateClient>>(client)
        .ok_or("client host missing")?
        .app();
    let s = w
        .host::<ShardedHost<MigrateServer>>(server)
        .ok_or("server host missing")?;
    let unfinished: usize = s.shards().iter().map(|sh| sh.app().flows.len()).sum();
    if !c.flows.is_empty() || unfinished > 0 || c.summary.connections_failed > 0 {
        return Err(format!(
            "{context}: {} client and {unfinished} server connections unfinished, {} failed",
            c.flows.len(),
            c.summary.connections_failed
        ));
    }
    if std::env::var_os("SIM_DEBUG").is_some() {
        for sh in s.shards() {
            let k = sh.stack().counters();
            let t = sh.stack().tcp_counters();
            eprintln!(
                "shard {}: {:?} drop_moved {} fwd {} fwd_full {} tcp {:?}",
                sh.info().shard,
                sh.move_counters(),
                k.tcp_drop_moved,
                k.tcp_moved_forwarded,
                k.tcp_moved_forward_full,
                t
            );
        }
        eprintln!(
            "client tcp {:?}",
            w.host::<ShardedHost<MigrateClient>>(client)
                .map(|h| h.stack().tcp_counters())
        );
    }
    let report = s.rebalance_report().ok_or("no rebalancer")?;
    let server_bytes: u64 = s
        .shards()
        .iter()
        .map(|sh| sh.app().summary.bytes_verified)
        .sum();
    Ok(SkewOutcome {
        imbalance: report.imbalance.clone(),
        moves_planned: report.moves_planned,
        migrations: s
            .shards()
            .iter()
            .map(|sh| sh.move_counters().conns_in)
            .sum(),
        bytes_verified: c.summary.bytes_verified + server_bytes,
        trace_digest: w.digest(),
    })
}
