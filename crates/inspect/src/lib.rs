//! `inspect`: nudma's view of real Linux machines.
//!
//! - [`sysfs`] and [`hwloc`] import a machine (live sysfs/procfs under a root, or an
//!   hwloc 1.x/2.x/3.x XML export) into one [`model::Machine`]; [`procs`] adds the
//!   processes given with `--pid`.
//! - [`audit`] finds where I/O crosses NUMA nodes (NUDMA) and says how to fix it;
//!   [`report`] renders the audit for people (JSON is its serde form).
//! - [`export`] writes the machine as a scenario TOML for the simulator, laid out by
//!   [`layout`] (packages sharing nodes, memory-only nodes).
//! - [`calibrate`] measures memory latency and bandwidth per (CPU node, memory node)
//!   pair; [`platform_file`] writes and reads the parameter file it produces.
//!
//! The crate reads only; it never changes the machine (fixes are printed, not run). It
//! uses the simulator only to predict, on the exported scenario, what calibration
//! measures (`predict`), and the device crate for its models' exported parameters.

pub mod audit;
pub mod calibrate;
pub mod cpuset;
pub mod error;
pub mod export;
pub mod hwloc;
pub mod layout;
pub mod model;
pub mod pci;
pub mod platform_file;
pub mod predict;
pub mod procs;
pub mod report;
pub mod sysfs;

pub use audit::{audit, Audit, Finding, Severity};
pub use cpuset::CpuSet;
pub use error::InspectError;
pub use export::scenario_toml;
pub use hwloc::import_hwloc_file;
pub use model::Machine;
pub use sysfs::import_sysfs;
