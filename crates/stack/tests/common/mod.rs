//! Two stacks wired back to back on a virtual clock.
#![allow(dead_code)]

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use stack::RxMeta;

use stack::{
    InterfaceConfig, Ipv4Cidr, Ipv6Cidr, Readiness, SocketEvent, SocketHandle, Stack, StackConfig,
};
use wire::EthernetAddress;

pub const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
pub const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// On the link, never answers.
pub const IP_SILENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);
pub const IP6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const IP6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;

pub fn config(mac: EthernetAddress, v4: Ipv4Addr, v6: Ipv6Addr) -> StackConfig {
    let mut ifc = InterfaceConfig::new(mac, Ipv4Cidr::new(v4, 24));
    ifc.ipv6.push(Ipv6Cidr::new(v6, 64));
    StackConfig::new(ifc)
}

pub fn config_a() -> StackConfig {
    config(MAC_A, IP_A, IP6_A)
}

pub fn config_b() -> StackConfig {
    config(MAC_B, IP_B, IP6_B)
}

pub fn v4(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(ip), port)
}

pub fn v6(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(ip), port)
}

/// Two stacks and the wire between them.
pub struct Pair {
    pub a: Stack,
    pub b: Stack,
    pub now: u64,
    /// Frames A sent, in order, when `capture_a` is set (instead of delivering them).
    pub captured_a: Vec<Vec<u8>>,
    pub capture_a: bool,
    /// Every frame B sent (delivered or not).
    pub log_b: Vec<Vec<u8>>,
}

impl Pair {
    pub fn new() -> Pair {
        Pair::with(config_a(), config_b())
    }

    pub fn with(a: StackConfig, b: StackConfig) -> Pair {
        Pair {
            a: Stack::new(a),
            b: Stack::new(b),
            now: 0,
            captured_a: Vec::new(),
            capture_a: false,
            log_b: Vec::new(),
        }
    }

    /// Moves frames both ways until neither side has anything to send (bounded).
    pub fn exchange(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            while let Some(f) = self.a.poll_transmit(self.now) {
                moved = true;
                if self.capture_a {
                    self.captured_a.push(f);
                } else {
                    self.b.receive(self.now, &f, &RxMeta::NONE);
                }
            }
            while let Some(f) = self.b.poll_transmit(self.now) {
                moved = true;
                self.log_b.push(f.clone());
                self.a.receive(self.now, &f, &RxMeta::NONE);
            }
            if !moved {
                return;
            }
        }
        panic!("exchange did not settle");
    }

    /// Advances the clock by `dt_ns`, firing every timer due on the way and exchanging the
    /// frames they produce.
    pub fn advance(&mut self, dt_ns: u64) {
        let end = self.now + dt_ns;
        loop {
            self.exchange();
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.now = end;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        self.exchange();
    }
}

/// Resolves A↔B in both families (one ping each way), so later frames carry no ARP/ND.
pub fn resolve(p: &mut Pair) {
    p.a.send_ping(p.now, IpAddr::V4(IP_B), 1, 1, b"r")
        .expect("ping v4");
    p.a.send_ping(p.now, IpAddr::V6(IP6_B), 1, 1, b"r")
        .expect("ping v6");
    p.exchange();
    while p.a.poll_echo_reply().is_some() {}
}

/// Offsets into a captured frame.
pub const ETH: usize = 14;

/// IPv4: the fragment offset (bytes) and MF of a frame.
pub fn v4_frag(frame: &[u8]) -> (u16, bool) {
    let p = wire::Ipv4Packet::new_checked(&frame[ETH..]).expect("ipv4");
    (p.frag_offset_bytes(), p.more_frags())
}

/// IPv4: rewrites the fragment offset of a frame and fixes the header checksum.
pub fn v4_set_frag_offset(frame: &mut [u8], offset_bytes: u16) {
    let mut p = wire::Ipv4Packet::new_checked(&mut frame[ETH..]).expect("ipv4");
    let (df, mf) = (p.dont_frag(), p.more_frags());
    p.set_frag(df, mf, offset_bytes);
    p.fill_checksum();
}

