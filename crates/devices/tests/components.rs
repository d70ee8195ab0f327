//! Components on the timed fabric: a small echo device and its driver in one simulation.
//! The driver's doorbell and register writes reach the model that owns the BAR with offset
//! and data; a configuration write is routed by requester ID to the function's owner and a
//! configuration read returns what enumeration put in the BAR register; the device's DMA
//! moves real bytes and its MSI reaches the host's interrupt delivery after the data has
//! landed. A DMA job's bytes land where the fabric says, when their TLPs land.

use devices::{pattern_byte, DmaJob, DmaSpec, Op, Ops};
use fabric::{builtin, Access, Fabric, HostId, PcieNodeId, Request, Requester, Target};
use sim::component::{Component, Sim};
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::timed::{bar_register, TimedFabric};
use sim::Time;

fn r730(iommu: bool) -> TimedFabric {
    let mut s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    s.topology.hosts[0].iommu = iommu;
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

fn node(tf: &TimedFabric, name: &str) -> PcieNodeId {
    match tf.fabric.resolve(name).unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    }
}

// Echo registers in BAR0.
const DOORBELL: u64 = 0x00;
const SRC: u64 = 0x10;
const DST: u64 = 0x18;
const MSI_ADDR: u64 = 0x20;
const MSI_DATA: u64 = 0x28;
const LEN: u32 = 256;

/// On a doorbell, reads `LEN` bytes at SRC, writes them to DST, then raises its MSI.
#[derive(Default)]
struct Echo {
    node: PcieNodeId,
    regs: [u64; 6],
    doorbells: Vec<(u64, Time)>,
    config_writes: Vec<(u64, u64)>,
    data_landed: Option<Time>,
    msi_sent: Option<Time>,
}

const FLOW_DATA: u32 = 1;
const FLOW_MSI: u32 = 2;

impl Echo {
    fn send(&self, tf: &mut TimedFabric, me: ComponentId, addr: u64, access: Access) -> Issue {
        let req = Request {
            requester: Requester::Function(self.node),
            addr,
            len: LEN,
            access,
        };
        let (route, target) = tf.route(&req).expect("mapped");
        Issue::new(route, me, 0, LEN, sim::timed::sink_address(&target))
    }
}

impl Component<TimedFabric> for Echo {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        let Event::Delivery(d) = ev else { return };
        match d {
            Delivery::Mmio {
                sink, offset, data, ..
            } if Some(sink) == tf.bar_sink(self.node) => {
                let (bar, reg) = bar_register(offset);
                assert_eq!(bar, 0);
                self.regs[(reg / 8) as usize] = data;
                if reg == DOORBELL {
                    self.doorbells.push((data, tf.net.now()));
                    let issue = self.send(tf, me, self.regs[(SRC / 8) as usize], Access::Read);
                    tf.net.send_read(issue, 0);
                }
            }
            Delivery::Mmio { offset, data, .. } => self.config_writes.push((offset, data)),
            Delivery::ReadData { last: true, .. } => {
                // The bytes as they are now, written out to DST.
                let mut buf = vec![0; LEN as usize];
                let src = self.regs[(SRC / 8) as usize];
                tf.fabric
                    .load(Requester::Function(self.node), src, &mut buf)
                    .unwrap();
                let dst = self.regs[(DST / 8) as usize];
                let issue = Issue {
                    flow: FLOW_DATA,
                    ..self.send(tf, me, dst, Access::Write)
                };
                tf.net.send_write(issue);
                tf.fabric
                    .store(Requester::Function(self.node), dst, &buf)
                    .unwrap();
            }
            Delivery::WriteDone {
                flow: FLOW_DATA, ..
            } => {
                self.data_landed = Some(tf.net.now());
                // Posted writes stay ordered: the MSI cannot pass the data.
                let addr = self.regs[(MSI_ADDR / 8) as usize];
                let vector = self.regs[(MSI_DATA / 8) as usize] as u32;
                let req = Request {
                    requester: Requester::Function(self.node),
                    addr,
                    len: 4,
                    access: Access::Write,
                };
                let (route, target) = tf.route(&req).expect("MSI window");
                assert!(matches!(target, Target::Interrupt { .. }), "{target:?}");
                let issue = Issue {
                    data: vector as u64,
                    ..Issue::new(route, me, FLOW_MSI, 4, addr)
                };
                tf.net.send_write(issue);
                self.msi_sent = Some(tf.net.now());
            }
            Delivery::WriteDone { flow: FLOW_MSI, .. } => {
                let vector = self.regs[(MSI_DATA / 8) as usize] as u32;
                let addr = self.regs[(MSI_ADDR / 8) as usize];
                tf.fabric
                    .store(Requester::Function(self.node), addr, &vector.to_le_bytes())
                    .unwrap();
            }
            _ => {}
        }
    }
}

