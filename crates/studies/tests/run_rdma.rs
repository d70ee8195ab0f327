//! `nudma run`'s RDMA workloads on the README's examples (examples/rdma_bench.toml,
//! examples/rdma_memcached.toml): they run and report their metrics, a sweep's
//! placements keep the model's order, and bad values are refused where written.

use std::path::Path;

use fabric::scenario::Source;
use studies::run::{self, overrides::Override, PointResult};

fn example(name: &str) -> Source {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    run::source(path.to_str().unwrap()).unwrap()
}

fn sweep(name: &str, sets: &[&str]) -> Vec<PointResult> {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    run::run_all(&example(name), &run::sweep(&sets), 1, 1, false).unwrap()
}

fn metric(p: &PointResult, m: &str) -> f64 {
    p.rows[0].metrics[m]
        .as_f64()
        .unwrap_or_else(|| panic!("no metric {m} in {:?}", p.rows[0].metrics))
}

#[test]
fn the_benchmark_example_runs_and_local_reads_beat_remote_ones() {
    let pts = sweep(
        "rdma_bench.toml",
        &["workload.reads.server_placement=local,remote"],
    );
    let (local, remote) = (
        metric(&pts[0], "ops_per_sec"),
        metric(&pts[1], "ops_per_sec"),
    );
    // 8 QPs with one 64 B READ outstanding each over a ≈ 2.3 µs round trip: millions.
    assert!((2e6..6e6).contains(&local), "{local}");
    assert!(remote < local, "remote {remote}/s, local {local}/s");
    let gbps = metric(&pts[0], "throughput_gbyte_s");
    assert!((gbps - local * 64.0 / 1e9).abs() < 1e-9);
}

#[test]
fn the_benchmark_runs_atomics_and_a_closed_loop_reports_latency() {
    let pts = sweep(
        "rdma_bench.toml",
        &[
            "workload.reads.verb=faa",
            "workload.reads.bytes=8",
            "workload.reads.mode=closed",
        ],
    );
    let lat = metric(&pts[0], "latency_ns");
    assert!((1500.0..4000.0).contains(&lat), "{lat}");
}

#[test]
fn the_memcached_example_runs_and_reports_throughput_and_latency_quantiles() {
    let pts = sweep(
        "rdma_memcached.toml",
        &["workload.kv.placement=both_local,both_remote"],
    );
    let (local, remote) = (metric(&pts[0], "kops"), metric(&pts[1], "kops"));
    assert!(
        remote < local,
        "both_remote {remote} kops, both_local {local}"
    );
    let (p50, p99) = (
        metric(&pts[0], "latency_ns_p50"),
        metric(&pts[0], "latency_ns_p99"),
    );
    assert!(p50 > 1000.0 && p99 >= p50, "p50 {p50} ns, p99 {p99} ns");
}

fn refused(name: &str, set: &str) -> String {
    let o = Override::parse(set).unwrap();
    match run::run_all(&example(name), &run::sweep(&[o]), 1, 1, false) {
        Ok(_) => panic!("`{set}` was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_values_are_refused_where_they_are_written() {
    let e = refused("rdma_bench.toml", "workload.reads.verb=send");
    assert!(
        e.contains("rdma_bench.toml (with --set):")
            && e.contains("(key `workload.reads.verb`)")
            && e.contains("verb `send`: use \"read\", \"write\", \"cas\" or \"faa\""),
        "{e}"
    );
    let e = refused("rdma_memcached.toml", "workload.kv.connections=0");
    assert!(
        e.contains("(key `workload.kv.connections`)") && e.contains("must be 1 .. 256 clients"),
        "{e}"
    );
    let e = refused("rdma_bench.toml", "workload.reads.connections=0");
    assert!(e.contains("(key `workload.reads.connections`)"), "{e}");
    let e = refused("rdma_memcached.toml", "workload.kv.placement=both");
    assert!(e.contains("placement `both`"), "{e}");
    // The example has load threads: workers beside them are refused, not mixed silently.
    let e = refused("rdma_bench.toml", "workload.reads.workers=4");
    assert!(
        e.contains("(key `workload.reads.workers`)") && e.contains("set `workers` or `load`"),
        "{e}"
    );
    let e = refused("rdma_bench.toml", "workload.reads.samples=0");
    assert!(e.contains("(key `workload.reads.samples`)"), "{e}");
}

/// Server threads storing to the region's own lines (w90) leave them Modified in their
/// cores: each RNIC READ of such a line waits for its snoop, so small READs, bound by
/// their round trip, slow as workers are added; loading workers leave shared copies,
/// which a READ does not wait for.
#[test]
fn storing_workers_on_the_region_slow_reads_and_loading_ones_do_not() {
    let run = |workers: u32, mix: &str| {
        let pts = sweep(
            "rdma_bench.toml",
            &[
                "workload.reads.load=none",
                "workload.reads.server_placement=local",
                "workload.reads.bytes=8",
                &format!("workload.reads.workers={workers}"),
                &format!("workload.reads.worker_mix={mix}"),
            ],
        );
        metric(&pts[0], "mops")
    };
    let (none, storing, loading) = (run(0, "w90"), run(16, "w90"), run(16, "read"));
    assert!(
        storing < 0.9 * none,
        "16 storing workers {storing} Mops, none {none}"
    );
    assert!(
        (loading - none).abs() < 0.01 * none,
        "16 loading workers {loading} Mops, none {none}"
    );
}

/// An open loop's window cut into samples: the system rate is the same, and its
/// deviation over the samples is reported (a model without variance gives a small one).
#[test]
fn an_open_loop_cut_into_samples_reports_the_rate_and_its_deviation() {
    let pts = sweep("rdma_bench.toml", &["workload.reads.samples=1,4"]);
    let (one, four) = (metric(&pts[0], "mops"), metric(&pts[1], "mops"));
    assert!(
        (one - four).abs() < 0.01 * one,
        "1 sample {one}, 4 samples {four}"
    );
    assert_eq!(metric(&pts[0], "std_mops"), 0.0);
    let std = metric(&pts[1], "std_mops");
    assert!(std.is_finite() && std < 0.05 * four, "{std}");
}
