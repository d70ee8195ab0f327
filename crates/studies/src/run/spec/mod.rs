//! The `[[workload]]` and `[measure]` sections of a scenario file, as docs/workloads.md gives
//! them, read with their positions so that every error names file, line, column and key.
//! Which hardware a workload names is checked later, against the loaded fabric.
//!
//! This module holds what a workload becomes (`Workload`, `Kind` and the types its
//! variants carry), the measurement window, and `parse`, which reads the fields every
//! workload shares and hands its table to the reader of its kind: `tlp` (dma, cpu_stream,
//! ntb_copy, pingpong), `storage` (fio, tyche_fio, zmio), `net` (netperf, pktgen,
//! memcached, udp_pingpong), `victim` (pagerank) and `rdma` (rdma_bench,
//! rdma_memcached). `located` locates errors and reads durations.

mod lending;
mod located;
mod net;
pub mod pciebench;
pub mod rdma;
mod storage;
mod tlp;

pub use storage::Qd1Driver;
mod victim;

#[cfg(test)]
mod tests;

use devices::nic::CoalesceMode;
use fabric::scenario::Source;
use fabric::ScenarioError;
use serde::Deserialize;
use sim::Time;
use systems::tyche;
use toml::Spanned;

use located::{error, field_error, value_span, Entry};
pub use located::{parse_duration, MAX_WINDOW_NS};
pub use net::{MAX_CONNECTIONS, MAX_RR_MSG, MAX_UDP_MSG, MIGRATION_SAMPLE_MS};
pub use tlp::{MAX_BUFFER, MAX_IN_FLIGHT, MAX_TRANSFER};

/// A workload of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub name: String,
    pub kind: Kind,
    /// Where it was written (for errors found against the fabric).
    pub at: ScenarioError,
}

