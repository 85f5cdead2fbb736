//! Tuning the Linux kernel's own stack from a [`Plan`]: a pure function from (topology,
//! interface, plan, options) to an ordered list of [`Step`]s — the `ethtool` command or
//! procfs/sysfs write each performs, the [`Reading`] needed to undo it, and why — and their
//! rendering as a shell script. It reads nothing and changes nothing: `rsstack tune` reads the
//! current settings, saves them, applies the steps and reverts them.
//!
//! The steps follow seed 004's "Administrative Linux networking considerations" and seed 000's
//! RSS placement, in the order they must run:
//!
//! 1. `ethtool -L`: as many channels as the plan has queues;
//! 2. `ethtool -X … weight`: the plan's RETA weights (only the used queues receive flows);
//! 3. `ethtool -C`: interrupt moderation, adaptive or a fixed interval in µs;
//! 4. `ethtool -K gro`, `ethtool -K lro`: GRO on; LRO (seed 004's RSC) off unless asked, since
//!    it is not compatible with bridging or routing;
//! 5. `systemctl stop irqbalance`, when IRQ affinities are set: seed 004 — a running
//!    `irqbalance` makes SMP affinities have no effect;
//! 6. `/proc/irq/N/smp_affinity_list` of each queue's IRQ: the plan's affinity;
//! 7. `queues/rx-N/rps_cpus`: zero where the hardware steers (a queue IRQ per shard: RPS would
//!    only add an inter-processor interrupt), else the CPUs of the shards the queue feeds;
//! 8. `queues/tx-N/xps_cpus`: the CPUs of the shards that transmit on the queue.
//!
//! Invariant: every step's [`Reading`] names exactly the setting its [`Action`] changes, so
//! saving every reading before applying and running [`restore`] on each saved value, in the
//! reverse order, puts the device back.

use std::fmt::{self, Write as _};

use crate::machine::Topology;
use crate::nic::Interface;
use crate::plan::Plan;

/// Interrupt moderation (`ethtool -C`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moderation {
    /// The driver adapts the interval to the load (`adaptive-rx on adaptive-tx on`).
    Adaptive,
    /// A fixed interval in microseconds (`adaptive-rx off rx-usecs N`…); 0 interrupts per packet.
    FixedUs(u32),
}

/// How the device counts channels (`ethtool -l`): one combined count, or receive and transmit
/// separately (veth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelStyle {
    /// `ethtool -L IF combined N` (most multi-queue NICs).
    Combined,
    /// `ethtool -L IF rx N tx N` (veth and a few drivers).
    RxTx,
}

/// What `rsstack tune` was asked for beyond the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuneOptions {
    /// How the device counts channels; `None` when unknown (no device to ask): `combined`.
    pub channel_style: Option<ChannelStyle>,
    /// Interrupt moderation.
    pub moderation: Moderation,
    /// Whether LRO (seed 004's RSC) is turned on rather than off.
    pub lro: bool,
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self {
            channel_style: None,
            moderation: Moderation::Adaptive,
            lro: false,
        }
    }
}

/// What one step changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run a program with these arguments (no shell).
    Run(Vec<String>),
    /// Write `value` to the procfs/sysfs file `path` (an absolute path of the live system).
    Write {
        /// The file.
        path: String,
        /// What to write.
        value: String,
    },
}

impl Action {
    fn run(args: &[&str]) -> Self {
        Action::Run(args.iter().map(|a| a.to_string()).collect())
    }

    /// The action as one shell command line (arguments quoted where needed).
    pub fn shell(&self) -> String {
        match self {
            Action::Run(args) => args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "),
            Action::Write { path, value } => format!("echo {} > {}", quote(value), quote(path)),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shell())
    }
}

