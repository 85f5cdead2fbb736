//! One shard's host stack, sans-IO (DESIGN.md principle 1): an Ethernet interface with IPv4
//! and IPv6 addresses, ARP and IPv6 neighbour discovery, IP input with fragment reassembly,
//! ICMP echo and errors, UDP sockets, and TCP (over `tcp::Connection`) with listeners, a
//! 4-tuple connection table and a socket-handle API with readiness events.
//!
//! The stack never reads a clock, spawns a thread or makes a system call: every entry point
//! takes `now` (u64 nanoseconds, never going backwards) and every output is polled. Every
//! queue and table is bounded ([`Limits`]) and every drop path increments a named counter
//! ([`Counters`], a snapshot by value).
//!
//! # Driver contract
//!
//! 1. Build a [`Stack`] from a [`StackConfig`].
//! 2. Feed every received frame to [`Stack::receive`] with the RSS hash the NIC carried (or
//!    `None`); call [`Stack::handle_timeout`] once `now` reaches [`Stack::poll_timeout`].
//! 3. After any input or application call, drain [`Stack::poll_transmit`] (frames for the
//!    wire) and [`Stack::poll_event`] (readiness for the application).
//! 4. When connections move between stacks ([`Stack::tcp_export`] / [`Stack::tcp_import`]),
//!    drain [`Stack::poll_forward`] too: frames caught mid-move, for the new owner, once a
//!    destination was set with [`Stack::tcp_set_moved_forward`].
//!
//! Readiness is edge-triggered: a condition is reported once when it becomes true, so an
//! application drains (`udp_recv_from`, `tcp_recv`, `tcp_accept`) until `WouldBlock`.
//!
//! # Decisions
//!
//! - **Hash once** (principle 4), where it is safe: with [`RssConfig`] a connection's flow
//!   hash (its RETA bucket) is the carried hash, and the stack computes the same Toeplitz hash
//!   only for connections it opens. The connection table is indexed by that hash only when
//!   the driver declares the key secret ([`RssConfig::key_is_secret`]); under a known key (the
//!   default, the symmetric one) a peer could pick tuples that share a Toeplitz hash, so the
//!   table is indexed by the stack's keyed software hash of the tuple instead. Without an RSS
//!   key the stack hashes tuples itself and ignores carried hashes. Active opens pick source
//!   ports whose replies hash back to this shard when a home queue is configured.
//! - **IPv4 output** fragments datagrams that exceed the MTU unless DF is set; TCP always
//!   sets DF and clamps its MSS to the MTU. **IPv6 output** fragments at the source.
//! - **Reassembly** (both families): bounded datagrams, bytes and time; any overlap drops the
//!   whole datagram (RFC 5722; our policy for IPv4) and condemns it until its timer expires;
//!   exact duplicates are dropped alone; atomic IPv6 fragments bypass the table (RFC 6946).
//! - **Neighbour discovery** is the RFC 4861 subset a host needs to talk: NS/NA, solicited-
//!   node multicast, a reachable time, bounded retries. Duplicate address detection, router
//!   discovery, NUD probing states and redirects are not implemented (addresses, prefixes and
//!   gateways are configured).
//! - **ICMP errors** sent: port unreachable (UDP), protocol unreachable (IPv4), with the
//!   RFC 1812 §4.3.2.3 / RFC 4443 §2.4(c) quoting limits and a token-bucket rate limit.
//!   Received unreachables reach the sending socket (UDP: a pending error; TCP: abort while
//!   in SYN-SENT). Path MTU messages are counted, not acted on.
//! - **SYN floods**: a per-listener SYN backlog, then SYN cookies (RFC 4987 §3.6); the
//!   listener's decisions are `tcp::listen`'s.
//! - **Handoff** (DESIGN invariant 4): an exported connection leaves a *moved marker* in the
//!   connection table. Its segments are never answered with RST: they are dropped before any
//!   processing (`tcp_drop_moved`) or forwarded in arrival order to the new owner
//!   ([`Stack::poll_forward`]). The marker keeps the slot, so importing the connection back
//!   returns the same [`SocketHandle`]; it goes on import, on [`Stack::tcp_release_moved`],
//!   or after `limits.tcp_moved_marker_ns`.
//!
//! # Layout
//!
//! [`Stack`] owns its parts and splits borrows between them; each part is a module that
//! writes only its own fields: IP input (`ip_in`), egress (`egress`: transmit queue, buffer
//! pool, neighbours, IP identification, frame building), ICMP (`icmp`), UDP (`udp`), the
//! socket table (`sockets`) and TCP (`tcp_sockets`, `tcp_input`, `tcp_api`).
#![deny(unsafe_code)]

pub mod bypass;
pub mod config;
mod conn_table;
pub mod counters;
mod egress;
mod icmp;
mod index_set;
mod ip_in;
pub mod neighbor;
pub mod overload;
pub mod reasm;
pub mod socket;
mod sockets;
mod stack;
mod tcp_api;
mod tcp_config_share;
mod tcp_fastopen;
pub mod tcp_fastopen_client;
mod tcp_idle;
mod tcp_input;
pub mod tcp_mem;
mod tcp_move;
pub mod tcp_notify;
mod tcp_output;
mod tcp_prefetch;
pub mod tcp_sockets;
mod tcp_time_wait;
mod tcp_train;
mod time_wait;
mod timer_wheel;
mod tx_pool;
mod udp;

/// Marks the branch that calls it as unlikely (stable Rust has no `likely`/`unlikely`): the
/// receive path's drops call it, so LLVM's static block frequencies keep the deep per-segment
/// path (through the TCP table lookup) hot and inline the lookup there. Costs nothing on the
/// hot path; a call on the drop paths.
#[cold]
#[inline(never)]
pub(crate) fn cold_path() {}

pub use bypass::{BypassOp, ConnStatus};
pub use config::{
    InterfaceConfig, Ipv4Cidr, Ipv6Cidr, Limits, RssConfig, StackConfig, TSO_PAYLOAD_BYTES_MAX,
    TxOffloadCaps,
};
pub use counters::Counters;
pub use socket::{
    EchoReply, Readiness, SocketError, SocketEvent, SocketHandle, SocketOption, UdpDatagram,
};
pub use stack::{FlowHint, RxLookahead, Stack, earliest_deadline};
/// The TCP engine's per-connection counters, as [`Stack::tcp_counters`] sums them.
pub use tcp::Counters as TcpCounters;
pub use tcp_fastopen_client::{CachedServer, ClientCache, ClientSyn};
pub use tcp_mem::MemState;
pub use tcp_move::{BucketConn, MoveClass, Unowned};
pub use tcp_notify::{
    Notification, PathMtuDiscovery, SendFlags, SocketOptions, TxTimestampKind, TxTimestamping,
};
pub use tcp_sockets::FourTuple;
/// The receive metadata [`Stack::receive`] takes (re-exported from `wire`).
pub use wire::{CsumVerdict, RssHashType, RxChecksum, RxMeta, TxMeta};
