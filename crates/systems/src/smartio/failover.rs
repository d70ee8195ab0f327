//! Multipath failover of a distributed-driver client (EXPERIMENTS.md `smartio.failover`).
//!
//! A borrower with two NTB adapter pairs to the lender borrows the NVMe controller twice,
//! once through each pair (`BorrowOptions::through`), and gets one I/O queue pair per
//! borrow from the manager: each path has its own SQ/CQ, DMA window, data buffer and
//! doorbells through its own adapter. `FailoverClient` drives both queue pairs itself
//! (stores, doorbells and CQ polls through `TimedFabric::route`, like `NvmeDriver`):
//!
//! * **Submission with a fence.** SQ entries (in lender RAM, by hints) are CPU stores
//!   through the NTB; a dead link drops them silently. After a batch of stores the client
//!   reads CSTS through the same path (a read does not pass posted writes), the way
//!   SISCI's `SCICheckSequence` checks PIO stores: all-ones (Unsupported Request,
//!   REFERENCE.md §2) means the path is dead; otherwise every entry is in place and the
//!   doorbell goes. So the controller never fetches a stale entry from a slot whose store
//!   was dropped.
//! * **Detection.** A fence answered with all-ones, or a command with no completion
//!   within `deadline` (its doorbell or completion dropped). The path is declared dead;
//!   every command not acknowledged on it is abandoned and re-issued on the other path
//!   (a write re-issued writes the same bytes: safe).
//! * **Resync (`flap`).** A dead path is probed with a CSTS read every `probe_every`;
//!   when it answers, the client stores a Flush over every SQ slot it had used and not
//!   seen completed (a stale command must not run), fences, rings both doorbells, waits
//!   `drain` for the controller to finish what it fetched, and then moves its CQ head to
//!   where the controller's is (one completion per SQ entry ever fetched: the lost
//!   completions are skipped). The path is usable again; in `flap` the client goes back
//!   to it.
//! * **Recreate.** When the lender's agent revokes the borrow (windows torn down), the
//!   client asks for a new queue pair: the run loop (`failover_run`) has the manager
//!   delete the old I/O queues, borrows again through the same pair (a new DMA window)
//!   and creates a new queue pair, which the client adopts.
//!
//! The workload: 4 KiB blocks written once each (bytes a function of the block) and read
//! back after their write was acknowledged, verified, at queue depth 8.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use devices::nvme::command::{Command, Completion};
use devices::nvme::queue::{build_prps, Buffer, QueueMemory};
use devices::nvme::{regs, NvmeController};
use devices::pattern_byte;
use fabric::faults::{FaultAction, FaultSpec, FaultTarget};
use fabric::{Access, Request, Requester};
use sim::component::{Component, Sim};
use sim::faults::FaultInjector;
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::timed::{ns, TimedFabric};
use sim::Time;

use super::lending::{BorrowOptions, Borrowed, Cluster};
use super::nvme_dist::{ClientQueue, DistError, Manager, QueueRequest};

/// Queue depth of the client (EXPERIMENTS.md: QD 8).
pub const DEPTH: usize = 8;
const BLOCK: u64 = 4096;
const LBAS: u16 = 8;
/// Attempts of one I/O before it is reported failed.
const ATTEMPTS: u32 = 4;

/// What happens to the primary path after its failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverMode {
    /// The link stays down: the client finishes on the backup queue pair.
    FailOver,
    /// The link comes back 1 ms later with its mappings intact: resume the old pair.
    Flap,
    /// The link comes back with its mappings torn down: new queues, new windows.
    Recreate,
}

/// The client's policy (a driver's choices, not hardware timing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailoverPolicy {
    /// A command not completed within this is taken as lost with its path.
    pub deadline: Time,
    /// Between two probes of a dead path.
    pub probe_every: Time,
    /// After a resync's doorbells, time given to the controller to finish what it had.
    pub drain: Time,
}

