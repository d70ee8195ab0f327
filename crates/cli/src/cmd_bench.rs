//! `nudma bench` (stub until implemented).
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum BenchCommand {}

pub fn run(c: BenchCommand) -> anyhow::Result<ExitCode> {
    match c {}
}
