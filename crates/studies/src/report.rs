//! Reports of `nudma reproduce`, independent of any model: the JSON results of docs/cli.md's
//! contract, the rows that put simulated values beside published ones, the human table
//! printed on stdout, and `report.md` / `report.html` (the plots they embed are drawn by
//! [`crate::plot`]).
//!
//! Everything here is a pure function of its inputs: no clock, no environment, no hash
//! order, so the same runs always give byte-identical text and files.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Number, Value};

use crate::catalog::Entry;
use crate::format::{format_number, render_params};
use crate::plot::{self, series_label};
use crate::result::{Basis, ExperimentInfo, Reference, Run};

mod document;
pub use document::write_report;

/// A simulated value is accepted when its relative error is at most this (±10 %).
pub const TOLERANCE: f64 = 0.10;

/// Slack on the tolerance border, so that a value that prints as "+10.0 %" is never
/// rejected by a rounding error of the division.
const TOLERANCE_SLACK: f64 = 1e-9;

/// Experiments with at most this many runs are always shown in full, even in compact mode:
/// eliding rows only pays off for long sweeps.
pub const COMPACT_MIN_RUNS: usize = 12;

/// One simulated metric value, with the published value it is compared with, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub experiment: String,
    pub config: String,
    /// The run's parameters rendered compactly, e.g. "bytes=64 MiB op=read".
    pub params: String,
    /// The metric name; an entry of an object-valued metric is "metric.key".
    pub metric: String,
    /// NaN when the run has no numeric value for it (printed "n/a", or `text`).
    pub simulated: f64,
    /// A string or boolean metric's value as written ("true", an error message); `None`
    /// for numbers.
    pub text: Option<String>,
    /// The published (low, high); low == high for a point value.
    pub published: Option<(f64, f64)>,
    /// Signed relative error against `published` (0 inside a range); `None` when there is
    /// no published value or no finite simulated value.
    pub error: Option<f64>,
    pub source: Option<&'static str>,
    /// Whether the published value was fitted on (calibration) or predicted; `None` when
    /// there is no published value.
    pub basis: Option<Basis>,
    /// The published value was printed under other parameters than its run used and is
    /// compared with the run it measured (`Reference::as_run`).
    pub as_run: bool,
}

impl Comparison {
    fn new(run: &Run, metric: String, simulated: f64, reference: Option<&Reference>) -> Self {
        // `Reference::error` maps NaN to 0 ("inside the range"): only judge real values.
        let error = reference
            .filter(|_| simulated.is_finite())
            .map(|r| r.error(simulated))
            .filter(|e| e.is_finite());
        let mut params = render_params(&run.params);
        // A point the study published under other parameters than it ran says so beside
        // the run it is compared with.
        if let Some(cell) = reference.and_then(Reference::published_as) {
            params = format!("{params} (published as {cell})");
        }
        Comparison {
            experiment: run.experiment.clone(),
            config: run.config.clone(),
            params,
            metric,
            simulated,
            text: None,
            published: reference.map(|r| (r.value, r.value_high)),
            error,
            source: reference.map(|r| r.source),
            basis: reference.map(|r| r.basis),
            as_run: reference.is_some_and(|r| !r.as_run.is_empty()),
        }
    }

    /// `Some(true)` when within ±[`TOLERANCE`], `Some(false)` when outside or not
    /// simulated, `None` when there is no published value.
    pub fn within_tolerance(&self) -> Option<bool> {
        self.published?;
        Some(self.error.is_some_and(within))
    }

    /// Whether a parameter was fitted on this row's published value.
    pub fn is_calibration(&self) -> bool {
        self.basis.is_some_and(Basis::is_calibration)
    }

