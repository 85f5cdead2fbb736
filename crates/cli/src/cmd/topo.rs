//! `rsstack topo`: the machine condensed (nodes, CPUs, cores and SMT siblings, caches,
//! distances), an interface's locality, and the placement plan of a policy — read from `/` or
//! from any sysfs/procfs root (`--sysfs-root`, e.g. an unpacked recorded machine).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::{Value, json};
use topo::{
    Cache, CacheKind, CpuSet, Interface, NicNode, Plan, PlanError, Policy, Profile, TopoError,
    Topology,
};

use super::CliError;

#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Read sysfs and procfs under DIR instead of / (e.g. an unpacked recorded machine).
    #[arg(long, value_name = "DIR", default_value = "/")]
    sysfs_root: PathBuf,
    /// The network interface whose locality to show and to plan for.
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// Placement policy: closest, closest-static, numa, numa-static, conservative (Windows RSS
    /// profiles), cache (interrupt and shard on one core) or spread (interrupts on cores of
    /// their own).
    #[arg(long, value_name = "P", default_value = "closest", value_parser = parse_profile)]
    policy: Profile,
    /// Shards to place. Default: the interface's receive queues (or the first node's cores),
    /// reduced to what the policy can place.
    #[arg(long, value_name = "N")]
    shards: Option<usize>,
    /// Leave out CPUs numbered below N (Windows' base processor).
    #[arg(long, value_name = "N", default_value_t = 0)]
    base_cpu: usize,
    /// Use at most N CPUs (Windows' max processors).
    #[arg(long, value_name = "N")]
    max_cpus: Option<usize>,
    /// Allow SMT siblings of used CPUs (two queues or shards on one core's threads).
    #[arg(long)]
    smt: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn parse_profile(text: &str) -> Result<Profile, String> {
    text.parse()
}

fn usage(msg: impl std::fmt::Display) -> CliError {
    CliError::Usage(msg.to_string())
}

/// A missing root or interface is the user's argument; an unreadable or malformed file under
/// an existing root is a failure of the machine's description.
pub(crate) fn discovery_error(err: TopoError) -> CliError {
    match err {
        TopoError::NotSysfs { .. } => usage(format!("--sysfs-root: {err}")),
        TopoError::NoInterface { .. } => usage(format!("--iface: {err}")),
        other => CliError::Failed(other.to_string()),
    }
}

pub fn run(args: TopoArgs, out: &mut impl Write) -> Result<(), CliError> {
    if args.shards == Some(0) {
        return Err(usage("--shards must be at least 1"));
    }
    if args.max_cpus == Some(0) {
        return Err(usage("--max-cpus must be at least 1"));
    }
    if !args.sysfs_root.is_dir() {
        return Err(usage(format!(
            "--sysfs-root: {}: no such directory",
            args.sysfs_root.display()
        )));
    }
    let topo = Topology::discover(&args.sysfs_root).map_err(discovery_error)?;
    let nic = match &args.iface {
        Some(name) => Some(Interface::discover(&args.sysfs_root, name).map_err(discovery_error)?),
        None => None,
    };
    let policy = Policy {
        profile: args.policy,
        base_cpu: args.base_cpu,
        max_cpus: args.max_cpus,
        allow_smt: args.smt,
    };
    let plan = make_plan(&topo, nic.as_ref(), args.shards, &policy)?;
    if args.json {
        let value = json!({
            "machine": machine_json(&topo),
            "interface": nic.as_ref().map(interface_json),
            "plan": plan_json(&plan),
        });
        writeln!(out, "{value}")?;
    } else {
        write_machine(out, &topo)?;
        if let Some(nic) = &nic {
            write_interface(out, nic)?;
        }
        write_plan(out, &plan, &topo)?;
    }
    Ok(())
}

/// The plan for `--shards`, or for the default shard count reduced until the policy can
/// place it.
fn make_plan(
    topo: &Topology,
    nic: Option<&Interface>,
    shards: Option<usize>,
    policy: &Policy,
) -> Result<Plan, CliError> {
    if let Some(n) = shards {
        return topo::plan(topo, nic, n, policy).map_err(|e| usage(format!("--shards {n}: {e}")));
    }
    let wanted = match nic {
        Some(n) if n.rx_queues > 0 => n.rx_queues,
        _ => topo.nodes[0]
            .cpus
            .iter()
            .filter(|&c| topo.cores.iter().any(|core| core.cpus.first() == Some(c)))
            .count()
            .max(1),
    };
    match topo::plan(topo, nic, wanted, policy) {
        Err(PlanError::TooFewCpus { offered, .. }) => {
            let fit = if policy.profile == Profile::Spread {
                offered / 2
            } else {
                offered
            };
            let mut plan = topo::plan(topo, nic, fit.max(1), policy).map_err(usage)?;
            plan.notes.insert(
                0,
                format!("default shard count {wanted} reduced to {fit}: the policy offers {offered} CPUs"),
            );
            Ok(plan)
        }
        other => other.map_err(usage),
    }
}

