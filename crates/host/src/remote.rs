//! Calls for systems that set up their own DMA paths across hosts (SmartIO's Device
//! Lending): reserve one contiguous IOVA range for a requester and map pages at chosen
//! IOVAs inside it, acquire and release an NTB address-LUT window toward a far host's
//! address and a requester-ID entry, with the same reference counting as the DMA API's.
//! The host layer stays the only code that programs NTB and IOMMU state: callers hold
//! the handles these calls return and give them back.

use fabric::iommu::{Perm, PAGE};
use fabric::ntb::proxy_rid;
use fabric::{CableEnd, Fabric, HostId, NtbId, Rid};

use crate::dma::{Hosts, NumaNode, PhysAddr};
use crate::error::HostError;

/// An IOVA range reserved whole in `rid`'s domain of `host`'s IOMMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IovaRange {
    pub host: HostId,
    pub rid: Rid,
    pub start: u64,
    pub len: u64,
}

impl IovaRange {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// A requester-ID LUT entry held for `rid` on `ntb`; `proxy` is the requester ID its TLPs
/// carry out of `far` (the adapter its windows lead to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequesterEntry {
    pub ntb: NtbId,
    pub rid: Rid,
    pub index: u8,
    /// False for an entry already there and not ours (a CPU's reserved entry).
    held: bool,
}

impl RequesterEntry {
    /// The requester ID under which TLPs through this entry appear behind `far_ntb`.
    pub fn proxy_on(&self, f: &Fabric, far_ntb: NtbId) -> Rid {
        proxy_rid(
            f.topo.node(f.topo.ntbs[far_ntb.index()].fn_node).rid,
            self.index,
        )
    }
}

/// Address-LUT window(s) held on `ntb`: `local` is the bus address, on the adapter's own
/// host, of the far address asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NtbWindow {
    pub ntb: NtbId,
    pub dst_host: HostId,
    pub far: u64,
    pub len: u64,
    pub local: u64,
    first: u32,
}

/// The adapter pair joining two hosts: the first of `src`'s adapters (in order) that
/// reaches one of `dst`'s, with the first such far adapter — the pair the DMA API uses.
pub fn ntb_pair(f: &Fabric, src: HostId, dst: HostId) -> Option<(NtbId, NtbId)> {
    f.topo.host(src).ntbs.iter().find_map(|&s| {
        f.topo
            .host(dst)
            .ntbs
            .iter()
            .copied()
            .find(|&d| f.topo.ntb_reaches(s, d))
            .map(|d| (s, d))
    })
}

impl Hosts {
    /// Reserves `len` bytes (rounded up to pages) of IOVA space below `limit` in `rid`'s
    /// domain of `host`'s IOMMU, aligned to `align` (a power of two ≥ 4 KiB). Nothing is
    /// mapped yet: `iommu_map_at` maps pages inside it, without touching anything else.
    pub fn iommu_reserve(
        &mut self,
        f: &mut Fabric,
        host: HostId,
        rid: Rid,
        len: u64,
        limit: u64,
        align: u64,
    ) -> Result<IovaRange, HostError> {
        if !f.topo.hosts.get(host.index()).is_some_and(|h| h.iommu) {
            return Err(HostError::Invalid(format!(
                "host {host} has no IOMMU to reserve IOVA space in"
            )));
        }
        let len = len.max(1).div_ceil(PAGE) * PAGE;
        let start = self.iommu[host.index()].reserve(f, rid, len, limit, align.max(PAGE))?;
        self.log.push(format!(
            "reserved IOVA {start:#x}..{:#x} in {}'s IOMMU for requester {rid}",
            start + len,
            f.topo.host(host).name
        ));
        Ok(IovaRange {
            host,
            rid,
            start,
            len,
        })
    }

    /// Reserves exactly `[start, start+len)` (page-aligned) in `rid`'s domain of `host`'s
    /// IOMMU: IOVAs at fixed places, as MDEV mirrors a guest's physical addresses. Refused
    /// (`Exhausted`) when any of it is taken; unreserved like `iommu_reserve`'s ranges.
    pub fn iommu_reserve_at(
        &mut self,
        f: &mut Fabric,
        host: HostId,
        rid: Rid,
        start: u64,
        len: u64,
    ) -> Result<IovaRange, HostError> {
        if !f.topo.hosts.get(host.index()).is_some_and(|h| h.iommu) {
            return Err(HostError::Invalid(format!(
                "host {host} has no IOMMU to reserve IOVA space in"
            )));
        }
        if !start.is_multiple_of(PAGE) || !len.is_multiple_of(PAGE) || len == 0 {
            return Err(HostError::Invalid(format!(
                "a fixed IOVA range needs page-aligned start and length (got {start:#x} + {len:#x})"
            )));
        }
        self.iommu[host.index()].reserve_at(f, rid, start, len)?;
        self.log.push(format!(
            "reserved IOVA {start:#x}..{:#x} in {}'s IOMMU for requester {rid}",
            start + len,
            f.topo.host(host).name
        ));
        Ok(IovaRange {
            host,
            rid,
            start,
            len,
        })
    }

