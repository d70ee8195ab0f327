//! `nudma._native`: the Rust core as seen from Python. Every function calls the library
//! surface the `nudma` binary calls (`nudma::api`), so rows are the CLI's; results cross
//! as the CLI's JSON text, which `python/nudma/__init__.py` turns into pandas or Arrow
//! tables. Errors are `nudma.NudmaError` with the CLI's located message. Simulations run
//! with the GIL released, so threads of one process run points in parallel.

use std::path::Path;

use nudma::api::{advise, audit, compare, reproduce, run, topo};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::Value;

create_exception!(
    nudma,
    NudmaError,
    PyException,
    "A bad scenario, key, value or query, with the located message the CLI prints."
);

/// The message as `nudma` prints it after `error: ` (with its causes).
fn err(e: anyhow::Error) -> PyErr {
    NudmaError::new_err(format!("{e:#}"))
}

fn text(v: &Value) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| err(e.into()))
}

/// The source's name (a path, or `builtin:…`) and whether it is an experiment file.
#[pyfunction]
fn resolve(scenario: &str) -> PyResult<(String, bool)> {
    let l = run::load(scenario).map_err(err)?;
    Ok((l.src.name.clone(), l.experiment.is_some()))
}

/// How many points the `--set` arguments make.
#[pyfunction]
fn count_points(sets: Vec<String>) -> PyResult<usize> {
    let sets = run::parse_sets(&sets).map_err(err)?;
    Ok(studies::run::sweep(&sets).len())
}

/// `nudma run SCENARIO --set … --seed S --format json` for points `start..stop` of the
/// sweep (all of them with `stop` None), on `jobs` threads.
#[pyfunction]
#[pyo3(signature = (scenario, sets, seed, jobs, start=0, stop=None))]
fn run_points(
    py: Python<'_>,
    scenario: &str,
    sets: Vec<String>,
    seed: u64,
    jobs: usize,
    start: usize,
    stop: Option<usize>,
) -> PyResult<String> {
    let v = py
        .detach(|| -> anyhow::Result<Value> {
            let sets = run::parse_sets(&sets)?;
            let loaded = run::load(scenario)?;
            let points = loaded.points(&sets);
            let stop = stop.unwrap_or(points.len());
            let Some(chunk) = points.get(start..stop) else {
                anyhow::bail!("points {start}..{stop} of a sweep of {}", points.len());
            };
            let rows: Vec<_> = loaded
                .run_points(chunk, seed, jobs, false)?
                .into_iter()
                .flat_map(|r| r.rows)
                .collect();
            Ok(studies::report::results_json(
                &rows,
                &loaded.references(!sets.is_empty()),
            ))
        })
        .map_err(err)?;
    text(&v)
}

/// `nudma reproduce TARGETS… --format json`.
#[pyfunction]
fn reproduce_json(py: Python<'_>, targets: Vec<String>) -> PyResult<String> {
    let v = py
        .detach(|| -> anyhow::Result<Value> {
            let (experiments, missing) = reproduce::select(&targets)?;
            Ok(reproduce::run(experiments, missing, &mut |_| {})?.json())
        })
        .map_err(err)?;
    text(&v)
}

/// `nudma compare A [B] --set … --format json`.
#[pyfunction]
#[pyo3(signature = (a, b, sets, seed))]
fn compare_json(
    py: Python<'_>,
    a: &str,
    b: Option<String>,
    sets: Vec<String>,
    seed: u64,
) -> PyResult<String> {
    let sets = run::parse_sets(&sets).map_err(err)?;
    let v = py
        .detach(|| compare::compare(a, b.as_deref(), &sets, seed).map(|c| c.json()))
        .map_err(err)?;
    text(&v)
}

