//! Discovery on the recorded real machines of `tests/data/` (unpacked per test) and on this
//! machine's own `/`: the facts each recording is known for.

mod common;

use common::{Unpacked, all_tarballs};
use topo::{CacheKind, CpuSet, Interface, NicNode, NumaSource, TopoError, Topology};

const TWO_NODE: &str = "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2";
const UNKNOWN_NIC_NODE: &str = "40intel64-2g2n4c+pcilocality.tar.bz2";
const SMT: &str = "16em64t-4s2c2t.tar.bz2";
const EIGHT_NODE: &str = "64amd64-4s2n4ca2co.tar.bz2";
const BIG: &str = "96em64t-4no4pa3ca2co.tar.bz2";

fn set(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

/// Structural invariants every discovered topology keeps.
fn assert_consistent(t: &Topology) {
    assert_eq!(t.cpus.len(), t.online.len());
    for cpu in &t.cpus {
        assert!(t.online.contains(cpu.id));
        assert!(cpu.siblings.contains(cpu.id));
        let cores = t.cores.iter().filter(|c| c.cpus.contains(cpu.id)).count();
        assert_eq!(cores, 1, "CPU {} in exactly one core", cpu.id);
    }
    assert!(!t.nodes.is_empty());
    if !t.distances.is_empty() {
        assert_eq!(t.distances.len(), t.nodes.len());
        for (i, row) in t.distances.iter().enumerate() {
            assert_eq!(row.len(), t.nodes.len());
            assert_eq!(row[i], topo::LOCAL_DISTANCE);
        }
    }
    for cache in &t.caches {
        assert!(!cache.cpus.is_empty() && cache.cpus.is_subset(&t.online));
    }
}

#[test]
fn every_recorded_machine_discovers_consistently() {
    let tarballs = all_tarballs();
    assert_eq!(tarballs.len(), 5, "{tarballs:?}");
    for tarball in tarballs {
        let m = Unpacked::new(&tarball);
        let t = Topology::discover(&m.root).unwrap_or_else(|e| panic!("{tarball}: {e}"));
        assert_consistent(&t);
        assert!(!t.caches.is_empty(), "{tarball}: caches");
    }
}

#[test]
fn two_node_machine_has_16_cpus_on_2_nodes_at_distance_21() {
    let m = Unpacked::new(TWO_NODE);
    let t = Topology::discover(&m.root).unwrap();
    assert_eq!(t.online, set("0-15"));
    assert_eq!(t.offline, set("16-127"));
    assert_eq!(t.numa, NumaSource::Sysfs);
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.nodes[0].cpus, set("0-7"));
    assert_eq!(t.nodes[1].cpus, set("8-15"));
    assert_eq!(t.nodes[0].mem_total_kib, Some(16_747_124));
    assert_eq!(t.nodes[1].mem_total_kib, Some(16_777_216));
    assert_eq!(t.distances, vec![vec![10, 21], vec![21, 10]]);
    assert_eq!(t.distance(0, 1), Some(21));
    assert_eq!(t.cores.len(), 16);
    assert!(!t.has_smt());
    assert_eq!(t.packages.len(), 2);
    assert_eq!(t.cpu(9).unwrap().node, Some(1));
    let l3: Vec<_> = t.caches.iter().filter(|c| c.level == 3).collect();
    assert_eq!(l3.len(), 2);
    assert_eq!(l3[0].cpus, set("0-7"));
    assert_eq!(l3[0].size_kib, Some(20480));
    let l1: Vec<_> = t.caches.iter().filter(|c| c.level == 1).collect();
    assert_eq!(l1.len(), 32, "16 data + 16 instruction");
    assert!(l1.iter().any(|c| c.kind == CacheKind::Instruction));
}

#[test]
fn two_node_machine_eth0_is_on_node_0_with_9_msix_vectors_and_8_queues() {
    let m = Unpacked::new(TWO_NODE);
    let eth0 = Interface::discover(&m.root, "eth0").unwrap();
    assert!(eth0.has_device);
    assert_eq!(eth0.driver.as_deref(), Some("igb"));
    assert_eq!(eth0.numa_node, NicNode::Known(0));
    assert_eq!(eth0.local_cpus, Some(set("0-7")));
    let irqs: Vec<u32> = eth0.msi.iter().map(|v| v.irq).collect();
    assert_eq!(irqs, (101..=109).collect::<Vec<_>>());
    assert!(eth0.msi.iter().all(|v| v.mode.as_deref() == Some("msix")));
    assert!(
        eth0.msi.iter().all(|v| v.name.is_none()),
        "no /proc/interrupts"
    );
    assert_eq!((eth0.rx_queues, eth0.tx_queues), (8, 8));

    let ib0 = Interface::discover(&m.root, "ib0").unwrap();
    assert_eq!(ib0.numa_node, NicNode::Known(1));
    assert_eq!(ib0.local_cpus, Some(set("8-15")));
    assert_eq!(ib0.msi.len(), 128);

    let lo = Interface::discover(&m.root, "lo").unwrap();
    assert!(!lo.has_device);
    assert_eq!(lo.numa_node, NicNode::NoFile);
    assert!(lo.msi.is_empty());
}

