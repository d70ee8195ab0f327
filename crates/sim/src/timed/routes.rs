//! Timed routes: a request routed by the fabric becomes the hops it takes in the `Net`
//! (wires, roots, IOMMU, NTB translation, interconnect, memory), cached per requester,
//! page and access kind for one routing epoch, with routes of equal hops shared.

use fabric::{
    Access, CableEnd, Fault, FaultKind, HostId, NodeKind, NtbId, Path, PcieNodeId, Request,
    Requester, Step, Target, UncoreHop,
};

use super::{ns, sink_address, TimedFabric, NONE};
use crate::net::{ComponentId, Hop, Issue};

use crate::time::Time;

impl TimedFabric {
    /// The latency matrix's delay on a route into `node`'s DRAM of `host` whose steps in
    /// that host are `steps`, if the platform has a matrix and it is not zero. The row
    /// is the package where the request joins the host's coherent fabric — the root's
    /// for DMA (for a root on an I/O hub, the first package it reaches), the cores' for a
    /// CPU access — taken as that package's first node.
    fn memory_delay(&self, steps: &[Step], host: HostId, node: u32) -> Option<Time> {
        let delay = self.mem_delay[host.index()].as_ref()?;
        let p = self.fabric.topo.platform_of(host);
        let entry = steps
            .iter()
            .find_map(|s| match *s {
                Step::Interconnect { host: h, hop } if h == host => {
                    [hop.from, hop.to].into_iter().find(|&v| v < p.packages)
                }
                _ => None,
            })
            .unwrap_or_else(|| p.package_of_node(node));
        let d = delay[(entry * p.nodes_per_package) as usize][node as usize];
        (d > Time::ZERO).then_some(d)
    }

    /// The wire of one interconnect hop of `host`, in its direction of travel.
    pub(super) fn ic_wire(&self, host: HostId, hop: &UncoreHop) -> u32 {
        let l = &self.fabric.topo.platform_of(host).interconnect[hop.link as usize];
        let dir = if l.a == hop.from { 0 } else { 1 };
        self.ic_wires[host.index()][hop.link as usize][dir]
    }

    fn requester_key(r: Requester) -> u32 {
        match r {
            Requester::Function(n) => n.0,
            Requester::Cpu { host, package } => 0x8000_0000 | (host.0 << 8) | package,
        }
    }

    /// `req` as one TLP of component `owner` ready to send on flow `flow` (its route, sink
    /// address and header size), or `None` when nothing routes it: what a driver's CPU
    /// does for each register access and queue entry.
    pub fn issue(&mut self, req: &Request, owner: ComponentId, flow: u32) -> Option<Issue> {
        let (r, t) = self.route(req).ok()?;
        Some(Issue {
            addr64: req.addr >= 1 << 32,
            ..Issue::new(r, owner, flow, req.len, sink_address(&t))
        })
    }