/// Read or write, as a workload says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Read,
    Write,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// pcie-bench's LAT_DMA_* (`pcie_lat`) or BW_DMA_* (`pcie_bw`) on a device against a
    /// host buffer.
    PcieBench(pciebench::PcieBench),
    /// A device keeps `outstanding` DMA requests of `transfer_bytes` in flight to or from
    /// `target` (+`offset`), each split per MPS/MRRS and bounded by the device's tags.
    Dma {
        device: String,
        target: String,
        offset: u64,
        op: Direction,
        transfer_bytes: u64,
        outstanding: u32,
    },
    /// `cores` cores on `cpu_node`, each keeping `misses_in_flight` line misses against
    /// `mem_node`.
    CpuStream {
        host: String,
        cpu_node: u32,
        mem_node: u32,
        op: Direction,
        misses_in_flight: u32,
        cores: u32,
    },
    /// CUDA bandwidthTest's copy by `gpu` into (`Write`) or out of (`Read`) the RAM of
    /// host `user`, whose program borrows the GPU when it is another host's (or runs in a
    /// VM through MDEV); timed once, from the launch until the user sees the copy done.
    GpuCopy {
        gpu: String,
        user: String,
        op: Direction,
        transfer_bytes: u64,
        through: Through,
    },
    /// GPU `a` and GPU `b`, borrowed by a program on host `user` (unless its own), A's
    /// data reaching B straight into its memory or through the user's RAM (`via_ram`):
    /// one copy of `transfer_bytes`, one counter ping-pong round trip and the data path's
    /// shape, each timed once.
    GpuP2p {
        a: String,
        b: String,
        user: String,
        via_ram: bool,
        transfer_bytes: u64,
    },
    /// One CPU store of `host` reaching `target` (a RAM or a BAR at `offset`), timed once
    /// until a core of the target's host polling the line sees it.
    CpuStore {
        host: String,
        target: String,
        offset: u64,
    },
    /// 4 KiB random reads at queue depth 1 on `device` from `host` through `driver`,
    /// `ios` of them timed once as a series (median and p99).
    NvmeQd1 {
        host: String,
        device: String,
        driver: Qd1Driver,
        ios: u64,
        /// The series' own seed; the run's (`--seed`, per workload) when `None`.
        seed: Option<u64>,
    },
    /// One Identify Controller of `device` whose data the controller writes once into a
    /// multicast group of `hosts` hosts (SmartIO's multicast), timed once.
    NvmeMulticast { device: String, hosts: u32 },
    /// `clients` hosts (every host but the controller's, in declaration order) each read
    /// 4 KiB at random at queue depth `depth` from `device` through SmartIO's distributed
    /// driver, their SQs at `sq`; on its own model of the cluster, over the window.
    NvmeShare {
        device: String,
        clients: u32,
        depth: u16,
        sq: systems::smartio::nvme_dist::SqPlacement,
    },
    /// Host `borrower` borrows every device of host `lender` (each lent first, in device
    /// order) until a borrow is refused; timed once.
    BorrowAll { lender: String, borrower: String },
    /// Host `borrower` borrows `device` and maps 4 KiB buffers of its RAM for it, each in
    /// a window of its own, until a mapping is refused; timed once.
    MapWindows { device: String, borrower: String },
    /// Host `borrower` borrows `device`, which writes 4 KiB into the borrower's RAM, read
    /// back by its CPU; timed once.
    LendDma { device: String, borrower: String },
    /// A client of a borrowed controller with a queue pair on each of two adapter pairs,
    /// writing 4 KiB blocks and reading each back at queue depth 8 (`ios` of them) while
    /// the scenario's `[[fault]]`s strike; `mode` says what it does when a path fails.
    /// Timed once, the faults' times counted from the client's start.
    NvmeFailover {
        setup: systems::smartio::failover::FailoverSetup,
        mode: systems::smartio::failover::FailoverMode,
        ios: u64,
        /// The client's own seed; the run's (`--seed`, per workload) when `None`.
        seed: Option<u64>,
    },
    /// Two GPU kernels bounce a counter: A writes B's, B answers in A's. The counters sit
    /// in each GPU's memory, or in `ram` (host RAM, polled by reads).
    PingPong {
        a: String,
        b: String,
        ram: Option<String>,
    },
    /// An NTB adapter's DMA engine copies `transfer_bytes` from `source` to `target`,
    /// `outstanding` copies at a time.
    NtbCopy {
        ntb: String,
        source: String,
        source_offset: u64,
        target: String,
        offset: u64,
        transfer_bytes: u64,
        outstanding: u32,
    },
    /// fio's asynchronous direct I/O on an NVMe device: `threads` jobs on `cpu_node`, each
    /// `iodepth` requests of `block_bytes` in flight through its own queue pair, buffers on
    /// `mem_node`.
    Fio {
        device: String,
        cpu_node: u32,
        mem_node: u32,
        threads: u16,
        iodepth: u16,
        block_bytes: u64,
        op: Direction,
        pattern: Pattern,
        /// The random offsets' draws; `None`: the run's seed.
        seed: Option<u64>,
    },
    /// netperf between the NICs of two hosts: the measured process on `server`, its
    /// core on `cpu_node` and its memory on `mem_node`, `connections` connections each on
    /// a core of its own (TCP_STREAM).
    Netperf {
        test: NetTest,
        msg_bytes: u64,
        connections: u32,
        server: String,
        client: String,
        /// The NIC's device name on the server and on the client.
        nic: String,
        client_nic: String,
        cpu_node: u32,
        mem_node: u32,
        nic_mode: NicMode,
        netdev_pf: usize,
        /// Both hosts' interrupt moderation (`ethtool -C`); `None` is the test's usual
        /// setting: off for TCP_RR (latency tests run without it), static for TCP_STREAM.
        coalescing: Option<CoalesceMode>,
        /// STREAM antagonists beside the server's process.
        streams: Option<Antagonists>,
        /// TCP_STREAM rx: the receiving process moves to the other socket mid-run.
        migration: Option<Migration>,
        /// TCP_RR: the client's process and memory on the socket away from its NIC.
        client_remote: bool,
    },
    /// The in-kernel packet generator on one core of `host`, the same `pkt_bytes` packet
    /// sent again and again.
    Pktgen {
        host: String,
        nic: String,
        cpu_node: u32,
        mem_node: u32,
        pkt_bytes: u64,
        nic_mode: NicMode,
        netdev_pf: usize,
        /// NUMA nodes of the packet's fragments (equal shares of the frame, in order).
        fragment_nodes: Vec<u32>,
        /// The octoNIC reads each fragment through the PF local to its page (IOctoSG).
        ioctosg: bool,
    },
    /// A memcached server instance on one core of `ends.cpu_node`, its items on
    /// `ends.mem_node`, driven by `clients` memaslap connections from the client with one
    /// request outstanding each: `key_bytes` keys, `value_bytes` values drawn from `keys`
    /// keys, a `set_ratio` share of SETs.
    Memcached {
        ends: NetEnds,
        key_bytes: u64,
        value_bytes: u64,
        set_ratio: f64,
        clients: u32,
        keys: u64,
        /// The clients' draws; `None`: the run's seed.
        seed: Option<u64>,
        /// Server instances, each on a core of `ends.cpu_node` with `clients` connections
        /// (0: idle).
        instances: u32,
    },
    /// sockperf ping-pong over UDP: one datagram of `msg_bytes` outstanding, the server's
    /// process on a core of `ends.cpu_node`, interrupt coalescing off.
    UdpPingPong {
        ends: NetEnds,
        msg_bytes: u64,
        streams: Option<Antagonists>,
    },
    /// Tyche (`systems::tyche`) from `initiator` to `target` over their first `nics` NICs,
    /// driven by FIO (`tyche_fio`) or zmIO (`zmio`) threads issuing `block_bytes` requests.
    Tyche {
        initiator: String,
        target: String,
        nics: u32,
        app: tyche::App,
        block_bytes: u64,
        op: tyche::Op,
        initiator_place: tyche::Place,
        target_place: tyche::Place,
        scheduler: tyche::Scheduler,
        target_io: tyche::TargetIo,
        /// Which context takes received frames (`polling` unless the file says).
        rx: tyche::RxPath,
        /// The NICs' interrupt moderation (the driver's default unless the file says).
        coalescing: devices::nic::CoalesceMode,
    },
    /// A PageRank-like memory-bound victim alone on `host`: `threads_per_socket` threads
    /// on every socket, each over its own node's part of the graph.
    PageRank {
        host: String,
        threads_per_socket: u32,
        /// It starts this long before the window (`None`: with the run).
        warmup: Option<Time>,
        /// Its graph's draws; `None`: the run's seed.
        seed: Option<u64>,
    },
    /// The NUMA/RDMA study's one-sided benchmark between two hosts (`rdma`).
    RdmaBench(rdma::RdmaBench),
    /// memcached over one-sided RDMA between two hosts (`rdma`).
    RdmaMemcached(rdma::RdmaMemcached),
}

