//! A TLP-level model of PCIe and the memory behind it, on the discrete-event engine.
//!
//! A *route* is a list of hops a TLP takes: `Wire` (one direction of a link or an
//! interconnect link: FIFO serialization, propagation latency, and credit-based flow
//! control at the receiver), `Delay` (a switch chip, an NTB translation, a root
//! complex's forwarding), `Iommu` (IOTLB hit or miss), `RootSplit` (a root complex that
//! forwards a peer-to-peer read re-issues it as small reads, with a fixed number of
//! outstanding ones and a minimum gap between them), `MemoryDelay` (what a platform's
//! memory latency matrix adds to an access beyond the modelled hops, request direction
//! only), `Pace` (a bandwidth limit shared by routes without a wire of its own: a CPU
//! node's share of a memory node) and, last, `Sink` (DRAM or device memory: bandwidth,
//! latency, and for reads completions at the read completion boundary).
//! Completions travel the reverse route. Every TLP belongs to a component (a device
//! model, a driver, a CPU agent: see `component`), which is told when its posted writes
//! land and its read data arrives, and which may own sinks (a BAR's registers, an
//! interrupt target) and then hears of every write that reaches them, with address and
//! data. `next_notice` runs the network until something is for a component. Time never
//! comes from the wall clock.

use std::collections::VecDeque;

use crate::engine::Engine;
use crate::pcie::{self, serialize, DLLP_PER_TLP};
use crate::time::Time;
use crate::timers::TimerKey;

pub const CLASS_POSTED: usize = 0;
pub const CLASS_NONPOSTED: usize = 1;
pub const CLASS_COMPLETION: usize = 2;

const NONE: u32 = u32::MAX;

/// Bytes a message takes on a CPU interconnect (QPI/UPI), whose rate counts 8 B of
/// payload per 80-bit flit: a header flit, then the data in whole flits — a read request
/// is one flit, a 64 B line nine (assumption: QPI's packet format; REFERENCE.md gives the
/// link rate only).
pub fn coherent_bytes(payload: u32) -> u32 {
    8 + payload.div_ceil(8) * 8
}

/// One hop of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hop {
    Wire(u32),
    Delay(Time),
    /// IOMMU translation on host `iommu`: IOTLB hit or miss cost.
    Iommu(u32),
    /// A root complex forwarding a read peer-to-peer: split and tag-limited.
    RootSplit(u32),
    /// A delay on the request direction only (completions do not pay it again): the part
    /// of a memory access's latency that the platform's latency matrix adds beyond the
    /// modelled hops, so a read's round trip and a write's landing each see it once.
    MemoryDelay(Time),
    /// A pacer (`Net::add_pacer`): a FIFO bandwidth limit that adds no latency at zero
    /// load; a read reserves the bytes it asks for, a write its payload.
    Pace(u32),
    /// The last hop; `true` when a write may allocate in the LLC (DDIO: the writer's root
    /// is on the memory's own package).
    Sink(u32, bool),
}

/// A component of a simulation: the owner of TLPs, timers and sinks.
pub type ComponentId = u32;

/// One direction of a link.
#[derive(Clone, Debug)]
pub struct Wire {
    pub name: String,
    pub ps_per_kib: u64,
    pub latency: Time,
    /// Credits (TLP headers) the receiver advertises per class; 0 = infinite.
    pub credit_cap: [u16; 3],
    credits: [u16; 3],
    /// Credits on their way back (UpdateFC), as (time, credits), oldest first: taken in
    /// when a TLP next looks, so that a credit costs an event only when a TLP waits.
    returns: [VecDeque<(Time, u16)>; 3],
    /// An `Ev::Credit` wake is scheduled for the class (at most one at a time).
    wake: [bool; 3],
    queues: [VecDeque<u32>; 3],
    free_at: Time,
    /// The opposite direction, which carries this direction's ACK/UpdateFC DLLPs.
    pub reverse: u32,
    /// Whether TLPs pay PCIe framing/DLLP costs here (not on a CPU interconnect).
    pub pcie: bool,
    pub bytes: u64,
    pub payload_bytes: u64,
    pub tlps: u64,
    /// The link is down: a TLP that would start across it fails here (`TlpFailure`).
    pub down: bool,
}

impl Wire {
    /// Takes in the credits of `class` returned by `now`.
    fn absorb_returns(&mut self, class: usize, now: Time) {
        while let Some(&(at, n)) = self.returns[class].front() {
            if at > now {
                break;
            }
            self.returns[class].pop_front();
            self.credits[class] += n;
        }
    }

    /// (bytes, payload bytes) serialized by `now`: what was committed, less the backlog
    /// still queued at the transmitter (payload prorated).
    fn sent_by(&self, now: Time) -> (u64, u64) {
        let backlog_ps = self.free_at.as_ps().saturating_sub(now.as_ps());
        if backlog_ps == 0 || self.ps_per_kib == 0 || self.bytes == 0 {
            return (self.bytes, self.payload_bytes);
        }
        let backlog = (backlog_ps as u128 * 1024 / self.ps_per_kib as u128) as u64;
        let sent = self.bytes.saturating_sub(backlog);
        let payload = (self.payload_bytes as u128 * sent as u128 / self.bytes as u128) as u64;
        (sent, payload)
    }
}

/// Where TLPs end: a memory controller or a device's memory.
#[derive(Clone, Debug)]
pub struct Sink {
    pub name: String,
    /// Service time per KiB (bandwidth).
    pub ps_per_kib: u64,
    pub read_latency: Time,
    pub write_latency: Time,
    /// Read completion boundary: completions carry at most this much.
    pub rcb: u32,
    free_at: Time,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The LLC in front of DRAM, for DDIO and DMA reads that hit.
    pub llc: Option<Llc>,
    /// The component told of every write landing here (a device's registers); NONE: none.
    owner: ComponentId,
    /// One-shot watches on byte ranges (`Net::watch`): a core spinning on a cached line
    /// learns of the write that invalidates it. Few at a time, so a plain list.
    watches: Vec<Watch>,
}

/// A range of a sink someone waits on: (offset, end, component, its timer).
#[derive(Clone, Copy, Debug)]
struct Watch {
    start: u64,
    end: u64,
    component: ComponentId,
    key: TimerKey,
}

/// The part of an LLC that DMA sees: lines DDIO allocated (limited to the DDIO ways) or
/// that are otherwise cached. FIFO replacement stands in for LRU.
#[derive(Clone, Debug)]
pub struct Llc {
    pub capacity_lines: usize,
    pub latency: Time,
    lines: rustc_hash::FxHashSet<u64>,
    order: VecDeque<u64>,
    pub dma_read_hits: u64,
    pub dma_read_misses: u64,
    pub ddio_allocs: u64,
    pub writebacks: u64,
    pub invalidations: u64,
}

impl Llc {
    pub fn new(capacity_bytes: u64, latency: Time) -> Llc {
        Llc {
            capacity_lines: (capacity_bytes / 64) as usize,
            latency,
            lines: Default::default(),
            order: VecDeque::new(),
            dma_read_hits: 0,
            dma_read_misses: 0,
            ddio_allocs: 0,
            writebacks: 0,
            invalidations: 0,
        }
    }

    pub fn contains(&self, line: u64) -> bool {
        self.lines.contains(&line)
    }

