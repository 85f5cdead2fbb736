//! The host stack of one shard: link layer, neighbour resolution, IP input/output, ICMP and
//! UDP. TCP glue lives in `crate::tcp_sockets`.
//!
//! Responsibilities, top to bottom of this file:
//! - construction and getters;
//! - the driver interface: [`Stack::receive`], [`Stack::poll_transmit`],
//!   [`Stack::poll_timeout`], [`Stack::handle_timeout`], [`Stack::poll_event`];
//! - receive path: Ethernet → ARP | IPv4 | IPv6 → reassembly → ICMP | UDP | TCP;
//! - transmit path: source selection, routing (on-link or gateway), IP fragmentation,
//!   neighbour resolution with a capped queue per neighbour, the bounded transmit queue;
//! - ICMP errors with suppression rules and a token-bucket rate limit;
//! - the UDP socket API.
//!
//! Driver contract: call `receive` for every frame and `handle_timeout` when the deadline from
//! `poll_timeout` passes; after either (and after any application call) drain
//! `poll_transmit` and `poll_event`. `now` must never go backwards.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::collections::{BTreeMap, VecDeque};

use wire::icmpv4::Icmpv4Repr;
use wire::icmpv6::Icmpv6Repr;
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    Icmpv4Packet, Icmpv6Packet, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6ExtHeader,
    Ipv6FragmentHeader, Ipv6Packet, Ipv6Repr, UdpPacket, UdpRepr,
};

use crate::config::{ALL_NODES, StackConfig, solicited_node};
use crate::counters::Counters;
use crate::neighbor::{NeighborCache, PendingPacket, Resolution};
use crate::reasm::{ReasmDrop, ReasmKey, Reassembler};
use crate::socket::{
    EchoReply, Readiness, SocketError, SocketEvent, SocketHandle, UdpDatagram, UdpSocket,
};
use crate::tcp_sockets::TcpState;

/// First and last ephemeral ports (RFC 6335 §6: 49152–65535).
pub(crate) const EPHEMERAL_FIRST: u16 = 49152;
pub(crate) const EPHEMERAL_LAST: u16 = 65535;
/// RFC 1812 §4.3.2.3: an ICMPv4 error holds as much of the invoking packet as keeps the error
/// within 576 bytes.
const ICMPV4_ERROR_MAX_BYTES: usize = 576;
/// RFC 4443 §2.4(c): an ICMPv6 error must not exceed the minimum IPv6 MTU.
const ICMPV6_ERROR_MAX_BYTES: usize = 1280;
/// Echo replies kept for the application before further ones are dropped (and counted).
const ECHO_REPLIES_MAX: usize = 64;
/// Recycled transmit buffers kept for reuse (`Stack::recycle`); more are freed. At least the
/// frames a shard can have in flight, so a steady flow neither frees nor allocates: on the
/// runtime's `mem` wire, a bulk sender's buffers fill the wire's transmit ring (4096 slots by
/// default) and the NIC model's (512) before they come back as transmit completions, all at
/// once if the receiver stalls. (256 freed and re-allocated about one buffer in ten there.)
const TX_FREE_FRAMES_MAX: usize = 5120;
/// `Stack::recycle` keeps buffers of capacity ≤ MTU + this (Ethernet header and TCP options
/// room): with `TX_FREE_FRAMES_MAX`, at most about 8 MiB at a 1500-byte MTU, reached only by
/// a sender that had that many frames in flight.
const TX_FREE_SLACK_BYTES: usize = 128;
/// RFC 4861 §7.1.1/§7.1.2: NDP messages must arrive with hop limit 255 (not forwarded).
const NDP_HOP_LIMIT: u8 = 255;

/// Where an upper-layer payload came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpMeta {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) protocol: IpProtocol,
    pub(crate) hop_limit: u8,
    /// False for broadcast and multicast destinations (no ICMP errors, no RST, no echo).
    pub(crate) dst_unicast: bool,
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

#[derive(Debug)]
pub(crate) enum Socket {
    Udp(UdpSocket),
    Tcp(TcpState),
}

#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) generation: u32,
    pub(crate) socket: Option<Socket>,
    /// Conditions that became true and were not yet reported.
    pub(crate) pending: Readiness,
    /// True while this slot's index sits in `Stack::events`.
    pub(crate) queued: bool,
}

/// One shard's host stack. See the module documentation for the driver contract.
pub struct Stack {
    pub(crate) cfg: StackConfig,
    pub(crate) counters: Counters,
    pub(crate) neighbors: NeighborCache,
    pub(crate) reasm: Reassembler,
    /// Invariant: `tx.len()` ≤ `limits.tx_queue_frames_max`.
    pub(crate) tx: VecDeque<Vec<u8>>,
    /// Frame buffers handed back by the driver (`recycle`), reused by the TCP transmit path.
    /// Invariant: `tx_free.len()` ≤ `TX_FREE_FRAMES_MAX` and each capacity ≤ MTU +
    /// `TX_FREE_SLACK_BYTES`.
    pub(crate) tx_free: Vec<Vec<u8>>,
    pub(crate) ipv4_ident: u16,
    pub(crate) ipv6_frag_ident: u32,
    /// ICMP error tokens, in thousandths of a token (token bucket).
    icmp_tokens_milli: u64,
    icmp_refill_ns: u64,
    /// Invariant: `slots.len()` ≤ `limits.sockets_max`.
    pub(crate) slots: Vec<Slot>,
    /// Indexes of empty slots (reused last-freed first).
    free_slots: Vec<usize>,
    /// Port → slots bound to it (UDP sockets, TCP listeners), so input demultiplexing never
    /// scans the socket table.
    ports: BTreeMap<(PortKind, u16), Vec<usize>>,
    /// Slot indexes with pending readiness, each at most once (so bounded by `slots`).
    pub(crate) events: VecDeque<u32>,
    pub(crate) next_ephemeral: u16,
    echo_replies: VecDeque<EchoReply>,
    pub(crate) tcp: crate::tcp_sockets::TcpTable,
    /// The engine counters of every TCP connection whose slot was freed (closed, aborted or
    /// exported), summed; [`Stack::tcp_counters`] adds the live ones.
    tcp_counters_released: tcp::Counters,
}

