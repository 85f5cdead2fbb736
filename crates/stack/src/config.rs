//! Interface configuration and the stack's limits.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::{ChecksumCaps, EthernetAddress};

/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_S: u64 = 1_000_000_000;

/// An IPv4 address with its on-link prefix length.
///
/// Invariant: `prefix_len` ≤ 32 (larger values are treated as 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

impl Ipv4Cidr {
    pub const fn new(addr: Ipv4Addr, prefix_len: u8) -> Self {
        Ipv4Cidr { addr, prefix_len }
    }

    fn mask(&self) -> u32 {
        match self.prefix_len.min(32) {
            0 => 0,
            n => u32::MAX << (32 - u32::from(n)),
        }
    }

    /// True when `other` is on the same link (same prefix).
    pub fn contains(&self, other: Ipv4Addr) -> bool {
        let m = self.mask();
        u32::from(self.addr) & m == u32::from(other) & m
    }

    /// The directed broadcast address of the prefix (RFC 919, RFC 922); `None` for /31 and
    /// /32, which have none (RFC 3021).
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        (self.prefix_len < 31).then(|| Ipv4Addr::from(u32::from(self.addr) | !self.mask()))
    }
}

/// An IPv6 address with its on-link prefix length.
///
/// Invariant: `prefix_len` ≤ 128 (larger values are treated as 128).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Cidr {
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
}

impl Ipv6Cidr {
    pub const fn new(addr: Ipv6Addr, prefix_len: u8) -> Self {
        Ipv6Cidr { addr, prefix_len }
    }

    /// True when `other` is on the same link (same prefix).
    pub fn contains(&self, other: Ipv6Addr) -> bool {
        let m = match self.prefix_len.min(128) {
            0 => 0u128,
            n => u128::MAX << (128 - u32::from(n)),
        };
        u128::from(self.addr) & m == u128::from(other) & m
    }

    /// The link-local address derived from a MAC with modified EUI-64 (RFC 4291 §2.5.1,
    /// appendix A), prefix fe80::/64.
    pub fn link_local_from_mac(mac: EthernetAddress) -> Ipv6Cidr {
        let m = mac.0;
        let addr = Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 0x02,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ]);
        Ipv6Cidr::new(addr, 64)
    }
}

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1): ff02::1:ffXX:XXXX.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15],
    ])
}

/// The all-nodes link-local multicast address ff02::1 (RFC 4291 §2.7.1).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// One Ethernet interface: its MAC, addresses, default gateways and MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    pub mac: EthernetAddress,
    /// IPv4 addresses; the first is the default source.
    pub ipv4: Vec<Ipv4Cidr>,
    /// IPv6 addresses, link-local included; the first non-link-local one is the default
    /// source for global destinations.
    pub ipv6: Vec<Ipv6Cidr>,
    /// Next hop for IPv4 destinations no prefix covers.
    pub gateway_v4: Option<Ipv4Addr>,
    /// Next hop for IPv6 destinations no prefix covers (usually a link-local address).
    pub gateway_v6: Option<Ipv6Addr>,
    /// IP MTU in bytes (the largest IP packet, not counting the Ethernet header).
    pub mtu_bytes: u16,
}

impl InterfaceConfig {
    /// An interface with one IPv4 address, the MAC-derived link-local IPv6 address, no
    /// gateways and a 1500-byte MTU.
    pub fn new(mac: EthernetAddress, ipv4: Ipv4Cidr) -> Self {
        InterfaceConfig {
            mac,
            ipv4: vec![ipv4],
            ipv6: vec![Ipv6Cidr::link_local_from_mac(mac)],
            gateway_v4: None,
            gateway_v6: None,
            mtu_bytes: 1500,
        }
    }
}

