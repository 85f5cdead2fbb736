//! Cost per packet as connections grow (issue 17 item 1): 64-byte request/response exchanges
//! spread round-robin over N established connections between two [`Stack`]s over the
//! perfect in-memory link of [`crate::bulk`].
//!
//! Setup is [`IdleWorld`]'s (N connections opened in batches, explicit client ports). Then
//! one warm-up sweep touches every connection once (so every ring has its storage and every
//! table entry has been read once: the measured part is steady state), and
//! [`scale_loop`] — the function callgrind's `--toggle-collect` selects — runs the measured
//! exchanges. One exchange, on connection `k` (k = 0, 1, … N−1, 0, …):
//!
//! 1. the client application writes `payload_bytes` on its socket `k`;
//! 2. frames move client → server; the server application takes its readiness events and,
//!    for each readable socket, reads the request and writes a `payload_bytes` response;
//! 3. frames move server → client; the client application reads the response;
//! 4. the virtual clock advances `step_ns`; when it passes the earliest deadline of either
//!    stack, both run their timers and what they send is moved.
//!
//! With delayed ACKs the steady state is two frames per exchange (request carrying the ACK
//! of the previous response, response carrying the ACK of the request); when N × `step_ns`
//! exceeds the delayed-ACK time (40 ms), the client's delayed ACKs fire and add a third.
//! Costs are reported per frame moved (both directions), so the frame mix is in the figure.

use stack::{Readiness, RxLookahead, RxMeta, SocketError, SocketHandle, Stack};

use crate::bulk::BulkError;
use crate::idle::IdleWorld;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleOptions {
    /// Connections the exchanges are spread over.
    pub connections: usize,
    /// Request and response size.
    pub payload_bytes: usize,
    /// Virtual time between two exchanges (the offered load: 100 ns = 10 M exchanges/s).
    pub step_ns: u64,
    /// Exchanges in flight together (1: one at a time). With `burst` = B > 1 the client
    /// writes requests on B consecutive connections, the server receives their frames as one
    /// burst (as a NIC poll hands a loaded server a batch), answers all, and the client
    /// receives the responses as one burst.
    pub burst: usize,
    /// With `burst` > 1: each receiving stack walks a [`stack::RxLookahead`] over the burst
    /// (prefetching the next frames' connection state); false processes the same bursts
    /// without it, for a side-by-side figure.
    pub lookahead: bool,
    /// Both stacks ask for a connection's state all at once when a segment or an
    /// application call first reaches it (`Stack::set_tcp_prefetch`, on by default);
    /// false (`scale_conns --no-prefetch`) is the side-by-side reference.
    pub prefetch: bool,
    /// Both stacks negotiate ECN (`scale_conns --ecn`): every segment then takes the full
    /// input path instead of header prediction's (`scripts/bench-hot-bytes.sh`).
    pub ecn: bool,
}

impl ScaleOptions {
    /// `connections` connections, 64-byte messages, 100 ns between exchanges.
    pub fn new(connections: usize) -> ScaleOptions {
        ScaleOptions {
            connections,
            payload_bytes: 64,
            step_ns: 100,
            burst: 1,
            lookahead: true,
            prefetch: true,
            ecn: false,
        }
    }
}

/// What one run of [`scale_loop`] moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScaleCounts {
    /// Exchanges completed (the response read whole by the client).
    pub exchanges: u64,
    /// Frames moved, both directions.
    pub frames: u64,
    /// Times the clock passed a deadline and both stacks ran their timers.
    pub timer_runs: u64,
}

/// The two stacks with N established connections, the message buffers and where the next
/// exchange goes.
#[derive(Debug)]
pub struct ScaleWorld {
    pub idle: IdleWorld,
    pub opts: ScaleOptions,
    /// The next connection (index into the client's sockets).
    next: usize,
    message: Vec<u8>,
    buf: Vec<u8>,
    /// The earliest deadline of either stack (refreshed after every exchange).
    deadline_ns: u64,
}

