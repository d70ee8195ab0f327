//! Errors located in the scenario file (file, line, column, key) and the readers that
//! produce them: a `[[workload]]` table read as a kind's raw schema (`read_workload`),
//! an error or range check at one of its fields (`field_error`, `Entry`), and durations
//! in simulated time (`parse_duration`, `millis`).

use std::ops::Range;

use fabric::keypath::key_of_error;
use fabric::scenario::Source;
use fabric::ScenarioError;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use sim::Time;

/// Longest measurement window (simulated), so a run stays tractable; a fault's latest
/// time is the same bound.
pub const MAX_WINDOW_NS: f64 = fabric::faults::MAX_FAULT_TIME_NS;

/// Line and column (1-based) of a byte offset.
fn locate(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

pub(super) fn error(
    src: &Source,
    span: Range<usize>,
    key: Option<&str>,
    msg: &str,
) -> ScenarioError {
    let (line, col) = if span.is_empty() && span.start == 0 {
        (0, 0)
    } else {
        locate(&src.text, span.start)
    };
    ScenarioError {
        file: src.name.clone(),
        line,
        col,
        key: key.map(str::to_string),
        message: msg.to_string(),
    }
}

/// The text of one `[[workload]]` table on its own.
#[derive(Deserialize)]
struct One<T> {
    workload: Vec<T>,
}

/// Reads the workload table at `span` of `src` as `T`; an error is located where the
/// parser found it (the value, the unknown key, or the table for a missing one) and
/// named under `wkey` (`workload.NAME`), e.g. `workload.rx.transfer_bytes`.
pub(in crate::run) fn read_workload<T: DeserializeOwned>(
    src: &Source,
    span: &Range<usize>,
    table: &toml::Table,
    wkey: &str,
) -> Result<T, ScenarioError> {
    // The whole table as the file defines it (a `[workload.x]` sub-table written
    // elsewhere included), for what the table's own text does not show.
    let whole = || {
        toml::Value::Table(table.clone())
            .try_into::<T>()
            .map_err(|e| error(src, span.clone(), Some(wkey), e.message().trim()))
    };
    let body = &src.text[span.clone()];
    // An inline `workload = [{ … }]` entry is a bare inline table.
    let prefix = if body.trim_start().starts_with('{') {
        "workload = ["
    } else {
        ""
    };
    let text = format!("{prefix}{body}{}", if prefix.is_empty() { "" } else { "]" });
    match toml::from_str::<One<T>>(&text) {
        Ok(one) if one.workload.len() == 1 => whole(),
        Ok(_) => Err(error(
            src,
            span.clone(),
            Some(wkey),
            "not one workload table",
        )),
        Err(e) => {
            let at = e.span().map_or(0, |s| s.start);
            let key = key_of_error(&text, at, e.message())
                .map(|k| match k.strip_prefix("workload[0]") {
                    Some(rest) => format!("{wkey}{rest}"),
                    None => wkey.to_string(),
                })
                .unwrap_or_else(|| wkey.to_string());
            let start = (span.start + at)
                .saturating_sub(prefix.len())
                .max(span.start);
            Err(error(src, start..start + 1, Some(&key), e.message().trim()))
        }
    }
}

/// Where the value of `key` is written in the flat table at `span` (the table itself when
/// the key is not written there).
pub(super) fn value_span(src: &Source, span: &Range<usize>, key: &str) -> Range<usize> {
    let body = &src.text[span.clone()];
    let mut offset = span.start;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(key) {
            let rest_trim = rest.trim_start();
            if let Some(value) = rest_trim.strip_prefix('=') {
                let at = offset + line.len() - value.trim_start().len();
                return at..at + 1;
            }
        }
        offset += line.len();
    }
    span.clone()
}

/// An error at the value of `field` of workload `name` (at its table when not written).
pub(in crate::run) fn field_error(
    src: &Source,
    span: &Range<usize>,
    name: &str,
    field: &str,
    msg: &str,
) -> ScenarioError {
    error(
        src,
        value_span(src, span, field),
        Some(&format!("workload.{name}.{field}")),
        msg,
    )
}

/// One `[[workload]]` table of the file, as its kind's reader gets it: the source, where
/// the table is written, its entries, and the key it is named under (`workload.NAME`, or
/// `workload[i]` when it has no name).
pub(super) struct Entry<'a> {
    pub src: &'a Source,
    pub span: Range<usize>,
    pub table: &'a toml::Table,
    pub wkey: String,
}

impl Entry<'_> {
    /// The table read as the raw schema `T` (`read_workload`).
    pub fn read<T: DeserializeOwned>(&self) -> Result<T, ScenarioError> {
        read_workload(self.src, &self.span, self.table, &self.wkey)
    }

    /// An error at the value of `field` of workload `name` (`field_error`).
    pub fn field(&self, name: &str, field: &str, msg: &str) -> ScenarioError {
        field_error(self.src, &self.span, name, field, msg)
    }

    /// A range check: `msg` at the value of `field` of workload `name` unless `ok`.
    pub fn check(&self, ok: bool, name: &str, field: &str, msg: &str) -> Result<(), ScenarioError> {
        if ok {
            Ok(())
        } else {
            Err(self.field(name, field, msg))
        }
    }
}

/// `ms` milliseconds as a simulated time, when finite and within a run's longest window.
pub(super) fn millis(ms: f64) -> Option<Time> {
    let ns = ms * 1e6;
    (ns.is_finite() && (0.0..=MAX_WINDOW_NS).contains(&ns))
        .then(|| Time::from_ns_f64(ns))
        .flatten()
}

/// "100 us", "1 ms", "250ns", "2 s" (also µs): a duration in simulated time, read as a
/// fault's time is (`fabric::faults::parse_time_ps`: 0 .. 1 s).
pub fn parse_duration(s: &str) -> Result<Time, String> {
    fabric::faults::parse_time_ps(s).map(Time::from_ps)
}