/// Every bound the stack enforces. Each has a counter that says when it bit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Neighbour cache entries (ARP and ND together).
    pub neighbor_entries_max: usize,
    /// Packets queued per unresolved neighbour (RFC 1122 §2.3.2.2 asks for at least one).
    pub neighbor_pending_packets_max: usize,
    /// How long a resolved entry stays usable.
    pub neighbor_reachable_ns: u64,
    /// Delay between resolution requests (RFC 1122 §2.3.2.1: at most one per second).
    pub neighbor_retry_ns: u64,
    /// Requests sent before giving up (RFC 4861 §10 MAX_MULTICAST_SOLICIT = 3).
    pub neighbor_requests_max: u8,
    /// Datagrams under reassembly at once (IPv4 and IPv6 together): bounds the table itself.
    /// When full, a new datagram evicts the oldest one (`rx_reasm_evicted_table`).
    pub reasm_datagrams_max: usize,
    /// Largest reassembled datagram payload in bytes.
    pub reasm_bytes_max: usize,
    /// Bytes all datagrams under reassembly may hold together (buffers plus
    /// `reasm::ENTRY_OVERHEAD_BYTES` each), like Linux's `ipfrag_high_thresh` (4 MiB). Past
    /// it the oldest datagram is evicted (`rx_reasm_evicted_memory`).
    pub reasm_mem_max: usize,
    /// Bytes the datagrams from one source address may hold together; past it that source's
    /// own oldest datagram is evicted (`rx_reasm_evicted_source`), so one source cannot take
    /// the table from others. Should fit a datagram of `reasm_bytes_max`.
    pub reasm_source_mem_max: usize,
    /// Reassembly timeout (RFC 8200 §4.5: 60 s; RFC 791 suggests 15 s; we default to 30 s).
    pub reasm_timeout_ns: u64,
    /// Frames waiting in the transmit queue.
    pub tx_queue_frames_max: usize,
    /// Sockets (UDP, TCP listeners and connections together).
    pub sockets_max: usize,
    /// Datagrams queued per UDP socket.
    pub udp_rx_queue_datagrams_max: usize,
    /// ICMP errors per second (token bucket refill rate).
    pub icmp_errors_per_s_max: u32,
    /// ICMP error burst (token bucket depth).
    pub icmp_errors_burst_max: u32,
    /// Upper bound on a listener's accept backlog (established, not yet accepted).
    pub tcp_backlog_max: usize,
    /// Children in SYN-RECEIVED per listener before SYNs are answered with cookies.
    pub tcp_syn_backlog_max: usize,
    /// Answer SYNs past `tcp_syn_backlog_max` with SYN cookies (RFC 4987 §3.6) instead of
    /// dropping them.
    pub tcp_syn_cookies: bool,
    /// How long the moved marker an exported connection leaves behind (`Stack::tcp_export`)
    /// lives unless imported back or released first: 2·MSL with Linux's 30 s MSL, the time a
    /// TIME-WAIT would keep the 4-tuple.
    pub tcp_moved_marker_ns: u64,
    /// Frames caught mid-move waiting in the forward outbox (`Stack::poll_forward`).
    pub tcp_moved_forward_frames_max: usize,
    /// Connections one remote address may hold from our listeners (passive opens, SYN
    /// cookies included), as a percentage of `sockets_max` (at least one connection): a SYN,
    /// or a cookie's ACK, from a source at its share is dropped (`tcp_source_limit`) while
    /// other sources are still served, so one host cannot take the whole table. Connections
    /// our applications open are not counted. 100 or more turns it off. Default 25: a host
    /// (or a NAT in front of many) gets a quarter of the table.
    pub tcp_source_share_pct: u8,
    /// Table pressure: when a passive open finds `sockets_max · pct / 100` sockets or more in
    /// use, reclaimable passive connections are reclaimed (oldest idle first, by class: see
    /// `tcp_reclaim_unused_ns` and `tcp_reclaim_idle_ns`; counted `tcp_reclaimed_*`). 100 or
    /// more turns reclaiming off. Default 90.
    pub tcp_reclaim_high_water_pct: u8,
    /// Under pressure, a passive connection that has received nothing for this long, has
    /// nothing in flight or queued to send, and is still in the handshake or has exchanged no
    /// payload either way, is reset (`tcp_reclaimed_unused`): reclaimed before any connection
    /// that carried data. Default 10 s (half nginx's 60 s `client_header_timeout`, as this
    /// applies only under pressure and to connections that never sent a byte).
    pub tcp_reclaim_unused_ns: u64,
    /// Under pressure, any other passive connection that has received nothing for this long
    /// with nothing in flight or queued to send is reset (`tcp_reclaimed_idle`). Default 60 s
    /// (below nginx's 75 s `keepalive_timeout`). TIME-WAIT connections an application still
    /// holds go before all others at any age (`tcp_reclaimed_time_wait`); those it closed
    /// hold no slot (compact records, bounded by `tcp_time_wait_max`).
    pub tcp_reclaim_idle_ns: u64,
    /// A synchronized connection with data queued that has sat at a zero send window this
    /// long without the peer acknowledging anything is aborted with a RST
    /// (`tcp_zero_window_aborts`): a peer that never reads cannot pin its send buffer for
    /// ever. Judged when the connection's timers fire (its persist probes), so the time
    /// counts from the first probe and the abort comes at the first probe past the limit.
    /// RFC 9293 §3.8.6.1 keeps a probed connection open while the peer answers; RFC 6429
    /// lets the sender close one in the persist condition to manage its resources, and Linux
    /// applies `TCP_USER_TIMEOUT` to it. `None` turns it off. Default 120 s.
    pub tcp_zero_window_max_ns: Option<u64>,
    /// TCP buffer memory budget (`stack::tcp_mem`, like Linux's `tcp_mem`), over the ring
    /// storage all connections of this stack (one shard) have allocated: after memory
    /// pressure, the state returns to normal only below this. Default 48 MiB.
    pub tcp_mem_low_bytes: usize,
    /// At or above this, memory pressure: new connections get buffers of at most
    /// `tcp_mem_pressure_buffer_bytes`, send buffers shrink to what they hold and grow no
    /// further (`tcp_mem_pressure_entered`). Default 64 MiB.
    pub tcp_mem_pressure_bytes: usize,
    /// At or above this, new connections are refused and writes that would allocate return
    /// would-block (`tcp_mem_high_entered`, `tcp_mem_refused_*`). Default 96 MiB.
    pub tcp_mem_high_bytes: usize,
    /// The send and receive buffer size of connections opened under memory pressure.
    /// Default 16 KiB.
    pub tcp_mem_pressure_buffer_bytes: u32,
    /// Servers the client's TCP Fast Open cache remembers (cookie, MSS, loss history; RFC
    /// 7413 §4.1.3); a new server beyond it evicts the least recently used
    /// (`tcp_fastopen_cache_evictions`). 0: nothing is cached.
    pub tcp_fastopen_cache_servers_max: usize,
    /// Connections kept in TIME-WAIT as compact records (`stack::time_wait`, about 60 bytes
    /// each for IPv4) once the application closed them: past it, a new one evicts the
    /// oldest (`tcp_time_wait_evicted`), as Linux's `tcp_max_tw_buckets` and FreeBSD's
    /// `maxtcptw` bound theirs. 0 keeps none (a closed connection's 4-tuple is free at
    /// once). At most 16,777,214. Default 262,144 (about 16 MB).
    pub tcp_time_wait_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            neighbor_entries_max: 256,
            neighbor_pending_packets_max: 4,
            neighbor_reachable_ns: 30 * NS_PER_S,
            neighbor_retry_ns: NS_PER_S,
            neighbor_requests_max: 3,
            // About 800 empty first fragments fit one source's 256 KiB, so a single source
            // never fills the table; several can, and then the oldest goes.
            reasm_datagrams_max: 1024,
            reasm_bytes_max: 65_535,
            reasm_mem_max: 4 << 20,
            // Four datagrams of the largest size; 1/16 of the global bound.
            reasm_source_mem_max: 256 << 10,
            reasm_timeout_ns: 30 * NS_PER_S,
            tx_queue_frames_max: 1024,
            sockets_max: 1024,
            udp_rx_queue_datagrams_max: 64,
            icmp_errors_per_s_max: 100,
            icmp_errors_burst_max: 10,
            tcp_backlog_max: 128,
            tcp_syn_backlog_max: 256,
            tcp_syn_cookies: true,
            tcp_moved_marker_ns: 60 * NS_PER_S,
            tcp_moved_forward_frames_max: 256,
            tcp_source_share_pct: 25,
            tcp_reclaim_high_water_pct: 90,
            tcp_reclaim_unused_ns: 10 * NS_PER_S,
            tcp_reclaim_idle_ns: 60 * NS_PER_S,
            tcp_zero_window_max_ns: Some(120 * NS_PER_S),
            tcp_mem_low_bytes: 48 << 20,
            tcp_mem_pressure_bytes: 64 << 20,
            tcp_mem_high_bytes: 96 << 20,
            tcp_mem_pressure_buffer_bytes: 16 << 10,
            tcp_fastopen_cache_servers_max: 1024,
            tcp_time_wait_max: 262_144,
        }
    }
}

