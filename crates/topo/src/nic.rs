//! A network interface's locality: `<root>/sys/class/net/<name>/device/{numa_node,
//! local_cpulist, msi_irqs/, driver}`, its queues (`queues/rx-*`, `tx-*`) and the names of its
//! interrupts in `<root>/proc/interrupts`.

use std::fs;
use std::path::Path;

use crate::cpulist::CpuSet;
use crate::error::TopoError;
use crate::read::{cpulist_opt, cpumask_opt, int_opt, numbered_entries, text_opt};

/// What the device says about its NUMA node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicNode {
    /// `numa_node` names this node.
    Known(usize),
    /// `numa_node` is -1: the firmware did not tell the kernel (common on older BIOSes).
    Unreported,
    /// No `numa_node` file: a virtual interface (no `device`), or a kernel without NUMA.
    NoFile,
}

impl NicNode {
    /// The node, when known.
    pub fn known(self) -> Option<usize> {
        match self {
            NicNode::Known(n) => Some(n),
            _ => None,
        }
    }
}

/// One MSI or MSI-X vector of the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsiVector {
    /// The Linux IRQ number (`/proc/irq/<irq>/`).
    pub irq: u32,
    /// `msix` or `msi` (the file `msi_irqs/<irq>`, or `msi_irqs/<irq>/mode` on old kernels).
    pub mode: Option<String>,
    /// The action name in `/proc/interrupts` (`eth0-TxRx-3`), when that file has the IRQ.
    pub name: Option<String>,
}

/// A network interface as sysfs describes it.
///
/// Invariant: `msi` is sorted by IRQ number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The interface name.
    pub name: String,
    /// Whether `device` exists (a physical device rather than lo, a bridge or a veth).
    pub has_device: bool,
    /// The driver's name (the `device/driver` link's last component).
    pub driver: Option<String>,
    /// The device's NUMA node.
    pub numa_node: NicNode,
    /// `device/local_cpulist` (or `local_cpus` as a mask): the CPUs the kernel deems close.
    pub local_cpus: Option<CpuSet>,
    /// The MSI/MSI-X vectors, by IRQ number (empty without `msi_irqs/`).
    pub msi: Vec<MsiVector>,
    /// `device/irq`: the legacy INTx line (0 or absent when MSI is used).
    pub legacy_irq: Option<u32>,
    /// Number of `queues/rx-*` directories.
    pub rx_queues: usize,
    /// Number of `queues/tx-*` directories.
    pub tx_queues: usize,
}

impl Interface {
    /// Reads interface `name` under `root`.
    pub fn discover(root: impl AsRef<Path>, name: &str) -> Result<Self, TopoError> {
        discover(root.as_ref(), name)
    }

    /// The IRQ of each receive queue, and whether the mapping was guessed.
    ///
    /// Vectors whose `/proc/interrupts` name mentions `rx` or `input` (any case) and ends in
    /// `-<n>` or `.<n>` are queue `n`'s (`eth0-TxRx-3`, `eth0-rx-3`, virtio's
    /// `virtio2-input.0`). Without such names the first `rx_queues` vectors are taken in IRQ
    /// order (igb and ixgbe allocate queue vectors first, the link vector last) and `guessed`
    /// is true.
    pub fn rx_queue_irqs(&self) -> (Vec<Option<u32>>, bool) {
        let mut irqs = vec![None; self.rx_queues];
        let mut named = false;
        for v in &self.msi {
            let Some(name) = &v.name else { continue };
            let lower = name.to_ascii_lowercase();
            if !lower.contains("rx") && !lower.contains("input") {
                continue;
            }
            let Some((_, n)) = name.rsplit_once(['-', '.']) else {
                continue;
            };
            match n.parse::<usize>() {
                Ok(q) if q < irqs.len() => {
                    irqs[q] = Some(v.irq);
                    named = true;
                }
                _ => {}
            }
        }
        if named {
            return (irqs, false);
        }
        for (slot, v) in irqs.iter_mut().zip(&self.msi) {
            *slot = Some(v.irq);
        }
        (irqs, !self.msi.is_empty())
    }
}

