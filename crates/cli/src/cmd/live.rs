//! What `serve`, `ttcp` and `get` share: the I/O options ([`IoArgs`]), building the live host
//! from them, the stop flag set by SIGINT/SIGTERM, and the `listening` line.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use apps::{App, ShardInfo};
use clap::{Args, ValueEnum};
use platform::af_packet::RingVersion;
use runtime::host::{AF_PACKET_RING_DEFAULT, REPLAY_FRAMES_MAX};
use runtime::{
    HostConfig, HostLimits, HostView, LiveConfig, LiveIo, LiveReport, RuntimeError, run_host,
};
use stack::{InterfaceConfig, Ipv4Cidr, Ipv6Cidr};
use wire::EthernetAddress;

use super::CliError;
use topo::{Plan, Profile};

/// The packet I/O backend behind `--iface`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoKind {
    /// AF_PACKET sockets with memory-mapped rings, one socket per shard in a fanout group.
    #[value(name = "af_packet")]
    AfPacket,
    /// AF_XDP sockets, one per queue, with the XDP redirect program.
    #[value(name = "af_xdp")]
    AfXdp,
}

/// The receive ring of `--io af_packet` (`--af-packet-ring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RingArg {
    /// TPACKET_V2: a slot per frame, handed over as soon as the kernel wrote it.
    V2,
    /// TPACKET_V3: blocks packed with frames, handed over when full or after 1 ms.
    V3,
}

impl From<RingArg> for RingVersion {
    fn from(r: RingArg) -> RingVersion {
        match r {
            RingArg::V2 => RingVersion::V2,
            RingArg::V3 => RingVersion::V3,
        }
    }
}

