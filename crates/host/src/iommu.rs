//! The IOMMU driver of one host: a domain per device (requester ID), an IOVA allocator
//! per domain, and map/unmap through the fabric's IOMMU tables. Two policies: identity
//! (IOVA = bus address, what the built-in experiments assume) and translated (IOVAs
//! allocated top-down below the device's DMA mask, as Linux's DMA API does).

use fabric::iommu::{DomainId, Perm, PAGE};
use fabric::page_table::PageTable;
use fabric::{Fabric, HostId, Rid, MSI_WINDOW};
use rustc_hash::FxHashMap;

use crate::alloc::RangeAllocator;
use crate::error::HostError;

/// How a host's IOMMU driver picks IOVAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IommuPolicy {
    /// IOVA = bus address (a passthrough-like identity domain); mapped pages are shared
    /// and reference-counted.
    #[default]
    Identity,
    /// IOVAs come from the domain's allocator; every mapping gets its own range.
    Translated,
}

/// Default IOVA space: from the second page (no DMA address 0) to 48 bits (4-level
/// page tables), the MSI window excluded because device writes there are interrupts.
pub const DEFAULT_IOVA_RANGE: (u64, u64) = (PAGE, 1 << 48);

#[derive(Clone, Debug)]
struct Domain {
    id: DomainId,
    iova: RangeAllocator,
    /// Identity-mapped pages (page number → mappings using it).
    identity: PageTable<u32>,
    /// IOVA ranges reserved whole for a caller that maps pages inside them itself (a
    /// borrowed device's DMA window): start → (length, mapped spans start → length).
    reserved: std::collections::BTreeMap<u64, (u64, std::collections::BTreeMap<u64, u64>)>,
}

/// What one mapping holds in a domain, to be given back on unmap.
#[derive(Clone, Debug)]
pub(crate) enum IommuHold {
    /// Page-aligned spans `(start, bytes)` mapped one-to-one.
    Identity { rid: Rid, spans: Vec<(u64, u64)> },
    /// `bytes` of IOVA space from `iova`.
    Translated { rid: Rid, iova: u64, bytes: u64 },
}

#[derive(Clone, Debug)]
pub struct IommuDriver {
    host: HostId,
    policy: IommuPolicy,
    iova_range: (u64, u64),
    domains: FxHashMap<Rid, Domain>,
    /// Live mappings, so the policy cannot change under them.
    live: usize,
}

impl IommuDriver {
    pub fn new(host: HostId) -> IommuDriver {
        IommuDriver {
            host,
            policy: IommuPolicy::Identity,
            iova_range: DEFAULT_IOVA_RANGE,
            domains: FxHashMap::default(),
            live: 0,
        }
    }

    pub fn policy(&self) -> IommuPolicy {
        self.policy
    }

    pub fn iova_range(&self) -> (u64, u64) {
        self.iova_range
    }

    /// Sets the policy and the IOVA range `[start, end)` for domains made from now on;
    /// refused while mappings are live (identity pages would sit in the allocator's space).
    pub fn configure(
        &mut self,
        policy: IommuPolicy,
        start: u64,
        end: u64,
    ) -> Result<(), HostError> {
        if self.live > 0 {
            return Err(HostError::Invalid(format!(
                "host {}'s IOMMU driver has {} live mapping(s): unmap them before changing its policy",
                self.host, self.live
            )));
        }
        if end <= start || end - start < PAGE {
            return Err(HostError::Invalid(format!(
                "IOVA range {start:#x}..{end:#x} holds no page"
            )));
        }
        self.policy = policy;
        self.iova_range = (start, end);
        // Domains keep their tables (all empty now) but take the new IOVA space.
        for d in self.domains.values_mut() {
            d.iova = new_space(self.iova_range);
        }
        Ok(())
    }

    /// The domain of a requester (made and attached on first use), as the fabric knows it.
    pub fn domain_of(&self, rid: Rid) -> Option<DomainId> {
        self.domains.get(&rid).map(|d| d.id)
    }

    /// Free IOVA bytes in a requester's domain (`None` before its first mapping).
    pub fn free_iova(&self, rid: Rid) -> Option<u64> {
        self.domains.get(&rid).map(|d| d.iova.free_bytes())
    }

