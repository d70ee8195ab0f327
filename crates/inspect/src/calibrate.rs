//! `nudma calibrate`: measures this machine's memory latency and bandwidth for every
//! (CPU node, memory node) pair. These are wall-clock measurements of real hardware
//! (the simulator's "no wall clock" rule is about models, not about calibrating them).
//!
//! - placement: one buffer per memory node, bound with `mbind(MPOL_BIND)` before it
//!   is touched and checked with `get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR)`; measuring
//!   threads pinned with `sched_setaffinity` to the CPU node. Raw syscalls through
//!   `libc`, no libnuma.
//! - latency: a dependent pointer chase, one load per 64-byte line, following a
//!   random cyclic permutation (Sattolo) of all lines of a buffer much larger than the
//!   LLC, so every load misses the caches and no prefetcher can guess the next one.
//!   Transparent huge pages are requested to keep TLB misses out where possible, and
//!   the result says how much of each buffer the kernel granted (`/proc/self/smaps`).
//! - bandwidth: streaming 64-bit reads of the same buffer split across one thread per
//!   CPU of the CPU node, each timed pass reading at least 1 GiB.
//! - every measurement is an untimed warm-up pass, then `iterations` timed passes in
//!   the same pinned threads, reported as their median. The first pass on a core pays
//!   for what is cold — page walks into page tables not yet cached, a core and uncore
//!   leaving idle clocks, freshly spawned threads — and the old best-of-N bandwidth grew
//!   with N on a noisy machine: a one-iteration run read ≈ 30 % below the default.
//!
//! This file holds the options and result and runs the calibration; beside it:
//! `measure` (the latency and bandwidth runs), `huge_pages` (how much of a buffer the
//! kernel gave in huge pages) and `sys` (the Linux calls, or their stand-ins elsewhere).

use std::path::Path;

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::error::InspectError;
use crate::model::Machine;
use crate::platform_file::{format_float, MemoryParams};
use crate::sysfs::{import_sysfs, meminfo_field};

mod huge_pages;
mod measure;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(not(target_os = "linux"))]
#[path = "calibrate/sys_unsupported.rs"]
mod sys;

pub use huge_pages::{smaps_huge_bytes, HugePages};
pub use measure::cyclic_permutation;
use measure::{nearest_where, Plan, LINE, WORDS_PER_LINE};

/// What to measure and how long to spend on it.
#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    /// Buffer per memory node; default 256 MiB or 8 × the LLC, whichever is larger.
    pub size_bytes: Option<usize>,
    /// Timed repetitions of each measurement after an untimed warm-up (median of them).
    pub iterations: u32,
    /// Dependent loads per latency run; default min(lines in buffer, 2 Mi).
    pub loads: Option<usize>,
    /// Bandwidth threads per CPU node; default one per CPU of the node.
    pub threads: Option<usize>,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            size_bytes: None,
            iterations: 3,
            loads: None,
            threads: None,
        }
    }
}

/// The measured matrices and how they were obtained.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrationResult {
    pub hostname: Option<String>,
    pub cpu: Option<String>,
    /// Node numbers in matrix order.
    pub nodes: Vec<u32>,
    /// Row = CPU node, column = memory node, nanoseconds per dependent load.
    pub latency_ns: Vec<Vec<f64>>,
    /// Row = CPU node, column = memory node, GB/s (10^9 bytes per second).
    pub bandwidth_gbps: Vec<Vec<f64>>,
    pub buffer_bytes: usize,
    pub llc_bytes: Option<u64>,
    pub iterations: u32,
    pub loads_per_run: usize,
    /// Bandwidth threads used for each CPU node (matrix order).
    pub bandwidth_threads: Vec<usize>,
    /// Huge pages the kernel granted for each measured buffer.
    pub huge_pages: Vec<HugePages>,
    /// `/sys/kernel/mm/transparent_hugepage/enabled`: always, madvise or never.
    pub thp_mode: Option<String>,
    /// `false` on a single-node machine.
    pub nudma_possible: bool,
    /// What could not be done as planned (placement not enforced, …).
    pub notes: Vec<String>,
}

