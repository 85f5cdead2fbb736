//! Many idle established connections between two stacks, for heap measurements
//! (issue 3: "an idle established connection's total footprint without its data buffers,
//! measured on 100,000 idle connections").
//!
//! No payload is ever sent, so the engine's send and receive rings never allocate storage
//! (`tcp::ring::Ring` allocates on first write): what remains is the TCB and the stack's table
//! entries. Client ports are chosen explicitly (`LOCAL_PORTS_PER_SERVER_PORT` per server
//! port), so setup never scans for a free ephemeral port.

use core::net::{IpAddr, SocketAddr};
use stack::RxMeta;

use stack::{SocketHandle, Stack};
use tcp::State;

use crate::bulk::{BulkError, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC, stack_config};

/// Client ports used against one server port (10000..60000).
pub const LOCAL_PORTS_PER_SERVER_PORT: usize = 50_000;
const LOCAL_PORT_FIRST: u16 = 10_000;
const SERVER_PORT_FIRST: u16 = 6_000;
/// Connections opened per exchange: below the default SYN backlog (256), so no SYN cookies,
/// and well below the transmit queue (1024 frames).
const BATCH: usize = 128;

/// The two stacks and the application's handles.
#[derive(Debug)]
pub struct IdleWorld {
    pub client: Stack,
    pub server: Stack,
    pub now: u64,
    listeners: Vec<SocketHandle>,
    pub client_socks: Vec<SocketHandle>,
    pub server_socks: Vec<SocketHandle>,
}

/// Stack limits raised so `connections` sockets (plus listeners) fit.
pub(crate) fn config_for(
    mac: wire::EthernetAddress,
    ip: core::net::Ipv4Addr,
    connections: usize,
) -> stack::StackConfig {
    let mut cfg = stack_config(mac, ip, false);
    cfg.limits.sockets_max = connections + connections / LOCAL_PORTS_PER_SERVER_PORT + 16;
    cfg.limits.tcp_backlog_max = BATCH * 2;
    // One client holding the whole table idle is what this world measures: the overload
    // policy (reclaim under pressure, per-source shares) would turn it away.
    cfg.limits.tcp_source_share_pct = 100;
    cfg.limits.tcp_reclaim_high_water_pct = 100;
    cfg
}

fn exchange(client: &mut Stack, server: &mut Stack, now: u64) -> Result<(), BulkError> {
    for _ in 0..10_000 {
        let mut moved = false;
        while let Some(f) = client.poll_transmit(now) {
            moved = true;
            server.receive(now, &f, &RxMeta::NONE);
        }
        while let Some(f) = server.poll_transmit(now) {
            moved = true;
            client.receive(now, &f, &RxMeta::NONE);
        }
        if !moved {
            return Ok(());
        }
    }
    Err(BulkError::Stalled { received_bytes: 0 })
}

impl IdleWorld {
    /// Two stacks sized for `connections`, with the server's listeners open, nothing else.
    pub fn new(connections: usize) -> Result<IdleWorld, BulkError> {
        IdleWorld::with_ecn(connections, tcp::EcnMode::Off)
    }

    /// As [`IdleWorld::new`], both stacks' connections under ECN mode `ecn` (`EcnMode::On`:
    /// every connection negotiates ECN, and so never takes header prediction's short path).
    pub fn with_ecn(connections: usize, ecn: tcp::EcnMode) -> Result<IdleWorld, BulkError> {
        let mut client_cfg = config_for(CLIENT_MAC, CLIENT_IP, connections);
        let mut server_cfg = config_for(SERVER_MAC, SERVER_IP, connections);
        client_cfg.tcp.ecn = ecn;
        server_cfg.tcp.ecn = ecn;
        let mut client = Stack::new(client_cfg);
        let mut server = Stack::new(server_cfg);
        let ports = connections.div_ceil(LOCAL_PORTS_PER_SERVER_PORT).max(1);
        let mut listeners = Vec::with_capacity(ports);
        for p in 0..ports {
            let port = SERVER_PORT_FIRST + p as u16;
            let l = server
                .tcp_listen(SocketAddr::new(IpAddr::V4(SERVER_IP), port), BATCH * 2)
                .map_err(|e| BulkError::Socket("listen", e))?;
            listeners.push(l);
        }
        // Resolve the server's MAC first: a neighbour being resolved holds only a few packets
        // (`Limits::neighbor_pending_packets_max`), and a batch of SYNs would mostly wait for
        // their retransmission timers.
        client
            .send_ping(0, IpAddr::V4(SERVER_IP), 1, 1, b"arp")
            .map_err(|e| BulkError::Socket("ping", e))?;
        exchange(&mut client, &mut server, 0)?;
        while client.poll_echo_reply().is_some() {}
        Ok(IdleWorld {
            client,
            server,
            now: 0,
            listeners,
            client_socks: Vec::with_capacity(connections),
            server_socks: Vec::with_capacity(connections),
        })
    }

    /// Opens `connections` connections in batches, accepting each batch, then lets the clock
    /// run `idle_ns` so every delayed ACK and handshake timer has fired. Returns how many
    /// connections are ESTABLISHED on both sides.
    pub fn connect_all(&mut self, connections: usize, idle_ns: u64) -> Result<usize, BulkError> {
        let mut k = 0usize;
        while k < connections {
            let end = (k + BATCH).min(connections);
            for i in k..end {
                let server_port = SERVER_PORT_FIRST + (i / LOCAL_PORTS_PER_SERVER_PORT) as u16;
                let local_port = LOCAL_PORT_FIRST + (i % LOCAL_PORTS_PER_SERVER_PORT) as u16;
                let h = self
                    .client
                    .tcp_connect(
                        self.now,
                        SocketAddr::new(IpAddr::V4(SERVER_IP), server_port),
                        local_port,
                    )
                    .map_err(|e| BulkError::Socket("connect", e))?;
                self.client_socks.push(h);
            }
            exchange(&mut self.client, &mut self.server, self.now)?;
            for &l in &self.listeners {
                while let Ok((h, _)) = self.server.tcp_accept(l) {
                    self.server_socks.push(h);
                }
            }
            while self.client.poll_event().is_some() {}
            while self.server.poll_event().is_some() {}
            k = end;
        }
        self.idle(idle_ns)?;
        Ok(self.established())
    }

    /// Runs every timer due within the next `idle_ns`, exchanging what they send.
    pub fn idle(&mut self, idle_ns: u64) -> Result<(), BulkError> {
        let end = self.now.saturating_add(idle_ns);
        loop {
            exchange(&mut self.client, &mut self.server, self.now)?;
            let next = [self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.client.handle_timeout(self.now);
                    self.server.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.now = end;
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        exchange(&mut self.client, &mut self.server, self.now)?;
        while self.client.poll_event().is_some() {}
        while self.server.poll_event().is_some() {}
        Ok(())
    }

    /// Connections ESTABLISHED on both sides (counted pairwise by handle order).
    pub fn established(&self) -> usize {
        let up = |s: &Stack, hs: &[SocketHandle]| {
            hs.iter()
                .filter(|&&h| s.tcp_state(h) == Some(State::Established))
                .count()
        };
        up(&self.client, &self.client_socks).min(up(&self.server, &self.server_socks))
    }
}
