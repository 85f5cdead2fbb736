//! `rsstack demo`: the embedded default. A server host with S shards serves HTTP/1.1 to a
//! client host with K keep-alive connections over the in-process `mem` wire, on real
//! threads, with no root and no network.
//!
//! While it runs, stderr shows a progress bar and one line per server shard (packets,
//! connections, busy share, packets per wake-up) when stderr is a terminal and `--json` is
//! off. At the end stdout gets a summary table, or with `--json` one JSON object.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use apps::http::{FILESET_BYTES_MAX, FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use runtime::{HostConfig, LiveView, PairReport, RunLimits, WireConfig, run_pair};
use stack::{InterfaceConfig, Ipv4Cidr};
use wire::EthernetAddress;

use super::CliError;
use super::placement;
use topo::{Plan, Profile};

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const HTTP_PORT: u16 = 80;
/// Most `--connections`: the client has one address, so one connection per ephemeral port
/// of a 60,000-port range.
const CONNECTIONS_MAX: u64 = 60_000;
/// Longest `--duration`, seconds (one day).
const DURATION_MAX_SECS: f64 = 86_400.0;
/// Fastest `--rate-gbps`.
const RATE_GBPS_MAX: f64 = 10_000.0;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How long the client issues requests, in seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    duration: f64,
    /// Keep-alive connections the client keeps busy (one request outstanding on each):
    /// 1 to 60000, the ephemeral ports of the client's one address.
    #[arg(long, default_value_t = 64, value_name = "K",
          value_parser = clap::value_parser!(u64).range(1..=CONNECTIONS_MAX))]
    connections: u64,
    /// Server shards (threads): 1 to 128 (`nic::QUEUES_MAX`). Default: the number of cores.
    #[arg(long, value_name = "S",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(nic::QUEUES_MAX)))]
    shards: Option<u16>,
    /// Server hardware queues (1..=shards). Default: one per shard. Fewer queues than shards
    /// forward packets through counted cross-shard rings.
    #[arg(long, value_name = "Q",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(nic::QUEUES_MAX)))]
    queues: Option<u16>,
    /// Pin both hosts' RSS key (80 hex digits, `ethtool -x` form) instead of drawing one per
    /// host at random: the same steering on every run. A key given here counts as known, so
    /// the stacks hash each segment's 4-tuple again for their connection tables.
    #[arg(long = "rss-key", value_name = "HEX", value_parser = super::rss::parse_rss_key)]
    rss_key: Option<rss::RssKey>,
    /// Client shards: 1 to 128 (`nic::QUEUES_MAX`).
    #[arg(long, default_value_t = 1, value_name = "C",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(nic::QUEUES_MAX)))]
    client_shards: u16,
    /// Size of the page the client fetches, in bytes: at most 4 GiB
    /// (`apps::http::FILESET_BYTES_MAX`, the bound of the HTTP server's in-memory file set).
    #[arg(long, default_value_t = 1024, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(0..=FILESET_BYTES_MAX))]
    object_bytes: u64,
    /// Line rate of the in-memory wire in Gbit/s (default: unpaced).
    #[arg(long, value_name = "GBPS")]
    rate_gbps: Option<f64>,
    /// Do not pin server shards to cores.
    #[arg(long, conflicts_with = "placement")]
    no_pin: bool,
    /// Place the server's shards with a placement policy (closest, closest-static, numa,
    /// numa-static, conservative, cache, spread; see `rsstack topo`): each shard is pinned to
    /// the plan's CPU and reports (and on a multi-node machine prefers the memory of) the
    /// plan's node. Default: shard i on core i.
    #[arg(long, value_name = "POLICY", value_parser = super::topo::parse_profile)]
    placement: Option<Profile>,
    /// The NIC whose locality the placement plans for (the mem wire has none of its own).
    #[arg(long, value_name = "IF", requires = "placement")]
    iface: Option<String>,
    /// Skewed load: add elephant connections that upload a large request body over and over
    /// (heavy on the server's receive path), all placed by the server's RSS on server shard 0
    /// (each in its own RETA bucket).
    #[arg(long)]
    skew: bool,
    /// Elephant connections with `--skew` (default: 4 per server shard).
    #[arg(long, value_name = "N", requires = "skew",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    elephants: Option<u64>,
    /// Request body of each elephant request, in bytes (with `--skew`).
    #[arg(long, default_value_t = 256 * 1024, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(1..=64 * 1024 * 1024))]
    elephant_bytes: u64,
    /// Live RSS rebalancing of the server: the RETA follows the load and the connections of a
    /// moved bucket migrate to their new shard.
    #[arg(long)]
    rebalance: bool,
    /// Rebalancing period, in milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    period_ms: u64,
    /// Interrupt moderation of the server's queues, like `ethtool -C`:
    /// `rx-usecs=N,rx-frames=N,adaptive-rx=on|off,lli=on|off,lli-ports=P+P` (default: adaptive,
    /// 10–125 µs; lli-ports wakes at once for packets to or from those ports).
    #[arg(long, value_name = "SETTINGS", value_parser = super::coalesce::parse_coalesce)]
    coalesce: Option<nic::ModerationConfig>,
    /// A flow steering rule for the server's NIC, like `ethtool -N` (repeatable; first match
    /// wins): e.g. 'proto tcp dst-port 80 queue 1' or 'proto tcp src-ip 10.0.0.2 drop'.
    #[arg(long = "filter", value_name = "RULE", value_parser = super::filter::parse_filter)]
    filter: Vec<rss::FlowRule>,
    #[command(flatten)]
    offload: super::demo_offload::OffloadArgs,
    /// Print the summary as one JSON object (and no live view).
    #[arg(long)]
    json: bool,
}

