//! `nudma inspect --export`: the imported machine as a scenario TOML for the
//! simulator, in the preliminary schema of the `fabric` crate (platform, memory
//! matrices, interconnect, host, switches, devices, multi-PF functions).
//!
//! Every value the machine did not state carries a `# assumption: …` comment, so a
//! reader sees what to measure or correct. Memory latency and bandwidth come, in
//! order of preference, from a `nudma calibrate` file, from hwloc memory attributes,
//! or from the NUMA distance matrix scaled to assumed local figures.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;

use crate::audit::{device_placement, multi_pf_groups};
use crate::error::InspectError;
use crate::model::{Initiator, Machine, PciDevice, Source};
use crate::pci::DeviceClass;
use crate::platform_file::{format_float, matrix_toml, MemoryParams};

/// Local DRAM latency assumed when nothing was measured (a typical two-socket
/// Xeon); remote latency scales with the distance matrix.
pub const ASSUMED_LOCAL_LATENCY_NS: f64 = 90.0;
/// Local DRAM bandwidth of one node assumed when nothing was measured.
pub const ASSUMED_LOCAL_BANDWIDTH_GBPS: f64 = 60.0;
const PLATFORM: &str = "imported";

/// Where the memory matrices of an export came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySource {
    Calibration,
    HwlocMemoryAttributes,
    Distances,
    Assumed,
}

