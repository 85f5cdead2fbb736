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
    /// The TCP Fast Open option (RFC 7413), meaningful on SYN and SYN-ACK only.
    pub fast_open: Option<FastOpenOption>,
    pub payload: &'a [u8],
}

use crate::checksum::{self, ChecksumCaps};
use crate::error::{Error, Result};
use crate::ip::{IpPair, IpProtocol};
pub use crate::tcp_fast_open::FastOpenOption;

pub mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// High nibble: data offset in 32-bit words.
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
    pub const HEADER_LEN: usize = 20;
    /// Largest header (data offset 15).
    pub const MAX_HEADER_LEN: usize = 60;
    /// Option space (RFC 9293 §3.1).
    pub const MAX_OPTIONS_LEN: usize = 40;
}

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMP: u8 = 8;
}

/// Largest window shift allowed (RFC 7323 §2.3).
pub const MAX_WINDOW_SCALE: u8 = 14;

/// One TCP option as found on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0: the end of the option list.
    EndOfList,
    /// Kind 1.
    NoOperation,
    /// Kind 2, length 4 (RFC 9293 §3.2).
    MaxSegmentSize(u16),
    /// Kind 3, length 3 (RFC 7323 §2.2); the raw shift, possibly > 14.
    WindowScale(u8),
    /// Kind 4, length 2 (RFC 2018 §2).
    SackPermitted,
    /// Kind 5, length 2 + 8n with n in 1..=4 (RFC 2018 §3), filled from index 0.
    SackRange([Option<SackBlock>; 4]),
    /// Kind 8, length 10 (RFC 7323 §3.2).
    Timestamp(TcpTimestamp),
    /// Any other kind, skipped by its length; `data` excludes kind and length bytes.
    Unknown { kind: u8, data: &'a [u8] },
}

/// Iterator over the options area of a TCP header. Yields `Err(BadOptionLength)` once and then
/// stops when an option has length 0 or 1, overruns the options area, or has the wrong length
/// for its kind. Stops after `EndOfList`.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
    done: bool,
}

impl<'a> TcpOptions<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        TcpOptions { data, done: false }
    }
}

fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    match b.get(r) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    }
}

