//! The `--pid` probe: where a process's threads may run and last ran
//! (`/proc/PID/status`, `/proc/PID/task/*/{stat,status}`), where its memory sits
//! (`/proc/PID/numa_maps`), and which PCI functions it uses (open device files in
//! `/proc/PID/fd`, device mappings in `/proc/PID/maps`).
//!
//! Sockets cannot be tied to a NIC from procfs alone, so a process that uses the
//! network only through sockets shows no device; the audit says so.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::cpuset::CpuSet;
use crate::model::{DeviceUse, Machine, ProcessInfo, ThreadInfo};
use crate::pci::Bdf;

/// Reads each process under `root/proc` and adds it to `machine.processes`.
pub fn read_processes(machine: &mut Machine, root: &Path, pids: &[u32]) {
    for &pid in pids {
        let info = read_process(machine, root, pid);
        machine.processes.push(info);
    }
}

/// `(comm, last CPU)` from a `/proc/PID/task/TID/stat` line. The command name is in
/// parentheses and may itself contain spaces and parentheses.
pub(crate) fn parse_stat(text: &str) -> Option<(String, Option<u32>)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let comm = text[open + 1..close].to_string();
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // fields[0] is field 3 (state); the last CPU is field 39.
    let processor = fields.get(36).and_then(|f| f.parse().ok());
    Some((comm, processor))
}

/// Resident bytes per node from `numa_maps` (`N0=12 N1=3 kernelpagesize_kB=4`).
pub(crate) fn parse_numa_maps(text: &str) -> BTreeMap<u32, u64> {
    let mut out: BTreeMap<u32, u64> = BTreeMap::new();
    for line in text.lines() {
        let mut page_kib: u64 = 4;
        let mut pages: Vec<(u32, u64)> = Vec::new();
        for token in line.split_whitespace() {
            if let Some(v) = token.strip_prefix("kernelpagesize_kB=") {
                page_kib = v.parse().unwrap_or(4);
            } else if let Some(rest) = token.strip_prefix('N') {
                if let Some((node, count)) = rest.split_once('=') {
                    if let (Ok(n), Ok(c)) = (node.parse::<u32>(), count.parse::<u64>()) {
                        pages.push((n, c));
                    }
                }
            }
        }
        for (node, count) in pages {
            let bytes = count.saturating_mul(page_kib).saturating_mul(1024);
            let slot = out.entry(node).or_insert(0);
            *slot = slot.saturating_add(bytes);
        }
    }
    out
}

fn status_field(status: &str, key: &str) -> Option<String> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

fn read_process(machine: &Machine, root: &Path, pid: u32) -> ProcessInfo {
    let dir = root.join("proc").join(pid.to_string());
    let mut info = ProcessInfo {
        pid,
        name: None,
        cpus_allowed: None,
        mems_allowed: None,
        threads: Vec::new(),
        memory_bytes_per_node: BTreeMap::new(),
        devices: Vec::new(),
        problems: Vec::new(),
    };
    let status = match fs::read_to_string(dir.join("status")) {
        Ok(s) => s,
        Err(e) => {
            info.problems
                .push(format!("{}: {e}", dir.join("status").display()));
            return info;
        }
    };
    info.name = status_field(&status, "Name");
    info.cpus_allowed =
        status_field(&status, "Cpus_allowed_list").and_then(|v| CpuSet::parse_list(&v).ok());
    info.mems_allowed =
        status_field(&status, "Mems_allowed_list").and_then(|v| CpuSet::parse_list(&v).ok());

    match fs::read_dir(dir.join("task")) {
        Ok(rd) => {
            let mut tids: Vec<u32> = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect();
            tids.sort_unstable();
            for tid in tids {
                let tdir = dir.join("task").join(tid.to_string());
                let (name, last_cpu) = fs::read_to_string(tdir.join("stat"))
                    .ok()
                    .and_then(|s| parse_stat(&s))
                    .map(|(c, p)| (Some(c), p))
                    .unwrap_or((None, None));
                let cpus_allowed = fs::read_to_string(tdir.join("status"))
                    .ok()
                    .and_then(|s| status_field(&s, "Cpus_allowed_list"))
                    .and_then(|v| CpuSet::parse_list(&v).ok());
                info.threads.push(ThreadInfo {
                    tid,
                    name,
                    last_cpu,
                    cpus_allowed,
                });
            }
        }
        Err(e) => info
            .problems
            .push(format!("{}: {e}", dir.join("task").display())),
    }

    match fs::read_to_string(dir.join("numa_maps")) {
        Ok(t) => info.memory_bytes_per_node = parse_numa_maps(&t),
        Err(e) => info
            .problems
            .push(format!("{}: {e}", dir.join("numa_maps").display())),
    }

    let mut uses: Vec<DeviceUse> = Vec::new();
    match fs::read_dir(dir.join("fd")) {
        Ok(rd) => {
            for e in rd.filter_map(|e| e.ok()) {
                if let Ok(target) = fs::read_link(e.path()) {
                    let t = target.to_string_lossy().into_owned();
                    for bdf in device_of_path(machine, root, &t) {
                        uses.push(DeviceUse {
                            bdf,
                            via: t.clone(),
                        });
                    }
                }
            }
        }
        Err(e) => info
            .problems
            .push(format!("{}: {e}", dir.join("fd").display())),
    }
    // Mapped BARs and device files (user-space drivers: DPDK, SPDK, verbs, CUDA).
    if let Ok(maps) = fs::read_to_string(dir.join("maps")) {
        for line in maps.lines() {
            let Some(path) = line.split_whitespace().nth(5) else {
                continue;
            };
            if path.starts_with("/dev/") || path.starts_with("/sys/") {
                for bdf in device_of_path(machine, root, path) {
                    uses.push(DeviceUse {
                        bdf,
                        via: path.to_string(),
                    });
                }
            }
        }
    }
    uses.sort_by(|a, b| a.bdf.cmp(&b.bdf).then(a.via.cmp(&b.via)));
    uses.dedup_by(|a, b| a.bdf == b.bdf);
    info.devices = uses;
    info
}

