//! The body of the `live_tcp` fuzz target (`fuzz/fuzz_targets/live_tcp.rs`) and of its seeded
//! stand-in in the suite (`crates/stack/tests/live_tcp_fuzz.rs`): the same code, included by
//! path in both.
//!
//! Two stacks, A (client) and B (server, listening on port 80 with a small SYN backlog and
//! cookies), are joined by a wire the input controls. After the input's first bytes choose the
//! configuration (SACK, timestamps, window scaling, buffer sizes, the ISN secret), A connects
//! and the rest of the input is a program of operations: advance the clock (or jump to the
//! next deadline), drop / duplicate / reorder the next frames in a direction, forge segments
//! on the live 4-tuple in either direction (sequence and acknowledgment numbers near the
//! receiver's real ones, arbitrary flags, window and options, payload taken from the sender's
//! stream), forge SYNs and ACKs from other ports at the listener, and application calls (send,
//! read, shutdown, close, abort, accept).
//!
//! Each direction carries an infinite deterministic byte stream: the byte at stream offset
//! `i` is [`stream_byte`]`(dir, i)`, whoever sends it — the stack's application or a forged
//! segment. Invariants checked after every operation and after the clock is run out:
//! - nothing panics;
//! - the bytes each application reads are exactly the next bytes of its peer's stream (the
//!   delivered stream is a prefix of what the peer sent, in order, without gaps or repeats);
//! - every connection's TCB invariants hold (`Stack::tcp_invariant_violation`);
//! - each stack's connection count stays within `sockets_max`;
//! - once the clock has run out, no deadline is in the past.
#![allow(dead_code)]

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{InterfaceConfig, Ipv4Cidr, RxMeta, SocketHandle, Stack, StackConfig};
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpPair, IpProtocol,
    Ipv4Packet, Ipv4Repr, SeqNumber, TcpFlags, TcpPacket, TcpRepr,
    tcp::{SackBlock, TcpTimestamp},
};

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT_B: u16 = 80;
const MS: u64 = 1_000_000;
const ETH_BYTES: usize = 14;
const IPV4_BYTES: usize = 20;
/// Operations run per input (longer inputs are cut).
const OPS_MAX: usize = 400;
/// Frames in flight per direction that the wire can hold back for reordering.
const HELD_MAX: usize = 8;
const SOCKETS_MAX: usize = 32;
/// Deadlines that may come due again at the same instant before it counts as a livelock.
const STUCK_DEADLINES_MAX: u32 = 64;

/// The byte at offset `i` of the stream sent in direction `to_b` (true: A → B).
pub fn stream_byte(to_b: bool, i: u64) -> u8 {
    let x = (i as u32).wrapping_mul(0x9e37_79b1) ^ ((i >> 32) as u32);
    (x >> 24) as u8 ^ if to_b { 0x5a } else { 0xa5 }
}

/// Reads the input a little at a time; past its end every read is 0.
struct Input<'a> {
    data: &'a [u8],
}

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// What the wire has seen of one direction's connection segments.
#[derive(Default, Clone, Copy)]
struct Seen {
    /// The sender's ISN, from its SYN.
    isn: Option<u32>,
    /// The highest stream offset (past SYN) the sender has sent up to.
    sent_end: u32,
    /// The sender's latest TSval.
    tsval: u32,
    /// The sender's source port on the live connection.
    port: u16,
}

/// One side: its stack, its connection and what its application has done.
struct Side {
    stack: Stack,
    conn: Option<SocketHandle>,
    /// Bytes of the peer's stream the application has read.
    read: u64,
    /// Bytes of its own stream the application has queued, and wants to.
    written: u64,
    goal: u64,
    /// The application closed or aborted: the handle may be gone.
    closed: bool,
}

impl Side {
    fn new(cfg: StackConfig) -> Side {
        Side {
            stack: Stack::new(cfg),
            conn: None,
            read: 0,
            written: 0,
            goal: 0,
            closed: false,
        }
    }

    /// Queues what fits of this side's stream (`to_b`: A's stream) up to its goal.
    fn write(&mut self, to_b: bool) {
        let (Some(h), false) = (self.conn, self.closed) else {
            return;
        };
        let bytes = self.goal.saturating_sub(self.written).min(1 << 16);
        if bytes == 0 {
            return;
        }
        let chunk: Vec<u8> = (0..bytes)
            .map(|k| stream_byte(to_b, self.written + k))
            .collect();
        if let Ok(n) = self.stack.tcp_send(h, &chunk) {
            self.written += n as u64;
        }
    }

