//! Bulk transfer between two rsstack [`Stack`]s over a perfect in-memory link.
//!
//! The client streams `bytes` bytes of [`Pattern`] to the server, which reads everything.
//! Frames move straight from one stack's `poll_transmit` to the other's `receive` (no loss,
//! no delay, no reordering). The virtual clock stands still while frames move and jumps to
//! the earliest deadline of either stack only when nothing moved in a round (the
//! two-endpoint harness of STYLE.md "Sans-IO engines").
//!
//! Setup (stack construction, ARP, the handshake, buffers) happens before
//! [`bulk_transfer_loop`]; callgrind counts only that function (`--toggle-collect`), and the
//! wall clock times only it.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use stack::RxMeta;
use std::time::Instant;

use stack::{InterfaceConfig, Ipv4Cidr, SocketError, SocketHandle, Stack, StackConfig};
use wire::{ChecksumCaps, EthernetAddress};

use crate::frame::is_data_segment;
use crate::pattern::{Pattern, StreamHash};

pub const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
pub const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const SERVER_PORT: u16 = 5001;
/// Largest chunk the application hands to `send` or reads with `recv` in one call.
pub const APP_CHUNK_BYTES: usize = 64 * 1024;
/// Rounds in a row that may pass with nothing moved (only timers firing) before the transfer
/// is declared stalled.
const IDLE_ROUNDS_MAX: u32 = 10_000;
/// Virtual time after which a transfer counts as stalled (a perfect link needs ~0).
const VIRTUAL_NS_MAX: u64 = 3_600_000_000_000;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkOptions {
    /// Bytes the client sends.
    pub bytes: u64,
    /// Hash the sent and the received stream (costs ~4 instructions a byte, so instruction
    /// counts are taken without it).
    pub verify: bool,
    /// Both stacks leave checksums to the "NIC" (neither fills nor verifies them).
    pub checksum_offload: bool,
    /// RFC 7323 timestamps (rsstack's default: on; 12 option bytes per segment, so 1448
    /// payload bytes per full segment instead of 1460).
    pub timestamps: bool,
    /// Both stacks ask for and agree on ECN (RFC 3168, `EcnMode::On`; rsstack's default is
    /// off). A connection with ECN negotiated never takes header prediction's short path
    /// (`tcp/src/connection/predict.rs`), so this runs the transfer through the full input
    /// path (`scripts/bench-hot-bytes.sh` compares the two).
    pub ecn: bool,
}

impl BulkOptions {
    /// `bytes` with rsstack's defaults: software checksums, timestamps on, no verification.
    pub fn new(bytes: u64) -> BulkOptions {
        BulkOptions {
            bytes,
            verify: false,
            checksum_offload: false,
            timestamps: true,
            ecn: false,
        }
    }
}

/// What a bulk transfer measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkReport {
    /// Bytes the server application read.
    pub bytes: u64,
    /// Frames carrying TCP payload (client → server; the server sends none).
    pub data_segments: u64,
    /// Every frame client → server (data segments plus any pure ACKs or control).
    pub frames_to_server: u64,
    /// Every frame server → client (ACKs, window updates).
    pub frames_to_client: u64,
    /// Times the clock had to jump to a deadline because nothing was moving.
    pub clock_jumps: u64,
    /// Virtual time the transfer took.
    pub virtual_ns: u64,
    /// Wall time of the transfer loop alone.
    pub wall_ns: u64,
    /// Stream hashes (sent, received) when `verify` was asked for.
    pub hashes: Option<(StreamHash, StreamHash)>,
}

impl BulkReport {
    /// Payload throughput of the wall-clock run, in Gbit/s.
    pub fn wall_gbit_per_s(&self) -> f64 {
        if self.wall_ns == 0 {
            return 0.0;
        }
        self.bytes as f64 * 8.0 / self.wall_ns as f64
    }
}

/// Why a bulk run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkError {
    /// A socket call failed during setup or transfer.
    Socket(&'static str, SocketError),
    /// The handshake did not complete.
    NotConnected,
    /// Nothing moved and no timer made progress.
    Stalled { received_bytes: u64 },
}

