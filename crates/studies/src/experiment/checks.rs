//! The checks an experiment file passes as it is read: every `{name}` placeholder of a
//! metric is a swept parameter or a config's var, every `[[published]]` value names a
//! config and metric of the file, and the `[sweep_vars]` tables fit the sweep.

use std::collections::BTreeMap;

use serde_json::json;
use toml::Spanned;

use super::{
    leak, placeholders, At, ConfigSpec, MetricSpec, Published, SweepValue, SweepVars, SweepVarsRaw,
};
use crate::format::is_size_param;
use crate::harness::RunError;
use crate::result::{Basis, Reference};

/// Every `{name}` of a metric's arguments is a swept parameter (not in a `once` metric)
/// or a var of every config.
pub(super) fn check_placeholders(
    name: &str,
    args: &BTreeMap<String, Spanned<String>>,
    once: bool,
    swept: &[&str],
    configs: &[ConfigSpec],
    at: At,
) -> Result<(), RunError> {
    for v in args.values() {
        for p in placeholders(v.get_ref()) {
            if swept.contains(&p) {
                if once {
                    return Err(at(
                        v.span(),
                        format!(
                            "metric `{name}`: a `once` metric is measured once per config and cannot use the swept `{{{p}}}`"
                        ),
                    ));
                }
                continue;
            }
            if let Some(c) = configs.iter().find(|c| !c.vars.contains_key(p)) {
                let swept_text = if swept.is_empty() {
                    "nothing is swept".to_string()
                } else {
                    format!("swept: {}", swept.join(", "))
                };
                let vars: Vec<&str> = c.vars.keys().map(String::as_str).collect();
                return Err(at(
                    v.span(),
                    format!(
                        "metric `{name}`: `{{{p}}}` in its workloads is neither a swept parameter ({swept_text}) nor a var of config `{}` (its vars: {})",
                        c.name,
                        if vars.is_empty() { "none".to_string() } else { vars.join(", ") }
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A `[[published]]` value of the file, checked against its configs and metrics.
pub(super) fn published_reference(
    p: Published,
    id: &'static str,
    configs: &[ConfigSpec],
    metrics: &[MetricSpec],
    bad: &dyn Fn(String) -> RunError,
) -> Result<Reference, RunError> {
    if let Some(c) = &p.config {
        if !configs.iter().any(|x| &x.name == c) {
            return Err(bad(format!("published value for unknown config `{c}`")));
        }
    }
    if !metrics.iter().any(|m| m.name == p.metric) {
        return Err(bad(format!(
            "published value for unknown metric `{}`",
            p.metric
        )));
    }
    let basis = match (p.basis.as_str(), p.parameters.is_empty()) {
        ("prediction", true) => Basis::Prediction,
        ("calibration", false) => {
            let names: Vec<&'static str> = p.parameters.into_iter().map(leak).collect();
            Basis::Calibration(Box::leak(names.into_boxed_slice()))
        }
        ("calibration", true) => {
            return Err(bad(format!(
                "published {}: a calibration point names the `parameters` fitted on it",
                p.metric
            )))
        }
        (other, _) => {
            return Err(bad(format!(
                "published {}: basis `{other}` (use \"calibration\" with `parameters`, or \"prediction\")",
                p.metric
            )))
        }
    };
    let param_value = |table: &str, k: &str, v: &toml::Value| match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(json!(i)),
        toml::Value::String(s) if is_size_param(k) => Ok(json!(fabric::units::parse_size(s)
            .map_err(|e| bad(format!("published {}: {table}.{k}: {e}", p.metric)))?)),
        toml::Value::String(s) => Ok(json!(s)),
        other => Err(bad(format!(
            "published {}: {table}.{k}: {other} is neither a non-negative integer nor a word",
            p.metric
        ))),
    };
    let mut params = Vec::new();
    for (k, v) in &p.params {
        params.push((leak(k.clone()), param_value("params", k, v)?));
    }
    let mut as_run = Vec::new();
    for (k, v) in &p.as_run {
        if !p.params.contains_key(k) {
            return Err(bad(format!(
                "published {}: as_run.{k} replaces no parameter of its `params`",
                p.metric
            )));
        }
        as_run.push((leak(k.clone()), param_value("as_run", k, v)?));
    }
    Ok(Reference {
        experiment: id,
        config: p.config.map(leak),
        params,
        as_run,
        metric: leak(p.metric),
        value: p.value,
        value_high: p.high.unwrap_or(p.value),
        source: leak(p.source),
        basis,
    })
}

/// The `[sweep_vars]` tables, checked: each names a swept parameter, gives vars for
/// every one of its values and only those, the same names for each, none of them a
/// swept parameter.
pub(super) fn sweep_vars(
    raw: SweepVarsRaw,
    sweep: &[(String, Vec<SweepValue>)],
    at: At,
) -> Result<SweepVars, RunError> {
    let mut out = SweepVars::new();
    for (param, per) in raw {
        let span = per.span();
        let here = |m: String| at(span.clone(), format!("sweep_vars.{param}: {m}"));
        let Some((_, values)) = sweep.iter().find(|(k, _)| *k == param) else {
            return Err(here("not a swept parameter".into()));
        };
        let texts: Vec<String> = values.iter().map(SweepValue::text).collect();
        let per = per.into_inner();
        let mut names: Option<Vec<&String>> = None;
        for (value, vars) in &per {
            if !texts.contains(value) {
                return Err(here(format!(
                    "`{value}` is not one of its values ({})",
                    texts.join(", ")
                )));
            }
            let these: Vec<&String> = vars.keys().collect();
            if let Some(n) = sweep.iter().find(|(k, _)| these.contains(&k)) {
                return Err(here(format!("var `{}` is a swept parameter", n.0)));
            }
            if names.get_or_insert(these.clone()) != &these {
                return Err(here(format!("value `{value}` gives other vars than the others; each value gives the same names")));
            }
        }
        if let Some(missing) = texts.iter().find(|t| !per.contains_key(*t)) {
            return Err(here(format!("no vars for its value `{missing}`")));
        }
        let mut by_value = BTreeMap::new();
        for (value, vars) in per {
            let vars = vars
                .into_iter()
                .map(|(k, v)| match v {
                    toml::Value::String(s) => Ok((k, s)),
                    toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                        Ok((k, v.to_string()))
                    }
                    other => Err(here(format!(
                        "{value}.{k}: {other} is not a string, number or boolean"
                    ))),
                })
                .collect::<Result<BTreeMap<_, _>, _>>()?;
            by_value.insert(value, vars);
        }
        out.insert(param, by_value);
    }
    Ok(out)
}
