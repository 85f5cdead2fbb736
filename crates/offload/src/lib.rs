//! TCP offload by connection handoff (seed 002, Kim & Rixner; DESIGN "Handoff protocol" and
//! "Handoff engine").
//!
//! - [`Engine`]: the offload engine, sans-IO, with finite resources; it runs the real `tcp`
//!   engine (its own [`stack::Stack`] for the host's address) for the connections handed to it.
//! - [`HostOffload`]: the host's side over a shard's stack, whose bypass sockets
//!   ([`stack::Stack::tcp_offload`]) keep the application's handles: connection ids, pending
//!   handoffs, the conversation checker, NIC steering changes, failure detection.
//! - [`Policy`]: what to offload and when to take it back (`off | all | first:N | adaptive`).
//!
//! The commands are the `shard` crate's ([`shard::handoff`]). Every command either side sends
//! or receives passes its [`shard::handoff::Conversation`]; refusals are counted and ignored,
//! never a panic.
#![deny(unsafe_code)]

pub mod engine;
pub mod host;
pub mod policy;

pub use engine::{Engine, EngineConfig, EngineCounters};
pub use host::{HostConfig, HostCounters, HostOffload, OffloadError, Steer};
pub use policy::{Plan, Policy, PolicyCounters, View};
