//! `nudma inspect --export`: the imported machine as a scenario TOML for the
//! simulator, in the preliminary schema of the `fabric` crate (platform, memory
//! matrices, interconnect, host, switches, devices, multi-PF functions).
//!
//! Every value the machine did not state carries a `# assumption: …` comment, so a
//! reader sees what to measure or correct. Memory latency and bandwidth come, in
//! order of preference, from a `nudma calibrate` file, from hwloc memory attributes,
//! or from the NUMA distance matrix scaled to assumed local figures.
//!
//! The writer is split by concern: `platform` the `[platform.X]` figures, `memory` the
//! memory matrices and memory-only nodes, `timing` the timing table, `interconnect` the
//! package links, `devices` the PCIe switches and devices.

mod devices;
mod interconnect;
mod memory;
mod platform;
mod timing;

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

use crate::error::InspectError;
use crate::layout::Layout;
use crate::model::{Machine, Source};
use crate::platform_file::MemoryParams;

pub use devices::pcie_gen_of_cpu;

use devices::{device_models_toml, PciExport};
use interconnect::{interconnect_toml, package_links};
use memory::{memory_matrices, memory_nodes_toml};
use platform::platform_toml;
use timing::timing_section;

/// Local DRAM latency assumed when nothing was measured (a typical two-socket
/// Xeon); remote latency scales with the distance matrix.
pub const ASSUMED_LOCAL_LATENCY_NS: f64 = 90.0;
/// Local DRAM bandwidth of one node assumed when nothing was measured.
pub const ASSUMED_LOCAL_BANDWIDTH_GBPS: f64 = 60.0;
const PLATFORM: &str = "imported";
/// The scenario lays RAM out in whole MiB.
const MIB: u64 = 1 << 20;
/// The longest name the fabric takes (`fabric::scenario::valid_name`).
const MAX_NAME: usize = 64;
/// The most memory the fabric gives one node: 64 TiB (dram_bytes_per_node, memory_node
/// bytes in crates/fabric/src/scenario/platform.rs).
const FABRIC_NODE_BYTES: u64 = 1 << 46;
const SCENARIO_PREFIX: &str = "imported-";

/// Where the memory matrices of an export came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySource {
    Calibration,
    /// Every entry from hwloc's (or the HMAT's) Latency and Bandwidth attributes.
    HwlocMemoryAttributes,
    /// Some entries from memory attributes, the rest scaled by distances or assumed.
    Mixed,
    Distances,
    Assumed,
}

/// An exported scenario and how its memory figures were obtained.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioExport {
    pub toml: String,
    pub memory_source: MemorySource,
    pub device_names: Vec<String>,
    /// The scenario's node `i` is the machine's node `node_ids[i]`: CPU nodes package
    /// by package, then the memory-only nodes.
    pub node_ids: Vec<u32>,
    /// How many of the last `node_ids` are memory-only nodes.
    pub memory_only: usize,
}

/// A calibration file and the path it was read from (for comments and errors).
pub struct Calibration<'a> {
    pub params: &'a MemoryParams,
    pub path: &'a Path,
}

/// Turns a machine into scenario TOML.
pub fn scenario_toml(
    m: &Machine,
    calibration: Option<Calibration>,
) -> Result<ScenarioExport, InspectError> {
    let mut out = String::new();
    let host = host_name(m);
    out.push_str(&header_toml(m, &host));

    // ----- platform -----
    let layout = Layout::of(m)?;
    out.push_str(&platform_toml(m, &layout));
    let _ = writeln!(out);

    // ----- memory -----
    let mem = memory_matrices(m, &layout, calibration)?;
    out.push_str(&mem.text);
    let _ = writeln!(out);
    let links = package_links(m, &layout);
    out.push_str(&timing_section(&mem, &layout, &links));
    let _ = writeln!(out);
    out.push_str(&memory_nodes_toml(m, &layout, &mem));

    // ----- interconnect -----
    out.push_str(&interconnect_toml(m, layout.packages.len(), &links));

    out.push_str(&device_models_toml());

    // ----- host -----
    out.push_str(&host_toml(m, &host));
    let topo = PciExport::new(m, &layout);
    out.push_str(&topo.switches_toml());
    let (devices_text, names) = topo.devices_toml();
    out.push_str(&devices_text);
    Ok(ScenarioExport {
        toml: out,
        memory_source: mem.source,
        device_names: names,
        node_ids: layout.node_ids.clone(),
        memory_only: layout.memory_nodes.len(),
    })
}

