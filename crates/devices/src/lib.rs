//! nudma's device models: what a NIC, RNIC, NVMe controller, GPU or NTB adapter does on the bus,
//! written once against the fabric's addresses and the timing layer's network.

pub mod dma;
pub mod gpu;
pub mod nic;
pub mod nvme;
pub mod pciebench;
pub mod pingpong;
pub mod rnic;

pub use dma::{
    pattern_byte, single_access, timed_read, timed_write, DmaJob, DmaOutcome, DmaSpec, DmaStats,
    Op, Ops, PageRoutes, Payload,
};
pub use gpu::{pingpong, Counters, Gpu, GpuError};
pub use nvme::{NvmeController, NvmeDriver, NvmeParams, NvmeStats, QueuePair};
pub use pingpong::PingPong;
