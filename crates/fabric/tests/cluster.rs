//! `[cluster]`: a tree of cluster switches with hosts from a template. The generated
//! smartio_cluster60 is the machine the explicit file described; impossible trees and
//! slips in the description are located errors; ways between adapters are searched when
//! asked and are the shortest.

use fabric::builtin::{self, BuiltinResolver};
use fabric::describe;
use fabric::scenario::{load, Scenario, Source};
use fabric::{CableEnd, CableId, ClusterSwitchId, Fabric, FabricError, NtbHop, NtbId, Topology};

const EXPLICIT60: &str = include_str!("fixtures/smartio_cluster60_explicit.toml");

fn try_load(text: &str) -> Result<Scenario, String> {
    load(
        Source {
            name: "my.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
    .map_err(|e| e.to_string())
}

fn explicit60() -> Fabric {
    let s = load(
        Source {
            // Includes resolve among the built-in files, as for the file it was.
            name: "builtin:smartio_cluster60_explicit.toml".into(),
            text: EXPLICIT60.into(),
        },
        &BuiltinResolver,
    )
    .unwrap();
    Fabric::from_scenario(s).unwrap()
}

fn generated60() -> Fabric {
    Fabric::from_scenario(builtin::load_builtin("smartio_cluster60").unwrap().unwrap()).unwrap()
}

fn cable_names(t: &Topology) -> Vec<(String, String, String)> {
    t.cables
        .iter()
        .map(|c| {
            (
                t.cable_end_label(c.ends[0]),
                t.cable_end_label(c.ends[1]),
                c.link.to_string(),
            )
        })
        .collect()
}

#[test]
fn the_generated_cluster60_is_the_explicit_one() {
    let (g, e) = (generated60(), explicit60());
    // The built-in file really is written with the generator.
    let text = builtin::source_of("smartio_cluster60").unwrap().text;
    assert!(text.contains("[cluster]") && text.matches("[[host]]").count() == 1);

    let names = |t: &Topology| t.hosts.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&g.topo).len(), 60);
    assert_eq!(names(&g.topo), names(&e.topo), "same hosts, same order");
    let switches = |t: &Topology| {
        t.cluster_switches
            .iter()
            .map(|s| (s.name.clone(), t.chip(s.chip).name.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(switches(&g.topo).len(), 7);
    assert_eq!(switches(&g.topo), switches(&e.topo));
    assert_eq!(cable_names(&g.topo).len(), 66);
    assert_eq!(cable_names(&g.topo), cable_names(&e.topo), "same cables");
    // Everything `topo show` says: PCIe trees, requester IDs, BARs, bridge windows.
    assert_eq!(
        describe::topology_json(&g),
        describe::topology_json(&e),
        "same topology"
    );
    assert_eq!(describe::topology_text(&g), describe::topology_text(&e));
    for (a, b) in g.topo.hosts.iter().zip(&e.topo.hosts) {
        assert_eq!(a.regions, b.regions, "{}", a.name);
    }
    // The same ways between adapters (and so the same `topo path` hops; tested with the
    // host layer in crates/cli/tests/topo_cli.rs).
    for (s, d) in [(0, 59), (0, 5), (33, 0), (17, 42), (59, 50)] {
        let (s, d) = (NtbId(s), NtbId(d));
        assert_eq!(
            g.topo.ntb_way(s, d),
            e.topo.ntb_way(s, d),
            "h{s:02} → h{d:02}"
        );
        assert!(g.topo.ntb_way(s, d).is_some());
    }
}

/// A `[cluster]` scenario with `levels` (fan-out, uplink width) below the top switch.
fn cluster(levels: &[(u32, u8)], per_leaf: u32, extra: &str) -> String {
    let mut s = String::from(
        r#"include = ["platforms/smartio.toml"]

[scenario]
name = "t"

[cluster]
switch_chip = "mxs824"
switch_names = "s{}"
hosts_per_leaf = PER_LEAF
host_names = "h{:03}"
host_link = { gen = 3, width = 8 }
"#,
    )
    .replace("PER_LEAF", &per_leaf.to_string());
    for (f, w) in levels {
        s += &format!("[[cluster.level]]\nfanout = {f}\nlink = {{ gen = 3, width = {w} }}\n");
    }
    s += r#"[cluster.host]
platform = "smartio_host"
[[cluster.host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
"#;
    s + extra
}

#[test]
fn a_tree_has_the_hosts_switches_and_cables_it_describes() {
    let s = try_load(&cluster(&[(3, 16), (2, 8)], 4, "")).unwrap();
    let t = &s.topology;
    assert_eq!(t.hosts.len(), 3 * 2 * 4);
    assert_eq!(t.cluster_switches.len(), 1 + 3 + 6);
    assert_eq!(
        t.cables.len(),
        3 + 6 + 24,
        "one uplink per switch, one per host"
    );
    assert_eq!(t.hosts[0].name, "h000");
    assert_eq!(t.hosts[23].name, "h023");
    // Breadth-first switch numbers: s0 on top, s1..s3, then s4..s9 (two under each).
    let end = |c: &fabric::Cable| (t.cable_end_label(c.ends[0]), t.cable_end_label(c.ends[1]));
    assert_eq!(end(&t.cables[0]), ("s1".into(), "s0".into()));
    assert_eq!(end(&t.cables[3]), ("s4".into(), "s1".into()));
    assert_eq!(end(&t.cables[8]), ("s9".into(), "s3".into()));
    assert_eq!(t.cables[3].link.width, 8);
    assert_eq!(t.cables[0].link.width, 16);
    // Hosts leaf by leaf: h000..h003 on s4, h020..h023 on s9.
    assert_eq!(end(&t.cables[9]), ("h000.ntb".into(), "s4".into()));
    assert_eq!(end(&t.cables[32]), ("h023.ntb".into(), "s9".into()));
    // From one end of the tree to the other: up to the top and down again.
    let way = t.ntb_way(NtbId(0), NtbId(23)).unwrap();
    let switches: Vec<String> = way
        .iter()
        .filter_map(|h| match h {
            NtbHop::ClusterSwitch(s) => Some(t.cluster_switches[s.index()].name.clone()),
            NtbHop::Cable(_) => None,
        })
        .collect();
    assert_eq!(switches, ["s4", "s1", "s0", "s3", "s9"]);
    assert_eq!(
        t.ntb_way(NtbId(0), NtbId(3)).unwrap().len(),
        3,
        "same leaf: cable, s4, cable"
    );
}

#[test]
fn a_single_switch_cluster_has_no_levels() {
    let s = try_load(&cluster(&[], 5, "")).unwrap();
    assert_eq!(s.topology.hosts.len(), 5);
    assert_eq!(s.topology.cluster_switches.len(), 1);
    assert_eq!(s.topology.cables.len(), 5);
}

#[test]
fn written_hosts_take_a_generated_place_or_join_the_cluster() {
    let extra = r#"
[[host]]
name = "h002"
platform = "smartio_host"
iommu = true
[[host.ntb]]
name = "ntb"
adapter = "pxh810"
parent = "rc0"

[[host]]
name = "outside"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"

[[cable]]
ends = ["outside.ntb", "s0"]
link = { gen = 3, width = 8 }
"#;
    let s = try_load(&cluster(&[(2, 16)], 3, extra)).unwrap();
    let t = &s.topology;
    let names: Vec<&str> = t.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        names,
        ["h000", "h001", "h002", "h003", "h004", "h005", "outside"]
    );
    assert!(
        t.hosts[2].iommu && !t.hosts[1].iommu,
        "h002 is the written one"
    );
    assert_eq!(t.ntbs[t.hosts[2].ntbs[0].index()].adapter.name, "pxh810");
    // The written cable comes after the tree's, and reaches every host.
    let last = t.cables.last().unwrap();
    assert_eq!(last.ends[1], CableEnd::ClusterSwitch(ClusterSwitchId(0)));
    assert!(t.ntb_way(t.hosts[6].ntbs[0], t.hosts[5].ntbs[0]).is_some());
}

fn err_of(text: &str) -> String {
    try_load(text).expect_err("should be rejected")
}

/// The 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn impossible_trees_are_refused_where_they_are_written() {
    // Twelve x8 hosts and an x16 uplink: 112 lanes on a 96-lane switch.
    let text = cluster(&[(2, 16)], 12, "");
    let e = err_of(&text);
    let at = format!("my.toml:{}:", line_of(&text, "hosts_per_leaf"));
    assert!(e.starts_with(&at), "{e}");
    assert!(
        e.contains("impossible tree: each switch of level 1 would cable 12 hosts at x8 and x16 up: 13 ports and 112 lanes; a mxs824 has 24 ports and 96 lanes")
            && e.contains("(key `cluster.hosts_per_leaf`)"),
        "{e}"
    );
    // Seven x16 switches under the top.
    let text = cluster(&[(7, 16)], 2, "");
    let e = err_of(&text);
    assert!(
        e.starts_with(&format!("my.toml:{}:", line_of(&text, "fanout")))
            && e.contains("the top switch would cable 7 switches at x16: 7 ports and 112 lanes")
            && e.contains("(key `cluster.level[0].fanout`)"),
        "{e}"
    );
    // More children than ports, though the lanes would do: 25 x1 hosts.
    let text = cluster(&[], 25, "").replace(
        "host_link = { gen = 3, width = 8 }",
        "host_link = { gen = 3, width = 1 }",
    );
    let e = err_of(&text);
    assert!(
        e.contains("25 ports and 25 lanes; a mxs824 has 24 ports"),
        "{e}"
    );
    // No hosts, and a level of no switches.
    let e = err_of(&cluster(&[(2, 16)], 0, ""));
    assert!(
        e.contains("a leaf switch needs at least one host") && e.contains("cluster.hosts_per_leaf"),
        "{e}"
    );
    let e = err_of(&cluster(&[(2, 16), (0, 8)], 2, ""));
    assert!(
        e.contains("at least one switch under each switch above it")
            && e.contains("cluster.level[1].fanout"),
        "{e}"
    );
    // A tree too large to be meant (and too large to build).
    let e = err_of(&cluster(
        &[
            (10, 8),
            (10, 8),
            (10, 8),
            (10, 8),
            (10, 8),
            (10, 8),
            (10, 8),
        ],
        10,
        "",
    ));
    assert!(
        e.contains("the tree has 100000000 hosts; a cluster has at most 100000"),
        "{e}"
    );
}

#[test]
fn slips_in_a_cluster_are_located_and_named() {
    let base = cluster(&[(2, 16)], 3, "");
    let check = |text: String, needle: &str, key: &str, words: &str| {
        let e = err_of(&text);
        let at = format!("my.toml:{}:", line_of(&text, needle));
        assert!(e.starts_with(&at), "at {at}: {e}");
        assert!(e.contains(&format!("(key `{key}`)")), "{key}: {e}");
        assert!(e.contains(words), "{words}: {e}");
    };
    check(
        base.replace("\"mxs824\"", "\"mxs999\""),
        "mxs999",
        "cluster.switch_chip",
        "unknown chip `mxs999`",
    );
    check(
        base.replace("\"mxs824\"", "\"pex8796\""),
        "pex8796",
        "cluster.switch_chip",
        "not a cluster switch chip",
    );
    check(
        base.replace("\"h{:03}\"", "\"h{:03\""),
        "host_names",
        "cluster.host_names",
        "is not a name pattern",
    );
    check(
        base.replace("\"s{}\"", "\"s.{}\""),
        "switch_names",
        "cluster.switch_names",
        "is not a name pattern",
    );
    check(
        base.replace("\"s{}\"", "\"h{:03}\""),
        "switch_names",
        "cluster.switch_names",
        "cluster switch name `h000` is invalid or already used by a host or switch",
    );
    check(
        base.replace(
            "host_link = { gen = 3, width = 8 }",
            "host_link = { gen = 3, width = 8 }\nhost_ntb = \"ntb2\"",
        ),
        "host_ntb",
        "cluster.host_ntb",
        "the host template has no NTB adapter `ntb2`",
    );
    check(
        base.replace("[cluster.host]\n", "[cluster.host]\nname = \"x\"\n"),
        "name = \"x\"",
        "cluster.host.name",
        "its hosts are named by `cluster.host_names`",
    );
    check(
        base.replace("hosts_per_leaf = 3", "hosts_per_leaf = 3\nhosts = 6"),
        "hosts = 6",
        "cluster.hosts",
        "unknown field `hosts`",
    );
    // The template's own keys, named under `cluster.host`.
    check(
        base.replace("parent = \"rc0\"", "parent = \"rc7\""),
        "rc7",
        "cluster.host.ntb[0].parent",
        "`rc7` is not a root complex or switch of host `h000`",
    );
    check(
        base.replace("adapter = \"pxh830\"", "adapter = \"pxh999\""),
        "pxh999",
        "cluster.host.ntb[0].adapter",
        "unknown NTB adapter `pxh999`",
    );
    // An x16 host cable on the PXH810's x8 port: located at the host link.
    check(
        base.replace("adapter = \"pxh830\"", "adapter = \"pxh810\"")
            .replace(
                "host_link = { gen = 3, width = 8 }",
                "host_link = { gen = 3, width = 16 }",
            ),
        "host_link",
        "cluster.host_link",
        "has 1 cable port(s) of up to x8",
    );
    // A written host in a generated place must have the adapter the cable plugs into.
    let text = base.clone()
        + "\n[[host]]\nname = \"h004\"\nplatform = \"smartio_host\"\n[[host.ntb]]\nname = \"other\"\nadapter = \"pxh830\"\nparent = \"rc0\"\n";
    check(
        text,
        "name = \"h004\"",
        "host[0].name",
        "host `h004` takes the place of a host of the cluster, whose cable plugs into its NTB adapter `ntb`",
    );
    // A written cable to a full leaf: the switch's lanes, at the cable.
    let text = cluster(&[(2, 16)], 10, "")
        + "\n[[host]]\nname = \"x\"\nplatform = \"smartio_host\"\n[[host.ntb]]\nname = \"ntb\"\nadapter = \"pxh830\"\nparent = \"rc0\"\n[[cable]]\nends = [\"x.ntb\", \"s1\"]\nlink = { gen = 3, width = 8 }\n";
    check(
        text,
        "[[cable]]",
        "cable[0]",
        "cluster switch `s1` has 12 cables and 104 lanes cabled; a mxs824 has 24 ports and 96 lanes",
    );
    // Template or written host: one [[host]] without a name is still refused.
    let text = base.clone() + "\n[[host]]\nplatform = \"smartio_host\"\n";
    check(text, "[[host]]", "host[0].name", "a [[host]] needs `name`");
}

#[test]
fn a_cluster_belongs_in_the_scenario_not_an_include() {
    struct One(String);
    impl fabric::scenario::Resolver for One {
        fn resolve(&self, _: &str, _: &str) -> Result<Source, String> {
            Ok(Source {
                name: "inc.toml".into(),
                text: self.0.clone(),
            })
        }
    }
    let whole = cluster(&[], 1, "");
    let inc = whole[whole.find("[cluster]").unwrap()..].to_string();
    let e = load(
        Source {
            name: "my.toml".into(),
            text: "include = [\"inc.toml\"]\n[scenario]\nname = \"t\"\n".into(),
        },
        &One(inc),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("inc.toml") && e.contains("not [[host]] or [cluster]"),
        "{e}"
    );
}

/// Three hosts in a line of back-to-back cables (b has a two-port adapter) and two
/// switches joined twice (a ring through s0, s1 and s2): ways never pass through a third
/// host's adapter, and are the shortest.
#[test]
fn ways_are_shortest_and_never_through_another_host() {
    let text = r#"include = ["platforms/smartio.toml"]
[scenario]
name = "t"
[[host]]
name = "a"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
[[host]]
name = "b"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
[[host]]
name = "c"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
[[host.ntb]]
name = "ntb2"
adapter = "pxh830"
parent = "rc0"
[[host]]
name = "d"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
[[cluster_switch]]
name = "s0"
chip = "mxs824"
[[cluster_switch]]
name = "s1"
chip = "mxs824"
[[cluster_switch]]
name = "s2"
chip = "mxs824"
[[cable]]
ends = ["a.ntb", "b.ntb"]
link = { gen = 3, width = 8 }
[[cable]]
ends = ["b.ntb", "c.ntb"]
link = { gen = 3, width = 8 }
[[cable]]
ends = ["s0", "s1"]
link = { gen = 3, width = 8 }
[[cable]]
ends = ["s1", "s2"]
link = { gen = 3, width = 8 }
[[cable]]
ends = ["s2", "s0"]
link = { gen = 3, width = 8 }
[[cable]]
ends = ["c.ntb2", "s0"]
link = { gen = 3, width = 8 }
[[cable]]
ends = ["d.ntb", "s2"]
link = { gen = 3, width = 8 }
"#;
    let mut f = Fabric::from_scenario(try_load(text).unwrap()).unwrap();
    let t = &f.topo;
    let ntb = |h: &str, n: &str| t.ntb_by_name(t.host_by_name(h).unwrap(), n).unwrap();
    let (a, b, c, c2, d) = (
        ntb("a", "ntb"),
        ntb("b", "ntb"),
        ntb("c", "ntb"),
        ntb("c", "ntb2"),
        ntb("d", "ntb"),
    );
    assert_eq!(t.ntb_way(a, b), Some(vec![NtbHop::Cable(CableId(0))]));
    assert!(
        !t.ntb_reaches(a, c) && t.ntb_way(a, c).is_none(),
        "not through b"
    );
    // c's second adapter reaches d through s0 and s2 directly, not around by s1.
    assert_eq!(
        t.ntb_way(c2, d),
        Some(vec![
            NtbHop::Cable(CableId(5)),
            NtbHop::ClusterSwitch(ClusterSwitchId(0)),
            NtbHop::Cable(CableId(4)),
            NtbHop::ClusterSwitch(ClusterSwitchId(2)),
            NtbHop::Cable(CableId(6)),
        ])
    );
    assert!(t.ntb_way(c, d).is_none(), "c.ntb is cabled to b only");
    let (ha, hc) = (t.host_by_name("a").unwrap(), t.host_by_name("c").unwrap());
    let e = f.ntb_map_window(a, hc, 0, 4096).unwrap_err();
    assert_eq!(
        e,
        FabricError::Unreachable {
            from: "a".into(),
            to: "c".into()
        }
    );
    // A window keeps its way: one per adapter pair, however many windows use it, gone
    // with the last of them.
    assert_eq!(f.ntb_ways_kept(), 0);
    let w1 = f.ntb_map_window(d, hc, 0, 4096).unwrap();
    let w2 = f.ntb_map_window(d, hc, 1 << 30, 3 << 30).unwrap();
    assert_eq!(f.ntb_ways_kept(), 1);
    f.ntb_map_window(d, ha, 0, 4096).unwrap_err();
    assert_eq!(f.ntb_ways_kept(), 1);
    f.ntb_unmap_window(&w1).unwrap();
    assert_eq!(f.ntb_ways_kept(), 1, "w2 still uses it");
    // A mapping the LUT cannot take gives its way back.
    let lut = f.ntb_state(d).lut_windows as u64;
    let ws = f.topo.ntbs[d.index()].window_size;
    let e = f.ntb_map_window(c2, hd(&f), 0, (lut - 1) * ws);
    assert!(e.is_ok());
    let e = f.ntb_map_window(c2, hd(&f), 0, 2 * ws).unwrap_err();
    assert!(matches!(e, FabricError::Exhausted { .. }), "{e}");
    assert_eq!(f.ntb_ways_kept(), 2, "d → c and c → d");
    f.ntb_unmap_window(&w2).unwrap();
    assert_eq!(f.ntb_ways_kept(), 1);
    // Routing follows the way a reused slot holds now.
    let w3 = f.ntb_map_window(d, hc, 0, 4096).unwrap();
    assert_eq!(f.ntb_ways_kept(), 2);
    let e = f.ntb_state(d).window(w3.first).unwrap();
    assert_eq!(f.ntb_way_hops(e.way), t_way(&f, d, c2).as_slice());
}

fn hd(f: &Fabric) -> fabric::HostId {
    f.topo.host_by_name("d").unwrap()
}

fn t_way(f: &Fabric, a: fabric::NtbId, b: fabric::NtbId) -> Vec<NtbHop> {
    f.topo.ntb_way(a, b).unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Mutating one line of a valid cluster gives Ok or a located error, never a panic.
    #[test]
    fn mutated_clusters_never_panic(line in 0usize..32, repl in proptest::sample::select(vec![
        "", "x = 1", "[cluster]", "[[cluster.level]]", "fanout = 0", "fanout = 4294967295",
        "hosts_per_leaf = 0", "hosts_per_leaf = 4294967295", "host_names = \"{}\"",
        "host_names = \"h{:09}\"", "switch_names = \"{}{}\"", "switch_names = \"\"",
        "host_ntb = \"\"", "link = { gen = 9, width = 8 }", "link = { gen = 3, width = 0 }",
        "[cluster.host]", "name = \"h000\"", "[[host]]", "platform = \"nope\"",
        "switch_chip = \"generic\"", "host_link = { gen = 3, width = 32 }",
    ])) {
        let text = cluster(&[(2, 16), (3, 8)], 4, "");
        let mut lines: Vec<&str> = text.lines().collect();
        if line < lines.len() {
            lines[line] = repl;
        }
        if let Err(e) = try_load(&lines.join("\n")) {
            proptest::prop_assert!(e.starts_with("my.toml"), "error names the file: {}", e);
        }
    }
}

#[test]
fn the_10k_cluster_is_the_tree_its_file_describes() {
    let t = builtin::load_builtin("smartio_cluster10k")
        .unwrap()
        .unwrap()
        .topology;
    assert_eq!(t.hosts.len(), 10_000);
    assert_eq!(t.cluster_switches.len(), 1 + 10 + 100 + 1000);
    assert_eq!(t.cables.len(), 1110 + 10_000);
    assert_eq!(
        (t.hosts[0].name.as_str(), t.hosts[9999].name.as_str()),
        ("h0000", "h9999")
    );
    assert_eq!(t.devices.len(), 2, "h0000's chassis NVMe and GPU");
    // Every switch within its chip: the top one cables ten x8 switches, the others
    // one x8 up and ten x8 down.
    for s in &t.cluster_switches {
        let lanes: u32 = s
            .cables
            .iter()
            .map(|&c| t.cables[c.index()].link.width as u32)
            .sum();
        assert!(s.cables.len() <= 11 && lanes <= 88, "{}", s.name);
    }
    let way = t.ntb_way(NtbId(0), NtbId(9999)).unwrap();
    assert_eq!(
        way.iter()
            .filter(|h| matches!(h, NtbHop::ClusterSwitch(_)))
            .count(),
        7
    );
}