fn be32(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    match b.get(r) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (&k, rest) = self.data.split_first()?;
        match k {
            kind::END => {
                self.done = true;
                return Some(Ok(TcpOption::EndOfList));
            }
            kind::NOP => {
                self.data = rest;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let len = rest.first().map_or(0, |&l| usize::from(l));
        // RFC 9293 §3.2: the length counts kind and length bytes, so < 2 can never be valid
        // (and 0 would loop forever); it must also stay inside the options area.
        let Some(opt) = self.data.get(..len).filter(|_| len >= 2) else {
            self.done = true;
            return Some(Err(Error::BadOptionLength));
        };
        let body = opt.get(2..).unwrap_or(&[]);
        let parsed = match (k, len) {
            (kind::MSS, 4) => Ok(TcpOption::MaxSegmentSize(be16(body, 0..2))),
            (kind::WINDOW_SCALE, 3) => {
                Ok(TcpOption::WindowScale(body.first().copied().unwrap_or(0)))
            }
            (kind::SACK_PERMITTED, 2) => Ok(TcpOption::SackPermitted),
            (kind::SACK, _) if (10..=34).contains(&len) && (len - 2) % 8 == 0 => {
                let mut blocks = [None; 4];
                for (slot, b) in blocks.iter_mut().zip(body.chunks_exact(8)) {
                    *slot = Some(SackBlock {
                        left: SeqNumber(be32(b, 0..4)),
                        right: SeqNumber(be32(b, 4..8)),
                    });
                }
                Ok(TcpOption::SackRange(blocks))
            }
            (kind::TIMESTAMP, 10) => Ok(TcpOption::Timestamp(TcpTimestamp {
                tsval: be32(body, 0..4),
                tsecr: be32(body, 4..8),
            })),
            (
                kind::MSS
                | kind::WINDOW_SCALE
                | kind::SACK_PERMITTED
                | kind::SACK
                | kind::TIMESTAMP,
                _,
            ) => Err(Error::BadOptionLength),
            (k, _) => Ok(TcpOption::Unknown {
                kind: k,
                data: body,
            }),
        };
        if parsed.is_err() {
            self.done = true;
        }
        self.data = self.data.get(len..).unwrap_or(&[]);
        Some(parsed)
    }
}

/// Checked view of a TCP segment. The buffer is the whole segment (the IP payload): TCP has no
/// length field of its own.
///
/// After `new_checked`: buffer ≥ header length ≥ 20.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` (< 20 bytes), `BadDataOffset` (< 5 or past the end of the buffer).
    pub fn check_len(&self) -> Result<()> {
        let len = self.b().len();
        if len < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let h = self.header_len();
        if h < field::HEADER_LEN || h > len {
            return Err(Error::BadDataOffset);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn src_port(&self) -> u16 {
        be16(self.b(), field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), field::DST_PORT)
    }
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(be32(self.b(), field::SEQ_NUM))
    }
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(be32(self.b(), field::ACK_NUM))
    }
    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        self.b()
            .get(field::DATA_OFFSET)
            .map_or(0, |v| usize::from(v >> 4) * 4)
    }
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.b().get(field::FLAGS).copied().unwrap_or(0))
    }
    pub fn window_len(&self) -> u16 {
        be16(self.b(), field::WINDOW)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    pub fn urgent_pointer(&self) -> u16 {
        be16(self.b(), field::URGENT)
    }
    /// The raw options area.
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(field::HEADER_LEN..self.header_len())
            .unwrap_or(&[])
    }
    /// Iterates the options.
    pub fn option_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }
    pub fn payload(&self) -> &[u8] {
        self.b().get(self.header_len()..).unwrap_or(&[])
    }
    /// True when the checksum over pseudo-header + segment verifies (RFC 9293 §3.1).
    pub fn verify_checksum(&self, addrs: &IpPair) -> bool {
        let len = self.b().len();
        let Ok(len32) = u32::try_from(len) else {
            return false;
        };
        let ph = addrs.pseudo_header_sum(IpProtocol::TCP, len32);
        checksum::combine(&[ph, checksum::sum(self.b())]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(v);
        }
    }
    pub fn set_src_port(&mut self, v: u16) {
        self.put(field::SRC_PORT, &v.to_be_bytes());
    }
    pub fn set_dst_port(&mut self, v: u16) {
        self.put(field::DST_PORT, &v.to_be_bytes());
    }
    pub fn set_seq_number(&mut self, v: SeqNumber) {
        self.put(field::SEQ_NUM, &v.0.to_be_bytes());
    }
    pub fn set_ack_number(&mut self, v: SeqNumber) {
        self.put(field::ACK_NUM, &v.0.to_be_bytes());
    }
    /// Sets the data offset from a header length in bytes (multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, header_len: usize) {
        self.put(
            field::DATA_OFFSET..field::DATA_OFFSET + 1,
            &[((header_len / 4) as u8) << 4],
        );
    }
    pub fn set_flags(&mut self, f: TcpFlags) {
        self.put(field::FLAGS..field::FLAGS + 1, &[f.0]);
    }
    pub fn set_window_len(&mut self, v: u16) {
        self.put(field::WINDOW, &v.to_be_bytes());
    }
    pub fn set_checksum(&mut self, v: u16) {
        self.put(field::CHECKSUM, &v.to_be_bytes());
    }
    pub fn set_urgent_pointer(&mut self, v: u16) {
        self.put(field::URGENT, &v.to_be_bytes());
    }
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        self.buffer
            .as_mut()
            .get_mut(field::HEADER_LEN..h)
            .unwrap_or(&mut [])
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        self.buffer.as_mut().get_mut(h..).unwrap_or(&mut [])
    }
    /// Computes and writes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self, addrs: &IpPair) {
        self.set_checksum(0);
        let len32 = u32::try_from(self.b().len()).unwrap_or(u32::MAX);
        let ph = addrs.pseudo_header_sum(IpProtocol::TCP, len32);
        let c = checksum::combine(&[ph, checksum::sum(self.b())]);
        self.set_checksum(checksum::finish(c));
    }
}

