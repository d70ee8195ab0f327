//! Typed parameter tables: every timing, chip, adapter and device-model value is checked
//! when the scenario loads, with a located error naming its key; every value states its
//! basis; device models are defined once and instantiated by name.

use fabric::builtin::{self, BuiltinResolver};
use fabric::scenario::{load, Resolver, Source};
use fabric::{Basis, HostId, ScenarioError};
use proptest::prelude::*;

/// One timed host with a switch, a GPU from a device model, a device with its own
/// timing, and an NTB on a user-defined adapter and chip; every table a test can poke.
const BASE: &str = r#"include = ["platforms/smartio.toml", "platforms/devices.toml"]

[scenario]
name = "t"

[chip.mychip]
lanes = 32
ports = 8
latency_ns = { value = 120.0, basis = "assumption", why = "a Gen3 switch" }
credits = [8, 0, 11]

[adapter.myntb]
chip = "mychip"
link = { gen = 3, width = 8 }
bar_size = "1 GiB"
lut_windows = 32
rid_lut_entries = 32
rid_reserved = 2
timing = { ntb_translate_ns = 33.0, bar_gbps = 1.0, bar_latency_ns = 200.0, bar_rcb_bytes = 64 }

[device_model.card]
kind = "nic"
model = "a test NIC"
link = { gen = 3, width = 8 }
bars = [{ size = "1 MiB" }]
timing = { bar_gbps = 2.0, bar_latency_ns = 300.0, bar_rcb_bytes = 64, dma_max_reads = 16, dma_mrrs_bytes = 512 }

[[host]]
name = "a"
platform = "smartio_host"
[[host.switch]]
name = "sw"
chip = "mychip"
parent = "rc0"
link = { gen = 3, width = 16 }
[[host.device]]
name = "gpu"
device_model = "p4000"
parent = "sw"
[[host.device]]
name = "nic"
device_model = "card"
parent = "rc0"
timing = { dma_max_reads = 8 }
[[host.ntb]]
name = "ntb"
adapter = "myntb"
parent = "rc0"
"#;

