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

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::error::InspectError;
use crate::model::Machine;
use crate::platform_file::{format_float, MemoryParams};
use crate::sysfs::{import_sysfs, meminfo_field};

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

/// Huge pages backing one memory node's buffer, read from `/proc/self/smaps` once the
/// buffer is filled (every page touched).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HugePages {
    pub node: u32,
    pub buffer_bytes: usize,
    /// Bytes in transparent huge pages (`AnonHugePages`); `None` when smaps could not
    /// be read.
    pub transparent_bytes: Option<u64>,
    /// Bytes in explicit hugetlbfs pages (`Private_Hugetlb` + `Shared_Hugetlb`).
    pub explicit_bytes: Option<u64>,
    /// What `madvise(MADV_HUGEPAGE)` answered: `accepted` or the error.
    pub advice: String,
}

impl HugePages {
    /// Share of the buffer in huge pages of either kind, if known.
    pub fn granted_fraction(&self) -> Option<f64> {
        let huge = self.transparent_bytes? + self.explicit_bytes.unwrap_or(0);
        Some(huge as f64 / self.buffer_bytes.max(1) as f64)
    }

    /// `node 0: 256 of 256 MiB in huge pages (transparent)`.
    pub fn describe(&self) -> String {
        match (self.transparent_bytes, self.explicit_bytes) {
            (Some(t), e) => format!(
                "node {}: {} of {} MiB in huge pages ({} MiB transparent, {} MiB explicit; madvise {})",
                self.node,
                (t + e.unwrap_or(0)) >> 20,
                self.buffer_bytes >> 20,
                t >> 20,
                e.unwrap_or(0) >> 20,
                self.advice
            ),
            (None, _) => format!(
                "node {}: huge pages unknown (/proc/self/smaps unreadable; madvise {})",
                self.node, self.advice
            ),
        }
    }
}

/// Sums `AnonHugePages` and `Private_Hugetlb` + `Shared_Hugetlb` (kB) over the smaps
/// entries inside `[start, end)`: (transparent bytes, explicit bytes). `None` when no
/// entry lies there.
pub fn smaps_huge_bytes(smaps: &str, start: u64, end: u64) -> Option<(u64, u64)> {
    let mut inside = false;
    let mut found = false;
    let (mut thp, mut tlb) = (0u64, 0u64);
    for line in smaps.lines() {
        // An entry starts with `7f12a4000000-7f12b4000000 rw-p 00000000 00:00 0 …`.
        let range = line.split_whitespace().next().and_then(|r| {
            let (a, b) = r.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        });
        let perms = line.split_whitespace().nth(1).is_some_and(|p| p.len() == 4);
        if let Some((a, b)) = range.filter(|_| perms) {
            inside = a >= start && b <= end;
            found |= inside;
            continue;
        }
        if !inside {
            continue;
        }
        let kib = |field: &str| -> Option<u64> {
            line.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        };
        if let Some(k) = kib("AnonHugePages:") {
            thp += k << 10;
        } else if let Some(k) = kib("Private_Hugetlb:").or_else(|| kib("Shared_Hugetlb:")) {
            tlb += k << 10;
        }
    }
    found.then_some((thp, tlb))
}

/// The passes of one measurement: one untimed warm-up pass — page walks into page
/// tables not yet cached, a core and its uncore leaving idle clocks — then `iterations`
/// timed passes, whose results alone are returned.
fn after_warm_up<T>(iterations: u32, mut pass: impl FnMut() -> T) -> Vec<T> {
    let _warm_up = pass();
    (0..iterations).map(|_| pass()).collect()
}

/// A timed bandwidth pass reads at least this much, so that thread wake-up and
/// scheduling noise stay small against it.
const MIN_PASS_BYTES: usize = 1 << 30;

const LINE: usize = 64;
const WORDS_PER_LINE: usize = LINE / 8;

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

/// What every (CPU node, memory node) measurement shares.
struct Plan<'a> {
    machine: &'a Machine,
    nodes: &'a [u32],
    cpus_of: &'a [CpuSet],
    /// Bandwidth threads per CPU node.
    threads: &'a [usize],
    /// Dependent loads per latency run.
    loads: usize,
    iterations: u32,
}

