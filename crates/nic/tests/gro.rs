//! Receive coalescing (GRO/RSC): what may merge, what may not, and that nothing is lost.

mod common;

use common::{Parsed, Seg, bytes, drain, parse_tcp};
use nic::{CsumVerdict, GroConfig, ModerationConfig, Nic, NicConfig, RxDescriptor, RxVerdict};
use proptest::prelude::*;
use wire::TcpFlags;

fn gro_nic(gro: GroConfig) -> Nic {
    Nic::new(NicConfig {
        queues: 1,
        rx_ring_slots: 1024,
        moderation: ModerationConfig::OFF,
        gro,
        ..NicConfig::default()
    })
    .expect("config")
}

fn nic() -> Nic {
    gro_nic(GroConfig::default())
}

const MSS: usize = 1448;

/// `n` consecutive full-MSS segments of one flow starting at `seq0`.
fn stream(base: &Seg, seq0: u32, n: usize) -> Vec<Seg> {
    (0..n)
        .map(|i| {
            base.clone()
                .with_payload(seq0 + (i * MSS) as u32, bytes(i as u64, MSS))
        })
        .collect()
}

fn feed(nic: &mut Nic, now_ns: u64, segs: &[Seg]) {
    for s in segs {
        let v = nic.receive(now_ns, s.build());
        assert!(!matches!(v, RxVerdict::Dropped(_)), "{v:?}");
    }
}

fn parsed(d: &[RxDescriptor]) -> Vec<Parsed> {
    d.iter()
        .map(|d| parse_tcp(&d.frame).expect("every delivered frame is valid"))
        .collect()
}

#[test]
fn in_order_segments_merge_into_one_valid_frame() {
    let mut nic = nic();
    let segs = stream(&Seg::v4(40000, 80), 1000, 10);
    feed(&mut nic, 0, &segs);
    let d = drain(&mut nic, 0, 0);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].meta.coalesced_segments, 10);
    assert_eq!(usize::from(d[0].meta.gro_mss_bytes), MSS);
    assert_eq!(d[0].meta.csum.l4, CsumVerdict::Good);
    let p = parse_tcp(&d[0].frame).expect("valid lengths and checksums");
    assert_eq!(p.seq, 1000);
    assert_eq!(p.ip_len, 20 + 20 + 10 * MSS);
    let all: Vec<u8> = segs.iter().flat_map(|s| s.payload.clone()).collect();
    assert_eq!(p.payload, all);
    let c = nic.counters(0).expect("q0");
    assert_eq!(
        (
            c.rx_packets,
            c.rx_coalesced_segments,
            c.rx_descriptors_queued
        ),
        (10, 9, 1)
    );
    assert_eq!(c.gro_flush_poll, 1);
}

#[test]
fn gro_never_merges_across_a_gap() {
    let mut nic = nic();
    let base = Seg::v4(40000, 80);
    let mut segs = stream(&base, 1000, 2);
    // Skips one MSS: a hole the stack must see.
    segs.extend(stream(&base, 1000 + 3 * MSS as u32, 2));
    // And an old segment (retransmission) after that.
    segs.push(base.clone().with_payload(1000, bytes(0, MSS)));
    feed(&mut nic, 0, &segs);
    let p = parsed(&drain(&mut nic, 0, 0));
    let seqs: Vec<(u32, usize)> = p.iter().map(|p| (p.seq, p.payload.len())).collect();
    assert_eq!(
        seqs,
        vec![
            (1000, 2 * MSS),
            (1000 + 3 * MSS as u32, 2 * MSS),
            (1000, MSS)
        ]
    );
    assert_eq!(nic.counters(0).expect("q0").gro_flush_gap, 2);
}

