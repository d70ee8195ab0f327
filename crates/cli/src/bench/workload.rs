//! `nudma bench net | nvme | rdma`: one workload of a built-in bench scenario
//! (`scenarios/bench/*.toml`, embedded in the binary), run as `nudma run` runs a point
//! (`studies::run::run_point`, on this thread), timed with the wall clock. Reports the
//! simulated time (warm-up + window), the wall time, simulated seconds per wall second,
//! and what the workload moved, so a reader sees it really ran at its rate.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use fabric::scenario::Source;
use serde_json::{json, Map, Value};
use studies::run::overrides::{self, Override};
use studies::run::spec::{self, Kind, Measure};
use studies::run::{self, PointResult};

use super::{per_wall_s, row};
use crate::Format;

#[derive(clap::Args)]
pub struct WorkloadArgs {
    /// Simulated measurement window, e.g. "100 ms" (default: the bench scenario's).
    #[arg(long)]
    duration: Option<String>,
    /// Simulated warm-up before the window, e.g. "2 ms" (default: the bench scenario's).
    #[arg(long)]
    warmup: Option<String>,
    /// Seed of the simulation's random generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// A workload benchmark.
#[derive(Clone, Copy)]
pub enum Bench {
    Net,
    Nvme,
    Rdma,
}

impl Bench {
    fn name(self) -> &'static str {
        match self {
            Bench::Net => "net",
            Bench::Nvme => "nvme",
            Bench::Rdma => "rdma",
        }
    }

    /// The built-in scenario file, relative to `scenarios/`.
    fn file(self) -> String {
        format!("bench/{}.toml", self.name())
    }
}

/// One timed run of a bench scenario's single workload.
struct Timed {
    workload: String,
    kind: Kind,
    measure: Measure,
    wall_s: f64,
    result: PointResult,
}

impl Timed {
    fn sim_s(&self) -> f64 {
        (self.measure.warmup + self.measure.duration).as_secs_f64()
    }

    /// A metric of the workload's row, as a number; an error when the row lacks it (a
    /// renamed metric must not turn into a figure of 0).
    fn metric(&self, key: &str) -> anyhow::Result<f64> {
        let r = self.result.rows.first();
        r.and_then(|r| r.metrics.get(key))
            .and_then(Value::as_f64)
            .with_context(|| format!("workload `{}` gave no metric `{key}`", self.workload))
    }

    /// A counter of a network or RDMA workload (whole run, warm-up included); an error
    /// when it lacks it.
    fn counter(&self, key: &str) -> anyhow::Result<f64> {
        self.result.counters["network"][&self.workload][key]
            .as_f64()
            .with_context(|| format!("workload `{}` gave no counter `{key}`", self.workload))
    }
}

/// The embedded bench scenario `file`.
fn builtin(file: &str) -> anyhow::Result<Source> {
    fabric::builtin::FILES
        .iter()
        .find(|(p, _)| *p == file)
        .map(|(p, t)| Source {
            name: format!("builtin:{p}"),
            text: t.to_string(),
        })
        .with_context(|| format!("no built-in scenario file `{file}` in this build"))
}

fn timed_run(b: Bench, a: &WorkloadArgs) -> anyhow::Result<Timed> {
    let src = builtin(&b.file())?;
    let mut sets = Vec::new();
    for (key, v) in [("warmup", &a.warmup), ("duration", &a.duration)] {
        if let Some(v) = v {
            spec::parse_duration(v).map_err(anyhow::Error::msg)?;
            sets.push(Override::parse(&format!("measure.{key}={v}")).map_err(anyhow::Error::msg)?);
        }
    }
    let point = run::sweep(&sets).remove(0);
    let applied = overrides::apply(&src, &point).map_err(anyhow::Error::msg)?;
    let parsed = spec::parse(&applied)?;
    let [w] = &parsed.workloads[..] else {
        anyhow::bail!("{}: a bench scenario has exactly one workload", src.name);
    };
    let Some(measure) = parsed.window() else {
        anyhow::bail!("{}: a bench scenario measures over a window", src.name);
    };
    let start = Instant::now();
    let result = run::run_point(&src, &point, a.seed)?;
    let wall_s = start.elapsed().as_secs_f64();
    Ok(Timed {
        workload: w.name.clone(),
        kind: w.kind.clone(),
        measure,
        wall_s,
        result,
    })
}

