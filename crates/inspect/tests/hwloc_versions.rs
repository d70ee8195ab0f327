//! hwloc 1.x and 2.x XML, written the way those versions export: 1.x with NUMA nodes
//! as parents, `Socket`/`Cache` objects, in-object `<distances>` and the old
//! `osdev_type` enum; 2.x with NUMA nodes as memory children, `distances2`,
//! memory attributes and the same enum.

use std::path::Path;

use inspect::audit::{audit, Severity};
use inspect::export::{scenario_toml, MemorySource};
use inspect::hwloc::parse_hwloc_xml;
use inspect::model::Machine;
use inspect::pci::{DeviceClass, OsDeviceKind};

const V1: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc.dtd">
<topology>
  <object type="Machine" os_index="0" cpuset="0x000000ff" complete_cpuset="0x000000ff" online_cpuset="0x000000ff" allowed_cpuset="0x000000ff" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003">
    <page_type size="4096" count="0"/>
    <info name="HostName" value="oldbox"/>
    <distances nbobjs="2" relative_depth="1" latency_base="10.000000">
      <latency value="1.000000"/>
      <latency value="2.100000"/>
      <latency value="2.100000"/>
      <latency value="1.000000"/>
    </distances>
    <object type="NUMANode" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" online_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" local_memory="8589934592">
      <page_type size="4096" count="2097152"/>
      <object type="Socket" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" online_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001">
        <info name="CPUModel" value="Intel(R) Xeon(R) CPU E5520 @ 2.27GHz"/>
        <object type="Cache" cpuset="0x0000000f" complete_cpuset="0x0000000f" online_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" cache_size="8388608" depth="3" cache_linesize="64" cache_associativity="16" cache_type="0">
          <object type="Core" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" online_cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001">
            <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" online_cpuset="0x00000001" allowed_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001"/>
            <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" online_cpuset="0x00000002" allowed_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001"/>
          </object>
          <object type="Core" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" online_cpuset="0x0000000c" allowed_cpuset="0x0000000c" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001">
            <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" online_cpuset="0x00000004" allowed_cpuset="0x00000004" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001"/>
            <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" online_cpuset="0x00000008" allowed_cpuset="0x00000008" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001"/>
          </object>
        </object>
      </object>
      <object type="Bridge" os_index="0" bridge_type="0-1" depth="0" bridge_pci="0000:[00-07]">
        <object type="Bridge" os_index="16" bridge_type="1-1" depth="1" bridge_pci="0000:[01-01]" pci_busid="0000:00:01.0" pci_type="0604 [8086:3408] [0000:0000] 13" pci_link_speed="4.000000">
          <object type="PCIDev" os_index="4096" pci_busid="0000:01:00.0" pci_type="0200 [8086:10fb] [8086:000c] 01" pci_link_speed="4.000000">
            <info name="PCIVendor" value="Intel Corporation"/>
            <info name="PCIDevice" value="82599ES 10-Gigabit SFI/SFP+ Network Connection"/>
            <object type="OSDev" name="eth0" osdev_type="2"/>
          </object>
        </object>
      </object>
    </object>
    <object type="NUMANode" os_index="1" cpuset="0x000000f0" complete_cpuset="0x000000f0" online_cpuset="0x000000f0" allowed_cpuset="0x000000f0" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002" local_memory="8589934592">
      <object type="Socket" os_index="1" cpuset="0x000000f0" complete_cpuset="0x000000f0" online_cpuset="0x000000f0" allowed_cpuset="0x000000f0" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002">
        <object type="Cache" cpuset="0x000000f0" complete_cpuset="0x000000f0" online_cpuset="0x000000f0" allowed_cpuset="0x000000f0" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002" cache_size="8388608" depth="3" cache_linesize="64" cache_associativity="16" cache_type="0">
          <object type="Core" os_index="0" cpuset="0x00000030" complete_cpuset="0x00000030" online_cpuset="0x00000030" allowed_cpuset="0x00000030" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002">
            <object type="PU" os_index="4" cpuset="0x00000010" complete_cpuset="0x00000010" online_cpuset="0x00000010" allowed_cpuset="0x00000010" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002"/>
            <object type="PU" os_index="5" cpuset="0x00000020" complete_cpuset="0x00000020" online_cpuset="0x00000020" allowed_cpuset="0x00000020" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002"/>
          </object>
          <object type="Core" os_index="1" cpuset="0x000000c0" complete_cpuset="0x000000c0" online_cpuset="0x000000c0" allowed_cpuset="0x000000c0" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002">
            <object type="PU" os_index="6" cpuset="0x00000040" complete_cpuset="0x00000040" online_cpuset="0x00000040" allowed_cpuset="0x00000040" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002"/>
            <object type="PU" os_index="7" cpuset="0x00000080" complete_cpuset="0x00000080" online_cpuset="0x00000080" allowed_cpuset="0x00000080" nodeset="0x00000002" complete_nodeset="0x00000002" allowed_nodeset="0x00000002"/>
          </object>
        </object>
      </object>
      <object type="Bridge" os_index="128" bridge_type="0-1" depth="0" bridge_pci="0000:[80-87]">
        <object type="Bridge" os_index="144" bridge_type="1-1" depth="1" bridge_pci="0000:[81-82]" pci_busid="0000:80:01.0" pci_type="0604 [8086:3408] [0000:0000] 13" pci_link_speed="8.000000">
          <object type="PCIDev" os_index="4224" pci_busid="0000:81:00.0" pci_type="0207 [15b3:1003] [15b3:0050] 00" pci_link_speed="8.000000">
            <object type="OSDev" name="ib0" osdev_type="2"/>
            <object type="OSDev" name="mlx4_0" osdev_type="3"/>
          </object>
          <object type="PCIDev" os_index="4240" pci_busid="0000:82:00.0" pci_type="0108 [144d:a804] [144d:a801] 00" pci_link_speed="3.938462">
            <object type="OSDev" name="nvme0n1" osdev_type="0"/>
          </object>
        </object>
      </object>
    </object>
  </object>
