//! The device-oriented API of SISCI SmartIO (docs/hardware.md §6), in Rust's words. Calls are
//! methods of `Cluster` taking the fabric; handles are plain values.
//!
//! | SISCI call | here |
//! |---|---|
//! | `SCIGetDeviceList` | `Cluster::device_list` |
//! | `SCIGetFabricDeviceId` | `Cluster::fabric_device_id` |
//! | `SCIBorrowDevice(.., SCI_FLAG_EXCLUSIVE)` / shared | `Cluster::borrow` with `BorrowOptions::exclusive()` / `shared()` |
//! | `SCIReleaseExclusiveBorrow` | `Cluster::release_exclusive` |
//! | `SCIReturnDevice` | `Cluster::return_device` |
//! | `SCIConnectDeviceSegment` (`SCI_MEMTYPE_BAR`) | `Cluster::connect_device_segment` |
//! | `SCICreateDeviceSegment(.., hints, ..)` | `Cluster::create_device_segment` (`AccessHints`, `Near` override) |
//! | `SCICreateSegment` (a host's own RAM) | `Cluster::create_local_segment` |
//! | `SCIMapLocalSegmentForDevice` / `SCIMapRemoteSegmentForDevice` | `Cluster::map_segment_for_device` (either: the segment knows where it is) |
//! | `SCIUnmapSegmentForDevice` | `Cluster::unmap_for_device` |
//! | `SCIMapLocalSegment` / `SCIMapRemoteSegment` | `Cluster::map_segment_for_cpu` |
//! | `SCIUnmapSegment` | `Cluster::unmap_segment_for_cpu` |
//! | `SCIRegisterPCIeRequester` | `Cluster::register_pcie_requester` (one requester-ID LUT entry) |
//! | `SCIUnregisterPCIeRequester` | `Cluster::unregister_pcie_requester` |
//! | multicast groups (`SCICreateSegment` with `SCI_FLAG_BROADCAST`, multicast segments) | `Cluster::create_multicast_group`, `Cluster::create_multicast_segment` (`MULTIHOST_READ`), `Cluster::join_multicast_group`, `Cluster::leave_multicast_group`, `Cluster::map_multicast_for_device`, `Cluster::remove_multicast_group` |
//!
//! Access hints choose where a segment's memory is when no override is given:
//! `DEVICE_READ | HOST_WRITE` (an NVMe submission queue) → memory near the device, the
//! lender's RAM on the device's node; `DEVICE_WRITE | HOST_READ` (a completion queue) →
//! memory near the CPU, the borrower's RAM; anything else → the borrower's RAM.

use fabric::{Fabric, GroupId, HostId, NodeKind, PcieNodeId, Requester};
use host::{
    Coherent, DmaDirection, DmaMapping, HostError, Hosts, IovaRange, McHandle, NumaNode, PhysAddr,
    RequesterEntry,
};

use super::agent::ControlKind;
use super::lending::{lender_reach, Borrowed, Cluster, DeviceMapping, MapHold};
use super::pool::{Availability, Fdid};
use super::LendError;

/// `SCI_MEMACCESS_*` hints, combined with `|`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AccessHints(pub u8);

impl AccessHints {
    pub const DEVICE_READ: AccessHints = AccessHints(1);
    pub const DEVICE_WRITE: AccessHints = AccessHints(2);
    pub const HOST_READ: AccessHints = AccessHints(4);
    pub const HOST_WRITE: AccessHints = AccessHints(8);
    pub const MULTIHOST_READ: AccessHints = AccessHints(16);

    pub fn contains(self, o: AccessHints) -> bool {
        self.0 & o.0 == o.0
    }
}

impl std::ops::BitOr for AccessHints {
    type Output = AccessHints;
    fn bitor(self, o: AccessHints) -> AccessHints {
        AccessHints(self.0 | o.0)
    }
}

/// Where a segment's memory goes, overriding the hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Near {
    /// The lender's RAM on the device's node.
    Device,
    /// The borrower's RAM (node 0).
    Cpu,
    /// Exactly this node of this host.
    Node(NumaNode),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// RAM allocated for the segment.
    Ram,
    /// A device's BAR (`SCI_MEMTYPE_BAR`).
    Bar { fdid: Fdid, bar: u8 },
}

/// A segment: memory somewhere in the cluster, at `phys` in its host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub id: SegmentId,
    pub phys: PhysAddr,
    pub size: u64,
    pub kind: SegmentKind,
    pub hints: AccessHints,
    coherent: Option<Coherent>,
}

