//! Catalog experiments as files (`scenarios/experiments/*.toml`, embedded): which hardware
//! (a scenario and `--set`-style overrides per config, or per metric), which parameter
//! sweep, which measurements (probes, with their arguments and the field each metric
//! takes) give which metric, and the published values with their basis. `nudma reproduce`
//! runs the built-in files; `nudma run FILE` runs any such file, so a user copies an
//! experiment, changes the hardware, and runs it.
//!
//! ```toml
//! [sweep]
//! clients = [1, 8, 16, 30, 31, 32]   # plain integers; `bytes` takes sizes or { from, to }
//! direction = ["rx", "tx"]           # or words (all of one sweep the same kind)
//!
//! [[metric]]
//! name = "total_kiops"
//! probe = "nvme_sharing"             # an entry of crate::probes::PROBES
//! field = "total_kiops"              # one of its fields (optional when it has one)
//! args = { clients = "{clients}", disk = "{disk}" }   # swept values and config vars
//! once = false                       # true: measured once per config
//! scenario = "other"                 # optional: other hardware for this metric…
//! set = { "host.lender.iommu" = true }   # …and overrides after the config's
//! ```
//!
//! Each probe runs once per (config, sweep point, probe, resolved arguments, metric
//! hardware); every metric naming that run takes its field from it. Values may be numbers,
//! strings, booleans or null. Swept parameters appear in each row's `params` under their
//! names, as numbers or as the words written; several are swept as their product. A
//! probe reads a swept word through an argument (`direction = "{direction}"`); its
//! `swept()` sees the numeric ones.

use std::collections::{BTreeMap, BTreeSet};

use fabric::scenario::Source;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use toml::Spanned;

use crate::format::is_size_param;
use crate::harness::{self, RunError};
use crate::probe::{Fields, Probe, ProbeCx};
use crate::probes::PROBES;
use crate::result::{Basis, ExperimentInfo, Reference, Run};
use crate::run::overrides::{self, Override, Point};

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
}

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
    /// Configs EXPERIMENTS.md lists that this file does not run yet (`reproduce` says so).
    #[serde(default)]
    not_implemented: Vec<String>,
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
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Metric {
    name: Spanned<String>,
    probe: Spanned<String>,
    /// Which of the probe's fields this metric reports (the only one when omitted).
    field: Option<Spanned<String>>,
    #[serde(default)]
    args: BTreeMap<String, Spanned<String>>,
    /// Measured once per config (it does not depend on the sweep).
    #[serde(default)]
    once: bool,
    /// Other hardware than the config's for this metric: a scenario in place of the
    /// config's (whose `set` then does not apply), and overrides after the config's.
    scenario: Option<String>,
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
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
}