/// What the stack knows about the NIC's receive-side scaling.
#[derive(Debug, Clone)]
pub struct RssConfig {
    /// The NIC's hash function and key. With it the stack trusts the hash a frame carries for
    /// the connection-table lookup (DESIGN principle 4) and computes the same hash for
    /// connections it opens itself.
    pub hasher: rss::RssHasher,
    /// This shard's RETA and queue: active opens pick source ports whose replies land here.
    pub home: Option<(rss::Reta, u16)>,
    /// True when the driver drew the key at random for this host and never discloses it.
    /// Only then does the connection table index connections by the carried hash alone
    /// (hash once): the Toeplitz hash is linear, so under a known key (the default, the
    /// symmetric one) a peer with enough source addresses and ports can make tuples that
    /// share a hash and pile them into one run of the table. With `false` the table indexes
    /// by the stack's keyed software hash (one more hash per segment); the carried hash
    /// still gives the RETA bucket.
    pub key_is_secret: bool,
}

impl InterfaceConfig {
    pub(crate) fn is_our_v4(&self, a: Ipv4Addr) -> bool {
        self.ipv4.iter().any(|c| c.addr == a)
    }

    pub(crate) fn is_our_v6(&self, a: Ipv6Addr) -> bool {
        self.ipv6.iter().any(|c| c.addr == a)
    }

