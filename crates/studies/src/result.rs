//! What an experiment run produces, exactly as docs/cli.md's JSON contract shapes it, and
//! the published reference points it is compared with.

use serde_json::{Map, Value};

/// One result: an experiment, a config, its parameter values and measured metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub experiment: String,
    /// A config name from the experiment file, or "default".
    pub config: String,
    /// Parameter name → value (numbers as JSON numbers, sizes in bytes).
    pub params: Map<String, Value>,
    /// Metric name → value (number, list, object, string or bool as the catalog says).
    pub metrics: Map<String, Value>,
    /// Metric name → the hardware counters of the simulation that produced it (memory
    /// per node, bytes per link and direction, LLC and IOTLB); written by `--out` to
    /// `counters.json`, kept out of the results JSON whose shape docs/cli.md fixes.
    pub counters: Map<String, Value>,
}

/// A study's published value, with its source, to print beside the simulated one.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub experiment: &'static str,
    /// The config it applies to; `None` for every config.
    pub config: Option<&'static str>,
    /// Parameter values a run must have for this point to apply (a subset).
    pub params: Vec<(&'static str, Value)>,
    /// Parameter values the published run actually used where they differ from `params`
    /// (the cell it is printed under): the point is compared with the run that has them,
    /// and `source` says why. Empty for almost every point.
    pub as_run: Vec<(&'static str, Value)>,
    pub metric: &'static str,
    /// The published value, or the low end of a published range.
    pub value: f64,
    /// The high end of a published range (same as `value` for a point).
    pub value_high: f64,
    /// Where it comes from, e.g. "docs/hardware.md §2: PXH810 b2b one-way latency ≈ 573 ns".
    pub source: &'static str,
    /// Whether a parameter was fitted on this value or the model predicts it.
    pub basis: Basis,
}

/// What a published value is to the model: a point a parameter was fitted on, or a
/// prediction. Reports judge only predictions; reproducing a calibration point shows the
/// fit, not the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// The parameters set from this value, named as the platform, chip or device table
    /// that holds them spells them (e.g. `cpu_mmio_write_ns`); the scenario files mark them
    /// "calibrated", on the published point.
    Calibration(&'static [&'static str]),
    /// No parameter was set from this value: the model predicts it.
    Prediction,
}

impl Basis {
    /// The word of docs/cli.md's JSON contract: "calibration" or "prediction".
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Calibration(_) => "calibration",
            Basis::Prediction => "prediction",
        }
    }

    pub fn is_calibration(self) -> bool {
        matches!(self, Basis::Calibration(_))
    }

    /// For tables: "calibration: cpu_mmio_write_ns" (the fitted parameters) or
    /// "prediction"; a calibration naming no parameter is just "calibration".
    pub fn label(self) -> String {
        match self {
            Basis::Calibration(params) if !params.is_empty() => {
                format!("calibration: {}", params.join(", "))
            }
            other => other.as_str().to_string(),
        }
    }
}

impl Reference {
    /// Whether this reference point applies to `run`: the run has `params`, each replaced
    /// by its `as_run` value where the published run used another.
    pub fn applies(&self, run: &Run) -> bool {
        run.experiment == self.experiment
            && self.config.is_none_or(|c| c == run.config)
            && self.params.iter().all(|(k, v)| {
                let want = self
                    .as_run
                    .iter()
                    .find(|(a, _)| a == k)
                    .map_or(v, |(_, a)| a);
                run.params.get(*k) == Some(want)
            })
            && run.metrics.contains_key(self.metric)
    }

    /// "bytes=1 KiB" for a point compared as run with other parameters: the cell it is
    /// published under; `None` for an ordinary point.
    pub fn published_as(&self) -> Option<String> {
        if self.as_run.is_empty() {
            return None;
        }
        let cell: serde_json::Map<String, Value> = self
            .params
            .iter()
            .filter(|(k, _)| self.as_run.iter().any(|(a, _)| a == k))
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Some(crate::format::render_params(&cell))
    }

    /// Signed relative error of `simulated` against the published value or range (0
    /// inside a range, NaN when there is no simulated number).
    pub fn error(&self, simulated: f64) -> f64 {
        if simulated.is_nan() {
            f64::NAN
        } else if simulated < self.value {
            (simulated - self.value) / self.value
        } else if simulated > self.value_high {
            (simulated - self.value_high) / self.value_high
        } else {
            0.0
        }
    }
}

/// How an experiment is plotted and described in reports.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentInfo {
    pub id: &'static str,
    pub description: &'static str,
    /// The parameter on the x axis of its plot (e.g. "bytes"), if any.
    pub x_param: Option<&'static str>,
    /// Whether the x axis is logarithmic (base 2), as for transfer sizes.
    pub x_log2: bool,
    /// Metrics to plot, one chart each, one line per (config, other params).
    pub plot_metrics: Vec<&'static str>,
    /// Moments marked on the plot's x axis with what happens there, e.g. (45.0, "the
    /// process moves to socket 1"): a timeline's lines alone do not say why they turn.
    pub x_marks: Vec<(f64, &'static str)>,
    /// The measurement window used, for the report (it stands in for the papers' repetitions).
    pub window: &'static str,
    /// The mechanism behind its predictions (which link, cache line or table decides).
    pub mechanism: &'static str,
    /// Configs of the catalog entry that are not implemented yet (listed on stderr).
    pub configs_not_implemented: Vec<&'static str>,
    /// Each metric's unit ("Gb/s", "GB/s", "ns", …: the unit its workload field names,
    /// `format::unit_of`), for the metrics that have one (not counts, fractions, ratios).
    pub units: Vec<(&'static str, &'static str)>,
}

impl ExperimentInfo {
    /// The unit of `metric`, or of the object metric an entry `metric.key` belongs to.
    pub fn unit(&self, metric: &str) -> Option<&'static str> {
        let find = |m: &str| self.units.iter().find(|(n, _)| *n == m).map(|(_, u)| *u);
        find(metric).or_else(|| find(metric.split_once('.')?.0))
    }
}

#[cfg(test)]
mod tests {
    use super::Basis;

    #[test]
    fn basis_words_and_labels() {
        let fitted = Basis::Calibration(&["rc_p2p_read_tags", "rc_p2p_read_gap_ns"]);
        assert_eq!(fitted.as_str(), "calibration");
        assert!(fitted.is_calibration());
        assert_eq!(
            fitted.label(),
            "calibration: rc_p2p_read_tags, rc_p2p_read_gap_ns"
        );
        assert_eq!(Basis::Calibration(&[]).label(), "calibration");
        assert_eq!(Basis::Prediction.as_str(), "prediction");
        assert!(!Basis::Prediction.is_calibration());
        assert_eq!(Basis::Prediction.label(), "prediction");
    }
}
