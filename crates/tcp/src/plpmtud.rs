//! Packetization-layer path MTU discovery (RFC 4821; RFC 8899's black-hole detection and
//! search, for TCP): for paths that drop large packets and send no ICMP "fragmentation
//! needed" / "packet too big" (a black hole), where RFC 1191/8201 discovery never hears of
//! the limit. On only with [`crate::Config::plpmtud`].
//!
//! The walk, per connection:
//!
//! 1. **Black hole detected**: [`BLACK_HOLE_RTOS`] retransmission timeouts in a row with at
//!    least a full-size segment in flight (RFC 8899 §4.3: "a black hole ... when probe
//!    packets ... are lost"; Linux `tcp_mtu_probing` acts at its `tcp_retries1`). The send
//!    MSS drops to half, at most [`BASE_MSS_BYTES`] (Linux's `tcp_base_mss`), at least
//!    [`FLOOR_MSS_BYTES`], and the flight is resent at once at that size without a further
//!    congestion response ([`crate::Connection::reduce_path_mss`]). The size that failed is
//!    the search's upper bound.
//! 2. **Search upward** (RFC 4821 §7.6, a binary search): on each acknowledgment with no probe
//!    outstanding and the bounds more than [`SEARCH_DONE_BYTES`] apart, the connection tries
//!    the middle size: new data goes out at that MSS. It *passes* once the first full segment
//!    sent at that size is acknowledged (the lower bound rises to it); it *fails* when a
//!    retransmission timeout fires before (the upper bound falls to it, the MSS goes back to
//!    the lower bound and the flight is resent at that size). Unlike RFC 4821's separate probe
//!    packets, the whole flight rides at the tried size, so a failed try costs one RTO; and
//!    that RTO's congestion response stands (RFC 4821 §7.5 would not count it). Simpler, and
//!    the same end state.
//! 3. **Search again later**: once the bounds meet, the search rests for
//!    [`RAISE_INTERVAL_NS`] (RFC 4821 §7.7's 10 minutes), then tries again up to the size the
//!    connection negotiated, in case the path changed.
//!
//! The state lives beside the TCB, not in it (the TCB has no room: 1,024 bytes), in the
//! socket that holds the connection; it is created at the first black hole and does not move
//! with a connection snapshot (an imported connection starts over from its current MSS). The
//! holder calls [`Plpmtud::after_timeout`] when a retransmission timeout fired and
//! [`Plpmtud::after_input`] after each segment the connection processed.

use crate::connection::Connection;
use wire::tcp::SeqNumber;

/// Consecutive retransmission timeouts with a full-size segment in flight that declare a
/// black hole. Two: the first may be ordinary loss.
pub const BLACK_HOLE_RTOS: u8 = 2;
/// Largest MSS a black hole's first reduction goes to (Linux `tcp_base_mss`, 1024).
pub const BASE_MSS_BYTES: u16 = 1024;
/// Smallest MSS the search goes to: an IPv4 576-byte datagram's (RFC 879).
pub const FLOOR_MSS_BYTES: u16 = 536;
/// The search ends when its bounds are less than this apart.
pub const SEARCH_DONE_BYTES: u16 = 32;
/// Rest between a finished search and the next one (RFC 4821 §7.7: 10 minutes).
pub const RAISE_INTERVAL_NS: u64 = 600 * crate::config::NS_PER_S;

/// A size being tried: its MSS and where its first full segment ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Try {
    mss: u16,
    /// SND.UNA at or past this: a full segment sent at `mss` arrived.
    passed_at: SeqNumber,
}

/// One connection's search. Invariants: `FLOOR_MSS_BYTES ≤ low_mss < high_mss ≤
/// ceiling_mss + 1`; a try's MSS lies strictly between the bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plpmtud {
    /// The MSS the connection had when the black hole was found: never tried above.
    ceiling_mss: u16,
    /// Largest MSS known to pass.
    low_mss: u16,
    /// Smallest MSS known (or suspected) not to pass.
    high_mss: u16,
    trying: Option<Try>,
    /// No new try before SND.UNA reaches this: what was sent before the last change of size
    /// is acknowledged (the path carries the current size).
    settled_at: SeqNumber,
    /// When a finished search starts again (`u64::MAX`: not resting).
    rest_until_ns: u64,
    counters: PlpmtudCounters,
}

/// What one call changed, for the holder's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlpmtudEvent {
    /// A black hole was declared: the send MSS went down.
    BlackHole,
    /// A size tried upward passed.
    Passed,
    /// A size tried upward failed: the send MSS went back down.
    Failed,
}

