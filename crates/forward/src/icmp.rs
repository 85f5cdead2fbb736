//! ICMP errors a router originates (RFC 1812 §4.3, RFC 4443 §3), built in place in the
//! offending frame's buffer, and the token bucket that limits them.
//!
//! In place: the quoted bytes (the offending IP packet from its header on) move right by the
//! new headers' length, then the Ethernet, IP and ICMP headers are written in front. The
//! buffer must hold the error (its capacity is asked, never grown); nothing is allocated.
use core::net::{Ipv4Addr, Ipv6Addr};

use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, Icmpv4Packet, Icmpv4Repr,
    Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
};

use crate::FrameBuf;

/// Ethernet header (the forwarder's ports are untagged).
pub(crate) const ETH_LEN: usize = 14;
/// IPv4 header + ICMP header in front of the quote.
const V4_HEADERS: usize = 20 + 8;
/// IPv6 header + ICMPv6 header in front of the quote.
const V6_HEADERS: usize = 40 + 8;
/// RFC 1812 §4.3.2.3: an ICMPv4 error quotes as much as fits in 576 bytes of IP datagram.
pub const ICMPV4_ERROR_MAX_BYTES: usize = 576;
/// RFC 4443 §2.4(c): an ICMPv6 error must not exceed the minimum IPv6 MTU.
pub const ICMPV6_ERROR_MAX_BYTES: usize = 1280;
/// RFC 792: a quote holds at least the header and the first 64 bits of data.
const QUOTE_DATA_MIN: usize = 8;
/// DSCP CS6 (internetwork control), the class RFC 1812 §4.3.2.5 gives ICMP errors.
const DSCP_CS6: u8 = 48;

/// The error to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IcmpKind {
    /// TTL / hop limit exceeded in transit (code 0).
    TimeExceeded,
    /// Destination unreachable, net unreachable (v4 code 0) / no route (v6 code 0).
    NoRoute,
    /// Fragmentation needed and DF set (v4) / packet too big (v6), with the next-hop MTU.
    TooBig { mtu_bytes: u16 },
}

/// A token bucket: `rate_per_s` tokens a second, at most `burst` banked; starts full.
/// Integer arithmetic in thousandths of a token, so no token is lost to rounding.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Invariant: ≤ `burst × 1000`.
    tokens_milli: u64,
    refill_ns: u64,
    rate_per_s: u32,
    burst: u32,
}

impl TokenBucket {
    pub fn new(rate_per_s: u32, burst: u32) -> TokenBucket {
        TokenBucket {
            tokens_milli: u64::from(burst) * 1000,
            refill_ns: 0,
            rate_per_s,
            burst,
        }
    }

