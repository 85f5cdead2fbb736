//! The connection overload policy (`stack::overload`): one source holding the table idle
//! loses its connections or is refused, and another source still connects and exchanges
//! data; every reclaim and refusal is counted.
mod common;

use common::*;
use core::net::{IpAddr, Ipv4Addr};
use stack::{MemState, Readiness, RxMeta, SocketHandle, Stack, StackConfig};
use tcp::State;
use wire::{EthernetAddress, EthernetFrame};

const MAC_C: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0c]);
const IP_C: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
const TABLE: usize = 64;

/// Three hosts on one segment: the attacker A, the server B, the second client C.
struct Net {
    a: Stack,
    b: Stack,
    c: Stack,
    now: u64,
    /// B's application: accepted connections it holds (and reads), closing those that end.
    held: Vec<SocketHandle>,
    listener: SocketHandle,
}

impl Net {
    fn new(server: impl FnOnce(&mut StackConfig)) -> Net {
        Net::with(|_| {}, server)
    }

    /// As [`Net::new`], with the attacker's configuration changed too.
    fn with(attacker: impl FnOnce(&mut StackConfig), server: impl FnOnce(&mut StackConfig)) -> Net {
        let mut a = config_a();
        attacker(&mut a);
        a.limits.sockets_max = 4096;
        // Every SYN of the burst waits for the one ARP resolution.
        a.limits.neighbor_pending_packets_max = 4096;
        let mut b = config_b();
        b.limits.sockets_max = TABLE;
        b.limits.tcp_reclaim_unused_ns = S;
        server(&mut b);
        let c = config(MAC_C, IP_C, "2001:db8::3".parse().expect("v6"));
        let mut b = Stack::new(b);
        let listener = b.tcp_listen(v4(IP_B, 80), 128).expect("listen");
        Net {
            a: Stack::new(a),
            b,
            c: Stack::new(c),
            now: 0,
            held: Vec::new(),
            listener,
        }
    }

    fn mac_of(frame: &[u8]) -> EthernetAddress {
        EthernetFrame::new_checked(frame).expect("frame").dst_addr()
    }

