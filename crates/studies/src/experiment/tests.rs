//! The experiment file's parsing and running, on a registry of test probes.

use std::cell::Cell;
use std::collections::BTreeMap;

use serde_json::json;

use super::Experiment;
use crate::harness::RunError;
use crate::probe::{Fields, Probe, ProbeCx};
use crate::result::Run;

thread_local! {
    /// Runs of the `pair` probe on this test's thread.
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

/// Two fields from one run: the swept `clients` (if any) and the argument `tag`.
fn pair(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    CALLS.with(|c| c.set(c.get() + 1));
    Ok(BTreeMap::from([
        ("a".to_string(), json!(cx.swept("clients"))),
        ("b".to_string(), json!(cx.arg("tag")?)),
    ]))
}

const TEST_PROBES: &[Probe] = &[Probe {
    name: "pair",
    fields: &["a", "b"],
    run: pair,
}];

fn parse(text: &str) -> Result<Experiment, RunError> {
    let src = fabric::scenario::Source {
        name: "x.toml".into(),
        text: text.into(),
    };
    Experiment::parse_with(&src, TEST_PROBES)
}

const HEAD: &str = r#"[experiment]
id = "test.x"
description = "d"
window = "w"
plot = []

[[config]]
name = "default"
scenario = "smartio_pxh830_b2b"
vars = { who = "a" }
"#;

fn file(sweep: &str, metrics: &str) -> String {
    format!("{HEAD}\n{sweep}\n{metrics}")
}

/// `run` in a one-thread pool made of this thread, so the thread-local `CALLS` sees
/// every probe run.
fn run_on_this_thread(e: &Experiment) -> Vec<crate::result::Run> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build()
        .unwrap();
    pool.install(|| e.run(&[])).unwrap()
}

const TWO: &str = r#"
[[metric]]
name = "clients_seen"
probe = "pair"
field = "a"
args = { tag = "{who}-{clients}" }

[[metric]]
name = "tag"
probe = "pair"
field = "b"
args = { tag = "{who}-{clients}" }
"#;

#[test]
fn any_pool_gives_the_same_rows_in_the_files_order() {
    let e = parse(&file("[sweep]\nclients = [1, 2, 3, 5, 8, 13, 21, 31]", TWO)).unwrap();
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| e.run(&[])).unwrap()
    };
    let one = on(1);
    assert_eq!(one, on(4));
    let seen: Vec<_> = one
        .iter()
        .map(|r| r.metrics["clients_seen"].clone())
        .collect();
    assert_eq!(seen, [1, 2, 3, 5, 8, 13, 21, 31].map(|n| json!(n)));
}

#[test]
fn a_two_metric_probe_runs_once_per_point_and_integer_sweeps_are_numbers() {
    let e = parse(&file("[sweep]\nclients = [1, 8, 31]", TWO)).unwrap();
    CALLS.with(|c| c.set(0));
    let runs = run_on_this_thread(&e);
    assert_eq!(
        CALLS.with(Cell::get),
        3,
        "one run per point, two metrics each"
    );
    assert_eq!(runs.len(), 3);
    for (r, n) in runs.iter().zip([1, 8, 31]) {
        assert_eq!(r.params.get("clients"), Some(&json!(n)));
        assert_eq!(r.metrics["clients_seen"], json!(n));
        assert_eq!(r.metrics["tag"], json!(format!("a-{n}")));
    }
    let j = crate::report::results_json(&runs, &[]);
    assert_eq!(j["results"][2]["params"], json!({ "clients": 31 }));
    assert!(j["results"][2]["params"]["clients"].is_u64());
}

#[test]
fn once_metrics_and_sweep_products() {
    let once = r#"
[[metric]]
name = "fixed"
probe = "pair"
field = "b"
args = { tag = "{who}" }
once = true
"#;
    let e = parse(&file(
        "[sweep]\nclients = [1, 2]\nhosts = [2, 16, 59]",
        once,
    ))
    .unwrap();
    CALLS.with(|c| c.set(0));
    let runs = run_on_this_thread(&e);
    assert_eq!(runs.len(), 6, "the product of the two sweeps");
    assert_eq!(
        CALLS.with(Cell::get),
        1,
        "a `once` metric runs once per config"
    );
    assert_eq!(
        runs[1].params,
        json!({ "clients": 1, "hosts": 16 })
            .as_object()
            .cloned()
            .unwrap()
    );
    assert!(runs.iter().all(|r| r.metrics["fixed"] == json!("a")));
}