    /// "✓" or "✗" for a published prediction; empty for a calibration point (reproducing
    /// it shows the fit, not the model) and without a published value.
    pub fn verdict(&self) -> &'static str {
        if self.is_calibration() {
            return "";
        }
        match self.within_tolerance() {
            Some(true) => "✓",
            Some(false) => "✗",
            None => "",
        }
    }

    /// The basis column: "calibration: <parameters>", "prediction", or empty without a
    /// published value.
    pub fn basis_text(&self) -> String {
        self.basis.map(Basis::label).unwrap_or_default()
    }

    /// The simulated column: a number with [`format_number`] ("n/a" for none), or a
    /// string or boolean metric as written.
    pub fn simulated_text(&self) -> String {
        match &self.text {
            Some(t) => t.clone(),
            None => format_number(self.simulated),
        }
    }

    /// The published column: a point, a range "550–580", or "—" when nothing is published
    /// (the model's own number).
    pub fn published_text(&self) -> String {
        match self.published {
            None => "—".to_string(),
            Some((lo, hi)) if lo == hi => format_number(lo),
            Some((lo, hi)) => format!("{}–{}", format_number(lo), format_number(hi)),
        }
    }

    /// The error column: "+3.2 %", "-12.0 %", "0.0 %", "n/a", or empty without a published
    /// value.
    pub fn error_text(&self) -> String {
        match (self.published, self.error) {
            (None, _) => String::new(),
            (Some(_), None) => "n/a".to_string(),
            (Some(_), Some(e)) => format_percent(e),
        }
    }
}

fn within(error: f64) -> bool {
    error.abs() <= TOLERANCE + TOLERANCE_SLACK
}

/// `{"results": [{"experiment", "config", "params", "metrics", "published"?}]}` in run
/// order, exactly as docs/cli.md's `--format json` contract shapes it.
///
/// `published` is present only on rows with a published value among `refs`:
/// `{METRIC: {"value": V, "basis": "calibration" | "prediction"}}`, where V is the published
/// point or the low end of a published range; when several references apply to one
/// metric of a row, the first in `refs` order is given.
pub fn results_json(runs: &[Run], refs: &[Reference]) -> Value {
    let results = runs
        .iter()
        .map(|run| {
            let mut o = Map::new();
            o.insert("experiment".into(), Value::String(run.experiment.clone()));
            o.insert("config".into(), Value::String(run.config.clone()));
            o.insert("params".into(), Value::Object(run.params.clone()));
            o.insert("metrics".into(), Value::Object(run.metrics.clone()));
            let published = published_json(run, refs);
            if !published.is_empty() {
                o.insert("published".into(), Value::Object(published));
            }
            Value::Object(o)
        })
        .collect();
    let mut top = Map::new();
    top.insert("results".into(), Value::Array(results));
    Value::Object(top)
}

/// The JSON of `nudma reproduce --format json`: [`results_json`] plus `"units":
/// {EXPERIMENT: {METRIC: UNIT}}`, the unit of each of the experiments' metrics that has one
/// (`ExperimentInfo::units`: "Gb/s", "GB/s", "ns", …; counts, fractions and ratios have
/// none), and, when any of the catalog experiments asked for (every one when nothing was
/// named) is not implemented by this build, `"not_implemented": [{"id", "title"}]` in
/// catalog order. Like a row's `published`, a key is left out when there is nothing to say.
pub fn reproduce_json(
    runs: &[Run],
    refs: &[Reference],
    infos: &[ExperimentInfo],
    not_implemented: &[&Entry],
) -> Value {
    let mut v = results_json(runs, refs);
    let units: Map<String, Value> = infos
        .iter()
        .filter(|i| !i.units.is_empty() && runs.iter().any(|r| r.experiment == i.id))
        .map(|i| {
            let per: Map<String, Value> = i
                .units
                .iter()
                .map(|(m, u)| (m.to_string(), Value::from(*u)))
                .collect();
            (i.id.to_string(), Value::Object(per))
        })
        .collect();
    if let (Value::Object(top), false) = (&mut v, units.is_empty()) {
        top.insert("units".into(), Value::Object(units));
    }
    if not_implemented.is_empty() {
        return v;
    }
    let list = not_implemented
        .iter()
        .map(|e| serde_json::json!({ "id": e.id, "title": e.title }))
        .collect();
    if let Value::Object(top) = &mut v {
        top.insert("not_implemented".into(), Value::Array(list));
    }
    v
}

/// The `published` object of one result row: metric → `{"value", "basis"}` for the first
/// reference in `refs` that applies to it.
fn published_json(run: &Run, refs: &[Reference]) -> Map<String, Value> {
    let mut out = Map::new();
    for r in refs.iter().filter(|r| r.applies(run)) {
        if out.contains_key(r.metric) {
            continue;
        }
        let mut entry = Map::new();
        entry.insert("value".into(), json_number(r.value));
        entry.insert("basis".into(), Value::String(r.basis.as_str().into()));
        out.insert(r.metric.to_string(), Value::Object(entry));
    }
    out
}

