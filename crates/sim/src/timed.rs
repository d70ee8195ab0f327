//! The fabric given time: every link direction, cable, interconnect link, root complex,
//! IOMMU and memory of a `Fabric` becomes a resource of a `Net`, and a routed request
//! becomes a timed route. Parameters come from the platform's `timing` table, the chip
//! and adapter catalog and each device's `timing` table; a missing one is an error that
//! names it, never a silent default.
//!
//! A platform's memory matrices (`[platform.X.memory]`, row = CPU node, column = memory
//! node) drive memory timing when present. Latency: a line read from node i's package
//! into node j's DRAM takes `latency_ns[i][j]` at zero load — the interconnect wires
//! charge what they charge, node j's DRAM sink the smallest remainder over its column
//! (normally the local access, so LLC and DDIO hits keep their own latency) and a
//! `Hop::MemoryDelay` the rest. Bandwidth: CPU streams from i against j pass a pacer at
//! `bandwidth_gbps[i][j]`; DMA keeps the node's `dram_gbps` sink. Memory-only nodes
//! (`[[platform.X.memory_node]]`) are columns without rows: no CPU runs there; their
//! sink has the node's own `gbps` when given, and no DDIO share.

use fabric::{
    Access, CableEnd, CableId, Fabric, Fault, FaultKind, Host, HostId, McRoutes, NodeKind, NtbId,
    Path, PcieNodeId, Platform, Request, Requester, Step, Target, Topology, UncoreHop,
};
use rustc_hash::FxHashMap;

use crate::component::HasNet;
use crate::cpu_stream::{CpuStream, StreamOp, StreamSpec};
use crate::net::{coherent_bytes, ComponentId, Hop, Issue, Net};
use crate::pcie::{self, serialize};
use crate::time::Time;

/// The keys of a platform's timing table.
pub use fabric::scenario::PLATFORM_TIMING_KEYS as PLATFORM_KEYS;
/// Timing parameters of a platform, validated from `[platform.X.timing]` when the
/// scenario loaded (every key required and range-checked there).
pub use fabric::PlatformTiming;

/// A missing timing table or parameter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TimingError(pub String);

/// Time from nanoseconds (rounded to the picosecond tick).
pub fn ns(x: f64) -> Time {
    Time::from_ps((x * 1000.0).round().max(0.0) as u64)
}

const NONE: u32 = u32::MAX;

/// Routes resolved under one fabric routing epoch; an IOMMU, NTB-LUT or cable change
/// empties it, so a page unmapped after it was routed faults again. It also holds the
/// sinks made on first use: each host's interrupt delivery and each function's
/// configuration space.
#[derive(Default)]
struct RouteCache {
    epoch: u64,
    map: FxHashMap<(u32, u64, bool), (u32, Target)>,
    interrupt_sinks: FxHashMap<HostId, u32>,
    config_sinks: FxHashMap<PcieNodeId, u32>,
}

/// Where a buffer's lines are when a workload starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// In no cache: DMA reads go to DRAM.
    Cold,
    /// Held (modified) in the LLC of `package`, whose cores wrote them last.
    Cached { package: u32 },
    /// Written last by a device of the home package through DDIO: in the DDIO ways.
    Ddio,
}

/// The address a TLP carries to its sink: a RAM node offset, a BAR's index in the top
/// byte above the offset in it, or an MSI address. What `Delivery::Mmio` reports.
pub fn sink_address(t: &Target) -> u64 {
    match *t {
        Target::Ram { offset, .. } => offset,
        Target::Bar { bar, offset, .. } => (bar as u64) << 56 | offset,
        Target::Interrupt { addr, .. } => addr,
        Target::Multicast { offset, .. } => offset,
    }
}

/// (BAR index, offset in it) of a BAR sink address (see `sink_address`).
pub fn bar_register(sink_addr: u64) -> (u8, u64) {
    ((sink_addr >> 56) as u8, sink_addr & ((1 << 56) - 1))
}

