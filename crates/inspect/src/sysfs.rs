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
//!
//! This file holds the reader and what every part shares (reading files and
//! directories with notes, text parsing helpers, the host's name and memory); each part
//! of the machine is read in a file of its own: `cpus`, `nodes` (NUMA nodes, HMAT, GPU
//! memory), `pci_devices` (the PCI tree, its OS devices, the IOMMU) and `interrupts`
//! (interrupts and network queue masks).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::InspectError;
use crate::model::{Machine, NoteLevel, Source};

mod cpus;
mod interrupts;
mod nodes;
mod pci_devices;

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
    fn natural_order() {
        let mut v = vec!["eth10", "eth2", "eth1", "ib0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["eth1", "eth2", "eth10", "ib0"]);
    }
}
