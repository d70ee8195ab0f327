//! How an imported machine maps onto the fabric's platform for `inspect --export`: the
//! fabric has packages of `nodes_per_package` CPU nodes each, then memory-only nodes
//! served by one package. Real machines are less regular:
//!
//! - several packages may share one NUMA node (an SGI Altix blade: four sockets, one
//!   memory), so packages joined through a node become one fabric package — in the
//!   fabric a package is the uncore that holds a node's memory and root complex;
//! - packages may hold different numbers of NUMA nodes, or more than the fabric's
//!   64 packages × 8 nodes: then each CPU node becomes a package (or consecutive nodes
//!   are grouped), as a stated assumption;
//! - memory-only nodes (HBM, NVDIMM, CXL or GPU memory; nodes whose CPUs are all
//!   offline) are attached to the package the machine places them with: their hwloc
//!   locality, the firmware's nearest initiator (HMAT), the GPU whose memory they are,
//!   else the nearest CPU node by the distance matrix (an assumption).

use std::collections::BTreeMap;

use crate::audit::device_placement;
use crate::cpuset::CpuSet;
use crate::error::InspectError;
use crate::model::{Machine, Source};

/// The fabric's limits (crates/fabric/src/scenario.rs).
pub const MAX_PACKAGES: usize = 64;
pub const MAX_NODES_PER_PACKAGE: usize = 8;

/// One fabric package: the machine packages it stands for and its CPU nodes (ids).
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutPackage {
    pub machine_packages: Vec<u32>,
    pub cpu_nodes: Vec<u32>,
}

/// How a memory-only node's package was found.
#[derive(Clone, Debug, PartialEq)]
pub enum Attach {
    /// The machine says it (hwloc locality, HMAT initiator, the GPU it belongs to).
    Reported(String),
    /// Nothing says it; the reason for the choice.
    Assumed(String),
}

/// A memory-only node and the fabric package serving it.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutMemoryNode {
    pub id: u32,
    pub package: usize,
    /// The fabric's kind word: dram, hbm, nvm, cxl, gpu or other.
    pub kind: &'static str,
    pub attach: Attach,
}

/// The machine laid out as the fabric's platform.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub packages: Vec<LayoutPackage>,
    pub nodes_per_package: usize,
    /// Fabric node index → machine node id: CPU nodes package by package, then the
    /// memory-only nodes.
    pub node_ids: Vec<u32>,
    pub memory_nodes: Vec<LayoutMemoryNode>,
    /// The machine had no package objects: one package per CPU node is assumed.
    pub packages_assumed: bool,
    /// Why the packages differ from the machine's, when they do (an assumption).
    pub grouping: Option<String>,
}