    /// Reads up to `bytes` and checks they continue the peer's stream (`from_b`: B's stream).
    fn read(&mut self, from_b: bool, bytes: usize) {
        let (Some(h), false) = (self.conn, self.closed) else {
            return;
        };
        let mut buf = vec![0u8; bytes.max(1)];
        while let Ok(n) = self.stack.tcp_recv(h, &mut buf) {
            if n == 0 {
                break;
            }
            for (k, &b) in buf[..n].iter().enumerate() {
                let at = self.read + k as u64;
                assert_eq!(
                    b,
                    stream_byte(!from_b, at),
                    "byte {at} of the {} stream delivered wrong",
                    if from_b { "B → A" } else { "A → B" }
                );
            }
            self.read += n as u64;
            if n < buf.len() || bytes < 4096 {
                break;
            }
        }
    }
}

struct World {
    now: u64,
    a: Side,
    b: Side,
    listener: SocketHandle,
    /// Per direction (0: A → B, 1: B → A): frames to drop, to duplicate, and frames held back.
    drop_next: [u8; 2],
    dup_next: [u8; 2],
    held: [Vec<Vec<u8>>; 2],
    hold_next: [u8; 2],
    /// What each sender has shown of its stream (0: A, 1: B).
    seen: [Seen; 2],
    /// Children accepted beside the live connection (aborted at once).
    extra_accepted: u32,
    /// Deadlines run in a row without the clock moving.
    stuck_deadlines: u32,
}

fn config(mac: EthernetAddress, ip: Ipv4Addr, input: &mut Input<'_>) -> StackConfig {
    let mut cfg = StackConfig::new(InterfaceConfig::new(mac, Ipv4Cidr::new(ip, 24)));
    let bits = input.u8();
    cfg.tcp.sack = bits & 1 != 0;
    cfg.tcp.timestamps = bits & 2 != 0;
    cfg.tcp.window_scale = bits & 4 != 0;
    cfg.tcp.nodelay = bits & 8 != 0;
    cfg.tcp.recv_buffer_bytes = [4096, 16_384, 65_535, 300_000][usize::from(bits >> 4 & 3)];
    cfg.tcp.send_buffer_bytes = [8192, 65_536][usize::from(bits >> 6 & 1)];
    cfg.tcp.ooo_segments_max = 4;
    cfg.tcp.ooo_bytes_max = 16_384;
    cfg.limits.sockets_max = SOCKETS_MAX;
    cfg.limits.tcp_backlog_max = 2;
    cfg.limits.tcp_syn_backlog_max = 4;
    cfg.secret = [u64::from(input.u32()), 0x5eed];
    cfg
}

impl World {
    fn new(input: &mut Input<'_>) -> World {
        let a = Side::new(config(MAC_A, IP_A, input));
        let mut b = Side::new(config(MAC_B, IP_B, input));
        let listener = b
            .stack
            .tcp_listen(SocketAddr::new(IpAddr::V4(IP_B), PORT_B), 2)
            .expect("listen");
        let mut w = World {
            now: 0,
            a,
            b,
            listener,
            drop_next: [0; 2],
            dup_next: [0; 2],
            held: [Vec::new(), Vec::new()],
            hold_next: [0; 2],
            seen: [Seen::default(); 2],
            extra_accepted: 0,
            stuck_deadlines: 0,
        };
        let c =
            w.a.stack
                .tcp_connect(w.now, SocketAddr::new(IpAddr::V4(IP_B), PORT_B), 0)
                .expect("connect");
        w.a.conn = Some(c);
        w.seen[0].port = w.a.stack.local_addr(c).expect("bound").port();
        w.a.goal = 20_000;
        w.b.goal = 10_000;
        w
    }

    fn stack(&mut self, from_a: bool) -> &mut Stack {
        if from_a {
            &mut self.a.stack
        } else {
            &mut self.b.stack
        }
    }

    /// Records what a frame on the live 4-tuple shows of its sender's stream.
    fn observe(&mut self, dir: usize, frame: &[u8]) {
        let Some((ip, tcp)) = parse_tcp(frame) else {
            return;
        };
        let a_port = self.seen[0].port;
        let on_tuple = if dir == 0 {
            tcp.src_port == a_port && tcp.dst_port == PORT_B
        } else {
            tcp.src_port == PORT_B && tcp.dst_port == a_port
        };
        if !on_tuple || ip != (if dir == 0 { IP_A } else { IP_B }) {
            return;
        }
        let s = &mut self.seen[dir];
        if tcp.flags.contains(TcpFlags::SYN) {
            s.isn = Some(tcp.seq_number.0);
        }
        if let Some(isn) = s.isn {
            let start = tcp.seq_number.0.wrapping_sub(isn.wrapping_add(1));
            let end = start.wrapping_add(tcp.payload.len() as u32);
            if start < 1 << 31 && end > s.sent_end {
                s.sent_end = end;
            }
        }
        if let Some(ts) = tcp.timestamp {
            s.tsval = ts.tsval;
        }
    }

