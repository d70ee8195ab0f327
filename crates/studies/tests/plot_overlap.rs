//! Plots whose series would hide each other or mislead: categorical x values are bars,
//! series that coincide stay visible (and the legend says how), and an experiment's x
//! marks are drawn; ioctopus.migration marks its move where its workload moves.

use serde_json::{json, Map, Value};
use studies::plot;
use studies::{ExperimentInfo, Run};

fn run(config: &str, params: &[(&str, Value)], metrics: &[(&str, Value)]) -> Run {
    let map = |kv: &[(&str, Value)]| -> Map<String, Value> {
        kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    };
    Run {
        experiment: "test.overlap".into(),
        config: config.into(),
        params: map(params),
        metrics: map(metrics),
        counters: Map::new(),
    }
}

fn info(x: &'static str) -> ExperimentInfo {
    ExperimentInfo {
        id: "test.overlap",
        description: "",
        x_param: Some(x),
        x_log2: false,
        plot_metrics: vec!["gbps"],
        x_marks: Vec::new(),
        window: "",
        mechanism: "",
        configs_not_implemented: Vec::new(),
        units: Vec::new(),
    }
}

fn svg(info: &ExperimentInfo, runs: &[Run]) -> String {
    plot::render_svg(info, runs, &[]).unwrap().unwrap()
}

/// The `(x, y)` centres of the filled circles of colour `fill` (a series' markers).
fn circles(svg: &str, fill: &str) -> Vec<(f64, f64)> {
    svg.split("<circle")
        .skip(1)
        .filter(|c| c[..c.find('>').unwrap()].contains(&format!("fill=\"{fill}\"")))
        .map(|c| {
            let num = |k: &str| -> f64 {
                let at = c.find(&format!(" {k}=\"")).unwrap() + k.len() + 3;
                c[at..at + c[at..].find('"').unwrap()].parse().unwrap()
            };
            (num("cx"), num("cy"))
        })
        .collect()
}

#[test]
fn categorical_x_values_are_bars_not_joined_lines() {
    let runs: Vec<Run> = [("local", 90.0, 40.0), ("remote", 60.0, 30.0)]
        .iter()
        .flat_map(|(c, rx, tx)| {
            [("rx", *rx), ("tx", *tx)]
                .map(|(d, v)| run(c, &[("direction", json!(d))], &[("gbps", json!(v))]))
        })
        .collect();
    let s = svg(&info("direction"), &runs);
    // A filled bar per (config, direction) in its series' colour; no data line joins
    // them.
    let bars = |fill: &str| {
        s.split("<rect")
            .skip(1)
            .filter(|r| r[..r.find('>').unwrap()].contains(&format!("fill=\"{fill}\"")))
            .count()
    };
    assert_eq!((bars("#1F77B4"), bars("#FF7F0E")), (2, 2), "{s}");
    assert!(!s.contains("stroke-width=\"2\""), "a line is drawn: {s}");
}

#[test]
fn a_series_equal_to_another_is_dashed_and_its_markers_stand_beside() {
    let runs: Vec<Run> = ["a", "b", "c"]
        .iter()
        .flat_map(|c| {
            [1, 2, 4].map(|n| {
                // b equals a at every point; c only where n = 1.
                let v = match (*c, n) {
                    ("c", 2 | 4) => 5.0 * n as f64,
                    _ => n as f64,
                };
                run(c, &[("n", json!(n))], &[("gbps", json!(v))])
            })
        })
        .collect();
    let s = svg(&info("n"), &runs);
    assert!(s.contains("b (= a, dashed)"), "{s}");
    assert!(!s.contains("c (= a"), "{s}");
    assert!(s.contains("equal values: markers side by side"), "{s}");
    // a's markers are circles (the first series' shape); the others are other shapes, so
    // compare a's x positions with its own legend marker left out.
    let a = circles(&s, "#1F77B4");
    assert_eq!(a.len(), 3 + 1, "3 points and the legend: {a:?}");
    // b's squares sit 11 px right of a's circles (2 × 4 + 3), at the same height.
    let b_squares: Vec<(f64, f64)> = s
        .split("<polygon")
        .skip(1)
        .filter(|p| p.contains("fill=\"#FF7F0E\""))
        .map(|p| {
            let at = p.find("points=\"").unwrap() + 8;
            let pts: Vec<(f64, f64)> = p[at..at + p[at..].find('"').unwrap()]
                .split_whitespace()
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            let mid = |f: fn(&(f64, f64)) -> f64| {
                let v: Vec<f64> = pts.iter().map(f).collect();
                (v.iter().cloned().fold(f64::INFINITY, f64::min)
                    + v.iter().cloned().fold(f64::NEG_INFINITY, f64::max))
                    / 2.0
            };
            (mid(|p| p.0), mid(|p| p.1))
        })
        .collect();
    for (ax, ay) in &a[..3] {
        assert!(
            b_squares
                .iter()
                .any(|(bx, by)| (bx - ax - 11.0).abs() <= 1.0 && (by - ay).abs() <= 1.0),
            "no square of b beside a's point ({ax}, {ay}): {b_squares:?}"
        );
    }
}

#[test]
fn an_x_mark_is_a_labelled_line_on_the_timeline() {
    let mut i = info("t_ms");
    i.x_marks = vec![(2.0, "the process moves")];
    let runs = [run(
        "standard",
        &[],
        &[
            ("t_ms", json!([0.0, 1.0, 2.0, 3.0])),
            ("gbps", json!([10.0, 10.0, 8.0, 8.0])),
        ],
    )];
    let s = svg(&i, &runs);
    assert!(s.contains("the process moves"), "{s}");
    // Without the mark, neither the label nor its grey line.
    let plain = svg(&info("t_ms"), &runs);
    assert!(!plain.contains("the process moves"));
    assert!(s.contains("#5A5A5A") && !plain.contains("#5A5A5A"));
}

#[test]
fn ioctopus_migration_marks_the_move_where_its_workload_moves() {
    let exp = studies::experiment::builtin()
        .iter()
        .find(|e| e.info.id == "ioctopus.migration")
        .expect("built in");
    let text = fabric::builtin::experiment_files()
        .find(|s| s.name.ends_with("ioctopus.migration.toml"))
        .unwrap()
        .text;
    let at: f64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("migrate_at_ms = ")?.parse().ok())
        .expect("the workload's migrate_at_ms");
    let marks: Vec<f64> = exp.info.x_marks.iter().map(|m| m.0).collect();
    assert_eq!(marks, vec![at]);
}
