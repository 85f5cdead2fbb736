//! The placement planner: a pure function from (topology, interface, shard count, policy) to a
//! [`Plan`]. It reads nothing and changes nothing; the runtime and `rsstack tune` execute plans.
//!
//! Policies are the Windows RSS profiles (seed 000 and `NDIS_RSS_PROFILE`) and the two IRQ
//! affinity designs of seed 004:
//!
//! | profile | CPU order | interrupt CPU | rebalanced at run time |
//! |---|---|---|---|
//! | `closest` | NIC node's cores, then nodes by distance | the shard's | yes |
//! | `closest-static` | as `closest` | the shard's | no |
//! | `numa` | round robin over nodes, NIC node first | the shard's | yes |
//! | `numa-static` | as `numa` | the shard's | no |
//! | `conservative` | as `closest` | the shard's, half the queues only | yes |
//! | `cache` | as `closest` | the shard's (same core: warm caches) | no |
//! | `spread` | as `closest` | a core of its own next to the shard's | no |
//!
//! In every profile only one hardware thread per core is used unless `allow_smt` is set, so no
//! two queues (or shards) land on SMT siblings; CPUs below `base_cpu` are left out and at most
//! `max_cpus` CPUs are used (Windows' `*RssBaseProcNumber` and `*MaxRssProcessors`).

use core::fmt;
use core::str::FromStr;

use crate::cpulist::CpuSet;
use crate::machine::Topology;
use crate::nic::{Interface, NicNode};

/// A placement profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Windows `Closest`: the processors nearest the NIC, rebalanced at run time.
    Closest,
    /// Windows `ClosestStatic`: as `Closest`, never rebalanced.
    ClosestStatic,
    /// Windows `NUMAScaling`: round robin over all nodes, rebalanced.
    Numa,
    /// Windows `NUMAScalingStatic`: as `Numa`, never rebalanced.
    NumaStatic,
    /// Windows `ConservativeScaling`: as few interrupting processors as possible.
    Conservative,
    /// Seed 004 "designing for cache coherency": interrupt and shard on the same core.
    Cache,
    /// Seed 004 "designing for maximum interrupt spread": each interrupt on a core of its own.
    Spread,
}

impl Profile {
    /// Every profile, in the order `--help` lists them.
    pub const ALL: [Profile; 7] = [
        Profile::Closest,
        Profile::ClosestStatic,
        Profile::Numa,
        Profile::NumaStatic,
        Profile::Conservative,
        Profile::Cache,
        Profile::Spread,
    ];

    /// The command-line name (`closest-static`).
    pub fn name(self) -> &'static str {
        match self {
            Profile::Closest => "closest",
            Profile::ClosestStatic => "closest-static",
            Profile::Numa => "numa",
            Profile::NumaStatic => "numa-static",
            Profile::Conservative => "conservative",
            Profile::Cache => "cache",
            Profile::Spread => "spread",
        }
    }

    /// Whether the profile lets the system move queues between its CPUs at run time.
    pub fn rebalances(self) -> bool {
        matches!(
            self,
            Profile::Closest | Profile::Numa | Profile::Conservative
        )
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Profile::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown policy {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// A profile and its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The profile.
    pub profile: Profile,
    /// CPUs numbered below this are not used (Windows' base processor).
    pub base_cpu: usize,
    /// At most this many CPUs are used (Windows' max processors); `None` = no limit.
    pub max_cpus: Option<usize>,
    /// Whether SMT siblings of a used CPU may be used too.
    pub allow_smt: bool,
}

impl Policy {
    /// `profile` with base CPU 0, no CPU limit and no SMT siblings.
    pub fn new(profile: Profile) -> Self {
        Self {
            profile,
            base_cpu: 0,
            max_cpus: None,
            allow_smt: false,
        }
    }
}

/// Where one receive queue's interrupt goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuePlan {
    /// The queue number (`rx-<queue>`).
    pub queue: usize,
    /// Its IRQ, when the interface's vectors are known.
    pub irq: Option<u32>,
    /// The CPU its interrupt is meant to run on.
    pub cpu: usize,
    /// The IRQ's affinity (`/proc/irq/<irq>/smp_affinity_list`): `cpu` and, unless
    /// `allow_smt` lets siblings carry other work, its SMT siblings — seed 004's SMT design
    /// affinitises an interrupt to the physical core and its logical sibling.
    pub affinity: CpuSet,
    /// That CPU's node.
    pub node: Option<usize>,
    /// The shard that owns the queue.
    pub shard: usize,
}

/// Where one shard runs and where its memory lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPlan {
    /// The shard number.
    pub shard: usize,
    /// The CPU its thread is pinned to.
    pub cpu: usize,
    /// That CPU's node.
    pub node: Option<usize>,
    /// The node its buffer pool and stack state are allocated on: the node of its CPU, so the
    /// thread that touches them most reads local memory.
    pub pool_node: Option<usize>,
    /// Its NIC queue; `None` when there are fewer queues than shards and the shard is fed
    /// by the other shards' software RETA.
    pub queue: Option<usize>,
}