impl CalibrationResult {
    /// The `[platform.NAME.memory]` fragment with its header.
    pub fn to_params(&self, platform: &str) -> MemoryParams {
        let mut header = vec![
            format!(
                "nudma calibrate: memory latency and bandwidth of {} measured on the machine itself (wall clock)",
                self.hostname.as_deref().unwrap_or("this machine")
            ),
            format!(
                "CPU: {}; NUMA nodes: {}",
                self.cpu.as_deref().unwrap_or("unknown"),
                self.nodes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "latency: dependent pointer chase, one load per 64-byte line along a random cyclic permutation of a {} MiB buffer{}, {} loads per run, median of {} runs after an untimed one",
                self.buffer_bytes >> 20,
                self.llc_bytes
                    .map(|l| format!(" (LLC {} MiB)", l >> 20))
                    .unwrap_or_default(),
                self.loads_per_run,
                self.iterations
            ),
            format!(
                "bandwidth: streaming 64-bit reads of the same buffer by {} thread(s) pinned to the CPU node's CPUs, at least 1 GiB per pass, median of {} passes after an untimed one",
                self.bandwidth_threads
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join("/"),
                self.iterations
            ),
            self.huge_pages_line(),
            "placement: buffer bound to the memory node with mbind(MPOL_BIND) and checked with get_mempolicy; threads pinned with sched_setaffinity".to_string(),
        ];
        if !self.nudma_possible {
            header.push(
                "single NUMA node: a 1 x 1 matrix; no NUDMA is possible on this machine"
                    .to_string(),
            );
        }
        for n in &self.notes {
            header.push(format!("note: {n}"));
        }
        MemoryParams {
            platform: platform.to_string(),
            node_order: Some(self.nodes.clone()),
            latency_ns: self.latency_ns.clone(),
            bandwidth_gbps: self.bandwidth_gbps.clone(),
            header,
        }
    }

    /// Whether the buffers were in huge pages, in one line: TLB misses add to the
    /// latency where they were not.
    pub fn huge_pages_line(&self) -> String {
        let mode = self
            .thp_mode
            .as_deref()
            .map(|m| format!("; THP mode {m}"))
            .unwrap_or_default();
        let fractions: Option<Vec<f64>> = self
            .huge_pages
            .iter()
            .map(HugePages::granted_fraction)
            .collect();
        let verdict = match fractions {
            None => "unknown".to_string(),
            Some(f) if f.is_empty() => "no buffer measured".to_string(),
            Some(f) if f.iter().all(|&x| x >= 0.99) => "granted".to_string(),
            Some(f) if f.iter().all(|&x| x < 0.01) => {
                "not granted: latency includes TLB misses of 4 KiB pages".to_string()
            }
            Some(_) => {
                "partly granted: latency includes some TLB misses of 4 KiB pages".to_string()
            }
        };
        format!(
            "huge pages: {verdict} ({}){mode}",
            self.huge_pages
                .iter()
                .map(HugePages::describe)
                .collect::<Vec<_>>()
                .join("; ")
        )
    }

