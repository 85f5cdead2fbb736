//! The egress part of the stack: everything that puts a frame on the wire.
//!
//! It owns the bounded transmit queue, the pool of recycled frame buffers, the neighbour cache
//! with its per-neighbour queues of packets awaiting resolution (and so ARP input and the
//! resolution requests), the IPv4 identification and IPv6 fragment identification counters,
//! and frame building: IP output with source selection, routing (on-link or gateway) and
//! fragmentation, and the TCP fast path that writes every header in front of a payload in
//! place. The other parts (IP input, ICMP, UDP, the TCP socket table) borrow it mutably to
//! send; none of them touches its fields.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::VecDeque;
use std::sync::Arc;

use wire::icmpv6::Icmpv6Repr;
use wire::{
    ArpOperation, ArpPacket, ArpRepr, Ecn, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    Icmpv6Packet, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6Packet,
    Ipv6Repr, TxMeta,
};

use crate::config::{StackConfig, solicited_node};
use crate::counters::Counters;
use crate::neighbor::{NeighborCache, PendingPacket, Resolution};
use crate::tx_pool::TxPool;

mod tcp_headers;
mod tcp_out;
mod tcp_train_out;
pub(crate) use tcp_out::{TcpIpFields, header_only, tcp_pair};

/// RFC 4861 §7.1.1/§7.1.2: NDP messages must arrive with hop limit 255 (not forwarded).
pub(crate) const NDP_HOP_LIMIT: u8 = 255;
/// Ethernet header without a VLAN tag.
pub(crate) const ETHERNET_HEADER_LEN: usize = 14;
pub(crate) const IPV4_HEADER_LEN: usize = 20;
/// The fixed IPv6 header (TCP never carries extension headers here).
pub(crate) const IPV6_HEADER_LEN: usize = 40;
pub(crate) const TCP_HEADER_MIN: usize = 20;
/// 20 bytes plus at most 40 of options (RFC 9293 §3.1).
pub(crate) const TCP_HEADER_MAX: usize = 60;

/// The transmit side of one stack. See the module documentation.
pub(crate) struct Egress {
    pub(crate) cfg: Arc<StackConfig>,
    /// The counters this part increments (link, ARP/ND, transmit); `Stack::counters` sums
    /// every part's.
    counters: Counters,
    neighbors: NeighborCache,
    /// Frames with what each asks of the device. Invariant: `tx.len()` ≤
    /// `limits.tx_queue_frames_max`.
    tx: VecDeque<(Vec<u8>, TxMeta)>,
    /// Frame buffers handed back by the driver, reused by the transmit path (bounded,
    /// trimmed after bursts).
    pool: TxPool,
    ipv4_ident: u16,
    ipv6_frag_ident: u32,
    /// The TCP header length (options included) the TCP flush reserves room for in front of
    /// the payload: the last one the fast path emitted, so a steady flow never moves its
    /// payload.
    tx_header_guess: usize,
    /// Copies of the configuration values the per-segment transmit path reads (the
    /// configuration never changes once the stack is built): read through the `Arc`, each
    /// costs a load more and none can be hoisted past the writes around it (callgrind bulk).
    tx_queue_max: usize,
    mtu_bytes: u16,
    checksums: wire::ChecksumCaps,
    hop_limit: u8,
    mac: EthernetAddress,
    /// The last destination the TCP fast path routed and its next hop
    /// ([`Egress::unicast_next_hop`], a function of the destination and the configuration
    /// alone, so never stale): a flow's segments skip the prefix and broadcast checks.
    last_hop: Option<(IpAddr, Option<IpAddr>)>,
}

impl core::fmt::Debug for Egress {
    // A summary: queued frames would drown the output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Egress")
            .field("neighbors", &self.neighbors.len())
            .field("tx_queued_frames", &self.tx.len())
            .finish_non_exhaustive()
    }
}

