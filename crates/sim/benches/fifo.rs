//! Criterion benchmark: `memsys::Fifo::reserve`, the server every DRAM channel, uncore
//! link and PCIe/NIC port of the packet models books per packet. Two streams of the
//! same precomputed packets: arrivals in time order (each at or after the last), and
//! the packet models' order — a completion booked a few µs ahead of the next packet's
//! request, with an occasional arrival tens of µs late — which lands reservations in
//! the gaps before booked work.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sim::memsys::Fifo;
use sim::Time;

const PACKETS: usize = 200_000;
/// A 10 GB/s server: a 1,500-byte packet takes 150 ns.
const GBPS: f64 = 10.0;

/// (arrival, bytes) in time order: sizes 64–1,500 B, gaps up to twice a packet's time.
fn in_order() -> Vec<(Time, u64)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut t = 0u64;
    (0..PACKETS)
        .map(|_| {
            let bytes = rng.random_range(64..=1500u64);
            t += rng.random_range(0..=2 * bytes * 100); // ps: 100 ps a byte at 10 GB/s
            (Time::from_ps(t), bytes)
        })
        .collect()
}

/// The same packets, each followed by a 64-byte completion booked 2 µs ahead, and one
/// in 50 arriving up to 50 µs late.
fn out_of_order() -> Vec<(Time, u64)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    in_order()
        .into_iter()
        .flat_map(|(t, bytes)| {
            let late = if rng.random_range(0..50) == 0 {
                rng.random_range(0..50_000_000u64)
            } else {
                0
            };
            let at = Time::from_ps(t.as_ps().saturating_sub(late));
            [(at, bytes), (Time::from_ps(t.as_ps() + 2_000_000), 64)]
        })
        .collect()
}

fn reserve(c: &mut Criterion) {
    let mut g = c.benchmark_group("fifo_reserve");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (name, stream) in [("in_order", in_order()), ("out_of_order", out_of_order())] {
        g.throughput(Throughput::Elements(stream.len() as u64));
        g.bench_with_input(BenchmarkId::new(name, stream.len()), &stream, |b, s| {
            b.iter(|| {
                let mut f = Fifo::new(GBPS);
                let mut last = Time::ZERO;
                for &(at, bytes) in s {
                    last = last.max(f.reserve(black_box(at), bytes));
                }
                last
            })
        });
    }
    g.finish();
}

criterion_group!(benches, reserve);
criterion_main!(benches);