fn host(mac_last: u8, ip: Ipv4Addr, shards: u16) -> HostConfig {
    let iface = InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        Ipv4Cidr::new(ip, 24),
    );
    HostConfig::new(iface, shards)
}

/// The live view on stderr: a progress bar and one line per server shard.
struct Live {
    bars: Vec<ProgressBar>,
    total_ms: u64,
    /// Each server shard's packets at the previous update, for the imbalance of the last
    /// interval (the monitor runs on one thread; the cell only spares `update` a `&mut`).
    last_packets: std::cell::RefCell<Vec<u64>>,
}

impl Live {
    fn new(shards: u16, total: Duration, enabled: bool) -> Self {
        let target = if enabled {
            ProgressDrawTarget::stderr_with_hz(10)
        } else {
            ProgressDrawTarget::hidden()
        };
        let multi = MultiProgress::with_draw_target(target);
        let total_ms = u64::try_from(total.as_millis()).unwrap_or(u64::MAX).max(1);
        let main = multi.add(ProgressBar::new(total_ms));
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {percent:>3}% {msg}")
            .map(|s| s.progress_chars("=> "))
        {
            main.set_style(style);
        }
        let mut bars = vec![main];
        for _ in 0..shards {
            let b = multi.add(ProgressBar::new_spinner());
            if let Ok(style) = ProgressStyle::with_template("  {msg}") {
                b.set_style(style);
            }
            bars.push(b);
        }
        Live {
            bars,
            total_ms,
            last_packets: std::cell::RefCell::new(Vec::new()),
        }
    }

    fn update(&self, v: &LiveView) {
        let ms = u64::try_from(v.elapsed.as_millis()).unwrap_or(u64::MAX);
        let requests: u64 = v.client.iter().map(|s| s.progress).sum();
        let secs = v.elapsed.as_secs_f64().max(1e-9);
        // The imbalance of the last interval (busiest shard's packets over the mean): what
        // rebalancing changes over time.
        let now: Vec<u64> = v.server.iter().map(|s| s.rx_packets).collect();
        let mut last = self.last_packets.borrow_mut();
        let deltas: Vec<u64> = now
            .iter()
            .enumerate()
            .map(|(i, &n)| n.saturating_sub(last.get(i).copied().unwrap_or(0)))
            .collect();
        *last = now;
        if let Some(main) = self.bars.first() {
            main.set_position(ms.min(self.total_ms));
            main.set_message(format!(
                "{requests} requests, {:.0} req/s, imbalance now {:.2}",
                requests as f64 / secs,
                imbalance(&deltas)
            ));
        }
        for (i, (bar, s)) in self.bars.iter().skip(1).zip(&v.server).enumerate() {
            bar.set_message(format!(
                "shard {i:>2}: {:>10} pkts  {:>5} conns  busy {:>5.1}%  {:>6.1} pkts/wake-up  {:>8} served",
                s.rx_packets,
                s.connections,
                100.0 * s.busy_share(),
                s.packets_per_wakeup(),
                s.progress,
            ));
        }
    }