    /// Allocates a line; returns how many lines were evicted (written back to DRAM).
    fn allocate(&mut self, line: u64) -> u64 {
        if self.capacity_lines == 0 || !self.lines.insert(line) {
            return 0;
        }
        self.order.push_back(line);
        self.ddio_allocs += 1;
        let mut evicted = 0;
        while self.lines.len() > self.capacity_lines {
            match self.order.pop_front() {
                Some(old) if self.lines.remove(&old) => evicted += 1,
                Some(_) => {}
                None => break,
            }
        }
        self.writebacks += evicted;
        evicted
    }

    fn invalidate(&mut self, line: u64) {
        if self.lines.remove(&line) {
            self.invalidations += 1;
        }
    }

    /// Evicts the oldest DDIO line (a CPU fill took its way); true if there was one.
    fn evict_oldest(&mut self) -> bool {
        while let Some(old) = self.order.pop_front() {
            if self.lines.remove(&old) {
                self.writebacks += 1;
                return true;
            }
        }
        false
    }
}

/// A root complex's peer-to-peer read splitter: it re-issues each forwarded read as
/// `split`-byte reads, at most `tags` outstanding and at most one per `issue_gap` (the
/// root's peer-to-peer path handles one re-issue at a time).
#[derive(Clone, Debug)]
pub struct Splitter {
    pub name: String,
    pub split: u32,
    pub tags: u32,
    pub issue_gap: Time,
    in_use: u32,
    next_issue: Time,
    wake_pending: bool,
    waiting: VecDeque<u32>,
}

/// A bandwidth limit without a place of its own (a CPU node's share of a memory node):
/// TLPs pass in FIFO order, each taking its bytes' time at the rate; one that finds it
/// free passes at once, so it shapes rate, not zero-load latency.
#[derive(Clone, Debug)]
pub struct Pacer {
    pub name: String,
    pub ps_per_kib: u64,
    free_at: Time,
    pub bytes: u64,
}

/// An IOMMU's translation cache.
#[derive(Clone, Debug)]
pub struct Iotlb {
    pub hit: Time,
    pub miss: Time,
    /// Cached translations in FIFO order (a ring), and the same keys as a set so that a
    /// lookup per TLP does not scan a large IOTLB.
    entries: Vec<u64>,
    present: rustc_hash::FxHashSet<u64>,
    next: usize,
    pub hits: u64,
    pub misses: u64,
}

#[derive(Clone, Debug)]
struct Route {
    hops: Vec<Hop>,
    /// The reverse route (completions), without the sink.
    reverse: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Write,
    Read,
    Completion,
}

#[derive(Clone, Copy, Debug)]
struct Tlp {
    kind: Kind,
    payload: u32,
    wire_bytes: u32,
    route: u32,
    pos: u16,
    /// The route ends here for this TLP (a sub-read's completions stop at the root).
    stop: u16,
    held: u32,
    /// The component that sent it (told of its landing or its data).
    owner: ComponentId,
    /// Inline data of a small write (a doorbell, an MSI): up to 8 bytes, little-endian.
    data: u64,
    /// A CPU cache-line miss or write-back: served by DRAM, never by DDIO ways.
    cpu: bool,
    /// The sender wants to hear when the read's data is taken from memory.
    sample: bool,
    /// Read request this TLP belongs to (reads and completions).
    req: u32,
    /// For a split sub-read: the parent request; NONE otherwise.
    parent: u32,
    flow: u32,
    iotlb_key: u64,
    /// Address at the target (for cache lines in the LLC).
    target: u64,
    /// An Unsupported Request completion: a header only, no data, though `payload`
    /// counts the bytes of the request it completes.
    ur: bool,
    /// TLPs this one stands for: more than one for a train (`Net::send_write_train`),
    /// whose `payload` and `wire_bytes` are the sums over its TLPs.
    count: u16,
    /// Payload and PCIe wire bytes of each of a train's TLPs but the last.
    unit: u32,
    unit_wire: u32,
    /// How long after this event (the train's first TLP reaching the hop) its last TLP
    /// reaches it; zero for one TLP.
    spread: Time,
}

impl Tlp {
    /// Payload of a train's last TLP.
    fn last_payload(&self) -> u32 {
        self.payload - (self.count as u32 - 1) * self.unit
    }

    /// Bytes of the first and of the last TLP, and of all, on a wire.
    fn wire_sizes(&self, pcie: bool) -> (u32, u32, u32) {
        let n = self.count as u32;
        if n == 1 {
            let b = match (pcie, self.kind) {
                (true, _) => self.wire_bytes,
                (false, Kind::Read) => coherent_bytes(0),
                (false, _) => coherent_bytes(self.payload),
            };
            (b, b, b)
        } else if pcie {
            let last = self.wire_bytes - (n - 1) * self.unit_wire;
            (self.unit_wire, last, self.wire_bytes)
        } else if self.kind == Kind::Read {
            (coherent_bytes(0), coherent_bytes(0), coherent_bytes(0))
        } else {
            let (u, l) = (
                coherent_bytes(self.unit),
                coherent_bytes(self.last_payload()),
            );
            (u, l, (n - 1) * u + l)
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct ReadReq {
    owner: ComponentId,
    flow: u32,
    tag: u64,
    remaining: u32,
    /// Route of the original read (completions return on its reverse).
    route: u32,
    /// Where a split's completions rejoin the reverse route, and the splitter.
    rejoin: u16,
    splitter: u32,
    /// For a split sub-read: the request it was split from; NONE otherwise.
    parent: u32,
    addr64: bool,
    /// When it was issued (its completion timeout runs from here).
    issued: Time,
    /// How it failed so far: `OK`, `FAILED_UR` or `FAILED_TIMEOUT` (the worst wins).
    failed: u8,
    /// Bytes whose completions were lost (they time out).
    lost: u32,
}

const OK: u8 = 0;
const FAILED_UR: u8 = 1;
const FAILED_TIMEOUT: u8 = 2;

/// How a TLP failed on a dead link (`Wire::down`), as its owner learns it from
/// `Net::delivery_failure` while handling the delivery it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlpFailure {
    /// A posted write met a dead link and was dropped there. PCIe tells the requester
    /// nothing; the `WriteDone` that carries this is the simulation's bookkeeping (the
    /// write is over), and its bytes must not be stored.
    Dropped,
    /// A read request met a dead link: the port before it answered Unsupported Request,
    /// a completion without data that travelled back from there. The requester fills
    /// the read with all-ones.
    Unsupported,
    /// Completions of the read were lost on a dead link (the completer crashed, a cable
    /// died under them): the requester gave up after its completion timeout and
    /// completes the read as UR with all-ones.
    CompletionTimeout,
}

/// TLPs that met dead links, over the whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailureCounts {
    pub writes_dropped: u64,
    /// Read requests answered with Unsupported Request at a dead link.
    pub reads_unsupported: u64,
    /// Completion TLPs lost on a dead link.
    pub completions_lost: u64,
    /// Reads completed by their completion timeout.
    pub reads_timed_out: u64,
}

/// One request to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issue {
    pub route: u32,
    /// The component that sends it and hears of it.
    pub owner: ComponentId,
    /// Tags the request in the owner's deliveries (the owner's own numbering).
    pub flow: u32,
    pub bytes: u32,
    /// Whether the address needs a 4-DW header (above 4 GiB).
    pub addr64: bool,
    /// Names the page for an IOMMU on the way (requester and page).
    pub iotlb_key: u64,
    /// Address at the target (a RAM node offset or a BAR offset): cache lines in an LLC,
    /// and the register a write to an owned sink hits.
    pub target: u64,
    /// Inline data of a small write (≤ 8 bytes, little-endian), for an owned sink.
    pub data: u64,
    /// A CPU cache-line miss or write-back (DRAM only, never the DDIO ways).
    pub cpu: bool,
    /// For a read: tell the owner `Delivery::ReadServed` when memory serves it, so that
    /// it can take the bytes as they were then (a poll), not when the data arrives.
    pub sample: bool,
}

