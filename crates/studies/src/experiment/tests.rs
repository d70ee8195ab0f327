//! The experiment file's parsing and running, with an echo in place of `nudma run`: each
//! run gives every field its workloads were written with, as `WORKLOAD.KEY`.

use std::cell::Cell;

use serde_json::{json, Value};

use super::{Experiment, Fields, Hardware, Outcome};
use crate::harness::RunError;
use crate::result::Run;

thread_local! {
    /// Runs on this test's thread.
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

/// Each workload's fields as written (placeholders resolved), as `WORKLOAD.KEY`.
fn echo(_: &Hardware, text: &str) -> Result<Outcome, RunError> {
    CALLS.with(|c| c.set(c.get() + 1));
    let doc: toml::Table = toml::from_str(text).map_err(|e| RunError(e.to_string()))?;
    let mut fields = Fields::new();
    for w in doc["workload"].as_array().into_iter().flatten() {
        let w = w.as_table().expect("a table");
        let name = w["name"].as_str().expect("named");
        for (k, v) in w {
            let v: Value = serde_json::to_value(v).map_err(|e| RunError(e.to_string()))?;
            fields.insert(format!("{name}.{k}"), v);
        }
    }
    Ok(Outcome {
        fields,
        counters: None,
    })
}

fn parse(text: &str) -> Result<Experiment, RunError> {
    let src = fabric::scenario::Source {
        name: "x.toml".into(),
        text: text.into(),
    };
    Experiment::parse_with(&src, echo)
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

/// One workload whose fields `clients` and `tag` are the swept `clients` and a tag.
const WORKLOAD: &str = r#"
[[workload]]
name = "w"
kind = "echo"
clients = "{clients}"
tag = "{who}-{clients}"

[measure]
warmup = "1 us"
duration = "1 us"
"#;

fn file(sweep: &str, metrics: &str) -> String {
    format!("{HEAD}\n{sweep}\n{WORKLOAD}\n{metrics}")
}

/// `run` in a one-thread pool made of this thread, so the thread-local `CALLS` sees
/// every run.
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
workload = "w"
field = "clients"

[[metric]]
name = "tag"
workload = "w"
field = "tag"
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
fn two_metrics_of_one_run_share_it_and_integer_sweeps_are_numbers() {
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

/// A file with one workload whose fields are `fields` (TOML lines) and `metrics`.
fn with_workload(sweep: &str, fields: &str, metrics: &str) -> String {
    format!(
        "{HEAD}\n{sweep}\n[[workload]]\nname = \"w\"\nkind = \"echo\"\n{fields}\n\n\
         [measure]\nwarmup = \"1 us\"\nduration = \"1 us\"\n{metrics}"
    )
}

#[test]
fn once_metrics_and_sweep_products() {
    let once = "[[metric]]\nname = \"fixed\"\nworkload = \"w\"\nfield = \"tag\"\nonce = true\n";
    let e = parse(&with_workload(
        "[sweep]\nclients = [1, 2]\nhosts = [2, 16, 59]",
        "tag = \"{who}\"",
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
    let e = parse(&with_workload(
        "[sweep]\nbytes = [\"4 KiB\", 8192]",
        "tag = \"{bytes}\"\nsize = \"{bytes} B\"",
        "[[metric]]\nname = \"m\"\nworkload = \"w\"\nfield = \"tag\"\n\n\
         [[metric]]\nname = \"s\"\nworkload = \"w\"\nfield = \"size\"\n",
    ))
    .unwrap();
    let runs = e.run(&[]).unwrap();
    assert_eq!(runs[0].params["bytes"], json!(4096));
    // A string that is only a placeholder of a number becomes the number.
    assert_eq!(runs[1].metrics["m"], json!(8192));
    assert_eq!(runs[1].metrics["s"], json!("8192 B"));
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
    // No field named.
    let t = file("[sweep]\nclients = [1]", TWO).replace("field = \"clients\"\n", "");
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "clients_seen"))),
        "{e}"
    );
    assert!(e.contains("name the workload's metric with `field"), "{e}");
    // A placeholder nothing defines, located at the metric naming the workload.
    let t = file("[sweep]\nclients = [1]", TWO).replace("{who}-{clients}", "{hosts}");
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "workload = \"w\""))),
        "{e}"
    );
    assert!(
        e.ends_with("metric `clients_seen`: `{hosts}` in its workloads is neither a swept parameter (swept: clients) nor a var of config `default` (its vars: who)"),
        "{e}"
    );
    // The swept `{clients}` without a sweep.
    let e = err(&file("", TWO));
    assert!(
        e.contains("`{clients}` in its workloads is neither a swept parameter (nothing is swept)"),
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
    // Metrics name workloads or counters; there are no probes.
    let t = file("[sweep]\nclients = [1]", TWO).replacen("workload = \"w\"", "probe = \"pair\"", 1);
    let e = err(&t);
    assert!(
        e.starts_with(&format!("x.toml:{}:", line_of(&t, "probe ="))),
        "{e}"
    );
    assert!(e.contains("unknown field `probe`"), "{e}");
    // A var that is also swept; a swept parameter in a `once` metric.
    let e = err(&file("[sweep]\nwho = [1]", TWO));
    assert!(e.contains("var `who` is also a swept parameter"), "{e}");
    let t = file("[sweep]\nclients = [1]", TWO).replacen(
        "field = \"clients\"",
        "field = \"clients\"\nonce = true",
        1,
    );
    assert!(err(&t).contains(
        "a `once` metric is measured once per config and cannot use the swept `{clients}`"
    ));
}

