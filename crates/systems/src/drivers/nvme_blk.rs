//! A kernel-style NVMe block driver, written once against `DeviceAccess`, and the QD1
//! latency measurement of `smartio.nvme_latency`.
//!
//! Like Linux's nvme driver: probe enables the device in configuration space (memory
//! space and bus mastering), puts the admin queues in coherent memory on the CPU's node,
//! resets and enables the controller, identifies the controller and namespace 1, asks
//! for one I/O queue pair per CPU it is given (Set Features, Number of Queues), sets up
//! one MSI-X vector per I/O queue through the access layer and creates the queue pairs.
//! Then each block request maps the data page before submission (`dma_map_single`) and
//! unmaps it after completion (`dma_unmap_single`) — in the simulation, between I/Os,
//! through `&mut TimedFabric` — and the CPU checks a read's bytes after the unmap.
//!
//! The queue mechanics (SQ entries, doorbells, CQ polling by phase tag, PRPs) are
//! `devices::nvme::NvmeDriver`'s: this component wraps one and forwards it every event
//! that is not its own, so its TLPs carry this component's id. Completions are polled
//! (as Linux's polled queues do); the MSI-X vectors are programmed and unmasked so that
//! the device's interrupt messages travel as they would, but nothing waits for them.
//!
//! The CPU's own cost of a map and an unmap (`BlkConfig::map_cost`, `unmap_cost`) is
//! zero by default: the platform timing table has no key for it, and the scenario
//! validator refuses unknown keys (an assumption; say so where it matters).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use devices::nvme::command::{IdentifyNamespace, Status};
use devices::nvme::queue::{Buffer, DriverStep, IoCmd, IoJob, QueueMemory};
use devices::nvme::regs;
use devices::nvme::{Command, NvmeController, NvmeDriver, NvmeDriverConfig, NvmeParams};
use fabric::{Endpoint, PcieNodeId, Requester};
use host::{DmaDirection, Hosts};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sim::component::{Component, Sim};
use sim::net::{ComponentId, Event};
use sim::stats::Histogram;
use sim::timed::TimedFabric;
use sim::timers::Timers;
use sim::Time;

use super::access::{AccessError, Borrowed, CoherentBuf, DevMapping, DeviceAccess, Local};
use super::vm_access::VmAccess;
use crate::smartio::mdev::{HostPage, Hypervisor, MdevId, VmConfig};
use crate::smartio::{BorrowOptions, Cluster, LendError};

/// Block size of the requests (4 KiB, one page: PRP1 only).
pub const BLOCK: u64 = 4096;
/// Namespace of the controller `BlkRun` attaches: 2^20 blocks of 4 KiB (4 GiB).
pub const NAMESPACE_BLOCKS: u64 = 1 << 20;

/// What the block driver's own timers mean (set 1: the queue-pair driver it wraps keeps
/// set 0).
#[derive(Clone, Copy, Debug)]
enum BlkTimer {
    /// The request's page is mapped for the device: submit it.
    Mapped,
    /// The last request's page is unmapped: start the next.
    Next,
}

/// What the block driver can fail with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlkError {
    #[error("probe: {0}")]
    Probe(String),
    #[error("I/O: {0}")]
    Io(String),
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error("set-up: {0}")]
    Setup(String),
}

impl From<LendError> for BlkError {
    fn from(e: LendError) -> BlkError {
        BlkError::Access(e.into())
    }
}

/// The driver's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlkConfig {
    /// Entries of each I/O queue (SQ and CQ).
    pub queue_entries: u16,
    pub admin_entries: u16,
    /// The CPU's cost of `dma_map_single` / `dma_unmap_single` (zero: no platform key).
    pub map_cost: Time,
    pub unmap_cost: Time,
    /// Program and unmask one MSI-X vector per I/O queue.
    pub interrupts: bool,
}

impl Default for BlkConfig {
    fn default() -> BlkConfig {
        BlkConfig {
            queue_entries: 64,
            admin_entries: 32,
            map_cost: Time::ZERO,
            unmap_cost: Time::ZERO,
            interrupts: true,
        }
    }
}

