//! Configuration of the NIC model and the errors its set-up and control calls return.

use core::fmt;

/// Default NAPI poll budget (Linux `NAPI_POLL_WEIGHT`, 64 packets).
pub const BUDGET_DEFAULT_PACKETS: usize = 64;
/// Default receive ring size (82599 default `RxDescriptors`-like, 512 slots).
pub const RX_RING_SLOTS_DEFAULT: usize = 512;
/// Default transmit ring size.
pub const TX_RING_SLOTS_DEFAULT: usize = 512;
/// Largest queue count the model accepts (the 82599 has 128 RX/TX queues).
pub const QUEUES_MAX: u16 = 128;
/// Default limit on a received frame: a 9 KB jumbo frame plus Ethernet and VLAN headers.
pub const RX_FRAME_BYTES_MAX_DEFAULT: usize = 9216 + 18;
/// Default bound on the NIC's buffer free list.
pub const POOL_BUFFERS_MAX_DEFAULT: usize = 1024;
/// Largest merged IP packet GRO builds: the IPv4 total-length / IPv6 payload-length limit.
pub const GRO_IP_BYTES_MAX: usize = 65535;

/// Interrupt moderation of one queue.
///
/// A queue whose interrupts are armed and that holds unsignalled packets fires a wake-up when
///
/// - at least `interval_ns` have passed since its previous wake-up (the 82599 EITR / NDIS
///   "interrupt moderation" rule: a minimum gap between interrupts, so the first packet after
///   an idle period is signalled at once), or
/// - `packets_threshold` packets are pending (ethtool `rx-frames`; 0 disables the rule), or
/// - a TCP segment with PSH arrives and `lli_on_push` is set (the 82599's low-latency
///   interrupts, seed 004 "Low Latency Interrupts").
///
/// Packets here are wire packets: a segment coalesced into an open group counts like any
/// other arrival (the moderation engine sits before the coalescing engine's write-back).
///
/// With `adaptive` set, `interval_ns` is only the starting value: at each wake-up the interval
/// is recomputed from the packet rate observed since the previous wake-up (see
/// [`AdaptiveModeration`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModerationConfig {
    /// Minimum gap between two wake-ups of the queue, in nanoseconds. 0 = no moderation.
    pub interval_ns: u64,
    /// Pending packets that fire a wake-up before the interval has passed; 0 = rule off.
    pub packets_threshold: u32,
    /// Low-latency interrupts: a TCP segment with PSH fires at once.
    pub lli_on_push: bool,
    /// Low-latency interrupts by port (the 82599's LLI filters): a TCP or UDP packet to or
    /// from one of these ports fires at once.
    pub lli_ports: LliPorts,
    /// Adaptive interval (ixgbe / NDIS adaptive ITR); `None` = fixed `interval_ns`.
    pub adaptive: Option<AdaptiveModeration>,
}

impl ModerationConfig {
    /// No moderation: every packet that finds the queue armed fires a wake-up.
    pub const OFF: ModerationConfig = ModerationConfig {
        interval_ns: 0,
        packets_threshold: 0,
        lli_on_push: false,
        lli_ports: LliPorts::NONE,
        adaptive: None,
    };

    /// A fixed interval and no packet threshold.
    pub const fn fixed(interval_ns: u64) -> Self {
        ModerationConfig {
            interval_ns,
            packets_threshold: 0,
            lli_on_push: false,
            lli_ports: LliPorts::NONE,
            adaptive: None,
        }
    }
}

/// Most ports a low-latency interrupt rule names (the 82599 has a few LLI filters per port;
/// each arrival is compared with every one).
pub const LLI_PORTS_MAX: usize = 8;

/// The ports of a low-latency interrupt rule ([`ModerationConfig::lli_ports`]).
///
/// Invariant: `len <= LLI_PORTS_MAX`; only `ports[..len]` are meaningful.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LliPorts {
    ports: [u16; LLI_PORTS_MAX],
    len: u8,
}