</topology>
"#;

/// 2.x: NUMA nodes are memory children; one device is attached to the whole machine.
const V2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <info name="HostName" value="newbox"/>
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2" local_memory="17179869184"/>
      <object type="L3Cache" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4" cache_size="34603008" depth="3" cache_linesize="64" cache_associativity="11" cache_type="0">
        <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5">
          <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6"/>
        </object>
        <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7">
          <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="8"/>
        </object>
      </object>
      <object type="Bridge" gp_index="20" bridge_type="0-1" depth="0" bridge_pci="0000:[00-3f]">
        <object type="PCIDev" gp_index="21" pci_busid="0000:18:00.0" pci_type="0200 [15b3:1017] [15b3:0007] 00" pci_link_speed="15.753846">
          <object type="OSDev" gp_index="22" name="ens1f0" osdev_type="2"/>
          <object type="OSDev" gp_index="23" name="mlx5_0" osdev_type="3"/>
        </object>
        <object type="PCIDev" gp_index="24" pci_busid="0000:19:00.0" pci_type="0302 [10de:1db4] [10de:1212] a1" pci_link_speed="15.753846">
          <object type="OSDev" gp_index="25" name="cuda0" subtype="CUDA" osdev_type="5"/>
          <object type="OSDev" gp_index="26" name="card1" osdev_type="1"/>
        </object>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="10">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="9" local_memory="17179869184"/>
      <object type="Core" os_index="0" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="11">
        <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="12"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="13">
        <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="14"/>
      </object>
      <object type="Bridge" gp_index="30" bridge_type="0-1" depth="0" bridge_pci="0000:[80-bf]">
        <object type="Bridge" gp_index="31" bridge_type="1-1" depth="1" bridge_pci="0000:[81-81]" pci_busid="0000:80:02.0" pci_type="0604 [8086:2030] [0000:0000] 04" pci_link_speed="3.938462">
          <object type="PCIDev" gp_index="32" pci_busid="0000:81:00.0" pci_type="0108 [8086:0a54] [8086:4802] 00" pci_link_speed="3.938462">
            <object type="OSDev" gp_index="33" name="nvme0n1" osdev_type="0"/>
          </object>
        </object>
      </object>
    </object>
    <object type="Bridge" gp_index="40" bridge_type="0-1" depth="0" bridge_pci="0001:[00-ff]">
      <object type="PCIDev" gp_index="41" pci_busid="0001:02:00.0" pci_type="0200 [8086:1572] [8086:0000] 01" pci_link_speed="7.876923">
        <object type="OSDev" gp_index="42" name="eth9" osdev_type="2"/>
      </object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="12">10 21 21 10 </u64values>
  </distances2>
  <memattr name="Latency" flags="6">
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="2" value="85" initiator_cpuset="0x00000003"/>
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="9" value="140" initiator_cpuset="0x00000003"/>
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="2" value="141" initiator_cpuset="0x0000000c"/>
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="9" value="86" initiator_cpuset="0x0000000c"/>
  </memattr>
  <memattr name="Bandwidth" flags="5">
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="2" value="100000" initiator_cpuset="0x00000003"/>
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="9" value="40000" initiator_cpuset="0x00000003"/>
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="2" value="40000" initiator_cpuset="0x0000000c"/>
    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="9" value="100000" initiator_cpuset="0x0000000c"/>
  </memattr>
