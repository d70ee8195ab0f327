//! Checks of processes: threads and memory away from the devices a process uses, or
//! spread over nodes.

use std::collections::BTreeMap;

use super::{human_bytes, numactl, Auditor, Finding, Severity};
use crate::model::ProcessInfo;
use crate::pci::DeviceClass;

impl<'a> Auditor<'a> {
    pub(super) fn processes(&mut self) {
        let m = self.m;
        for p in &m.processes {
            self.process(p);
        }
    }

    /// The findings on one process given with `--pid`: tied to the devices it uses where
    /// it uses any on a known node, else its threads compared with its memory.
    fn process(&mut self, p: &ProcessInfo) {
        let who = match &p.name {
            Some(n) => format!("process {} ({n})", p.pid),
            None => format!("process {}", p.pid),
        };
        if p.threads.is_empty() && p.name.is_none() {
            self.findings.push(Finding::new(
                Severity::Warning,
                "process-unreadable",
                format!("{who}: cannot be read: {}", p.problems.join("; ")),
                "The process may have exited, or procfs hides it from this user.".to_string(),
                vec![format!("ps -o pid,psr,comm -L -p {}", p.pid)],
            ));
            return;
        }
        let thread_nodes: Vec<u32> = p
            .threads
            .iter()
            .filter_map(|t| t.last_cpu.and_then(|c| self.m.node_of_cpu(c)))
            .collect();
        if !p.problems.is_empty() {
            self.findings.push(Finding::new(
                Severity::Info,
                "process-partly-unreadable",
                format!("{who}: some files could not be read: {}", p.problems.join("; ")),
                "Without them the audit sees less of the process (numa_maps and fd need the same user or root).".to_string(),
                Vec::new(),
            ));
        }
        if !self.process_devices(p, &who, &thread_nodes) {
            self.process_placement(p, &who, &thread_nodes);
        }
    }

    /// A finding per device the process uses on a known node (on a multi-node machine):
    /// local, or how far its threads and memory are from it. Whether there was one.
    fn process_devices(&mut self, p: &ProcessInfo, who: &str, thread_nodes: &[u32]) -> bool {
        let total_mem = total_memory(p);
        let mut reported_device = false;
        for u in &p.devices {
            let Some(idx) = self.m.pci_index(u.bdf) else {
                continue;
            };
            let Some(node) = self.placements[idx].node() else {
                continue;
            };
            if !self.multi {
                continue;
            }
            reported_device = true;
            let dev = &self.m.pci[idx];
            let remote_threads = thread_nodes.iter().filter(|&&n| n != node).count();
            let on: u64 = p.memory_bytes_per_node.get(&node).copied().unwrap_or(0);
            let remote_frac = if total_mem > 0 {
                (total_mem - on) as f64 / total_mem as f64
            } else {
                0.0
            };
            let thread_sev = if thread_nodes.is_empty() || remote_threads == 0 {
                None
            } else if remote_threads == thread_nodes.len() {
                Some(Severity::Error)
            } else {
                Some(Severity::Warning)
            };
            let mem_sev = if remote_frac >= 0.5 {
                Some(Severity::Error)
            } else if remote_frac >= 0.1 {
                Some(Severity::Warning)
            } else {
                None
            };
            let Some(severity) = thread_sev.max(mem_sev) else {
                self.findings.push(
                    Finding::new(
                        Severity::Info,
                        "process-placement",
                        format!(
                            "{who} uses {} on node {node} and runs there: its threads and memory are local",
                            dev.label()
                        ),
                        "Placement of the given process relative to the devices it uses.".to_string(),
                        Vec::new(),
                    )
                    .on(dev.bdf),
                );
                continue;
            };
            let local = self.node_cpus(node);
            let others: Vec<String> = p
                .memory_bytes_per_node
                .keys()
                .filter(|&&n| n != node)
                .map(|n| n.to_string())
                .collect();
            let mut fix = vec![format!(
                "taskset -a -p -c {} {}",
                local.to_list_string(),
                p.pid
            )];
            if !others.is_empty() {
                fix.push(format!(
                    "migratepages {} {} {node}",
                    p.pid,
                    others.join(",")
                ));
            }
            fix.push(format!(
                "# or restart it bound to the device's node: {}",
                numactl(node, "<command>")
            ));
            if dev.class() == DeviceClass::Nvme {
                fix.push(format!(
                    "# for fio: --numa_cpu_nodes={node} --numa_mem_policy=bind:{node}"
                ));
            }
            self.findings.push(
                Finding::new(
                    severity,
                    "process-device-remote",
                    format!(
                        "{who} uses {} on node {node} (via {}), but {remote_threads} of {} threads last ran on other nodes and {}",
                        dev.label(),
                        u.via,
                        thread_nodes.len(),
                        remote_memory_text(p, node)
                    ),
                    format!("Every I/O the process issues to {} then crosses the interconnect: descriptors and doorbells from remote CPUs, DMA into remote memory, completions and interrupts back across. Node {node} has CPUs {}.", dev.label(), local.to_list_string()),
                    fix,
                )
                .on(dev.bdf),
            );
        }
        reported_device
    }