/// The Ethernet multicast address of an IPv4 multicast group (RFC 1112 §6.4).
fn ipv4_multicast_mac(addr: Ipv4Addr) -> EthernetAddress {
    let o = addr.octets();
    EthernetAddress([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
}

fn is_link_local_v6(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// A whole IPv6 packet: fixed header, an optional fragment header, and `payload`.
fn build_ipv6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: IpProtocol,
    hop_limit: u8,
    traffic_class: u8,
    frag: Option<Ipv6FragmentHeader>,
    payload: &[u8],
) -> Option<Vec<u8>> {
    let mut ext_headers = [None; wire::MAX_EXT_HEADERS];
    if let (Some(f), Some(slot)) = (frag, ext_headers.get_mut(0)) {
        *slot = Some(Ipv6ExtHeader::Fragment(f));
    }
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header,
        payload_len: payload.len(),
        hop_limit,
        traffic_class,
        flow_label: 0,
        ext_headers,
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]))
        .ok()?;
    buf.get_mut(repr.header_len()..)?.copy_from_slice(payload);
    Some(buf)
}

impl Egress {
    pub(crate) fn new(cfg: Arc<StackConfig>) -> Egress {
        let l = &cfg.limits;
        let neighbors = NeighborCache::new(
            l.neighbor_entries_max,
            l.neighbor_pending_packets_max,
            l.neighbor_reachable_ns,
            l.neighbor_retry_ns,
            l.neighbor_requests_max,
        );
        Egress {
            neighbors,
            counters: Counters::default(),
            tx: VecDeque::new(),
            pool: TxPool::new(
                cfg.interface.mtu_bytes,
                cfg.tx_offload.tso_payload_bytes_max > 0,
            ),
            ipv4_ident: 1,
            ipv6_frag_ident: 1,
            tx_header_guess: TCP_HEADER_MIN,
            tx_queue_max: l.tx_queue_frames_max,
            mtu_bytes: cfg.interface.mtu_bytes,
            checksums: cfg.checksums,
            hop_limit: cfg.hop_limit,
            mac: cfg.interface.mac,
            last_hop: None,
            cfg,
        }
    }

    /// This part's counters.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The neighbour cache (read-only; it changes through this part's methods).
    pub(crate) fn neighbors(&self) -> &NeighborCache {
        &self.neighbors
    }

    /// The TCP header length the last fast-path segment had: the room TCP reserves in front
    /// of the next payload.
    pub(crate) fn tx_header_guess(&self) -> usize {
        self.tx_header_guess
    }

    /// Frames waiting in the transmit queue.
    pub(crate) fn tx_len(&self) -> usize {
        self.tx.len()
    }

    /// Frames the transmit queue has room for.
    pub(crate) fn tx_room(&self) -> usize {
        self.tx_queue_max.saturating_sub(self.tx.len())
    }

    /// Counts `n` segments sent in a train (`tcp_train.rs`).
    pub(crate) fn count_train_segments(&mut self, n: u16) {
        self.counters.tx_train_segments += u64::from(n);
    }

    /// True when the transmit queue has no room for another frame.
    pub(crate) fn tx_full(&self) -> bool {
        self.tx.len() >= self.tx_queue_max
    }

    /// The oldest queued frame with its offload requests, counted as sent.
    pub(crate) fn pop_frame(&mut self) -> Option<(Vec<u8>, TxMeta)> {
        let frame = self.tx.pop_front()?;
        self.counters.tx_frames += 1;
        Some(frame)
    }

    /// Runs the neighbour cache's timers: expiry, resolution retries, and the queues of
    /// neighbours that gave up.
    /// When the buffer pool's next trim is due ([`TxPool::poll_timeout`]).
    pub(crate) fn pool_poll_timeout(&self) -> Option<u64> {
        self.pool.poll_timeout()
    }

    pub(crate) fn handle_timeout(&mut self, now: u64) {
        self.counters.tx_pool_trimmed_frames += self.pool.trim(now);
        let actions = self.neighbors.handle_timeout(now);
        self.counters.neighbor_expired += actions.expired as u64;
        for addr in actions.retry {
            self.send_resolution_request(addr);
        }
        for (addr, dropped) in actions.failed {
            match addr {
                IpAddr::V4(_) => self.counters.arp_resolution_failed += dropped as u64,
                IpAddr::V6(_) => self.counters.nd_resolution_failed += dropped as u64,
            }
        }
    }

