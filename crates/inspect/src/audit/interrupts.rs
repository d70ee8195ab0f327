//! Checks of interrupt affinity and network queue masks (XPS/RPS): interrupts and
//! queues of a device allowed on, or only on, CPUs of other nodes.

use std::collections::BTreeMap;

use super::{numactl, Auditor, Finding, Severity};
use crate::cpuset::CpuSet;
use crate::pci::{DeviceClass, OsDeviceKind};

impl<'a> Auditor<'a> {
    pub(super) fn interrupts(&mut self) {
        if !self.sysfs || !self.multi {
            return;
        }
        let irq_info: BTreeMap<u32, &crate::model::Irq> =
            self.m.irqs.iter().map(|i| (i.irq, i)).collect();
        for (i, d) in self.m.pci.iter().enumerate() {
            let Some(node) = self.placements[i].node() else {
                continue;
            };
            if d.irqs.is_empty() || !d.class().does_bulk_io() {
                continue;
            }
            let local = self.node_cpus(node);
            if local.is_empty() {
                continue;
            }
            let mut remote = Vec::new();
            let mut crossing = Vec::new();
            let (mut local_count, mut remote_count) = (0u64, 0u64);
            for irq in &d.irqs {
                let Some(info) = irq_info.get(irq) else {
                    continue;
                };
                for (cpu, c) in &info.counts {
                    if local.contains(*cpu) {
                        local_count += c;
                    } else {
                        remote_count += c;
                    }
                }
                let Some(allowed) = &info.affinity else {
                    continue;
                };
                let effective_remote = info
                    .effective
                    .as_ref()
                    .is_some_and(|e| !e.intersects(&local));
                if !allowed.intersects(&local) || effective_remote {
                    remote.push(*irq);
                } else if !allowed.is_subset(&local) {
                    crossing.push(*irq);
                }
            }
            if remote.is_empty() && crossing.is_empty() {
                continue;
            }
            let (severity, kind) = if remote.is_empty() {
                (Severity::Warning, "irq-affinity-crosses-nodes")
            } else {
                (Severity::Error, "irq-affinity-remote")
            };
            let offending: Vec<u32> = remote.iter().chain(&crossing).copied().collect();
            let label = d.label();
            let mut what = format!(
                "{label} on node {node}: {} of {} interrupts ",
                offending.len(),
                d.irqs.len()
            );
            if remote.is_empty() {
                what.push_str("may be delivered to CPUs of other nodes");
            } else {
                what.push_str(&format!(
                    "go to other nodes ({} only to remote CPUs)",
                    remote.len()
                ));
            }
            what.push_str(&format!(" (IRQ {})", irq_list(&offending)));
            let mut why = format!(
                "An interrupt handled on another node pulls the completion and the driver's ring state across the interconnect and wakes the consumer on the wrong node. Node {node} has CPUs {}.",
                local.to_list_string()
            );
            if local_count + remote_count > 0 {
                why.push_str(&format!(
                    " So far {remote_count} of {} interrupts of this device were handled off node {node}.",
                    local_count + remote_count
                ));
            }
            let mut fix = vec![
                "systemctl stop irqbalance   # or it rewrites the masks; a fixed numa_node lets it place them right".to_string(),
            ];
            let cpus: Vec<u32> = local.iter().collect();
            let all = d.irqs.clone();
            for (k, irq) in all.iter().enumerate() {
                let target = if all.len() == 1 {
                    local.to_list_string()
                } else {
                    cpus[k % cpus.len()].to_string()
                };
                fix.push(format!("echo {target} > /proc/irq/{irq}/smp_affinity_list"));
            }
            if d.class() == DeviceClass::Net && all.len() > cpus.len() {
                if let Some(ifname) = d.os_names(OsDeviceKind::Net).next() {
                    fix.push(format!(
                        "ethtool -L {ifname} combined {}   # one queue per CPU of node {node}",
                        cpus.len()
                    ));
                }
            }
            self.findings
                .push(Finding::new(severity, kind, what, why, fix).on(d.bdf));
        }
    }

    pub(super) fn queues(&mut self) {
        if !self.sysfs || !self.multi {
            return;
        }
        for iface in &self.m.net_interfaces {
            let Some(bdf) = iface.bdf else {
                continue;
            };
            let Some(idx) = self.m.pci_index(bdf) else {
                continue;
            };
            let Some(node) = self.placements[idx].node() else {
                continue;
            };
            let local = self.node_cpus(node);
            if local.is_empty() {
                continue;
            }
            let cpus: Vec<u32> = local.iter().collect();
            for (kind, file, queues, prefix) in [
                ("xps-crosses-nodes", "xps_cpus", &iface.tx_queues, "tx"),
                ("rps-crosses-nodes", "rps_cpus", &iface.rx_queues, "rx"),
            ] {
                let bad: Vec<(u32, &CpuSet)> = queues
                    .iter()
                    .filter_map(|q| q.cpus.as_ref().map(|c| (q.index, c)))
                    .filter(|(_, c)| !c.is_empty() && !c.is_subset(&local))
                    .collect();
                if bad.is_empty() {
                    continue;
                }
                let name = &iface.name;
                let examples: Vec<String> = bad
                    .iter()
                    .take(3)
                    .map(|(i, c)| {
                        format!(
                            "{prefix}-{i} → CPUs {} (nodes {})",
                            c.to_list_string(),
                            self.m.nodes_of_cpus(c).to_list_string()
                        )
                    })
                    .collect();
                let what = format!(
                    "{name} ({bdf}, node {node}): {} of {} {} masks include CPUs of other nodes: {}{}",
                    bad.len(),
                    queues.len(),
                    file,
                    examples.join("; "),
                    if bad.len() > 3 { "; …" } else { "" }
                );
                let why = if prefix == "tx" {
                    format!("XPS picks the transmit queue by the sending CPU. CPUs outside node {node} that send through {name} write descriptors and payload into memory the NIC reads across the interconnect, and a queue shared by CPUs of several nodes bounces its cache lines between sockets. Run the senders on node {node} (CPUs {}) and give each queue local CPUs.", local.to_list_string())
                } else {
                    format!("RPS hands received packets to the CPUs in the mask. Packets DMA'd into node-{node} memory and processed on another node cross the interconnect twice (data and socket wake-up). Keep protocol processing on node {node} (CPUs {}).", local.to_list_string())
                };
                let mut fix = Vec::new();
                for (k, q) in queues.iter().enumerate() {
                    let mask = if prefix == "tx" {
                        CpuSet::single(cpus[k % cpus.len()]).to_mask_string()
                    } else {
                        local.to_mask_string()
                    };
                    fix.push(format!(
                        "echo {mask} > /sys/class/net/{name}/queues/{prefix}-{}/{file}",
                        q.index
                    ));
                }
                fix.push(numactl(node, &format!("<application using {name}>")));
                self.findings
                    .push(Finding::new(Severity::Warning, kind, what, why, fix).on(bdf));
            }
        }
    }
}

fn irq_list(irqs: &[u32]) -> String {
    let set: CpuSet = irqs.iter().copied().collect();
    set.to_list_string()
}
