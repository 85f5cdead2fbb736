//! The data plane: a burst of received frames in, one [`Verdict`] per frame out, frames
//! rewritten in place.
//!
//! One frame's walk (IPv4; IPv6 is the same without a header checksum):
//!
//! 1. Ethernet: multicast/broadcast destination → [`Verdict::Local`]; a unicast destination
//!    other than the ingress port's MAC → `NotForUs`; tagged → `Vlan`; ARP and other
//!    EtherTypes → `Local`.
//! 2. IP header checked with `wire`'s views (`Malformed`), IPv4 checksum verified
//!    (`BadChecksum`, unless the config trusts the NIC).
//! 3. Multicast / limited broadcast destination → `Local`; one longest-prefix lookup of the
//!    destination: a [`NextHop::Local`] route (the router's own addresses, directed
//!    broadcasts) → `Local`.
//! 4. Martian source or destination → `Martian`; IPv4 options or an IPv6 hop-by-hop header →
//!    `IpOptions` (RFC 1812 wants options processed; this fast path does not).
//! 5. No route → `NoRoute` with ICMP net unreachable; TTL/hop limit ≤ 1 → `TtlExceeded` with
//!    ICMP time exceeded (RFC 1812 §5.3.1, RFC 8200 §3); longer than the egress MTU →
//!    `TooBig` with frag-needed / packet-too-big, or `NeedsFragmentation` when IPv4 DF is clear.
//! 6. Next hop's MAC from [`Neighbours`]; unknown → `NoNeighbour` and a resolution request.
//! 7. Rewrite in place: TTL − 1 with the RFC 1624 incremental checksum update, Ethernet
//!    source (egress port) and destination (neighbour), padding trimmed → [`Verdict::Forward`].
//!
//! ICMP errors replace the frame in place ([`Verdict::IcmpError`]) and go through the same
//! route lookup and neighbour table towards the offending packet's source; they are never
//! sent about ICMP errors or non-first fragments, and a token bucket limits them (counted
//! when it says no).
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::{EtherType, EthernetAddress, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet};

use crate::FrameBuf;
use crate::counters::{Counters, DropReason};
use crate::fib::{Fib, FibLimits, NextHop, Prefix, Route, RouteError};
use crate::icmp::{ETH_LEN, ErrorFamily, ErrorRoute, IcmpKind, TokenBucket};
use crate::neighbour::Neighbours;

/// The most frames [`Forwarder::process_burst`] is meant to take at once (DPDK's habit:
/// 32–64); longer slices work, in one pass.
pub const BURST_MAX: usize = 64;

/// What became of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Rewritten in place (MACs, TTL, checksum, padding trimmed): transmit on `port`.
    Forward { port: u16 },
    /// For the router itself (its addresses, broadcast, multicast, ARP, NDP): hand the frame,
    /// untouched, to the local stack.
    Local,
    /// Replaced in place by an ICMP error about it, addressed to its source: transmit on
    /// `port`. The original packet was dropped for `reason` (counted).
    IcmpError { port: u16, reason: DropReason },
    /// Dropped (counted under `reason`): recycle the buffer.
    Drop(DropReason),
}

/// One port of the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    pub mac: EthernetAddress,
    /// Largest IP packet the link carries, header included (Ethernet: 1500).
    pub mtu_bytes: u16,
    /// The port's IPv4 addresses with their on-link prefix lengths (connected routes).
    pub ipv4: Vec<(Ipv4Addr, u8)>,
    /// The port's IPv6 addresses with their on-link prefix lengths (connected routes).
    pub ipv6: Vec<(Ipv6Addr, u8)>,
}

/// The forwarder's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwarderConfig {
    /// Port `i` is `ports[i]`. Invariant: at most `u16::MAX` ports.
    pub ports: Vec<PortConfig>,
    pub fib_limits: FibLimits,
    /// ICMP errors a second this forwarder (one shard) may originate, all kinds together
    /// (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)).
    pub icmp_errors_per_s_max: u32,
    /// Errors that may go back to back after a quiet period.
    pub icmp_errors_burst_max: u32,
    /// TTL / hop limit of the errors the router originates.
    pub icmp_hop_limit: u8,
    /// Verify IPv4 header checksums (false when the NIC has and dropped bad ones).
    pub verify_ipv4_checksum: bool,
}

impl Default for ForwarderConfig {
    /// No ports; 100 ICMP errors a second with bursts of 10; hop limit 64; checksums verified.
    fn default() -> Self {
        ForwarderConfig {
            ports: Vec::new(),
            fib_limits: FibLimits::default(),
            icmp_errors_per_s_max: 100,
            icmp_errors_burst_max: 10,
            icmp_hop_limit: 64,
            verify_ipv4_checksum: true,
        }
    }
}

