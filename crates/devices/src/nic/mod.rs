//! A packet-granular NIC: a port with line rate and Ethernet framing, PFs
//! each on its own PCIe link, DMA priced per packet against a host's memory system
//! (`sim::memsys`), MSI-X coalescing (off, static or adaptive: `coalesce`), RSS/ARFS and a multi-PF switch, TSO.
//!
//! 100 Gb/s of MTU-1500 traffic is ≈ 8 M packets/s, which the TLP network (`sim::net`,
//! one event per TLP per hop) cannot run fast enough; here a packet is a handful of
//! events and each bandwidth resource is a FIFO server reserved per packet for its bytes
//! including framing and TLP overhead (`sim::pcie`). `tests/nic_vs_tlp.rs` checks the
//! pricing against the timed fabric's routes. Reads go out in MRRS requests bounded by
//! the PF's tags (`tx`).

pub mod coalesce;
pub mod frame;
pub mod rx_buffer;
pub mod steer;
pub mod tx;

use std::collections::BTreeMap;
use std::sync::Arc;

use fabric::{DeviceId, NodeKind, Topology};
use sim::memsys::{Fifo, MemSys};
use sim::{pcie, Time};

pub use coalesce::{CoalesceMode, Coalescer, Coalescing, Moderation};
pub use rx_buffer::RxBuffer;
pub use steer::{FiveTuple, Steering, SteeringMode};
pub use tx::{HostBuf, ReadTags, SendRequests};

/// A NIC model's parameters from its device timing table (`nic_*` keys).
#[derive(Clone, Debug, PartialEq)]
pub struct NicParams {
    /// Port line rate, GB/s.
    pub line_gbps: f64,
    /// The NIC's own pipeline per packet.
    pub latency: Time,
    /// Propagation of the Ethernet cable.
    pub wire: Time,
    /// MSI-X coalescing: an interrupt this long after the first unsignalled completion…
    /// (the driver's static setting, `coalesce::Coalescing::of`)
    pub coalesce: Time,
    /// …or at this many completions, whichever comes first.
    pub coalesce_frames: u32,
    /// Reads a PF may have in flight (its tags) and its read request size, as every DMA
    /// requester states them (`dma_max_reads`, `dma_mrrs_bytes`).
    pub max_reads: u32,
    pub mrrs_bytes: u32,
    /// The port's receive buffer, bytes: full, it pauses the link partner (`rx_buffer`).
    pub rx_buffer_bytes: u64,
}

fn ns(x: f64) -> Time {
    Time::from_ps((x * 1000.0).round() as u64)
}

impl NicParams {
    /// From a device's validated timing table; an error naming the missing key.
    pub fn from_timing(device: &str, t: &BTreeMap<String, f64>) -> Result<NicParams, String> {
        let get = |k: &str| {
            t.get(k).copied().ok_or_else(|| {
                format!("device `{device}` has no NIC timing parameter `{k}` (a NIC model states nic_line_gbps, nic_latency_ns, nic_wire_ns, nic_coalesce_ns, nic_coalesce_frames, nic_rx_buffer_bytes, and as a DMA requester dma_max_reads and dma_mrrs_bytes)")
            })
        };
        Ok(NicParams {
            line_gbps: get("nic_line_gbps")?,
            latency: ns(get("nic_latency_ns")?),
            wire: ns(get("nic_wire_ns")?),
            coalesce: ns(get("nic_coalesce_ns")?),
            coalesce_frames: get("nic_coalesce_frames")? as u32,
            max_reads: get("dma_max_reads")? as u32,
            mrrs_bytes: get("dma_mrrs_bytes")? as u32,
            rx_buffer_bytes: get("nic_rx_buffer_bytes")? as u64,
        })
    }
}

