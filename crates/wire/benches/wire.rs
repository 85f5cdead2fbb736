//! Benchmarks: RFC 1071 checksum throughput (bytes/s, so criterion prints GB/s) and the cost of
//! parsing an Ethernet → IPv4 → TCP frame with MSS/SACK/timestamp options into Reprs.

use core::net::Ipv4Addr;

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpPair, IpProtocol,
    Ipv4Packet, Ipv4Repr, SackBlock, SeqNumber, TcpFlags, TcpPacket, TcpRepr, TcpTimestamp,
    checksum,
};

fn bench_checksum(c: &mut Criterion) {
    let mut g = c.benchmark_group("checksum");
    for len in [64usize, 1500, 65536] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("fast/{len}"), |b| {
            b.iter(|| checksum::sum(black_box(&data)))
        });
        g.bench_function(format!("portable/{len}"), |b| {
            b.iter(|| checksum::sum_portable(black_box(&data)))
        });
        g.bench_function(format!("naive/{len}"), |b| {
            b.iter(|| checksum::sum_naive(black_box(&data)))
        });
    }
    g.finish();
}

fn tcp_frame() -> Vec<u8> {
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let dst = Ipv4Addr::new(10, 0, 0, 2);
    let payload = [0xabu8; 64];
    let tcp = TcpRepr {
        max_seg_size: Some(1460),
        sack_blocks: [
            Some(SackBlock {
                left: SeqNumber(3000),
                right: SeqNumber(4000),
            }),
            Some(SackBlock {
                left: SeqNumber(5000),
                right: SeqNumber(6000),
            }),
            None,
            None,
        ],
        timestamp: Some(TcpTimestamp { tsval: 1, tsecr: 2 }),
        payload: &payload,
        ..TcpRepr::bare(
            40000,
            80,
            SeqNumber(1000),
            SeqNumber(2000),
            TcpFlags::ACK | TcpFlags::PSH,
            502,
        )
    };
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::TCP,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
        vlan: None,
        ethertype: EtherType::IPV4,
    };
    let mut out = vec![0u8; eth.header_len() + ip.buffer_len()];
    let mut f = EthernetFrame::new_unchecked(&mut out[..]);
    let _ = eth.emit(&mut f);
    let mut p = Ipv4Packet::new_unchecked(f.payload_mut());
    let _ = ip.emit(&mut p, ChecksumCaps::ALL);
    let mut s = TcpPacket::new_unchecked(p.payload_mut());
    let _ = tcp.emit(&mut s, &IpPair::V4 { src, dst }, ChecksumCaps::ALL);
    out
}

fn parse_frame(bytes: &[u8], caps: ChecksumCaps) -> Option<(u16, u32)> {
    let f = EthernetFrame::new_checked(bytes).ok()?;
    let _eth = EthernetRepr::parse(&f).ok()?;
    let ip = Ipv4Packet::new_checked(f.payload()).ok()?;
    let ip_repr = Ipv4Repr::parse(&ip, caps).ok()?;
    let addrs = IpPair::V4 {
        src: ip_repr.src_addr,
        dst: ip_repr.dst_addr,
    };
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    let t = TcpRepr::parse(&tcp, &addrs, caps).ok()?;
    Some((t.src_port, t.seq_number.0))
}

fn bench_parse(c: &mut Criterion) {
    let frame = tcp_frame();
    assert!(parse_frame(&frame, ChecksumCaps::ALL).is_some());
    let mut g = c.benchmark_group("parse_eth_ipv4_tcp_opts");
    g.bench_function("verify_checksums", |b| {
        b.iter(|| parse_frame(black_box(&frame), ChecksumCaps::ALL))
    });
    g.bench_function("no_checksums", |b| {
        b.iter(|| parse_frame(black_box(&frame), ChecksumCaps::NONE))
    });
    g.finish();
}

criterion_group!(benches, bench_checksum, bench_parse);
criterion_main!(benches);