/// A fabric and its timed network.
pub struct TimedFabric {
    pub fabric: Fabric,
    pub net: Net,
    pub platform: Vec<PlatformTiming>,
    link_wires: Vec<[u32; 2]>,
    cable_wires: Vec<[u32; 2]>,
    ic_wires: Vec<Vec<[u32; 2]>>,
    ram_sinks: Vec<Vec<u32>>,
    /// Per host with a latency matrix: the `MemoryDelay` of an access from CPU node i
    /// to memory node j, `[i][j]`.
    mem_delay: Vec<Option<Vec<Vec<Time>>>>,
    /// Per host with a bandwidth matrix: the pacer of CPU streams from node i against
    /// node j, `[i][j]`.
    mem_pacers: Vec<Option<Vec<Vec<u32>>>>,
    bar_sinks: Vec<u32>,
    splitters: Vec<u32>,
    iotlbs: Vec<u32>,
    /// Timed routes per (requester, 4 KiB page, read?), valid for one fabric routing epoch.
    cache: RouteCache,
    /// Routes with identical hops share one id.
    dedup: FxHashMap<Vec<Hop>, u32>,
    path: Path,
    ntb_translate: Vec<Time>,
    /// CPU streams made so far (each gets its own span of addresses).
    cpu_streams_made: u64,
    /// Reused while building a route's hops.
    hop_scratch: Vec<Hop>,
    /// Reused for the members' routes of a multicast write.
    mc_scratch: McRoutes,
}

impl HasNet for TimedFabric {
    fn net(&mut self) -> &mut Net {
        &mut self.net
    }
}

impl TimedFabric {
    pub fn new(fabric: Fabric, seed: u64) -> Result<TimedFabric, TimingError> {
        let topo = &fabric.topo;
        let mut net = Net::new(seed);
        // The order resources are added in is their ids: keep it (wires, cables, each
        // host's interconnect, memory and IOMMU, then BARs).
        let platform = platform_timings(topo, &mut net)?;
        let link_wires = link_wires(topo, &mut net, &platform);
        let cable_wires = cable_wires(topo, &mut net, &platform);
        let hosts = host_resources(topo, &mut net, &platform)?;
        let ntb_translate = ntb_translate(topo)?;
        let bar_sinks = bar_sinks(topo, &mut net)?;
        Ok(TimedFabric {
            fabric,
            ntb_translate,
            net,
            platform,
            link_wires,
            cable_wires,
            ic_wires: hosts.ic_wires,
            ram_sinks: hosts.ram_sinks,
            mem_delay: hosts.mem_delay,
            mem_pacers: hosts.mem_pacers,
            bar_sinks,
            splitters: hosts.splitters,
            iotlbs: hosts.iotlbs,
            cache: RouteCache::default(),
            dedup: FxHashMap::default(),
            path: Path::with_capacity(64),
            cpu_streams_made: 0,
            hop_scratch: Vec::new(),
            mc_scratch: McRoutes::default(),
        })
    }

    /// Takes a cable down or up, in the fabric (routes fault with `LinkDown`) and on
    /// its wires at this simulated moment (TLPs about to cross fail there).
    pub fn set_cable_up(&mut self, cable: fabric::CableId, up: bool) {
        self.fabric.set_cable_up(cable, up);
        self.sync_cable(cable);
    }

    /// A host crashes now: its routes fault with `HostDown` and its adapters' cables
    /// go dead (in flight toward it, writes are dropped, reads answered UR; completions
    /// coming out of it are lost and their reads time out).
    pub fn crash_host(&mut self, host: HostId) {
        self.fabric.crash_host(host);
        self.sync_host_cables(host);
    }

    /// A crashed host comes back now, cold (its memory is cleared).
    pub fn restart_host(&mut self, host: HostId) {
        self.fabric.restart_host(host);
        self.sync_host_cables(host);
    }