/// The two hosts of a network workload and where its server side runs (as `Netperf`'s
/// fields of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct NetEnds {
    pub server: String,
    pub client: String,
    pub nic: String,
    pub client_nic: String,
    pub cpu_node: u32,
    pub mem_node: u32,
    pub nic_mode: NicMode,
    pub netdev_pf: usize,
}

/// STREAM antagonists on the server: `pairs` pairs of cores (one reading, one writing)
/// on the other cores of the workload's socket, against memory node `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Antagonists {
    pub pairs: u32,
    pub node: u32,
}

/// The scheduler moves a TCP_STREAM receiver to the next socket at `at` (from the start
/// of the run); each PF's received bytes are sampled every `sample`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migration {
    pub at: Time,
    pub sample: Time,
    /// Windows (from the start of the run, whole samples) over which `before_gbit_s` and
    /// `after_gbit_s` average the received payload.
    pub before: Option<(Time, Time)>,
    pub after: Option<(Time, Time)>,
}

/// A netperf test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetTest {
    /// TCP_STREAM, bulk transfer; the server receives (`rx`) or sends (`tx`).
    TcpStream { server_receives: bool },
    /// TCP_RR, a request and a response of `msg_bytes`, one transaction outstanding.
    TcpRr,
}

/// How the server's NIC presents its PFs (docs/hardware.md §1): each PF its own netdev, or
/// the octoNIC's one netdev steered to the PF local to the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NicMode {
    Standard,
    Octonic,
    /// Linux's multi-PF netdev (mlx5 socket direct): one netdev, channels spread over the
    /// PFs, XPS and ARFS to the PF local to the thread.
    #[serde(rename = "linux_multipf")]
    LinuxMultiPf,
}

