//! Workloads of one `nudma run` that share hosts of the packet-granular network stack
//! run in one simulation (`host::net::world::NetWorld`):
//!
//! * TCP_STREAM workloads with the same ends and settings (`tcp_stream`) and memcached
//!   workloads with the same ends and load (`memcached`) each run as one model; a TCP_RR
//!   or UDP ping-pong is a model of its own (`ping_pong`);
//! * models that share a host — TCP_STREAMs with other settings, memcached, a TCP_RR, a
//!   UDP ping-pong or pktgen (`pktgen`) beside a TCP_STREAM — are components of one
//!   world: each host's memory system and each NIC is the world's, so they take DRAM,
//!   LLC, interconnect, PCIe links and port in time order, and their rows'
//!   `mem_bw_gbit_s` is the host's, which they share;
//! * an open-loop `rdma_bench` that shares a host with another of them runs in its world
//!   too, stepped beside the kernel in time order (`run_stepped`) with the world's memory
//!   systems of its hosts lent to it for each event; its RNIC is its own (a closed loop
//!   and RDMA memcached still run alone);
//! * a `pagerank` victim on the server of such a model runs beside it in the world;
//! * a workload with nothing to run (0 connections or instances) is idle: its row gives
//!   zero throughput, so a sweep can leave it out.
//!
//! A victim on a host another packet-granular workload serves (a TCP_STREAM, TCP_RR or UDP
//! ping-pong with antagonists, a migration) is refused: that model cannot carry it yet.

use std::collections::BTreeMap;

use fabric::{ScenarioError, Topology};
use host::net::memcached::Memcached;
use host::net::pktgen::Generator;
use host::net::stream::Streams;
use host::net::world::{NetWorld, SharedMem};
use host::rdma::bench::{BenchResult, BenchRun, Side};
use serde_json::{json, Map, Value};
use sim::component::Sim;
use sim::Time;

use super::beside::{Beside, CpuStreams};
use super::bound::Resource;
use super::packet::{Group, NetOutcome};
use super::rdma::BenchParts;
use super::spec::rdma::RdmaBench;
use super::spec::{Kind, Measure, RunSpec, Workload};
use super::victim::{self, Victim};
use super::{located, memcached, net, ping_pong, pktgen, rdma, tcp_stream, RunError};

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
    let groups: Vec<(Group, Model)> = tcp_stream::groups(ws)
        .into_iter()
        .map(|g| (g, Model::Tcp))
        .chain(
            memcached::groups(ws)
                .into_iter()
                .map(|g| (g, Model::Memcached)),
        )
        .chain(rdma::groups(ws).into_iter().map(|g| (g, Model::Rdma)))
        .chain(
            ping_pong::groups(ws)
                .into_iter()
                .map(|g| (g, Model::PingPong)),
        )
        .chain(pktgen::groups(ws).into_iter().map(|g| (g, Model::Pktgen)))
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
        let kinds: Vec<Model> = cluster.iter().map(|&g| groups[g].1).collect();
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
            let server = clustered
                .iter()
                .find(|g| g.members.contains(&i))
                .expect("a member")
                .server;
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
                    "workload `{}`: a pagerank on `{host}` runs beside a TCP_STREAM, TCP_RR, \
                     UDP, pktgen or memcached model of its host; the `{}` workload `{}` \
                     serving `{host}` cannot carry it (run them in separate files)",
                    ws[vi].name,
                    w.kind.name(),
                    w.name
                ),
            ));
        }
    }
    Ok(out)
}

/// What a group runs as: a component of the world's kernel (TCP_STREAM, memcached, TCP_RR,
/// UDP ping-pong, pktgen), or an RDMA benchmark stepped beside it in time order
/// (`run_world`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    Tcp,
    Memcached,
    Rdma,
    PingPong,
    Pktgen,
}

