//! The report machinery of `nudma reproduce` on synthetic runs: JSON shape, reference
//! matching, the table's error and verdict columns, compact mode, SVG plots and the
//! Markdown/HTML report.

use serde_json::{json, Map, Value};
use studies::format::{format_number, format_size, render_params};
use studies::plot::{self, write_plots};
use studies::report::{
    comparison_rows, metric_rows, results_json, summary_line, table, table_with, write_report,
    TableOptions,
};
use studies::result::Basis;
use studies::{ExperimentInfo, Reference, Run};

fn obj(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn run(exp: &str, config: &str, params: &[(&str, Value)], metrics: &[(&str, Value)]) -> Run {
    Run {
        experiment: exp.into(),
        config: config.into(),
        params: obj(params),
        metrics: obj(metrics),
        counters: Map::new(),
    }
}

fn reference(
    exp: &'static str,
    config: Option<&'static str>,
    params: Vec<(&'static str, Value)>,
    metric: &'static str,
    low: f64,
    high: f64,
) -> Reference {
    Reference {
        experiment: exp,
        config,
        params,
        as_run: vec![],
        metric,
        value: low,
        value_high: high,
        source: "a synthetic source",
        basis: Basis::Prediction,
    }
}

/// [`reference`] of a point a parameter was fitted on.
fn calibration(
    exp: &'static str,
    config: Option<&'static str>,
    metric: &'static str,
    value: f64,
    fitted: &'static [&'static str],
) -> Reference {
    Reference {
        basis: Basis::Calibration(fitted),
        ..reference(exp, config, vec![], metric, value, value)
    }
}

fn info(id: &'static str, x: Option<&'static str>, metrics: Vec<&'static str>) -> ExperimentInfo {
    ExperimentInfo {
        id,
        description: "a synthetic experiment",
        x_param: x,
        x_log2: true,
        plot_metrics: metrics,
        x_marks: Vec::new(),
        window: "1,000 transfers after 100 warm-up",
        mechanism: "",
        configs_not_implemented: Vec::new(),
        units: Vec::new(),
    }
}

/// The line of `table` whose metric column is `metric` (metric names are unique here).
fn line_with<'a>(table: &'a str, metric: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == metric))
        .unwrap_or_else(|| panic!("no row for {metric} in\n{table}"))
}

#[test]
fn json_has_exactly_the_contract_shape_in_run_order() {
    let runs = vec![
        run(
            "smartio.gpu_dma",
            "lent_b2b",
            &[("bytes", json!(4096)), ("op", json!("read"))],
            &[("dma_gbps", json!(1.5))],
        ),
        run(
            "rdma.latency",
            "default",
            &[],
            &[("latency_ns", json!(900))],
        ),
    ];
    let v = results_json(&runs, &[]);
    assert_eq!(
        v,
        json!({"results": [
            {"experiment": "smartio.gpu_dma", "config": "lent_b2b",
             "params": {"bytes": 4096, "op": "read"}, "metrics": {"dma_gbps": 1.5}},
            {"experiment": "rdma.latency", "config": "default", "params": {}, "metrics": {"latency_ns": 900}}
        ]})
    );
    let top = v.as_object().unwrap();
    assert_eq!(top.keys().collect::<Vec<_>>(), ["results"]);
    for r in v["results"].as_array().unwrap() {
        let mut keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["config", "experiment", "metrics", "params"]);
    }
    assert_eq!(results_json(&[], &[]), json!({"results": []}));
}

#[test]
fn reference_applies_by_experiment_config_param_subset_and_metric() {
    let r = run(
        "e",
        "local",
        &[("bytes", json!(64)), ("op", json!("read"))],
        &[("mops", json!(3.0))],
    );
    let any_config = reference("e", None, vec![("op", json!("read"))], "mops", 3.0, 3.0);
    assert!(any_config.applies(&r));
    assert!(reference("e", Some("local"), vec![], "mops", 1.0, 1.0).applies(&r));
    assert!(!reference("e", Some("remote"), vec![], "mops", 1.0, 1.0).applies(&r));
    assert!(!reference("e", None, vec![("op", json!("write"))], "mops", 1.0, 1.0).applies(&r));
    // A parameter the run lacks, and a value of another JSON type, do not match.
    assert!(!reference("e", None, vec![("qps", json!(1))], "mops", 1.0, 1.0).applies(&r));
    assert!(!reference("e", None, vec![("bytes", json!("64"))], "mops", 1.0, 1.0).applies(&r));
    assert!(!reference("e", None, vec![], "latency_ns", 1.0, 1.0).applies(&r));
    assert!(!reference("f", None, vec![], "mops", 1.0, 1.0).applies(&r));

    let rows = comparison_rows(
        std::slice::from_ref(&r),
        &[
            any_config.clone(),
            reference("e", Some("remote"), vec![], "mops", 1.0, 1.0),
            reference("e", None, vec![("bytes", json!(64))], "mops", 2.0, 2.5),
        ],
    );
    assert_eq!(rows.len(), 2, "one row per applying reference: {rows:?}");
    assert_eq!(rows[0].published, Some((3.0, 3.0)));
    assert_eq!(rows[0].error, Some(0.0));
    assert_eq!(rows[1].published, Some((2.0, 2.5)));
    assert_eq!(rows[1].params, "bytes=64 B op=read");
    assert!((rows[1].error.unwrap() - 0.2).abs() < 1e-12);
}

