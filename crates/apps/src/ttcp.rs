//! Bulk transfer in the manner of NTttcp (seed 000, table 1): a sender opens `conns`
//! connections from the shard it runs on and pushes `bytes_per_conn` bytes of a deterministic
//! pattern down each; a receiver listens on every shard, reads and counts. Both keep the times
//! of the first and last payload byte so a driver can report throughput; the driver adds the
//! packet, wake-up and cycle figures it owns.
//!
//! The payload at stream offset `i` is [`pattern_byte`]`(i)`, a 251-byte period (a prime, so it
//! never lines up with segment sizes); a receiver built with
//! [`TtcpReceiver::verify_pattern`] checks every byte against it.
//!
//! Sender connection life: connect → send until `bytes_per_conn` bytes were accepted by the
//! stack → shutdown (FIN) → finished as soon as either the peer's FIN has been read or our FIN
//! is acknowledged (the engine is in FIN-WAIT-2, TIME-WAIT or CLOSED, which implies every byte
//! before it was acknowledged) → handle released. A refused, reset or timed-out connection, or
//! a failed call, counts as failed.
//!
//! Bounds: the sender holds no payload copies (it sends slices of one static-size pattern
//! block); both sides read through one scratch buffer per shard of [`TTCP_READ_BYTES`].

use core::net::SocketAddr;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use stack::{Readiness, SocketError, SocketEvent, SocketHandle};
use tcp::State;

use crate::discard::drain;
use crate::serve::{Handler, Step, StreamServer};
use app::{App, Conn, Ctx};

/// Period of the payload pattern, in bytes.
pub const PATTERN_PERIOD_BYTES: u64 = 251;
/// Largest slice handed to one `send` call, in bytes.
pub const TTCP_WRITE_BYTES: usize = 64 * 1024;
/// How often a sender looks for the acknowledgement of its FINs while one is outstanding.
pub const FIN_ACK_CHECK_NS: u64 = 1_000_000;
/// Size of each shard's read buffer, in bytes.
pub const TTCP_READ_BYTES: usize = 256 * 1024;

/// The payload byte at stream offset `offset`.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset % PATTERN_PERIOD_BYTES) as u8
}

/// `TTCP_WRITE_BYTES + PATTERN_PERIOD_BYTES` pattern bytes: any offset's next
/// `TTCP_WRITE_BYTES` bytes are the slice starting at `offset % PATTERN_PERIOD_BYTES`.
fn pattern_block() -> Box<[u8]> {
    (0..TTCP_WRITE_BYTES as u64 + PATTERN_PERIOD_BYTES)
        .map(pattern_byte)
        .collect()
}

/// The pattern bytes from stream offset `offset`, at most `len` (≤ `TTCP_WRITE_BYTES`).
fn pattern_at(block: &[u8], offset: u64, len: usize) -> &[u8] {
    let start = (offset % PATTERN_PERIOD_BYTES) as usize;
    block
        .get(start..start + len.min(TTCP_WRITE_BYTES))
        .unwrap_or(&[])
}

/// What a sender or a receiver did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TtcpStats {
    /// Sender: payload bytes accepted by the stack's send buffers (see `conns_acknowledged`
    /// for whether they all arrived). Receiver: payload bytes read.
    pub bytes: u64,
    /// Connections opened (sender) or accepted (receiver).
    pub conns_opened: u32,
    /// Connections that finished cleanly (see the module docs for when).
    pub conns_done: u32,
    /// Connections refused, reset, timed out, or ended by a failed call.
    pub conns_failed: u32,
    /// Sender only: finished connections whose FIN — hence every byte — was acknowledged.
    /// Equal to `conns_done` when every byte accepted by `send` reached the peer's stack.
    pub conns_acknowledged: u32,
    /// When the first payload byte was accepted by `send` (sender) or read (receiver), ns.
    pub first_byte_ns: Option<u64>,
    /// Sender: when the last connection ended (finished or failed). Receiver: when the last
    /// payload byte was read. In ns.
    pub last_byte_ns: Option<u64>,
    /// Receiver with pattern checking: bytes that differed from [`pattern_byte`].
    pub pattern_errors: u64,
    /// Receiver: 1 when this shard's listener could not open.
    pub listen_failed: u32,
}

