//! Errors of the host layer: what a driver's DMA API call can fail with.

use fabric::FabricError;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The hardware refused (a LUT ran out, no NTB path, a bad endpoint).
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The device cannot address the buffer and no IOMMU remaps it.
    #[error("{device} has a {bits}-bit DMA mask and cannot reach bus address {addr:#x} ({why})")]
    DmaMask {
        device: String,
        bits: u8,
        addr: u64,
        why: &'static str,
    },
    /// A range allocator (IOVA space of a domain, RAM of a node) has no room.
    #[error("{what} exhausted: no {len:#x} free bytes {below}")]
    Exhausted {
        what: String,
        len: u64,
        below: String,
    },
    #[error("{0}")]
    Invalid(String),
}
