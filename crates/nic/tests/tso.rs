//! Transmit segmentation (TSO) and checksum offload, checked by parsing the output with `wire`.

mod common;

use std::net::Ipv4Addr;

use common::{Seg, bytes, drain, parse_tcp, udp4};
use nic::{GroConfig, ModerationConfig, Nic, NicConfig, TxChecksum, TxOffload};
use proptest::prelude::*;
use wire::{IpPair, Ipv4Packet, TcpFlags, UdpPacket};

fn nic() -> Nic {
    Nic::new(NicConfig {
        queues: 2,
        moderation: ModerationConfig::OFF,
        ..NicConfig::default()
    })
    .expect("config")
}

fn send(nic: &mut Nic, frame: Vec<u8>, offload: TxOffload) -> Vec<Vec<u8>> {
    nic.transmit(1, frame, offload).expect("queue 1");
    let mut out = Vec::new();
    nic.poll_tx(1, 64, &mut out).expect("queue 1");
    out
}

/// Zeroes a built frame's checksums, as a stack relying on offload would hand it over.
fn zero_checksums(frame: &mut [u8], v4: bool) {
    if v4 {
        frame[24] = 0;
        frame[25] = 0;
        frame[34 + 16] = 0;
        frame[34 + 17] = 0;
    } else {
        frame[54 + 16] = 0;
        frame[54 + 17] = 0;
    }
}

fn check_segmentation(seg: &Seg, mss: u16) -> Result<(), TestCaseError> {
    let v4 = matches!(seg.addrs(), IpPair::V4 { .. });
    let mut frame = seg.build();
    zero_checksums(&mut frame, v4);
    let mut nic = nic();
    let out = send(&mut nic, frame, TxOffload::tso(mss));
    let mss = usize::from(mss);
    let expect_n = seg.payload.len().div_ceil(mss).max(1);
    prop_assert_eq!(out.len(), expect_n);
    let mut payload = Vec::new();
    for (i, f) in out.iter().enumerate() {
        let p = parse_tcp(f).map_err(TestCaseError::fail)?;
        let last = i + 1 == out.len();
        prop_assert!(p.payload.len() <= mss);
        if !last {
            prop_assert_eq!(p.payload.len(), mss);
        }
        prop_assert_eq!(p.seq, seg.seq.wrapping_add(payload.len() as u32));
        prop_assert_eq!(p.ack, seg.ack);
        prop_assert_eq!(p.ts, seg.ts);
        let mut want = seg.flags;
        if !last {
            want = TcpFlags(want.0 & !(TcpFlags::FIN.0 | TcpFlags::PSH.0));
        }
        if i != 0 {
            want = TcpFlags(want.0 & !TcpFlags::CWR.0);
        }
        prop_assert_eq!(p.flags, want);
        if let Some(id) = p.ip_ident {
            prop_assert_eq!(id, seg.ident.wrapping_add(i as u16));
        }
        payload.extend_from_slice(&p.payload);
    }
    prop_assert_eq!(&payload, &seg.payload);
    let c = nic.counters(1).expect("q1");
    prop_assert_eq!(c.tx_packets, expect_n as u64);
    prop_assert_eq!(c.tx_requests, 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any payload, any MSS, IPv4 or IPv6, with or without timestamps: the segments parse with
    /// valid checksums and reassemble to the original payload with the right sequence numbers,
    /// IP IDs and flags.
    #[test]
    fn tso_segments_reassemble_to_original_payload_with_valid_checksums(
        len in 0usize..20_000,
        mss in 1u16..3000,
        v6 in any::<bool>(),
        ts in any::<bool>(),
        seq in any::<u32>(),
        ident in any::<u16>(),
        flag_bits in prop::sample::select(vec![0u8, 0x08, 0x01, 0x09, 0x80, 0x89, 0x40]),
    ) {
        let mut s = if v6 { Seg::v6(5555, 80) } else { Seg::v4(5555, 80) };
        s = s.with_payload(seq, bytes(len as u64, len));
        s.flags = TcpFlags(TcpFlags::ACK.0 | flag_bits);
        s.ident = ident;
        if ts { s.ts = Some((7, 9)); }
        check_segmentation(&s, mss)?;
    }
}

#[test]
fn tso_puts_fin_psh_on_the_last_segment_and_cwr_on_the_first() {
    let mut s = Seg::v4(5555, 80).with_payload(1, bytes(3, 3000));
    s.flags = TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN | TcpFlags::CWR;
    let mut nic = nic();
    let out = send(&mut nic, s.build(), TxOffload::tso(1000));
    let flags: Vec<TcpFlags> = out
        .iter()
        .map(|f| parse_tcp(f).expect("valid").flags)
        .collect();
    assert_eq!(
        flags,
        vec![
            TcpFlags::ACK | TcpFlags::CWR,
            TcpFlags::ACK,
            TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN
        ]
    );
    let c = nic.counters(1).expect("q1");
    assert_eq!((c.tx_tso_sends, c.tx_tso_segments, c.tx_packets), (1, 3, 3));
}

#[test]
fn tso_output_coalesces_back_to_the_original_send() {
    // TSO on one NIC, GRO on another: the receiver sees the sender's large send again.
    let mut s = Seg::v4(5555, 80).with_payload(77, bytes(9, 10 * 1448));
    s.ts = Some((1, 2));
    s.flags = TcpFlags::ACK | TcpFlags::PSH;
    let mut tx = nic();
    let out = send(&mut tx, s.build(), TxOffload::tso(1448));
    assert_eq!(out.len(), 10);
    let mut rx = Nic::new(NicConfig {
        queues: 1,
        moderation: ModerationConfig::OFF,
        gro: GroConfig::default(),
        ..NicConfig::default()
    })
    .expect("config");
    for f in out {
        rx.receive(0, f);
    }
    let d = drain(&mut rx, 0, 0);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].meta.coalesced_segments, 10);
    let p = parse_tcp(&d[0].frame).expect("valid");
    assert_eq!((p.seq, p.flags, p.ts), (77, s.flags, s.ts));
    assert_eq!(p.payload, s.payload);
}

