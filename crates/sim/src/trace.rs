//! The event trace and its digest.
//!
//! Every delivery, drop and host timeout is folded, in the order the world processes it, into
//! a 64-bit FNV-1a digest over a fixed little-endian encoding of the event (see
//! [`TraceEvent::fold_into`]). Same seed and same build ⇒ same digest; the digest is what
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

/// A fast, stable 64-bit digest of a frame's bytes, used for [`TraceEvent::Deliver`].
///
/// The bytes are read as 64-bit little-endian words (the last one zero-padded); the state
/// starts from the FNV offset basis mixed with the length (so trailing zeros count) and
/// absorbs each word as `state = splitmix64_mix(state ^ word)`. That is about 8x fewer
/// multiplications than byte-wise FNV-1a, which matters for soak runs in debug builds. Each
/// step is a bijection of the state for a fixed word, so two frames of the same length that
/// differ in exactly one word always get different digests.
pub fn frame_digest(bytes: &[u8]) -> u64 {
    let mut h = FNV64_OFFSET ^ (bytes.len() as u64).wrapping_mul(FNV64_PRIME);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = <[u8; 8]>::try_from(word).map_or(0, u64::from_le_bytes);
        h = crate::rng::splitmix64_mix(h ^ w);
    }
    let mut tail = [0u8; 8];
    for (dst, src) in tail.iter_mut().zip(words.remainder()) {
        *dst = *src;
    }
    crate::rng::splitmix64_mix(h ^ u64::from_le_bytes(tail))
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
    /// Fold this event into `h` with a fixed encoding: a tag byte then each field as a
    /// little-endian `u64` (enums as their small codes).
    pub fn fold_into(&self, h: &mut Fnv64) {
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
                h.write(b"D");
                h.write_u64(at_ns);
                h.write_u64(u64::from(link.0));
                h.write_u64(dir.index() as u64);
                h.write_u64(u64::from(host.0));
                h.write_u64(u64::from(port.0));
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
                h.write(b"X");
                h.write_u64(at_ns);
                h.write_u64(u64::from(host.0));
                h.write_u64(u64::from(port.0));
                h.write_u64(u64::from(reason.code()));
                h.write_u64(len as u64);
            }
            TraceEvent::Timeout { at_ns, host } => {
                h.write(b"T");
                h.write_u64(at_ns);
                h.write_u64(u64::from(host.0));
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
    digest: Fnv64,
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
        let base = [0x5au8; 21];
        let d = frame_digest(&base);
        let mut seen = std::collections::BTreeSet::new();
        for byte in 0..base.len() {
            for bit in 0..8 {
                let mut f = base;
                if let Some(b) = f.get_mut(byte) {
                    *b ^= 1 << bit;
                }
                assert_ne!(frame_digest(&f), d, "byte {byte} bit {bit}");
                seen.insert(frame_digest(&f));
            }
        }
        assert_eq!(seen.len(), 21 * 8);
        assert_ne!(frame_digest(&[0; 8]), frame_digest(&[0; 9]));
        assert_ne!(frame_digest(&[]), frame_digest(&[0]));
        // Pinned: the digest feeds every recorded trace.
        assert_eq!(frame_digest(b"rsstack"), PINNED_FRAME_DIGEST);
    }

    const PINNED_FRAME_DIGEST: u64 = 1_733_813_684_175_187_128;
}
