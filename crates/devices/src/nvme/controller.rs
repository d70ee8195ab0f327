//! The NVMe controller as a simulation component (NVMe 1.3 base semantics), written
//! against bus addresses only.
//!
//! It owns its BAR0 sink: every write there reaches it as `Delivery::Mmio` (registers,
//! doorbells, its MSI-X table), and it keeps the registers as bytes in the BAR's store, so
//! a CPU load routed by the fabric reads the real values. It fetches SQ entries by DMA
//! reads from its own requester ID (wherever the queue is), arbitrates round robin among
//! SQs with work (burst 1), resolves PRPs (PRP lists fetched by DMA), moves data by DMA
//! (MPS/MRRS, nothing across 4 KiB), posts completions with the phase tag, waits when a CQ
//! is full, and raises MSI-X. Every byte goes through the fabric when its TLP lands or its
//! data arrives; a DMA fault fails the command with Data Transfer Error.

use std::collections::{BTreeMap, VecDeque};

use fabric::{Access, NodeKind, PcieNodeId, Request, Requester};
use sim::component::Component;
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::timed::{bar_register, ns, sink_address, TimedFabric};
use sim::timers::Timers;
use sim::Time;

use super::command::{io, Command, Completion, Status};
use super::media::{Media, MediaTiming, Namespace};
use super::regs::{self, Cap, Cc};

mod admin_commands;

/// A controller that cannot be built from its parameters.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NvmeError(pub String);

/// A controller's parameters, from its device's `timing` table (the `nvme_*` keys and the
/// DMA keys), its link and host, and the namespace the caller gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct NvmeParams {
    pub media: MediaTiming,
    /// Controller processing per command (one command at a time).
    pub command: Time,
    /// CC.EN 0 → 1 until CSTS.RDY.
    pub enable: Time,
    /// Queue pairs including the admin pair.
    pub queue_pairs: u16,
    /// Entries of the largest queue (CAP.MQES + 1).
    pub max_queue_entries: u32,
    /// DMA: outstanding reads, read request size, posted write payload (the host's MPS).
    pub max_reads: u32,
    pub mrrs: u32,
    pub mps: u32,
    /// CAP.DSTRD.
    pub dstrd: u8,
    /// Identify Controller: max data transfer 2^mdts pages.
    pub mdts: u8,
    pub vid: u16,
    pub serial: String,
    pub model: String,
    /// Namespace 1: LBA size (512 or 4096) and blocks.
    pub lba_bytes: u64,
    pub blocks: u64,
    /// A Controller Memory Buffer: the function's first memory BAR after BAR0, if its
    /// device (model) gives it one (the P4800X has none, docs/hardware.md §2).
    pub cmb: Option<Cmb>,
}

/// A Controller Memory Buffer holding submission queues (CMBSZ.SQS): the controller
/// reads SQ entries there inside the device, without a PCIe read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cmb {
    pub bar: u8,
    /// Its bus address and size (the whole BAR, CMBLOC.OFST 0).
    pub addr: u64,
    pub bytes: u64,
    /// One internal read of an SQ entry there (the device's `bar_latency_ns`).
    pub access: Time,
}

impl Cmb {
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr && addr.saturating_add(len) <= self.addr + self.bytes
    }
}

