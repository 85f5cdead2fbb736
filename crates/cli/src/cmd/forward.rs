//! `rsstack forward`: an IPv4/IPv6 router over live ports (TAP, AF_PACKET, AF_XDP) or, with
//! `--io mem`, between two in-process hosts.
//!
//! `--port IF --ip ADDR/LEN [--ip …] --port IF2 --ip …`: each `--port` is followed by its
//! addresses (connected routes implied); `--route PREFIX,NEXTHOP` adds static routes. While
//! it runs, one line of counters a second goes to stderr (the live view); at the end, a
//! summary of `key: value` lines on stdout: forwarded, local, drops by reason, ICMP sent, the
//! ports' drops.
//!
//! `--io mem` needs exactly two ports: it puts a client host on port 0's subnet and an HTTP
//! server on port 1's (each at the first host address of the subnet that is not the
//! router's), runs `--requests` HTTP/1.1 requests on `--conns` connections through the router
//! and reports both the router's counters and the client's.
//!
//! Which `--port`/`--ip` belongs to which is decided by command-line order: clap calls the
//! value parsers in that order, and each parsed value takes a ticket from one counter.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use clap::{Args, ValueEnum};
use forward::{Counters, DropReason, Prefix};
use runtime::host::AF_PACKET_RING_DEFAULT;
use runtime::{
    HostConfig, HostLimits, LiveIo, RouterConfig, RouterReport, RouterSnapshot, RunLimits,
    WireConfig, run_routed_pair, run_router,
};
use stack::{InterfaceConfig, Ipv4Cidr, Ipv6Cidr};

use super::CliError;
use super::live::{mac_for, runtime_error};

/// The packet I/O behind every `--port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ForwardIo {
    /// TAP devices (created, or attached to), named by --port.
    Tap,
    /// AF_PACKET sockets on existing interfaces, one per shard per port (fanout).
    #[value(name = "af_packet")]
    AfPacket,
    /// AF_XDP sockets, one per queue, on existing interfaces.
    #[value(name = "af_xdp")]
    AfXdp,
    /// In process: a client host on port 0's subnet, an HTTP server on port 1's.
    Mem,
}

/// Orders `--port` and `--ip` values as they appeared on the command line.
static TICKET: AtomicU64 = AtomicU64::new(0);

fn ticket() -> u64 {
    TICKET.fetch_add(1, Ordering::Relaxed)
}

/// A `--port` value with its position.
#[derive(Debug, Clone)]
pub struct PortArg {
    at: u64,
    name: String,
}

/// An `--ip` value with its position.
#[derive(Debug, Clone)]
pub struct IpArg {
    at: u64,
    addr: IpAddr,
    len: u8,
}

fn parse_port(s: &str) -> Result<PortArg, String> {
    if s.is_empty() || s.len() > 15 || s.contains(['/', ' ', '\0']) {
        return Err(format!(
            "'{s}' is not an interface name (1 to 15 characters, no '/')"
        ));
    }
    Ok(PortArg {
        at: ticket(),
        name: s.to_string(),
    })
}

fn parse_ip(s: &str) -> Result<IpArg, String> {
    let bad = || format!("'{s}': expected ADDR/LEN, e.g. 10.0.1.1/24 or fd00:1::1/64");
    let (a, l) = s.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let len: u8 = l.parse().map_err(|_| bad())?;
    let unusable = addr.is_unspecified() || addr.is_multicast() || addr.is_loopback();
    if len > if addr.is_ipv4() { 32 } else { 128 } || unusable {
        return Err(bad());
    }
    Ok(IpArg {
        at: ticket(),
        addr,
        len,
    })
}

fn parse_route(s: &str) -> Result<(Prefix, IpAddr), String> {
    let bad = || format!("'{s}': expected PREFIX,NEXTHOP, e.g. 10.9.0.0/16,10.0.2.3");
    let (p, h) = s.split_once(',').ok_or_else(bad)?;
    let prefix: Prefix = p.trim().parse().map_err(|_| bad())?;
    let hop: IpAddr = h.trim().parse().map_err(|_| bad())?;
    if prefix.addr().is_ipv4() != hop.is_ipv4() {
        return Err(format!(
            "'{s}': the prefix and the next hop are of different families"
        ));
    }
    Ok((prefix, hop))
}

