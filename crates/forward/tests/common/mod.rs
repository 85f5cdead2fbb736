//! A two-port router and frame builders shared by the forwarding tests.
//!
//! ```text
//! host A 10.0.1.10 fd00:1::10 ── port 0 (10.0.1.1/24, fd00:1::1/64) ┐
//!                                                                     router
//! host B 10.0.2.20 fd00:2::20 ── port 1 (10.0.2.1/24, fd00:2::1/64) ┘
//! gateway 10.0.2.254 / fd00:2::fe on port 1: 192.168.0.0/16, 2001:db8::/32 behind it
//! ```
#![allow(dead_code)]

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use forward::{Forwarder, ForwarderConfig, NeighbourTable, PortConfig};
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet,
    Ipv4Repr, Ipv6Packet, Ipv6Repr, UdpPacket, UdpRepr,
};

pub const PORT0_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
pub const PORT1_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
pub const HOST_A_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 0x0a]);
pub const HOST_B_MAC: EthernetAddress = EthernetAddress([0x02, 0xbb, 0, 0, 0, 0x0b]);
pub const GW_MAC: EthernetAddress = EthernetAddress([0x02, 0xcc, 0, 0, 0, 0x0c]);

pub const PORT0_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
pub const PORT1_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
pub const HOST_A_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
pub const HOST_B_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 20);
pub const GW_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 254);

pub fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Frame buffers are this large (a typical pool buffer), so ICMP errors fit in place.
pub const BUF_BYTES: usize = 2048;

pub fn config(mtu1_bytes: u16) -> ForwarderConfig {
    ForwarderConfig {
        ports: vec![
            PortConfig {
                mac: PORT0_MAC,
                mtu_bytes: 1500,
                ipv4: vec![(PORT0_V4, 24)],
                ipv6: vec![(v6("fd00:1::1"), 64), (v6("fe80::1"), 64)],
            },
            PortConfig {
                mac: PORT1_MAC,
                mtu_bytes: mtu1_bytes,
                ipv4: vec![(PORT1_V4, 24)],
                ipv6: vec![(v6("fd00:2::1"), 64)],
            },
        ],
        ..ForwarderConfig::default()
    }
}

pub fn router_with(cfg: &ForwarderConfig) -> (Forwarder, NeighbourTable) {
    let mut f = Forwarder::new(cfg).unwrap();
    f.add_route_via("192.168.0.0/16".parse().unwrap(), IpAddr::V4(GW_V4))
        .unwrap();
    f.add_route_via(
        "2001:db8::/32".parse().unwrap(),
        IpAddr::V6(v6("fd00:2::fe")),
    )
    .unwrap();
    let mut n = NeighbourTable::new(64);
    n.insert(0, IpAddr::V4(HOST_A_V4), HOST_A_MAC);
    n.insert(1, IpAddr::V4(HOST_B_V4), HOST_B_MAC);
    n.insert(1, IpAddr::V4(GW_V4), GW_MAC);
    n.insert(0, IpAddr::V6(v6("fd00:1::10")), HOST_A_MAC);
    n.insert(1, IpAddr::V6(v6("fd00:2::20")), HOST_B_MAC);
    n.insert(1, IpAddr::V6(v6("fd00:2::fe")), GW_MAC);
    (f, n)
}

pub fn router() -> (Forwarder, NeighbourTable) {
    router_with(&config(1500))
}

fn buffer(len: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(BUF_BYTES.max(len));
    b.resize(len, 0);
    b
}

/// An IPv4 UDP frame from `src` to `dst` with `payload_bytes` of pattern, addressed to
/// `dst_mac`.
pub fn udp_v4(
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    payload_bytes: usize,
    dont_frag: bool,
) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_bytes).map(|i| i as u8).collect();
    let udp = UdpRepr {
        src_port: 4000,
        dst_port: 5000,
        payload: &payload,
    };
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::UDP,
        payload_len: udp.buffer_len(),
        hop_limit: ttl,
        dscp: 0,
        ecn: 0,
        ident: 0x1234,
        dont_frag,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let mut f = buffer(14 + ip.buffer_len());
    EthernetRepr {
        src_addr: HOST_A_MAC,
        dst_addr: dst_mac,
        vlan: None,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .unwrap();
    let mut ipp = Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.emit(&mut ipp, ChecksumCaps::ALL).unwrap();
    let pair = wire::IpPair::V4 { src, dst };
    udp.emit(
        &mut UdpPacket::new_unchecked(&mut f[34..]),
        &pair,
        ChecksumCaps::ALL,
    )
    .unwrap();
    f
}

/// An IPv6 UDP frame.
pub fn udp_v6(
    dst_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    payload_bytes: usize,
) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_bytes).map(|i| i as u8).collect();
    let udp = UdpRepr {
        src_port: 4000,
        dst_port: 5000,
        payload: &payload,
    };
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::UDP,
        payload_len: udp.buffer_len(),
        hop_limit,
        traffic_class: 0,
        flow_label: 7,
        ext_headers: [None; wire::MAX_EXT_HEADERS],
    };
    let mut f = buffer(14 + ip.buffer_len());
    EthernetRepr {
        src_addr: HOST_A_MAC,
        dst_addr: dst_mac,
        vlan: None,
        ethertype: EtherType::IPV6,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .unwrap();
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut f[14..]))
        .unwrap();
    let pair = wire::IpPair::V6 { src, dst };
    udp.emit(
        &mut UdpPacket::new_unchecked(&mut f[54..]),
        &pair,
        ChecksumCaps::ALL,
    )
    .unwrap();
    f
}

/// A tiny deterministic generator (xorshift64*), so the seeded tests need no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A copy of `frame` in a pool-sized buffer (`clone` would keep only the frame's length of
/// capacity, leaving no room for an ICMP error built in place).
pub fn dup(frame: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(BUF_BYTES.max(frame.len()));
    b.extend_from_slice(frame);
    b
}
