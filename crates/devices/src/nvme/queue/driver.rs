//! The queue-pair driver component (`NvmeDriver`): a CPU resetting and enabling the
//! controller, admin commands and Identify, creating I/O SQ/CQ pairs, storing SQ entries
//! and PRP lists, ringing doorbells and polling CQs by phase tag for closed-loop I/O.

use std::collections::{BTreeMap, VecDeque};

use fabric::{Access, Request};
use sim::component::Component;
use sim::net::{ComponentId, Delivery, Event, Hop, Issue};
use sim::stats::Histogram;
use sim::timed::TimedFabric;
use sim::timers::Timers;
use sim::Time;

use super::super::command::{Command, Completion, IdentifyNamespace, CNS_NAMESPACE};
use super::super::regs::{self, Cap, Cc};
use super::{build_prps, DriverStep, IoCmd, IoJob, NvmeDriverConfig, QueueMemory, QueuePair};

#[derive(Clone, Debug, PartialEq)]
enum Micro {
    Write { off: u64, bytes: u8, value: u64 },
    Read { off: u64, bytes: u8 },
    WaitCsts { mask: u32, want: u32 },
    AdminQueue,
    Admin(Command),
    KeepIdentify { cns: u8 },
    AddPair(u16, u16, QueueMemory),
    Attach(u16, u16, QueueMemory),
    Io(IoJob),
}

const FLOW_MMIO: u32 = 1 << 31;
const FLOW_REG_READ: u64 = 1 << 40;
/// What a driver's timer means.
#[derive(Clone, Copy, Debug)]
enum DriverTimer {
    /// Read CSTS again: the controller was not ready yet.
    Repoll,
    /// Poll queue pair `qid`'s CQ again.
    Poll(u16),
    /// A write landed on the CQ line of `qid` the core spins on (`Timers::on_write`).
    Wake(u16),
    /// Ring queue `qid`'s SQ doorbell: its entries are in memory.
    Doorbell(u16),
}

/// What the driver saw.
#[derive(Clone, Debug, Default)]
pub struct DriverLog {
    pub cap: Option<u64>,
    pub vs: Option<u32>,
    /// CSTS as last read.
    pub csts: Option<u32>,
    /// When CSTS.RDY was first seen 1 after an enable.
    pub ready_at: Option<Time>,
    /// Controller fatal status seen while waiting for RDY.
    pub fatal: bool,
    /// Every admin command with its completion.
    pub admin: Vec<(Command, Completion)>,
    /// Every I/O command (by queue) with its completion.
    pub io: Vec<(u16, IoCmd, Completion)>,
    pub identify_controller: Option<Vec<u8>>,
    pub identify_namespace: Option<Vec<u8>>,
    /// Submit (SQ entry stored) to completion seen (its CQ entry read with the phase).
    pub latency: Histogram,
    /// I/O completions with an error status.
    pub io_errors: u64,
    /// Bytes of successful I/O, and when the current job started and ended.
    pub io_bytes: u64,
    pub io_start: Time,
    pub io_end: Time,
    /// Driver-side faults (a store or poll nothing claims).
    pub faults: u64,
}

/// The queue-pair driver component.
pub struct NvmeDriver {
    cfg: NvmeDriverConfig,
    steps: VecDeque<DriverStep>,
    micros: VecDeque<Micro>,
    current: Option<Micro>,
    dstrd: u8,
    lba_bytes: u64,
    /// Queue pairs by qid (0 = admin).
    qps: BTreeMap<u16, QueuePair>,
    /// SQ entry and PRP list stores in flight, by flow: (CPU address, bytes, qid).
    /// (CPU address, bytes, qid, waited for before the doorbell).
    stores: BTreeMap<u32, (u64, Vec<u8>, u16, bool)>,
    next_store: u32,
    /// Per queue: stores not landed yet, a doorbell owed.
    unlanded: BTreeMap<u16, u32>,
    polling: BTreeMap<u16, bool>,
    sampled: BTreeMap<u16, [u8; 16]>,
    /// Per queue: (a poll read in flight, a watch set, woken while a read was in flight).
    spin: BTreeMap<u16, (bool, bool, bool)>,
    reg_sample: [u8; 8],
    /// Per queue: completions taken since the CQ head doorbell was last rung.
    unrung: BTreeMap<u16, u32>,
    /// The running I/O job: next command to submit, commands by (qid, cid).
    job: Option<IoJob>,
    job_next: usize,
    job_cmds: BTreeMap<u16, (IoCmd, usize)>,
    /// PRP list pages free (index into the job's list area).
    free_lists: Vec<usize>,
    pub log: DriverLog,
    done: bool,
    /// Set 0 of the component's timers: a block driver wrapping this one keeps its own
    /// in another set.
    timers: Timers<DriverTimer>,
}

