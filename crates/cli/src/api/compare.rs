//! `nudma compare` as a library: two scenarios, or two points of one scenario's `--set`
//! sweep, run side by side; the keys that differ between them and, per workload, each
//! metric of both with its change.

use serde_json::{json, Map, Value};
use studies::run::overrides::{params_of, Override, Point};
use studies::run::{self, keys};

/// One side: what was run and its rows.
pub struct Side {
    /// The scenario argument, and the point's overrides (key → value).
    pub scenario: String,
    pub params: Map<String, Value>,
    pub rows: Vec<studies::Run>,
}

/// The comparison: the keys set differently (A's value, B's; `None` where one does not set
/// it) and every metric both rows of a workload carry as a number.
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub keys: Vec<(String, Option<String>, Option<String>)>,
    pub metrics: Vec<Metric>,
}

pub struct Metric {
    pub workload: String,
    pub metric: String,
    pub a: f64,
    pub b: f64,
}

impl Metric {
    /// B relative to A (`None` when A is 0).
    pub fn change(&self) -> Option<f64> {
        (self.a != 0.0).then(|| self.b / self.a - 1.0)
    }
}

/// Compares scenario `a` with scenario `b` (both at the single-valued `sets`), or, without
/// `b`, `a` at the first values of `sets` with `a` at the second (a key with one value
/// has it on both sides).
pub fn compare(
    a: &str,
    b: Option<&str>,
    sets: &[Override],
    seed: u64,
) -> anyhow::Result<Comparison> {
    // Each `--set` gives A's value and B's (one value: both), paired, not swept.
    let mut pa: Point = Vec::new();
    let mut pb: Point = Vec::new();
    for o in sets {
        let (va, vb) = match (b, o.values.as_slice()) {
            (_, [v]) => (v, v),
            (None, [x, y]) => (x, y),
            (Some(_), vs) => anyhow::bail!(
                "--set {}: comparing two scenarios, each `--set` takes one value (it applies \
                 to both); {} given",
                o.key,
                vs.len()
            ),
            (None, vs) => anyhow::bail!(
                "--set {}: give A's value and B's (`KEY=A,B`) or one for both; {} given",
                o.key,
                vs.len()
            ),
        };
        pa.push((o.key.clone(), va.clone()));
        pb.push((o.key.clone(), vb.clone()));
    }
    let (src_a, src_b) = match b {
        Some(b) => (scenario(a)?, scenario(b)?),
        None if params_of(&pa) == params_of(&pb) => anyhow::bail!(
            "nothing to compare: name a second scenario, or give A's and B's value of a key \
             (e.g. --set workload.rx.cpu_node=0,1)"
        ),
        None => {
            let s = scenario(a)?;
            (s.clone(), s)
        }
    };
    let keys = if b.is_some() {
        differing(
            &keys::keys_of(&src_a).map_err(anyhow::Error::msg)?,
            &keys::keys_of(&src_b).map_err(anyhow::Error::msg)?,
        )
    } else {
        let (ma, mb) = (params_of(&pa), params_of(&pb));
        ma.iter()
            .filter(|(k, v)| mb.get(*k) != Some(v))
            .map(|(k, v)| {
                (
                    k.clone(),
                    Some(v.to_string()),
                    mb.get(k).map(Value::to_string),
                )
            })
            .collect()
    };
    let side = |name: &str, src: &fabric::scenario::Source, p: &Point| -> anyhow::Result<Side> {
        Ok(Side {
            scenario: name.to_string(),
            params: params_of(p),
            rows: run::run_point(src, p, seed)?.rows,
        })
    };
    let a_side = side(a, &src_a, &pa)?;
    let b_side = side(b.unwrap_or(a), &src_b, &pb)?;
    let metrics = metrics(&a_side.rows, &b_side.rows);
    Ok(Comparison {
        a: a_side,
        b: b_side,
        keys,
        metrics,
    })
}

/// A scenario with workloads (an experiment file is refused: `reproduce` compares those).
pub(crate) fn scenario(arg: &str) -> anyhow::Result<fabric::scenario::Source> {
    let src = run::source(arg)?;
    if studies::experiment::is_experiment(&src) {
        anyhow::bail!(
            "`{arg}` is an experiment file: compare takes scenarios with [[workload]]s \
             (`nudma reproduce` compares an experiment with its published values)"
        );
    }
    Ok(src)
}

/// The keys whose values differ, in key order.
fn differing(
    a: &std::collections::BTreeMap<String, String>,
    b: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, Option<String>, Option<String>)> {
    let mut all: Vec<&String> = a.keys().chain(b.keys()).collect();
    all.sort();
    all.dedup();
    all.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| (k.clone(), a.get(k).cloned(), b.get(k).cloned()))
        .collect()
}

/// Every numeric metric of a workload present on both sides, in A's row and metric order.
fn metrics(a: &[studies::Run], b: &[studies::Run]) -> Vec<Metric> {
    let name = |r: &studies::Run| r.params["workload"].as_str().unwrap_or("").to_string();
    let mut out = Vec::new();
    for ra in a {
        let Some(rb) = b.iter().find(|rb| name(rb) == name(ra)) else {
            continue;
        };
        for (m, va) in &ra.metrics {
            if let (Some(x), Some(y)) = (va.as_f64(), rb.metrics.get(m).and_then(Value::as_f64)) {
                out.push(Metric {
                    workload: name(ra),
                    metric: m.clone(),
                    a: x,
                    b: y,
                });
            }
        }
    }
    out
}

impl Comparison {
    /// The JSON `nudma compare --format json` prints.
    pub fn json(&self) -> Value {
        let side = |s: &Side| {
            json!({
                "scenario": s.scenario,
                "params": s.params,
            })
        };
        json!({
            "a": side(&self.a),
            "b": side(&self.b),
            "differing_keys": self.keys.iter().map(|(k, a, b)| json!({"key": k, "a": a, "b": b})).collect::<Vec<_>>(),
            "metrics": self.metrics.iter().map(|m| json!({
                "workload": m.workload, "metric": m.metric, "a": m.a, "b": m.b, "change": m.change(),
            })).collect::<Vec<_>>(),
        })
    }
}
