//! A Linux-like DMA API over every host of a fabric: `dma_map_single`, `dma_map_sg`,
//! `dma_alloc_coherent` and their unmaps, DMA masks honoured. Behind it the IOMMU driver
//! of each host and the NTB driver of each adapter: a buffer in another host is reached
//! through an address-LUT window and a requester-ID entry, with the far host's IOMMU
//! mapped for the proxied requester ID. All of it is undone on unmap.

use fabric::iommu::{Perm, PAGE};
use fabric::ntb::proxy_rid;
use fabric::{Fabric, HostId, NodeKind, NtbId, Owner, Requester, Rid, Topology};
use rustc_hash::FxHashMap;

use crate::alloc::RangeAllocator;
use crate::error::HostError;
use crate::iommu::{IommuDriver, IommuHold, IommuPolicy};
use crate::ntb::NtbDriver;

/// An address a device puts on the bus: an IOVA with the IOMMU on, else a bus address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DmaAddr(pub u64);

impl std::fmt::Display for DmaAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// An address in one host's map: RAM (host-physical) or a BAR (bus address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysAddr {
    pub host: HostId,
    pub addr: u64,
}

/// A NUMA node of a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumaNode {
    pub host: HostId,
    pub node: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaDirection {
    /// The device reads the buffer.
    ToDevice,
    /// The device writes the buffer.
    FromDevice,
    Bidirectional,
}

impl DmaDirection {
    fn perm(self) -> Perm {
        match self {
            DmaDirection::ToDevice => Perm::READ,
            DmaDirection::FromDevice => Perm::WRITE,
            DmaDirection::Bidirectional => Perm::RW,
        }
    }
}

pub type MappingId = u64;

/// A mapped buffer: the DMA address the device uses for its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaMapping {
    pub id: MappingId,
    pub addr: DmaAddr,
    pub len: u64,
}

/// A mapped scatter-gather list: DMA segments, contiguous pieces merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SgMapping {
    pub id: MappingId,
    pub segments: Vec<(DmaAddr, u64)>,
}

/// A coherent buffer: host RAM on a node, mapped for a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coherent {
    pub mapping: DmaMapping,
    pub phys: PhysAddr,
    pub node: NumaNode,
}

/// What a mapping holds, released in reverse order on unmap.
#[derive(Clone, Debug)]
enum Hold {
    Requester { ntb: NtbId, rid: Rid },
    Window { ntb: NtbId, first: u32 },
    Iommu { host: HostId, hold: IommuHold },
    Ram { node: NumaNode, at: u64, bytes: u64 },
}

/// The host layer's state for every host of one fabric: IOMMU drivers, NTB drivers,
/// RAM allocators, live mappings, and a log of what was programmed.
#[derive(Clone, Debug)]
pub struct Hosts {
    pub(crate) iommu: Vec<IommuDriver>,
    pub(crate) ntb: Vec<NtbDriver>,
    /// Per host, per NUMA node: one allocator per RAM region of the node, highest first.
    pub(crate) ram: Vec<Vec<Vec<RangeAllocator>>>,
    mappings: FxHashMap<MappingId, Vec<Hold>>,
    next_id: MappingId,
    pub(crate) log: Vec<String>,
}

impl Hosts {
    pub fn new(topo: &Topology) -> Hosts {
        let ram = topo
            .hosts
            .iter()
            .map(|h| {
                (0..topo.platforms[h.platform as usize].numa_nodes())
                    .map(|n| {
                        let mut v: Vec<RangeAllocator> = h
                            .regions
                            .iter()
                            .filter(|r| matches!(r.owner, Owner::Ram { node, .. } if node == n))
                            .map(|r| RangeAllocator::new(r.start, r.end))
                            .collect();
                        v.reverse();
                        v
                    })
                    .collect()
            })
            .collect();
        Hosts {
            iommu: (0..topo.hosts.len())
                .map(|h| IommuDriver::new(HostId::from_index(h)))
                .collect(),
            ntb: vec![NtbDriver::default(); topo.ntbs.len()],
            ram,
            mappings: FxHashMap::default(),
            next_id: 1,
            log: Vec::new(),
        }
    }

