//! `--placement POLICY` for `demo`, `serve`, `ttcp` (and `get`): plan this machine's shards
//! with `topo::plan` and hand the plan to the runtime (`HostConfig::place`).
//!
//! Without `--placement` nothing changes: shard *i* on core *i* (`demo`), or `--cores`, or
//! unpinned. With it, the topology is read from `/`, the interface's locality from
//! `--iface` when one is given (a TAP device or a pcap replay has none: the plan then uses
//! every node and says so), and each shard is pinned to the plan's CPU and reports (and, on a
//! machine of several nodes, prefers the memory of) the plan's node. A policy the machine
//! cannot satisfy (e.g. `spread` needs two cores per shard) is a usage error naming the
//! limit.

use std::path::Path;

use runtime::HostConfig;
use topo::{Interface, Plan, Policy, Profile, Topology};

use super::CliError;
use super::topo::discovery_error;

/// Plans `host.shards` shards on this machine with `profile` (near `iface` when given) and
/// places the host accordingly. Returns the plan (for the summary).
pub fn place(
    host: &mut HostConfig,
    profile: Profile,
    iface: Option<&str>,
) -> Result<Plan, CliError> {
    place_on(Path::new("/"), host, profile, iface)
}

/// [`place`] on the machine described under `root`.
pub fn place_on(
    root: &Path,
    host: &mut HostConfig,
    profile: Profile,
    iface: Option<&str>,
) -> Result<Plan, CliError> {
    let topo = Topology::discover(root).map_err(discovery_error)?;
    let nic = match iface {
        Some(name) => Some(Interface::discover(root, name).map_err(discovery_error)?),
        None => None,
    };
    let plan = topo::plan(
        &topo,
        nic.as_ref(),
        usize::from(host.shards),
        &Policy::new(profile),
    )
    .map_err(|e| {
        CliError::Usage(format!(
            "--placement {profile} with {} shard(s): {e}",
            host.shards
        ))
    })?;
    host.place(&plan, &topo)
        .map_err(|e| CliError::Failed(format!("--placement {profile}: {e}")))?;
    Ok(plan)
}

/// `cpu/node` per shard, e.g. `0/0 1/0`, for one-line summaries.
pub fn shard_list(plan: &Plan) -> String {
    plan.shards
        .iter()
        .map(|s| {
            let node = s
                .pool_node
                .or(s.node)
                .map_or("?".to_string(), |n| n.to_string());
            format!("{}/{node}", s.cpu)
        })
        .collect::<Vec<_>>()
        .join(" ")
}
