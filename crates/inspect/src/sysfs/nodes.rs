//! NUMA nodes under a sysfs root: their CPUs, memory and distances, their nearest
//! initiators' latency and bandwidth (ACPI HMAT), and GPU memory onlined as a node.

use std::fs;

use super::{meminfo_total, SysfsReader};
use crate::cpuset::CpuSet;
use crate::model::{
    limits, DistanceMatrix, Initiator, MemAttrValue, MemoryAttribute, NoteLevel, NumaNode,
};
use crate::pci::Bdf;

/// One node's HMAT figures for its nearest initiators.
struct HmatEntry {
    target: u32,
    initiators: CpuSet,
    latency_ns: Option<u64>,
    bandwidth_mib_s: Option<u64>,
}

impl SysfsReader {
    pub(super) fn read_nodes(&mut self) {
        let rel = "sys/devices/system/node";
        let names = self.list_dir(
            rel,
            NoteLevel::Warning,
            "no NUMA information: the machine is taken as a single node",
        );
        let mut rows: Vec<(u32, Option<Vec<f64>>)> = Vec::new();
        let mut hmat = Vec::new();
        for name in names.unwrap_or_default() {
            let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let dir = format!("{rel}/{name}");
            // Older kernels have only the hex `cpumap`; newer ones both.
            let list = self.read(&self.path(&format!("{dir}/cpulist")));
            let (file, parsed) = match list {
                Some(t) => ("cpulist", Some(CpuSet::parse_list(&t))),
                None => (
                    "cpumap",
                    self.read(&self.path(&format!("{dir}/cpumap")))
                        .map(|t| CpuSet::parse_mask(&t)),
                ),
            };
            let cpus = match parsed {
                Some(Ok(c)) => c,
                Some(Err(e)) => {
                    self.m.note(
                        NoteLevel::Warning,
                        self.path(&format!("{dir}/{file}")).display().to_string(),
                        e.to_string(),
                    );
                    CpuSet::new()
                }
                None => CpuSet::new(),
            };
            let meminfo = self.path(&format!("{dir}/meminfo"));
            let memory_bytes = self.read(&meminfo).and_then(|t| meminfo_total(&t));
            let memory_bytes = match memory_bytes {
                Some(b) if b > limits::NODE_BYTES => {
                    self.m.note(
                        NoteLevel::Warning,
                        meminfo.display().to_string(),
                        format!(
                            "MemTotal of {b} bytes is beyond {}, more than any machine's node; the node's size is taken as unknown",
                            limits::NODE_BYTES_TEXT
                        ),
                    );
                    None
                }
                other => other,
            };
            let distance = self
                .read(&self.path(&format!("{dir}/distance")))
                .and_then(|t| {
                    t.split_whitespace()
                        .map(|v| v.parse::<f64>().ok())
                        .collect::<Option<Vec<f64>>>()
                });
            // Some architectures keep offline CPUs in their node's list; nothing runs
            // on them, so they do not count.
            let cpus = if self.m.cpus.is_empty() || cpus.is_subset(&self.m.cpus) {
                cpus
            } else {
                let online = cpus.intersection(&self.m.cpus);
                let offline = cpus.difference(&self.m.cpus);
                self.m.note(
                    NoteLevel::Info,
                    self.path(&format!("{dir}/{file}")).display().to_string(),
                    format!(
                        "CPUs {} of node {id} are offline and not counted{}",
                        offline.to_list_string(),
                        if online.is_empty() {
                            "; the node is taken as memory only"
                        } else {
                            ""
                        }
                    ),
                );
                online
            };
            let mut node = NumaNode::new(id, cpus, memory_bytes);
            node.initiators = self.hmat(&dir, id, &mut hmat);
            self.m.nodes.push(node);
            rows.push((id, distance));
        }
        if self.m.nodes.is_empty() {
            self.m.nodes.push(NumaNode::new(
                0,
                self.m.cpus.clone(),
                self.m.total_memory_bytes,
            ));
            return;
        }
        self.hmat_attributes(hmat);
        self.read_gpu_memory_nodes();
        self.m.nodes.sort_by_key(|n| n.id);
        rows.sort_by_key(|r| r.0);
        let n = rows.len();
        if rows
            .iter()
            .all(|(_, d)| d.as_ref().is_some_and(|v| v.len() == n))
        {
            let values = rows
                .iter()
                .flat_map(|(_, d)| d.clone().unwrap_or_default())
                .collect();
            self.m.distances.push(DistanceMatrix {
                name: Some("SLIT".to_string()),
                object_type: "NUMANode".to_string(),
                kind: 1 | 4,
                ids: rows.iter().map(|(id, _)| *id as u64).collect(),
                values,
            });
        }
        if self.m.cpus.is_empty() {
            self.m.cpus = self
                .m
                .nodes
                .iter()
                .fold(CpuSet::new(), |a, n| a.union(&n.cpus));
        }
    }

