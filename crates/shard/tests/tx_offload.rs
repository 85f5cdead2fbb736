//! Transmit offloads through the shard core: a shard whose stack sends TSO frames either hands
//! them to its port whole with the offload the device must apply (`tx_offload_in_device`), or
//! has its NIC model segment and checksum them in software, so the port gets wire frames. In
//! both cases a peer stack gets every byte.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use app::{App, Conn, Ctx};
use nic::{Nic, NicConfig, TxOffload};
use shard::{Shard, ShardConfig};
use stack::{
    InterfaceConfig, Ipv4Cidr, RxMeta, SocketEvent, Stack, StackConfig, TSO_PAYLOAD_BYTES_MAX,
    TxOffloadCaps,
};
use wire::EthernetAddress;

const HOST_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const BYTES: usize = 400_000;

/// Connects to the peer and writes `BYTES` of the ttcp pattern.
struct Sender {
    conn: Option<Conn>,
    sent: usize,
}

impl Sender {
    fn push(&mut self, ctx: &mut Ctx<'_>) {
        let Some(c) = self.conn else { return };
        while self.sent < BYTES {
            let chunk: Vec<u8> = (self.sent..BYTES.min(self.sent + 16_384))
                .map(|i| (i % 251) as u8)
                .collect();
            match ctx.send(c, &chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.sent += n,
            }
        }
    }
}

impl App for Sender {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.conn = ctx.connect(SocketAddr::new(IpAddr::V4(PEER_IP), 5001)).ok();
    }
    fn poll(&mut self, ctx: &mut Ctx<'_>, _: &[SocketEvent]) {
        self.push(ctx);
    }
}

/// Runs the transfer; returns every (frame length, offload) the port was handed.
fn transfer(in_device: bool) -> Vec<(usize, TxOffload)> {
    let mut cfg = StackConfig::new(InterfaceConfig::new(HOST_MAC, Ipv4Cidr::new(HOST_IP, 24)));
    cfg.tx_offload = TxOffloadCaps {
        tso_payload_bytes_max: TSO_PAYLOAD_BYTES_MAX,
        tcp_csum: in_device,
    };
    cfg.tcp.send_buffer_bytes = 1 << 20;
    let nic = Nic::new(NicConfig {
        queues: 1,
        ..NicConfig::default()
    })
    .expect("nic");
    let shard_cfg = ShardConfig {
        tx_offload_in_device: in_device,
        ..ShardConfig::new(app::ShardInfo {
            shard: 0,
            shards: 1,
            numa_node: 0,
        })
    };
    let app = Sender {
        conn: None,
        sent: 0,
    };
    let mut s = Shard::new(shard_cfg, nic, Stack::new(cfg), app);
    let mut peer_cfg = StackConfig::new(InterfaceConfig::new(PEER_MAC, Ipv4Cidr::new(PEER_IP, 24)));
    peer_cfg.tcp.recv_buffer_bytes = 1 << 20;
    let mut peer = Stack::new(peer_cfg);
    let l = peer
        .tcp_listen(SocketAddr::new(IpAddr::V4(PEER_IP), 5001), 4)
        .expect("listen");
    let mut server = None;
    let mut got = Vec::new();
    let mut handed = Vec::new();
    let mut now = 0u64;
    s.start(now);
    for _ in 0..100_000 {
        s.handle_timeout(now);
        let mut moved = false;
        while let Some((mut f, off)) = s.poll_tx_offload() {
            moved = true;
            handed.push((f.len(), off));
            if off.tso_mss.is_some() || off.csum.l4 {
                // What the device would do to the checksum; segmentation the peer does not
                // need (it takes the large segment whole, as after GRO).
                assert!(wire::partial::complete_l4_checksum(&mut f));
            }
            peer.receive(now, &f, &RxMeta::NONE);
            s.recycle_tx(f);
        }
        let mut replies = Vec::new();
        while let Some(f) = peer.poll_transmit(now) {
            replies.push(f);
        }
        if !replies.is_empty() {
            moved = true;
            s.handle_rx(now, replies);
        }
        if server.is_none() {
            server = peer.tcp_accept(l).ok().map(|(h, _)| h);
        }
        if let Some(h) = server {
            let mut buf = vec![0u8; 65_536];
            while let Ok(n @ 1..) = peer.tcp_recv(h, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
        }
        if got.len() == BYTES {
            break;
        }
        if !moved {
            let next = [s.poll_timeout(), peer.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + 1_000_000);
            now = next.max(now + 1_000);
            peer.handle_timeout(now);
        }
    }
    assert_eq!(got.len(), BYTES, "bytes delivered");
    assert!(
        got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
        "the pattern"
    );
    handed
}

#[test]
fn device_offload_hands_the_port_tso_frames_with_their_gso_size() {
    let handed = transfer(true);
    let tso: Vec<_> = handed.iter().filter(|(_, o)| o.tso_mss.is_some()).collect();
    assert!(!tso.is_empty(), "no TSO frame");
    assert!(
        tso.iter()
            .all(|(len, o)| *len > 1514 && o.tso_mss == Some(1448))
    );
    // 400,000 bytes in far fewer frames than 277 segments.
    assert!(handed.len() < 100, "{} frames", handed.len());
}

#[test]
fn model_offload_segments_in_software_so_the_port_gets_wire_frames() {
    let handed = transfer(false);
    assert!(
        handed
            .iter()
            .all(|(len, o)| *len <= 1514 && *o == TxOffload::NONE)
    );
    assert!(handed.len() >= BYTES / 1448, "{} frames", handed.len());
}
