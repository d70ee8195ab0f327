//! The storage workloads: fio on a local NVMe device (`fio`), a series of 4 KiB reads at
//! queue depth 1 through a kernel-style or SmartIO's distributed driver (`nvme_qd1`,
//! timed once), and Tyche's network storage driven by FIO or zmIO threads (`tyche_fio`,
//! `zmio`). Their raw schemas, and their
//! reading into a `Kind` with its range checks.

use devices::nic::CoalesceMode;
use fabric::units::Size;
use fabric::ScenarioError;
use serde::Deserialize;
use systems::smartio::failover::{FailoverMode, FailoverSetup};
use systems::smartio::nvme_dist::SqPlacement;
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
    seed: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQd1 {
    name: String,
    #[allow(dead_code)]
    kind: String,
    driver: String,
    host: String,
    device: String,
    borrowed: Option<bool>,
    sq: Option<String>,
    ios: u64,
    warmup_ios: Option<u64>,
    seed: Option<u64>,
}

/// Most I/Os one `nvme_qd1` series may time (each is simulated; the series runs alone).
const MAX_QD1_IOS: u64 = 100_000;

/// The driver of an `nvme_qd1` series.
#[derive(Clone, Debug, PartialEq)]
pub enum Qd1Driver {
    /// The kernel-style block driver (`systems::drivers::nvme_blk`) on the host, mapping
    /// each I/O's buffer before submission and unmapping it after: `ios` writes, then
    /// reads of those blocks, checked byte for byte. `borrowed`: another host's device,
    /// borrowed through SmartIO.
    Blk { borrowed: bool },
    /// SmartIO's distributed user-space driver (`systems::smartio::nvme_dist`): a client
    /// on the host, its SQ at `sq`, its CQ near its CPU; `warmup_ios` reads, then `ios`.
    Dist { sq: SqPlacement, warmup_ios: u64 },
}

/// An `nvme_qd1` workload: 4 KiB random reads at queue depth 1.
pub(super) fn nvme_qd1(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawQd1 = e.read()?;
    e.check(
        (1..=MAX_QD1_IOS).contains(&r.ios),
        &r.name,
        "ios",
        "must be 1 .. 100000 I/Os",
    )?;
    let driver = match r.driver.as_str() {
        "blk" => {
            e.check(r.sq.is_none(), &r.name, "sq", "the block driver places its own queues: `sq` is for driver = \"dist\"")?;
            e.check(r.warmup_ios.is_none(), &r.name, "warmup_ios", "the block driver's series has no warm-up: `warmup_ios` is for driver = \"dist\"")?;
            Qd1Driver::Blk {
                borrowed: r.borrowed.unwrap_or(false),
            }
        }
        "dist" => {
            e.check(r.borrowed.is_none(), &r.name, "borrowed", "the distributed driver's client reaches the device through SmartIO wherever it is: `borrowed` is for driver = \"blk\"")?;
            let warmup_ios = r.warmup_ios.unwrap_or(0);
            e.check(warmup_ios <= MAX_QD1_IOS, &r.name, "warmup_ios", "must be 0 .. 100000 I/Os")?;
            let sq = r.sq.as_deref().unwrap_or("lender_ram");
            let sq = SqPlacement::parse(sq).map_err(|m| e.field(&r.name, "sq", &m))?;
            Qd1Driver::Dist { sq, warmup_ios }
        }
        other => {
            return Err(e.field(
                &r.name,
                "driver",
                &format!("driver `{other}`: use \"blk\" (kernel-style block driver) or \"dist\" (SmartIO's distributed driver)"),
            ))
        }
    };
    let k = Kind::NvmeQd1 {
        host: r.host,
        device: r.device,
        driver,
        ios: r.ios,
        seed: r.seed,
    };
    Ok((r.name, k))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMulticast {
    name: String,
    #[allow(dead_code)]
    kind: String,
    device: String,
    hosts: u32,
}

/// An `nvme_multicast` workload: one Identify whose data the controller writes once into
/// a multicast group of `hosts` hosts.
pub(super) fn nvme_multicast(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawMulticast = e.read()?;
    e.check(
        (1..=4096).contains(&r.hosts),
        &r.name,
        "hosts",
        "must be 1 .. 4096 hosts in the group",
    )?;
    let k = Kind::NvmeMulticast {
        device: r.device,
        hosts: r.hosts,
    };
    Ok((r.name, k))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShare {
    name: String,
    #[allow(dead_code)]
    kind: String,
    device: String,
    clients: u32,
    #[serde(default = "depth_one")]
    depth: u16,
    #[serde(default = "lender_ram")]
    sq: String,
}

fn depth_one() -> u16 {
    1
}
fn lender_ram() -> String {
    "lender_ram".into()
}

/// An `nvme_share` workload: many hosts' clients of one controller through SmartIO's
/// distributed driver.
pub(super) fn nvme_share(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawShare = e.read()?;
    e.check(
        (1..=4096).contains(&r.clients),
        &r.name,
        "clients",
        "must be 1 .. 4096 clients (one host each)",
    )?;
    e.check(
        (1..=1024).contains(&r.depth),
        &r.name,
        "depth",
        "must be 1 .. 1024 reads in flight per client",
    )?;
    let sq = SqPlacement::parse(&r.sq).map_err(|m| e.field(&r.name, "sq", &m))?;
    let k = Kind::NvmeShare {
        device: r.device,
        clients: r.clients,
        depth: r.depth,
        sq,
    };
    Ok((r.name, k))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailover {
    name: String,
    #[allow(dead_code)]
    kind: String,
    borrower: String,
    device: String,
    adapters: [String; 2],
    mode: String,
    ios: u64,
    seed: Option<u64>,
}

/// An `nvme_failover` workload: a two-path client of a borrowed controller, under the
/// scenario's faults.
pub(super) fn nvme_failover(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawFailover = e.read()?;
    let mode = match r.mode.as_str() {
        "fail_over" => FailoverMode::FailOver,
        "flap" => FailoverMode::Flap,
        "recreate" => FailoverMode::Recreate,
        other => {
            return Err(e.field(
                &r.name,
                "mode",
                &format!("mode `{other}`: use \"fail_over\" (finish on the backup), \"flap\" (resume the primary when it answers) or \"recreate\" (new queues on the primary)"),
            ))
        }
    };
    e.check(
        (1..=1_000_000).contains(&r.ios),
        &r.name,
        "ios",
        "must be 1 .. 1000000 I/Os",
    )?;
    e.check(
        r.adapters[0] != r.adapters[1],
        &r.name,
        "adapters",
        "the two paths need two adapter pairs",
    )?;
    let k = Kind::NvmeFailover {
        setup: FailoverSetup {
            borrower: r.borrower,
            device: r.device,
            adapters: r.adapters,
        },
        mode,
        ios: r.ios,
        seed: r.seed,
    };
    Ok((r.name, k))
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
        seed: r.seed,
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
