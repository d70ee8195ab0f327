//! `nudma run`: a scenario's workloads, all at once on its hardware, measured over a
//! window of simulated time; `--set` sweeps run every point, in parallel over local cores,
//! with the same rows as a sequential run.
//!
//! Each workload becomes a simulation component of one `Sim` on the scenario's timed
//! fabric: a device's DMA (`devices::DmaJob`, endless operations), cores' memory traffic
//! (`sim::cpu_stream::CpuStream`), an NTB adapter's DMA engine copying, fio's threads on
//! an NVMe device (`systems::drivers::fio`). Buffers are mapped as a driver would (NTB
//! window, requester-ID entry, IOMMU mappings) before time starts. Network workloads
//! (netperf, pktgen, memcached, udp_pingpong) run on the packet-granular host stack
//! instead, each on its own (`net`), as does the PageRank victim on its host's memory
//! system (`victim`).
//!
//! A `[measure] once = true` run instead times each workload's one operation alone on
//! fresh hardware (`once`).
//!
//! A fio workload's block driver probes its controller first (reset, enable, Identify,
//! queue creation: about a millisecond of simulated time with nothing else running); the
//! run's time — warm-up, window, the scenario's fault times — counts from the end of the
//! probes, when every workload starts.

pub mod beside;
pub mod bound;
mod counters;
pub mod keys;
mod memcached;
pub mod net;
mod nvme_share;
mod once;
pub mod overrides;
pub mod packet;
mod pciebench;
mod ping_pong;
mod pktgen;
pub mod rdma;
pub mod spec;
mod tcp_stream;
mod together;
pub mod victim;

use std::collections::BTreeMap;

use devices::{DmaJob, Gpu, Op, Ops, PingPong};
use fabric::scenario::{Scenario, Source};
use fabric::{builtin, Fabric, Requester};
use serde_json::{json, Map, Value};
use sim::component::Sim;
use sim::cpu_stream::{CpuStream, StreamOp};
use sim::faults::FaultInjector;
use sim::net::{ComponentId, Counters};
use sim::stats::Histogram;
use sim::timed::TimedFabric;
use sim::Time;
use systems::drivers::fio::{Fio, FioSpec};
use systems::smartio::Cluster;

use crate::harness::{self, RunError};
use crate::result::Run;

use beside::{Beside, CpuStreams};
use bound::TlpPath;
use counters::{counters_json, counters_minus};
use overrides::{Override, Point};
use spec::{Direction, Kind, Measure, Pattern, Workload};

/// What one point of a run produced: its rows and the hardware counters of its window.
#[derive(Clone, Debug)]
pub struct PointResult {
    pub rows: Vec<Run>,
    pub counters: Value,
}

/// Loads a scenario argument (a file, a built-in scenario name or a built-in experiment
/// ID) as text, for `run_point`.
pub fn source(arg: &str) -> Result<Source, RunError> {
    builtin::source_of(arg).or_else(|e| {
        // A built-in experiment by its ID, as `reproduce` names it.
        let file = format!("builtin:experiments/{arg}.toml");
        builtin::experiment_files()
            .find(|s| s.name == file)
            .ok_or_else(|| RunError(e.to_string()))
    })
}

/// The points of a sweep over `sets` (one point without any).
pub fn sweep(sets: &[Override]) -> Vec<Point> {
    overrides::points(sets)
}

/// What `topo check` and a sweep check before anything runs: the scenario at `point`
/// loads, and its `[[workload]]`s and `[measure]` (when it has workloads) parse and are
/// in range. Gives the number of workloads and the window (`None`: each timed once, or
/// no workloads). Names the workloads refer to are resolved when they are built.
pub fn check(src: &Source, point: &Point) -> Result<(usize, Option<Measure>), RunError> {
    let (_, src) = overrides::load(src, point).map_err(RunError)?;
    let has_workloads = toml::from_str::<toml::Table>(&src.text)
        .ok()
        .is_some_and(|t| t.contains_key("workload") || t.contains_key("measure"));
    if !has_workloads {
        return Ok((0, None));
    }
    let spec = spec::parse(&src).map_err(|e| RunError(e.to_string()))?;
    Ok((spec.workloads.len(), spec.window()))
}