/// One block request: 4 KiB at `lba` (in 4 KiB blocks) from CPU `cpu` (its queue pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlkRequest {
    pub write: bool,
    pub lba: u64,
    pub cpu: usize,
}

/// What the driver saw.
#[derive(Clone, Debug, Default)]
pub struct BlkLog {
    /// Request start (before the map) to completion seen and buffer unmapped.
    pub read_latency: Histogram,
    pub write_latency: Histogram,
    pub completed: u64,
    /// Bytes of reads compared with what this driver wrote there, and blocks that differed.
    pub verified_bytes: u64,
    pub mismatches: u64,
    pub maps: u64,
    pub unmaps: u64,
    /// The first error; the driver stops at it (requests left are dropped).
    pub error: Option<BlkError>,
    /// Namespace size (blocks) and LBA size from Identify.
    pub nsze: u64,
    pub lba_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Probing,
    Idle,
    Mapping(BlkRequest, DevMapping, Time),
    InFlight(BlkRequest, DevMapping, Time, usize),
    Failed,
}

/// Per CPU: its queue pair's memory, a PRP-list page (unused at 4 KiB, required by the
/// queue logic), and its data page (a page-cache page: CPU RAM, mapped per I/O).
struct PerCpu {
    sq: CoherentBuf,
    cq: CoherentBuf,
    lists: CoherentBuf,
    page: u64,
}

/// The block driver component.
pub struct NvmeBlk {
    access: Box<dyn DeviceAccess>,
    inner: NvmeDriver,
    cfg: BlkConfig,
    state: State,
    cpus: Vec<PerCpu>,
    queue: VecDeque<BlkRequest>,
    /// What this driver last wrote at each LBA (the tag `block_bytes` expands).
    written: BTreeMap<u64, u64>,
    next_tag: u64,
    cpu: Requester,
    bar0: u64,
    pub log: BlkLog,
    timers: Timers<BlkTimer>,
}

/// The bytes a write of `tag` puts in a block: a SplitMix64 stream of `tag`, so every
/// write is distinct and a read can be checked against the last write there.
pub fn block_bytes(tag: u64, len: u64) -> Vec<u8> {
    let mut x = tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut out = Vec::with_capacity(len as usize);
    while (out.len() as u64) < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(len as usize);
    out
}