/// The I/O options every live command takes.
#[derive(Debug, Args)]
pub struct IoArgs {
    /// Use (or create) the TAP device NAME.
    #[arg(long, value_name = "NAME")]
    tap: Option<String>,
    /// Use the existing interface IFACE (see --io).
    #[arg(long, value_name = "IFACE")]
    iface: Option<String>,
    /// The backend for --iface.
    #[arg(
        long,
        value_enum,
        default_value = "af_packet",
        value_name = "af_packet|af_xdp"
    )]
    io: IoKind,
    /// The AF_PACKET receive ring (only with --io af_packet): v2 hands each frame over at once;
    /// v3 packs frames into blocks handed over when full or after 1 ms [default: v2].
    #[arg(long = "af-packet-ring", value_enum, value_name = "v2|v3")]
    af_packet_ring: Option<RingArg>,
    /// Replay the frames of a pcap file as received traffic (no root needed).
    #[arg(long = "pcap-in", value_name = "FILE")]
    pcap_in: Option<PathBuf>,
    /// An address of the host with its prefix length (repeatable; IPv4 and IPv6).
    #[arg(long = "ip", value_name = "ADDR/PREFIX")]
    ip: Vec<String>,
    /// Next hop for destinations outside the prefixes (at most one per family).
    #[arg(long, value_name = "ADDR")]
    gateway: Vec<String>,
    /// The host's MAC (default: a locally administered address derived from the interface).
    #[arg(long, value_name = "MAC")]
    mac: Option<String>,
    /// IP MTU in bytes: 576 (the IPv4 minimum every host must accept) to 9000 (jumbo frames).
    #[arg(long, default_value_t = 1500, value_name = "BYTES",
          value_parser = clap::value_parser!(u16).range(i64::from(MTU_MIN)..=i64::from(MTU_MAX)))]
    mtu: u16,
    /// Pin the RSS key (80 hex digits, `ethtool -x` form) instead of drawing one at random at
    /// start: the same steering on every run, for tests and reproductions. A key given here
    /// counts as known, so the stacks hash each segment's 4-tuple again for their connection
    /// tables (under the random key they use the NIC's hash: hash once).
    #[arg(long = "rss-key", value_name = "HEX", value_parser = super::rss::parse_rss_key)]
    rss_key: Option<rss::RssKey>,
    /// TAP or AF_XDP queues (1..=shards).
    #[arg(long, default_value_t = 1, value_name = "Q",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(nic::QUEUES_MAX)))]
    queues: u16,
    /// Shards (one thread each): 1 to 128, the NIC model's queue limit (`nic::QUEUES_MAX`).
    #[arg(long, default_value_t = 1, value_name = "S",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(nic::QUEUES_MAX)))]
    shards: u16,
    /// Pin shard i to the i-th core of LIST (`0,2,4` or `0-3`).
    #[arg(long, value_name = "LIST", conflicts_with = "placement")]
    cores: Option<String>,
    /// Place the shards with a placement policy (closest, closest-static, numa, numa-static,
    /// conservative, cache, spread; see `rsstack topo`), near --iface's NIC when given: each
    /// shard is pinned to the plan's CPU and reports (and on a multi-node machine prefers the
    /// memory of) the plan's node. Default: --cores, or unpinned.
    #[arg(long, value_name = "POLICY", value_parser = super::topo::parse_profile)]
    placement: Option<Profile>,
    /// Write every frame received and sent to this pcap file.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
    /// Stop after this many seconds (default: at SIGINT/SIGTERM or when done).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Interrupt moderation of every queue, like `ethtool -C`:
    /// `rx-usecs=N,rx-frames=N,adaptive-rx=on|off,lli=on|off,lli-ports=P+P` (default: adaptive,
    /// 10–125 µs; lli-ports wakes at once for packets to or from those ports).
    #[arg(long, value_name = "SETTINGS", value_parser = super::coalesce::parse_coalesce)]
    coalesce: Option<nic::ModerationConfig>,
    /// The port's offloads, like `ethtool -K`: `tso=on|off,csum=on|off,gro=on|off`, or
    /// `all` / `none`; unnamed ones stay on. TSO sends TCP frames of up to 64 KiB for the
    /// kernel (TAP, AF_PACKET) or the NIC model in software (AF_XDP) to segment; csum leaves
    /// TCP checksums to the kernel and trusts the ones it verified; gro takes the kernel's
    /// coalesced frames whole (TAP) [default: all on TAP and AF_PACKET, none on AF_XDP and
    /// --pcap-in, where software TSO costs more CPU than it saves].
    #[arg(long = "nic-offload", value_name = "SETTINGS",
          value_parser = super::nic_offload::parse_nic_offload)]
    nic_offload: Option<runtime::NicOffload>,
    /// A flow steering rule, like `ethtool -N` (repeatable; the first match wins):
    /// `proto tcp|udp`, `src-ip A`, `dst-ip A`, `src-port N`, `dst-port N`, then `queue N`
    /// (a shard) or `drop`; e.g. 'proto tcp dst-port 80 queue 1'. Runs where the shards'
    /// software RETA runs, after ATR (replies of connections a shard opened stay with it).
    #[arg(long = "filter", value_name = "RULE", value_parser = super::filter::parse_filter)]
    filter: Vec<rss::FlowRule>,
    /// Print a live view on stderr once a second (on by default when stderr is a terminal):
    /// per shard, packets per second, packets per NIC wake-up (interrupt), connections, and
    /// the connections the overload policy refused and reclaimed when it acted.
    #[arg(long = "live-view")]
    live_view: bool,
    /// Live RSS rebalancing: every period the shards' software RETA follows the load and the
    /// connections of a moved bucket migrate to their new shard (needs --shards ≥ 2).
    #[arg(long)]
    rebalance: bool,
    /// Rebalancing period, in milliseconds (with --rebalance).
    #[arg(long, default_value_t = 100, value_name = "MS", requires = "rebalance",
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    period_ms: u64,
    /// Busiest shard's load over the mean above which the rebalancer moves buckets (with
    /// --rebalance; at least 1.0, default 1.10). 1.0 moves at any imbalance: a stress setting.
    #[arg(long, value_name = "RATIO", requires = "rebalance")]
    imbalance_threshold: Option<f64>,
    #[command(flatten)]
    overload: super::overload::OverloadArgs,
}

/// Smallest `--mtu`: the IPv4 datagram every host must accept (RFC 791).
pub const MTU_MIN: u16 = 576;
/// Largest `--mtu`: a jumbo frame's IP MTU.
pub const MTU_MAX: u16 = 9000;

/// A validated live host: its configuration, port, limits and what to print.
pub struct Live {
    pub host: HostConfig,
    pub live: LiveConfig,
    pub duration: Option<Duration>,
    /// The first `--ip` given.
    pub first_ip: IpAddr,
    /// The placement plan, with `--placement`.
    pub plan: Option<Plan>,
    /// Print the live view on stderr once a second (`--live-view`, or stderr a terminal).
    pub live_view: bool,
}

fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

/// Parses `ADDR/PREFIX`.
fn parse_cidr(text: &str) -> Result<(IpAddr, u8), CliError> {
    let bad = || {
        usage(format!(
            "--ip '{text}': expected ADDR/PREFIX, e.g. 10.0.0.2/24 or fd00::2/64"
        ))
    };
    let (a, p) = text.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let prefix: u8 = p.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(bad());
    }
    Ok((addr, prefix))
}

