//! `nudma compare A [B] [--set KEY=V…]… [--format json]`: two scenarios (each at the same
//! single-valued `--set`s), or one scenario at two values of its keys (`--set KEY=VA,VB`),
//! run side by side: the keys they set differently, then per workload each metric of both
//! and its change.

use std::process::ExitCode;

use nudma::api::compare::{self as api, Comparison};
use nudma::api::run::parse_sets;
use studies::format::format_number;
use studies::report::format_percent;

#[derive(clap::Args)]
pub struct CompareArgs {
    /// A scenario file with [[workload]] and [measure], or a built-in scenario name.
    a: String,
    /// A second scenario; without it, B is A with the second value of each `--set`.
    b: Option<String>,
    /// Override a key as `nudma run` does: `KEY=V` on both sides, or (without B)
    /// `KEY=VA,VB`, A's value and B's; several keys change together.
    #[arg(long = "set", value_name = "KEY=V|KEY=VA,VB")]
    sets: Vec<String>,
    #[arg(long, value_enum, default_value = "text")]
    format: crate::Format,
    /// Seed of the simulation's random generator (the same for both sides).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let sets = parse_sets(&a.sets)?;
    let c = api::compare(&a.a, a.b.as_deref(), &sets, a.seed)?;
    match a.format {
        crate::Format::Json => println!("{}", serde_json::to_string_pretty(&c.json())?),
        crate::Format::Text => print!("{}", text(&c)),
    }
    Ok(ExitCode::SUCCESS)
}

/// What the text output prints: the two sides, the differing keys, the metrics.
fn text(c: &Comparison) -> String {
    let side = |s: &api::Side| {
        let p: Vec<String> = s.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if p.is_empty() {
            s.scenario.clone()
        } else {
            format!("{} ({})", s.scenario, p.join(", "))
        }
    };
    let mut out = format!("A: {}\nB: {}\n\n", side(&c.a), side(&c.b));
    if c.keys.is_empty() {
        out.push_str("no key differs\n");
    } else {
        let rows: Vec<Vec<String>> = c
            .keys
            .iter()
            .map(|(k, a, b)| {
                let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "—".into());
                vec![k.clone(), v(a), v(b)]
            })
            .collect();
        out.push_str(&table(&["key", "A", "B"], &rows));
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = c
        .metrics
        .iter()
        .map(|m| {
            let change = m.change().map_or_else(|| "—".into(), format_percent);
            vec![
                m.workload.clone(),
                m.metric.clone(),
                format_number(m.a),
                format_number(m.b),
                change,
            ]
        })
        .collect();
    out.push_str(&table(&["workload", "metric", "A", "B", "change"], &rows));
    out
}

/// Columns padded to their widest cell, numbers (all but the first two) to the right.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = widths[i] - c.chars().count();
                // The key and value columns of the key table read left to right too.
                if i < 2 || header.len() == 3 {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}
