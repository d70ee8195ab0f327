//! The `[[workload]]` and `[measure]` sections of a scenario file, as DESIGN.md shapes
//! them, read with their positions so that every error names file, line, column and key.
//! Which hardware a workload names is checked later, against the loaded fabric.

use std::ops::Range;

use devices::nic::CoalesceMode;
use fabric::keypath::key_of_error;
use fabric::scenario::Source;
use fabric::units::Size;
use fabric::ScenarioError;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use sim::Time;
use systems::tyche;
use toml::Spanned;

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
    },
    /// A PageRank-like memory-bound victim alone on `host`: `threads_per_socket` threads
    /// on every socket, each over its own node's part of the graph.
    PageRank {
        host: String,
        threads_per_socket: u32,
    },
    /// The NUMA/RDMA study's one-sided benchmark between two hosts (`super::rdma`).
    RdmaBench(super::rdma::RdmaBench),
    /// memcached over one-sided RDMA between two hosts (`super::rdma`).
    RdmaMemcached(super::rdma::RdmaMemcached),
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

/// The `NetEnds` of a raw workload table with netperf's host and NIC fields (its
/// `client_nic` defaulting to `nic`, as netperf's).
macro_rules! net_ends {
    ($r:ident) => {
        NetEnds {
            server: $r.server,
            client: $r.client,
            client_nic: $r.client_nic.unwrap_or_else(|| $r.nic.clone()),
            nic: $r.nic,
            cpu_node: $r.cpu_node,
            mem_node: $r.mem_node,
            nic_mode: $r.nic_mode,
            netdev_pf: $r.netdev_pf.0,
        }
    };
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

/// Which side of a TCP_STREAM the server is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum NetDirection {
    Rx,
    Tx,
}

/// The test's name as a file writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
enum RawNetTest {
    #[serde(rename = "TCP_STREAM")]
    TcpStream,
    #[serde(rename = "TCP_RR")]
    TcpRr,
}

/// A PF of a NIC: its index (`1`) or its name (`"pf1"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PfIndex(usize);

