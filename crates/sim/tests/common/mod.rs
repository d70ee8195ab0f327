//! What the memory-timing tests share: a two-package test platform with one device under
//! each package's root, loading it, and timing one lone DMA on it.
// Each test binary uses its own part of this.
#![allow(dead_code)]

use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Scenario, Source};
use fabric::{Access, Fabric, HostId, Request, Requester, ScenarioError};
use sim::component::{Component, Sim};
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::timed::{TimedFabric, TimingError};
use sim::Time;

/// The local DRAM latency of the timing table: what the hops charge without a matrix.
pub const DRAM_NS: f64 = 90.0;
/// The LLC's latency (DDIO hits, lines a CPU finds there).
pub const LLC_NS: f64 = 20.0;

/// Two packages on one UPI link, a `card` under each package's root (`d0` on rc0, `d1` on
/// rc1); `platform_extra` goes into platform `two` before its timing table (memory
/// matrices, memory-only nodes).
pub fn two_packages(name: &str, platform_extra: &str, interconnect_latency_ns: f64) -> String {
    format!(
        r#"[scenario]
name = "{name}"

[platform.two]
cpu = "two test packages"
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

{platform_extra}
[platform.two.timing]
dram_latency_ns = {DRAM_NS}
dram_gbps = 100.0
llc_latency_ns = {LLC_NS}
rc_latency_ns = 50.0
rc_p2p_latency_ns = 100.0
rc_p2p_read_tags = 48
rc_p2p_read_gap_ns = 32.0
rcb_bytes = 64
read_completion_bytes = 64
iotlb_hit_ns = 10.0
iotlb_miss_ns = 300.0
iotlb_entries = 64
cpu_mmio_write_ns = 45.0
cpu_poll_ns = 90.0
interconnect_latency_ns = {interconnect_latency_ns}
interconnect_gbps = 200.0
pcie_link_ns = 20.0
cable_ns = 10.0
fc_update_ns = 2.0
cpu_mmio_write_bytes = 64
cpu_mmio_read_bytes = 64
cpu_mmio_reads = 1
completion_timeout_ns = 50000000.0
home_snoop = 1

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
"#
    )
}

pub fn try_load(text: &str) -> Result<Scenario, ScenarioError> {
    load(
        Source {
            name: "my.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
}

pub fn try_timed(text: &str) -> Result<TimedFabric, TimingError> {
    let s = try_load(text).unwrap_or_else(|e| panic!("{e}"));
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1)
}

pub fn timed(text: &str) -> TimedFabric {
    try_timed(text).unwrap()
}

/// Remembers when the last thing it heard of arrived.
#[derive(Default)]
pub struct Probe {
    pub at: Option<Time>,
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

/// Where in a node's RAM the lone DMAs go.
pub const OFFSET: u64 = 1 << 20;

/// The route of device `d{dev}` reading or writing 64 B at node `node`'s RAM.
pub fn dma_route(tf: &mut TimedFabric, dev: usize, node: u32, access: Access) -> u32 {
    let topo = &tf.fabric.topo;
    let f = topo.devices[dev].functions[0];
    let addr = topo.host(HostId(0)).ram_addr(node, OFFSET).unwrap();
    tf.route(&Request {
        requester: Requester::Function(f),
        addr,
        len: 64,
        access,
    })
    .unwrap()
    .0
}

/// When one lone 64 B DMA on `route` (64-bit addressing, as the flow model's closed
/// form assumes) completes: a read when its data is back, a write when it lands.
pub fn one_dma(tf: &mut TimedFabric, route: u32, access: Access) -> Time {
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
    sim.get::<Probe>(me).unwrap().at.unwrap()
}