/// A published value as a JSON number: whole values as integers (as counts like `hops`
/// are in the metrics), a non-finite one as null (JSON has no NaN).
fn json_number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::Number(Number::from(x as i64))
    } else {
        Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// One row per (run, reference that applies to it), in run order then reference order.
pub fn comparison_rows(runs: &[Run], refs: &[Reference]) -> Vec<Comparison> {
    runs.iter()
        .flat_map(|run| {
            refs.iter().filter(|r| r.applies(run)).map(move |r| {
                let simulated = run.metrics.get(r.metric).map_or(f64::NAN, numeric);
                Comparison::new(run, r.metric.to_string(), simulated, Some(r))
            })
        })
        .collect()
}

/// Every numeric metric of every run (run order, then metric name order), each with the
/// references that apply to it, or once with no published value ("predicted").
///
/// A null metric is kept as NaN ("n/a": JSON cannot carry NaN, so a NaN metric arrives as
/// null); a string or boolean metric is one row with its value as written (`text`); an
/// object of numbers (e.g. per-link bandwidth) gives one row per entry, "metric.key";
/// lists are left to the JSON output.
pub fn metric_rows(runs: &[Run], refs: &[Reference]) -> Vec<Comparison> {
    runs.iter()
        .flat_map(|run| run_metric_rows(run, refs))
        .collect()
}

/// [`metric_rows`] of one run.
fn run_metric_rows(run: &Run, refs: &[Reference]) -> Vec<Comparison> {
    let mut rows = Vec::new();
    for (name, value) in &run.metrics {
        let applying: Vec<&Reference> = refs
            .iter()
            .filter(|r| r.metric == name && r.applies(run))
            .collect();
        match value {
            Value::Number(_) | Value::Null => {
                let v = numeric(value);
                if applying.is_empty() {
                    rows.push(Comparison::new(run, name.clone(), v, None));
                }
                for r in &applying {
                    rows.push(Comparison::new(run, name.clone(), v, Some(r)));
                }
            }
            Value::String(_) | Value::Bool(_) => {
                let text = match value {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                let with_text = |mut c: Comparison| {
                    c.text = Some(text.clone());
                    c
                };
                if applying.is_empty() {
                    rows.push(with_text(Comparison::new(
                        run,
                        name.clone(),
                        f64::NAN,
                        None,
                    )));
                }
                for r in &applying {
                    rows.push(with_text(Comparison::new(
                        run,
                        name.clone(),
                        f64::NAN,
                        Some(r),
                    )));
                }
            }
            _ => {
                // A published value for a list or object metric still shows, as "n/a".
                for r in &applying {
                    rows.push(Comparison::new(run, name.clone(), f64::NAN, Some(r)));
                }
                if let Value::Object(entries) = value {
                    for (key, v) in entries {
                        if matches!(v, Value::Number(_) | Value::Null) {
                            let metric = format!("{name}.{key}");
                            rows.push(Comparison::new(run, metric, numeric(v), None));
                        }
                    }
                }
            }
        }
    }
    rows
}

/// A metric value as a number; NaN for null and anything non-numeric.
fn numeric(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// "N published values: C calibration points (worst: …), P predictions: M within ±10 %,
/// K outside (worst: …)".
///
/// Calibration points and predictions are counted apart: a calibration point reproduced
/// within tolerance only shows the fit, so it is never counted as within (or outside);
/// each group gives its largest error. A prediction without a simulated value counts as
/// outside; the line ends with how many published values had none.
pub fn summary_line(comparisons: &[Comparison]) -> String {
    let published: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| c.published.is_some())
        .collect();
    let (calibration, predictions): (Vec<&Comparison>, Vec<&Comparison>) =
        published.iter().partition(|c| c.is_calibration());
    let inside = predictions
        .iter()
        .filter(|c| c.within_tolerance() == Some(true))
        .count();
    let missing = published.iter().filter(|c| c.error.is_none()).count();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut line = format!(
        "{}: {}",
        plural(published.len(), "published value", "published values"),
        plural(calibration.len(), "calibration point", "calibration points"),
    );
    line.push_str(&worst_text(&calibration));
    let _ = write!(
        line,
        ", {}: {} within ±{} %, {} outside",
        plural(predictions.len(), "prediction", "predictions"),
        inside,
        format_number(TOLERANCE * 100.0),
        predictions.len() - inside
    );
    line.push_str(&worst_text(&predictions));
    // Root and hop counts come straight from the fabric's structure: say how many of the
    // predictions they are, so that they do not pass for timing results.
    // Table sizes found by filling a table until it refuses (smartio.limits) are not
    // timing either.
    let counts = predictions
        .iter()
        .filter(|c| {
            let m = c.metric.as_str();
            m == "hops" || m == "roots" || m.ends_with("_hops") || m.ends_with("_roots")
        })
        .count();
    let tables = predictions
        .iter()
        .filter(|c| matches!(c.metric.as_str(), "max_borrowed" | "max_windows"))
        .count();
    let timing = predictions.len() - counts - tables;
    match (counts, tables) {
        (0, 0) => {}
        (_, 0) => {
            let _ = write!(
                line,
                "; {counts} of the predictions are path counts (hops, roots), {timing} timing"
            );
        }
        _ => {
            let _ = write!(
                line,
                "; of the predictions {counts} are path counts (hops, roots), {tables} table \
                 sizes (max_borrowed, max_windows), {timing} timing"
            );
        }
    }
    let as_run = published.iter().filter(|c| c.as_run).count();
    if as_run > 0 {
        let _ = write!(
            line,
            "; {} compared with the run the study actually made (marked \"published as\")",
            plural(as_run, "published value", "published values")
        );
    }
    if missing > 0 {
        let _ = write!(line, "; {missing} without a simulated value");
    }
    line
}

/// " (worst: <experiment> <config> <params> <metric> <error>)" of the largest error among
/// `rows`; empty when none has one.
fn worst_text(rows: &[&Comparison]) -> String {
    let worst = rows
        .iter()
        .filter_map(|c| c.error.map(|e| (e, *c)))
        .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()));
    match worst {
        None => String::new(),
        Some((e, c)) => {
            let mut what = format!("{} {}", c.experiment, c.config);
            if !c.params.is_empty() {
                what.push(' ');
                what.push_str(&c.params);
            }
            format!(" (worst: {what} {} {})", c.metric, format_percent(e))
        }
    }
}

