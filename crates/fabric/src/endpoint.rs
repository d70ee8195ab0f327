//! Names a user types for things in a fabric — `host.device`, `host.device.pfN`,
//! `host.device[.pfN].barN`, `host.ram`, `host.ram.nodeN`, `host.cpu`, `host.cpuN`, a
//! switch or NTB by name — and the address each names. Setting up an access the way a
//! driver would (NTB windows, requester-ID entries, IOMMU mappings) is the host layer's.

use crate::error::{name_list_at_most, FabricError};
use crate::fabric::Fabric;
use crate::topology::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A PCI function (or a switch, as a place: not a requester).
    Node(PcieNodeId),
    Bar {
        node: PcieNodeId,
        bar: u8,
    },
    Ram {
        host: HostId,
        node: u32,
    },
    Cpu {
        host: HostId,
        package: u32,
    },
}

impl Fabric {
    /// Resolves a user's endpoint name.
    pub fn resolve(&self, name: &str) -> Result<Endpoint, FabricError> {
        let bad = |why: String| FabricError::UnknownEndpoint {
            name: name.to_string(),
            why,
        };
        let topo = &self.topo;
        let (hname, rest) = name.split_once('.').ok_or_else(|| {
            bad("expected `host.device`, `host.ram[.nodeN]` or `host.cpu[N]`".into())
        })?;
        let host = topo.host_by_name(hname).ok_or_else(|| {
            let names: Vec<&str> = topo.hosts.iter().map(|h| h.name.as_str()).collect();
            bad(format!(
                "no host `{hname}` (hosts: {})",
                name_list_at_most(&names, 12)
            ))
        })?;
        let platform = topo.platform_of(host);
        if rest == "ram" {
            return Ok(Endpoint::Ram { host, node: 0 });
        }
        if let Some(n) = rest.strip_prefix("ram.node") {
            let node: u32 = n.parse().map_err(|_| bad("expected `ram.nodeN`".into()))?;
            if node >= platform.numa_nodes() {
                return Err(bad(format!(
                    "host `{hname}` has NUMA nodes 0..{}",
                    platform.numa_nodes() - 1
                )));
            }
            return Ok(Endpoint::Ram { host, node });
        }
        if let Some(p) = rest.strip_prefix("cpu") {
            let package: u32 = if p.is_empty() {
                0
            } else {
                p.parse().map_err(|_| bad("expected `cpuN`".into()))?
            };
            if package >= platform.packages {
                return Err(bad(format!(
                    "host `{hname}` has packages 0..{}",
                    platform.packages - 1
                )));
            }
            return Ok(Endpoint::Cpu { host, package });
        }
        // Optional `.barN` suffix.
        let (base, bar) = match rest.rsplit_once(".bar") {
            Some((b, n)) if n.parse::<u8>().is_ok() => (b, Some(n.parse::<u8>().expect("checked"))),
            _ => (rest, None),
        };
        let node = match topo.node_by_name(host, base) {
            Some(n) => n,
            None => {
                let (dev, pf) = match base.rsplit_once(".pf") {
                    Some((d, p)) => (
                        d,
                        p.parse::<usize>()
                            .map_err(|_| bad("expected `device.pfN`".into()))?,
                    ),
                    None => (base, 0),
                };
                let d = topo.device_by_name(host, dev).ok_or_else(|| {
                    let mut names: Vec<&str> = topo
                        .host(host)
                        .devices
                        .iter()
                        .map(|&d| topo.devices[d.index()].name.as_str())
                        .collect();
                    names.extend(
                        topo.host(host)
                            .nodes
                            .iter()
                            .map(|&n| topo.node(n).name.as_str())
                            .filter(|n| !n.contains('/') && !n.contains('.')),
                    );
                    bad(format!(
                        "host `{hname}` has no device or switch `{dev}` (it has: {})",
                        name_list_at_most(&names, 12)
                    ))
                })?;
                let fs = &topo.devices[d.index()].functions;
                *fs.get(pf).ok_or_else(|| {
                    bad(format!(
                        "device `{dev}` has functions pf0..pf{}",
                        fs.len() - 1
                    ))
                })?
            }
        };
        let node = match topo.node(node).kind {
            // The NTB by its adapter's name means its NTB function.
            NodeKind::Switch {
                adapter: Some(n), ..
            } => topo.ntbs[n.index()].fn_node,
            _ => node,
        };
        match bar {
            None => Ok(Endpoint::Node(node)),
            Some(b) if topo.node(node).bar(b).is_some() => Ok(Endpoint::Bar { node, bar: b }),
            Some(b) => Err(bad(format!("`{base}` has no BAR{b}"))),
        }
    }

    /// The host and address (in that host's map) of an endpoint plus `offset`: RAM base,
    /// or a BAR (a device's largest BAR when none is named).
    pub fn resolve_address(&self, name: &str, offset: u64) -> Result<(HostId, u64), FabricError> {
        let e = self.resolve(name)?;
        self.endpoint_address(name, e, offset)
    }

    fn endpoint_address(
        &self,
        name: &str,
        e: Endpoint,
        offset: u64,
    ) -> Result<(HostId, u64), FabricError> {
        let topo = &self.topo;
        let bad = |why: String| FabricError::UnknownEndpoint {
            name: name.to_string(),
            why,
        };
        match e {
            Endpoint::Ram { host, node } => {
                let addr = topo
                    .host(host)
                    .ram_addr(node, offset)
                    .ok_or_else(|| bad(format!("offset {offset:#x} is beyond the node's RAM")))?;
                Ok((host, addr))
            }
            Endpoint::Node(n) => {
                let node = topo.node(n);
                let b = node
                    .bars
                    .iter()
                    .max_by_key(|b| (b.size, std::cmp::Reverse(b.index)))
                    .ok_or_else(|| bad("it has no BAR to address".into()))?;
                if offset >= b.size {
                    return Err(bad(format!(
                        "offset {offset:#x} is beyond BAR{} ({} bytes)",
                        b.index, b.size
                    )));
                }
                Ok((node.host, b.addr + offset))
            }
            Endpoint::Bar { node, bar } => {
                let b = topo.node(node).bar(bar).expect("resolved BAR exists");
                if offset >= b.size {
                    return Err(bad(format!(
                        "offset {offset:#x} is beyond BAR{bar} ({} bytes)",
                        b.size
                    )));
                }
                Ok((topo.node(node).host, b.addr + offset))
            }
            Endpoint::Cpu { .. } => Err(bad("a CPU is a requester, not a target".into())),
        }
    }
}
