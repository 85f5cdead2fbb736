//! Two `Connection`s joined by a virtual link on a virtual clock.
//!
//! The link delays every segment by `one_way_delay_ns`; a per-segment `filter` returns a
//! verdict (pass, drop, duplicate, extra delay) so tests can lose, reorder or duplicate chosen
//! segments. `step` jumps the clock to the earliest event (a delivery or either side's
//! deadline), so a test of minutes of protocol time runs in microseconds.
#![allow(dead_code)]

use tcp::{CloseReason, Config, CongestionControl, Connection, Event, State};
use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

pub const MS: u64 = 1_000_000;

/// An owned segment.
#[derive(Debug, Clone)]
pub struct Seg {
    pub hdr: TcpRepr<'static>,
    pub payload: Vec<u8>,
}

impl Seg {
    pub fn from_repr(r: &TcpRepr<'_>) -> Seg {
        Seg {
            hdr: TcpRepr { payload: &[], ..*r },
            payload: r.payload.to_vec(),
        }
    }
    pub fn repr(&self) -> TcpRepr<'_> {
        TcpRepr {
            payload: &self.payload,
            ..self.hdr
        }
    }
    pub fn has(&self, f: TcpFlags) -> bool {
        self.hdr.flags.contains(f)
    }
    pub fn seq(&self) -> SeqNumber {
        self.hdr.seq_number
    }
    pub fn is_data(&self) -> bool {
        !self.payload.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    AtoB,
    BtoA,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop,
    Duplicate,
    DelayExtra(u64),
}

/// What the filter sees besides the segment.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    pub now: u64,
    pub dir: Dir,
    /// Index of this segment among those sent in its direction (0-based).
    pub index: usize,
    /// Index among data-carrying segments in its direction.
    pub data_index: usize,
}

pub type Filter = Box<dyn FnMut(&Ctx, &Seg) -> Verdict>;

pub struct Pair {
    pub now: u64,
    pub a: Connection,
    pub b: Connection,
    pub one_way_delay_ns: u64,
    /// Link rate in bits per second (`None`: infinitely fast). With a rate, segments leaving
    /// one side are serialized one after another, as on a real bottleneck.
    pub link_rate_bps: Option<u64>,
    /// When each direction's transmitter is free again.
    busy_until: [u64; 2],
    /// (deliver_at, order, direction, segment)
    in_flight: Vec<(u64, u64, Dir, Seg)>,
    order: u64,
    /// Every segment transmitted, with the time it left.
    pub log: Vec<(u64, Dir, Seg)>,
    pub filter: Filter,
    pub a_events: Vec<Event>,
    pub b_events: Vec<Event>,
    /// When set, the application on that side reads everything as soon as it can.
    pub a_auto_read: bool,
    pub b_auto_read: bool,
    pub a_read: Vec<u8>,
    pub b_read: Vec<u8>,
    /// Bytes the application on A still wants to write (written as space frees up).
    pub a_to_send: Vec<u8>,
    pub b_to_send: Vec<u8>,
    /// Segments a device below each side cuts one transmission into (TSO,
    /// `Connection::poll_transmit_tso`); 1: none. The peer receives the large segment whole,
    /// as after GRO.
    pub tso_segments: u16,
    /// Trains (`Connection::poll_transmit_train`) of at most this many segments drain each
    /// side, checked against a twin drained through `poll_transmit` alone: the same segments
    /// and the same connection afterwards. 0 or 1: no trains.
    pub train_segments_max: u16,
    /// Segments sent in trains so far.
    pub train_segments_sent: u64,
    sent_count: [usize; 2],
    data_count: [usize; 2],
    /// Highest right edge each side advertised (checked on every segment).
    right_edge: [Option<SeqNumber>; 2],
}

fn pass_all() -> Filter {
    Box::new(|_, _| Verdict::Pass)
}

