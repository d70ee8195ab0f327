//! The machine topology model both importers produce: packages, NUMA nodes, cores,
//! caches, distance matrices and memory attributes, the PCI tree with OS devices,
//! interrupts, network queues and (optionally) processes. It holds what the machine
//! said, with `None` where it said nothing; judging it is the audit's job.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::pci::{classify, Bdf, DeviceClass, LinkStatus, OsDevice, OsDeviceKind};

/// Sizes an importer accepts. Anything larger is corrupt input, refused with a warning
/// (the size is then unknown): no machine built comes within orders of magnitude, and
/// sums of accepted sizes stay far from `u64::MAX`.
pub mod limits {
    /// One NUMA node's memory: 2^52 bytes (4 PiB).
    pub const NODE_BYTES: u64 = 1 << 52;
    pub const NODE_BYTES_TEXT: &str = "2^52 bytes (4 PiB)";
    /// A whole machine's memory: 2^60 bytes (1 EiB).
    pub const MACHINE_BYTES: u64 = 1 << 60;
    pub const MACHINE_BYTES_TEXT: &str = "2^60 bytes (1 EiB)";
    /// One cache: 2^40 bytes (1 TiB).
    pub const CACHE_BYTES: u64 = 1 << 40;
    pub const CACHE_BYTES_TEXT: &str = "2^40 bytes (1 TiB)";
}

/// Where a machine description came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A live machine or a snapshot: sysfs and procfs under `root`.
    Sysfs { root: PathBuf },
    /// An hwloc XML export; `major` is the XML format generation (1, 2 or 3).
    Hwloc { path: PathBuf, major: u32 },
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::Sysfs { root } => format!("sysfs at {}", root.display()),
            Source::Hwloc { path, major } => {
                format!("hwloc {major}.x XML {}", path.display())
            }
        }
    }

    pub fn is_sysfs(&self) -> bool {
        matches!(self, Source::Sysfs { .. })
    }
}

/// A CPU package (socket).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Package {
    pub id: u32,
    pub cpus: CpuSet,
}

/// A NUMA node. `cpus` is empty for memory-only nodes in sysfs (CXL, PMEM, HBM, GPU
/// memory); hwloc gives such nodes the CPUs of their locality instead and says what they
/// are in `kind` (see [`Machine::is_memory_only`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: CpuSet,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// What memory the machine says it is: hwloc's subtype (`DRAM`, `HBM`, `MCDRAM`,
    /// `NVM`, `SPM`, `GPUMemory`, `CXL-DRAM`, …), or `GPUMemory` for a GPU's memory the
    /// NVIDIA driver onlined as a node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The PCI function whose memory the node is (a GPU's), when the machine says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<Bdf>,
    /// The nodes the kernel names as this node's nearest initiators (ACPI HMAT,
    /// `access1/initiators`, else `access0/initiators`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initiators: Option<CpuSet>,
}

impl NumaNode {
    pub fn new(id: u32, cpus: CpuSet, memory_bytes: Option<u64>) -> Self {
        NumaNode {
            id,
            cpus,
            memory_bytes,
            kind: None,
            device: None,
            initiators: None,
        }
    }

    /// Whether the node's kind names memory other than a CPU's own DRAM.
    pub fn is_special_memory(&self) -> bool {
        self.kind
            .as_deref()
            .is_some_and(|k| !k.eq_ignore_ascii_case("DRAM"))
    }
}

/// A physical core and its hardware threads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Core {
    pub package: Option<u32>,
    pub id: u32,
    pub cpus: CpuSet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheKind {
    Unified,
    Data,
    Instruction,
}

/// One cache instance and the CPUs sharing it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cache {
    pub level: u8,
    pub kind: CacheKind,
    pub size_bytes: u64,
    pub ways: Option<u32>,
    pub line_bytes: Option<u32>,
    pub cpus: CpuSet,
}

/// A distance matrix between objects of one type (`NUMANode`, `Package`, …).
/// `values` is row-major, `ids.len()` squared; `ids` are OS indexes for NUMA nodes,
/// PUs and packages, hwloc's gp indexes for other types.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DistanceMatrix {
    pub name: Option<String>,
    pub object_type: String,
    /// hwloc's kind bits (1 from OS, 2 from user, 4 latency, 8 bandwidth); sysfs
    /// SLIT distances are reported as 1|4.
    pub kind: u64,
    pub ids: Vec<u64>,
    pub values: Vec<f64>,
}

