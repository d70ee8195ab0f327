//! The two sysfs/procfs snapshots (hwloc-gather-topology of real machines), unpacked
//! with `tar xjf` into a temp dir, imported and audited.

mod common;

use common::{kinds, on_device, snapshot};
use inspect::audit::{audit, Severity};
use inspect::model::NoteLevel;
use inspect::pci::{Bdf, DeviceClass, OsDeviceKind};
use inspect::{import_sysfs, CpuSet};

fn bdf(s: &str) -> Bdf {
    s.parse().unwrap()
}

#[test]
fn xeon_e5_with_nvme_infiniband_and_xeon_phi() {
    let (_tmp, root) = snapshot(
        "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
        "32em64t-2n8c+1mic",
    );
    let m = import_sysfs(&root).unwrap();
    assert_eq!(m.nodes.len(), 2);
    assert_eq!(m.nodes[0].cpus, CpuSet::parse_list("0-7").unwrap());
    assert_eq!(m.nodes[1].cpus, CpuSet::parse_list("8-15").unwrap());
    assert_eq!(m.nodes[0].memory_bytes, Some(16_747_124 * 1024));
    assert_eq!(m.nodes[1].memory_bytes, Some(16_777_216 * 1024));
    assert_eq!(m.packages.len(), 2);
    assert_eq!(m.cores.len(), 16);
    assert_eq!(m.cpus.len(), 16);
    assert_eq!(
        m.numa_distances().unwrap().values,
        vec![10.0, 21.0, 21.0, 10.0]
    );
    assert_eq!(
        m.cpu_model.as_deref(),
        Some("Intel(R) Xeon(R) CPU E5-2680 0 @ 2.70GHz")
    );
    assert_eq!(m.clock_ghz, Some(2.7));
    let llc = m.last_level_cache().unwrap();
    assert_eq!(
        (llc.level, llc.size_bytes, llc.ways),
        (3, 20 << 20, Some(20))
    );
    assert_eq!(m.pci.len(), 137);

    let dev = |a: &str| &m.pci[m.pci_index(bdf(a)).unwrap()];
    // NVMe: numa_node = -1 although local_cpulist (0-3) lies within node 0.
    let nvme = dev("0000:00:02.0");
    assert_eq!(nvme.class(), DeviceClass::Nvme);
    assert_eq!(nvme.numa_node_raw, Some(-1));
    assert_eq!(nvme.numa_node, None);
    assert_eq!(nvme.local_cpus, Some(CpuSet::parse_list("0-3").unwrap()));
    assert_eq!(
        nvme.os_names(OsDeviceKind::NvmeController)
            .collect::<Vec<_>>(),
        ["nvme0"]
    );
    assert_eq!(
        nvme.os_names(OsDeviceKind::Block).collect::<Vec<_>>(),
        ["nvme0n1"]
    );
    // Two I350 ports on node 0, the ConnectX-3 (IPoIB) and the Xeon Phi on node 1.
    assert_eq!(
        (dev("0000:02:00.0").class(), dev("0000:02:00.0").numa_node),
        (DeviceClass::Net, Some(0))
    );
    assert_eq!(dev("0000:02:00.0").primary_name(), Some("eth0"));
    assert_eq!(dev("0000:02:00.3").primary_name(), Some("eth1"));
    assert_eq!(dev("0000:02:00.3").numa_node, Some(0));
    let hca = dev("0000:82:00.0");
    assert_eq!(
        (hca.class(), hca.numa_node),
        (DeviceClass::Infiniband, Some(1))
    );
    assert_eq!(hca.primary_name(), Some("mlx4_0"));
    assert!(hca.os_names(OsDeviceKind::Net).any(|n| n == "ib0"));
    let mic = dev("0000:83:00.0");
    assert_eq!((mic.class(), mic.numa_node), (DeviceClass::Other, Some(1)));
    assert_eq!(mic.primary_name(), Some("mic0"));
    assert_eq!(dev("0000:00:1f.2").primary_name(), Some("sda"));
    assert_eq!(dev("0000:05:00.0").class(), DeviceClass::Gpu);
    // The tree: 05:00.0 sits below the bridge 04:00.0 below root port 00:1c.0.
    let vga = dev("0000:05:00.0");
    let up = &m.pci[vga.parent.unwrap()];
    assert_eq!(up.bdf, bdf("0000:04:00.0"));
    assert_eq!(m.pci[up.parent.unwrap()].bdf, bdf("0000:00:1c.0"));
    assert_eq!(vga.host_bridge, "pci0000:00");
    assert_eq!(hca.host_bridge, "pci0000:80");
    assert_eq!(dev("0000:02:00.0").irqs.len(), 9, "msi_irqs");
    let bars = &dev("0000:02:00.0").bars;
    let sizes: Vec<(u64, bool)> = bars.iter().map(|b| (b.size, b.is_64bit)).collect();
    assert_eq!(sizes, vec![(0x20000, false), (0x4000, false)]);
    // XPS/RPS masks are all zero (unset) in this snapshot.
    let eth0 = m.net_interfaces.iter().find(|n| n.name == "eth0").unwrap();
    assert_eq!(eth0.tx_queues.len(), 8);
    assert!(eth0
        .tx_queues
        .iter()
        .all(|q| q.cpus.as_ref().unwrap().is_empty()));
    // No /proc/interrupts in the snapshot: noted, not fatal.
    assert!(m
        .notes
        .iter()
        .any(|n| n.level == NoteLevel::Info && n.path.ends_with("proc/interrupts")));

    let a = audit(&m);
    assert_eq!(a.numa_nodes, 2);
    assert_eq!(a.count(Severity::Error), 0);
    assert_eq!(a.count(Severity::Warning), 1, "{:#?}", a.findings);
    let f = on_device(&a, "0000:00:02.0", "numa-node-unknown");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].why.contains("lies within node 0"));
    assert!(f[0]
        .fix
        .iter()
        .any(|c| c.starts_with("echo 0 > /sys/bus/pci/devices/0000:00:02.0/numa_node")));
    let report = a.device("0000:00:02.0").unwrap();
    assert_eq!(report.numa_node, None);
    assert_eq!(report.inferred_numa_node, Some(0));
    assert_eq!(report.findings.len(), 1);
    // The 92 uncore functions on buses 7f and ff report -1 too: one summary.
    let other = kinds(&a, "numa-node-unknown-other");
    assert_eq!(other.len(), 1);
    assert!(other[0].what.starts_with("92 "), "{}", other[0].what);
    assert!(kinds(&a, "xps-crosses-nodes").is_empty());
    assert!(kinds(&a, "irq-affinity-remote").is_empty());
    let loc = &kinds(&a, "io-locality")[0];
    assert!(
        loc.what.contains("node 1: mlx4_0 (infiniband)"),
        "{}",
        loc.what
    );
    assert!(loc
        .fix
        .iter()
        .any(|c| c.contains("--numa_cpu_nodes=0") && c.contains("/dev/nvme0n1")));

    let json = a.to_json();
    let d = json["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bdf"] == "0000:00:02.0")
        .unwrap()
        .clone();
    assert!(d["numa_node"].is_null());
    assert_eq!(d["class"], "nvme");
    assert_eq!(d["pci_class"], "0x010802");
    assert_eq!(d["inferred_numa_node"], 0);
}

