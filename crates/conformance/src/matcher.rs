//! Script packet lines against live segments, independent of the stack.
//!
//! Sequence spaces (packetdrill's remapping, restated):
//! - numbers in an **inbound** line's `seq` are relative to the *script side's* ISN, which the
//!   executor chooses ([`SeqSpace::new`]); its `ack` and SACK blocks refer to the stack's space;
//! - numbers in an **outbound** line's `seq` are relative to the *stack's* ISN, learnt from the
//!   first outbound SYN ([`SeqSpace::learn_stack_isn`], done by [`MatchContext::match_outbound`]);
//!   its `ack` and SACK blocks refer to the script side's space.
//!
//! Timestamps (RFC 7323 §3): the stack's TS val clock has an arbitrary origin. The first
//! outbound TS val fixes `ts_val_offset = actual - script`; inbound `ecr` values are mapped
//! through it, outbound `val`s are checked against it only when `--tcp_ts_tick_usecs` is given
//! (within the tolerance converted to ticks). Inbound TS vals go out as written, so outbound
//! `ecr` values are compared literally.
//!
//! `wire::tcp::TcpRepr` keeps option *values*, not their order or padding: against a `TcpRepr`
//! the matcher checks MSS, window scale, SACK-permitted, SACK blocks and timestamps;
//! [`check_option_layout`] checks the exact wire order (nop, eol, kinds and lengths) when the
//! executor has the raw option bytes.

use crate::ast::{Direction, TcpLine, TcpOption, TcpOptionsSpec};
use crate::print::ScriptFlags;
use core::fmt;
use wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpRepr, TcpTimestamp};

/// Maps script-relative sequence numbers to live ones for one connection.
///
/// Invariant: `live = base + script` (mod 2^32) in each space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqSpace {
    /// Live value of script sequence number 0 on the script (remote peer) side.
    pub peer_base: SeqNumber,
    /// Live value of script sequence number 0 on the stack side; `None` until the stack's
    /// first SYN was matched.
    pub stack_base: Option<SeqNumber>,
}

impl SeqSpace {
    /// A connection whose script-side numbers start at `peer_base` on the wire.
    pub fn new(peer_base: SeqNumber) -> Self {
        SeqSpace {
            peer_base,
            stack_base: None,
        }
    }

    /// Records the stack's ISN from a SYN the script numbered `script_seq` (usually 0).
    pub fn learn_stack_isn(&mut self, script_seq: u32, live: SeqNumber) {
        self.stack_base = Some(live - script_seq);
    }

    /// Live number of a script-side (peer) sequence number.
    pub fn peer_live(&self, script: u32) -> SeqNumber {
        self.peer_base + script
    }

    /// Script number of a live peer-side sequence number.
    pub fn peer_script(&self, live: SeqNumber) -> u32 {
        live.0.wrapping_sub(self.peer_base.0)
    }

    /// Live number of a stack-side sequence number, once the stack's ISN is known.
    pub fn stack_live(&self, script: u32) -> Option<SeqNumber> {
        self.stack_base.map(|b| b + script)
    }

    /// Script number of a live stack-side sequence number, once the stack's ISN is known.
    pub fn stack_script(&self, live: SeqNumber) -> Option<u32> {
        self.stack_base.map(|b| live.0.wrapping_sub(b.0))
    }
}

/// Everything matching needs to know about one connection and the script's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchContext {
    pub seq: SeqSpace,
    /// `actual TS val - script TS val` of the stack's clock, learnt from the first outbound
    /// segment carrying a timestamp (when the script gives one).
    pub ts_val_offset: Option<u32>,
    /// `--tcp_ts_tick_usecs`: when set, outbound TS vals are checked.
    pub ts_tick_usecs: Option<u64>,
    /// `--tolerance_usecs`.
    pub tolerance_usecs: u64,
}

impl MatchContext {
    /// A context with packetdrill's defaults (tolerance 4000 µs, TS vals unchecked).
    pub fn new(peer_base: SeqNumber) -> Self {
        MatchContext {
            seq: SeqSpace::new(peer_base),
            ts_val_offset: None,
            ts_tick_usecs: None,
            tolerance_usecs: crate::ast::DEFAULT_TOLERANCE_USECS,
        }
    }

