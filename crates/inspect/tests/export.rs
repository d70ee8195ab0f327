//! `inspect --export`: every fixture becomes a scenario TOML in the preliminary
//! schema, assumptions are marked, and a calibration file fills the memory matrices.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{snapshot, xml};
use inspect::export::{scenario_toml, Calibration, MemorySource};
use inspect::platform_file::MemoryParams;
use inspect::{import_hwloc_file, import_sysfs, Machine};

/// A structural check of the TOML subset the exporter writes: tables, arrays of
/// tables, `key = value` lines with quoted strings, numbers, booleans, arrays and
/// inline tables, balanced brackets, comments. Returns keys per table header.
fn check_toml(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = String::new();
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(t) = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
            current = t.to_string();
            tables.entry(current.clone()).or_default();
            continue;
        }
        if let Some(t) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = t.to_string();
            assert!(
                !tables.contains_key(&current),
                "line {}: table [{current}] defined twice",
                i + 1
            );
            tables.entry(current.clone()).or_default();
            continue;
        }
        let (key, value) = line
            .split_once(" = ")
            .unwrap_or_else(|| panic!("line {}: not `key = value`: {raw}", i + 1));
        assert!(
            key.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'),
            "line {}: bad key {key}",
            i + 1
        );
        let opens = value.matches(['[', '{']).count();
        let closes = value.matches([']', '}']).count();
        assert_eq!(opens, closes, "line {}: unbalanced {value}", i + 1);
        assert!(
            value.starts_with('"')
                || value.starts_with('[')
                || value.starts_with('{')
                || value == "true"
                || value == "false"
                || value.parse::<f64>().is_ok(),
            "line {}: bad value {value}",
            i + 1
        );
        if value.starts_with('"') {
            assert!(value.ends_with('"') && value.len() >= 2, "line {}", i + 1);
        }
        tables
            .entry(current.clone())
            .or_default()
            .push(key.to_string());
    }
    tables
}

fn strip_comment(line: &str) -> &str {
    // No '#' appears inside the strings the exporter writes for these fixtures
    // except in comments, which follow the value.
    let mut in_str = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_str = !in_str,
            '#' if !in_str => return &line[..i],
            _ => {}
        }
    }
    line
}

fn value_of<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key} = ")))
        .map(|v| strip_comment(v).trim())
        .collect()
}

fn export(m: &Machine) -> String {
    let e = scenario_toml(m, None).unwrap();
    check_toml(&e.toml);
    e.toml
}

