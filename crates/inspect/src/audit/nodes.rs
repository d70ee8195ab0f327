//! Checks of devices' NUMA attachment: a single-node machine, unknown or contradictory
//! `numa_node`, NICs whose functions sit on different nodes, and the node map of the
//! I/O devices with how to run near each.

use std::collections::{BTreeMap, BTreeSet};

use super::placement::{multi_pf_groups, InferredFrom, Placement};
use super::{numactl, Auditor, Finding, Severity};
use crate::cpuset::CpuSet;
use crate::model::PciDevice;
use crate::pci::{Bdf, DeviceClass, OsDeviceKind};

impl<'a> Auditor<'a> {
    pub(super) fn single_node(&mut self) {
        if self.multi {
            return;
        }
        let node = self.m.nodes.first();
        self.push(Finding::new(
            Severity::Info,
            "single-numa-node",
            format!(
                "1 NUMA node (CPUs {}): no NUDMA is possible on this machine",
                node.map(|n| n.cpus.to_list_string()).unwrap_or_default()
            ),
            "Every CPU, every memory page and every device share one node, so no DMA, doorbell or interrupt crosses a CPU interconnect; the NUMA findings below are harmless here. (A virtual machine may hide the host's nodes: audit the host for the real picture.)".to_string(),
            Vec::new(),
        ));
    }

    pub(super) fn numa_attachment(&mut self) {
        let mut others_unknown: Vec<Bdf> = Vec::new();
        for (i, d) in self.m.pci.iter().enumerate() {
            let class = d.class();
            let placement = self.placements[i];
            if d.physfn.is_some() {
                // A VF has its PF's placement; reporting it again adds nothing.
                continue;
            }
            if d.numa_node.is_none() {
                if !class.does_bulk_io() {
                    others_unknown.push(d.bdf);
                    continue;
                }
                let f = self.unknown_node(d, placement);
                self.push(f);
            } else if let (Some(n), Some(local)) = (d.numa_node, &d.local_cpus) {
                if !self.multi || !class.does_bulk_io() || local.is_empty() {
                    continue;
                }
                let node_cpus = self.node_cpus(n);
                if local.is_subset(&node_cpus) {
                    continue;
                }
                let points_to = self.m.node_containing(local);
                let bdf = d.bdf;
                let mut why = format!(
                    "numa_node comes from the firmware's proximity domain (_PXM) of the device, local_cpulist from that of its root bus; they disagree, so drivers allocate the device's rings on node {n} while tools that read local_cpulist (irqbalance, hwloc, MPI) place its interrupts and threads elsewhere. "
                );
                let mut fix = vec![format!("lspci -vv -s {bdf}")];
                match points_to {
                    Some(p) => {
                        why.push_str(&format!("local_cpulist points to node {p}."));
                        fix.push("# find out which socket the slot is wired to (board manual, `lstopo --whole-io`), then tell the kernel:".to_string());
                        fix.push(format!("echo {p} > /sys/bus/pci/devices/{bdf}/numa_node   # or {n}, whichever is the wired one; writing it taints the kernel (FW_BUG)"));
                    }
                    None => {
                        why.push_str(&format!(
                            "local_cpulist ({}) spans several nodes: the firmware gives the bus no locality at all.",
                            local.to_list_string()
                        ));
                        fix.push("# update the BIOS/firmware so the root bus carries its proximity domain (_PXM)".to_string());
                        fix.push(numactl(n, &format!("<command using {}>", d.label())));
                    }
                }
                self.push(
                    Finding::new(
                        Severity::Warning,
                        "numa-node-inconsistent",
                        format!(
                            "{}: numa_node = {n} but local_cpulist = {} is not within node {n} (CPUs {})",
                            d.label(),
                            local.to_list_string(),
                            node_cpus.to_list_string()
                        ),
                        why,
                        fix,
                    )
                    .on(bdf),
                );
            }
        }
        if !others_unknown.is_empty() {
            let examples: Vec<String> = others_unknown
                .iter()
                .take(4)
                .map(|b| b.to_string())
                .collect();
            let more = others_unknown.len().saturating_sub(examples.len());
            let source_says = if self.sysfs {
                "report numa_node = -1"
            } else {
                "are not attached to a single NUMA node"
            };
            self.push(Finding::new(
                Severity::Info,
                "numa-node-unknown-other",
                format!(
                    "{} bridge, chipset and other non-I/O functions {source_says} ({}{})",
                    others_unknown.len(),
                    examples.join(", "),
                    if more > 0 { format!(", … {more} more") } else { String::new() }
                ),
                "Bridges, uncore and chipset functions do no bulk DMA, so their locality does not matter; it is listed because it shows whether the firmware describes locality at all.".to_string(),
                Vec::new(),
            ));
        }
    }