/// An exported scenario and how its memory figures were obtained.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioExport {
    pub toml: String,
    pub memory_source: MemorySource,
    pub device_names: Vec<String>,
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
    let _ = writeln!(out, "name = {}", quote(&format!("imported-{host}")));
    let _ = writeln!(
        out,
        "description = {}",
        quote(&format!("imported from {}", m.source.describe()))
    );
    let _ = writeln!(out);

    // ----- platform -----
    let cpu_nodes: Vec<u32> = m
        .nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| n.id)
        .collect();
    let _ = writeln!(out, "[platform.{PLATFORM}]");
    match &m.cpu_model {
        Some(c) => {
            let _ = writeln!(out, "cpu = {}", quote(c));
        }
        None => {
            let _ = writeln!(
                out,
                "cpu = \"unknown\"   # assumption: the CPU model was not reported"
            );
        }
    }
    let (packages, packages_assumed) = if m.packages.is_empty() {
        (cpu_nodes.len().max(1), true)
    } else {
        (m.packages.len(), false)
    };
    let _ = writeln!(
        out,
        "packages = {packages}{}",
        if packages_assumed {
            "   # assumption: no package objects; one package per NUMA node with CPUs"
        } else {
            ""
        }
    );
    let cpu_node_count = cpu_nodes.len().max(1);
    let npp = cpu_node_count.div_ceil(packages).max(1);
    let _ = writeln!(
        out,
        "nodes_per_package = {npp}{}",
        if !cpu_node_count.is_multiple_of(packages) {
            format!("   # assumption: {cpu_node_count} NUMA nodes with CPUs over {packages} packages do not divide evenly")
        } else if m.nodes.len() > cpu_nodes.len() {
            format!(
                "   # {} memory-only node(s) not counted",
                m.nodes.len() - cpu_nodes.len()
            )
        } else {
            String::new()
        }
    );
    let threads = m.cpus.len().max(1);
    let (cores, cores_assumed) = if m.cores.is_empty() {
        (threads, true)
    } else {
        (m.cores.len(), false)
    };
    let _ = writeln!(
        out,
        "cores_per_package = {}{}",
        (cores / packages).max(1),
        if cores_assumed {
            "   # assumption: no core objects; one hardware thread per core"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "threads_per_core = {}",
        (threads / cores.max(1)).max(1)
    );
    match m.clock_ghz {
        Some(c) => {
            let _ = writeln!(out, "clock_ghz = {}", format_float(c));
        }
        None => {
            let _ = writeln!(out, "clock_ghz = 2.0   # assumption: clock not reported");
        }
    }
    let llc = m.last_level_cache();
    match llc.filter(|c| c.size_bytes > 0) {
        Some(c) => {
            let _ = writeln!(out, "llc_bytes = {}", c.size_bytes);
        }
        None => {
            let _ = writeln!(
                out,
                "llc_bytes = 33554432   # assumption: LLC size not reported"
            );
        }
    }
    let llc_ways = match llc.and_then(|c| c.ways) {
        Some(w) => {
            let _ = writeln!(out, "llc_ways = {w}");
            w
        }
        None => {
            let _ = writeln!(
                out,
                "llc_ways = 20   # assumption: LLC associativity not reported"
            );
            20
        }
    };
    // DDIO can take at most the ways there are (a memory-side or direct-mapped cache
    // reports one).
    let ddio = 2.min(llc_ways);
    let intel = m
        .cpu_vendor
        .as_deref()
        .map(|v| v.contains("Intel"))
        .or_else(|| m.cpu_model.as_deref().map(|c| c.contains("Intel")))
        .unwrap_or(false);
    if intel {
        let _ = writeln!(
            out,
            "ddio_ways = {ddio}   # assumption: Intel default 2 of the LLC ways (at most the LLC's)"
        );
    } else {
        let _ = writeln!(
            out,
            "ddio_ways = {ddio}   # assumption: Intel default 2 of the LLC ways (at most the LLC's); this CPU may not place DMA writes in its LLC at all"
        );
    }
    // The scenario lays RAM out in whole MiB; a node's usable memory rarely is.
    const MIB: u64 = 1 << 20;
    let node_mem: Vec<u64> = m.nodes.iter().filter_map(|n| n.memory_bytes).collect();
    if !node_mem.is_empty() {
        let avg = node_mem.iter().sum::<u64>() / node_mem.len() as u64;
        let (min, max) = (
            node_mem.iter().min().copied().unwrap_or(avg),
            node_mem.iter().max().copied().unwrap_or(avg),
        );
        let note = if max > min + min / 100 {
            format!("; nodes differ: {min} to {max} bytes, this is the mean")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "dram_bytes_per_node = {}   # {avg} bytes rounded down to a whole MiB{note}",
            (avg / MIB).max(1) * MIB
        );
    } else if let Some(t) = m.total_memory_bytes {
        let _ = writeln!(
            out,
            "dram_bytes_per_node = {}   # assumption: total memory split evenly over the nodes, rounded down to a whole MiB",
            (t / m.nodes.len().max(1) as u64 / MIB).max(1) * MIB
        );
    } else {
        let _ = writeln!(
            out,
            "dram_bytes_per_node = 68719476736   # assumption: memory size not reported"
        );
    }
    let _ = writeln!(out);

    // ----- memory -----
    let (memory_text, memory_source, lat, bw) = memory_section(m, calibration)?;
    let timing_text = timing_section(&lat, &bw, memory_source);
    out.push_str(&memory_text);
    let _ = writeln!(out);
    out.push_str(&timing_text);
    let _ = writeln!(out);

    // ----- interconnect -----
    if packages >= 2 {
        let kind = interconnect_kind(m);
        for (a, b) in package_links(m, packages) {
            let _ = writeln!(out, "[[platform.{PLATFORM}.interconnect]]");
            let _ = writeln!(out, "ends = [\"pkg{a}\", \"pkg{b}\"]");
            let _ = writeln!(
                out,
                "kind = \"{kind}\"   # assumption: inferred from the CPU model; links inferred from the distance matrix"
            );
            let _ = writeln!(out);
        }
    }

    out.push_str(&device_models_toml());

    // ----- host -----
    let _ = writeln!(out, "[[host]]");
    let _ = writeln!(out, "name = {}", quote(&host));
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

    let topo = PciExport::new(m, packages);
    out.push_str(&topo.switches_toml());
    let (devices_text, names) = topo.devices_toml();
    out.push_str(&devices_text);
    Ok(ScenarioExport {
        toml: out,
        memory_source,
        device_names: names,
    })
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
    sanitize_name(&raw, true)
}