    /// Without a device tie: the process's threads compared with its memory.
    fn process_placement(&mut self, p: &ProcessInfo, who: &str, thread_nodes: &[u32]) {
        let total_mem = total_memory(p);
        let mut hist: BTreeMap<u32, usize> = BTreeMap::new();
        for n in thread_nodes {
            *hist.entry(*n).or_default() += 1;
        }
        let main_node = hist.iter().max_by_key(|(_, c)| **c).map(|(n, _)| *n);
        let threads_text = if hist.is_empty() {
            "no thread's last CPU known".to_string()
        } else {
            hist.iter()
                .map(|(n, c)| format!("{c} thread(s) last ran on node {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let memory_text = if p.memory_bytes_per_node.is_empty() {
            "memory per node unknown".to_string()
        } else {
            format!(
                "memory: {}",
                p.memory_bytes_per_node
                    .iter()
                    .map(|(n, b)| format!("{} on node {n}", human_bytes(*b)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let placement = format!("{threads_text}; {memory_text}");
        let device_note = if p.devices.is_empty() {
            " No device file or mapping ties it to a PCI device (sockets cannot be tied to a NIC from /proc): compare with the I/O map above."
        } else {
            ""
        };
        match main_node {
            Some(n)
                if self.multi && total_mem > 0 && {
                    let on = p.memory_bytes_per_node.get(&n).copied().unwrap_or(0);
                    (total_mem - on) as f64 / total_mem as f64 >= 0.5
                } =>
            {
                let others: Vec<String> = p
                    .memory_bytes_per_node
                    .keys()
                    .filter(|&&k| k != n)
                    .map(|k| k.to_string())
                    .collect();
                self.findings.push(Finding::new(
                    Severity::Warning,
                    "process-memory-remote",
                    format!("{who}: most threads run on node {n} but {}", remote_memory_text(p, n)),
                    format!("Loads and stores, and any DMA into those buffers, cross the interconnect.{device_note} ({placement})"),
                    vec![
                        format!("migratepages {} {} {n}", p.pid, others.join(",")),
                        format!("# or restart it bound: {}", numactl(n, "<command>")),
                    ],
                ));
            }
            _ => self.findings.push(Finding::new(
                Severity::Info,
                "process-placement",
                format!("{who}: {placement}"),
                format!("Placement of the given process.{device_note}"),
                Vec::new(),
            )),
        }
    }
}

/// How much of a process's resident memory is off `node`, for a finding's text.
fn remote_memory_text(p: &ProcessInfo, node: u32) -> String {
    let total_mem = total_memory(p);
    let on: u64 = p.memory_bytes_per_node.get(&node).copied().unwrap_or(0);
    if total_mem == 0 {
        "no resident memory was measured".to_string()
    } else {
        format!(
            "{:.0}% of its {} resident memory is on other nodes",
            (total_mem - on) as f64 / total_mem as f64 * 100.0,
            human_bytes(total_mem)
        )
    }
}

/// A process's resident bytes over all nodes; saturating, as `numa_maps` counts are
/// themselves saturated at `u64::MAX` per node.
fn total_memory(p: &ProcessInfo) -> u64 {
    p.memory_bytes_per_node
        .values()
        .fold(0u64, |a, &b| a.saturating_add(b))
}
