//! Transmit offloads (`StackConfig::tx_offload`): with TSO a bulk sender hands out TCP frames
//! beyond the MTU, each with the `gso_size` its device cuts it into, and with TCP checksum
//! offload it leaves the checksum partial. The receiver, given those frames whole (as after
//! GRO) once their checksums are completed, gets every byte.

mod common;

use common::*;
use stack::{RxMeta, Stack, TxMeta, TxOffloadCaps};
use wire::{EthernetFrame, IpPair, Ipv4Packet, Ipv6Packet, TcpPacket};

/// TCP payload bytes, header bytes and the addresses of a TCP frame (IPv4 or IPv6); `None`
/// for anything else (ARP, neighbour discovery).
fn tcp_of(frame: &[u8]) -> Option<(usize, usize, IpPair)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let (l4, pair): (&[u8], IpPair) = if eth.ethertype() == wire::EtherType::IPV4 {
        let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
        assert!(
            ip.verify_checksum(),
            "the IPv4 header checksum is always filled"
        );
        if ip.protocol() != wire::IpProtocol::TCP {
            return None;
        }
        (
            &eth.payload()[ip.header_len()..usize::from(ip.total_len())],
            IpPair::V4 {
                src: ip.src_addr(),
                dst: ip.dst_addr(),
            },
        )
    } else if eth.ethertype() == wire::EtherType::IPV6 {
        let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
        if ip.next_header() != wire::IpProtocol::TCP {
            return None;
        }
        (
            &eth.payload()[40..40 + usize::from(ip.payload_len())],
            IpPair::V6 {
                src: ip.src_addr(),
                dst: ip.dst_addr(),
            },
        )
    } else {
        return None;
    };
    let tcp = TcpPacket::new_checked(l4).ok()?;
    let h = tcp.header_len();
    Some((l4.len() - h, h, pair))
}

fn bulk(server: std::net::SocketAddr, caps: TxOffloadCaps) -> (Vec<(usize, TxMeta)>, u64) {
    let mut a_cfg = config_a();
    a_cfg.tx_offload = caps;
    a_cfg.tcp.send_buffer_bytes = 1 << 20;
    let mut b_cfg = config_b();
    b_cfg.tcp.recv_buffer_bytes = 1 << 20;
    let mut a = Stack::new(a_cfg);
    let mut b = Stack::new(b_cfg);
    let l = b.tcp_listen(server, 8).expect("listen");
    let c = a.tcp_connect(0, server, 0).expect("connect");
    let data: Vec<u8> = (0..600_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut server_h = None;
    let mut frames = Vec::new();
    let mtu = 1500;
    let mut now = 0u64;
    for _ in 0..20_000 {
        if let Some(h) = server_h {
            let mut buf = vec![0u8; 65536];
            while let Ok(n @ 1..) = b.tcp_recv(h, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
        } else if let Ok((h, _)) = b.tcp_accept(l) {
            server_h = Some(h);
        }
        if sent < data.len() {
            if let Ok(n) = a.tcp_send(c, &data[sent..]) {
                sent += n;
            }
        }
        let mut moved = false;
        while let Some((mut f, meta)) = a.poll_transmit_meta(now) {
            moved = true;
            let Some((payload, header, pair)) = tcp_of(&f) else {
                assert_eq!(meta, TxMeta::NONE);
                b.receive(now, &f, &RxMeta::NONE);
                continue;
            };
            if meta.gso_size_bytes > 0 {
                assert!(payload > usize::from(meta.gso_size_bytes));
                // Whole segments of the MSS less the options: 1460 − options.
                assert_eq!(
                    usize::from(meta.gso_size_bytes),
                    1460 - (header - 20) - if pair_is_v6(&pair) { 20 } else { 0 }
                );
                assert!(
                    meta.l4_csum_partial,
                    "a TSO frame's checksum is the device's"
                );
            } else {
                assert!(f.len() - 14 <= mtu, "a frame without gso_size fits the MTU");
            }
            if meta.l4_csum_partial {
                assert!(wire::partial::complete_l4_checksum(&mut f));
            }
            frames.push((payload, meta));
            b.receive(now, &f, &RxMeta::NONE);
        }
        while let Some(f) = b.poll_transmit(now) {
            moved = true;
            a.receive(now, &f, &RxMeta::NONE);
        }
        if got.len() == data.len() {
            break;
        }
        if !moved {
            now = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + MS)
                .max(now + 1);
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
    }
    assert!(
        got == data,
        "{} of {} bytes, or they differ",
        got.len(),
        data.len()
    );
    let drops = b.counters().rx_drop_tcp_malformed;
    (frames, drops)
}

fn pair_is_v6(p: &IpPair) -> bool {
    matches!(p, IpPair::V6 { .. })
}

#[test]
fn tso_bulk_sends_large_frames_with_their_gso_size_and_every_byte_arrives_v4() {
    let caps = TxOffloadCaps {
        tso_payload_bytes_max: 65_000,
        tcp_csum: true,
    };
    let (frames, drops) = bulk(v4(IP_B, 5001), caps);
    assert_eq!(drops, 0);
    let data: Vec<_> = frames.iter().filter(|(n, _)| *n > 0).collect();
    let tso = data.iter().filter(|(_, m)| m.gso_size_bytes > 0).count();
    assert!(tso * 2 > data.len(), "{tso} TSO frames of {}", data.len());
    // 600,000 bytes in far fewer frames than 1448-byte segments would need (415).
    assert!(data.len() < 100, "{} data frames", data.len());
    // Every data frame leaves its checksum to the device (the SYN, sent before the neighbour
    // was resolved, took the IP path and is checksummed in full).
    assert!(data.iter().all(|(_, m)| m.l4_csum_partial));
}

#[test]
fn tso_bulk_over_ipv6_uses_the_ipv6_segment_size() {
    let caps = TxOffloadCaps {
        tso_payload_bytes_max: 65_000,
        tcp_csum: false,
    };
    let (frames, drops) = bulk(v6(IP6_B, 5001), caps);
    assert_eq!(drops, 0);
    assert!(frames.iter().any(|(_, m)| m.gso_size_bytes > 0));
    // Checksum offload off: only TSO frames are partial.
    assert!(
        frames
            .iter()
            .all(|(_, m)| m.l4_csum_partial == (m.gso_size_bytes > 0))
    );
}

#[test]
fn without_offloads_every_frame_fits_the_mtu_and_is_fully_checksummed() {
    let (frames, drops) = bulk(v4(IP_B, 5001), TxOffloadCaps::default());
    assert_eq!(drops, 0);
    assert!(frames.iter().all(|(_, m)| *m == TxMeta::NONE));
    assert!(frames.iter().all(|(n, _)| *n <= 1448));
}
