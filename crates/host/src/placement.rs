//! Per-core placement: which NUMA node each logical CPU of a host runs on, numbered as
//! Linux numbers them on these platforms (first thread of every core of every package,
//! then the sibling threads), with a package's cores split evenly over its nodes.

use fabric::{HostId, Topology};

use crate::error::HostError;

/// A logical CPU (a hardware thread) of one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub id: u32,
    pub package: u32,
    pub core: u32,
    pub thread: u32,
    pub node: u32,
}

/// The logical CPUs of a host and their NUMA nodes.
#[derive(Clone, Debug)]
pub struct Placement {
    host: String,
    cpus: Vec<Cpu>,
    nodes: u32,
}

impl Placement {
    pub fn of_host(topo: &Topology, host: HostId) -> Result<Placement, HostError> {
        let h = topo
            .hosts
            .get(host.index())
            .ok_or_else(|| HostError::Invalid(format!("no host {host}")))?;
        let p = &topo.platforms[h.platform as usize];
        let per_node = p
            .cores_per_package
            .div_ceil(p.nodes_per_package.max(1))
            .max(1);
        let mut cpus = Vec::new();
        for thread in 0..p.threads_per_core {
            for package in 0..p.packages {
                for core in 0..p.cores_per_package {
                    cpus.push(Cpu {
                        id: cpus.len() as u32,
                        package,
                        core,
                        thread,
                        node: package * p.nodes_per_package
                            + (core / per_node).min(p.nodes_per_package - 1),
                    });
                }
            }
        }
        Ok(Placement {
            host: h.name.clone(),
            cpus,
            nodes: p.numa_nodes(),
        })
    }

    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }

    pub fn cpu(&self, id: u32) -> Result<&Cpu, HostError> {
        self.cpus.get(id as usize).ok_or_else(|| {
            HostError::Invalid(format!(
                "host `{}` has CPUs 0..{}, not {id}",
                self.host,
                self.cpus.len().saturating_sub(1)
            ))
        })
    }

    /// The NUMA node a thread on `cpu` runs on.
    pub fn node_of(&self, cpu: u32) -> Result<u32, HostError> {
        Ok(self.cpu(cpu)?.node)
    }

    /// The logical CPUs of a NUMA node, in order.
    pub fn cpus_of(&self, node: u32) -> Result<Vec<u32>, HostError> {
        if node >= self.nodes {
            return Err(HostError::Invalid(format!(
                "host `{}` has NUMA nodes 0..{}, not {node}",
                self.host,
                self.nodes - 1
            )));
        }
        Ok(self
            .cpus
            .iter()
            .filter(|c| c.node == node)
            .map(|c| c.id)
            .collect())
    }
}
