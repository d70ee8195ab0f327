//! `Fabric`: a topology plus its mutable hardware state (NTB LUTs, IOMMU page tables,
//! byte stores, cable state, fault log), the router, and the functional data path
//! (`dma_read`/`dma_write`/`cpu_load`/`cpu_store`) that moves real bytes through it.

use rustc_hash::FxHashMap;

use crate::error::{FabricError, ScenarioError};
use crate::iommu::{DomainId, Iommu, IommuMiss, Perm, PAGE};
use crate::memory::Memory;
use crate::multicast::{GroupId, McGroup, McMember, McRoutes};
use crate::ntb::{proxy_rid, LutEntry, NtbState, WindowMapping};
use crate::path::*;
use crate::scenario::Scenario;
use crate::topology::*;

/// Bound on NTB crossings of one access; a mapping chain longer than this is a loop.
const MAX_CROSSINGS: usize = 8;

/// Where a function's configuration space lives in the byte stores (no real BAR has it).
const CONFIG_SPACE: u8 = u8::MAX;

/// An interrupt message as delivered: the host, the APIC its address names, its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msi {
    pub host: HostId,
    pub apic: u32,
    pub data: u32,
}

pub struct Fabric {
    pub topo: Topology,
    ntb: Vec<NtbState>,
    iommu: Vec<Iommu>,
    cable_up: Vec<bool>,
    /// Hosts that have not crashed (a crashed host answers nothing and issues nothing).
    host_up: Vec<bool>,
    mem: Memory,
    faults: Vec<Fault>,
    /// Interrupt messages delivered, in order (the functional side of MSI/MSI-X).
    interrupts: Vec<Msi>,
    scratch: Path,
    /// Ways between adapters that programmed address-LUT entries use (`LutEntry::way`):
    /// searched when the first entry of an adapter pair is programmed, dropped with the
    /// pair's last entry, so they follow the windows in use, never the cluster's size.
    ways: Vec<Way>,
    way_of: FxHashMap<(NtbId, NtbId), u32>,
    /// Slots of `ways` no entry uses.
    free_ways: Vec<u32>,
    /// Bumped by every change to IOMMU tables, NTB LUTs or link state: whoever caches
    /// routes (the timing layer) drops them when it moves.
    routing_epoch: u64,
    /// The state of the software driving this hardware (the host layer's IOMMU and NTB
    /// drivers), kept with the machine so whoever holds the fabric holds its drivers'
    /// bookkeeping too. Opaque here: the fabric never looks inside.
    driver_state: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// The multicast group table (`catalog::MULTICAST_GROUPS` slots, made on first use).
    mcast: Vec<Option<McGroup>>,
    /// Reused by `store` into a multicast window.
    mc_scratch: McRoutes,
}

impl Fabric {
    pub fn new(topo: Topology) -> Fabric {
        let ntb = topo
            .ntbs
            .iter()
            .map(|n| {
                let rc = topo.node(topo.node(n.chip_node).root).rid;
                NtbState::new(n, rc)
            })
            .collect();
        let iommu = vec![Iommu::default(); topo.hosts.len()];
        let cable_up = vec![true; topo.cables.len()];
        let host_up = vec![true; topo.hosts.len()];
        Fabric {
            topo,
            ntb,
            iommu,
            cable_up,
            host_up,
            mem: Memory::default(),
            faults: Vec::new(),
            interrupts: Vec::new(),
            scratch: Path::with_capacity(64),
            ways: Vec::new(),
            way_of: FxHashMap::default(),
            free_ways: Vec::new(),
            routing_epoch: 0,
            driver_state: None,
            mcast: Vec::new(),
            mc_scratch: McRoutes::default(),
        }
    }

    /// Builds the fabric and programs the scenario's static NTB windows.
    pub fn from_scenario(s: Scenario) -> Result<Fabric, ScenarioError> {
        let mut f = Fabric::new(s.topology);
        for (i, w) in s.windows.iter().enumerate() {
            let locate = |msg: String| ScenarioError {
                message: msg,
                ..w.at.clone()
            };
            // The same window twice would take LUT entries for nothing: a slip, not intent.
            if let Some(first) = s.windows[..i]
                .iter()
                .find(|v| (&v.ntb, &v.to, v.offset, v.size) == (&w.ntb, &w.to, w.offset, w.size))
            {
                return Err(locate(format!(
                    "the same window as line {} ({} → {} + {:#x}, {} bytes)",
                    first.at.line, w.ntb, w.to, w.offset, w.size
                )));
            }
            let (h, n) = w
                .ntb
                .split_once('.')
                .ok_or_else(|| locate(format!("`{}` is not `host.ntb`", w.ntb)))?;
            let ntb = f
                .topo
                .host_by_name(h)
                .and_then(|hid| f.topo.ntb_by_name(hid, n))
                .ok_or_else(|| locate(format!("no NTB adapter `{}`", w.ntb)))?;
            let (host, addr) = f
                .resolve_address(&w.to, w.offset)
                .map_err(|e| locate(e.to_string()))?;
            f.ntb_map_window(ntb, host, addr, w.size)
                .map_err(|e| locate(e.to_string()))?;
        }
        Ok(f)
    }

    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// Interrupt messages delivered so far.
    pub fn interrupts(&self) -> &[Msi] {
        &self.interrupts
    }

    pub fn clear_faults(&mut self) {
        self.faults.clear();
    }

    /// Changes whenever routing state changes (IOMMU tables, NTB LUTs, cables): a route
    /// cached under another epoch may be wrong.
    pub fn routing_epoch(&self) -> u64 {
        self.routing_epoch
    }

    /// Takes the drivers' state out (to be put back with `put_driver_state`); `None` when
    /// there is none yet or it is of another type.
    pub fn take_driver_state<T: std::any::Any + Send + Sync>(&mut self) -> Option<T> {
        let b = self.driver_state.take()?;
        match b.downcast::<T>() {
            Ok(t) => Some(*t),
            Err(b) => {
                self.driver_state = Some(b);
                None
            }
        }
    }

    pub fn put_driver_state<T: std::any::Any + Send + Sync>(&mut self, state: T) {
        self.driver_state = Some(Box::new(state));
    }

    pub fn ntb_state(&self, ntb: NtbId) -> &NtbState {
        &self.ntb[ntb.index()]
    }

    pub fn iommu(&self, host: HostId) -> &Iommu {
        &self.iommu[host.index()]
    }