fn try_load(text: &str) -> Result<fabric::scenario::Scenario, ScenarioError> {
    load(
        Source {
            name: "my.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
}

fn err_of(text: &str) -> ScenarioError {
    try_load(text).expect_err("should be rejected")
}

/// Resolves the built-in includes, with `platforms/smartio.toml` edited.
struct Edited(String);

impl Resolver for Edited {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        if include == "platforms/smartio.toml" {
            return Ok(Source {
                name: "smartio.toml".into(),
                text: self.0.clone(),
            });
        }
        BuiltinResolver.resolve(from, include)
    }
}

fn smartio() -> String {
    builtin::FILES
        .iter()
        .find(|(p, _)| *p == "platforms/smartio.toml")
        .expect("built in")
        .1
        .to_string()
}

/// Loads BASE with one platform timing key of smartio.toml set to `value`.
fn with_platform_value(
    key: &str,
    value: &str,
) -> Result<fabric::scenario::Scenario, ScenarioError> {
    let text: String = smartio()
        .lines()
        .map(|l| {
            if l.starts_with(&format!("{key} = ")) {
                format!("{key} = {value}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    load(
        Source {
            name: "my.toml".into(),
            text: BASE.into(),
        },
        &Edited(text),
    )
}

fn platform_err(key: &str, value: &str) -> ScenarioError {
    with_platform_value(key, value).expect_err("should be rejected")
}

fn assert_located(e: &ScenarioError, file: &str, key: &str, msg: &str) {
    assert_eq!(e.file, file, "{e}");
    assert!(e.line > 0, "located: {e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    assert!(e.message.contains(msg), "`{msg}` in: {e}");
}

#[test]
fn the_base_scenario_loads_with_models_merged_and_bases_kept() {
    let s = try_load(BASE).unwrap();
    let t = &s.topology;
    let gpu = &t.devices[t.device_by_name(HostId(0), "gpu").unwrap().index()];
    assert_eq!(gpu.model, "NVIDIA Quadro P4000");
    assert_eq!(gpu.device_model.as_deref(), Some("p4000"));
    assert_eq!(gpu.timed.dma.unwrap().max_reads, 26);
    // The P4000's copy engine is an assumption taken from the K40c (docs/hardware.md §2 has no
    // P4000 figure): the model's basis travels with its value.
    assert_eq!(gpu.timed.basis["dma_max_reads"].word(), "assumption");
    assert!(
        gpu.timed.basis["dma_max_reads"]
            .note()
            .contains("taken from the K40c"),
        "the model's basis travels with its value"
    );
    assert_eq!(
        t.node(gpu.functions[0]).bars.len(),
        3,
        "bars from the model"
    );
    // A device's own key wins over its model's, the rest is the model's.
    let nic = &t.devices[t.device_by_name(HostId(0), "nic").unwrap().index()];
    assert_eq!(nic.timed.dma.unwrap().max_reads, 8);
    assert_eq!(nic.timed.dma.unwrap().mrrs_bytes, 512);
    assert_eq!(nic.timed.basis["dma_max_reads"], Basis::Unstated);
    assert_eq!(nic.timed.bar.unwrap().latency_ns, 300.0);
    let chip = t.chips.iter().find(|c| c.name == "mychip").unwrap();
    assert_eq!(chip.credits, [8, 0, 11]);
    assert_eq!(
        chip.basis["latency_ns"],
        Basis::Assumption("a Gen3 switch".into())
    );
    assert_eq!(chip.basis["lanes"], Basis::Unstated);
    let pt = t.platforms[0].timing.as_ref().unwrap();
    assert_eq!(
        (pt.rc_p2p_read_tags, pt.rcb_bytes, pt.iotlb_entries),
        (47, 64, 64)
    );
    assert_eq!(pt.pcie_link_ns, 20.0);
    assert_eq!(pt.cable_ns, 10.0);
    assert_eq!(pt.fc_update_ns, 2.0);
    assert_eq!(
        (
            pt.cpu_mmio_write_bytes,
            pt.cpu_mmio_read_bytes,
            pt.cpu_mmio_reads
        ),
        (64, 64, 1)
    );
}

#[test]
fn every_built_in_value_states_its_basis() {
    let names = builtin::names();
    assert!(names.len() >= 10);
    for name in names {
        let s = builtin::load_builtin(name).unwrap().unwrap();
        let t = &s.topology;
        let mut checked = 0;
        let mut check = |what: String, b: &Basis| {
            assert_ne!(b, &Basis::Unstated, "{name}: {what} states no basis");
            assert!(!b.note().trim().is_empty(), "{name}: {what}");
            checked += 1;
        };
        for p in &t.platforms {
            if let Some(pt) = &p.timing {
                assert_eq!(
                    pt.basis.len(),
                    fabric::scenario::PLATFORM_TIMING_KEYS.len(),
                    "{name}: every key of {}",
                    p.name
                );
                for (k, b) in &pt.basis {
                    check(format!("platform.{}.timing.{k}", p.name), b);
                }
            }
        }
        for c in t.chips.iter().filter(|c| !c.basis.is_empty()) {
            for (k, b) in &c.basis {
                check(format!("chip.{}.{k}", c.name), b);
            }
        }
        for n in &t.ntbs {
            for (k, b) in &n.adapter.basis {
                check(format!("adapter.{}.{k}", n.adapter.name), b);
            }
        }
        for d in &t.devices {
            for (k, b) in &d.timed.basis {
                check(format!("device {}.timing.{k}", d.name), b);
            }
            let timed = t.platform_of(d.host).timing.is_some();
            assert!(
                !timed || d.timed.bar.is_some(),
                "{name}: device {} on a timed platform has BAR timing",
                d.name
            );
        }
        let _ = checked;
    }
}

#[test]
fn the_p4000_is_defined_once() {
    let pasted = builtin::FILES
        .iter()
        .filter(|(_, text)| text.contains("dma_max_reads = { value = 26.0"))
        .count();
    assert_eq!(pasted, 1, "the P4000's calibrated table lives in one file");
    for name in [
        "smartio_chassis_b2b",
        "smartio_chassis_baseline",
        "smartio_chassis_mxs824",
        "smartio_cluster60",
    ] {
        let t = builtin::load_builtin(name).unwrap().unwrap().topology;
        let gpu = t
            .devices
            .iter()
            .find(|d| d.kind == fabric::raw::DeviceKind::Gpu)
            .unwrap();
        assert_eq!(gpu.device_model.as_deref(), Some("p4000"), "{name}");
        assert_eq!(gpu.timed.dma.unwrap().max_reads, 26, "{name}");
    }
}

#[test]
fn a_device_without_a_bar_table_on_a_timed_platform_is_refused_at_load() {
    // Previously such a device silently got 1 GB/s and 200 ns.
    let e = err_of(&BASE.replace(
        "device_model = \"card\"\nparent = \"rc0\"\ntiming = { dma_max_reads = 8 }",
        "kind = \"nic\"\nparent = \"rc0\"\nlink = { gen = 3, width = 8 }\nbars = [{ size = \"1 MiB\" }]",
    ));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[1].timing",
        "missing timing parameter `bar_gbps`, `bar_latency_ns`, `bar_rcb_bytes`",
    );
    // Without BARs nothing is needed; on an untimed platform neither.
    try_load(&BASE.replace(
        "device_model = \"card\"\nparent = \"rc0\"\ntiming = { dma_max_reads = 8 }",
        "kind = \"nic\"\nparent = \"rc0\"\nlink = { gen = 3, width = 8 }",
    ))
    .unwrap();
}

#[test]
fn a_gpu_on_a_timed_platform_needs_launch_and_poll() {
    // The model gives launch/poll, so overriding one BAR key is fine.
    try_load(&BASE.replace(
        "device_model = \"p4000\"\nparent = \"sw\"",
        "device_model = \"p4000\"\nparent = \"sw\"\ntiming = { bar_gbps = 3.0 }",
    ))
    .unwrap();
    let e = err_of(&BASE.replace(
        "device_model = \"p4000\"\nparent = \"sw\"",
        "kind = \"gpu\"\nparent = \"sw\"\nlink = { gen = 3, width = 16 }\nbars = [{ size = \"16 MiB\" }]\ntiming = { bar_gbps = 3.0, bar_latency_ns = 1.0, bar_rcb_bytes = 128 }",
    ));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[0].timing",
        "missing timing parameter `launch_ns`, `poll_ns`",
    );
}

#[test]
fn half_a_dma_table_is_refused() {
    let e = err_of(&BASE.replace(
        "dma_max_reads = 16, dma_mrrs_bytes = 512",
        "dma_max_reads = 16",
    ));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[1].timing",
        "missing timing parameter `dma_mrrs_bytes`",
    );
}

#[test]
fn a_misspelt_platform_timing_key_is_refused_at_load() {
    let text = smartio().replace("rc_latency_ns = ", "rc_latency_nss = ");
    let e = load(
        Source {
            name: "my.toml".into(),
            text: BASE.into(),
        },
        &Edited(text),
    )
    .unwrap_err();
    assert_located(
        &e,
        "smartio.toml",
        "platform.smartio_host.timing.rc_latency_nss",
        "unknown timing parameter `rc_latency_nss`",
    );
}

/// smartio.toml without its line for `key`: refused at load, located at the key.
fn refused_without(key: &str) {
    let text: String = smartio()
        .lines()
        .filter(|l| !l.starts_with(key))
        .collect::<Vec<_>>()
        .join("\n");
    let e = load(
        Source {
            name: "my.toml".into(),
            text: BASE.into(),
        },
        &Edited(text),
    )
    .unwrap_err();
    assert!(e.line > 0, "{e}");
    let located = format!("platform.smartio_host.timing.{key}");
    assert_eq!(e.key.as_deref(), Some(located.as_str()));
    assert!(
        e.message.contains(&format!("no timing parameter `{key}`")),
        "{e}"
    );
}

#[test]
fn a_missing_platform_timing_key_is_refused_at_load() {
    refused_without("fc_update_ns");
}

#[test]
fn a_platform_without_its_snoop_mode_is_refused_at_load() {
    refused_without("home_snoop");
}

#[test]
fn the_snoop_mode_is_read_as_stated() {
    let home = with_platform_value("home_snoop", "1").unwrap();
    let source = with_platform_value("home_snoop", "0").unwrap();
    let timing =
        |s: &fabric::scenario::Scenario| s.topology.platform_of(HostId(0)).timing.clone().unwrap();
    assert!(timing(&home).home_snoop);
    assert!(!timing(&source).home_snoop);
}

#[test]
fn the_named_bad_values_get_their_messages() {
    let k = |key: &str| format!("platform.smartio_host.timing.{key}");
    let cases = [
        ("rc_latency_ns", "1e30", "rc_latency_ns must be a latency in 0..=1e9 ns (at most 1 s), not 1000000000000000000000000000000"),
        ("rc_latency_ns", "-5.0", "must be a latency in 0..=1e9 ns"),
        ("rc_latency_ns", "nan", "must be a latency in 0..=1e9 ns (at most 1 s), not NaN"),
        ("dram_latency_ns", "inf", "not inf"),
        ("iotlb_entries", "1e15", "iotlb_entries must be a whole number of entries in 1..=1048576 (2^20)"),
        ("iotlb_entries", "0", "in 1..=1048576"),
        ("interconnect_gbps", "0", "interconnect_gbps must be a bandwidth in 0.01..=100000 GB/s, not 0"),
        ("dram_gbps", "-1", "must be a bandwidth"),
        ("rc_p2p_read_tags", "0", "rc_p2p_read_tags must be a whole number in 1..=1024, not 0"),
        ("rc_p2p_read_tags", "2.5", "a whole number"),
        ("rcb_bytes", "96", "rcb_bytes must be 64 or 128 (bytes), not 96"),
        ("read_completion_bytes", "96", "a power of two in 64..=4096 (bytes), not 96"),
        ("read_completion_bytes", "8192", "a power of two in 64..=4096"),
        ("cpu_mmio_reads", "0", "cpu_mmio_reads must be a whole number in 1..=1024"),
        ("cpu_mmio_write_bytes", "48", "a power of two in 4..=4096"),
        ("fc_update_ns", "2e9", "must be a latency"),
        ("home_snoop", "2", "home_snoop must be 1 (home snoop: the home agent reads its in-memory directory) or 0 (source snoop), not 2"),
        ("home_snoop", "0.5", "or 0 (source snoop), not 0.5"),
    ];
    for (key, value, msg) in cases {
        let e = platform_err(key, value);
        assert_located(&e, "smartio.toml", &k(key), msg);
    }
    // With a basis the value is checked the same way.
    let e = platform_err(
        "rc_latency_ns",
        "{ value = 1e30, basis = \"assumption\", why = \"x\" }",
    );
    assert_located(&e, "smartio.toml", &k("rc_latency_ns"), "must be a latency");
}

#[test]
fn read_completions_smaller_than_the_boundary_are_refused() {
    // smartio.toml returns 64 B completions; a 128 B boundary cannot split into them.
    let e = with_platform_value("rcb_bytes", "128").expect_err("should be rejected");
    assert_eq!(
        e.key.as_deref(),
        Some("platform.smartio_host.timing.read_completion_bytes"),
        "{e}"
    );
    assert!(
        e.message.contains(
            "read_completion_bytes (64) is below the read completion boundary rcb_bytes (128)"
        ),
        "{e}"
    );
}

#[test]
fn bad_device_and_adapter_values_are_located() {
    let e = err_of(&BASE.replace(
        "timing = { dma_max_reads = 8 }",
        "timing = { dma_max_reads = 0 }",
    ));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[1].timing.dma_max_reads",
        "dma_max_reads must be a whole number in 1..=1024, not 0",
    );
    let e = err_of(&BASE.replace("dma_mrrs_bytes = 512", "dma_mrrs_bytes = 300"));
    assert_located(
        &e,
        "my.toml",
        "device_model.card.timing.dma_mrrs_bytes",
        "a power of two in 128..=4096",
    );
    let e = err_of(&BASE.replace("dma_mrrs_bytes = 512", "dma_mrrs_bytes = 8192"));
    assert!(e.message.contains("128..=4096"), "{e}");
    let e = err_of(&BASE.replace("bar_gbps = 2.0", "bar_gbps = 0"));
    assert_located(
        &e,
        "my.toml",
        "device_model.card.timing.bar_gbps",
        "bar_gbps must be a bandwidth in 0.01..=100000 GB/s, not 0",
    );
    let e = err_of(&BASE.replace("bar_rcb_bytes = 64, dma", "bar_rcb_bytes = 256, dma"));
    assert_located(
        &e,
        "my.toml",
        "device_model.card.timing.bar_rcb_bytes",
        "must be 64 or 128",
    );
    let e = err_of(&BASE.replace(
        "timing = { dma_max_reads = 8 }",
        "timing = { dma_max_read = 8 }",
    ));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[1].timing.dma_max_read",
        "unknown timing parameter `dma_max_read`",
    );
    let e = err_of(&BASE.replace("ntb_translate_ns = 33.0", "ntb_translate_ns = 1e12"));
    assert_located(
        &e,
        "my.toml",
        "adapter.myntb.timing.ntb_translate_ns",
        "must be a latency",
    );
    let e = err_of(&BASE.replace(
        "latency_ns = { value = 120.0",
        "latency_ns = { value = -1.0",
    ));
    assert_located(&e, "my.toml", "chip.mychip.latency_ns", "must be a latency");
}

