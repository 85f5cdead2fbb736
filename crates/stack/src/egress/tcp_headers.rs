//! Writing the Ethernet, IP and TCP headers of a TCP frame in front of its payload, which
//! already sits in the frame: the general writer (through `wire`'s `Repr`s and emitters, every
//! option, both families, both option layouts) and the fixed-layout writer for the segment an
//! established connection sends most (IPv4, no options or timestamps alone), which stores the
//! header bytes at fixed offsets with no `Repr` in between.
//!
//! Invariant: for every input the fixed-layout writer accepts, it writes exactly the bytes the
//! general writer writes (`fast_writer_matches_the_general_one` below checks it over random
//! headers, payloads, both layouts and both checksum settings); it refuses everything else.

use wire::checksum;
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpPair, IpProtocol,
    Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpOptionLayout, TcpPacket, TcpRepr,
};

use super::{ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, TcpIpFields};

/// What a TCP frame's headers hold besides the TCP header itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameHeaders {
    pub(crate) src_mac: EthernetAddress,
    pub(crate) dst_mac: EthernetAddress,
    pub(crate) pair: IpPair,
    /// IPv4 identification (ignored for IPv6).
    pub(crate) ident: u16,
    pub(crate) hop_limit: u8,
    pub(crate) ip: TcpIpFields,
    /// `fill_tx` for the TCP checksum: false leaves the pseudo-header sum (partial checksum
    /// for the device to complete).
    pub(crate) tcp_caps: ChecksumCaps,
    /// `fill_tx` for the IPv4 header checksum: false writes zero.
    pub(crate) ip_caps: ChecksumCaps,
}

impl FrameHeaders {
    /// The TCP checksum's capabilities for a frame: the device's `checksums`, with the sum
    /// left partial (pseudo-header only, for the device to complete) when `partial`.
    pub(crate) fn tcp_caps_for(checksums: ChecksumCaps, partial: bool) -> ChecksumCaps {
        if partial {
            ChecksumCaps {
                fill_tx: false,
                ..checksums
            }
        } else {
            checksums
        }
    }
}

/// Bytes of the fixed-layout headers with timestamps: Ethernet, IPv4, TCP with NOP NOP TS.
const TS_HEADERS_LEN: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + 20 + 12;

/// Writes the headers of `tcp` (whose `payload` is empty; the frame's payload is the
/// `frame.len() - headers` bytes after them) into `frame`, in `layout`. False when an emitter
/// refused (sizes): the frame is then not to be sent.
pub(crate) fn write_headers(
    frame: &mut [u8],
    h: &FrameHeaders,
    tcp: &TcpRepr<'static>,
    layout: TcpOptionLayout,
) -> bool {
    match write_fixed_v4(frame, h, tcp) {
        Some(ok) => ok,
        None => write_general(frame, h, tcp, layout),
    }
}

/// The general writer: clears the header bytes (a reused buffer holds old ones, and the
/// emitters leave reserved bits and padding alone), then emits TCP, IP and Ethernet through
/// `wire`.
pub(crate) fn write_general(
    frame: &mut [u8],
    h: &FrameHeaders,
    tcp: &TcpRepr<'static>,
    layout: TcpOptionLayout,
) -> bool {
    let ip_len = match h.pair {
        IpPair::V4 { .. } => IPV4_HEADER_LEN,
        IpPair::V6 { .. } => super::IPV6_HEADER_LEN,
    };
    let tcp_at = ETHERNET_HEADER_LEN + ip_len;
    let tcp_len = tcp.header_len_in(layout);
    if let Some(head) = frame.get_mut(..tcp_at + tcp_len) {
        head.fill(0);
    }
    let Some(tcp_bytes) = frame.get_mut(tcp_at..) else {
        return false;
    };
    let ip_payload_len = tcp_bytes.len();
    if tcp
        .emit_in(
            &mut TcpPacket::new_unchecked(tcp_bytes),
            &h.pair,
            h.tcp_caps,
            layout,
        )
        .is_err()
    {
        return false;
    }
    let Some(ip_bytes) = frame.get_mut(ETHERNET_HEADER_LEN..) else {
        return false;
    };
    let (ip_ok, ethertype) = match h.pair {
        IpPair::V4 { src, dst } => {
            let repr = Ipv4Repr {
                src_addr: src,
                dst_addr: dst,
                protocol: IpProtocol::TCP,
                payload_len: ip_payload_len,
                hop_limit: h.hop_limit,
                dscp: h.ip.tos >> 2,
                ecn: h.ip.ecn.bits(),
                ident: h.ident,
                dont_frag: h.ip.dont_frag,
                more_frags: false,
                frag_offset_bytes: 0,
            };
            let ok = repr
                .emit(&mut Ipv4Packet::new_unchecked(ip_bytes), h.ip_caps)
                .is_ok();
            (ok, EtherType::IPV4)
        }
        IpPair::V6 { src, dst } => {
            let repr = Ipv6Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: IpProtocol::TCP,
                payload_len: ip_payload_len,
                hop_limit: h.hop_limit,
                traffic_class: h.ip.ecn.bits(),
                flow_label: 0,
                ext_headers: [None; wire::MAX_EXT_HEADERS],
            };
            let ok = repr.emit(&mut Ipv6Packet::new_unchecked(ip_bytes)).is_ok();
            (ok, EtherType::IPV6)
        }
    };
    let eth = EthernetRepr {
        src_addr: h.src_mac,
        dst_addr: h.dst_mac,
        vlan: None,
        ethertype,
    };
    ip_ok && eth.emit(&mut EthernetFrame::new_unchecked(frame)).is_ok()
}

