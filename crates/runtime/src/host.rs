//! Live hosts: [`run_host`] runs one host whose shards talk to OS ports directly (no wire
//! thread): each shard's [`crate::shard`] loop reads its port into its one-queue NIC model,
//! runs its stack and application, and writes its transmit frames to the OS.
//!
//! # Steering follows rsstack's RSS, in software
//!
//! None of the kernel-side spreaders (tun's automatic queue selection, `PACKET_FANOUT_HASH`,
//! a veth's single queue) follows our Toeplitz key and RETA. So on a live host with more than
//! one shard every shard computes our hash (its NIC model does, for every frame) and forwards
//! each frame it does not own to the owning shard over the bounded cross-shard rings (counted
//! `cross_shard_tx`, dropped frames `cross_shard_drop_ring_full`): forwarding is on whenever
//! `shards > 1`. Per backend:
//!
//! - **TAP**: opened with `IFF_MULTI_QUEUE` (so a persistent `multi_queue` device created
//!   beforehand attaches; a single-queue persistent one is retried without the flag) with
//!   `queues` queues. Shard `q < queues` reads queue `q`: every queue opened is read, since
//!   the kernel's automatic steering spreads flows over all of them. With the default one
//!   queue, shard 0 reads everything and dispatches in software. Every shard writes its
//!   transmit frames to queue `shard % queues` (a TAP write is one whole frame, so sharing an
//!   fd is safe). We do not attach a steering program (`TUNSETSTEERINGEBPF`): our Toeplitz
//!   hash and RETA would have to be re-implemented as a hand-assembled eBPF program with map
//!   lookups for the key and the table, and the kernel picks the queue before we see the
//!   frame, so a mismatch between the two implementations would silently misroute; software
//!   dispatch from the queues we read is exact by construction.
//! - **AF_PACKET**: one socket per shard in one `PACKET_FANOUT` group (hash mode), with
//!   `PACKET_IGNORE_OUTGOING` so a shard does not see its own transmissions. The ring is
//!   TPACKET_V2 or TPACKET_V3 ([`LiveIo::AfPacket`]'s `ring`). V2: 240 slots of 68 KiB
//!   (16 blocks of 1 MiB), each frame handed over as soon as the kernel wrote it; a slot
//!   holds a 64 KiB GSO super-frame from a peer with TSO on whole. V3: 32 blocks of 256 KiB
//!   packed with frames, each block handed over when full or after 1 ms (so a quiet link
//!   delays every frame by up to 1 ms); a block holds a GSO super-frame whole too. A frame cut
//!   short anyway (`tp_snaplen < tp_len`) is dropped and counted (`rx_drop_truncated`), one
//!   whose ring header fails the checks is counted in `rx_drop_ring_invalid`. A frame marked
//!   `TP_STATUS_CSUMNOTREADY` (the peer's veth left the checksum to offload) has its TCP/UDP
//!   checksum completed in software (`rx_checksum_completed`).
//! - **AF_XDP**: one socket (own UMEM) per queue `0..queues`, the redirect program attached
//!   (native where the driver has it, generic otherwise; zero-copy where the driver offers it,
//!   copy otherwise). Shard `q < queues` reads socket `q`; shard `s` transmits on socket
//!   `s % queues` (behind a mutex, uncontended when `shards == queues`).
//! - **pcap replay**: the file's frames are fed to shard 0 as received traffic, as fast as its
//!   NIC ring takes them; transmitted frames are counted and discarded (and captured).
//!
//! # Neighbours
//!
//! All shards share one IP and MAC, but an ARP reply or Neighbor Advertisement reaches one
//! shard. The shard that reads an ARP/ND frame processes it and copies it to every other
//! shard (`neighbour_copies`), so no shard's connections wait on a resolution another shard
//! completed. (Every shard thus also answers an ARP request; the peer sees identical replies.)
//!
//! # Stopping
//!
//! The run ends when `stop` is set (the CLI sets it from SIGINT/SIGTERM), when
//! `limits.duration` passes, or, with `limits.stop_when_done`, when every shard's application
//! says it is done. Shards notice within one idle wait ([`crate::shard::IDLE_SLEEP_NS_MAX`]);
//! all threads are joined before `run_host` returns. Ports close (and the XDP program detaches)
//! after the shards stopped; a pre-existing TAP device is left in place.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use app::{App, ShardInfo};
use platform::af_packet::{
    AfPacketConfig, AfPacketSocket, FanoutMode, RingVersion, V2_FRAME_OFFSET_BYTES,
};
use platform::af_xdp::{XdpAttachment, XdpBindMode, XdpConfig, XdpPort};
use platform::bpf::XdpAttachMode;
use platform::pcap::{LINKTYPE_ETHERNET, PcapReader};
use platform::tap::{TapDevice, TapOffload};
use platform::vnet::tun_f;

