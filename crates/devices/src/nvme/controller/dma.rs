//! The controller's DMA: reads of SQ entries, PRP lists and data, queued behind a limit
//! of outstanding reads and cut at MRRS and 4 KiB; posted writes of data, completions
//! and MSI-X messages, cut at MPS; and what each piece's arrival or landing means.

use fabric::{Access, Request, Requester};
use sim::net::{ComponentId, Issue};
use sim::timed::{sink_address, TimedFabric};

use super::{NvmeController, PendingRead, PendingWrite, ReadFor, WriteFor};
use crate::nvme::command::Command;

impl NvmeController {
    // ---- DMA --------------------------------------------------------------------------

    fn issue(
        &self,
        tf: &mut TimedFabric,
        me: ComponentId,
        addr: u64,
        len: u32,
        access: Access,
        flow: u32,
    ) -> Option<Issue> {
        let req = Request {
            requester: Requester::Function(self.node),
            addr,
            len,
            access,
        };
        let (route, target) = tf.route(&req).ok()?;
        let rid = tf.fabric.requester_rid(req.requester).0 as u64;
        Some(Issue {
            addr64: addr >= 1 << 32,
            iotlb_key: (rid << 48) | (addr >> 12),
            ..Issue::new(route, me, flow, len, sink_address(&target))
        })
    }

    /// Queues DMA reads of `[addr, addr + len)` (cut at MRRS and 4 KiB) for `what`;
    /// returns the pieces.
    pub(super) fn read(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        addr: u64,
        len: u64,
        what: ReadFor,
    ) -> u32 {
        let mut at = 0;
        let mut pieces = 0;
        while at < len {
            let a = addr + at;
            let n = (len - at)
                .min(self.params.mrrs as u64)
                .min(4096 - (a & 0xfff));
            let what = match what {
                ReadFor::Data { cmd, off } => ReadFor::Data { cmd, off: off + at },
                ReadFor::List { cmd, off } => ReadFor::List {
                    cmd,
                    off: off + at as u32,
                },
                f => f,
            };
            self.read_wait.push_back(PendingRead {
                epoch: self.epoch,
                addr: a,
                len: n as u32,
                what,
            });
            at += n;
            pieces += 1;
        }
        self.pump_reads(tf, me);
        pieces
    }

    fn pump_reads(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        while self.reads_out < self.params.max_reads {
            let Some(r) = self.read_wait.pop_front() else {
                break;
            };
            let tag = self.reads.insert(r);
            match self.issue(tf, me, r.addr, r.len, Access::Read, 0) {
                Some(i) => {
                    self.reads_out += 1;
                    tf.net.send_read(i, tag as u64);
                }
                None => {
                    // Nothing claims the address: the piece faults at once (the fabric
                    // logs it as the access is made).
                    self.reads.remove(tag);
                    let mut b = vec![0u8; r.len as usize];
                    let _ = tf
                        .fabric
                        .load(Requester::Function(self.node), r.addr, &mut b);
                    self.read_failed(tf, me, r);
                }
            }
        }
    }

    fn read_failed(&mut self, tf: &mut TimedFabric, me: ComponentId, r: PendingRead) {
        self.stats.dma_faults += 1;
        if r.epoch != self.epoch {
            return;
        }
        match r.what {
            ReadFor::Fetch { sqid } => {
                self.stats.fetch_faults += 1;
                self.retire(tf, me, sqid);
            }
            ReadFor::List { cmd, .. } | ReadFor::Data { cmd, .. } => {
                if let Some(c) = self.cmds.get_mut(cmd) {
                    c.failed = true;
                }
                self.piece_done(tf, me, cmd);
            }
        }
    }

