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
//! A soak test is a scenario function of the seed, run over many seeds, with a checker
//! beside the simulation and an end-to-end check after it:
//!
//! ```
//! use sim::toy::{GbnReceiver, GbnSender};
//! use sim::{ChannelConfig, Loss, PortId, World, run_seeds};
//!
//! let data = vec![42u8; 3_000];
//! let outcome = run_seeds(0..20, |seed| {
//!     let mut w = World::new(seed);
//!     let tx = w.add_host(Box::new(GbnSender::new(PortId(0), data.clone(), 500, 4, 200_000)));
//!     let rx = w.add_host(Box::new(GbnReceiver::new(PortId(0))));
//!     let cfg = ChannelConfig::default().rate_bps(10_000_000).delay_ns(20_000);
//!     let link = w.connect((tx, PortId(0)), (rx, PortId(0)), cfg).map_err(|e| e.to_string())?;
//!     w.add_fault_both(link, Loss { p: 0.1 });
//!     // Beside the run: delivered bytes are always a prefix of the data.
//!     w.run_until_idle_checked(100_000, |w| match w.host::<GbnReceiver>(rx) {
//!         Some(r) if data.starts_with(&r.delivered) => Ok(()),
//!         _ => Err("receiver delivered something that was not sent".into()),
//!     })
//!     .map_err(|e| e.to_string())?;
//!     // After it: everything arrived, once, in order.
//!     match w.host::<GbnReceiver>(rx) {
//!         Some(r) if r.delivered == data => Ok(()),
//!         _ => Err("transfer incomplete".into()),
//!     }
//! });
//! // On failure the error (and stderr) names every failing seed; replay with SIM_SEED=<seed>.
//! assert!(outcome.is_ok(), "{outcome:?}");
//! ```
//!
//! Modules: [`rng`] (the PRNG), [`host`] (the trait and its call order), [`link`] (the
//! per-direction link model), [`fault`] (rules and verdicts), [`world`] (event loop),
//! [`trace`] (digest), [`scenario`] (seed runners), [`toy`] (small hosts for tests), [`net`]
//! (hosts running a real `stack` with an application), [`workload`] (the TCP soak workloads).
#![deny(unsafe_code)]

pub mod fault;
pub mod host;
pub mod link;
pub mod net;
pub mod rng;
pub mod scenario;
pub mod toy;
pub mod trace;
pub mod workload;
pub mod world;

pub use fault::{
    Blackhole, BurstLoss, Corrupt, DropReason, Duplicate, FaultRule, Flap, Loss, PacketCtx,
    Reorder, Verdict, Window,
};
pub use host::{Host, HostId, PortId};
pub use link::{ChannelConfig, ChannelCounters, Dir, JitterOrder, LinkId};
pub use rng::SimRng;
pub use scenario::{SeedFailure, SeedFailures, run_seeds, run_seeds_parallel, seeds_from_env_or};
pub use trace::{Fnv64, TraceDigest, TraceEvent, frame_digest};
pub use world::{ConnectError, FrameTap, RunError, World, WorldCounters};