#[test]
fn errors_are_signed_zero_inside_a_range_and_judged_at_ten_percent() {
    let runs = vec![run(
        "e",
        "local",
        &[],
        &[
            ("at_border_gbps", json!(110.0)),
            ("low_border_gbps", json!(90.0)),
            ("over_gbps", json!(110.5)),
            ("under_gbps", json!(89.0)),
            ("in_range_ns", json!(560.0)),
            ("above_range_ns", json!(638.0)),
            ("predicted_us", json!(7.25)),
            ("missing_ns", Value::Null),
        ],
    )];
    let refs = vec![
        reference("e", None, vec![], "at_border_gbps", 100.0, 100.0),
        reference("e", None, vec![], "low_border_gbps", 100.0, 100.0),
        reference("e", None, vec![], "over_gbps", 100.0, 100.0),
        reference("e", None, vec![], "under_gbps", 100.0, 100.0),
        reference("e", None, vec![], "in_range_ns", 550.0, 580.0),
        reference("e", None, vec![], "above_range_ns", 550.0, 580.0),
        reference("e", None, vec![], "missing_ns", 10.0, 10.0),
    ];
    let rows = comparison_rows(&runs, &refs);
    let err = |m: &str| rows.iter().find(|r| r.metric == m).unwrap().error;
    assert!((err("at_border_gbps").unwrap() - 0.10).abs() < 1e-12);
    assert!(err("under_gbps").unwrap() < 0.0);
    assert_eq!(err("in_range_ns"), Some(0.0));
    assert!((err("above_range_ns").unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(err("missing_ns"), None);

    let t = table(&runs, &refs, &[info("e", None, vec![])]);
    let at = line_with(&t, "at_border_gbps");
    assert!(at.contains("+10.0 %") && at.ends_with('✓'), "{at}");
    let low = line_with(&t, "low_border_gbps");
    assert!(low.contains("-10.0 %") && low.ends_with('✓'), "{low}");
    let over = line_with(&t, "over_gbps");
    assert!(over.contains("+10.5 %") && over.ends_with('✗'), "{over}");
    let under = line_with(&t, "under_gbps");
    assert!(under.contains("-11.0 %") && under.ends_with('✗'), "{under}");
    let inside = line_with(&t, "in_range_ns");
    assert!(inside.contains("550–580") && inside.contains(" 0.0 %") && inside.ends_with('✓'));
    let above = line_with(&t, "above_range_ns");
    assert!(above.contains("638") && above.contains("+10.0 %") && above.ends_with('✓'));
    // No published value: "—", no error, no basis, no verdict.
    let predicted = line_with(&t, "predicted_us");
    assert!(
        predicted.contains("7.25") && predicted.ends_with('—'),
        "{predicted}"
    );
    assert!(at.contains(" prediction "), "{at}");
    let missing = line_with(&t, "missing_ns");
    assert!(
        missing.contains("n/a") && missing.ends_with('✗'),
        "{missing}"
    );
    assert!(t.starts_with("e — a synthetic experiment\n"), "{t}");

    let summary = t.lines().last().unwrap();
    assert_eq!(
        summary,
        "7 published values: 0 calibration points, 7 predictions: 4 within ±10 %, 3 outside \
         (worst: e local under_gbps -11.0 %); 1 without a simulated value"
    );
    assert_eq!(summary, summary_line(&rows));
}

#[test]
fn params_render_sizes_in_binary_units_and_numbers_with_four_digits() {
    let p = obj(&[
        ("bytes", json!(67_108_864)),
        ("msg_bytes", json!(1500)),
        ("req_kb", json!(128)),
        ("op", json!("read")),
        ("set_ratio", json!(0.25)),
        ("load_elems", json!(1e8)),
    ]);
    assert_eq!(
        render_params(&p),
        "bytes=64 MiB load_elems=100000000 msg_bytes=1500 B op=read req_kb=128 set_ratio=0.25"
    );
    assert_eq!(format_size(4096), "4 KiB");
    assert_eq!(format_size(0), "0 B");
    for (x, s) in [
        (573.24, "573.2"),
        (57.324, "57.32"),
        (5.0, "5"),
        (0.012345, "0.01235"),
        (12345.6, "12346"),
        (-3.25, "-3.25"),
        (0.0, "0"),
        (f64::NAN, "n/a"),
        (f64::INFINITY, "n/a"),
    ] {
        assert_eq!(format_number(x), s, "{x}");
    }
}

/// 15 sizes × 5 configs, one metric, one published point at 64 KiB of `local`.
fn sweep() -> (Vec<Run>, Vec<Reference>, Vec<ExperimentInfo>) {
    let configs = ["local", "remote", "lent_b2b", "lent_switch", "borrowed"];
    let mut runs = Vec::new();
    for (c, config) in configs.iter().enumerate() {
        for k in 12..=26 {
            let bytes = 1u64 << k;
            let gbps = (c + 1) as f64 * (1.0 - 1.0 / (k as f64 - 10.0));
            runs.push(run(
                "smartio.gpu_dma",
                config,
                &[("bytes", json!(bytes))],
                &[("dma_gbps", json!(gbps))],
            ));
        }
    }
    let refs = vec![reference(
        "smartio.gpu_dma",
        Some("local"),
        vec![("bytes", json!(65536))],
        "dma_gbps",
        0.8,
        0.9,
    )];
    let infos = vec![ExperimentInfo {
        units: vec![("dma_gbps", "GB/s")],
        ..info("smartio.gpu_dma", Some("bytes"), vec!["dma_gbps"])
    }];
    (runs, refs, infos)
}

#[test]
fn compact_mode_keeps_published_rows_and_largest_size_per_series() {
    let (runs, refs, infos) = sweep();
    let full = table(&runs, &refs, &infos);
    let data_rows = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("  ") && l.contains(" dma_gbps "))
            .count()
    };
    assert_eq!(data_rows(&full), 75);
    assert!(!full.contains("elided"));

    let compact = table_with(&runs, &refs, &infos, TableOptions { compact: true });
    let data: Vec<&str> = compact
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains(" dma_gbps "))
        .collect();
    assert_eq!(data_rows(&compact), data.len());
    assert_eq!(data.len(), 6, "{compact}");
    // The metric's unit, as its experiment states it, beside its name.
    assert!(compact.contains("  metric    unit  "), "{compact}");
    assert!(
        data.iter().all(|l| l.contains(" dma_gbps  GB/s ")),
        "{compact}"
    );
    assert_eq!(data.iter().filter(|l| l.contains("64 MiB")).count(), 5);
    assert!(data
        .iter()
        .any(|l| l.contains("bytes=64 KiB") && l.contains("0.8–0.9")));
    assert!(compact.contains("69 of 75 rows elided"), "{compact}");
    // The summary counts every published value, shown or not.
    assert!(compact.ends_with("1 published value: 0 calibration points, 1 prediction: 1 within ±10 %, 0 outside (worst: smartio.gpu_dma local bytes=64 KiB dma_gbps 0.0 %)\n"), "{compact}");
}

/// A minimal well-formedness check: every tag closes in order.
fn assert_well_formed(xml: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("unterminated tag") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap_or("");
            // HTML's void elements have no end tag.
            if !matches!(name, "img" | "meta" | "br") {
                stack.push(name.to_string());
            }
        }
    }
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
}

