//! Header prediction changes nothing but the path: three worlds, each a connection pair over
//! a link the test drives, take the same random operations (application sends and reads,
//! segments delivered in order, out of order, twice, mutated, corrupted or dropped, time
//! passing and timers firing); the first world's connections predict, the second's take
//! every segment by the full path, the third's are given every segment as the stack gives
//! one whose checksum it has not verified (`handle_segment_summing`, the full
//! `handle_segment` when it declines). After every operation the worlds must hold the same
//! TCBs (every group, the counters, RACK, `tcp_info`, the queues' headers: the `Debug` form
//! of `Connection`), the same segments on the link and the same bytes read.

use std::collections::VecDeque;

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpRepr, TcpTimestamp};

use super::{PREDICTED_SEGMENTS, PREDICTION_OFF, SUMMED_SEGMENTS, SummedInput};
use crate::config::{CongestionControl, EcnMode, KeepaliveConfig, NS_PER_MS};
use crate::{Config, Connection};

/// A segment on the link, owning its payload.
#[derive(Debug, Clone, PartialEq)]
struct Seg {
    header: TcpRepr<'static>,
    payload: Vec<u8>,
}

impl Seg {
    fn from_repr(r: &TcpRepr<'_>) -> Seg {
        Seg {
            header: TcpRepr { payload: &[], ..*r },
            payload: r.payload.to_vec(),
        }
    }

    fn repr(&self) -> TcpRepr<'_> {
        TcpRepr {
            payload: &self.payload,
            ..self.header
        }
    }
}

/// A change to a segment before it is delivered: the segments header prediction must send
/// to the full path (or that sit just inside its conditions).
#[derive(Debug, Clone)]
enum Mutation {
    SeqDelta(i32),
    AckDelta(i32),
    Window(u16),
    AddFlags(u8),
    NoTimestamp,
    OlderTsval(u32),
    SackBlock(u32, u32),
    Truncate(usize),
}

#[derive(Debug, Clone)]
enum Op {
    /// The application on A (`true`) or B writes this many bytes.
    Send(bool, usize),
    /// The application reads up to this many bytes.
    Read(bool, usize),
    /// The segment at this index of the link (modulo its length) is delivered; 0 is the
    /// oldest (in order).
    Deliver(usize),
    Drop(usize),
    /// Delivered, and left on the link to arrive again.
    Duplicate(usize),
    /// A mutated copy is delivered; the original stays on the link.
    Mutated(usize, Mutation),
    /// Time passes (ms); due timers fire.
    Advance(u64),
    /// The application on that side shuts its sending direction.
    Shutdown(bool),
    /// A copy whose checksum does not verify is offered (the original stays on the link):
    /// the summing world hands it to `handle_segment_summing`, which must not take it; the
    /// others drop it, as the stack's checksum check does.
    Corrupt(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (-3000i32..3000).prop_map(Mutation::SeqDelta),
        (-3000i32..3000).prop_map(Mutation::AckDelta),
        any::<u16>().prop_map(Mutation::Window),
        prop::sample::select(vec![
            TcpFlags::PSH.0,
            TcpFlags::FIN.0,
            TcpFlags::URG.0,
            TcpFlags::ECE.0,
            TcpFlags::CWR.0,
            TcpFlags::SYN.0,
            TcpFlags::RST.0,
        ])
        .prop_map(Mutation::AddFlags),
        Just(Mutation::NoTimestamp),
        (1u32..100_000).prop_map(Mutation::OlderTsval),
        (0u32..20_000, 1u32..3000).prop_map(|(o, l)| Mutation::SackBlock(o, l)),
        (0usize..1500).prop_map(Mutation::Truncate),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        24 => (any::<bool>(), 1usize..30_000).prop_map(|(a, n)| Op::Send(a, n)),
        18 => (any::<bool>(), 1usize..60_000).prop_map(|(a, n)| Op::Read(a, n)),
        120 => Just(Op::Deliver(0)),
        9 => (1usize..8).prop_map(Op::Deliver),
        3 => (0usize..8).prop_map(Op::Drop),
        3 => (0usize..8).prop_map(Op::Duplicate),
        6 => ((0usize..4), mutation()).prop_map(|(i, m)| Op::Mutated(i, m)),
        6 => prop::sample::select(vec![1u64, 5, 40, 200, 1000, 3000]).prop_map(Op::Advance),
        1 => any::<bool>().prop_map(Op::Shutdown),
        3 => (0usize..4).prop_map(Op::Corrupt),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![4096u32, 16_384, 65_536, 262_144]),
        prop::sample::select(vec![EcnMode::Off, EcnMode::Off, EcnMode::Off, EcnMode::On]),
        any::<bool>(),
        prop::sample::select(vec![0u16, 2, 16]),
    )
        .prop_map(
            |(timestamps, sack, cubic, keepalive, recv_buffer_bytes, ecn, rack, quickacks)| {
                Config {
                    timestamps,
                    sack,
                    rack,
                    congestion_control: if cubic {
                        CongestionControl::Cubic
                    } else {
                        CongestionControl::NewReno
                    },
                    hystart: cubic,
                    keepalive: keepalive.then_some(KeepaliveConfig {
                        idle_ns: 2_000 * NS_PER_MS,
                        interval_ns: 500 * NS_PER_MS,
                        probes_max: 3,
                    }),
                    recv_buffer_bytes,
                    send_buffer_bytes: 65_536,
                    ecn,
                    quickack_segments: quickacks,
                    ..Config::default()
                }
            },
        )
}

