//! The one-sided RDMA workloads of `nudma run`: the NUMA/RDMA study's benchmark
//! (`rdma_bench`, `host::rdma::bench`) and memcached over one-sided RDMA
//! (`rdma_memcached`, `host::rdma::memcached`), each between two hosts' RNICs, with the
//! independent load of `rdma.independent_load` on the server if asked.
//!
//! Like the network workloads, an RDMA workload runs on its own model of its two hosts
//! (memory systems and RNICs), not on the TLP-level fabric the DMA workloads share. An
//! open-loop benchmark and memcached count operations over the `[measure]` window after
//! its warm-up; a closed-loop benchmark runs the study's operation counts
//! (`crate::rdma::CLOSED_WARMUP`, `CLOSED_OPS`) per connection instead.

use std::ops::Range;

use devices::rnic::Verb;
use fabric::scenario::Source;
use fabric::units::Size;
use fabric::{ScenarioError, Topology};
use host::rdma::agents::ServerAgents;
use host::rdma::bench::{self, BenchSpec, Mode};
use host::rdma::load::{self, IndependentLoad, LoadSpec, LOAD_THREADS};
use host::rdma::memcached::{self, McSpec, Placement, KEYS};
use host::rdma::RdmaHost;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::net::NetOutcome;
use super::spec::{field_error, read_workload, Kind, Measure};
use crate::rdma::memcached::{load_placement, LOAD_ELEMS};
use crate::rdma::{CLOSED_OPS, CLOSED_WARMUP, MAX_RD_ATOMIC, MTU, OPEN_DEPTH};

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
    /// The server's region away from its RNIC's node.
    pub server_remote: bool,
    pub load: load::Placement,
    pub load_elems: u64,
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
    #[serde(default = "local")]
    server_placement: String,
    #[serde(default = "none")]
    load: String,
    #[serde(default = "load_elems")]
    load_elems: u64,
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

// The study's settings (REFERENCE.md §4, EXPERIMENTS.md), as the experiments use them.
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
fn local() -> String {
    "local".into()
}
fn none() -> String {
    "none".into()
}
fn load_elems() -> u64 {
    LOAD_ELEMS
}
fn get_ratio() -> f64 {
    crate::rdma::memcached::GET_RATIO
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
        if !(1..=30).contains(&r.connections) {
            return Err(field(
                "connections",
                "must be 1 .. 30 connections (one QP each, within the RNIC's 31 cached contexts)"
                    .into(),
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
        let load = load_placement(&r.load).map_err(|e| field("load", e))?;
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
            server_remote,
            load,
            load_elems: r.load_elems,
        });
        return Ok((r.name, k));
    }
    let r: RawMemcached = read_workload(src, span, table, wkey)?;
    let field = |f: &str, msg: String| field_error(src, span, &r.name, f, &msg);
    if !(1..=30).contains(&r.connections) {
        return Err(field(
            "connections",
            "must be 1 .. 30 clients (one QP each, within the RNIC's 31 cached contexts)".into(),
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

fn metrics(fields: &[(&str, f64)]) -> Map<String, Value> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

/// The `q` quantile (nearest rank) of `xs`.
fn quantile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let i = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    xs[i]
}

fn start_load(
    server: &mut RdmaHost,
    placement: load::Placement,
    elems: u64,
) -> Result<IndependentLoad, String> {
    IndependentLoad::start(
        server,
        LoadSpec {
            threads: LOAD_THREADS,
            elems,
            placement,
        },
    )
}

/// Runs an RDMA workload over `m`'s window.
pub fn run(topo: &Topology, kind: &Kind, m: Measure, seed: u64) -> Result<NetOutcome, String> {
    match kind {
        Kind::RdmaBench(b) => {
            let mut client = RdmaHost::new(topo, &b.client, &b.rnic)?;
            let mut server = RdmaHost::new(topo, &b.server, &b.rnic)?;
            let mut load = start_load(&mut server, b.load, b.load_elems)?;
            let mode = if b.open {
                Mode::Open {
                    warmup: m.warmup,
                    window: m.duration,
                    windows: 1,
                    depth: b.depth,
                }
            } else {
                Mode::Closed {
                    warmup: CLOSED_WARMUP,
                    ops: CLOSED_OPS,
                }
            };
            let spec = BenchSpec {
                verb: b.verb,
                bytes: b.bytes,
                connections: b.connections,
                mtu: b.mtu,
                max_rd_atomic: MAX_RD_ATOMIC,
                server_remote: b.server_remote,
                mode,
            };
            let opts = bench::RunOptions {
                seed,
                poll_phase: true,
            };
            let r = bench::run_with_agents(
                &mut client,
                &mut server,
                spec,
                opts,
                Some(&mut load as &mut dyn ServerAgents),
            )?;
            let ops = match (&r.throughput, b.open) {
                (Some(t), true) => t.ops_per_s,
                // Closed loop: each connection completes one operation per latency.
                _ => b.connections as f64 / (r.latency_ns * 1e-9),
            };
            let mut out = vec![("ops_per_sec", ops), ("gbps", ops * b.bytes as f64 / 1e9)];
            if !b.open {
                out.push(("latency_ns", r.latency_ns));
            }
            Ok(NetOutcome {
                metrics: metrics(&out),
                counters: json!({
                    "operations": r.operations,
                    "simulated_s": r.simulated.as_secs_f64(),
                    "qpc_misses": r.qpc_misses,
                    "mtt_misses": r.mtt_misses,
                }),
            })
        }
        Kind::RdmaMemcached(w) => {
            let mut client = RdmaHost::new(topo, &w.client, &w.rnic)?;
            let mut server = RdmaHost::new(topo, &w.server, &w.rnic)?;
            let mut load = start_load(&mut server, w.load, w.load_elems)?;
            let spec = McSpec {
                connections: w.connections,
                get_ratio: w.get_ratio,
                value_bytes: w.value_bytes,
                keys: KEYS,
                placement: w.placement,
                mtu: MTU,
                max_rd_atomic: MAX_RD_ATOMIC,
                warmup: m.warmup,
                window: m.duration,
                windows: 1,
                seed,
            };
            let mut r = memcached::run(
                &mut client,
                &mut server,
                spec,
                Some(&mut load as &mut dyn ServerAgents),
            )?;
            let ops = r.throughput.map_or(0.0, |t| t.ops_per_s);
            let p50 = quantile(&mut r.latencies_ns, 0.5);
            let p99 = quantile(&mut r.latencies_ns, 0.99);
            Ok(NetOutcome {
                metrics: metrics(&[
                    ("kops", ops / 1e3),
                    ("ops_per_sec", ops),
                    ("gbps", ops * w.value_bytes as f64 / 1e9),
                    ("latency_ns_p50", p50),
                    ("latency_ns_p99", p99),
                ]),
                counters: json!({
                    "gets": r.gets,
                    "sets": r.sets,
                    "set_read_bytes": r.set_read_bytes,
                    "events": r.events,
                    "simulated_s": r.simulated.as_secs_f64(),
                }),
            })
        }
        other => Err(format!("`{}` is not an RDMA workload", other.name())),
    }
}
