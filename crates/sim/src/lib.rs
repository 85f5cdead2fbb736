//! Deterministic discrete-event network simulation.
//!
//! A [`World`] holds sans-IO [`Host`]s joined by full-duplex links and runs them on a virtual
//! clock (u64 ns). Each link direction models a bounded transmit queue with a serialization
//! rate, propagation delay, jitter, an MTU and a chain of per-packet [`FaultRule`]s (loss,
//! duplication, reordering, corruption, flaps, blackholes, user closures); every drop path
//! has a named counter ([`ChannelCounters`]).
//!
//! Determinism: all randomness comes from [`SimRng`] streams forked from the world's seed;
//! events are ordered by `(time, insertion sequence)`; no hash map is iterated. Every
//! delivery, drop and timeout is folded into a 64-bit [`World::digest`], so "same seed ⇒ same
//! trace" is one `assert_eq!`. [`run_seeds`] runs a scenario over many seeds and names the
//! ones that fail.
//!
//! ```
//! use sim::{ChannelConfig, Loss, PortId, World, toy::{Recorder, SeqSender}};
//!
//! let mut world = World::new(7);
//! let tx = world.add_host(Box::new(SeqSender::new(PortId(0), 100, 0, 10_000)));
//! let rx = world.add_host(Box::new(Recorder::default()));
//! let link = world
//!     .connect((tx, PortId(0)), (rx, PortId(0)), ChannelConfig::default().delay_ns(1_000))
//!     .expect("fresh ports");
//! world.add_fault_both(link, Loss { p: 0.1 });
//! world.run_until_idle(10_000).expect("finite run");
//! let got = world.host::<Recorder>(rx).map_or(0, |r| r.frames.len());
//! assert!(got < 100 && got > 70);
//! ```
#![deny(unsafe_code)]

pub mod fault;
pub mod host;
pub mod link;
pub mod rng;
pub mod scenario;
pub mod toy;
pub mod trace;
pub mod world;

pub use fault::{
    Blackhole, BurstLoss, Corrupt, DropReason, Duplicate, FaultRule, Flap, Loss, PacketCtx,
    Reorder, Verdict, Window,
};
pub use host::{Host, HostId, PortId};
pub use link::{ChannelConfig, ChannelCounters, Dir, JitterOrder, LinkId};
pub use rng::SimRng;
pub use scenario::{SeedFailure, SeedFailures, run_seeds, run_seeds_parallel, seeds_from_env_or};
pub use trace::{Fnv64, TraceEvent, frame_digest};
pub use world::{ConnectError, FrameTap, RunError, World, WorldCounters};
