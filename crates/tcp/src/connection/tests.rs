//! Unit tests of the acceptability test, sequence wraparound and the TCB size.

use super::*;

fn syn() -> TcpRepr<'static> {
    TcpRepr {
        max_seg_size: Some(1460),
        ..TcpRepr::bare(9, 80, SeqNumber(1000), SeqNumber(0), TcpFlags::SYN, 1000)
    }
}

/// RCV.NXT = 1001 with a receive window of `wnd` bytes.
fn receiver(wnd: u32) -> Connection {
    let mut c = Connection::accept(0, &Config::default(), &syn(), SeqNumber(5), 0).unwrap();
    c.rcv.adv = c.rcv.nxt + wnd;
    c
}

#[test]
fn acceptability_empty_segment_zero_window_needs_exact_sequence() {
    // RFC 9293 §3.10.7.4 case 1: SEG.LEN = 0, RCV.WND = 0 ⇒ SEG.SEQ = RCV.NXT.
    let c = receiver(0);
    assert!(c.acceptable(SeqNumber(1001), 0));
    assert!(!c.acceptable(SeqNumber(1002), 0));
    assert!(!c.acceptable(SeqNumber(1000), 0));
}

#[test]
fn acceptability_empty_segment_open_window_must_start_inside() {
    // Case 2: SEG.LEN = 0, RCV.WND > 0 ⇒ RCV.NXT ≤ SEG.SEQ < RCV.NXT + RCV.WND.
    let c = receiver(100);
    assert!(c.acceptable(SeqNumber(1001), 0));
    assert!(c.acceptable(SeqNumber(1100), 0));
    assert!(!c.acceptable(SeqNumber(1101), 0));
    assert!(!c.acceptable(SeqNumber(1000), 0));
}

#[test]
fn acceptability_data_on_zero_window_only_at_rcv_nxt_for_its_ack() {
    // Case 3: SEG.LEN > 0, RCV.WND = 0 ⇒ not acceptable; we still process the ACK of a
    // segment at RCV.NXT (zero-window probe), trimming its text.
    let c = receiver(0);
    assert!(c.acceptable(SeqNumber(1001), 1));
    assert!(!c.acceptable(SeqNumber(1002), 1));
}

#[test]
fn acceptability_data_needs_first_or_last_byte_inside() {
    // Case 4: SEG.LEN > 0, RCV.WND > 0 ⇒ first or last octet inside the window.
    let c = receiver(100);
    assert!(c.acceptable(SeqNumber(990), 20), "last byte inside");
    assert!(c.acceptable(SeqNumber(1090), 50), "first byte inside");
    assert!(!c.acceptable(SeqNumber(900), 101), "entirely old");
    assert!(!c.acceptable(SeqNumber(1101), 10), "entirely beyond");
}

#[test]
fn sequence_comparisons_survive_wraparound() {
    let mut s = syn();
    s.seq_number = SeqNumber(u32::MAX - 10);
    let mut c = Connection::accept(0, &Config::default(), &s, SeqNumber(5), 0).unwrap();
    c.rcv.adv = c.rcv.nxt + 100;
    // RCV.NXT = 2^32 - 10; the window spans the wrap.
    assert!(c.acceptable(SeqNumber(50), 10));
    assert!(!c.acceptable(SeqNumber(200), 10));
}

/// Bytes the TCB may grow by before it passes 1 KiB (the room left for the next fields).
const TCB_ROOM_MIN_BYTES: usize = 8;

#[test]
fn tcb_fits_one_kilobyte_with_room_to_spare() {
    // The TCB itself; rings and the out-of-order/scoreboard tables allocate on first use,
    // so an idle established connection owns nothing else but its boxed counters.
    let size = core::mem::size_of::<Connection>();
    assert!(
        size + TCB_ROOM_MIN_BYTES <= 1024,
        "Connection is {size} bytes: less than {TCB_ROOM_MIN_BYTES} bytes left under 1 KiB"
    );
    // The last field's end (before the alignment padding) is what new fields grow from.
    let end = Connection::layout()
        .iter()
        .map(|&(_, offset, size)| offset + size)
        .max()
        .unwrap();
    assert!(end + TCB_ROOM_MIN_BYTES <= 1024, "fields end at {end}");
}

#[test]
fn tcb_starts_on_a_cache_line() {
    assert_eq!(core::mem::align_of::<Connection>(), 64);
    let boxed = Box::new(receiver(100));
    assert_eq!(&*boxed as *const Connection as usize % 64, 0);
}

#[test]
fn layout_lists_disjoint_parts_inside_the_tcb() {
    let parts = Connection::layout();
    let mut end = 0;
    for &(name, offset, size) in &parts {
        assert!(offset >= end, "{name} overlaps the part before it");
        end = offset + size;
    }
    assert!(end <= core::mem::size_of::<Connection>());
}