/// Most worker threads a sweep may ask for.
pub const MAX_JOBS: usize = 1024;

/// Runs every point, on `jobs` worker threads (1..=`MAX_JOBS`, at most one per point);
/// rows come back in point order, identical to a sequential run.
pub fn run_all(
    src: &Source,
    points: &[Point],
    seed: u64,
    jobs: usize,
    progress: bool,
) -> Result<Vec<PointResult>, RunError> {
    use rayon::prelude::*;
    if !(1..=MAX_JOBS).contains(&jobs) {
        return Err(RunError(format!(
            "jobs must be 1..={MAX_JOBS} worker threads, not {jobs}"
        )));
    }
    // More workers than points would only idle.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.min(points.len()).max(1))
        .build()
        .map_err(|e| RunError(format!("cannot start {jobs} workers: {e}")))?;
    // Progress on stderr as points finish (in any order); results keep point order.
    let done = std::sync::atomic::AtomicUsize::new(0);
    let n = points.len();
    pool.install(|| {
        points
            .par_iter()
            .map(|p| {
                let r = run_point(src, p, seed);
                let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if n > 1 && progress {
                    eprint!("\rnudma run: {k}/{n} points");
                    if k == n {
                        eprintln!();
                    }
                }
                r
            })
            .collect::<Result<Vec<_>, _>>()
    })
}

enum Handle {
    /// A DMA job and its path.
    Dma(ComponentId, Box<TlpPath>),
    /// A pcie-bench program, whether its engine is the ideal one, and its path.
    PcieBench(ComponentId, bool, Box<TlpPath>),
    /// A `cpu_stream`'s cores (none when it has `cores = 0`) and their path.
    Stream(Vec<ComponentId>, Box<TlpPath>),
    PingPong(ComponentId, Box<TlpPath>),
    Fio(Box<Fio>, Box<TlpPath>),
    /// A network workload or the PageRank victim, already run over the window.
    Net(Box<packet::NetOutcome>),
}

/// Runs one point: the scenario with the point's overrides, its workloads together.
pub fn run_point(src: &Source, point: &Point, seed: u64) -> Result<PointResult, RunError> {
    let (scenario, src) = overrides::load(src, point).map_err(RunError)?;
    run_loaded(scenario, &src, point, seed)
}

/// Runs the workloads of `src` (the text the point's overrides were applied to) on
/// `scenario`, loaded from it.
pub(crate) fn run_loaded(
    scenario: Scenario,
    src: &Source,
    point: &Point,
    seed: u64,
) -> Result<PointResult, RunError> {
    let spec = spec::parse(src).map_err(|e| RunError(e.to_string()))?;
    let Some(window) = spec.window() else {
        return once::run_point(&scenario, &spec, &overrides::params_of(point), seed);
    };
    if spec.apart && spec.workloads.len() > 1 {
        return run_apart(scenario, src, &spec, point, seed);
    }
    run_together(scenario, src, &spec, window, point, seed)
}

/// Each workload of `spec` alone on its own copy of `scenario` (`[measure] apart`), with
/// the seed it has among the file's workloads: the rows in file order; each run's
/// counters under its workload's name (`apart`), the network workloads' also merged under
/// `network` as in a run together.
fn run_apart(
    scenario: Scenario,
    src: &Source,
    spec: &spec::RunSpec,
    point: &Point,
    seed: u64,
) -> Result<PointResult, RunError> {
    let window = spec.window().expect("apart is for a window");
    let (mut rows, mut each, mut network) = (Vec::new(), Map::new(), Map::new());
    for (i, w) in spec.workloads.iter().enumerate() {
        let one = spec::RunSpec {
            workloads: vec![w.clone()],
            timing: spec.timing,
            apart: false,
        };
        let r = run_together(scenario.clone(), src, &one, window, point, seed ^ i as u64)?;
        rows.extend(r.rows);
        let mut c = r.counters;
        if let Some(Value::Object(n)) = c.as_object_mut().and_then(|m| m.remove("network")) {
            network.extend(n);
        }
        each.insert(w.name.clone(), c);
    }
    let mut counters = json!({ "apart": each });
    if !network.is_empty() {
        counters["network"] = Value::Object(network);
    }
    Ok(PointResult { rows, counters })
}