/// `text` as one shell word: unchanged when it holds only safe characters, else single-quoted.
fn quote(text: &str) -> String {
    let safe = |b: u8| b.is_ascii_alphanumeric() || b"-_./,:=@+".contains(&b);
    if !text.is_empty() && text.bytes().all(safe) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The setting a step changes, as it must be read before the step to undo it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// `ethtool -l IF`: the current channel counts.
    Channels,
    /// `ethtool -x IF`: the indirection table.
    Reta,
    /// `ethtool -c IF`: adaptive flags and intervals.
    Coalesce,
    /// `ethtool -k IF`: one feature, by its `-k` name (`generic-receive-offload`) and its `-K`
    /// name (`gro`).
    Feature {
        /// The name `ethtool -k` prints.
        long: &'static str,
        /// The name `ethtool -K` takes.
        short: &'static str,
    },
    /// The contents of a procfs/sysfs file.
    File(String),
    /// Whether a systemd service is active (`systemctl is-active NAME`).
    Service(String),
}

/// A setting's value as read before a step: what [`restore`] turns back into an [`Action`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    /// Channel counts: `combined`, or `rx` and `tx` (absent counts are `None`).
    Channels {
        /// Combined channels.
        combined: Option<u32>,
        /// Receive-only channels.
        rx: Option<u32>,
        /// Transmit-only channels.
        tx: Option<u32>,
    },
    /// The indirection table: entry `i` sends flows to queue `table[i]`.
    Reta(Vec<u32>),
    /// Interrupt moderation.
    Coalesce {
        /// `Adaptive RX`.
        adaptive_rx: Option<bool>,
        /// `Adaptive TX`.
        adaptive_tx: Option<bool>,
        /// `rx-usecs`.
        rx_usecs: Option<u32>,
        /// `tx-usecs`.
        tx_usecs: Option<u32>,
    },
    /// A feature's state.
    Feature(bool),
    /// A file's contents, trimmed.
    File(String),
    /// Whether the service was active.
    Service(bool),
}

/// The action that puts `saved` back on interface `iface`; `None` when nothing need be done
/// (a service that was not running, a table that was never read).
pub fn restore(iface: &str, reading: &Reading, saved: &Saved) -> Option<Action> {
    match (reading, saved) {
        (Reading::Channels, Saved::Channels { combined, rx, tx }) => {
            let mut args = vec!["ethtool".to_string(), "-L".into(), iface.into()];
            for (name, v) in [("combined", combined), ("rx", rx), ("tx", tx)] {
                if let Some(v) = v {
                    args.push(name.into());
                    args.push(v.to_string());
                }
            }
            (args.len() > 3).then_some(Action::Run(args))
        }
        (Reading::Reta, Saved::Reta(table)) => {
            let queues = table.iter().max().map_or(0, |&m| m as usize + 1);
            if queues == 0 {
                return None;
            }
            // `ethtool -X` takes weights, not entries: the default round-robin table comes back
            // as `default`, any other as its per-queue counts (same shares, maybe another order).
            let round_robin = table
                .iter()
                .enumerate()
                .all(|(i, &q)| q as usize == i % queues);
            if round_robin {
                return Some(Action::run(&["ethtool", "-X", iface, "default"]));
            }
            let mut args = vec![
                "ethtool".to_string(),
                "-X".into(),
                iface.into(),
                "weight".into(),
            ];
            for q in 0..queues {
                args.push(
                    table
                        .iter()
                        .filter(|&&e| e as usize == q)
                        .count()
                        .to_string(),
                );
            }
            Some(Action::Run(args))
        }
        (
            Reading::Coalesce,
            Saved::Coalesce {
                adaptive_rx,
                adaptive_tx,
                rx_usecs,
                tx_usecs,
            },
        ) => {
            let on = |b: &bool| if *b { "on" } else { "off" }.to_string();
            let mut args = vec!["ethtool".to_string(), "-C".into(), iface.into()];
            for (name, v) in [
                ("adaptive-rx", adaptive_rx.as_ref().map(on)),
                ("adaptive-tx", adaptive_tx.as_ref().map(on)),
                ("rx-usecs", rx_usecs.map(|u| u.to_string())),
                ("tx-usecs", tx_usecs.map(|u| u.to_string())),
            ] {
                if let Some(v) = v {
                    args.push(name.into());
                    args.push(v);
                }
            }
            (args.len() > 3).then_some(Action::Run(args))
        }
        (Reading::Feature { short, .. }, Saved::Feature(on)) => Some(Action::run(&[
            "ethtool",
            "-K",
            iface,
            short,
            if *on { "on" } else { "off" },
        ])),
        (Reading::File(path), Saved::File(value)) => Some(Action::Write {
            path: path.clone(),
            value: value.clone(),
        }),
        (Reading::Service(name), Saved::Service(active)) => {
            active.then(|| Action::run(&["systemctl", "start", name]))
        }
        _ => None,
    }
}

