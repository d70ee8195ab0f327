//! `pcie_lat` and `pcie_bw` workloads: pcie-bench's benchmark program
//! (`devices::pciebench::PcieBench`) on a device of the scenario, its host buffer mapped
//! as pcie-bench's kernel module maps it (`dma_map_single`, both directions) and its
//! cache state prepared before time starts, as pcie-bench prepares it once before a run.

use devices::pciebench::{BenchSpec, Engine, PcieBench, Test};
use fabric::{Endpoint, NodeKind, Requester};
use serde_json::{json, Map, Value};
use sim::component::Sim;
use sim::net::ComponentId;
use sim::pcie;
use sim::timed::{ns, CacheState, TimedFabric};
use sim::Time;
use systems::smartio::Cluster;

use super::bound::TlpPath;
use super::spec::pciebench::{Cache, PcieBench as Spec};
use crate::harness::{self, RunError};

use fabric::scenario::DMA_ENGINE_KEYS as ENGINE_KEYS;

/// Builds the benchmark (not started): maps the window, prepares its cache state.
pub(super) fn build(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    cluster: Option<&mut Cluster>,
    w: &Spec,
    seed: u64,
) -> Result<(ComponentId, bool, TlpPath), RunError> {
    let spec = BenchSpec {
        test: w.test,
        bytes: w.bytes,
        window: w.window,
        pattern: w.pattern,
        host_offset: w.host_offset,
        seed: w.seed ^ seed,
    };
    let span = spec.span() + spec.unit();
    let (who, bus, dma) = super::dma_requester(tf, cluster, &w.device, &w.target, 0, span)?;
    let (engine, ideal) = engine(tf, who, dma, &w.device)?;
    prepare_cache(tf, who, w, span)?;
    let path = path(tf, who, bus, &engine, w, ideal);
    let bench =
        PcieBench::new(tf, who, engine, spec, bus).map_err(|f| harness::fault_error(tf, f))?;
    let id = sim.add(bench);
    let now = tf.net.now();
    tf.net.wake_at(now, id);
    Ok((id, ideal, path))
}

/// The benchmark's path: the links and memory its transfers cross (a read's data comes
/// back on the reverse of its requests' wires), its engine's own pace for a transfer of
/// its size (not an ideal engine's: it has none), and what it keeps under way.
fn path(
    tf: &mut TimedFabric,
    who: Requester,
    bus: u64,
    engine: &Engine,
    w: &Spec,
    ideal: bool,
) -> TlpPath {
    let (reads, writes) = match w.test {
        Test::LatRd | Test::BwRd => (true, false),
        Test::BwWr => (false, true),
        Test::LatWrRd | Test::BwRw => (true, true),
    };
    let under_way = match w.test {
        Test::LatRd | Test::LatWrRd => "1 transfer in flight".to_string(),
        Test::BwRd | Test::BwRw => format!("{} reads in flight", engine.dma.max_reads),
        Test::BwWr => "1 write command at a time".to_string(),
    };
    let mut path = TlpPath {
        under_way: Some(under_way),
        ..TlpPath::default()
    };
    if reads {
        path.add_access(tf, who, bus, false);
    }
    if writes {
        path.add_access(tf, who, bus, true);
    }
    // A transfer of `b` bytes takes TLPs of at most `max` bytes, `gap` apart.
    let b = u64::from(w.bytes).max(1);
    let per = |max: u32, gap: Time| b.div_ceil(u64::from(max.max(1))) as f64 * gap.as_ns_f64();
    let pace_ns = match w.test {
        Test::BwRd => per(engine.dma.mrrs, engine.read_gap),
        Test::BwWr => per(engine.dma.mps, engine.write_tlp_gap).max(engine.write_gap.as_ns_f64()),
        _ => 0.0,
    };
    if !ideal && pace_ns > 0.0 {
        let what = if reads { "read" } else { "write" };
        path.data = Some((
            format!("{} engine {what} pace", w.device),
            b as f64 / pace_ns,
        ));
    }
    path
}