impl Plan<'_> {
    /// The median latency (ns) and bandwidth (GB/s) from every node to the buffer on
    /// `mem_node`, row by row.
    fn measure_column(
        &self,
        words: &[u64],
        mem_node: u32,
        notes: &mut Vec<String>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Vec<(f64, f64)>, InspectError> {
        let Plan {
            machine,
            nodes,
            cpus_of,
            threads,
            loads,
            iterations,
        } = *self;
        let mut column = Vec::with_capacity(nodes.len());
        for (ci, &cpu_node) in nodes.iter().enumerate() {
            let cpus = if cpus_of[ci].is_empty() {
                // A memory-only node runs nothing; measure from the nearest CPU node.
                let near = nearest_cpu_node(machine, cpu_node).unwrap_or(0);
                notes.push(format!(
                    "node {cpu_node} has no CPUs: its row is measured from node {}",
                    nodes[near]
                ));
                cpus_of[near].clone()
            } else {
                cpus_of[ci].clone()
            };
            progress(&format!(
                "measuring CPU node {cpu_node} -> memory node {mem_node}"
            ));
            let lat = measure_latency(words, &cpus, loads, iterations, notes)?;
            let bw = measure_bandwidth(words, &cpus, threads[ci], iterations, notes)?;
            for (what, runs) in [("latency", &lat), ("bandwidth", &bw)] {
                if spread(runs) > 0.10 {
                    notes.push(format!(
                        "{what} runs of CPU node {cpu_node} -> memory node {mem_node} spread {:.0} % (the machine was busy or changed clocks): run more --iterations",
                        spread(runs) * 100.0
                    ));
                }
            }
            let (lat, bw) = (median(lat), median(bw));
            column.push((lat, bw));
        }
        Ok(column)
    }
}

/// The bracketed word of `/sys/kernel/mm/transparent_hugepage/enabled`.
fn thp_mode() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

fn nearest_cpu_node(m: &Machine, node: u32) -> Option<usize> {
    nearest_where(m, node, |j| !m.nodes[j].cpus.is_empty())
}

/// The index of the node nearest to `node` (by the distance matrix) among those
/// `accept` allows.
fn nearest_where(m: &Machine, node: u32, accept: impl Fn(usize) -> bool) -> Option<usize> {
    let d = m.numa_distances();
    m.nodes
        .iter()
        .enumerate()
        .filter(|(j, _)| accept(*j))
        .min_by(|(_, a), (_, b)| {
            let da = d
                .and_then(|d| d.get(node as u64, a.id as u64))
                .unwrap_or(f64::MAX);
            let db = d
                .and_then(|d| d.get(node as u64, b.id as u64))
                .unwrap_or(f64::MAX);
            da.total_cmp(&db)
        })
        .map(|(i, _)| i)
}

/// A random cyclic permutation of `0..n` (Sattolo's algorithm): following
/// `next = p[i]` from any line visits every line once before returning.
pub fn cyclic_permutation(n: u32, seed: u64) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n).collect();
    let mut state = seed;
    let mut next_u64 = || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..n as usize).rev() {
        let j = ((next_u64() as u128 * i as u128) >> 64) as usize; // 0..i
        p.swap(i, j);
    }
    p
}

/// (max − min) / median of a set of runs; 0 for fewer than two.
fn spread(v: &[f64]) -> f64 {
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let m = median(v.to_vec());
    if v.len() >= 2 && m > 0.0 {
        (hi - lo) / m
    } else {
        0.0
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The timed runs' ns per dependent load.
fn measure_latency(
    words: &[u64],
    cpus: &CpuSet,
    loads: usize,
    iterations: u32,
    notes: &mut Vec<String>,
) -> Result<Vec<f64>, InspectError> {
    let pin_cpu = CpuSet::single(cpus.first().unwrap_or(0));
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            let pinned = sys::pin_current_thread(&pin_cpu);
            let mut idx = 0usize;
            let runs = after_warm_up(iterations, || {
                let (end, dt) = chase(words, idx, loads);
                idx = end;
                dt.as_secs_f64() * 1e9 / loads as f64
            });
            (pinned, runs)
        })
        .join()
    });
    match result {
        Ok((pinned, ns)) => {
            if let Err(e) = pinned {
                notes.push(format!(
                    "sched_setaffinity failed ({e}): threads were not pinned"
                ));
            }
            Ok(ns)
        }
        Err(_) => Err(InspectError::Calibrate(
            "the latency thread panicked".to_string(),
        )),
    }
}

