//! The RDMA study's testbed (docs/hardware.md §4, built-in scenario `rdma_haswell`) for the
//! RDMA tests: its topology and the client and server hosts with their RNICs.

use fabric::{builtin, Fabric, Topology};
use host::rdma::RdmaHost;

pub fn topo() -> Topology {
    let s = builtin::load_builtin("rdma_haswell").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

pub fn hosts(t: &Topology) -> (RdmaHost, RdmaHost) {
    (
        RdmaHost::new(t, "client", "rnic").unwrap(),
        RdmaHost::new(t, "server", "rnic").unwrap(),
    )
}