/// One connection pair and its link, driven from outside.
struct World {
    now: u64,
    a: Connection,
    b: Connection,
    /// Segments on the link: (towards B, segment), oldest first.
    link: VecDeque<(bool, Seg)>,
    read: [Vec<u8>; 2],
    sent: [usize; 2],
    events: Vec<(bool, crate::Event)>,
    /// How this world's connections take segments.
    mode: Mode,
    /// `poll_transmit`'s payload buffer.
    buf: Vec<u8>,
}

const LINK_MAX: usize = 400;

/// How a world's connections are given segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `handle_segment`, header prediction on.
    Predict,
    /// `handle_segment`, every segment by the full path.
    FullPath,
    /// `handle_segment_summing` with the sum a verifying checksum gives, then
    /// `handle_segment` when it declines.
    Summing,
}

impl World {
    fn new(config_a: &Config, config_b: &Config, mode: Mode) -> World {
        let now = 1_000 * NS_PER_MS;
        let mut a = Connection::connect(now, config_a, 1000, 80, SeqNumber(0xffff_f000), 0x1000);
        let mut buf = vec![0u8; 65_536];
        let syn = Seg::from_repr(&a.poll_transmit(now, &mut buf).expect("SYN"));
        let b = Connection::accept(now, config_b, &syn.repr(), SeqNumber(0x7000_0000), 0x9000)
            .expect("accept");
        let mut w = World {
            now,
            a,
            b,
            link: VecDeque::new(),
            read: [Vec::new(), Vec::new()],
            sent: [0, 0],
            events: Vec::new(),
            mode,
            buf,
        };
        w.flush();
        w
    }

    fn conn(&mut self, a: bool) -> &mut Connection {
        if a { &mut self.a } else { &mut self.b }
    }

    /// Every segment both ends have to send goes on the link (bounded), events are taken.
    fn flush(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        for a in [true, false] {
            let now = self.now;
            for _ in 0..200 {
                let Some(r) = self.conn(a).poll_transmit(now, &mut buf) else {
                    break;
                };
                let s = Seg::from_repr(&r);
                if self.link.len() < LINK_MAX {
                    self.link.push_back((a, s));
                }
            }
            while let Some(e) = self.conn(a).poll_event() {
                self.events.push((a, e));
            }
        }
        self.buf = buf;
    }

    fn deliver(&mut self, towards_b: bool, seg: &Seg) {
        let now = self.now;
        let off = self.mode == Mode::FullPath;
        PREDICTION_OFF.with(|p| p.set(off));
        let summing = self.mode == Mode::Summing;
        let c = if towards_b { &mut self.b } else { &mut self.a };
        // The header's sum that makes the whole verify: its complement of the text's.
        let header_sum = !wire::checksum::sum(&seg.payload);
        if !summing
            || c.handle_segment_summing(now, &seg.repr(), 0, header_sum) == SummedInput::Declined
        {
            c.handle_segment(now, &seg.repr());
        }
        PREDICTION_OFF.with(|p| p.set(false));
    }

