//! The event trace and its digest.
//!
//! Every delivery, drop and host timeout is folded, in the order the world processes it, into
//! a 64-bit digest ([`TraceDigest`]) over a fixed encoding of the event as a few 64-bit
//! words (see [`TraceEvent::fold_into`]). Same seed and same build ⇒ same digest; the digest is what
//! determinism tests compare. The events themselves are kept only when recording is on.

use crate::fault::DropReason;
use crate::host::{HostId, PortId};
use crate::link::{Dir, LinkId};
use core::fmt;

/// FNV-1a 64-bit offset basis.
const FNV64_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV64_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Incremental FNV-1a (64-bit) hasher: stable across platforms and versions, unlike
/// `std::hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Self(FNV64_OFFSET)
    }
}

impl Fnv64 {
    /// A fresh hasher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fold bytes in.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(FNV64_PRIME);
        }
    }

    /// Fold a `u64` in as 8 little-endian bytes.
    pub fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }

    /// Hash of one byte string.
    pub fn hash(bytes: &[u8]) -> u64 {
        let mut h = Self::new();
        h.write(bytes);
        h.finish()
    }
}

/// The running digest of a trace: each 64-bit word is absorbed as
/// `state = splitmix64_mix(state ^ word)`, from the FNV offset basis. Each step is a
/// bijection of the state for a fixed word and of the word for a fixed state, so two traces
/// that differ in one word of one event always differ; order matters. (Until branch sim3 this
/// was byte-wise FNV-1a over the same fields: about four times the instructions per event.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceDigest(u64);

impl Default for TraceDigest {
    fn default() -> Self {
        Self(FNV64_OFFSET)
    }
}

impl TraceDigest {
    /// Absorb one word.
    #[inline]
    pub fn write_u64(&mut self, word: u64) {
        self.0 = crate::rng::splitmix64_mix(self.0 ^ word);
    }

    /// The digest so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// Odd multipliers of [`frame_digest`]'s four lanes.
const FRAME_LANE_MUL: [u64; 4] = [
    0x9e37_79b9_7f4a_7c15,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
    0xd6e8_feb8_6659_fd93,
];

/// A fast, stable 64-bit digest of a frame's bytes, used for [`TraceEvent::Deliver`].
///
/// The bytes are read as 64-bit little-endian words (the last one zero-padded), dealt round
/// robin to four lanes; each lane absorbs its word as `lane = fold((lane ^ word) · K)`, the
/// full 128-bit product of an odd per-lane `K` folded by XOR of its halves (one
/// multiplication per 8 bytes, four independent chains; a flipped bit changes both halves,
/// so a difference never stays a few bits wide for the next word to cancel, as it does with
/// a 64-bit multiply alone). The lanes are then folded with the SplitMix64 finaliser, lane 0
/// starting from the FNV offset basis mixed with the length (so trailing zeros count).
/// Not injective (no 64-bit digest of longer input is), but every one- and two-bit change of
/// the frames in the unit test gives a new digest. Trace digests over runs changed with it
/// (branch sim3): same seed and build, same digest, as before.
pub fn frame_digest(bytes: &[u8]) -> u64 {
    #[inline(always)]
    fn absorb(lane: u64, word: u64, mul: u64) -> u64 {
        let p = u128::from(lane ^ word) * u128::from(mul);
        (p as u64) ^ ((p >> 64) as u64)
    }
    let word_at = |chunk: &[u8]| <[u8; 8]>::try_from(chunk).map_or(0, u64::from_le_bytes);
    let mut lanes = [
        FNV64_OFFSET ^ (bytes.len() as u64).wrapping_mul(FNV64_PRIME),
        FRAME_LANE_MUL[1],
        FRAME_LANE_MUL[2],
        FRAME_LANE_MUL[3],
    ];
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        for (j, (lane, mul)) in lanes.iter_mut().zip(FRAME_LANE_MUL).enumerate() {
            *lane = absorb(
                *lane,
                word_at(block.get(8 * j..8 * j + 8).unwrap_or(&[])),
                mul,
            );
        }
    }
    let rest = blocks.remainder();
    let mut words = rest.chunks_exact(8);
    let mut j = 0;
    for word in &mut words {
        if let (Some(lane), Some(&mul)) = (lanes.get_mut(j), FRAME_LANE_MUL.get(j)) {
            *lane = absorb(*lane, word_at(word), mul);
        }
        j += 1;
    }
    let mut tail = [0u8; 8];
    for (dst, src) in tail.iter_mut().zip(words.remainder()) {
        *dst = *src;
    }
    if let (Some(lane), Some(&mul)) = (lanes.get_mut(j), FRAME_LANE_MUL.get(j)) {
        *lane = absorb(*lane, u64::from_le_bytes(tail), mul);
    }
    let mix = crate::rng::splitmix64_mix;
    mix(mix(mix(mix(lanes[0]) ^ lanes[1]) ^ lanes[2]) ^ lanes[3])
}