#[test]
fn gro_never_merges_syn_rst_urg_cwr_or_pure_acks() {
    for flag in [
        TcpFlags::SYN,
        TcpFlags::RST,
        TcpFlags::URG,
        TcpFlags::CWR,
        TcpFlags::NONE,
    ] {
        let mut nic = nic();
        let base = Seg::v4(40000, 80);
        let mut segs = stream(&base, 1000, 3);
        let odd = if flag == TcpFlags::NONE {
            // A pure ACK: no payload.
            base.clone().with_payload(1000 + 3 * MSS as u32, Vec::new())
        } else {
            segs[1].clone().flags(TcpFlags::ACK | flag)
        };
        if flag == TcpFlags::NONE {
            segs.insert(2, odd);
        } else {
            segs[1] = odd;
        }
        feed(&mut nic, 0, &segs);
        let d = drain(&mut nic, 0, 0);
        let counts: Vec<u16> = d.iter().map(|d| d.meta.coalesced_segments).collect();
        let p = parsed(&d);
        if flag == TcpFlags::NONE {
            // data, data | pure ACK | data: the ACK neither joins nor lets the next one join.
            assert_eq!(counts, vec![2, 1, 1]);
            assert!(p[1].payload.is_empty());
        } else {
            // data | flagged data | data: each alone.
            assert_eq!(counts, vec![1, 1, 1], "{flag:?}");
            assert_eq!(p[1].flags, TcpFlags::ACK | flag);
        }
        assert!(nic.counters(0).expect("q0").gro_flush_flags >= 1);
    }
}

#[test]
fn push_and_fin_end_a_group_and_are_carried() {
    let mut nic = nic();
    let base = Seg::v4(40000, 80);
    let mut segs = stream(&base, 1000, 4);
    segs[1].flags = TcpFlags::ACK | TcpFlags::PSH;
    segs[3].flags = TcpFlags::ACK | TcpFlags::FIN;
    feed(&mut nic, 0, &segs);
    let d = drain(&mut nic, 0, 0);
    let p = parsed(&d);
    assert_eq!(p.len(), 2);
    assert_eq!(
        (p[0].seq, p[0].payload.len(), p[0].flags),
        (1000, 2 * MSS, TcpFlags::ACK | TcpFlags::PSH)
    );
    assert_eq!(
        (p[1].seq, p[1].payload.len(), p[1].flags),
        (
            1000 + 2 * MSS as u32,
            2 * MSS,
            TcpFlags::ACK | TcpFlags::FIN
        )
    );
    assert_eq!(nic.counters(0).expect("q0").gro_flush_push_fin, 2);
}

#[test]
fn gro_never_merges_across_option_or_header_change() {
    type Change = fn(&mut Seg);
    let changes: [(&str, Change); 7] = [
        ("tsecr", |s| s.ts = Some((100, 999))),
        ("mss option appears", |s| s.mss_opt = Some(1460)),
        ("ack advances", |s| s.ack += 1),
        ("window changes", |s| s.window += 1),
        ("ttl changes", |s| s.ttl -= 1),
        ("ecn ce mark", |s| s.ecn = 3),
        ("ece set", |s| s.flags = TcpFlags::ACK | TcpFlags::ECE),
    ];
    for (what, change) in changes {
        let mut nic = nic();
        let mut base = Seg::v4(40000, 80);
        base.ts = Some((100, 50));
        let mut segs = stream(&base, 1000, 4);
        for s in &mut segs[2..] {
            change(s);
        }
        feed(&mut nic, 0, &segs);
        let d = drain(&mut nic, 0, 0);
        let counts: Vec<u16> = d.iter().map(|d| d.meta.coalesced_segments).collect();
        assert_eq!(counts, vec![2, 2], "{what}");
        assert_eq!(
            nic.counters(0).expect("q0").gro_flush_header_change,
            1,
            "{what}"
        );
    }
}

#[test]
fn timestamps_may_advance_and_the_first_tsval_is_kept() {
    let mut nic = nic();
    let base = Seg::v4(40000, 80);
    let mut segs = stream(&base, 1000, 5);
    for (i, s) in segs.iter_mut().enumerate() {
        s.ts = Some((100 + i as u32, 50));
    }
    // TSval going backwards (RFC 7323 §5.3) must not merge.
    segs[4].ts = Some((90, 50));
    feed(&mut nic, 0, &segs);
    let p = parsed(&drain(&mut nic, 0, 0));
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].ts, Some((100, 50)));
    assert_eq!(p[0].payload.len(), 4 * MSS);
    assert_eq!(p[1].ts, Some((90, 50)));
}