    fn domain(&mut self, f: &mut Fabric, rid: Rid) -> Result<&mut Domain, HostError> {
        if !self.domains.contains_key(&rid) {
            // A domain the hardware already has for this requester is adopted.
            let id = match f.iommu(self.host).domain_of(rid) {
                Some(d) => d,
                None => {
                    let d = f.iommu_create_domain(self.host);
                    f.iommu_attach(self.host, rid, d)?;
                    d
                }
            };
            self.domains.insert(
                rid,
                Domain {
                    id,
                    iova: new_space(self.iova_range),
                    identity: PageTable::default(),
                    reserved: Default::default(),
                },
            );
        }
        Ok(self.domains.get_mut(&rid).expect("inserted above"))
    }

    /// Reserves `len` bytes (a page multiple) of `rid`'s IOVA space below `limit`, aligned
    /// to `align`, for the caller to map pages in with `map_at`. Counts as a live mapping
    /// until `unreserve`.
    pub(crate) fn reserve(
        &mut self,
        f: &mut Fabric,
        rid: Rid,
        len: u64,
        limit: u64,
        align: u64,
    ) -> Result<u64, HostError> {
        let hname = f.topo.host(self.host).name.clone();
        let d = self.domain(f, rid)?;
        let did = d.id;
        let at = d
            .iova
            .alloc_aligned(len, limit, align)
            .ok_or_else(|| HostError::Exhausted {
                what: format!("IOVA space of {hname}'s IOMMU domain {did} (requester {rid})"),
                len,
                below: format!("below {limit:#x} aligned to {align:#x}"),
            })?;
        d.reserved.insert(at, (len, Default::default()));
        self.live += 1;
        Ok(at)
    }

    /// Reserves exactly `[start, start+len)` (page multiples) of `rid`'s IOVA space, for a
    /// caller that must have IOVAs at fixed places (MDEV mirroring guest-physical
    /// addresses). Refused if any of it is allocated or reserved. Counts as a live mapping
    /// until `unreserve`.
    pub(crate) fn reserve_at(
        &mut self,
        f: &mut Fabric,
        rid: Rid,
        start: u64,
        len: u64,
    ) -> Result<(), HostError> {
        let hname = f.topo.host(self.host).name.clone();
        let d = self.domain(f, rid)?;
        let did = d.id;
        let end = start
            .checked_add(len)
            .ok_or_else(|| HostError::Invalid(format!("IOVA {start:#x} + {len:#x} overflows")))?;
        let overlaps = d
            .reserved
            .range(..end)
            .next_back()
            .is_some_and(|(&s, &(l, _))| s + l > start);
        if overlaps || !d.iova.take(start, len) {
            return Err(HostError::Exhausted {
                what: format!("IOVA space of {hname}'s IOMMU domain {did} (requester {rid})"),
                len,
                below: format!("at {start:#x}..{end:#x}: part of it is in use"),
            });
        }
        d.reserved.insert(start, (len, Default::default()));
        self.live += 1;
        Ok(())
    }

    /// The reservation of `rid` holding `[iova, iova+len)`, by its start.
    fn reservation_of(
        &mut self,
        rid: Rid,
        iova: u64,
        len: u64,
    ) -> Result<(&mut Domain, u64), HostError> {
        let host = self.host;
        let d = self.domains.get_mut(&rid).ok_or_else(|| {
            HostError::Invalid(format!("requester {rid} has no domain on host {host}"))
        })?;
        let start = d
            .reserved
            .range(..=iova)
            .next_back()
            .filter(|(&s, &(l, _))| iova + len <= s + l)
            .map(|(&s, _)| s)
            .ok_or_else(|| {
                HostError::Invalid(format!(
                    "IOVA {iova:#x} + {len:#x} is not inside a range reserved for requester {rid} on host {host}"
                ))
            })?;
        Ok((d, start))
    }

    /// Maps `[iova, iova+len)` (inside a reservation of `rid`) onto bus address `phys`;
    /// all three page-aligned.
    pub(crate) fn map_at(
        &mut self,
        f: &mut Fabric,
        rid: Rid,
        iova: u64,
        phys: u64,
        len: u64,
        perm: Perm,
    ) -> Result<(), HostError> {
        let host = self.host;
        let (d, start) = self.reservation_of(rid, iova, len)?;
        f.iommu_map(host, d.id, iova, phys, len, perm)?;
        d.reserved
            .get_mut(&start)
            .expect("found above")
            .1
            .insert(iova, len);
        Ok(())
    }

