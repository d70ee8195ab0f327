//! `base = "NAME"`: a platform or device model written as a copy of another (built in,
//! included or in the same file) takes every key it does not give from the base, keeps
//! each key's basis, and says which keys it took; errors stay located in the user's file.

use fabric::basis::Basis;
use fabric::builtin::load_source;
use fabric::scenario::{Scenario, Source};

fn load(text: &str) -> Result<Scenario, String> {
    load_source(Source {
        name: "mine.toml".into(),
        text: text.into(),
    })
    .map_err(|e| e.to_string())
}

const COPY: &str = r#"[scenario]
name = "copy"

[platform.mine]
base = "r730"                     # built in, not included
cpu = "2 x Xeon E5-2690 v4"
clock_ghz = 2.6
[platform.mine.timing]
dram_gbps = { value = 65.0, basis = "assumption", why = "faster DIMMs" }

[platform.mine_1s]
base = "mine"                     # a copy of a copy, defined before in the file
packages = 1
interconnect = []

[device_model.cx4_x8]
base = "connectx4"
link = { gen = 3, width = 8 }

[[host]]
name = "a"
platform = "mine"
[[host.device]]
name = "nic"
device_model = "cx4_x8"
parent = "rc0"

[[host]]
name = "b"
platform = "mine_1s"
"#;

#[test]
fn a_copy_takes_what_it_does_not_give_from_its_base() {
    let s = load(COPY).unwrap();
    let r730 = fabric::builtin::load_any("ioctopus_r730").unwrap().topology;
    let base = r730.platforms.iter().find(|p| p.name == "r730").unwrap();
    let t = &s.topology;
    let mine = t.platforms.iter().find(|p| p.name == "mine").unwrap();
    assert_eq!(mine.clock_ghz, 2.6);
    assert_eq!(mine.cpu, "2 x Xeon E5-2690 v4");
    assert_eq!(
        (mine.packages, mine.cores_per_package, mine.llc_bytes),
        (base.packages, base.cores_per_package, base.llc_bytes)
    );
    assert_eq!(mine.interconnect, base.interconnect);
    let (mt, bt) = (mine.timing.as_ref().unwrap(), base.timing.as_ref().unwrap());
    assert_eq!(mt.dram_gbps, 65.0);
    assert_eq!(mt.dram_latency_ns, bt.dram_latency_ns);
    // Each key keeps its basis: the copy's own where it gives one, the base's otherwise.
    assert!(matches!(&mt.basis["dram_gbps"], Basis::Assumption(w) if w == "faster DIMMs"));
    assert_eq!(mt.basis["dram_latency_ns"], bt.basis["dram_latency_ns"]);
    let b = mine.base.as_ref().unwrap();
    assert_eq!(b.name, "r730");
    assert_eq!(b.given, ["cpu", "clock_ghz", "timing.dram_gbps"]);
    assert!(b.inherited.contains(&"timing.dram_latency_ns".to_string()));
    assert!(!b.inherited.contains(&"clock_ghz".to_string()));
    // A copy of a copy, one socket and no interconnect (an empty list replaces the base's).
    let one = t.platforms.iter().find(|p| p.name == "mine_1s").unwrap();
    assert_eq!((one.packages, one.clock_ghz), (1, 2.6));
    assert!(one.interconnect.is_empty());
    assert_eq!(one.timing.as_ref().unwrap().dram_gbps, 65.0);
    // The device model: its own link, the base's kind, product and timing.
    let nic = &t.devices[0];
    assert_eq!(nic.model, "Mellanox ConnectX-4 100 GbE");
    assert_eq!(nic.timing["nic_line_gbps"], 12.5);
    let node = t.nodes.iter().find(|n| n.name == "nic").unwrap();
    assert_eq!(node.link.map(|l| (l.gen, l.width)), Some((3, 8)));
}

fn error(platform_keys: &str) -> String {
    let text = format!(
        "[scenario]\nname = \"e\"\n{platform_keys}\n[[host]]\nname = \"h\"\nplatform = \"p\"\n"
    );
    load(&text).unwrap_err()
}

#[test]
fn errors_in_a_copy_are_located_in_the_users_file() {
    // An unknown base, named with what exists.
    let e = error("[platform.p]\nbase = \"r7300\"");
    assert!(
        e.starts_with("mine.toml:4:8: unknown base platform `r7300`"),
        "{e}"
    );
    assert!(e.contains("r730, skylake_8160"), "{e}");
    // A loop.
    let e = error("[platform.p]\nbase = \"q\"\n[platform.q]\nbase = \"p\"");
    assert!(e.contains("the base chain loops: p → q → p"), "{e}");
    // A bad value the copy gives: at that value.
    let e = error("[platform.p]\nbase = \"r730\"\nclock_ghz = -1.0");
    assert!(
        e.starts_with("mine.toml:5:13: clock_ghz must be 0.1..=10 GHz, not -1"),
        "{e}"
    );
    // A key the copy gives that no longer fits a key it took: at its `base` line, naming
    // the base.
    let e = error("[platform.p]\nbase = \"r730\"\npackages = 1");
    assert!(
        e.starts_with("mine.toml:4:8: unknown interconnect end `pkg1`")
            && e.contains("(from base `r730`)")
            && e.contains("platform.p.interconnect[0].ends"),
        "{e}"
    );
    // Without a base, every required key.
    let e = error("[platform.p]\ncpu = \"x\"");
    assert!(e.contains("missing field `packages`"), "{e}");
    // Device models likewise.
    let model = |keys: &str| {
        load(&format!(
            "[scenario]\nname = \"e\"\n[device_model.d]\n{keys}\n[[host]]\nname = \"h\"\nplatform = \"r730\"\n"
        ))
        .unwrap_err()
    };
    let e = model("base = \"connectx44\"");
    assert!(e.contains("unknown base device model `connectx44`"), "{e}");
    let e = model("base = \"connectx4\"\ntiming = { nic_line_gbps = -3.0 }");
    assert!(
        e.starts_with("mine.toml:5:28: nic_line_gbps must be a bandwidth"),
        "{e}"
    );
}
