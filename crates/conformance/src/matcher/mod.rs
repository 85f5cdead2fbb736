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
//! rewritten through that map, so it echoes a value the stack really sent (with
//! `--tcp_ts_ecr_scaled`, an `ecr` no outbound val had is moved by `ts_val_offset` instead, as
//! packetdrill interpolates it). Inbound TS vals go
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
//!
//! The option half (values against a `TcpRepr`, the raw layout) is in `matcher/options.rs`.

use crate::ast::{Direction, TcpLine, TcpOption, TcpOptionsSpec};
use crate::print::ScriptFlags;
use core::fmt;
use std::collections::BTreeMap;
use wire::tcp::{FastOpenOption, SackBlock, SeqNumber, TcpFlags, TcpRepr, TcpTimestamp};

mod options;
#[cfg(test)]
mod tests;

pub use options::{
    LayoutError, check_option_layout, option_kind_len, raw_options_text, repr_options_text,
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
    /// `--tcp_ts_ecr_scaled`: an inbound ACK's TS `ecr` that echoes no TS val the stack sent
    /// is interpolated on the stack's clock (`ecr + ts_val_offset`, packetdrill's
    /// `first_actual_ts_val - first_script_ts_val`) instead of failing the build; without
    /// it, or before any outbound TS val, such an `ecr` is [`BuildError::NoTsValMapping`].
    pub ts_ecr_scaled: bool,
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
            ts_ecr_scaled: false,
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
        // packetdrill maps the ACK field of every segment with the ACK bit, written or not:
        // `< . 1:1001(1000) win 320` acknowledges script sequence 0, the stack's ISN.
        let ack_number = match line.ack {
            Some(a) => self.seq.stack_live(a).ok_or(BuildError::StackIsnUnknown)?,
            None if line.flags.contains(TcpFlags::ACK) => {
                self.seq.stack_live(0).ok_or(BuildError::StackIsnUnknown)?
            }
            None => SeqNumber(0),
        };
        let mut repr = TcpRepr {
            urgent_pointer: line.urg.unwrap_or(0),
            payload,
            ..TcpRepr::bare(
                src_port,
                dst_port,
                self.seq.peer_live_in(line.seq.start, line.flags),
                ack_number,
                line.flags,
                window_len,
            )
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
                        let scaled = self
                            .ts_val_offset
                            .filter(|_| self.ts_ecr_scaled)
                            .map(|offset| ecr.wrapping_add(offset));
                        self.ts_val_map
                            .get(ecr)
                            .copied()
                            .or(scaled)
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
                TcpOption::Md5(_) => {
                    return Err(BuildError::Unrepresentable("the TCP MD5 signature option"));
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
