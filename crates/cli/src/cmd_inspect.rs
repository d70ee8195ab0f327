//! `nudma inspect`: audit a real machine (live sysfs, a sysfs snapshot, or an hwloc
//! XML export) for non-uniform I/O, print the findings with their fixes, and
//! optionally export the machine as a scenario TOML.
//!
//! Exit status: 0 when the audit ran (findings or not); 1 with `--fail-on SEVERITY`
//! when a finding is at or above that severity; 2 for bad input (via `main`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use inspect::export::{scenario_toml, Calibration};
use inspect::platform_file::MemoryParams;
use inspect::Severity;
use nudma::api::audit;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// Read sysfs and procfs under DIR (a snapshot, e.g. from hwloc-gather-topology);
    /// the default is this machine (`/`).
    #[arg(long, value_name = "DIR", conflicts_with = "hwloc")]
    pub sysfs_root: Option<PathBuf>,
    /// Import an hwloc XML export (hwloc 1.x, 2.x or 3.x) instead of reading sysfs.
    #[arg(long, value_name = "FILE.xml")]
    pub hwloc: Option<PathBuf>,
    /// Also audit these processes: their threads' CPUs and their memory per node.
    #[arg(long, value_name = "PID", num_args = 1.., conflicts_with = "hwloc")]
    pub pid: Vec<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Exit with status 1 when a finding is at or above this severity
    /// (info < warning < error).
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity)]
    pub fail_on: Option<Severity>,
    /// Write the imported machine as a scenario TOML for the simulator.
    #[arg(long, value_name = "FILE.toml")]
    pub export: Option<PathBuf>,
    /// Fill the exported memory latency/bandwidth from `nudma calibrate --out FILE`.
    #[arg(long, value_name = "FILE", requires = "export")]
    pub calibration: Option<PathBuf>,
}

fn parse_severity(s: &str) -> Result<Severity, String> {
    s.parse::<Severity>().map_err(|e| e.to_string())
}

pub fn run(a: InspectArgs) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let code = execute(&a, &mut out)?;
    Ok(ExitCode::from(code))
}

