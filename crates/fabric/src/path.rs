//! What a routed access crosses and where it ends: the step list (links, switch chips,
//! root complexes, interconnect links, IOMMU and NTB translations, requester-ID
//! substitutions, cables, cluster switches), the target, or the fault. Steps hold ids
//! only (Copy, no strings) so routing never allocates once a `Path` has grown.

use crate::multicast::GroupId;
use crate::topology::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Who issues a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requester {
    /// A PCI function (a device's PF, or an NTB function issuing on behalf of the far side).
    Function(PcieNodeId),
    /// A CPU core of a package.
    Cpu { host: HostId, package: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub requester: Requester,
    pub addr: u64,
    pub len: u32,
    pub access: Access,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The link above `node`, crossed upstream (`down == false`) or downstream.
    Link {
        node: PcieNodeId,
        down: bool,
    },
    /// A switch chip (including an NTB or transparent adapter's chip).
    Switch {
        node: PcieNodeId,
    },
    /// A CPU root complex.
    Root {
        node: PcieNodeId,
    },
    /// A CPU interconnect link between uncore vertices.
    Interconnect {
        host: HostId,
        hop: UncoreHop,
    },
    /// IOMMU translation of `iova` for `rid`.
    Iommu {
        host: HostId,
        rid: Rid,
        iova: u64,
        phys: u64,
    },
    /// NTB address-LUT translation.
    NtbWindow {
        ntb: NtbId,
        window: u32,
        from: u64,
        to_host: HostId,
        to: u64,
    },
    /// Requester-ID LUT: `from` leaves as entry `index`, appears as `to` on the far side.
    RidLut {
        ntb: NtbId,
        index: u8,
        from: Rid,
        to: Rid,
    },
    Cable {
        cable: CableId,
    },
    ClusterSwitch {
        switch: ClusterSwitchId,
    },
}

impl Step {
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Link { .. } => "link",
            Step::Switch { .. } => "switch",
            Step::Root { .. } => "root",
            Step::Interconnect { .. } => "interconnect",
            Step::Iommu { .. } => "iommu",
            Step::NtbWindow { .. } => "ntb_window",
            Step::RidLut { .. } => "rid_lut",
            Step::Cable { .. } => "cable",
            Step::ClusterSwitch { .. } => "cluster_switch",
        }
    }
}

/// The x86 MSI address window: a device's posted write here is an interrupt message,
/// delivered by the root complex to the local APIC named in address bits 19:12, never to
/// memory (and never translated by DMA remapping).
pub const MSI_WINDOW: std::ops::Range<u64> = 0xFEE0_0000..0xFEF0_0000;

/// The APIC ID an MSI address names.
pub fn msi_apic(addr: u64) -> u32 {
    ((addr >> 12) & 0xff) as u32
}

/// Where an access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Ram {
        host: HostId,
        node: u32,
        /// Host-physical address.
        addr: u64,
        /// Offset within the NUMA node's RAM.
        offset: u64,
    },
    Bar {
        node: PcieNodeId,
        bar: u8,
        offset: u64,
    },
    /// An MSI/MSI-X write reaching a host's interrupt delivery (`addr` in `MSI_WINDOW`).
    Interrupt { host: HostId, apic: u32, addr: u64 },
    /// A posted write into a multicast window: it reached the sending adapter, where the
    /// group's members' routes start (`Fabric::route_multicast` gives each). `offset` is
    /// the byte offset in the group.
    Multicast { group: GroupId, offset: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// No RAM range or BAR claims the address: Unsupported Request.
    NoWindow,
    /// The access runs past the end of what claims its first byte.
    CrossesWindow,
    /// A PCIe request may not cross a 4 KiB boundary.
    CrossesPage,
    /// The address is beyond the requester's DMA mask.
    DmaMask,
    /// The requester ID has no IOMMU domain.
    IommuNoDomain,
    /// The IOVA is not mapped in the requester's domain.
    IommuNotMapped,
    /// Mapped, but not for this kind of access.
    IommuPermission,
    /// The address falls in an NTB window whose LUT entry is not programmed.
    NtbWindowUnmapped,
    /// The requester is not in the NTB's requester-ID LUT.
    NtbRequesterUnknown,
    /// The root complex does not forward peer-to-peer between its ports.
    P2pBlocked,
    /// A cable on the way is down (writes dropped, reads complete as UR with all-ones).
    LinkDown { cable: CableId },
    /// A host on the way (the requester's, or one at either end of a cable crossed) has
    /// crashed: its RAM, BARs and adapters answer nothing (Unsupported Request).
    HostDown { host: HostId },
    /// More NTB crossings than a sane mapping makes (a window loop).
    TooManyCrossings,
    /// A function addressing its own BAR: the access never becomes a TLP (a switch or
    /// root does not send a request back out of the port it came in on), so the fabric
    /// has no route and nudma no model of the device's insides.
    OwnBar,
    /// A read (or any non-posted request) of a multicast address: switches replicate
    /// posted writes only.
    MulticastRead { group: GroupId },
}