/// The groups (indices into `groups`) that run in one world: those that must, or whose
/// server has a victim, and with them every group that shares a host with one of them.
fn clusters(groups: &[(Group, Model)], victim_hosts: &[&str]) -> Vec<Vec<usize>> {
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
    models: &[Model],
    window: Measure,
    streams: &CpuStreams,
    seed: u64,
    victims: &mut [(usize, Victim)],
) -> Result<Vec<(usize, NetOutcome)>, RunError> {
    enum Rows {
        Tcp(tcp_stream::Rows),
        Mc(memcached::Rows),
        Rdma(usize),
        PingPong(usize),
        Pktgen(usize),
    }
    let mut world = NetWorld::new(seed);
    let mut sim = Sim::new();
    let mut built = Vec::new();
    let mut rdmas: Vec<Stepped> = Vec::new();
    let mut shared_servers: Vec<(&str, SharedMem)> = Vec::new();
    for (g, &model) in groups.iter().zip(models) {
        let members: Vec<&Workload> = g.members.iter().map(|&i| &ws[i]).collect();
        let victim = victims
            .iter()
            .find(|(vi, _)| victim_host(&ws[*vi]) == g.server)
            .map(|(_, v)| v);
        let mut beside = Beside::new(streams);
        let at = &members[0].at;
        let (rows, server) = match model {
            Model::Tcp => {
                let (s, rows) =
                    tcp_stream::build_group(topo, &members, window, &mut beside, victim)
                        .map_err(|e| named(members[0], at, e))?;
                let id = sim.add(s);
                let side = rows.server();
                let server = sim
                    .with(&mut world, id, |s: &mut Streams, w| {
                        s.start(w, id).map(|()| s.at(side))
                    })
                    .expect("a component")
                    .map_err(|e| located(at, e))?;
                ((id, Rows::Tcp(rows)), server.into())
            }
            Model::Memcached => {
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
                ((id, Rows::Mc(rows)), server.into())
            }
            Model::Rdma => {
                let Kind::RdmaBench(b) = &members[0].kind else {
                    unreachable!("RDMA groups are rdma_bench workloads")
                };
                let rseed = seed ^ g.members[0] as u64;
                let mut parts = BenchParts::new(topo, b, window, rseed, &mut beside)
                    .map_err(|e| named(members[0], at, e))?;
                let ns = world
                    .start_model(window.warmup, window.duration)
                    .map_err(|e| named(members[0], at, e))?;
                parts.client.ns = ns;
                parts.server.ns = ns;
                let host = |name: &str| topo.host_by_name(name).expect("a checked host");
                let at = [
                    world.join_memory(host(&b.client), &parts.client.mem),
                    world.join_memory(host(&b.server), &parts.server.mem),
                ];
                rdmas.push(Stepped {
                    parts,
                    b,
                    workload: g.members[0],
                    seed: rseed,
                    at,
                });
                ((0, Rows::Rdma(rdmas.len() - 1)), at[1])
            }
            Model::PingPong => {
                let (p, pf) = ping_pong::build(topo, members[0], window, &mut beside)
                    .map_err(|e| named(members[0], at, e))?;
                let (id, server) = p.start(&mut sim, &mut world).map_err(|e| located(at, e))?;
                ((id, Rows::PingPong(pf)), server.into())
            }
            Model::Pktgen => {
                let (g, pf) = pktgen::build(topo, members[0], window, &mut beside)
                    .map_err(|e| named(members[0], at, e))?;
                let id = sim.add(g);
                let host = sim
                    .with(&mut world, id, |g: &mut Generator, w| {
                        g.start(w, id).map(|()| g.at())
                    })
                    .expect("a component")
                    .map_err(|e| located(at, e))?;
                ((id, Rows::Pktgen(pf)), host.into())
            }
        };
        shared_servers.push((g.server, server));
        built.push((g, rows, beside.report()));
    }
    // Each model checked its own cores as it was built; together they must fit too.
    if groups.len() > 1 {
        check_cores(topo, ws, groups, victims)?;
    }
    let victim_ids: Vec<usize> = victims.iter().map(|(vi, _)| *vi).collect();
    for (vi, v) in victims.iter_mut() {
        let host = victim_host(&ws[*vi]);
        let (_, at) = shared_servers
            .iter()
            .find(|(h, _)| *h == host)
            .expect("a server's victim");
        v.v.start_at(window.warmup - v.warmup);
        world.beside(*at, &mut v.v);
    }
    let end = window.warmup + window.duration;
    let results = run_stepped(&mut world, &mut sim, &mut rdmas, end)
        .map_err(|(i, e)| named(&ws[i], &ws[i].at, e))?;
    // The victims' resources, read now and given to them once the world lets them go.
    let measured: Vec<Vec<Resource>> = victim_ids
        .iter()
        .map(|vi| {
            let host = victim_host(&ws[*vi]);
            let (_, at) = shared_servers
                .iter()
                .find(|(h, _)| *h == host)
                .expect("a server's victim");
            victim::resources(world.memory(*at), host, window.duration)
        })
        .collect();
    let mut out = Vec::new();
    let secs = window.duration.as_secs_f64();
    for (g, (id, rows), met) in built {
        let outs = match rows {
            Rows::Tcp(rows) => {
                let s: &Streams = sim.get(id).expect("a component");
                rows.outcomes(topo, s, &world, window)
            }
            Rows::Mc(rows) => {
                let m: &Memcached = sim.get(id).expect("a component");
                let mut outs = rows
                    .outcomes(&m.result(&world), window)
                    .map_err(|e| located(&ws[g.members[0]].at, e))?;
                let server = (world.mem(m.server()), world.nic(m.server()));
                for (o, &i) in outs.iter_mut().zip(&g.members) {
                    net::add_bound(o, topo, &ws[i].kind, server, secs);
                }
                outs
            }
            Rows::Rdma(k) => {
                let o = rdmas[k]
                    .parts
                    .outcome(&results[k], world.memory(rdmas[k].at[1]));
                vec![o.map_err(|e| located(&ws[g.members[0]].at, e))?]
            }
            Rows::PingPong(pf) => {
                let (o, at) = ping_pong::outcome(&sim, id, pf);
                let mut o = o.map_err(|e| located(&ws[g.members[0]].at, e))?;
                let server = (world.mem(at), world.nic(at));
                net::add_bound(&mut o, topo, &ws[g.members[0]].kind, server, secs);
                vec![o]
            }
            Rows::Pktgen(pf) => {
                let gen: &Generator = sim.get(id).expect("a component");
                let mut o = net::pktgen_outcome(&gen.result(&world), pf);
                let host = (world.mem(gen.at()), world.nic(gen.at()));
                net::add_bound(&mut o, topo, &ws[g.members[0]].kind, host, secs);
                vec![o]
            }
        };
        for (&i, mut o) in g.members.iter().zip(outs) {
            if let Some(m) = &met {
                o.counters["beside_cpu_streams"] = m.clone();
            }
            out.push((i, o));
        }
    }
    drop((sim, world));
    for ((_, v), r) in victims.iter_mut().zip(measured) {
        v.resources = r;
    }
    Ok(out)
}

