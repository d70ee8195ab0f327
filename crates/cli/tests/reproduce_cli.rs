//! `nudma reproduce` end to end where it is cheap: an experiment of the catalog that this
//! build does not implement, asked for by ID, is an error that lists what is implemented.
//! (The report's and the JSON's not-implemented sections are tested in
//! studies' `tests/report.rs`; every study now has implemented experiments, so running a whole
//! study to see them here would cost a minute.)

mod common;
use common::nudma;

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
