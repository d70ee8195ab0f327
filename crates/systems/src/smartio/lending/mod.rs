//! Device Lending on bare metal: a borrower hot-adds a shadow of a lender's device, its
//! BARs mapped through the borrower's NTB, its configuration accesses forwarded to the
//! lender, its MSI vectors redirected through the lender's NTB toward the borrower's
//! interrupt range and its legacy INTx masked; the device's DMA reaches the borrower's
//! memory through one DMA window set up at borrow time.
//!
//! **DMA window** (borrower with an IOMMU): at borrow time the lender adds a requester-ID
//! entry for the device on its adapter; the borrower reserves one contiguous IOVA range
//! (`BorrowOptions::dma_window`, aligned to the lender adapter's window size) in the
//! domain of the device's *proxied* requester ID (the ID its TLPs carry out of the
//! borrower's adapter), and the lender programs address-LUT windows covering that range
//! once. `map_for_device` then allocates IOVA inside the range and maps borrower IOMMU
//! pages: no message to the lender, no NTB change. The device's address is the lender NTB
//! BAR address of the range plus the offset.
//!
//! **Fallback** (borrower without an IOMMU): every `map_for_device` asks the lender's agent
//! (one counted `WindowSetup` message) to program an address-LUT window toward the buffer
//! itself, through the host layer's DMA API; unmapping sends `WindowTeardown`. Each mapping
//! costs a window, so the address LUT limits how many can be live.
//!
//! **Lender IOMMU** (optional): the device gets its own domain on the lender, and a range
//! below its DMA mask is mapped onto the NTB BAR addresses it must reach (a high 64-bit
//! BAR a 40-bit device could not address otherwise). Without one, a device whose mask
//! cannot reach the lender NTB's BAR fails with a DMA-mask error.
//!
//! **Return** issues a Function Level Reset (a configuration write at the lender), then
//! tears down the shadow BAR windows, the DMA window, the MSI windows, the mappings and the
//! requester entry. A vanished borrower's borrows are reclaimed the same way; a vanished
//! lender's devices are gone, and their borrowers' shadows torn down.
//!
//! This file owns the `Cluster`, what a borrow holds, and `lender_reach`; beside it:
//! `borrow` (borrow, return, revoke, reclaim: what is set up and torn down) and `access`
//! (shadow BARs, mappings for the device, forwarded configuration accesses, MSI).

use std::collections::BTreeMap;

use fabric::iommu::{Perm, PAGE};
use fabric::{Fabric, FabricError, HostId, NtbId, PcieNodeId};
use host::alloc::RangeAllocator;
use host::{
    DmaAddr, DmaDirection, DmaMapping, HostError, Hosts, IovaRange, NtbWindow, RequesterEntry,
};

use super::agent::{Agent, ControlKind, ControlStats};
use super::api::{RegisteredRequester, Segment, SegmentId};
use super::pool::{Availability, BorrowId, Fdid, Pool, PoolDevice};
use super::LendError;

mod access;
mod borrow;

/// Default DMA window of a borrow: two 32 MiB windows of a PXH830's address LUT.
/// (docs/hardware.md §2's K40c set-up used 512 MB; `BorrowOptions::dma_window` sets it.)
pub const DEFAULT_DMA_WINDOW: u64 = 64 << 20;
/// Command register (0x04) bit 10: Interrupt Disable (legacy INTx masked).
pub const CMD_INTX_DISABLE: u16 = 1 << 10;
/// Where the model puts the PCI Express capability's Device Control register (the
/// fabric keeps no capability list: an assumption, the usual place on GPUs and NVMe).
pub const PCIE_DEVCTL: u64 = 0x78;
/// Device Control bit 15: Initiate Function Level Reset.
pub const DEVCTL_FLR: u16 = 1 << 15;
/// Where the model puts the MSI capability: address low/high at +4/+8, data at +12.
pub const MSI_CAP: u64 = 0x50;

/// How to borrow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BorrowOptions {
    /// `SCI_FLAG_EXCLUSIVE`.
    pub exclusive: bool,
    /// Bytes of the DMA window (with a borrower IOMMU).
    pub dma_window: u64,
    /// The adapter pair to borrow through, (lender's adapter, borrower's adapter); `None`
    /// (the default) takes the pair `host::ntb_pair` picks. A borrower with several
    /// adapters to one lender borrows once per pair to have several paths (multipath
    /// failover, `nvme_dist`'s `failover`).
    pub through: Option<(NtbId, NtbId)>,
}

