//! Zero-copy completions, transmit timestamps and the error queue, `TCP_NOTSENT_LOWAT`,
//! `SO_MARK` (`stack::tcp_notify`), through two stacks.
mod common;

use common::*;
use core::net::SocketAddr;

use stack::{
    Notification, Readiness, SendFlags, SocketError, SocketHandle, SocketOption, Stack,
    TxTimestampKind, TxTimestamping,
};

fn establish(p: &mut Pair, server: SocketAddr) -> (SocketHandle, SocketHandle, SocketHandle) {
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    while p.a.poll_event().is_some() {}
    (c, s, l)
}

const ZC: SendFlags = SendFlags {
    more: false,
    eor: false,
    zerocopy: true,
    continues: false,
};

fn notifications(s: &mut Stack, h: SocketHandle) -> Vec<Notification> {
    std::iter::from_fn(|| s.tcp_recv_notification(h).ok()).collect()
}

fn zc(first_id: u32, last_id: u32) -> Notification {
    Notification::ZeroCopy {
        first_id,
        last_id,
        copied: true,
    }
}

/// Delivers what A sent so far, after holding it back.
fn release_a(p: &mut Pair) {
    p.capture_a = false;
    for f in std::mem::take(&mut p.captured_a) {
        p.b.receive(p.now, &f, &stack::RxMeta::NONE);
    }
    p.exchange();
}

#[test]
fn zero_copy_completion_is_readable_once_acknowledged_and_ranges_join() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    p.a.set_option(c, SocketOption::ZeroCopy(true)).unwrap();
    p.capture_a = true;
    assert_eq!(p.a.tcp_send_with(c, &[1; 1000], ZC), Ok(1000));
    p.exchange();
    // Sent, not acknowledged: nothing yet.
    assert_eq!(p.a.tcp_recv_notification(c), Err(SocketError::WouldBlock));
    assert!(
        !p.a.tcp_readiness(c)
            .unwrap()
            .contains(Readiness::ERROR_QUEUE)
    );
    p.advance(MS);
    release_a(&mut p);
    p.advance(S);
    let edge = std::iter::from_fn(|| p.a.poll_event())
        .any(|e| e.handle == c && e.readiness.contains(Readiness::ERROR_QUEUE));
    assert!(edge, "no ERROR_QUEUE edge");
    let r = p.a.tcp_readiness(c).unwrap();
    assert!(r.contains(Readiness::ERROR_QUEUE) && !r.contains(Readiness::ERROR));
    assert_eq!(notifications(&mut p.a, c), vec![zc(0, 0)]);
    assert!(
        !p.a.tcp_readiness(c)
            .unwrap()
            .contains(Readiness::ERROR_QUEUE)
    );
    // Two more, each acknowledged before the queue is read: one range.
    for _ in 0..2 {
        assert_eq!(p.a.tcp_send_with(c, &[1; 500], ZC), Ok(500));
        p.advance(S);
    }
    assert_eq!(notifications(&mut p.a, c), vec![zc(1, 2)]);
    assert_eq!(p.a.tcp_recv_notification(c), Err(SocketError::WouldBlock));
}

#[test]
fn zero_copy_ids_count_only_sends_that_queue_bytes_with_the_option_on() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    // Without SO_ZEROCOPY the flag is ignored.
    assert_eq!(p.a.tcp_send_with(c, &[1; 100], ZC), Ok(100));
    p.advance(S);
    assert!(notifications(&mut p.a, c).is_empty());
    p.a.set_option(c, SocketOption::ZeroCopy(true)).unwrap();
    // A full send buffer: the send queues nothing and takes no ID.
    p.a.set_option(c, SocketOption::SendBufferBytes(4000))
        .unwrap();
    p.capture_a = true;
    while p.a.tcp_send(c, &[0; 4096]).is_ok() {}
    assert_eq!(
        p.a.tcp_send_with(c, &[1; 10], ZC),
        Err(SocketError::WouldBlock)
    );
    release_a(&mut p);
    p.advance(S);
    assert_eq!(p.a.tcp_send_with(c, &[1; 10], ZC), Ok(10));
    p.advance(S);
    assert_eq!(notifications(&mut p.a, c), vec![zc(0, 0)]);
}

#[test]
fn a_send_in_pieces_keeps_one_zero_copy_id() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    p.a.set_option(c, SocketOption::ZeroCopy(true)).unwrap();
    assert_eq!(p.a.tcp_send_with(c, &[1; 300], ZC), Ok(300));
    let more = SendFlags {
        continues: true,
        ..ZC
    };
    assert_eq!(p.a.tcp_send_with(c, &[1; 300], more), Ok(300));
    p.advance(S);
    assert_eq!(notifications(&mut p.a, c), vec![zc(0, 0)]);
}

