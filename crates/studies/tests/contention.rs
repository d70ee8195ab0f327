//! Workloads of one run contend: each built-in `contention/*` scenario puts a workload
//! beside a STREAM antagonist (`cpu_stream`) that loads the interconnect and one node's
//! DRAM. Remote from its device, the workload crosses what the antagonist loads and slows
//! beside it; local, it does not (or by the antagonist's share of their common socket).

use fabric::scenario::Source;
use studies::run::{self, overrides::Override};

/// The built-in scenario `name`, without the workload `drop` when given.
fn source(name: &str, drop: Option<&str>) -> Source {
    let mut src = run::source(name).unwrap();
    if let Some(w) = drop {
        let start = src
            .text
            .find(&format!("[[workload]]\nname = \"{w}\""))
            .unwrap();
        let len = src.text[start + 1..].find("\n[").unwrap() + 2;
        src.text.replace_range(start..start + len, "");
    }
    src
}

/// One point of `src` with `sets`: the metric `metric` of workload `workload`.
fn metric(src: &Source, sets: &[&str], workload: &str, metric: &str) -> f64 {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let point = run::sweep(&sets).pop().unwrap();
    let r = run::run_point(src, &point, 1).unwrap();
    let row = r
        .rows
        .iter()
        .find(|row| row.params["workload"] == workload)
        .unwrap();
    row.metrics[metric]
        .as_f64()
        .unwrap_or_else(|| panic!("{workload}.{metric}: {:?}", row.metrics))
}

/// The workload's `metric` with the antagonist and without it, remote and local.
struct Relation {
    remote: (f64, f64),
    local: (f64, f64),
}

fn relation(name: &str, remote: &[&str], local: &[&str], w: &str, m: &str) -> Relation {
    let (beside, alone) = (source(name, None), source(name, Some("stream")));
    let both = |sets: &[&str]| (metric(&beside, sets, w, m), metric(&alone, sets, w, m));
    Relation {
        remote: both(remote),
        local: both(local),
    }
}

#[test]
fn a_stream_on_the_interconnect_slows_a_remote_tcp_receive_and_not_a_local_one() {
    let r = relation(
        "contention/tcp_rx",
        &["workload.rx.cpu_node=1", "workload.rx.mem_node=1"],
        &["workload.rx.cpu_node=0", "workload.rx.mem_node=0"],
        "rx",
        "throughput_gbit_s",
    );
    let (beside, alone) = r.remote;
    assert!(
        beside < 0.5 * alone,
        "remote: {beside} Gb/s beside, {alone} alone"
    );
    // Local, the frames stay in socket 0's DDIO share and node 0: the streams' servers
    // are not on its path, to the bit.
    assert_eq!(r.local.0, r.local.1, "local");
    assert!(r.local.0 > alone, "local {} vs remote {alone}", r.local.0);
}

#[test]
fn a_stream_on_the_interconnect_slows_remote_rdma_reads_and_not_local_ones() {
    let r = relation(
        "contention/rdma_read",
        &["workload.reads.server_placement=remote"],
        &["workload.reads.server_placement=local"],
        "reads",
        "ops_per_sec",
    );
    let (beside, alone) = r.remote;
    assert!(
        beside < 0.8 * alone,
        "remote: {beside} beside, {alone} alone"
    );
    assert_eq!(r.local.0, r.local.1, "local");
}

#[test]
fn a_stream_on_the_interconnect_slows_remote_fio_writes_more_than_local_ones() {
    let r = relation(
        "contention/fio_write",
        &["workload.fio.cpu_node=1", "workload.fio.mem_node=1"],
        &["workload.fio.cpu_node=0", "workload.fio.mem_node=0"],
        "fio",
        "ops_per_sec",
    );
    // fio and STREAM are one TLP-level simulation: the SSD's read completions from node 1
    // queue behind the stream's fills on UPI 1 → 0.
    let (beside, alone) = r.remote;
    assert!(
        beside < 0.95 * alone,
        "remote: {beside} beside, {alone} alone"
    );
    // Local, only the stream's cores share socket 0 with the SSD.
    let (beside, alone) = r.local;
    assert!(
        beside > 0.98 * alone,
        "local: {beside} beside, {alone} alone"
    );
}

