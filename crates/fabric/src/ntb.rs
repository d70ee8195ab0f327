//! NTB adapter state as finite hardware: the address LUT (equal windows of the window BAR,
//! each pointing at a window-aligned address in another host) and the requester-ID LUT
//! (which requesters may send through the adapter; the entry index becomes the proxy
//! requester ID on the far side, so completions find their way back).

use crate::error::FabricError;
use crate::multicast::GroupId;
use crate::topology::{HostId, Ntb, NtbId, Rid};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LutEntry {
    /// The adapter in the far host where translated TLPs come out.
    pub dst: NtbId,
    pub dst_host: HostId,
    /// Window-aligned far-side base address.
    pub far_base: u64,
    /// The way to `dst` through cables and cluster switches, found when the entry was
    /// programmed: an index into the fabric's ways (`Fabric::ntb_way_hops`).
    pub way: u32,
    /// A multicast window's entry: the group it replicates to (`dst`, `dst_host`, `way`
    /// then name the sending adapter itself and `far_base` the offset in the group).
    pub group: Option<GroupId>,
}

/// A mapping made through `Fabric::ntb_map_window`: `count` windows from `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowMapping {
    pub ntb: NtbId,
    pub first: u32,
    pub count: u32,
    /// The bus address on the adapter's own host that reaches the requested far address.
    pub local_addr: u64,
}

#[derive(Clone, Debug)]
pub struct NtbState {
    /// The address LUT, made full size when its first window is programmed: most adapters
    /// of a large cluster never get one, and an empty LUT reads as unprogrammed.
    pub lut: Vec<Option<LutEntry>>,
    /// Entries of the address LUT (the hardware's, whether or not `lut` is made yet).
    pub lut_windows: u32,
    pub rids: Vec<Option<Rid>>,
    pub reserved: u32,
}

impl NtbState {
    /// Fresh state; the reserved requester entries hold the host's CPU requester (the root
    /// complex's ID) so CPU loads and stores can cross.
    pub fn new(ntb: &Ntb, cpu_rid: Rid) -> NtbState {
        let mut rids = vec![None; ntb.adapter.rid_lut_entries as usize];
        for slot in rids.iter_mut().take(ntb.adapter.rid_reserved as usize) {
            *slot = Some(cpu_rid);
        }
        NtbState {
            lut: Vec::new(),
            lut_windows: ntb.lut_windows,
            rids,
            reserved: ntb.adapter.rid_reserved,
        }
    }

    /// First fit of `count` consecutive free windows.
    pub fn alloc_windows(&mut self, count: u32, entry_of: impl Fn(u32) -> LutEntry) -> Option<u32> {
        let n = self.lut_windows;
        if self.lut.is_empty() {
            self.lut = vec![None; n as usize];
        }
        let mut run = 0;
        for i in 0..n {
            if self.lut[i as usize].is_none() {
                run += 1;
                if run == count {
                    let first = i + 1 - count;
                    for k in 0..count {
                        self.lut[(first + k) as usize] = Some(entry_of(k));
                    }
                    return Some(first);
                }
            } else {
                run = 0;
            }
        }
        None
    }

    pub fn free_windows(&self) -> usize {
        self.lut_windows as usize - self.lut.iter().filter(|e| e.is_some()).count()
    }

    /// Address-LUT windows programmed.
    pub fn programmed_windows(&self) -> usize {
        self.lut.iter().filter(|e| e.is_some()).count()
    }

    /// The programmed entry of address-LUT window `window`, if any.
    #[inline]
    pub fn window(&self, window: u32) -> Option<LutEntry> {
        self.lut.get(window as usize).copied().flatten()
    }

    pub fn free_rids(&self) -> usize {
        self.rids.iter().filter(|e| e.is_none()).count()
    }

    #[inline]
    pub fn rid_index(&self, rid: Rid) -> Option<u8> {
        self.rids
            .iter()
            .position(|r| *r == Some(rid))
            .map(|i| i as u8)
    }

    pub fn add_requester(&mut self, rid: Rid, on: &str) -> Result<u8, FabricError> {
        if let Some(i) = self.rid_index(rid) {
            return Ok(i);
        }
        let cap = self.rids.len();
        let slot =
            self.rids
                .iter()
                .position(|r| r.is_none())
                .ok_or_else(|| FabricError::Exhausted {
                    what: "requester-ID LUT",
                    on: on.to_string(),
                    capacity: cap,
                })?;
        self.rids[slot] = Some(rid);
        Ok(slot as u8)
    }

    pub fn remove_requester(&mut self, rid: Rid) -> Result<(), FabricError> {
        match self.rid_index(rid) {
            Some(i) if (i as u32) < self.reserved => Err(FabricError::Invalid(format!(
                "requester {rid} holds a reserved CPU entry and cannot be removed"
            ))),
            Some(i) => {
                self.rids[i as usize] = None;
                Ok(())
            }
            None => Err(FabricError::Invalid(format!(
                "requester {rid} is not in the requester-ID LUT"
            ))),
        }
    }
}

/// The requester ID under which a TLP that used requester-LUT entry `index` appears on the
/// far side: on the far NTB function's bus, devices 1.. (device 0 is the function itself).
pub fn proxy_rid(far_fn: Rid, index: u8) -> Rid {
    Rid::new(far_fn.bus(), 1 + index / 8, index % 8)
}
