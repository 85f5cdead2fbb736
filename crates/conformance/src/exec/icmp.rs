//! ICMP packet lines (`< icmp TYPE [CODE] [mtu N] [id N] [ECHOED]`), packetdrill's grammar
//! (`icmp_packet_spec`) and meaning (`new_icmp_packet`, `map_inbound_icmp_tcp_packet`):
//!
//! - TYPE and CODE are the names packetdrill knows for the run's family (ICMPv4 in IPv4 and
//!   IPv4-mapped-IPv6 mode, ICMPv6 in IPv6 mode), or `type_N` / `code_N`; no CODE is code 0.
//!   A word that is neither (`CODE` in `fastopen/server/icmp-baseline`, a symbol the script
//!   expects from packetdrill's `-D`) skips the script.
//! - `mtu N` only with IPv4 `unreachable frag_needed` (16 bits) or ICMPv6 `packet_too_big`.
//! - ECHOED says what the error quotes: `[start:end(len)]` a TCP segment of the connection
//!   under test whose sequence number is `start` in the stack's script space (packetdrill
//!   adds the stack's ISN), absent the same as `[0:0(0)]`; `[udp (N)]` and `[raw (N)]` quote
//!   UDP or nothing, which the executor does not model (skip).
//! - The error comes from the script side's address; it quotes an IP header from the stack
//!   to the script side, the first 8 bytes of the TCP header (the stack's port, the script
//!   side's port, the sequence number) and then `len` zero bytes, as packetdrill builds it.
//!
//! Outbound ICMP lines (the stack sending an error) are not modelled (skip).

use super::*;
use crate::ast::IcmpLine;

/// IPv4 unreachable codes by packetdrill's names (RFC 1700 order: the index is the code).
const V4_UNREACHABLE_CODES: [&str; 16] = [
    "net_unreachable",
    "host_unreachable",
    "protocol_unreachable",
    "port_unreachable",
    "frag_needed",
    "source_route_failed",
    "net_unknown",
    "host_unknown",
    "source_host_isolated",
    "net_prohibited",
    "host_prohibited",
    "net_unreachable_for_tos",
    "host_unreachable_for_tos",
    "packet_filtered",
    "precedence_violation",
    "precedence_cutoff",
];

/// ICMPv4 types by packetdrill's names.
const V4_TYPES: [(&str, u8); 13] = [
    ("echo_reply", 0),
    ("unreachable", 3),
    ("source_quench", 4),
    ("redirect", 5),
    ("echo_request", 8),
    ("time_exceeded", 11),
    ("parameter_problem", 12),
    ("timestamp_request", 13),
    ("timestamp_reply", 14),
    ("information_request", 15),
    ("information_reply", 16),
    ("address_mask_request", 17),
    ("address_mask_reply", 18),
];

/// Codes by name: (name, code byte).
type NamedCodes = &'static [(&'static str, u8)];

/// ICMPv6 types by packetdrill's names, with their named codes (RFC 4443; packetdrill names
/// code 0 of unreachable twice).
const V6_TYPES: [(&str, u8, NamedCodes); 6] = [
    (
        "unreachable",
        1,
        &[
            ("net_unreachable", 0),
            ("no_route", 0),
            ("admin_prohibited", 1),
            ("not_neighbour", 2),
            ("address_unreachable", 3),
            ("port_unreachable", 4),
        ],
    ),
    ("packet_too_big", 2, &[]),
    (
        "time_exceeded",
        3,
        &[("exceeded_hop_limit", 0), ("exceeded_frag_time", 1)],
    ),
    (
        "parameter_problem",
        4,
        &[
            ("header_field", 0),
            ("unknown_next_header", 1),
            ("unknown_option", 2),
        ],
    ),
    ("echo_request", 128, &[]),
    ("echo_reply", 129, &[]),
];

/// IPv4 unreachable codes as (name, code) pairs.
fn v4_unreachable_codes() -> impl Iterator<Item = (&'static str, u8)> {
    V4_UNREACHABLE_CODES.iter().zip(0u8..).map(|(n, c)| (*n, c))
}

/// What an ICMP line quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Echoed {
    /// A TCP segment: script-space start sequence number and payload length.
    Tcp {
        start: u32,
        len_bytes: u32,
    },
    Udp {
        len_bytes: u32,
    },
    Raw {
        len_bytes: u32,
    },
}