/// Follows the chain for `steps` loads from `start`; returns the last index.
fn chase(words: &[u64], start: usize, steps: usize) -> (usize, Duration) {
    let mut idx = start;
    let t0 = Instant::now();
    for _ in 0..steps {
        idx = words[idx] as usize;
    }
    let dt = t0.elapsed();
    (std::hint::black_box(idx), dt)
}

/// The timed passes' GB/s.
fn measure_bandwidth(
    words: &[u64],
    cpus: &CpuSet,
    threads: usize,
    iterations: u32,
    notes: &mut Vec<String>,
) -> Result<Vec<f64>, InspectError> {
    let cpu_list: Vec<u32> = cpus.iter().collect();
    let threads = threads.max(1);
    let chunk = words.len().div_ceil(threads);
    let reps = MIN_PASS_BYTES.div_ceil(words.len() * 8).max(1);
    // The same pinned threads do the warm-up and every timed pass, each pass starting
    // together at a barrier.
    let barrier = std::sync::Barrier::new(threads);
    // Per thread: each timed pass's (start, end), and whether it was pinned.
    type Spans = (Vec<(Instant, Instant)>, bool);
    let per_thread: Vec<Option<Spans>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let lo = (t * chunk).min(words.len());
                let hi = ((t + 1) * chunk).min(words.len());
                let part = &words[lo..hi];
                let cpu = CpuSet::single(cpu_list[t % cpu_list.len().max(1)]);
                let barrier = &barrier;
                s.spawn(move || {
                    let pinned = sys::pin_current_thread(&cpu).is_ok();
                    let spans = after_warm_up(iterations, || {
                        barrier.wait();
                        let t0 = Instant::now();
                        for _ in 0..reps {
                            std::hint::black_box(sum_words(std::hint::black_box(part)));
                        }
                        (t0, Instant::now())
                    });
                    (spans, pinned)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().ok()).collect()
    });
    let Some(per_thread) = per_thread.into_iter().collect::<Option<Vec<_>>>() else {
        return Err(InspectError::Calibrate(
            "a bandwidth thread panicked".to_string(),
        ));
    };
    if per_thread.iter().any(|t| !t.1) {
        notes.push("sched_setaffinity failed: threads were not pinned".to_string());
    }
    let bytes = (words.len() * 8 * reps) as f64;
    let mut rates = Vec::new();
    for i in 0..iterations as usize {
        let start = per_thread.iter().map(|t| t.0[i].0).min();
        let end = per_thread.iter().map(|t| t.0[i].1).max();
        if let (Some(a), Some(b)) = (start, end) {
            let secs = (b - a).as_secs_f64();
            if secs > 0.0 {
                rates.push(bytes / secs / 1e9);
            }
        }
    }
    if rates.is_empty() {
        notes.push("a bandwidth run was too short to time".to_string());
        return Ok(vec![f64::NAN]);
    }
    Ok(rates)
}

/// Sums a slice with four independent accumulators so the loads, not the adds,
/// limit the speed.
fn sum_words(words: &[u64]) -> u64 {
    let mut acc = [0u64; 4];
    let chunks = words.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        acc[0] = acc[0].wrapping_add(c[0]);
        acc[1] = acc[1].wrapping_add(c[1]);
        acc[2] = acc[2].wrapping_add(c[2]);
        acc[3] = acc[3].wrapping_add(c[3]);
    }
    let mut total = acc.iter().fold(0u64, |a, b| a.wrapping_add(*b));
    for w in rest {
        total = total.wrapping_add(*w);
    }
    total
}

#[cfg(target_os = "linux")]
mod sys {
    //! Thin wrappers over the Linux calls calibrate needs.

