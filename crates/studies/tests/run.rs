//! `nudma run` on the README's own-hardware example (examples/two_socket_server.toml): two
//! NICs behind one switch share its uplink, cores loading node 0 slow the NVMe's reads of
//! node 0 through the DRAM queue, and a sweep gives the same rows on one worker or two.

use std::path::Path;

use fabric::scenario::Source;
use serde_json::Value;
use studies::run::{self, overrides::Override, PointResult};

fn example() -> Source {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/two_socket_server.toml");
    run::source(path.to_str().unwrap()).unwrap()
}

fn sweep(sets: &[&str], jobs: usize) -> Vec<PointResult> {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    run::run_all(&example(), &run::sweep(&sets), 1, jobs, false).unwrap()
}

fn metric(p: &PointResult, workload: &str, m: &str) -> f64 {
    let row = p
        .rows
        .iter()
        .find(|r| r.params["workload"] == workload)
        .unwrap_or_else(|| panic!("no row for {workload}"));
    row.metrics[m].as_f64().unwrap()
}

/// Bytes per second on a link direction or at a memory node over the window.
fn counter(p: &PointResult, section: &str, name: &str, field: &str) -> f64 {
    let list = p.counters[section].as_array().unwrap();
    let e = list
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list:?}"));
    e[field].as_f64().unwrap() / 200e-6
}

#[test]
fn two_nics_behind_one_switch_share_its_uplink() {
    let p = &sweep(&[], 1)[0];
    assert_eq!(p.rows.len(), 4, "one row per workload");
    let (a, b) = (
        metric(p, "nic0_rx", "throughput_gbyte_s"),
        metric(p, "nic1_rx", "throughput_gbyte_s"),
    );
    let uplink_payload = counter(p, "links", "link srv.sw →", "payload_bytes") / 1e9;
    let uplink_wire = counter(p, "links", "link srv.sw →", "wire_bytes") / 1e9;
    // Gen3 x16: 8 GT/s × 16 lanes × 128/130 = 15.75 GB/s of symbols.
    assert!(
        uplink_wire > 0.98 * 15.75,
        "the uplink is saturated: {uplink_wire}"
    );
    assert!(
        ((a + b) / uplink_payload - 1.0).abs() < 0.02,
        "what the NICs deliver is what the uplink carries: {a} + {b} vs {uplink_payload}"
    );
    // Each NIC's own x16 link could carry what the uplink does; shared, each gets half.
    assert!(
        (a / b - 1.0).abs() < 0.02 && a < 0.55 * uplink_payload,
        "{a} {b}"
    );
    // Every workload moved bytes and lands in node 0's memory.
    let written = counter(p, "memory", "srv DRAM node0", "written_bytes") / 1e9;
    assert!(
        (written / (a + b) - 1.0).abs() < 0.03,
        "{written} vs {}",
        a + b
    );
}

#[test]
fn cores_saturating_node0_slow_the_nvme_reads_of_node0() {
    // The NVMe keeps one 4 KiB read in flight: bound by its round trip, which includes
    // node 0's DRAM queue; the antagonist's cores sit on node 0 itself.
    let points = sweep(
        &[
            "workload.nvme_write.outstanding=1",
            "workload.nvme_write.transfer_bytes=4 KiB",
            "workload.antagonist.cpu_node=0",
            "workload.antagonist.misses_in_flight=1,400",
        ],
        2,
    );
    let (quiet, loaded) = (&points[0], &points[1]);
    let dram = |p: &PointResult| counter(p, "memory", "srv DRAM node0", "read_bytes") / 1e9;
    // Line reads (and the write-backs of the DDIO lines they evict) fill node 0's 60 GB/s.
    assert!(
        dram(loaded) > 0.85 * 60.0,
        "node 0 loaded: {}",
        dram(loaded)
    );
    let miss = |p: &PointResult| metric(p, "antagonist", "latency_ns_p50");
    assert!(
        miss(loaded) > 3.0 * miss(quiet),
        "queued: {} vs {}",
        miss(loaded),
        miss(quiet)
    );
    let (q, l) = (
        metric(quiet, "nvme_write", "throughput_gbyte_s"),
        metric(loaded, "nvme_write", "throughput_gbyte_s"),
    );
    assert!(l < 0.9 * q, "the NVMe slows: {l} vs {q}");
    // Its reads wait in the same DRAM queue as the cores' misses: the NVMe's request
    // latency grows by about what a core's miss does.
    let nvme = |p: &PointResult| metric(p, "nvme_write", "latency_ns_p50");
    let (dn, dc) = (nvme(loaded) - nvme(quiet), miss(loaded) - miss(quiet));
    assert!((dn / dc - 1.0).abs() < 0.3, "NVMe +{dn} ns, cores +{dc} ns");
    // The NICs' posted writes into the LLC (DDIO) keep their rate.
    let nic = |p: &PointResult| metric(p, "nic0_rx", "throughput_gbyte_s");
    assert!((nic(loaded) / nic(quiet) - 1.0).abs() < 0.02);
    assert_eq!(
        points[1].rows[3].params["workload.antagonist.misses_in_flight"],
        Value::from(400)
    );
}

