//! The validated, enumerated topology of a scenario: hosts with their platforms, the PCIe
//! tree of every host (root complexes, switches, functions, NTB adapters), the NTB cabling
//! between hosts, and each host's address map. Immutable once built; mutable hardware
//! state (LUTs, page tables, bytes) lives in `Fabric`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use crate::catalog::{AdapterSpec, ChipSpec};
use crate::raw::DeviceKind;

pub use crate::ids::{CableId, ClusterSwitchId, DeviceId, HostId, NtbId, PcieNodeId};

/// A PCIe requester ID: bus, device, function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Rid(pub u16);

impl Rid {
    pub fn new(bus: u8, dev: u8, func: u8) -> Rid {
        Rid((bus as u16) << 8 | ((dev as u16 & 0x1f) << 3) | (func as u16 & 7))
    }
    pub fn bus(self) -> u8 {
        (self.0 >> 8) as u8
    }
    pub fn dev(self) -> u8 {
        ((self.0 >> 3) & 0x1f) as u8
    }
    pub fn func(self) -> u8 {
        (self.0 & 7) as u8
    }
}

impl fmt::Display for Rid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus(), self.dev(), self.func())
    }
}

/// A PCIe link: generation and width; `cable` marks an external cable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub gen: u8,
    pub width: u8,
    pub cable: bool,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gen{} x{}", self.gen, self.width)?;
        if self.cable {
            f.write_str(" cable")?;
        }
        Ok(())
    }
}

/// A QPI/UPI-style link between two uncore vertices (packages or I/O hubs) of a platform.
#[derive(Clone, Debug, PartialEq)]
pub struct InterconnectLink {
    pub a: u32,
    pub b: u32,
    pub kind: String,
    pub gts: Option<f64>,
    pub count: u32,
    pub bandwidth_gbps: Option<f64>,
    pub latency_ns: Option<f64>,
    pub weight: u32,
}

/// Bytes a QPI, UPI, HyperTransport or Infinity Fabric link moves per transfer and
/// direction: its 16 data lanes (QPI and UPI carry 20 lanes, 16 of them data; Intel's
/// QPI and UPI datasheets rate a 9.6 GT/s link at 19.2 GB/s per direction).
pub const INTERCONNECT_BYTES_PER_TRANSFER: f64 = 2.0;

impl InterconnectLink {
    /// Its bandwidth per direction, GB/s: `bandwidth_gbps` when given, else its transfer
    /// rate (`gts`) × 2 bytes × `count` parallel links, else the platform's timing value
    /// `default_gbps` (`interconnect_gbps`) × `count`.
    pub fn gbps(&self, default_gbps: f64) -> f64 {
        match (self.bandwidth_gbps, self.gts) {
            (Some(b), _) => b,
            (None, Some(gts)) => gts * INTERCONNECT_BYTES_PER_TRANSFER * self.count as f64,
            (None, None) => default_gbps * self.count as f64,
        }
    }
}

/// A core clock a platform may state, GHz: from embedded cores to overclocked desktops.
/// Cycle costs are divided by it, so a clock far outside this would print absurd times.
pub const CLOCK_GHZ: std::ops::RangeInclusive<f64> = 0.1..=10.0;