    fn sync_host_cables(&mut self, host: HostId) {
        let topo = &self.fabric.topo;
        let cables: Vec<CableId> = (0..topo.cables.len())
            .map(CableId::from_index)
            .filter(|&c| {
                topo.cables[c.index()]
                    .ends
                    .iter()
                    .any(|e| matches!(*e, CableEnd::Ntb(n) if topo.ntbs[n.index()].host == host))
            })
            .collect();
        for c in cables {
            self.sync_cable(c);
        }
    }

    /// A cable's wires are dead while the fabric says it cannot be crossed.
    fn sync_cable(&mut self, cable: fabric::CableId) {
        let down = self.fabric.cable_fault(cable).is_some();
        for w in self.cable_wires[cable.index()] {
            self.net.set_wire_down(w, down);
        }
    }

    /// Latency of a CPU core of `package` reading one cache line at `offset` in NUMA node
    /// `node`'s RAM: an LLC hit when a local DMA (DDIO) or earlier access left the line in
    /// the node's LLC, otherwise DRAM — the platform's latency matrix when it has one, else
    /// local DRAM plus the interconnect hops between the package and the memory's.
    pub fn cpu_line_read(&self, host: HostId, package: u32, node: u32, offset: u64) -> Time {
        let topo = &self.fabric.topo;
        let p = topo.platform_of(host);
        let pt = self.timing_of(host);
        let sink = self.ram_sinks[host.index()][node as usize];
        let home = p.package_of_node(node);
        let cached = self
            .net
            .sink(sink)
            .llc
            .as_ref()
            .is_some_and(|l| l.contains(offset / 64));
        if cached && home == package {
            return ns(pt.llc_latency_ns);
        }
        if let Some(m) = &p.latency_ns {
            let cpu_node = package * p.nodes_per_package;
            return ns(m[cpu_node as usize][node as usize]);
        }
        let ic = self.uncore_crossing(host, package, home);
        ns(pt.dram_latency_ns) + ic + ic
    }

    /// Leaves the lines of `[offset, offset + bytes)` of NUMA node `node`'s RAM of `host`
    /// as `state` says, before a workload starts (pcie-bench's cache states): a buffer
    /// larger than the cache that took it keeps its last lines there.
    pub fn prepare_cache(
        &mut self,
        host: HostId,
        node: u32,
        offset: u64,
        bytes: u64,
        state: CacheState,
    ) {
        let sink = self.ram_sinks[host.index()][node as usize];
        let platform = self.fabric.topo.platform_of(host);
        let home = platform.package_of_node(node);
        let llc_lines = platform.llc_bytes / 64;
        match state {
            CacheState::Cold => self.net.uncache_lines(sink, offset, bytes),
            CacheState::Cached { package } if package == home => {
                self.net.cache_lines(sink, offset, bytes, llc_lines)
            }
            CacheState::Cached { package } => {
                // Home snoop: the home learns from its directory that another package
                // owns the line and fetches it there: a round trip between them.
                let one_way = self.uncore_crossing(host, home, package);
                let snoop = one_way + one_way;
                self.net
                    .cache_lines_remote(sink, offset, bytes, llc_lines, snoop)
            }
            CacheState::Ddio => {
                let ddio_lines = self
                    .net
                    .sink(sink)
                    .llc
                    .as_ref()
                    .map_or(0, |l| l.capacity_lines);
                self.net.cache_lines(sink, offset, bytes, ddio_lines as u64)
            }
        }
    }

    /// One crossing from package `a` to `b` at zero load: the interconnect hops' latency.
    fn uncore_crossing(&self, host: HostId, a: u32, b: u32) -> Time {
        let p = self.fabric.topo.platform_of(host);
        let pt = self.timing_of(host);
        let ns_sum: f64 = self
            .fabric
            .topo
            .uncore_path(host, a, b)
            .iter()
            .map(|h| {
                p.interconnect[h.link as usize]
                    .latency_ns
                    .unwrap_or(pt.interconnect_latency_ns)
            })
            .sum();
        ns(ns_sum)
    }