    use std::io;

    use crate::cpuset::CpuSet;

    const MPOL_BIND: libc::c_long = 2;
    const MPOL_MF_STRICT: libc::c_ulong = 1;
    const MPOL_MF_MOVE: libc::c_ulong = 2;
    const MPOL_F_NODE: libc::c_ulong = 1;
    const MPOL_F_ADDR: libc::c_ulong = 2;

    /// An anonymous private mapping, unmapped on drop.
    pub struct Mapping {
        ptr: *mut libc::c_void,
        len: usize,
    }

    impl Mapping {
        pub fn new(len: usize) -> io::Result<Mapping> {
            // SAFETY: a fresh anonymous mapping; no existing memory is affected.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            Ok(Mapping { ptr, len })
        }

        /// Asks for transparent huge pages; refusal only costs TLB misses.
        pub fn advise_huge_pages(&self) -> io::Result<()> {
            // SAFETY: advice on our own mapping; it changes no memory contents.
            if unsafe { libc::madvise(self.ptr, self.len, libc::MADV_HUGEPAGE) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        /// (transparent, explicit) huge-page bytes of the mapping, from smaps.
        pub fn huge_bytes(&self) -> Option<(u64, u64)> {
            let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
            let start = self.ptr as u64;
            super::smaps_huge_bytes(&text, start, start + self.len as u64)
        }

        /// Binds the (untouched) mapping to one node, so the first touch allocates there.
        pub fn bind_to_node(&self, node: u32) -> io::Result<()> {
            let bits = 64 * (node as usize / 64 + 1);
            let mut mask = vec![0 as libc::c_ulong; bits / 64];
            mask[node as usize / 64] |= 1 << (node % 64);
            // SAFETY: mbind reads `bits` bits from `mask`, which is that long; the
            // range is our mapping. The kernel counts maxnode one past the mask.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_mbind,
                    self.ptr,
                    self.len as libc::c_ulong,
                    MPOL_BIND,
                    mask.as_ptr(),
                    (bits + 1) as libc::c_ulong,
                    MPOL_MF_STRICT | MPOL_MF_MOVE,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        /// Checks where sample pages landed; a message when not all are on `node`.
        pub fn check_node(&self, node: u32) -> Option<String> {
            let samples = 16usize;
            let mut wrong = 0;
            let mut failed = None;
            for k in 0..samples {
                let off = (self.len / samples) * k;
                let mut found: libc::c_int = -1;
                // SAFETY: get_mempolicy writes one int to `found`; no nodemask is
                // requested (null, 0); the address lies inside our mapping.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_get_mempolicy,
                        &mut found as *mut libc::c_int,
                        std::ptr::null_mut::<libc::c_ulong>(),
                        0 as libc::c_ulong,
                        (self.ptr as *mut u8).wrapping_add(off) as *mut libc::c_void,
                        MPOL_F_NODE | MPOL_F_ADDR,
                    )
                };
                if rc != 0 {
                    failed = Some(io::Error::last_os_error());
                    break;
                }
                if found != node as libc::c_int {
                    wrong += 1;
                }
            }
            match (failed, wrong) {
                (Some(e), _) => Some(format!(
                    "cannot verify page placement on node {node} (get_mempolicy: {e})"
                )),
                (None, 0) => None,
                (None, w) => Some(format!(
                    "{w} of {samples} sampled pages are not on node {node}: the node is short of free memory"
                )),
            }
        }

        pub fn words(&self) -> &[u64] {
            // SAFETY: the mapping is page-aligned, `len` bytes long, readable, and
            // zero-filled on first access; it lives as long as `self`.
            unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.len / 8) }
        }