    /// Allocates `len` bytes (page-rounded) of RAM on `node`, aligned to `align` (a power
    /// of two, at least a page), mapped for no one: memory a hypervisor backs a guest with.
    /// Top down, as `dma_alloc_coherent`'s. Give it back with `ram_free`.
    pub fn ram_alloc(
        &mut self,
        f: &Fabric,
        node: NumaNode,
        len: u64,
        align: u64,
    ) -> Result<PhysAddr, HostError> {
        let name = f
            .topo
            .hosts
            .get(node.host.index())
            .map(|h| h.name.clone())
            .ok_or_else(|| HostError::Invalid(format!("no host {}", node.host)))?;
        let allocs = self.ram[node.host.index()]
            .get_mut(node.node as usize)
            .ok_or_else(|| {
                HostError::Invalid(format!("host `{name}` has no NUMA node {}", node.node))
            })?;
        if len == 0 || !align.is_power_of_two() || align < PAGE {
            return Err(HostError::Invalid(format!(
                "RAM allocation of {len:#x} bytes aligned to {align:#x}: needs a byte and a power-of-two alignment of at least a page"
            )));
        }
        let bytes = len.div_ceil(PAGE) * PAGE;
        let at = allocs
            .iter_mut()
            .find_map(|a| a.alloc_aligned(bytes, u64::MAX, align))
            .ok_or_else(|| HostError::Exhausted {
                what: format!("RAM of {name} node {}", node.node),
                len: bytes,
                below: format!("aligned to {align:#x} in any of its regions"),
            })?;
        Ok(PhysAddr {
            host: node.host,
            addr: at,
        })
    }

    /// Gives back what `ram_alloc` allocated (`len` as asked).
    pub fn ram_free(&mut self, at: PhysAddr, len: u64) -> Result<(), HostError> {
        let bytes = len.div_ceil(PAGE) * PAGE;
        let a = self
            .ram
            .get_mut(at.host.index())
            .into_iter()
            .flatten()
            .flatten()
            .find(|a| {
                let (s, e) = a.range();
                s <= at.addr && at.addr + bytes <= e
            })
            .ok_or_else(|| {
                HostError::Invalid(format!(
                    "{:#x} + {bytes:#x} is in no RAM region of host {}",
                    at.addr, at.host
                ))
            })?;
        a.free(at.addr, bytes);
        Ok(())
    }

    /// Maps `len` bytes at `iova` (inside `r`) onto `phys`, page by page: `iova` and
    /// `phys` must share their offset in the page. Returns the page-aligned IOVA mapped,
    /// the handle for `iommu_unmap_at`.
    pub fn iommu_map_at(
        &mut self,
        f: &mut Fabric,
        r: &IovaRange,
        iova: u64,
        phys: u64,
        len: u64,
        perm: Perm,
    ) -> Result<u64, HostError> {
        if iova % PAGE != phys % PAGE || len == 0 {
            return Err(HostError::Invalid(format!(
                "IOVA {iova:#x} and bus address {phys:#x} differ in their page offset (or nothing to map)"
            )));
        }
        let (i0, p0) = (iova - iova % PAGE, phys - phys % PAGE);
        let bytes = (iova % PAGE + len).div_ceil(PAGE) * PAGE;
        self.iommu[r.host.index()].map_at(f, r.rid, i0, p0, bytes, perm)?;
        Ok(i0)
    }

    /// Unmaps what `iommu_map_at` mapped at page-aligned `iova`.
    pub fn iommu_unmap_at(
        &mut self,
        f: &mut Fabric,
        r: &IovaRange,
        iova: u64,
    ) -> Result<(), HostError> {
        self.iommu[r.host.index()].unmap_at(f, r.rid, iova)
    }

    /// Gives a reserved range back, unmapping whatever is still mapped inside it.
    pub fn iommu_unreserve(&mut self, f: &mut Fabric, r: &IovaRange) -> Result<(), HostError> {
        self.iommu[r.host.index()].unreserve(f, r.rid, r.start)
    }

    /// Lets `rid` send through `ntb` (an entry of its requester-ID LUT, shared and
    /// reference-counted with the DMA API's). A full LUT is `FabricError::Exhausted`.
    pub fn ntb_acquire_requester(
        &mut self,
        f: &mut Fabric,
        ntb: NtbId,
        rid: Rid,
    ) -> Result<RequesterEntry, HostError> {
        let (index, held) = self.ntb[ntb.index()].acquire_requester(f, ntb, rid, &mut self.log)?;
        Ok(RequesterEntry {
            ntb,
            rid,
            index,
            held,
        })
    }

    pub fn ntb_release_requester(
        &mut self,
        f: &mut Fabric,
        e: &RequesterEntry,
    ) -> Result<(), HostError> {
        if e.held {
            self.ntb[e.ntb.index()].release_requester(f, e.ntb, e.rid)?;
        }
        Ok(())
    }

    /// Makes `[far, far+len)` of `dst_host` reachable through `ntb`'s address LUT (a held
    /// window that covers it is shared). A full LUT is `FabricError::Exhausted`.
    pub fn ntb_acquire_window(
        &mut self,
        f: &mut Fabric,
        ntb: NtbId,
        dst_host: HostId,
        far: u64,
        len: u64,
    ) -> Result<NtbWindow, HostError> {
        if len == 0 {
            return Err(HostError::Invalid(
                "an NTB window needs at least one byte".into(),
            ));
        }
        let (local, first) =
            self.ntb[ntb.index()].acquire_window(f, ntb, dst_host, far, len, &mut self.log)?;
        Ok(NtbWindow {
            ntb,
            dst_host,
            far,
            len,
            local,
            first,
        })
    }

    pub fn ntb_release_window(&mut self, f: &mut Fabric, w: &NtbWindow) -> Result<(), HostError> {
        self.ntb[w.ntb.index()].release_window(f, w.first)
    }

    /// Requester-ID LUT entries of `ntb` in use (the CPUs' reserved ones included) and
    /// its capacity and reserved count, for errors that say how full it is.
    pub fn ntb_requester_use(f: &Fabric, ntb: NtbId) -> (usize, usize, usize, String) {
        let st = f.ntb_state(ntb);
        (
            st.rids.len() - st.free_rids(),
            st.rids.len(),
            st.reserved as usize,
            f.topo.cable_end_label(CableEnd::Ntb(ntb)),
        )
    }
}