    fn unknown_node(&self, d: &PciDevice, placement: Placement) -> Finding {
        let bdf = d.bdf;
        let label = d.label();
        let what = if self.sysfs {
            match d.numa_node_raw {
                Some(v) => format!("{label}: numa_node = {v}: the machine does not say which node the device is attached to"),
                None => format!("{label}: no numa_node attribute: the machine does not say which node the device is attached to"),
            }
        } else {
            match &d.attached_nodes {
                Some(n) if !n.is_empty() => format!(
                    "{label}: hwloc attaches the device to nodes {} together, not to one node",
                    n.to_list_string()
                ),
                _ => format!("{label}: hwloc does not attach the device to a NUMA node"),
            }
        };
        if !self.multi {
            return Finding::new(
                Severity::Info,
                "numa-node-unknown",
                what,
                "With a single NUMA node there is nothing to choose: the device is local to every CPU and page. Linux reports -1 when the firmware gives no proximity information, which is normal here.".to_string(),
                Vec::new(),
            )
            .on(bdf);
        }
        let mut why = "Without a node, drivers allocate the device's descriptor rings and buffers on whatever node the probing thread ran, and irqbalance spreads its interrupts over all nodes: DMA, doorbells and interrupts may cross the interconnect on every I/O. The usual cause is firmware that gives the root bus no proximity domain (ACPI _PXM).".to_string();
        let mut fix = Vec::new();
        match placement {
            Placement::Inferred(n, from) => {
                match from {
                    InferredFrom::LocalCpulist => why.push_str(&format!(
                        " local_cpulist ({}) lies within node {n}, so the device is most likely attached to node {n}.",
                        d.local_cpus.as_ref().map(CpuSet::to_list_string).unwrap_or_default()
                    )),
                    InferredFrom::HostBridge => why.push_str(&format!(
                        " Other functions under the same host bridge ({}) report node {n}, so the device is most likely attached to node {n}.",
                        d.host_bridge
                    )),
                }
                fix.push(format!(
                    "echo {n} > /sys/bus/pci/devices/{bdf}/numa_node   # as root; taints the kernel (FW_BUG) until the firmware is fixed"
                ));
                fix.push(numactl(n, &format!("<command using {label}>")));
            }
            _ => {
                if let Some(l) = &d.local_cpus {
                    why.push_str(&format!(
                        " local_cpulist ({}) does not narrow it down either.",
                        l.to_list_string()
                    ));
                }
                fix.push(format!(
                    "# find the socket this slot is wired to: the board's block diagram, or `lspci -tv` for the root port of {bdf}"
                ));
                fix.push(format!(
                    "echo <node> > /sys/bus/pci/devices/{bdf}/numa_node   # as root; taints the kernel (FW_BUG)"
                ));
                fix.push(
                    "# and ask the vendor for firmware that reports _PXM for this root bus"
                        .to_string(),
                );
            }
        }
        Finding::new(Severity::Warning, "numa-node-unknown", what, why, fix).on(bdf)
    }

    pub(super) fn multi_pf(&mut self) {
        let groups = multi_pf_groups(self.m);
        for g in groups {
            let nodes: BTreeSet<Option<u32>> =
                g.iter().map(|&i| self.placements[i].node()).collect();
            let first = &self.m.pci[g[0]];
            let parts: Vec<String> = g
                .iter()
                .map(|&i| {
                    let d = &self.m.pci[i];
                    match self.placements[i].node() {
                        Some(n) => format!("{} → node {n}", d.label()),
                        None => format!("{} → node unknown", d.label()),
                    }
                })
                .collect();
            let how = match &first.serial {
                Some(s)
                    if g.iter()
                        .all(|&i| self.m.pci[i].serial.as_deref() == Some(s)) =>
                {
                    format!("same serial number {s}")
                }
                _ => "same vendor, device and bus:device under different host bridges".to_string(),
            };
            let mut fix = Vec::new();
            for &i in &g {
                let d = &self.m.pci[i];
                if let Some(n) = self.placements[i].node() {
                    fix.push(numactl(
                        n,
                        &format!("<workload of node {n}, using {}>", d.label()),
                    ));
                }
            }
            fix.push("# bond/team the PFs and steer each flow to the PF of the node that runs its socket owner (IOctopus-style), instead of sending everything through one PF".to_string());
            self.findings.push(
                Finding::new(
                    Severity::Info,
                    "multi-pf-nic",
                    format!(
                        "one physical NIC ({}) with {} PCI functions on different {}: {}",
                        first.model().unwrap_or_else(|| "unknown model".to_string()),
                        g.len(),
                        if nodes.len() > 1 { "NUMA nodes" } else { "host bridges" },
                        parts.join(", ")
                    ),
                    format!("Recognised by {how}. A multi-PF (socket-direct, multi-host) NIC gives each socket a local PCIe function: traffic of threads on a node stays local only if it goes through that node's PF; traffic through the other PF crosses the interconnect on every DMA."),
                    fix,
                )
                .on(first.bdf),
            );
        }
    }

