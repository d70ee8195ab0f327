//! `nudma bench catalog [study|experiment …]`: the wall time of `nudma reproduce` over
//! the experiments named (none: every one implemented), as `nudma::api::reproduce` runs
//! them (each experiment's runs on rayon's pool, all cores), per experiment, per study
//! and in total. Nothing is printed but the timings.

use std::process::ExitCode;
use std::time::Instant;

use nudma::api::reproduce::{self, Progress};
use serde_json::{json, Map, Value};

use super::row;
use crate::Format;

#[derive(clap::Args)]
pub struct CatalogArgs {
    /// Studies (ioctopus, tyche, rdma, smartio, pciebench) or experiment IDs; none = everything
    /// implemented.
    targets: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// One experiment's or study's time.
struct Timing {
    name: String,
    experiments: usize,
    rows: usize,
    wall_s: f64,
}

impl Timing {
    fn new(name: &str) -> Timing {
        Timing {
            name: name.to_string(),
            experiments: 0,
            rows: 0,
            wall_s: 0.0,
        }
    }

    fn add(&mut self, t: &Timing) {
        self.experiments += t.experiments;
        self.rows += t.rows;
        self.wall_s += t.wall_s;
    }

    fn metrics(&self) -> Value {
        json!({ "wall_s": self.wall_s, "experiments": self.experiments, "rows": self.rows })
    }
}

/// The study of an experiment ID (`ioctopus.tcp_rx_1core` → `ioctopus`).
fn study_of(id: &str) -> &str {
    id.split_once('.').map_or(id, |(s, _)| s)
}

/// Runs the selection, timing each experiment; progress on stderr as `reproduce` does.
fn time_experiments(targets: &[String]) -> anyhow::Result<(Vec<Timing>, f64)> {
    let (experiments, missing) = reproduce::select(targets)?;
    for e in &missing {
        eprintln!("nudma bench catalog: {} is not implemented yet", e.id);
    }
    let mut per = Vec::new();
    let mut current: Option<(String, Instant)> = None;
    let total = Instant::now();
    reproduce::run(experiments, missing, &mut |p| match p {
        Progress::Start {
            index,
            total,
            experiment,
        } => {
            eprint!("[{}/{total}] {} … ", index + 1, experiment.info.id);
            current = Some((experiment.info.id.to_string(), Instant::now()));
        }
        Progress::Done { rows } => {
            if let Some((id, t)) = current.take() {
                let wall_s = t.elapsed().as_secs_f64();
                eprintln!("{rows} results in {wall_s:.2} s");
                per.push(Timing {
                    name: id,
                    experiments: 1,
                    rows,
                    wall_s,
                });
            }
        }
    })?;
    Ok((per, total.elapsed().as_secs_f64()))
}

/// Per study, in catalog order.
fn by_study(per: &[Timing]) -> Vec<Timing> {
    let mut studies: Vec<Timing> = Vec::new();
    for t in per {
        let s = study_of(&t.name);
        match studies.iter_mut().find(|x| x.name == s) {
            Some(x) => x.add(t),
            None => {
                let mut x = Timing::new(s);
                x.add(t);
                studies.push(x);
            }
        }
    }
    studies
}

pub fn run(a: CatalogArgs) -> anyhow::Result<ExitCode> {
    let (per, wall_s) = time_experiments(&a.targets)?;
    let studies = by_study(&per);
    let mut all = Timing::new("all");
    for s in &studies {
        all.add(s);
    }
    // The whole selection's wall time, set-up between experiments included.
    all.wall_s = wall_s;
    let targets = json!(a.targets);
    let params = |scope: &str, study: Option<&str>| {
        let mut p = Map::new();
        p.insert("targets".into(), targets.clone());
        p.insert("scope".into(), json!(scope));
        if let Some(s) = study {
            p.insert("study".into(), json!(s));
        }
        p
    };
    match a.format {
        Format::Json => {
            let mut results = vec![row(
                "bench.catalog",
                "all",
                params("all", None),
                all.metrics(),
            )];
            for s in &studies {
                let p = params("study", Some(&s.name));
                results.push(row("bench.catalog", &s.name, p, s.metrics()));
            }
            for e in &per {
                let p = params("experiment", Some(study_of(&e.name)));
                results.push(row("bench.catalog", &e.name, p, e.metrics()));
            }
            println!("{}", json!({ "results": results }));
        }
        Format::Text => {
            let w = per.iter().map(|t| t.name.len()).max().unwrap_or(0).max(8);
            println!(
                "{:<w$}  {:>11}  {:>6}  {:>9}",
                "", "experiments", "rows", "wall s"
            );
            let line = |t: &Timing| {
                println!(
                    "{:<w$}  {:>11}  {:>6}  {:>9.2}",
                    t.name, t.experiments, t.rows, t.wall_s
                )
            };
            per.iter().for_each(line);
            println!();
            studies.iter().for_each(line);
            line(&all);
        }
    }
    Ok(ExitCode::SUCCESS)
}
