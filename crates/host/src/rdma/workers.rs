//! Server threads using the memory region the clients access (`rdma.mr_workers`): each
//! worker stores to or loads the very lines the connections' operations touch, so the
//! lines' ownership moves between the workers' cores and the RNIC's DMA
//! (`sim::memsys::ownership`):
//!
//! - an RNIC READ of a line a worker holds Modified waits for the snoop that fetches it
//!   (at the line's home socket: an LLC hit's time, docs/hardware.md §4's 38 ns; from a core
//!   on the other socket: a remote memory access's, §4's 122 ns — assumptions: a snoop of
//!   a private cache costs what the same trip costs to the LLC or remote memory);
//! - an RNIC WRITE invalidates the workers' copies (posted: the ACK does not wait), and
//!   the next store to the line misses and takes ownership again;
//! - with several workers storing, a line's requests are served in turn at its home, so
//!   the RNIC's request also waits for the workers' ownership requests of that line
//!   ahead of it: on average every other storing worker's share of the line,
//!   `(workers − 1) × write fraction ÷ lines`, each a transfer between two cores.
//!
//! Workers are not simulated store by store (tens of millions a second each): between
//! two RNIC accesses to a line (microseconds apart) the workers touch it many times over,
//! so at each RNIC access the line is in the state the last worker access left — a store
//! with the mix's probability, from a worker drawn at random (seeded). Workers run on the
//! region's node's hardware threads, then on the other node's (assumption: the study
//! placed server threads with the region; beyond 24 they cannot all be there).

use sim::memsys::ownership::{LineState, Ownership, SnoopCosts, Transfer};
use sim::memsys::{MemSys, LINE};
use sim::Time;

use devices::rnic::{Verb, Wqe};

use super::agents::ServerAgents;
use super::{RdmaHost, Region};

/// What the workers do to the region's lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// 90 % stores, 10 % loads.
    W90,
    Write,
    Read,
}

impl Mix {
    pub fn parse(word: &str) -> Result<Mix, String> {
        match word {
            "w90" => Ok(Mix::W90),
            "write" => Ok(Mix::Write),
            "read" => Ok(Mix::Read),
            _ => Err(format!(
                "mix `{word}`: use \"w90\" (90 % writes), \"write\" or \"read\""
            )),
        }
    }

    /// Fraction of the workers' accesses that are stores.
    pub fn store_fraction(self) -> f64 {
        match self {
            Mix::W90 => 0.9,
            Mix::Write => 1.0,
            Mix::Read => 0.0,
        }
    }
}

/// Counters of the RNIC's accesses to the region's lines since the last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WorkerCounters {
    /// Lines the RNIC's DMA reached in the region.
    pub device_lines: u64,
    /// Of them, lines it found Modified in a worker's core.
    pub found_modified: u64,
    /// Time the RNIC's DMA waited for snoops and for workers' requests ahead, ns.
    pub snoop_wait_ns: f64,
    pub queue_wait_ns: f64,
}

/// The workers, as an agent on the server.
#[derive(Clone, Debug)]
pub struct MrWorkers {
    pub workers: u32,
    pub mix: Mix,
    /// Each worker's socket.
    sockets: Vec<u32>,
    pub lines: Ownership,
    costs: SnoopCosts,
    rng: u64,
    pub counters: WorkerCounters,
}

impl MrWorkers {
    /// `workers` threads of `mix` on `host`, beside a region on `node`; `seed` draws
    /// which worker touched a line last.
    pub fn new(
        host: &RdmaHost,
        node: u32,
        workers: u32,
        mix: Mix,
        seed: u64,
    ) -> Result<MrWorkers, String> {
        let p = host.mem.params();
        if node >= p.sockets {
            return Err(format!("no node {node}: the host has {}", p.sockets));
        }
        let hw = host.threads_per_node.max(1);
        if workers > hw * p.sockets {
            return Err(format!(
                "workers {workers}: host `{}` has {} hardware threads",
                host.name,
                hw * p.sockets
            ));
        }
        let sockets = (0..workers).map(|i| (node + i / hw) % p.sockets).collect();
        Ok(MrWorkers {
            workers,
            mix,
            sockets,
            lines: Ownership::new(),
            costs: SnoopCosts {
                local: p.llc_latency,
                remote: p.dram_latency + p.interconnect_latency + p.interconnect_latency,
            },
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            counters: WorkerCounters::default(),
        })
    }

