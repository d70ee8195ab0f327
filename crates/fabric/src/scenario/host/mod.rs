//! Hosts: one `[[host]]` (or a cluster's host template) built into the topology. First
//! the host's own settings — its 32- and 64-bit MMIO windows, its RAM laid out node by
//! node around the 32-bit MMIO hole, its max payload size — then its root complexes
//! (one per package, or one per I/O hub), its parts (`adapters`: switches and NTB
//! adapters; `devices`: devices, their functions and BARs), each part's parent, and the
//! ports and lanes of every switch. Enumeration and BAR placement follow (`enumerate`).
//!
//! Parts may name parents written after them, so parents are resolved once every part
//! of the host exists (`HostBuild::pending`).

use std::collections::HashMap;
use std::ops::Range;

use toml::Spanned;

use super::enumerate::{number_buses, place_host};
use super::{valid_name, Builder, MIB};
use crate::error::{name_list, ScenarioError};
use crate::raw::*;
use crate::topology::*;

mod adapters;
mod devices;

const MMIO32_DEFAULT: (u64, u64) = (0xC000_0000, 0xFEC0_0000);
const FOUR_GIB: u64 = 1 << 32;

/// A part whose parent is named but not yet found.
struct Pending {
    node: PcieNodeId,
    /// The parent as written.
    parent: Spanned<String>,
    /// The key path of `parent`.
    key: String,
}

/// One host being built: where its keys are written, the names in it so far, the parts
/// whose parents are still to be found, and the `Host` itself.
struct HostBuild<'a> {
    b: &'a Builder,
    file: usize,
    /// The key path errors name the host's keys under (`host[3]`, `cluster.host`).
    hkey: String,
    name: &'a str,
    id: HostId,
    /// Whether the host's platform has timing (devices then need their timing keys).
    timed: bool,
    /// Component names in this host: where each was written and its node (a device's
    /// first function).
    names: HashMap<String, (Range<usize>, PcieNodeId)>,
    pending: Vec<Pending>,
    /// BARs written at a fixed address: node, BAR index, where the address is written.
    fixed: Vec<(PcieNodeId, u8, Range<usize>)>,
    host: Host,
}

impl Builder {
    /// Builds host `name` from `hr` (a `[[host]]`, or a cluster's template, whose keys
    /// errors name under `hkey`).
    pub(super) fn host(
        &self,
        file: usize,
        hkey: &str,
        name: &str,
        hr: &RawHost,
        pid: u32,
        topo: &mut Topology,
    ) -> Result<(), ScenarioError> {
        let hkey = hkey.to_string();
        let platform = &topo.platforms[pid as usize];
        let timed = platform.timing.is_some();
        let host = self.host_settings(file, &hkey, name, hr, pid, platform)?;
        let mut hb = HostBuild {
            b: self,
            file,
            hkey,
            name,
            id: HostId::from_index(topo.hosts.len()),
            timed,
            names: HashMap::new(),
            pending: Vec::new(),
            fixed: Vec::new(),
            host,
        };
        hb.root_complexes(topo);
        for (si, s) in hr.switch.iter().enumerate() {
            hb.switch(topo, si, s)?;
        }
        for (di, d) in hr.device.iter().enumerate() {
            hb.device(topo, di, d)?;
        }
        for (ni, n) in hr.ntb.iter().enumerate() {
            hb.ntb(topo, ni, n)?;
        }
        hb.attach_parents(topo)?;
        hb.check_cycles(topo)?;
        hb.check_switch_sizes(topo)?;
        hb.enumerate(topo)
    }

