//! The `offload` soak workload: TCP offload by connection handoff under load and faults
//! (seed 002; DESIGN "Handoff engine").
//!
//! The `migrate` workload's client opens dozens of connections to a one-shard server that has
//! an offload engine ([`ShardedHost::with_engine`]); each carries its own pattern stream both
//! ways. Between steps of random length the harness picks a few of the server's connections
//! at random and hands each to the engine ([`ShardedHost::offload_conn`]) or asks it back
//! ([`ShardedHost::restore_conn`]) — mid-transfer, during loss recovery, with data queued both
//! ways, during the close — under the seed's loss, reordering, duplication, corruption or
//! link flap. The engine also returns connections by itself (TIME_WAIT; buffer memory, which
//! is kept small so exhaustion happens). The server application never knows: it keeps its
//! handles and calls.
//!
//! Checked: every byte of every stream arrives once and in order (the pattern checkers); no
//! connection is ever reset (a frame caught mid-move is forwarded or dropped, never refused);
//! no connection is live on the host and on the engine at once (DESIGN invariant 1, between
//! steps); the conversation checkers on both sides refused nothing and every restore fitted
//! what the host kept (invariants 2, 8); every connection completes.

use super::migrate::{MigrateClient, MigrateServer, Sizing, reset_violation};
use super::owners::Owners;
use super::{CLIENT_IP, FaultProfile, RunSummary, SERVER_IP, Workload, stack_config};
use crate::net::{ShardedHost, ShardedHostConfig};
use crate::rng::SimRng;
use crate::{HostId, World};
use app::App;
use shard::handoff::Limits;

use offload::{EngineConfig, HostConfig};

/// What one `offload` seed did, beyond the common summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadStats {
    /// Handoffs the engine accepted, and the connections it gave back (all causes).
    pub handoffs: u64,
    pub restores: u64,
    /// Restores by cause: asked by the host, TIME_WAIT, buffer memory exhaustion.
    pub restores_requested: u64,
    pub restores_time_wait: u64,
    pub restores_exhaustion: u64,
    /// Handoffs the engine refused (the host kept the connection).
    pub refused: u64,
    /// Frames forwarded by the host to the engine after a handoff.
    pub frames_forwarded: u64,
    /// Connections the engine freed itself (their close finished there).
    pub deallocated: u64,
}

impl OffloadStats {
    /// Handoffs plus restores.
    pub fn moves(&self) -> u64 {
        self.handoffs + self.restores
    }
}

/// The owners [`one_owner_each`] tells apart.
const OWNER_HOST: u16 = 0;
const OWNER_ENGINE: u16 = 1;

type Client = ShardedHost<MigrateClient>;
type Server = ShardedHost<MigrateServer>;