#[test]
fn gro_switched_off_delivers_every_segment_alone() {
    let mut nic = nic();
    let segs = stream(&Seg::v4(40000, 80), 1000, 6);
    feed(&mut nic, 0, &segs[..3]);
    // Switching off closes the open group; later segments stay single.
    nic.set_gro_enabled(false);
    feed(&mut nic, 0, &segs[3..]);
    let d = drain(&mut nic, 0, 0);
    let counts: Vec<u16> = d.iter().map(|d| d.meta.coalesced_segments).collect();
    assert_eq!(counts, vec![3, 1, 1, 1]);
    let p = parsed(&d);
    let all: Vec<u8> = p.iter().flat_map(|p| p.payload.clone()).collect();
    let sent: Vec<u8> = segs.iter().flat_map(|s| s.payload.clone()).collect();
    assert_eq!(all, sent);
}

#[test]
fn flush_timer_closes_a_group() {
    let mut nic = gro_nic(GroConfig {
        flush_timeout_ns: 50_000,
        ..GroConfig::default()
    });
    let segs = stream(&Seg::v4(40000, 80), 1000, 3);
    nic.receive(0, segs[0].build());
    nic.receive(10_000, segs[1].build());
    assert_eq!(nic.next_deadline(), Some(50_000));
    nic.receive(60_000, segs[2].build());
    let d = drain(&mut nic, 0, 60_000);
    let counts: Vec<u16> = d.iter().map(|d| d.meta.coalesced_segments).collect();
    assert_eq!(counts, vec![2, 1]);
    assert_eq!(nic.counters(0).expect("q0").gro_flush_timer, 1);
}

#[test]
fn merged_packet_never_exceeds_64k() {
    let mut nic = nic();
    let segs = stream(&Seg::v4(40000, 80), 1000, 100);
    feed(&mut nic, 0, &segs);
    let d = drain(&mut nic, 0, 0);
    let p = parsed(&d);
    assert!(p.iter().all(|p| p.ip_len <= 65535));
    // 65535 - 40 header bytes hold 45 segments of 1448.
    let counts: Vec<u16> = d.iter().map(|d| d.meta.coalesced_segments).collect();
    assert_eq!(counts, vec![45, 45, 10]);
    let all: Vec<u8> = p.iter().flat_map(|p| p.payload.clone()).collect();
    let sent: Vec<u8> = segs.iter().flat_map(|s| s.payload.clone()).collect();
    assert_eq!(all, sent);
    assert_eq!(nic.counters(0).expect("q0").gro_flush_size, 2);
}

#[test]
fn flow_table_evicts_the_oldest_flow_when_full() {
    let mut nic = gro_nic(GroConfig {
        flows_max: 2,
        ..GroConfig::default()
    });
    let flows: Vec<Vec<Seg>> = (0..3u16)
        .map(|f| stream(&Seg::v4(40000 + f, 80), 1000, 4))
        .collect();
    for i in 0..4 {
        for f in &flows {
            nic.receive(0, f[i].build());
        }
    }
    let p = parsed(&drain(&mut nic, 0, 0));
    for (f, segs) in flows.iter().enumerate() {
        let got: Vec<u8> = p
            .iter()
            .filter(|p| p.sport == 40000 + f as u16)
            .flat_map(|p| p.payload.clone())
            .collect();
        let sent: Vec<u8> = segs.iter().flat_map(|s| s.payload.clone()).collect();
        assert_eq!(got, sent, "flow {f}");
    }
    assert!(nic.counters(0).expect("q0").gro_flush_evict > 0);
}

#[test]
fn ipv6_segments_coalesce() {
    let mut nic = nic();
    let segs = stream(&Seg::v6(40000, 80), 7, 5);
    feed(&mut nic, 0, &segs);
    let d = drain(&mut nic, 0, 0);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].meta.coalesced_segments, 5);
    let p = parse_tcp(&d[0].frame).expect("valid");
    assert_eq!(p.ip_len, 40 + 20 + 5 * MSS);
}

