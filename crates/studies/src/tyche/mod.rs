//! Probes of the Tyche study (EXPERIMENTS.md `tyche.*`, REFERENCE.md §3): the protocol of
//! `systems::tyche` between the scenario's initiator and target. A config names
//! placement only: where each side keeps its channels (`initiator` / `target`: the NIC's
//! node or one node), the initiator's scheduler, and the application's buffer placement.

pub mod run;

use std::collections::BTreeMap;

use devices::nic::CoalesceMode;
use fabric::Topology;
use serde_json::json;
use sim::Time;
use systems::tyche::{
    self, App, AppKind, BufferPlacement, Op, Place, RxPath, Scheduler, TargetIo, TycheHost,
    TycheResult, TycheSpec,
};

use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// Steady-state window: 2 ms of warm-up (every thread's first requests done, the slots'
/// and rings' lines in their steady-state places), then 6 ms measured. The study ran
/// 60 s; the model is deterministic apart from the request offsets.
pub const WARMUP: Time = Time::from_us(2000);
pub const WINDOW: Time = Time::from_us(6000);

/// Data bytes of a jumbo frame (REFERENCE.md §3: 4 or 8 KB; the larger for every
/// request of 8 KiB and more).
pub const FRAME_BYTES: u64 = 8192;

/// The NICs of a host Tyche bundles, in channel order.
pub const NICS: [&str; 6] = ["nic0", "nic1", "nic2", "nic3", "nic4", "nic5"];

/// Where a side keeps its channels: `nic_local`, `node0` or `node1`.
pub fn place(s: &str) -> Result<Place, String> {
    match s {
        "nic_local" => Ok(Place::NicLocal),
        "node0" => Ok(Place::Node(0)),
        "node1" => Ok(Place::Node(1)),
        other => Err(format!(
            "`{other}`: use \"nic_local\", \"node0\" or \"node1\""
        )),
    }
}

/// What the target does: `ramdisk` or `noop`.
pub fn target_io(s: &str) -> Result<TargetIo, String> {
    match s {
        "ramdisk" => Ok(TargetIo::Ramdisk),
        "noop" => Ok(TargetIo::NoOp),
        other => Err(format!("target_io `{other}`: use \"ramdisk\" or \"noop\"")),
    }
}

fn place_arg(cx: &ProbeCx, key: &str) -> Result<Place, RunError> {
    place(&cx.arg(key)?).map_err(|e| cx.error(format!("{key} = {e}")))
}

/// The scheduler a config names.
pub fn scheduler(s: &str) -> Result<Scheduler, String> {
    match s {
        "round_robin" => Ok(Scheduler::RoundRobin),
        "numa" => Ok(Scheduler::Numa),
        "numa_spill" => Ok(Scheduler::NumaSpill),
        other => Err(format!(
            "scheduler `{other}`: use \"round_robin\", \"numa\" or \"numa_spill\""
        )),
    }
}

/// An application by name and buffer placement: `fio` (balanced), `zmio` (its skew),
/// `affine` (half the threads and buffers per node, pinned), `node0`/`node1`.
pub fn app(kind: &str, placement: &str, threads: u32, op: Op) -> Result<App, String> {
    let kind = match kind {
        "fio" => AppKind::Fio,
        "zmio" => AppKind::Zmio,
        other => return Err(format!("app `{other}`: use \"fio\" or \"zmio\"")),
    };
    let placement = match placement {
        "balanced" => BufferPlacement::Balanced,
        "zmio" => BufferPlacement::Skewed {
            node0: match op {
                Op::Write => tyche::app::ZMIO_WRITE_NODE0,
                Op::Read => tyche::app::ZMIO_READ_NODE0,
            },
        },
        "affine" => BufferPlacement::Affine,
        "node0" => BufferPlacement::Node(0),
        "node1" => BufferPlacement::Node(1),
        other => {
            return Err(format!(
            "placement `{other}`: use \"balanced\", \"zmio\", \"affine\", \"node0\" or \"node1\""
        ))
        }
    };
    Ok(App {
        kind,
        threads,
        placement,
    })
}

fn number(cx: &ProbeCx, key: &str) -> Result<u64, RunError> {
    if let Some(v) = cx.swept(key) {
        return Ok(v);
    }
    let s = cx.arg(key)?;
    s.parse()
        .map_err(|_| cx.error(format!("{key} = `{s}` is not a whole number")))
}