    /// The timed route of a request (cached per requester, 4 KiB page and access kind).
    pub fn route(&mut self, req: &Request) -> Result<(u32, Target), Fault> {
        let key = (
            Self::requester_key(req.requester),
            req.addr >> 12,
            req.access == Access::Read,
        );
        if self.cache.epoch != self.fabric.routing_epoch() {
            self.cache.map.clear();
            self.cache.epoch = self.fabric.routing_epoch();
        }
        if let Some(&(r, t)) = self.cache.map.get(&key) {
            let t = match t {
                Target::Ram {
                    host,
                    node,
                    addr,
                    offset,
                } => Target::Ram {
                    host,
                    node,
                    addr: addr - (addr & 0xfff) + (req.addr & 0xfff),
                    offset: offset - (offset & 0xfff) + (req.addr & 0xfff),
                },
                Target::Bar { node, bar, offset } => Target::Bar {
                    node,
                    bar,
                    offset: offset - (offset & 0xfff) + (req.addr & 0xfff),
                },
                Target::Interrupt { host, apic, addr } => Target::Interrupt {
                    host,
                    apic,
                    addr: addr - (addr & 0xfff) + (req.addr & 0xfff),
                },
                Target::Multicast { group, offset } => Target::Multicast {
                    group,
                    offset: offset - (offset & 0xfff) + (req.addr & 0xfff),
                },
            };
            return Ok((r, t));
        }
        let mut path = std::mem::take(&mut self.path);
        let mut res = self.fabric.route(req, &mut path);
        // A multicast write is timed as one TLP along the route of its slowest copy: the
        // sender's part and the ways' shared cables and switches are charged once (one
        // TLP to the replication point), the rest is that member's own way. The other
        // copies leave the replication point on their own egress ports in parallel and
        // are not simulated as TLPs (their bytes are stored by `Fabric::store`).
        let mut mc_target = None;
        if let Ok(t @ Target::Multicast { .. }) = res {
            res = self.slowest_copy(req, &mut path);
            mc_target = Some(t);
        }
        let out = res.map(|t| {
            // Hops are built in a reused buffer: a route is allocated only when new.
            let mut hops = std::mem::take(&mut self.hop_scratch);
            hops.clear();
            self.hops(&path, &t, req.access, &mut hops);
            let id = self.intern(&hops);
            self.hop_scratch = hops;
            (id, mc_target.unwrap_or(t))
        });
        self.path = path;
        if let Ok(v) = out {
            self.cache.map.insert(key, v);
        }
        out
    }

    /// The member of the multicast group `req` writes to whose copy lands last at zero
    /// load: its full route into `path`, its target. No live member: the first one's
    /// fault (a group without members: `NoWindow`, nothing receives the write).
    fn slowest_copy(&mut self, req: &Request, path: &mut Path) -> Result<Target, Fault> {
        let mut mc = std::mem::take(&mut self.mc_scratch);
        let r = self.fabric.route_multicast(req, &mut mc);
        let addr64 = req.addr >= 1 << 32;
        let mut best: Option<(Time, usize)> = None;
        let mut hops = std::mem::take(&mut self.hop_scratch);
        for (i, (t, p)) in mc.members().iter().enumerate() {
            if t.is_err() {
                continue;
            }
            hops.clear();
            self.hops_of(p, req.access, &mut hops);
            let z = hops.iter().fold(Time::ZERO, |acc, h| {
                acc + self.net.zero_load_hop(h, req.len, false, addr64)
            });
            if best.is_none_or(|(b, _)| z > b) {
                best = Some((z, i));
            }
        }
        self.hop_scratch = hops;
        let out = r.and_then(|_| match best {
            Some((_, i)) => {
                let (t, p) = &mc.members()[i];
                path.steps.clear();
                path.steps.extend_from_slice(&p.steps);
                *t
            }
            None => Err(mc.members().first().map_or(
                Fault {
                    kind: FaultKind::NoWindow,
                    host: self.fabric.requester_host(req.requester),
                    requester: self.fabric.requester_rid(req.requester),
                    addr: req.addr,
                    access: req.access,
                },
                |(t, _)| t.expect_err("no live member"),
            )),
        });
        self.mc_scratch = mc;
        out
    }

    /// Maps fabric steps to timed hops, into `hops`.
    fn hops(&mut self, path: &Path, target: &Target, access: Access, hops: &mut Vec<Hop>) {
        self.hops_of(path, access, hops);
        // DDIO: a device write allocates in the LLC only when it reaches memory through a
        // root of the memory's own package (no interconnect hop inside the target host).
        let in_target = path
            .steps
            .iter()
            .rposition(|s| matches!(s, Step::NtbWindow { .. }))
            .map_or(0, |i| i + 1);
        let local = !path.steps[in_target..]
            .iter()
            .any(|s| matches!(s, Step::Interconnect { .. }));
        if let Target::Ram { host, node, .. } = *target {
            if let Some(d) = self.memory_delay(&path.steps[in_target..], host, node) {
                hops.push(Hop::MemoryDelay(d));
            }
        }
        hops.push(match *target {
            Target::Ram { host, node, .. } => {
                Hop::Sink(self.ram_sinks[host.index()][node as usize], local)
            }
            Target::Bar { node, .. } => Hop::Sink(self.bar_sinks[node.index()], false),
            Target::Interrupt { host, .. } => Hop::Sink(self.interrupt_sink(host), false),
            // `route` times a multicast write by its slowest copy's own target.
            Target::Multicast { .. } => unreachable!("a multicast write is timed per member"),
        });
    }