impl BorrowOptions {
    pub fn exclusive() -> BorrowOptions {
        BorrowOptions {
            exclusive: true,
            dma_window: DEFAULT_DMA_WINDOW,
            through: None,
        }
    }
    pub fn shared() -> BorrowOptions {
        BorrowOptions {
            exclusive: false,
            dma_window: DEFAULT_DMA_WINDOW,
            through: None,
        }
    }
    /// The same options through the adapter pair (lender's adapter, borrower's adapter).
    pub fn through(self, lender_ntb: NtbId, borrower_ntb: NtbId) -> BorrowOptions {
        BorrowOptions {
            through: Some((lender_ntb, borrower_ntb)),
            ..self
        }
    }
}

/// A borrow handle: what a borrower holds. Used after its return, every call fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Borrowed {
    pub id: BorrowId,
    pub fdid: Fdid,
    /// The borrower.
    pub host: HostId,
}

/// One BAR of a shadow device: `bus` is where the borrower's CPU reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShadowBar {
    pub index: u8,
    pub size: u64,
    /// The real BAR's bus address in the lender.
    pub real: u64,
    /// The borrower's bus address of the BAR's first byte (through its NTB).
    pub bus: u64,
    mapping: ShadowMap,
}

/// How a shadow BAR reaches the real one: a CPU mapping of the DMA API (through the
/// adapter pair `host::ntb_pair` picks), or a window of the borrow's own adapter (a borrow
/// `through` a chosen pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ShadowMap {
    Dma(DmaMapping),
    Window(NtbWindow),
}

/// A borrow's DMA window, for inspection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaWindowInfo {
    /// The IOVA range in the borrower's IOMMU (domain of the proxied requester ID).
    pub iova: IovaRange,
    /// The address the device puts on the bus for the range's first byte.
    pub device_base: u64,
    /// The lender NTB bus address of the range's first byte (= `device_base` without a
    /// lender IOMMU).
    pub ntb_base: u64,
}

/// A buffer mapped for a borrowed device: `addr` is what the device puts on the bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMapping {
    pub id: u64,
    pub borrow: BorrowId,
    pub addr: DmaAddr,
    pub len: u64,
}

/// An MSI vector redirected: the device writes `data` at `addr`; it arrives as the
/// borrower's interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsiRoute {
    pub vector: u32,
    pub addr: u64,
    pub data: u32,
    /// The borrower's own MSI address for the vector.
    pub borrower_addr: u64,
}

#[derive(Clone, Debug)]
enum DmaPath {
    Window {
        range: IovaRange,
        window: NtbWindow,
        lender: Option<IovaRange>,
        device_base: u64,
        alloc: RangeAllocator,
    },
    PerMapping,
}

#[derive(Clone, Debug)]
pub(crate) enum MapHold {
    /// Pages at `iova` in the DMA window (borrower IOMMU).
    Window { iova: u64, bytes: u64 },
    /// Set up by the lender's agent through its DMA API.
    Host(DmaMapping),
    /// Nothing programmed (a lender-local address without a lender IOMMU).
    Direct,
}

#[derive(Clone, Debug)]
pub(crate) struct Borrow {
    pub(crate) fdid: Fdid,
    pub(crate) borrower: HostId,
    pub(crate) lender: HostId,
    pub(crate) function: PcieNodeId,
    pub(crate) exclusive: bool,
    pub(crate) lender_ntb: NtbId,
    pub(crate) borrower_ntb: NtbId,
    requester: Option<RequesterEntry>,
    shadow: Vec<ShadowBar>,
    dma: Option<DmaPath>,
    msi: Vec<(MsiRoute, NtbWindow, Option<IovaRange>)>,
    pub(crate) maps: BTreeMap<u64, MapHold>,
}

