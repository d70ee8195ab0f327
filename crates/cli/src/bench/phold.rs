//! `nudma bench phold`: times the discrete-event engine on PHOLD (the catalog's
//! `engine.phold`) and, with `--baseline`, a binary-heap driver on the same random
//! sequence, side by side on this machine.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;
use sim::phold::{self, PholdConfig, PholdResult};

use crate::Format;

#[derive(clap::Args)]
pub struct PholdArgs {
    /// Logical processes (each starts with one event).
    #[arg(long, default_value_t = phold::DEFAULT_LPS)]
    lps: u64,
    /// Events to handle.
    #[arg(long, default_value_t = phold::DEFAULT_EVENTS)]
    events: u64,
    /// Seed of the random generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also run the binary-heap baseline (config "binary_heap").
    #[arg(long)]
    baseline: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// One timed driver run.
struct Measured {
    config: &'static str,
    result: PholdResult,
    wall_s: f64,
}

impl Measured {
    fn events_per_sec(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.result.events as f64 / self.wall_s
        } else {
            0.0
        }
    }
}

fn timed(
    config: &'static str,
    cfg: &PholdConfig,
    driver: fn(&PholdConfig) -> Result<PholdResult, phold::PholdError>,
) -> anyhow::Result<Measured> {
    let start = Instant::now();
    let result = driver(cfg).with_context(|| format!("PHOLD ({config}) failed"))?;
    let wall_s = start.elapsed().as_secs_f64();
    Ok(Measured {
        config,
        result,
        wall_s,
    })
}

pub fn run(a: PholdArgs) -> anyhow::Result<ExitCode> {
    let cfg = PholdConfig {
        lps: a.lps,
        events: a.events,
        seed: a.seed,
    };
    // Reject bad input before any work, with the library's message.
    cfg.validate()
        .context("invalid `nudma bench phold` arguments")?;

    let mut runs = vec![timed("default", &cfg, phold::run_engine)?];
    if a.baseline {
        runs.push(timed("binary_heap", &cfg, phold::run_binary_heap)?);
        if runs[0].result != runs[1].result {
            anyhow::bail!(
                "engine and binary-heap PHOLD disagree (checksum {} vs {}): \
                 event order is not deterministic",
                runs[0].result.checksum,
                runs[1].result.checksum
            );
        }
    }

    match a.format {
        Format::Json => {
            let results: Vec<_> = runs
                .iter()
                .map(|m| {
                    json!({
                        "experiment": "engine.phold",
                        "config": m.config,
                        "params": {"lps": cfg.lps, "events": cfg.events, "seed": cfg.seed},
                        "metrics": {
                            "events": m.result.events,
                            "wall_s": m.wall_s,
                            "events_per_sec": m.events_per_sec(),
                            "checksum": m.result.checksum,
                        },
                    })
                })
                .collect();
            println!("{}", json!({ "results": results }));
        }
        Format::Text => {
            println!(
                "engine.phold  lps={} events={} seed={}",
                cfg.lps, cfg.events, cfg.seed
            );
            println!(
                "{:<12} {:>12} {:>10} {:>14} {:>18}",
                "config", "events", "wall_s", "events/s", "checksum"
            );
            for m in &runs {
                println!(
                    "{:<12} {:>12} {:>10.3} {:>12.2} M {:>18}",
                    m.config,
                    m.result.events,
                    m.wall_s,
                    m.events_per_sec() / 1e6,
                    m.result.checksum
                );
            }
            if let [fast, heap] = &runs[..] {
                if heap.events_per_sec() > 0.0 {
                    println!(
                        "speed-up over binary heap: {:.2}x (simulated end time {})",
                        fast.events_per_sec() / heap.events_per_sec(),
                        fast.result.end_time
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