/// `tyche`: one run; fields `throughput_gbps` (GB/s), `qpi_gbps` (initiator link →
/// GB/s), `qpi0_share`, `requests` (completed in the window), `frames` (data frames
/// received in the window) and `cores_busy` (host.node → cores' worth busy).
pub fn tyche(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let op = Op::parse(&cx.arg("op")?).map_err(|e| cx.error(e))?;
    let threads = number(cx, "threads")?;
    let threads = u32::try_from(threads).map_err(|_| cx.error(format!("threads {threads}")))?;
    let app = app(&cx.arg("app")?, &cx.arg("placement")?, threads, op).map_err(|e| cx.error(e))?;
    let target_io = match cx.arg("target_io")?.as_str() {
        "ramdisk" => TargetIo::Ramdisk,
        "noop" => TargetIo::NoOp,
        other => {
            return Err(cx.error(format!(
                "target_io = `{other}`: use \"ramdisk\" or \"noop\""
            )))
        }
    };
    let spec = TycheSpec {
        op,
        req_bytes: number(cx, "req_kb")? * 1024,
        frame_bytes: FRAME_BYTES,
        app,
        channels: number(cx, "nics")? as usize,
        initiator: place_arg(cx, "initiator_place")?,
        target: place_arg(cx, "target_place")?,
        scheduler: scheduler(&cx.arg("scheduler")?).map_err(|e| cx.error(e))?,
        target_io,
        rx: match cx.arg_opt("rx_path") {
            Some(s) => RxPath::parse(s).map_err(|e| cx.error(e))?,
            None => RxPath::default(),
        },
        coalescing: match cx.arg_opt("coalescing") {
            Some(s) => CoalesceMode::parse(s).map_err(|e| cx.error(e))?,
            None => tyche::rx::COALESCING,
        },
        warmup: WARMUP,
        window: WINDOW,
    };
    let (ini, tgt) = (cx.arg("initiator")?, cx.arg("target")?);
    let r = run_between(&cx.tf.fabric.topo, &ini, &tgt, &spec).map_err(|e| cx.error(e))?;
    cx.set_counters(counters(&r));
    Ok(fields(&r))
}

/// Runs `spec` from host `initiator` to host `target` of `topo` over their first
/// `spec.channels` NICs (`nic0`, `nic1`, …); an error when a block arrived wrong.
pub fn run_between(
    topo: &Topology,
    initiator: &str,
    target: &str,
    spec: &TycheSpec,
) -> Result<TycheResult, String> {
    if spec.channels == 0 || spec.channels > NICS.len() {
        return Err(format!(
            "{} NICs: Tyche bundles 1 .. {} (nic0 …)",
            spec.channels,
            NICS.len()
        ));
    }
    let nics = &NICS[..spec.channels];
    let host = |name: &str| -> Result<TycheHost, String> {
        let id = topo
            .host_by_name(name)
            .ok_or_else(|| format!("the scenario has no host `{name}`"))?;
        TycheHost::new(topo, id, nics)
    };
    let mut ini = host(initiator)?;
    let mut tgt = host(target)?;
    let r = tyche::run(&mut ini, &mut tgt, spec)?;
    if r.mismatches > 0 {
        return Err(format!("{} blocks arrived wrong", r.mismatches));
    }
    Ok(r)
}

/// The run's counters (kept beside the metrics).
pub fn counters(r: &TycheResult) -> serde_json::Value {
    json!({
        "requests": r.requests,
        "requests_total": r.requests_total,
        "frames": r.frames,
        "frames_total": r.frames_total,
        "events": r.events,
        "blocks_verified": r.verified,
        "channel_kb": r.channel_kb,
        "off_node_requests": r.off_node_requests,
        "nic_rx_off_node_bytes": r.nic_rx_off_node_bytes,
        "target_qpi_bytes": r.interconnect_bytes[1],
        "interrupts": r.interrupts,
        "wakeups": r.wakeups,
        "cross_node_wakeups": r.cross_wakeups,
        "control_qpi_bytes": r.control_cross_bytes,
        "busiest_core": r.busiest_core,
    })
}

fn fields(r: &TycheResult) -> Fields {
    BTreeMap::from([
        ("throughput_gbps".to_string(), json!(r.throughput_gbps)),
        ("qpi_gbps".to_string(), json!(r.qpi_gbps)),
        ("qpi0_share".to_string(), json!(r.qpi0_share)),
        ("requests".to_string(), json!(r.requests)),
        ("frames".to_string(), json!(r.frames)),
        ("cores_busy".to_string(), cores_busy(r)),
    ])
}

/// Cores' worth of busy time over the window, by host and node (`initiator.node0` …):
/// memory stalls count as busy, so a node near its core count is limited by its cores
/// or by the memory they wait on, not by a link.
pub fn cores_busy(r: &TycheResult) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (host, nodes) in ["initiator", "target"].iter().zip(&r.cores_busy) {
        for (n, busy) in nodes.iter().enumerate() {
            m.insert(format!("{host}.node{n}"), json!(busy));
        }
    }
    serde_json::Value::Object(m)
}