fn memory_section(
    m: &Machine,
    calibration: Option<Calibration>,
) -> Result<(String, MemorySource, Matrix, Matrix), InspectError> {
    let n = m.nodes.len().max(1);
    let mut out = String::new();
    let _ = writeln!(out, "[platform.{PLATFORM}.memory]");
    if let Some(c) = calibration {
        let p = c.params;
        if p.nodes() != n {
            return Err(InspectError::Invalid {
                path: c.path.to_path_buf(),
                message: format!(
                    "the calibration has {0}×{0} matrices but the machine has {n} NUMA node(s)",
                    p.nodes()
                ),
            });
        }
        if let Some(order) = &p.node_order {
            let ids: Vec<u32> = m.nodes.iter().map(|x| x.id).collect();
            if order != &ids {
                return Err(InspectError::Invalid {
                    path: c.path.to_path_buf(),
                    message: format!(
                        "the calibration was measured for nodes {order:?} but the machine has nodes {ids:?}"
                    ),
                });
            }
        }
        let _ = writeln!(
            out,
            "# measured by `nudma calibrate` ({}); row = CPU node, column = memory node",
            c.path.display()
        );
        let _ = writeln!(out, "latency_ns = {}", matrix_toml(&p.latency_ns));
        let _ = writeln!(out, "bandwidth_gbps = {}", matrix_toml(&p.bandwidth_gbps));
        return Ok((
            out,
            MemorySource::Calibration,
            p.latency_ns.clone(),
            p.bandwidth_gbps.clone(),
        ));
    }
    if let Some((lat, bw)) = hwloc_memattr_matrices(m) {
        let _ = writeln!(
            out,
            "# from hwloc memory attributes (Latency in ns, Bandwidth in MiB/s → GB/s); row = CPU node, column = memory node"
        );
        let _ = writeln!(out, "latency_ns = {}", matrix_toml(&lat));
        let _ = writeln!(out, "bandwidth_gbps = {}", matrix_toml(&bw));
        return Ok((out, MemorySource::HwlocMemoryAttributes, lat, bw));
    }
    let ids: Vec<u32> = m.nodes.iter().map(|x| x.id).collect();
    let ratios: Option<Vec<Vec<f64>>> = m.numa_distances().and_then(|d| {
        ids.iter()
            .map(|&a| {
                let local = d.get(a as u64, a as u64).filter(|v| *v > 0.0)?;
                ids.iter()
                    .map(|&b| d.get(a as u64, b as u64).map(|v| v / local))
                    .collect::<Option<Vec<f64>>>()
            })
            .collect()
    });
    let (ratios, source) = match ratios {
        Some(r) if ids.len() > 1 => {
            let _ = writeln!(
                out,
                "# assumption: local {ASSUMED_LOCAL_LATENCY_NS} ns and {ASSUMED_LOCAL_BANDWIDTH_GBPS} GB/s, remote scaled by the NUMA distance matrix; run `nudma calibrate --out FILE` and export with --calibration FILE"
            );
            (r, MemorySource::Distances)
        }
        _ => {
            let _ = writeln!(
                out,
                "# assumption: {ASSUMED_LOCAL_LATENCY_NS} ns and {ASSUMED_LOCAL_BANDWIDTH_GBPS} GB/s{}; run `nudma calibrate --out FILE` and export with --calibration FILE",
                if ids.len() > 1 {
                    ", remote twice as slow (no distance matrix)"
                } else {
                    ""
                }
            );
            let r = (0..n)
                .map(|i| (0..n).map(|j| if i == j { 1.0 } else { 2.0 }).collect())
                .collect();
            (r, MemorySource::Assumed)
        }
    };
    let lat: Vec<Vec<f64>> = ratios
        .iter()
        .map(|r| r.iter().map(|x| ASSUMED_LOCAL_LATENCY_NS * x).collect())
        .collect();
    let bw: Vec<Vec<f64>> = ratios
        .iter()
        .map(|r| r.iter().map(|x| ASSUMED_LOCAL_BANDWIDTH_GBPS / x).collect())
        .collect();
    let _ = writeln!(out, "latency_ns = {}", matrix_toml(&lat));
    let _ = writeln!(out, "bandwidth_gbps = {}", matrix_toml(&bw));
    Ok((out, source, lat, bw))
}

