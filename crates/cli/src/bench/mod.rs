//! `nudma bench`: benchmarks of nudma itself. `phold` times the discrete-event engine;
//! `net`, `nvme` and `rdma` time a packet- or TLP-level workload of a built-in bench
//! scenario (`scenarios/bench/`) in simulated seconds per wall second; `catalog` times
//! `nudma reproduce`'s experiments.
//!
//! Only these drivers read the wall clock; the simulations they time do not.

use std::process::ExitCode;

use serde_json::{json, Map, Value};

mod catalog;
mod phold;
mod workload;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// PHOLD: engine speed in events per second (experiment engine.phold).
    Phold(phold::PholdArgs),
    /// TCP receive at 100 GbE: 14 netperf connections into buffers remote from the NIC.
    Net(workload::WorkloadArgs),
    /// fio 4 KiB random reads on an NVMe SSD at TLP level, buffers remote from it.
    Nvme(workload::WorkloadArgs),
    /// rdma_bench: 8 connections of 64 B READs, open loop, server region remote.
    Rdma(workload::WorkloadArgs),
    /// Wall time of `nudma reproduce` (every experiment, or the studies/IDs named).
    Catalog(catalog::CatalogArgs),
}

pub fn run(c: BenchCommand) -> anyhow::Result<ExitCode> {
    match c {
        BenchCommand::Phold(a) => phold::run(a),
        BenchCommand::Net(a) => workload::run(workload::Bench::Net, a),
        BenchCommand::Nvme(a) => workload::run(workload::Bench::Nvme, a),
        BenchCommand::Rdma(a) => workload::run(workload::Bench::Rdma, a),
        BenchCommand::Catalog(a) => catalog::run(a),
    }
}

/// One row of the JSON contract: `{"experiment", "config", "params", "metrics"}`.
fn row(experiment: &str, config: &str, params: Map<String, Value>, metrics: Value) -> Value {
    json!({
        "experiment": experiment,
        "config": config,
        "params": params,
        "metrics": metrics,
    })
}

/// `x / wall_s`, 0 for a run too short to time.
fn per_wall_s(x: f64, wall_s: f64) -> f64 {
    if wall_s > 0.0 {
        x / wall_s
    } else {
        0.0
    }
}