/// A placement.
///
/// Invariants: shard CPUs are pairwise distinct, and so are queue CPUs; with `allow_smt` off
/// no two of the plan's CPUs are SMT siblings; `reta_weights.len()` is the interface's queue
/// count, non-zero exactly for the queues in `queues`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The policy planned for.
    pub policy: Policy,
    /// The NIC's node as the planner used it (`None`: unknown, all nodes used).
    pub nic_node: Option<usize>,
    /// The CPUs the policy offers, in the order it hands them out.
    pub cpu_order: Vec<usize>,
    /// One entry per used receive queue.
    pub queues: Vec<QueuePlan>,
    /// One entry per shard.
    pub shards: Vec<ShardPlan>,
    /// Per NIC receive queue: its weight in the indirection table (`ethtool -X weight …`).
    pub reta_weights: Vec<u32>,
    /// Whether the profile may move queues at run time (this plan is then the start).
    pub rebalance: bool,
    /// What the planner assumed or could not do, for a person to read.
    pub notes: Vec<String>,
}

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Zero shards asked for.
    #[error("the shard count must be at least 1")]
    NoShards,
    /// `max_cpus` of zero.
    #[error("max processors must be at least 1")]
    NoCpusAllowed,
    /// The policy offers fewer CPUs than the placement needs.
    #[error("{profile} needs {needed} CPUs for {shards} shards but offers {offered} ({why})")]
    TooFewCpus {
        /// The profile.
        profile: Profile,
        /// Shards asked for.
        shards: usize,
        /// CPUs needed.
        needed: usize,
        /// CPUs available under the policy.
        offered: usize,
        /// Which limits applied.
        why: String,
    },
}

/// Plans `shards` shards on `topo` for `nic` (or for no particular interface) under `policy`.
pub fn plan(
    topo: &Topology,
    nic: Option<&Interface>,
    shards: usize,
    policy: &Policy,
) -> Result<Plan, PlanError> {
    if shards == 0 {
        return Err(PlanError::NoShards);
    }
    if policy.max_cpus == Some(0) {
        return Err(PlanError::NoCpusAllowed);
    }
    let profile = policy.profile;
    let mut notes = Vec::new();
    let nic_node = nic_node(topo, nic, &mut notes);
    // With the node unknown, a `local_cpulist` narrower than the machine still says which
    // nodes are near.
    let near = match (nic_node, nic.and_then(|n| n.local_cpus.as_ref())) {
        (None, Some(local)) if !local.is_empty() && local.len() < topo.online.len() => {
            notes.push(format!("its local CPUs {local} go first"));
            Some(local.clone())
        }
        _ => None,
    };
    let cpu_order = cpu_order(topo, nic_node, near.as_ref(), policy);

    let nic_queues = match nic {
        Some(n) if n.rx_queues > 0 => n.rx_queues,
        Some(n) => {
            notes.push(format!(
                "{} has no queues/rx-* directories: assuming one queue per shard",
                n.name
            ));
            shards
        }
        None => shards,
    };
    let mut used_queues = shards.min(nic_queues);
    if profile == Profile::Conservative {
        used_queues = used_queues.div_ceil(2);
        notes.push(format!(
            "conservative: {used_queues} interrupting queue(s) for {shards} shard(s), as few processors as possible"
        ));
    }
    let needed = if profile == Profile::Spread {
        shards + used_queues
    } else {
        shards
    };
    if cpu_order.len() < needed {
        let mut why = vec![format!("CPUs from {}", policy.base_cpu)];
        if !policy.allow_smt && topo.has_smt() {
            why.push("one thread per core".into());
        }
        if let Some(max) = policy.max_cpus {
            why.push(format!("at most {max}"));
        }
        return Err(PlanError::TooFewCpus {
            profile,
            shards,
            needed,
            offered: cpu_order.len(),
            why: why.join(", "),
        });
    }

    let node_of = |cpu: usize| topo.cpu(cpu).and_then(|c| c.node);
    let mut next = cpu_order.iter().copied();
    let mut queue_cpus = Vec::with_capacity(used_queues);
    let mut shard_plans = Vec::with_capacity(shards);
    for shard in 0..shards {
        let has_queue = shard < used_queues;
        // `needed` CPUs exist, so `next` never runs dry.
        let irq_cpu = if has_queue && profile == Profile::Spread {
            next.next()
        } else {
            None
        };
        let cpu = next.next().unwrap_or(cpu_order[0]);
        if has_queue {
            queue_cpus.push(irq_cpu.unwrap_or(cpu));
        }
        let node = node_of(cpu);
        shard_plans.push(ShardPlan {
            shard,
            cpu,
            node,
            pool_node: node,
            queue: has_queue.then_some(shard),
        });
    }

    let irqs = nic.map(|n| n.rx_queue_irqs());
    if let Some((_, true)) = irqs {
        notes.push("queue IRQs guessed from MSI-X order (no /proc/interrupts names)".into());
    }
    let queues: Vec<QueuePlan> = queue_cpus
        .iter()
        .enumerate()
        .map(|(queue, &cpu)| QueuePlan {
            queue,
            irq: irqs
                .as_ref()
                .and_then(|(v, _)| v.get(queue).copied().flatten()),
            cpu,
            affinity: match topo.cpu(cpu) {
                Some(c) if !policy.allow_smt => c
                    .siblings
                    .iter()
                    .filter(|&s| s == cpu || s >= policy.base_cpu)
                    .collect(),
                _ => CpuSet::from_ids([cpu]),
            },
            node: node_of(cpu),
            shard: queue,
        })
        .collect();
    let reta_weights = (0..nic_queues)
        .map(|q| u32::from(q < used_queues))
        .collect();

    if let Some(home) = nic_node {
        let remote = queues.iter().filter(|q| q.node != Some(home)).count();
        if remote > 0 {
            notes.push(format!(
                "{remote} of {} queue(s) on nodes other than the NIC's node {home} (it offers too few CPUs for the policy)",
                queues.len()
            ));
        }
    }
    if shards > used_queues {
        notes.push(format!(
            "shards {}..{} have no NIC queue: the software RETA feeds them",
            used_queues,
            shards - 1
        ));
    }
    if !policy.allow_smt && topo.has_smt() {
        notes.push("SMT siblings left out: one hardware thread per core".into());
    }
    if profile.rebalances() {
        notes.push(format!(
            "{profile} rebalances at run time: this plan is its starting point"
        ));
    }
    Ok(Plan {
        policy: *policy,
        nic_node,
        cpu_order,
        queues,
        shards: shard_plans,
        reta_weights,
        rebalance: profile.rebalances(),
        notes,
    })
}