/// More than [`LLI_PORTS_MAX`] ports for a low-latency interrupt rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyLliPorts;

impl core::fmt::Display for TooManyLliPorts {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "at most {LLI_PORTS_MAX} low-latency interrupt ports")
    }
}

impl LliPorts {
    /// No port.
    pub const NONE: LliPorts = LliPorts {
        ports: [0; LLI_PORTS_MAX],
        len: 0,
    };

    /// The rule for `ports` (duplicates kept once).
    pub fn new(ports: &[u16]) -> Result<LliPorts, TooManyLliPorts> {
        let mut l = LliPorts::NONE;
        for &p in ports {
            if l.contains(p) {
                continue;
            }
            let slot = l.ports.get_mut(usize::from(l.len)).ok_or(TooManyLliPorts)?;
            *slot = p;
            l.len += 1;
        }
        Ok(l)
    }

    /// The ports, in the order given.
    pub fn as_slice(&self) -> &[u16] {
        self.ports.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Whether `port` is one of them.
    #[inline]
    pub fn contains(&self, port: u16) -> bool {
        self.as_slice().contains(&port)
    }

    /// Whether the rule names no port.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for ModerationConfig {
    /// ixgbe's default: adaptive between 10 µs and 125 µs (8 000–100 000 interrupts/s).
    fn default() -> Self {
        ModerationConfig {
            interval_ns: 10_000,
            packets_threshold: 0,
            lli_on_push: false,
            lli_ports: LliPorts::NONE,
            adaptive: Some(AdaptiveModeration::default()),
        }
    }
}

/// Adaptive moderation: the interval rises linearly with the observed packet rate, from
/// `interval_ns_min` at rate 0 to `interval_ns_max` at `rate_pps_high` and above, smoothed
/// with an exponential moving average of weight 1/4 per wake-up.
///
/// This is the shape of ixgbe's `ixgbe_update_itr` (low latency at low rates, bulk latency at
/// high rates) and of NDIS adaptive interrupt moderation, reduced to one continuous rule so
/// tests can check monotonicity. Invariant (checked by [`NicConfig::validate`]):
/// `interval_ns_min <= interval_ns_max` and `rate_pps_high > 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveModeration {
    /// Interval at the lowest rates (latency first).
    pub interval_ns_min: u64,
    /// Interval at `rate_pps_high` and above (throughput first).
    pub interval_ns_max: u64,
    /// Packet rate (packets per second) at which the interval reaches its maximum.
    pub rate_pps_high: u64,
}

impl Default for AdaptiveModeration {
    fn default() -> Self {
        AdaptiveModeration {
            interval_ns_min: 10_000,
            interval_ns_max: 125_000,
            rate_pps_high: 1_000_000,
        }
    }
}

