//! The workloads on the scenario's TLP-level fabric that `nudma run` drives directly: a
//! device's DMA (`dma`), cores' line misses (`cpu_stream`), an NTB adapter's DMA engine
//! copying (`ntb_copy`) and two GPUs bouncing a counter (`pingpong`). Their raw schemas,
//! and their reading into a `Kind` with its range checks.

use fabric::units::Size;
use fabric::ScenarioError;
use serde::Deserialize;

use super::located::{error, value_span, Entry};
use super::{Direction, Kind, Through};

/// Largest single DMA operation a workload may ask for (the model routes every page).
pub const MAX_TRANSFER: u64 = 1 << 30;
/// Largest copy a `gpu_copy` times (bandwidthTest's own range ends far below).
pub const MAX_GPU_COPY: u64 = 4 << 30;
/// Largest buffer a DMA workload cycles through.
pub const MAX_BUFFER: u64 = 4 << 30;
/// Most operations or misses a workload may keep in flight.
pub const MAX_IN_FLIGHT: u32 = 1 << 16;
/// Most cores one `cpu_stream` runs on (the run checks its host's own count).
const MAX_STREAM_CORES: u32 = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDma {
    name: String,
    #[allow(dead_code)]
    kind: String,
    device: String,
    target: String,
    #[serde(default)]
    offset: Size,
    op: Direction,
    transfer_bytes: Size,
    outstanding: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStream {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    cpu_node: u32,
    mem_node: u32,
    op: Direction,
    misses_in_flight: u32,
    #[serde(default = "one")]
    cores: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPingPong {
    name: String,
    #[allow(dead_code)]
    kind: String,
    a: String,
    b: String,
    counters: Counters,
    ram: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpuCopy {
    name: String,
    #[allow(dead_code)]
    kind: String,
    gpu: String,
    user: String,
    op: Direction,
    transfer_bytes: Size,
    #[serde(default = "lending")]
    through: Through,
}

/// How GPU A's data reaches GPU B.
#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Via {
    /// Straight into B's memory (a peer-to-peer write through B's BAR).
    P2p,
    /// Into the user's RAM, from which B reads it.
    Ram,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpuP2p {
    name: String,
    #[allow(dead_code)]
    kind: String,
    a: String,
    b: String,
    user: String,
    via: Via,
    transfer_bytes: Size,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCpuStore {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    target: String,
    #[serde(default)]
    offset: Size,
}

fn one() -> u32 {
    1
}

fn lending() -> Through {
    Through::Lending
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Counters {
    GpuMemory,
    HostRam,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCopy {
    name: String,
    #[allow(dead_code)]
    kind: String,
    ntb: String,
    source: String,
    #[serde(default)]
    source_offset: Size,
    target: String,
    #[serde(default)]
    offset: Size,
    transfer_bytes: Size,
    #[serde(default = "one")]
    outstanding: u32,
}

/// A `dma` workload: a device's requests to or from a target.
pub(super) fn dma(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawDma = e.read()?;
    let k = Kind::Dma {
        device: r.device,
        target: r.target,
        offset: r.offset.0,
        op: r.op,
        transfer_bytes: r.transfer_bytes.0,
        outstanding: r.outstanding,
    };
    check_transfers(e, &r.name, r.transfer_bytes.0, r.outstanding)?;
    Ok((r.name, k))
}

/// A `cpu_stream` workload: cores' line misses against a memory node.
pub(super) fn cpu_stream(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawStream = e.read()?;
    e.check(
        (1..=MAX_IN_FLIGHT).contains(&r.misses_in_flight),
        &r.name,
        "misses_in_flight",
        "must be 1 .. 65536 line misses in flight",
    )?;
    e.check(
        r.cores <= MAX_STREAM_CORES,
        &r.name,
        "cores",
        "must be 0 .. 256 cores (0: the workload is idle, so a sweep can start without it)",
    )?;
    let k = Kind::CpuStream {
        host: r.host,
        cpu_node: r.cpu_node,
        mem_node: r.mem_node,
        op: r.op,
        misses_in_flight: r.misses_in_flight,
        cores: r.cores,
    };
    Ok((r.name, k))
}

/// An `ntb_copy` workload: an NTB adapter's DMA engine copying from source to target.
pub(super) fn ntb_copy(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawCopy = e.read()?;
    let k = Kind::NtbCopy {
        ntb: r.ntb,
        source: r.source,
        source_offset: r.source_offset.0,
        target: r.target,
        offset: r.offset.0,
        transfer_bytes: r.transfer_bytes.0,
        outstanding: r.outstanding,
    };
    check_transfers(e, &r.name, r.transfer_bytes.0, r.outstanding)?;
    Ok((r.name, k))
}

/// The ranges of a `dma` or `ntb_copy` workload's transfers.
fn check_transfers(
    e: &Entry,
    name: &str,
    transfer_bytes: u64,
    outstanding: u32,
) -> Result<(), ScenarioError> {
    e.check(
        (1..=MAX_TRANSFER).contains(&transfer_bytes),
        name,
        "transfer_bytes",
        "must be 1 B .. 1 GiB",
    )?;
    e.check(
        (1..=MAX_IN_FLIGHT).contains(&outstanding),
        name,
        "outstanding",
        "must be 1 .. 65536 requests in flight",
    )?;
    // The buffer the requests cycle through is routed page by page.
    e.check(
        transfer_bytes * outstanding as u64 <= MAX_BUFFER,
        name,
        "outstanding",
        "transfer_bytes × outstanding (the buffer the requests cycle through) must stay within 4 GiB",
    )
}

/// A `gpu_copy` workload: bandwidthTest's copy between a GPU and a host's RAM.
pub(super) fn gpu_copy(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawGpuCopy = e.read()?;
    e.check(
        (1..=MAX_GPU_COPY).contains(&r.transfer_bytes.0),
        &r.name,
        "transfer_bytes",
        "must be 1 B .. 4 GiB",
    )?;
    let k = Kind::GpuCopy {
        gpu: r.gpu,
        user: r.user,
        op: r.op,
        transfer_bytes: r.transfer_bytes.0,
        through: r.through,
    };
    Ok((r.name, k))
}

/// A `gpu_p2p` workload: two GPUs' copy, ping-pong and data path.
pub(super) fn gpu_p2p(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawGpuP2p = e.read()?;
    e.check(
        (1..=MAX_GPU_COPY).contains(&r.transfer_bytes.0),
        &r.name,
        "transfer_bytes",
        "must be 1 B .. 4 GiB",
    )?;
    e.check(r.a != r.b, &r.name, "b", "names the same GPU as `a`")?;
    let k = Kind::GpuP2p {
        a: r.a,
        b: r.b,
        user: r.user,
        via_ram: r.via == Via::Ram,
        transfer_bytes: r.transfer_bytes.0,
    };
    Ok((r.name, k))
}

/// A `cpu_store` workload: one CPU store's one-way latency.
pub(super) fn cpu_store(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawCpuStore = e.read()?;
    let k = Kind::CpuStore {
        host: r.host,
        target: r.target,
        offset: r.offset.0,
    };
    Ok((r.name, k))
}

/// A `pingpong` workload: two GPU kernels bouncing a counter, in GPU memory or host RAM.
pub(super) fn pingpong(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let (src, span) = (e.src, &e.span);
    let r: RawPingPong = e.read()?;
    let ram = match (r.counters, r.ram) {
        (Counters::HostRam, Some(ram)) => Some(ram),
        (Counters::GpuMemory, None) => None,
        (Counters::HostRam, None) => {
            return Err(error(
                src,
                value_span(src, span, "counters"),
                Some(&format!("workload.{}.ram", r.name)),
                "counters in host RAM need `ram` = \"host.ram.nodeN\"",
            ))
        }
        (Counters::GpuMemory, Some(_)) => {
            return Err(error(
                src,
                value_span(src, span, "ram"),
                Some(&format!("workload.{}.ram", r.name)),
                "`ram` is for counters = \"host_ram\"",
            ))
        }
    };
    Ok((
        r.name,
        Kind::PingPong {
            a: r.a,
            b: r.b,
            ram,
        },
    ))
}