#[test]
fn plots_one_svg_per_experiment_with_an_x_param() {
    let (mut runs, refs, mut infos) = sweep();
    // A second experiment with an extra parameter (series "local op=read" …), in Gb/s.
    for op in ["read", "write"] {
        for bytes in [64u64, 1500, 65536] {
            runs.push(run(
                "ioctopus.tcp_rx_1core",
                "local",
                &[("msg_bytes", json!(bytes)), ("op", json!(op))],
                &[
                    ("throughput_gbps", json!(bytes as f64 / 1000.0)),
                    ("cpu_util", json!(0.5)),
                ],
            ));
        }
    }
    runs.push(run(
        "rdma.latency",
        "local",
        &[],
        &[("latency_ns", json!(1.0))],
    ));
    infos.push(ExperimentInfo {
        units: vec![("throughput_gbps", "Gb/s")],
        ..info(
            "ioctopus.tcp_rx_1core",
            Some("msg_bytes"),
            vec!["throughput_gbps", "cpu_util"],
        )
    });
    infos.push(info("rdma.latency", None, vec!["latency_ns"]));

    let dir = tempfile::tempdir().unwrap();
    let written = write_plots(dir.path(), &infos, &runs, &refs).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["smartio.gpu_dma.svg", "ioctopus.tcp_rx_1core.svg"]);

    let gpu = std::fs::read_to_string(&written[0]).unwrap();
    assert!(gpu.starts_with("<svg"), "{}", &gpu[..60]);
    assert_well_formed(&gpu);
    // One data line per series plus one legend line each.
    assert!(gpu.matches("<polyline").count() >= 10);
    for label in ["local", "remote", "lent_b2b", "lent_switch", "borrowed"] {
        assert!(gpu.contains(&format!(">\n{label}\n<")) || gpu.contains(&format!(">{label}<")));
    }
    for tick in ["4K", "64K", "1M", "64M"] {
        assert!(gpu.contains(&format!("{tick}\n")), "tick {tick}");
    }
    assert!(gpu.contains("smartio.gpu_dma — dma_gbps"));
    assert!(gpu.contains("dma_gbps (GB/s)"));

    let tcp = std::fs::read_to_string(&written[1]).unwrap();
    assert_well_formed(&tcp);
    assert!(tcp.contains("local op=read") && tcp.contains("local op=write"));
    assert!(tcp.contains("throughput_gbps (Gb/s)"));
    assert!(tcp.contains("ioctopus.tcp_rx_1core — cpu_util"));
    // A fraction has no unit on its axis; a unit comes from the experiment, not the name.
    assert!(!tcp.contains("cpu_util ("));
    assert!(tcp.matches("<polyline").count() >= 2 * 2 * 2);

    // Same input, same bytes.
    let again = tempfile::tempdir().unwrap();
    let written2 = write_plots(again.path(), &infos, &runs, &refs).unwrap();
    for (a, b) in written.iter().zip(&written2) {
        assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    }
}

#[test]
fn a_word_parameter_is_a_category_axis_in_plots_and_bare_in_tables() {
    // ioctopus.tcp_multicore's shape: configs × direction ∈ {rx, tx}.
    let mut runs = Vec::new();
    for (config, rx) in [("local", 90.0), ("remote", 80.0)] {
        for (d, gbps) in [("rx", rx), ("tx", 93.9)] {
            runs.push(run(
                "ioctopus.tcp_multicore",
                config,
                &[("direction", json!(d))],
                &[("throughput_gbps", json!(gbps))],
            ));
        }
    }
    let mut i = info(
        "ioctopus.tcp_multicore",
        Some("direction"),
        vec!["throughput_gbps"],
    );
    i.x_log2 = false;
    let svg = plot::render_svg(&i, &runs, &[]).unwrap().unwrap();
    assert_well_formed(&svg);
    let els = svg_elements(&svg);
    let tick = |w: &str| {
        els.iter()
            .filter(|e| e.tag == "text" && e.text == w)
            .count()
    };
    assert_eq!((tick("rx"), tick("tx")), (1, 1), "one tick label per word");
    // Categories are bars, side by side per category, not lines joining rx and tx
    // (there is nothing between them).
    assert!(!els.iter().any(|e| e.attr("stroke-width") == "2"), "a line");
    let bars = |fill: &str| -> Vec<(f64, f64)> {
        els.iter()
            .filter(|e| e.tag == "rect" && e.attr("fill") == fill)
            .map(|e| (e.num("x"), e.num("height")))
            .collect()
    };
    let (local, remote) = (bars("#1F77B4"), bars("#FF7F0E"));
    assert_eq!((local.len(), remote.len()), (2, 2), "{svg}");
    assert!(
        local[0].0 < remote[0].0 && remote[0].0 < local[1].0,
        "rx left of tx"
    );
    assert!(
        remote[0].1 < local[0].1,
        "remote rx (80) below local rx (90)"
    );
    assert_eq!(remote[1].1, local[1].1, "both 93.9 at tx");
    let text = table(&runs, &[], &[i]);
    assert!(
        line_with(&text, "throughput_gbps").contains("direction=rx"),
        "{text}"
    );
    assert_eq!(
        results_json(&runs, &[])["results"][3]["params"]["direction"],
        json!("tx")
    );
}

