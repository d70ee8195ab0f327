//! `nudma list`: the built-in scenarios, experiments, platforms and device models.

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
    let (platforms, models) = fabric::builtin::parts();
    let parts = |ps: &[fabric::builtin::Part]| {
        ps.iter()
            .map(|p| json!({"name": p.name, "description": p.description, "include": p.include}))
            .collect::<Vec<_>>()
    };
    match a.format {
        crate::Format::Json => {
            let v = json!({
                "scenarios": scenarios.iter().map(|(n, d)| json!({"name": n, "description": d})).collect::<Vec<_>>(),
                "experiments": experiments.iter().map(|(i, d)| json!({"id": i, "description": d})).collect::<Vec<_>>(),
                "platforms": parts(&platforms),
                "device_models": parts(&models),
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
            for (title, ps) in [
                (
                    "Platforms (`platform = \"NAME\"` with `include = [\"FILE\"]`):",
                    &platforms,
                ),
                (
                    "Device models (`device_model = \"NAME\"` with `include = [\"FILE\"]`):",
                    &models,
                ),
            ] {
                println!("\n{title}");
                let w = ps.iter().map(|p| p.name.len()).max().unwrap_or(0);
                let wd = ps
                    .iter()
                    .map(|p| p.description.chars().count())
                    .max()
                    .unwrap_or(0);
                for p in ps {
                    let pad = wd - p.description.chars().count();
                    println!(
                        "  {:w$}  {}{:pad$}  {}",
                        p.name, p.description, "", p.include
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