    pub(super) fn io_locality(&mut self) {
        if !self.multi {
            return;
        }
        let mut per_node: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        let mut unknown = Vec::new();
        let mut fix = Vec::new();
        for (i, d) in self.m.pci.iter().enumerate() {
            if !d.class().does_bulk_io() || d.physfn.is_some() {
                continue;
            }
            let label = d
                .primary_name()
                .map(|n| format!("{n} ({})", d.class()))
                .unwrap_or_else(|| format!("{} ({})", d.bdf, d.class()));
            match self.placements[i] {
                Placement::Reported(n) => per_node.entry(n).or_default().push(label),
                Placement::Inferred(n, _) => {
                    per_node.entry(n).or_default().push(format!("{label}?"))
                }
                Placement::Unknown => unknown.push(label),
            }
            if let Some(n) = self.placements[i].node() {
                match d.class() {
                    DeviceClass::Nvme => {
                        let dev = d
                            .os_names(OsDeviceKind::Block)
                            .next()
                            .map(|b| format!("/dev/{b}"))
                            .or_else(|| {
                                d.os_names(OsDeviceKind::NvmeController)
                                    .next()
                                    .map(|c| format!("/dev/{c}n1"))
                            })
                            .unwrap_or_else(|| "/dev/nvmeXn1".to_string());
                        fix.push(format!(
                            "fio --name=local --filename={dev} --direct=1 --rw=randread --bs=4k --iodepth=32 --numa_cpu_nodes={n} --numa_mem_policy=bind:{n}"
                        ));
                    }
                    DeviceClass::Net | DeviceClass::Infiniband | DeviceClass::Gpu => {
                        if let Some(name) = d.primary_name() {
                            fix.push(numactl(n, &format!("<application using {name}>")));
                        }
                    }
                    _ => {}
                }
            }
        }
        if per_node.is_empty() && unknown.is_empty() {
            return;
        }
        let mut what = String::from("I/O devices per node: ");
        let mut parts: Vec<String> = self
            .m
            .nodes
            .iter()
            .map(|n| match per_node.get(&n.id) {
                Some(v) => format!("node {}: {}", n.id, v.join(", ")),
                None => format!("node {}: none", n.id),
            })
            .collect();
        if !unknown.is_empty() {
            parts.push(format!("unknown node: {}", unknown.join(", ")));
        }
        what.push_str(&parts.join("; "));
        let empty: Vec<String> = self
            .m
            .nodes
            .iter()
            .filter(|n| !per_node.contains_key(&n.id) && !n.cpus.is_empty())
            .map(|n| n.id.to_string())
            .collect();
        let mut why = "A device's DMA, doorbells and interrupts stay on its node only when the threads and buffers that drive it live there too; from any other node every access crosses the CPU interconnect (NUDMA).".to_string();
        if !per_node.is_empty() && unknown.is_empty() && !empty.is_empty() {
            why.push_str(&format!(
                " Node(s) {} have no I/O devices: threads there reach every device remotely, so keep I/O-heavy work off them or use a multi-PF device.",
                empty.join(", ")
            ));
        }
        if per_node
            .values()
            .any(|v| v.iter().any(|l| l.ends_with('?')))
        {
            why.push_str(" `?` marks a node the audit inferred; the machine does not state it.");
        }
        if !unknown.is_empty() {
            why.push_str(" Devices on an unknown node cannot be placed well until their node is known (see their findings).");
        }
        fix.dedup();
        self.findings
            .push(Finding::new(Severity::Info, "io-locality", what, why, fix));
    }
}