impl Issue {
    /// A device request: no inline data.
    pub fn new(route: u32, owner: ComponentId, flow: u32, bytes: u32, target: u64) -> Issue {
        Issue {
            route,
            owner,
            flow,
            bytes,
            addr64: false,
            iotlb_key: 0,
            target,
            data: 0,
            cpu: false,
            sample: false,
        }
    }
}

/// What a component is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// A posted write it sent became visible at its target.
    WriteDone { flow: u32, bytes: u32 },
    /// Read data arrived at the requester; `last` when the request is complete.
    ReadData {
        flow: u32,
        tag: u64,
        bytes: u32,
        last: bool,
    },
    /// Memory served the read `tag` (asked for with `Issue::sample`): its bytes are as
    /// they are now; the data is on its way back.
    ReadServed { flow: u32, tag: u64 },
    /// A write reached a sink this component owns: `offset` at the target (a BAR offset),
    /// `bytes` long, with its first 8 bytes of data inline (doorbells, MSI data).
    Mmio {
        sink: u32,
        offset: u64,
        /// At most 4 KiB (one TLP); u16 keeps events small.
        bytes: u16,
        data: u64,
    },
}

/// What reaches a component: a delivery, one of its timers (`timers::Timers` tells what
/// it means), or a wake-up from whoever runs the simulation (`Net::wake_at`: start now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Delivery(Delivery),
    Timer(TimerKey),
    Wake,
}

/// What `next_notice` stops for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    To(ComponentId, Event),
    /// A horizon set with `set_horizon` was reached (its time is now).
    Horizon(Time),
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Hop(u32),
    Credit(u32, u8),
    Deliver(ComponentId, Delivery),
    /// A delivery that stands for a failure (see `TlpFailure`).
    DeliverFailed(ComponentId, Delivery, TlpFailure),
    Timer(ComponentId, TimerKey),
    Wake(ComponentId),
    /// A splitter's issue gap has passed.
    Splitter(u32),
    Horizon,
}

/// Counters a hardware engineer would read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// (wire name, bytes on the wire incl. overhead, payload bytes, TLPs).
    pub wires: Vec<(String, u64, u64, u64)>,
    /// (sink name, bytes read, bytes written).
    pub sinks: Vec<(String, u64, u64)>,
    pub iotlb_hits: u64,
    pub iotlb_misses: u64,
    /// (sink name, DMA read LLC hits, misses, DDIO allocations, write-backs, invalidations)
    pub llc: Vec<(String, u64, u64, u64, u64, u64)>,
}

pub struct Net {
    engine: Engine<Ev>,
    wires: Vec<Wire>,
    sinks: Vec<Sink>,
    splitters: Vec<Splitter>,
    iotlbs: Vec<Iotlb>,
    pacers: Vec<Pacer>,
    routes: Vec<Route>,
    tlps: Vec<Tlp>,
    free_tlps: Vec<u32>,
    reads: Vec<ReadReq>,
    free_reads: Vec<u32>,
    /// Credit update latency added to a wire's propagation for the UpdateFC DLLP.
    fc_extra: Time,
    /// How long a requester waits for lost completions before giving a read up as UR.
    completion_timeout: Time,
    /// The failure the delivery being handed out stands for (`delivery_failure`).
    failure: Option<TlpFailure>,
    failures: FailureCounts,
    /// Whether `send_write_train` may send a multi-TLP write as one train (else the
    /// caller sends it TLP by TLP).
    trains: bool,
}

impl Net {
    pub fn new(seed: u64) -> Net {
        Net {
            engine: Engine::with_capacity(seed, 1 << 12),
            wires: Vec::new(),
            sinks: Vec::new(),
            splitters: Vec::new(),
            iotlbs: Vec::new(),
            pacers: Vec::new(),
            routes: Vec::new(),
            tlps: Vec::new(),
            free_tlps: Vec::new(),
            reads: Vec::new(),
            free_reads: Vec::new(),
            fc_extra: Time::from_ps(2_000),
            // A bare net's stand-in; `TimedFabric` sets the platform's
            // `completion_timeout_ns`.
            completion_timeout: Time::from_ps(50_000_000_000),
            failure: None,
            failures: FailureCounts::default(),
            trains: true,
        }
    }

    /// Turns TLP trains on or off (on by default): off, every TLP of a DMA is simulated
    /// on its own, the reference the trains are tested against.
    pub fn set_trains(&mut self, on: bool) {
        self.trains = on;
    }

    pub fn trains(&self) -> bool {
        self.trains
    }

    pub fn now(&self) -> Time {
        self.engine.now()
    }

    /// Takes a wire (one direction of a link) down or up. A TLP reaching a dead wire
    /// fails there: a posted write is dropped, a read request is answered with
    /// Unsupported Request from that point, a completion is lost (its read times out).
    /// TLPs already on the wire arrive.
    pub fn set_wire_down(&mut self, wire: u32, down: bool) {
        self.wires[wire as usize].down = down;
        if down {
            // TLPs waiting at the port for credits meet the dead link now.
            for class in 0..3 {
                while let Some(t) = self.wires[wire as usize].queues[class].pop_front() {
                    self.dead_wire(t);
                }
            }
        }
    }

    pub fn set_completion_timeout(&mut self, t: Time) {
        self.completion_timeout = t;
    }

    pub fn completion_timeout(&self) -> Time {
        self.completion_timeout
    }

    /// While a component handles a delivery: the failure it stands for, `None` for a
    /// write that landed or read data that arrived.
    pub fn delivery_failure(&self) -> Option<TlpFailure> {
        self.failure
    }

    /// TLPs that met dead links so far.
    pub fn failures(&self) -> FailureCounts {
        self.failures
    }

    /// Adds both directions of a link; returns (forward, reverse) wire ids.
    pub fn add_link(
        &mut self,
        name: &str,
        ps_per_kib: u64,
        latency: Time,
        credits: [u16; 3],
        pcie: bool,
    ) -> (u32, u32) {
        let a = self.wires.len() as u32;
        for (i, dir) in ["→", "←"].iter().enumerate() {
            self.wires.push(Wire {
                name: format!("{name} {dir}"),
                ps_per_kib,
                latency,
                credit_cap: credits,
                credits,
                returns: Default::default(),
                wake: [false; 3],
                queues: Default::default(),
                free_at: Time::ZERO,
                reverse: if i == 0 { a + 1 } else { a },
                pcie,
                bytes: 0,
                payload_bytes: 0,
                tlps: 0,
                down: false,
            });
        }
        (a, a + 1)
    }

    pub fn set_credits(&mut self, wire: u32, credits: [u16; 3]) {
        let w = &mut self.wires[wire as usize];
        w.credit_cap = credits;
        w.credits = credits;
        w.returns = Default::default();
    }

    pub fn add_sink(
        &mut self,
        name: &str,
        gbps: f64,
        read_latency: Time,
        write_latency: Time,
        rcb: u32,
    ) -> u32 {
        self.sinks.push(Sink {
            name: name.to_string(),
            ps_per_kib: pcie::ps_per_kib_at(gbps),
            read_latency,
            write_latency,
            rcb: rcb.max(1),
            free_at: Time::ZERO,
            bytes_read: 0,
            bytes_written: 0,
            llc: None,
            owner: NONE,
            watches: Vec::new(),
        });
        self.sinks.len() as u32 - 1
    }

