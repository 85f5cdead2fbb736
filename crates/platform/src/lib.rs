//! The only rsstack crate that talks to the operating system.
//!
//! Today it holds capture files ([`pcap`]); the packet I/O backends (TAP, AF_PACKET, AF_XDP)
//! and clocks join it as their issues land. Modules that need no `unsafe` deny it.

pub mod pcap;
