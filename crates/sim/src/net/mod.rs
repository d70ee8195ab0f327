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
//!
//! This file owns the `Net`, its hops and its network-wide settings; beside it: `wire`
//! (wires and credits), `route` (routes, pacers, IOTLBs), `sink` (sinks and their LLC),
//! `splitter` (root complexes' read splitters), `tlp` (TLPs, reads and what components
//! are told), `send` (injecting requests), `event_loop` (hops, failures, `next_notice`)
//! and `counters`.

mod counters;
mod event_loop;
mod route;
mod send;
mod sink;
mod splitter;
mod tlp;
mod wire;

pub use counters::Counters;
pub use route::{Iotlb, Pacer};
pub use sink::{Llc, Sink};
pub use splitter::Splitter;
pub use tlp::{Delivery, Event, FailureCounts, Issue, Notice, TimerKey, TlpFailure};
pub use wire::Wire;

use crate::engine::Engine;
use crate::time::Time;
use route::Route;
use tlp::{Ev, ReadReq, Tlp};

pub const CLASS_POSTED: usize = 0;
pub const CLASS_NONPOSTED: usize = 1;
pub const CLASS_COMPLETION: usize = 2;

const NONE: u32 = u32::MAX;

/// Bytes a message takes on a CPU interconnect (QPI/UPI), whose rate counts 8 B of
/// payload per 80-bit flit: a header flit, then the data in whole flits — a read request
/// is one flit, a 64 B line nine (assumption: QPI's packet format; docs/hardware.md gives the
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

    /// The time of the next queued event, if any (a model stepped beside another
    /// kernel's says when it next needs the clock).
    pub fn peek_time(&mut self) -> Option<Time> {
        self.engine.peek_time()
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
