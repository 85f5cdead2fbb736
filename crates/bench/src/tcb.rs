//! The size of the TCP engine's per-connection state (issue 3: "the size of the hot
//! per-connection state touched on every segment; goal ≤ 256 bytes, four cache lines").
//!
//! `tcp::Connection` is grouped into sub-structs (`crates/tcp/src/connection/tcb.rs`: send and
//! receive sequence spaces, options, timestamps, recovery, timers, application flags, owed
//! output) plus congestion control, RTT and the cold parts. Each group is contiguous, and
//! `Connection` is `repr(C)` with the groups every segment touches first (offsets reported
//! by [`tcp::Connection::layout`]). This module reports `size_of` of the whole TCB and of every
//! component type, the bytes of the fields a segment on an established connection reads or
//! writes, summed from a field list that mirrors the groups (the list names each field so a
//! reviewer can check it), and the cache lines the groups every segment touches occupy.

use core::mem::size_of;

use tcp::cc::Congestion;
use tcp::connection::{self, AppFlags, Options, Recovery, RecvSeq, SendSeq, Timestamps};
use tcp::ooo::OooQueue;
use tcp::ring::Ring;
use tcp::rtt::RttEstimator;
use tcp::{Config, Connection, Counters, State};
use wire::tcp::SeqNumber;

/// One line of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub name: &'static str,
    pub bytes: usize,
}

/// Where a field sits in `Connection` and whether a segment touches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Sequence spaces, options, recovery, owed output, congestion and RTT state (`state`,
    /// `snd`, `rcv`, `opts`, `rec`, `app`, `out`, `cc`, `rtt`).
    Hot,
    /// The `ts` group: read and written on every segment once RFC 7323 timestamps are
    /// negotiated (the default).
    Timestamps,
    /// The `timers` group: deadlines re-armed on every data segment or ACK.
    Timers,
    /// Fields of the cold parts that every segment still reads or writes.
    ColdTouched,
}

/// A field of `Connection` touched while processing or emitting a segment on an established
/// connection (bulk data or its ACK, no loss), with the size of its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub group: Group,
    pub bytes: usize,
}

const SEQ: usize = size_of::<SeqNumber>();

/// The fields a segment touches, by group (mirror of `Connection`'s groups in
/// `crates/tcp/src/connection/tcb.rs`; `AckDue` is crate-private and one byte).
pub fn touched_fields() -> Vec<Field> {
    use Group::*;
    let f = |name, group, bytes| Field { name, group, bytes };
    vec![
        f("state", Hot, size_of::<State>()),
        f("snd.una", Hot, SEQ),
        f("snd.nxt", Hot, SEQ),
        f("snd.max", Hot, SEQ),
        f("snd.wnd", Hot, 4),
        f("snd.wl1", Hot, SEQ),
        f("snd.wl2", Hot, SEQ),
        f("snd.max_wnd", Hot, 4),
        f("snd.buf_seq", Hot, SEQ),
        f("rcv.nxt", Hot, SEQ),
        f("rcv.adv", Hot, SEQ),
        f("opts.snd_mss", Hot, 2),
        f("rcv.mss_seen", Hot, 2),
        f("opts.snd_wscale + opts.rcv_wscale", Hot, 2),
        f("out.ack_due", Hot, 1),
        f(
            "ecn.flags (ECN off or negotiated: one test per segment each way)",
            Hot,
            1,
        ),
        f("rec.dupacks", Hot, 1),
        f(
            "10 flags (rec.in_recovery .. out.keepalive_pending, out.rare_owed)",
            Hot,
            10 * size_of::<bool>(),
        ),
        f("out.events + out.dupacks_owed", Hot, 2),
        f("out.rcv_unacked_bytes", Hot, 4),
        f("rec.recover", Hot, SEQ),
        f("cc: Congestion", Hot, size_of::<Congestion>()),
        f("rtt: RttEstimator", Hot, size_of::<RttEstimator>()),
        f("ts.offset", Timestamps, 4),
        f("ts.recent", Timestamps, 4),
        f("ts.recent_age_ns", Timestamps, 8),
        f("ts.last_ack_sent", Timestamps, SEQ),
        f("ts.rtx_floor", Timestamps, 4),
        f(
            "timers: rtx/persist/delack/keepalive deadlines",
            Timers,
            4 * 8,
        ),
        f("timers.unacked_since_ns", Timers, 8),
        f("timers.last_tx_ns", Timers, 8),
        // The segment timed for RTT (without timestamps): a sequence number and a send time.
        f("timers.rtt_timed_end + rtt_timed_sent_ns", Timers, SEQ + 8),
        f("local_port + remote_port", ColdTouched, 4),
        f(
            "counters (inline, 32-bit deltas): rx/tx segments, rx/tx payload bytes",
            ColdTouched,
            4 * 4,
        ),
        f(
            "config: its pointer (the shared configuration's line is warm: all connections read it)",
            ColdTouched,
            size_of::<tcp::SharedConfig>(),
        ),
        f("send_buf: Ring header", ColdTouched, size_of::<Ring>()),
        f("recv_buf: Ring header", ColdTouched, size_of::<Ring>()),
        f(
            "ooo + scoreboard: OooQueue headers (emptiness checks)",
            ColdTouched,
            2 * size_of::<OooQueue>(),
        ),
        // `out.rare_owed` (in the flags above) stands for the D-SACK block and the RST owed,
        // which are out of the hot lines (`OutputRare`).
        // RACK (RFC 8985, on by default with SACK): its state (crate-private `Rack`: RACK.rtt,
        // xmit_ts, fack, min_RTT, reordering window, the reordering deadline, the header of its
        // transmit records) is inline in the TCB, created by the first data segment and
        // touched by every one; the records themselves are a table of their own.
        f("rack: Option<Rack> (inline)", ColdTouched, 128),
    ]
}

