//! `nudma run`'s network workloads on a user's own two-socket server (the README's
//! `examples/own_server_network.toml`: an `inspect --export` of an hwloc fixture with a
//! dual-PF NIC added by hand): netperf and pktgen with a standard NIC on either PF and
//! with the octoNIC, their catalog metric names, and located errors for hardware a
//! workload names wrongly.

use std::path::Path;

mod common;
use common::nudma;
use serde_json::Value;

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/own_server_network.toml")
        .display()
        .to_string()
}

/// The rows of a run: (workload, params, metrics).
fn rows(args: &[&str]) -> Vec<Value> {
    let ex = example();
    let mut a = vec!["run", ex.as_str(), "--format", "json", "--jobs", "2"];
    a.extend_from_slice(args);
    let (code, out, err) = nudma(&a);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["results"].as_array().unwrap().clone()
}

/// The metric `m` of workload `w` in the row whose params have `key` = `value`s.
fn metric(rows: &[Value], w: &str, set: &[(&str, Value)], m: &str) -> f64 {
    rows.iter()
        .find(|r| r["params"]["workload"] == w && set.iter().all(|(k, v)| r["params"][*k] == *v))
        .unwrap_or_else(|| panic!("no row {w} {set:?}"))["metrics"][m]
        .as_f64()
        .unwrap_or_else(|| panic!("{w}: no metric {m}"))
}

#[test]
fn the_octonic_equals_the_local_pf_and_beats_the_remote_one() {
    let mode = "workload.netperf_rx.nic_mode";
    let pf = "workload.netperf_rx.netdev_pf";
    let r = rows(&[
        "--set",
        &format!("{mode}=standard,octonic"),
        "--set",
        &format!("{pf}=0,1"),
    ]);
    assert_eq!(r.len(), 4 * 3, "one row per point and workload");
    // Every workload has the catalog's metric names (EXPERIMENTS.md `ioctopus.*`).
    for row in &r {
        let names: Vec<&str> = row["metrics"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let want: &[&str] = match row["params"]["workload"].as_str().unwrap() {
            "netperf_rx" => &["cpu_util", "mem_bw_gbps", "throughput_gbps"],
            "rr" => &["latency_us", "p99_us"],
            "pktgen" => &["cpu_util", "mem_bw_gbps", "mpps", "throughput_gbps"],
            other => panic!("{other}"),
        };
        assert_eq!(names, want, "{row}");
    }
    let rx = |m: &str, p: i64, what: &str| {
        metric(
            &r,
            "netperf_rx",
            &[(mode, Value::from(m)), (pf, Value::from(p))],
            what,
        )
    };
    let (local, remote) = (
        rx("standard", 0, "throughput_gbps"),
        rx("standard", 1, "throughput_gbps"),
    );
    // The process is on node 0: pf0 is local to it, pf1 across QPI. The octoNIC steers the
    // flow to the local PF whatever the netdev's PF.
    for p in [0, 1] {
        let octo = rx("octonic", p, "throughput_gbps");
        assert!(
            (octo / local - 1.0).abs() < 0.01,
            "octonic {octo} vs local {local}"
        );
        assert!(octo > 1.1 * remote, "octonic {octo} vs remote {remote}");
    }
    // The remote PF's DMA goes to DRAM across QPI; the local one's stays in the LLC.
    assert!(rx("standard", 1, "mem_bw_gbps") > 2.0 * remote);
    assert!(rx("standard", 0, "mem_bw_gbps") < rx("standard", 1, "mem_bw_gbps") / 10.0);

    let r = rows(&["--set", "workload.pktgen.netdev_pf=0,pf1"]);
    let pk = |p: &str| {
        metric(
            &r,
            "pktgen",
            &[("workload.pktgen.netdev_pf", Value::from(p))],
            "mpps",
        )
    };
    let pk0 = metric(
        &r,
        "pktgen",
        &[("workload.pktgen.netdev_pf", Value::from(0))],
        "mpps",
    );
    assert!(pk("pf1") < 0.9 * pk0, "remote {} vs local {pk0}", pk("pf1"));
}

#[test]
fn network_workloads_name_missing_hardware_where_they_are_written() {
    let ex = example();
    let run = |sets: &[&str]| {
        let mut a = vec!["run", ex.as_str()];
        for s in sets {
            a.extend(["--set", s]);
        }
        let (code, _, err) = nudma(&a);
        assert_eq!(code, 2, "{err}");
        err
    };
    // Located at the workload's table, the field and the hardware named.
    let err = run(&["workload.pktgen.netdev_pf=2"]);
    assert!(
        err.contains("own_server_network.toml (with --set):")
            && err.contains("workload `pktgen`: netdev_pf 2: `conan.octonic` has 2 PF(s)"),
        "{err}"
    );
    let err = run(&["workload.netperf_rx.cpu_node=2"]);
    assert!(
        err.contains("workload `netperf_rx`: cpu_node 2: host `conan` has CPU nodes 0 .. 1"),
        "{err}"
    );
    let err = run(&["workload.rr.client_nic=eth0"]);
    assert!(
        err.contains("workload `rr`: host `client` has no device `eth0` (its NICs: `nic`)"),
        "{err}"
    );
    let err = run(&["workload.netperf_rx.connections=9"]);
    assert!(
        err.contains("connections 9: node 0 of host `conan` has 8 cores (one connection per core)"),
        "{err}"
    );
    // Out of range in the file: at the value, by key.
    let err = run(&["workload.netperf_rx.msg_bytes=0"]);
    assert!(
        err.contains("must be at least 1 byte (key `workload.netperf_rx.msg_bytes`)"),
        "{err}"
    );
    let err = run(&["workload.rr.nic_mode=octopus"]);
    assert!(
        err.contains("unknown variant `octopus`, expected one of `standard`, `octonic`, `linux_multipf` (key `workload.rr.nic_mode`)"),
        "{err}"
    );

    // A client host without any NIC.
    let text = std::fs::read_to_string(&ex).unwrap();
    let cut = text
        .split_once("[[host.device]]\nname = \"nic\"")
        .map(|(a, b)| format!("{a}{}", &b[b.find("\n\n").unwrap()..]))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("no_nic.toml");
    std::fs::write(&f, cut).unwrap();
    let (code, _, err) = nudma(&["run", &f.display().to_string()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "workload `netperf_rx`: host `client` has no device `nic` (it has no NIC): a network \
             workload needs a NIC on each host"
        ),
        "{err}"
    );
}
