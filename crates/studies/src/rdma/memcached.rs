//! The probe of `rdma.memcached`: memcached over one-sided RDMA (`host::rdma::memcached`)
//! between the scenario's client and server, placed as the config says, beside the
//! server's independent load threads (`host::rdma::load`, as `rdma.independent_load`).

use std::collections::BTreeMap;

use host::rdma::agents::ServerAgents;
use host::rdma::load::{self, IndependentLoad, LoadSpec, LOAD_THREADS};
use host::rdma::memcached::{self, McResult, McSpec, Placement, KEYS};
use serde_json::json;
use sim::Time;

use super::contention::LOAD_WARMUP;
use super::{hosts, MAX_RD_ATOMIC, MTU};
use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// GETs among the operations and the value size (EXPERIMENTS.md `rdma.memcached`).
pub const GET_RATIO: f64 = 0.9;
pub const VALUE_BYTES: u64 = 64;
/// Elements of each load thread's buffer (assumption: EXPERIMENTS.md names no size for
/// this experiment's load; 1e8, far beyond the LLC, is `rdma.independent_load`'s size
/// that loads DRAM and sweeps the LLC).
pub const LOAD_ELEMS: u64 = 100_000_000;
/// Two windows of 250 µs after the warm-up: a closed-loop client completes about a
/// hundred operations a window (a 1 % step), ten of them SETs, and the model's only
/// variance is the poll loops' phase and the seeded mix, so longer windows give the same
/// rate.
pub const WINDOW: Time = Time::from_us(250);
pub const WINDOWS: u32 = 2;

/// The load words of the experiment, as `host::rdma::load` places them.
pub fn load_placement(word: &str) -> Result<load::Placement, String> {
    match word {
        "none" => Ok(load::Placement::None),
        "unbound" => Ok(load::Placement::Unbound),
        "rnic_node" => Ok(load::Placement::BoundLocal),
        "other_node" => Ok(load::Placement::BoundRemote),
        _ => Err(format!(
            "load `{word}`: use \"none\", \"unbound\", \"rnic_node\" or \"other_node\""
        )),
    }
}

fn kops(cx: &ProbeCx, r: &McResult) -> Result<Fields, RunError> {
    let t = r
        .throughput
        .as_ref()
        .ok_or_else(|| cx.error("the run gave no samples"))?;
    Ok(BTreeMap::from([(
        "kops".to_string(),
        json!(t.ops_per_s / 1e3),
    )]))
}

/// `rdma.memcached`: GET+SET throughput of `connections` closed-loop clients, the
/// sides placed by `placement`, beside `load` on the server.
pub fn rdma_memcached(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let v = cx.arg("connections")?;
    let connections: u32 = v
        .parse()
        .map_err(|_| cx.error(format!("connections `{v}` is not a whole number")))?;
    let placement = Placement::parse(&cx.arg("placement")?).map_err(|e| cx.error(e))?;
    let lp = load_placement(&cx.arg("load")?).map_err(|e| cx.error(e))?;
    let (mut client, mut server) = hosts(cx)?;
    let mut load = IndependentLoad::start(
        &mut server,
        LoadSpec {
            threads: LOAD_THREADS,
            elems: LOAD_ELEMS,
            placement: lp,
        },
    )
    .map_err(|e| cx.error(e))?;
    let spec = McSpec {
        connections,
        get_ratio: GET_RATIO,
        value_bytes: VALUE_BYTES,
        keys: KEYS,
        placement,
        mtu: MTU,
        max_rd_atomic: MAX_RD_ATOMIC,
        warmup: LOAD_WARMUP,
        window: WINDOW,
        windows: WINDOWS,
        seed: 1,
    };
    let r = memcached::run(
        &mut client,
        &mut server,
        spec,
        Some(&mut load as &mut dyn ServerAgents),
    )
    .map_err(|e| cx.error(e))?;
    let lat = &r.latencies_ns;
    cx.set_counters(json!({
        "gets": r.gets,
        "sets": r.sets,
        "mean_latency_ns": lat.iter().sum::<f64>() / lat.len().max(1) as f64,
        "set_read_bytes": r.set_read_bytes,
        "events": r.events,
        "simulated_s": r.simulated.as_secs_f64(),
        "region_pushed_out": load.pushed_out,
    }));
    kops(cx, &r)
}
