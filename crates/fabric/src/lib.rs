//! nudma's fabric layer: the hardware description (scenario files and their checker), PCIe
//! enumeration, exact address routing through switches, root complexes, IOMMUs and
//! non-transparent bridges, finite NTB/IOMMU tables, and sparse byte stores so that DMA
//! moves real bytes. There is no time here: the timing layer reads the paths this crate
//! returns.

pub mod basis;
pub mod builtin;
pub mod catalog;
pub mod describe;
pub mod endpoint;
pub mod error;
pub mod faults;
pub mod ids;
pub mod keypath;
pub mod raw;
pub mod scenario;
pub mod topology;
pub mod units;

pub use error::{FabricError, ScenarioError};
pub use topology::*;
pub mod fabric;
pub mod iommu;
pub mod memory;
pub mod multicast;
pub mod ntb;
pub mod page_table;
pub mod path;

pub use endpoint::Endpoint;
pub use fabric::Fabric;
pub use fabric::Msi;
pub use multicast::{GroupId, McGroup, McMember, McRoutes};
pub use path::{
    msi_apic, Access, Fault, FaultKind, Path, Request, Requester, Step, Target, MSI_WINDOW,
};
