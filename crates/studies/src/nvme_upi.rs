//! The probe of `ioctopus.nvme_upi`: fio on NVMe devices (`systems::drivers::fio`) beside
//! STREAM-like antagonists (`sim::cpu_stream`), each run on a fresh copy of the config's
//! hardware, and the same without the other party for the normalisations:
//!
//! * `fio_norm` = fio's throughput with `streams` antagonists ÷ with none (same config);
//! * `stream_norm` = the antagonists' bandwidth beside fio ÷ the same antagonists alone
//!   (same config, same count): what fio's DMA costs STREAM; null at 0 streams.
//!
//! `upi_util` is the busiest interconnect link direction's share of its bandwidth over the
//! window (bytes on the wire, headers included).

use std::collections::BTreeMap;

use fabric::units::parse_size;
use fabric::Fabric;
use serde_json::{json, Value};
use sim::component::Sim;
use sim::cpu_stream::{CpuStream, StreamOp};
use sim::timed::TimedFabric;
use sim::Time;
use systems::drivers::fio::{Fio, FioSpec};

use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// Warm-up and window (simulated). fio here is bound by the SSDs' media: its throughput
/// is steady once the first commands complete (~90 µs of media latency plus a transfer);
/// STREAM's within a few miss latencies. Against a 4 ms window (checked when this was
/// written) the ratios and `upi_util` move by under 0.3 %, `fio_gbps` by 1 % (one 128 KiB
/// completion per SSD in 1 ms), so 1 ms is used.
const WARMUP: Time = Time::from_us(200);
const WINDOW: Time = Time::from_us(1000);

/// What one run measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UpiRun {
    pub fio_gbps: f64,
    pub stream_gbps: f64,
    pub upi_util: f64,
}

/// The experiment's set-up, from the probe's arguments.
#[derive(Clone, Debug)]
pub struct UpiSetup {
    pub devices: Vec<String>,
    pub fio_node: u32,
    pub threads: u16,
    pub iodepth: u16,
    pub block_bytes: u64,
    pub stream_cpu_node: u32,
    pub stream_mem_node: u32,
    pub stream_op: StreamOp,
    pub stream_misses: u32,
}

