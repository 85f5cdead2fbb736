//! Bulk transfer between two shard cores ([`shard::Shard`]) over a perfect in-memory link: the
//! same transfer as [`crate::bulk`], through the whole per-shard path the runtime and the
//! simulator run — the NIC model (checksum verification, moderation, optional receive
//! coalescing), the NAPI poll, the stack (which trusts the NIC's checksum verdicts carried in
//! each descriptor's `RxMeta`, so every checksum is verified once), the application API and
//! its readiness events, and the NIC's transmit ring.
//!
//! The link behaves like NIC hardware: a transmitted frame is copied ("DMA") into a receive
//! buffer from the receiving shard's pool, and the sender gets its buffer back as a transmit
//! completion ([`shard::Shard::recycle_tx`]), so a steady transfer allocates nothing. Moderation
//! is off (a queue fires on every arrival) so the clock stands still while frames move, as in
//! [`crate::bulk`]; coalescing is off unless asked for, so instructions per segment compare
//! like for like with the bare stacks.

use core::net::{IpAddr, SocketAddr};
use std::time::Instant;

use app::{App, Ctx, ShardInfo};
use nic::{ModerationConfig, Nic, NicConfig};
use shard::{Shard, ShardConfig};
use stack::{SocketError, SocketEvent, SocketHandle, Stack};

use crate::bulk::{
    APP_CHUNK_BYTES, BulkError, BulkOptions, BulkReport, CLIENT_IP, CLIENT_MAC, SERVER_IP,
    SERVER_MAC, SERVER_PORT, bulk_config,
};
use crate::frame::is_data_segment;
use crate::pattern::{Pattern, StreamHash};

/// Rounds in a row that may pass with nothing moved before the transfer counts as stalled.
const IDLE_ROUNDS_MAX: u32 = 10_000;

/// The client application: connects, then writes the pattern whenever the socket has room.
pub struct BulkSender {
    remote: SocketAddr,
    conn: Option<SocketHandle>,
    pattern: Pattern,
    bytes: u64,
    sent: u64,
    verify: bool,
    hash: StreamHash,
    error: Option<SocketError>,
}

impl App for BulkSender {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now_ns();
        match ctx.stack().tcp_connect(now, self.remote, 0) {
            Ok(h) => self.conn = Some(h),
            Err(e) => self.error = Some(e),
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, _events: &[SocketEvent]) {
        let Some(h) = self.conn else { return };
        while self.sent < self.bytes && self.error.is_none() {
            let want = usize::try_from(self.bytes - self.sent)
                .unwrap_or(usize::MAX)
                .min(APP_CHUNK_BYTES);
            let chunk = self.pattern.chunk(self.sent, want);
            match ctx.stack().tcp_send(h, chunk) {
                Ok(n) => {
                    if self.verify {
                        self.hash.update(chunk.get(..n).unwrap_or(&[]));
                    }
                    self.sent += n as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => self.error = Some(e),
            }
        }
    }
}

/// The server application: accepts one connection and reads everything it gets.
pub struct BulkReceiver {
    listener: Option<SocketHandle>,
    conn: Option<SocketHandle>,
    buf: Vec<u8>,
    received: u64,
    verify: bool,
    hash: StreamHash,
    error: Option<SocketError>,
}

impl App for BulkReceiver {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let local = SocketAddr::new(IpAddr::V4(SERVER_IP), SERVER_PORT);
        match ctx.stack().tcp_listen(local, 1) {
            Ok(l) => self.listener = Some(l),
            Err(e) => self.error = Some(e),
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, _events: &[SocketEvent]) {
        if self.conn.is_none() {
            if let Some(l) = self.listener {
                if let Ok((h, _)) = ctx.stack().tcp_accept(l) {
                    self.conn = Some(h);
                }
            }
        }
        let Some(h) = self.conn else { return };
        while self.error.is_none() {
            match ctx.stack().tcp_recv(h, &mut self.buf) {
                Ok(n) => {
                    if self.verify {
                        self.hash.update(self.buf.get(..n).unwrap_or(&[]));
                    }
                    self.received += n as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => self.error = Some(e),
            }
        }
    }
}

/// Two shard cores joined by the perfect link.
pub struct ShardLink {
    pub client: Shard<BulkSender>,
    pub server: Shard<BulkReceiver>,
    pub now: u64,
}

/// What the two stacks know of their NICs' RSS key (the NICs hash every frame either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardRss {
    /// No RSS configuration in the stacks: they hash each segment's tuple themselves (once).
    #[default]
    None,
    /// The NICs' key is the public default and the stacks are told so, as the runtime and the
    /// simulator were configured before each host drew its own key: the stacks take the
    /// carried hash for RETA buckets and hash the tuple again for their tables.
    Public,
    /// The NICs' key is secret (a fixed key standing for one drawn at random): the stacks
    /// index their tables by the carried hash (hash once), as the runtime and the simulator
    /// now do.
    Secret,
}

impl ShardRss {
    /// The NICs' hasher and the stacks' RSS configuration, or `None`.
    fn config(self) -> Option<(rss::RssHasher, stack::RssConfig)> {
        let (key, key_is_secret) = match self {
            ShardRss::None => return None,
            ShardRss::Public => (rss::RssKey::default(), false),
            ShardRss::Secret => {
                let mut bytes = [0u8; rss::KEY_LEN_BYTES];
                for (i, b) in bytes.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(0x9d) ^ 0x5c;
                }
                (rss::RssKey::new(bytes), true)
            }
        };
        let hasher = rss::RssHasher::new(&key, rss::SymmetricMode::None);
        let cfg = stack::RssConfig {
            hasher: hasher.clone(),
            home: None,
            key_is_secret,
        };
        Some((hasher, cfg))
    }
}