/// One observable event of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A frame was handed to a host.
    Deliver {
        /// Arrival instant.
        at_ns: u64,
        /// Link it travelled on.
        link: LinkId,
        /// Direction it travelled.
        dir: Dir,
        /// Receiving host.
        host: HostId,
        /// Receiving port.
        port: PortId,
        /// Frame length.
        len: usize,
        /// [`frame_digest`] of the frame bytes as delivered.
        frame_hash: u64,
    },
    /// A frame was dropped.
    Drop {
        /// The instant the sending host handed it over.
        at_ns: u64,
        /// The sending host.
        host: HostId,
        /// The sending port.
        port: PortId,
        /// Why.
        reason: DropReason,
        /// Frame length.
        len: usize,
    },
    /// A host's timer fired and `handle_timeout` was called.
    Timeout {
        /// The instant.
        at_ns: u64,
        /// The host.
        host: HostId,
    },
}

impl TraceEvent {
    /// Fold this event into `h` with a fixed encoding: a word of the tag byte and the small
    /// fields (ids and codes, each in its own bit range), then each wide field as one word.
    pub fn fold_into(&self, h: &mut TraceDigest) {
        match *self {
            TraceEvent::Deliver {
                at_ns,
                link,
                dir,
                host,
                port,
                len,
                frame_hash,
            } => {
                h.write_u64(u64::from(b'D') | (dir.index() as u64) << 8 | u64::from(port.0) << 16);
                h.write_u64(u64::from(link.0) | u64::from(host.0) << 32);
                h.write_u64(at_ns);
                h.write_u64(len as u64);
                h.write_u64(frame_hash);
            }
            TraceEvent::Drop {
                at_ns,
                host,
                port,
                reason,
                len,
            } => {
                h.write_u64(
                    u64::from(b'X') | u64::from(reason.code()) << 8 | u64::from(port.0) << 16,
                );
                h.write_u64(u64::from(host.0));
                h.write_u64(at_ns);
                h.write_u64(len as u64);
            }
            TraceEvent::Timeout { at_ns, host } => {
                h.write_u64(u64::from(b'T'));
                h.write_u64(u64::from(host.0));
                h.write_u64(at_ns);
            }
        }
    }
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceEvent::Deliver {
                at_ns,
                link,
                dir,
                host,
                port,
                len,
                frame_hash,
            } => write!(
                f,
                "{at_ns:>12} ns deliver {link} {dir} -> {host} {port} len={len} hash={frame_hash:016x}"
            ),
            TraceEvent::Drop {
                at_ns,
                host,
                port,
                reason,
                len,
            } => write!(
                f,
                "{at_ns:>12} ns drop    from {host} {port} len={len}: {reason}"
            ),
            TraceEvent::Timeout { at_ns, host } => write!(f, "{at_ns:>12} ns timeout {host}"),
        }
    }
}

/// The running digest and (optionally) the recorded events.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trace {
    digest: TraceDigest,
    events_count: u64,
    recording: bool,
    events: Vec<TraceEvent>,
}

impl Trace {
    pub(crate) fn push(&mut self, ev: TraceEvent) {
        ev.fold_into(&mut self.digest);
        self.events_count += 1;
        if self.recording {
            self.events.push(ev);
        }
    }

    pub(crate) fn digest(&self) -> u64 {
        self.digest.finish()
    }

    pub(crate) fn events_count(&self) -> u64 {
        self.events_count
    }

    pub(crate) fn set_recording(&mut self, on: bool) {
        self.recording = on;
    }