impl NvmeDriver {
    pub fn new(cfg: NvmeDriverConfig, steps: Vec<DriverStep>) -> NvmeDriver {
        NvmeDriver {
            cfg,
            steps: steps.into(),
            micros: VecDeque::new(),
            current: None,
            dstrd: 0,
            lba_bytes: 512,
            qps: BTreeMap::new(),
            stores: BTreeMap::new(),
            next_store: 0,
            unlanded: BTreeMap::new(),
            polling: BTreeMap::new(),
            sampled: BTreeMap::new(),
            spin: BTreeMap::new(),
            reg_sample: [0; 8],
            unrung: BTreeMap::new(),
            job: None,
            job_next: 0,
            job_cmds: BTreeMap::new(),
            free_lists: Vec::new(),
            log: DriverLog::default(),
            done: false,
            timers: Timers::new(),
        }
    }

    /// Adds steps to run (after those left); start it again with a timer 0.
    pub fn push(&mut self, step: DriverStep) {
        self.steps.push_back(step);
        self.done = false;
    }

    /// Starts counting afresh.
    pub fn reset_stats(&mut self) {
        self.log.latency.clear();
        self.log.io_bytes = 0;
    }

    /// CAP.DSTRD as read at the last enable (0 before).
    pub fn dstrd(&self) -> u8 {
        self.dstrd
    }

    /// The namespace's LBA size as the last Identify Namespace gave it (512 before).
    pub fn lba_bytes(&self) -> u64 {
        self.lba_bytes
    }

    pub fn queue_pair(&self, qid: u16) -> Option<&QueuePair> {
        self.qps.get(&qid)
    }

    fn route(
        &self,
        tf: &mut TimedFabric,
        me: ComponentId,
        addr: u64,
        len: u32,
        access: Access,
        flow: u32,
    ) -> Option<Issue> {
        let req = Request {
            requester: self.cfg.cpu,
            addr,
            len,
            access,
        };
        tf.issue(&req, me, flow)
    }

    fn mmio_write(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        addr: u64,
        bytes: u8,
        value: u64,
        flow: u32,
    ) {
        match self.route(tf, me, addr, bytes as u32, Access::Write, flow) {
            Some(i) => tf.net.send_write(Issue { data: value, ..i }),
            None => {
                self.log.faults += 1;
                if flow == FLOW_MMIO {
                    self.next(tf, me);
                }
            }
        }
    }

    fn expand(&mut self, step: DriverStep) {
        let m = &mut self.micros;
        match step {
            DriverStep::Enable => {
                m.push_back(Micro::Write {
                    off: regs::CC,
                    bytes: 4,
                    value: 0,
                });
                m.push_back(Micro::WaitCsts {
                    mask: regs::CSTS_RDY,
                    want: 0,
                });
                m.push_back(Micro::Read {
                    off: regs::CAP,
                    bytes: 8,
                });
                m.push_back(Micro::Read {
                    off: regs::VS,
                    bytes: 4,
                });
                let e = self.cfg.admin_entries;
                m.push_back(Micro::Write {
                    off: regs::AQA,
                    bytes: 4,
                    value: regs::aqa(e, e) as u64,
                });
                m.push_back(Micro::Write {
                    off: regs::ASQ,
                    bytes: 8,
                    value: self.cfg.admin.sq_dev,
                });
                m.push_back(Micro::Write {
                    off: regs::ACQ,
                    bytes: 8,
                    value: self.cfg.admin.cq_dev,
                });
                m.push_back(Micro::AdminQueue);
                m.push_back(Micro::Write {
                    off: regs::CC,
                    bytes: 4,
                    value: Cc::enable().to_u32() as u64,
                });
                m.push_back(Micro::WaitCsts {
                    mask: regs::CSTS_RDY,
                    want: regs::CSTS_RDY,
                });
            }
            DriverStep::Reset => {
                m.push_back(Micro::Write {
                    off: regs::CC,
                    bytes: 4,
                    value: 0,
                });
                m.push_back(Micro::WaitCsts {
                    mask: regs::CSTS_RDY,
                    want: 0,
                });
            }
            DriverStep::Admin(c) => m.push_back(Micro::Admin(c)),
            DriverStep::Identify { cns, nsid } => {
                let s = self.cfg.scratch;
                let prp2 = if s.dev.is_multiple_of(4096) {
                    0
                } else {
                    (s.dev & !0xfff) + 4096
                };
                m.push_back(Micro::Admin(Command::identify(cns, nsid, s.dev, prp2)));
                m.push_back(Micro::KeepIdentify { cns });
            }
            DriverStep::CreateQueuePair {
                qid,
                entries,
                mem,
                vector,
            } => {
                m.push_back(Micro::Admin(Command::create_io_cq(
                    qid, entries, mem.cq_dev, vector,
                )));
                m.push_back(Micro::Admin(Command::create_io_sq(
                    qid, entries, mem.sq_dev, qid,
                )));
                m.push_back(Micro::AddPair(qid, entries, mem));
            }
            DriverStep::Io(job) => m.push_back(Micro::Io(job)),
            DriverStep::AttachQueuePair {
                qid,
                entries,
                mem,
                dstrd,
                lba_bytes,
            } => {
                self.dstrd = dstrd;
                self.lba_bytes = lba_bytes;
                m.push_back(Micro::Attach(qid, entries, mem));
            }
            DriverStep::Mmio {
                offset,
                bytes,
                value,
            } => m.push_back(Micro::Write {
                off: offset,
                bytes,
                value,
            }),
        }
    }

