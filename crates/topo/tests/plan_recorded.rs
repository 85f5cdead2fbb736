//! Placement plans on the recorded machines: table tests of each policy and the invariants
//! every plan keeps on every machine.

mod common;

use common::{Unpacked, all_tarballs};
use topo::{Interface, PlanError, Policy, Profile, Topology, plan};

const TWO_NODE: &str = "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2";
const UNKNOWN_NIC_NODE: &str = "40intel64-2g2n4c+pcilocality.tar.bz2";
const SMT: &str = "16em64t-4s2c2t.tar.bz2";

fn machine(tarball: &str, iface: Option<&str>) -> (Unpacked, Topology, Option<Interface>) {
    let m = Unpacked::new(tarball);
    let t = Topology::discover(&m.root).unwrap();
    let nic = iface.map(|i| Interface::discover(&m.root, i).unwrap());
    (m, t, nic)
}

fn cpus_of_queues(p: &topo::Plan) -> Vec<usize> {
    p.queues.iter().map(|q| q.cpu).collect()
}

fn cpus_of_shards(p: &topo::Plan) -> Vec<usize> {
    p.shards.iter().map(|s| s.cpu).collect()
}

#[test]
fn closest_on_two_nodes_puts_every_queue_on_the_nic_node() {
    let (_m, t, nic) = machine(TWO_NODE, Some("eth0"));
    for profile in [Profile::Closest, Profile::ClosestStatic, Profile::Cache] {
        let p = plan(&t, nic.as_ref(), 8, &Policy::new(profile)).unwrap();
        assert_eq!(p.nic_node, Some(0));
        assert_eq!(cpus_of_queues(&p), (0..8).collect::<Vec<_>>(), "{profile}");
        assert!(p.queues.iter().all(|q| q.node == Some(0)));
        assert!(p.shards.iter().all(|s| s.pool_node == Some(0)));
        assert_eq!(
            cpus_of_shards(&p),
            cpus_of_queues(&p),
            "interrupt on the shard's CPU"
        );
        assert_eq!(p.reta_weights, vec![1; 8]);
        let irqs: Vec<Option<u32>> = p.queues.iter().map(|q| q.irq).collect();
        assert_eq!(irqs, (101..=108).map(Some).collect::<Vec<_>>());
        assert_eq!(p.rebalance, profile == Profile::Closest);
    }
}

#[test]
fn closest_for_the_node_1_nic_uses_node_1() {
    let (_m, t, nic) = machine(TWO_NODE, Some("ib0"));
    let p = plan(&t, nic.as_ref(), 4, &Policy::new(Profile::Closest)).unwrap();
    assert_eq!(p.nic_node, Some(1));
    assert_eq!(cpus_of_shards(&p), vec![8, 9, 10, 11]);
    // ib0 has one receive queue: one interrupting queue, three shards fed by software.
    assert_eq!(p.queues.len(), 1);
    assert_eq!(p.reta_weights, vec![1]);
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("shards 1..3 have no NIC queue"))
    );
}

#[test]
fn more_shards_than_the_nic_node_has_spill_to_the_next_node() {
    let (_m, t, nic) = machine(TWO_NODE, Some("eth0"));
    let p = plan(&t, nic.as_ref(), 12, &Policy::new(Profile::Closest)).unwrap();
    assert_eq!(cpus_of_queues(&p), (0..8).collect::<Vec<_>>());
    assert_eq!(cpus_of_shards(&p)[8..], [8, 9, 10, 11]);
    assert_eq!(p.shards[8].pool_node, Some(1));
    assert_eq!(p.shards[8].queue, None);
}

#[test]
fn numa_round_robins_over_nodes_nic_node_first() {
    let (_m, t, nic) = machine(TWO_NODE, Some("eth0"));
    let p = plan(&t, nic.as_ref(), 4, &Policy::new(Profile::Numa)).unwrap();
    assert_eq!(cpus_of_queues(&p), vec![0, 8, 1, 9]);
    let pools: Vec<_> = p.shards.iter().map(|s| s.pool_node).collect();
    assert_eq!(pools, vec![Some(0), Some(1), Some(0), Some(1)]);
    assert!(p.rebalance);
    let s = plan(&t, nic.as_ref(), 4, &Policy::new(Profile::NumaStatic)).unwrap();
    assert_eq!(cpus_of_queues(&s), vec![0, 8, 1, 9]);
    assert!(!s.rebalance);
}

