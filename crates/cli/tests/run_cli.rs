//! `nudma run` end to end: the JSON contract of docs/cli.md on the README's example, the same
//! output on one worker or all, `--out` files, and bad input with a located message and
//! exit status 2.

use std::path::Path;

mod common;
use common::nudma;
use serde_json::Value;

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/two_socket_server.toml")
        .display()
        .to_string()
}

#[test]
fn run_prints_the_result_contract_and_a_sweep_is_the_same_on_any_number_of_workers() {
    let ex = example();
    let args = |jobs: &'static str| {
        let mut a = vec![
            "run",
            ex.as_str(),
            "--format",
            "json",
            "--set",
            "workload.antagonist.misses_in_flight=10,40",
            "--jobs",
        ];
        a.push(jobs);
        a
    };
    let (code, one, err) = nudma(&args("1"));
    assert_eq!(code, 0, "{err}");
    let (_, two, _) = nudma(&args("2"));
    assert_eq!(one, two, "identical output");
    let v: Value = serde_json::from_str(&one).unwrap();
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 4, "one row per point and workload");
    for r in rows {
        assert_eq!(r["experiment"], "run");
        assert_eq!(r["config"], "two_socket_server");
        assert!(r["params"]["workload"].is_string());
        assert!(r["params"]["workload.antagonist.misses_in_flight"].is_number());
        assert!(
            r["metrics"]["throughput_gbyte_s"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        assert!(r["metrics"]["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["metrics"]["latency_ns_p99"].as_f64().unwrap()
                >= r["metrics"]["latency_ns_p50"].as_f64().unwrap()
        );
        assert!(
            r.get("published").is_none(),
            "nothing published for a user's run"
        );
    }
}

#[test]
fn run_out_writes_results_and_window_counters() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let (code, out, err) = nudma(&["run", &example(), "--out", &d]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nic0_rx") && out.contains("GB/s"), "{out}");
    let c: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("counters.json")).unwrap())
            .unwrap();
    let links = c["points"][0]["counters"]["links"].as_array().unwrap();
    assert!(
        links.iter().any(|l| l["name"] == "link srv.sw →"),
        "{links:?}"
    );
    assert!(dir.path().join("results.json").exists());
}

#[test]
fn run_out_plots_a_sweep_against_its_swept_key_and_an_experiment_file_with_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let key = "workload.antagonist.misses_in_flight";
    let sweep = format!("{key}=10,40");
    let (code, _, err) = nudma(&["run", &example(), "--set", &sweep, "--out", &d]);
    assert_eq!(code, 0, "{err}");
    let svg = std::fs::read_to_string(dir.path().join("run.svg")).unwrap();
    // The x axis is the swept key, and each workload is a line of its own.
    assert!(svg.contains(key), "{svg}");
    assert!(
        svg.contains("nic0_rx") && svg.contains("antagonist"),
        "{svg}"
    );
    // One point has nothing to plot against.
    let one = tempfile::tempdir().unwrap();
    let o = one.path().display().to_string();
    let (code, _, err) = nudma(&[
        "run",
        &example(),
        "--set",
        &format!("{key}=10"),
        "--out",
        &o,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!one.path().join("run.svg").exists());

    let exp = tempfile::tempdir().unwrap();
    let e = exp.path().display().to_string();
    let (code, _, err) = nudma(&["run", "ioctopus.tcp_rx_1core", "--out", &e]);
    assert_eq!(code, 0, "{err}");
    for f in ["ioctopus.tcp_rx_1core.svg", "report.md", "results.json"] {
        assert!(exp.path().join(f).exists(), "{f}: {err}");
    }
}