use crate::io::PortCounters;
use crate::live::ShardSnapshot;
use crate::port::{Capture, LivePort, PortKind};
use crate::{
    HostConfig, HostReport, HostShared, RuntimeError, ShardMode, build_host, check, join_all,
    start_all,
};

/// Frames a pcap replay file may hold (the whole file is read before the run starts).
pub const REPLAY_FRAMES_MAX: usize = 1_000_000;
/// AF_PACKET TPACKET_V3 ring block size, bytes: holds a 64 KiB GSO super-frame whole.
pub const AF_PACKET_BLOCK_BYTES: u32 = 1 << 18;
/// AF_PACKET TPACKET_V3 ring blocks per socket (8 MiB of ring).
pub const AF_PACKET_BLOCKS: u32 = 32;
/// AF_PACKET TPACKET_V3 block retire timeout, milliseconds (the kernel's minimum): the
/// longest a frame waits in a block that is not full.
pub const AF_PACKET_RETIRE_TIMEOUT_MS: u32 = 1;
/// AF_PACKET TPACKET_V2 slot size, bytes (17 pages): the kernel's header area before the
/// frame ([`V2_FRAME_OFFSET_BYTES`]) plus a whole GSO super-frame ([`GSO_FRAME_BYTES_MAX`]).
pub const AF_PACKET_V2_SLOT_BYTES: u32 = 69_632;
/// AF_PACKET TPACKET_V2 block size, bytes: 15 slots (a block is one contiguous kernel
/// allocation of a power-of-two number of pages, so slots are grouped rather than one each).
pub const AF_PACKET_V2_BLOCK_BYTES: u32 = 1 << 20;
/// AF_PACKET TPACKET_V2 blocks per socket: 240 slots, 16 MiB of ring.
pub const AF_PACKET_V2_BLOCKS: u32 = 16;
/// The ring version of `--io af_packet` when none is asked for: V2, whose frames are handed
/// over as soon as the kernel wrote them (measured on veth against V3's 1 ms block retire:
/// a quarter of the ping round trip and about four times the iperf throughput, requests/s
/// even within the noise; see README "Live interfaces").
pub const AF_PACKET_RING_DEFAULT: RingVersion = RingVersion::V2;

/// Largest frame an AF_PACKET host accepts, bytes: a 64 KiB IP packet (a GSO super-frame
/// from a peer with TSO on) plus Ethernet and VLAN headers.
pub const GSO_FRAME_BYTES_MAX: usize = 65_535 + 14 + 4;

const _: () = assert!(
    AF_PACKET_V2_SLOT_BYTES as usize >= V2_FRAME_OFFSET_BYTES as usize + GSO_FRAME_BYTES_MAX,
    "a V2 slot takes a GSO super-frame whole"
);