/// One parameter set for a kind of machine (ARCHITECTURE.md, Invariants).
#[derive(Clone, Debug, PartialEq)]
pub struct Platform {
    pub name: String,
    pub cpu: String,
    pub packages: u32,
    pub nodes_per_package: u32,
    pub cores_per_package: u32,
    pub threads_per_core: u32,
    pub clock_ghz: f64,
    pub llc_bytes: u64,
    pub llc_ways: u32,
    pub ddio_ways: u32,
    pub dram_bytes_per_node: u64,
    pub root_read_split_bytes: Option<u32>,
    pub root_p2p: bool,
    /// Row = CPU node, column = memory node.
    pub latency_ns: Option<Vec<Vec<f64>>>,
    pub bandwidth_gbps: Option<Vec<Vec<f64>>>,
    pub interconnect: Vec<InterconnectLink>,
    /// I/O hubs; when present they, not the packages, hold the root complexes.
    pub iohs: Vec<String>,
    /// NUMA nodes without CPUs, numbered `packages × nodes_per_package` onwards.
    pub memory_nodes: Vec<MemoryNode>,
    /// `[platform.X.timing]`, validated; `None` when the platform has no timing table.
    pub timing: Option<PlatformTiming>,
    /// `[platform.X.netstack]`, validated; `None` when the platform has none.
    pub netstack: Option<NetStackCosts>,
    /// Shortest interconnect paths, `uncore_paths[from * V + to]`: once per platform,
    /// shared by all its hosts.
    pub uncore_paths: Vec<Vec<UncoreHop>>,
    /// The platform it copies (`base = "NAME"`); `None` when it gives every key itself.
    pub base: Option<PlatformBase>,
}

/// A platform written as a copy of another: the base, the keys the copy gives and those
/// it takes from the base, as written (`clock_ghz`, `timing.dram_gbps`, …).
#[derive(Clone, Debug, PartialEq)]
pub struct PlatformBase {
    pub name: String,
    pub given: Vec<String>,
    pub inherited: Vec<String>,
}

/// A NUMA node without CPUs (`[[platform.X.memory_node]]`): HBM, NVDIMM, CXL or GPU
/// memory the OS exposes as a node. Its latency is its column of the memory matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryNode {
    /// The package whose uncore serves it.
    pub package: u32,
    pub bytes: u64,
    /// `dram`, `hbm`, `nvm`, `cxl`, `gpu` or `other`.
    pub kind: String,
    /// Its bandwidth as a DMA target and the basis of that figure; `None`: the
    /// platform's `dram_gbps`.
    pub gbps: Option<(f64, Basis)>,
}

/// Kinds a memory node may have.
pub const MEMORY_NODE_KINDS: [&str; 6] = ["dram", "hbm", "nvm", "cxl", "gpu", "other"];

pub use crate::basis::{Basis, Provenance};

/// Timing of a platform, from `[platform.X.timing]` (all keys required, each
/// range-checked when the scenario loads).
#[derive(Clone, Debug, PartialEq)]
pub struct PlatformTiming {
    pub dram_latency_ns: f64,
    pub dram_gbps: f64,
    pub llc_latency_ns: f64,
    pub rc_latency_ns: f64,
    pub rc_p2p_latency_ns: f64,
    /// Re-issued peer-to-peer reads a root keeps outstanding.
    pub rc_p2p_read_tags: u32,
    pub rc_p2p_read_gap_ns: f64,
    /// Read completion boundary of the root (64 or 128).
    pub rcb_bytes: u32,
    /// The largest completion the root returns for a device's memory read, before the
    /// link's MPS caps it: RCB-sized on older chipsets, up to the MPS on newer ones
    /// (pcie-bench, Neugebauer et al., SIGCOMM 2018, `rcb_chunks`).
    pub read_completion_bytes: u32,
    pub iotlb_hit_ns: f64,
    pub iotlb_miss_ns: f64,
    pub iotlb_entries: u32,
    pub cpu_mmio_write_ns: f64,
    pub cpu_poll_ns: f64,
    pub interconnect_latency_ns: f64,
    pub interconnect_gbps: f64,
    /// PHY and data-link latency of one PCIe link traversal, serialization excluded.
    pub pcie_link_ns: f64,
    /// Extra propagation of an external cable (a cable may override it).
    pub cable_ns: f64,
    /// Credit-update (UpdateFC DLLP) latency added to a wire's propagation.
    pub fc_update_ns: f64,
    /// A CPU core's MMIO stores reach the fabric as writes of this many bytes.
    pub cpu_mmio_write_bytes: u32,
    /// A CPU core's MMIO loads are reads of this many bytes…
    pub cpu_mmio_read_bytes: u32,
    /// …with this many outstanding at a time.
    pub cpu_mmio_reads: u32,
    /// A read whose completions never come back (the completer crashed, a cable died
    /// under them) completes as Unsupported Request after this long from its issue.
    pub completion_timeout_ns: f64,
    /// The coherence protocol's snoop mode as it prices device accesses to memory
    /// (`sim::memsys`): home snoop with an in-memory directory (Xeon E5 v3/v4, Skylake-SP)
    /// when true, source snoop (QPI 1.0, Nehalem-EP) when false.
    pub home_snoop: bool,
    pub basis: Provenance,
}

