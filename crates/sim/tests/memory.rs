//! The memory system seen from devices and CPUs on a two-socket machine: a device write
//! through the memory's own socket (DDIO) leaves the line in the LLC, so a CPU read hits;
//! the same write from the PF on the other socket crosses QPI, lands in DRAM and the CPU
//! read misses; remote DRAM costs more than local; interconnect bytes are counted.

use fabric::{builtin, Access, Fabric, Request, Requester};
use sim::component::{Component, Sim};
use sim::net::{ComponentId, Event, Issue};
use sim::timed::TimedFabric;

/// A requester that only injects: what it hears does not matter here.
struct Quiet;
impl Component<TimedFabric> for Quiet {
    fn notify(&mut self, _: &mut TimedFabric, _: ComponentId, _: Event) {}
}

fn r730() -> TimedFabric {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

/// PF `pf` of the server's NIC writes 64 B at node-0 offset `off`.
fn nic_write(tf: &mut TimedFabric, pf: u32, off: u64) {
    let host = tf.fabric.topo.host_by_name("server").unwrap();
    let addr = tf.fabric.topo.host(host).ram_addr(0, off).unwrap();
    let nic = match tf.fabric.resolve(&format!("server.nic.pf{pf}")).unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    };
    let req = Request {
        requester: Requester::Function(nic),
        addr,
        len: 64,
        access: Access::Write,
    };
    let (route, _) = tf.route(&req).unwrap();
    let mut sim = Sim::new();
    let me = sim.add(Quiet);
    tf.net.send_write(Issue::new(route, me, 0, 64, off));
    sim.run_until_idle(tf);
}

#[test]
fn local_dma_leaves_lines_in_the_llc_remote_dma_does_not() {
    let mut tf = r730();
    let host = tf.fabric.topo.host_by_name("server").unwrap();
    let cold = tf.cpu_line_read(host, 0, 0, 0x10_0000);
    nic_write(&mut tf, 0, 0x10_0000); // PF0 on socket 0 writes node 0: DDIO
    let warm = tf.cpu_line_read(host, 0, 0, 0x10_0000);
    assert!(warm < cold, "DDIO'd line hits the LLC: {warm} vs {cold}");
    nic_write(&mut tf, 1, 0x20_0000); // PF1 on socket 1 writes node 0 across QPI
    let remote_written = tf.cpu_line_read(host, 0, 0, 0x20_0000);
    assert_eq!(
        remote_written, cold,
        "a write from the other socket goes to DRAM"
    );
    // Overwriting a cached line from the remote PF invalidates it.
    nic_write(&mut tf, 1, 0x10_0000);
    assert_eq!(tf.cpu_line_read(host, 0, 0, 0x10_0000), cold);
    let c = tf.net.counters();
    let llc = &c.llc[0];
    assert_eq!(
        (llc.3, llc.5),
        (1, 1),
        "one DDIO allocation, one invalidation: {c:?}"
    );
    assert!(
        c.wires
            .iter()
            .any(|w| w.0.starts_with("server pkg0-pkg1") && w.2 == 128),
        "QPI carried the two remote writes: {:?}",
        c.wires
    );
}

#[test]
fn remote_dram_costs_more_than_local() {
    let tf = r730();
    let host = tf.fabric.topo.host_by_name("server").unwrap();
    let local = tf.cpu_line_read(host, 0, 0, 0);
    let remote = tf.cpu_line_read(host, 0, 1, 0);
    assert_eq!(
        remote.as_ns(),
        local.as_ns() + 50,
        "two QPI crossings of 25 ns"
    );
}

#[test]
fn an_adapter_without_a_translation_cost_is_an_error_not_a_free_crossing() {
    let text = r#"include = ["platforms/smartio.toml"]
[scenario]
name = "t"
[adapter.mine]
chip = "pex8733"
link = { gen = 3, width = 8 }
bar_size = "1 GiB"
lut_windows = 32
rid_lut_entries = 32
rid_reserved = 2
[[host]]
name = "a"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "mine"
parent = "rc0"
"#;
    let s = fabric::scenario::load(
        fabric::scenario::Source {
            name: "t.toml".into(),
            text: text.into(),
        },
        &builtin::BuiltinResolver,
    )
    .unwrap();
    let e = TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1)
        .err()
        .expect("refused");
    assert!(
        e.to_string()
            .contains("adapter `mine` (on a.ntb) has no timing parameter `ntb_translate_ns`"),
        "{e}"
    );
}