/// The parts every segment of an established connection touches (measured with
/// `scripts/bench-hot-bytes.sh`; see [`Connection`]), in layout order: the sequence spaces,
/// options, flags, timestamps, the stored earliest deadline and the owed output first (both
/// directions read them), then the deadlines, loss recovery, the buffer and table headers,
/// the pointers tested per segment and the inline counters.
const HOT_PARTS: [&str; 23] = [
    "state",
    "app",
    "opts",
    "ecn",
    "local_port",
    "remote_port",
    "rcv",
    "snd",
    "out",
    "ts",
    "earliest_deadline_ns",
    "config",
    "rack_deadline_ns",
    "timers",
    "rec",
    "recv_buf",
    "counters",
    "snd_sml",
    "send_buf",
    "ooo",
    "scoreboard",
    "skb",
    "records",
];

/// The hot parts' bound: seven lines (the engine groups, headers and counters as they are
/// represented today; the fields a segment touches in them are listed in [`Connection`]).
/// `tcp_info`'s per-segment fields fill the eighth.
const HOT_BYTES_MAX: usize = 7 * 64;

/// The hot parts come first, in order and without padding between them, so the lines a
/// segment touches are the TCB's first; the parts only an ACK of new data reads (window,
/// RTT, RACK, `tcp_info`) follow, and the rare counters' pointer is last.
#[test]
fn hot_parts_come_first_without_padding() {
    let parts = Connection::layout();
    let hot = &parts[..HOT_PARTS.len()];
    for (&(name, _, _), want) in hot.iter().zip(HOT_PARTS) {
        assert_eq!(name, want, "hot parts out of order");
    }
    let hot_bytes: usize = hot.iter().map(|&(_, _, size)| size).sum();
    let (_, last_offset, last_size) = hot[hot.len() - 1];
    assert_eq!(
        last_offset + last_size,
        hot_bytes,
        "padding among the hot parts"
    );
    assert!(
        hot_bytes <= HOT_BYTES_MAX,
        "hot parts take {hot_bytes} bytes"
    );
    let names: Vec<&str> = parts.iter().map(|&(name, _, _)| name).collect();
    assert_eq!(
        names[HOT_PARTS.len()..HOT_PARTS.len() + 3],
        ["info", "cc", "rtt"]
    );
    // The stored earliest deadline lies in the first two lines (read after every input,
    // both ways); the seven deadlines share one line.
    let line_of = |part: &str| {
        let &(_, offset, size) = parts.iter().find(|&&(n, _, _)| n == part).unwrap();
        (offset / 64, (offset + size - 1) / 64)
    };
    assert!(line_of("earliest_deadline_ns").1 <= 1);
    let (first, _) = line_of("rack_deadline_ns");
    assert_eq!(line_of("rack_deadline_ns"), (first, first));
    let timers = core::mem::offset_of!(Connection, timers);
    for deadline in [
        core::mem::offset_of!(Timers, rtx_deadline_ns),
        core::mem::offset_of!(Timers, persist_deadline_ns),
        core::mem::offset_of!(Timers, delack_deadline_ns),
        core::mem::offset_of!(Timers, keepalive_deadline_ns),
        core::mem::offset_of!(Timers, time_wait_deadline_ns),
        core::mem::offset_of!(Timers, tlp_deadline_ns),
    ] {
        assert_eq!(
            (timers + deadline) / 64,
            first,
            "a deadline outside the line"
        );
    }
    // RACK's 86 bytes start a line: two lines, not three.
    assert_eq!(
        line_of("rack").0 * 64,
        core::mem::offset_of!(Connection, rack)
    );
    assert_eq!(*names.last().unwrap(), "rack");
}

/// The inline counters are 32-bit deltas (`HotCounters`): one that would wrap folds every
/// delta into the rare store's 64-bit totals first, so totals read through `counters()` and
/// `tcp_info` stay exact past 4 GiB.
#[test]
fn hot_counter_deltas_fold_into_the_totals_before_they_wrap() {
    let mut c = receiver(100);
    let rx_before = c.counters().rx_segments;
    c.counters.tx_payload_bytes = u32::MAX - 10;
    assert!(c.counters_rare.is_none(), "no rare event yet");
    c.count_hot(100, |k| &mut k.tx_payload_bytes);
    assert_eq!(
        c.counters.tx_payload_bytes, 100,
        "the delta restarts after the fold"
    );
    assert_eq!(
        c.counters().tx_payload_bytes,
        u64::from(u32::MAX) - 10 + 100,
        "total kept across the fold"
    );
    assert_eq!(
        c.counters().rx_segments,
        rx_before,
        "the other deltas folded whole"
    );
    assert_eq!(c.tcp_info(0).bytes_sent, u64::from(u32::MAX) + 90);
    c.count_hot(5, |k| &mut k.tx_payload_bytes);
    assert_eq!(c.counters().tx_payload_bytes, u64::from(u32::MAX) + 95);
}

