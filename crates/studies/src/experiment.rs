//! Catalog experiments as files (`scenarios/experiments/*.toml`, embedded): which hardware
//! (a scenario and `--set`-style overrides per config), which parameter sweep, which
//! measurements (probes, with their arguments) give which metric, and the published values
//! with their basis. `nudma reproduce` runs the built-in files; `nudma run FILE` runs any
//! such file, so a user copies an experiment, changes the hardware, and runs it.
//!
//! A probe is one measurement the SmartIO study makes on an idle fabric: a CPU store's
//! one-way latency, an NTB engine's or a GPU's copy from launch to completion, a GPU
//! peer-to-peer copy, a counter ping-pong, the hops or roots of a data path.

use std::collections::BTreeMap;

use fabric::scenario::Source;
use fabric::units::Size;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::harness::{self, RunError};
use crate::result::{Basis, ExperimentInfo, Reference, Run};
use crate::run::overrides::{self, Override, Point};
use crate::smartio;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    experiment: Meta,
    #[serde(default)]
    sweep: BTreeMap<String, Sweep>,
    config: Vec<Config>,
    metric: Vec<Metric>,
    #[serde(default)]
    published: Vec<Published>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    id: String,
    description: String,
    /// The measurement window used, for the report.
    window: String,
    /// The sweep parameter on the x axis of the plot, and whether it is log2.
    x: Option<String>,
    #[serde(default)]
    x_log2: bool,
    plot: Vec<String>,
    /// Configs EXPERIMENTS.md lists that this file does not run yet (`reproduce` says so).
    #[serde(default)]
    not_implemented: Vec<String>,
}