    /// Allowed TS val deviation in ticks: the time tolerance rounded up to whole ticks.
    pub fn ts_tolerance_ticks(&self) -> Option<u32> {
        self.ts_tick_usecs.map(|tick| {
            let ticks = self.tolerance_usecs.div_ceil(tick.max(1));
            u32::try_from(ticks).unwrap_or(u32::MAX)
        })
    }
}

/// One way an actual segment differs from the expected line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The line is not an outbound line.
    NotOutbound,
    /// An outbound non-SYN line was matched before the stack's ISN was known.
    StackIsnUnknown,
    Flags {
        expected: TcpFlags,
        actual: TcpFlags,
    },
    /// Script-relative (stack space) sequence numbers.
    Seq {
        expected: u32,
        actual: u32,
    },
    PayloadLen {
        expected_bytes: u32,
        actual_bytes: usize,
    },
    /// Script-relative (peer space) acknowledgment numbers.
    Ack {
        expected: u32,
        actual: u32,
    },
    Window {
        expected: u16,
        actual: u16,
    },
    Urgent {
        expected: u16,
        actual: u16,
    },
    /// The option sets differ: both sides in script notation.
    Options {
        expected: String,
        actual: String,
    },
    /// The TS val is off by more than the tolerance (script-relative values).
    TsVal {
        expected: u32,
        actual: u32,
        tolerance_ticks: u32,
    },
    /// The expectation names something a `TcpRepr` cannot show (e.g. `FO`); it is not checked.
    Unverifiable(&'static str),
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::NotOutbound => f.write_str("line is not an outbound packet"),
            Mismatch::StackIsnUnknown => {
                f.write_str("stack ISN unknown: no outbound SYN has been matched yet")
            }
            Mismatch::Flags { expected, actual } => write!(
                f,
                "expected flags {} got {}",
                ScriptFlags(*expected),
                ScriptFlags(*actual)
            ),
            Mismatch::Seq { expected, actual } => write!(f, "expected seq {expected} got {actual}"),
            Mismatch::PayloadLen {
                expected_bytes,
                actual_bytes,
            } => write!(
                f,
                "expected payload length {expected_bytes} got {actual_bytes}"
            ),
            Mismatch::Ack { expected, actual } => write!(f, "expected ack {expected} got {actual}"),
            Mismatch::Window { expected, actual } => {
                write!(f, "expected win {expected} got {actual}")
            }
            Mismatch::Urgent { expected, actual } => {
                write!(f, "expected urg {expected} got {actual}")
            }
            Mismatch::Options { expected, actual } => {
                write!(f, "option mismatch: expected {expected}, got {actual}")
            }
            Mismatch::TsVal {
                expected,
                actual,
                tolerance_ticks,
            } => write!(
                f,
                "expected TS val {expected} (±{tolerance_ticks} ticks) got {actual}"
            ),
            Mismatch::Unverifiable(what) => {
                write!(f, "cannot verify {what} against a TcpRepr")
            }
        }
    }
}

/// All the differences found between an expected line and an actual segment (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchError {
    pub mismatches: Vec<Mismatch>,
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.mismatches.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{m}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MatchError {}

/// The options a `TcpRepr` carries, in script notation and a fixed order
/// (`mss, sackOK, TS, wscale, sack`); padding is not represented.
pub fn repr_options_text(repr: &TcpRepr<'_>, seq: &SeqSpace) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = repr.max_seg_size {
        parts.push(format!("mss {m}"));
    }
    if repr.sack_permitted {
        parts.push("sackOK".into());
    }
    if let Some(ts) = repr.timestamp {
        parts.push(format!("TS val {} ecr {}", ts.tsval, ts.tsecr));
    }
    if let Some(w) = repr.window_scale {
        parts.push(format!("wscale {w}"));
    }
    let blocks: Vec<String> = repr
        .sack_blocks
        .iter()
        .flatten()
        .map(|b| format!("{}:{}", seq.peer_script(b.left), seq.peer_script(b.right)))
        .collect();
    if !blocks.is_empty() {
        parts.push(format!("sack {}", blocks.join(" ")));
    }
    format!("<{}>", parts.join(","))
}

fn repr_has_options(repr: &TcpRepr<'_>) -> bool {
    repr.max_seg_size.is_some()
        || repr.window_scale.is_some()
        || repr.sack_permitted
        || repr.sack_blocks.iter().any(Option::is_some)
        || repr.timestamp.is_some()
}