#[test]
fn a_sweep_gives_one_row_per_value_the_same_on_one_worker_or_two() {
    let sets = [
        "workload.nic0_rx.outstanding=1,4,32",
        "host.srv.device.nic1.link.width=8,16",
    ];
    let one = sweep(&sets, 1);
    let two = sweep(&sets, 2);
    assert_eq!(one.len(), 6);
    let rows = |r: &[PointResult]| -> Vec<Value> {
        r.iter()
            .map(|p| studies::report::results_json(&p.rows, &[])["results"].clone())
            .collect()
    };
    assert_eq!(rows(&one), rows(&two));
    // More requests in flight, no less throughput; a narrower link, no more.
    let g = |i: usize| metric(&one[i], "nic0_rx", "throughput_gbyte_s");
    assert!(g(0) < g(2) && g(2) <= g(4), "{} {} {}", g(0), g(2), g(4));
    let nic1 = |i: usize| metric(&one[i], "nic1_rx", "throughput_gbyte_s");
    assert!(nic1(4) < nic1(5) || (nic1(4) - nic1(5)).abs() < 1e-9);
}

#[test]
fn a_platform_key_in_an_include_sweeps_too() {
    // Cores on node 0 saturate node 0's DRAM, whatever bandwidth the platform gives it.
    let points = sweep(
        &[
            "workload.antagonist.cpu_node=0",
            "workload.antagonist.misses_in_flight=400",
            "platform.r730.timing.dram_gbps=30,60",
        ],
        2,
    );
    let dram = |p: &PointResult| counter(p, "memory", "srv DRAM node0", "read_bytes") / 1e9;
    let (slow, fast) = (dram(&points[0]), dram(&points[1]));
    assert!(slow < 30.0 && slow > 0.8 * 30.0, "{slow}");
    assert!(fast < 60.0 && fast > 0.8 * 60.0, "{fast}");
}