    /// Learns (or refreshes) `addr` → `mac` (RFC 4861 §7.2.3/§7.2.5 via ICMPv6 input) and
    /// sends the packets that waited for it. `create` adds an entry when there is none.
    pub(crate) fn learn_neighbor(
        &mut self,
        now: u64,
        addr: IpAddr,
        mac: EthernetAddress,
        create: bool,
    ) {
        let (released, evicted) = self.neighbors.learn(now, addr, mac, create);
        if evicted {
            self.counters.neighbor_evictions += 1;
        }
        for p in released {
            self.send_frame(mac, p.ethertype, &p.ip_packet);
        }
    }

    /// Gives a frame buffer back once the driver is done with it (typically a frame from
    /// `poll_transmit` after the NIC sent it), so the transmit path can reuse it instead of
    /// allocating. Optional: buffers beyond the pool's bounds, or oddly large ones, are dropped.
    pub(crate) fn recycle(&mut self, frame: Vec<u8>) {
        self.pool.recycle(frame);
    }

    /// A frame buffer of exactly `len` bytes ([`TxPool::take`]): contents unspecified.
    pub(crate) fn take_frame_buf(&mut self, len: usize) -> Vec<u8> {
        self.pool.take(len)
    }

    pub(crate) fn is_our_v4(&self, a: Ipv4Addr) -> bool {
        self.cfg.interface.is_our_v4(a)
    }

    pub(crate) fn is_our_v6(&self, a: Ipv6Addr) -> bool {
        self.cfg.interface.is_our_v6(a)
    }

    pub(crate) fn is_our_ip(&self, a: IpAddr) -> bool {
        self.cfg.interface.is_our_ip(a)
    }

    /// The unicast next hop `route_ip` would resolve for `dst`, or `None` whenever
    /// `route_ip` would do something else (our own address, broadcast, multicast, no route).
    pub(crate) fn unicast_next_hop(&self, dst: IpAddr) -> Option<IpAddr> {
        if self.is_our_ip(dst) {
            return None;
        }
        let ifc = &self.cfg.interface;
        match dst {
            IpAddr::V4(d) => {
                if self.is_v4_broadcast(d) || d.is_multicast() {
                    None
                } else if ifc.ipv4.iter().any(|c| c.contains(d)) {
                    Some(IpAddr::V4(d))
                } else {
                    ifc.gateway_v4.map(IpAddr::V4)
                }
            }
            IpAddr::V6(d) => {
                if d.is_multicast() {
                    None
                } else if is_link_local_v6(d) || ifc.ipv6.iter().any(|c| c.contains(d)) {
                    Some(IpAddr::V6(d))
                } else {
                    ifc.gateway_v6.map(IpAddr::V6)
                }
            }
        }
    }

    /// [`Egress::unicast_next_hop`], answered from `last_hop` when `dst` is the last
    /// destination asked about.
    #[inline]
    pub(crate) fn unicast_next_hop_cached(&mut self, dst: IpAddr) -> Option<IpAddr> {
        if let Some((d, hop)) = self.last_hop {
            if d == dst {
                return hop;
            }
        }
        let hop = self.unicast_next_hop(dst);
        self.last_hop = Some((dst, hop));
        hop
    }

    /// A TSO frame to `dst` can leave now: its next hop is a resolved neighbour. A frame beyond
    /// the MTU cannot wait in the neighbour queue (it would leave without its `TxMeta`), so
    /// TCP sends single segments until the neighbour resolves.
    pub(crate) fn tso_route_ready(&self, now: u64, dst: IpAddr) -> bool {
        self.unicast_next_hop(dst)
            .is_some_and(|hop| self.neighbors.lookup(now, hop).is_some())
    }

    pub(crate) fn is_v4_broadcast(&self, a: Ipv4Addr) -> bool {
        self.cfg.interface.is_v4_broadcast(a)
    }

