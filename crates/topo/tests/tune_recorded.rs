//! Tuning plans (`topo::tune`) on the recorded machines: the 2-node machine's steps as seed 004
//! and the plan say, and the invariants every tuning keeps on every machine and interface.

mod common;

use common::{Unpacked, all_tarballs};
use topo::{
    Action, ChannelStyle, Interface, Moderation, Policy, Profile, Reading, Topology, TuneOptions,
    plan, tune,
};

const TWO_NODE: &str = "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2";
const UNKNOWN_NIC_NODE: &str = "40intel64-2g2n4c+pcilocality.tar.bz2";

fn run(args: &[&str]) -> Action {
    Action::Run(args.iter().map(|a| a.to_string()).collect())
}

fn write_of(t: &topo::Tuning, name: &str) -> String {
    let step = t.steps.iter().find(|s| s.name == name).expect(name);
    match &step.action {
        Action::Write { value, .. } => value.clone(),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn closest_on_two_nodes_pins_each_queue_irq_to_a_node_0_cpu_and_leaves_rps_off() {
    let m = Unpacked::new(TWO_NODE);
    let topo = Topology::discover(&m.root).unwrap();
    let nic = Interface::discover(&m.root, "eth0").unwrap();
    let p = plan(&topo, Some(&nic), 8, &Policy::new(Profile::Closest)).unwrap();
    let opts = TuneOptions {
        channel_style: Some(ChannelStyle::Combined),
        ..TuneOptions::default()
    };
    let t = tune(&topo, &nic, &p, &opts);
    let names: Vec<&str> = t.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names[..6],
        ["channels", "reta", "moderation", "gro", "lro", "irqbalance"]
    );
    assert_eq!(
        t.steps[0].action,
        run(&["ethtool", "-L", "eth0", "combined", "8"])
    );
    assert_eq!(
        t.steps[1].action,
        run(&[
            "ethtool", "-X", "eth0", "weight", "1", "1", "1", "1", "1", "1", "1", "1"
        ])
    );
    assert_eq!(
        t.steps[2].action,
        run(&[
            "ethtool",
            "-C",
            "eth0",
            "adaptive-rx",
            "on",
            "adaptive-tx",
            "on"
        ])
    );
    assert_eq!(
        t.steps[4].action,
        run(&["ethtool", "-K", "eth0", "lro", "off"])
    );
    assert_eq!(t.steps[5].action, run(&["systemctl", "stop", "irqbalance"]));
    for q in 0..8 {
        let irq = 101 + q;
        assert_eq!(write_of(&t, &format!("irq {irq} affinity")), q.to_string());
        // A queue IRQ per shard: the hardware steers, RPS stays off.
        assert_eq!(write_of(&t, &format!("rps rx-{q}")), "0");
        assert_eq!(
            write_of(&t, &format!("xps tx-{q}")),
            format!("{:08x}", 1u32 << q),
            "tx-{q} sent on by CPU {q} only"
        );
    }
    assert!(t.notes.iter().any(|n| n.contains("irqbalance")));
    let script = t.script();
    assert!(script.starts_with("#!/bin/sh\n"));
    assert!(script.contains("\nethtool -L eth0 combined 8\n"));
    assert!(script.contains("\necho 0 > /proc/irq/101/smp_affinity_list\n"));
    assert!(script.contains("\necho 00000080 > /sys/class/net/eth0/queues/tx-7/xps_cpus\n"));
}

#[test]
fn conservative_feeds_the_shards_without_a_queue_through_rps() {
    let m = Unpacked::new(TWO_NODE);
    let topo = Topology::discover(&m.root).unwrap();
    let nic = Interface::discover(&m.root, "eth0").unwrap();
    let p = plan(&topo, Some(&nic), 4, &Policy::new(Profile::Conservative)).unwrap();
    assert_eq!(p.queues.len(), 2);
    let t = tune(&topo, &nic, &p, &TuneOptions::default());
    // Shards 0 and 2 (CPUs 0, 2) are fed by queue 0; shards 1 and 3 (CPUs 1, 3) by queue 1.
    assert_eq!(write_of(&t, "rps rx-0"), "00000005");
    assert_eq!(write_of(&t, "rps rx-1"), "0000000a");
    assert_eq!(write_of(&t, "xps tx-1"), "0000000a");
    assert!(t.notes.iter().any(|n| n.contains("combined")));
    assert_eq!(
        t.steps[1].action,
        run(&[
            "ethtool", "-X", "eth0", "weight", "1", "1", "0", "0", "0", "0", "0", "0"
        ])
    );
}

#[test]
fn fixed_moderation_and_lro_on_are_asked_for_explicitly() {
    let m = Unpacked::new(TWO_NODE);
    let topo = Topology::discover(&m.root).unwrap();
    let nic = Interface::discover(&m.root, "eth0").unwrap();
    let p = plan(&topo, Some(&nic), 2, &Policy::new(Profile::Cache)).unwrap();
    let opts = TuneOptions {
        channel_style: Some(ChannelStyle::RxTx),
        moderation: Moderation::FixedUs(50),
        lro: true,
    };
    let t = tune(&topo, &nic, &p, &opts);
    assert_eq!(
        t.steps[0].action,
        run(&["ethtool", "-L", "eth0", "rx", "8", "tx", "8"])
    );
    assert_eq!(
        t.steps[2].action,
        run(&[
            "ethtool",
            "-C",
            "eth0",
            "adaptive-rx",
            "off",
            "adaptive-tx",
            "off",
            "rx-usecs",
            "50",
            "tx-usecs",
            "50"
        ])
    );
    assert_eq!(
        t.steps[4].action,
        run(&["ethtool", "-K", "eth0", "lro", "on"])
    );
}

#[test]
fn an_unknown_nic_node_is_noted_in_the_tuning() {
    let m = Unpacked::new(UNKNOWN_NIC_NODE);
    let topo = Topology::discover(&m.root).unwrap();
    let nic = Interface::discover(&m.root, "eth0").unwrap();
    let p = plan(&topo, Some(&nic), 2, &Policy::new(Profile::Closest)).unwrap();
    let t = tune(&topo, &nic, &p, &TuneOptions::default());
    assert!(
        t.notes.iter().any(|n| n.contains("NIC node unknown")),
        "{:?}",
        t.notes
    );
    assert!(t.script().contains("# note: NIC node unknown"));
}

/// Every interface of every recorded machine under every profile: each step's reading names
/// the setting its action changes, channels come first, irqbalance stops before any affinity
/// is written, and the script carries every action.
#[test]
fn every_tuning_on_every_machine_reads_what_it_changes_in_a_safe_order() {
    for tarball in all_tarballs() {
        let m = Unpacked::new(&tarball);
        let topo = Topology::discover(&m.root).unwrap();
        let Ok(entries) = std::fs::read_dir(m.root.join("sys/class/net")) else {
            continue;
        };
        for e in entries {
            let name = e.unwrap().file_name().into_string().unwrap();
            let Ok(nic) = Interface::discover(&m.root, &name) else {
                continue;
            };
            for profile in Profile::ALL {
                let queues = nic.rx_queues.max(1);
                let Ok(p) = plan(&topo, Some(&nic), queues, &Policy::new(profile)) else {
                    continue;
                };
                let t = tune(&topo, &nic, &p, &TuneOptions::default());
                let what = format!("{tarball} {name} {profile}");
                assert_eq!(t.steps[0].reading, Reading::Channels, "{what}");
                let first_irq = t.steps.iter().position(|s| s.name.starts_with("irq "));
                let stop = t.steps.iter().position(|s| s.name == "irqbalance");
                if let Some(i) = first_irq {
                    assert!(stop.is_some_and(|s| s < i), "{what}: irqbalance first");
                }
                let script = t.script();
                for s in &t.steps {
                    match (&s.action, &s.reading) {
                        (Action::Write { path, .. }, Reading::File(read)) => {
                            assert_eq!(path, read, "{what}")
                        }
                        (Action::Run(args), Reading::Feature { short, .. }) => {
                            assert_eq!(args[1], "-K", "{what}");
                            assert_eq!(&args[3], short, "{what}");
                        }
                        (Action::Run(args), Reading::Channels) => assert_eq!(args[1], "-L"),
                        (Action::Run(args), Reading::Reta) => assert_eq!(args[1], "-X"),
                        (Action::Run(args), Reading::Coalesce) => assert_eq!(args[1], "-C"),
                        (Action::Run(args), Reading::Service(svc)) => {
                            assert_eq!(args[0], "systemctl");
                            assert_eq!(&args[2], svc);
                        }
                        other => panic!("{what}: {} mismatched: {other:?}", s.name),
                    }
                    assert!(
                        script.contains(&format!("\n{}\n", s.action.shell())),
                        "{what}"
                    );
                }
            }
        }
    }
}