/// Runs `spec`'s workloads together over `window` on `scenario`.
fn run_together(
    scenario: Scenario,
    src: &Source,
    spec: &spec::RunSpec,
    window: Measure,
    point: &Point,
    seed: u64,
) -> Result<PointResult, RunError> {
    let name = scenario.topology.name.clone();
    let mut faults = scenario.faults.clone();
    let mut own = own_models(&scenario, spec, window, seed)?;
    let fabric = Fabric::from_scenario(scenario).map_err(|e| RunError(e.to_string()))?;
    let mut tf = TimedFabric::new(fabric, seed).map_err(RunError::from(&src.name))?;
    let mut sim: Sim<TimedFabric> = Sim::new();
    // The scenario's [[lend]]/[[borrow]] declarations, carried out before any workload, so
    // that a workload can name a borrowed device by its borrow name.
    let mut cluster = if tf.fabric.topo.borrows.is_empty() && tf.fabric.topo.lends.is_empty() {
        None
    } else {
        Some(
            Cluster::from_fabric(&mut tf.fabric)
                .map_err(|e| RunError(format!("{}: {e}", src.name)))?,
        )
    };
    // fio's probes first, each alone on the simulation; time then starts for all.
    let lasts = window.warmup + window.duration;
    let mut fios = Vec::new();
    for (i, w) in spec.workloads.iter().enumerate() {
        if let Kind::Fio { .. } = w.kind {
            let fio = probe_fio(&mut tf, &mut sim, w, seed ^ i as u64, lasts)
                .map_err(|e| located(&w.at, e.0))?;
            fios.push(Some(fio));
        } else {
            fios.push(None);
        }
    }
    let origin = tf.net.now();
    let streams = CpuStreams::of(&spec.workloads);
    let mut together = together::run_together(&tf.fabric.topo, spec, window, &streams, seed)?;
    let mut handles = Vec::new();
    for (i, (w, fio)) in spec.workloads.iter().zip(fios).enumerate() {
        let h = match fio {
            Some(f) => {
                f.start(&mut tf);
                let path = fio_path(&mut tf, w);
                Handle::Fio(Box::new(f), Box::new(path))
            }
            None if together.contains_key(&i) => {
                Handle::Net(Box::new(together.remove(&i).expect("checked")))
            }
            None if own.contains_key(&i) => Handle::Net(Box::new(own.remove(&i).expect("checked"))),
            None => build(
                &mut tf,
                &mut sim,
                cluster.as_mut(),
                &streams,
                w,
                window,
                seed ^ i as u64,
            )
            .map_err(|e| located(&w.at, e.0))?,
        };
        handles.push(h);
    }
    // Faults at their times, counted from the start of the run (warm-up included).
    for f in &mut faults {
        f.at_ps += origin.as_ps();
    }
    let injector = (!faults.is_empty()).then(|| {
        let id = sim.add(FaultInjector::new(&faults));
        sim.get_mut::<FaultInjector>(id)
            .expect("added")
            .start(&mut tf, id);
        id
    });
    let (counted, paced) = measure(&mut tf, &mut sim, &mut handles, window, origin);
    let params = overrides::params_of(point);
    let mut resources = Map::new();
    let seen = bound::Window {
        net: &tf.net,
        counted: &counted,
        paced: &paced,
        secs: window.duration.as_secs_f64(),
    };
    let rows = spec
        .workloads
        .iter()
        .zip(&handles)
        .map(|(w, h)| {
            let mut p = Map::new();
            p.insert("workload".into(), Value::from(w.name.as_str()));
            p.extend(params.clone());
            Ok(Run {
                experiment: "run".into(),
                config: name.clone(),
                params: p,
                metrics: metrics(&sim, h, window.duration)
                    .map(|mut m| {
                        if let Some(path) = h.path() {
                            resources.insert(w.name.clone(), path.bound(&mut m, &seen));
                        }
                        m
                    })
                    .map_err(|e| located(&w.at, e))?,
                counters: Map::new(),
            })
        })
        .collect::<Result<Vec<_>, RunError>>()?;
    let mut counters = counters_json(&counted);
    counters::add_utilisation(&mut counters, &tf.net, window.duration);
    if !resources.is_empty() {
        counters["resources"] = Value::Object(resources);
    }
    let network: Map<String, Value> = spec
        .workloads
        .iter()
        .zip(&handles)
        .filter_map(|(w, h)| match h {
            Handle::Net(o) => Some((w.name.clone(), o.counters.clone())),
            _ => None,
        })
        .collect();
    if !network.is_empty() {
        counters["network"] = Value::Object(network);
    }
    if let Some(id) = injector {
        let log = sim.get::<FaultInjector>(id).expect("added").log();
        counters["faults"] = json!(log
            .iter()
            .map(|(t, what)| json!({ "at_ns": round3((*t - origin).as_ns_f64()), "what": what }))
            .collect::<Vec<_>>());
    }
    Ok(PointResult { rows, counters })
}

