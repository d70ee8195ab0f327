//! `ioctopus.coalescing` as its file runs it: the driver's interrupt moderation against a
//! lone request-response and a bulk receive.

use studies::experiment::builtin;
use studies::Run;

fn metric(runs: &[Run], config: &str, name: &str) -> f64 {
    runs.iter()
        .find(|r| r.config == config)
        .unwrap_or_else(|| panic!("no config `{config}`"))
        .metrics[name]
        .as_f64()
        .unwrap()
}

#[test]
fn adaptive_is_near_off_for_request_response_and_equals_static_for_bulk() {
    let exp = builtin()
        .iter()
        .find(|e| e.info.id == "ioctopus.coalescing")
        .expect("built in");
    let runs = exp.run(&[]).expect("runs");
    assert_eq!(runs.len(), 3);
    let m = |c: &str, n: &str| metric(&runs, c, n);
    for rr in ["rr_64_latency_us", "rr_16k_latency_us"] {
        let (off, fixed, adaptive) = (m("off", rr), m("static", rr), m("adaptive", rr));
        // A lone transaction pays each side's timer: static's 8 µs twice; DIM walks to
        // its shortest CQE profile, 2 µs, so adaptive pays 2 µs twice.
        assert!(
            (fixed - off - 16.0).abs() < 0.1,
            "{rr}: off {off} static {fixed}"
        );
        assert!(
            (adaptive - off - 4.0).abs() < 0.1,
            "{rr}: off {off} adaptive {adaptive}"
        );
    }
    // Off interrupts once per request; moderation cannot add interrupts.
    let off_irqs = m("off", "rr_64_irqs_per_s");
    let off_tps = 1e6 / m("off", "rr_64_latency_us");
    assert!(
        (off_irqs / off_tps - 1.0).abs() < 0.01,
        "{off_irqs} {off_tps}"
    );
    assert!(m("adaptive", "rr_64_irqs_per_s") < off_irqs);
    // Bulk: the core binds, NAPI keeps polling, and adaptive receives what static does.
    let (fixed, adaptive) = (m("static", "rx_gbps"), m("adaptive", "rx_gbps"));
    assert!((adaptive / fixed - 1.0).abs() < 0.01, "{fixed} {adaptive}");
    assert!(m("adaptive", "rx_cpu_util") > 0.99);
    assert!((m("off", "rx_gbps") / fixed - 1.0).abs() < 0.02);
}