/// Runs the world's models through `end` with the RDMA benchmarks stepped beside its
/// kernel: before each benchmark event, the kernel's events until then, and the
/// benchmark is lent the world's memory systems of its hosts for the event. Each run's
/// result; an error names the workload (index) whose run failed.
fn run_stepped<'b>(
    world: &mut NetWorld<'b>,
    sim: &mut Sim<NetWorld<'b>>,
    rdmas: &mut [Stepped],
    end: Time,
) -> Result<Vec<BenchResult>, (usize, String)> {
    let mut runs = Vec::new();
    for r in rdmas.iter_mut() {
        let (at, i) = (r.at, r.workload);
        // The regions and the server's threads start on the world's memory systems.
        world.lend_memory(at[0], &mut r.parts.client.mem);
        world.lend_memory(at[1], &mut r.parts.server.mem);
        let mut run = r.parts.start(r.b, r.seed).map_err(|e| (i, e))?;
        run.share_memory();
        lend(world, &mut run, at);
        runs.push((run, at, i));
    }
    loop {
        let next = runs
            .iter_mut()
            .enumerate()
            .filter_map(|(k, (run, ..))| run.next_time().map(|t| (t, k)))
            .min();
        let Some((t, k)) = next else { break };
        sim.run_until(world, t);
        world.advance_beside(t);
        let (run, at, i) = &mut runs[k];
        lend(world, run, *at);
        let stepped = run.step();
        lend(world, run, *at);
        stepped.map_err(|e| (*i, e))?;
    }
    world.run_through(sim, end);
    Ok(runs.into_iter().map(|(run, ..)| run.finish()).collect())
}

/// An RDMA benchmark of a world: its set-up, workload (index and seed) and its client's
/// and server's memory systems in the world.
struct Stepped<'w> {
    parts: BenchParts,
    b: &'w RdmaBench,
    workload: usize,
    seed: u64,
    at: [SharedMem; 2],
}

/// Swaps the world's memory systems of `run`'s client and server (`at`) with the run's.
fn lend(world: &mut NetWorld<'_>, run: &mut BenchRun<'_>, at: [SharedMem; 2]) {
    world.lend_memory(at[0], &mut run.host_mut(Side::Client).mem);
    world.lend_memory(at[1], &mut run.host_mut(Side::Server).mem);
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
                Kind::UdpPingPong { ends, .. } => {
                    (ends.server.as_str(), ends.cpu_node, ends.mem_node, 1)
                }
                Kind::Pktgen {
                    host,
                    cpu_node,
                    mem_node,
                    ..
                } => (host.as_str(), *cpu_node, *mem_node, 1),
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
    super::bound::insert(&mut metrics, &[], None);
    Some(NetOutcome {
        metrics,
        counters: json!({ "idle": true }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group<'a>(server: &'a str, client: &'a str, together: bool) -> (Group<'a>, Model) {
        let g = Group {
            members: Vec::new(),
            server,
            client,
            together,
        };
        (g, Model::Tcp)
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