/// The outcomes of the workloads that run on fresh hardware of their own (`nvme_share`),
/// by workload index.
fn own_models(
    scenario: &fabric::scenario::Scenario,
    spec: &spec::RunSpec,
    window: Measure,
    seed: u64,
) -> Result<BTreeMap<usize, packet::NetOutcome>, RunError> {
    let mut out = BTreeMap::new();
    for (i, w) in spec.workloads.iter().enumerate() {
        if let Kind::NvmeShare { .. } = w.kind {
            let o = nvme_share::run(scenario, &w.kind, window, seed ^ i as u64)
                .map_err(|e| located(&w.at, format!("workload `{}`: {e}", w.name)))?;
            out.insert(i, o);
        }
    }
    Ok(out)
}

/// A message located where the workload was written.
fn located(at: &fabric::ScenarioError, msg: String) -> RunError {
    RunError(
        fabric::ScenarioError {
            message: msg,
            ..at.clone()
        }
        .to_string(),
    )
}

/// A fio workload's job: its block driver probes the controller now (see the module notes).
fn probe_fio(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    w: &Workload,
    seed: u64,
    lasts: Time,
) -> Result<Fio, RunError> {
    let Kind::Fio {
        device,
        cpu_node,
        mem_node,
        threads,
        iodepth,
        block_bytes,
        op,
        pattern,
        seed: own_seed,
    } = &w.kind
    else {
        return Err(RunError("not a fio workload".into()));
    };
    let spec = FioSpec {
        device: device.clone(),
        cpu_node: *cpu_node,
        mem_node: *mem_node,
        threads: *threads,
        iodepth: *iodepth,
        block_bytes: *block_bytes,
        write: *op == Direction::Write,
        random: *pattern == Pattern::Random,
        seed: own_seed.unwrap_or(seed),
        lasts,
    };
    Fio::probe(tf, sim, spec).map_err(|e| RunError(format!("workload `{}`: {e}", w.name)))
}

/// The device function a workload names (a CPU is not a DMA requester here).
fn requester(tf: &TimedFabric, name: &str) -> Result<Requester, RunError> {
    match harness::requester(tf, name)? {
        r @ Requester::Function(_) => Ok(r),
        Requester::Cpu { .. } => Err(RunError(format!(
            "`{name}` is not a device: a DMA workload needs `host.device` or `host.device.pfN`"
        ))),
    }
}

/// A DMA workload's requester and the bus address and DMA behaviour it uses for `region`
/// bytes at `target`: through the borrow's DMA window when `device` is a borrow name of
/// the scenario (`[[borrow]] name = …`) and the target is in the borrower, else through
/// the host layer's DMA API.
fn dma_requester(
    tf: &mut TimedFabric,
    cluster: Option<&mut Cluster>,
    device: &str,
    target: &str,
    offset: u64,
    region: u64,
) -> Result<(Requester, u64, devices::DmaSpec), RunError> {
    let borrow = cluster
        .as_ref()
        .and_then(|c| c.borrow_named(device))
        .zip(cluster);
    let Some((b, cl)) = borrow else {
        let who = requester(tf, device)?;
        let (bus, dma) = harness::dma_to(tf, who, target, offset, region)?;
        return Ok((who, bus, dma));
    };
    let f = cl
        .function(&tf.fabric, b)
        .map_err(|e| RunError(format!("{device}: {e}")))?;
    let who = Requester::Function(f);
    let (host, addr) = tf
        .fabric
        .resolve_address(target, offset)
        .map_err(RunError::from(target))?;
    let lender = tf.fabric.topo.node(f).host;
    let bus = if host == b.host {
        cl.map_for_device(
            &mut tf.fabric,
            b,
            host::PhysAddr { host, addr },
            region.max(1),
            host::DmaDirection::Bidirectional,
        )
        .map_err(|e| RunError(format!("{device} → {target}: {e}")))?
        .addr
        .0
    } else {
        harness::map_buffer(tf, who, target, offset, region)?
    };
    let mps = harness::mps_between(tf, lender, host);
    Ok((who, bus, harness::device_spec(tf, who, mps)?))
}

