//! The flow-level model and the TLP-level simulation agree on the calibration cases:
//! each case is bounded by a different mechanism (link efficiency, credits, tags over a
//! round trip, a splitting root), so agreement checks both models at once.

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
    let mut tf = load(c.scenario, c.iommu).unwrap();
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
    let flow = if c.write {
        tf.net.flow_write(route, spec.mps)
    } else {
        tf.net.flow_read(route, spec.mrrs, spec.max_reads)
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
            err < 0.15,
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
    let flow = tf.net.zero_load_write(route, 4).as_ns_f64();
    let des = one_way(&mut tf, cpu, bus).unwrap().as_ns_f64();
    assert!(
        (des - flow).abs() / flow < 0.02,
        "simulated {des} ns vs closed form {flow} ns"
    );
}