/// Receive coalescing (GRO / RSC) settings, per NIC.
///
/// # Coalescing model
///
/// Like the 82599's RSC (datasheet §7.11), a coalesced group occupies one ring slot from the
/// moment its first segment arrives; later segments of the flow are appended to that open
/// slot without taking another. A slot is *open* while its group may still grow; the driver
/// only sees *closed* slots, and every poll closes all groups first (so a poll always sees
/// everything that has arrived, as Linux's `napi_gro_flush` at the end of a poll does).
/// Because a group keeps the slot of its first segment, packets of one queue leave the ring in
/// the order their first segment arrived, and packets of one flow stay in order.
///
/// # Merge rules (ours, after Linux `tcp_gro_receive` and 82599 RSC)
///
/// A TCP segment is *coalescible* when it is IPv4 without options and not a fragment, or IPv6
/// without extension headers; its IP and TCP checksums verified good; it carries payload; its
/// flags are ACK plus optionally PSH/FIN/ECE (never SYN, RST, URG, CWR: those must reach the
/// stack as sent; CWR also ends ECN reaction windows, RFC 3168 §6.1.2).
///
/// A coalescible segment joins the flow's open group when all hold:
///
/// 1. its sequence number is the group's next expected one (otherwise: *gap*);
/// 2. the Ethernet header, IP header (all but length, IPv4 ID and checksum: TOS/ECN, DF, TTL
///    included) and TCP header (ports, ACK number, window, ECE, urgent pointer, option bytes)
///    are identical to the group's first segment, except that a Timestamps option's TSval may
///    advance (otherwise: *header change*). Like Linux, a changed ACK or window ends the group:
///    the stack must see every ACK advance and window update, or duplicate-ACK counting and
///    window tracking go wrong. The merged frame keeps the **first** segment's TSval: RFC 7323
///    §4.3 has a receiver that acknowledges several segments at once echo the earliest
///    unacknowledged TSval, and that is the one the stack should record;
/// 3. its payload is no longer than the group's first segment (the group's MSS), and the
///    merged IP packet stays within the size limit (otherwise: *size*).
///
/// A segment that joins and carries PSH or FIN, or is shorter than the MSS, closes the group
/// after joining; its PSH/FIN bits are carried on the merged header. So every merged frame is
/// `segments - 1` MSS-sized payloads plus one of at most MSS, and the stack can recover the
/// original boundaries from (`gro_mss_bytes`, `coalesced_segments`).
/// Any other packet of the flow closes the flow's group first. A group is also closed by the
/// flush timer, at the start of each poll, or when a new flow needs its context (the oldest is
/// evicted).
///
/// A closed group of two or more segments gets its IP length, IPv4 header checksum and TCP
/// checksum recomputed, so it is a valid frame on its own, and its checksum flags say Good.
///
/// Coalescing needs receive checksum offload (`NicConfig::rx_checksum_offload`): only
/// verified segments merge, as in Linux GRO. Bridging and routing want it off (seed 004:
/// RSC "isn't compatible with bridging or routing").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroConfig {
    /// Coalescing on or off.
    pub enabled: bool,
    /// Flows each queue coalesces at once (Linux GRO keeps 8 per NAPI instance); a new flow
    /// beyond this evicts (flushes) the oldest.
    pub flows_max: usize,
    /// A held flow is flushed this long after its first segment arrived (virtual time).
    pub flush_timeout_ns: u64,
    /// Largest merged IP packet in bytes (≤ [`GRO_IP_BYTES_MAX`]).
    pub ip_bytes_max: usize,
}

impl Default for GroConfig {
    fn default() -> Self {
        GroConfig {
            enabled: true,
            flows_max: 8,
            flush_timeout_ns: 50_000,
            ip_bytes_max: GRO_IP_BYTES_MAX,
        }
    }
}

/// Everything [`crate::Nic::new`] needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicConfig {
    /// Number of RX/TX queue pairs (1..=[`QUEUES_MAX`]).
    pub queues: u16,
    /// Receive descriptors per queue (≥ 1).
    pub rx_ring_slots: usize,
    /// Transmit descriptors per queue (≥ 1).
    pub tx_ring_slots: usize,
    /// Frames longer than this are dropped on receive (`rx_drop_oversize`).
    pub rx_frame_bytes_max: usize,
    /// Verify IPv4 header and TCP/UDP checksums on receive and report them in the descriptor.
    pub rx_checksum_offload: bool,
    /// Moderation applied to every queue at start (changeable per queue later).
    pub moderation: ModerationConfig,
    /// Receive coalescing.
    pub gro: GroConfig,
    /// Buffers the NIC's free list keeps for reuse (0 = no reuse).
    pub pool_buffers_max: usize,
    /// Exact-match steering filters the NIC holds (the 82599 has 8K perfect-match filters).
    pub filters_max: usize,
    /// Flow Director ATR: transmitted TCP segments install receive filters for their reply
    /// direction; `None` = off.
    pub atr: Option<AtrConfig>,
}