        pub fn words_mut(&mut self) -> &mut [u64] {
            // SAFETY: as in `words`, and `&mut self` makes the access exclusive.
            unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.len / 8) }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: unmaps exactly the region mmap returned; no slices outlive self.
            unsafe {
                libc::munmap(self.ptr, self.len);
            }
        }
    }

    /// Pins the calling thread to `cpus`.
    pub fn pin_current_thread(cpus: &CpuSet) -> io::Result<()> {
        // SAFETY: cpu_set_t is plain data; CPU_SET stays within its fixed size
        // because larger CPU numbers are skipped.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
            for cpu in cpus.iter().filter(|&c| (c as usize) < max) {
                libc::CPU_SET(cpu as usize, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    //! Calibration needs Linux's NUMA system calls.
    use std::io;

    use crate::cpuset::CpuSet;

    pub struct Mapping {
        data: Vec<u64>,
    }

    impl Mapping {
        pub fn new(len: usize) -> io::Result<Mapping> {
            let _ = len;
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "nudma calibrate needs Linux",
            ))
        }
        pub fn advise_huge_pages(&self) -> io::Result<()> {
            Ok(())
        }
        pub fn huge_bytes(&self) -> Option<(u64, u64)> {
            None
        }
        pub fn bind_to_node(&self, _node: u32) -> io::Result<()> {
            Ok(())
        }
        pub fn check_node(&self, _node: u32) -> Option<String> {
            None
        }
        pub fn words(&self) -> &[u64] {
            &self.data
        }
        pub fn words_mut(&mut self) -> &mut [u64] {
            &mut self.data
        }
    }

    pub fn pin_current_thread(_cpus: &CpuSet) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_one_cycle() {
        let n = 10_000u32;
        let p = cyclic_permutation(n, 42);
        let mut seen = vec![false; n as usize];
        let mut i = 0u32;
        for _ in 0..n {
            assert!(!seen[i as usize], "revisited {i} early");
            seen[i as usize] = true;
            i = p[i as usize];
        }
        assert_eq!(i, 0, "the walk returns to the start after n steps");
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn the_warm_up_pass_is_never_among_the_timed_ones() {
        // A pass that is slow the first time (cold) and fast after.
        for iterations in [1, 3] {
            let mut calls = 0;
            let timed = after_warm_up(iterations, || {
                calls += 1;
                if calls == 1 {
                    130.0
                } else {
                    100.0
                }
            });
            assert_eq!(calls, iterations as usize + 1);
            assert_eq!(timed, vec![100.0; iterations as usize]);
            // One iteration and three report the same.
            assert_eq!(median(timed.clone()), 100.0);
            assert_eq!(spread(&timed), 0.0);
        }
    }

    #[test]
    fn huge_pages_of_a_range_from_smaps() {
        let smaps = "\
7f0000000000-7f0010000000 rw-p 00000000 00:00 0 
Size:             262144 kB
AnonHugePages:    260096 kB
Private_Hugetlb:       0 kB
Shared_Hugetlb:        0 kB
7f0010000000-7f0010200000 rw-p 00000000 00:00 0                          [heap]
AnonHugePages:      2048 kB
7f0020000000-7f0020400000 rw-s 00000000 00:0f 1234                       /dev/hugepages/x
AnonHugePages:         0 kB
Shared_Hugetlb:     4096 kB
";
        assert_eq!(
            smaps_huge_bytes(smaps, 0x7f00_0000_0000, 0x7f00_1000_0000),
            Some((260_096 << 10, 0))
        );
        assert_eq!(
            smaps_huge_bytes(smaps, 0x7f00_2000_0000, 0x7f00_2040_0000),
            Some((0, 4096 << 10))
        );
        assert_eq!(smaps_huge_bytes(smaps, 0x1000, 0x2000), None);
        let h = HugePages {
            node: 1,
            buffer_bytes: 256 << 20,
            transparent_bytes: Some(254 << 20),
            explicit_bytes: Some(0),
            advice: "accepted".into(),
        };
        assert!((h.granted_fraction().unwrap() - 254.0 / 256.0).abs() < 1e-12);
        assert_eq!(
            h.describe(),
            "node 1: 254 of 256 MiB in huge pages (254 MiB transparent, 0 MiB explicit; madvise accepted)"
        );
    }

    #[test]
    fn medians_and_sums() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(spread(&[90.0, 100.0, 110.0]), 0.2);
        assert_eq!(spread(&[100.0]), 0.0);
        assert_eq!(sum_words(&[1, 2, 3, 4, 5]), 15);
    }
}
