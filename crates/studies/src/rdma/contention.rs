//! Probes of the server-side contention experiments: independent load threads beside the
//! benchmark (`rdma.independent_load`, `host::rdma::load`) and server threads on the
//! region's own lines (`rdma.mr_workers`, `host::rdma::workers`). Both run the open-loop
//! benchmark of `rdma.size_sweep` with short windows: the model has no variance source,
//! so a window of a quarter millisecond (about a thousand operations per connection)
//! gives the steady rate, and the sweep of several hundred points stays within seconds.

use std::collections::BTreeMap;

use host::rdma::agents::ServerAgents;
use host::rdma::bench::{self, BenchResult, BenchSpec, Mode};
use host::rdma::load::{IndependentLoad, LoadSpec, Placement, LOAD_THREADS};
use host::rdma::workers::{Mix, MrWorkers};
use serde_json::{json, Value};
use sim::Time;

use super::{hosts, verb, MAX_RD_ATOMIC, MTU, OPEN_DEPTH};
use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// Windows of both experiments: two of 500 µs (32 connections at 0.1 Mops each still
/// complete 50 operations a window: a 2 % step).
pub const SHORT_WINDOW: Time = Time::from_us(500);
pub const SHORT_WINDOWS: u32 = 2;
/// Warm-up with load threads: longer than the load's fills take to sweep the LLC (about
/// 0.5 ms at DRAM's bandwidth on the Haswell testbed), so the pushed-out region is the
/// steady state measured.
pub const LOAD_WARMUP: Time = Time::from_us(1000);
/// Warm-up with workers: the lines' state is set at each access, so only the pipelines
/// need to fill.
pub const WORKERS_WARMUP: Time = Time::from_us(200);

fn open_spec(cx: &ProbeCx, connections: u32, warmup: Time) -> Result<BenchSpec, RunError> {
    Ok(BenchSpec {
        verb: verb(cx)?,
        bytes: cx.bytes()?,
        connections,
        mtu: MTU,
        max_rd_atomic: MAX_RD_ATOMIC,
        server_remote: cx.choice("region", "remote", "local")?,
        mode: Mode::Open {
            warmup,
            window: SHORT_WINDOW,
            windows: SHORT_WINDOWS,
            depth: OPEN_DEPTH,
        },
    })
}

fn count(cx: &ProbeCx, key: &str) -> Result<u32, RunError> {
    let v = cx.arg(key)?;
    v.parse()
        .map_err(|_| cx.error(format!("{key} `{v}` is not a whole number")))
}

fn mops(cx: &ProbeCx, r: &BenchResult) -> Result<Fields, RunError> {
    let t = r
        .throughput
        .as_ref()
        .ok_or_else(|| cx.error("an open loop gave no samples"))?;
    Ok(BTreeMap::from([
        ("mops".to_string(), json!(t.ops_per_s / 1e6)),
        ("std_mops".to_string(), json!(t.std_ops_per_s / 1e6)),
    ]))
}

fn bench_counters(r: &BenchResult, extra: Value) -> Value {
    let mut v = json!({
        "operations": r.operations,
        "simulated_s": r.simulated.as_secs_f64(),
        "events": r.events,
        "qpc_misses": r.qpc_misses,
        "mtt_misses": r.mtt_misses,
    });
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    v
}

/// `rdma.independent_load`: open-loop throughput beside `LOAD_THREADS` load threads on
/// buffers of swept `load_elems` elements, placed by `load`.
pub fn rdma_independent_load(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let connections = count(cx, "connections")?;
    let spec = open_spec(cx, connections, LOAD_WARMUP)?;
    let placement = Placement::parse(&cx.arg("load")?).map_err(|e| cx.error(e))?;
    let elems = cx.need_swept("load_elems")?;
    let (mut client, mut server) = hosts(cx)?;
    let mut load = IndependentLoad::start(
        &mut server,
        LoadSpec {
            threads: LOAD_THREADS,
            elems,
            placement,
        },
    )
    .map_err(|e| cx.error(e))?;
    let r = bench::run_with_agents(
        &mut client,
        &mut server,
        spec,
        bench::RunOptions::default(),
        Some(&mut load as &mut dyn ServerAgents),
    )
    .map_err(|e| cx.error(e))?;
    let node = server.node(spec.server_remote) as usize;
    let extra = json!({
        "load_residence": load.residence.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>(),
        "llc_sweep_us": load.sweep.iter().map(|s| s.map(|t| t.as_us_f64())).collect::<Vec<_>>(),
        "region_pushed_out": load.pushed_out,
        "stream_share_gbps": server.mem.stream_rates().share_gbps,
        "region_dram_read_bytes": server.mem.dram(node as u32).read,
    });
    cx.set_counters(bench_counters(&r, extra));
    mops(cx, &r)
}

/// `rdma.mr_workers`: open-loop throughput with swept `workers` server threads storing
/// or loading the region's lines (`mix`) on the region's node.
pub fn rdma_mr_workers(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let connections = count(cx, "connections")?;
    let spec = open_spec(cx, connections, WORKERS_WARMUP)?;
    let mix = Mix::parse(&cx.arg("mix")?).map_err(|e| cx.error(e))?;
    let n = cx.need_swept("workers")?;
    let workers = u32::try_from(n).map_err(|_| cx.error(format!("workers {n}")))?;
    let (mut client, mut server) = hosts(cx)?;
    let node = server.node(spec.server_remote);
    let mut w = MrWorkers::new(&server, node, workers, mix, 1).map_err(|e| cx.error(e))?;
    let r = bench::run_with_agents(
        &mut client,
        &mut server,
        spec,
        bench::RunOptions::default(),
        Some(&mut w as &mut dyn ServerAgents),
    )
    .map_err(|e| cx.error(e))?;
    let c = w.counters;
    let extra = json!({
        "device_lines": c.device_lines,
        "found_modified": c.found_modified,
        "snoop_wait_ns": c.snoop_wait_ns,
        "queue_wait_ns": c.queue_wait_ns,
        "device_read_snoops": w.lines.counters.device_read_snoops,
        "device_invalidations": w.lines.counters.device_invalidations,
        "worker_ownership_takes": w.lines.counters.ownership_takes,
    });
    cx.set_counters(bench_counters(&r, extra));
    mops(cx, &r)
}