/// Costs of the host network stack on one core, from `[platform.X.netstack]` (all keys
/// required, each range-checked when the scenario loads). Work is in cycles of the
/// platform's clock; the driver's flow-rule waits are in ns.
#[derive(Clone, Debug, PartialEq)]
pub struct NetStackCosts {
    /// Driver receive (CQE, descriptor, skb) and TCP/IP receive of one segment.
    pub rx_segment_cycles: u64,
    /// One TSO send down the stack to the driver's doorbell (per ≤ 64 KiB segment).
    pub tx_send_cycles: u64,
    /// One packet of an in-kernel generator (pktgen): descriptor, doorbell, completion.
    pub tx_packet_cycles: u64,
    /// Sending (receiver) or processing (sender) one TCP ACK.
    pub ack_cycles: u64,
    /// One `recv`/`send` system call, copy excluded.
    pub syscall_cycles: u64,
    /// One interrupt (handler and NAPI schedule).
    pub irq_cycles: u64,
    /// Copying one 64 B line whose source is in the LLC.
    pub copy_line_cycles: u64,
    /// Line misses a core keeps in flight for a copy (its line-fill buffers).
    pub line_fill_buffers: u32,
    /// The socket's receive buffer: the TCP window is what is left of it.
    pub rcvbuf_bytes: u64,
    /// NAPI poll budget: packets per poll.
    pub napi_budget: u32,
    /// Waking a blocked process and switching to it on the core that ran the softirq.
    pub wakeup_cycles: u64,
    /// TCP Small Queues: most bytes of one socket queued in the device.
    pub tsq_bytes: u64,
    /// From the stack's ARFS callback (`ndo_rx_flow_steer`) until the driver's worker has
    /// the flow's new rule in the NIC, ns.
    pub flow_rule_update_ns: f64,
    /// A flow rule no frame has hit for this long is removed by the driver, ns.
    pub flow_rule_expiry_ns: f64,
    pub basis: Provenance,
}