    /// The cables and cluster switches of way `way` (a `LutEntry::way`).
    pub fn ntb_way_hops(&self, way: u32) -> &[NtbHop] {
        &self.ways[way as usize].hops
    }

    /// Ways between adapters kept for programmed windows (one per adapter pair in use).
    pub fn ntb_ways_kept(&self) -> usize {
        self.way_of.len()
    }

    /// The way from `src` to `dst` for `entries` more LUT entries: searched when the pair
    /// has none yet.
    fn take_way(&mut self, src: NtbId, dst: NtbId, entries: u32) -> Option<u32> {
        let w = match self.way_of.get(&(src, dst)) {
            Some(&w) => w,
            None => {
                let way = Way {
                    ends: (src, dst),
                    hops: self.topo.ntb_way(src, dst)?.into_boxed_slice(),
                    entries: 0,
                };
                let w = match self.free_ways.pop() {
                    Some(w) => {
                        self.ways[w as usize] = way;
                        w
                    }
                    None => {
                        self.ways.push(way);
                        self.ways.len() as u32 - 1
                    }
                };
                self.way_of.insert((src, dst), w);
                w
            }
        };
        self.ways[w as usize].entries += entries;
        Some(w)
    }

    /// One LUT entry no longer uses way `w`; the last one lets it go.
    fn put_way(&mut self, w: u32) {
        let way = &mut self.ways[w as usize];
        way.entries -= 1;
        if way.entries == 0 {
            self.way_of.remove(&way.ends);
            way.hops = Box::default();
            self.free_ways.push(w);
        }
    }

    /// The adapter of `dst_host` that `ntb` reaches (by cable or cluster switch).
    fn far_adapter(&self, ntb: NtbId, dst_host: HostId) -> Result<NtbId, FabricError> {
        let src_host = self.topo.ntbs[ntb.index()].host;
        self.topo
            .hosts
            .get(dst_host.index())
            .ok_or_else(|| FabricError::Invalid(format!("no host {dst_host}")))?
            .ntbs
            .iter()
            .copied()
            .find(|&d| self.topo.ntb_reaches(ntb, d))
            .ok_or_else(|| FabricError::Unreachable {
                from: self.topo.hosts[src_host.index()].name.clone(),
                to: self.topo.hosts[dst_host.index()].name.clone(),
            })
    }

    /// Programs address-LUT windows of `ntb` so that `size` bytes at `far_addr` in host
    /// `dst_host` become reachable; returns the local bus address of `far_addr`.
    pub fn ntb_map_window(
        &mut self,
        ntb: NtbId,
        dst_host: HostId,
        far_addr: u64,
        size: u64,
    ) -> Result<WindowMapping, FabricError> {
        let dst = self.far_adapter(ntb, dst_host)?;
        if size == 0 {
            return Err(FabricError::Invalid("window size must be > 0".into()));
        }
        let n = &self.topo.ntbs[ntb.index()];
        let ws = n.window_size;
        let base = far_addr - far_addr % ws;
        let count = (far_addr - base + size).div_ceil(ws);
        let label = self.topo.cable_end_label(CableEnd::Ntb(ntb));
        let cap = n.lut_windows as usize;
        // More than the whole BAR can never fit, however empty the LUT: say so and by
        // how much, rather than calling the LUT exhausted.
        if count > n.lut_windows as u64 {
            let bar = ws * n.lut_windows as u64;
            let need = far_addr - base + size;
            return Err(FabricError::Invalid(format!(
                "a window of {} at {far_addr:#x} needs {} of {label}'s BAR of {} ({count} \
                 LUT entries of {}): it exceeds the BAR by {}",
                crate::units::fmt_size(size),
                crate::units::fmt_size(need),
                crate::units::fmt_size(bar),
                crate::units::fmt_size(ws),
                crate::units::fmt_size(need - bar),
            )));
        }
        // Held for the entries below; given back if they do not fit.
        let way = self
            .take_way(ntb, dst, count as u32)
            .expect("a reachable adapter has a way");
        let first = self.ntb[ntb.index()]
            .alloc_windows(count as u32, |k| LutEntry {
                dst,
                dst_host,
                far_base: base + k as u64 * ws,
                way,
                group: None,
            })
            .ok_or(FabricError::Exhausted {
                what: "NTB address LUT",
                on: label,
                capacity: cap,
            });
        let first = match first {
            Ok(first) => first,
            Err(e) => {
                for _ in 0..count {
                    self.put_way(way);
                }
                return Err(e);
            }
        };
        self.routing_epoch += 1;
        let bar = self
            .topo
            .node(self.topo.ntbs[ntb.index()].fn_node)
            .bar(self.topo.ntbs[ntb.index()].window_bar)
            .expect("NTB window BAR exists");
        Ok(WindowMapping {
            ntb,
            first,
            count: count as u32,
            local_addr: bar.addr + first as u64 * ws + (far_addr - base),
        })
    }

    pub fn ntb_unmap_window(&mut self, m: &WindowMapping) -> Result<(), FabricError> {
        let st = &mut self.ntb[m.ntb.index()];
        let range = m.first as usize..(m.first + m.count) as usize;
        if range.end > st.lut.len()
            || st.lut[range.clone()]
                .iter()
                .any(|e| e.is_none_or(|e| e.group.is_some()))
        {
            return Err(FabricError::Invalid(
                "unmapping NTB windows that are not mapped".into(),
            ));
        }
        for i in range {
            let e = self.ntb[m.ntb.index()].lut[i]
                .take()
                .expect("checked above");
            self.put_way(e.way);
        }
        self.routing_epoch += 1;
        Ok(())
    }

    /// Lets `rid` send through `ntb` (a lent device, a registered local requester).
    pub fn ntb_add_requester(&mut self, ntb: NtbId, rid: Rid) -> Result<u8, FabricError> {
        let label = self.topo.cable_end_label(CableEnd::Ntb(ntb));
        self.routing_epoch += 1;
        self.ntb[ntb.index()].add_requester(rid, &label)
    }

