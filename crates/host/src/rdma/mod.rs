//! One-sided RDMA between two hosts: each host's memory system and RNIC
//! (`devices::rnic`), registered memory regions holding real bytes, client threads
//! posting work requests by BlueFlame (the WQE written by the core straight into the
//! RNIC's doorbell page, so the RNIC fetches no WQE; a WRITE's payload it gathers by
//! DMA, `BENCH_MAX_INLINE`) and polling their completion queues, and the benchmark
//! harness the NUMA/RDMA study ran (`bench`: closed-loop latency, open-loop throughput
//! in 10 ms samples; `stats`: sum of per-connection means and the standard deviation),
//! and memcached over one-sided RDMA on top of it
//! (`memcached`: the server's worker posting too).

pub mod agents;
pub mod bench;
pub mod load;
pub mod memcached;
pub mod stats;
pub mod workers;

use fabric::{HostId, Topology};
use sim::memsys::MemSys;
use sim::Time;

use devices::rnic::Rnic;

use crate::net::{mem_sys, Core};

/// Line misses a Haswell core keeps in flight (assumption: 10 L1D line-fill buffers, as
/// Broadwell's; only CPU streams use it here), where the platform has no network-stack
/// table to say.
pub const LINE_FILL_BUFFERS: u32 = 10;

/// The line-fill buffers of host `h`'s cores: the platform's (its network-stack table,
/// as the TCP models read it, so a host's memory system is the same under every model)
/// or `LINE_FILL_BUFFERS`.
fn line_fill_buffers(topo: &Topology, h: HostId) -> u32 {
    let platform = topo.platform_of(h);
    platform
        .netstack
        .as_ref()
        .map_or(LINE_FILL_BUFFERS, |n| n.line_fill_buffers)
}

/// Cycles of `ibv_post_send` building one WQE in the send queue (assumption: libmlx4's
/// post path for one work request — lock, ownership bits, a 64-byte WQE, the BlueFlame
/// copy loop — is ≈ 150 cycles; docs/hardware.md §4 gives no figure).
pub const POST_CYCLES: u64 = 150;
/// Cycles of `ibv_poll_cq` taking one completion once its CQE is read (assumption:
/// ownership check, parsing, consumer-index update ≈ 100 cycles).
pub const POLL_CYCLES: u64 = 100;
/// Bytes of a completion entry (ConnectX CQE, 64 B with the default `cqe_size`).
pub const CQE_BYTES: u64 = 64;
/// Largest payload the benchmark's WQEs carry inline: none. The study's benchmark (sss-lehigh/nurdma,
/// `src/rc_bench/rc_resources.cpp`) posts every WRITE with one scatter entry and never
/// sets `IBV_SEND_INLINE`, so the RNIC gathers even an 8 B payload by a DMA read. The
/// WQE itself still arrives by BlueFlame: MLNX_OFED's libmlx4 sends a lone work request
/// through the BlueFlame page unless `MLX4_POST_SEND_PREFER_BF=0` (`prefer_bf` defaults
/// to 1), while the upstream library would ring the doorbell and let the RNIC fetch a
/// non-inline WQE by DMA. The published WRITE rates from 8 to 64 B (6.062, 5.988, 5.917,
/// 5.776 Mops, docs/hardware.md §4) fall as a gathered payload's PCIe completion grows.
/// An application that inlines its small WRITEs says so with `bench::Rdma::set_max_inline`.
pub const BENCH_MAX_INLINE: u64 = 0;

/// A registered memory region: its node, its bytes, its key (R_Key/L_Key and MTT
/// index) and its identity in the memory system, one buffer per `slot` bytes (the
/// memory system prices buffers; connections use disjoint slots).
#[derive(Clone, Debug)]
pub struct Region {
    pub key: u32,
    pub node: u32,
    pub buf: u64,
    pub slot: u64,
    pub bytes: Vec<u8>,
}

