//! Every export passes the fabric's own check (what `nudma topo check` runs): each
//! fixture of the repository, and machines at the edges of what the fabric can hold
//! (long names, many 32-bit BARs, memory beyond its 64 TiB a node).

mod common;

use std::path::Path;

use common::{edit, export_loads, snapshot, xml_text, PciSpec};
use inspect::hwloc::parse_hwloc_xml;
use inspect::model::{Cache, CacheKind, NumaNode, Package, Source};
use inspect::{import_hwloc_file, import_sysfs, CpuSet, Machine};

/// The fabric's limits the export must respect (crates/fabric/src/scenario).
const FABRIC_MAX_NODE_BYTES: u64 = 1 << 46;
const FABRIC_MAX_NAME: usize = 64;

#[test]
fn every_fixture_export_loads_in_the_fabric() {
    let dir = common::fixtures().join("xml");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("xml") {
            continue;
        }
        let m = import_hwloc_file(&path).unwrap();
        export_loads(&m);
        seen += 1;
    }
    assert_eq!(seen, 8, "every XML fixture");
    for (archive, root) in [
        ("128ia64-17n4s2c.tar.bz2", "128ia64-17n4s2c"),
        (
            "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
            "32em64t-2n8c+1mic",
        ),
        (
            "40intel64-2g2n4c+pcilocality.tar.bz2",
            "40intel64-2g2n4c+pci",
        ),
        ("fakeheteromemtiers.tar.bz2", "fakeheteromemtiers"),
        ("nvidiagpunumanodes.tar.bz2", "nvidiagpunumanodes"),
    ] {
        let (_tmp, root) = snapshot(archive, root);
        let m = import_sysfs(&root).unwrap();
        export_loads(&m);
    }
}

fn name_values(toml: &str) -> Vec<String> {
    toml.lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .map(|v| v[..v.find('"').unwrap()].to_string())
        .collect()
}

#[test]
fn long_file_and_host_names_become_valid_names() {
    // No HostName: the scenario and host are named after the file.
    let text = xml_text("16amd64-4distances.xml");
    let long = format!("/tmp/{}.xml", "a-very-long-export-name".repeat(8));
    let m = parse_hwloc_xml(&text, Path::new(&long)).unwrap();
    let s = export_loads(&m);
    let names = name_values(&s);
    assert!(
        names[0].starts_with("imported-a-very-long-export-name"),
        "{names:?}"
    );
    assert!(
        names.iter().all(|n| n.len() <= FABRIC_MAX_NAME),
        "{names:?}"
    );
    // A long HostName, and OS device names beyond the limit.
    let text = xml_text("24em64t-2n6c2t-pci.xml");
    let text = edit(
        &text,
        "value=\"mirage004\"",
        &format!("value=\"{}\"", "h".repeat(200)),
    );
    let text = edit(
        &text,
        "name=\"eth0\"",
        &format!("name=\"{}\"", "e".repeat(100)),
    );
    let text = edit(
        &text,
        "name=\"eth1\"",
        &format!("name=\"{}\"", "e".repeat(100)),
    );
    let m = parse_hwloc_xml(&text, Path::new("host.xml")).unwrap();
    let s = export_loads(&m);
    let names = name_values(&s);
    assert!(
        names.iter().all(|n| n.len() <= FABRIC_MAX_NAME),
        "{names:?}"
    );
    let long_devices = names.iter().filter(|n| n.starts_with("eeee")).count();
    assert_eq!(long_devices, 2, "{names:?}");
}

/// A sysfs `resource` line: start, end, flags.
fn resource_line(start: u64, size: u64, flags: u64) -> String {
    format!(
        "0x{start:016x} 0x{:016x} 0x{flags:016x}\n",
        start + size - 1
    )
}

#[test]
fn thirty_two_bit_bars_are_exported_as_such() {
    const MEM: u64 = 0x0004_0200;
    const MEM64: u64 = 0x0014_0204;
    let t = common::two_socket();
    // Six 32-bit BARs fill the six slots; as 64-bit ones they would need twelve.
    let six: String = (0..6)
        .map(|i| resource_line(0x9000_0000 + i * 0x10_0000, 0x1000, MEM))
        .collect();
    let p = t.pci(
        "pci0000:00",
        &["0000:00:01.0"],
        &PciSpec::new("0000:01:00.0", 0x020000, 0, "0-3"),
    );
    t.file(&format!("{p}/resource"), &six);
    // A 64-bit BAR (two slots) then a 32-bit one.
    let mixed = resource_line(0x38_0000_0000, 1 << 30, MEM64)
        + "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        + &resource_line(0x9100_0000, 0x4000, MEM);
    let q = t.pci(
        "pci0000:00",
        &["0000:00:02.0"],
        &PciSpec::new("0000:02:00.0", 0x010802, 0, "0-3"),
    );
    t.file(&format!("{q}/resource"), &mixed);
    let m = import_sysfs(t.root()).unwrap();
    let s = export_loads(&m);
    assert!(
        s.contains("bars = [{ size = 4096, bits = 32 }, { size = 4096, bits = 32 }, { size = 4096, bits = 32 }, { size = 4096, bits = 32 }, { size = 4096, bits = 32 }, { size = 4096, bits = 32 }]"),
        "{s}"
    );
    assert!(
        s.contains("bars = [{ size = 1073741824 }, { size = 16384, bits = 32 }]"),
        "{s}"
    );
}

