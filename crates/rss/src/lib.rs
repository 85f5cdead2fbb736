//! Receive-Side Scaling: Toeplitz hash, hash-field selection, symmetric modes, the RETA,
//! exact-match steering filters and source-port picking.
//!
//! The pieces, in the order a received packet meets them (DESIGN.md, "The receive path"):
//!
//! 1. [`FlowFields::from_frame`] / [`HashInput::from_frame`] parse an Ethernet frame and pick
//!    the [`HashType`] a NIC would apply given the enabled [`HashTypes`] (fragments fall back
//!    to the address-only hash; non-IP gets none).
//! 2. [`FilterTable`] exact-match 5-tuple filters take priority ([`Steering`]), then the
//!    wildcard [`RuleSet`] (`ethtool -N`-style [`FlowRule`]s, first match wins).
//! 3. [`RssHasher`] hashes the [`HashInput`] with the Toeplitz function ([`Toeplitz`], checked
//!    against the bit-serial [`toeplitz_reference`]) under a [`SymmetricMode`].
//! 4. [`Reta`] maps the hash's low bits to a queue.
//!
//! To follow the load, [`Rebalancer`] (or the memoryless [`plan_moves`]) turns per-bucket load
//! into a bounded list of [`BucketMove`]s that lower the imbalance ([`imbalance`]).
//!
//! For the transmit side, [`pick_source_port`] chooses an ephemeral port whose reply traffic
//! hashes back to the opening queue.
//!
//! Everything here is sans-IO and deterministic: no clock, no thread, no randomness.
//!
//! ```
//! use core::net::Ipv4Addr;
//! use rss::{HashInput, PortPair, Reta, RssHasher, SteerHow, Steering};
//!
//! // Microsoft's first verification vector: 66.9.149.187:2794 → 161.142.100.80:1766.
//! let flow = HashInput::V4 {
//!     src: Ipv4Addr::new(66, 9, 149, 187),
//!     dst: Ipv4Addr::new(161, 142, 100, 80),
//!     ports: Some(PortPair { src: 2794, dst: 1766 }),
//! };
//! let hasher = RssHasher::default(); // default key, not symmetric
//! assert_eq!(hasher.hash(&flow), 0x51cc_c178);
//!
//! // 128-entry RETA spread round-robin over 8 queues (`ethtool -X equal 8`).
//! let reta = Reta::with_equal(128, 8)?;
//! assert_eq!(reta.queue_for_hash(0x51cc_c178), (0x78 % 8) as u16);
//!
//! // Whole-frame steering: filters first, then RSS; non-IP frames get no hash.
//! let steering = Steering { reta, ..Steering::default() };
//! let arp = [0u8; 12].iter().chain(&[0x08, 0x06]).chain(&[0u8; 28]).copied().collect::<Vec<_>>();
//! assert_eq!(steering.steer_frame(&arp)?.how, SteerHow::NoHash);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod frame;
mod input;
mod key;
pub mod rebalance;
mod reta;
mod rules;
mod sport;
mod steer;
mod toeplitz;

pub use frame::{EthernetWalk, FlowFields, FrameError, IpPair, PROTO_TCP, PROTO_UDP};
pub use input::{
    HASH_INPUT_MAX_BYTES, HashInput, HashType, HashTypes, IpVersion, L4Kind, PortPair, RssHasher,
    SymmetricMode, UnknownHashType,
};
pub use key::{KEY_LEN_BYTES, KeyError, RssKey};
pub use rebalance::{
    BucketMove, Periodic, PeriodicReport, REBALANCE_SHARDS_MAX, RebalanceConfig,
    RebalanceConfigError, RebalanceError, RebalanceInput, RebalanceInputSlice, RebalanceReport,
    Rebalancer, imbalance, plan_moves, plan_moves_into, shard_loads,
};
pub use reta::{RETA_SIZE_DEFAULT, RETA_SIZE_MAX, Reta, RetaError};
pub use rules::{FlowRule, RULES_MAX, RuleAction, RuleParseError, RuleSet, TooManyRules};
pub use sport::{SourcePortQuery, SteeredPortsQuery, pick_source_port, ports_steered_to};
pub use steer::{
    FILTERS_MAX_DEFAULT, FilterError, FilterTable, FiveTuple, SteerDecision, SteerHow, Steering,
};
pub use toeplitz::{HASH_BURST_TUPLES, TABLE_BYTES, TABLE_POSITIONS, Toeplitz, toeplitz_reference};