#[test]
fn the_basis_syntax_is_checked() {
    let cases = [
        (
            "{ value = 1.0, basis = \"guess\", why = \"x\" }",
            "unknown basis `guess`",
        ),
        ("{ value = 1.0, basis = \"assumption\" }", "missing `why`"),
        (
            "{ value = 1.0, basis = \"reference\", why = \"x\" }",
            "missing `source`",
        ),
        (
            "{ value = 1.0, basis = \"calibrated\", on = \"\" }",
            "`on` must be a non-empty string",
        ),
        (
            "{ value = 1.0, basis = \"assumption\", why = \"x\", on = \"y\" }",
            "unknown field `on`",
        ),
        ("{ basis = \"assumption\", why = \"x\" }", "needs `value`"),
        (
            "{ value = \"fast\", basis = \"assumption\", why = \"x\" }",
            "invalid type",
        ),
        ("\"NaN\"", "invalid type"),
    ];
    for (value, msg) in cases {
        let e = err_of(&BASE.replace(
            "timing = { dma_max_reads = 8 }",
            &format!("timing = {{ dma_max_reads = {value} }}"),
        ));
        assert!(e.line > 0 && e.file == "my.toml", "{e}");
        assert!(e.message.contains(msg), "`{msg}` in {e}");
        // An unknown key inside the parameter's table is named itself.
        let key = if msg == "unknown field `on`" {
            "host[0].device[1].timing.dma_max_reads.on"
        } else {
            "host[0].device[1].timing.dma_max_reads"
        };
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
    }
    let s = try_load(&BASE.replace(
        "timing = { dma_max_reads = 8 }",
        "timing = { dma_max_reads = { value = 8, basis = \"reference\", source = \"docs/hardware.md §5\" } }",
    ))
    .unwrap();
    let t = &s.topology;
    let nic = &t.devices[t.device_by_name(HostId(0), "nic").unwrap().index()];
    assert_eq!(
        nic.timed.basis["dma_max_reads"],
        Basis::Reference("docs/hardware.md §5".into())
    );
}

