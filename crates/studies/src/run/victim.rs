//! The `pagerank` workload of `nudma run`: the PageRank-like memory-bound victim of
//! `host::victim` alone on a host's memory system (`sim::memsys`, as the network
//! workloads price theirs), its rate in edges per second. Like a network workload it runs
//! on its own model of its host over the `[measure]` window, not on the TLP-level fabric.

use fabric::Topology;
use host::victim::{self, PageRank, PageRankSpec, GAP_PAGERANK};
use serde_json::{json, Map};

use super::beside::Beside;
use super::net::NetOutcome;
use super::spec::Measure;

/// `threads_per_socket` victim threads on every socket of `host`, over the window `m`.
/// The graph's shape is GAP PageRank's (`host::victim::GAP_PAGERANK`, its assumptions
/// stated there); the clock and the score reads a step overlaps (the cores' line-fill
/// buffers) are the host's platform's.
pub fn pagerank(
    topo: &Topology,
    host: &str,
    threads_per_socket: u32,
    m: Measure,
    seed: u64,
    beside: &mut Beside,
) -> Result<NetOutcome, String> {
    let id = topo
        .host_by_name(host)
        .ok_or_else(|| format!("no host `{host}`"))?;
    let p = topo.platform_of(id);
    if threads_per_socket > p.cores_per_package {
        return Err(format!(
            "threads_per_socket {threads_per_socket}: host `{host}` has {} cores per socket \
             (one thread per core)",
            p.cores_per_package
        ));
    }
    let mut mem = host::net::memory_system(topo, id)?;
    beside.load(topo, host, &mut mem)?;
    let spec = PageRankSpec {
        threads_per_socket,
        edges_per_step: mem.params().line_fill_buffers,
        clock_ghz: p.clock_ghz,
        seed,
        ..GAP_PAGERANK
    };
    let mut v = PageRank::new(spec, p.packages)?;
    let edges_per_s = victim::solo(&mut mem, &mut v, m.warmup, m.duration);
    let mut metrics = Map::new();
    metrics.insert("edges_per_s".into(), json!(edges_per_s.round()));
    Ok(NetOutcome {
        metrics,
        counters: json!({
            "threads": threads_per_socket * p.packages,
            "edges": v.edges,
            "edges_per_step": spec.edges_per_step,
        }),
    })
}