#[test]
fn a_network_workload_lists_the_streams_it_met() {
    let src = source("contention/tcp_rx", None);
    let point = run::sweep(&[]).pop().unwrap();
    let r = run::run_point(&src, &point, 1).unwrap();
    let met = &r.counters["network"]["rx"]["beside_cpu_streams"];
    assert_eq!(met[0]["workload"], "stream");
    assert_eq!(met[0]["host"], "server");
    // Six writing cores, each at its 10 misses over the zero-load miss latency.
    let gbps = met[0]["misses_gbyte_s"].as_f64().unwrap();
    assert!(gbps > 20.0 && gbps < 30.0, "{gbps}");
}

#[test]
fn two_tcp_receives_on_one_server_share_its_port_and_memory() {
    let both = source("contention/tcp_rx_pair", None);
    let point = run::sweep(&[]).pop().unwrap();
    let r = run::run_point(&both, &point, 1).unwrap();
    let gbps = |w: &str| {
        let row = r
            .rows
            .iter()
            .find(|row| row.params["workload"] == w)
            .unwrap();
        row.metrics["throughput_gbit_s"].as_f64().unwrap()
    };
    let (local, remote) = (gbps("local"), gbps("remote"));
    // One 100 GbE port: together at line rate (payload of 1,500 B frames), not above it.
    assert!(local + remote < 95.0, "{local} + {remote}");
    assert!(local + remote > 90.0, "{local} + {remote}");
    // Each alone takes more of the port than beside the other.
    let alone_local = metric(
        &source("contention/tcp_rx_pair", Some("remote")),
        &[],
        "local",
        "throughput_gbit_s",
    );
    let alone_remote = metric(
        &source("contention/tcp_rx_pair", Some("local")),
        &[],
        "remote",
        "throughput_gbit_s",
    );
    assert!(
        alone_local > 1.2 * local,
        "local: {alone_local} alone, {local} together"
    );
    assert!(
        alone_remote > 1.1 * remote,
        "remote: {alone_remote} alone, {remote} together"
    );
    let net = &r.counters["network"];
    assert_eq!(net["local"]["run_with"], serde_json::json!(["remote"]));
    assert_eq!(net["remote"]["run_with"], serde_json::json!(["local"]));
}

#[test]
fn tcp_streams_that_differ_in_settings_still_meet_on_their_server() {
    // Other message sizes make two models, not one: they still run in one world, on the
    // server's one port and memory system.
    let src = source("contention/tcp_rx_pair", None);
    let sets = ["workload.remote.msg_bytes=65535"];
    let r = {
        let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        run::run_point(&src, &run::sweep(&sets).pop().unwrap(), 1).unwrap()
    };
    let net = &r.counters["network"];
    assert_eq!(net["local"]["run_with"], serde_json::json!(["remote"]));
    assert_eq!(net["remote"]["run_with"], serde_json::json!(["local"]));
    let local = metric(&src, &sets, "local", "throughput_gbit_s");
    let remote = metric(&src, &sets, "remote", "throughput_gbit_s");
    assert!(local + remote < 95.0, "{local} + {remote}");
    let alone = metric(
        &source("contention/tcp_rx_pair", Some("remote")),
        &[],
        "local",
        "throughput_gbit_s",
    );
    assert!(alone > 1.2 * local, "local: {alone} alone, {local} beside");
}

#[test]
fn a_tcp_receive_and_memcached_on_one_server_run_in_one_simulation() {
    let src = source("contention/tcp_rx_memcached", None);
    let point = run::sweep(&[]).pop().unwrap();
    let r = run::run_point(&src, &point, 1).unwrap();
    let net = &r.counters["network"];
    assert_eq!(net["rx"]["run_with"], serde_json::json!(["mc"]));
    assert_eq!(net["mc"]["run_with"], serde_json::json!(["rx"]));
    // One memory system: both rows read the server's DRAM counter.
    let rx_mem = metric(&src, &[], "rx", "mem_bw_gbit_s");
    assert_eq!(rx_mem, metric(&src, &[], "mc", "mem_bw_gbit_s"));
    // memcached's 512 KiB SETs take the port, the NIC's links and the server's memory:
    // the receive gets much less of them than alone (memcached idle).
    let beside = metric(&src, &[], "rx", "throughput_gbit_s");
    let alone = metric(
        &src,
        &["workload.mc.instances=0"],
        "rx",
        "throughput_gbit_s",
    );
    assert!(
        beside < 0.7 * alone,
        "{beside} beside memcached, {alone} alone"
    );
    assert!(metric(&src, &[], "mc", "kops") > 5.0);
}