    /// The fabric path of `req` and, per step, the time it charges one TLP of the
    /// request's length at zero load (serialization and propagation of a link or cable,
    /// a chip's or root's delay, an NTB translation, an IOTLB hit; nothing for a
    /// requester-ID substitution). The sink's latency is not a step's: the steps sum to
    /// the flow model's zero-load time until the TLP reaches its sink. Experiments derive
    /// the share of a route's time spent in a part of it (e.g. between two NTB adapters)
    /// from this, never from constants of their own.
    pub fn step_times(&mut self, req: &Request) -> Result<(Path, Vec<Time>), Fault> {
        let mut path = Path::with_capacity(32);
        if let Target::Multicast { .. } = self.fabric.route(req, &mut path)? {
            self.slowest_copy(req, &mut path)?;
        }
        let mut hops = Vec::with_capacity(path.steps.len() + 2);
        let mut step_of = Vec::with_capacity(path.steps.len() + 2);
        self.hops_of_steps(&path, req.access, &mut hops, Some(&mut step_of));
        let addr64 = req.addr >= 1 << 32;
        // A write carries its bytes; a read's request carries none (its completions
        // travel the reverse route).
        let payload = match req.access {
            Access::Write => req.len,
            Access::Read => 0,
        };
        let mut times = vec![Time::ZERO; path.steps.len()];
        for (h, &i) in hops.iter().zip(&step_of) {
            times[i] += self.net.zero_load_hop(h, payload, false, addr64);
        }
        Ok((path, times))
    }

    /// The timed hops of a path's steps (without the sink), appended to `hops`.
    fn hops_of(&self, path: &Path, access: Access, hops: &mut Vec<Hop>) {
        self.hops_of_steps(path, access, hops, None)
    }

    /// As `hops_of`, also recording in `step_of` the index of the step each hop times.
    fn hops_of_steps(
        &self,
        path: &Path,
        access: Access,
        hops: &mut Vec<Hop>,
        mut step_of: Option<&mut Vec<usize>>,
    ) {
        let topo = &self.fabric.topo;
        let mut cable_from = CableEnd::Ntb(NtbId(0));
        for (i, s) in path.steps.iter().enumerate() {
            if let Some(v) = step_of.as_deref_mut() {
                v.resize(hops.len(), i.saturating_sub(1));
            }
            match *s {
                Step::Link { node, down } => {
                    hops.push(Hop::Wire(self.link_wires[node.index()][down as usize]))
                }
                Step::Switch { node } => {
                    let NodeKind::Switch { chip, .. } = topo.node(node).kind else {
                        unreachable!()
                    };
                    hops.push(Hop::Delay(ns(topo.chip(chip).latency_ns)));
                }
                Step::Root { node } => {
                    let host = topo.node(node).host;
                    let pt = self.timing_of(host);
                    let rest = &path.steps[i + 1..];
                    let forwards = rest
                        .iter()
                        .any(|s| matches!(s, Step::Link { down: true, .. }));
                    if i == 0 {
                        // A CPU's request enters the hierarchy here; its cost is the
                        // CPU's (`cpu_mmio_write_ns`), charged by the driver.
                    } else if forwards {
                        hops.push(Hop::Delay(ns(pt.rc_p2p_latency_ns)));
                        let sp = self.splitters[node.index()];
                        if access == Access::Read && sp != NONE {
                            hops.push(Hop::RootSplit(sp));
                        }
                    } else {
                        hops.push(Hop::Delay(ns(pt.rc_latency_ns)));
                    }
                }
                Step::Interconnect { host, hop } => hops.push(Hop::Wire(self.ic_wire(host, &hop))),
                Step::Iommu { host, .. } => hops.push(Hop::Iommu(self.iotlbs[host.index()])),
                Step::NtbWindow { ntb, .. } => {
                    cable_from = CableEnd::Ntb(ntb);
                    hops.push(Hop::Delay(self.ntb_translate[ntb.index()]));
                }
                Step::RidLut { .. } => {}
                Step::Cable { cable } => {
                    let c = &topo.cables[cable.index()];
                    let dir = if c.ends[0] == cable_from { 0 } else { 1 };
                    cable_from = c.ends[1 - dir];
                    hops.push(Hop::Wire(self.cable_wires[cable.index()][dir]));
                }
                Step::ClusterSwitch { switch } => {
                    cable_from = CableEnd::ClusterSwitch(switch);
                    let chip = topo.cluster_switches[switch.index()].chip;
                    hops.push(Hop::Delay(ns(topo.chip(chip).latency_ns)));
                }
            }
        }
        if let Some(v) = step_of {
            v.resize(hops.len(), path.steps.len().saturating_sub(1));
        }
    }