fn discover(root: &Path, name: &str) -> Result<Interface, TopoError> {
    let dir = root.join("sys/class/net").join(name);
    // `symlink_metadata`: a recorded machine may keep the class link of a virtual interface
    // (`lo -> ../../devices/virtual/net/lo`) without its target.
    if name.is_empty() || name.contains('/') || fs::symlink_metadata(&dir).is_err() {
        return Err(TopoError::NoInterface { path: dir });
    }
    let device = dir.join("device");
    let has_device = device.exists();
    // A virtio-net device (`virtio2`) sits below its PCI function, which holds `numa_node`,
    // `local_cpulist` and `msi_irqs`: use the parent when the device itself has none.
    let parent = device.join("..");
    let pci = if !device.join("numa_node").exists() && parent.join("numa_node").exists() {
        parent
    } else {
        device.clone()
    };
    let driver = fs::read_link(device.join("driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let numa_node = match int_opt(&pci.join("numa_node"))? {
        Some(n) if n >= 0 => NicNode::Known(n as usize),
        Some(_) => NicNode::Unreported,
        None => NicNode::NoFile,
    };
    let local_cpus = match cpulist_opt(&pci.join("local_cpulist"))? {
        Some(set) => Some(set),
        None => cpumask_opt(&pci.join("local_cpus"))?,
    };
    let names = interrupt_names(root)?;
    let mut msi = Vec::new();
    let msi_dir = pci.join("msi_irqs");
    for (irq, path) in numbered_entries(&msi_dir, "")?.unwrap_or_default() {
        let Ok(irq) = u32::try_from(irq) else {
            continue;
        };
        let mode = if path.is_dir() {
            text_opt(&path.join("mode"))?
        } else {
            text_opt(&path)?
        }
        .map(|m| m.trim().to_string());
        let name = names
            .iter()
            .find(|(i, _)| *i == irq)
            .map(|(_, n)| n.clone());
        msi.push(MsiVector { irq, mode, name });
    }
    let legacy_irq = int_opt(&pci.join("irq"))?
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v != 0);
    let queues = dir.join("queues");
    let rx_queues = numbered_entries(&queues, "rx-")?.unwrap_or_default().len();
    let tx_queues = numbered_entries(&queues, "tx-")?.unwrap_or_default().len();
    Ok(Interface {
        name: name.to_string(),
        has_device,
        driver,
        numa_node,
        local_cpus,
        msi,
        legacy_irq,
        rx_queues,
        tx_queues,
    })
}

/// `(irq, name)` for each numbered line of `<root>/proc/interrupts` (empty when absent). The
/// name is the line's last field: `  101:  12  0  IR-PCI-MSI-edge  eth0-TxRx-0`.
fn interrupt_names(root: &Path) -> Result<Vec<(u32, String)>, TopoError> {
    let Some(text) = text_opt(&root.join("proc/interrupts"))? else {
        return Ok(Vec::new());
    };
    Ok(parse_interrupts(&text))
}

fn parse_interrupts(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|line| {
            let (irq, rest) = line.split_once(':')?;
            let irq: u32 = irq.trim().parse().ok()?;
            let mut fields = rest.split_whitespace();
            let last = fields.next_back()?;
            // A line of counts only has no action name.
            if last.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((irq, last.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_interrupts_names_are_the_last_field() {
        let text = "           CPU0       CPU1\n  0:   44   0  IO-APIC   2-edge  timer\n\
                    101:   7   9  PCI-MSI 524288-edge  eth0-TxRx-0\nNMI:  0  0  Non-maskable interrupts\n\
                    102:  1 2\n";
        assert_eq!(
            parse_interrupts(text),
            vec![(0, "timer".to_string()), (101, "eth0-TxRx-0".to_string())]
        );
    }

    fn nic(names: &[(u32, Option<&str>)], rx: usize) -> Interface {
        Interface {
            name: "eth0".into(),
            has_device: true,
            driver: None,
            numa_node: NicNode::Known(0),
            local_cpus: None,
            msi: names
                .iter()
                .map(|&(irq, n)| MsiVector {
                    irq,
                    mode: Some("msix".into()),
                    name: n.map(str::to_string),
                })
                .collect(),
            legacy_irq: None,
            rx_queues: rx,
            tx_queues: rx,
        }
    }

    #[test]
    fn queue_irqs_follow_names_when_present() {
        let n = nic(
            &[
                (50, Some("eth0")),
                (51, Some("eth0-TxRx-1")),
                (52, Some("eth0-TxRx-0")),
            ],
            2,
        );
        assert_eq!(n.rx_queue_irqs(), (vec![Some(52), Some(51)], false));
    }

    #[test]
    fn queue_irqs_are_guessed_in_irq_order_without_names() {
        let n = nic(&[(101, None), (102, None), (103, None)], 2);
        assert_eq!(n.rx_queue_irqs(), (vec![Some(101), Some(102)], true));
        let none = nic(&[], 2);
        assert_eq!(none.rx_queue_irqs(), (vec![None, None], false));
    }
}