/// Option values an expectation list implies, comparable with a `TcpRepr`.
#[derive(Default)]
struct OptionValues {
    mss: Option<u16>,
    wscale: Option<u8>,
    sack_permitted: bool,
    /// Script-relative (peer space) blocks, in order.
    sack: Vec<(u32, u32)>,
    ts: Option<(u32, u32)>,
    fast_open: bool,
}

fn option_values(list: &[TcpOption]) -> OptionValues {
    let mut v = OptionValues::default();
    for o in list {
        match o {
            TcpOption::Nop | TcpOption::Eol => {}
            TcpOption::Mss(m) => v.mss = Some(*m),
            TcpOption::WindowScale(w) => v.wscale = Some(*w),
            TcpOption::SackPermitted => v.sack_permitted = true,
            TcpOption::Sack(blocks) => v.sack.extend(blocks.iter().copied()),
            TcpOption::Timestamp { val, ecr } => v.ts = Some((*val, *ecr)),
            TcpOption::FastOpen(_) => v.fast_open = true,
        }
    }
    v
}

impl MatchContext {
    /// Checks an actual outbound segment against an expected outbound line.
    ///
    /// Learns the stack's ISN when the line is a SYN, and the TS val offset from the first
    /// timestamp seen. Checks flags, seq, payload length, and — when the line gives them —
    /// ack, win, urg and options (see the module doc for what "options" can cover).
    /// On failure returns every difference found.
    pub fn match_outbound(
        &mut self,
        expected: &TcpLine,
        actual: &TcpRepr<'_>,
    ) -> Result<(), MatchError> {
        let mut out = Vec::new();
        if expected.direction != Direction::Outbound {
            out.push(Mismatch::NotOutbound);
            return Err(MatchError { mismatches: out });
        }
        if expected.flags != actual.flags {
            out.push(Mismatch::Flags {
                expected: expected.flags,
                actual: actual.flags,
            });
        }
        if expected.flags.contains(TcpFlags::SYN) && actual.flags.contains(TcpFlags::SYN) {
            self.seq
                .learn_stack_isn(expected.seq.start, actual.seq_number);
        }
        match self.seq.stack_script(actual.seq_number) {
            None => out.push(Mismatch::StackIsnUnknown),
            Some(s) if s != expected.seq.start => out.push(Mismatch::Seq {
                expected: expected.seq.start,
                actual: s,
            }),
            Some(_) => {}
        }
        if usize::try_from(expected.seq.len_bytes).ok() != Some(actual.payload.len()) {
            out.push(Mismatch::PayloadLen {
                expected_bytes: expected.seq.len_bytes,
                actual_bytes: actual.payload.len(),
            });
        }
        if let Some(a) = expected.ack {
            let got = self.seq.peer_script(actual.ack_number);
            if got != a {
                out.push(Mismatch::Ack {
                    expected: a,
                    actual: got,
                });
            }
        }
        if let Some(w) = expected.win
            && w != actual.window_len
        {
            out.push(Mismatch::Window {
                expected: w,
                actual: actual.window_len,
            });
        }
        if let Some(u) = expected.urg
            && u != actual.urgent_pointer
        {
            out.push(Mismatch::Urgent {
                expected: u,
                actual: actual.urgent_pointer,
            });
        }
        self.match_options(&expected.options, actual, &mut out);
        if out.is_empty() {
            Ok(())
        } else {
            Err(MatchError { mismatches: out })
        }
    }