    /// Puts an LLC with `capacity_bytes` of DMA-visible lines in front of a sink.
    pub fn set_llc(&mut self, sink: u32, capacity_bytes: u64, latency: Time) {
        self.sinks[sink as usize].llc = Some(Llc::new(capacity_bytes, latency));
    }

    pub fn sink(&self, sink: u32) -> &Sink {
        &self.sinks[sink as usize]
    }

    pub fn sink_mut(&mut self, sink: u32) -> &mut Sink {
        &mut self.sinks[sink as usize]
    }

    /// Tells `component` (its timer `key`, once) when a write lands on any byte of
    /// `[offset, offset + bytes)` of `sink` — what a core spinning on a line in its own
    /// cache sees: nothing until a write invalidates the line. The caller then reads the
    /// line (the miss) as any poll does. Components set it with `Timers::on_write`.
    pub(crate) fn watch(
        &mut self,
        sink: u32,
        offset: u64,
        bytes: u64,
        component: ComponentId,
        key: TimerKey,
    ) {
        self.sinks[sink as usize].watches.push(Watch {
            start: offset,
            end: offset.saturating_add(bytes),
            component,
            key,
        });
    }

    pub fn set_sink_owner(&mut self, sink: u32, component: ComponentId) {
        self.sinks[sink as usize].owner = component;
    }

    pub fn add_splitter(&mut self, name: &str, split: u32, tags: u32, issue_gap: Time) -> u32 {
        self.splitters.push(Splitter {
            name: name.to_string(),
            split: split.max(1),
            tags: tags.max(1),
            issue_gap,
            in_use: 0,
            next_issue: Time::ZERO,
            wake_pending: false,
            waiting: VecDeque::new(),
        });
        self.splitters.len() as u32 - 1
    }

    pub fn add_iotlb(&mut self, entries: usize, hit: Time, miss: Time) -> u32 {
        self.iotlbs.push(Iotlb {
            hit,
            miss,
            entries: vec![u64::MAX; entries.max(1)],
            present: Default::default(),
            next: 0,
            hits: 0,
            misses: 0,
        });
        self.iotlbs.len() as u32 - 1
    }

    /// Adds a pacer of `gbps` (see `Hop::Pace`).
    pub fn add_pacer(&mut self, name: &str, gbps: f64) -> u32 {
        self.pacers.push(Pacer {
            name: name.to_string(),
            ps_per_kib: pcie::ps_per_kib_at(gbps),
            free_at: Time::ZERO,
            bytes: 0,
        });
        self.pacers.len() as u32 - 1
    }

    pub fn pacer(&self, p: u32) -> &Pacer {
        &self.pacers[p as usize]
    }

    /// Registers a route (request direction, ending in a sink) and its reverse.
    pub fn add_route(&mut self, hops: Vec<Hop>) -> u32 {
        let id = self.routes.len() as u32;
        let mut rev: Vec<Hop> = hops
            .iter()
            .rev()
            .filter(|h| !matches!(h, Hop::Sink(..)))
            .map(|h| match *h {
                Hop::Wire(w) => Hop::Wire(self.wires[w as usize].reverse),
                // Zero delays keep the reverse route aligned hop for hop (split reads
                // rejoin it by index).
                Hop::RootSplit(_) | Hop::Iommu(_) | Hop::MemoryDelay(_) | Hop::Pace(_) => {
                    Hop::Delay(Time::ZERO)
                }
                other => other,
            })
            .collect();
        rev.shrink_to_fit();
        self.routes.push(Route {
            hops,
            reverse: id + 1,
        });
        self.routes.push(Route {
            hops: rev,
            reverse: id,
        });
        id
    }

    pub fn wire(&self, w: u32) -> &Wire {
        &self.wires[w as usize]
    }

    pub fn reverse_route(&self, route: u32) -> u32 {
        self.routes[route as usize].reverse
    }

    pub fn iotlb_hit(&self, i: u32) -> Time {
        self.iotlbs[i as usize].hit
    }

    /// An IOTLB's hit and miss costs and its entries.
    pub fn iotlb_shape(&self, i: u32) -> (Time, Time, usize) {
        let t = &self.iotlbs[i as usize];
        (t.hit, t.miss, t.entries.len())
    }

    pub fn fc_extra(&self) -> Time {
        self.fc_extra
    }

    /// Sets the credit-update latency (the platform's `fc_update_ns`).
    pub fn set_fc_extra(&mut self, t: Time) {
        self.fc_extra = t;
    }

    /// (re-issue size, tags, minimum gap between re-issues) of a splitter.
    pub fn splitter_shape(&self, s: u32) -> (u32, u32, Time) {
        let sp = &self.splitters[s as usize];
        (sp.split, sp.tags, sp.issue_gap)
    }

    /// Latency of a write landing in a sink: the LLC's for a DDIO write, else the sink's.
    pub fn sink_write_latency(&self, s: u32, ddio: bool) -> Time {
        let sink = &self.sinks[s as usize];
        match (&sink.llc, ddio) {
            (Some(l), true) if l.capacity_lines > 0 => l.latency,
            _ => sink.write_latency,
        }
    }

    pub fn route_hops(&self, route: u32) -> &[Hop] {
        &self.routes[route as usize].hops
    }

    fn alloc_tlp(&mut self, t: Tlp) -> u32 {
        match self.free_tlps.pop() {
            Some(i) => {
                self.tlps[i as usize] = t;
                i
            }
            None => {
                self.tlps.push(t);
                self.tlps.len() as u32 - 1
            }
        }
    }

    fn alloc_read(&mut self, r: ReadReq) -> u32 {
        match self.free_reads.pop() {
            Some(i) => {
                self.reads[i as usize] = r;
                i
            }
            None => {
                self.reads.push(r);
                self.reads.len() as u32 - 1
            }
        }
    }

    /// Injects a posted write now.
    pub fn send_write(&mut self, i: Issue) {
        let wire_bytes = pcie::wire_bytes(i.bytes, false, i.addr64);
        self.inject_write(&i, wire_bytes, 1, i.bytes, 0);
    }

    /// A posted write TLP (or a train of `count`, each `unit` bytes and `unit_wire` wire
    /// bytes but the last) from `i`, sent to its first hop.
    fn inject_write(&mut self, i: &Issue, wire_bytes: u32, count: u16, unit: u32, unit_wire: u32) {
        let t = self.alloc_tlp(Tlp {
            kind: Kind::Write,
            payload: i.bytes,
            wire_bytes,
            route: i.route,
            pos: 0,
            stop: u16::MAX,
            held: NONE,
            owner: i.owner,
            data: i.data,
            cpu: i.cpu,
            sample: i.sample,
            req: NONE,
            parent: NONE,
            flow: i.flow,
            iotlb_key: i.iotlb_key,
            target: i.target,
            ur: false,
            count,
            unit,
            unit_wire,
            spread: Time::ZERO,
        });
        self.hop(t);
    }

