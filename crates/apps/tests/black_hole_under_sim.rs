//! Packetization-layer path MTU discovery (RFC 4821/8899, `tcp::plpmtud`) in the simulator:
//! a link that drops every frame above 1,214 bytes (an IP MTU of 1,200) and sends no ICMP —
//! a black hole for a server whose segments are 1,500-byte frames. With `plpmtud` on the
//! server, a 1 MiB GET completes byte-exact; without, it stalls.

mod common;

use std::sync::Arc;

use apps::App;
use apps::get::HttpGet;
use apps::http::{FileSet, HttpServer};
use common::{CLIENT_IP, SERVER_IP, config, gigabit, server_addr};
use sim::net::ShardedHost;
use sim::{ChannelConfig, PortId, World};

const BODY_BYTES: usize = 1 << 20;
/// Ethernet frame bytes the black hole lets through: 14 of header and a 1,200-byte packet.
const LINK_FRAME_BYTES_MAX: usize = 14 + 1_200;

fn body() -> Vec<u8> {
    (0..BODY_BYTES).map(|i| (i * 7 % 251) as u8).collect()
}

struct Run {
    /// The GET's body when it completed with status 200.
    body: Option<Vec<u8>>,
    /// Simulated time it completed at.
    done_ns: Option<u64>,
    server: stack::Counters,
    /// Frames the link dropped for their size (server → client).
    drop_mtu: u64,
}

fn run(link: ChannelConfig, plpmtud: bool, deadline_ns: u64) -> Run {
    let mut files = FileSet::new();
    files.insert("/big.bin", body());
    let files = Arc::new(files);
    let mut world = World::new(11);
    let mut server_cfg = config(1, SERVER_IP);
    server_cfg.tcp.plpmtud = plpmtud;
    let server = world.add_host(Box::new(ShardedHost::single(
        server_cfg,
        HttpServer::new(80, files),
    )));
    let get = HttpGet::new(
        server_addr(80),
        "sim".into(),
        "/big.bin".into(),
        BODY_BYTES as u64,
    );
    let client = world.add_host(Box::new(ShardedHost::single(config(2, CLIENT_IP), get)));
    let link = world
        .connect((client, PortId(0)), (server, PortId(0)), link)
        .expect("link");
    let mut done_ns = None;
    let mut t = 0;
    while t < deadline_ns {
        t += 10_000_000;
        world.run_until(t);
        let c = world.host::<ShardedHost<HttpGet>>(client).expect("client");
        if c.app().done() {
            done_ns = Some(t);
            break;
        }
    }
    let c = world.host::<ShardedHost<HttpGet>>(client).expect("client");
    let body = match c.app().outcome() {
        Some(Ok(r)) if r.status == 200 => Some(r.body.clone()),
        _ => None,
    };
    let s = world
        .host::<ShardedHost<HttpServer>>(server)
        .expect("server");
    Run {
        body,
        done_ns,
        server: s.stack().counters(),
        drop_mtu: world
            .link_counters(link, sim::Dir::BToA)
            .expect("link")
            .drop_mtu,
    }
}

#[test]
fn a_get_through_a_black_hole_completes_byte_exact_with_plpmtud() {
    let r = run(
        gigabit().mtu_bytes(LINK_FRAME_BYTES_MAX),
        true,
        30_000_000_000,
    );
    let done = r.done_ns.expect("the GET completes");
    assert!(r.body.as_deref() == Some(&body()[..]), "body differs");
    let k = &r.server;
    eprintln!(
        "black hole with PLPMTUD: done at {:.2} s, {} black holes, {} sizes passed, {} failed, \
         {} frames dropped for size",
        done as f64 / 1e9,
        k.tcp_plpmtud_black_holes,
        k.tcp_plpmtud_tries_passed,
        k.tcp_plpmtud_tries_failed,
        r.drop_mtu
    );
    assert_eq!(k.tcp_plpmtud_black_holes, 1);
    // The search went up from the first reduction (730) and found larger sizes that pass.
    assert!(k.tcp_plpmtud_tries_passed >= 1, "{k:?}");
    assert!(r.drop_mtu > 0, "the link did drop large frames");
}

#[test]
fn a_get_through_a_black_hole_stalls_without_plpmtud() {
    let r = run(
        gigabit().mtu_bytes(LINK_FRAME_BYTES_MAX),
        false,
        30_000_000_000,
    );
    assert_eq!(
        r.done_ns, None,
        "no outcome in 30 s: the large segments never pass"
    );
    assert!(r.body.is_none());
    assert_eq!(r.server.tcp_plpmtud_black_holes, 0);
    assert!(r.drop_mtu > 0);
}

#[test]
fn plpmtud_does_nothing_on_a_path_that_carries_full_frames() {
    let r = run(gigabit(), true, 30_000_000_000);
    assert!(r.body.as_deref() == Some(&body()[..]));
    assert_eq!(r.server.tcp_plpmtud_black_holes, 0);
    assert_eq!(r.drop_mtu, 0);
}