#[test]
fn report_files_contain_every_experiment_and_are_deterministic() {
    let (mut runs, refs, mut infos) = sweep();
    runs.push(run(
        "rdma.latency",
        "remote",
        &[("op", json!("read"))],
        &[("latency_ns", json!(1234.5))],
    ));
    infos.push(info("rdma.latency", None, vec![]));
    // An experiment without info still gets a section.
    runs.push(run(
        "tyche.zmio_6nic",
        "ideal",
        &[("req_kb", json!(64))],
        &[("qpi0_share", json!(0.25))],
    ));

    let dir = tempfile::tempdir().unwrap();
    let (md, html) = write_report(dir.path(), &infos, &runs, &refs, &[]).unwrap();
    assert_eq!(md.file_name().unwrap(), "report.md");
    assert_eq!(html.file_name().unwrap(), "report.html");
    let md_text = std::fs::read_to_string(&md).unwrap();
    let html_text = std::fs::read_to_string(&html).unwrap();
    for id in ["smartio.gpu_dma", "rdma.latency", "tyche.zmio_6nic"] {
        assert!(md_text.contains(&format!("## {id}")), "{id}");
        assert!(html_text.contains(&format!("<h2>{id}</h2>")), "{id}");
    }
    assert!(md_text.contains("![smartio.gpu_dma](smartio.gpu_dma.svg)"));
    assert!(html_text.contains("<img src=\"smartio.gpu_dma.svg\""));
    assert!(
        !html_text.contains("rdma.latency.svg"),
        "no plot without x_param"
    );
    assert!(md_text.contains("Measurement window: 1,000 transfers after 100 warm-up"));
    assert!(html_text.contains("1,000 transfers after 100 warm-up"));
    assert!(md_text.contains("req_kb=64"));
    // Every row of the sweep is in the report, published or not.
    assert_eq!(md_text.matches("| dma_gbps | GB/s |").count(), 75);
    assert_eq!(
        html_text.matches("<td>dma_gbps</td><td>GB/s</td>").count(),
        75
    );
    // A metric whose experiment states no unit has an empty cell.
    assert!(md_text.contains("| latency_ns |  |"), "{md_text}");
    assert!(html_text.starts_with("<!DOCTYPE html>") && html_text.ends_with("</html>\n"));
    assert_well_formed(&html_text);

    let (md2, html2) = write_report(dir.path(), &infos, &runs, &refs, &[]).unwrap();
    assert_eq!(std::fs::read(&md2).unwrap(), md_text.as_bytes());
    assert_eq!(std::fs::read(&html2).unwrap(), html_text.as_bytes());
}

#[test]
fn odd_inputs_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing at all.
    assert!(table(&[], &[], &[]).contains("0 published values"));
    assert!(write_plots(dir.path(), &[], &[], &[]).unwrap().is_empty());
    write_report(dir.path(), &[], &[], &[], &[]).unwrap();

    // Null metrics, a non-numeric x, a log2 axis with a zero, lists and objects, a lone
    // point, a metric that is nowhere numeric.
    let runs = vec![
        run(
            "a",
            "c",
            &[("direction", json!("rx"))],
            &[("m_gbps", Value::Null)],
        ),
        run(
            "a",
            "c",
            &[("direction", json!("tx"))],
            &[("m_gbps", json!(2.0))],
        ),
        run(
            "b",
            "c",
            &[("bytes", json!(0))],
            &[("m_ns", json!(1.0)), ("l", json!([1, 2]))],
        ),
        run(
            "b",
            "c",
            &[("bytes", json!(4096))],
            &[("m_ns", json!(-3.0)), ("o", json!({"x": 1.5, "y": "z"}))],
        ),
        run("c", "c", &[("n", json!(3))], &[("m_us", json!(1e300))]),
        run("d", "c", &[("n", json!(1))], &[("s", json!("text"))]),
    ];
    let infos = vec![
        info("a", Some("direction"), vec!["m_gbps"]),
        info("b", Some("bytes"), vec!["m_ns", "l"]),
        info("c", Some("n"), vec!["m_us"]),
        info("d", Some("n"), vec!["s"]),
    ];
    let refs = vec![reference("d", None, vec![], "s", 1.0, 2.0)];
    let t = table_with(&runs, &refs, &infos, TableOptions { compact: true });
    assert!(t.contains("n/a"));
    assert!(t.contains("o.x"));
    let rows = metric_rows(&runs, &refs);
    assert!(rows.iter().any(|r| r.metric == "s" && r.simulated.is_nan()));
    let written = write_plots(dir.path(), &infos, &runs, &refs).unwrap();
    assert_eq!(written.len(), 4);
    for p in &written {
        assert_well_formed(&std::fs::read_to_string(p).unwrap());
    }
    let a = std::fs::read_to_string(dir.path().join(plot::plot_file_name("a"))).unwrap();
    assert!(a.contains("rx") && a.contains("tx"));
    write_report(dir.path(), &infos, &runs, &refs, &[]).unwrap();
    assert_eq!(plot::plot_file_name("a/../b"), "a_.._b.svg");
}

#[test]
fn sample_table_prints() {
    // Not an assertion of layout, just the sample shown in reviews (`--nocapture`).
    let runs = vec![
        run(
            "smartio.gpu_dma",
            "local",
            &[("bytes", json!(4096)), ("op", json!("read"))],
            &[("dma_gbps", json!(2.874))],
        ),
        run(
            "smartio.gpu_dma",
            "lent_b2b",
            &[("bytes", json!(67_108_864)), ("op", json!("read"))],
            &[("dma_gbps", json!(6.41)), ("latency_ns", json!(590.2))],
        ),
        run(
            "smartio.gpu_dma",
            "lent_b2b",
            &[("bytes", json!(67_108_864)), ("op", json!("write"))],
            &[("dma_gbps", json!(5.02))],
        ),
    ];
    let refs = vec![
        reference(
            "smartio.gpu_dma",
            Some("lent_b2b"),
            vec![],
            "latency_ns",
            550.0,
            580.0,
        ),
        reference(
            "smartio.gpu_dma",
            Some("lent_b2b"),
            vec![("op", json!("read"))],
            "dma_gbps",
            6.6,
            6.6,
        ),
        reference(
            "smartio.gpu_dma",
            Some("lent_b2b"),
            vec![("op", json!("write"))],
            "dma_gbps",
            6.6,
            6.6,
        ),
    ];
    let infos = vec![info("smartio.gpu_dma", Some("bytes"), vec!["dma_gbps"])];
    let t = table(&runs, &refs, &infos);
    println!("{t}");
    assert!(t.contains("prediction") && t.contains('—'));
}

#[test]
fn counters_go_to_their_own_file_and_never_into_the_results_json() {
    let dir = tempfile::tempdir().unwrap();
    let plain = run(
        "smartio.ntb_dma",
        "default",
        &[("bytes", json!(4096))],
        &[("read_gbps", json!(2.9))],
    );
    assert_eq!(
        studies::report::write_counters(dir.path(), std::slice::from_ref(&plain)).unwrap(),
        None
    );
    assert!(!dir.path().join("counters.json").exists());
    let mut counted = plain;
    counted.counters.insert(
        "read_gbps".into(),
        json!({"iotlb": {"hits": 3, "misses": 1}}),
    );
    let path = studies::report::write_counters(dir.path(), std::slice::from_ref(&counted))
        .unwrap()
        .unwrap();
    let back: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(back["counters"][0]["config"], "default");
    assert_eq!(back["counters"][0]["params"]["bytes"], 4096);
    assert_eq!(
        back["counters"][0]["counters"]["read_gbps"]["iotlb"]["misses"],
        1
    );
    let results = studies::report::results_json(&[counted], &[]);
    let keys: Vec<&String> = results["results"][0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["config", "experiment", "metrics", "params"]);
}

