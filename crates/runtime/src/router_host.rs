//! Running a router ([`crate::router`]): on live ports ([`run_router`]: TAP, AF_PACKET,
//! AF_XDP, one per router port) or in process between two hosts on the `mem` wire
//! ([`run_routed_pair`]: client host ↔ router port 0, router port 1 ↔ server host, each link
//! its own wire thread).
//!
//! Every port is opened with one queue per shard (AF_PACKET: one fanout group per port; TAP
//! and AF_XDP: `queues` queues, the shards beyond them transmit only; `mem`: the wire's RSS
//! over the router's shards), and shard `i` gets queue `i` of every port.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use app::{App, ShardInfo};
use forward::Counters;

use crate::host::{HostLimits, LiveIo, open_ports_in_group};
use crate::io::MemIo;
use crate::live::ShardSnapshot;
use crate::ring::ring;
use crate::router::{
    RouterConfig, RouterIo, RouterLive, RouterShard, RouterShardReport, RouterSnapshot, ShardWiring,
};
use crate::wire::{Wire, WireConfig, WirePort, WireReport};
use crate::{
    HostConfig, HostReport, RunLimits, RuntimeError, join_all, spawn_host, start_all, steering_nic,
};

/// What the monitor of [`run_router`] sees.
#[derive(Debug, Clone)]
pub struct RouterView {
    pub elapsed: Duration,
    /// Every shard is running its loop.
    pub ready: bool,
    pub shards: Vec<RouterSnapshot>,
}

impl RouterView {
    /// The shards' figures summed.
    pub fn total(&self) -> RouterSnapshot {
        let mut t = RouterSnapshot {
            started: self.ready,
            ..RouterSnapshot::default()
        };
        for s in &self.shards {
            t.rx_frames += s.rx_frames;
            t.forwarded += s.forwarded;
            t.local += s.local;
            t.drops += s.drops;
            t.icmp_sent += s.icmp_sent;
            t.tx_frames += s.tx_frames;
        }
        t
    }
}

/// What a router did.
#[derive(Debug, Clone, Default)]
pub struct RouterReport {
    /// One per shard, in shard order.
    pub shards: Vec<RouterShardReport>,
    pub elapsed: Duration,
    /// Every AF_XDP socket ran zero-copy.
    pub zero_copy: bool,
}

impl RouterReport {
    /// The forwarders' counters summed over the shards.
    pub fn forward(&self) -> Counters {
        let mut c = Counters::default();
        for s in &self.shards {
            c.add(&s.forward);
        }
        c
    }

    /// Frames lost outside the forwarder's verdicts: NIC queue drops (ring full, malformed,
    /// oversize), port drops (kernel, truncation, send errors), full backlogs, neighbour
    /// copies that found a ring full.
    pub fn drops_io(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                s.neighbour_copy_drop_ring_full
                    + s.ports
                        .iter()
                        .map(|p| p.nic.rx_drops() + p.port.drops() + p.tx_drop_backlog_full)
                        .sum::<u64>()
            })
            .sum()
    }

    /// The OS ports' counters summed over shards and ports.
    pub fn port_totals(&self) -> crate::io::PortCounters {
        let mut t = crate::io::PortCounters::default();
        for p in self.shards.iter().flat_map(|s| &s.ports) {
            t.add(&p.port);
        }
        t
    }

    /// Frames dropped because a port's transmit backlog was full, summed.
    pub fn tx_drop_backlog_full(&self) -> u64 {
        self.shards
            .iter()
            .flat_map(|s| &s.ports)
            .map(|p| p.tx_drop_backlog_full)
            .sum()
    }

    /// Frames sent by the ports, forwarded and the stacks' own.
    pub fn tx_frames(&self) -> (u64, u64) {
        let mut t = (0, 0);
        for p in self.shards.iter().flat_map(|s| &s.ports) {
            t.0 += p.tx_forwarded;
            t.1 += p.tx_local;
        }
        t
    }

    /// What the ports' stacks did for the router itself, summed: (ARP requests answered, ARP
    /// requests sent, ND solicitations answered and sent, ICMP echo replies sent).
    pub fn local_service(&self) -> LocalService {
        let mut l = LocalService::default();
        for p in self.shards.iter().flat_map(|s| &s.ports) {
            let c = &p.stack;
            l.arp_requests_answered += c.arp_requests_answered;
            l.arp_requests_sent += c.arp_requests_sent;
            l.nd_solicits_answered += c.nd_solicits_answered;
            l.nd_solicits_sent += c.nd_solicits_sent;
            l.echo_replies_sent += c.icmp_echo_replies_sent;
            l.resolution_failed += c.arp_resolution_failed + c.nd_resolution_failed;
        }
        l
    }
}