impl NvmeBlk {
    /// Probes the device through `access` with one I/O queue pair per CPU in `cpu_nodes`
    /// (the NUMA node of each: its queues and data page are allocated there). The
    /// synchronous part (config space, coherent memory, MSI) happens here; the register
    /// and admin-command part runs in the simulation when the component gets a timer 0.
    pub fn probe(
        tf: &mut TimedFabric,
        mut access: Box<dyn DeviceAccess>,
        cpu_nodes: &[u32],
        cfg: BlkConfig,
    ) -> Result<NvmeBlk, BlkError> {
        if cpu_nodes.is_empty() {
            return Err(BlkError::Probe("no CPU given".into()));
        }
        let f = &mut tf.fabric;
        // pci_enable_device + pci_set_master: memory space and bus mastering on.
        let mut id = [0u8; 4];
        access.config_read(f, 0, &mut id)?;
        if id == [0xff; 4] {
            return Err(BlkError::Probe(
                "no function answers at the device's requester ID".into(),
            ));
        }
        let mut cmd = [0u8; 2];
        access.config_read(f, 4, &mut cmd)?;
        let c = u16::from_le_bytes(cmd) | 0x6;
        access.config_write(f, 4, &c.to_le_bytes())?;
        let bar0 = access.bar(f, 0)?;
        let cpu = access.cpu();
        let node0 = cpu_nodes[0];
        let asq = access.alloc_coherent(f, node0, cfg.admin_entries as u64 * 64)?;
        let acq = access.alloc_coherent(f, node0, cfg.admin_entries as u64 * 16)?;
        let scratch = access.alloc_coherent(f, node0, 4096)?;
        let mut cpus = Vec::new();
        for &node in cpu_nodes {
            let e = cfg.queue_entries as u64;
            let sq = access.alloc_coherent(f, node, e * 64)?;
            let cq = access.alloc_coherent(f, node, e * 16)?;
            let lists = access.alloc_coherent(f, node, 4096)?;
            let page = access
                .alloc_ram(f, node, BLOCK)
                .map_err(|e| BlkError::Probe(e.to_string()))?;
            cpus.push(PerCpu {
                sq,
                cq,
                lists,
                page,
            });
        }
        let n = cpus.len() as u16;
        let mut steps = vec![
            DriverStep::Enable,
            DriverStep::Identify { cns: 1, nsid: 0 },
            DriverStep::Identify { cns: 0, nsid: 1 },
            DriverStep::Admin(Command::set_queue_count(n, n)),
        ];
        for (i, c) in cpus.iter().enumerate() {
            let qid = i as u16 + 1;
            let vector = if cfg.interrupts {
                let m = access.msi(f, qid as u32, 0)?;
                let entry = regs::MSIX_TABLE + qid as u64 * regs::MSIX_ENTRY;
                steps.push(DriverStep::Mmio {
                    offset: entry,
                    bytes: 8,
                    value: m.addr,
                });
                steps.push(DriverStep::Mmio {
                    offset: entry + 8,
                    bytes: 4,
                    value: m.data as u64,
                });
                steps.push(DriverStep::Mmio {
                    offset: entry + 12,
                    bytes: 4,
                    value: 0,
                });
                Some(qid)
            } else {
                None
            };
            steps.push(DriverStep::CreateQueuePair {
                qid,
                entries: cfg.queue_entries,
                mem: QueueMemory {
                    sq_cpu: c.sq.cpu,
                    sq_dev: c.sq.dev,
                    cq_cpu: c.cq.cpu,
                    cq_dev: c.cq.dev,
                },
                vector,
            });
        }
        let admin = QueueMemory {
            sq_cpu: asq.cpu,
            sq_dev: asq.dev,
            cq_cpu: acq.cpu,
            cq_dev: acq.dev,
        };
        let scratch = Buffer {
            cpu: scratch.cpu,
            dev: scratch.dev,
            bytes: 4096,
        };
        let dcfg = NvmeDriverConfig::new(tf, cpu, bar0, admin, cfg.admin_entries, scratch);
        Ok(NvmeBlk {
            access,
            inner: NvmeDriver::new(dcfg, steps),
            cfg,
            state: State::Probing,
            cpus,
            queue: VecDeque::new(),
            written: BTreeMap::new(),
            next_tag: 1,
            cpu,
            bar0,
            log: BlkLog::default(),
            timers: Timers::set(1),
        })
    }

    /// Queues requests; start them by waking the component (`Net::wake_at`) once its
    /// probe is done.
    pub fn push(&mut self, reqs: impl IntoIterator<Item = BlkRequest>) {
        self.queue.extend(reqs);
    }

    /// BAR0 as the driver's CPU addresses it.
    pub fn bar0(&self) -> u64 {
        self.bar0
    }

    /// The memory of the I/O queue pair of CPU `cpu` (qid `cpu + 1`), for a submitter
    /// that adopts it as its own (blk-mq's per-CPU hardware queue; `drivers::fio`).
    pub fn io_queue(&self, cpu: usize) -> Option<QueueMemory> {
        self.cpus.get(cpu).map(|c| QueueMemory {
            sq_cpu: c.sq.cpu,
            sq_dev: c.sq.dev,
            cq_cpu: c.cq.cpu,
            cq_dev: c.cq.dev,
        })
    }

    /// The settings it was probed with.
    pub fn config(&self) -> BlkConfig {
        self.cfg
    }

    /// Whether probing succeeded and no I/O failed.
    pub fn ready(&self) -> bool {
        self.state == State::Idle
    }

    /// The queue-pair driver underneath (its log: admin commands, I/O completions).
    pub fn inner(&self) -> &NvmeDriver {
        &self.inner
    }

