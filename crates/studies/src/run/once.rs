//! `[measure] once = true`: each workload's one operation (an NTB DMA engine's copy, a
//! GPU's bandwidthTest copy, two GPUs' copy and ping-pong, a CPU store) timed alone from
//! its start to its end, each measurement on the scenario's hardware loaded anew. That is
//! how the SmartIO study measures single transfers on an idle fabric; workloads of a
//! windowed run meet, these do not.
//!
//! Copies up to `harness::DMA_WINDOW` are simulated TLP by TLP; larger ones extend at the
//! steady-state rate of its last half. A copy's row reports `ns` (its time) and
//! `throughput_gbyte_s` (GB/s, 10^9 bytes per second, of its bytes over that time).

use fabric::scenario::Scenario;
use fabric::{Fabric, Requester};
use serde_json::{json, Map, Value};
use sim::timed::{ns, TimedFabric};
use sim::Time;
use systems::smartio::Cluster;

use super::spec::{Direction, Kind, Qd1Driver, RunSpec, Through, Workload};
use super::{located, requester, PointResult};
use crate::harness::{self, RunError};
use crate::result::Run;
use crate::smartio;
use crate::smartio::GpuPair;
use systems::drivers::nvme_blk;
use systems::smartio::failover::{failover_run_with, FailoverPolicy};
use systems::smartio::nvme_bench;

/// Runs each workload of `spec` once, alone, on fresh hardware of `scenario`.
pub fn run_point(
    scenario: &Scenario,
    spec: &RunSpec,
    params: &Map<String, Value>,
    seed: u64,
) -> Result<PointResult, RunError> {
    let name = scenario.topology.name.clone();
    // Only a failover client has a timeline for the scenario's faults.
    let takes_faults = |w: &Workload| matches!(w.kind, Kind::NvmeFailover { .. });
    if !scenario.faults.is_empty() && !spec.workloads.iter().all(takes_faults) {
        return Err(RunError(format!(
            "{name}: a [measure] once run times single operations, with no timeline for the scenario's [[fault]]s (only nvme_failover takes them): give [measure] warmup and duration"
        )));
    }
    let mut rows = Vec::new();
    let mut counters = Map::new();
    for (i, w) in spec.workloads.iter().enumerate() {
        let fresh = || fresh(scenario, seed);
        // A workload's own draws, as a windowed run seeds each workload.
        let own_seed = seed ^ i as u64;
        let (metrics, c) =
            operation(&fresh, w, &scenario.faults, own_seed).map_err(|e| located(&w.at, e.0))?;
        let mut p = Map::new();
        p.insert("workload".into(), Value::from(w.name.as_str()));
        p.extend(params.clone());
        counters.insert(w.name.clone(), c);
        rows.push(Run {
            experiment: "run".into(),
            config: name.clone(),
            params: p,
            metrics: metrics
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            counters: Map::new(),
        });
    }
    Ok(PointResult {
        rows,
        counters: json!({ "once": counters }),
    })
}