impl ScaleWorld {
    /// The two stacks sized for `opts.connections`, the server listening, no connection yet
    /// (the baseline the memory figures subtract).
    pub fn new(opts: ScaleOptions) -> Result<ScaleWorld, BulkError> {
        Ok(ScaleWorld {
            idle: IdleWorld::with_ecn(
                opts.connections,
                if opts.ecn {
                    tcp::EcnMode::On
                } else {
                    tcp::EcnMode::Off
                },
            )?,
            opts,
            next: 0,
            message: vec![b'x'; opts.payload_bytes],
            buf: vec![0; 64 * 1024],
            deadline_ns: 0,
        })
    }

    /// Opens `opts.connections` connections and lets them go idle (2 s of virtual time, so
    /// every handshake timer has fired).
    pub fn connect(&mut self) -> Result<(), BulkError> {
        let n = self.opts.connections;
        if self.idle.connect_all(n, 2_000_000_000)? != n {
            return Err(BulkError::NotConnected);
        }
        Ok(())
    }

    /// One exchange on every connection (not measured): afterwards every connection has
    /// carried data, as in steady state.
    pub fn warm_up(&mut self) -> Result<ScaleCounts, BulkError> {
        let n = self.opts.connections as u64;
        run_exchanges(self, n)
    }

    /// Lets `dt_ns` of the clock pass with nothing to send, in steps of `step_ns`, both
    /// stacks' timers running at each step and their frames (delayed ACKs, keepalives)
    /// delivered: what an idle period does to the connections (their rings go back after
    /// `stack::tcp_idle::IDLE_RELEASE_NS`).
    pub fn idle_for(&mut self, dt_ns: u64, step_ns: u64) {
        let w = &mut self.idle;
        let end = w.now.saturating_add(dt_ns);
        while w.now < end {
            w.now = w.now.saturating_add(step_ns.max(1)).min(end);
            w.client.handle_timeout(w.now);
            w.server.handle_timeout(w.now);
            move_frames(&mut w.client, &mut w.server, w.now);
            while w.client.poll_event().is_some() {}
            while w.server.poll_event().is_some() {}
        }
        self.deadline_ns = earliest(&w.client, &w.server);
    }

    /// Every connection closed by the client first (so the client holds them in TIME-WAIT),
    /// the server closing when it sees the FIN. Returns the client's connections left (in
    /// TIME-WAIT) and the server's.
    pub fn close_all(&mut self) -> Result<(usize, usize), BulkError> {
        let w = &mut self.idle;
        for (k, &h) in w.client_socks.iter().enumerate() {
            w.client
                .close(w.now, h)
                .map_err(|e| BulkError::Socket("close", e))?;
            if k % 128 == 127 {
                move_frames(&mut w.client, &mut w.server, w.now);
                close_readable(&mut w.server, w.now, &mut self.buf)?;
                move_frames(&mut w.client, &mut w.server, w.now);
            }
        }
        for _ in 0..4 {
            move_frames(&mut w.client, &mut w.server, w.now);
            close_readable(&mut w.server, w.now, &mut self.buf)?;
        }
        move_frames(&mut w.client, &mut w.server, w.now);
        while w.client.poll_event().is_some() {}
        w.client_socks.clear();
        w.server_socks.clear();
        Ok((
            w.client.tcp_connection_count(),
            w.server.tcp_connection_count(),
        ))
    }
}

/// The server closes every socket whose peer closed.
fn close_readable(server: &mut Stack, now: u64, buf: &mut [u8]) -> Result<(), BulkError> {
    while let Some(e) = server.poll_event() {
        if e.readiness.contains(Readiness::PEER_CLOSED) {
            while server.tcp_recv(e.handle, buf).is_ok() {}
            server
                .close(now, e.handle)
                .map_err(|e| BulkError::Socket("server close", e))?;
        }
    }
    Ok(())
}

