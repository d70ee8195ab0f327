//! The `[platform.X.timing]` table: what the memory matrices say (local DRAM latency
//! and bandwidth, the interconnect's share of remote latency), the rest assumed.

use std::fmt::Write;

use super::interconnect::package_hops;
use super::memory::{Entry, Matrix, MemoryMatrices};
use super::{assumed, calibrated, PLATFORM};
use crate::layout::Layout;

/// Bandwidth of one interconnect link and direction the export assumes.
const INTERCONNECT_GBPS: f64 = 20.0;

/// The timing table the simulator needs, derived from the memory matrices where they
/// speak (local DRAM latency and bandwidth, the interconnect's share of remote latency)
/// and stated as assumptions elsewhere. Values derived only from measured or reported
/// entries are `calibrated` on them; otherwise assumptions.
pub(super) fn timing_section(
    mem: &MemoryMatrices,
    layout: &Layout,
    links: &[(usize, usize)],
) -> String {
    let (lat, bw) = (&mem.lat, &mem.bw);
    let rows = lat.len().max(1);
    let diag = |mm: &Matrix| (0..lat.len()).map(|i| mm[i][i]).sum::<f64>() / rows as f64;
    let (local_lat, local_bw) = (diag(lat), diag(bw));
    let ser =
        (sim::net::coherent_bytes(0) + sim::net::coherent_bytes(64)) as f64 / INTERCONNECT_GBPS;
    let (ic, ic_src) = interconnect_penalty(mem, layout, links, ser);
    let diag_src = |src: &Vec<Vec<Entry>>| (0..src.len()).map(|i| src[i][i]).collect::<Vec<_>>();
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
    for (key, value, why) in assumed_timing(&ic_gbps) {
        let _ = writeln!(out, "{}", assumed(key, value, why));
    }
    out
}

/// The interconnect latency per link and the sources of the entries it rests on.
///
/// The interconnect takes the smallest remote penalty per link crossed, halved (a
/// line read crosses each link twice) and less its serialization `ser`, so that every
/// entry of the matrix stays reachable; the matrix's delays add the rest per pair.
fn interconnect_penalty(
    mem: &MemoryMatrices,
    layout: &Layout,
    links: &[(usize, usize)],
    ser: f64,
) -> (Option<f64>, Vec<Entry>) {
    let lat = &mem.lat;
    let hops = package_hops(layout.packages.len(), links);
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
    (ic, ic_src)
}

/// A value read off the memory matrix: calibrated when every entry it rests on was
/// stated by the machine or measured, else an assumption saying how much was.
fn from_matrix(key: &str, value: f64, what: &str, src: &[Entry]) -> String {
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
}

/// The timing values nothing on the machine speaks to: key, value and why, in the
/// order they are written.
fn assumed_timing(ic_gbps: &str) -> [(&'static str, &str, &'static str); 21] {
    [
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
            "as calibrated on the SmartIO Xeons (docs/hardware.md §2)",
        ),
        (
            "rc_p2p_read_gap_ns",
            "32.0",
            "as calibrated on the SmartIO Xeons (docs/hardware.md §2)",
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
            "as calibrated on the SmartIO Xeons (docs/hardware.md §2)",
        ),
        ("cpu_poll_ns", "80.0", "a miss to local DRAM"),
        (
            "interconnect_gbps",
            ic_gbps,
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
    ]
}
