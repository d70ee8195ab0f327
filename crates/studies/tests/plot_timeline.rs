//! A timeline plot: an experiment whose x names a list metric (sample times) draws each
//! run's plotted list metrics against it, one line per run.

use serde_json::{json, Map, Value};
use studies::plot;
use studies::{ExperimentInfo, Run};

fn run(config: &str, metrics: &[(&str, Value)]) -> Run {
    Run {
        experiment: "test.timeline".into(),
        config: config.into(),
        params: Map::new(),
        metrics: metrics
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        counters: Map::new(),
    }
}

fn info(x: Option<&'static str>) -> ExperimentInfo {
    ExperimentInfo {
        id: "test.timeline",
        description: "a synthetic timeline",
        x_param: x,
        x_log2: false,
        plot_metrics: vec!["pf0_gbps", "pf1_gbps"],
        x_marks: Vec::new(),
        window: "4 samples",
        mechanism: "",
        configs_not_implemented: Vec::new(),
        units: vec![("pf0_gbps", "Gb/s"), ("pf1_gbps", "Gb/s")],
    }
}

/// The data lines of an SVG (stroke width 2; axes and grid are thinner), each as its
/// points in pixels; the legend's 24-pixel samples left out.
fn lines(svg: &str) -> Vec<Vec<(i32, i32)>> {
    let legend = |l: &Vec<(i32, i32)>| l.len() == 2 && l[1].0 - l[0].0 == 24 && l[0].1 == l[1].1;
    svg.split("<polyline")
        .skip(1)
        .filter(|p| p.contains("stroke-width=\"2\""))
        .map(|p| {
            let pts = p.split("points=\"").nth(1).unwrap();
            pts[..pts.find('"').unwrap()]
                .split_whitespace()
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .filter(|l| !legend(l))
        .collect()
}

#[test]
fn a_list_metric_x_draws_each_runs_lists_as_lines_over_time() {
    let runs = [
        run(
            "standard",
            &[
                ("t_ms", json!([0.0, 1.0, 2.0, 3.0])),
                ("pf0_gbps", json!([10.0, 10.0, 8.0, 8.0])),
                ("pf1_gbps", json!([0.0, 0.0, 0.0, 0.0])),
                ("after_gbps", json!(8.0)),
            ],
        ),
        run(
            "ioctopus",
            &[
                ("t_ms", json!([0.0, 1.0, 2.0, 3.0])),
                ("pf0_gbps", json!([10.0, 10.0, 0.0, 0.0])),
                ("pf1_gbps", json!([0.0, 0.0, 10.0, 10.0])),
            ],
        ),
    ];
    assert!(plot::has_plot(&info(Some("t_ms")), &runs));
    let svg = plot::render_svg(&info(Some("t_ms")), &runs, &[])
        .unwrap()
        .unwrap();
    // Two charts (pf0, pf1), a line per run in each, a point per sample.
    let l = lines(&svg);
    assert_eq!(l.len(), 4, "{l:?}");
    assert!(l.iter().all(|pts| pts.len() == 4));
    // Time runs left to right; ioctopus's pf1 line (the last) rises after the move
    // (smaller y is higher), standard's pf1 stays flat.
    let (std_pf1, oct_pf1) = (&l[2], &l[3]);
    assert!(oct_pf1.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(oct_pf1[3].1 < oct_pf1[0].1);
    assert_eq!(std_pf1[0].1, std_pf1[3].1);
    assert!(svg.contains("standard") && svg.contains("ioctopus"));
    // Each chart's axis says the unit the experiment states for its metric.
    assert!(svg.contains("pf0_gbps (Gb/s)") && svg.contains("pf1_gbps (Gb/s)"));
}

#[test]
fn a_timeline_pairs_samples_where_both_lists_have_numbers_and_needs_a_list_x() {
    let ragged = [run(
        "standard",
        &[
            ("t_ms", json!([0.0, 1.0, "x", 3.0, 4.0])),
            ("pf0_gbps", json!([1.0, null, 3.0, 4.0])),
            ("pf1_gbps", json!("not a list")),
        ],
    )];
    let svg = plot::render_svg(&info(Some("t_ms")), &ragged, &[])
        .unwrap()
        .unwrap();
    // Samples 0 and 3 only: 1 has no y, 2 no x, 4 no y (the y list is shorter).
    let l = lines(&svg);
    assert_eq!(l[0].len(), 2, "{l:?}");
    // x a scalar metric, or no x at all: no plot.
    let scalar = [run("standard", &[("t_ms", json!(1.0))])];
    assert!(!plot::has_plot(&info(Some("t_ms")), &scalar));
    assert!(plot::render_svg(&info(None), &ragged, &[])
        .unwrap()
        .is_none());
}
