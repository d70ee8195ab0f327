//! `nudma advise`: the placements of a scenario's workloads, searched in the simulation;
//! the ones that gain ranked, each verified by `nudma run` of the changed scenario.

mod common;
use common::nudma;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let (code, out, err) = nudma(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} prints JSON: {e}\n{out}"))
}

/// A TCP receive remote from its NIC beside a STREAM antagonist on the NIC's socket
/// (`contention/tcp_rx`): with the antagonist kept where it is, the best placement moves
/// the receiver's cores and buffers to the NIC's node, and `nudma run` of that change
/// gives what the advice predicted.
#[test]
fn a_receive_remote_from_its_nic_is_moved_to_the_nics_node() {
    let a = json(&[
        "advise",
        "contention/tcp_rx",
        "--fix",
        "workload.stream",
        "--format",
        "json",
    ]);
    let recs = a["recommendations"].as_array().unwrap();
    let top = &recs[0];
    assert_eq!(top["rank"], 1);
    assert_eq!(top["changes"]["workload.rx.cpu_node"], "0", "{top}");
    assert_eq!(top["changes"]["workload.rx.mem_node"], "0", "{top}");
    assert!(top["changes"].get("workload.stream.mem_node").is_none());
    let gain = top["gain"].as_f64().unwrap();
    assert!(gain > 1.5, "{gain}");
    // Ranked by gain, each above the scenario as it is.
    let gains: Vec<f64> = recs.iter().map(|r| r["gain"].as_f64().unwrap()).collect();
    assert!(
        gains.windows(2).all(|g| g[0] >= g[1]) && gains[gains.len() - 1] > 1.0,
        "{gains:?}"
    );
    assert!(top["commands"][0]
        .as_str()
        .unwrap()
        .starts_with("numactl --cpunodebind=0 --membind=0"));
    // Verified: the changed scenario, run as a user would, gives the prediction.
    let run = json(&[
        "run",
        "contention/tcp_rx",
        "--set",
        "workload.rx.cpu_node=0",
        "--set",
        "workload.rx.mem_node=0",
        "--format",
        "json",
    ]);
    let measured = |w: &str, m: &str| {
        let row = run["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["params"]["workload"] == w)
            .unwrap();
        row["metrics"][m].as_f64().unwrap()
    };
    let ratio = |w: &str, m: &str| {
        let key = format!("{w}.{m}");
        let predicted = top["predicted"][&key].as_f64().unwrap();
        assert!((measured(w, m) / predicted - 1.0).abs() < 0.01, "{key}");
        measured(w, m) / a["baseline"][&key].as_f64().unwrap()
    };
    // The throughput objective: the geometric mean of the workloads' ratios; the
    // antagonist, kept where it is, keeps its rate.
    let (rx, stream) = (
        ratio("rx", "throughput_gbit_s"),
        ratio("stream", "throughput_gbyte_s"),
    );
    assert!(
        rx > 3.0 && (stream - 1.0).abs() < 0.01,
        "rx ×{rx}, stream ×{stream}"
    );
    assert!(
        ((rx * stream).sqrt() / gain - 1.0).abs() < 0.1,
        "×{rx}, ×{stream} vs ×{gain}"
    );
}

#[test]
fn a_placement_already_at_its_best_gets_an_empty_list_that_says_so() {
    let a = json(&[
        "advise",
        "contention/tcp_rx",
        "--set",
        "workload.rx.cpu_node=0",
        "--set",
        "workload.rx.mem_node=0",
        "--fix",
        "workload.stream",
        "--format",
        "json",
    ]);
    assert_eq!(a["recommendations"], serde_json::json!([]));
    assert!(a["message"]
        .as_str()
        .unwrap()
        .starts_with("already at its best"));
}

#[test]
fn bad_advice_requests_are_located_errors() {
    for (args, says) in [
        (
            vec!["advise", "contention/tcp_rx", "--fix", "workload.nope"],
            "--fix workload.nope: the scenario sets no key",
        ),
        (
            vec!["advise", "contention/tcp_rx", "--objective", "fastest"],
            "invalid value 'fastest' for '--objective",
        ),
        (
            vec!["advise", "contention/tcp_rx", "--budget", "0"],
            "--budget 0",
        ),
        (
            vec!["advise", "contention/tcp_rx", "--fix", "workload"],
            "nothing to search",
        ),
        (
            vec![
                "advise",
                "contention/tcp_rx",
                "--set",
                "workload.rx.cpu_node=0,1",
            ],
            "give one value",
        ),
        (
            vec![
                "advise",
                "contention/tcp_rx",
                "--set",
                "workload.rx.cpu_node=7",
            ],
            "cpu_node",
        ),
    ] {
        let (code, _, err) = nudma(&args);
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The IOctopus server's NIC has a PF on each socket: a receive on the other socket's PF
/// is advised onto its own socket's PF, or a netdev that steers to it (the octoNIC, Linux's
/// multi-PF netdev), all equal.
#[test]
fn a_receive_through_the_remote_pf_gets_the_local_pf_or_an_octonic() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/ioctopus_r730.toml"
    ))
    .unwrap()
    .replace("name = \"ioctopus_r730\"", "name = \"remote_pf\"");
    let file = dir.path().join("remote_pf.toml");
    std::fs::write(
        &file,
        format!(
            "{text}\n[[workload]]\nname = \"rx\"\nkind = \"netperf\"\ntest = \"TCP_STREAM\"\n\
             direction = \"rx\"\nmsg_bytes = \"64 KiB\"\nconnections = 1\nserver = \"server\"\n\
             client = \"client\"\nnic = \"nic\"\ncpu_node = 0\nmem_node = 0\n\
             nic_mode = \"standard\"\nnetdev_pf = \"pf1\"\n\n[measure]\nwarmup = \"1 ms\"\n\
             duration = \"1 ms\"\n"
        ),
    )
    .unwrap();
    let a = json(&[
        "advise",
        file.to_str().unwrap(),
        "--fix",
        "workload.rx.cpu_node",
        "--fix",
        "workload.rx.mem_node",
        "--format",
        "json",
    ]);
    let recs = a["recommendations"].as_array().unwrap();
    let changes: Vec<String> = recs.iter().map(|r| r["changes"].to_string()).collect();
    assert_eq!(recs.len(), 3, "{changes:?}");
    for want in [
        r#""workload.rx.netdev_pf":"pf0""#,
        r#""workload.rx.nic_mode":"octonic""#,
        r#""workload.rx.nic_mode":"linux_multipf""#,
    ] {
        assert!(
            changes.iter().any(|c| c.contains(want)),
            "{want} in {changes:?}"
        );
    }
    let gains: Vec<f64> = recs.iter().map(|r| r["gain"].as_f64().unwrap()).collect();
    assert!(
        gains
            .iter()
            .all(|g| (g / gains[0] - 1.0).abs() < 0.01 && *g > 1.2),
        "{gains:?}"
    );
}

/// RDMA READs beside STREAM cores loading node 1: the server's region goes to the
/// RNIC's node.
#[test]
fn remote_rdma_reads_under_load_get_their_region_on_the_rnics_node() {
    let a = json(&[
        "advise",
        "contention/rdma_read",
        "--fix",
        "workload.stream",
        "--format",
        "json",
    ]);
    let top = &a["recommendations"][0];
    assert_eq!(
        top["changes"]["workload.reads.server_placement"], "local",
        "{a}"
    );
    assert!(top["gain"].as_f64().unwrap() > 1.1, "{top}");
}
