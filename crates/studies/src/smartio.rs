//! SmartIO data-path experiments (EXPERIMENTS.md "smartio", hardware REFERENCE.md §2):
//! RAM-to-RAM latency across NTBs, the NTB adapter's DMA engine, bandwidthTest on a lent
//! GPU, and GPU peer-to-peer across lenders. Each picks hardware, placement and workload;
//! the numbers come from the fabric's routes and the timing layer.

use devices::{Counters, Gpu, Op};
use fabric::Requester;
use serde_json::{json, Map, Value};
use sim::timed::ns;
use sim::Time;

use crate::harness::*;
use crate::result::{ExperimentInfo, Reference, Run};

fn run(experiment: &str, config: &str, params: Value, metrics: Value) -> Run {
    let obj = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Run {
        experiment: experiment.into(),
        config: config.into(),
        params: obj(params),
        metrics: obj(metrics),
        counters: Map::new(),
    }
}

/// One-way latency of a CPU store reaching the other host's RAM: the store leaves the
/// core, crosses the fabric as a posted write, lands, and the polling core sees it.
pub fn ram_latency() -> Result<Vec<Run>, RunError> {
    let configs = [
        ("pxh810_b2b", "smartio_pxh810_b2b", "borrower", "lender"),
        ("pxh830_b2b", "smartio_pxh830_b2b", "a", "b"),
        ("three_way", "smartio_three_way", "user", "lender1"),
        ("via_mxs824", "smartio_chassis_mxs824", "borrower", "lender"),
    ];
    let mut out = Vec::new();
    for (config, scenario, from, to) in configs {
        let mut tf = load(scenario, &[])?;
        let cpu = requester(&tf, &format!("{from}.cpu"))?;
        let bus = map_buffer(&mut tf, cpu, &format!("{to}.ram"), 1 << 20, 64)?;
        let (src, dst) = (
            tf.fabric.topo.host_by_name(from).unwrap(),
            tf.fabric.topo.host_by_name(to).unwrap(),
        );
        let store = ns(tf.timing_of(src).cpu_mmio_write_ns);
        let poll = ns(tf.timing_of(dst).cpu_poll_ns);
        let fly = one_way(&mut tf, cpu, bus)?;
        let t = store + fly + poll;
        out.push(run(
            "smartio.ram_latency",
            config,
            json!({}),
            json!({ "oneway_ns": t.as_ns_f64() }),
        ));
    }
    Ok(out)
}

/// The NTB adapter's DMA engine copying RAM to the other host's RAM (write) and back
/// (read), PXH810 back-to-back.
pub fn ntb_dma() -> Result<Vec<Run>, RunError> {
    let mut out = Vec::new();
    for bytes in sizes(4 << 10, 64 << 20) {
        let mut metrics = Map::new();
        let mut counters = Map::new();
        for (metric, write) in [("write_gbps", true), ("read_gbps", false)] {
            let mut tf = load("smartio_pxh810_b2b", &[])?;
            let engine = requester(&tf, "borrower.ntb")?;
            let local = map_buffer(&mut tf, engine, "borrower.ram", 1 << 30, bytes)?;
            // The copy crosses to the lender: the MPS in force is the smaller one.
            let (remote, spec) = dma_to(&mut tf, engine, "lender.ram", 1 << 30, bytes)?;
            let setup = ns(device_param(&tf, engine, "dma_setup_ns")?);
            let op = if write {
                Op::Copy {
                    src: local,
                    dst: remote,
                }
            } else {
                Op::Copy {
                    src: remote,
                    dst: local,
                }
            };
            let t = setup + dma_time(&mut tf, engine, spec, op, bytes)?;
            metrics.insert(metric.into(), json!(gbps(bytes, t)));
            counters.insert(metric.into(), counters_json(&tf, bytes));
        }
        let mut r = run(
            "smartio.ntb_dma",
            "default",
            json!({ "bytes": bytes }),
            Value::Object(metrics),
        );
        r.counters = counters;
        out.push(r);
    }
    Ok(out)
}

