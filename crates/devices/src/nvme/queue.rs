//! The driver side: a queue pair's logic (`QueuePair`: SQ tail, CQ head and phase,
//! command IDs, doorbells, PRP building) kept apart from the component that runs it
//! (`NvmeDriver`: a CPU of one host resetting and enabling the controller, admin commands,
//! creating I/O queue pairs and running closed loops of reads and writes).
//!
//! Everything goes through the fabric as a CPU of the host sees it: SQ entries and PRP
//! lists are CPU stores (posted writes whose bytes land when they land), doorbells and
//! registers are MMIO writes to BAR0 (through whatever window the caller's address goes),
//! CSTS and the CQ are polled by CPU reads sampled when memory serves them, so the driver
//! sees completions only through their bytes and phase tag. An SQ entry on the doorbell's
//! own path (an SQ in the controller's CMB) is ordered before the doorbell by PCIe; one in
//! RAM is waited for until it has landed before the doorbell goes.

use std::collections::BTreeMap;

use fabric::Requester;
use sim::timed::{ns, TimedFabric};
use sim::Time;

#[cfg(test)]
use super::command::Status;
use super::command::{Command, Completion};
use super::regs;

mod driver;
pub use driver::{DriverLog, NvmeDriver};

/// Where a queue pair's memory is: the CPU's addresses (to store SQ entries and poll the
/// CQ) and the controller's (bus addresses from the DMA API, for Create I/O SQ/CQ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueMemory {
    pub sq_cpu: u64,
    pub sq_dev: u64,
    pub cq_cpu: u64,
    pub cq_dev: u64,
}

/// A buffer as the CPU and as the controller address it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub cpu: u64,
    pub dev: u64,
    pub bytes: u64,
}

/// One queue pair's driver-side state.
#[derive(Clone, Debug)]
pub struct QueuePair {
    pub qid: u16,
    pub entries: u16,
    pub mem: QueueMemory,
    sq_tail: u16,
    /// The controller's SQ head, as the last completion reported it.
    sq_head: u16,
    cq_head: u16,
    phase: bool,
    sq_doorbell: u64,
    cq_doorbell: u64,
    next_cid: u16,
    /// Commands submitted and not yet completed, by command ID.
    outstanding: BTreeMap<u16, Time>,
}

impl QueuePair {
    /// A queue pair of `entries` (SQ and CQ alike) whose doorbells are in the BAR0 the CPU
    /// reaches at `bar0`, with doorbell stride `dstrd` (CAP.DSTRD).
    pub fn new(qid: u16, entries: u16, mem: QueueMemory, bar0: u64, dstrd: u8) -> QueuePair {
        QueuePair {
            qid,
            entries,
            mem,
            sq_tail: 0,
            sq_head: 0,
            cq_head: 0,
            phase: true,
            sq_doorbell: bar0 + regs::doorbell(qid, false, dstrd),
            cq_doorbell: bar0 + regs::doorbell(qid, true, dstrd),
            next_cid: 0,
            outstanding: BTreeMap::new(),
        }
    }

