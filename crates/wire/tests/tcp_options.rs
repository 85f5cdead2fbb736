//! TCP option layout and iteration details beyond the round trip: Linux's padding, SACK block
//! counts, partial checksum offload, incremental checksum updates on a live segment.

use core::net::Ipv4Addr;

use proptest::prelude::*;
use wire::checksum;
use wire::tcp::{TcpOption, TcpOptions};
use wire::{
    ChecksumCaps, IpPair, SackBlock, SeqNumber, TcpFlags, TcpPacket, TcpRepr, TcpTimestamp,
};

const V4: IpPair = IpPair::V4 {
    src: Ipv4Addr::new(10, 1, 2, 3),
    dst: Ipv4Addr::new(10, 3, 2, 1),
};

fn base(payload: &[u8]) -> TcpRepr<'_> {
    TcpRepr {
        payload,
        ..TcpRepr::bare(
            5000,
            80,
            SeqNumber(0xffff_fff0),
            SeqNumber(42),
            TcpFlags::ACK,
            512,
        )
    }
}

fn emit(r: &TcpRepr<'_>, caps: ChecksumCaps) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut TcpPacket::new_unchecked(&mut b[..]), &V4, caps)
        .expect("fits");
    b
}

#[test]
fn sack_blocks_are_emitted_after_nop_nop_with_timestamps_first() {
    let mut r = base(&[]);
    r.timestamp = Some(TcpTimestamp { tsval: 7, tsecr: 9 });
    r.sack_blocks[0] = Some(SackBlock {
        left: SeqNumber(100),
        right: SeqNumber(200),
    });
    r.sack_blocks[1] = Some(SackBlock {
        left: SeqNumber(300),
        right: SeqNumber(400),
    });
    let b = emit(&r, ChecksumCaps::ALL);
    let opts = &b[20..];
    assert_eq!(&opts[..4], &[1, 1, 8, 10]);
    assert_eq!(&opts[12..16], &[1, 1, 5, 18]);
    assert_eq!(opts.len(), 12 + 4 + 16);
}

#[test]
/// Linux's `tcp_options_write` puts `NOP NOP SACK_PERM` before `NOP WSCALE` when there are no
/// timestamps (packetdrill's `<mss 536,nop,nop,sackOK,nop,wscale 0>`).
fn sack_permitted_without_timestamps_is_padded_with_two_nops_before_window_scale() {
    let mut r = base(&[]);
    r.flags = TcpFlags::SYN;
    r.max_seg_size = Some(536);
    r.sack_permitted = true;
    r.window_scale = Some(0);
    let b = emit(&r, ChecksumCaps::ALL);
    assert_eq!(&b[20..], &[2, 4, 2, 24, 1, 1, 4, 2, 1, 3, 3, 0]);
}

#[test]
fn four_sack_blocks_fit_when_alone_and_parse_back() {
    let mut r = base(b"x");
    for (i, slot) in r.sack_blocks.iter_mut().enumerate() {
        let l = 1000 * (i as u32 + 1);
        *slot = Some(SackBlock {
            left: SeqNumber(l),
            right: SeqNumber(l + 500),
        });
    }
    assert_eq!(r.options_len(), 36);
    let b = emit(&r, ChecksumCaps::ALL);
    let p = TcpPacket::new_checked(&b[..]).expect("valid");
    let parsed = TcpRepr::parse(&p, &V4, ChecksumCaps::ALL).expect("parses");
    assert_eq!(parsed.sack_block_count(), 4);
    assert_eq!(parsed, r);
}

#[test]
fn option_iterator_yields_each_kind_then_stops_at_eol() {
    let bytes = [1, 2, 4, 0x05, 0xb4, 4, 2, 3, 3, 20, 30, 3, 7, 0, 99, 99];
    let got: Vec<_> = TcpOptions::new(&bytes).collect();
    assert_eq!(
        got,
        vec![
            Ok(TcpOption::NoOperation),
            Ok(TcpOption::MaxSegmentSize(1460)),
            Ok(TcpOption::SackPermitted),
            Ok(TcpOption::WindowScale(20)),
            Ok(TcpOption::Unknown {
                kind: 30,
                data: &[7]
            }),
            Ok(TcpOption::EndOfList),
        ]
    );
}

