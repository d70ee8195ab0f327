//! The `[platform.X.memory]` matrices (from a calibration, the machine's memory
//! attributes, its NUMA distances, or assumed) and the memory-only nodes.

use std::fmt::Write;

use super::{
    assumed, calibrated, fabric_node_bytes, Calibration, MemorySource,
    ASSUMED_LOCAL_BANDWIDTH_GBPS, ASSUMED_LOCAL_LATENCY_NS, MIB, PLATFORM,
};
use crate::error::InspectError;
use crate::layout::{Attach, Layout};
use crate::model::{Initiator, Machine};
use crate::platform_file::matrix_toml;

/// Where one matrix entry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Entry {
    Calibration,
    /// hwloc's Latency/Bandwidth attribute (or the HMAT's, read by the sysfs importer).
    MemAttr,
    /// Scaled from the row's local figure by the NUMA distance matrix.
    Distance,
    Assumed,
}

impl Entry {
    /// Measured or reported by the machine.
    pub(super) fn stated(self) -> bool {
        matches!(self, Entry::Calibration | Entry::MemAttr)
    }
}

/// The memory matrices in scenario order (row = CPU node, column = every node) with the
/// source of each entry and their TOML.
pub(super) struct MemoryMatrices {
    pub(super) text: String,
    pub(super) source: MemorySource,
    pub(super) lat: Matrix,
    pub(super) bw: Matrix,
    pub(super) lat_src: Vec<Vec<Entry>>,
    pub(super) bw_src: Vec<Vec<Entry>>,
}

pub(super) fn memory_matrices(
    m: &Machine,
    layout: &Layout,
    calibration: Option<Calibration>,
) -> Result<MemoryMatrices, InspectError> {
    let mut out = String::new();
    let _ = writeln!(out, "[platform.{PLATFORM}.memory]");
    let node_note = node_note(layout);
    match calibration {
        Some(c) => calibrated_matrices(m, layout, c, out, &node_note),
        None => Ok(reported_matrices(m, layout, out, &node_note)),
    }
}

/// Which machine node each column is, when the columns are not simply the nodes in order.
fn node_note(layout: &Layout) -> String {
    let ids = &layout.node_ids;
    let order = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    if layout.memory_nodes.is_empty() && ids.windows(2).all(|w| w[0] < w[1]) {
        String::new()
    } else {
        format!(
            " (machine nodes {}; memory-only ones have a column, no row)",
            order(ids)
        )
    }
}

/// The matrices `nudma calibrate` measured, refused unless measured on the machine's nodes.
fn calibrated_matrices(
    m: &Machine,
    layout: &Layout,
    c: Calibration,
    mut out: String,
    node_note: &str,
) -> Result<MemoryMatrices, InspectError> {
    let ids = &layout.node_ids;
    let rows = layout.cpu_nodes();
    let n = ids.len();
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
    Ok(MemoryMatrices {
        text: out,
        source: MemorySource::Calibration,
        lat,
        bw,
        lat_src: all.clone(),
        bw_src: all,
    })
}

/// The matrices from the machine's memory attributes, else its NUMA distances, else
/// assumed.
fn reported_matrices(
    m: &Machine,
    layout: &Layout,
    mut out: String,
    node_note: &str,
) -> MemoryMatrices {
    let n = layout.node_ids.len();
    let attr_lat = memattr_grid(m, layout, "Latency", 1.0);
    let attr_bw = memattr_grid(m, layout, "Bandwidth", 1024.0 * 1024.0 / 1e9);
    let (mut lat, lat_src) = fill(m, layout, &attr_lat, ASSUMED_LOCAL_LATENCY_NS, |l, r| l * r);
    let (mut bw, bw_src) = fill(m, layout, &attr_bw, ASSUMED_LOCAL_BANDWIDTH_GBPS, |b, r| {
        b / r
    });
    let tally = Tally::of(&lat_src, &bw_src);
    let source = tally.source();
    out.push_str(&tally.comment(source, n, node_note));
    let clamped = clamp(&mut lat, LATENCY_NS) + clamp(&mut bw, BANDWIDTH_GBPS);
    if clamped > 0 {
        let _ = writeln!(
            out,
            "# assumption: {clamped} entries beyond the fabric's ranges (latency {} to {} ns, bandwidth {} to {} GB/s) are written at their edges",
            LATENCY_NS.0, LATENCY_NS.1, BANDWIDTH_GBPS.0, BANDWIDTH_GBPS.1
        );
    }
    let _ = writeln!(out, "latency_ns = {}", matrix_toml(&lat));
    let _ = writeln!(out, "bandwidth_gbps = {}", matrix_toml(&bw));
    MemoryMatrices {
        text: out,
        source,
        lat,
        bw,
        lat_src,
        bw_src,
    }
}