#[test]
fn four_nodes_with_unknown_pci_locality() {
    let (_tmp, root) = snapshot(
        "40intel64-2g2n4c+pcilocality.tar.bz2",
        "40intel64-2g2n4c+pci",
    );
    let m = import_sysfs(&root).unwrap();
    assert_eq!(m.nodes.len(), 4);
    assert_eq!(
        m.nodes[0].cpus,
        CpuSet::parse_list("0,4,8,12,16,20,24,28,32,36").unwrap()
    );
    assert_eq!(m.packages.len(), 4);
    assert_eq!(m.cpus.len(), 40);
    assert_eq!(m.pci.len(), 37);
    let d = m.numa_distances().unwrap();
    assert_eq!(d.get(0, 3), Some(20.0));
    assert_eq!(d.get(2, 2), Some(10.0));
    let llc = m.last_level_cache().unwrap();
    assert_eq!((llc.size_bytes, llc.ways), (30 << 20, Some(24)));

    let dev = |a: &str| &m.pci[m.pci_index(bdf(a)).unwrap()];
    for (a, name) in [
        ("0000:02:00.0", "eth0"),
        ("0000:02:00.1", "eth1"),
        ("0000:03:00.0", "eth2"),
        ("0000:03:00.1", "eth3"),
    ] {
        assert_eq!(dev(a).class(), DeviceClass::Net);
        assert_eq!(dev(a).primary_name(), Some(name));
        assert_eq!(dev(a).numa_node, None, "{a} reports -1");
    }
    let qib = dev("0000:43:00.0");
    assert_eq!(qib.class(), DeviceClass::Infiniband);
    assert_eq!(qib.numa_node, Some(2));
    assert_eq!(qib.primary_name(), Some("qib0"));
    assert_eq!(qib.link.current_gts, Some(8.0));
    assert_eq!(qib.link.current_width, Some(4));
    assert_eq!(dev("0000:03:00.1").link.current_gts, Some(2.5));
    assert_eq!(dev("0000:01:00.0").class(), DeviceClass::Storage);
    assert_eq!(dev("0000:09:03.0").class(), DeviceClass::Gpu);

    let a = audit(&m);
    assert_eq!(a.count(Severity::Error), 0);
    assert_eq!(a.count(Severity::Warning), 8, "{:#?}", a.findings);
    let unknown: Vec<&str> = kinds(&a, "numa-node-unknown")
        .iter()
        .map(|f| f.device.as_deref().unwrap())
        .collect();
    assert_eq!(
        unknown,
        vec![
            "0000:00:1f.2",
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:02:00.1",
            "0000:03:00.0",
            "0000:03:00.1",
            "0000:09:03.0"
        ]
    );
    // local_cpulist is every CPU: nothing to infer from.
    assert!(kinds(&a, "numa-node-unknown")
        .iter()
        .all(|f| f.why.contains("does not narrow it down")));
    // The QLogic HCA says node 2 but its local_cpulist covers all four nodes.
    let inc = on_device(&a, "0000:43:00.0", "numa-node-inconsistent");
    assert_eq!(inc.len(), 1);
    assert!(inc[0]
        .what
        .contains("numa_node = 2 but local_cpulist = 0-39"));
    // No link maxima in the snapshot: no link finding.
    assert!(kinds(&a, "link-degraded").is_empty());
    let json = a.to_json();
    let eth0 = json["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bdf"] == "0000:02:00.0")
        .unwrap()
        .clone();
    assert!(eth0["numa_node"].is_null());
    assert_eq!(eth0["findings"].as_array().unwrap().len(), 1);
    assert_eq!(a.exit_code(Some(Severity::Warning)), 1);
    assert_eq!(a.exit_code(Some(Severity::Error)), 0);
    assert_eq!(a.exit_code(None), 0);
}

