//! `nudma run <scenario> [--set KEY=V1,V2,…]… [--format json] [--out DIR] [--jobs N]`:
//! simulate a scenario's workloads together over its measurement window; `--set` lists
//! make a sweep, one row per point and workload, run in parallel with the same result as
//! `--jobs 1`.

use std::path::PathBuf;
use std::process::ExitCode;

use nudma::api::run as api;
use serde_json::{json, Value};
use studies::run::overrides::params_of;

#[derive(clap::Args)]
pub struct RunArgs {
    /// A scenario file with [[workload]] and [measure], a built-in scenario name, or an
    /// experiment file or built-in experiment ID.
    scenario: String,
    /// Override a key: `workload.NAME.FIELD`, `measure.FIELD`, or any scenario key by its
    /// TOML path (arrays of tables by name: `host.srv.device.nic0.link.width`); a list of
    /// values makes a sweep, several flags their cartesian product.
    #[arg(long = "set", value_name = "KEY=V1,V2,…")]
    sets: Vec<String>,
    #[arg(long, value_enum, default_value = "text")]
    format: crate::Format,
    /// Write results.json, counters.json (per point: bytes per link direction and memory
    /// node, LLC and IOTLB counters, over the measurement window) and, for a sweep or an
    /// experiment file, an SVG plot (an experiment's report too) here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Worker threads for a sweep, 1..=1024 (default: all cores; never more than points).
    #[arg(long, value_parser = parse_jobs)]
    jobs: Option<usize>,
    /// Seed of the simulation's random generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let sets = api::parse_sets(&a.sets)?;
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let out = api::run(&a.scenario, &sets, a.seed, jobs, true)?;
    match out.loaded.info() {
        Some(info) => print_experiment(&out, info, !sets.is_empty(), a.format)?,
        None => match a.format {
            crate::Format::Json => println!("{}", serde_json::to_string_pretty(&out.json())?),
            crate::Format::Text => {
                let order: Vec<&str> = sets.iter().map(|o| o.key.as_str()).collect();
                print!("{}", table(&out.rows(), &order))
            }
        },
    }
    if let Some(dir) = &a.out {
        write_out(dir, &out, &sets)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--out DIR`: results.json, the hardware counters, and a plot of the sweep (for an
/// experiment file, its plot and report as `nudma reproduce --out` writes them).
fn write_out(
    dir: &std::path::Path,
    out: &api::RunOutput,
    sets: &[studies::run::overrides::Override],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let results = dir.join("results.json");
    std::fs::write(&results, serde_json::to_string_pretty(&out.json())?)?;
    let mut wrote = vec![results];
    let rows = out.rows();
    match out.loaded.info() {
        Some(info) => {
            let infos = std::slice::from_ref(info);
            let (md, html) = studies::report::write_report(dir, infos, &rows, &out.refs, &[])?;
            wrote.extend([md, html]);
            wrote.extend(studies::report::write_counters(dir, &rows)?);
        }
        None => {
            let counters: Vec<Value> = out
                .points
                .iter()
                .zip(&out.results)
                .map(|(p, r)| json!({ "params": params_of(p), "counters": r.counters }))
                .collect();
            let path = dir.join("counters.json");
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&json!({ "points": counters }))?,
            )?;
            wrote.push(path);
        }
    }
    if let Some(info) = out.plot_info(sets) {
        wrote.extend(studies::plot::write_plots(dir, &[info], &rows, &out.refs)?);
    }
    let names: Vec<String> = wrote.iter().map(|p| p.display().to_string()).collect();
    eprintln!("wrote {}", names.join(", "));
    Ok(())
}

/// An experiment file (`scenarios/experiments/*.toml` or a copy): every config and sweep
/// point, for each `--set` point, compared with its published values.
fn print_experiment(
    out: &api::RunOutput,
    info: &studies::ExperimentInfo,
    swept: bool,
    format: crate::Format,
) -> anyhow::Result<()> {
    if swept {
        eprintln!("nudma run: --set changes the hardware; published values are not compared");
    }
    match format {
        crate::Format::Json => println!("{}", serde_json::to_string_pretty(&out.json())?),
        crate::Format::Text => print!(
            "{}",
            studies::report::table_with(
                &out.rows(),
                &out.refs,
                std::slice::from_ref(info),
                studies::report::TableOptions { compact: false }
            )
        ),
    }
    Ok(())
}

/// The rows as tables, one per set of metrics reported (a kind of workload's): the
/// workload, the swept values (in the order `order` gives their keys, `--set`'s), then a
/// column per metric. The DMA-like metrics keep short headers (GB/s, ops/s, p50 ns, p99
/// ns); every other column is headed by its metric's name, as in the JSON. Counts of
/// errors and faults stay in the JSON.
fn table(rows: &[studies::Run], order: &[&str]) -> String {
    let mut out = String::new();
    let Some(first) = rows.first() else {
        return out;
    };
    out.push_str(&format!("scenario {}\n", first.config));
    let mut keys: Vec<&String> = first.params.keys().filter(|k| *k != "workload").collect();
    keys.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(usize::MAX));
    // Groups in the order their first row comes.
    let mut groups: Vec<(Vec<&str>, Vec<&studies::Run>)> = Vec::new();
    for r in rows {
        let cols = columns(r);
        match groups.iter_mut().find(|(c, _)| *c == cols) {
            Some((_, rs)) => rs.push(r),
            None => groups.push((cols, vec![r])),
        }
    }
    for (i, (cols, rs)) in groups.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&group_table(cols, rs, &keys));
    }
    out
}

/// The metrics shown of a row, in order: the DMA-like four first, then the others by name.
fn columns(r: &studies::Run) -> Vec<&str> {
    const JSON_ONLY: [&str; 6] = [
        "errors",
        "faults",
        "ur_completions",
        "writes_dropped",
        "wrong_values",
        "poll_reads",
    ];
    let mut cols: Vec<&str> = SHORT
        .iter()
        .map(|(m, _)| *m)
        .filter(|m| r.metrics.contains_key(*m))
        .collect();
    let last = |k: &&str| BOUND.contains(k);
    cols.extend(
        r.metrics
            .keys()
            .map(String::as_str)
            .filter(|k| !JSON_ONLY.contains(k) && SHORT.iter().all(|(m, _)| m != k) && !last(k)),
    );
    // What bounds the workload reads last, after what it got.
    cols.extend(BOUND.iter().filter(|m| r.metrics.contains_key(**m)));
    cols
}

/// The bound and its utilisation (`studies::run::bound`), the last columns.
const BOUND: [&str; 2] = ["bound", "bound_util"];

/// Metrics with a short header.
const SHORT: [(&str, &str); 4] = [
    ("throughput_gbyte_s", "GB/s"),
    ("ops_per_sec", "ops/s"),
    ("latency_ns_p50", "p50 ns"),
    ("latency_ns_p99", "p99 ns"),
];

/// One group's table: names and swept values left, numbers right.
fn group_table(cols: &[&str], rows: &[&studies::Run], keys: &[&String]) -> String {
    // One rule for every number: 4 significant digits, whole from 1000 up, no trailing
    // zeros (`studies::format::format_number`, as `reproduce` prints values).
    let fmt = |v: Option<&Value>| match v {
        Some(Value::Number(n)) => studies::format::format_number(n.as_f64().unwrap_or(0.0)),
        Some(Value::String(s)) => s.clone(),
        // A latency bound has no utilisation.
        Some(Value::Null) => "—".into(),
        Some(v) => v.to_string(),
        None => "—".into(),
    };
    let mut header = vec!["workload".to_string()];
    header.extend(keys.iter().map(|k| k.to_string()));
    header.extend(cols.iter().map(|c| {
        SHORT
            .iter()
            .find(|(m, _)| m == c)
            .map_or(c.to_string(), |(_, h)| h.to_string())
    }));
    let mut lines = vec![header];
    for r in rows {
        let mut l = vec![fmt(r.params.get("workload"))];
        l.extend(keys.iter().map(|k| fmt(r.params.get(*k))));
        l.extend(cols.iter().map(|c| fmt(r.metrics.get(*c))));
        lines.push(l);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| match i <= keys.len() {
                true => format!("{c:<w$}"),
                false => format!("{c:>w$}"),
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `--jobs`: a whole number of worker threads in 1..=`studies::run::MAX_JOBS`.
fn parse_jobs(s: &str) -> Result<usize, String> {
    let max = studies::run::MAX_JOBS;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number of worker threads in 1..={max}"
        )),
    }
}