    /// Injects a posted write of `i.bytes` cut into TLPs of `tlp_bytes` (the last one
    /// shorter) as one *train*: one event per hop for all its TLPs, one `WriteDone` for
    /// all its bytes when the last lands. At each wire the train takes its TLPs' credits
    /// together and reserves the wire for their serialization back to back, its first TLP
    /// leaving as a lone TLP would and its last no earlier than it arrived plus its own
    /// serialization, so that a train pipelines across hops as its TLPs do and keeps FIFO
    /// order with other traffic. Exact while nothing else joins a wire mid-train and the
    /// TLPs reach each wire evenly spaced; another TLP arriving while a train crosses waits
    /// for the whole train (TLP by TLP it would slot in between). Returns false, sending
    /// nothing, when trains are off or the route cannot carry this one as a train (a wire
    /// whose receiver has fewer posted credits than the train has TLPs, or a sink whose
    /// owner hears of each write): send it TLP by TLP then.
    pub fn send_write_train(&mut self, i: Issue, tlp_bytes: u32) -> bool {
        let unit = tlp_bytes.max(1);
        let count = i.bytes.div_ceil(unit).max(1);
        if !self.trains || count > u16::MAX as u32 || !self.train_fits(i.route, count) {
            return false;
        }
        let last = i.bytes - (count - 1) * unit;
        let unit_wire = pcie::wire_bytes(unit, false, i.addr64);
        let wire_bytes = (count - 1) * unit_wire + pcie::wire_bytes(last, false, i.addr64);
        self.inject_write(&i, wire_bytes, count as u16, unit, unit_wire);
        true
    }

    /// Whether a write train of `count` TLPs can take `route`: every wire is a PCIe link
    /// whose receiver holds that many posted headers, and the sink has no owner. A CPU
    /// interconnect (QPI/UPI) is refused: cores' line-sized misses interleave with DMA
    /// there all the time, so a train would hold them back (measured: `ioctopus.nvme_upi`'s
    /// STREAM lost half its bandwidth and UPI a third of its utilisation with trains).
    fn train_fits(&self, route: u32, count: u32) -> bool {
        self.routes[route as usize].hops.iter().all(|h| match *h {
            Hop::Wire(w) => {
                let wire = &self.wires[w as usize];
                let cap = wire.credit_cap[CLASS_POSTED] as u32;
                wire.pcie && (cap == 0 || cap >= count)
            }
            Hop::Sink(s, _) => self.sinks[s as usize].owner == NONE,
            _ => true,
        })
    }

    /// Injects a read request now; data comes back as `Delivery::ReadData` with `tag`.
    pub fn send_read(&mut self, i: Issue, tag: u64) {
        let req = self.alloc_read(ReadReq {
            owner: i.owner,
            flow: i.flow,
            tag,
            remaining: i.bytes,
            route: i.route,
            rejoin: 0,
            splitter: NONE,
            parent: NONE,
            addr64: i.addr64,
            issued: self.engine.now(),
            failed: OK,
            lost: 0,
        });
        let t = self.alloc_tlp(Tlp {
            kind: Kind::Read,
            payload: i.bytes,
            wire_bytes: pcie::wire_bytes(0, false, i.addr64),
            route: i.route,
            pos: 0,
            stop: u16::MAX,
            held: NONE,
            owner: i.owner,
            data: 0,
            cpu: i.cpu,
            sample: i.sample,
            req,
            parent: NONE,
            flow: i.flow,
            iotlb_key: i.iotlb_key,
            target: i.target,
            ur: false,
            count: 1,
            unit: i.bytes,
            unit_wire: 0,
            spread: Time::ZERO,
        });
        self.hop(t);
    }

    /// Tells `component` of its timer `key` at `at` (not before now). Components set
    /// timers with `Timers::at`, which keeps what each means.
    pub(crate) fn timer_at(&mut self, at: Time, component: ComponentId, key: TimerKey) {
        let at = at.max(self.now());
        self.engine
            .schedule_at(at, Ev::Timer(component, key))
            .expect("not in the past");
    }

    /// Wakes `component` at `at` (not before now) with `Event::Wake`: how whoever runs a
    /// simulation starts a component.
    pub fn wake_at(&mut self, at: Time, component: ComponentId) {
        let at = at.max(self.now());
        self.engine
            .schedule_at(at, Ev::Wake(component))
            .expect("not in the past");
    }

    /// Makes `next_notice` return `Notice::Horizon(at)` when the clock reaches `at`.
    pub fn set_horizon(&mut self, at: Time) {
        let at = at.max(self.now());
        self.engine
            .schedule_at(at, Ev::Horizon)
            .expect("not in the past");
    }

    /// `n` credits of `wire`'s receiver are freed now; they are back at the transmitter
    /// after the UpdateFC's trip. An event wakes the transmitter then only if a TLP waits.
    fn release_credit(&mut self, wire: u32, class: usize, n: u16) {
        if wire == NONE || self.wires[wire as usize].credit_cap[class] == 0 {
            return;
        }
        let w = &mut self.wires[wire as usize];
        let at = self.engine.now() + w.latency + self.fc_extra;
        w.returns[class].push_back((at, n));
        // Returns are in time order: a pending wake comes no later than this one.
        if !w.queues[class].is_empty() && !w.wake[class] {
            w.wake[class] = true;
            self.engine
                .schedule_at(at, Ev::Credit(wire, class as u8))
                .expect("future");
        }
    }

    /// Sends the TLPs waiting at `w` for credits of `class` that now have them; if some
    /// still wait, wakes again when the next credits return.
    fn pump_credits(&mut self, w: u32, class: usize) {
        let now = self.now();
        loop {
            let wire = &mut self.wires[w as usize];
            wire.absorb_returns(class, now);
            let Some(&next) = wire.queues[class].front() else {
                return;
            };
            let need = self.tlps[next as usize].count;
            if wire.credits[class] < need {
                if let (Some(&(at, _)), false) = (wire.returns[class].front(), wire.wake[class]) {
                    wire.wake[class] = true;
                    self.engine
                        .schedule_at(at, Ev::Credit(w, class as u8))
                        .expect("future");
                }
                return;
            }
            wire.queues[class].pop_front();
            wire.credits[class] -= need;
            self.transmit(next, w);
        }
    }

    fn class_of(k: Kind) -> usize {
        match k {
            Kind::Write => CLASS_POSTED,
            Kind::Read => CLASS_NONPOSTED,
            Kind::Completion => CLASS_COMPLETION,
        }
    }

    /// Starts a TLP on a wire now (credit already taken).
    fn transmit(&mut self, t: u32, w: u32) {
        let now = self.now();
        let tlp = self.tlps[t as usize];
        let class = Self::class_of(tlp.kind);
        let held = tlp.held;
        let wire = &mut self.wires[w as usize];
        let start = now.max(wire.free_at);
        let (first, last, bytes) = tlp.wire_sizes(wire.pcie);
        let first_end = start + serialize(first, wire.ps_per_kib);
        // A train's TLPs follow back to back; its last cannot leave before it arrived.
        let end = if tlp.count == 1 {
            first_end
        } else {
            (start + serialize(bytes, wire.ps_per_kib))
                .max(now + tlp.spread + serialize(last, wire.ps_per_kib))
        };
        wire.free_at = end;
        wire.bytes += bytes as u64;
        wire.tlps += tlp.count as u64;
        if tlp.kind != Kind::Read && !tlp.ur {
            wire.payload_bytes += tlp.payload as u64;
        }
        let arrive = first_end + wire.latency;
        let (pcie, rev) = (wire.pcie, wire.reverse);
        if pcie {
            let acks = DLLP_PER_TLP * tlp.count as u32;
            let r = &mut self.wires[rev as usize];
            r.free_at = r.free_at.max(now) + serialize(acks, r.ps_per_kib);
            r.bytes += acks as u64;
        }
        // Leaving the previous receiver's buffer frees its credits.
        self.release_credit(held, class, tlp.count);
        let tl = &mut self.tlps[t as usize];
        tl.held = w;
        tl.pos += 1;
        tl.spread = end - first_end;
        // Fixed delays right after the wire (a switch, an NTB, a root's forwarding) hold
        // no state: the TLP goes on to the hop behind them at the same time, one event.
        let arrive = arrive + self.skip_delays(t);
        self.engine.schedule_at(arrive, Ev::Hop(t)).expect("future");
    }

