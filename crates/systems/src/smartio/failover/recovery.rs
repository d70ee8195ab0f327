//! A failover client's paths failing and coming back: fences after stores, declaring a
//! path dead and re-issuing its commands on the other, the resync of a path that
//! answers again, a new queue pair after a revoked borrow, and its host crashing and
//! restarting.

use devices::nvme::command::{Command, Completion};
use devices::nvme::regs;
use fabric::Access;
use sim::net::{ComponentId, Issue};
use sim::timed::TimedFabric;
use sim::Time;

use super::client::{
    ClientWork, FailoverClient, Inflight, PathQ, PathState, FLOW_DB, FLOW_SQ, TAG_FENCE,
};
use super::policy::{FailoverMode, DEPTH};
use crate::smartio::nvme_dist::ClientQueue;

impl FailoverClient {
    pub(super) fn fence(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
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

    pub(super) fn fence_done(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
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

    pub(super) fn declare_dead(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
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

    pub(super) fn drained(&mut self, tf: &mut TimedFabric, me: ComponentId, p: usize) {
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

    pub(super) fn store_entry(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        at: u64,
        bytes: [u8; 64],
    ) {
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
}
