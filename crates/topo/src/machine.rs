//! The machine: CPUs, SMT siblings, cores, packages, caches and NUMA nodes read from
//! `<root>/sys/devices/system/{cpu,node}`.

use std::path::{Path, PathBuf};

use crate::cpulist::CpuSet;
use crate::error::TopoError;
use crate::read::{cpulist_opt, cpus_list_or_mask, int_opt, numbered_entries, text_opt};

/// ACPI SLIT's distance of a node to itself; remote distances are relative to it (21 = 2.1×).
pub const LOCAL_DISTANCE: u32 = 10;

/// One online logical CPU (hardware thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpu {
    /// The kernel's CPU number.
    pub id: usize,
    /// `topology/physical_package_id`, when present.
    pub package: Option<u32>,
    /// `topology/core_id` (unique within a package only), when present.
    pub core_id: Option<u32>,
    /// The NUMA node whose `cpulist` names this CPU (node 0 when the machine has no NUMA
    /// directory), `None` when no node does.
    pub node: Option<usize>,
    /// The online hardware threads of this CPU's core, this CPU included (never empty).
    pub siblings: CpuSet,
}

/// One physical core: the set of its online hardware threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Core {
    /// The package the core's first thread reports.
    pub package: Option<u32>,
    /// Its online threads (SMT siblings); never empty.
    pub cpus: CpuSet,
}

/// One physical package (socket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// `physical_package_id`.
    pub id: u32,
    /// Its online CPUs.
    pub cpus: CpuSet,
}

/// A cache's `type` file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CacheKind {
    /// Data cache (L1d).
    Data,
    /// Instruction cache (L1i).
    Instruction,
    /// Unified cache (L2, L3).
    Unified,
    /// Anything else the kernel writes, kept verbatim.
    Other(String),
}

/// One cache instance and the online CPUs that share it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    /// 1, 2, 3…
    pub level: u8,
    /// Data, instruction or unified.
    pub kind: CacheKind,
    /// Size in KiB, when `size` is present.
    pub size_kib: Option<u64>,
    /// The online CPUs sharing it (`shared_cpu_list`/`shared_cpu_map`); never empty.
    pub cpus: CpuSet,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The node number.
    pub id: usize,
    /// Its online CPUs (a memory-only node has none).
    pub cpus: CpuSet,
    /// `MemTotal` of its `meminfo`, in KiB, when present.
    pub mem_total_kib: Option<u64>,
}

/// Where the node list came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaSource {
    /// `sys/devices/system/node/node*` directories.
    Sysfs,
    /// No node directory at all (a kernel without NUMA): one node 0 holding every online CPU
    /// is assumed, with no memory size and the local distance only.
    Absent,
}

/// A machine as its sysfs describes it.
///
/// Invariants: `cpus` is sorted by id and holds exactly the CPUs of `online`; every CPU is in
/// exactly one core; `nodes` is sorted by id and never empty; `distances` is either empty
/// (unknown) or a `nodes.len()` × `nodes.len()` matrix in `nodes` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// The directory read (`/` for this machine).
    pub root: PathBuf,
    /// The online CPUs.
    pub online: CpuSet,
    /// CPUs present or possible but offline (from `cpu/offline` or per-CPU `online` files).
    pub offline: CpuSet,
    /// One entry per online CPU.
    pub cpus: Vec<Cpu>,
    /// Physical cores, ordered by their first CPU.
    pub cores: Vec<Core>,
    /// Packages, ordered by id (empty when no CPU reports one).
    pub packages: Vec<Package>,
    /// Distinct cache instances, ordered by level, kind and first CPU (empty when the kernel
    /// exposes none).
    pub caches: Vec<Cache>,
    /// NUMA nodes.
    pub nodes: Vec<Node>,
    /// Whether `nodes` was read or assumed.
    pub numa: NumaSource,
    /// `distances[i][j]`: the distance from `nodes[i]` to `nodes[j]` (10 = local).
    pub distances: Vec<Vec<u32>>,
    /// Oddities met on the way (a file missing or inconsistent), each naming its path.
    pub notes: Vec<String>,
}

