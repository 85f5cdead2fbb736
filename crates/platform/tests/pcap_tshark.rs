//! Captures written by `PcapWriter` open in Wireshark's `tshark`, which dissects every frame
//! `wire` emits — ARP, VLAN-tagged IPv4, TCP with every option we send, UDP, ICMPv4, IPv6 with
//! ICMPv6 neighbour discovery and TCP — with checksum validation on and no malformed or
//! checksum-error expert items. An independent check of both the capture format and the bytes
//! `wire` puts on the wire.

mod common;

use core::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use platform::pcap::{PcapReader, PcapWriter};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, ChecksumCaps, EtherType, EthernetAddress, EthernetFrame,
    EthernetRepr, Icmpv4Packet, Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpPair, IpProtocol,
    Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, SackBlock, SeqNumber, TcpFlags, TcpPacket, TcpRepr,
    TcpTimestamp, UdpPacket, UdpRepr, VlanTag,
};

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
const V4_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const V4_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const V6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const V6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn ethernet(ethertype: EtherType, vlan: Option<VlanTag>, payload_len: usize) -> (Vec<u8>, usize) {
    let eth = EthernetRepr {
        src_addr: MAC_A,
        dst_addr: MAC_B,
        vlan,
        ethertype,
    };
    let mut frame = vec![0u8; eth.header_len() + payload_len];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut frame[..]))
        .expect("ethernet header");
    (frame, eth.header_len())
}

fn ipv4_frame(
    protocol: IpProtocol,
    vlan: Option<VlanTag>,
    l4_len: usize,
    ident: u16,
) -> (Vec<u8>, usize) {
    let ip = Ipv4Repr {
        src_addr: V4_A,
        dst_addr: V4_B,
        protocol,
        payload_len: l4_len,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident,
        dont_frag: true,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let (mut frame, l2) = ethernet(EtherType::IPV4, vlan, ip.buffer_len());
    ip.emit(
        &mut Ipv4Packet::new_unchecked(&mut frame[l2..]),
        ChecksumCaps::ALL,
    )
    .expect("ipv4 header");
    (frame, l2 + ip.header_len())
}

fn ipv6_frame(next_header: IpProtocol, l4_len: usize) -> (Vec<u8>, usize) {
    let ip = Ipv6Repr {
        src_addr: V6_A,
        dst_addr: V6_B,
        next_header,
        payload_len: l4_len,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0x12345,
        ext_headers: [None; wire::MAX_EXT_HEADERS],
    };
    let (mut frame, l2) = ethernet(EtherType::IPV6, None, ip.buffer_len());
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut frame[l2..]))
        .expect("ipv6 header");
    (frame, l2 + ip.header_len())
}

fn tcp_frame(tcp: &TcpRepr<'_>, v6: bool) -> Vec<u8> {
    let len = tcp.buffer_len();
    let (mut frame, l3) = if v6 {
        ipv6_frame(IpProtocol::TCP, len)
    } else {
        ipv4_frame(IpProtocol::TCP, None, len, 7)
    };
    let addrs = if v6 {
        IpPair::V6 {
            src: V6_A,
            dst: V6_B,
        }
    } else {
        IpPair::V4 {
            src: V4_A,
            dst: V4_B,
        }
    };
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut frame[l3..]),
        &addrs,
        ChecksumCaps::ALL,
    )
    .expect("tcp");
    frame
}

