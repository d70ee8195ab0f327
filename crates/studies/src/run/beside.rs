//! The run's `cpu_stream` workloads as the packet-granular models see them.
//!
//! A network, RDMA, Tyche or PageRank workload runs on its own model of its hosts'
//! memory systems (`sim::memsys`), not on the TLP-level fabric the `cpu_stream`
//! components load. So that a STREAM antagonist in the same run reaches it, every
//! `cpu_stream` on one of its hosts joins that host's memory system as background
//! cores (`MemSys::add_stream_misses`: the fewest cores that keep its misses in flight),
//! and the workload's accesses get what the round-robin arbitration of the DRAM and
//! interconnect servers leaves them. It is the mechanism `ioctopus.qpi_congestion` and
//! `ioctopus.colocation` use for their antagonists.
//!
//! What this does not do: the streams' own rows still come from the TLP-level fabric,
//! which the packet models do not load, so a stream is not slowed by a network workload
//! (in the memory system, too, the streams are solved before the workload: the workload
//! takes what they leave). The workload's counters list the streams it met and the rate
//! each got in its memory system.

use fabric::Topology;
use serde_json::{json, Value};
use sim::memsys::MemSys;

use super::spec::{Direction, Kind, Workload};

/// A `cpu_stream` workload of the run.
#[derive(Clone, Debug)]
struct CpuStream {
    workload: String,
    host: String,
    cpu_node: u32,
    mem_node: u32,
    write: bool,
    misses: u32,
    cores: u32,
}

/// The run's `cpu_stream` workloads.
#[derive(Clone, Debug, Default)]
pub struct CpuStreams(Vec<CpuStream>);

impl CpuStreams {
    pub fn of(workloads: &[Workload]) -> CpuStreams {
        let streams = workloads.iter().filter_map(|w| match &w.kind {
            Kind::CpuStream {
                host,
                cpu_node,
                mem_node,
                op,
                misses_in_flight,
                cores,
            } => Some(CpuStream {
                workload: w.name.clone(),
                host: host.clone(),
                cpu_node: *cpu_node,
                mem_node: *mem_node,
                write: *op == Direction::Write,
                misses: *misses_in_flight,
                cores: *cores,
            }),
            _ => None,
        });
        CpuStreams(streams.collect())
    }
}

/// The streams one packet-model workload met: built per workload, handed to its model's
/// set-up, which loads each host's memory system through it.
pub struct Beside<'a> {
    streams: &'a CpuStreams,
    /// Per stream met: its workload name, its host, and its rate in that host's memory
    /// system (GB/s of line misses; a writer moves twice that).
    met: Vec<Value>,
}

impl<'a> Beside<'a> {
    pub fn new(streams: &'a CpuStreams) -> Beside<'a> {
        Beside {
            streams,
            met: Vec::new(),
        }
    }

    /// Loads `mem`, the packet model's memory system of host `host`, with the run's
    /// streams on that host.
    pub fn load(&mut self, topo: &Topology, host: &str, mem: &mut MemSys) -> Result<(), String> {
        let mine: Vec<&CpuStream> = self.streams.0.iter().filter(|s| s.host == host).collect();
        if mine.is_empty() {
            return Ok(());
        }
        let id = topo
            .host_by_name(host)
            .ok_or_else(|| format!("no host `{host}`"))?;
        let p = topo.platform_of(id);
        let mut added = Vec::new();
        for s in mine {
            if p.memory_node(s.mem_node).is_some() {
                return Err(format!(
                    "cpu_stream `{}` streams through node {} of host `{host}`, a memory-only \
                     node: the packet model keeps one memory node per socket and cannot carry it",
                    s.workload, s.mem_node
                ));
            }
            let (socket, node) = (p.package_of_node(s.cpu_node), p.package_of_node(s.mem_node));
            let mut agents = Vec::new();
            for _ in 0..s.cores {
                let more = mem
                    .add_stream_misses(socket, node, s.write, s.misses)
                    .map_err(|e| format!("cpu_stream `{}`: {e}", s.workload))?;
                agents.push(more);
            }
            added.push((s, agents));
        }
        // Rates once every stream of the host is in: each one re-solves the arbitration.
        let rates = &mem.stream_rates().agent_gbps;
        for (s, agents) in added {
            let gbyte_s: f64 = agents.into_iter().flat_map(|a| &rates[a]).sum();
            self.met.push(json!({
                "workload": s.workload,
                "host": host,
                "misses_gbyte_s": (gbyte_s * 1000.0).round() / 1000.0,
            }));
        }
        Ok(())
    }

    /// The streams met, for the workload's counters (`None` when there were none).
    pub fn report(self) -> Option<Value> {
        (!self.met.is_empty()).then_some(Value::Array(self.met))
    }
}
