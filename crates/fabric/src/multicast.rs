//! PCIe multicast groups (PCIe Base Spec §6.14; Dolphin PXH830/MXS824 clusters): a posted
//! write into a group's multicast window on the sending adapter is replicated by the
//! switches to every member of the group. The window is a run of the sending adapter's
//! address-LUT entries marked with the group (what MC_Base_Address/MC_Index_Position
//! select in a switch: a range of the sender's NTB BAR), so it takes finite LUT entries
//! like any window and decodes with the same BAR. A member is a host and the far address
//! of its segment; the way from the sending adapter to the member's adapter is kept while
//! the member is in the group. Reads of a multicast address are refused
//! (`FaultKind::MulticastRead`): switches replicate posted writes only.
//!
//! The table is finite: `catalog::MULTICAST_GROUPS` groups in the whole fabric, because a
//! group's index must mean the same group in every switch it crosses.

use crate::topology::{HostId, NtbId};

pub use crate::ids::GroupId;

/// One member: its host, the far address of its segment, the adapter it is reached by
/// and the way there (an index into the fabric's ways).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McMember {
    pub host: HostId,
    pub far_addr: u64,
    pub dst: NtbId,
    pub(crate) way: u32,
}

/// A multicast group as programmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McGroup {
    pub id: GroupId,
    /// The sending adapter, whose LUT entries `first..first + count` are the window.
    pub ntb: NtbId,
    pub size: u64,
    pub first: u32,
    pub count: u32,
    /// The bus address, on the sender's host, of the group's byte 0.
    pub local_addr: u64,
    pub members: Vec<McMember>,
    /// Member copies written (one per member per store of a TLP's bytes).
    pub delivered: u64,
    /// Member copies not delivered: the member was dead (cable down, host crashed) or
    /// its route faulted; each one is also in the fault log.
    pub skipped: u64,
}

/// The reusable buffer `Fabric::route_multicast` fills: per member, the route or why
/// there is none. Grows once to the group's size, then is reused without allocating.
#[derive(Clone, Debug, Default)]
pub struct McRoutes {
    pub group: Option<GroupId>,
    /// Steps shared by every member (up to and including the replication point).
    pub shared: usize,
    /// The route to the sending adapter (what `route` gives).
    pub prefix: crate::path::Path,
    len: usize,
    pub(crate) routes: Vec<(
        Result<crate::path::Target, crate::path::Fault>,
        crate::path::Path,
    )>,
}

impl McRoutes {
    /// The members' routes, in member order.
    pub fn members(
        &self,
    ) -> &[(
        Result<crate::path::Target, crate::path::Fault>,
        crate::path::Path,
    )] {
        &self.routes[..self.len]
    }
    pub(crate) fn reset(&mut self, n: usize) {
        if self.routes.len() < n {
            self.routes.resize_with(n, || {
                (
                    Err(crate::path::Fault {
                        kind: crate::path::FaultKind::NoWindow,
                        host: HostId(0),
                        requester: crate::topology::Rid(0),
                        addr: 0,
                        access: crate::path::Access::Write,
                    }),
                    crate::path::Path::with_capacity(48),
                )
            });
        }
        self.len = n;
    }
}
