//! Experiment files whose metrics name their own `[[workload]]`s (`nudma run`'s schema):
//! each point runs the workloads with the config's vars and the swept values substituted,
//! exactly as `nudma run` runs them; bad metrics are located errors.

use fabric::scenario::Source;
use serde_json::Value;
use studies::experiment::Experiment;

/// The README's two-socket server without its workloads: hardware only.
fn server_scenario(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/two_socket_server.toml"),
    )
    .unwrap();
    let hw = &text[..text.find("[[workload]]").unwrap()];
    let path = dir.join("srv.toml");
    std::fs::write(&path, hw).unwrap();
    path.display().to_string()
}

fn experiment(scenario: &str, metrics: &str) -> String {
    format!(
        r#"[experiment]
id = "user.nic_rx"
description = "a NIC's receive DMA into either node"
window = "20 us warm-up, 200 us"
x = "bytes"
plot = ["gbps"]

[sweep]
bytes = [4096, 65536]

[[config]]
name = "node0"
scenario = "{scenario}"
vars = {{ node = "0", depth = "32" }}

[[config]]
name = "node1"
scenario = "{scenario}"
vars = {{ node = "1", depth = "32" }}

[[workload]]
name = "rx"
kind = "dma"
device = "srv.nic0"
target = "srv.ram.node{{node}}"
op = "write"
transfer_bytes = "{{bytes}}"
outstanding = "{{depth}}"     # a whole-number placeholder is a number

[measure]
warmup = "20 us"
duration = "200 us"
{metrics}"#
    )
}

const METRICS: &str = r#"
[[metric]]
name = "gbps"
workload = "rx"
field = "throughput_gbyte_s"

[[metric]]
name = "p99_ns"
workload = "rx"
field = "latency_ns_p99"
"#;

fn parse(text: &str) -> Result<Experiment, String> {
    Experiment::parse(&Source {
        name: "x.toml".into(),
        text: text.into(),
    })
    .map_err(|e| e.0)
}

/// What `nudma run` gives for the same workload written out by hand.
fn run_alone(scenario: &str, node: &str, bytes: u64) -> serde_json::Map<String, Value> {
    let hw = std::fs::read_to_string(scenario).unwrap();
    let text = format!(
        "{hw}\n[[workload]]\nname = \"rx\"\nkind = \"dma\"\ndevice = \"srv.nic0\"\n\
         target = \"srv.ram.node{node}\"\nop = \"write\"\ntransfer_bytes = {bytes}\n\
         outstanding = 32\n\n[measure]\nwarmup = \"20 us\"\nduration = \"200 us\"\n"
    );
    let src = Source {
        name: "by_hand.toml".into(),
        text,
    };
    let r = studies::run::run_point(&src, &Vec::new(), 1).unwrap();
    r.rows[0].metrics.clone()
}

#[test]
fn each_point_runs_the_workloads_with_its_values_as_nudma_run_runs_them() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = server_scenario(dir.path());
    let e = parse(&experiment(&scenario, METRICS)).unwrap();
    // Each metric's unit is the one its field names, whatever the metric's own name.
    assert_eq!(e.info.unit("gbps"), Some("GB/s"));
    assert_eq!(e.info.unit("p99_ns"), Some("ns"));
    let rows = e.run(&[]).unwrap();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        let node = &r.config["node".len()..];
        let bytes = r.params["bytes"].as_u64().unwrap();
        let alone = run_alone(&scenario, node, bytes);
        assert_eq!(r.metrics["gbps"], alone["throughput_gbyte_s"], "{r:?}");
        assert_eq!(r.metrics["p99_ns"], alone["latency_ns_p99"], "{r:?}");
        assert!(r.metrics["gbps"].as_f64().unwrap() > 1.0, "{r:?}");
    }
    // The swept size reached the workload: 64 KiB requests take longer than 4 KiB ones.
    let p99 = |cfg: &str, b: u64| {
        rows.iter()
            .find(|r| r.config == cfg && r.params["bytes"] == b)
            .unwrap()
            .metrics["p99_ns"]
            .as_f64()
            .unwrap()
    };
    assert!(p99("node0", 65536) > 4.0 * p99("node0", 4096));
}