/// The opening comment and the `[scenario]` table.
fn header_toml(m: &Machine, host: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# nudma scenario written by `nudma inspect --export` from {}.",
        m.source.describe()
    );
    let _ = writeln!(
        out,
        "# Values the machine did not state are marked `# assumption: …`; correct or measure them."
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "[scenario]");
    let _ = writeln!(out, "name = {}", quote(&format!("{SCENARIO_PREFIX}{host}")));
    let _ = writeln!(
        out,
        "description = {}",
        quote(&format!("imported from {}", m.source.describe()))
    );
    let _ = writeln!(out);
    out
}

/// The `[[host]]` table: its name, platform and IOMMU.
fn host_toml(m: &Machine, host: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "[[host]]");
    let _ = writeln!(out, "name = {}", quote(host));
    let _ = writeln!(out, "platform = \"{PLATFORM}\"");
    match m.iommu {
        Some(v) => {
            let _ = writeln!(out, "iommu = {v}");
        }
        None => {
            let _ = writeln!(
                out,
                "iommu = false   # assumption: IOMMU state not reported"
            );
        }
    }
    let _ = writeln!(out);
    out
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Lower-case `[a-z0-9_]` (device names, starting with a letter) or `[a-z0-9_-]`
/// (host and scenario names, `allow_dash`).
pub fn sanitize_name(s: &str, allow_dash: bool) -> String {
    let mut out: String = s
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || (allow_dash && c == '-') {
                c
            } else if allow_dash {
                '-'
            } else {
                '_'
            }
        })
        .collect();
    let sep = if allow_dash { '-' } else { '_' };
    while out.contains(&format!("{sep}{sep}")) {
        out = out.replace(&format!("{sep}{sep}"), &sep.to_string());
    }
    let trimmed = out.trim_matches(sep).to_string();
    if trimmed.is_empty() {
        "unnamed".to_string()
    } else if !allow_dash && !trimmed.starts_with(|c: char| c.is_ascii_alphabetic()) {
        // Device names are identifiers: they start with a letter.
        format!("d_{trimmed}")
    } else {
        trimmed
    }
}

fn host_name(m: &Machine) -> String {
    let raw = m.hostname.clone().unwrap_or_else(|| match &m.source {
        Source::Sysfs { root } if root == Path::new("/") => "localhost".to_string(),
        Source::Sysfs { root } => root
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "snapshot".to_string()),
        Source::Hwloc { path, .. } => path
            .file_stem()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "hwloc".to_string()),
    });
    // Short enough that the scenario's name, which adds a prefix, is valid too.
    let name = sanitize_name(&raw, true);
    let cut = truncate(&name, MAX_NAME - SCENARIO_PREFIX.len());
    cut.trim_end_matches('-').to_string()
}

/// `s` cut to at most `max` bytes (sanitised names are ASCII).
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Names given out in one host: each unique and at most the fabric's length, a clash
/// taking `_2`, `_3`, … (cut to fit).
#[derive(Clone, Default)]
pub(super) struct Names(BTreeSet<String>);

impl Names {
    pub(super) fn take(&mut self, base: &str) -> String {
        let mut k = 1usize;
        loop {
            let suffix = if k == 1 {
                String::new()
            } else {
                format!("_{k}")
            };
            let name = format!("{}{suffix}", truncate(base, MAX_NAME - suffix.len()));
            if self.0.insert(name.clone()) {
                return name;
            }
            k += 1;
        }
    }
}

/// A node's memory as the fabric takes it (whole MiB, at most 64 TiB) and, when cut to
/// that limit, the comment saying so (`who` holds `bytes`).
fn fabric_node_bytes(bytes: u64, who: &str) -> (u64, Option<String>) {
    if bytes > FABRIC_NODE_BYTES {
        let why = format!(
            "assumption: {who} {bytes} bytes, beyond the fabric's 64 TiB a node; written at that limit"
        );
        (FABRIC_NODE_BYTES, Some(why))
    } else {
        ((bytes / MIB).max(1) * MIB, None)
    }
}

/// `key = { value = …, basis = "assumption", why = "…" }`: a value with its basis.
fn assumed(key: &str, value: &str, why: &str) -> String {
    format!(
        "{key} = {{ value = {value}, basis = \"assumption\", why = {} }}",
        quote(why)
    )
}

