//! One shard's host stack, sans-IO (DESIGN.md principle 1): an Ethernet interface with IPv4
//! and IPv6 addresses, ARP and IPv6 neighbour discovery, IP input with fragment reassembly,
//! ICMP echo and errors, UDP sockets, and TCP demultiplexing with a socket-handle API and
//! readiness events.
//!
//! The stack never reads a clock, spawns a thread or makes a system call: every entry point
//! takes `now` (u64 nanoseconds) and every output is polled. Every queue and table is bounded
//! and every drop path increments a named counter ([`Counters`]).
//!
//! Start at [`Stack`]: build one from a [`StackConfig`], feed frames to [`Stack::receive`],
//! drain [`Stack::poll_transmit`] and [`Stack::poll_event`], and call
//! [`Stack::handle_timeout`] at [`Stack::poll_timeout`].
#![deny(unsafe_code)]

pub mod config;
pub mod counters;
pub mod neighbor;
pub mod reasm;
pub mod socket;
mod stack;
pub mod tcp_sockets;

pub use config::{InterfaceConfig, Ipv4Cidr, Ipv6Cidr, Limits, RssConfig, StackConfig};
pub use counters::Counters;
pub use socket::{
    EchoReply, Readiness, SocketError, SocketEvent, SocketHandle, SocketOption, UdpDatagram,
};
pub use stack::Stack;
pub use tcp_sockets::FourTuple;