/// A mapping for a device (same as any other).
pub type SegmentMapping = DeviceMapping;

/// A segment mapped for a CPU of `host`: `addr` is where it stores and loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMapping {
    pub host: HostId,
    pub addr: u64,
    mapping: Option<DmaMapping>,
}

/// One row of `device_list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub fdid: Fdid,
    pub name: String,
    pub lender: String,
    pub availability: Availability,
    pub borrowers: usize,
}

/// A local, non-borrowed requester allowed through its host's NTB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisteredRequester {
    pub host: HostId,
    pub function: PcieNodeId,
    entry: RequesterEntry,
}

impl RegisteredRequester {
    /// Its requester-ID LUT index.
    pub fn index(&self) -> u8 {
        self.entry.index
    }
}

/// A multicast group (SmartIO's multicast segments): members and the segment they share.
/// Made by `Cluster::create_multicast_group`, which programs the fabric's group (through
/// the host layer); a value made otherwise (`Default`) programs nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MulticastGroup {
    pub id: GroupId,
    pub members: Vec<Fdid>,
    pub segment: Option<SegmentId>,
    /// The programmed group: its window on the sending host's adapter.
    pub handle: Option<McHandle>,
    /// The member hosts and the segment each joined with, in join order.
    pub joined: Vec<(HostId, Segment)>,
}

/// A multicast group mapped for a device of the sending host: a posted write of the
/// device at `addr + offset` lands at `offset` in every member's segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulticastMapping {
    pub function: PcieNodeId,
    pub addr: u64,
    pub requester: RegisteredRequester,
    /// The IOVA range mapping the window when the sending host's IOMMU is on.
    pub iova: Option<IovaRange>,
}

impl Cluster {
    /// A multicast group of `size` bytes sent from `sender`'s adapter (its multicast
    /// window: LUT entries of that adapter). The fabric's group table is finite
    /// (`fabric::catalog::MULTICAST_GROUPS`); a full one is refused with its name.
    pub fn create_multicast_group(
        &mut self,
        f: &mut Fabric,
        sender: HostId,
        size: u64,
    ) -> Result<MulticastGroup, LendError> {
        let h = Hosts::with(f, |hs, f| hs.mcast_create(f, sender, size))
            .map_err(|e| LendError::Invalid(e.to_string()))?;
        Ok(MulticastGroup {
            id: h.group,
            handle: Some(h),
            ..MulticastGroup::default()
        })
    }

    /// A segment of `size` bytes of `host`'s RAM (node 0) for a multicast member: what
    /// `SCI_MEMACCESS_MULTIHOST_READ` asks for (hosts read what the group delivers).
    pub fn create_multicast_segment(
        &mut self,
        f: &mut Fabric,
        host: HostId,
        size: u64,
    ) -> Result<Segment, LendError> {
        let phys = Hosts::with(f, |hs, f| {
            hs.ram_alloc(f, NumaNode { host, node: 0 }, size, fabric::iommu::PAGE)
        })
        .map_err(|e| LendError::Invalid(e.to_string()))?;
        let s = Segment {
            id: SegmentId(self.next_segment),
            phys,
            size,
            kind: SegmentKind::Ram,
            hints: AccessHints::MULTIHOST_READ | AccessHints::DEVICE_WRITE,
            coherent: None,
        };
        self.next_segment += 1;
        self.segments.insert(s.id, s);
        Ok(s)
    }

    /// `seg`'s host joins `g`: the group's bytes land in `seg`. The segment must be RAM
    /// made for it (`MULTIHOST_READ`) and as large as the group.
    pub fn join_multicast_group(
        &mut self,
        f: &mut Fabric,
        g: &mut MulticastGroup,
        seg: &Segment,
    ) -> Result<(), LendError> {
        let h = g
            .handle
            .ok_or_else(|| LendError::Invalid("the multicast group is not programmed".into()))?;
        if !seg.hints.contains(AccessHints::MULTIHOST_READ) || seg.kind != SegmentKind::Ram {
            return Err(LendError::Invalid(format!(
                "segment {} is not a multicast segment (RAM with SCI_MEMACCESS_MULTIHOST_READ)",
                seg.id.0
            )));
        }
        if seg.size < h.size {
            return Err(LendError::Invalid(format!(
                "segment {} has {:#x} bytes, the group {:#x}",
                seg.id.0, seg.size, h.size
            )));
        }
        Hosts::with(f, |hs, f| hs.mcast_join(f, &h, seg.phys))
            .map_err(|e| LendError::Invalid(e.to_string()))?;
        g.joined.push((seg.phys.host, *seg));
        Ok(())
    }