    fn finish(&self) {
        for b in &self.bars {
            b.finish_and_clear();
        }
    }
}

/// Refuses a page the machine cannot build: it is held twice while it is copied into the
/// shared file set, so `2 × object_bytes` must fit in `MemAvailable` of `meminfo` (the text of
/// `/proc/meminfo`; without that line nothing is refused).
fn check_page_memory(object_bytes: u64, meminfo: &str) -> Result<(), CliError> {
    let available = meminfo.lines().find_map(|l| {
        let kib = l.strip_prefix("MemAvailable:")?.trim().strip_suffix("kB")?;
        kib.trim().parse::<u64>().ok()?.checked_mul(1024)
    });
    match available {
        Some(avail) if object_bytes.saturating_mul(2) > avail => Err(CliError::Usage(format!(
            "--object-bytes {object_bytes} needs about {} bytes of memory while the page is \
                 built, more than the {avail} bytes available (MemAvailable)",
            object_bytes.saturating_mul(2)
        ))),
        _ => Ok(()),
    }
}

/// Largest over mean of `xs` (1.0 for a perfectly even spread; 0 when all are 0).
fn imbalance(xs: &[u64]) -> f64 {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<u64>() as f64 / n;
    let max = xs.iter().copied().max().unwrap_or(0) as f64;
    if mean == 0.0 { 0.0 } else { max / mean }
}

fn share(x: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        x as f64 / total as f64
    }
}