    pub(super) fn read_arrived(&mut self, tf: &mut TimedFabric, me: ComponentId, tag: u64) {
        self.reads_out -= 1;
        let Some(r) = self.reads.remove(tag as u32) else {
            return;
        };
        let mut buf = vec![0u8; r.len as usize];
        let ok = tf
            .fabric
            .load(Requester::Function(self.node), r.addr, &mut buf)
            .is_ok();
        if r.epoch == self.epoch {
            if !ok {
                self.read_failed(tf, me, r);
            } else {
                match r.what {
                    ReadFor::Fetch { sqid } => {
                        let b: [u8; 64] = buf[..64].try_into().expect("64 bytes");
                        self.fetched(tf, me, sqid, Command::from_bytes(&b));
                    }
                    ReadFor::List { cmd, off } => {
                        if let Some(c) = self.cmds.get_mut(cmd) {
                            let o = off as usize;
                            c.list_buf[o..o + buf.len()].copy_from_slice(&buf);
                        }
                        self.piece_done(tf, me, cmd);
                    }
                    ReadFor::Data { cmd, off } => {
                        if let Some(c) = self.cmds.get_mut(cmd) {
                            let o = off as usize;
                            c.buf[o..o + buf.len()].copy_from_slice(&buf);
                        }
                        self.piece_done(tf, me, cmd);
                    }
                }
            }
        }
        self.pump_reads(tf, me);
        self.fetch(tf, me);
    }

    pub(super) fn write(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        addr: u64,
        data: Vec<u8>,
        what: WriteFor,
    ) -> bool {
        let len = data.len() as u32;
        let inline = data
            .iter()
            .take(8)
            .enumerate()
            .fold(0u64, |acc, (i, b)| acc | (*b as u64) << (8 * i));
        let flow = self.writes.insert(PendingWrite {
            epoch: self.epoch,
            addr,
            data,
            what,
        });
        match self.issue(tf, me, addr, len, Access::Write, flow) {
            Some(i) => {
                tf.net.send_write(Issue { data: inline, ..i });
                true
            }
            None => {
                // Nothing claims the address: the write faults (and the fabric logs it).
                let w = self.writes.remove(flow).expect("inserted above");
                let _ = tf
                    .fabric
                    .store(Requester::Function(self.node), w.addr, &w.data);
                self.stats.dma_faults += 1;
                false
            }
        }
    }

    /// Posts `data` (within one 4 KiB page) to `addr` in TLPs of at most MPS bytes: as one
    /// train (`Net::send_write_train`) when the network takes it, else TLP by TLP. Returns
    /// (writes posted, whether a piece faulted).
    pub(super) fn post_data(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        addr: u64,
        data: &[u8],
        what: WriteFor,
    ) -> (u32, bool) {
        let mps = self.params.mps as usize;
        if data.len() > mps && tf.net.trains() {
            let len = data.len() as u32;
            let flow = self.writes.insert(PendingWrite {
                epoch: self.epoch,
                addr,
                data: data.to_vec(),
                what,
            });
            if let Some(i) = self.issue(tf, me, addr, len, Access::Write, flow) {
                let inline = data
                    .iter()
                    .take(8)
                    .enumerate()
                    .fold(0u64, |acc, (i, b)| acc | (*b as u64) << (8 * i));
                if tf
                    .net
                    .send_write_train(Issue { data: inline, ..i }, mps as u32)
                {
                    return (1, false);
                }
            }
            // No train on this route (or no route: each piece faults on its own below).
            self.writes.remove(flow);
        }
        let (mut pieces, mut failed) = (0, false);
        for (k, piece) in data.chunks(mps).enumerate() {
            let a = addr + (k * mps) as u64;
            if self.write(tf, me, a, piece.to_vec(), what) {
                pieces += 1;
            } else {
                failed = true;
            }
        }
        (pieces, failed)
    }

    pub(super) fn write_landed(&mut self, tf: &mut TimedFabric, me: ComponentId, flow: u32) {
        let Some(w) = self.writes.remove(flow) else {
            return;
        };
        // The bytes land whatever became of the command (posted writes are not recalled).
        let ok = tf
            .fabric
            .store(Requester::Function(self.node), w.addr, &w.data)
            .is_ok();
        self.stats.dma_faults += u64::from(!ok);
        if w.epoch != self.epoch {
            return;
        }
        match w.what {
            WriteFor::Data { cmd } => {
                if !ok {
                    if let Some(c) = self.cmds.get_mut(cmd) {
                        c.failed = true;
                    }
                }
                self.piece_done(tf, me, cmd);
            }
            WriteFor::Cqe { cqid } => {
                if !ok {
                    self.stats.completion_faults += 1;
                    return;
                }
                self.stats.completions += 1;
                let vector = self.cqs.get(cqid as usize).and_then(|c| c.as_ref()?.vector);
                if let Some(v) = vector {
                    self.interrupt(tf, me, v);
                }
            }
            WriteFor::Msi => {
                if !ok {
                    self.stats.completion_faults += 1;
                }
            }
        }
    }
}