/// IPv6 with a fragment header right after the fixed header: rewrites its offset.
pub fn v6_set_frag_offset(frame: &mut [u8], offset_bytes: u16) {
    let at = ETH + 40 + 2;
    let old = u16::from_be_bytes([frame[at], frame[at + 1]]);
    let v = (offset_bytes & 0xfff8) | (old & 0x0007);
    frame[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// An Ethernet + IPv4 frame from `src` to `dst` (MAC, address) whose IPv4 header announces
/// `payload_len` bytes of `protocol`, DF as `dont_frag`; the payload, at `ETH + 20`, is left
/// zero for the caller to write.
pub fn ipv4_frame(
    src: (EthernetAddress, Ipv4Addr),
    dst: (EthernetAddress, Ipv4Addr),
    protocol: wire::IpProtocol,
    payload_len: usize,
    dont_frag: bool,
) -> Vec<u8> {
    use wire::{ChecksumCaps, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr};
    let ip = Ipv4Repr {
        src_addr: src.1,
        dst_addr: dst.1,
        protocol,
        payload_len,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let mut f = vec![0u8; ETH + ip.buffer_len()];
    EthernetRepr {
        src_addr: src.0,
        dst_addr: dst.0,
        vlan: None,
        ethertype: wire::EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .unwrap();
    ip.emit(
        &mut Ipv4Packet::new_unchecked(&mut f[ETH..]),
        ChecksumCaps::ALL,
    )
    .unwrap();
    f
}

/// `seg` in an Ethernet/IPv4 frame from `src` to `dst` (MAC, address), DF set, checksums
/// filled.
pub fn tcp_v4_frame(
    src: (EthernetAddress, Ipv4Addr),
    dst: (EthernetAddress, Ipv4Addr),
    seg: &wire::TcpRepr<'_>,
) -> Vec<u8> {
    let mut f = ipv4_frame(src, dst, wire::IpProtocol::TCP, seg.buffer_len(), true);
    seg.emit(
        &mut wire::TcpPacket::new_unchecked(&mut f[ETH + 20..]),
        &wire::IpPair::V4 {
            src: src.1,
            dst: dst.1,
        },
        wire::ChecksumCaps::ALL,
    )
    .unwrap();
    f
}

/// `icmp` in an Ethernet/IPv4 frame from `src` to `dst` (MAC, address), checksums filled.
pub fn icmpv4_frame(
    src: (EthernetAddress, Ipv4Addr),
    dst: (EthernetAddress, Ipv4Addr),
    icmp: &wire::icmpv4::Icmpv4Repr<'_>,
) -> Vec<u8> {
    let mut f = ipv4_frame(src, dst, wire::IpProtocol::ICMP, icmp.buffer_len(), false);
    icmp.emit(
        &mut wire::Icmpv4Packet::new_unchecked(&mut f[ETH + 20..]),
        wire::ChecksumCaps::ALL,
    )
    .unwrap();
    f
}

/// An ICMPv4 error from B (IP_B, MAC_B) to A about the IP packet in `frame` (which A sent):
/// `icmp` builds the message around the quote (the IP header and 8 bytes of TCP).
pub fn icmpv4_from_b_about(
    frame: &[u8],
    icmp: impl FnOnce(&[u8]) -> wire::icmpv4::Icmpv4Repr<'_>,
) -> Vec<u8> {
    let icmp = icmp(&frame[ETH..ETH + 28]);
    icmpv4_frame((MAC_B, IP_B), (MAC_A, IP_A), &icmp)
}

// TCP helpers shared by the tests of a connection between A and B.

pub fn events(s: &mut Stack) -> Vec<SocketEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

pub fn readiness_of(evs: &[SocketEvent], h: SocketHandle) -> Readiness {
    evs.iter()
        .filter(|e| e.handle == h)
        .fold(Readiness::NONE, |acc, e| acc | e.readiness)
}

/// Listener on B, connection from A, accepted: (client, server) handles.
pub fn establish(p: &mut Pair, server: SocketAddr) -> (SocketHandle, SocketHandle) {
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let ev_a = events(&mut p.a);
    assert!(readiness_of(&ev_a, c).contains(Readiness::CONNECTED));
    let ev_b = events(&mut p.b);
    assert!(
        readiness_of(&ev_b, l).contains(Readiness::READABLE),
        "listener readable"
    );
    let (s, peer) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(peer, p.a.local_addr(c).expect("local"));
    assert_eq!(p.b.peer_addr(s), Ok(peer));
    (c, s)
}

pub fn read_all(s: &mut Stack, h: SocketHandle) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.tcp_recv(h, &mut buf) {
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return out,
        }
    }
}

/// xorshift64*: deterministic fault and workload decisions for the random-link tests.
pub struct FaultRng(pub u64);

impl FaultRng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}