/// What the router's own stacks did (see [`RouterReport::local_service`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalService {
    pub arp_requests_answered: u64,
    pub arp_requests_sent: u64,
    pub nd_solicits_answered: u64,
    pub nd_solicits_sent: u64,
    pub echo_replies_sent: u64,
    /// Neighbours that never answered.
    pub resolution_failed: u64,
}

/// A router's AF_PACKET sockets: TPACKET_V2 (each frame handed over at once) with 2 KiB
/// slots — a router forwards frames of at most the MTU, never a host's 64 KiB GSO
/// super-frames, so one 16 MiB ring holds 8,192 frames (a host's ring, sized for super-frames,
/// holds 240: a burst of small frames overflows it) — and the qdisc bypassed on transmit,
/// through a TPACKET_V2 transmit ring of the same slots ([`ROUTER_TX_BLOCKS`] blocks: 2,048
/// slots of 2 KiB), kicked once per turn: one `send(2)` per burst instead of one per frame.
fn router_af_packet(cfg: &RouterConfig) -> platform::af_packet::AfPacketConfig {
    let frame_max = cfg
        .ports
        .iter()
        .map(|p| usize::from(p.mtu_bytes))
        .max()
        .unwrap_or(1500);
    let slot = (frame_max + 18 + platform::af_packet::V2_FRAME_OFFSET_BYTES as usize)
        .next_power_of_two()
        .max(2048) as u32;
    platform::af_packet::AfPacketConfig {
        ring: platform::af_packet::RingVersion::V2,
        block_size_bytes: (1 << 20).max(slot),
        block_count: 16,
        frame_size_bytes: slot,
        retire_timeout_ms: 1,
        fanout: None,
        qdisc_bypass: true,
        ignore_outgoing: true,
        vnet_hdr: false,
        tx_block_count: if cfg.af_packet_tx_ring {
            ROUTER_TX_BLOCKS
        } else {
            0
        },
    }
}

/// Blocks of a router AF_PACKET socket's transmit ring (1 MiB each at the standard MTU).
const ROUTER_TX_BLOCKS: u32 = 4;

type RouterHandle = JoinHandle<Result<RouterShardReport, RuntimeError>>;

