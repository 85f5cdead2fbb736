//! The smoltcp side of the bulk benchmark (issue 3): the same transfer as
//! `bench::bulk`, between two `smoltcp::iface::Interface`s joined by an in-memory Ethernet
//! link, with TCP sockets sized like rsstack's defaults (256 KiB send and receive buffers,
//! MSS 1460 from a 1500-byte MTU). RFC 7323 timestamps stay off by default (smoltcp's own
//! default): with a TSval generator set, smoltcp 0.12 sizes data segments as
//! `min(remote MSS, IP MTU − IP header − 20)` without the 12 option bytes
//! (`src/socket/tcp.rs`, `dispatch`), so every full segment is a 1512-byte IP packet on a
//! 1500-byte MTU and is dropped before it reaches the link: the transfer stalls after the
//! handshake (raising the device MTU does not help, the segment grows with it). Compare with
//! `rsstack_bulk --no-timestamps` for like-for-like segments.
//!
//! Driving smoltcp: `Interface::poll` handles every queued ingress frame, then lets each
//! socket emit at most one packet; so after the application writes, the client is polled
//! until it emits nothing more (as rsstack's `poll_transmit` is drained), the frames move,
//! the server is polled, the application reads, the server is polled again so the ACK or
//! window update leaves, and the frames move back. The clock stands still while frames move
//! and jumps to the earliest `poll_at` only when nothing moved.
//!
//! Shared by `examples/smoltcp_bulk/main.rs` and `tests/smoltcp_bulk.rs` (dev-dependencies
//! reach examples and tests, not the library).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant as WallInstant;

use bench::bulk::{APP_CHUNK_BYTES, BulkOptions, BulkReport, SERVER_PORT};
use bench::frame::is_data_segment;
use bench::pattern::{Pattern, StreamHash};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

const BUFFER_BYTES: usize = 256 * 1024;
const CLIENT_PORT: u16 = 49152;
/// Rounds in a row with nothing moved before the run counts as stalled.
const IDLE_ROUNDS_MAX: u32 = 10_000;
/// Polls of one interface in one round (each emits at most one segment per socket).
const POLLS_PER_ROUND_MAX: usize = 4096;
/// Virtual time after which a transfer counts as stalled (a perfect link needs ~0).
const VIRTUAL_LIMIT: Duration = Duration::from_secs(3600);

/// One end of the in-memory link: frames waiting to be received, frames sent.
#[derive(Debug, Default)]
pub struct Port {
    pub rx: VecDeque<Vec<u8>>,
    pub tx: VecDeque<Vec<u8>>,
    pub checksum_offload: bool,
}

pub struct Rx(Vec<u8>);
pub struct Tx<'a>(&'a mut VecDeque<Vec<u8>>);

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // A fresh buffer per frame, as rsstack's `poll_transmit` returns a fresh `Vec`.
        let mut frame = vec![0u8; len];
        let r = f(&mut frame);
        self.0.push_back(frame);
        r
    }
}

impl phy::Device for Port {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(Rx, Tx<'_>)> {
        let frame = self.rx.pop_front()?;
        Some((Rx(frame), Tx(&mut self.tx)))
    }

    fn transmit(&mut self, _now: Instant) -> Option<Tx<'_>> {
        Some(Tx(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        if self.checksum_offload {
            caps.checksum = ChecksumCapabilities::ignored();
        }
        caps
    }
}

/// One host: interface, device and sockets.
pub struct Host {
    pub iface: Interface,
    pub port: Port,
    pub sockets: SocketSet<'static>,
    pub sock: SocketHandle,
}

static TSVAL: AtomicU32 = AtomicU32::new(1);

/// RFC 7323 TSval source (smoltcp asks for a plain `fn() -> u32`): a counter, which is all a
/// clock-less benchmark needs (PAWS only requires it not to go backwards).
fn tsval() -> u32 {
    TSVAL.fetch_add(1, Ordering::Relaxed)
}

fn host(mac: u8, ip: u8, checksum_offload: bool, timestamps: bool) -> Result<Host, String> {
    let mut port = Port {
        checksum_offload,
        ..Port::default()
    };
    let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress([
        0x02, 0, 0, 0, 0, mac,
    ])));
    config.random_seed = u64::from(mac);
    let mut iface = Interface::new(config, &mut port, Instant::ZERO);
    let mut pushed = Ok(());
    iface.update_ip_addrs(|a| {
        pushed = a.push(IpCidr::new(IpAddress::v4(10, 0, 0, ip), 24));
    });
    pushed.map_err(|_| "address table full".to_string())?;
    let mut sock = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; BUFFER_BYTES]),
        tcp::SocketBuffer::new(vec![0u8; BUFFER_BYTES]),
    );
    if timestamps {
        sock.set_tsval_generator(Some(tsval));
    }
    let mut sockets = SocketSet::new(Vec::new());
    let sock = sockets.add(sock);
    Ok(Host {
        iface,
        port,
        sockets,
        sock,
    })
}

impl Host {
    fn tcp(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.sock)
    }

    /// Polls until the interface emits nothing more; returns the frames it emitted.
    fn poll_drain(&mut self, now: Instant) -> usize {
        let before = self.port.tx.len();
        for _ in 0..POLLS_PER_ROUND_MAX {
            let queued = self.port.tx.len();
            self.iface.poll(now, &mut self.port, &mut self.sockets);
            if self.port.tx.len() == queued && self.port.rx.is_empty() {
                break;
            }
        }
        self.port.tx.len() - before
    }

    fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        self.iface.poll_at(now, &self.sockets)
    }
}

/// Both hosts with one established connection.
pub struct Link {
    pub client: Host,
    pub server: Host,
    pub now: Instant,
}

