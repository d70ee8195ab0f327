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

use std::collections::BTreeMap;

use fabric::iommu::{Perm, PAGE};
use fabric::{Fabric, FabricError, HostId, NtbId, PcieNodeId, Requester, MSI_WINDOW};
use host::alloc::RangeAllocator;
use host::{
    ntb_pair, DmaAddr, DmaDirection, DmaMapping, HostError, Hosts, IovaRange, NtbWindow, PhysAddr,
    RequesterEntry,
};

use super::agent::{Agent, ControlKind, ControlStats, PeerEntry};
use super::api::{RegisteredRequester, Segment, SegmentId};
use super::pool::{Availability, BorrowId, Fdid, Lease, Pool, PoolDevice};
use super::LendError;

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

    /// `host` borrows `fdid` (`SCIBorrowDevice`): two control messages (request, grant).
    pub fn borrow(
        &mut self,
        f: &mut Fabric,
        host: HostId,
        fdid: Fdid,
        opts: BorrowOptions,
    ) -> Result<Borrowed, LendError> {
        let hname = f
            .topo
            .hosts
            .get(host.index())
            .map(|h| h.name.clone())
            .ok_or_else(|| LendError::Invalid(format!("no host #{host}")))?;
        if self.agents[host.index()].vanished {
            return Err(LendError::HostVanished(hname));
        }
        let d = self.pool.get(fdid)?.clone();
        if d.host == host {
            return Err(LendError::Invalid(format!(
                "host `{hname}` cannot borrow its own device {}",
                d.label()
            )));
        }
        self.post(ControlKind::BorrowRequest);
        let holder = |id: BorrowId| {
            self.borrows
                .get(&id)
                .map_or_else(|| "?".into(), |b| f.topo.host(b.borrower).name.clone())
        };
        self.pool
            .check_borrow(fdid, opts.exclusive, &hname, holder)?;
        let pair = match opts.through {
            Some((l, b))
                if f.topo.host(d.host).ntbs.contains(&l)
                    && f.topo.host(host).ntbs.contains(&b)
                    && f.topo.ntb_reaches(l, b) =>
            {
                Some((l, b))
            }
            Some(_) => None,
            None => ntb_pair(f, d.host, host),
        };
        let (lender_ntb, borrower_ntb) = pair.ok_or_else(|| LendError::NoPath {
            from: f.topo.host(d.host).name.clone(),
            to: hname.clone(),
        })?;
        let mut b = Borrow {
            fdid,
            borrower: host,
            lender: d.host,
            function: d.function,
            exclusive: opts.exclusive,
            lender_ntb,
            borrower_ntb,
            requester: None,
            shadow: Vec::new(),
            dma: None,
            msi: Vec::new(),
            maps: BTreeMap::new(),
        };
        let r = Hosts::with(f, |hs, f| {
            let r = set_up(hs, f, &mut b, opts.dma_window, opts.through.is_some());
            if r.is_err() {
                let _ = tear_down(hs, f, &mut b, false);
            }
            r
        });
        if let Err(e) = r {
            return Err(match e {
                SetUpError::Host(e) => self.host_err(f, fdid, host, e),
                SetUpError::Lend(e) => e,
            });
        }
        let id = BorrowId(self.next_borrow);
        self.next_borrow += 1;
        self.pool.take(fdid, id, opts.exclusive);
        let way = f.topo.ntb_way(lender_ntb, borrower_ntb).unwrap_or_default();
        self.agents[host.index()].add_peer(PeerEntry {
            fdid,
            borrow: id,
            lender: d.host,
            lender_ntb,
            borrower_ntb,
            way,
        });
        self.borrows.insert(id, b);
        self.post(ControlKind::BorrowGrant);
        Ok(Borrowed { id, fdid, host })
    }

    /// An exclusive borrow becomes shared (`SCIReleaseExclusiveBorrow`): one message.
    pub fn release_exclusive(&mut self, f: &Fabric, b: Borrowed) -> Result<(), LendError> {
        self.live(f, b)?;
        self.post(ControlKind::ReleaseExclusive);
        self.pool.share(b.fdid, b.id);
        if let Some(x) = self.borrows.get_mut(&b.id) {
            x.exclusive = false;
        }
        Ok(())
    }

    /// Gives a device back (`SCIReturnDevice`): a Function Level Reset at the lender (when
    /// no other borrower shares it), then everything the borrow set up torn down. Two messages (return, acknowledgement).
    pub fn return_device(&mut self, f: &mut Fabric, b: Borrowed) -> Result<(), LendError> {
        self.live(f, b)?;
        self.post(ControlKind::Return);
        self.end_borrow(f, b.id, true)?;
        self.post(ControlKind::ReturnAck);
        Ok(())
    }

    /// The lender's agent tears a borrow down on its own (it lost the borrower's link, or
    /// decided its windows are stale): every window, requester entry and IOMMU mapping of
    /// the borrow is removed, with no Function Level Reset (the device keeps serving its
    /// other borrowers). One message (the notice to the borrower); the handle is dead
    /// afterwards. Used by multipath failover's `recreate`.
    pub fn revoke(&mut self, f: &mut Fabric, b: Borrowed) -> Result<(), LendError> {
        self.live(f, b)?;
        self.post(ControlKind::DeviceGone);
        self.end_borrow(f, b.id, false)
    }

    fn end_borrow(&mut self, f: &mut Fabric, id: BorrowId, reset: bool) -> Result<(), LendError> {
        let mut b = self.borrows.remove(&id).expect("checked live");
        let (fdid, host) = (b.fdid, b.borrower);
        // A shared device is reset only when its last borrower leaves: a Function Level
        // Reset under the others (a shared NVMe's manager and clients) would break them.
        let reset = reset && self.pool.get(fdid).map_or(true, |d| d.borrowers() <= 1);
        Hosts::with(f, |hs, f| tear_down(hs, f, &mut b, reset))
            .map_err(|e| self.host_err(f, fdid, host, e))?;
        self.pool.give_back(fdid, id);
        self.agents[host.index()].drop_peer(id);
        Ok(())
    }

    /// `host` is gone: its borrows are reclaimed (each device reset unless another borrower
    /// still shares it; every window,
    /// requester entry and IOMMU mapping torn down) and the devices it lent are gone,
    /// their borrowers' shadows torn down.
    pub fn host_vanished(&mut self, f: &mut Fabric, host: HostId) -> Result<(), LendError> {
        if self.agents[host.index()].vanished {
            return Ok(());
        }
        self.agents[host.index()].vanished = true;
        let ids: Vec<(BorrowId, bool, bool)> = self
            .borrows
            .iter()
            .map(|(&id, b)| (id, b.borrower == host, b.lender == host))
            .collect();
        for (id, borrowed_by_it, lent_by_it) in ids {
            if borrowed_by_it {
                self.post(ControlKind::Reclaim);
                self.end_borrow(f, id, !lent_by_it)?;
            } else if lent_by_it {
                self.post(ControlKind::DeviceGone);
                self.end_borrow(f, id, false)?;
            }
        }
        // Requesters it registered and segments it held are dropped with it.
        let regs: Vec<RegisteredRequester> = self
            .requesters
            .iter()
            .copied()
            .filter(|r| r.host == host)
            .collect();
        for r in regs {
            self.unregister_pcie_requester(f, r)?;
        }
        let segs: Vec<SegmentId> = self
            .segments
            .iter()
            .filter(|(_, s)| s.phys.host == host)
            .map(|(&id, _)| id)
            .collect();
        for s in segs {
            self.remove_segment_by_id(f, s)?;
        }
        for d in self.pool_devices_of(host) {
            let x = self.pool.get_mut(d)?;
            x.availability = Availability::Gone;
            x.lease = Lease::Free;
        }
        Ok(())
    }

    /// `host` is back after a restart (its agent registers again): it may borrow again,
    /// and the devices it had lent are registered again — free, and not lent until its
    /// agent lends them. What it held or lent before it vanished stays reclaimed: its old
    /// handles, and its old borrowers' handles, are dead. A host that had not vanished is
    /// left as it is.
    pub fn host_rejoined(&mut self, host: HostId) -> Result<(), LendError> {
        let agent = self
            .agents
            .get_mut(host.index())
            .ok_or_else(|| LendError::Invalid(format!("no host #{host}")))?;
        if !agent.vanished {
            return Ok(());
        }
        agent.vanished = false;
        for d in self.pool_devices_of(host) {
            let x = self.pool.get_mut(d)?;
            if x.availability == Availability::Gone {
                x.availability = Availability::Registered;
            }
        }
        Ok(())
    }

    fn pool_devices_of(&self, host: HostId) -> Vec<Fdid> {
        self.pool
            .devices()
            .iter()
            .filter(|d| d.host == host)
            .map(|d| d.fdid)
            .collect()
    }

    /// The shadow device's BARs as the borrower's CPU reaches them.
    pub fn shadow_bars(&self, f: &Fabric, b: Borrowed) -> Result<Vec<ShadowBar>, LendError> {
        Ok(self.live(f, b)?.shadow.clone())
    }

    /// The borrower's bus address of BAR `index` of the shadow device.
    pub fn shadow_bar(&self, f: &Fabric, b: Borrowed, index: u8) -> Result<u64, LendError> {
        let x = self.live(f, b)?;
        x.shadow
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.bus)
            .ok_or_else(|| LendError::Invalid(format!("{} has no BAR{index}", self.label(b.fdid))))
    }

    /// The DMA window (`None` on the per-mapping fallback).
    pub fn dma_window(&self, f: &Fabric, b: Borrowed) -> Result<Option<DmaWindowInfo>, LendError> {
        Ok(match &self.live(f, b)?.dma {
            Some(DmaPath::Window {
                range,
                window,
                device_base,
                ..
            }) => Some(DmaWindowInfo {
                iova: *range,
                device_base: *device_base,
                ntb_base: window.local,
            }),
            _ => None,
        })
    }

    /// The PCI function a borrow lends (the requester the device's DMA comes from).
    pub fn function(&self, f: &Fabric, b: Borrowed) -> Result<PcieNodeId, LendError> {
        Ok(self.live(f, b)?.function)
    }

    /// Maps `len` bytes of the borrower's memory at `buf` for the borrowed device; returns
    /// the address the device puts on the bus. In the DMA window: no message, no NTB change.
    pub fn map_for_device(
        &mut self,
        f: &mut Fabric,
        b: Borrowed,
        buf: PhysAddr,
        len: u64,
        dir: DmaDirection,
    ) -> Result<DeviceMapping, LendError> {
        let x = self.live(f, b)?;
        if buf.host != x.borrower {
            return Err(LendError::Invalid(format!(
                "map_for_device maps the borrower's memory; {:#x} is in host `{}` (create a segment there and map it with map_segment_for_device)",
                buf.addr,
                f.topo.host(buf.host).name
            )));
        }
        if len == 0 {
            return Err(LendError::Invalid(
                "a mapping needs at least one byte".into(),
            ));
        }
        let per_mapping = matches!(x.dma, Some(DmaPath::PerMapping));
        if per_mapping {
            self.post(ControlKind::WindowSetup);
        }
        let fdid = b.fdid;
        let id = self.next_map;
        let x = self.borrows.get_mut(&b.id).expect("live");
        let function = x.function;
        let r = Hosts::with(f, |hs, f| -> Result<(u64, MapHold), HostError> {
            match x.dma.as_mut().expect("set up") {
                DmaPath::Window {
                    range,
                    device_base,
                    alloc,
                    ..
                } => {
                    let off = buf.addr % PAGE;
                    let bytes = (off + len).div_ceil(PAGE) * PAGE;
                    let iova =
                        alloc
                            .alloc(bytes, u64::MAX)
                            .ok_or_else(|| HostError::Exhausted {
                                what: format!(
                                    "DMA window {:#x}..{:#x} of {}",
                                    range.start,
                                    range.end(),
                                    f.topo.node_label(function)
                                ),
                                len: bytes,
                                below: "in the window".into(),
                            })?;
                    if let Err(e) = hs.iommu_map_at(f, range, iova + off, buf.addr, len, perm(dir))
                    {
                        alloc.free(iova, bytes);
                        return Err(e);
                    }
                    Ok((
                        *device_base + (iova - range.start) + off,
                        MapHold::Window { iova, bytes },
                    ))
                }
                DmaPath::PerMapping => {
                    let m = hs.dma_map_single(f, Requester::Function(function), buf, len, dir)?;
                    Ok((m.addr.0, MapHold::Host(m)))
                }
            }
        });
        let (addr, hold) = r.map_err(|e| self.host_err(f, fdid, b.host, e))?;
        self.next_map += 1;
        self.borrows
            .get_mut(&b.id)
            .expect("live")
            .maps
            .insert(id, hold);
        Ok(DeviceMapping {
            id,
            borrow: b.id,
            addr: DmaAddr(addr),
            len,
        })
    }

    /// Undoes a mapping for a device (any kind `map_*_for_device` made).
    pub fn unmap_for_device(&mut self, f: &mut Fabric, m: &DeviceMapping) -> Result<(), LendError> {
        let (fdid, host) = {
            let x = self.borrows.get(&m.borrow).ok_or_else(|| {
                LendError::Invalid(format!("mapping {} belongs to no live borrow", m.id))
            })?;
            (x.fdid, x.borrower)
        };
        let x = self.borrows.get_mut(&m.borrow).expect("checked");
        let hold = x
            .maps
            .remove(&m.id)
            .ok_or_else(|| LendError::Invalid(format!("mapping {} is not mapped", m.id)))?;
        let host_side = matches!(hold, MapHold::Host(_));
        let r = Hosts::with(f, |hs, f| unmap_hold(hs, f, x, hold));
        if host_side {
            self.post(ControlKind::WindowTeardown);
        }
        r.map_err(|e| self.host_err(f, fdid, host, e))
    }

    /// A configuration read on the shadow device, forwarded to the real one (two
    /// messages: the forward and its reply) and performed at the lender.
    pub fn config_read(
        &mut self,
        f: &mut Fabric,
        b: Borrowed,
        reg: u64,
        buf: &mut [u8],
    ) -> Result<(), LendError> {
        let x = self.live(f, b)?;
        let (lender, rid) = (x.lender, f.topo.node(x.function).rid);
        self.post(ControlKind::ConfigForward);
        f.config_read(lender, 0, rid, reg, buf)
            .map_err(|e| LendError::ConfigFault {
                dev: self.label(b.fdid),
                why: format!("{e:?}"),
            })?;
        self.post(ControlKind::ConfigReply);
        Ok(())
    }

    /// A configuration write on the shadow device, forwarded (forward and reply).
    pub fn config_write(
        &mut self,
        f: &mut Fabric,
        b: Borrowed,
        reg: u64,
        data: &[u8],
    ) -> Result<(), LendError> {
        let x = self.live(f, b)?;
        let (lender, rid) = (x.lender, f.topo.node(x.function).rid);
        self.post(ControlKind::ConfigForward);
        f.config_write(lender, 0, rid, reg, data)
            .map_err(|e| LendError::ConfigFault {
                dev: self.label(b.fdid),
                why: format!("{e:?}"),
            })?;
        self.post(ControlKind::ConfigReply);
        Ok(())
    }

    /// Sets up MSI vector `vector` of the shadow device for the borrower's APIC `apic`:
    /// the borrower's MSI address and data are redirected through a window of the
    /// lender's adapter toward the borrower's interrupt range (one message); the device's
    /// MSI capability is written at the lender with the address and data it must use.
    pub fn setup_msi(
        &mut self,
        f: &mut Fabric,
        b: Borrowed,
        vector: u32,
        apic: u8,
    ) -> Result<MsiRoute, LendError> {
        let x = self.live(f, b)?;
        let (lender, borrower, lender_ntb, function) =
            (x.lender, x.borrower, x.lender_ntb, x.function);
        self.post(ControlKind::MsiSetup);
        let borrower_addr = MSI_WINDOW.start | (apic as u64) << 12;
        let data = vector;
        let r = Hosts::with(f, |hs, f| -> Result<_, HostError> {
            let w = hs.ntb_acquire_window(f, lender_ntb, borrower, borrower_addr, 4)?;
            match lender_reach(hs, f, lender, function, w.local, 4) {
                Ok((addr, lr)) => Ok((w, addr, lr)),
                Err(e) => {
                    hs.ntb_release_window(f, &w)?;
                    Err(e)
                }
            }
        });
        let (w, addr, lr) = r.map_err(|e| self.host_err(f, b.fdid, b.host, e))?;
        let rid = f.topo.node(function).rid;
        let mut cap = [0u8; 12];
        cap[0..4].copy_from_slice(&(addr as u32).to_le_bytes());
        cap[4..8].copy_from_slice(&((addr >> 32) as u32).to_le_bytes());
        cap[8..12].copy_from_slice(&data.to_le_bytes());
        f.config_write(lender, 0, rid, MSI_CAP + 4, &cap)
            .map_err(|e| LendError::ConfigFault {
                dev: self.label(b.fdid),
                why: format!("{e:?}"),
            })?;
        let route = MsiRoute {
            vector,
            addr,
            data,
            borrower_addr,
        };
        self.borrows
            .get_mut(&b.id)
            .expect("live")
            .msi
            .push((route, w, lr));
        Ok(route)
    }
}