#[test]
fn bad_workload_metrics_are_located_and_named() {
    let exp = |metrics: &str| experiment("srv.toml", metrics);
    let line_of =
        |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;

    let t =
        exp("\n[[metric]]\nname = \"gbps\"\nworkload = \"tx\"\nfield = \"throughput_gbyte_s\"\n");
    let e = parse(&t).unwrap_err();
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "workload = \"tx\""))),
        "{e}"
    );
    assert!(
        e.ends_with("metric `gbps`: no [[workload]] named `tx` in this file (there are: rx)"),
        "{e}"
    );

    let e = parse(&exp("\n[[metric]]\nname = \"gbps\"\nworkload = \"rx\"\n")).unwrap_err();
    assert!(e.contains("name the workload's metric with `field"), "{e}");

    let t = exp("\n[[metric]]\nname = \"gbps\"\nworkload = \"rx\"\nfield = \"throughput_gbyte_s\"\nargs = { a = \"b\" }\n");
    assert!(parse(&t).unwrap_err().contains("unknown field `args`"));

    let t =
        exp("\n[[metric]]\nname = \"gbps\"\nworkload = \"rx\"\ncounter = \"interconnect_util\"\n");
    assert!(parse(&t)
        .unwrap_err()
        .contains("name a `workload` of this file or a run `counter` (one of them)"));

    // A field by its name before units were in the names: refused before anything runs,
    // located at the field, saying what the fields are called now.
    for old in ["gbps", "throughput_gbps", "mem_bw_gbps"] {
        let t = exp(&format!(
            "\n[[metric]]\nname = \"gbps\"\nworkload = \"rx\"\nfield = \"{old}\"\n"
        ));
        let e = parse(&t).unwrap_err();
        assert!(
            e.starts_with(&format!("x.toml:{}:", line_of(&t, "field = "))),
            "{e}"
        );
        assert!(
            e.contains(&format!("no workload gives a field `{old}`"))
                && e.contains("`…_gbit_s` for Gb/s")
                && e.contains("`…_gbyte_s` for GB/s"),
            "{e}"
        );
    }

    let t = exp(METRICS).replace("[measure]\nwarmup = \"20 us\"\nduration = \"200 us\"\n", "");
    assert!(parse(&t).unwrap_err().contains("need its [measure] window"));

    // A placeholder in a workload that is neither a var nor swept, located at the metric.
    let t = exp(METRICS).replace("srv.ram.node{node}", "srv.ram.node{numa}");
    let e = parse(&t).unwrap_err();
    assert!(
        e.contains("`{numa}` in its workloads is neither a swept parameter"),
        "{e}"
    );
}

#[test]
fn a_workload_field_nothing_gives_is_named_with_what_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = server_scenario(dir.path());
    let t = experiment(
        &scenario,
        "\n[[metric]]\nname = \"mpps\"\nworkload = \"rx\"\nfield = \"mpps\"\n",
    );
    let e = parse(&t).unwrap().run(&[]).unwrap_err().0;
    assert!(
        e.contains("metric `mpps`: the workloads gave no metric `rx.mpps`"),
        "{e}"
    );
    assert!(e.contains("rx.throughput_gbyte_s"), "{e}");
}

