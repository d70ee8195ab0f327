//! `nudma reproduce` end to end where it is cheap: a study with nothing implemented lists
//! its catalog experiments on stderr, in the JSON and in the report, each once.

mod common;
use common::nudma;
use serde_json::Value;

/// A catalog study none of whose experiments is implemented yet, with its entries (none
/// once every study has one: then these tests have nothing to check).
fn missing_study() -> Option<(&'static str, Vec<&'static studies::catalog::Entry>)> {
    let missing = studies::catalog::not_implemented();
    studies::catalog::ALL.iter().find_map(|(study, entries)| {
        let all_missing = entries.iter().all(|e| missing.contains(&e));
        all_missing.then(|| (*study, entries.iter().collect()))
    })
}

#[test]
fn a_study_without_experiments_lists_them_in_json_and_on_stderr() {
    let Some((study, entries)) = missing_study() else {
        return;
    };
    let (code, out, err) = nudma(&["reproduce", study, study, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"], serde_json::json!([]));
    let listed: Vec<(&str, &str)> = v["not_implemented"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e["title"].as_str().unwrap()))
        .collect();
    let want: Vec<(&str, &str)> = entries.iter().map(|e| (e.id, e.title)).collect();
    assert_eq!(listed, want, "each once although the study was named twice");
    for e in &entries {
        let line = format!(
            "nudma reproduce: {} ({}) is not implemented yet\n",
            e.id, e.title
        );
        assert_eq!(err.matches(&line).count(), 1, "{err}");
    }
}

#[test]
fn the_report_has_a_not_implemented_section() {
    let Some((study, entries)) = missing_study() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let (code, _, err) = nudma(&["reproduce", study, "--out", out]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("\n## Not implemented yet\n"), "{md}");
    for e in &entries {
        assert!(
            md.contains(&format!("| {} | {} |\n", e.id, e.title)),
            "{md}"
        );
    }
    assert!(
        !md.contains("| ioctopus."),
        "only the study asked for: {md}"
    );
}

#[test]
fn an_unimplemented_experiment_by_id_is_an_error() {
    let Some(missing) = studies::catalog::not_implemented().first().map(|e| e.id) else {
        return;
    };
    let (code, _, err) = nudma(&["reproduce", missing]);
    assert_eq!(code, 2, "{err}");
    // Every implemented experiment, sorted, as the error lists them.
    let mut ids: Vec<&str> = studies::catalog::implemented()
        .iter()
        .map(|e| e.info.id)
        .collect();
    ids.sort_unstable();
    assert!(ids.contains(&"smartio.ram_latency") && ids.contains(&"ioctopus.tcp_rr"));
    let want = format!(
        "experiment `{missing}` is in the catalog but not implemented yet (implemented: {})",
        ids.join(", ")
    );
    assert!(err.contains(&want), "{err}");
}
