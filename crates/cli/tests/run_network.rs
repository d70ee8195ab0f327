//! `nudma run`'s network workloads on a user's own two-socket server (the README's
//! `examples/own_server_network.toml`: an `inspect --export` of an hwloc fixture with a
//! dual-PF NIC added by hand): netperf, pktgen, memcached and the UDP ping-pong with a
//! standard NIC on either PF and with the octoNIC, their catalog metric names, a migrating
//! receiver, STREAM antagonists, the PageRank victim, and located errors for hardware a
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

/// The stderr of `nudma run` on `ex` with `sets`, which must refuse it (exit 2).
fn refused(ex: &str, sets: &[&str]) -> String {
    let mut a = vec!["run", ex];
    for s in sets {
        a.extend(["--set", s]);
    }
    let (code, _, err) = nudma(&a);
    assert_eq!(code, 2, "{err}");
    err
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
    assert_eq!(r.len(), 4 * 5, "one row per point and workload");
    // Every workload has the metrics the `ioctopus.*` experiments read (each naming its
    // unit: `_gbit_s` is Gb/s) and the interrupt rate `ioctopus.coalescing` reads.
    for row in &r {
        let names: Vec<&str> = row["metrics"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // Each names what bounds it too (`bound`, `bound_util`; crates/cli/tests/run_bound.rs).
        let want: &[&str] = match row["params"]["workload"].as_str().unwrap() {
            "netperf_rx" => &[
                "bound",
                "bound_util",
                "cpu_util",
                "mem_bw_gbit_s",
                "server_irqs_per_s",
                "throughput_gbit_s",
            ],
            "rr" => &[
                "bound",
                "bound_util",
                "latency_us",
                "p99_us",
                "server_irqs_per_s",
            ],
            "pktgen" => &[
                "bound",
                "bound_util",
                "cpu_util",
                "interconnect_gbit_s",
                "mem_bw_gbit_s",
                "mpps",
                "throughput_gbit_s",
            ],
            "memcached" => &[
                "bound",
                "bound_util",
                "kops",
                "mem_bw_gbit_s",
                "throughput_gbit_s",
            ],
            "udp" => &["bound", "bound_util", "latency_us"],
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
        rx("standard", 0, "throughput_gbit_s"),
        rx("standard", 1, "throughput_gbit_s"),
    );
    // The process is on node 0: pf0 is local to it, pf1 across QPI. The octoNIC steers the
    // flow to the local PF whatever the netdev's PF.
    for p in [0, 1] {
        let octo = rx("octonic", p, "throughput_gbit_s");
        assert!(
            (octo / local - 1.0).abs() < 0.01,
            "octonic {octo} vs local {local}"
        );
        assert!(octo > 1.1 * remote, "octonic {octo} vs remote {remote}");
    }
    // The remote PF's DMA goes to DRAM across QPI; the local one's stays in the LLC. The
    // row's DRAM traffic is the server's, which the memcached beside it shares: the
    // difference is the receive's.
    let extra = rx("standard", 1, "mem_bw_gbit_s") - rx("standard", 0, "mem_bw_gbit_s");
    assert!(
        extra > 2.0 * remote,
        "{extra} more DRAM traffic at {remote} Gb/s"
    );

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
    let run = |sets: &[&str]| refused(&ex, sets);
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

#[test]
fn memcached_on_the_octonic_runs_as_on_the_local_pf_and_replies_verified_values() {
    let mode = "workload.memcached.nic_mode";
    let pf = "workload.memcached.netdev_pf";
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let r = rows(&[
        "--set",
        &format!("{mode}=standard,octonic"),
        "--set",
        &format!("{pf}=0,1"),
        "--out",
        &out,
    ]);
    let mc = |m: &str, p: i64, what: &str| {
        metric(
            &r,
            "memcached",
            &[(mode, Value::from(m)), (pf, Value::from(p))],
            what,
        )
    };
    let (local, remote) = (mc("standard", 0, "kops"), mc("standard", 1, "kops"));
    for p in [0, 1] {
        let octo = mc("octonic", p, "kops");
        assert!(
            (octo / local - 1.0).abs() < 0.01,
            "octonic {octo} vs local {local}"
        );
        assert!(octo > 1.1 * remote, "octonic {octo} vs remote {remote}");
    }
    // SET-heavy (90 %): the remote PF writes the values to DRAM across QPI, the local one
    // into the LLC's DDIO share. The row's DRAM traffic is the server's, which the
    // TCP_STREAM beside it shares: the difference is memcached's.
    let (local_bw, remote_bw) = (
        mc("standard", 0, "mem_bw_gbit_s"),
        mc("standard", 1, "mem_bw_gbit_s"),
    );
    let values = mc("standard", 1, "throughput_gbit_s");
    assert!(
        remote_bw - local_bw > 2.0 * values,
        "remote {remote_bw} vs local {local_bw} at {values} Gb/s of values"
    );
    // Every point's GET replies were checked byte for byte (a wrong one fails the run).
    let counters: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("counters.json")).unwrap())
            .unwrap();
    let text = counters.to_string();
    assert!(text.contains("\"values_checked\""), "{text}");
    fn checked_in(v: &Value) -> Vec<u64> {
        match v {
            Value::Object(m) => m
                .iter()
                .flat_map(|(k, x)| {
                    if k == "values_checked" {
                        vec![x.as_u64().unwrap()]
                    } else {
                        checked_in(x)
                    }
                })
                .collect(),
            Value::Array(a) => a.iter().flat_map(checked_in).collect(),
            _ => Vec::new(),
        }
    }
    let all = checked_in(&counters);
    assert_eq!(all.len(), 4, "one memcached per point: {text}");
    assert!(all.iter().all(|&n| n > 0), "{all:?}");
}

#[test]
fn a_migrating_receiver_moves_to_the_new_sockets_pf_only_on_the_octonic() {
    let r = rows(&[
        "--set",
        "workload.netperf_rx.netdev_pf=0",
        "--set",
        "workload.netperf_rx.migrate_at_ms=6",
        "--set",
        "workload.netperf_rx.sample_ms=1",
        "--set",
        "measure.warmup=2 ms",
        "--set",
        "workload.netperf_rx.nic_mode=standard,octonic",
    ]);
    let series = |m: &str, what: &str| -> Vec<f64> {
        r.iter()
            .find(|x| {
                x["params"]["workload"] == "netperf_rx"
                    && x["params"]["workload.netperf_rx.nic_mode"] == m
            })
            .unwrap()["metrics"][what]
            .as_array()
            .unwrap_or_else(|| panic!("{m}: no series {what}"))
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    // 12 samples of 1 ms over the 2 ms warm-up and 10 ms window; the move at 6 ms.
    assert_eq!(series("standard", "t_ms").len(), 12);
    // Before the move both run on pf0 (local); after it the standard NIC keeps the flow
    // on pf0 while the octoNIC's team driver moves it to pf1, local to the new socket.
    for m in ["standard", "octonic"] {
        assert!(series(m, "pf0_gbit_s")[3] > 1.0, "{m}");
        assert!(series(m, "pf1_gbit_s")[3] < 0.01, "{m}");
    }
    assert!(series("standard", "pf0_gbit_s")[10] > 1.0);
    assert!(series("standard", "pf1_gbit_s")[10] < 0.01);
    assert!(series("octonic", "pf0_gbit_s")[10] < 0.01);
    assert!(series("octonic", "pf1_gbit_s")[10] > 1.0);
    for m in ["standard", "octonic"] {
        let row = r
            .iter()
            .find(|x| {
                x["params"]["workload"] == "netperf_rx"
                    && x["params"]["workload.netperf_rx.nic_mode"] == m
            })
            .unwrap();
        assert_eq!(row["metrics"]["lost"], 0, "{m}");
    }
}

#[test]
fn stream_antagonists_slow_the_udp_ping_pong() {
    let r = rows(&[
        "--set",
        "workload.udp.stream_node=1",
        "--set",
        "workload.udp.stream_pairs=0,3",
    ]);
    let lat = |p: i64| {
        metric(
            &r,
            "udp",
            &[("workload.udp.stream_pairs", Value::from(p))],
            "latency_us",
        )
    };
    assert!(lat(3) > lat(0), "{} vs {}", lat(3), lat(0));
}

/// The example's hardware with `workloads` and a window of its own.
fn own_file(dir: &Path, workloads: &str, measure: &str) -> String {
    let text = std::fs::read_to_string(example()).unwrap();
    // Its includes are built-in platform files.
    let hw = &text[..text.find("[[workload]]").unwrap()];
    let f = dir.join("own.toml");
    std::fs::write(&f, format!("{hw}{workloads}\n{measure}")).unwrap();
    f.display().to_string()
}

#[test]
fn the_pagerank_victim_alone_is_bound_by_its_reads_latency() {
    let dir = tempfile::tempdir().unwrap();
    let f = own_file(
        dir.path(),
        "[[workload]]\nname = \"pr\"\nkind = \"pagerank\"\nhost = \"conan\"\nthreads_per_socket = 1\n",
        "[measure]\nwarmup = \"0.2 ms\"\nduration = \"0.5 ms\"\n",
    );
    let (code, out, err) = nudma(&[
        "run",
        &f,
        "--format",
        "json",
        "--set",
        "workload.pr.threads_per_socket=1,8",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let rate = |t: i64| {
        metric(
            v["results"].as_array().unwrap(),
            "pr",
            &[("workload.pr.threads_per_socket", Value::from(t))],
            "edges_per_s",
        )
    };
    // One thread per socket: each step's 10 score reads (the line-fill buffers) overlap,
    // so a step lasts one local DRAM read (90 ns) plus 10 edges' compute (4 cycles each
    // at 2 GHz, 20 ns), and its edge-list page reads now and then.
    let per_thread = rate(1) / 2.0;
    let bound = 10.0 / 110e-9;
    assert!(
        per_thread <= bound && per_thread > 0.85 * bound,
        "{per_thread} edges/s vs {bound}"
    );
    // More threads never do better than in proportion.
    assert!(rate(8) <= 8.0 * rate(1) * 1.001 && rate(8) > rate(1));
}

#[test]
fn the_new_kinds_name_what_is_wrong_where_it_is_written() {
    let ex = example();
    let run = |sets: &[&str]| refused(&ex, sets);
    // An octoNIC needs a PF on each socket: the client's NIC has one.
    let err = run(&[
        "workload.memcached.server=client",
        "workload.memcached.nic=nic",
        "workload.memcached.netdev_pf=0",
        "workload.memcached.nic_mode=octonic",
    ]);
    assert!(
        err.contains("workload `memcached`: nic_mode octonic: `client.nic` has one PF"),
        "{err}"
    );
    let err = run(&["workload.memcached.set_ratio=2"]);
    assert!(
        err.contains("must be a share of SETs in 0 .. 1 (key `workload.memcached.set_ratio`)"),
        "{err}"
    );
    let err = run(&["workload.udp.msg_bytes=1500"]);
    assert!(
        err.contains("must be 1 .. 1472 bytes (one datagram in one 1500-byte MTU frame) (key `workload.udp.msg_bytes`)"),
        "{err}"
    );
    // Three pairs and the ping-pong's core fit the 8 cores of a socket; four do not.
    let err = run(&["workload.udp.stream_pairs=4", "workload.udp.stream_node=1"]);
    assert!(
        err.contains("workload `udp`: stream_pairs 4: 8 STREAM cores and the workload's 1 need more than socket 0's 8 cores of host `conan`"),
        "{err}"
    );
    let err = run(&["workload.udp.stream_pairs=1", "workload.udp.stream_node=2"]);
    assert!(
        err.contains("stream_node 2: mem_node 2: host `conan` has NUMA nodes 0 .. 1"),
        "{err}"
    );
    let err = run(&["workload.rr.migrate_at_ms=5"]);
    assert!(
        err.contains("a migration moves the receiver of one TCP_STREAM rx connection (key `workload.rr.migrate_at_ms`)"),
        "{err}"
    );
    let err = run(&["workload.memcached.client=nobody"]);
    assert!(
        err.contains("workload `memcached`: no host `nobody`"),
        "{err}"
    );
    // A host without a NIC.
    let err = run(&[
        "workload.memcached.server=client",
        "workload.memcached.nic=octonic",
    ]);
    assert!(
        err.contains(
            "workload `memcached`: host `client` has no device `octonic` (its NICs: `nic`)"
        ),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let f = own_file(
        dir.path(),
        "[[workload]]\nname = \"pr\"\nkind = \"pagerank\"\nhost = \"conan\"\nthreads_per_socket = 9\n",
        "[measure]\nwarmup = \"0.1 ms\"\nduration = \"0.1 ms\"\n",
    );
    let (code, _, err) = nudma(&["run", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("workload `pr`: threads_per_socket 9: host `conan` has 8 cores per socket (one thread per core)"),
        "{err}"
    );
}
