//! The surface shared by the CLI and the Python bindings: loading a scenario or an
//! experiment file and running sweep points of it (`nudma run`), the catalog
//! (`nudma reproduce`), one access's route (`nudma topo path`) and the machine audit
//! (`nudma inspect`), and the placement search (`nudma advise`). Printing stays in the binary's `cmd_*` modules.

pub mod advise;
pub mod audit;
pub mod compare;
pub mod reproduce;
pub mod run;
pub mod topo;
