//! The two-path failover client component: each path's queue pair as the client keeps
//! it, the verified workload, submission through the paths, CQ polling and completions,
//! the deadline check, and what a run measured.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use devices::nvme::command::{Command, Completion};
use devices::nvme::queue::{build_prps, Buffer, QueueMemory};
use devices::nvme::regs;
use devices::pattern_byte;
use fabric::{Access, Request, Requester};
use sim::component::Component;
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::timed::TimedFabric;
use sim::timers::Timers;
use sim::Time;

use super::policy::{FailoverMode, FailoverPolicy, ATTEMPTS, BLOCK, DEPTH, LBAS};
use crate::smartio::nvme_dist::ClientQueue;

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
pub(super) enum PathState {
    Up,
    Dead,
    /// Resynced stores and doorbells sent; waiting `drain`.
    Draining,
    /// Its borrow was revoked: waiting for a new queue pair.
    Gone,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Inflight {
    pub(super) op: usize,
    pub(super) slot: usize,
    pub(super) at: Time,
}

/// One path's queue pair as the client keeps it.
#[derive(Clone, Debug)]
pub(super) struct PathQ {
    pub(super) qid: u16,
    pub(super) entries: u16,
    pub(super) mem: QueueMemory,
    pub(super) data: Buffer,
    pub(super) bar0: u64,
    pub(super) dstrd: u8,
    /// SQ entries ever placed and CQ entries ever taken (positions are these mod entries).
    pub(super) submitted: u64,
    pub(super) consumed: u64,
    /// Of `submitted`, how many a doorbell covered.
    pub(super) rung: u64,
    pub(super) next_cid: u16,
    pub(super) inflight: BTreeMap<u16, Inflight>,
    /// SQ positions of commands submitted and not completed (for a resync's Flushes).
    pub(super) open: BTreeMap<u64, u16>,
    pub(super) free_slots: Vec<usize>,
    pub(super) state: PathState,
    pub(super) polling: bool,
    pub(super) fence_out: bool,
    pub(super) unrung_cq: u32,
}

impl PathQ {
    pub(super) fn new(q: &ClientQueue, bar0: u64, dstrd: u8) -> PathQ {
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
    pub(super) fn doorbell(&self, cq: bool) -> u64 {
        self.bar0 + regs::doorbell(self.qid, cq, self.dstrd)
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Op {
    write: bool,
    block: u64,
    attempts: u32,
}

/// What a client's timer means; `epoch` is the client's (crashes survived) when it was
/// set, so a timer from before a crash is dropped.
#[derive(Clone, Copy, Debug)]
pub(super) struct ClientTimer {
    epoch: u64,
    what: ClientWork,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum ClientWork {
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

pub(super) const TAG_FENCE: u64 = 1 << 40;

/// Read tags carry the client's epoch (crashes survived) above this bit.
const EPOCH_SHIFT: u32 = 48;

const EPOCH_MASK: u64 = (1 << EPOCH_SHIFT) - 1;

pub(super) const FLOW_SQ: u32 = 1 << 30;

pub(super) const FLOW_DB: u32 = 1 << 29;

/// The two-path client component.
pub struct FailoverClient {
    pub(super) timers: Timers<ClientTimer>,
    pub(super) cpu: Requester,
    pub(super) mode: FailoverMode,
    pub(super) policy: FailoverPolicy,
    pub(super) cq_poll: Time,
    pub(super) mmio: Time,
    pub(super) seed: u8,
    pub(super) base_lba: u64,
    pub(super) paths: Vec<PathQ>,
    pub(super) active: usize,
    pub(super) ops: Vec<Op>,
    pub(super) retry: VecDeque<usize>,
    pub(super) to_read: VecDeque<u64>,
    pub(super) last_was_write: bool,
    pub(super) next_block: u64,
    pub(super) target: u64,
    pub(super) issued: u64,
    pub(super) acked: BTreeSet<u64>,
    pub(super) sampled: BTreeMap<usize, [u8; 16]>,
    pub(super) fence_sample: BTreeMap<usize, [u8; 4]>,
    /// Set when the run loop must act (a new queue pair for path i).
    pub wants_recreate: Option<usize>,
    pub res: FailoverResult,
    pub(super) first_failure: Option<Time>,
    pub(super) switched_at: Option<Time>,
    pub(super) done_ops: u64,
    pub(super) stores: BTreeMap<u32, (u64, [u8; 64])>,
    pub(super) next_store: u32,
    /// The lender platform's completion timeout: the longest a resync may wait for the
    /// controller's reads that lost their completions on the dead link.
    pub(super) completion_timeout: Time,
    /// Per path: a resync's drain ends by this time at the latest.
    pub(super) drain_until: [Time; 2],
    /// Its host is down (crashed, not yet restarted); `epoch` counts the restarts.
    pub(super) down: bool,
    pub(super) epoch: u64,
    /// The next new I/O may not be issued before this (`pace`); a resume timer is armed.
    pub(super) next_issue: Time,
    pub(super) pace_armed: bool,
}

pub(super) fn block_bytes(seed: u8, block: u64) -> Vec<u8> {
    (0..BLOCK)
        .map(|i| pattern_byte(seed, block * BLOCK + i))
        .collect()
}

impl FailoverClient {
    pub(super) fn route(
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
    pub(super) fn post(
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

    pub(super) fn ep(&self) -> u64 {
        self.epoch << EPOCH_SHIFT
    }

    /// Sets a timer for `what` in this life of the client.
    pub(super) fn timer_at(
        &mut self,
        tf: &mut TimedFabric,
        at: Time,
        me: ComponentId,
        what: ClientWork,
    ) {
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

    pub(super) fn start_poll(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
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

    pub(super) fn in_flight(&self) -> usize {
        self.paths.iter().map(|q| q.inflight.len()).sum()
    }

    /// Keeps QD 8 on the active path.
    pub(super) fn fill(&mut self, tf: &mut TimedFabric, me: ComponentId) {
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