impl NvmeParams {
    /// The parameters of the NVMe function `node`, with a namespace of `blocks` of
    /// `lba_bytes`.
    pub fn from_node(
        tf: &TimedFabric,
        node: PcieNodeId,
        lba_bytes: u64,
        blocks: u64,
    ) -> Result<NvmeParams, NvmeError> {
        let topo = &tf.fabric.topo;
        let who = topo.node_label(node);
        let NodeKind::Function { device, .. } = topo.node(node).kind else {
            return Err(NvmeError(format!("{who} is not a device function")));
        };
        let d = &topo.devices[device.index()];
        let t = &d.timing;
        let p = |k: &str| {
            t.get(k)
                .copied()
                .ok_or_else(|| NvmeError(format!("{who} has no timing parameter `{k}`")))
        };
        if lba_bytes != 512 && lba_bytes != 4096 {
            return Err(NvmeError(format!(
                "LBA size {lba_bytes} B: this model offers 512 B or 4 KiB"
            )));
        }
        Ok(NvmeParams {
            media: MediaTiming {
                read: ns(p("nvme_read_ns")?),
                write: ns(p("nvme_write_ns")?),
                read_gbps: p("nvme_read_gbps")?,
                write_gbps: p("nvme_write_gbps")?,
                channels: p("nvme_channels")? as u32,
            },
            command: ns(p("nvme_command_ns")?),
            enable: ns(p("nvme_enable_ns")?),
            // 65,535 I/O queues and the admin pair would be 65,536: a u16 holds one less.
            queue_pairs: p("nvme_queue_pairs")?.min(65535.0) as u16,
            max_queue_entries: p("nvme_max_queue_entries")? as u32,
            max_reads: p("dma_max_reads")? as u32,
            mrrs: p("dma_mrrs_bytes")? as u32,
            mps: topo.host(topo.node(node).host).mps,
            dstrd: 0,
            mdts: 5,
            vid: 0x8086,
            serial: format!("NUDMA{:015}", node),
            model: if d.model.is_empty() {
                d.name.clone()
            } else {
                d.model.clone()
            },
            lba_bytes,
            blocks,
            cmb: match topo.node(node).bars.iter().find(|b| b.index != 0) {
                Some(b) => Some(Cmb {
                    bar: b.index,
                    addr: b.addr,
                    bytes: b.size,
                    access: ns(p("bar_latency_ns")?),
                }),
                None => None,
            },
        })
    }
}

/// What the controller did since its statistics were last reset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvmeStats {
    /// Commands fetched, by (admin queue?, opcode).
    pub commands: BTreeMap<(bool, u8), u64>,
    /// Completions posted (landed in their CQ).
    pub completions: u64,
    /// Completions by error status (success not counted).
    pub errors: BTreeMap<Status, u64>,
    /// Doorbell writes for a queue that does not exist or beyond its size (the spec's
    /// asynchronous "invalid doorbell" event, counted here).
    pub doorbell_errors: u64,
    /// SQ entry fetches that faulted (the entry is lost).
    pub fetch_faults: u64,
    /// DMA pieces (SQ entries, PRP lists, data, completions, MSI-X) that faulted.
    pub dma_faults: u64,
    /// Completion or MSI-X writes that faulted.
    pub completion_faults: u64,
    /// Bytes moved to the host by reads (and Identify), from the host by writes.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Commands fetched per SQ (fairness).
    pub per_sq: BTreeMap<u16, u64>,
    /// SQ entries read from the Controller Memory Buffer (no PCIe read).
    pub cmb_fetches: u64,
    /// Times a completion waited for room in a full CQ.
    pub cq_full_waits: u64,
    /// MSI-X messages sent, and ones held back by a masked vector (pending bit set).
    pub interrupts: u64,
    pub masked_interrupts: u64,
}

#[derive(Clone, Copy, Debug)]
struct Sq {
    base: u64,
    entries: u16,
    head: u16,
    tail: u16,
    cqid: u16,
    /// Entries fetched (or being fetched) and not completed yet.
    inflight: u32,
    /// Being deleted: the Delete I/O SQ command waiting for `inflight` to drain.
    deleting: Option<u32>,
}

#[derive(Clone, Debug)]
struct Cq {
    base: u64,
    entries: u16,
    head: u16,
    tail: u16,
    phase: bool,
    vector: Option<u16>,
    waiting: VecDeque<Done>,
}

#[derive(Clone, Copy, Debug)]
struct Done {
    sqid: u16,
    cid: u16,
    dw0: u32,
    status: Status,
}

/// A command under way.
#[derive(Clone, Debug)]
struct Cmd {
    sqid: u16,
    sqe: Command,
    /// Bytes to move and the data buffer (filled by the media, or by DMA reads).
    len: u64,
    buf: Vec<u8>,
    /// Data segments (bus address, bytes), in buffer order.
    segs: Vec<(u64, u64)>,
    /// PRP list still to fetch: (address, data entries still needed).
    list: Option<(u64, u64)>,
    list_buf: Vec<u8>,
    /// DMA pieces outstanding.
    pending: u32,
    failed: bool,
    to_host: bool,
    dw0: u32,
}