    pub fn reset_stats(&mut self) {
        self.log.read_latency.clear();
        self.log.write_latency.clear();
        self.log.completed = 0;
        self.log.verified_bytes = 0;
        self.log.mismatches = 0;
    }

    fn fail(&mut self, e: BlkError) {
        if self.log.error.is_none() {
            self.log.error = Some(e);
        }
        self.queue.clear();
        self.state = State::Failed;
    }

    fn probed(&mut self) {
        let l = &self.inner.log;
        if l.fatal {
            return self.fail(BlkError::Probe(
                "controller fatal status while enabling".into(),
            ));
        }
        if l.ready_at.is_none() {
            return self.fail(BlkError::Probe("the controller never became ready".into()));
        }
        if let Some((c, e)) = l.admin.iter().find(|(_, e)| !e.status.is_success()) {
            return self.fail(BlkError::Probe(format!(
                "admin opcode {:#x} failed with status {:?}",
                c.opcode, e.status
            )));
        }
        let n = self.cpus.len();
        if self.inner.queue_pair(n as u16).is_none() || l.admin.len() < 3 + 2 * n {
            return self.fail(BlkError::Probe(format!(
                "{} of {n} I/O queue pairs created ({} driver faults)",
                (1..=n as u16)
                    .filter(|&q| self.inner.queue_pair(q).is_some())
                    .count(),
                l.faults
            )));
        }
        let Some(ns) = l.identify_namespace.as_ref() else {
            return self.fail(BlkError::Probe("no namespace 1".into()));
        };
        let ns = IdentifyNamespace::from_bytes(ns);
        if ns.lba_bytes() > BLOCK || ns.nsze == 0 {
            return self.fail(BlkError::Probe(format!(
                "namespace of {} blocks of {} B: 4 KiB requests need LBAs of at most 4 KiB",
                ns.nsze,
                ns.lba_bytes()
            )));
        }
        self.log.nsze = ns.nsze * ns.lba_bytes() / BLOCK;
        self.log.lba_bytes = ns.lba_bytes();
        self.state = State::Idle;
    }

    fn start_next(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        if self.state != State::Idle {
            return;
        }
        let Some(r) = self.queue.pop_front() else {
            return;
        };
        if r.cpu >= self.cpus.len() || r.lba >= self.log.nsze {
            return self.fail(BlkError::Io(format!(
                "request for CPU {} at 4 KiB block {} (the driver has {} CPUs, the namespace {} blocks)",
                r.cpu,
                r.lba,
                self.cpus.len(),
                self.log.nsze
            )));
        }
        let page = self.cpus[r.cpu].page;
        if r.write {
            // The page cache's content, there before the request.
            let tag = self.next_tag;
            self.next_tag += 1;
            if tf
                .fabric
                .store(self.cpu, page, &block_bytes(tag, BLOCK))
                .is_err()
            {
                return self.fail(BlkError::Io("the CPU could not fill its data page".into()));
            }
            self.written.insert(r.lba, tag);
        }
        let t0 = tf.net.now();
        let dir = if r.write {
            DmaDirection::ToDevice
        } else {
            DmaDirection::FromDevice
        };
        match self.access.map(&mut tf.fabric, page, BLOCK, dir) {
            Ok(m) => {
                self.log.maps += 1;
                self.state = State::Mapping(r, m, t0);
                if self.cfg.map_cost == Time::ZERO {
                    self.submit(tf, me);
                } else {
                    let at = t0 + self.cfg.map_cost;
                    self.timers.at(&mut tf.net, at, me, BlkTimer::Mapped);
                }
            }
            Err(e) => self.fail(BlkError::Io(format!(
                "mapping the buffer of block {}: {e}",
                r.lba
            ))),
        }
    }