    /// RFC 1122 §3.3.4.3 / RFC 6724 (simplified): the address on the destination's prefix,
    /// else the first address of the family; for IPv6, link-local destinations get the
    /// link-local source and global ones a non-link-local source when there is one.
    pub(crate) fn select_source(&self, dst: IpAddr) -> Option<IpAddr> {
        let ifc = &self.cfg.interface;
        match dst {
            IpAddr::V4(d) => ifc
                .ipv4
                .iter()
                .find(|c| c.contains(d))
                .or_else(|| ifc.ipv4.first())
                .map(|c| IpAddr::V4(c.addr)),
            IpAddr::V6(d) => {
                let link_scope =
                    is_link_local_v6(d) || (d.is_multicast() && d.octets()[1] & 0x0f <= 2);
                let pick = if link_scope {
                    ifc.ipv6.iter().find(|c| is_link_local_v6(c.addr))
                } else {
                    ifc.ipv6
                        .iter()
                        .find(|c| !is_link_local_v6(c.addr) && c.contains(d))
                        .or_else(|| ifc.ipv6.iter().find(|c| !is_link_local_v6(c.addr)))
                };
                pick.or_else(|| ifc.ipv6.first())
                    .map(|c| IpAddr::V6(c.addr))
            }
        }
    }

    pub(crate) fn process_arp(&mut self, now: u64, payload: &[u8]) {
        let Ok(arp) = ArpPacket::new_checked(payload).and_then(|p| ArpRepr::parse(&p)) else {
            self.counters.rx_drop_malformed_arp += 1;
            return;
        };
        let mac = self.mac;
        let spa = arp.source_protocol_addr;
        let sha = arp.source_hardware_addr;
        if self.is_our_v4(spa) {
            // Another station claims one of our addresses (our own frames were dropped at
            // the link layer). RFC 5227 §2.4 defence is not implemented: count it.
            self.counters.arp_rx_conflict += 1;
            return;
        }
        if sha.is_multicast() {
            self.counters.rx_drop_malformed_arp += 1;
            return;
        }
        let for_us = self.is_our_v4(arp.target_protocol_addr);
        // RFC 826 "Packet Reception": update an existing entry for the sender (this is what a
        // gratuitous ARP relies on); add one only when the packet is aimed at us. A sender of
        // 0.0.0.0 is an address probe (RFC 5227 §2.1.1) and teaches nothing.
        let mut merged = false;
        if !spa.is_unspecified() {
            let existed = self.neighbors.contains(IpAddr::V4(spa));
            let (released, evicted) = self.neighbors.learn(now, IpAddr::V4(spa), sha, for_us);
            merged = existed;
            if evicted {
                self.counters.neighbor_evictions += 1;
            }
            for p in released {
                self.send_frame(sha, p.ethertype, &p.ip_packet);
            }
        }
        if !for_us {
            if !merged {
                self.counters.arp_rx_other_target += 1;
            }
            return;
        }
        if arp.operation == ArpOperation::REQUEST {
            let reply = ArpRepr {
                operation: ArpOperation::REPLY,
                source_hardware_addr: mac,
                source_protocol_addr: arp.target_protocol_addr,
                target_hardware_addr: sha,
                target_protocol_addr: spa,
            };
            self.send_arp(sha, &reply);
            self.counters.arp_requests_answered += 1;
        }
    }

    fn send_arp(&mut self, dst_mac: EthernetAddress, arp: &ArpRepr) {
        let mut buf = vec![0u8; arp.buffer_len()];
        if arp
            .emit(&mut ArpPacket::new_unchecked(&mut buf[..]))
            .is_ok()
        {
            self.send_frame(dst_mac, EtherType::ARP, &buf);
        }
    }

    /// The MAC to forward a packet to `addr` on this link, re-validating the entry once
    /// before it expires (as [`NeighborCache::lookup_for_send`] does for our own packets).
    pub(crate) fn neighbor_for_send(&mut self, now: u64, addr: IpAddr) -> Option<EthernetAddress> {
        let (mac, refresh) = self.neighbors.lookup_for_send(now, addr)?;
        if refresh {
            self.send_refresh_request(addr, mac);
        }
        Some(mac)
    }

