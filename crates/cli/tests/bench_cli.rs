//! `nudma bench` end to end on tiny windows: each subcommand's JSON has the contract's
//! shape (`{"results": [{"experiment", "config", "params", "metrics"}]}`), its metric
//! names carry their unit, and the workload moved data. Timings are not asserted.

mod common;
use common::nudma;
use serde_json::Value;

/// Runs `nudma bench ARGS --format json`; returns its only or all result rows.
fn bench_json(args: &[&str]) -> Vec<Value> {
    let mut a = vec!["bench"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--format", "json"]);
    let (code, out, err) = nudma(&a);
    assert_eq!(code, 0, "nudma {a:?}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let rows = v["results"].as_array().expect("results").clone();
    assert!(!rows.is_empty(), "{out}");
    for r in &rows {
        let keys: Vec<&str> = r
            .as_object()
            .expect("row")
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys, ["config", "experiment", "metrics", "params"], "{r}");
        assert!(r["params"].is_object() && r["metrics"].is_object(), "{r}");
    }
    rows
}

fn metric(r: &Value, key: &str) -> f64 {
    r["metrics"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no numeric metric `{key}` in {r}"))
}

/// The timing metrics every workload bench reports, with the window asked for.
fn check_timing(r: &Value, experiment: &str, window_s: f64) {
    assert_eq!(r["experiment"], experiment, "{r}");
    assert_eq!(r["config"], "default", "{r}");
    assert!((metric(r, "window_s") - window_s).abs() < 1e-12, "{r}");
    let sim = metric(r, "sim_s");
    assert!(
        (sim - metric(r, "warmup_s") - window_s).abs() < 1e-12,
        "{r}"
    );
    assert!(metric(r, "wall_s") > 0.0, "{r}");
    assert!(metric(r, "sim_s_per_wall_s") > 0.0, "{r}");
}

#[test]
fn bench_net_receives_near_line_rate_into_remote_buffers() {
    let rows = bench_json(&["net", "--warmup", "200 us", "--duration", "500 us"]);
    let r = &rows[0];
    check_timing(r, "bench.net", 500e-6);
    assert_eq!(r["params"]["connections"], 14, "{r}");
    assert_ne!(r["params"]["cpu_node"], Value::Null, "{r}");
    // The buffers are on node 1, the NIC on socket 0.
    assert_eq!(r["params"]["mem_node"], 1, "{r}");
    let gbit = metric(r, "throughput_gbit_s");
    assert!(gbit > 50.0 && gbit <= 100.0, "{r}");
    assert!(
        metric(r, "frames") > 0.0 && metric(r, "events") > 0.0,
        "{r}"
    );
    assert!(metric(r, "bytes_delivered") > 0.0, "{r}");
}

#[test]
fn bench_nvme_completes_commands() {
    let rows = bench_json(&["nvme", "--warmup", "50 us", "--duration", "300 us"]);
    let r = &rows[0];
    check_timing(r, "bench.nvme", 300e-6);
    assert_eq!(r["params"]["block_bytes"], 4096, "{r}");
    assert!(metric(r, "nvme_cmds") > 0.0, "{r}");
    assert!(metric(r, "iops") > 0.0, "{r}");
    assert!(metric(r, "throughput_gbyte_s") > 0.0, "{r}");
    assert!(metric(r, "nvme_cmds_per_wall_s") > 0.0, "{r}");
    assert_eq!(metric(r, "errors"), 0.0, "{r}");
}

#[test]
fn bench_rdma_completes_operations() {
    let rows = bench_json(&["rdma", "--warmup", "100 us", "--duration", "300 us"]);
    let r = &rows[0];
    check_timing(r, "bench.rdma", 300e-6);
    assert_eq!(r["params"]["kind"], "rdma_bench", "{r}");
    assert!(metric(r, "rdma_ops") > 0.0, "{r}");
    assert!(metric(r, "ops_per_s") > 0.0, "{r}");
    assert!(metric(r, "rdma_ops_per_wall_s") > 0.0, "{r}");
}

#[test]
fn bench_catalog_times_the_experiments_named() {
    let rows = bench_json(&["catalog", "rdma.memcached"]);
    let scopes: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["experiment"], "bench.catalog", "{r}");
            assert_eq!(r["params"]["targets"][0], "rdma.memcached", "{r}");
            assert!(metric(r, "wall_s") > 0.0, "{r}");
            assert!(metric(r, "rows") > 0.0, "{r}");
            (
                r["params"]["scope"].as_str().expect("scope"),
                r["config"].as_str().expect("config"),
            )
        })
        .collect();
    assert_eq!(
        scopes,
        [
            ("all", "all"),
            ("study", "rdma"),
            ("experiment", "rdma.memcached")
        ]
    );
}

#[test]
fn bench_phold_json_is_unchanged() {
    let rows = bench_json(&["phold", "--lps", "10", "--events", "1000"]);
    assert_eq!(rows[0]["experiment"], "engine.phold");
    assert_eq!(metric(&rows[0], "events"), 1000.0);
}

#[test]
fn a_bad_window_is_an_error() {
    let (code, out, err) = nudma(&["bench", "net", "--duration", "5 parsecs"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("parsecs"), "{err}");
}
