//! Where a device is attached, as far as the machine says or the audit can infer (from
//! `local_cpulist` or sibling functions), and which functions make one multi-PF NIC.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::model::{Machine, PciDevice};
use crate::pci::DeviceClass;

/// Why the audit believes a device is on a node the machine did not state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InferredFrom {
    /// `local_cpulist` lies within exactly one node.
    LocalCpulist,
    /// Other functions under the same host bridge all report this node.
    HostBridge,
}

/// Where a device is, as far as the audit can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Placement {
    Reported(u32),
    Inferred(u32, InferredFrom),
    Unknown,
}

impl Placement {
    pub(super) fn node(&self) -> Option<u32> {
        match self {
            Placement::Reported(n) | Placement::Inferred(n, _) => Some(*n),
            Placement::Unknown => None,
        }
    }
}

/// The node a device is attached to, as far as can be told: `(node, inferred)`.
/// `inferred` means the machine did not state it and the audit concluded it from
/// `local_cpulist` or from sibling functions under the same host bridge.
pub fn device_placement(m: &Machine, d: &PciDevice) -> Option<(u32, bool)> {
    match placement(m, d) {
        Placement::Reported(n) => Some((n, false)),
        Placement::Inferred(n, _) => Some((n, true)),
        Placement::Unknown => None,
    }
}

pub(super) fn placement(m: &Machine, d: &PciDevice) -> Placement {
    if let Some(n) = d.numa_node {
        return Placement::Reported(n);
    }
    if m.nodes.len() < 2 {
        return Placement::Unknown;
    }
    if let Some(n) = d.local_cpus.as_ref().and_then(|c| m.node_containing(c)) {
        return Placement::Inferred(n, InferredFrom::LocalCpulist);
    }
    // Everything behind one host bridge hangs off one root complex, hence one socket.
    let siblings: BTreeSet<u32> = m
        .pci
        .iter()
        .filter(|o| o.host_bridge == d.host_bridge && o.bdf != d.bdf)
        .filter_map(|o| o.numa_node)
        .collect();
    if siblings.len() == 1 {
        if let Some(n) = siblings.first() {
            return Placement::Inferred(*n, InferredFrom::HostBridge);
        }
    }
    Placement::Unknown
}

/// Groups of PCI functions (indexes into `m.pci`) that belong to one physical NIC
/// but sit on different NUMA nodes or host bridges: a multi-PF NIC. Functions are
/// grouped by PCIe serial number, or else by vendor, device and bus:device
/// appearing under different host bridges or PCI domains. Ordinary multi-port
/// cards (all functions behind one port) are not groups.
pub fn multi_pf_groups(m: &Machine) -> Vec<Vec<usize>> {
    let nics: Vec<usize> = m
        .pci
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            matches!(d.class(), DeviceClass::Net | DeviceClass::Infiniband) && d.physfn.is_none()
        })
        .map(|(i, _)| i)
        .collect();
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    let mut grouped: BTreeSet<usize> = BTreeSet::new();
    let mut by_serial: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in &nics {
        if let Some(s) = m.pci[i].serial.as_deref() {
            by_serial.entry(s).or_default().push(i);
        }
    }
    for (_, g) in by_serial {
        if g.len() > 1 {
            grouped.extend(g.iter().copied());
            candidates.push(g);
        }
    }
    let mut by_slot: BTreeMap<(u16, u16, u8, u8), Vec<usize>> = BTreeMap::new();
    for &i in &nics {
        let d = &m.pci[i];
        if grouped.contains(&i) {
            continue;
        }
        if let (Some(v), Some(dev)) = (d.vendor_id, d.device_id) {
            by_slot
                .entry((v, dev, d.bdf.bus, d.bdf.device))
                .or_default()
                .push(i);
        }
    }
    candidates.extend(by_slot.into_values().filter(|g| {
        let places: BTreeSet<(&str, u32)> = g
            .iter()
            .map(|&i| (m.pci[i].host_bridge.as_str(), m.pci[i].bdf.domain))
            .collect();
        g.len() > 1 && places.len() > 1
    }));
    candidates
        .into_iter()
        .filter(|g| {
            let nodes: BTreeSet<Option<u32>> =
                g.iter().map(|&i| placement(m, &m.pci[i]).node()).collect();
            let hosts: BTreeSet<&str> = g.iter().map(|&i| m.pci[i].host_bridge.as_str()).collect();
            nodes.len() > 1 || hosts.len() > 1
        })
        .collect()
}
