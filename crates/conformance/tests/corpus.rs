//! Every script of the Google packetdrill subset parses, and printing then re-parsing gives the
//! same AST.

use conformance::ast::{Action, ScriptStats};
use conformance::parse_script;
use std::path::{Path, PathBuf};

/// The corpus copied into this crate (`corpus/packetdrill-google/`, GPL-2.0, see its SOURCE.md).
fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/packetdrill-google")
}

fn pkt_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            pkt_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "pkt") {
            out.push(p);
        }
    }
}

fn corpus() -> Vec<(PathBuf, String)> {
    corpus_at(&corpus_dir())
}

/// Google's whole suite, copied into this crate (`corpus/packetdrill-google-all/`, GPL-2.0).
fn full_suite() -> Vec<(PathBuf, String)> {
    corpus_at(&Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/packetdrill-google-all"))
}

fn corpus_at(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    pkt_files(dir, &mut files);
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read script");
            (p, text)
        })
        .collect()
}

/// The subset holds exactly 54 scripts (SOURCE.md); if this changes, update the count knowingly.
const CORPUS_SCRIPTS: usize = 54;

#[test]
fn every_corpus_script_parses() {
    let scripts = corpus();
    assert_eq!(scripts.len(), CORPUS_SCRIPTS);
    let mut total = ScriptStats::default();
    let mut failures = Vec::new();
    for (path, text) in &scripts {
        match parse_script(text) {
            Ok(s) => {
                assert!(!s.events.is_empty(), "{} has no events", path.display());
                total += s.stats();
            }
            Err(e) => failures.push(format!("{}:{e}", path.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "parse failures:\n{}",
        failures.join("\n")
    );
    // Figures for the whole corpus; a change here means the parser changed its reading.
    println!("{total:?}");
    // Cross-checked with grep over the corpus: 316 `<` lines, 271 `>` lines, 483 calls,
    // 62 `%{` blocks, 59 backtick blocks (13 of them span two lines).
    let expected = ScriptStats {
        tcp_inbound: 316,
        tcp_outbound: 271,
        syscalls: 483,
        shell: 59,
        code: 62,
        ..ScriptStats::default()
    };
    assert_eq!(total, expected);
    assert_eq!(total.unsupported, 0, "unsupported packet lines: {total:?}");
}

#[test]
fn every_corpus_script_round_trips_through_the_printer() {
    for (path, text) in corpus() {
        let first = parse_script(&text).expect("parses");
        let printed = first.to_string();
        let second = parse_script(&printed).unwrap_or_else(|e| {
            panic!("{}: reprint does not parse: {e}\n{printed}", path.display())
        });
        assert!(
            first.same_content(&second),
            "{}: AST changed through print/parse\n{printed}",
            path.display()
        );
        // Printing is a fixpoint after one round.
        assert_eq!(printed, second.to_string(), "{}", path.display());
    }
}

/// Every script of Google's whole suite (162, SOURCE.md) parses, and printing then re-parsing
/// gives the same AST.
#[test]
fn every_script_of_the_full_suite_parses_and_round_trips() {
    let scripts = full_suite();
    assert_eq!(scripts.len(), 162);
    let mut failures = Vec::new();
    let mut total = ScriptStats::default();
    for (path, text) in &scripts {
        let first = match parse_script(text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}:{e}", path.display()));
                continue;
            }
        };
        total += first.stats();
        assert!(!first.events.is_empty(), "{} has no events", path.display());
        let printed = first.to_string();
        let second = match parse_script(&printed) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}: reprint does not parse: {e}", path.display()));
                continue;
            }
        };
        if !first.same_content(&second) {
            failures.push(format!(
                "{}: AST changed through print/parse",
                path.display()
            ));
        }
        if printed != second.to_string() {
            failures.push(format!("{}: printing is not a fixpoint", path.display()));
        }
    }
    assert!(failures.is_empty(), "failures:\n{}", failures.join("\n"));
    // Every packet line of the suite is a typed node (IP-level fields and the md5 option
    // included), none kept as unparsed text.
    assert_eq!(total.unsupported, 0, "{total:?}");
}

