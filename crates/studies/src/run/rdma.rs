//! The one-sided RDMA workloads of `nudma run`: the NUMA/RDMA study's benchmark
//! (`rdma_bench`, `host::rdma::bench`) and memcached over one-sided RDMA
//! (`rdma_memcached`, `host::rdma::memcached`), each between two hosts' RNICs, with the
//! independent load of `rdma.independent_load` on the server if asked.
//!
//! Like the network workloads, an RDMA workload runs on its own model of its two hosts
//! (memory systems and RNICs), not on the TLP-level fabric the DMA workloads share. An
//! open-loop benchmark and memcached count operations over the `[measure]` window after
//! its warm-up (an open benchmark cuts it into `samples` windows); a closed-loop
//! benchmark runs its `warmup_ops` and `ops` per connection instead.

use devices::rnic::Verb;
use fabric::Topology;
use host::rdma::agents::ServerAgents;
use host::rdma::bench::{self, BenchResult, BenchRun, BenchSpec, Mode};
use host::rdma::load::{self, IndependentLoad, LoadSpec, LOAD_THREADS};
use host::rdma::memcached::{self, McSpec, KEYS};
use host::rdma::workers::MrWorkers;
use host::rdma::RdmaHost;
use serde_json::{json, Map, Value};
use sim::memsys::MemSys;
use sim::Time;

use super::beside::Beside;
use super::bound;
use super::packet::{Group, NetOutcome};
use super::spec::rdma::{RdmaBench, MAX_RD_ATOMIC, MTU};
use super::spec::{Kind, Measure, Workload};

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

/// The benchmark's run mode: an open loop's `[measure]` window cut into `samples`
/// windows, or a closed loop's operation counts.
fn mode(b: &RdmaBench, m: Measure) -> Mode {
    if b.open {
        Mode::Open {
            warmup: m.warmup,
            window: Time::from_ps(m.duration.as_ps() / u64::from(b.samples)),
            windows: b.samples,
            depth: b.depth,
        }
    } else {
        Mode::Closed {
            warmup: b.warmup_ops,
            ops: b.ops,
        }
    }
}

/// The server threads beside the benchmark, if any, and what they counted.
enum Agents {
    None,
    Load(IndependentLoad),
    Workers(MrWorkers),
}

impl Agents {
    fn as_dyn(&mut self) -> Option<&mut dyn ServerAgents> {
        match self {
            Agents::None => None,
            Agents::Load(l) => Some(l),
            Agents::Workers(w) => Some(w),
        }
    }

    /// Counters of the threads, read after the run.
    fn counters(&self, server_mem: &MemSys, region_node: u32) -> Value {
        match self {
            Agents::None => json!({}),
            Agents::Load(l) => json!({
                "load_residence": l.residence.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>(),
                "llc_sweep_us": l.sweep.iter().map(|s| s.map(|t| t.as_us_f64())).collect::<Vec<_>>(),
                "region_pushed_out": l.pushed_out,
                "stream_share_gbyte_s": server_mem.stream_rates().share_gbps,
                "region_dram_read_bytes": server_mem.dram(region_node).read,
            }),
            Agents::Workers(w) => {
                let c = w.counters;
                json!({
                    "device_lines": c.device_lines,
                    "found_modified": c.found_modified,
                    "snoop_wait_ns": c.snoop_wait_ns,
                    "queue_wait_ns": c.queue_wait_ns,
                    "device_read_snoops": w.lines.counters.device_read_snoops,
                    "device_invalidations": w.lines.counters.device_invalidations,
                    "worker_ownership_takes": w.lines.counters.ownership_takes,
                })
            }
        }
    }
}

/// An `rdma_bench` workload set up on its two hosts: what `BenchRun::start` takes and
/// what its row needs afterwards.
pub(super) struct BenchParts {
    pub client: RdmaHost,
    pub server: RdmaHost,
    agents: Agents,
    region_node: u32,
    spec: BenchSpec,
    opts: bench::RunOptions,
    open: bool,
    bytes: u64,
    rnic: String,
    /// The `[measure]` window, s: an open loop's counters cover it.
    window_secs: f64,
}

