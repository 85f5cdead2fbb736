//! The body of the `reassembly` fuzz target (`fuzz/fuzz_targets/reassembly.rs`) and of its
//! seeded stand-in (`crates/stack/tests/reassembly_fuzz.rs`), included by path in both.
//!
//! One stack with UDP sockets on port 9 (IPv4 and IPv6) and small reassembly bounds receives
//! fragments chosen by the input: the input declares datagrams (family, one of four sources,
//! length up to past `reasm_bytes_max`) and then sends slices of them at any 8-byte offset and
//! length, with an honest or a lying more-fragments flag, in any order, repeated or
//! overlapping, while the clock advances. Every byte at a given offset of a declared datagram
//! is the same whoever sends it, and each declaration has its own source port and ident.
//! Invariants after every frame:
//! - nothing panics;
//! - the memory held for reassembly stays within `reasm_mem_max` and the datagrams under
//!   reassembly within `reasm_datagrams_max`;
//! - every datagram a socket receives is exactly one declared datagram's payload (found by its
//!   source port), never a mix or a truncation.
#![allow(dead_code)]

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use stack::{InterfaceConfig, Ipv4Cidr, Ipv6Cidr, RxMeta, SocketHandle, Stack, StackConfig};
use wire::EthernetAddress;

const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
const MAC_PEER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const IP6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const PORT: u16 = 9;
const MS: u64 = 1_000_000;
const MEM_MAX_BYTES: usize = 24 * 1024;
const SOURCE_MEM_MAX_BYTES: usize = 12 * 1024;
const DATAGRAMS_MAX: usize = 6;
const DATAGRAM_BYTES_MAX: usize = 6_000;
const OPS_MAX: usize = 600;

/// A datagram the input declared: the UDP datagram (header and payload) as sent whole.
struct Declared {
    v6: bool,
    source: u8,
    ident: u32,
    udp: Vec<u8>,
}

fn source_v4(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, 10 + i)
}

fn source_v6(i: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10 + u16::from(i))
}

/// The one's-complement sum of `data` as 16-bit big-endian words, folded.
fn sum16(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

fn finish(acc: u32) -> u16 {
    let c = !(sum16(acc, &[]) as u16);
    if c == 0 { 0xffff } else { c }
}

/// The whole UDP datagram of declaration number `n` with `payload_len` payload bytes.
fn udp_datagram(n: u32, v6: bool, source: u8, payload_len: usize) -> Vec<u8> {
    let len = 8 + payload_len;
    let mut d = vec![0u8; len];
    d[0..2].copy_from_slice(&(1000 + (n % 60_000) as u16).to_be_bytes());
    d[2..4].copy_from_slice(&PORT.to_be_bytes());
    d[4..6].copy_from_slice(&(len.min(0xffff) as u16).to_be_bytes());
    for (i, b) in d[8..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(0x9e37_79b1).wrapping_add(n) as u8 ^ (i >> 8) as u8;
    }
    let mut acc = if v6 {
        let mut acc = sum16(0, &source_v6(source).octets());
        acc = sum16(acc, &IP6_B.octets());
        sum16(acc, &[0, 0, (len >> 8) as u8, len as u8, 0, 0, 0, 17])
    } else {
        let mut acc = sum16(0, &source_v4(source).octets());
        acc = sum16(acc, &IP_B.octets());
        sum16(acc, &[0, 17, (len >> 8) as u8, len as u8])
    };
    acc = sum16(acc, &d);
    d[6..8].copy_from_slice(&finish(acc).to_be_bytes());
    d
}

/// One fragment frame: bytes `[offset, offset + data.len())` of a datagram.
fn fragment_frame(d: &Declared, offset: usize, data: &[u8], more: bool) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 48 + data.len());
    f.extend_from_slice(&MAC_B.0);
    f.extend_from_slice(&MAC_PEER);
    if d.v6 {
        f.extend_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[44, 64]);
        f.extend_from_slice(&source_v6(d.source).octets());
        f.extend_from_slice(&IP6_B.octets());
        let off = (offset as u16 & 0xfff8) | u16::from(more);
        f.extend_from_slice(&[17, 0]);
        f.extend_from_slice(&off.to_be_bytes());
        f.extend_from_slice(&d.ident.to_be_bytes());
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
        h[4..6].copy_from_slice(&(d.ident as u16).to_be_bytes());
        let frag = (u16::from(more) << 13) | ((offset / 8) as u16 & 0x1fff);
        h[6..8].copy_from_slice(&frag.to_be_bytes());
        h[8] = 64;
        h[9] = 17;
        h[12..16].copy_from_slice(&source_v4(d.source).octets());
        h[16..20].copy_from_slice(&IP_B.octets());
        let c = !(sum16(0, &h) as u16);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
    }
    f.extend_from_slice(data);
    f
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
}

