//! Workloads of one `nudma run` that share hosts of the packet-granular network stack
//! run in one simulation (`host::net::world::NetWorld`):
//!
//! * TCP_STREAM workloads with the same ends and settings (`tcp_stream`) and memcached
//!   workloads with the same ends and load (`memcached`) each run as one model;
//! * models that share a host — TCP_STREAMs with other settings, memcached beside a
//!   TCP_STREAM — are components of one world: each host's memory system and each NIC
//!   is the world's, so they take DRAM, LLC, interconnect, PCIe links and port in time
//!   order, and their rows' `mem_bw_gbit_s` is the host's, which they share;
//! * a `pagerank` victim on the server of such a model runs beside it in the world;
//! * a workload with nothing to run (0 connections or instances) is idle: its row gives
//!   zero throughput, so a sweep can leave it out.
//!
//! A victim on a host another packet-granular workload serves (TCP_RR, UDP, pktgen, a
//! TCP_STREAM with antagonists or a migration) is refused: that model cannot carry it yet.

use std::collections::BTreeMap;

use fabric::{ScenarioError, Topology};
use host::net::memcached::Memcached;
use host::net::stream::Streams;
use host::net::world::{NetWorld, Shared};
use serde_json::{json, Map, Value};
use sim::component::Sim;

use super::beside::{Beside, CpuStreams};
use super::packet::{Group, NetOutcome};
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
    let groups: Vec<(Group, bool)> = tcp_stream::groups(ws)
        .into_iter()
        .map(|g| (g, true))
        .chain(memcached::groups(ws).into_iter().map(|g| (g, false)))
        .collect();
    let victim_hosts: Vec<&str> = victims.keys().copied().collect();
    for cluster in clusters(&groups, &victim_hosts) {
        let members: Vec<usize> = cluster
            .iter()
            .flat_map(|&g| groups[g].0.members.iter().copied())
            .collect();
        let servers: Vec<&str> = cluster.iter().map(|&g| groups[g].0.server).collect();
        let mut mine: Vec<(usize, Victim)> = Vec::new();
        for host in servers {
            if let Some(v) = victims.remove(host) {
                mine.push(v);
            }
        }
        let clustered: Vec<&Group> = cluster.iter().map(|&g| &groups[g].0).collect();
        let kinds: Vec<bool> = cluster.iter().map(|&g| groups[g].1).collect();
        let outs = run_world(
            topo, ws, &clustered, &kinds, window, streams, seed, &mut mine,
        )?;
        let names = |skip: usize| -> Vec<&str> {
            members
                .iter()
                .filter(|&&o| o != skip)
                .map(|&o| ws[o].name.as_str())
                .collect()
        };
        for (i, mut o) in outs {
            if members.len() > 1 {
                o.counters["run_with"] = Value::from(names(i));
            }
            let server = server_of(&ws[i].kind).expect("a grouped workload has a server");
            if let Some((vi, _)) = mine.iter().find(|(vi, _)| victim_host(&ws[*vi]) == server) {
                o.counters["victim"] = Value::from(ws[*vi].name.as_str());
            }
            out.insert(i, o);
        }
        for (vi, v) in mine {
            let mut o = v.outcome(v.v.edges_per_s(window.duration));
            o.counters["run_with"] = Value::from(names(vi));
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
                    "workload `{}`: a pagerank on `{host}` runs beside a TCP_STREAM or memcached \
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

/// The groups (indices into `groups`) that run in one world: those that must, or whose
/// server has a victim, and with them every group that shares a host with one of them.
fn clusters(groups: &[(Group, bool)], victim_hosts: &[&str]) -> Vec<Vec<usize>> {
    let meets = |a: &Group, b: &Group| {
        [a.server, a.client]
            .iter()
            .any(|h| *h == b.server || *h == b.client)
    };
    let n = groups.len();
    let mut cluster: Vec<usize> = (0..n).collect();
    // Join every pair that meets (few groups: quadratic is fine), smallest index wins.
    let mut changed = true;
    while changed {
        changed = false;
        for a in 0..n {
            for b in a + 1..n {
                if meets(&groups[a].0, &groups[b].0) && cluster[a] != cluster[b] {
                    let (keep, drop) = (cluster[a].min(cluster[b]), cluster[a].max(cluster[b]));
                    cluster
                        .iter_mut()
                        .filter(|c| **c == drop)
                        .for_each(|c| *c = keep);
                    changed = true;
                }
            }
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    for c in 0..n {
        let members: Vec<usize> = (0..n).filter(|&g| cluster[g] == c).collect();
        let runs = members.len() > 1
            || members.iter().any(|&g| {
                let g = &groups[g].0;
                g.together || victim_hosts.contains(&g.server)
            });
        if !members.is_empty() && runs {
            out.push(members);
        }
    }
    out
}

/// Runs the groups of one cluster in one `NetWorld`, the victims of their servers beside
/// them; the outcome of every member, by workload index.
#[allow(clippy::too_many_arguments)]
fn run_world(
    topo: &Topology,
    ws: &[Workload],
    groups: &[&Group],
    is_tcp: &[bool],
    window: Measure,
    streams: &CpuStreams,
    seed: u64,
    victims: &mut [(usize, Victim)],
) -> Result<Vec<(usize, NetOutcome)>, RunError> {
    enum Rows {
        Tcp(tcp_stream::Rows),
        Mc(memcached::Rows),
    }
    let mut world = NetWorld::new(seed);
    let mut sim = Sim::new();
    let mut built = Vec::new();
    let mut shared_servers: Vec<(&str, Shared)> = Vec::new();
    for (g, &tcp) in groups.iter().zip(is_tcp) {
        let members: Vec<&Workload> = g.members.iter().map(|&i| &ws[i]).collect();
        let victim = victims
            .iter()
            .find(|(vi, _)| victim_host(&ws[*vi]) == g.server)
            .map(|(_, v)| v);
        let mut beside = Beside::new(streams);
        let at = &members[0].at;
        let (id, rows, server) = if tcp {
            let (s, rows) = tcp_stream::build_group(topo, &members, window, &mut beside, victim)
                .map_err(|e| named(members[0], at, e))?;
            let id = sim.add(s);
            let side = rows.server();
            let server = sim
                .with(&mut world, id, |s: &mut Streams, w| {
                    s.start(w, id).map(|()| s.at(side))
                })
                .expect("a component")
                .map_err(|e| located(at, e))?;
            (id, Rows::Tcp(rows), server)
        } else {
            let mseed = seed ^ g.members[0] as u64;
            let (m, rows) =
                memcached::build_group(topo, &members, window, mseed, &mut beside, victim)
                    .map_err(|e| named(members[0], at, e))?;
            let id = sim.add(m);
            let server = sim
                .with(&mut world, id, |m: &mut Memcached, w| {
                    m.start(w, id).map(|()| m.server())
                })
                .expect("a component")
                .map_err(|e| located(at, e))?;
            (id, Rows::Mc(rows), server)
        };
        shared_servers.push((g.server, server));
        built.push((g, id, rows, beside.report()));
    }
    // Each model checked its own cores as it was built; together they must fit too.
    if groups.len() > 1 {
        check_cores(topo, ws, groups, victims)?;
    }
    for (vi, v) in victims.iter_mut() {
        let host = victim_host(&ws[*vi]);
        let (_, at) = shared_servers
            .iter()
            .find(|(h, _)| *h == host)
            .expect("a server's victim");
        v.v.start_at(window.warmup - v.warmup);
        world.beside(*at, &mut v.v);
    }
    world.run_through(&mut sim, window.warmup + window.duration);
    let mut out = Vec::new();
    for (g, id, rows, met) in built {
        let outs = match rows {
            Rows::Tcp(rows) => {
                let s: &Streams = sim.get(id).expect("a component");
                rows.outcomes(&s.result(&world), window)
            }
            Rows::Mc(rows) => {
                let m: &Memcached = sim.get(id).expect("a component");
                rows.outcomes(&m.result(&world), window)
                    .map_err(|e| located(&ws[g.members[0]].at, e))?
            }
        };
        for (&i, mut o) in g.members.iter().zip(outs) {
            if let Some(m) = &met {
                o.counters["beside_cpu_streams"] = m.clone();
            }
            out.push((i, o));
        }
    }
    Ok(out)
}

/// One connection or instance per core across the models of one world: on each socket
/// of each server, the TCP_STREAM connections, memcached instances and victim threads
/// fit its cores (each model checks its own first).
fn check_cores(
    topo: &Topology,
    ws: &[Workload],
    groups: &[&Group],
    victims: &[(usize, Victim)],
) -> Result<(), RunError> {
    let mut on: BTreeMap<(&str, u32), (u32, usize)> = BTreeMap::new();
    for g in groups {
        for &i in &g.members {
            let (server, cpu_node, mem_node, n) = match &ws[i].kind {
                Kind::Netperf {
                    server,
                    cpu_node,
                    mem_node,
                    connections,
                    ..
                } => (server.as_str(), *cpu_node, *mem_node, *connections),
                Kind::Memcached {
                    ends, instances, ..
                } => (
                    ends.server.as_str(),
                    ends.cpu_node,
                    ends.mem_node,
                    *instances,
                ),
                _ => continue,
            };
            let (socket, _) = super::packet::placement(topo, server, cpu_node, mem_node)
                .map_err(|e| located(&ws[i].at, format!("workload `{}`: {e}", ws[i].name)))?;
            let e = on.entry((server, socket)).or_insert((0, i)); // located at the first
            e.0 += n;
        }
    }
    for ((server, socket), (n, first)) in on {
        let h = topo.host_by_name(server).expect("placed");
        let cores = topo.platform_of(h).cores_per_package;
        let v = victims
            .iter()
            .find(|(vi, _)| victim_host(&ws[*vi]) == server)
            .map_or(0, |(_, v)| v.threads_per_socket());
        if n + v > cores {
            return Err(located(
                &ws[first].at,
                format!(
                    "the network workloads run together on socket {socket} of host `{server}` \
                     have {n} connections and instances{}, and it has {cores} cores (one per \
                     core)",
                    if v > 0 {
                        format!(" beside the victim's {v} threads")
                    } else {
                        String::new()
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// `e`, located at `at` and naming workload `w` unless it names one already.
fn named(w: &Workload, at: &ScenarioError, e: String) -> RunError {
    if e.starts_with("workload `") {
        located(at, e)
    } else {
        located(at, format!("workload `{}`: {e}", w.name))
    }
}

/// The host of a `pagerank` workload.
fn victim_host(w: &Workload) -> &str {
    match &w.kind {
        Kind::PageRank { host, .. } => host,
        _ => unreachable!("victims are pagerank workloads"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn group<'a>(server: &'a str, client: &'a str, together: bool) -> (Group<'a>, bool) {
        let g = Group {
            members: Vec::new(),
            server,
            client,
            together,
        };
        (g, true)
    }

    #[test]
    fn groups_that_share_a_host_run_in_one_world_and_a_lone_one_runs_alone() {
        let gs = [
            group("s1", "c1", false),
            group("s2", "c2", false),
            group("s2", "c1", false), // joins the first two through c1 and s2
            group("s3", "c3", false), // alone: runs on its own model
            group("s4", "c4", true),  // must run as one model
            group("s5", "c5", false), // its server has a victim
        ];
        assert_eq!(
            clusters(&gs, &["s5"]),
            vec![vec![0, 1, 2], vec![4], vec![5]]
        );
        assert_eq!(clusters(&gs[3..4], &[]), Vec::<Vec<usize>>::new());
    }
}
