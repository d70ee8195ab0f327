//! "The device as this host sees it": what a driver needs from the layer beneath it —
//! where its CPU reaches the device's BARs, configuration reads and writes, MSI set-up,
//! coherent memory and the streaming DMA API (`map`/`unmap`) — and two implementations.
//!
//! * `Local`: a device in the driver's own host. BARs at their bus addresses, config
//!   through `Fabric::config_read/write`, the host layer's `dma_alloc_coherent`,
//!   `dma_map_single` and `dma_unmap_single` for the function's own requester ID, MSI at
//!   the host's interrupt range.
//! * `Borrowed`: a device borrowed through SmartIO Device Lending. BARs through the shadow
//!   device (`Cluster::shadow_bar`), config forwarded to the lender
//!   (`Cluster::config_read/write`: two control messages each), MSI redirected through a
//!   lender window (`Cluster::setup_msi`: one message), every mapping in the borrow's DMA
//!   window (`Cluster::map_for_device`/`unmap_for_device`: no message, no NTB change; on a
//!   borrower without an IOMMU a lender window per mapping, with its messages).
//!
//! A third, `vm_access::VmAccess` (a device passed to a VM by MDEV), follows what this
//! section describes; `BlkRun::new_vm` runs `NvmeBlk` on it.
//!
//! # Implementing it for a VM (MDEV)
//!
//! The driver holds only what these calls return: a CPU requester and the addresses that
//! requester reaches through `Fabric::route` (BARs, queue memory, data pages), and device
//! addresses it writes into commands. Nothing in the driver assumes the device is in the
//! CPU's host, that a mapping is an IOMMU entry, or that a config access is local. An MDEV
//! implementation gives the guest's vCPU as `cpu()` (its loads and stores reach the
//! host-physical backing of guest pages), the BAR as the guest's view maps it (a shadow
//! BAR through the lender's NTB), forwards config accesses through the mediated device,
//! and maps guest buffers with whatever MDEV programs (guest IOVA in the lender's IOMMU or
//! a DMA window) — all behind these same methods, so `NvmeBlk` runs unchanged. Every
//! method takes `&mut Fabric` because each of those layers programs hardware through the
//! host layer, which keeps its state in the fabric.

use std::cell::RefCell;
use std::rc::Rc;

use fabric::{Fabric, HostId, PcieNodeId, Requester, MSI_WINDOW};
use host::{Coherent, DmaDirection, DmaMapping, HostError, Hosts, NumaNode, PhysAddr};

use crate::smartio::{self, Cluster, DeviceMapping, LendError};

/// Why a device access failed (the layer's own error, as text with its kind).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    #[error("host layer: {0}")]
    Host(#[from] HostError),
    #[error("device lending: {0}")]
    Lend(#[from] LendError),
    #[error("{0}")]
    Other(String),
}

/// Memory both the CPU (`cpu`) and the device (`dev`) address, for queues and scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoherentBuf {
    pub cpu: u64,
    pub dev: u64,
    pub bytes: u64,
    /// The implementation's handle, given back to `free_coherent`.
    pub handle: u64,
}

/// A streaming mapping: `dev` is what the device puts on the bus for the buffer's first
/// byte; `handle` is the implementation's, given back to `unmap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevMapping {
    pub dev: u64,
    pub len: u64,
    pub handle: u64,
}

/// Where the device writes to raise a vector, and the data it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsiMessage {
    pub addr: u64,
    pub data: u32,
}