/// The fixed-layout writer: an IPv4 segment whose only option is the timestamp, or that has
/// none (every segment of an established connection but those carrying SACK blocks). Both
/// option layouts write such a header alike (NOP NOP TS). `None`: not this shape, use
/// [`write_general`]; `Some(false)`: the frame is too short or too long.
pub(crate) fn write_fixed_v4(
    frame: &mut [u8],
    h: &FrameHeaders,
    tcp: &TcpRepr<'static>,
) -> Option<bool> {
    let IpPair::V4 { src, dst } = h.pair else {
        return None;
    };
    if tcp.max_seg_size.is_some()
        || tcp.window_scale.is_some()
        || tcp.sack_permitted
        || tcp.sack_blocks.iter().any(Option::is_some)
        || tcp.fast_open.is_some()
    {
        return None;
    }
    let tcp_header_len = if tcp.timestamp.is_some() { 32 } else { 20 };
    let headers_len = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + tcp_header_len;
    let tcp_len = frame
        .len()
        .checked_sub(ETHERNET_HEADER_LEN + IPV4_HEADER_LEN)?;
    if frame.len() < headers_len {
        return Some(false);
    }
    let Ok(total_len) = u16::try_from(IPV4_HEADER_LEN + tcp_len) else {
        return Some(false);
    };
    let (head, _) = frame.split_at_mut(ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + 20);
    let Ok(b): Result<&mut [u8; ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + 20], _> = head.try_into()
    else {
        return Some(false);
    };
    // Ethernet.
    b[0..6].copy_from_slice(&h.dst_mac.0);
    b[6..12].copy_from_slice(&h.src_mac.0);
    b[12..14].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
    // IPv4: version 4, IHL 5; TOS = DSCP bits of IP_TOS with the ECN codepoint.
    b[14] = 0x45;
    b[15] = (h.ip.tos & !0x03) | (h.ip.ecn.bits() & 0x03);
    b[16..18].copy_from_slice(&total_len.to_be_bytes());
    b[18..20].copy_from_slice(&h.ident.to_be_bytes());
    b[20] = if h.ip.dont_frag { 0x40 } else { 0 };
    b[21] = 0;
    b[22] = h.hop_limit;
    b[23] = IpProtocol::TCP.0;
    b[24] = 0;
    b[25] = 0;
    b[26..30].copy_from_slice(&src.octets());
    b[30..34].copy_from_slice(&dst.octets());
    // Both addresses are in the IPv4 header and in the TCP pseudo-header: summed once, as
    // native-order words (RFC 1071 §2(B): one byte swap after the fold).
    let addrs_sum = u64::from(ne32(&src.octets())) + u64::from(ne32(&dst.octets()));
    if h.ip_caps.fill_tx {
        let rest =
            u64::from(ne32(&b[14..18])) + u64::from(ne32(&b[18..22])) + u64::from(ne32(&b[22..26]));
        let ip_sum = u16::from_be(checksum::fold(addrs_sum + rest));
        b[24..26].copy_from_slice(&checksum::finish(ip_sum).to_be_bytes());
    }
    // TCP.
    b[34..36].copy_from_slice(&tcp.src_port.to_be_bytes());
    b[36..38].copy_from_slice(&tcp.dst_port.to_be_bytes());
    b[38..42].copy_from_slice(&tcp.seq_number.0.to_be_bytes());
    b[42..46].copy_from_slice(&tcp.ack_number.0.to_be_bytes());
    b[46] = ((tcp_header_len / 4) as u8) << 4;
    b[47] = tcp.flags.0;
    b[48..50].copy_from_slice(&tcp.window_len.to_be_bytes());
    b[50] = 0;
    b[51] = 0;
    b[52..54].copy_from_slice(&tcp.urgent_pointer.to_be_bytes());
    if let Some(ts) = tcp.timestamp {
        let Some(opts) = frame.get_mut(54..TS_HEADERS_LEN) else {
            return Some(false);
        };
        opts[0] = wire::tcp::kind::NOP;
        opts[1] = wire::tcp::kind::NOP;
        opts[2] = wire::tcp::kind::TIMESTAMP;
        opts[3] = 10;
        opts[4..8].copy_from_slice(&ts.tsval.to_be_bytes());
        opts[8..12].copy_from_slice(&ts.tsecr.to_be_bytes());
    }
    // The pseudo-header's other words: zero, protocol, TCP length (RFC 9293 §3.1).
    let [len_hi, len_lo] = (total_len - IPV4_HEADER_LEN as u16).to_be_bytes();
    let proto_len = u64::from(u32::from_ne_bytes([0, IpProtocol::TCP.0, len_hi, len_lo]));
    let tcp_checksum = if h.tcp_caps.fill_tx {
        let seg = frame
            .get(ETHERNET_HEADER_LEN + IPV4_HEADER_LEN..)
            .unwrap_or(&[]);
        // The segment's folded sum, back in native order, joins the pseudo-header's words:
        // one fold for both.
        let seg_sum = u64::from(checksum::sum(seg).to_be());
        checksum::finish(u16::from_be(checksum::fold(
            addrs_sum + proto_len + seg_sum,
        )))
    } else {
        u16::from_be(checksum::fold(addrs_sum + proto_len))
    };
    if let Some(c) = frame.get_mut(50..52) {
        c.copy_from_slice(&tcp_checksum.to_be_bytes());
    }
    Some(true)
}