    /// Runs `op` with the host layer's state of `f` (made on first use and kept with the
    /// fabric, so every caller holding the fabric sees the same mappings).
    pub fn with<R>(f: &mut Fabric, op: impl FnOnce(&mut Hosts, &mut Fabric) -> R) -> R {
        let mut h = f
            .take_driver_state::<Hosts>()
            .unwrap_or_else(|| Hosts::new(&f.topo));
        let r = op(&mut h, f);
        f.put_driver_state(h);
        r
    }

    /// The IOMMU driver of a host.
    pub fn iommu(&self, host: HostId) -> Option<&IommuDriver> {
        self.iommu.get(host.index())
    }

    /// The NTB driver of an adapter.
    pub fn ntb(&self, ntb: NtbId) -> Option<&NtbDriver> {
        self.ntb.get(ntb.index())
    }

    /// Sets a host's IOMMU policy and IOVA range (refused while it has live mappings).
    pub fn set_iommu_policy(
        &mut self,
        host: HostId,
        policy: IommuPolicy,
        iova_range: (u64, u64),
    ) -> Result<(), HostError> {
        self.iommu
            .get_mut(host.index())
            .ok_or_else(|| HostError::Invalid(format!("no host {host}")))?
            .configure(policy, iova_range.0, iova_range.1)
    }

