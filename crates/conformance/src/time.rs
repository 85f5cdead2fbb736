//! Event times against a virtual clock.
//!
//! All times are microseconds since the script's time zero (the executor's start). The
//! [`TimeCursor`] holds the *time base*: the time relative times count from.
//!
//! Rules (packetdrill's `run.c`: `adjust_relative_event_times`, `verify_time`, restated):
//! - The base is "now" when the executor reaches the event, i.e. the time it finished with the
//!   previous event: an inbound packet's injection time (its scheduled time — packetdrill
//!   anchors consecutive inbound packets to the previous one's scheduled time, which on a
//!   virtual clock is the same), the time an outbound packet was *actually* seen, the time a
//!   non-blocking call returned, the time a blocking call was *issued* (packetdrill runs it on
//!   a thread and moves on). The executor reports that time to [`TimeCursor::advance`].
//! - `+d` happens at `base + d`; `t` at `t`.
//! - `a~b` / `+a~+b` (a range) accepts any time in `[a, b]` (both ends offset by the base).
//! - `*` accepts any time.
//! - `a...b` / `+a...b` (a blocking call) is issued at `a` and must return at `b`; for the
//!   relative form both are offset by the same base, so in `+0.1...0.2` the call starts 0.1 s
//!   and returns 0.2 s after the base.
//! - An untimed line (the init/cleanup backtick commands) runs at the base, unchecked, and
//!   leaves the base alone.
//! - Every check allows `tolerance_usecs` on either side (default 4000 µs, packetdrill's).
//!   packetdrill's `--tolerance_percent` (a tolerance proportional to the gap since the
//!   previous event) is not modelled; the corpus does not use it.

use crate::ast::EventTime;
use crate::print::Secs;

/// The script-time window an event is expected in, before tolerance.
///
/// Invariant: `start_usecs <= end_usecs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// When the executor should act (inject an inbound packet, issue a call), and the earliest
    /// time an outbound packet may appear.
    pub start_usecs: u64,
    /// The latest time an outbound packet may appear, or when a blocking call must return.
    pub end_usecs: u64,
    /// True for `a...b`: the call starts at `start_usecs` and completes at `end_usecs`.
    pub blocking: bool,
}

/// An actual time outside the expected window (tolerance included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeMismatch {
    /// Earliest acceptable time without tolerance.
    pub expected_start_usecs: u64,
    /// Latest acceptable time without tolerance (equal to start for an exact time).
    pub expected_end_usecs: u64,
    pub tolerance_usecs: u64,
    pub actual_usecs: u64,
}

impl core::fmt::Display for TimeMismatch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.expected_start_usecs == self.expected_end_usecs {
            write!(f, "expected at {} s", Secs(self.expected_start_usecs))?;
        } else {
            write!(
                f,
                "expected between {} s and {} s",
                Secs(self.expected_start_usecs),
                Secs(self.expected_end_usecs)
            )?;
        }
        let actual = self.actual_usecs;
        let early = self.expected_start_usecs.saturating_sub(actual);
        let late = actual.saturating_sub(self.expected_end_usecs);
        write!(
            f,
            " (tolerance {} us), got {} s ({} us {})",
            self.tolerance_usecs,
            Secs(actual),
            early.max(late),
            if early > 0 { "early" } else { "late" }
        )
    }
}

impl std::error::Error for TimeMismatch {}

/// The time base of a running script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeCursor {
    /// The script time relative times count from.
    pub base_usecs: u64,
}

impl TimeCursor {
    pub fn new() -> Self {
        TimeCursor { base_usecs: 0 }
    }

    /// The window `time` stands for at the current base; `None` for `*` and untimed lines,
    /// which happen whenever they happen (an untimed line should be run at [`Self::base_usecs`]).
    pub fn window(&self, time: &EventTime) -> Option<Window> {
        let b = self.base_usecs;
        let w = |start_usecs: u64, end_usecs: u64, blocking: bool| Window {
            start_usecs,
            end_usecs,
            blocking,
        };
        match *time {
            EventTime::Unspecified | EventTime::Any => None,
            EventTime::Absolute { at_usecs } => Some(w(at_usecs, at_usecs, false)),
            EventTime::Relative { after_usecs } => {
                let t = b.saturating_add(after_usecs);
                Some(w(t, t, false))
            }
            EventTime::AbsoluteRange {
                start_usecs,
                end_usecs,
            } => Some(w(start_usecs, end_usecs, false)),
            EventTime::RelativeRange {
                start_usecs,
                end_usecs,
            } => Some(w(
                b.saturating_add(start_usecs),
                b.saturating_add(end_usecs),
                false,
            )),
            EventTime::AbsoluteBlocking {
                start_usecs,
                end_usecs,
            } => Some(w(start_usecs, end_usecs, true)),
            EventTime::RelativeBlocking {
                start_usecs,
                end_usecs,
            } => Some(w(
                b.saturating_add(start_usecs),
                b.saturating_add(end_usecs),
                true,
            )),
        }
    }

