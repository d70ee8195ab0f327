//! A PageRank-like memory-bound victim (IOctopus's GAP PageRank, docs/hardware.md §1: 16
//! threads, 8 pinned to each socket), priced through `sim::memsys` so that it competes
//! with I/O for the LLC, DRAM and the interconnect of the same host.
//!
//! Each thread runs a pull-style PageRank sweep over its own node's part of the graph: it
//! streams its edge list (4-byte neighbour ids, read a 4 KiB page at a time) and, for each
//! edge, reads the neighbour's score — a random line of a score array far bigger than the
//! LLC. A step takes `edges_per_step` edges: their score reads are independent, so they
//! are issued together and overlap (no more than the core's line-fill buffers), and the
//! step lasts the slowest of them plus the edges' compute. The runtime of a fixed amount of
//! work is that work ÷ the edge rate, so a slowdown is the solo rate ÷ the co-located one.
//!
//! Simplifications, stated: score writes (one per vertex, sequential) and the reads of
//! the previous iteration's own score are left out — per edge they are small beside the
//! random read; hardware prefetching of the edge stream is not modelled (its page reads
//! overlap over the line-fill buffers as any copy's do).

use sim::memsys::{MemSys, LINE};
use sim::Time;

/// Work driven alongside an I/O model on the same memory system: brought up to each
/// moment the I/O model reaches, so both reserve DRAM, LLC and interconnect in time order.
pub trait Background {
    /// Runs until `until`.
    fn advance(&mut self, mem: &mut MemSys, until: Time);
    /// Starts a measurement window.
    fn reset_counters(&mut self);
}

/// Buffer namespace of the victim's graph (beside `net`'s).
const GRAPH: u64 = 9 << 40;
/// Edge-list pages.
const PAGE: u64 = 4096;
/// Bytes per neighbour id (GAP's 32-bit node ids).
const EDGE_BYTES: u64 = 4;

#[derive(Clone, Copy, Debug)]
pub struct PageRankSpec {
    pub threads_per_socket: u32,
    /// Bytes of the score array on each node (the random reads' range).
    pub scores_bytes: u64,
    /// Edges whose score reads a step issues at once (≤ the line-fill buffers).
    pub edges_per_step: u32,
    /// Compute per edge (the multiply-add and loop), cycles.
    pub cycles_per_edge: u64,
    pub clock_ghz: f64,
    pub seed: u64,
}

/// GAP PageRank's shape (assumptions; docs/hardware.md §1 names the benchmark and its
/// threads, not its input):
/// - a score array of 512 MiB per node (a 2^28-vertex graph's 4-byte scores split over two
///   nodes — GAP's Kronecker inputs are of that order), ≈ 15 × the 35 MB LLC, so most
///   score reads miss;
/// - 10 score reads in flight per thread (Broadwell's 10 line-fill buffers);
/// - 4 cycles of compute per edge (a load, an add and the loop on a 2 GHz core).
pub const GAP_PAGERANK: PageRankSpec = PageRankSpec {
    threads_per_socket: 8,
    scores_bytes: 512 << 20,
    edges_per_step: 10,
    cycles_per_edge: 4,
    clock_ghz: 2.0,
    seed: 7,
};

#[derive(Clone, Debug)]
struct Thread {
    socket: u32,
    t: Time,
    edge: u64,
}

/// The victim's threads and the edges they have processed.
#[derive(Clone, Debug)]
pub struct PageRank {
    spec: PageRankSpec,
    threads: Vec<Thread>,
    rng: u64,
    /// Edges processed since the last reset.
    pub edges: u64,
}

