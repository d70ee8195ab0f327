//! The GPU ping-pong as a `nudma run` workload: alone it takes exactly what the sequence
//! of single accesses of `devices::pingpong` takes; beside a DMA stream on the same path it
//! slows; with its counters in host RAM the waiting kernel polls by reads, and every value
//! it reads is the one written.

use fabric::scenario::Source;
use studies::run::{self, overrides::Override, PointResult};

const GPUS: &str = r#"
include = ["platforms/smartio.toml", "platforms/devices.toml"]
[scenario]
name = "two_gpus"
[[host]]
name = "h"
platform = "smartio_host"
[[host.switch]]
name = "sw"
chip = "pex8796"
parent = "rc0"
link = { gen = 3, width = 16 }
[[host.device]]
name = "gpu0"
device_model = "p4000"
parent = "sw"
[[host.device]]
name = "gpu1"
device_model = "p4000"
parent = "sw"
[[workload]]
name = "pp"
kind = "pingpong"
a = "h.gpu0"
b = "h.gpu1"
counters = "gpu_memory"
[measure]
warmup = "10 us"
duration = "200 us"
"#;

const COPY: &str = r#"
[[workload]]
name = "copy"
kind = "dma"
device = "h.gpu0"
target = "h.gpu1.bar1"
offset = "1 MiB"
op = "write"
transfer_bytes = "64 KiB"
outstanding = 8
"#;

fn src(text: &str) -> Source {
    Source {
        name: "two_gpus.toml".into(),
        text: text.into(),
    }
}

fn point(text: &str, sets: &[&str]) -> PointResult {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    run::run_point(&src(text), &run::sweep(&sets)[0], 1).unwrap()
}

fn m(p: &PointResult, w: &str, k: &str) -> f64 {
    let r = p.rows.iter().find(|r| r.params["workload"] == w).unwrap();
    r.metrics[k]
        .as_f64()
        .unwrap_or_else(|| panic!("{w}.{k}: {:?}", r.metrics))
}

#[test]
fn alone_a_round_trip_is_two_flights_and_two_poll_iterations() {
    let p = point(GPUS, &[]);
    let (p50, p99) = (m(&p, "pp", "latency_ns_p50"), m(&p, "pp", "latency_ns_p99"));
    assert_eq!(p50, p99, "nothing else on the fabric: every round alike");
    assert_eq!(m(&p, "pp", "wrong_values"), 0.0);
    // The same hardware through the single-access model of the SmartIO experiments.
    let mut tf = studies::harness::load_source(&src(GPUS)).unwrap();
    let (a, b) = (
        studies::harness::requester(&tf, "h.gpu0").unwrap(),
        studies::harness::requester(&tf, "h.gpu1").unwrap(),
    );
    let node = |r| match r {
        fabric::Requester::Function(n) => n,
        _ => unreachable!(),
    };
    let ga = devices::Gpu::from_node(&tf, node(a)).unwrap();
    let gb = devices::Gpu::from_node(&tf, node(b)).unwrap();
    let c = devices::Counters::InGpuMemory {
        a_to_b: studies::harness::map_buffer(&mut tf, a, "h.gpu1.bar1", 0x2000, 4).unwrap(),
        b_to_a: studies::harness::map_buffer(&mut tf, b, "h.gpu0.bar1", 0x1000, 4).unwrap(),
        a_offset: 0x1000,
        b_offset: 0x2000,
    };
    let single = devices::pingpong(&mut tf, &ga, &gb, c, 4)
        .unwrap()
        .as_ns_f64();
    // Within the histogram's 1/64 bucket.
    assert!((p50 / single - 1.0).abs() < 1.0 / 64.0, "{p50} vs {single}");
}

#[test]
fn a_dma_stream_on_the_same_path_slows_the_ping_pong() {
    let quiet = point(GPUS, &[]);
    let busy = point(&format!("{GPUS}{COPY}"), &[]);
    let (q, b) = (
        m(&quiet, "pp", "latency_ns_p50"),
        m(&busy, "pp", "latency_ns_p50"),
    );
    assert!(
        m(&busy, "copy", "throughput_gbyte_s") > 5.0,
        "the copy runs: {}",
        m(&busy, "copy", "throughput_gbyte_s")
    );
    // At least one of the copy's 256 B TLPs ahead of the counter write on a Gen3 x16
    // link (≈ 18 ns), and at most the copy's writes in flight on the way.
    assert!(
        b > q + 18.0 && b < q + 2_000.0,
        "queued behind the copy's writes: {b} vs {q}"
    );
    assert_eq!(m(&busy, "pp", "wrong_values"), 0.0);
}

#[test]
fn counters_in_host_ram_are_polled_by_reads() {
    let ram = point(
        GPUS,
        &[
            "workload.pp.counters=host_ram",
            "workload.pp.ram=h.ram.node0",
        ],
    );
    let gpu = point(GPUS, &[]);
    assert!(m(&ram, "pp", "poll_reads") > m(&ram, "pp", "ops_per_sec") * 200e-6);
    assert_eq!(m(&ram, "pp", "wrong_values"), 0.0);
    assert!(
        m(&ram, "pp", "latency_ns_p50") > m(&gpu, "pp", "latency_ns_p50"),
        "a read round trip per poll costs more than a local poll"
    );
    let e = run::run_point(
        &src(GPUS),
        &run::sweep(&[Override::parse("workload.pp.counters=host_ram").unwrap()])[0],
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("workload.pp.ram"), "{e}");
}