/// Where a fio job's requests go in the namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Random,
    Sequential,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Dma { .. } => "dma",
            Kind::PcieBench(p) if p.test.is_latency() => "pcie_lat",
            Kind::PcieBench(_) => "pcie_bw",
            Kind::CpuStream { .. } => "cpu_stream",
            Kind::NtbCopy { .. } => "ntb_copy",
            Kind::GpuCopy { .. } => "gpu_copy",
            Kind::GpuP2p { .. } => "gpu_p2p",
            Kind::CpuStore { .. } => "cpu_store",
            Kind::NvmeQd1 { .. } => "nvme_qd1",
            Kind::NvmeMulticast { .. } => "nvme_multicast",
            Kind::NvmeShare { .. } => "nvme_share",
            Kind::BorrowAll { .. } => "borrow_all",
            Kind::MapWindows { .. } => "map_windows",
            Kind::LendDma { .. } => "lend_dma",
            Kind::NvmeFailover { .. } => "nvme_failover",
            Kind::PingPong { .. } => "pingpong",
            Kind::Fio { .. } => "fio",
            Kind::Netperf { .. } => "netperf",
            Kind::Pktgen { .. } => "pktgen",
            Kind::Memcached { .. } => "memcached",
            Kind::UdpPingPong { .. } => "udp_pingpong",
            Kind::PageRank { .. } => "pagerank",
            Kind::RdmaBench(_) => "rdma_bench",
            Kind::RdmaMemcached(_) => "rdma_memcached",
            Kind::Tyche {
                app:
                    tyche::App {
                        kind: tyche::AppKind::Fio,
                        ..
                    },
                ..
            } => "tyche_fio",
            Kind::Tyche { .. } => "zmio",
        }
    }
}

/// How a host's program reaches a GPU: as a device of its own or lent to it (SmartIO
/// lending), or from a VM on that host through MDEV (a 4 GiB guest on 2 MiB pages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Through {
    Lending,
    Mdev,
}

/// The measurement window in simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measure {
    pub warmup: Time,
    pub duration: Time,
}

/// Every workload kind.
const KINDS: &[&str] = &[
    "dma",
    "pcie_lat",
    "pcie_bw",
    "cpu_stream",
    "ntb_copy",
    "gpu_copy",
    "gpu_p2p",
    "cpu_store",
    "nvme_qd1",
    "nvme_multicast",
    "nvme_share",
    "borrow_all",
    "map_windows",
    "lend_dma",
    "nvme_failover",
    "pingpong",
    "fio",
    "netperf",
    "pktgen",
    "memcached",
    "udp_pingpong",
    "pagerank",
    "tyche_fio",
    "zmio",
    "rdma_bench",
    "rdma_memcached",
];

/// Every kind, quoted, the last after "or".
fn kinds_quoted() -> String {
    let q: Vec<String> = KINDS.iter().map(|k| format!("\"{k}\"")).collect();
    let (last, rest) = q.split_last().expect("kinds");
    format!("{} or {last}", rest.join(", "))
}

/// How a run measures its workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// All together over a warm-up and a window of simulated time.
    Window(Measure),
    /// Each workload's one operation (a copy, a transfer), timed alone from its start to
    /// its end on fresh hardware: `[measure] once = true`.
    Once,
}

/// What `nudma run` needs of a scenario besides its hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub workloads: Vec<Workload>,
    pub timing: Timing,
    /// `[measure] apart`: each workload runs alone on its own copy of the hardware, as
    /// when they are measured one at a time; otherwise they run together.
    pub apart: bool,
}

