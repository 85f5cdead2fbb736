//! packetdrill-compatible conformance tooling, independent of the stack:
//!
//! - [`ast`]: the script language as Rust types;
//! - [`parse`]: a parser with line/column errors ([`parse_script`]);
//! - [`print`]: canonical script text (`Display`), which parses back to an equal AST;
//! - [`time`]: event times against a virtual clock with `--tolerance_usecs`;
//! - [`matcher`]: script-relative ↔ live sequence numbers ([`matcher::SeqSpace`]), checking an
//!   actual outbound [`wire::tcp::TcpRepr`] against an expected line, building an inbound one,
//!   and the TSO super-segment accumulator;
//! - [`inventory`]: what a set of scripts needs from the stack (calls, socket options, TCP
//!   options).
//!
//! The executor that drives rsstack's sans-IO stack through a script is built on top of these.
#![deny(unsafe_code)]

pub mod ast;
pub mod inventory;
pub mod matcher;
pub mod parse;
pub mod print;
pub mod time;

pub use ast::{Action, Direction, Event, EventTime, Script, TcpLine, TcpOption, TcpOptionsSpec};
pub use parse::{ParseError, ParseErrorKind, parse_event, parse_script};
