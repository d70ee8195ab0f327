//! Multicast groups, programmed for systems that use them (SmartIO's multicast
//! segments): a group whose window is on a host's adapter, members joining with a segment
//! of their RAM, leaving, and the group destroyed. The fabric keeps the group table and
//! replicates; this layer is the only code that programs it.

use fabric::{Fabric, GroupId, HostId, NtbId, Owner};

use crate::dma::{Hosts, PhysAddr};
use crate::error::HostError;

/// A multicast group as its creator holds it: a posted write of up to `size` bytes at
/// `local + offset` on the sending host lands at `offset` in every member's segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McHandle {
    pub group: GroupId,
    pub sender: HostId,
    pub ntb: NtbId,
    /// The bus address, on the sending host, of the group's byte 0 (its multicast window).
    pub local: u64,
    pub size: u64,
}

impl Hosts {
    /// A multicast group of `size` bytes sent from `sender`'s first NTB adapter (the one
    /// its DMA API uses). A full group table or LUT is `FabricError::Exhausted`.
    pub fn mcast_create(
        &mut self,
        f: &mut Fabric,
        sender: HostId,
        size: u64,
    ) -> Result<McHandle, HostError> {
        let h = f
            .topo
            .hosts
            .get(sender.index())
            .ok_or_else(|| HostError::Invalid(format!("no host {sender}")))?;
        let ntb = *h.ntbs.first().ok_or_else(|| {
            HostError::Invalid(format!(
                "host `{}` has no NTB adapter to multicast from",
                h.name
            ))
        })?;
        let group = f.multicast_create(ntb, size)?;
        let local = f.multicast_group(group).expect("just made").local_addr;
        self.log.push(format!(
            "multicast group {group}: {size:#x} bytes from {} at {local:#x}",
            f.topo.host(sender).name
        ));
        Ok(McHandle {
            group,
            sender,
            ntb,
            local,
            size,
        })
    }

    /// `seg.host` joins with `g.size` bytes of its RAM at `seg.addr`: the whole segment
    /// must be RAM of that host (a group's bytes land in memory, not in a BAR).
    pub fn mcast_join(
        &mut self,
        f: &mut Fabric,
        g: &McHandle,
        seg: PhysAddr,
    ) -> Result<(), HostError> {
        let host = f
            .topo
            .hosts
            .get(seg.host.index())
            .ok_or_else(|| HostError::Invalid(format!("no host {}", seg.host)))?;
        let ram = host
            .decode(seg.addr)
            .filter(|r| matches!(r.owner, Owner::Ram { .. }) && seg.addr + g.size <= r.end);
        if ram.is_none() {
            return Err(HostError::Invalid(format!(
                "{:#x} + {:#x} is not RAM of host `{}`: a multicast member's segment must be",
                seg.addr, g.size, host.name
            )));
        }
        f.multicast_join(g.group, seg.host, seg.addr)?;
        self.log.push(format!(
            "multicast group {}: {} joins at {:#x}",
            g.group,
            f.topo.host(seg.host).name,
            seg.addr
        ));
        Ok(())
    }

    /// `host` leaves the group.
    pub fn mcast_leave(
        &mut self,
        f: &mut Fabric,
        g: &McHandle,
        host: HostId,
    ) -> Result<(), HostError> {
        f.multicast_leave(g.group, host)?;
        Ok(())
    }

    /// The group goes: members leave, its window's LUT entries are freed.
    pub fn mcast_destroy(&mut self, f: &mut Fabric, g: &McHandle) -> Result<(), HostError> {
        f.multicast_destroy(g.group)?;
        self.log
            .push(format!("multicast group {} destroyed", g.group));
        Ok(())
    }
}