/// A port as the data path reads it.
#[derive(Debug, Clone, Copy)]
struct Port {
    mac: EthernetAddress,
    mtu_bytes: u16,
    /// The address ICMPv4 errors leaving this port come from.
    v4_src: Option<Ipv4Addr>,
    /// The address ICMPv6 errors leaving this port come from (a global one when there is).
    v6_src: Option<Ipv6Addr>,
}

/// The forwarding plane of one shard: routes, ports, counters and the ICMP error budget.
/// Sans-IO: every call takes `now_ns`; frames and the neighbour table are the caller's.
#[derive(Debug)]
pub struct Forwarder {
    ports: Vec<Port>,
    fib: Fib,
    counters: Counters,
    icmp_bucket: TokenBucket,
    icmp_hop_limit: u8,
    icmp_ident: u16,
    verify_ipv4_checksum: bool,
}

fn is_link_local_v6(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// RFC 1812 §5.3.7 and §4.2.2.11, RFC 3927 §7: never forwarded.
fn martian_v4(src: Ipv4Addr, dst: Ipv4Addr) -> bool {
    let bad_src = src.is_unspecified()
        || src.octets()[0] == 0
        || src.is_loopback()
        || src.is_multicast()
        || src.octets()[0] >= 240
        || src.is_link_local();
    let bad_dst =
        dst.octets()[0] == 0 || dst.is_loopback() || dst.octets()[0] >= 240 || dst.is_link_local();
    bad_src || bad_dst
}

/// RFC 4291 §2.5.2, §2.5.3, §2.5.6, §2.7: never forwarded.
fn martian_v6(src: Ipv6Addr, dst: Ipv6Addr) -> bool {
    src.is_unspecified()
        || src.is_loopback()
        || src.is_multicast()
        || is_link_local_v6(src)
        || dst.is_unspecified()
        || dst.is_loopback()
        || is_link_local_v6(dst)
}

impl Forwarder {
    /// A forwarder with each port's connected routes and a [`NextHop::Local`] route for each
    /// of its addresses (and IPv4 directed broadcasts).
    pub fn new(cfg: &ForwarderConfig) -> Result<Forwarder, RouteError> {
        if cfg.ports.len() > usize::from(u16::MAX) {
            return Err(RouteError::BadPort);
        }
        let mut f = Forwarder {
            ports: cfg
                .ports
                .iter()
                .map(|p| Port {
                    mac: p.mac,
                    mtu_bytes: p.mtu_bytes,
                    v4_src: p.ipv4.first().map(|&(a, _)| a),
                    v6_src: p
                        .ipv6
                        .iter()
                        .map(|&(a, _)| a)
                        .find(|&a| !is_link_local_v6(a))
                        .or_else(|| p.ipv6.first().map(|&(a, _)| a)),
                })
                .collect(),
            fib: Fib::new(cfg.fib_limits),
            counters: Counters::default(),
            icmp_bucket: TokenBucket::new(cfg.icmp_errors_per_s_max, cfg.icmp_errors_burst_max),
            icmp_hop_limit: cfg.icmp_hop_limit,
            icmp_ident: 0,
            verify_ipv4_checksum: cfg.verify_ipv4_checksum,
        };
        for (i, p) in cfg.ports.iter().enumerate() {
            let port = i as u16;
            let addrs = p
                .ipv4
                .iter()
                .map(|&(a, l)| (IpAddr::V4(a), l))
                .chain(p.ipv6.iter().map(|&(a, l)| (IpAddr::V6(a), l)));
            for (addr, len) in addrs {
                let net = Prefix::new(addr, len).ok_or(RouteError::BadPrefix)?;
                // Link-local prefixes are never forwarded: no connected route for them.
                let link_local = matches!(addr, IpAddr::V6(a) if is_link_local_v6(a));
                if !link_local {
                    f.fib.insert(Route {
                        prefix: net,
                        next_hop: NextHop::Connected { port },
                    })?;
                }
                let host_len = if addr.is_ipv4() { 32 } else { 128 };
                f.insert_local(addr, host_len)?;
                if let IpAddr::V4(a) = addr
                    && len < 31
                {
                    let bcast = u32::from(a) | !crate::lpm4::mask4(len);
                    f.insert_local(IpAddr::V4(Ipv4Addr::from(bcast)), 32)?;
                }
            }
        }
        Ok(f)
    }

    fn insert_local(&mut self, addr: IpAddr, len: u8) -> Result<(), RouteError> {
        let prefix = Prefix::new(addr, len).ok_or(RouteError::BadPrefix)?;
        self.fib.insert(Route {
            prefix,
            next_hop: NextHop::Local,
        })?;
        Ok(())
    }

    /// The routes (read-only; change them through [`Forwarder::add_route`] and friends so
    /// ports are checked).
    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Adds or replaces a route; its port must exist. Returns the next hop it replaced.
    pub fn add_route(&mut self, route: Route) -> Result<Option<NextHop>, RouteError> {
        match route.next_hop {
            NextHop::Connected { port } | NextHop::Gateway { port, .. }
                if usize::from(port) >= self.ports.len() =>
            {
                Err(RouteError::BadPort)
            }
            _ => self.fib.insert(route),
        }
    }

    /// Adds `prefix` through `gateway`, on the port whose connected route holds the gateway.
    pub fn add_route_via(
        &mut self,
        prefix: Prefix,
        gateway: IpAddr,
    ) -> Result<Option<NextHop>, RouteError> {
        match self.fib.lookup(gateway) {
            Some(NextHop::Connected { port }) => self.add_route(Route {
                prefix,
                next_hop: NextHop::Gateway { port, gateway },
            }),
            _ => Err(RouteError::GatewayNotConnected),
        }
    }

    /// Removes the route for exactly `prefix`.
    pub fn remove_route(&mut self, prefix: Prefix) -> Option<NextHop> {
        self.fib.remove(prefix)
    }

    /// Processes `frames` received on `in_port`, writing `verdicts[i]` for `frames[i]`;
    /// returns how many were processed (`min` of the two lengths). Forwarded frames and ICMP
    /// errors are rewritten in their own buffers; nothing is allocated. Never panics,
    /// whatever the bytes. An unknown `in_port` drops every frame as `NotForUs`.
    pub fn process_burst<F: FrameBuf, N: Neighbours>(
        &mut self,
        now_ns: u64,
        in_port: u16,
        frames: &mut [F],
        verdicts: &mut [Verdict],
        neighbours: &mut N,
    ) -> usize {
        let n = frames.len().min(verdicts.len());
        for (frame, verdict) in frames.iter_mut().zip(verdicts.iter_mut()) {
            *verdict = self.process(now_ns, in_port, frame, neighbours);
        }
        n
    }

    /// Processes one frame (see [`Forwarder::process_burst`]) and counts its outcome.
    pub fn process<F: FrameBuf, N: Neighbours>(
        &mut self,
        now_ns: u64,
        in_port: u16,
        frame: &mut F,
        neighbours: &mut N,
    ) -> Verdict {
        let v = self.classify(now_ns, in_port, frame, neighbours);
        let c = &mut self.counters;
        c.rx_frames += 1;
        match v {
            Verdict::Forward { .. } => c.forwarded += 1,
            Verdict::Local => c.local += 1,
            Verdict::IcmpError { reason, .. } | Verdict::Drop(reason) => c.count_drop(reason),
        }
        v
    }

    fn classify<F: FrameBuf, N: Neighbours>(
        &mut self,
        now_ns: u64,
        in_port: u16,
        frame: &mut F,
        neighbours: &mut N,
    ) -> Verdict {
        let Some(port) = self.ports.get(usize::from(in_port)) else {
            return Verdict::Drop(DropReason::NotForUs);
        };
        let Ok(eth) = EthernetFrame::new_checked(frame.frame()) else {
            return Verdict::Drop(DropReason::Malformed);
        };
        let dst_mac = eth.dst_addr();
        if dst_mac.is_multicast() {
            return Verdict::Local;
        }
        if dst_mac != port.mac {
            return Verdict::Drop(DropReason::NotForUs);
        }
        match eth.outer_ethertype() {
            EtherType::IPV4 => self.ipv4(now_ns, frame, neighbours),
            EtherType::IPV6 => self.ipv6(now_ns, frame, neighbours),
            EtherType::VLAN | EtherType::QINQ => Verdict::Drop(DropReason::Vlan),
            _ => Verdict::Local,
        }
    }

    fn ipv4<F: FrameBuf, N: Neighbours>(
        &mut self,
        now_ns: u64,
        frame: &mut F,
        neighbours: &mut N,
    ) -> Verdict {
        let bytes = frame.frame().get(ETH_LEN..).unwrap_or(&[]);
        let Ok(ip) = Ipv4Packet::new_checked(bytes) else {
            return Verdict::Drop(DropReason::Malformed);
        };
        if self.verify_ipv4_checksum && !ip.verify_checksum() {
            return Verdict::Drop(DropReason::BadChecksum);
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if dst.is_multicast() || dst.is_broadcast() {
            return Verdict::Local;
        }
        let hop = self.fib.lookup_v4(dst);
        if hop == Some(NextHop::Local) {
            return Verdict::Local;
        }
        if martian_v4(src, dst) {
            return Verdict::Drop(DropReason::Martian);
        }
        if ip.header_len() != 20 {
            return Verdict::Drop(DropReason::IpOptions);
        }
        let Some((out_port, via)) = self.egress(hop, IpAddr::V4(dst)) else {
            return self.icmp_error::<Ipv4Addr, _, _>(
                now_ns,
                frame,
                IcmpKind::NoRoute,
                DropReason::NoRoute,
                neighbours,
            );
        };
        if ip.hop_limit() <= 1 {
            return self.icmp_error::<Ipv4Addr, _, _>(
                now_ns,
                frame,
                IcmpKind::TimeExceeded,
                DropReason::TtlExceeded,
                neighbours,
            );
        }
        let total_len = ip.total_len();
        let out = self.ports[usize::from(out_port)];
        if total_len > out.mtu_bytes {
            if ip.dont_frag() {
                let kind = IcmpKind::TooBig {
                    mtu_bytes: out.mtu_bytes,
                };
                return self.icmp_error::<Ipv4Addr, _, _>(
                    now_ns,
                    frame,
                    kind,
                    DropReason::TooBig,
                    neighbours,
                );
            }
            return Verdict::Drop(DropReason::NeedsFragmentation);
        }
        let Some(mac) = self.neighbour(now_ns, out_port, via, neighbours) else {
            return Verdict::Drop(DropReason::NoNeighbour);
        };
        frame.set_len(ETH_LEN + usize::from(total_len));
        let buf = frame.frame_mut();
        rewrite_eth(buf, out.mac, mac);
        if let Some(ip_bytes) = buf.get_mut(ETH_LEN..) {
            // RFC 1812 §5.3.1 TTL − 1; RFC 1624 eqn. 3 patches the header checksum.
            Ipv4Packet::new_unchecked(ip_bytes).decrement_hop_limit();
        }
        Verdict::Forward { port: out_port }
    }

    fn ipv6<F: FrameBuf, N: Neighbours>(
        &mut self,
        now_ns: u64,
        frame: &mut F,
        neighbours: &mut N,
    ) -> Verdict {
        let bytes = frame.frame().get(ETH_LEN..).unwrap_or(&[]);
        let Ok(ip) = Ipv6Packet::new_checked(bytes) else {
            return Verdict::Drop(DropReason::Malformed);
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if dst.is_multicast() {
            return Verdict::Local;
        }
        let hop = self.fib.lookup_v6(dst);
        if hop == Some(NextHop::Local) {
            return Verdict::Local;
        }
        if martian_v6(src, dst) {
            return Verdict::Drop(DropReason::Martian);
        }
        if ip.next_header() == IpProtocol::HOP_BY_HOP {
            return Verdict::Drop(DropReason::IpOptions);
        }
        let Some((out_port, via)) = self.egress(hop, IpAddr::V6(dst)) else {
            return self.icmp_error::<Ipv6Addr, _, _>(
                now_ns,
                frame,
                IcmpKind::NoRoute,
                DropReason::NoRoute,
                neighbours,
            );
        };
        if ip.hop_limit() <= 1 {
            return self.icmp_error::<Ipv6Addr, _, _>(
                now_ns,
                frame,
                IcmpKind::TimeExceeded,
                DropReason::TtlExceeded,
                neighbours,
            );
        }
        let ip_len = 40 + usize::from(ip.payload_len());
        let out = self.ports[usize::from(out_port)];
        if ip_len > usize::from(out.mtu_bytes) {
            let kind = IcmpKind::TooBig {
                mtu_bytes: out.mtu_bytes,
            };
            return self.icmp_error::<Ipv6Addr, _, _>(
                now_ns,
                frame,
                kind,
                DropReason::TooBig,
                neighbours,
            );
        }
        let hop_limit = ip.hop_limit();
        let Some(mac) = self.neighbour(now_ns, out_port, via, neighbours) else {
            return Verdict::Drop(DropReason::NoNeighbour);
        };
        frame.set_len(ETH_LEN + ip_len);
        let buf = frame.frame_mut();
        rewrite_eth(buf, out.mac, mac);
        if let Some(ip_bytes) = buf.get_mut(ETH_LEN..) {
            // RFC 8200 §3: hop limit − 1; IPv6 has no header checksum.
            Ipv6Packet::new_unchecked(ip_bytes).set_hop_limit(hop_limit - 1);
        }
        self.counters.forwarded_v6 += 1;
        Verdict::Forward { port: out_port }
    }

    /// The egress port and the neighbour to resolve for a route, `None` without one (or
    /// when it names a port that does not exist).
    #[inline]
    fn egress(&self, hop: Option<NextHop>, dst: IpAddr) -> Option<(u16, IpAddr)> {
        let (port, via) = match hop? {
            NextHop::Local => return None,
            NextHop::Connected { port } => (port, dst),
            NextHop::Gateway { port, gateway } => (port, gateway),
        };
        (usize::from(port) < self.ports.len()).then_some((port, via))
    }

    /// The neighbour's MAC, or a counted resolution request.
    #[inline]
    fn neighbour<N: Neighbours>(
        &mut self,
        now_ns: u64,
        port: u16,
        addr: IpAddr,
        neighbours: &mut N,
    ) -> Option<EthernetAddress> {
        let mac = neighbours.lookup(now_ns, port, addr);
        if mac.is_none() {
            neighbours.request(now_ns, port, addr);
            self.counters.neighbour_requests += 1;
        }
        mac
    }

    /// Where an error about a packet from `src` goes: port, neighbour MAC, counted failures.
    fn error_route<N: Neighbours>(
        &mut self,
        now_ns: u64,
        src: IpAddr,
        neighbours: &mut N,
    ) -> Option<(u16, Port, EthernetAddress)> {
        let hop = self.fib.lookup(src);
        if hop == Some(NextHop::Local) {
            self.counters.icmp_suppressed += 1;
            return None;
        }
        let Some((port, via)) = self.egress(hop, src) else {
            self.counters.icmp_no_route += 1;
            return None;
        };
        let out = self.ports[usize::from(port)];
        let has_src = match src {
            IpAddr::V4(_) => out.v4_src.is_some(),
            IpAddr::V6(_) => out.v6_src.is_some(),
        };
        if !has_src {
            self.counters.icmp_suppressed += 1;
            return None;
        }
        let Some(mac) = self.neighbour(now_ns, port, via, neighbours) else {
            self.counters.icmp_no_neighbour += 1;
            return None;
        };
        Some((port, out, mac))
    }

    /// Sends `kind` about the packet of family `A` (IPv4 or IPv6) in `frame` (checked),
    /// dropped for `reason`: never about an error or a later fragment, only along a route
    /// back with a known neighbour, with a quote the buffer holds, within the token bucket.
    fn icmp_error<A: ErrorFamily, F: FrameBuf, N: Neighbours>(
        &mut self,
        now_ns: u64,
        frame: &mut F,
        kind: IcmpKind,
        reason: DropReason,
        neighbours: &mut N,
    ) -> Verdict {
        let (allowed, src) = A::about(frame);
        if !allowed {
            self.counters.icmp_suppressed += 1;
            return Verdict::Drop(reason);
        }
        let Some((port, out, mac)) = self.error_route(now_ns, src.into(), neighbours) else {
            return Verdict::Drop(reason);
        };
        let Some(our) = A::ours(out.v4_src, out.v6_src) else {
            return Verdict::Drop(reason);
        };
        // The buffer is checked before a token is spent on it.
        let Some(quote) = A::quote(frame, out.mtu_bytes) else {
            self.counters.icmp_no_buffer += 1;
            return Verdict::Drop(reason);
        };
        if !self.icmp_bucket.take(now_ns) {
            self.counters.icmp_rate_limited += 1;
            return Verdict::Drop(reason);
        }
        let route = ErrorRoute {
            src_mac: out.mac,
            dst_mac: mac,
            src: our,
            dst: src,
            hop_limit: self.icmp_hop_limit,
        };
        self.icmp_ident = self.icmp_ident.wrapping_add(1);
        if !A::build(frame, kind, &route, self.icmp_ident, quote) {
            self.counters.icmp_no_buffer += 1;
            return Verdict::Drop(reason);
        }
        self.count_sent(kind);
        Verdict::IcmpError { port, reason }
    }

    fn count_sent(&mut self, kind: IcmpKind) {
        let c = &mut self.counters;
        match kind {
            IcmpKind::TimeExceeded => c.icmp_time_exceeded_sent += 1,
            IcmpKind::NoRoute => c.icmp_unreachable_sent += 1,
            IcmpKind::TooBig { .. } => c.icmp_too_big_sent += 1,
        }
    }
}

#[inline]
fn rewrite_eth(buf: &mut [u8], src: EthernetAddress, dst: EthernetAddress) {
    let mut eth = EthernetFrame::new_unchecked(buf);
    eth.set_dst_addr(dst);
    eth.set_src_addr(src);
}
