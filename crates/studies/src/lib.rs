//! nudma's studies layer: the experiment catalog (docs/studies.md), the workloads that
//! drive the systems and device models, and reports (tables, JSON, SVG plots).

pub mod catalog;
pub mod experiment;
pub mod format;
pub mod harness;
pub mod ioctopus;
pub mod path_query;
pub mod pcie_model;
pub mod plot;
pub mod report;
pub mod result;
pub mod run;
pub mod smartio;
pub mod tyche;

pub use result::{ExperimentInfo, Reference, Run};
