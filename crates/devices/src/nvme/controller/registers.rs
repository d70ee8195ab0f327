//! The controller's register interface: BAR0 writes (controller configuration, admin
//! queue registers, the MSI-X table, doorbells), the registers' bytes kept in the BAR,
//! and what CC.EN starts and stops (enable, reset).

use std::collections::VecDeque;

use sim::net::ComponentId;
use sim::timed::TimedFabric;

use super::{Cq, CtrlWork, NvmeController, Slab, Sq};
use crate::nvme::regs::{self, Cc};

impl NvmeController {
    pub(super) fn sync_regs(&self, tf: &mut TimedFabric) {
        let mut r = [0u8; 0x40];
        r[0..8].copy_from_slice(&self.cap.to_u64().to_le_bytes());
        r[8..12].copy_from_slice(&regs::VERSION_1_3.to_le_bytes());
        r[0x0C..0x10].copy_from_slice(&self.intm.to_le_bytes());
        r[0x10..0x14].copy_from_slice(&self.intm.to_le_bytes());
        r[0x14..0x18].copy_from_slice(&self.cc.to_u32().to_le_bytes());
        r[0x1C..0x20].copy_from_slice(&self.csts.to_le_bytes());
        r[0x24..0x28].copy_from_slice(&self.aqa.to_le_bytes());
        r[0x28..0x30].copy_from_slice(&self.asq.to_le_bytes());
        r[0x30..0x38].copy_from_slice(&self.acq.to_le_bytes());
        if let Some(c) = self.params.cmb {
            // CMBLOC: BIR, offset 0. CMBSZ: SQS, size in 4 KiB units (SZU 0).
            r[0x38..0x3C].copy_from_slice(&(c.bar as u32 & 7).to_le_bytes());
            let sz = ((c.bytes >> 12).min(0xf_ffff) as u32) << 12 | 1;
            r[0x3C..0x40].copy_from_slice(&sz.to_le_bytes());
        }
        tf.fabric.poke_bar(self.node, 0, 0, &r);
    }

    pub(super) fn mmio(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        offset: u64,
        bytes: u16,
        data: u64,
    ) {
        let n = (bytes as usize).min(8);
        let le = data.to_le_bytes();
        let v32 = data as u32;
        let set_half = |reg: &mut u64, off: u64| {
            // 4- or 8-byte writes to a 64-bit register, low or high half.
            let mut b = reg.to_le_bytes();
            let at = off as usize;
            let k = n.min(8 - at);
            b[at..at + k].copy_from_slice(&le[..k]);
            *reg = u64::from_le_bytes(b);
        };
        match offset {
            regs::CC => {
                let new = Cc::from_u32(v32);
                let was = self.cc.en;
                self.cc = new;
                // A shutdown notification: nothing is cached, so it is complete at once.
                self.csts &= !regs::CSTS_SHST;
                if new.shn != 0 {
                    self.csts |= regs::CSTS_SHST_COMPLETE;
                }
                match (was, new.en) {
                    (false, true) => self.enable(tf, me),
                    (true, false) => self.reset(tf),
                    _ => {}
                }
            }
            regs::INTMS => self.intm |= v32,
            regs::INTMC => self.intm &= !v32,
            regs::AQA => self.aqa = v32 & 0x0fff_0fff,
            o if (regs::ASQ..regs::ASQ + 8).contains(&o) => set_half(&mut self.asq, o - regs::ASQ),
            o if (regs::ACQ..regs::ACQ + 8).contains(&o) => set_half(&mut self.acq, o - regs::ACQ),
            o if (regs::MSIX_TABLE..regs::MSIX_PBA).contains(&o) => {
                let end = regs::MSIX_TABLE + self.params.queue_pairs as u64 * regs::MSIX_ENTRY;
                if o + n as u64 <= end {
                    tf.fabric.poke_bar(self.node, 0, o, &le[..n]);
                    // Unmasking a vector with its pending bit set sends the message.
                    let v = ((o - regs::MSIX_TABLE) / regs::MSIX_ENTRY) as u16;
                    self.deliver_pending(tf, me, v);
                }
                return;
            }
            o if (regs::DOORBELLS..regs::MSIX_TABLE).contains(&o) => {
                // A write that is no doorbell, or one of a queue that does not exist, is
                // the spec's invalid doorbell write: counted.
                match regs::doorbell_at(o, self.cap.dstrd) {
                    Some((q, cq)) if bytes >= 4 => self.doorbell(tf, me, q, cq, v32),
                    _ => self.stats.doorbell_errors += 1,
                }
                return;
            }
            // Read-only registers (CAP, VS, CSTS, CMB*, the PBA) ignore writes.
            _ => return,
        }
        self.sync_regs(tf);
    }

    fn enable(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        let at = tf.net.now() + self.params.enable;
        self.timer_at(tf, at, me, CtrlWork::Enable);
    }

    pub(super) fn enable_done(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        if !self.cc.en {
            return;
        }
        let sqs = (self.aqa & 0xfff) + 1;
        let cqs = (self.aqa >> 16 & 0xfff) + 1;
        let max = self.cap.mqes as u32 + 1;
        let ok = (2..=max.min(4096)).contains(&sqs)
            && (2..=max.min(4096)).contains(&cqs)
            && self.asq & 0xfff == 0
            && self.acq & 0xfff == 0
            && self.asq != 0
            && self.acq != 0
            && self.cc.mps == 0
            && self.cc.css == 0;
        if !ok {
            self.csts |= regs::CSTS_CFS;
        } else {
            self.sqs[0] = Some(Sq {
                base: self.asq,
                entries: sqs as u16,
                head: 0,
                tail: 0,
                cqid: 0,
                inflight: 0,
                deleting: None,
            });
            self.cqs[0] = Some(Cq {
                base: self.acq,
                entries: cqs as u16,
                head: 0,
                tail: 0,
                phase: true,
                vector: Some(0),
                waiting: VecDeque::new(),
            });
            self.csts = regs::CSTS_RDY;
        }
        self.sync_regs(tf);
        self.fetch(tf, me);
    }

    /// CC.EN 1 → 0: every queue deleted, work under way dropped, CSTS.RDY cleared.
    fn reset(&mut self, tf: &mut TimedFabric) {
        self.epoch = self.epoch.wrapping_add(1) & 0xff_ffff;
        self.sqs.iter_mut().for_each(|q| *q = None);
        self.cqs.iter_mut().for_each(|q| *q = None);
        let qp = self.params.queue_pairs - 1;
        self.allocated = (qp, qp);
        self.read_wait.clear();
        self.cmds = Slab::default();
        self.cmb_reads = Slab::default();
        self.csts &= regs::CSTS_SHST;
        self.rr_next = 0;
        self.media.reset(tf.net.now());
    }

    fn doorbell(&mut self, tf: &mut TimedFabric, me: ComponentId, q: u16, cq: bool, v: u32) {
        let qi = q as usize;
        if cq {
            match self.cqs.get_mut(qi).and_then(Option::as_mut) {
                Some(c) if v < c.entries as u32 => {
                    c.head = v as u16;
                    self.post_waiting(tf, me, q);
                }
                _ => self.stats.doorbell_errors += 1,
            }
        } else {
            match self.sqs.get_mut(qi).and_then(Option::as_mut) {
                Some(s) if v < s.entries as u32 => {
                    s.tail = v as u16;
                    self.fetch(tf, me);
                }
                _ => self.stats.doorbell_errors += 1,
            }
        }
    }
}