impl DistanceMatrix {
    pub fn get(&self, from: u64, to: u64) -> Option<f64> {
        let i = self.ids.iter().position(|&x| x == from)?;
        let j = self.ids.iter().position(|&x| x == to)?;
        self.values.get(i * self.ids.len() + j).copied()
    }
}

/// Who initiates accesses in a memory-attribute value.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Initiator {
    Cpus(CpuSet),
    Object { object_type: String, gp_index: u64 },
}

/// One value of an hwloc memory attribute (Bandwidth in MiB/s, Latency in ns, …).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemAttrValue {
    /// The target NUMA node (OS index), when the target is a NUMA node.
    pub target_node: Option<u32>,
    pub target_type: String,
    pub target_gp_index: u64,
    pub initiator: Option<Initiator>,
    pub value: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryAttribute {
    pub name: String,
    pub flags: u64,
    pub values: Vec<MemAttrValue>,
}

/// A PCI function (endpoint or bridge).
#[derive(Clone, Debug, PartialEq)]
pub struct PciDevice {
    pub bdf: Bdf,
    /// 24-bit class code (`0x020000`). From hwloc < 3 the prog-if byte is unknown (0).
    pub class_code: Option<u32>,
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    pub subsystem_vendor_id: Option<u16>,
    pub subsystem_device_id: Option<u16>,
    pub vendor_name: Option<String>,
    pub device_name: Option<String>,
    /// The node the machine reports; `None` when it says `-1` or nothing.
    pub numa_node: Option<u32>,
    /// The raw sysfs `numa_node` value (`-1` included), when read from sysfs.
    pub numa_node_raw: Option<i64>,
    /// NUMA nodes the hwloc parent object covers (several when hwloc could not
    /// place the device more precisely).
    pub attached_nodes: Option<CpuSet>,
    /// sysfs `local_cpulist` (or the CPUs of hwloc's parent object).
    pub local_cpus: Option<CpuSet>,
    pub link: LinkStatus,
    /// Index in [`Machine::pci`] of the upstream bridge, if it is a PCI function.
    pub parent: Option<usize>,
    /// The host bridge / root bus the function sits under (`pci0000:80`).
    pub host_bridge: String,
    pub is_bridge: bool,
    pub sriov_numvfs: Option<u32>,
    pub sriov_totalvfs: Option<u32>,
    /// For an SR-IOV virtual function: its physical function.
    pub physfn: Option<Bdf>,
    pub os_devices: Vec<OsDevice>,
    /// Interrupt numbers (MSI/MSI-X vectors and legacy INTx) of the function.
    pub irqs: Vec<u32>,
    /// PCIe Device Serial Number, when the configuration space could be read.
    pub serial: Option<String>,
    /// Memory BARs in BAR order, unused BARs skipped.
    pub bars: Vec<Bar>,
}

/// A memory BAR as the machine reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    pub size: u64,
    /// A 64-bit BAR, which takes two of a function's six BAR slots.
    pub is_64bit: bool,
}

impl PciDevice {
    pub fn new(bdf: Bdf, host_bridge: String) -> Self {
        PciDevice {
            bdf,
            class_code: None,
            vendor_id: None,
            device_id: None,
            subsystem_vendor_id: None,
            subsystem_device_id: None,
            vendor_name: None,
            device_name: None,
            numa_node: None,
            numa_node_raw: None,
            attached_nodes: None,
            local_cpus: None,
            link: LinkStatus::default(),
            parent: None,
            host_bridge,
            is_bridge: false,
            sriov_numvfs: None,
            sriov_totalvfs: None,
            physfn: None,
            os_devices: Vec::new(),
            irqs: Vec::new(),
            serial: None,
            bars: Vec::new(),
        }
    }

    pub fn class(&self) -> DeviceClass {
        if self.is_bridge {
            return DeviceClass::Bridge;
        }
        classify(self.class_code, &self.os_devices)
    }

    /// The class code as sysfs writes it: `0x020000`.
    pub fn pci_class_string(&self) -> Option<String> {
        self.class_code.map(|c| format!("0x{c:06x}"))
    }

