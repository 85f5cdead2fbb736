//! A two-endpoint harness: a client stack, and a host made of a stack, its offload layer and
//! an engine, joined by an ideal wire. Frames to the host are steered as the NIC would: to the
//! engine when an exact-match filter names their flow, else to the host's stack; ARP goes to
//! both. The clock steps to the earliest deadline when nothing else is left to do.
#![allow(dead_code)]

use std::collections::BTreeSet;

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use offload::{Engine, EngineConfig, HostConfig, HostOffload, Steer};
use shard::handoff::Limits;
use stack::{FourTuple, InterfaceConfig, Ipv4Cidr, RxMeta, SocketHandle, Stack, StackConfig};
use wire::EthernetAddress;

pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const PORT: u16 = 80;

pub fn cfg(mac: u8, ip: Ipv4Addr) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(
        EthernetAddress([2, 0, 0, 0, 0, mac]),
        Ipv4Cidr::new(ip, 24),
    ));
    c.tcp.time_wait_ns = 50_000_000;
    c.secret = [u64::from(mac) * 7919, 17];
    c
}

pub struct Net {
    pub now: u64,
    pub client: Stack,
    pub host: Stack,
    pub engine: Engine,
    pub off: HostOffload,
    /// Flows steered to the engine (host's view of the tuple).
    pub filters: BTreeSet<FourTuple>,
    /// The engine is dead: nothing in, nothing out.
    pub engine_dead: bool,
    /// The client is gone: frames to it are lost (it sends nothing either).
    pub client_dead: bool,
    /// Frames the engine sent to the client (for tests that look at them).
    pub engine_frames: u64,
    pub listener: Option<SocketHandle>,
}

impl Net {
    pub fn new(engine: EngineConfig, host: HostConfig) -> Net {
        let host_cfg = cfg(2, HOST_IP);
        Net {
            now: 1_000,
            client: Stack::new(cfg(1, CLIENT_IP)),
            host: Stack::new(host_cfg.clone()),
            engine: Engine::new(engine, host_cfg),
            off: HostOffload::new(host),
            filters: BTreeSet::new(),
            engine_dead: false,
            client_dead: false,
            engine_frames: 0,
            listener: None,
        }
    }

    /// A network whose engine has `limits` and whose host has the default configuration: the
    /// host learns the engine's bounds only from its advertisements.
    pub fn with_engine_limits(limits: Limits) -> Net {
        Net::new(
            EngineConfig {
                limits,
                ..EngineConfig::default()
            },
            HostConfig::default(),
        )
    }

    /// Connects client → host and accepts: (client handle, host handle).
    pub fn connect(&mut self) -> (SocketHandle, SocketHandle) {
        if self.listener.is_none() {
            self.listener = self
                .host
                .tcp_listen(SocketAddr::new(IpAddr::V4(HOST_IP), PORT), 16)
                .ok();
        }
        let c = self
            .client
            .tcp_connect(self.now, SocketAddr::new(IpAddr::V4(HOST_IP), PORT), 0)
            .expect("connect");
        let listener = self.listener.expect("listening");
        for _ in 0..100 {
            self.settle();
            if let Ok((h, _)) = self.host.tcp_accept(listener) {
                self.settle();
                return (c, h);
            }
            self.advance(1_000_000);
        }
        panic!("no connection");
    }

    fn steer_host_bound(&mut self, frame: Vec<u8>) {
        let is_arp = frame.get(12..14) == Some(&[0x08, 0x06]);
        if is_arp {
            self.host.receive(self.now, &frame, &RxMeta::NONE);
            if !self.engine_dead {
                self.engine.handle_frame(self.now, &frame);
            }
            return;
        }
        let tuple = match rss::FlowFields::from_frame(&frame) {
            Ok(Some(f)) => f.ports.map(|p| {
                let (s, d): (IpAddr, IpAddr) = match f.addrs {
                    rss::IpPair::V4(s, d) => (s.into(), d.into()),
                    rss::IpPair::V6(s, d) => (s.into(), d.into()),
                };
                FourTuple {
                    local: SocketAddr::new(d, p.dst),
                    remote: SocketAddr::new(s, p.src),
                }
            }),
            _ => None,
        };
        if tuple.is_some_and(|t| self.filters.contains(&t)) {
            if !self.engine_dead {
                self.engine.handle_frame(self.now, &frame);
            }
        } else {
            self.host.receive(self.now, &frame, &RxMeta::NONE);
        }
    }

    /// Runs everything due now until quiet.
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut busy = false;
            self.client.handle_timeout(self.now);
            self.host.handle_timeout(self.now);
            while let Some(f) = self.client.poll_transmit(self.now) {
                busy = true;
                if !self.client_dead {
                    self.steer_host_bound(f);
                }
            }
            while let Some(f) = self.host.poll_transmit(self.now) {
                busy = true;
                if !self.client_dead {
                    self.client.receive(self.now, &f, &RxMeta::NONE);
                }
            }
            self.off.poll(self.now, &mut self.host);
            while let Some(cmd) = self.off.poll_cmd() {
                busy = true;
                if !self.engine_dead {
                    self.engine.handle_host_cmd(self.now, cmd);
                }
            }
            if !self.engine_dead {
                self.engine.handle_timeout(self.now);
                while let Some(cmd) = self.engine.poll_cmd() {
                    busy = true;
                    self.off.handle_engine_cmd(self.now, &mut self.host, cmd);
                }
                while let Some(f) = self.engine.poll_transmit(self.now) {
                    busy = true;
                    self.engine_frames += 1;
                    if !self.client_dead {
                        self.client.receive(self.now, &f, &RxMeta::NONE);
                    }
                }
            }
            while let Some(s) = self.off.poll_steer() {
                busy = true;
                match s {
                    Steer::Install(t) => {
                        self.filters.insert(t);
                    }
                    Steer::Remove(t) => {
                        self.filters.remove(&t);
                    }
                }
            }
            if !busy {
                return;
            }
        }
        panic!("no quiet");
    }

    /// Advances the clock by `ns`, stopping at each deadline on the way.
    pub fn advance(&mut self, ns: u64) {
        let until = self.now + ns;
        loop {
            self.settle();
            let next = [
                self.client.poll_timeout(),
                self.host.poll_timeout(),
                (!self.engine_dead)
                    .then(|| self.engine.poll_timeout())
                    .flatten(),
                self.off.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .filter(|&t| t > self.now)
            .min();
            match next {
                Some(t) if t <= until => self.now = t,
                _ => {
                    self.now = until;
                    self.settle();
                    return;
                }
            }
        }
    }

    /// Hands `h` off and settles; panics unless the engine accepted.
    pub fn offload(&mut self, h: SocketHandle) {
        self.off
            .offload(self.now, &mut self.host, h)
            .expect("offload");
        self.settle();
        assert!(self.host.tcp_offloaded(h), "handed off");
        assert_eq!(self.engine.connections(), self.off.offloaded());
    }

    /// Reads everything `h` has on `stack`.
    pub fn read_all(stack: &mut Stack, h: SocketHandle) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stack.tcp_recv(h, &mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }
}