impl Pair {
    /// A connects to B; B is created from A's SYN. Nothing is delivered yet beyond that SYN.
    pub fn new(config_a: Config, config_b: Config, delay_ns: u64) -> Pair {
        Pair::with_filter(config_a, config_b, delay_ns, pass_all())
    }

    /// Like `new`, with a link filter in place before B answers the SYN.
    pub fn with_filter(config_a: Config, config_b: Config, delay_ns: u64, filter: Filter) -> Pair {
        let now = 1_000 * MS;
        let mut a = Connection::connect(now, &config_a, 1000, 80, SeqNumber(0xffff_f000), 0x1000);
        let mut buf = vec![0u8; 65536];
        let syn = Seg::from_repr(&a.poll_transmit(now, &mut buf).expect("SYN"));
        let b = Connection::accept(
            now + delay_ns,
            &config_b,
            &syn.repr(),
            SeqNumber(0x7000_0000),
            0x9000,
        )
        .expect("accept");
        let mut p = Pair {
            now: now + delay_ns,
            a,
            b,
            one_way_delay_ns: delay_ns,
            link_rate_bps: None,
            busy_until: [0, 0],
            in_flight: Vec::new(),
            order: 0,
            log: vec![(now, Dir::AtoB, syn)],
            filter,
            a_events: Vec::new(),
            b_events: Vec::new(),
            a_auto_read: true,
            b_auto_read: true,
            a_read: Vec::new(),
            b_read: Vec::new(),
            a_to_send: Vec::new(),
            b_to_send: Vec::new(),
            tso_segments: 1,
            train_segments_max: 0,
            train_segments_sent: 0,
            sent_count: [1, 0],
            data_count: [0, 0],
            right_edge: [None, None],
        };
        p.flush();
        p
    }

    /// Joins two existing connections (e.g. built by a SYN-cookie handshake).
    pub fn from_connections(a: Connection, b: Connection, now: u64, delay_ns: u64) -> Pair {
        Pair {
            now,
            a,
            b,
            one_way_delay_ns: delay_ns,
            link_rate_bps: None,
            busy_until: [0, 0],
            in_flight: Vec::new(),
            order: 0,
            log: Vec::new(),
            filter: pass_all(),
            a_events: Vec::new(),
            b_events: Vec::new(),
            a_auto_read: true,
            b_auto_read: true,
            a_read: Vec::new(),
            b_read: Vec::new(),
            a_to_send: Vec::new(),
            b_to_send: Vec::new(),
            tso_segments: 1,
            train_segments_max: 0,
            train_segments_sent: 0,
            sent_count: [0, 0],
            data_count: [0, 0],
            right_edge: [None, None],
        }
    }

    /// Runs until both sides are ESTABLISHED (or panics after 10 s of virtual time).
    pub fn established(config_a: Config, config_b: Config, delay_ns: u64) -> Pair {
        let mut p = Pair::new(config_a, config_b, delay_ns);
        p.run_until(
            |p| p.a.state() == State::Established && p.b.state() == State::Established,
            10_000 * MS,
        );
        p.a_events.clear();
        p.b_events.clear();
        p.log.clear();
        p
    }

    pub fn conn(&mut self, d: Dir) -> &mut Connection {
        match d {
            Dir::AtoB => &mut self.a,
            Dir::BtoA => &mut self.b,
        }
    }

    /// Drains transmissions and events from both sides; runs the applications.
    pub fn flush(&mut self) {
        let mut buf = vec![0u8; 65536];
        for _ in 0..4 {
            self.run_apps();
            for dir in [Dir::AtoB, Dir::BtoA] {
                if self.train_segments_max > 1 {
                    self.drain_in_trains_against_twin(dir, &mut buf);
                    continue;
                }
                loop {
                    let now = self.now;
                    let tso = self.tso_segments;
                    let seg = match self.conn(dir).poll_transmit_tso(now, &mut buf, tso) {
                        Some(r) => Seg::from_repr(&r),
                        None => break,
                    };
                    self.enqueue(dir, seg);
                }
            }
        }
    }