/// One PF: its PCIe link's two directions as FIFO servers and where its root is.
#[derive(Clone, Debug)]
pub struct Pf {
    /// The uncore vertex of its root: a package's (= that package's index) or an I/O
    /// hub's. Its DMA crosses the memory system's route from here.
    pub attach: u32,
    /// The package local to it: its root's package, or the package nearest its I/O hub
    /// (`Platform::nearest_package`) — the node a driver allocates its rings on.
    pub socket: u32,
    /// Device → root (posted writes, read requests).
    pub up: Fifo,
    /// Root → device (read completions, MMIO).
    pub down: Fifo,
    pub mps: u32,
    /// The root's read completions: reads come back in completions of this size (the
    /// platform's `read_completion_bytes`, capped by the MPS).
    pub rcb: u32,
    /// Latency of the link (PHY/DLL) plus the root's forwarding.
    pub link_latency: Time,
    /// Largest read request.
    pub mrrs: u32,
    /// The function's outstanding reads.
    pub read_tags: ReadTags,
}

/// Bytes on the link of `bytes` cut into TLPs of at most `max` payload, with 64-bit
/// request headers (host RAM above 4 GiB) or completion headers.
pub fn tlp_wire_bytes(bytes: u64, max: u32, completion: bool) -> u64 {
    let max = max as u64;
    let full = bytes / max;
    let rest = bytes % max;
    let one = |p: u64| pcie::wire_bytes(p as u32, completion, true) as u64;
    full * one(max) + if rest > 0 { one(rest) } else { 0 }
}

impl Pf {
    /// A posted DMA write of `bytes` into `buf` on `node` starting at `at`: serialized on
    /// the link in MPS TLPs, then handed to the memory system. When it is visible.
    pub fn dma_write(
        &mut self,
        at: Time,
        ms: &mut MemSys,
        node: u32,
        buf: u64,
        bytes: u64,
    ) -> Time {
        let on_link = self.up.reserve(at, tlp_wire_bytes(bytes, self.mps, false));
        ms.device_write(on_link + self.link_latency, self.attach, node, buf, bytes)
    }

    /// A posted DMA write of `bytes` into `buf` followed by one of `next_bytes` into
    /// `next` (a frame, then its completion entry), both on `node`, from `at`. Posted
    /// writes keep their order on the link and in the root, so the NIC sends the second
    /// right behind the first's TLPs instead of waiting for the first to land (waiting
    /// would leave the link idle for a round trip per frame). When the second is visible,
    /// never before the first.
    #[allow(clippy::too_many_arguments)]
    pub fn dma_write_then(
        &mut self,
        at: Time,
        ms: &mut MemSys,
        node: u32,
        buf: u64,
        bytes: u64,
        next: u64,
        next_bytes: u64,
    ) -> Time {
        let first = self.up.reserve(at, tlp_wire_bytes(bytes, self.mps, false));
        let first_visible =
            ms.device_write(first + self.link_latency, self.attach, node, buf, bytes);
        let second = self
            .up
            .reserve(first, tlp_wire_bytes(next_bytes, self.mps, false));
        ms.device_write(
            second + self.link_latency,
            self.attach,
            node,
            next,
            next_bytes,
        )
        .max(first_visible)
    }

    /// A DMA read of `bytes` of `buf` on `node` from `at`: requests of at most `mrrs`
    /// bytes, each sent once a tag is free and holding it until its last completion is
    /// in the device (`tx`). When the last completion byte is in the device.
    pub fn dma_read(&mut self, at: Time, ms: &mut MemSys, node: u32, buf: u64, bytes: u64) -> Time {
        let request = pcie::wire_bytes(0, false, true) as u64;
        let mut done = at;
        let mut off = 0;
        loop {
            let n = (bytes - off).min(self.mrrs.max(1) as u64);
            let issue = self.read_tags.acquire(at);
            let req = self.up.reserve(issue, request);
            let data = ms.device_read(req + self.link_latency, self.attach, node, buf, n);
            let end =
                self.down.reserve(data, tlp_wire_bytes(n, self.rcb, true)) + self.link_latency;
            self.read_tags.release(end);
            done = done.max(end);
            off += n;
            if off >= bytes {
                return done;
            }
        }
    }
}