impl core::fmt::Display for BulkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BulkError::Socket(what, e) => write!(f, "{what}: {e}"),
            BulkError::NotConnected => f.write_str("the handshake did not complete"),
            BulkError::Stalled { received_bytes } => {
                write!(f, "transfer stalled after {received_bytes} bytes")
            }
        }
    }
}

impl std::error::Error for BulkError {}

/// A stack configuration for one end of the link (IPv4 /24, MTU 1500 so MSS 1460).
pub fn stack_config(mac: EthernetAddress, ip: Ipv4Addr, checksum_offload: bool) -> StackConfig {
    let mut cfg = StackConfig::new(InterfaceConfig::new(mac, Ipv4Cidr::new(ip, 24)));
    if checksum_offload {
        cfg.checksums = ChecksumCaps::NONE;
    }
    cfg
}

pub(crate) fn bulk_config(mac: EthernetAddress, ip: Ipv4Addr, opts: &BulkOptions) -> StackConfig {
    let mut cfg = stack_config(mac, ip, opts.checksum_offload);
    cfg.tcp.timestamps = opts.timestamps;
    if opts.ecn {
        cfg.tcp.ecn = tcp::EcnMode::On;
    }
    cfg
}

/// Two stacks joined by the perfect link, with one established connection.
#[derive(Debug)]
pub struct BulkLink {
    pub client: Stack,
    pub server: Stack,
    pub now: u64,
    pub client_sock: SocketHandle,
    pub server_sock: SocketHandle,
}

/// Moves frames both ways until neither stack has anything to send; returns the frames moved
/// (client → server, server → client). Bounded: a link that never settles is reported as
/// stalled.
fn settle(client: &mut Stack, server: &mut Stack, now: u64) -> Result<(u64, u64), BulkError> {
    let (mut up, mut down) = (0u64, 0u64);
    for _ in 0..IDLE_ROUNDS_MAX {
        let (u0, d0) = (up, down);
        while let Some(f) = client.poll_transmit(now) {
            up += 1;
            server.receive(now, &f, &RxMeta::NONE);
            client.recycle(f);
        }
        while let Some(f) = server.poll_transmit(now) {
            down += 1;
            client.receive(now, &f, &RxMeta::NONE);
            server.recycle(f);
        }
        if (up, down) == (u0, d0) {
            return Ok((up, down));
        }
    }
    Err(BulkError::Stalled { received_bytes: 0 })
}

impl BulkLink {
    /// Builds both stacks, resolves the neighbour and completes the handshake.
    pub fn connect(opts: &BulkOptions) -> Result<BulkLink, BulkError> {
        let mut client = Stack::new(bulk_config(CLIENT_MAC, CLIENT_IP, opts));
        let mut server = Stack::new(bulk_config(SERVER_MAC, SERVER_IP, opts));
        let server_addr = SocketAddr::new(IpAddr::V4(SERVER_IP), SERVER_PORT);
        let listener = server
            .tcp_listen(server_addr, 1)
            .map_err(|e| BulkError::Socket("listen", e))?;
        let now = 0;
        let client_sock = client
            .tcp_connect(now, server_addr, 0)
            .map_err(|e| BulkError::Socket("connect", e))?;
        settle(&mut client, &mut server, now)?;
        let (server_sock, _) = server
            .tcp_accept(listener)
            .map_err(|_| BulkError::NotConnected)?;
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
        Ok(BulkLink {
            client,
            server,
            now,
            client_sock,
            server_sock,
        })
    }
}

/// Counts of one transfer loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferCounts {
    pub received_bytes: u64,
    pub data_segments: u64,
    pub frames_to_server: u64,
    pub frames_to_client: u64,
    pub clock_jumps: u64,
    pub sent_hash: StreamHash,
    pub received_hash: StreamHash,
}

