//! Multicast: the group table (groups whose window is a run of a sending adapter's
//! address-LUT entries, and their members), and the routes of a write replicated to
//! every member.

use super::routing::Origin;
use super::Fabric;
use crate::error::FabricError;
use crate::multicast::{GroupId, McGroup, McMember, McRoutes};
use crate::ntb::{proxy_rid, LutEntry};
use crate::path::*;
use crate::topology::*;

impl Fabric {
    /// Per member of the multicast group a write `req` reaches, its route from the
    /// replication point on, in `out` (reused: no allocation once it has grown to the
    /// group). Returns `route`'s target; when it is not `Target::Multicast`, `out` holds
    /// no member and the target is the unicast one. A member whose way is dead (cable
    /// down, a host crashed) or whose route faults gets its fault, never a route.
    pub fn route_multicast(&self, req: &Request, out: &mut McRoutes) -> Result<Target, Fault> {
        out.group = None;
        out.reset(0);
        let t = self.route(req, &mut out.prefix)?;
        let Target::Multicast { group, offset } = t else {
            return Ok(t);
        };
        let g = self.mcast[group.index()]
            .as_ref()
            .expect("a multicast LUT entry names a live group");
        out.group = Some(group);
        out.shared = out.prefix.steps.len();
        out.reset(g.members.len());
        let spec = &self.topo.ntbs[g.ntb.index()];
        let sender = spec.host;
        // The requester as it reaches the adapter (after any earlier NTB crossing).
        let rid = out
            .prefix
            .steps
            .iter()
            .rev()
            .find_map(|s| match *s {
                Step::RidLut { to, .. } => Some(to),
                _ => None,
            })
            .unwrap_or_else(|| self.requester_rid(req.requester));
        let index = self.ntb[g.ntb.index()]
            .rid_index(rid)
            .expect("route checked the requester-ID LUT");
        let from = g.local_addr + offset;
        let window = g.first + (offset / spec.window_size) as u32;
        let base = out.shared - 1;
        let len = req.len.max(1) as u64;
        for (i, m) in g.members.iter().enumerate() {
            let (prefix, slot) = (&out.prefix, &mut out.routes[i]);
            let path = &mut slot.1;
            path.steps.clear();
            path.steps.extend_from_slice(&prefix.steps[..base]);
            let far = m.far_addr + offset;
            let dst = &self.topo.ntbs[m.dst.index()];
            let far_rid = proxy_rid(self.topo.node(dst.fn_node).rid, index);
            let fault = |kind, host, rid, addr| Fault {
                kind,
                host,
                requester: rid,
                addr,
                access: req.access,
            };
            slot.0 = (|| {
                if offset + len > g.size {
                    return Err(fault(FaultKind::CrossesWindow, sender, rid, from));
                }
                path.steps.push(Step::NtbWindow {
                    ntb: g.ntb,
                    window,
                    from,
                    to_host: m.host,
                    to: far,
                });
                path.steps.push(Step::RidLut {
                    ntb: g.ntb,
                    index,
                    from: rid,
                    to: far_rid,
                });
                path.steps.push(Step::Switch {
                    node: spec.chip_node,
                });
                for hop in self.ntb_way_hops(m.way) {
                    match *hop {
                        NtbHop::Cable(c) => {
                            path.steps.push(Step::Cable { cable: c });
                            if let Some(k) = self.cable_fault(c) {
                                return Err(fault(k, sender, rid, from));
                            }
                        }
                        NtbHop::ClusterSwitch(s) => {
                            path.steps.push(Step::ClusterSwitch { switch: s })
                        }
                    }
                }
                path.steps.push(Step::Switch {
                    node: dst.chip_node,
                });
                self.walk(req, m.host, far_rid, far, Origin::Node(dst.fn_node), path)
            })();
        }
        Ok(t)
    }

    /// Steps every member's route shares in `r` (from `route_multicast`): the sender's
    /// part and the ways' common cables and cluster switches — the replication point is
    /// the last of them, where the members' ways diverge.
    pub fn multicast_shared_steps(r: &McRoutes) -> usize {
        let m = r.members();
        let Some(((_, first), rest)) = m.split_first() else {
            return 0;
        };
        let mut n = first.steps.len();
        for (_, p) in rest {
            n = n.min(
                first
                    .steps
                    .iter()
                    .zip(&p.steps)
                    .take_while(|(a, b)| {
                        a == b
                            || matches!(
                                (a, b),
                                (Step::NtbWindow { .. }, Step::NtbWindow { .. })
                                    | (Step::RidLut { .. }, Step::RidLut { .. })
                            )
                    })
                    .count(),
            );
        }
        n
    }

    // ---- multicast groups -----------------------------------------------------------

