//! Memory-only NUMA nodes (`[[platform.X.memory_node]]`: HBM, NVDIMM, CXL or GPU memory
//! the OS exposes as a node without CPUs): numbered after the packages' nodes, served by
//! their package's uncore, with their own size; the memory matrices get a column, not a
//! row, for each; bad entries are located errors; platforms without them are unchanged.

use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Source};
use fabric::{Access, Endpoint, Fabric, Owner, Path, Request, Requester, ScenarioError, Step};

/// Two packages of one node each, an HBM node served by pkg1 and a CXL node by pkg0;
/// `memory` is extra `[platform.p.memory]` text, `nodes` the memory-node tables.
fn scenario(memory: &str, nodes: &str) -> String {
    format!(
        r#"[scenario]
name = "t"

[platform.p]
packages = 2
cores_per_package = 4
clock_ghz = 2.0
llc_bytes = "8 MiB"
llc_ways = 16
ddio_ways = 2
dram_bytes_per_node = "1 GiB"

[[platform.p.interconnect]]
ends = ["pkg0", "pkg1"]

{memory}
{nodes}
[[host]]
name = "h"
platform = "p"
[[host.device]]
name = "nic"
kind = "nic"
parent = "rc0"
link = {{ gen = 3, width = 8 }}
"#
    )
}

const NODES: &str = r#"[[platform.p.memory_node]]
package = 1
bytes = "2 GiB"
kind = "hbm"
gbps = { value = 400.0, basis = "assumption", why = "a test figure" }

[[platform.p.memory_node]]
package = 0
bytes = "256 MiB"
kind = "cxl"
"#;

