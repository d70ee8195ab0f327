//! Device drivers written once against "the device as this host sees it"
//! (`access::DeviceAccess`), so the same driver code runs on a local device, a device
//! borrowed through SmartIO Device Lending and (later) one passed to a VM through MDEV
//! (ARCHITECTURE.md, `crates/systems`). Only the `DeviceAccess` implementation differs.
//!
//! # Why here and not in `smartio/`
//!
//! The driver is not SmartIO's: it knows nothing of lending, NTBs or DMA windows, and the
//! local implementation uses only the host layer. SmartIO is one implementation of the
//! trait (`access::Borrowed`), built on `smartio::Cluster`'s public calls; MDEV will be
//! another. `systems` is the lowest layer that may see both the host layer's DMA API and
//! SmartIO, and may use `devices` and `sim` (the driver is a simulation component).
//!
//! * `access`: the `DeviceAccess` trait and its local and borrowed implementations.
//! * `nvme_blk`: a kernel-style NVMe block driver (probe, one I/O queue pair per CPU,
//!   map the buffer before each I/O and unmap it after) and the QD1 latency measurement
//!   of `smartio.nvme_latency` (`nvme_qd1_latency`).
//! * `fio`: fio's asynchronous direct I/O (threads × iodepth) through the block driver's
//!   per-CPU queue pairs, for `nudma run`'s `fio` workload and `ioctopus.nvme_upi`.

pub mod access;
pub mod fio;
pub mod nvme_blk;
pub mod vm_access;

pub use access::{AccessError, Borrowed, CoherentBuf, DevMapping, DeviceAccess, Local, MsiMessage};
pub use nvme_blk::{
    block_bytes, nvme_qd1_latency, BlkConfig, BlkError, BlkLog, BlkRequest, LatencyResult, NvmeBlk,
};
