//! Malformed IPv4 frames for the bad-input tests, written as a pcap file for `tcpreplay`.
//!
//! Each [`Kind`] starts from a well-formed frame emitted with the `wire` crate (so everything
//! but the one defect is valid: addresses, lengths, checksums) and then breaks exactly one
//! thing. [`Kind::expected_counters`] names the rsstack drop counters that such a frame should
//! move (any one of them), so a test can check the frames were seen and counted, not just
//! survived.

use std::net::Ipv4Addr;
use std::path::Path;

use platform::pcap::PcapWriter;
use wire::checksum;
use wire::{ChecksumCaps, IpProtocol, Ipv4Packet, Ipv4Repr};

use crate::{Error, Result};

/// Where the frames go and whom they claim to come from.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The MAC of the stack under test.
    pub dst_mac: [u8; 6],
    /// The sender's MAC (the peer's interface).
    pub src_mac: [u8; 6],
    /// The address of the stack under test.
    pub dst_ip: Ipv4Addr,
    /// The peer's address (flood SYNs use random sources instead).
    pub src_ip: Ipv4Addr,
    /// A listening TCP port of the stack under test.
    pub dst_port: u16,
}

/// One kind of bad input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A bare 14-byte Ethernet header whose 802.3 length field claims 1,500 bytes of payload
    /// (a packet socket will not send fewer than 14 bytes, so this is the shortest frame
    /// that reaches the stack).
    TruncatedEthernet,
    /// An IPv4 EtherType followed by 10 bytes of header.
    TruncatedIpv4,
    /// IPv4 header whose total length claims more bytes than the frame holds.
    Ipv4LengthBeyondFrame,
    /// A TCP SYN whose IPv4 header checksum is wrong.
    BadIpv4Checksum,
    /// A valid IPv4 packet carrying 12 bytes of TCP header.
    TruncatedTcp,
    /// A TCP SYN to the listening port with a wrong TCP checksum.
    BadTcpChecksum,
    /// TCP SYNs with broken options: a zero option length, an MSS of length 3, an option
    /// running past the header.
    BadTcpOptions,
    /// A SYN with FIN also set (RFC 9293 leaves it undefined; Linux discards it).
    SynFin,
    /// Two fragments of one ICMP echo datagram whose byte ranges overlap (RFC 5722 says drop
    /// the whole datagram).
    OverlappingFragments,
    /// Valid SYNs to the listening port from random sources in 198.18.0.0/15 (RFC 2544's
    /// benchmark range, never routed) and random ports.
    SynFlood,
}

impl Kind {
    /// Every kind, in the order a test sends them.
    pub const ALL: [Kind; 10] = [
        Kind::TruncatedEthernet,
        Kind::TruncatedIpv4,
        Kind::Ipv4LengthBeyondFrame,
        Kind::BadIpv4Checksum,
        Kind::TruncatedTcp,
        Kind::BadTcpChecksum,
        Kind::BadTcpOptions,
        Kind::SynFin,
        Kind::OverlappingFragments,
        Kind::SynFlood,
    ];