/// Runs the audit, writing the report to `out`; returns the exit status.
pub fn execute(a: &InspectArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    // Read the calibration first: a bad file is bad input, reported before any work.
    let calibration = match &a.calibration {
        Some(p) => Some(MemoryParams::read(p)?),
        None => None,
    };
    let cal = match (&calibration, &a.calibration) {
        (Some(params), Some(p)) => Some((params, p.as_path())),
        _ => None,
    };
    let (machine, result) = audit::run(&audit::AuditInput {
        sysfs_root: a.sysfs_root.as_deref(),
        hwloc: a.hwloc.as_deref(),
        pids: &a.pid,
        calibration: cal,
    })?;
    match a.format {
        Format::Human => out.write_all(inspect::report::render_human(&result).as_bytes())?,
        Format::Json => {
            // Serialise the struct (not a Value) to keep the documented field order.
            serde_json::to_writer_pretty(&mut *out, &result)?;
            writeln!(out)?;
        }
    }
    if let Some(path) = &a.export {
        let cal = match (&calibration, &a.calibration) {
            (Some(params), Some(p)) => Some(Calibration { params, path: p }),
            _ => None,
        };
        let export = scenario_toml(&machine, cal)?;
        std::fs::write(path, &export.toml)
            .with_context(|| format!("writing the scenario to {}", path.display()))?;
        eprintln!(
            "wrote scenario {} ({} device(s), {} NUMA node(s){})",
            path.display(),
            export.device_names.len(),
            export.node_ids.len(),
            if export.memory_only > 0 {
                format!(", {} of them memory-only", export.memory_only)
            } else {
                String::new()
            }
        );
    }
    Ok(result.exit_code(a.fail_on))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::Path;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: InspectArgs,
    }

    fn args(list: &[&str]) -> InspectArgs {
        let mut v = vec!["inspect"];
        v.extend_from_slice(list);
        Cli::try_parse_from(v).expect("arguments parse").args
    }

    /// A file of the hwloc fixtures: `$NUDMA_FIXTURES`, else the repository's
    /// `fixtures/hwloc` (`../../fixtures/hwloc` from this crate).
    fn fixture(rel: &str) -> String {
        let dir = match std::env::var_os("NUDMA_FIXTURES") {
            Some(d) => std::path::PathBuf::from(d),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hwloc"),
        };
        let p = dir.join(rel);
        assert!(
            p.exists(),
            "fixture {} missing (set NUDMA_FIXTURES)",
            p.display()
        );
        p.display().to_string()
    }

    /// Unpacks a sysfs snapshot into a temp dir (with the `tar` command).
    fn snapshot(name: &str, dir_name: &str) -> (tempfile::TempDir, String) {
        let archive = fixture(&format!("sysfs/{name}"));
        // tmpfs when available: ~10 000 small files unpack slowly on some disks.
        let tmp = tempfile::Builder::new()
            .prefix("nudma-")
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("temp dir");
        let status = std::process::Command::new("tar")
            .arg("xjf")
            .arg(&archive)
            .arg("-C")
            .arg(tmp.path())
            .status()
            .expect("the tar command runs");
        assert!(status.success(), "tar failed for {archive}");
        let root = tmp.path().join(dir_name).display().to_string();
        (tmp, root)
    }

    fn run_json(a: &InspectArgs) -> (u8, serde_json::Value) {
        let mut buf = Vec::new();
        let code = execute(a, &mut buf).expect("audit runs");
        (code, serde_json::from_slice(&buf).expect("valid JSON"))
    }

    #[test]
    fn json_shape_from_hwloc_xml() {
        let xml = fixture("xml/32em64t-2n8c2t-pci-normalio.xml");
        let (code, v) = run_json(&args(&["--hwloc", &xml, "--format", "json"]));
        assert_eq!(code, 0);
        assert_eq!(v["numa_nodes"], 2);
        let devices = v["devices"].as_array().unwrap();
        let eth0 = devices
            .iter()
            .find(|d| d["bdf"] == "0000:81:00.0")
            .expect("eth0's function");
        assert_eq!(eth0["class"], "net");
        assert_eq!(eth0["pci_class"], "0x020000");
        assert_eq!(eth0["numa_node"], 1);
        assert!(eth0["link"].is_object());
        assert!(eth0["findings"].is_array());
        for f in v["findings"].as_array().unwrap() {
            assert!(["info", "warning", "error"].contains(&f["severity"].as_str().unwrap()));
            assert!(f["what"].is_string() && f["why"].is_string());
            assert!(f["fix"].is_array());
        }
    }

    #[test]
    fn null_numa_node_and_fail_on() {
        let (_tmp, root) = snapshot(
            "40intel64-2g2n4c+pcilocality.tar.bz2",
            "40intel64-2g2n4c+pci",
        );
        let (code, v) = run_json(&args(&["--sysfs-root", &root, "--format", "json"]));
        assert_eq!(code, 0, "an audit with findings still exits 0");
        let eth0 = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["bdf"] == "0000:02:00.0")
            .unwrap();
        assert!(eth0["numa_node"].is_null());
        assert!(eth0["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["severity"] == "warning"));

        let (code, _) = run_json(&args(&[
            "--sysfs-root",
            &root,
            "--format",
            "json",
            "--fail-on",
            "warning",
        ]));
        assert_eq!(code, 1, "warnings present, --fail-on warning");
        let (code, _) = run_json(&args(&[
            "--sysfs-root",
            &root,
            "--format",
            "json",
            "--fail-on",
            "error",
        ]));
        assert_eq!(code, 0, "no errors in this snapshot");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        let e = execute(&args(&["--hwloc", "/nonexistent/x.xml"]), &mut buf).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.xml"));
        let e = execute(&args(&["--sysfs-root", "/nonexistent-root"]), &mut buf).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-root"));
        assert!(
            Cli::try_parse_from(["inspect", "--fail-on", "fatal"]).is_err(),
            "unknown severity"
        );
        assert!(Cli::try_parse_from(["inspect", "--calibration", "x"]).is_err());
    }

    #[test]
    fn live_machine_runs() {
        let (code, v) = run_json(&args(&["--format", "json"]));
        assert_eq!(code, 0);
        assert!(v["numa_nodes"].as_u64().unwrap() >= 1);
    }

    #[test]
    fn export_writes_toml() {
        let xml = fixture("xml/24em64t-2n6c2t-pci.xml");
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("s.toml");
        let a = args(&["--hwloc", &xml, "--export", out.to_str().unwrap()]);
        let mut buf = Vec::new();
        assert_eq!(execute(&a, &mut buf).unwrap(), 0);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("[platform.imported]"));
        assert!(text.contains("[[host.device]]"));
    }
}