/// The PCI functions behind a file a process holds open or maps.
fn device_of_path(machine: &Machine, root: &Path, path: &str) -> Vec<Bdf> {
    let known = |b: Bdf| machine.pci_index(b).map(|_| b);
    if path.starts_with("/sys/") {
        return Bdf::last_in(path).and_then(known).into_iter().collect();
    }
    let Some(dev) = path.strip_prefix("/dev/") else {
        return Vec::new();
    };
    let sys = |rel: String| -> Option<Bdf> {
        let p = root.join(rel);
        fs::canonicalize(&p)
            .ok()
            .and_then(|r| Bdf::last_in(&r.to_string_lossy()))
            .and_then(known)
    };
    if let Some(uverbs) = dev.strip_prefix("infiniband/") {
        let ibdev =
            fs::read_to_string(root.join(format!("sys/class/infiniband_verbs/{uverbs}/ibdev")))
                .ok();
        return ibdev
            .and_then(|n| machine.pci_by_os_name(n.trim()).map(|d| d.bdf))
            .into_iter()
            .collect();
    }
    if let Some(group) = dev.strip_prefix("vfio/") {
        if group.bytes().all(|c| c.is_ascii_digit()) {
            return fs::read_dir(root.join(format!("sys/kernel/iommu_groups/{group}/devices")))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter_map(|e| e.file_name().to_str()?.parse::<Bdf>().ok())
                        .filter_map(known)
                        .collect()
                })
                .unwrap_or_default();
        }
        return Vec::new();
    }
    if let Some(minor) = dev
        .strip_prefix("nvidia")
        .filter(|m| !m.is_empty() && m.bytes().all(|c| c.is_ascii_digit()))
    {
        let gpus = root.join("proc/driver/nvidia/gpus");
        let found = fs::read_dir(gpus).ok().and_then(|rd| {
            rd.filter_map(|e| e.ok()).find_map(|e| {
                let text = fs::read_to_string(e.path().join("information")).ok()?;
                let m = status_field(&text, "Device Minor")?;
                (m == minor)
                    .then(|| e.file_name().to_str()?.parse::<Bdf>().ok())
                    .flatten()
            })
        });
        return found.and_then(known).into_iter().collect();
    }
    if let Some(card) = dev.strip_prefix("dri/") {
        return sys(format!("sys/class/drm/{card}")).into_iter().collect();
    }
    // Block devices and partitions, NVMe controllers and namespaces.
    let name = dev.to_string();
    if let Some(b) = sys(format!("sys/class/block/{name}"))
        .or_else(|| sys(format!("sys/class/nvme/{name}")))
        .or_else(|| sys(format!("sys/class/nvme-generic/{name}")))
    {
        return vec![b];
    }
    let mut candidate = name.as_str();
    loop {
        if let Some(d) = machine.pci_by_os_name(candidate) {
            return vec![d.bdf];
        }
        // nvme0n1p1 → nvme0n1 → nvme0; sda1 → sda.
        let cut = candidate
            .rfind(['p', 'n'])
            .filter(|&i| i > 0 && candidate[i + 1..].bytes().all(|c| c.is_ascii_digit()))
            .or_else(|| {
                let trimmed = candidate.trim_end_matches(|c: char| c.is_ascii_digit());
                (trimmed.len() < candidate.len() && trimmed.len() > 2).then_some(trimmed.len())
            });
        match cut {
            Some(i) if i < candidate.len() => candidate = &candidate[..i],
            _ => return Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_odd_command_names() {
        let mut fields = vec!["0"; 50];
        fields[36] = "7";
        let line = format!("123 (my (weird) cmd) {}", fields.join(" "));
        let (comm, cpu) = parse_stat(&line).unwrap();
        assert_eq!(comm, "my (weird) cmd");
        assert_eq!(cpu, Some(7));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn numa_maps_sums() {
        let t = "7f00 default anon=10 dirty=10 N0=6 N1=4 kernelpagesize_kB=4\n7f10 bind:1 file=/x huge N1=2 kernelpagesize_kB=2048\n";
        let m = parse_numa_maps(t);
        assert_eq!(m.get(&0), Some(&(6 * 4096)));
        assert_eq!(m.get(&1), Some(&(4 * 4096 + 2 * 2048 * 1024)));
    }
}