/// The host's interrupt delivery: records each MSI it hears (APIC from the address).
#[derive(Default)]
struct Apic {
    seen: Vec<(u32, u64, Time)>,
}

impl Component<TimedFabric> for Apic {
    fn notify(&mut self, tf: &mut TimedFabric, _: ComponentId, ev: Event) {
        if let Event::Delivery(Delivery::Mmio { offset, data, .. }) = ev {
            self.seen
                .push((fabric::msi_apic(offset), data, tf.net.now()));
        }
    }
}

/// The driver: a CPU of package 0 programs the echo by MMIO writes and a config write.
struct Driver {
    bar0: u64,
    program: Vec<(u64, u64)>,
    rid: fabric::Rid,
}

impl Component<TimedFabric> for Driver {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        if ev != Event::Wake {
            return;
        }
        // Command register: memory space and bus master enable, by ID.
        let (route, _) = tf.config_route(HostId(0), 0, self.rid, true).unwrap();
        tf.net.send_write(Issue {
            data: 0x6,
            ..Issue::new(route, me, 0, 2, 0x04)
        });
        for &(reg, value) in &self.program {
            let req = Request {
                requester: Requester::Cpu {
                    host: HostId(0),
                    package: 0,
                },
                addr: self.bar0 + reg,
                len: 8,
                access: Access::Write,
            };
            let (route, target) = tf.route(&req).unwrap();
            tf.net.send_write(Issue {
                data: value,
                ..Issue::new(route, me, 0, 8, sim::timed::sink_address(&target))
            });
        }
    }
}

#[test]
fn doorbells_config_writes_and_msi_reach_the_models_that_own_them() {
    let mut tf = r730(false);
    let echo_node = node(&tf, "server.nic.pf0");
    let rid = tf.fabric.topo.node(echo_node).rid;
    let bar0 = tf.fabric.topo.node(echo_node).bars[0].addr;
    let (_, src) = tf
        .fabric
        .resolve_address("server.ram.node0", 0x10_0000)
        .unwrap();
    let (_, dst) = tf
        .fabric
        .resolve_address("server.ram.node0", 0x20_0000)
        .unwrap();
    let payload: Vec<u8> = (0..LEN as u64).map(|i| pattern_byte(7, i)).collect();
    tf.fabric.cpu_store(HostId(0), 0, src, &payload).unwrap();
    let msi_addr = fabric::MSI_WINDOW.start | (3 << 12); // APIC 3
    let mut sim = Sim::new();
    let echo = sim.add(Echo {
        node: echo_node,
        ..Echo::default()
    });
    let apic = sim.add(Apic::default());
    let driver = sim.add(Driver {
        bar0,
        rid,
        program: vec![
            (SRC, src),
            (DST, dst),
            (MSI_ADDR, msi_addr),
            (MSI_DATA, 0x41),
            (DOORBELL, LEN as u64),
        ],
    });
    let bar_sink = tf.bar_sink(echo_node).unwrap();
    tf.net.set_sink_owner(bar_sink, echo);
    let config_sink = tf.config_sink(echo_node);
    tf.net.set_sink_owner(config_sink, echo);
    let irq = tf.interrupt_sink(HostId(0));
    tf.net.set_sink_owner(irq, apic);
    tf.net.wake_at(Time::ZERO, driver);
    sim.run_until_idle(&mut tf);

    let e = sim.get::<Echo>(echo).unwrap();
    assert_eq!(e.doorbells.len(), 1, "one doorbell");
    assert_eq!(e.doorbells[0].0, LEN as u64, "with the driver's data");
    assert_eq!(
        e.config_writes,
        vec![(0x04, 0x6)],
        "command register, by ID"
    );
    let mut got = vec![0; LEN as usize];
    tf.fabric.peek_ram(HostId(0), 0, 0x20_0000, &mut got);
    assert_eq!(got, payload, "the echoed bytes landed at DST");
    let a = sim.get::<Apic>(apic).unwrap();
    assert_eq!(a.seen.len(), 1);
    let (apic_id, vector, at) = a.seen[0];
    assert_eq!((apic_id, vector), (3, 0x41));
    assert!(at > e.data_landed.unwrap(), "the MSI follows the data");
    assert_eq!(
        tf.fabric.interrupts(),
        &[fabric::Msi {
            host: HostId(0),
            apic: 3,
            data: 0x41
        }]
    );
    // A CPU reads the BAR register by configuration read: what enumeration assigned.
    let mut reg = [0u8; 4];
    tf.fabric
        .config_read(HostId(0), 0, rid, 0x10, &mut reg)
        .unwrap();
    assert_eq!(u32::from_le_bytes(reg) as u64 & !0xf, bar0 & 0xffff_fff0);
}

