//! The one-sided RDMA workloads of `nudma run`: the NUMA/RDMA study's benchmark
//! (`rdma_bench`, `host::rdma::bench`) and memcached over one-sided RDMA
//! (`rdma_memcached`, `host::rdma::memcached`), each between two hosts' RNICs, with the
//! independent load of `rdma.independent_load` on the server if asked.
//!
//! Like the network workloads, an RDMA workload runs on its own model of its two hosts
//! (memory systems and RNICs), not on the TLP-level fabric the DMA workloads share. An
//! open-loop benchmark and memcached count operations over the `[measure]` window after
//! its warm-up; a closed-loop benchmark runs the study's operation counts
//! (`crate::rdma::CLOSED_WARMUP`, `CLOSED_OPS`) per connection instead.

use fabric::Topology;
use host::rdma::agents::ServerAgents;
use host::rdma::bench::{self, BenchSpec, Mode};
use host::rdma::load::{self, IndependentLoad, LoadSpec, LOAD_THREADS};
use host::rdma::memcached::{self, McSpec, KEYS};
use host::rdma::RdmaHost;
use serde_json::{json, Map, Value};

use super::beside::Beside;
use super::net::NetOutcome;
use super::spec::{Kind, Measure};
use crate::rdma::{CLOSED_OPS, CLOSED_WARMUP, MAX_RD_ATOMIC, MTU};

fn metrics(fields: &[(&str, f64)]) -> Map<String, Value> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

/// The `q` quantile (nearest rank) of `xs`.
fn quantile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let i = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    xs[i]
}

fn start_load(
    server: &mut RdmaHost,
    placement: load::Placement,
    elems: u64,
) -> Result<IndependentLoad, String> {
    IndependentLoad::start(
        server,
        LoadSpec {
            threads: LOAD_THREADS,
            elems,
            placement,
        },
    )
}

/// Runs an RDMA workload over `m`'s window.
pub fn run(
    topo: &Topology,
    kind: &Kind,
    m: Measure,
    seed: u64,
    beside: &mut Beside,
) -> Result<NetOutcome, String> {
    match kind {
        Kind::RdmaBench(b) => {
            let mut client = RdmaHost::new(topo, &b.client, &b.rnic)?;
            let mut server = RdmaHost::new(topo, &b.server, &b.rnic)?;
            beside.load(topo, &b.client, &mut client.mem)?;
            beside.load(topo, &b.server, &mut server.mem)?;
            let mut load = start_load(&mut server, b.load, b.load_elems)?;
            let mode = if b.open {
                Mode::Open {
                    warmup: m.warmup,
                    window: m.duration,
                    windows: 1,
                    depth: b.depth,
                }
            } else {
                Mode::Closed {
                    warmup: CLOSED_WARMUP,
                    ops: CLOSED_OPS,
                }
            };
            let spec = BenchSpec {
                verb: b.verb,
                bytes: b.bytes,
                connections: b.connections,
                mtu: b.mtu,
                max_rd_atomic: MAX_RD_ATOMIC,
                server_remote: b.server_remote,
                mode,
            };
            let opts = bench::RunOptions {
                seed,
                poll_phase: true,
            };
            let r = bench::run_with_agents(
                &mut client,
                &mut server,
                spec,
                opts,
                Some(&mut load as &mut dyn ServerAgents),
            )?;
            let ops = match (&r.throughput, b.open) {
                (Some(t), true) => t.ops_per_s,
                // Closed loop: each connection completes one operation per latency.
                _ => b.connections as f64 / (r.latency_ns * 1e-9),
            };
            let mut out = vec![("ops_per_sec", ops), ("gbps", ops * b.bytes as f64 / 1e9)];
            if !b.open {
                out.push(("latency_ns", r.latency_ns));
            }
            Ok(NetOutcome {
                metrics: metrics(&out),
                counters: json!({
                    "operations": r.operations,
                    "simulated_s": r.simulated.as_secs_f64(),
                    "qpc_misses": r.qpc_misses,
                    "mtt_misses": r.mtt_misses,
                }),
            })
        }
        Kind::RdmaMemcached(w) => {
            let mut client = RdmaHost::new(topo, &w.client, &w.rnic)?;
            let mut server = RdmaHost::new(topo, &w.server, &w.rnic)?;
            beside.load(topo, &w.client, &mut client.mem)?;
            beside.load(topo, &w.server, &mut server.mem)?;
            let mut load = start_load(&mut server, w.load, w.load_elems)?;
            let spec = McSpec {
                connections: w.connections,
                get_ratio: w.get_ratio,
                value_bytes: w.value_bytes,
                keys: KEYS,
                placement: w.placement,
                mtu: MTU,
                max_rd_atomic: MAX_RD_ATOMIC,
                warmup: m.warmup,
                window: m.duration,
                windows: 1,
                seed,
            };
            let mut r = memcached::run(
                &mut client,
                &mut server,
                spec,
                Some(&mut load as &mut dyn ServerAgents),
            )?;
            let ops = r.throughput.map_or(0.0, |t| t.ops_per_s);
            let p50 = quantile(&mut r.latencies_ns, 0.5);
            let p99 = quantile(&mut r.latencies_ns, 0.99);
            Ok(NetOutcome {
                metrics: metrics(&[
                    ("kops", ops / 1e3),
                    ("ops_per_sec", ops),
                    ("gbps", ops * w.value_bytes as f64 / 1e9),
                    ("latency_ns_p50", p50),
                    ("latency_ns_p99", p99),
                ]),
                counters: json!({
                    "gets": r.gets,
                    "sets": r.sets,
                    "set_read_bytes": r.set_read_bytes,
                    "events": r.events,
                    "simulated_s": r.simulated.as_secs_f64(),
                }),
            })
        }
        other => Err(format!("`{}` is not an RDMA workload", other.name())),
    }
}
