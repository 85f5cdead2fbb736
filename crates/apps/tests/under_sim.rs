//! The same HTTP server and load client that run on `runtime`'s threads, run here under the
//! deterministic simulator through a small adapter from `apps::App` to `sim::net::App`.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use apps::{App, Ctx, ShardInfo};
use sim::net::StackHost;
use sim::{ChannelConfig, PortId, World};
use stack::{InterfaceConfig, Ipv4Cidr, SocketEvent, Stack, StackConfig};
use wire::EthernetAddress;

/// Runs an `apps::App` as the single shard of a simulated host.
struct OnSim<A: App>(A);

impl<A: App + 'static> sim::net::App for OnSim<A> {
    fn start(&mut self, now_ns: u64, stack: &mut Stack) {
        self.0
            .start(&mut Ctx::new(now_ns, ShardInfo::SINGLE, stack));
    }

    fn poll(&mut self, now_ns: u64, stack: &mut Stack, events: &[SocketEvent]) {
        self.0
            .poll(&mut Ctx::new(now_ns, ShardInfo::SINGLE, stack), events);
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.0.poll_timeout()
    }
}

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn config(mac_last: u8, ip: Ipv4Addr) -> StackConfig {
    StackConfig::new(InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        Ipv4Cidr::new(ip, 24),
    ))
}

#[test]
fn http_server_and_load_client_run_under_sim() {
    let mut w = World::new(7);
    let files = Arc::new(FileSet::demo(3000));
    let server = w.add_host(Box::new(StackHost::new(
        config(1, SERVER_IP),
        OnSim(HttpServer::new(80, files)),
    )));
    let client = w.add_host(Box::new(StackHost::new(
        config(2, CLIENT_IP),
        OnSim(HttpLoadClient::new(LoadConfig {
            server: SocketAddr::new(IpAddr::V4(SERVER_IP), 80),
            connections: 4,
            path: "/index.html".into(),
            requests_per_connection: Some(10),
        })),
    )));
    let link = ChannelConfig::default()
        .rate_bps(1_000_000_000)
        .delay_ns(50_000);
    w.connect((client, PortId(0)), (server, PortId(0)), link)
        .expect("link");
    w.run_until(2_000_000_000);
    let c = w
        .host::<StackHost<OnSim<HttpLoadClient>>>(client)
        .expect("client host");
    let st = c.app().0.stats();
    assert_eq!(st.responses_ok, 40, "{st:?}");
    assert_eq!(st.body_bytes, 40 * 3000);
    assert_eq!(st.connections_failed + st.protocol_errors, 0);
    assert!(
        c.app().0.done(),
        "every connection closed after its 10 requests"
    );
    let s = w
        .host::<StackHost<OnSim<HttpServer>>>(server)
        .expect("server host");
    let ss = s.app().0.stats();
    assert_eq!(
        (ss.connections_accepted, ss.requests, ss.responses_200),
        (4, 40, 40)
    );
}

#[test]
fn missing_path_is_answered_404_on_a_kept_alive_connection() {
    let mut w = World::new(8);
    let server = w.add_host(Box::new(StackHost::new(
        config(1, SERVER_IP),
        OnSim(HttpServer::new(80, Arc::new(FileSet::demo(100)))),
    )));
    let client = w.add_host(Box::new(StackHost::new(
        config(2, CLIENT_IP),
        OnSim(HttpLoadClient::new(LoadConfig {
            server: SocketAddr::new(IpAddr::V4(SERVER_IP), 80),
            connections: 1,
            path: "/missing.png".into(),
            requests_per_connection: Some(5),
        })),
    )));
    let link = ChannelConfig::default()
        .rate_bps(1_000_000_000)
        .delay_ns(50_000);
    w.connect((client, PortId(0)), (server, PortId(0)), link)
        .expect("link");
    w.run_until(2_000_000_000);
    let c = w
        .host::<StackHost<OnSim<HttpLoadClient>>>(client)
        .expect("client host");
    let st = c.app().0.stats();
    assert_eq!((st.responses_ok, st.responses_other), (0, 5), "{st:?}");
    assert_eq!(
        st.connections_established, 1,
        "one connection carried all five"
    );
    let s = w
        .host::<StackHost<OnSim<HttpServer>>>(server)
        .expect("server host");
    assert_eq!(s.app().0.stats().responses_404, 5);
}