    /// Whether the SQ has no free slot (one is always left empty). Commands in flight
    /// count too, so that the CQ (as large as the SQ) can never overflow.
    pub fn is_full(&self) -> bool {
        (self.sq_tail + 1) % self.entries == self.sq_head
            || self.outstanding.len() + 1 >= self.entries as usize
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Places `cmd` (its command ID set here) in the next SQ slot: the CPU address and
    /// bytes to store there. Ring the doorbell with `sq_doorbell` once they have landed.
    pub fn submit(&mut self, mut cmd: Command, now: Time) -> (u64, [u8; 64], u16) {
        let cid = (0..=u16::MAX)
            .map(|i| self.next_cid.wrapping_add(i))
            .find(|c| !self.outstanding.contains_key(c))
            .expect("fewer than 65536 outstanding");
        self.next_cid = cid.wrapping_add(1);
        cmd.cid = cid;
        let at = self.mem.sq_cpu + self.sq_tail as u64 * 64;
        self.sq_tail = (self.sq_tail + 1) % self.entries;
        self.outstanding.insert(cid, now);
        (at, cmd.to_bytes(), cid)
    }

    /// The SQ tail doorbell's CPU address and the value to write.
    pub fn sq_doorbell(&self) -> (u64, u32) {
        (self.sq_doorbell, self.sq_tail as u32)
    }

    /// The CQ head doorbell's CPU address and the value to write.
    pub fn cq_doorbell(&self) -> (u64, u32) {
        (self.cq_doorbell, self.cq_head as u32)
    }

    /// Where the next completion will appear (CPU address).
    pub fn cq_entry(&self) -> u64 {
        self.mem.cq_cpu + self.cq_head as u64 * 16
    }

    /// The phase tag a new entry at the head carries.
    pub fn phase(&self) -> bool {
        self.phase
    }

    /// Takes the entry at the CQ head if its phase tag says it is new: advances the head
    /// (flipping the expected phase on a wrap) and gives the entry with its submit time.
    pub fn take(&mut self, bytes: &[u8; 16]) -> Option<(Completion, Option<Time>)> {
        let e = Completion::from_bytes(bytes);
        if e.phase != self.phase {
            return None;
        }
        self.cq_head = (self.cq_head + 1) % self.entries;
        if self.cq_head == 0 {
            self.phase = !self.phase;
        }
        self.sq_head = e.sq_head;
        let at = self.outstanding.remove(&e.cid);
        Some((e, at))
    }
}

/// PRP1, PRP2 and the PRP list entries for `len` bytes at bus address `buf` with pages of
/// `page` bytes; a list (when more than two pages are touched) goes in `list` (a page-
/// aligned bus address with room for it), chained through its pages' last entries.
/// Returns (prp1, prp2, list entries to store at `list`).
pub fn build_prps(buf: u64, len: u64, page: u64, list: u64) -> (u64, u64, Vec<u64>) {
    let first = len.min(page - buf % page);
    let rest = len - first;
    let next = buf + first;
    if rest == 0 {
        return (buf, 0, Vec::new());
    }
    if rest <= page {
        return (buf, next, Vec::new());
    }
    let pages: Vec<u64> = (0..rest.div_ceil(page)).map(|i| next + i * page).collect();
    let per = page / 8;
    let mut out = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let left = pages.len() - i;
        let slot_in_page = out.len() as u64 % per;
        if left > 1 && slot_in_page == per - 1 {
            // Last entry of a list page: points to the next list page.
            out.push(list + (out.len() as u64 + 1) * 8);
            continue;
        }
        out.push(pages[i]);
        i += 1;
    }
    (buf, list, out)
}

/// One I/O command of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoCmd {
    pub write: bool,
    pub slba: u64,
    pub blocks: u16,
    /// Where its data is in the job's buffer.
    pub buf_offset: u64,
}

/// A closed loop: `cmds` in order on I/O queue `qid`, at most `depth` outstanding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoJob {
    pub qid: u16,
    pub depth: u16,
    pub nsid: u32,
    pub cmds: Vec<IoCmd>,
    pub data: Buffer,
    /// PRP list pages, one 4 KiB page per outstanding command (`depth` pages).
    pub prp_lists: Buffer,
}

/// What the driver does, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum DriverStep {
    /// Reset (CC.EN = 0, CSTS.RDY polled to 0), read CAP and VS, program AQA/ASQ/ACQ,
    /// enable, poll CSTS.RDY to 1.
    Enable,
    /// CC.EN = 0 and CSTS.RDY polled to 0.
    Reset,
    /// An admin command, waited for.
    Admin(Command),
    /// Identify (CNS 0 namespace `nsid`, CNS 1 controller) into the scratch buffer; the
    /// driver keeps the bytes (and the namespace's LBA size).
    Identify {
        cns: u8,
        nsid: u32,
    },
    /// Create I/O CQ then I/O SQ `qid` (polled CQ when `vector` is `None`).
    CreateQueuePair {
        qid: u16,
        entries: u16,
        mem: QueueMemory,
        vector: Option<u16>,
    },
    Io(IoJob),
    /// Adopts I/O queue pair `qid` that another driver created on this controller (the
    /// distributed driver's manager, through its admin queue): no admin command, only the
    /// doorbell stride and the namespace's LBA size the manager learnt.
    AttachQueuePair {
        qid: u16,
        entries: u16,
        mem: QueueMemory,
        dstrd: u8,
        lba_bytes: u64,
    },
    /// A raw MMIO write to BAR0 (a register, a doorbell, an MSI-X entry).
    Mmio {
        offset: u64,
        bytes: u8,
        value: u64,
    },
}

