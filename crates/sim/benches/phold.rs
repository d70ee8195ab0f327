//! Criterion benchmark: PHOLD (1,000 LPs) on the engine's ladder queue vs the
//! binary-heap baseline, same random sequence; plus the queue alone in a hold model
//! (pop one, push one at t + a precomputed delay) to separate queue cost from the
//! random-variate cost. Sample sizes are small so that `cargo bench -p sim` takes a
//! couple of minutes on two cores.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use sim::phold::{run_binary_heap, run_engine, PholdConfig};
use sim::{Queue, Time};

const EVENTS: u64 = 1_000_000;

fn phold(c: &mut Criterion) {
    let mut g = c.benchmark_group("phold_1000lps");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(EVENTS));
    let cfg = PholdConfig {
        lps: 1000,
        events: EVENTS,
        seed: 1,
    };
    g.bench_function("ladder_engine", |b| {
        b.iter(|| run_engine(black_box(&cfg)).unwrap())
    });
    g.bench_function("binary_heap", |b| {
        b.iter(|| run_binary_heap(black_box(&cfg)).unwrap())
    });
    g.finish();
}

/// Delays like PHOLD's (0.1 us + Exp(1 us)), precomputed.
fn delays() -> Vec<u64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    (0..1 << 16)
        .map(|_| 100_000 + sim::dist::exp_ps(&mut rng, 1e6))
        .collect()
}

fn hold(c: &mut Criterion) {
    const OPS: usize = 1_000_000;
    let d = delays();
    let mask = d.len() - 1;
    let mut g = c.benchmark_group("hold");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(OPS as u64));
    for n in [1_000usize, 100_000] {
        g.bench_with_input(BenchmarkId::new("ladder", n), &n, |b, &n| {
            b.iter(|| {
                let mut q: Queue<u32> = Queue::with_capacity(n);
                for i in 0..n {
                    q.push(Time::from_ps(d[i & mask]), i as u32);
                }
                for k in 0..OPS {
                    let (t, e) = q.pop().unwrap();
                    q.push(Time::from_ps(t.as_ps() + d[k & mask]), e);
                }
                q.len()
            })
        });
        g.bench_with_input(BenchmarkId::new("binary_heap", n), &n, |b, &n| {
            b.iter(|| {
                let mut h = BinaryHeap::with_capacity(n);
                let mut seq = 0u64;
                for i in 0..n {
                    h.push(Reverse((d[i & mask], seq, i as u32)));
                    seq += 1;
                }
                for k in 0..OPS {
                    let Reverse((t, _, e)) = h.pop().unwrap();
                    h.push(Reverse((t + d[k & mask], seq, e)));
                    seq += 1;
                }
                h.len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, phold, hold);
criterion_main!(benches);
