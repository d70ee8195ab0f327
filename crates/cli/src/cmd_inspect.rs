//! `nudma inspect` (stub until implemented).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct InspectArgs {}

pub fn run(_a: InspectArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
