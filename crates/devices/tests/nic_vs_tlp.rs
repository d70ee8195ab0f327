//! "Flow model = packet model": the NIC's packet-granular DMA pricing (`devices::nic`,
//! FIFO servers per packet over `sim::memsys`) agrees with the timed fabric's routes for
//! the same PF and memory on `ioctopus_r730` — zero-load latency of one TLP-sized DMA and
//! a saturated stream's bandwidth, local and remote.

use devices::nic::Nic;
use fabric::{builtin, Access, Fabric, HostId, Request, Requester};
use sim::memsys::{MemSys, MemSysParams, Snoop};
use sim::timed::TimedFabric;
use sim::Time;

fn tf() -> TimedFabric {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

fn memsys(tf: &TimedFabric) -> MemSys {
    let t = tf.timing_of(HostId(0)).clone();
    let p = tf.fabric.topo.platform_of(HostId(0));
    let ns = |x: f64| Time::from_ps((x * 1000.0) as u64);
    MemSys::new(MemSysParams {
        sockets: p.packages,
        llc_bytes: p.llc_bytes,
        llc_ways: p.llc_ways,
        ddio_ways: p.ddio_ways,
        llc_latency: ns(t.llc_latency_ns),
        dram_latency: ns(t.dram_latency_ns),
        interconnect_latency: ns(t.interconnect_latency_ns),
        dram_gbps: t.dram_gbps,
        interconnect_gbps: t.interconnect_gbps * 2.0,
        line_fill_buffers: 10,
        snoop: if t.home_snoop {
            Snoop::HomeDirectory
        } else {
            Snoop::Source
        },
    })
}

fn within(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b
}

#[test]
fn packet_dma_pricing_agrees_with_the_timed_routes() {
    let mut tf = tf();
    let server = tf.fabric.topo.host_by_name("server").unwrap();
    let dev = tf.fabric.topo.device_by_name(server, "nic").unwrap();
    for pf in 0..2usize {
        for write in [true, false] {
            let f = tf.fabric.topo.devices[dev.index()].functions[pf];
            let addr = tf.fabric.topo.host(server).ram_addr(0, 1 << 30).unwrap();
            let access = if write { Access::Write } else { Access::Read };
            let (route, _) = tf
                .route(&Request {
                    requester: Requester::Function(f),
                    addr,
                    len: 64,
                    access,
                })
                .unwrap();
            // Zero load: one 256 B write (one MPS TLP) or one 256 B read from DRAM (within 5 %:
            // the packet model prices the read's completions as one train).
            let mut nic = Nic::from_topology(&tf.fabric.topo, dev).unwrap();
            let mut ms = memsys(&tf);
            let p = &mut nic.pfs[pf];
            let (packet, flow) = if write {
                // Both land a local write in the DDIO share and a remote one in DRAM.
                let t = p.dma_write(Time::ZERO, &mut ms, 0, 1, 256);
                (t, tf.net.zero_load_write(route, 256, true))
            } else {
                let t = p.dma_read(Time::ZERO, &mut ms, 0, 1, 256);
                (t, tf.net.zero_load_read(route, 256, true))
            };
            let (a, b) = (packet.as_ns_f64(), flow.as_ns_f64());
            eprintln!("pf{pf} write={write}: zero-load packet {a:.1} ns, TLP route {b:.1} ns");
            assert!(
                within(a, b, 0.05),
                "pf{pf} write={write}: zero-load {a:.1} vs {b:.1} ns"
            );
            // Saturated: 1,000 back-to-back 4 KiB DMAs.
            let mut nic = Nic::from_topology(&tf.fabric.topo, dev).unwrap();
            let mut ms = memsys(&tf);
            let p = &mut nic.pfs[pf];
            let mut end = Time::ZERO;
            for i in 0..1000u64 {
                end = end.max(if write {
                    p.dma_write(Time::ZERO, &mut ms, 0, 100 + i, 4096)
                } else {
                    p.dma_read(Time::ZERO, &mut ms, 0, 100 + i, 4096)
                });
            }
            let packet_gbps = 4096.0 * 1000.0 / end.as_ns_f64();
            let flow_gbps = if write {
                tf.net.flow_write(route, 256, true).gbps
            } else {
                tf.net.flow_read(route, 4096, 256, true).gbps
            };
            eprintln!(
                "pf{pf} write={write}: packet {packet_gbps:.2} GB/s, TLP route {flow_gbps:.2} GB/s"
            );
            assert!(
                within(packet_gbps, flow_gbps, 0.05),
                "pf{pf} write={write}: {packet_gbps:.2} vs {flow_gbps:.2} GB/s"
            );
        }
    }
}

#[test]
fn frames_and_their_completion_entries_keep_a_backlogged_link_busy() {
    let tf = tf();
    let server = tf.fabric.topo.host_by_name("server").unwrap();
    let dev = tf.fabric.topo.device_by_name(server, "nic").unwrap();
    let mut nic = Nic::from_topology(&tf.fabric.topo, dev).unwrap();
    let mut ms = memsys(&tf);
    let pf = &mut nic.pfs[0];
    let node = pf.socket;
    // 2,000 frames of 1,514 B, all waiting at t = 0, each followed by its 64 B entry.
    let mut last = Time::ZERO;
    for k in 0..2000u64 {
        let frame_alone = {
            let mut p = pf.clone();
            let mut m = ms.clone();
            p.dma_write(Time::ZERO, &mut m, node, k, 1514)
        };
        let cqe = pf.dma_write_then(Time::ZERO, &mut ms, node, k, 1514, 1 << 40 | k, 64);
        assert!(
            cqe >= frame_alone,
            "an entry is never visible before its frame"
        );
        last = last.max(cqe);
    }
    // Busy from the first TLP to the last: the link's bytes at its rate, plus one trip.
    // (`link_data_gbps` is in GB/s: bytes per ns.)
    let busy_ps = pf.up.bytes as f64 / sim::pcie::link_data_gbps(3, 8) * 1000.0;
    let trip = pf.link_latency + ms.params().llc_latency;
    let expect = busy_ps + trip.as_ps() as f64;
    assert!(
        within(last.as_ps() as f64, expect, 0.01),
        "last entry visible at {last:?}, a busy link gives {expect} ps"
    );
}