impl TtcpStats {
    fn saw_bytes(&mut self, now_ns: u64, n: usize) {
        if n == 0 {
            return;
        }
        self.bytes += n as u64;
        self.first_byte_ns.get_or_insert(now_ns);
    }
}

/// What a sender does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtcpSendConfig {
    /// The receiver.
    pub remote: SocketAddr,
    /// Payload bytes sent on each connection.
    pub bytes_per_conn: u64,
    /// Connections opened (all at start, from this shard).
    pub conns: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendPhase {
    Connecting,
    Sending,
    /// Our FIN is queued: waiting for its ACK or the peer's FIN.
    Shut,
}

#[derive(Debug)]
struct SendConn {
    conn: Conn,
    phase: SendPhase,
    /// Bytes accepted by `send`. Invariant: ≤ `bytes_per_conn`.
    sent: u64,
    peer_finished: bool,
}

/// The sending side of one shard: run it on one shard (e.g. `Some` on shard 0, `None`
/// elsewhere, see [`App`] for `Option`).
#[derive(Debug)]
pub struct TtcpSender {
    cfg: TtcpSendConfig,
    conns: BTreeMap<SocketHandle, SendConn>,
    block: Box<[u8]>,
    scratch: Box<[u8]>,
    stats: TtcpStats,
    started: bool,
    /// When to look again for acknowledged FINs (while a connection waits for one).
    next_check_ns: Option<u64>,
}

/// How one round of work left a sender connection.
enum SendStep {
    Open,
    Finished { acknowledged: bool },
    Failed,
}

impl TtcpSender {
    /// A sender for `cfg`.
    pub fn new(cfg: TtcpSendConfig) -> Self {
        TtcpSender {
            cfg,
            conns: BTreeMap::new(),
            block: pattern_block(),
            scratch: vec![0; 16 * 1024].into_boxed_slice(),
            stats: TtcpStats::default(),
            started: false,
            next_check_ns: None,
        }
    }

    /// What the sender did so far.
    pub fn stats(&self) -> &TtcpStats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &TtcpSendConfig {
        &self.cfg
    }

    /// Sends, reads and checks for the end of one connection.
    fn service(&mut self, ctx: &mut Ctx<'_>, h: SocketHandle) -> SendStep {
        let Some(c) = self.conns.get_mut(&h) else {
            return SendStep::Open;
        };
        if c.phase == SendPhase::Sending {
            while c.sent < self.cfg.bytes_per_conn {
                let want = (self.cfg.bytes_per_conn - c.sent).min(TTCP_WRITE_BYTES as u64);
                let data = pattern_at(&self.block, c.sent, want as usize);
                match ctx.send(c.conn, data) {
                    Ok(n) => {
                        c.sent += n as u64;
                        self.stats.saw_bytes(ctx.now_ns(), n);
                    }
                    Err(SocketError::WouldBlock) => break,
                    Err(_) => return SendStep::Failed,
                }
            }
            if c.sent == self.cfg.bytes_per_conn {
                if ctx.shutdown(c.conn).is_err() {
                    return SendStep::Failed;
                }
                c.phase = SendPhase::Shut;
            }
        }
        // Whatever the peer sends is read and dropped, so a close never finds unread data.
        while !c.peer_finished {
            match ctx.recv(c.conn, &mut self.scratch) {
                Ok(_) => {}
                Err(SocketError::WouldBlock) => break,
                Err(SocketError::Finished) => c.peer_finished = true,
                Err(_) => return SendStep::Failed,
            }
        }
        if c.phase != SendPhase::Shut {
            return SendStep::Open;
        }
        let acknowledged = matches!(
            ctx.stack().tcp_state(c.conn.handle()),
            Some(State::FinWait2 | State::TimeWait | State::Closed)
        );
        if acknowledged || c.peer_finished {
            SendStep::Finished { acknowledged }
        } else {
            SendStep::Open
        }
    }

