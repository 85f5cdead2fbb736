//! The only rsstack crate that talks to the operating system.
//!
//! It holds capture files ([`pcap`]), the TAP backend ([`tap`]) and the virtio-net offload header ([`vnet`]) and AF_PACKET with TPACKET_V2 or
//! TPACKET_V3 rings ([`af_packet`]) and a send-only packet socket ([`af_packet_tx`]), AF_XDP sockets with the XDP redirect program ([`af_xdp`], [`bpf`]); process CPU time and the clock rate ([`cpu`]), and sub-millisecond waits on a descriptor ([`wait`]) with a doorbell other threads ring ([`doorbell`]); the calling thread's NUMA memory policy ([`mempolicy`]); freed heap memory back to the OS and the resident set size ([`heap`]); a counting global allocator for allocation tests ([`alloc_count`]); boxes and byte buffers in huge-page chunks ([`huge_box`], [`huge_bytes`]) and vectors advised for huge pages ([`huge_vec`]); the Toeplitz hash by carry-less multiplication with run-time CPU detection ([`toeplitz`]; eight IPv4 4-tuples per call on AVX-512 VPCLMULQDQ and GFNI: [`toeplitz_burst`]). `unsafe` is allowed here and nowhere else in the workspace;
//! every `unsafe` block carries a `SAFETY:` comment, and modules that need none deny it.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod af_packet;
pub mod af_packet_tx;
pub mod af_xdp;
pub mod affinity;
pub mod alloc_count;
pub mod bpf;
pub mod checksum;
pub mod cpu;
pub mod doorbell;
pub mod heap;
pub mod huge_box;
pub mod huge_bytes;
pub mod huge_vec;
pub mod mempolicy;
pub mod pcap;
pub mod prefetch;
mod sys;
pub mod tap;
pub mod toeplitz;
pub mod toeplitz_burst;
pub mod vnet;
pub mod wait;