#[test]
fn word_sweeps_reach_workloads_and_stay_words_in_results() {
    let e = parse(&with_workload(
        "[sweep]\ndirection = [\"rx\", \"tx\"]\nclients = [2]",
        "tag = \"{who}-{direction}\"\nclients = \"{clients}\"",
        "[[metric]]\nname = \"m\"\nworkload = \"w\"\nfield = \"tag\"\n\n[[metric]]\nname = \"n\"\nworkload = \"w\"\nfield = \"clients\"\n",
    ))
    .unwrap();
    let runs = e.run(&[]).unwrap();
    assert_eq!(runs.len(), 2);
    for (r, d) in runs.iter().zip(["rx", "tx"]) {
        assert_eq!(r.params["direction"], json!(d));
        assert_eq!(r.metrics["m"], json!(format!("a-{d}")));
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
fn sweep_vars_follow_their_value_and_are_checked() {
    let vars = "[sweep_vars.io]\nmemcached = { instances = 6, window = \"4 ms\" }\nnetperf = { instances = 0, window = \"2 ms\" }\n";
    let t = with_workload(
        &format!("[sweep]\nio = [\"memcached\", \"netperf\"]\n\n{vars}"),
        "instances = \"{instances}\"\nwindow = \"{window}\"",
        "[[metric]]\nname = \"i\"\nworkload = \"w\"\nfield = \"instances\"\n\n[[metric]]\nname = \"d\"\nworkload = \"w\"\nfield = \"window\"\n",
    );
    let runs = parse(&t).unwrap().run(&[]).unwrap();
    assert_eq!(runs[0].metrics["i"], json!(6));
    assert_eq!(runs[0].metrics["d"], json!("4 ms"));
    assert_eq!(runs[1].metrics["i"], json!(0));
    assert_eq!(runs[1].metrics["d"], json!("2 ms"));
    // Every value, only its values, the same names; located at the table.
    let bad = |from: &str, to: &str| {
        let b = t.replace(from, to);
        let e = err(&b);
        assert!(
            e.starts_with(&format!("x.toml:{}:", line_of(&b, "[sweep_vars.io]"))),
            "{e}"
        );
        e
    };
    let e = bad("netperf = { instances = 0, window = \"2 ms\" }\n", "");
    assert!(
        e.ends_with("sweep_vars.io: no vars for its value `netperf`"),
        "{e}"
    );
    let e = bad("netperf = {", "udp = {");
    assert!(
        e.ends_with("sweep_vars.io: `udp` is not one of its values (memcached, netperf)"),
        "{e}"
    );
    let e = bad("instances = 0, ", "");
    assert!(
        e.contains("value `netperf` gives other vars than the others"),
        "{e}"
    );
    let e = err(&t.replace("[sweep_vars.io]", "[sweep_vars.bytes]"));
    assert!(
        e.ends_with("sweep_vars.bytes: not a swept parameter"),
        "{e}"
    );
}

#[test]
fn a_baseline_at_other_swept_values_shares_that_points_run() {
    let metrics = format!(
        "{TWO}\n[[metric]]\nname = \"norm\"\nworkload = \"w\"\nfield = \"clients\"\nbaseline = {{ params = {{ clients = 2 }} }}\n\n\
         [[metric]]\nname = \"inv\"\nworkload = \"w\"\nfield = \"clients\"\nbaseline = {{ params = {{ clients = 2 }} }}\nratio = \"baseline / value\"\n"
    );
    let e = parse(&file("[sweep]\nclients = [2, 8]", &metrics)).unwrap();
    CALLS.with(|c| c.set(0));
    let runs = run_on_this_thread(&e);
    assert_eq!(
        CALLS.with(Cell::get),
        2,
        "the baseline is the clients = 2 point's run"
    );
    assert_eq!(runs[0].metrics["norm"], json!(1.0));
    assert_eq!(runs[1].metrics["norm"], json!(4.0));
    assert_eq!(runs[1].metrics["inv"], json!(0.25));
}

#[test]
fn configs_with_the_same_hardware_share_a_run_their_vars_do_not_change() {
    // Two configs that differ in a var only one workload uses: the run without it (the
    // baseline) is the same for both, and runs once.
    let two = HEAD.replace("vars = { who = \"a\" }", "vars = { who = \"a\" }\n\n[[config]]\nname = \"b\"\nscenario = \"smartio_pxh830_b2b\"\nvars = { who = \"b\" }");
    let t = format!(
        "{two}\n[[workload]]\nname = \"w\"\nkind = \"echo\"\ntag = \"{{who}}\"\n\n\
         [[workload]]\nname = \"u\"\nkind = \"echo\"\nn = 3\n\n\
         [measure]\nwarmup = \"1 us\"\nduration = \"1 us\"\n\n\
         [[metric]]\nname = \"n\"\nworkload = \"u\"\nfield = \"n\"\nbaseline = {{ without = [\"w\"] }}\n"
    );
    let e = parse(&t).unwrap();
    CALLS.with(|c| c.set(0));
    let runs = run_on_this_thread(&e);
    assert_eq!(
        CALLS.with(Cell::get),
        3,
        "two runs with `w`, one without it"
    );
    assert!(runs.iter().all(|r| r.metrics["n"] == json!(1.0)));
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
    let base = with_workload(
        "[sweep]\ndirection = [\"rx\", \"tx\"]",
        "tag = \"{direction}\"",
        "[[metric]]\nname = \"m\"\nworkload = \"w\"\nfield = \"tag\"\n",
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
    let base = with_workload(
        "[sweep]\ndirection = [\"rx\", \"tx\"]",
        "tag = \"{direction}\"",
        "[[metric]]\nname = \"m\"\nworkload = \"w\"\nfield = \"tag\"\n",
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
fn run_errors_name_the_experiment_config_and_metric() {
    let t = file("[sweep]\nclients = [1]", TWO).replace("field = \"tag\"", "field = \"tga\"");
    let e = parse(&t).unwrap().run(&[]).unwrap_err().0;
    assert_eq!(
        e,
        "test.x, config `default`: metric `tag`: the workloads gave no metric `w.tga` (it gave: w.clients, w.kind, w.name, w.tag)"
    );
}
