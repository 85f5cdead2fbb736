//! The only rsstack crate that talks to the operating system.
//!
//! It holds capture files ([`pcap`]) and the TAP backend ([`tap`]); AF_PACKET, AF_XDP and clocks
//! join it as their issues land. `unsafe` is allowed here and nowhere else in the workspace;
//! every `unsafe` block carries a `SAFETY:` comment, and modules that need none deny it.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod pcap;
pub mod tap;