/// An ICMP line's words, read (names not yet resolved: that needs the run's family).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct IcmpSpec {
    pub(super) type_word: String,
    pub(super) code_word: Option<String>,
    pub(super) mtu: Option<u32>,
    pub(super) id: Option<u16>,
    pub(super) echoed: Echoed,
}

impl IcmpSpec {
    /// Reads the words after `icmp` (packetdrill's `icmp_type opt_icmp_code opt_icmp_mtu
    /// opt_icmp_echo_id opt_icmp_echoed`).
    pub(super) fn parse(text: &str) -> Result<IcmpSpec, String> {
        let (words, echoed) = match text.find('[') {
            Some(at) => {
                let inner = text[at + 1..]
                    .trim_end()
                    .strip_suffix(']')
                    .ok_or_else(|| format!("`{text}`: unterminated `[`"))?;
                (&text[..at], parse_echoed(inner.trim())?)
            }
            None => (
                text,
                Echoed::Tcp {
                    start: 0,
                    len_bytes: 0,
                },
            ),
        };
        let mut it = words.split_whitespace().peekable();
        let type_word = it
            .next()
            .ok_or_else(|| "ICMP line without a type".to_string())?
            .to_string();
        let code_word = match it.peek() {
            Some(&w) if w != "mtu" && w != "id" => {
                it.next();
                Some(w.to_string())
            }
            _ => None,
        };
        let mut mtu = None;
        let mut id = None;
        while let Some(w) = it.next() {
            let value = it
                .next()
                .ok_or_else(|| format!("ICMP `{w}` without a value"))?;
            match w {
                "mtu" if mtu.is_none() => {
                    mtu = Some(
                        value
                            .parse::<u32>()
                            .map_err(|_| format!("ICMP mtu `{value}` is not a number"))?,
                    );
                }
                "id" if id.is_none() => {
                    id = Some(
                        value
                            .parse::<u16>()
                            .map_err(|_| format!("ICMP echo id `{value}` out of range"))?,
                    );
                }
                other => return Err(format!("unexpected `{other}` in an ICMP line")),
            }
        }
        Ok(IcmpSpec {
            type_word,
            code_word,
            mtu,
            id,
            echoed,
        })
    }

    /// The type and code bytes in `v6` (ICMPv6) or IPv4 numbering; `Err` names the word
    /// packetdrill would refuse.
    pub(super) fn type_and_code(&self, v6: bool) -> Result<(u8, u8), String> {
        let numbered =
            |w: &str, prefix: &str| w.strip_prefix(prefix).and_then(|n| n.parse::<u8>().ok());
        let (ty, codes): (u8, Vec<(&str, u8)>) = if let Some(n) = numbered(&self.type_word, "type_")
        {
            (n, Vec::new())
        } else if v6 {
            V6_TYPES
                .iter()
                .find(|(name, ..)| *name == self.type_word)
                .map(|&(_, t, codes)| (t, codes.to_vec()))
                .ok_or_else(|| format!("`{}` is not an ICMPv6 type", self.type_word))?
        } else {
            let t = V4_TYPES
                .iter()
                .find(|(name, _)| *name == self.type_word)
                .map(|&(_, t)| t)
                .ok_or_else(|| format!("`{}` is not an ICMPv4 type", self.type_word))?;
            let codes = if t == 3 {
                v4_unreachable_codes().collect()
            } else {
                Vec::new()
            };
            (t, codes)
        };
        let code = match self.code_word.as_deref() {
            None => 0,
            Some(w) => match numbered(w, "code_") {
                Some(n) => n,
                None => codes
                    .iter()
                    .find(|(name, _)| *name == w)
                    .map(|&(_, c)| c)
                    .ok_or_else(|| {
                        format!(
                            "ICMP code `{w}` is not a code of `{}` (packetdrill's names or \
                             code_N; a symbol the script expects from packetdrill's -D?)",
                            self.type_word
                        )
                    })?,
            },
        };
        if self.mtu.is_some() {
            let ok = if v6 {
                ty == 2 && code == 0
            } else {
                ty == 3 && code == 4
            };
            if !ok {
                return Err(if v6 {
                    "ICMPv6 MTU is only valid for packet_too_big".to_string()
                } else {
                    "ICMPv4 MTU is only valid for unreachable frag_needed".to_string()
                });
            }
        }
        Ok((ty, code))
    }
}

