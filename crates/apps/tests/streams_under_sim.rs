//! Echo, discard and ttcp under the deterministic simulator: byte counts exact, data intact,
//! back-pressure bounded, loss survived.

mod common;

use apps::discard::DiscardServer;
use apps::echo::{ECHO_BUFFER_BYTES, EchoServer};
use apps::ttcp::{TtcpReceiver, TtcpSendConfig, TtcpSender, pattern_byte};
use apps::{App, Conn, Ctx, Listener};
use common::{Pair, gigabit, server_addr};
use sim::{Dir, Loss};
use stack::{Readiness, SocketError, SocketEvent};

/// A test client of the echo server: sends `total` pattern bytes, reads nothing before
/// `read_from_ns` (so the server's buffers fill and it must stop reading), then reads the echo
/// back and checks it byte for byte; half-closes once everything was sent and is done when
/// the server's FIN arrives.
struct EchoClient {
    total: u64,
    read_from_ns: u64,
    conn: Option<Conn>,
    sent: u64,
    received: u64,
    mismatches: u64,
    shut: bool,
    /// Set at the first call at or after `read_from_ns`.
    reading: bool,
    finished: bool,
    failed: bool,
}

impl EchoClient {
    fn new(total: u64, read_from_ns: u64) -> Self {
        EchoClient {
            total,
            read_from_ns,
            conn: None,
            sent: 0,
            received: 0,
            mismatches: 0,
            shut: false,
            reading: false,
            finished: false,
            failed: false,
        }
    }

    fn work(&mut self, ctx: &mut Ctx<'_>) {
        let Some(conn) = self.conn else { return };
        let mut buf = [0u8; 8192];
        while self.sent < self.total {
            let n = (self.total - self.sent).min(buf.len() as u64) as usize;
            for (i, b) in buf.iter_mut().take(n).enumerate() {
                *b = pattern_byte(self.sent + i as u64);
            }
            match ctx.send(conn, &buf[..n]) {
                Ok(k) => self.sent += k as u64,
                Err(SocketError::WouldBlock) => break,
                Err(_) => {
                    self.failed = true;
                    return;
                }
            }
        }
        if self.sent == self.total && !self.shut {
            self.shut = ctx.shutdown(conn).is_ok();
        }
        if ctx.now_ns() < self.read_from_ns {
            return;
        }
        self.reading = true;
        loop {
            match ctx.recv(conn, &mut buf) {
                Ok(n) => {
                    for (i, &b) in buf[..n].iter().enumerate() {
                        if b != pattern_byte(self.received + i as u64) {
                            self.mismatches += 1;
                        }
                    }
                    self.received += n as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(SocketError::Finished) => {
                    self.finished = true;
                    let _ = ctx.close(conn);
                    self.conn = None;
                    return;
                }
                Err(_) => {
                    self.failed = true;
                    return;
                }
            }
        }
    }
}

impl App for EchoClient {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        match ctx.connect(server_addr(7)) {
            Ok(c) => self.conn = Some(c),
            Err(_) => self.failed = true,
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        if events
            .iter()
            .any(|e| e.readiness.contains(Readiness::ERROR))
        {
            self.failed = true;
        }
        // One connection: working it on every call (events or the read timer) is cheap.
        self.work(ctx);
    }

    fn poll_timeout(&self) -> Option<u64> {
        // Wake once, when reading starts.
        (!self.reading).then_some(self.read_from_ns)
    }