fn frames() -> Vec<(Vec<u8>, &'static str)> {
    let mut out = Vec::new();

    let arp = ArpRepr {
        operation: ArpOperation::REQUEST,
        source_hardware_addr: MAC_A,
        source_protocol_addr: V4_A,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: V4_B,
    };
    let (mut f, l2) = ethernet(EtherType::ARP, None, arp.buffer_len());
    arp.emit(&mut ArpPacket::new_unchecked(&mut f[l2..]))
        .expect("arp");
    out.push((f, "eth:ethertype:arp"));

    let syn = TcpRepr {
        max_seg_size: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamp: Some(TcpTimestamp {
            tsval: 1000,
            tsecr: 0,
        }),
        ..TcpRepr::bare(
            49152,
            80,
            SeqNumber(0x0102_0304),
            SeqNumber(0),
            TcpFlags::SYN,
            64240,
        )
    };
    out.push((tcp_frame(&syn, false), "eth:ethertype:ip:tcp"));

    let data = b"GET / HTTP/1.1\r\nHost: example\r\n\r\n";
    let sacked = TcpRepr {
        flags: TcpFlags::ACK | TcpFlags::PSH,
        ack_number: SeqNumber(5000),
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_blocks: [
            Some(SackBlock {
                left: SeqNumber(6000),
                right: SeqNumber(7000),
            }),
            Some(SackBlock {
                left: SeqNumber(8000),
                right: SeqNumber(9000),
            }),
            Some(SackBlock {
                left: SeqNumber(10000),
                right: SeqNumber(11000),
            }),
            None,
        ],
        timestamp: Some(TcpTimestamp {
            tsval: 1010,
            tsecr: 77,
        }),
        seq_number: SeqNumber(0x0102_0305),
        payload: data,
        ..syn
    };
    out.push((tcp_frame(&sacked, false), "eth:ethertype:ip:tcp:http"));
    out.push((
        tcp_frame(
            &TcpRepr {
                src_port: 40000,
                dst_port: 5001,
                ..sacked
            },
            true,
        ),
        "eth:ethertype:ipv6:tcp:http",
    ));

    let payload = b"rsstack udp";
    let udp = UdpRepr {
        src_port: 40001,
        dst_port: 9999,
        payload,
    };
    let vlan = Some(VlanTag {
        pcp: 3,
        dei: false,
        vid: 100,
    });
    let (mut f, l3) = ipv4_frame(IpProtocol::UDP, vlan, udp.buffer_len(), 8);
    udp.emit(
        &mut UdpPacket::new_unchecked(&mut f[l3..]),
        &IpPair::V4 {
            src: V4_A,
            dst: V4_B,
        },
        ChecksumCaps::ALL,
    )
    .expect("udp");
    out.push((f, "eth:ethertype:vlan:ethertype:ip:udp:data"));

    let echo = Icmpv4Repr::EchoRequest {
        ident: 0x4242,
        seq_no: 1,
        data: b"abcdefgh",
    };
    let (mut f, l3) = ipv4_frame(IpProtocol::ICMP, None, echo.buffer_len(), 9);
    echo.emit(
        &mut Icmpv4Packet::new_unchecked(&mut f[l3..]),
        ChecksumCaps::ALL,
    )
    .expect("icmp");
    out.push((f, "eth:ethertype:ip:icmp:data"));

    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: V6_B,
        source_lladdr: Some(MAC_A),
    };
    let (mut f, l3) = ipv6_frame(IpProtocol::ICMPV6, ns.buffer_len());
    ns.emit(
        &mut Icmpv6Packet::new_unchecked(&mut f[l3..]),
        V6_A,
        V6_B,
        ChecksumCaps::ALL,
    )
    .expect("ns");
    out.push((f, "eth:ethertype:ipv6:icmpv6"));

    let na = Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: true,
        override_: true,
        target_addr: V6_B,
        target_lladdr: Some(MAC_B),
    };
    let (mut f, l3) = ipv6_frame(IpProtocol::ICMPV6, na.buffer_len());
    na.emit(
        &mut Icmpv6Packet::new_unchecked(&mut f[l3..]),
        V6_A,
        V6_B,
        ChecksumCaps::ALL,
    )
    .expect("na");
    out.push((f, "eth:ethertype:ipv6:icmpv6"));
    out
}

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn tshark_dissects_every_frame_wire_emits_without_errors() {
    if !tshark_available() {
        assert!(
            std::env::var_os("RSSTACK_REQUIRE_ROOT_TESTS").is_none(),
            "tshark is missing; scripts/test.sh installs it (apt-get install tshark)"
        );
        eprintln!("tshark not installed: not run");
        return;
    }
    let frames = frames();
    let dir = std::env::temp_dir().join(format!("rsstack-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("wire.pcap");
    let mut writer = PcapWriter::new(std::io::BufWriter::new(
        std::fs::File::create(&path).expect("create"),
    ))
    .expect("header");
    for (i, (frame, _)) in frames.iter().enumerate() {
        writer
            .write_frame(1_700_000_000_000_000_000 + i as u64 * 1_000, frame)
            .expect("record");
    }
    writer.into_inner().expect("flush");

    // Our own reader gets the frames back unchanged.
    let read: Vec<_> = PcapReader::new(std::fs::File::open(&path).expect("open"))
        .expect("header")
        .collect::<Result<_, _>>()
        .expect("records");
    assert_eq!(read.len(), frames.len());

    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "frame.number",
            "-e",
            "frame.protocols",
            "-e",
            "_ws.malformed",
            "-e",
            "_ws.expert.severity",
            "-e",
            "_ws.expert.message",
        ])
        .output()
        .expect("run tshark");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), frames.len(), "tshark output:\n{text}");
    for (row, (_, protocols)) in rows.iter().zip(&frames) {
        let cols: Vec<&str> = row.split('|').collect();
        assert_eq!(cols.get(1).copied(), Some(*protocols), "row {row}");
        assert_eq!(cols.get(2).copied(), Some(""), "malformed: {row}");
        let messages = cols.get(4).copied().unwrap_or("");
        assert!(
            !messages.to_ascii_lowercase().contains("checksum"),
            "checksum complaint: {row}"
        );
        // Severity 8388608 = error, 6291456 = warning (epan/proto.h PI_ERROR/PI_WARN).
        let severities = cols.get(3).copied().unwrap_or("");
        assert!(
            !severities
                .split(',')
                .any(|s| s == "8388608" || s == "6291456"),
            "expert error/warning: {row}"
        );
    }
}
