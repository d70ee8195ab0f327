//! Memory-only nodes in time: a DMA into one costs the PCIe part plus its column of the
//! latency matrix from the root's node, a stream of writes into it is bound by the node's
//! own `gbps`, its writes are not kept in the LLC (no DDIO share), and CPU streams may
//! target it but not run on it.

mod common;

use common::{dma_route, one_dma, two_packages, LLC_NS, OFFSET};
use fabric::{Access, HostId};
use sim::cpu_stream::StreamOp;
use sim::timed::TimedFabric;
use sim::Time;

/// Row = CPU node 0, 1; columns: nodes 0, 1, the HBM node 2 (pkg1), the CXL node 3 (pkg0).
const LAT: [[f64; 4]; 2] = [[80.0, 150.0, 260.0, 300.0], [170.0, 95.0, 120.0, 420.0]];

/// The test platform with an HBM node on package 1 (2 GB/s) and a CXL node on
/// package 0, and the latency matrix `LAT`.
fn scenario() -> String {
    let row = |r: &[f64; 4]| format!("[{:?}, {:?}, {:?}, {:?}]", r[0], r[1], r[2], r[3]);
    let extra = format!(
        r#"[[platform.two.memory_node]]
package = 1
bytes = "1 GiB"
kind = "hbm"
gbps = {{ value = 2.0, basis = "assumption", why = "slow enough to bind a Gen3 x16 stream" }}

[[platform.two.memory_node]]
package = 0
bytes = "1 GiB"
kind = "cxl"

[platform.two.memory]
latency_ns = [{}, {}]
"#,
        row(&LAT[0]),
        row(&LAT[1])
    );
    two_packages("memnodes", &extra, 25.0)
}

fn timed() -> TimedFabric {
    common::timed(&scenario())
}

/// Simulated ns of one 64 B DMA of `d{dev}` into `node`, on `tf` (which keeps what
/// the access left in the LLC).
fn dma_ns(tf: &mut TimedFabric, dev: usize, node: u32, access: Access) -> f64 {
    let route = dma_route(tf, dev, node, access);
    (one_dma(tf, route, access) - Time::ZERO).as_ns_f64()
}

#[test]
fn a_dma_read_of_a_memory_node_costs_its_matrix_column() {
    let mut tf = timed();
    // The PCIe part of d0's reads: its local read less its matrix entry.
    let pcie = dma_ns(&mut tf, 0, 0, Access::Read) - LAT[0][0];
    for node in 1..4u32 {
        let got = dma_ns(&mut timed(), 0, node, Access::Read);
        let want = pcie + LAT[0][node as usize];
        assert!(
            (got - want).abs() < 1e-6,
            "d0 reading node {node}: {got} ns, expected {want}"
        );
    }
}

#[test]
fn a_write_stream_into_a_memory_node_is_bound_by_its_own_bandwidth() {
    let mut tf = timed();
    let hbm = dma_route(&mut tf, 1, 2, Access::Write);
    let cxl = dma_route(&mut tf, 0, 3, Access::Write);
    let dram = dma_route(&mut tf, 0, 0, Access::Write);
    let (hbm, cxl, dram) = (
        tf.net.flow_write(hbm, 256, true),
        tf.net.flow_write(cxl, 256, true),
        tf.net.flow_write(dram, 256, true),
    );
    // The HBM node states 2 GB/s: it binds a Gen3 x16 stream.
    assert!(hbm.gbps <= 2.0 + 1e-9 && hbm.gbps > 1.9, "{hbm:?}");
    // The CXL node states nothing: it has the platform's DRAM sink, and the link binds.
    assert_eq!(cxl.gbps, dram.gbps, "{cxl:?} vs {dram:?}");
    assert!(cxl.gbps > 10.0, "{cxl:?}");
}

#[test]
fn writes_into_a_memory_node_are_not_kept_in_the_llc() {
    let mut tf = timed();
    // d1 under pkg1 writes into pkg1's CPU node: DDIO keeps the line, the cores hit it.
    dma_ns(&mut tf, 1, 1, Access::Write);
    assert_eq!(
        tf.cpu_line_read(HostId(0), 1, 1, OFFSET).as_ns_f64(),
        LLC_NS
    );
    // Into the HBM node pkg1 serves: the line is in memory, at the matrix's price.
    dma_ns(&mut tf, 1, 2, Access::Write);
    assert_eq!(
        tf.cpu_line_read(HostId(0), 1, 2, OFFSET).as_ns_f64(),
        LAT[1][2]
    );
}

#[test]
fn cpu_streams_target_memory_nodes_but_do_not_run_on_them() {
    let mut tf = timed();
    assert!(tf.cpu_stream(HostId(0), 0, 2, StreamOp::Read, 4).is_ok());
    let e = match tf.cpu_stream(HostId(0), 2, 0, StreamOp::Read, 4) {
        Err(e) => e.0,
        Ok(_) => panic!("a stream ran on a memory-only node"),
    };
    assert!(e.contains("CPUs on nodes 0..2"), "{e}");
}
