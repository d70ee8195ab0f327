//! `nudma topo show|check|path`: print a scenario's fabric, validate it, or show the
//! route of one access (what it crosses, translations included, and where it lands).

use std::process::ExitCode;

use fabric::describe;
use fabric::{Access, Fabric};
use studies::path_query::{has_timing, route_query, timed_request, PathAnswer};

#[derive(clap::Subcommand)]
pub enum TopoCommand {
    /// Print the topology: hosts, PCIe trees with BARs and bridge windows, cables.
    Show {
        /// A scenario file or a built-in scenario name (`nudma list`).
        scenario: String,
        #[arg(long, value_enum, default_value = "text")]
        format: ShowFormat,
    },
    /// Validate a scenario; prints a located error and exits non-zero when it is wrong.
    Check { scenario: String },
    /// The route of one access: hops (switch chips), roots, every step, the target.
    Path {
        scenario: String,
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
        /// fabric and the device's read tags bound the stream.
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

pub fn load(scenario: &str) -> anyhow::Result<Fabric> {
    let s = fabric::builtin::load_any(scenario)?;
    Ok(Fabric::from_scenario(s)?)
}

pub fn run(c: TopoCommand) -> anyhow::Result<ExitCode> {
    match c {
        TopoCommand::Show { scenario, format } => {
            let f = load(&scenario)?;
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
        TopoCommand::Check { scenario } => {
            let f = load(&scenario)?;
            let t = &f.topo;
            let devices = t.devices.len();
            println!(
                "{}: ok — {} host(s), {} PCIe node(s), {} device(s), {} NTB adapter(s), {} cable(s), {} cluster switch(es)",
                t.name,
                t.hosts.len(),
                t.nodes.len(),
                devices,
                t.ntbs.len(),
                t.cables.len(),
                t.cluster_switches.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        TopoCommand::Path {
            scenario,
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
            // One load: with timing parameters the query runs on the timed fabric (routing
            // is the same; loading a large cluster twice is not).
            let f = load(&scenario)?;
            let (mut plain, mut tf, mut timing_error) = if has_timing(&f) {
                match sim::timed::TimedFabric::new(f, 1) {
                    Ok(tf) => (None, Some(tf), None),
                    Err(e) => (
                        Some(load(&scenario)?),
                        None,
                        Some(format!("timing {from} → {to}: {}", e.0)),
                    ),
                }
            } else {
                (Some(f), None, None)
            };
            let f = match (&mut plain, &mut tf) {
                (Some(f), _) => f,
                (None, Some(tf)) => &mut tf.fabric,
                (None, None) => unreachable!("one of the two is made"),
            };
            let PathAnswer {
                request: req,
                setup,
                path: p,
                result: r,
            } = route_query(f, &from, &to, offset, len, access)?;
            // With timing parameters, the zero-load time of this one request: a write until
            // it lands, a read until its data is back (requester overheads not included).
            let timed = match (&r, tf.as_mut()) {
                (Ok(_), Some(tf)) => match timed_request(tf, &req, outstanding) {
                    Ok(t) => Some((t.latency_ns, t.stream)),
                    Err(e) => {
                        timing_error = Some(format!("timing {from} → {to}: {e}"));
                        None
                    }
                },
                _ => None,
            };
            let latency_ns = timed.as_ref().map(|t| t.0);
            let t = match (&plain, &tf) {
                (Some(f), _) => &f.topo,
                (None, Some(tf)) => &tf.fabric.topo,
                (None, None) => unreachable!("one of the two is made"),
            };
            match format {
                crate::Format::Json => {
                    let mut v = describe::path_json(t, &p, &r);
                    v["from"] = from.clone().into();
                    v["to"] = to.clone().into();
                    v["access"] = format!("{access:?}").to_lowercase().into();
                    v["address"] = req.addr.into();
                    v["len"] = len.into();
                    v["setup"] = setup.clone().into();
                    if let Some((l, stream)) = &timed {
                        v["latency_ns"] = (*l).into();
                        if let Some((gbps, why)) = stream {
                            v["stream"] = serde_json::json!({ "gbps": gbps, "bottleneck": why });
                        }
                    }
                    if let Some(e) = &timing_error {
                        v["timing_error"] = e.clone().into();
                    }
                    println!("{}", serde_json::to_string_pretty(&v)?);
                }
                crate::Format::Text => {
                    println!(
                        "{} {from} → {to}: {:?} of {len} B at {:#x}",
                        t.name, access, req.addr
                    );
                    for s in &setup {
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
                    match &r {
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
                            if let Some((_, Some((gbps, why)))) = &timed {
                                println!(
                                    "  streaming such accesses: {gbps:.2} GB/s, bound by {why}"
                                );
                            }
                            if let Some(e) = &timing_error {
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