/// Moves frames both ways until neither stack sends; returns how many moved.
fn move_frames(client: &mut Stack, server: &mut Stack, now: u64) -> u64 {
    let mut moved = 0;
    loop {
        let before = moved;
        while let Some(f) = client.poll_transmit(now) {
            moved += 1;
            server.receive(now, &f, &RxMeta::NONE);
            client.recycle(f);
        }
        while let Some(f) = server.poll_transmit(now) {
            moved += 1;
            client.receive(now, &f, &RxMeta::NONE);
            server.recycle(f);
        }
        if moved == before {
            return moved;
        }
    }
}

fn earliest(a: &Stack, b: &Stack) -> u64 {
    match (a.poll_timeout(), b.poll_timeout()) {
        (Some(x), Some(y)) => x.min(y),
        (Some(t), None) | (None, Some(t)) => t,
        (None, None) => u64::MAX,
    }
}

/// The measured part: `exchanges` request/response exchanges, round-robin over the
/// connections (see the module docs). Never inlined: callgrind selects exactly this function
/// with `--toggle-collect=*scale_loop*` (the warm-up runs the same exchanges outside it).
#[inline(never)]
pub fn scale_loop(w: &mut ScaleWorld, exchanges: u64) -> Result<ScaleCounts, BulkError> {
    run_exchanges(w, exchanges)
}

fn run_exchanges(w: &mut ScaleWorld, exchanges: u64) -> Result<ScaleCounts, BulkError> {
    w.idle.client.set_tcp_prefetch(w.opts.prefetch);
    w.idle.server.set_tcp_prefetch(w.opts.prefetch);
    if w.opts.burst > 1 {
        return run_bursts(w, exchanges);
    }
    let mut c = ScaleCounts::default();
    let n = w.opts.connections;
    let msg_len = w.message.len();
    let ScaleWorld {
        idle,
        next,
        message,
        buf,
        deadline_ns,
        opts,
    } = w;
    let IdleWorld {
        client,
        server,
        now,
        client_socks,
        ..
    } = idle;
    *deadline_ns = earliest(client, server);
    for _ in 0..exchanges {
        let Some(&h) = client_socks.get(*next) else {
            return Err(BulkError::NotConnected);
        };
        *next = (*next + 1) % n;
        send_request(client, h, message)?;
        while let Some(f) = client.poll_transmit(*now) {
            c.frames += 1;
            server.receive(*now, &f, &RxMeta::NONE);
            client.recycle(f);
        }
        echo_readable(server, buf, message)?;
        while let Some(f) = server.poll_transmit(*now) {
            c.frames += 1;
            client.receive(*now, &f, &RxMeta::NONE);
            server.recycle(f);
        }
        read_response(client, h, buf, msg_len)?;
        while client.poll_event().is_some() {}
        c.exchanges += 1;
        *now += opts.step_ns;
        if *now >= *deadline_ns {
            client.handle_timeout(*now);
            server.handle_timeout(*now);
            c.frames += move_frames(client, server, *now);
            while client.poll_event().is_some() {}
            while server.poll_event().is_some() {}
            c.timer_runs += 1;
        }
        *deadline_ns = earliest(client, server);
    }
    Ok(c)
}

/// The client writes one request on `h` (whole, or the run has stalled).
#[inline(always)]
fn send_request(client: &mut Stack, h: SocketHandle, message: &[u8]) -> Result<(), BulkError> {
    match client.tcp_send(h, message) {
        Ok(k) if k == message.len() => Ok(()),
        Ok(_) | Err(SocketError::WouldBlock) => Err(BulkError::Stalled { received_bytes: 0 }),
        Err(e) => Err(BulkError::Socket("send request", e)),
    }
}

/// The server echoes what each readable socket holds (up to a message's length per read).
#[inline(always)]
fn echo_readable(server: &mut Stack, buf: &mut [u8], message: &[u8]) -> Result<(), BulkError> {
    while let Some(e) = server.poll_event() {
        if !e.readiness.contains(Readiness::READABLE) {
            continue;
        }
        while let Ok(k) = server.tcp_recv(e.handle, buf) {
            if k == 0 {
                break;
            }
            server
                .tcp_send(e.handle, message.get(..k).unwrap_or_default())
                .map_err(|e| BulkError::Socket("send response", e))?;
        }
    }
    Ok(())
}