/// Bytes of the touched fields in `group` (sum of type sizes, no padding).
pub fn touched_bytes(group: Group) -> usize {
    touched_fields()
        .iter()
        .filter(|f| f.group == group)
        .map(|f| f.bytes)
        .sum()
}

/// `size_of` of the TCB and its components.
pub fn sizes() -> Vec<Part> {
    vec![
        Part {
            name: "tcp::Connection (whole TCB, boxed per connection by stack)",
            bytes: size_of::<Connection>(),
        },
        Part {
            name: "  of which the configuration's pointer (tcp::SharedConfig)",
            bytes: size_of::<tcp::SharedConfig>(),
        },
        Part {
            name: "tcp::Config (shared by the connections of a listener or stack)",
            bytes: size_of::<Config>(),
        },
        Part {
            name: "tcp::Counters (whole; in the TCB 56 bytes inline, the rare ones boxed by the first rare event)",
            bytes: size_of::<Counters>(),
        },
        Part {
            name: "  of which 2 × tcp::ring::Ring (headers; storage on first write)",
            bytes: 2 * size_of::<Ring>(),
        },
        Part {
            name: "  of which 2 × tcp::ooo::OooQueue (ooo + SACK scoreboard headers)",
            bytes: 2 * size_of::<OooQueue>(),
        },
        Part {
            name: "  of which tcp::cc::Congestion",
            bytes: size_of::<Congestion>(),
        },
        Part {
            name: "  of which tcp::rtt::RttEstimator",
            bytes: size_of::<RttEstimator>(),
        },
        Part {
            name: "  of which snd: SendSeq",
            bytes: size_of::<SendSeq>(),
        },
        Part {
            name: "  of which rcv: RecvSeq",
            bytes: size_of::<RecvSeq>(),
        },
        Part {
            name: "  of which opts: Options",
            bytes: size_of::<Options>(),
        },
        Part {
            name: "  of which ts: Timestamps",
            bytes: size_of::<Timestamps>(),
        },
        Part {
            name: "  of which rec: Recovery",
            bytes: size_of::<Recovery>(),
        },
        Part {
            name: "  of which timers: Timers",
            bytes: size_of::<connection::Timers>(),
        },
        Part {
            name: "  of which app: AppFlags",
            bytes: size_of::<AppFlags>(),
        },
        Part {
            name: "stack::Stack (per shard, not per connection)",
            bytes: size_of::<stack::Stack>(),
        },
    ]
}

/// The parts of `Connection` (as named by [`tcp::Connection::layout`]) that every segment
/// of an established connection touches somewhere: the hot and timer groups and the ports.
/// The cold parts (configuration, buffers, tables, counters) are touched in a few fields each
/// and left out.
pub const HOT_PARTS: [&str; 16] = [
    "state",
    "snd",
    "rcv",
    "opts",
    "ecn",
    "ts",
    "rec",
    "cc",
    "rtt",
    "timers",
    "app",
    "out",
    "local_port",
    "remote_port",
    "rack_deadline_ns",
    "earliest_deadline_ns",
];

/// Bytes of the hot parts and the distinct 64-byte lines they occupy in the real layout
/// (TCB-relative offsets; the box's own alignment may shift lines by a constant).
pub fn hot_span() -> (usize, usize) {
    let mut bytes = 0;
    let mut lines = std::collections::BTreeSet::new();
    for (name, offset, size) in Connection::layout() {
        if HOT_PARTS.contains(&name) && size > 0 {
            bytes += size;
            lines.extend(offset / 64..=(offset + size - 1) / 64);
        }
    }
    (bytes, lines.len())
}

/// Cache lines (64 bytes) a byte count needs at best.
pub fn cache_lines(bytes: usize) -> usize {
    bytes.div_ceil(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_state_is_part_of_the_tcb() {
        let touched: usize = [
            Group::Hot,
            Group::Timestamps,
            Group::Timers,
            Group::ColdTouched,
        ]
        .into_iter()
        .map(touched_bytes)
        .sum();
        assert!(touched > 0);
        assert!(touched <= size_of::<Connection>());
        assert_eq!(cache_lines(256), 4);
        assert_eq!(cache_lines(257), 5);
    }
}
