//! What a borrower does with a borrowed device: its shadow BARs and DMA window, mappings
//! for the device, forwarded configuration accesses, MSI set-up toward the borrower.

use fabric::iommu::PAGE;
use fabric::{Fabric, PcieNodeId, Requester, MSI_WINDOW};
use host::{DmaAddr, DmaDirection, HostError, Hosts, PhysAddr};

use super::borrow::unmap_hold;
use super::{
    lender_reach, perm, Borrowed, Cluster, DeviceMapping, DmaPath, DmaWindowInfo, MapHold,
    MsiRoute, ShadowBar, MSI_CAP,
};
use crate::smartio::agent::ControlKind;
use crate::smartio::LendError;

impl Cluster {
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