    /// Steps a TLP over the `Delay`/`MemoryDelay` hops at its position; their sum.
    fn skip_delays(&mut self, t: u32) -> Time {
        let tl = &mut self.tlps[t as usize];
        let hops = &self.routes[tl.route as usize].hops;
        let mut d = Time::ZERO;
        while tl.pos < tl.stop {
            match hops.get(tl.pos as usize) {
                Some(Hop::Delay(x) | Hop::MemoryDelay(x)) => {
                    d += *x;
                    tl.pos += 1;
                }
                _ => break,
            }
        }
        d
    }

    /// Processes the hop a TLP has reached.
    fn hop(&mut self, t: u32) {
        loop {
            let tlp = self.tlps[t as usize];
            let hops = &self.routes[tlp.route as usize].hops;
            let Some(&hop) = hops.get(tlp.pos as usize).filter(|_| tlp.pos < tlp.stop) else {
                self.end_of_route(t);
                return;
            };
            match hop {
                Hop::Delay(_) | Hop::MemoryDelay(_) => {
                    let d = self.skip_delays(t);
                    if d == Time::ZERO {
                        continue;
                    }
                    let at = self.now() + d;
                    self.engine.schedule_at(at, Ev::Hop(t)).expect("future");
                    return;
                }
                Hop::Iommu(i) => {
                    self.tlps[t as usize].pos += 1;
                    let tlb = &mut self.iotlbs[i as usize];
                    // A train's TLPs share a page: after the first lookup, the rest hit.
                    tlb.hits += tlp.count as u64 - 1;
                    let d = if tlb.present.contains(&tlp.iotlb_key) {
                        tlb.hits += 1;
                        tlb.hit
                    } else {
                        tlb.misses += 1;
                        let n = tlb.next;
                        let old = std::mem::replace(&mut tlb.entries[n], tlp.iotlb_key);
                        tlb.present.remove(&old);
                        tlb.present.insert(tlp.iotlb_key);
                        tlb.next = (n + 1) % tlb.entries.len();
                        tlb.miss
                    };
                    if tlp.count > 1 {
                        let hit = tlb.hit;
                        let tl = &mut self.tlps[t as usize];
                        tl.spread = (tl.spread + hit).max(d) - d;
                    }
                    let at = self.now() + d + self.skip_delays(t);
                    self.engine.schedule_at(at, Ev::Hop(t)).expect("future");
                    return;
                }
                Hop::Wire(w) if self.wires[w as usize].down => {
                    self.dead_wire(t);
                    return;
                }
                Hop::Wire(w) => {
                    let class = Self::class_of(tlp.kind);
                    let now = self.now();
                    let wire = &mut self.wires[w as usize];
                    if wire.credit_cap[class] == 0 {
                        self.transmit(t, w);
                        return;
                    }
                    wire.absorb_returns(class, now);
                    if wire.credits[class] >= tlp.count && wire.queues[class].is_empty() {
                        wire.credits[class] -= tlp.count;
                        self.transmit(t, w);
                    } else {
                        wire.queues[class].push_back(t);
                        if !wire.wake[class] {
                            if let Some(&(at, _)) = wire.returns[class].front() {
                                wire.wake[class] = true;
                                self.engine
                                    .schedule_at(at, Ev::Credit(w, class as u8))
                                    .expect("future");
                            }
                        }
                    }
                    return;
                }
                Hop::Pace(p) => {
                    self.tlps[t as usize].pos += 1;
                    let now = self.now();
                    let pc = &mut self.pacers[p as usize];
                    let start = now.max(pc.free_at);
                    let last = serialize(tlp.last_payload(), pc.ps_per_kib);
                    // A train's last TLP passes after the others' bytes, not before it came.
                    let tail = (start + serialize(tlp.payload, pc.ps_per_kib) - last)
                        .max(now + tlp.spread);
                    pc.free_at = tail + last;
                    pc.bytes += tlp.payload as u64;
                    self.tlps[t as usize].spread = tail - start;
                    if start == now {
                        continue;
                    }
                    self.engine.schedule_at(start, Ev::Hop(t)).expect("future");
                    return;
                }
                Hop::RootSplit(s) if tlp.kind == Kind::Read => {
                    self.split(t, s);
                    return;
                }
                Hop::RootSplit(_) => {
                    self.tlps[t as usize].pos += 1;
                }
                Hop::Sink(s, ddio) => {
                    self.arrive_at_sink(t, s, ddio);
                    return;
                }
            }
        }
    }

    /// A TLP whose next wire is down. Decided here, at the hop, because that is where
    /// PCIe decides it: the port whose link is down drops a posted write, answers a
    /// request with Unsupported Request, and a completion routed to it is lost.
    fn dead_wire(&mut self, t: u32) {
        let tlp = self.tlps[t as usize];
        self.release_credit(tlp.held, Self::class_of(tlp.kind), tlp.count);
        let now = self.now();
        match tlp.kind {
            Kind::Write => {
                self.failures.writes_dropped += tlp.count as u64;
                self.free_tlps.push(t);
                let d = Delivery::WriteDone {
                    flow: tlp.flow,
                    bytes: tlp.payload,
                };
                self.engine
                    .schedule_at(now, Ev::DeliverFailed(tlp.owner, d, TlpFailure::Dropped))
                    .expect("now");
            }
            Kind::Read => {
                self.failures.reads_unsupported += 1;
                let r = self.reads[tlp.req as usize];
                self.reads[tlp.req as usize].failed = r.failed.max(FAILED_UR);
                let route = &self.routes[tlp.route as usize];
                // Back over the hops already crossed: forward hop p is reverse n - 2 - p.
                let pos = (route.hops.len() - 1 - tlp.pos as usize) as u16;
                let rev = route.reverse;
                self.tlps[t as usize] = Tlp {
                    kind: Kind::Completion,
                    payload: r.remaining,
                    wire_bytes: pcie::wire_bytes(0, true, r.addr64),
                    route: rev,
                    pos,
                    stop: if r.parent != NONE {
                        r.rejoin - 1
                    } else {
                        u16::MAX
                    },
                    held: NONE,
                    sample: false,
                    parent: NONE,
                    iotlb_key: 0,
                    ur: true,
                    ..tlp
                };
                self.engine.schedule_at(now, Ev::Hop(t)).expect("now");
            }
            Kind::Completion => {
                self.failures.completions_lost += 1;
                self.free_tlps.push(t);
                self.lose(tlp.req, tlp.payload);
            }
        }
    }

    /// `bytes` of read `req`'s completions will never arrive: count them down through
    /// the reads it was split from; the requester's read ends by its completion timeout.
    fn lose(&mut self, req: u32, bytes: u32) {
        let mut q = req;
        loop {
            let r = &mut self.reads[q as usize];
            r.remaining -= bytes;
            r.failed = FAILED_TIMEOUT;
            if r.parent == NONE {
                break;
            }
            let (parent, splitter, done) = (r.parent, r.splitter, r.remaining == 0);
            if done {
                self.free_reads.push(q);
                self.splitters[splitter as usize].in_use -= 1;
                self.pump_splitter(splitter);
            }
            q = parent;
        }
        self.reads[q as usize].lost += bytes;
        if self.reads[q as usize].remaining == 0 {
            self.time_out(q);
        }
    }