#[test]
fn unknown_nic_node_is_reported_as_unreported_not_node_0() {
    let m = Unpacked::new(UNKNOWN_NIC_NODE);
    let t = Topology::discover(&m.root).unwrap();
    assert_eq!(t.online, set("0-39"));
    assert_eq!(t.nodes.len(), 4);
    assert_eq!(t.distance(0, 3), Some(20));
    for name in ["eth0", "eth1", "eth2", "eth3"] {
        let nic = Interface::discover(&m.root, name).unwrap();
        assert_eq!(nic.numa_node, NicNode::Unreported, "{name}");
        assert_eq!(nic.numa_node.known(), None);
        assert_eq!(nic.local_cpus, Some(set("0-39")));
        assert!(nic.msi.is_empty(), "{name}: no msi_irqs directory recorded");
        assert_eq!(nic.rx_queues, 8);
    }
}

#[test]
fn smt_machine_pairs_each_cpu_with_its_sibling_from_masks_alone() {
    let m = Unpacked::new(SMT);
    let t = Topology::discover(&m.root).unwrap();
    // No cpu/online file: the per-CPU directories decide.
    assert_eq!(t.online, set("0-15"));
    assert!(t.has_smt());
    assert_eq!(t.cores.len(), 8);
    for core in &t.cores {
        let first = core.cpus.first().unwrap();
        assert_eq!(core.cpus, CpuSet::from_ids([first, first + 8]));
    }
    assert_eq!(t.packages.len(), 4);
    assert_eq!(t.packages[1].cpus, set("1,5,9,13"));
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].cpus, set("0-15"));
    assert_eq!(t.distances, vec![vec![10]]);
    // No sys/class/net at all: asking for an interface names the path.
    match Interface::discover(&m.root, "eth0") {
        Err(TopoError::NoInterface { path }) => assert!(path.ends_with("sys/class/net/eth0")),
        other => panic!("expected NoInterface, got {other:?}"),
    }
}

#[test]
fn eight_node_machine_has_its_distance_matrix_and_l2_pairs() {
    let m = Unpacked::new(EIGHT_NODE);
    let t = Topology::discover(&m.root).unwrap();
    assert_eq!(t.online.len(), 64);
    assert_eq!(t.nodes.len(), 8);
    assert!(t.nodes.iter().all(|n| n.cpus.len() == 8));
    assert_eq!(t.distances[0], vec![10, 16, 16, 22, 16, 22, 16, 22]);
    assert_eq!(t.cores.len(), 32, "thread pairs of a compute unit");
    let l2 = t.caches.iter().find(|c| c.level == 2).unwrap();
    assert_eq!(l2.cpus, set("0-1"));
    let l3 = t.caches.iter().find(|c| c.level == 3).unwrap();
    assert_eq!(l3.cpus, set("0-7"));
}

#[test]
fn ninety_six_cpu_machine_reads_masks_of_seven_words() {
    let m = Unpacked::new(BIG);
    let t = Topology::discover(&m.root).unwrap();
    assert_eq!(t.online.len(), 96);
    assert_eq!(t.nodes.len(), 4);
    assert_eq!(t.nodes[0].cpus, set("0-23"));
    assert_eq!(t.distance(1, 2), Some(26));
    let l3 = t.caches.iter().find(|c| c.level == 3).unwrap();
    assert_eq!(l3.cpus, set("0,4,8,12,16,20"));
}

#[test]
fn missing_numa_directory_assumes_one_node_and_says_so() {
    let m = Unpacked::new(SMT);
    std::fs::remove_dir_all(m.root.join("sys/devices/system/node")).unwrap();
    let t = Topology::discover(&m.root).unwrap();
    assert_eq!(t.numa, NumaSource::Absent);
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].cpus, t.online);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("no NUMA node directories"))
    );
}

#[test]
fn missing_caches_give_an_empty_list() {
    let m = Unpacked::new(SMT);
    for cpu in 0..16 {
        let dir = m
            .root
            .join(format!("sys/devices/system/cpu/cpu{cpu}/cache"));
        std::fs::remove_dir_all(dir).unwrap();
    }
    let t = Topology::discover(&m.root).unwrap();
    assert!(t.caches.is_empty());
    assert_eq!(t.cores.len(), 8);
}

