//! Experiment files: every built-in one loads and names its published values with a basis;
//! a malformed one is refused with the file and the reason.

use fabric::scenario::Source;
use studies::experiment::{builtin, Experiment};
use studies::result::Basis;

#[test]
fn the_built_in_files_are_the_implemented_catalog() {
    let ids: Vec<&str> = builtin().iter().map(|e| e.info.id).collect();
    assert_eq!(
        ids,
        [
            "ioctopus.coalescing",
            "ioctopus.colocation",
            "ioctopus.ioctosg",
            "ioctopus.memcached",
            "ioctopus.migration",
            "ioctopus.nvme_upi",
            "ioctopus.pktgen_1core",
            "ioctopus.qpi_congestion",
            "ioctopus.tcp_multicore",
            "ioctopus.tcp_rr",
            "ioctopus.tcp_rx_1core",
            "ioctopus.tcp_tx_1core",
            "pciebench.bw_dma_sz_sweep",
            "pciebench.bw_dma_win_sweep",
            "pciebench.lat_dma_sizes",
            "rdma.independent_load",
            "rdma.latency",
            "rdma.memcached",
            "rdma.mr_workers",
            "rdma.size_sweep",
            "smartio.failover",
            "smartio.gpu_dma",
            "smartio.limits",
            "smartio.mdev",
            "smartio.multicast",
            "smartio.ntb_dma",
            "smartio.nvme_latency",
            "smartio.nvme_sharing",
            "smartio.p2p",
            "smartio.ram_latency",
            "smartio.sq_placement",
            "tyche.fio_6nic",
            "tyche.nics_node0",
            "tyche.spill",
            "tyche.zmio_6nic"
        ]
    );
    let refs: Vec<_> = builtin().iter().flat_map(|e| e.references.iter()).collect();
    let (pciebench, papers): (Vec<_>, Vec<_>) = refs
        .iter()
        .partition(|r| r.experiment.starts_with("pciebench."));
    let calibrated = |refs: &[&&studies::result::Reference]| {
        refs.iter()
            .filter(|r| matches!(r.basis, Basis::Calibration(p) if !p.is_empty()))
            .count()
    };
    // The four studies' papers.
    assert_eq!(papers.len(), 99);
    assert_eq!(
        calibrated(&papers),
        11,
        "eleven points were fitted on, eighty-eight are predicted"
    );
    // pcie-bench's calibration host: its two tables, 120 values each.
    assert_eq!(pciebench.len(), 240);
    assert_eq!(calibrated(&pciebench), 8, "eight points were fitted on");
}

fn parse(text: &str) -> String {
    let src = Source {
        name: "mine.toml".into(),
        text: text.into(),
    };
    Experiment::parse(&src).unwrap_err().to_string()
}

const BASE: &str = r#"
[experiment]
id = "x.y"
description = "d"
window = "w"
plot = ["m"]
[[config]]
name = "c"
scenario = "smartio_pxh810_b2b"
[[metric]]
name = "m"
workload = "w"
field = "throughput_gbyte_s"
[[workload]]
name = "w"
kind = "cpu_stream"
host = "lender"
cpu_node = 0
mem_node = 0
op = "read"
misses_in_flight = 4
[measure]
warmup = "1 us"
duration = "2 us"
"#;

/// The line a section appended to `BASE` starts on.
fn after_base() -> usize {
    BASE.lines().count() + 1
}