/// The measured part: the client sends `bytes` bytes, the server reads them all. Each round:
/// the client application writes what fits; frames move client → server; the server
/// application reads everything ready; frames move server → client; both drain their
/// events. A round in which no frame moved jumps the clock to the earliest deadline.
///
/// Never inlined: the callgrind script selects exactly this function with
/// `--toggle-collect=*bulk_transfer_loop*`.
#[inline(never)]
pub fn bulk_transfer_loop(
    link: &mut BulkLink,
    pattern: &Pattern,
    read_buf: &mut [u8],
    bytes: u64,
    verify: bool,
) -> Result<TransferCounts, BulkError> {
    let mut c = TransferCounts::default();
    let mut sent: u64 = 0;
    let mut idle_rounds: u32 = 0;
    let (client, server) = (&mut link.client, &mut link.server);
    let mut now = link.now;
    while c.received_bytes < bytes {
        while sent < bytes {
            let want = usize::try_from(bytes - sent)
                .unwrap_or(usize::MAX)
                .min(APP_CHUNK_BYTES);
            let chunk = pattern.chunk(sent, want);
            match client.tcp_send(link.client_sock, chunk) {
                Ok(n) => {
                    if verify {
                        c.sent_hash.update(chunk.get(..n).unwrap_or(&[]));
                    }
                    sent += n as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(BulkError::Socket("send", e)),
            }
        }
        let moved_before = c.frames_to_server + c.frames_to_client;
        while let Some(f) = client.poll_transmit(now) {
            c.frames_to_server += 1;
            c.data_segments += u64::from(is_data_segment(&f));
            server.receive(now, &f, &RxMeta::NONE);
            client.recycle(f);
        }
        loop {
            match server.tcp_recv(link.server_sock, read_buf) {
                Ok(n) => {
                    if verify {
                        c.received_hash.update(read_buf.get(..n).unwrap_or(&[]));
                    }
                    c.received_bytes += n as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(BulkError::Socket("recv", e)),
            }
        }
        while let Some(f) = server.poll_transmit(now) {
            c.frames_to_client += 1;
            client.receive(now, &f, &RxMeta::NONE);
            server.recycle(f);
        }
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
        if c.frames_to_server + c.frames_to_client != moved_before {
            idle_rounds = 0;
            continue;
        }
        // Nothing moved: only a timer can make progress.
        idle_rounds += 1;
        let next = match (client.poll_timeout(), server.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => u64::MAX,
        };
        if idle_rounds > IDLE_ROUNDS_MAX
            || next == u64::MAX
            || next.saturating_sub(link.now) > VIRTUAL_NS_MAX
        {
            return Err(BulkError::Stalled {
                received_bytes: c.received_bytes,
            });
        }
        now = now.max(next);
        c.clock_jumps += 1;
        client.handle_timeout(now);
        server.handle_timeout(now);
    }
    link.now = now;
    Ok(c)
}

/// Runs one bulk transfer: setup, then the timed (and callgrind-counted) loop.
pub fn run(opts: BulkOptions) -> Result<BulkReport, BulkError> {
    let mut link = BulkLink::connect(&opts)?;
    let pattern = Pattern::new();
    let mut read_buf = vec![0u8; APP_CHUNK_BYTES];
    let start_ns = link.now;
    let start = Instant::now();
    let c = bulk_transfer_loop(&mut link, &pattern, &mut read_buf, opts.bytes, opts.verify)?;
    let wall_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    Ok(BulkReport {
        bytes: c.received_bytes,
        data_segments: c.data_segments,
        frames_to_server: c.frames_to_server,
        frames_to_client: c.frames_to_client,
        clock_jumps: c.clock_jumps,
        virtual_ns: link.now - start_ns,
        wall_ns,
        hashes: opts.verify.then_some((c.sent_hash, c.received_hash)),
    })
}

/// The one-line, `key=value` summary both bulk binaries print (the callgrind script parses
/// `data_segments=`).
pub fn summary_line(stack_name: &str, r: &BulkReport) -> String {
    let verified = match r.hashes {
        Some((s, d)) if s == d => "ok",
        Some(_) => "MISMATCH",
        None => "off",
    };
    format!(
        "stack={stack_name} bytes={} data_segments={} frames_to_server={} frames_to_client={} \
         clock_jumps={} virtual_ns={} wall_ns={} gbit_per_s={:.3} verify={verified}",
        r.bytes,
        r.data_segments,
        r.frames_to_server,
        r.frames_to_client,
        r.clock_jumps,
        r.virtual_ns,
        r.wall_ns,
        r.wall_gbit_per_s(),
    )
}
