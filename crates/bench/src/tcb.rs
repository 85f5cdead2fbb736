//! The size of the TCP engine's per-connection state (issue 3: "the size of the hot
//! per-connection state touched on every segment; goal ≤ 256 bytes, four cache lines").
//!
//! `tcp::Connection` has no separate hot struct: its fields are grouped by comments
//! ("hot", "timestamps", "timers", "cold") but it is `repr(Rust)`, so the compiler orders
//! fields by alignment and the groups are not contiguous in memory. This module reports
//! `size_of` of the whole TCB and of every component type, and the bytes of the fields a
//! segment on an established connection reads or writes, summed from a field list that
//! mirrors `crates/tcp/src/connection/mod.rs` (`Connection`'s fields are private to the tcp
//! crate, so no `offset_of!` from here; the list names each field so a reviewer can check it).

use core::mem::size_of;

use tcp::cc::Congestion;
use tcp::ooo::OooQueue;
use tcp::ring::Ring;
use tcp::rtt::RttEstimator;
use tcp::{Config, Connection, Counters, State};
use wire::tcp::{SackBlock, SeqNumber};

/// One line of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub name: &'static str,
    pub bytes: usize,
}

/// Where a field sits in `Connection` and whether a segment touches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// The source's "hot: sequence space and windows" group.
    Hot,
    /// The "timestamps" group: read and written on every segment once RFC 7323 timestamps
    /// are negotiated (the default).
    Timestamps,
    /// The "timers" group: deadlines re-armed on every data segment or ACK.
    Timers,
    /// Fields of the "cold" group that every segment still reads or writes.
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

/// The fields a segment touches, by group (mirror of `Connection` in
/// `crates/tcp/src/connection/mod.rs`; `AckDue` is crate-private and one byte).
pub fn touched_fields() -> Vec<Field> {
    use Group::*;
    let f = |name, group, bytes| Field { name, group, bytes };
    vec![
        f("state", Hot, size_of::<State>()),
        f("snd_una", Hot, SEQ),
        f("snd_nxt", Hot, SEQ),
        f("snd_max", Hot, SEQ),
        f("snd_wnd", Hot, 4),
        f("snd_wl1", Hot, SEQ),
        f("snd_wl2", Hot, SEQ),
        f("max_snd_wnd", Hot, 4),
        f("snd_buf_seq", Hot, SEQ),
        f("rcv_nxt", Hot, SEQ),
        f("rcv_adv", Hot, SEQ),
        f("snd_mss", Hot, 2),
        f("rcv_mss_seen", Hot, 2),
        f("snd_wscale + rcv_wscale", Hot, 2),
        f("ack_due", Hot, 1),
        f("dupacks", Hot, 1),
        f(
            "9 flags (in_recovery .. keepalive_pending)",
            Hot,
            9 * size_of::<bool>(),
        ),
        f("events + dupacks_owed", Hot, 2),
        f("rcv_unacked_bytes", Hot, 4),
        f("recover", Hot, SEQ),
        f("cc: Congestion", Hot, size_of::<Congestion>()),
        f("rtt: RttEstimator", Hot, size_of::<RttEstimator>()),
        // `RttTimed` (crate-private): a sequence number and a send time, 16 bytes with padding.
        f("rtt_timed", Hot, SEQ + size_of::<u64>() + 4),
        f("ts_offset", Timestamps, 4),
        f("ts_recent", Timestamps, 4),
        f("ts_recent_age_ns", Timestamps, 8),
        f("last_ack_sent", Timestamps, SEQ),
        f("ts_rtx_floor", Timestamps, 4),
        f("rtx/persist/delack/keepalive deadlines", Timers, 4 * 8),
        f("unacked_since_ns", Timers, 8),
        f("last_tx_ns", Timers, 8),
        f("local_port + remote_port", ColdTouched, 4),
        f(
            "counters: rx/tx segments, rx/tx payload bytes",
            ColdTouched,
            4 * 8,
        ),
        f(
            "config: mss, recv buffer, nodelay, options",
            ColdTouched,
            2 + 4 + 1 + 3,
        ),
        f("send_buf: Ring header", ColdTouched, size_of::<Ring>()),
        f("recv_buf: Ring header", ColdTouched, size_of::<Ring>()),
        f(
            "ooo + scoreboard: OooQueue headers (emptiness checks)",
            ColdTouched,
            2 * size_of::<OooQueue>(),
        ),
        f("dsack", ColdTouched, size_of::<Option<SackBlock>>()),
        // RACK (RFC 8985, on by default with SACK): the pointer to its boxed state; the box
        // (crate-private `Rack`: transmit records, RACK.rtt/xmit_ts, reordering window) is
        // allocated on the first data segment and touched by every one, outside the TCB.
        f(
            "rack: Option<Box<Rack>>",
            ColdTouched,
            size_of::<Option<Box<u8>>>(),
        ),
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
            name: "  of which tcp::Config (copy per connection)",
            bytes: size_of::<Config>(),
        },
        Part {
            name: "  of which tcp::Counters",
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
            name: "stack::Stack (per shard, not per connection)",
            bytes: size_of::<stack::Stack>(),
        },
    ]
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