#[derive(Clone, Copy, Debug)]
enum ReadFor {
    Fetch { sqid: u16 },
    List { cmd: u32, off: u32 },
    Data { cmd: u32, off: u64 },
}

#[derive(Clone, Copy, Debug)]
struct PendingRead {
    epoch: u32,
    addr: u64,
    len: u32,
    what: ReadFor,
}

#[derive(Clone, Copy, Debug)]
enum WriteFor {
    Data { cmd: u32 },
    Cqe { cqid: u16 },
    Msi,
}

#[derive(Clone, Debug)]
struct PendingWrite {
    epoch: u32,
    addr: u64,
    data: Vec<u8>,
    what: WriteFor,
}

/// What a controller's timer means; `epoch` is the controller's when it was set, so a
/// reset drops what was under way.
#[derive(Clone, Copy, Debug)]
struct CtrlTimer {
    epoch: u32,
    what: CtrlWork,
}

#[derive(Clone, Copy, Debug)]
enum CtrlWork {
    /// CC.EN was set: the controller is ready.
    Enable,
    /// The command in slot `slot` starts executing.
    Exec(u32),
    /// The media finished slot `slot`'s data.
    Media(u32),
    /// The SQ entry of slot `slot` was read from the controller memory buffer.
    Cmb(u32),
}

/// Free-list slab: stable indices for things in flight.
#[derive(Clone, Debug)]
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    fn insert(&mut self, t: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(t);
                i
            }
            None => {
                self.items.push(Some(t));
                self.items.len() as u32 - 1
            }
        }
    }
    fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.items.get_mut(i as usize)?.as_mut()
    }
    fn remove(&mut self, i: u32) -> Option<T> {
        let t = self.items.get_mut(i as usize)?.take();
        if t.is_some() {
            self.free.push(i);
        }
        t
    }
}

/// The NVMe controller component.
pub struct NvmeController {
    node: PcieNodeId,
    params: NvmeParams,
    cap: Cap,
    cc: Cc,
    csts: u32,
    aqa: u32,
    asq: u64,
    acq: u64,
    intm: u32,
    timers: Timers<CtrlTimer>,
    /// Changes on every reset, so that work of an earlier life is dropped.
    epoch: u32,
    sqs: Vec<Option<Sq>>,
    cqs: Vec<Option<Cq>>,
    /// I/O queues allocated by Set Features (SQs, CQs).
    allocated: (u16, u16),
    rr_next: usize,
    reads_out: u32,
    read_wait: VecDeque<PendingRead>,
    reads: Slab<PendingRead>,
    writes: Slab<PendingWrite>,
    cmds: Slab<Cmd>,
    /// SQ entries being read from the CMB: (SQ, offset in the CMB's BAR).
    cmb_reads: Slab<(u16, u64)>,
    /// The controller's processor: when it is free.
    cpu_free: Time,
    namespace: Namespace,
    media: Media,
    stats: NvmeStats,
}