/// What [`TcpRepr::parse_with_report`] noticed that the Repr alone cannot show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpParseReport {
    /// The window-scale option whose value the Repr keeps (the last one, if repeated) carried a
    /// shift > 14 and was clamped to 14 (RFC 7323 §2.3: "use 14 instead and log an error").
    pub window_scale_clamped: bool,
    /// Options of unknown kind that were skipped by their length.
    pub unknown_options: u8,
}

impl TcpRepr<'static> {
    /// A header with no options, a zero urgent pointer and no payload: the fields every
    /// segment has, and nothing else. Callers add what they carry with struct update syntax
    /// (`TcpRepr { timestamp: Some(ts), ..TcpRepr::bare(..) }`); a `'static` header coerces to
    /// any payload lifetime.
    pub const fn bare(
        src_port: u16,
        dst_port: u16,
        seq_number: SeqNumber,
        ack_number: SeqNumber,
        flags: TcpFlags,
        window_len: u16,
    ) -> Self {
        TcpRepr {
            src_port,
            dst_port,
            seq_number,
            ack_number,
            flags,
            window_len,
            urgent_pointer: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            fast_open: None,
            payload: &[],
        }
    }
}

impl<'a> TcpRepr<'a> {
    /// Parses a segment; see [`TcpRepr::parse_with_report`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&'a T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
    ) -> Result<TcpRepr<'a>> {
        Self::parse_with_report(packet, addrs, caps).map(|(r, _)| r)
    }

    /// Parses a segment and reports anomalies that are not errors (window scale clamped).
    ///
    /// Errors: the view's `check_len` errors, `BadOptionLength` from the option walk,
    /// `BadChecksum` when `caps.verify_rx` and the checksum does not verify. When an option kind
    /// repeats, the last occurrence wins.
    pub fn parse_with_report<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&'a T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
    ) -> Result<(TcpRepr<'a>, TcpParseReport)> {
        packet.check_len()?;
        if caps.verify_rx && !packet.verify_checksum(addrs) {
            return Err(Error::BadChecksum);
        }
        let buf: &'a T = packet.buffer;
        let bytes: &'a [u8] = buf.as_ref();
        let header_len = packet.header_len();
        let options = bytes.get(field::HEADER_LEN..header_len).unwrap_or(&[]);
        let mut report = TcpParseReport::default();
        let mut repr = TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_pointer: packet.urgent_pointer(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            fast_open: None,
            payload: bytes.get(header_len..).unwrap_or(&[]),
        };
        // The options of nearly every segment of an established connection: none, or NOP NOP
        // timestamps (the layout Linux, BSD and this stack send once timestamps were
        // negotiated, RFC 7323 Appendix A). Read in place; the walk below gives the same
        // result for them, and takes every other layout.
        match *options {
            [] => return Ok((repr, report)),
            [
                kind::NOP,
                kind::NOP,
                kind::TIMESTAMP,
                10,
                v0,
                v1,
                v2,
                v3,
                e0,
                e1,
                e2,
                e3,
            ] => {
                repr.timestamp = Some(TcpTimestamp {
                    tsval: u32::from_be_bytes([v0, v1, v2, v3]),
                    tsecr: u32::from_be_bytes([e0, e1, e2, e3]),
                });
                return Ok((repr, report));
            }
            _ => {}
        }
        for opt in TcpOptions::new(options) {
            match opt? {
                TcpOption::EndOfList | TcpOption::NoOperation => {}
                TcpOption::MaxSegmentSize(m) => repr.max_seg_size = Some(m),
                TcpOption::WindowScale(s) => {
                    // The flag describes the value kept (the last occurrence wins).
                    report.window_scale_clamped = s > MAX_WINDOW_SCALE;
                    repr.window_scale = Some(s.min(MAX_WINDOW_SCALE));
                }
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::SackRange(blocks) => repr.sack_blocks = blocks,
                TcpOption::Timestamp(ts) => repr.timestamp = Some(ts),
                TcpOption::Unknown { kind, data } => match FastOpenOption::parse(kind, data) {
                    Some(fo) => repr.fast_open = Some(fo),
                    None => report.unknown_options = report.unknown_options.saturating_add(1),
                },
            }
        }
        Ok((repr, report))
    }

    /// Number of SACK blocks carried (they are filled from index 0).
    pub fn sack_block_count(&self) -> usize {
        self.sack_blocks.iter().take_while(|b| b.is_some()).count()
    }

    /// Bytes of options emit writes, in Linux's layout (`tcp_options_write`): MSS (4);
    /// SACK-permitted+timestamps (12) or NOP NOP timestamps (12); NOP NOP SACK-permitted (4)
    /// when there are no timestamps; NOP window scale (4); NOP NOP SACK blocks (4 + 8n); Fast
    /// Open (NOP-padded to 4).
    /// Always a multiple of 4.
    pub fn options_len(&self) -> usize {
        let mut len = 0;
        if self.max_seg_size.is_some() {
            len += 4;
        }
        if self.timestamp.is_some() {
            len += 12;
        } else if self.sack_permitted {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 4;
        }
        let n = self.sack_block_count();
        if n > 0 {
            len += 4 + 8 * n;
        }
        if let Some(fo) = &self.fast_open {
            len += fo.padded_len();
        }
        len
    }

    /// Header length in bytes (20 + options); may exceed 60, in which case emit fails.
    pub fn header_len(&self) -> usize {
        field::HEADER_LEN + self.options_len()
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Segment length in sequence space: payload plus one each for SYN and FIN
    /// (RFC 9293 §3.4).
    pub fn segment_len(&self) -> usize {
        self.payload.len()
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }

    /// Writes header, options and payload into `packet`, whose buffer must be exactly
    /// `buffer_len()` bytes long (it is the checksummed segment). Fills the checksum when
    /// `caps.fill_tx`, else writes the pseudo-header sum for partial checksum offload.
    ///
    /// Errors: `OptionsTooLong` when the options exceed 40 bytes, `BufferTooSmall` when the
    /// buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
    ) -> Result<()> {
        self.emit_header(packet, self.options_len())?;
        self.write_options(packet.options_mut());
        self.emit_payload_and_checksum(packet, addrs, caps);
        Ok(())
    }

    /// [`TcpRepr::emit`] with `options` (laid out by the caller, a multiple of 4 bytes) as the
    /// options area.
    pub(crate) fn emit_with_options<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
        options: &[u8],
    ) -> Result<()> {
        self.emit_header(packet, options.len())?;
        if let Some(dst) = packet.options_mut().get_mut(..options.len()) {
            dst.copy_from_slice(options);
        }
        self.emit_payload_and_checksum(packet, addrs, caps);
        Ok(())
    }

    /// Checks the sizes and writes the fixed header for `opts_len` bytes of options.
    #[inline(always)]
    fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        opts_len: usize,
    ) -> Result<()> {
        if opts_len > field::MAX_OPTIONS_LEN {
            return Err(Error::OptionsTooLong);
        }
        let header_len = field::HEADER_LEN + opts_len;
        if packet.b().len() < header_len + self.payload.len() {
            return Err(Error::BufferTooSmall);
        }
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.set_header_len(header_len);
        packet.set_flags(self.flags);
        packet.set_window_len(self.window_len);
        packet.set_urgent_pointer(self.urgent_pointer);
        Ok(())
    }

    #[inline(always)]
    fn emit_payload_and_checksum<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
    ) {
        if let Some(dst) = packet.payload_mut().get_mut(..self.payload.len()) {
            dst.copy_from_slice(self.payload);
        }
        if caps.fill_tx {
            packet.fill_checksum(addrs);
        } else {
            let len32 = u32::try_from(packet.b().len()).unwrap_or(u32::MAX);
            packet.set_checksum(addrs.pseudo_header_sum(IpProtocol::TCP, len32));
        }
    }

    fn write_options(&self, out: &mut [u8]) {
        let mut w = OptWriter { out, pos: 0 };
        if let Some(mss) = self.max_seg_size {
            w.bytes(&[kind::MSS, 4]);
            w.bytes(&mss.to_be_bytes());
        }
        if let Some(ts) = self.timestamp {
            if self.sack_permitted {
                w.bytes(&[kind::SACK_PERMITTED, 2]);
            } else {
                w.bytes(&[kind::NOP, kind::NOP]);
            }
            w.bytes(&[kind::TIMESTAMP, 10]);
            w.bytes(&ts.tsval.to_be_bytes());
            w.bytes(&ts.tsecr.to_be_bytes());
        }
        if self.sack_permitted && self.timestamp.is_none() {
            w.bytes(&[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2]);
        }
        if let Some(ws) = self.window_scale {
            w.bytes(&[kind::NOP, kind::WINDOW_SCALE, 3, ws]);
        }
        let n = self.sack_block_count();
        if n > 0 {
            w.bytes(&[kind::NOP, kind::NOP, kind::SACK, (2 + 8 * n) as u8]);
            for b in self.sack_blocks.iter().flatten().take(n) {
                w.bytes(&b.left.0.to_be_bytes());
                w.bytes(&b.right.0.to_be_bytes());
            }
        }
        if let Some(fo) = &self.fast_open {
            // Last, NOP-padded (Linux `tcp_options_write`).
            if let Some(out) = w.out.get_mut(w.pos..) {
                fo.write(out);
            }
        }
    }
}