/// The SmartIO cluster: the device pool, an agent per host, live borrows, and the
/// control-message counts. Kept beside the fabric; every call takes the fabric.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub(crate) pool: Pool,
    pub(crate) agents: Vec<Agent>,
    pub(crate) borrows: BTreeMap<BorrowId, Borrow>,
    next_borrow: u64,
    pub(crate) next_map: u64,
    pub(crate) stats: ControlStats,
    named: Vec<(String, Borrowed)>,
    pub(crate) segments: BTreeMap<SegmentId, Segment>,
    pub(crate) next_segment: u64,
    pub(crate) requesters: Vec<RegisteredRequester>,
}

impl Cluster {
    /// A cluster over `f`: every host's agent registers its devices (fdids in host,
    /// device, function order). Nothing is lent yet.
    pub fn new(f: &Fabric) -> Cluster {
        let mut pool = Pool::default();
        for h in (0..f.topo.hosts.len()).map(HostId::from_index) {
            pool.add_host_devices(f, h);
        }
        Cluster {
            pool,
            agents: (0..f.topo.hosts.len())
                .map(HostId::from_index)
                .map(Agent::new)
                .collect(),
            borrows: BTreeMap::new(),
            next_borrow: 1,
            next_map: 1,
            stats: ControlStats::default(),
            named: Vec::new(),
            segments: BTreeMap::new(),
            next_segment: 1,
            requesters: Vec::new(),
        }
    }

    /// A cluster that performs the scenario's `[[lend]]` and `[[borrow]]` declarations, in
    /// file order; each borrow is kept under its name (`borrow_named`).
    pub fn from_fabric(f: &mut Fabric) -> Result<Cluster, LendError> {
        let mut c = Cluster::new(f);
        let lends: Vec<PcieNodeId> = f.topo.lends.iter().map(|l| l.function).collect();
        for function in lends {
            let fdid = c
                .pool
                .fdid_of(function)
                .expect("every function is registered");
            c.lend(fdid)?;
        }
        let borrows: Vec<(String, HostId, PcieNodeId, bool)> = f
            .topo
            .borrows
            .iter()
            .map(|b| (b.name.clone(), b.host, b.function, b.exclusive))
            .collect();
        for (name, host, function, exclusive) in borrows {
            let fdid = c
                .pool
                .fdid_of(function)
                .expect("every function is registered");
            let opts = BorrowOptions {
                exclusive,
                ..BorrowOptions::shared()
            };
            let b = c.borrow(f, host, fdid, opts)?;
            c.named.push((name, b));
        }
        Ok(c)
    }