</topology>
"#;

fn parse(text: &str, name: &str) -> Machine {
    parse_hwloc_xml(text, Path::new(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn hwloc_1x_numa_nodes_as_parents() {
    let m = parse(V1, "v1.xml");
    assert!(matches!(
        m.source,
        inspect::model::Source::Hwloc { major: 1, .. }
    ));
    assert_eq!(m.nodes.len(), 2);
    assert_eq!(m.packages.len(), 2, "Socket objects are packages");
    assert_eq!(m.cores.len(), 4);
    assert_eq!(m.cpus.len(), 8);
    assert_eq!(m.hostname.as_deref(), Some("oldbox"));
    assert_eq!(m.clock_ghz, Some(2.27));
    assert_eq!(m.nodes[1].memory_bytes, Some(8 << 30));
    let llc = m.last_level_cache().unwrap();
    assert_eq!(
        (llc.level, llc.size_bytes, llc.ways),
        (3, 8 << 20, Some(16))
    );
    // <distances relative_depth=1 latency_base=10> over the two NUMA nodes.
    let d = m.numa_distances().unwrap();
    assert_eq!(d.ids, vec![0, 1]);
    assert_eq!(d.get(0, 1), Some(21.0));
    assert_eq!(d.get(1, 1), Some(10.0));

    let eth0 = m.pci_by_os_name("eth0").unwrap();
    assert_eq!(eth0.numa_node, Some(0));
    assert_eq!(eth0.class(), DeviceClass::Net);
    assert_eq!(eth0.pci_class_string().as_deref(), Some("0x020000"));
    let hca = m.pci_by_os_name("mlx4_0").unwrap();
    assert_eq!(hca.numa_node, Some(1));
    assert_eq!(hca.class(), DeviceClass::Infiniband);
    let kinds: Vec<OsDeviceKind> = hca.os_devices.iter().map(|o| o.kind).collect();
    assert_eq!(kinds, vec![OsDeviceKind::Net, OsDeviceKind::Openfabrics]);
    let nvme = m.pci_by_os_name("nvme0n1").unwrap();
    assert_eq!((nvme.class(), nvme.numa_node), (DeviceClass::Nvme, Some(1)));
    assert_eq!(nvme.os_devices[0].kind, OsDeviceKind::Block);
    assert_eq!(nvme.link.current_gen_width(), Some((3, 4)));

    let a = audit(&m);
    assert_eq!(a.count(Severity::Warning) + a.count(Severity::Error), 0);
    assert_eq!(a.distances, Some(vec![vec![10.0, 21.0], vec![21.0, 10.0]]));
}

#[test]
fn hwloc_2x_memory_children_and_attributes() {
    let m = parse(V2, "v2.xml");
    assert!(matches!(
        m.source,
        inspect::model::Source::Hwloc { major: 2, .. }
    ));
    assert_eq!(m.nodes.len(), 2);
    assert_eq!(m.packages.len(), 2);
    assert_eq!(m.cores.len(), 4);
    assert_eq!(m.hostname.as_deref(), Some("newbox"));
    assert_eq!(m.numa_distances().unwrap().get(1, 0), Some(21.0));

    let nic = m.pci_by_os_name("ens1f0").unwrap();
    assert_eq!((nic.class(), nic.numa_node), (DeviceClass::Net, Some(0)));
    assert_eq!(nic.link.current_gen_width(), Some((4, 8)));
    assert_eq!(nic.primary_name(), Some("ens1f0"));
    // osdev_type 5 with subtype CUDA is a GPU, 1 is a GPU (DRM) too.
    let gpu = m.pci_by_os_name("cuda0").unwrap();
    assert_eq!(gpu.class(), DeviceClass::Gpu);
    assert!(gpu.os_devices.iter().all(|o| o.kind == OsDeviceKind::Gpu));
    let nvme = m.pci_by_os_name("nvme0n1").unwrap();
    assert_eq!((nvme.class(), nvme.numa_node), (DeviceClass::Nvme, Some(1)));
    assert_eq!(m.pci[nvme.parent.unwrap()].bdf.to_string(), "0000:80:02.0");
    // Attached to the Machine (both nodes): the export does not say.
    let eth9 = m.pci_by_os_name("eth9").unwrap();
    assert_eq!(eth9.numa_node, None);
    assert_eq!(
        eth9.attached_nodes.as_ref().unwrap().to_list_string(),
        "0-1"
    );

    assert_eq!(m.memory_attributes.len(), 2);
    assert_eq!(m.memory_attributes[0].values[1].target_node, Some(1));

    let a = audit(&m);
    let unknown: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.kind == "numa-node-unknown")
        .collect();
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].severity, Severity::Warning);
    assert_eq!(unknown[0].device.as_deref(), Some("0001:02:00.0"));
    assert!(unknown[0]
        .what
        .contains("attaches the device to nodes 0-1 together"));

    // Memory figures come from the Latency/Bandwidth attributes.
    let e = scenario_toml(&m, None).unwrap();
    assert_eq!(e.memory_source, MemorySource::HwlocMemoryAttributes);
    assert!(
        e.toml
            .contains("latency_ns = [[85.0, 140.0], [141.0, 86.0]]"),
        "{}",
        e.toml
    );
    assert!(
        e.toml
            .contains("bandwidth_gbps = [[104.86, 41.94], [41.94, 104.86]]"),
        "{}",
        e.toml
    );
}

