//! The `[[workload]]` and `[measure]` sections of a scenario file, as DESIGN.md shapes
//! them, read with their positions so that every error names file, line, column and key.
//! Which hardware a workload names is checked later, against the loaded fabric.
//!
//! This module holds what a workload becomes (`Workload`, `Kind` and the types its
//! variants carry), the measurement window, and `parse`, which reads the fields every
//! workload shares and hands its table to the reader of its kind: `tlp` (dma, cpu_stream,
//! ntb_copy, pingpong), `storage` (fio, tyche_fio, zmio), `net` (netperf, pktgen,
//! memcached, udp_pingpong), `victim` (pagerank) and `rdma` (rdma_bench,
//! rdma_memcached). `located` locates errors and reads durations.

mod located;
mod net;
pub mod rdma;
mod storage;
mod tlp;
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
    /// Cores on `cpu_node` keep `misses_in_flight` line misses against `mem_node`.
    CpuStream {
        host: String,
        cpu_node: u32,
        mem_node: u32,
        op: Direction,
        misses_in_flight: u32,
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
    /// Windows (from the start of the run, whole samples) over which `before_gbps` and
    /// `after_gbps` average the received payload.
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

/// How the server's NIC presents its PFs (REFERENCE.md §1): each PF its own netdev, or
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
            Kind::CpuStream { .. } => "cpu_stream",
            Kind::NtbCopy { .. } => "ntb_copy",
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

/// The measurement window in simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measure {
    pub warmup: Time,
    pub duration: Time,
}

/// What `nudma run` needs of a scenario besides its hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub workloads: Vec<Workload>,
    pub measure: Measure,
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
    warmup: Spanned<String>,
    duration: Spanned<String>,
}

/// The `[measure]` window of a scenario file.
fn measure(src: &Source, file: &File) -> Result<Measure, ScenarioError> {
    let measure = file.measure.as_ref().ok_or_else(|| {
        error(
            src,
            0..0,
            None,
            "no [measure] table: give `warmup` and `duration` (simulated time, e.g. \"100 us\")",
        )
    })?;
    let m = measure.get_ref();
    let time = |v: &Spanned<String>, key: &str| {
        parse_duration(v.get_ref()).map_err(|msg| error(src, v.span(), Some(key), &msg))
    };
    let measure = Measure {
        warmup: time(&m.warmup, "measure.warmup")?,
        duration: time(&m.duration, "measure.duration")?,
    };
    if measure.duration == Time::ZERO {
        return Err(error(
            src,
            m.duration.span(),
            Some("measure.duration"),
            "the measurement window must be longer than zero",
        ));
    }
    Ok(measure)
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
            "no [[workload]] to run (see README: \"Describing your own workloads\")",
        ));
    }
    let measure = measure(src, &file)?;
    let mut workloads: Vec<Workload> = Vec::new();
    for (i, w) in file.workload.iter().enumerate() {
        let span = w.span();
        let at = error(src, span.clone(), None, "");
        let (name, kind) = workload(src, i, w, &measure)?;
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
    Ok(RunSpec { workloads, measure })
}

/// The name and kind of `w`, the `i`th `[[workload]]` table, read by its kind's reader
/// (which checks the kind's fields and their ranges).
fn workload(
    src: &Source,
    i: usize,
    w: &Spanned<toml::Table>,
    measure: &Measure,
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
            "a workload needs `kind` = \"dma\", \"cpu_stream\", \"ntb_copy\", \"pingpong\", \"fio\", \"netperf\", \"pktgen\", \"memcached\", \"udp_pingpong\", \"pagerank\", \"tyche_fio\", \"zmio\", \"rdma_bench\" or \"rdma_memcached\"",
        )
    })?;
    let e = Entry {
        src,
        span,
        table,
        wkey,
    };
    match kind {
        "dma" => tlp::dma(&e),
        "cpu_stream" => tlp::cpu_stream(&e),
        "ntb_copy" => tlp::ntb_copy(&e),
        "pingpong" => tlp::pingpong(&e),
        "fio" => storage::fio(&e),
        "tyche_fio" | "zmio" => storage::tyche(&e),
        "netperf" => net::netperf(&e, measure),
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
                "unknown workload kind `{other}` (known: dma, cpu_stream, ntb_copy, pingpong, fio, netperf, pktgen, memcached, udp_pingpong, pagerank, tyche_fio, zmio, rdma_bench, rdma_memcached)"
            ),
        )),
    }
}