    /// A borrow the scenario declared, by its name.
    pub fn borrow_named(&self, name: &str) -> Option<Borrowed> {
        self.named.iter().find(|(n, _)| n == name).map(|x| x.1)
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn device(&self, fdid: Fdid) -> Result<&PoolDevice, LendError> {
        self.pool.get(fdid)
    }

    /// The fdid of a function named as a user names it (`lender.gpu`, `host.dev.pf1`).
    pub fn fdid_by_name(&self, f: &Fabric, name: &str) -> Result<Fdid, LendError> {
        match f.resolve(name) {
            Ok(fabric::Endpoint::Node(n)) => self.pool.fdid_of(n),
            _ => None,
        }
        .ok_or_else(|| LendError::UnknownName(name.into()))
    }

    pub fn stats(&self) -> &ControlStats {
        &self.stats
    }

    pub fn agent(&self, host: HostId) -> &Agent {
        &self.agents[host.index()]
    }

    /// Live borrows.
    pub fn borrows(&self) -> Vec<Borrowed> {
        self.borrows
            .iter()
            .map(|(&id, b)| Borrowed {
                id,
                fdid: b.fdid,
                host: b.borrower,
            })
            .collect()
    }

    pub(crate) fn post(&mut self, kind: ControlKind) {
        self.stats.count(kind);
    }

    pub(crate) fn host_name(f: &Fabric, h: HostId) -> String {
        f.topo.host(h).name.clone()
    }

    /// Its host's agent offers `fdid` to the pool.
    pub fn lend(&mut self, fdid: Fdid) -> Result<(), LendError> {
        let d = self.pool.get(fdid)?;
        if self.agents[d.host.index()].vanished {
            // Pool names start with the lender's name.
            let lender = d.name.split('.').next().unwrap_or_default();
            return Err(LendError::HostVanished(lender.to_string()));
        }
        let d = self.pool.get_mut(fdid)?;
        if d.availability == Availability::Registered {
            d.availability = Availability::Lent;
        }
        Ok(())
    }

    /// Registers one more function with the pool (what an agent does for a hot-added
    /// device); its fdid follows the others.
    pub fn add_device(&mut self, f: &Fabric, function: PcieNodeId) -> Fdid {
        let n = f.topo.node(function);
        let name = f.topo.node_label(function);
        self.pool.add_device(n.host, function, name)
    }

    /// The live borrow behind a handle, or why there is none.
    pub(crate) fn live(&self, f: &Fabric, b: Borrowed) -> Result<&Borrow, LendError> {
        match self.borrows.get(&b.id) {
            Some(x) if x.borrower == b.host && x.fdid == b.fdid => Ok(x),
            _ => Err(LendError::NotHeld {
                dev: self
                    .pool
                    .get(b.fdid)
                    .map(|d| d.label())
                    .unwrap_or_else(|_| b.fdid.to_string()),
                host: f
                    .topo
                    .hosts
                    .get(b.host.index())
                    .map_or_else(|| format!("#{}", b.host), |h| h.name.clone()),
                id: b.id,
            }),
        }
    }

    pub(crate) fn label(&self, fdid: Fdid) -> String {
        self.pool
            .get(fdid)
            .map(|d| d.label())
            .unwrap_or_else(|_| fdid.to_string())
    }

    /// Names the exhausted tables of a host-layer error after the device and host.
    pub(crate) fn host_err(&self, f: &Fabric, fdid: Fdid, host: HostId, e: HostError) -> LendError {
        let dev = self.label(fdid);
        match &e {
            HostError::Fabric(FabricError::Exhausted { what, on, capacity })
                if *what == "requester-ID LUT" =>
            {
                let ntb = f
                    .topo
                    .ntbs
                    .iter()
                    .position(|n| format!("{}.{}", f.topo.host(n.host).name, n.name) == *on);
                let (used, cap, reserved) = match ntb {
                    Some(i) => {
                        let (u, c, r, _) = Hosts::ntb_requester_use(f, NtbId::from_index(i));
                        (u - r, c, r)
                    }
                    None => (*capacity, *capacity, 0),
                };
                LendError::RequesterLutFull {
                    dev,
                    host: Self::host_name(f, host),
                    ntb: on.clone(),
                    used,
                    capacity: cap,
                    reserved,
                }
            }
            HostError::Fabric(FabricError::Exhausted { what, on, capacity })
                if *what == "NTB address LUT" =>
            {
                LendError::AddressLutFull {
                    dev,
                    ntb: on.clone(),
                    capacity: *capacity,
                }
            }
            _ => LendError::Host { dev, source: e },
        }
    }
}

pub(crate) fn perm(dir: DmaDirection) -> Perm {
    match dir {
        DmaDirection::ToDevice => Perm::READ,
        DmaDirection::FromDevice => Perm::WRITE,
        DmaDirection::Bidirectional => Perm::RW,
    }
}

/// The address device `dev` of host `lender` uses to reach bus address `local` there (an
/// NTB BAR): with a lender IOMMU, a range of the device's own domain below its DMA mask
/// mapped onto it; without, `local` itself if the mask reaches it.
pub(crate) fn lender_reach(
    hs: &mut Hosts,
    f: &mut Fabric,
    lender: HostId,
    dev: PcieNodeId,
    local: u64,
    len: u64,
) -> Result<(u64, Option<IovaRange>), HostError> {
    let bits = f.topo.node(dev).dma_mask_bits;
    let limit = if bits >= 64 { u64::MAX } else { 1u64 << bits };
    if f.topo.host(lender).iommu {
        let rid = f.topo.node(dev).rid;
        let off = local % PAGE;
        let r = hs.iommu_reserve(f, lender, rid, off + len, limit, PAGE)?;
        if let Err(e) = hs.iommu_map_at(f, &r, r.start + off, local, len, Perm::RW) {
            hs.iommu_unreserve(f, &r)?;
            return Err(e);
        }
        Ok((r.start + off, Some(r)))
    } else if local.checked_add(len).is_none_or(|end| end > limit) {
        Err(HostError::DmaMask {
            device: f.topo.node_label(dev),
            bits,
            addr: local,
            why: "the lender's NTB BAR is above it and the lender has no IOMMU to remap it",
        })
    } else {
        Ok((local, None))
    }
}
