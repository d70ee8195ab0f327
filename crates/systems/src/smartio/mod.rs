//! SmartIO (Markussen's thesis, Papers I–V; docs/hardware.md §2 and §6): a cluster-wide device
//! pool, Device Lending on bare metal (shadow devices, DMA windows, MSI redirection),
//! peer-to-peer between borrowed devices, and the device-oriented API of SISCI SmartIO.
//!
//! # Design
//!
//! ```text
//! Cluster ─┬─ Pool            fdid → PoolDevice { host, function, name, Availability, Lease }
//!          ├─ Agent per host  peer table (where each borrowed device lives, its NTB way)
//!          ├─ Borrow per id   lender/borrower adapters, requester entry, shadow BARs,
//!          │                  DmaPath (Window | PerMapping), MSI vectors, mappings
//!          └─ ControlStats    control messages by kind (zero per I/O)
//! ```
//!
//! * `pool`: fdids in (host, device, function) order; `Lease` is `Free`, `Exclusive(id)`
//!   or `Shared(ids)` (`SCI_FLAG_EXCLUSIVE`: exclusive refused while shared borrowers
//!   exist and the reverse; shared borrows counted).
//! * `agent`: the control messages (`ControlKind`) and their counts; a borrower's table
//!   of where its devices live.
//! * `lending`: `Cluster` — borrow (request, grant: the lender adds a requester-ID entry
//!   for the device on its adapter and masks INTx; the borrower maps each BAR through
//!   its adapter as a shadow BAR and, with an IOMMU, reserves one DMA window — a
//!   contiguous IOVA range of the device's proxied requester ID, reached through one
//!   set of lender address-LUT windows), `map_for_device` (IOVA inside the window and
//!   borrower IOMMU pages: no message, no NTB change; without a borrower IOMMU, one
//!   lender window per mapping, set up by the lender's agent with a counted message),
//!   forwarded configuration accesses, MSI set-up through a lender window toward the
//!   borrower's interrupt range, return with a Function Level Reset, reclaim when a
//!   host vanishes. A lender IOMMU, when the lender has one, gives the device its own
//!   domain there, mapping a range below the device's DMA mask onto the NTB BAR.
//! * `p2p`: `map_device_for_device` for a peer local to the borrower, in the same lender
//!   or in another lender.
//! * `mdev`: a lent device passed through to a VM (Paper III) — guest memory with x86's
//!   low/high split on scattered host pages, borrow at the guest's reset, guest memory
//!   probed and mapped at Bus Master Enable through two DMA windows with the lender IOMMU
//!   mirroring guest-physical addresses, MSI and INTx relayed into the VM, return at
//!   shutdown, cold migration.
//! * `api`: the SISCI-shaped calls (segments with access hints, mapping for a device or
//!   a CPU, requester registration), with the SISCI name of each.
//!
//! All hardware state is programmed through the host layer (`host::Hosts`), which stays
//! its only owner; this layer holds the handles it got back and returns them.

pub mod agent;
pub mod api;
pub mod failover;
pub mod lending;
pub mod mdev;
pub mod multicast;
pub mod nvme_bench;
pub mod nvme_dist;
pub mod p2p;
pub mod pool;

pub use agent::{Agent, ControlKind, ControlStats, PeerEntry};
pub use api::{
    AccessHints, CpuMapping, DeviceInfo, MulticastGroup, MulticastMapping, Near,
    RegisteredRequester, Segment, SegmentId, SegmentKind, SegmentMapping,
};
pub use lending::{
    BorrowOptions, Borrowed, Cluster, DeviceMapping, DmaWindowInfo, MsiRoute, ShadowBar,
    CMD_INTX_DISABLE, DEFAULT_DMA_WINDOW, DEVCTL_FLR, PCIE_DEVCTL,
};
pub use mdev::{
    guest_layout, setup_guest_dma, GuestExtent, HostPage, Hypervisor, MdevDmaSetup, MdevError,
    MdevId, MdevStats, MdevWindow, Vm, VmConfig, VmId, VmInterrupt, CMD_BUS_MASTER, CMD_MEMORY,
    HIGH_MEM_BASE, LOW_MEM_TOP,
};
pub use p2p::{P2pCase, P2pMapping, PeerTarget};
pub use pool::{Availability, BorrowId, Fdid, Lease, Pool, PoolDevice};

use host::HostError;

/// What a SmartIO call can fail with. Devices are named by fdid and name, hosts by name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LendError {
    #[error("unknown fabric device ID {} (the pool has fdids 0..{known})", fdid.0)]
    UnknownFdid { fdid: Fdid, known: u32 },
    #[error("no device `{0}` in the pool")]
    UnknownName(String),
    #[error("host `{host}` cannot borrow {dev}: its host does not lend it")]
    NotLent { dev: String, host: String },
    #[error("host `{host}` cannot borrow {dev}: the device is gone (its lender vanished)")]
    Gone { dev: String, host: String },
    #[error("host `{host}` cannot borrow {dev}: it is borrowed exclusively by host `{holder}`")]
    ExclusiveHeld {
        dev: String,
        host: String,
        holder: String,
    },
    #[error("host `{host}` cannot borrow {dev} exclusively: {count} shared borrow(s) hold it")]
    SharedHeld {
        dev: String,
        host: String,
        count: usize,
    },
    #[error("host `{host}` does not hold {dev} (borrow {}): it was returned, reclaimed or never borrowed", id.0)]
    NotHeld {
        dev: String,
        host: String,
        id: BorrowId,
    },
    #[error("cannot lend {dev} to host `{host}`: the requester-ID LUT of {ntb} is full: {used} of {capacity} entries in use, {reserved} reserved for CPUs")]
    RequesterLutFull {
        dev: String,
        host: String,
        ntb: String,
        used: usize,
        capacity: usize,
        reserved: usize,
    },
    #[error("{dev}: the address LUT of {ntb} is full: all {capacity} windows in use")]
    AddressLutFull {
        dev: String,
        ntb: String,
        capacity: usize,
    },
    #[error("host `{0}` has vanished")]
    HostVanished(String),
    #[error("no NTB path between hosts `{from}` and `{to}`")]
    NoPath { from: String, to: String },
    #[error("{dev}: a configuration access faulted ({why})")]
    ConfigFault { dev: String, why: String },
    #[error("{dev}: {source}")]
    Host {
        dev: String,
        #[source]
        source: HostError,
    },
    #[error("{0}")]
    Invalid(String),
}
