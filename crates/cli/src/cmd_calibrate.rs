//! `nudma calibrate`: measure this machine's memory latency and read bandwidth per
//! (CPU node, memory node) pair and write them as a platform parameter file that
//! `nudma inspect --export --calibration FILE` folds into a scenario.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use inspect::calibrate::{calibrate, CalibrateOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Buffer per memory node: bytes or e.g. "512 MiB", 1 MiB to 256 GiB (default: 256
    /// MiB or 8 x the LLC, the larger).
    #[arg(long, value_name = "SIZE", value_parser = parse_buffer_size, conflicts_with = "size_mb")]
    pub size: Option<u64>,
    /// The buffer in MiB (2^20 bytes) as a plain number, 1 to 262144.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=262_144))]
    pub size_mb: Option<u64>,
    /// Timed repetitions of each measurement, after an untimed warm-up (their median is reported).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub iterations: u32,
    /// Bandwidth threads per CPU node (default: one per CPU of the node).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub threads: Option<u64>,
    /// Write the `[platform.NAME.memory]` parameter file here.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Platform name in the parameter file (matches `inspect --export`).
    #[arg(long, value_name = "NAME", default_value = "imported", value_parser = parse_platform)]
    pub platform: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// A buffer size, read as scenario files read sizes (`MB` and the like are refused with a
/// hint): 1 MiB to 256 GiB.
fn parse_buffer_size(s: &str) -> Result<u64, String> {
    let n = fabric::units::parse_size(s)?;
    if (1 << 20..=256 << 30).contains(&n) {
        Ok(n)
    } else {
        Err(format!("must be 1 MiB to 256 GiB, not {n} bytes"))
    }
}

fn parse_platform(s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
    {
        Ok(s.to_string())
    } else {
        Err("platform names use [a-z0-9_-]".to_string())
    }
}

pub fn run(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let options = CalibrateOptions {
        size_bytes: a.size.or(a.size_mb.map(|m| m << 20)).map(|b| b as usize),
        iterations: a.iterations,
        loads: None,
        threads: a.threads.map(|t| t as usize),
    };
    let result = calibrate(&options, &mut |msg| eprintln!("calibrate: {msg}"))?;
    let params = result.to_params(&a.platform);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match a.format {
        Format::Human => {
            out.write_all(result.render_human().as_bytes())?;
            if a.out.is_none() {
                writeln!(out, "\nparameter file (write it with --out FILE):\n")?;
                out.write_all(params.to_fragment().as_bytes())?;
            }
        }
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &result)?;
            writeln!(out)?;
        }
    }
    if let Some(path) = &a.out {
        std::fs::write(path, params.to_fragment())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CalibrateArgs,
    }

    fn parse(list: &[&str]) -> Result<CalibrateArgs, clap::Error> {
        let mut v = vec!["calibrate"];
        v.extend_from_slice(list);
        Cli::try_parse_from(v).map(|c| c.args)
    }

    #[test]
    fn options_parse_and_bad_values_are_rejected() {
        let a = parse(&["--size-mb", "64", "--iterations", "2", "--out", "x.toml"]).unwrap();
        assert_eq!(
            (a.size_mb, a.iterations, a.platform.as_str()),
            (Some(64), 2, "imported")
        );
        assert!(parse(&["--size-mb", "0"]).is_err());
        let a = parse(&["--size", "512 MiB"]).unwrap();
        assert_eq!(a.size, Some(512 << 20));
        let e = parse(&["--size", "512 MB"]).unwrap_err().to_string();
        assert!(
            e.contains("`512 MB` is ambiguous: write `512 MiB` (512 × 2^20 bytes) or `512000000`"),
            "{e}"
        );
        assert!(parse(&["--size", "4 KiB"]).is_err(), "below 1 MiB");
        assert!(parse(&["--size", "1 GiB", "--size-mb", "64"]).is_err());
        assert!(parse(&["--iterations", "0"]).is_err());
        assert!(parse(&["--platform", "Bad Name"]).is_err());
        assert!(parse(&["--format", "yaml"]).is_err());
    }
}
