//! `nudma run` with a `[[fault]]`: a `dma` workload across a cable that flaps mid-window
//! reports the faults, the writes dropped and the reads answered with all-ones, and fewer
//! bytes than without the flap; the counters list the injected faults with their times.

use std::path::Path;

mod common;
use common::nudma;
use serde_json::Value;

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/ntb_link_flap.toml")
        .display()
        .to_string()
}

fn rows(args: &[&str]) -> Vec<Value> {
    let (code, out, err) = nudma(args);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["results"].as_array().unwrap().clone()
}

#[test]
fn a_flap_under_dma_shows_in_the_rows_and_the_counters() {
    let ex = example();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let flapped = rows(&["run", &ex, "--format", "json", "--out", &out]);
    // The same run with the flap moved past the window.
    let clean = rows(&["run", &ex, "--format", "json", "--set", "fault.flap.at=1 s"]);
    let metric = |rows: &[Value], w: &str, m: &str| {
        rows.iter()
            .find(|r| r["params"]["workload"] == w)
            .unwrap_or_else(|| panic!("{w}"))["metrics"][m]
            .as_f64()
            .unwrap_or_else(|| panic!("{w} has no {m}"))
    };
    for r in flapped.iter().chain(&clean) {
        for m in [
            "faults",
            "ur_completions",
            "writes_dropped",
            "throughput_gbyte_s",
        ] {
            assert!(r["metrics"][m].is_number(), "{m} in {r}");
        }
    }
    assert!(metric(&flapped, "push", "faults") > 0.0);
    assert!(metric(&flapped, "push", "writes_dropped") > 0.0);
    assert_eq!(
        metric(&flapped, "push", "faults"),
        metric(&flapped, "push", "writes_dropped")
    );
    assert!(metric(&flapped, "pull", "ur_completions") > 0.0);
    for w in ["push", "pull"] {
        assert_eq!(metric(&clean, w, "faults"), 0.0, "{w}");
        assert!(
            metric(&flapped, w, "throughput_gbyte_s") < metric(&clean, w, "throughput_gbyte_s"),
            "{w}: fewer bytes arrive across a flap"
        );
    }
    let counters: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("counters.json")).unwrap())
            .unwrap();
    let faults = counters["points"][0]["counters"]["faults"]
        .as_array()
        .unwrap();
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert_eq!(faults[0]["at_ns"], 40000.0);
    assert!(faults[0]["what"]
        .as_str()
        .unwrap()
        .starts_with("link down: cable a.ntb — b.ntb (flap)"));
    assert_eq!(faults[1]["at_ns"], 60000.0);
    assert!(faults[1]["what"].as_str().unwrap().starts_with("link up:"));
}

#[test]
fn a_bad_fault_is_a_located_error() {
    let ex = example();
    let (code, _, err) = nudma(&["run", &ex, "--set", "fault.flap.kind=link_flop"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown fault kind `link_flop`"), "{err}");
    assert!(err.contains("fault[0].kind"), "{err}");
}
