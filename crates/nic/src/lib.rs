//! A software multi-queue NIC, modelled on the Intel 82599 and NDIS RSS (seeds 000 and 004),
//! sans-IO: no clock, no thread; every entry point takes `now_ns`, outputs are polled.
//!
//! What a received frame meets, in order:
//!
//! 1. **Steering** ([`Nic::receive`]): exact-match filters (82599 Flow Director), else RSS
//!    (Toeplitz hash → RETA, from the `rss` crate), else the default queue. The hash and its
//!    type travel in the [`RxDescriptor`]'s [`RxMeta`] so the stack never computes it again.
//! 2. **Checksum verification** (receive checksum offload): verdicts in the [`RxMeta`], which
//!    the stack trusts (it skips verifying what the NIC verified good).
//! 3. **Receive coalescing** (GRO/RSC, see the `rxq` module docs for the merge rules).
//! 4. **A bounded receive ring** per queue; a full ring drops and counts.
//! 5. **Interrupt moderation** ([`ModerationConfig`]): interval, packet threshold,
//!    low-latency (PSH) interrupts, adaptive interval; a fired queue yields a [`Wakeup`].
//! 6. **NAPI/DPC polling** ([`Nic::poll_rx`]) with a budget; re-armed only once drained.
//!
//! Transmit: [`Nic::transmit`] into a bounded ring, [`Nic::poll_tx`] to the wire with TSO
//! and checksum completion ([`TxOffload`]).
//!
//! Every queue keeps a [`QueueCounters`] snapshot with a named counter per drop reason.
//! Buffers circulate through a bounded pool ([`Nic::take_buffer`], [`Nic::recycle`]).
//!
//! ```
//! use nic::{ModerationConfig, Nic, NicConfig, RxVerdict};
//!
//! let mut nic = Nic::new(NicConfig {
//!     queues: 2,
//!     moderation: ModerationConfig::fixed(50_000), // at most one wake-up per 50 µs per queue
//!     ..NicConfig::default()
//! })
//! .expect("valid config");
//! // An ARP frame: not IP, so no hash; it lands on the default queue 0.
//! let mut arp = vec![0u8; 60];
//! arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
//! assert!(matches!(nic.receive(1_000, arp), RxVerdict::Queued { queue: 0, .. }));
//! // The idle queue fires at once; the driver polls it with the NAPI budget.
//! let wakeup = nic.poll_wakeup(1_000).expect("queue 0 fired");
//! let mut descriptors = Vec::new();
//! let poll = nic
//!     .poll_rx(wakeup.queue, nic::BUDGET_DEFAULT_PACKETS, 1_000, &mut descriptors)
//!     .expect("queue exists");
//! assert!(poll.drained && descriptors.len() == 1);
//! for d in descriptors {
//!     nic.recycle(d.frame);
//! }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod counters;
mod layout;
mod moderation;
mod nic;
mod pool;
mod rxq;
mod tso;

pub use config::{
    AdaptiveModeration, AtrConfig, BUDGET_DEFAULT_PACKETS, ConfigError, GRO_IP_BYTES_MAX,
    GroConfig, LLI_PORTS_MAX, LliPorts, ModerationConfig, NicConfig, POOL_BUFFERS_MAX_DEFAULT,
    QUEUES_MAX, RX_FRAME_BYTES_MAX_DEFAULT, RX_RING_SLOTS_DEFAULT, TX_RING_SLOTS_DEFAULT,
    TooManyLliPorts,
};
pub use counters::QueueCounters;
pub use moderation::FireCause;
pub use nic::{Nic, RxDrop, RxPoll, RxVerdict, TxPoll, TxVerdict, Wakeup};
pub use pool::PoolCounters;
pub use rxq::RxDescriptor;
pub use tso::{TxChecksum, TxOffload, TxOffloadError};
/// The receive metadata a descriptor carries, shared with the stack (from `wire`).
pub use wire::{CsumVerdict, RssHashType, RxChecksum, RxMeta};