/// The error of running the example with one override.
fn error_with(set: &str) -> String {
    let point = &run::sweep(&[Override::parse(set).unwrap()])[0];
    run::run_point(&example(), point, 1)
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_overrides_and_workloads_are_named() {
    let e = error_with("host.srv.device.nic7.link.width=8");
    assert!(e.contains("no `host.srv.device` entry named `nic7`"), "{e}");
    let e = error_with("workload.nic0_rx.device=srv.gpu");
    assert!(e.contains("srv.gpu"), "{e}");
    assert!(e.contains("two_socket_server.toml"), "located: {e}");
    let e = error_with("host.srv.device.nic0.link.width=0");
    assert!(e.contains("width"), "{e}");
    let e = error_with("workload.nic0_rx.transfer_bytes=1 GiB");
    assert!(e.contains("within 4 GiB"), "{e}");
}

/// Two hosts' PXH810s back to back, the borrower's engine copying 8 MiB to the lender.
const NTB_COPY: &str = r#"
include = ["platforms/smartio.toml"]
[scenario]
name = "copy"
[[host]]
name = "lender"
platform = "smartio_host"
mps_bytes = 128
[[host.ntb]]
name = "ntb"
adapter = "pxh810"
parent = "rc0"
[[host]]
name = "borrower"
platform = "smartio_host"
mps_bytes = 128
[[host.ntb]]
name = "ntb"
adapter = "pxh810"
parent = "rc0"
[[cable]]
ends = ["borrower.ntb", "lender.ntb"]
link = { gen = 3, width = 8 }
[[workload]]
name = "copy"
kind = "ntb_copy"
ntb = "borrower.ntb"
source = "borrower.ram"
source_offset = "1 GiB"
target = "lender.ram"
offset = "1 GiB"
transfer_bytes = "8 MiB"
outstanding = 1
[measure]
warmup = "100 us"
duration = "5 ms"
"#;

/// The same copy through `nudma run` and through the catalog's `smartio.ntb_dma`: one
/// engine, one answer (the experiment adds the engine's set-up time, small at 8 MiB).
#[test]
fn an_ntb_copy_workload_agrees_with_the_ntb_dma_experiment() {
    let text = NTB_COPY;

    let src = Source {
        name: "copy.toml".into(),
        text: text.into(),
    };
    let p = run::run_point(&src, &run::sweep(&[])[0], 1).unwrap();
    let run_gbps = metric(&p, "copy", "throughput_gbyte_s");
    let catalog = studies::experiment::run_builtin("smartio.ntb_dma").unwrap();
    let row = catalog
        .iter()
        .find(|r| r.params["bytes"] == 8u64 << 20)
        .unwrap();
    let exp = row.metrics["write_gbps"].as_f64().unwrap();
    assert!(
        (run_gbps / exp - 1.0).abs() < 0.01,
        "run {run_gbps} vs experiment {exp}"
    );
}

/// `[measure] once = true` times each copy alone, from the engine's set-up to its end:
/// the 8 MiB copy's rate is the windowed one's less the set-up's share, a 4 KiB copy is
/// mostly set-up, and `throughput_gbyte_s` is the copy's bytes over its `ns`.
#[test]
fn a_copy_timed_once_pays_its_set_up_once() {
    let once = NTB_COPY.replace(
        "[measure]\nwarmup = \"100 us\"\nduration = \"5 ms\"",
        "[measure]\nonce = true",
    );
    assert_ne!(once, NTB_COPY);
    let run_text = |text: &str, sets: &[&str]| {
        let src = Source {
            name: "copy.toml".into(),
            text: text.into(),
        };
        let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        run::run_point(&src, &run::sweep(&sets)[0], 1)
    };
    let windowed = metric(
        &run_text(NTB_COPY, &[]).unwrap(),
        "copy",
        "throughput_gbyte_s",
    );
    let big = run_text(&once, &[]).unwrap();
    let (gbps, ns) = (
        metric(&big, "copy", "throughput_gbyte_s"),
        metric(&big, "copy", "ns"),
    );
    assert!(
        (gbps - (8u64 << 20) as f64 / ns).abs() < 1e-9 * gbps,
        "{gbps} GB/s, {ns} ns"
    );
    assert!(
        gbps < windowed && gbps > 0.95 * windowed,
        "once {gbps}, windowed {windowed}"
    );
    let small = run_text(&once, &["workload.copy.transfer_bytes=4 KiB"]).unwrap();
    let small_gbps = metric(&small, "copy", "throughput_gbyte_s");
    assert!(
        small_gbps < 0.5 * gbps,
        "4 KiB {small_gbps} GB/s, 8 MiB {gbps}"
    );

    let err = |text: &str, sets: &[&str]| run_text(text, sets).unwrap_err().to_string();
    let e = err(&once, &["workload.copy.outstanding=2"]);
    assert!(e.contains("one copy outstanding, not 2"), "{e}");
    let e = err(
        &once.replace("once = true", "once = true\nwarmup = \"1 us\""),
        &[],
    );
    assert!(e.contains("takes no `warmup` or `duration`"), "{e}");
    let e = err(
        &NTB_COPY.replace("kind = \"ntb_copy\"", "kind = \"gpu_copy\""),
        &[],
    );
    assert!(e.contains("time it with [measure] once = true"), "{e}");
    let e = err(
        &once.replace("kind = \"ntb_copy\"", "kind = \"netperf\""),
        &[],
    );
    assert!(e.contains("runs over a window"), "{e}");
}

/// Two GPUs behind one switch of the three-way testbed's user: a copy straight into B's
/// memory turns at the switch (no root) and beats one staged through the user's RAM
/// (through the root, twice the DMA); a CPU store to the user's own RAM crosses no NTB,
/// one to a lender's RAM does, and takes longer by at least that span.
#[test]
fn gpu_pairs_and_cpu_stores_are_timed_once() {
    let base = run::source("smartio_three_way").unwrap();
    let pair = |name: &str, via: &str| {
        format!(
            "[[workload]]\nname = \"{name}\"\nkind = \"gpu_p2p\"\na = \"user.gpu0\"\n\
             b = \"user.gpu1\"\nuser = \"user\"\nvia = \"{via}\"\ntransfer_bytes = \"1 MiB\"\n"
        )
    };
    let store = |name: &str, target: &str| {
        format!(
            "[[workload]]\nname = \"{name}\"\nkind = \"cpu_store\"\nhost = \"user\"\n\
             target = \"{target}\"\noffset = \"1 MiB\"\n"
        )
    };
    let src = Source {
        name: "three_way_once.toml".into(),
        text: format!(
            "{}\n{}{}{}{}[measure]\nonce = true\n",
            base.text,
            pair("p2p", "p2p"),
            pair("ram", "ram"),
            store("local", "user.ram"),
            store("remote", "lender1.ram"),
        ),
    };
    let p = run::run_point(&src, &run::sweep(&[])[0], 1).unwrap();
    let m = |w: &str, k: &str| metric(&p, w, k);
    assert_eq!((m("p2p", "roots"), m("ram", "roots")), (0.0, 1.0));
    assert!(
        m("p2p", "throughput_gbyte_s") > m("ram", "throughput_gbyte_s"),
        "{:?}",
        p.rows
    );
    assert!(m("p2p", "hops") < m("ram", "hops"), "{:?}", p.rows);
    assert!(
        m("p2p", "pingpong_ns") < m("ram", "pingpong_ns"),
        "{:?}",
        p.rows
    );
    assert_eq!(m("local", "ntb_span_ns"), 0.0);
    let (span, remote, local) = (
        m("remote", "ntb_span_ns"),
        m("remote", "ns"),
        m("local", "ns"),
    );
    assert!(
        span > 0.0 && remote > local + span,
        "{remote} vs {local} + {span}"
    );
}

/// A distributed-driver client on the borrower of the MXS824 testbed: its SQ in its own
/// RAM is fetched by the controller across the switch (more hops) and answers later than
/// one in the lender's RAM beside the controller; a block-driver series has no `sq`.
#[test]
fn qd1_reads_are_timed_once_and_their_sq_placement_shows() {
    let base = run::source("smartio_chassis_mxs824").unwrap();
    let reads = |name: &str, sq: &str| {
        format!(
            "[[workload]]\nname = \"{name}\"\nkind = \"nvme_qd1\"\ndriver = \"dist\"\n\
             host = \"borrower\"\ndevice = \"lender.nvme\"\nsq = \"{sq}\"\nios = 200\n"
        )
    };
    let text = format!(
        "{}\n{}{}[measure]\nonce = true\n",
        base.text,
        reads("near_cpu", "borrower_ram"),
        reads("near_device", "lender_ram")
    );
    let src = Source {
        name: "qd1.toml".into(),
        text,
    };
    let iommu = [Override::parse("host.borrower.iommu=true").unwrap()];
    let p = run::run_point(&src, &run::sweep(&iommu)[0], 1).unwrap();
    let m = |w: &str, k: &str| metric(&p, w, k);
    assert!(
        m("near_cpu", "read_hops") > m("near_device", "read_hops"),
        "{:?}",
        p.rows
    );
    assert!(
        m("near_cpu", "median_us") > m("near_device", "median_us"),
        "{:?}",
        p.rows
    );
    let blk = Source {
        name: "qd1.toml".into(),
        text: src
            .text
            .replacen("driver = \"dist\"", "driver = \"blk\"", 1),
    };
    let e = run::run_point(&blk, &run::sweep(&[])[0], 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`sq` is for driver = \"dist\"") && e.contains("workload.near_cpu.sq"),
        "{e}"
    );
}

