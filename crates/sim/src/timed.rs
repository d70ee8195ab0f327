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
//!
//! This file holds the timed fabric's state and the changes of link and host state it
//! mirrors; beside it: `resources` (what each part of the fabric becomes in the `Net`,
//! built once), `routes` (a routed request as a timed route of hops, cached per epoch)
//! and `cpu` (CPU accesses to memory: line reads, cache states, memory streams).

use fabric::{CableEnd, CableId, Fabric, HostId, McRoutes, Path, PcieNodeId, Target};
use rustc_hash::FxHashMap;

use crate::component::HasNet;
use crate::net::{Hop, Net};
use crate::time::Time;

/// The keys of a platform's timing table.
pub use fabric::scenario::PLATFORM_TIMING_KEYS as PLATFORM_KEYS;

/// Timing parameters of a platform, validated from `[platform.X.timing]` when the
/// scenario loaded (every key required and range-checked there).
pub use fabric::PlatformTiming;

mod cpu;
mod resources;
mod routes;

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

    /// Timing of the platform of `host`.
    pub fn timing_of(&self, host: HostId) -> &PlatformTiming {
        &self.platform[self.fabric.topo.hosts[host.index()].platform as usize]
    }
}
