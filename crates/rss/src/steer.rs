//! Exact-match steering filters and the full steering decision: exact filters first, then
//! wildcard rules, then RSS.
//!
//! Models the Intel 82599's Flow Director "perfect match" filters (datasheet §7.1.2.7): a
//! bounded table of exact 5-tuples, each naming a queue, consulted before RSS (ATR and the
//! offload engine install these), and the same filters with field masks as `ethtool -N`
//! installs them ([`RuleSet`]). An exact filter is the more specific of the two and wins: the
//! replies of a connection this host opened (ATR) reach the queue that opened it even when a
//! rule would send its port elsewhere or drop it.

use core::fmt;
use core::net::IpAddr;
use std::collections::HashMap;

use crate::frame::{FlowFields, FrameError};
use crate::input::{HashType, HashTypes, RssHasher};
use crate::reta::Reta;
use crate::rules::{RuleAction, RuleSet};
use crate::toeplitz::HASH_BURST_TUPLES;
use platform::toeplitz_burst::{TupleWindow, WINDOW_BYTES};

/// Where a plain IPv4 frame's 4-tuple starts: after the Ethernet header and the first 12
/// bytes of the IPv4 header.
const TUPLE_OFFSET: usize = 14 + 12;

/// What a burst's unused kernel slots point at.
static ZERO_WINDOW: TupleWindow = [0; WINDOW_BYTES];

/// Default filter capacity: the 82599's 8K perfect-match filters.
pub const FILTERS_MAX_DEFAULT: usize = 8192;

/// An exact-match key: protocol, addresses and ports as the packet carries them.
///
/// Invariant (checked on insert): `src` and `dst` are of the same family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiveTuple {
    /// IP protocol / IPv6 next header (6 = TCP, 17 = UDP).
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

/// Why a filter was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterError {
    /// The table holds its maximum number of filters.
    Full,
    /// Source and destination addresses are of different families.
    MixedFamilies,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilterError::Full => "steering filter table is full",
            FilterError::MixedFamilies => "filter mixes IPv4 and IPv6 addresses",
        })
    }
}

impl core::error::Error for FilterError {}

/// Bounded exact-match table `FiveTuple → queue`.
///
/// Lookup only: nothing iterates the map, so its random order cannot leak into behaviour.
/// Invariant: `filters.len() <= capacity`.
#[derive(Clone, Debug)]
pub struct FilterTable {
    filters: HashMap<FiveTuple, u16>,
    capacity: usize,
}

impl Default for FilterTable {
    fn default() -> Self {
        Self::with_capacity(FILTERS_MAX_DEFAULT)
    }
}

impl FilterTable {
    /// An empty table holding at most `capacity` filters.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            filters: HashMap::new(),
            capacity,
        }
    }

    /// Maximum number of filters.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of filters installed.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// Whether no filter is installed.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Installs or replaces the filter for `tuple`; returns the queue it replaced.
    /// Replacing an existing filter succeeds even when the table is full.
    pub fn insert(&mut self, tuple: FiveTuple, queue: u16) -> Result<Option<u16>, FilterError> {
        if tuple.src.is_ipv4() != tuple.dst.is_ipv4() {
            return Err(FilterError::MixedFamilies);
        }
        if let Some(slot) = self.filters.get_mut(&tuple) {
            return Ok(Some(core::mem::replace(slot, queue)));
        }
        if self.filters.len() >= self.capacity {
            return Err(FilterError::Full);
        }
        self.filters.insert(tuple, queue);
        Ok(None)
    }

    /// Removes the filter for `tuple`; returns its queue.
    pub fn remove(&mut self, tuple: &FiveTuple) -> Option<u16> {
        self.filters.remove(tuple)
    }

    /// The queue a filter assigns to `tuple`.
    ///
    /// An empty table answers without hashing the tuple (SipHash costs ~10–20 ns, more than
    /// the Toeplitz hash itself), so RSS-only configurations pay nothing for filters.
    #[inline]
    pub fn lookup(&self, tuple: &FiveTuple) -> Option<u16> {
        if self.filters.is_empty() {
            return None;
        }
        self.filters.get(tuple).copied()
    }
}