    pub fn ntb_remove_requester(&mut self, ntb: NtbId, rid: Rid) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.ntb[ntb.index()].remove_requester(rid)
    }

    /// Takes a cable down or up (link failure).
    pub fn set_cable_up(&mut self, cable: CableId, up: bool) {
        self.routing_epoch += 1;
        self.cable_up[cable.index()] = up;
    }

    /// Whether the cable itself is up (as last set; its end hosts aside).
    pub fn cable_up(&self, cable: CableId) -> bool {
        self.cable_up[cable.index()]
    }

    /// Why a TLP cannot cross `cable` now: the cable is down, or a host at one of its
    /// ends has crashed (its adapter's link is down with it). `None`: it is live.
    pub fn cable_fault(&self, cable: CableId) -> Option<FaultKind> {
        let down_end = self.topo.cables[cable.index()]
            .ends
            .iter()
            .find_map(|e| match *e {
                CableEnd::Ntb(n) => {
                    let h = self.topo.ntbs[n.index()].host;
                    (!self.host_up[h.index()]).then_some(h)
                }
                CableEnd::ClusterSwitch(_) => None,
            });
        match down_end {
            Some(host) => Some(FaultKind::HostDown { host }),
            None if !self.cable_up[cable.index()] => Some(FaultKind::LinkDown { cable }),
            None => None,
        }
    }

    pub fn host_up(&self, host: HostId) -> bool {
        self.host_up[host.index()]
    }

    /// A host crashes: from now on every route into or out of it faults with
    /// `HostDown` naming it — its RAM, BARs and adapters answer nothing, its CPUs and
    /// devices issue nothing, and its adapters' links are down.
    pub fn crash_host(&mut self, host: HostId) {
        self.routing_epoch += 1;
        self.host_up[host.index()] = false;
    }

    /// A crashed host comes back, cold: what its RAM and its functions' BARs and config
    /// spaces held is lost (they read as zeros, as memory never written). NTB LUTs and
    /// IOMMU tables are left as they were: the host layer owns them, and what a rebooted
    /// OS programs again is its business, not the hardware's.
    pub fn restart_host(&mut self, host: HostId) {
        self.routing_epoch += 1;
        if !self.host_up[host.index()] {
            self.mem.clear_host(host, &self.topo.host(host).nodes);
        }
        self.host_up[host.index()] = true;
    }

    // ---- IOMMU ----------------------------------------------------------------------

    pub fn iommu_create_domain(&mut self, host: HostId) -> DomainId {
        self.iommu[host.index()].create_domain()
    }
    pub fn iommu_attach(&mut self, host: HostId, rid: Rid, d: DomainId) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.iommu[host.index()].attach(rid, d)
    }
    pub fn iommu_detach(&mut self, host: HostId, rid: Rid) {
        self.routing_epoch += 1;
        self.iommu[host.index()].detach(rid)
    }
    pub fn iommu_map(
        &mut self,
        host: HostId,
        d: DomainId,
        iova: u64,
        phys: u64,
        len: u64,
        perm: Perm,
    ) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.iommu[host.index()].map(d, iova, phys, len, perm)
    }
    pub fn iommu_unmap(
        &mut self,
        host: HostId,
        d: DomainId,
        iova: u64,
        len: u64,
    ) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.iommu[host.index()].unmap(d, iova, len)
    }

    // ---- routing --------------------------------------------------------------------

    /// The requester ID a request starts with.
    pub fn requester_rid(&self, r: Requester) -> Rid {
        match r {
            Requester::Function(n) => self.topo.node(n).rid,
            Requester::Cpu { host, package } => {
                let h = self.topo.host(host);
                let v = package.min(self.topo.platform_of(host).packages - 1);
                let rc = h.roots.get(v as usize).copied().unwrap_or(h.roots[0]);
                self.topo.node(rc).rid
            }
        }
    }

    pub fn requester_host(&self, r: Requester) -> HostId {
        match r {
            Requester::Function(n) => self.topo.node(n).host,
            Requester::Cpu { host, .. } => host,
        }
    }

    /// Routes one request (at most 4 KiB, not crossing a 4 KiB boundary) and fills `path`
    /// with what it crosses, in order. On a fault, `path` holds the steps up to it.
    pub fn route(&self, req: &Request, path: &mut Path) -> Result<Target, Fault> {
        path.steps.clear();
        let topo = &self.topo;
        let host = self.requester_host(req.requester);
        let rid = self.requester_rid(req.requester);
        let addr = req.addr;
        let len = req.len.max(1) as u64;
        let fault = |kind, host, rid, addr| Fault {
            kind,
            host,
            requester: rid,
            addr,
            access: req.access,
        };
        if addr % PAGE + len > PAGE {
            return Err(fault(FaultKind::CrossesPage, host, rid, addr));
        }
        if !self.host_up[host.index()] {
            return Err(fault(FaultKind::HostDown { host }, host, rid, addr));
        }
        // Where the request currently is: a PCI function, or a CPU at an uncore vertex.
        let origin = match req.requester {
            Requester::Function(n) => {
                let mask = topo.node(n).dma_mask_bits;
                if mask < 64 && (addr + len - 1) >> mask != 0 {
                    return Err(fault(FaultKind::DmaMask, host, rid, addr));
                }
                Origin::Node(n)
            }
            Requester::Cpu { package, .. } => {
                Origin::Vertex(package.min(topo.platform_of(host).packages - 1))
            }
        };
        self.walk(req, host, rid, addr, origin, path)
    }

    /// Routes on from `origin` in `host` (requester ID `rid`, address `addr` as seen
    /// there), appending to `path`: the body of `route`, also run for each member of a
    /// multicast group from its adapter on.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        req: &Request,
        host: HostId,
        rid: Rid,
        addr: u64,
        origin: Origin,
        path: &mut Path,
    ) -> Result<Target, Fault> {
        let mut at = At {
            host,
            rid,
            addr,
            origin,
        };
        for _ in 0..=MAX_CROSSINGS {
            if let Some(t) = self.walk_host(req, &mut at, path)? {
                return Ok(t);
            }
        }
        Err(at.fault(req, FaultKind::TooManyCrossings))
    }

    /// One host of a walk: from `at` to the request's target in this host, or through an
    /// NTB window to the far host (`None`, `at` then where the request enters there).
    fn walk_host(
        &self,
        req: &Request,
        at: &mut At,
        path: &mut Path,
    ) -> Result<Option<Target>, Fault> {
        let topo = &self.topo;
        let len = req.len.max(1) as u64;
        let write = req.access == Access::Write;
        let h = topo.host(at.host);
        let platform = topo.platform_of(at.host);
        // A device's write into the MSI window is an interrupt message: it goes up to
        // its root, which hands it to interrupt delivery (no DMA remapping).
        if let (Origin::Node(n), true) = (at.origin, write && MSI_WINDOW.contains(&at.addr)) {
            if at.addr + len > MSI_WINDOW.end {
                return Err(at.fault(req, FaultKind::CrossesWindow));
            }
            let rc = topo.node(n).root;
            self.climb(n, rc, path);
            path.steps.push(Step::Root { node: rc });
            return Ok(Some(Target::Interrupt {
                host: at.host,
                apic: msi_apic(at.addr),
                addr: at.addr,
            }));
        }
        let at_root = self.translate_at_root(req, at, path)?;
        let region = *h
            .decode(at.addr)
            .ok_or_else(|| at.fault(req, FaultKind::NoWindow))?;
        if at.addr + len > region.end {
            return Err(at.fault(req, FaultKind::CrossesWindow));
        }
        let (tnode, tbar) = match region.owner {
            Owner::Ram { node, node_offset } => {
                let from = match (at.origin, at_root) {
                    (Origin::Vertex(v), _) => v,
                    (Origin::Node(_), Some(rc)) => rc_vertex(topo, rc),
                    (Origin::Node(n), None) => {
                        let rc = topo.node(n).root;
                        self.climb(n, rc, path);
                        path.steps.push(Step::Root { node: rc });
                        rc_vertex(topo, rc)
                    }
                };
                let to = platform.package_of_node(node);
                push_uncore(platform, at.host, from, to, path);
                return Ok(Some(Target::Ram {
                    host: at.host,
                    node,
                    addr: at.addr,
                    offset: node_offset + (at.addr - region.start),
                }));
            }
            Owner::Bar { node, bar } => (node, bar),
        };
        self.reach_bar_node(req, at, at_root, tnode, tbar, path)?;
        let tn = topo.node(tnode);
        match tn.kind {
            NodeKind::NtbFunction { ntb } if tbar == topo.ntbs[ntb.index()].window_bar => {
                self.cross_ntb(req, at, ntb, tnode, tbar, path)
            }
            _ => {
                let b = tn.bar(tbar).expect("region BAR exists");
                Ok(Some(Target::Bar {
                    node: tnode,
                    bar: tbar,
                    offset: at.addr - b.addr,
                }))
            }
        }
    }

    /// With the IOMMU on, every TLP of a device goes up to the root for translation:
    /// climbs there, translates `at.addr` and returns the root; `None` (nothing done)
    /// for a CPU or with the IOMMU off.
    fn translate_at_root(
        &self,
        req: &Request,
        at: &mut At,
        path: &mut Path,
    ) -> Result<Option<PcieNodeId>, Fault> {
        let Origin::Node(n) = at.origin else {
            return Ok(None);
        };
        if !self.topo.host(at.host).iommu {
            return Ok(None);
        }
        let write = req.access == Access::Write;
        let rc = self.topo.node(n).root;
        self.climb(n, rc, path);
        path.steps.push(Step::Root { node: rc });
        let phys = self.iommu[at.host.index()]
            .translate(at.rid, at.addr, write)
            .map_err(|m| {
                let k = match m {
                    IommuMiss::NoDomain => FaultKind::IommuNoDomain,
                    IommuMiss::NotMapped(_) => FaultKind::IommuNotMapped,
                    IommuMiss::Permission(_) => FaultKind::IommuPermission,
                };
                at.fault(req, k)
            })?;
        path.steps.push(Step::Iommu {
            host: at.host,
            rid: at.rid,
            iova: at.addr,
            phys,
        });
        at.addr = phys;
        Ok(Some(rc))
    }

    /// The way from `at` (at its root already when `at_root`) down to `tnode`, whose BAR
    /// `tbar` the address decodes to. A CPU's request takes its root's requester ID.
    fn reach_bar_node(
        &self,
        req: &Request,
        at: &mut At,
        at_root: Option<PcieNodeId>,
        tnode: PcieNodeId,
        tbar: u8,
        path: &mut Path,
    ) -> Result<(), Fault> {
        let topo = &self.topo;
        let platform = topo.platform_of(at.host);
        let troot = topo.node(tnode).root;
        match (at.origin, at_root) {
            (Origin::Vertex(v), _) => {
                push_uncore(platform, at.host, v, rc_vertex(topo, troot), path);
                path.steps.push(Step::Root { node: troot });
                at.rid = topo.node(troot).rid;
                self.descend(troot, tnode, path);
            }
            (Origin::Node(_), Some(rc)) => {
                self.via_roots(platform, at.host, rc, troot, tnode, path)
                    .map_err(|k| at.fault(req, k))?;
            }
            // A function addressing its own BAR never leaves the device: only an NTB
            // function's DMA engine feeding its own window goes on (through the NTB).
            (Origin::Node(n), None) if n == tnode => {
                let through_ntb = matches!(topo.node(n).kind,
                    NodeKind::NtbFunction { ntb } if topo.ntbs[ntb.index()].window_bar == tbar);
                if !through_ntb {
                    return Err(at.fault(req, FaultKind::OwnBar));
                }
            }
            (Origin::Node(n), None) => match lca(topo, n, tnode) {
                Some(a) if topo.node(a).is_switch() => {
                    self.climb(n, a, path);
                    self.descend(a, tnode, path);
                }
                _ => {
                    let rc = topo.node(n).root;
                    self.climb(n, rc, path);
                    path.steps.push(Step::Root { node: rc });
                    self.via_roots(platform, at.host, rc, troot, tnode, path)
                        .map_err(|k| at.fault(req, k))?;
                }
            },
        }
        Ok(())
    }

    /// Through NTB `ntb`'s window BAR (`tbar` of `tnode`): address LUT, requester-ID LUT,
    /// cables, far adapter; `at` becomes where the request enters the far host (`None`).
    /// A multicast window ends the walk at the sending adapter (`Target::Multicast`).
    fn cross_ntb(
        &self,
        req: &Request,
        at: &mut At,
        ntb: NtbId,
        tnode: PcieNodeId,
        tbar: u8,
        path: &mut Path,
    ) -> Result<Option<Target>, Fault> {
        let topo = &self.topo;
        let write = req.access == Access::Write;
        let tn = topo.node(tnode);
        let spec = &topo.ntbs[ntb.index()];
        let st = &self.ntb[ntb.index()];
        let off = at.addr - tn.bar(tbar).expect("window BAR").addr;
        let window = (off / spec.window_size) as u32;
        let entry = st
            .window(window)
            .ok_or_else(|| at.fault(req, FaultKind::NtbWindowUnmapped))?;
        if let Some(group) = entry.group {
            if !write {
                return Err(at.fault(req, FaultKind::MulticastRead { group }));
            }
        }
        let index = st
            .rid_index(at.rid)
            .ok_or_else(|| at.fault(req, FaultKind::NtbRequesterUnknown))?;
        if let Some(group) = entry.group {
            // The replication point's first stage: the sending adapter's crossbar.
            // Each member's route goes on from here (`route_multicast`).
            path.steps.push(Step::Switch {
                node: spec.chip_node,
            });
            return Ok(Some(Target::Multicast {
                group,
                offset: entry.far_base + off % spec.window_size,
            }));
        }
        let far = entry.far_base + off % spec.window_size;
        let dst = &topo.ntbs[entry.dst.index()];
        let far_rid = proxy_rid(topo.node(dst.fn_node).rid, index);
        path.steps.push(Step::NtbWindow {
            ntb,
            window,
            from: at.addr,
            to_host: entry.dst_host,
            to: far,
        });
        path.steps.push(Step::RidLut {
            ntb,
            index,
            from: at.rid,
            to: far_rid,
        });
        // The adapter's crossbar, from its host side to its link side.
        path.steps.push(Step::Switch {
            node: spec.chip_node,
        });
        for hop in self.ntb_way_hops(entry.way) {
            match *hop {
                NtbHop::Cable(c) => {
                    path.steps.push(Step::Cable { cable: c });
                    if let Some(k) = self.cable_fault(c) {
                        return Err(at.fault(req, k));
                    }
                }
                NtbHop::ClusterSwitch(s) => path.steps.push(Step::ClusterSwitch { switch: s }),
            }
        }
        // The far adapter's crossbar, from its link side to its host side.
        path.steps.push(Step::Switch {
            node: dst.chip_node,
        });
        *at = At {
            host: entry.dst_host,
            rid: far_rid,
            addr: far,
            origin: Origin::Node(dst.fn_node),
        };
        Ok(None)
    }

    /// Per member of the multicast group a write `req` reaches, its route from the
    /// replication point on, in `out` (reused: no allocation once it has grown to the
    /// group). Returns `route`'s target; when it is not `Target::Multicast`, `out` holds
    /// no member and the target is the unicast one. A member whose way is dead (cable
    /// down, a host crashed) or whose route faults gets its fault, never a route.
    pub fn route_multicast(&self, req: &Request, out: &mut McRoutes) -> Result<Target, Fault> {
        out.group = None;
        out.reset(0);
        let t = self.route(req, &mut out.prefix)?;
        let Target::Multicast { group, offset } = t else {
            return Ok(t);
        };
        let g = self.mcast[group.index()]
            .as_ref()
            .expect("a multicast LUT entry names a live group");
        out.group = Some(group);
        out.shared = out.prefix.steps.len();
        out.reset(g.members.len());
        let spec = &self.topo.ntbs[g.ntb.index()];
        let sender = spec.host;
        // The requester as it reaches the adapter (after any earlier NTB crossing).
        let rid = out
            .prefix
            .steps
            .iter()
            .rev()
            .find_map(|s| match *s {
                Step::RidLut { to, .. } => Some(to),
                _ => None,
            })
            .unwrap_or_else(|| self.requester_rid(req.requester));
        let index = self.ntb[g.ntb.index()]
            .rid_index(rid)
            .expect("route checked the requester-ID LUT");
        let from = g.local_addr + offset;
        let window = g.first + (offset / spec.window_size) as u32;
        let base = out.shared - 1;
        let len = req.len.max(1) as u64;
        for (i, m) in g.members.iter().enumerate() {
            let (prefix, slot) = (&out.prefix, &mut out.routes[i]);
            let path = &mut slot.1;
            path.steps.clear();
            path.steps.extend_from_slice(&prefix.steps[..base]);
            let far = m.far_addr + offset;
            let dst = &self.topo.ntbs[m.dst.index()];
            let far_rid = proxy_rid(self.topo.node(dst.fn_node).rid, index);
            let fault = |kind, host, rid, addr| Fault {
                kind,
                host,
                requester: rid,
                addr,
                access: req.access,
            };
            slot.0 = (|| {
                if offset + len > g.size {
                    return Err(fault(FaultKind::CrossesWindow, sender, rid, from));
                }
                path.steps.push(Step::NtbWindow {
                    ntb: g.ntb,
                    window,
                    from,
                    to_host: m.host,
                    to: far,
                });
                path.steps.push(Step::RidLut {
                    ntb: g.ntb,
                    index,
                    from: rid,
                    to: far_rid,
                });
                path.steps.push(Step::Switch {
                    node: spec.chip_node,
                });
                for hop in self.ntb_way_hops(m.way) {
                    match *hop {
                        NtbHop::Cable(c) => {
                            path.steps.push(Step::Cable { cable: c });
                            if let Some(k) = self.cable_fault(c) {
                                return Err(fault(k, sender, rid, from));
                            }
                        }
                        NtbHop::ClusterSwitch(s) => {
                            path.steps.push(Step::ClusterSwitch { switch: s })
                        }
                    }
                }
                path.steps.push(Step::Switch {
                    node: dst.chip_node,
                });
                self.walk(req, m.host, far_rid, far, Origin::Node(dst.fn_node), path)
            })();
        }
        Ok(t)
    }

    /// Steps every member's route shares in `r` (from `route_multicast`): the sender's
    /// part and the ways' common cables and cluster switches — the replication point is
    /// the last of them, where the members' ways diverge.
    pub fn multicast_shared_steps(r: &McRoutes) -> usize {
        let m = r.members();
        let Some(((_, first), rest)) = m.split_first() else {
            return 0;
        };
        let mut n = first.steps.len();
        for (_, p) in rest {
            n = n.min(
                first
                    .steps
                    .iter()
                    .zip(&p.steps)
                    .take_while(|(a, b)| {
                        a == b
                            || matches!(
                                (a, b),
                                (Step::NtbWindow { .. }, Step::NtbWindow { .. })
                                    | (Step::RidLut { .. }, Step::RidLut { .. })
                            )
                    })
                    .count(),
            );
        }
        n
    }

    // ---- multicast groups -----------------------------------------------------------

    /// A group as programmed.
    pub fn multicast_group(&self, group: GroupId) -> Option<&McGroup> {
        self.mcast.get(group.index())?.as_ref()
    }

    /// Groups in use.
    pub fn multicast_groups(&self) -> usize {
        self.mcast.iter().filter(|g| g.is_some()).count()
    }

    /// Makes a multicast group of `size` bytes whose window is a run of address-LUT
    /// entries of `ntb` (the sending adapter). A full group table or LUT is
    /// `FabricError::Exhausted`.
    pub fn multicast_create(&mut self, ntb: NtbId, size: u64) -> Result<GroupId, FabricError> {
        let spec = self
            .topo
            .ntbs
            .get(ntb.index())
            .ok_or_else(|| FabricError::Invalid(format!("no NTB adapter {ntb}")))?;
        if size == 0 {
            return Err(FabricError::Invalid("a multicast group of 0 bytes".into()));
        }
        if self.mcast.is_empty() {
            self.mcast = vec![None; crate::catalog::MULTICAST_GROUPS];
        }
        let id = GroupId::from_index(self.mcast.iter().position(|g| g.is_none()).ok_or(
            FabricError::Exhausted {
                what: "multicast group table",
                on: "the fabric".into(),
                capacity: crate::catalog::MULTICAST_GROUPS,
            },
        )?);
        let ws = spec.window_size;
        let count = size.div_ceil(ws);
        let label = self.topo.cable_end_label(CableEnd::Ntb(ntb));
        if count > spec.lut_windows as u64 {
            return Err(FabricError::Invalid(format!(
                "a multicast group of {} exceeds {label}'s NTB BAR",
                crate::units::fmt_size(size)
            )));
        }
        let (host, cap) = (spec.host, spec.lut_windows as usize);
        let first = self.ntb[ntb.index()]
            .alloc_windows(count as u32, |k| LutEntry {
                dst: ntb,
                dst_host: host,
                far_base: k as u64 * ws,
                way: u32::MAX,
                group: Some(id),
            })
            .ok_or(FabricError::Exhausted {
                what: "NTB address LUT",
                on: label,
                capacity: cap,
            })?;
        let bar = self
            .topo
            .node(spec.fn_node)
            .bar(spec.window_bar)
            .expect("NTB window BAR exists");
        self.mcast[id.index()] = Some(McGroup {
            id,
            ntb,
            size,
            first,
            count: count as u32,
            local_addr: bar.addr + first as u64 * ws,
            members: Vec::new(),
            delivered: 0,
            skipped: 0,
        });
        self.routing_epoch += 1;
        Ok(id)
    }

    /// Adds a member: `size` bytes of the group land at `far_addr` in `host`.
    pub fn multicast_join(
        &mut self,
        group: GroupId,
        host: HostId,
        far_addr: u64,
    ) -> Result<(), FabricError> {
        let g = self
            .multicast_group(group)
            .ok_or_else(|| FabricError::Invalid(format!("no multicast group {group}")))?;
        let ntb = g.ntb;
        if g.members.iter().any(|m| m.host == host) {
            return Err(FabricError::Invalid(format!(
                "host `{}` is already a member of multicast group {group}",
                self.topo.host(host).name
            )));
        }
        let dst = self.far_adapter(ntb, host)?;
        let way = self
            .take_way(ntb, dst, 1)
            .expect("a reachable adapter has a way");
        self.mcast[group.index()]
            .as_mut()
            .expect("checked above")
            .members
            .push(McMember {
                host,
                far_addr,
                dst,
                way,
            });
        self.routing_epoch += 1;
        Ok(())
    }

    /// Removes `host` from the group.
    pub fn multicast_leave(&mut self, group: GroupId, host: HostId) -> Result<(), FabricError> {
        let g = self
            .mcast
            .get_mut(group.index())
            .and_then(|g| g.as_mut())
            .ok_or_else(|| FabricError::Invalid(format!("no multicast group {group}")))?;
        let i = g
            .members
            .iter()
            .position(|m| m.host == host)
            .ok_or_else(|| {
                FabricError::Invalid(format!("host {host} is not in multicast group {group}"))
            })?;
        let m = g.members.remove(i);
        self.put_way(m.way);
        self.routing_epoch += 1;
        Ok(())
    }

    /// Removes the group: its members leave and its LUT entries are freed.
    pub fn multicast_destroy(&mut self, group: GroupId) -> Result<(), FabricError> {
        let g = self
            .mcast
            .get_mut(group.index())
            .and_then(|g| g.take())
            .ok_or_else(|| FabricError::Invalid(format!("no multicast group {group}")))?;
        for m in &g.members {
            self.put_way(m.way);
        }
        for i in g.first..g.first + g.count {
            self.ntb[g.ntb.index()].lut[i as usize] = None;
        }
        self.routing_epoch += 1;
        Ok(())
    }

    /// From root complex `rc` to `t` under root `troot`, through the interconnect if the
    /// roots differ; peer-to-peer through a root needs the platform to forward it.
    fn via_roots(
        &self,
        platform: &Platform,
        host: HostId,
        rc: PcieNodeId,
        troot: PcieNodeId,
        t: PcieNodeId,
        path: &mut Path,
    ) -> Result<(), FaultKind> {
        if !platform.root_p2p {
            return Err(FaultKind::P2pBlocked);
        }
        if rc != troot {
            push_uncore(
                platform,
                host,
                rc_vertex(&self.topo, rc),
                rc_vertex(&self.topo, troot),
                path,
            );
            path.steps.push(Step::Root { node: troot });
        }
        self.descend(troot, t, path);
        Ok(())
    }

    /// Upstream from `n` to its ancestor `a`: each link, each switch reached (a included).
    #[inline]
    fn climb(&self, n: PcieNodeId, a: PcieNodeId, path: &mut Path) {
        let mut cur = n;
        while cur != a {
            let node = self.topo.node(cur);
            if node.link.is_some() {
                path.steps.push(Step::Link {
                    node: cur,
                    down: false,
                });
            }
            let Some(p) = node.parent else { break };
            cur = p;
            // An NTB function sits on its adapter's host side: leaving it toward the host
            // crosses no chip (the chip is crossed between the window and the cable).
            if self.topo.node(cur).is_switch() && !matches!(node.kind, NodeKind::NtbFunction { .. })
            {
                path.steps.push(Step::Switch { node: cur });
            }
        }
    }

    /// The function with requester ID `rid` in `host`: the target of a configuration
    /// request, which a CPU of `package` sends to the root owning the function's bus, and
    /// which travels down by ID (Type 1, then Type 0 at the last bridge). Fills `path`.
    pub fn config_route(
        &self,
        host: HostId,
        package: u32,
        rid: Rid,
        write: bool,
        path: &mut Path,
    ) -> Result<PcieNodeId, Fault> {
        path.steps.clear();
        let topo = &self.topo;
        if !self.host_up[host.index()] {
            return Err(Fault {
                kind: FaultKind::HostDown { host },
                host,
                requester: self.requester_rid(Requester::Cpu { host, package }),
                addr: rid.0 as u64,
                access: if write { Access::Write } else { Access::Read },
            });
        }
        let h = topo.host(host);
        let node = h
            .nodes
            .iter()
            .copied()
            .find(|&n| {
                topo.node(n).rid == rid
                    && matches!(
                        topo.node(n).kind,
                        NodeKind::Function { .. } | NodeKind::NtbFunction { .. }
                    )
            })
            .ok_or(Fault {
                kind: FaultKind::NoWindow,
                host,
                requester: self.requester_rid(Requester::Cpu { host, package }),
                addr: rid.0 as u64,
                access: if write { Access::Write } else { Access::Read },
            })?;
        let rc = topo.node(node).root;
        let from = package.min(topo.platform_of(host).packages - 1);
        push_uncore(
            topo.platform_of(host),
            host,
            from,
            rc_vertex(topo, rc),
            path,
        );
        path.steps.push(Step::Root { node: rc });
        self.descend(rc, node, path);
        Ok(node)
    }

    /// A CPU of `package` in `host` reads the configuration space (4 KiB, PCIe extended)
    /// of the function with requester ID `rid`, routed by ID as `config_route` routes it:
    /// what enumeration programmed (BARs) and what drivers wrote. No such function faults.
    pub fn config_read(
        &mut self,
        host: HostId,
        package: u32,
        rid: Rid,
        reg: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        let node = self.config_target(host, package, rid, false)?;
        self.init_config(node);
        self.mem.bar(node, CONFIG_SPACE).read(reg, buf);
        Ok(())
    }

    /// A CPU writes a function's configuration space (routed by ID, as `config_read`).
    pub fn config_write(
        &mut self,
        host: HostId,
        package: u32,
        rid: Rid,
        reg: u64,
        data: &[u8],
    ) -> Result<(), Fault> {
        let node = self.config_target(host, package, rid, true)?;
        self.init_config(node);
        self.mem.bar(node, CONFIG_SPACE).write(reg, data);
        Ok(())
    }

    /// Routes a configuration request (logging a fault) and gives the function it reaches.
    fn config_target(
        &mut self,
        host: HostId,
        package: u32,
        rid: Rid,
        write: bool,
    ) -> Result<PcieNodeId, Fault> {
        let mut path = std::mem::take(&mut self.scratch);
        let r = self.config_route(host, package, rid, write, &mut path);
        self.scratch = path;
        if let Err(f) = r {
            self.faults.push(f);
        }
        r
    }

    /// Fills a function's header the first time it is touched: BAR registers hold what
    /// enumeration assigned (memory BARs, 64-bit ones over two registers).
    fn init_config(&mut self, node: PcieNodeId) {
        let n = self.topo.node(node);
        let store = self.mem.bar(node, CONFIG_SPACE);
        if store.resident_pages() > 0 {
            return;
        }
        let mut header = [0u8; 64];
        header[0x0e] = 0; // header type 0: an endpoint
        for b in &n.bars {
            let reg = 0x10 + 4 * b.index as usize;
            let bits64 = b.addr >= 1 << 32 || b.size > 1 << 31;
            let low = (b.addr as u32 & !0xf) | if bits64 { 0x4 } else { 0 };
            if reg + 4 <= header.len() {
                header[reg..reg + 4].copy_from_slice(&low.to_le_bytes());
            }
            if bits64 && reg + 8 <= header.len() {
                header[reg + 4..reg + 8].copy_from_slice(&((b.addr >> 32) as u32).to_le_bytes());
            }
        }
        store.write(0, &header);
    }

    /// Downstream from ancestor `a` (not included) to `t`.
    #[inline]
    fn descend(&self, a: PcieNodeId, t: PcieNodeId, path: &mut Path) {
        let start = path.steps.len();
        let mut cur = t;
        while cur != a {
            let node = self.topo.node(cur);
            if node.link.is_some() {
                path.steps.push(Step::Link {
                    node: cur,
                    down: true,
                });
            }
            let Some(p) = node.parent else { break };
            if p != a
                && self.topo.node(p).is_switch()
                && !matches!(node.kind, NodeKind::NtbFunction { .. })
            {
                path.steps.push(Step::Switch { node: p });
            }
            cur = p;
        }
        path.steps[start..].reverse();
    }

    // ---- functional data path -------------------------------------------------------

    /// Routes `req` and records a fault in the log.
    fn route_logged(&mut self, req: &Request) -> Result<Target, Fault> {
        let mut path = std::mem::take(&mut self.scratch);
        let r = self.route(req, &mut path);
        self.scratch = path;
        if let Err(f) = r {
            self.faults.push(f);
        }
        r
    }

    fn access(
        &mut self,
        requester: Requester,
        addr: u64,
        len: usize,
        access: Access,
        mut each: impl FnMut(&mut Memory, &mut Vec<Msi>, Target, usize, usize),
    ) -> Result<(), Fault> {
        let mut done = 0usize;
        while done < len {
            let at = addr + done as u64;
            let n = ((PAGE - at % PAGE) as usize).min(len - done);
            let req = Request {
                requester,
                addr: at,
                len: n as u32,
                access,
            };
            let t = self.route_logged(&req)?;
            if let Target::Multicast { group, .. } = t {
                // Replicated: every live member gets the bytes; a dead one is skipped,
                // its fault logged and counted in the group.
                let mut mc = std::mem::take(&mut self.mc_scratch);
                self.route_multicast(&req, &mut mc)?;
                let (mut ok, mut skipped) = (0, 0);
                for (r, _) in mc.members() {
                    match *r {
                        Ok(t) => {
                            each(&mut self.mem, &mut self.interrupts, t, done, n);
                            ok += 1;
                        }
                        Err(f) => {
                            self.faults.push(f);
                            skipped += 1;
                        }
                    }
                }
                self.mc_scratch = mc;
                if let Some(g) = self.mcast[group.index()].as_mut() {
                    g.delivered += ok;
                    g.skipped += skipped;
                }
            } else {
                each(&mut self.mem, &mut self.interrupts, t, done, n);
            }
            done += n;
        }
        Ok(())
    }

    /// A device (or NTB function) writes `data` at bus address `addr`.
    pub fn dma_write(
        &mut self,
        requester: PcieNodeId,
        addr: u64,
        data: &[u8],
    ) -> Result<(), Fault> {
        self.write(Requester::Function(requester), addr, data)
    }

    /// A device reads `buf.len()` bytes at bus address `addr`. A fault fills the rest of
    /// `buf` with all-ones, as an Unsupported Request completion returns.
    pub fn dma_read(
        &mut self,
        requester: PcieNodeId,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        self.read(Requester::Function(requester), addr, buf)
    }

    /// Any requester (a function or a CPU package) writes `data` at `addr` as it sees it.
    pub fn store(&mut self, r: Requester, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.write(r, addr, data)
    }

    /// Any requester reads `buf.len()` bytes at `addr`; a fault fills the rest with ones.
    pub fn load(&mut self, r: Requester, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.read(r, addr, buf)
    }

    /// A CPU core of `package` stores `data` at host-physical address `addr`.
    pub fn cpu_store(
        &mut self,
        host: HostId,
        package: u32,
        addr: u64,
        data: &[u8],
    ) -> Result<(), Fault> {
        self.write(Requester::Cpu { host, package }, addr, data)
    }

    pub fn cpu_load(
        &mut self,
        host: HostId,
        package: u32,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        self.read(Requester::Cpu { host, package }, addr, buf)
    }

    fn write(&mut self, r: Requester, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.access(
            r,
            addr,
            data.len(),
            Access::Write,
            |mem, interrupts, t, at, n| {
                let chunk = &data[at..at + n];
                match t {
                    Target::Ram {
                        host, node, offset, ..
                    } => mem.ram(host, node).write(offset, chunk),
                    Target::Bar { node, bar, offset } => mem.bar(node, bar).write(offset, chunk),
                    Target::Interrupt { host, apic, .. } => {
                        let mut v = [0u8; 4];
                        let k = chunk.len().min(4);
                        v[..k].copy_from_slice(&chunk[..k]);
                        interrupts.push(Msi {
                            host,
                            apic,
                            data: u32::from_le_bytes(v),
                        });
                    }
                    // Expanded by `access` into the members' targets.
                    Target::Multicast { .. } => {}
                }
            },
        )
    }

    fn read(&mut self, r: Requester, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let len = buf.len();
        let mut filled = 0;
        let res = self.access(r, addr, len, Access::Read, |mem, _, t, at, n| {
            let chunk = &mut buf[at..at + n];
            match t {
                Target::Ram {
                    host, node, offset, ..
                } => mem.ram(host, node).read(offset, chunk),
                Target::Bar { node, bar, offset } => mem.bar(node, bar).read(offset, chunk),
                // Reads never route to interrupt delivery.
                Target::Interrupt { .. } | Target::Multicast { .. } => chunk.fill(0xFF),
            }
            filled = at + n;
        });
        if res.is_err() {
            buf[filled..].fill(0xFF);
        }
        res
    }

    /// Reads RAM directly, without routing (a debugger's view, for checks).
    pub fn peek_ram(&self, host: HostId, node: u32, offset: u64, buf: &mut [u8]) {
        self.mem.peek_ram(host, node, offset, buf)
    }

    pub fn peek_bar(&self, node: PcieNodeId, bar: u8, offset: u64, buf: &mut [u8]) {
        self.mem.peek_bar(node, bar, offset, buf)
    }

    /// The device itself updating the bytes behind its own BAR (its registers: a status
    /// bit, a queue's state, a table it keeps). Not an access: nothing is routed, timed or
    /// logged, and only the model that owns the function's BAR sink may call it for its
    /// own function. Every access by anyone else goes through `store`/`load`.
    pub fn poke_bar(&mut self, node: PcieNodeId, bar: u8, offset: u64, data: &[u8]) {
        self.mem.bar(node, bar).write(offset, data)
    }
}