#[test]
fn config_requests_to_a_missing_requester_id_fault() {
    let mut tf = r730(false);
    let e = tf
        .config_route(HostId(0), 0, fabric::Rid(0xfff0), false)
        .unwrap_err();
    assert_eq!(e.kind, fabric::FaultKind::NoWindow);
    // The functional side routes the same way, and logs the fault.
    let mut reg = [0u8; 4];
    let e = tf
        .fabric
        .config_read(HostId(0), 0, fabric::Rid(0xfff0), 0, &mut reg)
        .unwrap_err();
    assert_eq!(e.kind, fabric::FaultKind::NoWindow);
    assert_eq!(tf.fabric.faults().last(), Some(&e));
}

#[test]
fn a_dma_jobs_bytes_land_where_the_fabric_says_when_their_tlps_land() {
    let mut tf = r730(false);
    let nic = Requester::Function(node(&tf, "server.nic.pf1"));
    let bytes = 64 << 10;
    let (_, dst) = tf
        .fabric
        .resolve_address("server.ram.node0", 0x40_0000)
        .unwrap();
    let spec = DmaSpec {
        mps: 256,
        mrrs: 512,
        max_reads: 16,
        issue_ps_per_kib: sim::pcie::ps_per_kib(3, 8),
    };
    let job = DmaJob::ops(
        &mut tf,
        nic,
        spec,
        Op::Write { dst },
        bytes,
        Ops::Count(1),
        1,
    )
    .unwrap();
    let mut sim = Sim::new();
    let id = sim.add(job);
    tf.net.wake_at(Time::ZERO, id);
    // Part-way through, the first bytes are there and the last are not yet.
    sim.run_until(&mut tf, Time::from_ns(4_000));
    let (mut first, mut last) = ([0u8; 64], [0u8; 64]);
    tf.fabric.peek_ram(HostId(0), 0, 0x40_0000, &mut first);
    tf.fabric
        .peek_ram(HostId(0), 0, 0x40_0000 + bytes - 64, &mut last);
    assert_eq!(first[0], pattern_byte(0, 0));
    assert!(last.iter().all(|&b| b == 0), "not landed yet");
    sim.run_until_finished(&mut tf);
    let mut all = vec![0u8; bytes as usize];
    tf.fabric.peek_ram(HostId(0), 0, 0x40_0000, &mut all);
    let want: Vec<u8> = (0..bytes).map(|i| pattern_byte(0, i)).collect();
    assert!(all == want, "every byte at its place");
    // The PF on the other socket wrote across QPI: counted on the interconnect.
    let c = tf.net.counters();
    assert!(c
        .wires
        .iter()
        .any(|w| w.0.contains("pkg1-pkg0") || w.0.contains("pkg0-pkg1")));
}

#[test]
fn an_unmapped_page_faults_in_the_timed_path_too() {
    let mut tf = r730(true);
    let nic_node = node(&tf, "server.nic.pf0");
    let nic = Requester::Function(nic_node);
    let (host, addr) = tf
        .fabric
        .resolve_address("server.ram.node0", 0x10_0000)
        .unwrap();
    // Mapped the way a driver maps (identity policy: the DMA address is the bus address).
    let m = host::Hosts::with(&mut tf.fabric, |h, f| {
        h.dma_map_single(
            f,
            nic,
            host::PhysAddr { host, addr },
            4096,
            host::DmaDirection::Bidirectional,
        )
    })
    .unwrap();
    assert_eq!(m.addr.0, addr);
    let req = Request {
        requester: nic,
        addr,
        len: 64,
        access: Access::Write,
    };
    assert!(tf.route(&req).is_ok(), "mapped: routed (and cached)");
    host::Hosts::with(&mut tf.fabric, |h, f| h.dma_unmap_single(f, &m)).unwrap();
    let f = tf.route(&req).unwrap_err();
    assert_eq!(f.kind, fabric::FaultKind::IommuNotMapped);
    // A DMA job planned on the unmapped page is refused before it runs.
    let spec = DmaSpec {
        mps: 256,
        mrrs: 512,
        max_reads: 16,
        issue_ps_per_kib: 1,
    };
    assert!(DmaJob::new(&mut tf, nic, spec, Op::Write { dst: addr }, 64).is_err());
}
