//! IP input: the receive path from the Ethernet frame to the upper layer. Link-layer checks,
//! ARP handed on (the egress part owns the neighbour cache), IPv4 and IPv6 header checks,
//! the IPv6 extension-header walk, fragment reassembly (it owns the reassembler), and the
//! upper-layer dispatch: ICMP, UDP and TCP payloads go to the caller's `up` callback as a
//! [`Delivery`]; unknown protocols are counted here (and answered with a protocol
//! unreachable through the callback).

use core::net::IpAddr;
use std::sync::Arc;

use wire::{
    ChecksumCaps, CsumVerdict, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpPair,
    IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6FragmentHeader, Ipv6Packet, RxMeta,
};

use crate::cold_path;
use crate::config::{ALL_NODES, StackConfig, solicited_node};
use crate::counters::Counters;
use crate::reasm::{ReasmDrop, ReasmKey, Reassembler};

mod fixed_v4;
#[cfg(test)]
mod tests;

/// Where an upper-layer payload came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpMeta {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) protocol: IpProtocol,
    pub(crate) hop_limit: u8,
    /// False for broadcast and multicast destinations (no ICMP errors, no RST, no echo).
    pub(crate) dst_unicast: bool,
    /// The ECN codepoint of the IP header (RFC 3168 §5): what TCP echoes. For a reassembled
    /// IPv4 datagram, the codepoint of the fragment that completed it (TCP sets DF).
    pub(crate) ecn: wire::Ecn,
}

impl IpMeta {
    pub(crate) fn pair(&self) -> Option<IpPair> {
        match (self.src, self.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => Some(IpPair::V4 { src, dst }),
            (IpAddr::V6(src), IpAddr::V6(dst)) => Some(IpPair::V6 { src, dst }),
            _ => None,
        }
    }
}

/// The received frame an upper-layer payload came from, with what the NIC learnt about it:
/// TCP looks the hash up in its table and forwards frames caught mid-move
/// ([`Stack::poll_forward`]); TCP and UDP skip verifying a checksum the NIC verified.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RxFrame<'a> {
    /// The whole Ethernet frame as received.
    pub(crate) frame: &'a [u8],
    /// The NIC's metadata. Invariant: its L4 verdict describes the payload delivered with
    /// it (IP input replaces it by [`RxMeta::hash_only`] for a reassembled datagram).
    pub(crate) meta: &'a RxMeta,
}

impl RxFrame<'_> {
    /// The checksum capabilities to parse the transport segment with: the configured ones,
    /// without verification when the NIC verified the segment good (counted
    /// `rx_csum_trusted` in `counters` when the configuration would have verified). `None`:
    /// the NIC verified it bad, drop.
    #[inline]
    pub(crate) fn l4_caps(
        &self,
        cfg: ChecksumCaps,
        counters: &mut Counters,
    ) -> Option<ChecksumCaps> {
        match self.meta.csum.l4 {
            CsumVerdict::Unknown => Some(cfg),
            CsumVerdict::Bad => None,
            CsumVerdict::Good => {
                counters.rx_csum_trusted += u64::from(cfg.verify_rx);
                Some(ChecksumCaps {
                    verify_rx: false,
                    ..cfg
                })
            }
        }
    }
}

/// The end of an IPv6 extension-header walk.
enum V6Walk {
    /// The upper-layer header starts at `offset` of the IPv6 payload.
    Upper { protocol: IpProtocol, offset: usize },
    /// A fragment header: its data starts at `offset`; `next` is the protocol after it.
    Fragment {
        next: u8,
        header: Ipv6FragmentHeader,
        offset: usize,
    },
}