/// Two hosts of the 60-host cluster sharing h00's NVMe through the distributed driver:
/// both get a queue pair, and with twice the QD-1 clients the controller completes more
/// reads; a placement that names no BAR is refused where it is written.
#[test]
fn clients_sharing_an_nvme_each_get_a_queue_pair_and_add_up() {
    let base = run::source("smartio_cluster60").unwrap();
    let text = format!(
        "{}\n[[workload]]\nname = \"share\"\nkind = \"nvme_share\"\ndevice = \"h00.nvme\"\n\
         clients = 1\n[measure]\nwarmup = \"50 us\"\nduration = \"500 us\"\n",
        base.text
    );
    let src = Source {
        name: "share.toml".into(),
        text,
    };
    let sets = [Override::parse("workload.share.clients=1,2").unwrap()];
    let pts = run::run_all(&src, &run::sweep(&sets), 1, 1, false).unwrap();
    let (one, two) = (&pts[0], &pts[1]);
    assert_eq!(metric(two, "share", "clients_ok"), 2.0);
    let (k1, k2) = (
        metric(one, "share", "total_kiops"),
        metric(two, "share", "total_kiops"),
    );
    assert!(k2 > 1.5 * k1, "1 client {k1} kIOPS, 2 clients {k2}");
    assert_eq!(two.rows[0].metrics["error"], Value::Null);
    let bad = [Override::parse("workload.share.sq=gpu").unwrap()];
    let e = run::run_all(&src, &run::sweep(&bad), 1, 1, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sq = `gpu`") && e.contains("workload.share.sq"),
        "{e}"
    );
}