impl Default for FailoverPolicy {
    fn default() -> Self {
        FailoverPolicy {
            deadline: Time::from_us(100),
            probe_every: Time::from_us(50),
            drain: Time::from_us(100),
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailoverResult {
    pub ios_completed: u64,
    pub ios_failed_reported: u64,
    pub acked_writes_lost: u64,
    pub bytes_corrupted: u64,
    /// From the (first) failure to the first completion after the switch.
    pub recovery_us: f64,
    /// Reads whose bytes were compared.
    pub ios_verified: u64,
    /// Completions per path index (0 primary, 1 backup) after the failure.
    pub completed_after_failure: [u64; 2],
    /// The path the last I/O completed on.
    pub last_path: usize,
    /// Times a path was declared dead, resynced, recreated.
    pub failovers: u64,
    pub resyncs: u64,
    pub recreates: u64,
    /// Queue IDs of the primary path, first and last.
    pub primary_qids: (u16, u16),
    pub primary_data_dev: (u64, u64),
    /// I/Os re-issued after their path was declared dead.
    pub reissued: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathState {
    Up,
    Dead,
    /// Resynced stores and doorbells sent; waiting `drain`.
    Draining,
    /// Its borrow was revoked: waiting for a new queue pair.
    Gone,
}

#[derive(Clone, Copy, Debug)]
struct Inflight {
    op: usize,
    slot: usize,
    at: Time,
}

/// One path's queue pair as the client keeps it.
#[derive(Clone, Debug)]
struct PathQ {
    qid: u16,
    entries: u16,
    mem: QueueMemory,
    data: Buffer,
    bar0: u64,
    dstrd: u8,
    /// SQ entries ever placed and CQ entries ever taken (positions are these mod entries).
    submitted: u64,
    consumed: u64,
    /// Of `submitted`, how many a doorbell covered.
    rung: u64,
    next_cid: u16,
    inflight: BTreeMap<u16, Inflight>,
    /// SQ positions of commands submitted and not completed (for a resync's Flushes).
    open: BTreeMap<u64, u16>,
    free_slots: Vec<usize>,
    state: PathState,
    polling: bool,
    fence_out: bool,
    unrung_cq: u32,
}

impl PathQ {
    fn new(q: &ClientQueue, bar0: u64, dstrd: u8) -> PathQ {
        PathQ {
            qid: q.qid,
            entries: q.entries,
            mem: q.mem,
            data: q.data,
            bar0,
            dstrd,
            submitted: 0,
            consumed: 0,
            rung: 0,
            next_cid: 0,
            inflight: BTreeMap::new(),
            open: BTreeMap::new(),
            free_slots: (0..DEPTH).rev().collect(),
            state: PathState::Up,
            polling: false,
            fence_out: false,
            unrung_cq: 0,
        }
    }
    fn phase(&self) -> bool {
        (self.consumed / self.entries as u64).is_multiple_of(2)
    }
    fn cq_entry(&self) -> u64 {
        self.mem.cq_cpu + (self.consumed % self.entries as u64) * 16
    }
    fn doorbell(&self, cq: bool) -> u64 {
        self.bar0 + regs::doorbell(self.qid, cq, self.dstrd)
    }
}

#[derive(Clone, Copy, Debug)]
struct Op {
    write: bool,
    block: u64,
    attempts: u32,
}

const T_POLL: u64 = 1 << 32;
const T_CHECK: u64 = 2 << 32;
const T_PROBE: u64 = 3 << 32;
const T_DRAIN: u64 = 4 << 32;
const T_START: u64 = 0;
const T_RESUME: u64 = 5 << 32;
const TAG_FENCE: u64 = 1 << 40;
const FLOW_SQ: u32 = 1 << 30;
const FLOW_DB: u32 = 1 << 29;

/// The two-path client component.
pub struct FailoverClient {
    cpu: Requester,
    mode: FailoverMode,
    policy: FailoverPolicy,
    cq_poll: Time,
    mmio: Time,
    seed: u8,
    base_lba: u64,
    paths: Vec<PathQ>,
    active: usize,
    ops: Vec<Op>,
    retry: VecDeque<usize>,
    to_read: VecDeque<u64>,
    last_was_write: bool,
    next_block: u64,
    target: u64,
    issued: u64,
    acked: BTreeSet<u64>,
    sampled: BTreeMap<usize, [u8; 16]>,
    fence_sample: BTreeMap<usize, [u8; 4]>,
    /// Set when the run loop must act (a new queue pair for path i).
    pub wants_recreate: Option<usize>,
    pub res: FailoverResult,
    first_failure: Option<Time>,
    switched_at: Option<Time>,
    done_ops: u64,
    stores: BTreeMap<u32, (u64, [u8; 64])>,
    next_store: u32,
}

fn block_bytes(seed: u8, block: u64) -> Vec<u8> {
    (0..BLOCK)
        .map(|i| pattern_byte(seed, block * BLOCK + i))
        .collect()
}

impl FailoverClient {
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
            requester: self.cpu,
            addr,
            len,
            access,
        };
        tf.issue(&req, me, flow)
    }

    /// A posted write through the path; dropped silently when nothing routes it.
    fn post(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        addr: u64,
        data: u64,
        len: u32,
        flow: u32,
    ) {
        if let Some(i) = self.route(tf, me, addr, len, Access::Write, flow) {
            tf.net.send_write(Issue { data, ..i });
        }
    }

    fn fence(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        if self.paths[p].fence_out {
            return;
        }
        self.paths[p].fence_out = true;
        let addr = self.paths[p].bar0 + regs::CSTS;
        match self.route(tf, me, addr, 4, Access::Read, 0) {
            Some(i) => tf
                .net
                .send_read(Issue { sample: true, ..i }, TAG_FENCE | p as u64),
            None => {
                // Nothing routes it (a dead cable, a torn-down window): all-ones at once.
                self.fence_sample.insert(p, [0xff; 4]);
                let now = tf.net.now();
                tf.net.timer_at(now, me, T_PROBE | 1 << 16 | p as u64);
            }
        }
    }

    fn fence_done(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        self.paths[p].fence_out = false;
        let v = self.fence_sample.remove(&p).unwrap_or([0xff; 4]);
        let dead = v == [0xff; 4];
        let now = tf.net.now();
        match self.paths[p].state {
            PathState::Up => {
                if dead {
                    self.declare_dead(tf, me, p);
                } else {
                    let q = &mut self.paths[p];
                    if q.rung < q.submitted {
                        q.rung = q.submitted;
                        let (db, v) = (q.doorbell(false), q.submitted % q.entries as u64);
                        self.post(tf, me, db, v, 4, FLOW_DB);
                        self.start_poll(tf, me, p);
                    }
                }
            }
            PathState::Dead => {
                if dead {
                    tf.net
                        .timer_at(now + self.policy.probe_every, me, T_PROBE | p as u64);
                } else {
                    self.resync(tf, me, p);
                }
            }
            PathState::Draining => {
                if dead {
                    // Died again while resyncing: start over.
                    self.paths[p].state = PathState::Dead;
                    tf.net
                        .timer_at(now + self.policy.probe_every, me, T_PROBE | p as u64);
                } else {
                    tf.net
                        .timer_at(now + self.policy.drain, me, T_DRAIN | p as u64);
                }
            }
            PathState::Gone => {}
        }
    }

    fn declare_dead(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        let now = tf.net.now();
        self.res.failovers += 1;
        self.first_failure.get_or_insert(now);
        let q = &mut self.paths[p];
        q.state = PathState::Dead;
        let lost: Vec<Inflight> = std::mem::take(&mut q.inflight).into_values().collect();
        q.free_slots = (0..DEPTH).rev().collect();
        let mut ops: Vec<usize> = lost.iter().map(|f| f.op).collect();
        ops.sort_unstable();
        for &o in ops.iter().rev() {
            self.retry.push_front(o);
        }
        self.res.reissued += ops.len() as u64;
        if self.active == p {
            let other = 1 - p;
            self.active = other;
            self.switched_at = Some(now);
        }
        tf.net
            .timer_at(now + self.policy.probe_every, me, T_PROBE | p as u64);
        self.fill(tf, me);
    }

    /// The path answers again: Flush over every open SQ slot, fence, then drain.
    fn resync(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        let q = &self.paths[p];
        let open: Vec<(u64, u16)> = q.open.iter().map(|(&k, &v)| (k, v)).collect();
        let (sq, entries) = (q.mem.sq_cpu, q.entries as u64);
        for (pos, cid) in open {
            let mut c = Command::flush(1);
            c.cid = cid;
            let at = sq + (pos % entries) * 64;
            // The entry's bytes are stored when the write lands (`WriteDone`).
            self.store_entry(tf, me, at, c.to_bytes());
        }
        let q = &mut self.paths[p];
        q.state = PathState::Draining;
        q.rung = q.submitted;
        let (sdb, sv) = (q.doorbell(false), q.submitted % entries);
        let (cdb, cv) = (q.doorbell(true), q.consumed % entries);
        self.post(tf, me, cdb, cv, 4, FLOW_DB);
        self.post(tf, me, sdb, sv, 4, FLOW_DB);
        self.fence(tf, me, p);
    }

    fn drained(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        let q = &mut self.paths[p];
        if q.state != PathState::Draining {
            return;
        }
        // The controller posted one completion per entry: skip the lost ones, marking
        // their slots as written in their lap (the CPU's own RAM), so that the next lap
        // does not take a slot the controller never reached for a new entry.
        let (from, to) = (q.consumed, q.submitted);
        let (cq, entries) = (q.mem.cq_cpu, q.entries as u64);
        for pos in from..to {
            let e = Completion {
                phase: (pos / entries).is_multiple_of(2),
                ..Completion::from_bytes(&[0; 16])
            };
            let _ = tf
                .fabric
                .store(self.cpu, cq + (pos % entries) * 16, &e.to_bytes());
        }
        let q = &mut self.paths[p];
        q.consumed = q.submitted;
        q.open.clear();
        q.state = PathState::Up;
        let (cdb, cv) = (q.doorbell(true), q.consumed % q.entries as u64);
        self.post(tf, me, cdb, cv, 4, FLOW_DB);
        self.res.resyncs += 1;
        if self.mode != FailoverMode::FailOver && p == 0 {
            self.active = 0;
        }
        self.fill(tf, me);
    }

    fn store_entry(&mut self, tf: &mut TimedFabric, me: ComponentId, at: u64, bytes: [u8; 64]) {
        // Stored in the fabric now if it routes (the bytes are in the write); a dead path
        // drops it, which the fence finds.
        let flow = FLOW_SQ | (self.next_store % FLOW_DB);
        self.next_store = self.next_store.wrapping_add(1);
        if let Some(i) = self.route(tf, me, at, 64, Access::Write, flow) {
            self.stores.insert(flow, (at, bytes));
            tf.net.send_write(i);
        }
    }

    /// Adopts a new queue pair for path `p` (after `recreate`).
    pub fn adopt(&mut self, p: usize, q: &ClientQueue, bar0: u64, dstrd: u8) {
        self.paths[p] = PathQ::new(q, bar0, dstrd);
        self.res.recreates += 1;
        self.wants_recreate = None;
        if p == 0 {
            self.active = 0;
        }
    }

    /// The lender's agent revoked path `p`'s borrow.
    pub fn revoked(&mut self, p: usize) {
        self.paths[p].state = PathState::Gone;
        self.wants_recreate = Some(p);
    }

    fn start_poll(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        if !self.paths[p].polling {
            self.paths[p].polling = true;
            self.poll(tf, me, p);
        }
    }

    fn poll(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        let addr = self.paths[p].cq_entry();
        match self.route(tf, me, addr, 16, Access::Read, 0) {
            Some(i) => tf.net.send_read(Issue { sample: true, ..i }, p as u64),
            None => {
                self.sampled.insert(p, [0xff; 16]);
                let now = tf.net.now();
                tf.net.timer_at(now + self.cq_poll, me, T_POLL | p as u64);
                self.paths[p].polling = false;
            }
        }
    }

    fn poll_arrived(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
        let b = self.sampled.remove(&p).unwrap_or([0xff; 16]);
        let now = tf.net.now();
        let q = &mut self.paths[p];
        let e = Completion::from_bytes(&b);
        if b != [0xff; 16] && e.phase == q.phase() && q.state == PathState::Up {
            q.consumed += 1;
            q.unrung_cq += 1;
            if q.unrung_cq >= (q.entries / 2) as u32 {
                q.unrung_cq = 0;
                let (cdb, cv) = (q.doorbell(true), q.consumed % q.entries as u64);
                self.post(tf, me, cdb, cv, 4, FLOW_DB);
            }
            self.completed(tf, me, p, e);
            self.poll(tf, me, p);
            return;
        }
        if q.unrung_cq > 0 && q.state == PathState::Up {
            q.unrung_cq = 0;
            let (cdb, cv) = (q.doorbell(true), q.consumed % q.entries as u64);
            self.post(tf, me, cdb, cv, 4, FLOW_DB);
        }
        let q = &mut self.paths[p];
        if !q.inflight.is_empty() && q.state == PathState::Up {
            tf.net.timer_at(now + self.cq_poll, me, T_POLL | p as u64);
        } else {
            q.polling = false;
        }
    }

    fn completed(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize, e: Completion) {
        let now = tf.net.now();
        let q = &mut self.paths[p];
        // The SQ head the controller reports: entries before it were fetched.
        let Some(f) = q.inflight.remove(&e.cid) else {
            return;
        };
        q.open.retain(|_, c| *c != e.cid);
        q.free_slots.push(f.slot);
        let data_cpu = q.data.cpu + f.slot as u64 * BLOCK;
        let op = self.ops[f.op];
        if !e.status.is_success() {
            if op.attempts >= ATTEMPTS {
                self.res.ios_failed_reported += 1;
                self.done_ops += 1;
            } else {
                self.retry.push_back(f.op);
            }
            self.fill(tf, me);
            return;
        }
        if let Some(t) = self.first_failure {
            if now > t {
                self.res.completed_after_failure[p] += 1;
            }
        }
        if let (Some(s), Some(t)) = (self.switched_at, self.first_failure) {
            if now >= s && self.res.recovery_us == 0.0 {
                self.res.recovery_us = (now - t).as_ps() as f64 / 1e6;
            }
        }
        self.res.ios_completed += 1;
        self.res.last_path = p;
        self.done_ops += 1;
        if op.write {
            if self.acked.insert(op.block) {
                self.to_read.push_back(op.block);
            }
        } else {
            let mut got = vec![0u8; BLOCK as usize];
            let _ = tf.fabric.load(self.cpu, data_cpu, &mut got);
            let want = block_bytes(self.seed, op.block);
            let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count() as u64;
            self.res.bytes_corrupted += bad;
            self.res.ios_verified += 1;
        }
        self.fill(tf, me);
    }

    fn next_op(&mut self) -> Option<usize> {
        if let Some(o) = self.retry.pop_front() {
            return Some(o);
        }
        if self.issued >= self.target {
            return None;
        }
        let read = !self.to_read.is_empty() && self.last_was_write;
        let op = if read {
            let b = self.to_read.pop_front().expect("not empty");
            Op {
                write: false,
                block: b,
                attempts: 0,
            }
        } else {
            self.next_block += 1;
            Op {
                write: true,
                block: self.next_block - 1,
                attempts: 0,
            }
        };
        self.last_was_write = !read;
        self.issued += 1;
        self.ops.push(op);
        Some(self.ops.len() - 1)
    }

    fn in_flight(&self) -> usize {
        self.paths.iter().map(|q| q.inflight.len()).sum()
    }

    /// Keeps QD 8 on the active path.
    fn fill(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        if self.wants_recreate.is_some() {
            // Quiesced while the manager recreates a queue pair (the control plane runs
            // with the controller otherwise idle).
            return;
        }
        let p = self.active;
        if self.paths[p].state != PathState::Up {
            return;
        }
        let now = tf.net.now();
        let mut any = false;
        while self.in_flight() < DEPTH
            && !self.paths[p].free_slots.is_empty()
            && self.paths[p].inflight.len() + 1 < self.paths[p].entries as usize
        {
            let Some(o) = self.next_op() else { break };
            self.ops[o].attempts += 1;
            let op = self.ops[o];
            let q = &mut self.paths[p];
            let slot = q.free_slots.pop().expect("checked");
            let cid = (0..=u16::MAX)
                .map(|i| q.next_cid.wrapping_add(i))
                .find(|c| !q.inflight.contains_key(c) && !q.open.values().any(|x| x == c))
                .expect("few outstanding");
            q.next_cid = cid.wrapping_add(1);
            let (cpu, dev) = (
                q.data.cpu + slot as u64 * BLOCK,
                q.data.dev + slot as u64 * BLOCK,
            );
            let (prp1, prp2, _) = build_prps(dev, BLOCK, BLOCK, 0);
            let lba = self.base_lba + op.block * LBAS as u64;
            let mut c = Command::rw(op.write, 1, lba, LBAS, prp1, prp2);
            c.cid = cid;
            let pos = q.submitted;
            q.submitted += 1;
            q.open.insert(pos, cid);
            q.inflight.insert(
                cid,
                Inflight {
                    op: o,
                    slot,
                    at: now,
                },
            );
            let at = q.mem.sq_cpu + (pos % q.entries as u64) * 64;
            if op.write {
                let _ = tf
                    .fabric
                    .store(self.cpu, cpu, &block_bytes(self.seed, op.block));
            } else {
                let _ = tf.fabric.store(self.cpu, cpu, &[0u8; BLOCK as usize]);
            }
            self.store_entry(tf, me, at, c.to_bytes());
            any = true;
        }
        if any {
            self.fence(tf, me, p);
        }
    }

    fn check(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        let now = tf.net.now();
        for p in 0..self.paths.len() {
            let q = &self.paths[p];
            if q.state == PathState::Up
                && q.inflight
                    .values()
                    .any(|f| now - f.at > self.policy.deadline)
            {
                self.declare_dead(tf, me, p);
            }
        }
        if !self.finished() {
            tf.net.timer_at(
                now + Time::from_ps(self.policy.deadline.as_ps() / 4),
                me,
                T_CHECK,
            );
        }
    }
}

impl Component<TimedFabric> for FailoverClient {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        match ev {
            Event::Timer(T_START) => {
                self.fill(tf, me);
                let now = tf.net.now();
                tf.net.timer_at(
                    now + Time::from_ps(self.policy.deadline.as_ps() / 4),
                    me,
                    T_CHECK,
                );
            }
            Event::Timer(T_CHECK) => self.check(tf, me),
            Event::Timer(T_RESUME) => self.fill(tf, me),
            Event::Timer(t) if t >> 32 == T_POLL >> 32 => {
                let p = (t & 0xff) as usize;
                self.paths[p].polling = true;
                self.poll(tf, me, p)
            }
            Event::Timer(t) if t >> 32 == T_PROBE >> 32 => {
                let p = (t & 0xff) as usize;
                if t & (1 << 16) != 0 {
                    self.fence_done(tf, me, p);
                } else if self.paths[p].state == PathState::Dead {
                    self.fence(tf, me, p);
                }
            }
            Event::Timer(t) if t >> 32 == T_DRAIN >> 32 => {
                self.drained(tf, me, (t & 0xff) as usize)
            }
            Event::Timer(_) => {}
            Event::Delivery(Delivery::ReadServed { tag, .. }) => {
                if tag & TAG_FENCE != 0 {
                    let p = (tag & 0xff) as usize;
                    let mut b = [0u8; 4];
                    if tf.net.delivery_failure().is_some()
                        || tf
                            .fabric
                            .load(self.cpu, self.paths[p].bar0 + regs::CSTS, &mut b)
                            .is_err()
                    {
                        b = [0xff; 4];
                    }
                    self.fence_sample.insert(p, b);
                } else {
                    let p = tag as usize;
                    let mut b = [0u8; 16];
                    if tf.net.delivery_failure().is_some()
                        || tf
                            .fabric
                            .load(self.cpu, self.paths[p].cq_entry(), &mut b)
                            .is_err()
                    {
                        b = [0xff; 16];
                    }
                    self.sampled.insert(p, b);
                }
            }
            Event::Delivery(Delivery::ReadData {
                tag, last: true, ..
            }) => {
                if tf.net.delivery_failure().is_some() {
                    // Unsupported Request or a completion timeout: all-ones.
                    if tag & TAG_FENCE != 0 {
                        self.fence_sample.insert((tag & 0xff) as usize, [0xff; 4]);
                    } else {
                        self.sampled.insert(tag as usize, [0xff; 16]);
                    }
                }
                if tag & TAG_FENCE != 0 {
                    self.fence_done(tf, me, (tag & 0xff) as usize);
                } else {
                    self.poll_arrived(tf, me, tag as usize);
                }
            }
            Event::Delivery(Delivery::WriteDone { flow, .. }) => {
                if let Some((at, bytes)) = self.stores.remove(&flow) {
                    if tf.net.delivery_failure().is_none() {
                        let _ = tf.fabric.store(self.cpu, at, &bytes);
                    }
                }
            }
            Event::Delivery(_) => {}
        }
    }

    fn finished(&self) -> bool {
        self.wants_recreate.is_some()
            || (self.done_ops >= self.target && self.retry.is_empty() && self.in_flight() == 0)
    }
}

/// A borrower's path: its borrow and queue pair.
pub struct PathSetUp {
    pub borrow: Borrowed,
    pub queue: ClientQueue,
    pub bar0: u64,
}

fn borrow_path(
    sim: &mut Sim<TimedFabric>,
    tf: &mut TimedFabric,
    cl: &mut Cluster,
    m: &mut Manager,
    pair: usize,
) -> Result<PathSetUp, DistError> {
    let f = &tf.fabric;
    let host = f
        .topo
        .host_by_name("borrower")
        .ok_or_else(|| DistError::Setup("no host `borrower`".into()))?;
    let lender = f
        .topo
        .host_by_name("lender")
        .ok_or_else(|| DistError::Setup("no host `lender`".into()))?;
    let name = format!("ntb{pair}");
    let (l, b) = (
        f.topo.ntb_by_name(lender, &name),
        f.topo.ntb_by_name(host, &name),
    );
    let (Some(l), Some(b)) = (l, b) else {
        return Err(DistError::Setup(format!("no adapter pair `{name}`")));
    };
    let borrow = cl.borrow(
        &mut tf.fabric,
        host,
        m.fdid,
        BorrowOptions::shared().through(l, b),
    )?;
    let req = QueueRequest::by_hints(64, DEPTH as u64 * BLOCK, DEPTH as u16);
    let mut queue = m.create_queue_pair_on(sim, tf, cl, borrow, &req)?;
    // The SQ is in lender RAM (by hints); the CPU stores its entries through this path's
    // own adapter (the segment's CPU mapping goes through the default pair). The lender
    // has no IOMMU: the controller's address of the SQ is its physical address.
    if tf.fabric.topo.host(lender).iommu {
        return Err(DistError::Setup(
            "the lender's IOMMU must be off for failover".into(),
        ));
    }
    let bytes = queue.entries as u64 * 64;
    let w = host::Hosts::with(&mut tf.fabric, |hs, f| {
        hs.ntb_acquire_window(f, b, lender, queue.mem.sq_dev, bytes)
    })
    .map_err(|e| DistError::Setup(e.to_string()))?;
    queue.mem.sq_cpu = w.local;
    // A new CQ starts empty (its RAM may be an old queue's, with old phase tags).
    let cpu = Requester::Cpu { host, package: 0 };
    let zeros = vec![0u8; queue.entries as usize * 16];
    tf.fabric
        .store(cpu, queue.mem.cq_cpu, &zeros)
        .map_err(|e| DistError::Setup(format!("clearing the CQ: {e:?}")))?;
    let bar0 = cl.shadow_bar(&tf.fabric, borrow, 0)?;
    Ok(PathSetUp {
        borrow,
        queue,
        bar0,
    })
}

/// The primary cable (`borrower.ntb0`) flaps at 1 ms; `Flap` and `Recreate` bring it back
/// at 2 ms, `FailOver` never.
fn primary_faults(tf: &TimedFabric, mode: FailoverMode) -> Vec<FaultSpec> {
    let cables = fabric::faults::cables_at(&tf.fabric.topo, "borrower.ntb0").unwrap_or_default();
    vec![FaultSpec {
        name: Some("primary".into()),
        at_ps: Time::from_us(1000).as_ps(),
        action: if mode == FailoverMode::FailOver {
            FaultAction::CablePull
        } else {
            FaultAction::LinkDown
        },
        target_name: "borrower.ntb0".into(),
        target: FaultTarget::Cables(cables),
        duration_ps: (mode != FailoverMode::FailOver).then_some(Time::from_us(1000).as_ps()),
    }]
}

/// Everything a run set up, for a test to look at afterwards.
pub struct FailoverRig {
    pub sim: Sim<TimedFabric>,
    pub cl: Cluster,
    pub manager: Manager,
    pub client: ComponentId,
    pub injector: ComponentId,
}

/// Runs `ios` verified I/Os (writes of new blocks and read-backs) on `smartio_dual_path`
/// (a fabric with hosts `borrower` and `lender`, adapters `ntb0`/`ntb1`, `lender.nvme`)
/// with the primary path failing at 1 ms as `mode` says.
pub fn failover_run(
    tf: &mut TimedFabric,
    mode: FailoverMode,
    ios: u64,
    seed: u64,
) -> Result<FailoverResult, DistError> {
    let faults = primary_faults(tf, mode);
    failover_run_with(tf, mode, ios, seed, &faults, FailoverPolicy::default()).map(|(r, _)| r)
}

/// `failover_run` with any fault schedule (a campaign) and policy. In `Recreate` mode
/// every link-up of cable 0 is followed by the lender's agent revoking the primary borrow.
pub fn failover_run_with(
    tf: &mut TimedFabric,
    mode: FailoverMode,
    ios: u64,
    seed: u64,
    faults: &[FaultSpec],
    policy: FailoverPolicy,
) -> Result<(FailoverResult, FailoverRig), DistError> {
    let mut sim = Sim::new();
    let mut cl = Cluster::new(&tf.fabric);
    for d in cl.device_list(&tf.fabric) {
        cl.lend(d.fdid)?;
    }
    let blocks = 1u64 << 22;
    let mut m = Manager::start(&mut sim, tf, &mut cl, "lender", "lender.nvme", blocks)?;
    let p0 = borrow_path(&mut sim, tf, &mut cl, &mut m, 0)?;
    let p1 = borrow_path(&mut sim, tf, &mut cl, &mut m, 1)?;
    let dstrd = sim
        .get::<devices::nvme::NvmeDriver>(m.driver)
        .map(|d| d.dstrd())
        .unwrap_or(0);
    let host = p0.queue.host;
    let pt = tf.timing_of(host);
    let cpu = Requester::Cpu { host, package: 0 };
    let mut res = FailoverResult {
        primary_qids: (p0.queue.qid, p0.queue.qid),
        primary_data_dev: (p0.queue.data.dev, p0.queue.data.dev),
        ..FailoverResult::default()
    };
    res.last_path = 0;
    let client = FailoverClient {
        cpu,
        mode,
        policy,
        cq_poll: ns(pt.cpu_poll_ns),
        mmio: ns(pt.cpu_mmio_write_ns),
        seed: (seed & 0xff) as u8,
        base_lba: 0,
        paths: vec![
            PathQ::new(&p0.queue, p0.bar0, dstrd),
            PathQ::new(&p1.queue, p1.bar0, dstrd),
        ],
        active: 0,
        ops: Vec::new(),
        retry: VecDeque::new(),
        to_read: VecDeque::new(),
        last_was_write: false,
        next_block: 0,
        target: ios,
        issued: 0,
        acked: BTreeSet::new(),
        sampled: BTreeMap::new(),
        fence_sample: BTreeMap::new(),
        wants_recreate: None,
        res,
        first_failure: None,
        switched_at: None,
        done_ops: 0,
        stores: BTreeMap::new(),
        next_store: 0,
    };
    let _ = client.mmio;
    // A resync must outlast the controller's reads that lost their completions on the
    // dead link: they end only at the lender platform's completion timeout.
    let lender = tf.fabric.topo.node(m.device).host;
    let cto = ns(tf.timing_of(lender).completion_timeout_ns);
    let mut client = client;
    client.policy.drain += cto;
    let t0 = tf.net.now();
    let shifted: Vec<FaultSpec> = faults
        .iter()
        .map(|f| FaultSpec {
            at_ps: f.at_ps + t0.as_ps(),
            ..f.clone()
        })
        .collect();
    let inj = sim.add(FaultInjector::new(&shifted));
    sim.get::<FaultInjector>(inj).expect("added").start(tf, inj);
    let cid = sim.add(client);
    tf.net.timer_at(t0, cid, T_START);
    // Times the primary cable comes back (recreate: the agent revokes then).
    let cable0 = fabric::faults::cables_at(&tf.fabric.topo, "borrower.ntb0").unwrap_or_default();
    let mut ups: VecDeque<Time> = shifted
        .iter()
        .filter(
            |f| matches!(&f.target, FaultTarget::Cables(c) if c.iter().any(|x| cable0.contains(x))),
        )
        .filter_map(|f| f.duration_ps.map(|d| Time::from_ps(f.at_ps + d)))
        .collect();
    ups.make_contiguous().sort();
    let mut borrow0 = p0.borrow;
    let mut qid0 = p0.queue.qid;
    loop {
        if mode == FailoverMode::Recreate {
            if let Some(&up) = ups.front() {
                sim.run_until(tf, up);
                ups.pop_front();
                // The lender's agent tears the primary's windows down as the link returns.
                cl.revoke(&mut tf.fabric, borrow0)?;
                sim.with(tf, cid, |c: &mut FailoverClient, _| c.revoked(0));
            }
        }
        sim.run_until_finished(tf);
        let want = sim
            .get::<FailoverClient>(cid)
            .expect("client")
            .wants_recreate;
        match want {
            Some(p) => {
                m.delete_queue_pair(&mut sim, tf, &mut cl, qid0)?;
                let n = borrow_path(&mut sim, tf, &mut cl, &mut m, p)?;
                borrow0 = n.borrow;
                qid0 = n.queue.qid;
                sim.with(tf, cid, |c: &mut FailoverClient, tf| {
                    c.adopt(p, &n.queue, n.bar0, dstrd);
                    c.res.primary_qids.1 = n.queue.qid;
                    c.res.primary_data_dev.1 = n.queue.data.dev;
                    let now = tf.net.now();
                    tf.net.timer_at(now, cid, T_RESUME);
                });
            }
            None if ups.is_empty() || mode != FailoverMode::Recreate => break,
            None => {}
        }
    }
    let c = sim.get::<FailoverClient>(cid).expect("client");
    let mut res = c.res.clone();
    // Every acknowledged write's bytes on the media.
    let ctrl = sim.get::<NvmeController>(m.controller).expect("controller");
    for &b in &c.acked {
        let got = ctrl.namespace().read(b * LBAS as u64, LBAS as u64);
        if got != block_bytes(c.seed, b) {
            res.acked_writes_lost += 1;
        }
    }
    let rig = FailoverRig {
        sim,
        cl,
        manager: m,
        client: cid,
        injector: inj,
    };
    Ok((res, rig))
}