/// What IP input hands to the rest of the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Delivery<'a> {
    /// An ARP packet (for the egress part's neighbour cache).
    Arp(&'a [u8]),
    /// An ICMP, ICMPv6, UDP or TCP payload; `whole` is the IP datagram it came in
    /// (reassembled if it came in fragments), for ICMP quoting and forwarding.
    Upper {
        meta: IpMeta,
        payload: &'a [u8],
        whole: &'a [u8],
        rx: RxFrame<'a>,
    },
    /// An IPv4 datagram for a protocol we do not speak: answer with a protocol unreachable
    /// (RFC 1122 §3.2.2.1, code 2) about `whole`.
    ProtocolUnreachable { meta: IpMeta, whole: &'a [u8] },
}

/// Where IP input hands what it delivers: the rest of the stack (`stack::Upper`).
///
/// A trait rather than an `FnMut` closure so the implementation can be
/// `#[inline(always)]`: a closure called from `process_ipv4` stayed out of line, and copying
/// the [`Delivery`] into it and back out cost ~58 instructions per frame (callgrind bulk).
pub(crate) trait Deliver {
    fn deliver(&mut self, now: u64, d: Delivery<'_>);
}

/// The IP input part's state.
#[derive(Debug)]
pub(crate) struct IpIn {
    cfg: Arc<StackConfig>,
    /// The counters this part increments (link, IPv4/IPv6, reassembly); `Stack::counters`
    /// sums every part's.
    counters: Counters,
    reasm: Reassembler,
    /// Copies of the configuration values every received frame reads (the configuration
    /// never changes once the stack is built), saving a load through the `Arc` each.
    mac: EthernetAddress,
    checksums: ChecksumCaps,
    /// The interface's IPv4 address and directed broadcast when it has exactly one IPv4
    /// prefix (the usual case): every datagram's source and destination checks compare with
    /// these instead of walking the prefixes and computing their masks. `None`: walk.
    one_v4: Option<(core::net::Ipv4Addr, Option<core::net::Ipv4Addr>)>,
}

impl IpIn {
    pub(crate) fn new(cfg: Arc<StackConfig>) -> IpIn {
        let l = &cfg.limits;
        let reasm = Reassembler::new(l.reasm_datagrams_max, l.reasm_bytes_max, l.reasm_timeout_ns)
            .with_memory(l.reasm_mem_max, l.reasm_source_mem_max);
        IpIn {
            counters: Counters::default(),
            reasm,
            mac: cfg.interface.mac,
            checksums: cfg.checksums,
            one_v4: match cfg.interface.ipv4.as_slice() {
                [c] => Some((c.addr, c.broadcast())),
                _ => None,
            },
            cfg,
        }
    }

    /// This part's counters.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The reassembler (read-only; it changes through input and timers).
    pub(crate) fn reasm(&self) -> &Reassembler {
        &self.reasm
    }

    /// [`crate::config::InterfaceConfig::is_v4_broadcast`], from `one_v4` when it is set.
    #[inline(always)]
    fn is_v4_broadcast(&self, a: core::net::Ipv4Addr) -> bool {
        match self.one_v4 {
            Some((_, bcast)) => a == core::net::Ipv4Addr::BROADCAST || Some(a) == bcast,
            None => self.cfg.interface.is_v4_broadcast(a),
        }
    }

    /// [`crate::config::InterfaceConfig::is_our_v4`], from `one_v4` when it is set.
    #[inline(always)]
    fn is_our_v4(&self, a: core::net::Ipv4Addr) -> bool {
        match self.one_v4 {
            Some((ours, _)) => a == ours,
            None => self.cfg.interface.is_our_v4(a),
        }
    }

    /// Runs the reassembly timers.
    pub(crate) fn handle_timeout(&mut self, now: u64) {
        self.counters.rx_drop_reasm_timeout += self.reasm.handle_timeout(now);
    }

    /// Processes one received Ethernet frame: an untagged, option-less, unfragmented IPv4
    /// frame carrying TCP to our address straight to TCP, read at fixed offsets
    /// ([`IpIn::fixed_v4_tcp`]); every other frame through [`IpIn::receive_general`]. Always
    /// inlined into `Stack::receive`, its only caller: one call level less per frame (-56k
    /// Ir in callgrind bulk, ~8 per frame).
    #[inline(always)]
    pub(crate) fn receive(&mut self, now: u64, frame: &[u8], meta: &RxMeta, up: &mut impl Deliver) {
        self.counters.rx_frames += 1;
        if let Some(f) = self.fixed_v4_tcp(frame, meta) {
            let rx = RxFrame { frame, meta };
            up.deliver(
                now,
                Delivery::Upper {
                    meta: f.meta,
                    payload: f.payload,
                    whole: f.whole,
                    rx,
                },
            );
            return;
        }
        self.receive_general(now, frame, meta, up);
    }

    /// The general receive path (every frame but `rx_frames`' count): link-layer checks,
    /// then ARP to `up`, IP through `process_ipv4`/`process_ipv6`.
    #[inline(always)]
    fn receive_general(&mut self, now: u64, frame: &[u8], meta: &RxMeta, up: &mut impl Deliver) {
        let Ok(view) = EthernetFrame::new_checked(frame) else {
            self.counters.rx_drop_malformed_eth += 1;
            return;
        };
        let Ok(eth) = EthernetRepr::parse(&view) else {
            self.counters.rx_drop_malformed_eth += 1;
            return;
        };
        if eth.src_addr == self.mac || eth.src_addr.is_multicast() {
            // Our own frame looped back, or a source no station may use (IEEE 802.3 §3.2.3).
            self.counters.rx_drop_bad_src_mac += 1;
            return;
        }
        if eth.dst_addr != self.mac && eth.dst_addr.is_unicast() {
            self.counters.rx_drop_other_mac += 1;
            return;
        }
        if eth.vlan.is_some() {
            // The interface has no VLAN configuration; a tagged frame belongs to another one.
            self.counters.rx_drop_vlan_tagged += 1;
            return;
        }
        let payload = view.payload();
        let rx = RxFrame { frame, meta };
        match eth.ethertype {
            EtherType::ARP => up.deliver(now, Delivery::Arp(payload)),
            EtherType::IPV4 => self.process_ipv4(now, payload, rx, up),
            EtherType::IPV6 => self.process_ipv6(now, payload, rx, up),
            _ => self.counters.rx_drop_unknown_ethertype += 1,
        }
    }

    /// Hands an upper-layer payload on, or counts it: RFC 8200 §4.7 "no next header" is
    /// consumed; unknown protocols are dropped (IPv4 asks for a protocol unreachable; IPv6
    /// would need a parameter problem, RFC 4443 §3.4, which wire does not build yet).
    /// Always inlined: it is a match on the protocol on the per-packet path.
    #[inline(always)]
    fn deliver(
        &mut self,
        now: u64,
        meta: IpMeta,
        payload: &[u8],
        whole: &[u8],
        rx: RxFrame<'_>,
        up: &mut impl Deliver,
    ) {
        match (meta.protocol, meta.src) {
            (IpProtocol::ICMP, IpAddr::V4(_))
            | (IpProtocol::ICMPV6, IpAddr::V6(_))
            | (IpProtocol::UDP, _)
            | (IpProtocol::TCP, _) => up.deliver(
                now,
                Delivery::Upper {
                    meta,
                    payload,
                    whole,
                    rx,
                },
            ),
            (IpProtocol::IPV6_NO_NXT, IpAddr::V6(_)) => self.counters.rx_ipv6_no_next_header += 1,
            _ => {
                self.counters.rx_drop_unknown_protocol += 1;
                if meta.src.is_ipv4() {
                    up.deliver(now, Delivery::ProtocolUnreachable { meta, whole });
                }
            }
        }
    }

    fn process_ipv4(&mut self, now: u64, bytes: &[u8], rx: RxFrame<'_>, up: &mut impl Deliver) {
        let Ok(pkt) = Ipv4Packet::new_checked(bytes) else {
            cold_path();
            self.counters.rx_drop_ipv4_malformed += 1;
            return;
        };
        let verdict = rx.meta.csum.ip;
        let judged = verdict != CsumVerdict::Unknown;
        let mut caps = self.checksums;
        // The NIC judged the header (`Stack::receive`): no software verification; a "bad"
        // is dropped below, after the length and option checks, as a software failure is.
        caps.verify_rx &= !judged;
        let repr = match Ipv4Repr::parse(&pkt, caps) {
            // Unjudged (no NIC) first: one test on the bare-stack path.
            Ok(r) if !judged => r,
            Ok(_) if verdict == CsumVerdict::Bad => {
                cold_path();
                self.counters.rx_drop_ipv4_bad_checksum += 1;
                return;
            }
            // `Good` (the only verdict left).
            Ok(r) => {
                self.counters.rx_ipv4_csum_trusted += u64::from(self.checksums.verify_rx);
                r
            }
            Err(wire::Error::BadChecksum) => {
                cold_path();
                self.counters.rx_drop_ipv4_bad_checksum += 1;
                return;
            }
            Err(_) => {
                cold_path();
                self.counters.rx_drop_ipv4_malformed += 1;
                return;
            }
        };
        // RFC 1122 §3.2.1.3: a source that is broadcast or multicast is silently discarded.
        if repr.src_addr.is_multicast() || self.is_v4_broadcast(repr.src_addr) {
            cold_path();
            self.counters.rx_drop_bad_source += 1;
            return;
        }
        let dst = repr.dst_addr;
        let dst_unicast = self.is_our_v4(dst);
        if !dst_unicast && !self.is_v4_broadcast(dst) {
            // Hosts do not forward (RFC 1122 §3.3.1); no multicast group membership yet.
            cold_path();
            self.counters.rx_drop_not_for_us += 1;
            return;
        }
        // RFC 1122 §3.2.1.7: a host must not discard a datagram for its TTL, so none is checked.
        let meta = IpMeta {
            src: IpAddr::V4(repr.src_addr),
            dst: IpAddr::V4(dst),
            protocol: repr.protocol,
            hop_limit: repr.hop_limit,
            dst_unicast,
            ecn: wire::Ecn::from_bits(repr.ecn),
        };
        if !pkt.is_fragment() {
            let total = usize::from(pkt.total_len());
            let whole = bytes.get(..total).unwrap_or(bytes);
            self.deliver(now, meta, pkt.payload(), whole, rx, up);
            return;
        }
        self.reassemble_ipv4(now, &pkt, repr, meta, rx, up);
    }

    /// An IPv4 fragment, into the reassembler; the datagram goes on once complete. Out of
    /// line: the unfragmented path above is the hot one.
    #[cold]
    #[inline(never)]
    fn reassemble_ipv4(
        &mut self,
        now: u64,
        pkt: &Ipv4Packet<&[u8]>,
        repr: Ipv4Repr,
        meta: IpMeta,
        rx: RxFrame<'_>,
        up: &mut impl Deliver,
    ) {
        let dst = repr.dst_addr;
        self.counters.rx_fragments += 1;
        // The NIC's verdicts covered this one frame, not the datagram it completes.
        let reasm_meta = rx.meta.hash_only();
        let rx = RxFrame {
            frame: rx.frame,
            meta: &reasm_meta,
        };
        let key = ReasmKey::V4 {
            src: repr.src_addr,
            dst,
            protocol: repr.protocol.0,
            ident: repr.ident,
        };
        let offset = usize::from(repr.frag_offset_bytes);
        let res = self.reasm.add(
            now,
            key,
            repr.protocol.0,
            offset,
            repr.more_frags,
            pkt.payload(),
        );
        self.count_reasm_evictions();
        match res {
            Ok(done) => {
                self.counters.rx_reassembled += 1;
                // Rebuild a whole datagram so ICMP errors can quote its header.
                let whole_repr = Ipv4Repr {
                    payload_len: done.payload.len(),
                    more_frags: false,
                    frag_offset_bytes: 0,
                    ..repr
                };
                let mut whole = vec![0u8; whole_repr.buffer_len()];
                let _ = whole_repr.emit(
                    &mut Ipv4Packet::new_unchecked(&mut whole[..]),
                    self.checksums,
                );
                if let Some(dst_payload) = whole.get_mut(whole_repr.header_len()..) {
                    dst_payload.copy_from_slice(&done.payload);
                }
                self.deliver(now, meta, &done.payload, &whole, rx, up);
            }
            Err(e) => self.count_reasm_drop(e),
        }
    }

    /// Counts the evictions the last `Reassembler::add` made, by reason.
    fn count_reasm_evictions(&mut self) {
        let ev = self.reasm.take_evictions();
        let c = &mut self.counters;
        c.rx_reasm_evicted_table += ev.table;
        c.rx_reasm_evicted_memory += ev.memory;
        c.rx_reasm_evicted_source += ev.source;
    }

    fn count_reasm_drop(&mut self, e: ReasmDrop) {
        let c = &mut self.counters;
        match e {
            ReasmDrop::Incomplete => {}
            ReasmDrop::Overlap => c.rx_drop_reasm_overlap += 1,
            ReasmDrop::Condemned => c.rx_drop_reasm_condemned += 1,
            ReasmDrop::Duplicate => c.rx_reasm_duplicate += 1,
            ReasmDrop::TableFull => c.rx_drop_reasm_table_full += 1,
            ReasmDrop::TooBig => c.rx_drop_reasm_too_big += 1,
            ReasmDrop::Malformed => c.rx_drop_reasm_malformed += 1,
        }
    }

    /// Walks hop-by-hop, destination options and routing headers (RFC 8200 §4) up to the
    /// upper layer or a fragment header, bounded by `wire::MAX_EXT_HEADERS`.
    fn walk_v6(&mut self, mut nh: IpProtocol, payload: &[u8], first: bool) -> Option<V6Walk> {
        let mut off = 0usize;
        for count in 0..=wire::MAX_EXT_HEADERS {
            match nh {
                IpProtocol::HOP_BY_HOP | IpProtocol::IPV6_OPTS | IpProtocol::IPV6_ROUTE => {
                    if count == wire::MAX_EXT_HEADERS
                        || (nh == IpProtocol::HOP_BY_HOP && (count != 0 || !first))
                    {
                        break;
                    }
                    let (Some(&next), Some(&len8)) = (payload.get(off), payload.get(off + 1))
                    else {
                        break;
                    };
                    if nh == IpProtocol::IPV6_ROUTE && payload.get(off + 3).is_some_and(|&s| s != 0)
                    {
                        // RFC 8200 §4.4: segments left ≠ 0 asks us to forward; hosts do not.
                        self.counters.rx_drop_ipv6_routing_header += 1;
                        return None;
                    }
                    let len = (usize::from(len8) + 1) * 8;
                    if payload.len() < off + len {
                        break;
                    }
                    off += len;
                    nh = IpProtocol(next);
                }
                IpProtocol::IPV6_FRAG => {
                    let Some(&[next, _, o0, o1, i0, i1, i2, i3]) = payload.get(off..off + 8) else {
                        break;
                    };
                    let v = u16::from_be_bytes([o0, o1]);
                    return Some(V6Walk::Fragment {
                        next,
                        header: Ipv6FragmentHeader {
                            offset_bytes: v & 0xfff8,
                            more_frags: v & 1 != 0,
                            ident: u32::from_be_bytes([i0, i1, i2, i3]),
                        },
                        offset: off + 8,
                    });
                }
                protocol => {
                    return Some(V6Walk::Upper {
                        protocol,
                        offset: off,
                    });
                }
            }
        }
        self.counters.rx_drop_ipv6_malformed += 1;
        None
    }

    fn process_ipv6(&mut self, now: u64, bytes: &[u8], rx: RxFrame<'_>, up: &mut impl Deliver) {
        let Ok(pkt) = Ipv6Packet::new_checked(bytes) else {
            self.counters.rx_drop_ipv6_malformed += 1;
            return;
        };
        let (src, dst) = (pkt.src_addr(), pkt.dst_addr());
        if src.is_multicast() {
            self.counters.rx_drop_bad_source += 1;
            return;
        }
        let dst_unicast = self.cfg.interface.is_our_v6(dst);
        let dst_ok = dst_unicast
            || dst == ALL_NODES
            || self
                .cfg
                .interface
                .ipv6
                .iter()
                .any(|c| solicited_node(c.addr) == dst);
        if !dst_ok {
            self.counters.rx_drop_not_for_us += 1;
            return;
        }
        let payload = pkt.payload();
        let whole = bytes.get(..40 + payload.len()).unwrap_or(bytes);
        let Some(walk) = self.walk_v6(pkt.next_header(), payload, true) else {
            return;
        };
        let mut meta = IpMeta {
            src: IpAddr::V6(src),
            dst: IpAddr::V6(dst),
            protocol: IpProtocol::IPV6_NO_NXT,
            hop_limit: pkt.hop_limit(),
            dst_unicast,
            ecn: wire::Ecn::from_bits(pkt.traffic_class()),
        };
        match walk {
            V6Walk::Upper { protocol, offset } => {
                meta.protocol = protocol;
                let upper = payload.get(offset..).unwrap_or(&[]);
                self.deliver(now, meta, upper, whole, rx, up);
            }
            V6Walk::Fragment {
                next,
                header,
                offset,
            } => {
                self.counters.rx_fragments += 1;
                let reasm_meta = rx.meta.hash_only();
                let rx = RxFrame {
                    frame: rx.frame,
                    meta: &reasm_meta,
                };
                let key = ReasmKey::V6 {
                    src,
                    dst,
                    ident: header.ident,
                };
                let data = payload.get(offset..).unwrap_or(&[]);
                let reassembled;
                let (next_proto, body): (u8, &[u8]) =
                    if header.offset_bytes == 0 && !header.more_frags {
                        // RFC 6946 §4: an atomic fragment is processed in isolation, never
                        // through (nor mixed with) the reassembly table.
                        (next, data)
                    } else {
                        let res = self.reasm.add(
                            now,
                            key,
                            next,
                            usize::from(header.offset_bytes),
                            header.more_frags,
                            data,
                        );
                        self.count_reasm_evictions();
                        match res {
                            Ok(done) => {
                                self.counters.rx_reassembled += 1;
                                reassembled = done;
                                (reassembled.protocol, &reassembled.payload)
                            }
                            Err(e) => {
                                self.count_reasm_drop(e);
                                return;
                            }
                        }
                    };
                // The reassembled payload starts with the header the fragment header named;
                // a second fragment header inside it is malformed (walk stops there).
                let Some(walk) = self.walk_v6(IpProtocol(next_proto), body, false) else {
                    return;
                };
                let V6Walk::Upper { protocol, offset } = walk else {
                    self.counters.rx_drop_ipv6_malformed += 1;
                    return;
                };
                meta.protocol = protocol;
                // A whole packet (fixed header + reassembled payload) for ICMP quoting.
                let mut whole = Vec::with_capacity(40 + body.len());
                whole.extend_from_slice(bytes.get(..40).unwrap_or(&[]));
                whole.extend_from_slice(body);
                if let Some(nh) = whole.get_mut(6) {
                    *nh = next_proto;
                }
                let len = u16::try_from(body.len()).unwrap_or(u16::MAX);
                if let Some(l) = whole.get_mut(4..6) {
                    l.copy_from_slice(&len.to_be_bytes());
                }
                let upper = body.get(offset..).unwrap_or(&[]);
                self.deliver(now, meta, upper, &whole, rx, up);
            }
        }
    }
}