#[test]
fn sizes_still_sweep_bytes() {
    let e = parse(&file(
        "[sweep]\nbytes = [\"4 KiB\", 8192]",
        "[[metric]]\nname = \"m\"\nprobe = \"pair\"\nfield = \"b\"\nargs = { tag = \"{bytes}\" }\n",
    ))
    .unwrap();
    let runs = e.run(&[]).unwrap();
    assert_eq!(runs[0].params["bytes"], json!(4096));
    assert_eq!(runs[1].metrics["m"], json!("8192"));
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.0,
    }
}

/// The line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn errors_are_located_and_clear() {
    // A field the probe does not give.
    let t = file("[sweep]\nclients = [1]", TWO).replace("field = \"b\"", "field = \"c\"");
    let e = err(&t);
    let at = format!("x.toml:{}:", line_of(&t, "field = \"c\""));
    assert!(e.starts_with(&at), "{e}");
    assert!(
        e.ends_with("metric `tag`: probe `pair` has no field `c` (its fields: a, b)"),
        "{e}"
    );
    // No field named for a probe of several.
    let t = file("[sweep]\nclients = [1]", TWO).replace("field = \"a\"\n", "");
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "clients_seen"))),
        "{e}"
    );
    assert!(
        e.contains("probe `pair` gives several fields (a, b): name one with `field"),
        "{e}"
    );
    // An argument naming a variable nothing defines.
    let t = file("[sweep]\nclients = [1]", TWO).replace(
        "{who}-{clients}\" }\n\n[[metric]]",
        "{hosts}\" }\n\n[[metric]]",
    );
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "{hosts}"))),
        "{e}"
    );
    assert!(
        e.ends_with("metric `clients_seen`, argument `tag`: `{hosts}` is neither a swept parameter (swept: clients) nor a var of config `default` (its vars: who)"),
        "{e}"
    );
    // The swept `{clients}` without a sweep.
    let e = err(&file("", TWO));
    assert!(
        e.contains("`{clients}` is neither a swept parameter (nothing is swept)"),
        "{e}"
    );
    // A size where integers are swept; a negative integer.
    let t = file("[sweep]\nclients = [1, \"4 KiB\"]", TWO);
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "clients ="))),
        "{e}"
    );
    assert!(e.ends_with("\"4 KiB\" is a word, but sweep `clients` starts with the integer 1: one sweep is all integers or all words (sizes are for `bytes` and `*_bytes`) (key `sweep.clients[1]`)"), "{e}");
    assert!(
        err(&file("[sweep]\nhosts = [-2]", TWO)).ends_with("-2 is negative (key `sweep.hosts[0]`)")
    );
    // An unknown probe, located and listing the known ones.
    let t = file("[sweep]\nclients = [1]", TWO).replacen(
        "probe = \"pair\"",
        "probe = \"nvme_sharing\"",
        1,
    );
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "nvme_sharing"))),
        "{e}"
    );
    assert!(
        e.ends_with("unknown probe `nvme_sharing` (known: pair)"),
        "{e}"
    );
    // A var that is also swept; a swept parameter in a `once` metric.
    let e = err(&file("[sweep]\nwho = [1]", TWO));
    assert!(e.contains("var `who` is also a swept parameter"), "{e}");
    let t = file("[sweep]\nclients = [1]", TWO).replacen(
        "field = \"a\"",
        "field = \"a\"\nonce = true",
        1,
    );
    assert!(err(&t).contains(
        "a `once` metric is measured once per config and cannot use the swept `{clients}`"
    ));
}

#[test]
fn word_sweeps_reach_arguments_and_stay_words_in_results() {
    let e = parse(&file(
        "[sweep]\ndirection = [\"rx\", \"tx\"]\nclients = [2]",
        "[[metric]]\nname = \"m\"\nprobe = \"pair\"\nfield = \"b\"\nargs = { tag = \"{who}-{direction}\" }\n\n[[metric]]\nname = \"n\"\nprobe = \"pair\"\nfield = \"a\"\nargs = { tag = \"{direction}\" }\n",
    ))
    .unwrap();
    let runs = e.run(&[]).unwrap();
    assert_eq!(runs.len(), 2);
    for (r, d) in runs.iter().zip(["rx", "tx"]) {
        assert_eq!(r.params["direction"], json!(d));
        assert_eq!(r.metrics["m"], json!(format!("a-{d}")));
        // The probe's `swept` sees the numeric parameters only.
        assert_eq!(r.metrics["n"], json!(2));
    }
    let j = crate::report::results_json(&runs, &[]);
    assert_eq!(
        j["results"][1]["params"],
        json!({ "clients": 2, "direction": "tx" })
    );
    // Report tables print the word bare.
    assert_eq!(
        crate::format::render_params(&runs[1].params),
        "clients=2 direction=tx"
    );
}

