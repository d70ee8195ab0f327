//! A VM's life: created with its guest memory, shut down (its devices returned),
//! booted, cold-migrated to another host, destroyed.

use fabric::{Fabric, HostId, Requester};

use super::guest::{alloc_guest, free_guest};
use super::{Hypervisor, MdevError, MdevId, Vm, VmConfig, VmId};
use crate::smartio::lending::Cluster;

impl Hypervisor {
    /// Starts a VM named `name` on `host`: guest memory allocated from the host's RAM
    /// (`config.node`), host pages given to guest pages in a shuffled order.
    pub fn create_vm(
        &mut self,
        f: &mut Fabric,
        host: HostId,
        name: &str,
        config: VmConfig,
    ) -> Result<VmId, MdevError> {
        if f.topo.hosts.get(host.index()).is_none() {
            return Err(MdevError::Invalid(format!("no host #{host}")));
        }
        let pages = alloc_guest(f, host, name, config)?;
        let id = VmId(self.next_vm);
        self.next_vm += 1;
        self.vms.insert(
            id,
            Vm {
                name: name.into(),
                host,
                config,
                pages,
                running: true,
                pinned: 0,
                interrupts: Vec::new(),
            },
        );
        Ok(id)
    }
    /// The guest shuts down: each of its mdevs unmapped and unpinned, its device returned
    /// (FLR at the lender, every window, requester entry and IOMMU mapping released).
    /// Guest memory stays (for a boot or a migration).
    pub fn shutdown_vm(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        vm: VmId,
    ) -> Result<(), MdevError> {
        let name = self.vm(vm)?.name.clone();
        let ids: Vec<MdevId> = self
            .mdevs
            .iter()
            .filter(|(_, m)| m.vm == vm)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.disable_dma(f, id, &name)?;
            let md = self.mdevs.get_mut(&id).expect("listed");
            md.command = 0;
            md.msi.clear();
            if let Some(b) = md.borrow.take() {
                c.return_device(f, b)?;
            }
        }
        self.vms.get_mut(&vm).expect("checked").running = false;
        Ok(())
    }

    /// Boots a shut-down VM (its devices are borrowed again at the guest's reset).
    pub fn boot_vm(&mut self, vm: VmId) -> Result<(), MdevError> {
        self.vms
            .get_mut(&vm)
            .ok_or(MdevError::UnknownVm(vm))?
            .running = true;
        Ok(())
    }

    /// Cold migration to `to`: shut down, guest memory allocated on `to` (`node`), its
    /// bytes copied (CPU loads at the old host, stores at the new), the old pages freed,
    /// the VM's mdevs moved to `to`'s parents, the VM booted there.
    pub fn migrate_vm(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        vm: VmId,
        to: HostId,
        node: u32,
    ) -> Result<(), MdevError> {
        let v = self.vm(vm)?;
        if f.topo.hosts.get(to.index()).is_none() {
            return Err(MdevError::Invalid(format!("no host #{to}")));
        }
        if v.host == to {
            return Err(MdevError::Invalid(format!(
                "VM `{}` is already on host `{}`",
                v.name,
                f.topo.host(to).name
            )));
        }
        for md in self.mdevs.values().filter(|m| m.vm == vm) {
            let d = c.device(md.fdid)?;
            if d.host == to {
                return Err(MdevError::Invalid(format!(
                    "VM `{}` cannot move to `{}`: its mdev's device {} lives there, and MDEV passes through devices of other hosts",
                    v.name,
                    f.topo.host(to).name,
                    d.label()
                )));
            }
        }
        self.shutdown_vm(c, f, vm)?;
        let v = self.vm(vm)?.clone();
        let config = VmConfig { node, ..v.config };
        let pages = alloc_guest(f, to, &v.name, config)?;
        let p = config.page.bytes();
        let chunk = p.min(2 << 20) as usize;
        let mut src = vec![0u8; chunk];
        let mut dst = vec![0u8; chunk];
        let old = Requester::Cpu {
            host: v.host,
            package: 0,
        };
        let new = Requester::Cpu {
            host: to,
            package: 0,
        };
        let fault = |e| MdevError::Fault(format!("{e:?}"));
        for (gpa, &from) in &v.pages {
            let at = pages[gpa];
            for off in (0..p).step_by(chunk) {
                f.load(old, from + off, &mut src).map_err(fault)?;
                if src.iter().all(|&x| x == 0) {
                    // Skip zeros the new page already holds (sparse memory stays sparse).
                    f.load(new, at + off, &mut dst).map_err(fault)?;
                    if dst.iter().all(|&x| x == 0) {
                        continue;
                    }
                }
                f.store(new, at + off, &src).map_err(fault)?;
            }
        }
        free_guest(f, v.host, &v)?;
        let x = self.vms.get_mut(&vm).expect("checked");
        x.host = to;
        x.config = config;
        x.pages = pages;
        x.running = true;
        for md in self.mdevs.values_mut().filter(|m| m.vm == vm) {
            md.host = to;
        }
        Ok(())
    }

    /// Shuts a VM down and frees its memory; its mdevs go with it.
    pub fn destroy_vm(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        vm: VmId,
    ) -> Result<(), MdevError> {
        self.shutdown_vm(c, f, vm)?;
        let v = self.vms.remove(&vm).expect("checked");
        self.mdevs.retain(|_, m| m.vm != vm);
        free_guest(f, v.host, &v)
    }
}
