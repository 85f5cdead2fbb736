//! What the forwarder did with every frame, by outcome and drop reason (DESIGN principle 5:
//! every drop path increments a named counter).
use core::fmt;

/// Why a frame was not forwarded (nor handed to the local stack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Ethernet or IP header truncated or inconsistent (lengths, version, IHL).
    Malformed,
    /// IPv4 header checksum does not verify.
    BadChecksum,
    /// Unicast Ethernet destination that is not the ingress port's MAC.
    NotForUs,
    /// 802.1Q/802.1ad tagged frame: the ports are untagged.
    Vlan,
    /// Source or destination address that must never be forwarded (RFC 1812 §5.3.7,
    /// RFC 4291 §2.5.6): loopback, unspecified, multicast/broadcast source, class E,
    /// link-local.
    Martian,
    /// IPv4 options or an IPv6 hop-by-hop header: not handled by the fast path.
    IpOptions,
    /// TTL / hop limit would reach zero (an ICMP time exceeded may have been sent).
    TtlExceeded,
    /// No route to the destination (an ICMP unreachable may have been sent).
    NoRoute,
    /// The next hop's MAC is unknown; resolution was requested.
    NoNeighbour,
    /// Larger than the egress MTU with DF set (IPv4 frag needed) or IPv6 (packet too big).
    TooBig,
    /// Larger than the egress MTU with DF clear: fragmenting is not done on the fast path.
    NeedsFragmentation,
}

impl DropReason {
    pub const ALL: [DropReason; 11] = [
        DropReason::Malformed,
        DropReason::BadChecksum,
        DropReason::NotForUs,
        DropReason::Vlan,
        DropReason::Martian,
        DropReason::IpOptions,
        DropReason::TtlExceeded,
        DropReason::NoRoute,
        DropReason::NoNeighbour,
        DropReason::TooBig,
        DropReason::NeedsFragmentation,
    ];

    /// The counter's name, as [`Counters::fields`] reports it.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "drop_malformed",
            DropReason::BadChecksum => "drop_bad_checksum",
            DropReason::NotForUs => "drop_not_for_us",
            DropReason::Vlan => "drop_vlan",
            DropReason::Martian => "drop_martian",
            DropReason::IpOptions => "drop_ip_options",
            DropReason::TtlExceeded => "drop_ttl_exceeded",
            DropReason::NoRoute => "drop_no_route",
            DropReason::NoNeighbour => "drop_no_neighbour",
            DropReason::TooBig => "drop_too_big",
            DropReason::NeedsFragmentation => "drop_needs_fragmentation",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The forwarder's counters. `rx_frames` = `forwarded` + `local` + Σ drops (each frame is
/// counted under exactly one outcome; an ICMP error sent for a dropped frame is counted both
/// under its drop reason and under `icmp_*_sent`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub rx_frames: u64,
    /// Frames forwarded, both families.
    pub forwarded: u64,
    /// Of `forwarded`, the IPv6 ones.
    pub forwarded_v6: u64,
    pub local: u64,
    pub drop_malformed: u64,
    pub drop_bad_checksum: u64,
    pub drop_not_for_us: u64,
    pub drop_vlan: u64,
    pub drop_martian: u64,
    pub drop_ip_options: u64,
    pub drop_ttl_exceeded: u64,
    pub drop_no_route: u64,
    pub drop_no_neighbour: u64,
    pub drop_too_big: u64,
    pub drop_needs_fragmentation: u64,
    /// Resolution requests passed to [`crate::Neighbours::request`].
    pub neighbour_requests: u64,
    pub icmp_time_exceeded_sent: u64,
    pub icmp_unreachable_sent: u64,
    /// IPv4 fragmentation needed and IPv6 packet too big.
    pub icmp_too_big_sent: u64,
    /// Not sent: the token bucket was empty.
    pub icmp_rate_limited: u64,
    /// Not sent by rule (RFC 1812 §4.3.2.7, RFC 4443 §2.4(e)): about an ICMP error, a
    /// non-first fragment, or with no source address to send from.
    pub icmp_suppressed: u64,
    /// Not sent: no route back to the packet's source.
    pub icmp_no_route: u64,
    /// Not sent: the route back's neighbour is unresolved (resolution requested).
    pub icmp_no_neighbour: u64,
    /// Not sent: the frame buffer cannot hold the error message.
    pub icmp_no_buffer: u64,
}