    /// Drains `dir`'s side with trains and `poll_transmit`, and a clone of it with
    /// `poll_transmit` alone; panics unless both emit the same segments in the same order and
    /// end equal (every field of `Connection`, through its `Debug`).
    fn drain_in_trains_against_twin(&mut self, dir: Dir, buf: &mut [u8]) {
        let now = self.now;
        let max = self.train_segments_max;
        let mut twin = self.conn(dir).clone();
        let mut single = Vec::new();
        while let Some(r) = twin.poll_transmit(now, buf) {
            single.push(Seg::from_repr(&r));
        }
        let mut trained = Vec::new();
        let mut in_trains = 0u64;
        let c = self.conn(dir);
        loop {
            if let Some(t) = c.poll_transmit_train(now, max, buf.len()) {
                assert!(
                    t.segments >= 2 && t.segments <= max,
                    "train of {}",
                    t.segments
                );
                for j in 0..t.segments {
                    let n = c.train_payload(&t, j, buf);
                    trained.push(Seg {
                        hdr: t.segment(j),
                        payload: buf[..n].to_vec(),
                    });
                }
                in_trains += u64::from(t.segments);
                continue;
            }
            match c.poll_transmit(now, buf) {
                Some(r) => trained.push(Seg::from_repr(&r)),
                None => break,
            }
        }
        assert_eq!(
            format!("{single:?}"),
            format!("{trained:?}"),
            "{dir:?} at {now}: the train path's segments differ from poll_transmit's"
        );
        assert_eq!(
            format!("{twin:?}"),
            format!("{c:?}"),
            "{dir:?} at {now}: the connection differs after the train path"
        );
        self.train_segments_sent += in_trains;
        for seg in trained {
            self.enqueue(dir, seg);
        }
    }

    fn run_apps(&mut self) {
        while let Some(e) = self.a.poll_event() {
            self.a_events.push(e);
        }
        while let Some(e) = self.b.poll_event() {
            self.b_events.push(e);
        }
        let mut tmp = vec![0u8; 65536];
        if self.a_auto_read {
            while let Ok(n @ 1..) = self.a.recv(&mut tmp) {
                self.a_read.extend_from_slice(&tmp[..n]);
            }
        }
        if self.b_auto_read {
            while let Ok(n @ 1..) = self.b.recv(&mut tmp) {
                self.b_read.extend_from_slice(&tmp[..n]);
            }
        }
        if !self.a_to_send.is_empty() {
            if let Ok(n) = self.a.send(&self.a_to_send) {
                self.a_to_send.drain(..n);
            }
        }
        if !self.b_to_send.is_empty() {
            if let Ok(n) = self.b.send(&self.b_to_send) {
                self.b_to_send.drain(..n);
            }
        }
    }

    fn enqueue(&mut self, dir: Dir, seg: Seg) {
        let seg = through_the_wire(&seg);
        self.check_right_edge(dir, &seg);
        let i = match dir {
            Dir::AtoB => 0,
            Dir::BtoA => 1,
        };
        let ctx = Ctx {
            now: self.now,
            dir,
            index: self.sent_count[i],
            data_index: self.data_count[i],
        };
        self.sent_count[i] += 1;
        if seg.is_data() {
            self.data_count[i] += 1;
        }
        self.log.push((self.now, dir, seg.clone()));
        let verdict = (self.filter)(&ctx, &seg);
        let mut depart = self.now;
        if let Some(bps) = self.link_rate_bps {
            // 40 bytes of IP/TCP header plus options and payload, serialized at the link rate.
            let bits = (40 + seg.hdr.buffer_len() as u64) * 8;
            depart = self.now.max(self.busy_until[i]);
            self.busy_until[i] = depart + bits * 1_000_000_000 / bps.max(1);
            depart = self.busy_until[i];
        }
        let at = depart + self.one_way_delay_ns;
        match verdict {
            Verdict::Pass => self.push_flight(at, dir, seg),
            Verdict::Drop => {}
            Verdict::Duplicate => {
                self.push_flight(at, dir, seg.clone());
                self.push_flight(at, dir, seg);
            }
            Verdict::DelayExtra(d) => self.push_flight(at + d, dir, seg),
        }
    }