#[test]
fn power9_with_gpu_memory_nodes_and_offline_threads() {
    let (_tmp, root) = snapshot("nvidiagpunumanodes.tar.bz2", "nvidiagpunumanodes");
    let m = import_sysfs(&root).unwrap();
    assert_eq!(m.cpu_model.as_deref(), Some("POWER9"));
    assert_eq!(m.clock_ghz, Some(3.45));
    // The node lists hold offline SMT threads: only the online ones count.
    assert_eq!(m.cpus, CpuSet::parse_list("0-15,88-103").unwrap());
    assert_eq!(m.node(0).unwrap().cpus, CpuSet::parse_list("0-15").unwrap());
    assert_eq!(
        m.node(8).unwrap().cpus,
        CpuSet::parse_list("88-103").unwrap()
    );
    assert!(m.notes.iter().any(|n| n
        .message
        .starts_with("CPUs 16-87 of node 0 are offline and not counted")));
    // numa_status ties each GPU memory node to its GPU.
    let n250 = m.node(250).unwrap();
    assert_eq!(n250.kind.as_deref(), Some("GPUMemory"));
    assert_eq!(n250.device, Some(bdf("0035:05:00.0")));
    assert!(m.is_memory_only(250) && !m.is_memory_only(8));
    assert_eq!(
        (250..=255)
            .filter(|&n| m.node(n).unwrap().device.is_some())
            .count(),
        6
    );
}

#[test]
fn memory_tiers_with_hmat_initiators() {
    let (_tmp, root) = snapshot("fakeheteromemtiers.tar.bz2", "fakeheteromemtiers");
    let m = import_sysfs(&root).unwrap();
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 1, 2, 4, 6, 8, 9]);
    assert_eq!(
        ids.iter().filter(|&&n| m.is_memory_only(n)).count(),
        4,
        "nodes 4, 6, 8, 9 have no CPUs"
    );
    assert_eq!(m.node(4).unwrap().initiators, Some(CpuSet::single(1)));
    assert_eq!(m.node(8).unwrap().initiators, Some(CpuSet::single(0)));
    // Read bandwidth in MiB/s from the initiator's CPUs; latencies of 0 are unknown.
    assert!(m.memory_attributes.iter().all(|a| a.name != "Latency"));
    let bw = m
        .memory_attributes
        .iter()
        .find(|a| a.name == "Bandwidth")
        .unwrap();
    let n4 = bw.values.iter().find(|v| v.target_node == Some(4)).unwrap();
    assert_eq!(n4.value, 10000);
    assert_eq!(
        n4.initiator,
        Some(inspect::model::Initiator::Cpus(
            CpuSet::parse_list("2-3").unwrap()
        ))
    );
}