/// One tuning step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// A short name for reports (`channels`, `rps rx-0`, `irq 101 affinity`).
    pub name: String,
    /// What it changes.
    pub action: Action,
    /// What to read before it to undo it.
    pub reading: Reading,
    /// Why, for a person to read (the script's comment).
    pub why: String,
}

/// The tuning of one interface.
///
/// Invariant: `steps` are in the order they must run (channels before the per-queue settings
/// that depend on the queue count; irqbalance stopped before the affinities it would undo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuning {
    /// The interface.
    pub iface: String,
    /// The plan's profile name.
    pub policy: String,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// What was assumed or left out (the plan's notes first).
    pub notes: Vec<String>,
}

/// The steps that give `nic` the placement of `plan` (made for `nic` with as many queues as
/// channels wanted) on `topo`.
pub fn tune(topo: &Topology, nic: &Interface, plan: &Plan, opts: &TuneOptions) -> Tuning {
    let iface = nic.name.as_str();
    let mut notes = plan.notes.clone();
    let mut steps = Vec::new();
    let queues = plan.reta_weights.len().max(1);
    let used = plan.queues.len().max(1);

    // 1. Channels.
    let n = queues.to_string();
    let channels = match opts.channel_style {
        Some(ChannelStyle::RxTx) => Action::run(&["ethtool", "-L", iface, "rx", &n, "tx", &n]),
        Some(ChannelStyle::Combined) => Action::run(&["ethtool", "-L", iface, "combined", &n]),
        None => {
            notes.push(
                "channel style unknown (no `ethtool -l` answer for this device): using `combined`"
                    .into(),
            );
            Action::run(&["ethtool", "-L", iface, "combined", &n])
        }
    };
    steps.push(Step {
        name: "channels".into(),
        action: channels,
        reading: Reading::Channels,
        why: format!("{queues} queue(s): one per shard the policy places (RSS, seed 000)"),
    });

    // 2. RETA weights.
    let mut args = vec![
        "ethtool".to_string(),
        "-X".into(),
        iface.into(),
        "weight".into(),
    ];
    args.extend(plan.reta_weights.iter().map(u32::to_string));
    steps.push(Step {
        name: "reta".into(),
        action: Action::Run(args),
        reading: Reading::Reta,
        why: format!(
            "indirection table: flows spread over the {used} interrupting queue(s) of the plan"
        ),
    });

    // 3. Moderation.
    let (action, why) = match opts.moderation {
        Moderation::Adaptive => (
            Action::run(&[
                "ethtool",
                "-C",
                iface,
                "adaptive-rx",
                "on",
                "adaptive-tx",
                "on",
            ]),
            "adaptive interrupt moderation: few interrupts under load, low latency when idle (seed 000)"
                .to_string(),
        ),
        Moderation::FixedUs(us) => {
            let us = us.to_string();
            (
                Action::run(&[
                    "ethtool",
                    "-C",
                    iface,
                    "adaptive-rx",
                    "off",
                    "adaptive-tx",
                    "off",
                    "rx-usecs",
                    &us,
                    "tx-usecs",
                    &us,
                ]),
                format!("fixed interrupt moderation: at most one interrupt per {us} µs per queue"),
            )
        }
    };
    steps.push(Step {
        name: "moderation".into(),
        action,
        reading: Reading::Coalesce,
        why,
    });

    // 4. Offloads.
    steps.push(Step {
        name: "gro".into(),
        action: Action::run(&["ethtool", "-K", iface, "gro", "on"]),
        reading: Reading::Feature {
            long: "generic-receive-offload",
            short: "gro",
        },
        why: "GRO: one stack traversal per coalesced TCP burst".into(),
    });
    let lro = if opts.lro { "on" } else { "off" };
    steps.push(Step {
        name: "lro".into(),
        action: Action::run(&["ethtool", "-K", iface, "lro", lro]),
        reading: Reading::Feature {
            long: "large-receive-offload",
            short: "lro",
        },
        why: if opts.lro {
            "LRO (seed 004's RSC) on: fewer, larger packets; host-terminated TCP only".into()
        } else {
            "LRO (seed 004's RSC) off: not compatible with bridging or routing".into()
        },
    });

    // 5–6. irqbalance and IRQ affinities.
    let with_irq: Vec<_> = plan
        .queues
        .iter()
        .filter_map(|q| q.irq.map(|irq| (q, irq)))
        .collect();
    if with_irq.is_empty() {
        notes.push(format!(
            "{iface} has no known queue IRQs (a virtual device, or no MSI-X): no affinity steps, irqbalance left alone"
        ));
    } else {
        steps.push(Step {
            name: "irqbalance".into(),
            action: Action::run(&["systemctl", "stop", "irqbalance"]),
            reading: Reading::Service("irqbalance".into()),
            why: "a running irqbalance makes SMP affinities have no effect (seed 004)".into(),
        });
        if plan.rebalance {
            notes.push(format!(
                "{} rebalances at run time on Windows; Linux's rebalancer is irqbalance, which would undo these affinities: rerun `rsstack tune` instead",
                plan.policy.profile
            ));
        }
    }
    for (q, irq) in &with_irq {
        let path = format!("/proc/irq/{irq}/smp_affinity_list");
        let node = q.node.map_or("unknown".to_string(), |n| n.to_string());
        steps.push(Step {
            name: format!("irq {irq} affinity"),
            action: Action::Write {
                path: path.clone(),
                value: q.affinity.to_string(),
            },
            reading: Reading::File(path),
            why: if q.affinity.len() > 1 {
                format!(
                    "queue {}'s interrupt on CPU {} (node {node}) and its SMT siblings {} (seed 004)",
                    q.queue, q.cpu, q.affinity
                )
            } else {
                format!(
                    "queue {}'s interrupt on CPU {} (node {node}), its shard's",
                    q.queue, q.cpu
                )
            },
        });
    }

    // 7–8. RPS and XPS: queue q feeds (and is fed by) the shards s with s % used == q.
    let shard_cpus = |q: usize| {
        crate::cpulist::CpuSet::from_ids(
            plan.shards
                .iter()
                .filter(|s| s.shard % used == q)
                .map(|s| s.cpu),
        )
    };
    let hardware_steers = !with_irq.is_empty() && plan.shards.len() <= plan.queues.len();
    for q in 0..plan.queues.len() {
        let path = format!("/sys/class/net/{iface}/queues/rx-{q}/rps_cpus");
        let (value, why) = if hardware_steers {
            (
                "0".to_string(),
                "RPS off: the queue's interrupt already runs on its shard's CPU".to_string(),
            )
        } else {
            let cpus = shard_cpus(q);
            let why = format!(
                "RPS: the queue's packets processed on CPU(s) {cpus} (node {}), its shards'",
                nodes_of(topo, &cpus)
            );
            (cpus.to_mask(), why)
        };
        steps.push(Step {
            name: format!("rps rx-{q}"),
            action: Action::Write {
                path: path.clone(),
                value,
            },
            reading: Reading::File(path),
            why,
        });
    }
    for q in 0..plan.queues.len() {
        let path = format!("/sys/class/net/{iface}/queues/tx-{q}/xps_cpus");
        let cpus = shard_cpus(q);
        steps.push(Step {
            name: format!("xps tx-{q}"),
            action: Action::Write {
                path: path.clone(),
                value: cpus.to_mask(),
            },
            reading: Reading::File(path),
            why: format!(
                "XPS: CPU(s) {cpus} (node {}) transmit on the queue they receive on",
                nodes_of(topo, &cpus)
            ),
        });
    }
    notes.push(
        "none of these settings survives a reboot (seed 004): rerun after boot, or from a boot unit"
            .into(),
    );
    Tuning {
        iface: iface.to_string(),
        policy: plan.policy.profile.name().to_string(),
        steps,
        notes,
    }
}