    /// Takes one token if there is one at `now_ns`.
    pub fn take(&mut self, now_ns: u64) -> bool {
        let cap = u64::from(self.burst) * 1000;
        let elapsed_ns = now_ns.saturating_sub(self.refill_ns);
        // thousandths = elapsed_s × rate × 1000 = elapsed_ns × rate / 1e6
        let add = elapsed_ns.saturating_mul(u64::from(self.rate_per_s)) / 1_000_000;
        if add > 0 {
            let tokens = self.tokens_milli.saturating_add(add);
            if tokens >= cap {
                self.tokens_milli = cap;
                self.refill_ns = now_ns;
            } else {
                self.tokens_milli = tokens;
                // Advance by exactly the time those thousandths took, so the remainder of
                // `elapsed_ns` is not lost to rounding.
                self.refill_ns += add * 1_000_000 / u64::from(self.rate_per_s);
            }
        }
        if self.tokens_milli >= 1000 {
            self.tokens_milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// RFC 1812 §4.3.2.7 / RFC 792: never an error about an ICMP error (types 3, 4, 5, 11, 12)
/// nor about a non-first fragment. `ip` is a checked IPv4 packet.
pub(crate) fn v4_error_allowed(ip: &Ipv4Packet<&[u8]>) -> bool {
    if ip.frag_offset_bytes() != 0 {
        return false;
    }
    if ip.protocol() == IpProtocol::ICMP {
        return matches!(ip.payload().first(), Some(t) if !matches!(t, 3 | 4 | 5 | 11 | 12));
    }
    true
}

/// RFC 4443 §2.4(e): never an error about an ICMPv6 error (types < 128). Also refused when the
/// extension-header chain cannot be walked (the upper layer is unknown).
pub(crate) fn v6_error_allowed(ip: &Ipv6Packet<&[u8]>) -> bool {
    let Ok(walk) = ip.walk_ext_headers() else {
        return false;
    };
    if walk.upper_protocol != IpProtocol::ICMPV6 {
        return true;
    }
    if walk.fragment.is_some_and(|f| f.offset_bytes != 0) {
        // A non-first fragment carries no ICMPv6 header to look at.
        return true;
    }
    let bytes: &[u8] = ip.clone().into_inner();
    matches!(bytes.get(walk.upper_offset), Some(&t) if t >= 128)
}

/// What differs between an ICMPv4 and an ICMPv6 error, by the address type of the family:
/// the forwarder's error path ([`crate::Forwarder`]) is written once over it.
pub(crate) trait ErrorFamily: Copy + Into<core::net::IpAddr> {
    /// Whether an error may be sent about the (checked) packet in `frame`, and its source.
    fn about<F: FrameBuf>(frame: &F) -> (bool, Self);
    /// The router's address of this family on the egress port, if it has one.
    fn ours(v4: Option<Ipv4Addr>, v6: Option<Ipv6Addr>) -> Option<Self>;
    /// See [`quote_v4`] and [`quote_v6`].
    fn quote<F: FrameBuf>(frame: &F, mtu_bytes: u16) -> Option<usize>;
    /// See [`build_v4`] and [`build_v6`]; `ident` is the IPv4 identification (IPv6 has none).
    fn build<F: FrameBuf>(
        frame: &mut F,
        kind: IcmpKind,
        route: &ErrorRoute<Self>,
        ident: u16,
        quote: usize,
    ) -> bool;
}

impl ErrorFamily for Ipv4Addr {
    fn about<F: FrameBuf>(frame: &F) -> (bool, Self) {
        let ip = Ipv4Packet::new_unchecked(frame.frame().get(ETH_LEN..).unwrap_or(&[]));
        (v4_error_allowed(&ip), ip.src_addr())
    }
    fn ours(v4: Option<Ipv4Addr>, _: Option<Ipv6Addr>) -> Option<Self> {
        v4
    }
    fn quote<F: FrameBuf>(frame: &F, mtu_bytes: u16) -> Option<usize> {
        quote_v4(frame, mtu_bytes)
    }
    fn build<F: FrameBuf>(
        frame: &mut F,
        kind: IcmpKind,
        route: &ErrorRoute<Self>,
        ident: u16,
        quote: usize,
    ) -> bool {
        build_v4(frame, kind, route, ident, quote)
    }
}

impl ErrorFamily for Ipv6Addr {
    fn about<F: FrameBuf>(frame: &F) -> (bool, Self) {
        let ip = Ipv6Packet::new_unchecked(frame.frame().get(ETH_LEN..).unwrap_or(&[]));
        (v6_error_allowed(&ip), ip.src_addr())
    }
    fn ours(_: Option<Ipv4Addr>, v6: Option<Ipv6Addr>) -> Option<Self> {
        v6
    }
    fn quote<F: FrameBuf>(frame: &F, mtu_bytes: u16) -> Option<usize> {
        quote_v6(frame, mtu_bytes)
    }
    fn build<F: FrameBuf>(
        frame: &mut F,
        kind: IcmpKind,
        route: &ErrorRoute<Self>,
        _ident: u16,
        quote: usize,
    ) -> bool {
        build_v6(frame, kind, route, quote)
    }
}

/// Where and from what the error goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorRoute<A> {
    pub(crate) src_mac: EthernetAddress,
    pub(crate) dst_mac: EthernetAddress,
    /// The router's address the error is sent from.
    pub(crate) src: A,
    /// The offending packet's source.
    pub(crate) dst: A,
    pub(crate) hop_limit: u8,
}

/// Quote length for an error whose headers take `headers` bytes: as much of the IP packet
/// (`ip_len` bytes) as the message size limit, the egress MTU and the buffer allow; `None`
/// when not even the header and 8 bytes fit (`ip_header_len` is the quoted header's length).
fn quote_len(
    ip_len: usize,
    ip_header_len: usize,
    headers: usize,
    message_max: usize,
    mtu_bytes: u16,
    capacity_bytes: usize,
) -> Option<usize> {
    let q = ip_len
        .min(message_max - headers)
        .min(usize::from(mtu_bytes).saturating_sub(headers))
        .min(capacity_bytes.saturating_sub(ETH_LEN + headers));
    (q >= (ip_header_len + QUOTE_DATA_MIN).min(ip_len)).then_some(q)
}

/// Moves the first `quote` bytes of the IP packet right by `headers` and sets the frame
/// length to the error's. Returns the frame length, `None` (nothing moved) when the buffer
/// did not take the length its capacity promised.
fn make_room<F: FrameBuf>(frame: &mut F, headers: usize, quote: usize) -> Option<usize> {
    let need = ETH_LEN + headers + quote;
    if need > frame.frame().len() {
        frame.set_len(need);
    }
    let buf = frame.frame_mut();
    if buf.len() < need {
        return None;
    }
    buf.copy_within(ETH_LEN..ETH_LEN + quote, ETH_LEN + headers);
    frame.set_len(need);
    (frame.frame().len() == need).then_some(need)
}

/// How many bytes of the (checked) IPv4 packet in `frame` an error leaving through a link of
/// `mtu_bytes` quotes; `None` when the buffer cannot hold a useful quote.
pub(crate) fn quote_v4<F: FrameBuf>(frame: &F, mtu_bytes: u16) -> Option<usize> {
    let ip = Ipv4Packet::new_unchecked(frame.frame().get(ETH_LEN..).unwrap_or(&[]));
    quote_len(
        usize::from(ip.total_len()),
        ip.header_len(),
        V4_HEADERS,
        ICMPV4_ERROR_MAX_BYTES,
        mtu_bytes,
        frame.capacity_bytes(),
    )
}

/// How many bytes of the (checked) IPv6 packet in `frame` an error quotes; see [`quote_v4`].
pub(crate) fn quote_v6<F: FrameBuf>(frame: &F, mtu_bytes: u16) -> Option<usize> {
    let ip = Ipv6Packet::new_unchecked(frame.frame().get(ETH_LEN..).unwrap_or(&[]));
    quote_len(
        40 + usize::from(ip.payload_len()),
        40,
        V6_HEADERS,
        ICMPV6_ERROR_MAX_BYTES,
        mtu_bytes,
        frame.capacity_bytes(),
    )
}

/// Replaces the IPv4 packet in `frame` by an ICMPv4 error about it quoting `quote` bytes
/// (from [`quote_v4`]). `false` (frame unchanged) when the buffer did not take the length.
pub(crate) fn build_v4<F: FrameBuf>(
    frame: &mut F,
    kind: IcmpKind,
    route: &ErrorRoute<Ipv4Addr>,
    ident: u16,
    quote: usize,
) -> bool {
    let Some(end) = make_room(frame, V4_HEADERS, quote) else {
        return false;
    };
    let buf = frame.frame_mut();
    write_eth(buf, route.src_mac, route.dst_mac, EtherType::IPV4);
    let ip = Ipv4Repr {
        src_addr: route.src,
        dst_addr: route.dst,
        protocol: IpProtocol::ICMP,
        payload_len: 8 + quote,
        hop_limit: route.hop_limit,
        dscp: DSCP_CS6,
        ecn: 0,
        ident,
        dont_frag: false,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let icmp_off = ETH_LEN + 20;
    let header_ok = ip
        .emit(
            &mut Ipv4Packet::new_unchecked(&mut buf[ETH_LEN..icmp_off]),
            ChecksumCaps::ALL,
        )
        .is_ok();
    let repr = match kind {
        IcmpKind::TimeExceeded => Icmpv4Repr::TimeExceeded { code: 0, data: &[] },
        IcmpKind::NoRoute => Icmpv4Repr::DstUnreachable { code: 0, data: &[] },
        IcmpKind::TooBig { mtu_bytes } => Icmpv4Repr::FragNeeded {
            next_hop_mtu: mtu_bytes,
            data: &[],
        },
    };
    let icmp_ok = repr
        .emit(
            &mut Icmpv4Packet::new_unchecked(&mut buf[icmp_off..icmp_off + 8]),
            ChecksumCaps::NONE,
        )
        .is_ok();
    Icmpv4Packet::new_unchecked(&mut buf[icmp_off..end]).fill_checksum();
    debug_assert!(header_ok && icmp_ok, "headers fit by construction");
    true
}

/// Replaces the IPv6 packet in `frame` by an ICMPv6 error about it quoting `quote` bytes
/// (from [`quote_v6`]). `false` (frame unchanged) when the buffer did not take the length.
pub(crate) fn build_v6<F: FrameBuf>(
    frame: &mut F,
    kind: IcmpKind,
    route: &ErrorRoute<Ipv6Addr>,
    quote: usize,
) -> bool {
    let Some(end) = make_room(frame, V6_HEADERS, quote) else {
        return false;
    };
    let buf = frame.frame_mut();
    write_eth(buf, route.src_mac, route.dst_mac, EtherType::IPV6);
    let ip = Ipv6Repr {
        src_addr: route.src,
        dst_addr: route.dst,
        next_header: IpProtocol::ICMPV6,
        payload_len: 8 + quote,
        hop_limit: route.hop_limit,
        traffic_class: DSCP_CS6 << 2,
        flow_label: 0,
        ext_headers: [None; wire::MAX_EXT_HEADERS],
    };
    let icmp_off = ETH_LEN + 40;
    let header_ok = ip
        .emit(&mut Ipv6Packet::new_unchecked(&mut buf[ETH_LEN..icmp_off]))
        .is_ok();
    let repr = match kind {
        IcmpKind::TimeExceeded => Icmpv6Repr::TimeExceeded { code: 0, data: &[] },
        IcmpKind::NoRoute => Icmpv6Repr::DstUnreachable { code: 0, data: &[] },
        IcmpKind::TooBig { mtu_bytes } => Icmpv6Repr::PacketTooBig {
            mtu: u32::from(mtu_bytes),
            data: &[],
        },
    };
    let icmp_ok = repr
        .emit(
            &mut Icmpv6Packet::new_unchecked(&mut buf[icmp_off..icmp_off + 8]),
            route.src,
            route.dst,
            ChecksumCaps::NONE,
        )
        .is_ok();
    Icmpv6Packet::new_unchecked(&mut buf[icmp_off..end]).fill_checksum(route.src, route.dst);
    debug_assert!(header_ok && icmp_ok, "headers fit by construction");
    true
}

fn write_eth(buf: &mut [u8], src: EthernetAddress, dst: EthernetAddress, ethertype: EtherType) {
    let mut eth = EthernetFrame::new_unchecked(buf);
    eth.set_dst_addr(dst);
    eth.set_src_addr(src);
    eth.set_outer_ethertype(ethertype);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_allows_a_burst_then_the_rate() {
        let mut b = TokenBucket::new(10, 3);
        assert!((0..3).all(|_| b.take(0)));
        assert!(!b.take(0));
        assert!(!b.take(99_999_999), "0.1 s minus 1 ns is not yet one token");
        assert!(b.take(100_000_000));
        assert!(!b.take(100_000_000));
        assert!(
            (0..3).all(|_| b.take(10_000_000_000)),
            "refills up to the burst"
        );
        assert!(!b.take(10_000_000_000));
    }
}