/// `key = { value = …, basis = "calibrated", on = "…" }`.
fn calibrated(key: &str, value: &str, on: &str) -> String {
    format!(
        "{key} = {{ value = {value}, basis = \"calibrated\", on = {} }}",
        quote(on)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PciDevice;

    #[test]
    fn pcie_generation_of_cpu_models() {
        for (model, gen) in [
            ("Intel(R) Xeon(R) CPU E5-2650 0 @ 2.00GHz", Some(3)),
            ("Intel(R) Xeon(R) CPU E7- 4870  @ 2.40GHz", Some(2)),
            ("Intel(R) Xeon(R) CPU E7-8890 v4 @ 2.20GHz", Some(3)),
            ("Intel(R) Xeon(R) CPU           X5670  @ 2.93GHz", Some(2)),
            ("Intel(R) Xeon(R) Platinum 8174 CPU @ 3.10GHz", Some(3)),
            ("Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz", Some(3)),
            ("Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz", Some(3)),
            ("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", Some(4)),
            ("Intel(R) Xeon(R) Platinum 8480+", Some(5)),
            ("AMD EPYC 7601 32-Core Processor", Some(3)),
            ("AMD EPYC 7742 64-Core Processor", Some(4)),
            ("AMD EPYC 9654 96-Core Processor", Some(5)),
            ("Dual Core AMD Opteron(tm) Processor 865", Some(2)),
            ("POWER9", Some(4)),
            ("QEMU Virtual CPU version 2.5+", None),
            ("AMD EPYC", None),
        ] {
            assert_eq!(pcie_gen_of_cpu(model), gen, "{model}");
        }
    }

    #[test]
    fn links_tied_by_bandwidth_take_the_platforms_generation() {
        let mut m = Machine::empty(Source::Hwloc {
            path: "x.xml".into(),
            major: 2,
        });
        let mut d = PciDevice::new("0000:01:00.0".parse().unwrap(), "pci0000:00".into());
        d.link.gbytes_per_s = Some(15.753846);
        let layout = Layout {
            packages: vec![],
            nodes_per_package: 1,
            node_ids: vec![],
            memory_nodes: vec![],
            packages_assumed: true,
            grouping: None,
        };
        let link = |m: &Machine, d: &PciDevice| PciExport::new(m, &layout).link_of(d, 8);
        // Unknown platform: the width nearest x8, as an assumption.
        let (l, note) = link(&m, &d);
        assert_eq!(l, "{ gen = 4, width = 8 }");
        let note = note.unwrap();
        assert!(
            note.starts_with(
                "assumption: hwloc's 15.753846 GB/s fits Gen3 x16, Gen4 x8, Gen5 x4, Gen6 x2"
            ),
            "{note}"
        );
        assert!(note.contains("generation is unknown"), "{note}");
        // A Gen3 platform: Gen3 x16, still an assumption naming why.
        m.cpu_model = Some("Intel(R) Xeon(R) CPU E5-2650 0 @ 2.00GHz".into());
        let (l, note) = link(&m, &d);
        assert_eq!(l, "{ gen = 3, width = 16 }");
        assert!(note.unwrap().contains("Gen3 x16 taken as this platform's PCIe generation is Gen3 (documented for the CPU model"));
        // A link rate the machine reports elsewhere wins over the CPU model.
        let mut other = PciDevice::new("0000:02:00.0".parse().unwrap(), "pci0000:00".into());
        other.link.max_gts = Some(16.0);
        m.pci.push(other);
        assert_eq!(link(&m, &d).0, "{ gen = 4, width = 8 }");
        // One candidate: recovered, not an assumption.
        d.link.gbytes_per_s = Some(0.25);
        let (l, note) = link(&m, &d);
        assert_eq!(l, "{ gen = 1, width = 1 }");
        assert!(note
            .unwrap()
            .starts_with("recovered from hwloc's 0.25 GB/s"));
        // A reported Gen6 link is modelled as the Gen5 link of equal bandwidth.
        d.link.current_gts = Some(64.0);
        d.link.current_width = Some(16);
        let (l, note) = link(&m, &d);
        assert_eq!(l, "{ gen = 5, width = 32 }");
        assert!(note.unwrap().contains("Gen6 x16 is modelled as Gen5 x32"));
    }

    #[test]
    fn names() {
        assert_eq!(sanitize_name("eth0.1015", false), "eth0_1015");
        assert_eq!(sanitize_name("My Host", true), "my-host");
        assert_eq!(
            sanitize_name("32em64t-2n8c+1mic", true),
            "32em64t-2n8c-1mic"
        );
        assert_eq!(sanitize_name("0abc", false), "d_0abc");
        assert_eq!(sanitize_name("", false), "unnamed");
        assert_eq!(sanitize_name("mlx5_0", false), "mlx5_0");
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