#[test]
fn workloads_run_together_cannot_take_more_cores_than_their_socket_has() {
    let src = source("contention/tcp_rx_memcached", None);
    let sets: Vec<Override> = [
        "workload.rx.cpu_node=0",
        "workload.rx.mem_node=0",
        "workload.rx.connections=10",
    ]
    .iter()
    .map(|s| Override::parse(s).unwrap())
    .collect();
    let e = run::run_point(&src, &run::sweep(&sets).pop().unwrap(), 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("socket 0 of host `server` have 16 connections and instances"),
        "{e}"
    );
}

#[test]
fn remote_rdma_writes_into_a_tcp_receivers_node_slow_it_in_one_simulation_and_local_ones_do_not() {
    let (src, alone) = (
        source("contention/tcp_rx_rdma", None),
        source("contention/tcp_rx_rdma", Some("writes")),
    );
    let point = run::sweep(&[]).pop().unwrap();
    let r = run::run_point(&src, &point, 1).unwrap();
    let net = &r.counters["network"];
    assert_eq!(net["rx"]["run_with"], serde_json::json!(["writes"]));
    assert_eq!(net["writes"]["run_with"], serde_json::json!(["rx"]));
    let rx = |s: &Source, sets: &[&str], m: &str| metric(s, sets, "rx", m);
    let local = ["workload.writes.server_placement=local"];
    let (beside, by_itself) = (
        rx(&src, &[], "throughput_gbit_s"),
        rx(&alone, &[], "throughput_gbit_s"),
    );
    // The WRITEs cross QPI 0 → 1 and land in node 1's DRAM beside the frames, and the
    // receiver copies out of node 1 behind them.
    assert!(
        beside < 0.85 * by_itself,
        "{beside} Gb/s beside the WRITEs, {by_itself} alone"
    );
    // Into node 0 through DDIO they touch nothing the receive uses, to the bit.
    assert_eq!(rx(&src, &local, "throughput_gbit_s"), by_itself);
    // One memory system: the receive's DRAM counter carries the WRITEs' bytes too, beyond
    // its own traffic (scaled to its throughput beside them).
    let own = rx(&alone, &[], "mem_bw_gbit_s") * beside / by_itself;
    let writes = metric(&src, &[], "writes", "throughput_gbyte_s") * 8.0;
    let mem = rx(&src, &[], "mem_bw_gbit_s");
    assert!(
        mem - own > writes,
        "{mem} Gb/s of DRAM, {own} the receive's, {writes} the WRITEs'"
    );
}

#[test]
fn an_rdma_benchmark_in_a_world_names_itself_when_its_host_lacks_the_rnic() {
    let mut src = source("contention/tcp_rx_rdma", None);
    src.text = src.text.replace("rnic = \"rnic\"", "rnic = \"nic\"");
    let point = run::sweep(&[]).pop().unwrap();
    let e = run::run_point(&src, &point, 1).unwrap_err().to_string();
    assert!(
        e.contains("workload `writes`") && e.contains("is not an RNIC"),
        "{e}"
    );
}

#[test]
fn a_tcp_rr_and_a_tcp_receive_on_one_server_run_in_one_simulation_and_the_rr_waits() {
    let src = source("contention/tcp_rr_stream", None);
    let point = run::sweep(&[]).pop().unwrap();
    let r = run::run_point(&src, &point, 1).unwrap();
    assert_eq!(
        r.counters["network"]["rr"]["run_with"],
        serde_json::json!(["rx"])
    );
    let rr = |sets: &[&str]| metric(&src, sets, "rr", "latency_us");
    // From another client, the RR meets the receive on the server's PCIe link and memory:
    // a little slower beside 13 connections than alone (the receive idle).
    let alone = rr(&["workload.rx.connections=0"]);
    let beside = rr(&["workload.rx.connections=13"]);
    assert!(beside > alone, "{beside} beside, {alone} alone");
    assert!(beside < 1.2 * alone, "{beside} beside, {alone} alone");
    // From the stream's own client, its requests also queue behind the stream's frames
    // on that client's port.
    let same_port = rr(&["workload.rr.client=client", "workload.rx.connections=13"]);
    assert!(
        same_port > 5.0 * beside,
        "{same_port} through the stream's port"
    );
}

