//! Catalog experiments as files (`scenarios/experiments/*.toml`, embedded): which hardware
//! (a scenario and `--set`-style overrides per config, or per metric), which parameter
//! sweep, which measurements give which metric, and the published values with their
//! basis. `nudma reproduce` runs the built-in files and any file a user names; `nudma run
//! FILE` runs one too, so a user copies an experiment, changes the hardware, and runs it.
//!
//! A metric names one of the file's own `[[workload]]`s (`nudma run`'s schema, with a
//! `[measure]` window) and the metric of its row:
//!
//! ```toml
//! [sweep]
//! msg_bytes = [64, 1500, 65536]      # plain integers; `bytes` takes sizes or { from, to }
//! io = ["memcached", "netperf"]      # or words (all of one sweep the same kind)
//!
//! [sweep_vars.io]                    # placeholders that follow a swept value
//! memcached = { instances = 6, connections = 0 }
//! netperf = { instances = 0, connections = 6 }
//!
//! [[workload]]                       # run together per config and point, by `nudma run`
//! name = "netperf"
//! kind = "netperf"
//! msg_bytes = "{msg_bytes}"          # swept values and config vars, in any string;
//! connections = "{connections}"      # one that is only a number or a boolean is it
//! nic_mode = "{mode}"
//! # …
//! [measure]
//! warmup = "3 ms"
//! duration = "10 ms"
//!
//! [[metric]]
//! name = "throughput_gbps"            # the catalog's name (ioctopus: Gb/s)
//! workload = "netperf"               # a [[workload]] of this file (or several,
//! field = "throughput_gbit_s"        # ["a", "b"]: the sum) and the metric of its row,
//!                                    # whose name ends in its unit (the metric's unit)
//! baseline = { without = ["ant"] }   # optional: ÷ the same field of another run (or
//! ratio = "value / baseline"         #   `params = { clients = 1 }`); or the inverse
//! scenario = "other"                 # optional: other hardware for this metric…
//! set = { "host.lender.iommu" = true }   # …and overrides after the config's
//!
//! [[metric]]
//! name = "upi_util"
//! counter = "interconnect_util"      # a counter of the run of all the workloads
//! ```
//!
//! The workloads run once per (config hardware, sweep point, metric hardware, resolved
//! workloads): every metric naming that run takes its value from it, and configs whose
//! hardware is the same share a run their vars do not change. Values may be numbers,
//! strings, booleans or null. Swept parameters appear in each row's `params` under their
//! names, as numbers or as the words written; several are swept as their product.
//!
//! This file owns the file's schema, its sweep and the runs; beside it: `checks` (what a
//! file must satisfy as it is read), `hardware` (the scenario a config names), `workloads`
//! (its workloads run as `nudma run` runs them).

use std::collections::{BTreeMap, BTreeSet};

use fabric::scenario::Source;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use toml::Spanned;

use crate::format::{is_size_param, unit_of};
use crate::harness::RunError;
use crate::result::{ExperimentInfo, Reference, Run};
use crate::run::overrides::{self, Override, Point};
use checks::{check_placeholders, published_reference, sweep_vars};
pub(crate) use hardware::Hardware;
use workloads::{counter_metric, run_workloads, workload_metric, WORKLOADS_ARG};

mod checks;
mod hardware;
mod workloads;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    experiment: Meta,
    #[serde(default)]
    sweep: BTreeMap<String, Spanned<SweepRaw>>,
    config: Vec<Config>,
    metric: Vec<Metric>,
    #[serde(default)]
    published: Vec<Published>,
    /// Workloads in `nudma run`'s schema, run together on each config's hardware at each
    /// point; `{name}` in their strings is a config var or a swept value.
    #[serde(default)]
    workload: Vec<toml::Table>,
    measure: Option<toml::Table>,
    /// Placeholders whose values follow a swept parameter's value:
    /// `sweep_vars.PARAM.VALUE = { name = "text", … }`.
    #[serde(default)]
    sweep_vars: SweepVarsRaw,
}

