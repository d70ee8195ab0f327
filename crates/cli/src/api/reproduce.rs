//! `nudma reproduce` as a library: the catalog experiments asked for, run in catalog
//! order, with the published values they are compared with.

use studies::catalog::{self, Entry, Experiment};
use studies::{Reference, Run};

/// The experiments run, the catalog entries asked for that this build does not
/// implement, every row in run order, and the catalog's published values.
pub struct Reproduction {
    pub experiments: Vec<Experiment>,
    pub missing: Vec<&'static Entry>,
    pub runs: Vec<Run>,
    pub refs: Vec<Reference>,
}

impl Reproduction {
    /// The JSON of `nudma reproduce --format json`.
    pub fn json(&self) -> serde_json::Value {
        let infos: Vec<_> = self.experiments.iter().map(|e| e.info.clone()).collect();
        studies::report::reproduce_json(&self.runs, &self.refs, &infos, &self.missing)
    }
}

/// Where a reproduction is, for a progress display.
pub enum Progress<'a> {
    /// Experiment `index` (from 0) of `total` starts.
    Start {
        index: usize,
        total: usize,
        experiment: &'a Experiment,
    },
    /// It finished with this many rows.
    Done { rows: usize },
}

/// Selects the experiments of `targets` (studies or experiment IDs; none: every one
/// implemented), without running them.
pub fn select(targets: &[String]) -> anyhow::Result<(Vec<Experiment>, Vec<&'static Entry>)> {
    catalog::select(targets).map_err(anyhow::Error::msg)
}

/// Runs what [`select`] chose; an experiment's error names it.
pub fn run(
    experiments: Vec<Experiment>,
    missing: Vec<&'static Entry>,
    progress: &mut dyn FnMut(Progress),
) -> anyhow::Result<Reproduction> {
    let mut runs = Vec::new();
    let total = experiments.len();
    for (index, e) in experiments.iter().enumerate() {
        progress(Progress::Start {
            index,
            total,
            experiment: e,
        });
        let r = e
            .run()
            .map_err(|err| anyhow::anyhow!("{}: {err}", e.info.id))?;
        progress(Progress::Done { rows: r.len() });
        runs.extend(r);
    }
    // Each experiment's own published values: a user's copy of a built-in experiment is
    // compared with what its file says.
    let refs = experiments
        .iter()
        .flat_map(|e| e.references().iter().cloned())
        .collect();
    Ok(Reproduction {
        experiments,
        missing,
        runs,
        refs,
    })
}