    /// rsstack counters of which at least one must move when frames of this kind arrive:
    /// `stack::Counters` names, and for frames whose structure is broken also the NIC
    /// model's `rx_drop_malformed` (`nic::QueueCounters`), which may catch them before the
    /// stack sees them. Empty when the frame is not necessarily a drop (a SYN+FIN may be
    /// taken as a SYN).
    pub fn expected_counters(self) -> &'static [&'static str] {
        match self {
            Kind::TruncatedEthernet => &["rx_drop_malformed_eth", "rx_drop_malformed"],
            Kind::TruncatedIpv4 | Kind::Ipv4LengthBeyondFrame => {
                &["rx_drop_ipv4_malformed", "rx_drop_malformed"]
            }
            Kind::BadIpv4Checksum => &["rx_drop_ipv4_bad_checksum"],
            Kind::TruncatedTcp | Kind::BadTcpOptions => {
                &["rx_drop_tcp_malformed", "rx_drop_malformed"]
            }
            Kind::BadTcpChecksum => &["rx_drop_tcp_malformed"],
            Kind::SynFin => &[],
            Kind::OverlappingFragments => &["rx_drop_reasm_overlap"],
            Kind::SynFlood => &["tcp_syn_cookies_sent", "tcp_listen_backlog_full"],
        }
    }

    /// `count` frames of this kind (for [`Kind::OverlappingFragments`], `count` datagrams of
    /// two fragments each). `seed` varies ports, sequence numbers and flood sources.
    pub fn frames(self, t: &Target, count: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut rng = XorShift(seed | 1);
        let mut out = Vec::with_capacity(count * 2);
        for i in 0..count {
            let sport = 20_000 + (rng.next() % 40_000) as u16;
            let seq = rng.next() as u32;
            let ident = i as u16;
            match self {
                Kind::TruncatedEthernet => {
                    let mut f = Vec::with_capacity(ETH_LEN);
                    f.extend_from_slice(&t.dst_mac);
                    f.extend_from_slice(&t.src_mac);
                    f.extend_from_slice(&1500u16.to_be_bytes());
                    out.push(f);
                }
                Kind::TruncatedIpv4 => {
                    let mut f = syn(t, t.src_ip, sport, seq, ident, 0x02, &[]);
                    f.truncate(ETH_LEN + 10);
                    out.push(f);
                }
                Kind::Ipv4LengthBeyondFrame => {
                    let mut f = syn(t, t.src_ip, sport, seq, ident, 0x02, &[]);
                    // Total length 1000 in a 54-byte frame; the header checksum still verifies.
                    f[ETH_LEN + 2..ETH_LEN + 4].copy_from_slice(&1000u16.to_be_bytes());
                    refill_ipv4_checksum(&mut f);
                    out.push(f);
                }
                Kind::BadIpv4Checksum => {
                    let mut f = syn(t, t.src_ip, sport, seq, ident, 0x02, &[]);
                    f[ETH_LEN + 10] ^= 0x5a;
                    out.push(f);
                }
                Kind::TruncatedTcp => {
                    let tcp = tcp_header(t, t.src_ip, sport, seq, 0x02, &[]);
                    out.push(frame(t, t.src_ip, ident, &tcp[..12], false, 0));
                }
                Kind::BadTcpChecksum => {
                    let mut f = syn(t, t.src_ip, sport, seq, ident, 0x02, &[]);
                    f[ETH_LEN + 20 + 16] ^= 0xa5;
                    out.push(f);
                }
                Kind::BadTcpOptions => {
                    let opts: &[u8] = match i % 3 {
                        0 => &[2, 0, 0, 0],              // MSS kind with length 0
                        1 => &[2, 3, 5, 0],              // MSS with length 3
                        _ => &[1, 1, 8, 10, 0, 0, 0, 0], // timestamp of length 10 in 6 bytes
                    };
                    out.push(syn(t, t.src_ip, sport, seq, ident, 0x02, opts));
                }
                Kind::SynFin => out.push(syn(t, t.src_ip, sport, seq, ident, 0x03, &[])),
                Kind::OverlappingFragments => {
                    // ICMP echo request of 8 + 40 bytes: fragment A holds bytes 0..32, B holds
                    // 24..48 — bytes 24..32 are in both.
                    let mut icmp = vec![0u8; 48];
                    icmp[0] = 8;
                    icmp[4..6].copy_from_slice(&0x7273u16.to_be_bytes());
                    icmp[6..8].copy_from_slice(&ident.to_be_bytes());
                    for (j, b) in icmp[8..].iter_mut().enumerate() {
                        *b = j as u8;
                    }
                    let c = checksum::finish(checksum::sum(&icmp));
                    icmp[2..4].copy_from_slice(&c.to_be_bytes());
                    let id = 0x4000 | ident;
                    out.push(fragment(t, id, &icmp[..32], true, 0));
                    out.push(fragment(t, id, &icmp[24..], false, 24));
                }
                Kind::SynFlood => {
                    let r = rng.next();
                    let src =
                        Ipv4Addr::new(198, 18 + ((r >> 16) & 1) as u8, (r >> 8) as u8, r as u8);
                    let src = if src.octets()[3] == 0 || src.octets()[3] == 255 {
                        Ipv4Addr::new(198, 18, 0, 1)
                    } else {
                        src
                    };
                    let mss = [2, 4, 0x05, 0xb4];
                    out.push(syn(t, src, sport, seq, ident, 0x02, &mss));
                }
            }
        }
        out
    }
}

