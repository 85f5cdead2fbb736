//! The crate-wide error type: one variant per way a packet can be malformed (or not fit).

use core::fmt;

/// Why a buffer could not be parsed (or a `Repr` could not be emitted).
///
/// Every variant names one malformed case, so a caller can count drops per reason
/// (FreeBSD-style named counters) and the malformed-input table test has one row per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before a fixed-size header (or an extension header) does.
    Truncated,
    /// The IP version nibble is not the one the parser expects.
    BadVersion,
    /// IPv4 IHL < 5, or the header it announces runs past the total length (RFC 791 §3.1).
    BadIhl,
    /// IPv4 total length smaller than the header or larger than the buffer.
    BadTotalLength,
    /// IPv6 payload length runs past the end of the buffer (RFC 8200 §3).
    BadPayloadLength,
    /// UDP length field < 8 or past the end of the buffer (RFC 768).
    BadUdpLength,
    /// TCP data offset < 5, or the header it announces runs past the end (RFC 9293 §3.1).
    BadDataOffset,
    /// An option (IPv4, TCP, NDP) has length 0 or 1, overruns its header, or has the wrong
    /// length for its kind.
    BadOptionLength,
    /// More than [`crate::ipv6::MAX_EXT_HEADERS`] IPv6 extension headers before the upper layer.
    ExtHeaderChainTooLong,
    /// A hop-by-hop options header that is not the first extension header (RFC 8200 §4.1).
    BadExtHeaderOrder,
    /// The checksum does not verify (only reported when the caller asks to verify).
    BadChecksum,
    /// A code value the message type forbids (e.g. NDP messages with code ≠ 0, RFC 4861 §7.1).
    BadCode,
    /// Well-formed, but a type/format this crate does not handle (e.g. ARP for non-Ethernet
    /// hardware, an 802.3 length field instead of an EtherType, an unknown ICMP type).
    Unsupported,
    /// Emit: the options do not fit the protocol's option space (40 bytes for TCP).
    OptionsTooLong,
    /// Emit: the destination buffer is smaller than `buffer_len()`.
    BufferTooSmall,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated header",
            Error::BadVersion => "bad IP version",
            Error::BadIhl => "bad IPv4 header length",
            Error::BadTotalLength => "bad IPv4 total length",
            Error::BadPayloadLength => "bad IPv6 payload length",
            Error::BadUdpLength => "bad UDP length",
            Error::BadDataOffset => "bad TCP data offset",
            Error::BadOptionLength => "bad option length",
            Error::ExtHeaderChainTooLong => "IPv6 extension header chain too long",
            Error::BadExtHeaderOrder => "IPv6 hop-by-hop header not first",
            Error::BadChecksum => "bad checksum",
            Error::BadCode => "bad ICMP code",
            Error::Unsupported => "unsupported packet type",
            Error::OptionsTooLong => "options do not fit",
            Error::BufferTooSmall => "buffer too small",
        };
        f.write_str(s)
    }
}

impl core::error::Error for Error {}

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;