impl Topology {
    /// Reads the machine under `root` (`/` for this one).
    pub fn discover(root: impl AsRef<Path>) -> Result<Self, TopoError> {
        discover(root.as_ref())
    }

    /// The CPU with this id, if online.
    pub fn cpu(&self, id: usize) -> Option<&Cpu> {
        self.cpus
            .binary_search_by_key(&id, |c| c.id)
            .ok()
            .map(|i| &self.cpus[i])
    }

    /// The node with this id.
    pub fn node(&self, id: usize) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The distance between two nodes (by id), when the matrix is known.
    pub fn distance(&self, from: usize, to: usize) -> Option<u32> {
        let i = self.nodes.iter().position(|n| n.id == from)?;
        let j = self.nodes.iter().position(|n| n.id == to)?;
        self.distances.get(i)?.get(j).copied()
    }

    /// The cost of a memory access from a CPU of node `from` to memory on node `to`, relative
    /// to a local access, as the firmware's distance table states it (ACPI SLIT: 10 is local,
    /// 21 means 2.1×). `None` when the matrix is unknown. An estimate of latency, not a
    /// measurement: it is what the planner and the cost model charge a buffer on the wrong node.
    pub fn remote_access_factor(&self, from: usize, to: usize) -> Option<f64> {
        let local = self.distance(from, from)?;
        let remote = self.distance(from, to)?;
        (local > 0).then(|| f64::from(remote) / f64::from(local))
    }

    /// The largest [`Topology::remote_access_factor`] over every pair of nodes, with the pair
    /// (from, to); `None` on a single node or when the matrix is unknown.
    pub fn worst_remote_access(&self) -> Option<(usize, usize, f64)> {
        let mut worst: Option<(usize, usize, f64)> = None;
        for a in &self.nodes {
            for b in &self.nodes {
                if a.id == b.id {
                    continue;
                }
                if let Some(f) = self.remote_access_factor(a.id, b.id) {
                    if worst.is_none_or(|(_, _, w)| f > w) {
                        worst = Some((a.id, b.id, f));
                    }
                }
            }
        }
        worst
    }

    /// Whether any core has more than one online thread.
    pub fn has_smt(&self) -> bool {
        self.cores.iter().any(|c| c.cpus.len() > 1)
    }
}

fn discover(root: &Path) -> Result<Topology, TopoError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let Some(cpu_entries) = numbered_entries(&cpu_dir, "cpu")? else {
        return Err(TopoError::NotSysfs {
            path: cpu_dir,
            reason: "no such directory".into(),
        });
    };
    let mut notes = Vec::new();
    let (online, offline) = online_cpus(&cpu_dir, &cpu_entries)?;
    if online.is_empty() {
        return Err(TopoError::NotSysfs {
            path: cpu_dir,
            reason: "no online CPU".into(),
        });
    }

    let mut cpus = Vec::with_capacity(online.len());
    let mut caches: Vec<Cache> = Vec::new();
    for id in online.iter() {
        let dir = cpu_dir.join(format!("cpu{id}"));
        if !dir.is_dir() {
            notes.push(format!(
                "{}: online CPU without a directory; no topology for it",
                dir.display()
            ));
        }
        let topo = dir.join("topology");
        let package = small_id(&topo.join("physical_package_id"))?;
        let core_id = small_id(&topo.join("core_id"))?;
        let mut siblings = cpus_list_or_mask(&topo, "thread_siblings_list", "thread_siblings")?
            .map(|s| s.intersection(&online))
            .unwrap_or_default();
        if !siblings.contains(id) {
            siblings = CpuSet::from_ids(siblings.iter().chain([id]));
        }
        read_caches(&dir.join("cache"), id, &online, &mut caches)?;
        cpus.push(Cpu {
            id,
            package,
            core_id,
            node: None,
            siblings,
        });
    }
    caches.sort_by(|a, b| {
        (a.level, &a.kind, a.cpus.first()).cmp(&(b.level, &b.kind, b.cpus.first()))
    });

    let cores = group_cores(&cpus);
    let packages = group_packages(&cpus);
    let (nodes, numa, distances) = read_nodes(root, &online, &mut notes)?;
    for cpu in &mut cpus {
        cpu.node = nodes.iter().find(|n| n.cpus.contains(cpu.id)).map(|n| n.id);
    }
    let unplaced: CpuSet = cpus
        .iter()
        .filter(|c| c.node.is_none())
        .map(|c| c.id)
        .collect();
    if !unplaced.is_empty() {
        notes.push(format!("CPUs {unplaced} belong to no NUMA node's cpulist"));
    }
    Ok(Topology {
        root: root.to_path_buf(),
        online,
        offline,
        cpus,
        cores,
        packages,
        caches,
        nodes,
        numa,
        distances,
        notes,
    })
}

