//! The one-sided RDMA workloads' schemas: `rdma_bench` (the NUMA/RDMA study's benchmark)
//! and `rdma_memcached` (memcached over one-sided RDMA), read with their defaults (the
//! study's) and range checks; `run::rdma` runs them.

use std::ops::Range;

use devices::rnic::Verb;
use fabric::scenario::Source;
use fabric::units::Size;
use fabric::ScenarioError;
use host::rdma::load;
use host::rdma::memcached::Placement;
use host::rdma::workers::Mix;
use serde::Deserialize;

use super::located::{field_error, read_workload};
use super::Kind;

/// Path MTU unless the file says (the NUMA/RDMA study's, docs/hardware.md §4).
pub const MTU: u32 = 256;
/// `max_rd_atomic` of every QP (the study's: one READ outstanding per QP).
pub const MAX_RD_ATOMIC: u32 = 1;
/// Closed loop: operations per connection before and during the measurement unless the
/// file says. The model's only variance is the poll loop's phase (a few tens of ns,
/// seeded), so a mean settles within the first hundreds.
const CLOSED_WARMUP: u64 = 1000;
const CLOSED_OPS: u64 = 2000;
/// Open loop: work requests a client thread keeps unfinished unless the file says
/// (assumption: perftest's default send-queue depth of 128; the study gives none).
const OPEN_DEPTH: u32 = 128;

/// Connections of one workload: one QP and one client thread each. Beyond the RNIC's
/// cached QP contexts the model fetches contexts by DMA (its cost, not a refusal); the
/// bound keeps a run's client threads within a large host's.
const MAX_CONNECTIONS: u32 = 256;

/// The benchmark as a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct RdmaBench {
    pub client: String,
    pub server: String,
    pub rnic: String,
    pub verb: Verb,
    pub bytes: u64,
    pub connections: u32,
    pub mtu: u32,
    /// Open loop (throughput) or closed (latency).
    pub open: bool,
    pub depth: u32,
    /// Open loop: equal windows the `[measure]` duration is cut into (the deviation of
    /// the system rate is taken over them).
    pub samples: u32,
    /// Closed loop: operations per connection before and during the measurement.
    pub warmup_ops: u64,
    pub ops: u64,
    /// The server's region away from its RNIC's node.
    pub server_remote: bool,
    pub load: load::Placement,
    pub load_elems: u64,
    /// Server threads storing to or loading the region's own lines, on its node.
    pub workers: u32,
    pub worker_mix: Mix,
}