fn build(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    cluster: Option<&mut Cluster>,
    streams: &CpuStreams,
    w: &Workload,
    m: Measure,
    seed: u64,
) -> Result<Handle, RunError> {
    let mut beside = Beside::new(streams);
    let mut handle = build_on(tf, sim, cluster, &mut beside, w, m, seed)?;
    if let (Handle::Net(o), Some(met)) = (&mut handle, beside.report()) {
        o.counters["beside_cpu_streams"] = met;
    }
    Ok(handle)
}

/// `build`, loading a packet-model workload's hosts with the run's streams through
/// `beside`.
fn build_on(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    cluster: Option<&mut Cluster>,
    beside: &mut Beside,
    w: &Workload,
    m: Measure,
    seed: u64,
) -> Result<Handle, RunError> {
    let own = |o: Result<packet::NetOutcome, String>| {
        o.map(|o| Handle::Net(Box::new(o)))
            .map_err(|e| RunError(format!("workload `{}`: {e}", w.name)))
    };
    match &w.kind {
        Kind::Netperf { .. }
        | Kind::Pktgen { .. }
        | Kind::Memcached { .. }
        | Kind::UdpPingPong { .. } => own(net::run(&tf.fabric.topo, &w.kind, m, seed, beside)),
        Kind::Tyche { .. } => own(crate::tyche::run::workload(
            &tf.fabric.topo,
            &w.kind,
            m,
            beside,
        )),
        Kind::RdmaBench(_) | Kind::RdmaMemcached(_) => {
            own(rdma::run(&tf.fabric.topo, &w.kind, m, seed, beside))
        }
        Kind::PageRank { .. } => own(victim::pagerank(&tf.fabric.topo, w, m, seed, beside)),
        Kind::PcieBench(p) => {
            let (id, ideal, path) = pciebench::build(tf, sim, cluster, p, seed)?;
            Ok(Handle::PcieBench(id, ideal, Box::new(path)))
        }
        Kind::Dma {
            device,
            target,
            offset,
            op,
            transfer_bytes,
            outstanding,
        } => {
            let region = transfer_bytes * *outstanding as u64;
            let (who, bus, dma) = dma_requester(tf, cluster, device, target, *offset, region)?;
            let write = *op == Direction::Write;
            let op = match write {
                false => Op::Read { src: bus },
                true => Op::Write { dst: bus },
            };
            // The workload stands for the device's data moving (a NIC receiving or
            // sending, an NVMe reading or writing its media): its own path bounds it.
            let data = harness::data_path(tf, who, write);
            let mut path = TlpPath {
                data: data.map(|(ps, what)| (format!("{device} {what}"), bound::gbyte_s(ps))),
                under_way: Some(format!("{outstanding} outstanding")),
                ..TlpPath::default()
            };
            path.add_access(tf, who, bus, write);
            let pace = data.map_or(0, |d| d.0);
            let job = dma_job(tf, who, dma, op, *transfer_bytes, *outstanding)?;
            Ok(start_dma(tf, sim, job.with_data_pace(pace), path))
        }
        Kind::NtbCopy {
            ntb,
            source,
            source_offset,
            target,
            offset,
            transfer_bytes,
            outstanding,
        } => {
            let who = requester(tf, ntb)?;
            let region = transfer_bytes * *outstanding as u64;
            let (src, _) = harness::dma_to(tf, who, source, *source_offset, region)?;
            let (dst, dma) = harness::dma_to(tf, who, target, *offset, region)?;
            let op = Op::Copy { src, dst };
            let mut path = TlpPath {
                under_way: Some(format!("{outstanding} outstanding")),
                ..TlpPath::default()
            };
            path.add_access(tf, who, src, false);
            path.add_access(tf, who, dst, true);
            let job = dma_job(tf, who, dma, op, *transfer_bytes, *outstanding)?;
            Ok(start_dma(tf, sim, job, path))
        }
        Kind::PingPong { a, b, ram } => {
            let (ra, rb) = (requester(tf, a)?, requester(tf, b)?);
            let gpu = |tf: &TimedFabric, r: Requester, name: &str| match r {
                Requester::Function(n) => Gpu::from_node(tf, n).map_err(RunError::from(name)),
                _ => Err(RunError(format!("`{name}` is not a GPU"))),
            };
            let (ga, gb) = (gpu(tf, ra, a)?, gpu(tf, rb, b)?);
            // Each counter on a page of its own.
            let (oa, ob) = (0x1000, 0x2000);
            let counters = match ram {
                None => devices::Counters::InGpuMemory {
                    a_to_b: harness::map_buffer(
                        tf,
                        ra,
                        &format!("{b}.bar{}", gb.memory_bar),
                        ob,
                        4,
                    )?,
                    b_to_a: harness::map_buffer(
                        tf,
                        rb,
                        &format!("{a}.bar{}", ga.memory_bar),
                        oa,
                        4,
                    )?,
                    a_offset: oa,
                    b_offset: ob,
                },
                Some(ram) => devices::Counters::InHostRam {
                    a_writes: harness::map_buffer(tf, ra, ram, ob, 4)?,
                    b_polls: harness::map_buffer(tf, rb, ram, ob, 4)?,
                    b_writes: harness::map_buffer(tf, rb, ram, oa, 4)?,
                    a_polls: harness::map_buffer(tf, ra, ram, oa, 4)?,
                },
            };
            // Each GPU writes its counter where the other polls it: one write in flight.
            let mut path = TlpPath {
                under_way: Some("1 counter write in flight".into()),
                ..TlpPath::default()
            };
            let writes = match &counters {
                devices::Counters::InGpuMemory { a_to_b, b_to_a, .. } => [*a_to_b, *b_to_a],
                devices::Counters::InHostRam {
                    a_writes, b_writes, ..
                } => [*a_writes, *b_writes],
            };
            path.add_access(tf, ra, writes[0], true);
            path.add_access(tf, rb, writes[1], true);
            let pp =
                PingPong::new(tf, ga, gb, counters).map_err(|f| harness::fault_error(tf, f))?;
            let id = sim.add(pp);
            let now = tf.net.now();
            tf.net.wake_at(now, id);
            Ok(Handle::PingPong(id, Box::new(path)))
        }
        Kind::Fio { .. } => Err(RunError(
            "a fio workload is probed before the others are built".into(),
        )),
        Kind::NvmeShare { .. } => Err(RunError(
            "an nvme_share workload runs on its own model before the others are built".into(),
        )),
        Kind::GpuCopy { .. }
        | Kind::GpuP2p { .. }
        | Kind::CpuStore { .. }
        | Kind::NvmeQd1 { .. }
        | Kind::NvmeMulticast { .. }
        | Kind::BorrowAll { .. }
        | Kind::MapWindows { .. }
        | Kind::LendDma { .. }
        | Kind::NvmeFailover { .. } => Err(RunError(format!(
            "a `{}` workload is timed once (the spec refuses it in a window)",
            w.kind.name()
        ))),
        Kind::CpuStream {
            host,
            cpu_node,
            mem_node,
            op,
            misses_in_flight,
            cores,
        } => {
            let op = match op {
                Direction::Read => StreamOp::Read,
                Direction::Write => StreamOp::Write,
            };
            let on = (*cpu_node, *mem_node);
            let ids = cpu_streams(tf, sim, host, on, op, *misses_in_flight, *cores)?;
            let mut path = TlpPath {
                under_way: match *cores {
                    0 => None,
                    1 => Some(format!("{misses_in_flight} misses in flight")),
                    n => Some(format!("{n} cores × {misses_in_flight} misses in flight")),
                },
                ..TlpPath::default()
            };
            if let Some(s) = ids.first().and_then(|&id| sim.get::<CpuStream>(id)) {
                // Fills come back the route's reverse way; a writer's write-backs go its way.
                path.add_route(&tf.net, s.spec.route, false);
                if op == StreamOp::Write {
                    path.add_route(&tf.net, s.spec.route, true);
                }
            }
            Ok(Handle::Stream(ids, Box::new(path)))
        }
    }
}

