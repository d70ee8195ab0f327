//! The `nudma` binary end to end: JSON contracts of `list` and `topo path`, exit statuses,
//! and located errors for bad scenario files.

use std::process::Command;

mod common;
use common::nudma;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let (code, out, err) = nudma(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} prints JSON: {e}\n{out}"))
}

fn path(scenario: &str, from: &str, to: &str) -> (u64, u64) {
    let v = json(&[
        "topo", "path", scenario, "--from", from, "--to", to, "--format", "json",
    ]);
    (v["hops"].as_u64().unwrap(), v["roots"].as_u64().unwrap())
}

#[test]
fn topo_path_reproduces_the_reference_path_examples() {
    assert_eq!(
        path("smartio_chassis_mxs824", "lender.nvme", "borrower.ram").0,
        4
    );
    assert_eq!(
        path("smartio_chassis_mxs824", "lender.nvme", "lender.ram").0,
        3
    );
    assert_eq!(
        path("smartio_chassis_mxs824", "lender.nvme", "lender.gpu").0,
        1
    );
    assert_eq!(
        path("smartio_three_way", "lender1.gpu0", "lender1.gpu1"),
        (1, 0)
    );
    assert_eq!(
        path("smartio_three_way", "lender1.gpu0", "lender2.gpu0"),
        (4, 0)
    );
}

#[test]
fn topo_path_json_lists_every_step_and_the_target() {
    let v = json(&[
        "topo",
        "path",
        "smartio_chassis_b2b",
        "--from",
        "lender.nvme",
        "--to",
        "borrower.ram",
        "--format",
        "json",
    ]);
    let kinds: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "link",
            "switch",
            "link",
            "ntb_window",
            "rid_lut",
            "switch",
            "cable",
            "switch",
            "link",
            "root"
        ],
        "nvme → chassis switch → lender adapter's host side (window) → its crossbar → cable → borrower adapter → root"
    );
    assert!(v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["name"].is_string()));
    assert_eq!(v["target"]["kind"], "ram");
    assert_eq!(v["target"]["host"], "borrower");
    assert!(v["fault"].is_null());
}