/// A two-path client of the dual-path testbed under the scenario's own fault: its primary
/// link down for 200 µs from 200 µs after its start. Every I/O completes or is reported,
/// no acknowledged write is lost, no byte differs; a once run whose other workload has no
/// timeline for the fault is refused.
#[test]
fn a_failover_client_meets_the_scenarios_fault() {
    let base = run::source("smartio_dual_path").unwrap();
    let text = format!(
        "{}\n[[fault]]\nname = \"primary\"\nat = \"200 us\"\nkind = \"link_down\"\n\
         target = \"borrower.ntb0\"\nduration = \"200 us\"\n\
         [[workload]]\nname = \"client\"\nkind = \"nvme_failover\"\nborrower = \"borrower\"\n\
         device = \"lender.nvme\"\nadapters = [\"ntb0\", \"ntb1\"]\nmode = \"flap\"\nios = 400\n\
         [measure]\nonce = true\n",
        base.text
    );
    let src = Source {
        name: "failover.toml".into(),
        text: text.clone(),
    };
    let p = run::run_point(&src, &run::sweep(&[])[0], 1).unwrap();
    let m = |k: &str| metric(&p, "client", k);
    assert_eq!(m("ios_completed") + m("ios_failed_reported"), 400.0);
    assert_eq!((m("acked_writes_lost"), m("bytes_corrupted")), (0.0, 0.0));
    assert!(m("recovery_us") > 0.0, "the failure was met: {:?}", p.rows);
    let with_store = Source {
        name: "failover.toml".into(),
        text: text.replace(
            "[measure]",
            "[[workload]]\nname = \"store\"\nkind = \"cpu_store\"\nhost = \"borrower\"\n\
             target = \"borrower.ram\"\n[measure]",
        ),
    };
    let e = run::run_point(&with_store, &run::sweep(&[])[0], 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("only nvme_failover takes them"), "{e}");
}