/// Which rule chose the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SteerHow {
    /// An exact-match filter.
    Filter,
    /// A wildcard rule ([`SteerDecision::rule`]) named the queue.
    Rule,
    /// A wildcard rule ([`SteerDecision::rule`]) drops the packet; the decision's `queue` is
    /// the default queue (where a NIC counts the drop).
    RuleDrop,
    /// The RSS hash through the RETA.
    Rss,
    /// No filter and no enabled hash type (non-IP, or hashing disabled for the packet's
    /// type): the default queue.
    NoHash,
}

/// Outcome of steering one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SteerDecision {
    /// Receive queue.
    pub queue: u16,
    /// RSS hash, computed whenever an enabled hash type covers the packet — also when a
    /// filter chose the queue, so the stack can reuse it ("hash once").
    pub hash: Option<u32>,
    /// Hash type used for `hash`.
    pub hash_type: Option<HashType>,
    /// Which rule chose the queue.
    pub how: SteerHow,
    /// With [`SteerHow::Rule`] or [`SteerHow::RuleDrop`]: the rule's index in
    /// [`Steering::rules`]; 0 otherwise.
    pub rule: u16,
}

/// Exact filters → rules → RSS → default queue, as a multi-queue NIC steers received packets.
#[derive(Clone, Debug, Default)]
pub struct Steering {
    /// Exact-match filters; they win over rules and RSS.
    pub filters: FilterTable,
    /// Wildcard rules (`ethtool -N`), first match wins; they win over RSS.
    pub rules: RuleSet,
    /// Indirection table.
    pub reta: Reta,
    /// Hasher (key and symmetric mode).
    pub hasher: RssHasher,
    /// Enabled hash types.
    pub hash_types: HashTypes,
    /// Queue for packets nothing else steers (non-IP, unhashed types); 0 on real NICs.
    pub default_queue: u16,
}

impl Steering {
    /// Steers already-parsed flow fields: the hash of the fields the enabled type covers
    /// (straight from the parsed addresses and ports, no intermediate input built), filters,
    /// then the RETA.
    #[inline]
    pub fn steer_fields(&self, fields: &FlowFields) -> SteerDecision {
        let hashed = fields
            .hash_type(self.hash_types)
            .map(|(t, ports)| (t, self.hasher.hash_fields(&fields.addrs, ports)));
        let hash = hashed.map(|(_, h)| h);
        let hash_type = hashed.map(|(t, _)| t);
        let filtered = if self.filters.is_empty() {
            None
        } else {
            fields.five_tuple().and_then(|t| self.filters.lookup(&t))
        };
        if let Some(queue) = filtered {
            return SteerDecision {
                queue,
                hash,
                hash_type,
                how: SteerHow::Filter,
                rule: 0,
            };
        }
        if !self.rules.is_empty() {
            if let Some((queue, how, rule)) = self.rule_decision(fields) {
                return SteerDecision {
                    queue,
                    hash,
                    hash_type,
                    how,
                    rule,
                };
            }
        }
        match hash {
            Some(h) => SteerDecision {
                queue: self.reta.queue_for_hash(h),
                hash,
                hash_type,
                how: SteerHow::Rss,
                rule: 0,
            },
            None => self.no_hash_decision(),
        }
    }

    /// The first matching rule's queue and [`SteerHow`]; out of line, so hosts without rules
    /// pay only the emptiness check.
    #[cold]
    #[inline(never)]
    fn rule_decision(&self, fields: &FlowFields) -> Option<(u16, SteerHow, u16)> {
        let (i, action) = self.rules.first_match(fields)?;
        // `RuleSet` holds at most `RULES_MAX` (128) rules: the index fits.
        let index = i as u16;
        Some(match action {
            RuleAction::Queue(q) => (q, SteerHow::Rule, index),
            RuleAction::Drop => (self.default_queue, SteerHow::RuleDrop, index),
        })
    }