/// A config's `set` reaches its workloads also where the key is in an included file: the
/// R730's `ddio_ways` lives in `platforms/r730.toml`, included by `ioctopus_r730`.
#[test]
fn a_config_set_in_an_included_platform_reaches_the_workloads() {
    let text = r#"[experiment]
id = "user.ddio"
description = "TCP_RR with and without DDIO"
window = "1 ms warm-up, 2 ms"
x = "msg_bytes"
plot = ["latency_us"]

[sweep]
msg_bytes = [4096]

[[config]]
name = "ddio"
scenario = "ioctopus_r730"

[[config]]
name = "no_ddio"
scenario = "ioctopus_r730"
set = { "platform.r730.ddio_ways" = 0 }

[[workload]]
name = "rr"
kind = "netperf"
test = "TCP_RR"
msg_bytes = "{msg_bytes}"
server = "server"
client = "client"
nic = "nic"
cpu_node = 0
mem_node = 0
nic_mode = "standard"
netdev_pf = 0

[measure]
warmup = "1 ms"
duration = "2 ms"

[[metric]]
name = "latency_us"
workload = "rr"
field = "latency_us"
"#;
    let rows = parse(text).unwrap().run(&[]).unwrap();
    let lat = |cfg: &str| {
        rows.iter().find(|r| r.config == cfg).unwrap().metrics["latency_us"]
            .as_f64()
            .unwrap()
    };
    // Without DDIO every received line goes to DRAM and the reads miss.
    assert!(
        lat("no_ddio") > 1.05 * lat("ddio"),
        "{} vs {}",
        lat("no_ddio"),
        lat("ddio")
    );
}

/// The NIC's receive into node 1 beside `{cores}` STREAM cores of node 1 reading node 0
/// (both cross QPI node 0 → 1),
/// with metrics relative to baseline runs and the run's interconnect counter.
fn relative(scenario: &str, metrics: &str) -> String {
    format!(
        r#"[experiment]
id = "user.rx_beside_stream"
description = "receive DMA beside STREAM"
window = "20 us warm-up, 200 us"
x = "cores"
plot = []

[sweep]
cores = [0, 8]

[[config]]
name = "c"
scenario = "{scenario}"

[[workload]]
name = "rx"
kind = "dma"
device = "srv.nic0"
target = "srv.ram.node1"
op = "write"
transfer_bytes = 4096
outstanding = 32

[[workload]]
name = "ant"
kind = "cpu_stream"
host = "srv"
cpu_node = 1
mem_node = 0
op = "read"
misses_in_flight = 10
cores = "{{cores}}"

[measure]
warmup = "20 us"
duration = "200 us"
{metrics}"#
    )
}

const RELATIVE: &str = r#"
[[metric]]
name = "rx_norm"
workload = "rx"
field = "throughput_gbyte_s"
baseline = { params = { cores = 0 } }

[[metric]]
name = "ant_slowdown"
workload = "ant"
field = "throughput_gbyte_s"
baseline = { without = ["rx"] }
ratio = "baseline / value"

[[metric]]
name = "ant_norm"
workload = "ant"
field = "throughput_gbyte_s"
baseline = { without = ["rx"] }

[[metric]]
name = "ant_gbps"
workload = "ant"
field = "throughput_gbyte_s"

[[metric]]
name = "qpi"
counter = "interconnect_util"
"#;

/// The rows of workload `w` and the interconnect counter of one `nudma run` of `text`.
fn run_text(text: String) -> studies::run::PointResult {
    let src = Source {
        name: "by_hand.toml".into(),
        text,
    };
    studies::run::run_point(&src, &Vec::new(), 1).unwrap()
}