    fn submit(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        let State::Mapping(r, m, t0) = self.state else {
            return;
        };
        let c = &self.cpus[r.cpu];
        let blocks = (BLOCK / self.log.lba_bytes) as u16;
        let job = IoJob {
            qid: r.cpu as u16 + 1,
            depth: 1,
            nsid: 1,
            cmds: vec![IoCmd {
                write: r.write,
                slba: r.lba * blocks as u64,
                blocks,
                buf_offset: 0,
            }],
            data: Buffer {
                cpu: c.page,
                dev: m.dev,
                bytes: BLOCK,
            },
            prp_lists: Buffer {
                cpu: c.lists.cpu,
                dev: c.lists.dev,
                bytes: 4096,
            },
        };
        self.state = State::InFlight(r, m, t0, self.inner.log.io.len());
        self.inner.push(DriverStep::Io(job));
        self.inner.notify(tf, me, Event::Wake);
        self.check(tf, me);
    }

    /// After the queue-pair driver ran: a probe or an I/O may have ended.
    fn check(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        if !self.inner.finished() {
            return;
        }
        match self.state {
            State::Probing => self.probed(),
            State::InFlight(r, m, t0, before) => {
                let done = self.inner.log.io.get(before).map(|x| x.2);
                let unmapped = self.access.unmap(&mut tf.fabric, &m);
                if unmapped.is_ok() {
                    self.log.unmaps += 1;
                }
                let Some(e) = done else {
                    return self.fail(BlkError::Io(format!(
                        "block {}: the command was not submitted ({} driver faults)",
                        r.lba, self.inner.log.faults
                    )));
                };
                if e.status != Status::SUCCESS {
                    return self.fail(BlkError::Io(format!(
                        "block {}: status {:?}",
                        r.lba, e.status
                    )));
                }
                if let Err(e) = unmapped {
                    return self.fail(BlkError::Io(format!(
                        "unmapping the buffer of block {}: {e}",
                        r.lba
                    )));
                }
                let now = tf.net.now();
                let lat = now + self.cfg.unmap_cost - t0;
                if r.write {
                    self.log.write_latency.record(lat);
                } else {
                    self.log.read_latency.record(lat);
                    if let Some(&tag) = self.written.get(&r.lba) {
                        let mut b = vec![0u8; BLOCK as usize];
                        let ok = tf
                            .fabric
                            .load(self.cpu, self.cpus[r.cpu].page, &mut b)
                            .is_ok();
                        if ok && b == block_bytes(tag, BLOCK) {
                            self.log.verified_bytes += BLOCK;
                        } else {
                            self.log.mismatches += 1;
                        }
                    }
                }
                self.log.completed += 1;
                self.state = State::Idle;
                if self.cfg.unmap_cost == Time::ZERO {
                    self.start_next(tf, me);
                } else {
                    let at = now + self.cfg.unmap_cost;
                    self.timers.at(&mut tf.net, at, me, BlkTimer::Next);
                }
            }
            _ => {}
        }
    }
}

impl Component<TimedFabric> for NvmeBlk {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        match ev {
            Event::Timer(key) if self.timers.owns(key) => match self.timers.take(key) {
                BlkTimer::Mapped => self.submit(tf, me),
                BlkTimer::Next => self.start_next(tf, me),
            },
            // Woken while probing: the queue-pair driver starts; after: the queue starts.
            Event::Wake if self.state != State::Probing => self.start_next(tf, me),
            ev => {
                self.inner.notify(tf, me, ev);
                self.check(tf, me);
            }
        }
    }

    fn finished(&self) -> bool {
        match self.state {
            State::Probing => self.inner.finished(),
            State::Idle => self.queue.is_empty(),
            State::Failed => true,
            State::Mapping(..) | State::InFlight(..) => false,
        }
    }
}

/// A controller and the block driver on one simulation, local or borrowed.
pub struct BlkRun {
    pub sim: Sim<TimedFabric>,
    pub ctrl: ComponentId,
    pub blk: ComponentId,
    pub function: PcieNodeId,
    /// The cluster and borrow when borrowed.
    pub cluster: Option<Rc<RefCell<Cluster>>>,
    pub borrow: Option<crate::smartio::Borrowed>,
    /// Control messages the borrow (lend, request, grant) cost.
    pub borrow_msgs: u64,
    /// Control messages the probe cost (config forwards, MSI set-up).
    pub probe_msgs: u64,
    /// The hypervisor and mdev when the driver runs in a VM.
    pub vm: Option<(Rc<RefCell<Hypervisor>>, MdevId)>,
}