    /// Ends connection `h` as `step` says.
    fn settle(&mut self, ctx: &mut Ctx<'_>, h: SocketHandle, step: SendStep) {
        let failed = match step {
            SendStep::Open => return,
            SendStep::Failed => true,
            SendStep::Finished { acknowledged } => {
                self.stats.conns_done += 1;
                if acknowledged {
                    self.stats.conns_acknowledged += 1;
                }
                false
            }
        };
        if let Some(c) = self.conns.remove(&h) {
            if failed {
                self.stats.conns_failed += 1;
            }
            let _ = ctx.close(c.conn);
        }
        self.stats.last_byte_ns = Some(ctx.now_ns());
    }
}

impl App for TtcpSender {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.started = true;
        for _ in 0..self.cfg.conns {
            match ctx.connect(self.cfg.remote) {
                Ok(conn) => {
                    self.stats.conns_opened += 1;
                    self.conns.insert(
                        conn.handle(),
                        SendConn {
                            conn,
                            phase: SendPhase::Connecting,
                            sent: 0,
                            peer_finished: false,
                        },
                    );
                }
                Err(_) => self.stats.conns_failed += 1,
            }
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        for e in events {
            let Some(c) = self.conns.get_mut(&e.handle) else {
                continue;
            };
            if e.readiness.contains(Readiness::ERROR) {
                self.settle(ctx, e.handle, SendStep::Failed);
                continue;
            }
            if e.readiness.contains(Readiness::CONNECTED) && c.phase == SendPhase::Connecting {
                c.phase = SendPhase::Sending;
            }
            let mut step = self.service(ctx, e.handle);
            if matches!(step, SendStep::Open) && e.readiness.contains(Readiness::CLOSED) {
                step = SendStep::Failed;
            }
            self.settle(ctx, e.handle, step);
        }
        // A FIN's ACK raises no event: look at the connections waiting for one now, and again
        // after FIN_ACK_CHECK_NS while any still waits (a driver may only call `poll` on
        // events and deadlines).
        self.next_check_ns = None;
        if !self.conns.values().any(|c| c.phase == SendPhase::Shut) {
            return;
        }
        let shut: Vec<SocketHandle> = self
            .conns
            .iter()
            .filter(|(_, c)| c.phase == SendPhase::Shut)
            .map(|(h, _)| *h)
            .collect();
        for h in shut {
            let step = self.service(ctx, h);
            self.settle(ctx, h, step);
        }
        if self.conns.values().any(|c| c.phase == SendPhase::Shut) {
            self.next_check_ns = Some(ctx.now_ns().saturating_add(FIN_ACK_CHECK_NS));
        }
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.next_check_ns
    }

    fn progress(&self) -> u64 {
        self.stats.bytes
    }

    fn done(&self) -> bool {
        self.started && self.conns.is_empty()
    }
}

/// Per-connection receiver state: the stream offset of the next byte.
#[derive(Debug)]
pub(crate) struct RecvConn {
    offset: u64,
}

#[derive(Debug)]
struct RecvHandler {
    stats: TtcpStats,
    scratch: Box<[u8]>,
    block: Box<[u8]>,
    verify: bool,
    /// Connections ended on every shard, when shards share the count.
    host_ended: Option<Arc<AtomicU32>>,
}

impl Handler for RecvHandler {
    type Session = RecvConn;

    fn open(&mut self, _ctx: &mut Ctx<'_>, _conn: Conn, _peer: SocketAddr) -> RecvConn {
        self.stats.conns_opened += 1;
        RecvConn { offset: 0 }
    }

