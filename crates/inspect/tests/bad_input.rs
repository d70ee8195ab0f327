//! hwloc XML that no machine could have written: sizes beyond any machine, the same
//! NUMA node or CPU twice, CPU sets no hwloc tree can hold, PCI addresses that are
//! garbage or repeated. Each is refused (an error at the object) or dropped with a
//! warning that names the file, line, object and attribute; none panics.

mod common;

use std::path::Path;

use common::{edit, export_loads, line_of, warnings, xml_text};
use inspect::hwloc::parse_hwloc_xml;
use inspect::Machine;

const TWO_NODES: &str = "24em64t-2n6c2t-pci.xml";
/// Node 1's object in `TWO_NODES` (node 0's is at gp_index 2).
const NODE1: &str = "<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x00aaaaaa\"";

fn import(text: &str, name: &str) -> Machine {
    parse_hwloc_xml(text, Path::new(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn refused(text: &str, name: &str) -> String {
    match parse_hwloc_xml(text, Path::new(name)) {
        Ok(_) => panic!("{name} was accepted"),
        Err(e) => e.to_string(),
    }
}

/// Every `attr="…"` value of `text` set to `value`.
fn set_all(text: &str, attr: &str, value: &str) -> String {
    let key = format!("{attr}=\"");
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(&key) {
        let start = i + key.len();
        let end = start + rest[start..].find('"').unwrap();
        out.push_str(&rest[..start]);
        out.push_str(value);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn node_memory_near_2_64_is_refused_with_a_warning_not_a_panic() {
    let text = set_all(
        &xml_text("16amd64-4distances.xml"),
        "local_memory",
        "18446744073709551000",
    );
    let m = import(&text, "big.xml");
    assert!(m.nodes.iter().all(|n| n.memory_bytes.is_none()));
    assert_eq!(m.total_memory_bytes, None);
    let w = warnings(&m);
    assert_eq!(w.len(), 8, "{w:#?}");
    let line = line_of(&text, "gp_index=\"3\" id=\"obj3\"");
    assert!(
        w.contains(&format!(
            "big.xml:{line}: NUMANode os_index=1: local_memory=\"18446744073709551000\" is beyond 2^52 bytes (4 PiB), more than any machine's node; the node's size is taken as unknown"
        )),
        "{w:#?}"
    );
    export_loads(&m);
}

#[test]
fn node_memory_beyond_2_52_bytes_is_refused_and_the_rest_kept() {
    let text = xml_text(TWO_NODES);
    let text = edit(
        &text,
        "local_memory=\"19327348736\"",
        "local_memory=\"9007199254740992\"",
    );
    let m = import(&text, "n.xml");
    assert_eq!(m.nodes[0].memory_bytes, Some(19_316_633_600));
    assert_eq!(m.nodes[1].memory_bytes, None);
    let w = warnings(&m);
    assert!(
        w.iter()
            .any(|w| w
                .contains("NUMANode os_index=1: local_memory=\"9007199254740992\" is beyond 2^52")),
        "{w:#?}"
    );
    export_loads(&m);
}

#[test]
fn negative_or_garbage_sizes_are_refused_with_a_warning() {
    for (bad, why) in [
        ("-1", "is not a size in bytes"),
        ("lots", "is not a size in bytes"),
        ("", "is not a size in bytes"),
    ] {
        let text = edit(
            &xml_text(TWO_NODES),
            "local_memory=\"19316633600\"",
            &format!("local_memory=\"{bad}\""),
        );
        let m = import(&text, "neg.xml");
        assert_eq!(m.nodes[0].memory_bytes, None, "{bad}");
        let w = warnings(&m);
        assert!(
            w.iter().any(|w| w.contains(&format!(
                "NUMANode os_index=0: local_memory=\"{bad}\" {why}"
            ))),
            "{bad}: {w:#?}"
        );
    }
    // A cache of 2^63 bytes: refused, and the LLC size is then not reported.
    let text = edit(
        &xml_text(TWO_NODES),
        "gp_index=\"55\" id=\"obj55\" cache_size=\"12582912\"",
        "gp_index=\"55\" id=\"obj55\" cache_size=\"9223372036854775808\"",
    );
    let m = import(&text, "cache.xml");
    assert!(
        warnings(&m)
            .iter()
            .any(|w| w.contains("L3Cache: cache_size=\"9223372036854775808\" is beyond")),
        "{:#?}",
        warnings(&m)
    );
    export_loads(&m);
}

#[test]
fn the_same_numa_node_twice_is_an_error_naming_both_objects() {
    let text = edit(
        &xml_text(TWO_NODES),
        NODE1,
        "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00aaaaaa\"",
    );
    let e = refused(&text, "dup.xml");
    assert_eq!(
        e,
        format!(
            "dup.xml:{}: NUMANode os_index=0: os_index 0 is also the NUMANode at line {}; two memories cannot share one node number",
            line_of(&text, "gp_index=\"53\""),
            line_of(&text, "gp_index=\"2\" ")
        )
    );
}

#[test]
fn the_same_cpu_twice_is_an_error() {
    let text = edit(
        &xml_text(TWO_NODES),
        "<object type=\"PU\" os_index=\"12\" cpuset=\"0x00001000\"",
        "<object type=\"PU\" os_index=\"0\" cpuset=\"0x00001000\"",
    );
    let e = refused(&text, "pu.xml");
    assert!(
        e.starts_with("pu.xml:")
            && e.contains(": PU os_index=0: os_index 0 is also the PU at line "),
        "{e}"
    );
}

#[test]
fn a_cpu_in_two_numa_nodes_is_an_error() {
    // Package 1 and node 1 claim CPU 0, which node 0 (package 0) holds.
    let text = xml_text(TWO_NODES);
    let text = edit(
        &text,
        "<object type=\"Package\" os_index=\"1\" cpuset=\"0x00aaaaaa\"",
        "<object type=\"Package\" os_index=\"1\" cpuset=\"0x00aaaaab\"",
    );
    let text = edit(
        &text,
        NODE1,
        "<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x00aaaaab\"",
    );
    let e = refused(&text, "two.xml");
    assert_eq!(
        e,
        format!(
            "two.xml:{}: NUMANode os_index=1: cpuset holds CPU 0, which the NUMANode os_index=0 at line {} also holds, yet neither node's CPUs contain the other's; no hwloc tree places a CPU so",
            line_of(&text, "gp_index=\"53\""),
            line_of(&text, "gp_index=\"2\" ")
        )
    );
}

#[test]
fn a_pu_outside_its_parents_cpus_is_an_error() {
    let text = edit(
        &xml_text(TWO_NODES),
        "<object type=\"PU\" os_index=\"12\" cpuset=\"0x00001000\"",
        "<object type=\"PU\" os_index=\"30\" cpuset=\"0x40000000\"",
    );
    let e = refused(&text, "pu.xml");
    assert!(
        e.contains(
            ": PU os_index=30: cpuset holds CPU 30, outside its parent Core os_index=0 (line "
        ),
        "{e}"
    );
    // A child set larger than its parent's, higher up: a Package beyond the Machine.
    let text = edit(
        &xml_text(TWO_NODES),
        "<object type=\"Package\" os_index=\"1\" cpuset=\"0x00aaaaaa\"",
        "<object type=\"Package\" os_index=\"1\" cpuset=\"0x01aaaaaa\"",
    );
    let e = refused(&text, "pkg.xml");
    assert!(
        e.contains(": Package os_index=1: cpuset holds CPU 24, outside its parent Machine os_index=0 (line 4)"),
        "{e}"
    );
}

#[test]
fn repeated_pci_addresses_keep_both_functions_and_say_so() {
    let text = edit(
        &xml_text(TWO_NODES),
        "pci_busid=\"0000:04:00.1\"",
        "pci_busid=\"0000:04:00.0\"",
    );
    let m = import(&text, "bus.xml");
    let both: Vec<_> = m
        .pci
        .iter()
        .filter(|d| d.bdf.to_string() == "0000:04:00.0")
        .filter_map(|d| d.primary_name())
        .collect();
    assert_eq!(both, ["eth0", "eth1"]);
    let w = warnings(&m);
    assert!(
        w.contains(&format!(
            "bus.xml:{}: PCIDev pci_busid=\"0000:04:00.0\": the address of the PCIDev at line {} too; both functions are kept, told apart by their names",
            line_of(&text, "gp_index=\"39\""),
            line_of(&text, "gp_index=\"37\"")
        )),
        "{w:#?}"
    );
    let s = export_loads(&m);
    assert!(s.contains("name = \"eth0\"") && s.contains("name = \"eth1\""));
}

#[test]
fn functions_skipped_for_their_address_name_what_goes_with_them() {
    // eth0's function with a garbage address, eth1's with none.
    let text = edit(
        &xml_text(TWO_NODES),
        "pci_busid=\"0000:04:00.0\"",
        "pci_busid=\"zz:garbage\"",
    );
    let text = edit(&text, "pci_busid=\"0000:04:00.1\"", "");
    let m = import(&text, "bus.xml");
    assert!(m.pci_by_os_name("eth0").is_none() && m.pci_by_os_name("eth1").is_none());
    let w = warnings(&m);
    assert!(
        w.contains(&format!(
            "bus.xml:{}: PCIDev pci_busid=\"zz:garbage\": not a PCI address (DDDD:BB:DD.F); the function is skipped with its OS devices eth0",
            line_of(&text, "gp_index=\"37\"")
        )),
        "{w:#?}"
    );
    assert!(
        w.contains(&format!(
            "bus.xml:{}: PCIDev: no pci_busid; the function is skipped with its OS devices eth1",
            line_of(&text, "gp_index=\"39\"")
        )),
        "{w:#?}"
    );
    export_loads(&m);
}

#[test]
fn an_os_index_beyond_32_bits_is_not_cut_to_another_nodes_number() {
    // 2^32 would have become node 0, merging two nodes.
    let text = edit(
        &xml_text(TWO_NODES),
        NODE1,
        "<object type=\"NUMANode\" os_index=\"4294967296\" cpuset=\"0x00aaaaaa\"",
    );
    let m = import(&text, "big.xml");
    assert_eq!(m.nodes.len(), 2);
    assert!(
        warnings(&m)
            .iter()
            .any(|w| w.contains("NUMANode: os_index=\"4294967296\" is not a 32-bit number")),
        "{:#?}",
        warnings(&m)
    );
}
