//! Zero allocations per forwarded packet in steady state: a one-way ttcp flow from a client
//! host through a two-port router (`runtime::run_routed_pair`) to a server host, counted by
//! the process-wide counting allocator (a binary of its own). The window opens after a
//! warm-up of forwarded frames and closes after a number of them: bounded by packet counts,
//! never by time. The count covers the router's threads, both hosts' shards and both wires.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::ControlFlow;
use std::time::Duration;

use apps::ttcp::{TtcpReceiver, TtcpSendConfig, TtcpSender};
use platform::alloc_count::{CountingAlloc, exclude_current_thread};
use runtime::{HostConfig, RoutedView, RouterConfig, RunLimits, WireConfig, run_routed_pair};
use stack::{InterfaceConfig, Ipv4Cidr};
use wire::EthernetAddress;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// Frames the router forwarded before the window opens.
const WARMUP_FRAMES: u64 = 100_000;
/// Frames forwarded in the window.
const WINDOW_FRAMES: u64 = 100_000;
/// Allocations in a window that no packet causes (a pool's new high, a TCP timer round):
/// any per-packet or per-burst allocation would put thousands in the window.
const NOT_PER_PACKET_MAX: u64 = 16;

fn iface(mac_last: u8, ip: Ipv4Addr, gateway: Option<Ipv4Addr>) -> InterfaceConfig {
    let mut i = InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 2, mac_last]),
        Ipv4Cidr::new(ip, 24),
    );
    i.gateway_v4 = gateway;
    i
}

#[test]
fn forwarding_allocates_nothing_per_packet() {
    exclude_current_thread();
    let (r0, r1) = (Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 1, 2, 1));
    let server_ip = Ipv4Addr::new(10, 1, 2, 2);
    let router = RouterConfig::new(vec![iface(1, r0, None), iface(2, r1, None)]);
    let client = HostConfig::new(iface(3, Ipv4Addr::new(10, 1, 1, 2), Some(r0)), 1);
    let server = HostConfig::new(iface(4, server_ip, Some(r1)), 1);
    let cfg = TtcpSendConfig {
        remote: SocketAddr::new(IpAddr::V4(server_ip), 5001),
        bytes_per_conn: 1 << 40,
        conns: 2,
    };
    let mut open: Option<(u64, u64)> = None;
    let mut result: Option<(u64, u64)> = None;
    let r = run_routed_pair(
        &router,
        &client,
        move |_| TtcpSender::new(cfg),
        &server,
        |_| TtcpReceiver::new(5001, 2),
        WireConfig::default(),
        RunLimits {
            duration: Duration::from_secs(30),
            stop_when_client_done: false,
            monitor_every: Duration::from_millis(1),
        },
        |v: &RoutedView| {
            let allocs = ALLOC.allocations();
            let fwd: u64 = v.router.iter().map(|s| s.forwarded).sum();
            match open {
                None if fwd >= WARMUP_FRAMES => open = Some((fwd, allocs)),
                Some((f0, a0)) if fwd >= f0 + WINDOW_FRAMES => {
                    result = Some((fwd - f0, allocs - a0));
                    return ControlFlow::Break(());
                }
                _ => {}
            }
            ControlFlow::Continue(())
        },
    )
    .expect("run");
    let (frames, allocs) = result.expect("the window closed within the run");
    eprintln!(
        "router window: {frames} frames forwarded, {allocs} allocations ({:.5} per frame)",
        allocs as f64 / frames as f64
    );
    assert_eq!(r.router.drops_io(), 0);
    assert!(
        allocs <= NOT_PER_PACKET_MAX,
        "{allocs} allocations over {frames} forwarded frames"
    );
}