/// `key = { value = …, basis = "assumption", why = "…" }`: a value with its basis.
fn assumed(key: &str, value: &str, why: &str) -> String {
    format!(
        "{key} = {{ value = {value}, basis = \"assumption\", why = {} }}",
        quote(why)
    )
}

/// The timing table the simulator needs, derived from the memory matrices where they
/// speak (local DRAM latency and bandwidth, the interconnect's share of remote latency)
/// and stated as assumptions elsewhere. Values derived from a measured or reported
/// matrix are `calibrated` on it; from an assumed one, assumptions.
fn timing_section(lat: &Matrix, bw: &Matrix, source: MemorySource) -> String {
    let n = lat.len().max(1);
    let diag = |m: &Matrix| (0..m.len()).map(|i| m[i][i]).sum::<f64>() / m.len().max(1) as f64;
    let (local_lat, local_bw) = (diag(lat), diag(bw));
    let off: Vec<f64> = (0..lat.len())
        .flat_map(|i| (0..lat.len()).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| lat[i][j])
        .collect();
    let ic = if off.is_empty() {
        0.0
    } else {
        ((off.iter().sum::<f64>() / off.len() as f64 - local_lat) / 2.0).max(0.0)
    };
    let from_matrix = |key: &str, value: f64, what: &str| -> String {
        let value = format!("{value:.1}");
        match source {
            MemorySource::Calibration | MemorySource::HwlocMemoryAttributes => format!(
                "{key} = {{ value = {value}, basis = \"calibrated\", on = {} }}",
                quote(&format!("{what} of the memory matrix above, as the machine reported or `nudma calibrate` measured it"))
            ),
            MemorySource::Distances | MemorySource::Assumed => {
                assumed(key, &value, &format!("{what} of the memory matrix above, itself assumed"))
            }
        }
    };
    let mut out = String::new();
    let _ = writeln!(out, "[platform.{PLATFORM}.timing]");
    let _ = writeln!(
        out,
        "{}",
        from_matrix("dram_latency_ns", local_lat, "mean local latency")
    );
    let _ = writeln!(
        out,
        "{}",
        from_matrix("dram_gbps", local_bw, "mean local bandwidth")
    );
    let _ = writeln!(
        out,
        "{}",
        from_matrix(
            "interconnect_latency_ns",
            ic,
            &format!("half the mean remote penalty ({n} node(s))")
        )
    );
    for (key, value, why) in [
        ("llc_latency_ns", "20.0", "an LLC hit"),
        (
            "rc_latency_ns",
            "50.0",
            "root complex handling of an inbound TLP",
        ),
        (
            "rc_p2p_latency_ns",
            "100.0",
            "forwarding between root ports",
        ),
        (
            "rc_p2p_read_tags",
            "48",
            "as calibrated on the SmartIO Xeons (REFERENCE.md §2)",
        ),
        (
            "rc_p2p_read_gap_ns",
            "32.0",
            "as calibrated on the SmartIO Xeons (REFERENCE.md §2)",
        ),
        ("rcb_bytes", "64", "64 B read completions"),
        ("iotlb_hit_ns", "10.0", "nothing measured"),
        (
            "iotlb_miss_ns",
            "300.0",
            "a page walk from DRAM; nothing measured",
        ),
        ("iotlb_entries", "64", "nothing measured"),
        (
            "cpu_mmio_write_ns",
            "45.0",
            "as calibrated on the SmartIO Xeons (REFERENCE.md §2)",
        ),
        ("cpu_poll_ns", "80.0", "a miss to local DRAM"),
        (
            "interconnect_gbps",
            "20.0",
            "per link and direction (QPI/UPI class)",
        ),
        (
            "pcie_link_ns",
            "20.0",
            "PHY and data-link latency of a PCIe link, as the built-in platforms",
        ),
        ("cable_ns", "10.0", "an external cable of ≈ 2 m"),
        (
            "fc_update_ns",
            "2.0",
            "credit-update DLLP latency, as the built-in platforms",
        ),
        (
            "cpu_mmio_write_bytes",
            "64",
            "a core's MMIO stores leave as 64 B lines",
        ),
        (
            "cpu_mmio_read_bytes",
            "64",
            "a core's uncached MMIO load reads at most a 64 B line",
        ),
        (
            "cpu_mmio_reads",
            "1",
            "a core's uncached MMIO loads are serialized",
        ),
    ] {
        let _ = writeln!(out, "{}", assumed(key, value, why));
    }
    out
}

