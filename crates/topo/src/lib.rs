//! Machine topology and network placement.
//!
//! [`Topology::discover`] reads a sysfs/procfs root (`/` for this machine, or an unpacked
//! recording of another) into a plain description: online CPUs, SMT siblings, cores,
//! packages, caches and the CPUs sharing them, NUMA nodes with their CPUs, memory and
//! distance matrix. [`Interface::discover`] reads one network interface's locality: its PCI
//! device's NUMA node and local CPUs, its MSI/MSI-X vectors and their `/proc/interrupts`
//! names, its queue counts. [`plan`] turns (topology, interface, shard count, policy) into a
//! [`Plan`]: the CPU of each queue's interrupt and of each shard, each shard's buffer-pool
//! node, RETA weights, and notes saying what was assumed. [`tune`] turns a plan into the steps
//! that tune the Linux kernel's own stack for it (`ethtool`, IRQ affinities, RPS/XPS,
//! irqbalance), each with the [`Reading`] that undoes it.
//!
//! Discovery only reads files; it never panics on a missing or odd file: what a machine may
//! lack is an `Option`, an empty list or a [`Topology::notes`] line, and what makes a
//! description impossible is a [`TopoError`] naming the path.

mod cpulist;
mod error;
mod machine;
mod nic;
mod plan;
mod read;
mod tune;

pub use cpulist::{CPU_ID_MAX, CpuListError, CpuSet};
pub use error::TopoError;
pub use machine::{
    Cache, CacheKind, Core, Cpu, LOCAL_DISTANCE, Node, NumaSource, Package, Topology,
};
pub use nic::{Interface, MsiVector, NicNode};
pub use plan::{Plan, PlanError, Policy, Profile, QueuePlan, ShardPlan, plan};
pub use tune::{
    Action, ChannelStyle, Moderation, Reading, Saved, Step, TuneOptions, Tuning, restore, tune,
};
