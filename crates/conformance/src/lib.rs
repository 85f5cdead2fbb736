//! packetdrill-compatible conformance tooling, independent of the stack:
//!
//! - [`ast`]: the script language as Rust types;
//! - [`parse`]: a parser with line/column errors ([`parse_script`]);
//! - [`mod@print`]: canonical script text (`Display`), which parses back to an equal AST;
//! - [`time`]: event times against a virtual clock with `--tolerance_usecs`;
//! - [`matcher`]: script-relative ↔ live sequence numbers ([`matcher::SeqSpace`]), checking an
//!   actual outbound [`wire::tcp::TcpRepr`] against an expected line, building an inbound one,
//!   and the TSO super-segment accumulator;
//! - [`exec`]: the executor — runs a script against a live `stack::Stack` on a virtual clock
//!   ([`exec::run_script`]) under a [`exec::Profile`] (`linux-compat`: the Linux defaults the
//!   Google corpus assumes; `freebsd-compat`: FreeBSD's option layout and defaults);
//!   `rsstack conformance DIR` runs a whole corpus, and `RESULTS.md` says where the corpus
//!   stands and why;
//! - [`pycode`]: the evaluator of `%{ }%` blocks (the Python subset the corpus uses), against
//!   `tcp_info` fields the executor binds;
//! - [`inventory`]: what a set of scripts needs from the stack (calls, socket options, TCP
//!   options); `cargo run -p conformance --example inventory` prints it for the corpus.
//!
//! # How an executor drives these pieces
//!
//! For each event of [`Script::events`], in order, with one [`time::TimeCursor`] per script
//! and one [`matcher::MatchContext`] per connection (tolerance from
//! [`Script::tolerance_usecs`], TS tick from [`Script::tcp_ts_tick_usecs`]):
//!
//! 1. `cursor.window(&event.time)` gives when to act (`start_usecs`); advance the virtual
//!    clock to it (running the stack's timers on the way).
//! 2. Inbound TCP line: `ctx.build_inbound(line, ports, &payload)` → hand the `TcpRepr` to
//!    the stack. Outbound line: collect what the stack sends, feed each segment to a
//!    [`matcher::SuperSegment`] for the line until [`matcher::Progress::Complete`], and check
//!    the time of the last one with `cursor.check`. System call: issue it at `start_usecs`;
//!    check its return time with `cursor.check` (for `a...b`, the return must come at `b`).
//!    A `%{ }%` block is evaluated against the stack's `tcp_info` ([`pycode`]). Shell lines
//!    (after applying the sysctls they set), UDP, ICMP, unknown calls and
//!    [`Action::Unsupported`] are skipped and counted ([`Script::stats`]).
//! 3. `cursor.advance(&event.time, done_usecs)` with the time the executor finished with the
//!    event (see [`time`] for which time that is per event kind).
//!
//! ```
//! use conformance::matcher::{MatchContext, Progress, SuperSegment};
//! use conformance::{Action, parse_script};
//! use wire::tcp::{SeqNumber, TcpFlags};
//!
//! let script = parse_script(
//!     "0 < S 0:0(0) win 32792 <mss 1000,nop,wscale 7>\n\
//!      +0 > S. 0:0(0) ack 1 <mss 1460,nop,wscale 8>\n",
//! )?;
//! let [syn, syn_ack] = &script.events[..] else { unreachable!() };
//! let (Action::Tcp(syn), Action::Tcp(syn_ack)) = (&syn.action, &syn_ack.action) else {
//!     unreachable!()
//! };
//! let mut ctx = MatchContext::new(SeqNumber(1_000));
//! let inbound = ctx.build_inbound(syn, 40_000, 8_080, &[])?;
//! assert_eq!(inbound.seq_number, SeqNumber(1_000));
//!
//! // Pretend the stack answered with ISN 77 but forgot the window scale option.
//! let mut answer = inbound;
//! answer.flags = TcpFlags::SYN | TcpFlags::ACK;
//! answer.seq_number = SeqNumber(77);
//! answer.ack_number = SeqNumber(1_001);
//! answer.max_seg_size = Some(1460);
//! answer.window_scale = None;
//! let err = SuperSegment::new(syn_ack).push(&mut ctx, &answer).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "option mismatch: expected <mss 1460,nop,wscale 8>, got <mss 1460>"
//! );
//! answer.window_scale = Some(8);
//! assert_eq!(SuperSegment::new(syn_ack).push(&mut ctx, &answer)?, Progress::Complete);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]

pub mod ast;
pub mod exec;
pub mod inventory;
pub mod matcher;
pub mod parse;
pub mod print;
pub mod pycode;
pub mod time;

pub use ast::{Action, Direction, Event, EventTime, Script, TcpLine, TcpOption, TcpOptionsSpec};
pub use parse::{ParseError, ParseErrorKind, parse_event, parse_script};
