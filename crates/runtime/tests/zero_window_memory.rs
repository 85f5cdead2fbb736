//! Memory held by zero-window peers is given back (issue 20's "Done when"): 1,000 clients each
//! ask a server for a large object and never read, pinning about 256 MiB of its send buffers;
//! once they close, the live heap (counted by a counting global allocator, a binary of its
//! own) is back within 10 % of where it started. The tables grown for the first thousand
//! (socket slots, the flow map) are kept, at most 1 KiB per connection slot: the second
//! thousand starts from them and must give back everything it took.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use platform::alloc_count::CountingAlloc;
use stack::{InterfaceConfig, Ipv4Cidr, RxMeta, SocketHandle, Stack, StackConfig};
use wire::EthernetAddress;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

const CLIENTS: usize = 1_000;
const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn config(last: u8, ip: Ipv4Addr) -> StackConfig {
    let mut cfg = StackConfig::new(InterfaceConfig::new(
        EthernetAddress([2, 0, 0, 0, 0, last]),
        Ipv4Cidr::new(ip, 24),
    ));
    cfg.limits.sockets_max = 4 * CLIENTS;
    cfg.limits.tcp_backlog_max = 2 * CLIENTS;
    cfg
}

struct Wire {
    a: Stack,
    b: Stack,
    now: u64,
}

impl Wire {
    fn exchange(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            while let Some(f) = self.a.poll_transmit(self.now) {
                moved = true;
                self.b.receive(self.now, &f, &RxMeta::NONE);
                self.a.recycle(f);
            }
            while let Some(f) = self.b.poll_transmit(self.now) {
                moved = true;
                self.a.receive(self.now, &f, &RxMeta::NONE);
                self.b.recycle(f);
            }
            while self.a.poll_event().is_some() {}
            while self.b.poll_event().is_some() {}
            if !moved {
                return;
            }
        }
        panic!("the exchange did not settle");
    }

    fn advance(&mut self, dt_ns: u64) {
        let end = self.now + dt_ns;
        loop {
            self.exchange();
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.now = end;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        self.exchange();
    }
}

/// Opens `n` client connections, has the server fill each one's send buffer with a large
/// object the client never reads, then has the clients close: returns the live heap bytes at
/// the peak, with every send buffer full.
fn flood(w: &mut Wire, listener: SocketHandle, n: usize) -> u64 {
    let server = SocketAddr::new(IpAddr::V4(IP_B), 80);
    let clients: Vec<SocketHandle> = (0..n)
        .map(|_| w.a.tcp_connect(w.now, server, 0).expect("connect"))
        .collect();
    // The first SYNs of a round wait for ARP (a few are queued, the rest retried after 1 s).
    w.advance(5 * S);
    let mut served = Vec::new();
    let object = vec![0x6bu8; 64 * 1024];
    while let Ok((h, _)) = w.b.tcp_accept(listener) {
        while w.b.tcp_send(h, &object).is_ok_and(|k| k > 0) {}
        served.push(h);
    }
    assert_eq!(served.len(), n, "every client accepted");
    w.advance(2 * S);
    let peak = live_bytes();
    for c in clients {
        // Unread data: the close resets (RFC 2525 §2.17), as a client that gave up would.
        w.a.close(w.now, c).expect("close");
    }
    w.advance(MS);
    for h in served {
        let _ = w.b.close(w.now, h);
    }
    // TIME-WAIT, retransmissions and every other timer run out.
    w.advance(600 * S);
    peak
}

#[test]
fn memory_pinned_by_1000_zero_window_clients_is_given_back_when_they_close() {
    let mut a_cfg = config(1, IP_A);
    // The clients advertise 2 KB and never read: zero window after the first 2 KB.
    a_cfg.tcp.recv_buffer_bytes = 2048;
    let mut w = Wire {
        a: Stack::new(a_cfg),
        b: Stack::new(config(2, IP_B)),
        now: 0,
    };
    let listener =
        w.b.tcp_listen(SocketAddr::new(IpAddr::V4(IP_B), 80), 2 * CLIENTS)
            .expect("listen");
    // A small round first: what every stack allocates once (timer wheel, first table sizes).
    flood(&mut w, listener, 50);
    let cold = live_bytes();
    let peak = flood(&mut w, listener, CLIENTS);
    let start = live_bytes();
    assert_eq!(w.a.tcp_connection_count() + w.b.tcp_connection_count(), 0);
    // What stays after the first thousand: the tables sized for them (socket slots, the flow
    // map; both stacks) and the transmit pools trimmed to their floor — not the buffers.
    let kept_per_conn = (start - cold) / (2 * CLIENTS as u64);
    // The same load again: every byte it pinned comes back.
    let peak2 = flood(&mut w, listener, CLIENTS);
    let end = live_bytes();
    eprintln!(
        "live heap: {cold} B before the first {CLIENTS} zero-window clients, {peak} B with them, \
         {start} B after they closed ({kept_per_conn} B per connection slot kept); \
         {peak2} B with the next {CLIENTS}, {end} B after they closed"
    );
    // The clients pin send buffers until the stack's memory budget stops them (pressure
    // shrinks them, the high mark refuses more): at least the pressure mark's worth.
    let pressure_bytes = stack::Limits::default().tcp_mem_pressure_bytes as u64;
    assert!(
        peak2 > start + pressure_bytes,
        "the send buffers were pinned: {start} -> {peak2}"
    );
    assert_eq!(w.a.tcp_connection_count() + w.b.tcp_connection_count(), 0);
    assert!(
        kept_per_conn <= 1024,
        "{kept_per_conn} B kept per connection slot"
    );
    assert!(
        end <= start + start / 10,
        "live heap {end} B after close, started at {start} B (peak {peak2} B)"
    );
}

/// The counting allocator's live heap (never negative here: every byte this test frees was
/// allocated after the counter started).
fn live_bytes() -> u64 {
    u64::try_from(ALLOC.live_bytes()).unwrap_or(0)
}
