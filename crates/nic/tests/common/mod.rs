//! Frame builders and parsers shared by the integration tests (built on `wire`'s Reprs).
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nic::{Nic, RxDescriptor};
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpPair, IpProtocol,
    Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, SeqNumber, TcpFlags, TcpPacket, TcpRepr,
    TcpTimestamp, UdpPacket, UdpRepr,
};

pub const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
pub const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

/// One TCP segment to build.
#[derive(Clone, Debug)]
pub struct Seg {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub ts: Option<(u32, u32)>,
    pub mss_opt: Option<u16>,
    pub payload: Vec<u8>,
    pub ident: u16,
    pub ttl: u8,
    pub ecn: u8,
}

impl Seg {
    pub fn v4(sport: u16, dport: u16) -> Seg {
        Seg {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            sport,
            dport,
            seq: 1000,
            ack: 5000,
            flags: TcpFlags::ACK,
            window: 512,
            ts: None,
            mss_opt: None,
            payload: Vec::new(),
            ident: 1,
            ttl: 64,
            ecn: 0,
        }
    }

    pub fn v6(sport: u16, dport: u16) -> Seg {
        Seg {
            src: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            dst: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
            ..Seg::v4(sport, dport)
        }
    }

    pub fn with_payload(mut self, seq: u32, payload: Vec<u8>) -> Seg {
        self.seq = seq;
        self.payload = payload;
        self
    }

    pub fn flags(mut self, f: TcpFlags) -> Seg {
        self.flags = f;
        self
    }

    pub fn addrs(&self) -> IpPair {
        match (self.src, self.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => IpPair::V4 { src, dst },
            (IpAddr::V6(src), IpAddr::V6(dst)) => IpPair::V6 { src, dst },
            _ => panic!("mixed families in a test segment"),
        }
    }

    /// Builds the Ethernet frame, checksums filled.
    pub fn build(&self) -> Vec<u8> {
        let tcp = TcpRepr {
            max_seg_size: self.mss_opt,
            timestamp: self.ts.map(|(tsval, tsecr)| TcpTimestamp { tsval, tsecr }),
            payload: &self.payload,
            ..TcpRepr::bare(
                self.sport,
                self.dport,
                SeqNumber(self.seq),
                SeqNumber(self.ack),
                self.flags,
                self.window,
            )
        };
        let addrs = self.addrs();
        let tcp_len = tcp.buffer_len();
        let (ethertype, ip_len) = match addrs {
            IpPair::V4 { .. } => (EtherType::IPV4, 20),
            IpPair::V6 { .. } => (EtherType::IPV6, 40),
        };
        let mut buf = vec![0u8; 14 + ip_len + tcp_len];
        let eth = EthernetRepr {
            src_addr: MAC_A,
            dst_addr: MAC_B,
            vlan: None,
            ethertype,
        };
        eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]))
            .expect("ethernet emit");
        match addrs {
            IpPair::V4 { src, dst } => {
                let ip = Ipv4Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol: IpProtocol::TCP,
                    payload_len: tcp_len,
                    hop_limit: self.ttl,
                    dscp: 0,
                    ecn: self.ecn,
                    ident: self.ident,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset_bytes: 0,
                };
                ip.emit(
                    &mut Ipv4Packet::new_unchecked(&mut buf[14..]),
                    ChecksumCaps::ALL,
                )
                .expect("ipv4 emit");
            }
            IpPair::V6 { src, dst } => {
                let ip = Ipv6Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: IpProtocol::TCP,
                    payload_len: tcp_len,
                    hop_limit: self.ttl,
                    traffic_class: self.ecn,
                    flow_label: 0,
                    ext_headers: [None; wire::MAX_EXT_HEADERS],
                };
                ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[14..]))
                    .expect("ipv6 emit");
            }
        }
        let off = 14 + ip_len;
        tcp.emit(
            &mut TcpPacket::new_unchecked(&mut buf[off..]),
            &addrs,
            ChecksumCaps::ALL,
        )
        .expect("tcp emit");
        buf
    }
}

