//! Submission and completion queues: round-robin arbitration and fetching of SQ entries
//! (by DMA or from the CMB), running a fetched command, and posting its completion when
//! its CQ has room.

use sim::net::ComponentId;
use sim::timed::TimedFabric;

use super::{Cmd, CtrlWork, Done, NvmeController, ReadFor, WriteFor};
use crate::nvme::command::{Command, Completion, Status};
use crate::nvme::regs;

impl NvmeController {
    // ---- arbitration and commands -------------------------------------------------------

    /// Round robin over SQs with entries, one entry each (arbitration burst 1), while
    /// read tags are free.
    pub(super) fn fetch(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        if self.csts & regs::CSTS_RDY == 0 {
            return;
        }
        let n = self.sqs.len();
        while self.reads_out < self.params.max_reads && self.read_wait.is_empty() {
            let Some(q) = (0..n)
                .map(|i| (self.rr_next + i) % n)
                .find(|&q| self.sqs[q].is_some_and(|s| s.head != s.tail && s.deleting.is_none()))
            else {
                return;
            };
            self.rr_next = (q + 1) % n;
            let s = self.sqs[q].as_mut().expect("found");
            let addr = s.base + s.head as u64 * 64;
            s.head = (s.head + 1) % s.entries;
            s.inflight += 1;
            match self.params.cmb {
                Some(c) if c.contains(addr, 64) => {
                    // In the CMB: read inside the controller, no tag, no TLP.
                    let slot = self.cmb_reads.insert((q as u16, addr - c.addr));
                    let at = tf.net.now() + c.access;
                    self.timer_at(tf, at, me, CtrlWork::Cmb(slot));
                }
                _ => {
                    self.read(tf, me, addr, 64, ReadFor::Fetch { sqid: q as u16 });
                }
            }
        }
    }

    pub(super) fn cmb_fetched(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let (Some((sqid, off)), Some(c)) = (self.cmb_reads.remove(slot), self.params.cmb) else {
            return;
        };
        let mut b = [0u8; 64];
        tf.fabric.peek_bar(self.node, c.bar, off, &mut b);
        self.stats.cmb_fetches += 1;
        self.fetched(tf, me, sqid, Command::from_bytes(&b));
        self.fetch(tf, me);
    }

    pub(super) fn fetched(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        sqid: u16,
        sqe: Command,
    ) {
        *self
            .stats
            .commands
            .entry((sqid == 0, sqe.opcode))
            .or_default() += 1;
        *self.stats.per_sq.entry(sqid).or_default() += 1;
        let slot = self.cmds.insert(Cmd {
            sqid,
            sqe,
            len: 0,
            buf: Vec::new(),
            segs: Vec::new(),
            list: None,
            list_buf: Vec::new(),
            pending: 0,
            failed: false,
            to_host: false,
            dw0: 0,
        });
        // The controller's processor takes one command at a time.
        let now = tf.net.now();
        let at = self.cpu_free.max(now) + self.params.command;
        self.cpu_free = at;
        self.timer_at(tf, at, me, CtrlWork::Exec(slot));
    }

    pub(super) fn execute(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let Some(c) = self.cmds.get_mut(slot) else {
            return;
        };
        let (sqid, sqe) = (c.sqid, c.sqe);
        let deleting = self.sqs.get(sqid as usize).copied().flatten();
        if deleting.is_some_and(|s| s.deleting.is_some()) {
            // Fetched before its SQ's deletion: aborted without running.
            self.complete(tf, me, slot, Status::ABORTED_SQ_DELETION, 0);
            return;
        }
        let outcome = if sqid == 0 {
            self.admin(tf, me, slot, &sqe)
        } else {
            self.io(tf, me, slot, &sqe)
        };
        if let Some((status, dw0)) = outcome {
            self.complete(tf, me, slot, status, dw0);
        }
    }

    pub(super) fn complete(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        slot: u32,
        status: Status,
        dw0: u32,
    ) {
        let Some(cmd) = self.cmds.remove(slot) else {
            return;
        };
        let Some(sq) = self.sqs.get(cmd.sqid as usize).copied().flatten() else {
            // Only after a reset, whose epoch drops such work before it gets here.
            return;
        };
        // A command of an SQ being deleted is aborted.
        let status = match sq.deleting {
            Some(_) => Status::ABORTED_SQ_DELETION,
            None => status,
        };
        if !status.is_success() {
            *self.stats.errors.entry(status).or_default() += 1;
        }
        let done = Done {
            sqid: cmd.sqid,
            cid: cmd.sqe.cid,
            dw0,
            status,
        };
        if let Some(cq) = self.cqs.get_mut(sq.cqid as usize).and_then(Option::as_mut) {
            cq.waiting.push_back(done);
            self.post_waiting(tf, me, sq.cqid);
        }
        self.retire(tf, me, cmd.sqid);
    }

    /// An entry fetched from SQ `sqid` is done with; a deletion waiting for it ends.
    pub(super) fn retire(&mut self, tf: &mut TimedFabric, me: ComponentId, sqid: u16) {
        let Some(sq) = self.sqs.get_mut(sqid as usize).and_then(Option::as_mut) else {
            return;
        };
        sq.inflight = sq.inflight.saturating_sub(1);
        if sq.inflight == 0 {
            if let Some(delete) = sq.deleting {
                self.sqs[sqid as usize] = None;
                self.complete(tf, me, delete, Status::SUCCESS, 0);
            }
        }
    }

    /// Posts waiting completions while the CQ has room (never overwriting an entry the
    /// host has not released with its head doorbell).
    pub(super) fn post_waiting(&mut self, tf: &mut TimedFabric, me: ComponentId, cqid: u16) {
        loop {
            let Some(cq) = self.cqs.get_mut(cqid as usize).and_then(Option::as_mut) else {
                return;
            };
            if cq.waiting.is_empty() {
                return;
            }
            if (cq.tail + 1) % cq.entries == cq.head {
                self.stats.cq_full_waits += 1;
                return;
            }
            let d = cq.waiting.pop_front().expect("not empty");
            let sq_head = self
                .sqs
                .get(d.sqid as usize)
                .copied()
                .flatten()
                .map_or(0, |s| s.head);
            let cq = self.cqs[cqid as usize].as_mut().expect("checked");
            let e = Completion {
                dw0: d.dw0,
                sq_head,
                sq_id: d.sqid,
                cid: d.cid,
                phase: cq.phase,
                status: d.status,
            };
            let addr = cq.base + cq.tail as u64 * 16;
            cq.tail = (cq.tail + 1) % cq.entries;
            if cq.tail == 0 {
                cq.phase = !cq.phase;
            }
            if !self.write(tf, me, addr, e.to_bytes().to_vec(), WriteFor::Cqe { cqid }) {
                self.stats.completion_faults += 1;
            }
        }
    }
}