    /// Read `q` has nothing more coming and lost part of it: its requester hears of it
    /// when the completion timeout from its issue runs out.
    fn time_out(&mut self, q: u32) {
        let r = self.reads[q as usize];
        self.free_reads.push(q);
        self.failures.reads_timed_out += 1;
        let at = self.now().max(r.issued + self.completion_timeout);
        let d = Delivery::ReadData {
            flow: r.flow,
            tag: r.tag,
            bytes: r.lost,
            last: true,
        };
        self.engine
            .schedule_at(
                at,
                Ev::DeliverFailed(r.owner, d, TlpFailure::CompletionTimeout),
            )
            .expect("future");
    }

    /// A read reaching a forwarding root: park it and issue sub-reads of `split` bytes,
    /// each needing one of the root's tags.
    fn split(&mut self, t: u32, s: u32) {
        let tlp = self.tlps[t as usize];
        let class = CLASS_NONPOSTED;
        self.release_credit(tlp.held, class, 1);
        let split = self.splitters[s as usize].split;
        let mut left = tlp.payload;
        let mut first = true;
        while left > 0 {
            let n = left.min(split);
            left -= n;
            let sub = if first {
                first = false;
                let tl = &mut self.tlps[t as usize];
                tl.payload = n;
                tl.parent = tl.req;
                tl.held = NONE;
                tl.pos += 1;
                t
            } else {
                let mut c = tlp;
                c.payload = n;
                c.parent = tlp.req;
                c.held = NONE;
                c.pos += 1;
                self.alloc_tlp(c)
            };
            self.splitters[s as usize].waiting.push_back(sub);
        }
        self.pump_splitter(s);
    }

    fn pump_splitter(&mut self, s: u32) {
        loop {
            let now = self.now();
            let sp = &mut self.splitters[s as usize];
            if sp.in_use >= sp.tags || sp.waiting.is_empty() || sp.wake_pending {
                return;
            }
            if now < sp.next_issue {
                sp.wake_pending = true;
                let at = sp.next_issue;
                self.engine
                    .schedule_at(at, Ev::Splitter(s))
                    .expect("future");
                return;
            }
            let sub = sp.waiting.pop_front().expect("checked non-empty");
            sp.in_use += 1;
            sp.next_issue = now + sp.issue_gap;
            // Each sub-read is a request of its own below the root.
            let parent = self.tlps[sub as usize].parent;
            let p = self.reads[parent as usize];
            let payload = self.tlps[sub as usize].payload;
            // Reverse-route index of this root (the sub-read continues just after it):
            // its completions stop here and rejoin the parent's way back. Kept per
            // sub-read, so a sub-read split again by a second root (a peer-to-peer read
            // crossing two roots) still knows where it rejoins the first.
            let n_hops = self.routes[p.route as usize].hops.len();
            let rejoin = (n_hops - self.tlps[sub as usize].pos as usize) as u16;
            let req = self.alloc_read(ReadReq {
                owner: p.owner,
                flow: p.flow,
                tag: p.tag,
                remaining: payload,
                route: p.route,
                rejoin,
                splitter: s,
                parent,
                addr64: p.addr64,
                issued: p.issued,
                failed: OK,
                lost: 0,
            });
            self.tlps[sub as usize].req = req;
            self.hop(sub);
        }
    }

    /// A CPU line fill evicted a DDIO line at sink `s`'s LLC: it is written back to DRAM
    /// (taking DRAM time). True if there was a line to evict.
    pub fn evict_ddio_line(&mut self, s: u32) -> bool {
        let now = self.now();
        let sink = &mut self.sinks[s as usize];
        let Some(llc) = sink.llc.as_mut() else {
            return false;
        };
        if !llc.evict_oldest() {
            return false;
        }
        sink.free_at = now.max(sink.free_at) + serialize(64, sink.ps_per_kib);
        true
    }

    fn arrive_at_sink(&mut self, t: u32, s: u32, ddio: bool) {
        let tlp = self.tlps[t as usize];
        let now = self.now();
        let class = Self::class_of(tlp.kind);
        self.release_credit(tlp.held, class, tlp.count);
        let sink = &mut self.sinks[s as usize];
        // What the LLC absorbs or serves, and what reaches DRAM.
        let lines = tlp.target / 64..=(tlp.target + tlp.payload.max(1) as u64 - 1) / 64;
        let llc = if tlp.cpu {
            // CPU misses and write-backs: DRAM, never the DDIO ways.
            None
        } else {
            sink.llc.as_mut()
        };
        let (dram_bytes, latency) = match (tlp.kind, llc) {
            (Kind::Write, Some(llc)) if ddio => {
                let evicted: u64 = lines.map(|l| llc.allocate(l)).sum();
                (evicted * 64, llc.latency)
            }
            (Kind::Write, Some(llc)) => {
                lines.for_each(|l| llc.invalidate(l));
                (tlp.payload as u64, sink.write_latency)
            }
            (Kind::Read, Some(llc)) => {
                let n = lines.clone().count() as u64;
                if lines.clone().all(|l| llc.contains(l)) {
                    llc.dma_read_hits += n;
                    (0, llc.latency)
                } else {
                    llc.dma_read_misses += n;
                    (tlp.payload as u64, sink.read_latency)
                }
            }
            (Kind::Write, None) => (tlp.payload as u64, sink.write_latency),
            _ => (tlp.payload as u64, sink.read_latency),
        };
        let (start, service) = if dram_bytes > 0 {
            let start = now.max(sink.free_at);
            let service = serialize(dram_bytes as u32, sink.ps_per_kib);
            // A train's last TLP is served after the others, and not before it came.
            let last = dram_bytes * tlp.last_payload() as u64 / tlp.payload.max(1) as u64;
            let tail = serialize(last as u32, sink.ps_per_kib);
            let end = (start + service).max(now + tlp.spread + tail);
            sink.free_at = end;
            (start, end - start)
        } else {
            (now + tlp.spread, Time::ZERO)
        };
        match tlp.kind {
            Kind::Write => {
                sink.bytes_written += tlp.payload as u64;
                let at = start + service + latency;
                let owner = sink.owner;
                if owner != NONE {
                    let mmio = Delivery::Mmio {
                        sink: s,
                        offset: tlp.target,
                        bytes: tlp.payload.min(u16::MAX as u32) as u16,
                        data: tlp.data,
                    };
                    self.engine
                        .schedule_at(at, Ev::Deliver(owner, mmio))
                        .expect("future");
                }
                if !sink.watches.is_empty() {
                    let (lo, hi) = (tlp.target, tlp.target + tlp.payload as u64);
                    let mut k = 0;
                    while k < sink.watches.len() {
                        let w = sink.watches[k];
                        if w.start < hi && lo < w.end {
                            sink.watches.swap_remove(k);
                            self.engine
                                .schedule_at(at, Ev::Timer(w.component, w.key))
                                .expect("future");
                        } else {
                            k += 1;
                        }
                    }
                }
                let done = Delivery::WriteDone {
                    flow: tlp.flow,
                    bytes: tlp.payload,
                };
                self.engine
                    .schedule_at(at, Ev::Deliver(tlp.owner, done))
                    .expect("future");
                self.free_tlps.push(t);
            }
            Kind::Read => {
                sink.bytes_read += tlp.payload as u64;
                let ready = start + latency;
                let rcb = sink.rcb;
                let r = self.reads[tlp.req as usize];
                if tlp.sample {
                    let d = Delivery::ReadServed {
                        flow: r.flow,
                        tag: r.tag,
                    };
                    self.engine
                        .schedule_at(ready, Ev::Deliver(r.owner, d))
                        .expect("future");
                }
                let rev = self.routes[tlp.route as usize].reverse;
                // Completions leave at the read completion boundary; the first wire spaces them.
                let mut left = tlp.payload;
                let mut first = true;
                while left > 0 {
                    let n = left.min(rcb);
                    left -= n;
                    let c = Tlp {
                        kind: Kind::Completion,
                        payload: n,
                        wire_bytes: pcie::wire_bytes(n, true, r.addr64),
                        route: rev,
                        pos: 0,
                        stop: if r.parent != NONE {
                            r.rejoin - 1
                        } else {
                            u16::MAX
                        },
                        held: NONE,
                        owner: tlp.owner,
                        data: 0,
                        cpu: tlp.cpu,
                        sample: false,
                        req: tlp.req,
                        parent: NONE,
                        flow: tlp.flow,
                        iotlb_key: 0,
                        target: tlp.target,
                        ur: false,
                        count: 1,
                        unit: n,
                        unit_wire: pcie::wire_bytes(n, true, r.addr64),
                        spread: Time::ZERO,
                    };
                    let id = if first {
                        first = false;
                        self.tlps[t as usize] = c;
                        t
                    } else {
                        self.alloc_tlp(c)
                    };
                    self.engine.schedule_at(ready, Ev::Hop(id)).expect("future");
                }
            }
            Kind::Completion => {
                unreachable!("completions travel reverse routes, which have no sink")
            }
        }
    }