    /// Runs the next micro-step.
    fn next(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        loop {
            if self.micros.is_empty() {
                match self.steps.pop_front() {
                    Some(s) => self.expand(s),
                    None => {
                        self.current = None;
                        self.done = true;
                        return;
                    }
                }
                continue;
            }
            let m = self.micros.pop_front().expect("not empty");
            self.current = Some(m.clone());
            match m {
                Micro::Write { off, bytes, value } => {
                    let addr = self.cfg.bar0 + off;
                    self.mmio_write(tf, me, addr, bytes, value, FLOW_MMIO);
                    return;
                }
                Micro::Read { off, bytes } => {
                    self.reg_read(tf, me, off, bytes);
                    return;
                }
                Micro::WaitCsts { .. } => {
                    self.reg_read(tf, me, regs::CSTS, 4);
                    return;
                }
                Micro::AdminQueue => {
                    // Enabling follows a reset: every queue the controller had is gone.
                    self.qps.clear();
                    self.polling.clear();
                    self.unrung.clear();
                    self.sampled.clear();
                    let qp = QueuePair::new(
                        0,
                        self.cfg.admin_entries,
                        self.cfg.admin,
                        self.cfg.bar0,
                        self.dstrd,
                    );
                    self.qps.insert(0, qp);
                }
                Micro::Admin(c) => {
                    if !self.qps.contains_key(&0) {
                        self.log.faults += 1;
                        continue;
                    }
                    self.submit(tf, me, 0, c, Vec::new());
                    return;
                }
                Micro::KeepIdentify { cns } => {
                    let ok = self
                        .log
                        .admin
                        .last()
                        .is_some_and(|(_, e)| e.status.is_success());
                    if ok {
                        let mut b = vec![0u8; 4096];
                        if tf
                            .fabric
                            .load(self.cfg.cpu, self.cfg.scratch.cpu, &mut b)
                            .is_err()
                        {
                            self.log.faults += 1;
                        }
                        if cns == CNS_NAMESPACE {
                            self.lba_bytes = IdentifyNamespace::from_bytes(&b).lba_bytes();
                            self.log.identify_namespace = Some(b);
                        } else {
                            self.log.identify_controller = Some(b);
                        }
                    }
                }
                Micro::AddPair(qid, entries, mem) => {
                    let n = self.log.admin.len();
                    let ok = n >= 2
                        && self.log.admin[n - 2..]
                            .iter()
                            .all(|(_, e)| e.status.is_success());
                    if ok {
                        let qp = QueuePair::new(qid, entries, mem, self.cfg.bar0, self.dstrd);
                        self.qps.insert(qid, qp);
                    }
                }
                Micro::Attach(qid, entries, mem) => {
                    let qp = QueuePair::new(qid, entries, mem, self.cfg.bar0, self.dstrd);
                    self.qps.insert(qid, qp);
                }
                Micro::Io(job) => {
                    if !self.qps.contains_key(&job.qid) {
                        self.log.faults += 1;
                        continue;
                    }
                    self.log.io_start = tf.net.now();
                    self.free_lists = (0..job.depth as usize).rev().collect();
                    self.job_next = 0;
                    self.job_cmds.clear();
                    self.job = Some(job);
                    self.fill(tf, me);
                    return;
                }
            }
        }
    }

