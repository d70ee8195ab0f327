//! The host network stack on a CPU core, packet-granular: a core is a FIFO
//! server of work in cycles at the platform clock; per-packet costs come from the
//! platform's `[platform.X.netstack]` table and every cache line the stack touches is
//! priced by `sim::memsys` where it really is. `stream` runs netperf TCP_STREAM between
//! two hosts' NICs over an Ethernet wire (`multicore`: one per core, all cores), `rr`
//! netperf TCP_RR, `pktgen` the in-kernel packet generator, `migration` a stream whose
//! receiving thread the scheduler moves to another socket, `memcached` a memcached
//! server under memslap clients.

pub mod memcached;
pub mod migration;
pub mod multicore;
pub mod pktgen;
pub mod round_trip;
pub mod rr;
mod rxq;
pub mod stream;
pub mod udp;
pub mod world;

use std::sync::Arc;

use fabric::{DeviceId, HostId, NetStackCosts, Platform, Topology};
use sim::memsys::{Fifo, MemSys, MemSysParams, Snoop, Uncore};
use sim::Time;

use devices::nic::{Coalescing, HostBuf, Nic};

fn ns(x: f64) -> Time {
    Time::from_ps((x * 1000.0).round() as u64)
}

/// One core running the stack (and its process): busy from a task's start until its
/// work is done.
#[derive(Clone, Debug)]
pub struct Core {
    pub socket: u32,
    ps_per_cycle: f64,
    busy_until: Time,
    /// Work done since the last reset.
    pub busy: Time,
}

impl Core {
    pub fn new(socket: u32, clock_ghz: f64) -> Core {
        Core {
            socket,
            ps_per_cycle: 1000.0 / clock_ghz,
            busy_until: Time::ZERO,
            busy: Time::ZERO,
        }
    }

    /// `c` cycles of work.
    pub fn cycles(&self, c: u64) -> Time {
        Time::from_ps((c as f64 * self.ps_per_cycle).round() as u64)
    }

    /// When a task ready at `at` starts.
    pub fn start(&self, at: Time) -> Time {
        self.busy_until.max(at)
    }

    /// A task ran from `start` to `end`.
    pub fn finish(&mut self, start: Time, end: Time) {
        self.busy += end - start;
        self.busy_until = end;
    }

    pub fn busy_until(&self) -> Time {
        self.busy_until
    }

    /// Counts work afresh from `t`, the window's start: a task under way then counts
    /// from `t` on (its whole span was counted when it started). Without this a poll
    /// that straddles the start vanished from the window: under memory contention a
    /// NAPI poll runs for hundreds of µs.
    pub fn restart(&mut self, t: Time) {
        self.busy = self.busy_until.max(t) - t;
    }
}

/// One host's side of a network workload: its memory system, its NIC, the PF it uses,
/// the core the workload and its interrupts run on, the node of its rings and buffers.
#[derive(Clone, Debug)]
pub struct NetHost {
    /// Which host and NIC this is a view of (models that share them share a `world`).
    pub host: HostId,
    pub device: DeviceId,
    /// Boxed, so that a `world` lends it by swapping a pointer.
    pub mem: Box<MemSys>,
    pub nic: Box<Nic>,
    /// PF the workload's queue is on (receive and transmit).
    pub pf: usize,
    pub core: Core,
    /// NUMA node of the rings, packet buffers and the process's memory.
    pub node: u32,
    /// Shared: a model's event handlers copy the handle, not the costs' provenance.
    pub costs: Arc<NetStackCosts>,
    /// The NIC coalesces a burst's in-order frames into one receive (hardware LRO): one
    /// completion and one pass through the stack per burst of up to 64 KiB.
    pub lro: bool,
    /// The driver's interrupt moderation of this host's receive queues (`ethtool -C`):
    /// static with the NIC model's values unless a workload sets it.
    pub coalescing: Coalescing,
}

/// Buffer identities in a host's memory system: each ring slot, completion entry and
/// socket buffer is its own buffer.
pub(crate) mod buf {
    pub const RX_DATA: u64 = 1 << 40;
    pub const RX_CQE: u64 = 2 << 40;
    pub const TX_DESC: u64 = 3 << 40;
    pub const TX_CQE: u64 = 4 << 40;
    pub const SKB: u64 = 5 << 40;
    pub const USER: u64 = 6 << 40;
}

/// Descriptor rings of 1,024 entries (assumption: mlx5's default ring size).
pub const RING: u64 = 1024;
/// Completion entries are 64 B (ConnectX CQE).
pub const CQE_BYTES: u64 = 64;
/// Transmit descriptors (a WQE with its inline header) are 64 B.
pub const DESC_BYTES: u64 = 64;
/// Largest TSO send (the kernel's GSO limit).
pub const TSO_BYTES: u64 = 65536;

/// `h` rings its NIC at `doorbell` for a send on its PF whose descriptor is `desc` and
/// whose payload is `bytes` of buffer `data`, both on its node: when the payload is in
/// the NIC (`devices::nic::Nic::fetch_send`).
pub(crate) fn fetch_send(
    h: &mut NetHost,
    doorbell: Time,
    desc: u64,
    data: u64,
    bytes: u64,
) -> Time {
    let node = h.node;
    let at = |buf, bytes| HostBuf { node, buf, bytes };
    let payload = [(h.pf, at(data, bytes))];
    h.nic
        .fetch_send(doorbell, &mut h.mem, h.pf, at(desc, DESC_BYTES), &payload)
}

