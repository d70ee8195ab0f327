//! nudma's device models: what a NIC, NVMe controller, GPU or NTB adapter does on the bus,
//! written once against the fabric's addresses and the timing layer's network.

pub mod dma;
pub mod gpu;

pub use dma::{single_access, DmaJob, DmaOutcome, DmaSpec, Op, PageRoutes};
pub use gpu::{pingpong, Counters, Gpu, GpuError};
