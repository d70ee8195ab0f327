//! Every hwloc XML fixture (hwloc 3.0 exports of real machines) imported and audited:
//! node counts, device-to-node attachment, classes, distances, memory attributes and
//! the findings each should (and should not) produce.

mod common;

use common::{kinds, xml};
use inspect::audit::{audit, Severity};
use inspect::model::{Initiator, Machine};
use inspect::pci::{Bdf, DeviceClass, OsDeviceKind};
use inspect::{import_hwloc_file, CpuSet};

fn load(name: &str) -> Machine {
    import_hwloc_file(&xml(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn bdf(s: &str) -> Bdf {
    s.parse().unwrap()
}

/// (class, node) of every PCI function with this address (addresses can repeat in
/// hand-edited exports).
fn place(m: &Machine, addr: &str) -> Vec<(DeviceClass, Option<u32>)> {
    m.pci
        .iter()
        .filter(|d| d.bdf == bdf(addr))
        .map(|d| (d.class(), d.numa_node))
        .collect()
}

fn count(m: &Machine, class: DeviceClass) -> usize {
    m.pci.iter().filter(|d| d.class() == class).count()
}

#[test]
fn xeon_x58_two_nodes_with_pci() {
    let m = load("24em64t-2n6c2t-pci.xml");
    assert_eq!(m.nodes.len(), 2);
    assert_eq!(m.packages.len(), 2);
    assert_eq!(m.cores.len(), 12);
    assert_eq!(m.cpus.len(), 24);
    assert_eq!(m.hostname.as_deref(), Some("mirage004"));
    assert_eq!(m.nodes[0].memory_bytes, Some(19_316_633_600));
    assert_eq!(m.nodes[1].memory_bytes, Some(19_327_348_736));
    assert_eq!(m.nodes[0].cpus, CpuSet::parse_hwloc("0x00555555").unwrap());
    let llc = m.last_level_cache().unwrap();
    assert_eq!(
        (llc.level, llc.size_bytes, llc.ways),
        (3, 12_582_912, Some(16))
    );
    let d = m.numa_distances().unwrap();
    assert_eq!(d.values, vec![10.0, 20.0, 20.0, 10.0]);

    // Node 0: two 82576 ports, a Mellanox InfiniBand HCA, a GPU, the BMC VGA and two
    // SATA controllers behind the X58 root ports; node 1: two GPUs.
    assert_eq!(place(&m, "0000:04:00.0"), vec![(DeviceClass::Net, Some(0))]);
    assert_eq!(place(&m, "0000:04:00.1"), vec![(DeviceClass::Net, Some(0))]);
    assert_eq!(
        place(&m, "0000:05:00.0"),
        vec![(DeviceClass::Infiniband, Some(0))]
    );
    assert_eq!(place(&m, "0000:06:00.0"), vec![(DeviceClass::Gpu, Some(0))]);
    assert_eq!(place(&m, "0000:01:03.0"), vec![(DeviceClass::Gpu, Some(0))]);
    assert_eq!(
        place(&m, "0000:00:1f.2"),
        vec![(DeviceClass::Storage, Some(0))]
    );
    assert_eq!(
        place(&m, "0000:00:1f.5"),
        vec![(DeviceClass::Storage, Some(0))]
    );
    assert_eq!(place(&m, "0000:14:00.0"), vec![(DeviceClass::Gpu, Some(1))]);
    assert_eq!(place(&m, "0000:11:00.0"), vec![(DeviceClass::Gpu, Some(1))]);
    assert_eq!(
        place(&m, "0000:10:03.0"),
        vec![(DeviceClass::Bridge, Some(1))]
    );
    assert_eq!(m.pci.len(), 15);
    assert_eq!(count(&m, DeviceClass::Net), 2);
    assert_eq!(count(&m, DeviceClass::Infiniband), 1);
    assert_eq!(count(&m, DeviceClass::Gpu), 4);
    assert_eq!(count(&m, DeviceClass::Storage), 2);
    assert_eq!(count(&m, DeviceClass::Bridge), 6);

    // hwloc 3.0 osdev_type bit masks: 16 network, 48 network|OpenFabrics, 1 storage.
    let hca = &m.pci[m.pci_index(bdf("0000:05:00.0")).unwrap()];
    let names: Vec<(&str, OsDeviceKind)> = hca
        .os_devices
        .iter()
        .map(|o| (o.name.as_str(), o.kind))
        .collect();
    assert_eq!(
        names,
        vec![
            ("eth2", OsDeviceKind::Net),
            ("ib0", OsDeviceKind::Net),
            ("mlx4_0", OsDeviceKind::Openfabrics)
        ]
    );
    assert_eq!(hca.primary_name(), Some("mlx4_0"));
    let sata = &m.pci[m.pci_index(bdf("0000:00:1f.2")).unwrap()];
    assert_eq!(sata.os_devices[0].kind, OsDeviceKind::Block);
    let nic = &m.pci[m.pci_index(bdf("0000:04:00.0")).unwrap()];
    assert_eq!(nic.pci_class_string().as_deref(), Some("0x020000"));
    assert_eq!(nic.link.gbytes_per_s, Some(0.2));
    assert_eq!(
        m.pci[nic.parent.unwrap()].bdf,
        bdf("0000:00:01.0"),
        "the NIC hangs below root port 1"
    );

    let a = audit(&m);
    assert_eq!(a.numa_nodes, 2);
    assert!(a.nudma_possible);
    assert_eq!(a.count(Severity::Error), 0);
    assert_eq!(a.count(Severity::Warning), 0, "{:#?}", a.findings);
    assert!(kinds(&a, "numa-node-unknown").is_empty());
    let loc = kinds(&a, "io-locality");
    assert_eq!(loc.len(), 1);
    assert!(loc[0]
        .what
        .contains("node 1: 0000:14:00.0 (gpu), 0000:11:00.0 (gpu)"));
    assert_eq!(kinds(&a, "not-audited").len(), 1);
    assert!(
        kinds(&a, "multi-pf-nic").is_empty(),
        "two ports on one card"
    );
}

#[test]
fn xeon_e5_normal_io() {
    let m = load("32em64t-2n8c2t-pci-normalio.xml");
    assert_eq!(m.nodes.len(), 2);
    assert_eq!(m.packages.len(), 2);
    assert_eq!(m.cores.len(), 16);
    assert_eq!(m.cpus.len(), 32);
    assert_eq!(m.hostname.as_deref(), Some("conan"));
    assert_eq!(
        m.cpu_model.as_deref(),
        Some("Intel(R) Xeon(R) CPU E5-2650 0 @ 2.00GHz")
    );
    assert_eq!(m.clock_ghz, Some(2.0));

    // Node 1 carries the I350 (eth0, eth1), the Teslas, the AMD GPU and the ConnectX-4.
    assert_eq!(place(&m, "0000:81:00.0"), vec![(DeviceClass::Net, Some(1))]);
    assert_eq!(place(&m, "0000:81:00.1"), vec![(DeviceClass::Net, Some(1))]);
    assert_eq!(place(&m, "0000:83:00.0"), vec![(DeviceClass::Gpu, Some(1))]);
    assert_eq!(place(&m, "0000:84:00.0"), vec![(DeviceClass::Gpu, Some(1))]);
    assert_eq!(place(&m, "0000:84:00.1"), vec![(DeviceClass::Gpu, Some(1))]);
    // 0000:04:00.0 appears twice: the C602 SAS unit on node 0 and the ConnectX-4
    // that the export placed below root port 80:03.0 on node 1.
    assert_eq!(
        place(&m, "0000:04:00.0"),
        vec![
            (DeviceClass::Storage, Some(0)),
            (DeviceClass::Infiniband, Some(1))
        ]
    );
    assert_eq!(place(&m, "0000:03:00.0"), vec![(DeviceClass::Gpu, Some(0))]);
    assert_eq!(place(&m, "0000:05:03.0"), vec![(DeviceClass::Gpu, Some(0))]);
    assert_eq!(
        place(&m, "0000:00:1f.2"),
        vec![(DeviceClass::Storage, Some(0))]
    );
    assert_eq!(count(&m, DeviceClass::Net), 2);
    assert_eq!(count(&m, DeviceClass::Infiniband), 1);
    assert_eq!(count(&m, DeviceClass::Gpu), 5);
    assert_eq!(count(&m, DeviceClass::Storage), 2);
    assert_eq!(count(&m, DeviceClass::Bridge), 6);

    let eth0 = m.pci_by_os_name("eth0").unwrap();
    assert_eq!(eth0.bdf, bdf("0000:81:00.0"));
    assert_eq!(
        eth0.device_name.as_deref(),
        Some("I350 Gigabit Network Connection")
    );
    // CUDA (GPU|COPROC = 12) and DRM (GPU = 4) devices of the Tesla.
    let tesla = m.pci_by_os_name("cuda0").unwrap();
    assert!(tesla.os_devices.iter().all(|o| o.kind == OsDeviceKind::Gpu));
    assert_eq!(
        m.pci_by_os_name("mlx5_0").unwrap().class(),
        DeviceClass::Infiniband
    );
    // pci_link_speed="0.000000" means unknown.
    assert!(m.pci.iter().all(|d| d.link.gbytes_per_s.is_none()));

    // The one warning: the repeated address, both functions kept.
    let a = audit(&m);
    assert_eq!(a.count(Severity::Error), 0);
    let warned: Vec<&str> = a
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .map(|f| f.what.as_str())
        .collect();
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert!(
        warned[0].ends_with(": PCIDev pci_busid=\"0000:04:00.0\": the address of the PCIDev at line 100 too; both functions are kept, told apart by their names"),
        "{}",
        warned[0]
    );
    let json = a.to_json();
    let ib = json["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["class"] == "infiniband")
        .unwrap();
    assert_eq!(ib["bdf"], "0000:04:00.0");
    assert_eq!(ib["numa_node"], 1);
    assert_eq!(ib["pci_class"], "0x020700");
}

#[test]
fn amd_eight_nodes_with_distance_matrices() {
    let m = load("16amd64-4distances.xml");
    assert_eq!(m.nodes.len(), 8);
    assert_eq!(m.packages.len(), 8);
    assert_eq!(m.cores.len(), 16);
    assert_eq!(m.cpus.len(), 16);
    assert!(m.pci.is_empty());
    // Package 0 holds NUMA node 1 and package 1 holds node 0 (os indexes differ).
    assert_eq!(m.node(1).unwrap().cpus.to_list_string(), "0-1");
    assert_eq!(m.node(0).unwrap().cpus.to_list_string(), "2-3");
    assert_eq!(m.node(5).unwrap().cpus.to_list_string(), "6-7");
    assert_eq!(m.package_of_node(5), Some(3));

    // Four matrices: NUMA latency (os indexes, permuted), Package (gp → package
    // os indexes), PU and Core.
    assert_eq!(m.distances.len(), 4);
    let numa = m.numa_distances().unwrap();
    assert_eq!(numa.name.as_deref(), Some("NUMALatency"));
    assert_eq!(numa.ids, vec![1, 0, 2, 5, 4, 3, 6, 7]);
    for a in 0..8u64 {
        for b in 0..8u64 {
            let want = if a == b { 10.0 } else { 20.0 };
            assert_eq!(numa.get(a, b), Some(want), "{a}->{b}");
        }
    }
    let pkg = m
        .distances
        .iter()
        .find(|d| d.object_type == "Package")
        .unwrap();
    // gp 16 4 40 77 53 89 28 65 are packages 1 0 3 6 4 7 2 5.
    assert_eq!(pkg.ids, vec![1, 0, 3, 6, 4, 7, 2, 5]);
    assert_eq!(pkg.get(1, 0), Some(20.0));
    assert_eq!(pkg.get(1, 3), Some(40.0));
    assert_eq!(pkg.get(1, 4), Some(80.0));

    let a = audit(&m);
    assert_eq!(a.numa_nodes, 8);
    assert_eq!(
        a.distances.as_ref().unwrap()[0],
        vec![10.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0]
    );
    assert_eq!(a.count(Severity::Warning) + a.count(Severity::Error), 0);
    assert!(a.devices.is_empty());
}

#[test]
fn synthetic_four_nodes_with_memory_attributes() {
    let m = load("8intel64-4n2t-memattrs.xml");
    assert_eq!(m.nodes.len(), 4);
    assert!(m.packages.is_empty(), "a synthetic topology of groups");
    assert_eq!(m.cpus.len(), 8);
    for (i, n) in m.nodes.iter().enumerate() {
        assert_eq!(n.id, i as u32);
        assert_eq!(n.memory_bytes, Some(1 << 30));
        assert_eq!(n.cpus.len(), 2);
    }
    let names: Vec<&str> = m
        .memory_attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, vec!["Bandwidth", "foobar", "barnoinit", "coincoin"]);
    let bw = &m.memory_attributes[0];
    assert_eq!(bw.values.len(), 1);
    assert_eq!(bw.values[0].target_node, Some(1), "gp 8 is NUMA node 1");
    assert_eq!(bw.values[0].value, 20);
    assert_eq!(
        bw.values[0].initiator,
        Some(Initiator::Cpus(CpuSet::parse_list("0-7").unwrap()))
    );
    let foobar = &m.memory_attributes[1];
    assert_eq!(foobar.values.len(), 10);
    // An initiator given as an object (PU gp 15 = CPU 7) resolves to its CPUs.
    assert_eq!(
        foobar.values[0].initiator,
        Some(Initiator::Cpus(CpuSet::single(7)))
    );
    assert_eq!(foobar.values[0].target_node, Some(0));
    let barnoinit = &m.memory_attributes[2];
    assert!(barnoinit.values.iter().all(|v| v.initiator.is_none()));
    // A value targeting a PU is not a NUMA target.
    assert_eq!(
        barnoinit
            .values
            .iter()
            .filter(|v| v.target_node.is_none())
            .count(),
        2
    );
    assert!(m.memory_attributes[3].values.is_empty());

    let a = audit(&m);
    assert_eq!(a.numa_nodes, 4);
    assert_eq!(a.count(Severity::Warning) + a.count(Severity::Error), 0);
}

#[test]
fn every_xml_fixture_audits_and_serialises() {
    let dir = common::fixtures().join("xml");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("xml") {
            continue;
        }
        let m = import_hwloc_file(&path).unwrap();
        let a = audit(&m);
        let json = a.to_json();
        assert_eq!(json["numa_nodes"], m.nodes.len());
        assert!(json["devices"].is_array() && json["findings"].is_array());
        assert!(!inspect::report::render_human(&a).is_empty());
        seen += 1;
    }
    // Every XML file of fixtures/hwloc/README.md's table: none may go missing unnoticed.
    assert_eq!(seen, 8);
}

#[test]
fn hbm_nodes_beside_dram_are_memory_only() {
    // hwloc gives each HBM node the CPUs of its DRAM neighbour; the CPUs run on the
    // DRAM node, so a CPU set within one cluster is on one node, not two.
    let m = load("64intel64-heteromem.xml");
    assert_eq!(m.nodes.len(), 8);
    assert_eq!(m.node(7).unwrap().kind.as_deref(), Some("HBM"));
    assert_eq!(m.node(0).unwrap().kind.as_deref(), Some("DRAM"));
    assert_eq!(m.node_of_cpu(0), Some(0));
    assert!((4..8).all(|n| m.is_memory_only(n)));
    assert!((0..4).all(|n| !m.is_memory_only(n)));
    let cluster = CpuSet::parse_list("0-3,16-19").unwrap();
    assert_eq!(m.nodes_of_cpus(&cluster), CpuSet::single(0));
    assert_eq!(m.node_containing(&cluster), Some(0));
    assert_eq!(m.home_cpus(7), CpuSet::new());
    // The audit says so, in JSON and for people.
    let a = audit(&m);
    let n7 = a.nodes.iter().find(|n| n.id == 7).unwrap();
    assert!(n7.memory_only && n7.kind.as_deref() == Some("HBM"));
    assert!(!a.nodes[0].memory_only);
    assert!(inspect::report::render_human(&a)
        .contains("node 7: memory only (HBM), beside CPUs 0-3,16-19,32-35,48-51, 2.0 GiB"));
}