    /// A copy of `seg` whose checksum does not verify arrives: only `handle_segment_summing`
    /// sees it (the other paths' caller drops it before the connection), and must not take it.
    fn deliver_corrupt(&mut self, towards_b: bool, seg: &Seg) {
        if self.mode != Mode::Summing {
            return;
        }
        let now = self.now;
        let c = if towards_b { &mut self.b } else { &mut self.a };
        // One bit off the verifying header sum: the combined sum is no longer 0xffff.
        let header_sum = !wire::checksum::sum(&seg.payload) ^ 1;
        let got = c.handle_segment_summing(now, &seg.repr(), 0, header_sum);
        assert_ne!(
            got,
            SummedInput::Taken,
            "a segment whose checksum fails was taken"
        );
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Send(a, n) => {
                let i = usize::from(!*a);
                let data: Vec<u8> = (0..*n).map(|k| ((self.sent[i] + k) % 251) as u8).collect();
                if let Ok(taken) = self.conn(*a).send(&data) {
                    self.sent[i] += taken;
                }
            }
            Op::Read(a, n) => {
                let mut out = vec![0u8; *n];
                if let Ok(got) = self.conn(*a).recv(&mut out) {
                    self.read[usize::from(!*a)].extend_from_slice(&out[..got]);
                }
            }
            Op::Deliver(i) | Op::Drop(i) | Op::Duplicate(i) => {
                if self.link.is_empty() {
                    return;
                }
                let i = i % self.link.len();
                let (towards_b, seg) = if matches!(op, Op::Duplicate(_)) {
                    self.link[i].clone()
                } else {
                    self.link.remove(i).expect("index in range")
                };
                if !matches!(op, Op::Drop(_)) {
                    self.deliver(towards_b, &seg);
                }
            }
            Op::Mutated(i, m) => {
                if self.link.is_empty() {
                    return;
                }
                let (towards_b, mut seg) = self.link[i % self.link.len()].clone();
                mutate(&mut seg, m);
                self.deliver(towards_b, &seg);
            }
            Op::Advance(ms) => {
                self.now += ms * NS_PER_MS;
                let now = self.now;
                for a in [true, false] {
                    if self.conn(a).poll_timeout().is_some_and(|t| t <= now) {
                        self.conn(a).handle_timeout(now);
                    }
                }
            }
            Op::Shutdown(a) => {
                let _ = self.conn(*a).shutdown_write();
            }
            Op::Corrupt(i) => {
                if self.link.is_empty() {
                    return;
                }
                let (towards_b, seg) = self.link[i % self.link.len()].clone();
                self.deliver_corrupt(towards_b, &seg);
            }
        }
        self.flush();
    }

    /// The two TCBs as `Debug` shows them (every group, counters, RACK, `tcp_info`).
    fn tcbs(&self) -> String {
        format!("now {}\nA {:?}\nB {:?}", self.now, self.a, self.b)
    }

    /// Whether the link, the bytes read and the events are the same as `other`'s.
    fn same_io(&self, other: &World) -> bool {
        self.link == other.link && self.read == other.read && self.events == other.events
    }
}

fn mutate(seg: &mut Seg, m: &Mutation) {
    let h = &mut seg.header;
    match *m {
        Mutation::SeqDelta(d) => h.seq_number = SeqNumber(h.seq_number.0.wrapping_add(d as u32)),
        Mutation::AckDelta(d) => h.ack_number = SeqNumber(h.ack_number.0.wrapping_add(d as u32)),
        Mutation::Window(w) => h.window_len = w,
        Mutation::AddFlags(f) => h.flags = TcpFlags(h.flags.0 | f),
        Mutation::NoTimestamp => h.timestamp = None,
        Mutation::OlderTsval(d) => {
            if let Some(ts) = h.timestamp.as_mut() {
                *ts = TcpTimestamp {
                    tsval: ts.tsval.wrapping_sub(d),
                    ..*ts
                };
            }
        }
        Mutation::SackBlock(off, len) => {
            let left = h.ack_number + off;
            h.sack_blocks[0] = Some(SackBlock {
                left,
                right: left + len,
            });
        }
        Mutation::Truncate(n) => seg.payload.truncate(n),
    }
}

/// Runs `ops` on the three worlds, comparing after each; returns the segments the short
/// path took in the predicting and summing worlds, and those the summing path took.
fn run_twins(
    config_a: &Config,
    config_b: &Config,
    ops: &[Op],
) -> Result<(u64, u64), TestCaseError> {
    let before = PREDICTED_SEGMENTS.with(|n| n.get());
    let summed_before = SUMMED_SEGMENTS.with(|n| n.get());
    let mut fast = World::new(config_a, config_b, Mode::Predict);
    let mut full = World::new(config_a, config_b, Mode::FullPath);
    let mut summing = World::new(config_a, config_b, Mode::Summing);
    // The handshake first, so that most operations find both ends established.
    let warmup = [Op::Deliver(0), Op::Deliver(0), Op::Deliver(0)];
    for (step, op) in warmup.iter().chain(ops).enumerate() {
        fast.apply(op);
        full.apply(op);
        summing.apply(op);
        for (name, w) in [("predicting", &fast), ("summing", &summing)] {
            if !w.same_io(&full) {
                return Err(TestCaseError::fail(format!(
                    "step {step} ({op:?}): {name}: the segments on the link, the bytes read or the events differ"
                )));
            }
        }
        compare(step, op, "predicting", &fast, &full)?;
        compare(step, op, "summing", &summing, &full)?;
        for (who, c) in [
            ("A", &fast.a),
            ("B", &fast.b),
            ("summing A", &summing.a),
            ("summing B", &summing.b),
        ] {
            if let Some(v) = c.invariant_violation() {
                return Err(TestCaseError::fail(format!("step {step}: {who}: {v}")));
            }
        }
    }
    Ok((
        PREDICTED_SEGMENTS.with(|n| n.get()) - before,
        SUMMED_SEGMENTS.with(|n| n.get()) - summed_before,
    ))
}