pub(crate) fn perm(dir: DmaDirection) -> Perm {
    match dir {
        DmaDirection::ToDevice => Perm::READ,
        DmaDirection::FromDevice => Perm::WRITE,
        DmaDirection::Bidirectional => Perm::RW,
    }
}

enum SetUpError {
    Host(HostError),
    Lend(LendError),
}

impl From<HostError> for SetUpError {
    fn from(e: HostError) -> Self {
        SetUpError::Host(e)
    }
}

/// What a borrow programs: the device's requester entry on the lender's adapter, INTx
/// masked, the DMA window (or the fallback), the shadow BARs.
fn set_up(
    hs: &mut Hosts,
    f: &mut Fabric,
    b: &mut Borrow,
    window: u64,
    own_windows: bool,
) -> Result<(), SetUpError> {
    let rid = f.topo.node(b.function).rid;
    let e = hs.ntb_acquire_requester(f, b.lender_ntb, rid)?;
    b.requester = Some(e);
    // Legacy INTx masked at the lender: Command register, Interrupt Disable.
    let mut cmd = [0u8; 2];
    f.config_read(b.lender, 0, rid, 0x04, &mut cmd)
        .map_err(|e| SetUpError::Lend(LendError::Invalid(format!("config read faulted: {e:?}"))))?;
    let v = u16::from_le_bytes(cmd) | CMD_INTX_DISABLE;
    f.config_write(b.lender, 0, rid, 0x04, &v.to_le_bytes())
        .map_err(|e| {
            SetUpError::Lend(LendError::Invalid(format!("config write faulted: {e:?}")))
        })?;
    if f.topo.host(b.borrower).iommu {
        let proxied = e.proxy_on(f, b.borrower_ntb);
        let ws = f.topo.ntbs[b.lender_ntb.index()].window_size;
        let range = hs.iommu_reserve(f, b.borrower, proxied, window, u64::MAX, ws)?;
        let w = match hs.ntb_acquire_window(f, b.lender_ntb, b.borrower, range.start, range.len) {
            Ok(w) => w,
            Err(e) => {
                hs.iommu_unreserve(f, &range)?;
                return Err(e.into());
            }
        };
        let (device_base, lender) =
            match lender_reach(hs, f, b.lender, b.function, w.local, range.len) {
                Ok(x) => x,
                Err(e) => {
                    hs.ntb_release_window(f, &w)?;
                    hs.iommu_unreserve(f, &range)?;
                    return Err(e.into());
                }
            };
        b.dma = Some(DmaPath::Window {
            range,
            window: w,
            lender,
            device_base,
            alloc: RangeAllocator::new(range.start, range.end()),
        });
    } else {
        b.dma = Some(DmaPath::PerMapping);
    }
    let bars = f.topo.node(b.function).bars.clone();
    for bar in bars {
        if own_windows {
            let w = hs.ntb_acquire_window(f, b.borrower_ntb, b.lender, bar.addr, bar.size)?;
            b.shadow.push(ShadowBar {
                index: bar.index,
                size: bar.size,
                real: bar.addr,
                bus: w.local,
                mapping: ShadowMap::Window(w),
            });
            continue;
        }
        let m = hs.dma_map_single(
            f,
            Requester::Cpu {
                host: b.borrower,
                package: 0,
            },
            PhysAddr {
                host: b.lender,
                addr: bar.addr,
            },
            bar.size,
            DmaDirection::Bidirectional,
        )?;
        b.shadow.push(ShadowBar {
            index: bar.index,
            size: bar.size,
            real: bar.addr,
            bus: m.addr.0,
            mapping: ShadowMap::Dma(m),
        });
    }
    Ok(())
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

fn unmap_hold(
    hs: &mut Hosts,
    f: &mut Fabric,
    b: &mut Borrow,
    hold: MapHold,
) -> Result<(), HostError> {
    match hold {
        MapHold::Window { iova, bytes } => {
            if let Some(DmaPath::Window { range, alloc, .. }) = &mut b.dma {
                hs.iommu_unmap_at(f, range, iova)?;
                alloc.free(iova, bytes);
            }
            Ok(())
        }
        MapHold::Host(m) => hs.dma_unmap_single(f, &m),
        MapHold::Direct => Ok(()),
    }
}

/// Undoes what `set_up` and later calls programmed: a Function Level Reset first when
/// `reset` (a configuration write at the lender), then mappings, MSI windows, the DMA
/// window, shadow BARs and the requester entry.
fn tear_down(hs: &mut Hosts, f: &mut Fabric, b: &mut Borrow, reset: bool) -> Result<(), HostError> {
    if reset {
        let rid = f.topo.node(b.function).rid;
        f.config_write(b.lender, 0, rid, PCIE_DEVCTL, &DEVCTL_FLR.to_le_bytes())
            .map_err(|e| HostError::Invalid(format!("Function Level Reset faulted: {e:?}")))?;
    }
    for (_, hold) in std::mem::take(&mut b.maps) {
        unmap_hold(hs, f, b, hold)?;
    }
    for (_, w, lr) in std::mem::take(&mut b.msi) {
        if let Some(r) = lr {
            hs.iommu_unreserve(f, &r)?;
        }
        hs.ntb_release_window(f, &w)?;
    }
    if let Some(DmaPath::Window {
        range,
        window,
        lender,
        ..
    }) = b.dma.take()
    {
        if let Some(r) = lender {
            hs.iommu_unreserve(f, &r)?;
        }
        hs.ntb_release_window(f, &window)?;
        hs.iommu_unreserve(f, &range)?;
    }
    for s in std::mem::take(&mut b.shadow) {
        match s.mapping {
            ShadowMap::Dma(m) => hs.dma_unmap_single(f, &m)?,
            ShadowMap::Window(w) => hs.ntb_release_window(f, &w)?,
        }
    }
    if let Some(e) = b.requester.take() {
        hs.ntb_release_requester(f, &e)?;
    }
    Ok(())
}