/// Device models every exported device is an instance of: the timing layer needs the
/// memory behind BARs, the DMA requester its reads, a GPU its launch and poll costs.
fn device_models_toml() -> String {
    let mut out = String::new();
    let common = [
        ("bar_gbps", "1.0", "a register-like BAR; nothing measured"),
        (
            "bar_latency_ns",
            "200.0",
            "a register access inside the device; nothing measured",
        ),
        ("bar_rcb_bytes", "64", "64 B read completions"),
        (
            "dma_max_reads",
            "32",
            "a typical device's outstanding reads; nothing measured",
        ),
        ("dma_mrrs_bytes", "512", "the MRRS Linux commonly programs"),
    ];
    for (name, extra) in [
        (DEVICE_MODEL, &[][..]),
        (
            GPU_MODEL,
            &[
                (
                    "launch_ns",
                    "5000.0",
                    "kernel launch overhead, as the built-in GPUs",
                ),
                (
                    "poll_ns",
                    "500.0",
                    "one poll-loop iteration, as the built-in GPUs",
                ),
            ][..],
        ),
    ] {
        let _ = writeln!(
            out,
            "[device_model.{name}]   # nothing measured: every value below is an assumption"
        );
        let _ = writeln!(out, "[device_model.{name}.timing]");
        for (key, value, why) in common.iter().chain(extra) {
            let _ = writeln!(out, "{}", assumed(key, value, why));
        }
        let _ = writeln!(out);
    }
    out
}

const DEVICE_MODEL: &str = "imported";
const GPU_MODEL: &str = "imported_gpu";

/// Row = CPU node, column = memory node.
type Matrix = Vec<Vec<f64>>;

/// Full latency and bandwidth matrices from hwloc's `Latency` and `Bandwidth`
/// memory attributes, when every (CPU node, memory node) pair has a value whose
/// initiator is exactly one node's CPUs.
fn hwloc_memattr_matrices(m: &Machine) -> Option<(Matrix, Matrix)> {
    let grid = |name: &str, scale: f64| -> Option<Vec<Vec<f64>>> {
        let attr = m
            .memory_attributes
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(name))?;
        let mut map: BTreeMap<(u32, u32), f64> = BTreeMap::new();
        for v in &attr.values {
            let (Some(target), Some(Initiator::Cpus(c))) = (v.target_node, &v.initiator) else {
                continue;
            };
            let Some(src) = m.nodes.iter().find(|n| !n.cpus.is_empty() && &n.cpus == c) else {
                continue;
            };
            map.insert((src.id, target), v.value as f64 * scale);
        }
        m.nodes
            .iter()
            .map(|a| {
                m.nodes
                    .iter()
                    .map(|b| map.get(&(a.id, b.id)).copied())
                    .collect::<Option<Vec<f64>>>()
            })
            .collect()
    };
    let lat = grid("Latency", 1.0)?;
    let bw = grid("Bandwidth", 1024.0 * 1024.0 / 1e9)?;
    Some((lat, bw))
}

