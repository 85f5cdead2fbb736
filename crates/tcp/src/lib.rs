//! Sans-IO TCP connection engine (RFC 9293) — one connection's TCB plus the helpers a host
//! stack needs around it (initial sequence numbers, SYN cookies).
//!
//! This crate never reads a clock, spawns a thread or makes a system call. Every input carries
//! `now: u64` in nanoseconds from an arbitrary, monotonic origin; every output is polled.
//!
//! # Driver contract
//!
//! The host stack owns listeners, the 4-tuple table, IP and checksums. For each connection it:
//!
//! 1. creates the engine with [`Connection::connect`] (active open) or
//!    [`Connection::accept`] (passive open, from a SYN that arrived on a listening port);
//! 2. feeds inputs as they happen, each with the current `now`:
//!    - [`Connection::handle_segment`] for every segment of this 4-tuple (checksum already
//!      verified, demultiplexed by the stack);
//!    - [`Connection::handle_timeout`] when `now` reaches the deadline last returned by
//!      [`Connection::poll_timeout`] (calling it early is harmless);
//!    - application calls: [`Connection::send`], [`Connection::recv`],
//!      [`Connection::shutdown_write`], [`Connection::close`], [`Connection::abort`];
//! 3. after every input, drains the outputs:
//!    - [`Connection::poll_transmit`] until it returns `None` — each call yields at most one
//!      segment whose payload was copied into the buffer the caller passed (typically the
//!      payload area of the outgoing frame; pass at least the MSS);
//!    - [`Connection::poll_event`] until `None`, handing events to the application;
//!    - [`Connection::poll_timeout`] to re-arm its timer wheel (the deadline may move earlier
//!      or later after any input);
//! 4. drops the engine once [`Connection::is_finished`] (CLOSED with no RST left to send).
//!
//! The order inside step 3 does not matter for correctness; transmitting first gets ACKs out
//! sooner. Within one `now`, calling `handle_*` several times before polling is allowed (a
//! receive burst): ACK decisions (delayed ACK, every second full segment) use the accumulated
//! state, and each out-of-order segment of the burst still gets its own duplicate ACK.
//!
//! For listeners, [`listen::classify_listen_segment`], [`listen::admit_syn`] and
//! [`listen::reset_reply`] implement RFC 9293 §3.10.7.1–§3.10.7.2 decisions, and
//! [`isn::SynCookies`] with [`Connection::from_syn_cookie`] the stateless path.
//!
//! # What is implemented
//!
//! RFC 9293 state machine (simultaneous open and close, half-close, TIME-WAIT = 2·MSL, the
//! four-case acceptability test, SWS avoidance on both sides, Nagle, zero-window probing,
//! keepalive, user timeout); RFC 5961 (exact-RST reset, challenge ACKs for in-window RST and
//! any SYN, ACK range check, per-connection rate limit); RFC 7323 (window scale, timestamps
//! with RTTM and PAWS incl. the 24-day rule); RFC 2018/2883/6675 (SACK generation, D-SACK,
//! bounded validated scoreboard, pipe-based recovery); RFC 8985 RACK-TLP (time-based loss
//! detection with the reordering timer and DSACK-adapted window, on SACK connections by
//! default; tail loss probes as an option); RFC 6937 PRR as an option; RFC 5681/6582/3042/6928
//! (NewReno, limited transmit, IW10, restart after idle) and RFC 9438 CUBIC; RFC 6298 RTO with
//! Karn and backoff; RFC 6528 ISNs; SYN cookies keeping MSS, window scale and SACK; RFC 7413 Fast Open on the
//! server side (cookies, data in SYN, sending in SYN-RECEIVED; off by default); RFC 3168 ECN
//! (off by default); bounded
//! memory everywhere; [`ConnectionSnapshot`] for handoff.
//!
//! Not implemented: urgent data (the URG flag is ignored, data is delivered inline), RFC 6675 rescue retransmissions.
//!
//! # Layout
//!
//! - [`config`]: every knob, with units and defaults;
//! - [`connection`]: the state machine, input, timers, output;
//! - [`cc`]: NewReno and CUBIC window arithmetic behind [`cc::CongestionController`];
//! - [`rtt`]: RFC 6298 estimator;
//! - [`ring`], [`ooo`]: bounded receive/send storage and the out-of-order map;
//! - [`rack`]: RACK loss detection (RFC 8985 §6) over a bounded table of transmit records;
//! - [`fastopen`]: TCP Fast Open (RFC 7413) settings, server cookies and the SYN decision;
//! - [`isn`]: RFC 6528 initial sequence numbers and SYN cookies (SipHash-2-4);
//! - [`listen`]: a listener's decisions (segment class, RST reply, accept / SYN cookie / drop
//!   under bounded half-open and accept queues);
//! - [`snapshot`]: [`ConnectionSnapshot`] export/import for handoff;
//! - [`snapshot_codec`]: its versioned, checked byte encoding;
//! - [`time_wait`]: TIME-WAIT as a compact record (FreeBSD `tcptw`), what the stack keeps
//!   once a closed connection's TCB is freed.
#![deny(unsafe_code)]

pub mod cc;
pub mod config;
pub mod connection;
pub mod fastopen;
pub mod isn;
pub mod listen;
pub mod ooo;
pub mod plpmtud;
pub mod rack;
pub mod ring;
pub mod rtt;
pub mod snapshot;
pub mod snapshot_codec;
mod tcb_addrs;
pub mod time_wait;

pub use config::{
    Config, CongestionControl, EcnMode, IntoSharedConfig, KeepaliveConfig, SharedConfig,
};
pub use connection::{
    AcceptError, CaState, CloseReason, Connection, Counters, EcnState, Error, Event, Negotiated,
    RECORDS_OUTSTANDING_MAX, SEND_BUFFER_AUTOTUNE_MAX_BYTES, SKB_OVERHEAD_BYTES, State,
    SummedInput, TCP_INFINITE_SSTHRESH, TcpInfo, TxTrain, ecn_flag, tcpi_opt,
};
pub use rack::RackPathState;
pub use snapshot::{ConnectionSnapshot, SOCKET_EXT_BYTES_MAX, SnapshotError};
pub use snapshot_codec::CodecError;