#[test]
fn published_key_gives_value_and_basis_only_where_a_reference_applies() {
    let runs = vec![
        run(
            "smartio.ram_latency",
            "pxh810_b2b",
            &[],
            &[("oneway_ns", json!(572.7)), ("other_ns", json!(1.0))],
        ),
        run(
            "smartio.ram_latency",
            "pxh830_b2b",
            &[],
            &[("oneway_ns", json!(567.3))],
        ),
        run(
            "smartio.ram_latency",
            "three_way",
            &[],
            &[("oneway_ns", json!(912.7))],
        ),
        run("smartio.p2p", "1l", &[], &[("hops", json!(1))]),
    ];
    let refs = vec![
        calibration(
            "smartio.ram_latency",
            Some("pxh810_b2b"),
            "oneway_ns",
            573.0,
            &["cpu_mmio_write_ns"],
        ),
        reference(
            "smartio.ram_latency",
            Some("pxh830_b2b"),
            vec![],
            "oneway_ns",
            550.0,
            580.0,
        ),
        // A second reference on the same metric and row: the first one is given.
        reference(
            "smartio.ram_latency",
            Some("pxh830_b2b"),
            vec![],
            "oneway_ns",
            999.0,
            999.0,
        ),
        reference("smartio.p2p", Some("1l"), vec![], "hops", 1.0, 1.0),
        // Applies to no run: the metric is missing.
        reference("smartio.p2p", Some("1l"), vec![], "roots", 0.0, 0.0),
    ];
    let v = results_json(&runs, &refs);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(
        rows[0]["published"],
        json!({"oneway_ns": {"value": 573, "basis": "calibration"}}),
        "only the metric with a published value; the other metric has none"
    );
    assert_eq!(
        rows[1]["published"],
        json!({"oneway_ns": {"value": 550, "basis": "prediction"}}),
        "a range gives its low end"
    );
    assert!(
        rows[2].as_object().unwrap().get("published").is_none(),
        "no published value, no key: {}",
        rows[2]
    );
    assert_eq!(
        rows[3]["published"],
        json!({"hops": {"value": 1, "basis": "prediction"}})
    );
    // The four contract keys are untouched by the fifth.
    for (row, run) in rows.iter().zip(&runs) {
        assert_eq!(row["experiment"], run.experiment.as_str());
        assert_eq!(row["config"], run.config.as_str());
        assert_eq!(row["params"], Value::Object(run.params.clone()));
        assert_eq!(row["metrics"], Value::Object(run.metrics.clone()));
        for entry in row
            .get("published")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.values())
        {
            let mut keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
            keys.sort();
            assert_eq!(keys, ["basis", "value"]);
        }
    }
    // No reference at all: exactly the four keys.
    let plain = results_json(&runs, &[]);
    for r in plain["results"].as_array().unwrap() {
        assert_eq!(r.as_object().unwrap().len(), 4);
    }
    // A non-finite or fractional published value does not panic.
    let odd = vec![
        reference("smartio.p2p", None, vec![], "hops", f64::NAN, f64::NAN),
        reference("smartio.p2p", None, vec![], "hops", 1.5, 1.5),
    ];
    let v = results_json(&runs[3..], &odd);
    assert_eq!(v["results"][0]["published"]["hops"]["value"], Value::Null);
    let v = results_json(&runs[3..], &odd[1..]);
    assert_eq!(v["results"][0]["published"]["hops"]["value"], json!(1.5));
}

#[test]
fn calibration_points_are_counted_apart_and_never_as_successes() {
    let runs = vec![run(
        "e",
        "local",
        &[],
        &[
            ("fit_ns", json!(570.0)),
            ("fit_gbps", json!(2.0)),
            ("good_gbps", json!(4.5)),
            ("bad_gbps", json!(6.0)),
            ("free_us", json!(3.0)),
        ],
    )];
    let refs = vec![
        // Fitted: -0.5 % and -20 % — neither is a success nor a failure of the model.
        calibration("e", None, "fit_ns", 573.0, &["cpu_mmio_write_ns"]),
        calibration(
            "e",
            None,
            "fit_gbps",
            2.5,
            &["rc_p2p_read_tags", "rc_p2p_read_gap_ns"],
        ),
        // Predicted: -6.25 % inside, +20 % outside.
        reference("e", None, vec![], "good_gbps", 4.8, 4.8),
        reference("e", None, vec![], "bad_gbps", 5.0, 5.0),
    ];
    let rows = comparison_rows(&runs, &refs);
    assert_eq!(rows.len(), 4);
    assert!(rows[0].is_calibration() && !rows[2].is_calibration());
    assert_eq!(
        summary_line(&rows),
        "4 published values: 2 calibration points (worst: e local fit_gbps -20.0 %), \
         2 predictions: 1 within ±10 %, 1 outside (worst: e local bad_gbps +20.0 %)"
    );
    // Only calibration points: no prediction is claimed to be within.
    assert_eq!(
        summary_line(&rows[..2]),
        "2 published values: 2 calibration points (worst: e local fit_gbps -20.0 %), \
         0 predictions: 0 within ±10 %, 0 outside"
    );
    // Path counts are predictions too, but said apart from timing ones.
    let runs_with_hops = vec![run(
        "e",
        "local",
        &[],
        &[("good_gbps", json!(4.5)), ("hops", json!(4.0))],
    )];
    let refs_with_hops = vec![
        reference("e", None, vec![], "good_gbps", 4.8, 4.8),
        reference("e", None, vec![], "hops", 4.0, 4.0),
    ];
    assert!(
        summary_line(&comparison_rows(&runs_with_hops, &refs_with_hops))
            .ends_with("; 1 of the predictions are path counts (hops, roots), 1 timing"),
        "{}",
        summary_line(&comparison_rows(&runs_with_hops, &refs_with_hops))
    );

    let t = table(&runs, &refs, &[info("e", None, vec![])]);
    let fit = line_with(&t, "fit_ns");
    assert!(
        fit.contains("-0.5 %") && fit.ends_with("calibration: cpu_mmio_write_ns"),
        "basis shown, no verdict: {fit}"
    );
    let fit2 = line_with(&t, "fit_gbps");
    assert!(
        fit2.ends_with("calibration: rc_p2p_read_tags, rc_p2p_read_gap_ns") && !fit2.contains('✗'),
        "{fit2}"
    );
    let good = line_with(&t, "good_gbps");
    assert!(
        good.contains(" prediction ") && good.ends_with('✓'),
        "{good}"
    );
    let bad = line_with(&t, "bad_gbps");
    assert!(bad.contains(" prediction ") && bad.ends_with('✗'), "{bad}");
    let free = line_with(&t, "free_us");
    assert!(!free.contains("prediction") && !free.contains("calibration"));
    assert!(t.lines().any(|l| l.contains(" basis")), "header: {t}");
    assert_eq!(t.lines().last().unwrap(), summary_line(&rows));

    // The report files carry the same summary and the basis of every compared row.
    let dir = tempfile::tempdir().unwrap();
    let (md, html) =
        write_report(dir.path(), &[info("e", None, vec![])], &runs, &refs, &[]).unwrap();
    let md = std::fs::read_to_string(md).unwrap();
    let html = std::fs::read_to_string(html).unwrap();
    assert!(md.contains(&summary_line(&rows)));
    assert!(md.contains("| calibration: cpu_mmio_write_ns |  |"), "{md}");
    assert!(md.contains("| prediction | ✓ |") && md.contains("| prediction | ✗ |"));
    assert!(html.contains("<tr class=\"cal\">"));
    assert!(html.contains("<td>calibration: rc_p2p_read_tags, rc_p2p_read_gap_ns</td>"));
    assert_well_formed(&html);
}

