//! A packet-granular RDMA NIC: reliable-connected queue pairs (`qp`), the
//! one-sided verbs READ, WRITE, CAS and FAA, InfiniBand framing at the path MTU
//! (`wire`), QP-context and translation caches over host-resident tables (`cache`), three
//! processing units and DMA through its PCIe function priced against the host's memory
//! system (`devices::nic::Pf` over `sim::memsys`: DDIO, LLC, DRAM, interconnect).
//!
//! The RNIC's work is split between three units, each serving one task at a time (the
//! message-rate limit): the transmit unit takes `rnic_wqe_ns` per work request it
//! issues — holding it while a gathered payload streams in over the PCIe link; the
//! response unit `rnic_packet_ns` per response or ACK packet the responder sends; the
//! receive unit `rnic_packet_ns` per packet that arrives. Responses have a unit of their
//! own (assumption: the ConnectX has several processing units — Kalia et al., ATC'16 —
//! and no calibration point has one RNIC both issuing and responding): a response is
//! booked when its request arrives for when its data will be in, and in one unit that
//! booking held back WQEs the unit could have sent before it. Each packet also crosses the RNIC's pipeline
//! (`rnic_latency_ns`) on its way out and on its way in, and the port serializes it at
//! the link's data rate. A QP context or MTT entry missing from its cache is fetched by a
//! DMA read of host memory on the RNIC's node, and the unit that needs it waits. Which
//! send queue the transmit unit serves next, and whether a WQE comes from its BlueFlame
//! store or a DMA fetch, is the send arbiter's (`send`).
//!
//! Multi-packet messages are cut-through (the `*_each` methods): each MTU packet's
//! payload is read by DMA, built, sent, parsed and written on its own, so a message's
//! later packets are still streaming in while its first is on the wire, instead of
//! every stage waiting for the whole message.
//!
//! The orchestration of one operation across two hosts (requester → responder →
//! requester) is the host layer's (`host::rdma`), which owns both hosts' memory systems
//! and regions; this module prices each RNIC's part.

pub mod cache;
pub mod qp;
pub mod send;
pub mod wire;

use std::collections::BTreeMap;

use fabric::{DeviceId, Topology};
use sim::memsys::{Fifo, MemSys};
use sim::Time;

use crate::nic::{self, Pf};
pub use cache::ContextCache;
pub use qp::{Qp, Verb, Wqe};
pub use send::SendArbiter;

/// Bytes of one QP context in host memory (assumption: mlx4's QPC entry size,
/// `dev_cap.qpc_entry_sz` = 256 on ConnectX-3; docs/hardware.md gives none).
pub const QPC_BYTES: u64 = 256;
/// Bytes of one MTT entry, a page's translation (mlx4: 8-byte entries).
pub const MTT_BYTES: u64 = 8;
/// Page size the regions are registered with (4 KiB pages).
pub const PAGE: u64 = 4096;

/// Buffer identities of the RNIC's tables in the memory system (apart from the host
/// layer's, which use bits below 40).
const QPC_BUF: u64 = 0x51 << 40;
const MTT_BUF: u64 = 0x52 << 40;

/// An RNIC model's parameters from its device timing table (`rnic_*` keys).
#[derive(Clone, Debug, PartialEq)]
pub struct RnicParams {
    /// The port's data rate after line coding, GB/s.
    pub port_gbps: f64,
    /// The RNIC's pipeline, crossed by every packet once leaving and once arriving.
    pub latency: Time,
    /// Propagation of the cable between the two ports.
    pub wire: Time,
    /// Transmit unit per work request issued.
    pub wqe: Time,
    /// Per packet: the receive unit per arriving packet, the transmit unit per response
    /// or ACK packet.
    pub packet: Time,
    pub qpc_entries: usize,
    pub mtt_entries: usize,
    /// The largest `max_rd_atomic` a QP may be given.
    pub max_rd_atomic: u32,
}