    pub(crate) fn events(&self) -> &[TraceEvent] {
        &self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_reference_vectors() {
        // Reference values from the FNV specification's test suite.
        assert_eq!(Fnv64::hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fnv64::hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fnv64::hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn frame_digest_sees_every_bit_length_and_trailing_zeros() {
        // Lengths that end inside a block, on a word, and a full frame of 47 blocks + 10.
        for len in [21usize, 40, 64, 1_514] {
            let base: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ 0x5a).collect();
            let d = frame_digest(&base);
            let mut seen = std::collections::BTreeSet::new();
            for byte in 0..base.len() {
                for bit in 0..8 {
                    let mut f = base.clone();
                    if let Some(b) = f.get_mut(byte) {
                        *b ^= 1 << bit;
                    }
                    assert_ne!(frame_digest(&f), d, "len {len} byte {byte} bit {bit}");
                    seen.insert(frame_digest(&f));
                }
            }
            assert_eq!(seen.len(), len * 8, "len {len}");
        }
        // Every pair of bit flips in a short frame: no two give the same digest.
        let short: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(29) ^ 0xa5).collect();
        let mut pairs = std::collections::BTreeSet::new();
        for a in 0..short.len() * 8 {
            for b in a..short.len() * 8 {
                let mut f = short.clone();
                f[a / 8] ^= 1 << (a % 8);
                if b != a {
                    f[b / 8] ^= 1 << (b % 8);
                }
                pairs.insert(frame_digest(&f));
            }
        }
        assert_eq!(pairs.len(), 320 * 321 / 2);
        for len in 0..70 {
            assert_ne!(
                frame_digest(&vec![0; len]),
                frame_digest(&vec![0; len + 1]),
                "{len}"
            );
        }
        // Pinned: the digest feeds every recorded trace.
        assert_eq!(frame_digest(b"rsstack"), PINNED_FRAME_DIGEST);
    }

    #[test]
    fn trace_digest_sees_every_field_of_every_event_and_their_order() {
        let deliver = |at_ns, link, dir, host, port, len, frame_hash| TraceEvent::Deliver {
            at_ns,
            link: LinkId(link),
            dir,
            host: HostId(host),
            port: PortId(port),
            len,
            frame_hash,
        };
        let drop = |at_ns, host, port, reason, len| TraceEvent::Drop {
            at_ns,
            host: HostId(host),
            port: PortId(port),
            reason,
            len,
        };
        let timeout = |at_ns, host| TraceEvent::Timeout {
            at_ns,
            host: HostId(host),
        };
        let digest = |events: &[TraceEvent]| {
            let mut h = TraceDigest::default();
            for e in events {
                e.fold_into(&mut h);
            }
            h.finish()
        };
        let variants = [
            deliver(5, 1, Dir::AToB, 2, 3, 60, 9),
            deliver(6, 1, Dir::AToB, 2, 3, 60, 9),
            deliver(5, 2, Dir::AToB, 2, 3, 60, 9),
            deliver(5, 1, Dir::BToA, 2, 3, 60, 9),
            deliver(5, 1, Dir::AToB, 3, 3, 60, 9),
            deliver(5, 1, Dir::AToB, 2, 4, 60, 9),
            deliver(5, 1, Dir::AToB, 2, 3, 61, 9),
            deliver(5, 1, Dir::AToB, 2, 3, 60, 10),
            drop(5, 2, 3, DropReason::Loss, 60),
            drop(6, 2, 3, DropReason::Loss, 60),
            drop(5, 3, 3, DropReason::Loss, 60),
            drop(5, 2, 4, DropReason::Loss, 60),
            drop(5, 2, 3, DropReason::Mtu, 60),
            drop(5, 2, 3, DropReason::Loss, 61),
            timeout(5, 2),
            timeout(6, 2),
            timeout(5, 3),
        ];
        let all: std::collections::BTreeSet<u64> = variants.iter().map(|e| digest(&[*e])).collect();
        assert_eq!(all.len(), variants.len());
        let (a, b) = (variants[0], variants[14]);
        assert_ne!(digest(&[a, b]), digest(&[b, a]));
    }

    const PINNED_FRAME_DIGEST: u64 = 14_890_804_738_056_893_003;
}