    /// A table for the terminal.
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "nudma calibrate: {} ({}), {} NUMA node(s)\n",
            self.hostname.as_deref().unwrap_or("this machine"),
            self.cpu.as_deref().unwrap_or("unknown CPU"),
            self.nodes.len()
        ));
        out.push_str(&format!(
            "buffer {} MiB per memory node{}, {} timed run(s) after an untimed one, {} loads per latency run\n{}\n\n",
            self.buffer_bytes >> 20,
            self.llc_bytes
                .map(|l| format!(" (LLC {} MiB)", l >> 20))
                .unwrap_or_default(),
            self.iterations,
            self.loads_per_run,
            self.huge_pages_line()
        ));
        for (title, m, unit) in [
            ("latency", &self.latency_ns, "ns"),
            ("read bandwidth", &self.bandwidth_gbps, "GB/s"),
        ] {
            out.push_str(&format!(
                "{title} ({unit}), row = CPU node, column = memory node:\n"
            ));
            out.push_str("          ");
            for n in &self.nodes {
                out.push_str(&format!("{:>10}", format!("mem {n}")));
            }
            out.push('\n');
            for (i, row) in m.iter().enumerate() {
                out.push_str(&format!("{:<10}", format!("cpu {}", self.nodes[i])));
                for v in row {
                    out.push_str(&format!("{:>10}", format_float(*v)));
                }
                out.push('\n');
            }
            out.push('\n');
        }
        if self.nudma_possible {
            let local: Vec<f64> = (0..self.nodes.len())
                .map(|i| self.latency_ns[i][i])
                .collect();
            let remote: Vec<f64> = (0..self.nodes.len())
                .flat_map(|i| {
                    (0..self.nodes.len())
                        .filter(move |&j| j != i)
                        .map(move |j| (i, j))
                })
                .map(|(i, j)| self.latency_ns[i][j])
                .collect();
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            out.push_str(&format!(
                "remote/local latency ratio: {:.2}\n",
                mean(&remote) / mean(&local)
            ));
        } else {
            out.push_str(
                "==> Only one NUMA node: a 1 x 1 matrix. No NUDMA is possible on this machine.\n",
            );
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

/// Measures the live machine (`/`).
pub fn calibrate(
    options: &CalibrateOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<CalibrationResult, InspectError> {
    let machine = import_sysfs(Path::new("/"))?;
    calibrate_machine(&machine, options, progress)
}

/// Measures, using `machine` (imported from `/`) for the node layout.
pub fn calibrate_machine(
    machine: &Machine,
    options: &CalibrateOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<CalibrationResult, InspectError> {
    if options.iterations == 0 {
        return Err(InspectError::Calibrate(
            "--iterations must be at least 1".to_string(),
        ));
    }
    let nodes: Vec<u32> = machine.nodes.iter().map(|n| n.id).collect();
    let cpus_of: Vec<CpuSet> = machine.nodes.iter().map(|n| n.cpus.clone()).collect();
    if nodes.is_empty() || cpus_of.iter().all(|c| c.is_empty()) {
        return Err(InspectError::Calibrate(
            "no NUMA node with CPUs found under /sys/devices/system/node".to_string(),
        ));
    }
    let llc = machine.last_level_cache().map(|c| c.size_bytes);
    let mut notes = Vec::new();
    let (size, has_memory) = buffer_size(machine, options, &nodes, llc, &mut notes)?;
    let lines = size / LINE;
    let loads = options.loads.unwrap_or(lines.min(1 << 21)).max(1);
    let n = nodes.len();
    let mut latency = vec![vec![f64::NAN; n]; n];
    let mut bandwidth = vec![vec![f64::NAN; n]; n];
    let threads: Vec<usize> = cpus_of
        .iter()
        .map(|c| options.threads.unwrap_or(c.len()).clamp(1, c.len().max(1)))
        .collect();
    let perm = cyclic_permutation(lines as u32, 0x6e75_646d_6100_0001);
    let mut huge_pages = Vec::new();
    let plan = Plan {
        machine,
        nodes: &nodes,
        cpus_of: &cpus_of,
        threads: &threads,
        loads,
        iterations: options.iterations,
    };

    for (mi, &mem_node) in nodes.iter().enumerate() {
        if !has_memory[mi] {
            notes.push(format!(
                "node {mem_node} has no free memory: its column repeats the nearest node with memory"
            ));
            continue;
        }
        let (buffer, pages) = prepare_buffer(size, mem_node, &perm, &mut notes, progress)?;
        huge_pages.push(pages);
        let column = plan.measure_column(buffer.words(), mem_node, &mut notes, progress)?;
        for (ci, (lat, bw)) in column.into_iter().enumerate() {
            latency[ci][mi] = lat;
            bandwidth[ci][mi] = bw;
        }
    }
    // Columns of memory-less nodes take the nearest measured column.
    for mi in (0..n).filter(|&i| !has_memory[i]) {
        let near = nearest_where(machine, nodes[mi], |j| has_memory[j]).unwrap_or(mi);
        for row in 0..n {
            latency[row][mi] = latency[row][near];
            bandwidth[row][mi] = bandwidth[row][near];
        }
    }
    notes.sort();
    notes.dedup();
    Ok(CalibrationResult {
        hostname: machine.hostname.clone(),
        cpu: machine.cpu_model.clone(),
        nodes,
        latency_ns: latency,
        bandwidth_gbps: bandwidth,
        buffer_bytes: size,
        llc_bytes: llc,
        iterations: options.iterations,
        loads_per_run: loads,
        bandwidth_threads: threads,
        huge_pages,
        thp_mode: thp_mode(),
        nudma_possible: n > 1,
        notes,
    })
}

/// The buffer per memory node (bytes, whole lines) and which nodes have the free memory
/// to measure. Binding a buffer to a node without enough free memory would wake the OOM
/// killer, so measure only nodes with memory and keep the buffer within half of the
/// smallest free amount.
fn buffer_size(
    machine: &Machine,
    options: &CalibrateOptions,
    nodes: &[u32],
    llc: Option<u64>,
    notes: &mut Vec<String>,
) -> Result<(usize, Vec<bool>), InspectError> {
    let size = match options.size_bytes {
        Some(s) => s,
        None => (256usize << 20).max(llc.unwrap_or(0) as usize * 8),
    };
    let size = size / LINE * LINE;
    if size < (1 << 20) {
        return Err(InspectError::Calibrate(
            "--size-mb must be at least 1".to_string(),
        ));
    }
    if size / LINE > u32::MAX as usize {
        return Err(InspectError::Calibrate(
            "--size-mb is too large (at most 256 GiB)".to_string(),
        ));
    }
    let free: Vec<Option<u64>> = nodes
        .iter()
        .map(|id| {
            std::fs::read_to_string(format!("/sys/devices/system/node/node{id}/meminfo"))
                .ok()
                .and_then(|t| meminfo_field(&t, "MemFree"))
        })
        .collect();
    let has_memory: Vec<bool> = nodes
        .iter()
        .zip(&free)
        .zip(&machine.nodes)
        .map(|((_, f), node)| {
            f.map(|f| f >= 64 << 20)
                .unwrap_or(node.memory_bytes.is_none_or(|m| m > 0))
        })
        .collect();
    if !has_memory.iter().any(|&h| h) {
        return Err(InspectError::Calibrate(
            "no NUMA node has free memory to measure".to_string(),
        ));
    }
    let min_free = free
        .iter()
        .zip(&has_memory)
        .filter(|(_, &h)| h)
        .filter_map(|(f, _)| *f)
        .min();
    let size = match min_free {
        Some(f) if (size as u64) > f / 2 => {
            let shrunk = (f / 2) as usize / LINE * LINE;
            if shrunk < (16 << 20) {
                return Err(InspectError::Calibrate(format!(
                    "too little free memory on a node ({} MiB)",
                    f >> 20
                )));
            }
            notes.push(format!(
                "buffer reduced from {} to {} MiB: half of the smallest free memory of a node",
                size >> 20,
                shrunk >> 20
            ));
            shrunk
        }
        _ => size,
    };
    if let Some(l) = llc {
        if (size as u64) < l.saturating_mul(4) {
            notes.push(format!(
                "the buffer ({} MiB) is less than 4 x the LLC ({} MiB): latency includes cache hits",
                size >> 20,
                l >> 20
            ));
        }
    }
    Ok((size, has_memory))
}

/// A buffer on `mem_node` holding the chain of dependent loads (`perm`), every page
/// touched, and how much of it the kernel gave in huge pages.
fn prepare_buffer(
    size: usize,
    mem_node: u32,
    perm: &[u32],
    notes: &mut Vec<String>,
    progress: &mut dyn FnMut(&str),
) -> Result<(sys::Mapping, HugePages), InspectError> {
    progress(&format!(
        "preparing a {} MiB buffer on memory node {mem_node}",
        size >> 20
    ));
    let mut buffer = sys::Mapping::new(size)
        .map_err(|e| InspectError::Calibrate(format!("cannot map {} MiB: {e}", size >> 20)))?;
    let advice = match buffer.advise_huge_pages() {
        Ok(()) => "accepted".to_string(),
        Err(e) => format!("refused ({e})"),
    };
    if let Err(e) = buffer.bind_to_node(mem_node) {
        notes.push(format!(
            "mbind to node {mem_node} failed ({e}): memory placement for that column follows first touch"
        ));
    }
    {
        let words = buffer.words_mut();
        for (i, &next) in perm.iter().enumerate() {
            words[i * WORDS_PER_LINE] = next as u64 * WORDS_PER_LINE as u64;
        }
    }
    if let Some(msg) = buffer.check_node(mem_node) {
        notes.push(msg);
    }
    // Every page is touched now: what the kernel gave is what the runs will use.
    let (transparent, explicit) = buffer.huge_bytes().unzip();
    let pages = HugePages {
        node: mem_node,
        buffer_bytes: size,
        transparent_bytes: transparent,
        explicit_bytes: explicit,
        advice,
    };
    Ok((buffer, pages))
}

/// The bracketed word of `/sys/kernel/mm/transparent_hugepage/enabled`.
fn thp_mode() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}