/// Four bytes as a native-order word (the checksum sums words in either order).
#[inline(always)]
fn ne32(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    if let Some(w) = bytes.get(..4) {
        word.copy_from_slice(w);
    }
    u32::from_ne_bytes(word)
}

#[cfg(test)]
mod tests {
    use core::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;
    use wire::Ecn;
    use wire::tcp::{FastOpenOption, SackBlock, SeqNumber, TcpFlags, TcpTimestamp};

    use super::*;

    fn headers(pair: IpPair, tcp_fill: bool, ip_fill: bool) -> FrameHeaders {
        let caps = |fill_tx| ChecksumCaps {
            verify_rx: true,
            fill_tx,
        };
        FrameHeaders {
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            pair,
            ident: 0x1234,
            hop_limit: 64,
            ip: TcpIpFields::PLAIN,
            tcp_caps: caps(tcp_fill),
            ip_caps: caps(ip_fill),
        }
    }

    fn v4() -> IpPair {
        IpPair::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    fn plain_ack() -> TcpRepr<'static> {
        TcpRepr {
            timestamp: Some(TcpTimestamp { tsval: 5, tsecr: 6 }),
            ..TcpRepr::bare(80, 4000, SeqNumber(1), SeqNumber(2), TcpFlags::ACK, 100)
        }
    }