/// One end's NIC: one queue, moderation off, coalescing as asked.
fn nic(gro: bool) -> Result<Nic, BulkError> {
    let mut cfg = NicConfig {
        queues: 1,
        moderation: ModerationConfig {
            interval_ns: 0,
            packets_threshold: 0,
            lli_on_push: false,
            lli_ports: nic::LliPorts::NONE,
            adaptive: None,
        },
        ..NicConfig::default()
    };
    cfg.gro.enabled = gro;
    Nic::new(cfg).map_err(|_| BulkError::NotConnected)
}

/// Frames moved by one [`pump`].
#[derive(Debug, Clone, Copy, Default)]
struct Moved {
    up: u64,
    down: u64,
    data_segments: u64,
}

/// Every frame `from` has ready, copied into receive buffers of `to` at `now`; the sender's
/// buffers come back to it as transmit completions.
fn pump<A: App, B: App>(from: &mut Shard<A>, to: &mut Shard<B>, now: u64) -> Moved {
    let mut m = Moved::default();
    while let Some(f) = from.poll_tx() {
        m.up += 1;
        m.data_segments += u64::from(is_data_segment(&f));
        let mut q = to.rx_queue(now);
        let mut buf = q.take_buffer(f.len());
        buf.extend_from_slice(&f);
        q.receive(buf);
        from.recycle_tx(f);
    }
    m
}

impl ShardLink {
    /// Builds both shards and runs until the connection is established.
    pub fn connect(opts: &BulkOptions, bytes: u64, gro: bool) -> Result<ShardLink, BulkError> {
        Self::connect_with(opts, bytes, gro, ShardRss::None)
    }

