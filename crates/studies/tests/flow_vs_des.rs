//! The flow-level model and the TLP-level simulation agree within 2 % on the calibration
//! cases: each case is bounded by a different mechanism (link efficiency, credits, tags
//! over a round trip, a splitting root, the memory behind the sink), so agreement checks
//! both models at once.

use devices::Op;
use studies::harness::*;

struct Case {
    scenario: &'static str,
    iommu: &'static [(&'static str, bool)],
    gpu: &'static str,
    ram: &'static str,
    write: bool,
}

fn both(c: &Case) -> (f64, f64, String) {
    let tf = load(c.scenario, c.iommu).unwrap();
    both_on(tf, c)
}

fn both_on(mut tf: sim::timed::TimedFabric, c: &Case) -> (f64, f64, String) {
    let g = requester(&tf, c.gpu).unwrap();
    let bytes = 4u64 << 20;
    let (bus, spec) = dma_to(&mut tf, g, c.ram, 1 << 30, bytes).unwrap();
    let access = if c.write {
        fabric::Access::Write
    } else {
        fabric::Access::Read
    };
    let (route, _) = tf
        .route(&fabric::Request {
            requester: g,
            addr: bus,
            len: 64,
            access,
        })
        .unwrap();
    let addr64 = bus >= 1 << 32;
    // The stream walks its whole buffer once: an IOMMU on the way misses on every page
    // the IOTLB cannot hold (the K40c's borrower IOMMU).
    let flow = if c.write {
        tf.net.flow_write(route, spec.mps, addr64)
    } else {
        tf.net.flow(
            route,
            &sim::flow::Stream {
                region_bytes: bytes,
                ..sim::flow::Stream::reads(spec.mrrs, spec.max_reads, addr64)
            },
        )
    };
    let op = if c.write {
        Op::Write { dst: bus }
    } else {
        Op::Read { src: bus }
    };
    let des = gbps(bytes, dma_time(&mut tf, g, spec, op, bytes).unwrap());
    (des, flow.gbps, flow.bottleneck)
}

#[test]
fn flow_model_and_simulation_agree_on_the_calibration_cases() {
    let cases = [
        Case {
            scenario: "smartio_chassis_baseline",
            iommu: &[],
            gpu: "user.gpu",
            ram: "user.ram",
            write: true,
        },
        Case {
            scenario: "smartio_chassis_b2b",
            iommu: &[],
            gpu: "lender.gpu",
            ram: "borrower.ram",
            write: false,
        },
        Case {
            scenario: "smartio_chassis_b2b",
            iommu: &[("lender", true)],
            gpu: "lender.gpu",
            ram: "borrower.ram",
            write: false,
        },
        // The K40c of smartio.mdev: the borrower's IOMMU on, the lender's off and on.
        Case {
            scenario: "smartio_chassis_k40c",
            iommu: &[],
            gpu: "lender.gpu",
            ram: "borrower.ram",
            write: false,
        },
        Case {
            scenario: "smartio_chassis_k40c",
            iommu: &[("lender", true)],
            gpu: "lender.gpu",
            ram: "borrower.ram",
            write: false,
        },
        Case {
            scenario: "smartio_pxh810_b2b",
            iommu: &[],
            gpu: "lender.gpu",
            ram: "borrower.ram",
            write: true,
        },
        Case {
            scenario: "smartio_pxh810_b2b",
            iommu: &[],
            gpu: "lender.gpu",
            ram: "borrower.ram",
            write: false,
        },
    ];
    for c in &cases {
        let (des, flow, why) = both(c);
        let err = (des - flow).abs() / flow;
        eprintln!(
            "{} write={}: simulated {des:.3} flow {flow:.3} ({why})",
            c.scenario, c.write
        );
        assert!(
            err < 0.02,
            "{} {} write={}: simulated {des:.3} GB/s, flow model {flow:.3} GB/s ({why})",
            c.scenario,
            c.gpu,
            c.write
        );
    }
}

#[test]
fn zero_load_latency_matches_a_single_simulated_write() {
    let mut tf = load("smartio_chassis_mxs824", &[]).unwrap();
    let cpu = requester(&tf, "borrower.cpu").unwrap();
    let bus = map_buffer(&mut tf, cpu, "lender.ram", 4096, 4).unwrap();
    let (route, _) = tf
        .route(&fabric::Request {
            requester: cpu,
            addr: bus,
            len: 4,
            access: fabric::Access::Write,
        })
        .unwrap();
    let flow = tf.net.zero_load_write(route, 4, true).as_ns_f64();
    let des = one_way(&mut tf, cpu, bus).unwrap().as_ns_f64();
    assert!(
        (des - flow).abs() / flow < 0.02,
        "simulated {des} ns vs closed form {flow} ns"
    );
}

/// With memory slower than the link, the sink bounds both models.
#[test]
fn a_slow_memory_bounds_the_stream_in_both_models() {
    use studies::run::overrides::{points, Override};
    let src = studies::run::source("smartio_chassis_baseline").unwrap();
    let point = &points(&[Override::parse("platform.smartio_host.timing.dram_gbps=2").unwrap()])[0];
    let (scenario, src) = studies::run::overrides::load(&src, point).unwrap();
    let tf = timed(scenario, &src.name).unwrap();
    let c = Case {
        scenario: "smartio_chassis_baseline",
        iommu: &[],
        gpu: "user.gpu",
        ram: "user.ram",
        write: false,
    };
    let (des, flow, why) = both_on(tf, &c);
    assert!(why.contains("DRAM"), "{why}");
    assert!(
        (des - flow).abs() / flow < 0.02,
        "simulated {des} vs flow {flow} ({why})"
    );
    assert!(flow <= 2.0 + 1e-9, "{flow}");
}

/// Reads smaller than the completion boundary come back in one completion of their own
/// size: both models, 3-DW headers below 4 GiB, for a range of request sizes.
#[test]
fn small_reads_agree_in_both_models() {
    for size in [32u32, 64, 128, 256] {
        let mut tf = load("smartio_chassis_baseline", &[]).unwrap();
        let g = requester(&tf, "user.gpu").unwrap();
        let bytes = 1u64 << 20;
        let (bus, mut spec) = dma_to(&mut tf, g, "user.ram", 1 << 20, bytes).unwrap();
        spec.mrrs = size;
        let (route, _) = tf
            .route(&fabric::Request {
                requester: g,
                addr: bus,
                len: 64,
                access: fabric::Access::Read,
            })
            .unwrap();
        let flow = tf
            .net
            .flow_read(route, size, spec.max_reads, bus >= 1 << 32);
        let des = gbps(
            bytes,
            dma_time(&mut tf, g, spec, Op::Read { src: bus }, bytes).unwrap(),
        );
        assert!(
            (des - flow.gbps).abs() / flow.gbps < 0.02,
            "{size} B reads: simulated {des:.3} vs flow {:.3} ({})",
            flow.gbps,
            flow.bottleneck
        );
    }
}