#[test]
fn small_send_with_tso_leaves_as_one_checksummed_frame() {
    let s = Seg::v4(5555, 80).with_payload(1, bytes(1, 500));
    let mut f = s.build();
    zero_checksums(&mut f, true);
    let mut nic = nic();
    let out = send(&mut nic, f, TxOffload::tso(1448));
    assert_eq!(out.len(), 1);
    assert_eq!(parse_tcp(&out[0]).expect("valid").payload, s.payload);
    assert_eq!(nic.counters(1).expect("q1").tx_tso_sends, 0);
}

#[test]
fn checksum_offload_fills_ipv4_tcp_and_udp_checksums() {
    let s = Seg::v4(5555, 80).with_payload(1, bytes(1, 333));
    let mut f = s.build();
    zero_checksums(&mut f, true);
    assert!(parse_tcp(&f).is_err(), "zeroed checksums must not verify");
    let mut nic = nic();
    let out = send(&mut nic, f.clone(), TxOffload::csum());
    assert_eq!(parse_tcp(&out[0]).expect("filled").payload, s.payload);
    // Only the IP header checksum requested: TCP stays wrong.
    let out = send(
        &mut nic,
        f,
        TxOffload {
            tso_mss: None,
            csum: TxChecksum {
                ip: true,
                l4: false,
            },
        },
    );
    assert!(
        Ipv4Packet::new_checked(&out[0][14..])
            .expect("ip")
            .verify_checksum()
    );
    assert!(parse_tcp(&out[0]).is_err());

    let (src, dst) = (Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2));
    let mut u = udp4(src, dst, 53, 5353, b"hello");
    u[34 + 6] = 0x12;
    u[34 + 7] = 0x34;
    let out = send(&mut nic, u, TxOffload::csum());
    let udp = UdpPacket::new_checked(&out[0][34..]).expect("udp");
    assert!(udp.verify_checksum(&IpPair::V4 { src, dst }));
    assert_eq!(nic.counters(1).expect("q1").tx_csum_offloaded, 3);
}

