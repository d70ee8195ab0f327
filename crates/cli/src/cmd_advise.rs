//! `nudma advise SCENARIO [--objective throughput|p99|fairness] [--budget N] [--fix KEY]…
//! [--format json]`: the placements of the scenario's workloads a person could change, each
//! simulated, and those that gain ranked with their reason and the commands that apply them.

use std::process::ExitCode;

use nudma::api::advise::{self as api, Advice, Objective};
use nudma::api::run::parse_sets;
use studies::format::format_number;
use studies::report::format_percent;

#[derive(clap::Args)]
pub struct AdviseArgs {
    /// A scenario file with [[workload]] and [measure], or a built-in scenario name.
    scenario: String,
    /// What a placement is judged by: throughput (geometric mean of the workloads'
    /// ratios), p99 (of their tail latencies), fairness (the worst-off workload's ratio).
    #[arg(long, value_enum, default_value = "throughput")]
    objective: Objective,
    /// The most placements to simulate.
    #[arg(long, default_value_t = 32)]
    budget: usize,
    /// Start from the scenario with this key set, as `nudma run` sets it (one value).
    #[arg(long = "set", value_name = "KEY=V")]
    sets: Vec<String>,
    /// Keep this key (or every key under it, e.g. `workload.stream`) as it is.
    #[arg(long = "fix", value_name = "KEY")]
    fixed: Vec<String>,
    #[arg(long, value_enum, default_value = "text")]
    format: crate::Format,
    /// Seed of the simulation's random generator (the same for every placement).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(a: AdviseArgs) -> anyhow::Result<ExitCode> {
    let sets = parse_sets(&a.sets)?;
    let advice = api::advise(&api::Search {
        scenario: &a.scenario,
        sets: &sets,
        objective: a.objective,
        budget: a.budget,
        fixed: &a.fixed,
        seed: a.seed,
    })?;
    match a.format {
        crate::Format::Json => println!("{}", serde_json::to_string_pretty(&advice.json())?),
        crate::Format::Text => print!("{}", text(&advice)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The text output: what was searched, then each recommendation with its gain, changes,
/// reason and commands.
fn text(a: &Advice) -> String {
    let mut out = format!(
        "advise {} — objective {}, {} placement{} simulated\n",
        a.scenario,
        format!("{:?}", a.objective).to_lowercase(),
        a.searched,
        if a.searched == 1 { "" } else { "s" }
    );
    for (c, e) in &a.refused {
        out.push_str(&format!("  not possible: {} ({e})\n", c.what));
    }
    if a.recommendations.is_empty() {
        out.push_str(&a.best_already());
        out.push('\n');
        return out;
    }
    for (i, r) in a.recommendations.iter().enumerate() {
        let sets: Vec<String> = r
            .change
            .sets
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push_str(&format!(
            "\n{}. {}  (gain ×{}, {})\n   why: {}\n",
            i + 1,
            sets.join(" "),
            format_number(r.gain),
            format_percent(r.gain - 1.0),
            r.why
        ));
        for c in &r.commands {
            out.push_str(&format!("   $ {c}\n"));
        }
    }
    out
}
