//! pcie-bench's DMA benchmarks as workloads: `pcie_lat` (LAT_DMA_RD, LAT_DMA_WRRD) and
//! `pcie_bw` (BW_DMA_RD, BW_DMA_WR, BW_DMA_RW), on any DMA-capable device of a scenario
//! against a host buffer, with pcie-bench's transfer size, window, pattern, host offset
//! and cache state (`devices::pciebench`).

use devices::pciebench::{Pattern, Test};
use fabric::units::Size;
use fabric::ScenarioError;
use serde::Deserialize;

use super::located::Entry;
use super::Kind;

/// pcie-bench's largest transfer with its host offset (one transfer never crosses 4 KiB).
const MAX_UNIT: u64 = 4096;
/// pcie-bench's host buffer (the window's upper bound).
const MAX_WINDOW: u64 = 64 << 20;

/// The cache state pcie-bench prepares before it times (once, before the run).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// The host thrashed its caches: the window is in none.
    Cold,
    /// The host CPU of `control_node` wrote the window last.
    Hwarm,
    /// The device wrote the window last (DDIO keeps it in the LLC of its socket when the
    /// memory is that socket's).
    Dwarm,
    /// The device wrote the whole 64 MiB buffer at random: the window is out of the
    /// DDIO ways.
    Dthrash,
}

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawPattern {
    Seq,
    Rand,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    kind: String,
    device: String,
    target: String,
    op: String,
    bytes: Size,
    #[serde(default = "window")]
    window_bytes: Size,
    pattern: RawPattern,
    #[serde(default)]
    host_offset: Size,
    cache: Cache,
    control_node: Option<u32>,
    #[serde(default)]
    seed: u64,
}

fn window() -> Size {
    Size(8 << 10)
}

/// A pcie-bench workload as read.
#[derive(Clone, Debug, PartialEq)]
pub struct PcieBench {
    pub device: String,
    /// The host buffer (a RAM endpoint: `host.ram.node1`).
    pub target: String,
    pub test: Test,
    pub bytes: u32,
    pub window: u64,
    pub pattern: Pattern,
    pub host_offset: u32,
    pub cache: Cache,
    /// The NUMA node whose cores warmed or thrashed (pcie-bench's control program);
    /// `None`: the buffer's own node.
    pub control_node: Option<u32>,
    pub seed: u64,
}

/// A `pcie_lat` or `pcie_bw` workload.
pub(super) fn pcie_bench(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: Raw = e.read()?;
    let test = match (r.kind.as_str(), r.op.as_str()) {
        ("pcie_lat", "rd") => Test::LatRd,
        ("pcie_lat", "wrrd") => Test::LatWrRd,
        ("pcie_bw", "rd") => Test::BwRd,
        ("pcie_bw", "wr") => Test::BwWr,
        ("pcie_bw", "rw") => Test::BwRw,
        ("pcie_lat", _) => {
            return Err(e.field(
                &r.name,
                "op",
                "must be `rd` or `wrrd` (LAT_DMA_RD, LAT_DMA_WRRD)",
            ))
        }
        _ => {
            return Err(e.field(
                &r.name,
                "op",
                "must be `rd`, `wr` or `rw` (BW_DMA_RD, BW_DMA_WR, BW_DMA_RW)",
            ))
        }
    };
    let (bytes, ho, window) = (r.bytes.0, r.host_offset.0, r.window_bytes.0);
    e.check(
        (1..=MAX_UNIT).contains(&bytes),
        &r.name,
        "bytes",
        "must be 1 B .. 4 KiB (pcie-bench's transfers stay within a page)",
    )?;
    e.check(
        bytes + ho <= MAX_UNIT,
        &r.name,
        "host_offset",
        "with `bytes` must stay within 4 KiB (pcie-bench refuses a transfer that crosses a page)",
    )?;
    let unit = (bytes + ho).div_ceil(64) * 64;
    e.check(
        window % 64 == 0 && (unit..=MAX_WINDOW).contains(&window),
        &r.name,
        "window_bytes",
        &format!("must be a multiple of 64 B from one transfer's unit ({unit} B: bytes and host_offset rounded up to a line) to pcie-bench's 64 MiB buffer"),
    )?;
    let pattern = match r.pattern {
        RawPattern::Seq => Pattern::Seq,
        RawPattern::Rand => Pattern::Rand,
    };
    let k = PcieBench {
        device: r.device,
        target: r.target,
        test,
        bytes: bytes as u32,
        window,
        pattern,
        host_offset: ho as u32,
        cache: r.cache,
        control_node: r.control_node,
        seed: r.seed,
    };
    Ok((r.name, Kind::PcieBench(k)))
}
