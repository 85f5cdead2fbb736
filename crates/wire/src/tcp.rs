//! TCP header (RFC 9293 §3.1) and options (RFC 9293 §3.2, RFC 7323, RFC 2018).
//!
//! CONTRACT (shared with the `tcp` crate): the public types below — `SeqNumber`, `TcpFlags`,
//! `SackBlock`, `TcpTimestamp`, `TcpRepr` and their field names/types — are relied upon by other
//! crates. Extend them (new methods, new impls) but do not rename or retype the fields.

use core::cmp::Ordering;
use core::ops::{Add, AddAssign, Sub};

/// A TCP sequence number: arithmetic wraps modulo 2^32 and comparisons are circular
/// (RFC 9293 §3.4), valid while the two numbers are less than 2^31 apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// Signed distance `self - other`, circular.
    #[inline]
    pub fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    #[inline]
    pub fn lt(self, other: SeqNumber) -> bool {
        self.diff(other) < 0
    }
    #[inline]
    pub fn le(self, other: SeqNumber) -> bool {
        self.diff(other) <= 0
    }
    #[inline]
    pub fn gt(self, other: SeqNumber) -> bool {
        self.diff(other) > 0
    }
    #[inline]
    pub fn ge(self, other: SeqNumber) -> bool {
        self.diff(other) >= 0
    }
    /// The later of the two (circularly).
    #[inline]
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self.ge(other) { self } else { other }
    }
    /// The earlier of the two (circularly).
    #[inline]
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self.le(other) { self } else { other }
    }
    /// Circular ordering; use only when both numbers lie within 2^31 of each other.
    #[inline]
    pub fn cmp_circular(self, other: SeqNumber) -> Ordering {
        self.diff(other).cmp(&0)
    }
}

impl Add<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn add(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs))
    }
}

impl AddAssign<u32> for SeqNumber {
    #[inline]
    fn add_assign(&mut self, rhs: u32) {
        self.0 = self.0.wrapping_add(rhs);
    }
}

impl Sub<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn sub(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs))
    }
}

/// TCP control bits as they sit in byte 13 of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: TcpFlags = TcpFlags(0x01);
    pub const SYN: TcpFlags = TcpFlags(0x02);
    pub const RST: TcpFlags = TcpFlags(0x04);
    pub const PSH: TcpFlags = TcpFlags(0x08);
    pub const ACK: TcpFlags = TcpFlags(0x10);
    pub const URG: TcpFlags = TcpFlags(0x20);
    pub const ECE: TcpFlags = TcpFlags(0x40);
    pub const CWR: TcpFlags = TcpFlags(0x80);
    pub const NONE: TcpFlags = TcpFlags(0);

    #[inline]
    pub fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
    #[inline]
    pub fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for TcpFlags {
    #[inline]
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

/// One SACK block (RFC 2018 §3): `left` is the first sequence number of the block, `right` the
/// sequence number just past its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SackBlock {
    pub left: SeqNumber,
    pub right: SeqNumber,
}

/// The timestamps option (RFC 7323 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpTimestamp {
    pub tsval: u32,
    pub tsecr: u32,
}

/// The meaningful fields of a TCP segment.
///
/// Invariants: `window_scale`, when present, is ≤ 14 (RFC 7323 §2.3; `parse` clamps a larger
/// value and reports it); at most 4 SACK blocks, filled from index 0 with no gaps;
/// `ack_number` is meaningful only when `flags` contains ACK (emit writes it as given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: SeqNumber,
    pub ack_number: SeqNumber,
    pub flags: TcpFlags,
    /// The raw 16-bit window field (unscaled).
    pub window_len: u16,
    pub urgent_pointer: u16,
    pub max_seg_size: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub sack_blocks: [Option<SackBlock>; 4],
    pub timestamp: Option<TcpTimestamp>,
    pub payload: &'a [u8],
}