fn interconnect_kind(m: &Machine) -> &'static str {
    let model = m.cpu_model.as_deref().unwrap_or("").to_ascii_lowercase();
    if model.contains("epyc") || model.contains("threadripper") {
        "infinity"
    } else if model.contains("opteron") || model.contains("athlon") {
        "hypertransport"
    } else if model.contains("xeon") {
        let upi = [
            "gold",
            "platinum",
            "silver",
            "bronze",
            "xeon(r) w",
            "xeon(r) 6",
            "max",
        ];
        if upi.iter().any(|k| model.contains(k)) {
            "upi"
        } else {
            "qpi"
        }
    } else {
        "generic"
    }
}

/// Package pairs joined by a link. Two packages: one link. More: the pairs at the
/// smallest distance level (hwloc Package distances, else the nearest NUMA nodes of
/// each package) that connects every package, widening the level until it does; a
/// full mesh when there is no distance information.
fn package_links(m: &Machine, packages: usize) -> Vec<(usize, usize)> {
    let all: Vec<(usize, usize)> = (0..packages)
        .flat_map(|a| (a + 1..packages).map(move |b| (a, b)))
        .collect();
    if packages <= 2 || m.packages.len() != packages {
        return all;
    }
    let ids: Vec<u64> = m.packages.iter().map(|p| p.id as u64).collect();
    let package_matrix = m.distances.iter().find(|d| {
        d.object_type.eq_ignore_ascii_case("Package")
            && d.kind & 8 == 0
            && ids.iter().all(|i| d.ids.contains(i))
    });
    let numa = m.numa_distances();
    let dist = |a: usize, b: usize| -> Option<f64> {
        if let Some(pd) = package_matrix {
            return pd.get(ids[a], ids[b]);
        }
        let d = numa?;
        let nodes_of = |p: usize| -> Vec<u32> {
            let cpus = &m.packages[p].cpus;
            m.nodes
                .iter()
                .filter(|n| n.cpus.intersects(cpus))
                .map(|n| n.id)
                .collect()
        };
        let mut best: Option<f64> = None;
        for x in nodes_of(a) {
            for y in nodes_of(b) {
                if let Some(v) = d.get(x as u64, y as u64) {
                    best = Some(best.map_or(v, |bv: f64| bv.min(v)));
                }
            }
        }
        best
    };
    let Some(dists) = all
        .iter()
        .map(|&(a, b)| dist(a, b))
        .collect::<Option<Vec<f64>>>()
    else {
        return all;
    };
    let mut levels = dists.clone();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    for level in levels {
        let linked: Vec<(usize, usize)> = all
            .iter()
            .zip(&dists)
            .filter(|(_, d)| **d <= level + 1e-9)
            .map(|(p, _)| *p)
            .collect();
        if connects(&linked, packages) {
            return linked;
        }
    }
    all
}

fn connects(links: &[(usize, usize)], n: usize) -> bool {
    let mut reached: BTreeSet<usize> = BTreeSet::from([0]);
    loop {
        let before = reached.len();
        for &(a, b) in links {
            if reached.contains(&a) || reached.contains(&b) {
                reached.insert(a);
                reached.insert(b);
            }
        }
        if reached.len() == before {
            return reached.len() == n;
        }
    }
}

struct PciExport<'a> {
    m: &'a Machine,
    /// Root complex name per NUMA node.
    rc_of_node: BTreeMap<u32, String>,
    switch_up: BTreeSet<usize>,
}

impl<'a> PciExport<'a> {
    fn new(m: &'a Machine, packages: usize) -> Self {
        let mut rc_of_node = BTreeMap::new();
        for (k, n) in m.nodes.iter().enumerate() {
            let pkg_index = m
                .package_of_node(n.id)
                .and_then(|pid| m.packages.iter().position(|p| p.id == pid))
                .unwrap_or(k.min(packages.saturating_sub(1)));
            rc_of_node.insert(n.id, format!("rc{pkg_index}"));
        }
        // A switch is an upstream port: a bridge below a bridge, with bridges below it.
        let switch_up = (0..m.pci.len())
            .filter(|&i| {
                let d = &m.pci[i];
                d.is_bridge
                    && d.parent.is_some_and(|p| m.pci[p].is_bridge)
                    && m.pci.iter().any(|c| c.is_bridge && c.parent == Some(i))
            })
            .collect();
        PciExport {
            m,
            rc_of_node,
            switch_up,
        }
    }