impl BlkRun {
    /// The controller of `device` (`lender.nvme`; 4 KiB LBAs, `NAMESPACE_BLOCKS`) and the
    /// block driver on CPU package 0 of `host` with one CPU (node 0), probed. `borrowed`:
    /// `host` borrows the device (exclusively) through SmartIO first.
    pub fn new(
        tf: &mut TimedFabric,
        host: &str,
        device: &str,
        borrowed: bool,
        cfg: BlkConfig,
    ) -> Result<BlkRun, BlkError> {
        let function = match tf.fabric.resolve(device) {
            Ok(Endpoint::Node(n)) => n,
            _ => return Err(BlkError::Setup(format!("no device `{device}`"))),
        };
        let h = tf
            .fabric
            .topo
            .host_by_name(host)
            .ok_or_else(|| BlkError::Setup(format!("no host `{host}`")))?;
        let cpu = Requester::Cpu {
            host: h,
            package: 0,
        };
        let params = NvmeParams::from_node(tf, function, BLOCK, NAMESPACE_BLOCKS)
            .map_err(|e| BlkError::Setup(e.0))?;
        let ctrl = NvmeController::new(tf, function, params).map_err(|e| BlkError::Setup(e.0))?;
        let mut sim = Sim::new();
        let ctrl = sim.add(ctrl);
        sim.get::<NvmeController>(ctrl)
            .expect("just added")
            .attach(tf, ctrl)
            .map_err(|e| BlkError::Setup(e.0))?;
        let (access, cluster, borrow, borrow_msgs): (Box<dyn DeviceAccess>, _, _, _) = if borrowed {
            let mut c = Cluster::new(&tf.fabric);
            let fdid = c.fdid_by_name(&tf.fabric, device)?;
            c.lend(fdid)?;
            let b = c.borrow(&mut tf.fabric, h, fdid, BorrowOptions::exclusive())?;
            let msgs = c.stats().total();
            let c = Rc::new(RefCell::new(c));
            let a = Borrowed::new(&tf.fabric, c.clone(), b, cpu)?;
            (Box::new(a), Some(c), Some(b), msgs)
        } else {
            (
                Box::new(Local::new(&tf.fabric, cpu, function)?),
                None,
                None,
                0,
            )
        };
        let blk = NvmeBlk::probe(tf, access, &[0], cfg)?;
        let blk = sim.add(blk);
        let mut run = BlkRun {
            sim,
            ctrl,
            blk,
            function,
            cluster,
            borrow,
            borrow_msgs,
            probe_msgs: 0,
            vm: None,
        };
        let now = tf.net.now();
        tf.net.wake_at(now, blk);
        run.sim.run_until_finished(tf);
        run.probe_msgs = run.control_msgs() - borrow_msgs;
        let b = run.driver();
        if !b.ready() {
            return Err(b
                .log
                .error
                .clone()
                .unwrap_or_else(|| BlkError::Probe("did not finish".into())));
        }
        Ok(run)
    }

    /// `new`'s controller, driven by the same `NvmeBlk` in a VM on `host` (256 MiB of
    /// guest memory on 2 MiB host pages; GPA 16..48 MiB reserved for the driver) through
    /// an mdev of `device`, lent by its host (whose IOMMU must be on). The driver's probe
    /// config write (memory space, bus mastering) is the guest's reset and Bus Master
    /// Enable: it borrows the device and maps guest memory.
    pub fn new_vm(
        tf: &mut TimedFabric,
        host: &str,
        device: &str,
        cfg: BlkConfig,
    ) -> Result<BlkRun, BlkError> {
        let h = tf
            .fabric
            .topo
            .host_by_name(host)
            .ok_or_else(|| BlkError::Setup(format!("no host `{host}`")))?;
        let mut c = Cluster::new(&tf.fabric);
        let fdid = c.fdid_by_name(&tf.fabric, device)?;
        c.lend(fdid)?;
        let mut hv = Hypervisor::new();
        let guest = VmConfig {
            mem_bytes: 256 << 20,
            page: HostPage::Huge2M,
            node: 0,
            seed: 1,
        };
        let mdev_err = |e: crate::smartio::mdev::MdevError| BlkError::Setup(e.to_string());
        let vm = hv
            .create_vm(&mut tf.fabric, h, "guest", guest)
            .map_err(mdev_err)?;
        let m = hv.create_mdev(&c, &tf.fabric, vm, fdid).map_err(mdev_err)?;
        let c = Rc::new(RefCell::new(c));
        let hv = Rc::new(RefCell::new(hv));
        let access = VmAccess::new(&tf.fabric, hv.clone(), c.clone(), vm, m, 16 << 20, 32 << 20)?;
        let mut run = Self::with_access(tf, device, Box::new(access), cfg, Some(c))?;
        run.borrow = hv.borrow().borrowed(m).map_err(mdev_err)?;
        run.vm = Some((hv, m));
        Ok(run)
    }