    /// What was programmed since the last call, one line each.
    pub fn take_log(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log)
    }

    pub fn live_mappings(&self) -> usize {
        self.mappings.len()
    }

    /// Maps `len` bytes at `buf` for `dev`; returns the DMA address `dev` uses.
    pub fn dma_map_single(
        &mut self,
        f: &mut Fabric,
        dev: Requester,
        buf: PhysAddr,
        len: u64,
        dir: DmaDirection,
    ) -> Result<DmaMapping, HostError> {
        let (id, segs) = self.map(f, dev, &[(buf, len)], dir, Vec::new())?;
        Ok(DmaMapping {
            id,
            addr: segs[0].0,
            len,
        })
    }

    /// Maps a scatter-gather list for `dev`. With a translating IOMMU the pieces get one
    /// IOVA range, so page-aligned pieces come out as one DMA segment.
    pub fn dma_map_sg(
        &mut self,
        f: &mut Fabric,
        dev: Requester,
        sg: &[(PhysAddr, u64)],
        dir: DmaDirection,
    ) -> Result<SgMapping, HostError> {
        if sg.is_empty() {
            return Err(HostError::Invalid("empty scatter-gather list".into()));
        }
        let (id, segments) = self.map(f, dev, sg, dir, Vec::new())?;
        Ok(SgMapping { id, segments })
    }

    /// Allocates `len` bytes of RAM on `node` (page-rounded, from the node's top down so
    /// fixed buffers at low offsets stay clear) and maps them for `dev`.
    pub fn dma_alloc_coherent(
        &mut self,
        f: &mut Fabric,
        dev: Requester,
        node: NumaNode,
        len: u64,
    ) -> Result<Coherent, HostError> {
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
        if len == 0 {
            return Err(HostError::Invalid(
                "a coherent buffer needs at least one byte".into(),
            ));
        }
        let bytes = len.div_ceil(PAGE) * PAGE;
        let at = allocs
            .iter_mut()
            .find_map(|a| a.alloc(bytes, u64::MAX))
            .ok_or_else(|| HostError::Exhausted {
                what: format!("RAM of {name} node {}", node.node),
                len: bytes,
                below: "in any of its regions".into(),
            })?;
        let phys = PhysAddr {
            host: node.host,
            addr: at,
        };
        let held = vec![Hold::Ram { node, at, bytes }];
        let (id, segs) = self.map(f, dev, &[(phys, len)], DmaDirection::Bidirectional, held)?;
        Ok(Coherent {
            mapping: DmaMapping {
                id,
                addr: segs[0].0,
                len,
            },
            phys,
            node,
        })
    }

    pub fn dma_unmap_single(&mut self, f: &mut Fabric, m: &DmaMapping) -> Result<(), HostError> {
        self.unmap(f, m.id)
    }

    pub fn dma_unmap_sg(&mut self, f: &mut Fabric, m: &SgMapping) -> Result<(), HostError> {
        self.unmap(f, m.id)
    }

    pub fn dma_free_coherent(&mut self, f: &mut Fabric, c: &Coherent) -> Result<(), HostError> {
        self.unmap(f, c.mapping.id)
    }

    /// Undoes a mapping: IOMMU pages unmapped, windows and requester entries released
    /// when their last user goes, coherent RAM freed.
    pub fn unmap(&mut self, f: &mut Fabric, id: MappingId) -> Result<(), HostError> {
        let holds = self
            .mappings
            .remove(&id)
            .ok_or_else(|| HostError::Invalid(format!("DMA mapping {id} is not mapped")))?;
        self.release(f, holds)
    }

    fn release(&mut self, f: &mut Fabric, holds: Vec<Hold>) -> Result<(), HostError> {
        for h in holds.into_iter().rev() {
            match h {
                Hold::Requester { ntb, rid } => {
                    self.ntb[ntb.index()].release_requester(f, ntb, rid)?
                }
                Hold::Window { ntb, first } => self.ntb[ntb.index()].release_window(f, first)?,
                Hold::Iommu { host, hold } => self.iommu[host.index()].release(f, &hold)?,
                Hold::Ram { node, at, bytes } => {
                    let allocs = &mut self.ram[node.host.index()][node.node as usize];
                    if let Some(a) = allocs.iter_mut().find(|a| {
                        let (s, e) = a.range();
                        s <= at && at + bytes <= e
                    }) {
                        a.free(at, bytes);
                    }
                }
            }
        }
        Ok(())
    }

    /// Maps each piece of `sg` for `dev`; on failure releases what it took (and `holds`).
    fn map(
        &mut self,
        f: &mut Fabric,
        dev: Requester,
        sg: &[(PhysAddr, u64)],
        dir: DmaDirection,
        mut holds: Vec<Hold>,
    ) -> Result<(MappingId, Vec<(DmaAddr, u64)>), HostError> {
        match self.try_map(f, dev, sg, dir, &mut holds) {
            Ok(segs) => {
                let id = self.next_id;
                self.next_id += 1;
                self.mappings.insert(id, holds);
                Ok((id, segs))
            }
            Err(e) => {
                self.release(f, holds)?;
                Err(e)
            }
        }
    }

    fn try_map(
        &mut self,
        f: &mut Fabric,
        dev: Requester,
        sg: &[(PhysAddr, u64)],
        dir: DmaDirection,
        holds: &mut Vec<Hold>,
    ) -> Result<Vec<(DmaAddr, u64)>, HostError> {
        let mask_bits = check_requester(f, dev)?;
        let src = f.requester_host(dev);
        let rid = f.requester_rid(dev);
        // Where each piece is on the device's own bus.
        let mut bus = Vec::with_capacity(sg.len());
        for &(buf, len) in sg {
            check_buffer(f, buf, len)?;
            bus.push((self.reach(f, dev, buf, len, dir, holds)?, len));
        }
        let limit = if mask_bits >= 64 {
            u64::MAX
        } else {
            1u64 << mask_bits
        };
        let through_iommu = matches!(dev, Requester::Function(_)) && f.topo.host(src).iommu;
        let dma: Vec<u64> = if through_iommu {
            let (dma, hold) =
                self.iommu[src.index()].map(f, rid, &bus, dir.perm(), limit, &mut self.log)?;
            holds.push(Hold::Iommu { host: src, hold });
            dma
        } else {
            bus.iter().map(|b| b.0).collect()
        };
        for (&d, &(_, len)) in dma.iter().zip(&bus) {
            if d.checked_add(len).is_none_or(|end| end > limit) {
                let why = if through_iommu {
                    "the IOMMU is in identity mode"
                } else {
                    "no IOMMU remaps it"
                };
                let Requester::Function(n) = dev else {
                    unreachable!("a CPU has no DMA mask")
                };
                return Err(HostError::DmaMask {
                    device: f.topo.node_label(n),
                    bits: mask_bits,
                    addr: d,
                    why,
                });
            }
        }
        // Pieces that follow each other on the bus become one DMA segment.
        let mut segs: Vec<(DmaAddr, u64)> = Vec::with_capacity(dma.len());
        for (&d, &(_, len)) in dma.iter().zip(&bus) {
            match segs.last_mut() {
                Some(last) if last.0 .0 + last.1 == d => last.1 += len,
                _ => segs.push((DmaAddr(d), len)),
            }
        }
        Ok(segs)
    }

    /// The bus address in `dev`'s host at which it reaches `buf`: `buf` itself in the same
    /// host, else through an NTB window, with a requester-ID entry for `dev` and the far
    /// host's IOMMU mapped for the proxied requester ID.
    fn reach(
        &mut self,
        f: &mut Fabric,
        dev: Requester,
        buf: PhysAddr,
        len: u64,
        dir: DmaDirection,
        holds: &mut Vec<Hold>,
    ) -> Result<u64, HostError> {
        let src = f.requester_host(dev);
        if buf.host == src {
            return Ok(buf.addr);
        }
        let rid = f.requester_rid(dev);
        let (ntb, far_ntb) = f
            .topo
            .host(src)
            .ntbs
            .iter()
            .find_map(|&s| {
                f.topo
                    .host(buf.host)
                    .ntbs
                    .iter()
                    .copied()
                    .find(|&d| f.topo.ntb_reaches(s, d))
                    .map(|d| (s, d))
            })
            .ok_or_else(|| fabric::FabricError::Unreachable {
                from: f.topo.host(src).name.clone(),
                to: f.topo.host(buf.host).name.clone(),
            })?;
        let (index, held) = self.ntb[ntb.index()].acquire_requester(f, ntb, rid, &mut self.log)?;
        if held {
            holds.push(Hold::Requester { ntb, rid });
        }
        // TLPs come out of the far adapter under the proxy ID of the entry they used.
        let far_rid = proxy_rid(f.topo.node(f.topo.ntbs[far_ntb.index()].fn_node).rid, index);
        let far = if f.topo.host(buf.host).iommu {
            let (dma, hold) = self.iommu[buf.host.index()].map(
                f,
                far_rid,
                &[(buf.addr, len)],
                dir.perm(),
                u64::MAX,
                &mut self.log,
            )?;
            holds.push(Hold::Iommu {
                host: buf.host,
                hold,
            });
            dma[0]
        } else {
            buf.addr
        };
        let (local, first) =
            self.ntb[ntb.index()].acquire_window(f, ntb, buf.host, far, len, &mut self.log)?;
        holds.push(Hold::Window { ntb, first });
        Ok(local)
    }
}