#[test]
fn catalog_marks_the_fitted_points_as_calibration() {
    let refs = studies::catalog::references();
    let basis = |exp: &str, config: Option<&str>, metric: &str| {
        refs.iter()
            .find(|r| r.experiment == exp && r.config == config && r.metric == metric)
            .unwrap_or_else(|| panic!("no reference {exp} {config:?} {metric}"))
            .basis
    };
    // The scenario files say "calibrated" for these parameters.
    assert_eq!(
        basis("smartio.ram_latency", Some("pxh810_b2b"), "oneway_ns"),
        Basis::Calibration(&["cpu_mmio_write_ns"])
    );
    assert_eq!(
        basis("smartio.gpu_dma", Some("k40_pxh810"), "read_gbps"),
        Basis::Calibration(&["rc_p2p_read_gap_ns"])
    );
    assert_eq!(
        basis("smartio.mdev", Some("bare_iommu_on"), "read_gbps"),
        Basis::Calibration(&["rc_p2p_read_tags"])
    );
    assert_eq!(
        basis("smartio.mdev", Some("bare_iommu_off"), "read_gbps"),
        Basis::Calibration(&["k40c dma_max_reads"])
    );
    assert_eq!(
        basis("smartio.ram_latency", Some("pxh830_b2b"), "oneway_ns"),
        Basis::Prediction
    );
    // Counts that come straight from the fabric are predictions.
    for r in refs
        .iter()
        .filter(|r| r.metric == "hops" || r.metric == "roots")
    {
        assert_eq!(r.basis, Basis::Prediction, "{r:?}");
    }
    // A calibration point always names what was fitted on it.
    for r in &refs {
        if let Basis::Calibration(params) = r.basis {
            assert!(!params.is_empty(), "{r:?}");
        }
    }
}

/// One element of an SVG as plotters writes it: its tag, attributes and text content.
#[derive(Debug)]
struct El {
    tag: String,
    attrs: std::collections::BTreeMap<String, String>,
    text: String,
}

impl El {
    fn attr(&self, k: &str) -> &str {
        self.attrs.get(k).map_or("", String::as_str)
    }

    fn num(&self, k: &str) -> f64 {
        self.attr(k).parse().unwrap_or(f64::NAN)
    }

    fn points(&self) -> Vec<(i64, i64)> {
        self.attr("points")
            .split_whitespace()
            .filter_map(|p| {
                let (x, y) = p.split_once(',')?;
                Some((x.parse().ok()?, y.parse().ok()?))
            })
            .collect()
    }

    /// What point marker this element is, if any: (shape, colour, filled). A filled
    /// polygon of 3 or 4 corners, a circle, or a closed polyline of 4 corners (a hollow
    /// one).
    fn marker(&self) -> Option<(&'static str, String, bool)> {
        let shape4 = |pts: &[(i64, i64)]| {
            let xs: std::collections::BTreeSet<i64> = pts.iter().map(|p| p.0).collect();
            if xs.len() == 2 {
                "square"
            } else {
                "diamond"
            }
        };
        match self.tag.as_str() {
            "circle" if self.attr("fill") != "none" => {
                Some(("circle", self.attr("fill").to_string(), true))
            }
            "circle" => Some(("circle", self.attr("stroke").to_string(), false)),
            "polygon" => {
                let pts = self.points();
                let shape = match pts.len() {
                    3 if pts[0].1 < pts[1].1 => "triangle_up",
                    3 => "triangle_down",
                    4 => shape4(&pts),
                    _ => return None,
                };
                Some((shape, self.attr("fill").to_string(), true))
            }
            "polyline" => {
                let pts = self.points();
                (pts.len() == 5 && pts[0] == pts[4])
                    .then(|| (shape4(&pts[..4]), self.attr("stroke").to_string(), false))
            }
            _ => None,
        }
    }

    /// The centre of a marker.
    fn centre(&self) -> (f64, f64) {
        if self.tag == "circle" {
            return (self.num("cx"), self.num("cy"));
        }
        let pts = self.points();
        let pts = if pts.len() == 5 { &pts[..4] } else { &pts[..] };
        let xs: Vec<i64> = pts.iter().map(|p| p.0).collect();
        let ys: Vec<i64> = pts.iter().map(|p| p.1).collect();
        let mid = |v: &[i64]| (*v.iter().min().unwrap() + *v.iter().max().unwrap()) as f64 / 2.0;
        (mid(&xs), mid(&ys))
    }
}

