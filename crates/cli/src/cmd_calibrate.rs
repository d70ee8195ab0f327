//! `nudma calibrate` (stub until implemented).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CalibrateArgs {}

pub fn run(_a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