/// The AF_PACKET socket configuration of a live host for `ring`, joining fanout group
/// `fanout` when given.
pub fn af_packet_config(ring: RingVersion, fanout: Option<u16>) -> AfPacketConfig {
    let (block_size_bytes, block_count, frame_size_bytes) = match ring {
        RingVersion::V2 => (
            AF_PACKET_V2_BLOCK_BYTES,
            AF_PACKET_V2_BLOCKS,
            AF_PACKET_V2_SLOT_BYTES,
        ),
        RingVersion::V3 => (AF_PACKET_BLOCK_BYTES, AF_PACKET_BLOCKS, 2048),
    };
    AfPacketConfig {
        ring,
        block_size_bytes,
        block_count,
        frame_size_bytes,
        retire_timeout_ms: AF_PACKET_RETIRE_TIMEOUT_MS,
        fanout: fanout.map(|group| (group, FanoutMode::Hash)),
        qdisc_bypass: false,
        ignore_outgoing: true,
        vnet_hdr: false,
        tx_block_count: 0,
    }
}

/// The OS port a live host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveIo {
    /// A TAP device (created, or attached to when it exists) with `queues` queues.
    Tap { name: String, queues: u16 },
    /// AF_PACKET sockets on an existing interface, one per shard, with `ring` receive rings.
    AfPacket { iface: String, ring: RingVersion },
    /// AF_XDP sockets on queues `0..queues` of an existing interface.
    AfXdp { iface: String, queues: u16 },
    /// Frames of a pcap file (link type Ethernet) replayed as received traffic.
    PcapIn { path: PathBuf },
}

impl LiveIo {
    /// The backend's short name: `tap`, `af_packet`, `af_xdp` or `pcap`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            LiveIo::Tap { .. } => "tap",
            LiveIo::AfPacket { .. } => "af_packet",
            LiveIo::AfXdp { .. } => "af_xdp",
            LiveIo::PcapIn { .. } => "pcap",
        }
    }

    /// The receive ring version of an AF_PACKET port; `None` for the other backends.
    pub fn af_packet_ring(&self) -> Option<RingVersion> {
        match self {
            LiveIo::AfPacket { ring, .. } => Some(*ring),
            _ => None,
        }
    }

    /// The interface name (or the replayed file).
    pub fn target(&self) -> String {
        match self {
            LiveIo::Tap { name, .. } => name.clone(),
            LiveIo::AfPacket { iface, .. } | LiveIo::AfXdp { iface, .. } => iface.clone(),
            LiveIo::PcapIn { path } => path.display().to_string(),
        }
    }
}

/// A live host's port and capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveConfig {
    pub io: LiveIo,
    /// Append every frame received and sent by any shard to this pcap file.
    pub capture: Option<PathBuf>,
}

/// When [`run_host`] stops (besides its `stop` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    /// Stop after this long; `None`: run until stopped.
    pub duration: Option<Duration>,
    /// Stop once every shard's application says it is done.
    pub stop_when_done: bool,
    /// How often the monitor callback runs.
    pub monitor_every: Duration,
}

/// What the monitor callback of [`run_host`] sees.
#[derive(Debug, Clone)]
pub struct HostView {
    pub elapsed: Duration,
    /// Every shard has started its application (listeners exist, connects were issued).
    pub ready: bool,
    pub shards: Vec<ShardSnapshot>,
}

/// The outcome of [`run_host`].
#[derive(Debug)]
pub struct LiveReport<A> {
    pub host: HostReport<A>,
    /// Wall time from start to stop.
    pub elapsed: Duration,
    /// Records written to the capture file, when one was asked for.
    pub capture_records: Option<u64>,
    /// The AF_XDP sockets run in zero-copy mode.
    pub zero_copy: bool,
    /// What the rebalancer did, when the host rebalanced.
    pub rebalance: Option<crate::RebalanceReport>,
    /// The offload engine, when the host had one (shard 0's layer reports in its
    /// [`crate::ShardReport::offload`], the port's filter in its port counters).
    pub engine: Option<crate::EngineReport>,
}

impl<A> LiveReport<A> {
    /// The ports' counters summed over the shards (capture write failures included).
    pub fn port_counters(&self) -> PortCounters {
        self.host.port_counters()
    }
}