/// The device as the driving host sees it. See the module documentation.
pub trait DeviceAccess {
    /// The CPU the driver runs on (its loads, stores and MMIO go out as this requester).
    fn cpu(&self) -> Requester;
    /// The PCI function (the controller model's node: where its BARs and DMA come from).
    fn function(&self) -> PcieNodeId;
    /// BAR `index` as the driver's CPU addresses it.
    fn bar(&self, f: &Fabric, index: u8) -> Result<u64, AccessError>;
    fn config_read(&mut self, f: &mut Fabric, reg: u64, buf: &mut [u8]) -> Result<(), AccessError>;
    fn config_write(&mut self, f: &mut Fabric, reg: u64, data: &[u8]) -> Result<(), AccessError>;
    /// Sets up interrupt vector `vector` toward the CPU's APIC `apic`: the message the
    /// device must send (written into its MSI-X table by the driver).
    fn msi(&mut self, f: &mut Fabric, vector: u32, apic: u8) -> Result<MsiMessage, AccessError>;
    /// `dma_alloc_coherent`: `bytes` of RAM on the CPU's NUMA node `node`, mapped for the device.
    fn alloc_coherent(
        &mut self,
        f: &mut Fabric,
        node: u32,
        bytes: u64,
    ) -> Result<CoherentBuf, AccessError>;
    fn free_coherent(&mut self, f: &mut Fabric, c: &CoherentBuf) -> Result<(), AccessError>;
    /// RAM on the CPU's NUMA node `node` for the CPU alone (a page-cache page, mapped per
    /// I/O with `map`): the CPU's address. By default the host layer's (`alloc_ram`); a
    /// guest's is guest memory.
    fn alloc_ram(&mut self, f: &mut Fabric, node: u32, bytes: u64) -> Result<u64, AccessError> {
        let host = f.requester_host(self.cpu());
        Ok(alloc_ram(f, host, node, bytes)?.phys.addr)
    }
    /// `dma_map_single`: `len` bytes of the CPU's memory at `buf` for the device.
    fn map(
        &mut self,
        f: &mut Fabric,
        buf: u64,
        len: u64,
        dir: DmaDirection,
    ) -> Result<DevMapping, AccessError>;
    /// `dma_unmap_single`.
    fn unmap(&mut self, f: &mut Fabric, m: &DevMapping) -> Result<(), AccessError>;
}

/// RAM on `node` of `host` for the CPU alone (page-cache pages, not mapped for any
/// device): the host layer's allocator, through a CPU "mapping" that programs nothing.
pub fn alloc_ram(
    f: &mut Fabric,
    host: HostId,
    node: u32,
    bytes: u64,
) -> Result<Coherent, HostError> {
    let pkg = f.topo.platform_of(host).package_of_node(node);
    Hosts::with(f, |h, f| {
        h.dma_alloc_coherent(
            f,
            Requester::Cpu { host, package: pkg },
            NumaNode { host, node },
            bytes,
        )
    })
}

/// What a driver's handles (`CoherentBuf::handle`, `DevMapping::handle`) stand for while
/// they are live: handed out by `keep`, given back once by `take`.
struct Live<T> {
    items: Vec<(u64, T)>,
    next: u64,
}

impl<T> Default for Live<T> {
    fn default() -> Self {
        Live {
            items: Vec::new(),
            next: 1,
        }
    }
}

impl<T> Live<T> {
    fn keep(&mut self, x: T) -> u64 {
        let handle = self.next;
        self.next += 1;
        self.items.push((handle, x));
        handle
    }

    /// The item behind `handle`, no longer live; `what` names it in the error.
    fn take(&mut self, handle: u64, what: &str) -> Result<T, AccessError> {
        let i = self
            .items
            .iter()
            .position(|x| x.0 == handle)
            .ok_or_else(|| AccessError::Other(format!("{what} {handle} is not live")))?;
        Ok(self.items.remove(i).1)
    }
}

/// A device in the driver's own host.
pub struct Local {
    cpu: Requester,
    function: PcieNodeId,
    coherent: Live<Coherent>,
    maps: Live<DmaMapping>,
}

impl Local {
    /// `function` driven by `cpu` (a CPU of the function's host).
    pub fn new(f: &Fabric, cpu: Requester, function: PcieNodeId) -> Result<Local, AccessError> {
        if f.requester_host(cpu) != f.topo.node(function).host {
            return Err(AccessError::Other(format!(
                "{} is not in the driving CPU's host `{}` (borrow it)",
                f.topo.node_label(function),
                f.topo.host(f.requester_host(cpu)).name
            )));
        }
        Ok(Local {
            cpu,
            function,
            coherent: Live::default(),
            maps: Live::default(),
        })
    }

    fn host(&self, f: &Fabric) -> HostId {
        f.requester_host(self.cpu)
    }
}