    /// A node's nearest initiators and their access figures from the ACPI HMAT
    /// (`access1/initiators`: CPUs only, else `access0/initiators`), pushing
    /// (target, initiator nodes, read latency ns, read bandwidth MiB/s) onto `out`.
    fn hmat(&self, dir: &str, id: u32, out: &mut Vec<HmatEntry>) -> Option<CpuSet> {
        for class in ["access1", "access0"] {
            let idir = self.path(&format!("{dir}/{class}/initiators"));
            let Ok(rd) = fs::read_dir(&idir) else {
                continue;
            };
            let initiators: CpuSet = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_prefix("node")?
                        .parse::<u32>()
                        .ok()
                })
                .collect();
            if initiators.is_empty() {
                continue;
            }
            // The kernel writes 0 for a figure the firmware did not give.
            let figure = |f: &str| {
                self.read(&idir.join(f))
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|&v| v > 0)
            };
            out.push(HmatEntry {
                target: id,
                initiators: initiators.clone(),
                latency_ns: figure("read_latency"),
                bandwidth_mib_s: figure("read_bandwidth"),
            });
            return Some(initiators);
        }
        None
    }

    /// hwloc's `Latency` and `Bandwidth` memory attributes from the HMAT figures, with
    /// the initiator nodes' CPUs as initiator (as hwloc itself builds them).
    fn hmat_attributes(&mut self, entries: Vec<HmatEntry>) {
        let mut latency = Vec::new();
        let mut bandwidth = Vec::new();
        for e in entries {
            let cpus = e
                .initiators
                .iter()
                .filter_map(|n| self.m.node(n))
                .fold(CpuSet::new(), |a, n| a.union(&n.cpus));
            if cpus.is_empty() {
                continue;
            }
            for (list, value) in [
                (&mut latency, e.latency_ns),
                (&mut bandwidth, e.bandwidth_mib_s),
            ] {
                if let Some(v) = value {
                    list.push(MemAttrValue {
                        target_node: Some(e.target),
                        target_type: "NUMANode".to_string(),
                        target_gp_index: e.target as u64,
                        initiator: Some(Initiator::Cpus(cpus.clone())),
                        value: v,
                    });
                }
            }
        }
        for (name, values) in [("Latency", latency), ("Bandwidth", bandwidth)] {
            if !values.is_empty() {
                self.m.memory_attributes.push(MemoryAttribute {
                    name: name.to_string(),
                    flags: 0,
                    values,
                });
            }
        }
    }

    /// GPU memory the NVIDIA driver onlined as a NUMA node:
    /// `/proc/driver/nvidia/gpus/BDF/numa_status` names the node of each GPU.
    fn read_gpu_memory_nodes(&mut self) {
        let dir = self.path("proc/driver/nvidia/gpus");
        let Ok(rd) = fs::read_dir(&dir) else {
            return;
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let Ok(bdf) = name.parse::<Bdf>() else {
                continue;
            };
            let path = dir.join(&name).join("numa_status");
            let Some(text) = self.read(&path) else {
                continue;
            };
            let node = text.lines().find_map(|l| {
                l.strip_prefix("Node:")
                    .and_then(|v| v.trim().parse::<i64>().ok())
            });
            // `Node: -1`: the GPU's memory is not onlined as a node.
            let Some(n) = node.and_then(|n| u32::try_from(n).ok()) else {
                continue;
            };
            match self.m.nodes.iter_mut().find(|x| x.id == n) {
                Some(x) => {
                    x.kind = Some("GPUMemory".to_string());
                    x.device = Some(bdf);
                }
                None => self.m.note(
                    NoteLevel::Info,
                    path.display().to_string(),
                    format!("names NUMA node {n}, which the machine does not list"),
                ),
            }
        }
    }
}