#[test]
fn bad_input_gets_a_message_and_exit_status_2() {
    let ex = example();
    let (code, _, err) = nudma(&["run", &ex, "--set", "workload.nope.outstanding=1"]);
    assert_eq!(code, 2);
    assert!(err.contains("no `workload` entry named `nope`"), "{err}");
    let (code, _, err) = nudma(&["run", &ex, "--set", "measure.duration=3 fortnights"]);
    assert_eq!(code, 2);
    assert!(err.contains("measure.duration"), "{err}");
    let (code, _, err) = nudma(&["run", "ioctopus_r730"]);
    assert_eq!(code, 2);
    assert!(err.contains("no [[workload]]"), "{err}");
    // A size a `--set` gives is read as the file's sizes are, located at the value it
    // replaced and named.
    let (code, _, err) = nudma(&["run", &ex, "--set", "workload.nic0_rx.transfer_bytes=4 KB"]);
    assert_eq!(code, 2);
    assert!(
        err.ends_with(
            "two_socket_server.toml (with --set):52:18: `4 KB` is ambiguous: write `4 KiB` \
             (4 × 2^10 bytes) or `4000` (4 × 10^3 bytes) (key `workload.nic0_rx.transfer_bytes`)\n"
        ),
        "{err}"
    );
    let (code, _, err) = nudma(&["run", &ex, "--set", "workload.nic0_rx.outstanding=lots"]);
    assert_eq!(code, 2);
    assert!(
        err.ends_with(
            "(with --set):53:15: invalid type: string \"lots\", expected u32 (key `workload.nic0_rx.outstanding`)\n"
        ),
        "{err}"
    );
    // Workers: at least one, at most 1024 (and never more than points).
    for jobs in ["0", "100000", "two"] {
        let (code, _, err) = nudma(&["run", &ex, "--jobs", jobs]);
        assert_eq!(code, 2, "--jobs {jobs}");
        assert!(err.contains("worker threads in 1..=1024"), "{err}");
    }
    // A clock that would make every cycle cost absurd, through --set too.
    let (code, _, err) = nudma(&["run", &ex, "--set", "platform.r730.clock_ghz=1e-300"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("clock_ghz must be 0.1..=10 GHz, not 1e-300 (key `platform.r730.clock_ghz`)"),
        "{err}"
    );
    // Something that is not a regular file is refused, not read forever.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("inc.toml");
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(&file, "include = [\"sub\"]\n[scenario]\nname = \"x\"\n").unwrap();
    let (code, _, err) = nudma(&["topo", "check", file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read include") && err.contains("not a regular file"),
        "{err}"
    );
    let (code, _, err) = nudma(&["topo", "check", sub.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a regular file"), "{err}");
}

/// A built-in experiment file runs under `run` as under `reproduce`; a copy with other
/// hardware runs too, and is not compared with what was published for the original.
#[test]
fn experiment_files_run_as_reproduce_runs_them_and_copies_take_other_hardware() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/experiments/smartio.ram_latency.toml")
        .display()
        .to_string();
    let (code, out, err) = nudma(&["run", &file, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let (_, rep, _) = nudma(&["reproduce", "smartio.ram_latency", "--format", "json"]);
    assert_eq!(out, rep, "one experiment, one answer");
    let v: Value = serde_json::from_str(&out).unwrap();
    let b2b = &v["results"][0];
    assert_eq!(b2b["published"]["oneway_ns"]["basis"], "calibration");
    // A platform key lives in an include: --set reaches it there. A store that leaves the
    // core 100 ns later arrives 100 ns later on every testbed.
    let (code, slow, err) = nudma(&[
        "run",
        &file,
        "--format",
        "json",
        "--set",
        "platform.smartio_host.timing.cpu_mmio_write_ns=178",
    ]);
    assert_eq!(code, 0, "{err}");
    let slow: Value = serde_json::from_str(&slow).unwrap();
    for (a, b) in v["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(slow["results"].as_array().unwrap())
    {
        let d = b["metrics"]["oneway_ns"].as_f64().unwrap()
            - a["metrics"]["oneway_ns"].as_f64().unwrap();
        assert!((d - 100.0).abs() < 1e-6, "{} +{d}", a["config"]);
        // The NTB crossing is the route's share between the adapters: the core's cost
        // is not in it.
        assert_eq!(
            a["metrics"]["ntb_added_ns"], b["metrics"]["ntb_added_ns"],
            "{}",
            a["config"]
        );
    }
    let (code, _, err) = nudma(&[
        "run",
        &file,
        "--set",
        "platform.smartio_host.timing.cpu_mmio_wrte_ns=1",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("platforms/smartio.toml") && err.contains("cpu_mmio_wrte_ns"),
        "{err}"
    );
    // The user's copy of the NTB DMA experiment, with a larger MPS on both hosts.
    let file = file.replace("smartio.ram_latency", "smartio.ntb_dma");
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let copy = dir.path().join("mine.toml");
    std::fs::write(&copy, text).unwrap();
    let copy = copy.display().to_string();
    let mps = |m: &str| {
        let (code, out, err) = nudma(&[
            "run",
            &copy,
            "--format",
            "json",
            "--set",
            &format!("host.borrower.mps_bytes={m}"),
            "--set",
            &format!("host.lender.mps_bytes={m}"),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("not compared"), "{err}");
        serde_json::from_str::<Value>(&out).unwrap()
    };
    let (small, large) = (mps("128"), mps("256"));
    let last = |v: &Value| v["results"].as_array().unwrap().last().unwrap().clone();
    assert!(last(&small).get("published").is_none());
    assert_eq!(last(&large)["params"]["host.borrower.mps_bytes"], 256);
    let w = |v: &Value| last(v)["metrics"]["write_gbps"].as_f64().unwrap();
    assert!(
        w(&large) > 1.1 * w(&small),
        "larger posted writes, less overhead"
    );
}

/// A real machine exported by `inspect` takes workloads and runs: a GPU reading the other
/// node's memory beside cores that stream it.
#[test]
fn an_exported_real_machine_runs_workloads() {
    let xml = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hwloc/xml/32em64t-2n8c2t-pci-normalio.xml")
        .display()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conan.toml");
    let f = file.display().to_string();
    let (code, _, err) = nudma(&["inspect", "--hwloc", &xml, "--export", &f]);
    assert_eq!(code, 0, "{err}");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(
        r#"
[[workload]]
name = "gpu_read"
kind = "dma"
device = "conan.dev_0000_03_00_0"
target = "conan.ram.node1"
op = "read"
transfer_bytes = "64 KiB"
outstanding = 4

[[workload]]
name = "cores"
kind = "cpu_stream"
host = "conan"
cpu_node = 0
mem_node = 1
op = "read"
misses_in_flight = 40

[measure]
warmup = "10 us"
duration = "100 us"
"#,
    );
    std::fs::write(&file, text).unwrap();
    let (code, out, err) = nudma(&["run", &f, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .all(|r| r["metrics"]["throughput_gbyte_s"].as_f64().unwrap() > 1.0),
        "{rows:?}"
    );
}

/// `topo path` and `run` give one answer for one stream: the flow model's rate for a
/// stream of `--len` accesses with `--outstanding` under way, and the packet model's rate
/// for a `dma` workload of the same transfers, agree within 2 %.
#[test]
fn topo_path_and_run_agree_on_a_single_stream() {
    let text = std::fs::read_to_string(example()).unwrap();
    let hosts = &text[..text.find("[[workload]]").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    for (device, op, len, outstanding) in [
        ("srv.nvme", "read", 4096, 4),
        ("srv.nic0", "write", 256, 8),
        ("srv.nic1", "read", 512, 64),
    ] {
        let file = dir.path().join(format!("{op}_{len}.toml"));
        std::fs::write(
            &file,
            format!(
                "{hosts}[[workload]]\nname = \"one\"\nkind = \"dma\"\ndevice = \"{device}\"\n\
                 target = \"srv.ram.node0\"\nop = \"{op}\"\ntransfer_bytes = {len}\n\
                 outstanding = {outstanding}\n\n[measure]\nwarmup = \"20 us\"\nduration = \"200 us\"\n"
            ),
        )
        .unwrap();
        let file = file.display().to_string();
        let (code, out, err) = nudma(&["run", &file, "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let run: Value = serde_json::from_str(&out).unwrap();
        let simulated = run["results"][0]["metrics"]["throughput_gbyte_s"]
            .as_f64()
            .unwrap();
        let (code, out, err) = nudma(&[
            "topo",
            "path",
            &file,
            "--from",
            device,
            "--to",
            "srv.ram.node0",
            "--len",
            &len.to_string(),
            "--access",
            op,
            "--outstanding",
            &outstanding.to_string(),
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let path: Value = serde_json::from_str(&out).unwrap();
        let flow = path["stream"]["gbyte_s"].as_f64().unwrap();
        assert!(
            ((simulated - flow) / flow).abs() < 0.02,
            "{device} {op} {len} B × {outstanding}: run {simulated} GB/s, topo path {flow} GB/s ({})",
            path["stream"]["bottleneck"]
        );
    }
}

fn borrowed_example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/borrowed_gpu.toml")
        .display()
        .to_string()
}

#[test]
fn a_workload_uses_a_borrowed_device_by_its_borrow_name() {
    let ex = borrowed_example();
    let (code, out, err) = nudma(&["run", &ex, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        let gbps = r["metrics"]["throughput_gbyte_s"].as_f64().unwrap();
        assert!(gbps > 0.5 && gbps < 16.0, "{r}");
        assert_eq!(r["metrics"]["faults"].as_u64(), Some(0), "{r}");
    }
    // The borrow's DMA window and the host layer's DMA API reach the same borrower RAM
    // through the same IOMMU and adapters: the same rate.
    let (code, direct, err) = nudma(&[
        "run",
        &ex,
        "--format",
        "json",
        "--set",
        "workload.to_borrower.device=lender.gpu",
    ]);
    assert_eq!(code, 0, "{err}");
    let d: Value = serde_json::from_str(&direct).unwrap();
    assert_eq!(
        d["results"][0]["metrics"]["throughput_gbyte_s"],
        v["results"][0]["metrics"]["throughput_gbyte_s"],
        "{direct}"
    );
    // A name that is neither a borrow nor a device is refused where it was written.
    let (code, _, err) = nudma(&["run", &ex, "--set", "workload.to_borrower.device=gpu9"]);
    assert_eq!(code, 2);
    assert!(err.contains("gpu9"), "{err}");
}

#[test]
fn the_run_table_prints_every_number_by_one_rule() {
    // 4 significant digits, whole numbers from 1000 up, no exponent and no padding zeros:
    // the same as `reproduce` prints.
    let ex = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/two_socket_server.toml"
    );
    let (code, out, err) = common::nudma(&["run", ex]);
    assert_eq!(code, 0, "{err}");
    let nic = out.lines().find(|l| l.starts_with("nic0_rx")).unwrap();
    let cells: Vec<&str> = nic.split_whitespace().collect();
    assert_eq!(
        cells,
        ["nic0_rx", "7.286", "1775000", "17957", "17957", "link", "srv.sw", "→", "1"],
        "{out}"
    );
    assert!(
        !out.contains("e+") && !out.contains("e6") && !out.contains(".00 "),
        "{out}"
    );
}

#[test]
fn swept_columns_come_in_the_order_of_the_sets() {
    // Alphabetical order would put `measure.…` first.
    let ex = example();
    let (code, out, err) = nudma(&[
        "run",
        ex.as_str(),
        "--set",
        "workload.nic0_rx.outstanding=8",
        "--set",
        "measure.duration=100 us",
    ]);
    assert_eq!(code, 0, "{err}");
    let h = out.lines().nth(1).unwrap();
    let (o, d) = (
        h.find("workload.nic0_rx.outstanding").unwrap(),
        h.find("measure.duration").unwrap(),
    );
    assert!(o < d, "{h}");
}

/// The text output gives every metric a column of its own: one table per set of metrics
/// (a kind of workload's), each value under its name, none packed into a string.
#[test]
fn every_metric_has_a_column_in_a_table_per_kind_of_workload() {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/single_transfers.toml");
    let (code, out, err) = nudma(&["run", ex.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let tables: Vec<Vec<&str>> = out
        .split("\n\n")
        .map(|t| t.lines().filter(|l| !l.starts_with("scenario ")).collect())
        .collect();
    assert_eq!(tables.len(), 2, "{out}");
    let (copies, store) = (&tables[0], &tables[1]);
    let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        cols(copies[0]),
        ["workload", "GB/s", "hops", "ns", "pingpong_ns", "roots"]
    );
    assert_eq!(cols(store[0]), ["workload", "ns", "ntb_span_ns"]);
    // Every row has a value in every column, and no `key=value` is left.
    for t in &tables {
        for l in &t[1..] {
            assert_eq!(cols(l).len(), cols(t[0]).len(), "{l}");
            assert!(!l.contains('=') && !l.contains('—'), "{l}");
        }
    }
    assert!(
        copies[1].starts_with("p2p ") && store[1].starts_with("store "),
        "{out}"
    );
}

/// `topo check` checks a scenario's workloads and measurement window as `run` reads them,
/// and `run` says what every point shares once, before any point runs.
#[test]
fn topo_check_checks_the_workloads_and_the_window() {
    let ex = example();
    let (code, out, err) = nudma(&["topo", "check", &ex]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.trim_end()
            .ends_with("; 4 workload(s) over 200 us after 20 us of warm-up"),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&ex).unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        text.replace("outstanding = 32", "outstanding = 32\nburst = 4"),
    )
    .unwrap();
    let (code, _, err) = nudma(&["topo", "check", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:") && err.contains("burst"), "{err}");
    let unmeasured = dir.path().join("unmeasured.toml");
    let cut = text.find("[measure]").unwrap();
    std::fs::write(&unmeasured, &text[..cut]).unwrap();
    let (code, _, err) = nudma(&["topo", "check", unmeasured.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("no [measure] table"), "{err}");
    let sweep = [
        "run",
        unmeasured.to_str().unwrap(),
        "--set",
        "workload.nic0_rx.outstanding=1,2",
    ];
    let (code, _, err) = nudma(&sweep);
    assert_eq!(code, 2);
    assert_eq!(err.matches("no [measure] table").count(), 1, "{err}");
    assert!(!err.contains("points"), "said before any point runs: {err}");
}