#[test]
fn platform_section_follows_the_schema() {
    let m = import_hwloc_file(&xml("32em64t-2n8c2t-pci-normalio.xml")).unwrap();
    let s = export(&m);
    let tables = check_toml(&s);
    assert_eq!(tables["scenario"], vec!["name", "description"]);
    assert_eq!(
        tables["platform.imported"],
        vec![
            "cpu",
            "packages",
            "nodes_per_package",
            "cores_per_package",
            "threads_per_core",
            "clock_ghz",
            "llc_bytes",
            "llc_ways",
            "ddio_ways",
            "dram_bytes_per_node"
        ]
    );
    assert_eq!(
        tables["platform.imported.memory"],
        vec!["latency_ns", "bandwidth_gbps"]
    );
    assert_eq!(value_of(&s, "name")[0], "\"imported-conan\"");
    assert_eq!(value_of(&s, "packages"), vec!["2"]);
    assert_eq!(value_of(&s, "nodes_per_package"), vec!["1"]);
    assert_eq!(value_of(&s, "cores_per_package"), vec!["8"]);
    assert_eq!(value_of(&s, "threads_per_core"), vec!["2"]);
    assert_eq!(value_of(&s, "clock_ghz"), vec!["2.0"]);
    assert_eq!(value_of(&s, "llc_bytes"), vec!["20971520"]);
    assert!(s.contains("ddio_ways = 2   # assumption: Intel default 2 of the LLC ways"));
    assert!(s.contains("latency_ns = [[90.0, 180.0], [180.0, 90.0]]"));
    assert!(s.contains("# assumption: local 90 ns and 60 GB/s"));
    assert!(s.contains("ends = [\"pkg0\", \"pkg1\"]\nkind = \"qpi\""));
    assert!(s.contains("[[host]]\nname = \"conan\"\nplatform = \"imported\""));
    // Every device of an I/O class, named after its OS device, on its node's root
    // complex; the two I350 ports stay two devices.
    let names = value_of(&s, "name");
    for n in [
        "\"eth0\"",
        "\"eth1\"",
        "\"cuda0\"",
        "\"opencl0d1\"",
        "\"mlx5_0\"",
        "\"sda\"",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    assert!(s.contains(
        "name = \"eth0\"\nkind = \"nic\"\nmodel = \"Intel Corporation I350 Gigabit Network Connection\"\nparent = \"rc1\""
    ));
    assert!(s.contains("name = \"mlx5_0\"\nkind = \"rnic\""));
    assert!(s.contains("kind = \"gpu\""));
    assert!(s.contains("link = { gen = 3, width = 8 }   # assumption: link not reported"));
    assert!(
        !s.contains("[[host.switch]]"),
        "root ports are not switches"
    );
}

#[test]
fn every_fixture_exports() {
    for name in [
        "16amd64-4distances.xml",
        "24em64t-2n6c2t-pci.xml",
        "32em64t-2n8c2t-pci-normalio.xml",
        "8intel64-4n2t-memattrs.xml",
    ] {
        let m = import_hwloc_file(&xml(name)).unwrap();
        let s = export(&m);
        assert!(s.contains("[platform.imported.memory]"), "{name}");
    }
    for (archive, dir) in [
        (
            "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
            "32em64t-2n8c+1mic",
        ),
        (
            "40intel64-2g2n4c+pcilocality.tar.bz2",
            "40intel64-2g2n4c+pci",
        ),
    ] {
        let (_tmp, root) = snapshot(archive, dir);
        let m = import_sysfs(&root).unwrap();
        let s = export(&m);
        assert!(s.contains("[[host.device]]"), "{archive}");
    }
}

#[test]
fn amd_eight_sockets() {
    let m = import_hwloc_file(&xml("16amd64-4distances.xml")).unwrap();
    let s = export(&m);
    assert_eq!(value_of(&s, "packages"), vec!["8"]);
    assert!(s.contains("kind = \"hypertransport\""));
    assert!(s.contains("clock_ghz = 2.0   # assumption"));
    // Package distances 20/40/80: 20 and 40 pair the sockets in two groups of four
    // that only 80 joins, so every pair is linked.
    assert_eq!(s.matches("[[platform.imported.interconnect]]").count(), 28);
    assert!(!s.contains("[[host.device]]"));
}

#[test]
fn memory_only_topology_marks_assumptions() {
    let m = import_hwloc_file(&xml("8intel64-4n2t-memattrs.xml")).unwrap();
    let e = scenario_toml(&m, None).unwrap();
    assert_eq!(e.memory_source, MemorySource::Assumed);
    let s = e.toml;
    assert!(s.contains("packages = 4   # assumption: no package objects"));
    assert!(s.contains("cores_per_package = 2   # assumption: no core objects"));
    assert!(s.contains("cpu = \"unknown\"   # assumption"));
    assert!(s.contains("dram_bytes_per_node = 1073741824"));
    assert!(s.contains("llc_bytes = 33554432   # assumption"));
    assert!(s.contains("remote twice as slow (no distance matrix)"));
}

#[test]
fn sysfs_snapshot_with_inferred_node() {
    let (_tmp, root) = snapshot(
        "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
        "32em64t-2n8c+1mic",
    );
    let m = import_sysfs(&root).unwrap();
    let s = export(&m);
    assert!(s.contains(
        "name = \"nvme0\"\nkind = \"nvme\"\nmodel = \"8086:0953\"\nparent = \"rc0\"   # assumption: node 0 inferred from local_cpulist"
    ));
    assert!(s.contains("bdf = \"0000:00:02.0\"\nbars = [{ size = 16384 }]"));
    assert!(s.contains("name = \"mlx4_0\"\nkind = \"rnic\""));
    assert!(s.contains("name = \"eth0\"\nkind = \"nic\"\nmodel = \"8086:1521\"\nparent = \"rc0\""));
    assert!(s.contains("name = \"mic0\"\nkind = \"other\""));
    assert!(s.contains("parent = \"rc1\""));
    assert!(s.contains("llc_ways = 20\n"));
    assert!(s.contains("latency_ns = [[90.0, 189.0], [189.0, 90.0]]"));
}

#[test]
fn calibration_fills_memory_and_must_match() {
    let m = import_hwloc_file(&xml("24em64t-2n6c2t-pci.xml")).unwrap();
    let text = "# measured\n# node order: 0, 1\n[platform.imported.memory]\nlatency_ns = [[80.5, 130.0], [131.0, 81.0]]\nbandwidth_gbps = [[20.0, 10.0], [10.0, 20.0]]\n";
    let path = Path::new("cal.toml");
    let params = MemoryParams::parse(text, path).unwrap();
    let e = scenario_toml(
        &m,
        Some(Calibration {
            params: &params,
            path,
        }),
    )
    .unwrap();
    assert_eq!(e.memory_source, MemorySource::Calibration);
    assert!(e
        .toml
        .contains("# measured by `nudma calibrate` (cal.toml)"));
    assert!(e
        .toml
        .contains("latency_ns = [[80.5, 130.0], [131.0, 81.0]]"));
    assert!(!e.toml.contains("# assumption: local 90 ns"));

    let one = MemoryParams::parse(
        "[platform.imported.memory]\nlatency_ns = [[80.0]]\nbandwidth_gbps = [[20.0]]\n",
        path,
    )
    .unwrap();
    let err = scenario_toml(&m, Some(Calibration { params: &one, path }))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cal.toml") && err.contains("2 NUMA node(s)"),
        "{err}"
    );

    let wrong_nodes = MemoryParams::parse(&text.replace("0, 1", "0, 5"), path).unwrap();
    let err = scenario_toml(
        &m,
        Some(Calibration {
            params: &wrong_nodes,
            path,
        }),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("[0, 5]"), "{err}");
}