    /// [`ShardLink::connect`] with the stacks told about their NICs' RSS key as `rss` says.
    pub fn connect_with(
        opts: &BulkOptions,
        bytes: u64,
        gro: bool,
        rss: ShardRss,
    ) -> Result<ShardLink, BulkError> {
        let info = ShardInfo::SINGLE;
        let rss = rss.config();
        let stack_config = |mac, ip| {
            let mut cfg = bulk_config(mac, ip, opts);
            cfg.rss = rss.as_ref().map(|(_, r)| r.clone());
            cfg
        };
        let nic = |gro| {
            let mut n = nic(gro)?;
            if let Some((hasher, _)) = &rss {
                n.set_hasher(hasher.clone());
            }
            Ok::<Nic, BulkError>(n)
        };
        let sender = BulkSender {
            remote: SocketAddr::new(IpAddr::V4(SERVER_IP), SERVER_PORT),
            conn: None,
            pattern: Pattern::new(),
            bytes,
            sent: 0,
            verify: opts.verify,
            hash: StreamHash::default(),
            error: None,
        };
        let receiver = BulkReceiver {
            listener: None,
            conn: None,
            buf: vec![0u8; APP_CHUNK_BYTES],
            received: 0,
            verify: opts.verify,
            hash: StreamHash::default(),
            error: None,
        };
        let mut link = ShardLink {
            client: Shard::new(
                ShardConfig::new(info),
                nic(gro)?,
                Stack::new(stack_config(CLIENT_MAC, CLIENT_IP)),
                sender,
            ),
            server: Shard::new(
                ShardConfig::new(info),
                nic(gro)?,
                Stack::new(stack_config(SERVER_MAC, SERVER_IP)),
                receiver,
            ),
            now: 0,
        };
        // The server listens before the client's SYN can reach it.
        link.server.start(0);
        link.client.start(0);
        for _ in 0..IDLE_ROUNDS_MAX {
            if link.server.app().conn.is_some() {
                return Ok(link);
            }
            link.step();
        }
        Err(BulkError::NotConnected)
    }

    /// One round at the current time: both shards iterate and their frames cross.
    fn step(&mut self) -> Moved {
        let now = self.now;
        self.client.handle_timeout(now);
        let up = pump(&mut self.client, &mut self.server, now);
        self.server.handle_timeout(now);
        let down = pump(&mut self.server, &mut self.client, now);
        Moved {
            up: up.up,
            down: down.up,
            data_segments: up.data_segments,
        }
    }
}

/// The measured part: rounds until the receiver has read `bytes`; a round in which no frame
/// moved jumps the clock to the earliest deadline of either shard.
///
/// Never inlined: the callgrind script selects exactly this function with
/// `--toggle-collect=*shard_transfer_loop*`.
#[inline(never)]
pub fn shard_transfer_loop(link: &mut ShardLink, bytes: u64) -> Result<LoopCounts, BulkError> {
    let mut c = LoopCounts::default();
    let mut idle_rounds = 0u32;
    while link.server.app().received < bytes {
        if link
            .server
            .app()
            .error
            .or(link.client.app().error)
            .is_some()
        {
            return Err(BulkError::Stalled {
                received_bytes: link.server.app().received,
            });
        }
        let m = link.step();
        c.data_segments += m.data_segments;
        c.frames_to_server += m.up;
        c.frames_to_client += m.down;
        if m.up + m.down > 0 {
            idle_rounds = 0;
            continue;
        }
        idle_rounds += 1;
        let next = [link.client.poll_timeout(), link.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if idle_rounds <= IDLE_ROUNDS_MAX => {
                if t > link.now {
                    link.now = t;
                    c.clock_jumps += 1;
                }
            }
            _ => {
                return Err(BulkError::Stalled {
                    received_bytes: link.server.app().received,
                });
            }
        }
    }
    Ok(c)
}

/// Counts of one [`shard_transfer_loop`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopCounts {
    pub data_segments: u64,
    pub frames_to_server: u64,
    pub frames_to_client: u64,
    pub clock_jumps: u64,
}

/// Runs one bulk transfer through two shard cores: setup, then the timed (and
/// callgrind-counted) loop.
pub fn run(opts: BulkOptions, gro: bool) -> Result<BulkReport, BulkError> {
    run_with(opts, gro, ShardRss::None)
}

/// [`run`] with the stacks told about their NICs' RSS key as `rss` says.
pub fn run_with(opts: BulkOptions, gro: bool, rss: ShardRss) -> Result<BulkReport, BulkError> {
    let mut link = ShardLink::connect_with(&opts, opts.bytes, gro, rss)?;
    let start_ns = link.now;
    let start = Instant::now();
    let c = shard_transfer_loop(&mut link, opts.bytes)?;
    let wall_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let received = link.server.app();
    Ok(BulkReport {
        bytes: received.received,
        data_segments: c.data_segments,
        frames_to_server: c.frames_to_server,
        frames_to_client: c.frames_to_client,
        clock_jumps: c.clock_jumps,
        virtual_ns: link.now - start_ns,
        wall_ns,
        hashes: opts
            .verify
            .then_some((link.client.app().hash, received.hash)),
    })
}