/// `[sweep_vars]` as written: per swept parameter, per value, its vars.
type SweepVarsRaw = BTreeMap<String, Spanned<BTreeMap<String, BTreeMap<String, toml::Value>>>>;

/// Per swept parameter, per value (as substituted), the vars that value brings.
type SweepVars = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// Values of a swept parameter as written: a list, or powers of two from `from` to `to`;
/// each value keeps its place for errors.
enum SweepRaw {
    List(Vec<Spanned<toml::Value>>),
    Powers(PowersRaw),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PowersRaw {
    from: Spanned<toml::Value>,
    to: Spanned<toml::Value>,
}

// By hand rather than `untagged`, so that a bad value inside is reported as itself (with
// its place) instead of "did not match any variant".
impl<'de> Deserialize<'de> for SweepRaw {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SweepRaw;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a list of values (sizes for `bytes`, integers otherwise), or { from, to } (powers of two)",
                )
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<SweepRaw, A::Error> {
                Vec::<Spanned<toml::Value>>::deserialize(
                    serde::de::value::SeqAccessDeserializer::new(a),
                )
                .map(SweepRaw::List)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<SweepRaw, A::Error> {
                PowersRaw::deserialize(serde::de::value::MapAccessDeserializer::new(a))
                    .map(SweepRaw::Powers)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    id: String,
    description: String,
    /// The measurement window used, for the report.
    window: String,
    /// The mechanism behind its predictions, in a sentence or two (printed by `reproduce`).
    #[serde(default)]
    mechanism: String,
    /// The sweep parameter on the x axis of the plot, and whether it is log2.
    x: Option<String>,
    #[serde(default)]
    x_log2: bool,
    plot: Vec<String>,
    /// Moments marked on the plot's x axis (`marks = [{ x = 45, label = "…" }]`).
    #[serde(default)]
    marks: Vec<MarkRaw>,
    /// Configs of the study that this file does not run yet (`reproduce` says so).
    #[serde(default)]
    not_implemented: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkRaw {
    x: f64,
    label: String,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Config {
    name: Spanned<String>,
    /// A built-in scenario name or a file.
    scenario: String,
    /// Scenario keys to override, as `--set` takes them (`"host.lender.iommu" = true`).
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
    /// Words substituted as `{name}` into the metrics' arguments.
    #[serde(default)]
    vars: BTreeMap<String, String>,
    /// Faults this config's hardware suffers (`[[config.fault]]`, a scenario's `[[fault]]`
    /// schema), added to its workloads' runs.
    #[serde(default)]
    fault: Vec<toml::Table>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Metric {
    name: Spanned<String>,
    /// A `[[workload]]` of this file, whose metric `field` this metric reports (several:
    /// the sum of their `field`s).
    workload: Option<Spanned<toml::Value>>,
    /// Which of the workload's metrics this metric reports.
    field: Option<Spanned<String>>,
    /// Measured once per config (it does not depend on the sweep).
    #[serde(default)]
    once: bool,
    /// Other hardware than the config's for this metric: a scenario in place of the
    /// config's (whose `set` then does not apply), and overrides after the config's.
    scenario: Option<String>,
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
    /// A workload metric's value relative to the same field in another run.
    baseline: Option<Spanned<BaselineRaw>>,
    /// `"value / baseline"` (the default) or `"baseline / value"`.
    ratio: Option<Spanned<String>>,
    /// A counter of the run of all the file's workloads, in place of `workload`.
    counter: Option<Spanned<String>>,
}

/// A metric's baseline as written: the run without some workloads, or at other values
/// of swept parameters (or both).
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct BaselineRaw {
    #[serde(default)]
    without: Vec<String>,
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
}

/// A metric's baseline run: its workloads' text (unresolved), the swept values it
/// replaces, and whether the ratio is baseline ÷ value.
#[derive(Clone, Debug)]
struct Baseline {
    args: BTreeMap<String, String>,
    params: Vec<(String, SweepValue)>,
    inverted: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Published {
    config: Option<String>,
    /// Integers, sizes (for size parameters) or words, as the sweep writes them.
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
    /// Parameter values the published run actually used, where they differ from `params`
    /// (a study's configuration error); `source` must say why.
    #[serde(default)]
    as_run: BTreeMap<String, toml::Value>,
    metric: String,
    value: f64,
    /// The high end of a published range.
    high: Option<f64>,
    basis: String,
    /// For a calibration point: the parameters fitted on it.
    #[serde(default)]
    parameters: Vec<String>,
    source: String,
}

/// A loaded experiment file.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub info: ExperimentInfo,
    pub references: Vec<Reference>,
    /// Swept parameters in name order, each with its values; the points are their
    /// product (the first name varies slowest).
    sweep: Vec<(String, Vec<SweepValue>)>,
    configs: Vec<ConfigSpec>,
    metrics: Vec<MetricSpec>,
    sweep_vars: SweepVars,
    /// What runs a metric's workloads (`run_workloads`; tests give their own).
    runner: Runner,
}

/// Runs an experiment's workloads (their resolved TOML) on a config's hardware.
pub(crate) type Runner = fn(&Hardware, &str) -> Result<Outcome, RunError>;

/// A run's values by name (`WORKLOAD.METRIC`, `@COUNTER`).
pub type Fields = BTreeMap<String, Value>;

impl ConfigSpec {
    /// What a config's runs depend on besides their arguments: its scenario, overrides
    /// and faults (its vars reach the runs through their resolved arguments).
    fn hardware(&self) -> String {
        format!("{} {:?} {}", self.scenario, self.set, self.faults)
    }
}

#[derive(Clone, Debug)]
struct ConfigSpec {
    name: String,
    scenario: String,
    set: Vec<(String, toml::Value)>,
    vars: BTreeMap<String, String>,
    /// The config's `[[fault]]` tables as TOML text ("" without any).
    faults: String,
}

#[derive(Clone, Debug)]
struct MetricSpec {
    name: String,
    field: String,
    args: BTreeMap<String, String>,
    once: bool,
    scenario: Option<String>,
    set: Vec<(String, toml::Value)>,
    baseline: Option<Baseline>,
}

/// One value of a swept parameter: an integer (a count; a size in bytes) or a word (a
/// direction, a mode). One parameter's values are all of one kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SweepValue {
    Int(u64),
    Word(String),
}

impl SweepValue {
    fn json(&self) -> Value {
        match self {
            SweepValue::Int(n) => json!(n),
            SweepValue::Word(w) => json!(w),
        }
    }

    /// As substituted for `{name}` in an argument.
    fn text(&self) -> String {
        match self {
            SweepValue::Int(n) => n.to_string(),
            SweepValue::Word(w) => w.clone(),
        }
    }
}

/// One sweep point: a value per swept parameter.
type SweepPoint = Vec<(String, SweepValue)>;

/// One run an experiment's rows need: its config (index), key, metric and resolved
/// arguments.
struct Job<'e> {
    config: usize,
    key: RunKey,
    metric: &'e MetricSpec,
    args: BTreeMap<String, String>,
}

/// A run a metric's value needs: its key and resolved arguments.
type Need = (RunKey, BTreeMap<String, String>);

/// What identifies one run within a config's hardware: the metric's hardware, the
/// resolved workloads and the sweep point (none for `once` metrics).
type RunKey = (String, Vec<(String, String)>, Option<SweepPoint>);

/// One run: its fields and the hardware counters it left.
pub(crate) struct Outcome {
    fields: Fields,
    counters: Option<Value>,
}

/// The report types borrow `'static` text: an experiment file is read once per process.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn powers(from: u64, to: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = from.max(1);
    while s <= to {
        v.push(s);
        s = s.saturating_mul(2);
    }
    v
}

/// `file:line:col` of a span of `src`.
fn place(src: &Source, span: std::ops::Range<usize>) -> String {
    let start = span.start.min(src.text.len());
    let before = src.text.get(..start).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{}:{line}:{col}", src.name)
}

/// The `{name}` placeholders of an argument, in order.
fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

/// The values of one swept parameter (`sweep.NAME`): a list, or powers of two
/// `{ from, to }`. `bytes` and `*_bytes` take sizes (`"4 KiB"`, integers of bytes); any
/// other name a list of plain non-negative integers or a list of words, not both. Errors
/// are located at the value, with its key.
fn sweep_values(
    src: &Source,
    name: &str,
    raw: &Spanned<SweepRaw>,
) -> Result<Vec<SweepValue>, RunError> {
    let sizes = is_size_param(name);
    let located = |x: &Spanned<toml::Value>, key: &str, m: String| {
        RunError(format!("{}: {m} (key `{key}`)", place(src, x.span())))
    };
    let int = |x: &Spanned<toml::Value>, key: String| -> Result<u64, RunError> {
        let r = match x.get_ref() {
            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
            toml::Value::Integer(i) => Err(format!("{i} is negative")),
            toml::Value::String(s) if sizes => fabric::units::parse_size(s),
            toml::Value::String(s) => Err(format!(
                "\"{s}\" is not a plain integer (sizes are for `bytes` and `*_bytes`)"
            )),
            other => Err(format!(
                "{other} is not {}",
                if sizes { "a size" } else { "a plain integer" }
            )),
        };
        r.map_err(|m| located(x, &key, m))
    };
    match raw.get_ref() {
        SweepRaw::List(list) if list.is_empty() => Err(RunError(format!(
            "{}: sweep `{name}` has no values (key `sweep.{name}`)",
            place(src, raw.span())
        ))),
        // Words: the first value (of a parameter that is not a size) is a string.
        SweepRaw::List(list) if !sizes && matches!(list[0].get_ref(), toml::Value::String(_)) => {
            let first = list[0].get_ref();
            list.iter()
                .enumerate()
                .map(|(i, x)| {
                    let key = format!("sweep.{name}[{i}]");
                    match x.get_ref() {
                        toml::Value::String(w) if w.trim().is_empty() => {
                            Err(located(x, &key, "an empty word".into()))
                        }
                        toml::Value::String(w) => Ok(SweepValue::Word(w.clone())),
                        other => Err(located(
                            x,
                            &key,
                            format!(
                                "{other} is not a word, but sweep `{name}` starts with the word {first}: one sweep is all integers or all words"
                            ),
                        )),
                    }
                })
                .collect()
        }
        SweepRaw::List(list) => {
            let first = list[0].get_ref();
            list.iter()
                .enumerate()
                .map(|(i, x)| {
                    let key = format!("sweep.{name}[{i}]");
                    match x.get_ref() {
                        toml::Value::String(s) if !sizes && i > 0 => Err(located(
                            x,
                            &key,
                            format!(
                                "\"{s}\" is a word, but sweep `{name}` starts with the integer {first}: one sweep is all integers or all words (sizes are for `bytes` and `*_bytes`)"
                            ),
                        )),
                        _ => int(x, key).map(SweepValue::Int),
                    }
                })
                .collect()
        }
        SweepRaw::Powers(p) => Ok(powers(
            int(&p.from, format!("sweep.{name}.from"))?,
            int(&p.to, format!("sweep.{name}.to"))?,
        )
        .into_iter()
        .map(SweepValue::Int)
        .collect()),
    }
}

impl Experiment {
    /// Parses an experiment file; errors name the file, the line and what is wrong.
    pub fn parse(src: &Source) -> Result<Experiment, RunError> {
        Experiment::parse_with(src, run_workloads)
    }

    /// Makes the relative scenario paths of its configs and metrics relative to `dir`
    /// (the experiment file's folder) where a file is there, as a scenario's includes
    /// are; built-in names and other paths stay as written.
    pub fn resolve_scenarios_in(&mut self, dir: &std::path::Path) {
        let resolve = |s: &mut String| {
            let p = std::path::Path::new(s.as_str());
            if p.is_relative() && dir.join(p).is_file() {
                *s = dir.join(p).display().to_string();
            }
        };
        for c in &mut self.configs {
            resolve(&mut c.scenario);
        }
        for m in &mut self.metrics {
            if let Some(s) = &mut m.scenario {
                resolve(s);
            }
        }
    }

    /// Parses an experiment file whose workloads `runner` runs.
    pub(crate) fn parse_with(src: &Source, runner: Runner) -> Result<Experiment, RunError> {
        let f: File = toml::from_str(&src.text).map_err(|e| {
            let message = e.message().trim();
            let (at, key) = match e.span() {
                Some(s) => {
                    let start = s.start.min(src.text.len());
                    let key = fabric::keypath::key_of_error(&src.text, start, message)
                        .map(|k| format!(" (key `{k}`)"))
                        .unwrap_or_default();
                    (place(src, s)[src.name.len()..].to_string(), key)
                }
                None => (String::new(), String::new()),
            };
            RunError(format!("{}{at}: {message}{key}", src.name))
        })?;
        let bad = |m: String| RunError(format!("{}: {m}", src.name));
        let at = |span: std::ops::Range<usize>, m: String| {
            RunError(format!("{}: {m}", place(src, span)))
        };
        let id = leak(f.experiment.id);
        let mut info = ExperimentInfo {
            id,
            description: leak(f.experiment.description),
            x_param: f.experiment.x.map(leak),
            x_log2: f.experiment.x_log2,
            plot_metrics: f.experiment.plot.into_iter().map(leak).collect(),
            x_marks: f
                .experiment
                .marks
                .into_iter()
                .map(|m| (m.x, leak(m.label)))
                .collect(),
            window: leak(f.experiment.window),
            mechanism: leak(f.experiment.mechanism),
            configs_not_implemented: f.experiment.not_implemented.into_iter().map(leak).collect(),
            units: Vec::new(),
        };
        let mut sweep = Vec::new();
        for (k, v) in f.sweep {
            let values = sweep_values(src, &k, &v)?;
            sweep.push((k, values));
        }
        let sweep_vars = sweep_vars(f.sweep_vars, &sweep, &at)?;
        // Names whose values follow the sweep: its parameters and their vars.
        let swept: Vec<&str> = sweep
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(sweep_vars.values().flat_map(|per| {
                per.values()
                    .next()
                    .into_iter()
                    .flat_map(|vars| vars.keys().map(String::as_str))
            }))
            .collect();
        let configs: Vec<ConfigSpec> = f
            .config
            .into_iter()
            .map(|c| {
                if let Some(v) = c.vars.keys().find(|v| swept.contains(&v.as_str())) {
                    return Err(at(
                        c.name.span(),
                        format!(
                            "config `{}`: var `{v}` is also a swept parameter: `{{{v}}}` would mean either",
                            c.name.get_ref()
                        ),
                    ));
                }
                let faults = faults_text(&c.fault)
                    .map_err(|e| at(c.name.span(), format!("config `{}`: {e}", c.name.get_ref())))?;
                Ok(ConfigSpec {
                    name: c.name.into_inner(),
                    scenario: c.scenario,
                    set: c.set.into_iter().collect(),
                    vars: c.vars,
                    faults,
                })
            })
            .collect::<Result<_, RunError>>()?;
        let mut metrics: Vec<MetricSpec> = Vec::new();
        for m in f.metric {
            let name = m.name.get_ref().clone();
            if metrics.iter().any(|x| x.name == name) {
                return Err(at(
                    m.name.span(),
                    format!("metric `{name}` is defined twice"),
                ));
            }
            let (field, args, baseline) = match (&m.workload, &m.counter) {
                (Some(w), None) => workload_metric(
                    &f.workload,
                    f.measure.as_ref(),
                    &sweep,
                    w,
                    &m,
                    &name,
                    &at,
                )?,
                (None, Some(c)) => {
                    counter_metric(&f.workload, f.measure.as_ref(), c, &m, &name, &at)?
                }
                _ => {
                    return Err(at(
                        m.name.span(),
                        format!(
                            "metric `{name}`: name a `workload` of this file or a run `counter` (one of them)"
                        ),
                    ))
                }
            };
            check_placeholders(&name, &args, m.once, &swept, &configs, &at)?;
            // The unit its field names; a ratio to a baseline has none.
            let unit = match (&m.field, &m.counter) {
                _ if baseline.is_some() => None,
                (Some(f), _) | (None, Some(f)) => unit_of(f.get_ref()),
                (None, None) => None,
            };
            if let Some(u) = unit {
                info.units.push((leak(name.clone()), u));
            }
            metrics.push(MetricSpec {
                name,
                field,
                args: args.into_iter().map(|(k, v)| (k, v.into_inner())).collect(),
                once: m.once,
                scenario: m.scenario,
                set: m.set.into_iter().collect(),
                baseline,
            });
        }
        let references = f
            .published
            .into_iter()
            .map(|p| published_reference(p, id, &configs, &metrics, &bad))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Experiment {
            info,
            references,
            sweep,
            configs,
            metrics,
            sweep_vars,
            runner,
        })
    }

    /// Every point of the sweep: the product of the swept parameters' values (the first
    /// name varies slowest); one empty point when nothing is swept.
    fn points(&self) -> Vec<SweepPoint> {
        let mut pts: Vec<SweepPoint> = vec![Vec::new()];
        for (k, vs) in &self.sweep {
            pts = pts
                .into_iter()
                .flat_map(|p| {
                    vs.iter().map(move |v| {
                        let mut q = p.clone();
                        q.push((k.clone(), v.clone()));
                        q
                    })
                })
                .collect();
        }
        pts
    }

    /// Runs every config, sweep point and metric; `sets` override scenario keys of every
    /// config (after the config's own and the metric's). A run serves every metric that
    /// names it (see the module notes); a `once` metric's run serves every point. The
    /// distinct runs are independent simulations, so they run in parallel (rayon's
    /// current pool); rows and errors come out in the file's order whatever the pool.
    pub fn run(&self, sets: &[Override]) -> Result<Vec<Run>, RunError> {
        use rayon::prelude::*;
        let points = self.points();
        let user: Point = overrides::points(sets)
            .into_iter()
            .next()
            .unwrap_or_default();
        // Every run the rows need, once each, in the order the rows meet them.
        let mut jobs: Vec<Job> = Vec::new();
        // Configs with the same hardware share runs: a run that does not depend on what
        // else differs between them (a baseline without the workloads that do) runs once.
        let hardware: Vec<String> = self.configs.iter().map(ConfigSpec::hardware).collect();
        let mut seen: BTreeSet<(String, RunKey)> = BTreeSet::new();
        for (ci, c) in self.configs.iter().enumerate() {
            for point in &points {
                for m in &self.metrics {
                    for (key, args) in needs(c, m, point, &self.sweep_vars) {
                        if seen.insert((hardware[ci].clone(), key.clone())) {
                            jobs.push(Job {
                                config: ci,
                                key,
                                metric: m,
                                args,
                            });
                        }
                    }
                }
            }
        }
        let (keys, loaded) = hardware::load_each(self, &jobs, &user);
        let outcomes: Vec<Result<Outcome, RunError>> = jobs
            .par_iter()
            .zip(&keys)
            .map(|(j, k)| {
                let c = &self.configs[j.config];
                let hw = loaded[k].as_ref().map_err(|e| RunError(e.clone()))?;
                self.measure(c, j.metric, &j.args, hw)
            })
            .collect();
        let mut cache: BTreeMap<(String, RunKey), Outcome> = BTreeMap::new();
        for (j, outcome) in jobs.into_iter().zip(outcomes) {
            cache.insert((hardware[j.config].clone(), j.key), outcome?);
        }
        let mut out = Vec::new();
        for (ci, c) in self.configs.iter().enumerate() {
            for point in &points {
                let mut metrics = Map::new();
                let mut counters = Map::new();
                for m in &self.metrics {
                    let runs: Vec<&Outcome> = needs(c, m, point, &self.sweep_vars)
                        .into_iter()
                        .map(|(key, _)| &cache[&(hardware[ci].clone(), key)])
                        .collect();
                    let value = |o: &Outcome| {
                        workloads::field(&o.fields, &m.field).ok_or_else(|| self.no_field(c, m, o))
                    };
                    let mut v = value(runs[0])?;
                    if let (Some(b), Some(base)) = (&m.baseline, runs.get(1)) {
                        v = ratio(&v, &value(base)?, b.inverted).map_err(|e| {
                            RunError(format!(
                                "{}, config `{}`: metric `{}`: {e}",
                                self.info.id, c.name, m.name
                            ))
                        })?;
                    }
                    metrics.insert(m.name.clone(), v);
                    if let Some(cn) = &runs[0].counters {
                        counters.insert(m.name.clone(), cn.clone());
                    }
                }
                let mut params = Map::new();
                for (k, v) in point {
                    params.insert(k.clone(), v.json());
                }
                params.extend(overrides::params_of(&user));
                out.push(Run {
                    experiment: self.info.id.to_string(),
                    config: c.name.clone(),
                    params,
                    metrics,
                    counters,
                });
            }
        }
        Ok(out)
    }

    /// The error of a metric whose run did not give its field, naming what it gave.
    fn no_field(&self, c: &ConfigSpec, m: &MetricSpec, outcome: &Outcome) -> RunError {
        let gave: Vec<&str> = outcome.fields.keys().map(String::as_str).collect();
        RunError(format!(
            "{}, config `{}`: metric `{}`: the workloads gave no metric `{}` (it gave: {})",
            self.info.id,
            c.name,
            m.name,
            m.field,
            gave.join(", ")
        ))
    }

    /// What makes two metrics of one config the same run.
    fn run_key(m: &MetricSpec, args: &BTreeMap<String, String>, point: &SweepPoint) -> RunKey {
        (
            format!("{:?} {:?}", m.scenario, m.set),
            args.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            (!m.once).then(|| point.clone()),
        )
    }

    /// One run of a metric's workloads on a fresh copy of its hardware.
    fn measure(
        &self,
        c: &ConfigSpec,
        m: &MetricSpec,
        args: &BTreeMap<String, String>,
        hw: &Hardware,
    ) -> Result<Outcome, RunError> {
        (self.runner)(hw, &args[WORKLOADS_ARG]).map_err(|e| self.in_metric(c, m, e))
    }

    /// An error of a metric's run, naming the experiment, config and metric.
    fn in_metric(&self, c: &ConfigSpec, m: &MetricSpec, e: RunError) -> RunError {
        let what = format!("{}, config `{}`: metric `{}`", self.info.id, c.name, m.name);
        RunError(format!("{what}: {}", e.0))
    }
}

/// Where a parse error is: a span of the file and the message.
type At<'a> = &'a dyn Fn(std::ops::Range<usize>, String) -> RunError;

/// The runs a metric's value at `point` needs: its own, then its baseline's.
fn needs(c: &ConfigSpec, m: &MetricSpec, point: &SweepPoint, sv: &SweepVars) -> Vec<Need> {
    let args = resolve_args(c, &m.args, point, sv);
    let mut runs = vec![(Experiment::run_key(m, &args, point), args)];
    if let Some(b) = &m.baseline {
        let mut at = point.clone();
        for (k, v) in &b.params {
            for p in at.iter_mut().filter(|p| &p.0 == k) {
                p.1 = v.clone();
            }
        }
        let args = resolve_args(c, &b.args, &at, sv);
        runs.push((Experiment::run_key(m, &args, &at), args));
    }
    runs
}

/// `value ÷ base` (`base ÷ value` when `inverted`); null when either is null or the
/// divisor is zero (a baseline that did nothing: a ratio to it means nothing).
fn ratio(value: &Value, base: &Value, inverted: bool) -> Result<Value, String> {
    if value.is_null() || base.is_null() {
        return Ok(Value::Null);
    }
    let (Some(v), Some(b)) = (value.as_f64(), base.as_f64()) else {
        return Err(format!(
            "a ratio of {value} to a baseline of {base}: not numbers"
        ));
    };
    let (num, den) = if inverted { (b, v) } else { (v, b) };
    Ok(if den == 0.0 {
        Value::Null
    } else {
        json!(num / den)
    })
}

/// A metric's arguments with the config's vars and the point's swept values substituted
/// for `{name}` (the file was checked: every placeholder is one or the other).
fn resolve_args(
    c: &ConfigSpec,
    raw_args: &BTreeMap<String, String>,
    point: &[(String, SweepValue)],
    sv: &SweepVars,
) -> BTreeMap<String, String> {
    let follow: Vec<(&String, String)> = point
        .iter()
        .filter_map(|(k, v)| sv.get(k).and_then(|per| per.get(&v.text())))
        .flat_map(|vars| vars.iter().map(|(var, val)| (var, val.clone())))
        .collect();
    raw_args
        .iter()
        .map(|(k, raw)| {
            let values = c
                .vars
                .iter()
                .map(|(var, val)| (var, val.clone()))
                .chain(point.iter().map(|(var, val)| (var, val.text())))
                .chain(follow.iter().cloned());
            let mut s = raw.clone();
            for (var, val) in values {
                if is_plain_number(&val) || val == "true" || val == "false" {
                    // In workloads' TOML a string that is only a placeholder of a number
                    // or a boolean becomes that value (`threads = "{threads}"`).
                    s = s.replace(&format!("\"{{{var}}}\""), &val);
                }
                s = s.replace(&format!("{{{var}}}"), &val);
            }
            (k.clone(), s)
        })
        .collect()
}

/// Digits with at most one inner decimal point: a TOML integer or float as written.
fn is_plain_number(s: &str) -> bool {
    let (int, frac) = s.split_once('.').unwrap_or((s, "0"));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    digits(int) && digits(frac)
}

fn toml_to_edit(v: &toml::Value) -> toml_edit::Value {
    v.to_string()
        .parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(v.to_string()))
}