#[test]
fn a_baseline_is_the_same_field_of_another_run_and_a_counter_the_runs_own() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = server_scenario(dir.path());
    let e = parse(&relative(&scenario, RELATIVE)).unwrap();
    // A ratio to a baseline and a utilisation have no unit; a plain field has its own.
    for m in ["rx_norm", "ant_slowdown", "ant_norm", "qpi"] {
        assert_eq!(e.info.unit(m), None, "{m}");
    }
    assert_eq!(e.info.unit("ant_gbps"), Some("GB/s"));
    let rows = e.run(&[]).unwrap();
    let at = |cores: u64| {
        &rows
            .iter()
            .find(|r| r.params["cores"] == cores)
            .unwrap()
            .metrics
    };
    let f = |v: &Value| v.as_f64().unwrap();
    // At its own baseline point a ratio is exactly 1, either way round.
    assert_eq!(f(&at(0)["rx_norm"]), 1.0);
    // No STREAM cores: the workload did nothing, so a ratio to it is null, not 0/0.
    assert!(at(0)["ant_norm"].is_null(), "{:?}", at(0));
    assert!(at(0)["ant_slowdown"].is_null(), "{:?}", at(0));
    // The `without` baseline is `nudma run` of the same file without `rx`.
    let file = relative(&scenario, "");
    let hw = std::fs::read_to_string(&scenario).unwrap();
    let workloads = |keep_rx: bool| {
        let w = &file[file.find("[[workload]]").unwrap()..];
        let w = w.replace("\"{cores}\"", "8");
        let w = if keep_rx {
            w
        } else {
            w[w.find("[[workload]]\nname = \"ant\"").unwrap()..].to_string()
        };
        format!("{hw}\n{w}")
    };
    let gbps = |p: &studies::run::PointResult| {
        let r = p
            .rows
            .iter()
            .find(|r| r.params["workload"] == "ant")
            .unwrap();
        f(&r.metrics["throughput_gbyte_s"])
    };
    let (both, alone) = (run_text(workloads(true)), run_text(workloads(false)));
    assert_eq!(f(&at(8)["ant_norm"]), gbps(&both) / gbps(&alone));
    assert!(
        f(&at(8)["ant_norm"]) < 0.9,
        "the DMA slows STREAM: {rows:?}"
    );
    assert_eq!(f(&at(8)["ant_slowdown"]), gbps(&alone) / gbps(&both));
    // The counter is the run's own: the busiest QPI direction's share of its rate.
    assert_eq!(at(8)["qpi"], both.counters["interconnect_util"]);
    assert!(f(&at(8)["qpi"]) > f(&at(0)["qpi"]), "{rows:?}");
}

#[test]
fn bad_baselines_and_counters_are_located_and_named() {
    let e = |m: &str| parse(&relative("srv.toml", m)).unwrap_err();
    let metric = |b: &str| {
        format!(
            "\n[[metric]]\nname = \"n\"\nworkload = \"rx\"\nfield = \"throughput_gbyte_s\"\n{b}\n"
        )
    };
    let base = |b: &str| e(&metric(b));
    let line_of = |b: &str, needle: &str| {
        let t = relative("srv.toml", &metric(b));
        t.lines().position(|l| l.contains(needle)).unwrap() + 1
    };
    let b = "baseline = { without = [\"tx\"] }";
    let msg = base(b);
    assert!(
        msg.starts_with(&format!("x.toml:{}:", line_of(b, "baseline"))),
        "{msg}"
    );
    assert!(
        msg.ends_with("metric `n`: baseline: no [[workload]] named `tx` in this file"),
        "{msg}"
    );
    let msg = base("baseline = { without = [\"rx\"] }");
    assert!(msg.ends_with("`rx` is the metric's own workload"), "{msg}");
    let msg = base("baseline = { params = { bytes = 0 } }");
    assert!(
        msg.ends_with("params.bytes is not a swept parameter"),
        "{msg}"
    );
    let msg = base("baseline = {}");
    assert!(
        msg.contains("name the workloads it runs `without`"),
        "{msg}"
    );
    let b = "baseline = { params = { cores = 0 } }\nratio = \"value - baseline\"";
    let msg = base(b);
    assert!(
        msg.starts_with(&format!("x.toml:{}:", line_of(b, "ratio ="))),
        "{msg}"
    );
    assert!(msg.contains("ratio `value - baseline`: expected"), "{msg}");
    let msg = base("ratio = \"baseline / value\"");
    assert!(msg.ends_with("a `ratio` needs a `baseline`"), "{msg}");
    let msg = e("\n[[metric]]\nname = \"u\"\ncounter = \"llc_util\"\n");
    assert!(
        msg.ends_with("metric `u`: no run counter `llc_util` (there are: interconnect_util)"),
        "{msg}"
    );
}