    fn reg_read(&mut self, tf: &mut TimedFabric, me: ComponentId, off: u64, bytes: u8) {
        match self.route(tf, me, self.cfg.bar0 + off, bytes as u32, Access::Read, 0) {
            Some(i) => tf
                .net
                .send_read(Issue { sample: true, ..i }, FLOW_REG_READ | off),
            None => {
                self.log.faults += 1;
                self.next(tf, me);
            }
        }
    }

    fn reg_arrived(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        let v = u64::from_le_bytes(self.reg_sample);
        match self.current.clone() {
            Some(Micro::Read { off, .. }) => {
                if off == regs::CAP {
                    self.log.cap = Some(v);
                    self.dstrd = Cap::from_u64(v).dstrd;
                } else if off == regs::VS {
                    self.log.vs = Some(v as u32);
                }
                self.next(tf, me);
            }
            Some(Micro::WaitCsts { mask, want }) => {
                let csts = v as u32;
                self.log.csts = Some(csts);
                if csts & regs::CSTS_CFS != 0 && want != 0 {
                    self.log.fatal = true;
                    self.micros.clear();
                    self.steps.clear();
                    self.next(tf, me);
                } else if csts & mask == want {
                    if want & regs::CSTS_RDY != 0 {
                        self.log.ready_at = Some(tf.net.now());
                    }
                    self.next(tf, me);
                } else {
                    let at = tf.net.now() + self.cfg.register_poll;
                    self.timers.at(&mut tf.net, at, me, DriverTimer::Repoll);
                }
            }
            _ => {}
        }
    }

    /// Submits `cmd` on queue `qid`, with `extra` stores (a PRP list) before it; returns
    /// its command ID.
    fn submit(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        qid: u16,
        cmd: Command,
        extra: Vec<(u64, Vec<u8>)>,
    ) -> u16 {
        let now = tf.net.now();
        let qp = self.qps.get_mut(&qid).expect("queue exists");
        let (at, bytes, cid) = qp.submit(cmd, now);
        let (db, _) = qp.sq_doorbell();
        // Stores on the doorbell's own path are ordered before it by PCIe (posted writes
        // do not pass each other): it need not wait for them. Stores elsewhere (RAM) are
        // waited for only when `wait_for_sq_stores` says so; otherwise the doorbell goes
        // after the CPU's own MMIO cost, as a core's `wmb(); writel()` does: a store to
        // its own RAM is visible to a snooped fetch at once, and one through an NTB
        // travels ahead of the doorbell on their common prefix and ahead of the fetch
        // after it (FIFO wires), so the controller never reads a stale entry — which the
        // read-back tests would show as a wrong command.
        let db_route = self.route(tf, me, db, 4, Access::Write, 0).map(|i| i.route);
        for (addr, data) in extra
            .into_iter()
            .chain(std::iter::once((at, bytes.to_vec())))
        {
            let flow = self.next_store;
            self.next_store = (self.next_store + 1) % FLOW_MMIO;
            match self.route(tf, me, addr, data.len() as u32, Access::Write, flow) {
                Some(i) => {
                    let ordered = !self.cfg.wait_for_sq_stores || Some(i.route) == db_route;
                    if !ordered {
                        *self.unlanded.entry(qid).or_default() += 1;
                    }
                    self.stores.insert(flow, (addr, data, qid, !ordered));
                    tf.net.send_write(i);
                }
                None => self.log.faults += 1,
            }
        }
        if self.unlanded.get(&qid).copied().unwrap_or(0) == 0 {
            let at = now + self.cfg.mmio_write;
            self.timers
                .at(&mut tf.net, at, me, DriverTimer::Doorbell(qid));
        }
        cid
    }

    fn stored(&mut self, tf: &mut TimedFabric, me: ComponentId, flow: u32) {
        let Some((addr, data, qid, counted)) = self.stores.remove(&flow) else {
            return;
        };
        if tf.fabric.store(self.cfg.cpu, addr, &data).is_err() {
            self.log.faults += 1;
        }
        if !counted {
            return;
        }
        let n = self.unlanded.entry(qid).or_default();
        *n -= 1;
        if *n == 0 {
            // Every SQ entry written so far is in memory: the doorbell may go.
            let at = tf.net.now() + self.cfg.mmio_write;
            self.timers
                .at(&mut tf.net, at, me, DriverTimer::Doorbell(qid));
        }
    }

