//! `nudma compare`: two points of one scenario or two scenario files side by side; the
//! keys that differ and each metric as `nudma run` gives it on each side.

mod common;
use common::nudma;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let (code, out, err) = nudma(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} prints JSON: {e}\n{out}"))
}

/// `metric` of `workload` in `nudma run`'s JSON for `args`.
fn run_metric(args: &[&str], workload: &str, metric: &str) -> f64 {
    let v = json(args);
    let row = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["params"]["workload"] == workload)
        .unwrap()
        .clone();
    row["metrics"][metric].as_f64().unwrap()
}

/// `metric` of `workload` in a comparison: A's, B's and the change.
fn compared(c: &Value, workload: &str, metric: &str) -> (f64, f64, Option<f64>) {
    let m = c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["workload"] == workload && m["metric"] == metric)
        .unwrap_or_else(|| panic!("{workload}.{metric} in {c}"));
    (
        m["a"].as_f64().unwrap(),
        m["b"].as_f64().unwrap(),
        m["change"].as_f64(),
    )
}

#[test]
fn two_values_of_keys_compare_the_runs_they_give() {
    let c = json(&[
        "compare",
        "contention/tcp_rx",
        "--set",
        "workload.rx.cpu_node=0,1",
        "--set",
        "workload.rx.mem_node=0,1",
        "--format",
        "json",
    ]);
    let keys: Vec<&str> = c["differing_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["workload.rx.cpu_node", "workload.rx.mem_node"]);
    // Each side is what `nudma run` gives at that point; the change is B over A.
    let (a, b, change) = compared(&c, "rx", "throughput_gbit_s");
    let at = |n: &str| {
        let sets = [
            format!("workload.rx.cpu_node={n}"),
            format!("workload.rx.mem_node={n}"),
        ];
        let args = [
            "run",
            "contention/tcp_rx",
            "--set",
            &sets[0],
            "--set",
            &sets[1],
            "--format",
            "json",
        ];
        run_metric(&args, "rx", "throughput_gbit_s")
    };
    assert_eq!((a, b), (at("0"), at("1")));
    assert!((change.unwrap() - (b / a - 1.0)).abs() < 1e-12);
    assert!(
        b < a,
        "remote from its NIC, beside the stream, the receive slows"
    );
}

#[test]
fn two_files_list_the_keys_they_set_differently() {
    let dir = std::env::temp_dir().join(format!("nudma-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/contention/");
    let text = std::fs::read_to_string(format!("{root}tcp_rx.toml"))
        .unwrap()
        .replace("../platforms/", &format!("{root}../platforms/"));
    let a = dir.join("a.toml");
    let b = dir.join("b.toml");
    std::fs::write(&a, &text).unwrap();
    let local = text
        .replace(
            "cpu_node = 1                     #",
            "cpu_node = 0                     #",
        )
        .replace(
            "mem_node = 1                     # its buffers",
            "mem_node = 0",
        );
    std::fs::write(&b, local).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let c = json(&["compare", a, b, "--format", "json"]);
    assert_eq!(
        c["differing_keys"],
        serde_json::json!([
            {"key": "workload.rx.cpu_node", "a": "1", "b": "0"},
            {"key": "workload.rx.mem_node", "a": "1", "b": "0"},
        ])
    );
    let (remote, local, _) = compared(&c, "rx", "throughput_gbit_s");
    assert!(local > remote, "{remote} remote, {local} local");
    // The same file twice: no key differs, no metric changes.
    let same = json(&["compare", a, a, "--format", "json"]);
    assert_eq!(same["differing_keys"], serde_json::json!([]));
    assert!(same["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["a"] == m["b"]));
}

#[test]
fn what_cannot_be_compared_is_refused_saying_why() {
    let refused = |args: &[&str], says: &str| {
        let (code, _, err) = nudma(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    refused(&["compare", "contention/tcp_rx"], "nothing to compare");
    refused(
        &[
            "compare",
            "contention/tcp_rx",
            "--set",
            "workload.rx.cpu_node=0,1,0",
        ],
        "give A's value and B's",
    );
    refused(
        &[
            "compare",
            "contention/tcp_rx",
            "contention/tcp_rx",
            "--set",
            "workload.rx.cpu_node=0,1",
        ],
        "each `--set` takes one value",
    );
    refused(
        &["compare", "ioctopus.tcp_rr", "contention/tcp_rx"],
        "is an experiment file",
    );
    refused(
        &[
            "compare",
            "contention/tcp_rx",
            "--set",
            "workload.rx.cpu_nod=0,1",
        ],
        "cpu_nod",
    );
}
