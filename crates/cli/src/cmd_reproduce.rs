//! `nudma reproduce [study|experiment …]`: run the built-in catalog, print simulated
//! values beside the published ones (or JSON, whose rows carry each published value and
//! its basis, calibration or prediction, and which lists the catalog experiments asked for
//! that are not implemented), and write plots and a report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use nudma::api::reproduce::{self, Progress};
use studies::report;

#[derive(clap::Args)]
pub struct ReproduceArgs {
    /// Studies (ioctopus, tyche, rdma, smartio, pciebench) or experiment IDs; none = everything
    /// implemented.
    targets: Vec<String>,
    #[arg(long, value_enum, default_value = "text")]
    format: crate::Format,
    /// Write one SVG plot per experiment and report.md/report.html here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print every row of the sweeps, not only the published points and each series' end.
    #[arg(long)]
    full: bool,
}

pub fn run(a: ReproduceArgs) -> anyhow::Result<ExitCode> {
    let (experiments, missing) = reproduce::select(&a.targets)?;
    for e in &missing {
        eprintln!(
            "nudma reproduce: {} ({}) is not implemented yet",
            e.id, e.title
        );
    }
    for e in &experiments {
        for c in &e.info.configs_not_implemented {
            eprintln!(
                "nudma reproduce: {} config `{c}` is not implemented yet",
                e.info.id
            );
        }
    }
    let mut t = Instant::now();
    let done = reproduce::run(experiments, missing, &mut |p| match p {
        Progress::Start {
            index,
            total,
            experiment,
        } => {
            t = Instant::now();
            eprint!("[{}/{total}] {} … ", index + 1, experiment.info.id);
        }
        Progress::Done { rows } => {
            eprintln!("{rows} results in {:.1} s", t.elapsed().as_secs_f64());
        }
    })?;
    let (runs, refs, missing) = (&done.runs, &done.refs, &done.missing);
    let infos: Vec<_> = done.experiments.iter().map(|e| e.info.clone()).collect();
    match a.format {
        crate::Format::Json => println!("{}", serde_json::to_string_pretty(&done.json())?),
        crate::Format::Text => print!(
            "{}",
            report::table_with(
                runs,
                refs,
                &infos,
                report::TableOptions { compact: !a.full }
            )
        ),
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        let plots = studies::plot::write_plots(dir, &infos, runs, refs)?;
        let (md, html) = report::write_report(dir, &infos, runs, refs, missing)?;
        let counters = report::write_counters(dir, runs)?;
        eprintln!(
            "wrote {} plot(s), {} and {}{}",
            plots.len(),
            md.display(),
            html.display(),
            counters
                .map(|p| format!(", hardware counters in {}", p.display()))
                .unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}
