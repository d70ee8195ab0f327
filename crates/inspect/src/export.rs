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
use crate::layout::{Attach, Layout};
use crate::model::{Initiator, Machine, PciDevice, Source};
use crate::pci::{gen_width_candidates, DeviceClass};
use crate::platform_file::{format_float, matrix_toml, MemoryParams};

/// Local DRAM latency assumed when nothing was measured (a typical two-socket
/// Xeon); remote latency scales with the distance matrix.
pub const ASSUMED_LOCAL_LATENCY_NS: f64 = 90.0;
/// Local DRAM bandwidth of one node assumed when nothing was measured.
pub const ASSUMED_LOCAL_BANDWIDTH_GBPS: f64 = 60.0;
const PLATFORM: &str = "imported";
/// The scenario lays RAM out in whole MiB.
const MIB: u64 = 1 << 20;

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
    let layout = Layout::of(m)?;
    let packages = layout.packages.len();
    let npp = layout.nodes_per_package;
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
    let package_note = if layout.packages_assumed {
        "   # assumption: no package objects; one package per NUMA node with CPUs".to_string()
    } else {
        layout
            .grouping
            .as_ref()
            .map(|g| format!("   # assumption: {g}"))
            .unwrap_or_default()
    };
    let _ = writeln!(out, "packages = {packages}{package_note}");
    let _ = writeln!(
        out,
        "nodes_per_package = {npp}{}",
        if layout.memory_nodes.is_empty() {
            String::new()
        } else {
            format!(
                "   # NUMA nodes with CPUs; {} memory-only node(s) follow as [[platform.{PLATFORM}.memory_node]]",
                layout.memory_nodes.len()
            )
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
            "   # assumption: no core objects; one hardware thread per core".to_string()
        } else if !cores.is_multiple_of(packages) {
            format!("   # assumption: {cores} cores over {packages} packages do not divide evenly; rounded down")
        } else {
            String::new()
        }
    );
    // The fabric's ranges: up to 8 threads per core, clocks in (0, 100) GHz, up to 64
    // LLC ways; a machine beyond them is written at the limit, saying so.
    let tpc = (threads / cores.max(1)).max(1);
    if tpc > 8 {
        let _ = writeln!(
            out,
            "threads_per_core = 8   # assumption: {threads} hardware threads on {cores} cores; the fabric models at most 8 per core"
        );
    } else {
        let _ = writeln!(out, "threads_per_core = {tpc}");
    }
    match m.clock_ghz {
        Some(c) if c > 0.0 && c < 100.0 => {
            let _ = writeln!(out, "clock_ghz = {}", format_float(c));
        }
        Some(c) => {
            let _ = writeln!(
                out,
                "clock_ghz = 2.0   # assumption: the reported clock ({c} GHz) is not plausible"
            );
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
        Some(w) if w > 64 => {
            let _ = writeln!(
                out,
                "llc_ways = 64   # assumption: the LLC reports {w} ways; the fabric models at most 64"
            );
            64
        }
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
    // The scenario lays RAM out in whole MiB; a node's usable memory rarely is. Nodes
    // with CPUs share one size; memory-only nodes state their own below.
    let cpu_node_ids = &layout.node_ids[..layout.cpu_nodes()];
    let sized: Vec<(u32, u64)> = cpu_node_ids
        .iter()
        .filter_map(|&id| m.node(id)?.memory_bytes.map(|b| (id, b)))
        .collect();
    let node_mem: Vec<u64> = sized.iter().map(|x| x.1).filter(|&b| b >= MIB).collect();
    let memoryless: Vec<u32> = cpu_node_ids
        .iter()
        .copied()
        .filter(|id| sized.iter().any(|(n, b)| n == id && *b < MIB))
        .collect();
    let memoryless_note = if memoryless.is_empty() {
        String::new()
    } else {
        format!(
            "; assumption: node(s) {} report no memory, but every CPU node has this size here",
            memoryless
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
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
            "dram_bytes_per_node = {}   # {avg} bytes rounded down to a whole MiB{note}{memoryless_note}",
            (avg / MIB).max(1) * MIB
        );
    } else if let Some(t) = m.total_memory_bytes {
        let _ = writeln!(
            out,
            "dram_bytes_per_node = {}   # assumption: total memory split evenly over the nodes, rounded down to a whole MiB{memoryless_note}",
            (t / m.nodes.len().max(1) as u64 / MIB).max(1) * MIB
        );
    } else {
        let _ = writeln!(
            out,
            "dram_bytes_per_node = 68719476736   # assumption: memory size not reported{memoryless_note}"
        );
    }
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
    if packages >= 2 {
        let kind = interconnect_kind(m);
        for (a, b) in &links {
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

/// Where one matrix entry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Calibration,
    /// hwloc's Latency/Bandwidth attribute (or the HMAT's, read by the sysfs importer).
    MemAttr,
    /// Scaled from the row's local figure by the NUMA distance matrix.
    Distance,
    Assumed,
}

impl Entry {
    /// Measured or reported by the machine.
    fn stated(self) -> bool {
        matches!(self, Entry::Calibration | Entry::MemAttr)
    }
}

/// The memory matrices in scenario order (row = CPU node, column = every node) with the
/// source of each entry and their TOML.
struct MemoryMatrices {
    text: String,
    source: MemorySource,
    lat: Matrix,
    bw: Matrix,
    lat_src: Vec<Vec<Entry>>,
    bw_src: Vec<Vec<Entry>>,
}

fn memory_matrices(
    m: &Machine,
    layout: &Layout,
    calibration: Option<Calibration>,
) -> Result<MemoryMatrices, InspectError> {
    let ids = &layout.node_ids;
    let rows = layout.cpu_nodes();
    let n = ids.len();
    let mut out = String::new();
    let _ = writeln!(out, "[platform.{PLATFORM}.memory]");
    let order = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let node_note = if layout.memory_nodes.is_empty() && ids.windows(2).all(|w| w[0] < w[1]) {
        String::new()
    } else {
        format!(
            " (machine nodes {}; memory-only ones have a column, no row)",
            order(ids)
        )
    };
    if let Some(c) = calibration {
        let p = c.params;
        if p.nodes() != m.nodes.len() {
            return Err(InspectError::Invalid {
                path: c.path.to_path_buf(),
                message: format!(
                    "the calibration has {0}×{0} matrices but the machine has {1} NUMA node(s)",
                    p.nodes(),
                    m.nodes.len()
                ),
            });
        }
        let machine_ids: Vec<u32> = m.nodes.iter().map(|x| x.id).collect();
        if let Some(order) = &p.node_order {
            if order != &machine_ids {
                return Err(InspectError::Invalid {
                    path: c.path.to_path_buf(),
                    message: format!(
                        "the calibration was measured for nodes {order:?} but the machine has nodes {machine_ids:?}"
                    ),
                });
            }
        }
        // The calibration is square over the machine's nodes in their order.
        let pos = |id: u32| machine_ids.iter().position(|&x| x == id).unwrap_or(0);
        let pick = |mm: &Matrix| -> Matrix {
            (0..rows)
                .map(|i| (0..n).map(|j| mm[pos(ids[i])][pos(ids[j])]).collect())
                .collect()
        };
        let (lat, bw) = (pick(&p.latency_ns), pick(&p.bandwidth_gbps));
        let _ = writeln!(
            out,
            "# measured by `nudma calibrate` ({}); row = CPU node, column = memory node{node_note}",
            c.path.display()
        );
        let _ = writeln!(out, "latency_ns = {}", matrix_toml(&lat));
        let _ = writeln!(out, "bandwidth_gbps = {}", matrix_toml(&bw));
        let all = vec![vec![Entry::Calibration; n]; rows];
        return Ok(MemoryMatrices {
            text: out,
            source: MemorySource::Calibration,
            lat,
            bw,
            lat_src: all.clone(),
            bw_src: all,
        });
    }
    let attr_lat = memattr_grid(m, layout, "Latency", 1.0);
    let attr_bw = memattr_grid(m, layout, "Bandwidth", 1024.0 * 1024.0 / 1e9);
    let dist = m.numa_distances();
    let ratio = |i: usize, j: usize| -> Option<f64> {
        let d = dist?;
        let (a, b) = (ids[i] as u64, ids[j] as u64);
        let local = d.get(a, a).filter(|v| *v > 0.0)?;
        d.get(a, b).filter(|v| *v > 0.0).map(|v| v / local)
    };
    // Each entry: the machine's figure, else the row's local figure scaled by the
    // distance matrix, else the local figure (twice as slow when remote).
    let fill = |attr: &Vec<Vec<Option<f64>>>, assumed: f64, scale: fn(f64, f64) -> f64| {
        let mut vals = vec![vec![0.0; n]; rows];
        let mut src = vec![vec![Entry::Assumed; n]; rows];
        for i in 0..rows {
            let local = attr[i][i].unwrap_or(assumed);
            for j in 0..n {
                (vals[i][j], src[i][j]) = match (attr[i][j], ratio(i, j)) {
                    (Some(v), _) => (v, Entry::MemAttr),
                    (None, _) if i == j => (local, Entry::Assumed),
                    (None, Some(r)) => (scale(local, r), Entry::Distance),
                    (None, None) => (scale(local, 2.0), Entry::Assumed),
                };
            }
        }
        (vals, src)
    };
    let (lat, lat_src) = fill(&attr_lat, ASSUMED_LOCAL_LATENCY_NS, |l, r| l * r);
    let (bw, bw_src) = fill(&attr_bw, ASSUMED_LOCAL_BANDWIDTH_GBPS, |b, r| b / r);
    let count = |src: &Vec<Vec<Entry>>, e: Entry| src.iter().flatten().filter(|&&x| x == e).count();
    let total = rows * n;
    let (attr_l, attr_b) = (
        count(&lat_src, Entry::MemAttr),
        count(&bw_src, Entry::MemAttr),
    );
    let distanced = count(&lat_src, Entry::Distance) + count(&bw_src, Entry::Distance);
    let source = if attr_l == total && attr_b == total {
        MemorySource::HwlocMemoryAttributes
    } else if attr_l + attr_b > 0 {
        MemorySource::Mixed
    } else if distanced > 0 {
        MemorySource::Distances
    } else {
        MemorySource::Assumed
    };
    if attr_l + attr_b > 0 {
        let _ = writeln!(
            out,
            "# from the machine's memory attributes (Latency in ns, Bandwidth in MiB/s → GB/s): {attr_l} of {total} latency and {attr_b} of {total} bandwidth entries; row = CPU node, column = memory node{node_note}"
        );
    } else {
        let _ = writeln!(out, "# row = CPU node, column = memory node{node_note}");
    }
    if source != MemorySource::HwlocMemoryAttributes {
        let rest = if attr_l + attr_b > 0 {
            "the other entries: "
        } else {
            ""
        };
        if distanced > 0 {
            let _ = writeln!(
                out,
                "# assumption: {rest}local {ASSUMED_LOCAL_LATENCY_NS} ns and {ASSUMED_LOCAL_BANDWIDTH_GBPS} GB/s (where the machine gives none), remote scaled by the NUMA distance matrix; run `nudma calibrate --out FILE` and export with --calibration FILE"
            );
        } else {
            let _ = writeln!(
                out,
                "# assumption: {rest}{ASSUMED_LOCAL_LATENCY_NS} ns and {ASSUMED_LOCAL_BANDWIDTH_GBPS} GB/s{}; run `nudma calibrate --out FILE` and export with --calibration FILE",
                if n > 1 {
                    ", remote twice as slow (no distance matrix)"
                } else {
                    ""
                }
            );
        }
    }
    let _ = writeln!(out, "latency_ns = {}", matrix_toml(&lat));
    let _ = writeln!(out, "bandwidth_gbps = {}", matrix_toml(&bw));
    Ok(MemoryMatrices {
        text: out,
        source,
        lat,
        bw,
        lat_src,
        bw_src,
    })
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

/// Bandwidth of one interconnect link and direction the export assumes.
const INTERCONNECT_GBPS: f64 = 20.0;

/// The timing table the simulator needs, derived from the memory matrices where they
/// speak (local DRAM latency and bandwidth, the interconnect's share of remote latency)
/// and stated as assumptions elsewhere. Values derived only from measured or reported
/// entries are `calibrated` on them; otherwise assumptions.
fn timing_section(mem: &MemoryMatrices, layout: &Layout, links: &[(usize, usize)]) -> String {
    let (lat, bw) = (&mem.lat, &mem.bw);
    let rows = lat.len().max(1);
    let diag = |mm: &Matrix| (0..lat.len()).map(|i| mm[i][i]).sum::<f64>() / rows as f64;
    let (local_lat, local_bw) = (diag(lat), diag(bw));
    // The interconnect takes the smallest remote penalty per link crossed, halved (a
    // line read crosses each link twice) and less its serialization, so that every
    // entry of the matrix stays reachable; the matrix's delays add the rest per pair.
    let hops = package_hops(layout.packages.len(), links);
    let ser =
        (sim::net::coherent_bytes(0) + sim::net::coherent_bytes(64)) as f64 / INTERCONNECT_GBPS;
    let mut ic: Option<f64> = None;
    let mut ic_src = Vec::new();
    for (i, row) in lat.iter().enumerate() {
        for (j, &entry) in row.iter().enumerate() {
            let (a, b) = (
                i / layout.nodes_per_package,
                layout.package_of(layout.node_ids[j]).unwrap_or(0),
            );
            let Some(h) = hops[a][b].filter(|&h| h > 0) else {
                continue;
            };
            let per_link = ((entry - lat[i][i]) / h as f64 - ser) / 2.0;
            ic = Some(ic.map_or(per_link, |x: f64| x.min(per_link)));
            ic_src.extend([mem.lat_src[i][j], mem.lat_src[i][i]]);
        }
    }
    let diag_src = |src: &Vec<Vec<Entry>>| (0..src.len()).map(|i| src[i][i]).collect::<Vec<_>>();
    let from_matrix = |key: &str, value: f64, what: &str, src: &[Entry]| -> String {
        let value = format!("{value:.1}");
        let stated = src.iter().filter(|e| e.stated()).count();
        if stated == src.len() {
            calibrated(
                key,
                &value,
                &format!("{what}, from the memory matrix above as the machine reported or `nudma calibrate` measured it"),
            )
        } else if stated == 0 {
            assumed(
                key,
                &value,
                &format!("{what}, from the memory matrix above, itself assumed"),
            )
        } else {
            assumed(
                key,
                &value,
                &format!("{what}, from the memory matrix above, only partly stated by the machine"),
            )
        }
    };
    let mut out = String::new();
    let _ = writeln!(out, "[platform.{PLATFORM}.timing]");
    let _ = writeln!(
        out,
        "{}",
        from_matrix(
            "dram_latency_ns",
            local_lat,
            "mean local latency",
            &diag_src(&mem.lat_src)
        )
    );
    let _ = writeln!(
        out,
        "{}",
        from_matrix(
            "dram_gbps",
            local_bw,
            "mean local bandwidth",
            &diag_src(&mem.bw_src)
        )
    );
    let ic_line = match ic {
        // Rounded down: the simulator refuses an entry below what its links take.
        Some(v) => from_matrix(
            "interconnect_latency_ns",
            (v.max(0.0) * 10.0).floor() / 10.0,
            &format!("the smallest remote penalty per link crossed, halved, less {ser:.1} ns of serialization"),
            &ic_src,
        ),
        None => assumed(
            "interconnect_latency_ns",
            "0.0",
            "no memory is across an interconnect link: the value is never used",
        ),
    };
    let _ = writeln!(out, "{ic_line}");
    let ic_gbps = format!("{INTERCONNECT_GBPS:.1}");
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
        ("rcb_bytes", "64", "64 B read completion boundary"),
        (
            "read_completion_bytes",
            "64",
            "completions split at the boundary, as older chipsets return them",
        ),
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
            ic_gbps.as_str(),
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
        (
            "completion_timeout_ns",
            "50000000.0",
            "PCIe's default completion timeout range is 50 us - 50 ms; its top, as the built-in platforms",
        ),
        (
            "home_snoop",
            "1",
            "home snoop with the directory in memory, the default of Xeon E5 v4 and Skylake-SP; set 0 for a source-snoop machine (Nehalem-EP's QPI 1.0)",
        ),
    ] {
        let _ = writeln!(out, "{}", assumed(key, value, why));
    }
    out
}

/// `[[platform.X.memory_node]]` for each memory-only node: the package serving it, its
/// size and kind, and its bandwidth as a DMA target (the best row of its column).
fn memory_nodes_toml(m: &Machine, layout: &Layout, mem: &MemoryMatrices) -> String {
    let mut out = String::new();
    let first = layout.cpu_nodes();
    for (k, x) in layout.memory_nodes.iter().enumerate() {
        let j = first + k;
        let node = m.node(x.id);
        let what = node
            .and_then(|n| n.kind.clone())
            .map(|k| format!(" ({k})"))
            .unwrap_or_default();
        let _ = writeln!(out, "[[platform.{PLATFORM}.memory_node]]");
        let _ = writeln!(
            out,
            "# machine node {}{what}, scenario node {j}: no CPU runs on it",
            x.id
        );
        let _ = writeln!(
            out,
            "package = {}   # {}",
            x.package,
            match &x.attach {
                Attach::Reported(how) => how.clone(),
                Attach::Assumed(why) => format!("assumption: {why}"),
            }
        );
        match node.and_then(|n| n.memory_bytes).filter(|&b| b >= MIB) {
            Some(b) => {
                let _ = writeln!(
                    out,
                    "bytes = {}   # {b} bytes rounded down to a whole MiB",
                    b / MIB * MIB
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "bytes = {MIB}   # assumption: the node reports no memory; the fabric needs at least 1 MiB"
                );
            }
        }
        let kind_note = if node.and_then(|n| n.kind.as_ref()).is_none() && x.kind == "other" {
            "   # the machine does not say what memory it is"
        } else {
            ""
        };
        let _ = writeln!(out, "kind = \"{}\"{kind_note}", x.kind);
        let best = (0..mem.bw.len()).max_by(|&a, &b| mem.bw[a][j].total_cmp(&mem.bw[b][j]));
        if let Some(i) = best {
            let v = format!("{:.2}", mem.bw[i][j]);
            let line = if mem.bw_src[i][j].stated() {
                calibrated(
                    "gbps",
                    &v,
                    &format!(
                        "the best bandwidth of its column in the memory matrix above (from node {}), as the machine reported or `nudma calibrate` measured it",
                        layout.node_ids[i]
                    ),
                )
            } else {
                assumed(
                    "gbps",
                    &v,
                    "the best bandwidth of its column in the memory matrix above, itself not stated by the machine",
                )
            };
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
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

/// One memory attribute (`Latency`, `Bandwidth`) in scenario order, row = CPU node,
/// column = every node: the value whose initiator is exactly that CPU node's CPUs.
fn memattr_grid(m: &Machine, layout: &Layout, name: &str, scale: f64) -> Vec<Vec<Option<f64>>> {
    let ids = &layout.node_ids;
    let mut grid = vec![vec![None; ids.len()]; layout.cpu_nodes()];
    let Some(attr) = m
        .memory_attributes
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(name))
    else {
        return grid;
    };
    for (i, row) in grid.iter_mut().enumerate() {
        let Some(node) = m.node(ids[i]) else {
            continue;
        };
        let home = m.home_cpus(node.id);
        for v in &attr.values {
            let (Some(target), Some(Initiator::Cpus(c))) = (v.target_node, &v.initiator) else {
                continue;
            };
            if c.is_empty() || (c != &node.cpus && c != &home) {
                continue;
            }
            if let Some(j) = layout.index_of(target) {
                row[j] = Some(v.value as f64 * scale);
            }
        }
    }
    grid
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
/// smallest distance level (hwloc Package distances when every scenario package is one
/// machine package, else the nearest CPU nodes of each package) that connects every
/// package, widening the level until it does; a full mesh when there is no distance
/// information.
fn package_links(m: &Machine, layout: &Layout) -> Vec<(usize, usize)> {
    let packages = layout.packages.len();
    let all: Vec<(usize, usize)> = (0..packages)
        .flat_map(|a| (a + 1..packages).map(move |b| (a, b)))
        .collect();
    if packages <= 2 {
        return all;
    }
    let single: Option<Vec<u64>> = layout
        .packages
        .iter()
        .map(|p| match p.machine_packages.as_slice() {
            [one] => Some(*one as u64),
            _ => None,
        })
        .collect();
    let package_matrix = single.as_ref().and_then(|ids| {
        m.distances
            .iter()
            .find(|d| {
                d.object_type.eq_ignore_ascii_case("Package")
                    && d.kind & 8 == 0
                    && ids.iter().all(|i| d.ids.contains(i))
            })
            .map(|d| (d, ids))
    });
    let numa = m.numa_distances();
    let dist = |a: usize, b: usize| -> Option<f64> {
        if let Some((pd, ids)) = package_matrix {
            return pd.get(ids[a], ids[b]);
        }
        let d = numa?;
        let mut best: Option<f64> = None;
        for &x in &layout.packages[a].cpu_nodes {
            for &y in &layout.packages[b].cpu_nodes {
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

/// Links crossed between every two packages (`None` when unreachable).
fn package_hops(packages: usize, links: &[(usize, usize)]) -> Vec<Vec<Option<usize>>> {
    (0..packages)
        .map(|from| {
            let mut hops = vec![None; packages];
            hops[from] = Some(0);
            let mut frontier = vec![from];
            let mut h = 0;
            while !frontier.is_empty() {
                h += 1;
                let mut next = Vec::new();
                for &(a, b) in links {
                    for (x, y) in [(a, b), (b, a)] {
                        if frontier.contains(&x) && hops[y].is_none() {
                            hops[y] = Some(h);
                            next.push(y);
                        }
                    }
                }
                frontier = next;
            }
            hops
        })
        .collect()
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
    /// Root complex name per NUMA node (a memory-only node: its package's).
    rc_of_node: BTreeMap<u32, String>,
    /// rc per scenario package, for devices hwloc attaches to several nodes.
    layout: &'a Layout,
    switch_up: BTreeSet<usize>,
    /// The PCIe generation of the platform's root ports and how it is known.
    platform_gen: Option<(u8, String)>,
}

impl<'a> PciExport<'a> {
    fn new(m: &'a Machine, layout: &'a Layout) -> Self {
        let rc_of_node = m
            .nodes
            .iter()
            .filter_map(|n| Some((n.id, format!("rc{}", layout.package_of(n.id)?))))
            .collect();
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
            layout,
            switch_up,
            platform_gen: platform_pcie_gen(m),
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
            Some((n, inferred)) => match self.rc_of_node.get(&n) {
                Some(rc) => {
                    let note = inferred
                        .then(|| format!("assumption: node {n} inferred from local_cpulist"));
                    (rc.clone(), note)
                }
                None => (
                    "rc0".to_string(),
                    Some(format!(
                        "assumption: the machine places it on node {n}, which it does not list"
                    )),
                ),
            },
            // With one package there is one root complex to hang it on.
            None if self.layout.packages.len() < 2 => ("rc0".to_string(), None),
            None => {
                // hwloc may attach a device to an object spanning several nodes (a
                // package with DRAM and HBM nodes): one package all the same.
                let packages: BTreeSet<usize> = d
                    .attached_nodes
                    .iter()
                    .flat_map(|ns| ns.iter())
                    .filter_map(|n| self.layout.package_of(n))
                    .collect();
                match (packages.len(), packages.first()) {
                    (1, Some(p)) => (format!("rc{p}"), None),
                    _ => (
                        "rc0".to_string(),
                        Some(
                            "assumption: the machine does not say which node this is on"
                                .to_string(),
                        ),
                    ),
                }
            }
        }
    }

    /// The `link` value and a comment: reported, recovered or assumed.
    fn link_of(&self, d: &PciDevice, default_width: u32) -> (String, Option<String>) {
        let ((g, w), note) = self.link_guess(d, default_width);
        if g <= 5 {
            return (format!("{{ gen = {g}, width = {w} }}"), note);
        }
        // The fabric models Gen1–5: a faster link becomes the Gen5 link of equal bandwidth.
        let w5 = (w << (g - 5)).min(32);
        let why =
            format!("assumption: Gen{g} x{w} is modelled as Gen5 x{w5} (the fabric models Gen1-5)");
        (
            format!("{{ gen = 5, width = {w5} }}"),
            Some(note.map_or(why.clone(), |n| format!("{n}; {why}"))),
        )
    }

    fn link_guess(&self, d: &PciDevice, default_width: u32) -> ((u8, u32), Option<String>) {
        if let Some((g, w)) = d.link.reported_gen_width() {
            return ((g, w), None);
        }
        let Some(gbps) = d.link.gbytes_per_s else {
            return (
                (3, default_width),
                Some("assumption: link not reported".to_string()),
            );
        };
        let candidates = gen_width_candidates(gbps);
        match candidates.as_slice() {
            [] => (
                (3, default_width),
                Some(format!(
                    "assumption: hwloc's {gbps} GB/s matches no PCIe link"
                )),
            ),
            [(g, w)] => (
                (*g, *w),
                Some(format!(
                    "recovered from hwloc's {gbps} GB/s, the only match"
                )),
            ),
            many => {
                let names = many
                    .iter()
                    .map(|(g, w)| format!("Gen{g} x{w}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                // The platform's generation, else the newest below it, else the width
                // nearest x8.
                let (g, w, why) = match &self.platform_gen {
                    Some((pg, how)) => {
                        let pick = many
                            .iter()
                            .filter(|(g, _)| g <= pg)
                            .max_by_key(|(g, _)| *g)
                            .or_else(|| many.iter().min_by_key(|(g, _)| *g))
                            .copied()
                            .unwrap_or(many[0]);
                        (
                            pick.0,
                            pick.1,
                            format!("this platform's PCIe generation is Gen{pg} ({how})"),
                        )
                    }
                    None => {
                        let pick = nearest_x8(many);
                        (
                            pick.0,
                            pick.1,
                            "the platform's PCIe generation is unknown; the width nearest x8"
                                .to_string(),
                        )
                    }
                };
                (
                    (g, w),
                    Some(format!(
                        "assumption: hwloc's {gbps} GB/s fits {names}; Gen{g} x{w} taken as {why}"
                    )),
                )
            }
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
        let mut memory_devices = Vec::new();
        for (i, d) in m.pci.iter().enumerate() {
            if !exported(d) {
                // A CXL memory expander's memory is not reached through PCIe BARs; it
                // becomes a NUMA node (and then a memory node here) once onlined.
                if d.class_code.is_some_and(|c| c >> 16 == 0x05) && !d.is_bridge {
                    memory_devices.push(d.label());
                    continue;
                }
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
                let _ = writeln!(out, "{}", bars_line(&d.bar_sizes));
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
            let _ = writeln!(out, "{}", bars_line(&d.bar_sizes));
            let _ = writeln!(out, "device_model = \"{}\"", model_of(kind));
            let _ = writeln!(out);
        }
        if skipped > 0 {
            let _ = writeln!(
                out,
                "# {skipped} bridge, chipset and SR-IOV virtual functions are not exported as devices."
            );
        }
        if !memory_devices.is_empty() {
            let _ = writeln!(
                out,
                "# {} memory controller function(s) ({}) are not exported as devices: CXL memory is reached by loads and stores, not through BARs; once onlined as a NUMA node (daxctl, cxl create-region) it is exported as a memory node.",
                memory_devices.len(),
                memory_devices.join(", ")
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

/// Of links carrying the same bandwidth, the one whose width is nearest x8.
fn nearest_x8(many: &[(u8, u32)]) -> (u8, u32) {
    let from_x8 = |w: u32| (w as f64 / 8.0).log2().abs();
    many.iter()
        .copied()
        .min_by(|a, b| from_x8(a.1).total_cmp(&from_x8(b.1)))
        .unwrap_or((3, 8))
}

/// The PCIe generation of the platform's root ports: the fastest link the machine
/// reports with its rate (sysfs), else what the CPU model is documented to provide.
fn platform_pcie_gen(m: &Machine) -> Option<(u8, String)> {
    let reported = m
        .pci
        .iter()
        .filter_map(|d| d.link.max_gts.or(d.link.current_gts))
        .filter_map(crate::pci::gen_from_gts)
        .max();
    if let Some(g) = reported {
        return Some((g, "the fastest link rate the machine reports".to_string()));
    }
    let model = m.cpu_model.as_deref()?;
    pcie_gen_of_cpu(model).map(|g| (g, format!("documented for the CPU model {model:?}")))
}

/// The PCIe generation a CPU family's root ports run (vendors' datasheets): Westmere-era
/// Xeons (X5670, E7-4870) and Opterons Gen2; Xeon E5 and E7 v2–v4, Xeon Scalable 1st/2nd
/// generation (x1xx, x2xx; Cooper Lake's x3xxH) and EPYC 7xx1 Gen3; Ice Lake (x3xx),
/// EPYC 7xx2/7xx3 and POWER9 Gen4; Sapphire Rapids and later (x4xx…), EPYC 9xx4 and
/// later, POWER10 Gen5.
pub fn pcie_gen_of_cpu(model: &str) -> Option<u8> {
    let l = model.to_ascii_lowercase();
    let number_after = |key: &str| -> Option<String> {
        let rest = &l[l.find(key)? + key.len()..];
        let tok: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        (tok.len() >= 4 && tok[..4].chars().all(|c| c.is_ascii_digit())).then_some(tok)
    };
    if l.contains("epyc") {
        let n = number_after("epyc")?;
        return match n.as_bytes()[3] {
            b'1' => Some(3),
            b'2' | b'3' => Some(4),
            _ => Some(5),
        };
    }
    if l.contains("power10") {
        return Some(5);
    }
    if l.contains("power9") {
        return Some(4);
    }
    if l.contains("power8") {
        return Some(3);
    }
    if l.contains("opteron") {
        return Some(2);
    }
    if !l.contains("xeon") {
        return None;
    }
    if l.contains("e5-") {
        return Some(3);
    }
    if l.contains("e7-") {
        return Some(if l.contains(" v") { 3 } else { 2 });
    }
    for tier in ["platinum", "gold", "silver", "bronze"] {
        if let Some(n) = number_after(tier) {
            return match n.as_bytes()[1] {
                b'1' | b'2' => Some(3),
                b'3' if n.ends_with('h') || n.ends_with("hl") => Some(3),
                b'3' => Some(4),
                _ => Some(5),
            };
        }
    }
    if l.contains("xeon max") {
        return Some(5);
    }
    // Nehalem/Westmere: X5670, E5620, L5640 (no dash), through an IOH.
    let westmere = l.split_whitespace().any(|t| {
        let b = t.as_bytes();
        b.len() == 5
            && matches!(b[0], b'x' | b'e' | b'l' | b'w')
            && b[1..].iter().all(u8::is_ascii_digit)
            && b[1] == b'5'
    });
    westmere.then_some(2)
}

fn comment(note: Option<String>) -> String {
    note.map(|n| format!("   # {n}")).unwrap_or_default()
}

/// `bars = …`: the reported BARs, else one assumed BAR so that CPUs and peers can
/// address the device (hwloc does not report BARs).
fn bars_line(sizes: &[u64]) -> String {
    if sizes.is_empty() {
        format!(
            "bars = [{{ size = {ASSUMED_BAR_BYTES} }}]   # assumption: BARs not reported; one 1 MiB BAR so that CPUs and peers can address the device"
        )
    } else {
        format!("bars = {}", bars_toml(sizes))
    }
}

/// The BAR a device gets when the machine reports none.
const ASSUMED_BAR_BYTES: u64 = 1 << 20;

fn bars_toml(sizes: &[u64]) -> String {
    let parts: Vec<String> = sizes.iter().map(|s| format!("{{ size = {s} }}")).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

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