    fn done(&self) -> bool {
        self.finished || self.failed
    }
}

#[test]
fn echo_returns_every_byte_in_order() {
    let total = 300_000;
    let client = EchoClient::new(total, 0);
    let mut p = Pair::new(21, EchoServer::new(7), client, gigabit());
    p.run_until_client_done::<EchoClient>(10_000_000, 10_000_000_000)
        .expect("echo finishes");
    let c = p.client::<EchoClient>();
    assert!(!c.failed);
    assert_eq!((c.sent, c.received, c.mismatches), (total, total, 0));
    p.world.run_until(p.world.now_ns() + 1_000_000_000);
    let s = p.server::<EchoServer>().stats();
    assert_eq!(
        (
            s.connections_accepted,
            s.connections_closed,
            s.connections_failed
        ),
        (1, 1, 0)
    );
    assert_eq!((s.bytes_received, s.bytes_echoed), (total, total));
    assert_eq!(p.server::<EchoServer>().open_connections(), 0);
}

#[test]
fn echo_stops_reading_while_its_peer_does_not_read_and_loses_nothing() {
    // 4 MiB against 256 KiB socket buffers: while the client reads nothing (the first 300 ms)
    // the server's send buffer fills and it must stop reading, holding at most
    // ECHO_BUFFER_BYTES, until the client drains.
    let total = 4 << 20;
    let read_from_ns = 300_000_000;
    let client = EchoClient::new(total, read_from_ns);
    let mut p = Pair::new(22, EchoServer::new(7), client, gigabit());
    p.world.run_until(read_from_ns - 1);
    {
        let c = p.client::<EchoClient>();
        let s = p.server::<EchoServer>().stats();
        assert!(s.send_blocked > 0, "the server hit back-pressure: {s:?}");
        assert!(c.sent < total, "the client is held back by flow control");
        assert!(
            s.bytes_received - s.bytes_echoed <= ECHO_BUFFER_BYTES as u64,
            "bounded: {s:?}"
        );
    }
    p.run_until_client_done::<EchoClient>(10_000_000, 30_000_000_000)
        .expect("echo finishes once the client reads");
    let c = p.client::<EchoClient>();
    assert!(!c.failed);
    assert_eq!((c.sent, c.received, c.mismatches), (total, total, 0));
    let s = p.server::<EchoServer>().stats();
    assert_eq!((s.bytes_received, s.bytes_echoed), (total, total));
}

#[test]
fn discard_counts_every_byte_a_ttcp_sender_sent() {
    let cfg = TtcpSendConfig {
        remote: server_addr(9),
        bytes_per_conn: 1_234_567,
        conns: 3,
    };
    let mut p = Pair::new(23, DiscardServer::new(9), TtcpSender::new(cfg), gigabit());
    p.run_until_client_done::<TtcpSender>(10_000_000, 10_000_000_000)
        .expect("the sender finishes");
    let st = p.client::<TtcpSender>().stats().clone();
    assert_eq!(st.bytes, 3 * 1_234_567);
    assert_eq!(
        (st.conns_done, st.conns_failed, st.conns_acknowledged),
        (3, 0, 3)
    );
    p.world.run_until(p.world.now_ns() + 1_000_000_000);
    let d = p.server::<DiscardServer>();
    let s = d.stats();
    assert_eq!(s.bytes_received, 3 * 1_234_567);
    assert_eq!(
        (
            s.connections_accepted,
            s.connections_closed,
            s.connections_failed
        ),
        (3, 3, 0)
    );
    assert_eq!(d.open_connections(), 0);
}

#[test]
fn ttcp_moves_exact_bytes_over_two_connections_through_one_percent_loss() {
    let bytes_per_conn = 2_000_000;
    let cfg = TtcpSendConfig {
        remote: server_addr(5001),
        bytes_per_conn,
        conns: 2,
    };
    let receiver = TtcpReceiver::new(5001, 2).verify_pattern(true);
    let mut p = Pair::new(24, receiver, TtcpSender::new(cfg), gigabit());
    assert!(p.world.add_fault_both(p.link, Loss { p: 0.01 }));
    p.run_until_client_done::<TtcpSender>(10_000_000, 60_000_000_000)
        .expect("the sender finishes");
    let s = p.client::<TtcpSender>().stats().clone();
    assert_eq!(s.bytes, 2 * bytes_per_conn);
    assert_eq!((s.conns_opened, s.conns_done, s.conns_failed), (2, 2, 0));
    assert_eq!(s.conns_acknowledged, 2, "every byte acknowledged: {s:?}");
    let (first, last) = (
        s.first_byte_ns.expect("first"),
        s.last_byte_ns.expect("last"),
    );
    assert!(first < last);
    let mut t = p.world.now_ns();
    while !p.server::<TtcpReceiver>().done() && t < 120_000_000_000 {
        t += 10_000_000;
        p.world.run_until(t);
    }
    let r = p.server::<TtcpReceiver>();
    assert!(r.done(), "the receiver saw both connections end");
    let rs = r.stats();
    assert_eq!(rs.bytes, 2 * bytes_per_conn);
    assert_eq!((rs.conns_opened, rs.conns_done, rs.conns_failed), (2, 2, 0));
    assert_eq!(rs.pattern_errors, 0);
    assert!(rs.first_byte_ns.is_some() && rs.last_byte_ns >= rs.first_byte_ns);
    let lost: u64 = [Dir::AToB, Dir::BToA]
        .iter()
        .filter_map(|&d| p.world.link_counters(p.link, d))
        .map(|c| c.drop_loss)
        .sum();
    assert!(lost > 10, "the loss rule dropped frames: {lost}");
}

#[test]
fn ttcp_sender_to_a_closed_port_counts_failures_and_is_done() {
    let cfg = TtcpSendConfig {
        remote: server_addr(5002),
        bytes_per_conn: 1000,
        conns: 2,
    };
    let mut p = Pair::new(
        25,
        TtcpReceiver::new(5001, 2),
        TtcpSender::new(cfg),
        gigabit(),
    );
    p.run_until_client_done::<TtcpSender>(10_000_000, 10_000_000_000)
        .expect("refusals end the sender");
    let s = p.client::<TtcpSender>().stats();
    assert_eq!((s.conns_done, s.conns_failed, s.bytes), (0, 2, 0));
}

#[test]
fn ttcp_and_get_finish_intact_across_seeds_and_loss_rates() {
    use apps::get::HttpGet;
    use apps::http::{FileSet, HttpServer};
    use std::sync::Arc;

    let mut bad = Vec::new();
    for seed in 0..24u64 {
        let loss = [0.01, 0.03, 0.08][(seed % 3) as usize];
        let cfg = TtcpSendConfig {
            remote: server_addr(5001),
            bytes_per_conn: 300_000 + seed * 977,
            conns: 2,
        };
        let receiver = TtcpReceiver::new(5001, 2).verify_pattern(true);
        let mut p = Pair::new(seed, receiver, TtcpSender::new(cfg), gigabit());
        p.world.add_fault_both(p.link, Loss { p: loss });
        let sent = p.run_until_client_done::<TtcpSender>(10_000_000, 120_000_000_000);
        let mut t = p.world.now_ns();
        while !p.server::<TtcpReceiver>().done() && t < 240_000_000_000 {
            t += 10_000_000;
            p.world.run_until(t);
        }
        let s = p.client::<TtcpSender>().stats();
        let r = p.server::<TtcpReceiver>().stats();
        if sent.is_none()
            || (s.conns_done, s.conns_failed) != (2, 0)
            || (r.bytes, r.conns_done, r.pattern_errors) != (2 * cfg.bytes_per_conn, 2, 0)
        {
            bad.push(format!("ttcp seed {seed} loss {loss}: {s:?} {r:?}"));
        }

        let len = 200_000 + seed as usize * 313;
        let mut files = FileSet::new();
        files.insert("/f", vec![7u8; len]);
        let get = HttpGet::new(server_addr(80), "h".into(), "/f".into(), 1 << 24);
        let server = HttpServer::new(80, Arc::new(files));
        let mut p = Pair::new(seed, server, get, gigabit());
        p.world.add_fault_both(p.link, Loss { p: loss });
        p.run_until_client_done::<HttpGet>(10_000_000, 120_000_000_000);
        let out = p.client::<HttpGet>().outcome().cloned();
        let good = matches!(&out, Some(Ok(r)) if r.status == 200 && r.body.len() == len);
        p.world.run_until(p.world.now_ns() + 30_000_000_000);
        let open = p.server::<HttpServer>().open_connections();
        if !good || open != 0 {
            let status = out.map(|o| o.map(|r| r.status));
            bad.push(format!(
                "get seed {seed} loss {loss}: open={open} {status:?}"
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A sink that reads everything and never closes its side (not even after the peer's FIN).
#[derive(Default)]
struct NeverClosingSink {
    listener: Option<Listener>,
    conns: Vec<Conn>,
    bytes: u64,
    fins: u32,
}

impl App for NeverClosingSink {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.listener = ctx.listen(5003, 8).ok();
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, _events: &[SocketEvent]) {
        if let Some(l) = self.listener {
            while let Ok((c, _)) = ctx.accept(l) {
                self.conns.push(c);
            }
        }
        let mut buf = [0u8; 16384];
        for &c in &self.conns {
            loop {
                match ctx.recv(c, &mut buf) {
                    Ok(n) => self.bytes += n as u64,
                    Err(SocketError::Finished) => {
                        self.fins += 1;
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
    }
}

#[test]
fn ttcp_sender_finishes_on_its_fin_ack_when_the_peer_never_closes_and_polls_are_sparse() {
    let cfg = TtcpSendConfig {
        remote: server_addr(5003),
        bytes_per_conn: 500_000,
        conns: 2,
    };
    let mut p = Pair::new(
        26,
        NeverClosingSink::default(),
        TtcpSender::new(cfg),
        gigabit(),
    );
    p.run_until_client_done::<TtcpSender>(10_000_000, 10_000_000_000)
        .expect("done without the peer's FIN");
    let s = p.client::<TtcpSender>().stats();
    assert_eq!(
        (s.bytes, s.conns_done, s.conns_acknowledged),
        (1_000_000, 2, 2)
    );
    assert_eq!(p.server::<NeverClosingSink>().bytes, 1_000_000);
}
