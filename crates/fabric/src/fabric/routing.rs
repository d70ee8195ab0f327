//! Address routing: where one request goes and every link, switch, root, IOMMU, NTB
//! window and cable it crosses on the way, across hosts through NTB windows.

use super::Fabric;
use crate::iommu::{IommuMiss, PAGE};
use crate::ntb::proxy_rid;
use crate::path::*;
use crate::topology::*;

/// Bound on NTB crossings of one access; a mapping chain longer than this is a loop.
const MAX_CROSSINGS: usize = 8;

impl Fabric {
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
    pub(super) fn walk(
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
    pub(super) fn climb(&self, n: PcieNodeId, a: PcieNodeId, path: &mut Path) {
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

    /// Downstream from ancestor `a` (not included) to `t`.
    #[inline]
    pub(super) fn descend(&self, a: PcieNodeId, t: PcieNodeId, path: &mut Path) {
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
}

#[derive(Clone, Copy)]
pub(super) enum Origin {
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

pub(super) fn rc_vertex(topo: &Topology, rc: PcieNodeId) -> u32 {
    match topo.node(rc).kind {
        NodeKind::RootComplex { vertex } => vertex,
        _ => unreachable!("root of a tree is a root complex"),
    }
}

pub(super) fn push_uncore(p: &Platform, host: HostId, from: u32, to: u32, path: &mut Path) {
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