/// What one input reached, for the stand-in to check the harness is not vacuous.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    pub datagrams_received: u32,
    pub fragments_sent: u32,
}

fn config() -> StackConfig {
    let mut ifc = InterfaceConfig::new(MAC_B, Ipv4Cidr::new(IP_B, 24));
    ifc.ipv6.push(Ipv6Cidr::new(IP6_B, 64));
    let mut cfg = StackConfig::new(ifc);
    cfg.limits.reasm_mem_max = MEM_MAX_BYTES;
    cfg.limits.reasm_source_mem_max = SOURCE_MEM_MAX_BYTES;
    cfg.limits.reasm_datagrams_max = DATAGRAMS_MAX;
    cfg.limits.reasm_bytes_max = DATAGRAM_BYTES_MAX;
    cfg.limits.reasm_timeout_ns = 1_000 * MS;
    cfg.limits.udp_rx_queue_datagrams_max = 64;
    cfg
}

/// Takes every datagram the sockets hold and checks each against its declaration.
fn drain(stack: &mut Stack, socks: [SocketHandle; 2], declared: &[Declared], out: &mut Outcome) {
    for s in socks {
        while let Ok(d) = stack.udp_recv_from(s) {
            out.datagrams_received += 1;
            let n = u32::from(d.src.port()) - 1000;
            let decl = declared
                .iter()
                .enumerate()
                .rev()
                .find(|(k, _)| *k as u32 % 60_000 == n)
                .map(|(_, x)| x)
                .expect("a datagram from a port no declaration used");
            assert_eq!(
                d.payload,
                decl.udp[8..],
                "datagram from port {} delivered altered ({} bytes, declared {})",
                d.src.port(),
                d.payload.len(),
                decl.udp.len() - 8
            );
        }
    }
}

/// Runs one input.
pub fn run(data: &[u8]) -> Outcome {
    let mut input = Input(data);
    let mut stack = Stack::new(config());
    let socks = [
        stack
            .udp_bind(SocketAddr::new(IpAddr::V4(IP_B), PORT))
            .expect("bind v4"),
        stack
            .udp_bind(SocketAddr::new(IpAddr::V6(IP6_B), PORT))
            .expect("bind v6"),
    ];
    let mut now = 0u64;
    let mut declared: Vec<Declared> = Vec::new();
    let mut out = Outcome::default();
    for _ in 0..OPS_MAX {
        if input.0.is_empty() {
            break;
        }
        let op = input.u8();
        match op % 8 {
            0 if declared.len() < 64 => {
                let v6 = op & 0x80 != 0;
                let source = (op >> 4) & 3;
                let payload_len = usize::from(input.u16()) % (DATAGRAM_BYTES_MAX + 600);
                let n = declared.len() as u32;
                declared.push(Declared {
                    v6,
                    source,
                    ident: 0x1000 + n * 7 + u32::from(input.u8()) * 0x10000,
                    udp: udp_datagram(n, v6, source, payload_len),
                });
            }
            1..=5 if !declared.is_empty() => {
                let d = &declared[usize::from(input.u8()) % declared.len()];
                let units = d.udp.len().div_ceil(8);
                // Mostly pieces on an 8-byte grid within the datagram; sometimes past its end.
                let start = usize::from(input.u16()) % (units + 2) * 8;
                let len = 8 * (1 + usize::from(input.u8()) % 190);
                let end = (start + len).min(d.udp.len()).max(start);
                let lie = op & 0x80 != 0 && op % 8 == 5;
                let more = if lie {
                    op & 0x40 != 0
                } else {
                    end < d.udp.len()
                };
                let bytes = d.udp.get(start..end).unwrap_or(&[]);
                let frame = fragment_frame(d, start, bytes, more);
                stack.receive(now, &frame, &RxMeta::NONE);
                out.fragments_sent += 1;
            }
            6 => now += u64::from(input.u8()) * 10 * MS,
            _ => {
                now += MS;
                stack.handle_timeout(now);
            }
        }
        assert!(stack.reassembly_bytes_held() <= MEM_MAX_BYTES);
        assert!(stack.reassembly_in_progress() <= DATAGRAMS_MAX);
        drain(&mut stack, socks, &declared, &mut out);
        while stack.poll_transmit(now).is_some() {}
    }
    now += 10_000 * MS;
    stack.handle_timeout(now);
    assert_eq!(
        stack.reassembly_in_progress(),
        0,
        "a datagram outlived its timeout"
    );
    assert_eq!(stack.reassembly_bytes_held(), 0);
    drain(&mut stack, socks, &declared, &mut out);
    out
}