/// `cores` STREAM cores of `host`'s node `on.0` against node `on.1`, each a component
/// keeping `misses` line misses in flight, started now.
fn cpu_streams(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    host: &str,
    on: (u32, u32),
    op: StreamOp,
    misses: u32,
    cores: u32,
) -> Result<Vec<ComponentId>, RunError> {
    let h = tf
        .fabric
        .topo
        .host_by_name(host)
        .ok_or_else(|| RunError(format!("no host `{host}`")))?;
    let per_socket = tf.fabric.topo.platform_of(h).cores_per_package;
    if cores > per_socket {
        return Err(RunError(format!(
            "cores {cores}: host `{host}` has {per_socket} cores per socket"
        )));
    }
    let mut ids = Vec::new();
    for _ in 0..cores {
        let s = tf
            .cpu_stream(h, on.0, on.1, op, misses)
            .map_err(|e| RunError(e.0))?;
        let id = sim.add(s);
        let now = tf.net.now();
        tf.net.wake_at(now, id);
        ids.push(id);
    }
    Ok(ids)
}

/// A device's endless DMA operations, `outstanding` under way.
fn dma_job(
    tf: &mut TimedFabric,
    who: Requester,
    spec: devices::DmaSpec,
    op: Op,
    transfer_bytes: u64,
    outstanding: u32,
) -> Result<DmaJob, RunError> {
    let in_flight = outstanding as u64;
    DmaJob::ops(tf, who, spec, op, transfer_bytes, Ops::Endless, in_flight)
        .map_err(|f| harness::fault_error(tf, f))
}