    /// A CPU memory stream (a component, not started): cores on NUMA node `cpu_node` of `host`
    /// keeping `outstanding` line misses in flight against node `mem_node`'s DRAM, over
    /// the interconnect when the nodes sit on different packages. Their line fills press
    /// on the DDIO lines of the cores' package LLC. See `sim::cpu_stream`.
    pub fn cpu_stream(
        &mut self,
        host: HostId,
        cpu_node: u32,
        mem_node: u32,
        op: StreamOp,
        outstanding: u32,
    ) -> Result<CpuStream, TimingError> {
        let topo = &self.fabric.topo;
        let h = topo.host(host);
        let p = topo.platform_of(host);
        let nodes = p.numa_nodes();
        if cpu_node >= p.cpu_nodes() || mem_node >= nodes {
            return Err(TimingError(format!(
                "host {} has NUMA nodes 0..{nodes}, CPUs on nodes 0..{}; a CPU stream asked for cores on node {cpu_node} and memory on node {mem_node}",
                h.name,
                p.cpu_nodes()
            )));
        }
        if outstanding == 0 {
            return Err(TimingError(
                "a CPU stream needs at least one outstanding miss".into(),
            ));
        }
        let (from, to) = (p.package_of_node(cpu_node), p.package_of_node(mem_node));
        let (i, j) = (cpu_node as usize, mem_node as usize);
        let mut hops: Vec<Hop> = self.mem_pacers[host.index()]
            .as_ref()
            .map(|pacers| Hop::Pace(pacers[i][j]))
            .into_iter()
            .collect();
        hops.extend(
            p.uncore_path(from, to)
                .iter()
                .map(|u| Hop::Wire(self.ic_wire(host, u))),
        );
        if let Some(d) = self.mem_delay[host.index()].as_ref().map(|d| d[i][j]) {
            if d > Time::ZERO {
                hops.push(Hop::MemoryDelay(d));
            }
        }
        let sink = self.ram_sinks[host.index()][mem_node as usize];
        hops.push(Hop::Sink(sink, false));
        let route = self.net.add_route(hops);
        // A fill lands in any way; one in llc_ways / ddio_ways lands in a DDIO way.
        let fills_per_eviction = p.llc_ways.checked_div(p.ddio_ways).map_or(0, |k| k.max(1));
        // Spread streams over the node so their lines never alias.
        let n = self.cpu_streams_made;
        self.cpu_streams_made += 1;
        let span = 1u64 << 30;
        let name = format!(
            "{} cores node{cpu_node} {} node{mem_node}",
            h.name,
            match op {
                StreamOp::Read => "read",
                StreamOp::Write => "write",
            }
        );
        Ok(CpuStream::new(StreamSpec {
            name,
            route,
            op,
            outstanding,
            base: (1u64 << 40) + n * span,
            span,
            fill_llc: Some(self.ram_sinks[host.index()][cpu_node as usize]),
            fills_per_eviction,
        }))
    }

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
    fn ic_wire(&self, host: HostId, hop: &UncoreHop) -> u32 {
        let l = &self.fabric.topo.platform_of(host).interconnect[hop.link as usize];
        let dir = if l.a == hop.from { 0 } else { 1 };
        self.ic_wires[host.index()][hop.link as usize][dir]
    }