impl<'de> Deserialize<'de> for PfIndex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PfIndex, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PfIndex;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a PF index (0, 1, …) or a PF name (\"pf0\", \"pf1\", …)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PfIndex, E> {
                usize::try_from(v)
                    .map(PfIndex)
                    .map_err(|_| E::custom(format!("PF index {v} is negative")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PfIndex, E> {
                usize::try_from(v)
                    .map(PfIndex)
                    .map_err(|_| E::custom(format!("PF index {v} is too large")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PfIndex, E> {
                v.strip_prefix("pf")
                    .and_then(|n| n.parse().ok())
                    .map(PfIndex)
                    .ok_or_else(|| {
                        E::custom(format!(
                            "`{v}` is not a PF: write its index (1) or its name (\"pf1\")"
                        ))
                    })
            }
        }
        d.deserialize_any(V)
    }
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
    outstanding: u32,
}

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

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetperf {
    name: String,
    #[allow(dead_code)]
    kind: String,
    test: RawNetTest,
    /// TCP_STREAM only: the server receives (rx, the default) or sends.
    direction: Option<NetDirection>,
    msg_bytes: Size,
    #[serde(default = "one")]
    connections: u32,
    server: String,
    client: String,
    nic: String,
    /// The client's NIC when its name differs from the server's.
    client_nic: Option<String>,
    cpu_node: u32,
    mem_node: u32,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
    /// "off", "static" or "adaptive".
    coalescing: Option<String>,
    stream_pairs: Option<u32>,
    stream_node: Option<u32>,
    migrate_at_ms: Option<f64>,
    sample_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemcached {
    name: String,
    #[allow(dead_code)]
    kind: String,
    server: String,
    client: String,
    nic: String,
    client_nic: Option<String>,
    cpu_node: u32,
    mem_node: u32,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
    #[serde(default = "memaslap_key_bytes")]
    key_bytes: Size,
    #[serde(default = "memaslap_value_bytes")]
    value_bytes: Size,
    #[serde(default = "memaslap_set_ratio")]
    set_ratio: f64,
    #[serde(default = "memaslap_concurrency")]
    clients: u32,
    #[serde(default = "memaslap_window")]
    keys: u64,
}

// memaslap's documented defaults (libmemcached, docs/bin/memaslap.rst: key size 64,
// value size 1024, get/set 9:1, concurrency 16, window size 10k).
fn memaslap_key_bytes() -> Size {
    Size(64)
}
fn memaslap_value_bytes() -> Size {
    Size(1024)
}
fn memaslap_set_ratio() -> f64 {
    0.1
}
fn memaslap_concurrency() -> u32 {
    16
}
fn memaslap_window() -> u64 {
    host::net::memcached::MEMSLAP_KEYS
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdp {
    name: String,
    #[allow(dead_code)]
    kind: String,
    msg_bytes: Size,
    server: String,
    client: String,
    nic: String,
    client_nic: Option<String>,
    cpu_node: u32,
    mem_node: u32,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
    stream_pairs: Option<u32>,
    stream_node: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTyche {
    name: String,
    kind: String,
    initiator: String,
    target: String,
    nics: u32,
    #[serde(default = "one")]
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPageRank {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    threads_per_socket: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPktgen {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    nic: String,
    cpu_node: u32,
    mem_node: u32,
    pkt_bytes: Size,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
}

/// Most connections a netperf workload may open (the packet model's limit).
pub const MAX_CONNECTIONS: u32 = 256;
/// Largest TCP_RR message (the packet model's limit).
pub const MAX_RR_MSG: u64 = 1 << 20;

/// Largest UDP datagram in one 1500-byte MTU frame (IPv4 and UDP headers off).
pub const MAX_UDP_MSG: u64 = 1500 - 28;
/// A migration's default sampling period of the per-PF counters (issue 11: every 50 ms).
pub const MIGRATION_SAMPLE_MS: f64 = 50.0;

/// Largest single DMA operation a workload may ask for (the model routes every page).
pub const MAX_TRANSFER: u64 = 1 << 30;
/// Largest buffer a DMA workload cycles through.
pub const MAX_BUFFER: u64 = 4 << 30;
/// Most operations or misses a workload may keep in flight.
pub const MAX_IN_FLIGHT: u32 = 1 << 16;
/// Longest measurement window (simulated), so a run stays tractable.
pub const MAX_WINDOW_NS: f64 = 1e9;

/// Line and column (1-based) of a byte offset.
fn locate(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

fn error(src: &Source, span: Range<usize>, key: Option<&str>, msg: &str) -> ScenarioError {
    let (line, col) = if span.is_empty() && span.start == 0 {
        (0, 0)
    } else {
        locate(&src.text, span.start)
    };
    ScenarioError {
        file: src.name.clone(),
        line,
        col,
        key: key.map(str::to_string),
        message: msg.to_string(),
    }
}

/// The text of one `[[workload]]` table on its own.
#[derive(Deserialize)]
struct One<T> {
    workload: Vec<T>,
}

/// Reads the workload table at `span` of `src` as `T`; an error is located where the
/// parser found it (the value, the unknown key, or the table for a missing one) and
/// named under `wkey` (`workload.NAME`), e.g. `workload.rx.transfer_bytes`.
pub(super) fn read_workload<T: DeserializeOwned>(
    src: &Source,
    span: &Range<usize>,
    table: &toml::Table,
    wkey: &str,
) -> Result<T, ScenarioError> {
    // The whole table as the file defines it (a `[workload.x]` sub-table written
    // elsewhere included), for what the table's own text does not show.
    let whole = || {
        toml::Value::Table(table.clone())
            .try_into::<T>()
            .map_err(|e| error(src, span.clone(), Some(wkey), e.message().trim()))
    };
    let body = &src.text[span.clone()];
    // An inline `workload = [{ … }]` entry is a bare inline table.
    let prefix = if body.trim_start().starts_with('{') {
        "workload = ["
    } else {
        ""
    };
    let text = format!("{prefix}{body}{}", if prefix.is_empty() { "" } else { "]" });
    match toml::from_str::<One<T>>(&text) {
        Ok(one) if one.workload.len() == 1 => whole(),
        Ok(_) => Err(error(
            src,
            span.clone(),
            Some(wkey),
            "not one workload table",
        )),
        Err(e) => {
            let at = e.span().map_or(0, |s| s.start);
            let key = key_of_error(&text, at, e.message())
                .map(|k| match k.strip_prefix("workload[0]") {
                    Some(rest) => format!("{wkey}{rest}"),
                    None => wkey.to_string(),
                })
                .unwrap_or_else(|| wkey.to_string());
            let start = (span.start + at)
                .saturating_sub(prefix.len())
                .max(span.start);
            Err(error(src, start..start + 1, Some(&key), e.message().trim()))
        }
    }
}

/// Where the value of `key` is written in the flat table at `span` (the table itself when
/// the key is not written there).
fn value_span(src: &Source, span: &Range<usize>, key: &str) -> Range<usize> {
    let body = &src.text[span.clone()];
    let mut offset = span.start;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(key) {
            let rest_trim = rest.trim_start();
            if let Some(value) = rest_trim.strip_prefix('=') {
                let at = offset + line.len() - value.trim_start().len();
                return at..at + 1;
            }
        }
        offset += line.len();
    }
    span.clone()
}

/// An error at the value of `field` of workload `name` (at its table when not written).
pub(super) fn field_error(
    src: &Source,
    span: &Range<usize>,
    name: &str,
    field: &str,
    msg: &str,
) -> ScenarioError {
    error(
        src,
        value_span(src, span, field),
        Some(&format!("workload.{name}.{field}")),
        msg,
    )
}

/// STREAM antagonists: `stream_pairs` and `stream_node` go together.
fn antagonists(
    pairs: Option<u32>,
    node: Option<u32>,
    field: &dyn Fn(&str, &str) -> ScenarioError,
) -> Result<Option<Antagonists>, ScenarioError> {
    match (pairs, node) {
        (None, None) => Ok(None),
        (Some(pairs), Some(node)) => Ok(Some(Antagonists { pairs, node })),
        (Some(_), None) => Err(field(
            "stream_pairs",
            "STREAM antagonists need `stream_node` too: the memory node they load",
        )),
        (None, Some(_)) => Err(field(
            "stream_node",
            "`stream_node` is the memory node STREAM antagonists load: give `stream_pairs` too",
        )),
    }
}

/// `ms` milliseconds as a simulated time, when finite and within a run's longest window.
fn millis(ms: f64) -> Option<Time> {
    let ns = ms * 1e6;
    (ns.is_finite() && (0.0..=MAX_WINDOW_NS).contains(&ns))
        .then(|| Time::from_ns_f64(ns))
        .flatten()
}

/// "100 us", "1 ms", "250ns", "2 s" (also µs): a duration in simulated time.
pub fn parse_duration(s: &str) -> Result<Time, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: expected e.g. \"100 us\" or \"1 ms\""))?;
    let ns = match unit.trim() {
        "ps" => x / 1000.0,
        "ns" => x,
        "us" | "µs" => x * 1e3,
        "ms" => x * 1e6,
        "s" => x * 1e9,
        "" => return Err(format!("`{s}` has no unit (use ns, us, ms or s)")),
        other => {
            return Err(format!(
                "unknown time unit `{other}` in `{s}` (use ns, us, ms or s)"
            ))
        }
    };
    if !(0.0..=MAX_WINDOW_NS).contains(&ns) {
        return Err(format!("`{s}` is outside 0 .. 1 s of simulated time"));
    }
    Time::from_ns_f64(ns).ok_or_else(|| format!("`{s}` is not a representable time"))
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
    let mut workloads: Vec<Workload> = Vec::new();
    for (i, w) in file.workload.iter().enumerate() {
        let span = w.span();
        let table = w.get_ref();
        let at = error(src, span.clone(), None, "");
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
        let (name, kind) = match kind {
            "dma" => {
                let r: RawDma = read_workload(src, &span, table, &wkey)?;
                let k = Kind::Dma {
                    device: r.device,
                    target: r.target,
                    offset: r.offset.0,
                    op: r.op,
                    transfer_bytes: r.transfer_bytes.0,
                    outstanding: r.outstanding,
                };
                (r.name, k)
            }
            "cpu_stream" => {
                let r: RawStream = read_workload(src, &span, table, &wkey)?;
                let k = Kind::CpuStream {
                    host: r.host,
                    cpu_node: r.cpu_node,
                    mem_node: r.mem_node,
                    op: r.op,
                    misses_in_flight: r.misses_in_flight,
                };
                (r.name, k)
            }
            "ntb_copy" => {
                let r: RawCopy = read_workload(src, &span, table, &wkey)?;
                let k = Kind::NtbCopy {
                    ntb: r.ntb,
                    source: r.source,
                    source_offset: r.source_offset.0,
                    target: r.target,
                    offset: r.offset.0,
                    transfer_bytes: r.transfer_bytes.0,
                    outstanding: r.outstanding,
                };
                (r.name, k)
            }
            "pingpong" => {
                let r: RawPingPong = read_workload(src, &span, table, &wkey)?;
                let ram = match (r.counters, r.ram) {
                    (Counters::HostRam, Some(ram)) => Some(ram),
                    (Counters::GpuMemory, None) => None,
                    (Counters::HostRam, None) => {
                        return Err(error(
                            src,
                            value_span(src, &span, "counters"),
                            Some(&format!("workload.{}.ram", r.name)),
                            "counters in host RAM need `ram` = \"host.ram.nodeN\"",
                        ))
                    }
                    (Counters::GpuMemory, Some(_)) => {
                        return Err(error(
                            src,
                            value_span(src, &span, "ram"),
                            Some(&format!("workload.{}.ram", r.name)),
                            "`ram` is for counters = \"host_ram\"",
                        ))
                    }
                };
                (
                    r.name,
                    Kind::PingPong {
                        a: r.a,
                        b: r.b,
                        ram,
                    },
                )
            }
            "fio" => {
                let r: RawFio = read_workload(src, &span, table, &wkey)?;
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
                (r.name, k)
            }
            "netperf" => {
                let r: RawNetperf = read_workload(src, &span, table, &wkey)?;
                let test = match (r.test, r.direction) {
                    (RawNetTest::TcpStream, d) => NetTest::TcpStream {
                        server_receives: d != Some(NetDirection::Tx),
                    },
                    (RawNetTest::TcpRr, None) => NetTest::TcpRr,
                    (RawNetTest::TcpRr, Some(_)) => {
                        return Err(error(
                            src,
                            value_span(src, &span, "direction"),
                            Some(&format!("workload.{}.direction", r.name)),
                            "`direction` is for TCP_STREAM: a TCP_RR transaction goes both ways",
                        ))
                    }
                };
                let coalescing = match &r.coalescing {
                    None => None,
                    Some(c) => Some(CoalesceMode::parse(c).map_err(|m| {
                        error(
                            src,
                            value_span(src, &span, "coalescing"),
                            Some(&format!("workload.{}.coalescing", r.name)),
                            &m,
                        )
                    })?),
                };
                let field = |f: &str, msg: &str| field_error(src, &span, &r.name, f, msg);
                let streams = antagonists(r.stream_pairs, r.stream_node, &field)?;
                let migration = match (r.migrate_at_ms, r.sample_ms) {
                    (None, None) => None,
                    (None, Some(_)) => {
                        return Err(field(
                            "sample_ms",
                            "`sample_ms` samples a migration: give `migrate_at_ms` too",
                        ))
                    }
                    (Some(at), sample) => {
                        let sample = sample.unwrap_or(MIGRATION_SAMPLE_MS);
                        let lasts = measure.warmup + measure.duration;
                        let at = millis(at)
                            .filter(|t| *t > Time::ZERO && *t < lasts)
                            .ok_or_else(|| {
                                field(
                                    "migrate_at_ms",
                                    &format!(
                                        "must be a time inside the run, 0 .. {} ms (warm-up and window)",
                                        lasts.as_us_f64() / 1e3
                                    ),
                                )
                            })?;
                        let sample = millis(sample)
                            .filter(|t| *t >= Time::from_us(1))
                            .ok_or_else(|| field("sample_ms", "must be 0.001 ms .. 1 s"))?;
                        let rx = test == NetTest::TcpStream {
                            server_receives: true,
                        };
                        if !rx || r.connections != 1 {
                            return Err(field(
                                "migrate_at_ms",
                                "a migration moves the receiver of one TCP_STREAM rx connection",
                            ));
                        }
                        Some(Migration { at, sample })
                    }
                };
                let k = Kind::Netperf {
                    test,
                    coalescing,
                    msg_bytes: r.msg_bytes.0,
                    connections: r.connections,
                    server: r.server,
                    client: r.client,
                    client_nic: r.client_nic.unwrap_or_else(|| r.nic.clone()),
                    nic: r.nic,
                    cpu_node: r.cpu_node,
                    mem_node: r.mem_node,
                    nic_mode: r.nic_mode,
                    netdev_pf: r.netdev_pf.0,
                    streams,
                    migration,
                };
                (r.name, k)
            }
            "memcached" => {
                let r: RawMemcached = read_workload(src, &span, table, &wkey)?;
                let k = Kind::Memcached {
                    ends: net_ends!(r),
                    key_bytes: r.key_bytes.0,
                    value_bytes: r.value_bytes.0,
                    set_ratio: r.set_ratio,
                    clients: r.clients,
                    keys: r.keys,
                };
                (r.name, k)
            }
            "udp_pingpong" => {
                let r: RawUdp = read_workload(src, &span, table, &wkey)?;
                let field = |f: &str, msg: &str| field_error(src, &span, &r.name, f, msg);
                let streams = antagonists(r.stream_pairs, r.stream_node, &field)?;
                let k = Kind::UdpPingPong {
                    ends: net_ends!(r),
                    msg_bytes: r.msg_bytes.0,
                    streams,
                };
                (r.name, k)
            }
            "tyche_fio" | "zmio" => {
                let r: RawTyche = read_workload(src, &span, table, &wkey)?;
                let field = |f: &str, msg: String| field_error(src, &span, &r.name, f, &msg);
                let op = match r.op {
                    Direction::Read => tyche::Op::Read,
                    Direction::Write => tyche::Op::Write,
                };
                let (app_name, default_placement) = match r.kind.as_str() {
                    "zmio" => ("zmio", "zmio"),
                    _ => ("fio", "balanced"),
                };
                let placement = r.placement.as_deref().unwrap_or(default_placement);
                let app = crate::tyche::app(app_name, placement, r.threads, op)
                    .map_err(|e| field("placement", e))?;
                let k = Kind::Tyche {
                    initiator: r.initiator,
                    target: r.target,
                    nics: r.nics,
                    app,
                    block_bytes: r.block_bytes.0,
                    op,
                    initiator_place: crate::tyche::place(&r.initiator_place)
                        .map_err(|e| field("initiator_place", e))?,
                    target_place: crate::tyche::place(&r.target_place)
                        .map_err(|e| field("target_place", e))?,
                    scheduler: crate::tyche::scheduler(&r.scheduler)
                        .map_err(|e| field("scheduler", e))?,
                    target_io: crate::tyche::target_io(&r.target_io)
                        .map_err(|e| field("target_io", e))?,
                };
                (r.name, k)
            }
            "pagerank" => {
                let r: RawPageRank = read_workload(src, &span, table, &wkey)?;
                let k = Kind::PageRank {
                    host: r.host,
                    threads_per_socket: r.threads_per_socket,
                };
                (r.name, k)
            }
            "rdma_bench" | "rdma_memcached" => super::rdma::parse(src, &span, table, &wkey, kind)?,
            "pktgen" => {
                let r: RawPktgen = read_workload(src, &span, table, &wkey)?;
                let k = Kind::Pktgen {
                    host: r.host,
                    nic: r.nic,
                    cpu_node: r.cpu_node,
                    mem_node: r.mem_node,
                    pkt_bytes: r.pkt_bytes.0,
                    nic_mode: r.nic_mode,
                    netdev_pf: r.netdev_pf.0,
                };
                (r.name, k)
            }
            other => {
                return Err(error(
                    src,
                    value_span(src, &span, "kind"),
                    Some(&format!("{wkey}.kind")),
                    &format!(
                    "unknown workload kind `{other}` (known: dma, cpu_stream, ntb_copy, pingpong, fio, netperf, pktgen, memcached, udp_pingpong, pagerank, tyche_fio, zmio, rdma_bench, rdma_memcached)"
                ),
                ))
            }
        };
        let key = |f: &str| format!("workload.{name}.{f}");
        let range = |ok: bool, f: &str, msg: &str| {
            if ok {
                Ok(())
            } else {
                Err(error(src, value_span(src, &span, f), Some(&key(f)), msg))
            }
        };
        match &kind {
            Kind::Dma {
                transfer_bytes,
                outstanding,
                ..
            }
            | Kind::NtbCopy {
                transfer_bytes,
                outstanding,
                ..
            } => {
                range(
                    (1..=MAX_TRANSFER).contains(transfer_bytes),
                    "transfer_bytes",
                    "must be 1 B .. 1 GiB",
                )?;
                range(
                    (1..=MAX_IN_FLIGHT).contains(outstanding),
                    "outstanding",
                    "must be 1 .. 65536 requests in flight",
                )?;
                // The buffer the requests cycle through is routed page by page.
                range(
                    transfer_bytes * *outstanding as u64 <= MAX_BUFFER,
                    "outstanding",
                    "transfer_bytes × outstanding (the buffer the requests cycle through) must stay within 4 GiB",
                )?;
            }
            Kind::PingPong { .. } => {}
            // The device's limits (queue size, MDTS) are checked against it at run time.
            Kind::Fio {
                threads,
                iodepth,
                block_bytes,
                ..
            } => {
                range(*threads >= 1, "threads", "must be at least 1 thread")?;
                range(
                    *iodepth >= 1,
                    "iodepth",
                    "must be at least 1 request in flight",
                )?;
                range(
                    *block_bytes >= 4096 && block_bytes.is_multiple_of(4096),
                    "block_bytes",
                    "must be a whole number of 4 KiB blocks",
                )?;
            }
            // Hosts, NICs, PFs and nodes are checked against the fabric at run time.
            Kind::Netperf {
                test,
                msg_bytes,
                connections,
                ..
            } => {
                range(*msg_bytes >= 1, "msg_bytes", "must be at least 1 byte")?;
                range(
                    (1..=MAX_CONNECTIONS).contains(connections),
                    "connections",
                    "must be 1 .. 256 connections",
                )?;
                if *test == NetTest::TcpRr {
                    range(
                        *msg_bytes <= MAX_RR_MSG,
                        "msg_bytes",
                        "a TCP_RR message must be at most 1 MiB",
                    )?;
                    range(
                        *connections == 1,
                        "connections",
                        "TCP_RR runs one connection (one transaction outstanding)",
                    )?;
                }
            }
            Kind::Memcached {
                key_bytes,
                value_bytes,
                set_ratio,
                clients,
                keys,
                ..
            } => {
                range(
                    (16..=256).contains(key_bytes),
                    "key_bytes",
                    "must be 16 .. 256 bytes (memaslap's shortest key; memcached's 250 bytes and the client's prefix)",
                )?;
                range(
                    (16..=1 << 20).contains(value_bytes),
                    "value_bytes",
                    "must be 16 B .. 1 MiB (a value carries its key and version; memcached's default item size limit)",
                )?;
                range(
                    (0.0..=1.0).contains(set_ratio),
                    "set_ratio",
                    "must be a share of SETs in 0 .. 1",
                )?;
                range(
                    (1..=1024).contains(clients),
                    "clients",
                    "must be 1 .. 1024 memaslap connections",
                )?;
                range(
                    (1..=1 << 24).contains(keys),
                    "keys",
                    "must be 1 .. 16777216 keys",
                )?;
            }
            Kind::UdpPingPong { msg_bytes, .. } => range(
                (1..=MAX_UDP_MSG).contains(msg_bytes),
                "msg_bytes",
                "must be 1 .. 1472 bytes (one datagram in one 1500-byte MTU frame)",
            )?,
            Kind::PageRank {
                threads_per_socket, ..
            } => range(
                (1..=64).contains(threads_per_socket),
                "threads_per_socket",
                "must be 1 .. 64 threads",
            )?,
            // The hosts' NICs and nodes are checked against the fabric at run time.
            Kind::Tyche {
                nics,
                app,
                block_bytes,
                ..
            } => {
                range(*nics >= 1, "nics", "must be at least 1 NIC")?;
                range(
                    (1..=1024).contains(&app.threads),
                    "threads",
                    "must be 1 .. 1024 threads",
                )?;
                range(
                    *block_bytes >= 4096
                        && block_bytes.is_multiple_of(4096)
                        && *block_bytes <= tyche::MAX_REQ_BYTES,
                    "block_bytes",
                    "must be a whole number of 4 KiB blocks, at most 512 KiB (Tyche's largest request)",
                )?;
            }
            // Checked as they were read (`super::rdma::parse`).
            Kind::RdmaBench(_) | Kind::RdmaMemcached(_) => {}
            Kind::Pktgen { pkt_bytes, .. } => range(
                (64..=1518).contains(pkt_bytes),
                "pkt_bytes",
                "must be an Ethernet frame size, 64 .. 1518 bytes",
            )?,
            Kind::CpuStream {
                misses_in_flight, ..
            } => range(
                (1..=MAX_IN_FLIGHT).contains(misses_in_flight),
                "misses_in_flight",
                "must be 1 .. 65536 line misses in flight",
            )?,
        }
        if workloads.iter().any(|w| w.name == name) {
            return Err(error(
                src,
                value_span(src, &span, "name"),
                Some(&key("name")),
                &format!("two workloads are named `{name}`: names must be unique"),
            ));
        }
        if !fabric::scenario::valid_name(&name) {
            return Err(error(
                src,
                value_span(src, &span, "name"),
                Some(&key("name")),
                "workload names use letters, digits, `_` and `-`",
            ));
        }
        workloads.push(Workload { name, kind, at });
    }
    Ok(RunSpec { workloads, measure })
}

#[cfg(test)]
mod tests;