/// A UDP/IPv4 frame.
pub fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let udp = UdpRepr {
        src_port: sport,
        dst_port: dport,
        payload,
    };
    let udp_len = udp.buffer_len();
    let mut buf = vec![0u8; 14 + 20 + udp_len];
    EthernetRepr {
        src_addr: MAC_A,
        dst_addr: MAC_B,
        vlan: None,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]))
    .expect("eth");
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::UDP,
        payload_len: udp_len,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 7,
        dont_frag: false,
        more_frags: false,
        frag_offset_bytes: 0,
    }
    .emit(
        &mut Ipv4Packet::new_unchecked(&mut buf[14..]),
        ChecksumCaps::ALL,
    )
    .expect("ipv4");
    let addrs = IpPair::V4 { src, dst };
    udp.emit(
        &mut UdpPacket::new_unchecked(&mut buf[34..]),
        &addrs,
        ChecksumCaps::ALL,
    )
    .expect("udp");
    buf
}

/// What a test wants to know about a TCP frame, parsed with full checksum verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub addrs: IpPair,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub ts: Option<(u32, u32)>,
    pub payload: Vec<u8>,
    pub ip_ident: Option<u16>,
    /// IPv4 total length or IPv6 payload length + 40.
    pub ip_len: usize,
}

/// Parses an Ethernet/IP/TCP frame, verifying the IPv4 header checksum and the TCP checksum.
pub fn parse_tcp(frame: &[u8]) -> Result<Parsed, String> {
    let eth = EthernetFrame::new_checked(frame).map_err(|e| e.to_string())?;
    let repr = EthernetRepr::parse(&eth).map_err(|e| e.to_string())?;
    let l3 = &frame[repr.header_len()..];
    let (addrs, l4, ident, ip_len): (IpPair, &[u8], Option<u16>, usize) = match repr.ethertype {
        EtherType::IPV4 => {
            let p = Ipv4Packet::new_checked(l3).map_err(|e| e.to_string())?;
            let r = Ipv4Repr::parse(&p, ChecksumCaps::ALL).map_err(|e| format!("ipv4: {e}"))?;
            let hl = p.header_len();
            let total = usize::from(p.total_len());
            (
                IpPair::V4 {
                    src: r.src_addr,
                    dst: r.dst_addr,
                },
                &l3[hl..total],
                Some(r.ident),
                total,
            )
        }
        EtherType::IPV6 => {
            let p = Ipv6Packet::new_checked(l3).map_err(|e| e.to_string())?;
            let r = Ipv6Repr::parse(&p).map_err(|e| e.to_string())?;
            let end = 40 + usize::from(p.payload_len());
            (
                IpPair::V6 {
                    src: r.src_addr,
                    dst: r.dst_addr,
                },
                &l3[40..end],
                None,
                end,
            )
        }
        other => return Err(format!("not IP: {other:?}")),
    };
    let tcp = TcpPacket::new_checked(l4).map_err(|e| e.to_string())?;
    let r = TcpRepr::parse(&tcp, &addrs, ChecksumCaps::ALL).map_err(|e| format!("tcp: {e}"))?;
    Ok(Parsed {
        addrs,
        sport: r.src_port,
        dport: r.dst_port,
        seq: r.seq_number.0,
        ack: r.ack_number.0,
        flags: r.flags,
        window: r.window_len,
        ts: r.timestamp.map(|t| (t.tsval, t.tsecr)),
        payload: r.payload.to_vec(),
        ip_ident: ident,
        ip_len,
    })
}

/// Polls `queue` until drained, collecting every descriptor.
pub fn drain(nic: &mut Nic, queue: u16, now_ns: u64) -> Vec<RxDescriptor> {
    let mut out = Vec::new();
    for _ in 0..100_000 {
        let p = nic
            .poll_rx(queue, 64, now_ns, &mut out)
            .expect("queue exists");
        if p.drained {
            return out;
        }
    }
    panic!("queue {queue} never drained");
}

/// Drains every queue.
pub fn drain_all(nic: &mut Nic, now_ns: u64) -> Vec<RxDescriptor> {
    let mut out = Vec::new();
    for q in 0..nic.queue_count() {
        out.extend(drain(nic, q, now_ns));
    }
    out
}

/// Deterministic pseudo-random bytes (xorshift), so payloads are not all zero.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