    /// Timing of the platform of `host`.
    pub fn timing_of(&self, host: HostId) -> &PlatformTiming {
        &self.platform[self.fabric.topo.hosts[host.index()].platform as usize]
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

/// Each platform's timing table, and the network-wide parameters they must agree on
/// (the credit-update latency and the completion timeout), set on `net`.
fn platform_timings(topo: &Topology, net: &mut Net) -> Result<Vec<PlatformTiming>, TimingError> {
    let platform: Vec<PlatformTiming> = topo
        .platforms
        .iter()
        .map(|p| {
            p.timing.clone().ok_or_else(|| {
                TimingError(format!(
                    "platform `{0}` has no timing table (the timing layer needs `[platform.{0}.timing]`)",
                    p.name
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    // The network has one credit-update latency: the platforms must agree on it.
    if let Some((a, b)) = platform
        .iter()
        .zip(&topo.platforms)
        .find_map(|(t, p)| (t.fc_update_ns != platform[0].fc_update_ns).then_some(p))
        .map(|p| (&topo.platforms[0].name, &p.name))
    {
        return Err(TimingError(format!(
            "platforms `{a}` and `{b}` differ in `fc_update_ns`; one network has one credit-update latency"
        )));
    }
    if let Some(t) = platform.first() {
        net.set_fc_extra(ns(t.fc_update_ns));
    }
    // Likewise one completion timeout (requesters of every host wait as long).
    if let Some((a, b)) = platform
        .iter()
        .zip(&topo.platforms)
        .find_map(|(t, p)| {
            (t.completion_timeout_ns != platform[0].completion_timeout_ns).then_some(p)
        })
        .map(|p| (&topo.platforms[0].name, &p.name))
    {
        return Err(TimingError(format!(
            "platforms `{a}` and `{b}` differ in `completion_timeout_ns`; one network has one completion timeout"
        )));
    }
    if let Some(t) = platform.first() {
        net.set_completion_timeout(ns(t.completion_timeout_ns));
    }
    Ok(platform)
}

/// Credits a wire's receiver advertises: a switch chip's port buffers.
fn credits_of(topo: &Topology, n: PcieNodeId) -> [u16; 3] {
    match topo.node(n).kind {
        NodeKind::Switch { chip, .. } => topo.chip(chip).credits,
        _ => [0; 3],
    }
}

/// The (up, down) wires of each node's link to its parent (`NONE` for a node without
/// one), with the credits each direction's receiver advertises.
fn link_wires(topo: &Topology, net: &mut Net, platform: &[PlatformTiming]) -> Vec<[u32; 2]> {
    let timing_of_host = |h: HostId| &platform[topo.host(h).platform as usize];
    let mut link_wires = vec![[NONE; 2]; topo.nodes.len()];
    for (i, n) in topo.nodes.iter().enumerate() {
        if let Some(l) = n.link {
            let pt = timing_of_host(n.host);
            let lat = pt.pcie_link_ns + if l.cable { pt.cable_ns } else { 0.0 };
            let (up, down) = net.add_link(
                &format!("link {}", topo.node_label(PcieNodeId::from_index(i))),
                pcie::ps_per_kib(l.gen, l.width),
                ns(lat),
                [0; 3],
                true,
            );
            link_wires[i] = [up, down];
        }
    }
    for (i, n) in topo.nodes.iter().enumerate() {
        if let (Some(p), [up, down]) = (n.parent, link_wires[i]) {
            if up != NONE {
                net.set_credits(up, credits_of(topo, p));
                net.set_credits(down, credits_of(topo, PcieNodeId::from_index(i)));
            }
        }
    }
    link_wires
}

/// The two wires of each cable (end 0 to end 1, end 1 to end 0), with the credits of
/// the chip at each receiving end.
fn cable_wires(topo: &Topology, net: &mut Net, platform: &[PlatformTiming]) -> Vec<[u32; 2]> {
    let timing_of_host = |h: HostId| &platform[topo.host(h).platform as usize];
    let end_credits = |e: CableEnd| match e {
        CableEnd::Ntb(x) => credits_of(topo, topo.ntbs[x.index()].chip_node),
        CableEnd::ClusterSwitch(c) => topo.chip(topo.cluster_switches[c.index()].chip).credits,
    };
    let mut cable_wires = Vec::new();
    for c in &topo.cables {
        let name = format!(
            "cable {}-{}",
            topo.cable_end_label(c.ends[0]),
            topo.cable_end_label(c.ends[1])
        );
        // A cable's own propagation, else the platform's at its first NTB end.
        let host_end = c.ends.iter().find_map(|e| match *e {
            CableEnd::Ntb(x) => Some(topo.ntbs[x.index()].host),
            CableEnd::ClusterSwitch(_) => None,
        });
        let pt = timing_of_host(host_end.unwrap_or(HostId(0)));
        let (a, b) = net.add_link(
            &name,
            pcie::ps_per_kib(c.link.gen, c.link.width),
            ns(pt.pcie_link_ns + c.cable_ns.unwrap_or(pt.cable_ns)),
            [0; 3],
            true,
        );
        net.set_credits(a, end_credits(c.ends[1]));
        net.set_credits(b, end_credits(c.ends[0]));
        cable_wires.push([a, b]);
    }
    cable_wires
}

/// What each host's package side becomes: per host, indexed by host.
struct HostResources {
    ic_wires: Vec<Vec<[u32; 2]>>,
    ram_sinks: Vec<Vec<u32>>,
    mem_delay: Vec<Option<Vec<Vec<Time>>>>,
    mem_pacers: Vec<Option<Vec<Vec<u32>>>>,
    /// Per node (`NONE` but for root complexes that split peer reads).
    splitters: Vec<u32>,
    iotlbs: Vec<u32>,
}

/// Each host's interconnect wires, memory sinks and matrices, root complexes' read
/// splitters and IOTLB, host by host.
fn host_resources(
    topo: &Topology,
    net: &mut Net,
    platform: &[PlatformTiming],
) -> Result<HostResources, TimingError> {
    let mut r = HostResources {
        ic_wires: Vec::new(),
        ram_sinks: Vec::new(),
        mem_delay: Vec::new(),
        mem_pacers: Vec::new(),
        splitters: vec![NONE; topo.nodes.len()],
        iotlbs: Vec::new(),
    };
    for h in topo.hosts.iter() {
        let p = &topo.platforms[h.platform as usize];
        let pt = &platform[h.platform as usize];
        let wires = interconnect_wires(net, h, p, pt);
        let (dram, delay) = match &p.latency_ns {
            Some(m) => {
                let (dram, delay) = matrix_latency(net, p, &wires, m)?;
                (dram, Some(delay))
            }
            None => (vec![ns(pt.dram_latency_ns); p.numa_nodes() as usize], None),
        };
        r.mem_delay.push(delay);
        r.mem_pacers.push(memory_pacers(net, h, p));
        r.ic_wires.push(wires);
        r.ram_sinks.push(ram_sinks(net, h, p, pt, &dram));
        for &rc in &h.roots {
            if let Some(split) = p.root_read_split_bytes {
                r.splitters[rc.index()] = net.add_splitter(
                    &topo.node_label(rc),
                    split,
                    pt.rc_p2p_read_tags,
                    ns(pt.rc_p2p_read_gap_ns),
                );
            }
        }
        r.iotlbs.push(net.add_iotlb(
            pt.iotlb_entries as usize,
            ns(pt.iotlb_hit_ns),
            ns(pt.iotlb_miss_ns),
        ));
    }
    Ok(r)
}

/// The two wires (a to b, b to a) of each of `h`'s interconnect links.
fn interconnect_wires(net: &mut Net, h: &Host, p: &Platform, pt: &PlatformTiming) -> Vec<[u32; 2]> {
    let mut wires = Vec::new();
    for l in &p.interconnect {
        // Parallel links (`count`) add bandwidth.
        let gbps = l.gbps(pt.interconnect_gbps);
        let lat = l.latency_ns.unwrap_or(pt.interconnect_latency_ns);
        let (a, b) = net.add_link(
            &format!("{} {}-{}", h.name, p.vertex_name(l.a), p.vertex_name(l.b)),
            pcie::ps_per_kib_at(gbps),
            ns(lat),
            [0; 3],
            false,
        );
        wires.push([a, b]);
    }
    wires
}

/// With a bandwidth matrix, the pacer of CPU streams from node i against node j,
/// `[i][j]`.
fn memory_pacers(net: &mut Net, h: &Host, p: &Platform) -> Option<Vec<Vec<u32>>> {
    p.bandwidth_gbps.as_ref().map(|bw| {
        bw.iter()
            .enumerate()
            .map(|(i, row)| {
                row.iter()
                    .enumerate()
                    .map(|(j, &gbps)| {
                        net.add_pacer(&format!("{} cores node{i} from node{j}", h.name), gbps)
                    })
                    .collect()
            })
            .collect()
    })
}

/// Each memory node's sink, at latency `dram[n]`, with the LLC share DDIO writes into.
fn ram_sinks(
    net: &mut Net,
    h: &Host,
    p: &Platform,
    pt: &PlatformTiming,
    dram: &[Time],
) -> Vec<u32> {
    (0..p.numa_nodes())
        .map(|n| {
            // A memory-only node (HBM, CXL, GPU memory) has its own bandwidth
            // when the platform states one.
            let mem = p.memory_node(n);
            let gbps = mem
                .and_then(|m| m.gbps.as_ref())
                .map_or(pt.dram_gbps, |g| g.0);
            let sink = net.add_sink(
                &format!("{} DRAM node{n}", h.name),
                gbps,
                dram[n as usize],
                dram[n as usize],
                // The root's completions, capped by the host's MPS.
                pt.read_completion_bytes.min(h.mps),
            );
            // Writes that bypass DDIO land in DRAM; DDIO writes and read hits
            // are the LLC's (docs/hardware.md §1, DDIO). The package's DDIO ways
            // are shared by its CPU nodes; memory-only nodes get none, so
            // their writes land in their memory (assumption: nothing documents
            // DDIO into HBM, CXL or GPU memory).
            if mem.is_none() {
                let ddio_bytes = p.llc_bytes * p.ddio_ways as u64
                    / p.llc_ways as u64
                    / p.nodes_per_package as u64;
                net.set_llc(sink, ddio_bytes, ns(pt.llc_latency_ns));
            }
            sink
        })
        .collect()
}

/// Each adapter's NTB translation cost, resolved once; an adapter without one is an
/// error, not a free crossing.
fn ntb_translate(topo: &Topology) -> Result<Vec<Time>, TimingError> {
    topo.ntbs
        .iter()
        .enumerate()
        .map(|(id, n)| {
            n.adapter
                .timing_value("ntb_translate_ns")
                .map(ns)
                .ok_or_else(|| {
                    TimingError(format!(
                        "adapter `{}` (on {}) has no timing parameter `ntb_translate_ns`",
                        n.adapter.name,
                        topo.cable_end_label(CableEnd::Ntb(NtbId::from_index(id)))
                    ))
                })
        })
        .collect()
}

/// The memory sink of each node with BARs (`NONE` for the others); a node with BARs
/// but no BAR timing is an error naming it.
fn bar_sinks(topo: &Topology, net: &mut Net) -> Result<Vec<u32>, TimingError> {
    let mut bar_sinks = vec![NONE; topo.nodes.len()];
    for (i, n) in topo.nodes.iter().enumerate() {
        if n.bars.is_empty() {
            continue;
        }
        let bar = match n.kind {
            NodeKind::Function { device, .. } => topo.devices[device.index()].timed.bar,
            // An NTB function's own registers (its window BAR leads elsewhere).
            NodeKind::NtbFunction { ntb } => {
                let a = &topo.ntbs[ntb.index()].adapter;
                match (
                    a.timing_value("bar_gbps"),
                    a.timing_value("bar_latency_ns"),
                    a.timing_value("bar_rcb_bytes"),
                ) {
                    (Some(gbps), Some(latency_ns), Some(rcb)) => Some(fabric::BarTiming {
                        gbps,
                        latency_ns,
                        rcb_bytes: rcb as u32,
                    }),
                    _ => None,
                }
            }
            _ => None,
        };
        let bar = bar.ok_or_else(|| {
            TimingError(format!(
                "{} has BARs but no timing parameters `bar_gbps`, `bar_latency_ns`, `bar_rcb_bytes`",
                topo.node_label(PcieNodeId::from_index(i))
            ))
        })?;
        bar_sinks[i] = net.add_sink(
            &format!("{} memory", topo.node_label(PcieNodeId::from_index(i))),
            bar.gbps,
            ns(bar.latency_ns),
            ns(bar.latency_ns.min(50.0)),
            bar.rcb_bytes,
        );
    }
    Ok(bar_sinks)
}

/// What the wires of `host`'s interconnect path from node `i`'s package to node `j`'s
/// take at zero load for one line read (the request there, the 64 B line back), and
/// how many links it crosses.
fn line_wire_time(net: &Net, p: &Platform, wires: &[[u32; 2]], i: u32, j: u32) -> (Time, usize) {
    let (from, to) = (p.package_of_node(i), p.package_of_node(j));
    if from == to {
        return (Time::ZERO, 0);
    }
    let path = p.uncore_path(from, to);
    let t = path
        .iter()
        .map(|hop| {
            let l = &p.interconnect[hop.link as usize];
            let dir = usize::from(l.a != hop.from);
            let (go, back) = (
                net.wire(wires[hop.link as usize][dir]),
                net.wire(wires[hop.link as usize][1 - dir]),
            );
            serialize(coherent_bytes(0), go.ps_per_kib)
                + go.latency
                + serialize(coherent_bytes(64), back.ps_per_kib)
                + back.latency
        })
        .fold(Time::ZERO, |a, b| a + b);
    (t, path.len())
}

/// Splits a latency matrix into each node's DRAM sink latency and the `MemoryDelay` of
/// each (CPU node, memory node) pair, so that a line read's zero-load latency is the
/// entry exactly. The sink takes the smallest remainder of its column (the local entry
/// on any machine where local is fastest: LLC and DDIO hits then pay no delay). An entry
/// below what its interconnect wires alone take is an error naming the pair: the matrix
/// and the link latencies contradict each other, and running anyway would not honour
/// the matrix.
fn matrix_latency(
    net: &Net,
    p: &Platform,
    wires: &[[u32; 2]],
    m: &[Vec<f64>],
) -> Result<(Vec<Time>, Vec<Vec<Time>>), TimingError> {
    // Rows: CPU nodes; columns: every node.
    let (rows, n) = (p.cpu_nodes() as usize, p.numa_nodes() as usize);
    let mut dram_part = vec![vec![Time::ZERO; n]; rows];
    for (i, row) in m.iter().enumerate() {
        for (j, &entry_ns) in row.iter().enumerate() {
            let (wire, links) = line_wire_time(net, p, wires, i as u32, j as u32);
            let entry = ns(entry_ns);
            if entry < wire {
                return Err(TimingError(format!(
                    "platform `{}`: memory.latency_ns[{i}][{j}] = {entry_ns} ns (CPU node {i}, memory node {j}) is below the {:.1} ns its {links} interconnect link crossing(s) take at zero load for a 64 B line (the links' latency_ns or interconnect_latency_ns, and serialization); raise the entry or lower those latencies",
                    p.name,
                    wire.as_ns_f64()
                )));
            }
            dram_part[i][j] = entry - wire;
        }
    }
    let dram: Vec<Time> = (0..n)
        .map(|j| {
            (0..rows)
                .map(|i| dram_part[i][j])
                .min()
                .unwrap_or(Time::ZERO)
        })
        .collect();
    let delay = dram_part
        .iter()
        .map(|row| row.iter().zip(&dram).map(|(&d, &s)| d - s).collect())
        .collect();
    Ok((dram, delay))
}
