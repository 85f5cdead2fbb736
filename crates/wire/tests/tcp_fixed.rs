//! `wire::tcp_fixed::parse_fixed` against the general parser: whenever the fixed-offset read
//! takes a segment, `TcpRepr::parse_with_report` (checksum not verified) parses it into the
//! same `TcpRepr` with a default report; and it takes every well-formed segment of its two
//! layouts (no options; NOP NOP timestamps).

use proptest::prelude::*;
use wire::tcp_fixed::parse_fixed;
use wire::{ChecksumCaps, IpPair, TcpPacket, TcpParseReport, TcpRepr};

const NO_VERIFY: ChecksumCaps = ChecksumCaps {
    verify_rx: false,
    fill_tx: true,
};

fn pair() -> IpPair {
    IpPair::V4 {
        src: core::net::Ipv4Addr::new(10, 0, 0, 1),
        dst: core::net::Ipv4Addr::new(10, 0, 0, 2),
    }
}

/// The general parser's verdict on `bytes`, as the stack calls it (view checked first).
fn general(bytes: &[u8]) -> Option<(TcpRepr<'_>, TcpParseReport)> {
    let view = TcpPacket::new_checked(bytes).ok()?;
    TcpRepr::parse_with_report(&view, &pair(), NO_VERIFY).ok()
}

/// A segment of one of the two layouts: a random 20-byte header with data offset 5 or 8
/// (the low nibble of byte 12 random), NOP NOP timestamps when 8, then `payload`.
fn layout_segment(header: [u8; 20], timestamps: bool, ts: [u8; 8], payload: &[u8]) -> Vec<u8> {
    let mut s = header.to_vec();
    s[12] = (s[12] & 0x0f) | if timestamps { 0x80 } else { 0x50 };
    if timestamps {
        s.extend_from_slice(&[1, 1, 8, 10]);
        s.extend_from_slice(&ts);
    }
    s.extend_from_slice(payload);
    s
}

/// A change to a segment: the mutations the fixed read must see through.
#[derive(Debug, Clone)]
enum Mutation {
    /// XOR one byte (index taken modulo the length) with a non-zero value.
    Flip(usize, u8),
    /// Set the data offset nibble.
    DataOffset(u8),
    /// Keep only the first `n` bytes (modulo length + 1).
    Truncate(usize),
    /// Replace option byte `i` (of the 12 after the fixed header) with `v`.
    OptionByte(usize, u8),
    /// Replace the timestamp option's kind or length with a kind seen on the wire.
    OptionKind(u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, v)| Mutation::Flip(i, v)),
        (0u8..16).prop_map(Mutation::DataOffset),
        any::<usize>().prop_map(Mutation::Truncate),
        (0usize..12, any::<u8>()).prop_map(|(i, v)| Mutation::OptionByte(i, v)),
        prop::sample::select(vec![0u8, 1, 2, 3, 4, 5, 8, 10, 30, 34, 254, 255])
            .prop_map(Mutation::OptionKind),
    ]
}

fn apply(s: &mut Vec<u8>, m: &Mutation) {
    match *m {
        Mutation::Flip(i, v) if !s.is_empty() => {
            let n = s.len();
            s[i % n] ^= v;
        }
        Mutation::Flip(..) => {}
        Mutation::DataOffset(w) if s.len() > 12 => s[12] = (s[12] & 0x0f) | (w << 4),
        Mutation::DataOffset(_) => {}
        Mutation::Truncate(n) => {
            let keep = n % (s.len() + 1);
            s.truncate(keep);
        }
        Mutation::OptionByte(i, v) => {
            if let Some(b) = s.get_mut(20 + i) {
                *b = v;
            }
        }
        Mutation::OptionKind(k) => {
            if let Some(b) = s.get_mut(22) {
                *b = k;
            }
        }
    }
}

/// When the fixed read takes `bytes`, the general parser takes it too, into the same
/// `TcpRepr` and a default report.
fn assert_agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Some(fixed) = parse_fixed(bytes) {
        let general = general(bytes);
        prop_assert_eq!(Some((fixed, TcpParseReport::default())), general);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn fixed_read_takes_both_layouts_and_equals_the_general_parser(
        header in any::<[u8; 20]>(),
        timestamps in any::<bool>(),
        ts in any::<[u8; 8]>(),
        payload in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let s = layout_segment(header, timestamps, ts, &payload);
        let fixed = parse_fixed(&s);
        prop_assert!(fixed.is_some(), "a well-formed segment of a fixed layout was declined");
        prop_assert_eq!(fixed.map(|r| r.payload.len()), Some(payload.len()));
        assert_agrees(&s)?;
    }

    #[test]
    fn fixed_read_of_mutated_headers_equals_the_general_parser_or_declines(
        header in any::<[u8; 20]>(),
        timestamps in any::<bool>(),
        ts in any::<[u8; 8]>(),
        payload in prop::collection::vec(any::<u8>(), 0..24),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut s = layout_segment(header, timestamps, ts, &payload);
        for m in &mutations {
            apply(&mut s, m);
        }
        assert_agrees(&s)?;
    }

    #[test]
    fn fixed_read_of_random_bytes_equals_the_general_parser_or_declines(
        bytes in prop::collection::vec(any::<u8>(), 0..80),
    ) {
        assert_agrees(&bytes)?;
    }
}

/// Every other layout goes to the general parser: options other than NOP NOP timestamps,
/// other data offsets, and a header longer than the segment.
#[test]
fn fixed_read_declines_every_other_layout() {
    let ts = layout_segment([0; 20], true, [7; 8], b"data");
    let bare = layout_segment([0; 20], false, [0; 8], b"data");
    assert!(parse_fixed(&ts).is_some());
    assert!(parse_fixed(&bare).is_some());
    // Timestamps first, then NOP NOP (the SYN-ACK layout of some stacks).
    let mut other = ts.clone();
    other[20..32].copy_from_slice(&[8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1]);
    assert!(parse_fixed(&other).is_none());
    assert!(general(&other).is_some());
    // Data offsets 6, 7, 9 and 4.
    for words in [4u8, 6, 7, 9] {
        let mut s = ts.clone();
        s[12] = words << 4;
        assert!(parse_fixed(&s).is_none(), "data offset {words}");
    }
    // A header longer than the segment, and a segment shorter than 20 bytes.
    assert!(parse_fixed(&ts[..31]).is_none());
    assert!(parse_fixed(&bare[..19]).is_none());
    // The timestamp option with a wrong length.
    let mut bad_len = ts.clone();
    bad_len[23] = 9;
    assert!(parse_fixed(&bad_len).is_none());
}