/// A NIC of a host: its PFs (one per function of the device, in order) and its port.
#[derive(Clone, Debug)]
pub struct Nic {
    /// Shared: a model's event handlers copy the handle, not the parameters' provenance.
    pub params: Arc<NicParams>,
    pub pfs: Vec<Pf>,
    /// The port's transmit direction onto the wire.
    pub tx_port: Fifo,
    /// The port's receive buffer, where frames wait for their DMA into host memory.
    pub rx_buffer: RxBuffer,
    /// How the driver hands the NIC a send's request (`tx::SendRequests`): by default
    /// the NIC DMA-reads a descriptor from a host ring.
    pub send_requests: SendRequests,
}

impl Nic {
    /// The NIC `device` of `topo`: each function's attach point from its root, its link's rate
    /// and the host's MPS, the platform's RCB and link timing.
    pub fn from_topology(topo: &Topology, device: DeviceId) -> Result<Nic, String> {
        let dev = &topo.devices[device.index()];
        let params = NicParams::from_timing(&dev.name, &dev.timing)?;
        let pfs = pfs(topo, device, params.max_reads, params.mrrs_bytes)?;
        Ok(Nic {
            tx_port: Fifo::new(params.line_gbps),
            rx_buffer: RxBuffer::new(params.rx_buffer_bytes),
            send_requests: SendRequests::default(),
            params: Arc::new(params),
            pfs,
        })
    }

    /// The caller's promise that no reservation of this NIC's port or links starts
    /// before `t` from now on (`Fifo::forget_before`): they keep only what later
    /// reservations can meet, however far ahead a sender has booked.
    pub fn forget_before(&mut self, t: Time) {
        self.tx_port.forget_before(t);
        for pf in &mut self.pfs {
            pf.up.forget_before(t);
            pf.down.forget_before(t);
        }
    }

    /// Reservations that started before a time promised by `forget_before`.
    pub fn late(&self) -> u64 {
        let links = self.pfs.iter().map(|pf| pf.up.late() + pf.down.late());
        self.tx_port.late() + links.sum::<u64>()
    }
}

/// The PFs of `device` (a NIC or an RNIC) of `topo`: each function's attach vertex (a
/// package's root or an I/O hub) and local package from its root, its link's rate and
/// the host's MPS, the platform's RCB and link timing; each with `max_reads` tags and
/// reads of at most `mrrs` bytes. An error names a device whose root no interconnect
/// path joins to a package.
pub fn pfs(
    topo: &Topology,
    device: DeviceId,
    max_reads: u32,
    mrrs: u32,
) -> Result<Vec<Pf>, String> {
    let dev = &topo.devices[device.index()];
    let host = topo.host(dev.host);
    let platform = topo.platform_of(dev.host);
    let timing = platform
        .timing
        .as_ref()
        .ok_or_else(|| format!("platform `{}` has no timing table", platform.name))?;
    let mut pfs = Vec::new();
    for &f in &dev.functions {
        let node = topo.node(f);
        let link = node
            .link
            .ok_or_else(|| format!("device `{}` function without a link", dev.name))?;
        let NodeKind::RootComplex { vertex: attach } = topo.node(node.root).kind else {
            return Err(format!(
                "device `{}.{}` is not under a root complex",
                host.name, dev.name
            ));
        };
        let socket = platform.nearest_package(attach).ok_or_else(|| {
            format!(
                "device `{}.{}` hangs under `{}`, which no interconnect link of platform `{}` joins to a package: its DMA cannot reach memory",
                host.name,
                dev.name,
                platform.vertex_name(attach),
                platform.name
            )
        })?;
        let gbps = pcie::link_data_gbps(link.gen, link.width);
        pfs.push(Pf {
            attach,
            socket,
            up: Fifo::new(gbps),
            down: Fifo::new(gbps),
            mps: host.mps,
            // The root's completions, capped by the link's MPS.
            rcb: timing.read_completion_bytes.min(host.mps),
            link_latency: ns(timing.pcie_link_ns + timing.rc_latency_ns),
            mrrs,
            read_tags: ReadTags::new(max_reads),
        });
    }
    Ok(pfs)
}
