//! `nudma inspect` as a library: a machine imported from live sysfs, a sysfs snapshot or
//! an hwloc XML export, audited for non-uniform I/O, with predicted gains annotated.

use std::path::{Path, PathBuf};

use inspect::export::Calibration;
use inspect::platform_file::MemoryParams;
use inspect::{audit, import_hwloc_file, import_sysfs, Audit, Machine};

/// Where the machine comes from, and what to add to the audit.
#[derive(Default)]
pub struct AuditInput<'a> {
    /// sysfs and procfs under this directory; `None`: this machine (`/`).
    pub sysfs_root: Option<&'a Path>,
    /// An hwloc XML export instead of sysfs.
    pub hwloc: Option<&'a Path>,
    /// Processes to audit too (sysfs only).
    pub pids: &'a [u32],
    /// `nudma calibrate --out` parameters, read and their path.
    pub calibration: Option<(&'a MemoryParams, &'a Path)>,
}

/// Imports the machine and audits it.
pub fn run(input: &AuditInput) -> anyhow::Result<(Machine, Audit)> {
    let mut machine = match input.hwloc {
        Some(path) => import_hwloc_file(path)?,
        None => {
            let root = input
                .sysfs_root
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("/"));
            let mut m = import_sysfs(&root)?;
            inspect::procs::read_processes(&mut m, &root, input.pids);
            m
        }
    };
    machine.processes.sort_by_key(|p| p.pid);
    let mut result = audit(&machine);
    let cal = input
        .calibration
        .map(|(params, path)| Calibration { params, path });
    if inspect::predict::annotate(&mut result, &machine, cal) > 0 {
        result.predicted_gain = inspect::predict::PREDICTED;
    }
    Ok((machine, result))
}
