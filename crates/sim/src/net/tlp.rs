//! TLPs and reads in flight, and what the network tells components: `Issue` in,
//! `Delivery`/`Event`/`Notice` out, `TlpFailure` for TLPs that met a dead link, and the
//! engine's own events.

use super::{coherent_bytes, ComponentId};
use crate::time::Time;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Write,
    Read,
    Completion,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Tlp {
    pub(super) kind: Kind,
    pub(super) payload: u32,
    pub(super) wire_bytes: u32,
    pub(super) route: u32,
    pub(super) pos: u16,
    /// The route ends here for this TLP (a sub-read's completions stop at the root).
    pub(super) stop: u16,
    pub(super) held: u32,
    /// The component that sent it (told of its landing or its data).
    pub(super) owner: ComponentId,
    /// Inline data of a small write (a doorbell, an MSI): up to 8 bytes, little-endian.
    pub(super) data: u64,
    /// A CPU cache-line miss or write-back: served by DRAM, never by DDIO ways.
    pub(super) cpu: bool,
    /// The sender wants to hear when the read's data is taken from memory.
    pub(super) sample: bool,
    /// Read request this TLP belongs to (reads and completions).
    pub(super) req: u32,
    /// For a split sub-read: the parent request; NONE otherwise.
    pub(super) parent: u32,
    pub(super) flow: u32,
    pub(super) iotlb_key: u64,
    /// Address at the target (for cache lines in the LLC).
    pub(super) target: u64,
    /// An Unsupported Request completion: a header only, no data, though `payload`
    /// counts the bytes of the request it completes.
    pub(super) ur: bool,
    /// TLPs this one stands for: more than one for a train (`Net::send_write_train`),
    /// whose `payload` and `wire_bytes` are the sums over its TLPs.
    pub(super) count: u16,
    /// Payload and PCIe wire bytes of each of a train's TLPs but the last.
    pub(super) unit: u32,
    pub(super) unit_wire: u32,
    /// How long after this event (the train's first TLP reaching the hop) its last TLP
    /// reaches it; zero for one TLP.
    pub(super) spread: Time,
}

impl Tlp {
    /// Payload of a train's last TLP.
    pub(super) fn last_payload(&self) -> u32 {
        self.payload - (self.count as u32 - 1) * self.unit
    }

    /// Bytes of the first and of the last TLP, and of all, on a wire.
    pub(super) fn wire_sizes(&self, pcie: bool) -> (u32, u32, u32) {
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
pub(super) struct ReadReq {
    pub(super) owner: ComponentId,
    pub(super) flow: u32,
    pub(super) tag: u64,
    pub(super) remaining: u32,
    /// Route of the original read (completions return on its reverse).
    pub(super) route: u32,
    /// Where a split's completions rejoin the reverse route, and the splitter.
    pub(super) rejoin: u16,
    pub(super) splitter: u32,
    /// For a split sub-read: the request it was split from; NONE otherwise.
    pub(super) parent: u32,
    pub(super) addr64: bool,
    /// When it was issued (its completion timeout runs from here).
    pub(super) issued: Time,
    /// How it failed so far: `OK`, `FAILED_UR` or `FAILED_TIMEOUT` (the worst wins).
    pub(super) failed: u8,
    /// Bytes whose completions were lost (they time out).
    pub(super) lost: u32,
}

pub(super) const OK: u8 = 0;

pub(super) const FAILED_UR: u8 = 1;

pub(super) const FAILED_TIMEOUT: u8 = 2;

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

/// The kernel's handle on one of a component's pending timers: which of its owner's timer
/// sets, and which entry of it (`timers::Timers` keeps what it means).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerKey {
    pub(crate) set: u16,
    pub(crate) slot: u32,
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
pub(super) enum Ev {
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
