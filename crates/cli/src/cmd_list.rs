//! `nudma list` (stub until implemented).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ListArgs {}

pub fn run(_a: ListArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
