//! Script packet lines against live segments, independent of the stack.
//!
//! Sequence spaces (packetdrill's remapping, restated):
//! - numbers in an **inbound** line's `seq` are relative to the *script side's* ISN, which the
//!   executor chooses ([`SeqSpace::new`]); its `ack` and SACK blocks refer to the stack's space;
//! - numbers in an **outbound** line's `seq` are relative to the *stack's* ISN, learnt from the
//!   first outbound SYN ([`SeqSpace::learn_stack_isn`], done by [`MatchContext::match_outbound`]);
//! - as in packetdrill, the numbers of a SYN itself are absolute: a peer SYN written
//!   `< S 999000:999000(0)` sets the peer's ISN, and the peer's later numbers (and the ACKs of
//!   the stack's non-SYN segments) count from it ([`SeqSpace::learn_peer_isn`]); the ACK of the
//!   stack's SYN-ACK is written absolute (`ack 999001`); the number written in the stack's SYN
//!   stands for whatever ISN the stack chose;
//!   its `ack` and SACK blocks refer to the script side's space.
//!
//! Timestamps (RFC 7323 §3), as packetdrill's `run_packet.c` does them: the stack's TS val
//! clock has an arbitrary origin. The first outbound TS val fixes
//! `ts_val_offset = actual - script`; later outbound vals are mapped back to script space
//! through it and checked only when `--tcp_ts_tick_usecs` is given:
//! `|actual_script - expected| * tick_usecs <= tolerance_usecs`. Every matched outbound TS val
//! is also recorded as script value → live value (`ts_val_map`); an inbound ACK's `ecr` is
//! rewritten through that map, so it echoes a value the stack really sent. Inbound TS vals go
//! out as written, so outbound `ecr` values are compared literally.
//!
//! Fields a line leaves out: no `win` → window not checked; no `urg` → urgent pointer must be
//! 0 (packetdrill); no `ack` → ack field not checked (packetdrill compares it with 0, but
//! RFC 9293 §3.1 makes it meaningless without the ACK bit, and with the ACK bit the corpus
//! always writes `ack`).
//!
//! `wire::tcp::TcpRepr` keeps option *values*, not their order or padding: against a `TcpRepr`
//! the matcher checks MSS, window scale, SACK-permitted, SACK blocks and timestamps;
//! [`check_option_layout`] checks the exact wire order (nop, eol, kinds and lengths) when the
//! executor has the raw option bytes.

use crate::ast::{Direction, TcpLine, TcpOption, TcpOptionsSpec};
use crate::print::ScriptFlags;
use core::fmt;
use std::collections::BTreeMap;
use wire::tcp::{
    FastOpenOption, SackBlock, SeqNumber, TcpFlags, TcpOption as WireOption, TcpOptions, TcpRepr,
    TcpTimestamp,
};

/// Maps script-relative sequence numbers to live ones for one connection.
///
/// Invariant: `live = base + script` (mod 2^32) in each space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqSpace {
    /// Live value of script sequence number 0 on the script (remote peer) side, for every
    /// packet but a SYN: the SYN's own number once one was sent ([`SeqSpace::learn_peer_isn`]).
    pub peer_base: SeqNumber,
    /// Live value of script sequence number 0 in a SYN's sequence field: a SYN's number is
    /// absolute in packetdrill, later numbers are relative to it.
    pub peer_syn_base: SeqNumber,
    /// Live value of script sequence number 0 on the stack side; `None` until the stack's
    /// first SYN was matched.
    pub stack_base: Option<SeqNumber>,
}

impl SeqSpace {
    /// A connection whose script-side numbers start at `peer_base` on the wire.
    pub fn new(peer_base: SeqNumber) -> Self {
        SeqSpace {
            peer_base,
            peer_syn_base: peer_base,
            stack_base: None,
        }
    }

    /// Records the peer's ISN from the SYN the script numbered `script_seq`: as in
    /// packetdrill, later non-SYN peer numbers (sequence, SACK blocks, the stack's ACKs) count
    /// from it, so `< S 1000:1000(0)` then `< . 1:1(0)` sends sequence number ISN + 1.
    pub fn learn_peer_isn(&mut self, script_seq: u32) {
        self.peer_base = self.peer_syn_base + script_seq;
    }

    /// Script number of a live peer-side number carried by a segment with the given flags
    /// (the ACK of a SYN-ACK is absolute, like the SYN it answers).
    pub fn peer_script_in(&self, live: SeqNumber, flags: TcpFlags) -> u32 {
        if flags.contains(TcpFlags::SYN) {
            live.0.wrapping_sub(self.peer_syn_base.0)
        } else {
            self.peer_script(live)
        }
    }