    /// Puts one frame on the wire in direction `dir`, applying the wire's pending faults.
    fn send(&mut self, dir: usize, frame: Vec<u8>) {
        self.observe(dir, &frame);
        if self.drop_next[dir] > 0 {
            self.drop_next[dir] -= 1;
            return;
        }
        if self.hold_next[dir] > 0 && self.held[dir].len() < HELD_MAX {
            self.hold_next[dir] -= 1;
            self.held[dir].push(frame);
            return;
        }
        let copies = if self.dup_next[dir] > 0 {
            self.dup_next[dir] -= 1;
            2
        } else {
            1
        };
        let now = self.now;
        for _ in 0..copies {
            self.stack(dir == 1).receive(now, &frame, &RxMeta::NONE);
        }
        // Frames held back go after the one that overtook them.
        if self.hold_next[dir] == 0 {
            for f in core::mem::take(&mut self.held[dir]) {
                self.stack(dir == 1).receive(now, &f, &RxMeta::NONE);
            }
        }
    }

    /// Moves frames both ways and lets the applications react until quiet (bounded).
    fn settle(&mut self) {
        for _ in 0..200 {
            let mut moved = false;
            for dir in 0..2 {
                let now = self.now;
                while let Some(f) = self.stack(dir == 0).poll_transmit(now) {
                    moved = true;
                    self.send(dir, f);
                }
            }
            self.app_events();
            if !moved {
                break;
            }
        }
        self.check();
    }

    fn app_events(&mut self) {
        while self.a.stack.poll_event().is_some() {}
        while self.b.stack.poll_event().is_some() {}
        self.a.write(true);
        self.b.write(false);
        while let Ok((h, _)) = self.b.stack.tcp_accept(self.listener) {
            let peer_port = self.b.stack.peer_addr(h).map(|a| a.port()).unwrap_or(0);
            if self.b.conn.is_none() && peer_port == self.seen[0].port {
                self.b.conn = Some(h);
            } else {
                self.extra_accepted += 1;
                let _ = self.b.stack.tcp_abort(h);
            }
        }
    }

    fn advance(&mut self, dt_ns: u64) {
        self.now += dt_ns;
        let now = self.now;
        self.a.stack.handle_timeout(now);
        self.b.stack.handle_timeout(now);
        self.settle();
    }

    /// Jumps to the earlier of the two stacks' deadlines (if any) and runs it. A deadline
    /// that stays at the current time after being run is a livelock: at most
    /// `STUCK_DEADLINES_MAX` in a row.
    fn next_deadline(&mut self) -> bool {
        let t = match (self.a.stack.poll_timeout(), self.b.stack.poll_timeout()) {
            (Some(x), Some(y)) => x.min(y),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => return false,
        };
        let dt = t.saturating_sub(self.now);
        if dt == 0 {
            self.stuck_deadlines += 1;
            assert!(
                self.stuck_deadlines <= STUCK_DEADLINES_MAX,
                "a deadline at {t} stays due after {STUCK_DEADLINES_MAX} runs"
            );
        } else {
            self.stuck_deadlines = 0;
        }
        self.advance(dt);
        true
    }

    fn check(&self) {
        for (name, side) in [("A", &self.a), ("B", &self.b)] {
            if let Some((tuple, v)) = side.stack.tcp_invariant_violation() {
                panic!("{name}: connection {tuple:?} breaks an invariant: {v}");
            }
            assert!(side.stack.tcp_connection_count() <= SOCKETS_MAX);
        }
    }

