//! `nudma list`: the built-in scenarios and experiments.

use std::process::ExitCode;

use serde_json::json;

#[derive(clap::Args)]
pub struct ListArgs {
    #[arg(long, value_enum, default_value = "text")]
    format: crate::Format,
}

pub fn run(a: ListArgs) -> anyhow::Result<ExitCode> {
    let scenarios = fabric::builtin::catalog();
    let experiments = crate::experiments::catalog();
    match a.format {
        crate::Format::Json => {
            let v = json!({
                "scenarios": scenarios.iter().map(|(n, d)| json!({"name": n, "description": d})).collect::<Vec<_>>(),
                "experiments": experiments.iter().map(|(i, d)| json!({"id": i, "description": d})).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        crate::Format::Text => {
            println!("Built-in scenarios (use the name wherever a scenario file is accepted):");
            let w = scenarios.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (n, d) in &scenarios {
                println!("  {n:w$}  {d}");
            }
            println!("\nExperiments:");
            let w = experiments.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (i, d) in &experiments {
                println!("  {i:w$}  {d}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