/// Starts one thread per shard, each given one port I/O per router port
/// (`per_shard[i][p]`), with neighbour-copy rings between shards when `copy`.
fn spawn_router<I: RouterIo + 'static>(
    cfg: &Arc<RouterConfig>,
    per_shard: Vec<Vec<I>>,
    copy: bool,
    stop: &Arc<AtomicBool>,
    epoch: Instant,
    threads: Option<Arc<Vec<OnceLock<Thread>>>>,
) -> Result<(Vec<RouterHandle>, Vec<Arc<RouterLive>>), RuntimeError> {
    let s = per_shard.len();
    let mut outs: Vec<Vec<_>> = (0..s).map(|_| Vec::new()).collect();
    let mut ins: Vec<Vec<_>> = (0..s).map(|_| Vec::new()).collect();
    if copy && s > 1 {
        for (from, out) in outs.iter_mut().enumerate() {
            for (to, inn) in ins.iter_mut().enumerate() {
                if from != to {
                    let (p, c) = ring(cfg.neighbour_ring_slots);
                    out.push(p);
                    inn.push(c);
                }
            }
        }
    }
    let mut handles = Vec::with_capacity(s);
    let mut lives = Vec::with_capacity(s);
    for (i, ((ios, copy_out), copy_in)) in per_shard.into_iter().zip(outs).zip(ins).enumerate() {
        let live = Arc::new(RouterLive::default());
        lives.push(live.clone());
        let shard = u16::try_from(i).map_err(|_| RuntimeError::Config("shards".into()))?;
        let wiring = ShardWiring {
            shard,
            ios,
            copy_out,
            copy_in,
            live,
            stop: stop.clone(),
            epoch,
        };
        let (cfg, threads) = (cfg.clone(), threads.clone());
        let h = std::thread::Builder::new()
            .name(format!("router-shard{i}"))
            .spawn(move || {
                if let Some(t) = threads.as_ref().and_then(|t| t.get(i)) {
                    let _ = t.set(std::thread::current());
                }
                Ok(RouterShard::build(&cfg, wiring)?.run())
            })
            .map_err(|e| RuntimeError::Thread(e.to_string()))?;
        handles.push(h);
    }
    Ok((handles, lives))
}

fn join_router(handles: Vec<RouterHandle>) -> Result<Vec<RouterShardReport>, RuntimeError> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        h.thread().unpark();
        out.push(
            h.join()
                .map_err(|_| RuntimeError::Thread("a router shard panicked".into()))??,
        );
    }
    Ok(out)
}

/// Runs a router over live ports, `ios[p]` being port `p` (`cfg.ports[p]` its addresses),
/// until `stop` is set or `limits.duration` passes; calls `monitor` every
/// `limits.monitor_every`. Ports close (an XDP program detaches) after the shards stopped.
pub fn run_router(
    cfg: &RouterConfig,
    ios: &[LiveIo],
    limits: HostLimits,
    stop: Arc<AtomicBool>,
    mut monitor: impl FnMut(&RouterView),
) -> Result<RouterReport, RuntimeError> {
    cfg.validate()?;
    if ios.len() != cfg.ports.len() {
        return Err(RuntimeError::Config(format!(
            "{} ports for {} interfaces",
            ios.len(),
            cfg.ports.len()
        )));
    }
    let s = usize::from(cfg.shards);
    let group_base = (std::process::id() & 0xffff) as u16;
    let mut per_shard: Vec<Vec<_>> = (0..s).map(|_| Vec::new()).collect();
    let mut xdp = Vec::new();
    let mut zero_copy = true;
    let mut any_xdp = false;
    for (i, io) in ios.iter().enumerate() {
        if matches!(io, LiveIo::PcapIn { .. }) {
            return Err(RuntimeError::Config(
                "a router port must be an interface (tap, af_packet, af_xdp)".into(),
            ));
        }
        let mut hc = HostConfig::new(cfg.ports[i].clone(), cfg.shards);
        hc.queues = match io {
            LiveIo::Tap { queues, .. } | LiveIo::AfXdp { queues, .. } => {
                (*queues).clamp(1, cfg.shards)
            }
            _ => cfg.shards,
        };
        hc.nic = cfg.nic_config();
        let group = group_base.wrapping_add(i as u16);
        let opened = open_ports_in_group(&hc, io, &None, group, Some(router_af_packet(cfg)))?;
        if matches!(io, LiveIo::AfXdp { .. }) {
            any_xdp = true;
            zero_copy &= opened.zero_copy;
        }
        xdp.push(opened.xdp);
        for (shard, port) in per_shard.iter_mut().zip(opened.ports) {
            shard.push(port);
        }
    }
    let epoch = Instant::now();
    let cfg = Arc::new(cfg.clone());
    let (handles, lives) = spawn_router(&cfg, per_shard, true, &stop, epoch, None)?;
    loop {
        let step = limits.monitor_every.max(Duration::from_millis(1));
        let step = match limits.duration {
            Some(d) => step.min(d.saturating_sub(epoch.elapsed())),
            None => step,
        };
        std::thread::sleep(step);
        let shards: Vec<RouterSnapshot> = lives.iter().map(|l| l.snapshot()).collect();
        let view = RouterView {
            elapsed: epoch.elapsed(),
            ready: shards.iter().all(|s| s.started),
            shards,
        };
        monitor(&view);
        let finished = handles.iter().any(|h| h.is_finished());
        if stop.load(Ordering::Acquire)
            || finished
            || limits.duration.is_some_and(|d| epoch.elapsed() >= d)
        {
            break;
        }
    }
    stop.store(true, Ordering::Release);
    let elapsed = epoch.elapsed();
    let shards = join_router(handles)?;
    drop(xdp);
    Ok(RouterReport {
        shards,
        elapsed,
        zero_copy: any_xdp && zero_copy,
    })
}