    /// Moves frames until nobody sends, running B's application in between.
    fn exchange(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            for from in 0..3 {
                loop {
                    let now = self.now;
                    let f = match from {
                        0 => self.a.poll_transmit(now),
                        1 => self.b.poll_transmit(now),
                        _ => self.c.poll_transmit(now),
                    };
                    let Some(f) = f else { break };
                    moved = true;
                    let dst = Net::mac_of(&f);
                    for (to, mac) in [(0, MAC_A), (1, MAC_B), (2, MAC_C)] {
                        if to != from && (dst == mac || dst.is_broadcast()) {
                            match to {
                                0 => self.a.receive(now, &f, &RxMeta::NONE),
                                1 => self.b.receive(now, &f, &RxMeta::NONE),
                                _ => self.c.receive(now, &f, &RxMeta::NONE),
                            }
                        }
                    }
                }
            }
            self.serve();
            if !moved {
                return;
            }
        }
        panic!("exchange did not settle");
    }

    /// B's application: accepts everything, reads what arrives, closes what ended.
    fn serve(&mut self) {
        let mut ended = Vec::new();
        while let Some(ev) = self.b.poll_event() {
            if ev.readiness.contains(Readiness::CLOSED) || ev.readiness.contains(Readiness::ERROR) {
                ended.push(ev.handle);
            }
        }
        while let Ok((h, _)) = self.b.tcp_accept(self.listener) {
            self.held.push(h);
        }
        let mut buf = [0u8; 256];
        for &h in &self.held {
            while self.b.tcp_recv(h, &mut buf).is_ok_and(|n| n > 0) {}
        }
        for h in ended {
            if self.held.contains(&h) {
                self.b.close(self.now, h).expect("close");
                self.held.retain(|&x| x != h);
            }
        }
    }

    fn advance(&mut self, dt_ns: u64) {
        let end = self.now + dt_ns;
        loop {
            self.exchange();
            let next = [
                self.a.poll_timeout(),
                self.b.poll_timeout(),
                self.c.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                    self.c.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.now = end;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        self.c.handle_timeout(self.now);
        self.exchange();
    }

    /// `n` connections from A to B, opened at once.
    fn attack(&mut self, n: usize) -> Vec<SocketHandle> {
        let conns = (0..n)
            .map(|_| {
                self.a
                    .tcp_connect(self.now, v4(IP_B, 80), 0)
                    .expect("connect")
            })
            .collect();
        self.exchange();
        conns
    }

    /// C connects and exchanges a request and a response with B within `limit_ns`.
    fn second_source_is_served(&mut self, limit_ns: u64) {
        let c = self
            .c
            .tcp_connect(self.now, v4(IP_B, 80), 0)
            .expect("connect");
        let deadline = self.now + limit_ns;
        while self.c.tcp_state(c) != Some(State::Established) {
            assert!(
                self.now < deadline,
                "C never got in: {:?}",
                self.b.counters()
            );
            self.advance(100 * MS);
        }
        self.c.tcp_send(c, b"GET /").expect("send");
        self.advance(10 * MS);
        let &s = self
            .held
            .iter()
            .find(|&&h| {
                self.b
                    .peer_addr(h)
                    .is_ok_and(|p| p.ip() == IpAddr::V4(IP_C))
            })
            .expect("B accepted C");
        self.b.tcp_send(s, b"200 OK").expect("reply");
        self.advance(10 * MS);
        let mut buf = [0u8; 16];
        let n = self.c.tcp_recv(c, &mut buf).expect("response");
        assert_eq!(&buf[..n], b"200 OK");
    }
}

#[test]
fn one_source_over_its_share_is_refused_under_pressure_while_another_is_served_at_once() {
    // Defaults: a source gets a quarter of the table once it is 90 % full.
    let mut net = Net::new(|_| {});
    net.attack(2 * TABLE);
    let b = net.b.counters();
    assert!(b.tcp_source_limit > 0, "{b:?}");
    // A reached the high-water mark (57 of 64 sockets, the listener included) and no more.
    assert_eq!(net.b.tcp_source_connections(IpAddr::V4(IP_A)), 56);
    // C is served on its first SYN.
    net.second_source_is_served(50 * MS);
    assert_eq!(net.b.tcp_source_connections(IpAddr::V4(IP_C)), 1);
    assert_eq!(net.b.counters().tcp_conn_table_full, 0);
}

#[test]
fn a_table_held_by_idle_connections_is_reclaimed_unused_first_and_another_source_connects() {
    // Per-source shares off: only reclaiming keeps the table from being held.
    let mut net = Net::new(|b| b.limits.tcp_source_share_pct = 100);
    let conns = net.attack(TABLE - 1);
    assert_eq!(net.b.tcp_connection_count(), TABLE - 1);
    // Five of A's connections carry a byte: they are not "unused".
    for &h in &conns[..5] {
        net.a.tcp_send(h, b"x").expect("send");
    }
    net.advance(2 * S);
    // The burst's walk (at the 57th socket) found nothing idle yet.
    assert_eq!(net.b.counters().tcp_reclaim_scans, 1);
    assert_eq!(net.b.counters().tcp_reclaimed_unused, 0);
    // C's first SYN finds the table full; a walk resets nine unused connections (down to
    // 55 sockets, the high-water mark 57 less 64/32), B's application closes them, and C's
    // retransmitted SYN gets in.
    net.second_source_is_served(5 * S);
    let b = net.b.counters();
    assert!(b.tcp_conn_table_full >= 1, "{b:?}");
    assert_eq!(b.tcp_reclaim_scans, 2, "{b:?}");
    assert_eq!(b.tcp_reclaimed_unused, 9, "{b:?}");
    assert_eq!(b.tcp_reclaimed_idle, 0, "{b:?}");
    assert_eq!(net.a.counters().tcp_connections_closed, 9);
    // The oldest-idle unused ones went; the ones that carried data are still up.
    for &h in &conns[..5] {
        assert_eq!(net.a.tcp_state(h), Some(State::Established));
    }
}

/// B closes `n` of A's connections first, so B holds them in TIME-WAIT (60 s).
fn b_closes_first(net: &mut Net, n: usize) {
    let first = net.attack(n);
    for &h in &net.held.clone() {
        net.b.close(net.now, h).expect("close");
    }
    net.held.clear();
    net.advance(10 * MS);
    for &h in &first {
        net.a.close(net.now, h).expect("close");
    }
    net.advance(10 * MS);
}

#[test]
fn time_wait_records_hold_no_slot_so_live_connections_take_the_table_beside_them() {
    let mut net = Net::new(|b| b.limits.tcp_source_share_pct = 100);
    b_closes_first(&mut net, 20);
    assert_eq!(net.b.tcp_time_wait_count(), 20, "B's TIME-WAITs");
    assert_eq!(net.b.tcp_connection_count(), 20);
    assert_eq!(net.b.counters().tcp_time_wait_records, 20);
    // Up to the high-water mark with live connections (56 and the listener): no slot is
    // held by TIME-WAIT, so nothing is reclaimed or refused, and the records stay.
    net.attack(TABLE * 9 / 10 - 1);
    let b = net.b.counters();
    assert_eq!(net.b.tcp_time_wait_count(), 20, "{b:?}");
    assert_eq!(net.b.tcp_connection_count(), 20 + TABLE * 9 / 10 - 1);
    assert_eq!(
        (
            b.tcp_reclaim_scans,
            b.tcp_reclaimed_time_wait,
            b.tcp_conn_table_full
        ),
        (0, 0, 0),
        "{b:?}"
    );
    assert_eq!(
        net.a.counters().tcp_connections_closed,
        20,
        "no RST for A's live ones"
    );
}

#[test]
fn the_time_wait_table_is_bounded_and_evicts_its_oldest_records() {
    let mut net = Net::new(|b| {
        b.limits.tcp_source_share_pct = 100;
        b.limits.tcp_time_wait_max = 5;
    });
    b_closes_first(&mut net, 8);
    let b = net.b.counters();
    assert_eq!(net.b.tcp_time_wait_count(), 5, "{b:?}");
    assert_eq!(
        (b.tcp_time_wait_records, b.tcp_time_wait_evicted),
        (8, 3),
        "{b:?}"
    );
    // The evicted ones are closed; the rest expire after 2·MSL (60 s), counted.
    net.advance(61 * S);
    let b = net.b.counters();
    assert_eq!(net.b.tcp_time_wait_count(), 0, "{b:?}");
    assert_eq!(b.tcp_time_wait_expired, 5, "{b:?}");
    assert_eq!(b.tcp_connections_closed, 8, "{b:?}");
    assert_eq!(net.b.tcp_time_wait_heap_bytes(), 0, "the memory went back");
}

#[test]
fn a_flood_over_its_share_gives_up_its_unused_connections_so_a_second_source_cannot_fill_the_table()
{
    // Unused connections in general are reclaimable only after 10 s here: what frees the
    // table within seconds is the flood being over its share.
    let mut net = Net::new(|b| b.limits.tcp_reclaim_unused_ns = 10 * S);
    net.attack(2 * TABLE);
    assert_eq!(net.b.tcp_source_connections(IpAddr::V4(IP_A)), 56);
    net.advance(2 * S);
    // C opens ten connections, within its share (16): the first above the mark walks the
    // table and resets the flood's oldest unused ones, so the headroom above the mark (7
    // sockets) never runs out and C never meets a full table.
    let cs: Vec<SocketHandle> = (0..10)
        .map(|_| {
            net.c
                .tcp_connect(net.now, v4(IP_B, 80), 0)
                .expect("connect")
        })
        .collect();
    // (C queues 4 SYNs behind its ARP resolution; the rest go at their retransmission.)
    net.advance(1500 * MS);
    for &h in &cs {
        assert_eq!(net.c.tcp_state(h), Some(State::Established));
    }
    let b = net.b.counters();
    assert_eq!(b.tcp_conn_table_full, 0, "{b:?}");
    assert!(b.tcp_reclaimed_over_share >= 3, "{b:?}");
    assert_eq!(b.tcp_reclaimed_unused, 0, "{b:?}");
    assert!(net.b.tcp_source_connections(IpAddr::V4(IP_A)) < 56);
    assert_eq!(net.b.tcp_source_connections(IpAddr::V4(IP_C)), 10);
}

#[test]
fn peers_stalled_at_zero_window_are_reset_when_memory_is_high_so_a_new_client_gets_in() {
    // A never reads and announces a 2 KiB window; B's budget is 512 KiB (pressure = high),
    // two of A's connections' send buffers (256 KiB each). B writes 64 KiB to each in turn
    // until they are all full or refused: the sum reaches the mark mid-way through the
    // second round.
    let mut net = Net::with(
        |a| a.tcp.recv_buffer_bytes = 2048,
        |b| {
            b.limits.tcp_mem_low_bytes = 256 << 10;
            b.limits.tcp_mem_pressure_bytes = 512 << 10;
            b.limits.tcp_mem_high_bytes = 512 << 10;
        },
    );
    net.attack(6);
    let chunk = vec![0x5au8; 64 << 10];
    for _ in 0..4 {
        for &h in &net.held.clone() {
            let _ = net.b.tcp_send(h, &chunk);
        }
    }
    net.advance(4 * S);
    assert_eq!(
        net.b.tcp_mem_state(),
        MemState::High,
        "{:?}",
        net.b.counters()
    );
    // C's first SYN is refused (memory high) and starts a walk that resets the stalled
    // connection that stalled first (one is enough to fall below the pressure mark); C's
    // retransmitted SYN gets in.
    net.second_source_is_served(3 * S);
    let b = net.b.counters();
    assert!(b.tcp_mem_refused_conn >= 1, "{b:?}");
    assert_eq!(b.tcp_reclaimed_stalled, 1, "{b:?}");
    assert_eq!(net.a.counters().tcp_connections_closed, 1);
    assert!(net.b.tcp_mem_bytes() < 512 << 10);
}
