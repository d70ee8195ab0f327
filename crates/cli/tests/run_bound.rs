//! `nudma run` names what bounds each workload (`bound`, `bound_util`): the busiest
//! resource on the workload's own path when it is near full, else latency with what the
//! workload keeps under way.

mod common;
use common::nudma;
use serde_json::Value;

/// The run's rows as (workload, bound, bound_util) in row order.
fn bounds(args: &[&str]) -> Vec<(String, String, Option<f64>)> {
    let mut a = vec!["run"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--format", "json", "--jobs", "1"]);
    let (code, out, err) = nudma(&a);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let m = &r["metrics"];
            (
                r["params"]["workload"].as_str().unwrap().to_string(),
                m["bound"]
                    .as_str()
                    .expect("every row names a bound")
                    .to_string(),
                m["bound_util"].as_f64(),
            )
        })
        .collect()
}

/// An example file by its path from the repository's root.
fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn of<'a>(rows: &'a [(String, String, Option<f64>)], w: &str) -> &'a (String, String, Option<f64>) {
    rows.iter().find(|r| r.0 == w).expect("the workload's row")
}

#[test]
fn a_remote_tcp_receive_beside_stream_cores_is_bound_by_its_memory_path_not_its_core() {
    let rows = bounds(&["contention/tcp_rx"]);
    let (_, bound, util) = of(&rows, "rx");
    assert!(
        bound.contains("interconnect") || bound.contains("DRAM node 1"),
        "{bound}"
    );
    assert!(util.is_some_and(|u| (0.9..=1.0).contains(&u)), "{util:?}");
}

#[test]
fn the_same_receive_without_the_antagonist_or_all_local_is_bound_by_its_core() {
    for set in [
        vec!["--set", "workload.stream.cores=0"],
        vec![
            "--set",
            "workload.rx.cpu_node=0",
            "--set",
            "workload.rx.mem_node=0",
        ],
    ] {
        let mut args = vec!["contention/tcp_rx"];
        args.extend(set);
        let rows = bounds(&args);
        let (_, bound, util) = of(&rows, "rx");
        assert!(bound.starts_with("cores (cpu_util"), "{args:?}: {bound}");
        assert!(util.is_some_and(|u| u >= 0.9), "{args:?}: {util:?}");
    }
}

#[test]
fn a_stream_with_no_cores_and_a_receive_with_no_connections_are_idle() {
    let rows = bounds(&[
        "contention/tcp_rx",
        "--set",
        "workload.stream.cores=0",
        "--set",
        "workload.rx.connections=0",
    ]);
    for w in ["rx", "stream"] {
        assert_eq!(of(&rows, w).1, "idle");
        assert_eq!(of(&rows, w).2, None);
    }
}

#[test]
fn a_dma_is_bound_by_its_pcie_link_at_many_outstanding_and_by_latency_at_one() {
    let ex = example("current_server.toml");
    let rows = bounds(&[
        &ex,
        "--set",
        "workload.gpu_h2d.transfer_bytes=4096",
        "--set",
        "workload.gpu_h2d.outstanding=1,64",
    ]);
    let gpu: Vec<_> = rows.iter().filter(|r| r.0 == "gpu_h2d").collect();
    assert_eq!(gpu.len(), 2);
    assert_eq!(gpu[0].1, "latency: 1 outstanding");
    assert_eq!(gpu[0].2, None);
    // The GPU reads host memory: its completions come down its link.
    assert_eq!(gpu[1].1, "link srv.gpu ←");
    assert!(gpu[1].2.is_some_and(|u| u >= 0.9), "{:?}", gpu[1].2);
}

#[test]
fn devices_at_their_own_data_rate_are_bound_by_it_and_a_shared_uplink_by_the_uplink() {
    let rows = bounds(&[&example("two_socket_server.toml")]);
    // Two NICs behind one switch: their shared uplink, not each NIC's own link.
    assert_eq!(of(&rows, "nic0_rx").1, "link srv.sw →");
    assert_eq!(of(&rows, "nic1_rx").1, "link srv.sw →");
    assert_eq!(of(&rows, "nvme_write").1, "srv.nvme media write rate");
    assert!(of(&rows, "antagonist").1.starts_with("latency: "));
}

#[test]
fn the_text_output_ends_each_table_with_the_bound_and_its_utilisation() {
    let (code, out, err) = nudma(&["run", "contention/tcp_rx"]);
    assert_eq!(code, 0, "{err}");
    for header in out.lines().filter(|l| l.starts_with("workload")) {
        assert!(header.trim_end().ends_with("bound  bound_util"), "{header}");
    }
    let stream = out.lines().find(|l| l.starts_with("stream")).unwrap();
    // A latency bound has no utilisation.
    assert!(stream.trim_end().ends_with('—'), "{stream}");
}
