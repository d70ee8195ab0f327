//! IOMMU as finite hardware: per-host domains with 4 KiB page tables, requester IDs
//! attached to domains, map/unmap with permission bits, translation with faults.

use rustc_hash::FxHashMap;

use crate::error::FabricError;
use crate::page_table::PageTable;
use crate::topology::Rid;

pub const PAGE: u64 = 4096;

pub use crate::ids::DomainId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perm {
    pub read: bool,
    pub write: bool,
}

impl Perm {
    pub const RW: Perm = Perm {
        read: true,
        write: true,
    };
    pub const READ: Perm = Perm {
        read: true,
        write: false,
    };
    pub const WRITE: Perm = Perm {
        read: false,
        write: true,
    };
}

#[derive(Clone, Copy, Debug)]
struct Pte {
    pfn: u64,
    perm: Perm,
}

#[derive(Clone, Debug, Default)]
struct Domain {
    pages: PageTable<Pte>,
}

/// Why a translation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IommuMiss {
    NoDomain,
    NotMapped(DomainId),
    Permission(DomainId),
}

/// One host's IOMMU (all its remapping units share the tables here).
#[derive(Clone, Debug, Default)]
pub struct Iommu {
    domains: Vec<Domain>,
    attached: FxHashMap<Rid, DomainId>,
}

impl Iommu {
    pub fn create_domain(&mut self) -> DomainId {
        self.domains.push(Domain::default());
        DomainId::from_index(self.domains.len() - 1)
    }

    fn domain_mut(&mut self, d: DomainId) -> Result<&mut Domain, FabricError> {
        self.domains
            .get_mut(d.index())
            .ok_or_else(|| FabricError::Invalid(format!("no IOMMU domain {d}")))
    }

    /// Attaches a requester ID to a domain (replacing an earlier attachment).
    pub fn attach(&mut self, rid: Rid, d: DomainId) -> Result<(), FabricError> {
        self.domain_mut(d)?;
        self.attached.insert(rid, d);
        Ok(())
    }

    pub fn detach(&mut self, rid: Rid) {
        self.attached.remove(&rid);
    }

    pub fn domain_of(&self, rid: Rid) -> Option<DomainId> {
        self.attached.get(&rid).copied()
    }

    /// Maps `len` bytes at `iova` to `phys`; both page-aligned, no remapping of a mapped page.
    pub fn map(
        &mut self,
        d: DomainId,
        iova: u64,
        phys: u64,
        len: u64,
        perm: Perm,
    ) -> Result<(), FabricError> {
        if !iova.is_multiple_of(PAGE)
            || !phys.is_multiple_of(PAGE)
            || !len.is_multiple_of(PAGE)
            || len == 0
        {
            return Err(FabricError::Invalid(format!(
                "IOMMU map needs 4 KiB-aligned iova, phys and length (got iova {iova:#x}, phys {phys:#x}, len {len:#x})"
            )));
        }
        let dom = self.domain_mut(d)?;
        let (first, end) = (iova / PAGE, (iova + len) / PAGE);
        if let Some(p) = dom.pages.first_present(first, end) {
            return Err(FabricError::Invalid(format!(
                "IOVA {:#x} is already mapped in domain {d}",
                p * PAGE
            )));
        }
        let pfn = phys / PAGE;
        dom.pages.insert_run(first, end, |p| Pte {
            pfn: pfn + (p - first),
            perm,
        });
        Ok(())
    }

    pub fn unmap(&mut self, d: DomainId, iova: u64, len: u64) -> Result<(), FabricError> {
        let dom = self.domain_mut(d)?;
        let first = iova / PAGE;
        dom.pages
            .remove_run(first, first + len.div_ceil(PAGE))
            .map_err(|p| {
                FabricError::Invalid(format!(
                    "IOVA {:#x} is not mapped in domain {d}",
                    iova + (p - first) * PAGE
                ))
            })
    }

    /// Translates one access that does not cross a page.
    #[inline]
    pub fn translate(&self, rid: Rid, iova: u64, write: bool) -> Result<u64, IommuMiss> {
        let d = *self.attached.get(&rid).ok_or(IommuMiss::NoDomain)?;
        let pte = self.domains[d.index()]
            .pages
            .get(iova / PAGE)
            .ok_or(IommuMiss::NotMapped(d))?;
        if (write && !pte.perm.write) || (!write && !pte.perm.read) {
            return Err(IommuMiss::Permission(d));
        }
        Ok(pte.pfn * PAGE + iova % PAGE)
    }

    pub fn mapped_pages(&self, d: DomainId) -> usize {
        self.domains.get(d.index()).map_or(0, |x| x.pages.len())
    }
}
