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

/// Every fixture machine, unpacked where it is a snapshot: (name, imported machine).
fn every_fixture(tmp: &std::path::Path) -> Vec<(String, inspect::Machine)> {
    let mut out = Vec::new();
    let mut xmls: Vec<PathBuf> = std::fs::read_dir(fixtures().join("xml"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    xmls.sort();
    for x in xmls {
        let name = x.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((name, inspect::import_hwloc_file(&x).unwrap()));
    }
    let mut tars: Vec<PathBuf> = std::fs::read_dir(fixtures().join("sysfs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.bz2"))
        .collect();
    tars.sort();
    for (i, t) in tars.iter().enumerate() {
        // Each archive into a directory of its own; its one top directory is the root.
        let dir = tmp.join(format!("snap{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("tar")
            .arg("xjf")
            .arg(t)
            .current_dir(&dir)
            .status()
            .expect("tar runs");
        assert!(ok.success(), "{}", t.display());
        let tops: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(tops.len(), 1, "{}: {tops:?}", t.display());
        let name = t.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, inspect::import_sysfs(&tops[0]).unwrap()));
    }
    assert!(out.len() >= 13, "{} fixtures", out.len());
    out
}

fn fresh(toml: &str, name: &str) -> Fabric {
    let s = load(
        Source {
            name: name.into(),
            text: toml.into(),
        },
        &fabric::builtin::BuiltinResolver,
    )
    .unwrap_or_else(|err| panic!("{name} export does not load: {err}\n{toml}"));
    Fabric::from_scenario(s).unwrap()
}

/// A device's function and its link's bandwidth per direction (GB/s).
fn function_of(f: &Fabric, host: &str, dev: &str) -> (fabric::PcieNodeId, f64) {
    let n = match f.resolve(&format!("{host}.{dev}")).unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    };
    let l = f.topo.node(n).link.expect("a device function has a link");
    (n, sim::pcie::link_gbps(l.gen, l.width))
}

/// Import, export, load (what `topo check` does), then `topo path` (its library
/// function, timing included) from every package's cores and every exported device to
/// every NUMA node, and from every device to every other: each lands where it was sent,
/// takes a positive finite time, a device streams at a positive rate no faster than the
/// links it crosses, and a requester's own package's memory is no slower than other CPU
/// nodes'.
#[test]
fn every_fixture_round_trips_through_export_check_and_path() {
    let tmp = tempfile::tempdir().unwrap();
    let mut summary = Vec::new();
    for (name, m) in every_fixture(tmp.path()) {
        summary.push(round_trip(&name, &m).2);
    }
    println!("{}", summary.join("\n"));
}

/// The round trip of one machine: its export, the loaded fabric and a summary line.
fn round_trip(
    name: &str,
    m: &inspect::Machine,
) -> (inspect::export::ScenarioExport, Fabric, String) {
    use fabric::Access;
    use studies::path_query::{route_query, timed_query_on};
    {
        let e = inspect::export::scenario_toml(m, None).unwrap();
        let f = fresh(&e.toml, name);
        let p = &f.topo.platforms[0];
        let host = f.topo.hosts[0].name.clone();
        // Every node survives, memory-only ones as memory-only nodes.
        assert_eq!(p.numa_nodes() as usize, m.nodes.len(), "{name}");
        let memory_only = m.nodes.iter().filter(|n| m.is_memory_only(n.id)).count();
        assert_eq!(p.memory_nodes.len(), memory_only, "{name}");
        assert_eq!(e.memory_only, memory_only, "{name}");
        let mut ids = e.node_ids.clone();
        ids.sort_unstable();
        assert_eq!(
            ids,
            m.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(f.topo.devices.len(), e.device_names.len(), "{name}");

        let nodes = p.numa_nodes();
        let mut paths = 0u64;
        // One fabric and one timed fabric for all queries, each query at an offset of
        // its own so that none sees lines another left in an LLC.
        let mut g = fresh(&e.toml, name);
        let mut tf = sim::timed::TimedFabric::new(fresh(&e.toml, name), 1)
            .unwrap_or_else(|err| panic!("{name}: the export cannot be timed: {}", err.0));
        let smallest = (0..nodes).map(|n| p.node_bytes(n)).min().unwrap();
        let mut query = |from: &str, to: &str, len: u32, access: Access, paths: &mut u64| {
            *paths += 1;
            // A line of its own in RAM; the start of a BAR.
            let offset = if to.contains(".ram.") {
                (*paths * 4096) % smallest
            } else {
                0
            };
            let a = route_query(&mut g, from, to, offset, len, access)
                .unwrap_or_else(|err| panic!("{name}: {from} → {to}: {err}"));
            let t = timed_query_on(&mut tf, from, to, (offset, len), access, None)
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            assert!(
                t.latency_ns.is_finite() && t.latency_ns > 0.0,
                "{name}: {from} → {to}: {t:?}"
            );
            (a.result, t)
        };
        // Every package's cores read every node; their own package's CPU nodes are
        // the fastest CPU nodes for them.
        for pkg in 0..p.packages {
            let from = format!("{host}.cpu{pkg}");
            let mut read_ns = Vec::new();
            for node in 0..nodes {
                let to = format!("{host}.ram.node{node}");
                let (r, t) = query(&from, &to, 64, Access::Read, &mut paths);
                assert!(
                    matches!(r, Ok(fabric::Target::Ram { node: n, .. }) if n == node),
                    "{name}: {from} → {to}: {r:?}"
                );
                read_ns.push((node, t.latency_ns));
            }
            let best = |own: bool| {
                read_ns
                    .iter()
                    .filter(|(n, _)| *n < p.cpu_nodes() && (p.package_of_node(*n) == pkg) == own)
                    .map(|x| x.1)
                    .min_by(f64::total_cmp)
            };
            if let (Some(local), Some(remote)) = (best(true), best(false)) {
                assert!(
                    local <= remote,
                    "{name}: {from}: {local} ns local, {remote} ns remote"
                );
            }
        }
        for dev in &e.device_names {
            let from = format!("{host}.{dev}");
            let (fnode, link) = function_of(&f, &host, dev);
            let own = match f.topo.node(f.topo.node(fnode).root).kind {
                NodeKind::RootComplex { vertex } => vertex,
                k => panic!("{k:?}"),
            };
            let mut read_ns = Vec::new();
            for node in 0..nodes {
                let to = format!("{host}.ram.node{node}");
                for access in [Access::Write, Access::Read] {
                    let (r, t) = query(&from, &to, 256, access, &mut paths);
                    match r {
                        Ok(fabric::Target::Ram { node: n, .. }) => assert_eq!(n, node),
                        other => panic!("{name}: {from} → {to}: {other:?}"),
                    }
                    let (gbps, why) = t.stream.clone().expect("a device streams");
                    assert!(
                        gbps.is_finite() && gbps > 0.0 && gbps <= link * (1.0 + 1e-9),
                        "{name}: {from} → {to} {access:?} streams at {gbps} GB/s ({why}) over a {link} GB/s link"
                    );
                    if access == Access::Read {
                        read_ns.push((node, t.latency_ns));
                    }
                }
            }
            // Reads into the device's own package's CPU nodes cost no more than into
            // any other package's.
            let cpu = |n: u32| n < p.cpu_nodes();
            let best = |own_pkg: bool| {
                read_ns
                    .iter()
                    .filter(|(n, _)| cpu(*n) && (p.package_of_node(*n) == own) == own_pkg)
                    .map(|x| x.1)
                    .min_by(f64::total_cmp)
            };
            if let (Some(local), Some(remote)) = (best(true), best(false)) {
                assert!(
                    local <= remote,
                    "{name}: {from} reads its own package's memory in {local} ns, another's in {remote} ns"
                );
            }
            for peer in e.device_names.iter().filter(|d| *d != dev) {
                let to = format!("{host}.{peer}");
                let (_, peer_link) = function_of(&f, &host, peer);
                let (r, t) = query(&from, &to, 64, Access::Write, &mut paths);
                assert!(
                    matches!(r, Ok(fabric::Target::Bar { .. })),
                    "{name}: {from} → {to}: {r:?}"
                );
                let (gbps, why) = t.stream.clone().expect("a device streams");
                assert!(
                    t.latency_ns.is_finite()
                        && t.latency_ns > 0.0
                        && gbps > 0.0
                        && gbps <= link.min(peer_link) * (1.0 + 1e-9),
                    "{name}: {from} → {to}: {t:?} ({why}) over {link} and {peer_link} GB/s links"
                );
            }
        }
        let line = format!(
            "{name}: {} package(s), {} CPU node(s) + {} memory-only, {} device(s), {paths} paths",
            p.packages,
            p.cpu_nodes(),
            p.memory_nodes.len(),
            e.device_names.len()
        );
        (e, f, line)
    }
}

/// An hwloc XML machine written here, not copied: `nodes` NUMA nodes, each holding
/// `per_node` packages of two single-thread cores (`node_of_package` overrides the even
/// split), an Ethernet controller under the last node and, when `v1`, in the 1.x form
/// (NUMA nodes as parents of sockets) rather than 2.x (a group per node with the node as
/// its memory child).
fn synthetic_xml(
    packages: u32,
    node_of_package: &dyn Fn(u32) -> u32,
    nodes: u32,
    v1: bool,
) -> String {
    use inspect::CpuSet;
    let mask = |cpus: CpuSet| -> String {
        cpus.to_mask_string()
            .split(',')
            .map(|w| format!("0x{w}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let pus = |p: u32| CpuSet::from_iter([2 * p, 2 * p + 1]);
    let node_cpus = |n: u32| -> CpuSet {
        (0..packages)
            .filter(|&p| node_of_package(p) == n)
            .flat_map(|p| pus(p).iter().collect::<Vec<_>>())
            .collect()
    };
    let all = CpuSet::from_iter(0..2 * packages);
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    if v1 {
        x.push_str("<!DOCTYPE topology SYSTEM \"hwloc.dtd\">\n<topology>\n");
    } else {
        x.push_str("<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n");
    }
    x.push_str(&format!(
        "<object type=\"Machine\" os_index=\"0\" cpuset=\"{}\" gp_index=\"1\">\n<info name=\"HostName\" value=\"synthetic\"/>\n",
        mask(all)
    ));
    let mut gp = 2;
    let mut next_gp = || {
        gp += 1;
        gp
    };
    for n in 0..nodes {
        let cpus = mask(node_cpus(n));
        let node = format!(
            "<object type=\"NUMANode\" os_index=\"{n}\" cpuset=\"{cpus}\" nodeset=\"{}\" gp_index=\"{}\" local_memory=\"4294967296\"",
            mask(CpuSet::single(n)),
            next_gp()
        );
        if v1 {
            x.push_str(&format!("{node}>\n"));
        } else {
            x.push_str(&format!(
                "<object type=\"Group\" cpuset=\"{cpus}\" nodeset=\"{}\" gp_index=\"{}\">\n{node}/>\n",
                mask(CpuSet::single(n)),
                next_gp()
            ));
        }
        for p in (0..packages).filter(|&p| node_of_package(p) == n) {
            x.push_str(&format!(
                "<object type=\"{}\" os_index=\"{p}\" cpuset=\"{}\" gp_index=\"{}\">\n<info name=\"CPUModel\" value=\"Intel(R) Xeon(R) CPU E7-8890 v4 @ 2.20GHz\"/>\n",
                if v1 { "Socket" } else { "Package" },
                mask(pus(p)),
                next_gp()
            ));
            for c in pus(p).iter() {
                x.push_str(&format!(
                    "<object type=\"Core\" os_index=\"{c}\" cpuset=\"{}\" gp_index=\"{}\"><object type=\"PU\" os_index=\"{c}\" cpuset=\"{}\" gp_index=\"{}\"/></object>\n",
                    mask(CpuSet::single(c)),
                    next_gp(),
                    mask(CpuSet::single(c)),
                    next_gp()
                ));
            }
            x.push_str("</object>\n");
        }
        if n == nodes - 1 {
            x.push_str(&format!(
                "<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[80-81]\" gp_index=\"{}\">\n<object type=\"PCIDev\" pci_busid=\"0000:80:00.0\" pci_type=\"0200 [8086:1521] [8086:0001] 01\" pci_link_speed=\"15.753846\" gp_index=\"{}\">\n<object type=\"OSDev\" name=\"eth0\" osdev_type=\"2\" gp_index=\"{}\"/>\n</object>\n</object>\n",
                next_gp(),
                next_gp(),
                next_gp()
            ));
        }
        // Closes the 1.x node or the 2.x group.
        x.push_str("</object>\n");
    }
    x.push_str("</object>\n</topology>\n");
    x
}

/// Machines hwloc can describe and no fixture covers: 16 packages sharing 4 NUMA
/// nodes (1.x and 2.x files), more than 16 packages, more CPU nodes than the fabric's 64
/// packages, and packages holding different numbers of nodes. Each round-trips; the
/// layout is stated as an assumption and the device stays on its node's root.
#[test]
fn synthetic_machines_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let import = |name: &str, xml: String| {
        let path = tmp.path().join(format!("{name}.xml"));
        std::fs::write(&path, xml).unwrap();
        inspect::import_hwloc_file(&path).unwrap()
    };
    let value = |toml: &str, key: &str| -> String {
        toml.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key}"))
            .to_string()
    };
    for v1 in [false, true] {
        let name = format!("16p4n-v{}", if v1 { 1 } else { 2 });
        let m = import(&name, synthetic_xml(16, &|p| p / 4, 4, v1));
        assert_eq!((m.packages.len(), m.nodes.len()), (16, 4), "{name}");
        let (e, f, line) = round_trip(&name, &m);
        println!("{line}");
        let p = &f.topo.platforms[0];
        // Four packages per node make one package each: the node's memory and root.
        assert_eq!((p.packages, p.nodes_per_package), (4, 1), "{name}");
        assert_eq!(p.cores_per_package, 8, "{name}");
        assert!(
            value(&e.toml, "packages")
                .contains("16 machine packages over 4 group(s) share NUMA nodes"),
            "{}",
            e.toml
        );
        assert_eq!(root_of(&f, "eth0"), "rc3", "{name}");
        // Link of 15.75 GB/s on a Xeon E7 v4 (Gen3): Gen3 x16, as an assumption.
        assert!(
            e.toml.contains("link = { gen = 3, width = 16 }   # assumption: hwloc's 15.753846 GB/s fits Gen3 x16, Gen4 x8, Gen5 x4, Gen6 x2; Gen3 x16 taken"),
            "{}",
            e.toml
        );
    }
    // More than 16 packages, one node each.
    let m = import("40p", synthetic_xml(40, &|p| p, 40, false));
    let (_, f, line) = round_trip("40p", &m);
    println!("{line}");
    let p = &f.topo.platforms[0];
    assert_eq!(
        (p.packages, p.nodes_per_package, p.numa_nodes()),
        (40, 1, 40)
    );
    assert_eq!(root_of(&f, "eth0"), "rc39");
    // More CPU nodes than the fabric's 64 packages: two consecutive nodes per package.
    let m = import("80p", synthetic_xml(80, &|p| p, 80, false));
    let (e, f, line) = round_trip("80p", &m);
    println!("{line}");
    let p = &f.topo.platforms[0];
    assert_eq!(
        (p.packages, p.nodes_per_package, p.numa_nodes()),
        (40, 2, 80)
    );
    assert!(
        value(&e.toml, "packages").contains("80 package groups exceed the fabric's 64: every 2 consecutive CPU node(s) make one package here"),
        "{}",
        e.toml
    );
    assert_eq!(root_of(&f, "eth0"), "rc39");
    // Two packages holding two nodes and one (sub-NUMA clustering on one socket only):
    // each node becomes a package.
    let m = import("uneven", UNEVEN.to_string());
    assert_eq!((m.packages.len(), m.nodes.len()), (2, 3));
    let (e, f, line) = round_trip("uneven", &m);
    println!("{line}");
    let p = &f.topo.platforms[0];
    assert_eq!((p.packages, p.nodes_per_package, p.numa_nodes()), (3, 1, 3));
    assert!(
        value(&e.toml, "packages").contains("packages hold 1 or 2 NUMA node(s) each, which the fabric's nodes_per_package cannot express: every 1 consecutive CPU node(s) make one package here"),
        "{}",
        e.toml
    );
    // The NIC is under node 1, the second node of package 0.
    assert_eq!(root_of(&f, "eth0"), "rc1");
}

/// hwloc 2.x: package 0 split in two sub-NUMA clusters (nodes 0 and 1), package 1 one
/// node (2); a NIC under node 1's cluster.
const UNEVEN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000003f" nodeset="0x00000007" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x0000000f" nodeset="0x00000003" gp_index="2">
      <info name="CPUModel" value="Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"/>
      <object type="Group" cpuset="0x00000003" nodeset="0x00000001" gp_index="3">
        <object type="NUMANode" os_index="0" cpuset="0x00000003" nodeset="0x00000001" gp_index="4" local_memory="1073741824"/>
        <object type="Core" os_index="0" cpuset="0x00000001" gp_index="5"><object type="PU" os_index="0" cpuset="0x00000001" gp_index="6"/></object>
        <object type="Core" os_index="1" cpuset="0x00000002" gp_index="7"><object type="PU" os_index="1" cpuset="0x00000002" gp_index="8"/></object>
      </object>
      <object type="Group" cpuset="0x0000000c" nodeset="0x00000002" gp_index="9">
        <object type="NUMANode" os_index="1" cpuset="0x0000000c" nodeset="0x00000002" gp_index="10" local_memory="1073741824"/>
        <object type="Core" os_index="2" cpuset="0x00000004" gp_index="11"><object type="PU" os_index="2" cpuset="0x00000004" gp_index="12"/></object>
        <object type="Core" os_index="3" cpuset="0x00000008" gp_index="13"><object type="PU" os_index="3" cpuset="0x00000008" gp_index="14"/></object>
        <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[40-41]" gp_index="15">
          <object type="PCIDev" pci_busid="0000:40:00.0" pci_type="0200 [8086:1521] [8086:0001] 01" pci_link_speed="0.500000" gp_index="16">
            <object type="OSDev" name="eth0" osdev_type="2" gp_index="17"/>
          </object>
        </object>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x00000030" nodeset="0x00000004" gp_index="18">
      <object type="NUMANode" os_index="2" cpuset="0x00000030" nodeset="0x00000004" gp_index="19" local_memory="2147483648"/>
      <object type="Core" os_index="4" cpuset="0x00000010" gp_index="20"><object type="PU" os_index="4" cpuset="0x00000010" gp_index="21"/></object>
      <object type="Core" os_index="5" cpuset="0x00000020" gp_index="22"><object type="PU" os_index="5" cpuset="0x00000020" gp_index="23"/></object>
    </object>
  </object>
</topology>
"#;

/// `topo path` on a scenario whose timing cannot be built says why, rather than
/// printing the route as if the scenario had no timing.
#[test]
fn topo_path_says_why_it_has_no_timing() {
    let m = inspect::import_hwloc_file(&fixtures().join("xml/32em64t-2n8c2t-pci-normalio.xml"))
        .unwrap();
    let e = inspect::export::scenario_toml(&m, None).unwrap();
    // Interconnect links slower than the matrix's remote entries allow.
    let at = e.toml.find("interconnect_latency_ns = { value = ").unwrap();
    let line_end = at + e.toml[at..].find('\n').unwrap();
    let toml = format!(
        "{}interconnect_latency_ns = 500.0{}",
        &e.toml[..at],
        &e.toml[line_end..]
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("slow.toml");
    std::fs::write(&file, &toml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nudma"))
        .args(["topo", "path"])
        .arg(&file)
        .args(["--from", "conan.eth0", "--to", "conan.ram.node0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("→ RAM of conan node 0"), "{text}");
    assert!(
        text.contains("no timing: timing conan.eth0 → conan.ram.node0: platform `imported`: memory.latency_ns"),
        "{text}"
    );
    assert!(!text.contains("zero-load latency"), "{text}");
}
