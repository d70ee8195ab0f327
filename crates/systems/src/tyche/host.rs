//! One Tyche server as the protocol sees it: its memory system, its NICs (in the order
//! the channels pair them) and its cores, with the platform's per-packet costs.

use fabric::{HostId, NetStackCosts, Topology};
use host::net::{memory_system, Core};
use sim::memsys::MemSys;

use devices::nic::{Nic, SendRequests};

use super::mem;

/// A host running Tyche over `nics`.
#[derive(Clone, Debug)]
pub struct TycheHost {
    pub name: String,
    pub mem: MemSys,
    pub nics: Vec<Nic>,
    /// The node each NIC is attached to (its I/O hub's or root's package).
    pub nic_node: Vec<u32>,
    /// Physical cores, node by node (`cores_per_node` each).
    pub cores: Vec<Core>,
    pub cores_per_node: u32,
    pub nodes: u32,
    pub costs: NetStackCosts,
}

impl TycheHost {
    /// Host `host` of `topo` with its devices `nics`, in channel order.
    pub fn new(topo: &Topology, host: HostId, nics: &[&str]) -> Result<TycheHost, String> {
        let platform = topo.platform_of(host);
        let hname = topo.host(host).name.clone();
        let costs = platform.netstack.clone().ok_or_else(|| {
            format!(
                "platform `{}` of host `{hname}` has no [platform.{}.netstack] table (per-packet CPU costs)",
                platform.name, platform.name
            )
        })?;
        if nics.is_empty() {
            return Err(format!("host `{hname}`: Tyche needs at least one NIC"));
        }
        let mut list = Vec::new();
        let mut nodes = Vec::new();
        for &n in nics {
            let dev = topo
                .device_by_name(host, n)
                .ok_or_else(|| format!("host `{hname}` has no device `{n}`"))?;
            let mut nic =
                Nic::from_topology(topo, dev).map_err(|e| format!("host `{hname}`: {e}"))?;
            // Tyche drives Myricom NICs through myri10ge, which writes each send request
            // into the NIC by PIO (`mem::pio_arrival` prices the crossing).
            nic.send_requests = SendRequests::Pio;
            nodes.push(mem::nic_node(topo, host, &nic)?);
            list.push(nic);
        }
        let cpn = platform.cores_per_package.max(1);
        let cores = (0..platform.packages * cpn)
            .map(|i| Core::new(i / cpn, platform.clock_ghz))
            .collect();
        Ok(TycheHost {
            name: hname,
            mem: memory_system(topo, host)?,
            nics: list,
            nic_node: nodes,
            cores,
            cores_per_node: cpn,
            nodes: platform.packages,
            costs,
        })
    }

    /// The core of `node` whose queue frees first (lowest index on ties).
    pub fn idlest_core(&self, node: Option<u32>) -> usize {
        let range = match node {
            Some(n) => {
                let a = (n * self.cores_per_node) as usize;
                a..a + self.cores_per_node as usize
            }
            None => 0..self.cores.len(),
        };
        range
            .min_by_key(|&i| (self.cores[i].busy_until(), i))
            .expect("a host has cores")
    }

    /// The core a NIC's MSI-X interrupt is delivered to: core `rank` of the NIC's node
    /// (assumption: irqbalance places a device's IRQ on its own node and spreads a node's
    /// NICs over its cores; with every NIC behind node 0, 2.6.32's default of CPU 0 is on
    /// that node too).
    pub fn irq_core(&self, nic: usize, rank: u32) -> usize {
        self.core_of(self.nic_node[nic], rank)
    }

    /// Core `k` of `node`, wrapping.
    pub fn core_of(&self, node: u32, k: u32) -> usize {
        (node * self.cores_per_node + k % self.cores_per_node) as usize
    }
}