/// The elements of an SVG in document order.
fn svg_elements(svg: &str) -> Vec<El> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("unterminated tag") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('/') || tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        let name = tag.split_whitespace().next().unwrap_or("").to_string();
        let mut attrs = std::collections::BTreeMap::new();
        let mut a = &tag[name.len()..];
        while let Some(eq) = a.find("=\"") {
            let key = a[..eq].trim().to_string();
            let close = a[eq + 2..].find('"').unwrap() + eq + 2;
            attrs.insert(key, a[eq + 2..close].to_string());
            a = &a[close + 1..];
        }
        let text = if tag.ends_with('/') {
            String::new()
        } else {
            rest[..rest.find('<').unwrap_or(rest.len())]
                .trim()
                .to_string()
        };
        out.push(El {
            tag: name,
            attrs,
            text,
        });
    }
    out
}

/// The marker drawn just before each legend text in `labels`: (label, marker, index).
fn legend_markers<'a>(
    els: &[El],
    labels: &'a [String],
) -> Vec<(&'a str, (&'static str, String, bool), usize)> {
    labels
        .iter()
        .map(|label| {
            let i = els
                .iter()
                // A series equal to an earlier one names it after its own label.
                .position(|e| {
                    e.tag == "text"
                        && (e.text == *label || e.text.starts_with(&format!("{label} (= ")))
                })
                .unwrap_or_else(|| panic!("no legend entry `{label}`"));
            let m = els[i - 1]
                .marker()
                .unwrap_or_else(|| panic!("no marker before `{label}`: {:?}", els[i - 1]));
            (label.as_str(), m, i - 1)
        })
        .collect()
}

#[test]
fn the_p2p_plot_gives_every_series_its_own_colour_and_marker() {
    let p2p = studies::catalog::implemented()
        .into_iter()
        .find(|e| e.info.id == "smartio.p2p")
        .expect("smartio.p2p is implemented");
    let runs = p2p.run().unwrap();
    let refs = studies::catalog::references();
    let svg = plot::render_svg(&p2p.info, &runs, &refs).unwrap().unwrap();
    assert_well_formed(&svg);
    let els = svg_elements(&svg);

    let mut configs: Vec<String> = Vec::new();
    for r in &runs {
        if !configs.contains(&r.config) {
            configs.push(r.config.clone());
        }
    }
    assert_eq!(configs.len(), 11, "{configs:?}");
    let legend = legend_markers(&els, &configs);
    let mut styles = std::collections::BTreeSet::new();
    let mut colours = std::collections::BTreeSet::new();
    for (label, m, _) in &legend {
        assert!(m.2, "{label}: series markers are filled");
        assert!(styles.insert((m.0, m.1.clone())), "{label} repeats {m:?}");
        colours.insert(m.1.clone());
    }
    assert_eq!(colours.len(), 11, "eleven series, eleven colours");
    assert!(
        legend.windows(2).all(|w| w[0].1 .0 != w[1].1 .0),
        "neighbours differ in shape too: {legend:?}"
    );
    // The chart draws each series' points with its legend marker: one per size, plus
    // the legend's own.
    for (label, m, _) in &legend {
        let points = runs
            .iter()
            .filter(|r| r.config == *label && r.metrics["gbps"].as_f64().is_some())
            .count();
        assert_eq!(points, 15, "4 KiB … 64 MiB");
        let drawn = els
            .iter()
            .filter(|e| e.marker().as_ref() == Some(m))
            .count();
        assert_eq!(drawn, points + 1, "{label} {m:?}");
    }
    // No published gbps value: no published marker, no such legend entry.
    assert!(
        !svg.contains("published ("),
        "p2p publishes hops and roots only"
    );
    assert!(!els.iter().any(|e| e.marker().is_some_and(|m| !m.2)));
}

#[test]
fn published_values_are_marked_by_basis_where_their_runs_are() {
    let (runs, mut refs, infos) = sweep();
    // A prediction range 0.8–0.9 on `local` at 64 KiB (sweep's) and a fitted point on
    // `remote` at 1 MiB.
    refs.push(Reference {
        basis: Basis::Calibration(&["dma_max_reads"]),
        ..reference(
            "smartio.gpu_dma",
            Some("remote"),
            vec![("bytes", json!(1 << 20))],
            "dma_gbps",
            1.5,
            1.5,
        )
    });
    let svg = plot::render_svg(&infos[0], &runs, &refs).unwrap().unwrap();
    assert_well_formed(&svg);
    let els = svg_elements(&svg);
    let labels: Vec<String> = [
        "local",
        "remote",
        "published (predicted)",
        "published (fitted)",
    ]
    .map(String::from)
    .to_vec();
    let legend = legend_markers(&els, &labels);
    let (local, remote) = (&legend[0].1, &legend[1].1);
    assert_eq!(
        (legend[2].1 .0, legend[2].1 .2),
        ("circle", false),
        "predicted: a hollow circle"
    );
    assert_eq!(
        (legend[3].1 .0, legend[3].1 .2),
        ("diamond", false),
        "fitted: a hollow diamond"
    );
    let legend_at: Vec<usize> = legend.iter().map(|l| l.2).collect();
    let chart: Vec<&El> = els
        .iter()
        .enumerate()
        .filter(|(i, _)| !legend_at.contains(i))
        .map(|(_, e)| e)
        .collect();
    let hollow = |shape: &str, colour: &str| -> Vec<(f64, f64)> {
        chart
            .iter()
            .filter(|e| e.marker() == Some((shape_of(shape), colour.to_string(), false)))
            .map(|e| e.centre())
            .collect()
    };
    fn shape_of(s: &str) -> &'static str {
        if s == "circle" {
            "circle"
        } else {
            "diamond"
        }
    }
    // The range: both ends, in local's colour, at local's 64 KiB point, around it.
    let ends = hollow("circle", &local.1);
    assert_eq!(ends.len(), 2, "{ends:?}");
    let local_points: Vec<(f64, f64)> = chart
        .iter()
        .filter(|e| e.marker().as_ref() == Some(local))
        .map(|e| e.centre())
        .collect();
    assert_eq!(local_points.len(), 15);
    let at = local_points
        .iter()
        .find(|p| (p.0 - ends[0].0).abs() < 1.0)
        .expect("a local point at the published x");
    assert!((ends[0].0 - ends[1].0).abs() < 1.0);
    // Simulated 1 - 1/6 ≈ 0.83 lies inside 0.8–0.9: between the ends on screen.
    let (top, bottom) = (ends[0].1.min(ends[1].1), ends[0].1.max(ends[1].1));
    assert!(top < at.1 && at.1 < bottom, "{ends:?} around {at:?}");
    // The fitted point: one hollow diamond in remote's colour, at 1 MiB, above it (1.5
    // published, 2 × (1 - 1/10) = 1.8 simulated).
    let fitted = hollow("diamond", &remote.1);
    assert_eq!(fitted.len(), 1, "{fitted:?}");
    let remote_at = chart
        .iter()
        .filter(|e| e.marker().as_ref() == Some(remote))
        .map(|e| e.centre())
        .find(|p| (p.0 - fitted[0].0).abs() < 1.0)
        .expect("a remote point at the published x");
    assert!(fitted[0].1 > remote_at.1, "1.5 is drawn below 1.8");
    // Without references: no published marker, no legend entry.
    let plain = plot::render_svg(&infos[0], &runs, &[]).unwrap().unwrap();
    assert!(!plain.contains("published ("));
}