#[test]
fn segment_with_bad_checksum_is_not_coalesced() {
    let mut nic = nic();
    let segs = stream(&Seg::v4(40000, 80), 1000, 3);
    nic.receive(0, segs[0].build());
    let mut bad = segs[1].build();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    nic.receive(0, bad);
    nic.receive(0, segs[2].build());
    let d = drain(&mut nic, 0, 0);
    let v: Vec<(u16, CsumVerdict)> = d
        .iter()
        .map(|d| (d.meta.coalesced_segments, d.meta.csum.l4))
        .collect();
    assert_eq!(
        v,
        vec![
            (1, CsumVerdict::Good),
            (1, CsumVerdict::Bad),
            (1, CsumVerdict::Good)
        ]
    );
}

/// One segment of a generated stream: payload length, PSH.
fn plan() -> impl Strategy<Value = (usize, Vec<(usize, bool)>, bool, usize)> {
    let mss = 64usize..200;
    mss.prop_flat_map(|mss| {
        let seg = (
            prop_oneof![4 => Just(mss), 1 => 1..=mss, 1 => mss..mss * 2],
            prop::bool::weighted(0.15),
        );
        (
            Just(mss),
            prop::collection::vec(seg, 1..80),
            any::<bool>(),
            1usize..30,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Two interleaved flows with random segment sizes, PSH marks, a FIN at the end and polls
    /// at random points: every byte arrives once, in order, and splitting each coalesced frame
    /// at its `gro_mss_bytes` gives back exactly the sent segments with their PSH/FIN bits.
    #[test]
    fn coalescing_preserves_every_byte_and_boundary_flag(
        (_mss, segs, fin, poll_every) in plan()
    ) {
        let mut nic = nic();
        // (sport, seq, payload, flags) as sent, per flow.
        let mut sent: Vec<Vec<(u32, Vec<u8>, TcpFlags)>> = vec![Vec::new(), Vec::new()];
        let mut seqs = [5000u32, 9000u32];
        let mut got = Vec::new();
        let n = segs.len();
        for (i, (len, psh)) in segs.into_iter().enumerate() {
            for flow in 0..2usize {
                let mut flags = TcpFlags::ACK;
                if psh { flags |= TcpFlags::PSH; }
                if fin && i + 1 == n { flags |= TcpFlags::FIN; }
                let payload = bytes((i * 2 + flow) as u64, len);
                let s = Seg::v4(40000 + flow as u16, 80)
                    .with_payload(seqs[flow], payload.clone())
                    .flags(flags);
                prop_assert!(!matches!(nic.receive(0, s.build()), RxVerdict::Dropped(_)));
                sent[flow].push((seqs[flow], payload, flags));
                seqs[flow] = seqs[flow].wrapping_add(len as u32);
            }
            if i % poll_every == 0 {
                got.extend(drain(&mut nic, 0, 0));
            }
        }
        got.extend(drain(&mut nic, 0, 0));
        for (flow, sent) in sent.iter().enumerate() {
            let mut rebuilt = Vec::new();
            for d in &got {
                let p = parse_tcp(&d.frame).map_err(TestCaseError::fail)?;
                if p.sport != 40000 + flow as u16 { continue; }
                let k = usize::from(d.meta.coalesced_segments);
                let mss = if k == 1 { p.payload.len().max(1) } else { usize::from(d.meta.gro_mss_bytes) };
                let pieces: Vec<&[u8]> = p.payload.chunks(mss).collect();
                prop_assert_eq!(pieces.len(), k);
                let mut seq = p.seq;
                for (j, piece) in pieces.iter().enumerate() {
                    let last = j + 1 == k;
                    let mut flags = p.flags;
                    if !last { flags = TcpFlags(flags.0 & !(TcpFlags::PSH.0 | TcpFlags::FIN.0)); }
                    rebuilt.push((seq, piece.to_vec(), flags));
                    seq = seq.wrapping_add(piece.len() as u32);
                }
            }
            prop_assert_eq!(&rebuilt, sent);
        }
        let c = nic.counters(0).expect("q0");
        prop_assert_eq!(c.rx_packets, c.rx_descriptors_queued + c.rx_coalesced_segments);
        prop_assert_eq!(c.rx_descriptors_polled, got.len() as u64);
    }
}

/// Inserts an 802.1Q tag (VLAN `vid`) after the MAC addresses.
fn tagged(mut frame: Vec<u8>, vid: u16) -> Vec<u8> {
    let tci = vid.to_be_bytes();
    frame.splice(12..12, [0x81, 0x00, tci[0], tci[1]]);
    frame
}

#[test]
fn vlan_tagged_segments_coalesce_only_within_one_vlan() {
    let mut nic = nic();
    let segs = stream(&Seg::v4(40000, 80), 1000, 4);
    for (i, s) in segs.iter().enumerate() {
        let vid = if i < 3 { 10 } else { 20 };
        nic.receive(0, tagged(s.build(), vid));
    }
    let d = drain(&mut nic, 0, 0);
    let counts: Vec<u16> = d.iter().map(|d| d.meta.coalesced_segments).collect();
    assert_eq!(counts, vec![3, 1]);
    // Strip the tag and check the merged frame is valid.
    let mut f = d[0].frame.clone();
    f.drain(12..16);
    let p = parse_tcp(&f).expect("valid");
    assert_eq!(p.payload.len(), 3 * MSS);
    assert_eq!(nic.counters(0).expect("q0").gro_flush_header_change, 1);
}

#[test]
fn open_group_keeps_growing_when_the_ring_is_full() {
    // Like RSC, a group holds one slot from its first segment on; appending needs no slot.
    let mut nic = Nic::new(NicConfig {
        queues: 1,
        rx_ring_slots: 2,
        moderation: ModerationConfig::OFF,
        ..NicConfig::default()
    })
    .expect("config");
    let a = stream(&Seg::v4(40000, 80), 1000, 3);
    let b = stream(&Seg::v4(40001, 80), 1000, 2);
    assert!(matches!(
        nic.receive(0, a[0].build()),
        RxVerdict::Queued { .. }
    ));
    assert!(matches!(
        nic.receive(0, b[0].build()),
        RxVerdict::Queued { .. }
    ));
    assert!(matches!(
        nic.receive(0, a[1].build()),
        RxVerdict::Coalesced { .. }
    ));
    assert!(matches!(
        nic.receive(0, b[1].build()),
        RxVerdict::Coalesced { .. }
    ));
    // A third flow finds no slot.
    let c = stream(&Seg::v4(40002, 80), 1000, 1);
    assert_eq!(
        nic.receive(0, c[0].build()),
        RxVerdict::Dropped(nic::RxDrop::RingFull)
    );
    assert!(matches!(
        nic.receive(0, a[2].build()),
        RxVerdict::Coalesced { .. }
    ));
    let d = drain(&mut nic, 0, 0);
    let counts: Vec<u16> = d.iter().map(|d| d.meta.coalesced_segments).collect();
    assert_eq!(counts, vec![3, 2]);
    assert_eq!(nic.counters(0).expect("q0").rx_drop_ring_full, 1);
}

#[test]
fn ipv4_with_options_is_not_coalesced() {
    let mut nic = nic();
    let segs = stream(&Seg::v4(40000, 80), 1000, 3);
    for s in &segs {
        let mut f = s.build();
        // Insert a 4-byte IPv4 option (NOP×3 + EOL), fix IHL, total length and checksum.
        f.splice(34..34, [1, 1, 1, 0]);
        f[14] = 0x46;
        let total = u16::from_be_bytes([f[16], f[17]]) + 4;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        wire::Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
        nic.receive(0, f);
    }
    let d = drain(&mut nic, 0, 0);
    assert_eq!(d.len(), 3);
    assert!(
        d.iter()
            .all(|d| d.meta.coalesced_segments == 1 && d.meta.csum.l4 == CsumVerdict::Good)
    );
}
