//! The controller's admin commands: Identify, creating and deleting I/O queues, and
//! Get/Set Features (the number of queues).

use std::collections::VecDeque;

use sim::net::ComponentId;
use sim::timed::TimedFabric;

use super::{Cq, NvmeController, Sq};
use crate::nvme::command::{
    admin, Command, IdentifyController, IdentifyNamespace, Status, CNS_CONTROLLER, CNS_NAMESPACE,
    FID_NUMBER_OF_QUEUES,
};
use crate::nvme::regs;

impl NvmeController {
    /// Runs an admin command; `Some` when it completes at once.
    pub(super) fn admin(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        slot: u32,
        c: &Command,
    ) -> Option<(Status, u32)> {
        let qid = c.cdw10() as u16;
        let qsize = (c.cdw10() >> 16) + 1;
        let max_entries = self.cap.mqes as u32 + 1;
        let ok = Some((Status::SUCCESS, 0));
        match c.opcode {
            admin::IDENTIFY => {
                let data = match c.cdw10() as u8 {
                    CNS_CONTROLLER => IdentifyController {
                        vid: self.params.vid,
                        ssvid: self.params.vid,
                        serial: self.params.serial.clone(),
                        model: self.params.model.clone(),
                        firmware: "NUDMA1.0".into(),
                        mdts: self.params.mdts,
                        version: regs::VERSION_1_3,
                        namespaces: 1,
                    }
                    .to_bytes(),
                    CNS_NAMESPACE if c.nsid == 1 => IdentifyNamespace {
                        nsze: self.namespace.blocks(),
                        ncap: self.namespace.blocks(),
                        nuse: self.namespace.used(),
                        lbads: self.namespace.lba_bytes().trailing_zeros() as u8,
                    }
                    .to_bytes(),
                    CNS_NAMESPACE => return Some((Status::INVALID_NAMESPACE, 0)),
                    _ => return Some((Status::INVALID_FIELD, 0)),
                };
                self.start_transfer(tf, me, slot, data, true)
            }
            admin::SET_FEATURES | admin::GET_FEATURES => {
                if c.cdw10() as u8 != FID_NUMBER_OF_QUEUES {
                    return Some((Status::INVALID_FIELD, 0));
                }
                let limit = self.params.queue_pairs - 1;
                if c.opcode == admin::SET_FEATURES {
                    let (nsqr, ncqr) = (c.cdw11() as u16, (c.cdw11() >> 16) as u16);
                    if nsqr == 0xffff || ncqr == 0xffff {
                        return Some((Status::INVALID_FIELD, 0));
                    }
                    if self.any_io_queue() {
                        return Some((Status::COMMAND_SEQUENCE_ERROR, 0));
                    }
                    self.allocated = ((nsqr + 1).min(limit), (ncqr + 1).min(limit));
                }
                let (s, q) = self.allocated;
                Some((Status::SUCCESS, (s - 1) as u32 | ((q - 1) as u32) << 16))
            }
            admin::CREATE_IO_CQ => {
                let qi = qid as usize;
                if qid == 0
                    || qid > self.allocated.1
                    || self.cqs.get(qi).is_none_or(|q| q.is_some())
                {
                    return Some((Status::INVALID_QUEUE_IDENTIFIER, 0));
                }
                if qsize < 2 || qsize > max_entries {
                    return Some((Status::INVALID_QUEUE_SIZE, 0));
                }
                let (pc, ien, iv) = (
                    c.cdw11() & 1 == 1,
                    c.cdw11() >> 1 & 1 == 1,
                    (c.cdw11() >> 16) as u16,
                );
                if !pc || c.prp1 & 0xfff != 0 || c.prp1 == 0 {
                    return Some((Status::INVALID_FIELD, 0));
                }
                if self.params.cmb.is_some_and(|m| m.contains(c.prp1, 1)) {
                    // CMBSZ.CQS is 0: completion queues cannot live in the CMB.
                    return Some((Status::INVALID_FIELD, 0));
                }
                if ien && iv >= self.params.queue_pairs {
                    return Some((Status::INVALID_INTERRUPT_VECTOR, 0));
                }
                self.cqs[qi] = Some(Cq {
                    base: c.prp1,
                    entries: qsize as u16,
                    head: 0,
                    tail: 0,
                    phase: true,
                    vector: ien.then_some(iv),
                    waiting: VecDeque::new(),
                });
                ok
            }
            admin::CREATE_IO_SQ => {
                let qi = qid as usize;
                if qid == 0
                    || qid > self.allocated.0
                    || self.sqs.get(qi).is_none_or(|q| q.is_some())
                {
                    return Some((Status::INVALID_QUEUE_IDENTIFIER, 0));
                }
                if qsize < 2 || qsize > max_entries {
                    return Some((Status::INVALID_QUEUE_SIZE, 0));
                }
                let cqid = (c.cdw11() >> 16) as u16;
                if cqid == 0 || self.cqs.get(cqid as usize).is_none_or(|q| q.is_none()) {
                    return Some((Status::COMPLETION_QUEUE_INVALID, 0));
                }
                if c.cdw11() & 1 == 0 || c.prp1 & 0xfff != 0 || c.prp1 == 0 {
                    return Some((Status::INVALID_FIELD, 0));
                }
                let in_cmb = self.params.cmb.filter(|m| m.contains(c.prp1, 1));
                if in_cmb.is_some_and(|m| !m.contains(c.prp1, qsize as u64 * 64)) {
                    return Some((Status::INVALID_FIELD, 0));
                }
                self.sqs[qi] = Some(Sq {
                    base: c.prp1,
                    entries: qsize as u16,
                    head: 0,
                    tail: 0,
                    cqid,
                    inflight: 0,
                    deleting: None,
                });
                ok
            }
            admin::DELETE_IO_SQ => {
                let qi = qid as usize;
                let Some(Some(sq)) = self.sqs.get_mut(qi) else {
                    return Some((Status::INVALID_QUEUE_IDENTIFIER, 0));
                };
                if qid == 0 || sq.deleting.is_some() {
                    return Some((Status::INVALID_QUEUE_IDENTIFIER, 0));
                }
                if sq.inflight > 0 {
                    // Commands still in progress are aborted; the deletion completes
                    // after the last of them.
                    sq.deleting = Some(slot);
                    return None;
                }
                self.sqs[qi] = None;
                ok
            }
            admin::DELETE_IO_CQ => {
                let qi = qid as usize;
                if qid == 0 || self.cqs.get(qi).is_none_or(|q| q.is_none()) {
                    return Some((Status::INVALID_QUEUE_IDENTIFIER, 0));
                }
                if self.sqs.iter().flatten().any(|s| s.cqid == qid) {
                    return Some((Status::INVALID_QUEUE_DELETION, 0));
                }
                self.cqs[qi] = None;
                ok
            }
            _ => Some((Status::INVALID_OPCODE, 0)),
        }
    }
}