/// Adds `job` to the simulation, started now.
fn start_dma(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    job: DmaJob,
    path: TlpPath,
) -> Handle {
    let id = sim.add(job);
    let now = tf.net.now();
    tf.net.wake_at(now, id);
    Handle::Dma(id, Box::new(path))
}

impl Handle {
    /// The path of a TLP-level workload whose bound `run` names.
    fn path(&self) -> Option<&TlpPath> {
        match self {
            Handle::Dma(_, p)
            | Handle::Stream(_, p)
            | Handle::Fio(_, p)
            | Handle::PcieBench(_, _, p)
            | Handle::PingPong(_, p) => Some(p),
            Handle::Net(_) => None,
        }
    }
}

/// A fio workload's path: its device's DMA to (reads) or from its memory node, and the
/// device's media.
fn fio_path(tf: &mut TimedFabric, w: &Workload) -> TlpPath {
    let Kind::Fio {
        device,
        mem_node,
        threads,
        iodepth,
        op,
        ..
    } = &w.kind
    else {
        return TlpPath::default();
    };
    // A read lands data in memory: the device writes.
    let write = *op == Direction::Read;
    let mut path = TlpPath {
        under_way: Some(format!("{} outstanding", threads * iodepth)),
        ..TlpPath::default()
    };
    let host = device.split('.').next().unwrap_or_default();
    let Ok(who) = requester(tf, device) else {
        return path;
    };
    path.data = harness::data_path(tf, who, write)
        .map(|(ps, what)| (format!("{device} {what}"), bound::gbyte_s(ps)));
    if let Ok((_, addr)) = tf
        .fabric
        .resolve_address(&format!("{host}.ram.node{mem_node}"), 0)
    {
        path.add_access(tf, who, addr, write);
    }
    path
}