    /// A segment on the live 4-tuple in direction `dir` with fields chosen by the input,
    /// sequence and acknowledgment numbers near the receiver's real ones.
    fn forge(&mut self, dir: usize, input: &mut Input<'_>) {
        let (Some(isn_s), Some(isn_r)) = (self.seen[dir].isn, self.seen[1 - dir].isn) else {
            return;
        };
        let receiver_read = if dir == 0 { self.b.read } else { self.a.read } as u32;
        let scale = |k: u8| [1i32, 64, 4096, 65_536][usize::from(k & 3)];
        let kind = input.u8();
        let seq_off = receiver_read.wrapping_add((input.u16() as i16 as i32 * scale(kind)) as u32);
        let ack_off = self.seen[1 - dir]
            .sent_end
            .wrapping_add((input.u16() as i16 as i32 * scale(kind >> 2)) as u32);
        let raw = input.u8();
        let flags = if raw < 176 {
            TcpFlags(TcpFlags::ACK.0 | (raw & (TcpFlags::FIN.0 | TcpFlags::PSH.0)))
        } else {
            TcpFlags(raw)
        };
        let len = if kind & 0x10 != 0 {
            0
        } else {
            usize::from(input.u16() % 1461)
        };
        let payload: Vec<u8> = (0..len as u32)
            .map(|k| stream_byte(dir == 0, u64::from(seq_off.wrapping_add(k))))
            .collect();
        let opts = input.u8();
        let window = input.u16();
        let timestamp = (opts & 1 != 0).then(|| TcpTimestamp {
            tsval: self.seen[dir]
                .tsval
                .wrapping_add((input.u8() as i8 as i32 * scale(opts >> 1)) as u32),
            tsecr: self.seen[1 - dir].tsval.wrapping_sub(u32::from(input.u8())),
        });
        let mut sack_blocks = [None; 4];
        // Forty bytes of options: with a timestamp, at most two SACK blocks fit beside the rest.
        let sack_count = usize::from(opts >> 3 & 3).min(if timestamp.is_some() { 2 } else { 3 });
        for slot in sack_blocks.iter_mut().take(sack_count) {
            let left = isn_r
                .wrapping_add(1)
                .wrapping_add(self.seen[1 - dir].sent_end)
                .wrapping_add((input.u16() as i16 as i32 * 16) as u32);
            *slot = Some(SackBlock {
                left: SeqNumber(left),
                right: SeqNumber(left.wrapping_add(u32::from(input.u16()))),
            });
        }
        let a_port = self.seen[0].port;
        let (sport, dport) = if dir == 0 {
            (a_port, PORT_B)
        } else {
            (PORT_B, a_port)
        };
        let seg = TcpRepr {
            max_seg_size: (opts & 0x20 != 0).then_some(input.u16()),
            window_scale: (opts & 0x40 != 0).then_some(input.u8()),
            sack_permitted: opts & 0x80 != 0,
            sack_blocks,
            timestamp,
            payload: &payload,
            ..TcpRepr::bare(
                sport,
                dport,
                SeqNumber(isn_s.wrapping_add(1).wrapping_add(seq_off)),
                SeqNumber(isn_r.wrapping_add(1).wrapping_add(ack_off)),
                flags,
                window,
            )
        };
        let frame = tcp_frame(dir == 0, &seg);
        let now = self.now;
        self.stack(dir == 1).receive(now, &frame, &RxMeta::NONE);
        self.settle();
    }

    /// A segment from A's address on another port at B's listener: SYNs that fill the SYN
    /// backlog (and bring cookies), and ACKs that guess at a cookie.
    fn forge_at_listener(&mut self, input: &mut Input<'_>) {
        let port = 40_000 + u16::from(input.u8() & 15);
        let flags = TcpFlags(match input.u8() % 4 {
            0 | 1 => TcpFlags::SYN.0,
            2 => TcpFlags::ACK.0,
            _ => input.u8(),
        });
        let seg = TcpRepr {
            max_seg_size: Some(1460),
            ..TcpRepr::bare(
                port,
                PORT_B,
                SeqNumber(input.u32()),
                SeqNumber(input.u32()),
                flags,
                input.u16(),
            )
        };
        let frame = tcp_frame(true, &seg);
        let now = self.now;
        self.b.stack.receive(now, &frame, &RxMeta::NONE);
        self.settle();
    }