    /// RFC 9293 §3.8.6.2.2 / RFC 7323 §2.4: the right edge a side advertises never moves left
    /// (by the scale granularity or more).
    fn check_right_edge(&mut self, dir: Dir, seg: &Seg) {
        if !seg.has(TcpFlags::ACK) || seg.has(TcpFlags::SYN) || seg.has(TcpFlags::RST) {
            return;
        }
        let i = match dir {
            Dir::AtoB => 0,
            Dir::BtoA => 1,
        };
        let scale = self.conn(dir).negotiated().rcv_wscale;
        let edge = seg.hdr.ack_number + (u32::from(seg.hdr.window_len) << scale);
        if let Some(last) = self.right_edge[i] {
            assert!(
                edge.ge(last) || last.diff(edge) < (1 << scale),
                "{dir:?}: advertised right edge moved left from {last:?} to {edge:?}"
            );
            if edge.gt(last) {
                self.right_edge[i] = Some(edge);
            }
        } else {
            self.right_edge[i] = Some(edge);
        }
    }

    fn push_flight(&mut self, at: u64, dir: Dir, seg: Seg) {
        self.order += 1;
        self.in_flight.push((at, self.order, dir, seg));
    }

    /// Puts a crafted segment on the link towards the side `dir` points at.
    pub fn inject(&mut self, dir: Dir, seg: Seg) {
        let at = self.now;
        self.push_flight(at, dir, seg);
    }

    /// Advances to the next event and processes it. False when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.flush();
        let next_delivery = self.in_flight.iter().map(|e| e.0).min();
        let next = [next_delivery, self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { return false };
        self.now = self.now.max(t);
        self.process_due();
        true
    }

    fn process_due(&mut self) {
        let now = self.now;
        // Deliver due segments in (time, order) order.
        loop {
            let idx = self
                .in_flight
                .iter()
                .enumerate()
                .filter(|(_, e)| e.0 <= now)
                .min_by_key(|(_, e)| (e.0, e.1))
                .map(|(i, _)| i);
            let Some(i) = idx else { break };
            let (_, _, dir, seg) = self.in_flight.remove(i);
            let to = match dir {
                Dir::AtoB => &mut self.b,
                Dir::BtoA => &mut self.a,
            };
            to.handle_segment(now, &seg.repr());
        }
        if self.a.poll_timeout().is_some_and(|t| t <= now) {
            self.a.handle_timeout(now);
        }
        if self.b.poll_timeout().is_some_and(|t| t <= now) {
            self.b.handle_timeout(now);
        }
        self.flush();
    }

    /// Steps until `cond` holds; panics if `limit_ns` of virtual time pass first.
    pub fn run_until(&mut self, mut cond: impl FnMut(&Pair) -> bool, limit_ns: u64) {
        let deadline = self.now + limit_ns;
        while !cond(self) {
            assert!(
                self.now <= deadline,
                "condition not reached within {limit_ns} ns (now {})",
                self.now
            );
            if !self.step() {
                assert!(
                    cond(self),
                    "nothing left to happen and condition not reached"
                );
                return;
            }
        }
    }

    /// Steps through everything due up to `now + dur_ns`, leaving the clock there.
    pub fn run_for(&mut self, dur_ns: u64) {
        let target = self.now + dur_ns;
        loop {
            self.flush();
            let next_delivery = self.in_flight.iter().map(|e| e.0).min();
            let next = [next_delivery, self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= target => {
                    self.now = self.now.max(t);
                    self.process_due();
                }
                _ => break,
            }
        }
        self.now = target;
    }