/// A small non-negative id file; `None` when absent or negative (-1 = "not reported").
fn small_id(path: &Path) -> Result<Option<u32>, TopoError> {
    Ok(int_opt(path)?.and_then(|v| u32::try_from(v).ok()))
}

/// `cpu/online` when present; otherwise every `cpuN` directory whose `online` file is not `0`
/// (CPU 0 usually has none: it cannot be taken offline).
fn online_cpus(
    cpu_dir: &Path,
    entries: &[(usize, PathBuf)],
) -> Result<(CpuSet, CpuSet), TopoError> {
    if let Some(online) = cpulist_opt(&cpu_dir.join("online"))? {
        let offline = cpulist_opt(&cpu_dir.join("offline"))?.unwrap_or_default();
        return Ok((online, offline));
    }
    let mut online = Vec::new();
    let mut offline = Vec::new();
    for (id, dir) in entries {
        match int_opt(&dir.join("online"))? {
            Some(0) => offline.push(*id),
            _ => online.push(*id),
        }
    }
    Ok((CpuSet::from_ids(online), CpuSet::from_ids(offline)))
}

fn read_caches(
    dir: &Path,
    cpu: usize,
    online: &CpuSet,
    caches: &mut Vec<Cache>,
) -> Result<(), TopoError> {
    let Some(indexes) = numbered_entries(dir, "index")? else {
        return Ok(());
    };
    for (_, index) in indexes {
        let Some(level) = int_opt(&index.join("level"))? else {
            continue;
        };
        let level = u8::try_from(level).map_err(|_| TopoError::Parse {
            path: index.join("level"),
            reason: format!("cache level {level} out of range"),
        })?;
        let kind = match text_opt(&index.join("type"))?.as_deref().map(str::trim) {
            Some("Data") => CacheKind::Data,
            Some("Instruction") => CacheKind::Instruction,
            Some("Unified") | None => CacheKind::Unified,
            Some(other) => CacheKind::Other(other.to_string()),
        };
        let size_path = index.join("size");
        let size_kib = match text_opt(&size_path)? {
            Some(text) => Some(parse_size_kib(&text).ok_or_else(|| TopoError::Parse {
                path: size_path.clone(),
                reason: format!("expected a size like 32K, found {:?}", text.trim()),
            })?),
            None => None,
        };
        let mut shared = cpus_list_or_mask(&index, "shared_cpu_list", "shared_cpu_map")?
            .map(|s| s.intersection(online))
            .unwrap_or_default();
        if !shared.contains(cpu) {
            shared = CpuSet::from_ids(shared.iter().chain([cpu]));
        }
        let known = caches
            .iter()
            .any(|c| c.level == level && c.kind == kind && c.cpus == shared);
        if !known {
            caches.push(Cache {
                level,
                kind,
                size_kib,
                cpus: shared,
            });
        }
    }
    Ok(())
}

