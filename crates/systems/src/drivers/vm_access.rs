//! The third `DeviceAccess`: a device passed through to a VM by MDEV. The driver runs in
//! the guest: its CPU is the VM host's CPU (a vCPU's loads and stores reach the
//! host-physical backing of guest pages, so the CPU-side address of guest memory is its
//! HPA), the device-side address of guest memory is its GPA (MDEV mirrors all guest
//! memory in the lender's IOMMU at Bus Master Enable), BARs are the borrow's shadow BARs
//! on the VM's host, config goes through the mediated device
//! (`Hypervisor::guest_config_read/write`: the guest's first write borrows the device,
//! its Bus Master Enable maps guest memory) and MSI through `guest_enable_msi`.
//! `map`/`unmap` program nothing and send no message.

use std::cell::RefCell;
use std::rc::Rc;

use fabric::{Fabric, PcieNodeId, Requester};
use host::DmaDirection;

use super::access::{AccessError, CoherentBuf, DevMapping, DeviceAccess, MsiMessage};
use crate::smartio::mdev::{Hypervisor, MdevError, MdevId, VmId};
use crate::smartio::Cluster;

/// Coherent buffers never cross this (the largest host page): within one 2 MiB page their
/// HPAs are contiguous whatever the VM's host pages.
const CHUNK: u64 = 2 << 20;

fn err(e: MdevError) -> AccessError {
    AccessError::Other(format!("mdev: {e}"))
}

/// A device as a VM's guest driver sees it through MDEV.
pub struct VmAccess {
    hv: Rc<RefCell<Hypervisor>>,
    cluster: Rc<RefCell<Cluster>>,
    vm: VmId,
    mdev: MdevId,
    function: PcieNodeId,
    cpu: Requester,
    /// Bump allocator over guest-physical `[next, end)` (reserved by the caller).
    next: u64,
    end: u64,
    handles: u64,
}

impl VmAccess {
    /// The mdev `mdev` of VM `vm`, guest memory `[gpa, gpa + bytes)` for the driver's
    /// coherent buffers and pages.
    pub fn new(
        f: &Fabric,
        hv: Rc<RefCell<Hypervisor>>,
        cluster: Rc<RefCell<Cluster>>,
        vm: VmId,
        mdev: MdevId,
        gpa: u64,
        bytes: u64,
    ) -> Result<VmAccess, AccessError> {
        let (host, function) = {
            let h = hv.borrow();
            let host = h.vm(vm).map_err(err)?.host();
            let function = match h.device(&cluster.borrow(), mdev).map_err(err)? {
                Requester::Function(n) => n,
                r => return Err(AccessError::Other(format!("mdev device is {r:?}"))),
            };
            (host, function)
        };
        let _ = f;
        Ok(VmAccess {
            hv,
            cluster,
            vm,
            mdev,
            function,
            cpu: Requester::Cpu { host, package: 0 },
            next: gpa,
            end: gpa + bytes,
            handles: 1,
        })
    }

    fn bump(&mut self, bytes: u64) -> Result<u64, AccessError> {
        let bytes = bytes.max(1).div_ceil(4096) * 4096;
        if bytes > CHUNK {
            return Err(AccessError::Other(format!(
                "{bytes} bytes of coherent guest memory: more than one 2 MiB page"
            )));
        }
        let mut at = self.next;
        if at / CHUNK != (at + bytes - 1) / CHUNK {
            at = (at / CHUNK + 1) * CHUNK;
        }
        if at + bytes > self.end {
            return Err(AccessError::Other(
                "guest memory reserved for the driver is used up".into(),
            ));
        }
        self.next = at + bytes;
        Ok(at)
    }

    fn hpa(&self, gpa: u64) -> Result<u64, AccessError> {
        let h = self.hv.borrow();
        let v = h.vm(self.vm).map_err(err)?;
        v.gpa_to_hpa(gpa)
            .map(|p| p.addr)
            .ok_or_else(|| AccessError::Other(format!("GPA {gpa:#x} is not guest memory")))
    }

    /// The GPA of the guest memory the vCPU addresses at `hpa` (`len` bytes in one page).
    fn gpa_of(&self, hpa: u64, len: u64) -> Result<u64, AccessError> {
        let h = self.hv.borrow();
        let v = h.vm(self.vm).map_err(err)?;
        v.extents()
            .into_iter()
            .find(|e| hpa >= e.hpa && hpa + len <= e.hpa + e.len)
            .map(|e| e.gpa + (hpa - e.hpa))
            .ok_or_else(|| {
                AccessError::Other(format!(
                    "{hpa:#x} (+{len}) is not (one host page of) guest memory"
                ))
            })
    }

    pub fn mdev(&self) -> MdevId {
        self.mdev
    }
}

impl DeviceAccess for VmAccess {
    fn cpu(&self) -> Requester {
        self.cpu
    }
    fn function(&self) -> PcieNodeId {
        self.function
    }
    fn bar(&self, f: &Fabric, index: u8) -> Result<u64, AccessError> {
        let b = self
            .hv
            .borrow()
            .borrowed(self.mdev)
            .map_err(err)?
            .ok_or_else(|| {
                AccessError::Other("the guest has not reset its device: nothing borrowed".into())
            })?;
        Ok(self.cluster.borrow().shadow_bar(f, b, index)?)
    }
    fn config_read(&mut self, f: &mut Fabric, reg: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        self.hv
            .borrow_mut()
            .guest_config_read(&mut self.cluster.borrow_mut(), f, self.mdev, reg, buf)
            .map_err(err)
    }
    fn config_write(&mut self, f: &mut Fabric, reg: u64, data: &[u8]) -> Result<(), AccessError> {
        self.hv
            .borrow_mut()
            .guest_config_write(&mut self.cluster.borrow_mut(), f, self.mdev, reg, data)
            .map_err(err)
    }
    fn msi(&mut self, f: &mut Fabric, vector: u32, _apic: u8) -> Result<MsiMessage, AccessError> {
        let r = self
            .hv
            .borrow_mut()
            .guest_enable_msi(&mut self.cluster.borrow_mut(), f, self.mdev, vector)
            .map_err(err)?;
        Ok(MsiMessage {
            addr: r.addr,
            data: r.data,
        })
    }
    fn alloc_coherent(
        &mut self,
        _f: &mut Fabric,
        _node: u32,
        bytes: u64,
    ) -> Result<CoherentBuf, AccessError> {
        let gpa = self.bump(bytes)?;
        let handle = self.handles;
        self.handles += 1;
        Ok(CoherentBuf {
            cpu: self.hpa(gpa)?,
            dev: gpa,
            bytes,
            handle,
        })
    }
    fn free_coherent(&mut self, _f: &mut Fabric, _c: &CoherentBuf) -> Result<(), AccessError> {
        // A bump allocator: freed with the VM.
        Ok(())
    }
    fn alloc_ram(&mut self, _f: &mut Fabric, _node: u32, bytes: u64) -> Result<u64, AccessError> {
        // A guest page-cache page: guest memory, addressed by the vCPU at its HPA.
        let gpa = self.bump(bytes)?;
        self.hpa(gpa)
    }
    fn map(
        &mut self,
        _f: &mut Fabric,
        buf: u64,
        len: u64,
        _dir: DmaDirection,
    ) -> Result<DevMapping, AccessError> {
        let dev = self.gpa_of(buf, len)?;
        let handle = self.handles;
        self.handles += 1;
        Ok(DevMapping { dev, len, handle })
    }
    fn unmap(&mut self, _f: &mut Fabric, _m: &DevMapping) -> Result<(), AccessError> {
        Ok(())
    }
}