impl RunSpec {
    /// The window of a windowed run; `None` for `once`.
    pub fn window(&self) -> Option<Measure> {
        match self.timing {
            Timing::Window(m) => Some(m),
            Timing::Once => None,
        }
    }
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    workload: Vec<Spanned<toml::Table>>,
    measure: Option<Spanned<RawMeasure>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMeasure {
    warmup: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    once: Option<Spanned<bool>>,
    apart: Option<Spanned<bool>>,
}

/// The `[measure]` table of a scenario file: a window, or `once`.
fn measure(src: &Source, file: &File) -> Result<Timing, ScenarioError> {
    const GIVE: &str = "give `warmup` and `duration` (simulated time, e.g. \"100 us\"), or `once = true` to time each workload's one operation";
    let measure = file
        .measure
        .as_ref()
        .ok_or_else(|| error(src, 0..0, None, &format!("no [measure] table: {GIVE}")))?;
    let m = measure.get_ref();
    if let (Some(apart), Some(_)) = (&m.apart, &m.once) {
        return Err(error(
            src,
            apart.span(),
            Some("measure.apart"),
            "`once = true` already times each workload alone: `apart` is for a window",
        ));
    }
    if let Some(once) = &m.once {
        if let Some(extra) = m.warmup.as_ref().or(m.duration.as_ref()) {
            return Err(error(
                src,
                extra.span(),
                Some("measure"),
                "`once = true` times one operation per workload: it takes no `warmup` or `duration`",
            ));
        }
        if !once.get_ref() {
            return Err(error(
                src,
                once.span(),
                Some("measure.once"),
                &format!("`once = false` is the default: {GIVE}"),
            ));
        }
        return Ok(Timing::Once);
    }
    let (Some(warmup), Some(duration)) = (&m.warmup, &m.duration) else {
        return Err(error(src, measure.span(), Some("measure"), GIVE));
    };
    let time = |v: &Spanned<String>, key: &str| {
        parse_duration(v.get_ref()).map_err(|msg| error(src, v.span(), Some(key), &msg))
    };
    let measure = Measure {
        warmup: time(warmup, "measure.warmup")?,
        duration: time(duration, "measure.duration")?,
    };
    if measure.duration == Time::ZERO {
        return Err(error(
            src,
            duration.span(),
            Some("measure.duration"),
            "the measurement window must be longer than zero",
        ));
    }
    Ok(Timing::Window(measure))
}

/// Reads the workloads and measurement window of a scenario source. A scenario without
/// workloads is an error for `run` (it has nothing to simulate).
pub fn parse(src: &Source) -> Result<RunSpec, ScenarioError> {
    let file: File = toml::from_str(&src.text)
        .map_err(|e| error(src, e.span().unwrap_or(0..0), None, e.message()))?;
    if file.workload.is_empty() {
        return Err(error(
            src,
            0..0,
            None,
            "no [[workload]] to run (see docs/workloads.md)",
        ));
    }
    let timing = measure(src, &file)?;
    let apart = file
        .measure
        .as_ref()
        .and_then(|m| m.get_ref().apart.as_ref())
        .is_some_and(|a| *a.get_ref());
    let mut workloads: Vec<Workload> = Vec::new();
    for (i, w) in file.workload.iter().enumerate() {
        let span = w.span();
        let at = error(src, span.clone(), None, "");
        let (name, kind) = workload(src, i, w, timing)?;
        if workloads.iter().any(|w| w.name == name) {
            return Err(field_error(
                src,
                &span,
                &name,
                "name",
                &format!("two workloads are named `{name}`: names must be unique"),
            ));
        }
        if !fabric::scenario::valid_name(&name) {
            return Err(field_error(
                src,
                &span,
                &name,
                "name",
                "workload names use letters, digits, `_` and `-`",
            ));
        }
        workloads.push(Workload { name, kind, at });
    }
    Ok(RunSpec {
        workloads,
        timing,
        apart,
    })
}

/// The name and kind of `w`, the `i`th `[[workload]]` table, read by its kind's reader
/// (which checks the kind's fields and their ranges).
fn workload(
    src: &Source,
    i: usize,
    w: &Spanned<toml::Table>,
    timing: Timing,
) -> Result<(String, Kind), ScenarioError> {
    let span = w.span();
    let table = w.get_ref();
    // Named as `--set` names it, by its name; by position when it has none.
    let wkey = match table.get("name").and_then(|n| n.as_str()) {
        Some(n) => format!("workload.{n}"),
        None => format!("workload[{i}]"),
    };
    let kind = table.get("kind").and_then(|k| k.as_str()).ok_or_else(|| {
        error(
            src,
            value_span(src, &span, "kind"),
            Some(&format!("{wkey}.kind")),
            &format!("a workload needs `kind` = {}", kinds_quoted()),
        )
    })?;
    // A kind is timed over a window, or once (its one operation), or either.
    let once_only = [
        "gpu_copy",
        "gpu_p2p",
        "cpu_store",
        "nvme_qd1",
        "nvme_multicast",
        "borrow_all",
        "map_windows",
        "lend_dma",
        "nvme_failover",
    ]
    .contains(&kind);
    let either = ["ntb_copy"].contains(&kind);
    let measure = match timing {
        Timing::Window(m) if !once_only => m,
        Timing::Once if once_only || either => Measure {
            warmup: Time::ZERO,
            duration: Time::ZERO,
        },
        _ if KINDS.contains(&kind) => {
            let msg = if once_only {
                format!("a `{kind}` workload is one operation: time it with [measure] once = true")
            } else {
                format!("a `{kind}` workload runs over a window: give [measure] warmup and duration (once = true times only ntb_copy and the single operations: gpu_copy, gpu_p2p, cpu_store, nvme_qd1, nvme_multicast, borrow_all, map_windows, lend_dma, nvme_failover)")
            };
            return Err(error(
                src,
                value_span(src, &span, "kind"),
                Some(&format!("{wkey}.kind")),
                &msg,
            ));
        }
        // An unknown kind: refused below.
        _ => Measure {
            warmup: Time::ZERO,
            duration: Time::ZERO,
        },
    };
    let e = Entry {
        src,
        span,
        table,
        wkey,
    };
    match kind {
        "dma" => tlp::dma(&e),
        "pcie_lat" | "pcie_bw" => pciebench::pcie_bench(&e),
        "cpu_stream" => tlp::cpu_stream(&e),
        "ntb_copy" => tlp::ntb_copy(&e),
        "pingpong" => tlp::pingpong(&e),
        "fio" => storage::fio(&e),
        "tyche_fio" | "zmio" => storage::tyche(&e),
        "netperf" => net::netperf(&e, &measure),
        "gpu_copy" => tlp::gpu_copy(&e),
        "gpu_p2p" => tlp::gpu_p2p(&e),
        "cpu_store" => tlp::cpu_store(&e),
        "nvme_qd1" => storage::nvme_qd1(&e),
        "nvme_multicast" => storage::nvme_multicast(&e),
        "nvme_share" => storage::nvme_share(&e),
        "borrow_all" => lending::borrow_all(&e),
        "map_windows" | "lend_dma" => lending::device(&e, kind),
        "nvme_failover" => storage::nvme_failover(&e),
        "pktgen" => net::pktgen(&e),
        "memcached" => net::memcached(&e),
        "udp_pingpong" => net::udp_pingpong(&e),
        "pagerank" => victim::pagerank(&e),
        // Checked as they are read.
        "rdma_bench" | "rdma_memcached" => rdma::parse(src, &e.span, table, &e.wkey, kind),
        other => Err(error(
            src,
            value_span(src, &e.span, "kind"),
            Some(&format!("{}.kind", e.wkey)),
            &format!(
                "unknown workload kind `{other}` (known: {})",
                KINDS.join(", ")
            ),
        )),
    }
}