/// `nudma advise SCENARIO --objective … --budget … --set … --fix … --format json`.
#[pyfunction]
#[pyo3(signature = (scenario, objective, budget, sets, fixed, seed))]
fn advise_json(
    py: Python<'_>,
    scenario: &str,
    objective: &str,
    budget: usize,
    sets: Vec<String>,
    fixed: Vec<String>,
    seed: u64,
) -> PyResult<String> {
    let sets = run::parse_sets(&sets).map_err(err)?;
    let objective = objective.parse().map_err(err)?;
    let v = py
        .detach(|| {
            advise::advise(&advise::Search {
                scenario,
                sets: &sets,
                objective,
                budget,
                fixed: &fixed,
                seed,
            })
            .map(|a| a.json())
        })
        .map_err(err)?;
    text(&v)
}

/// `topo check`'s summary line of the scenario with `sets` (one value per key).
#[pyfunction]
fn check(scenario: &str, sets: Vec<String>) -> PyResult<String> {
    let sets = run::parse_sets(&sets).map_err(err)?;
    let f = topo::load_with(scenario, &sets).map_err(err)?;
    Ok(topo::check_summary(&f))
}

/// `topo show --format json`.
#[pyfunction]
fn topology_json(scenario: &str, sets: Vec<String>) -> PyResult<String> {
    let sets = run::parse_sets(&sets).map_err(err)?;
    let f = topo::load_with(scenario, &sets).map_err(err)?;
    text(&fabric::describe::topology_json(&f))
}

/// `topo path --format json`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn path_json(
    scenario: &str,
    sets: Vec<String>,
    from: &str,
    to: &str,
    access: &str,
    length: u32,
    offset: u64,
    outstanding: Option<u64>,
) -> PyResult<String> {
    let sets = run::parse_sets(&sets).map_err(err)?;
    let access = match access {
        "read" => fabric::Access::Read,
        "write" => fabric::Access::Write,
        other => {
            return Err(NudmaError::new_err(format!(
                "access `{other}`: expected \"read\" or \"write\""
            )))
        }
    };
    let q = topo::PathQuery {
        from,
        to,
        offset,
        len: length,
        access,
        outstanding,
    };
    let report = topo::path(&|| topo::load_with(scenario, &sets), &q).map_err(err)?;
    text(&report.json(&q))
}

/// `nudma inspect [--sysfs-root DIR | --hwloc FILE] --format json`.
#[pyfunction]
#[pyo3(signature = (sysfs_root=None, hwloc=None))]
fn inspect_json(sysfs_root: Option<String>, hwloc: Option<String>) -> PyResult<String> {
    if sysfs_root.is_some() && hwloc.is_some() {
        return Err(NudmaError::new_err(
            "give sysfs_root or hwloc, not both".to_string(),
        ));
    }
    let (_, result) = audit::run(&audit::AuditInput {
        sysfs_root: sysfs_root.as_deref().map(Path::new),
        hwloc: hwloc.as_deref().map(Path::new),
        ..Default::default()
    })
    .map_err(err)?;
    text(&serde_json::to_value(&result).map_err(|e| err(e.into()))?)
}

/// `nudma calibrate --format json` (measures this machine: takes seconds).
#[pyfunction]
#[pyo3(signature = (size_bytes=None, iterations=3, threads=None))]
fn calibrate_json(
    py: Python<'_>,
    size_bytes: Option<usize>,
    iterations: u32,
    threads: Option<usize>,
) -> PyResult<String> {
    let options = inspect::calibrate::CalibrateOptions {
        size_bytes,
        iterations,
        loads: None,
        threads,
    };
    let result = py
        .detach(|| inspect::calibrate::calibrate(&options, &mut |_| {}))
        .map_err(|e| err(e.into()))?;
    text(&serde_json::to_value(&result).map_err(|e| err(e.into()))?)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NudmaError", m.py().get_type::<NudmaError>())?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(count_points, m)?)?;
    m.add_function(wrap_pyfunction!(run_points, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_json, m)?)?;
    m.add_function(wrap_pyfunction!(compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(advise_json, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(topology_json, m)?)?;
    m.add_function(wrap_pyfunction!(path_json, m)?)?;
    m.add_function(wrap_pyfunction!(inspect_json, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate_json, m)?)?;
    Ok(())
}