    /// The controller of `device` and the driver probed through `access`.
    fn with_access(
        tf: &mut TimedFabric,
        device: &str,
        access: Box<dyn DeviceAccess>,
        cfg: BlkConfig,
        cluster: Option<Rc<RefCell<Cluster>>>,
    ) -> Result<BlkRun, BlkError> {
        let function = match tf.fabric.resolve(device) {
            Ok(Endpoint::Node(n)) => n,
            _ => return Err(BlkError::Setup(format!("no device `{device}`"))),
        };
        let params = NvmeParams::from_node(tf, function, BLOCK, NAMESPACE_BLOCKS)
            .map_err(|e| BlkError::Setup(e.0))?;
        let ctrl = NvmeController::new(tf, function, params).map_err(|e| BlkError::Setup(e.0))?;
        let mut sim = Sim::new();
        let ctrl = sim.add(ctrl);
        sim.get::<NvmeController>(ctrl)
            .expect("just added")
            .attach(tf, ctrl)
            .map_err(|e| BlkError::Setup(e.0))?;
        let borrow_msgs = cluster.as_ref().map_or(0, |c| c.borrow().stats().total());
        let blk = NvmeBlk::probe(tf, access, &[0], cfg)?;
        let blk = sim.add(blk);
        let mut run = BlkRun {
            sim,
            ctrl,
            blk,
            function,
            cluster,
            borrow: None,
            borrow_msgs,
            probe_msgs: 0,
            vm: None,
        };
        let now = tf.net.now();
        tf.net.wake_at(now, blk);
        run.sim.run_until_finished(tf);
        run.probe_msgs = run.control_msgs() - borrow_msgs;
        let b = run.driver();
        if !b.ready() {
            return Err(b
                .log
                .error
                .clone()
                .unwrap_or_else(|| BlkError::Probe("did not finish".into())));
        }
        Ok(run)
    }

    pub fn driver(&self) -> &NvmeBlk {
        self.sim.get::<NvmeBlk>(self.blk).expect("the driver")
    }

    pub fn driver_mut(&mut self) -> &mut NvmeBlk {
        self.sim.get_mut::<NvmeBlk>(self.blk).expect("the driver")
    }

    /// Control messages counted so far (0 when local).
    pub fn control_msgs(&self) -> u64 {
        self.cluster
            .as_ref()
            .map_or(0, |c| c.borrow().stats().total())
    }

    /// Runs `reqs` at QD1 to the end; an error if the driver stopped at one.
    pub fn run(
        &mut self,
        tf: &mut TimedFabric,
        reqs: Vec<BlkRequest>,
    ) -> Result<&BlkLog, BlkError> {
        let n = reqs.len() as u64;
        let before = self.driver().log.completed;
        self.sim
            .with(tf, self.blk, |b: &mut NvmeBlk, _| b.push(reqs));
        let now = tf.net.now();
        tf.net.wake_at(now, self.blk);
        self.sim.run_until_finished(tf);
        let b = self.driver();
        if let Some(e) = &b.log.error {
            return Err(e.clone());
        }
        if b.log.completed - before != n {
            return Err(BlkError::Io(format!(
                "{} of {n} requests completed (the simulation ran out of events)",
                b.log.completed - before
            )));
        }
        Ok(&b.log)
    }