/// A row's metrics, and the hardware counters of its main measurement.
type Measured = (Vec<(&'static str, Value)>, Value);

/// A copy's metrics: its time and its rate.
fn copy(bytes: u64, t: Time) -> Vec<(&'static str, Value)> {
    vec![
        ("ns", json!(t.as_ns_f64())),
        ("throughput_gbyte_s", json!(harness::gbps(bytes, t))),
    ]
}

/// The scenario's hardware, loaded anew.
pub(super) fn hardware(scenario: &Scenario, seed: u64) -> Result<TimedFabric, RunError> {
    let name = &scenario.topology.name;
    let fabric = Fabric::from_scenario(scenario.clone()).map_err(RunError::from(name))?;
    TimedFabric::new(fabric, seed).map_err(RunError::from(name))
}

/// The scenario's hardware, its lending and borrowing carried out, before any operation.
fn fresh(scenario: &Scenario, seed: u64) -> Result<TimedFabric, RunError> {
    let name = &scenario.topology.name;
    let mut tf = hardware(scenario, seed)?;
    if !(tf.fabric.topo.borrows.is_empty() && tf.fabric.topo.lends.is_empty()) {
        Cluster::from_fabric(&mut tf.fabric).map_err(|e| RunError(format!("{name}: {e}")))?;
    }
    Ok(tf)
}

/// `w`'s one operation, each measurement on hardware from `fresh`.
fn operation(
    fresh: &dyn Fn() -> Result<TimedFabric, RunError>,
    w: &Workload,
    faults: &[fabric::faults::FaultSpec],
    own_seed: u64,
) -> Result<Measured, RunError> {
    match &w.kind {
        Kind::NtbCopy {
            ntb,
            source,
            source_offset,
            target,
            offset,
            transfer_bytes,
            outstanding,
        } => {
            if *outstanding != 1 {
                return Err(RunError(format!(
                    "workload `{}`: a copy timed once has one copy outstanding, not {outstanding}",
                    w.name
                )));
            }
            let (b, mut tf) = (*transfer_bytes, fresh()?);
            let engine = requester(&tf, ntb)?;
            let t = ntb_copy(
                &mut tf,
                engine,
                (source, *source_offset),
                (target, *offset),
                b,
            )?;
            Ok((copy(b, t), harness::counters_json(&tf, b)))
        }
        Kind::GpuCopy {
            gpu,
            user,
            op,
            transfer_bytes,
            through,
        } => {
            let (b, write, mut tf) = (*transfer_bytes, *op == Direction::Write, fresh()?);
            let t = match through {
                Through::Lending => smartio::gpu_copy_time(&mut tf, gpu, user, b, write)?,
                Through::Mdev => smartio::nvme::gpu_copy_mdev_time(&mut tf, gpu, user, b, write)?,
            };
            Ok((copy(b, t), harness::counters_json(&tf, b)))
        }
        Kind::GpuP2p {
            a,
            b,
            user,
            via_ram,
            transfer_bytes,
        } => {
            let pair = GpuPair {
                a,
                b,
                user,
                via_ram: *via_ram,
            };
            let (bytes, mut tf) = (*transfer_bytes, fresh()?);
            let mut m = copy(bytes, smartio::p2p_copy(&mut tf, pair, bytes)?);
            let rtt = smartio::gpu_pingpong(&mut fresh()?, pair)?;
            let (hops, roots) = smartio::path_shape(&mut fresh()?, pair)?;
            m.push(("pingpong_ns", json!(rtt.as_ns_f64())));
            m.push(("hops", json!(hops)));
            m.push(("roots", json!(roots)));
            Ok((m, harness::counters_json(&tf, bytes)))
        }
        Kind::CpuStore {
            host,
            target,
            offset,
        } => {
            let mut tf = fresh()?;
            let t = smartio::cpu_store_oneway(&mut tf, host, target, *offset)?;
            let span = smartio::cpu_store_ntb_span(&mut fresh()?, host, target, *offset)?;
            let m = vec![
                ("ns", json!(t.as_ns_f64())),
                ("ntb_span_ns", json!(span.as_ns_f64())),
            ];
            Ok((m, harness::counters_json(&tf, 4)))
        }
        Kind::NvmeQd1 {
            host,
            device,
            driver,
            ios,
            seed,
        } => {
            let mut tf = fresh()?;
            let m = qd1(
                &mut tf,
                host,
                device,
                driver,
                *ios,
                seed.unwrap_or(own_seed),
            )
            .map_err(|e| RunError(format!("workload `{}`: {e}", w.name)))?;
            Ok((m, harness::counters_json(&tf, ios * 4096)))
        }
        Kind::NvmeMulticast { device, hosts } => {
            let mut tf = fresh()?;
            let r =
                systems::smartio::multicast::multicast_identify(&mut tf, device, *hosts as usize)
                    .map_err(|e| RunError(format!("workload `{}`: {e}", w.name)))?;
            let m = vec![
                ("deliveries", json!(r.deliveries)),
                ("bytes_identical", json!(r.bytes_identical)),
                ("skipped_copies", json!(r.skipped_copies)),
            ];
            Ok((m, harness::counters_json(&tf, 4096)))
        }
        Kind::BorrowAll { lender, borrower } => {
            let mut tf = fresh()?;
            let m = smartio::limits::borrow_until_full(&mut tf, lender, borrower)?;
            Ok((m, harness::counters_json(&tf, 0)))
        }
        Kind::MapWindows { device, borrower } => {
            let mut tf = fresh()?;
            let m = smartio::limits::map_until_full(&mut tf, device, borrower)?;
            Ok((m, harness::counters_json(&tf, 0)))
        }
        Kind::LendDma { device, borrower } => {
            let mut tf = fresh()?;
            let m = smartio::limits::lend_dma(&mut tf, device, borrower)?;
            Ok((m, harness::counters_json(&tf, 4096)))
        }
        Kind::NvmeFailover {
            setup,
            mode,
            ios,
            seed,
        } => {
            let mut tf = fresh()?;
            let policy = FailoverPolicy::default();
            let seed = seed.unwrap_or(own_seed);
            let (r, _) = failover_run_with(&mut tf, setup, *mode, *ios, seed, faults, policy)
                .map_err(|e| RunError(format!("workload `{}`: {e}", w.name)))?;
            let m = vec![
                ("ios_completed", json!(r.ios_completed)),
                ("ios_failed_reported", json!(r.ios_failed_reported)),
                ("acked_writes_lost", json!(r.acked_writes_lost)),
                ("bytes_corrupted", json!(r.bytes_corrupted)),
                ("recovery_us", json!(r.recovery_us)),
                ("ios_verified", json!(r.ios_verified)),
                ("last_path", json!(r.last_path)),
            ];
            Ok((m, harness::counters_json(&tf, ios * 4096)))
        }
        other => Err(RunError(format!(
            "workload `{}`: a `{}` workload is not timed once",
            w.name,
            other.name()
        ))),
    }
}

/// An NTB adapter's DMA engine copying `bytes` from `source` to `target` (each a name
/// and an offset): its set-up, then the copy. Both buffers are mapped for the engine;
/// the MPS in force is the smallest of the three hosts'.
fn ntb_copy(
    tf: &mut TimedFabric,
    engine: Requester,
    source: (&str, u64),
    target: (&str, u64),
    bytes: u64,
) -> Result<Time, RunError> {
    let host_of = |tf: &TimedFabric, (name, offset): (&str, u64)| {
        tf.fabric
            .resolve_address(name, offset)
            .map(|(h, _)| h)
            .map_err(RunError::from(name))
    };
    let (src, dst) = (
        harness::map_buffer(tf, engine, source.0, source.1, bytes)?,
        harness::map_buffer(tf, engine, target.0, target.1, bytes)?,
    );
    let own = tf.fabric.requester_host(engine);
    let mps = harness::mps_between(tf, own, host_of(tf, source)?).min(harness::mps_between(
        tf,
        own,
        host_of(tf, target)?,
    ));
    let spec = harness::device_spec(tf, engine, mps)?;
    let setup = ns(harness::device_param(tf, engine, "dma_setup_ns")?);
    let op = devices::Op::Copy { src, dst };
    Ok(setup + harness::dma_time(tf, engine, spec, op, bytes)?)
}

/// An `nvme_qd1` series' metrics: latency percentiles and control messages per I/O; the
/// block driver's bytes read back equal (a block read back wrong is an error), the
/// distributed driver's SQ-fetch path.
fn qd1(
    tf: &mut TimedFabric,
    host: &str,
    device: &str,
    driver: &Qd1Driver,
    ios: u64,
    seed: u64,
) -> Result<Vec<(&'static str, Value)>, String> {
    match driver {
        Qd1Driver::Blk { borrowed } => {
            let r = nvme_blk::nvme_qd1_latency(tf, host, device, *borrowed, ios, seed)
                .map_err(|e| e.to_string())?;
            if r.mismatches > 0 {
                return Err(format!("{} blocks read back wrong", r.mismatches));
            }
            Ok(vec![
                ("median_us", json!(r.median_us)),
                ("p99_us", json!(r.p99_us)),
                ("write_median_us", json!(r.write_median_us)),
                ("write_p99_us", json!(r.write_p99_us)),
                ("control_msgs_per_io", json!(r.control_msgs_per_io)),
                ("bytes_verified", json!(r.bytes_verified)),
            ])
        }
        Qd1Driver::Dist { sq, warmup_ios } => {
            let r = nvme_bench::qd1_reads(tf, host, device, sq.clone(), *warmup_ios, ios, seed)
                .map_err(|e| e.to_string())?;
            Ok(vec![
                ("median_us", json!(r.median_us)),
                ("p99_us", json!(r.p99_us)),
                ("control_msgs_per_io", json!(r.control_msgs_per_io)),
                ("read_hops", json!(r.sq_read_hops)),
                ("read_roots", json!(r.sq_read_roots)),
            ])
        }
    }
}
