//! The IP forwarding plane (DESIGN.md "Forwarding"), sans-IO: longest-prefix match for IPv4
//! ([`Lpm4`], DIR-24-8) and IPv6 ([`Lpm6`], a poptrie-style compressed multibit trie), the
//! routes and next hops they index ([`Fib`]), and the per-shard data path ([`Forwarder`]):
//! a burst of received frames in, one [`Verdict`] per frame out, each frame rewritten in its
//! own buffer.
//!
//! # Driver contract
//!
//! 1. Build a [`Forwarder`] from a [`ForwarderConfig`] (ports with their MACs, MTUs and
//!    addresses: connected and local routes are implied); add routes
//!    ([`Forwarder::add_route`], [`Forwarder::add_route_via`]).
//! 2. For each burst received on one port (32–64 frames, [`BURST_MAX`]), call
//!    [`Forwarder::process_burst`] with `now` (ns, non-decreasing), the frames' buffers
//!    ([`FrameBuf`]), a verdict slice and the neighbour table ([`Neighbours`], the caller's
//!    ARP/ND cache). Then, per verdict: transmit `Forward`/`IcmpError` frames on their port,
//!    hand `Local` frames to the local stack, recycle `Drop` buffers.
//! 3. Answer resolution requests ([`Neighbours::request`]) with the stack's ARP/ND.
//!
//! # Decisions
//!
//! - **Zero allocations per packet**: frames are rewritten in place; ICMP errors are built in
//!   the offending frame's buffer within its capacity; route changes (control plane) may
//!   allocate.
//! - **Unresolved neighbours drop** (counted, resolution requested) rather than queue: see
//!   [`neighbour`].
//! - **Not on the fast path** (dropped, counted): IPv4 options, IPv6 hop-by-hop headers,
//!   fragmentation (DF clear and too big), VLAN tags. ICMP redirects are not sent.
//! - Every frame gets exactly one outcome in [`Counters`]: forwarded, local, or one
//!   [`DropReason`].
#![deny(unsafe_code)]

pub mod counters;
pub mod fib;
pub mod forwarder;
pub mod icmp;
pub mod lpm4;
pub mod lpm6;
pub mod neighbour;

use core::fmt;

pub use counters::{Counters, DropReason};
pub use fib::{Fib, FibLimits, NextHop, Prefix, Route, RouteError};
pub use forwarder::{BURST_MAX, Forwarder, ForwarderConfig, PortConfig, Verdict};
pub use icmp::TokenBucket;
pub use lpm4::Lpm4;
pub use lpm6::Lpm6;
pub use neighbour::{NeighbourTable, Neighbours};

/// Why a longest-prefix-match table refused a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpmError {
    /// Longer than the address (32 or 128 bits).
    BadPrefixLength,
    /// Larger than the table's largest next-hop id.
    BadNextHop,
    /// IPv4: every second-level group is in use (`tbl8_groups_max`).
    Tbl8Full,
    /// IPv6: the trie would need more than `nodes_max` nodes.
    NodesFull,
}

impl fmt::Display for LpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LpmError::BadPrefixLength => "prefix length longer than the address",
            LpmError::BadNextHop => "next-hop id out of range",
            LpmError::Tbl8Full => "IPv4 table full (second-level groups)",
            LpmError::NodesFull => "IPv6 table full (nodes)",
        })
    }
}

impl core::error::Error for LpmError {}

/// A frame buffer the forwarder rewrites in place.
///
/// Invariant: `frame().len()` ≤ `capacity_bytes()`; after `set_len(n)` with
/// `n ≤ capacity_bytes()`, `frame().len() == n` and no allocation happened.
pub trait FrameBuf {
    /// The frame's bytes.
    fn frame(&self) -> &[u8];
    fn frame_mut(&mut self) -> &mut [u8];
    /// Bytes the buffer holds without allocating.
    fn capacity_bytes(&self) -> usize;
    /// Sets the frame's length (bytes past the old length are unspecified); a length past
    /// `capacity_bytes()` leaves the length unchanged.
    fn set_len(&mut self, len_bytes: usize);
}

impl FrameBuf for Vec<u8> {
    fn frame(&self) -> &[u8] {
        self
    }
    fn frame_mut(&mut self) -> &mut [u8] {
        self
    }
    fn capacity_bytes(&self) -> usize {
        self.capacity()
    }
    fn set_len(&mut self, len_bytes: usize) {
        if len_bytes <= self.capacity() {
            self.resize(len_bytes, 0);
        }
    }
}

/// A frame in a caller-owned fixed buffer (a NIC ring slot, a pool chunk): the first `len`
/// bytes are the frame. Invariant: `len` ≤ `buf.len()`.
#[derive(Debug)]
pub struct SliceFrame<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> SliceFrame<'a> {
    /// The first `len_bytes` of `buf` (clamped to its length) as a frame.
    pub fn new(buf: &'a mut [u8], len_bytes: usize) -> SliceFrame<'a> {
        let len = len_bytes.min(buf.len());
        SliceFrame { buf, len }
    }

    /// Frame length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl FrameBuf for SliceFrame<'_> {
    fn frame(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    fn frame_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
    fn capacity_bytes(&self) -> usize {
        self.buf.len()
    }
    fn set_len(&mut self, len_bytes: usize) {
        if len_bytes <= self.buf.len() {
            self.len = len_bytes;
        }
    }
}
