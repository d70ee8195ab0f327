//! Interrupts and network queues under a sysfs root: `/proc/interrupts` with each IRQ's
//! affinity, and each network interface's queues with their XPS/RPS masks.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use super::pci_devices::device_bdf;
use super::{natural_cmp, SysfsReader};
use crate::cpuset::CpuSet;
use crate::model::{Irq, NetInterface, NetQueue, NoteLevel};
use crate::pci::{Bdf, OsDeviceKind};

/// One `/proc/interrupts` line: IRQ number, (CPU, count) pairs, the rest.
pub(crate) type InterruptLine = (u32, Vec<(u32, u64)>, String);

/// Parses `/proc/interrupts` into (irq, per-CPU counts, description).
pub(crate) fn parse_proc_interrupts(text: &str) -> Vec<InterruptLine> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cpu_columns: Vec<u32> = header
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    let mut out = Vec::new();
    for line in lines {
        let mut tokens = line.split_whitespace();
        let Some(first) = tokens.next() else {
            continue;
        };
        let Some(irq) = first.strip_suffix(':').and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let rest: Vec<&str> = tokens.collect();
        let mut counts = Vec::new();
        let mut used = 0;
        for (i, cpu) in cpu_columns.iter().enumerate() {
            match rest.get(i).and_then(|t| t.parse::<u64>().ok()) {
                Some(c) => {
                    counts.push((*cpu, c));
                    used = i + 1;
                }
                None => break,
            }
        }
        out.push((irq, counts, rest[used..].join(" ")));
    }
    out
}

/// Whether an interrupt action name belongs to an OS device: `eth0`, `eth0-TxRx-3`,
/// `nvme0q2`, `mlx5_comp0@…` — but not `eth10` for `eth1`.
pub(crate) fn action_matches(token: &str, os_name: &str) -> bool {
    let Some(rest) = token.strip_prefix(os_name) else {
        return false;
    };
    match rest.chars().next() {
        None => true,
        Some(c) if !c.is_ascii_alphanumeric() => true,
        Some('q') if os_name.starts_with("nvme") => {
            rest[1..].chars().next().is_some_and(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

impl SysfsReader {
    pub(super) fn read_net_interfaces(&mut self) {
        let Some(names) = self.list_dir(
            "sys/class/net",
            NoteLevel::Info,
            "network queues (XPS/RPS) not audited",
        ) else {
            return;
        };
        for name in names {
            let dir = self.path(&format!("sys/class/net/{name}"));
            let Some(bdf) = device_bdf(&dir) else {
                continue;
            };
            let mut iface = NetInterface {
                name: name.clone(),
                bdf: Some(bdf),
                tx_queues: Vec::new(),
                rx_queues: Vec::new(),
            };
            if let Ok(rd) = fs::read_dir(dir.join("queues")) {
                let mut queues: Vec<String> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                queues.sort_by(|a, b| natural_cmp(a, b));
                for q in queues {
                    let (list, file, index) = if let Some(i) = q.strip_prefix("tx-") {
                        (&mut iface.tx_queues, "xps_cpus", i)
                    } else if let Some(i) = q.strip_prefix("rx-") {
                        (&mut iface.rx_queues, "rps_cpus", i)
                    } else {
                        continue;
                    };
                    let Ok(index) = index.parse::<u32>() else {
                        continue;
                    };
                    let cpus = fs::read_to_string(dir.join("queues").join(&q).join(file))
                        .ok()
                        .and_then(|t| CpuSet::parse_mask(&t).ok());
                    list.push(NetQueue { index, cpus });
                }
            }
            self.m.net_interfaces.push(iface);
        }
    }

    pub(super) fn read_interrupts(&mut self) {
        let parsed = self
            .read_noted(
                "proc/interrupts",
                NoteLevel::Info,
                "interrupt affinity not audited",
            )
            .map(|t| parse_proc_interrupts(&t))
            .unwrap_or_default();
        let mut wanted: BTreeSet<u32> = self
            .m
            .pci
            .iter()
            .flat_map(|d| d.irqs.iter().copied())
            .collect();
        // Tie interrupts to devices by the address in the chip name
        // (`PCI-MSIX-0000:00:03.0`) and by action names (`eth0-TxRx-0`, `nvme0q1`).
        for (irq, _, desc) in &parsed {
            let mut owners: Vec<usize> = Vec::new();
            if let Some(bdf) = Bdf::last_in(desc) {
                owners.extend(self.m.pci_index(bdf));
            }
            for token in desc.split([' ', ',']).filter(|t| !t.is_empty()) {
                for (i, dev) in self.m.pci.iter().enumerate() {
                    if dev
                        .os_devices
                        .iter()
                        .any(|o| o.kind != OsDeviceKind::Block && action_matches(token, &o.name))
                    {
                        owners.push(i);
                    }
                }
            }
            for i in owners {
                if !self.m.pci[i].irqs.contains(irq) {
                    self.m.pci[i].irqs.push(*irq);
                    self.m.pci[i].irqs.sort_unstable();
                }
                wanted.insert(*irq);
            }
        }
        let by_irq: BTreeMap<u32, (Vec<(u32, u64)>, String)> = parsed
            .into_iter()
            .map(|(irq, counts, desc)| (irq, (counts, desc)))
            .collect();
        for irq in wanted {
            let dir = self.path(&format!("proc/irq/{irq}"));
            let affinity = self
                .read(&dir.join("smp_affinity_list"))
                .and_then(|t| CpuSet::parse_list(&t).ok())
                .or_else(|| {
                    self.read(&dir.join("smp_affinity"))
                        .and_then(|t| CpuSet::parse_mask(&t).ok())
                });
            let effective = self
                .read(&dir.join("effective_affinity_list"))
                .and_then(|t| CpuSet::parse_list(&t).ok())
                .filter(|c| !c.is_empty());
            let (counts, description) = by_irq.get(&irq).cloned().unwrap_or_default();
            self.m.irqs.push(Irq {
                irq,
                affinity,
                effective,
                counts,
                description,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_parse() {
        let text = "           CPU0       CPU1\n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 38:          0       2110 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\nNMI:          0          0   Non-maskable interrupts\n";
        let p = parse_proc_interrupts(text);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].0, 38);
        assert_eq!(p[1].1, vec![(0, 0), (1, 2110)]);
        assert!(p[1].2.contains("virtio2-input.0"));
    }

    #[test]
    fn action_names() {
        assert!(action_matches("eth1", "eth1"));
        assert!(action_matches("eth1-TxRx-3", "eth1"));
        assert!(!action_matches("eth10-TxRx-3", "eth1"));
        assert!(action_matches("nvme0q3", "nvme0"));
        assert!(!action_matches("nvme01", "nvme0"));
        assert!(action_matches("mlx5_comp0@pci:0000:81:00.0", "mlx5_comp0"));
    }
}