/// Timing of a device model, from a device's (or its device model's) `timing` table.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceTiming {
    /// Memory behind the device's BARs: bandwidth, latency, completion size. Required
    /// for a device with BARs on a platform with timing.
    pub bar: Option<BarTiming>,
    /// The device as a DMA requester: outstanding reads and read request size.
    pub dma: Option<DmaTiming>,
    /// A GPU: kernel launch and poll-loop iteration (required for a GPU on a timed host).
    pub launch_ns: Option<f64>,
    pub poll_ns: Option<f64>,
    pub basis: Provenance,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BarTiming {
    pub gbps: f64,
    pub latency_ns: f64,
    pub rcb_bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaTiming {
    pub max_reads: u32,
    pub mrrs_bytes: u32,
}

impl Platform {
    /// NUMA nodes with CPUs: `nodes_per_package` per package, numbered package by package.
    pub fn cpu_nodes(&self) -> u32 {
        self.packages * self.nodes_per_package
    }
    /// Every NUMA node: the CPU nodes, then the memory-only ones.
    pub fn numa_nodes(&self) -> u32 {
        self.cpu_nodes() + self.memory_nodes.len() as u32
    }
    /// The memory-only node `numa_node` is, if it is one.
    pub fn memory_node(&self, numa_node: u32) -> Option<&MemoryNode> {
        numa_node
            .checked_sub(self.cpu_nodes())
            .and_then(|i| self.memory_nodes.get(i as usize))
    }
    /// Bytes of RAM of a node.
    pub fn node_bytes(&self, numa_node: u32) -> u64 {
        self.memory_node(numa_node)
            .map_or(self.dram_bytes_per_node, |m| m.bytes)
    }
    /// Uncore vertices: packages `0..packages`, then I/O hubs.
    pub fn uncore_vertices(&self) -> u32 {
        self.packages + self.iohs.len() as u32
    }
    pub fn vertex_name(&self, v: u32) -> String {
        if v < self.packages {
            format!("pkg{v}")
        } else {
            self.iohs[(v - self.packages) as usize].clone()
        }
    }
    /// The package whose uncore serves a node's memory.
    pub fn package_of_node(&self, numa_node: u32) -> u32 {
        match self.memory_node(numa_node) {
            Some(m) => m.package,
            None => numa_node / self.nodes_per_package,
        }
    }
    /// The interconnect hops from uncore vertex `from` to `to` (none when equal).
    pub fn uncore_path(&self, from: u32, to: u32) -> &[UncoreHop] {
        &self.uncore_paths[(from * self.uncore_vertices() + to) as usize]
    }
    /// The package nearest uncore vertex `v` by summed link weight, the lower index on a
    /// tie (a package is its own): where a root on an I/O hub is local. `None` when no
    /// path joins `v` to a package.
    pub fn nearest_package(&self, v: u32) -> Option<u32> {
        if v < self.packages {
            return Some(v);
        }
        (0..self.packages)
            .filter_map(|p| {
                let path = self.uncore_path(v, p);
                let weight: u64 = path
                    .iter()
                    .map(|h| self.interconnect[h.link as usize].weight as u64)
                    .sum();
                (!path.is_empty()).then_some((weight, p))
            })
            .min()
            .map(|(_, p)| p)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A CPU root complex (a package's, or an I/O hub's) at an uncore vertex.
    RootComplex { vertex: u32 },
    /// A switch chip; `adapter` when it is the chip of an NTB adapter.
    Switch { chip: u32, adapter: Option<NtbId> },
    /// A PCI function of a device (`pf` = its index among the device's functions).
    Function { device: DeviceId, pf: u8 },
    /// The NTB endpoint on an adapter's chip; its window BAR leads to other hosts.
    NtbFunction { ntb: NtbId },
}

/// A memory BAR after enumeration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    pub index: u8,
    pub size: u64,
    pub bits64: bool,
    pub prefetchable: bool,
    pub addr: u64,
}

impl Bar {
    pub fn end(&self) -> u64 {
        self.addr + self.size
    }
}

/// A vertex of a host's PCIe tree.
#[derive(Clone, Debug)]
pub struct Node {
    pub host: HostId,
    pub name: String,
    pub kind: NodeKind,
    pub parent: Option<PcieNodeId>,
    /// The link to the parent; `None` for root complexes and for an NTB function (it is
    /// inside its adapter's chip).
    pub link: Option<Link>,
    pub depth: u16,
    /// The root complex this node hangs under (itself for a root complex).
    pub root: PcieNodeId,
    pub rid: Rid,
    /// The root port or switch downstream port above this node, if any.
    pub port_rid: Option<Rid>,
    pub children: Vec<PcieNodeId>,
    pub bars: Vec<Bar>,
    /// Bridge windows of the port above this node: 32-bit and 64-bit, [start, end).
    pub window32: Option<(u64, u64)>,
    pub window64: Option<(u64, u64)>,
    pub dma_mask_bits: u8,
}

impl Node {
    pub fn is_switch(&self) -> bool {
        matches!(self.kind, NodeKind::Switch { .. })
    }
    pub fn bar(&self, index: u8) -> Option<&Bar> {
        self.bars.iter().find(|b| b.index == index)
    }
}

/// A device: one or several functions (a multi-PF NIC has one per socket).
#[derive(Clone, Debug)]
pub struct Device {
    pub host: HostId,
    pub name: String,
    pub kind: DeviceKind,
    pub model: String,
    pub functions: Vec<PcieNodeId>,
    /// BDFs as imported from a real machine, when the scenario gives them.
    pub labels: Vec<Option<String>>,
    /// Timing parameters for the device model, validated (its device model's merged
    /// with its own), by key.
    pub timing: BTreeMap<String, f64>,
    /// The same, typed; its `basis` says where each value comes from.
    pub timed: DeviceTiming,
    /// The `[device_model.X]` it was made from, if any.
    pub device_model: Option<String>,
}

/// Where an address of a host's map lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// DRAM of a NUMA node; `node_offset` is the offset within that node at `start`.
    Ram {
        node: u32,
        node_offset: u64,
    },
    Bar {
        node: PcieNodeId,
        bar: u8,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub owner: Owner,
}

/// One hop between uncore vertices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UncoreHop {
    pub link: u32,
    pub from: u32,
    pub to: u32,
}