    /// Checks the moment an event *completed* — an outbound packet seen, a call returned —
    /// against its expected time. For a blocking call that is the return, expected at `end`
    /// only; otherwise anywhere in `[start, end]`. Tolerance applies on both sides.
    pub fn check(
        &self,
        time: &EventTime,
        actual_usecs: u64,
        tolerance_usecs: u64,
    ) -> Result<(), TimeMismatch> {
        let Some(w) = self.window(time) else {
            return Ok(());
        };
        let (lo, hi) = if w.blocking {
            (w.end_usecs, w.end_usecs)
        } else {
            (w.start_usecs, w.end_usecs)
        };
        if actual_usecs.saturating_add(tolerance_usecs) < lo
            || actual_usecs > hi.saturating_add(tolerance_usecs)
        {
            return Err(TimeMismatch {
                expected_start_usecs: lo,
                expected_end_usecs: hi,
                tolerance_usecs,
                actual_usecs,
            });
        }
        Ok(())
    }

    /// Moves the base past an event. `done_usecs` is when the executor finished with it (see
    /// the module doc): injection time for inbound packets, the actual time for outbound
    /// packets, return time for non-blocking calls, issue time for blocking calls.
    /// Untimed lines leave the base alone.
    pub fn advance(&mut self, time: &EventTime, done_usecs: u64) {
        if *time != EventTime::Unspecified {
            self.base_usecs = done_usecs;
        }
    }
}

/// A script whose schedule packetdrill refuses before running it (`run.c`,
/// `get_next_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleError {
    /// The first timed event is not at absolute time 0 (index into `Script::events`).
    FirstEventNotAtZero { event: usize },
    /// An absolute time is earlier than the absolute time before it.
    TimeGoesBackward {
        event: usize,
        previous_usecs: u64,
        at_usecs: u64,
    },
}

impl core::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ScheduleError::FirstEventNotAtZero { event } => {
                write!(f, "event {event}: first event should be at time 0")
            }
            ScheduleError::TimeGoesBackward {
                event,
                previous_usecs,
                at_usecs,
            } => write!(
                f,
                "event {event}: time goes backward from {} s to {} s",
                Secs(previous_usecs),
                Secs(at_usecs)
            ),
        }
    }
}

impl std::error::Error for ScheduleError {}

/// The absolute start time a time form names, if it is absolute.
fn absolute_start(t: &EventTime) -> Option<u64> {
    match *t {
        EventTime::Absolute { at_usecs } => Some(at_usecs),
        EventTime::AbsoluteRange { start_usecs, .. }
        | EventTime::AbsoluteBlocking { start_usecs, .. } => Some(start_usecs),
        _ => None,
    }
}