fn ns(x: f64) -> Time {
    Time::from_ps((x * 1000.0).round() as u64)
}

impl RnicParams {
    /// From a device's validated timing table; an error naming the missing key.
    pub fn from_timing(device: &str, t: &BTreeMap<String, f64>) -> Result<RnicParams, String> {
        let get = |k: &str| {
            t.get(k).copied().ok_or_else(|| {
                format!(
                    "device `{device}` has no RNIC timing parameter `{k}` (an RNIC model states {})",
                    fabric::scenario::RNIC_TIMING_KEYS.join(", ")
                )
            })
        };
        Ok(RnicParams {
            port_gbps: get("rnic_port_gbps")?,
            latency: ns(get("rnic_latency_ns")?),
            wire: ns(get("rnic_wire_ns")?),
            wqe: ns(get("rnic_wqe_ns")?),
            packet: ns(get("rnic_packet_ns")?),
            qpc_entries: get("rnic_qpc_entries")? as usize,
            mtt_entries: get("rnic_mtt_entries")? as usize,
            max_rd_atomic: get("rnic_max_rd_atomic")? as u32,
        })
    }
}

/// A processing unit serving one task at a time, in the order tasks reach it.
#[derive(Clone, Debug, Default)]
pub struct Unit {
    free: Time,
    /// Time spent serving since the last reset.
    pub busy: Time,
}

impl Unit {
    /// A task arriving at `at` that takes `dur`: when it starts.
    pub fn serve(&mut self, at: Time, dur: Time) -> Time {
        let start = self.free.max(at);
        self.free = start + dur;
        self.busy += dur;
        start
    }

    /// When the unit is through with the tasks it has taken.
    pub fn free_at(&self) -> Time {
        self.free
    }

    /// Holds the unit until `until` (a task whose length is known only as it runs).
    pub fn hold_until(&mut self, until: Time) {
        if until > self.free {
            self.busy += until - self.free;
            self.free = until;
        }
    }
}

/// Where a buffer the RNIC reaches by DMA is: its node and its identity in the
/// memory system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub node: u32,
    pub buf: u64,
}

/// One RNIC of a host.
#[derive(Clone, Debug)]
pub struct Rnic {
    pub params: RnicParams,
    /// Its PCIe function (the ConnectX-3 has one port on one PF).
    pub pf: Pf,
    /// The port's transmit direction.
    pub port: Fifo,
    pub tx: Unit,
    pub rx: Unit,
    /// Builds the responses and ACKs the responder sends.
    pub resp: Unit,
    pub qpc: ContextCache,
    pub mtt: ContextCache,
    /// Which send queue the transmit unit serves next, and how each WQE reaches it.
    pub send: SendArbiter,
}

impl Rnic {
    /// The RNIC `device` of `topo`: its first function's link and socket (as the NIC
    /// model builds them) and its `rnic_*` timing.
    pub fn from_topology(topo: &Topology, device: DeviceId) -> Result<Rnic, String> {
        let dev = &topo.devices[device.index()];
        let params = RnicParams::from_timing(&dev.name, &dev.timing)?;
        let dma = |k: &str| {
            dev.timing.get(k).map(|v| *v as u32).ok_or_else(|| {
                format!("device `{}` has no DMA timing parameter `{k}` (an RNIC states its reads in flight and read request size, dma_max_reads and dma_mrrs_bytes)", dev.name)
            })
        };
        let pf = nic::pfs(topo, device, dma("dma_max_reads")?, dma("dma_mrrs_bytes")?)?
            .into_iter()
            .next()
            .ok_or_else(|| format!("device `{}` has no function", dev.name))?;
        Ok(Rnic::new(params, pf))
    }