#[derive(Clone, Debug)]
pub struct Host {
    pub name: String,
    pub platform: u32,
    pub iommu: bool,
    /// IOTLB entries cover 2 MiB pages (IOMMU super pages) rather than 4 KiB ones.
    pub iommu_superpages: bool,
    /// Root complexes, by uncore vertex order.
    pub roots: Vec<PcieNodeId>,
    pub mmio32: (u64, u64),
    pub mmio64_base: u64,
    /// Max payload size of this host's hierarchy.
    pub mps: u32,
    pub top_of_ram: u64,
    /// Sorted, non-overlapping address map (RAM ranges and BARs).
    pub regions: Vec<Region>,
    pub nodes: Vec<PcieNodeId>,
    pub devices: Vec<DeviceId>,
    pub ntbs: Vec<NtbId>,
}

impl Host {
    /// Decodes an address of this host's map.
    #[inline]
    pub fn decode(&self, addr: u64) -> Option<&Region> {
        let i = self.regions.partition_point(|r| r.end <= addr);
        self.regions.get(i).filter(|r| r.start <= addr)
    }
    /// The first address of a NUMA node's RAM.
    pub fn ram_base(&self, node: u32) -> Option<u64> {
        self.regions
            .iter()
            .find(|r| matches!(r.owner, Owner::Ram { node: n, node_offset: 0 } if n == node))
            .map(|r| r.start)
    }
    /// The host-physical address of an offset into a NUMA node's RAM.
    pub fn ram_addr(&self, node: u32, offset: u64) -> Option<u64> {
        self.regions.iter().find_map(|r| match r.owner {
            Owner::Ram {
                node: n,
                node_offset,
            } if n == node && offset >= node_offset && offset - node_offset < r.end - r.start => {
                Some(r.start + offset - node_offset)
            }
            _ => None,
        })
    }
}

/// An NTB adapter in a host.
#[derive(Clone, Debug)]
pub struct Ntb {
    pub host: HostId,
    pub name: String,
    /// The adapter's catalog entry, shared by every adapter of that kind.
    pub adapter: Arc<AdapterSpec>,
    pub chip_node: PcieNodeId,
    pub fn_node: PcieNodeId,
    pub lut_windows: u32,
    pub window_size: u64,
    /// BAR index of the window aperture on `fn_node`.
    pub window_bar: u8,
    pub cables: Vec<CableId>,
}