#[test]
fn conservative_interrupts_on_half_the_shards() {
    let (_m, t, nic) = machine(TWO_NODE, Some("eth0"));
    let p = plan(&t, nic.as_ref(), 8, &Policy::new(Profile::Conservative)).unwrap();
    assert_eq!(cpus_of_queues(&p), vec![0, 1, 2, 3]);
    assert_eq!(p.reta_weights, vec![1, 1, 1, 1, 0, 0, 0, 0]);
    assert_eq!(p.shards.len(), 8);
}

#[test]
fn spread_gives_each_interrupt_a_core_next_to_its_shard() {
    let (_m, t, nic) = machine(TWO_NODE, Some("eth0"));
    let p = plan(&t, nic.as_ref(), 4, &Policy::new(Profile::Spread)).unwrap();
    assert_eq!(cpus_of_queues(&p), vec![0, 2, 4, 6]);
    assert_eq!(cpus_of_shards(&p), vec![1, 3, 5, 7]);
    let err = plan(&t, nic.as_ref(), 9, &Policy::new(Profile::Spread)).unwrap_err();
    assert!(
        matches!(
            err,
            PlanError::TooFewCpus {
                needed: 17,
                offered: 16,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn base_and_max_processors_bound_the_cpus() {
    let (_m, t, nic) = machine(TWO_NODE, Some("eth0"));
    let policy = Policy {
        base_cpu: 4,
        max_cpus: Some(2),
        ..Policy::new(Profile::Closest)
    };
    let p = plan(&t, nic.as_ref(), 2, &policy).unwrap();
    assert_eq!(p.cpu_order, vec![4, 5]);
    let err = plan(&t, nic.as_ref(), 3, &policy).unwrap_err();
    assert!(err.to_string().contains("at most 2"), "{err}");
}

#[test]
fn unknown_nic_node_falls_back_to_all_nodes_and_says_so() {
    let (_m, t, nic) = machine(UNKNOWN_NIC_NODE, Some("eth0"));
    let p = plan(&t, nic.as_ref(), 8, &Policy::new(Profile::Closest)).unwrap();
    assert_eq!(p.nic_node, None);
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("NIC node unknown")
                && n.contains("falling back to all nodes (0,1,2,3)")),
        "{:?}",
        p.notes
    );
    assert_eq!(p.cpu_order.len(), 40);
    assert_eq!(p.queues.len(), 8);
    // No msi_irqs recorded for this NIC: no IRQ numbers, and no guess claimed.
    assert!(p.queues.iter().all(|q| q.irq.is_none()));
}

#[test]
fn smt_siblings_never_carry_two_queues_unless_allowed() {
    let (_m, t, _) = machine(SMT, None);
    let p = plan(&t, None, 8, &Policy::new(Profile::Cache)).unwrap();
    assert_eq!(cpus_of_shards(&p), (0..8).collect::<Vec<_>>());
    assert!(p.notes.iter().any(|n| n.contains("SMT siblings left out")));
    let err = plan(&t, None, 9, &Policy::new(Profile::Cache)).unwrap_err();
    assert!(err.to_string().contains("one thread per core"), "{err}");
    let smt = Policy {
        allow_smt: true,
        ..Policy::new(Profile::Cache)
    };
    let p = plan(&t, None, 16, &smt).unwrap();
    assert_eq!(p.shards.len(), 16);
}

#[test]
fn bad_requests_are_errors() {
    let (_m, t, _) = machine(SMT, None);
    assert_eq!(
        plan(&t, None, 0, &Policy::new(Profile::Closest)),
        Err(PlanError::NoShards)
    );
    let zero = Policy {
        max_cpus: Some(0),
        ..Policy::new(Profile::Closest)
    };
    assert_eq!(plan(&t, None, 1, &zero), Err(PlanError::NoCpusAllowed));
    assert!("nearest".parse::<Profile>().is_err());
    for p in Profile::ALL {
        assert_eq!(p.name().parse::<Profile>(), Ok(p));
    }
}

#[test]
fn every_plan_on_every_machine_keeps_its_invariants() {
    for tarball in all_tarballs() {
        let m = Unpacked::new(&tarball);
        let t = Topology::discover(&m.root).unwrap();
        for profile in Profile::ALL {
            for shards in [1, 2, 3, 8, 16] {
                let Ok(p) = plan(&t, None, shards, &Policy::new(profile)) else {
                    continue;
                };
                let mut all = p.shards.iter().map(|s| s.cpu).collect::<Vec<_>>();
                all.sort_unstable();
                all.dedup();
                assert_eq!(
                    all.len(),
                    shards,
                    "{tarball} {profile}: distinct shard CPUs"
                );
                let mut used: Vec<usize> = p.queues.iter().map(|q| q.cpu).collect();
                used.extend(p.shards.iter().map(|s| s.cpu));
                for &a in &used {
                    let sib = &t.cpu(a).unwrap().siblings;
                    assert!(
                        used.iter().all(|&b| b == a || !sib.contains(b)),
                        "{tarball} {profile} {shards}: CPUs {a} and a sibling both used"
                    );
                }
                let weighted = p.reta_weights.iter().filter(|&&w| w > 0).count();
                assert_eq!(weighted, p.queues.len());
            }
        }
    }
}

#[test]
fn queue_irq_affinity_covers_the_core_and_its_sibling_only_without_smt() {
    let (_m, t, _) = machine(SMT, None);
    let p = plan(&t, None, 4, &Policy::new(Profile::Cache)).unwrap();
    let affinity: Vec<String> = p.queues.iter().map(|q| q.affinity.to_string()).collect();
    assert_eq!(affinity, ["0,8", "1,9", "2,10", "3,11"]);
    let smt = Policy {
        allow_smt: true,
        ..Policy::new(Profile::Cache)
    };
    let p = plan(&t, None, 4, &smt).unwrap();
    assert!(p.queues.iter().all(|q| q.affinity.ids() == [q.cpu]));
}

#[test]
fn unknown_node_with_narrow_local_cpus_puts_their_node_first() {
    let m = Unpacked::new(UNKNOWN_NIC_NODE);
    let local = m.root.join("sys/class/net/eth0/device/local_cpulist");
    std::fs::write(&local, "1,5,9,13\n").unwrap();
    let t = Topology::discover(&m.root).unwrap();
    let nic = Interface::discover(&m.root, "eth0").unwrap();
    let p = plan(&t, Some(&nic), 2, &Policy::new(Profile::Closest)).unwrap();
    assert_eq!(p.nic_node, None);
    assert_eq!(
        cpus_of_shards(&p),
        vec![1, 5],
        "node 1 holds the local CPUs"
    );
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("local CPUs 1,5,9,13 go first"))
    );
}

#[test]
fn proc_interrupts_names_decide_the_queue_irqs() {
    let m = Unpacked::new(TWO_NODE);
    // Queue vectors named in reverse IRQ order, the link vector last: names, not order, count.
    let mut text = String::from("           CPU0       CPU1\n");
    for q in 0..8u32 {
        let irq = 108 - q;
        text.push_str(&format!(" {irq}:  5  0  PCI-MSI-edge  eth0-TxRx-{q}\n"));
    }
    text.push_str(" 109:  1  0  PCI-MSI-edge  eth0\n");
    std::fs::write(m.root.join("proc/interrupts"), text).unwrap();
    let t = Topology::discover(&m.root).unwrap();
    let nic = Interface::discover(&m.root, "eth0").unwrap();
    assert_eq!(nic.msi[8].name.as_deref(), Some("eth0"));
    let p = plan(&t, Some(&nic), 8, &Policy::new(Profile::Closest)).unwrap();
    let irqs: Vec<Option<u32>> = p.queues.iter().map(|q| q.irq).collect();
    assert_eq!(irqs, (101..=108).rev().map(Some).collect::<Vec<_>>());
    assert!(!p.notes.iter().any(|n| n.contains("guessed")));
}
