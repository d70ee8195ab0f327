//! `[platform.X.netstack]` and a NIC model's `nic_*` timing keys: typed, range-checked,
//! unknown keys refused, all keys required, every error located.

use fabric::builtin::{self, BuiltinResolver};
use fabric::scenario::{load, Resolver, Source};
use fabric::{Basis, HostId, ScenarioError};

/// The built-in includes with one of them (`path`) replaced.
struct Edited(&'static str, String);

impl Resolver for Edited {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        if include == self.0 {
            return Ok(Source {
                name: include.rsplit('/').next().unwrap().into(),
                text: self.1.clone(),
            });
        }
        BuiltinResolver.resolve(from, include)
    }
}

fn file(path: &str) -> String {
    builtin::FILES
        .iter()
        .find(|(p, _)| *p == path)
        .unwrap()
        .1
        .to_string()
}

fn load_edited(
    path: &'static str,
    edit: impl Fn(&str) -> String,
) -> Result<fabric::scenario::Scenario, ScenarioError> {
    load(
        Source {
            name: "ioctopus_r730.toml".into(),
            text: file("ioctopus_r730.toml"),
        },
        &Edited(path, edit(&file(path))),
    )
}

fn set_line(text: &str, key: &str, line: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with(&format!("{key} = ")) {
                line.to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_located(e: &ScenarioError, file: &str, key: &str, msg: &str) {
    assert_eq!(e.file, file, "{e}");
    assert!(e.line > 0, "located: {e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    assert!(e.message.contains(msg), "`{msg}` in: {e}");
}

#[test]
fn the_r730_netstack_table_loads_typed_with_its_bases() {
    let s = load_edited("platforms/r730.toml", |t| t.to_string()).unwrap();
    let f = fabric::Fabric::from_scenario(s).unwrap();
    let n = f.topo.platform_of(HostId(0)).netstack.clone().unwrap();
    assert_eq!(n.line_fill_buffers, 10);
    assert_eq!(n.napi_budget, 64);
    assert_eq!((n.wakeup_cycles, n.tsq_bytes), (3000, 262_144));
    assert_eq!(
        (n.flow_rule_update_ns, n.flow_rule_expiry_ns),
        (50_000.0, 10_000_000.0)
    );
    assert!(matches!(n.basis["tsq_bytes"], Basis::Assumption(_)));
    assert!(matches!(n.basis["tx_packet_cycles"], Basis::Calibrated(_)));
    assert!(matches!(n.basis["rcvbuf_bytes"], Basis::Assumption(_)));
}

#[test]
fn bad_netstack_values_are_located() {
    for (key, value, msg) in [
        (
            "line_fill_buffers",
            "0",
            "line_fill_buffers must be a whole number in 1..=1024",
        ),
        (
            "rcvbuf_bytes",
            "100",
            "rcvbuf_bytes must be a whole number of bytes in 4096",
        ),
        (
            "copy_line_cycles",
            "2.5",
            "copy_line_cycles must be a whole number of cycles",
        ),
        (
            "wakeup_cycles",
            "-1",
            "wakeup_cycles must be a whole number of cycles",
        ),
        (
            "tsq_bytes",
            "1024",
            "tsq_bytes must be a whole number of bytes in 4096",
        ),
        (
            "flow_rule_update_ns",
            "2e9",
            "flow_rule_update_ns must be a latency in 0..=1e9 ns",
        ),
        (
            "flow_rule_expiry_ns",
            "-5",
            "flow_rule_expiry_ns must be a latency",
        ),
    ] {
        let e = load_edited("platforms/r730.toml", |t| {
            set_line(t, key, &format!("{key} = {value}"))
        })
        .unwrap_err();
        assert_located(
            &e,
            "r730.toml",
            &format!("platform.r730.netstack.{key}"),
            msg,
        );
    }
}

#[test]
fn unknown_and_missing_netstack_keys_are_refused() {
    let e = load_edited("platforms/r730.toml", |t| {
        t.replace("napi_budget = ", "napi_budgets = ")
    })
    .unwrap_err();
    assert_located(
        &e,
        "r730.toml",
        "platform.r730.netstack.napi_budgets",
        "unknown timing parameter `napi_budgets`",
    );
    let e = load_edited("platforms/r730.toml", |t| set_line(t, "irq_cycles", "")).unwrap_err();
    assert_located(
        &e,
        "r730.toml",
        "platform.r730.netstack.irq_cycles",
        "has no network-stack parameter `irq_cycles`",
    );
    // The keys added for the stack's last constants are required like the others.
    for key in [
        "wakeup_cycles",
        "tsq_bytes",
        "flow_rule_update_ns",
        "flow_rule_expiry_ns",
    ] {
        let e = load_edited("platforms/r730.toml", |t| set_line(t, key, "")).unwrap_err();
        assert_located(
            &e,
            "r730.toml",
            &format!("platform.r730.netstack.{key}"),
            &format!("has no network-stack parameter `{key}`"),
        );
    }
}

#[test]
fn a_nic_model_states_all_its_nic_keys_or_none() {
    let e = load_edited("platforms/devices.toml", |t| set_line(t, "nic_wire_ns", "")).unwrap_err();
    assert!(
        e.message.contains("missing timing parameter `nic_wire_ns`"),
        "{e}"
    );
    assert!(e.line > 0, "{e}");
    let e = load_edited("platforms/devices.toml", |t| {
        set_line(t, "nic_line_gbps", "nic_line_gbps = 0")
    })
    .unwrap_err();
    assert!(
        e.message.contains("nic_line_gbps must be a bandwidth"),
        "{e}"
    );
}