    fn match_options(
        &mut self,
        spec: &TcpOptionsSpec,
        actual: &TcpRepr<'_>,
        out: &mut Vec<Mismatch>,
    ) {
        let list = match spec {
            TcpOptionsSpec::Any => return,
            TcpOptionsSpec::Absent => {
                if repr_has_options(actual) {
                    out.push(Mismatch::Options {
                        expected: "no options".into(),
                        actual: repr_options_text(actual, &self.seq),
                    });
                }
                return;
            }
            TcpOptionsSpec::List(list) => list,
        };
        let want = option_values(list);
        if want.fast_open {
            out.push(Mismatch::Unverifiable("FO (TCP Fast Open option)"));
        }
        let got_sack: Vec<(u32, u32)> = actual
            .sack_blocks
            .iter()
            .flatten()
            .map(|b| (self.seq.peer_script(b.left), self.seq.peer_script(b.right)))
            .collect();
        // TS val: learn the stack clock's offset first, then check it when asked to.
        // Presence and ecr; the val is checked separately below.
        let ts_ok = match (want.ts, actual.timestamp) {
            (None, None) => true,
            (Some((_, ecr)), Some(got)) => ecr == got.tsecr,
            _ => false,
        };
        if let (Some((val, _)), Some(got)) = (want.ts, actual.timestamp) {
            let offset = *self
                .ts_val_offset
                .get_or_insert(got.tsval.wrapping_sub(val));
            if let Some(tol) = self.ts_tolerance_ticks() {
                let got_script = got.tsval.wrapping_sub(offset);
                let off_by = (got_script.wrapping_sub(val) as i32).unsigned_abs();
                if off_by > tol {
                    out.push(Mismatch::TsVal {
                        expected: val,
                        actual: got_script,
                        tolerance_ticks: tol,
                    });
                }
            }
        }
        let same = want.mss == actual.max_seg_size
            && want.wscale == actual.window_scale
            && want.sack_permitted == actual.sack_permitted
            && want.sack == got_sack
            && ts_ok;
        if !same {
            out.push(Mismatch::Options {
                expected: spec.to_string(),
                actual: repr_options_text(actual, &self.seq),
            });
        }
    }
}

/// Why an inbound line cannot be turned into a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The line is not an inbound line.
    NotInbound,
    /// The payload slice does not have the line's length.
    PayloadLen {
        expected_bytes: u32,
        got_bytes: usize,
    },
    /// Inbound lines must say `win N` (there is no sensible default).
    MissingWindow,
    /// `ack` or SACK blocks refer to the stack's sequence space before its ISN is known.
    StackIsnUnknown,
    /// `<...>` makes no sense for a packet we must build.
    AnyOptions,
    /// More SACK blocks than a `TcpRepr` holds (4).
    TooManySackBlocks,
    /// An option `TcpRepr` cannot carry.
    Unrepresentable(&'static str),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NotInbound => f.write_str("line is not an inbound packet"),
            BuildError::PayloadLen {
                expected_bytes,
                got_bytes,
            } => write!(
                f,
                "line carries {expected_bytes} bytes, payload has {got_bytes}"
            ),
            BuildError::MissingWindow => f.write_str("inbound packet without win"),
            BuildError::StackIsnUnknown => {
                f.write_str("ack or SACK before the stack's ISN is known")
            }
            BuildError::AnyOptions => f.write_str("<...> on an inbound packet"),
            BuildError::TooManySackBlocks => f.write_str("more than 4 SACK blocks"),
            BuildError::Unrepresentable(what) => write!(f, "{what} cannot be built as a TcpRepr"),
        }
    }
}

impl std::error::Error for BuildError {}