/// Parses `aa:bb:cc:dd:ee:ff`.
fn parse_mac(text: &str) -> Result<EthernetAddress, CliError> {
    let bad = || {
        usage(format!(
            "--mac '{text}': expected six hex bytes like 02:00:00:00:00:01"
        ))
    };
    let mut out = [0u8; 6];
    let mut parts = text.split([':', '-']);
    for b in &mut out {
        let p = parts.next().ok_or_else(bad)?;
        if p.len() != 2 {
            return Err(bad());
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() || out[0] & 1 == 1 {
        return Err(bad());
    }
    Ok(EthernetAddress(out))
}

/// A fixed, locally administered unicast MAC derived from `name` (FNV-1a over its bytes).
pub fn mac_for(name: &str) -> EthernetAddress {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    EthernetAddress([0x02, b[0], b[1], b[2], b[3], b[4]])
}

/// Reads the `--pcap-in` file through before the host starts, so that a file that cannot be
/// replayed is refused with a sentence (exit 2) rather than reported by the runtime.
fn check_pcap(path: &std::path::Path) -> Result<(), CliError> {
    use platform::pcap::{LINKTYPE_ETHERNET, PcapError, PcapReader};
    let shown = path.display();
    let why = |e: PcapError| match e {
        PcapError::Truncated(what) => usage(format!(
            "--pcap-in {shown}: not a complete pcap capture: the file ends inside a {what}"
        )),
        PcapError::Io(e) => usage(format!("--pcap-in {shown}: cannot read it: {e}")),
        e => usage(format!("--pcap-in {shown}: not a usable pcap capture: {e}")),
    };
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("--pcap-in {shown}: cannot open it: {e}")))?;
    let reader = PcapReader::new(std::io::BufReader::new(file)).map_err(why)?;
    if reader.link_type() != LINKTYPE_ETHERNET {
        return Err(usage(format!(
            "--pcap-in {shown}: link type {} is not Ethernet ({LINKTYPE_ETHERNET})",
            reader.link_type()
        )));
    }
    let mut frames = 0usize;
    for rec in reader {
        rec.map_err(why)?;
        frames += 1;
        if frames > REPLAY_FRAMES_MAX {
            return Err(usage(format!(
                "--pcap-in {shown}: more than {REPLAY_FRAMES_MAX} frames, the replay's limit \
                 (runtime::host::REPLAY_FRAMES_MAX)"
            )));
        }
    }
    Ok(())
}

/// The runtime's refusal to start, as the CLI reports it: a port that cannot be opened (a
/// missing interface, no permission) or a configuration out of range is a usage or
/// environment error (exit 2); a thread that could not run is a failed run (exit 1).
pub fn runtime_error(e: RuntimeError) -> CliError {
    match e {
        RuntimeError::Config(_) | RuntimeError::Io(_) => CliError::Usage(e.to_string()),
        RuntimeError::Thread(_) => CliError::Failed(e.to_string()),
    }
}