/// A GPU copy timed from launch until the host sees it complete: the CPU rings the GPU
/// (doorbell write), the copy engine starts after its launch overhead, runs the DMA, then
/// writes a completion flag into host RAM that the host polls.
fn gpu_copy(
    tf: &mut TimedFabric,
    gpu: Requester,
    cpu: Requester,
    gpu_name: &str,
    user_ram: &str,
    bytes: u64,
    write: bool,
) -> Result<Time, RunError> {
    let (buf, spec) = dma_to(tf, gpu, user_ram, 1 << 30, bytes)?;
    let flag = map_buffer(tf, gpu, user_ram, 1 << 29, 64)?;
    let doorbell = map_buffer(tf, cpu, &format!("{gpu_name}.bar0"), 0, 4)?;
    let user_host = tf.fabric.requester_host(cpu);
    let launch = ns(tf.timing_of(user_host).cpu_mmio_write_ns)
        + one_way(tf, cpu, doorbell)?
        + ns(device_param(tf, gpu, "launch_ns")?);
    let op = if write {
        Op::Write { dst: buf }
    } else {
        Op::Read { src: buf }
    };
    let dma = dma_time(tf, gpu, spec, op, bytes)?;
    let notify = one_way(tf, gpu, flag)? + ns(tf.timing_of(user_host).cpu_poll_ns);
    Ok(launch + dma + notify)
}

use sim::timed::TimedFabric;

