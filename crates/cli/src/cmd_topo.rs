//! `nudma topo show|check|path [--set KEY=VALUE]…`: print a scenario's fabric, validate
//! it, or show the route of one access (what it crosses, translations included, and where
//! it lands), on the scenario with `nudma run`'s overrides.

use std::process::ExitCode;

use fabric::describe;
use fabric::Access;
use nudma::api::{run as api, topo};

#[derive(clap::Subcommand)]
pub enum TopoCommand {
    /// Print the topology: hosts, PCIe trees with BARs and bridge windows, cables.
    Show {
        /// A scenario file or a built-in scenario name (`nudma list`).
        scenario: String,
        #[arg(long, value_enum, default_value = "text")]
        format: ShowFormat,
        /// Overrides a scenario key, as `nudma run --set` does (one value each).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Validate a scenario; prints a located error and exits non-zero when it is wrong.
    Check {
        scenario: String,
        /// Overrides a scenario key, as `nudma run --set` does (one value each).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// The route of one access: hops (switch chips), roots, every step, the target.
    Path {
        scenario: String,
        /// Overrides a scenario key, as `nudma run --set` does (one value each).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Requester: `host.device[.pfN]` or `host.cpu[N]`.
        #[arg(long)]
        from: String,
        /// Target: `host.device[.pfN][.barN]`, `host.ram[.nodeN]`, or a bus address
        /// (0x…) in the requester's host.
        #[arg(long)]
        to: String,
        /// Byte offset into the target endpoint: bytes, 0x…, or e.g. "1 MiB".
        #[arg(long, default_value = "0", value_parser = parse_u64)]
        offset: u64,
        /// Request length: bytes or e.g. "4 KiB" (at most 4096, not crossing a 4 KiB
        /// boundary).
        #[arg(long, default_value = "64", value_parser = parse_len)]
        len: u32,
        #[arg(long, value_enum, default_value = "read")]
        access: AccessArg,
        /// Accesses the requester keeps under way in the stream estimate (as a `dma`
        /// workload's `outstanding`); default: as many as it takes, so that only the
        /// fabric, the device's read tags and its data path (port, media) bound the stream.
        #[arg(long)]
        outstanding: Option<u64>,
        #[arg(long, value_enum, default_value = "text")]
        format: crate::Format,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ShowFormat {
    Text,
    Dot,
    Json,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum AccessArg {
    Read,
    Write,
}

/// A size argument, read as scenario files read sizes (`MB` and the like are refused with
/// a hint).
fn parse_u64(s: &str) -> Result<u64, String> {
    fabric::units::parse_size(s)
}

/// A request length: a size of 1..=4096 bytes.
fn parse_len(s: &str) -> Result<u32, String> {
    let n = fabric::units::parse_size(s)?;
    match u32::try_from(n) {
        Ok(n @ 1..=4096) => Ok(n),
        _ => Err(format!(
            "must be 1..=4096 bytes (one PCIe request), not {n}"
        )),
    }
}

pub fn run(c: TopoCommand) -> anyhow::Result<ExitCode> {
    match c {
        TopoCommand::Show {
            scenario,
            format,
            sets,
        } => {
            let f = topo::load_with(&scenario, &api::parse_sets(&sets)?)?;
            match format {
                ShowFormat::Text => print!("{}", describe::topology_text(&f)),
                ShowFormat::Dot => print!("{}", describe::topology_dot(&f)),
                ShowFormat::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&describe::topology_json(&f))?
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        TopoCommand::Check { scenario, sets } => {
            let sets = api::parse_sets(&sets)?;
            let f = topo::load_with(&scenario, &sets)?;
            let src = studies::run::source(&scenario)?;
            let point = studies::run::sweep(&sets).remove(0);
            let workloads = match studies::run::check(&src, &point)? {
                (0, _) => String::new(),
                (n, Some(m)) => format!(
                    "; {n} workload(s) over {} after {} of warm-up",
                    m.duration, m.warmup
                ),
                (n, None) => format!("; {n} workload(s), each timed once"),
            };
            println!("{}{workloads}", topo::check_summary(&f));
            Ok(ExitCode::SUCCESS)
        }
        TopoCommand::Path {
            scenario,
            sets,
            from,
            to,
            offset,
            len,
            access,
            outstanding,
            format,
        } => {
            let access = match access {
                AccessArg::Read => Access::Read,
                AccessArg::Write => Access::Write,
            };
            let q = topo::PathQuery {
                from: &from,
                to: &to,
                offset,
                len,
                access,
                outstanding,
            };
            let sets = api::parse_sets(&sets)?;
            let report = topo::path(&|| topo::load_with(&scenario, &sets), &q)?;
            let (req, setup, p, r) = (&report.request, &report.setup, &report.path, &report.result);
            let timed = &report.timed;
            let timing_error = &report.timing_error;
            let latency_ns = timed.as_ref().map(|t| t.0);
            let t = report.topo();
            match format {
                crate::Format::Json => {
                    println!("{}", serde_json::to_string_pretty(&report.json(&q))?);
                }
                crate::Format::Text => {
                    println!(
                        "{} {from} → {to}: {:?} of {len} B at {:#x}",
                        t.name, access, req.addr
                    );
                    for s in setup {
                        println!("  set up for this query: {s}");
                    }
                    for (i, s) in p.steps.iter().enumerate() {
                        println!(
                            "  {:>2}. {:<14} {}",
                            i + 1,
                            s.kind(),
                            describe::step_name(t, s)
                        );
                    }
                    match r {
                        Ok(target) => {
                            println!(
                                "  → {}\n  {} hop(s), {} root(s)",
                                describe::target_name(t, target),
                                p.hops(),
                                p.roots()
                            );
                            if let Some(l) = latency_ns {
                                println!(
                                    "  zero-load latency {l:.1} ns ({})",
                                    if access == Access::Write {
                                        "until the write lands"
                                    } else {
                                        "read round trip"
                                    }
                                );
                            }
                            if let Some((_, Some((gbps, why)))) = timed {
                                println!(
                                    "  streaming such accesses: {gbps:.2} GB/s, bound by {why}"
                                );
                            }
                            if let Some(e) = timing_error {
                                println!("  no timing: {e}");
                            }
                        }
                        Err(fault) => println!(
                            "  ✗ FAULT: {}\n  {} hop(s), {} root(s) before the fault",
                            describe::fault_text(t, fault),
                            p.hops(),
                            p.roots()
                        ),
                    }
                }
            }
            // A fault is the answer, not an error of the command, but scripts want to know.
            Ok(if r.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