/// The fabric's ranges for matrix entries (crates/fabric/src/scenario/rules.rs: latency
/// above 0 and at most 1 s, bandwidth 0.01 to 10^5 GB/s); latency from 1 ns, as no
/// memory answers faster.
const LATENCY_NS: (f64, f64) = (1.0, 1e9);
const BANDWIDTH_GBPS: (f64, f64) = (0.01, 1e5);

/// Puts every entry within `lo..=hi`; returns how many moved. Memory attributes and
/// distances are the machine's word, but a corrupt one must not make the export invalid.
fn clamp(mm: &mut Matrix, (lo, hi): (f64, f64)) -> usize {
    let mut moved = 0;
    for v in mm.iter_mut().flatten() {
        let c = if v.is_nan() { lo } else { v.clamp(lo, hi) };
        if c != *v {
            *v = c;
            moved += 1;
        }
    }
    moved
}

/// Each entry: the machine's figure, else the row's local figure scaled by the
/// distance matrix, else the local figure (twice as slow when remote).
fn fill(
    m: &Machine,
    layout: &Layout,
    attr: &[Vec<Option<f64>>],
    assumed: f64,
    scale: fn(f64, f64) -> f64,
) -> (Matrix, Vec<Vec<Entry>>) {
    let ids = &layout.node_ids;
    let rows = layout.cpu_nodes();
    let n = ids.len();
    let dist = m.numa_distances();
    let ratio = |i: usize, j: usize| -> Option<f64> {
        let d = dist?;
        let (a, b) = (ids[i] as u64, ids[j] as u64);
        let local = d.get(a, a).filter(|v| *v > 0.0)?;
        d.get(a, b).filter(|v| *v > 0.0).map(|v| v / local)
    };
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
}

/// How many entries of the two matrices came from where.
struct Tally {
    total: usize,
    /// Latency and bandwidth entries from memory attributes.
    attr_l: usize,
    attr_b: usize,
    /// Entries of either matrix scaled by the distance matrix.
    distanced: usize,
}

impl Tally {
    fn of(lat_src: &[Vec<Entry>], bw_src: &[Vec<Entry>]) -> Tally {
        let count =
            |src: &[Vec<Entry>], e: Entry| src.iter().flatten().filter(|&&x| x == e).count();
        Tally {
            total: lat_src.len() * lat_src.first().map_or(0, Vec::len),
            attr_l: count(lat_src, Entry::MemAttr),
            attr_b: count(bw_src, Entry::MemAttr),
            distanced: count(lat_src, Entry::Distance) + count(bw_src, Entry::Distance),
        }
    }

    fn source(&self) -> MemorySource {
        let Tally {
            total,
            attr_l,
            attr_b,
            distanced,
        } = *self;
        if attr_l == total && attr_b == total {
            MemorySource::HwlocMemoryAttributes
        } else if attr_l + attr_b > 0 {
            MemorySource::Mixed
        } else if distanced > 0 {
            MemorySource::Distances
        } else {
            MemorySource::Assumed
        }
    }

    /// The comment lines above the matrices: where the entries came from and, unless
    /// the machine stated them all, what was assumed.
    fn comment(&self, source: MemorySource, n: usize, node_note: &str) -> String {
        let Tally {
            total,
            attr_l,
            attr_b,
            distanced,
        } = *self;
        let mut out = String::new();
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
        out
    }
}

/// `[[platform.X.memory_node]]` for each memory-only node: the package serving it, its
/// size and kind, and its bandwidth as a DMA target (the best row of its column).
pub(super) fn memory_nodes_toml(m: &Machine, layout: &Layout, mem: &MemoryMatrices) -> String {
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
                let (bytes, cut) = fabric_node_bytes(b, "the node holds");
                let what = cut.unwrap_or_else(|| format!("{b} bytes rounded down to a whole MiB"));
                let _ = writeln!(out, "bytes = {bytes}   # {what}");
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

/// Row = CPU node, column = memory node.
pub(super) type Matrix = Vec<Vec<f64>>;

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
