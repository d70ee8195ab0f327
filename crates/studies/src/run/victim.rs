//! The `pagerank` workload of `nudma run`: the PageRank-like memory-bound victim of
//! `host::victim` on a host's memory system (`sim::memsys`, as the network workloads price
//! theirs), its rate in edges per second. Alone on its host it runs on its own model over
//! the `[measure]` window; on the server of a TCP_STREAM or memcached model it runs inside
//! that model (`joins`), so both take DRAM, LLC and interconnect in time order.

use fabric::Topology;
use host::victim::{self, PageRank, PageRankSpec, GAP_PAGERANK};
use serde_json::{json, Map};
use sim::memsys::MemSys;
use sim::Time;

use super::beside::Beside;
use super::bound::{self, Resource};
use super::packet::NetOutcome;
use super::spec::{Kind, Measure, Workload};

/// A `pagerank` workload's victim, not yet started, with what its row reports.
pub struct Victim {
    pub v: PageRank,
    /// Its own warm-up before the window.
    pub warmup: Time,
    threads_per_socket: u32,
    threads: u32,
    edges_per_step: u32,
    /// Its path's resources over the window (`resources`), for its bound.
    pub resources: Vec<Resource>,
}

/// The victim of the `pagerank` workload `w`: its graph's shape is GAP PageRank's
/// (`host::victim::GAP_PAGERANK`, its assumptions stated there); the clock and the score
/// reads a step overlaps (the cores' line-fill buffers) are the host's platform's.
pub fn victim(topo: &Topology, w: &Workload, m: Measure, seed: u64) -> Result<Victim, String> {
    let Kind::PageRank {
        host,
        threads_per_socket,
        warmup,
        seed: own_seed,
    } = &w.kind
    else {
        return Err(format!("workload `{}` is not a pagerank", w.name));
    };
    let id = topo
        .host_by_name(host)
        .ok_or_else(|| format!("no host `{host}`"))?;
    let p = topo.platform_of(id);
    if *threads_per_socket > p.cores_per_package {
        return Err(format!(
            "threads_per_socket {threads_per_socket}: host `{host}` has {} cores per socket \
             (one thread per core)",
            p.cores_per_package
        ));
    }
    let own = warmup.unwrap_or(m.warmup);
    if own > m.warmup {
        return Err(format!(
            "warmup {} ms: longer than the run's warm-up ({} ms)",
            own.as_secs_f64() * 1e3,
            m.warmup.as_secs_f64() * 1e3
        ));
    }
    let spec = PageRankSpec {
        threads_per_socket: *threads_per_socket,
        edges_per_step: host::net::line_fill_buffers(topo, id)?,
        clock_ghz: p.clock_ghz,
        seed: own_seed.unwrap_or(seed),
        ..GAP_PAGERANK
    };
    Ok(Victim {
        v: PageRank::new(spec, p.packages)?,
        warmup: own,
        threads_per_socket: *threads_per_socket,
        threads: threads_per_socket * p.packages,
        edges_per_step: spec.edges_per_step,
        resources: Vec::new(),
    })
}

/// The `pagerank` workload `w` alone on its host's memory system (loaded with the run's
/// streams through `beside`): its own warm-up, then the window `m`.
pub fn pagerank(
    topo: &Topology,
    w: &Workload,
    m: Measure,
    seed: u64,
    beside: &mut Beside,
) -> Result<NetOutcome, String> {
    let Kind::PageRank { host, .. } = &w.kind else {
        return Err(format!("workload `{}` is not a pagerank", w.name));
    };
    let id = topo
        .host_by_name(host)
        .ok_or_else(|| format!("no host `{host}`"))?;
    let mut mem = host::net::memory_system(topo, id)?;
    beside.load(topo, host, &mut mem)?;
    let mut v = victim(topo, w, m, seed)?;
    let edges_per_s = victim::solo(&mut mem, &mut v.v, v.warmup, m.duration);
    v.resources = resources(&mem, host, m.duration);
    Ok(v.outcome(edges_per_s))
}

impl Victim {
    pub fn threads_per_socket(&self) -> u32 {
        self.threads_per_socket
    }

    /// What it measured over the window (its edge rate `edges_per_s`), and its bound:
    /// the busiest DRAM node (`resources`), else latency with its score reads in flight.
    pub fn outcome(&self, edges_per_s: f64) -> NetOutcome {
        let mut metrics = Map::new();
        metrics.insert("edges_per_s".into(), json!(edges_per_s.round()));
        let latency = format!(
            "{} threads × {} misses in flight",
            self.threads, self.edges_per_step
        );
        let resources = bound::insert(&mut metrics, &self.resources, Some(&latency));
        NetOutcome {
            metrics,
            counters: json!({
                "threads": self.threads,
                "edges": self.v.edges,
                "edges_per_step": self.edges_per_step,
                "resources": resources,
            }),
        }
    }
}

/// A victim's path's resources in its host's memory system `mem` after the run (its
/// counters cover the window, `window` long): each socket's threads read their own node,
/// so the DRAM of every node; its cores' busy time the model does not count.
pub fn resources(mem: &MemSys, host: &str, window: Time) -> Vec<Resource> {
    let secs = window.as_secs_f64();
    (0..mem.params().sockets)
        .flat_map(|node| bound::mem_resources(mem, host, &[], node, secs))
        .collect()
}