impl DeviceAccess for Local {
    fn cpu(&self) -> Requester {
        self.cpu
    }
    fn function(&self) -> PcieNodeId {
        self.function
    }
    fn bar(&self, f: &Fabric, index: u8) -> Result<u64, AccessError> {
        f.topo
            .node(self.function)
            .bar(index)
            .map(|b| b.addr)
            .ok_or_else(|| {
                AccessError::Other(format!(
                    "{} has no BAR{index}",
                    f.topo.node_label(self.function)
                ))
            })
    }
    fn config_read(&mut self, f: &mut Fabric, reg: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        let (host, rid) = (self.host(f), f.topo.node(self.function).rid);
        f.config_read(host, 0, rid, reg, buf)
            .map_err(|e| AccessError::Other(format!("config read faulted: {e:?}")))
    }
    fn config_write(&mut self, f: &mut Fabric, reg: u64, data: &[u8]) -> Result<(), AccessError> {
        let (host, rid) = (self.host(f), f.topo.node(self.function).rid);
        f.config_write(host, 0, rid, reg, data)
            .map_err(|e| AccessError::Other(format!("config write faulted: {e:?}")))
    }
    fn msi(&mut self, _f: &mut Fabric, vector: u32, apic: u8) -> Result<MsiMessage, AccessError> {
        Ok(MsiMessage {
            addr: MSI_WINDOW.start | (apic as u64) << 12,
            data: vector,
        })
    }
    fn alloc_coherent(
        &mut self,
        f: &mut Fabric,
        node: u32,
        bytes: u64,
    ) -> Result<CoherentBuf, AccessError> {
        let host = self.host(f);
        let dev = Requester::Function(self.function);
        let c = Hosts::with(f, |h, f| {
            h.dma_alloc_coherent(f, dev, NumaNode { host, node }, bytes)
        })?;
        let handle = self.coherent.keep(c);
        Ok(CoherentBuf {
            cpu: c.phys.addr,
            dev: c.mapping.addr.0,
            bytes,
            handle,
        })
    }
    fn free_coherent(&mut self, f: &mut Fabric, c: &CoherentBuf) -> Result<(), AccessError> {
        let x = self.coherent.take(c.handle, "coherent buffer")?;
        Ok(Hosts::with(f, |h, f| h.dma_free_coherent(f, &x))?)
    }
    fn map(
        &mut self,
        f: &mut Fabric,
        buf: u64,
        len: u64,
        dir: DmaDirection,
    ) -> Result<DevMapping, AccessError> {
        let host = self.host(f);
        let dev = Requester::Function(self.function);
        let m = Hosts::with(f, |h, f| {
            h.dma_map_single(f, dev, PhysAddr { host, addr: buf }, len, dir)
        })?;
        let handle = self.maps.keep(m);
        Ok(DevMapping {
            dev: m.addr.0,
            len,
            handle,
        })
    }
    fn unmap(&mut self, f: &mut Fabric, m: &DevMapping) -> Result<(), AccessError> {
        let x = self.maps.take(m.handle, "mapping")?;
        Ok(Hosts::with(f, |h, f| h.dma_unmap_single(f, &x))?)
    }
}

/// A device borrowed through Device Lending. The cluster is shared with whoever else
/// uses it (the borrow, its return, other borrows), as a kernel's SmartIO driver state is.
pub struct Borrowed {
    cluster: Rc<RefCell<Cluster>>,
    borrow: smartio::Borrowed,
    cpu: Requester,
    function: PcieNodeId,
    coherent: Live<(Coherent, DeviceMapping)>,
    maps: Live<DeviceMapping>,
}

impl Borrowed {
    /// The borrow `b` driven by `cpu` (a CPU of the borrower).
    pub fn new(
        f: &Fabric,
        cluster: Rc<RefCell<Cluster>>,
        b: smartio::Borrowed,
        cpu: Requester,
    ) -> Result<Borrowed, AccessError> {
        if f.requester_host(cpu) != b.host {
            return Err(AccessError::Other(format!(
                "the driving CPU is in host `{}`, the borrower is `{}`",
                f.topo.host(f.requester_host(cpu)).name,
                f.topo.host(b.host).name
            )));
        }
        let function = cluster.borrow().function(f, b)?;
        Ok(Borrowed {
            cluster,
            borrow: b,
            cpu,
            function,
            coherent: Live::default(),
            maps: Live::default(),
        })
    }

