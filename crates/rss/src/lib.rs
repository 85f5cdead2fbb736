//! Receive-Side Scaling: Toeplitz hash, hash-field selection, symmetric modes, the RETA,
//! exact-match steering filters and source-port picking.
//!
//! The pieces, in the order a received packet meets them (DESIGN.md, "The receive path"):
//!
//! 1. [`FlowFields::from_frame`] / [`HashInput::from_frame`] parse an Ethernet frame and pick
//!    the [`HashType`] a NIC would apply given the enabled [`HashTypes`] (fragments fall back
//!    to the address-only hash; non-IP gets none).
//! 2. [`FilterTable`] exact-match 5-tuple filters take priority ([`Steering`]).
//! 3. [`RssHasher`] hashes the [`HashInput`] with the Toeplitz function ([`Toeplitz`], checked
//!    against the bit-serial [`toeplitz_reference`]) under a [`SymmetricMode`].
//! 4. [`Reta`] maps the hash's low bits to a queue.
//!
//! For the transmit side, [`pick_source_port`] chooses an ephemeral port whose reply traffic
//! hashes back to the opening queue.
//!
//! Everything here is sans-IO and deterministic: no clock, no thread, no randomness.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod frame;
mod input;
mod key;
mod reta;
mod sport;
mod steer;
mod toeplitz;

pub use frame::{FlowFields, FrameError, IpPair, PROTO_TCP, PROTO_UDP};
pub use input::{
    HASH_INPUT_MAX_BYTES, HashInput, HashType, HashTypes, IpVersion, L4Kind, PortPair, RssHasher,
    SymmetricMode,
};
pub use key::{KEY_LEN_BYTES, KeyError, RssKey};
pub use reta::{RETA_SIZE_DEFAULT, RETA_SIZE_MAX, Reta, RetaError};
pub use sport::{SourcePortQuery, pick_source_port};
pub use steer::{
    FILTERS_MAX_DEFAULT, FilterError, FilterTable, FiveTuple, SteerDecision, SteerHow, Steering,
};
pub use toeplitz::{TABLE_BYTES, TABLE_POSITIONS, Toeplitz, toeplitz_reference};