#[test]
fn apart_runs_each_workload_as_it_runs_without_the_others() {
    let src = source("contention/tcp_rr_stream", None);
    let sets = ["measure.apart=true", "workload.rx.connections=13"];
    let apart = metric(&src, &sets, "rr", "latency_us");
    let alone = metric(
        &source("contention/tcp_rr_stream", Some("rx")),
        &[],
        "rr",
        "latency_us",
    );
    assert_eq!(apart, alone);
    assert!(metric(&src, &sets[1..], "rr", "latency_us") > apart);
    // Each run's counters under its workload's name; the network rows' merged as together.
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let r = run::run_point(&src, &run::sweep(&sets).pop().unwrap(), 1).unwrap();
    for w in ["rr", "rx"] {
        assert!(r.counters["apart"][w].is_object(), "{w}: {}", r.counters);
        assert!(r.counters["network"][w].is_object(), "{w}");
    }
}

#[test]
fn pktgen_on_a_receivers_host_runs_in_its_world_on_one_memory_system() {
    let mut src = source("contention/tcp_rx", Some("stream"));
    src.text.push_str(
        "\n[[workload]]\nname = \"gen\"\nkind = \"pktgen\"\nhost = \"server\"\nnic = \"nic\"\n\
         cpu_node = 1\nmem_node = 1\npkt_bytes = 64\nnic_mode = \"standard\"\n",
    );
    let r = run::run_point(&src, &run::sweep(&[]).pop().unwrap(), 1).unwrap();
    assert_eq!(
        r.counters["network"]["gen"]["run_with"],
        serde_json::json!(["rx"])
    );
    // Both rows read the server's one DRAM counter, which counts both.
    let mem = |w: &str| metric(&src, &[], w, "mem_bw_gbit_s");
    assert_eq!(mem("gen"), mem("rx"));
    assert!(metric(&src, &[], "gen", "mpps") > 1.0);
    // Its core counts with the receive's on their socket.
    let sets = [Override::parse("workload.rx.connections=14").unwrap()];
    let e = run::run_point(&src, &run::sweep(&sets).pop().unwrap(), 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("socket 1 of host `server` have 15 connections and instances"),
        "{e}"
    );
}

#[test]
fn a_receive_the_host_cannot_absorb_pauses_its_sender_instead_of_queueing_without_bound() {
    // Remote beside the antagonist, the host drains frames more slowly than the wire
    // brings them. The NIC's port buffer fills and pauses the client, so the DMA backlog
    // stays a buffer long and the receiving core's reads never wait behind milliseconds
    // of it: each connection count delivers, and more connections never deliver less.
    let src = source("contention/tcp_rx", None);
    let at = |n: u32| {
        let sets = [Override::parse(&format!("workload.rx.connections={n}")).unwrap()];
        let r = run::run_point(&src, &run::sweep(&sets).pop().unwrap(), 1).unwrap();
        let rx = r
            .rows
            .iter()
            .find(|r| r.params["workload"] == "rx")
            .unwrap();
        let gbps = rx.metrics["throughput_gbit_s"].as_f64().unwrap();
        let pauses = r.counters["network"]["rx"]["receiver_nic_pauses"]
            .as_u64()
            .unwrap();
        (gbps, pauses)
    };
    let one = at(1);
    assert!(one.0 > 1.0 && one.1 > 0, "one connection: {one:?}");
    for n in 2..=4 {
        let more = at(n);
        assert!(more.0 >= one.0, "{n} connections: {more:?}, one: {one:?}");
    }
    // Alone, the host keeps up: nothing pauses.
    let alone = source("contention/tcp_rx", Some("stream"));
    let r = run::run_point(&alone, &run::sweep(&[]).pop().unwrap(), 1).unwrap();
    assert_eq!(r.counters["network"]["rx"]["receiver_nic_pauses"], 0);
}