/// The `[[platform.imported.memory_node]]` tables of an export, each as its lines.
fn memory_nodes(s: &str) -> Vec<Vec<&str>> {
    s.split("\n[[platform.imported.memory_node]]\n")
        .skip(1)
        .map(|t| t.lines().take_while(|l| !l.is_empty()).collect())
        .collect()
}

#[test]
fn hbm_beside_dram_exports_as_memory_nodes_with_their_reported_bandwidth() {
    // One package, four DRAM nodes, each with an HBM node that hwloc places with the
    // same CPUs; Bandwidth attributes for each CPU node's own DRAM and HBM.
    let m = import_hwloc_file(&xml("64intel64-heteromem.xml")).unwrap();
    let e = scenario_toml(&m, None).unwrap();
    check_toml(&e.toml);
    assert_eq!(e.memory_source, MemorySource::Mixed);
    assert_eq!(e.node_ids, [0, 1, 2, 3, 4, 5, 6, 7]);
    let s = &e.toml;
    assert_eq!(value_of(s, "packages"), ["1"]);
    assert_eq!(value_of(s, "nodes_per_package"), ["4"]);
    let hbm = memory_nodes(s);
    assert_eq!(hbm.len(), 4);
    for t in &hbm {
        assert!(t.contains(&"kind = \"hbm\""), "{t:?}");
        assert!(
            t.contains(&"bytes = 2147483648   # 2147483648 bytes rounded down to a whole MiB"),
            "{t:?}"
        );
        // 90000 MiB/s from the node's CPUs, as hwloc reports it.
        assert!(
            t.iter()
                .any(|l| l.starts_with("gbps = { value = 94.37, basis = \"calibrated\"")),
            "{t:?}"
        );
    }
    // Node 4 sits with node 1's CPUs (hwloc's locality).
    assert!(
        hbm[0].contains(
            &"package = 0   # the machine places it with CPUs 4-7,20-23,36-39,52-55 (node 1's)"
        ),
        "{:?}",
        hbm[0]
    );
    // Rows are the four CPU nodes; the DRAM bandwidth is hwloc's, HBM's column too.
    assert!(s.contains(
        "bandwidth_gbps = [[23.59, 11.8, 11.8, 11.8, 11.8, 11.8, 11.8, 94.37], [11.8, 23.59"
    ));
    assert!(s.contains("0 of 32 latency and 8 of 32 bandwidth entries"));
    assert!(s.contains(
        "dram_gbps = { value = 23.6, basis = \"calibrated\", on = \"mean local bandwidth, from the memory matrix above"
    ));
    assert!(s.contains(
        "dram_latency_ns = { value = 90.0, basis = \"assumption\", why = \"mean local latency, from the memory matrix above, itself assumed\""
    ));
}

