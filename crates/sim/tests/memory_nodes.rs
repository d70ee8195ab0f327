//! Memory-only nodes in time: a DMA into one costs the PCIe part plus its column of the
//! latency matrix from the root's node, a stream of writes into it is bound by the node's
//! own `gbps`, its writes are not kept in the LLC (no DDIO share), and CPU streams may
//! target it but not run on it.

use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Source};
use fabric::{Access, Fabric, Request, Requester};
use sim::component::{Component, Sim};
use sim::cpu_stream::StreamOp;
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::timed::TimedFabric;
use sim::Time;

/// Row = CPU node 0, 1; columns: nodes 0, 1, the HBM node 2 (pkg1), the CXL node 3 (pkg0).
const LAT: [[f64; 4]; 2] = [[80.0, 150.0, 260.0, 300.0], [170.0, 95.0, 120.0, 420.0]];
const LLC_NS: f64 = 20.0;

fn scenario() -> String {
    let row = |r: &[f64; 4]| format!("[{:?}, {:?}, {:?}, {:?}]", r[0], r[1], r[2], r[3]);
    format!(
        r#"[scenario]
name = "memnodes"

[platform.two]
packages = 2
cores_per_package = 8
clock_ghz = 2.0
llc_bytes = "16 MiB"
llc_ways = 16
ddio_ways = 2
dram_bytes_per_node = "1 GiB"

[[platform.two.interconnect]]
ends = ["pkg0", "pkg1"]
kind = "upi"

[[platform.two.memory_node]]
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

[platform.two.timing]
dram_latency_ns = 90.0
dram_gbps = 100.0
llc_latency_ns = {LLC_NS}
rc_latency_ns = 50.0
rc_p2p_latency_ns = 100.0
rc_p2p_read_tags = 48
rc_p2p_read_gap_ns = 32.0
rcb_bytes = 64
iotlb_hit_ns = 10.0
iotlb_miss_ns = 300.0
iotlb_entries = 64
cpu_mmio_write_ns = 45.0
cpu_poll_ns = 90.0
interconnect_latency_ns = 25.0
interconnect_gbps = 200.0
pcie_link_ns = 20.0
cable_ns = 10.0
fc_update_ns = 2.0
cpu_mmio_write_bytes = 64
cpu_mmio_read_bytes = 64
cpu_mmio_reads = 1

[device_model.card]
kind = "nic"
link = {{ gen = 3, width = 16 }}
bars = [{{ size = "1 MiB" }}]
timing = {{ bar_gbps = 2.0, bar_latency_ns = 300.0, bar_rcb_bytes = 64, dma_max_reads = 16, dma_mrrs_bytes = 512 }}

[[host]]
name = "h"
platform = "two"
[[host.device]]
name = "d0"
device_model = "card"
parent = "rc0"
[[host.device]]
name = "d1"
device_model = "card"
parent = "rc1"
"#,
        row(&LAT[0]),
        row(&LAT[1])
    )
}

fn timed() -> TimedFabric {
    let s = load(
        Source {
            name: "my.toml".into(),
            text: scenario(),
        },
        &BuiltinResolver,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

#[derive(Default)]
struct Probe {
    at: Option<Time>,
}
impl Component<TimedFabric> for Probe {
    fn notify(&mut self, cx: &mut TimedFabric, _: ComponentId, e: Event) {
        if let Event::Delivery(Delivery::ReadData { last: true, .. } | Delivery::WriteDone { .. }) =
            e
        {
            self.at = Some(cx.net.now());
        }
    }
}

const OFFSET: u64 = 1 << 20;

fn dma_route(tf: &mut TimedFabric, dev: usize, node: u32, access: Access) -> u32 {
    let topo = &tf.fabric.topo;
    let f = topo.devices[dev].functions[0];
    let addr = topo.host(0).ram_addr(node, OFFSET).unwrap();
    tf.route(&Request {
        requester: Requester::Function(f),
        addr,
        len: 64,
        access,
    })
    .unwrap()
    .0
}

/// Simulated ns of one 64 B DMA of `d{dev}` into `node`, on `tf` (which keeps what
/// the access left in the LLC).
fn dma_ns(tf: &mut TimedFabric, dev: usize, node: u32, access: Access) -> f64 {
    let route = dma_route(tf, dev, node, access);
    let mut sim = Sim::new();
    let me = sim.add(Probe::default());
    let issue = Issue {
        addr64: true,
        ..Issue::new(route, me, 0, 64, OFFSET)
    };
    match access {
        Access::Read => tf.net.send_read(issue, 0),
        Access::Write => tf.net.send_write(issue),
    }
    sim.run_until_idle(tf);
    let t = sim.get::<Probe>(me).unwrap().at.unwrap();
    (t - Time::ZERO).as_ns_f64()
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
    assert_eq!(tf.cpu_line_read(0, 1, 1, OFFSET).as_ns_f64(), LLC_NS);
    // Into the HBM node pkg1 serves: the line is in memory, at the matrix's price.
    dma_ns(&mut tf, 1, 2, Access::Write);
    assert_eq!(tf.cpu_line_read(0, 1, 2, OFFSET).as_ns_f64(), LAT[1][2]);
}

#[test]
fn cpu_streams_target_memory_nodes_but_do_not_run_on_them() {
    let mut tf = timed();
    assert!(tf.cpu_stream(0, 0, 2, StreamOp::Read, 4).is_ok());
    let e = match tf.cpu_stream(0, 2, 0, StreamOp::Read, 4) {
        Err(e) => e.0,
        Ok(_) => panic!("a stream ran on a memory-only node"),
    };
    assert!(e.contains("CPUs on nodes 0..2"), "{e}");
}