fn io_err(what: &str, e: std::io::Error) -> RuntimeError {
    RuntimeError::Io(format!("{what}: {e}"))
}

/// Opened ports, one per shard, and what must outlive them.
pub(crate) struct Opened {
    pub(crate) ports: Vec<LivePort>,
    /// Keeps the XDP program attached until the shards stopped.
    pub(crate) xdp: Option<XdpAttachment>,
    pub(crate) zero_copy: bool,
}

pub(crate) fn open_ports(
    cfg: &HostConfig,
    io: &LiveIo,
    capture: &Option<Arc<Capture>>,
) -> Result<Opened, RuntimeError> {
    open_ports_in_group(cfg, io, capture, (std::process::id() & 0xffff) as u16, None)
}

/// [`open_ports`] with AF_PACKET fanout group `fanout_group` (a process opening several
/// interfaces needs one group each: the kernel refuses one group id on two devices) and,
/// when given, an AF_PACKET socket configuration of the caller's (its fanout is replaced).
pub(crate) fn open_ports_in_group(
    cfg: &HostConfig,
    io: &LiveIo,
    capture: &Option<Arc<Capture>>,
    fanout_group: u16,
    af_packet: Option<AfPacketConfig>,
) -> Result<Opened, RuntimeError> {
    let shards = usize::from(cfg.shards);
    let forwarding = shards > 1;
    let queues = usize::from(cfg.queues);
    let mut frame_bytes_max = usize::from(cfg.interface.mtu_bytes) + 14 + 4;
    let tap_vnet = matches!(io, LiveIo::Tap { .. }) && cfg.nic_offload.needs_vnet_hdr();
    if tap_vnet && cfg.nic_offload.gro {
        // The kernel hands the reader coalesced frames of up to 64 KiB.
        frame_bytes_max = frame_bytes_max.max(GSO_FRAME_BYTES_MAX);
    }
    let port = |kind: PortKind, wait_fd| LivePort {
        kind,
        wait_fd,
        capture: capture.clone(),
        rx_buf_bytes: frame_bytes_max.max(2048) + 1,
        forwarding,
        nic_offload: cfg.nic_offload,
        counters: PortCounters::default(),
        steer: None,
    };
    let mut ports = Vec::with_capacity(shards);
    let mut xdp = None;
    let mut zero_copy = false;
    match io {
        LiveIo::Tap { name, .. } => {
            let off = cfg.nic_offload;
            let open = |multi_queue: bool| {
                if tap_vnet {
                    TapDevice::open_vnet(name, queues, multi_queue, tap_offload(off))
                } else if multi_queue {
                    TapDevice::open_multi_queue(name, queues)
                } else {
                    TapDevice::open(name, queues)
                }
            };
            let dev = match open(true) {
                Ok(d) => d,
                // A persistent single-queue device refuses the multi-queue flag.
                Err(e) if queues == 1 && e.raw_os_error() == Some(EINVAL) => {
                    open(false).map_err(|e| io_err(&format!("tap {name}"), e))?
                }
                Err(e) => return Err(io_err(&format!("tap {name}"), e)),
            };
            dev.set_up()
                .map_err(|e| io_err(&format!("tap {name}: set up"), e))?;
            let qs: Vec<_> = dev.into_queues().into_iter().map(Arc::new).collect();
            for i in 0..shards {
                let tx = qs[i % qs.len()].clone();
                let rx = qs.get(i).cloned();
                let wait_fd = match &rx {
                    Some(q) => Some(
                        q.as_fd()
                            .try_clone_to_owned()
                            .map_err(|e| io_err("tap: dup", e))?,
                    ),
                    None => None,
                };
                ports.push(port(PortKind::Tap { rx, tx }, wait_fd));
            }
        }
        LiveIo::AfPacket { iface, ring } => {
            platform::tap::set_interface_up(iface)
                .map_err(|e| io_err(&format!("af_packet {iface}: set up"), e))?;
            let fanout = (shards > 1).then_some((fanout_group, FanoutMode::Hash));
            let pcfg = match af_packet {
                Some(c) => AfPacketConfig { fanout, ..c },
                None => AfPacketConfig {
                    fanout,
                    ..af_packet_config(*ring, None)
                },
            };
            // A virtio-net header on every frame when any offload is on: TSO and checksum
            // requests out, the kernel's checksum verdicts and GSO frames in.
            let pcfg = AfPacketConfig {
                vnet_hdr: cfg.nic_offload.needs_vnet_hdr(),
                ..pcfg
            };
            for _ in 0..shards {
                let sock = AfPacketSocket::open(iface, &pcfg)
                    .map_err(|e| io_err(&format!("af_packet {iface}"), e))?;
                let wait_fd = sock
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(|e| io_err("af_packet: dup", e))?;
                ports.push(port(PortKind::AfPacket(Box::new(sock)), Some(wait_fd)));
            }
        }
        LiveIo::AfXdp { iface, .. } => {
            platform::tap::set_interface_up(iface)
                .map_err(|e| io_err(&format!("af_xdp {iface}: set up"), e))?;
            let xcfg = XdpConfig {
                bind_mode: XdpBindMode::Auto,
                ..XdpConfig::default()
            };
            let q = u32::try_from(queues).unwrap_or(1);
            let xport = XdpPort::open(iface, q, &xcfg, XdpAttachMode::Auto)
                .map_err(|e| io_err(&format!("af_xdp {iface}"), e))?;
            let (attachment, sockets) = xport.into_parts();
            zero_copy = sockets.iter().all(|s| s.is_zero_copy());
            let mut fds = Vec::new();
            for s in &sockets {
                fds.push(
                    s.as_fd()
                        .try_clone_to_owned()
                        .map_err(|e| io_err("af_xdp: dup", e))?,
                );
            }
            let socks: Vec<_> = sockets
                .into_iter()
                .map(|s| Arc::new(Mutex::new(s)))
                .collect();
            for i in 0..shards {
                let sock = socks[i % socks.len()].clone();
                let rx = i < socks.len();
                let wait_fd = if rx {
                    Some(fds[i].try_clone().map_err(|e| io_err("af_xdp: dup", e))?)
                } else {
                    None
                };
                ports.push(port(PortKind::AfXdp { sock, rx }, wait_fd));
            }
            xdp = Some(attachment);
        }
        LiveIo::PcapIn { path } => {
            let file = File::open(path).map_err(|e| io_err(&path.display().to_string(), e))?;
            let reader = PcapReader::new(BufReader::new(file))
                .map_err(|e| RuntimeError::Io(format!("{}: {e}", path.display())))?;
            if reader.link_type() != LINKTYPE_ETHERNET {
                return Err(RuntimeError::Io(format!(
                    "{}: link type {} is not Ethernet (1)",
                    path.display(),
                    reader.link_type()
                )));
            }
            let mut frames = VecDeque::new();
            for rec in reader {
                let rec = rec.map_err(|e| RuntimeError::Io(format!("{}: {e}", path.display())))?;
                if frames.len() == REPLAY_FRAMES_MAX {
                    return Err(RuntimeError::Io(format!(
                        "{}: more than {REPLAY_FRAMES_MAX} frames",
                        path.display()
                    )));
                }
                frames.push_back(rec.data);
            }
            for i in 0..shards {
                let frames = if i == 0 {
                    std::mem::take(&mut frames)
                } else {
                    VecDeque::new()
                };
                ports.push(port(PortKind::Replay { frames }, None));
            }
        }
    }
    Ok(Opened {
        ports,
        xdp,
        zero_copy,
    })
}