#[test]
fn stream_cores_add_up_and_stop_at_the_socket() {
    // Two cores with 10 misses each are two cores' worth of bandwidth, as long as node 0's
    // DRAM has room (≈ 20 GB/s of 60); none is an idle row, not an error.
    let points = sweep(&["workload.antagonist.cores=0,1,2"], 1);
    let g: Vec<f64> = points
        .iter()
        .map(|p| metric(p, "antagonist", "throughput_gbyte_s"))
        .collect();
    assert_eq!(g[0], 0.0);
    assert!(g[1] > 1.0 && (g[2] / g[1] - 2.0).abs() < 0.05, "{g:?}");
    let sets = [Override::parse("workload.antagonist.cores=200").unwrap()];
    let e = run::run_point(&example(), &run::sweep(&sets)[0], 1).unwrap_err();
    assert!(
        e.0.contains("(with --set):75:1: cores 200: host `srv` has 14 cores per socket"),
        "{e}"
    );
}

#[test]
fn an_interconnect_links_transfer_rate_sets_its_bandwidth() {
    // The antagonist's cores on node 1 stream node 0's memory across QPI: at 2.5 GT/s
    // (2 links × 2 B × 2.5 = 10 GB/s per direction) it is bound by the link, at 16 GT/s
    // by its misses in flight.
    let points = sweep(
        &[
            "platform.r730.interconnect.0.gts=2.5,16",
            "workload.antagonist.misses_in_flight=40",
        ],
        1,
    );
    let g: Vec<f64> = points
        .iter()
        .map(|p| metric(p, "antagonist", "throughput_gbyte_s"))
        .collect();
    assert!(g[0] < 10.0 && g[1] > 1.2 * g[0], "{g:?}");
    let qpi = |p: &PointResult| counter(p, "links", "srv pkg0-pkg1 →", "wire_bytes") / 1e9;
    assert!(qpi(&points[0]) <= 10.0 * 1.001, "{}", qpi(&points[0]));
}

#[test]
fn a_devices_line_and_media_rates_bound_its_dma() {
    // nic0 alone on a root port: its Gen3 x16 link would carry ≈ 14.6 GB/s of 4 KiB
    // writes, its 100 GbE port receives 12.5. The P4800X's x4 link would carry ≈ 3.6 GB/s
    // either way; its media read (what it writes to the host) 2.4 GB/s, its media write
    // (what it reads from the host) 2.0.
    let points = sweep(
        &[
            "host.srv.device.nic0.parent=rc0",
            "workload.nvme_write.op=read,write",
        ],
        1,
    );
    for p in &points {
        let nic = metric(p, "nic0_rx", "throughput_gbyte_s");
        assert!(nic <= 12.5 * 1.001 && nic > 0.98 * 12.5, "line rate: {nic}");
    }
    let media = |p: &PointResult| metric(p, "nvme_write", "throughput_gbyte_s");
    let (reads_host, writes_host) = (media(&points[0]), media(&points[1]));
    assert!(
        reads_host <= 2.0 * 1.001 && reads_host > 0.95 * 2.0,
        "media writes: {reads_host}"
    );
    assert!(
        writes_host <= 2.4 * 1.001 && writes_host > 0.95 * 2.4,
        "media reads: {writes_host}"
    );
}

#[test]
fn dma_latency_counts_the_wait_so_littles_law_holds() {
    // A request's latency runs from when it entered the device's queue (the previous one
    // in its slot done), so ops/s × latency is the requests outstanding — whether the
    // link, the port or nothing holds them back.
    let points = sweep(
        &[
            "workload.nic0_rx.transfer_bytes=64 B",
            "workload.nic0_rx.outstanding=1,32",
            "workload.nvme_write.transfer_bytes=4 KiB",
            "workload.nvme_write.outstanding=1,32",
        ],
        2,
    );
    for p in &points {
        for (w, key) in [
            ("nic0_rx", "workload.nic0_rx.outstanding"),
            ("nvme_write", "workload.nvme_write.outstanding"),
        ] {
            let n = p.rows[0].params[key].as_f64().unwrap();
            let little = metric(p, w, "ops_per_sec") * metric(p, w, "latency_ns_p50") * 1e-9;
            assert!(
                (little / n - 1.0).abs() < 0.2,
                "{w} at {n} outstanding: ops/s × p50 = {little}"
            );
        }
    }
}