pub fn run(args: DemoArgs, out: &mut impl Write) -> Result<(), CliError> {
    if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= DURATION_MAX_SECS) {
        return Err(CliError::Usage(format!(
            "--duration must be in (0, {DURATION_MAX_SECS}] seconds"
        )));
    }
    if args.connections == 0 || args.connections > CONNECTIONS_MAX {
        return Err(CliError::Usage(format!(
            "--connections must be 1..={CONNECTIONS_MAX}"
        )));
    }
    // Refused up front rather than by the allocator: the page is built in memory, twice
    // while it is copied into the shared file set.
    let object_bytes = usize::try_from(args.object_bytes)
        .ok()
        .filter(|&b| b as u64 <= FILESET_BYTES_MAX)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--object-bytes must be at most {FILESET_BYTES_MAX} (4 GiB, the HTTP file set's \
                 in-memory bound)"
            ))
        })?;
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    check_page_memory(args.object_bytes, &meminfo)?;
    let cpus = platform::affinity::available_cpus();
    // With an offload engine the default leaves it a core of its own.
    let engine_cores = usize::from(args.offload.enabled());
    let shards = args.shards.unwrap_or_else(|| {
        u16::try_from(cpus.saturating_sub(engine_cores))
            .unwrap_or(1)
            .clamp(1, nic::QUEUES_MAX)
    });
    if shards == 0 || shards > nic::QUEUES_MAX {
        return Err(CliError::Usage(format!(
            "--shards must be 1..={}",
            nic::QUEUES_MAX
        )));
    }
    let queues = args.queues.unwrap_or(shards);
    if queues == 0 || queues > shards {
        return Err(CliError::Usage(format!(
            "--queues {queues} exceeds --shards {shards}: each queue needs a shard (1..=shards)"
        )));
    }
    if args.client_shards == 0 || args.client_shards > nic::QUEUES_MAX {
        return Err(CliError::Usage(format!(
            "--client-shards must be 1..={}",
            nic::QUEUES_MAX
        )));
    }
    let rate_bps = match args.rate_gbps {
        None => None,
        Some(g) if g.is_finite() && g > 0.0 && g <= RATE_GBPS_MAX => Some((g * 1e9) as u64),
        Some(_) => {
            return Err(CliError::Usage(format!(
                "--rate-gbps must be in (0, {RATE_GBPS_MAX}]"
            )));
        }
    };
    let duration = Duration::from_secs_f64(args.duration);

    let mut server = host(1, SERVER_IP, shards);
    if let Some(key) = &args.rss_key {
        server.pin_rss_key(key);
    }
    server.queues = queues;
    if let Some(m) = args.coalesce {
        server.nic.moderation = m;
    }
    server.rules = super::filter::rule_set(&args.filter, queues)?;
    super::filter::check_with_rebalance(&server.rules, args.rebalance || args.skew)?;
    if args.rebalance || args.skew {
        if queues != shards {
            return Err(CliError::Usage(format!(
                "--rebalance and --skew need one queue per shard (--queues {queues} < --shards {shards})"
            )));
        }
        let mut settings = runtime::RebalanceSettings {
            period: Duration::from_millis(args.period_ms),
            ..runtime::RebalanceSettings::default()
        };
        if !args.rebalance {
            // Measure the imbalance, move nothing.
            settings.config.moves_max = 0;
        }
        server.rebalance = Some(settings);
    }
    if args.offload.enabled() && (args.rebalance || args.skew || queues != shards) {
        return Err(CliError::Usage(
            "--offload needs one queue per shard and neither --skew nor --rebalance".into(),
        ));
    }
    // The engine's core: the one after the shards' (pinned runs only).
    let engine_core =
        (!args.no_pin && args.placement.is_none()).then(|| usize::from(shards) % cpus.max(1));
    server.offload = args.offload.settings(engine_core)?;
    let reconnect = args.offload.engine_fail_after.is_some();
    let fail_after = args.offload.engine_fail_after;
    let elephant_ports = if args.skew {
        let want = args.elephants.unwrap_or(4 * u64::from(shards)) as usize;
        let ports = super::skew::elephant_ports(
            &server.hasher,
            CLIENT_IP,
            SERVER_IP,
            HTTP_PORT,
            shards,
            want,
        );
        if ports.len() < want {
            return Err(CliError::Usage(format!(
                "--elephants {want}: only {} RETA buckets of server shard 0 are reachable from the client's ports",
                ports.len()
            )));
        }
        ports
    } else {
        Vec::new()
    };
    let plan = match args.placement {
        Some(profile) => Some(placement::place(
            &mut server,
            profile,
            args.iface.as_deref(),
        )?),
        None => {
            if !args.no_pin {
                server.cores = Some((0..cpus).collect());
            }
            None
        }
    };
    // Connections per client shard: K split as evenly as possible.
    let mut client = host(2, CLIENT_IP, args.client_shards);
    if let Some(key) = &args.rss_key {
        client.pin_rss_key(key);
    }
    let k = args.connections as usize;
    let cs = usize::from(args.client_shards);
    let files = Arc::new(FileSet::demo(object_bytes));
    let load = LoadConfig {
        server: SocketAddr::new(IpAddr::V4(SERVER_IP), HTTP_PORT),
        connections: 0,
        path: "/index.html".into(),
        requests_per_connection: None,
        elephant_ports: Vec::new(),
        elephant_body_bytes: usize::try_from(args.elephant_bytes).unwrap_or(usize::MAX),
    };
    let live = Live::new(
        shards,
        duration,
        !args.json && std::io::stderr().is_terminal(),
    );
    let requests_at_failure = std::cell::Cell::new(None::<u64>);
    let report = run_pair(
        &server,
        move |_| HttpServer::new(HTTP_PORT, files.clone()),
        &client,
        move |info| {
            let i = usize::from(info.shard);
            let mut cfg = load.clone();
            cfg.connections = k / cs + usize::from(i < k % cs);
            if i == 0 {
                cfg.elephant_ports = elephant_ports.clone();
            }
            let client = HttpLoadClient::new(cfg);
            if reconnect {
                client.with_reconnect()
            } else {
                client
            }
        },
        WireConfig {
            rate_bps,
            ..WireConfig::default()
        },
        RunLimits {
            duration,
            stop_when_client_done: false,
            monitor_every: Duration::from_millis(100),
        },
        |v| {
            live.update(v);
            // Requests served by then: the engine failed and the host noticed (heartbeat
            // time-out 100 ms) at least 0.25 s before.
            if let Some(t) = fail_after {
                if requests_at_failure.get().is_none() && v.elapsed.as_secs_f64() >= t + 0.25 {
                    requests_at_failure.set(Some(v.client.iter().map(|s| s.progress).sum()));
                }
            }
        },
    )
    .map_err(super::live::runtime_error)?;
    live.finish();
    let mut summary = Summary::of(&report, &args, shards, queues, plan.as_ref());
    summary.rebalance = super::skew::RebalanceSummary::of(&report, args.rebalance);
    summary.offload = super::demo_offload::OffloadSummary::of(&report, &args.offload);
    summary.requests_after_engine_failure = requests_at_failure
        .get()
        .map(|r| summary.requests.saturating_sub(r));
    summary.connections_reopened = report
        .client
        .shards
        .iter()
        .map(|s| s.app.stats().connections_reopened)
        .sum();
    if args.json {
        writeln!(out, "{}", summary.json())?;
    } else {
        summary.table(out)?;
        if !args.filter.is_empty() {
            super::filter::write_filter_summary(out, &report.server.filters)?;
        }
    }
    Ok(())
}