impl PageRank {
    /// `spec.threads_per_socket` threads on each of `sockets` sockets, their graph on their
    /// own node.
    pub fn new(spec: PageRankSpec, sockets: u32) -> Result<PageRank, String> {
        if spec.threads_per_socket == 0 || spec.threads_per_socket > 64 {
            return Err(format!(
                "threads_per_socket {} must be in 1..=64",
                spec.threads_per_socket
            ));
        }
        if spec.edges_per_step == 0 || spec.edges_per_step > 64 {
            return Err(format!(
                "edges_per_step {} must be in 1..=64",
                spec.edges_per_step
            ));
        }
        if spec.scores_bytes < LINE || spec.scores_bytes > 1 << 40 {
            return Err(format!(
                "scores_bytes {} must be in 64..=2^40",
                spec.scores_bytes
            ));
        }
        if !(spec.clock_ghz > 0.0 && spec.clock_ghz <= 10.0) {
            return Err(format!("clock_ghz {} must be in (0, 10]", spec.clock_ghz));
        }
        let threads = (0..sockets)
            .flat_map(|s| {
                (0..spec.threads_per_socket).map(move |k| Thread {
                    socket: s,
                    t: Time::ZERO,
                    // Each thread starts its own range of the edge list.
                    edge: (k as u64) << 32,
                })
            })
            .collect();
        Ok(PageRank {
            spec,
            threads,
            rng: spec.seed ^ 0x5DEE_CE66_D1CE_4E5B,
            edges: 0,
        })
    }

    /// Starts every thread at `t` (no earlier work): the victim joins a run already under
    /// way, so a costly victim need not be simulated through the I/O model's whole warm-up.
    pub fn start_at(&mut self, t: Time) {
        for th in &mut self.threads {
            th.t = th.t.max(t);
        }
    }

    fn next(&mut self) -> u64 {
        // splitmix64: deterministic for a seed, independent of the I/O model's generator.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One step of thread `k`.
    fn step(&mut self, mem: &mut MemSys, k: usize) {
        let s = self.spec;
        let (socket, t, edge) = {
            let th = &self.threads[k];
            (th.socket, th.t, th.edge)
        };
        let node = socket;
        let ns = GRAPH + ((node as u64) << 36);
        let mut stall = Time::ZERO;
        // The edge list: a new page when the step enters one.
        let first_page = edge * EDGE_BYTES / PAGE;
        let last_page = (edge + s.edges_per_step as u64) * EDGE_BYTES / PAGE;
        if last_page != first_page || edge == 0 {
            let page = ns + (1 << 35) + (last_page & ((1 << 30) - 1));
            stall = stall.max(mem.cpu_read(t, socket, node, page, PAGE, false));
        }
        // The neighbours' scores: independent random lines, overlapping.
        let lines = s.scores_bytes / LINE;
        for _ in 0..s.edges_per_step {
            let line = self.next() % lines;
            stall = stall.max(mem.cpu_read(t, socket, node, ns + line, LINE, false));
        }
        let compute = s.cycles_per_edge * s.edges_per_step as u64;
        let ps = (compute as f64 * 1000.0 / s.clock_ghz).round() as u64;
        let th = &mut self.threads[k];
        th.t = t + stall + Time::from_ps(ps.max(1));
        th.edge += s.edges_per_step as u64;
        self.edges += s.edges_per_step as u64;
    }

    /// Edges per second over a window of `window`.
    pub fn edges_per_s(&self, window: Time) -> f64 {
        self.edges as f64 / window.as_secs_f64()
    }
}

impl Background for PageRank {
    fn advance(&mut self, mem: &mut MemSys, until: Time) {
        // The thread furthest behind goes next, so reservations stay near time order.
        loop {
            let Some((k, _)) = self
                .threads
                .iter()
                .enumerate()
                .filter(|(_, th)| th.t < until)
                .min_by_key(|(_, th)| th.t)
            else {
                return;
            };
            self.step(mem, k);
        }
    }

    fn reset_counters(&mut self) {
        self.edges = 0;
    }
}

/// The victim alone on `mem`: its edge rate over `window` after `warmup`.
pub fn solo(mem: &mut MemSys, v: &mut PageRank, warmup: Time, window: Time) -> f64 {
    v.advance(mem, warmup);
    v.reset_counters();
    mem.reset_counters();
    v.advance(mem, warmup + window);
    v.edges_per_s(window)
}
