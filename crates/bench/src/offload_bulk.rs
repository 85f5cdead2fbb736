//! Seed 002's Figure 7 and 8 setting, in memory: a host sends 1,460-byte messages over N
//! connections to a client, K of them handed to an offload engine (OS N−K // NIC K).
//!
//! Three parties over a perfect link, each a function the callgrind script selects with
//! `--toggle-collect`:
//!
//! - the **host** ([`measured_host_turn`]): the shard's stack with its bypass sockets, the
//!   application (it writes 1,460-byte messages on every connection that is writable, as the
//!   seed's microbenchmark), and the host's offload layer ([`HostOffload`]: bypass operations
//!   to commands, the engine's commands into the sockets) — what seed Figure 7 profiles;
//! - the **engine** ([`measured_engine_turn`]): [`Engine`], the frames steered to it and the
//!   host's commands (seed Table 2's firmware);
//! - the **client**: a plain stack that reads everything (not counted).
//!
//! The harness plays the NIC: frames from the client go to the engine when an exact-match
//! filter names their flow (the host's `Steer` changes), else to the host; ARP to both.
//! Commands cross in the next turn (one ring each way). Every turn the virtual clock moves
//! `step_ns`; each party runs its timers when due.
//!
//! Counted per TCP packet "sent and received by the system" (seed Figure 7's normalisation):
//! every TCP frame between the client and the host or the engine, both directions, during the
//! measured turns. Setup (handshakes, handoffs, ARP, a warm-up) is outside the measured
//! functions. Messages per packet by kind (Figure 8) are counted over the same turns.

use std::collections::{BTreeSet, HashSet};

use core::net::{IpAddr, SocketAddr};

use offload::{Engine, EngineConfig, HostConfig, HostOffload, Policy, Steer};
use shard::handoff::{EngineCmd, EngineKind, HostCmd, HostKind, Limits};
use stack::{FourTuple, Readiness, RxMeta, SocketError, SocketHandle, Stack};

use crate::bulk::{BulkError, SERVER_IP, SERVER_MAC};
use crate::idle::{IdleWorld, config_for};

/// The seed's message size (one Ethernet MSS of payload).
pub const MESSAGE_BYTES: usize = 1460;
/// Socket buffers of both stacks and the engine's (smaller than the stack's default so 1,024
/// connections' queues stay within a shared machine's memory).
pub const BUFFER_BYTES: u32 = 64 * 1024;
/// Handoffs sent before the harness lets the engine answer (below the checker's bound on
/// requests in flight).
const HANDOFF_BATCH: usize = 256;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffloadBulkOptions {
    /// Connections, all sending.
    pub connections: usize,
    /// How many of them are handed to the engine (the first K).
    pub offloaded: usize,
    /// Virtual time per turn.
    pub step_ns: u64,
}

impl OffloadBulkOptions {
    pub fn new(connections: usize, offloaded: usize) -> OffloadBulkOptions {
        OffloadBulkOptions {
            connections,
            offloaded: offloaded.min(connections),
            step_ns: 20_000,
        }
    }
}

/// Commands by kind (seed Figure 8), and the frames through the host's own queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageCounts {
    /// Host → engine, by kind.
    pub handoff: u64,
    pub restore: u64,
    pub send: u64,
    pub recvd: u64,
    pub ctrl: u64,
    pub forward: u64,
    pub post: u64,
    /// Engine → host, by kind.
    pub handoff_answer: u64,
    pub recv: u64,
    pub ack: u64,
    pub ctrl_in: u64,
    pub resource: u64,
    pub restore_in: u64,
    /// TCP frames the host's stack sent and received (the transmit and receive descriptors of
    /// seed Figure 8's "without handoff" bars).
    pub host_tx_frames: u64,
    pub host_rx_frames: u64,
}

impl MessageCounts {
    fn host_cmd(&mut self, k: HostKind) {
        *match k {
            HostKind::Handoff => &mut self.handoff,
            HostKind::Restore => &mut self.restore,
            HostKind::Send => &mut self.send,
            HostKind::Recvd => &mut self.recvd,
            HostKind::Ctrl => &mut self.ctrl,
            HostKind::Forward => &mut self.forward,
            HostKind::Post => &mut self.post,
        } += 1;
    }