/// The TCBs of `w` and of the full-path world `full` are the same.
fn compare(step: usize, op: &Op, name: &str, w: &World, full: &World) -> Result<(), TestCaseError> {
    {
        let (f, s) = (w.tcbs(), full.tcbs());
        if f != s {
            let at = f
                .lines()
                .zip(s.lines())
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            return Err(TestCaseError::fail(format!(
                "step {step} ({op:?}): the worlds differ at line {at}\n{name}: {}\nfull path:  {}",
                f.lines().nth(at).unwrap_or(""),
                s.lines().nth(at).unwrap_or("")
            )));
        }
    }
    Ok(())
}

#[test]
fn header_prediction_leaves_state_counters_and_segments_as_the_full_path_does() {
    let mut runner = TestRunner::new(RunnerConfig {
        cases: 192,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let total = std::cell::Cell::new(0u64);
    let summed = std::cell::Cell::new(0u64);
    let strategy = (config(), config(), prop::collection::vec(op(), 1..400));
    runner
        .run(&strategy, |(config_a, config_b, ops)| {
            let (p, s) = run_twins(&config_a, &config_b, &ops)?;
            total.set(total.get() + p);
            summed.set(summed.get() + s);
            Ok(())
        })
        .unwrap();
    // The comparison means something only if the short paths ran.
    eprintln!(
        "segments the short path took: {}, by the summing path: {}",
        total.get(),
        summed.get()
    );
    assert!(
        total.get() > 2_000,
        "the short path took only {} segments over all cases",
        total.get()
    );
    assert!(
        summed.get() > 1_000,
        "the summing path took only {} segments over all cases",
        summed.get()
    );
}

#[test]
fn in_order_bulk_data_takes_the_short_path_and_other_segments_do_not() {
    let config = Config::default();
    let mut w = World::new(&config, &config, Mode::Predict);
    for _ in 0..3 {
        w.apply(&Op::Deliver(0));
    }
    assert_eq!(w.a.state, crate::State::Established);
    assert_eq!(w.b.state, crate::State::Established);
    w.apply(&Op::Send(true, 10 * 1448));
    let before = PREDICTED_SEGMENTS.with(|n| n.get());
    let data_segments = w.link.iter().filter(|(_, s)| !s.payload.is_empty()).count() as u64;
    assert!(
        data_segments >= 4,
        "the initial window sends several segments"
    );
    // In order, one at a time: B takes the data by the short path, A takes B's ACKs (which
    // acknowledge new data) by it too.
    let mut delivered = 0u64;
    for _ in 0..200 {
        if w.link.is_empty() {
            break;
        }
        w.apply(&Op::Deliver(0));
        delivered += 1;
        w.apply(&Op::Read(false, 1 << 20));
    }
    let predicted = PREDICTED_SEGMENTS.with(|n| n.get()) - before;
    assert!(delivered > 10, "B acknowledged the data");
    assert_eq!(predicted, delivered, "every data segment and ACK predicted");
    assert_eq!(w.read[1].len(), 10 * 1448);
    // A segment out of order is not predicted.
    w.apply(&Op::Send(true, 3 * 1448));
    let before = PREDICTED_SEGMENTS.with(|n| n.get());
    w.apply(&Op::Deliver(1));
    assert_eq!(PREDICTED_SEGMENTS.with(|n| n.get()), before);
    assert_eq!(w.b.ooo_bytes(), 1448);
    // Nor the in-order one that fills the hole (the queue is not empty).
    w.apply(&Op::Deliver(0));
    assert_eq!(PREDICTED_SEGMENTS.with(|n| n.get()), before);
    // Nor a bare ACK of nothing new (B's duplicate ACK for the hole, delivered again).
    let dup = w
        .link
        .iter()
        .position(|(towards_b, s)| !towards_b && s.payload.is_empty())
        .expect("B acknowledged");
    w.apply(&Op::Duplicate(dup));
    w.apply(&Op::Duplicate(dup));
    assert_eq!(PREDICTED_SEGMENTS.with(|n| n.get()), before);
}