/// How [`table_with`] lays out the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// For sweeps with an x parameter and more than [`COMPACT_MIN_RUNS`] runs, show only
    /// rows with a published value plus each series' largest x (a series is the config
    /// and every other parameter), and say how many rows were elided.
    pub compact: bool,
}

/// The full human table printed by `reproduce`: one block per experiment (in run order),
/// then the summary line.
pub fn table(runs: &[Run], refs: &[Reference], infos: &[ExperimentInfo]) -> String {
    table_with(runs, refs, infos, TableOptions::default())
}

/// [`table`] with options (compact mode for long sweeps).
pub fn table_with(
    runs: &[Run],
    refs: &[Reference],
    infos: &[ExperimentInfo],
    options: TableOptions,
) -> String {
    let mut out = String::new();
    if runs.is_empty() {
        out.push_str("no results\n");
    }
    for (id, block) in group_by_experiment(runs) {
        let info = infos.iter().find(|i| i.id == id);
        match info {
            Some(i) if !i.description.is_empty() => {
                let _ = writeln!(out, "{id} — {}", i.description);
                if !i.mechanism.is_empty() {
                    let _ = writeln!(out, "  why: {}", i.mechanism);
                }
            }
            _ => {
                let _ = writeln!(out, "{id}");
            }
        }
        let x_param = info.and_then(|i| i.x_param);
        let keep_largest = match x_param {
            Some(x) if options.compact && block.len() > COMPACT_MIN_RUNS => {
                Some(largest_per_series(&block, x))
            }
            _ => None,
        };
        let mut lines = Vec::new();
        let mut total = 0usize;
        for (k, run) in block.iter().enumerate() {
            for row in run_metric_rows(run, refs) {
                total += 1;
                let shown = match &keep_largest {
                    None => true,
                    Some(keep) => keep[k] || row.published.is_some(),
                };
                if shown {
                    lines.push(vec![
                        row.config.clone(),
                        row.params.clone(),
                        row.metric.clone(),
                        unit_text(info, &row.metric),
                        row.simulated_text(),
                        row.published_text(),
                        row.error_text(),
                        row.basis_text(),
                        row.verdict().to_string(),
                    ]);
                }
            }
        }
        if total == 0 {
            out.push_str("  (no numeric metrics)\n");
        } else {
            let header = [
                "config",
                "params",
                "metric",
                "unit",
                "simulated",
                "published",
                "error",
                "basis",
                "",
            ];
            let align = [L, L, L, L, R, R, R, L, L];
            out.push_str(&text_table(&header, &align, &lines, "  "));
        }
        let elided = total - lines.len();
        if elided > 0 {
            let _ = writeln!(
                out,
                "  … {elided} of {total} rows elided (shown: rows with a published value and \
                 the largest {} per series; all rows are in --format json and the report)",
                x_param.unwrap_or("x")
            );
        }
        out.push('\n');
    }
    out.push_str(&summary_line(&comparison_rows(runs, refs)));
    out.push('\n');
    out
}

