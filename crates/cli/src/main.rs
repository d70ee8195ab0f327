//! `nudma`: the single binary. Each subcommand lives in its own module with its own
//! clap `Args` and a `run` returning the process exit code, so modules stay independent.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod cmd_advise;
mod cmd_calibrate;
mod cmd_compare;
mod cmd_init;
mod cmd_inspect;
mod cmd_list;
mod cmd_reproduce;
mod cmd_run;
mod cmd_topo;
mod experiments;

/// Output format shared by subcommands.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Parser)]
#[command(
    name = "nudma",
    version,
    about = "Model, simulate and inspect non-uniform I/O (NUMA/NUDMA, PCIe switches, IOMMUs, NTBs)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List built-in scenarios and experiments.
    List(cmd_list::ListArgs),
    /// Write a starter scenario for your own server: a built-in platform or this machine,
    /// device models and workloads.
    Init(cmd_init::InitArgs),
    /// Simulate a scenario's workloads over its measurement window (`--set` sweeps).
    Run(cmd_run::RunArgs),
    /// Two scenarios, or two points of one, side by side: the keys and metrics that differ.
    Compare(cmd_compare::CompareArgs),
    /// Search the placements of a scenario's workloads; rank those that gain, with commands.
    Advise(cmd_advise::AdviseArgs),
    /// Run the built-in experiment catalog: simulated beside published values.
    Reproduce(cmd_reproduce::ReproduceArgs),
    /// Show, check or query the route of one access through a scenario's fabric.
    #[command(subcommand)]
    Topo(cmd_topo::TopoCommand),
    /// Benchmarks of nudma itself: engine speed, packet-level workloads, the catalog.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Audit a real Linux machine (live sysfs or hwloc XML) for non-uniform I/O.
    Inspect(cmd_inspect::InspectArgs),
    /// Measure this machine's memory latency and bandwidth per (CPU node, memory node).
    Calibrate(cmd_calibrate::CalibrateArgs),
}

/// The simulations allocate and free many small objects per event and build a scenario
/// per sweep point; mimalloc reuses freed memory without returning it to the kernel
/// between points (glibc's trimming made each point fault its pages in again).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Behave like a Unix filter: a closed pipe (`nudma topo show x | head`) ends the
    // process quietly instead of failing a write and panicking in `println!`.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List(a) => cmd_list::run(a),
        Command::Init(a) => cmd_init::run(a),
        Command::Run(a) => cmd_run::run(a),
        Command::Compare(a) => cmd_compare::run(a),
        Command::Advise(a) => cmd_advise::run(a),
        Command::Reproduce(a) => cmd_reproduce::run(a),
        Command::Topo(c) => cmd_topo::run(c),
        Command::Bench(c) => bench::run(c),
        Command::Inspect(a) => cmd_inspect::run(a),
        Command::Calibrate(a) => cmd_calibrate::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