    fn op(&mut self, input: &mut Input<'_>) {
        let op = input.u8();
        let dir = usize::from(op >> 7);
        let arg = input.u8();
        match op & 0x0f {
            0 => self.advance(u64::from(arg) * MS),
            1 => self.advance(u64::from(arg) * 100 * MS),
            2 => {
                self.next_deadline();
            }
            3 => self.drop_next[dir] = self.drop_next[dir].saturating_add(arg % 4 + 1),
            4 => self.dup_next[dir] = self.dup_next[dir].saturating_add(arg % 3 + 1),
            5 => self.hold_next[dir] = self.hold_next[dir].saturating_add(arg % 4 + 1),
            6 | 7 => self.forge(dir, input),
            8 => self.forge_at_listener(input),
            9 => {
                let bytes = u64::from(arg) * 256;
                if dir == 0 {
                    self.a.goal += bytes;
                } else {
                    self.b.goal += bytes;
                }
                self.settle();
            }
            10 | 11 => {
                let bytes = usize::from(arg) * 64 + 1;
                if dir == 0 {
                    self.a.read(true, bytes);
                } else {
                    self.b.read(false, bytes);
                }
                self.settle();
            }
            12 => {
                let side = if dir == 0 { &mut self.a } else { &mut self.b };
                if let (Some(h), false) = (side.conn, side.closed) {
                    match arg % 8 {
                        0 => {
                            let _ = side.stack.tcp_abort(h);
                            side.closed = true;
                        }
                        1..=3 => {
                            let now = self.now;
                            let _ = side.stack.close(now, h);
                            side.closed = true;
                        }
                        _ => {
                            let _ = side.stack.tcp_shutdown(h);
                        }
                    }
                }
                self.settle();
            }
            _ => self.advance(u64::from(arg) * 10 * MS),
        }
    }

    /// Runs the clock out: every deadline, then reads what is left.
    fn run_out(&mut self) {
        for _ in 0..2_000 {
            // Whatever the wire still holds goes now.
            self.hold_next = [0; 2];
            self.drop_next = [0; 2];
            if !self.next_deadline() {
                break;
            }
            self.a.read(true, 1 << 16);
            self.b.read(false, 1 << 16);
        }
        self.a.read(true, 1 << 16);
        self.b.read(false, 1 << 16);
        self.check();
    }
}

/// Parses an Ethernet/IPv4/TCP frame: the source address and the segment.
fn parse_tcp(frame: &[u8]) -> Option<(Ipv4Addr, TcpRepr<'_>)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(&frame[ETH_BYTES..]).ok()?;
    let repr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL).ok()?;
    if repr.protocol != IpProtocol::TCP {
        return None;
    }
    let header = ip.header_len();
    let start = ETH_BYTES + header;
    let end = (ETH_BYTES + usize::from(ip.total_len())).min(frame.len());
    let tcp = TcpPacket::new_checked(frame.get(start..end)?).ok()?;
    let pair = IpPair::V4 {
        src: repr.src_addr,
        dst: repr.dst_addr,
    };
    let seg = TcpRepr::parse(&tcp, &pair, ChecksumCaps::ALL).ok()?;
    Some((repr.src_addr, seg))
}

/// A checksummed Ethernet/IPv4 frame carrying `seg`, from A to B (`from_a`) or B to A.
fn tcp_frame(from_a: bool, seg: &TcpRepr<'_>) -> Vec<u8> {
    let (src_mac, dst_mac, src, dst) = if from_a {
        (MAC_A, MAC_B, IP_A, IP_B)
    } else {
        (MAC_B, MAC_A, IP_B, IP_A)
    };
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::TCP,
        payload_len: seg.buffer_len(),
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset_bytes: 0,
    };
    let mut f = vec![0u8; ETH_BYTES + ip.buffer_len()];
    EthernetRepr {
        src_addr: src_mac,
        dst_addr: dst_mac,
        vlan: None,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .expect("ethernet header fits");
    ip.emit(
        &mut Ipv4Packet::new_unchecked(&mut f[ETH_BYTES..]),
        ChecksumCaps::ALL,
    )
    .expect("ip header fits");
    let pair = IpPair::V4 { src, dst };
    seg.emit(
        &mut TcpPacket::new_unchecked(&mut f[ETH_BYTES + IPV4_BYTES..]),
        &pair,
        ChecksumCaps::ALL,
    )
    .expect("segment fits");
    f
}

/// What one input reached, for the stand-in to check the harness is not vacuous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes of A's stream B's application read, and of B's stream A's read.
    pub b_read_bytes: u64,
    pub a_read_bytes: u64,
    /// The operations run.
    pub ops: usize,
}

/// Runs one input: configuration, connection, the program, then the clock run out.
pub fn run(data: &[u8]) -> Outcome {
    let mut input = Input { data };
    let mut w = World::new(&mut input);
    w.settle();
    let mut ops = 0;
    while ops < OPS_MAX && !input.is_empty() {
        w.op(&mut input);
        ops += 1;
    }
    w.run_out();
    Outcome {
        b_read_bytes: w.b.read,
        a_read_bytes: w.a.read,
        ops,
    }
}