/// Writes `frames` to a pcap file (Ethernet link type), one microsecond apart.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<()> {
    let io_err = |source| Error::Io {
        what: format!("write {}", path.display()),
        source,
    };
    let file = std::fs::File::create(path).map_err(io_err)?;
    let mut w = PcapWriter::new(std::io::BufWriter::new(file)).map_err(io_err)?;
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(1_000 * i as u64, f).map_err(io_err)?;
    }
    w.into_inner().map_err(io_err)?;
    Ok(())
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

const ETH_LEN: usize = 14;

/// xorshift64: test data only.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A TCP header (20 bytes + `options`, padded to 4) with a correct checksum and no payload.
fn tcp_header(
    t: &Target,
    src: Ipv4Addr,
    sport: u16,
    seq: u32,
    flags: u8,
    options: &[u8],
) -> Vec<u8> {
    let opt_len = options.len().div_ceil(4) * 4;
    let mut h = vec![0u8; 20 + opt_len];
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&t.dst_port.to_be_bytes());
    h[4..8].copy_from_slice(&seq.to_be_bytes());
    h[12] = ((h.len() / 4) as u8) << 4;
    h[13] = flags;
    h[14..16].copy_from_slice(&64_240u16.to_be_bytes());
    h[20..20 + options.len()].copy_from_slice(options);
    let ph = checksum::pseudo_header_v4(src, t.dst_ip, IpProtocol::TCP.0, h.len() as u32);
    let c = checksum::finish(checksum::combine(&[ph, checksum::sum(&h)]));
    h[16..18].copy_from_slice(&c.to_be_bytes());
    h
}

/// Ethernet + IPv4 (emitted by `wire`, checksum filled) + `payload`.
fn frame(
    t: &Target,
    src: Ipv4Addr,
    ident: u16,
    payload: &[u8],
    more_frags: bool,
    offset: u16,
) -> Vec<u8> {
    frame_proto(t, src, IpProtocol::TCP, ident, payload, more_frags, offset)
}

fn frame_proto(
    t: &Target,
    src: Ipv4Addr,
    protocol: IpProtocol,
    ident: u16,
    payload: &[u8],
    more_frags: bool,
    offset: u16,
) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: src,
        dst_addr: t.dst_ip,
        protocol,
        payload_len: payload.len(),
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident,
        dont_frag: false,
        more_frags,
        frag_offset_bytes: offset,
    };
    let mut f = vec![0u8; ETH_LEN + repr.buffer_len()];
    f[0..6].copy_from_slice(&t.dst_mac);
    f[6..12].copy_from_slice(&t.src_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let mut ip = Ipv4Packet::new_unchecked(&mut f[ETH_LEN..]);
    // The buffer is sized from the repr, so emit cannot fail; a failure would show as a
    // zeroed header the stack counts as malformed.
    let _ = repr.emit(&mut ip, ChecksumCaps::ALL);
    f[ETH_LEN + 20..].copy_from_slice(payload);
    f
}

/// A SYN-like segment (flags as given) from `src` to the target's listening port.
fn syn(
    t: &Target,
    src: Ipv4Addr,
    sport: u16,
    seq: u32,
    ident: u16,
    flags: u8,
    options: &[u8],
) -> Vec<u8> {
    let tcp = tcp_header(t, src, sport, seq, flags, options);
    frame(t, src, ident, &tcp, false, 0)
}

/// One IPv4 fragment of an ICMP datagram from the target's peer.
fn fragment(t: &Target, ident: u16, part: &[u8], more_frags: bool, offset: u16) -> Vec<u8> {
    frame_proto(
        t,
        t.src_ip,
        IpProtocol::ICMP,
        ident,
        part,
        more_frags,
        offset,
    )
}

