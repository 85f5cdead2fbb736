//! The matcher is strict: every script recorded in `PASSING` fails when any one of its expected
//! outbound packet lines is removed — every line that something after it checks (packetdrill
//! compares nothing after the last outbound line).
//!
//! A pass proves something only if a stack that sends a packet the script does not expect (or
//! leaves one out) cannot pass too. Removing an outbound line from a passing script leaves the
//! stack's packet for it unclaimed; the next outbound line then sees it first and must reject
//! it (packet fields, options, or its send time).

use conformance::ast::{Action, Direction, EventTime, Pos, Script};
use conformance::exec::{Outcome, Profile, apply_file_name_options, expected_passing, run_script};
use conformance::parse_script;
use std::path::Path;

/// `script` without event `index`, with the removed event's time folded into the next timed
/// event, so every later event keeps its scheduled time: removing `+.1 > ...` before
/// `+.2 < ...` leaves `+.3 < ...`.
fn without_event(script: &Script, index: usize) -> Script {
    let mut cut = script.clone();
    let removed = cut.events.remove(index).time;
    if let Some(next) = cut.events[index..]
        .iter_mut()
        .find(|e| e.time != EventTime::Unspecified)
    {
        next.time = fold(removed, next.time);
    }
    cut
}

/// The time of an event written `next` after an event written `removed`, without the latter.
fn fold(removed: EventTime, next: EventTime) -> EventTime {
    use EventTime::*;
    // Where the removed event put the time base: its start relative to the base before it
    // (`Ok`), or an absolute time (`Err`). A range starts the base at its start (the executor
    // acts there; an outbound packet is seen at or after it).
    let base = match removed {
        Relative { after_usecs } => Ok(after_usecs),
        RelativeRange { start_usecs, .. } | RelativeBlocking { start_usecs, .. } => Ok(start_usecs),
        Absolute { at_usecs } => Err(at_usecs),
        AbsoluteRange { start_usecs, .. } | AbsoluteBlocking { start_usecs, .. } => {
            Err(start_usecs)
        }
        // `*` and untimed lines do not move the base by a known amount.
        Any | Unspecified => Ok(0),
    };
    match (base, next) {
        (Ok(d), Relative { after_usecs }) => Relative {
            after_usecs: d + after_usecs,
        },
        (
            Ok(d),
            RelativeRange {
                start_usecs,
                end_usecs,
            },
        ) => RelativeRange {
            start_usecs: d + start_usecs,
            end_usecs: d + end_usecs,
        },
        (
            Ok(d),
            RelativeBlocking {
                start_usecs,
                end_usecs,
            },
        ) => RelativeBlocking {
            start_usecs: d + start_usecs,
            end_usecs: d + end_usecs,
        },
        (Err(t), Relative { after_usecs }) => Absolute {
            at_usecs: t + after_usecs,
        },
        (
            Err(t),
            RelativeRange {
                start_usecs,
                end_usecs,
            },
        ) => AbsoluteRange {
            start_usecs: t + start_usecs,
            end_usecs: t + end_usecs,
        },
        (
            Err(t),
            RelativeBlocking {
                start_usecs,
                end_usecs,
            },
        ) => AbsoluteBlocking {
            start_usecs: t + start_usecs,
            end_usecs: t + end_usecs,
        },
        (_, other) => other,
    }
}

fn is_outbound(script: &Script, index: usize) -> bool {
    matches!(&script.events[index].action, Action::Tcp(l) if l.direction == Direction::Outbound)
}

/// Removing outbound line `index` cannot be seen when every outbound line after it is a copy of
/// it at any time (`*`): each of them claims the packet meant for the line before it, and the
/// packet meant for the last one is sent after the last outbound line, where packetdrill (and
/// this runner, `exec` module doc) compares nothing. The last outbound line is the case with
/// no copies at all.
fn unobservable_when_removed(script: &Script, index: usize) -> bool {
    let removed = &script.events[index].action;
    (index + 1..script.events.len())
        .filter(|&j| is_outbound(script, j))
        .all(|j| script.events[j].time == EventTime::Any && script.events[j].action == *removed)
}