#[derive(Debug, Args)]
pub struct ForwardArgs {
    /// A port: an interface (af_packet, af_xdp), a TAP device (tap) or a label (mem); the
    /// --ip options after it are its addresses. Repeat for each port (1 to 16).
    #[arg(long = "port", value_name = "IF", value_parser = parse_port, required = true)]
    ports: Vec<PortArg>,
    /// An address of the preceding --port with its on-link prefix length (repeatable).
    #[arg(long = "ip", value_name = "ADDR/LEN", value_parser = parse_ip, required = true)]
    ips: Vec<IpArg>,
    /// A static route: destinations in PREFIX go through NEXTHOP, which must be on the subnet
    /// of a port (repeatable).
    #[arg(long = "route", value_name = "PREFIX,NEXTHOP", value_parser = parse_route)]
    routes: Vec<(Prefix, IpAddr)>,
    /// The packet I/O of every port.
    #[arg(
        long,
        value_enum,
        default_value = "af_packet",
        value_name = "tap|af_packet|af_xdp|mem"
    )]
    io: ForwardIo,
    /// Shards (threads), each owning one queue of every port: 1 to 128.
    #[arg(long, default_value_t = 1, value_name = "S",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(nic::QUEUES_MAX)))]
    shards: u16,
    /// Pin shard i to the i-th core of LIST (`0,2` or `0-3`).
    #[arg(long, value_name = "LIST")]
    cores: Option<String>,
    /// Frames taken from a port per turn: 1 to 64.
    #[arg(long, default_value_t = runtime::router::ROUTER_BURST_DEFAULT as u16, value_name = "FRAMES",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    burst: u16,
    /// Spin on the ports instead of sleeping when idle (a core per shard, lowest latency).
    #[arg(long)]
    busy_poll: bool,
    /// af_packet: one send(2) per frame instead of the memory-mapped transmit ring (one
    /// send(2) per burst); for comparisons.
    #[arg(long)]
    tx_send_per_frame: bool,
    /// IP MTU of every port in bytes: 576 to 9000.
    #[arg(long, default_value_t = 1500, value_name = "BYTES",
          value_parser = clap::value_parser!(u16).range(576..=9000))]
    mtu: u16,
    /// ICMP errors a second each shard may send (time exceeded, unreachable, too big).
    #[arg(long, default_value_t = 100, value_name = "N")]
    icmp_rate: u32,
    /// Stop after this many seconds (default: at SIGINT/SIGTERM; mem: when the client is done).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Seconds between two lines of the live view on stderr (0: none).
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    live_every: f64,
    /// mem: HTTP connections of the client host.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    conns: u16,
    /// mem: requests per connection.
    #[arg(long, default_value_t = 100, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    requests: u64,
}

fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

fn seconds(what: &str, v: f64) -> Result<Duration, CliError> {
    if !v.is_finite() || !(0.0..=1e6).contains(&v) {
        return Err(usage(format!("{what} must be 0 to 1000000 seconds")));
    }
    Ok(Duration::from_secs_f64(v))
}

/// The ports' interfaces, in command-line order, each with the `--ip`s that follow it.
fn interfaces(args: &ForwardArgs) -> Result<Vec<(String, InterfaceConfig)>, CliError> {
    if args.ports.len() > runtime::router::ROUTER_PORTS_MAX {
        return Err(usage(format!(
            "at most {} --port options",
            runtime::router::ROUTER_PORTS_MAX
        )));
    }
    if let Some(first) = args.ports.first()
        && args.ips.iter().any(|ip| ip.at < first.at)
    {
        return Err(usage("an --ip comes before the first --port"));
    }
    let mut out: Vec<(String, InterfaceConfig)> = Vec::new();
    for (i, p) in args.ports.iter().enumerate() {
        if args.ports[..i].iter().any(|q| q.name == p.name) {
            return Err(usage(format!("--port {} is given twice", p.name)));
        }
        let next = args.ports.get(i + 1).map_or(u64::MAX, |q| q.at);
        let mac = mac_for(&p.name);
        let mut ifc = InterfaceConfig {
            mac,
            ipv4: Vec::new(),
            ipv6: vec![Ipv6Cidr::link_local_from_mac(mac)],
            gateway_v4: None,
            gateway_v6: None,
            mtu_bytes: args.mtu,
        };
        for ip in args.ips.iter().filter(|ip| ip.at > p.at && ip.at < next) {
            match ip.addr {
                IpAddr::V4(a) => ifc.ipv4.push(Ipv4Cidr::new(a, ip.len)),
                IpAddr::V6(a) => ifc
                    .ipv6
                    .insert(ifc.ipv6.len() - 1, Ipv6Cidr::new(a, ip.len)),
            }
        }
        if ifc.ipv4.is_empty() && ifc.ipv6.len() == 1 {
            return Err(usage(format!(
                "--port {} has no --ip after it (each port needs an address)",
                p.name
            )));
        }
        out.push((p.name.clone(), ifc));
    }
    Ok(out)
}

fn parse_cores(text: &str) -> Result<Vec<usize>, CliError> {
    let bad = || usage(format!("--cores '{text}': expected a list like 0,2 or 0-3"));
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.trim().split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
}