/// Parses `0,2,4`, `0-3` or a mix.
fn parse_cores(text: &str) -> Result<Vec<usize>, CliError> {
    let bad = || {
        usage(format!(
            "--cores '{text}': expected a list like 0,2,4 or 0-3"
        ))
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (usize, usize) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a > b || b - a > 4096 {
                return Err(bad());
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| bad())?);
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

impl IoArgs {
    /// Validates the options into a live host.
    pub fn resolve(&self) -> Result<Live, CliError> {
        let chosen = [
            self.tap.is_some(),
            self.iface.is_some(),
            self.pcap_in.is_some(),
        ];
        if chosen.iter().filter(|&&c| c).count() != 1 {
            return Err(usage(
                "exactly one of --tap, --iface or --pcap-in is required",
            ));
        }
        if self.shards == 0 || self.shards > nic::QUEUES_MAX {
            return Err(usage(format!("--shards must be 1..={}", nic::QUEUES_MAX)));
        }
        if self.queues == 0 || self.queues > self.shards {
            return Err(usage(format!(
                "--queues {} exceeds --shards {}: each queue needs a shard to serve it (1..=shards)",
                self.queues, self.shards
            )));
        }
        if !(MTU_MIN..=MTU_MAX).contains(&self.mtu) {
            return Err(usage(format!("--mtu must be {MTU_MIN}..={MTU_MAX} bytes")));
        }
        if self.af_packet_ring.is_some() && (self.iface.is_none() || self.io != IoKind::AfPacket) {
            return Err(usage("--af-packet-ring needs --iface with --io af_packet"));
        }
        let (io, name) = if let Some(name) = &self.tap {
            (
                LiveIo::Tap {
                    name: name.clone(),
                    queues: self.queues,
                },
                name.clone(),
            )
        } else if let Some(iface) = &self.iface {
            let io = match self.io {
                IoKind::AfPacket => LiveIo::AfPacket {
                    iface: iface.clone(),
                    ring: self
                        .af_packet_ring
                        .map_or(AF_PACKET_RING_DEFAULT, RingVersion::from),
                },
                IoKind::AfXdp => LiveIo::AfXdp {
                    iface: iface.clone(),
                    queues: self.queues,
                },
            };
            (io, iface.clone())
        } else {
            let path = self.pcap_in.clone().unwrap_or_default();
            check_pcap(&path)?;
            let name = path.display().to_string();
            (LiveIo::PcapIn { path }, name)
        };
        if name.is_empty() || name.len() > 15 && !matches!(io, LiveIo::PcapIn { .. }) {
            return Err(usage(format!(
                "interface name '{name}' must be 1 to 15 bytes"
            )));
        }
        if self.ip.is_empty() {
            return Err(usage("at least one --ip ADDR/PREFIX is required"));
        }
        let mac = match &self.mac {
            Some(m) => parse_mac(m)?,
            None => mac_for(&name),
        };
        let mut iface = InterfaceConfig {
            mac,
            ipv4: Vec::new(),
            ipv6: vec![Ipv6Cidr::link_local_from_mac(mac)],
            gateway_v4: None,
            gateway_v6: None,
            mtu_bytes: self.mtu,
        };
        let mut first_ip = None;
        for text in &self.ip {
            let (addr, prefix) = parse_cidr(text)?;
            first_ip.get_or_insert(addr);
            match addr {
                IpAddr::V4(a) => iface.ipv4.push(Ipv4Cidr {
                    addr: a,
                    prefix_len: prefix,
                }),
                IpAddr::V6(a) => iface.ipv6.push(Ipv6Cidr {
                    addr: a,
                    prefix_len: prefix,
                }),
            }
        }
        for text in &self.gateway {
            let bad = || usage(format!("--gateway '{text}' is not an IPv4 or IPv6 address"));
            match text.parse::<IpAddr>().map_err(|_| bad())? {
                IpAddr::V4(a) if iface.gateway_v4.is_none() => iface.gateway_v4 = Some(a),
                IpAddr::V6(a) if iface.gateway_v6.is_none() => iface.gateway_v6 = Some(a),
                _ => return Err(usage("--gateway may be given once per address family")),
            }
        }
        let duration = match self.duration {
            None => None,
            Some(d) if d.is_finite() && d > 0.0 && d <= 31_536_000.0 => {
                Some(Duration::from_secs_f64(d))
            }
            Some(_) => return Err(usage("--duration must be in (0, 31536000] seconds")),
        };
        let mut host = HostConfig::new(iface, self.shards);
        if let Some(key) = &self.rss_key {
            host.pin_rss_key(key);
        }
        self.overload.apply(&mut host.limits)?;
        host.queues = self.queues;
        if let Some(m) = self.coalesce {
            host.nic.moderation = m;
        }
        // Default: on where the kernel below takes the offloads. Over AF_XDP (no GSO request
        // through an XDP socket) and a replay only the NIC model could segment, in software,
        // which costs more CPU per byte than it saves (scripts/nic-offload-compare.sh
        // af_xdp): there only when asked for.
        host.nic_offload = self.nic_offload.unwrap_or(match io {
            LiveIo::Tap { .. } | LiveIo::AfPacket { .. } => runtime::NicOffload::ALL,
            LiveIo::AfXdp { .. } | LiveIo::PcapIn { .. } => runtime::NicOffload::NONE,
        });
        host.rules = super::filter::rule_set(&self.filter, self.shards)?;
        super::filter::check_with_rebalance(&host.rules, self.rebalance)?;
        if self.rebalance {
            if self.shards < 2 {
                return Err(usage(
                    "--rebalance moves connections between shards: needs --shards ≥ 2",
                ));
            }
            let mut settings = runtime::RebalanceSettings {
                period: Duration::from_millis(self.period_ms),
                ..runtime::RebalanceSettings::default()
            };
            if let Some(t) = self.imbalance_threshold {
                if !(t.is_finite() && (1.0..=100.0).contains(&t)) {
                    return Err(usage("--imbalance-threshold must be in [1.0, 100]"));
                }
                settings.config.imbalance_threshold = t;
                settings.config.imbalance_target = settings.config.imbalance_target.min(t);
            }
            host.rebalance = Some(settings);
        }
        if let Some(c) = &self.cores {
            host.cores = Some(parse_cores(c)?);
        }
        // Only a real interface has a locality; a TAP device or a replay plans on all nodes.
        let plan = match self.placement {
            Some(p) => Some(super::placement::place(
                &mut host,
                p,
                self.iface.as_deref(),
            )?),
            None => None,
        };
        Ok(Live {
            host,
            live: LiveConfig {
                io,
                capture: self.capture.clone(),
            },
            duration,
            first_ip: first_ip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            plan,
            live_view: self.live_view || std::io::IsTerminal::is_terminal(&std::io::stderr()),
        })
    }
}

impl Live {
    /// The line a server prints once its listeners exist.
    pub fn listening_line(&self, port: u16) -> String {
        let ring = match self.live.io.af_packet_ring() {
            Some(r) => format!(" {}", r.name()),
            None => String::new(),
        };
        let placed = match &self.plan {
            Some(p) => format!(
                ", placement {} cpu/node {}",
                p.policy.profile,
                super::placement::shard_list(p)
            ),
            None => String::new(),
        };
        format!(
            "listening on {} ({} {}{ring}, {} shards, {} queues{placed})",
            SocketAddr::new(self.first_ip, port),
            self.live.io.kind_name(),
            self.live.io.target(),
            self.host.shards,
            self.host.queues,
        )
    }

    /// Runs the host: stops at SIGINT/SIGTERM, after `--duration`, or (with
    /// `stop_when_done`) when every shard's application is done; `on_ready` runs once, when
    /// every shard has started its application.
    pub fn run<A, F>(
        &self,
        factory: F,
        stop_when_done: bool,
        mut on_ready: impl FnMut() -> std::io::Result<()>,
    ) -> Result<LiveReport<A>, CliError>
    where
        A: App + Send + 'static,
        F: Fn(ShardInfo) -> A + Send + Sync + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone())
                .map_err(|e| CliError::Failed(format!("installing the signal handler: {e}")))?;
        }
        let limits = HostLimits {
            duration: self.duration,
            stop_when_done,
            monitor_every: Duration::from_millis(5),
        };
        let mut announced = false;
        let mut ready_err = None;
        let mut view = super::live_view::LiveViewState::default();
        let report = run_host(
            &self.host,
            &self.live,
            factory,
            limits,
            stop,
            |v: &HostView| {
                if self.live_view {
                    if let Some(line) = view.tick(v.elapsed, &v.shards) {
                        eprintln!("{line}");
                    }
                }
                if v.ready && !announced {
                    announced = true;
                    if let Err(e) = on_ready() {
                        ready_err = Some(e);
                    }
                }
            },
        )
        .map_err(runtime_error)?;
        if let Some(e) = ready_err {
            return Err(CliError::Io(e));
        }
        Ok(report)
    }
}