#[test]
fn malformed_and_foreign_xml_are_errors() {
    for (text, needle) in [
        (
            "<topology><object type=\"Machine\"></topology>",
            "invalid XML",
        ),
        ("<html/>", "expected <topology>"),
        ("<topology version=\"2.0\"></topology>", "no <object>"),
        ("", "invalid XML"),
    ] {
        let e = parse_hwloc_xml(text, Path::new("bad.xml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{text:?}: {e}");
        assert!(e.starts_with("bad.xml"), "{e}");
    }
}

#[test]
fn odd_but_wellformed_xml_does_not_panic() {
    let text = r#"<topology version="3.0">
      <object type="Machine" cpuset="0xzz" nodeset="garbage">
        <object type="Spaceship" cpuset="0x1"/>
        <object type="PCIDev" pci_busid="zz:zz" pci_type="nonsense"/>
        <object type="Bridge" bridge_type="0-1">
          <object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0200 [8086" pci_link_speed="NaN">
            <object type="OSDev" osdev_type="banana"/>
            <object type="OSDev" name="eth0" osdev_type="99999999999999999999"/>
          </object>
        </object>
        <distances nbobjs="5" relative_depth="9" latency_base="-1"><latency value="x"/></distances>
      </object>
      <distances2 type="NUMANode" nbobjs="3" kind="5" indexing="os"><indexes length="1">0</indexes><u64values length="1">x</u64values></distances2>
      <memattr name="Latency"><memattr_value value="3"/></memattr>
    </topology>"#;
    let m = parse(text, "odd.xml");
    assert!(!m.notes.is_empty());
    let a = audit(&m);
    let _ = inspect::report::render_human(&a);
    let _ = scenario_toml(&m, None).unwrap();
}

/// hwloc's writer on a machine above 64 PUs leaves zero words empty (`0x…,,0x…`), as in
/// its own corpus' SGI UV 2000 export: PU 0 and its sibling PU 192 share a core.
const WIDE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003,,,,,,0x00000003" complete_cpuset="0x00000003,,,,,,0x00000003" nodeset="0x00000003" complete_nodeset="0x00000003">
    <object type="Package" os_index="0" cpuset="0x00000001,,,,,,0x00000001" complete_cpuset="0x00000001,,,,,,0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001">
      <object type="NUMANode" os_index="0" cpuset="0x00000001,,,,,,0x00000001" complete_cpuset="0x00000001,,,,,,0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" local_memory="8589934592"/>
      <object type="Core" os_index="0" cpuset="0x00000001,,,,,,0x00000001" complete_cpuset="0x00000001,,,,,,0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001"/>
        <object type="PU" os_index="192" cpuset="0x00000001,,,,,,0x0" complete_cpuset="0x00000001,,,,,,0x0" nodeset="0x00000001" complete_nodeset="0x00000001"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x00000002,,,,,,0x00000002" complete_cpuset="0x00000002,,,,,,0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002">
      <object type="NUMANode" os_index="1" cpuset="0x00000002,,,,,,0x00000002" complete_cpuset="0x00000002,,,,,,0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" local_memory="8589934592"/>
      <object type="Core" os_index="1" cpuset="0x00000002,,,,,,0x00000002" complete_cpuset="0x00000002,,,,,,0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002"/>
        <object type="PU" os_index="193" cpuset="0x00000002,,,,,,0x0" complete_cpuset="0x00000002,,,,,,0x0" nodeset="0x00000002" complete_nodeset="0x00000002"/>
      </object>
    </object>
  </object>
</topology>
"#;

#[test]
fn bitmaps_with_empty_words_keep_their_cpus() {
    let m = parse(WIDE, "wide.xml");
    assert_eq!(m.cpus.to_list_string(), "0-1,192-193");
    assert_eq!(m.nodes.len(), 2);
    assert_eq!(m.nodes[0].cpus.to_list_string(), "0,192");
    assert_eq!(m.nodes[1].cpus.to_list_string(), "1,193");
}

#[test]
fn xml_nested_tens_of_thousands_deep_is_an_error_not_a_stack_overflow() {
    let n = 30_000;
    let text = format!(
        "<?xml version=\"1.0\"?>\n<!-- <object> in a comment -->\n<topology version=\"2.0\">{}{}</topology>",
        "<object type=\"Group\" name=\"a>b\" cpuset=\"0x1\">".repeat(n),
        "</object>".repeat(n)
    );
    let e = parse_hwloc_xml(&text, Path::new("deep.xml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("deep.xml:3:") && e.contains("nested deeper than"),
        "{e}"
    );
    // Self-closing elements and quoted `>` do not count as nesting.
    let flat = format!(
        "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\">{}</object></topology>",
        "<info name=\"x\" value=\"a>b\"/>".repeat(5000)
    );
    assert!(parse_hwloc_xml(&flat, Path::new("flat.xml")).is_ok());
}