/// bandwidthTest on a Quadro P4000 in the chassis, local or lent, and a Tesla K40 over
/// PXH810.
pub fn gpu_dma() -> Result<Vec<Run>, RunError> {
    // (config, scenario, host IOMMU choices, GPU, the user's host)
    type Config<'a> = (&'a str, &'a str, &'a [(&'a str, bool)], &'a str, &'a str);
    let configs: [Config; 5] = [
        ("local", "smartio_chassis_baseline", &[], "user.gpu", "user"),
        (
            "lent_b2b",
            "smartio_chassis_b2b",
            &[],
            "lender.gpu",
            "borrower",
        ),
        (
            "lent_switch",
            "smartio_chassis_mxs824",
            &[],
            "lender.gpu",
            "borrower",
        ),
        (
            "lent_lender_iommu",
            "smartio_chassis_b2b",
            &[("lender", true)],
            "lender.gpu",
            "borrower",
        ),
        (
            "k40_pxh810",
            "smartio_pxh810_b2b",
            &[],
            "lender.gpu",
            "borrower",
        ),
    ];
    let mut out = Vec::new();
    for (config, scenario, iommu, gpu_name, user) in configs {
        for bytes in sizes(4 << 10, 128 << 20) {
            let mut metrics = Map::new();
            let mut counters = Map::new();
            for (metric, write) in [("write_gbps", true), ("read_gbps", false)] {
                let mut tf = load(scenario, iommu)?;
                let gpu = requester(&tf, gpu_name)?;
                let cpu = requester(&tf, &format!("{user}.cpu"))?;
                let t = gpu_copy(
                    &mut tf,
                    gpu,
                    cpu,
                    gpu_name,
                    &format!("{user}.ram"),
                    bytes,
                    write,
                )?;
                metrics.insert(metric.into(), json!(gbps(bytes, t)));
                counters.insert(metric.into(), counters_json(&tf, bytes));
            }
            let mut r = run(
                "smartio.gpu_dma",
                config,
                json!({ "bytes": bytes }),
                Value::Object(metrics),
            );
            r.counters = counters;
            out.push(r);
        }
    }
    Ok(out)
}

/// Two K420s on the three-way testbed, A → B: bandwidth of a copy ended by a
/// synchronising kernel launch, and a ping-pong on a 4-byte counter.
pub fn p2p() -> Result<Vec<Run>, RunError> {
    // (config, A, B, through the user's RAM, IOMMU on in the lenders)
    let configs: [(&str, &str, &str, bool, bool); 11] = [
        ("loc_p2p_sw", "user.gpu0", "user.gpu1", false, false),
        ("loc_p2p_root", "user.gpu0", "user.gpu2", false, false),
        ("loc_ram_root", "user.gpu0", "user.gpu2", true, false),
        ("1l_p2p_sw", "lender1.gpu0", "lender1.gpu1", false, false),
        ("1l_p2p_iommu", "lender1.gpu0", "lender1.gpu1", false, true),
        ("1l_ram_sw", "lender1.gpu0", "lender1.gpu1", true, false),
        ("1l_ram_iommu", "lender1.gpu0", "lender1.gpu1", true, true),
        ("2l_p2p_sw", "lender1.gpu0", "lender2.gpu0", false, false),
        ("2l_p2p_iommu", "lender1.gpu0", "lender2.gpu0", false, true),
        ("2l_ram_sw", "lender1.gpu0", "lender2.gpu0", true, false),
        ("2l_ram_iommu", "lender1.gpu0", "lender2.gpu0", true, true),
    ];
    let mut out = Vec::new();
    for (config, a_name, b_name, via_ram, iommu) in configs {
        let iommus: &[(&str, bool)] = &[("lender1", iommu), ("lender2", iommu)];
        // Path shape and ping-pong from one fabric.
        let mut tf = load("smartio_three_way", iommus)?;
        let a = requester(&tf, a_name)?;
        let b = requester(&tf, b_name)?;
        let (hops, roots) = data_path(&mut tf, a, b, b_name, via_ram)?;
        let pingpong = pingpong(&mut tf, a, b, a_name, b_name, via_ram)?;
        for bytes in sizes(4 << 10, 64 << 20) {
            let mut tf = load("smartio_three_way", iommus)?;
            let a = requester(&tf, a_name)?;
            let b = requester(&tf, b_name)?;
            let t = p2p_transfer(&mut tf, a, b, b_name, via_ram, bytes)?;
            out.push(run(
                "smartio.p2p",
                config,
                json!({ "bytes": bytes }),
                json!({ "gbps": gbps(bytes, t), "pingpong_ns": pingpong.as_ns_f64(), "roots": roots, "hops": hops }),
            ));
        }
    }
    Ok(out)
}

/// Hops and roots of the A → B data path (through the user's RAM: A's write there plus
/// B's read from there).
fn data_path(
    tf: &mut TimedFabric,
    a: Requester,
    b: Requester,
    b_name: &str,
    via_ram: bool,
) -> Result<(usize, usize), RunError> {
    let count = |tf: &mut TimedFabric,
                 who: Requester,
                 target: &str,
                 access: fabric::Access|
     -> Result<(usize, usize), RunError> {
        let bus = map_buffer(tf, who, target, 0, 64)?;
        let mut p = fabric::Path::default();
        tf.fabric
            .route(
                &fabric::Request {
                    requester: who,
                    addr: bus,
                    len: 64,
                    access,
                },
                &mut p,
            )
            .map_err(|f| RunError(fabric::describe::fault_text(&tf.fabric.topo, &f)))?;
        Ok((p.hops(), p.roots()))
    };
    if via_ram {
        let (h1, r1) = count(tf, a, "user.ram", fabric::Access::Write)?;
        let (h2, _) = count(tf, b, "user.ram", fabric::Access::Read)?;
        Ok((h1 + h2, r1))
    } else {
        count(tf, a, &format!("{b_name}.bar1"), fabric::Access::Write)
    }
}

/// One copy of `bytes` from A to B plus the synchronising launch that ends it.
fn p2p_transfer(
    tf: &mut TimedFabric,
    a: Requester,
    b: Requester,
    b_name: &str,
    via_ram: bool,
    bytes: u64,
) -> Result<Time, RunError> {
    let launch = |tf: &TimedFabric, g: Requester| -> Result<Time, RunError> {
        Ok(ns(device_param(tf, g, "launch_ns")?))
    };
    if via_ram {
        let (dst, sa) = dma_to(tf, a, "user.ram", 1 << 30, bytes)?;
        let (src, sb) = dma_to(tf, b, "user.ram", 1 << 30, bytes)?;
        let t1 = dma_time(tf, a, sa, Op::Write { dst }, bytes)?;
        let t2 = dma_time(tf, b, sb, Op::Read { src }, bytes)?;
        Ok(launch(tf, a)? + t1 + launch(tf, b)? + t2)
    } else {
        let (dst, sa) = dma_to(tf, a, &format!("{b_name}.bar1"), 0, bytes.min(128 << 20))?;
        let t = dma_time(tf, a, sa, Op::Write { dst }, bytes)?;
        Ok(launch(tf, a)? + t)
    }
}

/// A → B → A on a 4-byte counter, by the GPUs' kernels (`devices::gpu::pingpong`): each
/// writes the peer's counter and polls its own — in GPU memory, or in the user's RAM where
/// the polls are reads across the fabric. The counter bytes travel through the fabric and
/// every value read is checked.
fn pingpong(
    tf: &mut TimedFabric,
    a: Requester,
    b: Requester,
    a_name: &str,
    b_name: &str,
    via_ram: bool,
) -> Result<Time, RunError> {
    let node = |r: Requester| match r {
        Requester::Function(n) => Ok(n),
        _ => Err(RunError("a ping-pong needs two GPUs".into())),
    };
    let ga = Gpu::from_node(tf, node(a)?).map_err(RunError::from(a_name))?;
    let gb = Gpu::from_node(tf, node(b)?).map_err(RunError::from(b_name))?;
    let counters = if via_ram {
        let (wa, wb) = (4096, 8192);
        Counters::InHostRam {
            a_writes: map_buffer(tf, a, "user.ram", wb, 4)?,
            b_polls: map_buffer(tf, b, "user.ram", wb, 4)?,
            b_writes: map_buffer(tf, b, "user.ram", wa, 4)?,
            a_polls: map_buffer(tf, a, "user.ram", wa, 4)?,
        }
    } else {
        let (oa, ob) = (0x1000, 0x2000);
        Counters::InGpuMemory {
            a_to_b: map_buffer(tf, a, &format!("{b_name}.bar{}", gb.memory_bar), ob, 4)?,
            b_to_a: map_buffer(tf, b, &format!("{a_name}.bar{}", ga.memory_bar), oa, 4)?,
            a_offset: oa,
            b_offset: ob,
        }
    };
    devices::pingpong(tf, &ga, &gb, counters, PINGPONG_ROUNDS).map_err(RunError::from("ping-pong"))
}

/// Round trips run per configuration (each value is checked; the model is deterministic,
/// so the paper's 100,000 would repeat the same time).
const PINGPONG_ROUNDS: u32 = 10;

pub fn infos() -> Vec<ExperimentInfo> {
    vec![
        ExperimentInfo { id: "smartio.ram_latency", description: "one-way latency of a CPU store reaching the other host's RAM", x_param: None, x_log2: false, plot_metrics: vec!["oneway_ns"], window: "one store: the model is deterministic, so the ping-pong's repetitions add nothing" },
        ExperimentInfo { id: "smartio.ntb_dma", description: "the NTB adapter's DMA engine copying RAM → remote RAM (write) and back (read), PXH810 b2b", x_param: Some("bytes"), x_log2: true, plot_metrics: vec!["write_gbps", "read_gbps"], window: "transfers up to 8 MiB simulated TLP by TLP; larger ones extended at the steady-state rate of the last 4 MiB" },
        ExperimentInfo { id: "smartio.gpu_dma", description: "bandwidthTest on a Quadro P4000 in the chassis (local or lent) and a Tesla K40 over PXH810, launch to completion seen by the host", x_param: Some("bytes"), x_log2: true, plot_metrics: vec!["write_gbps", "read_gbps"], window: "one copy per size (deterministic); up to 8 MiB simulated TLP by TLP, larger ones extended at the steady-state rate" },
        ExperimentInfo { id: "smartio.p2p", description: "two K420s on the three-way testbed, A → B: copy bandwidth and a counter ping-pong", x_param: Some("bytes"), x_log2: true, plot_metrics: vec!["gbps"], window: "one transfer per size instead of 1,000 (deterministic); up to 8 MiB simulated TLP by TLP, larger ones at the steady-state rate" },
    ]
}

pub fn references() -> Vec<Reference> {
    // Calibration: the parameter set from that point (its scenario or catalog comment says
    // "calibrated"); hops and roots come straight from the fabric.
    use crate::result::Basis;
    let big = |b: u64| vec![("bytes", json!(b))];
    vec![
        Reference { experiment: "smartio.ram_latency", config: Some("pxh810_b2b"), params: vec![], metric: "oneway_ns", value: 573.0, value_high: 573.0, source: "REFERENCE.md §2: PXH810 back-to-back one-way RAM → remote RAM ≈ 573 ns", basis: Basis::Calibration(&["cpu_mmio_write_ns"]) },
        Reference { experiment: "smartio.ram_latency", config: Some("pxh830_b2b"), params: vec![], metric: "oneway_ns", value: 550.0, value_high: 580.0, source: "REFERENCE.md §2: PXH830 back-to-back 550–580 ns", basis: Basis::Prediction },
        Reference { experiment: "smartio.ntb_dma", config: None, params: big(64 << 20), metric: "write_gbps", value: 4.8, value_high: 4.8, source: "REFERENCE.md §2: NTB DMA peak ≈ 4.8 GB/s writes (MPS 128 B)", basis: Basis::Calibration(&["pxh810_switch posted credits"]) },
        Reference { experiment: "smartio.ntb_dma", config: None, params: big(64 << 20), metric: "read_gbps", value: 3.0, value_high: 3.0, source: "REFERENCE.md §2: NTB DMA peak ≈ 3.0 GB/s reads (MRRS 512 B, 64 outstanding)", basis: Basis::Calibration(&["pxh810_switch completion credits"]) },
        Reference { experiment: "smartio.gpu_dma", config: Some("k40_pxh810"), params: big(128 << 20), metric: "write_gbps", value: 4.9, value_high: 4.9, source: "REFERENCE.md §2: borrowed K40 over PXH810, GPU → borrower RAM ≈ 4.9 GB/s", basis: Basis::Prediction },
        Reference { experiment: "smartio.gpu_dma", config: Some("k40_pxh810"), params: big(128 << 20), metric: "read_gbps", value: 2.0, value_high: 2.0, source: "REFERENCE.md §2: borrowed K40 over PXH810, borrower RAM → GPU ≈ 2 GB/s", basis: Basis::Calibration(&["rc_p2p_read_gap_ns"]) },
        Reference { experiment: "smartio.gpu_dma", config: Some("lent_b2b"), params: big(128 << 20), metric: "read_gbps", value: 10.2, value_high: 10.2, source: "REFERENCE.md §2: P4000 borrowed b2b reading borrower RAM ≈ 10.2 GB/s, lender IOMMU off", basis: Basis::Calibration(&["dma_max_reads"]) },
        Reference { experiment: "smartio.gpu_dma", config: Some("lent_lender_iommu"), params: big(128 << 20), metric: "read_gbps", value: 1.5, value_high: 1.7, source: "REFERENCE.md §2: with the lender IOMMU on, \"a little over\" 1.5 GB/s", basis: Basis::Calibration(&["rc_p2p_read_tags"]) },
        Reference { experiment: "smartio.p2p", config: Some("1l_p2p_sw"), params: big(64 << 20), metric: "hops", value: 1.0, value_high: 1.0, source: "REFERENCE.md §2: two GPUs under one lender's switch: 1 hop", basis: Basis::Prediction },
        Reference { experiment: "smartio.p2p", config: Some("1l_p2p_sw"), params: big(64 << 20), metric: "roots", value: 0.0, value_high: 0.0, source: "REFERENCE.md §2: two GPUs under one lender's switch: 0 roots", basis: Basis::Prediction },
        Reference { experiment: "smartio.p2p", config: Some("2l_p2p_sw"), params: big(64 << 20), metric: "hops", value: 4.0, value_high: 4.0, source: "REFERENCE.md §2: one GPU in each of two lenders: 4 hops", basis: Basis::Prediction },
        Reference { experiment: "smartio.p2p", config: Some("2l_p2p_sw"), params: big(64 << 20), metric: "roots", value: 0.0, value_high: 0.0, source: "REFERENCE.md §2: one GPU in each of two lenders: 0 roots", basis: Basis::Prediction },
    ]
}