#[derive(Clone, Debug)]
pub struct ClusterSwitch {
    pub name: String,
    pub chip: u32,
    pub cables: Vec<CableId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CableEnd {
    Ntb(NtbId),
    ClusterSwitch(ClusterSwitchId),
}

#[derive(Clone, Debug)]
pub struct Cable {
    pub ends: [CableEnd; 2],
    pub link: Link,
    /// This cable's propagation when it differs from the platform's `cable_ns`.
    pub cable_ns: Option<f64>,
}

/// One element of the way between two NTB adapters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NtbHop {
    Cable(CableId),
    ClusterSwitch(ClusterSwitchId),
}

/// The whole validated scenario topology.
#[derive(Clone, Debug)]
pub struct Topology {
    pub name: String,
    pub description: String,
    pub chips: Vec<ChipSpec>,
    pub platforms: Vec<Platform>,
    pub hosts: Vec<Host>,
    pub nodes: Vec<Node>,
    pub devices: Vec<Device>,
    pub ntbs: Vec<Ntb>,
    pub cluster_switches: Vec<ClusterSwitch>,
    pub cables: Vec<Cable>,
    /// Per cluster switch, the connected set of cluster switches it belongs to (switches
    /// joined by switch-to-switch cables), so reachability between adapters is a few
    /// comparisons. No table of ways between adapters is kept: one adapter pair per
    /// pair of hosts would grow with the square of the cluster (`ntb_way` searches
    /// when asked).
    pub switch_group: Vec<u32>,
    /// Host names to ids.
    pub host_ids: HashMap<String, HostId>,
    /// `[[lend]]` and `[[borrow]]` declarations, checked, in file order: plain data here
    /// (performing them, and what lending means, is the systems layer's).
    pub lends: Vec<LendDecl>,
    pub borrows: Vec<BorrowDecl>,
}

/// A `[[lend]]`: `host` offers one function of one of its devices to the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LendDecl {
    pub host: HostId,
    /// The lent PCI function.
    pub function: PcieNodeId,
    /// As written (`gpu`, `nvme.pf1`).
    pub device: String,
}

/// A `[[borrow]]`: `host` borrows the function a `[[lend]]` offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BorrowDecl {
    pub name: String,
    pub host: HostId,
    pub function: PcieNodeId,
    /// As written (`lender.gpu`).
    pub device: String,
    pub exclusive: bool,
}