/// Values of a swept parameter: a list, or powers of two from `from` to `to`.
enum Sweep {
    List(Vec<Size>),
    Powers { from: Size, to: Size },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Powers {
    from: Size,
    to: Size,
}

// By hand rather than `untagged`, so that a bad value inside is reported as itself (with
// its place) instead of "did not match any variant".
impl<'de> Deserialize<'de> for Sweep {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Sweep;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of sizes, or { from = SIZE, to = SIZE } (powers of two)")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<Sweep, A::Error> {
                Vec::<Size>::deserialize(serde::de::value::SeqAccessDeserializer::new(a))
                    .map(Sweep::List)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<Sweep, A::Error> {
                Powers::deserialize(serde::de::value::MapAccessDeserializer::new(a)).map(|p| {
                    Sweep::Powers {
                        from: p.from,
                        to: p.to,
                    }
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Config {
    name: String,
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
    name: String,
    probe: String,
    #[serde(default)]
    args: BTreeMap<String, String>,
    /// Measured once per config (it does not depend on the sweep).
    #[serde(default)]
    once: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Published {
    config: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, Size>,
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
    sweep: Vec<(String, Vec<u64>)>,
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
    probe: Probe,
    args: BTreeMap<String, String>,
    once: bool,
}

/// The measurements a metric can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    CpuStoreOneway,
    CpuStoreNtbSpan,
    NtbCopy,
    GpuCopy,
    P2pCopy,
    PingPong,
    PathHops,
    PathRoots,
}

impl Probe {
    const ALL: [(&'static str, Probe); 8] = [
        ("cpu_store_oneway", Probe::CpuStoreOneway),
        ("cpu_store_ntb_span", Probe::CpuStoreNtbSpan),
        ("ntb_copy", Probe::NtbCopy),
        ("gpu_copy", Probe::GpuCopy),
        ("p2p_copy", Probe::P2pCopy),
        ("pingpong", Probe::PingPong),
        ("path_hops", Probe::PathHops),
        ("path_roots", Probe::PathRoots),
    ];
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

impl Experiment {
    /// Parses an experiment file; errors name the file and what is wrong.
    pub fn parse(src: &Source) -> Result<Experiment, RunError> {
        let f: File = toml::from_str(&src.text).map_err(|e| {
            let message = e.message().trim();
            let (at, key) = match e.span() {
                Some(s) => {
                    let start = s.start.min(src.text.len());
                    let before = src.text.get(..start).unwrap_or("");
                    let line = before.matches('\n').count() + 1;
                    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                    let key = fabric::keypath::key_of_error(&src.text, start, message)
                        .map(|k| format!(" (key `{k}`)"))
                        .unwrap_or_default();
                    (format!(":{line}:{col}"), key)
                }
                None => (String::new(), String::new()),
            };
            RunError(format!("{}{at}: {message}{key}", src.name))
        })?;
        let bad = |m: String| RunError(format!("{}: {m}", src.name));
        let id = leak(f.experiment.id);
        let info = ExperimentInfo {
            id,
            description: leak(f.experiment.description),
            x_param: f.experiment.x.map(leak),
            x_log2: f.experiment.x_log2,
            plot_metrics: f.experiment.plot.into_iter().map(leak).collect(),
            window: leak(f.experiment.window),
            configs_not_implemented: f.experiment.not_implemented.into_iter().map(leak).collect(),
        };
        let sweep = f
            .sweep
            .into_iter()
            .map(|(k, s)| {
                let v = match s {
                    Sweep::List(l) => l.into_iter().map(|x| x.0).collect(),
                    Sweep::Powers { from, to } => powers(from.0, to.0),
                };
                (k, v)
            })
            .collect::<Vec<_>>();
        if sweep.len() > 1 {
            return Err(bad("one swept parameter at most".into()));
        }
        let metrics = f
            .metric
            .into_iter()
            .map(|m| {
                let probe = Probe::ALL
                    .iter()
                    .find(|(n, _)| *n == m.probe)
                    .map(|x| x.1)
                    .ok_or_else(|| {
                        let known: Vec<&str> = Probe::ALL.iter().map(|x| x.0).collect();
                        bad(format!(
                            "metric `{}`: unknown probe `{}` (known: {})",
                            m.name,
                            m.probe,
                            known.join(", ")
                        ))
                    })?;
                Ok(MetricSpec {
                    name: m.name,
                    probe,
                    args: m.args,
                    once: m.once,
                })
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        let configs: Vec<ConfigSpec> = f
            .config
            .into_iter()
            .map(|c| ConfigSpec {
                name: c.name,
                scenario: c.scenario,
                set: c.set.into_iter().collect(),
                vars: c.vars,
            })
            .collect();
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
            references.push(Reference {
                experiment: id,
                config: p.config.map(leak),
                params: p
                    .params
                    .into_iter()
                    .map(|(k, v)| (leak(k), json!(v.0)))
                    .collect(),
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

    /// Runs every config, sweep point and metric; `sets` override scenario keys of every
    /// config (after the config's own).
    pub fn run(&self, sets: &[Override]) -> Result<Vec<Run>, RunError> {
        let mut out = Vec::new();
        let points: Vec<Option<(String, u64)>> = match self.sweep.first() {
            Some((k, vs)) => vs.iter().map(|&v| Some((k.clone(), v))).collect(),
            None => vec![None],
        };
        let user: Point = overrides::points(sets)
            .into_iter()
            .next()
            .unwrap_or_default();
        for c in &self.configs {
            let mut once: BTreeMap<String, Value> = BTreeMap::new();
            for point in &points {
                let mut metrics = Map::new();
                let mut counters = Map::new();
                for m in &self.metrics {
                    if let Some(v) = once.get(&m.name) {
                        metrics.insert(m.name.clone(), v.clone());
                        continue;
                    }
                    let bytes = point.as_ref().map(|p| p.1);
                    let (value, counted) = self.measure(c, m, bytes, &user)?;
                    if m.once {
                        once.insert(m.name.clone(), value.clone());
                    }
                    metrics.insert(m.name.clone(), value);
                    if let Some(cn) = counted {
                        counters.insert(m.name.clone(), cn);
                    }
                }
                let mut params = Map::new();
                if let Some((k, v)) = point {
                    params.insert(k.clone(), json!(v));
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

    /// One probe on a fresh copy of the config's hardware.
    fn measure(
        &self,
        c: &ConfigSpec,
        m: &MetricSpec,
        bytes: Option<u64>,
        user: &Point,
    ) -> Result<(Value, Option<Value>), RunError> {
        let mut point: Point = c
            .set
            .iter()
            .map(|(k, v)| (k.clone(), toml_to_edit(v)))
            .collect();
        point.extend(user.iter().cloned());
        let src = crate::run::source(&c.scenario)?;
        let (scenario, src) = overrides::load(&src, &point).map_err(RunError)?;
        let mut tf = harness::timed(scenario, &src.name)?;
        let arg = |k: &str| -> Result<String, RunError> {
            let raw = m.args.get(k).ok_or_else(|| {
                RunError(format!(
                    "{}: metric `{}` (probe {:?}) needs argument `{k}`",
                    self.info.id, m.name, m.probe
                ))
            })?;
            let mut s = raw.clone();
            for (var, val) in &c.vars {
                s = s.replace(&format!("{{{var}}}"), val);
            }
            Ok(s)
        };
        let need_bytes = || {
            bytes.ok_or_else(|| {
                RunError(format!(
                    "{}: metric `{}` needs a swept `bytes`",
                    self.info.id, m.name
                ))
            })
        };
        let via_ram = |s: String| match s.as_str() {
            "ram" => Ok(true),
            "p2p" => Ok(false),
            other => Err(RunError(format!("via = `{other}`: use \"p2p\" or \"ram\""))),
        };
        let write = |s: String| match s.as_str() {
            "write" => Ok(true),
            "read" => Ok(false),
            other => Err(RunError(format!(
                "op = `{other}`: use \"write\" or \"read\""
            ))),
        };
        Ok(match m.probe {
            Probe::CpuStoreOneway => {
                let t = smartio::cpu_store_oneway(&mut tf, &arg("from")?, &arg("to")?)?;
                (json!(t.as_ns_f64()), None)
            }
            Probe::CpuStoreNtbSpan => {
                let t = smartio::cpu_store_ntb_span(&mut tf, &arg("from")?, &arg("to")?)?;
                (json!(t.as_ns_f64()), None)
            }
            Probe::NtbCopy => {
                let b = need_bytes()?;
                let t = smartio::ntb_copy(
                    &mut tf,
                    &arg("engine")?,
                    &arg("local")?,
                    &arg("remote")?,
                    b,
                    write(arg("op")?)?,
                )?;
                (
                    json!(harness::gbps(b, t)),
                    Some(harness::counters_json(&tf, b)),
                )
            }
            Probe::GpuCopy => {
                let b = need_bytes()?;
                let t = smartio::gpu_copy_probe(
                    &mut tf,
                    &arg("gpu")?,
                    &arg("user")?,
                    b,
                    write(arg("op")?)?,
                )?;
                (
                    json!(harness::gbps(b, t)),
                    Some(harness::counters_json(&tf, b)),
                )
            }
            Probe::P2pCopy => {
                let b = need_bytes()?;
                let t =
                    smartio::p2p_copy(&mut tf, &arg("a")?, &arg("b")?, via_ram(arg("via")?)?, b)?;
                (json!(harness::gbps(b, t)), None)
            }
            Probe::PingPong => {
                let t =
                    smartio::gpu_pingpong(&mut tf, &arg("a")?, &arg("b")?, via_ram(arg("via")?)?)?;
                (json!(t.as_ns_f64()), None)
            }
            Probe::PathHops | Probe::PathRoots => {
                let (hops, roots) =
                    smartio::path_shape(&mut tf, &arg("a")?, &arg("b")?, via_ram(arg("via")?)?)?;
                let v = if m.probe == Probe::PathHops {
                    hops
                } else {
                    roots
                };
                (json!(v), None)
            }
        })
    }
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

/// Whether a scenario-like source is an experiment file.
pub fn is_experiment(src: &Source) -> bool {
    src.text
        .lines()
        .any(|l| l.trim_start().starts_with("[experiment]"))
}