    /// Starts resolving `addr` unless an entry exists; counts a full cache. Returns whether a
    /// request went out.
    pub(crate) fn resolve_neighbor(&mut self, now: u64, addr: IpAddr) -> bool {
        let (res, evicted) = self.neighbors.start_resolution(now, addr);
        if evicted {
            self.counters.neighbor_evictions += 1;
        }
        match res {
            Resolution::QueuedSendRequest => {
                self.send_resolution_request(addr);
                true
            }
            Resolution::DroppedCacheFull => {
                self.counters.neighbor_cache_full += 1;
                false
            }
            _ => false,
        }
    }

    /// Re-validates a neighbour in use before its entry expires: a unicast ARP request
    /// (RFC 1122 §2.3.2.1) or a unicast NS (RFC 4861 §7.2.2) to the MAC we hold.
    pub(crate) fn send_refresh_request(&mut self, addr: IpAddr, mac_peer: EthernetAddress) {
        let mac = self.mac;
        match addr {
            IpAddr::V4(target) => {
                let Some(IpAddr::V4(src)) = self.select_source(addr) else {
                    return;
                };
                let req = ArpRepr {
                    operation: ArpOperation::REQUEST,
                    source_hardware_addr: mac,
                    source_protocol_addr: src,
                    target_hardware_addr: mac_peer,
                    target_protocol_addr: target,
                };
                self.send_arp(mac_peer, &req);
                self.counters.arp_requests_sent += 1;
            }
            IpAddr::V6(target) => {
                let Some(IpAddr::V6(src)) = self.select_source(addr) else {
                    return;
                };
                let ns = Icmpv6Repr::NeighborSolicit {
                    target_addr: target,
                    source_lladdr: Some(mac),
                };
                if let Some(pkt) = self.build_icmpv6(src, target, NDP_HOP_LIMIT, &ns) {
                    self.send_frame(mac_peer, EtherType::IPV6, &pkt);
                    self.counters.nd_solicits_sent += 1;
                }
            }
        }
    }

    /// Sends one ARP request or neighbour solicitation for `addr`.
    pub(crate) fn send_resolution_request(&mut self, addr: IpAddr) {
        let mac = self.mac;
        match addr {
            IpAddr::V4(target) => {
                let Some(IpAddr::V4(src)) = self.select_source(addr) else {
                    return;
                };
                let req = ArpRepr {
                    operation: ArpOperation::REQUEST,
                    source_hardware_addr: mac,
                    source_protocol_addr: src,
                    target_hardware_addr: EthernetAddress([0; 6]),
                    target_protocol_addr: target,
                };
                self.send_arp(EthernetAddress::BROADCAST, &req);
                self.counters.arp_requests_sent += 1;
            }
            IpAddr::V6(target) => {
                let Some(IpAddr::V6(src)) = self.select_source(addr) else {
                    return;
                };
                // RFC 4861 §7.2.2: multicast to the target's solicited-node address, with our
                // link-layer address in the source option.
                let dst = solicited_node(target);
                let ns = Icmpv6Repr::NeighborSolicit {
                    target_addr: target,
                    source_lladdr: Some(mac),
                };
                if let Some(pkt) = self.build_icmpv6(src, dst, NDP_HOP_LIMIT, &ns) {
                    self.send_frame(EthernetAddress::ipv6_multicast(dst), EtherType::IPV6, &pkt);
                    self.counters.nd_solicits_sent += 1;
                }
            }
        }
    }

