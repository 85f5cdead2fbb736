//! A software multi-queue NIC, modelled on the Intel 82599 and NDIS RSS (seeds 000 and 004),
//! sans-IO: no clock, no thread; every entry point takes `now_ns`, outputs are polled.
//!
//! What a received frame meets, in order:
//!
//! 1. **Steering** ([`Nic::receive`]): exact-match filters (82599 Flow Director), else RSS
//!    (Toeplitz hash → RETA, from the `rss` crate), else the default queue. The hash and its
//!    type travel in the [`RxDescriptor`] so the stack never computes it again.
//! 2. **Checksum verification** (receive checksum offload): flags in the descriptor.
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
    AdaptiveModeration, BUDGET_DEFAULT_PACKETS, ConfigError, GRO_IP_BYTES_MAX, GroConfig,
    ModerationConfig, NicConfig, POOL_BUFFERS_MAX_DEFAULT, QUEUES_MAX, RX_FRAME_BYTES_MAX_DEFAULT,
    RX_RING_SLOTS_DEFAULT, TX_RING_SLOTS_DEFAULT,
};
pub use counters::QueueCounters;
pub use layout::{CsumStatus, RxChecksum};
pub use moderation::FireCause;
pub use nic::{Nic, RxDrop, RxPoll, RxVerdict, TxPoll, TxVerdict, Wakeup};
pub use pool::PoolCounters;
pub use rxq::RxDescriptor;
pub use tso::{TxChecksum, TxOffload, TxOffloadError};
