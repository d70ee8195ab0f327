//! A scenario's `[[fault]]` schedule: kept as plain data when valid, and every mistake
//! located (file:line:col and key path) with what is wrong.

use fabric::builtin::BuiltinResolver;
use fabric::faults::{FaultAction, FaultTarget};
use fabric::scenario::{load, Scenario, Source};
use fabric::{CableId, HostId};

const BASE: &str = r#"include = ["platforms/smartio.toml"]

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

[[cable]]
ends = ["a.ntb", "b.ntb"]
link = { gen = 3, width = 16 }
"#;

fn try_load(faults: &str) -> Result<Scenario, String> {
    load(
        Source {
            name: "my.toml".into(),
            text: format!("{BASE}{faults}"),
        },
        &BuiltinResolver,
    )
    .map_err(|e| e.to_string())
}

/// The line before the schedule's first line in the file.
const FIRST: usize = 24;

#[test]
fn faults_are_kept_as_plain_data() {
    let s = try_load(
        "[[fault]]\nname = \"flap\"\nat = \"1 ms\"\nkind = \"link_down\"\ntarget = \"b.ntb\"\nduration = \"50 us\"\n\
         [[fault]]\nat = \"2 ms\"\nkind = \"host_crash\"\ntarget = \"b\"\n\
         [[fault]]\nat = \"3 ms\"\nkind = \"link_up\"\ntarget = \"a.ntb\"\n",
    )
    .unwrap();
    assert_eq!(s.faults.len(), 3);
    let f = &s.faults[0];
    assert_eq!(f.name.as_deref(), Some("flap"));
    assert_eq!(f.at_ps, 1_000_000_000);
    assert_eq!(f.action, FaultAction::LinkDown);
    assert_eq!(f.target, FaultTarget::Cables(vec![CableId(0)]));
    assert_eq!(f.duration_ps, Some(50_000_000));
    assert_eq!(s.faults[1].target, FaultTarget::Host(HostId(1)));
    // A link_up of a link that is up is allowed (it changes nothing; the injector says so).
    assert_eq!(s.faults[2].action, FaultAction::LinkUp);
}

#[test]
fn fault_mistakes_are_located_with_their_key() {
    let cases = [
        (
            "[[fault]]\nat = \"1 ms\"\nkind = \"link_flap\"\ntarget = \"a.ntb\"\n",
            3,
            "fault[0].kind",
            "unknown fault kind `link_flap` (one of: link_down, link_up, cable_pull, host_crash, host_restart)",
        ),
        (
            "[[fault]]\nat = \"1 ms\"\nkind = \"link_down\"\ntarget = \"c.ntb\"\n",
            4,
            "fault[0].target",
            "no adapter `c.ntb` at a cable (cable ends: a.ntb, b.ntb)",
        ),
        (
            "[[fault]]\nat = \"1 ms\"\nkind = \"host_crash\"\ntarget = \"zed\"\n",
            4,
            "fault[0].target",
            "no host `zed` (hosts: a, b)",
        ),
        (
            "[[fault]]\nat = \"1 ms\"\nkind = \"link_down\"\ntarget = \"a\"\n",
            4,
            "fault[0].target",
            "`a` is a host",
        ),
        (
            "[[fault]]\nat = \"-1 ms\"\nkind = \"link_down\"\ntarget = \"a.ntb\"\n",
            2,
            "fault[0].at",
            "`-1 ms` is negative",
        ),
        (
            "[[fault]]\nat = \"10 s\"\nkind = \"link_down\"\ntarget = \"a.ntb\"\n",
            2,
            "fault[0].at",
            "outside 0 .. 1 s",
        ),
        (
            "[[fault]]\nat = \"1 ms\"\nkind = \"cable_pull\"\ntarget = \"a.ntb\"\nduration = \"1 us\"\n",
            5,
            "fault[0].duration",
            "a pulled cable stays down",
        ),
        (
            "[[fault]]\nname = \"x\"\nat = \"1 ms\"\nkind = \"link_down\"\ntarget = \"a.ntb\"\n\
             [[fault]]\nname = \"x\"\nat = \"2 ms\"\nkind = \"link_up\"\ntarget = \"a.ntb\"\n",
            7,
            "fault[1].name",
            "duplicate fault name `x` (fault[0])",
        ),
    ];
    for (text, line, key, msg) in cases {
        let e = try_load(text).expect_err(text);
        let want_at = format!("my.toml:{}:", FIRST + line);
        assert!(e.starts_with(&want_at), "{e}\nwanted {want_at}");
        assert!(e.contains(msg), "{e}\nwanted {msg}");
        assert!(e.ends_with(&format!("(key `{key}`)")), "{e}");
    }
    // A missing key or an unknown one is named by the TOML layer.
    let e = try_load("[[fault]]\nat = \"1 ms\"\nkind = \"link_down\"\n").unwrap_err();
    assert!(e.contains("missing field `target`"), "{e}");
    assert!(e.contains("fault[0]"), "{e}");
}
