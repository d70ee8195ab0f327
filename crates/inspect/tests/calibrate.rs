//! `nudma calibrate` on the machine running the tests, kept tiny (8 MiB, few loads):
//! the matrix is square over the machine's nodes, numbers are positive, a single
//! node says NUDMA is impossible, and the parameter file reads back.

use std::path::Path;

use inspect::calibrate::{calibrate, CalibrateOptions};
use inspect::platform_file::MemoryParams;

#[test]
fn small_calibration_round_trips() {
    let options = CalibrateOptions {
        size_bytes: Some(8 << 20),
        iterations: 2,
        loads: Some(1 << 16),
        threads: Some(1),
    };
    let mut messages = Vec::new();
    let r = calibrate(&options, &mut |m| messages.push(m.to_string())).expect("calibrates");
    let n = r.nodes.len();
    assert!(n >= 1);
    assert_eq!(r.latency_ns.len(), n);
    assert!(r.latency_ns.iter().all(|row| row.len() == n));
    assert!(r
        .latency_ns
        .iter()
        .flatten()
        .chain(r.bandwidth_gbps.iter().flatten())
        .all(|v| v.is_finite() && *v > 0.0));
    assert_eq!(r.nudma_possible, n > 1);
    assert!(!messages.is_empty(), "progress is reported");
    assert!(r.notes.iter().any(|n| n.contains("less than 4 x the LLC")) || r.llc_bytes.is_none());

    // Whether huge pages were granted is reported for every measured buffer, in the
    // terminal table, the parameter file and the JSON.
    assert_eq!(r.huge_pages.len(), n);
    for h in &r.huge_pages {
        assert_eq!(h.buffer_bytes, r.buffer_bytes);
        assert!(r.nodes.contains(&h.node));
        if cfg!(target_os = "linux") {
            let t = h.transparent_bytes.expect("smaps is readable on Linux");
            assert!(t <= h.buffer_bytes as u64);
        }
    }
    assert!(r.render_human().contains("huge pages: "));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["huge_pages"].as_array().unwrap().len(), n);
    assert!(json["huge_pages"][0]["transparent_bytes"].is_u64() || !cfg!(target_os = "linux"));

    let params = r.to_params("imported");
    let text = params.to_fragment();
    assert!(text.contains("dependent pointer chase"));
    assert!(text.contains("after an untimed one"));
    assert!(text.contains("# huge pages: "), "{text}");
    if n == 1 {
        assert!(text.contains("no NUDMA is possible"));
        assert!(r
            .render_human()
            .contains("No NUDMA is possible on this machine"));
    }
    let back = MemoryParams::parse(&text, Path::new("cal.toml")).unwrap();
    assert_eq!(back.nodes(), n);
    assert_eq!(back.node_order, Some(r.nodes.clone()));
}

#[test]
fn bad_options_are_errors() {
    let e = calibrate(
        &CalibrateOptions {
            iterations: 0,
            ..CalibrateOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("iterations"));
    let e = calibrate(
        &CalibrateOptions {
            size_bytes: Some(4096),
            ..CalibrateOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("size"));
}