    /// The host's own settings, checked: its MMIO windows, RAM map and max payload size
    /// (and that its platform's completion sizes fit them). It has no nodes yet.
    fn host_settings(
        &self,
        file: usize,
        hkey: &str,
        name: &str,
        hr: &RawHost,
        pid: u32,
        platform: &Platform,
    ) -> Result<Host, ScenarioError> {
        let mmio32 = match &hr.mmio32 {
            Some(m) => {
                let [a, b] = *m.get_ref();
                if a.0 >= b.0 || b.0 > FOUR_GIB || a.0 % MIB != 0 || b.0 % MIB != 0 {
                    return Err(self.err(
                        file,
                        m.span(),
                        Some(format!("{hkey}.mmio32")),
                        "mmio32 must be [base, limit) below 4 GiB, 1 MiB aligned, base < limit",
                    ));
                }
                (a.0, b.0)
            }
            None => MMIO32_DEFAULT,
        };
        let (regions, top_of_ram) = ram_regions(platform, mmio32);
        let mmio64_base = match &hr.mmio64_base {
            Some(b) => {
                let v = b.get_ref().0;
                if v < top_of_ram || v % MIB != 0 {
                    return Err(self.err(file, b.span(), Some(format!("{hkey}.mmio64_base")), &format!("mmio64_base must be 1 MiB aligned and at or above the top of RAM ({:#x})", top_of_ram)));
                }
                v
            }
            // assumption: firmware starts the 64-bit window at the next 64 GiB boundary.
            None => top_of_ram.next_multiple_of(64 << 30),
        };

        let mps = match &hr.mps_bytes {
            Some(m) if ![128, 256, 512, 1024, 2048, 4096].contains(m.get_ref()) => {
                return Err(self.err(
                    file,
                    m.span(),
                    Some(format!("{hkey}.mps_bytes")),
                    "mps_bytes must be 128, 256, 512, 1024, 2048 or 4096",
                ));
            }
            Some(m) => *m.get_ref(),
            // assumption: 256 B, what server firmware commonly programs (docs/hardware.md §2's PXH830 testbeds)
            None => 256,
        };
        if let Some(t) = platform
            .timing
            .as_ref()
            .filter(|t| t.read_completion_bytes < t.rcb_bytes)
        {
            return Err(self.err(
                file,
                hr.platform.span(),
                Some(format!("platform.{}.timing.read_completion_bytes", platform.name)),
                &format!(
                    "read_completion_bytes ({}) is below the read completion boundary rcb_bytes ({}): \
                     completions are whole multiples of it",
                    t.read_completion_bytes, t.rcb_bytes
                ),
            ));
        }
        if let Some(t) = platform.timing.as_ref().filter(|t| t.rcb_bytes > mps) {
            return Err(self.err(
                file,
                hr.platform.span(),
                Some(format!("platform.{}.timing.rcb_bytes", platform.name)),
                &format!(
                    "rcb_bytes ({}) is above this host's max payload size ({mps} B)",
                    t.rcb_bytes
                ),
            ));
        }
        Ok(Host {
            name: name.to_string(),
            platform: pid,
            iommu: hr.iommu,
            iommu_superpages: hr.iommu_superpages,
            roots: vec![],
            mmio32,
            mmio64_base,
            mps,
            top_of_ram,
            regions,
            nodes: vec![],
            devices: vec![],
            ntbs: vec![],
        })
    }
}

/// RAM: node by node from 0, skipping the 32-bit MMIO hole [mmio32.0, 4 GiB). Returns
/// the regions and the top of RAM (at least 4 GiB).
fn ram_regions(platform: &Platform, mmio32: (u64, u64)) -> (Vec<Region>, u64) {
    let mut regions = Vec::new();
    let mut cursor = 0u64;
    for n in 0..platform.numa_nodes() {
        let mut left = platform.node_bytes(n);
        let mut node_offset = 0;
        while left > 0 {
            if cursor >= mmio32.0 && cursor < FOUR_GIB {
                cursor = FOUR_GIB;
            }
            let room = if cursor < mmio32.0 {
                mmio32.0 - cursor
            } else {
                u64::MAX
            };
            let len = left.min(room);
            regions.push(Region {
                start: cursor,
                end: cursor + len,
                owner: Owner::Ram {
                    node: n,
                    node_offset,
                },
            });
            cursor += len;
            node_offset += len;
            left -= len;
        }
    }
    (regions, cursor.max(FOUR_GIB))
}