    pub fn new(params: RnicParams, pf: Pf) -> Rnic {
        Rnic {
            port: Fifo::new(params.port_gbps),
            qpc: ContextCache::new(params.qpc_entries),
            mtt: ContextCache::new(params.mtt_entries),
            tx: Unit::default(),
            rx: Unit::default(),
            resp: Unit::default(),
            send: SendArbiter::default(),
            params,
            pf,
        }
    }

    /// The socket the RNIC hangs under; its tables (ICM) are on that node.
    pub fn socket(&self) -> u32 {
        self.pf.socket
    }

    /// QP `qpn`'s context from `at`: at once on a hit, after a DMA read of it on a miss.
    pub fn qp_context(&mut self, at: Time, ms: &mut MemSys, qpn: u32) -> Time {
        if self.qpc.access(qpn as u64) {
            return at;
        }
        let node = self.socket();
        self.pf
            .dma_read(at, ms, node, QPC_BUF + qpn as u64, QPC_BYTES)
    }

    /// Translations of bytes `offset..offset + len` of region `key` from `at`: every
    /// page's MTT entry, fetched by a DMA read when it misses.
    pub fn translate(
        &mut self,
        at: Time,
        ms: &mut MemSys,
        key: u32,
        offset: u64,
        len: u64,
    ) -> Time {
        let mut t = at;
        let node = self.socket();
        for page in offset / PAGE..=(offset + len.max(1) - 1) / PAGE {
            let entry = ((key as u64) << 32) | page;
            if !self.mtt.access(entry) {
                t = self.pf.dma_read(t, ms, node, MTT_BUF + entry, MTT_BYTES);
            }
        }
        t
    }

    /// A BlueFlame store of a `bytes` WQE for send queue `q` reaches the RNIC at `at`,
    /// with `ahead` of the queue's WQEs not yet issued; the WQE is also in host memory
    /// at `slot`. The RNIC takes the store's copy when the queue is idle, else fetches
    /// the WQE from `slot` by DMA, starting the read at once so that it is in before
    /// the unit reaches it (`SendArbiter::takes_blueflame`).
    pub fn doorbell(
        &mut self,
        at: Time,
        ms: &mut MemSys,
        q: usize,
        ahead: usize,
        slot: Place,
        bytes: u64,
    ) {
        let fetched = if self.send.takes_blueflame(q, at, ahead) {
            None
        } else {
            Some(self.pf.dma_read(at, ms, slot.node, slot.buf, bytes))
        };
        self.send.accept(q, fetched);
    }

    /// Time the transmit unit is held while `bytes` of gathered payload stream over the
    /// PCIe link as read completions.
    pub fn gather_stream(&self, bytes: u64) -> Time {
        let wire = nic::tlp_wire_bytes(bytes, self.pf.rcb, true);
        Time::from_ps((wire as f64 / self.pf.down.gbps() * 1000.0).round() as u64)
    }

    /// Sends `packets` ready at `at` out of the port: through the pipeline, serialized;
    /// when the last byte reaches the far port.
    pub fn transmit(&mut self, at: Time, packets: wire::Packets) -> Time {
        let out = self
            .port
            .reserve(at + self.params.latency, packets.wire_bytes);
        out + self.params.wire
    }

    /// `count` packets arriving at the port by `at`: through the pipeline and the
    /// receive unit; when the last is parsed.
    pub fn receive(&mut self, at: Time, count: u64) -> Time {
        let dur = Time::from_ps(self.params.packet.as_ps() * count);
        let ready = at + self.params.latency;
        self.rx.serve(ready, dur) + dur
    }

    /// The response unit builds `count` response or ACK packets from `at`; when they are
    /// built.
    pub fn build_responses(&mut self, at: Time, count: u64) -> Time {
        let dur = Time::from_ps(self.params.packet.as_ps() * count);
        self.resp.serve(at, dur) + dur
    }