    fn next_unit(&mut self) -> f64 {
        // xorshift64*: deterministic per seed, no wall clock.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The workers' last access to `line` before the RNIC's: a store or a load by a
    /// worker drawn at random; a store that fills brings the line into its socket's LLC.
    fn last_worker_access(&mut self, at: Time, mem: &mut MemSys, region: &Region, off: u64) {
        let who = ((self.next_unit() * self.workers as f64) as usize).min(self.sockets.len() - 1);
        let socket = self.sockets[who];
        let line = key(region, off);
        if self.next_unit() < self.mix.store_fraction() {
            let t = self.lines.cpu_store(socket, line);
            if t.fill {
                mem.cpu_write(at, socket, region.buf_at(off), region.slot);
            }
        } else {
            self.lines.cpu_load(socket, line);
        }
    }

    /// What the RNIC's request waits behind: the other storing workers' requests of the
    /// line, served in turn at its home, each a transfer between two workers' cores.
    fn queue_ahead(&self, region: &Region) -> Time {
        let stores = self.mix.store_fraction();
        if self.workers < 2 || stores == 0.0 {
            return Time::ZERO;
        }
        let lines = region.len().div_ceil(LINE).max(1) as f64;
        let ahead = (self.workers - 1) as f64 * stores / lines;
        let away =
            self.sockets.iter().filter(|&&s| s != region.node).count() as f64 / self.workers as f64;
        let transfer = self.costs.local.as_ps() as f64 * (1.0 - away)
            + self.costs.remote.as_ps() as f64 * away;
        Time::from_ps((ahead * transfer).round() as u64)
    }
}

fn key(region: &Region, off: u64) -> u64 {
    ((region.key as u64) << 40) | (off / LINE)
}

impl ServerAgents for MrWorkers {
    fn device_access(
        &mut self,
        at: Time,
        mem: &mut MemSys,
        region: &Region,
        w: Wqe,
        _rnic_socket: u32,
    ) -> Time {
        if self.workers == 0 {
            self.counters.device_lines += w.len.max(1).div_ceil(LINE);
            return at;
        }
        let queue = self.queue_ahead(region);
        let mut wait = Time::ZERO;
        let first = w.remote / LINE;
        let last = (w.remote + w.len.max(1) - 1) / LINE;
        for l in first..=last {
            let off = l * LINE;
            self.last_worker_access(at, mem, region, off);
            let line = key(region, off);
            let was_modified = matches!(self.lines.state(line), LineState::Modified(_));
            let t: Transfer = match w.verb {
                Verb::Write => self.lines.device_write(line),
                Verb::Read => self.lines.device_read(line),
                _ => {
                    let r = self.lines.device_read(line);
                    self.lines.device_write(line);
                    r
                }
            };
            self.counters.device_lines += 1;
            self.counters.found_modified += was_modified as u64;
            let snoop = self.costs.of(&t, region.node);
            // A line's snoop and its queue: the lines of one request are fetched at once.
            let q = if was_modified || t.invalidated > 0 {
                queue
            } else {
                Time::ZERO
            };
            self.counters.snoop_wait_ns += snoop.as_ns_f64();
            self.counters.queue_wait_ns += q.as_ns_f64();
            wait = wait.max(snoop + q);
        }
        // A posted WRITE does not make the RNIC wait; its visibility does.
        at + wait
    }

    fn reset_counters(&mut self) {
        self.counters = WorkerCounters::default();
        self.lines.reset_counters();
    }
}
