//! The PCI tree under a sysfs root: each function's identity, locality, link, BARs,
//! SR-IOV and serial number, its name from a `pci.ids` file, the OS devices bound to it,
//! and whether an IOMMU is on.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::{natural_cmp, SysfsReader};
use crate::cpuset::CpuSet;
use crate::model::{Bar, NoteLevel, PciDevice};
use crate::pci::{parse_link_speed, Bdf, OsDevice, OsDeviceKind};

fn parse_hex_u32(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
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

impl SysfsReader {
    pub(super) fn read_pci(&mut self) {
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
                dev.bars = bars(&res);
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
    pub(super) fn read_pci_ids(&mut self) {
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
    pub(super) fn read_os_devices(&mut self) {
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
pub(super) fn device_bdf(path: &Path) -> Option<Bdf> {
    if let Ok(real) = fs::canonicalize(path) {
        return Bdf::last_in(&real.to_string_lossy());
    }
    fs::read_link(path)
        .ok()
        .and_then(|t| Bdf::last_in(&t.to_string_lossy()))
}

/// Memory BARs from a sysfs `resource` file (lines 0-5 are the BARs).
fn bars(text: &str) -> Vec<Bar> {
    const IORESOURCE_MEM: u64 = 0x200;
    const IORESOURCE_MEM_64: u64 = 0x0010_0000;
    text.lines()
        .take(6)
        .filter_map(|l| {
            let mut it = l
                .split_whitespace()
                .map(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
            let (start, end, flags) = (it.next()??, it.next()??, it.next()??);
            // `end - start + 1` overflows for a BAR spanning all 64 bits: not a BAR.
            let size = end.checked_sub(start)?.checked_add(1)?;
            (flags & IORESOURCE_MEM != 0 && end > start).then_some(Bar {
                size,
                is_64bit: flags & IORESOURCE_MEM_64 != 0,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn memory_bars() {
        let res = "0x0000000091120000 0x000000009113ffff 0x0000000000020200\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n0x0000000000003020 0x000000000000303f 0x0000000000020101\n0x0000038000000000 0x00000380000fffff 0x000000000014220c\n0x0000000000000000 0xffffffffffffffff 0x0000000000100200\n";
        let bar = |size, is_64bit| Bar { size, is_64bit };
        assert_eq!(bars(res), vec![bar(0x20000, false), bar(0x100000, true)]);
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
}
