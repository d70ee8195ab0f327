//! `nudma reproduce` end to end where it is cheap: every experiment of the built-in
//! catalog is implemented, and an ID that is not in the catalog is an error that lists the
//! studies and the implemented experiments. (The report's and the JSON's not-implemented
//! sections, for a catalog entry without an implementation, are tested in studies'
//! `tests/report.rs` with a stand-in entry.)

mod common;
use common::nudma;

#[test]
fn every_catalog_experiment_is_implemented() {
    let missing: Vec<&str> = studies::catalog::not_implemented()
        .iter()
        .map(|e| e.id)
        .collect();
    assert!(missing.is_empty(), "not implemented: {missing:?}");
}

#[test]
fn an_experiment_id_outside_the_catalog_is_an_error() {
    let (code, out, err) = nudma(&["reproduce", "rdma.nosuch"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("rdma.nosuch"), "{err}");
    assert!(
        err.contains("studies: ioctopus, tyche, rdma, smartio"),
        "{err}"
    );
    assert!(err.contains("rdma.memcached"), "{err}");
}

/// A built-in experiment file copied by a user, with its scenario beside it.
fn user_copy(dir: &std::path::Path, scenario: &str) -> std::path::PathBuf {
    let text = fabric::builtin::experiment_files()
        .find(|s| s.name.ends_with("ioctopus.tcp_rx_1core.toml"))
        .expect("built in")
        .text
        .replace(
            "scenario = \"ioctopus_r730\"",
            &format!("scenario = \"{scenario}\""),
        );
    let path = dir.join("my_experiment.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_users_copy_of_an_experiment_file_gives_the_built_in_rows() {
    let dir = tempfile::tempdir().unwrap();
    // The scenario next to the copy, named relative to it (the test runs elsewhere).
    let scenario = fabric::builtin::source_of("ioctopus_r730").unwrap().text;
    std::fs::write(dir.path().join("my_server.toml"), scenario).unwrap();
    let copy = user_copy(dir.path(), "my_server.toml");
    let (code, mine, err) = nudma(&["reproduce", copy.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let (code, builtin, err) = nudma(&["reproduce", "ioctopus.tcp_rx_1core", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let rows = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap()["results"].clone();
    assert_eq!(rows(&mine).as_array().map(Vec::len), Some(28));
    assert_eq!(rows(&mine), rows(&builtin));
    // The catalog's names, each metric's unit from the field it reads: Gb/s, as IOctopus
    // reports; `cpu_util` is a fraction, with none.
    let units = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap()["units"].clone();
    assert_eq!(units(&mine), units(&builtin));
    assert_eq!(
        units(&mine),
        serde_json::json!({ "ioctopus.tcp_rx_1core": {
            "mem_bw_gbps": "Gb/s",
            "throughput_gbps": "Gb/s",
        } })
    );
}

#[test]
fn a_users_experiment_file_runs_its_own_hardware_and_bad_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("my_server.toml"), "[[host]]\nname = 3\n").unwrap();
    let copy = user_copy(dir.path(), "my_server.toml");
    let (code, out, err) = nudma(&["reproduce", copy.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    // The scenario beside the copy is the one loaded, and its error is located.
    assert!(err.contains("my_server.toml:2"), "{err}");

    let scenario = dir.path().join("plain.toml");
    std::fs::write(&scenario, "[[host]]\nname = \"a\"\n").unwrap();
    let (code, _, err) = nudma(&["reproduce", scenario.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not an experiment file"), "{err}");
    assert!(err.contains("nudma run"), "{err}");

    let (code, _, err) = nudma(&["reproduce", "./nosuch.toml"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("./nosuch.toml") && err.contains("no such file"),
        "{err}"
    );
}
