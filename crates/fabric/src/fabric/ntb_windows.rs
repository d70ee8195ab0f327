//! NTB address-LUT windows: programming and freeing the entries of an adapter's window
//! BAR, the requester-ID LUT, and the ways between adapters that programmed entries
//! use (kept per adapter pair while any entry needs them).

use super::{Fabric, Way};
use crate::error::FabricError;
use crate::ntb::{LutEntry, WindowMapping};
use crate::topology::*;

impl Fabric {
    /// The cables and cluster switches of way `way` (a `LutEntry::way`).
    pub fn ntb_way_hops(&self, way: u32) -> &[NtbHop] {
        &self.ways[way as usize].hops
    }

    /// Ways between adapters kept for programmed windows (one per adapter pair in use).
    pub fn ntb_ways_kept(&self) -> usize {
        self.way_of.len()
    }

    /// The way from `src` to `dst` for `entries` more LUT entries: searched when the pair
    /// has none yet.
    pub(super) fn take_way(&mut self, src: NtbId, dst: NtbId, entries: u32) -> Option<u32> {
        let w = match self.way_of.get(&(src, dst)) {
            Some(&w) => w,
            None => {
                let way = Way {
                    ends: (src, dst),
                    hops: self.topo.ntb_way(src, dst)?.into_boxed_slice(),
                    entries: 0,
                };
                let w = match self.free_ways.pop() {
                    Some(w) => {
                        self.ways[w as usize] = way;
                        w
                    }
                    None => {
                        self.ways.push(way);
                        self.ways.len() as u32 - 1
                    }
                };
                self.way_of.insert((src, dst), w);
                w
            }
        };
        self.ways[w as usize].entries += entries;
        Some(w)
    }

    /// One LUT entry no longer uses way `w`; the last one lets it go.
    pub(super) fn put_way(&mut self, w: u32) {
        let way = &mut self.ways[w as usize];
        way.entries -= 1;
        if way.entries == 0 {
            self.way_of.remove(&way.ends);
            way.hops = Box::default();
            self.free_ways.push(w);
        }
    }

    /// The adapter of `dst_host` that `ntb` reaches (by cable or cluster switch).
    pub(super) fn far_adapter(&self, ntb: NtbId, dst_host: HostId) -> Result<NtbId, FabricError> {
        let src_host = self.topo.ntbs[ntb.index()].host;
        self.topo
            .hosts
            .get(dst_host.index())
            .ok_or_else(|| FabricError::Invalid(format!("no host {dst_host}")))?
            .ntbs
            .iter()
            .copied()
            .find(|&d| self.topo.ntb_reaches(ntb, d))
            .ok_or_else(|| FabricError::Unreachable {
                from: self.topo.hosts[src_host.index()].name.clone(),
                to: self.topo.hosts[dst_host.index()].name.clone(),
            })
    }

    /// Programs address-LUT windows of `ntb` so that `size` bytes at `far_addr` in host
    /// `dst_host` become reachable; returns the local bus address of `far_addr`.
    pub fn ntb_map_window(
        &mut self,
        ntb: NtbId,
        dst_host: HostId,
        far_addr: u64,
        size: u64,
    ) -> Result<WindowMapping, FabricError> {
        let dst = self.far_adapter(ntb, dst_host)?;
        if size == 0 {
            return Err(FabricError::Invalid("window size must be > 0".into()));
        }
        let n = &self.topo.ntbs[ntb.index()];
        let ws = n.window_size;
        let base = far_addr - far_addr % ws;
        let count = (far_addr - base + size).div_ceil(ws);
        let label = self.topo.cable_end_label(CableEnd::Ntb(ntb));
        let cap = n.lut_windows as usize;
        // More than the whole BAR can never fit, however empty the LUT: say so and by
        // how much, rather than calling the LUT exhausted.
        if count > n.lut_windows as u64 {
            let bar = ws * n.lut_windows as u64;
            let need = far_addr - base + size;
            return Err(FabricError::Invalid(format!(
                "a window of {} at {far_addr:#x} needs {} of {label}'s BAR of {} ({count} \
                 LUT entries of {}): it exceeds the BAR by {}",
                crate::units::fmt_size(size),
                crate::units::fmt_size(need),
                crate::units::fmt_size(bar),
                crate::units::fmt_size(ws),
                crate::units::fmt_size(need - bar),
            )));
        }
        // Held for the entries below; given back if they do not fit.
        let way = self
            .take_way(ntb, dst, count as u32)
            .expect("a reachable adapter has a way");
        let first = self.ntb[ntb.index()]
            .alloc_windows(count as u32, |k| LutEntry {
                dst,
                dst_host,
                far_base: base + k as u64 * ws,
                way,
                group: None,
            })
            .ok_or(FabricError::Exhausted {
                what: "NTB address LUT",
                on: label,
                capacity: cap,
            });
        let first = match first {
            Ok(first) => first,
            Err(e) => {
                for _ in 0..count {
                    self.put_way(way);
                }
                return Err(e);
            }
        };
        self.routing_epoch += 1;
        let bar = self
            .topo
            .node(self.topo.ntbs[ntb.index()].fn_node)
            .bar(self.topo.ntbs[ntb.index()].window_bar)
            .expect("NTB window BAR exists");
        Ok(WindowMapping {
            ntb,
            first,
            count: count as u32,
            local_addr: bar.addr + first as u64 * ws + (far_addr - base),
        })
    }

    pub fn ntb_unmap_window(&mut self, m: &WindowMapping) -> Result<(), FabricError> {
        let st = &mut self.ntb[m.ntb.index()];
        let range = m.first as usize..(m.first + m.count) as usize;
        if range.end > st.lut.len()
            || st.lut[range.clone()]
                .iter()
                .any(|e| e.is_none_or(|e| e.group.is_some()))
        {
            return Err(FabricError::Invalid(
                "unmapping NTB windows that are not mapped".into(),
            ));
        }
        for i in range {
            let e = self.ntb[m.ntb.index()].lut[i]
                .take()
                .expect("checked above");
            self.put_way(e.way);
        }
        self.routing_epoch += 1;
        Ok(())
    }

    /// Lets `rid` send through `ntb` (a lent device, a registered local requester).
    pub fn ntb_add_requester(&mut self, ntb: NtbId, rid: Rid) -> Result<u8, FabricError> {
        let label = self.topo.cable_end_label(CableEnd::Ntb(ntb));
        self.routing_epoch += 1;
        self.ntb[ntb.index()].add_requester(rid, &label)
    }

    pub fn ntb_remove_requester(&mut self, ntb: NtbId, rid: Rid) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.ntb[ntb.index()].remove_requester(rid)
    }
}