/// What a connection's search did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlpmtudCounters {
    /// Black holes detected (each lowered the MSS).
    pub black_holes: u64,
    /// Sizes tried upward that passed.
    pub tries_passed: u64,
    /// Sizes tried upward that failed (a timeout before their first segment was acknowledged).
    pub tries_failed: u64,
}

/// A snapshot of a connection's search, for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlpmtudInfo {
    /// Largest MSS known to pass.
    pub low_mss: u16,
    /// Smallest MSS known not to pass.
    pub high_mss: u16,
    /// The MSS being tried, if any.
    pub trying_mss: Option<u16>,
    /// What the search did.
    pub counters: PlpmtudCounters,
}

impl Plpmtud {
    /// The search's state.
    pub fn info(&self) -> PlpmtudInfo {
        PlpmtudInfo {
            low_mss: self.low_mss,
            high_mss: self.high_mss,
            trying_mss: self.trying.map(|t| t.mss),
            counters: self.counters,
        }
    }

    /// A retransmission timeout of `conn` fired (its counter moved): a size being tried
    /// failed, or — after [`BLACK_HOLE_RTOS`] in a row with a full-size segment in flight — a
    /// black hole is declared and `state` created. Nothing without [`crate::Config::plpmtud`].
    pub fn after_timeout(
        state: &mut Option<Box<Plpmtud>>,
        conn: &mut Connection,
    ) -> Option<PlpmtudEvent> {
        if !conn.config.plpmtud || !conn.state.is_synchronized() {
            return None;
        }
        if let Some(p) = state.as_deref_mut() {
            if let Some(t) = p.trying.take() {
                if conn.snd.una.lt(t.passed_at) {
                    p.high_mss = t.mss;
                    p.counters.tries_failed += 1;
                    p.settled_at = conn.snd.max;
                    conn.reduce_path_mss(p.low_mss);
                    return Some(PlpmtudEvent::Failed);
                }
            }
        }
        let mss = conn.opts.snd_mss;
        let full_size_in_flight = conn.snd.max.diff(conn.snd.una) >= i32::from(conn.eff_mss());
        if conn.rtt.backoff_shift < BLACK_HOLE_RTOS || !full_size_in_flight {
            return None;
        }
        let lower = (mss / 2).clamp(FLOOR_MSS_BYTES, BASE_MSS_BYTES);
        if lower >= mss {
            return None;
        }
        let p = state.get_or_insert_with(|| {
            Box::new(Plpmtud {
                ceiling_mss: mss,
                low_mss: lower,
                high_mss: mss,
                trying: None,
                settled_at: conn.snd.max,
                rest_until_ns: u64::MAX,
                counters: PlpmtudCounters::default(),
            })
        });
        p.low_mss = lower;
        p.high_mss = mss;
        p.trying = None;
        p.settled_at = conn.snd.max;
        p.rest_until_ns = u64::MAX;
        p.counters.black_holes += 1;
        conn.reduce_path_mss(lower);
        Some(PlpmtudEvent::BlackHole)
    }

    /// `conn` processed a segment at `now`: a size being tried passed once its first full
    /// segment is acknowledged; the next size is tried once the current one settled; a
    /// finished search rests, then starts again.
    pub fn after_input(&mut self, now: u64, conn: &mut Connection) -> Option<PlpmtudEvent> {
        if !conn.state.is_synchronized() {
            return None;
        }
        let una = conn.snd.una;
        let mut event = None;
        if let Some(t) = self.trying {
            if !una.ge(t.passed_at) {
                return None;
            }
            self.low_mss = t.mss;
            self.trying = None;
            self.counters.tries_passed += 1;
            self.settled_at = una;
            event = Some(PlpmtudEvent::Passed);
        }
        if !una.ge(self.settled_at) {
            return event;
        }
        if self.high_mss.saturating_sub(self.low_mss) < SEARCH_DONE_BYTES {
            if self.rest_until_ns == u64::MAX {
                self.rest_until_ns = now.saturating_add(RAISE_INTERVAL_NS);
                return event;
            }
            if now < self.rest_until_ns || self.low_mss >= self.ceiling_mss {
                return event;
            }
            // Rested: the path may carry more now, up to the size the search started from.
            self.high_mss = self.ceiling_mss.saturating_add(1);
            self.rest_until_ns = u64::MAX;
        }
        let mss = self.low_mss + (self.high_mss - self.low_mss) / 2;
        // The first segment at `mss` starts at SND.MAX (new data) and carries `mss` less the
        // option bytes every segment carries (timestamps).
        let opts = conn.opts.snd_mss.saturating_sub(conn.eff_mss());
        let payload = u32::from(mss.saturating_sub(opts).max(1));
        self.trying = Some(Try {
            mss,
            passed_at: conn.snd.max + payload,
        });
        conn.opts.snd_mss = mss;
        event
    }
}