/// Checks what packetdrill checks before running events: the first timed event is at
/// absolute time 0, and consecutive absolute times never go backward.
pub fn check_schedule(script: &crate::ast::Script) -> Result<(), ScheduleError> {
    let mut timed = script
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.time != EventTime::Unspecified);
    if let Some((event, first)) = timed.next()
        && absolute_start(&first.time) != Some(0)
    {
        return Err(ScheduleError::FirstEventNotAtZero { event });
    }
    let mut previous: Option<u64> = None;
    for (event, e) in script.events.iter().enumerate() {
        let now = absolute_start(&e.time);
        if let (Some(previous_usecs), Some(at_usecs)) = (previous, now)
            && at_usecs < previous_usecs
        {
            return Err(ScheduleError::TimeGoesBackward {
                event,
                previous_usecs,
                at_usecs,
            });
        }
        if e.time != EventTime::Unspecified {
            previous = now;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_event;

    fn time(text: &str) -> EventTime {
        parse_event(&format!("{text} close(3) = 0"))
            .expect("parses")
            .time
    }

    #[test]
    fn relative_time_within_tolerance_matches() {
        let c = TimeCursor {
            base_usecs: 100_000,
        };
        let t = time("+.1");
        assert_eq!(c.check(&t, 200_000, 4000), Ok(()));
        assert_eq!(c.check(&t, 204_000, 4000), Ok(()));
        assert_eq!(c.check(&t, 196_000, 4000), Ok(()));
    }

    #[test]
    fn late_packet_reports_expected_time_and_lateness() {
        let c = TimeCursor {
            base_usecs: 100_000,
        };
        let e = c.check(&time("+.1"), 204_001, 4000).expect_err("late");
        assert_eq!(
            e.to_string(),
            "expected at 0.2 s (tolerance 4000 us), got 0.204001 s (4001 us late)"
        );
        let e = c.check(&time("+.1"), 150_000, 4000).expect_err("early");
        assert!(e.to_string().ends_with("(50000 us early)"), "{e}");
    }

    #[test]
    fn range_accepts_anything_inside_plus_tolerance() {
        let c = TimeCursor {
            base_usecs: 1_000_000,
        };
        let t = time("+.3~+.310");
        assert!(c.check(&t, 1_296_000, 4000).is_ok());
        assert!(c.check(&t, 1_305_000, 4000).is_ok());
        assert!(c.check(&t, 1_314_000, 4000).is_ok());
        let e = c.check(&t, 1_314_001, 4000).expect_err("late");
        assert!(
            e.to_string()
                .starts_with("expected between 1.3 s and 1.31 s"),
            "{e}"
        );
        assert!(c.check(&t, 1_295_999, 4000).is_err());
    }

    #[test]
    fn wildcard_and_untimed_always_match_and_only_wildcard_rebases() {
        let mut c = TimeCursor { base_usecs: 5 };
        assert!(c.check(&EventTime::Any, 99_999_999, 0).is_ok());
        assert!(c.check(&EventTime::Unspecified, 0, 0).is_ok());
        c.advance(&EventTime::Unspecified, 777);
        assert_eq!(c.base_usecs, 5);
        c.advance(&EventTime::Any, 777);
        assert_eq!(c.base_usecs, 777);
    }

    #[test]
    fn blocking_call_returns_at_end_and_rebases_on_start() {
        // blocking/blocking-read.pkt: `+.1...0.200 read(...)` then `+.1 < P. ...`.
        let mut c = TimeCursor {
            base_usecs: 1_000_000,
        };
        let t = time("+.1...0.200");
        let w = c.window(&t).expect("window");
        assert_eq!(
            w,
            Window {
                start_usecs: 1_100_000,
                end_usecs: 1_200_000,
                blocking: true
            }
        );
        // Returning at the start is wrong: the call must block until 0.2 s after the base.
        assert!(c.check(&t, 1_100_000, 4000).is_err());
        assert!(c.check(&t, 1_201_000, 4000).is_ok());
        c.advance(&t, 1_100_000);
        assert_eq!(c.base_usecs, 1_100_000);
        // The inbound data `+.1` later arrives exactly when the read must return.
        assert_eq!(
            c.window(&time("+.1")).map(|w| w.start_usecs),
            Some(1_200_000)
        );
    }

    #[test]
    fn absolute_times_ignore_the_base() {
        let c = TimeCursor {
            base_usecs: 3_000_000,
        };
        let t = time("0.5");
        assert_eq!(c.window(&t).map(|w| w.start_usecs), Some(500_000));
        assert!(c.check(&time("1~2"), 1_500_000, 0).is_ok());
        assert!(c.check(&time("1~2"), 2_000_001, 0).is_err());
    }

    #[test]
    fn next_relative_time_counts_from_when_the_outbound_packet_was_seen() {
        // An outbound packet expected at +0.1 arrives 3 ms late (within tolerance); the next
        // `+0.1` counts from the actual arrival, as packetdrill's "now" does.
        let mut c = TimeCursor { base_usecs: 0 };
        let t = time("+.1");
        assert!(c.check(&t, 103_000, 4000).is_ok());
        c.advance(&t, 103_000);
        assert_eq!(c.window(&t).map(|w| w.start_usecs), Some(203_000));
        assert!(c.check(&t, 206_000, 4000).is_ok());
    }

    #[test]
    fn schedule_must_start_at_zero_and_never_go_back() {
        use crate::parse::parse_script;
        let ok = parse_script("`init`\n0 close(3) = 0\n+1 close(3) = 0\n2 close(3) = 0\n")
            .expect("parses");
        assert_eq!(check_schedule(&ok), Ok(()));
        let late = parse_script("`init`\n+0.5 close(3) = 0\n").expect("parses");
        assert_eq!(
            check_schedule(&late),
            Err(ScheduleError::FirstEventNotAtZero { event: 1 })
        );
        let back =
            parse_script("0 close(3) = 0\n2 close(3) = 0\n1 close(3) = 0\n").expect("parses");
        let e = check_schedule(&back).expect_err("backward");
        assert_eq!(
            e,
            ScheduleError::TimeGoesBackward {
                event: 2,
                previous_usecs: 2_000_000,
                at_usecs: 1_000_000
            }
        );
        assert_eq!(e.to_string(), "event 2: time goes backward from 2 s to 1 s");
    }
}
