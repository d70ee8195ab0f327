//! The memory system over a dual-I/O-hub platform (Tyche's Nehalem-EP servers,
//! docs/hardware.md §3): NICs attached at I/O hubs, DMA on every link of the fabric's route,
//! counters per link and direction, the part Intel PCM sees; and the two-socket memory
//! system built from a platform unchanged against the shorthand it replaced.

use devices::nic::{pfs, Pf};
use fabric::scenario::{load, Source};
use fabric::{builtin, Fabric, Topology};
use host::net::{mem_sys, memory_system};
use sim::memsys::{Fifo, LinkCount, MemSys, LINE};
use sim::Time;

fn topo(name: &str) -> Topology {
    let s = builtin::load_builtin(name).unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

/// PF 0 of `nic` of `host` in `t`.
fn pf(t: &Topology, host: &str, nic: &str) -> Pf {
    let h = t.host_by_name(host).unwrap();
    let d = t.device_by_name(h, nic).unwrap();
    pfs(t, d, 32, 4096).unwrap().remove(0)
}

/// The link directions that carried bytes, by name in alphabetical order.
fn busy(ms: &MemSys) -> Vec<(String, u64)> {
    let mut b: Vec<_> = ms
        .link_counters()
        .into_iter()
        .filter(|c| c.bytes > 0)
        .map(|LinkCount { name, bytes, .. }| (name, bytes))
        .collect();
    b.sort();
    b
}

#[test]
fn a_nic_under_an_ioh_is_attached_there_and_local_to_its_package() {
    let t = topo("tyche_6nic");
    let ms = memory_system(&t, t.host_by_name("target").unwrap()).unwrap();
    let u = ms.uncore();
    let p0 = pf(&t, "target", "nic0");
    let p3 = pf(&t, "target", "nic3");
    assert_eq!((p0.attach, p0.socket), (u.vertex("ioh0").unwrap(), 0));
    assert_eq!((p3.attach, p3.socket), (u.vertex("ioh1").unwrap(), 1));
}

#[test]
fn a_nic_under_ioh1_writing_node1_crosses_only_ioh1_to_pkg1() {
    let t = topo("tyche_6nic");
    let mut ms = memory_system(&t, t.host_by_name("target").unwrap()).unwrap();
    let mut p = pf(&t, "target", "nic3");
    // 9000 B: a jumbo frame, 141 lines.
    p.dma_write(Time::ZERO, &mut ms, 1, 7, 9000);
    let bytes = 9000u64.div_ceil(LINE) * LINE;
    assert_eq!(busy(&ms), vec![("ioh1→pkg1".to_string(), bytes)]);
    // Nehalem has no DDIO: the frame is in node 1's DRAM.
    assert_eq!(ms.dram(1).write, bytes);
}

#[test]
fn a_device_under_ioh0_writing_node1_loads_each_link_of_its_route_once() {
    let t = topo("tyche_6nic");
    let mut ms = memory_system(&t, t.host_by_name("initiator").unwrap()).unwrap();
    let mut p = pf(&t, "initiator", "nic0");
    let n = 4096 * 3 + 100;
    p.dma_write(Time::ZERO, &mut ms, 1, 9, n);
    let bytes = n.div_ceil(LINE) * LINE;
    // The hub-to-hub link weighs 2 (nehalem_dual_ioh.toml): ioh0 → pkg0 → pkg1 (2)
    // beats ioh0 → ioh1 → pkg1 (3).
    assert_eq!(
        busy(&ms),
        vec![
            ("ioh0→pkg0".to_string(), bytes),
            ("pkg0→pkg1".to_string(), bytes)
        ]
    );
    let u = ms.uncore().clone();
    let v = |n: &str| u.vertex(n).unwrap();
    assert_eq!(ms.link_bytes(v("ioh0"), v("ioh1")), Some(0));
    assert_eq!(ms.link_bytes(v("pkg1"), v("ioh0")), None, "no such link");
    // The counters add up to the traffic: each byte once per hop of its route.
    let total: u64 = ms.link_counters().iter().map(|c| c.bytes).sum();
    assert_eq!(total, 2 * bytes);
    // Reading it back (a transmit) carries the data the other way on the same links.
    ms.reset_counters();
    p.dma_read(Time::from_us(100), &mut ms, 1, 9, n);
    assert_eq!(
        busy(&ms),
        vec![
            ("pkg0→ioh0".to_string(), bytes),
            ("pkg1→pkg0".to_string(), bytes)
        ]
    );
}

#[test]
fn pcm_sees_package_ports_but_not_the_hub_to_hub_link() {
    // Route ioh0 → node 1 over the hubs' link: weigh the processor link out.
    let text = nehalem_with_weights(10, 1);
    let s = load(
        Source {
            name: "test".into(),
            text,
        },
        &builtin::BuiltinResolver,
    )
    .unwrap();
    let t2 = Fabric::from_scenario(s).unwrap().topo;
    let h2 = t2.host_by_name("h").unwrap();
    let mut ms = mem_sys(t2.platform_of(h2), 10).unwrap();
    let mut nic = pf(&t2, "h", "nic0");
    nic.dma_write(Time::ZERO, &mut ms, 1, 1, 6400);
    // The route the weights select is the one the counters see.
    assert_eq!(
        busy(&ms),
        vec![
            ("ioh0→ioh1".to_string(), 6400),
            ("ioh1→pkg1".to_string(), 6400)
        ]
    );
    // PCM: pkg1 sees 6400 B come in from its hub; pkg0 sees nothing; the hub link's
    // bytes are in no port.
    let ports = ms.pcm_ports();
    let seen: u64 = ports.iter().map(|p| p.incoming + p.outgoing).sum();
    assert_eq!(seen, 6400);
    let pkg1_hub = ports
        .iter()
        .find(|p| p.package == 1 && p.peer_is_ioh)
        .unwrap();
    assert_eq!((pkg1_hub.incoming, pkg1_hub.outgoing), (6400, 0));
    assert!(ports.iter().all(|p| p.package != 0 || p.incoming == 0));
    assert_eq!(ports.len(), 4, "two ports per package: hub and processor");
}

/// A one-host dual-hub scenario with the processor link and the hub link weighing
/// `processor` and `hubs`, a NIC under ioh0.
fn nehalem_with_weights(processor: u32, hubs: u32) -> String {
    let platform = include_str!("../../../scenarios/platforms/nehalem_dual_ioh.toml");
    let first = platform.split("[platform.tyche_initiator]").next().unwrap();
    let first = first
        .replace(
            "ends = [\"pkg0\", \"pkg1\"]\n",
            &format!("ends = [\"pkg0\", \"pkg1\"]\nweight = {processor}\n"),
        )
        .replace(
            "weight = 2                       #",
            &format!("weight = {hubs}   #"),
        );
    format!(
        r#"include = ["platforms/devices.toml"]
[scenario]
name = "weights"
{first}
[[host]]
name = "h"
platform = "tyche_target"
[[host.device]]
name = "nic0"
device_model = "myri10ge"
parent = "ioh0"
"#
    )
}

#[test]
fn an_ioh_joined_to_no_package_is_a_located_error() {
    // Only the hubs' link: ioh0's NIC cannot reach any memory.
    let text = nehalem_with_weights(1, 1)
        .replace("ends = [\"pkg0\", \"ioh0\"]", "ends = [\"ioh0\", \"ioh1\"]")
        .replace("ends = [\"pkg1\", \"ioh1\"]", "ends = [\"ioh0\", \"ioh1\"]");
    let e = load(
        Source {
            name: "test".into(),
            text,
        },
        &builtin::BuiltinResolver,
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        e.line > 0 && msg.contains("platform.tyche_target.interconnect") && msg.contains("ioh"),
        "{msg}"
    );
}

#[test]
fn a_two_socket_platform_behaves_as_the_shorthand_it_replaced() {
    // The R730 through its uncore graph against `MemSys::new` on the same parameters:
    // the same times and counters for remote and local device writes and reads and
    // a core's remote miss.
    let t = topo("ioctopus_r730");
    let graph = memory_system(&t, t.host_by_name("server").unwrap()).unwrap();
    let mut a = graph.clone();
    let mut b = MemSys::new(graph.params().clone());
    for i in 0..200u64 {
        let at = Time::from_ns(i * 37);
        let (dev, node) = ((i % 2) as u32, ((i / 2) % 2) as u32);
        let bytes = 64 + (i * 131) % 9000;
        assert_eq!(
            a.device_write(at, dev, node, i, bytes),
            b.device_write(at, dev, node, i, bytes)
        );
        assert_eq!(
            a.device_read(at, 1 - dev, node, i / 3, bytes),
            b.device_read(at, 1 - dev, node, i / 3, bytes)
        );
        assert_eq!(
            a.cpu_read(at, dev, 1 - node, 1000 + i, bytes, i % 3 == 0),
            b.cpu_read(at, dev, 1 - node, 1000 + i, bytes, i % 3 == 0)
        );
    }
    assert_eq!(a.interconnect_bytes(0), b.interconnect_bytes(0));
    assert_eq!(a.interconnect_bytes(1), b.interconnect_bytes(1));
    assert!(a.interconnect_bytes(0) > 0 && a.interconnect_bytes(1) > 0);
    assert_eq!(a.dram(0), b.dram(0));
    assert_eq!(a.dram(1), b.dram(1));
}

#[test]
fn two_hops_cut_through_pay_two_latencies_and_one_serialization() {
    let t = topo("tyche_6nic");
    let mut ms = memory_system(&t, t.host_by_name("target").unwrap()).unwrap();
    let u = ms.uncore().clone();
    let ioh0 = u.vertex("ioh0").unwrap();
    let done = ms.device_write(Time::ZERO, ioh0, 1, 3, 4096);
    // Links of 11.72 GB/s and 20 ns (nehalem_dual_ioh.toml), DRAM 20 GB/s and 65 ns:
    // the second link finishes one line after the first; the write alone on DRAM, as
    // the Nehalem hosts source-snoop (no home agent's read: module text of sim::memsys).
    let link = Fifo::new(11.72);
    let dram = Fifo::new(20.0);
    let expected = link.duration(4096)
        + link.duration(LINE)
        + Time::from_ns(40)
        + dram.duration(4096)
        + Time::from_ns(65);
    assert_eq!(done, expected);
}