/// A metric row's unit as its experiment states it ("" without one).
fn unit_text(info: Option<&ExperimentInfo>, metric: &str) -> String {
    info.and_then(|i| i.unit(metric))
        .unwrap_or_default()
        .to_string()
}

/// Runs grouped by experiment, experiments in order of first appearance.
fn group_by_experiment(runs: &[Run]) -> Vec<(&str, Vec<&Run>)> {
    let mut groups: Vec<(&str, Vec<&Run>)> = Vec::new();
    for run in runs {
        match groups.iter_mut().find(|(id, _)| *id == run.experiment) {
            Some((_, g)) => g.push(run),
            None => groups.push((&run.experiment, vec![run])),
        }
    }
    groups
}

/// For each run of `block`, whether it has the largest `x` of its series (the last one
/// seen when `x` is missing or not a number, so every series keeps one run).
fn largest_per_series(block: &[&Run], x: &str) -> Vec<bool> {
    let mut best: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    for (k, run) in block.iter().enumerate() {
        let v = run
            .params
            .get(x)
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN);
        let entry = best.entry(series_label(run, x)).or_insert((k, v));
        // NaN compares false, so a numeric x always wins over a non-numeric one.
        if v >= entry.1 || entry.1.is_nan() {
            *entry = (k, v);
        }
    }
    let mut keep = vec![false; block.len()];
    for (k, _) in best.values() {
        keep[*k] = true;
    }
    keep
}

#[derive(Clone, Copy, PartialEq)]
enum Align {
    Left,
    Right,
}
const L: Align = Align::Left;
const R: Align = Align::Right;

/// Plain-text columns padded by character count (the table has "–", "✓" and "µ").
fn text_table(header: &[&str], align: &[Align], rows: &[Vec<String>], indent: &str) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::from(indent);
        for (k, cell) in cells.enumerate() {
            if k > 0 {
                s.push_str("  ");
            }
            let pad = widths[k].saturating_sub(cell.chars().count());
            if align[k] == R {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    // No rule under an unnamed column (the ✓/✗ one): a lone "-" there reads as a value.
    let rules: Vec<String> = widths
        .iter()
        .zip(header)
        .map(|(w, h)| {
            if h.is_empty() {
                String::new()
            } else {
                "-".repeat(*w)
            }
        })
        .collect();
    line(&mut rules.iter().map(String::as_str));
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// A relative error as a signed percentage with one decimal: "+3.2 %", "-12.0 %", "0.0 %".
pub fn format_percent(error: f64) -> String {
    if !error.is_finite() {
        return "n/a".to_string();
    }
    let p = error * 100.0;
    if p.abs() < 0.05 {
        "0.0 %".to_string()
    } else {
        format!("{p:+.1} %")
    }
}

/// Writes `counters.json` into `dir` when any run carries counters:
/// `{"counters": [{"experiment", "config", "params", "counters": {metric: {…}}}]}`.
pub fn write_counters(dir: &Path, runs: &[Run]) -> io::Result<Option<PathBuf>> {
    let items: Vec<Value> = runs
        .iter()
        .filter(|r| !r.counters.is_empty())
        .map(|r| {
            serde_json::json!({
                "experiment": r.experiment,
                "config": r.config,
                "params": r.params,
                "counters": r.counters,
            })
        })
        .collect();
    if items.is_empty() {
        return Ok(None);
    }
    fs::create_dir_all(dir)?;
    let path = dir.join("counters.json");
    let text = serde_json::to_string_pretty(&serde_json::json!({ "counters": items }))
        .map_err(io::Error::other)?;
    fs::write(&path, text)?;
    Ok(Some(path))
}