#[test]
fn a_real_plot_marks_its_fitted_points() {
    let ntb = studies::catalog::implemented()
        .into_iter()
        .find(|e| e.info.id == "smartio.ntb_dma")
        .expect("smartio.ntb_dma is implemented");
    let runs = ntb.run().unwrap();
    let refs = studies::catalog::references();
    let fitted = refs
        .iter()
        .filter(|r| r.experiment == "smartio.ntb_dma" && r.basis.is_calibration())
        .count();
    assert!(fitted >= 1);
    let svg = plot::render_svg(&ntb.info, &runs, &refs).unwrap().unwrap();
    let els = svg_elements(&svg);
    let hollow = els
        .iter()
        .filter(|e| e.marker().is_some_and(|m| m.0 == "diamond" && !m.2))
        .count();
    // One per fitted point, one legend entry per chart that has any.
    assert_eq!(hollow, fitted + ntb.info.plot_metrics.len(), "{svg}");
    assert_eq!(
        svg.matches(">\npublished (fitted)\n<").count()
            + svg.matches(">published (fitted)<").count(),
        ntb.info.plot_metrics.len()
    );
    assert!(!svg.contains("published (predicted)"));
}

#[test]
fn the_report_lists_the_catalog_experiments_not_implemented() {
    use studies::catalog;
    let missing = catalog::not_implemented();
    // Derived from the catalog: every entry without a built-in experiment file.
    let implemented: Vec<&str> = studies::experiment::builtin()
        .iter()
        .map(|e| e.info.id)
        .collect();
    let expected: Vec<&str> = catalog::entries()
        .map(|e| e.id)
        .filter(|id| !implemented.contains(id))
        .collect();
    let ids: Vec<&str> = missing.iter().map(|e| e.id).collect();
    assert_eq!(ids, expected);
    assert!(!ids.contains(&"smartio.p2p"));
    // Every catalog experiment is implemented now: the section is shown with a stand-in.
    static STAND_IN: catalog::Entry = catalog::Entry {
        id: "rdma.memcached",
        title: "memcached over one-sided RDMA reads",
        extension: false,
    };
    let missing: Vec<&catalog::Entry> = if missing.is_empty() {
        vec![&STAND_IN]
    } else {
        missing
    };

    let (runs, refs, infos) = sweep();
    let dir = tempfile::tempdir().unwrap();
    let (md, html) = write_report(dir.path(), &infos, &runs, &refs, &missing).unwrap();
    let md = std::fs::read_to_string(md).unwrap();
    let html = std::fs::read_to_string(html).unwrap();
    let section = md
        .split("\n## Not implemented yet\n")
        .nth(1)
        .expect("a Not implemented yet section");
    assert!(md.contains("- [Not implemented yet](#not-implemented-yet)"));
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows[0], "| experiment | title |");
    assert_eq!(rows.len(), 1 + missing.len());
    for (row, e) in rows[1..].iter().zip(&missing) {
        assert_eq!(*row, format!("| {} | {} |", e.id, e.title));
    }
    assert!(section.contains("| rdma.memcached | memcached over one-sided RDMA reads |"));
    for e in &missing {
        assert!(
            html.contains(&format!("<tr><td>{}</td><td>", e.id)),
            "{} in the HTML",
            e.id
        );
    }
    assert!(html.contains("<h2>Not implemented yet</h2>"));
    assert_well_formed(&html);

    // The JSON of `reproduce`: the results as before, plus the list.
    let v = studies::report::reproduce_json(&runs, &refs, &infos, &missing);
    assert_eq!(v["results"], results_json(&runs, &refs)["results"]);
    // Each experiment's metric units beside the rows.
    assert_eq!(
        v["units"],
        serde_json::json!({ "smartio.gpu_dma": { "dma_gbps": "GB/s" } })
    );
    let listed: Vec<(&str, &str)> = v["not_implemented"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e["title"].as_str().unwrap()))
        .collect();
    let want: Vec<(&str, &str)> = missing.iter().map(|e| (e.id, e.title)).collect();
    assert_eq!(listed, want);

    // Nothing missing: no section, and the JSON is the plain results contract.
    let (md, _) = write_report(dir.path(), &infos, &runs, &refs, &[]).unwrap();
    assert!(!std::fs::read_to_string(md)
        .unwrap()
        .contains("Not implemented"));
    let v = studies::report::reproduce_json(&runs, &refs, &infos, &[]);
    assert!(v.get("not_implemented").is_none());
    // And no unit to state: exactly the plain results contract.
    let v = studies::report::reproduce_json(&runs, &refs, &[], &[]);
    assert_eq!(v, results_json(&runs, &refs));
}

#[test]
fn a_point_compared_as_run_is_marked_in_its_row_and_counted_in_the_summary() {
    let (runs, mut refs, _) = sweep();
    // Published under 64 KiB, measured at 32 KiB.
    refs.push(Reference {
        as_run: vec![("bytes", json!(32768))],
        ..reference(
            "smartio.gpu_dma",
            Some("remote"),
            vec![("bytes", json!(65536))],
            "dma_gbps",
            1.5,
            1.5,
        )
    });
    let rows = comparison_rows(&runs, &refs);
    let row = rows.iter().find(|r| r.as_run).unwrap();
    assert_eq!(row.params, "bytes=32 KiB (published as bytes=64 KiB)");
    assert_eq!(row.config, "remote");
    let summary = summary_line(&rows);
    assert!(
        summary.ends_with(
            "; 1 published value compared with the run the study actually made (marked \"published as\")"
        ),
        "{summary}"
    );
}