impl Layout {
    pub fn of(m: &Machine) -> Result<Layout, InspectError> {
        let mut cpu_nodes: Vec<u32> = m
            .nodes
            .iter()
            .map(|n| n.id)
            .filter(|&id| !m.is_memory_only(id))
            .collect();
        let mut grouping: Vec<String> = Vec::new();
        if cpu_nodes.is_empty() {
            // No node says where CPUs run (an export without CPU sets): every node
            // of ordinary memory is taken as a CPU node, or the first node.
            cpu_nodes = m
                .nodes
                .iter()
                .filter(|n| !n.is_special_memory())
                .map(|n| n.id)
                .collect();
            if cpu_nodes.is_empty() {
                cpu_nodes.extend(m.nodes.first().map(|n| n.id));
            }
            grouping.push(
                "no NUMA node lists CPUs: nodes of ordinary memory are taken as CPU nodes"
                    .to_string(),
            );
        }
        if cpu_nodes.is_empty() {
            return Err(InspectError::Invalid {
                path: source_path(m),
                message: "the machine has no NUMA node to export".to_string(),
            });
        }
        let home: BTreeMap<u32, CpuSet> = cpu_nodes.iter().map(|&n| (n, m.home_cpus(n))).collect();
        let packages: Vec<(u32, &CpuSet)> = m
            .packages
            .iter()
            .filter(|p| !p.cpus.is_empty())
            .map(|p| (p.id, &p.cpus))
            .collect();
        let packages_assumed = packages.is_empty();

        // Union-find over packages (0..P) and CPU nodes (P..P+C), joined where a
        // package's CPUs run on a node.
        let (np, nc) = (packages.len(), cpu_nodes.len());
        let mut parent: Vec<usize> = (0..np + nc).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for (pi, (_, pc)) in packages.iter().enumerate() {
            for (ci, n) in cpu_nodes.iter().enumerate() {
                if home[n].intersects(pc) {
                    let (a, b) = (find(&mut parent, pi), find(&mut parent, np + ci));
                    parent[a] = b;
                }
            }
        }
        let mut groups: BTreeMap<usize, LayoutPackage> = BTreeMap::new();
        for (ci, &node) in cpu_nodes.iter().enumerate() {
            let r = find(&mut parent, np + ci);
            groups
                .entry(r)
                .or_insert_with(|| LayoutPackage {
                    machine_packages: vec![],
                    cpu_nodes: vec![],
                })
                .cpu_nodes
                .push(node);
        }
        let mut unplaced = Vec::new();
        for (pi, (id, _)) in packages.iter().enumerate() {
            let r = find(&mut parent, pi);
            match groups.get_mut(&r) {
                Some(g) => g.machine_packages.push(*id),
                None => unplaced.push(id.to_string()),
            }
        }
        if !unplaced.is_empty() {
            grouping.push(format!(
                "package(s) {} have no CPUs in any NUMA node and are left out",
                unplaced.join(", ")
            ));
        }
        let mut groups: Vec<LayoutPackage> = groups.into_values().collect();
        groups.sort_by_key(|g| g.cpu_nodes.iter().min().copied());

        // Every group holds at least one CPU node, and there is one (checked above).
        let k = groups.first().map_or(1, |g| g.cpu_nodes.len());
        let uniform = groups.iter().all(|g| g.cpu_nodes.len() == k);
        let shared: Vec<&LayoutPackage> = groups
            .iter()
            .filter(|g| g.machine_packages.len() > 1)
            .collect();
        let (packages_out, npp) = if uniform
            && k <= MAX_NODES_PER_PACKAGE
            && groups.len() <= MAX_PACKAGES
        {
            if let Some(g) = shared.first() {
                grouping.push(format!(
                        "{} machine packages over {} group(s) share NUMA nodes (e.g. packages {} on node(s) {}): each group is one package here, as the fabric puts a node's memory and root complex on one package",
                        np,
                        groups.len(),
                        list(&g.machine_packages),
                        list(&g.cpu_nodes)
                    ));
            }
            (groups, k)
        } else {
            // One package per CPU node, or consecutive CPU nodes grouped to fit.
            let c = cpu_nodes.len();
            let per = c.div_ceil(MAX_PACKAGES).max(1);
            if per > MAX_NODES_PER_PACKAGE || !c.is_multiple_of(per) {
                return Err(InspectError::Invalid {
                        path: source_path(m),
                        message: format!(
                            "{c} NUMA nodes with CPUs cannot be laid out as the fabric's at most {MAX_PACKAGES} packages of at most {MAX_NODES_PER_PACKAGE} nodes each"
                        ),
                    });
            }
            let why = if !uniform || k > MAX_NODES_PER_PACKAGE {
                format!(
                        "packages hold {} NUMA node(s) each, which the fabric's nodes_per_package cannot express",
                        distinct(groups.iter().map(|g| g.cpu_nodes.len()))
                    )
            } else {
                format!(
                    "{} package groups exceed the fabric's {MAX_PACKAGES}",
                    groups.len()
                )
            };
            grouping.push(format!(
                "{why}: every {} consecutive CPU node(s) make one package here",
                per
            ));
            let mut ordered: Vec<u32> = groups.iter().flat_map(|g| g.cpu_nodes.clone()).collect();
            ordered.sort_unstable();
            let out = ordered
                .chunks(per)
                .map(|ch| LayoutPackage {
                    machine_packages: groups
                        .iter()
                        .filter(|g| g.cpu_nodes.iter().any(|n| ch.contains(n)))
                        .flat_map(|g| g.machine_packages.clone())
                        .collect(),
                    cpu_nodes: ch.to_vec(),
                })
                .collect();
            (out, per)
        };
        let mut node_ids: Vec<u32> = packages_out
            .iter()
            .flat_map(|p| p.cpu_nodes.clone())
            .collect();
        let package_of_cpu_node = |id: u32| -> Option<usize> {
            packages_out.iter().position(|p| p.cpu_nodes.contains(&id))
        };
        let mut memory_nodes = Vec::new();
        for n in m.nodes.iter().filter(|n| !node_ids.contains(&n.id)) {
            let (cpu_node, attach) = attachment(m, n.id, &cpu_nodes, &home);
            let package = cpu_node.and_then(package_of_cpu_node).unwrap_or(0);
            memory_nodes.push(LayoutMemoryNode {
                id: n.id,
                package,
                kind: fabric_kind(n.kind.as_deref(), n.device.is_some()),
                attach,
            });
        }
        node_ids.extend(memory_nodes.iter().map(|x| x.id));
        Ok(Layout {
            packages: packages_out,
            nodes_per_package: npp,
            node_ids,
            memory_nodes,
            packages_assumed,
            grouping: (!grouping.is_empty()).then(|| grouping.join("; ")),
        })
    }