#[test]
fn bars_the_fabric_cannot_hold_are_left_out_saying_so() {
    const MEM: u64 = 0x0004_0200;
    const MEM64: u64 = 0x0014_0204;
    let t = common::two_socket();
    // Five lines flagged 64-bit (ten slots of six) and a 32-bit BAR of 3 bytes.
    let mut res: String = (0..5)
        .map(|i| resource_line(0x38_0000_0000 + i * 0x10_0000, 0x10_0000, MEM64))
        .collect();
    res.push_str(&resource_line(0x9800_0000, 3, MEM));
    let p = t.pci(
        "pci0000:00",
        &["0000:00:01.0"],
        &PciSpec::new("0000:01:00.0", 0x020000, 0, "0-3"),
    );
    t.file(&format!("{p}/resource"), &res);
    let m = import_sysfs(t.root()).unwrap();
    let s = export_loads(&m);
    assert!(
        s.contains("bars = [{ size = 1048576 }, { size = 1048576 }, { size = 1048576 }]   # assumption: BAR(s) of 1048576, 1048576, 3 bytes left out: the fabric takes six 32-bit slots a function"),
        "{s}"
    );
}

fn machine_with_node_bytes(bytes: u64, nodes: u32) -> Machine {
    let mut m = Machine::empty(Source::Hwloc {
        path: "huge.xml".into(),
        major: 2,
    });
    for n in 0..nodes {
        let cpus = CpuSet::from_iter(4 * n..4 * (n + 1));
        m.cpus = m.cpus.union(&cpus);
        m.packages.push(Package {
            id: n,
            cpus: cpus.clone(),
        });
        m.nodes.push(NumaNode::new(n, cpus, Some(bytes)));
    }
    m
}

#[test]
fn memory_beyond_the_fabrics_limit_is_exported_at_the_limit() {
    // 1 PiB a node: a value the importer accepts (below 2^52) but the fabric cannot hold.
    let mut m = machine_with_node_bytes(1 << 50, 2);
    // A memory-only node of the same size.
    let mut hbm = NumaNode::new(2, CpuSet::new(), Some(1 << 50));
    hbm.kind = Some("HBM".into());
    m.nodes.push(hbm);
    let s = export_loads(&m);
    assert!(
        s.contains(&format!(
            "dram_bytes_per_node = {FABRIC_MAX_NODE_BYTES}   # assumption: the nodes hold 1125899906842624 bytes, beyond the fabric's 64 TiB a node; written at that limit"
        )),
        "{s}"
    );
    assert!(
        s.contains(&format!(
            "bytes = {FABRIC_MAX_NODE_BYTES}   # assumption: the node holds 1125899906842624 bytes, beyond the fabric's 64 TiB a node; written at that limit"
        )),
        "{s}"
    );
    // Sizes whose sum does not fit 64 bits: the mean is still exact.
    let m = machine_with_node_bytes(u64::MAX - 1, 3);
    let s = export_loads(&m);
    assert!(
        s.contains("the nodes hold 18446744073709551614 bytes"),
        "{s}"
    );
    // The whole machine's size split over nodes when nodes say nothing.
    let mut m = machine_with_node_bytes(0, 2);
    m.nodes.iter_mut().for_each(|n| n.memory_bytes = None);
    m.total_memory_bytes = Some(u64::MAX);
    export_loads(&m);
}

#[test]
fn caches_and_core_counts_beyond_the_fabric_are_written_at_its_limits() {
    let mut m = machine_with_node_bytes(1 << 30, 1);
    m.caches.push(Cache {
        level: 3,
        kind: CacheKind::Unified,
        size_bytes: u64::MAX,
        ways: Some(0),
        line_bytes: None,
        cpus: m.cpus.clone(),
    });
    for id in 0..5000 {
        m.cores.push(inspect::model::Core {
            package: Some(0),
            id,
            cpus: CpuSet::single(id % 4),
        });
    }
    let s = export_loads(&m);
    assert!(
        s.contains("cores_per_package = 1024   # assumption:"),
        "{s}"
    );
    assert!(
        s.contains("llc_bytes = 1099511627776   # assumption:"),
        "{s}"
    );
}
