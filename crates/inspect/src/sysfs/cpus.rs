//! The CPUs under a sysfs root: packages, cores, threads and caches from
//! `/sys/devices/system/cpu`, the CPU model and clock from `/proc/cpuinfo`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use super::{clock_from_model, parse_size, SysfsReader};
use crate::cpuset::CpuSet;
use crate::model::{limits, Cache, CacheKind, Core, NoteLevel, Package};

/// One `processor` block of `/proc/cpuinfo`.
#[derive(Default, Debug)]
pub(super) struct CpuInfoEntry {
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

/// (level, kind 0/1/2, shared CPUs, size, ways, line size): one cache instance.
type CacheKey = (u8, u8, CpuSet, u64, Option<u32>, Option<u32>);

impl SysfsReader {
    pub(super) fn read_cpuinfo(&mut self) -> Vec<CpuInfoEntry> {
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

    pub(super) fn read_cpus(&mut self, cpuinfo: &[CpuInfoEntry]) {
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
            // A size past the importers' bound is no cache's: left out.
            let bytes = cpuinfo
                .iter()
                .find_map(|e| e.cache_kib)
                .and_then(|kib| kib.checked_mul(1024))
                .filter(|&b| b <= limits::CACHE_BYTES);
            if let Some(bytes) = bytes {
                self.m.caches.push(Cache {
                    level: 3,
                    kind: CacheKind::Unified,
                    size_bytes: bytes,
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
}