/// A config's `[[config.fault]]` tables as a scenario's `[[fault]]` text.
fn faults_text(faults: &[toml::Table]) -> Result<String, String> {
    if faults.is_empty() {
        return Ok(String::new());
    }
    let mut doc = toml::Table::new();
    let list = faults.iter().cloned().map(toml::Value::Table).collect();
    doc.insert("fault".into(), toml::Value::Array(list));
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// The built-in experiment files, parsed once.
pub fn builtin() -> &'static [Experiment] {
    static ALL: std::sync::OnceLock<Vec<Experiment>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        fabric::builtin::experiment_files()
            .map(|src| Experiment::parse(&src).unwrap_or_else(|e| panic!("built-in {e}")))
            .collect()
    })
}

/// Runs a built-in experiment file by ID (for tests and callers that want one).
pub fn run_builtin(id: &str) -> Result<Vec<Run>, RunError> {
    builtin()
        .iter()
        .find(|e| e.info.id == id)
        .ok_or_else(|| RunError(format!("no built-in experiment `{id}`")))?
        .run(&[])
}

/// Whether a scenario-like source is an experiment file.
pub fn is_experiment(src: &Source) -> bool {
    src.text
        .lines()
        .any(|l| l.trim_start().starts_with("[experiment]"))
}

#[cfg(test)]
mod tests;