#[test]
fn device_models_are_checked_and_may_come_from_includes() {
    let e = err_of(&BASE.replace("device_model = \"card\"", "device_model = \"crad\""));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[1].device_model",
        "unknown device model `crad`",
    );
    let e = err_of(&BASE.replace(
        "device_model = \"card\"\nparent",
        "device_model = \"card\"\nkind = \"gpu\"\nparent",
    ));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[1].kind",
        "differs from its model's",
    );
    let e = err_of(&BASE.replace(
        "kind = \"nic\"\nmodel = \"a test NIC\"",
        "model = \"a test NIC\"",
    ));
    assert_located(
        &e,
        "my.toml",
        "host[0].device[1].kind",
        "a device needs `kind`",
    );
    // A model's BAR errors point into the model.
    let e = err_of(&BASE.replace(
        "bars = [{ size = \"1 MiB\" }]",
        "bars = [{ size = \"3 MiB\" }]",
    ));
    assert_located(
        &e,
        "my.toml",
        "device_model.card.bars[0].size",
        "power of two",
    );
    // Models defined twice (here and in devices.toml).
    let e = err_of(&BASE.replace("[device_model.card]", "[device_model.p4000]"));
    assert!(e.message.contains("defined twice"), "{e}");
}

#[test]
fn includes_may_define_device_models_but_not_hosts() {
    struct Inc;
    impl Resolver for Inc {
        fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
            if include == "mine.toml" {
                return Ok(Source {
                    name: "mine.toml".into(),
                    text: "[device_model.x]\nkind = \"other\"\n[[host]]\nname = \"h\"\nplatform = \"p\"\n"
                        .into(),
                });
            }
            BuiltinResolver.resolve(from, include)
        }
    }
    let text = BASE.replace(
        "\"platforms/devices.toml\"]",
        "\"platforms/devices.toml\", \"mine.toml\"]",
    );
    let e = load(
        Source {
            name: "my.toml".into(),
            text,
        },
        &Inc,
    )
    .unwrap_err();
    assert_eq!(e.file, "mine.toml");
    assert!(
        e.message
            .contains("[platform.*], [chip.*], [adapter.*] and [device_model.*], not [[host]]"),
        "{e}"
    );
}