#[test]
fn corpus_python_and_shell_blocks_are_kept_verbatim() {
    let (_, text) = corpus()
        .into_iter()
        .find(|(p, _)| p.ends_with("fast_recovery/prr-ss-10pkt-lost-1.pkt"))
        .expect("script present");
    let s = parse_script(&text).expect("parses");
    let code: Vec<&String> = s
        .events
        .iter()
        .filter_map(|e| match &e.action {
            Action::Code(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(code.len(), 2);
    assert!(code[0].contains("assert tcpi_ca_state == TCP_CA_Recovery, tcpi_ca_state"));
    assert!(matches!(&s.events[0].action, Action::Shell(c) if c == "../common/defaults.sh"));
}

use conformance::ast::{Direction, TcpLine, TcpOption, TcpOptionsSpec};
use conformance::matcher::{BuildError, MatchContext, Mismatch, Progress, SuperSegment};
use conformance::time::TimeCursor;
use wire::tcp::{FastOpenOption, SackBlock, SeqNumber, TcpFlags, TcpRepr, TcpTimestamp};

const PEER_BASE: u32 = 0x1234_5678;
const STACK_BASE: u32 = 0xfff0_0000;
const TS_OFFSET: u32 = 0x4000_0000;

/// What a perfectly conforming stack would send for an outbound line.
fn ideal_outbound<'a>(l: &TcpLine, payload: &'a [u8]) -> TcpRepr<'a> {
    let mut r = TcpRepr {
        urgent_pointer: l.urg.unwrap_or(0),
        payload,
        ..TcpRepr::bare(
            8080,
            40000,
            SeqNumber(STACK_BASE.wrapping_add(l.seq.start)),
            SeqNumber(PEER_BASE.wrapping_add(l.ack.unwrap_or(0))),
            l.flags,
            l.win.unwrap_or(1000),
        )
    };
    if let TcpOptionsSpec::List(list) = &l.options {
        let mut n = 0;
        for o in list {
            match o {
                TcpOption::Mss(m) => r.max_seg_size = Some(*m),
                TcpOption::WindowScale(w) => r.window_scale = Some(*w),
                TcpOption::SackPermitted => r.sack_permitted = true,
                TcpOption::Timestamp { val, ecr } => {
                    r.timestamp = Some(TcpTimestamp {
                        tsval: val.wrapping_add(TS_OFFSET),
                        tsecr: *ecr,
                    })
                }
                TcpOption::Sack(blocks) => {
                    for &(a, b) in blocks {
                        if let Some(slot) = r.sack_blocks.get_mut(n) {
                            *slot = Some(SackBlock {
                                left: SeqNumber(PEER_BASE.wrapping_add(a)),
                                right: SeqNumber(PEER_BASE.wrapping_add(b)),
                            });
                        }
                        n += 1;
                    }
                }
                TcpOption::FastOpen(c) => r.fast_open = FastOpenOption::with_cookie(c, false),
                TcpOption::FastOpenExp(c) => r.fast_open = FastOpenOption::with_cookie(c, true),
                TcpOption::Nop
                | TcpOption::Eol
                | TcpOption::FastOpenNamed { .. }
                | TcpOption::Md5(_) => {}
            }
        }
    }
    r
}

/// Every outbound corpus line matches what an ideal stack sends, whole and split into
/// 1000-byte pieces; every inbound line builds. The only exceptions are the lines with a
/// named Fast Open cookie (`FO TFO_COOKIE`), which only the executor defines.
#[test]
fn every_corpus_packet_line_matches_an_ideal_stack_or_is_fast_open() {
    let mut outbound = 0;
    let mut inbound = 0;
    let mut split = 0;
    let mut fast_open = 0;
    for (path, text) in corpus() {
        let s = parse_script(&text).expect("parses");
        let mut ctx = MatchContext::new(SeqNumber(PEER_BASE));
        ctx.tolerance_usecs = s.tolerance_usecs();
        ctx.ts_tick_usecs = s.tcp_ts_tick_usecs();
        for ev in &s.events {
            let Action::Tcp(l) = &ev.action else { continue };
            let payload = vec![0u8; l.payload_len() as usize];
            let here = format!("{}:{}", path.display(), ev.pos);
            let is_fo = matches!(&l.options, TcpOptionsSpec::List(v)
                if v.iter().any(|o| matches!(o, TcpOption::FastOpenNamed { .. })));
            match l.direction {
                Direction::Inbound => match ctx.build_inbound(l, 40000, 8080, &payload) {
                    Ok(r) => {
                        assert_eq!(r.seq_number, SeqNumber(PEER_BASE.wrapping_add(l.seq.start)));
                        inbound += 1;
                    }
                    Err(BuildError::Unrepresentable(_)) if is_fo => fast_open += 1,
                    Err(e) => panic!("{here}: {e}"),
                },
                Direction::Outbound => {
                    let ideal = ideal_outbound(l, &payload);
                    match ctx.match_outbound(l, &ideal) {
                        Ok(()) => outbound += 1,
                        Err(e)
                            if is_fo
                                && e.mismatches
                                    .iter()
                                    .all(|m| matches!(m, Mismatch::Unverifiable(_))) =>
                        {
                            fast_open += 1
                        }
                        Err(e) => panic!("{here}: {e}"),
                    }
                    if l.payload_len() > 1000 {
                        let mut acc = SuperSegment::new(l).with_mss(1000);
                        let mut off = 0u32;
                        loop {
                            let n = (l.payload_len() - off).min(1000);
                            let last = off + n == l.payload_len();
                            let piece = vec![0u8; n as usize];
                            let mut r = ideal_outbound(l, &piece);
                            r.seq_number += off;
                            if !last {
                                r.flags =
                                    TcpFlags(l.flags.0 & !(TcpFlags::PSH.0 | TcpFlags::FIN.0));
                            }
                            let p = acc
                                .push(&mut ctx, &r)
                                .unwrap_or_else(|e| panic!("{here}: piece at +{off}: {e}"));
                            off += n;
                            if last {
                                assert_eq!(p, Progress::Complete, "{here}");
                                break;
                            }
                        }
                        split += 1;
                    }
                }
            }
        }
    }
    assert_eq!((inbound, outbound, fast_open), (316, 271, 0));
    assert!(split > 50, "only {split} lines were split");
}

/// Walking every script on an ideal clock (each event exactly when the script says) never
/// reports a time mismatch, with zero tolerance.
#[test]
fn every_corpus_script_runs_on_an_ideal_clock() {
    for (path, text) in corpus() {
        let s = parse_script(&text).expect("parses");
        conformance::time::check_schedule(&s).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut clock = TimeCursor::new();
        let mut now_usecs = 0;
        for ev in &s.events {
            if let Some(w) = clock.window(&ev.time) {
                let done = if w.blocking {
                    w.end_usecs
                } else {
                    w.start_usecs
                };
                clock
                    .check(&ev.time, done, 0)
                    .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), ev.pos));
                now_usecs = now_usecs.max(w.start_usecs);
                clock.advance(&ev.time, w.start_usecs);
            } else {
                clock.advance(&ev.time, now_usecs);
            }
        }
    }
}