    /// `host` leaves `g`.
    pub fn leave_multicast_group(
        &mut self,
        f: &mut Fabric,
        g: &mut MulticastGroup,
        host: HostId,
    ) -> Result<(), LendError> {
        let h = g
            .handle
            .ok_or_else(|| LendError::Invalid("the multicast group is not programmed".into()))?;
        Hosts::with(f, |hs, f| hs.mcast_leave(f, &h, host))
            .map_err(|e| LendError::Invalid(e.to_string()))?;
        g.joined.retain(|(m, _)| *m != host);
        Ok(())
    }

    /// The address device `function` (in the sending host) DMA-writes to reach every
    /// member: the group's window, through the sending host's IOMMU when it is on. Its
    /// requester ID gets an entry of the adapter's requester-ID LUT.
    pub fn map_multicast_for_device(
        &mut self,
        f: &mut Fabric,
        g: &MulticastGroup,
        function: PcieNodeId,
    ) -> Result<MulticastMapping, LendError> {
        let h = g
            .handle
            .ok_or_else(|| LendError::Invalid("the multicast group is not programmed".into()))?;
        let node = f
            .topo
            .nodes
            .get(function.index())
            .ok_or_else(|| LendError::Invalid(format!("no PCI node {function}")))?;
        if node.host != h.sender {
            return Err(LendError::Invalid(format!(
                "`{}` is not in host `{}`, which sends to multicast group {}",
                f.topo.node_label(function),
                f.topo.host(h.sender).name,
                h.group
            )));
        }
        let rid = node.rid;
        let requester = self.register_pcie_requester(f, function)?;
        if !f.topo.host(h.sender).iommu {
            return Ok(MulticastMapping {
                function,
                addr: h.local,
                requester,
                iova: None,
            });
        }
        let r = Hosts::with(f, |hs, f| {
            let r = hs.iommu_reserve(f, h.sender, rid, h.size, u64::MAX, fabric::iommu::PAGE)?;
            let iova = hs.iommu_map_at(
                f,
                &r,
                r.start + h.local % fabric::iommu::PAGE,
                h.local,
                h.size,
                fabric::iommu::Perm::WRITE,
            )?;
            Ok::<_, HostError>((r, iova + h.local % fabric::iommu::PAGE))
        })
        .map_err(|e| LendError::Invalid(e.to_string()))?;
        Ok(MulticastMapping {
            function,
            addr: r.1,
            requester,
            iova: Some(r.0),
        })
    }

    /// The group goes: its members leave and its window is freed (member segments stay
    /// their owners').
    pub fn remove_multicast_group(
        &mut self,
        f: &mut Fabric,
        g: &mut MulticastGroup,
    ) -> Result<(), LendError> {
        let h = g
            .handle
            .take()
            .ok_or_else(|| LendError::Invalid("the multicast group is not programmed".into()))?;
        Hosts::with(f, |hs, f| hs.mcast_destroy(f, &h))
            .map_err(|e| LendError::Invalid(e.to_string()))?;
        g.joined.clear();
        Ok(())
    }

    /// `SCIGetDeviceList`: every device of the pool, in fdid order.
    pub fn device_list(&self, f: &Fabric) -> Vec<DeviceInfo> {
        self.pool
            .devices()
            .iter()
            .map(|d| DeviceInfo {
                fdid: d.fdid,
                name: d.name.clone(),
                lender: f.topo.host(d.host).name.clone(),
                availability: d.availability,
                borrowers: d.borrowers(),
            })
            .collect()
    }

    /// `SCIGetFabricDeviceId`.
    pub fn fabric_device_id(&self, f: &Fabric, name: &str) -> Result<Fdid, LendError> {
        self.fdid_by_name(f, name)
    }

    /// `SCIConnectDeviceSegment` with `SCI_MEMTYPE_BAR`: BAR `bar` of a borrowed device.
    pub fn connect_device_segment(
        &mut self,
        f: &Fabric,
        b: Borrowed,
        bar: u8,
    ) -> Result<Segment, LendError> {
        let x = self.live(f, b)?;
        let info =
            f.topo.node(x.function).bar(bar).copied().ok_or_else(|| {
                LendError::Invalid(format!("{} has no BAR{bar}", self.label(b.fdid)))
            })?;
        let s = Segment {
            id: SegmentId(self.next_segment),
            phys: PhysAddr {
                host: x.lender,
                addr: info.addr,
            },
            size: info.size,
            kind: SegmentKind::Bar { fdid: b.fdid, bar },
            hints: AccessHints::default(),
            coherent: None,
        };
        self.next_segment += 1;
        self.segments.insert(s.id, s);
        Ok(s)
    }