/// The driver's setting: which CPU, where BAR0 is for it, its admin queues and scratch.
#[derive(Clone, Debug, PartialEq)]
pub struct NvmeDriverConfig {
    /// A CPU package of the host that drives (`Requester::Cpu`).
    pub cpu: Requester,
    /// BAR0 as this CPU addresses it (directly, or through an NTB window).
    pub bar0: u64,
    pub admin: QueueMemory,
    pub admin_entries: u16,
    /// 4 KiB for Identify data.
    pub scratch: Buffer,
    /// Between two CSTS reads while waiting for RDY (a driver's sleep).
    pub register_poll: Time,
    /// Between two CQ reads that found nothing.
    pub cq_poll: Time,
    /// The CPU's own cost of an MMIO write, before it enters the hierarchy.
    pub mmio_write: Time,
    /// Spin on the CQ line in the core's cache (woken by the write that invalidates it,
    /// then one miss to read it), instead of re-reading it from memory every `cq_poll`.
    /// Both give the same completion times to within a poll; spinning costs the
    /// simulation one event per completion instead of one read per `cq_poll`.
    pub spin_in_cache: bool,
    /// Ring an SQ doorbell only once the SQ entries stored to RAM have landed (a
    /// conservative driver; real ones rely on `wmb()` and PCIe ordering and do not wait).
    pub wait_for_sq_stores: bool,
}

impl NvmeDriverConfig {
    /// A config with the CPU timing of `cpu`'s platform (`cpu_poll_ns`,
    /// `cpu_mmio_write_ns`) and a register poll every 10 µs.
    pub fn new(
        tf: &TimedFabric,
        cpu: Requester,
        bar0: u64,
        admin: QueueMemory,
        admin_entries: u16,
        scratch: Buffer,
    ) -> NvmeDriverConfig {
        let pt = tf.timing_of(tf.fabric.requester_host(cpu));
        NvmeDriverConfig {
            cpu,
            bar0,
            admin,
            admin_entries,
            scratch,
            register_poll: Time::from_us(10),
            cq_poll: ns(pt.cpu_poll_ns),
            mmio_write: ns(pt.cpu_mmio_write_ns),
            wait_for_sq_stores: false,
            spin_in_cache: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prps_follow_the_offset_rules_and_lists_chain_through_their_last_entry() {
        // One page, with an offset.
        assert_eq!(build_prps(0x1200, 0xe00, 4096, 0x9000), (0x1200, 0, vec![]));
        // Two pages: PRP2 is the second page.
        assert_eq!(
            build_prps(0x1200, 0x1000, 4096, 0x9000),
            (0x1200, 0x2000, vec![])
        );
        // Three pages: a list at PRP2.
        assert_eq!(
            build_prps(0x1000, 0x3000, 4096, 0x9000),
            (0x1000, 0x9000, vec![0x2000, 0x3000])
        );
        // 64-byte pages hold 8 entries: the 8th points to the next list page.
        let (p1, p2, l) = build_prps(0x0, 64 * 11, 64, 0x800);
        assert_eq!((p1, p2), (0, 0x800));
        assert_eq!(l.len(), 11);
        assert_eq!(l[7], 0x840, "chain pointer");
        let data: Vec<u64> = l.iter().copied().filter(|&e| e < 0x800).collect();
        assert_eq!(data, (1..11).map(|i| i * 64).collect::<Vec<_>>());
    }

    #[test]
    fn the_queue_pair_takes_entries_by_phase_and_wraps() {
        let mem = QueueMemory {
            sq_cpu: 0,
            sq_dev: 0,
            cq_cpu: 0x100,
            cq_dev: 0x100,
        };
        let mut q = QueuePair::new(1, 2, mem, 0x8000, 0);
        assert_eq!(q.sq_doorbell().0, 0x8000 + 0x1008);
        assert_eq!(q.cq_doorbell().0, 0x8000 + 0x100C);
        let (_, _, cid) = q.submit(Command::flush(1), Time::ZERO);
        assert!(q.is_full(), "one slot stays empty");
        let e = |phase| Completion {
            dw0: 0,
            sq_head: 1,
            sq_id: 1,
            cid,
            phase,
            status: Status::SUCCESS,
        };
        assert!(q.take(&e(false).to_bytes()).is_none(), "old phase: not new");
        assert!(q.take(&e(true).to_bytes()).is_some());
        assert_eq!(q.cq_entry(), 0x110);
        let (_, _, cid2) = q.submit(Command::flush(1), Time::ZERO);
        let e2 = Completion {
            cid: cid2,
            phase: true,
            ..e(true)
        };
        assert!(q.take(&e2.to_bytes()).is_some());
        assert!(!q.phase(), "wrapped: the next new entries carry phase 0");
        assert_eq!(q.cq_doorbell().1, 0);
    }
}
