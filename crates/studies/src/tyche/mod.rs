//! The Tyche study's workloads (`tyche.*` in docs/studies.md, docs/hardware.md §3): the protocol
//! of `systems::tyche` between two hosts of the scenario, as `nudma run`'s `tyche_fio` and
//! `zmio` kinds (`run.rs`), and the words their fields take: where each side keeps its
//! channels (the NIC's node or one node), the initiator's scheduler, the application's
//! buffer placement and the target's I/O.

pub mod run;

use fabric::Topology;

use crate::run::beside::Beside;
use serde_json::json;
use systems::tyche::{
    self, App, AppKind, BufferPlacement, Op, Place, Scheduler, TargetIo, TycheHost, TycheResult,
    TycheSpec,
};

/// Data bytes of a jumbo frame (docs/hardware.md §3: 4 or 8 KB; the larger for every
/// request of 8 KiB and more).
pub const FRAME_BYTES: u64 = 8192;

/// The NICs of a host Tyche bundles, in channel order.
pub const NICS: [&str; 6] = ["nic0", "nic1", "nic2", "nic3", "nic4", "nic5"];

/// A NUMA node as a placement names it: `node0`, `node1`, … (checked against the host
/// when the run starts).
fn node(s: &str) -> Option<u32> {
    s.strip_prefix("node")
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
}

/// Where a side keeps its channels: `nic_local` or one node (`node0`, `node1`, …).
pub fn place(s: &str) -> Result<Place, String> {
    match (s, node(s)) {
        ("nic_local", _) => Ok(Place::NicLocal),
        (_, Some(n)) => Ok(Place::Node(n)),
        (other, None) => Err(format!(
            "`{other}`: use \"nic_local\" or a node (\"node0\", \"node1\", …)"
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
/// `affine` (half the threads and buffers per node, pinned), or one node (`node0`, …).
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
        other => match node(other) {
            Some(n) => BufferPlacement::Node(n),
            None => {
                return Err(format!(
                    "placement `{other}`: use \"balanced\", \"zmio\", \"affine\" or a node (\"node0\", \"node1\", …)"
                ))
            }
        },
    };
    Ok(App {
        kind,
        threads,
        placement,
    })
}

/// Runs `spec` from host `initiator` to host `target` of `topo` over their first
/// `spec.channels` NICs (`nic0`, `nic1`, …); an error when a block arrived wrong.
pub fn run_between(
    topo: &Topology,
    initiator: &str,
    target: &str,
    spec: &TycheSpec,
    beside: &mut Beside,
) -> Result<TycheResult, String> {
    if spec.channels == 0 || spec.channels > NICS.len() {
        return Err(format!(
            "{} NICs: Tyche bundles 1 .. {} (nic0 …)",
            spec.channels,
            NICS.len()
        ));
    }
    let nics = &NICS[..spec.channels];
    let mut host = |name: &str| -> Result<TycheHost, String> {
        let id = topo
            .host_by_name(name)
            .ok_or_else(|| format!("the scenario has no host `{name}`"))?;
        let mut h = TycheHost::new(topo, id, nics)?;
        beside.load(topo, name, &mut h.mem)?;
        Ok(h)
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
