//! Typed ids of a topology's parts: each indexes its own vector of `Topology` or
//! `Fabric`, so a host id can no longer be passed where a PCIe node id is meant.

use std::fmt;

/// Declares a `u32` id newtype. Display, Debug and serde all give the bare number, so
/// every message, report, JSON output and `{:?}` of a fault reads as it did when the ids
/// were plain `u32`s.
macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// Its position in the vector it indexes.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
            /// The id of position `i` of the vector it indexes.
            #[inline]
            pub const fn from_index(i: usize) -> Self {
                Self(i as u32)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

id!(
    /// A host of the topology (`Topology::hosts`).
    HostId
);
id!(
    /// A vertex of a host's PCIe tree (`Topology::nodes`): a root complex, a switch, a
    /// function or an NTB adapter's function. Not a NUMA node.
    PcieNodeId
);
id!(
    /// An NTB adapter (`Topology::ntbs`).
    NtbId
);
id!(
    /// A cluster switch between NTB adapters (`Topology::cluster_switches`).
    ClusterSwitchId
);
id!(
    /// An NTB cable (`Topology::cables`).
    CableId
);
id!(
    /// A device, one or several PCI functions (`Topology::devices`).
    DeviceId
);
id!(
    /// A multicast group of the fabric.
    GroupId
);
id!(
    /// An IOMMU domain of one host.
    DomainId
);
