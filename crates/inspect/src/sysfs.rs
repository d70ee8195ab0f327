//! Import of a live machine (or a snapshot of one, such as `hwloc-gather-topology`
//! makes) from sysfs and procfs under a root directory:
//!
//! - `/sys/devices/system/node/node*/{cpulist (or cpumap),meminfo,distance}`: NUMA nodes;
//!   `access1`/`access0` `initiators/`: each node's nearest initiators and their read
//!   latency and bandwidth (ACPI HMAT), as hwloc's `Latency`/`Bandwidth` attributes;
//! - `/proc/driver/nvidia/gpus/*/numa_status`: GPU memory onlined as a NUMA node;
//! - `/sys/devices/system/cpu/cpu*/{topology,cache}` and `/proc/cpuinfo`: packages,
//!   cores, threads, caches, CPU model and clock;
//! - `/sys/bus/pci/devices/*/{class,vendor,device,numa_node,local_cpulist,
//!   current_link_speed,current_link_width,max_link_speed,max_link_width,
//!   sriov_numvfs,msi_irqs,resource,config}`: the PCI tree;
//! - `/sys/class/{net,infiniband,nvme,block,drm,mic}`: OS devices of each function;
//! - `/sys/class/net/*/queues/*/{xps_cpus,rps_cpus}`: network queue masks;
//! - `/proc/interrupts`, `/proc/irq/*/{smp_affinity_list,effective_affinity_list}`.
//!
//! Everything is read-only and optional: a file that is missing or unreadable leaves
//! a `None` in the model and, when it matters, an [`ImportNote`](crate::model::ImportNote).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;
use crate::error::InspectError;
use crate::model::{
    Cache, CacheKind, Core, DistanceMatrix, Initiator, Irq, Machine, MemAttrValue, MemoryAttribute,
    NetInterface, NetQueue, NoteLevel, NumaNode, Package, PciDevice, Source,
};
use crate::pci::{parse_link_speed, Bdf, OsDevice, OsDeviceKind};

/// Reads the machine under `root` (`/` for this machine).
pub fn import_sysfs(root: &Path) -> Result<Machine, InspectError> {
    let meta = fs::metadata(root).map_err(|e| InspectError::io(root, e))?;
    if !meta.is_dir() {
        return Err(InspectError::Invalid {
            path: root.to_path_buf(),
            message: "--sysfs-root must be a directory".to_string(),
        });
    }
    let mut r = SysfsReader {
        root: root.to_path_buf(),
        m: Machine::empty(Source::Sysfs {
            root: root.to_path_buf(),
        }),
    };
    r.read_host();
    let cpuinfo = r.read_cpuinfo();
    r.read_cpus(&cpuinfo);
    r.read_nodes();
    r.read_pci();
    r.read_pci_ids();
    r.read_os_devices();
    r.read_net_interfaces();
    r.read_interrupts();
    r.read_iommu();
    Ok(r.m)
}

/// Extracts the nominal clock from a model name such as `… CPU E5-2680 0 @ 2.70GHz`.
pub fn clock_from_model(model: &str) -> Option<f64> {
    let after = model.rsplit_once('@')?.1.trim();
    let lower = after.to_ascii_lowercase();
    let (num, scale) = if let Some(n) = lower.strip_suffix("ghz") {
        (n, 1.0)
    } else if let Some(n) = lower.strip_suffix("mhz") {
        (n, 0.001)
    } else {
        return None;
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then_some(v * scale)
}

/// Parses sysfs cache sizes: `30720K`, `1M`, `512`.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1024),
        'M' | 'm' => (&t[..t.len() - 1], 1024 * 1024),
        'G' | 'g' => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

fn parse_hex_u32(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}

/// A `MemTotal:   16747124 kB` style line (also `Node 0 MemTotal: …`).
fn meminfo_total(text: &str) -> Option<u64> {
    meminfo_field(text, "MemTotal")
}

/// A field of `/proc/meminfo` or `nodeN/meminfo`, in bytes.
pub fn meminfo_field(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (key, rest) = l.split_once(':')?;
        if key.split_whitespace().last() != Some(field) {
            return None;
        }
        let mut parts = rest.split_whitespace();
        let v: u64 = parts.next()?.parse().ok()?;
        let unit = parts.next().unwrap_or("kB");
        let mult = if unit.eq_ignore_ascii_case("kb") {
            1024
        } else {
            1
        };
        v.checked_mul(mult)
    })
}

/// One `processor` block of `/proc/cpuinfo`.
#[derive(Default, Debug)]
struct CpuInfoEntry {
    processor: Option<u32>,
    vendor: Option<String>,
    model_name: Option<String>,
    mhz: Option<f64>,
    physical_id: Option<u32>,
    core_id: Option<u32>,
    cache_kib: Option<u64>,
}