    /// `SCICreateDeviceSegment`: `size` bytes of RAM for borrowed device `b`, placed by
    /// `hints` unless `near` says where.
    pub fn create_device_segment(
        &mut self,
        f: &mut Fabric,
        b: Borrowed,
        size: u64,
        hints: AccessHints,
        near: Option<Near>,
    ) -> Result<Segment, LendError> {
        let x = self.live(f, b)?;
        let device_node = NumaNode {
            host: x.lender,
            node: node_of(f, x.function),
        };
        let cpu_node = NumaNode {
            host: x.borrower,
            node: 0,
        };
        let node = match near {
            Some(Near::Device) => device_node,
            Some(Near::Cpu) => cpu_node,
            Some(Near::Node(n)) => n,
            None if hints.contains(AccessHints::DEVICE_READ | AccessHints::HOST_WRITE)
                && !hints.contains(AccessHints::DEVICE_WRITE) =>
            {
                device_node
            }
            None => cpu_node,
        };
        self.create_segment(f, node, size, hints)
            .map_err(|e| self.host_err(f, b.fdid, b.host, e))
    }

    /// `SCICreateSegment`: `size` bytes of RAM on `node`, a segment of that host's own
    /// (pinned memory a program allocates before mapping it for its devices).
    pub fn create_local_segment(
        &mut self,
        f: &mut Fabric,
        node: NumaNode,
        size: u64,
        hints: AccessHints,
    ) -> Result<Segment, LendError> {
        self.create_segment(f, node, size, hints)
            .map_err(|e| LendError::Invalid(e.to_string()))
    }

    fn create_segment(
        &mut self,
        f: &mut Fabric,
        node: NumaNode,
        size: u64,
        hints: AccessHints,
    ) -> Result<Segment, HostError> {
        if f.topo.hosts.get(node.host.index()).is_none() {
            return Err(HostError::Invalid(format!("no host #{}", node.host)));
        }
        let pkg = f.topo.platform_of(node.host).package_of_node(node.node);
        let c = Hosts::with(f, |hs, f| {
            hs.dma_alloc_coherent(
                f,
                Requester::Cpu {
                    host: node.host,
                    package: pkg,
                },
                node,
                size,
            )
        })?;
        let s = Segment {
            id: SegmentId(self.next_segment),
            phys: c.phys,
            size,
            kind: SegmentKind::Ram,
            hints,
            coherent: Some(c),
        };
        self.next_segment += 1;
        self.segments.insert(s.id, s);
        Ok(s)
    }

    /// Frees a segment's RAM (a BAR segment is only forgotten).
    pub fn remove_segment(&mut self, f: &mut Fabric, s: &Segment) -> Result<(), LendError> {
        self.remove_segment_by_id(f, s.id)
    }

    pub(crate) fn remove_segment_by_id(
        &mut self,
        f: &mut Fabric,
        id: SegmentId,
    ) -> Result<(), LendError> {
        let s = self
            .segments
            .remove(&id)
            .ok_or_else(|| LendError::Invalid(format!("no segment {}", id.0)))?;
        if let Some(c) = s.coherent {
            Hosts::with(f, |hs, f| hs.dma_free_coherent(f, &c))
                .map_err(|e| LendError::Invalid(e.to_string()))?;
        }
        Ok(())
    }

    /// `SCIMapLocalSegmentForDevice` / `SCIMapRemoteSegmentForDevice`: the address
    /// borrowed device `b` uses for the segment — in its DMA window when the segment is
    /// the borrower's (no message), the lender-local address when it is in the lender
    /// (one message only if the lender must program its IOMMU), through the lender's NTB
    /// otherwise (one message).
    pub fn map_segment_for_device(
        &mut self,
        f: &mut Fabric,
        b: Borrowed,
        s: &Segment,
        dir: DmaDirection,
    ) -> Result<DeviceMapping, LendError> {
        let x = self.live(f, b)?;
        let (lender, function) = (x.lender, x.function);
        if s.phys.host == b.host {
            return self.map_for_device(f, b, s.phys, s.size, dir);
        }
        if s.phys.host == lender && !f.topo.host(lender).iommu {
            let (addr, _) = Hosts::with(f, |hs, f| {
                lender_reach(hs, f, lender, function, s.phys.addr, s.size)
            })
            .map_err(|e| self.host_err(f, b.fdid, b.host, e))?;
            return Ok(self.record(b, addr, s.size, MapHold::Direct));
        }
        self.post(ControlKind::WindowSetup);
        let m = Hosts::with(f, |hs, f| {
            hs.dma_map_single(f, Requester::Function(function), s.phys, s.size, dir)
        })
        .map_err(|e| self.host_err(f, b.fdid, b.host, e))?;
        Ok(self.record(b, m.addr.0, s.size, MapHold::Host(m)))
    }

