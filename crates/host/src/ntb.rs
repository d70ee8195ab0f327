//! The NTB driver of one adapter: the only code that programs address-LUT windows and
//! requester-ID LUT entries on drivers' behalf. Windows and requester entries are shared
//! between mappings and reference-counted, so unmapping one never breaks another.

use fabric::ntb::WindowMapping;
use fabric::{CableEnd, Fabric, HostId, NtbId, Rid};
use rustc_hash::FxHashMap;

use crate::error::HostError;

#[derive(Clone, Debug)]
struct Window {
    m: WindowMapping,
    dst_host: HostId,
    /// The far addresses the windows cover: `[far_base, far_end)`.
    far_base: u64,
    far_end: u64,
    /// The local bus address of `far_base` (the first window's start in the BAR).
    local_base: u64,
    refs: u32,
}

#[derive(Clone, Debug, Default)]
pub struct NtbDriver {
    windows: Vec<Window>,
    /// Requester entries this driver added (a CPU's reserved entries are not among them).
    requesters: FxHashMap<Rid, u32>,
}

impl NtbDriver {
    /// Address-LUT windows programmed through this driver and still held.
    pub fn windows_held(&self) -> usize {
        self.windows.iter().map(|w| w.m.count as usize).sum()
    }

    /// Requester-ID LUT entries added through this driver and still held.
    pub fn requesters_held(&self) -> usize {
        self.requesters.len()
    }

    /// Lets `rid` send through `ntb`; returns its requester-ID LUT index and whether the
    /// caller now holds a reference to release (not so for a CPU's reserved entry).
    pub(crate) fn acquire_requester(
        &mut self,
        f: &mut Fabric,
        ntb: NtbId,
        rid: Rid,
        log: &mut Vec<String>,
    ) -> Result<(u8, bool), HostError> {
        if let Some(i) = f.ntb_state(ntb).rid_index(rid) {
            return Ok(match self.requesters.get_mut(&rid) {
                Some(refs) => {
                    *refs += 1;
                    (i, true)
                }
                // Already there and not ours (a CPU's reserved entry): used, not held.
                None => (i, false),
            });
        }
        let i = f.ntb_add_requester(ntb, rid)?;
        log.push(format!(
            "added requester {rid} to {} requester-ID LUT entry {i}",
            f.topo.cable_end_label(CableEnd::Ntb(ntb))
        ));
        self.requesters.insert(rid, 1);
        Ok((i, true))
    }

    pub(crate) fn release_requester(
        &mut self,
        f: &mut Fabric,
        ntb: NtbId,
        rid: Rid,
    ) -> Result<(), HostError> {
        let refs = self.requesters.get_mut(&rid).ok_or_else(|| {
            HostError::Invalid(format!("requester {rid} holds no entry on NTB {ntb}"))
        })?;
        *refs -= 1;
        if *refs == 0 {
            self.requesters.remove(&rid);
            f.ntb_remove_requester(ntb, rid)?;
        }
        Ok(())
    }

    /// Makes `[far, far+len)` in `dst_host` reachable through `ntb`, reusing a held window
    /// that covers it; returns the local bus address of `far` and the window's key.
    pub(crate) fn acquire_window(
        &mut self,
        f: &mut Fabric,
        ntb: NtbId,
        dst_host: HostId,
        far: u64,
        len: u64,
        log: &mut Vec<String>,
    ) -> Result<(u64, u32), HostError> {
        let end = far
            .checked_add(len)
            .ok_or_else(|| HostError::Invalid(format!("{far:#x} + {len:#x} overflows")))?;
        if let Some(w) = self
            .windows
            .iter_mut()
            .find(|w| w.dst_host == dst_host && w.far_base <= far && end <= w.far_end)
        {
            w.refs += 1;
            return Ok((local(w, far), w.m.first));
        }
        let ws = f.topo.ntbs[ntb.index()].window_size;
        let page = far - far % fabric::iommu::PAGE;
        let m = f.ntb_map_window(ntb, dst_host, page, end - page)?;
        log.push(format!(
            "programmed {} address-LUT window {} -> {} {page:#x}",
            f.topo.cable_end_label(CableEnd::Ntb(ntb)),
            m.first,
            f.topo.host(dst_host).name,
        ));
        let far_base = page - page % ws;
        let w = Window {
            m,
            dst_host,
            far_base,
            far_end: far_base + m.count as u64 * ws,
            local_base: m.local_addr - (page - far_base),
            refs: 1,
        };
        let at = local(&w, far);
        self.windows.push(w);
        Ok((at, m.first))
    }

    pub(crate) fn release_window(&mut self, f: &mut Fabric, first: u32) -> Result<(), HostError> {
        let i = self
            .windows
            .iter()
            .position(|w| w.m.first == first)
            .ok_or_else(|| HostError::Invalid(format!("no held NTB window {first}")))?;
        self.windows[i].refs -= 1;
        if self.windows[i].refs == 0 {
            let w = self.windows.swap_remove(i);
            f.ntb_unmap_window(&w.m)?;
        }
        Ok(())
    }
}

/// The local bus address of far address `far` inside window `w`.
fn local(w: &Window, far: u64) -> u64 {
    w.local_base + (far - w.far_base)
}