#[test]
fn a_cable_may_override_its_propagation() {
    let two = format!(
        "{BASE}[[host]]\nname = \"b\"\nplatform = \"smartio_host\"\n[[host.ntb]]\nname = \"ntb\"\nadapter = \"myntb\"\nparent = \"rc0\"\n[[cable]]\nends = [\"a.ntb\", \"b.ntb\"]\nlink = {{ gen = 3, width = 8 }}\ncable_ns = {{ value = 25.0, basis = \"assumption\", why = \"5 m\" }}\n"
    );
    let s = try_load(&two).unwrap();
    assert_eq!(s.topology.cables[0].cable_ns, Some(25.0));
    let e = err_of(&two.replace("value = 25.0", "value = -25.0"));
    assert_located(&e, "my.toml", "cable[0].cable_ns", "must be a latency");
}

#[test]
fn memory_matrices_and_interconnect_values_are_range_checked() {
    let dual = |extra: &str| {
        format!(
            "[scenario]\nname = \"t\"\n[platform.p]\npackages = 2\ncores_per_package = 4\nclock_ghz = 2.0\nllc_bytes = \"8 MiB\"\nllc_ways = 16\nddio_ways = 2\ndram_bytes_per_node = \"1 GiB\"\n{extra}\n[[host]]\nname = \"h\"\nplatform = \"p\"\n"
        )
    };
    let ok = dual("[[platform.p.interconnect]]\nends = [\"pkg0\", \"pkg1\"]\nbandwidth_gbps = 20.0\nlatency_ns = 25.0\n");
    try_load(&ok).unwrap();
    let e = err_of(&ok.replace("bandwidth_gbps = 20.0", "bandwidth_gbps = 0.0"));
    assert_located(
        &e,
        "my.toml",
        "platform.p.interconnect[0].bandwidth_gbps",
        "bandwidth_gbps must be a bandwidth",
    );
    let e = err_of(&ok.replace("latency_ns = 25.0", "latency_ns = 1e30"));
    assert_located(
        &e,
        "my.toml",
        "platform.p.interconnect[0].latency_ns",
        "must be a latency",
    );
    let m = ok.replace(
        "[[platform.p.interconnect]]",
        "[platform.p.memory]\nlatency_ns = [[90.0, 1e30], [140.0, 90.0]]\n[[platform.p.interconnect]]",
    );
    let e = err_of(&m);
    assert_located(
        &e,
        "my.toml",
        "platform.p.memory.latency_ns",
        "must be a latency",
    );
    // A matrix entry of the wrong type is named by its row and column, not "did not match
    // any variant".
    let e = err_of(&m.replace("1e30", "\"slow\""));
    assert_eq!(
        e.to_string(),
        "my.toml:12:22: invalid type: string \"slow\", expected a number \
         (key `platform.p.memory.latency_ns[0][1]`)"
    );
    let e = err_of(&m.replace("[[90.0, 1e30], [140.0, 90.0]]", "true"));
    assert_eq!(
        e.to_string(),
        "my.toml:12:14: invalid type: boolean `true`, expected a number, or rows of numbers \
         (row = CPU node, column = memory node) (key `platform.p.memory.latency_ns`)"
    );
}