pub fn run(args: ForwardArgs, out: &mut impl Write) -> Result<(), CliError> {
    let ports = interfaces(&args)?;
    let duration = args
        .duration
        .map(|d| seconds("--duration", d))
        .transpose()?;
    let live_every = seconds("--live-every", args.live_every)?;
    let mut cfg = RouterConfig::new(ports.iter().map(|(_, i)| i.clone()).collect());
    cfg.routes = args.routes.clone();
    cfg.shards = args.shards;
    cfg.burst_frames = usize::from(args.burst);
    cfg.busy_poll = args.busy_poll;
    cfg.af_packet_tx_ring = !args.tx_send_per_frame;
    cfg.icmp_errors_per_s_max = args.icmp_rate;
    cfg.cores = args.cores.as_deref().map(parse_cores).transpose()?;
    // Routes whose gateway is on no port's subnet, bad sizes: refused before any port opens.
    cfg.validate().map_err(runtime_error)?;
    let mut live = LiveLine::new(live_every);
    if args.io == ForwardIo::Mem {
        return run_mem(&args, &cfg, duration, &mut live, out);
    }
    let ios: Vec<LiveIo> = ports
        .iter()
        .map(|(name, _)| match args.io {
            ForwardIo::Tap => LiveIo::Tap {
                name: name.clone(),
                queues: 1,
            },
            ForwardIo::AfXdp => LiveIo::AfXdp {
                iface: name.clone(),
                queues: 1,
            },
            _ => LiveIo::AfPacket {
                iface: name.clone(),
                ring: AF_PACKET_RING_DEFAULT,
            },
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| CliError::Failed(format!("installing the signal handler: {e}")))?;
    }
    let limits = HostLimits {
        duration,
        stop_when_done: false,
        monitor_every: Duration::from_millis(20),
    };
    let mut announced = false;
    let mut ready_err = None;
    let names: Vec<&str> = ports.iter().map(|(n, _)| n.as_str()).collect();
    let ready_line = format!(
        "forwarding between {} ({} shards)",
        names.join(", "),
        cfg.shards
    );
    let report = run_router(&cfg, &ios, limits, stop, |v| {
        if v.ready && !announced {
            announced = true;
            if let Err(e) = writeln!(out, "{ready_line}").and_then(|()| out.flush()) {
                ready_err = Some(e);
            }
        }
        live.maybe(v.elapsed, v.total());
    })
    .map_err(runtime_error)?;
    if let Some(e) = ready_err {
        return Err(CliError::Io(e));
    }
    write_router_summary(out, &report)
}

/// The live view: one line per period on stderr with totals and rates since the last line.
struct LiveLine {
    every: Duration,
    next: Duration,
    last: (Duration, RouterSnapshot),
}

impl LiveLine {
    fn new(every: Duration) -> LiveLine {
        LiveLine {
            every,
            next: every,
            last: (Duration::ZERO, RouterSnapshot::default()),
        }
    }

    fn maybe(&mut self, elapsed: Duration, t: RouterSnapshot) {
        if self.every.is_zero() || elapsed < self.next {
            return;
        }
        self.next = elapsed + self.every;
        let dt = (elapsed - self.last.0).as_secs_f64().max(1e-9);
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / dt;
        eprintln!(
            "[{:7.1}s] rx {} ({:.0}/s)  forwarded {} ({:.0}/s)  local {}  drops {}  icmp {}",
            elapsed.as_secs_f64(),
            t.rx_frames,
            rate(t.rx_frames, self.last.1.rx_frames),
            t.forwarded,
            rate(t.forwarded, self.last.1.forwarded),
            t.local,
            t.drops,
            t.icmp_sent
        );
        self.last = (elapsed, t);
    }
}

/// The final summary: `key: value` lines.
fn write_router_summary(out: &mut impl Write, r: &RouterReport) -> Result<(), CliError> {
    let f: Counters = r.forward();
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    writeln!(out, "elapsed_s: {:.3}", r.elapsed.as_secs_f64())?;
    writeln!(out, "forwarded_per_s: {:.0}", f.forwarded as f64 / secs)?;
    for (name, v) in f.fields() {
        writeln!(out, "{name}: {v}")?;
    }
    writeln!(out, "drops_total: {}", f.drops_total())?;
    writeln!(out, "icmp_sent: {}", f.icmp_sent())?;
    let (tx_fwd, tx_local) = r.tx_frames();
    writeln!(out, "tx_forwarded: {tx_fwd}")?;
    writeln!(out, "tx_local: {tx_local}")?;
    writeln!(out, "drops_io: {}", r.drops_io())?;
    let p = r.port_totals();
    writeln!(out, "drop_rx_kernel: {}", p.rx_drop_kernel)?;
    writeln!(out, "drop_tx_error: {}", p.tx_drop_error)?;
    writeln!(out, "drop_tx_backlog_full: {}", r.tx_drop_backlog_full())?;
    writeln!(out, "tx_would_block: {}", p.tx_would_block)?;
    writeln!(out, "tx_ring_full: {}", p.tx_ring_full)?;
    writeln!(out, "tx_kicks: {}", p.tx_kicks)?;
    writeln!(out, "tx_kick_errors: {}", p.tx_kick_errors)?;
    let l = r.local_service();
    writeln!(out, "arp_requests_answered: {}", l.arp_requests_answered)?;
    writeln!(out, "arp_requests_sent: {}", l.arp_requests_sent)?;
    writeln!(out, "nd_solicits_answered: {}", l.nd_solicits_answered)?;
    writeln!(out, "echo_replies_sent: {}", l.echo_replies_sent)?;
    writeln!(out, "neighbour_resolution_failed: {}", l.resolution_failed)?;
    debug_assert_eq!(DropReason::ALL.len(), 11);
    Ok(())
}

