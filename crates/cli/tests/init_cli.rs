//! `nudma init` end to end: what it writes checks on every built-in platform, the keys it
//! shows as comments are valid as they stand, each kind of device runs with a workload,
//! an hwloc export takes devices and workloads, and bad input is refused with exit 2
//! naming what was wrong.

use std::path::{Path, PathBuf};

mod common;
use common::nudma;
use serde_json::Value;

fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
        .display()
        .to_string()
}

/// `nudma init ARGS --out DIR/NAME.toml`, which must succeed: the file's path and text.
fn init(dir: &Path, name: &str, args: &[&str]) -> (String, String) {
    let path = dir.join(format!("{name}.toml")).display().to_string();
    let mut a = vec!["init"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--out", &path]);
    let (code, out, err) = nudma(&a);
    assert_eq!(code, 0, "nudma {a:?}: {err}");
    assert!(out.is_empty(), "--out writes nothing to stdout: {out}");
    assert!(err.contains(&format!("nudma topo check {path}")), "{err}");
    assert!(err.contains(&format!("nudma run {path}")), "{err}");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

fn check(path: &str) -> String {
    let (code, out, err) = nudma(&["topo", "check", path]);
    assert_eq!(code, 0, "{path} does not check: {err}");
    out
}

/// `nudma run FILE` over a short window: `workload → metrics`.
fn run(path: &str, warmup: &str, duration: &str) -> Vec<(String, Value)> {
    let w = format!("measure.warmup={warmup}");
    let d = format!("measure.duration={duration}");
    let (code, out, err) = nudma(&["run", path, "--set", &w, "--set", &d, "--format", "json"]);
    assert_eq!(code, 0, "{path} does not run: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["params"]["workload"].as_str().unwrap().to_string(),
                r["metrics"].clone(),
            )
        })
        .collect()
}

fn throughput(m: &Value) -> f64 {
    ["throughput_gbyte_s", "throughput_gbit_s"]
        .iter()
        .find_map(|k| m[k].as_f64())
        .unwrap_or_else(|| panic!("no throughput in {m}"))
}