    /// The sink of `host`'s interrupt delivery (made on first use). The root's handling is
    /// on the route; what the CPU does next is the host model's, so the sink adds nothing.
    pub fn interrupt_sink(&mut self, host: HostId) -> u32 {
        if let Some(&s) = self.cache.interrupt_sinks.get(&host) {
            return s;
        }
        let name = format!("{} interrupts", self.fabric.topo.host(host).name);
        let s = self
            .net
            .add_sink(&name, f64::INFINITY, Time::ZERO, Time::ZERO, 64);
        self.cache.interrupt_sinks.insert(host, s);
        s
    }

    /// The sink of a function's memory BARs (registers and memory behind them), where
    /// writes reach the model that owns it (`Net::set_sink_owner`).
    pub fn bar_sink(&self, node: PcieNodeId) -> Option<u32> {
        self.bar_sinks
            .get(node.index())
            .copied()
            .filter(|&s| s != NONE)
    }

    /// The sink of a function's configuration space (made on first use).
    pub fn config_sink(&mut self, node: PcieNodeId) -> u32 {
        if let Some(&s) = self.cache.config_sinks.get(&node) {
            return s;
        }
        let name = format!("{} config space", self.fabric.topo.node_label(node));
        let s = self
            .net
            .add_sink(&name, f64::INFINITY, Time::ZERO, Time::ZERO, 64);
        self.cache.config_sinks.insert(node, s);
        s
    }

    /// The timed route of a configuration request from a CPU of `package` in `host` to
    /// the function with requester ID `rid` (routed by ID, down from its root), and the
    /// function. Register offsets travel as the sink address.
    pub fn config_route(
        &mut self,
        host: HostId,
        package: u32,
        rid: fabric::Rid,
        write: bool,
    ) -> Result<(u32, PcieNodeId), Fault> {
        let mut path = std::mem::take(&mut self.path);
        let res = self
            .fabric
            .config_route(host, package, rid, write, &mut path);
        let out = res.map(|node| {
            let sink = self.config_sink(node);
            let access = if write { Access::Write } else { Access::Read };
            let mut hops = Vec::with_capacity(path.steps.len() + 1);
            self.hops_of(&path, access, &mut hops);
            hops.push(Hop::Sink(sink, false));
            (self.intern(&hops), node)
        });
        self.path = path;
        out
    }

    /// The route id of these hops, registering them the first time they are seen.
    fn intern(&mut self, hops: &[Hop]) -> u32 {
        match self.dedup.get(hops) {
            Some(&id) => id,
            None => {
                let id = self.net.add_route(hops.to_vec());
                self.dedup.insert(hops.to_vec(), id);
                id
            }
        }
    }
}