#[test]
fn a_toml_level_error_names_the_key_path_of_its_value() {
    let e = err_of(&BASE.replace("lut_windows = 32", "lut_windows = 99999999999999999999999"));
    assert!(e.line > 0, "{e}");
    assert_eq!(e.key.as_deref(), Some("adapter.myntb.lut_windows"), "{e}");
    let e = err_of(&BASE.replace("lanes = 32", "lanes = -4"));
    assert_eq!(e.key.as_deref(), Some("chip.mychip.lanes"), "{e}");
}

/// Every parameter value BASE and smartio.toml write, with the key it belongs to.
fn value_sites() -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for (in_include, text) in [(false, BASE.to_string()), (true, smartio())] {
        for (i, l) in text.lines().enumerate() {
            if l.contains(" = ")
                && (l.contains("_ns")
                    || l.contains("_gbps")
                    || l.contains("bytes")
                    || l.contains("reads")
                    || l.contains("tags")
                    || l.contains("entries")
                    || l.starts_with("lanes")
                    || l.starts_with("ports")
                    || l.starts_with("lut_windows")
                    || l.starts_with("rid_"))
            {
                out.push((in_include, format!("{i}")));
            }
        }
    }
    out
}

fn arbitrary_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1e30".to_string()),
        Just("-1e30".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("\"NaN\"".to_string()),
        Just("99999999999999999999".to_string()),
        Just("9223372036854775807".to_string()),
        Just("{ value = 1e30, basis = \"assumption\", why = \"x\" }".to_string()),
        Just("{ value = 0 }".to_string()),
        Just("[]".to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:e}")),
        (0u32..5000).prop_map(|v| v.to_string()),
    ]
}

