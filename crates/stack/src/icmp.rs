//! The ICMP part of the stack (RFC 792, RFC 4443, RFC 4861 NS/NA): echo requests answered and
//! echo replies kept for the application, neighbour solicitations answered and
//! advertisements learnt (through the egress part's neighbour cache), destination-unreachable
//! errors parsed for the socket that sent the quoted packet, and the errors we send with
//! their suppression rules and token-bucket rate limit.
//!
//! [`IcmpCx`] is the part at work with the egress part it borrows to send.

use core::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::collections::VecDeque;
use std::sync::Arc;

use wire::icmpv4::Icmpv4Repr;
use wire::icmpv6::Icmpv6Repr;
use wire::{
    EtherType, EthernetAddress, Icmpv4Packet, Icmpv6Packet, IpProtocol, Ipv4Packet, Ipv6Packet,
};

use crate::config::{ALL_NODES, StackConfig};
use crate::counters::Counters;
use crate::egress::{Egress, NDP_HOP_LIMIT};
use crate::ip_in::IpMeta;
use crate::socket::{EchoReply, SocketError};

/// RFC 1812 §4.3.2.3: an ICMPv4 error holds as much of the invoking packet as keeps the error
/// within 576 bytes.
const ICMPV4_ERROR_MAX_BYTES: usize = 576;
/// RFC 4443 §2.4(c): an ICMPv6 error must not exceed the minimum IPv6 MTU.
const ICMPV6_ERROR_MAX_BYTES: usize = 1280;
/// Echo replies kept for the application before further ones are dropped (and counted).
const ECHO_REPLIES_MAX: usize = 64;

/// A destination-unreachable error about a packet we sent: which socket it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuotedError {
    pub(crate) protocol: IpProtocol,
    /// Our address and port in the quoted packet.
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    /// The quoted TCP sequence number, when the quote holds one.
    pub(crate) seq: Option<u32>,
    /// Hard errors end a connection still opening, and are recorded on UDP sockets.
    pub(crate) hard: bool,
    /// Linux drops a child still in SYN-RECEIVED for this error when it quotes the
    /// child's SYN-ACK (`tcp_req_err`'s `abort`: IPv4 net or host unreachable and time
    /// exceeded; IPv6 the errors `icmpv6_err_convert` calls fatal). Acted on only with
    /// `StackConfig::tcp_icmp_errors_abort_opening`.
    pub(crate) drops_request: bool,
    /// The next-hop MTU of a "fragmentation needed" (ICMPv4) or "packet too big" (ICMPv6).
    pub(crate) mtu: Option<u32>,
}

/// The ICMP part's state. Invariants: `echo_replies.len()` ≤ `ECHO_REPLIES_MAX`;
/// `tokens_milli` ≤ `limits.icmp_errors_burst_max` × 1000.
#[derive(Debug)]
pub(crate) struct Icmp {
    /// The counters this part increments (ICMP, neighbour discovery messages); `Stack::counters`
    /// sums every part's.
    counters: Counters,
    /// ICMP error tokens, in thousandths of a token (token bucket).
    tokens_milli: u64,
    refill_ns: u64,
    echo_replies: VecDeque<EchoReply>,
}

impl Icmp {
    pub(crate) fn new(cfg: &Arc<StackConfig>) -> Icmp {
        Icmp {
            counters: Counters::default(),
            tokens_milli: u64::from(cfg.limits.icmp_errors_burst_max) * 1000,
            refill_ns: 0,
            echo_replies: VecDeque::new(),
        }
    }

    /// This part's counters.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The next echo reply received for a `Stack::send_ping`.
    pub(crate) fn poll_echo_reply(&mut self) -> Option<EchoReply> {
        self.echo_replies.pop_front()
    }

    /// Counts an error whose quoted packet no socket claimed.
    pub(crate) fn unmatched(&mut self) {
        self.counters.icmp_errors_unmatched += 1;
    }
}

