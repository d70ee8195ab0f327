//! Metrics that name one of the experiment file's `[[workload]]`s: the workloads, in
//! `nudma run`'s schema, run together on the config's hardware at each point by
//! `nudma run`'s code, so an experiment is a scenario plus workloads, not Rust.

use std::collections::BTreeMap;

use fabric::scenario::Source;
use serde_json::Value;
use toml::Spanned;

use super::{At, By, Metric, Outcome};
use crate::harness::RunError;
use crate::probe::Fields;
use crate::run::overrides::Point;

/// The argument of a workload metric's run: every workload and the window, as TOML.
pub(super) const WORKLOADS_ARG: &str = "workloads";

/// What a metric is measured by, the field it takes, and the run's arguments as written.
pub(super) type MetricRun = (By, String, BTreeMap<String, Spanned<String>>);

/// A metric naming one of the file's `[[workload]]`s: the run of all of them (one per
/// config and point, whatever metric asks), the field `WORKLOAD.METRIC` of its rows, and
/// the workloads' text as the run's one argument (so its `{name}`s are checked and
/// substituted as any argument's).
pub(super) fn workload_metric(
    workloads: &[toml::Table],
    measure: Option<&toml::Table>,
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
    if !m.args.is_empty() {
        return Err(at(
            m.name.span(),
            format!("metric `{name}`: a workload's metric takes no `args` (its workload's fields say what to run)"),
        ));
    }
    let Some(field) = &m.field else {
        return Err(at(
            m.name.span(),
            format!("metric `{name}`: name the workload's metric with `field = \"…\"`"),
        ));
    };
    let Some(measure) = measure else {
        return Err(at(
            w.span(),
            format!("metric `{name}`: an experiment's workloads need its [measure] window"),
        ));
    };
    // Workloads timed once never meet: a metric runs only those it names, so a metric on
    // other hardware (its own `scenario`) needs only its own to fit there.
    let once = measure.get("once").and_then(toml::Value::as_bool) == Some(true);
    let run: Vec<toml::Value> = workloads
        .iter()
        .filter(|t| {
            let n = t.get("name").and_then(toml::Value::as_str);
            !once || named.iter().any(|w| Some(w.get_ref().as_str()) == n)
        })
        .cloned()
        .map(toml::Value::Table)
        .collect();
    let mut doc = toml::Table::new();
    doc.insert("workload".into(), toml::Value::Array(run));
    doc.insert("measure".into(), toml::Value::Table(measure.clone()));
    let text = toml::to_string(&doc).map_err(|e| at(w.span(), format!("metric `{name}`: {e}")))?;
    let args = BTreeMap::from([(WORKLOADS_ARG.to_string(), Spanned::new(w.span(), text))]);
    let fields: Vec<String> = named
        .iter()
        .map(|w| format!("{}.{}", w.get_ref(), field.get_ref()))
        .collect();
    Ok((By::Workloads, fields.join(SUM), args))
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
pub(super) fn run_workloads(
    src: &Source,
    hw: &Point,
    workloads: &str,
) -> Result<Outcome, RunError> {
    let both = Source {
        name: format!("{} with the experiment's workloads", src.name),
        text: format!("{}\n{workloads}", src.text),
    };
    let r = crate::run::run_point(&both, hw, 1)?;
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
    Ok(Outcome {
        fields,
        counters: Some(r.counters),
    })
}