/// Replaces the value on line `line` of `text` (or inside its inline table, key `sub`).
fn poke(text: &str, line: usize, sub: usize, value: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(|s| s.to_string()).collect();
    let l = &lines[line];
    // Inline tables of several keys: replace the value of the `sub`-th key.
    let eqs: Vec<usize> = l.match_indices(" = ").map(|(i, _)| i).collect();
    let at = eqs[sub % eqs.len()] + 3;
    let rest = &l[at..];
    let end = if rest.starts_with('{')
        && sub.is_multiple_of(eqs.len())
        && eqs.len() > 1
        && !l.contains("value =")
    {
        // `timing = { a = 1, … }`: poke inside rather than the whole table.
        return poke_inner(&mut lines, line, 1 + sub % (eqs.len() - 1), value);
    } else if rest.starts_with('{') {
        rest.find(" }").map_or(rest.len(), |i| i + 2)
    } else {
        rest.find([',', ' ', '#']).unwrap_or(rest.len())
    };
    lines[line] = format!("{}{value}{}", &l[..at], &rest[end..]);
    lines.join("\n")
}

fn poke_inner(lines: &mut [String], line: usize, k: usize, value: &str) -> String {
    let l = lines[line].clone();
    let eqs: Vec<usize> = l.match_indices(" = ").map(|(i, _)| i).collect();
    let at = eqs[k] + 3;
    let rest = &l[at..];
    let end = rest.find([',', ' ']).unwrap_or(rest.len());
    lines[line] = format!("{}{value}{}", &l[..at], &rest[end..]);
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any value in any parameter table: Ok, or an error naming file, line and key.
    #[test]
    fn any_parameter_value_loads_or_is_located(site in 0usize..1000, sub in 0usize..8, value in arbitrary_value()) {
        let sites = value_sites();
        let (in_include, line) = &sites[site % sites.len()];
        let line: usize = line.parse().unwrap();
        let (main, inc) = if *in_include {
            (BASE.to_string(), poke(&smartio(), line, sub, &value))
        } else {
            (poke(BASE, line, sub, &value), smartio())
        };
        let r = load(Source { name: "my.toml".into(), text: main }, &Edited(inc));
        if let Err(e) = r {
            prop_assert!(e.file == "my.toml" || e.file == "smartio.toml", "{}", e);
            prop_assert!(e.line > 0, "located: {}", e);
            prop_assert!(e.key.is_some(), "key named: {}", e);
        }
    }
}
