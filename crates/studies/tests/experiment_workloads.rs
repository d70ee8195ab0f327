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
field = "gbps"

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
    let rows = e.run(&[]).unwrap();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        let node = &r.config["node".len()..];
        let bytes = r.params["bytes"].as_u64().unwrap();
        let alone = run_alone(&scenario, node, bytes);
        assert_eq!(r.metrics["gbps"], alone["gbps"], "{r:?}");
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

    let t = exp("\n[[metric]]\nname = \"gbps\"\nworkload = \"tx\"\nfield = \"gbps\"\n");
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

    let t = exp("\n[[metric]]\nname = \"gbps\"\nworkload = \"rx\"\nfield = \"gbps\"\nargs = { a = \"b\" }\n");
    assert!(parse(&t)
        .unwrap_err()
        .contains("a workload's metric takes no `args`"));

    let t = exp("\n[[metric]]\nname = \"gbps\"\nworkload = \"rx\"\nprobe = \"nvme_sharing\"\nfield = \"gbps\"\n");
    assert!(parse(&t)
        .unwrap_err()
        .contains("name a `probe` or a `workload`"));

    let t = exp(METRICS).replace("[measure]\nwarmup = \"20 us\"\nduration = \"200 us\"\n", "");
    assert!(parse(&t).unwrap_err().contains("need its [measure] window"));

    // A placeholder in a workload that is neither a var nor swept, located at the metric.
    let t = exp(METRICS).replace("srv.ram.node{node}", "srv.ram.node{numa}");
    let e = parse(&t).unwrap_err();
    assert!(e.contains("`{numa}` is neither a swept parameter"), "{e}");
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
    assert!(e.contains("rx.gbps"), "{e}");
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