    /// The most telling OS name: interface, verbs device, NVMe controller, block
    /// device, GPU, in that order (verbs device first for InfiniBand).
    pub fn primary_name(&self) -> Option<&str> {
        // An InfiniBand adapter is used through its verbs device (mlx4_0), not ib0.
        if self.class() == DeviceClass::Infiniband {
            if let Some(n) = self.os_names(OsDeviceKind::Openfabrics).next() {
                return Some(n);
            }
        }
        const ORDER: [OsDeviceKind; 7] = [
            OsDeviceKind::Net,
            OsDeviceKind::Openfabrics,
            OsDeviceKind::NvmeController,
            OsDeviceKind::Block,
            OsDeviceKind::Gpu,
            OsDeviceKind::Coproc,
            OsDeviceKind::Memory,
        ];
        ORDER.iter().find_map(|k| {
            self.os_devices
                .iter()
                .find(|d| d.kind == *k)
                .map(|d| d.name.as_str())
        })
    }

    pub fn os_names(&self, kind: OsDeviceKind) -> impl Iterator<Item = &str> {
        self.os_devices
            .iter()
            .filter(move |d| d.kind == kind)
            .map(|d| d.name.as_str())
    }

    /// `eth0 (0000:81:00.0)` or just the address.
    pub fn label(&self) -> String {
        match self.primary_name() {
            Some(n) => format!("{n} ({})", self.bdf),
            None => self.bdf.to_string(),
        }
    }

    /// A human model string: names when known, else `vendor:device` IDs.
    pub fn model(&self) -> Option<String> {
        match (&self.vendor_name, &self.device_name) {
            (Some(v), Some(d)) => Some(format!("{v} {d}")),
            (None, Some(d)) => Some(d.clone()),
            _ => match (self.vendor_id, self.device_id) {
                (Some(v), Some(d)) => Some(format!("{v:04x}:{d:04x}")),
                _ => self.vendor_name.clone(),
            },
        }
    }
}

/// One interrupt line from `/proc/interrupts` and `/proc/irq/N/`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Irq {
    pub irq: u32,
    /// `smp_affinity_list`: the CPUs the interrupt may be delivered to.
    pub affinity: Option<CpuSet>,
    /// `effective_affinity_list`: where the kernel actually delivers it.
    pub effective: Option<CpuSet>,
    /// Interrupts handled so far, per CPU (column order of `/proc/interrupts`).
    pub counts: Vec<(u32, u64)>,
    /// Everything after the counts: chip, hwirq, trigger and action names.
    pub description: String,
}

/// A transmit or receive queue of a network interface and its CPU mask.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetQueue {
    pub index: u32,
    /// `xps_cpus` (tx) or `rps_cpus` (rx); `None` when unreadable.
    pub cpus: Option<CpuSet>,
}

/// A network interface backed by a PCI function.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetInterface {
    pub name: String,
    pub bdf: Option<Bdf>,
    pub tx_queues: Vec<NetQueue>,
    pub rx_queues: Vec<NetQueue>,
}

/// A thread of an audited process.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadInfo {
    pub tid: u32,
    pub name: Option<String>,
    /// The CPU the thread last ran on (`stat` field 39).
    pub last_cpu: Option<u32>,
    pub cpus_allowed: Option<CpuSet>,
}

/// How a process was seen to use a PCI function.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceUse {
    pub bdf: Bdf,
    /// The file that ties the process to the device (`/dev/nvme0n1`, a sysfs BAR).
    pub via: String,
}

/// A process given with `--pid`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessInfo {
    pub pid: u32,
    pub name: Option<String>,
    pub cpus_allowed: Option<CpuSet>,
    pub mems_allowed: Option<CpuSet>,
    pub threads: Vec<ThreadInfo>,
    /// Resident bytes per NUMA node, from `numa_maps`.
    pub memory_bytes_per_node: BTreeMap<u32, u64>,
    pub devices: Vec<DeviceUse>,
    /// Files that could not be read (permissions, process gone).
    pub problems: Vec<String>,
}

/// How much an import problem matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteLevel {
    /// Something optional was missing; the audit covers less.
    Info,
    /// Something essential was missing or malformed; results may be wrong.
    Warning,
}

/// A file the importer could not read or understand. Missing files are facts about
/// the machine, reported as findings, never crashes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ImportNote {
    pub level: NoteLevel,
    pub path: String,
    pub message: String,
}