#[test]
fn offload_on_wrong_frame_is_dropped_and_counted() {
    let mut nic = nic();
    let u = udp4(
        Ipv4Addr::new(1, 1, 1, 1),
        Ipv4Addr::new(2, 2, 2, 2),
        1,
        2,
        &[0; 3000],
    );
    assert!(send(&mut nic, u, TxOffload::tso(1000)).is_empty());
    assert!(send(&mut nic, vec![0u8; 60], TxOffload::csum()).is_empty());
    let tcp = Seg::v4(1, 2).with_payload(1, vec![1; 10]).build();
    assert!(send(&mut nic, tcp.clone(), TxOffload::tso(0)).is_empty());
    assert_eq!(nic.counters(1).expect("q1").tx_drop_malformed, 3);
    // No offload: any bytes leave as given.
    assert_eq!(
        send(&mut nic, vec![0u8; 60], TxOffload::NONE),
        vec![vec![0u8; 60]]
    );
}

#[test]
fn poll_tx_respects_its_budget() {
    let mut nic = nic();
    for _ in 0..10 {
        nic.transmit(0, vec![0u8; 60], TxOffload::NONE).expect("q0");
    }
    let mut out = Vec::new();
    let p = nic.poll_tx(0, 4, &mut out).expect("q0");
    assert_eq!((p.requests, out.len(), nic.tx_pending(0)), (4, 4, 6));
}

#[test]
fn steady_tso_gro_loop_allocates_nothing_after_warmup() {
    // One NIC looped back on itself: a large send is segmented, the segments are received and
    // coalesced, the stack hands buffers back. After the first round the pool covers it all.
    let mut nic = Nic::new(NicConfig {
        queues: 1,
        moderation: ModerationConfig::OFF,
        ..NicConfig::default()
    })
    .expect("config");
    let template = Seg::v4(5555, 80)
        .with_payload(1, bytes(4, 20 * 1448))
        .build();
    let mut allocated_after_first = 0;
    for round in 0..50 {
        let mut big = nic.take_buffer(template.len());
        big.extend_from_slice(&template);
        nic.transmit(0, big, TxOffload::tso(1448)).expect("q0");
        let mut wire_frames = Vec::new();
        nic.poll_tx(0, 64, &mut wire_frames).expect("q0");
        assert_eq!(wire_frames.len(), 20);
        for f in wire_frames {
            nic.receive(round, f);
        }
        let d = drain(&mut nic, 0, round);
        assert_eq!(d.len(), 1);
        for desc in d {
            nic.recycle(desc.frame);
        }
        if round == 0 {
            allocated_after_first = nic.pool_counters().allocated;
        }
    }
    let p = nic.pool_counters();
    assert_eq!(p.allocated, allocated_after_first, "{p:?}");
    assert!(p.reused >= 49 * 21);
}

/// A device below the NIC model does the offloads: `poll_tx_device` hands each request on
/// unchanged, in order, with its offload beside it (one output per request), and counts it.
#[test]
fn device_poll_passes_requests_whole_with_their_offloads_in_order() {
    let mut nic = nic();
    let big = Seg::v4(5555, 80)
        .with_payload(1, bytes(5, 10 * 1448))
        .build();
    let small = Seg::v4(5555, 80).with_payload(14481, bytes(6, 100)).build();
    let csum = TxOffload {
        tso_mss: None,
        csum: TxChecksum {
            ip: false,
            l4: true,
        },
    };
    nic.transmit(1, big.clone(), TxOffload::tso(1448))
        .expect("q1");
    nic.transmit(1, small.clone(), csum).expect("q1");
    nic.transmit(1, small.clone(), TxOffload::NONE).expect("q1");
    let mut out = Vec::new();
    let poll = nic.poll_tx_device(1, 2, &mut out).expect("q1");
    assert_eq!((poll.requests, poll.frames, poll.dropped), (2, 2, 0));
    let poll = nic.poll_tx_device(1, 64, &mut out).expect("q1");
    assert_eq!(poll.requests, 1);
    assert_eq!(
        out,
        vec![
            (big.clone(), TxOffload::tso(1448)),
            (small.clone(), csum),
            (small, TxOffload::NONE)
        ]
    );
    let c = nic.counters(1).expect("q1");
    assert_eq!(c.tx_packets, 3);
    assert_eq!(
        (c.tx_tso_sends, c.tx_tso_segments),
        (1, 0),
        "the device segments"
    );
    assert_eq!(c.tx_csum_offloaded, 2);
    assert_eq!(
        c.tx_bytes as usize,
        big.len() + 2 * (big.len() - 10 * 1448 + 100)
    );
}
