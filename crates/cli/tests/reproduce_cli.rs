//! `nudma reproduce` end to end where it is cheap: every experiment of EXPERIMENTS.md's
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