/// memcached over one-sided RDMA as a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct RdmaMemcached {
    pub client: String,
    pub server: String,
    pub rnic: String,
    pub connections: u32,
    pub get_ratio: f64,
    pub value_bytes: u64,
    pub placement: Placement,
    pub load: load::Placement,
    pub load_elems: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBench {
    name: String,
    #[allow(dead_code)]
    kind: String,
    client: String,
    server: String,
    #[serde(default = "rnic")]
    rnic: String,
    verb: String,
    #[serde(default = "sixty_four")]
    bytes: Size,
    connections: u32,
    #[serde(default = "mtu")]
    mtu: u32,
    #[serde(default = "closed")]
    mode: String,
    #[serde(default = "depth")]
    depth: u32,
    #[serde(default = "one")]
    samples: u32,
    #[serde(default = "warmup_ops")]
    warmup_ops: u64,
    #[serde(default = "ops")]
    ops: u64,
    #[serde(default = "local")]
    server_placement: String,
    #[serde(default = "none")]
    load: String,
    #[serde(default = "load_elems")]
    load_elems: u64,
    #[serde(default)]
    workers: u32,
    #[serde(default = "w90")]
    worker_mix: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemcached {
    name: String,
    #[allow(dead_code)]
    kind: String,
    client: String,
    server: String,
    #[serde(default = "rnic")]
    rnic: String,
    connections: u32,
    #[serde(default = "get_ratio")]
    get_ratio: f64,
    #[serde(default = "sixty_four")]
    value_bytes: Size,
    #[serde(default = "both_local")]
    placement: String,
    #[serde(default = "none")]
    load: String,
    #[serde(default = "load_elems")]
    load_elems: u64,
}

// The study's settings (docs/hardware.md §4, docs/studies.md), as the experiments use them.
fn rnic() -> String {
    "rnic".into()
}
fn sixty_four() -> Size {
    Size(64)
}
fn mtu() -> u32 {
    MTU
}
fn closed() -> String {
    "closed".into()
}
fn depth() -> u32 {
    OPEN_DEPTH
}
fn one() -> u32 {
    1
}
fn warmup_ops() -> u64 {
    CLOSED_WARMUP
}
fn ops() -> u64 {
    CLOSED_OPS
}
fn w90() -> String {
    "w90".into()
}
fn local() -> String {
    "local".into()
}
fn none() -> String {
    "none".into()
}
/// Elements of each load thread's buffer unless the file says: 10^8, far beyond the LLC
/// (`rdma.independent_load`'s size, which loads DRAM and sweeps the LLC).
fn load_elems() -> u64 {
    100_000_000
}
/// GETs among memcached's operations unless the file says (`rdma.memcached`'s 90 %).
fn get_ratio() -> f64 {
    0.9
}

/// The load words of a workload, as `host::rdma::load` places the threads: bound to the
/// server RNIC's node (`rnic_node`, the study's `bound_local`) or the other (`other_node`,
/// `bound_remote`).
fn load_placement(word: &str) -> Result<load::Placement, String> {
    match word {
        "none" => Ok(load::Placement::None),
        "unbound" => Ok(load::Placement::Unbound),
        "rnic_node" | "bound_local" => Ok(load::Placement::BoundLocal),
        "other_node" | "bound_remote" => Ok(load::Placement::BoundRemote),
        _ => Err(format!(
            "load `{word}`: use \"none\", \"unbound\", \"rnic_node\" (or \"bound_local\") or \"other_node\" (or \"bound_remote\")"
        )),
    }
}
fn both_local() -> String {
    "both_local".into()
}

/// The verb words of `rdma_bench`: the atomics swap 0 for 1 and add 1.
fn verb(word: &str) -> Result<Verb, String> {
    match word {
        "cas" => Ok(Verb::CompareSwap {
            compare: 0,
            swap: 1,
        }),
        "faa" => Ok(Verb::FetchAdd { add: 1 }),
        "read" | "write" => Verb::parse(word),
        _ => Err(format!(
            "verb `{word}`: use \"read\", \"write\", \"cas\" or \"faa\""
        )),
    }
}

/// Reads an `rdma_bench` or `rdma_memcached` table (`kind`), its values checked and any
/// error located at the value.
pub fn parse(
    src: &Source,
    span: &Range<usize>,
    table: &toml::Table,
    wkey: &str,
    kind: &str,
) -> Result<(String, Kind), ScenarioError> {
    if kind == "rdma_bench" {
        let r: RawBench = read_workload(src, span, table, wkey)?;
        let field = |f: &str, msg: String| field_error(src, span, &r.name, f, &msg);
        let verb = verb(&r.verb).map_err(|e| field("verb", e))?;
        let open = match r.mode.as_str() {
            "open" => true,
            "closed" => false,
            m => {
                return Err(field(
                    "mode",
                    format!("mode `{m}`: use \"closed\" or \"open\""),
                ))
            }
        };
        let server_remote = match r.server_placement.as_str() {
            "remote" => true,
            "local" => false,
            p => {
                return Err(field(
                    "server_placement",
                    format!(
                    "server_placement `{p}`: use \"local\" or \"remote\" (to the server's RNIC)"
                ),
                ))
            }
        };
        if !(1..=MAX_CONNECTIONS).contains(&r.connections) {
            return Err(field(
                "connections",
                format!("must be 1 .. {MAX_CONNECTIONS} connections (one QP and one client thread each)"),
            ));
        }
        let bytes = r.bytes.0;
        if verb.is_atomic() && bytes != 8 {
            return Err(field("bytes", "an atomic moves 8 bytes".into()));
        }
        if !(1..=1 << 30).contains(&bytes) {
            return Err(field("bytes", "must be 1 B .. 1 GiB".into()));
        }
        if open && !(1..=1024).contains(&r.depth) {
            return Err(field("depth", "must be 1 .. 1024 work requests".into()));
        }
        if !(1..=1000).contains(&r.samples) {
            return Err(field(
                "samples",
                "must be 1 .. 1000 windows of the [measure] duration".into(),
            ));
        }
        if !(1..=100_000_000).contains(&r.ops) || r.warmup_ops > 100_000_000 {
            let f = if r.warmup_ops > 100_000_000 {
                "warmup_ops"
            } else {
                "ops"
            };
            return Err(field(
                f,
                "must be 1 .. 10^8 operations per connection (warmup_ops may be 0)".into(),
            ));
        }
        let load = load_placement(&r.load).map_err(|e| field("load", e))?;
        let worker_mix = Mix::parse(&r.worker_mix).map_err(|e| field("worker_mix", e))?;
        if r.workers > 1024 {
            return Err(field(
                "workers",
                "must be 0 .. 1024 server threads (the host's hardware threads bound it further)"
                    .into(),
            ));
        }
        if r.workers > 0 && load != load::Placement::None {
            return Err(field(
                "workers",
                "one kind of server thread per benchmark: set `workers` or `load`, not both".into(),
            ));
        }
        let k = Kind::RdmaBench(RdmaBench {
            client: r.client,
            server: r.server,
            rnic: r.rnic,
            verb,
            bytes,
            connections: r.connections,
            mtu: r.mtu,
            open,
            depth: r.depth,
            samples: r.samples,
            warmup_ops: r.warmup_ops,
            ops: r.ops,
            server_remote,
            load,
            load_elems: r.load_elems,
            workers: r.workers,
            worker_mix,
        });
        return Ok((r.name, k));
    }
    let r: RawMemcached = read_workload(src, span, table, wkey)?;
    let field = |f: &str, msg: String| field_error(src, span, &r.name, f, &msg);
    if !(1..=MAX_CONNECTIONS).contains(&r.connections) {
        return Err(field(
            "connections",
            format!("must be 1 .. {MAX_CONNECTIONS} clients (one QP each)"),
        ));
    }
    if !(0.0..=1.0).contains(&r.get_ratio) {
        return Err(field(
            "get_ratio",
            "must be a share of GETs in 0 .. 1".into(),
        ));
    }
    if !(1..=4096).contains(&r.value_bytes.0) {
        return Err(field("value_bytes", "must be 1 B .. 4 KiB".into()));
    }
    let placement = Placement::parse(&r.placement).map_err(|e| field("placement", e))?;
    let load = load_placement(&r.load).map_err(|e| field("load", e))?;
    let k = Kind::RdmaMemcached(RdmaMemcached {
        client: r.client,
        server: r.server,
        rnic: r.rnic,
        connections: r.connections,
        get_ratio: r.get_ratio,
        value_bytes: r.value_bytes.0,
        placement,
        load,
        load_elems: r.load_elems,
    });
    Ok((r.name, k))
}
