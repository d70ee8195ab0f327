//! Errors of the fabric layer: located scenario errors (file, line, column, key) for bad
//! input, and runtime errors for finite hardware running out or misuse of an API.
//! Faults of accesses (what a TLP hits) are not errors of the program: see `fault.rs`.

use std::fmt;

/// A problem in a scenario file, located for a human.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based line and column; 0 when the problem has no single place (e.g. a cycle).
    pub line: usize,
    pub col: usize,
    /// Dotted key path such as `host[1].device[2].parent`, when known.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}:{}: ", self.file, self.line, self.col)?;
        } else {
            write!(f, "{}: ", self.file)?;
        }
        f.write_str(&self.message)?;
        if let Some(k) = &self.key {
            write!(f, " (key `{k}`)")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Runtime errors: finite tables exhausted, bad arguments to the fabric API.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    #[error("{what} exhausted on {on}: all {capacity} entries in use")]
    Exhausted {
        what: &'static str,
        on: String,
        capacity: usize,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("unknown endpoint `{name}`: {why}")]
    UnknownEndpoint { name: String, why: String },
    #[error("no NTB path from host `{from}` to host `{to}`")]
    Unreachable { from: String, to: String },
}

/// Names offered in an error ("defined: …", "it has: …"): sorted, each once, comma-
/// separated; "none" when there are none. Lists gathered from several places (includes,
/// hosts, a device's functions) would otherwise repeat names.
pub fn name_list<I, S>(names: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let names = sorted_names(names);
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// [`name_list`] of at most `max` names, then "… (N in all)".
pub fn name_list_at_most<I, S>(names: I, max: usize) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let names = sorted_names(names);
    if names.len() <= max {
        name_list(names)
    } else {
        format!("{}, … ({} in all)", names[..max].join(", "), names.len())
    }
}

fn sorted_names<I, S>(names: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut v: Vec<String> = names.into_iter().map(|s| s.as_ref().to_string()).collect();
    v.sort();
    v.dedup();
    v
}

/// Maps byte offsets of a source text to 1-based line/column.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub(crate) fn locate(&self, text: &str, offset: usize) -> (usize, usize) {
        let offset = offset.min(text.len());
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let col = text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0);
        (line + 1, col + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_lists_are_sorted_and_unique() {
        assert_eq!(
            name_list(["nvme", "gpu", "rc0", "nvme", "gpu"]),
            "gpu, nvme, rc0"
        );
        assert_eq!(name_list(Vec::<String>::new()), "none");
        assert_eq!(
            name_list_at_most(["c", "a", "b", "a", "d"], 3),
            "a, b, c, … (4 in all)"
        );
        assert_eq!(name_list_at_most(["b", "a", "b"], 3), "a, b");
    }
}