/// Reads one NIC counter.
type NicField = fn(&nic::QueueCounters) -> u64;

/// Prints the host-wide counters every live command ends with, as `key: value` lines.
pub fn write_host_summary<A>(out: &mut impl Write, r: &LiveReport<A>) -> std::io::Result<()> {
    let p = r.port_counters();
    let h = &r.host;
    let stack_drops: u64 = h
        .shards
        .iter()
        .map(|s| s.stack.tx_drop_queue_full + s.stack.arp_pending_queue_full)
        .sum();
    let nic_drops: u64 = h
        .shards
        .iter()
        .map(|s| s.nic.rx_drops() + s.nic.tx_drops())
        .sum();
    let cross_drops: u64 = h.shards.iter().map(|s| s.cross_shard_drop_ring_full).sum();
    let neighbour: u64 = h.shards.iter().map(|s| s.neighbour_copies).sum();
    writeln!(out, "elapsed_seconds: {:.3}", r.elapsed.as_secs_f64())?;
    writeln!(out, "rx_frames: {}", p.rx_frames)?;
    writeln!(out, "tx_frames: {}", p.tx_frames)?;
    writeln!(out, "rx_bytes: {}", p.rx_bytes)?;
    writeln!(out, "tx_bytes: {}", p.tx_bytes)?;
    writeln!(out, "nic_wakeups: {}", h.nic_wakeups())?;
    writeln!(out, "cross_shard: {}", h.cross_shard_messages())?;
    writeln!(out, "neighbour_copies: {neighbour}")?;
    // Offloads: what the kernel was asked to segment and checksum, what it vouched for and
    // coalesced (TAP with a virtio-net header), and the NIC model's software TSO (other ports).
    let nic_tso_sends: u64 = h.shards.iter().map(|s| s.nic.tx_tso_sends).sum();
    let nic_tso_segments: u64 = h.shards.iter().map(|s| s.nic.tx_tso_segments).sum();
    writeln!(out, "tx_tso_frames: {}", p.tx_tso_frames)?;
    writeln!(out, "tx_tso_segments: {}", p.tx_tso_segments)?;
    writeln!(out, "tx_csum_offloaded: {}", p.tx_csum_offloaded)?;
    writeln!(out, "rx_csum_valid: {}", p.rx_csum_valid)?;
    writeln!(out, "rx_gro_frames: {}", p.rx_gro_frames)?;
    writeln!(out, "nic_tso_sends: {nic_tso_sends}")?;
    writeln!(out, "nic_tso_segments: {nic_tso_segments}")?;
    writeln!(
        out,
        "drop_tx_offload_malformed: {}",
        p.tx_drop_offload_malformed
    )?;
    writeln!(out, "checksum_completed: {}", p.rx_checksum_completed)?;
    writeln!(out, "checksum_incomplete: {}", p.rx_checksum_incomplete)?;
    writeln!(out, "drops: {}", h.drops())?;
    writeln!(out, "drop_nic: {nic_drops}")?;
    writeln!(out, "drop_cross_shard_ring_full: {cross_drops}")?;
    writeln!(out, "drop_stack_queues: {stack_drops}")?;
    writeln!(out, "drop_rx_truncated: {}", p.rx_drop_truncated)?;
    writeln!(out, "drop_rx_kernel: {}", p.rx_drop_kernel)?;
    writeln!(out, "drop_rx_ring_invalid: {}", p.rx_drop_ring_invalid)?;
    writeln!(out, "drop_tx_error: {}", p.tx_drop_error)?;
    writeln!(out, "tx_would_block: {}", p.tx_would_block)?;
    writeln!(out, "rx_errors: {}", p.rx_errors)?;
    // Where each shard ran: its core (`-` unpinned or pinning failed) and node, in shard order.
    let cores: Vec<String> = h
        .shards
        .iter()
        .map(|s| match s.core {
            Some(c) if !s.pin_failed => c.to_string(),
            _ => "-".into(),
        })
        .collect();
    let nodes: Vec<String> = h
        .shards
        .iter()
        .map(|s| s.info.numa_node.to_string())
        .collect();
    writeln!(out, "shard_cores: {}", cores.join(" "))?;
    // Where the traffic went, per shard in shard order (steering rules, ATR, RSS).
    let per_shard = |f: fn(&runtime::ShardReport<A>) -> u64| {
        h.shards
            .iter()
            .map(|s| f(s).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    writeln!(out, "shard_rx_packets: {}", per_shard(|s| s.rx_packets))?;
    writeln!(
        out,
        "shard_connections_max: {}",
        per_shard(|s| s.connections_max)
    )?;
    writeln!(out, "shard_nodes: {}", nodes.join(" "))?;
    let mem_failed = h.shards.iter().filter(|s| s.node_memory.failed()).count();
    writeln!(out, "node_memory_failed: {mem_failed}")?;
    // Freed heap memory given back to the OS after a large fall of the TCP buffer memory
    // (`shard::mem_trim`), and the resident bytes those trims released.
    let trims: u64 = h.shards.iter().map(|s| s.core_counters.mem_trims).sum();
    let trimmed: u64 = h
        .shards
        .iter()
        .map(|s| s.core_counters.mem_trim_released_bytes)
        .sum();
    writeln!(out, "mem_trims: {trims}")?;
    writeln!(out, "mem_trim_released_bytes: {trimmed}")?;
    if let Some(rb) = &r.rebalance {
        let sum = |f: fn(&runtime::ShardReport<A>) -> u64| h.shards.iter().map(f).sum::<u64>();
        let series = &rb.periodic.imbalance;
        writeln!(out, "rebalance_periods: {}", rb.periodic.periods)?;
        writeln!(out, "rebalance_bucket_moves: {}", rb.moves_started)?;
        writeln!(
            out,
            "rebalance_connections_migrated: {}",
            sum(|s| s.moves.conns_in)
        )?;
        writeln!(
            out,
            "rebalance_unowned_migrated: {}",
            sum(|s| s.moves.unowned_in)
        )?;
        writeln!(
            out,
            "rebalance_frames_held: {}",
            sum(|s| s.moves.frames_held)
        )?;
        writeln!(
            out,
            "rebalance_import_failed: {}",
            sum(|s| s.moves.import_failed)
        )?;
        if let (Some(first), Some(last)) = (series.first(), series.last()) {
            writeln!(out, "rebalance_imbalance_first: {:.3}", first.1)?;
            writeln!(out, "rebalance_imbalance_last: {:.3}", last.1)?;
        }
    }
    if let Some(n) = r.capture_records {
        writeln!(out, "capture_records: {n}")?;
        writeln!(out, "capture_errors: {}", p.capture_errors)?;
    }
    // The NIC model's receive/transmit drops and checksum flags, summed over the shards.
    let nic_sum = |f: NicField| h.shards.iter().map(|s| f(&s.nic)).sum::<u64>();
    let nic_named: [(&str, NicField); 8] = [
        ("rx_drop_ring_full", |c| c.rx_drop_ring_full),
        ("rx_drop_malformed", |c| c.rx_drop_malformed),
        ("rx_drop_oversize", |c| c.rx_drop_oversize),
        ("rx_drop_no_queue", |c| c.rx_drop_no_queue),
        ("rx_csum_bad_ip", |c| c.rx_csum_bad_ip),
        ("rx_csum_bad_l4", |c| c.rx_csum_bad_l4),
        ("tx_drop_ring_full", |c| c.tx_drop_ring_full),
        ("tx_drop_malformed", |c| c.tx_drop_malformed),
    ];
    for (name, f) in nic_named {
        writeln!(out, "nic.{name}: {}", nic_sum(f))?;
    }
    // Every counter of the stacks (`stack::Counters::named`) and of their TCP connections
    // (`stack::TcpCounters::named`), summed over the shards.
    write_named_totals(out, "stack", h.shards.iter().map(|s| s.stack.named()))?;
    write_named_totals(out, "tcp", h.shards.iter().map(|s| s.tcp.named()))?;
    super::filter::write_filter_summary(out, &h.filters)
}

/// Prints `PREFIX.NAME: total` for every name, summing the shards' `(name, value)` lists
/// (each in the same order).
fn write_named_totals(
    out: &mut impl Write,
    prefix: &str,
    shards: impl Iterator<Item = Vec<(&'static str, u64)>>,
) -> std::io::Result<()> {
    let mut totals: Vec<(&'static str, u64)> = Vec::new();
    for named in shards {
        for (i, (name, v)) in named.into_iter().enumerate() {
            match totals.get_mut(i) {
                Some(t) if t.0 == name => t.1 += v,
                _ => totals.push((name, v)),
            }
        }
    }
    for (name, v) in totals {
        writeln!(out, "{prefix}.{name}: {v}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_macs_and_core_lists_parse_or_fail_with_usage() {
        assert_eq!(
            parse_cidr("10.0.0.2/24").ok(),
            Some((IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 24))
        );
        assert!(parse_cidr("fd00::2/64").is_ok());
        for bad in ["10.0.0.2", "10.0.0.2/33", "fd00::2/129", "x/1"] {
            assert!(matches!(parse_cidr(bad), Err(CliError::Usage(_))), "{bad}");
        }
        assert_eq!(
            parse_mac("02:00:00:00:00:0a").ok(),
            Some(EthernetAddress([2, 0, 0, 0, 0, 10]))
        );
        for bad in [
            "02:00:00:00:00",
            "01:00:00:00:00:00",
            "02:00:00:00:00:00:00",
            "zz:00:00:00:00:00",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_cores("0-2,5").ok(), Some(vec![0, 1, 2, 5]));
        assert!(parse_cores("3-1").is_err());
    }

    /// A command that takes only the live I/O options.
    #[derive(Debug, clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        io: IoArgs,
    }

    /// `IoArgs` as a command line would give them.
    fn io_args(args: &[&str]) -> Result<IoArgs, clap::Error> {
        let argv = ["rsstack"].iter().chain(args).copied();
        <Cmd as clap::Parser>::try_parse_from(argv).map(|c| c.io)
    }

    /// A valid, empty Ethernet capture in the temporary directory, unique to `name`.
    fn empty_pcap(name: &str) -> String {
        let path = std::env::temp_dir().join(format!("rsstack-{}-{name}.pcap", std::process::id()));
        let file = std::fs::File::create(&path).expect("create the capture");
        platform::pcap::PcapWriter::new(file).expect("write its header");
        path.display().to_string()
    }

    #[test]
    fn pcap_replays_are_read_through_up_front_and_refused_with_a_sentence() {
        let good = empty_pcap("good");
        assert!(
            io_args(&["--pcap-in", &good, "--ip", "10.0.0.2/24"])
                .expect("parses")
                .resolve()
                .is_ok()
        );
        let empty = std::env::temp_dir().join(format!("rsstack-{}-empty.pcap", std::process::id()));
        std::fs::write(&empty, b"").expect("an empty file");
        let empty = empty.display().to_string();
        for (path, expect) in [
            (empty.as_str(), "ends inside a file header"),
            ("/nonexistent/x.pcap", "cannot open it"),
        ] {
            let err = io_args(&["--pcap-in", path, "--ip", "10.0.0.2/24"])
                .expect("parses")
                .resolve()
                .err();
            assert!(
                matches!(&err, Some(CliError::Usage(m)) if m.contains(expect) && !m.contains("Truncated(")),
                "{path}: {err:?}"
            );
        }
        let _ = std::fs::remove_file(&good);
        let _ = std::fs::remove_file(&empty);
    }

    #[test]
    fn placement_pins_shards_per_plan_and_shows_it_in_the_listening_line() {
        let pcap = empty_pcap("placement");
        let live = io_args(&[
            "--pcap-in",
            &pcap,
            "--ip",
            "10.0.0.2/24",
            "--shards",
            "1",
            "--placement",
            "cache",
        ])
        .expect("parses")
        .resolve()
        .expect("resolves");
        let plan = live.plan.as_ref().expect("a plan");
        assert_eq!(live.host.cores, Some(vec![plan.shards[0].cpu]));
        assert_eq!(
            live.host.nodes,
            vec![plan.shards[0].pool_node.map(|n| n as u16)]
        );
        assert!(
            live.listening_line(7)
                .contains(", placement cache cpu/node "),
            "{}",
            live.listening_line(7)
        );
        // Without --placement: no plan, no nodes, the line as before.
        let plain = io_args(&["--pcap-in", &pcap, "--ip", "10.0.0.2/24"])
            .expect("parses")
            .resolve()
            .expect("resolves");
        assert!(plain.plan.is_none() && plain.host.nodes.is_empty());
        assert!(plain.listening_line(7).ends_with("1 queues)"));
        let _ = std::fs::remove_file(&pcap);
    }

    #[test]
    fn af_packet_ring_is_chosen_shown_and_refused_elsewhere() {
        let base = ["--iface", "veth1", "--ip", "10.0.0.2/24"];
        let resolve = |extra: &[&str]| {
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            io_args(&args).expect("parses").resolve()
        };
        for (extra, ring) in [
            (&[][..], AF_PACKET_RING_DEFAULT),
            (&["--af-packet-ring", "v2"][..], RingVersion::V2),
            (
                &["--io", "af_packet", "--af-packet-ring", "v3"][..],
                RingVersion::V3,
            ),
        ] {
            let live = resolve(extra).expect("valid");
            assert_eq!(
                live.live.io,
                LiveIo::AfPacket {
                    iface: "veth1".into(),
                    ring
                },
                "{extra:?}"
            );
            let line = live.listening_line(7);
            assert!(
                line.contains(&format!("(af_packet veth1 {}, 1 shards", ring.name())),
                "{line}"
            );
        }
        let xdp = resolve(&["--io", "af_xdp"]).expect("valid");
        assert!(xdp.listening_line(7).contains("(af_xdp veth1, 1 shards"));
        for extra in [
            &[
                "--iface",
                "veth1",
                "--io",
                "af_xdp",
                "--af-packet-ring",
                "v2",
            ][..],
            &["--tap", "tap0", "--af-packet-ring", "v3"][..],
        ] {
            let args: Vec<&str> = extra
                .iter()
                .chain(&["--ip", "10.0.0.2/24"])
                .copied()
                .collect();
            let io = io_args(&args).expect("parses");
            let err = io.resolve().err();
            assert!(
                matches!(&err, Some(CliError::Usage(m)) if m.contains("--af-packet-ring")),
                "{extra:?}: {err:?}"
            );
        }
        assert!(io_args(&["--iface", "veth1", "--af-packet-ring", "v4"]).is_err());
    }

    #[test]
    fn help_states_the_default_af_packet_ring() {
        let help = <Cmd as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        let short = AF_PACKET_RING_DEFAULT.name().trim_start_matches("tpacket_");
        assert!(help.contains(&format!("[default: {short}]")), "{help}");
    }

    #[test]
    fn derived_macs_are_local_unicast_and_stable() {
        let a = mac_for("rsst0");
        assert_eq!(a, mac_for("rsst0"));
        assert_ne!(a, mac_for("rsst1"));
        assert_eq!(a.0[0], 0x02);
    }
}