    /// Live number of a peer sequence number written in a line with the given flags.
    pub fn peer_live_in(&self, script: u32, flags: TcpFlags) -> SeqNumber {
        if flags.contains(TcpFlags::SYN) {
            self.peer_syn_base + script
        } else {
            self.peer_base + script
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchContext {
    pub seq: SeqSpace,
    /// `actual TS val - script TS val` of the stack's clock, learnt from the first outbound
    /// segment carrying a timestamp (when the script gives one).
    pub ts_val_offset: Option<u32>,
    /// Script TS val → the live TS val last seen for it on a matched outbound segment.
    pub ts_val_map: BTreeMap<u32, u32>,
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
            ts_val_map: BTreeMap::new(),
            ts_tick_usecs: None,
            tolerance_usecs: crate::ast::DEFAULT_TOLERANCE_USECS,
        }
    }

    /// Allowed TS val deviation in whole ticks (`tolerance_usecs / tick_usecs`), when TS vals
    /// are checked.
    pub fn ts_tolerance_ticks(&self) -> Option<u32> {
        self.ts_tick_usecs.map(|tick| {
            let ticks = self.tolerance_usecs / tick.max(1);
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
    /// A piece of a super-segment is not cut at the MSS ([`SuperSegment::with_mss`]).
    PieceSize {
        mss_bytes: u32,
        actual_bytes: u32,
    },
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
            Mismatch::PieceSize {
                mss_bytes,
                actual_bytes,
            } => write!(
                f,
                "expected a segment of {mss_bytes} bytes (MSS, the last one at most that) \
                 got {actual_bytes}"
            ),
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
    if let Some(fo) = &repr.fast_open {
        let cookie: String = fo.cookie().iter().map(|b| format!("{b:02x}")).collect();
        let kind = if fo.experimental { "FOEXP" } else { "FO" };
        parts.push(if cookie.is_empty() {
            kind.to_string()
        } else {
            format!("{kind} {cookie}")
        });
    }
    format!("<{}>", parts.join(","))
}

fn repr_has_options(repr: &TcpRepr<'_>) -> bool {
    repr.max_seg_size.is_some()
        || repr.window_scale.is_some()
        || repr.sack_permitted
        || repr.sack_blocks.iter().any(Option::is_some)
        || repr.timestamp.is_some()
        || repr.fast_open.is_some()
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
    /// The Fast Open option: experimental form, cookie. A named cookie the executor did not
    /// resolve matches nothing.
    fast_open: Option<(bool, Vec<u8>)>,
    unresolved_cookie: bool,
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
            TcpOption::FastOpen(c) => v.fast_open = Some((false, c.clone())),
            TcpOption::FastOpenExp(c) => v.fast_open = Some((true, c.clone())),
            TcpOption::FastOpenNamed { .. } => v.unresolved_cookie = true,
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
        // As in packetdrill, the number a script writes in the stack's SYN stands for the
        // stack's ISN, whatever it is (`> S. 1234:1234(0)`); later numbers count from it.
        let syn = expected.flags.contains(TcpFlags::SYN) && actual.flags.contains(TcpFlags::SYN);
        if syn {
            self.seq.learn_stack_isn(0, actual.seq_number);
        }
        match self.seq.stack_script(actual.seq_number) {
            _ if syn => {}
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
            let got = self.seq.peer_script_in(actual.ack_number, expected.flags);
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
        let urg = expected.urg.unwrap_or(0);
        if urg != actual.urgent_pointer {
            out.push(Mismatch::Urgent {
                expected: urg,
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
        if want.unresolved_cookie {
            out.push(Mismatch::Unverifiable(
                "FO with a cookie name the executor did not define",
            ));
        }
        let got_fo = actual
            .fast_open
            .as_ref()
            .map(|fo| (fo.experimental, fo.cookie().to_vec()));
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
            self.ts_val_map.insert(val, got.tsval);
            let offset = *self
                .ts_val_offset
                .get_or_insert(got.tsval.wrapping_sub(val));
            if let (Some(tick), Some(tol)) = (self.ts_tick_usecs, self.ts_tolerance_ticks()) {
                let got_script = got.tsval.wrapping_sub(offset);
                let off_by = (got_script.wrapping_sub(val) as i32).unsigned_abs();
                if u64::from(off_by).saturating_mul(tick) > self.tolerance_usecs {
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
            && want.fast_open == got_fo
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
    /// An ACK's TS `ecr` names a script TS val no matched outbound segment carried.
    NoTsValMapping { script_ecr: u32 },
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
            BuildError::NoTsValMapping { script_ecr } => {
                write!(f, "TS ecr {script_ecr} echoes no TS val the stack has sent")
            }
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
    /// side's, and, on a segment with the ACK bit, the TS `ecr` through `ts_val_map` (without
    /// the ACK bit the `ecr` is sent as written; RFC 7323 §3.2 makes it meaningless there).
    /// `nop`/`eol` padding is not represented in `TcpRepr`.
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
            seq_number: self.seq.peer_live_in(line.seq.start, line.flags),
            ack_number,
            flags: line.flags,
            window_len,
            urgent_pointer: line.urg.unwrap_or(0),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            fast_open: None,
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
                    let tsecr = if line.flags.contains(TcpFlags::ACK) {
                        *self
                            .ts_val_map
                            .get(ecr)
                            .ok_or(BuildError::NoTsValMapping { script_ecr: *ecr })?
                    } else {
                        *ecr
                    };
                    repr.timestamp = Some(TcpTimestamp { tsval: *val, tsecr });
                }
                TcpOption::FastOpen(c) | TcpOption::FastOpenExp(c) => {
                    let exp = matches!(o, TcpOption::FastOpenExp(_));
                    repr.fast_open = Some(FastOpenOption::with_cookie(c, exp).ok_or(
                        BuildError::Unrepresentable(
                            "FO cookie of a length RFC 7413 does not allow (0, or 4 to 16 even)",
                        ),
                    )?);
                }
                TcpOption::FastOpenNamed { .. } => {
                    return Err(BuildError::Unrepresentable(
                        "FO with a cookie name the executor did not define",
                    ));
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
/// - with [`SuperSegment::with_mss`], every piece but the last carries exactly the MSS and
///   the last at most the MSS (what TSO would have cut);
/// - ack, win, urg and options are checked as for a whole line (the TS val with tolerance);
/// - flags: the last piece must have exactly the line's flags; an earlier piece must have the
///   line's flags without FIN (FIN only ends the last piece) and with or without PSH (PSH is
///   a delivery hint a sender may set on any segment, RFC 9293 §3.9.1.2). With
///   [`SuperSegment::ignore_psh`] PSH is not checked on any piece.
#[derive(Debug, Clone)]
pub struct SuperSegment {
    expected: TcpLine,
    /// Invariant: `covered_bytes <= expected.seq.len_bytes`.
    covered_bytes: u32,
    mss_bytes: Option<u32>,
    ignore_psh: bool,
    complete: bool,
}

impl SuperSegment {
    pub fn new(expected: &TcpLine) -> Self {
        SuperSegment {
            expected: expected.clone(),
            covered_bytes: 0,
            mss_bytes: None,
            ignore_psh: false,
            complete: false,
        }
    }

    /// Also require TSO-like cutting: pieces of exactly `mss_bytes`, the last one at most that.
    pub fn with_mss(mut self, mss_bytes: u32) -> Self {
        self.mss_bytes = Some(mss_bytes);
        self
    }

    /// Do not check PSH at all (for stacks that set PSH by another policy than Linux's).
    pub fn ignore_psh(mut self) -> Self {
        self.ignore_psh = true;
        self
    }

    /// Payload bytes matched so far.
    pub fn covered_bytes(&self) -> u32 {
        self.covered_bytes
    }

    /// True once the whole line was matched.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Matches the next actual segment; on error the accumulator is unchanged.
    pub fn push(
        &mut self,
        ctx: &mut MatchContext,
        actual: &TcpRepr<'_>,
    ) -> Result<Progress, MatchError> {
        let fail = |m: Mismatch| {
            Err(MatchError {
                mismatches: vec![m],
            })
        };
        let total = self.expected.seq.len_bytes;
        let remaining = total - self.covered_bytes;
        let got = u32::try_from(actual.payload.len()).unwrap_or(u32::MAX);
        if self.complete || (got == 0 && total != 0) || got > remaining {
            return fail(Mismatch::PayloadLen {
                expected_bytes: if self.complete { 0 } else { remaining },
                actual_bytes: actual.payload.len(),
            });
        }
        let last = got == remaining;
        if let Some(mss) = self.mss_bytes
            && (got > mss || (!last && got != mss))
        {
            return fail(Mismatch::PieceSize {
                mss_bytes: mss,
                actual_bytes: got,
            });
        }
        let mut piece = self.expected.clone();
        piece.seq.start = self.expected.seq.start.wrapping_add(self.covered_bytes);
        piece.seq.len_bytes = got;
        piece.seq.end = piece.seq.start.wrapping_add(got);
        if !last {
            piece.flags = TcpFlags(piece.flags.0 & !TcpFlags::FIN.0);
        }
        if !last || self.ignore_psh {
            if actual.flags.contains(TcpFlags::PSH) {
                piece.flags |= TcpFlags::PSH;
            } else {
                piece.flags = TcpFlags(piece.flags.0 & !TcpFlags::PSH.0);
            }
        }
        ctx.match_outbound(&piece, actual)?;
        self.covered_bytes += got;
        Ok(if last {
            self.complete = true;
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
    /// Option number `index` of the raw options is malformed (bad length for its kind, or it
    /// overruns the options area; RFC 9293 §3.2), as `wire::tcp::TcpOptions` reports.
    Malformed { index: usize },
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
            LayoutError::Malformed { index } => write!(f, "option #{index} is malformed"),
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
        TcpOption::FastOpenExp(c) => (254, u8::try_from(4 + c.len()).unwrap_or(u8::MAX)),
        // Resolved by the executor before any check; Linux's cookies are 8 bytes.
        TcpOption::FastOpenNamed { experimental, .. } => {
            if *experimental {
                (254, 12)
            } else {
                (34, 10)
            }
        }
    }
}

/// Kind and total length of an option `wire` parsed.
fn wire_kind_len(o: &WireOption<'_>) -> (u8, u8) {
    match o {
        WireOption::EndOfList => (0, 1),
        WireOption::NoOperation => (1, 1),
        WireOption::MaxSegmentSize(_) => (2, 4),
        WireOption::WindowScale(_) => (3, 3),
        WireOption::SackPermitted => (4, 2),
        WireOption::SackRange(blocks) => {
            let n = blocks.iter().flatten().count();
            (5, u8::try_from(2 + 8 * n).unwrap_or(u8::MAX))
        }
        WireOption::Timestamp(_) => (8, 10),
        WireOption::Unknown { kind, data } => {
            (*kind, u8::try_from(2 + data.len()).unwrap_or(u8::MAX))
        }
    }
}

/// Checks the order, kinds and lengths of a segment's raw options area
/// (`wire::tcp::TcpPacket::options()`) against an expected list — what a `TcpRepr` cannot
/// show. Values are checked by [`MatchContext::match_outbound`]. Parsing is `wire`'s
/// (`TcpOptions`); bytes after an `eol` are padding (RFC 9293 §3.2) and are not counted, and the
/// `eol` itself only when the script lists one.
pub fn check_option_layout(expected: &[TcpOption], raw: &[u8]) -> Result<(), LayoutError> {
    let mut actual: Vec<(u8, u8)> = Vec::new();
    for (index, o) in TcpOptions::new(raw).enumerate() {
        let o = o.map_err(|_| LayoutError::Malformed { index })?;
        actual.push(wire_kind_len(&o));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Action;
    use crate::parse::parse_event;

    const PEER: u32 = 0x8000_0000;
    const STACK: u32 = 0xffff_fff0; // close to wrapping on purpose

    fn line(src: &str) -> TcpLine {
        match parse_event(&format!("+0 {src}")).expect("parses").action {
            Action::Tcp(t) => t,
            other => panic!("not TCP: {other:?}"),
        }
    }

    fn seg(flags: TcpFlags, seq: u32, ack: u32, payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            src_port: 8080,
            dst_port: 40000,
            seq_number: SeqNumber(seq),
            ack_number: SeqNumber(ack),
            flags,
            window_len: 502,
            urgent_pointer: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamp: None,
            fast_open: None,
            payload,
        }
    }

    const SA: TcpFlags = TcpFlags(TcpFlags::SYN.0 | TcpFlags::ACK.0);
    const PA: TcpFlags = TcpFlags(TcpFlags::PSH.0 | TcpFlags::ACK.0);

    /// A context where the stack's SYN-ACK (ISN `STACK`) has already been matched.
    fn established() -> MatchContext {
        let mut ctx = MatchContext::new(SeqNumber(PEER));
        let syn_ack = line("> S. 0:0(0) ack 1 <...>");
        ctx.match_outbound(&syn_ack, &seg(SA, STACK, PEER + 1, &[]))
            .expect("SYN-ACK matches");
        ctx
    }

    fn err_text(r: Result<(), MatchError>) -> String {
        r.expect_err("must mismatch").to_string()
    }

    #[test]
    fn outbound_syn_teaches_stack_isn_and_ts_offset() {
        let mut ctx = MatchContext::new(SeqNumber(PEER));
        let want = line("> S 0:0(0) <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 8>");
        let mut got = seg(TcpFlags::SYN, 1_000_000, 0, &[]);
        got.max_seg_size = Some(1460);
        got.sack_permitted = true;
        got.timestamp = Some(TcpTimestamp {
            tsval: 5555,
            tsecr: 0,
        });
        got.window_scale = Some(8);
        assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
        assert_eq!(ctx.seq.stack_base, Some(SeqNumber(1_000_000)));
        assert_eq!(ctx.ts_val_offset, Some(5455));
        assert_eq!(ctx.seq.stack_live(1), Some(SeqNumber(1_000_001)));
    }

    #[test]
    fn wrong_flags_say_expected_and_got() {
        let mut ctx = MatchContext::new(SeqNumber(PEER));
        let want = line("> S. 0:0(0) ack 1 <...>");
        let got = seg(TcpFlags::SYN, STACK, PEER + 1, &[]);
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "expected flags S. got S"
        );
    }

    #[test]
    fn wrong_window_says_both_values() {
        let mut ctx = established();
        let want = line("> . 1:1(0) ack 1 win 65535");
        let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
        got.window_len = 29200;
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "expected win 65535 got 29200"
        );
    }

    #[test]
    fn option_mismatch_prints_both_option_lists() {
        let mut ctx = MatchContext::new(SeqNumber(PEER));
        let want = line("> S 0:0(0) <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 8>");
        let mut got = seg(TcpFlags::SYN, 7, 0, &[]);
        got.max_seg_size = Some(1460);
        got.timestamp = Some(TcpTimestamp {
            tsval: 100,
            tsecr: 0,
        });
        got.window_scale = Some(7);
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "option mismatch: expected <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 8>, \
             got <mss 1460,TS val 100 ecr 0,wscale 7>"
        );
    }

    #[test]
    fn seq_and_ack_mismatches_are_reported_script_relative_and_together() {
        let mut ctx = established();
        let want = line("> P. 1:1001(1000) ack 1");
        let data = [0u8; 460];
        let got = seg(PA, STACK.wrapping_add(1001), PEER + 5, &data);
        let e = ctx.match_outbound(&want, &got).expect_err("mismatch");
        assert_eq!(e.mismatches.len(), 3);
        assert_eq!(
            e.to_string(),
            "expected seq 1 got 1001; expected payload length 1000 got 460; expected ack 1 got 5"
        );
    }

    #[test]
    fn data_segment_across_sequence_wrap_matches() {
        let mut ctx = established();
        let want = line("> P. 1:1001(1000) ack 1");
        let data = [0u8; 1000];
        // STACK + 1 wraps past 2^32 within this segment.
        let got = seg(PA, STACK.wrapping_add(1), PEER + 1, &data);
        assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
    }

    #[test]
    fn outbound_data_before_any_syn_reports_unknown_isn() {
        let mut ctx = MatchContext::new(SeqNumber(PEER));
        let want = line("> . 1:1(0) ack 1");
        let got = seg(TcpFlags::ACK, 5, PEER + 1, &[]);
        assert_eq!(
            ctx.match_outbound(&want, &got).map_err(|e| e.mismatches),
            Err(vec![Mismatch::StackIsnUnknown])
        );
    }

    #[test]
    fn inbound_line_is_not_an_outbound_expectation() {
        let mut ctx = established();
        let want = line("< . 1:1(0) ack 1 win 257");
        let got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "line is not an outbound packet"
        );
    }

    #[test]
    fn absent_options_reject_a_segment_carrying_timestamps() {
        let mut ctx = established();
        let want = line("> . 1:1(0) ack 1");
        let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
        got.timestamp = Some(TcpTimestamp { tsval: 1, tsecr: 2 });
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "option mismatch: expected no options, got <TS val 1 ecr 2>"
        );
        let any = line("> . 1:1(0) ack 1 <...>");
        assert_eq!(ctx.match_outbound(&any, &got), Ok(()));
    }

    #[test]
    fn ts_val_is_checked_in_ticks_only_when_asked() {
        // ts_recent/fin_tsval.pkt: --tcp_ts_tick_usecs=1000 --tolerance_usecs=7000.
        let mut ctx = MatchContext::new(SeqNumber(PEER));
        ctx.ts_tick_usecs = Some(1000);
        ctx.tolerance_usecs = 7000;
        assert_eq!(ctx.ts_tolerance_ticks(), Some(7));
        let syn_ack = line("> S. 0:0(0) ack 1 <mss 1460,sackOK,TS val 100 ecr 100>");
        let mut got = seg(SA, STACK, PEER + 1, &[]);
        got.max_seg_size = Some(1460);
        got.sack_permitted = true;
        got.timestamp = Some(TcpTimestamp {
            tsval: 9100,
            tsecr: 100,
        });
        assert_eq!(ctx.match_outbound(&syn_ack, &got), Ok(()));
        assert_eq!(ctx.ts_val_offset, Some(9000));

        let fin = line("> F. 1:1(0) ack 1 <nop,nop,TS val 1200 ecr 200>");
        let ts = |tsval| {
            let mut s = seg(
                TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0),
                STACK + 1,
                PEER + 1,
                &[],
            );
            s.timestamp = Some(TcpTimestamp { tsval, tsecr: 200 });
            s
        };
        assert_eq!(ctx.match_outbound(&fin, &ts(10_207)), Ok(()));
        assert_eq!(ctx.match_outbound(&fin, &ts(10_193)), Ok(()));
        assert_eq!(
            err_text(ctx.match_outbound(&fin, &ts(10_208))),
            "expected TS val 1200 (±7 ticks) got 1208"
        );
        // Without --tcp_ts_tick_usecs the value is not checked.
        ctx.ts_tick_usecs = None;
        assert_eq!(ctx.match_outbound(&fin, &ts(99_999)), Ok(()));
    }

    #[test]
    fn ts_ecr_is_compared_literally() {
        let mut ctx = established();
        let want = line("> . 1:1(0) ack 1001 <nop,nop,TS val 200 ecr 201>");
        let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1001, &[]);
        got.timestamp = Some(TcpTimestamp {
            tsval: 200,
            tsecr: 200,
        });
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "option mismatch: expected <nop,nop,TS val 200 ecr 201>, got <TS val 200 ecr 200>"
        );
    }

    #[test]
    fn outbound_sack_blocks_are_in_the_peer_space() {
        let mut ctx = established();
        let want = line("> . 1:1(0) ack 1 <nop,nop,sack 1001:2001>");
        let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
        got.sack_blocks[0] = Some(SackBlock {
            left: SeqNumber(PEER + 1001),
            right: SeqNumber(PEER + 2001),
        });
        assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
        got.sack_blocks[0] = Some(SackBlock {
            left: SeqNumber(PEER + 1001),
            right: SeqNumber(PEER + 3001),
        });
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "option mismatch: expected <nop,nop,sack 1001:2001>, got <sack 1001:3001>"
        );
    }

    #[test]
    fn fast_open_option_is_compared_by_form_and_cookie() {
        let mut ctx = MatchContext::new(SeqNumber(PEER));
        let want = line("> S 0:0(0) <mss 1460,FO,nop,nop>");
        let mut got = seg(TcpFlags::SYN, 1, 0, &[]);
        got.max_seg_size = Some(1460);
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "option mismatch: expected <mss 1460,FO,nop,nop>, got <mss 1460>"
        );
        got.fast_open = Some(FastOpenOption::request(false));
        assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
        // The experimental form is not the same option.
        got.fast_open = Some(FastOpenOption::request(true));
        assert!(ctx.match_outbound(&want, &got).is_err());
        let want = line("> S. 0:0(0) <mss 1460,FOEXP 0011223344556677>");
        let mut got = seg(TcpFlags::SYN | TcpFlags::ACK, 1, 1, &[]);
        got.max_seg_size = Some(1460);
        got.fast_open =
            FastOpenOption::with_cookie(&[0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77], true);
        assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
        got.fast_open =
            FastOpenOption::with_cookie(&[0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x78], true);
        assert!(ctx.match_outbound(&want, &got).is_err());
        // A cookie name the executor did not resolve never matches.
        let want = line("> S. 0:0(0) <mss 1460,FOEXP TFO_COOKIE>");
        assert!(ctx.match_outbound(&want, &got).is_err());
    }

    #[test]
    fn inbound_syn_builds_a_repr_in_the_peer_space() {
        let ctx = MatchContext::new(SeqNumber(PEER));
        let l = line("< S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>");
        let r = ctx.build_inbound(&l, 40000, 8080, &[]).expect("builds");
        assert_eq!(r.seq_number, SeqNumber(PEER));
        assert_eq!(r.flags, TcpFlags::SYN);
        assert_eq!(r.window_len, 32792);
        assert_eq!(r.max_seg_size, Some(1000));
        assert_eq!(r.window_scale, Some(7));
        assert!(r.sack_permitted);
        assert_eq!((r.src_port, r.dst_port), (40000, 8080));
    }

    #[test]
    fn inbound_ack_sack_and_ecr_map_into_the_stack_space() {
        let mut ctx = established();
        ctx.ts_val_map.insert(100, 9100);
        let l =
            line("< . 1:1001(1000) ack 4001 win 320 <sack 5001:7001,nop,nop,TS val 201 ecr 100>");
        let payload = [7u8; 1000];
        let r = ctx.build_inbound(&l, 1, 2, &payload).expect("builds");
        assert_eq!(r.seq_number, SeqNumber(PEER + 1));
        assert_eq!(r.ack_number, SeqNumber(STACK.wrapping_add(4001)));
        assert_eq!(
            r.sack_blocks[0],
            Some(SackBlock {
                left: SeqNumber(STACK.wrapping_add(5001)),
                right: SeqNumber(STACK.wrapping_add(7001)),
            })
        );
        assert_eq!(r.sack_blocks[1], None);
        assert_eq!(
            r.timestamp,
            Some(TcpTimestamp {
                tsval: 201,
                tsecr: 9100
            })
        );
        assert_eq!(r.payload.len(), 1000);
    }

    #[test]
    fn inbound_lines_that_cannot_be_built_yield_typed_errors() {
        let fresh = MatchContext::new(SeqNumber(PEER));
        let ctx = established();
        let cases: [(&MatchContext, &str, usize, BuildError); 7] = [
            (&ctx, "> . 1:1(0) ack 1", 0, BuildError::NotInbound),
            (
                &ctx,
                "< P. 1:11(10) ack 1 win 1",
                3,
                BuildError::PayloadLen {
                    expected_bytes: 10,
                    got_bytes: 3,
                },
            ),
            (&ctx, "< . 1:1(0) ack 1", 0, BuildError::MissingWindow),
            (
                &fresh,
                "< . 1:1(0) ack 1 win 1",
                0,
                BuildError::StackIsnUnknown,
            ),
            (
                &ctx,
                "< . 1:1(0) ack 1 win 1 <...>",
                0,
                BuildError::AnyOptions,
            ),
            (
                &ctx,
                "< . 1:1(0) ack 1 win 1 <sack 1:2 3:4 5:6 7:8 9:10>",
                0,
                BuildError::TooManySackBlocks,
            ),
            (
                &ctx,
                "< S. 0:0(0) ack 1 win 1 <FO abcd12>",
                0,
                BuildError::Unrepresentable(
                    "FO cookie of a length RFC 7413 does not allow (0, or 4 to 16 even)",
                ),
            ),
        ];
        for (c, src, len, want) in cases {
            let payload = vec![0u8; len];
            assert_eq!(
                c.build_inbound(&line(src), 1, 2, &payload),
                Err(want),
                "{src}"
            );
        }
    }

    #[test]
    fn inbound_ecr_must_echo_a_ts_val_the_stack_sent() {
        let mut ctx = established();
        let ack = line("< . 1:1(0) ack 1 win 257 <nop,nop,TS val 200 ecr 100>");
        assert_eq!(
            ctx.build_inbound(&ack, 1, 2, &[]),
            Err(BuildError::NoTsValMapping { script_ecr: 100 })
        );
        assert_eq!(
            BuildError::NoTsValMapping { script_ecr: 100 }.to_string(),
            "TS ecr 100 echoes no TS val the stack has sent"
        );
        ctx.ts_val_map.insert(100, 0xdead_beef);
        let r = ctx.build_inbound(&ack, 1, 2, &[]).expect("builds");
        assert_eq!(r.timestamp.map(|t| t.tsecr), Some(0xdead_beef));
        // Without the ACK bit the ecr goes out as written (here a SYN's 0).
        let syn = line("< S 0:0(0) win 20000 <mss 1000,sackOK,TS val 100 ecr 0>");
        let r = ctx.build_inbound(&syn, 1, 2, &[]).expect("builds");
        assert_eq!(
            r.timestamp,
            Some(TcpTimestamp {
                tsval: 100,
                tsecr: 0
            })
        );
    }

    #[test]
    fn matched_outbound_ts_vals_are_recorded_for_later_echoes() {
        let mut ctx = established();
        let want = line("> . 1:1(0) ack 1 <nop,nop,TS val 200 ecr 7>");
        let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
        got.timestamp = Some(TcpTimestamp {
            tsval: 5_000_200,
            tsecr: 7,
        });
        assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
        assert_eq!(ctx.ts_val_map.get(&200), Some(&5_000_200));
    }

    #[test]
    fn urgent_pointer_must_be_zero_when_the_line_omits_urg() {
        let mut ctx = established();
        let want = line("> . 1:1(0) ack 1");
        let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
        got.urgent_pointer = 3;
        assert_eq!(
            err_text(ctx.match_outbound(&want, &got)),
            "expected urg 0 got 3"
        );
    }

    #[test]
    fn super_segment_is_matched_by_mss_sized_pieces() {
        let mut ctx = established();
        let want = line("> P. 1:10001(10000) ack 1");
        let mut acc = SuperSegment::new(&want);
        let data = [0u8; 1000];
        for i in 0..10u32 {
            let flags = if i == 9 { PA } else { TcpFlags::ACK };
            let got = seg(flags, STACK.wrapping_add(1 + 1000 * i), PEER + 1, &data);
            let p = acc.push(&mut ctx, &got).expect("piece matches");
            if i == 9 {
                assert_eq!(p, Progress::Complete);
            } else {
                assert_eq!(
                    p,
                    Progress::Partial {
                        covered_bytes: 1000 * (i + 1),
                        remaining_bytes: 1000 * (9 - i),
                    }
                );
            }
        }
        assert_eq!(acc.covered_bytes(), 10_000);
    }

    #[test]
    fn super_segment_accepts_one_whole_segment() {
        let mut ctx = established();
        let want = line("> P. 1:2001(2000) ack 1");
        let data = [0u8; 2000];
        let mut acc = SuperSegment::new(&want);
        let got = seg(PA, STACK.wrapping_add(1), PEER + 1, &data);
        assert_eq!(acc.push(&mut ctx, &got), Ok(Progress::Complete));
    }

    #[test]
    fn super_segment_rejects_a_gap_and_keeps_its_place() {
        let mut ctx = established();
        let want = line("> P. 1:3001(3000) ack 1");
        let mut acc = SuperSegment::new(&want);
        let data = [0u8; 1000];
        acc.push(
            &mut ctx,
            &seg(TcpFlags::ACK, STACK.wrapping_add(1), PEER + 1, &data),
        )
        .expect("first piece");
        let skipped = seg(TcpFlags::ACK, STACK.wrapping_add(2001), PEER + 1, &data);
        assert_eq!(
            acc.push(&mut ctx, &skipped).expect_err("gap").to_string(),
            "expected seq 1001 got 2001"
        );
        assert_eq!(acc.covered_bytes(), 1000);
    }

    #[test]
    fn super_segment_rejects_overrun_and_early_fin_and_missing_final_push() {
        let mut ctx = established();
        let want = line("> FP. 13001:20001(7000) ack 1");
        let fin_ack = TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0);
        let big = [0u8; 8000];
        let mut acc = SuperSegment::new(&want);
        assert_eq!(
            acc.push(
                &mut ctx,
                &seg(PA, STACK.wrapping_add(13001), PEER + 1, &big)
            )
            .expect_err("overrun")
            .to_string(),
            "expected payload length 7000 got 8000"
        );
        let piece = [0u8; 1000];
        assert_eq!(
            acc.push(
                &mut ctx,
                &seg(fin_ack, STACK.wrapping_add(13001), PEER + 1, &piece)
            )
            .expect_err("FIN before the end")
            .to_string(),
            "expected flags . got F."
        );
        let rest = [0u8; 6000];
        acc.push(
            &mut ctx,
            &seg(TcpFlags::ACK, STACK.wrapping_add(13001), PEER + 1, &piece),
        )
        .expect("first piece");
        assert_eq!(
            acc.push(
                &mut ctx,
                &seg(fin_ack, STACK.wrapping_add(14001), PEER + 1, &rest)
            )
            .expect_err("last piece lacks PSH")
            .to_string(),
            "expected flags FP. got F."
        );
        let last = seg(
            TcpFlags(fin_ack.0 | TcpFlags::PSH.0),
            STACK.wrapping_add(14001),
            PEER + 1,
            &rest,
        );
        assert_eq!(acc.push(&mut ctx, &last), Ok(Progress::Complete));
    }

    #[test]
    fn super_segment_with_mss_rejects_sub_mss_pieces_before_the_last() {
        let mut ctx = established();
        let want = line("> P. 1:2501(2500) ack 1");
        let mut acc = SuperSegment::new(&want).with_mss(1000);
        let small = [0u8; 500];
        assert_eq!(
            acc.push(
                &mut ctx,
                &seg(TcpFlags::ACK, STACK.wrapping_add(1), PEER + 1, &small)
            )
            .expect_err("sub-MSS first piece")
            .to_string(),
            "expected a segment of 1000 bytes (MSS, the last one at most that) got 500"
        );
        let full = [0u8; 1000];
        for i in 0..2u32 {
            let got = seg(
                TcpFlags::ACK,
                STACK.wrapping_add(1 + 1000 * i),
                PEER + 1,
                &full,
            );
            acc.push(&mut ctx, &got).expect("MSS piece");
        }
        let got = seg(PA, STACK.wrapping_add(2001), PEER + 1, &small);
        assert_eq!(acc.push(&mut ctx, &got), Ok(Progress::Complete));
        assert!(acc.is_complete());
        // Nothing more belongs to a complete line.
        assert!(acc.push(&mut ctx, &got).is_err());
    }

    #[test]
    fn super_segment_can_ignore_psh_policy() {
        let mut ctx = established();
        let want = line("> . 1:2001(2000) ack 1");
        let data = [0u8; 1000];
        let first = seg(TcpFlags::ACK, STACK.wrapping_add(1), PEER + 1, &data);
        let last_with_psh = seg(PA, STACK.wrapping_add(1001), PEER + 1, &data);
        let mut strict = SuperSegment::new(&want);
        strict.push(&mut ctx, &first).expect("first piece");
        assert_eq!(
            strict
                .push(&mut ctx, &last_with_psh)
                .expect_err("PSH on the last piece")
                .to_string(),
            "expected flags . got P."
        );
        let mut lenient = SuperSegment::new(&want).ignore_psh();
        lenient.push(&mut ctx, &first).expect("first piece");
        assert_eq!(
            lenient.push(&mut ctx, &last_with_psh),
            Ok(Progress::Complete)
        );
    }

    #[test]
    fn zero_length_line_is_matched_by_one_empty_segment() {
        let mut ctx = established();
        let want = line("> F. 1:1(0) ack 1");
        let mut acc = SuperSegment::new(&want);
        let fin = seg(
            TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0),
            STACK.wrapping_add(1),
            PEER + 1,
            &[],
        );
        assert_eq!(acc.push(&mut ctx, &fin), Ok(Progress::Complete));
    }

    #[test]
    fn option_layout_checks_order_padding_and_lengths() {
        let want = [
            TcpOption::Mss(1460),
            TcpOption::Nop,
            TcpOption::Nop,
            TcpOption::SackPermitted,
            TcpOption::Nop,
            TcpOption::WindowScale(8),
        ];
        let raw = [2, 4, 5, 180, 1, 1, 4, 2, 1, 3, 3, 8];
        assert_eq!(check_option_layout(&want, &raw), Ok(()));
        // Linux's other order: sackOK first, nops elsewhere.
        let other = [2, 4, 5, 180, 4, 2, 1, 1, 1, 3, 3, 8];
        assert_eq!(
            check_option_layout(&want, &other).map_err(|e| e.to_string()),
            Err("option #1: expected kind 1 len 1, got kind 4 len 2".to_string())
        );
        // Trailing eol padding is fine unless the script lists fewer options.
        let padded = [2, 4, 5, 180, 1, 1, 4, 2, 1, 3, 3, 8, 0, 0, 0, 0];
        assert_eq!(check_option_layout(&want, &padded), Ok(()));
        assert_eq!(
            check_option_layout(&want[..2], &raw),
            Err(LayoutError::Count {
                expected: 2,
                actual: 6
            })
        );
        assert_eq!(
            check_option_layout(&want, &[2, 4, 5]),
            Err(LayoutError::Malformed { index: 0 })
        );
        assert_eq!(
            check_option_layout(&want, &[1, 2]),
            Err(LayoutError::Malformed { index: 1 })
        );
        // A FO cookie request (kind 34, no cookie) is an unknown kind to wire, counted by length.
        assert_eq!(
            check_option_layout(&[TcpOption::FastOpen(vec![]), TcpOption::Nop], &[34, 2, 1]),
            Ok(())
        );
    }
}