impl NvmeController {
    /// A controller on function `node`, its registers written into BAR0 (reset state).
    pub fn new(
        tf: &mut TimedFabric,
        node: PcieNodeId,
        params: NvmeParams,
    ) -> Result<NvmeController, NvmeError> {
        let topo = &tf.fabric.topo;
        let who = topo.node_label(node);
        let bar0 = topo
            .node(node)
            .bars
            .iter()
            .find(|b| b.index == 0)
            .ok_or_else(|| NvmeError(format!("{who} has no BAR0")))?;
        let need = regs::MSIX_PBA + (params.queue_pairs as u64).div_ceil(64) * 8;
        if bar0.size < need {
            return Err(NvmeError(format!(
                "{who}: BAR0 of {} B cannot hold the registers, doorbells and MSI-X table ({need} B)",
                bar0.size
            )));
        }
        // This model's BAR0 layout: doorbells from 0x1000 up to the MSI-X table at
        // 0x2000, one vector per queue pair, its pending bits at 0x3000.
        let doorbells_end = regs::doorbell(params.queue_pairs, false, params.dstrd);
        let vectors_end = regs::MSIX_TABLE + params.queue_pairs as u64 * regs::MSIX_ENTRY;
        if doorbells_end > regs::MSIX_TABLE || vectors_end > regs::MSIX_PBA {
            return Err(NvmeError(format!(
                "{who}: {} queue pairs do not fit this model's BAR0 layout (doorbells below \
                 {:#x}, one MSI-X vector each below {:#x}: at most 256 pairs)",
                params.queue_pairs,
                regs::MSIX_TABLE,
                regs::MSIX_PBA
            )));
        }
        if params.queue_pairs < 2 || params.max_queue_entries < 2 {
            return Err(NvmeError(format!(
                "{who}: needs at least 2 queue pairs and 2 entries per queue"
            )));
        }
        let to_units = (params.enable.as_ps().div_ceil(500 * sim::time::PS_PER_MS)).clamp(1, 255);
        let cap = Cap {
            mqes: (params.max_queue_entries.min(65536) - 1) as u16,
            cqr: true,
            to: to_units as u8,
            dstrd: params.dstrd,
            css: 1,
            mpsmin: 0,
            mpsmax: 0,
        };
        let qp = params.queue_pairs as usize;
        let c = NvmeController {
            node,
            cap,
            cc: Cc::default(),
            csts: 0,
            aqa: 0,
            asq: 0,
            acq: 0,
            intm: 0,
            timers: Timers::new(),
            epoch: 0,
            sqs: vec![None; qp],
            cqs: vec![None; qp],
            allocated: (qp as u16 - 1, qp as u16 - 1),
            rr_next: 0,
            reads_out: 0,
            read_wait: VecDeque::new(),
            reads: Slab::default(),
            writes: Slab::default(),
            cmds: Slab::default(),
            cmb_reads: Slab::default(),
            cpu_free: Time::ZERO,
            namespace: Namespace::new(params.lba_bytes, params.blocks),
            media: Media::new(params.media.clone()),
            params,
            stats: NvmeStats::default(),
        };
        // Every MSI-X vector starts masked (MSI-X: vector control bit 0 after reset).
        for v in 0..qp as u64 {
            let at = regs::MSIX_TABLE + v * regs::MSIX_ENTRY + 12;
            tf.fabric.poke_bar(node, 0, at, &1u32.to_le_bytes());
        }
        c.sync_regs(tf);
        Ok(c)
    }

    /// Makes this component (`me`, its id in the `Sim`) the owner of its BAR sink.
    pub fn attach(&self, tf: &mut TimedFabric, me: ComponentId) -> Result<(), NvmeError> {
        let s = tf
            .bar_sink(self.node)
            .ok_or_else(|| NvmeError("the controller's BAR has no sink".into()))?;
        tf.net.set_sink_owner(s, me);
        Ok(())
    }

    pub fn node(&self) -> PcieNodeId {
        self.node
    }

    pub fn params(&self) -> &NvmeParams {
        &self.params
    }

    pub fn stats(&self) -> &NvmeStats {
        &self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = NvmeStats::default();
    }

    /// The namespace's bytes (a debugger's view, for checks).
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// I/O queue pairs this controller can have (queue pairs less the admin pair).
    pub fn io_queue_limit(&self) -> u16 {
        self.params.queue_pairs - 1
    }

    /// Whether any queue other than the admin pair exists.
    fn any_io_queue(&self) -> bool {
        self.sqs.iter().skip(1).any(Option::is_some) || self.cqs.iter().skip(1).any(Option::is_some)
    }