#[test]
fn gpu_memory_nodes_sit_with_their_gpus() {
    let (_tmp, root) = snapshot("nvidiagpunumanodes.tar.bz2", "nvidiagpunumanodes");
    let m = import_sysfs(&root).unwrap();
    let e = scenario_toml(&m, None).unwrap();
    check_toml(&e.toml);
    assert_eq!(e.node_ids, [0, 8, 250, 251, 252, 253, 254, 255]);
    let s = &e.toml;
    assert!(
        s.contains("cpu = \"POWER9\""),
        "POWER's cpuinfo names the CPU"
    );
    assert_eq!(value_of(s, "packages"), ["2"]);
    let gpu = memory_nodes(s);
    assert_eq!(gpu.len(), 6);
    // numa_status: node 250 is the memory of 0035:05:00.0, whose CPUs are node 8's.
    assert!(gpu[0].contains(&"# machine node 250 (GPUMemory), scenario node 2: no CPU runs on it"));
    assert!(gpu[0].contains(&"package = 1   # memory of GPU 0035:05:00.0, which the machine places on node 8 (from its local CPUs)"), "{:?}", gpu[0]);
    assert!(gpu[5].contains(&"package = 0   # memory of GPU 0004:05:00.0, which the machine places on node 0 (from its local CPUs)"), "{:?}", gpu[5]);
    assert!(gpu.iter().all(|t| t.contains(&"kind = \"gpu\"")));
    // Distances 10/40/80: GPU memory 8 × the local latency, an assumption.
    assert!(s.contains("latency_ns = [[90.0, 360.0, 720.0,"));
    assert!(gpu.iter().all(|t| t
        .iter()
        .any(|l| l.starts_with("gbps = { value = 7.50, basis = \"assumption\""))));
}

#[test]
fn memory_tiers_attach_by_their_hmat_initiator() {
    let (_tmp, root) = snapshot("fakeheteromemtiers.tar.bz2", "fakeheteromemtiers");
    let m = import_sysfs(&root).unwrap();
    let e = scenario_toml(&m, None).unwrap();
    check_toml(&e.toml);
    assert_eq!(e.node_ids, [0, 1, 2, 4, 6, 8, 9]);
    let tiers = memory_nodes(&e.toml);
    assert_eq!(tiers.len(), 4);
    assert!(tiers[0]
        .contains(&"package = 0   # the firmware (HMAT) names node 1 its nearest initiator"));
    assert!(tiers[2]
        .contains(&"package = 0   # the firmware (HMAT) names node 0 its nearest initiator"));
    assert!(tiers[0].contains(&"kind = \"other\"   # the machine does not say what memory it is"));
    // HMAT read bandwidth 10000 MiB/s for node 4 from node 1.
    assert!(
        tiers[0]
            .iter()
            .any(|l| l.starts_with("gbps = { value = 10.49, basis = \"calibrated\"")),
        "{:?}",
        tiers[0]
    );
}

#[test]
fn packages_sharing_nodes_become_one_package_and_the_interleave_node_is_memory_only() {
    // 64 Itanium packages, four per node, and a CPU-less node 16 of interleaved memory.
    let (_tmp, root) = snapshot("128ia64-17n4s2c.tar.bz2", "128ia64-17n4s2c");
    let m = import_sysfs(&root).unwrap();
    assert_eq!((m.packages.len(), m.nodes.len()), (64, 17));
    let e = scenario_toml(&m, None).unwrap();
    check_toml(&e.toml);
    let s = &e.toml;
    assert_eq!(value_of(s, "packages"), ["16"]);
    assert!(s.contains(
        "packages = 16   # assumption: 64 machine packages over 16 group(s) share NUMA nodes"
    ));
    assert_eq!(value_of(s, "cores_per_package"), ["8"]);
    let n16 = memory_nodes(s);
    assert_eq!(n16.len(), 1);
    assert!(n16[0].contains(&"package = 0   # assumption: served by the package of its nearest CPU node by the distance matrix, node 0 at 14 (nodes 0-15 are as near; the first is taken)"), "{:?}", n16[0]);
}

#[test]
fn devices_on_the_dgx2_take_gen3_links_as_an_assumption() {
    let m = import_hwloc_file(&xml("nvidiaDGX2.xml")).unwrap();
    let s = export(&m);
    assert!(!s.contains("recovered from hwloc's 15.753846"));
    assert!(!s.contains("gen = 4"), "a Xeon Platinum 8174 runs Gen3");
    assert!(s.contains("link = { gen = 3, width = 16 }   # assumption: hwloc's 15.753846 GB/s fits Gen3 x16, Gen4 x8, Gen5 x4, Gen6 x2; Gen3 x16 taken as this platform's PCIe generation is Gen3 (documented for the CPU model \"Intel(R) Xeon(R) Platinum 8174 CPU @ 3.10GHz\")"));
}