/// A way between two adapters and how many programmed LUT entries use it.
#[derive(Clone, Debug)]
struct Way {
    ends: (NtbId, NtbId),
    hops: Box<[NtbHop]>,
    entries: u32,
}

#[derive(Clone, Copy)]
enum Origin {
    Node(PcieNodeId),
    Vertex(u32),
}

/// Where a walk is: the host, the requester ID and address the request carries there,
/// and what it goes on from.
#[derive(Clone, Copy)]
struct At {
    host: HostId,
    rid: Rid,
    addr: u64,
    origin: Origin,
}

impl At {
    /// `kind` of fault for `req` here.
    fn fault(&self, req: &Request, kind: FaultKind) -> Fault {
        Fault {
            kind,
            host: self.host,
            requester: self.rid,
            addr: self.addr,
            access: req.access,
        }
    }
}

fn rc_vertex(topo: &Topology, rc: PcieNodeId) -> u32 {
    match topo.node(rc).kind {
        NodeKind::RootComplex { vertex } => vertex,
        _ => unreachable!("root of a tree is a root complex"),
    }
}

fn push_uncore(p: &Platform, host: HostId, from: u32, to: u32, path: &mut Path) {
    if from != to {
        for &hop in p.uncore_path(from, to) {
            path.steps.push(Step::Interconnect { host, hop });
        }
    }
}

/// Lowest common ancestor in one host's tree; `None` when under different roots.
fn lca(topo: &Topology, mut a: PcieNodeId, mut b: PcieNodeId) -> Option<PcieNodeId> {
    if topo.node(a).root != topo.node(b).root {
        return None;
    }
    while topo.node(a).depth > topo.node(b).depth {
        a = topo.node(a).parent?;
    }
    while topo.node(b).depth > topo.node(a).depth {
        b = topo.node(b).parent?;
    }
    while a != b {
        a = topo.node(a).parent?;
        b = topo.node(b).parent?;
    }
    Some(a)
}