fn line_col(p: Pos) -> (u32, u32) {
    (p.line, p.col)
}

/// Each outbound line of each script in `PASSING`, in turn, is removed; the script must then
/// fail, between the removed line and the next outbound line (events before the removed line
/// are unchanged, so a failure can only come from what the removal changed):
/// - at the next outbound line, which the packet meant for the removed line reaches first and
///   must not match (the matcher's strictness proper), or
/// - at an inbound line before it that cannot be built without what the removed line taught
///   the runner (the stack's ISN and port from its SYN, a TS val an `ecr` echoes).
///
/// A line whose removal no check can see ([`unobservable_when_removed`]: each script's last
/// outbound line) may pass without it, or fail in the same range (when an inbound line after
/// it needs the stack's ISN it taught). A few Fast Open scripts have no other outbound line than
/// their SYN-ACK and nothing after it that needs its ISN: they test the calls (`read` after
/// a RST), not the packets, and are printed.
#[test]
fn every_passing_script_fails_without_any_one_of_its_outbound_lines() {
    let started = std::time::Instant::now();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/packetdrill-google-all");
    let profile = Profile::linux_compat();
    let (mut mutants, mut failed, mut at_next_outbound, mut unseen) = (0, 0, 0, 0);
    let mut other_socket = 0;
    let mut wrong = Vec::new();
    let scripts = expected_passing(include_str!("../PASSING"));
    for rel in &scripts {
        let text = std::fs::read_to_string(root.join(rel)).expect("script readable");
        let mut script = parse_script(&text).expect("a passing script parses");
        apply_file_name_options(&mut script, &root.join(rel));
        let original_other_socket = run_script(&script, &profile).other_socket_segments;
        let failed_before = failed;
        let unseen_before = unseen;
        for i in (0..script.events.len()).filter(|&i| is_outbound(&script, i)) {
            let removed = script.events[i].pos;
            let next_outbound = (i + 1..script.events.len())
                .find(|&j| is_outbound(&script, j))
                .map(|j| script.events[j].pos);
            let report = run_script(&without_event(&script, i), &profile);
            mutants += 1;
            let here = format!("{rel}:{removed} (`{}` removed)", script.events[i].action);
            match report.outcome {
                Outcome::Fail { pos, .. } if Some(pos) == next_outbound => at_next_outbound += 1,
                Outcome::Fail { pos, .. }
                    if line_col(pos) > line_col(removed)
                        && next_outbound.is_none_or(|n| line_col(pos) < line_col(n)) => {}
                Outcome::Pass if unobservable_when_removed(&script, i) => {
                    unseen += 1;
                    continue;
                }
                // The packet meant for the removed line was read when the script had moved on
                // to another socket, and passed over as that socket's, as packetdrill does
                // (a FIN of a closed connection read at the next connection's SYN line).
                Outcome::Pass if report.other_socket_segments > original_other_socket => {
                    other_socket += 1;
                    continue;
                }
                other => {
                    wrong.push(format!("{here}: {other}"));
                    continue;
                }
            }
            failed += 1;
        }
        if failed == failed_before && unseen > unseen_before {
            println!("{rel}: the removal of no outbound line can be seen");
        }
    }
    println!(
        "{} scripts, {mutants} mutants: {failed} fail ({at_next_outbound} at the next outbound \
         line), {unseen} pass without a line nothing after it checks, {other_socket} pass with \
         the removed line's packet passed over as another socket's; {} ms",
        scripts.len(),
        started.elapsed().as_millis()
    );
    assert!(
        wrong.is_empty(),
        "{} of {mutants} mutants did not fail where they should:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Most removals are caught by the matcher itself; the others (removed SYNs, mostly) by
    // inbound lines that need what the removed line taught.
    assert!(
        at_next_outbound * 2 > failed,
        "{at_next_outbound} of {failed}"
    );
}