impl MatchContext {
    /// Builds the segment an inbound line stands for, ready for the stack.
    ///
    /// `payload` must be `line.payload_len()` bytes (the executor chooses the content).
    /// The ack and SACK blocks are mapped into the stack's space, `seq` into the script
    /// side's, and a TS `ecr` through the learnt TS val offset (an `ecr` of 0 stays 0: it means
    /// "nothing to echo", RFC 7323 §3.2). `nop`/`eol` padding is not represented in `TcpRepr`.
    pub fn build_inbound<'a>(
        &self,
        line: &TcpLine,
        src_port: u16,
        dst_port: u16,
        payload: &'a [u8],
    ) -> Result<TcpRepr<'a>, BuildError> {
        if line.direction != Direction::Inbound {
            return Err(BuildError::NotInbound);
        }
        if usize::try_from(line.seq.len_bytes).ok() != Some(payload.len()) {
            return Err(BuildError::PayloadLen {
                expected_bytes: line.seq.len_bytes,
                got_bytes: payload.len(),
            });
        }
        let window_len = line.win.ok_or(BuildError::MissingWindow)?;
        let ack_number = match line.ack {
            Some(a) => self.seq.stack_live(a).ok_or(BuildError::StackIsnUnknown)?,
            None => SeqNumber(0),
        };
        let mut repr = TcpRepr {
            src_port,
            dst_port,
            seq_number: self.seq.peer_live(line.seq.start),
            ack_number,
            flags: line.flags,
            window_len,
            urgent_pointer: line.urg.unwrap_or(0),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            payload,
        };
        let list = match &line.options {
            TcpOptionsSpec::Absent => return Ok(repr),
            TcpOptionsSpec::Any => return Err(BuildError::AnyOptions),
            TcpOptionsSpec::List(list) => list,
        };
        let mut n_sack = 0;
        for o in list {
            match o {
                TcpOption::Nop | TcpOption::Eol => {}
                TcpOption::Mss(m) => repr.max_seg_size = Some(*m),
                TcpOption::WindowScale(w) => repr.window_scale = Some(*w),
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::Sack(blocks) => {
                    for &(l, r) in blocks {
                        let slot = repr
                            .sack_blocks
                            .get_mut(n_sack)
                            .ok_or(BuildError::TooManySackBlocks)?;
                        let left = self.seq.stack_live(l).ok_or(BuildError::StackIsnUnknown)?;
                        let right = self.seq.stack_live(r).ok_or(BuildError::StackIsnUnknown)?;
                        *slot = Some(SackBlock { left, right });
                        n_sack += 1;
                    }
                }
                TcpOption::Timestamp { val, ecr } => {
                    let tsecr = match (*ecr, self.ts_val_offset) {
                        (0, _) | (_, None) => *ecr,
                        (e, Some(off)) => e.wrapping_add(off),
                    };
                    repr.timestamp = Some(TcpTimestamp { tsval: *val, tsecr });
                }
                TcpOption::FastOpen(_) => {
                    return Err(BuildError::Unrepresentable("FO (TCP Fast Open option)"));
                }
            }
        }
        Ok(repr)
    }
}

/// Progress of a [`SuperSegment`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More segments are needed; `covered_bytes` of the line's payload matched so far.
    Partial {
        covered_bytes: u32,
        remaining_bytes: u32,
    },
    /// The whole line was matched.
    Complete,
}

/// Matches one expected outbound line against the back-to-back segments a stack without TSO
/// sends for it.
///
/// The corpus was recorded on Linux with TSO: `> P. 1:10001(10000) ack 1` stands for ten
/// 1000-byte segments on the wire. Rules for each actual piece, in order:
/// - its seq continues exactly where the previous piece ended (first piece: the line's start);
/// - it carries at least one byte, and no more than the line has left (a zero-length line is
///   matched by one zero-length segment);
/// - ack, win, urg and options are checked as for a whole line (the TS val with tolerance);
/// - flags: the last piece must have exactly the line's flags; an earlier piece must have the
///   line's flags without FIN (FIN only ends the last piece) and with or without PSH (PSH is
///   a delivery hint a sender may set on any segment, RFC 9293 §3.9.1.2).
#[derive(Debug, Clone)]
pub struct SuperSegment {
    expected: TcpLine,
    covered_bytes: u32,
}

impl SuperSegment {
    pub fn new(expected: &TcpLine) -> Self {
        SuperSegment {
            expected: expected.clone(),
            covered_bytes: 0,
        }
    }

    /// Payload bytes matched so far.
    pub fn covered_bytes(&self) -> u32 {
        self.covered_bytes
    }

    /// Matches the next actual segment; on error the accumulator is unchanged.
    pub fn push(
        &mut self,
        ctx: &mut MatchContext,
        actual: &TcpRepr<'_>,
    ) -> Result<Progress, MatchError> {
        let total = self.expected.seq.len_bytes;
        let remaining = total - self.covered_bytes.min(total);
        let got = u32::try_from(actual.payload.len()).unwrap_or(u32::MAX);
        let whole_line = self.covered_bytes == 0 && got == total;
        if whole_line {
            ctx.match_outbound(&self.expected, actual)?;
            self.covered_bytes = total;
            return Ok(Progress::Complete);
        }
        if got == 0 || got > remaining {
            return Err(MatchError {
                mismatches: vec![Mismatch::PayloadLen {
                    expected_bytes: remaining,
                    actual_bytes: actual.payload.len(),
                }],
            });
        }
        let last = got == remaining;
        let mut piece = self.expected.clone();
        piece.seq.start = self.expected.seq.start.wrapping_add(self.covered_bytes);
        piece.seq.len_bytes = got;
        piece.seq.end = piece.seq.start.wrapping_add(got);
        if !last {
            piece.flags = TcpFlags(piece.flags.0 & !TcpFlags::FIN.0);
            if actual.flags.contains(TcpFlags::PSH) {
                piece.flags |= TcpFlags::PSH;
            } else {
                piece.flags = TcpFlags(piece.flags.0 & !TcpFlags::PSH.0);
            }
        }
        ctx.match_outbound(&piece, actual)?;
        self.covered_bytes += got;
        Ok(if last {
            Progress::Complete
        } else {
            Progress::Partial {
                covered_bytes: self.covered_bytes,
                remaining_bytes: total - self.covered_bytes,
            }
        })
    }
}