/// The device's engine from its timing table (and whether it is the ideal one).
fn engine(
    tf: &TimedFabric,
    who: Requester,
    dma: devices::DmaSpec,
    device: &str,
) -> Result<(Engine, bool), RunError> {
    // Without them the engine adds nothing to PCIe (`Engine::ideal`), and the row says so;
    // the scenario's loader has checked they come all or none.
    let values: Vec<Option<f64>> = ENGINE_KEYS
        .iter()
        .map(|k| harness::device_param(tf, who, k).ok())
        .collect();
    if values.iter().all(Option::is_none) {
        return Ok((Engine::ideal(dma), true));
    }
    let missing: Vec<&str> = ENGINE_KEYS
        .iter()
        .zip(&values)
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| *k)
        .collect();
    if !missing.is_empty() {
        return Err(RunError(format!(
            "device `{device}` states some of its DMA engine's pace but not {}: give all of {} or none (an ideal engine)",
            missing.join(", "),
            ENGINE_KEYS.join(", ")
        )));
    }
    let v = |i: usize| values[i].expect("checked");
    let engine = Engine {
        dma: devices::DmaSpec {
            mps: dma.mps.min(v(0) as u32),
            ..dma
        },
        read_gap: ns(v(1)),
        write_gap: ns(v(2)),
        write_tlp_gap: ns(v(3)),
        read_command: ns(v(4)),
        read_complete: ns(v(5)),
        write_command: ns(v(6)),
        store_ps_per_kib: pcie::ps_per_kib_at(v(7)),
    };
    Ok((engine, false))
}

/// Leaves the window's lines where the workload's cache state says.
fn prepare_cache(
    tf: &mut TimedFabric,
    who: Requester,
    w: &Spec,
    span: u64,
) -> Result<(), RunError> {
    let Endpoint::Ram { host, node } = tf
        .fabric
        .resolve(&w.target)
        .map_err(RunError::from(&w.target))?
    else {
        return Err(RunError(format!(
            "`{}` is not host memory: pcie-bench's buffer is a RAM node (`host.ram.node0`)",
            w.target
        )));
    };
    let platform = tf.fabric.topo.platform_of(host);
    let home = platform.package_of_node(node);
    let state = match w.cache {
        Cache::Cold | Cache::Dthrash => CacheState::Cold,
        Cache::Hwarm => {
            let cpu_node = w.control_node.unwrap_or(node);
            if cpu_node >= platform.packages * platform.nodes_per_package {
                return Err(RunError(format!(
                    "control_node {cpu_node}: platform `{}` has CPU nodes 0 .. {}",
                    platform.name,
                    platform.packages * platform.nodes_per_package - 1
                )));
            }
            CacheState::Cached {
                package: platform.package_of_node(cpu_node),
            }
        }
        // The device's writes allocate in its socket's LLC through DDIO only when the
        // memory is that socket's; elsewhere they go to memory.
        Cache::Dwarm => match device_package(tf, who) {
            Some(p) if p == home => CacheState::Ddio,
            _ => CacheState::Cold,
        },
    };
    tf.prepare_cache(host, node, 0, span, state);
    Ok(())
}

/// The package whose root complex the device hangs under.
fn device_package(tf: &TimedFabric, who: Requester) -> Option<u32> {
    let Requester::Function(f) = who else {
        return None;
    };
    let topo = &tf.fabric.topo;
    let n = topo.node(f);
    let NodeKind::RootComplex { vertex } = topo.node(n.root).kind else {
        return None;
    };
    topo.platform_of(n.host).nearest_package(vertex)
}

/// A benchmark's row: pcie-bench's figures over the window.
pub(super) fn metrics(b: &PcieBench, ideal: bool, window: Time) -> Map<String, Value> {
    let s = b.stats();
    let secs = window.as_secs_f64();
    let mut m = Map::new();
    // In 10^9 bit/s like pcie-bench's tables; RW counts one direction, as pcie-bench does.
    let per_direction = if b.is_read_write() { 2.0 } else { 1.0 };
    m.insert(
        "bw_gbit_s".into(),
        json!(super::round3(
            s.bytes as f64 * 8.0 / per_direction / secs / 1e9
        )),
    );
    m.insert(
        "transfers_per_sec".into(),
        json!((s.transfers as f64 / secs).round()),
    );
    let q = |p: f64| s.latency.quantile_ns(p).map(super::round3);
    if let (Some(min), Some(med), Some(p95), Some(p999)) = (q(0.0), q(0.5), q(0.95), q(0.999)) {
        m.insert("min_ns".into(), json!(min));
        m.insert("median_ns".into(), json!(med));
        m.insert("p95_ns".into(), json!(p95));
        m.insert("p999_ns".into(), json!(p999));
    }
    m.insert("faults".into(), json!(s.faults));
    m.insert(
        "engine".into(),
        json!(if ideal { "ideal" } else { "device timing" }),
    );
    m
}
