//! The TCP header of a bulk segment read at fixed offsets: the two layouts nearly every
//! segment of an established connection carries — no options (data offset 5), and NOP NOP
//! timestamps (data offset 8: `01 01 08 0a` then TSval and TSecr, RFC 7323 Appendix A).
//!
//! Invariant: [`parse_fixed`] returns `Some` only for a segment that
//! [`TcpRepr::parse_with_report`] (with `verify_rx` off) parses into the same `TcpRepr`
//! with a default [`TcpParseReport`](crate::tcp::TcpParseReport) (nothing clamped, no unknown option); for every other
//! segment it returns `None` and the caller takes the general parser. It verifies no
//! checksum: a caller that must verify one does so as after the general parser.
//! `tests/tcp_fixed.rs` checks the equality on random and mutated headers.

use crate::tcp::{SeqNumber, TcpFlags, TcpRepr, TcpTimestamp, field};

/// Data offset (in 32-bit words) of a header without options.
const BARE_WORDS: u8 = 5;
/// Data offset of a header carrying NOP NOP timestamps.
const TS_WORDS: u8 = 8;
/// Header bytes with NOP NOP timestamps.
const TS_HEADER_LEN: usize = 32;
/// The first four option bytes of the NOP NOP timestamps layout: NOP, NOP, kind 8, length 10.
const NOP_NOP_TS: [u8; 4] = [1, 1, 8, 10];

#[inline(always)]
fn be16_at(h: &[u8; field::HEADER_LEN], at: usize) -> u16 {
    u16::from_be_bytes([h[at], h[at + 1]])
}

#[inline(always)]
fn be32_at<const N: usize>(h: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])
}

/// The segment `bytes` (the whole IP payload) read at fixed offsets when its header has
/// one of the two layouts of the module documentation and fits in `bytes`; `None`
/// otherwise, having read nothing else. The payload is every byte after the header.
#[inline(always)]
pub fn parse_fixed(bytes: &[u8]) -> Option<TcpRepr<'_>> {
    let h = bytes.first_chunk::<{ field::HEADER_LEN }>()?;
    let words = h[field::DATA_OFFSET] >> 4;
    let mut repr = TcpRepr {
        urgent_pointer: be16_at(h, 18),
        ..TcpRepr::bare(
            be16_at(h, 0),
            be16_at(h, 2),
            SeqNumber(be32_at(h, 4)),
            SeqNumber(be32_at(h, 8)),
            TcpFlags(h[field::FLAGS]),
            be16_at(h, 14),
        )
    };
    if words == BARE_WORDS {
        repr.payload = bytes.get(field::HEADER_LEN..)?;
        return Some(repr);
    }
    if words != TS_WORDS {
        return None;
    }
    let head = bytes.first_chunk::<TS_HEADER_LEN>()?;
    if head[field::HEADER_LEN..field::HEADER_LEN + 4] != NOP_NOP_TS {
        return None;
    }
    repr.timestamp = Some(TcpTimestamp {
        tsval: be32_at(head, 24),
        tsecr: be32_at(head, 28),
    });
    repr.payload = bytes.get(TS_HEADER_LEN..)?;
    Some(repr)
}
