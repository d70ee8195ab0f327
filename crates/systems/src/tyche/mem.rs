//! Every memory-system and DMA call of Tyche, in one place: the NIC's DMA into and out
//! of host memory (`devices::nic`), CPU copies and loads (`sim::memsys`), and the
//! interconnect counters reports read.

use std::collections::BTreeMap;

use devices::nic::{HostBuf, Nic, SendRequests};
use fabric::{HostId, Topology};
use sim::memsys::{MemSys, LINE};
use sim::Time;

/// The node a NIC belongs to: the package nearest its PF's attach point (its root's
/// package, or the package of the I/O hub it hangs under).
pub fn nic_node(_topo: &Topology, _host: HostId, nic: &Nic) -> Result<u32, String> {
    Ok(nic.pfs[0].socket)
}

/// Whether a NIC's DMA to `node` leaves its attach point: memory elsewhere than at the
/// package whose root it is under (behind an I/O hub, every DMA crosses a link).
fn crosses(nic: &Nic, node: u32) -> bool {
    nic.pfs[0].attach != node
}

fn lines(bytes: u64) -> u64 {
    bytes.div_ceil(LINE).max(1) * LINE
}

/// Bytes a NIC put in memory, by the model's own account, and the control path's
/// crossings (`wake`), kept apart from the data's.
#[derive(Clone, Copy, Debug, Default)]
pub struct DmaLedger {
    pub rx_bytes: u64,
    pub rx_off_node: u64,
    /// Line-rounded DMA bytes that crossed the interconnect (writes and reads).
    pub cross: u64,
    /// Bytes interrupt handlers and wake-ups moved across the interconnect (each link of
    /// the route counted, as the memory system's counters count them).
    pub control_cross: u64,
}

/// The NIC writes `bytes` of `buf` on `node` at `at`, then a completion entry of
/// `cqe_bytes` (`cqe`) on the same node: when the entry is visible.
#[allow(clippy::too_many_arguments)]
pub fn nic_write(
    nic: &mut Nic,
    node_of_nic: u32,
    at: Time,
    ms: &mut MemSys,
    ledger: &mut DmaLedger,
    node: u32,
    buf: u64,
    bytes: u64,
    cqe: u64,
    cqe_bytes: u64,
) -> Time {
    ledger.rx_bytes += lines(bytes) + lines(cqe_bytes);
    if node != node_of_nic {
        ledger.rx_off_node += lines(bytes) + lines(cqe_bytes);
    }
    if crosses(nic, node) {
        ledger.cross += lines(bytes) + lines(cqe_bytes);
    }
    nic.pfs[0].dma_write_then(at, ms, node, buf, bytes, cqe, cqe_bytes)
}

/// A send rung at `doorbell`: the NIC reads the descriptor and the payload (both
/// `HostBuf`s); when the payload is in the NIC.
pub fn nic_fetch(
    nic: &mut Nic,
    doorbell: Time,
    ms: &mut MemSys,
    ledger: &mut DmaLedger,
    desc: HostBuf,
    payload: HostBuf,
) -> Time {
    // A driver that posts its requests by PIO leaves no descriptor for the NIC to read.
    let desc_read = nic.send_requests == SendRequests::DescriptorRead;
    for (b, read) in [(desc, desc_read), (payload, true)] {
        if read && crosses(nic, b.node) {
            ledger.cross += lines(b.bytes);
        }
    }
    nic.fetch_send(doorbell, ms, 0, desc, &[(0, payload)])
}

/// A core on `socket` stores `bytes` into `buf` on `node` (a message, a copy's
/// destination): a line it does not own is read for ownership from its home first.
/// What the core waits beyond its own cycles.
pub fn cpu_store(ms: &mut MemSys, at: Time, socket: u32, node: u32, buf: u64, bytes: u64) -> Time {
    let rfo = if node != socket {
        ms.cpu_read(at, socket, node, buf, bytes, false)
    } else {
        Time::ZERO
    };
    rfo + ms.cpu_write_home(at + rfo, socket, node, buf, bytes)
}

/// When a send request a core on `socket` posts at `at` reaches the NIC. myri10ge
/// writes its send requests into the NIC's SRAM by PIO (`myri10ge_submit_req`: 32-byte
/// write-combined stores) instead of letting the NIC fetch them, so the NIC can start
/// only once the posted write has crossed the uncore route from the core's package to
/// the NIC's attach point (its I/O hub): one link from the hub's own processor, two
/// from the other. Each link's latency is the platform's (an assumption on Nehalem).
pub fn pio_arrival(ms: &MemSys, at: Time, socket: u32, nic: &Nic) -> Time {
    at + ms.uncore().latency(socket, nic.pfs[0].attach)
}

/// A control-path load (`wake`): as `cpu_load`, with the bytes it moves across the
/// interconnect — a miss on a line homed on another node — entered in the ledger.
pub fn control_load(
    ms: &mut MemSys,
    ledger: &mut DmaLedger,
    at: Time,
    socket: u32,
    node: u32,
    buf: u64,
    bytes: u64,
) -> Time {
    if socket != node && !ms.cached(socket, buf) {
        ledger.control_cross += lines(bytes) * ms.uncore().route(node, socket).len() as u64;
    }
    cpu_load(ms, at, socket, node, buf, bytes)
}

/// A core on `socket` loads a small dependent item (a descriptor, a message).
pub fn cpu_load(ms: &mut MemSys, at: Time, socket: u32, node: u32, buf: u64, bytes: u64) -> Time {
    ms.cpu_read(at, socket, node, buf, bytes, true)
}

/// A core on `socket` copies `bytes` from `src` (on `src_node`) to `dst` (on
/// `dst_node`): what it waits for memory beyond `copy_line_cycles` per line.
#[allow(clippy::too_many_arguments)]
pub fn cpu_copy(
    ms: &mut MemSys,
    at: Time,
    socket: u32,
    src_node: u32,
    src: u64,
    dst_node: u32,
    dst: u64,
    bytes: u64,
) -> Time {
    let read = ms.cpu_read(at, socket, src_node, src, bytes, false);
    read + cpu_store(ms, at + read, socket, dst_node, dst, bytes)
}

/// Bytes on each interconnect link and direction since the last reset, by the
/// platform's vertex names (`ioh0→pkg0`), the hub–hub link included.
pub fn link_bytes(ms: &MemSys) -> BTreeMap<String, u64> {
    ms.link_counters()
        .into_iter()
        .map(|c| (c.name, c.bytes))
        .collect()
}

/// All interconnect bytes since the last reset.
pub fn interconnect_total(ms: &MemSys) -> u64 {
    link_bytes(ms).values().sum()
}

/// What PCM sees of a host's QPI data traffic: of the bytes each package's QPI ports
/// carried in and out (to its I/O hub and to the other processor; the hub–hub link has
/// no processor port and is invisible), the share on processor–processor ports. Summed
/// over packages as PCM's per-socket counters are, so a byte on the processor link is
/// seen by both ends. `None` without traffic.
pub fn qpi0_share(ms: &MemSys) -> Option<f64> {
    let (mut proc, mut all) = (0u64, 0u64);
    for p in ms.pcm_ports() {
        let b = p.incoming + p.outgoing;
        all += b;
        if !p.peer_is_ioh {
            proc += b;
        }
    }
    (all > 0).then(|| proc as f64 / all as f64)
}

/// The interconnect's bandwidth per direction (GB/s) and one crossing's latency: what
/// the spill policy's estimate charges a request that leaves its node.
pub fn interconnect(ms: &MemSys) -> (f64, Time) {
    let p = ms.params();
    (p.interconnect_gbps, p.interconnect_latency)
}