    /// Unmaps a span `map_at` mapped (exactly it).
    pub(crate) fn unmap_at(
        &mut self,
        f: &mut Fabric,
        rid: Rid,
        iova: u64,
    ) -> Result<(), HostError> {
        let host = self.host;
        let (d, start) = self.reservation_of(rid, iova, 1)?;
        let spans = &mut d.reserved.get_mut(&start).expect("found above").1;
        let len = spans.remove(&iova).ok_or_else(|| {
            HostError::Invalid(format!(
                "nothing is mapped at IOVA {iova:#x} for requester {rid}"
            ))
        })?;
        f.iommu_unmap(host, d.id, iova, len)?;
        Ok(())
    }

    /// Gives a reservation back, unmapping what is still mapped in it.
    pub(crate) fn unreserve(
        &mut self,
        f: &mut Fabric,
        rid: Rid,
        start: u64,
    ) -> Result<(), HostError> {
        let host = self.host;
        let d = self.domains.get_mut(&rid).ok_or_else(|| {
            HostError::Invalid(format!("requester {rid} has no domain on host {host}"))
        })?;
        let (len, spans) = d.reserved.remove(&start).ok_or_else(|| {
            HostError::Invalid(format!(
                "no IOVA range reserved at {start:#x} for requester {rid}"
            ))
        })?;
        for (iova, l) in spans {
            f.iommu_unmap(host, d.id, iova, l)?;
        }
        d.iova.free(start, len);
        self.live -= 1;
        Ok(())
    }

    /// Pages mapped through `map_at` in `rid`'s reservations.
    pub fn reserved_pages_mapped(&self, rid: Rid) -> u64 {
        self.domains.get(&rid).map_or(0, |d| {
            d.reserved
                .values()
                .flat_map(|(_, s)| s.values())
                .map(|l| l / PAGE)
                .sum()
        })
    }

    /// Maps the pages under each bus span `(addr, len)` for `rid`; returns the DMA address
    /// of each span's first byte. Translated: one IOVA range below `limit` for all spans,
    /// in order, so page-aligned spans come out contiguous.
    pub(crate) fn map(
        &mut self,
        f: &mut Fabric,
        rid: Rid,
        spans: &[(u64, u64)],
        perm: Perm,
        limit: u64,
        log: &mut Vec<String>,
    ) -> Result<(Vec<u64>, IommuHold), HostError> {
        let host = self.host;
        let hname = f.topo.host(host).name.clone();
        let pages: Vec<(u64, u64)> = spans
            .iter()
            .map(|&(a, l)| (a - a % PAGE, (a % PAGE + l).div_ceil(PAGE) * PAGE))
            .collect();
        let policy = self.policy;
        let d = self.domain(f, rid)?;
        let did = d.id;
        match policy {
            IommuPolicy::Identity => {
                let mut hold = IommuHold::Identity {
                    rid,
                    spans: Vec::new(),
                };
                for &(start, bytes) in &pages {
                    if let Err(e) = identity_span(f, host, d, start, bytes, rid, &hname, log) {
                        self.undo(f, &hold)?;
                        return Err(e);
                    }
                    if let IommuHold::Identity { spans, .. } = &mut hold {
                        spans.push((start, bytes));
                    }
                }
                self.live += 1;
                Ok((spans.iter().map(|s| s.0).collect(), hold))
            }
            IommuPolicy::Translated => {
                let total: u64 = pages.iter().map(|p| p.1).sum();
                let iova = d
                    .iova
                    .alloc(total, limit)
                    .ok_or_else(|| HostError::Exhausted {
                        what: format!(
                            "IOVA space of {hname}'s IOMMU domain {did} (requester {rid})"
                        ),
                        len: total,
                        below: format!("below {limit:#x}"),
                    })?;
                let mut at = iova;
                let mut dma = Vec::with_capacity(spans.len());
                for (&(start, bytes), &(a, _)) in pages.iter().zip(spans) {
                    if let Err(e) = f.iommu_map(host, did, at, start, bytes, perm) {
                        // Undo the spans mapped so far, then give the IOVAs back.
                        if at > iova {
                            f.iommu_unmap(host, did, iova, at - iova)?;
                        }
                        d.iova.free(iova, total);
                        return Err(e.into());
                    }
                    log.push(format!(
                        "mapped IOVA {at:#x} -> {start:#x}{} in {hname}'s IOMMU for requester {rid}",
                        pages_note(bytes)
                    ));
                    dma.push(at + a % PAGE);
                    at += bytes;
                }
                self.live += 1;
                Ok((
                    dma,
                    IommuHold::Translated {
                        rid,
                        iova,
                        bytes: total,
                    },
                ))
            }
        }
    }