/// The NIC's node if the machine has it; otherwise `None` with a note saying what the plan
/// falls back to.
fn nic_node(topo: &Topology, nic: Option<&Interface>, notes: &mut Vec<String>) -> Option<usize> {
    let all: Vec<String> = topo.nodes.iter().map(|n| n.id.to_string()).collect();
    let fallback = format!("falling back to all nodes ({})", all.join(","));
    let Some(nic) = nic else {
        notes.push(format!("no interface given: {fallback}"));
        return None;
    };
    match nic.numa_node {
        NicNode::Known(n) if topo.node(n).is_some() => Some(n),
        NicNode::Known(n) => {
            notes.push(format!(
                "{} reports node {n}, which this machine does not have: {fallback}",
                nic.name
            ));
            None
        }
        NicNode::Unreported => {
            notes.push(format!(
                "NIC node unknown ({} numa_node is -1): {fallback}",
                nic.name
            ));
            None
        }
        NicNode::NoFile => {
            notes.push(format!(
                "NIC node unknown ({} has no device numa_node): {fallback}",
                nic.name
            ));
            None
        }
    }
}

/// The CPUs the policy hands out, in order.
fn cpu_order(
    topo: &Topology,
    nic_node: Option<usize>,
    near: Option<&CpuSet>,
    policy: &Policy,
) -> Vec<usize> {
    // Nodes nearest the NIC first (by distance, then id); all nodes by id when unknown, those
    // holding the NIC's local CPUs first.
    let mut nodes: Vec<&crate::machine::Node> =
        topo.nodes.iter().filter(|n| !n.cpus.is_empty()).collect();
    if let Some(near) = near {
        nodes.sort_by_key(|n| (n.cpus.intersection(near).is_empty(), n.id));
    }
    if let Some(home) = nic_node {
        nodes.sort_by_key(|n| {
            let d = topo.distance(home, n.id).unwrap_or(if n.id == home {
                crate::machine::LOCAL_DISTANCE
            } else {
                u32::MAX
            });
            (n.id != home, d, n.id)
        });
    }
    // Per node: one thread per core (the core's lowest CPU on the node), then the siblings.
    let per_node: Vec<Vec<usize>> = nodes
        .iter()
        .map(|node| {
            let mut firsts = Vec::new();
            let mut rest = Vec::new();
            for core in &topo.cores {
                let mut threads = core
                    .cpus
                    .iter()
                    .filter(|&c| node.cpus.contains(c) && c >= policy.base_cpu);
                if let Some(first) = threads.next() {
                    firsts.push(first);
                    rest.extend(threads);
                }
            }
            if policy.allow_smt {
                firsts.extend(rest);
            }
            firsts
        })
        .collect();
    let mut order = Vec::new();
    if matches!(policy.profile, Profile::Numa | Profile::NumaStatic) {
        let longest = per_node.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            order.extend(per_node.iter().filter_map(|cpus| cpus.get(i)));
        }
    } else {
        order = per_node.concat();
    }
    if let Some(max) = policy.max_cpus {
        order.truncate(max);
    }
    order
}