    pub fn handle(&self) -> smartio::Borrowed {
        self.borrow
    }
}

impl DeviceAccess for Borrowed {
    fn cpu(&self) -> Requester {
        self.cpu
    }
    fn function(&self) -> PcieNodeId {
        self.function
    }
    fn bar(&self, f: &Fabric, index: u8) -> Result<u64, AccessError> {
        Ok(self.cluster.borrow().shadow_bar(f, self.borrow, index)?)
    }
    fn config_read(&mut self, f: &mut Fabric, reg: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        Ok(self
            .cluster
            .borrow_mut()
            .config_read(f, self.borrow, reg, buf)?)
    }
    fn config_write(&mut self, f: &mut Fabric, reg: u64, data: &[u8]) -> Result<(), AccessError> {
        Ok(self
            .cluster
            .borrow_mut()
            .config_write(f, self.borrow, reg, data)?)
    }
    fn msi(&mut self, f: &mut Fabric, vector: u32, apic: u8) -> Result<MsiMessage, AccessError> {
        let r = self
            .cluster
            .borrow_mut()
            .setup_msi(f, self.borrow, vector, apic)?;
        Ok(MsiMessage {
            addr: r.addr,
            data: r.data,
        })
    }
    fn alloc_coherent(
        &mut self,
        f: &mut Fabric,
        node: u32,
        bytes: u64,
    ) -> Result<CoherentBuf, AccessError> {
        // RAM of the borrower's node, then mapped for the device in its DMA window.
        let c = alloc_ram(f, self.borrow.host, node, bytes)?;
        let m = match self.cluster.borrow_mut().map_for_device(
            f,
            self.borrow,
            c.phys,
            bytes,
            DmaDirection::Bidirectional,
        ) {
            Ok(m) => m,
            Err(e) => {
                Hosts::with(f, |h, f| h.dma_free_coherent(f, &c))?;
                return Err(e.into());
            }
        };
        let handle = self.coherent.keep((c, m));
        Ok(CoherentBuf {
            cpu: c.phys.addr,
            dev: m.addr.0,
            bytes,
            handle,
        })
    }
    fn free_coherent(&mut self, f: &mut Fabric, c: &CoherentBuf) -> Result<(), AccessError> {
        let (x, m) = self.coherent.take(c.handle, "coherent buffer")?;
        // After a return the borrow's mappings are gone with it: only the RAM is left.
        let r = self.cluster.borrow_mut().unmap_for_device(f, &m);
        Hosts::with(f, |h, f| h.dma_free_coherent(f, &x))?;
        match r {
            Err(LendError::Invalid(_)) | Ok(()) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
    fn map(
        &mut self,
        f: &mut Fabric,
        buf: u64,
        len: u64,
        dir: DmaDirection,
    ) -> Result<DevMapping, AccessError> {
        let phys = PhysAddr {
            host: self.borrow.host,
            addr: buf,
        };
        let m = self
            .cluster
            .borrow_mut()
            .map_for_device(f, self.borrow, phys, len, dir)?;
        let handle = self.maps.keep(m);
        Ok(DevMapping {
            dev: m.addr.0,
            len,
            handle,
        })
    }
    fn unmap(&mut self, f: &mut Fabric, m: &DevMapping) -> Result<(), AccessError> {
        let x = self.maps.take(m.handle, "mapping")?;
        Ok(self.cluster.borrow_mut().unmap_for_device(f, &x)?)
    }
}

#[cfg(test)]
mod tests {
    use super::Live;

    #[test]
    fn a_handle_is_given_back_once() {
        let mut l = Live::default();
        let (a, b) = (l.keep('a'), l.keep('b'));
        assert_ne!(a, b);
        assert_eq!(l.take(b, "mapping").unwrap(), 'b');
        let e = l.take(b, "mapping").unwrap_err();
        assert_eq!(e.to_string(), format!("mapping {b} is not live"));
        assert_eq!(l.take(a, "mapping").unwrap(), 'a');
    }
}