/// The first host address of `c`'s subnet that is not `c.addr` (for /31 and /32: the other
/// address, or `None`).
fn peer_in(c: Ipv4Cidr) -> Option<Ipv4Addr> {
    if c.prefix_len >= 32 {
        return None;
    }
    let mask = u32::MAX
        .checked_shl(32 - u32::from(c.prefix_len))
        .unwrap_or(0);
    let net = u32::from(c.addr) & mask;
    let last = net | !mask;
    let first = if c.prefix_len == 31 { net } else { net + 1 };
    (first..=last.saturating_sub(u32::from(c.prefix_len < 31)))
        .map(Ipv4Addr::from)
        .find(|&a| a != c.addr)
}

fn run_mem(
    args: &ForwardArgs,
    cfg: &RouterConfig,
    duration: Option<Duration>,
    live: &mut LiveLine,
    out: &mut impl Write,
) -> Result<(), CliError> {
    if cfg.ports.len() != 2 {
        return Err(usage("--io mem needs exactly two --port options"));
    }
    let host_on = |p: usize| -> Result<HostConfig, CliError> {
        let c = *cfg.ports[p]
            .ipv4
            .first()
            .ok_or_else(|| usage("--io mem needs an IPv4 --ip on each port"))?;
        let ip = peer_in(c).ok_or_else(|| {
            usage(format!(
                "--ip {}/{}: no room for a host",
                c.addr, c.prefix_len
            ))
        })?;
        let mut i = InterfaceConfig::new(
            mac_for(&format!("mem-host{p}")),
            Ipv4Cidr::new(ip, c.prefix_len),
        );
        i.gateway_v4 = Some(c.addr);
        Ok(HostConfig::new(i, 1))
    };
    let (client, server) = (host_on(0)?, host_on(1)?);
    let server_ip = IpAddr::V4(server.interface.ipv4[0].addr);
    let load = LoadConfig {
        server: SocketAddr::new(server_ip, 80),
        connections: usize::from(args.conns),
        path: "/index.html".into(),
        requests_per_connection: Some(args.requests),
        elephant_ports: Vec::new(),
        elephant_body_bytes: 0,
    };
    let files = Arc::new(FileSet::demo(1024));
    eprintln!(
        "mem: client {} → router → server {}",
        client.interface.ipv4[0].addr, server_ip
    );
    let r = run_routed_pair(
        cfg,
        &client,
        move |_| HttpLoadClient::new(load.clone()),
        &server,
        move |_| HttpServer::new(80, files.clone()),
        WireConfig::default(),
        RunLimits {
            duration: duration.unwrap_or(Duration::from_secs(60)),
            stop_when_client_done: true,
            monitor_every: Duration::from_millis(20),
        },
        |v| {
            let mut t = RouterSnapshot::default();
            for s in &v.router {
                t.rx_frames += s.rx_frames;
                t.forwarded += s.forwarded;
                t.local += s.local;
                t.drops += s.drops;
                t.icmp_sent += s.icmp_sent;
            }
            live.maybe(v.elapsed, t);
            std::ops::ControlFlow::Continue(())
        },
    )
    .map_err(runtime_error)?;
    write_router_summary(out, &r.router)?;
    let (mut ok, mut failed, mut bytes) = (0, 0, 0);
    for s in &r.client.shards {
        let st = s.app.stats();
        ok += st.responses_ok;
        failed += st.connections_failed + st.protocol_errors;
        bytes += st.body_bytes;
    }
    writeln!(out, "client_responses_ok: {ok}")?;
    writeln!(out, "client_errors: {failed}")?;
    writeln!(out, "client_body_bytes: {bytes}")?;
    let want = u64::from(args.conns) * args.requests;
    if ok != want || failed != 0 {
        return Err(CliError::Failed(format!(
            "{ok} of {want} requests answered through the router, {failed} errors"
        )));
    }
    Ok(())
}