/// A difference between the expected option layout and the raw option bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutError {
    /// The raw options end inside an option (RFC 9293 §3.2: length byte missing or too big).
    Truncated { offset: usize },
    /// Option number `index` has another kind or length than expected.
    Differs {
        index: usize,
        expected_kind: u8,
        expected_len: u8,
        actual_kind: u8,
        actual_len: u8,
    },
    /// The raw options hold a different number of options.
    Count { expected: usize, actual: usize },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Truncated { offset } => {
                write!(f, "options truncated at byte {offset}")
            }
            LayoutError::Differs {
                index,
                expected_kind,
                expected_len,
                actual_kind,
                actual_len,
            } => write!(
                f,
                "option #{index}: expected kind {expected_kind} len {expected_len}, \
                 got kind {actual_kind} len {actual_len}"
            ),
            LayoutError::Count { expected, actual } => {
                write!(f, "expected {expected} options, got {actual}")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

/// Kind and total length (kind + length bytes included; 1 for nop/eol) of a script option.
pub fn option_kind_len(o: &TcpOption) -> (u8, u8) {
    match o {
        TcpOption::Eol => (0, 1),
        TcpOption::Nop => (1, 1),
        TcpOption::Mss(_) => (2, 4),
        TcpOption::WindowScale(_) => (3, 3),
        TcpOption::SackPermitted => (4, 2),
        TcpOption::Sack(b) => (5, u8::try_from(2 + 8 * b.len()).unwrap_or(u8::MAX)),
        TcpOption::Timestamp { .. } => (8, 10),
        TcpOption::FastOpen(c) => (34, u8::try_from(2 + c.len()).unwrap_or(u8::MAX)),
    }
}

/// Checks the order, kinds and lengths of raw TCP option bytes against an expected list —
/// what a `TcpRepr` cannot show. Values are checked by [`MatchContext::match_outbound`].
/// Bytes after an `eol` are padding (RFC 9293 §3.2) and are not counted, except that a script
/// listing an explicit `eol` expects it.
pub fn check_option_layout(expected: &[TcpOption], raw: &[u8]) -> Result<(), LayoutError> {
    let mut actual: Vec<(u8, u8)> = Vec::new();
    let mut i = 0;
    while let Some(&kind) = raw.get(i) {
        match kind {
            0 => {
                actual.push((0, 1));
                break;
            }
            1 => {
                actual.push((1, 1));
                i += 1;
            }
            _ => {
                let len = *raw.get(i + 1).ok_or(LayoutError::Truncated { offset: i })?;
                if len < 2 || i + usize::from(len) > raw.len() {
                    return Err(LayoutError::Truncated { offset: i });
                }
                actual.push((kind, len));
                i += usize::from(len);
            }
        }
    }
    let wants_eol = expected.iter().any(|o| matches!(o, TcpOption::Eol));
    if !wants_eol && actual.last() == Some(&(0, 1)) {
        actual.pop();
    }
    for (index, (o, &(actual_kind, actual_len))) in expected.iter().zip(&actual).enumerate() {
        let (expected_kind, expected_len) = option_kind_len(o);
        if (expected_kind, expected_len) != (actual_kind, actual_len) {
            return Err(LayoutError::Differs {
                index,
                expected_kind,
                expected_len,
                actual_kind,
                actual_len,
            });
        }
    }
    if expected.len() != actual.len() {
        return Err(LayoutError::Count {
            expected: expected.len(),
            actual: actual.len(),
        });
    }
    Ok(())
}