    /// A frame of `headers_len` bytes of `junk` followed by `payload`.
    fn frame_with(headers_len: usize, junk: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![junk; headers_len];
        f.extend_from_slice(payload);
        f
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The invariant of this module: the fixed-layout writer's frame is byte for byte the
        /// general writer's, over stale bytes in the buffer, for any field values, payload,
        /// option layout and checksum setting.
        #[test]
        fn fast_writer_matches_the_general_one(
            src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
            src_mac in any::<[u8; 6]>(), dst_mac in any::<[u8; 6]>(),
            ident in any::<u16>(), hop_limit in any::<u8>(), tos in any::<u8>(),
            ecn in 0u8..4, dont_frag in any::<bool>(),
            ports in any::<(u16, u16)>(), seq in any::<u32>(), ack in any::<u32>(),
            flags in any::<u8>(), window in any::<u16>(), urgent in any::<u16>(),
            ts in proptest::option::of(any::<(u32, u32)>()),
            payload in proptest::collection::vec(any::<u8>(), 0..1600),
            tcp_fill in any::<bool>(), ip_fill in any::<bool>(), bsd in any::<bool>(),
            junk in any::<u8>(),
        ) {
            let pair = IpPair::V4 { src: Ipv4Addr::from(src), dst: Ipv4Addr::from(dst) };
            let mut h = headers(pair, tcp_fill, ip_fill);
            h.src_mac = EthernetAddress(src_mac);
            h.dst_mac = EthernetAddress(dst_mac);
            h.ident = ident;
            h.hop_limit = hop_limit;
            h.ip = TcpIpFields { ecn: Ecn::from_bits(ecn), tos, dont_frag };
            let tcp = TcpRepr {
                src_port: ports.0,
                dst_port: ports.1,
                seq_number: SeqNumber(seq),
                ack_number: SeqNumber(ack),
                flags: TcpFlags(flags),
                window_len: window,
                urgent_pointer: urgent,
                timestamp: ts.map(|(tsval, tsecr)| TcpTimestamp { tsval, tsecr }),
                ..plain_ack()
            };
            let layout = if bsd { TcpOptionLayout::FreeBsd } else { TcpOptionLayout::Linux };
            let headers_len = 34 + tcp.header_len_in(layout);
            let mut general = frame_with(headers_len, junk, &payload);
            let mut fast = frame_with(headers_len, junk.wrapping_add(0x5a), &payload);
            prop_assert!(write_general(&mut general, &h, &tcp, layout));
            prop_assert_eq!(write_fixed_v4(&mut fast, &h, &tcp), Some(true));
            prop_assert_eq!(&fast, &general);
            // And the frame parses back to what was written, checksums included.
            let eth = EthernetFrame::new_checked(&general[..]).unwrap();
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            prop_assert!(!ip_fill || ip.verify_checksum());
        }
    }

    #[test]
    fn fast_writer_refuses_what_it_does_not_lay_out() {
        let mut frame = vec![0u8; 200];
        let h = headers(v4(), true, true);
        let cases: [(&str, TcpRepr<'static>); 5] = [
            (
                "mss",
                TcpRepr {
                    max_seg_size: Some(1460),
                    ..plain_ack()
                },
            ),
            (
                "window scale",
                TcpRepr {
                    window_scale: Some(7),
                    ..plain_ack()
                },
            ),
            (
                "sack permitted",
                TcpRepr {
                    sack_permitted: true,
                    ..plain_ack()
                },
            ),
            (
                "sack blocks",
                TcpRepr {
                    sack_blocks: [
                        Some(SackBlock {
                            left: SeqNumber(10),
                            right: SeqNumber(20),
                        }),
                        None,
                        None,
                        None,
                    ],
                    ..plain_ack()
                },
            ),
            (
                "fast open",
                TcpRepr {
                    fast_open: Some(FastOpenOption::request(false)),
                    ..plain_ack()
                },
            ),
        ];
        for (what, tcp) in cases {
            assert_eq!(write_fixed_v4(&mut frame, &h, &tcp), None, "{what}");
        }
        let v6 = headers(
            IpPair::V6 {
                src: Ipv6Addr::LOCALHOST,
                dst: Ipv6Addr::LOCALHOST,
            },
            true,
            true,
        );
        assert_eq!(write_fixed_v4(&mut frame, &v6, &plain_ack()), None, "ipv6");
    }

    #[test]
    fn fast_writer_refuses_frames_shorter_than_its_headers_or_past_64_kib() {
        let h = headers(v4(), true, true);
        let mut short = vec![0u8; 34 + 31];
        assert_eq!(write_fixed_v4(&mut short, &h, &plain_ack()), Some(false));
        let mut huge = vec![0u8; 34 + 65_535];
        assert_eq!(write_fixed_v4(&mut huge, &h, &plain_ack()), Some(false));
        assert!(!write_general(
            &mut huge,
            &h,
            &plain_ack(),
            TcpOptionLayout::Linux
        ));
    }
}
