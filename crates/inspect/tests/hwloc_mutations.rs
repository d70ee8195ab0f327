//! Property: an hwloc XML fixture with attributes mutated at random (sizes, OS
//! indexes, CPU and node sets, PCI addresses, distances, memory attributes) is either
//! refused with a message naming the file, or imported into a machine whose export the
//! fabric loads. Never a panic.

mod common;

use std::path::Path;

use inspect::hwloc::parse_hwloc_xml;
use proptest::prelude::*;

/// Small fixtures of each format generation and feature: PCI trees, distances,
/// memory attributes, heterogeneous and CXL memory.
const FIXTURES: [&str; 5] = [
    "24em64t-2n6c2t-pci.xml",
    "16amd64-4distances.xml",
    "8intel64-4n2t-memattrs.xml",
    "64intel64-heteromem.xml",
    "cxlmem+dax.v3.xml",
];

/// Attributes whose values are mutated.
const ATTRS: [&str; 10] = [
    "local_memory",
    "os_index",
    "cpuset",
    "nodeset",
    "pci_busid",
    "cache_size",
    "cache_associativity",
    "pci_link_speed",
    "value",
    "nbobjs",
];

fn texts() -> &'static Vec<String> {
    static T: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    T.get_or_init(|| FIXTURES.iter().map(|f| common::xml_text(f)).collect())
}

/// Values that have broken importers: edges of the integer types, negative and empty
/// numbers, impossible sets and addresses.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "",
            "-1",
            "0",
            "1",
            "18446744073709551615",
            "18446744073709551000",
            "18446744073709551616",
            "4294967295",
            "4294967296",
            "4503599627370496",
            "9223372036854775807",
            "0x",
            "0xffffffffffffffff",
            "1e30",
            "nan",
            "inf",
            "0xffffffff,0xffffffff,0xffffffff",
            "0x00000001",
            "0x0",
            ",,,",
            "0xzz",
            "0000:00:00.0",
            "ffffffff:ff:1f.7",
            "0000:04:00.0",
            "zz:garbage",
            "00:20.0",
            "0.000000",
            "-3.5",
            "100000000000",
        ])
        .prop_map(str::to_string),
        any::<u64>().prop_map(|v| v.to_string()),
        any::<u32>().prop_map(|v| format!("0x{v:08x}")),
        (0u32..64).prop_map(|v| v.to_string()),
    ]
}

/// `text` with the `k`-th (modulo their count) value of `attr` set to `v`.
fn mutate(text: &str, attr: &str, k: usize, v: &str) -> String {
    let key = format!(" {attr}=\"");
    let starts: Vec<usize> = text
        .match_indices(&key)
        .map(|(i, _)| i + key.len())
        .collect();
    if starts.is_empty() {
        return text.to_string();
    }
    let start = starts[k % starts.len()];
    let end = start + text[start..].find('"').unwrap();
    let v = v
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    format!("{}{v}{}", &text[..start], &text[end..])
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match parse_hwloc_xml(text, Path::new("m.xml")) {
        Err(e) => {
            let e = e.to_string();
            prop_assert!(e.starts_with("m.xml"), "the error names the file: {}", e);
        }
        Ok(m) => match inspect::scenario_toml(&m, None) {
            Err(e) => {
                let e = e.to_string();
                prop_assert!(e.starts_with("m.xml"), "the error names the file: {}", e);
            }
            Ok(x) => {
                if let Err(e) = common::fabric_loads("m.toml", &x.toml) {
                    prop_assert!(false, "the export does not load: {}\n{}", e, x.toml);
                }
            }
        },
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// One attribute mutated.
    #[test]
    fn one_mutated_attribute_is_refused_or_exports(
        f in 0..FIXTURES.len(),
        a in 0..ATTRS.len(),
        k in any::<usize>(),
        v in value(),
    ) {
        check(&mutate(&texts()[f], ATTRS[a], k, &v))?;
    }

    /// Several attributes mutated at once.
    #[test]
    fn several_mutated_attributes_are_refused_or_export(
        f in 0..FIXTURES.len(),
        edits in proptest::collection::vec((0..ATTRS.len(), any::<usize>(), value()), 2..6),
    ) {
        let mut text = texts()[f].clone();
        for (a, k, v) in &edits {
            text = mutate(&text, ATTRS[*a], *k, v);
        }
        check(&text)?;
    }
}