    /// Cut-through: packets each leaving once its own data is ready (`ready[i]`, in
    /// order) — through the pipeline, serialized on the port behind the one before; when
    /// each reaches the far port. A message's later packets still stream in while its
    /// first is on the wire.
    pub fn transmit_each(&mut self, ready: &[Time], packets: &[wire::Packet]) -> Vec<Time> {
        let mut last = Time::ZERO;
        ready
            .iter()
            .zip(packets)
            .map(|(&at, p)| {
                last = self
                    .port
                    .reserve((at + self.params.latency).max(last), p.wire_bytes);
                last + self.params.wire
            })
            .collect()
    }

    /// Packets arriving at the port at `arrivals` (in order): each through the pipeline
    /// and the receive unit as it comes; when each is parsed.
    pub fn receive_each(&mut self, arrivals: &[Time]) -> Vec<Time> {
        let dur = self.params.packet;
        arrivals
            .iter()
            .map(|&a| self.rx.serve(a + self.params.latency, dur) + dur)
            .collect()
    }

    /// The response unit builds one response packet per entry of `ready` (when its data
    /// is in); when each is built.
    pub fn build_each(&mut self, ready: &[Time]) -> Vec<Time> {
        let dur = self.params.packet;
        ready
            .iter()
            .map(|&at| self.resp.serve(at, dur) + dur)
            .collect()
    }

    /// A DMA read of each packet's payload of `buf` on `node`, all requested from `at`
    /// (the read engine fetches a message per packet so each can leave as its data
    /// arrives); when each packet's last byte is in the RNIC.
    pub fn dma_read_each(
        &mut self,
        at: Time,
        ms: &mut MemSys,
        node: u32,
        buf: u64,
        packets: &[wire::Packet],
    ) -> Vec<Time> {
        packets
            .iter()
            .map(|p| self.pf.dma_read(at, ms, node, buf, p.payload))
            .collect()
    }

    /// Posted DMA writes of each packet's payload into `buf` on `node` as the packet is
    /// parsed (`parsed[i]`), in order on the link, then `then` (a CQE: buffer and bytes)
    /// right behind the last; when all of it is visible. The memory system sees the
    /// message as one buffer landing with its last packet.
    pub fn dma_write_each(
        &mut self,
        ms: &mut MemSys,
        node: u32,
        buf: u64,
        parsed: &[Time],
        packets: &[wire::Packet],
        then: Option<(u64, u64)>,
    ) -> Time {
        let pf = &mut self.pf;
        let mut on_link = Time::ZERO;
        for (&at, p) in parsed.iter().zip(packets) {
            on_link = pf.up.reserve(
                at.max(on_link),
                nic::tlp_wire_bytes(p.payload, pf.mps, false),
            );
        }
        let bytes = packets.iter().map(|p| p.payload).sum();
        let visible = ms.device_write(on_link + pf.link_latency, pf.socket, node, buf, bytes);
        let Some((next, next_bytes)) = then else {
            return visible;
        };
        let second = pf
            .up
            .reserve(on_link, nic::tlp_wire_bytes(next_bytes, pf.mps, false));
        ms.device_write(second + pf.link_latency, pf.socket, node, next, next_bytes)
            .max(visible)
    }

    /// The caller's promise that no reservation of the port or the PF's link starts
    /// before `t` from now on (`Fifo::forget_before`): they keep only what later
    /// reservations can meet.
    pub fn forget_before(&mut self, t: Time) {
        self.port.forget_before(t);
        self.pf.up.forget_before(t);
        self.pf.down.forget_before(t);
    }

    /// Reservations that started before a time promised by `forget_before`.
    pub fn late(&self) -> u64 {
        self.port.late() + self.pf.up.late() + self.pf.down.late()
    }

    /// Starts counting afresh (contents and queues stay).
    pub fn reset_counters(&mut self) {
        self.tx.busy = Time::ZERO;
        self.rx.busy = Time::ZERO;
        self.resp.busy = Time::ZERO;
        self.qpc.reset_counters();
        self.mtt.reset_counters();
        self.port.bytes = 0;
    }
}