/// The ICMP part with the egress part it borrows for one call.
pub(crate) struct IcmpCx<'a> {
    pub(crate) cfg: &'a StackConfig,
    pub(crate) icmp: &'a mut Icmp,
    pub(crate) egress: &'a mut Egress,
}

impl IcmpCx<'_> {
    pub(crate) fn process_icmpv4(
        &mut self,
        now: u64,
        meta: IpMeta,
        payload: &[u8],
    ) -> Option<QuotedError> {
        let caps = self.cfg.checksums;
        let Ok(view) = Icmpv4Packet::new_checked(payload) else {
            self.icmp.counters.rx_drop_icmp_malformed += 1;
            return None;
        };
        let repr = match Icmpv4Repr::parse(&view, caps) {
            Ok(r) => r,
            Err(wire::Error::Unsupported) => {
                self.icmp.counters.rx_drop_icmp_unsupported += 1;
                return None;
            }
            Err(_) => {
                self.icmp.counters.rx_drop_icmp_malformed += 1;
                return None;
            }
        };
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                // RFC 1122 §3.2.2.6: a host may ignore broadcast echo requests; we do.
                if !meta.dst_unicast {
                    self.icmp.counters.icmp_echo_broadcast_ignored += 1;
                    return None;
                }
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                if let (IpAddr::V4(ours), IpAddr::V4(peer)) = (meta.dst, meta.src) {
                    let mut buf = vec![0u8; reply.buffer_len()];
                    if reply
                        .emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]), caps)
                        .is_ok()
                    {
                        self.egress
                            .send_ipv4(now, ours, peer, IpProtocol::ICMP, false, 0, &buf);
                        self.icmp.counters.icmp_echo_replies_sent += 1;
                    }
                }
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                self.icmp.counters.icmp_echo_replies_received += 1;
                self.record_echo_reply(meta.src, ident, seq_no, data.len());
            }
            Icmpv4Repr::DstUnreachable { code, data } => {
                self.icmp.counters.icmp_errors_received += 1;
                // RFC 1122 §4.2.3.9: protocol (2) and port (3) unreachable are hard errors.
                let mut q = self.quoted_error(meta, data, matches!(code, 2 | 3))?;
                q.drops_request = matches!(code, 0 | 1);
                return Some(q);
            }
            Icmpv4Repr::TimeExceeded { data, .. } => {
                self.icmp.counters.icmp_errors_received += 1;
                // RFC 1122 §4.2.3.9: a soft error.
                let mut q = self.quoted_error(meta, data, false)?;
                q.drops_request = true;
                return Some(q);
            }
            Icmpv4Repr::FragNeeded { next_hop_mtu, data } => {
                self.icmp.counters.icmp_errors_received += 1;
                let mut q = self.quoted_error(meta, data, false)?;
                q.mtu = Some(u32::from(next_hop_mtu));
                return Some(q);
            }
        }
        None
    }

    fn record_echo_reply(&mut self, from: IpAddr, ident: u16, seq_no: u16, len: usize) {
        if self.icmp.echo_replies.len() >= ECHO_REPLIES_MAX {
            self.icmp.counters.icmp_echo_reply_queue_full += 1;
            return;
        }
        self.icmp.echo_replies.push_back(EchoReply {
            from,
            ident,
            seq_no,
            data_len_bytes: len,
        });
    }

    pub(crate) fn process_icmpv6(
        &mut self,
        now: u64,
        meta: IpMeta,
        payload: &[u8],
    ) -> Option<QuotedError> {
        let caps = self.cfg.checksums;
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (meta.src, meta.dst) else {
            return None;
        };
        let Ok(view) = Icmpv6Packet::new_checked(payload) else {
            self.icmp.counters.rx_drop_icmp_malformed += 1;
            return None;
        };
        let repr = match Icmpv6Repr::parse(&view, src, dst, caps) {
            Ok(r) => r,
            Err(wire::Error::Unsupported) => {
                // Router discovery, MLD, redirects…: not spoken by this host (see lib docs).
                self.icmp.counters.rx_drop_icmp_unsupported += 1;
                return None;
            }
            Err(_) => {
                self.icmp.counters.rx_drop_icmp_malformed += 1;
                return None;
            }
        };
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                if !meta.dst_unicast {
                    self.icmp.counters.icmp_echo_broadcast_ignored += 1;
                    return None;
                }
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                if let Some(pkt) = self
                    .egress
                    .build_icmpv6(dst, src, self.cfg.hop_limit, &reply)
                {
                    self.egress
                        .route_ip(now, IpAddr::V6(src), EtherType::IPV6, pkt);
                    self.icmp.counters.icmp_echo_replies_sent += 1;
                }
            }
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                self.icmp.counters.icmp_echo_replies_received += 1;
                self.record_echo_reply(meta.src, ident, seq_no, data.len());
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                self.process_ns(now, meta, src, target_addr, source_lladdr);
            }
            Icmpv6Repr::NeighborAdvert {
                target_addr,
                target_lladdr,
                ..
            } => {
                if meta.hop_limit != NDP_HOP_LIMIT {
                    self.icmp.counters.nd_drop_bad_hop_limit += 1;
                    return None;
                }
                let Some(ll) = target_lladdr else {
                    // Without the option there is nothing to learn on Ethernet.
                    self.icmp.counters.nd_rx_unsolicited_advert += 1;
                    return None;
                };
                if !self.egress.neighbors().contains(IpAddr::V6(target_addr)) {
                    // RFC 4861 §7.2.5: no entry → silently discard.
                    self.icmp.counters.nd_rx_unsolicited_advert += 1;
                    return None;
                }
                self.egress
                    .learn_neighbor(now, IpAddr::V6(target_addr), ll, false);
            }
            Icmpv6Repr::DstUnreachable { code, data } => {
                self.icmp.counters.icmp_errors_received += 1;
                // RFC 4443 §3.1: code 4 is port unreachable (a hard error, like IPv4's code 3).
                let mut q = self.quoted_error(meta, data, code == 4)?;
                // Administratively prohibited, port unreachable, source address failed
                // policy, reject route (`icmpv6_err_convert`'s fatal ones).
                q.drops_request = matches!(code, 1 | 4 | 5 | 6);
                return Some(q);
            }
            Icmpv6Repr::TimeExceeded { data, .. } => {
                self.icmp.counters.icmp_errors_received += 1;
                return self.quoted_error(meta, data, false);
            }
            Icmpv6Repr::PacketTooBig { mtu, data } => {
                self.icmp.counters.icmp_errors_received += 1;
                let mut q = self.quoted_error(meta, data, false)?;
                q.mtu = Some(mtu);
                return Some(q);
            }
        }
        None
    }

    /// Hands a destination-unreachable error to the socket that sent the quoted packet
    /// (RFC 1122 §4.2.3.9, §4.1.3.3; RFC 5927 §4.1 checks). `quote` is the invoking packet as
    /// returned: an IP header we sent plus at least 8 bytes of its transport header.
    fn quoted_error(&mut self, meta: IpMeta, quote: &[u8], hard: bool) -> Option<QuotedError> {
        // (protocol, our address, peer address, transport header bytes)
        let parsed = match meta.src {
            IpAddr::V4(_) => {
                let ip = Ipv4Packet::new_unchecked(quote);
                let hl = ip.header_len();
                (ip.version() == 4 && hl >= 20).then(|| {
                    (
                        ip.protocol(),
                        IpAddr::V4(ip.src_addr()),
                        IpAddr::V4(ip.dst_addr()),
                        quote.get(hl..).unwrap_or(&[]),
                    )
                })
            }
            IpAddr::V6(_) => {
                let ip = Ipv6Packet::new_unchecked(quote);
                // Only a transport header right after the fixed header is looked at.
                (ip.version() == 6).then(|| {
                    (
                        ip.next_header(),
                        IpAddr::V6(ip.src_addr()),
                        IpAddr::V6(ip.dst_addr()),
                        quote.get(40..).unwrap_or(&[]),
                    )
                })
            }
        };
        let Some((protocol, ours, peer, l4)) = parsed else {
            self.icmp.counters.icmp_errors_unmatched += 1;
            return None;
        };
        let (Some(&[s0, s1, d0, d1]), true) = (
            l4.get(..4).map(|b| [b[0], b[1], b[2], b[3]]).as_ref(),
            self.egress.is_our_ip(ours),
        ) else {
            self.icmp.counters.icmp_errors_unmatched += 1;
            return None;
        };
        let seq = l4
            .get(4..8)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        Some(QuotedError {
            protocol,
            local: SocketAddr::new(ours, u16::from_be_bytes([s0, s1])),
            remote: SocketAddr::new(peer, u16::from_be_bytes([d0, d1])),
            seq,
            hard,
            drops_request: false,
            mtu: None,
        })
    }

    /// RFC 4861 §7.2.3/§7.2.4: answer a solicitation for one of our addresses.
    fn process_ns(
        &mut self,
        now: u64,
        meta: IpMeta,
        src: Ipv6Addr,
        target: Ipv6Addr,
        source_lladdr: Option<EthernetAddress>,
    ) {
        if meta.hop_limit != NDP_HOP_LIMIT {
            self.icmp.counters.nd_drop_bad_hop_limit += 1;
            return;
        }
        let from_dad = src.is_unspecified();
        // RFC 4861 §7.1.1: the target is never multicast, and a DAD probe (unspecified
        // source) carries no source link-layer option.
        if target.is_multicast() || (from_dad && source_lladdr.is_some()) {
            self.icmp.counters.rx_drop_icmp_malformed += 1;
            return;
        }
        if !self.egress.is_our_v6(target) {
            self.icmp.counters.nd_rx_not_for_us += 1;
            return;
        }
        let mac = self.cfg.interface.mac;
        if let (false, Some(ll)) = (from_dad, source_lladdr) {
            // §7.2.3: the source link-layer option creates or updates the sender's entry.
            self.egress.learn_neighbor(now, IpAddr::V6(src), ll, true);
        }
        // §7.2.4: reply to the all-nodes address for a DAD probe (unspecified source), else
        // unicast to the solicitor with the solicited flag.
        let dst = if from_dad { ALL_NODES } else { src };
        let na = Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited: !from_dad,
            override_: true,
            target_addr: target,
            target_lladdr: Some(mac),
        };
        let Some(pkt) = self.egress.build_icmpv6(target, dst, NDP_HOP_LIMIT, &na) else {
            return;
        };
        self.icmp.counters.nd_solicits_answered += 1;
        match (from_dad, source_lladdr) {
            (true, _) => self.egress.send_frame(
                EthernetAddress::ipv6_multicast(ALL_NODES),
                EtherType::IPV6,
                &pkt,
            ),
            (false, Some(ll)) => self.egress.send_frame(ll, EtherType::IPV6, &pkt),
            (false, None) => self
                .egress
                .route_ip(now, IpAddr::V6(src), EtherType::IPV6, pkt),
        }
    }

    /// True when an ICMP error may be sent about a packet with this meta (RFC 1122 §3.2.2,
    /// RFC 1812 §4.3.2.7, RFC 4443 §2.4(e)): not about broadcast/multicast destinations, nor
    /// from unspecified/multicast/broadcast sources. The caller never asks about ICMP errors.
    fn icmp_error_allowed(&self, meta: &IpMeta) -> bool {
        if !meta.dst_unicast {
            return false;
        }
        match meta.src {
            IpAddr::V4(s) => {
                !(s.is_unspecified() || s.is_multicast() || self.cfg.interface.is_v4_broadcast(s))
            }
            IpAddr::V6(s) => !(s.is_unspecified() || s.is_multicast()),
        }
    }

    /// Token bucket: `icmp_errors_per_s_max` per second, bursts up to `icmp_errors_burst_max`
    /// (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)).
    fn icmp_take_token(&mut self, now: u64) -> bool {
        let l = &self.cfg.limits;
        let cap = u64::from(l.icmp_errors_burst_max) * 1000;
        let elapsed_ns = now.saturating_sub(self.icmp.refill_ns);
        // thousandths of a token = elapsed_s × rate × 1000 = elapsed_ns × rate / 1e6
        let add = elapsed_ns.saturating_mul(u64::from(l.icmp_errors_per_s_max)) / 1_000_000;
        if add > 0 {
            self.icmp.tokens_milli = (self.icmp.tokens_milli + add).min(cap);
            self.icmp.refill_ns = now;
        }
        if self.icmp.tokens_milli >= 1000 {
            self.icmp.tokens_milli -= 1000;
            true
        } else {
            false
        }
    }

    /// Sends destination unreachable with `code_v4` (IPv4) or `code_v6` (IPv6) about the
    /// packet `whole`, quoting as much as RFC 1812 §4.3.2.3 / RFC 4443 §2.4(c) allow.
    pub(crate) fn send_icmp_unreachable(
        &mut self,
        now: u64,
        meta: IpMeta,
        whole: &[u8],
        code_v4: u8,
        code_v6: u8,
    ) {
        if !self.icmp_error_allowed(&meta) {
            self.icmp.counters.icmp_errors_suppressed += 1;
            return;
        }
        if !self.icmp_take_token(now) {
            self.icmp.counters.icmp_errors_rate_limited += 1;
            return;
        }
        let caps = self.cfg.checksums;
        match (meta.dst, meta.src) {
            (IpAddr::V4(ours), IpAddr::V4(peer)) => {
                let quote_max = ICMPV4_ERROR_MAX_BYTES - 20 - 8;
                let data = whole.get(..whole.len().min(quote_max)).unwrap_or(whole);
                let repr = Icmpv4Repr::DstUnreachable {
                    code: code_v4,
                    data,
                };
                let mut buf = vec![0u8; repr.buffer_len()];
                if repr
                    .emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]), caps)
                    .is_ok()
                {
                    self.egress
                        .send_ipv4(now, ours, peer, IpProtocol::ICMP, false, 0, &buf);
                    self.icmp.counters.icmp_errors_sent += 1;
                }
            }
            (IpAddr::V6(ours), IpAddr::V6(peer)) => {
                let quote_max = ICMPV6_ERROR_MAX_BYTES - 40 - 8;
                let data = whole.get(..whole.len().min(quote_max)).unwrap_or(whole);
                let repr = Icmpv6Repr::DstUnreachable {
                    code: code_v6,
                    data,
                };
                if let Some(pkt) = self
                    .egress
                    .build_icmpv6(ours, peer, self.cfg.hop_limit, &repr)
                {
                    self.egress
                        .route_ip(now, IpAddr::V6(peer), EtherType::IPV6, pkt);
                    self.icmp.counters.icmp_errors_sent += 1;
                }
            }
            _ => {}
        }
    }

    /// Sends an ICMP echo request to `dst` from the best source address. Replies show up in
    /// [`Stack::poll_echo_reply`].
    pub(crate) fn send_ping(
        &mut self,
        now: u64,
        dst: IpAddr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> Result<(), SocketError> {
        let src = self.egress.select_source(dst).ok_or(SocketError::NoRoute)?;
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let repr = Icmpv4Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                };
                let mut buf = vec![0u8; repr.buffer_len()];
                repr.emit(
                    &mut Icmpv4Packet::new_unchecked(&mut buf[..]),
                    self.cfg.checksums,
                )
                .map_err(|_| SocketError::MessageTooBig)?;
                self.egress
                    .send_ipv4(now, s, d, IpProtocol::ICMP, false, 0, &buf);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let repr = Icmpv6Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                };
                let payload = self
                    .egress
                    .build_icmpv6_payload(s, d, &repr)
                    .ok_or(SocketError::MessageTooBig)?;
                self.egress.send_ipv6(
                    now,
                    s,
                    d,
                    IpProtocol::ICMPV6,
                    self.cfg.hop_limit,
                    wire::Ecn::NotEct,
                    &payload,
                );
            }
            _ => return Err(SocketError::NoRoute),
        }
        Ok(())
    }
}
