//! The NUMA/one-sided-RDMA study's probes (REFERENCE.md §4): the benchmark of
//! `host::rdma::bench` between the scenario's client and server, the server's region on
//! its RNIC's node (`region = "local"`) or the other (`"remote"`), the client always on
//! its RNIC's node.

pub mod contention;

use std::collections::BTreeMap;

use devices::rnic::Verb;
use host::rdma::bench::{self, BenchResult, BenchSpec, Mode};
use host::rdma::RdmaHost;
use serde_json::json;
use sim::Time;

use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// Path MTU of every experiment (REFERENCE.md §4).
pub const MTU: u32 = 256;
/// `max_rd_atomic` of every QP (REFERENCE.md §4).
pub const MAX_RD_ATOMIC: u32 = 1;
/// Closed loop: operations per connection before and during the measurement. The study
/// ran 10^6 per connection; the model's only variance is the poll loop's phase (a few
/// tens of ns, seeded), so its mean settles within the first hundreds and fewer give the
/// same mean.
pub const CLOSED_WARMUP: u64 = 1000;
pub const CLOSED_OPS: u64 = 2000;
/// Open loop: the study's 10 ms samples (REFERENCE.md §4), three of them after 1 ms of
/// warm-up.
pub const WINDOW: Time = Time::from_us(10_000);
pub const WINDOWS: u32 = 3;
pub const OPEN_WARMUP: Time = Time::from_us(1000);
/// Open loop: work requests a client thread keeps unfinished (assumption: perftest's
/// default send-queue depth of 128; REFERENCE.md §4 gives none).
pub const OPEN_DEPTH: u32 = 128;

fn hosts(cx: &ProbeCx) -> Result<(RdmaHost, RdmaHost), RunError> {
    let topo = &cx.tf.fabric.topo;
    let rnic = cx.arg("rnic")?;
    let client = RdmaHost::new(topo, &cx.arg("client")?, &rnic).map_err(|e| cx.error(e))?;
    let server = RdmaHost::new(topo, &cx.arg("server")?, &rnic).map_err(|e| cx.error(e))?;
    Ok((client, server))
}

fn verb(cx: &ProbeCx) -> Result<Verb, RunError> {
    Verb::parse(&cx.arg("op")?).map_err(|e| cx.error(e))
}

fn counters(cx: &mut ProbeCx, r: &BenchResult) {
    cx.set_counters(json!({
        "operations": r.operations,
        "simulated_s": r.simulated.as_secs_f64(),
        "events": r.events,
        "qpc_misses": r.qpc_misses,
        "mtt_misses": r.mtt_misses,
    }));
}

/// `rdma.latency`: mean latency of `bytes` operations, closed loop, over swept `qps`
/// connections.
pub fn rdma_latency(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let qps = cx.need_swept("qps")?;
    let bytes = cx.bytes()?;
    let spec = BenchSpec {
        verb: verb(cx)?,
        bytes,
        connections: u32::try_from(qps).map_err(|_| cx.error(format!("qps {qps}")))?,
        mtu: MTU,
        max_rd_atomic: MAX_RD_ATOMIC,
        server_remote: cx.choice("region", "remote", "local")?,
        mode: Mode::Closed {
            warmup: CLOSED_WARMUP,
            ops: CLOSED_OPS,
        },
    };
    let (mut client, mut server) = hosts(cx)?;
    let r = bench::run(&mut client, &mut server, spec).map_err(|e| cx.error(e))?;
    counters(cx, &r);
    Ok(BTreeMap::from([(
        "latency_ns".to_string(),
        json!(r.latency_ns),
    )]))
}

/// `rdma.size_sweep`: open-loop throughput of `connections` connections over swept
/// `bytes`: the sum of per-connection means of 10 ms samples, and its deviation.
pub fn rdma_throughput(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let bytes = cx.bytes()?;
    let conns = cx.arg("connections")?;
    let connections: u32 = conns
        .parse()
        .map_err(|_| cx.error(format!("connections `{conns}` is not a whole number")))?;
    let spec = BenchSpec {
        verb: verb(cx)?,
        bytes,
        connections,
        mtu: MTU,
        max_rd_atomic: MAX_RD_ATOMIC,
        server_remote: cx.choice("region", "remote", "local")?,
        mode: Mode::Open {
            warmup: OPEN_WARMUP,
            window: WINDOW,
            windows: WINDOWS,
            depth: OPEN_DEPTH,
        },
    };
    let (mut client, mut server) = hosts(cx)?;
    let r = bench::run(&mut client, &mut server, spec).map_err(|e| cx.error(e))?;
    counters(cx, &r);
    let t = r
        .throughput
        .ok_or_else(|| cx.error("an open loop gave no samples"))?;
    Ok(BTreeMap::from([
        ("mops".to_string(), json!(t.ops_per_s / 1e6)),
        ("std_mops".to_string(), json!(t.std_ops_per_s / 1e6)),
    ]))
}
