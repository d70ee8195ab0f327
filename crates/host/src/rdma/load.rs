//! Independent load on the RDMA server (`rdma.independent_load`): threads doing 50/50
//! random reads and writes of 8-byte elements, each on its own buffer, unbound or bound
//! to a node. They share nothing with the benchmark but the memory system, so their
//! effect is priced there:
//!
//! - **where their working sets live**: a core's threads' buffers that fit its private
//!   L2 cause no traffic at all; what fits the sockets' LLC occupies it (no DRAM); bigger
//!   ones miss on (nearly) every random element, so each busy core keeps its line-fill
//!   buffers full of misses against its buffers' node — a `sim::memsys` stream agent per
//!   core (half the cores read, half write: read for ownership and write-back), solved by
//!   the memory system's round-robin arbitration, which leaves the RNIC's DMA its turn on
//!   DRAM and the interconnect;
//! - **LLC pollution**: those misses fill the LLC of the socket they run on; at LRU, a
//!   buffer that nothing re-allocates is pushed out once the fills have taken the whole
//!   CPU share since it was last allocated (`MemSys::cpu_share_lines` ÷ the socket's
//!   fill rate). RNIC READs do not allocate, so a region that is only read falls out of
//!   the LLC and every READ goes to the (loaded) DRAM; a local region written by DDIO is
//!   re-allocated by every WRITE.
//!
//! Placement (assumptions, docs/hardware.md §4 says only "unbound or bound to either node"):
//! bound threads run on their node's hardware threads (oversubscribed: 128 threads on 24)
//! with their buffers first-touched there; unbound threads are spread evenly over both
//! nodes by the scheduler and, oversubscribed and free to migrate, find their buffer on
//! either node with equal chance, so half of each socket's busy cores miss against the
//! other node.

use rustc_hash::FxHashMap;
use sim::memsys::{MemSys, LINE};
use sim::Time;

use devices::rnic::{Verb, Wqe};

use super::agents::ServerAgents;
use super::{RdmaHost, Region};

/// Threads of the study's load (`rdma.independent_load` in docs/studies.md).
pub const LOAD_THREADS: u32 = 128;
/// Bytes of one element.
pub const ELEM_BYTES: u64 = 8;
/// Private L2 per core (assumption: Haswell-EP's 256 KiB L2; docs/hardware.md §4 gives only
/// the LLC). The L1 is left out: it is inside the L2's capacity.
pub const L2_BYTES: u64 = 256 << 10;
/// Buffer namespace of the load's LLC-resident working sets.
const LOAD_BUF: u64 = 0x7a << 40;

/// Where the load threads run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    None,
    /// Left to the scheduler: both nodes.
    Unbound,
    /// Bound to the server RNIC's node.
    BoundLocal,
    /// Bound to the other node.
    BoundRemote,
}

