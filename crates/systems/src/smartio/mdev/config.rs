//! Guest configuration accesses, forwarded to the lender, and what they set off: the
//! borrow at the guest's reset, guest memory pinned, probed and mapped at Bus Master
//! Enable (two DMA windows, the lender IOMMU mirroring GPAs), unmapped when it clears.

use fabric::iommu::{Perm, PAGE};
use fabric::Fabric;
use host::{HostError, Hosts};

use super::{DmaSide, Hypervisor, MdevDma, MdevError, MdevId, CMD_BUS_MASTER, HIGH_MEM_BASE};
use crate::smartio::agent::ControlKind;
use crate::smartio::lending::{BorrowOptions, Cluster};
use crate::smartio::LendError;

impl Hypervisor {
    /// A guest configuration read, forwarded to the lender (two counted messages).
    pub fn guest_config_read(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
        reg: u64,
        buf: &mut [u8],
    ) -> Result<(), MdevError> {
        let (md, _) = self.running_vm(m)?;
        match md.borrow {
            Some(b) => c.config_read(f, b, reg, buf)?,
            None => {
                // Not borrowed yet: the lender's agent answers the forwarded read.
                let d = c.device(md.fdid)?.clone();
                c.post(ControlKind::ConfigForward);
                f.config_read(d.host, 0, f.topo.node(d.function).rid, reg, buf)
                    .map_err(|e| LendError::ConfigFault {
                        dev: d.label(),
                        why: format!("{e:?}"),
                    })?;
                c.post(ControlKind::ConfigReply);
            }
        }
        Ok(())
    }

    /// A guest configuration write through the mdev. The first one (the guest driver's
    /// reset) borrows the device from the VM's host; every one is forwarded (two counted
    /// messages). Bus Master Enable rising maps guest memory; falling unmaps it.
    pub fn guest_config_write(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
        reg: u64,
        data: &[u8],
    ) -> Result<(), MdevError> {
        let (md, v) = self.running_vm(m)?;
        let (fdid, host, vm_name) = (md.fdid, md.host, v.name.clone());
        let b = match md.borrow {
            Some(b) => b,
            None => {
                let opts = BorrowOptions {
                    exclusive: true,
                    dma_window: PAGE,
                    through: None,
                };
                let b = c.borrow(f, host, fdid, opts)?;
                self.stats.borrows += 1;
                self.mdevs.get_mut(&m).expect("checked").borrow = Some(b);
                b
            }
        };
        c.config_write(f, b, reg, data)?;
        // The guest's Command register, bytes 0x04..0x06 of what it wrote.
        let old = self.mdev(m)?.command;
        let mut cmd = old.to_le_bytes();
        for (i, byte) in data.iter().enumerate() {
            let at = reg + i as u64;
            if (4..6).contains(&at) {
                cmd[(at - 4) as usize] = *byte;
            }
        }
        let new = u16::from_le_bytes(cmd);
        self.mdevs.get_mut(&m).expect("checked").command = new;
        let (was, is) = (old & CMD_BUS_MASTER != 0, new & CMD_BUS_MASTER != 0);
        if is && !was {
            self.enable_dma(c, f, m, &vm_name)?;
        } else if was && !is {
            self.disable_dma(f, m, &vm_name)?;
        }
        Ok(())
    }