/// What the monitor of [`run_routed_pair`] sees.
#[derive(Debug, Clone)]
pub struct RoutedView {
    pub elapsed: Duration,
    pub client: Vec<ShardSnapshot>,
    pub server: Vec<ShardSnapshot>,
    pub router: Vec<RouterSnapshot>,
}

/// The outcome of [`run_routed_pair`].
#[derive(Debug)]
pub struct RoutedReport<S, C> {
    pub server: HostReport<S>,
    pub client: HostReport<C>,
    pub router: RouterReport,
    /// Wire 0: client ↔ router port 0 (direction 0 client → router); wire 1: router port 1
    /// ↔ server (direction 0 router → server).
    pub wires: [WireReport; 2],
    pub elapsed: Duration,
}

/// Router port `p` as a host on a `mem` wire: the wire's view (steering over the router's
/// shards) and one [`MemIo`] per shard.
fn router_mem_port(
    cfg: &RouterConfig,
    p: usize,
    threads: &Arc<Vec<OnceLock<Thread>>>,
    wire_thread: &Arc<OnceLock<Thread>>,
) -> Result<(WirePort, Vec<MemIo>), RuntimeError> {
    let mut hc = HostConfig::new(cfg.ports[p].clone(), cfg.shards);
    hc.nic = cfg.nic_config();
    let s = usize::from(cfg.shards);
    let mut port = WirePort {
        shards: Vec::with_capacity(s),
        steering: steering_nic(&hc)?,
        threads: threads.clone(),
        controls: Vec::new(),
        rebalancer: None,
        steer: None,
        engine_queue: None,
        installed: None,
    };
    let rx_buf_bytes = usize::from(cfg.ports[p].mtu_bytes) + 18;
    let slots = cfg.wire_ring_slots;
    let mut ios = Vec::with_capacity(s);
    for _ in 0..s {
        let (wire_end, io) = MemIo::with_wire_end(slots, rx_buf_bytes, wire_thread);
        port.shards.push(wire_end);
        ios.push(io);
    }
    Ok((port, ios))
}

