//! smartio.limits (docs/studies.md) as the built-in experiment file runs it: the limits
//! come out of the lender adapter's catalog entry (requester-ID LUT less the entries
//! reserved for CPUs; address-LUT windows), and a 40-bit GPU behind a high NTB BAR works
//! only with the lender's IOMMU.

use serde_json::{json, Value};
use studies::experiment::run_builtin;
use studies::report::{comparison_rows, results_json};

/// The lender adapter of the scenario smartio.limits runs on, as the catalog states it.
fn lender_adapter() -> std::sync::Arc<fabric::catalog::AdapterSpec> {
    let s = fabric::builtin::load_builtin("smartio_limits")
        .expect("built-in scenario")
        .expect("valid");
    let lender = s.topology.host_by_name("lender").unwrap();
    let ntb = s
        .topology
        .ntbs
        .iter()
        .find(|n| n.host == lender)
        .expect("the lender has an NTB adapter");
    assert_eq!(ntb.lut_windows, ntb.adapter.lut_windows);
    ntb.adapter.clone()
}

#[test]
fn limits_come_from_the_adapter_catalog() {
    let runs = run_builtin("smartio.limits").unwrap();
    assert_eq!(runs.len(), 1, "no configs, no sweep: one row");
    let r = &runs[0];
    assert_eq!(r.config, "default");
    assert!(r.params.is_empty());
    let a = lender_adapter();
    let m = &r.metrics;
    // docs/hardware.md §2: 32 entries, 2 reserved for CPUs, 30 devices.
    assert_eq!(
        m["max_borrowed"],
        json!(a.rid_lut_entries - a.rid_reserved),
        "{m:?}"
    );
    assert_eq!(m["max_borrowed"], json!(30));
    let stop = m["borrow_stopped_by"].as_str().unwrap();
    assert!(
        stop.contains("requester-ID LUT of lender.ntb is full"),
        "{stop}"
    );
    assert_eq!(m["max_windows"], json!(a.lut_windows), "{m:?}");
    let stop = m["map_stopped_by"].as_str().unwrap();
    assert!(stop.contains("address LUT of lender.ntb is full"), "{stop}");
    assert_eq!(m["high_bar_without_iommu"], json!(false));
    let why = m["high_bar_without_iommu_error"].as_str().unwrap();
    assert!(why.contains("40-bit DMA mask"), "{why}");
    assert_eq!(m["high_bar_with_iommu"], json!(true));
    assert_eq!(m["high_bar_with_iommu_error"], Value::Null);
}

#[test]
fn max_borrowed_is_a_prediction_checked_against_30() {
    let runs = run_builtin("smartio.limits").unwrap();
    let refs = studies::catalog::references();
    let json = results_json(&runs, &refs);
    assert_eq!(
        json["results"][0]["published"],
        json!({ "max_borrowed": { "value": 30, "basis": "prediction" } })
    );
    let rows = comparison_rows(&runs, &refs);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].metric, "max_borrowed");
    assert_eq!(rows[0].verdict(), "✓");
    let summary = studies::report::summary_line(&rows);
    assert!(
        summary.ends_with("; of the predictions 0 are path counts (hops, roots), 1 table sizes (max_borrowed, max_windows), 0 timing"),
        "a table size is not a timing result: {summary}"
    );
    // The table prints the string and boolean metrics as written.
    let infos: Vec<_> = studies::catalog::implemented()
        .into_iter()
        .map(|e| e.info)
        .collect();
    let t = studies::report::table(&runs, &refs, &infos);
    assert!(
        t.contains("high_bar_with_iommu ") && t.contains(" true"),
        "{t}"
    );
    let a = lender_adapter();
    assert!(
        t.contains(&format!("all {} windows in use", a.lut_windows)),
        "{t}"
    );
}
