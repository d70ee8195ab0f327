//! A config's hardware, loaded once for every run that shares it: a sweep has thousands
//! of points on a few configs, and each run takes a copy of the loaded scenario instead
//! of parsing it again.

use std::collections::{BTreeMap, BTreeSet};

use fabric::scenario::{Scenario, Source};

use super::{toml_to_edit, ConfigSpec, Experiment, Job, MetricSpec};
use crate::harness::RunError;
use crate::run::overrides::{self, Point};

/// The scenario with its overrides (the config's, the metric's, the user's) and the
/// config's faults, and its text with the overrides applied, to which each run appends its
/// workloads.
pub(crate) struct Hardware {
    pub scenario: Scenario,
    pub src: Source,
    pub point: Point,
}

/// The scenario a metric of `c` runs on, and its overrides.
fn of<'a>(c: &'a ConfigSpec, m: &'a MetricSpec, user: &Point) -> (&'a str, Point) {
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
    (scenario, hw)
}

/// What makes two runs' hardware the same.
fn key(c: &ConfigSpec, m: &MetricSpec, user: &Point) -> String {
    let (scenario, hw) = of(c, m, user);
    format!("{scenario}\u{0}{hw:?}\u{0}{}", c.faults)
}

/// Loads the hardware a metric of `c` runs on.
fn load(
    e: &Experiment,
    c: &ConfigSpec,
    m: &MetricSpec,
    user: &Point,
) -> Result<Hardware, RunError> {
    let (scenario, hw) = of(c, m, user);
    let file = crate::run::source(scenario)?;
    // Loaded alone first for its errors, located in the user's file; then with the
    // config's faults (some overrides land in included files, which the main file's text
    // does not carry, so the runs take the scenario loaded here).
    overrides::load(&file, &hw).map_err(RunError)?;
    let with_faults = Source {
        name: format!("{} with the experiment's workloads", file.name),
        text: format!("{}\n{}", file.text, c.faults),
    };
    let (scenario, src) =
        overrides::load(&with_faults, &hw).map_err(|err| e.in_metric(c, m, RunError(err)))?;
    Ok(Hardware {
        scenario,
        src,
        point: hw,
    })
}

/// Each job's hardware key, and each distinct hardware loaded (in parallel) or its error.
pub(super) fn load_each(
    e: &Experiment,
    jobs: &[Job],
    user: &Point,
) -> (Vec<String>, BTreeMap<String, Result<Hardware, String>>) {
    use rayon::prelude::*;
    let keys: Vec<String> = jobs
        .iter()
        .map(|j| key(&e.configs[j.config], j.metric, user))
        .collect();
    let mut seen = BTreeSet::new();
    let distinct: Vec<(&String, &Job)> = keys
        .iter()
        .zip(jobs)
        .filter(|(k, _)| seen.insert(*k))
        .collect();
    let loaded = distinct
        .par_iter()
        .map(|&(k, j)| {
            let c = &e.configs[j.config];
            (k.clone(), load(e, c, j.metric, user).map_err(|err| err.0))
        })
        .collect();
    (keys, loaded)
}