/// Linux's `EINVAL`.
const EINVAL: i32 = 22;

/// What the kernel may hand a TAP reader (`TUNSETOFFLOAD`): coalesced TCP frames with `gro`
/// (they need partial checksums: `TUN_F_CSUM` too), partial checksums with `csum`.
fn tap_offload(off: crate::NicOffload) -> TapOffload {
    let mut tun_flags = 0;
    if off.csum || off.gro {
        tun_flags |= tun_f::CSUM;
    }
    if off.gro {
        tun_flags |= tun_f::TSO4 | tun_f::TSO6 | tun_f::TSO_ECN;
    }
    TapOffload { tun_flags }
}

/// Runs one host over live ports until `stop` is set, `limits.duration` passes, or (with
/// `limits.stop_when_done`) every shard's application is done; calls `monitor` every
/// `limits.monitor_every` (the first call with `ready` set comes once every shard started its
/// application). `cfg.queues` is the number of TAP or AF_XDP queues (`1..=shards`; ignored for
/// AF_PACKET and replay).
pub fn run_host<A, F>(
    cfg: &HostConfig,
    live: &LiveConfig,
    factory: F,
    limits: HostLimits,
    stop: Arc<AtomicBool>,
    mut monitor: impl FnMut(&HostView),
) -> Result<LiveReport<A>, RuntimeError>
where
    A: App + Send + 'static,
    F: Fn(ShardInfo) -> A + Send + Sync + 'static,
{
    check(cfg, "host")?;
    if cfg.offload.is_some() {
        if !matches!(live.io, LiveIo::Tap { .. } | LiveIo::AfPacket { .. }) {
            return Err(RuntimeError::Config(format!(
                "an offload engine runs on TAP or AF_PACKET ports (and the mem wire), not {}",
                live.io.kind_name()
            )));
        }
        if cfg.rebalance.is_some() {
            return Err(RuntimeError::Config(
                "an offload engine and rebalancing do not go together".into(),
            ));
        }
    }
    let mut cfg = cfg.clone();
    if matches!(live.io, LiveIo::AfPacket { .. })
        || (matches!(live.io, LiveIo::Tap { .. }) && cfg.nic_offload.gro)
    {
        // A peer with TSO/GSO on hands a veth super-frames of up to 64 KiB: let the NIC
        // model take them whole (the stack then sees TCP segments larger than the MSS).
        cfg.nic.rx_frame_bytes_max = cfg.nic.rx_frame_bytes_max.max(GSO_FRAME_BYTES_MAX);
    }
    let cfg = &cfg;
    let capture = match &live.capture {
        Some(p) => Some(Arc::new(
            Capture::create(p).map_err(|e| io_err(&p.display().to_string(), e))?,
        )),
        None => None,
    };
    let mut opened = open_ports(cfg, &live.io, &capture)?;
    let epoch = Instant::now();
    let s = usize::from(cfg.shards);
    // With an offload engine the thread list has one more entry: the engine's (index `s`).
    let engines = usize::from(cfg.offload.is_some());
    let threads: Arc<Vec<OnceLock<Thread>>> =
        Arc::new((0..s + engines).map(|_| OnceLock::new()).collect());
    let (shard_offload, engine) = match (&cfg.offload, opened.ports.first_mut()) {
        (Some(o), Some(port0)) => {
            let iface = match &live.io {
                LiveIo::AfPacket { iface, .. } => Some(iface.as_str()),
                _ => None,
            };
            let (so, e) = crate::offload_live::parts(cfg, o, port0, iface, &threads, &stop, epoch)?;
            (Some(so), Some(e))
        }
        _ => (None, None),
    };
    let mode = ShardMode {
        forwarding: true,
        mesh: false,
        count_buckets: cfg.rebalance.is_some(),
        copy_neighbour: true,
    };
    // Rebalancing: a control ring to each shard for the monitor thread's `MoveIn`s.
    let mut controls: Vec<Option<crate::shard::Control>> = (0..s).map(|_| None).collect();
    let mut rebalancer = None;
    if let Some(r) = &cfg.rebalance {
        let mut to_shards = Vec::with_capacity(s);
        for c in &mut controls {
            let (to_shard, from_wire) = crate::ring::ring(rss::RETA_SIZE_DEFAULT * 2);
            to_shards.push(to_shard);
            *c = Some(crate::shard::Control {
                from_wire,
                to_wire: None,
                wire_thread: Arc::new(OnceLock::new()),
            });
        }
        let owners = rss::Reta::with_equal(rss::RETA_SIZE_DEFAULT, cfg.shards)
            .map_err(|e| RuntimeError::Config(format!("host: reta: {e:?}")))?
            .entries()
            .to_vec();
        rebalancer = Some(
            crate::rebalance::LiveRebalancer::new(r, owners, to_shards)
                .map_err(|e| RuntimeError::Config(format!("host: {e}")))?,
        );
    }
    let threads_for_moves = threads.clone();
    let shared = HostShared {
        stop: stop.clone(),
        epoch,
        threads,
    };
    let (starters, lives) = build_host(
        cfg,
        "host",
        Arc::new(factory),
        &shared,
        opened.ports,
        mode,
        crate::Extras {
            controls,
            offload: shard_offload,
        },
    )?;
    let mut spawn_err = None;
    let engine_handle = match engine.map(|st| st()) {
        Some(Ok(h)) => Some(h),
        Some(Err(e)) => {
            spawn_err = Some(e);
            None
        }
        None => None,
    };
    let handles = start_all(starters, &mut spawn_err);
    if spawn_err.is_none() {
        let mut next_monitor = limits.monitor_every.max(Duration::from_millis(1));
        loop {
            let elapsed_now = epoch.elapsed();
            let mut step = next_monitor.saturating_sub(elapsed_now);
            if let Some(r) = &rebalancer {
                let now = u64::try_from(elapsed_now.as_nanos()).unwrap_or(u64::MAX);
                step = step.min(Duration::from_nanos(r.due_in_ns(now)));
            }
            let step = match limits.duration {
                Some(d) => step.min(d.saturating_sub(elapsed_now)),
                None => step,
            };
            std::thread::sleep(step);
            if let Some(r) = &mut rebalancer {
                let now = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
                r.tick(now, &lives, &threads_for_moves);
            }
            let due = epoch.elapsed() >= next_monitor
                || stop.load(Ordering::Acquire)
                || limits.duration.is_some_and(|d| epoch.elapsed() >= d);
            if !due {
                continue;
            }
            next_monitor = epoch.elapsed() + limits.monitor_every.max(Duration::from_millis(1));
            let shards: Vec<ShardSnapshot> = lives.iter().map(|l| l.snapshot()).collect();
            let view = HostView {
                elapsed: epoch.elapsed(),
                ready: shards.iter().all(|s| s.started),
                shards,
            };
            monitor(&view);
            let all_done = view.shards.iter().all(|s| s.done);
            if stop.load(Ordering::Acquire)
                || limits.duration.is_some_and(|d| epoch.elapsed() >= d)
                || (limits.stop_when_done && all_done)
            {
                break;
            }
        }
    }
    stop.store(true, Ordering::Release);
    let elapsed = epoch.elapsed();
    let mut shards = join_all(handles)?;
    let engine = match engine_handle {
        Some(h) => {
            h.thread().unpark();
            Some(
                h.join()
                    .map_err(|_| RuntimeError::Thread("the offload engine panicked".into()))?,
            )
        }
        None => None,
    };
    drop(opened.xdp);
    if let Some(e) = spawn_err {
        return Err(e);
    }
    let capture_records = match &capture {
        Some(c) => {
            let n = c.finish().map_err(|e| io_err("capture: flush", e))?;
            if let Some(first) = shards.first_mut() {
                first.port.capture_errors = c.errors();
            }
            Some(n)
        }
        None => None,
    };
    Ok(LiveReport {
        host: {
            let mut h = HostReport::from_shards(shards, None);
            h.filters.rules = cfg.rules.clone();
            h
        },
        elapsed,
        capture_records,
        zero_copy: opened.zero_copy,
        rebalance: rebalancer.map(crate::rebalance::LiveRebalancer::into_report),
        engine,
    })
}
