//! Where a parameter value comes from: the basis a file states for it, and a table's
//! bases by key.

use std::collections::BTreeMap;

/// The basis of a parameter value as the file states it (every built-in value states one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Basis {
    /// A bare number: accepted in user files, refused in built-in ones.
    Unstated,
    /// Cites a source, e.g. `docs/hardware.md §2`.
    Reference(String),
    /// Fitted on a named published point.
    Calibrated(String),
    /// A choice the model makes, with the reason.
    Assumption(String),
}

impl Basis {
    /// The word used in files: `unstated`, `reference`, `calibrated`, `assumption`.
    pub fn word(&self) -> &'static str {
        match self {
            Basis::Unstated => "unstated",
            Basis::Reference(_) => "reference",
            Basis::Calibrated(_) => "calibrated",
            Basis::Assumption(_) => "assumption",
        }
    }
    /// The source, the calibration point or the reason; empty when unstated.
    pub fn note(&self) -> &str {
        match self {
            Basis::Unstated => "",
            Basis::Reference(s) | Basis::Calibrated(s) | Basis::Assumption(s) => s,
        }
    }
}

/// The basis of each value of a parameter table, by key.
pub type Provenance = BTreeMap<String, Basis>;