/// Runs one `offload` seed.
pub fn run(seed: u64) -> Result<(RunSummary, OffloadStats), String> {
    let faults = FaultProfile::for_seed(seed);
    let context = format!("offload seed {seed} ({faults:?})");
    let mut rng = SimRng::new(seed).fork(0x00ff_10ad);
    let mut w = World::new(seed);
    let client_app = MigrateClient {
        seed,
        sizing: Sizing::random(seed),
        fixed_ports: Vec::new(),
        total: 16 + rng.gen_range(0..32),
        at_once: 4 + rng.gen_range(0..20) as usize,
        opened: 0,
        flows: Vec::new(),
        scratch: vec![0; super::flow::CHUNK_BYTES],
        violation: None,
        summary: RunSummary::default(),
    };
    let total = client_app.total;
    let client = w.add_host(Box::new(ShardedHost::single(
        stack_config([2, 0, 0, 0, 0, 1], CLIENT_IP, seed, Workload::Offload),
        client_app,
    )));
    let server_cfg = ShardedHostConfig::new(stack_config(
        [2, 0, 0, 0, 0, 2],
        SERVER_IP,
        seed,
        Workload::Offload,
    ));
    // Small buffer memory (a few connections' worth) so the engine runs short and restores.
    let limits = Limits {
        buffer_bytes_max: 256 * 1024 + rng.gen_range(0..512 * 1024),
        ..Limits::default()
    };
    let server_host = ShardedHost::new(server_cfg, |_| MigrateServer::new(Sizing::random(seed)))?
        .with_engine(
        EngineConfig {
            limits,
            ..EngineConfig::default()
        },
        HostConfig {
            limits,
            // The engine never fails here: the heartbeat watch must never fire.
            engine_timeout_ns: u64::MAX / 4,
            ..HostConfig::default()
        },
    )?;
    let server = w.add_host(Box::new(server_host));
    super::connect_faulty(&mut w, client, server, &faults)?;

    let mut events: u64 = 0;
    let mut owners = Owners::default();
    for _ in 0..20_000 {
        let step_ns = 20_000 + rng.gen_range(0..1_000_000);
        let until = w.now_ns().saturating_add(step_ns);
        events += w
            .run_until_checked(until, 2_000_000, |w| check(w, client, server))
            .map_err(|e| format!("{context}: {e}"))?;
        one_owner_each(&w, server, &mut owners).map_err(|e| format!("{context}: {e}"))?;
        let client_done = w
            .host::<Client>(client)
            .ok_or("client host missing")?
            .app()
            .done();
        if client_done || w.next_event_ns().is_none() {
            break;
        }
        let now = w.now_ns();
        let host = w.host_mut::<Server>(server).ok_or("server host missing")?;
        let handles: Vec<_> = host.app().flows.iter().map(|(_, f)| f.handle).collect();
        if handles.is_empty() {
            continue;
        }
        let picks = 1 + rng.gen_range(0..4);
        for _ in 0..picks {
            let h = handles[rng.gen_range(0..handles.len() as u64) as usize];
            if host.stack().tcp_offloaded(h) {
                host.restore_conn(h);
            } else {
                host.offload_conn(now, h);
            }
        }
        w.wake(server);
    }
    events += w
        .run_until_idle_checked(20_000_000, |w| check(w, client, server))
        .map_err(|e| format!("{context}: {e}"))?;
    one_owner_each(&w, server, &mut owners).map_err(|e| format!("{context}: {e}"))?;

    let c = w.host::<Client>(client).ok_or("client host missing")?.app();
    let s = w.host::<Server>(server).ok_or("server host missing")?;
    let off = s.offload_host().ok_or("no offload layer")?;
    let engine = s.engine().ok_or("no engine")?;
    let hc = *off.counters();
    let ec = *engine.counters();
    let stats = OffloadStats {
        handoffs: hc.handoffs_accepted,
        restores: hc.restored_requested
            + hc.restored_time_wait
            + hc.restored_exhaustion
            + hc.restored_other,
        restores_requested: hc.restored_requested,
        restores_time_wait: hc.restored_time_wait,
        restores_exhaustion: hc.restored_exhaustion,
        refused: hc.handoffs_refused,
        frames_forwarded: hc.frames_forwarded,
        deallocated: hc.deallocated,
    };
    // Invariants of the conversation and the restores (DESIGN handoff 2, 8, 9).
    let refused_cmds = hc.engine_cmds_refused + hc.host_cmds_refused + ec.engine_cmds_refused;
    if refused_cmds > 0 || hc.restore_failed > 0 || hc.connections_lost > 0 {
        return Err(format!(
            "{context}: commands refused {refused_cmds} (host layer: {} engine commands, {} of its own; engine: {} host commands, {} of its own; host checker {:?}; engine checker {:?}), restores failed {}, lost {}",
            hc.engine_cmds_refused,
            hc.host_cmds_refused,
            ec.host_cmds_refused,
            ec.engine_cmds_refused,
            off.conversation().counters().refused,
            engine.conversation().counters().refused,
            hc.restore_failed,
            hc.connections_lost
        ));
    }
    let mismatch = s.stack().counters().tcp_bypass_restore_mismatch;
    if mismatch > 0 {
        return Err(format!("{context}: {mismatch} restores did not fit"));
    }
    let app = s.app();
    if !c.flows.is_empty() || !app.flows.is_empty() || c.opened != total {
        return Err(format!(
            "{context}: idle with {} client and {} server connections unfinished, {} of {total} opened; {stats:?}",
            c.flows.len(),
            app.flows.len(),
            c.opened
        ));
    }
    if engine.connections() != 0 || off.offloaded() != 0 {
        return Err(format!(
            "{context}: idle with {} connections on the engine, {} offloaded on the host",
            engine.connections(),
            off.offloaded()
        ));
    }
    if c.summary.connections_failed > 0 || app.summary.connections_failed > 0 {
        return Err(format!(
            "{context}: {} client and {} server connections failed; first: {:?}",
            c.summary.connections_failed, app.summary.connections_failed, c.summary.first_error
        ));
    }
    let summary = RunSummary {
        bytes_verified: c.summary.bytes_verified + app.summary.bytes_verified,
        connections_completed: c.summary.connections_completed,
        connections_failed: c.summary.connections_failed,
        sim_time_ns: w.now_ns(),
        events,
        first_error: c.summary.first_error.clone(),
        moves: stats.moves(),
        frames_dropped_in_flight: 0,
        trace_digest: w.digest(),
        frames_delivered: w.counters().deliveries,
        server_accepted_per_shard: vec![s.stack().counters().tcp_connections_established],
    };
    Ok((summary, stats))
}

/// The applications' violations (a reset is one: nothing here may refuse a segment).
fn check(w: &World, client: HostId, server: HostId) -> Result<(), String> {
    let c = w.host::<Client>(client).ok_or("client host missing")?;
    if let Some(v) = &c.app().violation {
        return Err(format!("client: {v}"));
    }
    let s = w.host::<Server>(server).ok_or("server host missing")?;
    if let Some(v) = &s.app().violation {
        return Err(format!("server: {v}"));
    }
    if let Some(v) = reset_violation(&s.app().flows, "server") {
        return Err(v);
    }
    Ok(())
}

/// No connection is live on the host and on the engine at once (DESIGN handoff invariant 1).
fn one_owner_each(w: &World, server: HostId, owners: &mut Owners) -> Result<(), String> {
    let s = w.host::<Server>(server).ok_or("server host missing")?;
    owners.entries.clear();
    s.stack().tcp_live_tuples(&mut owners.one);
    let host_n = owners.one.len();
    owners.take_one(OWNER_HOST);
    if let Some(e) = s.engine() {
        e.stack().tcp_live_tuples(&mut owners.one);
        owners.take_one(OWNER_ENGINE);
    }
    match owners.find_shared() {
        Some((t, _, _)) => Err(format!(
            "{t:?} is live on the host and on the engine at once ({host_n} on the host)"
        )),
        None => Ok(()),
    }
}