/// A requester's DMA mask width (64 for a CPU); an error for what cannot request.
fn check_requester(f: &Fabric, dev: Requester) -> Result<u8, HostError> {
    match dev {
        Requester::Function(n) => {
            let node = f
                .topo
                .nodes
                .get(n.index())
                .ok_or_else(|| HostError::Invalid(format!("no PCI node {n}")))?;
            match node.kind {
                NodeKind::Function { .. } | NodeKind::NtbFunction { .. } => {
                    Ok(node.dma_mask_bits.min(64))
                }
                _ => Err(HostError::Invalid(format!(
                    "`{}` is a switch or root complex, not a requester",
                    f.topo.node_label(n)
                ))),
            }
        }
        Requester::Cpu { host, package } => {
            let h = f
                .topo
                .hosts
                .get(host.index())
                .ok_or_else(|| HostError::Invalid(format!("no host {host}")))?;
            let packages = f.topo.platforms[h.platform as usize].packages;
            if package >= packages {
                return Err(HostError::Invalid(format!(
                    "host `{}` has packages 0..{}",
                    h.name,
                    packages - 1
                )));
            }
            Ok(64)
        }
    }
}

/// A buffer must be in a host and have RAM or a BAR under its first and last byte.
fn check_buffer(f: &Fabric, buf: PhysAddr, len: u64) -> Result<(), HostError> {
    let h = f
        .topo
        .hosts
        .get(buf.host.index())
        .ok_or_else(|| HostError::Invalid(format!("no host {}", buf.host)))?;
    if len == 0 {
        return Err(HostError::Invalid(
            "a DMA mapping needs at least one byte".into(),
        ));
    }
    let last = buf
        .addr
        .checked_add(len - 1)
        .ok_or_else(|| HostError::Invalid(format!("{:#x} + {len:#x} overflows", buf.addr)))?;
    for a in [buf.addr, last] {
        if h.decode(a).is_none() {
            return Err(HostError::Invalid(format!(
                "no RAM or BAR at {a:#x} in host `{}`",
                h.name
            )));
        }
    }
    Ok(())
}
