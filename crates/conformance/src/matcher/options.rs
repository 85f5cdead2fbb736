//! Option matching: the options a `TcpRepr` carries against a line's option list
//! (`MatchContext::match_options`: values, TS val offset and tolerance), their script
//! notation ([`repr_options_text`]), and the exact wire layout of the raw options area
//! ([`check_option_layout`]: order, padding, kinds and lengths), which a `TcpRepr` cannot show.

use super::{MatchContext, Mismatch, SeqSpace};
use crate::ast::{TcpOption, TcpOptionsSpec};
use core::fmt;
use wire::tcp::{TcpOption as WireOption, TcpOptions, TcpRepr};

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
    /// An MD5 signature option, which a `TcpRepr` does not carry.
    md5: bool,
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
            TcpOption::Md5(_) => v.md5 = true,
        }
    }
    v
}

impl MatchContext {
    pub(super) fn match_options(
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
        if want.md5 {
            out.push(Mismatch::Unverifiable("the TCP MD5 signature option"));
        }
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
        TcpOption::Md5(d) => (19, u8::try_from(2 + d.len()).unwrap_or(u8::MAX)),
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
/// (`TcpOptions`). As in packetdrill (`tcp_options_iterator.c`), the whole options area is
/// walked: an `eol` is a one-byte option like `nop`, and so is each zero byte of padding after
/// it, so FreeBSD's `<mss 1460,sackOK,eol,eol>` lists its padding and a line that lists none
/// does not match a segment that has some.
pub fn check_option_layout(expected: &[TcpOption], raw: &[u8]) -> Result<(), LayoutError> {
    let mut actual: Vec<(u8, u8)> = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        // `TcpOptions` stops after an `eol`; the walk goes on after it.
        let mut consumed = 0;
        for o in TcpOptions::new(rest) {
            let o = o.map_err(|_| LayoutError::Malformed {
                index: actual.len(),
            })?;
            let (kind, len) = wire_kind_len(&o);
            actual.push((kind, len));
            consumed += usize::from(len);
        }
        rest = match rest.get(consumed..) {
            Some(r) if consumed > 0 => r,
            _ => break,
        };
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

/// A raw options area in script notation and wire order, padding included
/// (`<mss 1460,nop,nop,sackOK,nop,wscale 8>`), for messages about the layout; SACK blocks
/// script-relative (peer space), an option `wire` cannot parse as `kind K len L`, a malformed
/// tail as `malformed`.
pub fn raw_options_text(raw: &[u8], seq: &SeqSpace) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut rest = raw;
    'walk: while !rest.is_empty() {
        let mut consumed = 0;
        for o in TcpOptions::new(rest) {
            let Ok(o) = o else {
                parts.push("malformed".into());
                break 'walk;
            };
            consumed += usize::from(wire_kind_len(&o).1);
            parts.push(match o {
                WireOption::EndOfList => "eol".into(),
                WireOption::NoOperation => "nop".into(),
                WireOption::MaxSegmentSize(m) => format!("mss {m}"),
                WireOption::WindowScale(w) => format!("wscale {w}"),
                WireOption::SackPermitted => "sackOK".into(),
                WireOption::SackRange(blocks) => {
                    let b: Vec<String> = blocks
                        .iter()
                        .flatten()
                        .map(|b| {
                            format!("{}:{}", seq.peer_script(b.left), seq.peer_script(b.right))
                        })
                        .collect();
                    format!("sack {}", b.join(" "))
                }
                WireOption::Timestamp(ts) => format!("TS val {} ecr {}", ts.tsval, ts.tsecr),
                WireOption::Unknown { kind, data } => {
                    match wire::tcp::FastOpenOption::parse(kind, data) {
                        Some(fo) => {
                            let cookie: String =
                                fo.cookie().iter().map(|b| format!("{b:02x}")).collect();
                            let name = if fo.experimental { "FOEXP" } else { "FO" };
                            if cookie.is_empty() {
                                name.to_string()
                            } else {
                                format!("{name} {cookie}")
                            }
                        }
                        None => format!("kind {kind} len {}", data.len() + 2),
                    }
                }
            });
        }
        rest = match rest.get(consumed..) {
            Some(r) if consumed > 0 => r,
            _ => break,
        };
    }
    format!("<{}>", parts.join(","))
}