    /// Segments sent in `dir` so far (log), filtered.
    pub fn sent(&self, dir: Dir) -> impl Iterator<Item = &(u64, Dir, Seg)> {
        self.log.iter().filter(move |e| e.1 == dir)
    }

    pub fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }
}

/// A bare segment from `src_port` to `dst_port` for injection tests.
pub fn seg(src_port: u16, dst_port: u16, seq: SeqNumber, ack: SeqNumber, flags: TcpFlags) -> Seg {
    Seg {
        hdr: TcpRepr::bare(src_port, dst_port, seq, ack, flags, 1000),
        payload: Vec::new(),
    }
}

/// Deterministic test data: byte i is a function of i.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(7) ^ (i >> 8)) as u8)
        .collect()
}

/// Emits `seg` with the real `wire` codec (checksum filled) and parses it back (checksum
/// verified): every segment the engines produce must be encodable, and what the peer sees is
/// exactly what the codec yields.
pub fn through_the_wire(seg: &Seg) -> Seg {
    use std::net::Ipv4Addr;
    use wire::{ChecksumCaps, IpPair, TcpPacket};
    let addrs = IpPair::V4 {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
    };
    let repr = seg.repr();
    let mut bytes = vec![0u8; repr.buffer_len()];
    let mut packet = TcpPacket::new_unchecked(&mut bytes[..]);
    repr.emit(&mut packet, &addrs, ChecksumCaps::ALL)
        .expect("engine output must be encodable");
    let view = TcpPacket::new_checked(&bytes[..]).expect("emitted segment must be well-formed");
    let parsed =
        TcpRepr::parse(&view, &addrs, ChecksumCaps::ALL).expect("emitted segment must parse");
    assert_eq!(parsed, repr, "wire round trip changed the segment");
    Seg::from_repr(&parsed)
}

/// xorshift64*: deterministic fault and workload decisions for the random-link tests.
pub struct FaultRng(pub u64);

impl FaultRng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}

/// The connection options the random-configuration tests draw, both ends alike.
#[derive(Debug, Clone, Copy)]
pub struct Knobs {
    pub mss: u16,
    /// Send and receive buffer, each.
    pub buf: u32,
    pub sack: bool,
    pub ts: bool,
    pub ws: bool,
    /// CUBIC, else NewReno.
    pub cubic: bool,
    pub nodelay: bool,
}

impl Knobs {
    /// The default configuration with these options.
    pub fn config(&self) -> Config {
        Config {
            mss_bytes: self.mss,
            recv_buffer_bytes: self.buf,
            send_buffer_bytes: self.buf,
            sack: self.sack,
            timestamps: self.ts,
            window_scale: self.ws,
            nodelay: self.nodelay,
            congestion_control: if self.cubic {
                CongestionControl::Cubic
            } else {
                CongestionControl::NewReno
            },
            ..Config::default()
        }
    }
}

/// Whether `c` has finished closing: in TIME-WAIT, or CLOSED. A wait for this stops on any
/// close; [`clean_close`] then says whether it was the orderly one.
pub fn finished(c: &Connection) -> bool {
    matches!(c.state(), State::TimeWait | State::Closed)
}

/// `Ok` when `c` closed the orderly way: TIME-WAIT (it closed first and both FINs were
/// acknowledged), or CLOSED with the engine's reason `Normal` — not a reset, a timeout or an
/// abort, which also end in CLOSED.
pub fn clean_close(who: &str, c: &Connection) -> Result<(), String> {
    match (c.state(), c.close_reason()) {
        (State::TimeWait, None) | (State::Closed, Some(CloseReason::Normal)) => Ok(()),
        (state, reason) => Err(format!("{who} ended in {state:?}, close reason {reason:?}")),
    }
}