impl Placement {
    pub fn parse(word: &str) -> Result<Placement, String> {
        match word {
            "none" => Ok(Placement::None),
            "unbound" => Ok(Placement::Unbound),
            "bound_local" => Ok(Placement::BoundLocal),
            "bound_remote" => Ok(Placement::BoundRemote),
            _ => Err(format!(
                "load `{word}`: use \"none\", \"unbound\", \"bound_local\" or \"bound_remote\""
            )),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSpec {
    pub threads: u32,
    /// Elements of each thread's own buffer.
    pub elems: u64,
    pub placement: Placement,
}

/// Where the load's working sets ended up on one socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Residence {
    /// No load threads there.
    #[default]
    Idle,
    /// In the cores' private caches: no memory-system traffic.
    PrivateCaches,
    /// In the LLC, occupying these bytes of its CPU share.
    Llc(u64),
    /// Missing to DRAM: this many busy cores streaming.
    Dram(u32),
}

/// The load, applied to a server's memory system, and its LLC pollution as an agent.
#[derive(Clone, Debug)]
pub struct IndependentLoad {
    /// Per socket.
    pub residence: Vec<Residence>,
    /// Per socket: the time the load's fills take to sweep the LLC's CPU share.
    pub sweep: Vec<Option<Time>>,
    /// Last allocation of each region buffer in its home LLC, for the push-outs.
    allocated: FxHashMap<u64, Time>,
    /// Region buffers pushed out of the LLC by the load's fills over the whole run (the
    /// first push-outs fall in the warm-up, so a window reset does not clear it).
    pub pushed_out: u64,
}

/// Threads per socket for `spec` on `sockets` sockets, the RNIC on `rnic`.
fn threads_per_socket(spec: &LoadSpec, sockets: u32, rnic: u32) -> Vec<u32> {
    let mut t = vec![0; sockets as usize];
    let other = (rnic + 1) % sockets;
    match spec.placement {
        Placement::None => {}
        Placement::BoundLocal => t[rnic as usize] = spec.threads,
        Placement::BoundRemote => t[other as usize] = spec.threads,
        Placement::Unbound => {
            for i in 0..spec.threads {
                t[(i % sockets) as usize] += 1;
            }
        }
    }
    t
}

impl IndependentLoad {
    /// Applies `spec` to `host`'s memory system: stream agents for DRAM-bound working
    /// sets, occupancy for LLC-resident ones. Call before the benchmark registers its
    /// regions.
    pub fn start(host: &mut RdmaHost, spec: LoadSpec) -> Result<IndependentLoad, String> {
        if spec.placement != Placement::None && (spec.threads == 0 || spec.elems == 0) {
            return Err(format!(
                "a load needs threads and elements (threads {}, elements {})",
                spec.threads, spec.elems
            ));
        }
        let bytes = spec
            .elems
            .checked_mul(ELEM_BYTES)
            .ok_or_else(|| format!("load_elems {}: the buffer's size overflows", spec.elems))?;
        let sockets = host.mem.params().sockets;
        let per_socket = threads_per_socket(&spec, sockets, host.rnic_node());
        let hw = host.threads_per_node.max(1);
        let cores = host.cores_per_node.max(1);
        let share_bytes = host.mem.cpu_share_lines() * LINE;
        let mut residence = vec![Residence::Idle; sockets as usize];
        for (s, &t) in per_socket.iter().enumerate() {
            if t == 0 {
                continue;
            }
            // Oversubscribed threads time-share the node's hardware threads, two per core.
            let busy_cores = t.min(hw).div_ceil((hw / cores).max(1)).min(cores);
            // A core's threads time-share its L2 (and its hyperthread sibling's).
            let per_core = (t as u64).div_ceil(busy_cores as u64) * bytes;
            let total = t as u64 * bytes;
            let s32 = s as u32;
            residence[s] = if per_core <= L2_BYTES {
                Residence::PrivateCaches
            } else if total <= share_bytes {
                for (k, chunk) in (0..total).step_by(1 << 20).enumerate() {
                    let len = (total - chunk).min(1 << 20);
                    host.mem.cpu_write(
                        Time::ZERO,
                        s32,
                        host.ns + LOAD_BUF + ((s as u64) << 32) + k as u64,
                        len,
                    );
                }
                Residence::Llc(total)
            } else {
                let other = (s32 + 1) % sockets;
                let away = if spec.placement == Placement::Unbound {
                    busy_cores / 2
                } else {
                    0
                };
                for (node, n) in [(s32, busy_cores - away), (other, away)] {
                    let writers = n / 2;
                    host.mem.add_streams(s32, node, false, n - writers)?;
                    host.mem.add_streams(s32, node, true, writers)?;
                }
                Residence::Dram(busy_cores)
            };
        }
        // Each socket's fill rate: its agents' misses (lines per ns).
        let rates = host.mem.stream_rates().agent_gbps.clone();
        let agents = host.mem.streams().to_vec();
        let share_lines = host.mem.cpu_share_lines() as f64;
        let sweep = (0..sockets)
            .map(|s| {
                let lines_per_ns: f64 = agents
                    .iter()
                    .zip(&rates)
                    .filter(|(a, _)| a.cpu_socket == s)
                    .map(|(_, r)| r / LINE as f64)
                    .sum();
                (lines_per_ns > 0.0)
                    .then(|| Time::from_ps((share_lines / lines_per_ns * 1e3) as u64))
            })
            .collect();
        Ok(IndependentLoad {
            residence,
            sweep,
            allocated: FxHashMap::default(),
            pushed_out: 0,
        })
    }
}

impl ServerAgents for IndependentLoad {
    fn device_access(
        &mut self,
        at: Time,
        mem: &mut MemSys,
        region: &Region,
        w: Wqe,
        rnic_socket: u32,
    ) -> Time {
        let node = region.node;
        let Some(sweep) = self.sweep.get(node as usize).copied().flatten() else {
            return at;
        };
        let first = region.buf_at(w.remote);
        let last = region.buf_at(w.remote + w.len.max(1) - 1);
        for buf in first..=last {
            let since = self.allocated.entry(buf).or_insert(Time::ZERO);
            if at >= *since + sweep {
                if mem.push_out(at, node, node, buf) {
                    self.pushed_out += 1;
                }
                *since = at;
            }
            // A DDIO write (device on the home socket) allocates the buffer again.
            if w.verb == Verb::Write && rnic_socket == node && mem.params().ddio_ways > 0 {
                *since = at;
            }
        }
        at
    }

    fn reset_counters(&mut self) {}
}