struct ShardLine {
    shard: u16,
    core: Option<usize>,
    numa_node: u16,
    /// What the shard did about node-local memory (`runtime::NodeMemory::name`).
    node_memory: &'static str,
    connections: u64,
    packets: u64,
    requests: u64,
    busy_share: f64,
    packets_per_wakeup: f64,
    /// NIC wake-ups (moderated interrupts) and idle sleeps of the shard loop.
    nic_wakeups: u64,
    sleeps: u64,
    cross_shard: u64,
}

struct Summary {
    elapsed_s: f64,
    shards: u16,
    queues: u16,
    connections: usize,
    requests: u64,
    body_bytes: u64,
    packets: u64,
    wire_bytes: u64,
    drops: u64,
    cross_shard: u64,
    failed: u64,
    per_shard: Vec<ShardLine>,
    /// The placement policy and the plan's `cpu/node` per shard, when `--placement` was given.
    placement: Option<(Profile, String)>,
    /// Request → response latency quantiles, ns.
    latency_ns_p50: u64,
    latency_ns_p99: u64,
    /// RSTs sent for segments of unknown connections (both hosts).
    resets_sent: u64,
    /// What the rebalancer did (`--rebalance`, or measured only with `--skew`).
    rebalance: Option<super::skew::RebalanceSummary>,
    /// The offload engine (`--offload`).
    offload: Option<super::demo_offload::OffloadSummary>,
    /// Requests completed after the engine failed and the host noticed
    /// (`--engine-fail-after`; `None` when the run ended before).
    requests_after_engine_failure: Option<u64>,
    /// Client connections opened to replace failed ones.
    connections_reopened: u64,
}

impl Summary {
    fn of(
        r: &PairReport<HttpServer, HttpLoadClient>,
        args: &DemoArgs,
        shards: u16,
        queues: u16,
        plan: Option<&Plan>,
    ) -> Self {
        let requests = r
            .client
            .shards
            .iter()
            .map(|s| s.app.stats().responses_ok + s.app.stats().responses_other)
            .sum();
        let body_bytes = r
            .client
            .shards
            .iter()
            .map(|s| s.app.stats().body_bytes)
            .sum();
        let failed = r
            .client
            .shards
            .iter()
            .map(|s| s.app.stats().connections_failed)
            .sum();
        let per_shard = r
            .server
            .shards
            .iter()
            .map(|s| ShardLine {
                shard: s.info.shard,
                core: s.core.filter(|_| !s.pin_failed),
                numa_node: s.info.numa_node,
                node_memory: s.node_memory.name(),
                connections: s.app.stats().connections_accepted,
                packets: s.rx_packets + s.tx_frames,
                requests: s.app.stats().requests,
                busy_share: if s.elapsed_ns == 0 {
                    0.0
                } else {
                    s.busy_ns as f64 / s.elapsed_ns as f64
                },
                packets_per_wakeup: s.nic.packets_per_wakeup(),
                nic_wakeups: s.nic.wakeups,
                sleeps: s.sleeps,
                cross_shard: s.cross_shard_tx,
            })
            .collect::<Vec<_>>();
        let mut latency = apps::load::LatencyHistogram::default();
        for s in &r.client.shards {
            latency.merge(&s.app.stats().latency);
        }
        let resets_sent = r
            .server
            .shards
            .iter()
            .map(|s| s.stack.tcp_rx_no_listener_rst_sent)
            .chain(
                r.client
                    .shards
                    .iter()
                    .map(|s| s.stack.tcp_rx_no_listener_rst_sent),
            )
            .sum();
        Summary {
            latency_ns_p50: latency.quantile_ns(0.5),
            latency_ns_p99: latency.quantile_ns(0.99),
            resets_sent,
            rebalance: None,
            offload: None,
            requests_after_engine_failure: None,
            connections_reopened: 0,
            elapsed_s: r.elapsed.as_secs_f64().max(1e-9),
            shards,
            queues,
            connections: args.connections as usize,
            requests,
            body_bytes,
            packets: r.wire.frames[0] + r.wire.frames[1],
            wire_bytes: r.wire.bytes[0] + r.wire.bytes[1],
            drops: r.server.drops() + r.client.drops() + r.wire.drops(),
            cross_shard: r.server.cross_shard_messages() + r.client.cross_shard_messages(),
            failed,
            per_shard,
            placement: plan.map(|p| (p.policy.profile, placement::shard_list(p))),
        }
    }

