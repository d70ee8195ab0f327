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
//!
//! This file holds the controller's state and its event dispatch; the rest is by concern:
//! `params` (what a controller is built from), `registers` (BAR0 registers, doorbells,
//! enable and reset), `dma` (DMA reads and posted writes), `msix` (interrupts),
//! `queues` (arbitration, command dispatch, completions), `io_commands` (Read, Write and
//! Flush: PRPs, data movement, media) and `admin_commands`.

use std::collections::{BTreeMap, VecDeque};

use fabric::PcieNodeId;
use sim::component::Component;
use sim::net::{ComponentId, Delivery, Event};
use sim::timed::{bar_register, TimedFabric};
use sim::timers::Timers;
use sim::Time;

use super::command::{Command, Status};
use super::media::{Media, Namespace};
use super::regs::{self, Cap, Cc};

mod admin_commands;
mod dma;
mod io_commands;
mod msix;
mod params;
mod queues;
mod registers;

pub use params::{Cmb, NvmeError, NvmeParams};

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

    /// Sets a timer for `what`, tagged with this life's epoch.
    fn timer_at(&mut self, tf: &mut TimedFabric, at: Time, me: ComponentId, what: CtrlWork) {
        let t = CtrlTimer {
            epoch: self.epoch,
            what,
        };
        self.timers.at(&mut tf.net, at, me, t);
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