    fn engine_cmd(&mut self, k: EngineKind) {
        *match k {
            EngineKind::HandoffAccepted | EngineKind::HandoffRefused => &mut self.handoff_answer,
            EngineKind::Recv => &mut self.recv,
            EngineKind::Ack => &mut self.ack,
            EngineKind::Ctrl => &mut self.ctrl_in,
            EngineKind::Resource => &mut self.resource,
            EngineKind::Restore => &mut self.restore_in,
        } += 1;
    }

    /// Every handoff command, both directions.
    pub fn commands(&self) -> u64 {
        self.handoff
            + self.restore
            + self.send
            + self.recvd
            + self.ctrl
            + self.forward
            + self.post
            + self.handoff_answer
            + self.recv
            + self.ack
            + self.ctrl_in
            + self.resource
            + self.restore_in
    }
}

/// What the measured turns moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadBulkCounts {
    pub turns: u64,
    /// TCP frames between the client and the host or the engine, both directions.
    pub packets: u64,
    /// Of those, frames the engine received and sent.
    pub engine_packets: u64,
    /// Payload bytes the client read.
    pub bytes: u64,
    pub messages: MessageCounts,
}

/// The client, the host (stack, offload layer) and the engine, with N established
/// connections, K of them on the engine.
pub struct OffloadWorld {
    pub opts: OffloadBulkOptions,
    pub now: u64,
    pub client: Stack,
    pub host: Stack,
    pub off: HostOffload,
    pub engine: Engine,
    host_socks: Vec<SocketHandle>,
    /// Flows the NIC steers to the engine.
    filters: BTreeSet<FourTuple>,
    /// Frames in flight to each party, and commands in flight each way.
    to_host: Vec<Vec<u8>>,
    to_engine: Vec<Vec<u8>>,
    to_client: Vec<Vec<u8>>,
    host_cmds: Vec<HostCmd>,
    engine_cmds: Vec<EngineCmd>,
    steer: Vec<Steer>,
    /// Host sockets the application may write on (a writable event puts them back).
    writable: Vec<SocketHandle>,
    is_writable: HashSet<SocketHandle>,
    message: Vec<u8>,
    buf: Vec<u8>,
    counts: OffloadBulkCounts,
    host_deadline_ns: u64,
    engine_deadline_ns: u64,
}

impl core::fmt::Debug for OffloadWorld {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OffloadWorld")
            .field("opts", &self.opts)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

fn is_tcp(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x08, 0x00]) && frame.get(23) == Some(&6)
}

fn tuple_of(frame: &[u8]) -> Option<FourTuple> {
    let f = rss::FlowFields::from_frame(frame).ok()??;
    let p = f.ports?;
    let (s, d): (IpAddr, IpAddr) = match f.addrs {
        rss::IpPair::V4(s, d) => (s.into(), d.into()),
        rss::IpPair::V6(s, d) => (s.into(), d.into()),
    };
    Some(FourTuple {
        local: SocketAddr::new(d, p.dst),
        remote: SocketAddr::new(s, p.src),
    })
}

