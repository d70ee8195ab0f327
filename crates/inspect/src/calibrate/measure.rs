//! The measurements: a dependent pointer chase for latency, streaming reads over one
//! pinned thread per CPU for bandwidth, each an untimed warm-up pass then timed passes
//! reported as their median, for every CPU node against one memory node's buffer.

use std::time::{Duration, Instant};

use super::sys;
use crate::cpuset::CpuSet;
use crate::error::InspectError;
use crate::model::Machine;

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

pub(super) const LINE: usize = 64;

pub(super) const WORDS_PER_LINE: usize = LINE / 8;

/// What every (CPU node, memory node) measurement shares.
pub(super) struct Plan<'a> {
    pub(super) machine: &'a Machine,
    pub(super) nodes: &'a [u32],
    pub(super) cpus_of: &'a [CpuSet],
    /// Bandwidth threads per CPU node.
    pub(super) threads: &'a [usize],
    /// Dependent loads per latency run.
    pub(super) loads: usize,
    pub(super) iterations: u32,
}

impl Plan<'_> {
    /// The median latency (ns) and bandwidth (GB/s) from every node to the buffer on
    /// `mem_node`, row by row.
    pub(super) fn measure_column(
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

fn nearest_cpu_node(m: &Machine, node: u32) -> Option<usize> {
    nearest_where(m, node, |j| !m.nodes[j].cpus.is_empty())
}

/// The index of the node nearest to `node` (by the distance matrix) among those
/// `accept` allows.
pub(super) fn nearest_where(
    m: &Machine,
    node: u32,
    accept: impl Fn(usize) -> bool,
) -> Option<usize> {
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
    fn medians_and_sums() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(spread(&[90.0, 100.0, 110.0]), 0.2);
        assert_eq!(spread(&[100.0]), 0.0);
        assert_eq!(sum_words(&[1, 2, 3, 4, 5]), 15);
    }
}