    fn sync_regs(&self, tf: &mut TimedFabric) {
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

    fn mmio(&mut self, tf: &mut TimedFabric, me: ComponentId, offset: u64, bytes: u16, data: u64) {
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

    /// Sets a timer for `what`, tagged with this life's epoch.
    fn timer_at(&mut self, tf: &mut TimedFabric, at: Time, me: ComponentId, what: CtrlWork) {
        let t = CtrlTimer {
            epoch: self.epoch,
            what,
        };
        self.timers.at(&mut tf.net, at, me, t);
    }

    fn enable_done(&mut self, tf: &mut TimedFabric, me: ComponentId) {
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
    fn read(
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

    fn read_arrived(&mut self, tf: &mut TimedFabric, me: ComponentId, tag: u64) {
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

    fn write(
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
    fn post_data(
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

    fn write_landed(&mut self, tf: &mut TimedFabric, me: ComponentId, flow: u32) {
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

    fn msix_entry(&self, tf: &TimedFabric, v: u16) -> (u64, u32, bool) {
        let mut e = [0u8; 16];
        let at = regs::MSIX_TABLE + v as u64 * regs::MSIX_ENTRY;
        tf.fabric.peek_bar(self.node, 0, at, &mut e);
        let addr = u64::from_le_bytes(e[0..8].try_into().expect("8"));
        let data = u32::from_le_bytes(e[8..12].try_into().expect("4"));
        (addr, data, e[12] & 1 == 1)
    }

    fn pending_bit(&self, tf: &mut TimedFabric, v: u16, set: bool) -> bool {
        let at = regs::MSIX_PBA + (v as u64 / 64) * 8;
        let mut b = [0u8; 8];
        tf.fabric.peek_bar(self.node, 0, at, &mut b);
        let mut w = u64::from_le_bytes(b);
        let was = w >> (v % 64) & 1 == 1;
        if set {
            w |= 1 << (v % 64);
        } else {
            w &= !(1 << (v % 64));
        }
        tf.fabric.poke_bar(self.node, 0, at, &w.to_le_bytes());
        was
    }

    fn interrupt(&mut self, tf: &mut TimedFabric, me: ComponentId, v: u16) {
        if v >= self.params.queue_pairs {
            return;
        }
        let (addr, data, masked) = self.msix_entry(tf, v);
        if masked {
            self.stats.masked_interrupts += 1;
            self.pending_bit(tf, v, true);
            return;
        }
        self.stats.interrupts += 1;
        if !self.write(tf, me, addr, data.to_le_bytes().to_vec(), WriteFor::Msi) {
            self.stats.completion_faults += 1;
        }
    }

    fn deliver_pending(&mut self, tf: &mut TimedFabric, me: ComponentId, v: u16) {
        if v >= self.params.queue_pairs {
            return;
        }
        let (_, _, masked) = self.msix_entry(tf, v);
        if !masked && self.pending_bit(tf, v, false) {
            self.interrupt(tf, me, v);
        }
    }

    // ---- arbitration and commands -------------------------------------------------------

    /// Round robin over SQs with entries, one entry each (arbitration burst 1), while
    /// read tags are free.
    fn fetch(&mut self, tf: &mut TimedFabric, me: ComponentId) {
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

    fn cmb_fetched(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let (Some((sqid, off)), Some(c)) = (self.cmb_reads.remove(slot), self.params.cmb) else {
            return;
        };
        let mut b = [0u8; 64];
        tf.fabric.peek_bar(self.node, c.bar, off, &mut b);
        self.stats.cmb_fetches += 1;
        self.fetched(tf, me, sqid, Command::from_bytes(&b));
        self.fetch(tf, me);
    }

    fn fetched(&mut self, tf: &mut TimedFabric, me: ComponentId, sqid: u16, sqe: Command) {
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

    fn execute(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
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

    fn io(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        slot: u32,
        c: &Command,
    ) -> Option<(Status, u32)> {
        if !matches!(c.opcode, io::READ | io::WRITE | io::FLUSH) {
            return Some((Status::INVALID_OPCODE, 0));
        }
        if c.nsid != 1 {
            return Some((Status::INVALID_NAMESPACE, 0));
        }
        if c.opcode == io::FLUSH {
            // Data is durable once written to the media in this model.
            return Some((Status::SUCCESS, 0));
        }
        let slba = c.cdw10() as u64 | (c.cdw11() as u64) << 32;
        let nlb = (c.cdw12() & 0xffff) as u64 + 1;
        let bytes = nlb * self.namespace.lba_bytes();
        if bytes > 4096u64 << self.params.mdts {
            return Some((Status::INVALID_FIELD, 0));
        }
        if !self.namespace.in_range(slba, nlb) {
            return Some((Status::LBA_OUT_OF_RANGE, 0));
        }
        if c.opcode == io::READ {
            // The media first, then the data to the host.
            let now = tf.net.now();
            let at = self.media.access(now, false, bytes);
            let cmd = self.cmds.get_mut(slot).expect("under way");
            cmd.len = bytes;
            self.timer_at(tf, at, me, CtrlWork::Media(slot));
            None
        } else {
            self.start_transfer(tf, me, slot, vec![0; bytes as usize], false)
        }
    }

    /// Resolves the command's PRPs for `buf.len()` bytes, then moves the data: to the
    /// host (`buf` holds it) or from it (into `buf`).
    fn start_transfer(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        slot: u32,
        buf: Vec<u8>,
        to_host: bool,
    ) -> Option<(Status, u32)> {
        let page = self.cc.page_bytes();
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let (prp1, prp2) = (cmd.sqe.prp1, cmd.sqe.prp2);
        let len = buf.len() as u64;
        cmd.len = len;
        cmd.buf = buf;
        cmd.to_host = to_host;
        if prp1 & 3 != 0 {
            return Some((Status::INVALID_PRP_OFFSET, 0));
        }
        let first = len.min(page - prp1 % page);
        cmd.segs = vec![(prp1, first)];
        let rest = len - first;
        if rest == 0 {
        } else if rest <= page {
            if prp2 % page != 0 {
                return Some((Status::INVALID_PRP_OFFSET, 0));
            }
            cmd.segs.push((prp2, rest));
        } else {
            if prp2 & 7 != 0 {
                return Some((Status::INVALID_PRP_OFFSET, 0));
            }
            cmd.list = Some((prp2, rest.div_ceil(page)));
            self.fetch_list(tf, me, slot);
            return None;
        }
        self.move_data(tf, me, slot);
        None
    }

    /// Reads the next PRP list page's entries (its last entry points on when more follow).
    fn fetch_list(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let page = self.cc.page_bytes();
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let Some((addr, left)) = cmd.list else { return };
        let room = (page - addr % page) / 8;
        let n = left.min(room);
        cmd.list_buf = vec![0; n as usize * 8];
        let pieces = self.read(tf, me, addr, n * 8, ReadFor::List { cmd: slot, off: 0 });
        if let Some(cmd) = self.cmds.get_mut(slot) {
            cmd.pending += pieces;
        }
    }

    fn list_arrived(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let page = self.cc.page_bytes();
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let Some((_, left)) = cmd.list else { return };
        let entries: Vec<u64> = cmd
            .list_buf
            .chunks(8)
            .map(|e| u64::from_le_bytes(e.try_into().expect("8")))
            .collect();
        let (data, next) = if (entries.len() as u64) < left {
            (&entries[..entries.len() - 1], entries.last().copied())
        } else {
            (&entries[..], None)
        };
        let mut placed: u64 = cmd.segs.iter().map(|s| s.1).sum();
        for &e in data {
            if e % page != 0 {
                self.complete(tf, me, slot, Status::INVALID_PRP_OFFSET, 0);
                return;
            }
            let n = (cmd.len - placed).min(page);
            cmd.segs.push((e, n));
            placed += n;
        }
        let left = left - data.len() as u64;
        match next {
            Some(p) if left > 0 => {
                if p & 7 != 0 {
                    self.complete(tf, me, slot, Status::INVALID_PRP_OFFSET, 0);
                    return;
                }
                cmd.list = Some((p, left));
                self.fetch_list(tf, me, slot);
            }
            _ => {
                cmd.list = None;
                self.move_data(tf, me, slot);
            }
        }
    }

    fn move_data(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let segs = cmd.segs.clone();
        let mut off = 0u64;
        if cmd.to_host {
            let buf = std::mem::take(&mut cmd.buf);
            let mut pieces = 0;
            let mut failed = false;
            for (addr, len) in segs {
                let mut at = 0;
                while at < len {
                    let a = addr + at;
                    let n = (len - at).min(4096 - (a & 0xfff));
                    let data = &buf[(off + at) as usize..(off + at + n) as usize];
                    let (p, f) = self.post_data(tf, me, a, data, WriteFor::Data { cmd: slot });
                    pieces += p;
                    failed |= f;
                    at += n;
                }
                off += len;
            }
            let cmd = self.cmds.get_mut(slot).expect("under way");
            cmd.buf = buf;
            cmd.pending += pieces;
            cmd.failed |= failed;
            if cmd.pending == 0 {
                self.data_done(tf, me, slot);
            }
        } else {
            for (addr, len) in segs {
                let pieces = self.read(tf, me, addr, len, ReadFor::Data { cmd: slot, off });
                if let Some(cmd) = self.cmds.get_mut(slot) {
                    cmd.pending += pieces;
                }
                off += len;
            }
        }
    }

    /// One DMA piece of command `slot` is done (landed, arrived or failed).
    fn piece_done(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let Some(cmd) = self.cmds.get_mut(slot) else {
            return;
        };
        cmd.pending = cmd.pending.saturating_sub(1);
        if cmd.pending > 0 {
            return;
        }
        if cmd.list.is_some() {
            if cmd.failed {
                self.complete(tf, me, slot, Status::DATA_TRANSFER_ERROR, 0);
            } else {
                self.list_arrived(tf, me, slot);
            }
            return;
        }
        self.data_done(tf, me, slot);
    }

    fn data_done(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let cmd = self.cmds.get_mut(slot).expect("under way");
        if cmd.failed {
            self.complete(tf, me, slot, Status::DATA_TRANSFER_ERROR, 0);
            return;
        }
        if cmd.to_host {
            self.stats.bytes_read += cmd.len;
            let dw0 = cmd.dw0;
            self.complete(tf, me, slot, Status::SUCCESS, dw0);
        } else {
            // A write's data has arrived: to the media, then complete.
            self.stats.bytes_written += cmd.len;
            let now = tf.net.now();
            let at = self.media.access(now, true, cmd.len);
            self.timer_at(tf, at, me, CtrlWork::Media(slot));
        }
    }

    fn media_done(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let Some(cmd) = self.cmds.get_mut(slot) else {
            return;
        };
        let slba = cmd.sqe.cdw10() as u64 | (cmd.sqe.cdw11() as u64) << 32;
        if cmd.sqe.opcode == io::READ {
            let nlb = cmd.len / self.namespace.lba_bytes();
            let data = self.namespace.read(slba, nlb);
            if let Some((s, d)) = self.start_transfer(tf, me, slot, data, true) {
                self.complete(tf, me, slot, s, d);
            }
        } else {
            let buf = std::mem::take(&mut cmd.buf);
            self.namespace.write(slba, &buf);
            self.complete(tf, me, slot, Status::SUCCESS, 0);
        }
    }

    fn complete(
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
    fn retire(&mut self, tf: &mut TimedFabric, me: ComponentId, sqid: u16) {
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
    fn post_waiting(&mut self, tf: &mut TimedFabric, me: ComponentId, cqid: u16) {
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

impl Component<TimedFabric> for NvmeController {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        match ev {
            Event::Timer(key) => {
                let t = self.timers.take(key);
                if t.epoch != self.epoch {
                    return;
                }
                match t.what {
                    CtrlWork::Enable => self.enable_done(tf, me),
                    CtrlWork::Exec(slot) => self.execute(tf, me, slot),
                    CtrlWork::Media(slot) => self.media_done(tf, me, slot),
                    CtrlWork::Cmb(slot) => self.cmb_fetched(tf, me, slot),
                }
            }
            Event::Wake => {}
            Event::Delivery(Delivery::Mmio {
                sink,
                offset,
                bytes,
                data,
            }) => {
                if Some(sink) != tf.bar_sink(self.node) {
                    return;
                }
                let (bar, off) = bar_register(offset);
                if bar == 0 {
                    self.mmio(tf, me, off, bytes, data);
                }
            }
            Event::Delivery(Delivery::ReadData {
                tag, last: true, ..
            }) => self.read_arrived(tf, me, tag),
            Event::Delivery(Delivery::WriteDone { flow, .. }) => self.write_landed(tf, me, flow),
            Event::Delivery(_) => {}
        }
    }
}