fn try_load(text: &str) -> Result<fabric::scenario::Scenario, ScenarioError> {
    load(
        Source {
            name: "my.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
}

fn err_of(text: &str) -> ScenarioError {
    match try_load(text) {
        Err(e) => e,
        Ok(_) => panic!("accepted:\n{text}"),
    }
}

fn assert_located(e: &ScenarioError, key: &str, msg: &str) {
    assert_eq!(e.file, "my.toml", "{e}");
    assert!(e.line > 0, "located: {e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    assert!(e.message.contains(msg), "`{msg}` in: {e}");
}

#[test]
fn memory_nodes_follow_the_cpu_nodes_with_their_package_and_size() {
    let s = try_load(&scenario("", NODES)).unwrap();
    let p = &s.topology.platforms[0];
    assert_eq!((p.cpu_nodes(), p.numa_nodes()), (2, 4));
    assert_eq!(
        (0..4).map(|n| p.package_of_node(n)).collect::<Vec<_>>(),
        [0, 1, 1, 0]
    );
    assert_eq!(p.memory_node(1), None);
    let hbm = p.memory_node(2).unwrap();
    assert_eq!((hbm.kind.as_str(), hbm.bytes), ("hbm", 2 << 30));
    assert_eq!(hbm.gbps.as_ref().map(|g| g.0), Some(400.0));
    assert_eq!(p.memory_node(3).unwrap().gbps, None);
    // Each node's RAM is its own size.
    let f = Fabric::from_scenario(s).unwrap();
    let h = &f.topo.hosts[0];
    let size = |node: u32| -> u64 {
        h.regions
            .iter()
            .filter(|r| matches!(r.owner, Owner::Ram { node: n, .. } if n == node))
            .map(|r| r.end - r.start)
            .sum()
    };
    assert_eq!(
        (0..4).map(size).collect::<Vec<_>>(),
        [1 << 30, 1 << 30, 2 << 30, 256 << 20]
    );
}

#[test]
fn a_device_reaches_a_memory_node_through_its_package() {
    let mut f = Fabric::from_scenario(try_load(&scenario("", NODES)).unwrap()).unwrap();
    let nic = match f.resolve("h.nic").unwrap() {
        Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    };
    let crosses = |f: &mut Fabric, node: u32| -> bool {
        let (_, addr) = f
            .resolve_address(&format!("h.ram.node{node}"), 4096)
            .unwrap();
        let mut path = Path::default();
        let target = f
            .route(
                &Request {
                    requester: Requester::Function(nic),
                    addr,
                    len: 64,
                    access: Access::Write,
                },
                &mut path,
            )
            .unwrap();
        assert!(
            matches!(target, fabric::Target::Ram { node: n, .. } if n == node),
            "{target:?}"
        );
        path.steps
            .iter()
            .any(|s| matches!(s, Step::Interconnect { .. }))
    };
    // The NIC hangs under pkg0's root: the HBM served by pkg1 is across the
    // interconnect, the CXL memory served by pkg0 is not.
    assert!(crosses(&mut f, 2));
    assert!(!crosses(&mut f, 3));
    assert!(!crosses(&mut f, 0));
}

#[test]
fn matrices_have_a_row_per_cpu_node_and_a_column_per_node() {
    let ok = "[platform.p.memory]\nlatency_ns = [[90.0, 140.0, 200.0, 300.0], [140.0, 90.0, 110.0, 350.0]]\nbandwidth_gbps = 10.0\n";
    let s = try_load(&scenario(ok, NODES)).unwrap();
    let p = &s.topology.platforms[0];
    assert_eq!(p.latency_ns.as_ref().unwrap()[1][2], 110.0);
    // A scalar fills the CPU rows × all columns.
    let bw = p.bandwidth_gbps.as_ref().unwrap();
    assert_eq!((bw.len(), bw[0].len()), (2, 4));
    // A square matrix over every node is the wrong shape once nodes have no CPUs.
    let square = "[platform.p.memory]\nlatency_ns = [[90.0, 140.0, 200.0, 300.0], [140.0, 90.0, 110.0, 350.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]\n";
    let e = err_of(&scenario(square, NODES));
    assert_located(
        &e,
        "platform.p.memory.latency_ns",
        "a 2 × 4 matrix (2 CPU node rows; columns for those and the 2 memory-only node(s))",
    );
}

#[test]
fn bad_memory_nodes_are_located_errors() {
    let base = scenario("", NODES);
    for (from, to, key, msg) in [
        (
            "package = 1",
            "package = 2",
            "platform.p.memory_node[0].package",
            "packages 0..=1, not 2",
        ),
        (
            "kind = \"hbm\"",
            "kind = \"sram\"",
            "platform.p.memory_node[0].kind",
            "kind must be one of dram, hbm, nvm, cxl, gpu, other, not `sram`",
        ),
        (
            "bytes = \"256 MiB\"",
            "bytes = 1000",
            "platform.p.memory_node[1].bytes",
            "whole number of MiB",
        ),
        (
            "value = 400.0",
            "value = 0.0",
            "platform.p.memory_node[0].gbps",
            "gbps must be a bandwidth",
        ),
    ] {
        assert!(base.contains(from), "{from}");
        let e = err_of(&base.replacen(from, to, 1));
        assert_located(&e, key, msg);
    }
    // A missing package or size, and unknown keys, are refused at their table.
    for (from, to, msg) in [
        ("package = 0\n", "", "missing field `package`"),
        ("bytes = \"2 GiB\"\n", "", "missing field `bytes`"),
        (
            "kind = \"cxl\"\n",
            "kind = \"cxl\"\ncpus = 4\n",
            "unknown field `cpus`",
        ),
    ] {
        let e = err_of(&base.replacen(from, to, 1));
        assert!(e.line > 0 && e.message.contains(msg), "{e}");
    }
}

#[test]
fn a_platform_without_memory_nodes_is_unchanged() {
    let s = try_load(&scenario("", "")).unwrap();
    let p = &s.topology.platforms[0];
    assert!(p.memory_nodes.is_empty());
    assert_eq!((p.cpu_nodes(), p.numa_nodes()), (2, 2));
    // Square matrices, as before.
    let sq = "[platform.p.memory]\nlatency_ns = [[90.0, 140.0], [140.0, 90.0]]\n";
    try_load(&scenario(sq, "")).unwrap();
    let e = err_of(&scenario(
        "[platform.p.memory]\nlatency_ns = [[90.0, 140.0, 1.0], [140.0, 90.0, 1.0]]\n",
        "",
    ));
    assert_located(&e, "platform.p.memory.latency_ns", "a 2 × 2 matrix (row");
}