    fn imbalance_packets(&self) -> f64 {
        imbalance(&self.per_shard.iter().map(|s| s.packets).collect::<Vec<_>>())
    }

    fn imbalance_connections(&self) -> f64 {
        imbalance(
            &self
                .per_shard
                .iter()
                .map(|s| s.connections)
                .collect::<Vec<_>>(),
        )
    }

    fn cross_per_packet(&self) -> f64 {
        share(self.cross_shard, self.packets)
    }

    fn json(&self) -> serde_json::Value {
        let total_conns: u64 = self.per_shard.iter().map(|s| s.connections).sum();
        let total_pkts: u64 = self.per_shard.iter().map(|s| s.packets).sum();
        let per_shard: Vec<serde_json::Value> = self
            .per_shard
            .iter()
            .map(|s| {
                serde_json::json!({
                    "shard": s.shard,
                    "core": s.core,
                    "numa_node": s.numa_node,
                    "node_memory": s.node_memory,
                    "connections": s.connections,
                    "connection_share": share(s.connections, total_conns),
                    "packets": s.packets,
                    "packet_share": share(s.packets, total_pkts),
                    "requests": s.requests,
                    "busy_share": s.busy_share,
                    "packets_per_wakeup": s.packets_per_wakeup,
                    "nic_wakeups": s.nic_wakeups,
                    "idle_sleeps": s.sleeps,
                    "cross_shard_messages": s.cross_shard,
                })
            })
            .collect();
        serde_json::json!({
            "duration_s": self.elapsed_s,
            "shards": self.shards,
            "queues": self.queues,
            "connections": self.connections,
            "requests": self.requests,
            "requests_per_s": self.requests as f64 / self.elapsed_s,
            "throughput_bits_per_s": self.body_bytes as f64 * 8.0 / self.elapsed_s,
            "packets": self.packets,
            "packets_per_s": self.packets as f64 / self.elapsed_s,
            "wire_bytes": self.wire_bytes,
            "imbalance_max_over_mean": self.imbalance_packets(),
            "connection_imbalance_max_over_mean": self.imbalance_connections(),
            "drops": self.drops,
            "failed_connections": self.failed,
            "cross_shard_messages": self.cross_shard,
            "cross_shard_messages_per_packet": self.cross_per_packet(),
            "placement": self.placement.as_ref().map(|(p, _)| p.name()),
            "latency_ns_p50": self.latency_ns_p50,
            "latency_ns_p99": self.latency_ns_p99,
            "resets_sent": self.resets_sent,
            "rebalance": self.rebalance.as_ref().map(super::skew::RebalanceSummary::json),
            "offload": self.offload.as_ref().map(super::demo_offload::OffloadSummary::json),
            "requests_after_engine_failure": self.requests_after_engine_failure,
            "connections_reopened": self.connections_reopened,
            "per_shard": per_shard,
        })
    }