#[test]
fn malformed_experiment_files_are_refused_with_the_reason() {
    let e = parse(&BASE.replace("workload = \"w\"", "workload = \"teleport\""));
    assert!(
        e.contains("mine.toml") && e.contains("no [[workload]] named `teleport`"),
        "{e}"
    );
    let e = parse(&format!(
        "{BASE}[[published]]\nmetric = \"m\"\nvalue = 1.0\nbasis = \"calibration\"\nsource = \"s\"\n"
    ));
    assert!(e.contains("names the `parameters` fitted on it"), "{e}");
    let e = parse(&format!(
        "{BASE}[[published]]\nmetric = \"q\"\nvalue = 1.0\nbasis = \"prediction\"\nsource = \"s\"\n"
    ));
    assert!(e.contains("unknown metric `q`"), "{e}");
    let e = parse(&BASE.replace("window = \"w\"\n", "window = \"w\"\nwindows = 2\n"));
    assert!(
        e.starts_with("mine.toml:6:1: unknown field `windows`")
            && e.ends_with("(key `experiment.windows`)"),
        "{e}"
    );
    // Parser errors name line, column and key path; sizes are read as scenario files read
    // them.
    assert_eq!(
        parse(&format!(
            "{BASE}[sweep]\nbytes = {{ from = \"4 KB\", to = \"64 MiB\" }}\n"
        )),
        format!(
            "mine.toml:{}:18: `4 KB` is ambiguous: write `4 KiB` (4 × 2^10 bytes) or `4000` \
         (4 × 10^3 bytes) (key `sweep.bytes.from`)",
            after_base() + 1
        )
    );
    assert_eq!(
        parse(&format!("{BASE}[sweep]\nbytes = [4096, \"1 GB\"]\n")),
        format!(
            "mine.toml:{}:16: `1 GB` is ambiguous: write `1 GiB` (2^30 bytes) or `1000000000` \
         (10^9 bytes) (key `sweep.bytes[1]`)",
            after_base() + 1
        )
    );
    assert_eq!(
        parse(&format!(
            "{BASE}[sweep]\nbytes = {{ from = 4096, upto = 8192 }}\n"
        )),
        format!("mine.toml:{}:24: unknown field `upto`, expected `from` or `to` (key `sweep.bytes.upto`)", after_base() + 1)
    );
    assert_eq!(
        parse(&BASE.replace("name = \"m\"\n", "")),
        "mine.toml:10:1: missing field `name` (key `metric[0].name`)"
    );
    // What the hardware refuses is named when it runs, with the experiment, config and
    // metric.
    let src = Source {
        name: "mine.toml".into(),
        text: BASE.replace("cpu_node = 0", "cpu_node = 9"),
    };
    let e = Experiment::parse(&src)
        .unwrap()
        .run(&[])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("x.y, config `c`: metric `m`: "), "{e}");
    assert!(e.contains("a CPU stream asked for cores on node 9"), "{e}");
}

#[test]
fn every_built_in_experiment_says_what_mechanism_its_predictions_rest_on() {
    for e in builtin() {
        assert!(
            e.info.mechanism.len() > 40,
            "{} has no mechanism sentence",
            e.info.id
        );
    }
}

/// A catalog metric keeps the catalog's name, which says nothing sure of its unit
/// (docs/cli.md: `*_gbps` is Gb/s in `ioctopus.*`, GB/s elsewhere); the unit it states
/// is the one its workload field names. Two `ioctopus.*` metrics of this repository's own
/// are GB/s against that convention: the antagonists' `stream_gbps` and fio's `fio_gbps`.
#[test]
fn every_catalog_bandwidth_states_the_unit_of_its_field() {
    const GBYTE_IN_IOCTOPUS: [(&str, &str); 2] = [
        ("ioctopus.qpi_congestion", "stream_gbps"),
        ("ioctopus.nvme_upi", "fio_gbps"),
    ];
    let mut seen = 0;
    for e in builtin() {
        let id = e.info.id;
        let file = fabric::builtin::experiment_files()
            .find(|s| s.name.ends_with(&format!("/{id}.toml")))
            .unwrap_or_else(|| panic!("{id}: no file"));
        let doc: toml::Table = toml::from_str(&file.text).unwrap();
        for m in doc["metric"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            let field = m.get("field").and_then(toml::Value::as_str).unwrap_or("");
            if !name.ends_with("gbps") && !field.ends_with("_s") {
                continue;
            }
            let want = if field.ends_with("_gbit_s") {
                Some("Gb/s")
            } else if field.ends_with("_gbyte_s") {
                Some("GB/s")
            } else {
                studies::format::unit_of(field)
            };
            let want = if m.get("baseline").is_some() {
                None
            } else {
                want
            };
            assert_eq!(e.info.unit(name), want, "{id} {name} (field {field})");
            if name.ends_with("gbps") && want.is_some() {
                seen += 1;
                let network =
                    id.starts_with("ioctopus.") && !GBYTE_IN_IOCTOPUS.contains(&(id, name));
                let convention = if network { "Gb/s" } else { "GB/s" };
                assert_eq!(want, Some(convention), "{id} {name} (field {field})");
            }
        }
    }
    assert!(seen > 30, "{seen} bandwidth metrics");
}
