//! The registry of probes the built-in experiment files name: one entry per probe, each
//! study's function. The only place that knows every study.

use crate::ioctopus;
pub use crate::probe::{one, Fields, Probe, ProbeCx, ProbeFn};

/// The probes of the built-in experiment files.
pub const PROBES: &[Probe] = &[Probe {
    name: "colocation",
    fields: &["pagerank_slowdown", "io_throughput_gbps"],
    run: ioctopus::colocation,
}];