fn gib(kib: u64) -> String {
    format!("{:.2} GiB", kib as f64 / (1024.0 * 1024.0))
}

fn write_machine(out: &mut impl Write, t: &Topology) -> Result<(), CliError> {
    let threads = t.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(1);
    writeln!(
        out,
        "machine: {} ({} node(s), {} package(s), {} core(s), {} CPU(s) online {})",
        t.root.display(),
        t.nodes.len(),
        t.packages.len(),
        t.cores.len(),
        t.online.len(),
        t.online
    )?;
    if !t.offline.is_empty() {
        writeln!(out, "offline CPUs: {}", t.offline)?;
    }
    for node in &t.nodes {
        let mem = node
            .mem_total_kib
            .map(gib)
            .unwrap_or_else(|| "memory unknown".into());
        writeln!(out, "node {}: CPUs {}, {mem}", node.id, node.cpus)?;
    }
    if t.distances.len() > 1 {
        write!(out, "distances:")?;
        for node in &t.nodes {
            write!(out, " {:>4}", node.id)?;
        }
        writeln!(out)?;
        for (node, row) in t.nodes.iter().zip(&t.distances) {
            write!(out, "  node {:>3}", node.id)?;
            for d in row {
                write!(out, " {d:>4}")?;
            }
            writeln!(out)?;
        }
        if let Some((from, to, f)) = t.worst_remote_access() {
            writeln!(
                out,
                "remote memory: up to {f:.1}x a local access (node {from} -> node {to}, \
                 from the distance table): what a shard pays for a buffer on the wrong node"
            )?;
        }
    }
    if threads > 1 {
        let pairs: Vec<String> = t
            .cores
            .iter()
            .filter(|c| c.cpus.len() > 1)
            .map(|c| {
                c.cpus
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .collect();
        writeln!(
            out,
            "SMT: up to {threads} threads per core; siblings {}",
            abbreviate(&pairs, 16)
        )?;
    } else {
        writeln!(out, "SMT: none (one thread per core)")?;
    }
    for line in cache_lines(t) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The first `max` items joined by spaces, then `… (N in all)`.
fn abbreviate(items: &[String], max: usize) -> String {
    if items.len() <= max {
        return items.join(" ");
    }
    format!("{} … ({} in all)", items[..max].join(" "), items.len())
}

fn cache_name(c: &Cache) -> String {
    let suffix = match &c.kind {
        CacheKind::Data => "d",
        CacheKind::Instruction => "i",
        CacheKind::Unified => "",
        CacheKind::Other(_) => "?",
    };
    format!("L{}{suffix}", c.level)
}

/// One line per cache kind: size, count, and who shares each instance.
fn cache_lines(t: &Topology) -> Vec<String> {
    if t.caches.is_empty() {
        return vec!["caches: none reported".into()];
    }
    let mut lines = Vec::new();
    let mut kinds: Vec<(u8, CacheKind)> =
        t.caches.iter().map(|c| (c.level, c.kind.clone())).collect();
    kinds.dedup();
    for (level, kind) in kinds {
        let group: Vec<&Cache> = t
            .caches
            .iter()
            .filter(|c| c.level == level && c.kind == kind)
            .collect();
        let size = group[0]
            .size_kib
            .map(|k| format!("{k} KiB"))
            .unwrap_or_else(|| "size unknown".into());
        let sharing = if group.iter().all(|c| c.cpus.len() == 1) {
            "one per CPU".to_string()
        } else if group
            .iter()
            .all(|c| t.cores.iter().any(|core| core.cpus == c.cpus))
        {
            "one per core".to_string()
        } else {
            let sets: Vec<String> = group.iter().map(|c| c.cpus.to_string()).collect();
            format!("shared by {}", abbreviate(&sets, 8))
        };
        lines.push(format!(
            "cache {}: {size} ×{}, {sharing}",
            cache_name(group[0]),
            group.len()
        ));
    }
    lines
}

fn node_text(node: NicNode) -> String {
    match node {
        NicNode::Known(n) => format!("node {n}"),
        NicNode::Unreported => "node unknown (numa_node -1)".into(),
        NicNode::NoFile => "node unknown (no device numa_node)".into(),
    }
}

fn write_interface(out: &mut impl Write, nic: &Interface) -> Result<(), CliError> {
    let local = nic
        .local_cpus
        .as_ref()
        .map(|s| format!("local CPUs {s}"))
        .unwrap_or_else(|| "local CPUs unknown".into());
    let driver = nic
        .driver
        .as_deref()
        .unwrap_or(if nic.has_device { "?" } else { "virtual" });
    writeln!(
        out,
        "interface {}: {}, {local}, driver {driver}, {} rx / {} tx queue(s)",
        nic.name,
        node_text(nic.numa_node),
        nic.rx_queues,
        nic.tx_queues
    )?;
    if nic.msi.is_empty() {
        writeln!(out, "  no MSI/MSI-X vectors listed")?;
    } else {
        let irqs = CpuSet::from_ids(nic.msi.iter().map(|v| v.irq as usize));
        let mode = nic.msi[0].mode.as_deref().unwrap_or("msi");
        writeln!(out, "  {} {mode} vector(s): IRQs {irqs}", nic.msi.len())?;
        for v in nic.msi.iter().filter(|v| v.name.is_some()) {
            writeln!(out, "  IRQ {}: {}", v.irq, v.name.as_deref().unwrap_or(""))?;
        }
    }
    Ok(())
}

fn opt_node(node: Option<usize>) -> String {
    node.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
}

fn write_plan(out: &mut impl Write, plan: &Plan, t: &Topology) -> Result<(), CliError> {
    writeln!(
        out,
        "plan: {}, {} shard(s), {} queue(s), NIC node {}{}",
        plan.policy.profile,
        plan.shards.len(),
        plan.queues.len(),
        plan.nic_node
            .map(|n| n.to_string())
            .unwrap_or_else(|| "unknown".into()),
        if plan.rebalance {
            ", rebalanced at run time"
        } else {
            ", static"
        }
    )?;
    writeln!(
        out,
        "  CPU order: {}",
        abbreviate(
            &plan
                .cpu_order
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>(),
            32
        )
    )?;
    for q in &plan.queues {
        let irq = q
            .irq
            .map(|i| format!("IRQ {i}"))
            .unwrap_or_else(|| "IRQ ?".into());
        writeln!(
            out,
            "  queue {}: {irq} -> CPU {} (node {}), affinity {}, shard {}",
            q.queue,
            q.cpu,
            opt_node(q.node),
            q.affinity,
            q.shard
        )?;
    }
    for s in &plan.shards {
        let queue = s
            .queue
            .map(|q| format!("queue {q}"))
            .unwrap_or_else(|| "no queue (software RETA)".into());
        writeln!(
            out,
            "  shard {}: CPU {} (node {}), pool on node {}, {queue}",
            s.shard,
            s.cpu,
            opt_node(s.node),
            opt_node(s.pool_node)
        )?;
    }
    let weights: Vec<String> = plan.reta_weights.iter().map(|w| w.to_string()).collect();
    writeln!(out, "  RETA weights: {}", weights.join(" "))?;
    if !plan.notes.is_empty() || !t.notes.is_empty() {
        writeln!(out, "notes:")?;
        for note in plan.notes.iter().chain(&t.notes) {
            writeln!(out, "  - {note}")?;
        }
    }
    Ok(())
}

fn set_json(s: &CpuSet) -> Value {
    json!(s.ids())
}

fn machine_json(t: &Topology) -> Value {
    json!({
        "root": t.root.display().to_string(),
        "online": set_json(&t.online),
        "offline": set_json(&t.offline),
        "cores": t.cores.iter().map(|c| json!({"package": c.package, "cpus": set_json(&c.cpus)})).collect::<Vec<_>>(),
        "packages": t.packages.iter().map(|p| json!({"id": p.id, "cpus": set_json(&p.cpus)})).collect::<Vec<_>>(),
        "caches": t.caches.iter().map(|c| json!({
            "name": cache_name(c), "level": c.level, "size_kib": c.size_kib, "cpus": set_json(&c.cpus),
        })).collect::<Vec<_>>(),
        "nodes": t.nodes.iter().map(|n| json!({
            "id": n.id, "cpus": set_json(&n.cpus), "mem_total_kib": n.mem_total_kib,
        })).collect::<Vec<_>>(),
        "numa_from_sysfs": t.numa == topo::NumaSource::Sysfs,
        "distances": t.distances,
        "notes": t.notes,
    })
}

fn interface_json(nic: &Interface) -> Value {
    json!({
        "name": nic.name,
        "has_device": nic.has_device,
        "driver": nic.driver,
        "numa_node": nic.numa_node.known(),
        "numa_node_text": node_text(nic.numa_node),
        "local_cpus": nic.local_cpus.as_ref().map(set_json),
        "msi": nic.msi.iter().map(|v| json!({"irq": v.irq, "mode": v.mode, "name": v.name})).collect::<Vec<_>>(),
        "rx_queues": nic.rx_queues,
        "tx_queues": nic.tx_queues,
    })
}

fn plan_json(plan: &Plan) -> Value {
    json!({
        "policy": plan.policy.profile.name(),
        "base_cpu": plan.policy.base_cpu,
        "max_cpus": plan.policy.max_cpus,
        "allow_smt": plan.policy.allow_smt,
        "nic_node": plan.nic_node,
        "cpu_order": plan.cpu_order,
        "queues": plan.queues.iter().map(|q| json!({
            "queue": q.queue, "irq": q.irq, "cpu": q.cpu, "affinity": set_json(&q.affinity),
            "node": q.node, "shard": q.shard,
        })).collect::<Vec<_>>(),
        "shards": plan.shards.iter().map(|s| json!({
            "shard": s.shard, "cpu": s.cpu, "node": s.node, "pool_node": s.pool_node, "queue": s.queue,
        })).collect::<Vec<_>>(),
        "reta_weights": plan.reta_weights,
        "rebalance": plan.rebalance,
        "notes": plan.notes,
    })
}
