//! The `tyche_fio` and `zmio` workloads of `nudma run`: one Tyche run between two hosts
//! of the scenario, over the scenario's `[measure]` window. Like the other packet-granular
//! network workloads it runs on its own model of the two hosts (`run::net`).

use fabric::Topology;
use serde_json::{json, Map};
use systems::tyche::TycheSpec;

use super::{counters, run_between, FRAME_BYTES};
use crate::run::beside::Beside;
use crate::run::packet::NetOutcome;
use crate::run::spec::{Kind, Measure};

/// Runs a `Kind::Tyche` workload; metrics `throughput_gbyte_s` (GB/s), `ops_per_sec`
/// (requests), `requests` and `frames` (completed requests and data frames received in
/// the window), `qpi_gbyte_s` (initiator link → GB/s), `qpi0_share`, `cores_busy`
/// (host.node → cores' worth busy over the window).
pub fn workload(
    topo: &Topology,
    kind: &Kind,
    m: Measure,
    beside: &mut Beside,
) -> Result<NetOutcome, String> {
    let Kind::Tyche {
        initiator,
        target,
        nics,
        app,
        block_bytes,
        op,
        initiator_place,
        target_place,
        scheduler,
        target_io,
        rx,
        coalescing,
    } = kind
    else {
        return Err("not a Tyche workload".into());
    };
    let spec = TycheSpec {
        op: *op,
        req_bytes: *block_bytes,
        frame_bytes: FRAME_BYTES.min(*block_bytes),
        app: *app,
        channels: *nics as usize,
        initiator: *initiator_place,
        target: *target_place,
        scheduler: *scheduler,
        target_io: *target_io,
        rx: *rx,
        coalescing: *coalescing,
        warmup: m.warmup,
        window: m.duration,
    };
    let r = run_between(topo, initiator, target, &spec, beside)?;
    let mut metrics = Map::new();
    metrics.insert("throughput_gbyte_s".into(), json!(r.throughput_gbps));
    metrics.insert(
        "ops_per_sec".into(),
        json!(r.requests as f64 / m.duration.as_secs_f64()),
    );
    metrics.insert("requests".into(), json!(r.requests));
    metrics.insert("frames".into(), json!(r.frames));
    metrics.insert("qpi_gbyte_s".into(), json!(r.qpi_gbps));
    metrics.insert("qpi0_share".into(), json!(r.qpi0_share));
    metrics.insert("cores_busy".into(), super::cores_busy(&r));
    Ok(NetOutcome {
        metrics,
        counters: counters(&r),
    })
}
