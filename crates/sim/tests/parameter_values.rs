//! Parameter values reach the timing layer typed and range-checked: whatever a user
//! writes into any table, loading, `Fabric::from_scenario` and `TimedFabric::new` give
//! Ok or a located error, never a panic; the constants that used to live in code come
//! from the platform table.

use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Source};
use fabric::{Access, Fabric, HostId, Request, Requester};
use proptest::prelude::*;
use sim::timed::TimedFabric;

/// Two timed hosts joined by a cable between user-defined adapters; host `a` has a
/// device behind a switch with its own timing.
const BASE: &str = r#"include = ["platforms/r730.toml"]

[scenario]
name = "t"

[chip.mychip]
lanes = 32
ports = 8
latency_ns = 120.0
credits = [8, 0, 11]

[adapter.myntb]
chip = "mychip"
link = { gen = 3, width = 8 }
bar_size = "1 GiB"
lut_windows = 32
rid_lut_entries = 32
rid_reserved = 2
timing = { ntb_translate_ns = 33.0, dma_max_reads = 64, dma_mrrs_bytes = 512, dma_setup_ns = 1000.0, bar_gbps = 1.0, bar_latency_ns = 200.0, bar_rcb_bytes = 64 }

[device_model.card]
kind = "nic"
link = { gen = 3, width = 8 }
bars = [{ size = "1 MiB" }]
timing = { bar_gbps = 2.0, bar_latency_ns = 300.0, bar_rcb_bytes = 64, dma_max_reads = 16, dma_mrrs_bytes = 512 }

[[host]]
name = "a"
platform = "r730"
[[host.switch]]
name = "sw"
chip = "mychip"
parent = "rc1"
link = { gen = 3, width = 16 }
[[host.device]]
name = "dev"
device_model = "card"
parent = "sw"
timing = { bar_latency_ns = 250.0 }
[[host.ntb]]
name = "ntb"
adapter = "myntb"
parent = "rc0"

[[host]]
name = "b"
platform = "r730"
[[host.ntb]]
name = "ntb"
adapter = "myntb"
parent = "rc0"

[[cable]]
ends = ["a.ntb", "b.ntb"]
link = { gen = 3, width = 8 }
cable_ns = 10.0
"#;

fn r730() -> String {
    fabric::builtin::FILES
        .iter()
        .find(|(p, _)| *p == "platforms/r730.toml")
        .unwrap()
        .1
        .to_string()
}

struct Edited(String);

impl fabric::scenario::Resolver for Edited {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        if include == "platforms/r730.toml" {
            return Ok(Source {
                name: "r730.toml".into(),
                text: self.0.clone(),
            });
        }
        BuiltinResolver.resolve(from, include)
    }
}

