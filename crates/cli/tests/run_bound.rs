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

/// The run's results and counters (of its first point) through `--out`.
fn run_out(args: &[&str]) -> (Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let mut a = vec!["run"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--jobs", "1", "--out", out]);
    let (code, _, err) = nudma(&a);
    assert_eq!(code, 0, "{err}");
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(f)).unwrap()).unwrap()
    };
    let counters = read("counters.json");
    let counters = match counters.get("points") {
        Some(p) => p[0]["counters"].clone(),
        None => counters,
    };
    (read("results.json"), counters)
}

/// A network workload's resources in `counters`: (name, util).
fn resources(counters: &Value, w: &str) -> Vec<(String, f64)> {
    counters["network"][w]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{w} lists its resources"))
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().into(),
                r["util"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn pktgen_at_64_bytes_is_bound_by_its_port_when_full_else_by_the_fuller_of_port_and_core() {
    let ex = example("own_server_network.toml");
    let (_, counters) = run_out(&[&ex, "--set", "workload.pktgen.pkt_bytes=64"]);
    let rows = bounds(&[&ex, "--set", "workload.pktgen.pkt_bytes=64"]);
    let (_, bound, util) = of(&rows, "pktgen");
    let r = resources(&counters, "pktgen");
    let util_of = |prefix: &str| {
        r.iter()
            .find(|(n, _)| n.starts_with(prefix) || n.ends_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in {r:?}"))
            .1
    };
    let (core, port) = (util_of("cores"), util_of("port"));
    // A full port comes first: the core's busy time includes its waits on the port.
    let fuller = if port >= 0.9 || port >= core {
        "port"
    } else {
        "cores"
    };
    assert!(
        bound.starts_with(fuller) || bound.ends_with(fuller),
        "{bound}: core {core}, port {port}"
    );
    // Nothing else on its path is fuller, and what bounds it is near full.
    let busiest = r.iter().map(|x| x.1).fold(0.0, f64::max);
    assert!(core.max(port) >= busiest, "{r:?}");
    assert!(util.is_some_and(|u| u >= 0.9), "{util:?}");
}

#[test]
fn tcp_rr_and_udp_ping_pong_are_latency_bound_with_one_request_in_flight() {
    // In one world with the example's other workloads, and TCP_RR alone on its own model
    // (its receive idle), coalescing off.
    let shared = bounds(&[
        &example("own_server_network.toml"),
        "--set",
        "workload.rr.coalescing=off",
    ]);
    let alone = bounds(&[
        "contention/tcp_rr_stream",
        "--set",
        "workload.rx.connections=0",
        "--set",
        "workload.rr.coalescing=off",
    ]);
    for (rows, w) in [(&shared, "rr"), (&shared, "udp"), (&alone, "rr")] {
        let (_, bound, util) = of(rows, w);
        assert_eq!(bound, "latency: 1 request in flight", "{w}");
        assert_eq!(*util, None, "{w}");
    }
}

#[test]
fn memcached_names_its_bound_from_its_instances_busy_time() {
    let ex = example("own_server_network.toml");
    let (results, counters) = run_out(&[&ex]);
    let row = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["params"]["workload"] == "memcached")
        .unwrap();
    let bound = row["metrics"]["bound"].as_str().unwrap();
    let util = row["metrics"]["bound_util"].as_f64();
    let mc = &counters["network"]["memcached"];
    let busy = mc["instance_cpu_util"]
        .as_f64()
        .or_else(|| mc["server_cpu_util"].as_f64())
        .unwrap();
    if busy >= 0.9 {
        assert!(bound.starts_with("cores (cpu_util"), "{bound}");
        assert!(
            util.is_some_and(|u| (u - busy).abs() < 1e-3),
            "{util:?} {busy}"
        );
    } else {
        assert!(!bound.starts_with("cores"), "{bound} at {busy}");
    }
    // Whatever it is, it is one of its resources or its requests in flight.
    let r = resources(&counters, "memcached");
    assert!(
        r.iter().any(|(n, _)| n == bound) || bound.ends_with("requests in flight"),
        "{bound}: {r:?}"
    );
}

#[test]
fn an_open_loop_rdma_bench_with_many_connections_fills_its_port_and_a_closed_one_waits() {
    let ex = example("rdma_bench.toml");
    let common = [
        "--set",
        "workload.reads.load=none",
        "--set",
        "workload.reads.server_placement=local",
        "--set",
        "workload.reads.connections=16",
        "--set",
        "workload.reads.bytes=65536",
        "--set",
        "workload.reads.mtu=4096",
    ];
    let mut open = vec![ex.as_str()];
    open.extend(common);
    let (_, bound, util) = of(&bounds(&open), "reads").clone();
    // 64 KiB READs: the data leaves through the server's port and its PCIe link.
    assert!(
        bound == "server.rnic port" || bound.contains("link"),
        "{bound}"
    );
    assert!(util.is_some_and(|u| u >= 0.9), "{util:?}");
    let closed = bounds(&[
        &ex,
        "--set",
        "workload.reads.load=none",
        "--set",
        "workload.reads.mode=closed",
        "--set",
        "workload.reads.connections=1,8",
    ]);
    assert_eq!(closed[0].1, "latency: 1 outstanding");
    assert_eq!(closed[1].1, "latency: 8 outstanding");
    assert_eq!(closed[0].2, None);
}

/// A scenario file of the built-in `scenario` with `workloads` and a window appended.
fn with_workloads(dir: &std::path::Path, scenario: &str, workloads: &str) -> String {
    let base = format!(
        "{}/../../scenarios/{scenario}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(base).unwrap();
    let path = dir.join(format!("{scenario}.toml"));
    std::fs::write(&path, format!("{text}\n{workloads}")).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn pcie_bench_latency_tests_wait_on_one_transfer_and_bandwidth_tests_fill_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let file = |kind: &str, op: &str| {
        let w = format!(
            "[[workload]]\nname = \"b\"\nkind = \"{kind}\"\ndevice = \"host.nfp\"\n\
             target = \"host.ram.node0\"\nop = \"{op}\"\nbytes = 2048\npattern = \"seq\"\n\
             cache = \"hwarm\"\n\n[measure]\nwarmup = \"2 us\"\nduration = \"20 us\"\n"
        );
        let d = dir.path().join(format!("{kind}-{op}"));
        std::fs::create_dir_all(&d).unwrap();
        with_workloads(&d, "pciebench", &w)
    };
    let lat = bounds(&[&file("pcie_lat", "rd")]);
    assert_eq!(of(&lat, "b").1, "latency: 1 transfer in flight");
    // Reads of 2 KiB: the completions fill the NFP's link towards it.
    let bw = bounds(&[&file("pcie_bw", "rd")]);
    assert_eq!(of(&bw, "b").1, "link host.nfp ←");
    assert!(of(&bw, "b").2.is_some_and(|u| u >= 0.9));
}

#[test]
fn nvme_share_is_bound_by_the_drives_media_when_its_clients_keep_it_busy() {
    let dir = tempfile::tempdir().unwrap();
    let w = "[[workload]]\nname = \"share\"\nkind = \"nvme_share\"\ndevice = \"h00.nvme\"\n\
             clients = 1\nsq = \"borrower_ram\"\n\n[measure]\nwarmup = \"100 us\"\n\
             duration = \"1 ms\"\n";
    let f = with_workloads(dir.path(), "smartio_cluster60", w);
    let rows = bounds(&[&f, "--set", "workload.share.depth=1,32"]);
    assert_eq!(rows[0].1, "latency: 1 outstanding");
    assert_eq!(rows[1].1, "h00.nvme media read rate");
    assert!(rows[1].2.is_some_and(|u| u >= 0.9), "{:?}", rows[1].2);
}

#[test]
fn a_gpu_ping_pong_waits_on_its_one_counter_write_and_lists_the_links_it_crosses() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(example("single_transfers.toml")).unwrap();
    let hardware = text.split("[[workload]]").next().unwrap();
    let path = dir.path().join("pp.toml");
    let w = "[[workload]]\nname = \"pp\"\nkind = \"pingpong\"\na = \"lender.gpu0\"\n\
             b = \"lender.gpu1\"\ncounters = \"gpu_memory\"\n\n[measure]\n\
             warmup = \"10 us\"\nduration = \"50 us\"\n";
    std::fs::write(&path, format!("{hardware}{w}")).unwrap();
    let (results, counters) = run_out(&[path.to_str().unwrap()]);
    let m = &results["results"][0]["metrics"];
    assert_eq!(m["bound"], "latency: 1 counter write in flight");
    // Each GPU's writes go up its own link into the other's memory.
    let names: Vec<&str> = counters["resources"]["pp"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for gpu in ["lender.gpu0", "lender.gpu1"] {
        assert!(names.iter().any(|n| n.contains(gpu)), "{gpu}: {names:?}");
    }
}