impl Counters {
    /// Adds `o` field by field (summing shards).
    pub fn add(&mut self, o: &Counters) {
        let Counters {
            rx_frames,
            forwarded,
            forwarded_v6,
            local,
            drop_malformed,
            drop_bad_checksum,
            drop_not_for_us,
            drop_vlan,
            drop_martian,
            drop_ip_options,
            drop_ttl_exceeded,
            drop_no_route,
            drop_no_neighbour,
            drop_too_big,
            drop_needs_fragmentation,
            neighbour_requests,
            icmp_time_exceeded_sent,
            icmp_unreachable_sent,
            icmp_too_big_sent,
            icmp_rate_limited,
            icmp_suppressed,
            icmp_no_route,
            icmp_no_neighbour,
            icmp_no_buffer,
        } = *o;
        self.rx_frames += rx_frames;
        self.forwarded += forwarded;
        self.forwarded_v6 += forwarded_v6;
        self.local += local;
        self.drop_malformed += drop_malformed;
        self.drop_bad_checksum += drop_bad_checksum;
        self.drop_not_for_us += drop_not_for_us;
        self.drop_vlan += drop_vlan;
        self.drop_martian += drop_martian;
        self.drop_ip_options += drop_ip_options;
        self.drop_ttl_exceeded += drop_ttl_exceeded;
        self.drop_no_route += drop_no_route;
        self.drop_no_neighbour += drop_no_neighbour;
        self.drop_too_big += drop_too_big;
        self.drop_needs_fragmentation += drop_needs_fragmentation;
        self.neighbour_requests += neighbour_requests;
        self.icmp_time_exceeded_sent += icmp_time_exceeded_sent;
        self.icmp_unreachable_sent += icmp_unreachable_sent;
        self.icmp_too_big_sent += icmp_too_big_sent;
        self.icmp_rate_limited += icmp_rate_limited;
        self.icmp_suppressed += icmp_suppressed;
        self.icmp_no_route += icmp_no_route;
        self.icmp_no_neighbour += icmp_no_neighbour;
        self.icmp_no_buffer += icmp_no_buffer;
    }

    /// ICMP errors sent, all kinds.
    pub fn icmp_sent(&self) -> u64 {
        self.icmp_time_exceeded_sent + self.icmp_unreachable_sent + self.icmp_too_big_sent
    }

    /// Adds one to the counter of `reason`.
    #[inline]
    pub fn count_drop(&mut self, reason: DropReason) {
        *self.drop_mut(reason) += 1;
    }

    /// The counter of `reason`.
    pub fn drops(&self, reason: DropReason) -> u64 {
        let mut c = *self;
        *c.drop_mut(reason)
    }

    /// All drops, every reason.
    pub fn drops_total(&self) -> u64 {
        DropReason::ALL.iter().map(|&r| self.drops(r)).sum()
    }

    fn drop_mut(&mut self, reason: DropReason) -> &mut u64 {
        match reason {
            DropReason::Malformed => &mut self.drop_malformed,
            DropReason::BadChecksum => &mut self.drop_bad_checksum,
            DropReason::NotForUs => &mut self.drop_not_for_us,
            DropReason::Vlan => &mut self.drop_vlan,
            DropReason::Martian => &mut self.drop_martian,
            DropReason::IpOptions => &mut self.drop_ip_options,
            DropReason::TtlExceeded => &mut self.drop_ttl_exceeded,
            DropReason::NoRoute => &mut self.drop_no_route,
            DropReason::NoNeighbour => &mut self.drop_no_neighbour,
            DropReason::TooBig => &mut self.drop_too_big,
            DropReason::NeedsFragmentation => &mut self.drop_needs_fragmentation,
        }
    }

    /// Every counter with its name, in declaration order (for summaries and live views).
    pub fn fields(&self) -> [(&'static str, u64); 24] {
        [
            ("rx_frames", self.rx_frames),
            ("forwarded", self.forwarded),
            ("forwarded_v6", self.forwarded_v6),
            ("local", self.local),
            ("drop_malformed", self.drop_malformed),
            ("drop_bad_checksum", self.drop_bad_checksum),
            ("drop_not_for_us", self.drop_not_for_us),
            ("drop_vlan", self.drop_vlan),
            ("drop_martian", self.drop_martian),
            ("drop_ip_options", self.drop_ip_options),
            ("drop_ttl_exceeded", self.drop_ttl_exceeded),
            ("drop_no_route", self.drop_no_route),
            ("drop_no_neighbour", self.drop_no_neighbour),
            ("drop_too_big", self.drop_too_big),
            ("drop_needs_fragmentation", self.drop_needs_fragmentation),
            ("neighbour_requests", self.neighbour_requests),
            ("icmp_time_exceeded_sent", self.icmp_time_exceeded_sent),
            ("icmp_unreachable_sent", self.icmp_unreachable_sent),
            ("icmp_too_big_sent", self.icmp_too_big_sent),
            ("icmp_rate_limited", self.icmp_rate_limited),
            ("icmp_suppressed", self.icmp_suppressed),
            ("icmp_no_route", self.icmp_no_route),
            ("icmp_no_neighbour", self.icmp_no_neighbour),
            ("icmp_no_buffer", self.icmp_no_buffer),
        ]
    }
}
