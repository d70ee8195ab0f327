//! The NVMe controller model driven by the minimal queue-pair driver, everything through
//! the fabric: registers read back by CPU loads, queue limits and the spec's status codes
//! read from CQ entry bytes, bytes written and read back, the phase tag across wraps,
//! faults as Data Transfer Errors, invalid doorbells counted, timing relationships, and
//! the same driver reaching a controller in another host through NTBs.

use devices::nvme::command::{Command, Completion, IdentifyController, IdentifyNamespace, Status};
use devices::nvme::queue::{Buffer, DriverLog, DriverStep, IoCmd, IoJob, QueueMemory};
use devices::nvme::regs::{self, Cap};
use devices::nvme::{NvmeController, NvmeDriver, NvmeDriverConfig, NvmeParams};
use devices::pattern_byte;
use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Source};
use fabric::{Fabric, HostId, PcieNodeId, Requester};
use host::{Hosts, NumaNode, PhysAddr};
use sim::component::Sim;
use sim::net::ComponentId;
use sim::timed::TimedFabric;
use sim::Time;

const LOCAL: &str = r#"
include = ["platforms/smartio.toml", "platforms/devices.toml"]
[scenario]
name = "nvme_local"
[[host]]
name = "h"
platform = "smartio_host"
[[host.device]]
name = "nvme"
device_model = "p4800x"
parent = "rc0"
"#;

/// Host `a` drives the NVMe in host `b` through back-to-back PXH830s.
const TWO_HOSTS: &str = r#"
include = ["platforms/smartio.toml", "platforms/devices.toml"]
[scenario]
name = "nvme_b2b"
[[host]]
name = "a"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
[[host]]
name = "b"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
[[host.device]]
name = "nvme"
device_model = "p4800x"
parent = "rc0"
[[cable]]
ends = ["a.ntb", "b.ntb"]
link = { gen = 3, width = 16 }
"#;

const BLOCKS: u64 = 1 << 20;

struct Rig {
    tf: TimedFabric,
    sim: Sim<TimedFabric>,
    ctrl: ComponentId,
    driver: Option<ComponentId>,
    nvme: PcieNodeId,
    cpu: Requester,
    cpu_host: HostId,
    cfg: NvmeDriverConfig,
}