    /// Gives a borrowed device back (`SCIReturnDevice`).
    pub fn return_device(&mut self, tf: &mut TimedFabric) -> Result<(), BlkError> {
        let (Some(c), Some(b)) = (&self.cluster, self.borrow) else {
            return Err(BlkError::Setup("the device is not borrowed".into()));
        };
        c.borrow_mut().return_device(&mut tf.fabric, b)?;
        Ok(())
    }

    /// Live DMA mappings of the host layer, plus pages mapped in the borrow's DMA window
    /// (which the host layer counts as one reservation).
    pub fn live_mappings(&self, tf: &mut TimedFabric) -> u64 {
        let rid = match (&self.cluster, self.borrow) {
            (Some(c), Some(b)) => c
                .borrow()
                .dma_window(&tf.fabric, b)
                .ok()
                .flatten()
                .map(|w| (b.host, w.iova.rid)),
            _ => None,
        };
        Hosts::with(&mut tf.fabric, |h, _| {
            h.live_mappings() as u64
                + rid.map_or(0, |(host, rid)| {
                    h.iommu(host).map_or(0, |i| i.reserved_pages_mapped(rid))
                })
        })
    }
}

/// QD1 4 KiB latency of `smartio.nvme_latency`'s in-kernel-style driver.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyResult {
    /// Random reads (of the blocks just written), request to completion and unmap.
    pub median_us: f64,
    pub p99_us: f64,
    /// The writes before them, same measure.
    pub write_median_us: f64,
    pub write_p99_us: f64,
    /// Control messages during the measured I/O, per I/O (reads and writes).
    pub control_msgs_per_io: f64,
    /// Control messages of the borrow and of the probe (0 when local).
    pub borrow_msgs: u64,
    pub probe_msgs: u64,
    pub ios: u64,
    /// Bytes read back equal to what was written, and blocks that were not.
    pub bytes_verified: u64,
    pub mismatches: u64,
}

/// `ios` random 4 KiB writes then `ios` reads of the same blocks (in another random
/// order), QD1, by CPU package 0 of `host` on `device` (`lender.nvme`), borrowed through
/// SmartIO when `borrowed`; LBAs from a Xoshiro256++ seeded with `seed`.
pub fn nvme_qd1_latency(
    tf: &mut TimedFabric,
    host: &str,
    device: &str,
    borrowed: bool,
    ios: u64,
    seed: u64,
) -> Result<LatencyResult, BlkError> {
    if ios == 0 {
        return Err(BlkError::Setup("ios must be at least 1".into()));
    }
    let mut run = BlkRun::new(tf, host, device, borrowed, BlkConfig::default())?;
    let nsze = run.driver().log.nsze;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let lbas: Vec<u64> = (0..ios).map(|_| rng.next_u64() % nsze).collect();
    let mut order = lbas.clone();
    for i in (1..order.len()).rev() {
        order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    let req = |write, lba| BlkRequest { write, lba, cpu: 0 };
    let before = run.control_msgs();
    run.run(tf, lbas.iter().map(|&l| req(true, l)).collect())?;
    let log = run
        .run(tf, order.iter().map(|&l| req(false, l)).collect())?
        .clone();
    let msgs = run.control_msgs() - before;
    let q = |h: &Histogram, p| h.quantile_ns(p).unwrap_or(f64::NAN) / 1000.0;
    Ok(LatencyResult {
        median_us: q(&log.read_latency, 0.5),
        p99_us: q(&log.read_latency, 0.99),
        write_median_us: q(&log.write_latency, 0.5),
        write_p99_us: q(&log.write_latency, 0.99),
        control_msgs_per_io: msgs as f64 / (2 * ios) as f64,
        borrow_msgs: run.borrow_msgs,
        probe_msgs: run.probe_msgs,
        ios,
        bytes_verified: log.verified_bytes,
        mismatches: log.mismatches,
    })
}