    /// A group as programmed.
    pub fn multicast_group(&self, group: GroupId) -> Option<&McGroup> {
        self.mcast.get(group.index())?.as_ref()
    }

    /// Groups in use.
    pub fn multicast_groups(&self) -> usize {
        self.mcast.iter().filter(|g| g.is_some()).count()
    }

    /// Makes a multicast group of `size` bytes whose window is a run of address-LUT
    /// entries of `ntb` (the sending adapter). A full group table or LUT is
    /// `FabricError::Exhausted`.
    pub fn multicast_create(&mut self, ntb: NtbId, size: u64) -> Result<GroupId, FabricError> {
        let spec = self
            .topo
            .ntbs
            .get(ntb.index())
            .ok_or_else(|| FabricError::Invalid(format!("no NTB adapter {ntb}")))?;
        if size == 0 {
            return Err(FabricError::Invalid("a multicast group of 0 bytes".into()));
        }
        if self.mcast.is_empty() {
            self.mcast = vec![None; crate::catalog::MULTICAST_GROUPS];
        }
        let id = GroupId::from_index(self.mcast.iter().position(|g| g.is_none()).ok_or(
            FabricError::Exhausted {
                what: "multicast group table",
                on: "the fabric".into(),
                capacity: crate::catalog::MULTICAST_GROUPS,
            },
        )?);
        let ws = spec.window_size;
        let count = size.div_ceil(ws);
        let label = self.topo.cable_end_label(CableEnd::Ntb(ntb));
        if count > spec.lut_windows as u64 {
            return Err(FabricError::Invalid(format!(
                "a multicast group of {} exceeds {label}'s NTB BAR",
                crate::units::fmt_size(size)
            )));
        }
        let (host, cap) = (spec.host, spec.lut_windows as usize);
        let first = self.ntb[ntb.index()]
            .alloc_windows(count as u32, |k| LutEntry {
                dst: ntb,
                dst_host: host,
                far_base: k as u64 * ws,
                way: u32::MAX,
                group: Some(id),
            })
            .ok_or(FabricError::Exhausted {
                what: "NTB address LUT",
                on: label,
                capacity: cap,
            })?;
        let bar = self
            .topo
            .node(spec.fn_node)
            .bar(spec.window_bar)
            .expect("NTB window BAR exists");
        self.mcast[id.index()] = Some(McGroup {
            id,
            ntb,
            size,
            first,
            count: count as u32,
            local_addr: bar.addr + first as u64 * ws,
            members: Vec::new(),
            delivered: 0,
            skipped: 0,
        });
        self.routing_epoch += 1;
        Ok(id)
    }

    /// Adds a member: `size` bytes of the group land at `far_addr` in `host`.
    pub fn multicast_join(
        &mut self,
        group: GroupId,
        host: HostId,
        far_addr: u64,
    ) -> Result<(), FabricError> {
        let g = self
            .multicast_group(group)
            .ok_or_else(|| FabricError::Invalid(format!("no multicast group {group}")))?;
        let ntb = g.ntb;
        if g.members.iter().any(|m| m.host == host) {
            return Err(FabricError::Invalid(format!(
                "host `{}` is already a member of multicast group {group}",
                self.topo.host(host).name
            )));
        }
        let dst = self.far_adapter(ntb, host)?;
        let way = self
            .take_way(ntb, dst, 1)
            .expect("a reachable adapter has a way");
        self.mcast[group.index()]
            .as_mut()
            .expect("checked above")
            .members
            .push(McMember {
                host,
                far_addr,
                dst,
                way,
            });
        self.routing_epoch += 1;
        Ok(())
    }

    /// Removes `host` from the group.
    pub fn multicast_leave(&mut self, group: GroupId, host: HostId) -> Result<(), FabricError> {
        let g = self
            .mcast
            .get_mut(group.index())
            .and_then(|g| g.as_mut())
            .ok_or_else(|| FabricError::Invalid(format!("no multicast group {group}")))?;
        let i = g
            .members
            .iter()
            .position(|m| m.host == host)
            .ok_or_else(|| {
                FabricError::Invalid(format!("host {host} is not in multicast group {group}"))
            })?;
        let m = g.members.remove(i);
        self.put_way(m.way);
        self.routing_epoch += 1;
        Ok(())
    }

    /// Removes the group: its members leave and its LUT entries are freed.
    pub fn multicast_destroy(&mut self, group: GroupId) -> Result<(), FabricError> {
        let g = self
            .mcast
            .get_mut(group.index())
            .and_then(|g| g.take())
            .ok_or_else(|| FabricError::Invalid(format!("no multicast group {group}")))?;
        for m in &g.members {
            self.put_way(m.way);
        }
        for i in g.first..g.first + g.count {
            self.ntb[g.ntb.index()].lut[i as usize] = None;
        }
        self.routing_epoch += 1;
        Ok(())
    }
}