struct OptWriter<'b> {
    out: &'b mut [u8],
    pos: usize,
}

impl OptWriter<'_> {
    fn bytes(&mut self, v: &[u8]) {
        if let Some(dst) = self.out.get_mut(self.pos..self.pos + v.len()) {
            dst.copy_from_slice(v);
        }
        self.pos += v.len();
    }
}

impl core::fmt::Display for TcpFlags {
    /// tcpdump's notation: `S` SYN, `F` FIN, `R` RST, `P` PSH, `U` URG, `E` ECE, `W` CWR,
    /// `.` ACK; `none` when no bit is set.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        for (flag, c) in [
            (TcpFlags::SYN, 'S'),
            (TcpFlags::FIN, 'F'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::ACK, '.'),
        ] {
            if self.contains(flag) {
                core::fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

impl core::fmt::Display for TcpRepr<'_> {
    /// One tcpdump-like line: `40000 > 443 [S.] seq 1 ack 2 win 512 mss 1460 ... len 0`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} > {} [{}] seq {}",
            self.src_port, self.dst_port, self.flags, self.seq_number.0
        )?;
        if self.flags.contains(TcpFlags::ACK) {
            write!(f, " ack {}", self.ack_number.0)?;
        }
        write!(f, " win {}", self.window_len)?;
        if let Some(mss) = self.max_seg_size {
            write!(f, " mss {mss}")?;
        }
        if let Some(ws) = self.window_scale {
            write!(f, " wscale {ws}")?;
        }
        if self.sack_permitted {
            f.write_str(" sackOK")?;
        }
        if let Some(ts) = self.timestamp {
            write!(f, " TS val {} ecr {}", ts.tsval, ts.tsecr)?;
        }
        let mut blocks = self.sack_blocks.iter().flatten().peekable();
        if blocks.peek().is_some() {
            f.write_str(" sack")?;
            for b in blocks {
                write!(f, " {}:{}", b.left.0, b.right.0)?;
            }
        }
        if let Some(fo) = &self.fast_open {
            f.write_str(if fo.experimental { " FOEXP" } else { " FO" })?;
            for b in fo.cookie() {
                write!(f, "{b:02x}")?;
            }
        }
        write!(f, " len {}", self.payload.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_reads_like_tcpdump() {
        let r = TcpRepr {
            src_port: 40000,
            dst_port: 443,
            seq_number: SeqNumber(1),
            ack_number: SeqNumber(2),
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window_len: 512,
            urgent_pointer: 0,
            max_seg_size: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            sack_blocks: [
                Some(SackBlock {
                    left: SeqNumber(10),
                    right: SeqNumber(20),
                }),
                None,
                None,
                None,
            ],
            timestamp: Some(TcpTimestamp { tsval: 5, tsecr: 6 }),
            fast_open: None,
            payload: b"hi",
        };
        assert_eq!(
            r.to_string(),
            "40000 > 443 [S.] seq 1 ack 2 win 512 mss 1460 wscale 7 sackOK TS val 5 ecr 6 sack 10:20 len 2"
        );
        assert_eq!(TcpFlags::NONE.to_string(), "none");
        assert_eq!(
            (TcpFlags::FIN | TcpFlags::PSH | TcpFlags::ACK).to_string(),
            "FP."
        );
    }
}