fn timed(text: &str) -> TimedFabric {
    let s = load(
        Source {
            name: "nvme.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

fn node(tf: &TimedFabric, name: &str) -> PcieNodeId {
    match tf.fabric.resolve(name).unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    }
}

/// `bytes` of RAM on `host` node 0, mapped for the controller: (CPU address, bus address).
fn alloc(tf: &mut TimedFabric, nvme: PcieNodeId, host: HostId, bytes: u64) -> Buffer {
    let c = Hosts::with(&mut tf.fabric, |h, f| {
        h.dma_alloc_coherent(
            f,
            Requester::Function(nvme),
            NumaNode { host, node: 0 },
            bytes,
        )
    })
    .unwrap();
    Buffer {
        cpu: c.phys.addr,
        dev: c.mapping.addr.0,
        bytes,
    }
}

fn queue_memory(tf: &mut TimedFabric, nvme: PcieNodeId, host: HostId) -> QueueMemory {
    let sq = alloc(tf, nvme, host, 4096);
    let cq = alloc(tf, nvme, host, 4096);
    QueueMemory {
        sq_cpu: sq.cpu,
        sq_dev: sq.dev,
        cq_cpu: cq.cpu,
        cq_dev: cq.dev,
    }
}

impl Rig {
    fn new(text: &str, nvme: &str, cpu_host: &str, lba_bytes: u64) -> Rig {
        let mut tf = timed(text);
        let nvme = node(&tf, nvme);
        let cpu_host = tf.fabric.topo.host_by_name(cpu_host).unwrap();
        let cpu = Requester::Cpu {
            host: cpu_host,
            package: 0,
        };
        let params = NvmeParams::from_node(&tf, nvme, lba_bytes, BLOCKS).unwrap();
        let ctrl = NvmeController::new(&mut tf, nvme, params).unwrap();
        let mut sim = Sim::new();
        let c = sim.add(ctrl);
        sim.get::<NvmeController>(c)
            .unwrap()
            .attach(&mut tf, c)
            .unwrap();
        // BAR0 as the driving CPU addresses it: directly, or mapped through its NTB.
        let n = tf.fabric.topo.node(nvme);
        let (bar0, bar_host) = (n.bars[0].addr, n.host);
        let bar0 = if bar_host == cpu_host {
            bar0
        } else {
            Hosts::with(&mut tf.fabric, |h, f| {
                h.dma_map_single(
                    f,
                    cpu,
                    PhysAddr {
                        host: bar_host,
                        addr: bar0,
                    },
                    16 << 10,
                    host::DmaDirection::Bidirectional,
                )
            })
            .unwrap()
            .addr
            .0
        };
        let admin = queue_memory(&mut tf, nvme, cpu_host);
        let scratch = alloc(&mut tf, nvme, cpu_host, 4096);
        let cfg = NvmeDriverConfig::new(&tf, cpu, bar0, admin, 32, scratch);
        Rig {
            tf,
            sim,
            ctrl: c,
            driver: None,
            nvme,
            cpu,
            cpu_host,
            cfg,
        }
    }

    fn local(lba_bytes: u64) -> Rig {
        Rig::new(LOCAL, "h.nvme", "h", lba_bytes)
    }

    fn queue_memory(&mut self) -> QueueMemory {
        queue_memory(&mut self.tf, self.nvme, self.cpu_host)
    }

    fn buffer(&mut self, bytes: u64) -> Buffer {
        alloc(&mut self.tf, self.nvme, self.cpu_host, bytes)
    }

    /// Runs `steps` to the end and gives the driver's log.
    fn run(&mut self, steps: Vec<DriverStep>) -> &DriverLog {
        let id = match self.driver {
            None => {
                let id = self.sim.add(NvmeDriver::new(self.cfg.clone(), steps));
                self.driver = Some(id);
                id
            }
            Some(id) => {
                self.sim.with(&mut self.tf, id, |d: &mut NvmeDriver, _| {
                    for s in steps {
                        d.push(s);
                    }
                });
                id
            }
        };
        let now = self.tf.net.now();
        self.tf.net.wake_at(now, id);
        self.sim.run_until_finished(&mut self.tf);
        &self.sim.get::<NvmeDriver>(id).unwrap().log
    }

    fn ctrl(&self) -> &NvmeController {
        self.sim.get::<NvmeController>(self.ctrl).unwrap()
    }

    /// Enable, identify the namespace, one I/O queue pair (qid 1) of `entries`.
    fn bring_up(&mut self, entries: u16) {
        let mem = self.queue_memory();
        let log = self.run(vec![
            DriverStep::Enable,
            DriverStep::Identify { cns: 0, nsid: 1 },
            DriverStep::CreateQueuePair {
                qid: 1,
                entries,
                mem,
                vector: None,
            },
        ]);
        assert!(!log.fatal);
        assert!(
            log.admin.iter().all(|(_, e)| e.status == Status::SUCCESS),
            "{:?}",
            log.admin
        );
    }

    fn fill(&mut self, buf: &Buffer, seed: u8) {
        let data: Vec<u8> = (0..buf.bytes).map(|i| pattern_byte(seed, i)).collect();
        self.tf.fabric.store(self.cpu, buf.cpu, &data).unwrap();
    }

    fn bytes(&mut self, addr: u64, len: u64) -> Vec<u8> {
        let mut b = vec![0; len as usize];
        self.tf.fabric.load(self.cpu, addr, &mut b).unwrap();
        b
    }
}

fn job(qid: u16, depth: u16, cmds: Vec<IoCmd>, data: Buffer, lists: Buffer) -> DriverStep {
    DriverStep::Io(IoJob {
        qid,
        depth,
        nsid: 1,
        cmds,
        data,
        prp_lists: lists,
    })
}

fn statuses(log: &DriverLog) -> Vec<Status> {
    log.admin.iter().map(|(_, e)| e.status).collect()
}

#[test]
fn registers_read_back_by_cpu_loads_and_identify_gives_real_fields() {
    let mut r = Rig::local(4096);
    let log = r.run(vec![
        DriverStep::Enable,
        DriverStep::Identify { cns: 1, nsid: 0 },
        DriverStep::Identify { cns: 0, nsid: 1 },
    ]);
    let cap = Cap::from_u64(log.cap.expect("CAP read"));
    assert_eq!(cap.dstrd, 0);
    assert_eq!(cap.mqes, 4095);
    assert!(cap.cqr);
    assert_eq!(cap.css & 1, 1, "NVM command set");
    assert_eq!(cap.to, 1, "1 ms enable fits one 500 ms unit");
    assert_eq!(log.vs, Some(0x0001_0300));
    let csts = log.csts.expect("CSTS polled");
    assert_eq!(csts & regs::CSTS_RDY, 1, "ready after enable");
    // Not before the enable delay (1 ms) has passed.
    assert!(log.ready_at.unwrap() >= Time::from_us(1000));
    let c = IdentifyController::from_bytes(log.identify_controller.as_ref().unwrap());
    assert_eq!(c.vid, 0x8086);
    assert_eq!(c.namespaces, 1);
    assert!(c.model.contains("P4800X"), "{}", c.model);
    assert_eq!(c.version, 0x0001_0300);
    assert_eq!(
        IdentifyController::entry_sizes(log.identify_controller.as_ref().unwrap()),
        (0x66, 0x44)
    );
    let ns = IdentifyNamespace::from_bytes(log.identify_namespace.as_ref().unwrap());
    assert_eq!((ns.nsze, ns.ncap, ns.lba_bytes()), (BLOCKS, BLOCKS, 4096));
    // The same registers through a plain CPU load of BAR0: what the controller keeps there.
    let bar0 = r.cfg.bar0;
    let v = r.bytes(bar0 + regs::CC, 4);
    assert_eq!(u32::from_le_bytes(v.try_into().unwrap()), 0x0046_0001);
    let v = r.bytes(bar0 + regs::AQA, 4);
    assert_eq!(u32::from_le_bytes(v.try_into().unwrap()), regs::aqa(32, 32));
    // No Controller Memory Buffer on the P4800X (docs/hardware.md §2).
    assert_eq!(r.bytes(bar0 + regs::CMBSZ, 8), vec![0; 8]);
    // A reset clears RDY and deletes the queues; enabling again works.
    let log = r.run(vec![DriverStep::Reset]);
    assert_eq!(log.csts.unwrap() & regs::CSTS_RDY, 0);
    let log = r.run(vec![
        DriverStep::Enable,
        DriverStep::Identify { cns: 1, nsid: 0 },
    ]);
    assert_eq!(log.admin.last().unwrap().1.status, Status::SUCCESS);
    // A normal shutdown notification (CC.SHN = 01b): CSTS.SHST says complete.
    let cc = regs::Cc {
        shn: 1,
        ..regs::Cc::enable()
    };
    r.run(vec![DriverStep::Mmio {
        offset: regs::CC,
        bytes: 4,
        value: cc.to_u32() as u64,
    }]);
    let v = r.bytes(bar0 + regs::CSTS, 4);
    let csts = u32::from_le_bytes(v.try_into().unwrap());
    assert_eq!(csts & regs::CSTS_SHST, regs::CSTS_SHST_COMPLETE);
    assert_eq!(csts & regs::CSTS_RDY, 1);
}

#[test]
fn written_blocks_read_back_byte_for_byte_with_prp2_and_prp_lists() {
    for lba in [4096u64, 512] {
        let mut r = Rig::local(lba);
        r.bring_up(64);
        let per = |bytes: u64| (bytes / lba) as u16;
        let src = r.buffer(256 << 10);
        let dst = r.buffer(256 << 10);
        let lists = r.buffer(8 * 4096);
        r.fill(&src, 3);
        // 4 KiB blocks at scattered LBAs, an 8 KiB (PRP2) and two 64 KiB (PRP list)
        // transfers, one of them starting 512 B into a page (PRP1 offset, 17 pages).
        let mut writes = Vec::new();
        let mut off = 0;
        for (i, bytes) in [4096u64, 4096, 4096, 8192, 65536, 65536]
            .into_iter()
            .enumerate()
        {
            let slba = (i as u64 * 7919 * 64) % (BLOCKS - 256);
            let buf_offset = if i == 5 { off + 512 } else { off };
            writes.push(IoCmd {
                write: true,
                slba,
                blocks: per(bytes),
                buf_offset,
            });
            off += bytes + 4096;
        }
        let reads: Vec<IoCmd> = writes
            .iter()
            .map(|w| IoCmd { write: false, ..*w })
            .collect();
        let log = r.run(vec![
            job(1, 4, writes.clone(), src, lists),
            job(1, 4, reads, dst, lists),
        ]);
        assert_eq!(log.io_errors, 0, "{:?}", log.io);
        assert_eq!(log.io.len(), 12);
        for w in &writes {
            let n = w.blocks as u64 * lba;
            let want = r.bytes(src.cpu + w.buf_offset, n);
            let got = r.bytes(dst.cpu + w.buf_offset, n);
            assert!(want == got, "{lba} B LBAs: {n} B at LBA {} differ", w.slba);
            assert_eq!(r.ctrl().namespace().read(w.slba, w.blocks as u64), want);
        }
        // A block never written reads as zeros.
        assert!(r
            .ctrl()
            .namespace()
            .read(BLOCKS - 1, 1)
            .iter()
            .all(|&b| b == 0));
        let s = r.ctrl().stats();
        assert_eq!(s.bytes_written, s.bytes_read - 4096, "identify aside");
        assert_eq!(s.per_sq[&1], 12);
    }
}

#[test]
fn thirty_one_io_pairs_and_the_thirty_second_is_an_invalid_queue_identifier() {
    let mut r = Rig::local(4096);
    let mut steps = vec![
        DriverStep::Enable,
        DriverStep::Admin(Command::set_queue_count(64, 64)),
    ];
    for qid in 1..=32u16 {
        let mem = r.queue_memory();
        steps.push(DriverStep::Admin(Command::create_io_cq(
            qid, 4, mem.cq_dev, None,
        )));
        steps.push(DriverStep::Admin(Command::create_io_sq(
            qid, 4, mem.sq_dev, qid,
        )));
    }
    let log = r.run(steps).clone();
    let log = &log;
    let (_, set) = log.admin[0];
    assert_eq!(set.status, Status::SUCCESS);
    assert_eq!(
        set.dw0,
        30 | 30 << 16,
        "31 SQs and CQs allocated (0-based), capped"
    );
    let st = statuses(log);
    assert!(st[1..63].iter().all(|s| *s == Status::SUCCESS), "{st:?}");
    assert_eq!(st[63], Status::INVALID_QUEUE_IDENTIFIER, "32nd CQ");
    assert_eq!(st[64], Status::INVALID_QUEUE_IDENTIFIER, "32nd SQ");
    // The status as the bytes of the last CQ entry say: SCT 1, SC 01h.
    let admin_cq = r.cfg.admin.cq_cpu;
    let at = (log.admin.len() as u64 - 1) % 32 * 16;
    let e = r.bytes(admin_cq + at, 16);
    let dw3 = u32::from_le_bytes(e[12..16].try_into().unwrap());
    assert_eq!((dw3 >> 25 & 7, dw3 >> 17 & 0xff), (1, 0x01));
    // Once I/O queues exist, the queue count cannot change; Get Features still says 31.
    let log = r.run(vec![
        DriverStep::Admin(Command::set_queue_count(4, 4)),
        DriverStep::Admin(Command::get_queue_count()),
    ]);
    let n = log.admin.len();
    assert_eq!(log.admin[n - 2].1.status, Status::COMMAND_SEQUENCE_ERROR);
    assert_eq!(log.admin[n - 1].1.status, Status::SUCCESS);
    assert_eq!(log.admin[n - 1].1.dw0, 30 | 30 << 16);
}

#[test]
fn queue_creation_and_deletion_follow_the_specs_rules() {
    let mut r = Rig::local(4096);
    let mem = r.queue_memory();
    let log = r.run(vec![
        DriverStep::Enable,
        DriverStep::Admin(Command::set_queue_count(2, 2)),
        // An SQ naming a CQ that does not exist.
        DriverStep::Admin(Command::create_io_sq(1, 16, mem.sq_dev, 1)),
        DriverStep::Admin(Command::create_io_cq(0, 16, mem.cq_dev, None)),
        DriverStep::Admin(Command::create_io_cq(3, 16, mem.cq_dev, None)),
        DriverStep::Admin(Command::create_io_cq(1, 4097, mem.cq_dev, None)),
        DriverStep::Admin(Command::create_io_cq(1, 16, mem.cq_dev, None)),
        DriverStep::Admin(Command::create_io_cq(1, 16, mem.cq_dev, None)),
        DriverStep::Admin(Command::create_io_sq(1, 16, mem.sq_dev, 1)),
        DriverStep::Admin(Command::delete_io_cq(1)),
        DriverStep::Admin(Command::delete_io_sq(1)),
        DriverStep::Admin(Command::delete_io_cq(1)),
        DriverStep::Admin(Command::delete_io_cq(1)),
        DriverStep::Admin(Command {
            opcode: 0x7f,
            ..Command::default()
        }),
        DriverStep::Admin(Command::identify(9, 0, r.cfg.scratch.dev, 0)),
    ]);
    assert_eq!(
        statuses(log),
        vec![
            Status::SUCCESS,
            Status::COMPLETION_QUEUE_INVALID,
            Status::INVALID_QUEUE_IDENTIFIER,
            Status::INVALID_QUEUE_IDENTIFIER,
            Status::INVALID_QUEUE_SIZE,
            Status::SUCCESS,
            Status::INVALID_QUEUE_IDENTIFIER,
            Status::SUCCESS,
            Status::INVALID_QUEUE_DELETION,
            Status::SUCCESS,
            Status::SUCCESS,
            Status::INVALID_QUEUE_IDENTIFIER,
            Status::INVALID_OPCODE,
            Status::INVALID_FIELD,
        ]
    );
    let s = r.ctrl().stats();
    assert_eq!(s.errors[&Status::INVALID_QUEUE_IDENTIFIER], 4);
    assert_eq!(s.per_sq[&0], 14);
}

#[test]
fn the_phase_tag_flips_on_every_wrap() {
    let mut r = Rig::local(4096);
    r.bring_up(4);
    let data = r.buffer(64 << 10);
    let lists = r.buffer(4 * 4096);
    let cmds: Vec<IoCmd> = (0..10)
        .map(|i| IoCmd {
            write: i % 2 == 0,
            slba: i,
            blocks: 1,
            buf_offset: i * 4096,
        })
        .collect();
    let log = r.run(vec![job(1, 3, cmds, data, lists)]);
    assert_eq!(log.io.len(), 10);
    assert_eq!(log.io_errors, 0);
    let phases: Vec<bool> = log.io.iter().map(|(_, _, e)| e.phase).collect();
    let want: Vec<bool> = (0..10).map(|i| (i / 4) % 2 == 0).collect();
    assert_eq!(
        phases, want,
        "entries 0-3 phase 1, 4-7 phase 0, 8-9 phase 1"
    );
    // The SQ head the controller reports wraps too.
    assert!(log.io.iter().all(|(_, _, e)| e.sq_head < 4 && e.sq_id == 1));
}

#[test]
fn lbas_beyond_the_namespace_are_out_of_range() {
    let mut r = Rig::local(4096);
    r.bring_up(16);
    let data = r.buffer(64 << 10);
    let lists = r.buffer(4 * 4096);
    let cmds = vec![
        IoCmd {
            write: false,
            slba: BLOCKS - 1,
            blocks: 2,
            buf_offset: 0,
        },
        IoCmd {
            write: true,
            slba: BLOCKS,
            blocks: 1,
            buf_offset: 0,
        },
        IoCmd {
            write: false,
            slba: BLOCKS - 1,
            blocks: 1,
            buf_offset: 0,
        },
    ];
    let log = r.run(vec![job(1, 1, cmds, data, lists)]);
    let st: Vec<Status> = log.io.iter().map(|(_, _, e)| e.status).collect();
    assert_eq!(
        st,
        vec![
            Status::LBA_OUT_OF_RANGE,
            Status::LBA_OUT_OF_RANGE,
            Status::SUCCESS
        ]
    );
    assert_eq!(r.ctrl().stats().errors[&Status::LBA_OUT_OF_RANGE], 2);
}

#[test]
fn a_buffer_nothing_claims_is_a_data_transfer_error_and_a_faulted_write_changes_nothing() {
    let mut r = Rig::local(4096);
    r.bring_up(16);
    let good = r.buffer(64 << 10);
    let lists = r.buffer(4 * 4096);
    r.fill(&good, 9);
    // Block 5 holds known bytes first.
    let log = r.run(vec![job(
        1,
        1,
        vec![IoCmd {
            write: true,
            slba: 5,
            blocks: 1,
            buf_offset: 0,
        }],
        good,
        lists,
    )]);
    assert_eq!(log.io_errors, 0);
    let before = r.ctrl().namespace().read(5, 2);
    // An address no window claims (far above RAM and every BAR).
    let nowhere = Buffer {
        cpu: 0,
        dev: 0x7f00_0000_0000,
        bytes: 64 << 10,
    };
    let cmds = vec![
        IoCmd {
            write: true,
            slba: 5,
            blocks: 1,
            buf_offset: 0,
        },
        IoCmd {
            write: true,
            slba: 6,
            blocks: 16,
            buf_offset: 0,
        },
        IoCmd {
            write: false,
            slba: 5,
            blocks: 1,
            buf_offset: 0,
        },
    ];
    let log = r.run(vec![job(1, 2, cmds, nowhere, lists)]);
    let st: Vec<Status> = log.io[1..].iter().map(|(_, _, e)| e.status).collect();
    assert_eq!(st, vec![Status::DATA_TRANSFER_ERROR; 3]);
    assert_eq!(
        r.ctrl().namespace().read(5, 2),
        before,
        "the faulted writes stored nothing"
    );
    assert_eq!(r.ctrl().stats().errors[&Status::DATA_TRANSFER_ERROR], 3);
    assert!(
        !r.tf.fabric.faults().is_empty(),
        "the fabric logged the faults"
    );
    assert!(r.ctrl().stats().dma_faults >= 3);
}

#[test]
fn doorbells_for_missing_queues_or_beyond_a_queue_are_counted_not_fatal() {
    let mut r = Rig::local(4096);
    r.bring_up(16);
    let log = r.run(vec![
        DriverStep::Mmio {
            offset: regs::doorbell(5, false, 0),
            bytes: 4,
            value: 1,
        },
        DriverStep::Mmio {
            offset: regs::doorbell(9, true, 0),
            bytes: 4,
            value: 0,
        },
        DriverStep::Mmio {
            offset: regs::doorbell(1, false, 0),
            bytes: 4,
            value: 16,
        },
        DriverStep::Identify { cns: 1, nsid: 0 },
    ]);
    assert_eq!(
        log.admin.last().unwrap().1.status,
        Status::SUCCESS,
        "still working"
    );
    assert_eq!(r.ctrl().stats().doorbell_errors, 3);
}

#[test]
fn completions_interrupt_through_msix_unless_the_vector_is_masked() {
    let mut r = Rig::local(4096);
    let mem = r.queue_memory();
    let data = r.buffer(64 << 10);
    let lists = r.buffer(4 * 4096);
    let msi = fabric::MSI_WINDOW.start | (2 << 12);
    let entry = regs::MSIX_TABLE + regs::MSIX_ENTRY;
    let io = |n| {
        job(
            1,
            1,
            (0..n)
                .map(|i| IoCmd {
                    write: false,
                    slba: i,
                    blocks: 1,
                    buf_offset: 0,
                })
                .collect(),
            data,
            lists,
        )
    };
    r.run(vec![
        DriverStep::Enable,
        DriverStep::Mmio {
            offset: entry,
            bytes: 8,
            value: msi,
        },
        DriverStep::Mmio {
            offset: entry + 8,
            bytes: 4,
            value: 0x51,
        },
        DriverStep::CreateQueuePair {
            qid: 1,
            entries: 8,
            mem,
            vector: Some(1),
        },
        io(3),
    ]);
    // Vectors start masked: the admin CQ's (vector 0: two creates) and the I/O CQ's.
    assert_eq!(r.ctrl().stats().masked_interrupts, 2 + 3);
    assert!(r.tf.fabric.interrupts().is_empty());
    // Unmasking delivers the pending one; then every completion interrupts.
    r.run(vec![
        DriverStep::Mmio {
            offset: entry + 12,
            bytes: 4,
            value: 0,
        },
        io(2),
    ]);
    // The last MSI may still be on its way when the driver has polled its completion.
    r.sim.run_until_idle(&mut r.tf);
    let irqs = r.tf.fabric.interrupts();
    assert_eq!(irqs.len(), 3);
    assert!(irqs.iter().all(|m| m.data == 0x51 && m.apic == 2));
}

/// Stores `cmds` as SQ entries (command ID = index + 1) from slot 0 of the SQ at `sq_cpu`.
fn place_sqes(r: &mut Rig, sq_cpu: u64, cmds: &[Command]) {
    for (i, c) in cmds.iter().enumerate() {
        let c = Command {
            cid: i as u16 + 1,
            ..*c
        };
        r.tf.fabric
            .store(r.cpu, sq_cpu + 64 * i as u64, &c.to_bytes())
            .unwrap();
    }
}

fn cq_entry(r: &mut Rig, cq_cpu: u64, slot: u64) -> Completion {
    let b = r.bytes(cq_cpu + 16 * slot, 16);
    Completion::from_bytes(&b.try_into().unwrap())
}

#[test]
fn a_full_completion_queue_makes_the_controller_wait_not_overwrite() {
    let mut r = Rig::local(4096);
    let mem = r.queue_memory();
    r.run(vec![
        DriverStep::Enable,
        DriverStep::Admin(Command::create_io_cq(1, 4, mem.cq_dev, None)),
        DriverStep::Admin(Command::create_io_sq(1, 16, mem.sq_dev, 1)),
    ]);
    // Six flushes in the SQ and its doorbell, with nobody consuming the CQ.
    place_sqes(&mut r, mem.sq_cpu, &[Command::flush(1); 6]);
    r.run(vec![DriverStep::Mmio {
        offset: regs::doorbell(1, false, 0),
        bytes: 4,
        value: 6,
    }]);
    r.sim.run_until_idle(&mut r.tf);
    let cids: Vec<u16> = (0..3)
        .map(|s| cq_entry(&mut r, mem.cq_cpu, s).cid)
        .collect();
    assert_eq!(cids, vec![1, 2, 3]);
    assert!((0..3).all(|s| cq_entry(&mut r, mem.cq_cpu, s).phase));
    assert_eq!(
        r.bytes(mem.cq_cpu + 48, 16),
        vec![0; 16],
        "the last slot stays free"
    );
    assert!(r.ctrl().stats().cq_full_waits >= 1);
    // The host releases three entries: the rest are posted, the wrap flips the phase.
    r.run(vec![DriverStep::Mmio {
        offset: regs::doorbell(1, true, 0),
        bytes: 4,
        value: 3,
    }]);
    r.sim.run_until_idle(&mut r.tf);
    let e3 = cq_entry(&mut r, mem.cq_cpu, 3);
    let e0 = cq_entry(&mut r, mem.cq_cpu, 0);
    let e1 = cq_entry(&mut r, mem.cq_cpu, 1);
    assert_eq!((e3.cid, e3.phase), (4, true));
    assert_eq!((e0.cid, e0.phase), (5, false));
    assert_eq!((e1.cid, e1.phase), (6, false));
    assert_eq!(
        cq_entry(&mut r, mem.cq_cpu, 2).cid,
        3,
        "not overwritten: head is 3"
    );
}

#[test]
fn deleting_an_sq_aborts_its_commands_before_the_deletion_completes() {
    let mut r = Rig::local(4096);
    let mem = r.queue_memory();
    let data = r.buffer(3 * 4096);
    r.run(vec![
        DriverStep::Enable,
        DriverStep::Admin(Command::create_io_cq(1, 4, mem.cq_dev, None)),
        DriverStep::Admin(Command::create_io_sq(1, 16, mem.sq_dev, 1)),
    ]);
    let reads: Vec<Command> = (0..3)
        .map(|i| Command::rw(false, 1, i, 1, data.dev + i * 4096, 0))
        .collect();
    place_sqes(&mut r, mem.sq_cpu, &reads);
    // The reads are in the media (7.5 µs) when the deletion arrives.
    let log = r.run(vec![
        DriverStep::Mmio {
            offset: regs::doorbell(1, false, 0),
            bytes: 4,
            value: 3,
        },
        DriverStep::Admin(Command::delete_io_sq(1)),
        DriverStep::Admin(Command::delete_io_cq(1)),
        DriverStep::Admin(Command::delete_io_sq(1)),
    ]);
    assert_eq!(
        statuses(log)[2..],
        [
            Status::SUCCESS,
            Status::SUCCESS,
            Status::INVALID_QUEUE_IDENTIFIER
        ]
    );
    r.sim.run_until_idle(&mut r.tf);
    for slot in 0..3 {
        let e = cq_entry(&mut r, mem.cq_cpu, slot);
        assert_eq!(
            (e.cid, e.status),
            (slot as u16 + 1, Status::ABORTED_SQ_DELETION)
        );
    }
    assert_eq!(r.ctrl().stats().errors[&Status::ABORTED_SQ_DELETION], 3);
}

#[test]
fn submission_queues_with_work_are_served_round_robin() {
    let mut r = Rig::local(4096);
    // 100 flushes in each of two SQs of 128 entries, one CQ of 256 for both.
    let (sq1, sq2, cq) = (r.buffer(8192), r.buffer(8192), r.buffer(4096));
    r.run(vec![
        DriverStep::Enable,
        DriverStep::Admin(Command::create_io_cq(1, 256, cq.dev, None)),
        DriverStep::Admin(Command::create_io_sq(1, 128, sq1.dev, 1)),
        DriverStep::Admin(Command::create_io_sq(2, 128, sq2.dev, 1)),
    ]);
    place_sqes(&mut r, sq1.cpu, &[Command::flush(1); 100]);
    place_sqes(&mut r, sq2.cpu, &[Command::flush(1); 100]);
    // SQ 1's doorbell lands first: the controller fetches from it alone until its read
    // tags run out; once SQ 2's doorbell has landed, each freed tag goes to the next SQ
    // with entries in turn (arbitration burst 1).
    r.run(vec![
        DriverStep::Mmio {
            offset: regs::doorbell(1, false, 0),
            bytes: 4,
            value: 100,
        },
        DriverStep::Mmio {
            offset: regs::doorbell(2, false, 0),
            bytes: 4,
            value: 100,
        },
    ]);
    r.sim.run_until_idle(&mut r.tf);
    let sqs: Vec<u16> = (0..200)
        .map(|s| cq_entry(&mut r, cq.cpu, s).sq_id)
        .collect();
    let tags = r.ctrl().params().max_reads as usize;
    assert!(sqs[..tags].iter().all(|&q| q == 1), "{sqs:?}");
    let first2 = sqs.iter().position(|&q| q == 2).unwrap();
    assert!(
        sqs[first2..first2 + 60].windows(2).all(|w| w[0] != w[1]),
        "alternating once both have work: {sqs:?}"
    );
    let s = r.ctrl().stats();
    assert_eq!((s.per_sq[&1], s.per_sq[&2]), (100, 100));
    assert_eq!(s.commands[&(false, 0x00)], 200, "flushes");
}

/// A drive with a CMB (the P4800X with a second BAR), driven by host `cpu_host`: checks
/// the CMB registers, queue placement rules and bytes; gives the mean QD1 4 KiB read
/// latency with the SQ in the driver's RAM and in the CMB.
fn cmb_case(text: &str, cpu_host: &str) -> (f64, f64) {
    let text = text.replace(
        "device_model = \"p4800x\"",
        "device_model = \"p4800x\"\nbars = [{ size = \"16 KiB\" }, { size = \"1 MiB\" }]",
    );
    let nvme = if cpu_host == "h" { "h.nvme" } else { "b.nvme" };
    let mut r = Rig::new(&text, nvme, cpu_host, 4096);
    let cmb = r.ctrl().params().cmb.expect("BAR2 is the CMB");
    assert_eq!((cmb.bar, cmb.bytes), (2, 1 << 20));
    let bar0 = r.cfg.bar0;
    let (ram_q, mut cmb_q) = (r.queue_memory(), r.queue_memory());
    // The CPU reaches the CMB as it reaches BAR0 (through its NTB when remote); the
    // controller names it by its own bus address.
    let cmb_cpu = if bar0 == r.tf.fabric.topo.node(r.nvme).bars[0].addr {
        cmb.addr
    } else {
        let (cpu, bh) = (r.cpu, r.tf.fabric.topo.node(r.nvme).host);
        Hosts::with(&mut r.tf.fabric, |h, f| {
            let at = PhysAddr {
                host: bh,
                addr: cmb.addr,
            };
            h.dma_map_single(f, cpu, at, 4096, host::DmaDirection::Bidirectional)
        })
        .unwrap()
        .addr
        .0
    };
    cmb_q.sq_cpu = cmb_cpu;
    cmb_q.sq_dev = cmb.addr;
    let cq3 = r.queue_memory().cq_dev;
    let log = r.run(vec![
        DriverStep::Enable,
        DriverStep::Identify { cns: 0, nsid: 1 },
        DriverStep::CreateQueuePair {
            qid: 1,
            entries: 16,
            mem: ram_q,
            vector: None,
        },
        DriverStep::CreateQueuePair {
            qid: 2,
            entries: 16,
            mem: cmb_q,
            vector: None,
        },
        // CMBSZ.CQS is 0: a CQ there is refused; an SQ running past the CMB's end too.
        DriverStep::Admin(Command::create_io_cq(3, 16, cmb.addr + 8192, None)),
        DriverStep::Admin(Command::create_io_cq(3, 16, cq3, None)),
        DriverStep::Admin(Command::create_io_sq(
            3,
            128,
            cmb.addr + cmb.bytes - 4096,
            3,
        )),
    ]);
    let st = statuses(log);
    assert_eq!(st[..5], [Status::SUCCESS; 5], "{st:?}");
    assert_eq!(
        st[5..],
        [
            Status::INVALID_FIELD,
            Status::SUCCESS,
            Status::INVALID_FIELD
        ]
    );
    let v = r.bytes(bar0 + regs::CMBLOC, 8);
    let (loc, sz) = (v[0] & 7, u32::from_le_bytes(v[4..8].try_into().unwrap()));
    assert_eq!(
        (loc, sz & 1, sz >> 12),
        (2, 1, 256),
        "BIR 2, SQS, 256 × 4 KiB"
    );
    let src = r.buffer(64 << 10);
    let dst = r.buffer(64 << 10);
    let lists = r.buffer(4 * 4096);
    r.fill(&src, 33);
    let w: Vec<IoCmd> = (0..4)
        .map(|i| IoCmd {
            write: true,
            slba: 10 * i,
            blocks: 2,
            buf_offset: i * 8192,
        })
        .collect();
    let rd: Vec<IoCmd> = w.iter().map(|c| IoCmd { write: false, ..*c }).collect();
    let log = r.run(vec![job(2, 2, w, src, lists), job(2, 2, rd, dst, lists)]);
    assert_eq!(log.io_errors, 0);
    assert!(
        r.bytes(src.cpu, 32 << 10) == r.bytes(dst.cpu, 32 << 10),
        "read back"
    );
    assert_eq!(
        r.ctrl().stats().cmb_fetches,
        8,
        "every entry of SQ 2 read in the CMB"
    );
    let one = |qid| {
        let cmds = (0..30)
            .map(|i| IoCmd {
                write: false,
                slba: i,
                blocks: 1,
                buf_offset: 0,
            })
            .collect();
        job(qid, 1, cmds, dst, lists)
    };
    // (Means: the histogram's quantiles are 1/64 wide, ~160 ns at 10 µs.)
    let sid = r.driver.unwrap();
    r.sim.get_mut::<NvmeDriver>(sid).unwrap().reset_stats();
    let in_ram = r.run(vec![one(1)]).latency.mean_ns().unwrap();
    r.sim.get_mut::<NvmeDriver>(sid).unwrap().reset_stats();
    let in_cmb = r.run(vec![one(2)]).latency.mean_ns().unwrap();
    (in_ram, in_cmb)
}

#[test]
fn submission_queues_in_the_controller_memory_buffer_are_read_inside_the_device() {
    let (ram, cmb) = cmb_case(LOCAL, "h");
    eprintln!("QD1 4 KiB read, local driver: SQ in RAM {ram:.0} ns, in the CMB {cmb:.0} ns");
    // A driver across the NTBs: the entry crosses once (posted) instead of the
    // controller's read crossing there and back.
    let (far_ram, far_cmb) = cmb_case(TWO_HOSTS, "a");
    eprintln!(
        "QD1 4 KiB read, remote driver: SQ in its RAM {far_ram:.0} ns, in the CMB {far_cmb:.0} ns"
    );
    assert!(
        far_cmb < far_ram - 300.0,
        "CMB {far_cmb} ns vs RAM {far_ram} ns"
    );
}

#[test]
fn other_drives_are_their_own_device_models() {
    let ram = LOCAL.replace("\"p4800x\"", "\"ramdisk_nvme\"");
    let mut r = Rig::new(&ram, "h.nvme", "h", 4096);
    assert!(r.ctrl().params().media.read < Time::from_us(2));
    r.bring_up(16);
    let data = r.buffer(4096);
    let lists = r.buffer(4096);
    let cmds = (0..20)
        .map(|i| IoCmd {
            write: false,
            slba: i,
            blocks: 1,
            buf_offset: 0,
        })
        .collect();
    let qd1 = r
        .run(vec![job(1, 1, cmds, data, lists)])
        .latency
        .quantile_ns(0.5)
        .unwrap();
    assert!(qd1 < 5000.0, "RAM-disk QD1 {qd1} ns");
    let o = Rig::new(
        &LOCAL.replace("\"p4800x\"", "\"optane900p\""),
        "h.nvme",
        "h",
        512,
    );
    assert_eq!(o.ctrl().params().media.read_gbps, 2.5);
    assert!(o.ctrl().params().model.contains("900P"));
}

#[test]
fn nvme_timing_keys_go_together_and_are_range_checked() {
    let base = |timing: &str| {
        format!(
            "include = [\"platforms/smartio.toml\", \"platforms/devices.toml\"]\n[scenario]\nname = \"x\"\n[device_model.d]\nkind = \"nvme\"\nlink = {{ gen = 3, width = 4 }}\nbars = [{{ size = \"16 KiB\" }}]\n[device_model.d.timing]\nbar_gbps = 1.0\nbar_latency_ns = 200.0\nbar_rcb_bytes = 64\n{timing}\n[[host]]\nname = \"h\"\nplatform = \"smartio_host\"\n[[host.device]]\nname = \"n\"\ndevice_model = \"d\"\nparent = \"rc0\"\n"
        )
    };
    let try_load = |t: String| {
        load(
            Source {
                name: "x.toml".into(),
                text: t,
            },
            &BuiltinResolver,
        )
    };
    let e = try_load(base("nvme_read_ns = 5000.0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nvme_write_ns") && e.contains("missing"), "{e}");
    let e = try_load(base("nvme_queue_pairs = 1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("2..=65536"), "{e}");
    // Without the keys the scenario loads; the controller then names what it lacks.
    let s = try_load(base("")).unwrap();
    let tf = TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap();
    let n = node(&tf, "h.n");
    let e = NvmeParams::from_node(&tf, n, 4096, 16).unwrap_err();
    assert!(e.0.contains("nvme_read_ns"), "{e}");
}

/// QD1 latency of 4 KiB reads, and 4 KiB read rate at QD32.
fn read_timing(r: &mut Rig) -> (f64, f64, f64) {
    r.bring_up(64);
    let data = r.buffer(32 * 4096);
    let lists = r.buffer(32 * 4096);
    let cmds = |n: u64, depth: u64| {
        (0..n)
            .map(|i| IoCmd {
                write: false,
                slba: i * 977 % BLOCKS,
                blocks: 1,
                buf_offset: (i % depth) * 4096,
            })
            .collect::<Vec<_>>()
    };
    let log = r.run(vec![job(1, 1, cmds(200, 1), data, lists)]);
    let qd1 = log.latency.quantile_ns(0.5).unwrap();
    let sid = r.driver.unwrap();
    r.sim.get_mut::<NvmeDriver>(sid).unwrap().reset_stats();
    let log = r.run(vec![job(1, 32, cmds(4000, 32), data, lists)]);
    let secs = (log.io_end - log.io_start).as_secs_f64();
    let iops = 4000.0 / secs;
    (qd1, iops, log.latency.quantile_ns(0.5).unwrap())
}

#[test]
fn qd1_latency_is_the_media_plus_a_few_microseconds_and_qd32_is_bound_by_the_media() {
    let mut r = Rig::local(4096);
    let media_ns = r.ctrl().params().media.read.as_ns_f64();
    let gbps = r.ctrl().params().media.read_gbps;
    let (qd1, iops, qd32_p50) = read_timing(&mut r);
    eprintln!("P4800X host-local: QD1 4 KiB read p50 {qd1:.0} ns, QD32 {iops:.0} IOPS (p50 {qd32_p50:.0} ns)");
    assert!(
        qd1 > media_ns && qd1 < media_ns + 5000.0,
        "QD1 {qd1} ns vs media {media_ns} ns"
    );
    let rate = iops * 4096.0 / 1e9;
    assert!(rate <= gbps * 1.01, "{rate} GB/s above the media's {gbps}");
    assert!(
        rate >= gbps * 0.85,
        "{rate} GB/s: QD32 should saturate the media ({gbps})"
    );
    assert!(
        qd32_p50 > 4.0 * qd1,
        "queueing at QD32: p50 {qd32_p50} vs QD1 {qd1}"
    );
}

#[test]
fn the_same_driver_runs_a_controller_in_another_host_through_ntbs() {
    let mut far = Rig::new(TWO_HOSTS, "b.nvme", "a", 4096);
    assert_ne!(
        far.cfg.bar0,
        far.tf.fabric.topo.node(far.nvme).bars[0].addr,
        "through a window"
    );
    far.bring_up(16);
    let src = far.buffer(64 << 10);
    let dst = far.buffer(64 << 10);
    let lists = far.buffer(4 * 4096);
    far.fill(&src, 21);
    let w = vec![
        IoCmd {
            write: true,
            slba: 100,
            blocks: 1,
            buf_offset: 0,
        },
        IoCmd {
            write: true,
            slba: 200,
            blocks: 8,
            buf_offset: 8192,
        },
    ];
    let rd: Vec<IoCmd> = w.iter().map(|c| IoCmd { write: false, ..*c }).collect();
    let log = far.run(vec![
        job(1, 2, w.clone(), src, lists),
        job(1, 2, rd, dst, lists),
    ]);
    assert_eq!(log.io_errors, 0, "{:?}", log.io);
    for c in &w {
        let n = c.blocks as u64 * 4096;
        let a = far.bytes(src.cpu + c.buf_offset, n);
        let b = far.bytes(dst.cpu + c.buf_offset, n);
        assert!(a == b, "bytes through the NTB at LBA {}", c.slba);
    }
    // Slower than local by the NTB crossings on every SQE fetch, data and completion.
    let far_qd1 = {
        let data = far.buffer(4096);
        let cmds = (0..50)
            .map(|i| IoCmd {
                write: false,
                slba: i,
                blocks: 1,
                buf_offset: 0,
            })
            .collect();
        let sid = far.driver.unwrap();
        far.sim.get_mut::<NvmeDriver>(sid).unwrap().reset_stats();
        far.run(vec![job(1, 1, cmds, data, lists)])
            .latency
            .quantile_ns(0.5)
            .unwrap()
    };
    let mut near = Rig::local(4096);
    near.bring_up(16);
    let data = near.buffer(4096);
    let lists = near.buffer(4096);
    let cmds = (0..50)
        .map(|i| IoCmd {
            write: false,
            slba: i,
            blocks: 1,
            buf_offset: 0,
        })
        .collect();
    let near_qd1 = near
        .run(vec![job(1, 1, cmds, data, lists)])
        .latency
        .quantile_ns(0.5)
        .unwrap();
    eprintln!("QD1 4 KiB read: local {near_qd1:.0} ns, through the NTB {far_qd1:.0} ns");
    assert!(far_qd1 > near_qd1 + 1000.0, "far {far_qd1} near {near_qd1}");
}