impl OffloadWorld {
    /// Opens the connections, hands the first K to the engine and runs `warmup_turns`.
    pub fn new(opts: OffloadBulkOptions, warmup_turns: u64) -> Result<OffloadWorld, BulkError> {
        let n = opts.connections;
        let mut idle = IdleWorld::new(n)?;
        let up = idle.connect_all(n, 100_000_000)?;
        if up != n {
            return Err(BulkError::NotConnected);
        }
        for (s, hs) in [
            (&mut idle.client, &idle.client_socks),
            (&mut idle.server, &idle.server_socks),
        ] {
            for &h in hs {
                s.set_option(h, stack::SocketOption::SendBufferBytes(BUFFER_BYTES))
                    .map_err(|e| BulkError::Socket("send buffer", e))?;
            }
        }
        let limits = Limits {
            connections_max: u32::try_from(n).unwrap_or(u32::MAX).max(1),
            buffer_bytes_max: 1 << 30,
            ..Limits::default()
        };
        let engine = Engine::new(
            EngineConfig {
                limits,
                ..EngineConfig::default()
            },
            config_for(SERVER_MAC, SERVER_IP, n),
        );
        let off = HostOffload::new(HostConfig {
            limits,
            policy: Policy::Off,
            ..HostConfig::default()
        });
        let mut w = OffloadWorld {
            opts,
            now: idle.now,
            client: idle.client,
            host: idle.server,
            off,
            engine,
            writable: idle.server_socks.clone(),
            is_writable: idle.server_socks.iter().copied().collect(),
            host_socks: idle.server_socks,
            filters: BTreeSet::new(),
            to_host: Vec::new(),
            to_engine: Vec::new(),
            to_client: Vec::new(),
            host_cmds: Vec::new(),
            engine_cmds: Vec::new(),
            steer: Vec::new(),
            message: (0..MESSAGE_BYTES).map(|i| i as u8).collect(),
            buf: vec![0; 64 * 1024],
            counts: OffloadBulkCounts::default(),
            host_deadline_ns: 0,
            engine_deadline_ns: 0,
        };
        // The host's application does not write until the handoffs are done.
        let all = core::mem::take(&mut w.writable);
        w.is_writable.clear();
        let mut k = 0;
        while k < opts.offloaded {
            let end = (k + HANDOFF_BATCH).min(opts.offloaded);
            for i in k..end {
                let h = w.host_socks[i];
                w.off
                    .offload(w.now, &mut w.host, h)
                    .map_err(|_| BulkError::Socket("offload", SocketError::InvalidState))?;
            }
            for _ in 0..20 {
                w.turn(false);
            }
            k = end;
        }
        if w.engine.connections() != opts.offloaded {
            return Err(BulkError::Socket("offload", SocketError::InvalidState));
        }
        for h in all {
            if w.is_writable.insert(h) {
                w.writable.push(h);
            }
        }
        for _ in 0..warmup_turns {
            w.turn(false);
        }
        w.counts = OffloadBulkCounts::default();
        Ok(w)
    }

    /// The connections the engine runs now.
    pub fn engine_connections(&self) -> usize {
        self.engine.connections()
    }

    /// One turn of every party; `measured` selects the counted functions.
    fn turn(&mut self, measured: bool) {
        if measured {
            measured_host_turn(self);
            measured_engine_turn(self);
        } else {
            self.host_turn();
            self.engine_turn();
        }
        self.client_turn();
        self.counts.turns += 1;
        self.now += self.opts.step_ns;
    }