    /// `SCIMapLocalSegment` / `SCIMapRemoteSegment`: where a CPU of `host` reaches the
    /// segment — its own address when local, the shadow BAR of a device it borrowed, or an
    /// NTB window of its own adapter.
    pub fn map_segment_for_cpu(
        &mut self,
        f: &mut Fabric,
        host: HostId,
        s: &Segment,
    ) -> Result<CpuMapping, LendError> {
        if s.phys.host == host {
            return Ok(CpuMapping {
                host,
                addr: s.phys.addr,
                mapping: None,
            });
        }
        if let SegmentKind::Bar { fdid, bar } = s.kind {
            let mine = self
                .borrows()
                .into_iter()
                .find(|b| b.fdid == fdid && b.host == host);
            if let Some(b) = mine {
                return Ok(CpuMapping {
                    host,
                    addr: self.shadow_bar(f, b, bar)?,
                    mapping: None,
                });
            }
        }
        let m = Hosts::with(f, |hs, f| {
            hs.dma_map_single(
                f,
                Requester::Cpu { host, package: 0 },
                s.phys,
                s.size,
                DmaDirection::Bidirectional,
            )
        })
        .map_err(|e| LendError::Invalid(e.to_string()))?;
        Ok(CpuMapping {
            host,
            addr: m.addr.0,
            mapping: Some(m),
        })
    }

    pub fn unmap_segment_for_cpu(
        &mut self,
        f: &mut Fabric,
        m: &CpuMapping,
    ) -> Result<(), LendError> {
        if let Some(d) = m.mapping {
            Hosts::with(f, |hs, f| hs.dma_unmap_single(f, &d))
                .map_err(|e| LendError::Invalid(e.to_string()))?;
        }
        Ok(())
    }

    /// `SCIRegisterPCIeRequester`: local function `function` may send through its host's
    /// (first) NTB adapter, taking one requester-ID LUT entry there.
    pub fn register_pcie_requester(
        &mut self,
        f: &mut Fabric,
        function: PcieNodeId,
    ) -> Result<RegisteredRequester, LendError> {
        let node = f
            .topo
            .nodes
            .get(function.index())
            .ok_or_else(|| LendError::Invalid(format!("no PCI node {function}")))?;
        if !matches!(node.kind, NodeKind::Function { .. }) {
            return Err(LendError::Invalid(format!(
                "`{}` is not a device function",
                f.topo.node_label(function)
            )));
        }
        let (host, rid) = (node.host, node.rid);
        let ntb = *f.topo.host(host).ntbs.first().ok_or_else(|| {
            LendError::Invalid(format!(
                "host `{}` has no NTB adapter",
                f.topo.host(host).name
            ))
        })?;
        let entry =
            Hosts::with(f, |hs, f| hs.ntb_acquire_requester(f, ntb, rid)).map_err(
                |e| match self.pool.fdid_of(function) {
                    Some(fdid) => self.host_err(f, fdid, host, e),
                    None => LendError::Invalid(e.to_string()),
                },
            )?;
        let r = RegisteredRequester {
            host,
            function,
            entry,
        };
        self.requesters.push(r);
        Ok(r)
    }

    pub fn unregister_pcie_requester(
        &mut self,
        f: &mut Fabric,
        r: RegisteredRequester,
    ) -> Result<(), LendError> {
        let i = self
            .requesters
            .iter()
            .position(|x| *x == r)
            .ok_or_else(|| LendError::Invalid("requester not registered".into()))?;
        self.requesters.remove(i);
        Hosts::with(f, |hs, f| hs.ntb_release_requester(f, &r.entry))
            .map_err(|e: HostError| LendError::Invalid(e.to_string()))
    }
}

/// The NUMA node a function's root complex is on (its package's first node).
/// The NUMA node of the root a function hangs off (its "device node").
pub(crate) fn node_of(f: &Fabric, function: PcieNodeId) -> u32 {
    let rc = f.topo.node(f.topo.node(function).root);
    let p = f.topo.platform_of(rc.host);
    match rc.kind {
        NodeKind::RootComplex { vertex } if vertex < p.packages => vertex * p.nodes_per_package,
        _ => 0,
    }
}