#[derive(Clone, Debug)]
struct ConfigSpec {
    name: String,
    scenario: String,
    set: Vec<(String, toml::Value)>,
    vars: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
struct MetricSpec {
    name: String,
    probe: &'static Probe,
    field: String,
    args: BTreeMap<String, String>,
    once: bool,
    scenario: Option<String>,
    set: Vec<(String, toml::Value)>,
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

/// One probe run an experiment's rows need: its config (index), key, metric, resolved
/// arguments and sweep point.
struct ProbeRun<'e> {
    config: usize,
    key: RunKey,
    metric: &'e MetricSpec,
    args: BTreeMap<String, String>,
    point: &'e SweepPoint,
}

/// What identifies one probe run within a config: the probe, the metric's hardware, the
/// resolved arguments and the sweep point (none for `once` metrics).
type RunKey = (
    &'static str,
    String,
    Vec<(String, String)>,
    Option<SweepPoint>,
);

/// One probe run: its fields and the hardware counters it left.
struct Outcome {
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
    /// Parses an experiment file with the built-in probes; errors name the file, the
    /// line and what is wrong.
    pub fn parse(src: &Source) -> Result<Experiment, RunError> {
        Experiment::parse_with(src, PROBES)
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

    /// Parses an experiment file whose metrics name probes of `registry`.
    pub fn parse_with(src: &Source, registry: &'static [Probe]) -> Result<Experiment, RunError> {
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
        let info = ExperimentInfo {
            id,
            description: leak(f.experiment.description),
            x_param: f.experiment.x.map(leak),
            x_log2: f.experiment.x_log2,
            plot_metrics: f.experiment.plot.into_iter().map(leak).collect(),
            window: leak(f.experiment.window),
            mechanism: leak(f.experiment.mechanism),
            configs_not_implemented: f.experiment.not_implemented.into_iter().map(leak).collect(),
        };
        let mut sweep = Vec::new();
        for (k, v) in f.sweep {
            let values = sweep_values(src, &k, &v)?;
            sweep.push((k, values));
        }
        let swept: Vec<&str> = sweep.iter().map(|(k, _)| k.as_str()).collect();
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
                Ok(ConfigSpec {
                    name: c.name.into_inner(),
                    scenario: c.scenario,
                    set: c.set.into_iter().collect(),
                    vars: c.vars,
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
            let probe = Probe::find(registry, m.probe.get_ref()).ok_or_else(|| {
                let known: Vec<&str> = registry.iter().map(|p| p.name).collect();
                at(
                    m.probe.span(),
                    format!(
                        "metric `{name}`: unknown probe `{}` (known: {})",
                        m.probe.get_ref(),
                        known.join(", ")
                    ),
                )
            })?;
            let field = match (&m.field, probe.fields) {
                (Some(fld), fields) if fields.contains(&fld.get_ref().as_str()) => {
                    fld.get_ref().clone()
                }
                (Some(fld), fields) => {
                    return Err(at(
                        fld.span(),
                        format!(
                            "metric `{name}`: probe `{}` has no field `{}` (its fields: {})",
                            probe.name,
                            fld.get_ref(),
                            fields.join(", ")
                        ),
                    ))
                }
                (None, [only]) => only.to_string(),
                (None, fields) => {
                    return Err(at(
                        m.name.span(),
                        format!(
                            "metric `{name}`: probe `{}` gives several fields ({}): name one with `field = \"…\"`",
                            probe.name,
                            fields.join(", ")
                        ),
                    ))
                }
            };
            for (k, v) in &m.args {
                for p in placeholders(v.get_ref()) {
                    if swept.contains(&p) {
                        if m.once {
                            return Err(at(
                                v.span(),
                                format!(
                                    "metric `{name}`, argument `{k}`: a `once` metric is measured once per config and cannot use the swept `{{{p}}}`"
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
                                "metric `{name}`, argument `{k}`: `{{{p}}}` is neither a swept parameter ({swept_text}) nor a var of config `{}` (its vars: {})",
                                c.name,
                                if vars.is_empty() { "none".to_string() } else { vars.join(", ") }
                            ),
                        ));
                    }
                }
            }
            metrics.push(MetricSpec {
                name,
                probe,
                field,
                args: m
                    .args
                    .into_iter()
                    .map(|(k, v)| (k, v.into_inner()))
                    .collect(),
                once: m.once,
                scenario: m.scenario,
                set: m.set.into_iter().collect(),
            });
        }
        let mut references = Vec::new();
        for p in f.published {
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
            let param_value = |table: &str, k: &str, v: &toml::Value| {
                match v {
                toml::Value::Integer(i) if *i >= 0 => Ok(json!(i)),
                toml::Value::String(s) if is_size_param(k) => {
                    Ok(json!(fabric::units::parse_size(s).map_err(|e| bad(format!(
                        "published {}: {table}.{k}: {e}",
                        p.metric
                    )))?))
                }
                toml::Value::String(s) => Ok(json!(s)),
                other => Err(bad(format!(
                    "published {}: {table}.{k}: {other} is neither a non-negative integer nor a word",
                    p.metric
                ))),
            }
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
            references.push(Reference {
                experiment: id,
                config: p.config.map(leak),
                params,
                as_run,
                metric: leak(p.metric),
                value: p.value,
                value_high: p.high.unwrap_or(p.value),
                source: leak(p.source),
                basis,
            });
        }
        Ok(Experiment {
            info,
            references,
            sweep,
            configs,
            metrics,
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
    /// config (after the config's own and the metric's). A probe runs once per (config,
    /// sweep point, probe, resolved arguments, metric hardware): metrics naming the same
    /// run take their fields from it; a `once` metric's run serves every point. The
    /// distinct runs are independent simulations, so they run in parallel (rayon's
    /// current pool); rows and errors come out in the file's order whatever the pool.
    pub fn run(&self, sets: &[Override]) -> Result<Vec<Run>, RunError> {
        use rayon::prelude::*;
        let points = self.points();
        let user: Point = overrides::points(sets)
            .into_iter()
            .next()
            .unwrap_or_default();
        // Every probe run the rows need, once each, in the order the rows meet them.
        let mut jobs: Vec<ProbeRun> = Vec::new();
        for (ci, c) in self.configs.iter().enumerate() {
            let mut seen: BTreeSet<RunKey> = BTreeSet::new();
            for point in &points {
                for m in &self.metrics {
                    let args = resolve_args(c, m, point);
                    let key = Self::run_key(m, &args, point);
                    if seen.insert(key.clone()) {
                        jobs.push(ProbeRun {
                            config: ci,
                            key,
                            metric: m,
                            args,
                            point,
                        });
                    }
                }
            }
        }
        let outcomes: Vec<Result<Outcome, RunError>> = jobs
            .par_iter()
            .map(|j| {
                let c = &self.configs[j.config];
                self.measure(c, j.metric, &j.args, j.point, &user)
            })
            .collect();
        let mut cache: BTreeMap<(usize, RunKey), Outcome> = BTreeMap::new();
        for (j, outcome) in jobs.into_iter().zip(outcomes) {
            cache.insert((j.config, j.key), outcome?);
        }
        let mut out = Vec::new();
        for (ci, c) in self.configs.iter().enumerate() {
            for point in &points {
                let mut metrics = Map::new();
                let mut counters = Map::new();
                for m in &self.metrics {
                    let args = resolve_args(c, m, point);
                    let outcome = &cache[&(ci, Self::run_key(m, &args, point))];
                    let value = outcome.fields.get(&m.field).cloned().ok_or_else(|| {
                        RunError(format!(
                            "{}, config `{}`: metric `{}`: probe `{}` gave no field `{}` (it gave: {})",
                            self.info.id,
                            c.name,
                            m.name,
                            m.probe.name,
                            m.field,
                            outcome.fields.keys().cloned().collect::<Vec<_>>().join(", ")
                        ))
                    })?;
                    metrics.insert(m.name.clone(), value);
                    if let Some(cn) = &outcome.counters {
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

    /// What makes two metrics of one config the same probe run.
    fn run_key(m: &MetricSpec, args: &BTreeMap<String, String>, point: &SweepPoint) -> RunKey {
        (
            m.probe.name,
            format!("{:?} {:?}", m.scenario, m.set),
            args.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            (!m.once).then(|| point.clone()),
        )
    }

    /// One probe run on a fresh copy of the metric's hardware.
    fn measure(
        &self,
        c: &ConfigSpec,
        m: &MetricSpec,
        args: &BTreeMap<String, String>,
        point: &[(String, SweepValue)],
        user: &Point,
    ) -> Result<Outcome, RunError> {
        let what = format!(
            "{}, config `{}`: metric `{}` (probe `{}`)",
            self.info.id, c.name, m.name, m.probe.name
        );
        let (scenario, config_set) = match &m.scenario {
            Some(s) => (s, &[][..]),
            None => (&c.scenario, &c.set[..]),
        };
        let mut hw: Point = config_set
            .iter()
            .chain(&m.set)
            .map(|(k, v)| (k.clone(), toml_to_edit(v)))
            .collect();
        hw.extend(user.iter().cloned());
        let src = crate::run::source(scenario)?;
        let (scenario, src) = overrides::load(&src, &hw).map_err(RunError)?;
        let mut tf = harness::timed(scenario, &src.name)?;
        // Probes see the numeric values of the point; words reach them as arguments.
        let numbers: Vec<(String, u64)> = point
            .iter()
            .filter_map(|(k, v)| match v {
                SweepValue::Int(n) => Some((k.clone(), *n)),
                SweepValue::Word(_) => None,
            })
            .collect();
        let mut cx = ProbeCx::new(&mut tf, args, &numbers, what.clone());
        let fields = (m.probe.run)(&mut cx).map_err(|e| {
            if e.0.starts_with(&what) {
                e
            } else {
                RunError(format!("{what}: {}", e.0))
            }
        })?;
        let counters = cx.take_counters();
        Ok(Outcome { fields, counters })
    }
}

/// A metric's arguments with the config's vars and the point's swept values substituted
/// for `{name}` (the file was checked: every placeholder is one or the other).
fn resolve_args(
    c: &ConfigSpec,
    m: &MetricSpec,
    point: &[(String, SweepValue)],
) -> BTreeMap<String, String> {
    m.args
        .iter()
        .map(|(k, raw)| {
            let mut s = raw.clone();
            for (var, val) in &c.vars {
                s = s.replace(&format!("{{{var}}}"), val);
            }
            for (var, val) in point {
                s = s.replace(&format!("{{{var}}}"), &val.text());
            }
            (k.clone(), s)
        })
        .collect()
}

fn toml_to_edit(v: &toml::Value) -> toml_edit::Value {
    v.to_string()
        .parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(v.to_string()))
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
mod tests {
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
        assert!(err(&file("[sweep]\nhosts = [-2]", TWO))
            .ends_with("-2 is negative (key `sweep.hosts[0]`)"));
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
}
