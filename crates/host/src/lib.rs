//! nudma's host layer: what the OS of each host does for drivers. A Linux-like DMA API
//! (`dma_map_single`, `dma_map_sg`, `dma_alloc_coherent`, DMA masks) over an IOMMU driver
//! per host (a domain per requester ID, an IOVA allocator per domain, identity or
//! translated policy) and an NTB driver per adapter — the one place that programs
//! address-LUT windows and requester-ID entries on a driver's behalf — plus per-core
//! placement (which NUMA node a CPU is on). `remote` gives systems that build their own
//! cross-host DMA paths (Device Lending) reserved IOVA ranges, pages mapped at chosen
//! IOVAs, and NTB windows and requester entries as handles. Mapping state lives here, kept with the
//! fabric it programs (`Hosts::with`). Every change goes through the fabric's mutators,
//! which bump its routing epoch, so timed routes that depended on it are dropped.
//! `net` is the host network stack on a CPU core, run on `sim`'s engine with
//! `devices::nic` and `sim::memsys` (packet-granular, for the IOctopus study); `victim` a
//! memory-bound PageRank-like workload priced on the same memory system. `rdma` is
//! one-sided RDMA between two hosts with `devices::rnic` on the same memory system: client
//! threads, registered regions, and the NUMA/RDMA study's benchmark harness.
//! Mapping needs no time; no experiments here.

pub mod alloc;
pub mod dma;
pub mod error;
pub mod iommu;
pub mod multicast;
pub mod net;
pub mod ntb;
pub mod placement;
pub mod rdma;
pub mod remote;
pub mod victim;

pub use dma::{
    Coherent, DmaAddr, DmaDirection, DmaMapping, Hosts, MappingId, NumaNode, PhysAddr, SgMapping,
};
pub use error::HostError;
pub use iommu::{IommuDriver, IommuPolicy, DEFAULT_IOVA_RANGE};
pub use multicast::McHandle;
pub use ntb::NtbDriver;
pub use placement::{Cpu, Placement};
pub use remote::{ntb_pair, IovaRange, NtbWindow, RequesterEntry};