    fn ring(&mut self, tf: &mut TimedFabric, me: ComponentId, qid: u16) {
        if self.unlanded.get(&qid).copied().unwrap_or(0) > 0 {
            // Entries still on their way to memory: their landing rings.
            return;
        }
        let Some(qp) = self.qps.get(&qid) else { return };
        let (addr, v) = qp.sq_doorbell();
        self.mmio_write(tf, me, addr, 4, v as u64, FLOW_MMIO | 1);
        if !self.polling.get(&qid).copied().unwrap_or(false) {
            self.polling.insert(qid, true);
            self.poll(tf, me, qid);
        }
    }

    fn poll(&mut self, tf: &mut TimedFabric, me: ComponentId, qid: u16) {
        let Some(qp) = self.qps.get(&qid) else { return };
        let addr = qp.cq_entry();
        match self.route(tf, me, addr, 16, Access::Read, 0) {
            Some(i) => {
                self.spin.entry(qid).or_default().0 = true;
                tf.net.send_read(Issue { sample: true, ..i }, qid as u64)
            }
            None => {
                self.log.faults += 1;
                self.polling.insert(qid, false);
            }
        }
    }

    fn poll_served(&mut self, tf: &mut TimedFabric, me: ComponentId, qid: u16) {
        let Some(qp) = self.qps.get(&qid) else { return };
        let mut b = [0u8; 16];
        if tf.fabric.load(self.cfg.cpu, qp.cq_entry(), &mut b).is_err() {
            self.log.faults += 1;
        }
        self.sampled.insert(qid, b);
        // Nothing new: the core keeps the line and spins on it until a write lands there,
        // watched from this very moment so that no write slips between.
        let new = Completion::from_bytes(&b).phase == qp.phase();
        if self.cfg.spin_in_cache && !new {
            if let Some(i) = self.route(tf, me, qp.cq_entry(), 16, Access::Read, 0) {
                if let Some(&Hop::Sink(sink, _)) = tf.net.route_hops(i.route).last() {
                    let wake = DriverTimer::Wake(qid);
                    self.timers
                        .on_write(&mut tf.net, sink, i.target, 16, me, wake);
                    self.spin.entry(qid).or_default().1 = true;
                }
            }
        }
    }

    /// A write landed on the CQ line being spun on: read it (the miss), unless a read is
    /// still on its way, whose arrival then reads again.
    fn woken(&mut self, tf: &mut TimedFabric, me: ComponentId, qid: u16) {
        let st = self.spin.entry(qid).or_default();
        st.1 = false;
        if st.0 {
            st.2 = true;
            return;
        }
        self.poll(tf, me, qid);
    }

    fn poll_arrived(&mut self, tf: &mut TimedFabric, me: ComponentId, qid: u16) {
        let st = self.spin.entry(qid).or_default();
        st.0 = false;
        let (watching, rewoken) = (st.1, std::mem::take(&mut st.2));
        let b = self.sampled.get(&qid).copied().unwrap_or([0; 16]);
        let now = tf.net.now();
        let Some(qp) = self.qps.get_mut(&qid) else {
            return;
        };
        match qp.take(&b) {
            Some((e, at)) => {
                *self.unrung.entry(qid).or_default() += 1;
                if let Some(t) = at {
                    self.log.latency.record(now - t);
                }
                let half = (qp.entries / 2).max(1) as u32;
                if self.unrung[&qid] >= half {
                    self.ring_cq(tf, me, qid);
                }
                self.completed(tf, me, qid, e);
                // More may be there: read the next entry at once.
                self.poll(tf, me, qid);
            }
            None => {
                if self.unrung.get(&qid).copied().unwrap_or(0) > 0 {
                    self.ring_cq(tf, me, qid);
                }
                let busy = self.qps.get(&qid).is_some_and(|q| q.outstanding() > 0);
                if busy && rewoken {
                    self.poll(tf, me, qid);
                } else if busy && watching {
                    // The watch wakes the core.
                } else if busy {
                    let at = now + self.cfg.cq_poll;
                    self.timers.at(&mut tf.net, at, me, DriverTimer::Poll(qid));
                } else {
                    self.polling.insert(qid, false);
                }
            }
        }
    }