    fn switch_name(&self, i: usize) -> String {
        format!("sw_{}", self.m.pci[i].bdf.ident())
    }

    /// Nearest enclosing switch (upstream port index) of a function.
    fn enclosing_switch(&self, i: usize) -> Option<usize> {
        let mut cur = self.m.pci[i].parent;
        let mut steps = 0;
        while let Some(p) = cur {
            if self.switch_up.contains(&p) {
                return Some(p);
            }
            cur = self.m.pci[p].parent;
            steps += 1;
            if steps > 64 {
                break;
            }
        }
        None
    }

    /// The `parent` value and an assumption comment, if the node was unknown.
    fn parent_of(&self, i: usize) -> (String, Option<String>) {
        if let Some(s) = self.enclosing_switch(i) {
            return (self.switch_name(s), None);
        }
        let d = &self.m.pci[i];
        match device_placement(self.m, d) {
            Some((n, inferred)) => {
                let rc = self
                    .rc_of_node
                    .get(&n)
                    .cloned()
                    .unwrap_or_else(|| "rc0".to_string());
                let note =
                    inferred.then(|| format!("assumption: node {n} inferred from local_cpulist"));
                (rc, note)
            }
            // With one node there is one root complex to hang it on.
            None if self.m.nodes.len() < 2 => ("rc0".to_string(), None),
            None => (
                "rc0".to_string(),
                Some("assumption: the machine does not say which node this is on".to_string()),
            ),
        }
    }

    fn link_of(&self, d: &PciDevice, default_width: u32) -> (String, Option<String>) {
        match d.link.current_gen_width() {
            Some((g, w)) => {
                let note = (d.link.current_gts.is_none())
                    .then(|| "generation/width recovered from hwloc's GB/s".to_string());
                (format!("{{ gen = {g}, width = {w} }}"), note)
            }
            None => (
                format!("{{ gen = 3, width = {default_width} }}"),
                Some("assumption: link not reported".to_string()),
            ),
        }
    }

    fn switches_toml(&self) -> String {
        let mut out = String::new();
        for &i in &self.switch_up {
            let d = &self.m.pci[i];
            let (parent, pnote) = self.parent_of(i);
            let (link, lnote) = self.link_of(d, 16);
            let _ = writeln!(out, "[[host.switch]]");
            let _ = writeln!(out, "name = \"{}\"", self.switch_name(i));
            let _ = writeln!(
                out,
                "chip = \"generic\"   # assumption: switch model not identified"
            );
            let _ = writeln!(out, "parent = \"{parent}\"{}", comment(pnote));
            let _ = writeln!(out, "link = {link}{}", comment(lnote));
            let _ = writeln!(out);
        }
        out
    }

