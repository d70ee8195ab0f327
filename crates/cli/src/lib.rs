//! The `nudma` library: what the command-line tool computes, as functions that return
//! data instead of printing it. The `nudma` binary and the Python package
//! (`crates/python`) both call these, so a scenario run from either gives the same rows.

pub mod api;