#[test]
fn values_beyond_the_fabrics_ranges_are_written_at_the_limit_as_assumptions() {
    use inspect::model::{Cache, CacheKind, Core, NumaNode, Package, Source};
    use inspect::CpuSet;
    // One package, two cores of 16 threads, a 128-way LLC, a clock misread as MHz.
    let mut m = Machine::empty(Source::Hwloc {
        path: "odd.xml".into(),
        major: 2,
    });
    let all = CpuSet::parse_list("0-31").unwrap();
    m.cpus = all.clone();
    m.packages.push(Package {
        id: 0,
        cpus: all.clone(),
    });
    for c in 0..2 {
        m.cores.push(Core {
            package: Some(0),
            id: c,
            cpus: CpuSet::from_iter(16 * c..16 * (c + 1)),
        });
    }
    m.nodes.push(NumaNode::new(0, all.clone(), Some(1 << 30)));
    m.caches.push(Cache {
        level: 3,
        kind: CacheKind::Unified,
        size_bytes: 64 << 20,
        ways: Some(128),
        line_bytes: Some(64),
        cpus: all,
    });
    m.clock_ghz = Some(3450.0);
    let s = export(&m);
    assert!(s.contains("threads_per_core = 8   # assumption: 32 hardware threads on 2 cores"));
    assert!(s.contains("llc_ways = 64   # assumption: the LLC reports 128 ways"));
    assert!(s.contains(
        "clock_ghz = 2.0   # assumption: the reported clock (3450 GHz) is not plausible"
    ));
    fabric::scenario::load(
        fabric::scenario::Source {
            name: "odd".into(),
            text: s.clone(),
        },
        &fabric::builtin::BuiltinResolver,
    )
    .unwrap_or_else(|e| panic!("{e}\n{s}"));
}

#[test]
fn a_machine_without_nodes_is_an_error_not_a_panic() {
    let m = Machine::empty(inspect::model::Source::Hwloc {
        path: "empty.xml".into(),
        major: 2,
    });
    let e = scenario_toml(&m, None).unwrap_err().to_string();
    assert_eq!(e, "empty.xml: the machine has no NUMA node to export");
}

#[test]
fn a_calibration_is_reordered_to_cpu_nodes_first() {
    use inspect::model::{NumaNode, Package, Source};
    use inspect::CpuSet;
    // Nodes 0 and 2 have CPUs; node 1 (between them) is memory only.
    let mut m = Machine::empty(Source::Hwloc {
        path: "mid.xml".into(),
        major: 2,
    });
    m.cpus = CpuSet::parse_list("0-3").unwrap();
    for (id, cpus) in [(0, "0-1"), (1, ""), (2, "2-3")] {
        m.nodes.push(NumaNode::new(
            id,
            CpuSet::parse_list(cpus).unwrap(),
            Some(1 << 30),
        ));
    }
    for (id, cpus) in [(0, "0-1"), (1, "2-3")] {
        m.packages.push(Package {
            id,
            cpus: CpuSet::parse_list(cpus).unwrap(),
        });
    }
    let text = "# node order: 0, 1, 2\n[platform.imported.memory]\nlatency_ns = [[80.0, 300.0, 150.0], [301.0, 302.0, 303.0], [151.0, 310.0, 81.0]]\nbandwidth_gbps = [[20.0, 5.0, 10.0], [1.0, 1.0, 1.0], [10.0, 6.0, 21.0]]\n";
    let path = Path::new("cal.toml");
    let params = MemoryParams::parse(text, path).unwrap();
    let e = scenario_toml(
        &m,
        Some(Calibration {
            params: &params,
            path,
        }),
    )
    .unwrap();
    check_toml(&e.toml);
    assert_eq!(e.node_ids, [0, 2, 1]);
    // Rows: CPU nodes 0 and 2; columns: 0, 2, then the memory-only node 1. The row
    // measured "from" node 1 (calibrate measures it from its nearest CPU node) is left out.
    assert!(
        e.toml
            .contains("latency_ns = [[80.0, 150.0, 300.0], [151.0, 81.0, 310.0]]"),
        "{}",
        e.toml
    );
    assert!(e
        .toml
        .contains("bandwidth_gbps = [[20.0, 10.0, 5.0], [10.0, 21.0, 6.0]]"));
    // Its bandwidth as a DMA target: the best of its column, measured.
    assert!(e
        .toml
        .contains("gbps = { value = 6.00, basis = \"calibrated\""));
    let _ = fabric::scenario::load(
        fabric::scenario::Source {
            name: "mid".into(),
            text: e.toml.clone(),
        },
        &fabric::builtin::BuiltinResolver,
    )
    .unwrap_or_else(|err| panic!("{err}\n{}", e.toml));
}

#[test]
fn cxl_memory_expanders_are_named_not_exported_as_devices() {
    let m = import_hwloc_file(&xml("cxlmem+dax.v3.xml")).unwrap();
    let s = export(&m);
    assert!(s.contains("# 4 memory controller function(s) (mem2 (0000:11:00.0), mem0 (0000:12:00.0), mem3 (0000:15:00.0), mem1 (0000:16:00.0)) are not exported as devices"), "{s}");
    assert!(!s.contains("name = \"mem0\""));
}
