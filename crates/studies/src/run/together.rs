//! Workloads of one `nudma run` that share a packet-granular model of their hosts:
//!
//! * TCP_STREAM workloads with the same ends and settings (`tcp_stream`) and memcached
//!   workloads with the same ends and load (`memcached`) each run as one model;
//! * a `pagerank` victim on the server of such a model runs inside it, so the victim and
//!   the I/O take the host's DRAM, LLC and interconnect in time order;
//! * a workload with nothing to run (0 connections or instances) is idle: its row gives
//!   zero throughput, so a sweep can leave it out.
//!
//! A victim on a host another packet-granular workload serves (TCP_RR, UDP, pktgen, a
//! TCP_STREAM with antagonists or a migration) is refused: that model cannot carry it yet.

use std::collections::BTreeMap;

use fabric::Topology;
use serde_json::{json, Map, Value};

use super::beside::{Beside, CpuStreams};
use super::packet::NetOutcome;
use super::spec::{Kind, Measure, RunSpec, Workload};
use super::victim::{self, Victim};
use super::{located, memcached, tcp_stream, RunError};

/// The outcomes of the workloads that run together (or idle), by workload index; the
/// others are left to run alone.
pub(super) fn run_together(
    topo: &Topology,
    spec: &RunSpec,
    window: Measure,
    streams: &CpuStreams,
    seed: u64,
) -> Result<BTreeMap<usize, NetOutcome>, RunError> {
    let ws = &spec.workloads;
    let mut out = BTreeMap::new();
    for (i, w) in ws.iter().enumerate() {
        if let Some(o) = idle(&w.kind) {
            out.insert(i, o);
        }
    }
    let mut victims = victims(topo, ws, window, seed)?;
    let joined: Vec<&str> = victims.keys().copied().collect();
    let tcp = tcp_stream::groups(ws, &joined);
    let mc = memcached::groups(ws, &joined);
    for (group, is_tcp) in tcp
        .into_iter()
        .map(|g| (g, true))
        .chain(mc.into_iter().map(|g| (g, false)))
    {
        let members: Vec<&Workload> = group.iter().map(|&i| &ws[i]).collect();
        let server = server_of(&members[0].kind).expect("a grouped workload has a server");
        let mut victim = victims.remove(server);
        let mut beside = Beside::new(streams);
        let v = victim.as_mut().map(|(_, v)| v);
        let outs = if is_tcp {
            tcp_stream::run_group(topo, &members, window, &mut beside, v)
        } else {
            memcached::run_group(
                topo,
                &members,
                window,
                seed ^ group[0] as u64,
                &mut beside,
                v,
            )
        }
        .map_err(|e| located(&members[0].at, e))?;
        let met = beside.report();
        let names: Vec<&str> = members.iter().map(|w| w.name.as_str()).collect();
        for (&i, mut o) in group.iter().zip(outs) {
            if let Some(m) = &met {
                o.counters["beside_cpu_streams"] = m.clone();
            }
            if let Some((vi, _)) = &victim {
                o.counters["victim"] = Value::from(ws[*vi].name.as_str());
            }
            out.insert(i, o);
        }
        if let Some((vi, v)) = victim {
            let mut o = v.outcome(v.v.edges_per_s(window.duration));
            o.counters["run_with"] = Value::from(names);
            out.insert(vi, o);
        }
    }
    // A victim left over runs alone, unless another model serves its host.
    for (host, (vi, _)) in victims {
        if let Some(w) = ws
            .iter()
            .find(|w| server_of(&w.kind) == Some(host) && idle(&w.kind).is_none())
        {
            return Err(located(
                &ws[vi].at,
                format!(
                    "workload `{}`: a pagerank on `{host}` runs inside a TCP_STREAM or memcached \
                     model of its host; the `{}` workload `{}` serving `{host}` cannot carry it \
                     (run them in separate files)",
                    ws[vi].name,
                    w.kind.name(),
                    w.name
                ),
            ));
        }
    }
    Ok(out)
}

/// The run's `pagerank` victims by host, one per host.
fn victims<'w>(
    topo: &Topology,
    ws: &'w [Workload],
    window: Measure,
    seed: u64,
) -> Result<BTreeMap<&'w str, (usize, Victim)>, RunError> {
    let mut by_host = BTreeMap::new();
    for (i, w) in ws.iter().enumerate() {
        let Kind::PageRank { host, .. } = &w.kind else {
            continue;
        };
        if let Some((other, _)) = by_host.get(host.as_str()) {
            let other: &usize = other;
            return Err(located(
                &w.at,
                format!(
                    "workload `{}`: host `{host}` already runs the pagerank `{}` (one victim per host)",
                    w.name, ws[*other].name
                ),
            ));
        }
        let v = victim::victim(topo, w, window, seed ^ i as u64)
            .map_err(|e| located(&w.at, format!("workload `{}`: {e}", w.name)))?;
        by_host.insert(host.as_str(), (i, v));
    }
    Ok(by_host)
}

/// The server host of a packet-granular network workload.
fn server_of(kind: &Kind) -> Option<&str> {
    match kind {
        Kind::Netperf { server, .. } => Some(server),
        Kind::Memcached { ends, .. } | Kind::UdpPingPong { ends, .. } => Some(&ends.server),
        Kind::Pktgen { host, .. } => Some(host),
        _ => None,
    }
}

/// The row of a workload with nothing to run: zero throughput (and requests).
fn idle(kind: &Kind) -> Option<NetOutcome> {
    let mut metrics = Map::new();
    match kind {
        Kind::Netperf { connections: 0, .. } => {}
        Kind::Memcached { instances: 0, .. } => {
            metrics.insert("kops".into(), json!(0.0));
        }
        _ => return None,
    }
    metrics.insert("throughput_gbit_s".into(), json!(0.0));
    Some(NetOutcome {
        metrics,
        counters: json!({ "idle": true }),
    })
}