fn parse_echoed(inner: &str) -> Result<Echoed, String> {
    let paren_len = |rest: &str| -> Result<u32, String> {
        rest.trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .ok_or_else(|| format!("`[{inner}]`: expected `(N)`"))
    };
    if let Some(rest) = inner.strip_prefix("udp") {
        return Ok(Echoed::Udp {
            len_bytes: paren_len(rest)?,
        });
    }
    if let Some(rest) = inner.strip_prefix("raw") {
        return Ok(Echoed::Raw {
            len_bytes: paren_len(rest)?,
        });
    }
    // start:end(len)
    let bad = || format!("`[{inner}]`: expected start:end(len)");
    let (start, rest) = inner.split_once(':').ok_or_else(bad)?;
    let (end, rest) = rest.split_once('(').ok_or_else(bad)?;
    let len = rest.strip_suffix(')').ok_or_else(bad)?;
    let start: u32 = start.trim().parse().map_err(|_| bad())?;
    let end: u32 = end.trim().parse().map_err(|_| bad())?;
    let len_bytes: u32 = len.trim().parse().map_err(|_| bad())?;
    if end != start.wrapping_add(len_bytes) || len_bytes > u32::from(u16::MAX) {
        return Err(format!(
            "`[{inner}]`: inconsistent TCP sequence numbers and payload size"
        ));
    }
    Ok(Echoed::Tcp { start, len_bytes })
}

impl Exec {
    /// Injects an inbound ICMP line: an error quoting the connection under test.
    pub(super) fn icmp(&mut self, pos: Pos, line: &IcmpLine) -> Result<(), Stop> {
        if line.direction == Direction::Outbound {
            return skip("outbound ICMP lines are not modelled");
        }
        let spec = IcmpSpec::parse(&line.text).map_err(|e| Stop::Fail(pos, e))?;
        let v6 = matches!(self.addrs, Addrs::V6 { .. });
        let (ty, code) = spec.type_and_code(v6).map_err(Stop::Skip)?;
        let Echoed::Tcp { start, len_bytes } = spec.echoed else {
            return skip("ICMP lines quoting UDP or raw packets are not modelled");
        };
        let Some(local_port) = self.local_port else {
            return fail(pos, "ICMP error before the stack's port is known");
        };
        let Some(seq) = self.ctx.seq.stack_live(start) else {
            return fail(
                pos,
                "ICMP error quoting a segment before the stack's ISN is known",
            );
        };
        let frame = build_icmp_error(
            self.addrs,
            IcmpError {
                ty,
                code,
                mtu: spec.mtu,
                id: spec.id,
                local_port,
                remote_port: self.remote_port,
                seq,
                len_bytes: len_bytes as usize,
            },
        )
        .map_err(|e| Stop::Fail(pos, format!("cannot build `{line}`: {e}")))?;
        self.stack.receive(self.now_ns, &frame, &RxMeta::NONE);
        self.drain()?;
        self.retry_pending()
    }
}

/// The fields of an ICMP error the executor injects.
#[derive(Debug, Clone, Copy)]
pub(super) struct IcmpError {
    pub(super) ty: u8,
    pub(super) code: u8,
    pub(super) mtu: Option<u32>,
    pub(super) id: Option<u16>,
    /// The quoted segment's ports (the stack's, the script side's) and sequence number.
    pub(super) local_port: u16,
    pub(super) remote_port: u16,
    pub(super) seq: SeqNumber,
    /// Zero bytes quoted after the 8 bytes of TCP header.
    pub(super) len_bytes: usize,
}