    pub(crate) fn is_our_ip(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(a) => self.is_our_v4(a),
            IpAddr::V6(a) => self.is_our_v6(a),
        }
    }

    /// The limited broadcast address or the directed broadcast of one of our prefixes.
    pub(crate) fn is_v4_broadcast(&self, a: Ipv4Addr) -> bool {
        a == Ipv4Addr::BROADCAST || self.ipv4.iter().any(|c| c.broadcast() == Some(a))
    }
}

/// Transmit offloads the port below the stack performs (Linux `NETIF_F_TSO`,
/// `NETIF_F_HW_CSUM`). Off by default: every frame whole, within the MTU, fully checksummed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxOffloadCaps {
    /// The device segments TCP: a connection's new data may leave as one frame of up to this
    /// many TCP payload bytes (whole segments of its MSS, [`wire::TxMeta::gso_size_bytes`]),
    /// beyond the MTU. 0: off. At most [`TSO_PAYLOAD_BYTES_MAX`].
    pub tso_payload_bytes_max: u32,
    /// The device completes TCP checksums: the stack writes only the pseudo-header sum
    /// ([`wire::TxMeta::l4_csum_partial`]) in the TCP segments of its fast path. TSO frames are
    /// always partial (the device checksums every segment it cuts).
    pub tcp_csum: bool,
}

/// Largest TSO payload, bytes: what fits a 64 KiB IP datagram behind the largest IPv6 + TCP
/// headers (40 + 60), as Linux's `GSO_LEGACY_MAX_SIZE` (65,536) less headers.
pub const TSO_PAYLOAD_BYTES_MAX: u32 = 65_535 - 40 - 60;