/// `wire` emits options in Linux's layout (`tcp_options_write`); every outbound corpus line
/// that lists options (except TCP Fast Open, which `TcpRepr` cannot carry) must find exactly
/// its layout — nops included — in the bytes `wire` emits for the ideal segment.
#[test]
fn wire_emits_the_option_layout_every_corpus_line_expects() {
    use conformance::matcher::check_option_layout;
    use wire::{ChecksumCaps, IpPair, TcpPacket};
    let addrs = IpPair::V4 {
        src: core::net::Ipv4Addr::new(192, 0, 2, 1),
        dst: core::net::Ipv4Addr::new(192, 0, 2, 2),
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    for (path, text) in corpus() {
        let s = parse_script(&text).expect("parses");
        for ev in &s.events {
            let Action::Tcp(l) = &ev.action else { continue };
            let TcpOptionsSpec::List(list) = &l.options else {
                continue;
            };
            if l.direction != Direction::Outbound
                || list.iter().any(|o| matches!(o, TcpOption::FastOpen(_)))
            {
                continue;
            }
            let payload = vec![0u8; l.payload_len() as usize];
            let repr = ideal_outbound(l, &payload);
            let mut buf = vec![0u8; repr.buffer_len()];
            let mut pkt = TcpPacket::new_unchecked(&mut buf[..]);
            repr.emit(&mut pkt, &addrs, ChecksumCaps::ALL)
                .unwrap_or_else(|e| panic!("{}:{}: emit: {e:?}", path.display(), ev.pos));
            let pkt = TcpPacket::new_checked(&buf[..]).expect("emitted segment parses");
            if let Err(e) = check_option_layout(list, pkt.options()) {
                failures.push(format!("{}:{}: {l}: {e}", path.display(), ev.pos));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(checked, 55);
}