/// Runs a client host and a server host on different subnets with a two-port router between
/// them, all in process: client ↔ router port 0 and router port 1 ↔ server are two `mem`
/// wires. The hosts' `gateway_v4`/`gateway_v6` should name the router's port addresses.
/// Stops as [`crate::run_pair_until`] does (duration, client done, or `monitor` breaks).
// `run_pair_until`'s seven arguments and the router.
#[allow(clippy::too_many_arguments)]
pub fn run_routed_pair<S, C, FS, FC>(
    router: &RouterConfig,
    client: &HostConfig,
    client_app: FC,
    server: &HostConfig,
    server_app: FS,
    wire: WireConfig,
    limits: RunLimits,
    mut monitor: impl FnMut(&RoutedView) -> ControlFlow<()>,
) -> Result<RoutedReport<S, C>, RuntimeError>
where
    S: App + Send + 'static,
    C: App + Send + 'static,
    FS: Fn(ShardInfo) -> S + Send + Sync + 'static,
    FC: Fn(ShardInfo) -> C + Send + Sync + 'static,
{
    router.validate()?;
    if router.ports.len() != 2 {
        return Err(RuntimeError::Config(
            "an in-process router has exactly two ports".into(),
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let wire_slots: [Arc<OnceLock<Thread>>; 2] = [Arc::default(), Arc::default()];
    if client.offload.is_some() || server.offload.is_some() {
        return Err(RuntimeError::Config(
            "an offload engine is not supported behind the in-process router".into(),
        ));
    }
    let (cport, cstart, clive, _) = spawn_host(
        client,
        "client",
        Arc::new(client_app),
        &stop,
        epoch,
        &wire_slots[0],
    )?;
    let (sport, sstart, slive, _) = spawn_host(
        server,
        "server",
        Arc::new(server_app),
        &stop,
        epoch,
        &wire_slots[1],
    )?;
    let s = usize::from(router.shards);
    let rthreads: Arc<Vec<OnceLock<Thread>>> = Arc::new((0..s).map(|_| OnceLock::new()).collect());
    let (r0, ios0) = router_mem_port(router, 0, &rthreads, &wire_slots[0])?;
    let (r1, ios1) = router_mem_port(router, 1, &rthreads, &wire_slots[1])?;
    let per_shard: Vec<Vec<MemIo>> = ios0
        .into_iter()
        .zip(ios1)
        .map(|(a, b)| vec![a, b])
        .collect();
    let mut wires = Vec::with_capacity(2);
    for (k, ports) in [[cport, r0], [r1, sport]].into_iter().enumerate() {
        let w = Wire::new(wire, ports, stop.clone(), epoch);
        let h = std::thread::Builder::new()
            .name(format!("mem-wire{k}"))
            .spawn(move || w.run())
            .map_err(|e| RuntimeError::Thread(e.to_string()))?;
        let _ = wire_slots[k].set(h.thread().clone());
        wires.push(h);
    }
    let cfg = Arc::new(router.clone());
    let mut err = None;
    let (rhandles, rlives) =
        match spawn_router(&cfg, per_shard, false, &stop, epoch, Some(rthreads)) {
            Ok(x) => x,
            Err(e) => {
                err = Some(e);
                (Vec::new(), Vec::new())
            }
        };
    let shandles = start_all(sstart, &mut err);
    let chandles = start_all(cstart, &mut err);
    if err.is_none() {
        loop {
            let step = limits.monitor_every.max(Duration::from_millis(1));
            let left = limits.duration.saturating_sub(epoch.elapsed());
            std::thread::sleep(step.min(left));
            let view = RoutedView {
                elapsed: epoch.elapsed(),
                client: clive.iter().map(|l| l.snapshot()).collect(),
                server: slive.iter().map(|l| l.snapshot()).collect(),
                router: rlives.iter().map(|l| l.snapshot()).collect(),
            };
            let brk = monitor(&view).is_break();
            let client_done = view.client.iter().all(|s| s.done);
            if brk
                || epoch.elapsed() >= limits.duration
                || (limits.stop_when_client_done && client_done)
                || rhandles.iter().any(|h| h.is_finished())
            {
                break;
            }
        }
    }
    stop.store(true, Ordering::Release);
    let elapsed = epoch.elapsed();
    for w in &wires {
        w.thread().unpark();
    }
    let server_shards = join_all(shandles)?;
    let client_shards = join_all(chandles)?;
    let router_shards = join_router(rhandles)?;
    let mut reports = [WireReport::default(); 2];
    for (r, h) in reports.iter_mut().zip(wires) {
        (*r, _, _) = h
            .join()
            .map_err(|_| RuntimeError::Thread("a wire panicked".into()))?;
    }
    if let Some(e) = err {
        return Err(e);
    }
    Ok(RoutedReport {
        server: HostReport::from_shards(server_shards, None),
        client: HostReport::from_shards(client_shards, None),
        router: RouterReport {
            shards: router_shards,
            elapsed,
            zero_copy: false,
        },
        wires: reports,
        elapsed,
    })
}