/// An Ethernet frame from the script side carrying the ICMP (v4, or v6 in IPv6 mode) error
/// `e` about a TCP segment from the stack to the script side.
pub(super) fn build_icmp_error(addrs: Addrs, e: IcmpError) -> Result<Vec<u8>, String> {
    const ECHOED_TCP_BYTES: usize = 8;
    const TCP_HEADER_BYTES: usize = 20;
    let mut tcp8 = [0u8; ECHOED_TCP_BYTES];
    tcp8[..2].copy_from_slice(&e.local_port.to_be_bytes());
    tcp8[2..4].copy_from_slice(&e.remote_port.to_be_bytes());
    tcp8[4..].copy_from_slice(&e.seq.0.to_be_bytes());
    // The rest of the ICMP header: the MTU (v4: low 16 bits of the word; v6: all 32) or the
    // echo id.
    let mut rest = [0u8; 4];
    if let Some(mtu) = e.mtu {
        match addrs {
            Addrs::V4 { .. } => {
                let mtu = u16::try_from(mtu).map_err(|_| "ICMPv4 MTU out of 16-bit range")?;
                rest[2..].copy_from_slice(&mtu.to_be_bytes());
            }
            Addrs::V6 { .. } => rest.copy_from_slice(&mtu.to_be_bytes()),
        }
    } else if let Some(id) = e.id {
        rest[..2].copy_from_slice(&id.to_be_bytes());
    }
    let (ethertype, ip) = match addrs {
        Addrs::V4 { local, remote, .. } => {
            let quoted = Ipv4Repr {
                src_addr: local,
                dst_addr: remote,
                protocol: IpProtocol::TCP,
                payload_len: TCP_HEADER_BYTES + e.len_bytes,
                hop_limit: 64,
                dscp: 0,
                ecn: 0,
                ident: 0,
                dont_frag: true,
                more_frags: false,
                frag_offset_bytes: 0,
            };
            let mut icmp = vec![e.ty, e.code, 0, 0];
            icmp.extend_from_slice(&rest);
            let mut qh = vec![0u8; quoted.buffer_len()];
            quoted
                .emit(
                    &mut Ipv4Packet::new_unchecked(&mut qh[..]),
                    ChecksumCaps::ALL,
                )
                .map_err(|x| x.to_string())?;
            icmp.extend_from_slice(&qh[..qh.len() - quoted.payload_len]);
            icmp.extend_from_slice(&tcp8);
            icmp.resize(icmp.len() + e.len_bytes, 0);
            wire::Icmpv4Packet::new_unchecked(&mut icmp[..]).fill_checksum();
            let outer = Ipv4Repr {
                src_addr: remote,
                dst_addr: local,
                protocol: IpProtocol::ICMP,
                payload_len: icmp.len(),
                hop_limit: 64,
                dscp: 0,
                ecn: 0,
                ident: 0,
                dont_frag: false,
                more_frags: false,
                frag_offset_bytes: 0,
            };
            let mut pkt = vec![0u8; outer.buffer_len()];
            outer
                .emit(
                    &mut Ipv4Packet::new_unchecked(&mut pkt[..]),
                    ChecksumCaps::ALL,
                )
                .map_err(|x| x.to_string())?;
            let at = pkt.len() - icmp.len();
            pkt[at..].copy_from_slice(&icmp);
            (EtherType::IPV4, pkt)
        }
        Addrs::V6 { local, remote, .. } => {
            let quoted = Ipv6Repr {
                src_addr: local,
                dst_addr: remote,
                next_header: IpProtocol::TCP,
                payload_len: TCP_HEADER_BYTES + e.len_bytes,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
                ext_headers: [None; wire::MAX_EXT_HEADERS],
            };
            let mut icmp = vec![e.ty, e.code, 0, 0];
            icmp.extend_from_slice(&rest);
            let mut qh = vec![0u8; quoted.buffer_len()];
            quoted
                .emit(&mut Ipv6Packet::new_unchecked(&mut qh[..]))
                .map_err(|x| x.to_string())?;
            icmp.extend_from_slice(&qh[..quoted.header_len()]);
            icmp.extend_from_slice(&tcp8);
            icmp.resize(icmp.len() + e.len_bytes, 0);
            Icmpv6Packet::new_unchecked(&mut icmp[..]).fill_checksum(remote, local);
            let outer = Ipv6Repr {
                src_addr: remote,
                dst_addr: local,
                next_header: IpProtocol::ICMPV6,
                payload_len: icmp.len(),
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
                ext_headers: [None; wire::MAX_EXT_HEADERS],
            };
            let mut pkt = vec![0u8; outer.buffer_len()];
            outer
                .emit(&mut Ipv6Packet::new_unchecked(&mut pkt[..]))
                .map_err(|x| x.to_string())?;
            let at = outer.header_len();
            pkt.truncate(at);
            pkt.extend_from_slice(&icmp);
            (EtherType::IPV6, pkt)
        }
    };
    let eth = EthernetRepr {
        src_addr: REMOTE_MAC,
        dst_addr: LOCAL_MAC,
        vlan: None,
        ethertype,
    };
    let mut buf = vec![0u8; eth.header_len()];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]))
        .map_err(|x| x.to_string())?;
    buf.extend_from_slice(&ip);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> IcmpSpec {
        IcmpSpec::parse(text).expect("parses")
    }

    #[test]
    fn icmp_words_follow_packetdrill_s_grammar() {
        let s = spec("unreachable frag_needed mtu 840 [0:1000(1000)]");
        assert_eq!(s.type_and_code(false), Ok((3, 4)));
        assert_eq!(s.mtu, Some(840));
        assert_eq!(
            s.echoed,
            Echoed::Tcp {
                start: 0,
                len_bytes: 1000
            }
        );
        // No code is code 0; no quote is the segment at 0 with no payload.
        let s = spec("unreachable");
        assert_eq!(s.type_and_code(false), Ok((3, 0)));
        assert_eq!(
            s.echoed,
            Echoed::Tcp {
                start: 0,
                len_bytes: 0
            }
        );
        assert_eq!(
            spec("unreachable host_unreachable [5000:6000(1000)]").type_and_code(false),
            Ok((3, 1))
        );
        assert_eq!(
            spec("packet_too_big mtu 1400 [0:1440(1440)]").type_and_code(true),
            Ok((2, 0))
        );
        assert_eq!(spec("type_3 code_13").type_and_code(false), Ok((3, 13)));
        assert_eq!(
            spec("unreachable port_unreachable").type_and_code(true),
            Ok((1, 4))
        );
        assert_eq!(spec("unreachable no_route").type_and_code(true), Ok((1, 0)));
        assert_eq!(
            spec("unreachable admin_prohibited").type_and_code(true),
            Ok((1, 1))
        );
        assert_eq!(
            spec("time_exceeded exceeded_frag_time").type_and_code(true),
            Ok((3, 1))
        );
        assert_eq!(spec("echo_request id 7 [raw (20)]").id, Some(7));
        assert_eq!(
            spec("unreachable [udp (12)]").echoed,
            Echoed::Udp { len_bytes: 12 }
        );
    }

    #[test]
    fn icmp_words_packetdrill_refuses_are_refused() {
        // An undefined symbol where a code belongs (`icmp-baseline`'s `CODE`).
        assert!(spec("unreachable CODE").type_and_code(false).is_err());
        // A v6 type in v4 mode, and the other way round.
        assert!(
            spec("packet_too_big mtu 1400")
                .type_and_code(false)
                .is_err()
        );
        assert!(
            spec("unreachable frag_needed mtu 800")
                .type_and_code(true)
                .is_err()
        );
        // An MTU on an error that has none.
        assert!(
            spec("unreachable host_unreachable mtu 800")
                .type_and_code(false)
                .is_err()
        );
        assert!(IcmpSpec::parse("unreachable [0:10(20)]").is_err());
        assert!(IcmpSpec::parse("unreachable mtu").is_err());
        assert!(IcmpSpec::parse("").is_err());
    }

    #[test]
    fn an_icmp_error_quotes_the_ip_header_eight_tcp_bytes_and_the_payload() {
        let e = IcmpError {
            ty: 3,
            code: 4,
            mtu: Some(800),
            id: None,
            local_port: 40000,
            remote_port: 8080,
            seq: SeqNumber(0x0102_0304),
            len_bytes: 100,
        };
        let frame = build_icmp_error(Addrs::DEFAULT, e).expect("builds");
        let ip = Ipv4Packet::new_checked(&frame[14..]).expect("IPv4");
        assert!(ip.verify_checksum());
        assert_eq!(ip.protocol(), IpProtocol::ICMP);
        assert_eq!(ip.src_addr(), REMOTE_IP);
        let icmp = wire::Icmpv4Packet::new_checked(ip.payload()).expect("ICMP");
        assert!(icmp.verify_checksum());
        assert_eq!(icmp.next_hop_mtu(), 800);
        let quote = icmp.data();
        assert_eq!(quote.len(), 20 + 8 + 100);
        let q = Ipv4Packet::new_unchecked(quote);
        assert_eq!((q.src_addr(), q.dst_addr()), (LOCAL_IP, REMOTE_IP));
        assert_eq!(usize::from(q.total_len()), 20 + 20 + 100);
        assert_eq!(&quote[20..28], &[0x9c, 0x40, 0x1f, 0x90, 1, 2, 3, 4]);
    }
}
