//! Unit tests of the acceptability test, sequence wraparound and the TCB size.

use super::*;

fn syn() -> TcpRepr<'static> {
    TcpRepr {
        src_port: 9,
        dst_port: 80,
        seq_number: SeqNumber(1000),
        ack_number: SeqNumber(0),
        flags: TcpFlags::SYN,
        window_len: 1000,
        urgent_pointer: 0,
        max_seg_size: Some(1460),
        window_scale: None,
        sack_permitted: false,
        sack_blocks: [None; 4],
        timestamp: None,
        fast_open: None,
        payload: &[],
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

#[test]
fn idle_connection_fits_in_one_kilobyte_without_buffers() {
    // The TCB itself; rings and the out-of-order/scoreboard tables allocate on first use,
    // so an idle established connection owns nothing else.
    let size = core::mem::size_of::<Connection>();
    assert!(size <= 1024, "Connection is {size} bytes");
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

#[test]
fn hot_parts_come_first_without_padding() {
    // The parts every segment touches, then the cold ones (`repr(C)` order).
    let parts = Connection::layout();
    let hot = parts
        .iter()
        .position(|&(name, _, _)| name == "config")
        .unwrap();
    let hot_bytes: usize = parts[..hot].iter().map(|&(_, _, size)| size).sum();
    assert_eq!(parts[hot].1, hot_bytes, "padding among the hot parts");
    assert!(hot_bytes <= 6 * 64, "hot parts take {hot_bytes} bytes");
    assert_eq!(parts.last().unwrap().0, "counters");
}