/// What the workload is, for `params`.
fn describe(kind: &Kind) -> Map<String, Value> {
    let v = match kind {
        Kind::Netperf {
            msg_bytes,
            connections,
            cpu_node,
            mem_node,
            ..
        } => json!({
            "kind": "netperf TCP_STREAM rx", "connections": connections,
            "msg_bytes": msg_bytes, "cpu_node": cpu_node, "mem_node": mem_node,
        }),
        Kind::Fio {
            threads,
            iodepth,
            block_bytes,
            cpu_node,
            mem_node,
            ..
        } => json!({
            "kind": "fio randread", "threads": threads, "iodepth": iodepth,
            "block_bytes": block_bytes, "cpu_node": cpu_node, "mem_node": mem_node,
        }),
        Kind::RdmaBench(r) => json!({
            "kind": "rdma_bench", "verb": format!("{:?}", r.verb).to_lowercase(),
            "bytes": r.bytes, "connections": r.connections, "open_loop": r.open,
            "depth": r.depth, "server_remote": r.server_remote,
        }),
        other => json!({ "kind": other.name() }),
    };
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The metrics of bench `b`, in print order: timing first, then what the workload moved.
/// Counts are integers.
fn metrics(b: Bench, t: &Timed) -> anyhow::Result<Vec<(&'static str, Value)>> {
    let mut m = Vec::new();
    let mut put = |k: &'static str, v: f64| m.push((k, json!(v)));
    put("warmup_s", t.measure.warmup.as_secs_f64());
    put("window_s", t.measure.duration.as_secs_f64());
    put("sim_s", t.sim_s());
    put("wall_s", t.wall_s);
    put("sim_s_per_wall_s", per_wall_s(t.sim_s(), t.wall_s));
    let window_s = t.measure.duration.as_secs_f64();
    let count = |x: f64| json!(x.round() as u64);
    match b {
        Bench::Net => {
            put("throughput_gbit_s", t.metric("throughput_gbit_s")?);
            put("mem_bw_gbit_s", t.metric("mem_bw_gbit_s")?);
            put("receiver_cpu_util", t.metric("cpu_util")?);
            // Whole run, warm-up included.
            let (frames, events) = (t.counter("frames")?, t.counter("events")?);
            m.push(("bytes_delivered", count(t.counter("bytes_delivered")?)));
            m.push(("frames", count(frames)));
            m.push(("frames_per_wall_s", json!(per_wall_s(frames, t.wall_s))));
            m.push(("events", count(events)));
            m.push(("events_per_wall_s", json!(per_wall_s(events, t.wall_s))));
        }
        Bench::Nvme => {
            let iops = t.metric("ops_per_sec")?;
            // Commands completed in the window (fio counts the window only); the
            // warm-up's and the controller bring-up's wall time is in `wall_s`.
            let cmds = (iops * window_s).round();
            put("iops", iops);
            put("throughput_gbyte_s", t.metric("throughput_gbyte_s")?);
            put("latency_ns_p50", t.metric("latency_ns_p50")?);
            m.push(("errors", count(t.metric("errors")?)));
            m.push(("nvme_cmds", count(cmds)));
            m.push(("nvme_cmds_per_wall_s", json!(per_wall_s(cmds, t.wall_s))));
        }
        Bench::Rdma => {
            // Whole run, warm-up included.
            let ops = t.counter("operations")?;
            put("ops_per_s", t.metric("ops_per_sec")?);
            put("throughput_gbyte_s", t.metric("throughput_gbyte_s")?);
            m.push(("rdma_ops", count(ops)));
            m.push(("rdma_ops_per_wall_s", json!(per_wall_s(ops, t.wall_s))));
        }
    }
    Ok(m)
}

/// A number for the text table.
fn text(v: &Value) -> String {
    let x = v.as_f64().unwrap_or(0.0);
    if v.is_u64() || v.is_i64() {
        format!("{x:.0}")
    } else if x == 0.0 || x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.6}")
    }
}

pub fn run(b: Bench, a: WorkloadArgs) -> anyhow::Result<ExitCode> {
    let t = timed_run(b, &a).with_context(|| format!("`nudma bench {}` failed", b.name()))?;
    let mut params = Map::new();
    params.insert("scenario".into(), json!(b.file()));
    params.insert("workload".into(), json!(t.workload));
    params.extend(describe(&t.kind));
    params.insert("seed".into(), json!(a.seed));
    let m = metrics(b, &t).with_context(|| format!("`nudma bench {}` failed", b.name()))?;
    match a.format {
        Format::Json => {
            let m: Map<String, Value> = m.into_iter().map(|(k, v)| (k.into(), v)).collect();
            let r = row(&format!("bench.{}", b.name()), "default", params, json!(m));
            println!("{}", json!({ "results": [r] }));
        }
        Format::Text => {
            let p: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("bench.{}  {}", b.name(), p.join(" ").replace('"', ""));
            let w = m.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (k, v) in &m {
                println!("  {k:<w$}  {:>14}", text(v));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_the_workload_no_longer_reports_is_an_error_not_zero() {
        let a = WorkloadArgs {
            duration: Some("1 ms".into()),
            warmup: Some("100 us".into()),
            seed: 1,
            format: Format::Text,
        };
        let mut t = timed_run(Bench::Rdma, &a).unwrap();
        let ops = metrics(Bench::Rdma, &t).unwrap();
        assert!(ops
            .iter()
            .any(|(k, v)| *k == "ops_per_s" && v.as_f64() > Some(1e6)));
        t.result.rows[0].metrics.remove("ops_per_sec");
        let e = metrics(Bench::Rdma, &t).unwrap_err().to_string();
        assert_eq!(e, "workload `reads` gave no metric `ops_per_sec`");
    }
}