impl HostBuild<'_> {
    /// An error at `span` of the host's file, named by `key`.
    fn err(&self, span: Range<usize>, key: String, msg: &str) -> ScenarioError {
        self.b.err(self.file, span, Some(key), msg)
    }

    /// The root complexes, the host's first nodes and names: one per package (`rcN`),
    /// or one per I/O hub (named as the hub) when the platform has hubs.
    fn root_complexes(&mut self, topo: &mut Topology) {
        let platform = &topo.platforms[self.host.platform as usize];
        let nv = platform.uncore_vertices();
        let rc_vertices: Vec<(u32, String)> = if platform.iohs.is_empty() {
            (0..platform.packages)
                .map(|v| (v, format!("rc{v}")))
                .collect()
        } else {
            (platform.packages..nv)
                .map(|v| (v, platform.vertex_name(v)))
                .collect()
        };
        for (v, name) in rc_vertices {
            let id = PcieNodeId::from_index(topo.nodes.len());
            topo.nodes.push(Node {
                host: self.id,
                name: name.clone(),
                kind: NodeKind::RootComplex { vertex: v },
                parent: None,
                link: None,
                depth: 0,
                root: id,
                rid: Rid::default(),
                port_rid: None,
                children: vec![],
                bars: vec![],
                window32: None,
                window64: None,
                dma_mask_bits: 64,
            });
            self.names.insert(name, (0..0, id));
            self.host.roots.push(id);
        }
        self.host.nodes = self.host.roots.clone();
    }

    /// Takes component name `n` (written at key `key`) for node `id` in this host.
    fn claim(
        &mut self,
        n: &Spanned<String>,
        key: &str,
        id: PcieNodeId,
    ) -> Result<(), ScenarioError> {
        let reserved = |n: &str| {
            n == "ram" || n == "cpu" || (n.starts_with("cpu") && n[3..].parse::<u32>().is_ok())
        };
        let s = n.get_ref();
        if !valid_name(s) || reserved(s) {
            return Err(self.err(n.span(), key.into(), &format!("`{s}` is not a usable component name (letters, digits, `_`, `-`; `ram` and `cpuN` are reserved)")));
        }
        if self.names.contains_key(s) {
            return Err(self.err(
                n.span(),
                key.into(),
                &format!("duplicate name `{s}` in host `{}`", self.name),
            ));
        }
        self.names.insert(s.clone(), (n.span(), id));
        Ok(())
    }

    /// A new node of this host, not yet in its tree.
    fn new_node(
        &self,
        topo: &mut Topology,
        name: String,
        kind: NodeKind,
        link: Option<Link>,
        mask: u8,
        bars: Vec<Bar>,
    ) -> PcieNodeId {
        let id = PcieNodeId::from_index(topo.nodes.len());
        topo.nodes.push(Node {
            host: self.id,
            name,
            kind,
            parent: None,
            link,
            depth: 0,
            root: PcieNodeId(0),
            rid: Rid::default(),
            port_rid: None,
            children: vec![],
            bars,
            window32: None,
            window64: None,
            dma_mask_bits: mask,
        });
        id
    }

    /// Parents: a root complex or a switch of this host.
    fn attach_parents(&self, topo: &mut Topology) -> Result<(), ScenarioError> {
        for Pending {
            node: id,
            parent,
            key,
        } in &self.pending
        {
            let p = parent.get_ref();
            let (_, pid) = self.names.get(p).cloned().ok_or_else(|| {
                let parents = self.names.iter().filter_map(|(n, (_, id))| {
                    matches!(
                        topo.nodes[id.index()].kind,
                        NodeKind::RootComplex { .. } | NodeKind::Switch { adapter: None, .. }
                    )
                    .then_some(n.as_str())
                });
                self.err(
                    parent.span(),
                    key.clone(),
                    &format!(
                        "`{p}` is not a root complex or switch of host `{}` (root complexes and switches: {})",
                        self.name,
                        name_list(parents)
                    ),
                )
            })?;
            let pn = &topo.nodes[pid.index()];
            let ok = matches!(
                pn.kind,
                NodeKind::RootComplex { .. } | NodeKind::Switch { adapter: None, .. }
            );
            if !ok {
                return Err(self.err(parent.span(), key.clone(), &format!("`{p}` cannot be a parent: only root complexes and switches have downstream ports")));
            }
            topo.nodes[id.index()].parent = Some(pid);
            topo.nodes[pid.index()].children.push(*id);
        }
        Ok(())
    }

    /// Cycles among switches: walk up from every node.
    fn check_cycles(&self, topo: &Topology) -> Result<(), ScenarioError> {
        for Pending {
            node: id,
            parent,
            key,
        } in &self.pending
        {
            let mut seen = 0;
            let mut cur = *id;
            while let Some(p) = topo.nodes[cur.index()].parent {
                cur = p;
                seen += 1;
                if seen > topo.nodes.len() {
                    return Err(self.err(
                        parent.span(),
                        key.clone(),
                        &format!(
                            "cycle: `{}` is (indirectly) its own parent",
                            topo.nodes[id.index()].name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Ports and lanes of every switch; then the host's nodes are all known.
    fn check_switch_sizes(&mut self, topo: &Topology) -> Result<(), ScenarioError> {
        let all: Vec<PcieNodeId> = (self.host.roots[0].index()..topo.nodes.len())
            .map(PcieNodeId::from_index)
            .collect();
        for &id in &all {
            if let NodeKind::Switch { chip, adapter } = topo.nodes[id.index()].kind {
                let c = &self.b.chips[chip as usize];
                let n = &topo.nodes[id.index()];
                let down: Vec<PcieNodeId> = n
                    .children
                    .iter()
                    .copied()
                    .filter(|&ch| topo.nodes[ch.index()].link.is_some())
                    .collect();
                let used_ports = down.len() as u32 + 1 + if adapter.is_some() { 1 } else { 0 };
                let lanes: u32 = down
                    .iter()
                    .map(|&ch| topo.nodes[ch.index()].link.unwrap().width as u32)
                    .sum::<u32>()
                    + n.link.map(|l| l.width as u32).unwrap_or(0);
                if used_ports > c.ports || lanes > c.lanes {
                    // Named and located as the switch (or NTB adapter) itself: its key
                    // path and its `name`.
                    let key = self
                        .pending
                        .iter()
                        .find(|p| p.node == id)
                        .map(|p| p.key.strip_suffix(".parent").unwrap_or(&p.key).to_string())
                        .unwrap_or_else(|| self.hkey.to_string());
                    let span = self
                        .names
                        .get(&n.name)
                        .filter(|(_, nid)| *nid == id)
                        .map(|(span, _)| span.clone())
                        .unwrap_or(0..0);
                    let mut widths: Vec<String> = Vec::new();
                    if let Some(l) = n.link {
                        widths.push(format!("upstream x{}", l.width));
                    }
                    for &ch in &down {
                        let child = &topo.nodes[ch.index()];
                        if let Some(l) = child.link {
                            widths.push(format!("`{}` x{}", child.name, l.width));
                        }
                    }
                    return Err(self.err(
                        span,
                        key,
                        &format!(
                            "switch `{}` ({}) uses {used_ports} ports and {lanes} lanes ({}); the chip has {} ports and {} lanes",
                            n.name,
                            c.name,
                            widths.join(", "),
                            c.ports,
                            c.lanes
                        ),
                    ));
                }
            }
        }
        self.host.nodes = all;
        Ok(())
    }

    /// Bus numbers and requester IDs, then BARs and bridge windows; the host is done.
    fn enumerate(self, topo: &mut Topology) -> Result<(), ScenarioError> {
        let HostBuild {
            b,
            file,
            hkey,
            fixed,
            mut host,
            ..
        } = self;
        // Depth, root, bus numbers and requester IDs, in tree order.
        number_buses(topo, &host.roots).map_err(|m| b.err(file, 0..0, Some(hkey.clone()), &m))?;
        // BARs and bridge windows.
        place_host(topo, &mut host, &fixed)
            .map_err(|(m, span)| b.err(file, span.unwrap_or(0..0), Some(hkey.clone()), &m))?;
        topo.hosts.push(host);
        Ok(())
    }
}
