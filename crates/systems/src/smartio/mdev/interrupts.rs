//! Interrupts into VMs: guest MSI vectors given host vectors, MSIs relayed from the
//! fabric's interrupt log, legacy INTx relayed from the lender.

use fabric::Fabric;

use super::{Hypervisor, MdevError, MdevId, VmInterrupt, FIRST_HOST_VECTOR};
use crate::smartio::agent::ControlKind;
use crate::smartio::lending::{Cluster, MsiRoute};

impl Hypervisor {
    /// The guest enables MSI vector `guest_vector` (trapped by the mdev): the hypervisor
    /// gives it a host vector of the VM's host and redirects the device's MSI there
    /// (`Cluster::setup_msi`, one counted message). Returns the route.
    pub fn guest_enable_msi(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
        guest_vector: u32,
    ) -> Result<MsiRoute, MdevError> {
        let (md, v) = self.running_vm(m)?;
        let b = md.borrow.ok_or_else(|| {
            MdevError::Invalid(format!(
                "VM `{}` has not reset its device yet: nothing is borrowed to send MSIs",
                v.name
            ))
        })?;
        let host_vector = FIRST_HOST_VECTOR + self.next_vector;
        let apic = 0u8;
        let r = c.setup_msi(f, b, host_vector, apic)?;
        self.next_vector += 1;
        self.mdevs
            .get_mut(&m)
            .expect("checked")
            .msi
            .push((r, apic as u32, guest_vector));
        Ok(r)
    }

    /// Injects into their VMs the MSIs of mdevs that arrived at their hosts since the
    /// last call (read from the fabric's interrupt log); returns how many.
    pub fn relay_interrupts(&mut self, f: &Fabric) -> usize {
        let log = f.interrupts();
        if self.seen > log.len() {
            self.seen = 0;
        }
        let mut n = 0;
        for msi in &log[self.seen..] {
            let hit = self.mdevs.iter().find_map(|(&id, md)| {
                let b = md.borrow?;
                (b.host == msi.host)
                    .then(|| {
                        md.msi
                            .iter()
                            .find(|(r, apic, _)| *apic == msi.apic && r.data == msi.data)
                            .map(|&(_, _, gv)| (id, md.vm, gv))
                    })
                    .flatten()
            });
            if let Some((mdev, vm, vector)) = hit {
                if let Some(v) = self.vms.get_mut(&vm) {
                    v.interrupts.push(VmInterrupt::Msi {
                        mdev,
                        vector,
                        data: msi.data,
                    });
                    self.stats.msi_injections += 1;
                    n += 1;
                }
            }
        }
        self.seen = log.len();
        n
    }

    /// The device asserts its legacy INTx at the lender. Unless the device's Interrupt
    /// Disable bit (as the guest last wrote it) holds it back, the lender's agent relays
    /// it to the VM's host (one counted `IntxRelay` message), which injects it. Returns
    /// whether it reached the VM.
    pub fn lender_intx(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
    ) -> Result<bool, MdevError> {
        let md = self.mdev(m)?;
        let Some(b) = md.borrow else {
            return Ok(false);
        };
        let x = c.live(f, b)?;
        let (lender, rid) = (x.lender, f.topo.node(x.function).rid);
        let mut cmd = [0u8; 2];
        f.config_read(lender, 0, rid, 0x04, &mut cmd)
            .map_err(|e| MdevError::Fault(format!("{e:?}")))?;
        if u16::from_le_bytes(cmd) & crate::smartio::lending::CMD_INTX_DISABLE != 0 {
            self.stats.intx_masked += 1;
            return Ok(false);
        }
        c.post(ControlKind::IntxRelay);
        let vm = md.vm;
        let v = self.vms.get_mut(&vm).expect("live");
        v.interrupts.push(VmInterrupt::Intx { mdev: m });
        self.stats.intx_injections += 1;
        Ok(true)
    }
}