impl BenchParts {
    /// The hosts (their memory systems loaded with the run's CPU streams) and the
    /// server's threads beside the benchmark, if any.
    pub(super) fn new(
        topo: &Topology,
        b: &RdmaBench,
        m: Measure,
        seed: u64,
        beside: &mut Beside,
    ) -> Result<BenchParts, String> {
        let mut client = RdmaHost::new(topo, &b.client, &b.rnic)?;
        let mut server = RdmaHost::new(topo, &b.server, &b.rnic)?;
        beside.load(topo, &b.client, &mut client.mem)?;
        beside.load(topo, &b.server, &mut server.mem)?;
        let region_node = server.node(b.server_remote);
        Ok(BenchParts {
            client,
            server,
            agents: Agents::None,
            region_node,
            spec: BenchSpec {
                verb: b.verb,
                bytes: b.bytes,
                connections: b.connections,
                mtu: b.mtu,
                max_rd_atomic: MAX_RD_ATOMIC,
                server_remote: b.server_remote,
                mode: mode(b, m),
            },
            opts: bench::RunOptions {
                seed,
                poll_phase: true,
            },
            open: b.open,
            bytes: b.bytes,
            rnic: b.rnic.clone(),
            window_secs: m.duration.as_secs_f64(),
        })
    }

    /// Starts the server's threads on its memory system (the world's, when it lends it)
    /// and the benchmark itself.
    pub(super) fn start(&mut self, b: &RdmaBench, seed: u64) -> Result<BenchRun<'_>, String> {
        self.agents = if b.workers > 0 {
            let w = MrWorkers::new(
                &self.server,
                self.region_node,
                b.workers,
                b.worker_mix,
                seed,
            )?;
            Agents::Workers(w)
        } else if b.load != load::Placement::None {
            Agents::Load(start_load(&mut self.server, b.load, b.load_elems)?)
        } else {
            Agents::None
        };
        BenchRun::start(
            &mut self.client,
            &mut self.server,
            self.spec,
            self.opts,
            self.agents.as_dyn(),
        )
    }

    /// The row of a finished run; `server_mem` is the server's memory system as the run
    /// left it (the world's, when it shared it).
    pub(super) fn outcome(
        &self,
        r: &BenchResult,
        server_mem: &MemSys,
    ) -> Result<NetOutcome, String> {
        let mut out = Vec::new();
        match (&r.throughput, self.open) {
            (Some(t), true) => {
                out.push(("ops_per_sec", t.ops_per_s));
                out.push(("mops", t.ops_per_s / 1e6));
                out.push(("std_mops", t.std_ops_per_s / 1e6));
                out.push(("throughput_gbyte_s", t.ops_per_s * self.bytes as f64 / 1e9));
            }
            (None, true) => return Err("an open loop gave no samples".into()),
            (_, false) => {
                // Closed loop: each connection completes one operation per latency.
                let ops = self.spec.connections as f64 / (r.latency_ns * 1e-9);
                out.push(("ops_per_sec", ops));
                out.push(("throughput_gbyte_s", ops * self.bytes as f64 / 1e9));
                out.push(("latency_ns", r.latency_ns));
            }
        }
        let mut counters = json!({
            "operations": r.operations,
            "simulated_s": r.simulated.as_secs_f64(),
            "events": r.events,
            "qpc_misses": r.qpc_misses,
            "mtt_misses": r.mtt_misses,
        });
        if let (Some(o), Value::Object(e)) = (
            counters.as_object_mut(),
            self.agents.counters(server_mem, self.region_node),
        ) {
            o.extend(e);
        }
        let mut o = NetOutcome {
            metrics: metrics(&out),
            counters,
        };
        self.add_bound(&mut o, r, server_mem);
        Ok(o)
    }

    /// Adds the benchmark's bound to its row `o` (`bound::rdma_resources`): an open loop's
    /// counters cover the window, a closed loop's the whole run (the driver restarts them
    /// at its first event). Else latency: what its connections keep outstanding.
    fn add_bound(&self, o: &mut NetOutcome, r: &BenchResult, server_mem: &MemSys) {
        let secs = match self.open {
            true => self.window_secs,
            false => r.simulated.as_secs_f64(),
        };
        let n = self.spec.connections;
        let outstanding = match (self.spec.mode, self.spec.verb) {
            // A QP keeps its writes' whole depth under way, but no more READs and atomics
            // than its `max_rd_atomic`.
            (Mode::Open { depth, .. }, Verb::Write) => n * depth,
            (Mode::Open { depth, .. }, _) => n * depth.min(self.spec.max_rd_atomic),
            // One operation per connection at a time.
            (Mode::Closed { .. }, _) => n,
        };
        let payload = o
            .metrics
            .get("throughput_gbyte_s")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let server_in = matches!(self.spec.verb, Verb::Write);
        let ends = [
            bound::RdmaEnd {
                host: &self.client.name,
                name: &self.rnic,
                rnic: &self.client.rnic,
                data_in: !server_in,
            },
            bound::RdmaEnd {
                host: &self.server.name,
                name: &self.rnic,
                rnic: &self.server.rnic,
                data_in: server_in,
            },
        ];
        let resources = bound::rdma_resources(server_mem, self.region_node, &ends, payload, secs);
        let latency = format!("{outstanding} outstanding");
        o.counters["resources"] = bound::insert(&mut o.metrics, &resources, Some(&latency));
    }
}