fn set_key(text: &str, key: &str, value: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with(&format!("{key} = ")) {
                format!("{key} = {value}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn timed(main: &str, platform: &str) -> TimedFabric {
    let s = load(
        Source {
            name: "my.toml".into(),
            text: main.into(),
        },
        &Edited(platform.into()),
    )
    .unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

/// Zero-load read latency (ns) of the device reading 64 B of host `a`'s node-0 RAM.
fn device_read_ns(tf: &mut TimedFabric) -> f64 {
    let topo = &tf.fabric.topo;
    let dev = topo.devices[0].functions[0];
    let addr = topo.host(HostId(0)).ram_addr(0, 1 << 20).unwrap();
    let (route, _) = tf
        .route(&Request {
            requester: Requester::Function(dev),
            addr,
            len: 64,
            access: Access::Read,
        })
        .unwrap();
    tf.net.zero_load_read(route, 64, true).as_ns_f64()
}

#[test]
fn the_link_latency_comes_from_the_platform() {
    let base = device_read_ns(&mut timed(BASE, &r730()));
    let slower = device_read_ns(&mut timed(BASE, &set_key(&r730(), "pcie_link_ns", "70.0")));
    // The read crosses two links (device→switch, switch→root) there and back.
    assert!(
        (slower - base - 4.0 * 50.0).abs() < 1.0,
        "{base} ns → {slower} ns"
    );
}

#[test]
fn the_credit_update_latency_comes_from_the_platform() {
    let tf = timed(BASE, &set_key(&r730(), "fc_update_ns", "7.0"));
    assert_eq!(tf.net.fc_extra().as_ns_f64(), 7.0);
}

#[test]
fn a_cable_override_changes_only_that_cable() {
    let wire_of = |tf: &TimedFabric| {
        (0..)
            .map(|w| tf.net.wire(w))
            .find(|w| w.name.starts_with("cable"))
            .unwrap()
            .latency
            .as_ns_f64()
    };
    let base = wire_of(&timed(BASE, &r730()));
    let long = wire_of(&timed(
        &BASE.replace("cable_ns = 10.0", "cable_ns = 60.0"),
        &r730(),
    ));
    assert_eq!(long - base, 50.0);
    let platform = wire_of(&timed(
        &BASE.replace("cable_ns = 10.0\n", ""),
        &set_key(&r730(), "cable_ns", "35.0"),
    ));
    assert_eq!(
        platform - base,
        25.0,
        "no override: the platform's cable_ns"
    );
}

#[test]
fn the_device_bar_latency_is_its_own() {
    let mut tf = timed(BASE, &r730());
    let topo = &tf.fabric.topo;
    let dev = topo.devices[0].functions[0];
    let bar = topo.node(dev).bars[0].addr;
    let (route, _) = tf
        .route(&Request {
            requester: Requester::Cpu {
                host: HostId(0),
                package: 1,
            },
            addr: bar,
            len: 4,
            access: Access::Read,
        })
        .unwrap();
    let with_250 = tf.net.zero_load_read(route, 4, true).as_ns_f64();
    let mut tf = timed(
        &BASE.replace(
            "timing = { bar_latency_ns = 250.0 }",
            "timing = { bar_latency_ns = 900.0 }",
        ),
        &r730(),
    );
    let (route, _) = tf
        .route(&Request {
            requester: Requester::Cpu {
                host: HostId(0),
                package: 1,
            },
            addr: bar,
            len: 4,
            access: Access::Read,
        })
        .unwrap();
    let added = tf.net.zero_load_read(route, 4, true).as_ns_f64() - with_250;
    assert!((added - 650.0).abs() < 1e-6, "{added}");
}

#[test]
fn a_platform_without_timing_is_an_error_naming_it() {
    let text = "[scenario]\nname = \"t\"\n[platform.p]\npackages = 1\ncores_per_package = 4\nclock_ghz = 2.0\nllc_bytes = \"8 MiB\"\nllc_ways = 16\nddio_ways = 2\ndram_bytes_per_node = \"1 GiB\"\n[[host]]\nname = \"h\"\nplatform = \"p\"\n";
    let s = load(
        Source {
            name: "t.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
    .unwrap();
    let e = TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1)
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains(
            "platform `p` has no timing table (the timing layer needs `[platform.p.timing]`)"
        ),
        "{e}"
    );
}

fn arbitrary_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("0.0".to_string()),
        Just("-1".to_string()),
        Just("1e30".to_string()),
        Just("1e9".to_string()),
        Just("0.01".to_string()),
        Just("100000".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("\"NaN\"".to_string()),
        Just("99999999999999999999".to_string()),
        Just("1048576".to_string()),
        Just("1024".to_string()),
        Just("4096".to_string()),
        Just("{ value = 1e9, basis = \"assumption\", why = \"x\" }".to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:e}")),
        (0u32..5000).prop_map(|v| v.to_string()),
    ]
}

/// The numeric keys of every table: (in the platform include?, key).
fn keys() -> Vec<(bool, &'static str)> {
    let mut v: Vec<(bool, &str)> = fabric::scenario::PLATFORM_TIMING_KEYS
        .iter()
        .map(|k| (true, *k))
        .collect();
    for k in [
        "lanes",
        "ports",
        "latency_ns",
        "bar_size",
        "lut_windows",
        "rid_lut_entries",
        "rid_reserved",
        "ntb_translate_ns",
        "dma_max_reads",
        "dma_mrrs_bytes",
        "dma_setup_ns",
        "bar_gbps",
        "bar_latency_ns",
        "bar_rcb_bytes",
        "cable_ns",
        "mps_bytes",
        "dma_mask_bits",
    ] {
        v.push((false, k));
    }
    v
}

/// Sets every occurrence of `key = …` (plain or inside an inline table) to `value`.
fn set_everywhere(text: &str, key: &str, value: &str) -> String {
    let pat = format!("{key} = ");
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(&pat) {
        let boundary =
            i == 0 || !rest[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..i + pat.len()]);
        rest = &rest[i + pat.len()..];
        if !boundary {
            continue;
        }
        let end = if rest.starts_with('{') {
            rest.find('}').map_or(rest.len(), |j| j + 1)
        } else {
            rest.find([',', ' ', '\n', '}', '#']).unwrap_or(rest.len())
        };
        out.push_str(value);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any value in any table: loading fails with a located error naming a key, or the
    /// fabric and its timing layer build and time a DMA and a CPU read without panicking.
    #[test]
    fn any_value_in_any_table_is_ok_or_located(k in 0usize..64, value in arbitrary_value(), mps in prop::sample::select(vec![128u32, 256, 4096])) {
        let keys = keys();
        let (in_platform, key) = keys[k % keys.len()];
        let main = BASE.replace("platform = \"r730\"\n[[host.switch]]", &format!("platform = \"r730\"\nmps_bytes = {mps}\n[[host.switch]]"));
        let (main, platform) = if in_platform {
            (main, set_everywhere(&r730(), key, &value))
        } else {
            (set_everywhere(&main, key, &value), r730())
        };
        let s = match load(Source { name: "my.toml".into(), text: main }, &Edited(platform)) {
            Ok(s) => s,
            Err(e) => {
                prop_assert!(e.file == "my.toml" || e.file == "r730.toml", "{}", e);
                prop_assert!(e.line > 0, "located: {}", e);
                prop_assert!(e.key.is_some(), "key named: {}", e);
                return Ok(());
            }
        };
        let f = match Fabric::from_scenario(s) {
            Ok(f) => f,
            Err(e) => { prop_assert!(!e.to_string().is_empty()); return Ok(()); }
        };
        let mut tf = TimedFabric::new(f, 1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let read = device_read_ns(&mut tf);
        prop_assert!(read.is_finite() && read > 0.0);
        let dev = tf.fabric.topo.devices[0].functions[0];
        let addr = tf.fabric.topo.host(HostId(0)).ram_addr(1, 0).unwrap();
        let (route, _) = tf.route(&Request { requester: Requester::Function(dev), addr, len: 64, access: Access::Write }).unwrap();
        let w = tf.net.flow_write(route, 256, true);
        prop_assert!(w.gbps >= 0.0);
        let r = tf.net.flow_read(route, 512, 16, true);
        prop_assert!(r.gbps >= 0.0);
        let _ = tf.cpu_line_read(HostId(0), 0, 1, 0);
    }
}
