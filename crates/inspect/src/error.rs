//! Errors for input the user gave that cannot be used at all (a missing XML file, a
//! root that is not a directory, a malformed calibration file, an hwloc file whose
//! objects contradict each other). Other problems inside a machine description are not
//! errors: they become findings (see `hwloc`'s module doc for where the line runs).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    // The I/O error is part of the message rather than a `source`, so chained
    // printing (`{:#}`) does not repeat it.
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{}:{line}:{column}: invalid XML: {message}", path.display())]
    Xml {
        path: PathBuf,
        line: u32,
        column: u32,
        message: String,
    },
    #[error("{}: not an hwloc topology: {message}", path.display())]
    NotHwloc { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    /// Objects of one file that cannot all be true (two NUMA nodes with one number, a
    /// CPU outside its parent's set): located at the object, named with its attribute.
    #[error("{}:{line}: {object}: {message}", path.display())]
    Contradiction {
        path: PathBuf,
        line: u32,
        object: String,
        message: String,
    },
    #[error("{}:{line}: {message}", path.display())]
    Calibration {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("calibrate: {0}")]
    Calibrate(String),
}

impl InspectError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        InspectError::Io {
            path: path.into(),
            err: source,
        }
    }
}