    fn ring_cq(&mut self, tf: &mut TimedFabric, me: ComponentId, qid: u16) {
        self.unrung.insert(qid, 0);
        let Some(qp) = self.qps.get(&qid) else { return };
        let (addr, v) = qp.cq_doorbell();
        self.mmio_write(tf, me, addr, 4, v as u64, FLOW_MMIO | 1);
    }

    fn completed(&mut self, tf: &mut TimedFabric, me: ComponentId, qid: u16, e: Completion) {
        if qid == 0 {
            if let Some(Micro::Admin(c)) = self.current.clone() {
                self.log.admin.push((Command { cid: e.cid, ..c }, e));
                self.next(tf, me);
            }
            return;
        }
        let Some((cmd, list)) = self.job_cmds.remove(&e.cid) else {
            return;
        };
        self.free_lists.push(list);
        if e.status.is_success() {
            self.log.io_bytes += cmd.blocks as u64 * self.lba_bytes;
        } else {
            self.log.io_errors += 1;
        }
        self.log.io.push((qid, cmd, e));
        self.fill(tf, me);
    }

    /// Keeps the job's queue depth: submits commands while slots are free; ends the job
    /// when all have completed.
    fn fill(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        let Some(job) = self.job.take() else { return };
        while self.job_next < job.cmds.len()
            && self.job_cmds.len() < job.depth as usize
            && !self.qps[&job.qid].is_full()
        {
            let c = job.cmds[self.job_next];
            self.job_next += 1;
            let list_slot = self.free_lists.pop().expect("one per outstanding command");
            let len = c.blocks as u64 * self.lba_bytes;
            let list_dev = job.prp_lists.dev + list_slot as u64 * 4096;
            let (prp1, prp2, entries) =
                build_prps(job.data.dev + c.buf_offset, len, 4096, list_dev);
            let extra = if entries.is_empty() {
                Vec::new()
            } else {
                let bytes: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
                vec![(job.prp_lists.cpu + list_slot as u64 * 4096, bytes)]
            };
            let cmd = Command::rw(c.write, job.nsid, c.slba, c.blocks, prp1, prp2);
            let cid = self.submit(tf, me, job.qid, cmd, extra);
            self.job_cmds.insert(cid, (c, list_slot));
        }
        let finished = self.job_next >= job.cmds.len() && self.job_cmds.is_empty();
        if finished {
            self.log.io_end = tf.net.now();
            self.next(tf, me);
        } else {
            self.job = Some(job);
        }
    }
}

impl Component<TimedFabric> for NvmeDriver {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        match ev {
            Event::Wake => {
                if self.current.is_none() {
                    self.next(tf, me);
                }
            }
            Event::Timer(key) => match self.timers.take(key) {
                DriverTimer::Repoll => self.reg_read(tf, me, regs::CSTS, 4),
                DriverTimer::Poll(qid) => self.poll(tf, me, qid),
                DriverTimer::Wake(qid) => self.woken(tf, me, qid),
                DriverTimer::Doorbell(qid) => self.ring(tf, me, qid),
            },
            Event::Delivery(Delivery::WriteDone { flow, .. }) => {
                if flow == FLOW_MMIO {
                    // A register write landed: the next step may read what it did.
                    self.next(tf, me);
                } else if flow & FLOW_MMIO == 0 {
                    self.stored(tf, me, flow);
                }
            }
            Event::Delivery(Delivery::ReadServed { tag, .. }) => {
                if tag & FLOW_REG_READ != 0 {
                    let off = tag & !FLOW_REG_READ;
                    let mut b = [0u8; 8];
                    let n = if off == regs::CAP { 8 } else { 4 };
                    if tf
                        .fabric
                        .load(self.cfg.cpu, self.cfg.bar0 + off, &mut b[..n])
                        .is_err()
                    {
                        self.log.faults += 1;
                    }
                    self.reg_sample = b;
                } else {
                    self.poll_served(tf, me, tag as u16);
                }
            }
            Event::Delivery(Delivery::ReadData {
                tag, last: true, ..
            }) => {
                if tag & FLOW_REG_READ != 0 {
                    self.reg_arrived(tf, me);
                } else {
                    self.poll_arrived(tf, me, tag as u16);
                }
            }
            Event::Delivery(_) => {}
        }
    }

    fn finished(&self) -> bool {
        self.done
    }
}
