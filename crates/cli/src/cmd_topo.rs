//! `nudma topo` (stub until implemented).
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum TopoCommand {}

pub fn run(c: TopoCommand) -> anyhow::Result<ExitCode> {
    match c {}
}