fn run_bench(
    topo: &Topology,
    b: &RdmaBench,
    m: Measure,
    seed: u64,
    beside: &mut Beside,
) -> Result<NetOutcome, String> {
    let mut parts = BenchParts::new(topo, b, m, seed, beside)?;
    let mut run = parts.start(b, seed)?;
    while run.step()? {}
    let r = run.finish();
    parts.outcome(&r, &parts.server.mem)
}

/// The open-loop `rdma_bench` workloads between two hosts, each a group of its own: one
/// that shares a host with another model runs in that model's world. A closed loop
/// (counted in operations, not a window) and RDMA memcached still run alone.
pub(super) fn groups(ws: &[Workload]) -> Vec<Group<'_>> {
    ws.iter()
        .enumerate()
        .filter_map(|(i, w)| match &w.kind {
            Kind::RdmaBench(b) if b.open && b.client != b.server => Some(Group {
                members: vec![i],
                server: &b.server,
                client: &b.client,
                together: false,
            }),
            _ => None,
        })
        .collect()
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
        Kind::RdmaBench(b) => run_bench(topo, b, m, seed, beside),
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
            let mut o = NetOutcome {
                metrics: metrics(&[
                    ("kops", ops / 1e3),
                    ("ops_per_sec", ops),
                    ("throughput_gbyte_s", ops * w.value_bytes as f64 / 1e9),
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
            };
            let payload = ops * w.value_bytes as f64 / 1e9;
            mc_bound(&mut o, w, (&client, &server), payload, m);
            Ok(o)
        }
        other => Err(format!("`{}` is not an RDMA workload", other.name())),
    }
}

/// Adds RDMA memcached's bound to its row `o` (`bound::rdma_resources` over the window,
/// whose start restarts both hosts' counters): its values mostly leave the server (GETs
/// are one-sided READs of its region), else its connections' requests, one each.
fn mc_bound(
    o: &mut NetOutcome,
    w: &super::spec::rdma::RdmaMemcached,
    (client, server): (&RdmaHost, &RdmaHost),
    payload_gbyte_s: f64,
    m: Measure,
) {
    let (_, remote) = w.placement.remote();
    let ends = [
        bound::RdmaEnd {
            host: &client.name,
            name: &w.rnic,
            rnic: &client.rnic,
            data_in: true,
        },
        bound::RdmaEnd {
            host: &server.name,
            name: &w.rnic,
            rnic: &server.rnic,
            data_in: false,
        },
    ];
    let secs = m.duration.as_secs_f64();
    let node = server.node(remote);
    let resources = bound::rdma_resources(&server.mem, node, &ends, payload_gbyte_s, secs);
    let latency = format!("{} requests in flight", w.connections);
    o.counters["resources"] = bound::insert(&mut o.metrics, &resources, Some(&latency));
}