/// `32K`, `20480K`, `1M`, `1G` or a plain byte count → KiB.
fn parse_size_kib(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, mult) = match text.chars().last()? {
        'K' | 'k' => (&text[..text.len() - 1], 1),
        'M' | 'm' => (&text[..text.len() - 1], 1024),
        'G' | 'g' => (&text[..text.len() - 1], 1024 * 1024),
        _ => return text.parse::<u64>().ok().map(|b| b / 1024),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

fn group_cores(cpus: &[Cpu]) -> Vec<Core> {
    let mut cores: Vec<Core> = Vec::new();
    for cpu in cpus {
        if cores.iter().any(|c| c.cpus.contains(cpu.id)) {
            continue;
        }
        cores.push(Core {
            package: cpu.package,
            cpus: cpu.siblings.clone(),
        });
    }
    // A sibling list that disagrees with its siblings' lists could put a CPU in two cores;
    // keep each CPU in the first core that names it.
    let mut seen = CpuSet::new();
    for core in &mut cores {
        core.cpus = core.cpus.iter().filter(|&c| !seen.contains(c)).collect();
        seen = CpuSet::from_ids(seen.iter().chain(core.cpus.iter()));
    }
    cores.retain(|c| !c.cpus.is_empty());
    cores.sort_by_key(|c| c.cpus.first());
    cores
}

fn group_packages(cpus: &[Cpu]) -> Vec<Package> {
    let mut ids: Vec<u32> = cpus.iter().filter_map(|c| c.package).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter()
        .map(|id| Package {
            id,
            cpus: cpus
                .iter()
                .filter(|c| c.package == Some(id))
                .map(|c| c.id)
                .collect(),
        })
        .collect()
}

type NodesRead = (Vec<Node>, NumaSource, Vec<Vec<u32>>);

fn read_nodes(
    root: &Path,
    online: &CpuSet,
    notes: &mut Vec<String>,
) -> Result<NodesRead, TopoError> {
    let node_dir = root.join("sys/devices/system/node");
    let entries = numbered_entries(&node_dir, "node")?.unwrap_or_default();
    if entries.is_empty() {
        notes.push(format!(
            "{}: no NUMA node directories; assuming one node 0 with all CPUs",
            node_dir.display()
        ));
        let node = Node {
            id: 0,
            cpus: online.clone(),
            mem_total_kib: None,
        };
        return Ok((vec![node], NumaSource::Absent, vec![vec![LOCAL_DISTANCE]]));
    }
    let mut nodes = Vec::new();
    let mut rows = Vec::new();
    for (id, dir) in &entries {
        let cpus = cpus_list_or_mask(dir, "cpulist", "cpumap")?
            .map(|s| s.intersection(online))
            .unwrap_or_default();
        let meminfo = dir.join("meminfo");
        let mem_total_kib = match text_opt(&meminfo)? {
            Some(text) => mem_total(&text),
            None => None,
        };
        let distance_path = dir.join("distance");
        let row = match text_opt(&distance_path)? {
            Some(text) => Some(
                text.split_whitespace()
                    .map(|d| d.parse::<u32>())
                    .collect::<Result<Vec<u32>, _>>()
                    .map_err(|_| TopoError::Parse {
                        path: distance_path.clone(),
                        reason: format!("expected distances, found {:?}", text.trim()),
                    })?,
            ),
            None => None,
        };
        nodes.push(Node {
            id: *id,
            cpus,
            mem_total_kib,
        });
        rows.push((distance_path, row));
    }
    let n = nodes.len();
    let mut distances = Vec::with_capacity(n);
    for (path, row) in rows {
        match row {
            Some(row) if row.len() == n => distances.push(row),
            Some(row) => {
                notes.push(format!(
                    "{}: {} distances for {n} nodes; distance matrix unknown",
                    path.display(),
                    row.len()
                ));
                distances.clear();
                break;
            }
            None => {
                notes.push(format!(
                    "{}: missing; distance matrix unknown",
                    path.display()
                ));
                distances.clear();
                break;
            }
        }
    }
    Ok((nodes, NumaSource::Sysfs, distances))
}

/// `Node 0 MemTotal:       16747124 kB` → 16747124.
fn mem_total(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (_, rest) = line.split_once("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_to_kib() {
        assert_eq!(parse_size_kib("32K\n"), Some(32));
        assert_eq!(parse_size_kib("20480K"), Some(20480));
        assert_eq!(parse_size_kib("2M"), Some(2048));
        assert_eq!(parse_size_kib("lots"), None);
    }

    #[test]
    fn meminfo_mem_total_is_found_after_a_blank_line() {
        let text = "\nNode 0 MemTotal:       16747124 kB\nNode 0 MemFree: 1 kB\n";
        assert_eq!(mem_total(text), Some(16_747_124));
    }
}