#[test]
fn accepted_connections_inherit_zero_copy_mark_and_notsent_mark() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 8).unwrap();
    p.b.set_option(l, SocketOption::ZeroCopy(true)).unwrap();
    p.b.set_option(l, SocketOption::Mark(666)).unwrap();
    p.b.set_option(l, SocketOption::NotSentLowat(32_000))
        .unwrap();
    let _c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).unwrap();
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).unwrap();
    let o = p.b.tcp_socket_options(s).unwrap();
    assert!(o.zerocopy);
    assert_eq!(o.mark, 666);
    assert_eq!(o.notsent_lowat_bytes, 32_000);
    assert_eq!(p.b.tcp_send_with(s, &[1; 100], ZC), Ok(100));
    p.advance(S);
    assert_eq!(notifications(&mut p.b, s), vec![zc(0, 0)]);
    // A listener has no SND.UNA for timestamp keys.
    let ts = TxTimestamping {
        opt_id: true,
        ..TxTimestamping::default()
    };
    assert_eq!(
        p.b.set_option(l, SocketOption::TxTimestamping(ts)),
        Err(SocketError::InvalidState)
    );
}

#[test]
fn notsent_mark_bounds_unsent_bytes_and_writability() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    assert_eq!(p.a.tcp_socket_options(c).unwrap().notsent_lowat_bytes, 0);
    p.a.set_option(c, SocketOption::NotSentLowat(4000)).unwrap();
    p.a.set_option(c, SocketOption::NoDelay(true)).unwrap();
    p.capture_a = true;
    // Nothing unsent: a send queues up to the mark.
    assert_eq!(p.a.tcp_send(c, &[0; 30_000]), Ok(4000));
    // 4000 unsent: not writable, and a send queues nothing.
    assert!(!p.a.tcp_readiness(c).unwrap().contains(Readiness::WRITABLE));
    assert_eq!(p.a.tcp_send(c, &[0; 10]), Err(SocketError::WouldBlock));
    p.exchange();
    // Sent (the initial window holds it): writable again.
    assert!(p.a.tcp_readiness(c).unwrap().contains(Readiness::WRITABLE));
    // Fill the congestion window until some bytes stay unsent.
    let mut unsent = 0;
    for _ in 0..10 {
        assert_eq!(p.a.tcp_send(c, &[0; 4000]), Ok(4000));
        p.exchange();
        unsent = p.a.tcp_unsent_bytes(c).unwrap();
        if unsent > 0 {
            break;
        }
    }
    assert!(unsent > 0 && unsent < 4000, "{unsent} unsent");
    // Writable while 2 × unsent < 4000; a send tops the unsent bytes up to the mark.
    assert_eq!(
        p.a.tcp_readiness(c).unwrap().contains(Readiness::WRITABLE),
        2 * unsent < 4000
    );
    assert_eq!(p.a.tcp_send(c, &[0; 10_000]), Ok(4000 - unsent));
    assert!(!p.a.tcp_readiness(c).unwrap().contains(Readiness::WRITABLE));
}

#[test]
fn the_stack_default_notsent_mark_applies_to_sockets_without_one() {
    let mut cfg = config_a();
    cfg.tcp_notsent_lowat_bytes = 2000;
    let mut p = Pair::with(cfg, config_b());
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    p.capture_a = true;
    assert_eq!(p.a.tcp_send(c, &[0; 30_000]), Ok(2000));
    // The socket's own mark wins.
    p.a.set_option(c, SocketOption::NotSentLowat(5000)).unwrap();
    assert_eq!(p.a.tcp_send(c, &[0; 30_000]), Ok(3000));
}