/// Recomputes the IPv4 header checksum after a header edit.
fn refill_ipv4_checksum(f: &mut [u8]) {
    f[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&[0, 0]);
    let c = checksum::finish(checksum::sum(&f[ETH_LEN..ETH_LEN + 20]));
    f[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::{EthernetFrame, TcpPacket, TcpRepr};

    fn target() -> Target {
        Target {
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_ip: Ipv4Addr::new(10, 77, 0, 2),
            src_ip: Ipv4Addr::new(10, 77, 0, 1),
            dst_port: 80,
        }
    }

    fn parse_tcp(f: &[u8]) -> wire::Result<(Ipv4Repr, bool)> {
        let eth = EthernetFrame::new_checked(f)?;
        let ip = Ipv4Packet::new_checked(eth.payload())?;
        let repr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL)?;
        let pair = wire::IpPair::V4 {
            src: repr.src_addr,
            dst: repr.dst_addr,
        };
        let tcp = TcpPacket::new_checked(ip.payload())?;
        let seg = TcpRepr::parse(&tcp, &pair, ChecksumCaps::ALL)?;
        Ok((repr, seg.flags.contains(wire::TcpFlags::SYN)))
    }

    #[test]
    fn the_base_syn_is_valid_so_each_kind_breaks_exactly_its_own_defect() {
        let t = target();
        let f = syn(&t, t.src_ip, 1234, 1, 7, 0x02, &[2, 4, 5, 0xb4]);
        let (ip, is_syn) = parse_tcp(&f).unwrap();
        assert!(is_syn);
        assert_eq!(ip.dst_addr, t.dst_ip);
        for f in Kind::SynFlood.frames(&t, 50, 9) {
            let (ip, is_syn) = parse_tcp(&f).unwrap();
            assert!(is_syn);
            assert_eq!(ip.src_addr.octets()[0], 198);
        }
    }

    #[test]
    fn every_broken_kind_fails_the_wire_parser() {
        let t = target();
        for kind in [
            Kind::TruncatedEthernet,
            Kind::TruncatedIpv4,
            Kind::Ipv4LengthBeyondFrame,
            Kind::BadIpv4Checksum,
            Kind::TruncatedTcp,
            Kind::BadTcpChecksum,
            Kind::BadTcpOptions,
        ] {
            for f in kind.frames(&t, 6, 3) {
                assert!(parse_tcp(&f).is_err(), "{kind:?} parsed: {f:02x?}");
            }
        }
    }

    #[test]
    fn overlapping_fragments_overlap_and_share_an_ident() {
        let frames = Kind::OverlappingFragments.frames(&target(), 2, 1);
        assert_eq!(frames.len(), 4);
        let a = Ipv4Packet::new_checked(&frames[0][ETH_LEN..]).unwrap();
        let b = Ipv4Packet::new_checked(&frames[1][ETH_LEN..]).unwrap();
        assert!(a.verify_checksum() && b.verify_checksum());
        assert_eq!(a.ident(), b.ident());
        assert!(a.more_frags() && !b.more_frags());
        let a_end = a.frag_offset_bytes() as usize + a.payload().len();
        assert!(usize::from(b.frag_offset_bytes()) < a_end);
    }

    #[test]
    fn pcap_holds_every_frame() {
        let dir = crate::TempDir::new("unit").unwrap();
        let p = dir.join("f.pcap");
        let frames = Kind::SynFin.frames(&target(), 5, 1);
        write_pcap(&p, &frames).unwrap();
        let r = platform::pcap::PcapReader::new(std::fs::File::open(&p).unwrap()).unwrap();
        let back: Vec<Vec<u8>> = r.map(|rec| rec.unwrap().data).collect();
        assert_eq!(back, frames);
    }

    #[test]
    fn mac_parsing_accepts_six_hex_bytes_only() {
        assert_eq!(parse_mac("02:00:0a:ff:00:01"), Some([2, 0, 10, 255, 0, 1]));
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:07"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:00:01"), None);
    }
}