    /// A completion at the end of its reverse route: it reached the requester, or (for a
    /// split sub-read) the root that split it.
    fn end_of_route(&mut self, t: u32) {
        let tlp = self.tlps[t as usize];
        debug_assert_eq!(tlp.kind, Kind::Completion);
        self.release_credit(tlp.held, CLASS_COMPLETION, 1);
        let r = self.reads[tlp.req as usize];
        let remaining = r.remaining - tlp.payload;
        self.reads[tlp.req as usize].remaining = remaining;
        if r.parent != NONE {
            // Sub-read data at the root: forward it on the parent's reverse route.
            let parent = r.parent;
            let rev = self.routes[r.route as usize].reverse;
            // A parent that is itself a sub-read stops at the root that split it.
            let p = self.reads[parent as usize];
            let tl = &mut self.tlps[t as usize];
            tl.req = parent;
            tl.route = rev;
            tl.pos = r.rejoin;
            tl.stop = if p.parent != NONE {
                p.rejoin - 1
            } else {
                u16::MAX
            };
            tl.held = NONE;
            if remaining == 0 {
                self.free_reads.push(tlp.req);
                self.splitters[r.splitter as usize].in_use -= 1;
                self.pump_splitter(r.splitter);
            }
            self.hop(t);
            return;
        }
        self.free_tlps.push(t);
        let failed = if tlp.ur {
            r.failed.max(FAILED_UR)
        } else {
            r.failed
        };
        self.reads[tlp.req as usize].failed = failed;
        if remaining == 0 && r.lost > 0 {
            // The last data to come; what was lost is given up at the timeout.
            let d = Delivery::ReadData {
                flow: r.flow,
                tag: r.tag,
                bytes: tlp.payload,
                last: false,
            };
            self.engine
                .schedule_at(self.now(), Ev::Deliver(r.owner, d))
                .expect("now");
            self.time_out(tlp.req);
            return;
        }
        if remaining == 0 {
            self.free_reads.push(tlp.req);
        }
        let d = Delivery::ReadData {
            flow: r.flow,
            tag: r.tag,
            bytes: tlp.payload,
            last: remaining == 0,
        };
        let failure = match failed {
            _ if tlp.ur => Some(TlpFailure::Unsupported),
            FAILED_UR if remaining == 0 => Some(TlpFailure::Unsupported),
            _ => None,
        };
        let ev = match failure {
            Some(f) => Ev::DeliverFailed(r.owner, d, f),
            None => Ev::Deliver(r.owner, d),
        };
        self.engine.schedule_at(self.now(), ev).expect("now");
    }

    /// Runs the network until something is for a component, a horizon is reached, or the
    /// next event lies after `until` (then `None`, and nothing past `until` is processed).
    pub fn next_notice(&mut self, until: Time) -> Option<Notice> {
        while let Some(t) = self.engine.peek_time() {
            if t > until {
                return None;
            }
            let (_, ev) = self.engine.pop().expect("peeked");
            match ev {
                Ev::Hop(tlp) => self.hop(tlp),
                Ev::Credit(w, class) => {
                    self.wires[w as usize].wake[class as usize] = false;
                    self.pump_credits(w, class as usize);
                }
                Ev::Deliver(c, d) => {
                    self.failure = None;
                    return Some(Notice::To(c, Event::Delivery(d)));
                }
                Ev::DeliverFailed(c, d, f) => {
                    self.failure = Some(f);
                    return Some(Notice::To(c, Event::Delivery(d)));
                }
                Ev::Timer(c, key) => {
                    self.failure = None;
                    return Some(Notice::To(c, Event::Timer(key)));
                }
                Ev::Wake(c) => {
                    self.failure = None;
                    return Some(Notice::To(c, Event::Wake));
                }
                Ev::Splitter(s) => {
                    self.splitters[s as usize].wake_pending = false;
                    self.pump_splitter(s);
                }
                Ev::Horizon => return Some(Notice::Horizon(t)),
            }
        }
        None
    }

    pub fn events_handled(&self) -> u64 {
        self.engine.stats().handled
    }

    /// The counters, with each wire's bytes as committed to it (a FIFO wire commits a
    /// TLP's bytes when it queues it, ahead of the clock).
    pub fn counters(&self) -> Counters {
        self.counters_with(|w| (w.bytes, w.payload_bytes))
    }

    /// The counters, with each wire's bytes as serialized by now (the backlog still queued
    /// at a transmitter left out, payload prorated): what a window of a saturated link
    /// reads, never above its rate. TLP counts stay as committed.
    pub fn counters_sent(&self) -> Counters {
        let now = self.now();
        self.counters_with(|w| w.sent_by(now))
    }

    fn counters_with(&self, bytes: impl Fn(&Wire) -> (u64, u64)) -> Counters {
        Counters {
            wires: self
                .wires
                .iter()
                .filter(|w| w.tlps > 0)
                .map(|w| {
                    let (b, payload) = bytes(w);
                    (w.name.clone(), b, payload, w.tlps)
                })
                .collect(),
            sinks: self
                .sinks
                .iter()
                .filter(|s| s.bytes_read + s.bytes_written > 0)
                .map(|s| (s.name.clone(), s.bytes_read, s.bytes_written))
                .collect(),
            iotlb_hits: self.iotlbs.iter().map(|t| t.hits).sum(),
            iotlb_misses: self.iotlbs.iter().map(|t| t.misses).sum(),
            llc: self
                .sinks
                .iter()
                .filter_map(|s| {
                    s.llc.as_ref().map(|l| {
                        (
                            s.name.clone(),
                            l.dma_read_hits,
                            l.dma_read_misses,
                            l.ddio_allocs,
                            l.writebacks,
                            l.invalidations,
                        )
                    })
                })
                .filter(|x| x.1 + x.2 + x.3 + x.5 > 0)
                .collect(),
        }
    }
}

#[cfg(test)]
mod size_tests {
    /// The event queue moves events around: keep them as small as before components.
    #[test]
    fn events_stay_small() {
        assert!(std::mem::size_of::<super::Delivery>() <= 24);
        assert!(std::mem::size_of::<super::Ev>() <= 32);
    }
}