fn parse_cpuinfo(text: &str) -> Vec<CpuInfoEntry> {
    let mut out = Vec::new();
    let mut cur = CpuInfoEntry::default();
    let mut any = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            if any {
                out.push(std::mem::take(&mut cur));
                any = false;
            }
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        any = true;
        match k {
            "processor" => cur.processor = v.parse().ok(),
            // x86 says vendor_id, ia64 vendor.
            "vendor_id" | "vendor" => cur.vendor = Some(v.to_string()),
            "model name" => cur.model_name = Some(v.to_string()),
            // POWER names the CPU in `cpu` ("POWER9, altivec supported") and gives its
            // clock as `clock : 3450.000000MHz`.
            "cpu" if cur.model_name.is_none() => {
                cur.model_name = v.split(',').next().map(|m| m.trim().to_string())
            }
            "clock" => cur.mhz = v.trim_end_matches("MHz").trim().parse().ok(),
            "cpu MHz" => cur.mhz = v.parse().ok(),
            "physical id" => cur.physical_id = v.parse().ok(),
            "core id" => cur.core_id = v.parse().ok(),
            "cache size" => {
                cur.cache_kib = v.split_whitespace().next().and_then(|n| n.parse().ok())
            }
            _ => {}
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// One `/proc/interrupts` line: IRQ number, (CPU, count) pairs, the rest.
pub(crate) type InterruptLine = (u32, Vec<(u32, u64)>, String);

/// Parses `/proc/interrupts` into (irq, per-CPU counts, description).
pub(crate) fn parse_proc_interrupts(text: &str) -> Vec<InterruptLine> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cpu_columns: Vec<u32> = header
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    let mut out = Vec::new();
    for line in lines {
        let mut tokens = line.split_whitespace();
        let Some(first) = tokens.next() else {
            continue;
        };
        let Some(irq) = first.strip_suffix(':').and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let rest: Vec<&str> = tokens.collect();
        let mut counts = Vec::new();
        let mut used = 0;
        for (i, cpu) in cpu_columns.iter().enumerate() {
            match rest.get(i).and_then(|t| t.parse::<u64>().ok()) {
                Some(c) => {
                    counts.push((*cpu, c));
                    used = i + 1;
                }
                None => break,
            }
        }
        out.push((irq, counts, rest[used..].join(" ")));
    }
    out
}

/// Whether an interrupt action name belongs to an OS device: `eth0`, `eth0-TxRx-3`,
/// `nvme0q2`, `mlx5_comp0@…` — but not `eth10` for `eth1`.
pub(crate) fn action_matches(token: &str, os_name: &str) -> bool {
    let Some(rest) = token.strip_prefix(os_name) else {
        return false;
    };
    match rest.chars().next() {
        None => true,
        Some(c) if !c.is_ascii_alphanumeric() => true,
        Some('q') if os_name.starts_with("nvme") => {
            rest[1..].chars().next().is_some_and(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

/// Reads the PCIe Device Serial Number capability from a config-space dump (only
/// root can read past the first 64 bytes, so this is often unavailable).
pub(crate) fn serial_from_config(config: &[u8]) -> Option<String> {
    let dword = |off: usize| -> Option<u32> {
        let b = config.get(off..off + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut off = 0x100usize;
    for _ in 0..64 {
        let header = dword(off)?;
        if header == 0 || header == 0xffff_ffff {
            return None;
        }
        if header & 0xffff == 0x0003 {
            let lo = dword(off + 4)?;
            let hi = dword(off + 8)?;
            let v = ((hi as u64) << 32) | lo as u64;
            let bytes = v.to_be_bytes();
            return Some(
                bytes
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join("-"),
            );
        }
        let next = ((header >> 20) & 0xffc) as usize;
        if next < 0x100 {
            return None;
        }
        off = next;
    }
    None
}

/// One node's HMAT figures for its nearest initiators.
struct HmatEntry {
    target: u32,
    initiators: CpuSet,
    latency_ns: Option<u64>,
    bandwidth_mib_s: Option<u64>,
}

/// (level, kind 0/1/2, shared CPUs, size, ways, line size): one cache instance.
type CacheKey = (u8, u8, CpuSet, u64, Option<u32>, Option<u32>);

struct SysfsReader {
    root: PathBuf,
    m: Machine,
}

impl SysfsReader {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    fn read(&self, path: &Path) -> Option<String> {
        fs::read_to_string(path).ok().map(|s| s.trim().to_string())
    }

    /// Reads an essential file; records a note when it cannot be read.
    fn read_noted(&mut self, rel: &str, level: NoteLevel, consequence: &str) -> Option<String> {
        let path = self.path(rel);
        match fs::read_to_string(&path) {
            Ok(s) => Some(s),
            Err(e) => {
                self.m.note(
                    level,
                    path.display().to_string(),
                    format!("cannot read ({e}); {consequence}"),
                );
                None
            }
        }
    }

    /// Directory entries sorted by name; `None` (and a note) when unreadable.
    fn list_dir(&mut self, rel: &str, level: NoteLevel, consequence: &str) -> Option<Vec<String>> {
        let path = self.path(rel);
        match fs::read_dir(&path) {
            Ok(rd) => {
                let mut names: Vec<String> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort_by(|a, b| natural_cmp(a, b));
                Some(names)
            }
            Err(e) => {
                self.m.note(
                    level,
                    path.display().to_string(),
                    format!("cannot read ({e}); {consequence}"),
                );
                None
            }
        }
    }

    fn read_host(&mut self) {
        self.m.hostname = self
            .read(&self.path("proc/sys/kernel/hostname"))
            .or_else(|| self.read(&self.path("etc/hostname")))
            .filter(|h| !h.is_empty());
        if let Some(text) = self.read(&self.path("proc/meminfo")) {
            self.m.total_memory_bytes = meminfo_total(&text);
        }
    }

    fn read_cpuinfo(&mut self) -> Vec<CpuInfoEntry> {
        let Some(text) = self.read_noted(
            "proc/cpuinfo",
            NoteLevel::Info,
            "CPU model and clock unknown",
        ) else {
            return Vec::new();
        };
        let entries = parse_cpuinfo(&text);
        if let Some(e) = entries.iter().find(|e| e.model_name.is_some()) {
            self.m.cpu_model = e.model_name.clone();
        }
        self.m.cpu_vendor = entries.iter().find_map(|e| e.vendor.clone());
        entries
    }

    fn read_cpus(&mut self, cpuinfo: &[CpuInfoEntry]) {
        let online = self
            .read(&self.path("sys/devices/system/cpu/online"))
            .and_then(|t| CpuSet::parse_list(&t).ok());
        let cpus = match online {
            Some(c) if !c.is_empty() => c,
            _ => {
                let from_dirs: CpuSet = fs::read_dir(self.path("sys/devices/system/cpu"))
                    .map(|rd| {
                        rd.filter_map(|e| e.ok())
                            .filter_map(|e| {
                                e.file_name()
                                    .to_str()?
                                    .strip_prefix("cpu")?
                                    .parse::<u32>()
                                    .ok()
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if from_dirs.is_empty() {
                    cpuinfo.iter().filter_map(|e| e.processor).collect()
                } else {
                    from_dirs
                }
            }
        };
        self.m.cpus = cpus.clone();

        let mut packages: BTreeMap<u32, CpuSet> = BTreeMap::new();
        let mut cores: BTreeMap<(u32, i64, u32), CpuSet> = BTreeMap::new();
        let mut caches: BTreeSet<CacheKey> = BTreeSet::new();
        for cpu in cpus.iter() {
            let base = format!("sys/devices/system/cpu/cpu{cpu}");
            let topo = |name: &str| -> Option<i64> {
                self.read(&self.path(&format!("{base}/topology/{name}")))
                    .and_then(|v| v.parse().ok())
            };
            let info = cpuinfo.iter().find(|e| e.processor == Some(cpu));
            let pkg = topo("physical_package_id")
                .filter(|&p| p >= 0)
                .map(|p| p as u32)
                .or_else(|| info.and_then(|e| e.physical_id));
            let core = topo("core_id")
                .filter(|&c| c >= 0)
                .map(|c| c as u32)
                .or_else(|| info.and_then(|e| e.core_id));
            let die = topo("die_id").unwrap_or(0);
            if let Some(p) = pkg {
                packages.entry(p).or_default().insert(cpu);
            }
            let core_key = (pkg.unwrap_or(0), die, core.unwrap_or(cpu));
            cores.entry(core_key).or_default().insert(cpu);

            let cache_dir = self.path(&format!("{base}/cache"));
            let Ok(rd) = fs::read_dir(&cache_dir) else {
                continue;
            };
            for entry in rd.filter_map(|e| e.ok()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with("index") {
                    continue;
                }
                let p = entry.path();
                let get = |f: &str| self.read(&p.join(f));
                let Some(level) = get("level").and_then(|v| v.parse::<u8>().ok()) else {
                    continue;
                };
                let kind = match get("type").as_deref() {
                    Some("Data") => 1,
                    Some("Instruction") => 2,
                    _ => 0,
                };
                let size = get("size").and_then(|s| parse_size(&s)).unwrap_or(0);
                let shared = get("shared_cpu_list")
                    .and_then(|s| CpuSet::parse_list(&s).ok())
                    .unwrap_or_else(|| CpuSet::single(cpu));
                let ways = get("ways_of_associativity")
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|&w| w > 0);
                let line = get("coherency_line_size")
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|&w| w > 0);
                caches.insert((level, kind, shared, size, ways, line));
            }
        }
        if packages.is_empty() && !cpus.is_empty() {
            packages.insert(0, cpus.clone());
        }
        self.m.packages = packages
            .into_iter()
            .map(|(id, cpus)| Package { id, cpus })
            .collect();
        self.m.cores = cores
            .into_iter()
            .map(|((pkg, _die, id), cpus)| Core {
                package: Some(pkg),
                id,
                cpus,
            })
            .collect();
        self.m.caches = caches
            .into_iter()
            .map(|(level, kind, cpus, size, ways, line)| Cache {
                level,
                kind: match kind {
                    1 => CacheKind::Data,
                    2 => CacheKind::Instruction,
                    _ => CacheKind::Unified,
                },
                size_bytes: size,
                ways,
                line_bytes: line,
                cpus,
            })
            .collect();
        if self.m.caches.is_empty() {
            // Without cache directories, /proc/cpuinfo "cache size" (the LLC of one
            // package on x86) is the best available figure.
            if let Some(kib) = cpuinfo.iter().find_map(|e| e.cache_kib) {
                self.m.caches.push(Cache {
                    level: 3,
                    kind: CacheKind::Unified,
                    size_bytes: kib * 1024,
                    ways: None,
                    line_bytes: None,
                    cpus: self
                        .m
                        .packages
                        .first()
                        .map(|p| p.cpus.clone())
                        .unwrap_or_default(),
                });
            }
        }
        self.m.clock_ghz = self
            .m
            .cpu_model
            .as_deref()
            .and_then(clock_from_model)
            .or_else(|| {
                self.read(&self.path("sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"))
                    .and_then(|v| v.parse::<f64>().ok())
                    .map(|khz| khz / 1e6)
            })
            .or_else(|| cpuinfo.iter().find_map(|e| e.mhz).map(|mhz| mhz / 1000.0));
    }

    fn read_nodes(&mut self) {
        let rel = "sys/devices/system/node";
        let names = self.list_dir(
            rel,
            NoteLevel::Warning,
            "no NUMA information: the machine is taken as a single node",
        );
        let mut rows: Vec<(u32, Option<Vec<f64>>)> = Vec::new();
        let mut hmat = Vec::new();
        for name in names.unwrap_or_default() {
            let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let dir = format!("{rel}/{name}");
            // Older kernels have only the hex `cpumap`; newer ones both.
            let list = self.read(&self.path(&format!("{dir}/cpulist")));
            let (file, parsed) = match list {
                Some(t) => ("cpulist", Some(CpuSet::parse_list(&t))),
                None => (
                    "cpumap",
                    self.read(&self.path(&format!("{dir}/cpumap")))
                        .map(|t| CpuSet::parse_mask(&t)),
                ),
            };
            let cpus = match parsed {
                Some(Ok(c)) => c,
                Some(Err(e)) => {
                    self.m.note(
                        NoteLevel::Warning,
                        self.path(&format!("{dir}/{file}")).display().to_string(),
                        e.to_string(),
                    );
                    CpuSet::new()
                }
                None => CpuSet::new(),
            };
            let memory_bytes = self
                .read(&self.path(&format!("{dir}/meminfo")))
                .and_then(|t| meminfo_total(&t));
            let distance = self
                .read(&self.path(&format!("{dir}/distance")))
                .and_then(|t| {
                    t.split_whitespace()
                        .map(|v| v.parse::<f64>().ok())
                        .collect::<Option<Vec<f64>>>()
                });
            // Some architectures keep offline CPUs in their node's list; nothing runs
            // on them, so they do not count.
            let cpus = if self.m.cpus.is_empty() || cpus.is_subset(&self.m.cpus) {
                cpus
            } else {
                let online = cpus.intersection(&self.m.cpus);
                let offline = cpus.difference(&self.m.cpus);
                self.m.note(
                    NoteLevel::Info,
                    self.path(&format!("{dir}/{file}")).display().to_string(),
                    format!(
                        "CPUs {} of node {id} are offline and not counted{}",
                        offline.to_list_string(),
                        if online.is_empty() {
                            "; the node is taken as memory only"
                        } else {
                            ""
                        }
                    ),
                );
                online
            };
            let mut node = NumaNode::new(id, cpus, memory_bytes);
            node.initiators = self.hmat(&dir, id, &mut hmat);
            self.m.nodes.push(node);
            rows.push((id, distance));
        }
        if self.m.nodes.is_empty() {
            self.m.nodes.push(NumaNode::new(
                0,
                self.m.cpus.clone(),
                self.m.total_memory_bytes,
            ));
            return;
        }
        self.hmat_attributes(hmat);
        self.read_gpu_memory_nodes();
        self.m.nodes.sort_by_key(|n| n.id);
        rows.sort_by_key(|r| r.0);
        let n = rows.len();
        if rows
            .iter()
            .all(|(_, d)| d.as_ref().is_some_and(|v| v.len() == n))
        {
            let values = rows
                .iter()
                .flat_map(|(_, d)| d.clone().unwrap_or_default())
                .collect();
            self.m.distances.push(DistanceMatrix {
                name: Some("SLIT".to_string()),
                object_type: "NUMANode".to_string(),
                kind: 1 | 4,
                ids: rows.iter().map(|(id, _)| *id as u64).collect(),
                values,
            });
        }
        if self.m.cpus.is_empty() {
            self.m.cpus = self
                .m
                .nodes
                .iter()
                .fold(CpuSet::new(), |a, n| a.union(&n.cpus));
        }
    }

    /// A node's nearest initiators and their access figures from the ACPI HMAT
    /// (`access1/initiators`: CPUs only, else `access0/initiators`), pushing
    /// (target, initiator nodes, read latency ns, read bandwidth MiB/s) onto `out`.
    fn hmat(&self, dir: &str, id: u32, out: &mut Vec<HmatEntry>) -> Option<CpuSet> {
        for class in ["access1", "access0"] {
            let idir = self.path(&format!("{dir}/{class}/initiators"));
            let Ok(rd) = fs::read_dir(&idir) else {
                continue;
            };
            let initiators: CpuSet = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_prefix("node")?
                        .parse::<u32>()
                        .ok()
                })
                .collect();
            if initiators.is_empty() {
                continue;
            }
            // The kernel writes 0 for a figure the firmware did not give.
            let figure = |f: &str| {
                self.read(&idir.join(f))
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|&v| v > 0)
            };
            out.push(HmatEntry {
                target: id,
                initiators: initiators.clone(),
                latency_ns: figure("read_latency"),
                bandwidth_mib_s: figure("read_bandwidth"),
            });
            return Some(initiators);
        }
        None
    }

    /// hwloc's `Latency` and `Bandwidth` memory attributes from the HMAT figures, with
    /// the initiator nodes' CPUs as initiator (as hwloc itself builds them).
    fn hmat_attributes(&mut self, entries: Vec<HmatEntry>) {
        let mut latency = Vec::new();
        let mut bandwidth = Vec::new();
        for e in entries {
            let cpus = e
                .initiators
                .iter()
                .filter_map(|n| self.m.node(n))
                .fold(CpuSet::new(), |a, n| a.union(&n.cpus));
            if cpus.is_empty() {
                continue;
            }
            for (list, value) in [
                (&mut latency, e.latency_ns),
                (&mut bandwidth, e.bandwidth_mib_s),
            ] {
                if let Some(v) = value {
                    list.push(MemAttrValue {
                        target_node: Some(e.target),
                        target_type: "NUMANode".to_string(),
                        target_gp_index: e.target as u64,
                        initiator: Some(Initiator::Cpus(cpus.clone())),
                        value: v,
                    });
                }
            }
        }
        for (name, values) in [("Latency", latency), ("Bandwidth", bandwidth)] {
            if !values.is_empty() {
                self.m.memory_attributes.push(MemoryAttribute {
                    name: name.to_string(),
                    flags: 0,
                    values,
                });
            }
        }
    }

    /// GPU memory the NVIDIA driver onlined as a NUMA node:
    /// `/proc/driver/nvidia/gpus/BDF/numa_status` names the node of each GPU.
    fn read_gpu_memory_nodes(&mut self) {
        let dir = self.path("proc/driver/nvidia/gpus");
        let Ok(rd) = fs::read_dir(&dir) else {
            return;
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let Ok(bdf) = name.parse::<Bdf>() else {
                continue;
            };
            let path = dir.join(&name).join("numa_status");
            let Some(text) = self.read(&path) else {
                continue;
            };
            let node = text.lines().find_map(|l| {
                l.strip_prefix("Node:")
                    .and_then(|v| v.trim().parse::<i64>().ok())
            });
            // `Node: -1`: the GPU's memory is not onlined as a node.
            let Some(n) = node.and_then(|n| u32::try_from(n).ok()) else {
                continue;
            };
            match self.m.nodes.iter_mut().find(|x| x.id == n) {
                Some(x) => {
                    x.kind = Some("GPUMemory".to_string());
                    x.device = Some(bdf);
                }
                None => self.m.note(
                    NoteLevel::Info,
                    path.display().to_string(),
                    format!("names NUMA node {n}, which the machine does not list"),
                ),
            }
        }
    }

    fn read_pci(&mut self) {
        let rel = "sys/bus/pci/devices";
        let Some(names) = self.list_dir(
            rel,
            NoteLevel::Warning,
            "no PCI information: devices not audited",
        ) else {
            return;
        };
        let mut parents: Vec<Option<Bdf>> = Vec::new();
        for name in names {
            let Ok(bdf) = name.parse::<Bdf>() else {
                self.m.note(
                    NoteLevel::Info,
                    self.path(&format!("{rel}/{name}")).display().to_string(),
                    "not a PCI address; skipped",
                );
                continue;
            };
            let dir = self.path(&format!("{rel}/{name}"));
            // The device's place in the tree is in its real path:
            // /sys/devices/pci0000:80/0000:80:02.2/0000:82:00.0.
            let real = fs::canonicalize(&dir)
                .map(|p| p.to_string_lossy().into_owned())
                .or_else(|_| fs::read_link(&dir).map(|p| p.to_string_lossy().into_owned()))
                .unwrap_or_default();
            let components: Vec<&str> = real.split('/').collect();
            let pos = components.iter().rposition(|c| *c == name);
            let (parent, host) = match pos.and_then(|p| p.checked_sub(1)) {
                Some(p) => match components[p].parse::<Bdf>() {
                    Ok(pb) => {
                        let host = components
                            .iter()
                            .find(|c| c.starts_with("pci"))
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| format!("pci{:04x}:{:02x}", bdf.domain, bdf.bus));
                        (Some(pb), host)
                    }
                    Err(_) => (None, components[p].to_string()),
                },
                None => (None, format!("pci{:04x}:{:02x}", bdf.domain, bdf.bus)),
            };
            let get = |f: &str| self.read(&dir.join(f));
            let mut dev = PciDevice::new(bdf, host);
            dev.class_code = get("class").and_then(|v| parse_hex_u32(&v));
            dev.vendor_id = get("vendor")
                .and_then(|v| parse_hex_u32(&v))
                .map(|v| v as u16);
            dev.device_id = get("device")
                .and_then(|v| parse_hex_u32(&v))
                .map(|v| v as u16);
            dev.subsystem_vendor_id = get("subsystem_vendor")
                .and_then(|v| parse_hex_u32(&v))
                .map(|v| v as u16);
            dev.subsystem_device_id = get("subsystem_device")
                .and_then(|v| parse_hex_u32(&v))
                .map(|v| v as u16);
            dev.is_bridge = dev
                .class_code
                .is_some_and(|c| matches!(c >> 8, 0x0604 | 0x0609));
            dev.numa_node_raw = get("numa_node").and_then(|v| v.parse::<i64>().ok());
            dev.numa_node = dev
                .numa_node_raw
                .filter(|&n| (0..=u32::MAX as i64).contains(&n))
                .map(|n| n as u32);
            dev.local_cpus = get("local_cpulist")
                .and_then(|v| CpuSet::parse_list(&v).ok())
                .or_else(|| get("local_cpus").and_then(|v| CpuSet::parse_mask(&v).ok()));
            dev.link.current_gts = get("current_link_speed").and_then(|v| parse_link_speed(&v));
            dev.link.max_gts = get("max_link_speed").and_then(|v| parse_link_speed(&v));
            let width = |v: String| -> Option<u32> {
                v.trim_start_matches('x')
                    .parse::<u32>()
                    .ok()
                    .filter(|&w| w > 0)
            };
            dev.link.current_width = get("current_link_width").and_then(width);
            dev.link.max_width = get("max_link_width").and_then(width);
            dev.sriov_numvfs = get("sriov_numvfs").and_then(|v| v.parse().ok());
            dev.sriov_totalvfs = get("sriov_totalvfs").and_then(|v| v.parse().ok());
            dev.physfn = fs::read_link(dir.join("physfn"))
                .ok()
                .and_then(|p| Bdf::last_in(&p.to_string_lossy()));
            if let Some(res) = get("resource") {
                dev.bar_sizes = bar_sizes(&res);
            }
            let mut irqs: Vec<u32> = fs::read_dir(dir.join("msi_irqs"))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter_map(|e| e.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            if irqs.is_empty() {
                if let Some(i) = get("irq").and_then(|v| v.parse::<u32>().ok()) {
                    if i > 0 {
                        irqs.push(i);
                    }
                }
            }
            irqs.sort_unstable();
            dev.irqs = irqs;
            let base_class = dev.class_code.map(|c| c >> 16);
            if matches!(base_class, Some(0x02) | Some(0x0c)) {
                if let Ok(cfg) = fs::read(dir.join("config")) {
                    dev.serial = serial_from_config(&cfg);
                }
            }
            self.scan_device_dir(&dir, &mut dev);
            parents.push(parent);
            self.m.pci.push(dev);
        }
        for (i, parent) in parents.into_iter().enumerate() {
            self.m.pci[i].parent = parent.and_then(|p| self.m.pci_index(p));
        }
    }

    /// Vendor and device names from a pci.ids database under the root, if there is one.
    fn read_pci_ids(&mut self) {
        const CANDIDATES: [&str; 3] = [
            "usr/share/misc/pci.ids",
            "usr/share/hwdata/pci.ids",
            "usr/share/pci.ids",
        ];
        if self.m.pci.is_empty() {
            return;
        }
        let Some(text) = CANDIDATES
            .iter()
            .find_map(|c| fs::read_to_string(self.path(c)).ok())
        else {
            return;
        };
        let names = parse_pci_ids(&text);
        for d in &mut self.m.pci {
            if let Some(v) = d.vendor_id {
                d.vendor_name = names.get(&(v, None)).cloned();
                if let Some(dev) = d.device_id {
                    d.device_name = names.get(&(v, Some(dev))).cloned();
                }
            }
        }
    }

    /// OS devices found inside a PCI device directory (also one level down, where
    /// virtio puts them: `0000:00:03.0/virtio2/net/eth0`).
    fn scan_device_dir(&self, dir: &Path, dev: &mut PciDevice) {
        let mut dirs = vec![dir.to_path_buf()];
        if let Ok(rd) = fs::read_dir(dir) {
            for e in rd.filter_map(|e| e.ok()) {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with("virtio") {
                    dirs.push(e.path());
                }
            }
        }
        for d in dirs {
            for (sub, kind) in [
                ("net", OsDeviceKind::Net),
                ("infiniband", OsDeviceKind::Openfabrics),
                ("nvme", OsDeviceKind::NvmeController),
                ("misc", OsDeviceKind::NvmeController),
                ("drm", OsDeviceKind::Gpu),
                ("mic", OsDeviceKind::Coproc),
                ("block", OsDeviceKind::Block),
            ] {
                let Ok(rd) = fs::read_dir(d.join(sub)) else {
                    continue;
                };
                let mut names: Vec<String> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| match sub {
                        "misc" => n.starts_with("nvme"),
                        "drm" => is_drm_card(n),
                        _ => true,
                    })
                    .collect();
                names.sort_by(|a, b| natural_cmp(a, b));
                for name in names {
                    add_os_device(dev, name, kind);
                }
            }
        }
    }

    /// OS devices found through `/sys/class/*`, which also reaches devices nested
    /// deep below their PCI function (SATA disks under `host*/target*/…`).
    fn read_os_devices(&mut self) {
        for (class, kind) in [
            ("net", OsDeviceKind::Net),
            ("infiniband", OsDeviceKind::Openfabrics),
            ("nvme", OsDeviceKind::NvmeController),
            ("block", OsDeviceKind::Block),
            ("drm", OsDeviceKind::Gpu),
            ("mic", OsDeviceKind::Coproc),
        ] {
            let dir = self.path(&format!("sys/class/{class}"));
            let Ok(rd) = fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<(String, PathBuf)> = rd
                .filter_map(|e| e.ok())
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .collect();
            entries.sort_by(|a, b| natural_cmp(&a.0, &b.0));
            for (name, path) in entries {
                if class == "block" && path.join("partition").exists() {
                    continue;
                }
                if class == "drm" && !is_drm_card(&name) {
                    continue;
                }
                let Some(bdf) = device_bdf(&path) else {
                    continue;
                };
                if let Some(i) = self.m.pci_index(bdf) {
                    add_os_device(&mut self.m.pci[i], name, kind);
                }
            }
        }
    }

    fn read_net_interfaces(&mut self) {
        let Some(names) = self.list_dir(
            "sys/class/net",
            NoteLevel::Info,
            "network queues (XPS/RPS) not audited",
        ) else {
            return;
        };
        for name in names {
            let dir = self.path(&format!("sys/class/net/{name}"));
            let Some(bdf) = device_bdf(&dir) else {
                continue;
            };
            let mut iface = NetInterface {
                name: name.clone(),
                bdf: Some(bdf),
                tx_queues: Vec::new(),
                rx_queues: Vec::new(),
            };
            if let Ok(rd) = fs::read_dir(dir.join("queues")) {
                let mut queues: Vec<String> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                queues.sort_by(|a, b| natural_cmp(a, b));
                for q in queues {
                    let (list, file, index) = if let Some(i) = q.strip_prefix("tx-") {
                        (&mut iface.tx_queues, "xps_cpus", i)
                    } else if let Some(i) = q.strip_prefix("rx-") {
                        (&mut iface.rx_queues, "rps_cpus", i)
                    } else {
                        continue;
                    };
                    let Ok(index) = index.parse::<u32>() else {
                        continue;
                    };
                    let cpus = fs::read_to_string(dir.join("queues").join(&q).join(file))
                        .ok()
                        .and_then(|t| CpuSet::parse_mask(&t).ok());
                    list.push(NetQueue { index, cpus });
                }
            }
            self.m.net_interfaces.push(iface);
        }
    }

    fn read_interrupts(&mut self) {
        let parsed = self
            .read_noted(
                "proc/interrupts",
                NoteLevel::Info,
                "interrupt affinity not audited",
            )
            .map(|t| parse_proc_interrupts(&t))
            .unwrap_or_default();
        let mut wanted: BTreeSet<u32> = self
            .m
            .pci
            .iter()
            .flat_map(|d| d.irqs.iter().copied())
            .collect();
        // Tie interrupts to devices by the address in the chip name
        // (`PCI-MSIX-0000:00:03.0`) and by action names (`eth0-TxRx-0`, `nvme0q1`).
        for (irq, _, desc) in &parsed {
            let mut owners: Vec<usize> = Vec::new();
            if let Some(bdf) = Bdf::last_in(desc) {
                owners.extend(self.m.pci_index(bdf));
            }
            for token in desc.split([' ', ',']).filter(|t| !t.is_empty()) {
                for (i, dev) in self.m.pci.iter().enumerate() {
                    if dev
                        .os_devices
                        .iter()
                        .any(|o| o.kind != OsDeviceKind::Block && action_matches(token, &o.name))
                    {
                        owners.push(i);
                    }
                }
            }
            for i in owners {
                if !self.m.pci[i].irqs.contains(irq) {
                    self.m.pci[i].irqs.push(*irq);
                    self.m.pci[i].irqs.sort_unstable();
                }
                wanted.insert(*irq);
            }
        }
        let by_irq: BTreeMap<u32, (Vec<(u32, u64)>, String)> = parsed
            .into_iter()
            .map(|(irq, counts, desc)| (irq, (counts, desc)))
            .collect();
        for irq in wanted {
            let dir = self.path(&format!("proc/irq/{irq}"));
            let affinity = self
                .read(&dir.join("smp_affinity_list"))
                .and_then(|t| CpuSet::parse_list(&t).ok())
                .or_else(|| {
                    self.read(&dir.join("smp_affinity"))
                        .and_then(|t| CpuSet::parse_mask(&t).ok())
                });
            let effective = self
                .read(&dir.join("effective_affinity_list"))
                .and_then(|t| CpuSet::parse_list(&t).ok())
                .filter(|c| !c.is_empty());
            let (counts, description) = by_irq.get(&irq).cloned().unwrap_or_default();
            self.m.irqs.push(Irq {
                irq,
                affinity,
                effective,
                counts,
                description,
            });
        }
    }

    fn read_iommu(&mut self) {
        let count =
            |rel: &str| -> Option<usize> { fs::read_dir(self.path(rel)).ok().map(|rd| rd.count()) };
        self.m.iommu = match (count("sys/class/iommu"), count("sys/kernel/iommu_groups")) {
            (Some(a), _) if a > 0 => Some(true),
            (_, Some(b)) if b > 0 => Some(true),
            (Some(_), _) | (_, Some(_)) => Some(false),
            (None, None) => None,
        };
    }
}

/// Vendor (`(v, None)`) and device (`(v, Some(d))`) names from pci.ids text.
pub(crate) fn parse_pci_ids(text: &str) -> BTreeMap<(u16, Option<u16>), String> {
    let mut out = BTreeMap::new();
    let mut vendor: Option<u16> = None;
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if line.starts_with("C ") {
            break; // the device class section follows the vendors
        }
        let id_name = |l: &str| -> Option<(u16, String)> {
            let (id, name) = l.split_once(char::is_whitespace)?;
            Some((u16::from_str_radix(id, 16).ok()?, name.trim().to_string()))
        };
        if let Some(rest) = line.strip_prefix('\t') {
            if rest.starts_with('\t') {
                continue; // subsystem line
            }
            if let (Some(v), Some((d, name))) = (vendor, id_name(rest)) {
                out.insert((v, Some(d)), name);
            }
        } else if let Some((v, name)) = id_name(line) {
            vendor = Some(v);
            out.insert((v, None), name);
        } else {
            vendor = None;
        }
    }
    out
}

fn is_drm_card(name: &str) -> bool {
    name.strip_prefix("card")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

fn add_os_device(dev: &mut PciDevice, name: String, kind: OsDeviceKind) {
    if !dev.os_devices.iter().any(|o| o.name == name) {
        dev.os_devices.push(OsDevice { name, kind });
    }
}

/// The PCI function behind a class entry (`/sys/class/net/eth0`): the last PCI
/// address in its real path, falling back to the raw link text.
fn device_bdf(path: &Path) -> Option<Bdf> {
    if let Ok(real) = fs::canonicalize(path) {
        return Bdf::last_in(&real.to_string_lossy());
    }
    fs::read_link(path)
        .ok()
        .and_then(|t| Bdf::last_in(&t.to_string_lossy()))
}

/// Memory BAR sizes from a sysfs `resource` file (lines 0-5 are the BARs).
fn bar_sizes(text: &str) -> Vec<u64> {
    const IORESOURCE_MEM: u64 = 0x200;
    text.lines()
        .take(6)
        .filter_map(|l| {
            let mut it = l
                .split_whitespace()
                .map(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
            let (start, end, flags) = (it.next()??, it.next()??, it.next()??);
            (flags & IORESOURCE_MEM != 0 && end > start).then(|| end - start + 1)
        })
        .collect()
}

/// Orders `eth2` before `eth10` and `node2` before `node10`.
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| {
        let digits_at = s
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_digit())
            .last()
            .map(|(i, _)| i);
        match digits_at {
            Some(i) => (s[..i].to_string(), s[i..].parse::<u64>().ok()),
            None => (s.to_string(), None),
        }
    };
    let (pa, na) = split(a);
    let (pb, nb) = split(b);
    pa.cmp(&pb).then(na.cmp(&nb)).then(a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_sizes() {
        assert_eq!(
            clock_from_model("Intel(R) Xeon(R) CPU E5-2680 0 @ 2.70GHz"),
            Some(2.7)
        );
        assert_eq!(clock_from_model("AMD EPYC"), None);
        assert_eq!(parse_size("30720K"), Some(30720 * 1024));
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn interrupts_parse() {
        let text = "           CPU0       CPU1\n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 38:          0       2110 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\nNMI:          0          0   Non-maskable interrupts\n";
        let p = parse_proc_interrupts(text);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].0, 38);
        assert_eq!(p[1].1, vec![(0, 0), (1, 2110)]);
        assert!(p[1].2.contains("virtio2-input.0"));
    }

    #[test]
    fn action_names() {
        assert!(action_matches("eth1", "eth1"));
        assert!(action_matches("eth1-TxRx-3", "eth1"));
        assert!(!action_matches("eth10-TxRx-3", "eth1"));
        assert!(action_matches("nvme0q3", "nvme0"));
        assert!(!action_matches("nvme01", "nvme0"));
        assert!(action_matches("mlx5_comp0@pci:0000:81:00.0", "mlx5_comp0"));
    }

    #[test]
    fn dsn_capability() {
        let mut cfg = vec![0u8; 0x200];
        // Extended capability at 0x100: AER (id 1) → next 0x140: DSN (id 3).
        cfg[0x100..0x104].copy_from_slice(&((0x140u32 << 20) | 0x0001).to_le_bytes());
        cfg[0x140..0x144].copy_from_slice(&0x0001_0003u32.to_le_bytes());
        cfg[0x144..0x148].copy_from_slice(&0x0304_0506u32.to_le_bytes());
        cfg[0x148..0x14c].copy_from_slice(&0x0000_0102u32.to_le_bytes());
        assert_eq!(
            serial_from_config(&cfg).as_deref(),
            Some("00-00-01-02-03-04-05-06")
        );
        assert_eq!(serial_from_config(&cfg[..64]), None);
    }

    #[test]
    fn bars() {
        let res = "0x0000000091120000 0x000000009113ffff 0x0000000000020200\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n0x0000000000003020 0x000000000000303f 0x0000000000020101\n";
        assert_eq!(bar_sizes(res), vec![0x20000]);
    }

    #[test]
    fn pci_ids() {
        let text = "# comment\n8086  Intel Corporation\n\t1521  I350 Gigabit Network Connection\n\t\t8086 0001  Ethernet Server Adapter I350-T4\n15b3  Mellanox Technologies\n\t1017  MT27800 Family [ConnectX-5]\nC 00  Unclassified device\n\t00  Non-VGA unclassified device\n";
        let ids = parse_pci_ids(text);
        assert_eq!(ids[&(0x8086, None)], "Intel Corporation");
        assert_eq!(
            ids[&(0x8086, Some(0x1521))],
            "I350 Gigabit Network Connection"
        );
        assert_eq!(ids[&(0x15b3, Some(0x1017))], "MT27800 Family [ConnectX-5]");
        assert_eq!(ids.len(), 4);
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["eth10", "eth2", "eth1", "ib0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["eth1", "eth2", "eth10", "ib0"]);
    }
}
