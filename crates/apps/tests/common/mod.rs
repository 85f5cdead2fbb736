//! What the simulator tests of `apps` share: a two-host world on one link, each host one shard
//! core (`sim::net::ShardedHost`) running an `apps::App` exactly as the runtime's threads do.
#![allow(dead_code)] // Each test binary uses its own part.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use apps::App;
use sim::net::ShardedHost;
use sim::{ChannelConfig, HostId, LinkId, PortId, World};
use stack::{InterfaceConfig, Ipv4Cidr, Ipv6Cidr, StackConfig};
use wire::EthernetAddress;

pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const SERVER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
pub const CLIENT_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// `SERVER_IP:port`.
pub fn server_addr(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(SERVER_IP), port)
}

/// `[SERVER_IP6]:port`.
pub fn server_addr6(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(SERVER_IP6), port)
}

/// A one-interface stack configuration with MAC `02:00:00:00:00:<mac_last>`, IPv4 address
/// `ip`/24 and IPv6 address `fd00::<mac_last>`/64 beside the link-local one.
pub fn config(mac_last: u8, ip: Ipv4Addr) -> StackConfig {
    let mut iface = InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        Ipv4Cidr::new(ip, 24),
    );
    let ip6 = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(mac_last));
    iface.ipv6.push(Ipv6Cidr::new(ip6, 64));
    StackConfig::new(iface)
}

/// A 1 Gbit/s link with 50 µs of delay each way.
pub fn gigabit() -> ChannelConfig {
    ChannelConfig::default()
        .rate_bps(1_000_000_000)
        .delay_ns(50_000)
}

/// A world of seed `seed` with `server` on `SERVER_IP` and `client` on `CLIENT_IP`, joined
/// by one link configured by `link`.
pub struct Pair {
    pub world: World,
    pub server: HostId,
    pub client: HostId,
    pub link: LinkId,
}

impl Pair {
    pub fn new<S: App + 'static, C: App + 'static>(
        seed: u64,
        server: S,
        client: C,
        link: ChannelConfig,
    ) -> Pair {
        let mut world = World::new(seed);
        let server = world.add_host(Box::new(ShardedHost::single(config(1, SERVER_IP), server)));
        let client = world.add_host(Box::new(ShardedHost::single(config(2, CLIENT_IP), client)));
        let link = world
            .connect((client, PortId(0)), (server, PortId(0)), link)
            .expect("link");
        Pair {
            world,
            server,
            client,
            link,
        }
    }

    /// The server's application.
    pub fn server<S: App + 'static>(&self) -> &S {
        self.world
            .host::<ShardedHost<S>>(self.server)
            .expect("server host type")
            .app()
    }

    /// The client's application.
    pub fn client<C: App + 'static>(&self) -> &C {
        self.world
            .host::<ShardedHost<C>>(self.client)
            .expect("client host type")
            .app()
    }

    /// Runs until the client says it is done (checked every `step_ns`) or `deadline_ns`;
    /// returns the time it was done at, `None` when it never was.
    pub fn run_until_client_done<C: App + 'static>(
        &mut self,
        step_ns: u64,
        deadline_ns: u64,
    ) -> Option<u64> {
        let mut t = 0;
        while t < deadline_ns {
            t += step_ns;
            self.world.run_until(t);
            if self.client::<C>().done() {
                return Some(t);
            }
        }
        None
    }
}
