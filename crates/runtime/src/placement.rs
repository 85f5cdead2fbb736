//! Executing a placement plan ([`topo::Plan`]): which CPU each shard's thread is pinned to,
//! which NUMA node it reports and allocates on.
//!
//! [`HostConfig::place`] copies a plan's per-shard CPUs into [`HostConfig::cores`], its
//! per-shard pool nodes into [`HostConfig::nodes`], and turns on [`HostConfig::node_memory`]
//! when the planned machine has more than one node. Each shard thread then, in order:
//!
//! 1. pins itself to its CPU (`platform::affinity::pin_current_thread`; a failure is counted
//!    in `ShardReport::pin_failed` and the shard runs unpinned);
//! 2. when `node_memory` is on and its node is known, sets its memory policy to prefer that
//!    node (`platform::mempolicy::prefer_node`; the outcome is `ShardReport::node_memory`);
//! 3. builds its NIC queue's buffers, its stack and its application: first touch from the
//!    pinned thread puts them on its node.
//!
//! `ShardInfo::numa_node` (and so `app::Conn::numa_node`) is the plan's node for the shard;
//! without a plan it is the node of the shard's CPU read from sysfs (0 when unpinned).

use topo::{Plan, Topology};

use crate::{HostConfig, RuntimeError};

/// What a shard thread did about node-local memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeMemory {
    /// No node was planned for the shard (no plan, or its CPU's node unknown): first touch
    /// from its thread is all there is.
    NotAsked,
    /// A node was planned but the machine has one node: the policy would change nothing, so
    /// it was not set.
    SingleNode(u16),
    /// `set_mempolicy(MPOL_PREFERRED, {node})` succeeded for the shard's thread.
    Preferred(u16),
    /// The call failed (the OS error number; `EPERM` under a seccomp profile, `ENOSYS`
    /// without NUMA support, 0 when the OS has no such call): the shard ran on with the
    /// default policy.
    Failed { node: u16, errno: i32 },
}

impl NodeMemory {
    /// The shard asked for a node's memory and did not get the policy.
    pub fn failed(self) -> bool {
        matches!(self, NodeMemory::Failed { .. })
    }

    /// A short name for reports: `not-asked`, `single-node`, `preferred`, `failed`.
    pub fn name(self) -> &'static str {
        match self {
            NodeMemory::NotAsked => "not-asked",
            NodeMemory::SingleNode(_) => "single-node",
            NodeMemory::Preferred(_) => "preferred",
            NodeMemory::Failed { .. } => "failed",
        }
    }
}

impl HostConfig {
    /// Places the host's shards as `plan` says: shard `i` on `plan.shards[i].cpu`, reporting
    /// and preferring `plan.shards[i].pool_node` (its CPU's node). `topo` is the machine the
    /// plan was made for; node-local memory policies are set only when it has more than one
    /// node.
    ///
    /// Errors (the configuration is then unchanged): the plan places a different number of
    /// shards than `self.shards`, or names a node beyond `u16`.
    pub fn place(&mut self, plan: &Plan, topo: &Topology) -> Result<(), RuntimeError> {
        if plan.shards.len() != usize::from(self.shards) {
            return Err(RuntimeError::Config(format!(
                "the plan places {} shard(s), the host has {}",
                plan.shards.len(),
                self.shards
            )));
        }
        let mut cores = Vec::with_capacity(plan.shards.len());
        let mut nodes = Vec::with_capacity(plan.shards.len());
        for s in &plan.shards {
            cores.push(s.cpu);
            let node = s
                .pool_node
                .or(s.node)
                .map(|n| {
                    u16::try_from(n).map_err(|_| {
                        RuntimeError::Config(format!("shard {}: node {n} out of range", s.shard))
                    })
                })
                .transpose()?;
            nodes.push(node);
        }
        self.cores = Some(cores);
        self.nodes = nodes;
        self.node_memory = topo.nodes.len() > 1;
        Ok(())
    }
}

/// The node shard `i` reports: the planned node, else its CPU's node from sysfs, else 0.
pub(crate) fn shard_node(cfg_nodes: &[Option<u16>], i: usize, core: Option<usize>) -> u16 {
    planned_node(cfg_nodes, i)
        .unwrap_or_else(|| core.map_or(0, platform::affinity::numa_node_of_cpu))
}

/// Sets the calling shard thread's memory policy for `node` when asked (see [`NodeMemory`]).
pub(crate) fn apply_node_memory(planned: Option<u16>, node_memory: bool) -> NodeMemory {
    match planned {
        None => NodeMemory::NotAsked,
        Some(node) if !node_memory => NodeMemory::SingleNode(node),
        Some(node) => match platform::mempolicy::prefer_node(usize::from(node)) {
            Ok(()) => NodeMemory::Preferred(node),
            Err(e) => NodeMemory::Failed {
                node,
                errno: e.raw_os_error().unwrap_or(0),
            },
        },
    }
}

/// The planned node of shard `i` (the list wraps as `cores` does), if any.
pub(crate) fn planned_node(cfg_nodes: &[Option<u16>], i: usize) -> Option<u16> {
    if cfg_nodes.is_empty() {
        None
    } else {
        cfg_nodes.get(i % cfg_nodes.len()).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_plan_reports_the_cpu_node_and_asks_for_nothing() {
        assert_eq!(shard_node(&[], 0, None), 0);
        assert_eq!(planned_node(&[], 3), None);
        assert_eq!(apply_node_memory(None, true), NodeMemory::NotAsked);
    }

    #[test]
    fn planned_nodes_wrap_like_cores_and_win_over_sysfs() {
        let nodes = [Some(1), None];
        assert_eq!(shard_node(&nodes, 0, Some(0)), 1);
        assert_eq!(shard_node(&nodes, 2, None), 1);
        assert_eq!(shard_node(&nodes, 1, None), 0);
        assert_eq!(planned_node(&nodes, 3), None);
    }

    #[test]
    fn one_node_machines_skip_the_policy() {
        assert_eq!(apply_node_memory(Some(0), false), NodeMemory::SingleNode(0));
    }

    #[test]
    fn asking_for_node_0_on_a_thread_is_preferred_or_a_reported_failure() {
        let got = std::thread::spawn(|| apply_node_memory(Some(0), true))
            .join()
            .expect("thread");
        match got {
            NodeMemory::Preferred(0) => {}
            NodeMemory::Failed { node: 0, .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}
