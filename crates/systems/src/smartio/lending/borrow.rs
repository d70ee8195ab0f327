//! A borrow's life: borrowed (requester entry, INTx masked, DMA window, shadow BARs
//! set up), returned with a Function Level Reset, revoked, reclaimed when a host vanishes.

use std::collections::BTreeMap;

use fabric::{Fabric, HostId, Requester};
use host::alloc::RangeAllocator;
use host::{ntb_pair, DmaDirection, HostError, Hosts, PhysAddr};

use super::{
    lender_reach, Borrow, BorrowOptions, Borrowed, Cluster, DmaPath, MapHold, ShadowBar, ShadowMap,
    CMD_INTX_DISABLE, DEVCTL_FLR, PCIE_DEVCTL,
};
use crate::smartio::agent::{ControlKind, PeerEntry};
use crate::smartio::api::{RegisteredRequester, SegmentId};
use crate::smartio::pool::{Availability, BorrowId, Fdid, Lease};
use crate::smartio::LendError;

impl Cluster {
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

pub(super) fn unmap_hold(
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