    pub fn cpu_nodes(&self) -> usize {
        self.packages.len() * self.nodes_per_package
    }

    /// The fabric index of a machine node.
    pub fn index_of(&self, node: u32) -> Option<usize> {
        self.node_ids.iter().position(|&n| n == node)
    }

    /// The fabric package serving a machine node's memory.
    pub fn package_of(&self, node: u32) -> Option<usize> {
        let i = self.index_of(node)?;
        if i < self.cpu_nodes() {
            Some(i / self.nodes_per_package)
        } else {
            self.memory_nodes
                .get(i - self.cpu_nodes())
                .map(|x| x.package)
        }
    }
}

/// The CPU node a memory-only node sits with, and how that is known.
fn attachment(
    m: &Machine,
    id: u32,
    cpu_nodes: &[u32],
    home: &BTreeMap<u32, CpuSet>,
) -> (Option<u32>, Attach) {
    let Some(node) = m.node(id) else {
        return (None, Attach::Assumed("unknown node".into()));
    };
    if let Some(bdf) = node.device {
        if let Some(d) = m.pci.iter().find(|d| d.bdf == bdf) {
            if let Some((n, inferred)) = device_placement(m, d) {
                if let Some(c) = Some(n).filter(|c| cpu_nodes.contains(c)) {
                    return (
                        Some(c),
                        Attach::Reported(format!(
                            "memory of GPU {bdf}, which the machine places on node {n}{}",
                            if inferred {
                                " (from its local CPUs)"
                            } else {
                                ""
                            }
                        )),
                    );
                }
            }
        }
    }
    if !node.cpus.is_empty() {
        let best = cpu_nodes
            .iter()
            .map(|c| (home[c].intersection(&node.cpus).len(), *c))
            .filter(|(k, _)| *k > 0)
            .max_by_key(|&(k, c)| (k, std::cmp::Reverse(c)));
        if let Some((_, c)) = best {
            return (
                Some(c),
                Attach::Reported(format!(
                    "the machine places it with CPUs {} (node {c}'s)",
                    node.cpus.to_list_string()
                )),
            );
        }
    }
    if let Some(init) = &node.initiators {
        if let Some(c) = init.iter().find(|c| cpu_nodes.contains(c)) {
            return (
                Some(c),
                Attach::Reported(format!(
                    "the firmware (HMAT) names node {c} its nearest initiator"
                )),
            );
        }
    }
    if let Some(d) = m.numa_distances() {
        let near: Vec<(f64, u32)> = cpu_nodes
            .iter()
            .filter_map(|&c| {
                d.get(id as u64, c as u64)
                    .or_else(|| d.get(c as u64, id as u64))
                    .map(|v| (v, c))
            })
            .collect();
        if let Some(&(best, c)) = near.iter().min_by(|a, b| a.0.total_cmp(&b.0)) {
            let ties: Vec<u32> = near
                .iter()
                .filter(|(v, _)| *v == best)
                .map(|x| x.1)
                .collect();
            let tie = if ties.len() > 1 {
                format!(" (nodes {} are as near; the first is taken)", list(&ties))
            } else {
                String::new()
            };
            return (
                Some(c),
                Attach::Assumed(format!(
                    "served by the package of its nearest CPU node by the distance matrix, node {c} at {best}{tie}"
                )),
            );
        }
    }
    (
        cpu_nodes.first().copied(),
        Attach::Assumed("the machine does not say where it is; the first package".into()),
    )
}

/// The fabric's word for what a node's memory is.
pub fn fabric_kind(kind: Option<&str>, of_device: bool) -> &'static str {
    let k = kind.unwrap_or("").to_ascii_lowercase();
    if of_device || k.contains("gpu") {
        "gpu"
    } else if k.starts_with("cxl") {
        "cxl"
    } else if k.contains("hbm") || k.contains("mcdram") {
        "hbm"
    } else if k.contains("nvm") || k.contains("nvdimm") || k.contains("pmem") {
        "nvm"
    } else if k == "dram" {
        "dram"
    } else {
        "other"
    }
}

fn list(v: &[u32]) -> String {
    CpuSet::from_iter(v.iter().copied()).to_list_string()
}

fn distinct(it: impl Iterator<Item = usize>) -> String {
    let mut v: Vec<usize> = it.collect();
    v.sort_unstable();
    v.dedup();
    v.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(" or ")
}

fn source_path(m: &Machine) -> std::path::PathBuf {
    match &m.source {
        Source::Sysfs { root } => root.clone(),
        Source::Hwloc { path, .. } => path.clone(),
    }
}
