//! Network workloads that share a model of their hosts in one `nudma run`: memcached
//! workloads on one server, and the PageRank victim inside the model of its host, on
//! examples/own_server_network.toml's hardware.

use fabric::scenario::Source;
use studies::run::{self, PointResult};

/// The example's hardware with `workloads` (TOML) and a short window.
fn run_with(workloads: &str) -> Result<PointResult, String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/own_server_network.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let hw = &text[..text.find("[[workload]]").unwrap()];
    let src = Source {
        name: "own.toml".into(),
        text: format!("{hw}\n{workloads}\n[measure]\nwarmup = \"2 ms\"\nduration = \"2 ms\"\n"),
    };
    run::run_point(&src, &Vec::new(), 1).map_err(|e| e.0)
}

fn memcached(name: &str, cpu_node: u32, instances: u32) -> String {
    format!(
        "[[workload]]\nname = \"{name}\"\nkind = \"memcached\"\nserver = \"conan\"\n\
         client = \"client\"\nnic = \"octonic\"\nclient_nic = \"nic\"\ncpu_node = {cpu_node}\n\
         mem_node = {cpu_node}\nnic_mode = \"standard\"\nnetdev_pf = {cpu_node}\n\
         value_bytes = \"16 KiB\"\nclients = 4\nseed = 3\ninstances = {instances}\n"
    )
}

const VICTIM: &str = "[[workload]]\nname = \"victim\"\nkind = \"pagerank\"\nhost = \"conan\"\n\
                      threads_per_socket = 4\nwarmup = \"1 ms\"\nseed = 7\n";

fn metric(p: &PointResult, w: &str, m: &str) -> f64 {
    let r = p
        .rows
        .iter()
        .find(|r| r.params["workload"] == w)
        .unwrap_or_else(|| panic!("no row {w}"));
    r.metrics[m]
        .as_f64()
        .unwrap_or_else(|| panic!("{w}: no {m} in {:?}", r.metrics))
}

#[test]
fn memcached_workloads_on_one_server_are_the_instances_of_one_model() {
    let one = run_with(&memcached("both", 0, 2)).unwrap();
    let two = run_with(&(memcached("a", 0, 1) + &memcached("b", 0, 1))).unwrap();
    let sum = metric(&two, "a", "kops") + metric(&two, "b", "kops");
    assert!(metric(&one, "both", "kops") > 1.0);
    assert!(
        (sum / metric(&one, "both", "kops") - 1.0).abs() < 1e-12,
        "{sum} vs {}",
        metric(&one, "both", "kops")
    );
    // They share the server's memory system: its traffic is each row's.
    assert_eq!(
        metric(&two, "a", "mem_bw_gbit_s"),
        metric(&two, "b", "mem_bw_gbit_s")
    );
    let net = &two.counters["network"];
    assert_eq!(net["a"]["run_with"], serde_json::json!(["b"]));
    // An idle one has no instance and moves nothing.
    let idle = run_with(&(memcached("a", 0, 1) + &memcached("off", 1, 0))).unwrap();
    assert_eq!(metric(&idle, "off", "throughput_gbit_s"), 0.0);
    assert_eq!(
        metric(&idle, "a", "kops"),
        metric(&run_with(&memcached("a", 0, 1)).unwrap(), "a", "kops")
    );
}

#[test]
fn the_victim_runs_inside_the_model_of_its_host_and_the_io_slows_it() {
    let alone = run_with(VICTIM).unwrap();
    let beside = run_with(&format!("{VICTIM}\n{}", memcached("mc", 0, 4))).unwrap();
    let (a, b) = (
        metric(&alone, "victim", "edges_per_s"),
        metric(&beside, "victim", "edges_per_s"),
    );
    assert!(b < a, "beside memcached {b} vs alone {a}");
    assert_eq!(
        beside.counters["network"]["victim"]["run_with"],
        serde_json::json!(["mc"])
    );
    assert_eq!(beside.counters["network"]["mc"]["victim"], "victim");
}

#[test]
fn ping_pongs_and_pktgen_carry_the_victim_of_their_server_and_antagonists_cannot() {
    let rr = "[[workload]]\nname = \"rr\"\nkind = \"netperf\"\ntest = \"TCP_RR\"\nmsg_bytes = 64\n\
              server = \"conan\"\nclient = \"client\"\nnic = \"octonic\"\nclient_nic = \"nic\"\n\
              cpu_node = 0\nmem_node = 0\nnic_mode = \"standard\"\n";
    let udp = rr.replace("name = \"rr\"", "name = \"udp\"").replace(
        "kind = \"netperf\"\ntest = \"TCP_RR\"",
        "kind = \"udp_pingpong\"",
    );
    // Each runs in the world of its server, the victim beside it.
    for (name, w) in [("rr", rr), ("udp", udp.as_str())] {
        let both = run_with(&format!("{VICTIM}\n{w}")).unwrap();
        assert_eq!(both.counters["network"][name]["victim"], "victim");
        assert_eq!(
            both.counters["network"]["victim"]["run_with"],
            serde_json::json!([name])
        );
        assert!(metric(&both, name, "latency_us") > 0.0);
    }
    // pktgen too; a ping-pong with STREAM antagonists of its own runs alone and cannot.
    let pktgen = "[[workload]]\nname = \"pktgen\"\nkind = \"pktgen\"\nhost = \"conan\"\n\
                  nic = \"octonic\"\ncpu_node = 0\nmem_node = 0\npkt_bytes = 64\n\
                  nic_mode = \"standard\"\n";
    let both = run_with(&format!("{VICTIM}\n{pktgen}")).unwrap();
    assert_eq!(both.counters["network"]["pktgen"]["victim"], "victim");
    let loaded = format!("{udp}stream_pairs = 2\nstream_node = 1\n");
    let e = run_with(&format!("{VICTIM}\n{loaded}")).unwrap_err();
    assert!(
        e.contains(
            "workload `victim`: a pagerank on `conan` runs beside a TCP_STREAM, TCP_RR, UDP, \
             pktgen or memcached model"
        ),
        "{e}"
    );
    assert!(
        e.contains("the `udp_pingpong` workload `udp` serving `conan` cannot carry it"),
        "{e}"
    );
    let e = run_with(&format!(
        "{VICTIM}\n{}",
        VICTIM.replace("\"victim\"", "\"second\"")
    ))
    .unwrap_err();
    assert!(
        e.contains("workload `second`: host `conan` already runs the pagerank `victim`"),
        "{e}"
    );
    let e = run_with(&VICTIM.replace("\"1 ms\"", "\"3 ms\"")).unwrap_err();
    assert!(
        e.contains("warmup 3 ms: longer than the run's warm-up (2 ms)"),
        "{e}"
    );
}