    /// Bus Master Enable: pin, probe and map guest memory for the device.
    fn enable_dma(
        &mut self,
        c: &Cluster,
        f: &mut Fabric,
        m: MdevId,
        vm_name: &str,
    ) -> Result<(), MdevError> {
        let md = self.mdev(m)?;
        let b = md.borrow.expect("borrowed before any write");
        let x = c.live(f, b)?;
        let (lender, borrower, lender_ntb, borrower_ntb, function) = (
            x.lender,
            x.borrower,
            x.lender_ntb,
            x.borrower_ntb,
            x.function,
        );
        if !f.topo.host(lender).iommu {
            return Err(MdevError::LenderIommuOff {
                dev: c.device(md.fdid)?.label(),
                vm: vm_name.into(),
                lender: f.topo.host(lender).name.clone(),
            });
        }
        // Probe from each base until a GPA is not backed.
        let v = self.vm(md.vm)?;
        let mut sides = Vec::new();
        let mut probes = 0;
        for base in [0, HIGH_MEM_BASE] {
            let mut ext = Vec::new();
            let mut gpa = base;
            loop {
                probes += 1;
                match v.backing(gpa) {
                    Some(e) => {
                        gpa = e.gpa + e.len;
                        ext.push(e);
                    }
                    None => break,
                }
            }
            if !ext.is_empty() {
                sides.push((base, gpa - base, ext));
            }
        }
        self.stats.probes += probes;
        let bits = f.topo.node(function).dma_mask_bits;
        let limit = if bits >= 64 { u64::MAX } else { 1u64 << bits };
        if let Some((base, len, _)) = sides.iter().find(|s| s.0 + s.1 > limit) {
            return Err(MdevError::Invalid(format!(
                "{}: guest memory {base:#x}..{:#x} of VM `{vm_name}` is above its {bits}-bit DMA mask",
                f.topo.node_label(function),
                base + len
            )));
        }
        let pinned: u64 = sides.iter().map(|s| s.2.len() as u64).sum();
        let rid = f.topo.node(function).rid;
        let borrower_iommu = f.topo.host(borrower).iommu;
        let mut dma = MdevDma {
            requester: None,
            sides: Vec::new(),
            pinned,
        };
        let r = Hosts::with(f, |hs, f| -> Result<(), HostError> {
            let e = hs.ntb_acquire_requester(f, lender_ntb, rid)?;
            dma.requester = Some(e);
            let proxied = e.proxy_on(f, borrower_ntb);
            let ws = f.topo.ntbs[lender_ntb.index()].window_size;
            for (base, len, ext) in &sides {
                dma.sides.push(DmaSide {
                    gpa: *base,
                    len: *len,
                    ..DmaSide::default()
                });
                let side = dma.sides.last_mut().expect("pushed");
                let lr = hs.iommu_reserve_at(f, lender, rid, *base, *len)?;
                side.lender = Some(lr);
                if borrower_iommu {
                    let range = hs.iommu_reserve(f, borrower, proxied, *len, u64::MAX, ws)?;
                    let w = match hs.ntb_acquire_window(f, lender_ntb, borrower, range.start, *len)
                    {
                        Ok(w) => w,
                        Err(e) => {
                            hs.iommu_unreserve(f, &range)?;
                            return Err(e);
                        }
                    };
                    side.window = Some((range, w));
                    for x in ext {
                        hs.iommu_map_at(
                            f,
                            &range,
                            range.start + (x.gpa - base),
                            x.hpa,
                            x.len,
                            Perm::RW,
                        )?;
                    }
                    hs.iommu_map_at(f, &lr, *base, w.local, *len, Perm::RW)?;
                } else {
                    for x in ext {
                        let w = hs.ntb_acquire_window(f, lender_ntb, borrower, x.hpa, x.len)?;
                        side.page_windows.push(w);
                        hs.iommu_map_at(f, &lr, x.gpa, w.local, x.len, Perm::RW)?;
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = r {
            let _ = Hosts::with(f, |hs, f| release_dma(hs, f, &mut dma));
            return Err(MdevError::Host {
                vm: vm_name.into(),
                source: e,
            });
        }
        self.stats.dma_setups += 1;
        let vm = self.mdevs[&m].vm;
        self.vms.get_mut(&vm).expect("live").pinned += pinned;
        self.mdevs.get_mut(&m).expect("checked").dma = Some(dma);
        Ok(())
    }

    pub(super) fn disable_dma(
        &mut self,
        f: &mut Fabric,
        m: MdevId,
        vm_name: &str,
    ) -> Result<(), MdevError> {
        let md = self.mdevs.get_mut(&m).ok_or(MdevError::UnknownMdev(m))?;
        let Some(mut dma) = md.dma.take() else {
            return Ok(());
        };
        let vm = md.vm;
        Hosts::with(f, |hs, f| release_dma(hs, f, &mut dma)).map_err(|e| MdevError::Host {
            vm: vm_name.into(),
            source: e,
        })?;
        if let Some(v) = self.vms.get_mut(&vm) {
            v.pinned -= dma.pinned;
        }
        Ok(())
    }
}

/// Releases what an mdev's DMA set-up holds (whatever part of it was made).
fn release_dma(hs: &mut Hosts, f: &mut Fabric, d: &mut MdevDma) -> Result<(), HostError> {
    for s in d.sides.iter_mut().rev() {
        if let Some(lr) = s.lender.take() {
            hs.iommu_unreserve(f, &lr)?;
        }
        for w in s.page_windows.drain(..).rev() {
            hs.ntb_release_window(f, &w)?;
        }
        if let Some((range, w)) = s.window.take() {
            hs.ntb_release_window(f, &w)?;
            hs.iommu_unreserve(f, &range)?;
        }
    }
    if let Some(e) = d.requester.take() {
        hs.ntb_release_requester(f, &e)?;
    }
    Ok(())
}