    pub(crate) fn build_icmpv6_payload(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        repr: &Icmpv6Repr<'_>,
    ) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(
            &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
            src,
            dst,
            self.checksums,
        )
        .ok()?;
        Some(buf)
    }

    /// A whole, unfragmented IPv6 packet carrying an ICMPv6 message.
    pub(crate) fn build_icmpv6(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
        repr: &Icmpv6Repr<'_>,
    ) -> Option<Vec<u8>> {
        let payload = self.build_icmpv6_payload(src, dst, repr)?;
        build_ipv6(src, dst, IpProtocol::ICMPV6, hop_limit, 0, None, &payload)
    }

    /// Sends an IPv4 datagram, fragmenting it when it exceeds the MTU and `dont_frag` is
    /// clear (RFC 791 §3.2); with DF set an oversized datagram is a counted drop (TCP sets DF
    /// and sizes segments to the MSS, RFC 1191). `tos` is the whole type-of-service byte
    /// (DSCP and ECN).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_ipv4(
        &mut self,
        now: u64,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        dont_frag: bool,
        tos: u8,
        payload: &[u8],
    ) {
        let mtu = usize::from(self.mtu_bytes);
        let ident = self.ipv4_ident;
        self.ipv4_ident = self.ipv4_ident.wrapping_add(1);
        let base = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol,
            payload_len: payload.len(),
            hop_limit: self.hop_limit,
            dscp: tos >> 2,
            ecn: tos & 0b11,
            ident,
            dont_frag,
            more_frags: false,
            frag_offset_bytes: 0,
        };
        if 20 + payload.len() <= mtu {
            if let Some(p) = self.build_ipv4(&base, payload) {
                self.route_ip(now, IpAddr::V4(dst), EtherType::IPV4, p);
            }
            return;
        }
        let chunk = mtu.saturating_sub(20) & !7;
        if dont_frag || chunk == 0 || 20 + payload.len() > 65_535 {
            self.counters.tx_drop_too_big += 1;
            return;
        }
        for (i, piece) in payload.chunks(chunk).enumerate() {
            let offset = i * chunk;
            let Ok(off16) = u16::try_from(offset) else {
                self.counters.tx_drop_too_big += 1;
                return;
            };
            let frag = Ipv4Repr {
                payload_len: piece.len(),
                more_frags: offset + piece.len() < payload.len(),
                frag_offset_bytes: off16,
                ..base
            };
            if let Some(p) = self.build_ipv4(&frag, piece) {
                self.counters.tx_fragments += 1;
                self.route_ip(now, IpAddr::V4(dst), EtherType::IPV4, p);
            }
        }
    }

    fn build_ipv4(&self, repr: &Ipv4Repr, payload: &[u8]) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), self.checksums)
            .ok()?;
        buf.get_mut(repr.header_len()..)?.copy_from_slice(payload);
        Some(buf)
    }

    /// Sends an IPv6 packet, fragmenting at the source when it exceeds the MTU
    /// (RFC 8200 §4.5; routers never fragment IPv6).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_ipv6(
        &mut self,
        now: u64,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: IpProtocol,
        hop_limit: u8,
        ecn: Ecn,
        payload: &[u8],
    ) {
        let mtu = usize::from(self.mtu_bytes);
        if 40 + payload.len() <= mtu {
            if let Some(p) = build_ipv6(src, dst, next_header, hop_limit, ecn.bits(), None, payload)
            {
                self.route_ip(now, IpAddr::V6(dst), EtherType::IPV6, p);
            } else {
                self.counters.tx_drop_too_big += 1;
            }
            return;
        }
        let chunk = mtu.saturating_sub(48) & !7;
        if chunk == 0 || payload.len() > 65_535 - 8 {
            self.counters.tx_drop_too_big += 1;
            return;
        }
        let ident = self.ipv6_frag_ident;
        self.ipv6_frag_ident = self.ipv6_frag_ident.wrapping_add(1);
        for (i, piece) in payload.chunks(chunk).enumerate() {
            let offset = i * chunk;
            let Ok(off16) = u16::try_from(offset) else {
                self.counters.tx_drop_too_big += 1;
                return;
            };
            let frag = Ipv6FragmentHeader {
                offset_bytes: off16,
                more_frags: offset + piece.len() < payload.len(),
                ident,
            };
            if let Some(p) = build_ipv6(
                src,
                dst,
                next_header,
                hop_limit,
                ecn.bits(),
                Some(frag),
                piece,
            ) {
                self.counters.tx_fragments += 1;
                self.route_ip(now, IpAddr::V6(dst), EtherType::IPV6, p);
            }
        }
    }

    /// Negative advice from TCP about the path to `dst` (RFC 1122 §2.3.2.1, §4.2.3.5): a
    /// resolved entry for its next hop is re-validated by a broadcast request (counted
    /// `neighbor_revalidations`) while it stays in use; rate limited per neighbour by
    /// [`NeighborCache::advise_unreachable`]. Cold: called on retransmission timeouts only.
    #[cold]
    pub(crate) fn advise_unreachable(&mut self, now: u64, dst: IpAddr) {
        let Some(next_hop) = self.unicast_next_hop(dst) else {
            return;
        };
        if self.neighbors.advise_unreachable(now, next_hop) {
            self.counters.neighbor_revalidations += 1;
            self.send_resolution_request(next_hop);
        }
    }

    /// Chooses the link-layer destination of an IP packet and sends it, or parks it behind a
    /// neighbour resolution (RFC 1122 §2.3.2.2: queue at least one packet per neighbour).
    pub(crate) fn route_ip(
        &mut self,
        now: u64,
        dst: IpAddr,
        ethertype: EtherType,
        packet: Vec<u8>,
    ) {
        if self.is_our_ip(dst) {
            // No loopback interface: traffic to ourselves never reaches the wire.
            self.counters.tx_drop_loopback += 1;
            return;
        }
        let ifc = &self.cfg.interface;
        let next_hop = match dst {
            IpAddr::V4(d) => {
                if self.is_v4_broadcast(d) {
                    self.send_frame(EthernetAddress::BROADCAST, ethertype, &packet);
                    return;
                }
                if d.is_multicast() {
                    self.send_frame(ipv4_multicast_mac(d), ethertype, &packet);
                    return;
                }
                if ifc.ipv4.iter().any(|c| c.contains(d)) {
                    Some(IpAddr::V4(d))
                } else {
                    ifc.gateway_v4.map(IpAddr::V4)
                }
            }
            IpAddr::V6(d) => {
                if d.is_multicast() {
                    self.send_frame(EthernetAddress::ipv6_multicast(d), ethertype, &packet);
                    return;
                }
                if is_link_local_v6(d) || ifc.ipv6.iter().any(|c| c.contains(d)) {
                    Some(IpAddr::V6(d))
                } else {
                    ifc.gateway_v6.map(IpAddr::V6)
                }
            }
        };
        let Some(next_hop) = next_hop else {
            self.counters.tx_drop_no_route += 1;
            return;
        };
        if let Some((mac, refresh)) = self.neighbors.lookup_for_send(now, next_hop) {
            self.send_frame(mac, ethertype, &packet);
            if refresh {
                self.send_refresh_request(next_hop, mac);
            }
            return;
        }
        let pending = PendingPacket {
            ethertype,
            ip_packet: packet,
        };
        let (res, evicted) = self.neighbors.lookup_or_queue(now, next_hop, pending);
        if evicted {
            self.counters.neighbor_evictions += 1;
        }
        match res {
            Resolution::Known(_) | Resolution::Queued => {}
            Resolution::QueuedSendRequest => self.send_resolution_request(next_hop),
            Resolution::DroppedQueueFull => match next_hop {
                IpAddr::V4(_) => self.counters.arp_pending_queue_full += 1,
                IpAddr::V6(_) => self.counters.nd_pending_queue_full += 1,
            },
            Resolution::DroppedCacheFull => self.counters.neighbor_cache_full += 1,
        }
    }

    /// Frames `payload` and appends it to the transmit queue (a counted drop when full).
    pub(crate) fn send_frame(
        &mut self,
        dst: EthernetAddress,
        ethertype: EtherType,
        payload: &[u8],
    ) {
        if self.tx.len() >= self.tx_queue_max {
            self.counters.tx_drop_queue_full += 1;
            return;
        }
        let eth = EthernetRepr {
            src_addr: self.mac,
            dst_addr: dst,
            vlan: None,
            ethertype,
        };
        let mut frame = vec![0u8; eth.header_len() + payload.len()];
        if eth
            .emit(&mut EthernetFrame::new_unchecked(&mut frame[..]))
            .is_err()
        {
            return;
        }
        if let Some(d) = frame.get_mut(eth.header_len()..) {
            d.copy_from_slice(payload);
        }
        self.tx.push_back((frame, TxMeta::NONE));
    }
}