impl Region {
    /// The memory system's buffer holding `offset`.
    pub fn buf_at(&self, offset: u64) -> u64 {
        self.buf + offset / self.slot
    }

    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// One host's side: its memory system, its RNIC, its hardware threads (one `Core` each,
/// by node) and the clock.
#[derive(Clone, Debug)]
pub struct RdmaHost {
    pub name: String,
    /// Boxed, so a world that shares the host with other models lends its own by a swap.
    pub mem: Box<MemSys>,
    pub rnic: Rnic,
    /// Hardware threads per node.
    pub threads_per_node: u32,
    /// Cores per node (each with its own line-fill buffers).
    pub cores_per_node: u32,
    pub clock_ghz: f64,
    pub cpu_mmio_write: Time,
    /// Added to every buffer this host's model tracks in the memory system, so that
    /// models sharing a world's memory keep theirs apart (`NetWorld::start_model`).
    pub ns: u64,
}

fn ns(x: f64) -> Time {
    Time::from_ps((x * 1000.0).round() as u64)
}

impl RdmaHost {
    /// Host `name` of `topo` with its RNIC `rnic`.
    pub fn new(topo: &Topology, name: &str, rnic: &str) -> Result<RdmaHost, String> {
        let h: HostId = topo
            .host_by_name(name)
            .ok_or_else(|| format!("no host `{name}`"))?;
        let dev = topo.device_by_name(h, rnic).ok_or_else(|| {
            let rnics: Vec<String> = topo
                .host(h)
                .devices
                .iter()
                .map(|&d| &topo.devices[d.index()])
                .filter(|d| matches!(d.kind, fabric::raw::DeviceKind::Rnic))
                .map(|d| format!("`{}`", d.name))
                .collect();
            format!(
                "host `{name}` has no device `{rnic}` (its RNICs: {})",
                if rnics.is_empty() {
                    "none".to_string()
                } else {
                    rnics.join(", ")
                }
            )
        })?;
        if !matches!(
            topo.devices[dev.index()].kind,
            fabric::raw::DeviceKind::Rnic
        ) {
            return Err(format!("device `{name}.{rnic}` is not an RNIC"));
        }
        let platform = topo.platform_of(h);
        let t = platform
            .timing
            .as_ref()
            .ok_or_else(|| format!("platform `{}` has no timing table", platform.name))?;
        Ok(RdmaHost {
            name: name.to_string(),
            mem: Box::new(mem_sys(platform, line_fill_buffers(topo, h))?),
            rnic: Rnic::from_topology(topo, dev)?,
            threads_per_node: platform.cores_per_package * platform.threads_per_core,
            cores_per_node: platform.cores_per_package,
            clock_ghz: platform.clock_ghz,
            cpu_mmio_write: ns(t.cpu_mmio_write_ns),
            ns: 0,
        })
    }

    /// The RNIC's node.
    pub fn rnic_node(&self) -> u32 {
        self.rnic.socket()
    }

    /// The node `away` from the RNIC's (the other socket), or the RNIC's own.
    pub fn node(&self, remote: bool) -> u32 {
        let n = self.mem.params().sockets;
        if remote {
            (self.rnic_node() + 1) % n
        } else {
            self.rnic_node()
        }
    }

    /// Registers a region of `len` bytes on `node` in buffers of `slot` bytes, its bytes
    /// filled by `fill`, written by a thread of that node (so its lines start in that
    /// socket's LLC).
    pub fn register(
        &mut self,
        key: u32,
        node: u32,
        len: u64,
        slot: u64,
        fill: impl Fn(u64) -> u8,
    ) -> Result<Region, String> {
        let sockets = self.mem.params().sockets;
        if node >= sockets {
            return Err(format!(
                "host `{}` has {sockets} nodes: no node {node} for a region",
                self.name
            ));
        }
        let r = Region {
            key,
            node,
            buf: self.ns + ((0x60 + key as u64) << 40),
            slot: slot.max(1),
            bytes: (0..len).map(fill).collect(),
        };
        for i in 0..len.div_ceil(r.slot) {
            self.mem.cpu_write(Time::ZERO, node, r.buf + i, r.slot);
        }
        Ok(r)
    }

    /// A hardware thread of `node`: thread `i` of the node, round robin.
    pub fn core(&self, node: u32) -> Core {
        Core::new(node, self.clock_ghz)
    }

    pub fn reset_counters(&mut self) {
        self.mem.reset_counters();
        self.rnic.reset_counters();
    }
}