/// Moves every frame `from` sent to `to`'s receive queue; returns (frames, data segments).
fn carry(from: &mut Port, to: &mut Port) -> (u64, u64) {
    let (mut frames, mut data) = (0u64, 0u64);
    while let Some(f) = from.tx.pop_front() {
        frames += 1;
        data += u64::from(is_data_segment(&f));
        to.rx.push_back(f);
    }
    (frames, data)
}

impl Link {
    pub fn connect(checksum_offload: bool, timestamps: bool) -> Result<Link, String> {
        let mut client = host(0x0a, 1, checksum_offload, timestamps)?;
        let mut server = host(0x0b, 2, checksum_offload, timestamps)?;
        server
            .tcp()
            .listen(SERVER_PORT)
            .map_err(|e| format!("listen: {e}"))?;
        let cx = client.iface.context();
        client
            .sockets
            .get_mut::<tcp::Socket>(client.sock)
            .connect(cx, (IpAddress::v4(10, 0, 0, 2), SERVER_PORT), CLIENT_PORT)
            .map_err(|e| format!("connect: {e}"))?;
        let mut now = Instant::ZERO;
        for _ in 0..1000 {
            client.poll_drain(now);
            carry(&mut client.port, &mut server.port);
            server.poll_drain(now);
            carry(&mut server.port, &mut client.port);
            if client.tcp().state() == tcp::State::Established
                && server.tcp().state() == tcp::State::Established
            {
                return Ok(Link {
                    client,
                    server,
                    now,
                });
            }
            // ARP and the handshake may wait on smoltcp's pacing of neighbour requests.
            now += Duration::from_millis(1);
        }
        Err("the handshake did not complete".to_string())
    }
}

/// Counts of one transfer loop (mirrors `bench::bulk::TransferCounts`).
#[derive(Debug, Default)]
pub struct Counts {
    pub received_bytes: u64,
    pub data_segments: u64,
    pub frames_to_server: u64,
    pub frames_to_client: u64,
    pub clock_jumps: u64,
    pub sent_hash: StreamHash,
    pub received_hash: StreamHash,
}

/// The measured part (callgrind: `--toggle-collect=*smoltcp_transfer_loop*`).
#[inline(never)]
pub fn smoltcp_transfer_loop(
    link: &mut Link,
    pattern: &Pattern,
    read_buf: &mut [u8],
    bytes: u64,
    verify: bool,
) -> Result<Counts, String> {
    let mut c = Counts::default();
    let mut sent: u64 = 0;
    let mut idle_rounds = 0u32;
    let start = link.now;
    let mut now = link.now;
    let (client, server) = (&mut link.client, &mut link.server);
    while c.received_bytes < bytes {
        {
            let s = client.tcp();
            while sent < bytes && s.can_send() {
                let want = usize::try_from(bytes - sent)
                    .unwrap_or(usize::MAX)
                    .min(APP_CHUNK_BYTES);
                let chunk = pattern.chunk(sent, want);
                let n = s.send_slice(chunk).map_err(|e| format!("send: {e}"))?;
                if n == 0 {
                    break;
                }
                if verify {
                    c.sent_hash.update(chunk.get(..n).unwrap_or(&[]));
                }
                sent += n as u64;
            }
        }
        let moved_before = c.frames_to_server + c.frames_to_client;
        client.poll_drain(now);
        let (frames, data) = carry(&mut client.port, &mut server.port);
        c.frames_to_server += frames;
        c.data_segments += data;
        server.poll_drain(now);
        {
            let s = server.tcp();
            while s.can_recv() {
                let n = s.recv_slice(read_buf).map_err(|e| format!("recv: {e}"))?;
                if n == 0 {
                    break;
                }
                if verify {
                    c.received_hash.update(read_buf.get(..n).unwrap_or(&[]));
                }
                c.received_bytes += n as u64;
            }
        }
        // Reading opened the window: let the ACK / window update leave.
        server.poll_drain(now);
        c.frames_to_client += carry(&mut server.port, &mut client.port).0;
        if c.frames_to_server + c.frames_to_client != moved_before {
            idle_rounds = 0;
            continue;
        }
        idle_rounds += 1;
        let next = [client.poll_at(now), server.poll_at(now)]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else {
            return Err(format!("stalled after {} bytes", c.received_bytes));
        };
        if idle_rounds > IDLE_ROUNDS_MAX || now - start > VIRTUAL_LIMIT {
            return Err(format!("stalled after {} bytes", c.received_bytes));
        }
        // smoltcp's clock has microsecond resolution; always move forward.
        now = next.max(now + Duration::from_micros(1));
        c.clock_jumps += 1;
    }
    link.now = now;
    Ok(c)
}

/// Runs one bulk transfer with smoltcp: setup, then the timed loop.
pub fn run(opts: BulkOptions) -> Result<BulkReport, String> {
    let mut link = Link::connect(opts.checksum_offload, opts.timestamps)?;
    let pattern = Pattern::new();
    let mut read_buf = vec![0u8; APP_CHUNK_BYTES];
    let start_ns = link.now.total_micros() * 1000;
    let start = WallInstant::now();
    let c = smoltcp_transfer_loop(&mut link, &pattern, &mut read_buf, opts.bytes, opts.verify)?;
    let wall_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let end_ns = link.now.total_micros() * 1000;
    Ok(BulkReport {
        bytes: c.received_bytes,
        data_segments: c.data_segments,
        frames_to_server: c.frames_to_server,
        frames_to_client: c.frames_to_client,
        clock_jumps: c.clock_jumps,
        virtual_ns: u64::try_from(end_ns - start_ns).unwrap_or(0),
        wall_ns,
        hashes: opts.verify.then_some((c.sent_hash, c.received_hash)),
    })
}