/// The client reads the response on `h`: exactly `msg_len` bytes, or the run has stalled.
#[inline(always)]
fn read_response(
    client: &mut Stack,
    h: SocketHandle,
    buf: &mut [u8],
    msg_len: usize,
) -> Result<(), BulkError> {
    let mut got = 0;
    while let Ok(k) = client.tcp_recv(h, buf) {
        if k == 0 {
            break;
        }
        got += k;
    }
    if got != msg_len {
        return Err(BulkError::Stalled {
            received_bytes: got as u64,
        });
    }
    Ok(())
}

/// Hands `frames` to `to` as one burst (with the look-ahead when `lookahead`), and their
/// buffers back to `from`.
fn deliver_burst(
    from: &mut Stack,
    to: &mut Stack,
    now: u64,
    frames: &mut Vec<Vec<u8>>,
    lookahead: bool,
) {
    fn view(f: &Vec<u8>) -> (&[u8], &RxMeta) {
        (f.as_slice(), &RxMeta::NONE)
    }
    let mut la = RxLookahead::default();
    if lookahead {
        la.start(to, frames, view);
    }
    let mut it = frames.drain(..);
    while let Some(f) = it.next() {
        if lookahead {
            let hint = la.advance(to, it.as_slice(), view);
            to.receive_hinted(now, &f, &RxMeta::NONE, &hint);
        } else {
            to.receive(now, &f, &RxMeta::NONE);
        }
        from.recycle(f);
    }
}

/// [`run_exchanges`] with `opts.burst` exchanges in flight together (see
/// [`ScaleOptions::burst`]); `exchanges` is rounded up to whole bursts.
fn run_bursts(w: &mut ScaleWorld, exchanges: u64) -> Result<ScaleCounts, BulkError> {
    let mut c = ScaleCounts::default();
    let n = w.opts.connections;
    let burst = w.opts.burst.min(n).max(1);
    let lookahead = w.opts.lookahead;
    let msg_len = w.message.len();
    let ScaleWorld {
        idle,
        next,
        message,
        buf,
        deadline_ns,
        opts,
    } = w;
    let IdleWorld {
        client,
        server,
        now,
        client_socks,
        ..
    } = idle;
    let mut frames: Vec<Vec<u8>> = Vec::with_capacity(2 * burst);
    let mut handles = Vec::with_capacity(burst);
    *deadline_ns = earliest(client, server);
    while c.exchanges < exchanges {
        handles.clear();
        for _ in 0..burst {
            let Some(&h) = client_socks.get(*next) else {
                return Err(BulkError::NotConnected);
            };
            *next = (*next + 1) % n;
            send_request(client, h, message)?;
            handles.push(h);
        }
        while let Some(f) = client.poll_transmit(*now) {
            frames.push(f);
        }
        c.frames += frames.len() as u64;
        deliver_burst(client, server, *now, &mut frames, lookahead);
        echo_readable(server, buf, message)?;
        while let Some(f) = server.poll_transmit(*now) {
            frames.push(f);
        }
        c.frames += frames.len() as u64;
        deliver_burst(server, client, *now, &mut frames, lookahead);
        for &h in &handles {
            read_response(client, h, buf, msg_len)?;
        }
        while client.poll_event().is_some() {}
        c.exchanges += burst as u64;
        *now += opts.step_ns * burst as u64;
        if *now >= *deadline_ns {
            client.handle_timeout(*now);
            server.handle_timeout(*now);
            c.frames += move_frames(client, server, *now);
            while client.poll_event().is_some() {}
            while server.poll_event().is_some() {}
            c.timer_runs += 1;
        }
        *deadline_ns = earliest(client, server);
    }
    Ok(c)
}