#[test]
fn offline_cpus_are_left_out_of_cores_and_nodes() {
    let m = Unpacked::new(SMT);
    std::fs::write(m.root.join("sys/devices/system/cpu/cpu9/online"), "0\n").unwrap();
    let t = Topology::discover(&m.root).unwrap();
    assert_eq!(t.offline, set("9"));
    assert!(!t.online.contains(9));
    let core = t.cores.iter().find(|c| c.cpus.contains(1)).unwrap();
    assert_eq!(core.cpus, set("1"));
    assert!(!t.nodes[0].cpus.contains(9));
}

#[test]
fn malformed_files_are_errors_naming_the_path() {
    let m = Unpacked::new(TWO_NODE);
    let path = m.root.join("sys/devices/system/cpu/cpu3/topology/core_id");
    std::fs::write(&path, "three\n").unwrap();
    let err = Topology::discover(&m.root).unwrap_err();
    assert!(err.to_string().contains("cpu3/topology/core_id"), "{err}");

    let m = Unpacked::new(TWO_NODE);
    let path = m.root.join("sys/devices/system/cpu/online");
    std::fs::write(&path, "0-x\n").unwrap();
    let err = Topology::discover(&m.root).unwrap_err();
    assert!(err.to_string().contains("cpu/online"), "{err}");
}

#[test]
fn a_directory_that_is_not_sysfs_is_an_error_naming_it() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("topo-test-{}-empty", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    match Topology::discover(&dir) {
        Err(TopoError::NotSysfs { path, .. }) => assert!(path.ends_with("sys/devices/system/cpu")),
        other => panic!("expected NotSysfs, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn this_machine_discovers_consistently() {
    let t = match Topology::discover("/") {
        Ok(t) => t,
        // A sandbox without /sys is not a failure of discovery, but it must name the path.
        Err(TopoError::NotSysfs { path, .. }) => {
            assert!(path.ends_with("sys/devices/system/cpu"));
            return;
        }
        Err(e) => panic!("/: {e}"),
    };
    assert_consistent(&t);
    assert!(!t.cores.is_empty());
    if std::path::Path::new("/sys/class/net/lo").exists() {
        let lo = Interface::discover("/", "lo").unwrap();
        assert!(!lo.has_device);
    }
}

#[test]
fn virtio_nic_locality_comes_from_its_pci_parent() {
    // This machine's layout: class/net/eth0 -> devices/pci…/0000:00:03.0/virtio2/net/eth0,
    // whose `device` is virtio2; numa_node, local_cpulist and msi_irqs are on 0000:00:03.0.
    let m = Unpacked::new(TWO_NODE);
    let pci = m.root.join("sys/devices/pci0000:00/0000:00:03.0");
    let net = pci.join("virtio2/net/vnet0");
    std::fs::create_dir_all(&net).unwrap();
    std::fs::create_dir_all(net.join("queues/rx-0")).unwrap();
    std::fs::create_dir_all(pci.join("msi_irqs")).unwrap();
    std::fs::write(pci.join("numa_node"), "1\n").unwrap();
    std::fs::write(pci.join("local_cpulist"), "8-15\n").unwrap();
    for irq in 37..=39 {
        std::fs::write(pci.join(format!("msi_irqs/{irq}")), "msix\n").unwrap();
    }
    std::os::unix::fs::symlink("../../../virtio2", net.join("device")).unwrap();
    std::os::unix::fs::symlink(
        "../../devices/pci0000:00/0000:00:03.0/virtio2/net/vnet0",
        m.root.join("sys/class/net/vnet0"),
    )
    .unwrap();
    let nic = Interface::discover(&m.root, "vnet0").unwrap();
    assert_eq!(nic.numa_node, NicNode::Known(1));
    assert_eq!(nic.local_cpus, Some(set("8-15")));
    assert_eq!(nic.msi.len(), 3);
    assert_eq!(nic.rx_queues, 1);
}

#[test]
fn remote_access_factor_follows_the_distance_table() {
    let m = Unpacked::new(TWO_NODE);
    let t = Topology::discover(&m.root).unwrap();
    assert_eq!(t.remote_access_factor(0, 0), Some(1.0));
    assert_eq!(t.remote_access_factor(0, 1), Some(2.1));
    assert_eq!(t.worst_remote_access(), Some((0, 1, 2.1)));
    // Every multi-node recording has a worst pair costing more than a local access.
    for tarball in [UNKNOWN_NIC_NODE, EIGHT_NODE, BIG] {
        let m = Unpacked::new(tarball);
        let t = Topology::discover(&m.root).unwrap();
        let (from, to, f) = t.worst_remote_access().expect(tarball);
        assert!(from != to && f > 1.0, "{tarball}: {from}->{to} {f}");
        eprintln!("{tarball}: worst remote access {f:.1}x (node {from} -> node {to})");
    }
    let m = Unpacked::new(SMT);
    let one_node = Topology::discover(&m.root).unwrap();
    assert_eq!(
        one_node.worst_remote_access(),
        None,
        "one node: nothing remote"
    );
}
