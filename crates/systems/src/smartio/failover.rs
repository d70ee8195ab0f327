//! Multipath failover of a distributed-driver client (`smartio.failover` in docs/studies.md).
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
//!   docs/hardware.md §2) means the path is dead; otherwise every entry is in place and the
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
//!   client asks for a new queue pair: the run loop (`failover_run_with`) has the manager
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
use fabric::{Access, HostId, Request, Requester};
use sim::component::{Component, Sim};
use sim::faults::FaultInjector;
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::timed::{ns, TimedFabric};
use sim::timers::Timers;
use sim::Time;

use super::lending::{BorrowOptions, Borrowed, Cluster};
use super::nvme_dist::{ClientQueue, DistError, Manager, QueueRequest};

/// Queue depth of the client (docs/workloads.md: QD 8).
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
    /// After a resync's doorbells, the first look at whether the controller has
    /// finished what it had (then every `probe_every`, up to the completion timeout).
    pub drain: Time,
    /// At most one new I/O per `pace` (an open workload, so that a long campaign of
    /// faults costs simulated idle time rather than I/Os); zero: closed loop at QD 8.
    pub pace: Time,
}

impl Default for FailoverPolicy {
    fn default() -> Self {
        FailoverPolicy {
            deadline: Time::from_us(100),
            probe_every: Time::from_us(50),
            drain: Time::from_us(100),
            pace: Time::ZERO,
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
    /// Of `resyncs`, those that ended on the controller's last completion rather than
    /// at the completion timeout.
    pub resyncs_before_timeout: u64,
    pub recreates: u64,
    /// Times the borrower crashed (and came back), and I/Os in flight lost with it (not
    /// acknowledged, so resubmitted after the restart).
    pub host_crashes: u64,
    pub ios_lost_with_host: u64,
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

/// What a client's timer means; `epoch` is the client's (crashes survived) when it was
/// set, so a timer from before a crash is dropped.
#[derive(Clone, Copy, Debug)]
struct ClientTimer {
    epoch: u64,
    what: ClientWork,
}

#[derive(Clone, Copy, Debug)]
enum ClientWork {
    /// Start (or start again after a restart): fill the queues, arm the deadline check.
    Start,
    /// Look for commands past their deadline.
    Check,
    /// The pacing gap has passed: issue again.
    Resume,
    /// Poll path `p`'s CQ again.
    Poll(usize),
    /// Probe dead path `p` with a fence read.
    Probe(usize),
    /// Path `p`'s fence read could not be routed: it reads all-ones now.
    FenceUnrouted(usize),
    /// Look again whether path `p` has drained.
    Drain(usize),
}

const TAG_FENCE: u64 = 1 << 40;
/// Read tags carry the client's epoch (crashes survived) above this bit.
const EPOCH_SHIFT: u32 = 48;
const EPOCH_MASK: u64 = (1 << EPOCH_SHIFT) - 1;
const FLOW_SQ: u32 = 1 << 30;
const FLOW_DB: u32 = 1 << 29;

/// The two-path client component.
pub struct FailoverClient {
    timers: Timers<ClientTimer>,
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
    /// The lender platform's completion timeout: the longest a resync may wait for the
    /// controller's reads that lost their completions on the dead link.
    completion_timeout: Time,
    /// Per path: a resync's drain ends by this time at the latest.
    drain_until: [Time; 2],
    /// Its host is down (crashed, not yet restarted); `epoch` counts the restarts.
    down: bool,
    epoch: u64,
    /// The next new I/O may not be issued before this (`pace`); a resume timer is armed.
    next_issue: Time,
    pace_armed: bool,
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
            Some(i) => tf.net.send_read(
                Issue { sample: true, ..i },
                TAG_FENCE | p as u64 | self.ep(),
            ),
            None => {
                // Nothing routes it (a dead cable, a torn-down window): all-ones at once.
                self.fence_sample.insert(p, [0xff; 4]);
                let now = tf.net.now();
                self.timer_at(tf, now, me, ClientWork::FenceUnrouted(p));
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
                    self.timer_at(tf, now + self.policy.probe_every, me, ClientWork::Probe(p));
                } else {
                    self.resync(tf, me, p);
                }
            }
            PathState::Draining => {
                if dead {
                    // Died again while resyncing: start over.
                    self.paths[p].state = PathState::Dead;
                    self.timer_at(tf, now + self.policy.probe_every, me, ClientWork::Probe(p));
                } else {
                    self.drain_until[p] = now + self.policy.drain + self.completion_timeout;
                    let at = now + self.policy.drain;
                    self.timer_at(tf, at, me, ClientWork::Drain(p));
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
        self.timer_at(tf, now + self.policy.probe_every, me, ClientWork::Probe(p));
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
        // The controller posts one completion per SQ entry it fetched, in CQ order; the
        // resync's doorbell covered every entry, so a valid completion at the last
        // submitted position means it has posted them all, and nothing it still owes can
        // land later. Until then (a command whose data read was lost on the dead link
        // ends only at the completion timeout, or that last completion was itself lost)
        // look again, up to the timeout.
        let now = tf.net.now();
        if q.submitted > q.consumed && now < self.drain_until[p] {
            let last = q.submitted - 1;
            let mut b = [0u8; 16];
            let at = q.mem.cq_cpu + (last % q.entries as u64) * 16;
            let posted = tf.fabric.load(self.cpu, at, &mut b).is_ok()
                && Completion::from_bytes(&b).phase == (last / q.entries as u64).is_multiple_of(2);
            if !posted {
                let next = (now + self.policy.probe_every).min(self.drain_until[p]);
                self.timer_at(tf, next, me, ClientWork::Drain(p));
                return;
            }
        }
        let q = &mut self.paths[p];
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
        if now < self.drain_until[p] {
            self.res.resyncs_before_timeout += 1;
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
        if self.paths[self.active].state != PathState::Up {
            // Both paths were down: this one is the way on.
            self.active = p;
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

    fn ep(&self) -> u64 {
        self.epoch << EPOCH_SHIFT
    }

    /// Sets a timer for `what` in this life of the client.
    fn timer_at(&mut self, tf: &mut TimedFabric, at: Time, me: ComponentId, what: ClientWork) {
        let t = ClientTimer {
            epoch: self.epoch,
            what,
        };
        self.timers.at(&mut tf.net, at, me, t);
    }

    /// One of its timers, of this life.
    fn timer(&mut self, tf: &mut TimedFabric, me: ComponentId, what: ClientWork) {
        match what {
            ClientWork::Start => {
                self.fill(tf, me);
                let at = tf.net.now() + Time::from_ps(self.policy.deadline.as_ps() / 4);
                self.timer_at(tf, at, me, ClientWork::Check);
            }
            ClientWork::Check => self.check(tf, me),
            ClientWork::Resume => {
                self.pace_armed = false;
                self.fill(tf, me)
            }
            ClientWork::Poll(p) => {
                self.paths[p].polling = true;
                self.poll(tf, me, p)
            }
            ClientWork::FenceUnrouted(p) => self.fence_done(tf, me, p),
            ClientWork::Probe(p) => {
                if self.paths[p].state == PathState::Dead {
                    self.fence(tf, me, p);
                }
            }
            ClientWork::Drain(p) => self.drained(tf, me, p),
        }
    }

    /// Starts the client (again, after a restart) at `at`.
    pub fn start_at(&mut self, tf: &mut TimedFabric, at: Time, me: ComponentId) {
        self.timer_at(tf, at, me, ClientWork::Start);
    }

    /// Issues again at `at` (its queue pair was recreated).
    pub fn resume_at(&mut self, tf: &mut TimedFabric, at: Time, me: ComponentId) {
        self.timer_at(tf, at, me, ClientWork::Resume);
    }

    /// Its host crashed: everything in flight is lost with the CPU. The I/Os it had not
    /// seen acknowledged go back to the workload's queue (the application resubmits them
    /// after the restart); what was acknowledged stays acknowledged, to be verified.
    pub fn host_crashed(&mut self) {
        self.down = true;
        self.epoch += 1;
        self.res.host_crashes += 1;
        let mut lost: Vec<usize> = Vec::new();
        for q in &mut self.paths {
            lost.extend(std::mem::take(&mut q.inflight).into_values().map(|f| f.op));
            q.state = PathState::Gone;
        }
        lost.sort_unstable();
        self.res.ios_lost_with_host += lost.len() as u64;
        for &o in lost.iter().rev() {
            self.retry.push_front(o);
        }
        self.stores.clear();
        self.sampled.clear();
        self.fence_sample.clear();
        self.pace_armed = false;
    }

    /// Its host is back with a new queue pair per path; the run loop starts it again.
    pub fn host_restarted(&mut self, queues: [(&ClientQueue, u64); 2], dstrd: u8) {
        self.paths = queues
            .iter()
            .map(|&(q, bar0)| PathQ::new(q, bar0, dstrd))
            .collect();
        self.active = 0;
        self.down = false;
        self.next_issue = Time::ZERO;
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
            Some(i) => tf
                .net
                .send_read(Issue { sample: true, ..i }, p as u64 | self.ep()),
            None => {
                self.sampled.insert(p, [0xff; 16]);
                let now = tf.net.now();
                let at = now + self.cq_poll;
                self.timer_at(tf, at, me, ClientWork::Poll(p));
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
            let at = now + self.cq_poll;
            self.timer_at(tf, at, me, ClientWork::Poll(p));
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
            let paced = self.policy.pace > Time::ZERO;
            if paced && now < self.next_issue {
                if !self.pace_armed {
                    self.pace_armed = true;
                    let at = self.next_issue;
                    self.timer_at(tf, at, me, ClientWork::Resume);
                }
                break;
            }
            let Some(o) = self.next_op() else { break };
            if paced {
                self.next_issue = now + self.policy.pace;
            }
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
            let at = now + Time::from_ps(self.policy.deadline.as_ps() / 4);
            self.timer_at(tf, at, me, ClientWork::Check);
        }
    }
}

impl Component<TimedFabric> for FailoverClient {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        // Timers and reads from before a crash belong to a client that no longer exists.
        let ev =
            match ev {
                Event::Timer(key) => {
                    let t = self.timers.take(key);
                    if self.down || t.epoch != self.epoch {
                        return;
                    }
                    return self.timer(tf, me, t.what);
                }
                Event::Delivery(
                    Delivery::ReadServed { tag, .. } | Delivery::ReadData { tag, .. },
                ) if tag >> EPOCH_SHIFT != self.epoch => return,
                _ if self.down => return, // A crashed host's CPU runs nothing.
                e => e,
            };
        match ev {
            Event::Timer(_) | Event::Wake => {}
            Event::Delivery(Delivery::ReadServed { tag, .. }) => {
                let tag = tag & EPOCH_MASK;
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
                let tag = tag & EPOCH_MASK;
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
        self.down
            || self.wants_recreate.is_some()
            || (self.done_ops >= self.target && self.retry.is_empty() && self.in_flight() == 0)
    }
}

/// A borrower's path: its borrow and queue pair.
pub struct PathSetUp {
    pub borrow: Borrowed,
    pub queue: ClientQueue,
    pub bar0: u64,
    /// The borrower adapter's window onto the SQ in lender RAM.
    pub sq_window: host::NtbWindow,
}

fn release_sq_window(tf: &mut TimedFabric, p: &PathSetUp) -> Result<(), DistError> {
    host::Hosts::with(&mut tf.fabric, |hs, f| {
        hs.ntb_release_window(f, &p.sq_window)
    })
    .map_err(|e| DistError::Setup(e.to_string()))
}

fn borrow_path(
    sim: &mut Sim<TimedFabric>,
    tf: &mut TimedFabric,
    (cl, m): (&mut Cluster, &mut Manager),
    setup: &FailoverSetup,
    pair: usize,
) -> Result<PathSetUp, DistError> {
    let f = &tf.fabric;
    let host_id = |name: &str| {
        f.topo
            .host_by_name(name)
            .ok_or_else(|| DistError::Setup(format!("no host `{name}`")))
    };
    let (host, lender) = (host_id(&setup.borrower)?, host_id(setup.lender())?);
    let name = &setup.adapters[pair];
    let (l, b) = (
        f.topo.ntb_by_name(lender, name),
        f.topo.ntb_by_name(host, name),
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
        sq_window: w,
    })
}

/// Everything a run set up, for a test to look at afterwards.
pub struct FailoverRig {
    pub sim: Sim<TimedFabric>,
    pub cl: Cluster,
    pub manager: Manager,
    pub client: ComponentId,
    pub injector: ComponentId,
}

/// Who fails over: the client's host (`borrower`), the controller it borrows (`device`,
/// `HOST.NAME` on the lender) and the adapter pair of each path, named alike on both hosts
/// (`adapters[0]` the primary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverSetup {
    pub borrower: String,
    pub device: String,
    pub adapters: [String; 2],
}

impl FailoverSetup {
    /// The lender: the host of `device`.
    pub fn lender(&self) -> &str {
        self.device.split('.').next().unwrap_or_default()
    }

    /// The names of the built-in `smartio_dual_path` scenario.
    pub fn dual_path() -> FailoverSetup {
        FailoverSetup {
            borrower: "borrower".into(),
            device: "lender.nvme".into(),
            adapters: ["ntb0".into(), "ntb1".into()],
        }
    }
}

/// Runs `ios` verified I/Os (writes of new blocks and read-backs) of `setup`'s client on
/// both paths, starting on the primary, under `faults` (times from the run's start) and
/// `policy`. In `Recreate` mode every link-up of the primary's cable is followed by the
/// lender's agent revoking the primary borrow.
pub fn failover_run_with(
    tf: &mut TimedFabric,
    setup: &FailoverSetup,
    mode: FailoverMode,
    ios: u64,
    seed: u64,
    faults: &[FaultSpec],
    policy: FailoverPolicy,
) -> Result<(FailoverResult, FailoverRig), DistError> {
    let mut run = Campaign::set_up(tf, setup)?;
    let client = run.client(tf, mode, policy, ios, seed);
    let _ = client.mmio;
    let t0 = tf.net.now();
    let shifted: Vec<FaultSpec> = faults
        .iter()
        .map(|f| FaultSpec {
            at_ps: f.at_ps + t0.as_ps(),
            ..f.clone()
        })
        .collect();
    let inj = run.sim.add(FaultInjector::new(&shifted));
    run.sim
        .get_mut::<FaultInjector>(inj)
        .expect("added")
        .start(tf, inj);
    let cid = run.sim.add(client);
    run.sim.with(tf, cid, |c: &mut FailoverClient, tf| {
        c.start_at(tf, t0, cid)
    });
    let acts = campaign_acts(tf, setup, mode, run.host, &shifted);
    run.run(tf, cid, &acts)?;
    Ok(run.finish(cid, inj))
}

/// What the run loop acts on, in time order: the primary cable coming back (recreate:
/// the agent revokes then), the borrower crashing and, restarted, borrowing again
/// (each a nanosecond after the injector's change: the agents notice it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Act {
    Revoke0,
    Crash,
    Restart,
}

/// The acts of a campaign whose faults (already shifted to start now) are `shifted`.
fn campaign_acts(
    tf: &TimedFabric,
    setup: &FailoverSetup,
    mode: FailoverMode,
    host: HostId,
    shifted: &[FaultSpec],
) -> Vec<(Time, Act)> {
    // Times the primary cable comes back (recreate: the agent revokes then).
    let primary = format!("{}.{}", setup.borrower, setup.adapters[0]);
    let cable0 = fabric::faults::cables_at(&tf.fabric.topo, &primary).unwrap_or_default();
    let mut ups: Vec<Time> = shifted
        .iter()
        .filter(
            |f| matches!(&f.target, FaultTarget::Cables(c) if c.iter().any(|x| cable0.contains(x))),
        )
        .filter_map(|f| f.duration_ps.map(|d| Time::from_ps(f.at_ps + d)))
        .collect();
    ups.sort();
    let mut acts: Vec<(Time, Act)> = Vec::new();
    if mode == FailoverMode::Recreate {
        acts.extend(ups.iter().map(|&t| (t, Act::Revoke0)));
    }
    let notice = Time::from_ns(1);
    for f in shifted {
        if f.target != FaultTarget::Host(host) {
            continue;
        }
        let at = Time::from_ps(f.at_ps) + notice;
        match f.action {
            FaultAction::HostRestart => acts.push((at, Act::Restart)),
            _ => {
                acts.push((at, Act::Crash));
                if let Some(d) = f.duration_ps {
                    acts.push((at + Time::from_ps(d), Act::Restart));
                }
            }
        }
    }
    acts.sort();
    acts
}

/// A failover campaign under way: the lender's device lent and its manager started,
/// the borrower's two paths, and the simulation they run in.
struct Campaign {
    setup: FailoverSetup,
    sim: Sim<TimedFabric>,
    cl: Cluster,
    m: Manager,
    /// The borrower.
    host: HostId,
    dstrd: u8,
    /// The primary (through `ntb0`) and the backup (through `ntb1`).
    paths: [PathSetUp; 2],
}

impl Campaign {
    /// Lends the lender's devices, starts the manager and borrows the controller through
    /// each adapter pair.
    fn set_up(tf: &mut TimedFabric, setup: &FailoverSetup) -> Result<Campaign, DistError> {
        let mut sim = Sim::new();
        let mut cl = Cluster::new(&tf.fabric);
        for d in cl.device_list(&tf.fabric) {
            cl.lend(d.fdid)?;
        }
        let blocks = 1u64 << 22;
        let (lender, device) = (setup.lender(), setup.device.as_str());
        let mut m = Manager::start(&mut sim, tf, &mut cl, lender, device, blocks)?;
        let p0 = borrow_path(&mut sim, tf, (&mut cl, &mut m), setup, 0)?;
        let p1 = borrow_path(&mut sim, tf, (&mut cl, &mut m), setup, 1)?;
        let dstrd = sim
            .get::<devices::nvme::NvmeDriver>(m.driver)
            .map(|d| d.dstrd())
            .unwrap_or(0);
        Ok(Campaign {
            setup: setup.clone(),
            host: p0.queue.host,
            sim,
            cl,
            m,
            dstrd,
            paths: [p0, p1],
        })
    }

    /// The client of `ios` I/Os on both paths, starting on the primary.
    fn client(
        &self,
        tf: &TimedFabric,
        mode: FailoverMode,
        policy: FailoverPolicy,
        ios: u64,
        seed: u64,
    ) -> FailoverClient {
        let [p0, p1] = &self.paths;
        let host = self.host;
        let pt = tf.timing_of(host);
        let cpu = Requester::Cpu { host, package: 0 };
        let mut res = FailoverResult {
            primary_qids: (p0.queue.qid, p0.queue.qid),
            primary_data_dev: (p0.queue.data.dev, p0.queue.data.dev),
            ..FailoverResult::default()
        };
        res.last_path = 0;
        FailoverClient {
            timers: Timers::new(),
            cpu,
            mode,
            policy,
            cq_poll: ns(pt.cpu_poll_ns),
            mmio: ns(pt.cpu_mmio_write_ns),
            seed: (seed & 0xff) as u8,
            base_lba: 0,
            paths: vec![
                PathQ::new(&p0.queue, p0.bar0, self.dstrd),
                PathQ::new(&p1.queue, p1.bar0, self.dstrd),
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
            completion_timeout: ns(tf
                .timing_of(tf.fabric.topo.node(self.m.device).host)
                .completion_timeout_ns),
            drain_until: [Time::ZERO; 2],
            down: false,
            epoch: 0,
            next_issue: Time::ZERO,
            pace_armed: false,
        }
    }

    /// Runs the simulation to the end of the workload, acting on `acts` as their times
    /// come and recreating a path whenever the client asks for it.
    fn run(
        &mut self,
        tf: &mut TimedFabric,
        cid: ComponentId,
        acts: &[(Time, Act)],
    ) -> Result<(), DistError> {
        let mut next = 0;
        loop {
            let c = self.sim.get::<FailoverClient>(cid).expect("client");
            if let Some(p) = c.wants_recreate {
                self.recreate(tf, cid, p)?;
                continue;
            }
            let done =
                !c.down && c.done_ops >= c.target && c.retry.is_empty() && c.in_flight() == 0;
            if done {
                return Ok(());
            }
            let Some(&(at, act)) = acts.get(next) else {
                self.sim.run_until_finished(tf);
                let c = self.sim.get::<FailoverClient>(cid).expect("client");
                if c.wants_recreate.is_none() {
                    return Ok(());
                }
                continue;
            };
            next += 1;
            self.sim.run_until(tf, at);
            let down = self.sim.get::<FailoverClient>(cid).expect("client").down;
            match act {
                Act::Revoke0 if !down => self.revoke_primary(tf, cid)?,
                Act::Crash if !down => self.crash(tf, cid)?,
                Act::Restart if down && tf.fabric.host_up(self.host) => self.restart(tf, cid)?,
                _ => {}
            }
        }
    }

    /// Path `p` anew, as the client asked: the manager deletes its queue pair, the
    /// borrower borrows through the same pair again and the client adopts the new one.
    fn recreate(
        &mut self,
        tf: &mut TimedFabric,
        cid: ComponentId,
        p: usize,
    ) -> Result<(), DistError> {
        let dstrd = self.dstrd;
        self.m
            .delete_queue_pair(&mut self.sim, tf, &mut self.cl, self.paths[p].queue.qid)?;
        release_sq_window(tf, &self.paths[p])?;
        let n = borrow_path(
            &mut self.sim,
            tf,
            (&mut self.cl, &mut self.m),
            &self.setup,
            p,
        )?;
        self.sim.with(tf, cid, |c: &mut FailoverClient, tf| {
            c.adopt(p, &n.queue, n.bar0, dstrd);
            if p == 0 {
                c.res.primary_qids.1 = n.queue.qid;
                c.res.primary_data_dev.1 = n.queue.data.dev;
            }
            let now = tf.net.now();
            c.resume_at(tf, now, cid);
        });
        self.paths[p] = n;
        Ok(())
    }

    /// The lender's agent tears the primary's windows down as the link returns.
    fn revoke_primary(&mut self, tf: &mut TimedFabric, cid: ComponentId) -> Result<(), DistError> {
        self.cl.revoke(&mut tf.fabric, self.paths[0].borrow)?;
        self.sim
            .with(tf, cid, |c: &mut FailoverClient, _| c.revoked(0));
        Ok(())
    }

    /// The borrower crashed. At the lender: the manager deletes the dead client's queue
    /// pairs (the controller aborts what they held) and the agent revokes its borrows —
    /// no reset: the device is shared, the manager keeps it.
    fn crash(&mut self, tf: &mut TimedFabric, cid: ComponentId) -> Result<(), DistError> {
        self.sim
            .with(tf, cid, |c: &mut FailoverClient, _| c.host_crashed());
        let live = self.cl.borrows();
        for p in &self.paths {
            self.m
                .delete_queue_pair(&mut self.sim, tf, &mut self.cl, p.queue.qid)?;
            if live.contains(&p.borrow) {
                self.cl.revoke(&mut tf.fabric, p.borrow)?;
            }
        }
        Ok(())
    }

    /// Rebooted, the borrower's driver programs its adapters afresh (the old SQ windows
    /// are released), borrows through each pair again and asks the manager for new
    /// queue pairs.
    fn restart(&mut self, tf: &mut TimedFabric, cid: ComponentId) -> Result<(), DistError> {
        let dstrd = self.dstrd;
        for p in &self.paths {
            release_sq_window(tf, p)?;
        }
        let cl_m = (&mut self.cl, &mut self.m);
        let n0 = borrow_path(&mut self.sim, tf, cl_m, &self.setup, 0)?;
        let cl_m = (&mut self.cl, &mut self.m);
        let n1 = borrow_path(&mut self.sim, tf, cl_m, &self.setup, 1)?;
        self.sim.with(tf, cid, |c: &mut FailoverClient, tf| {
            c.host_restarted([(&n0.queue, n0.bar0), (&n1.queue, n1.bar0)], dstrd);
            let now = tf.net.now();
            c.start_at(tf, now, cid);
        });
        self.paths = [n0, n1];
        Ok(())
    }

    /// The client's result, with every acknowledged write's bytes checked on the media,
    /// and what the run set up.
    fn finish(self, cid: ComponentId, inj: ComponentId) -> (FailoverResult, FailoverRig) {
        let c = self.sim.get::<FailoverClient>(cid).expect("client");
        let mut res = c.res.clone();
        // Every acknowledged write's bytes on the media.
        let ctrl = self
            .sim
            .get::<NvmeController>(self.m.controller)
            .expect("controller");
        for &b in &c.acked {
            let got = ctrl.namespace().read(b * LBAS as u64, LBAS as u64);
            if got != block_bytes(c.seed, b) {
                res.acked_writes_lost += 1;
            }
        }
        let rig = FailoverRig {
            sim: self.sim,
            cl: self.cl,
            manager: self.m,
            client: cid,
            injector: inj,
        };
        (res, rig)
    }
}
