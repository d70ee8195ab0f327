//! `nudma run` as a library: a scenario with workloads, or an experiment file, run at
//! the points of a `--set` sweep. Points can be run in any grouping (all at once on local
//! threads, or in chunks on a Ray or Dask cluster) and give the same rows: each point is
//! simulated on its own from the scenario text and the seed.

use fabric::scenario::Source;
use serde_json::Value;
use studies::experiment::Experiment;
use studies::run::overrides::{Override, Point};
use studies::run::{self, PointResult};
use studies::{ExperimentInfo, Reference, Run};

/// A scenario argument, loaded: its text and, for an experiment file, the experiment.
pub struct Loaded {
    pub src: Source,
    pub experiment: Option<Experiment>,
}

/// Loads a scenario file or built-in name, telling an experiment file apart.
pub fn load(scenario: &str) -> anyhow::Result<Loaded> {
    let src = run::source(scenario)?;
    let experiment = if studies::experiment::is_experiment(&src) {
        Some(Experiment::parse(&src)?)
    } else {
        None
    };
    Ok(Loaded { src, experiment })
}

/// Parses `KEY=V1,V2,…` arguments as `--set` does.
pub fn parse_sets(sets: &[String]) -> anyhow::Result<Vec<Override>> {
    sets.iter()
        .map(|s| Override::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)
}

impl Loaded {
    /// The experiment's description, for an experiment file.
    pub fn info(&self) -> Option<&ExperimentInfo> {
        self.experiment.as_ref().map(|e| &e.info)
    }

    /// The points of the sweep over `sets`, in the CLI's order (the first key varies
    /// slowest); one empty point without any.
    pub fn points(&self, sets: &[Override]) -> Vec<Point> {
        run::sweep(sets)
    }

    /// Runs `points` on `jobs` threads; results come back in point order. An experiment
    /// file's points carry no counters (`null`).
    pub fn run_points(
        &self,
        points: &[Point],
        seed: u64,
        jobs: usize,
        progress: bool,
    ) -> anyhow::Result<Vec<PointResult>> {
        match &self.experiment {
            None => Ok(run::run_all(&self.src, points, seed, jobs, progress)?),
            // An experiment sets its own seeds and runs its configs in order.
            Some(e) => points
                .iter()
                .map(|point| {
                    let one: Vec<Override> = point
                        .iter()
                        .map(|(k, v)| Override::parse(&format!("{k}={v}")))
                        .collect::<Result<_, _>>()
                        .map_err(anyhow::Error::msg)?;
                    Ok(PointResult {
                        rows: e.run(&one)?,
                        counters: Value::Null,
                    })
                })
                .collect(),
        }
    }

    /// The published values the rows are compared with: an experiment file's, unless the
    /// sweep changes its hardware (they were measured on the hardware the file names).
    pub fn references(&self, swept: bool) -> Vec<Reference> {
        match &self.experiment {
            Some(e) if !swept => e.references.clone(),
            _ => Vec::new(),
        }
    }
}

/// The metrics a scenario sweep's plot draws, where its rows have them.
const PLOTTED: &[&str] = &[
    "throughput_gbyte_s",
    "ops_per_sec",
    "latency_ns_p50",
    "latency_ns_p99",
    "throughput_gbit_s",
    "latency_us",
];

/// Everything `nudma run` prints or writes for one scenario argument.
pub struct RunOutput {
    pub loaded: Loaded,
    pub points: Vec<Point>,
    pub results: Vec<PointResult>,
    pub refs: Vec<Reference>,
}

impl RunOutput {
    /// Every point's rows, in point order.
    pub fn rows(&self) -> Vec<Run> {
        self.results.iter().flat_map(|r| r.rows.clone()).collect()
    }

    /// What to plot for these rows: an experiment file's own description, or for a
    /// scenario's sweep one chart per metric of its workloads against the first swept key
    /// that takes more than one value (one line per workload and other swept values).
    /// `None` when nothing varies.
    pub fn plot_info(&self, sets: &[Override]) -> Option<ExperimentInfo> {
        if let Some(info) = self.loaded.info() {
            return Some(info.clone());
        }
        let x = sets.iter().map(|o| o.key.as_str()).find(|k| {
            let mut vals = self.points.iter().filter_map(|p| {
                p.iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.to_string())
            });
            let first = vals.next();
            vals.any(|v| Some(v) != first)
        })?;
        let rows = self.rows();
        let numeric = |v: &Value| v.is_number();
        let mut metrics: Vec<&'static str> = Vec::new();
        for m in PLOTTED {
            if rows.iter().any(|r| r.metrics.get(*m).is_some_and(numeric)) {
                metrics.push(m);
            }
        }
        let xs: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.params.get(x).and_then(Value::as_f64))
            .collect();
        // Sizes and counts that double: a log-2 axis, as the catalog's size sweeps.
        let log2 = xs.len() == rows.len()
            && xs
                .iter()
                .all(|v| *v >= 1.0 && (*v as u64).is_power_of_two())
            && xs.iter().cloned().fold(1.0, f64::max) / xs.iter().cloned().fold(f64::MAX, f64::min)
                >= 4.0;
        Some(ExperimentInfo {
            id: "run",
            description: "",
            x_param: Some(Box::leak(x.to_string().into_boxed_str())),
            x_log2: log2,
            window: "",
            mechanism: "",
            configs_not_implemented: Vec::new(),
            units: metrics
                .iter()
                .filter_map(|m| Some((*m, studies::format::unit_of(m)?)))
                .collect(),
            plot_metrics: metrics,
            x_marks: Vec::new(),
        })
    }

    /// `{"results": [...]}` as `nudma run --format json` prints it; an experiment file's
    /// also with its metrics' `"units"`, as `reproduce` prints it.
    pub fn json(&self) -> Value {
        let infos: Vec<ExperimentInfo> = self.loaded.info().into_iter().cloned().collect();
        studies::report::reproduce_json(&self.rows(), &self.refs, &infos, &[])
    }
}

/// Runs a scenario argument at every point of the sweep over `sets`.
pub fn run(
    scenario: &str,
    sets: &[Override],
    seed: u64,
    jobs: usize,
    progress: bool,
) -> anyhow::Result<RunOutput> {
    let loaded = load(scenario)?;
    let points = loaded.points(sets);
    if loaded.experiment.is_none() {
        // What every point shares (no workloads, no window, a workload key out of range)
        // is said once, before any point runs.
        if let Some(p) = points.first() {
            run::check(&loaded.src, p)?;
        }
    }
    if progress && points.len() > 1 && loaded.experiment.is_none() {
        let workers = jobs.min(points.len());
        eprintln!("nudma run: {} points on {workers} worker(s)", points.len());
    }
    let results = loaded.run_points(&points, seed, jobs, progress)?;
    let refs = loaded.references(!sets.is_empty());
    Ok(RunOutput {
        loaded,
        points,
        results,
        refs,
    })
}