#[test]
fn mixed_sweeps_are_refused_at_the_odd_value() {
    let t = file("[sweep]\ndirection = [\"rx\", 3]", TWO);
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "direction ="))),
        "{e}"
    );
    assert!(
        e.ends_with("3 is not a word, but sweep `direction` starts with the word \"rx\": one sweep is all integers or all words (key `sweep.direction[1]`)"),
        "{e}"
    );
    assert!(err(&file("[sweep]\ndirection = [\"rx\", \" \"]", TWO))
        .ends_with("an empty word (key `sweep.direction[1]`)"));
    // Powers of two are integers only.
    assert!(
        err(&file("[sweep]\nclients = { from = \"rx\", to = 4 }", TWO)).ends_with(
            "\"rx\" is not a plain integer (sizes are for `bytes` and `*_bytes`) (key `sweep.clients.from`)"
        )
    );
}

#[test]
fn published_points_name_words_and_sizes() {
    let base = file(
        "[sweep]\ndirection = [\"rx\", \"tx\"]",
        "[[metric]]\nname = \"m\"\nprobe = \"pair\"\nfield = \"a\"\nargs = { tag = \"{direction}\" }\n",
    );
    let e = parse(&format!(
        "{base}\n[[published]]\nparams = {{ direction = \"tx\", bytes = \"4 KiB\" }}\nmetric = \"m\"\nvalue = 1.0\nbasis = \"prediction\"\nsource = \"s\"\n"
    ))
    .unwrap();
    assert_eq!(
        e.references[0].params,
        [("bytes", json!(4096)), ("direction", json!("tx"))]
    );
    let e = err(&format!(
        "{base}\n[[published]]\nparams = {{ direction = 1.5 }}\nmetric = \"m\"\nvalue = 1.0\nbasis = \"prediction\"\nsource = \"s\"\n"
    ));
    assert!(
        e.ends_with(
            "published m: params.direction: 1.5 is neither a non-negative integer nor a word"
        ),
        "{e}"
    );
}

#[test]
fn a_point_published_under_other_parameters_than_its_run_is_compared_as_run() {
    let base = file(
        "[sweep]\ndirection = [\"rx\", \"tx\"]",
        "[[metric]]\nname = \"m\"\nprobe = \"pair\"\nfield = \"a\"\nargs = { tag = \"{direction}\" }\n",
    );
    let point = |as_run: &str| {
        format!(
            "{base}\n[[published]]\nparams = {{ direction = \"tx\", bytes = \"1 KiB\" }}\n{as_run}\nmetric = \"m\"\nvalue = 1.0\nbasis = \"prediction\"\nsource = \"s\"\n"
        )
    };
    let e = parse(&point("as_run = { bytes = 512 }")).unwrap();
    let r = &e.references[0];
    assert_eq!(r.as_run, [("bytes", json!(512))]);
    assert_eq!(r.published_as().as_deref(), Some("bytes=1 KiB"));
    let run = |bytes: u64| Run {
        experiment: "test.x".into(),
        config: "default".into(),
        params: [
            ("bytes".to_string(), json!(bytes)),
            ("direction".to_string(), json!("tx")),
        ]
        .into_iter()
        .collect(),
        metrics: [("m".to_string(), json!(2.0))].into_iter().collect(),
        counters: Default::default(),
    };
    assert!(r.applies(&run(512)) && !r.applies(&run(1024)));
    let e = err(&point("as_run = { clients = 4 }"));
    assert!(
        e.ends_with("published m: as_run.clients replaces no parameter of its `params`"),
        "{e}"
    );
}

#[test]
fn probe_errors_name_the_experiment_config_metric_and_probe() {
    let t = file("[sweep]\nclients = [1]", TWO).replace(
        "args = { tag = \"{who}-{clients}\" }",
        "args = { other = \"{clients}\" }",
    );
    let e = parse(&t).unwrap().run(&[]).unwrap_err().0;
    assert_eq!(
        e,
        "test.x, config `default`: metric `clients_seen` (probe `pair`): needs argument `tag` (given: other)"
    );
}

#[test]
fn an_argument_the_probe_never_reads_is_an_error_not_ignored() {
    let t = file("[sweep]\nclients = [1]", TWO).replace(
        "args = { tag = \"{who}-{clients}\" }",
        "args = { tag = \"{who}\", tga = \"x\" }",
    );
    let e = parse(&t).unwrap().run(&[]).unwrap_err().0;
    assert_eq!(
        e,
        "test.x, config `default`: metric `clients_seen` (probe `pair`): the probe takes no argument `tga` (check its spelling and the probe's documentation)"
    );
}
