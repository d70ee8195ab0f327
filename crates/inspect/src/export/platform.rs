//! The `[platform.X]` table: CPU, packages and nodes, cores and threads, clock, LLC and
//! DDIO, DRAM per node. The fabric's ranges are up to 1024 cores a package, 8 threads
//! per core, clocks in (0, 100) GHz, 1 to 64 LLC ways and 64 TiB a node; a machine
//! beyond them is written at the limit, saying so. An LLC beyond the importers' bound
//! (1 TiB) is written at that bound.

use std::fmt::Write;

use super::{fabric_node_bytes, quote, MIB, PLATFORM};
use crate::layout::Layout;
use crate::model::{limits, Machine};
use crate::platform_file::format_float;

/// The `[platform.X]` table, without the blank line after it.
pub(super) fn platform_toml(m: &Machine, layout: &Layout) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "[platform.{PLATFORM}]");
    out.push_str(&package_lines(m, layout));
    out.push_str(&core_lines(m, layout.packages.len()));
    out.push_str(&clock_line(m));
    out.push_str(&cache_lines(m));
    out.push_str(&dram_line(m, layout));
    out
}

/// `cpu`, `packages` and `nodes_per_package`.
fn package_lines(m: &Machine, layout: &Layout) -> String {
    let mut out = String::new();
    let packages = layout.packages.len();
    let npp = layout.nodes_per_package;
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
    out
}

/// `cores_per_package` and `threads_per_core`.
fn core_lines(m: &Machine, packages: usize) -> String {
    let mut out = String::new();
    let threads = m.cpus.len().max(1);
    let (cores, cores_assumed) = if m.cores.is_empty() {
        (threads, true)
    } else {
        (m.cores.len(), false)
    };
    let per_package = (cores / packages).max(1);
    let _ = writeln!(
        out,
        "cores_per_package = {}{}",
        per_package.min(MAX_CORES_PER_PACKAGE),
        if per_package > MAX_CORES_PER_PACKAGE {
            format!("   # assumption: {cores} cores over {packages} package(s) exceed the fabric's {MAX_CORES_PER_PACKAGE} a package; written at that limit")
        } else if cores_assumed {
            "   # assumption: no core objects; one hardware thread per core".to_string()
        } else if !cores.is_multiple_of(packages) {
            format!("   # assumption: {cores} cores over {packages} packages do not divide evenly; rounded down")
        } else {
            String::new()
        }
    );
    let tpc = (threads / cores.max(1)).max(1);
    if tpc > 8 {
        let _ = writeln!(
            out,
            "threads_per_core = 8   # assumption: {threads} hardware threads on {cores} cores; the fabric models at most 8 per core"
        );
    } else {
        let _ = writeln!(out, "threads_per_core = {tpc}");
    }
    out
}

/// The fabric's most cores a package (crates/fabric/src/scenario/platform.rs).
const MAX_CORES_PER_PACKAGE: usize = 1024;

/// `clock_ghz`.
fn clock_line(m: &Machine) -> String {
    let mut out = String::new();
    match m.clock_ghz {
        Some(c) if fabric::CLOCK_GHZ.contains(&c) => {
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
    out
}

/// `llc_bytes`, `llc_ways` and `ddio_ways`.
fn cache_lines(m: &Machine) -> String {
    let mut out = String::new();
    let llc = m.last_level_cache();
    match llc.filter(|c| c.size_bytes > 0) {
        Some(c) if c.size_bytes > limits::CACHE_BYTES => {
            let _ = writeln!(
                out,
                "llc_bytes = {}   # assumption: the LLC reports {} bytes, beyond {}; written at that bound",
                limits::CACHE_BYTES,
                c.size_bytes,
                limits::CACHE_BYTES_TEXT
            );
        }
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
        Some(0) => {
            let _ = writeln!(
                out,
                "llc_ways = 20   # assumption: the LLC reports 0 ways; the fabric models at least 1"
            );
            20
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
    out
}

/// `dram_bytes_per_node`.
fn dram_line(m: &Machine, layout: &Layout) -> String {
    let mut out = String::new();
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
        // In u128: a machine's nodes may together pass u64 (each is below 2^52 once
        // imported, but a model built otherwise need not be).
        let sum: u128 = node_mem.iter().map(|&b| u128::from(b)).sum();
        let avg = u64::try_from(sum / node_mem.len() as u128).unwrap_or(u64::MAX);
        let (min, max) = (
            node_mem.iter().min().copied().unwrap_or(avg),
            node_mem.iter().max().copied().unwrap_or(avg),
        );
        let note = if max > min.saturating_add(min / 100) {
            format!("; nodes differ: {min} to {max} bytes, this is the mean")
        } else {
            String::new()
        };
        let (bytes, cut) = fabric_node_bytes(avg, "the nodes hold");
        let what = cut.unwrap_or_else(|| format!("{avg} bytes rounded down to a whole MiB"));
        let _ = writeln!(
            out,
            "dram_bytes_per_node = {bytes}   # {what}{note}{memoryless_note}"
        );
    } else if let Some(t) = m.total_memory_bytes {
        let share = t / m.nodes.len().max(1) as u64;
        let (bytes, cut) = fabric_node_bytes(share, "a share of the total memory holds");
        let cut = cut.map(|c| format!("; {c}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "dram_bytes_per_node = {bytes}   # assumption: total memory split evenly over the nodes, rounded down to a whole MiB{cut}{memoryless_note}"
        );
    } else {
        let _ = writeln!(
            out,
            "dram_bytes_per_node = 68719476736   # assumption: memory size not reported{memoryless_note}"
        );
    }
    out
}