/// Application Targeted Routing (82599 Flow Director ATR, ixgbe `ixgbe_atr`): the NIC samples
/// transmitted TCP segments and installs an exact-match filter steering the *reverse* 5-tuple
/// to the queue that transmitted, so replies reach the core the application sends from.
/// Every SYN is sampled, and every `sample_every_packets`-th segment of a queue.
/// Filters are never aged out; when the table is full the sample is counted and skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtrConfig {
    /// Sample one transmitted TCP segment in this many per queue (≥ 1; ixgbe uses 20).
    pub sample_every_packets: u32,
}

impl Default for AtrConfig {
    fn default() -> Self {
        AtrConfig {
            sample_every_packets: 20,
        }
    }
}

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            queues: 4,
            rx_ring_slots: RX_RING_SLOTS_DEFAULT,
            tx_ring_slots: TX_RING_SLOTS_DEFAULT,
            rx_frame_bytes_max: RX_FRAME_BYTES_MAX_DEFAULT,
            rx_checksum_offload: true,
            moderation: ModerationConfig::default(),
            gro: GroConfig::default(),
            pool_buffers_max: POOL_BUFFERS_MAX_DEFAULT,
            filters_max: rss::FILTERS_MAX_DEFAULT,
            atr: None,
        }
    }
}

impl NicConfig {
    /// Checks the invariants the fields document.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.queues == 0 || self.queues > QUEUES_MAX {
            return Err(ConfigError::BadQueueCount);
        }
        if self.rx_ring_slots == 0 || self.tx_ring_slots == 0 {
            return Err(ConfigError::ZeroRingSlots);
        }
        validate_moderation(&self.moderation)?;
        if self.atr.is_some_and(|a| a.sample_every_packets == 0) {
            return Err(ConfigError::ZeroAtrSampleRate);
        }
        if self.gro.flows_max == 0 {
            return Err(ConfigError::ZeroGroFlows);
        }
        if self.gro.ip_bytes_max > GRO_IP_BYTES_MAX || self.gro.ip_bytes_max < 64 {
            return Err(ConfigError::BadGroSize);
        }
        Ok(())
    }
}

pub(crate) fn validate_moderation(m: &ModerationConfig) -> Result<(), ConfigError> {
    if m.adaptive
        .is_some_and(|a| a.interval_ns_min > a.interval_ns_max || a.rate_pps_high == 0)
    {
        return Err(ConfigError::BadAdaptiveBounds);
    }
    Ok(())
}

/// Why a configuration or control call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// `queues` is 0 or above [`QUEUES_MAX`].
    BadQueueCount,
    /// A ring with no slots.
    ZeroRingSlots,
    /// Adaptive moderation with `min > max` or a zero high rate.
    BadAdaptiveBounds,
    /// GRO with no flow slots.
    ZeroGroFlows,
    /// GRO size limit outside 64..=65535.
    BadGroSize,
    /// A queue index at or above the queue count.
    NoSuchQueue,
    /// A RETA index at or above the table size.
    BadRetaIndex,
    /// The steering filter table is full.
    FilterTableFull,
    /// A filter mixing IPv4 and IPv6 addresses.
    FilterMixedFamilies,
    /// ATR with a sample rate of 0.
    ZeroAtrSampleRate,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigError::BadQueueCount => "queue count must be 1..=128",
            ConfigError::ZeroRingSlots => "rings need at least one slot",
            ConfigError::BadAdaptiveBounds => "adaptive moderation needs min <= max and a rate > 0",
            ConfigError::ZeroGroFlows => "GRO needs at least one flow slot",
            ConfigError::BadGroSize => "GRO size limit must be 64..=65535 bytes",
            ConfigError::NoSuchQueue => "no such queue",
            ConfigError::BadRetaIndex => "RETA index out of range",
            ConfigError::FilterTableFull => "steering filter table is full",
            ConfigError::FilterMixedFamilies => "filter mixes IPv4 and IPv6 addresses",
            ConfigError::ZeroAtrSampleRate => "ATR sample rate must be at least 1",
        })
    }
}

impl core::error::Error for ConfigError {}