    fn table(&self, out: &mut impl Write) -> std::io::Result<()> {
        let s = self.elapsed_s;
        writeln!(
            out,
            "rsstack demo: {} server shards ({} queues), {} connections, {:.1} s on the mem wire",
            self.shards, self.queues, self.connections, s
        )?;
        if let Some((policy, shards)) = &self.placement {
            writeln!(out, "placement           {policy}: cpu/node {shards}")?;
        }
        writeln!(out, "requests            {:>14}", self.requests)?;
        writeln!(
            out,
            "requests/s          {:>14.0}",
            self.requests as f64 / s
        )?;
        writeln!(
            out,
            "throughput          {:>14.1} Mbit/s (HTTP bodies)",
            self.body_bytes as f64 * 8.0 / s / 1e6
        )?;
        writeln!(out, "packets/s           {:>14.0}", self.packets as f64 / s)?;
        writeln!(
            out,
            "imbalance (max/mean){:>14.3} packets, {:.3} connections",
            self.imbalance_packets(),
            self.imbalance_connections()
        )?;
        writeln!(
            out,
            "latency             {:>11.1} µs p50, {:.1} µs p99",
            self.latency_ns_p50 as f64 / 1e3,
            self.latency_ns_p99 as f64 / 1e3
        )?;
        writeln!(out, "drops               {:>14}", self.drops)?;
        writeln!(out, "resets sent         {:>14}", self.resets_sent)?;
        if let Some(rb) = &self.rebalance {
            rb.table(out)?;
        }
        if let Some(o) = &self.offload {
            o.table(out)?;
            if let Some(n) = self.requests_after_engine_failure {
                writeln!(
                    out,
                    "after the failure   {n:>14} requests, {} connections reopened",
                    self.connections_reopened
                )?;
            }
        }
        writeln!(
            out,
            "cross-shard msgs    {:>14} ({:.4} per packet)",
            self.cross_shard,
            self.cross_per_packet()
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "shard  core  node  conn-share  pkt-share      packets   busy  pkts/wake-up  cross-shard"
        )?;
        let total_conns: u64 = self.per_shard.iter().map(|s| s.connections).sum();
        let total_pkts: u64 = self.per_shard.iter().map(|s| s.packets).sum();
        for l in &self.per_shard {
            let core = l.core.map_or("-".to_string(), |c| c.to_string());
            writeln!(
                out,
                "{:>5}  {:>4}  {:>4}  {:>9.1}%  {:>8.1}%  {:>11}  {:>4.0}%  {:>12.1}  {:>11}",
                l.shard,
                core,
                l.numa_node,
                100.0 * share(l.connections, total_conns),
                100.0 * share(l.packets, total_pkts),
                l.packets,
                100.0 * l.busy_share,
                l.packets_per_wakeup,
                l.cross_shard
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: bool) -> DemoArgs {
        DemoArgs {
            duration: 0.3,
            connections: 8,
            shards: Some(2),
            queues: None,
            rss_key: None,
            client_shards: 1,
            object_bytes: 512,
            rate_gbps: None,
            no_pin: true,
            placement: None,
            iface: None,
            skew: false,
            elephants: None,
            elephant_bytes: 256 * 1024,
            rebalance: false,
            period_ms: 100,
            coalesce: None,
            filter: Vec::new(),
            offload: Default::default(),
            json,
        }
    }

    #[test]
    fn pages_that_do_not_fit_in_available_memory_are_refused() {
        let meminfo = "MemTotal:        8000000 kB\nMemAvailable:    1000000 kB\n";
        assert!(check_page_memory(500_000 * 1024, meminfo).is_ok());
        let err = check_page_memory(600_000 * 1024, meminfo).err();
        assert!(
            matches!(&err, Some(CliError::Usage(m)) if m.contains("1024000000 bytes available")),
            "{err:?}"
        );
        // No MemAvailable line (not Linux, or an old kernel): only the file-set bound applies.
        assert!(check_page_memory(FILESET_BYTES_MAX, "").is_ok());
    }

    #[test]
    fn json_summary_has_the_promised_fields_and_no_drops() {
        let mut out = Vec::new();
        run(args(true), &mut out).expect("demo runs");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(text.lines().count(), 1, "one JSON object on one line");
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        for key in [
            "requests",
            "requests_per_s",
            "imbalance_max_over_mean",
            "drops",
            "per_shard",
            "cross_shard_messages",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["drops"], 0);
        assert_eq!(v["cross_shard_messages"], 0);
        assert!(v["requests"].as_u64().is_some_and(|n| n > 0));
        assert_eq!(v["per_shard"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let mut a = args(false);
        a.queues = Some(3);
        assert!(matches!(run(a, &mut Vec::new()), Err(CliError::Usage(_))));
        let mut a = args(false);
        a.duration = 0.0;
        assert!(matches!(run(a, &mut Vec::new()), Err(CliError::Usage(_))));
    }

    #[test]
    fn cache_placement_pins_each_shard_to_the_planned_core_and_reports_its_node() {
        let topo = topo::Topology::discover(std::path::Path::new("/")).expect("topology");
        let shards = 2usize.min(topo.cores.len()).max(1);
        let plan =
            topo::plan(&topo, None, shards, &topo::Policy::new(Profile::Cache)).expect("plan");
        let mut a = args(true);
        a.shards = Some(u16::try_from(shards).expect("few"));
        a.no_pin = false;
        a.placement = Some(Profile::Cache);
        let mut out = Vec::new();
        run(a, &mut out).expect("demo runs");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(v["placement"], "cache");
        let per_shard = v["per_shard"].as_array().expect("per_shard");
        assert_eq!(per_shard.len(), shards);
        for (line, p) in per_shard.iter().zip(&plan.shards) {
            assert_eq!(line["core"].as_u64(), Some(p.cpu as u64), "{line}");
            let node = p.pool_node.unwrap_or(0) as u64;
            assert_eq!(line["numa_node"].as_u64(), Some(node), "{line}");
            let expected = if topo.nodes.len() > 1 {
                "preferred"
            } else {
                "single-node"
            };
            assert!(
                line["node_memory"] == expected || line["node_memory"] == "failed",
                "{line}"
            );
        }
        assert!(v["requests"].as_u64().is_some_and(|n| n > 0));
    }

    #[test]
    fn a_placement_the_machine_cannot_satisfy_is_a_usage_error() {
        // `spread` needs two cores per shard: as many shards as CPUs never fits.
        let mut a = args(false);
        a.shards = Some(u16::try_from(platform::affinity::available_cpus()).unwrap_or(1));
        a.no_pin = false;
        a.placement = Some(Profile::Spread);
        match run(a, &mut Vec::new()) {
            Err(CliError::Usage(msg)) => {
                assert!(msg.starts_with("--placement spread"), "{msg}");
                assert_eq!(msg.lines().count(), 1, "{msg}");
            }
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn skew_with_rebalance_migrates_live_connections_and_loses_nothing() {
        let mut a = args(true);
        a.duration = 1.5;
        a.skew = true;
        a.rebalance = true;
        a.period_ms = 50;
        let mut out = Vec::new();
        run(a, &mut out).expect("demo runs");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        let rb = &v["rebalance"];
        assert_eq!(rb["enabled"], true, "{v}");
        // The elephants all start on shard 0: the rebalancer must move buckets and their
        // connections must migrate, with nothing dropped, failed or reset.
        assert!(rb["bucket_moves"].as_u64().is_some_and(|n| n > 0), "{rb}");
        assert!(
            rb["connections_migrated"].as_u64().is_some_and(|n| n > 0),
            "{rb}"
        );
        assert_eq!(rb["import_failed"], 0, "{rb}");
        assert_eq!(rb["hold_drops"], 0, "{rb}");
        assert_eq!(v["drops"], 0, "{v}");
        assert_eq!(v["failed_connections"], 0, "{v}");
        assert_eq!(v["resets_sent"], 0, "{v}");
        assert!(v["requests"].as_u64().is_some_and(|n| n > 0));
    }

    #[test]
    fn skew_without_rebalance_measures_but_never_moves() {
        let mut a = args(true);
        a.duration = 1.0;
        a.skew = true;
        a.period_ms = 50;
        let mut out = Vec::new();
        run(a, &mut out).expect("demo runs");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        let rb = &v["rebalance"];
        assert_eq!(rb["enabled"], false, "{v}");
        assert_eq!(rb["bucket_moves"], 0, "{rb}");
        assert_eq!(rb["connections_migrated"], 0, "{rb}");
        assert!(rb["periods"].as_u64().is_some_and(|n| n > 0), "{rb}");
        assert_eq!(v["cross_shard_messages"], 0, "{v}");
    }

    #[test]
    fn imbalance_is_max_over_mean() {
        assert_eq!(imbalance(&[1, 1]), 1.0);
        assert_eq!(imbalance(&[3, 1]), 1.5);
        assert_eq!(imbalance(&[0, 0]), 0.0);
    }
}