/// Everything the importers learnt about one machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub source: Source,
    pub hostname: Option<String>,
    pub cpu_model: Option<String>,
    pub cpu_vendor: Option<String>,
    /// Nominal clock in GHz (model name `@ 2.70GHz`, cpufreq max, or `cpu MHz`).
    pub clock_ghz: Option<f64>,
    /// All online CPUs (hwloc PUs).
    pub cpus: CpuSet,
    pub packages: Vec<Package>,
    pub nodes: Vec<NumaNode>,
    pub cores: Vec<Core>,
    pub caches: Vec<Cache>,
    pub distances: Vec<DistanceMatrix>,
    pub memory_attributes: Vec<MemoryAttribute>,
    pub total_memory_bytes: Option<u64>,
    pub pci: Vec<PciDevice>,
    pub irqs: Vec<Irq>,
    pub net_interfaces: Vec<NetInterface>,
    /// Whether an IOMMU is active (`/sys/class/iommu`); `None` when unknown.
    pub iommu: Option<bool>,
    pub processes: Vec<ProcessInfo>,
    pub notes: Vec<ImportNote>,
}

impl Machine {
    pub fn empty(source: Source) -> Self {
        Machine {
            source,
            hostname: None,
            cpu_model: None,
            cpu_vendor: None,
            clock_ghz: None,
            cpus: CpuSet::new(),
            packages: Vec::new(),
            nodes: Vec::new(),
            cores: Vec::new(),
            caches: Vec::new(),
            distances: Vec::new(),
            memory_attributes: Vec::new(),
            total_memory_bytes: None,
            pci: Vec::new(),
            irqs: Vec::new(),
            net_interfaces: Vec::new(),
            iommu: None,
            processes: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn note(&mut self, level: NoteLevel, path: impl Into<String>, message: impl Into<String>) {
        self.notes.push(ImportNote {
            level,
            path: path.into(),
            message: message.into(),
        });
    }

    pub fn node(&self, id: u32) -> Option<&NumaNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The NUMA node a CPU runs on (its home): of the nodes whose CPU sets hold it
    /// (hwloc also gives HBM, NVM or GPU memory nodes the CPUs of their locality), the
    /// first whose memory is not of a special kind, else the first.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        let mut holding = self.nodes.iter().filter(|n| n.cpus.contains(cpu));
        let first = holding.clone().next()?;
        Some(holding.find(|n| !n.is_special_memory()).unwrap_or(first).id)
    }

    /// The CPUs whose home is `node` (empty for a memory-only node).
    pub fn home_cpus(&self, node: u32) -> CpuSet {
        self.node(node)
            .map(|n| {
                n.cpus
                    .iter()
                    .filter(|&c| self.node_of_cpu(c) == Some(node))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A node no CPU runs on: no CPUs at all (sysfs), or only CPUs whose home is
    /// another node (hwloc's HBM, NVM, GPU memory beside a DRAM node).
    pub fn is_memory_only(&self, node: u32) -> bool {
        self.home_cpus(node).is_empty()
    }

    /// The nodes the CPUs of a set run on.
    pub fn nodes_of_cpus(&self, cpus: &CpuSet) -> CpuSet {
        cpus.iter().filter_map(|c| self.node_of_cpu(c)).collect()
    }

    /// The single node all of `cpus` run on, if there is one.
    pub fn node_containing(&self, cpus: &CpuSet) -> Option<u32> {
        if cpus.is_empty() {
            return None;
        }
        let mut homes = cpus.iter().map(|c| self.node_of_cpu(c));
        let first = homes.next()??;
        homes.all(|h| h == Some(first)).then_some(first)
    }

    /// The package holding a node's CPUs (the first one if it spans several).
    pub fn package_of_node(&self, node: u32) -> Option<u32> {
        let cpus = &self.node(node)?.cpus;
        self.packages
            .iter()
            .find(|p| p.cpus.intersects(cpus))
            .map(|p| p.id)
    }

    /// The NUMA distance matrix (SLIT or hwloc's NUMALatency), if any.
    pub fn numa_distances(&self) -> Option<&DistanceMatrix> {
        self.distances
            .iter()
            .filter(|d| d.object_type.eq_ignore_ascii_case("NUMANode"))
            .find(|d| d.kind & 8 == 0)
    }

    /// The last-level cache: highest level among data/unified caches.
    pub fn last_level_cache(&self) -> Option<&Cache> {
        let max = self
            .caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .map(|c| c.level)
            .max()?;
        self.caches
            .iter()
            .find(|c| c.level == max && c.kind != CacheKind::Instruction)
    }

    pub fn pci_index(&self, bdf: Bdf) -> Option<usize> {
        self.pci.iter().position(|d| d.bdf == bdf)
    }

    /// The PCI function carrying an OS device name (`eth0`, `nvme0`, `mlx5_0`).
    pub fn pci_by_os_name(&self, name: &str) -> Option<&PciDevice> {
        self.pci
            .iter()
            .find(|d| d.os_devices.iter().any(|o| o.name == name))
    }
}
