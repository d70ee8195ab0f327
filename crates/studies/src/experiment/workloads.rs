//! Metrics that name one of the experiment file's `[[workload]]`s: the workloads, in
//! `nudma run`'s schema, run together on the config's hardware at each point by
//! `nudma run`'s code, so an experiment is a scenario plus workloads, not Rust.

use std::collections::BTreeMap;

use fabric::scenario::Source;
use serde_json::Value;
use toml::Spanned;

use super::{At, Baseline, Fields, Hardware, Metric, Outcome, SweepValue};
use crate::harness::RunError;

/// The argument of a workload metric's run: every workload and the window, as TOML.
pub(super) const WORKLOADS_ARG: &str = "workloads";

/// What a metric is measured by, the field it takes, the run's arguments as written, and
/// its baseline run.
pub(super) type MetricRun = (String, BTreeMap<String, Spanned<String>>, Option<Baseline>);

/// A metric naming one of the file's `[[workload]]`s: the run of all of them (one per
/// config and point, whatever metric asks), the field `WORKLOAD.METRIC` of its rows, and
/// the workloads' text as the run's one argument (so its `{name}`s are checked and
/// substituted as any argument's).
pub(super) fn workload_metric(
    workloads: &[toml::Table],
    measure: Option<&toml::Table>,
    sweep: &[(String, Vec<SweepValue>)],
    refs: &Spanned<toml::Value>,
    m: &Metric,
    name: &str,
    at: At,
) -> Result<MetricRun, RunError> {
    let names: Vec<&str> = workloads
        .iter()
        .filter_map(|t| t.get("name").and_then(toml::Value::as_str))
        .collect();
    let named = named(refs, name, &at)?;
    let Some(w) = named.first() else {
        return Err(at(
            m.name.span(),
            format!("metric `{name}`: `workload = []` names no workload"),
        ));
    };
    for w in &named {
        if !names.contains(&w.get_ref().as_str()) {
            return Err(at(
                w.span(),
                format!(
                    "metric `{name}`: no [[workload]] named `{}` in this file (there are: {})",
                    w.get_ref(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
    }
    let Some(field) = &m.field else {
        return Err(at(
            m.name.span(),
            format!("metric `{name}`: name the workload's metric with `field = \"…\"`"),
        ));
    };
    // No workload field ends in `gbps` any more: each names its unit (`format::unit_of`).
    if field.get_ref().ends_with("gbps") {
        return Err(at(
            field.span(),
            format!(
                "metric `{name}`: no workload gives a field `{}`: fields name their unit, \
                 `…_gbit_s` for Gb/s (network workloads' `throughput_gbit_s`, `mem_bw_gbit_s`, \
                 …) and `…_gbyte_s` for GB/s (`throughput_gbyte_s` of dma, fio, cpu_stream, \
                 copies, RDMA and Tyche)",
                field.get_ref()
            ),
        ));
    }
    let Some(measure) = measure else {
        return Err(at(
            w.span(),
            format!("metric `{name}`: an experiment's workloads need its [measure] window"),
        ));
    };
    // Workloads timed once never meet: a metric runs only those it names, so a metric on
    // other hardware (its own `scenario`) needs only its own to fit there.
    let once = is_once(measure);
    let text = workloads_text(workloads, measure, |n| {
        !once || named.iter().any(|w| w.get_ref() == n)
    })
    .map_err(|e| at(w.span(), format!("metric `{name}`: {e}")))?;
    let args = BTreeMap::from([(WORKLOADS_ARG.to_string(), Spanned::new(w.span(), text))]);
    let fields: Vec<String> = named
        .iter()
        .map(|w| format!("{}.{}", w.get_ref(), field.get_ref()))
        .collect();
    let base = match (&m.baseline, &m.ratio) {
        (Some(_), _) => {
            let own: Vec<&str> = named.iter().map(|w| w.get_ref().as_str()).collect();
            Some(baseline(workloads, measure, m, &own, sweep, name, at)?)
        }
        (None, Some(r)) => {
            return Err(at(
                r.span(),
                format!("metric `{name}`: a `ratio` needs a `baseline`"),
            ))
        }
        (None, None) => None,
    };
    Ok((fields.join(SUM), args, base))
}

fn is_once(measure: &toml::Table) -> bool {
    measure.get("once").and_then(toml::Value::as_bool) == Some(true)
}

/// The `[[workload]]`s `keep` keeps and the `[measure]` window, as one TOML text.
fn workloads_text(
    workloads: &[toml::Table],
    measure: &toml::Table,
    keep: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let run: Vec<toml::Value> = workloads
        .iter()
        .filter(|t| {
            keep(
                t.get("name")
                    .and_then(toml::Value::as_str)
                    .unwrap_or_default(),
            )
        })
        .cloned()
        .map(toml::Value::Table)
        .collect();
    let mut doc = toml::Table::new();
    doc.insert("workload".into(), toml::Value::Array(run));
    doc.insert("measure".into(), toml::Value::Table(measure.clone()));
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// A metric reading a counter of the run of all the file's workloads
/// (`counter = "interconnect_util"`): a value of the whole run, not of one workload.
pub(super) fn counter_metric(
    workloads: &[toml::Table],
    measure: Option<&toml::Table>,
    counter: &Spanned<String>,
    m: &Metric,
    name: &str,
    at: At,
) -> Result<MetricRun, RunError> {
    let here = |msg: &str| at(counter.span(), format!("metric `{name}`: {msg}"));
    if !COUNTERS.contains(&counter.get_ref().as_str()) {
        return Err(here(&format!(
            "no run counter `{}` (there are: {})",
            counter.get_ref(),
            COUNTERS.join(", ")
        )));
    }
    if m.field.is_some() || m.baseline.is_some() || m.ratio.is_some() {
        return Err(here("a counter takes no `field`, `baseline` or `ratio`"));
    }
    let Some(measure) = measure.filter(|t| !is_once(t)) else {
        return Err(here("a counter is read over the [measure] window of the file's workloads (not a `once` run)"));
    };
    let text = workloads_text(workloads, measure, |_| true).map_err(|e| here(&e))?;
    let args = BTreeMap::from([(
        WORKLOADS_ARG.to_string(),
        Spanned::new(counter.span(), text),
    )]);
    Ok((format!("{COUNTER}{}", counter.get_ref()), args, None))
}

/// The run-level counters a metric can read, from `nudma run`'s counters.
const COUNTERS: &[&str] = &["interconnect_util"];
/// Marks a run counter among a run's fields (no workload's name starts with it).
const COUNTER: &str = "@";

/// A metric's baseline run: the same workloads without some (`without`) or at other
/// values of swept parameters (`params`), and which way the ratio goes.
pub(super) fn baseline(
    workloads: &[toml::Table],
    measure: &toml::Table,
    m: &Metric,
    named: &[&str],
    sweep: &[(String, Vec<SweepValue>)],
    name: &str,
    at: At,
) -> Result<Baseline, RunError> {
    let Some(raw) = &m.baseline else {
        return Err(at(m.name.span(), format!("metric `{name}`: no baseline")));
    };
    let ratio = m.ratio.as_ref();
    let here = |msg: String| at(raw.span(), format!("metric `{name}`: baseline: {msg}"));
    let b = raw.get_ref();
    if b.without.is_empty() && b.params.is_empty() {
        return Err(here(
            "name the workloads it runs `without`, or the swept `params` it runs at".into(),
        ));
    }
    let names: Vec<&str> = workloads
        .iter()
        .filter_map(|t| t.get("name").and_then(toml::Value::as_str))
        .collect();
    for w in &b.without {
        if !names.contains(&w.as_str()) {
            return Err(here(format!("no [[workload]] named `{w}` in this file")));
        }
        if named.contains(&w.as_str()) {
            return Err(here(format!("`{w}` is the metric's own workload")));
        }
    }
    let text =
        workloads_text(workloads, measure, |n| !b.without.iter().any(|w| w == n)).map_err(here)?;
    let mut params = Vec::new();
    for (k, v) in &b.params {
        let Some((_, values)) = sweep.iter().find(|(s, _)| s == k) else {
            return Err(here(format!("params.{k} is not a swept parameter")));
        };
        let value = match (v, values.first()) {
            (toml::Value::Integer(i), Some(SweepValue::Int(_))) if *i >= 0 => {
                SweepValue::Int(*i as u64)
            }
            (toml::Value::String(s), Some(SweepValue::Int(_))) => SweepValue::Int(
                fabric::units::parse_size(s).map_err(|e| here(format!("params.{k}: {e}")))?,
            ),
            (toml::Value::String(s), Some(SweepValue::Word(_))) => SweepValue::Word(s.clone()),
            (other, _) => {
                return Err(here(format!(
                    "params.{k}: {other} is not a value of its sweep's kind"
                )))
            }
        };
        params.push((k.clone(), value));
    }
    let inverted = match ratio.map(|r| r.get_ref().as_str()) {
        None | Some("value / baseline") => false,
        Some("baseline / value") => true,
        Some(other) => {
            return Err(at(
                ratio.expect("some").span(),
                format!("metric `{name}`: ratio `{other}`: expected \"value / baseline\" or \"baseline / value\""),
            ))
        }
    };
    Ok(Baseline {
        args: BTreeMap::from([(WORKLOADS_ARG.to_string(), text)]),
        params,
        inverted,
    })
}

/// The workloads a metric's `workload` names: a name, or an array of names whose values
/// add up; each spanned where the value is written.
fn named(
    refs: &Spanned<toml::Value>,
    name: &str,
    at: &At,
) -> Result<Vec<Spanned<String>>, RunError> {
    let one = |v: &toml::Value| v.as_str().map(|s| Spanned::new(refs.span(), s.to_string()));
    let names = match refs.get_ref() {
        toml::Value::Array(vs) => vs.iter().map(one).collect::<Option<Vec<_>>>(),
        v => one(v).map(|w| vec![w]),
    };
    names.ok_or_else(|| {
        at(
            refs.span(),
            format!("metric `{name}`: `workload` is a workload's name or an array of names"),
        )
    })
}

/// Joins the fields of a metric that adds up several workloads' values.
const SUM: &str = " + ";

/// The value of a metric's `field` among a run's `fields`: one field, or the sum of the
/// fields it joins (`workload = [...]`); `None` when one is missing or not a number.
pub(super) fn field(fields: &Fields, field: &str) -> Option<Value> {
    if !field.contains(SUM) {
        return fields.get(field).cloned();
    }
    let mut sum = 0.0;
    for f in field.split(SUM) {
        sum += fields.get(f)?.as_f64()?;
    }
    Some(Value::from(sum))
}

/// Runs an experiment's workloads (their resolved TOML) on the hardware of `src` with
/// the overrides `hw` as `nudma run` runs a scenario's; each row's metric `M` of workload
/// `W` is field `W.M`.
pub(super) fn run_workloads(hw: &Hardware, workloads: &str) -> Result<Outcome, RunError> {
    let both = Source {
        name: hw.src.name.clone(),
        text: format!("{}\n{workloads}", hw.src.text),
    };
    let r = crate::run::run_loaded(hw.scenario.clone(), &both, &hw.point, 1)?;
    let mut fields = Fields::new();
    for row in r.rows {
        let w = row
            .params
            .get("workload")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        for (k, v) in row.metrics {
            fields.insert(format!("{w}.{k}"), v);
        }
    }
    for c in COUNTERS {
        if let Some(v) = r.counters.get(*c) {
            fields.insert(format!("{COUNTER}{c}"), v.clone());
        }
    }
    Ok(Outcome {
        fields,
        counters: Some(r.counters),
    })
}