    /// Parses and steers an Ethernet frame. Malformed IP gets an error (the caller counts and
    /// drops, or sends it to the default queue); non-IP gets [`SteerHow::NoHash`].
    ///
    /// The common frame — untagged IPv4, no options, not a fragment, TCP or UDP — is read in
    /// one pass of fixed offsets ([`FlowFields::from_plain_ipv4_frame`]); every other frame
    /// takes the general walk. Both give the same decision for every frame (property test
    /// `steer_frame_equals_the_general_walk`).
    #[inline]
    pub fn steer_frame(&self, frame: &[u8]) -> Result<SteerDecision, FrameError> {
        if let Some(d) = self.steer_plain_ipv4(frame) {
            return Ok(d);
        }
        if let Some(fields) = FlowFields::from_plain_ipv4_frame(frame) {
            return Ok(self.steer_fields(&fields));
        }
        self.steer_frame_general(frame)
    }

    /// The hot case without building flow fields: no filters or rules installed, a plain mode
    /// (not XOR-fold), the frame's L4 hash type enabled. The 12 bytes the Toeplitz input
    /// needs (addresses, then ports) sit contiguously in the frame, in input order.
    #[inline]
    fn steer_plain_ipv4(&self, frame: &[u8]) -> Option<SteerDecision> {
        if !self.plain_fast_path() {
            return None;
        }
        let (hash_type, tuple) = self.plain_ipv4_input(frame)?;
        let hash = self.hasher.toeplitz().hash_v4_tuple(tuple);
        Some(self.rss_decision(hash, hash_type))
    }

    /// Whether the configuration lets plain IPv4 frames skip flow fields: no filters or
    /// rules, and a mode that hashes the input as it is (not XOR-fold).
    #[inline]
    fn plain_fast_path(&self) -> bool {
        self.filters.is_empty()
            && self.rules.is_empty()
            && self.hasher.mode() != crate::SymmetricMode::XorFold
    }