#[test]
fn option_iterator_stops_after_the_first_error() {
    let bytes = [1, 30, 0, 1, 1];
    let got: Vec<_> = TcpOptions::new(&bytes).collect();
    assert_eq!(
        got,
        vec![
            Ok(TcpOption::NoOperation),
            Err(wire::Error::BadOptionLength)
        ]
    );
}

#[test]
fn partial_offload_leaves_pseudo_header_sum_that_completes_to_valid_checksum() {
    // What a NIC with partial checksum offload does: sum from the TCP header to the end,
    // starting from the pseudo-header sum the stack left in the checksum field.
    let mut r = base(b"hello, offload");
    r.timestamp = Some(TcpTimestamp { tsval: 1, tsecr: 2 });
    let mut b = emit(&r, ChecksumCaps::NONE);
    let c = checksum::finish(checksum::sum(&b));
    b[16..18].copy_from_slice(&c.to_be_bytes());
    assert!(
        TcpPacket::new_checked(&b[..])
            .expect("valid")
            .verify_checksum(&V4)
    );
    assert_eq!(b, emit(&r, ChecksumCaps::ALL));
}

proptest! {
    #[test]
    fn rfc1624_update_of_seq_and_port_keeps_tcp_checksum_valid(
        seq in any::<u32>(), port in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let r = base(&data);
        let mut b = emit(&r, ChecksumCaps::ALL);
        let mut p = TcpPacket::new_checked(&mut b[..]).expect("valid");
        let c = checksum::update_u32(p.checksum(), p.seq_number().0, seq);
        let c = checksum::update(c, p.src_port(), port);
        p.set_seq_number(SeqNumber(seq));
        p.set_src_port(port);
        p.set_checksum(c);
        prop_assert!(p.verify_checksum(&V4));
    }
}

/// One well-formed option as raw bytes, in any order a peer might send them.
fn raw_option() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![1u8]),
        any::<u16>().prop_map(|m| {
            let b = m.to_be_bytes();
            vec![2, 4, b[0], b[1]]
        }),
        (0u8..=20).prop_map(|s| vec![3, 3, s]),
        Just(vec![4u8, 2]),
        proptest::collection::vec(any::<u8>(), 1..=3).prop_map(|blocks| {
            let mut v = vec![5u8, (2 + 8 * blocks.len()) as u8];
            for b in blocks {
                v.extend_from_slice(&[b; 8]);
            }
            v
        }),
        any::<[u8; 8]>().prop_map(|t| {
            let mut v = vec![8u8, 10];
            v.extend_from_slice(&t);
            v
        }),
        (9u8..=253, proptest::collection::vec(any::<u8>(), 0..6)).prop_filter_map(
            "not a known kind",
            |(k, d)| {
                if k == 5 || k == 8 {
                    return None;
                }
                let mut v = vec![k, (2 + d.len()) as u8];
                v.extend_from_slice(&d);
                Some(v)
            }
        ),
    ]
}

proptest! {
    #[test]
    fn peer_option_orderings_parse_and_reemit_to_the_same_repr(
        opts in proptest::collection::vec(raw_option(), 0..6), eol in any::<bool>(),
    ) {
        let mut area: Vec<u8> = opts.concat();
        if eol {
            area.push(0);
        }
        prop_assume!(area.len() <= 40);
        while area.len() % 4 != 0 {
            area.push(0);
        }
        let mut b = vec![0u8; 20 + area.len()];
        base(&[]).emit(&mut TcpPacket::new_unchecked(&mut b[..20]), &V4, ChecksumCaps::NONE).expect("fits");
        b[20..].copy_from_slice(&area);
        b[12] = (((20 + area.len()) / 4) as u8) << 4;
        TcpPacket::new_unchecked(&mut b[..]).fill_checksum(&V4);
        let p = TcpPacket::new_checked(&b[..]).expect("valid");
        let (r, report) = TcpRepr::parse_with_report(&p, &V4, ChecksumCaps::ALL).expect("well-formed options parse");
        prop_assert_eq!(report.window_scale_clamped, r.window_scale == Some(14) && {
            // The last window-scale option decides.
            let last_ws = opts.iter().rev().find(|o| o.first() == Some(&3)).and_then(|o| o.get(2).copied());
            last_ws.is_some_and(|s| s > 14)
        });
        if r.options_len() <= 40 {
            let again = emit(&r, ChecksumCaps::ALL);
            let p2 = TcpPacket::new_checked(&again[..]).expect("valid");
            prop_assert_eq!(TcpRepr::parse(&p2, &V4, ChecksumCaps::ALL), Ok(r));
        }
    }
}