#[test]
fn a_current_server_written_as_a_copy_runs_within_its_devices() {
    // examples/current_server.toml: the built-in Sapphire Rapids platform with two keys
    // changed, and today's device models.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/current_server.toml");
    let src = run::source(path.to_str().unwrap()).unwrap();
    let p = &run::run_all(&src, &run::sweep(&[]), 1, 1, false).unwrap()[0];
    // ConnectX-7: its 400 GbE port; PM1743: its 13 GB/s media reads; H100: its Gen5 x16
    // link (≈ 63 GB/s of symbols, 512 B reads in 256 B completions), not UPI's 128.
    let g = |w: &str| metric(p, w, "throughput_gbyte_s");
    assert!((g("nic_rx") / 50.0 - 1.0).abs() < 0.01, "{}", g("nic_rx"));
    assert!(
        (g("ssd_read") / 13.0 - 1.0).abs() < 0.01,
        "{}",
        g("ssd_read")
    );
    assert!(
        g("gpu_h2d") > 50.0 && g("gpu_h2d") < 63.0,
        "{}",
        g("gpu_h2d")
    );
}

/// Every field names its unit: a `dma` row's `throughput_gbyte_s` is 10^9 bytes per
/// second, the bytes of its completed transfers over the window; a TCP_STREAM row's
/// `throughput_gbit_s` is 10^9 bits per second, its delivered bytes × 8 over the window
/// (with no warm-up the run's `bytes_delivered` counter is the window's). No row gives a
/// bandwidth in a field that does not say which.
#[test]
fn a_rows_bandwidth_fields_name_their_unit_and_agree_with_the_bytes_moved() {
    let mut src = run::source("contention/tcp_rx").unwrap();
    src.text.truncate(src.text.find("[[workload]]").unwrap());
    src.text.push_str(
        r#"
[[workload]]
name = "rx"
kind = "netperf"
test = "TCP_STREAM"
direction = "rx"
msg_bytes = "64 KiB"
connections = 1
server = "server"
client = "client"
nic = "nic"
cpu_node = 0
mem_node = 0
nic_mode = "standard"
netdev_pf = 0

[[workload]]
name = "dma"
kind = "dma"
device = "server.nic"
target = "server.ram.node0"
op = "write"
transfer_bytes = "4 KiB"
outstanding = 16

[measure]
warmup = "0 us"
duration = "1 ms"
"#,
    );
    let p = run::run_point(&src, &Vec::new(), 1).unwrap();
    let window = 1e-3;
    let fields = |w: &str| -> Vec<String> {
        let row = p.rows.iter().find(|r| r.params["workload"] == w).unwrap();
        row.metrics.keys().cloned().collect()
    };
    let rates = |w: &str| -> Vec<String> {
        fields(w)
            .into_iter()
            .filter(|f| f.contains("gb") || f.contains("bps"))
            .collect()
    };
    assert_eq!(rates("dma"), ["throughput_gbyte_s"], "{:?}", fields("dma"));
    assert_eq!(
        rates("rx"),
        ["mem_bw_gbit_s", "throughput_gbit_s"],
        "{:?}",
        fields("rx")
    );

    // GB/s: the DMA's completed 4 KiB writes over the window (the field is rounded to
    // 1 MB/s and may count a transfer under way).
    let gbyte_s = metric(&p, "dma", "throughput_gbyte_s");
    let done = metric(&p, "dma", "ops_per_sec") * window * 4096.0;
    assert!(
        (gbyte_s * 1e9 * window - done).abs() <= 4096.0 + 0.0005e9 * window,
        "{gbyte_s} GB/s vs {done} bytes in 1 ms"
    );
    // The NIC's 100 GbE port caps it at 12.5 GB/s: the same number in bits would be 100.
    assert!(gbyte_s > 10.0 && gbyte_s <= 12.5, "{gbyte_s}");

    // Gb/s: the receiver's delivered bytes, × 8.
    let gbit_s = metric(&p, "rx", "throughput_gbit_s");
    let delivered = p.counters["network"]["rx"]["bytes_delivered"]
        .as_f64()
        .unwrap();
    assert!(delivered > 0.0);
    assert!(
        (gbit_s - delivered * 8.0 / window / 1e9).abs() < 1e-9 * gbit_s,
        "{gbit_s} Gb/s vs {delivered} bytes in 1 ms"
    );
}