    /// The host's turn: timers, received frames, the engine's commands, the application's
    /// writes, bypass operations to commands, frames out.
    fn host_turn(&mut self) {
        let now = self.now;
        if now >= self.host_deadline_ns {
            self.host.handle_timeout(now);
        }
        for f in self.to_host.drain(..) {
            self.counts.messages.host_rx_frames += u64::from(is_tcp(&f));
            self.host.receive(now, &f, &RxMeta::NONE);
            self.host.recycle(f);
        }
        for c in self.engine_cmds.drain(..) {
            self.counts.messages.engine_cmd(c.kind());
            self.off.handle_engine_cmd(now, &mut self.host, c);
        }
        while let Some(e) = self.host.poll_event() {
            if e.readiness.contains(Readiness::WRITABLE) && self.is_writable.insert(e.handle) {
                self.writable.push(e.handle);
            }
        }
        // Every writable socket is filled until it takes no whole message more.
        for h in self.writable.drain(..) {
            self.is_writable.remove(&h);
            while let Ok(n) = self.host.tcp_send(h, &self.message) {
                if n < self.message.len() {
                    break;
                }
            }
        }
        self.off.poll(now, &mut self.host);
        while let Some(c) = self.off.poll_cmd() {
            self.counts.messages.host_cmd(c.kind());
            self.host_cmds.push(c);
        }
        while let Some(s) = self.off.poll_steer() {
            self.steer.push(s);
        }
        while let Some(f) = self.host.poll_transmit(now) {
            self.counts.messages.host_tx_frames += u64::from(is_tcp(&f));
            self.to_client.push(f);
        }
        self.host_deadline_ns = [self.host.poll_timeout(), self.off.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(u64::MAX);
    }

    /// The engine's turn: frames steered to it, the host's commands, timers, output.
    fn engine_turn(&mut self) {
        let now = self.now;
        let had_input = !self.to_engine.is_empty() || !self.host_cmds.is_empty();
        for f in self.to_engine.drain(..) {
            self.counts.engine_packets += u64::from(is_tcp(&f));
            self.engine.handle_frame(now, &f);
        }
        for c in self.host_cmds.drain(..) {
            self.engine.handle_host_cmd(now, c);
        }
        if had_input || now >= self.engine_deadline_ns {
            self.engine.handle_timeout(now);
        }
        while let Some(c) = self.engine.poll_cmd() {
            self.engine_cmds.push(c);
        }
        while let Some(f) = self.engine.poll_transmit(now) {
            self.counts.engine_packets += u64::from(is_tcp(&f));
            self.to_client.push(f);
        }
        self.engine_deadline_ns = self.engine.poll_timeout().unwrap_or(u64::MAX);
    }

    /// The client (not measured): reads everything; its frames are steered as the NIC would.
    fn client_turn(&mut self) {
        let now = self.now;
        for s in self.steer.drain(..) {
            match s {
                Steer::Install(t) => {
                    self.filters.insert(t);
                }
                Steer::Remove(t) => {
                    self.filters.remove(&t);
                }
            }
        }
        self.client.handle_timeout(now);
        self.client_output();
        // One frame at a time, as a wire delivers them: the client's ACKs follow its own
        // delayed-ACK rule (every second full segment), not the harness's batching.
        let frames = core::mem::take(&mut self.to_client);
        for f in frames {
            self.counts.packets += u64::from(is_tcp(&f));
            self.client.receive(now, &f, &RxMeta::NONE);
            self.client_output();
        }
        while let Some(e) = self.client.poll_event() {
            if e.readiness.contains(Readiness::READABLE) {
                while let Ok(n) = self.client.tcp_recv(e.handle, &mut self.buf) {
                    if n == 0 {
                        break;
                    }
                    self.counts.bytes += n as u64;
                }
            }
        }
        self.client_output();
    }

    /// The client's frames, steered as the NIC would.
    fn client_output(&mut self) {
        let now = self.now;
        while let Some(f) = self.client.poll_transmit(now) {
            if !is_tcp(&f) {
                self.to_host.push(f.clone());
                self.to_engine.push(f);
                continue;
            }
            self.counts.packets += 1;
            if tuple_of(&f).is_some_and(|t| self.filters.contains(&t)) {
                self.to_engine.push(f);
            } else {
                self.to_host.push(f);
            }
        }
    }

    /// Runs measured turns until `packets` TCP packets moved and at least `turns_min` turns
    /// ran (with host and engine connections side by side, their shares settle over several
    /// turns: an engine connection's `Ack` reaches the host a turn later); returns what they
    /// moved.
    pub fn run(&mut self, packets: u64, turns_min: u64) -> Result<OffloadBulkCounts, BulkError> {
        self.counts = OffloadBulkCounts::default();
        let mut idle_turns = 0u32;
        while self.counts.packets < packets || self.counts.turns < turns_min {
            let before = self.counts.packets;
            self.turn(true);
            if self.counts.packets == before {
                idle_turns += 1;
                if idle_turns > 10_000 {
                    return Err(BulkError::Stalled {
                        received_bytes: self.counts.bytes,
                    });
                }
            } else {
                idle_turns = 0;
            }
        }
        Ok(self.counts)
    }
}

/// The host's turn, for callgrind's `--toggle-collect`.
#[inline(never)]
pub fn measured_host_turn(w: &mut OffloadWorld) {
    w.host_turn();
}

/// The engine's turn, for callgrind's `--toggle-collect`.
#[inline(never)]
pub fn measured_engine_turn(w: &mut OffloadWorld) {
    w.engine_turn();
}