    fn devices_toml(&self) -> (String, Vec<String>) {
        let m = self.m;
        let exported = |d: &PciDevice| -> bool {
            if d.physfn.is_some() || d.is_bridge {
                return false;
            }
            match d.class() {
                DeviceClass::Bridge => false,
                DeviceClass::Other => d.class_code.is_some_and(|c| matches!(c >> 16, 0x0b | 0x12)),
                _ => true,
            }
        };
        let groups = multi_pf_groups(m);
        let mut in_group: BTreeMap<usize, usize> = BTreeMap::new();
        for (gi, g) in groups.iter().enumerate() {
            for &i in g {
                in_group.insert(i, gi);
            }
        }
        let mut used: BTreeSet<String> = BTreeSet::new();
        let mut unique = |base: String| -> String {
            let mut name = base.clone();
            let mut k = 2;
            while used.contains(&name) {
                name = format!("{base}_{k}");
                k += 1;
            }
            used.insert(name.clone());
            name
        };
        let mut out = String::new();
        let mut names = Vec::new();
        let mut done_groups: BTreeSet<usize> = BTreeSet::new();
        let mut skipped = 0usize;
        for (i, d) in m.pci.iter().enumerate() {
            if !exported(d) {
                skipped += 1;
                continue;
            }
            let base = d
                .primary_name()
                .map(|n| sanitize_name(n, false))
                .unwrap_or_else(|| format!("dev_{}", d.bdf.ident()));
            let kind = match d.class() {
                DeviceClass::Net
                    if d.os_devices
                        .iter()
                        .any(|o| o.kind == crate::pci::OsDeviceKind::Openfabrics) =>
                {
                    "rnic"
                }
                DeviceClass::Net => "nic",
                DeviceClass::Infiniband => "rnic",
                DeviceClass::Nvme => "nvme",
                DeviceClass::Gpu => "gpu",
                _ => "other",
            };
            if let Some(&gi) = in_group.get(&i) {
                if !done_groups.insert(gi) {
                    continue;
                }
                let name = unique(base);
                names.push(name.clone());
                let _ = writeln!(out, "[[host.device]]");
                let _ = writeln!(out, "name = \"{name}\"");
                let _ = writeln!(out, "kind = \"{kind}\"");
                let _ = writeln!(
                    out,
                    "model = {}",
                    quote(&d.model().unwrap_or_else(|| "unknown".to_string()))
                );
                let mut notes = Vec::new();
                let funcs: Vec<String> = groups[gi]
                    .iter()
                    .map(|&fi| {
                        let f = &m.pci[fi];
                        let (parent, pn) = self.parent_of(fi);
                        let (link, ln) = self.link_of(f, 8);
                        notes.extend(pn.map(|n| format!("{}: {n}", f.bdf)));
                        notes.extend(ln.map(|n| format!("{}: {n}", f.bdf)));
                        format!(
                            "{{ parent = \"{parent}\", link = {link}, bdf = \"{}\" }}",
                            f.bdf
                        )
                    })
                    .collect();
                for n in notes {
                    let _ = writeln!(out, "# {n}");
                }
                let _ = writeln!(out, "functions = [{}]", funcs.join(", "));
                if !d.bar_sizes.is_empty() {
                    let _ = writeln!(out, "bars = {}", bars_toml(&d.bar_sizes));
                }
                let _ = writeln!(out, "device_model = \"{}\"", model_of(kind));
                let _ = writeln!(out);
                continue;
            }
            let name = unique(base);
            names.push(name.clone());
            let (parent, pnote) = self.parent_of(i);
            let (link, lnote) = self.link_of(d, 8);
            let _ = writeln!(out, "[[host.device]]");
            let _ = writeln!(out, "name = \"{name}\"");
            let _ = writeln!(out, "kind = \"{kind}\"");
            let _ = writeln!(
                out,
                "model = {}",
                quote(&d.model().unwrap_or_else(|| "unknown".to_string()))
            );
            let _ = writeln!(out, "parent = \"{parent}\"{}", comment(pnote));
            let _ = writeln!(out, "link = {link}{}", comment(lnote));
            let _ = writeln!(out, "bdf = \"{}\"", d.bdf);
            if !d.bar_sizes.is_empty() {
                let _ = writeln!(out, "bars = {}", bars_toml(&d.bar_sizes));
            }
            let _ = writeln!(out, "device_model = \"{}\"", model_of(kind));
            let _ = writeln!(out);
        }
        if skipped > 0 {
            let _ = writeln!(
                out,
                "# {skipped} bridge, chipset and SR-IOV virtual functions are not exported as devices."
            );
        }
        (out, names)
    }
}

fn model_of(kind: &str) -> &'static str {
    if kind == "gpu" {
        GPU_MODEL
    } else {
        DEVICE_MODEL
    }
}

fn comment(note: Option<String>) -> String {
    note.map(|n| format!("   # {n}")).unwrap_or_default()
}

fn bars_toml(sizes: &[u64]) -> String {
    let parts: Vec<String> = sizes.iter().map(|s| format!("{{ size = {s} }}")).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

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