/// The options `parse` should report for `options`, computed from the public option iterator
/// (the general walk): `None` where the walk meets a malformed option.
fn options_by_walk(options: &[u8]) -> Option<TcpRepr<'static>> {
    let mut r = base(&[]);
    for opt in TcpOptions::new(options) {
        match opt.ok()? {
            TcpOption::EndOfList | TcpOption::NoOperation => {}
            TcpOption::MaxSegmentSize(m) => r.max_seg_size = Some(m),
            TcpOption::WindowScale(s) => r.window_scale = Some(s.min(wire::tcp::MAX_WINDOW_SCALE)),
            TcpOption::SackPermitted => r.sack_permitted = true,
            TcpOption::SackRange(b) => r.sack_blocks = b,
            TcpOption::Timestamp(ts) => r.timestamp = Some(ts),
            TcpOption::Unknown { kind, data } => {
                if let Some(fo) = wire::tcp::FastOpenOption::parse(kind, data) {
                    r.fast_open = Some(fo);
                }
            }
        }
    }
    Some(r)
}

/// Options areas of 0 to 40 bytes, half of them the 12-byte NOP NOP timestamps layout with
/// one byte possibly changed (so near misses of the in-place path reach the walk).
fn options_area() -> impl Strategy<Value = Vec<u8>> {
    let ts = (any::<[u8; 8]>(), 0..24usize, any::<u8>()).prop_map(|(v, at, b)| {
        let mut o = vec![1, 1, 8, 10];
        o.extend_from_slice(&v);
        if let Some(x) = o.get_mut(at) {
            *x = b;
        }
        o
    });
    let any_area =
        (0..=10usize).prop_flat_map(|words| proptest::collection::vec(any::<u8>(), 4 * words));
    prop_oneof![ts, any_area]
}

proptest! {
    #[test]
    fn parse_reads_every_options_area_as_the_option_walk_does(options in options_area()) {
        let payload = [7u8; 3];
        let hdr_words = 5 + options.len() / 4;
        let mut b = vec![0u8; 20 + options.len() + payload.len()];
        base(&payload)
            .emit(&mut TcpPacket::new_unchecked(&mut b[..]), &V4, ChecksumCaps::default())
            .ok();
        // The emitted fixed header (no options), then ours: offset, options, payload.
        let mut seg = b[..20].to_vec();
        seg[12] = (hdr_words as u8) << 4;
        seg.extend_from_slice(&options);
        seg.extend_from_slice(&payload);
        let caps = ChecksumCaps { verify_rx: false, ..ChecksumCaps::default() };
        let got = TcpRepr::parse(&TcpPacket::new_unchecked(&seg[..]), &V4, caps);
        match options_by_walk(&options) {
            None => prop_assert!(got.is_err(), "{options:?}: {got:?}"),
            Some(want) => {
                let got = got.map_err(|e| TestCaseError::fail(format!("{options:?}: {e:?}")))?;
                prop_assert_eq!(got.timestamp, want.timestamp);
                prop_assert_eq!(got.max_seg_size, want.max_seg_size);
                prop_assert_eq!(got.window_scale, want.window_scale);
                prop_assert_eq!(got.sack_permitted, want.sack_permitted);
                prop_assert_eq!(got.sack_blocks, want.sack_blocks);
                prop_assert_eq!(got.fast_open, want.fast_open);
                prop_assert_eq!(got.payload, &payload[..]);
            }
        }
    }
}