    /// The hash type and 12-byte input of an untagged plain IPv4 TCP/UDP frame whose type is
    /// enabled; `None` for every other frame.
    #[inline]
    fn plain_ipv4_input<'f>(&self, frame: &'f [u8]) -> Option<(HashType, &'f [u8; 12])> {
        let (protocol, tuple) = crate::frame::plain_ipv4_tuple(frame)?;
        let hash_type = if protocol == crate::PROTO_TCP {
            HashType::TcpIpv4
        } else {
            HashType::UdpIpv4
        };
        self.hash_types
            .contains(hash_type)
            .then_some((hash_type, tuple))
    }

    /// The RSS decision for `hash`.
    #[inline]
    fn rss_decision(&self, hash: u32, hash_type: HashType) -> SteerDecision {
        SteerDecision {
            queue: self.reta.queue_for_hash(hash),
            hash: Some(hash),
            hash_type: Some(hash_type),
            how: SteerHow::Rss,
            rule: 0,
        }
    }

    /// Steers a burst of frames: `out[i]` = [`Steering::steer_frame`]`(frames[i])` for `i`
    /// below the shorter length (the rest of `out` is left as it was).
    ///
    /// Where the CPU has the AVX-512 kernel ([`Toeplitz::uses_burst_kernel`]), the frames
    /// the fast path takes (see [`Steering::steer_frame`]) are hashed
    /// [`HASH_BURST_TUPLES`] at a time ([`Toeplitz::hash_v4_windows8`]), read in place: the
    /// kernel reads the 16 bytes from the source address on, which every such frame of 42
    /// bytes or more has (a shorter one, and every other frame, takes `steer_frame`). Without
    /// the kernel, or with filters, rules or XOR-fold, each frame takes `steer_frame`. Same
    /// decisions as `steer_frame`, frame by frame (property test
    /// `steer_burst_equals_steer_frame`).
    ///
    /// [`HASH_BURST_TUPLES`]: crate::HASH_BURST_TUPLES
    /// [`Toeplitz::hash_v4_windows8`]: crate::Toeplitz::hash_v4_windows8
    /// [`Toeplitz::uses_burst_kernel`]: crate::Toeplitz::uses_burst_kernel
    pub fn steer_burst<F: AsRef<[u8]>>(
        &self,
        frames: &[F],
        out: &mut [Result<SteerDecision, FrameError>],
    ) {
        let frames = frames.get(..out.len()).unwrap_or(frames);
        self.steer_burst_with(frames, |i, d| {
            if let Some(o) = out.get_mut(i) {
                *o = d;
            }
        });
    }

    /// [`Steering::steer_burst`] handing each decision to `decided(i, decision)` for frame
    /// `i`, every frame once, in no promised order (frames the fast path takes come after the
    /// others of their group of [`HASH_BURST_TUPLES`]): for a caller that converts or counts
    /// decisions as they come instead of storing them first.
    ///
    /// [`HASH_BURST_TUPLES`]: crate::HASH_BURST_TUPLES
    #[inline]
    pub fn steer_burst_with<F: AsRef<[u8]>>(
        &self,
        frames: &[F],
        mut decided: impl FnMut(usize, Result<SteerDecision, FrameError>),
    ) {
        let toeplitz = self.hasher.toeplitz();
        if !self.plain_fast_path() || !toeplitz.uses_burst_kernel() {
            for (i, f) in frames.iter().enumerate() {
                decided(i, self.steer_frame(f.as_ref()));
            }
            return;
        }
        for (group, frames) in frames.chunks(HASH_BURST_TUPLES).enumerate() {
            let base = group * HASH_BURST_TUPLES;
            // Lane `j` hashes frame `base + j` when it takes the fast path (else zeroes,
            // unused); the others are decided at once.
            let mut windows = [&ZERO_WINDOW; HASH_BURST_TUPLES];
            let mut types = [None; HASH_BURST_TUPLES];
            for (j, ((f, w), t)) in frames.iter().zip(&mut windows).zip(&mut types).enumerate() {
                match self.plain_ipv4_window(f.as_ref()) {
                    Some((hash_type, window)) => {
                        *w = window;
                        *t = Some(hash_type);
                    }
                    None => decided(base + j, self.steer_frame(f.as_ref())),
                }
            }
            let hashes = toeplitz.hash_v4_windows8(&windows);
            for (j, (t, hash)) in types.into_iter().zip(hashes).enumerate() {
                if let Some(hash_type) = t {
                    decided(base + j, Ok(self.rss_decision(hash, hash_type)));
                }
            }
        }
    }

    /// [`Steering::plain_ipv4_input`] as the 16-byte window from the source address on, for a
    /// frame long enough to have it (42 bytes: a UDP header; TCP frames are longer).
    #[inline]
    fn plain_ipv4_window<'f>(&self, frame: &'f [u8]) -> Option<(HashType, &'f TupleWindow)> {
        let (hash_type, _) = self.plain_ipv4_input(frame)?;
        let window = frame.get(TUPLE_OFFSET..TUPLE_OFFSET + WINDOW_BYTES)?;
        Some((hash_type, window.try_into().ok()?))
    }

    /// [`Steering::steer_frame`] through the general walk only (Ethernet/VLAN walk, `wire`'s
    /// checked IP views): the reference the fast path is tested against.
    pub fn steer_frame_general(&self, frame: &[u8]) -> Result<SteerDecision, FrameError> {
        Ok(match FlowFields::from_frame(frame)? {
            Some(fields) => self.steer_fields(&fields),
            None => self.no_hash_decision(),
        })
    }

    /// The decision for a packet nothing steers (non-IP, or no enabled hash type): the
    /// default queue, no hash, [`SteerHow::NoHash`]. For callers that parse frames themselves
    /// with [`FlowFields::from_frame`] and get `Ok(None)`.
    pub fn no_hash_decision(&self) -> SteerDecision {
        SteerDecision {
            queue: self.default_queue,
            hash: None,
            hash_type: None,
            how: SteerHow::NoHash,
            rule: 0,
        }
    }
}