#[test]
fn a_faulting_access_reports_the_fault_and_exits_1() {
    let (code, out, _) = nudma(&[
        "topo",
        "path",
        "smartio_pxh830_b2b",
        "--from",
        "a.cpu",
        "--to",
        "0xFFF00000",
        "--format",
        "json",
    ]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fault"]["kind"], "no_window");
    assert!(v["target"].is_null());
}

#[test]
fn list_json_has_the_contract_shape() {
    let v = json(&["list", "--format", "json"]);
    let names: Vec<&str> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    for n in [
        "ioctopus_r730",
        "ioctopus_nvme",
        "tyche_6nic",
        "rdma_haswell",
        "smartio_pxh810_b2b",
        "smartio_pxh830_b2b",
        "smartio_three_way",
        "smartio_chassis_b2b",
        "smartio_chassis_mxs824",
        "smartio_chassis_baseline",
        "smartio_cluster60",
        "smartio_cluster10k",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    assert!(v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| !s["description"].as_str().unwrap().is_empty()));
    assert!(v["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["id"].is_string() && e["description"].is_string()));
    // Platforms and device models, each with what it is and the file that defines it:
    // a scenario that includes the file can use the name.
    for (key, must) in [
        ("platforms", ["r730", "skylake_8160"]),
        ("device_models", ["connectx4", "p4800x"]),
    ] {
        let parts = v[key].as_array().unwrap();
        for m in must {
            let p = parts
                .iter()
                .find(|p| p["name"] == m)
                .unwrap_or_else(|| panic!("{m} missing from {key}"));
            assert!(!p["description"].as_str().unwrap().is_empty(), "{p}");
            let include = p["include"].as_str().unwrap();
            let text = format!(
                "include = [\"{include}\"{}]\n[scenario]\nname = \"uses\"\n[[host]]\nname = \"h\"\n\
                 platform = \"{}\"\n{}",
                if key == "platforms" { "" } else { ", \"platforms/r730.toml\"" },
                if key == "platforms" { m } else { "r730" },
                if key == "platforms" {
                    String::new()
                } else {
                    format!("[[host.device]]\nname = \"d\"\ndevice_model = \"{m}\"\nparent = \"rc0\"\nlink = {{ gen = 3, width = 4 }}\n")
                }
            );
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("uses.toml");
            std::fs::write(&file, text).unwrap();
            let (code, _, err) = common::nudma(&["topo", "check", file.to_str().unwrap()]);
            assert_eq!(code, 0, "{m} from {include}: {err}");
        }
    }
    // Every device model says its kind, one copied with `base` its base's.
    for p in v["device_models"].as_array().unwrap() {
        let d = p["description"].as_str().unwrap();
        assert!(!d.starts_with(':'), "no kind: {p}");
    }
    let models = v["device_models"].as_array().unwrap();
    let bf3 = models.iter().find(|p| p["name"] == "bluefield3").unwrap();
    assert!(bf3["description"].as_str().unwrap().starts_with("nic: "));
}

#[test]
fn bad_scenario_files_get_located_errors_and_a_nonzero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(
        &p,
        "[scenario]\nname = \"x\"\n\n[[host]]\nname = \"h\"\nplatfrm = \"p\"\n",
    )
    .unwrap();
    let (code, _, err) = nudma(&["topo", "check", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("bad.toml:4:1") || err.contains("bad.toml:6:1"),
        "{err}"
    );
    assert!(err.contains("unknown field `platfrm`"), "{err}");
    let (code, _, err) = nudma(&["topo", "show", "no_such_scenario"]);
    assert_ne!(code, 0);
    assert!(err.contains("built-in: "), "lists the built-ins: {err}");
    let (code, _, err) = nudma(&[
        "topo",
        "path",
        "smartio_pxh830_b2b",
        "--from",
        "a.gpu",
        "--to",
        "b.ram",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("host `a` has no device or switch `gpu`"),
        "{err}"
    );
    // Devices are also nodes of the tree: each name once, sorted.
    let (code, _, err) = nudma(&[
        "topo",
        "path",
        "smartio_chassis_mxs824",
        "--from",
        "lender.gpux",
        "--to",
        "borrower.ram",
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "error: unknown endpoint `lender.gpux`: host `lender` has no device or switch `gpux` \
         (it has: chassis, gpu, hib68_host, hib68_target, ntb, nvme, rc0)\n"
    );
}

#[test]
fn size_arguments_read_sizes_as_scenario_files_do() {
    let path = |len: &str| {
        nudma(&[
            "topo",
            "path",
            "smartio_chassis_mxs824",
            "--from",
            "lender.nvme",
            "--to",
            "borrower.ram",
            "--len",
            len,
        ])
    };
    let (code, out, err) = path("4 KiB");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Read of 4096 B"), "{out}");
    let (code, _, err) = path("4 KB");
    assert_eq!(code, 2);
    assert!(
        err.contains("invalid value '4 KB' for '--len <LEN>': `4 KB` is ambiguous: write `4 KiB` (4 × 2^10 bytes) or `4000` (4 × 10^3 bytes)"),
        "{err}"
    );
    let (code, _, err) = path("8 KiB");
    assert_eq!(code, 2);
    assert!(
        err.contains("must be 1..=4096 bytes (one PCIe request), not 8192"),
        "{err}"
    );
    let (code, _, err) = nudma(&[
        "topo",
        "path",
        "smartio_chassis_mxs824",
        "--from",
        "lender.nvme",
        "--to",
        "borrower.ram",
        "--offset",
        "1 MB",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("`1 MB` is ambiguous: write `1 MiB` (2^20 bytes) or `1000000`"),
        "{err}"
    );
}

#[test]
fn dot_output_is_a_graph_with_every_host() {
    let (code, out, _) = nudma(&["topo", "show", "smartio_three_way", "--format", "dot"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("graph \"smartio_three_way\""));
    for h in ["user", "lender1", "lender2"] {
        assert!(out.contains(&format!("subgraph \"cluster_{h}\"")), "{h}");
    }
    assert_eq!(out.matches("color=darkorange").count(), 3, "three cables");
}

/// The DOT output is a graph Graphviz reads: parsed by a DOT grammar here (so the test
/// needs nothing installed), the lender a cluster subgraph with its parts, every other host
/// by its adapter, the cluster switches beside them; rendered by `dot` too where Graphviz
/// is installed (`.ci/run` installs it).
#[test]
fn graphviz_renders_the_whole_cluster() {
    use graphviz_rust::dot_structures::{Graph, Id, NodeId, Stmt, Subgraph};
    let (code, dot_src, _) = nudma(&["topo", "show", "smartio_cluster60", "--format", "dot"]);
    assert_eq!(code, 0);
    let graph = graphviz_rust::parse(&dot_src).unwrap_or_else(|e| panic!("not DOT: {e}"));
    fn text(id: &Id) -> String {
        match id {
            Id::Html(s) | Id::Escaped(s) | Id::Plain(s) | Id::Anonymous(s) => {
                s.trim_matches('"').to_string()
            }
        }
    }
    // Every node id and subgraph name, however deep.
    fn walk(stmts: &[Stmt], names: &mut Vec<String>) {
        for st in stmts {
            match st {
                Stmt::Node(n) => {
                    let NodeId(id, _) = &n.id;
                    names.push(text(id));
                }
                Stmt::Subgraph(Subgraph { id, stmts }) => {
                    names.push(text(id));
                    walk(stmts, names);
                }
                _ => {}
            }
        }
    }
    let Graph::Graph { stmts, .. } = graph else {
        panic!("an undirected graph");
    };
    let mut names = Vec::new();
    walk(&stmts, &mut names);
    // The lender drawn whole; the other 59 hosts by their adapters; the seven switches.
    for name in [
        "cluster_h00",
        "h00.nvme",
        "h00.gpu",
        "h01.ntb",
        "h59.ntb",
        "mxs0",
        "mxs6",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    assert!(dot_src.contains("Intel Optane P4800X"));
    let Ok(mut child) = Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("Graphviz `dot` is not installed: the DOT was parsed, not rendered");
        return;
    };
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot_src.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dot rejects our output: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = String::from_utf8_lossy(&out.stdout);
    for name in ["h00", "h59", "mxs0", "mxs6", "P4800X"] {
        assert!(svg.contains(name), "{name} drawn");
    }
}

#[test]
fn topo_path_reports_zero_load_latency_where_the_scenario_has_timing() {
    let lat = |to: &str| {
        let v = json(&[
            "topo",
            "path",
            "smartio_chassis_mxs824",
            "--from",
            "lender.nvme",
            "--to",
            to,
            "--format",
            "json",
        ]);
        v["latency_ns"]
            .as_f64()
            .expect("SmartIO hosts have timing parameters")
    };
    let (gpu, lender, borrower) = (lat("lender.gpu"), lat("lender.ram"), lat("borrower.ram"));
    assert!(
        gpu < lender && lender < borrower,
        "1, 3 and 4 hops: {gpu} < {lender} < {borrower}"
    );
    // Without timing parameters the field is absent rather than invented.
    let dir = tempfile::tempdir().unwrap();
    let untimed = dir.path().join("untimed.toml");
    std::fs::write(
        &untimed,
        "[scenario]\nname = \"untimed\"\n[platform.p]\ncpu = \"test\"\npackages = 1\n\
         cores_per_package = 4\nthreads_per_core = 1\nclock_ghz = 2.0\nllc_bytes = \"8 MiB\"\n\
         llc_ways = 16\nddio_ways = 0\ndram_bytes_per_node = \"1 GiB\"\n[[host]]\nname = \"h\"\n\
         platform = \"p\"\n[[host.device]]\nname = \"nic0\"\nkind = \"nic\"\nparent = \"rc0\"\n\
         link = { gen = 3, width = 8 }\nbars = [{ size = \"1 MiB\" }]\n",
    )
    .unwrap();
    let v = json(&[
        "topo",
        "path",
        untimed.to_str().unwrap(),
        "--from",
        "h.nic0",
        "--to",
        "h.ram",
        "--format",
        "json",
    ]);
    assert!(v.get("latency_ns").is_none());
}

#[test]
fn topo_path_names_the_bottleneck_of_a_stream_of_such_accesses() {
    let v = json(&[
        "topo",
        "path",
        "smartio_pxh810_b2b",
        "--from",
        "lender.gpu",
        "--to",
        "borrower.ram",
        "--access",
        "write",
        "--format",
        "json",
    ]);
    let why = v["stream"]["bottleneck"].as_str().unwrap();
    assert!(
        why.contains("credits"),
        "posted writes over the PXH810 pair are credit-bound: {why}"
    );
    let v = json(&[
        "topo",
        "path",
        "smartio_chassis_b2b",
        "--from",
        "lender.gpu",
        "--to",
        "borrower.ram",
        "--len",
        "4096",
        "--format",
        "json",
    ]);
    let why = v["stream"]["bottleneck"].as_str().unwrap();
    assert!(
        why.contains("outstanding reads"),
        "the P4000's reads are bound by its tags: {why}"
    );
    let gbps = v["stream"]["gbyte_s"].as_f64().unwrap();
    assert!((9.0..11.5).contains(&gbps), "{gbps}");
}

/// A device whose model states its data path (a NIC's port, an NVMe's media) streams no
/// faster than it, as a `dma` workload runs: the P4800X's x4 link would carry ≈ 3.6 GB/s
/// of 4 KiB transfers, its media reads 2.4 GB/s (what it writes to the host) and writes
/// 2.0 (what it reads).
#[test]
fn the_stream_is_bound_by_the_devices_own_data_path() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/two_socket_server.toml"
    );
    let stream = |access: &str| {
        let v = json(&[
            "topo",
            "path",
            example,
            "--from",
            "srv.nvme",
            "--to",
            "srv.ram.node0",
            "--len",
            "4096",
            "--access",
            access,
            "--format",
            "json",
        ]);
        let s = &v["stream"];
        (
            s["gbyte_s"].as_f64().unwrap(),
            s["bottleneck"].as_str().unwrap().to_string(),
        )
    };
    let (write, why) = stream("write");
    assert!((write - 2.4).abs() < 0.01, "{write}");
    assert!(why.contains("media read rate"), "{why}");
    let (read, why) = stream("read");
    assert!((read - 2.0).abs() < 0.01, "{read}");
    assert!(why.contains("media write rate"), "{why}");
}

/// A stream of 64 B writes runs at 64 B per TLP, not at the 256 B-TLP rate: on Gen3 x8
/// (7.877 GB/s of symbols, less one SKP block in 371) 64 / (64 + 12 + 8) of it below 4 GiB
/// (3-DW header, as the TLP simulation sends it) and 64 / (64 + 16 + 8) above (4 DW):
/// 5.73 GB/s without SKP ordered sets, as pcie-bench's model gives, 5.71 with them.
#[test]
fn the_stream_rate_follows_the_access_length_and_the_address_width() {
    let rate = |to: &str, len: &str| {
        let v = json(&[
            "topo",
            "path",
            "ioctopus_r730",
            "--from",
            "server.nic.pf0",
            "--to",
            to,
            "--access",
            "write",
            "--len",
            len,
            "--format",
            "json",
        ]);
        v["stream"]["gbyte_s"].as_f64().unwrap()
    };
    let link = 8.0 * 128.0 / 130.0 * (1.0 - 1.0 / 371.0); // Gen3 x8 less SKP, GB/s
    let low = rate("server.ram.node0", "64");
    assert!((low - 64.0 / 84.0 * link).abs() < 0.01, "{low}");
    let high = rate("server.ram.node1", "64");
    assert!((high - 64.0 / 88.0 * link).abs() < 0.01, "{high}");
    assert!((high - 5.73 * (1.0 - 1.0 / 371.0)).abs() < 0.01, "{high}");
    let (mps, large) = (
        rate("server.ram.node0", "256"),
        rate("server.ram.node0", "4096"),
    );
    assert!(
        low < mps && (mps - large).abs() < 1e-9,
        "{low} {mps} {large}"
    );
}

/// A four-socket server (the R730 platform with four packages, fully connected): a NIC on
/// socket 0 and an NVMe on socket 2, so a peer-to-peer read crosses two forwarding roots.
fn four_sockets(dir: &std::path::Path) -> String {
    let r730 = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/platforms/r730.toml"),
    )
    .unwrap();
    let mut platform = r730
        .replace("[platform.r730", "[platform.quad")
        .replace("packages = 2", "packages = 4");
    let links: String = [("pkg0", "pkg2"), ("pkg0", "pkg3"), ("pkg1", "pkg2"), ("pkg1", "pkg3"), ("pkg2", "pkg3")]
        .iter()
        .map(|(a, b)| {
            format!("[[platform.quad.interconnect]]\nends = [\"{a}\", \"{b}\"]\nkind = \"qpi\"\ngts = 9.6\ncount = 2\n\n")
        })
        .collect();
    let at = platform.find("[platform.quad.timing]").unwrap();
    platform.insert_str(at, &links);
    std::fs::write(dir.join("quad_platform.toml"), platform).unwrap();
    let file = dir.join("quad.toml");
    std::fs::write(
        &file,
        r#"include = ["quad_platform.toml", "platforms/devices.toml"]
[scenario]
name = "quad"
[[host]]
name = "srv"
platform = "quad"
[[host.device]]
name = "nic"
device_model = "connectx4"
parent = "rc0"
link = { gen = 3, width = 8 }
timing = { dma_max_reads = { value = 32.0, basis = "assumption", why = "test" }, dma_mrrs_bytes = { value = 512.0, basis = "assumption", why = "test" } }
[[host.device]]
name = "nvme"
device_model = "p4800x"
parent = "rc2"
"#,
    )
    .unwrap();
    file.display().to_string()
}

/// A read split by the first root into more sub-reads than it has tags, each split again
/// by the second root, completes: its zero-load time grows with its size (it was 0.0 ns
/// for 3,200–4,096 B when the second split lost track of where the first rejoins).
#[test]
fn a_peer_to_peer_read_across_two_roots_completes_at_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let quad = four_sockets(dir.path());
    let mut last = 0.0;
    for len in [64, 1024, 3000, 3200, 4096] {
        let v = json(&[
            "topo",
            "path",
            &quad,
            "--from",
            "srv.nic",
            "--to",
            "srv.nvme",
            "--len",
            &len.to_string(),
            "--format",
            "json",
        ]);
        assert_eq!(v["roots"].as_u64(), Some(2), "{v}");
        let ns = v["latency_ns"].as_f64().unwrap_or_else(|| panic!("{v}"));
        assert!(ns > last, "{len} B: {ns} ns after {last} ns");
        last = ns;
    }
}

/// A device addressing its own BAR makes no PCIe request: a fault, not a figure.
#[test]
fn a_device_reading_its_own_bar_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let quad = four_sockets(dir.path());
    let (code, out, _) = nudma(&[
        "topo", "path", &quad, "--from", "srv.nic", "--to", "srv.nic", "--len", "4096",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("its own BAR"), "{out}");
    assert!(!out.contains("streaming"), "{out}");
}

/// The built-in smartio_cluster60 is written with `[cluster]`; the fixture is the file as
/// it was written out host by host. `topo show` and `topo path` cannot tell them apart.
#[test]
fn the_generated_cluster60_answers_as_the_explicit_one() {
    let explicit = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fabric/tests/fixtures/smartio_cluster60_explicit.toml"
    );
    let same = |args: &[&str]| {
        let mut a = args.to_vec();
        let (c1, generated, e1) = nudma(&a);
        a[2] = explicit;
        let (c2, written, e2) = nudma(&a);
        assert_eq!((c1, e1.as_str()), (c2, e2.as_str()), "{args:?}");
        assert_eq!(generated, written, "{args:?}");
        generated
    };
    let show = same(&["topo", "show", "smartio_cluster60", "--format", "json"]);
    assert!(show.contains("\"h59\"") && show.contains("\"mxs6\""));
    for (from, to, more) in [
        ("h00.nvme", "h59.ram", &[][..]),
        ("h00.nvme", "h05.ram", &[]),
        ("h33.cpu", "h00.nvme", &["--access", "write", "--len", "4"]),
        ("h00.gpu", "h17.ram", &["--len", "4096"]),
        ("h42.cpu", "h42.ram", &[]),
    ] {
        for format in ["text", "json"] {
            let mut args = vec![
                "topo",
                "path",
                "smartio_cluster60",
                "--from",
                from,
                "--to",
                to,
                "--format",
                format,
            ];
            args.extend_from_slice(more);
            let out = same(&args);
            assert!(out.contains("hop"), "{args:?}: {out}");
        }
    }
}

/// A path across the whole 10,000-host tree: up three levels to the top and down three,
/// every switch named, the target's root crossed once.
#[test]
fn topo_path_crosses_the_10k_cluster() {
    let v = json(&[
        "topo",
        "path",
        "smartio_cluster10k",
        "--from",
        "h0000.nvme",
        "--to",
        "h9999.ram",
        "--format",
        "json",
    ]);
    assert_eq!(v["hops"], 10, "chassis, two PXH830s, seven MXS824s");
    assert_eq!(v["roots"], 1);
    let switches: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "cluster_switch")
        .map(|s| s["name"].as_str().unwrap().split(' ').next().unwrap())
        .collect();
    assert_eq!(
        switches,
        ["mxs111", "mxs11", "mxs1", "mxs0", "mxs10", "mxs110", "mxs1110"]
    );
    assert_eq!(v["target"]["host"], "h9999");
    assert!(v["latency_ns"].as_f64().unwrap() > 0.0);
}

#[test]
fn topo_commands_take_the_overrides_run_takes() {
    let ex = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/two_socket_server.toml"
    );
    let stream = |sets: &[&str]| {
        let mut args = vec![
            "topo",
            "path",
            ex,
            "--from",
            "srv.nic0",
            "--to",
            "srv.ram.node1",
            "--format",
            "json",
        ];
        for s in sets {
            args.extend(["--set", s]);
        }
        json(&args)
    };
    let (wide, narrow) = (stream(&[]), stream(&["host.srv.device.nic0.link.width=4"]));
    assert_ne!(wide, narrow);
    assert!(
        narrow.to_string().contains("Gen3 x4") && !wide.to_string().contains("Gen3 x4"),
        "{narrow}"
    );
    let (code, _, err) = nudma(&["topo", "check", ex, "--set", "host.srv.nope=1"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("(with --set):18:1: unknown field `nope`"),
        "{err}"
    );
    let (code, _, err) = nudma(&[
        "topo",
        "show",
        ex,
        "--set",
        "host.srv.device.nic0.link.width=4,8",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("a scenario takes one value per key, not 2"),
        "{err}"
    );
}

#[test]
fn topo_show_lists_what_is_lent_and_borrowed_and_each_links_bandwidth() {
    let ex = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/borrowed_gpu.toml"
    );
    let (code, out, err) = nudma(&["topo", "show", ex]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\nlending (set up when a run starts)\n  lender lends gpu (03:00.0)\n  borrower borrows lender.gpu as gpu0 (exclusive)\n"), "{out}");
    let v = json(&["topo", "show", ex, "--format", "json"]);
    assert_eq!(v["borrows"][0]["name"], "gpu0");
    assert_eq!(v["lends"][0]["device"], "gpu");
    let (_, out, _) = nudma(&["topo", "show", "ioctopus_r730"]);
    assert!(
        out.contains("interconnect pkg0 ↔ pkg1 QPI 9.6 GT/s × 2, 38.4 GB/s per direction"),
        "{out}"
    );
}

#[test]
fn a_borrowed_device_is_an_endpoint_by_its_borrow_name() {
    let ex = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/borrowed_gpu.toml"
    );
    // Through the lender's NTB (address and requester-ID LUTs), the cable and the
    // borrower's IOMMU, as the borrower's driver maps its own RAM in the DMA window.
    for from in ["borrower.gpu0", "gpu0"] {
        assert_eq!(path(ex, from, "borrower.ram"), (3, 1), "{from}");
    }
    let (code, out, err) = nudma(&["topo", "path", ex, "--from", "gpu0", "--to", "borrower.ram"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("set up for this query: borrower borrows lender.gpu"),
        "{out}"
    );
    assert!(out.contains("iommu          borrower IOMMU"), "{out}");
    let (code, _, err) = nudma(&[
        "topo",
        "path",
        ex,
        "--from",
        "borrower.gpu1",
        "--to",
        "borrower.ram",
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_set_reaches_a_host_its_cluster_makes_and_names_them_when_it_misses() {
    let iommu = |sets: &[&str]| -> Vec<(String, bool)> {
        let mut args = vec!["topo", "show", "smartio_cluster60", "--format", "json"];
        for s in sets {
            args.extend(["--set", s]);
        }
        json(&args)["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["name"].as_str().unwrap().to_string(), h["iommu"] == true))
            .collect()
    };
    let (before, after) = (iommu(&[]), iommu(&["host.h05.iommu=true"]));
    // h05 takes its own place in the tree, with its IOMMU on; no other host changes.
    assert_eq!(after.len(), before.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a.0, b.0);
        assert_eq!(a.1, b.1 || a.0 == "h05", "{a:?}");
    }
    assert!(after.iter().any(|h| h == &("h05".to_string(), true)));
    let (code, _, err) = nudma(&[
        "topo",
        "show",
        "smartio_cluster60",
        "--set",
        "host.h60.iommu=true",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no `host` entry named `h60` (there are: h00); its [cluster] makes h00 … h59"),
        "{err}"
    );
}