impl core::fmt::Debug for Stack {
    // A summary: the socket buffers and queued frames would drown the output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stack")
            .field("mac", &self.cfg.interface.mac)
            .field("ipv4", &self.cfg.interface.ipv4)
            .field("ipv6", &self.cfg.interface.ipv6)
            .field("neighbors", &self.neighbors.len())
            .field("reassembly", &self.reasm.len())
            .field("tx_queued_frames", &self.tx.len())
            .field("sockets", &(self.slots.len() - self.free_slots.len()))
            .field("tcp", &self.tcp)
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

impl Stack {
    // ------------------------------------------------------------------ construction

    pub fn new(cfg: StackConfig) -> Stack {
        let l = &cfg.limits;
        let neighbors = NeighborCache::new(
            l.neighbor_entries_max,
            l.neighbor_pending_packets_max,
            l.neighbor_reachable_ns,
            l.neighbor_retry_ns,
            l.neighbor_requests_max,
        );
        let reasm = Reassembler::new(l.reasm_datagrams_max, l.reasm_bytes_max, l.reasm_timeout_ns);
        let icmp_tokens_milli = u64::from(l.icmp_errors_burst_max) * 1000;
        Stack {
            neighbors,
            reasm,
            tx: VecDeque::new(),
            tx_free: Vec::new(),
            ipv4_ident: 1,
            ipv6_frag_ident: 1,
            icmp_tokens_milli,
            icmp_refill_ns: 0,
            slots: Vec::new(),
            free_slots: Vec::new(),
            ports: BTreeMap::new(),
            events: VecDeque::new(),
            next_ephemeral: EPHEMERAL_FIRST,
            echo_replies: VecDeque::new(),
            tcp: crate::tcp_sockets::TcpTable::new(cfg.secret),
            tcp_counters_released: tcp::Counters::default(),
            counters: Counters::default(),
            cfg,
        }
    }

    /// The configuration the stack runs with.
    pub fn config(&self) -> &StackConfig {
        &self.cfg
    }

    /// A snapshot of every counter.
    pub fn counters(&self) -> Counters {
        self.counters.clone()
    }

    /// The TCP engine's per-connection counters (retransmissions, timeouts, drops inside a
    /// connection, ...) summed over every connection this stack has held: those released so
    /// far and those still open. A connection exported to another stack counts here for what
    /// happened while it was here; the importer counts from the import on. Costs a walk over
    /// the socket table.
    pub fn tcp_counters(&self) -> tcp::Counters {
        let mut total = self.tcp_counters_released;
        for slot in &self.slots {
            if let Some(Socket::Tcp(crate::tcp_sockets::TcpState::Conn(c))) = &slot.socket {
                total.add(c.engine_counters());
            }
        }
        total
    }

    /// The MAC the neighbour cache holds for `addr`, if resolved and unexpired.
    pub fn neighbor(&self, now: u64, addr: IpAddr) -> Option<EthernetAddress> {
        self.neighbors.lookup(now, addr)
    }

    /// Datagrams currently under reassembly.
    pub fn reassembly_in_progress(&self) -> usize {
        self.reasm.len()
    }

    // ------------------------------------------------------------------ driver interface

    /// Processes one received Ethernet frame. `rss_hash` is the hash the NIC computed for it
    /// (DESIGN principle 4); the TCP connection table reuses it.
    pub fn receive(&mut self, now: u64, frame: &[u8], rss_hash: Option<u32>) {
        self.counters.rx_frames += 1;
        let Ok(view) = EthernetFrame::new_checked(frame) else {
            self.counters.rx_drop_malformed_eth += 1;
            return;
        };
        let Ok(eth) = EthernetRepr::parse(&view) else {
            self.counters.rx_drop_malformed_eth += 1;
            return;
        };
        if eth.src_addr == self.cfg.interface.mac || eth.src_addr.is_multicast() {
            // Our own frame looped back, or a source no station may use (IEEE 802.3 §3.2.3).
            self.counters.rx_drop_bad_src_mac += 1;
            return;
        }
        if eth.dst_addr != self.cfg.interface.mac && eth.dst_addr.is_unicast() {
            self.counters.rx_drop_other_mac += 1;
            return;
        }
        if eth.vlan.is_some() {
            // The interface has no VLAN configuration; a tagged frame belongs to another one.
            self.counters.rx_drop_vlan_tagged += 1;
            return;
        }
        let payload = view.payload();
        match eth.ethertype {
            EtherType::ARP => self.process_arp(now, payload),
            EtherType::IPV4 => self.process_ipv4(now, payload, rss_hash),
            EtherType::IPV6 => self.process_ipv6(now, payload, rss_hash),
            _ => self.counters.rx_drop_unknown_ethertype += 1,
        }
    }

    /// The next frame to put on the wire, if any.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Vec<u8>> {
        if self.tx.is_empty() {
            self.tcp_flush(now);
        }
        let frame = self.tx.pop_front()?;
        self.counters.tx_frames += 1;
        Some(frame)
    }