/// The nodes of `cpus`, comma-separated (`unknown` for CPUs of no known node).
fn nodes_of(topo: &Topology, cpus: &crate::cpulist::CpuSet) -> String {
    let mut nodes: Vec<String> = cpus
        .iter()
        .map(|c| {
            topo.cpu(c)
                .and_then(|c| c.node)
                .map_or("unknown".to_string(), |n| n.to_string())
        })
        .collect();
    nodes.dedup();
    nodes.join(",")
}

impl Tuning {
    /// The steps as a POSIX shell script a person can read and run as root: a comment per
    /// step saying why, and no `set -e`, so a step the device does not support does not stop
    /// the others.
    pub fn script(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "#!/bin/sh");
        let _ = writeln!(
            s,
            "# rsstack tune {} --policy {}: {} step(s). Run as root; a step the device does",
            self.iface,
            self.policy,
            self.steps.len()
        );
        let _ = writeln!(
            s,
            "# not support fails on its own. `rsstack tune --apply` saves the previous settings first."
        );
        for note in &self.notes {
            let _ = writeln!(s, "# note: {note}");
        }
        for (i, step) in self.steps.iter().enumerate() {
            let _ = writeln!(s, "\n# {}. {}: {}", i + 1, step.name, step.why);
            let _ = writeln!(s, "{}", step.action.shell());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(quote("0-3,8"), "0-3,8");
        assert_eq!(
            quote("/proc/irq/5/smp_affinity_list"),
            "/proc/irq/5/smp_affinity_list"
        );
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn restore_turns_each_saved_value_back_into_its_setting() {
        let run = |a: &[&str]| Some(Action::run(a));
        let ch = Saved::Channels {
            combined: None,
            rx: Some(2),
            tx: Some(2),
        };
        assert_eq!(
            restore("v0", &Reading::Channels, &ch),
            run(&["ethtool", "-L", "v0", "rx", "2", "tx", "2"])
        );
        assert_eq!(
            restore("e", &Reading::Reta, &Saved::Reta(vec![0, 1, 2, 0, 1, 2])),
            run(&["ethtool", "-X", "e", "default"])
        );
        assert_eq!(
            restore("e", &Reading::Reta, &Saved::Reta(vec![0, 0, 0, 1])),
            run(&["ethtool", "-X", "e", "weight", "3", "1"])
        );
        assert_eq!(restore("e", &Reading::Reta, &Saved::Reta(vec![])), None);
        let gro = Reading::Feature {
            long: "generic-receive-offload",
            short: "gro",
        };
        assert_eq!(
            restore("e", &gro, &Saved::Feature(false)),
            run(&["ethtool", "-K", "e", "gro", "off"])
        );
        let svc = Reading::Service("irqbalance".into());
        assert_eq!(restore("e", &svc, &Saved::Service(false)), None);
        assert_eq!(
            restore("e", &svc, &Saved::Service(true)),
            run(&["systemctl", "start", "irqbalance"])
        );
        let co = Saved::Coalesce {
            adaptive_rx: Some(false),
            adaptive_tx: None,
            rx_usecs: Some(3),
            tx_usecs: None,
        };
        assert_eq!(
            restore("e", &Reading::Coalesce, &co),
            run(&["ethtool", "-C", "e", "adaptive-rx", "off", "rx-usecs", "3"])
        );
        // A value of another setting restores nothing.
        assert_eq!(
            restore("e", &Reading::Channels, &Saved::Feature(true)),
            None
        );
    }

    #[test]
    fn write_actions_render_as_echo_into_the_file() {
        let a = Action::Write {
            path: "/sys/class/net/eth0/queues/rx-0/rps_cpus".into(),
            value: "00000000,000000ff".into(),
        };
        assert_eq!(
            a.shell(),
            "echo 00000000,000000ff > /sys/class/net/eth0/queues/rx-0/rps_cpus"
        );
    }
}