/// The memory system of `platform` (its LLC, DDIO share and DRAM from its timing table)
/// over its uncore graph — packages, I/O hubs and every interconnect link
/// (`sim::memsys::Uncore::of_platform`) — its cores keeping `line_fill_buffers` misses in
/// flight.
pub fn mem_sys(platform: &Platform, line_fill_buffers: u32) -> Result<MemSys, String> {
    let t = platform
        .timing
        .as_ref()
        .ok_or_else(|| format!("platform `{}` has no timing table", platform.name))?;
    // Every link's bandwidth together (one default link when the platform lists none).
    let links: f64 = platform
        .interconnect
        .iter()
        .map(|l| l.gbps(t.interconnect_gbps))
        .sum();
    let params = MemSysParams {
        sockets: platform.packages,
        llc_bytes: platform.llc_bytes,
        llc_ways: platform.llc_ways,
        ddio_ways: platform.ddio_ways,
        llc_latency: ns(t.llc_latency_ns),
        dram_latency: ns(t.dram_latency_ns),
        interconnect_latency: ns(t.interconnect_latency_ns),
        dram_gbps: t.dram_gbps,
        interconnect_gbps: if platform.interconnect.is_empty() {
            t.interconnect_gbps
        } else {
            links
        },
        line_fill_buffers,
        snoop: if t.home_snoop {
            Snoop::HomeDirectory
        } else {
            Snoop::Source
        },
    };
    MemSys::with_uncore(params, Uncore::of_platform(platform)?)
}

impl NetHost {
    /// Host `host` of `topo` using PF `pf` of its NIC `nic`, the workload on a core of
    /// `socket` with its memory on `node`.
    pub fn new(
        topo: &Topology,
        host: HostId,
        nic: &str,
        pf: usize,
        socket: u32,
        node: u32,
    ) -> Result<NetHost, String> {
        let platform = topo.platform_of(host);
        let hname = &topo.host(host).name;
        let costs = platform.netstack.clone().ok_or_else(|| {
            format!(
                "platform `{}` of host `{hname}` has no [platform.{}.netstack] table (network-stack costs)",
                platform.name, platform.name
            )
        })?;
        let dev = topo
            .device_by_name(host, nic)
            .ok_or_else(|| format!("host `{hname}` has no device `{nic}`"))?;
        let device = dev;
        let nic = Nic::from_topology(topo, dev)?;
        if pf >= nic.pfs.len() {
            return Err(format!(
                "device `{hname}.{}` has {} PF(s), no pf{pf}",
                topo.devices[dev.index()].name,
                nic.pfs.len()
            ));
        }
        if socket >= platform.packages || node >= platform.packages {
            return Err(format!(
                "host `{hname}` has {} sockets: no socket {socket} / node {node}",
                platform.packages
            ));
        }
        let mem = memory_system(topo, host)?;
        Ok(NetHost {
            host,
            device,
            mem: Box::new(mem),
            coalescing: Coalescing::of(&nic.params),
            nic: Box::new(nic),
            pf,
            core: Core::new(socket, platform.clock_ghz),
            node,
            costs: Arc::new(costs),
            lro: false,
        })
    }

    /// Turns DDIO off in this host's memory system: device writes go to DRAM and
    /// invalidate cached copies, as a remote device's do. Its caches start empty.
    pub fn ddio_off(&mut self) {
        *self.mem = self.mem.with_ddio_ways(0);
    }

    /// Starts a measurement window.
    pub fn reset_counters(&mut self, at: Time) {
        self.mem.reset_counters();
        self.nic.rx_buffer.reset_counters();
        self.core.restart(at);
    }
}

/// A frame that left `port` at `on_wire` and reached its receiver at `arrive` was taken
/// into the receiver's full buffer only at `admitted`: the receiver paused the port, so it
/// sends nothing more until the frame's place would have been free. When the frame, as
/// the pause has it, left the port.
pub(crate) fn pause_sender(port: &mut Fifo, on_wire: Time, arrive: Time, admitted: Time) -> Time {
    let left = admitted - (arrive - on_wire);
    if admitted > arrive {
        port.pause(on_wire, left);
    }
    left
}

/// The memory system of host `host` of `topo` (its sockets' LLCs, DDIO share, DRAM and
/// interconnect, from its platform's timing), its cores' line-fill buffers from the
/// platform's network-stack table.
pub fn memory_system(topo: &Topology, host: HostId) -> Result<MemSys, String> {
    mem_sys(topo.platform_of(host), line_fill_buffers(topo, host)?)
}

/// The line misses a core of host `host` keeps in flight (its platform's network-stack
/// table), without building its memory system.
pub fn line_fill_buffers(topo: &Topology, host: HostId) -> Result<u32, String> {
    let platform = topo.platform_of(host);
    let costs = platform.netstack.as_ref().ok_or_else(|| {
        format!(
            "platform `{}` of host `{}` has no [platform.{}.netstack] table (network-stack costs)",
            platform.name,
            topo.host(host).name,
            platform.name
        )
    })?;
    Ok(costs.line_fill_buffers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_under_way_at_the_window_start_counts_from_the_start() {
        let mut core = Core::new(0, 2.0);
        // A 500 µs poll from 100 µs; the window starts at 300 µs, in the middle of it.
        core.finish(Time::from_us(100), Time::from_us(600));
        core.restart(Time::from_us(300));
        assert_eq!(core.busy, Time::from_us(300));
        // A core idle at the window start counts nothing before its next task.
        let mut idle = Core::new(0, 2.0);
        idle.finish(Time::from_us(100), Time::from_us(200));
        idle.restart(Time::from_us(300));
        assert_eq!(idle.busy, Time::ZERO);
    }
}