impl Topology {
    pub fn host_by_name(&self, name: &str) -> Option<HostId> {
        self.host_ids.get(name).copied()
    }
    pub fn node(&self, id: PcieNodeId) -> &Node {
        &self.nodes[id.index()]
    }
    pub fn host(&self, id: HostId) -> &Host {
        &self.hosts[id.index()]
    }
    pub fn platform_of(&self, host: HostId) -> &Platform {
        &self.platforms[self.hosts[host.index()].platform as usize]
    }
    pub fn node_by_name(&self, host: HostId, name: &str) -> Option<PcieNodeId> {
        self.hosts[host.index()]
            .nodes
            .iter()
            .copied()
            .find(|&n| self.nodes[n.index()].name == name)
    }
    pub fn device_by_name(&self, host: HostId, name: &str) -> Option<DeviceId> {
        self.hosts[host.index()]
            .devices
            .iter()
            .copied()
            .find(|&d| self.devices[d.index()].name == name)
    }
    pub fn ntb_by_name(&self, host: HostId, name: &str) -> Option<NtbId> {
        self.hosts[host.index()]
            .ntbs
            .iter()
            .copied()
            .find(|&n| self.ntbs[n.index()].name == name)
    }
    /// The interconnect hops of `host` from uncore vertex `from` to `to`.
    pub fn uncore_path(&self, host: HostId, from: u32, to: u32) -> &[UncoreHop] {
        self.platform_of(host).uncore_path(from, to)
    }
    /// Whether adapter `dst` is reachable from `src`: by a cable between them, or through
    /// cluster switches alone (a way never passes through a third host's adapter).
    pub fn ntb_reaches(&self, src: NtbId, dst: NtbId) -> bool {
        if src == dst {
            return false;
        }
        let switches = |n: NtbId| {
            self.ntbs[n.index()]
                .cables
                .iter()
                .map(|&c| self.cables[c.index()].ends)
                .filter_map(move |e| {
                    let other = if e[0] == CableEnd::Ntb(n) { e[1] } else { e[0] };
                    match other {
                        CableEnd::ClusterSwitch(s) => Some(s),
                        CableEnd::Ntb(_) => None,
                    }
                })
        };
        let direct = self.ntbs[src.index()].cables.iter().any(|&c| {
            let e = self.cables[c.index()].ends;
            e.contains(&CableEnd::Ntb(dst))
        });
        direct
            || switches(src).any(|a| {
                switches(dst).any(|b| self.switch_group[a.index()] == self.switch_group[b.index()])
            })
    }
    /// The way from adapter `src` to adapter `dst` through cables and cluster switches
    /// (never through a third host's adapter), `None` when there is none. Breadth-first
    /// from `src`, cables in declaration order, stopping when `dst` is found: the
    /// shortest way, the same one every time, searched when asked (callers that need it
    /// per access keep it, as the fabric does with an address-LUT entry).
    pub fn ntb_way(&self, src: NtbId, dst: NtbId) -> Option<Vec<NtbHop>> {
        if !self.ntb_reaches(src, dst) {
            return None;
        }
        // Vertices: adapters, then cluster switches; `via[v]` is the cable that first
        // reached v, plus one (0: not reached).
        let n = self.ntbs.len();
        let vertex = |e: CableEnd| match e {
            CableEnd::Ntb(x) => x.index(),
            CableEnd::ClusterSwitch(s) => n + s.index(),
        };
        let mut via = vec![0u32; n + self.cluster_switches.len()];
        let start = CableEnd::Ntb(src);
        let goal = CableEnd::Ntb(dst);
        let mut queue = VecDeque::from([start]);
        'search: while let Some(cur) = queue.pop_front() {
            let cables = match cur {
                CableEnd::Ntb(x) if cur == start => &self.ntbs[x.index()].cables,
                // Another host's adapter is an end, not a way through.
                CableEnd::Ntb(_) => continue,
                CableEnd::ClusterSwitch(s) => &self.cluster_switches[s.index()].cables,
            };
            for &c in cables {
                let e = self.cables[c.index()].ends;
                let next = if e[0] == cur { e[1] } else { e[0] };
                if next != start && via[vertex(next)] == 0 {
                    via[vertex(next)] = c.0 + 1;
                    if next == goal {
                        break 'search;
                    }
                    queue.push_back(next);
                }
            }
        }
        let mut hops = Vec::new();
        let mut cur = goal;
        while cur != start {
            let c = CableId(via[vertex(cur)].checked_sub(1)?);
            let e = self.cables[c.index()].ends;
            let prev = if e[0] == cur { e[1] } else { e[0] };
            hops.push(NtbHop::Cable(c));
            if let CableEnd::ClusterSwitch(s) = prev {
                hops.push(NtbHop::ClusterSwitch(s));
            }
            cur = prev;
        }
        hops.reverse();
        Some(hops)
    }
    /// `host.name` of a node, for humans.
    pub fn node_label(&self, id: PcieNodeId) -> String {
        let n = self.node(id);
        format!("{}.{}", self.hosts[n.host.index()].name, n.name)
    }
    pub fn chip(&self, id: u32) -> &ChipSpec {
        &self.chips[id as usize]
    }
    pub fn cable_end_label(&self, end: CableEnd) -> String {
        match end {
            CableEnd::Ntb(n) => {
                let ntb = &self.ntbs[n.index()];
                format!("{}.{}", self.hosts[ntb.host.index()].name, ntb.name)
            }
            CableEnd::ClusterSwitch(c) => self.cluster_switches[c.index()].name.clone(),
        }
    }
}