    /// Gives a frame buffer back once the driver is done with it (typically a frame from
    /// `poll_transmit` after the NIC sent it), so the transmit path can reuse it instead of
    /// allocating. Optional: buffers beyond a small bound, or oddly large ones, are dropped.
    pub fn recycle(&mut self, frame: Vec<u8>) {
        let capacity_max = usize::from(self.cfg.interface.mtu_bytes) + TX_FREE_SLACK_BYTES;
        if self.tx_free.len() < TX_FREE_FRAMES_MAX && frame.capacity() <= capacity_max {
            self.tx_free.push(frame);
        }
    }

    /// A frame buffer of exactly `len` bytes, reused when one is free. Its contents are
    /// unspecified (a reused buffer keeps old bytes): callers overwrite every byte they keep.
    /// Only the part a recycled buffer lacks is zero-filled, so in steady state nothing is.
    pub(crate) fn take_frame_buf(&mut self, len: usize) -> Vec<u8> {
        let mut buf = self
            .tx_free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(len));
        buf.resize(len, 0);
        buf
    }

    /// The earliest time `handle_timeout` has work to do.
    pub fn poll_timeout(&self) -> Option<u64> {
        [
            self.neighbors.poll_timeout(),
            self.reasm.poll_timeout(),
            self.tcp_poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs every timer due at `now`: neighbour retries and expiry, reassembly timeouts, TCP
    /// timers.
    pub fn handle_timeout(&mut self, now: u64) {
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
        self.counters.rx_drop_reasm_timeout += self.reasm.handle_timeout(now);
        self.tcp_handle_timeout(now);
    }

    /// The next readiness notification, if any.
    pub fn poll_event(&mut self) -> Option<SocketEvent> {
        while let Some(index) = self.events.pop_front() {
            let Some(slot) = self.slots.get_mut(index as usize) else {
                continue;
            };
            slot.queued = false;
            let readiness = core::mem::take(&mut slot.pending);
            if slot.socket.is_some() && !readiness.is_empty() {
                return Some(SocketEvent {
                    handle: SocketHandle {
                        index,
                        generation: slot.generation,
                    },
                    readiness,
                });
            }
        }
        None
    }

    /// The next echo reply received for a [`Stack::send_ping`].
    pub fn poll_echo_reply(&mut self) -> Option<EchoReply> {
        self.echo_replies.pop_front()
    }

    // ------------------------------------------------------------------ addresses

    pub(crate) fn is_our_v4(&self, a: Ipv4Addr) -> bool {
        self.cfg.interface.ipv4.iter().any(|c| c.addr == a)
    }

    pub(crate) fn is_our_v6(&self, a: Ipv6Addr) -> bool {
        self.cfg.interface.ipv6.iter().any(|c| c.addr == a)
    }

    pub(crate) fn is_our_ip(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(a) => self.is_our_v4(a),
            IpAddr::V6(a) => self.is_our_v6(a),
        }
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

    fn is_v4_broadcast(&self, a: Ipv4Addr) -> bool {
        a == Ipv4Addr::BROADCAST
            || self
                .cfg
                .interface
                .ipv4
                .iter()
                .any(|c| c.broadcast() == Some(a))
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

    // ------------------------------------------------------------------ ARP (RFC 826)

    fn process_arp(&mut self, now: u64, payload: &[u8]) {
        let Ok(arp) = ArpPacket::new_checked(payload).and_then(|p| ArpRepr::parse(&p)) else {
            self.counters.rx_drop_malformed_arp += 1;
            return;
        };
        let mac = self.cfg.interface.mac;
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

    /// Re-validates a neighbour in use before its entry expires: a unicast ARP request
    /// (RFC 1122 §2.3.2.1) or a unicast NS (RFC 4861 §7.2.2) to the MAC we hold.
    pub(crate) fn send_refresh_request(&mut self, addr: IpAddr, mac_peer: EthernetAddress) {
        let mac = self.cfg.interface.mac;
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
    fn send_resolution_request(&mut self, addr: IpAddr) {
        let mac = self.cfg.interface.mac;
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

    // ------------------------------------------------------------------ IPv4 input

    fn process_ipv4(&mut self, now: u64, bytes: &[u8], hash: Option<u32>) {
        let Ok(pkt) = Ipv4Packet::new_checked(bytes) else {
            self.counters.rx_drop_ipv4_malformed += 1;
            return;
        };
        let repr = match Ipv4Repr::parse(&pkt, self.cfg.checksums) {
            Ok(r) => r,
            Err(wire::Error::BadChecksum) => {
                self.counters.rx_drop_ipv4_bad_checksum += 1;
                return;
            }
            Err(_) => {
                self.counters.rx_drop_ipv4_malformed += 1;
                return;
            }
        };
        // RFC 1122 §3.2.1.3: a source that is broadcast or multicast is silently discarded.
        if repr.src_addr.is_multicast() || self.is_v4_broadcast(repr.src_addr) {
            self.counters.rx_drop_bad_source += 1;
            return;
        }
        let dst = repr.dst_addr;
        let dst_unicast = self.is_our_v4(dst);
        if !dst_unicast && !self.is_v4_broadcast(dst) {
            // Hosts do not forward (RFC 1122 §3.3.1); no multicast group membership yet.
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
        };
        if !pkt.is_fragment() {
            let total = usize::from(pkt.total_len());
            let whole = bytes.get(..total).unwrap_or(bytes);
            self.deliver(now, meta, pkt.payload(), whole, hash);
            return;
        }
        self.counters.rx_fragments += 1;
        let key = ReasmKey::V4 {
            src: repr.src_addr,
            dst,
            protocol: repr.protocol.0,
            ident: repr.ident,
        };
        let offset = usize::from(repr.frag_offset_bytes);
        match self.reasm.add(
            now,
            key,
            repr.protocol.0,
            offset,
            repr.more_frags,
            pkt.payload(),
        ) {
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
                    self.cfg.checksums,
                );
                if let Some(dst_payload) = whole.get_mut(whole_repr.header_len()..) {
                    dst_payload.copy_from_slice(&done.payload);
                }
                self.deliver(now, meta, &done.payload, &whole, hash);
            }
            Err(e) => self.count_reasm_drop(e),
        }
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

    // ------------------------------------------------------------------ IPv6 input

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

    fn process_ipv6(&mut self, now: u64, bytes: &[u8], hash: Option<u32>) {
        let Ok(pkt) = Ipv6Packet::new_checked(bytes) else {
            self.counters.rx_drop_ipv6_malformed += 1;
            return;
        };
        let (src, dst) = (pkt.src_addr(), pkt.dst_addr());
        if src.is_multicast() {
            self.counters.rx_drop_bad_source += 1;
            return;
        }
        let dst_unicast = self.is_our_v6(dst);
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
        };
        match walk {
            V6Walk::Upper { protocol, offset } => {
                meta.protocol = protocol;
                let upper = payload.get(offset..).unwrap_or(&[]);
                self.deliver(now, meta, upper, whole, hash);
            }
            V6Walk::Fragment {
                next,
                header,
                offset,
            } => {
                self.counters.rx_fragments += 1;
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
                self.deliver(now, meta, upper, &whole, hash);
            }
        }
    }

    // ------------------------------------------------------------------ upper-layer dispatch

    fn deliver(&mut self, now: u64, meta: IpMeta, payload: &[u8], whole: &[u8], hash: Option<u32>) {
        match (meta.protocol, meta.src) {
            (IpProtocol::ICMP, IpAddr::V4(_)) => self.process_icmpv4(now, meta, payload),
            (IpProtocol::ICMPV6, IpAddr::V6(_)) => self.process_icmpv6(now, meta, payload),
            (IpProtocol::UDP, _) => self.process_udp(now, meta, payload, whole),
            (IpProtocol::TCP, _) => self.process_tcp(now, meta, payload, hash),
            // RFC 8200 §4.7: nothing follows; the packet is consumed.
            (IpProtocol::IPV6_NO_NXT, IpAddr::V6(_)) => self.counters.rx_ipv6_no_next_header += 1,
            _ => {
                self.counters.rx_drop_unknown_protocol += 1;
                // RFC 1122 §3.2.2.1: protocol unreachable (code 2). IPv6 would need a
                // parameter problem (RFC 4443 §3.4), which wire does not build yet.
                if meta.src.is_ipv4() {
                    self.send_icmp_unreachable(now, meta, whole, 2, 0);
                }
            }
        }
    }

    // ------------------------------------------------------------------ ICMP

    fn process_icmpv4(&mut self, now: u64, meta: IpMeta, payload: &[u8]) {
        let caps = self.cfg.checksums;
        let Ok(view) = Icmpv4Packet::new_checked(payload) else {
            self.counters.rx_drop_icmp_malformed += 1;
            return;
        };
        let repr = match Icmpv4Repr::parse(&view, caps) {
            Ok(r) => r,
            Err(wire::Error::Unsupported) => {
                self.counters.rx_drop_icmp_unsupported += 1;
                return;
            }
            Err(_) => {
                self.counters.rx_drop_icmp_malformed += 1;
                return;
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
                    self.counters.icmp_echo_broadcast_ignored += 1;
                    return;
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
                        self.send_ipv4(now, ours, peer, IpProtocol::ICMP, false, &buf);
                        self.counters.icmp_echo_replies_sent += 1;
                    }
                }
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                self.counters.icmp_echo_replies_received += 1;
                self.record_echo_reply(meta.src, ident, seq_no, data.len());
            }
            Icmpv4Repr::DstUnreachable { code, data } => {
                self.counters.icmp_errors_received += 1;
                // RFC 1122 §4.2.3.9: protocol (2) and port (3) unreachable are hard errors.
                self.icmp_error_to_socket(meta, data, matches!(code, 2 | 3));
            }
            _ => self.counters.icmp_errors_received += 1,
        }
    }

    fn record_echo_reply(&mut self, from: IpAddr, ident: u16, seq_no: u16, len: usize) {
        if self.echo_replies.len() >= ECHO_REPLIES_MAX {
            self.counters.icmp_echo_reply_queue_full += 1;
            return;
        }
        self.echo_replies.push_back(EchoReply {
            from,
            ident,
            seq_no,
            data_len_bytes: len,
        });
    }

    fn process_icmpv6(&mut self, now: u64, meta: IpMeta, payload: &[u8]) {
        let caps = self.cfg.checksums;
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (meta.src, meta.dst) else {
            return;
        };
        let Ok(view) = Icmpv6Packet::new_checked(payload) else {
            self.counters.rx_drop_icmp_malformed += 1;
            return;
        };
        let repr = match Icmpv6Repr::parse(&view, src, dst, caps) {
            Ok(r) => r,
            Err(wire::Error::Unsupported) => {
                // Router discovery, MLD, redirects…: not spoken by this host (see lib docs).
                self.counters.rx_drop_icmp_unsupported += 1;
                return;
            }
            Err(_) => {
                self.counters.rx_drop_icmp_malformed += 1;
                return;
            }
        };
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                if !meta.dst_unicast {
                    self.counters.icmp_echo_broadcast_ignored += 1;
                    return;
                }
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                if let Some(pkt) = self.build_icmpv6(dst, src, self.cfg.hop_limit, &reply) {
                    self.route_ip(now, IpAddr::V6(src), EtherType::IPV6, pkt);
                    self.counters.icmp_echo_replies_sent += 1;
                }
            }
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                self.counters.icmp_echo_replies_received += 1;
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
                    self.counters.nd_drop_bad_hop_limit += 1;
                    return;
                }
                let Some(ll) = target_lladdr else {
                    // Without the option there is nothing to learn on Ethernet.
                    self.counters.nd_rx_unsolicited_advert += 1;
                    return;
                };
                if !self.neighbors.contains(IpAddr::V6(target_addr)) {
                    // RFC 4861 §7.2.5: no entry → silently discard.
                    self.counters.nd_rx_unsolicited_advert += 1;
                    return;
                }
                let (released, _) = self
                    .neighbors
                    .learn(now, IpAddr::V6(target_addr), ll, false);
                for p in released {
                    self.send_frame(ll, p.ethertype, &p.ip_packet);
                }
            }
            Icmpv6Repr::DstUnreachable { code, data } => {
                self.counters.icmp_errors_received += 1;
                // RFC 4443 §3.1: code 4 is port unreachable (a hard error, like IPv4's code 3).
                self.icmp_error_to_socket(meta, data, code == 4);
            }
            _ => self.counters.icmp_errors_received += 1,
        }
    }

    /// Hands a destination-unreachable error to the socket that sent the quoted packet
    /// (RFC 1122 §4.2.3.9, §4.1.3.3; RFC 5927 §4.1 checks). `quote` is the invoking packet as
    /// returned: an IP header we sent plus at least 8 bytes of its transport header.
    fn icmp_error_to_socket(&mut self, meta: IpMeta, quote: &[u8], hard: bool) {
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
            self.counters.icmp_errors_unmatched += 1;
            return;
        };
        let (Some(&[s0, s1, d0, d1]), true) = (
            l4.get(..4).map(|b| [b[0], b[1], b[2], b[3]]).as_ref(),
            self.is_our_ip(ours),
        ) else {
            self.counters.icmp_errors_unmatched += 1;
            return;
        };
        let local = SocketAddr::new(ours, u16::from_be_bytes([s0, s1]));
        let remote = SocketAddr::new(peer, u16::from_be_bytes([d0, d1]));
        let matched = match protocol {
            IpProtocol::TCP => {
                let seq = l4
                    .get(4..8)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                self.tcp_icmp_error(local, remote, seq, hard)
            }
            IpProtocol::UDP => self.udp_icmp_error(local, hard),
            _ => false,
        };
        if !matched {
            self.counters.icmp_errors_unmatched += 1;
        }
    }

    /// A hard ICMP error for a UDP socket bound to `local`: recorded (see
    /// [`Stack::take_error`]) and reported as [`Readiness::ERROR`].
    fn udp_icmp_error(&mut self, local: SocketAddr, hard: bool) -> bool {
        let Some(i) = self.find_udp_socket(local.ip(), local.port()) else {
            return false;
        };
        if hard {
            if let Some(Socket::Udp(u)) = self.slots.get_mut(i).and_then(|s| s.socket.as_mut()) {
                u.error = Some(SocketError::Unreachable);
            }
            self.notify(i, Readiness::ERROR);
        }
        self.counters.icmp_errors_to_sockets += 1;
        true
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
            self.counters.nd_drop_bad_hop_limit += 1;
            return;
        }
        let from_dad = src.is_unspecified();
        // RFC 4861 §7.1.1: the target is never multicast, and a DAD probe (unspecified
        // source) carries no source link-layer option.
        if target.is_multicast() || (from_dad && source_lladdr.is_some()) {
            self.counters.rx_drop_icmp_malformed += 1;
            return;
        }
        if !self.is_our_v6(target) {
            self.counters.nd_rx_not_for_us += 1;
            return;
        }
        let mac = self.cfg.interface.mac;
        if let (false, Some(ll)) = (from_dad, source_lladdr) {
            // §7.2.3: the source link-layer option creates or updates the sender's entry.
            let (released, evicted) = self.neighbors.learn(now, IpAddr::V6(src), ll, true);
            if evicted {
                self.counters.neighbor_evictions += 1;
            }
            for p in released {
                self.send_frame(ll, p.ethertype, &p.ip_packet);
            }
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
        let Some(pkt) = self.build_icmpv6(target, dst, NDP_HOP_LIMIT, &na) else {
            return;
        };
        self.counters.nd_solicits_answered += 1;
        match (from_dad, source_lladdr) {
            (true, _) => self.send_frame(
                EthernetAddress::ipv6_multicast(ALL_NODES),
                EtherType::IPV6,
                &pkt,
            ),
            (false, Some(ll)) => self.send_frame(ll, EtherType::IPV6, &pkt),
            (false, None) => self.route_ip(now, IpAddr::V6(src), EtherType::IPV6, pkt),
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
            IpAddr::V4(s) => !(s.is_unspecified() || s.is_multicast() || self.is_v4_broadcast(s)),
            IpAddr::V6(s) => !(s.is_unspecified() || s.is_multicast()),
        }
    }

    /// Token bucket: `icmp_errors_per_s_max` per second, bursts up to `icmp_errors_burst_max`
    /// (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)).
    fn icmp_take_token(&mut self, now: u64) -> bool {
        let l = &self.cfg.limits;
        let cap = u64::from(l.icmp_errors_burst_max) * 1000;
        let elapsed_ns = now.saturating_sub(self.icmp_refill_ns);
        // thousandths of a token = elapsed_s × rate × 1000 = elapsed_ns × rate / 1e6
        let add = elapsed_ns.saturating_mul(u64::from(l.icmp_errors_per_s_max)) / 1_000_000;
        if add > 0 {
            self.icmp_tokens_milli = (self.icmp_tokens_milli + add).min(cap);
            self.icmp_refill_ns = now;
        }
        if self.icmp_tokens_milli >= 1000 {
            self.icmp_tokens_milli -= 1000;
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
            self.counters.icmp_errors_suppressed += 1;
            return;
        }
        if !self.icmp_take_token(now) {
            self.counters.icmp_errors_rate_limited += 1;
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
                    self.send_ipv4(now, ours, peer, IpProtocol::ICMP, false, &buf);
                    self.counters.icmp_errors_sent += 1;
                }
            }
            (IpAddr::V6(ours), IpAddr::V6(peer)) => {
                let quote_max = ICMPV6_ERROR_MAX_BYTES - 40 - 8;
                let data = whole.get(..whole.len().min(quote_max)).unwrap_or(whole);
                let repr = Icmpv6Repr::DstUnreachable {
                    code: code_v6,
                    data,
                };
                if let Some(pkt) = self.build_icmpv6(ours, peer, self.cfg.hop_limit, &repr) {
                    self.route_ip(now, IpAddr::V6(peer), EtherType::IPV6, pkt);
                    self.counters.icmp_errors_sent += 1;
                }
            }
            _ => {}
        }
    }

    /// Sends an ICMP echo request to `dst` from the best source address. Replies show up in
    /// [`Stack::poll_echo_reply`].
    pub fn send_ping(
        &mut self,
        now: u64,
        dst: IpAddr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> Result<(), SocketError> {
        let src = self.select_source(dst).ok_or(SocketError::NoRoute)?;
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
                self.send_ipv4(now, s, d, IpProtocol::ICMP, false, &buf);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let repr = Icmpv6Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                };
                let payload = self
                    .build_icmpv6_payload(s, d, &repr)
                    .ok_or(SocketError::MessageTooBig)?;
                self.send_ipv6(now, s, d, IpProtocol::ICMPV6, self.cfg.hop_limit, &payload);
            }
            _ => return Err(SocketError::NoRoute),
        }
        Ok(())
    }

    // ------------------------------------------------------------------ IP output

    fn build_icmpv6_payload(
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
            self.cfg.checksums,
        )
        .ok()?;
        Some(buf)
    }

    /// A whole, unfragmented IPv6 packet carrying an ICMPv6 message.
    fn build_icmpv6(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
        repr: &Icmpv6Repr<'_>,
    ) -> Option<Vec<u8>> {
        let payload = self.build_icmpv6_payload(src, dst, repr)?;
        build_ipv6(src, dst, IpProtocol::ICMPV6, hop_limit, None, &payload)
    }

    /// Sends an IPv4 datagram, fragmenting it when it exceeds the MTU and `dont_frag` is
    /// clear (RFC 791 §3.2); with DF set an oversized datagram is a counted drop (TCP sets DF
    /// and sizes segments to the MSS, RFC 1191).
    pub(crate) fn send_ipv4(
        &mut self,
        now: u64,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        dont_frag: bool,
        payload: &[u8],
    ) {
        let mtu = usize::from(self.cfg.interface.mtu_bytes);
        let ident = self.ipv4_ident;
        self.ipv4_ident = self.ipv4_ident.wrapping_add(1);
        let base = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol,
            payload_len: payload.len(),
            hop_limit: self.cfg.hop_limit,
            dscp: 0,
            ecn: 0,
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
        repr.emit(
            &mut Ipv4Packet::new_unchecked(&mut buf[..]),
            self.cfg.checksums,
        )
        .ok()?;
        buf.get_mut(repr.header_len()..)?.copy_from_slice(payload);
        Some(buf)
    }

    /// Sends an IPv6 packet, fragmenting at the source when it exceeds the MTU
    /// (RFC 8200 §4.5; routers never fragment IPv6).
    pub(crate) fn send_ipv6(
        &mut self,
        now: u64,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: IpProtocol,
        hop_limit: u8,
        payload: &[u8],
    ) {
        let mtu = usize::from(self.cfg.interface.mtu_bytes);
        if 40 + payload.len() <= mtu {
            if let Some(p) = build_ipv6(src, dst, next_header, hop_limit, None, payload) {
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
            if let Some(p) = build_ipv6(src, dst, next_header, hop_limit, Some(frag), piece) {
                self.counters.tx_fragments += 1;
                self.route_ip(now, IpAddr::V6(dst), EtherType::IPV6, p);
            }
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
        if self.tx.len() >= self.cfg.limits.tx_queue_frames_max {
            self.counters.tx_drop_queue_full += 1;
            return;
        }
        let eth = EthernetRepr {
            src_addr: self.cfg.interface.mac,
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
        self.tx.push_back(frame);
    }

    // ------------------------------------------------------------------ UDP input

    fn process_udp(&mut self, now: u64, meta: IpMeta, payload: &[u8], whole: &[u8]) {
        let Some(pair) = meta.pair() else {
            return;
        };
        let Ok(view) = UdpPacket::new_checked(payload) else {
            self.counters.rx_drop_udp_malformed += 1;
            return;
        };
        let Ok(udp) = UdpRepr::parse(&view, &pair, self.cfg.checksums) else {
            self.counters.rx_drop_udp_malformed += 1;
            return;
        };
        let Some(index) = self.find_udp_socket(meta.dst, udp.dst_port) else {
            self.counters.udp_rx_no_socket += 1;
            // RFC 1122 §4.1.3.1: port unreachable (v4 code 3; RFC 4443 §3.1 v6 code 4).
            self.send_icmp_unreachable(now, meta, whole, 3, 4);
            return;
        };
        let dgram = UdpDatagram {
            src: SocketAddr::new(meta.src, udp.src_port),
            dst: SocketAddr::new(meta.dst, udp.dst_port),
            payload: udp.payload.to_vec(),
        };
        let Some(Socket::Udp(sock)) = self.slots.get_mut(index).and_then(|s| s.socket.as_mut())
        else {
            return;
        };
        if sock.rx.len() >= sock.rx_max {
            self.counters.udp_rx_socket_full += 1;
            return;
        }
        sock.rx.push_back(dgram);
        self.counters.udp_rx_delivered += 1;
        self.notify(index, Readiness::READABLE);
    }

    /// The socket bound to exactly (`dst`, `port`), else one bound to the wildcard address of
    /// the same family on `port`.
    fn find_udp_socket(&self, dst: IpAddr, port: u16) -> Option<usize> {
        let mut wildcard = None;
        for &i in self.bound_to(PortKind::Udp, port) {
            let Some(Socket::Udp(s)) = self.slots.get(i).and_then(|s| s.socket.as_ref()) else {
                continue;
            };
            if s.local.is_ipv4() != dst.is_ipv4() {
                continue;
            }
            if s.local.ip() == dst {
                return Some(i);
            }
            if s.local.ip().is_unspecified() && wildcard.is_none() {
                wildcard = Some(i);
            }
        }
        wildcard
    }

    // ------------------------------------------------------------------ sockets

    /// Records `readiness` for the slot and queues it for `poll_event` once.
    pub(crate) fn notify(&mut self, index: usize, readiness: Readiness) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.pending |= readiness;
        if !slot.queued {
            slot.queued = true;
            if let Ok(i) = u32::try_from(index) {
                self.events.push_back(i);
            }
        }
    }

    /// Puts `socket` in a free slot.
    pub(crate) fn alloc_slot(&mut self, socket: Socket) -> Result<SocketHandle, SocketError> {
        let bound = port_key(&socket);
        let (i, generation) = if let Some(i) = self.free_slots.pop() {
            let Some(slot) = self.slots.get_mut(i) else {
                return Err(SocketError::TooManySockets);
            };
            slot.generation = slot.generation.wrapping_add(1);
            slot.socket = Some(socket);
            slot.pending = Readiness::NONE;
            (i, slot.generation)
        } else {
            if self.slots.len() >= self.cfg.limits.sockets_max {
                return Err(SocketError::TooManySockets);
            }
            self.slots.push(Slot {
                generation: 0,
                socket: Some(socket),
                pending: Readiness::NONE,
                queued: false,
            });
            (self.slots.len() - 1, 0)
        };
        if let Some(k) = bound {
            self.ports.entry(k).or_default().push(i);
        }
        let index = u32::try_from(i).map_err(|_| SocketError::TooManySockets)?;
        Ok(SocketHandle { index, generation })
    }

    /// Slot indexes of the sockets bound to `port` (UDP sockets or TCP listeners), in
    /// binding order.
    pub(crate) fn bound_to(&self, kind: PortKind, port: u16) -> &[usize] {
        self.ports.get(&(kind, port)).map_or(&[], Vec::as_slice)
    }

    pub(crate) fn slot_index(&self, h: SocketHandle) -> Result<usize, SocketError> {
        let i = h.index as usize;
        match self.slots.get(i) {
            Some(s) if s.generation == h.generation && s.socket.is_some() => Ok(i),
            _ => Err(SocketError::InvalidHandle),
        }
    }

    /// True when a UDP socket already uses `port` on an address overlapping `ip`.
    fn udp_port_in_use(&self, ip: IpAddr, port: u16) -> bool {
        self.bound_to(PortKind::Udp, port).iter().any(|&i| {
            match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
                Some(Socket::Udp(u)) => overlaps(u.local.ip(), ip),
                _ => false,
            }
        })
    }

    /// The next ephemeral port for which `free` holds, cycling through the range once.
    pub(crate) fn pick_ephemeral(
        &mut self,
        mut free: impl FnMut(&Stack, u16) -> bool,
    ) -> Option<u16> {
        let span = u32::from(EPHEMERAL_LAST - EPHEMERAL_FIRST) + 1;
        for _ in 0..span {
            let p = self.next_ephemeral;
            self.next_ephemeral = if p == EPHEMERAL_LAST {
                EPHEMERAL_FIRST
            } else {
                p + 1
            };
            if free(self, p) {
                return Some(p);
            }
        }
        None
    }

    /// Binds a UDP socket. Port 0 picks an ephemeral port; an unspecified IP accepts datagrams
    /// for every address of its family.
    pub fn udp_bind(&mut self, local: SocketAddr) -> Result<SocketHandle, SocketError> {
        let ip = local.ip();
        if !ip.is_unspecified() && !self.is_our_ip(ip) {
            return Err(SocketError::AddrNotAvailable);
        }
        let port = if local.port() == 0 {
            self.pick_ephemeral(|s, p| !s.udp_port_in_use(ip, p))
                .ok_or(SocketError::NoFreePort)?
        } else {
            if self.udp_port_in_use(ip, local.port()) {
                return Err(SocketError::AddrInUse);
            }
            local.port()
        };
        self.alloc_slot(Socket::Udp(UdpSocket {
            local: SocketAddr::new(ip, port),
            rx: VecDeque::new(),
            rx_max: self.cfg.limits.udp_rx_queue_datagrams_max,
            error: None,
        }))
    }

    /// The local address a socket is bound to.
    pub fn local_addr(&self, h: SocketHandle) -> Result<SocketAddr, SocketError> {
        let i = self.slot_index(h)?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Udp(u)) => Ok(u.local),
            Some(Socket::Tcp(t)) => Ok(t.local_addr()),
            None => Err(SocketError::InvalidHandle),
        }
    }

    /// Sends one datagram. The source is the bound address, or the best address for `dst`.
    pub fn udp_send_to(
        &mut self,
        now: u64,
        h: SocketHandle,
        dst: SocketAddr,
        payload: &[u8],
    ) -> Result<(), SocketError> {
        let i = self.slot_index(h)?;
        let local = match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Udp(u)) => u.local,
            _ => return Err(SocketError::WrongSocketType),
        };
        if local.is_ipv4() != dst.is_ipv4() {
            return Err(SocketError::AddrNotAvailable);
        }
        let src = if local.ip().is_unspecified() {
            self.select_source(dst.ip()).ok_or(SocketError::NoRoute)?
        } else {
            local.ip()
        };
        let repr = UdpRepr {
            src_port: local.port(),
            dst_port: dst.port(),
            payload,
        };
        let pair = match (src, dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => IpPair::V4 { src: s, dst: d },
            (IpAddr::V6(s), IpAddr::V6(d)) => IpPair::V6 { src: s, dst: d },
            _ => return Err(SocketError::AddrNotAvailable),
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut buf[..]),
            &pair,
            self.cfg.checksums,
        )
        .map_err(|_| SocketError::MessageTooBig)?;
        match pair {
            IpPair::V4 { src, dst } => {
                if buf.len() + 20 > 65_535 {
                    return Err(SocketError::MessageTooBig);
                }
                self.send_ipv4(now, src, dst, IpProtocol::UDP, false, &buf);
            }
            IpPair::V6 { src, dst } => {
                self.send_ipv6(now, src, dst, IpProtocol::UDP, self.cfg.hop_limit, &buf);
            }
        }
        self.counters.udp_tx_datagrams += 1;
        Ok(())
    }

    /// Takes the pending error of a socket (a hard ICMP error), if any.
    pub fn take_error(&mut self, h: SocketHandle) -> Result<Option<SocketError>, SocketError> {
        let i = self.slot_index(h)?;
        match self.slots.get_mut(i).and_then(|s| s.socket.as_mut()) {
            Some(Socket::Udp(u)) => Ok(u.error.take()),
            Some(Socket::Tcp(t)) => Ok(t.take_error()),
            None => Err(SocketError::InvalidHandle),
        }
    }

    /// Takes the oldest queued datagram; `WouldBlock` when none is queued.
    pub fn udp_recv_from(&mut self, h: SocketHandle) -> Result<UdpDatagram, SocketError> {
        let i = self.slot_index(h)?;
        match self.slots.get_mut(i).and_then(|s| s.socket.as_mut()) {
            Some(Socket::Udp(u)) => u.rx.pop_front().ok_or(SocketError::WouldBlock),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// Closes a socket. UDP sockets and listeners go away at once (queued datagrams and
    /// unaccepted connections are dropped); a TCP connection starts its close handshake and
    /// its handle stays valid until it is released (see `tcp_release`).
    pub fn close(&mut self, now: u64, h: SocketHandle) -> Result<(), SocketError> {
        let i = self.slot_index(h)?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Udp(_)) => {
                self.free_slot(i);
                Ok(())
            }
            Some(Socket::Tcp(_)) => self.tcp_close(now, i),
            None => Err(SocketError::InvalidHandle),
        }
    }

    /// Frees a slot without any protocol action.
    pub(crate) fn free_slot(&mut self, i: usize) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(socket) = slot.socket.take() else {
            return;
        };
        slot.pending = Readiness::NONE;
        if let Socket::Tcp(crate::tcp_sockets::TcpState::Conn(c)) = &socket {
            self.tcp_counters_released.add(c.engine_counters());
        }
        if let Some(k) = port_key(&socket) {
            if let Some(v) = self.ports.get_mut(&k) {
                v.retain(|&x| x != i);
                if v.is_empty() {
                    self.ports.remove(&k);
                }
            }
        }
        self.free_slots.push(i);
    }
}

/// What a bound port belongs to (UDP and TCP port spaces are separate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PortKind {
    Udp,
    TcpListener,
}

/// The port index key of a socket that owns a port: UDP sockets and TCP listeners. TCP
/// connections live in the 4-tuple table instead.
fn port_key(socket: &Socket) -> Option<(PortKind, u16)> {
    match socket {
        Socket::Udp(u) => Some((PortKind::Udp, u.local.port())),
        Socket::Tcp(t) => t.listen_port().map(|p| (PortKind::TcpListener, p)),
    }
}

/// True when two local bindings of the same port conflict: same family and the same address,
/// or either is the wildcard.
pub(crate) fn overlaps(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4() && (a == b || a.is_unspecified() || b.is_unspecified())
}

/// A whole IPv6 packet: fixed header, an optional fragment header, and `payload`.
fn build_ipv6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: IpProtocol,
    hop_limit: u8,
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
        traffic_class: 0,
        flow_label: 0,
        ext_headers,
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]))
        .ok()?;
    buf.get_mut(repr.header_len()..)?.copy_from_slice(payload);
    Some(buf)
}
