//! `nudma inspect --export` writes scenarios the fabric accepts: every fixture machine
//! (hwloc XML and sysfs snapshots) exports, loads, and keeps each device on its node's
//! root complex.

use std::path::{Path, PathBuf};

use fabric::scenario::{load, Source};
use fabric::{Fabric, NodeKind};

/// The hwloc fixtures: `$NUDMA_FIXTURES`, else the repository's `fixtures/hwloc`.
fn fixtures() -> PathBuf {
    let dir = match std::env::var_os("NUDMA_FIXTURES") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hwloc"),
    };
    assert!(
        dir.join("README.md").exists(),
        "hwloc fixtures not found at {} (set NUDMA_FIXTURES)",
        dir.display()
    );
    dir
}

fn load_export(m: &inspect::Machine, name: &str) -> Fabric {
    let e = inspect::export::scenario_toml(m, None).expect("exports");
    let s = load(
        Source {
            name: name.into(),
            text: e.toml.clone(),
        },
        &fabric::builtin::BuiltinResolver,
    )
    .unwrap_or_else(|err| panic!("{name} export does not load: {err}\n{}", e.toml));
    Fabric::from_scenario(s).unwrap()
}

/// `host.dev` → the root complex it hangs under.
fn root_of(f: &Fabric, dev: &str) -> String {
    let n = match f
        .resolve(&format!("{}.{dev}", f.topo.hosts[0].name))
        .unwrap()
    {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    };
    f.topo.node(f.topo.node(n).root).name.clone()
}

#[test]
fn every_hwloc_fixture_exports_a_loadable_scenario() {
    // Every XML fixture in the repository, whatever it describes (24 packages, memory-
    // side caches with one way, CXL memory, a DGX-2).
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join("xml"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".xml").map(str::to_string))
        .collect();
    names.sort();
    assert!(names.len() >= 8, "{names:?}");
    for x in names.iter().map(String::as_str) {
        let m = inspect::import_hwloc_file(&fixtures().join(format!("xml/{x}.xml"))).unwrap();
        let f = load_export(&m, x);
        let nodes = f.topo.platforms[0].numa_nodes();
        assert_eq!(
            nodes as usize,
            m.nodes.len(),
            "{x}: NUMA nodes survive the export"
        );
    }
    let m = inspect::import_hwloc_file(&fixtures().join("xml/32em64t-2n8c2t-pci-normalio.xml"))
        .unwrap();
    let f = load_export(&m, "normalio");
    // REFERENCE of the fixture: the I350 ports and the ConnectX-4 sit behind node 1.
    assert_eq!(root_of(&f, "eth0"), "rc1");
    assert_eq!(root_of(&f, "mlx5_0"), "rc1");
    assert_eq!(root_of(&f, "sda"), "rc0");
    let devices = f
        .topo
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Function { .. }))
        .count();
    assert_eq!(devices, 10);
}

#[test]
fn sysfs_snapshots_export_loadable_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    for t in [
        "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
        "40intel64-2g2n4c+pcilocality.tar.bz2",
    ] {
        let ok = std::process::Command::new("tar")
            .arg("xjf")
            .arg(fixtures().join("sysfs").join(t))
            .current_dir(dir.path())
            .status()
            .expect("tar runs");
        assert!(ok.success());
    }
    for root in ["32em64t-2n8c+1mic", "40intel64-2g2n4c+pci"] {
        let m = inspect::import_sysfs(&dir.path().join(root)).unwrap();
        let f = load_export(&m, root);
        // "2g2n4c" is two groups of two nodes: four NUMA nodes, not two.
        let expect = if root.starts_with("40intel64") { 4 } else { 2 };
        assert_eq!(m.nodes.len(), expect, "{root}");
        assert_eq!(f.topo.platforms[0].numa_nodes() as usize, expect, "{root}");
        assert!(!f.topo.devices.is_empty(), "{root}: devices exported");
    }
}