/// Runs the warm-up, starts every workload's statistics afresh, runs the window; returns
/// the hardware counters of the window alone.
fn measure(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    handles: &mut [Handle],
    m: Measure,
    origin: Time,
) -> (Counters, Vec<(u32, u64)>) {
    sim.run_until(tf, origin + m.warmup);
    let mut paced = Vec::new();
    for h in handles.iter() {
        for &p in h.path().map_or(&[][..], |p| &p.pacers) {
            paced.push((p, tf.net.pacer(p).bytes));
        }
    }
    for h in handles {
        match h {
            Handle::Dma(id, _) => sim.get_mut::<DmaJob>(*id).expect("dma").reset_stats(),
            Handle::PcieBench(id, _, _) => sim
                .get_mut::<devices::pciebench::PcieBench>(*id)
                .expect("pcie-bench")
                .reset_stats(),
            Handle::Stream(ids, _) => {
                for &id in ids.iter() {
                    sim.get_mut::<CpuStream>(id).expect("stream").reset_stats();
                }
            }
            Handle::PingPong(id, _) => sim
                .get_mut::<PingPong>(*id)
                .expect("pingpong")
                .reset_stats(),
            Handle::Fio(f, _) => f.reset_stats(sim),
            Handle::Net(_) => {}
        }
    }
    let before = tf.net.counters_sent();
    sim.run_until(tf, origin + m.warmup + m.duration);
    (counters_minus(&tf.net.counters_sent(), &before), paced)
}

fn latency_metrics(metrics: &mut Map<String, Value>, h: &Histogram) {
    if let (Some(p50), Some(p99)) = (h.quantile_ns(0.5), h.quantile_ns(0.99)) {
        metrics.insert("latency_ns_p50".into(), json!(round3(p50)));
        metrics.insert("latency_ns_p99".into(), json!(round3(p99)));
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn metrics(sim: &Sim<TimedFabric>, h: &Handle, window: Time) -> Result<Map<String, Value>, String> {
    let secs = window.as_secs_f64();
    let mut m = Map::new();
    match *h {
        Handle::Net(ref o) => m = o.metrics.clone(),
        Handle::Fio(ref f, _) => {
            let s = f.stats(sim).map_err(|e| e.0)?;
            m.insert(
                "throughput_gbyte_s".into(),
                json!(round3(s.bytes as f64 / secs / 1e9)),
            );
            m.insert("ops_per_sec".into(), json!((s.ops as f64 / secs).round()));
            latency_metrics(&mut m, &s.latency);
            m.insert("errors".into(), json!(s.errors));
            m.insert("faults".into(), json!(s.faults));
        }
        Handle::PcieBench(id, ideal, _) => {
            let b = sim
                .get::<devices::pciebench::PcieBench>(id)
                .expect("pcie-bench");
            m = pciebench::metrics(b, ideal, window);
        }
        Handle::Dma(id, _) => {
            let s = sim.get::<DmaJob>(id).expect("dma").stats();
            m.insert(
                "throughput_gbyte_s".into(),
                json!(round3(s.bytes as f64 / secs / 1e9)),
            );
            m.insert("ops_per_sec".into(), json!((s.ops as f64 / secs).round()));
            latency_metrics(&mut m, &s.op_latency);
            // Accesses that faulted, reads answered with all-ones, writes dropped.
            m.insert("faults".into(), json!(s.faults));
            m.insert("ur_completions".into(), json!(s.ur_completions));
            m.insert("writes_dropped".into(), json!(s.writes_dropped));
        }
        Handle::Stream(ref ids, _) => {
            let mut bytes = 0;
            let mut latency = Histogram::default();
            for &id in ids {
                let s = sim.get::<CpuStream>(id).expect("stream");
                bytes += s.window_bytes;
                latency.merge(&s.window_latency);
            }
            m.insert(
                "throughput_gbyte_s".into(),
                json!(round3(bytes as f64 / secs / 1e9)),
            );
            m.insert(
                "ops_per_sec".into(),
                json!((latency.count() as f64 / secs).round()),
            );
            latency_metrics(&mut m, &latency);
        }
        Handle::PingPong(id, _) => {
            let p = sim.get::<PingPong>(id).expect("pingpong");
            let rounds = p.rounds.count() as f64;
            // Two 4-byte counter writes per round trip.
            m.insert(
                "throughput_gbyte_s".into(),
                json!(round3(rounds * 8.0 / secs / 1e9)),
            );
            m.insert("ops_per_sec".into(), json!((rounds / secs).round()));
            latency_metrics(&mut m, &p.rounds);
            m.insert("wrong_values".into(), json!(p.wrong_values));
            m.insert("poll_reads".into(), json!(p.polls));
        }
    }
    Ok(m)
}