    /// Gives back what a mapping held: identity pages whose last user goes are unmapped,
    /// translated ranges unmapped and their IOVAs freed.
    pub(crate) fn release(&mut self, f: &mut Fabric, hold: &IommuHold) -> Result<(), HostError> {
        self.undo(f, hold)?;
        self.live -= 1;
        Ok(())
    }

    fn undo(&mut self, f: &mut Fabric, hold: &IommuHold) -> Result<(), HostError> {
        let host = self.host;
        let rid = match hold {
            IommuHold::Identity { rid, .. } | IommuHold::Translated { rid, .. } => *rid,
        };
        let d = self.domains.get_mut(&rid).ok_or_else(|| {
            HostError::Invalid(format!("requester {rid} has no domain on host {host}"))
        })?;
        match hold {
            IommuHold::Identity { spans, .. } => {
                for &(start, bytes) in spans {
                    release_identity_span(f, host, d, start / PAGE, (start + bytes) / PAGE)?;
                }
            }
            IommuHold::Translated { iova, bytes, .. } => {
                f.iommu_unmap(host, d.id, *iova, *bytes)?;
                d.iova.free(*iova, *bytes);
            }
        }
        Ok(())
    }
}

fn new_space((start, end): (u64, u64)) -> RangeAllocator {
    let mut a = RangeAllocator::new(start, end);
    a.reserve(MSI_WINDOW.start, MSI_WINDOW.end);
    a
}

fn pages_note(bytes: u64) -> String {
    if bytes > PAGE {
        format!(" ({} pages)", bytes / PAGE)
    } else {
        String::new()
    }
}

/// Identity-maps the pages of `[start, start+bytes)` not mapped yet (runs of them at a
/// time) and counts one more user of each.
#[allow(clippy::too_many_arguments)]
fn identity_span(
    f: &mut Fabric,
    host: HostId,
    d: &mut Domain,
    start: u64,
    bytes: u64,
    rid: Rid,
    hname: &str,
    log: &mut Vec<String>,
) -> Result<(), HostError> {
    let (first, end) = (start / PAGE, (start + bytes) / PAGE);
    let mut p = first;
    while p < end {
        if d.identity.contains(p) {
            p += 1;
            continue;
        }
        let run = d.identity.absent_run(p, end);
        if let Err(e) = f.iommu_map(host, d.id, p * PAGE, p * PAGE, run * PAGE, Perm::RW) {
            // Pages counted so far in this span go back.
            for q in first..p {
                release_identity_page(f, host, d, q)?;
            }
            return Err(e.into());
        }
        log.push(format!(
            "mapped IOVA {:#x} -> {:#x}{} in {hname}'s IOMMU for requester {rid}",
            p * PAGE,
            p * PAGE,
            pages_note(run * PAGE)
        ));
        d.identity.insert_run(p, p + run, |_| 0);
        p += run;
    }
    for q in first..end {
        *d.identity.get_mut(q).expect("mapped above") += 1;
    }
    Ok(())
}

fn release_identity_page(
    f: &mut Fabric,
    host: HostId,
    d: &mut Domain,
    q: u64,
) -> Result<(), HostError> {
    if d.identity.get(q) == Some(&0) {
        d.identity.remove(q);
        f.iommu_unmap(host, d.id, q * PAGE, PAGE)?;
    }
    Ok(())
}

/// Counts one user fewer of each identity page of `[first, end)`; runs of pages whose last
/// user went are unmapped together.
fn release_identity_span(
    f: &mut Fabric,
    host: HostId,
    d: &mut Domain,
    first: u64,
    end: u64,
) -> Result<(), HostError> {
    let mut unused_from = None;
    for p in first..end {
        let Some(refs) = d.identity.get_mut(p) else {
            if let Some(s) = unused_from {
                f.iommu_unmap(host, d.id, s * PAGE, (p - s) * PAGE)?;
            }
            return Err(HostError::Invalid(format!(
                "page {:#x} is not identity-mapped",
                p * PAGE
            )));
        };
        *refs -= 1;
        if *refs == 0 {
            d.identity.remove(p);
            unused_from.get_or_insert(p);
        } else if let Some(s) = unused_from.take() {
            f.iommu_unmap(host, d.id, s * PAGE, (p - s) * PAGE)?;
        }
    }
    if let Some(s) = unused_from {
        f.iommu_unmap(host, d.id, s * PAGE, (end - s) * PAGE)?;
    }
    Ok(())
}