    fn service(&mut self, s: &mut RecvConn, ctx: &mut Ctx<'_>, conn: Conn) -> Step {
        let now_ns = ctx.now_ns();
        let (stats, block, verify) = (&mut self.stats, &self.block, self.verify);
        let offset_before = s.offset;
        let step = drain(ctx, conn, &mut self.scratch, |d| {
            stats.saw_bytes(now_ns, d.len());
            if verify {
                let mut off = 0usize;
                for part in d.chunks(TTCP_WRITE_BYTES) {
                    let want = pattern_at(block, s.offset + off as u64, part.len());
                    if part != want {
                        let bad = part.iter().zip(want).filter(|(a, b)| a != b).count();
                        stats.pattern_errors += bad as u64;
                    }
                    off += part.len();
                }
            }
            s.offset += d.len() as u64;
        });
        if s.offset > offset_before {
            self.stats.last_byte_ns = self.stats.last_byte_ns.max(Some(now_ns));
        }
        step
    }

    fn ended(&mut self, _s: RecvConn, step: Step) {
        match step {
            Step::Done => self.stats.conns_done += 1,
            _ => self.stats.conns_failed += 1,
        }
        if let Some(n) = &self.host_ended {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The receiving side of one shard: listens on every shard, reads, counts.
#[derive(Debug)]
pub struct TtcpReceiver {
    server: StreamServer<RecvConn>,
    handler: RecvHandler,
    conns: u32,
}

impl TtcpReceiver {
    /// A receiver on `port` that is done after `conns` connections ended (cleanly or not).
    pub fn new(port: u16, conns: u32) -> Self {
        TtcpReceiver {
            server: StreamServer::new(port),
            handler: RecvHandler {
                stats: TtcpStats::default(),
                scratch: vec![0; TTCP_READ_BYTES].into_boxed_slice(),
                block: pattern_block(),
                verify: false,
                host_ended: None,
            },
            conns,
        }
    }

    /// Checks every byte against [`pattern_byte`] (counted in `pattern_errors`); for a peer
    /// that is a [`TtcpSender`].
    pub fn verify_pattern(mut self, on: bool) -> Self {
        self.handler.verify = on;
        self
    }

    /// Makes [`App::done`] count the connections ended on every shard that shares `ended`
    /// (one counter per host, cloned into each shard's receiver). Without it each shard counts
    /// its own, and a shard RSS gave fewer than `conns` connections is never done. The counter
    /// is touched once per connection end, never on the data path.
    pub fn count_host_wide(mut self, ended: Arc<AtomicU32>) -> Self {
        self.handler.host_ended = Some(ended);
        self
    }

    /// What this shard's receiver did so far.
    pub fn stats(&self) -> &TtcpStats {
        &self.handler.stats
    }
}

impl App for TtcpReceiver {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.server.start(ctx).is_err() {
            self.handler.stats.listen_failed = 1;
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, events: &[SocketEvent]) {
        self.server.poll(ctx, events, &mut self.handler);
    }

    fn progress(&self) -> u64 {
        self.handler.stats.bytes
    }

    fn done(&self) -> bool {
        let ended = match &self.handler.host_ended {
            Some(n) => n.load(Ordering::Relaxed),
            None => self.handler.stats.conns_done + self.handler.stats.conns_failed,
        };
        ended >= self.conns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_slices_match_pattern_bytes_at_any_offset() {
        let block = pattern_block();
        for off in [0u64, 1, 250, 251, 252, 1_000_003] {
            let s = pattern_at(&block, off, TTCP_WRITE_BYTES);
            assert_eq!(s.len(), TTCP_WRITE_BYTES);
            assert!(
                s.iter()
                    .enumerate()
                    .all(|(i, &b)| b == pattern_byte(off + i as u64))
            );
        }
        assert_eq!(pattern_at(&block, 7, 10).len(), 10);
    }
}