fn names(json_list: &Value) -> Vec<String> {
    json_list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

fn builtin(kind: &str) -> Vec<String> {
    let (code, out, err) = nudma(&["list", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    names(&v[kind])
}

/// The generated file with every commented-out key uncommented (`# key = value` and
/// `# [table]` lines; prose comments stay).
fn uncommented(text: &str) -> String {
    text.lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(code)
                if code.starts_with('[')
                    || code.split_once(" = ").is_some_and(|(k, _)| {
                        k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    }) =>
            {
                code.to_string()
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_builtin_platform_gives_a_scenario_that_checks_with_its_keys_uncommented() {
    let tmp = tempfile::tempdir().unwrap();
    let platforms = builtin("platforms");
    assert!(platforms.len() >= 10, "{platforms:?}");
    for p in &platforms {
        let (path, text) = init(
            tmp.path(),
            p,
            &[
                "--platform",
                p,
                "--nic",
                "connectx7",
                "--nvme",
                "pm1743",
                "--gpu",
                "h100_pcie",
                "--workload",
                "dma",
                "--workload",
                "cpu_stream",
            ],
        );
        assert!(text.contains(&format!("base = \"{p}\"")), "{text}");
        let out = check(&path);
        assert!(
            out.contains("3 device(s)") && out.contains("4 workload(s)"),
            "{p}: {out}"
        );

        // The commented keys hold the base's values in valid TOML: uncommented, the copy
        // gives them itself and still checks.
        let edited = tmp.path().join(format!("{p}_edited.toml"));
        let full = uncommented(&text);
        assert_ne!(full, text, "{p}: nothing to uncomment");
        std::fs::write(&edited, &full).unwrap();
        let edited = edited.display().to_string();
        check(&edited);
        let (code, show, err) = nudma(&["topo", "show", &edited]);
        assert_eq!(code, 0, "{err}");
        assert!(
            show.contains(&format!("{p} with cpu, cores_per_package")),
            "{p}: {show}"
        );
    }
}

#[test]
fn a_plain_init_copies_a_current_two_socket_server_and_runs() {
    let (code, out, err) = nudma(&["init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("base = \"spr_8480\""), "{out}");
    assert!(err.contains("nudma topo check FILE"), "{err}");
    // No device: a memory stream across UPI is what there is to run.
    let tmp = tempfile::tempdir().unwrap();
    let (path, _) = init(tmp.path(), "plain", &[]);
    let rows = run(&path, "2 us", "20 us");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, "stream");
    assert!(throughput(&rows[0].1) > 0.0);
}

#[test]
fn each_kind_of_device_runs_its_workloads() {
    let tmp = tempfile::tempdir().unwrap();
    // connectx4's model gives no link: init states one for it.
    let (path, text) = init(
        tmp.path(),
        "all",
        &[
            "--nic",
            "connectx4",
            "--nvme",
            "pm1743",
            "--gpu",
            "h100_pcie",
            "--workload",
            "dma",
            "--workload",
            "fio",
            "--workload",
            "netperf",
            "--workload",
            "cpu_stream",
        ],
    );
    assert!(text.contains("link = { gen = 3, width = 16 }"), "{text}");
    let rows = run(&path, "20 us", "100 us");
    let got: Vec<&str> = rows.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        got,
        [
            "nic_rx",
            "nvme_read",
            "gpu_h2d",
            "fio",
            "netperf_rx",
            "stream"
        ]
    );
    for (w, m) in &rows {
        assert!(throughput(m) > 0.0, "{w}: {m}");
    }
    // Each device's DMA is bound by what the device can move: connectx4's 100 GbE port,
    // the PM1743's 13 GB/s media reads, the H100's Gen5 x16 link.
    let of = |w: &str| throughput(&rows.iter().find(|(n, _)| n == w).unwrap().1);
    assert!(of("nic_rx") <= 12.5 + 1e-9, "{}", of("nic_rx"));
    assert!(of("nvme_read") <= 13.0 + 1e-9, "{}", of("nvme_read"));
    assert!(of("gpu_h2d") <= 64.0, "{}", of("gpu_h2d"));
}

#[test]
fn an_hwloc_export_takes_devices_and_workloads() {
    let xml = repo("fixtures/hwloc/xml/32em64t-2n8c2t-pci-normalio.xml");
    let tmp = tempfile::tempdir().unwrap();
    let (path, text) = init(
        tmp.path(),
        "hwloc",
        &[
            "--hwloc",
            &xml,
            "--nvme",
            "pm9a3",
            "--workload",
            "fio",
            "--workload",
            "cpu_stream",
        ],
    );
    // The machine as `inspect --export` writes it, then what init adds.
    assert!(text.contains("[platform.imported]"), "{text}");
    assert!(text.contains("name = \"eth0\""), "{text}");
    assert!(
        text.contains("[device_model.my_nvme]\nbase = \"pm9a3\""),
        "{text}"
    );
    let out = check(&path);
    assert!(out.contains("2 workload(s)"), "{out}");
    let rows = run(&path, "20 us", "100 us");
    assert_eq!(rows.len(), 2);
    for (w, m) in &rows {
        assert!(throughput(m) > 0.0, "{w}: {m}");
    }
    // A `nudma calibrate` file fills the memory matrices, as with `inspect --export`.
    let cal = tmp.path().join("mem.toml");
    std::fs::write(
        &cal,
        "# measured\n# node order: 0, 1\n[platform.imported.memory]\nlatency_ns = [[80.5, 130.0], [131.0, 81.0]]\nbandwidth_gbps = [[20.0, 10.0], [10.0, 20.0]]\n",
    )
    .unwrap();
    let cal = cal.display().to_string();
    let (path, text) = init(
        tmp.path(),
        "calibrated",
        &[
            "--hwloc",
            &xml,
            "--calibration",
            &cal,
            "--workload",
            "cpu_stream",
        ],
    );
    assert!(text.contains("[[80.5, 130.0], [131.0, 81.0]]"), "{text}");
    check(&path);
    refused(&["--calibration", &cal], &["--calibration", "--hwloc"]);

    // The exported platform has no network-stack table: netperf is refused, naming it.
    let (code, _, err) = nudma(&[
        "init",
        "--hwloc",
        &xml,
        "--nic",
        "connectx7",
        "--workload",
        "netperf",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("platform `imported` has no network-stack table"),
        "{err}"
    );
}

/// Exit 2, a message on stderr holding every one of `names`.
fn refused(args: &[&str], names: &[&str]) {
    let mut a = vec!["init"];
    a.extend_from_slice(args);
    let (code, out, err) = nudma(&a);
    assert_eq!(code, 2, "nudma {a:?}: {out}{err}");
    assert!(out.is_empty(), "nothing on stdout: {out}");
    assert!(!err.contains("panicked"), "{err}");
    for n in names {
        assert!(err.contains(n), "nudma {a:?}: `{n}` not in {err}");
    }
}

#[test]
fn bad_names_and_kinds_are_refused_naming_them() {
    // Unknown names, with the valid ones listed.
    refused(
        &["--platform", "spr_9999"],
        &["spr_9999", "spr_8480", "genoa_9654"],
    );
    refused(&["--nic", "cx9"], &["--nic cx9", "connectx7"]);
    // A model of another kind, with the models of the kind asked for.
    refused(
        &["--nvme", "connectx7"],
        &["--nvme connectx7", "kind nic, not nvme", "pm1743"],
    );
    refused(&["--gpu", "pm1743"], &["kind nvme, not gpu", "h100_pcie"]);
    // bluefield3 is a NIC through its base.
    refused(&["--gpu", "bluefield3"], &["kind nic, not gpu"]);
    // Workloads without what they need.
    refused(&["--workload", "fio"], &["--workload fio", "--nvme"]);
    refused(&["--workload", "dma"], &["--workload dma", "--nic"]);
    refused(
        &["--nic", "nfp6000", "--workload", "netperf"],
        &["nfp6000", "connectx7"],
    );
    refused(
        &[
            "--platform",
            "skylake_8160",
            "--nic",
            "connectx7",
            "--workload",
            "netperf",
        ],
        &["skylake_8160", "netstack", "spr_8480"],
    );
    refused(&["--workload", "pagerank"], &["pagerank"]);
    refused(
        &["--platform", "r730", "--hwloc", "x.xml"],
        &["--platform", "--hwloc"],
    );
    refused(&["--hwloc", "/nonexistent/m.xml"], &["/nonexistent/m.xml"]);
}

#[test]
fn an_existing_file_is_kept_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    let path: PathBuf = tmp.path().join("mine.toml");
    std::fs::write(&path, "# my own work\n").unwrap();
    let p = path.display().to_string();
    refused(&["--out", &p], &[&p, "--force"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# my own work\n");
    let (code, _, err) = nudma(&["init", "--out", &p, "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("[platform.my_server]"));
}

/// The command docs/guide.md gives for `examples/my_server.toml`.
const EXAMPLE: &[&str] = &[
    "init",
    "--platform",
    "genoa_9654",
    "--nic",
    "connectx7",
    "--nvme",
    "pm1743",
    "--workload",
    "dma",
    "--workload",
    "cpu_stream",
];

#[test]
fn the_guides_example_is_what_init_writes() {
    let (code, out, err) = nudma(EXAMPLE);
    assert_eq!(code, 0, "{err}");
    let file = std::fs::read_to_string(repo("examples/my_server.toml")).unwrap();
    assert!(
        out == file,
        "examples/my_server.toml is not what `nudma {}` prints: regenerate it with --out examples/my_server.toml --force",
        EXAMPLE.join(" ")
    );
}
