//! The storage workloads: fio on a local NVMe device (`fio`), and Tyche's network storage
//! driven by FIO or zmIO threads (`tyche_fio`, `zmio`). Their raw schemas, and their
//! reading into a `Kind` with its range checks.

use devices::nic::CoalesceMode;
use fabric::units::Size;
use fabric::ScenarioError;
use serde::Deserialize;
use systems::tyche;

use super::located::Entry;
use super::{Direction, Kind, Pattern};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFio {
    name: String,
    #[allow(dead_code)]
    kind: String,
    device: String,
    cpu_node: u32,
    mem_node: u32,
    threads: u16,
    iodepth: u16,
    block_bytes: Size,
    op: Direction,
    #[serde(default = "random")]
    pattern: Pattern,
}

fn random() -> Pattern {
    Pattern::Random
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTyche {
    name: String,
    kind: String,
    initiator: String,
    target: String,
    nics: u32,
    #[serde(default = "one_thread")]
    threads: u32,
    #[serde(default = "tyche_block_bytes")]
    block_bytes: Size,
    op: Direction,
    /// Buffer placement (`crate::tyche::app`); the application's own when absent.
    placement: Option<String>,
    #[serde(default = "nic_local")]
    initiator_place: String,
    #[serde(default = "nic_local")]
    target_place: String,
    #[serde(default = "numa")]
    scheduler: String,
    #[serde(default = "ramdisk")]
    target_io: String,
    /// "polling" (the default), "network_thread" or "softirq".
    rx_path: Option<String>,
    /// "off", "static" or "adaptive"; the driver's default (static) when absent.
    coalescing: Option<String>,
}

fn tyche_block_bytes() -> Size {
    Size(128 << 10)
}

fn nic_local() -> String {
    "nic_local".into()
}

fn numa() -> String {
    "numa".into()
}

fn ramdisk() -> String {
    "ramdisk".into()
}

fn one_thread() -> u32 {
    1
}

/// A `fio` workload: fio's jobs on an NVMe device.
pub(super) fn fio(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawFio = e.read()?;
    // The device's limits (queue size, MDTS) are checked against it at run time.
    e.check(
        r.threads >= 1,
        &r.name,
        "threads",
        "must be at least 1 thread",
    )?;
    e.check(
        r.iodepth >= 1,
        &r.name,
        "iodepth",
        "must be at least 1 request in flight",
    )?;
    e.check(
        r.block_bytes.0 >= 4096 && r.block_bytes.0.is_multiple_of(4096),
        &r.name,
        "block_bytes",
        "must be a whole number of 4 KiB blocks",
    )?;
    let k = Kind::Fio {
        device: r.device,
        cpu_node: r.cpu_node,
        mem_node: r.mem_node,
        threads: r.threads,
        iodepth: r.iodepth,
        block_bytes: r.block_bytes.0,
        op: r.op,
        pattern: r.pattern,
    };
    Ok((r.name, k))
}

/// A `tyche_fio` or `zmio` workload: Tyche from an initiator to a target.
pub(super) fn tyche(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawTyche = e.read()?;
    let field = |f: &str, msg: String| e.field(&r.name, f, &msg);
    let op = match r.op {
        Direction::Read => tyche::Op::Read,
        Direction::Write => tyche::Op::Write,
    };
    let (app_name, default_placement) = match r.kind.as_str() {
        "zmio" => ("zmio", "zmio"),
        _ => ("fio", "balanced"),
    };
    let placement = r.placement.as_deref().unwrap_or(default_placement);
    let app =
        crate::tyche::app(app_name, placement, r.threads, op).map_err(|m| field("placement", m))?;
    let initiator_place =
        crate::tyche::place(&r.initiator_place).map_err(|m| field("initiator_place", m))?;
    let target_place =
        crate::tyche::place(&r.target_place).map_err(|m| field("target_place", m))?;
    let scheduler = crate::tyche::scheduler(&r.scheduler).map_err(|m| field("scheduler", m))?;
    let target_io = crate::tyche::target_io(&r.target_io).map_err(|m| field("target_io", m))?;
    // The hosts' NICs and nodes are checked against the fabric at run time.
    e.check(r.nics >= 1, &r.name, "nics", "must be at least 1 NIC")?;
    e.check(
        (1..=1024).contains(&app.threads),
        &r.name,
        "threads",
        "must be 1 .. 1024 threads",
    )?;
    e.check(
        r.block_bytes.0 >= 4096
            && r.block_bytes.0.is_multiple_of(4096)
            && r.block_bytes.0 <= tyche::MAX_REQ_BYTES,
        &r.name,
        "block_bytes",
        "must be a whole number of 4 KiB blocks, at most 512 KiB (Tyche's largest request)",
    )?;
    let k = Kind::Tyche {
        initiator: r.initiator,
        target: r.target,
        nics: r.nics,
        app,
        block_bytes: r.block_bytes.0,
        op,
        initiator_place,
        target_place,
        scheduler,
        target_io,
        rx: match &r.rx_path {
            Some(s) => tyche::RxPath::parse(s).map_err(|m| field("rx_path", m))?,
            None => tyche::RxPath::default(),
        },
        coalescing: match &r.coalescing {
            Some(s) => CoalesceMode::parse(s).map_err(|m| field("coalescing", m))?,
            None => tyche::rx::COALESCING,
        },
    };
    Ok((r.name, k))
}