#[test]
fn transmit_timestamps_report_departure_and_acknowledgment_of_each_sends_last_byte() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    let ts = TxTimestamping {
        scheduled: true,
        sent: true,
        acked: true,
        opt_id: true,
        ts_only: false,
    };
    p.a.set_option(c, SocketOption::TxTimestamping(ts)).unwrap();
    p.a.set_option(c, SocketOption::NoDelay(true)).unwrap();
    p.capture_a = true;
    p.now = 10 * MS;
    assert_eq!(p.a.tcp_send(c, &[0; 2000]), Ok(2000));
    assert_eq!(p.a.tcp_send(c, &[0; 2000]), Ok(2000));
    p.exchange();
    p.now = 30 * MS;
    release_a(&mut p);
    p.advance(S);
    let got = notifications(&mut p.a, c);
    let t = |kind, key, at_ns| Notification::TxTimestamp { kind, key, at_ns };
    assert_eq!(
        got,
        vec![
            t(TxTimestampKind::Scheduled, 1999, 10 * MS),
            t(TxTimestampKind::Sent, 1999, 10 * MS),
            t(TxTimestampKind::Scheduled, 3999, 10 * MS),
            t(TxTimestampKind::Sent, 3999, 10 * MS),
            t(TxTimestampKind::Acked, 1999, 30 * MS),
            t(TxTimestampKind::Acked, 3999, 30 * MS),
        ]
    );
}

#[test]
fn the_error_queue_is_bounded_and_its_drops_counted() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    let ts = TxTimestamping {
        scheduled: true,
        sent: true,
        acked: true,
        opt_id: true,
        ts_only: true,
    };
    p.a.set_option(c, SocketOption::TxTimestamping(ts)).unwrap();
    for _ in 0..30 {
        assert_eq!(p.a.tcp_send(c, &[0; 10]), Ok(10));
        p.advance(S);
    }
    let max = stack::tcp_notify::ERRQUEUE_NOTIFICATIONS_MAX;
    assert_eq!(notifications(&mut p.a, c).len(), max);
    assert_eq!(p.a.counters().tcp_errqueue_dropped, 90 - max as u64);
}

#[test]
fn the_notsent_mark_counts_bytes_never_sent_not_those_a_timeout_resends() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    p.a.set_option(c, SocketOption::NotSentLowat(4000)).unwrap();
    p.a.set_option(c, SocketOption::NoDelay(true)).unwrap();
    // Every segment A sends from now on is lost.
    p.capture_a = true;
    assert_eq!(p.a.tcp_send(c, &[0; 4000]), Ok(4000));
    p.exchange();
    // The retransmission timer fires: SND.NXT goes back, the bytes were sent all the same.
    p.advance(2 * S);
    assert!(p.captured_a.len() > 3, "no retransmission");
    assert_eq!(p.a.tcp_unsent_bytes(c), Ok(0));
    assert!(p.a.tcp_readiness(c).unwrap().contains(Readiness::WRITABLE));
    assert_eq!(p.a.tcp_send(c, &[0; 10_000]), Ok(4000));
}

#[test]
fn options_and_pending_completions_move_with_the_connection() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    p.a.set_option(c, SocketOption::ZeroCopy(true)).unwrap();
    p.a.set_option(c, SocketOption::Mark(4242)).unwrap();
    p.capture_a = true;
    assert_eq!(p.a.tcp_send_with(c, &[1; 1000], ZC), Ok(1000));
    assert_eq!(p.a.tcp_send_with(c, &[2; 500], ZC), Ok(500));
    p.exchange();
    // Sent, not acknowledged, at the move: the completions are owed by the new owner.
    let (tuple, snapshot) = p.a.tcp_export(p.now, c).expect("export");
    assert!(!snapshot.socket_ext.is_empty());
    let c = p.a.tcp_import(p.now, tuple, &snapshot).expect("import");
    let o = p.a.tcp_socket_options(c).unwrap();
    assert!(o.zerocopy);
    assert_eq!(o.mark, 4242);
    p.advance(MS);
    release_a(&mut p);
    p.advance(S);
    assert_eq!(notifications(&mut p.a, c), vec![zc(0, 1)]);
    // IDs continue where they were.
    assert_eq!(p.a.tcp_send_with(c, &[3; 100], ZC), Ok(100));
    p.advance(S);
    assert_eq!(notifications(&mut p.a, c), vec![zc(2, 2)]);
}

#[test]
fn an_import_whose_socket_bytes_do_not_decode_is_refused() {
    let mut p = Pair::new();
    let (c, _, _) = establish(&mut p, v4(IP_B, 80));
    p.a.set_option(c, SocketOption::ZeroCopy(true)).unwrap();
    let (tuple, mut snapshot) = p.a.tcp_export(p.now, c).expect("export");
    snapshot.socket_ext.push(0xff);
    assert_eq!(
        p.a.tcp_import(p.now, tuple, &snapshot),
        Err(SocketError::InvalidState)
    );
    snapshot.socket_ext.pop();
    assert!(p.a.tcp_import(p.now, tuple, &snapshot).is_ok());
}