/// One run on a fresh copy of `topo`: fio on every device (unless `fio` is false) and
/// `streams` antagonists, measured over the window.
pub fn run_once(
    topo: &fabric::Topology,
    s: &UpiSetup,
    streams: u32,
    fio: bool,
) -> Result<UpiRun, String> {
    let mut tf = TimedFabric::new(Fabric::new(topo.clone()), 1).map_err(|e| e.0)?;
    let mut sim: Sim<TimedFabric> = Sim::new();
    let host = 0;
    let mut jobs = Vec::new();
    if fio {
        for (i, d) in s.devices.iter().enumerate() {
            let spec = FioSpec {
                device: d.clone(),
                cpu_node: s.fio_node,
                mem_node: s.fio_node,
                threads: s.threads,
                iodepth: s.iodepth,
                block_bytes: s.block_bytes,
                write: false,
                random: true,
                seed: i as u64 + 1,
                lasts: WARMUP + WINDOW,
            };
            jobs.push(Fio::probe(&mut tf, &mut sim, spec).map_err(|e| e.0)?);
        }
    }
    let origin = tf.net.now();
    let mut ants = Vec::new();
    for _ in 0..streams {
        let st = tf
            .cpu_stream(
                host,
                s.stream_cpu_node,
                s.stream_mem_node,
                s.stream_op,
                s.stream_misses,
            )
            .map_err(|e| e.0)?;
        let id = sim.add(st);
        tf.net.wake_at(origin, id);
        ants.push(id);
    }
    for j in &jobs {
        j.start(&mut tf);
    }
    sim.run_until(&mut tf, origin + WARMUP);
    for j in &mut jobs {
        j.reset_stats(&mut sim);
    }
    for &a in &ants {
        sim.get_mut::<CpuStream>(a).expect("stream").reset_stats();
    }
    let before = tf.net.counters_sent();
    sim.run_until(&mut tf, origin + WARMUP + WINDOW);
    let after = tf.net.counters_sent();
    let secs = WINDOW.as_secs_f64();
    let mut fio_bytes = 0;
    for j in &jobs {
        let st = j.stats(&sim).map_err(|e| e.0)?;
        if st.errors > 0 || st.faults > 0 {
            return Err(format!(
                "{}: {} I/O errors, {} driver faults",
                j.spec.device, st.errors, st.faults
            ));
        }
        fio_bytes += st.bytes;
    }
    let stream_bytes: u64 = ants
        .iter()
        .map(|&a| sim.get::<CpuStream>(a).expect("stream").window_bytes)
        .sum();
    // The busiest interconnect direction: bytes on the wire over its bandwidth.
    let p = tf.fabric.topo.platform_of(host);
    let pt = tf.timing_of(host);
    let hname = &tf.fabric.topo.host(host).name;
    let mut upi_util: f64 = 0.0;
    for l in &p.interconnect {
        let gbps = l
            .bandwidth_gbps
            .unwrap_or(pt.interconnect_gbps * l.count as f64);
        let base = format!("{hname} {}-{}", p.vertex_name(l.a), p.vertex_name(l.b));
        for dir in ["→", "←"] {
            let name = format!("{base} {dir}");
            let bytes =
                |c: &sim::net::Counters| c.wires.iter().find(|w| w.0 == name).map_or(0, |w| w.1);
            let moved = bytes(&after).saturating_sub(bytes(&before));
            upi_util = upi_util.max(moved as f64 / secs / 1e9 / gbps);
        }
    }
    Ok(UpiRun {
        fio_gbps: fio_bytes as f64 / secs / 1e9,
        stream_gbps: stream_bytes as f64 / secs / 1e9,
        upi_util,
    })
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn number<T: std::str::FromStr>(cx: &ProbeCx, key: &str) -> Result<T, RunError> {
    let v = cx.arg(key)?;
    v.parse()
        .map_err(|_| cx.error(format!("{key} = `{v}` is not a whole number")))
}

/// `fio_streams`: args `devices` (comma-separated `host.device`), `fio_node`, `threads`,
/// `iodepth`, `block_bytes`, `stream_cpu_node`, `stream_mem_node`, `stream_op`
/// (`read`/`write`), `stream_misses`; swept `streams`.
pub fn fio_streams(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let block =
        parse_size(&cx.arg("block_bytes")?).map_err(|e| cx.error(format!("block_bytes: {e}")))?;
    let setup = UpiSetup {
        devices: cx
            .arg("devices")?
            .split(',')
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .collect(),
        fio_node: number(cx, "fio_node")?,
        threads: number(cx, "threads")?,
        iodepth: number(cx, "iodepth")?,
        block_bytes: block,
        stream_cpu_node: number(cx, "stream_cpu_node")?,
        stream_mem_node: number(cx, "stream_mem_node")?,
        stream_op: match cx.choice("stream_op", "write", "read")? {
            true => StreamOp::Write,
            false => StreamOp::Read,
        },
        stream_misses: number(cx, "stream_misses")?,
    };
    if setup.devices.is_empty() {
        return Err(cx.error("devices: name at least one `host.device`"));
    }
    let streams = cx.need_swept("streams")? as u32;
    let topo = cx.tf.fabric.topo.clone();
    let run = |n, fio| run_once(&topo, &setup, n, fio).map_err(|e| cx.error(e));
    let both = run(streams, true)?;
    let fio_alone = if streams == 0 { both } else { run(0, true)? };
    let (stream_alone, stream_norm) = if streams == 0 {
        (0.0, Value::Null)
    } else {
        let a = run(streams, false)?.stream_gbps;
        (a, json!(round4(both.stream_gbps / a)))
    };
    Ok(BTreeMap::from([
        ("fio_gbps".into(), json!(round4(both.fio_gbps))),
        (
            "fio_norm".into(),
            json!(round4(both.fio_gbps / fio_alone.fio_gbps)),
        ),
        ("stream_gbps".into(), json!(round4(both.stream_gbps))),
        ("stream_alone_gbps".into(), json!(round4(stream_alone))),
        ("stream_norm".into(), stream_norm),
        ("upi_util".into(), json!(round4(both.upi_util))),
    ]))
}