/// Everything a [`crate::Stack`] is built from.
#[derive(Debug, Clone)]
pub struct StackConfig {
    pub interface: InterfaceConfig,
    pub limits: Limits,
    /// What the NIC verifies and fills for us.
    pub checksums: ChecksumCaps,
    /// Transmit offloads of the port (TSO, TCP checksum completion).
    pub tx_offload: TxOffloadCaps,
    /// Hop limit / TTL of packets we originate.
    pub hop_limit: u8,
    /// Default configuration of TCP connections (listeners copy it; `set_option` edits the
    /// copy).
    pub tcp: tcp::Config,
    /// TCP Fast Open switches (RFC 7413; Linux `net.ipv4.tcp_fastopen`), all off by
    /// default; [`crate::Stack::tcp_set_fastopen`] changes them later.
    pub tcp_fastopen: tcp::fastopen::FastOpenConfig,
    /// Where TCP options go in the segments the stack sends (the values are the same):
    /// Linux's layout by default, FreeBSD's for conformance scripts written against it
    /// ([`wire::TcpOptionLayout`]).
    pub tcp_option_layout: wire::TcpOptionLayout,
    /// The notsent mark of sockets that set none (Linux `net.ipv4.tcp_notsent_lowat`, whose
    /// default `u32::MAX` means no mark): see `SocketOption::NotSentLowat`.
    pub tcp_notsent_lowat_bytes: u32,
    /// Linux's rules for ICMP errors about a TCP connection still opening (`tcp_v4_err`,
    /// `tcp_v6_err`, `tcp_req_err`), which the RFCs do not ask for. Off (RFC 1122 §4.2.3.9):
    /// only a hard error (protocol or port unreachable) ends a connection in SYN-SENT; soft
    /// ones (net or host unreachable, time exceeded) are recorded and reported only if the
    /// connection then times out. On: every destination-unreachable (except "fragmentation
    /// needed", which is path MTU discovery) or time-exceeded ends a connection in SYN-SENT,
    /// or a Fast Open child not yet accepted, with the error; and an IPv4 net/host
    /// unreachable or time exceeded (IPv6: administratively prohibited, port unreachable,
    /// policy or route rejection) quoting exactly the SYN-ACK of a child still in
    /// SYN-RECEIVED drops that child without a word (`tcp_icmp_requests_dropped`).
    pub tcp_icmp_errors_abort_opening: bool,
    /// A path MTU learnt while a connection is in SYN-SENT (an ICMP "fragmentation needed" or
    /// "packet too big" about its SYN) also lowers the MSS its later SYNs announce, and so
    /// caps its send MSS after the handshake, as Linux's route-based MSS does
    /// (`tcp::Connection::cap_announced_mss`). Off: the SYN announces the interface's MSS
    /// (RFC 1191 §3.1) and the path is learnt again from the first segment too large.
    pub tcp_syn_mss_follows_path_mtu: bool,
    /// `None`: the stack hashes flows itself and ignores carried hashes.
    pub rss: Option<RssConfig>,
    /// Secret for TCP initial sequence numbers (RFC 6528). Pass seeded randomness in; the
    /// stack draws none itself (DESIGN principle 6).
    pub secret: [u64; 2],
}

impl StackConfig {
    pub fn new(interface: InterfaceConfig) -> Self {
        // The MSS we announce follows the interface's MTU (less 40 bytes of IPv4 and TCP
        // headers; IPv6 connections take 20 more off, `TcpTable::config_for`): 1,460 for
        // Ethernet's 1,500, 8,960 for a 9,000-byte jumbo MTU.
        let tcp = tcp::Config {
            mss_bytes: interface.mtu_bytes.saturating_sub(40),
            ..tcp::Config::default()
        }
        .validated();
        StackConfig {
            interface,
            limits: Limits::default(),
            checksums: ChecksumCaps::ALL,
            tx_offload: TxOffloadCaps::default(),
            hop_limit: 64,
            tcp,
            tcp_fastopen: tcp::fastopen::FastOpenConfig::default(),
            tcp_option_layout: wire::TcpOptionLayout::Linux,
            tcp_notsent_lowat_bytes: u32::MAX,
            tcp_icmp_errors_abort_opening: false,
            tcp_syn_mss_follows_path_mtu: false,
            rss: None,
            secret: [0x5eed_0000_0000_0001, 0x5eed_0000_0000_0002],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_contains_and_broadcast() {
        let c = Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 5), 24);
        assert!(c.contains(Ipv4Addr::new(10, 0, 0, 200)));
        assert!(!c.contains(Ipv4Addr::new(10, 0, 1, 1)));
        assert_eq!(c.broadcast(), Some(Ipv4Addr::new(10, 0, 0, 255)));
        assert_eq!(Ipv4Cidr::new(c.addr, 32).broadcast(), None);
        assert!(Ipv4Cidr::new(c.addr, 0).contains(Ipv4Addr::new(1, 2, 3, 4)));
    }

    #[test]
    fn link_local_uses_modified_eui64() {
        let mac = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        let ll = Ipv6Cidr::link_local_from_mac(mac);
        assert_eq!(
            ll.addr,
            "fe80::5054:ff:fe12:3456".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            solicited_node(ll.addr),
            "ff02::1:ff12:3456".parse::<Ipv6Addr>().unwrap()
        );
    }
}