/// Issue 17 item 2: connections opened from one shared configuration hold it without a copy;
/// a socket option copies it for its connection alone (the others keep the shared one), and
/// one that changes nothing copies nothing.
#[test]
fn socket_options_copy_a_shared_configuration_for_their_connection_alone() {
    let shared = std::sync::Arc::new(Config::default());
    let mut a = Connection::accept(0, &shared, &syn(), SeqNumber(5), 0).unwrap();
    let b = Connection::accept(0, &shared, &syn(), SeqNumber(6), 0).unwrap();
    assert!(std::sync::Arc::ptr_eq(a.shared_config(), &shared));
    assert!(std::sync::Arc::ptr_eq(b.shared_config(), &shared));
    a.set_user_timeout(Config::default().user_timeout_ns);
    a.set_nodelay(false);
    assert!(
        std::sync::Arc::ptr_eq(a.shared_config(), &shared),
        "no change, no copy"
    );
    a.set_user_timeout(Some(5 * crate::config::NS_PER_S));
    assert!(!std::sync::Arc::ptr_eq(a.shared_config(), &shared));
    assert_eq!(
        a.config().user_timeout_ns,
        Some(5 * crate::config::NS_PER_S)
    );
    assert_eq!(
        b.config().user_timeout_ns,
        Config::default().user_timeout_ns
    );
    assert_eq!(*shared, Config::default());
    // Equal again: sharing may resume.
    a.set_user_timeout(Config::default().user_timeout_ns);
    assert!(a.share_config(&shared));
    assert!(std::sync::Arc::ptr_eq(a.shared_config(), &shared));
    a.set_nodelay(true);
    assert!(
        !a.share_config(&shared),
        "different configurations are not shared"
    );
}

/// A shared configuration that is not valid is not held as it is: the connection takes a
/// validated copy, as from a plain [`Config`].
#[test]
fn an_invalid_shared_configuration_is_replaced_by_a_validated_copy() {
    let raw = std::sync::Arc::new(Config {
        rto_min_ns: 10,
        rto_max_ns: 5,
        ..Config::default()
    });
    let c = Connection::accept(0, &raw, &syn(), SeqNumber(5), 0).unwrap();
    assert!(!std::sync::Arc::ptr_eq(c.shared_config(), &raw));
    assert_eq!(*c.config(), raw.validated());
}

#[test]
fn event_bits_follow_the_polling_order() {
    for (i, e) in EVENT_ORDER.iter().enumerate() {
        assert_eq!(event_bit(*e), 1 << i, "{e:?}");
    }
    // Several pending events come out lowest bit first, each once.
    let mut c = receiver(100);
    c.out.events = 0;
    for e in [
        Event::Closed,
        Event::Readable,
        Event::Writable,
        Event::Readable,
    ] {
        c.push_event(e);
    }
    let polled: Vec<Event> = core::iter::from_fn(|| c.poll_event()).collect();
    assert_eq!(polled, [Event::Readable, Event::Writable, Event::Closed]);
}

/// `set_deadline` keeps the stored earliest deadline equal to the minimum of the seven under
/// any sequence of arming, moving and disarming: a walk of 20,000 random moves (a fixed
/// xorshift seed) with few distinct times, so ties, the minimum moving later and the
/// minimum's own deadline being disarmed all occur often.
#[test]
fn stored_earliest_deadline_follows_every_arm_and_disarm() {
    const ALL: [Deadline; 7] = [
        Deadline::Rtx,
        Deadline::Persist,
        Deadline::Delack,
        Deadline::Keepalive,
        Deadline::TimeWait,
        Deadline::Tlp,
        Deadline::Rack,
    ];
    let mut c = receiver(100);
    assert_eq!(c.earliest_deadline_ns, c.deadlines_min_ns());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let (mut raised, mut disarmed_min) = (0u32, 0u32);
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let which = ALL[(x % 7) as usize];
        let t_ns = match (x >> 8) % 8 {
            0 | 1 => NEVER,
            k => 1_000 * k,
        };
        let old_ns = match which {
            Deadline::Rtx => c.timers.rtx_deadline_ns,
            Deadline::Persist => c.timers.persist_deadline_ns,
            Deadline::Delack => c.timers.delack_deadline_ns,
            Deadline::Keepalive => c.timers.keepalive_deadline_ns,
            Deadline::TimeWait => c.timers.time_wait_deadline_ns,
            Deadline::Tlp => c.timers.tlp_deadline_ns,
            Deadline::Rack => c.rack_deadline_ns,
        };
        let was_min = old_ns != NEVER && old_ns == c.earliest_deadline_ns;
        c.set_deadline(which, t_ns);
        // The cases that make the setter look at the other six.
        if was_min && t_ns == NEVER {
            disarmed_min += 1;
        } else if was_min && t_ns > old_ns {
            raised += 1;
        }
        assert_eq!(c.earliest_deadline_ns, c.deadlines_min_ns());
        assert_eq!(c.invariant_violation(), None);
    }
    assert!(
        raised > 200 && disarmed_min > 200,
        "walk too tame: {raised} {disarmed_min}"
    );
    let want = c.deadlines_min_ns();
    assert_eq!(c.poll_timeout(), (want != NEVER).then_some(want));
}