impl FaultKind {
    pub fn describe(self) -> &'static str {
        match self {
            FaultKind::NoWindow => "no window claims the address (Unsupported Request)",
            FaultKind::CrossesWindow => "the access runs past the end of its window",
            FaultKind::CrossesPage => "a PCIe request may not cross a 4 KiB boundary",
            FaultKind::DmaMask => "address beyond the requester's DMA mask",
            FaultKind::IommuNoDomain => "IOMMU fault: requester has no domain",
            FaultKind::IommuNotMapped => "IOMMU fault: IOVA not mapped",
            FaultKind::IommuPermission => "IOMMU fault: access not permitted by the mapping",
            FaultKind::NtbWindowUnmapped => "NTB address-LUT window not programmed",
            FaultKind::NtbRequesterUnknown => "requester not in the NTB's requester-ID LUT",
            FaultKind::P2pBlocked => "root complex does not forward peer-to-peer",
            FaultKind::LinkDown { .. } => "link down on the way (Unsupported Request)",
            FaultKind::HostDown { .. } => "a host on the way is down (Unsupported Request)",
            FaultKind::TooManyCrossings => "too many NTB crossings (window loop)",
            FaultKind::OwnBar => {
                "the function addresses its own BAR: the access stays inside the device (no PCIe route)"
            }
            FaultKind::MulticastRead { .. } => {
                "a read of a multicast address: switches replicate posted writes only"
            }
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::NoWindow => "no_window",
            FaultKind::CrossesWindow => "crosses_window",
            FaultKind::CrossesPage => "crosses_page",
            FaultKind::DmaMask => "dma_mask",
            FaultKind::IommuNoDomain => "iommu_no_domain",
            FaultKind::IommuNotMapped => "iommu_not_mapped",
            FaultKind::IommuPermission => "iommu_permission",
            FaultKind::NtbWindowUnmapped => "ntb_window_unmapped",
            FaultKind::NtbRequesterUnknown => "ntb_requester_unknown",
            FaultKind::P2pBlocked => "p2p_blocked",
            FaultKind::LinkDown { .. } => "link_down",
            FaultKind::HostDown { .. } => "host_down",
            FaultKind::TooManyCrossings => "too_many_crossings",
            FaultKind::OwnBar => "own_bar",
            FaultKind::MulticastRead { .. } => "multicast_read",
        }
    }
}

/// A failed access, with the requester and address as seen where it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub host: HostId,
    pub requester: Rid,
    pub addr: u64,
    pub access: Access,
}

/// A reusable step buffer: clear and refill it per access to avoid allocation.
#[derive(Clone, Debug, Default)]
pub struct Path {
    pub steps: Vec<Step>,
}

impl Path {
    pub fn with_capacity(n: usize) -> Path {
        Path {
            steps: Vec::with_capacity(n),
        }
    }
    /// Switch chips crossed (an NTB or transparent adapter counts as its chip, a cluster
    /// switch counts too).
    pub fn hops(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Switch { .. } | Step::ClusterSwitch { .. }))
            .count()
    }
    /// CPU root complexes crossed.
    pub fn roots(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Root { .. }))
            .count()
    }
    pub fn ntb_crossings(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::NtbWindow { .. }))
            .count()
    }
}
